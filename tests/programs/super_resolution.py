"""Sub-pixel convolution super-resolution (Shi et al., 2016), written as pytorch/examples' super_resolution is
(model.py's Net with nn.PixelShuffle and orthogonal init, main.py's training loop with MSE, PSNR on the test set and
`torch.save(model, path)` checkpoints, data.py/dataset.py's (low-resolution, high-resolution) pairs of the Y channel).
Changed: instead of the BSDS300 download, the images are smooth random 24x24 fields made here, and the
low-resolution input is their 3x3 block mean (torchvision's bicubic Resize is not used); the loaders use no workers.

Written for PyTorch; the tests run it unmodified with `python -m fnx run`.
Usage: super_resolution.py --upscale_factor 3 [--nEpochs N] [--batchSize N]
"""
from __future__ import print_function

import argparse
from math import log10

import numpy as np
import torch
import torch.nn as nn
import torch.nn.init as init
import torch.optim as optim
import torch.utils.data as data
from torch.utils.data import DataLoader


class Net(nn.Module):
    def __init__(self, upscale_factor):
        super(Net, self).__init__()

        self.relu = nn.ReLU()
        self.conv1 = nn.Conv2d(1, 64, (5, 5), (1, 1), (2, 2))
        self.conv2 = nn.Conv2d(64, 64, (3, 3), (1, 1), (1, 1))
        self.conv3 = nn.Conv2d(64, 32, (3, 3), (1, 1), (1, 1))
        self.conv4 = nn.Conv2d(32, upscale_factor ** 2, (3, 3), (1, 1), (1, 1))
        self.pixel_shuffle = nn.PixelShuffle(upscale_factor)

        self._initialize_weights()

    def forward(self, x):
        x = self.relu(self.conv1(x))
        x = self.relu(self.conv2(x))
        x = self.relu(self.conv3(x))
        x = self.pixel_shuffle(self.conv4(x))
        return x

    def _initialize_weights(self):
        init.orthogonal_(self.conv1.weight, init.calculate_gain('relu'))
        init.orthogonal_(self.conv2.weight, init.calculate_gain('relu'))
        init.orthogonal_(self.conv3.weight, init.calculate_gain('relu'))
        init.orthogonal_(self.conv4.weight)


class DatasetFromImages(data.Dataset):
    """(input, target) pairs: an image's block means and the image, each a 1-channel float tensor."""

    def __init__(self, images, upscale_factor):
        super(DatasetFromImages, self).__init__()
        self.images = images
        self.upscale_factor = upscale_factor

    def __getitem__(self, index):
        target = self.images[index]
        size, r = target.shape[0], self.upscale_factor
        input = target.reshape(size // r, r, size // r, r).mean(axis=(1, 3))
        return torch.from_numpy(input[None].copy()), torch.from_numpy(target[None].copy())

    def __len__(self):
        return len(self.images)


def smooth_images(n, size, rng):
    """Sums of a few random plane waves, scaled into [0, 1]: images with structure finer than the block size."""
    ys, xs = np.meshgrid(np.arange(size), np.arange(size), indexing='ij')
    images = np.zeros((n, size, size), np.float32)
    for k in range(4):
        freq = rng.uniform(0.1, 0.9, size=(n, 2, 1, 1))
        phase = rng.uniform(0, 2 * np.pi, size=(n, 1, 1))
        images += np.cos(freq[:, 0] * ys + freq[:, 1] * xs + phase).astype(np.float32)
    return (images - images.min()) / (images.max() - images.min())


def get_training_set(upscale_factor):
    return DatasetFromImages(smooth_images(128, 24, np.random.RandomState(0)), upscale_factor)


def get_test_set(upscale_factor):
    return DatasetFromImages(smooth_images(32, 24, np.random.RandomState(1)), upscale_factor)


parser = argparse.ArgumentParser(description='PyTorch Super Res Example')
parser.add_argument('--upscale_factor', type=int, required=True, help="super resolution upscale factor")
parser.add_argument('--batchSize', type=int, default=64, help='training batch size')
parser.add_argument('--testBatchSize', type=int, default=10, help='testing batch size')
parser.add_argument('--nEpochs', type=int, default=2, help='number of epochs to train for')
parser.add_argument('--lr', type=float, default=0.01, help='Learning Rate. Default=0.01')
parser.add_argument('--device', type=str, default='cpu', help='backend device')
parser.add_argument('--seed', type=int, default=123, help='random seed to use. Default=123')
opt = parser.parse_args()

print(opt)

torch.manual_seed(opt.seed)
device = torch.device(opt.device)

print('===> Loading datasets')
train_set = get_training_set(opt.upscale_factor)
test_set = get_test_set(opt.upscale_factor)
training_data_loader = DataLoader(dataset=train_set, num_workers=0, batch_size=opt.batchSize, shuffle=True)
testing_data_loader = DataLoader(dataset=test_set, num_workers=0, batch_size=opt.testBatchSize, shuffle=False)

print('===> Building model')
model = Net(upscale_factor=opt.upscale_factor).to(device)
criterion = nn.MSELoss()

optimizer = optim.Adam(model.parameters(), lr=opt.lr)


def train(epoch):
    epoch_loss = 0
    for iteration, batch in enumerate(training_data_loader, 1):
        input, target = batch[0].to(device), batch[1].to(device)

        optimizer.zero_grad()
        loss = criterion(model(input), target)
        epoch_loss += loss.item()
        loss.backward()
        optimizer.step()

        print("===> Epoch[{}]({}/{}): Loss: {:.4f}".format(epoch, iteration, len(training_data_loader), loss.item()))

    print("===> Epoch {} Complete: Avg. Loss: {:.4f}".format(epoch, epoch_loss / len(training_data_loader)))


def test():
    avg_psnr = 0
    with torch.no_grad():
        for batch in testing_data_loader:
            input, target = batch[0].to(device), batch[1].to(device)

            prediction = model(input)
            mse = criterion(prediction, target)
            psnr = 10 * log10(1 / mse.item())
            avg_psnr += psnr
    print("===> Avg. PSNR: {:.4f} dB".format(avg_psnr / len(testing_data_loader)))


def checkpoint(epoch):
    model_out_path = "model_epoch_{}.pth".format(epoch)
    torch.save(model, model_out_path)
    print("Checkpoint saved to {}".format(model_out_path))


test()
for epoch in range(1, opt.nEpochs + 1):
    train(epoch)
    test()
    checkpoint(epoch)
