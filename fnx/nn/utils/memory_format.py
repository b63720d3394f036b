"""Converting convolution weights to a memory format in place, over a module tree
(torch.nn.utils.memory_format)."""
from __future__ import annotations

from ...autograd import no_grad
from ..layers.conv import Conv2d, Conv3d, ConvTranspose2d, ConvTranspose3d

__all__ = ["convert_conv2d_weight_memory_format", "convert_conv3d_weight_memory_format"]


def _convert(module, kinds: tuple, memory_format):
    if isinstance(module, kinds):
        with no_grad():
            module.weight.data = module.weight.detach().clone(memory_format=memory_format)
    for child in module.children():
        _convert(child, kinds, memory_format)
    return module


def convert_conv2d_weight_memory_format(module, memory_format):
    """`module` with the weight of every Conv2d / ConvTranspose2d in it (itself included) stored in
    `memory_format` (e.g. fnx.channels_last); the values are unchanged."""
    return _convert(module, (Conv2d, ConvTranspose2d), memory_format)


def convert_conv3d_weight_memory_format(module, memory_format):
    """`module` with the weight of every Conv3d / ConvTranspose3d in it stored in `memory_format` (e.g.
    fnx.channels_last_3d)."""
    return _convert(module, (Conv3d, ConvTranspose3d), memory_format)
