"""facebookresearch/ConvNeXt's model (models/convnext.py): Block (7x7 depthwise conv, permute to channels-last,
LayerNorm, Linear 4x expansion, GELU, Linear, layer scale gamma, DropPath, residual), the custom LayerNorm with
its "channels_last" / "channels_first" data formats, and ConvNeXt (4x4 stride-4 stem, LayerNorm + 2x2 stride-2
downsample layers, four stages, stochastic depth rates from torch.linspace, final nn.LayerNorm over the global
average pool, Linear head, _init_weights with trunc_normal_ and a zero bias). Trained with nn.CrossEntropyLoss
and AdamW(lr=4e-3, weight_decay=0.05) in a zero_grad / forward / loss / backward / step loop.

Changed: the data is a fixed random batch of 32x32 images instead of ImageNet (the stages run at 8x8, 4x4, 2x2
and 1x1); depths (2, 2, 2, 2), dims (32, 64, 128, 256) and 10 classes at "small". DropPath and trunc_normal_,
which the source imports from timm, are written here: DropPath / drop_path as timm 0.3.2 (the version ConvNeXt's
INSTALL.md pins) writes them, binarizing `keep_prob + torch.rand(shape)` with floor_(), and trunc_normal_ as
nn.init.trunc_normal_, its equivalent.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from benchmarks.programs import image_classifier_training

SIZES = {
    "small": {"depths": (2, 2, 2, 2), "dims": (32, 64, 128, 256), "drop_path_rate": 0.1, "classes": 10,
              "batch": 32, "image": 32},
    "tiny": {"depths": (1, 1, 1, 1), "dims": (4, 8, 16, 32), "drop_path_rate": 0.1, "classes": 10,
             "batch": 2, "image": 32},
}


def drop_path(x, drop_prob: float = 0., training: bool = False):
    """Drop paths (stochastic depth) per sample, as timm 0.3.2's timm.models.layers.drop.drop_path."""
    if drop_prob == 0. or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    random_tensor = keep_prob + torch.rand(shape, dtype=x.dtype, device=x.device)
    random_tensor.floor_()
    output = x.div(keep_prob) * random_tensor
    return output


class DropPath(nn.Module):
    """Drop paths (stochastic depth) per sample, as timm 0.3.2's timm.models.layers.drop.DropPath."""

    def __init__(self, drop_prob=None):
        super(DropPath, self).__init__()
        self.drop_prob = drop_prob

    def forward(self, x):
        return drop_path(x, self.drop_prob, self.training)


class Block(nn.Module):
    """ConvNeXt Block: DwConv -> Permute to (N, H, W, C); LayerNorm -> Linear -> GELU -> Linear; Permute back."""

    def __init__(self, dim, drop_path=0., layer_scale_init_value=1e-6):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim)
        self.norm = LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(layer_scale_init_value * torch.ones((dim)),
                                  requires_grad=True) if layer_scale_init_value > 0 else None
        self.drop_path = DropPath(drop_path) if drop_path > 0. else nn.Identity()

    def forward(self, x):
        input = x
        x = self.dwconv(x)
        x = x.permute(0, 2, 3, 1)
        x = self.norm(x)
        x = self.pwconv1(x)
        x = self.act(x)
        x = self.pwconv2(x)
        if self.gamma is not None:
            x = self.gamma * x
        x = x.permute(0, 3, 1, 2)

        x = input + self.drop_path(x)
        return x


class ConvNeXt(nn.Module):
    """ConvNeXt, "A ConvNet for the 2020s" (https://arxiv.org/pdf/2201.03545.pdf)."""

    def __init__(self, in_chans=3, num_classes=1000,
                 depths=[3, 3, 9, 3], dims=[96, 192, 384, 768], drop_path_rate=0.,
                 layer_scale_init_value=1e-6, head_init_scale=1.,
                 ):
        super().__init__()

        self.downsample_layers = nn.ModuleList()
        stem = nn.Sequential(
            nn.Conv2d(in_chans, dims[0], kernel_size=4, stride=4),
            LayerNorm(dims[0], eps=1e-6, data_format="channels_first")
        )
        self.downsample_layers.append(stem)
        for i in range(3):
            downsample_layer = nn.Sequential(
                LayerNorm(dims[i], eps=1e-6, data_format="channels_first"),
                nn.Conv2d(dims[i], dims[i+1], kernel_size=2, stride=2),
            )
            self.downsample_layers.append(downsample_layer)

        self.stages = nn.ModuleList()
        dp_rates = [x.item() for x in torch.linspace(0, drop_path_rate, sum(depths))]
        cur = 0
        for i in range(4):
            stage = nn.Sequential(
                *[Block(dim=dims[i], drop_path=dp_rates[cur + j],
                        layer_scale_init_value=layer_scale_init_value) for j in range(depths[i])]
            )
            self.stages.append(stage)
            cur += depths[i]

        self.norm = nn.LayerNorm(dims[-1], eps=1e-6)
        self.head = nn.Linear(dims[-1], num_classes)

        self.apply(self._init_weights)
        self.head.weight.data.mul_(head_init_scale)
        self.head.bias.data.mul_(head_init_scale)

    def _init_weights(self, m):
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.trunc_normal_(m.weight, std=.02)
            nn.init.constant_(m.bias, 0)

    def forward_features(self, x):
        for i in range(4):
            x = self.downsample_layers[i](x)
            x = self.stages[i](x)
        return self.norm(x.mean([-2, -1]))

    def forward(self, x):
        x = self.forward_features(x)
        x = self.head(x)
        return x


class LayerNorm(nn.Module):
    """LayerNorm over the last dimension ("channels_last") or over dimension 1 of (N, C, H, W) ("channels_first")."""

    def __init__(self, normalized_shape, eps=1e-6, data_format="channels_last"):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))
        self.eps = eps
        self.data_format = data_format
        if self.data_format not in ["channels_last", "channels_first"]:
            raise NotImplementedError
        self.normalized_shape = (normalized_shape, )

    def forward(self, x):
        if self.data_format == "channels_last":
            return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        elif self.data_format == "channels_first":
            u = x.mean(1, keepdim=True)
            s = (x - u).pow(2).mean(1, keepdim=True)
            x = (x - u) / torch.sqrt(s + self.eps)
            x = self.weight[:, None, None] * x + self.bias[:, None, None]
            return x


def training(size: str = "small"):
    """(model, optimizer, step): the ConvNeXt training loop on one fixed random batch."""
    s = SIZES[size]
    torch.manual_seed(0)
    model = ConvNeXt(num_classes=s["classes"], depths=s["depths"], dims=s["dims"],
                     drop_path_rate=s["drop_path_rate"])
    optimizer = torch.optim.AdamW(model.parameters(), lr=4e-3, weight_decay=0.05)
    return image_classifier_training(torch, model, optimizer, s)
