"""C loops for the eager impls of fnx.nn's hot spots on CPU float32/float64 arrays: the elementwise part of an
LSTM time step, forward and backward (fnx/nn/recurrence.py), and log_softmax over rows with its backward
(fnx/nn/functional_activation.py).

An LSTM runs one GEMM per time step and, around it, the gates' activations, the cell update and their
derivatives: about ten numpy calls on (batch, hidden) slices, which cost more than the GEMM at a language
model's sizes; log_softmax takes four numpy passes over its input and its backward four more. One C call
(templates/c_nn.c.j2) does each in one or two passes, log_softmax's rows on fnx's thread pool. One library for
every shape, built on first use by the C toolchain's disk cache (fnx/lowering/cpu.py) under a lock; where it
cannot be built (no compiler, Jinja2 missing), for small arrays and other dtypes, numpy runs instead.
"""
from __future__ import annotations

import ctypes

import numpy as np

from .template_library import TemplateLibrary

__all__ = ["lstm_steps", "log_softmax", "log_softmax_backward", "MIN_ELEMENTS"]

# Below this many elements (an LSTM's steps x batch x hidden) numpy runs (and tests of tiny arrays never compile).
MIN_ELEMENTS = 4096
_SUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
_POINTERS = {"lstm_step": 8, "lstm_step_backward": 7, "log_softmax": 2, "log_softmax_backward": 3}   # then 2 sizes
_ARGTYPES = {f"fnx_{name}_{sfx}": [ctypes.c_void_p] * pointers + [ctypes.c_longlong] * 2
             for name, pointers in _POINTERS.items() for sfx in _SUFFIX.values()}
_library = TemplateLibrary("fnx-nn", "c_nn.c.j2", list(_ARGTYPES), "the C loops of the LSTM recurrence and "
                           "log_softmax", "numpy runs them", _ARGTYPES).get


def _functions(dtype: np.dtype, elements: int, *names: str) -> tuple | None:
    """The C functions `names` for `dtype`, or None where numpy should run (small, other dtype, no library)."""
    sfx = _SUFFIX.get(np.dtype(dtype))
    if sfx is None or elements < MIN_ELEMENTS:
        return None
    lib = _library()
    return None if lib is None else tuple(getattr(lib, f"fnx_{name}_{sfx}") for name in names)


def lstm_steps(dtype: np.dtype, elements: int) -> tuple | None:
    """(forward step, backward step) of an LSTM of `elements` steps x batch x hidden, or None: numpy runs."""
    return _functions(dtype, elements, "lstm_step", "lstm_step_backward")


def log_softmax(x: np.ndarray) -> np.ndarray | None:
    """log_softmax along the last dim of `x`, or None where numpy should run it."""
    fns = _functions(x.dtype, x.size, "log_softmax") if x.ndim else None
    if fns is None:
        return None
    x = np.ascontiguousarray(x)
    out = np.empty(x.shape, x.dtype)
    fns[0](x.ctypes.data, out.ctypes.data, x.size // x.shape[-1], x.shape[-1])
    return out


def log_softmax_backward(g: np.ndarray, out: np.ndarray) -> np.ndarray | None:
    """g - exp(out) sum(g) along the last dim, or None where numpy should run it."""
    fns = _functions(g.dtype, g.size, "log_softmax_backward") if g.ndim and g.dtype == out.dtype else None
    if fns is None:
        return None
    g, out = np.ascontiguousarray(g), np.ascontiguousarray(out)
    dx = np.empty(g.shape, g.dtype)
    fns[0](g.ctypes.data, out.ctypes.data, dx.ctypes.data, g.size // g.shape[-1], g.shape[-1])
    return dx
