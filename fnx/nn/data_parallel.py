"""`nn.DataParallel`: PyTorch's single-process wrapper, here running the module on its one device.

PyTorch's DataParallel splits each batch over several GPUs of one process and gathers the outputs; fnx runs
the wrapped module once on the whole batch (what PyTorch itself does on a CPU-only machine), which gives the
same outputs and gradients. Code written for it keeps working: `.module` is the wrapped model and the
state_dict keys carry PyTorch's `module.` prefix. For several devices use DistributedDataParallel.
"""
from __future__ import annotations

from .module import Module

__all__ = ["DataParallel"]


class DataParallel(Module):
    """Wrap `module`: calls pass through to it; `device_ids`, `output_device` and `dim` are recorded, not used
    (the module runs on its own device, over the whole batch)."""

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0):
        super().__init__()
        self.module = module
        self.device_ids = list(device_ids) if device_ids is not None else []
        self.output_device = output_device
        self.dim = dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)
