"""`skip_init` (torch.nn.utils.init): build a module without spending its initialization's random draws."""
from __future__ import annotations

import inspect

from ...ops.sampling import get_rng_state, set_rng_state
from ..module import Module

__all__ = ["skip_init"]


def skip_init(module_cls, *args, **kwargs):
    """`module_cls(*args, **kwargs)` whose parameter and buffer values are unspecified, as with torch.empty: PyTorch
    builds it on the meta device; fnx builds it as usual and restores the global generator afterwards, so the
    random stream continues as if no initialization had drawn from it."""
    if not (isinstance(module_cls, type) and issubclass(module_cls, Module)):
        raise RuntimeError(f"Expected a Module; got {module_cls}")
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    state = get_rng_state()
    try:
        return module_cls(*args, **kwargs)
    finally:
        set_rng_state(state)
