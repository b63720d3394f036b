"""`fnx.use_deterministic_algorithms`: bit-identical results from run to run on one device.

On the CPU every eager op and compiled kernel already has a fixed order of operations (numpy's reductions,
`np.add.at` for scatter-adds, fixed-block reductions in generated C). On CUDA, scatter-adds accumulate with
atomic adds, whose order varies; in deterministic mode they raise (or warn with `warn_only=True`), as PyTorch's
do.
"""
from __future__ import annotations

import warnings

from .errors import FnxRuntimeError

__all__ = ["use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
           "is_deterministic_algorithms_warn_only_enabled", "set_deterministic_debug_mode",
           "get_deterministic_debug_mode", "alert_not_deterministic"]

_DEBUG_MODES = ("default", "warn", "error")   # torch's names of the debug modes 0, 1 and 2

# Process-wide, unlike grad mode (which is per thread), as PyTorch's use_deterministic_algorithms is: it is a
# setting of the program (switched once, not entered and left around a block, so threads cannot overlap in
# it), and its promise, a rerun gives the same bits, holds only if every thread's ops obey it; a per-thread
# setting would leave worker threads nondeterministic while the main thread asked for determinism.
_enabled = False
_warn_only = False


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Make every op either deterministic or an error (a warning with `warn_only`)."""
    global _enabled, _warn_only
    _enabled, _warn_only = bool(mode), bool(warn_only)


def are_deterministic_algorithms_enabled() -> bool:
    """Whether `use_deterministic_algorithms(True)` is in effect."""
    return _enabled


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    """Whether deterministic mode warns rather than raises (`use_deterministic_algorithms(True, warn_only=True)`)."""
    return _warn_only


def set_deterministic_debug_mode(debug_mode: str | int) -> None:
    """torch's other spelling of `use_deterministic_algorithms`: "default" / 0 (off), "warn" / 1 (warn only) or
    "error" / 2 (raise)."""
    if isinstance(debug_mode, str):
        if debug_mode not in _DEBUG_MODES:
            raise FnxRuntimeError(f"set_deterministic_debug_mode: invalid value of debug_mode, expected one of "
                                  f"`default`, `warn`, `error`, but got {debug_mode}")
        debug_mode = _DEBUG_MODES.index(debug_mode)
    elif isinstance(debug_mode, int):   # True and False too, as torch takes them
        if debug_mode not in (0, 1, 2):
            raise FnxRuntimeError(f"set_deterministic_debug_mode: invalid value of debug_mode, expected 0, 1, or 2, "
                                  f"but got {debug_mode}")
    else:
        raise TypeError(f"set_deterministic_debug_mode: debug_mode must be str or int, but got "
                        f"{type(debug_mode).__name__}")
    use_deterministic_algorithms(debug_mode > 0, warn_only=debug_mode == 1)


def get_deterministic_debug_mode() -> int:
    """The debug mode as an int: 0 off, 1 warn only, 2 raise (see `set_deterministic_debug_mode`)."""
    return 0 if not _enabled else 1 if _warn_only else 2


def alert_not_deterministic(op: str) -> None:
    """Called by an implementation that is not deterministic: raises (or warns) in deterministic mode."""
    if not _enabled:
        return
    msg = (f"{op} does not have a deterministic implementation (it accumulates with atomic adds on CUDA), but "
           f"fnx.use_deterministic_algorithms(True) is set. Run it on the CPU, or pass warn_only=True to "
           f"use_deterministic_algorithms to allow it with a warning.")
    if _warn_only:
        warnings.warn(msg, UserWarning, stacklevel=3)
        return
    raise FnxRuntimeError(msg)
