"""locuslab/TCN's temporal convolutional network (TCN/tcn.py: Chomp1d, TemporalBlock with
torch.nn.utils.weight_norm convolutions, TemporalConvNet; TCN/mnist_pixel/model.py: TCN with a Linear on the last
time step and log_softmax) trained as TCN/mnist_pixel/pmnist_test.py trains it on sequential MNIST: the images
viewed as (N, 1, 784) sequences, F.nll_loss, Adam(lr=2e-3), and no gradient clipping (its default clip is -1).

Changed: the data is a fixed random batch of 28x28 "images" and labels instead of MNIST; the sizes are SIZES'
(the script's defaults at "small", but batch 16 instead of 64).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.autograd import Variable
from torch.nn.utils import weight_norm

SIZES = {
    "small": {"nhid": 25, "levels": 8, "ksize": 7, "dropout": 0.05, "batch": 16, "image": 28, "classes": 10},
    "tiny": {"nhid": 2, "levels": 2, "ksize": 2, "dropout": 0.05, "batch": 2, "image": 4, "classes": 10},
}


class Chomp1d(nn.Module):
    def __init__(self, chomp_size):
        super(Chomp1d, self).__init__()
        self.chomp_size = chomp_size

    def forward(self, x):
        return x[:, :, :-self.chomp_size].contiguous()


class TemporalBlock(nn.Module):
    def __init__(self, n_inputs, n_outputs, kernel_size, stride, dilation, padding, dropout=0.2):
        super(TemporalBlock, self).__init__()
        self.conv1 = weight_norm(nn.Conv1d(n_inputs, n_outputs, kernel_size,
                                           stride=stride, padding=padding, dilation=dilation))
        self.chomp1 = Chomp1d(padding)
        self.relu1 = nn.ReLU()
        self.dropout1 = nn.Dropout(dropout)

        self.conv2 = weight_norm(nn.Conv1d(n_outputs, n_outputs, kernel_size,
                                           stride=stride, padding=padding, dilation=dilation))
        self.chomp2 = Chomp1d(padding)
        self.relu2 = nn.ReLU()
        self.dropout2 = nn.Dropout(dropout)

        self.net = nn.Sequential(self.conv1, self.chomp1, self.relu1, self.dropout1,
                                 self.conv2, self.chomp2, self.relu2, self.dropout2)
        self.downsample = nn.Conv1d(n_inputs, n_outputs, 1) if n_inputs != n_outputs else None
        self.relu = nn.ReLU()
        self.init_weights()

    def init_weights(self):
        self.conv1.weight.data.normal_(0, 0.01)
        self.conv2.weight.data.normal_(0, 0.01)
        if self.downsample is not None:
            self.downsample.weight.data.normal_(0, 0.01)

    def forward(self, x):
        out = self.net(x)
        res = x if self.downsample is None else self.downsample(x)
        return self.relu(out + res)


class TemporalConvNet(nn.Module):
    def __init__(self, num_inputs, num_channels, kernel_size=2, dropout=0.2):
        super(TemporalConvNet, self).__init__()
        layers = []
        num_levels = len(num_channels)
        for i in range(num_levels):
            dilation_size = 2 ** i
            in_channels = num_inputs if i == 0 else num_channels[i-1]
            out_channels = num_channels[i]
            layers += [TemporalBlock(in_channels, out_channels, kernel_size, stride=1, dilation=dilation_size,
                                     padding=(kernel_size-1) * dilation_size, dropout=dropout)]

        self.network = nn.Sequential(*layers)

    def forward(self, x):
        return self.network(x)


class TCN(nn.Module):
    def __init__(self, input_size, output_size, num_channels, kernel_size, dropout):
        super(TCN, self).__init__()
        self.tcn = TemporalConvNet(input_size, num_channels, kernel_size=kernel_size, dropout=dropout)
        self.linear = nn.Linear(num_channels[-1], output_size)

    def forward(self, inputs):
        """Inputs have to have dimension (N, C_in, L_in)"""
        y1 = self.tcn(inputs)
        o = self.linear(y1[:, :, -1])
        return F.log_softmax(o, dim=1)


def training(size: str = "small"):
    """(model, optimizer, step): one iteration of pmnist_test.py's train() on one fixed random batch."""
    s = SIZES[size]
    torch.manual_seed(0)
    batch_data = torch.randn(s["batch"], 1, s["image"], s["image"])
    batch_target = torch.randint(0, s["classes"], (s["batch"],))
    input_channels = 1
    seq_length = int(s["image"] * s["image"] / input_channels)
    channel_sizes = [s["nhid"]] * s["levels"]
    model = TCN(input_channels, s["classes"], channel_sizes, kernel_size=s["ksize"], dropout=s["dropout"])
    optimizer = optim.Adam(model.parameters(), lr=2e-3)
    model.train()

    def step(net):
        data = batch_data.view(-1, input_channels, seq_length)
        data, target = Variable(data), Variable(batch_target)
        optimizer.zero_grad()
        output = net(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        return loss

    return model, optimizer, step
