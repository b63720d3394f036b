"""kuangliu/pytorch-cifar's ResNet-18 (models/resnet.py) trained as its main.py trains it: CrossEntropyLoss and
SGD(lr=0.1, momentum=0.9, weight_decay=5e-4).

Changed: the data is a fixed random batch instead of CIFAR-10, and the width (64 in the original: channels
64/128/256/512) is a parameter, 16 at "small".
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

from benchmarks.programs import image_classifier_training

SIZES = {
    "small": {"width": 16, "batch": 32, "image": 32, "classes": 10},
    "tiny": {"width": 4, "batch": 2, "image": 32, "classes": 10},
}


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes, planes, stride=1):
        super(BasicBlock, self).__init__()
        self.conv1 = nn.Conv2d(
            in_planes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3,
                               stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)

        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != self.expansion*planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, self.expansion*planes,
                          kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(self.expansion*planes)
            )

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += self.shortcut(x)
        out = F.relu(out)
        return out


class ResNet(nn.Module):
    def __init__(self, block, num_blocks, num_classes=10, width=64):
        super(ResNet, self).__init__()
        self.in_planes = width

        self.conv1 = nn.Conv2d(3, width, kernel_size=3,
                               stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.layer1 = self._make_layer(block, width, num_blocks[0], stride=1)
        self.layer2 = self._make_layer(block, width*2, num_blocks[1], stride=2)
        self.layer3 = self._make_layer(block, width*4, num_blocks[2], stride=2)
        self.layer4 = self._make_layer(block, width*8, num_blocks[3], stride=2)
        self.linear = nn.Linear(width*8*block.expansion, num_classes)

    def _make_layer(self, block, planes, num_blocks, stride):
        strides = [stride] + [1]*(num_blocks-1)
        layers = []
        for stride in strides:
            layers.append(block(self.in_planes, planes, stride))
            self.in_planes = planes * block.expansion
        return nn.Sequential(*layers)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer1(out)
        out = self.layer2(out)
        out = self.layer3(out)
        out = self.layer4(out)
        out = F.avg_pool2d(out, 4)
        out = out.view(out.size(0), -1)
        out = self.linear(out)
        return out


def ResNet18(num_classes=10, width=64):
    return ResNet(BasicBlock, [2, 2, 2, 2], num_classes=num_classes, width=width)


def training(size: str = "small"):
    """(net, optimizer, step): main.py's training loop on one fixed random batch."""
    s = SIZES[size]
    torch.manual_seed(0)
    net = ResNet18(num_classes=s["classes"], width=s["width"])
    optimizer = optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    return image_classifier_training(torch, net, optimizer, s)
