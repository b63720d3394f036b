"""einops on fnx tensors (`rearrange`, `reduce`, `repeat`, `einsum`, `pack`), without fnx depending on einops.

einops finds a tensor's framework by walking the subclasses of `einops._backends.AbstractBackend` and keeping
those whose `framework_name` is a module in `sys.modules`; its `is_appropriate_type` then claims the tensor.
fnx defines such a subclass (`framework_name = "fnx"`) as soon as `einops._backends` exists: right away when
einops was imported first, otherwise from a finder on `sys.meta_path` that runs once `einops._backends` is
loaded. Under the torch alias einops' own torch backend also works (it sees `torch.Tensor` as `fnx.Tensor`),
and so do `einops.layers.torch` layers inside `fnx.nn` models; without the alias, `einops.layers.torch` needs
real PyTorch, so `layers()` says to use the alias.
"""
from __future__ import annotations

import importlib.abc
import sys

from .. import dtypes as _dt
from ..ops.creation import arange, from_numpy
from ..ops.joins import cat, stack
from ..ops.linalg import einsum
from ..ops.shape import unsqueeze
from ..tensor import Tensor

__all__ = ["install"]

_MODULE = "einops._backends"


def _define(backends) -> None:
    """Define fnx's backend as a subclass of einops' AbstractBackend (einops discovers it from there)."""

    class FnxBackend(backends.AbstractBackend):
        framework_name = "fnx"

        def is_appropriate_type(self, tensor) -> bool:
            return isinstance(tensor, Tensor)

        def from_numpy(self, x):
            t = from_numpy(x)
            return t.requires_grad_(True) if t.dtype.is_floating_point else t

        def to_numpy(self, x):
            return x.detach().cpu().numpy()

        def arange(self, start, stop):
            return arange(start, stop, dtype=_dt.int64)

        def reduce(self, x, operation, reduced_axes):
            if operation in ("min", "max"):
                return getattr(x, "a" + operation)(dim=tuple(reduced_axes))
            if operation in ("sum", "mean"):
                return getattr(x, operation)(dim=tuple(reduced_axes))
            if operation in ("any", "all", "prod"):
                for axis in sorted(reduced_axes)[::-1]:
                    x = getattr(x, operation)(dim=axis)
                return x
            raise NotImplementedError(f"einops on fnx: unknown reduction {operation!r}")

        def transpose(self, x, axes):
            return x.permute(tuple(axes))

        def stack_on_zeroth_dimension(self, tensors: list):
            return stack(tensors)

        def add_axis(self, x, new_position):
            return unsqueeze(x, new_position)

        def add_axes(self, x, n_axes, pos2len):
            repeats = [-1] * n_axes
            for position, length in pos2len.items():
                x = unsqueeze(x, position)
                repeats[position] = length
            return x.expand(repeats)

        def tile(self, x, repeats):
            return x.repeat(tuple(repeats))

        def concat(self, tensors, axis: int):
            return cat(tensors, dim=axis)

        def is_float_type(self, x) -> bool:
            return x.dtype.is_floating_point

        def layers(self):
            raise NotImplementedError("einops layers on fnx: einops.layers.torch works on fnx under the torch alias "
                                      "(fnx.install_torch_alias() or python -m fnx run); without it use the "
                                      "functions (einops.rearrange, ...) inside your fnx.nn.Module's forward")

        def einsum(self, pattern, *x):
            return einsum(pattern, *x)

    backends.FnxBackend = FnxBackend


class _Finder(importlib.abc.MetaPathFinder):
    """Defines fnx's backend right after `einops._backends` is loaded, whoever imports it."""

    def find_spec(self, fullname, path, target=None):
        if fullname != _MODULE:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                spec.loader = _Loader(spec.loader)
                return spec
        return None


class _Loader(importlib.abc.Loader):
    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        self.loader.exec_module(module)
        _define(module)


def install() -> None:
    """Make einops recognise fnx tensors, now if einops is loaded, else when it is."""
    if _MODULE in sys.modules:
        if not hasattr(sys.modules[_MODULE], "FnxBackend"):
            _define(sys.modules[_MODULE])
    elif not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
