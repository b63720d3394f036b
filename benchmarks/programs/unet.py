"""milesial/Pytorch-UNet's U-Net (unet/unet_parts.py and unet/unet_model.py: DoubleConv, Down, Up with its
ConvTranspose2d or bilinear nn.Upsample branch, F.pad to the skip's size and torch.cat, OutConv, and UNet with
its `factor` logic) trained as its train.py trains it: channels_last model and images, nn.CrossEntropyLoss plus
utils/dice_score.py's dice_loss on the softmax and the one-hot masks, RMSprop(lr=1e-5, weight_decay=1e-8,
momentum=0.999, foreach=True), zero_grad(set_to_none=True), backward, clip_grad_norm_(..., 1.0), step.

Changed: the data is a fixed random batch of images and 2-class masks instead of the Carvana dataset; the base
width (64 in the source: 64/128/256/512/1024) is a constructor argument, 16 at "small"; the GradScaler and
autocast calls are left out (they are disabled without --amp, and no-ops on CPU float32), and so are the
`device` argument of the `.to(...)` calls and the n_classes == 1 (BCEWithLogitsLoss) branch of the loss.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor, optim

SIZES = {
    "small": {"width": 16, "batch": 4, "image": 64, "classes": 2, "bilinear": False},
    "tiny": {"width": 4, "batch": 2, "image": 16, "classes": 2, "bilinear": False},
}


class DoubleConv(nn.Module):
    """(convolution => [BN] => ReLU) * 2"""

    def __init__(self, in_channels, out_channels, mid_channels=None):
        super().__init__()
        if not mid_channels:
            mid_channels = out_channels
        self.double_conv = nn.Sequential(
            nn.Conv2d(in_channels, mid_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(mid_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid_channels, out_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True)
        )

    def forward(self, x):
        return self.double_conv(x)


class Down(nn.Module):
    """Downscaling with maxpool then double conv"""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.maxpool_conv = nn.Sequential(
            nn.MaxPool2d(2),
            DoubleConv(in_channels, out_channels)
        )

    def forward(self, x):
        return self.maxpool_conv(x)


class Up(nn.Module):
    """Upscaling then double conv"""

    def __init__(self, in_channels, out_channels, bilinear=True):
        super().__init__()

        if bilinear:
            self.up = nn.Upsample(scale_factor=2, mode='bilinear', align_corners=True)
            self.conv = DoubleConv(in_channels, out_channels, in_channels // 2)
        else:
            self.up = nn.ConvTranspose2d(in_channels, in_channels // 2, kernel_size=2, stride=2)
            self.conv = DoubleConv(in_channels, out_channels)

    def forward(self, x1, x2):
        x1 = self.up(x1)
        diffY = x2.size()[2] - x1.size()[2]
        diffX = x2.size()[3] - x1.size()[3]

        x1 = F.pad(x1, [diffX // 2, diffX - diffX // 2,
                        diffY // 2, diffY - diffY // 2])
        x = torch.cat([x2, x1], dim=1)
        return self.conv(x)


class OutConv(nn.Module):
    def __init__(self, in_channels, out_channels):
        super(OutConv, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=1)

    def forward(self, x):
        return self.conv(x)


class UNet(nn.Module):
    def __init__(self, n_channels, n_classes, bilinear=False, width=64):
        super(UNet, self).__init__()
        self.n_channels = n_channels
        self.n_classes = n_classes
        self.bilinear = bilinear

        self.inc = (DoubleConv(n_channels, width))
        self.down1 = (Down(width, width * 2))
        self.down2 = (Down(width * 2, width * 4))
        self.down3 = (Down(width * 4, width * 8))
        factor = 2 if bilinear else 1
        self.down4 = (Down(width * 8, width * 16 // factor))
        self.up1 = (Up(width * 16, width * 8 // factor, bilinear))
        self.up2 = (Up(width * 8, width * 4 // factor, bilinear))
        self.up3 = (Up(width * 4, width * 2 // factor, bilinear))
        self.up4 = (Up(width * 2, width, bilinear))
        self.outc = (OutConv(width, n_classes))

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        x4 = self.down3(x3)
        x5 = self.down4(x4)
        x = self.up1(x5, x4)
        x = self.up2(x, x3)
        x = self.up3(x, x2)
        x = self.up4(x, x1)
        logits = self.outc(x)
        return logits


def dice_coeff(input: Tensor, target: Tensor, reduce_batch_first: bool = False, epsilon: float = 1e-6):
    """Average of Dice coefficient for all batches, or for a single mask"""
    assert input.size() == target.size()
    assert input.dim() == 3 or not reduce_batch_first

    sum_dim = (-1, -2) if input.dim() == 2 or not reduce_batch_first else (-1, -2, -3)

    inter = 2 * (input * target).sum(dim=sum_dim)
    sets_sum = input.sum(dim=sum_dim) + target.sum(dim=sum_dim)
    sets_sum = torch.where(sets_sum == 0, inter, sets_sum)

    dice = (inter + epsilon) / (sets_sum + epsilon)
    return dice.mean()


def multiclass_dice_coeff(input: Tensor, target: Tensor, reduce_batch_first: bool = False, epsilon: float = 1e-6):
    """Average of Dice coefficient for all classes"""
    return dice_coeff(input.flatten(0, 1), target.flatten(0, 1), reduce_batch_first, epsilon)


def dice_loss(input: Tensor, target: Tensor, multiclass: bool = False):
    """Dice loss (objective to minimize) between 0 and 1"""
    fn = multiclass_dice_coeff if multiclass else dice_coeff
    return 1 - fn(input, target, reduce_batch_first=True)


def training(size: str = "small"):
    """(model, optimizer, step): one iteration of train.py's loop on one fixed random batch."""
    s = SIZES[size]
    torch.manual_seed(0)
    batch_images = torch.randn(s["batch"], 3, s["image"], s["image"])
    batch_masks = torch.randint(0, s["classes"], (s["batch"], s["image"], s["image"]))
    model = UNet(n_channels=3, n_classes=s["classes"], bilinear=s["bilinear"], width=s["width"])
    model = model.to(memory_format=torch.channels_last)
    model.train()
    optimizer = optim.RMSprop(model.parameters(),
                              lr=1e-5, weight_decay=1e-8, momentum=0.999, foreach=True)
    criterion = nn.CrossEntropyLoss()
    gradient_clipping = 1.0

    def step(net):
        images = batch_images.to(dtype=torch.float32, memory_format=torch.channels_last)
        true_masks = batch_masks.to(dtype=torch.long)

        masks_pred = net(images)
        loss = criterion(masks_pred, true_masks)
        loss += dice_loss(
            F.softmax(masks_pred, dim=1).float(),
            F.one_hot(true_masks, model.n_classes).permute(0, 3, 1, 2).float(),
            multiclass=True
        )

        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), gradient_clipping)
        optimizer.step()
        return loss

    return model, optimizer, step
