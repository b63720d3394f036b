"""`fnx.nn.modules`: PyTorch's `torch.nn.modules` paths (`nn.modules.batchnorm._BatchNorm`,
`nn.modules.module.Module`, ...), each the fnx module that defines those classes, registered under PyTorch's
submodule name, so `isinstance` checks and subclasses written against the long paths see fnx's own classes."""
from __future__ import annotations

import sys

from .. import containers, module
from ..layers import *  # noqa: F401,F403
from ..layers import __all__ as _layers_all
from ..layers import (activation, conv, distance, dropout, embedding, flatten, fold, linear, loss,
                      normalization, padding, pooling, resize, rnn, transformer)
from ..containers import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from ..module import Module

__all__ = ["Module", "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict", *_layers_all]

_TORCH_NAMES = {  # torch.nn.modules.<name> -> the fnx module that holds its classes
    "module": module, "container": containers, "activation": activation, "batchnorm": normalization,
    "instancenorm": normalization, "normalization": normalization, "conv": conv, "dropout": dropout,
    "linear": linear, "loss": loss, "pooling": pooling, "rnn": rnn, "sparse": embedding, "transformer": transformer,
    "flatten": flatten, "padding": padding, "distance": distance, "fold": fold, "upsampling": resize,
    "pixelshuffle": resize, "channelshuffle": resize,
}
for _name, _module in _TORCH_NAMES.items():
    sys.modules[f"{__name__}.{_name}"] = _module
    globals()[_name] = _module
