"""A spatial transformer network (Jaderberg et al., 2015), written as PyTorch's tutorial
intermediate_source/spatial_transformer_tutorial.py is: a localization network regresses a 2x3 affine matrix
(its last layer starts at the identity), F.affine_grid and F.grid_sample warp the input, and a small CNN
classifies the warped image; SGD, F.nll_loss (the test sums with the legacy size_average=False).
Changed: seven-segment digits drawn here (24x24 on MNIST's 28x28 canvas, randomly shifted) instead of
torchvision's MNIST download; epochs from the command line; torchvision's make_grid/matplotlib
visualisation replaced by printing the warp of a test batch.

Written for PyTorch; the tests run it unmodified with `python -m fnx run`.
Usage: spatial_transformer.py [--epochs N]
"""
from __future__ import print_function

import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser(description='Spatial transformer networks tutorial')
parser.add_argument('--epochs', type=int, default=3)
args = parser.parse_args()

torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


SEGMENTS = ["abcdef", "bc", "abdeg", "abcdg", "bcfg", "acdfg", "acdefg", "abc", "abcdefg", "abcdfg"]


def seven_segment(digit, thickness):
    """A digit as a seven-segment display draws it, on a 24x24 canvas with bars of the given thickness."""
    image = np.zeros((24, 24), np.float32)
    bars = {"a": (slice(2, 2 + thickness), slice(6, 18)), "d": (slice(22 - thickness, 22), slice(6, 18)),
            "g": (slice(12 - thickness // 2, 12 + (thickness + 1) // 2), slice(6, 18)),
            "f": (slice(2, 12), slice(6, 6 + thickness)), "b": (slice(2, 12), slice(18 - thickness, 18)),
            "e": (slice(12, 22), slice(6, 6 + thickness)), "c": (slice(12, 22), slice(18 - thickness, 18))}
    for segment in SEGMENTS[digit]:
        image[bars[segment]] = 1.0
    return image


def digits(train):
    """Seven-segment digits at MNIST's size and normalisation, each shifted by up to 4 pixels (a task for the STN)."""
    rng = np.random.RandomState(0 if train else 1)
    n = 1440 if train else 360
    labels = rng.randint(0, 10, size=n)
    canvas = np.zeros((n, 1, 28, 28), np.float32)
    for i, (dy, dx) in enumerate(rng.randint(0, 5, size=(n, 2))):
        canvas[i, 0, dy:dy + 24, dx:dx + 24] = seven_segment(labels[i], rng.randint(2, 4))
    canvas = (canvas - 0.1307) / 0.3081
    return TensorDataset(torch.from_numpy(canvas), torch.from_numpy(labels).long())


train_loader = DataLoader(digits(train=True), batch_size=64, shuffle=True, num_workers=0)
test_loader = DataLoader(digits(train=False), batch_size=64, shuffle=True, num_workers=0)


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

        # Spatial transformer localization-network
        self.localization = nn.Sequential(
            nn.Conv2d(1, 8, kernel_size=7),
            nn.MaxPool2d(2, stride=2),
            nn.ReLU(True),
            nn.Conv2d(8, 10, kernel_size=5),
            nn.MaxPool2d(2, stride=2),
            nn.ReLU(True)
        )

        # Regressor for the 3 * 2 affine matrix
        self.fc_loc = nn.Sequential(
            nn.Linear(10 * 3 * 3, 32),
            nn.ReLU(True),
            nn.Linear(32, 3 * 2)
        )

        # Initialize the weights/bias with identity transformation
        self.fc_loc[2].weight.data.zero_()
        self.fc_loc[2].bias.data.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))

    # Spatial transformer network forward function
    def stn(self, x):
        xs = self.localization(x)
        xs = xs.view(-1, 10 * 3 * 3)
        theta = self.fc_loc(xs)
        theta = theta.view(-1, 2, 3)

        grid = F.affine_grid(theta, x.size())
        x = F.grid_sample(x, grid)

        return x

    def forward(self, x):
        # transform the input
        x = self.stn(x)

        # Perform the usual forward pass
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


model = Net().to(device)
optimizer = optim.SGD(model.parameters(), lr=0.01)


def train(epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)

        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % 10 == 0:
            print('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
                epoch, batch_idx * len(data), len(train_loader.dataset),
                100. * batch_idx / len(train_loader), loss.item()))


def test():
    with torch.no_grad():
        model.eval()
        test_loss = 0
        correct = 0
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)

            # sum up batch loss
            test_loss += F.nll_loss(output, target, size_average=False).item()
            # get the index of the max log-probability
            pred = output.max(1, keepdim=True)[1]
            correct += pred.eq(target.view_as(pred)).sum().item()

        test_loss /= len(test_loader.dataset)
        print('\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)\n'
              .format(test_loss, correct, len(test_loader.dataset),
                      100. * correct / len(test_loader.dataset)))


def visualize_stn():
    """The tutorial shows input and warped batches side by side; here their shapes and how far the warp moved."""
    with torch.no_grad():
        data = next(iter(test_loader))[0].to(device)
        input_tensor = data.cpu()
        transformed_input_tensor = model.stn(data).cpu()
        print('warped batch: {} mean change {:.3f}'.format(
            list(transformed_input_tensor.shape), (transformed_input_tensor - input_tensor).abs().mean().item()))


for epoch in range(1, args.epochs + 1):
    train(epoch)
    test()

visualize_stn()
