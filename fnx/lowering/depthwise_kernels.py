"""C loops of the depthwise convolution primitives (fnx/ops/depthwise_conv.py) on CPU float32/float64 arrays.

One library (templates/c_depthwise.c.j2) for every shape, built on first use by the C toolchain's disk cache under
a lock; these loops have no numpy form, so the primitives run only where `available()` holds (otherwise
fnx.nn.functional runs the composite convolution). Setting `fnx.ops.depthwise_conv.native` to this module at
import is the hook.
"""
from __future__ import annotations

import ctypes
import sys

import numpy as np

from ..array_pointers import data_pointer
from ..ops import depthwise_conv
from ..threads import get_num_threads
from .template_library import TemplateLibrary

__all__ = ["available", "conv", "conv_input_grad", "conv_weight_grad"]

_SUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
_KERNELS = ("conv", "conv_input_grad", "conv_weight_grad")
_library = TemplateLibrary("fnx-depthwise", "c_depthwise.c.j2",
                           [f"fnx_dw_{name}_{sfx}" for name in _KERNELS for sfx in _SUFFIX.values()],
                           "the C loops of depthwise convolutions", "the composite convolution runs",
                           primitives=("depthwise_conv", "depthwise_conv_input_grad",
                                       "depthwise_conv_weight_grad")).get


def available() -> bool:
    """Whether the C loops run here (the library built or read from the cache on first call)."""
    return _library() is not None


def _ptr(a: np.ndarray | None) -> ctypes.c_void_p | None:
    return None if a is None else ctypes.c_void_p(data_pointer(a))


def _call(name: str, operands: list, plan: dict, arrays: tuple) -> None:
    """fnx_dw_<name> on the C-contiguous `operands` (None passes NULL) with per-task scratch, the plan's sizes and
    its `arrays`."""
    tasks = max(1, get_num_threads())
    dtype = next(a.dtype for a in operands if a is not None)
    scratch = np.empty(tasks * plan["slice"], dtype)
    getattr(_library(), f"fnx_dw_{name}_{_SUFFIX[dtype]}")(
        *(_ptr(a) for a in operands), _ptr(scratch), ctypes.c_longlong(plan["slice"]), ctypes.c_longlong(tasks),
        (ctypes.c_longlong * len(plan["sizes"]))(*plan["sizes"]), *(_ptr(plan[a]) for a in arrays))


def conv(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, plan: dict) -> np.ndarray:
    """y (n, c * m, *out) = the depthwise convolution of x (n, c, *size) with w (c * m, 1, *kernel) (+ bias)."""
    n, c, m = plan["sizes"][:3]
    y = np.empty((n, c * m) + plan["out"], x.dtype)
    _call("conv", [np.ascontiguousarray(x), np.ascontiguousarray(w),
                   None if bias is None else np.ascontiguousarray(bias), y], plan, ("rows", "cols", "off", "tap"))
    return y


def conv_input_grad(g: np.ndarray, w: np.ndarray, plan: dict) -> np.ndarray:
    """gx (n, c, *size): conv's gradient in x from g (n, c * m, *out)."""
    gx = np.empty(plan["sizes"][:2] + plan["size"], g.dtype)
    _call("conv_input_grad", [np.ascontiguousarray(g), np.ascontiguousarray(w), gx], plan,
          ("rows_g", "cols_g", "ptap", "tapg", "offg"))
    return gx


def conv_weight_grad(g: np.ndarray, x: np.ndarray, plan: dict) -> np.ndarray:
    """gw (c * m, 1, *kernel): conv's gradient in w from g (n, c * m, *out) and x (n, c, *size)."""
    c, m = plan["sizes"][1:3]
    gw = np.empty((c * m, 1) + plan["kernel"], g.dtype)
    _call("conv_weight_grad", [np.ascontiguousarray(g), np.ascontiguousarray(x), gw], plan, ("rows", "cols", "off"))
    return gw


depthwise_conv.native = sys.modules[__name__]
