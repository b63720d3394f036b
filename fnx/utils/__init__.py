"""`fnx.utils`: PyTorch's `torch.utils` paths for code that imports them.

`fnx.utils.data` is the `fnx.data` package itself, registered under this name with its submodules
(`fnx.utils.data.dataloader`, `.sampler`, ...), so `import fnx.utils.data as tud` and `fnx.data` give the same
classes rather than copies of them. `fnx.utils.checkpoint.checkpoint` is PyTorch's activation checkpointing call;
`fnx.utils.dlpack` has `from_dlpack`/`to_dlpack`; `swap_tensors(t1, t2)` exchanges two tensors' contents.
Importing fnx also makes einops recognise fnx tensors (fnx/utils/einops_backend.py).
"""
from __future__ import annotations

import sys

from .. import data
from . import checkpoint, dlpack, einops_backend
from ._swap import swap_tensors
from ..data import collate, dataloader, dataset, distributed, fetch, sampler, worker

__all__ = ["data", "checkpoint", "dlpack", "swap_tensors"]

for _name, _module in {"data": data, "data.collate": collate, "data.dataloader": dataloader,
                       "data.dataset": dataset, "data.distributed": distributed, "data.fetch": fetch,
                       "data.sampler": sampler, "data.worker": worker}.items():
    sys.modules[f"{__name__}.{_name}"] = _module
einops_backend.install()
