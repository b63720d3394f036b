"""Setting a backend module's flags for a `with` block, as torch.backends' `flags(...)` context managers do."""
from __future__ import annotations

import contextlib
import types


@contextlib.contextmanager
def switched(module: types.ModuleType, **values):
    """Set the module attributes `values` (those not None) inside the block, and restore them after it."""
    values = {k: v for k, v in values.items() if v is not None}
    old = {k: getattr(module, k) for k in values}
    for k, v in values.items():
        setattr(module, k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            setattr(module, k, v)
