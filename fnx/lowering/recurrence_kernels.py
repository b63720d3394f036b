"""C loops for the elementwise part of an LSTM time step (fnx/nn/recurrence.py), forward and backward, on CPU
float32/float64 arrays.

The recurrence runs one GEMM per time step and, around it, the gates' activations, the cell update and their
derivatives: about ten numpy calls on (batch, hidden) slices, which cost more than the GEMM at a language
model's sizes. One C call per step (templates/c_recurrence.c.j2) does that work in one pass. One library for
every shape, built on first use by the C toolchain's disk cache (fnx/lowering/cpu.py) under a lock; where it
cannot be built (no compiler, Jinja2 missing), for small recurrences and other dtypes, numpy runs the loop.
"""
from __future__ import annotations

import ctypes
import threading
from pathlib import Path

import numpy as np

from .._warn import warn

__all__ = ["lstm_steps", "MIN_ELEMENTS"]

# Below this many elements (steps x batch x hidden) numpy runs (and tests on tiny recurrences never compile).
MIN_ELEMENTS = 4096
_SUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
_TEMPLATE = Path(__file__).parent / "templates" / "c_recurrence.c.j2"
_ARGS = {"lstm_step": 6, "lstm_step_backward": 7}   # pointer arguments, then rows and hid
_lib: list = []   # [the loaded library, or None where it cannot be built], once built
_lock = threading.Lock()


def lstm_steps(dtype: np.dtype, elements: int) -> tuple | None:
    """(forward step, backward step): the C functions for `dtype`, or None where numpy should run the loop."""
    sfx = _SUFFIX.get(np.dtype(dtype))
    if sfx is None or elements < MIN_ELEMENTS:
        return None
    with _lock:
        if not _lib:
            _lib.append(_build())
    lib = _lib[0]
    return None if lib is None else tuple(getattr(lib, f"fnx_{name}_{sfx}") for name in _ARGS)


def _build():
    """The loaded library with its functions' signatures set, or None (with a warning when a compiler exists
    but failed)."""
    # Imported here, not with fnx: building needs Jinja2 and a C compiler, and a process without an LSTM never
    # needs either.
    from .._version import __version__
    from .codegen import prelude
    from .cpu import NoCompilerError, compile_libraries

    try:
        import jinja2

        body = jinja2.Template(_TEMPLATE.read_text()).render()

        def sources(simd: bool) -> dict[str, str]:
            return {"fnx-recurrence": prelude("c", simd=simd) + body}

        lib = compile_libraries(sources(True), __version__, sources)["fnx-recurrence"]
    except (NoCompilerError, ModuleNotFoundError):
        return None
    except Exception as e:  # noqa: BLE001 (any failure to build leaves numpy's loop, which is always right)
        warn(f"fnx: the C loops of the LSTM recurrence could not be built ({e}); numpy runs them instead (slower)",
             RuntimeWarning)
        return None
    for name, pointers in _ARGS.items():
        for sfx in _SUFFIX.values():
            fn = getattr(lib, f"fnx_{name}_{sfx}")
            fn.argtypes = [ctypes.c_void_p] * pointers + [ctypes.c_longlong] * 2
            fn.restype = None
    return lib
