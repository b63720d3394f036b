"""torch.nn.utils.stateless: the deprecated home of `functional_call` (now torch.func.functional_call)."""
from __future__ import annotations

from ..._warn import warn as _warn
from .. import stateless as _stateless

__all__ = ["functional_call"]


def functional_call(module, parameters_and_buffers, args=None, kwargs=None, *, tie_weights: bool = True,
                    strict: bool = False):
    """fnx.nn.functional_call (torch.func's) under its deprecated torch.nn.utils.stateless name, with PyTorch's
    FutureWarning."""
    _warn("`torch.nn.utils.stateless.functional_call` is deprecated as of PyTorch 2.0 and will be removed in a "
          "future version of PyTorch. Please use `torch.func.functional_call` instead which is a drop-in "
          "replacement.", FutureWarning)
    return _stateless.functional_call(module, parameters_and_buffers, args, kwargs, tie_weights=tie_weights,
                                      strict=strict)
