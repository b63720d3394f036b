"""fnx's warnings point at the user's line: `warn` attributes a warning to the first frame outside the fnx
package, however deep inside fnx it was raised (Python 3.12's `skip_file_prefixes`, for every version)."""
from __future__ import annotations

import os
import sys
import warnings

__all__ = ["FNX_DIR", "warn", "set_warn_always", "is_warn_always_enabled"]

FNX_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep   # every frame whose file starts with this is fnx's
_warn_always = False


def set_warn_always(b: bool, /) -> None:
    """Make the warnings PyTorch gives once per process (deprecated names) warn at every call (torch's flag)."""
    global _warn_always
    if not isinstance(b, bool):
        raise TypeError(f"set_warn_always expects a bool, but got {type(b).__name__}")
    _warn_always = b


def is_warn_always_enabled() -> bool:
    """Whether `set_warn_always(True)` is in force (default False)."""
    return _warn_always


def warn(message: str, category: type[Warning] = UserWarning) -> None:
    """`warnings.warn(message, category)` with the stacklevel of the innermost caller outside fnx."""
    frame, level = sys._getframe(1), 2   # level 2: our caller
    while frame.f_back is not None and frame.f_code.co_filename.startswith(FNX_DIR):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
