"""C loops for the fused Adam/AdamW, SGD and RMSprop updates on CPU float32/float64 parameters (fnx/optim/adam.py
`adam_fused`, sgd.py `sgd_fused`, rmsprop.py `rmsprop_fused`).

numpy takes about twelve passes over a group's flat state (multi_tensor.py) for one update, each on one thread;
the C loop (templates/c_optim.c.j2) makes one pass, reading each gradient and writing each parameter in place,
its blocks split over fnx's thread pool, with the numpy passes' operations in their order (so their bits). One
library per function (dtype and options) for every shape and hyperparameter (the scalars are arguments), built on
first use by the C toolchain's disk cache (fnx/lowering/cpu.py) under a lock, or from when an optimizer over
parameters that will take it is made (`build_soon`); where it cannot be built (no
compiler, Jinja2 missing), for small groups, other dtypes and non-contiguous arrays, the numpy passes run.
"""
from __future__ import annotations

import ctypes

import numpy as np

from ..array_pointers import data_pointer
from .template_library import TemplateLibrary

__all__ = ["adam", "sgd", "rmsprop", "takes", "takes_elements", "adam_loop", "sgd_loop", "rmsprop_loop", "build_soon",
           "MIN_ELEMENTS"]

# Below this many elements in a group the numpy passes run (and tests of tiny groups never compile the library).
MIN_ELEMENTS = 4096
_SUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
_ARGTYPES = {f"fnx_adam_{sfx}_{ams}{decay}{neg}": [ctypes.c_void_p] * 3 + [ctypes.c_longlong]
             + [ctypes.c_void_p] * 3 + [ctypes.c_double] * 8
             for sfx in _SUFFIX.values() for ams in (0, 1) for decay in ("none", "l2", "decoupled") for neg in (0, 1)}
_POINTERS = [ctypes.c_void_p] * 3 + [ctypes.c_longlong]   # params, grads, offsets, n
_ARGTYPES.update({f"fnx_sgd_{sfx}": _POINTERS + [ctypes.c_void_p] + [ctypes.c_longlong] * 3 + [ctypes.c_double] * 4
                  for sfx in _SUFFIX.values()})
_ARGTYPES.update({f"fnx_rmsprop_{sfx}_{centered}{mom}": _POINTERS + [ctypes.c_void_p] * 3 + [ctypes.c_longlong]
                  + [ctypes.c_double] * 6 for sfx in _SUFFIX.values() for centered in (0, 1) for mom in (0, 1)})
_LIBRARY = TemplateLibrary("fnx-optim", "c_optim.c.j2", list(_ARGTYPES), "the C loops of the fused optimizers",
                           "numpy's passes run them", _ARGTYPES, parts=lambda f: f[4:])
_library = _LIBRARY.function


def takes(buffers: list) -> bool:
    """Whether a C loop may run on a group with these flat state buffers: float32/float64, at least MIN_ELEMENTS."""
    return takes_elements(buffers[0].dtype, buffers[0].size)


def takes_elements(dtype: np.dtype, size: int) -> bool:
    """Whether a C loop may run on `size` elements of parameters of `dtype` (a group without state buffers)."""
    return dtype in _SUFFIX and size >= MIN_ELEMENTS


def adam_loop(dtype: np.dtype, *, weight_decay: float, decoupled: bool, amsgrad: bool, maximize: bool) -> str:
    """The name of the C loop of an Adam update of these options on parameters of `dtype` (one `takes`)."""
    decay = "none" if weight_decay == 0 else "decoupled" if decoupled else "l2"
    return f"fnx_adam_{_SUFFIX[np.dtype(dtype)]}_{int(amsgrad)}{decay}{int(maximize)}"


def sgd_loop(dtype: np.dtype) -> str:
    """The name of the C loop of an SGD update on parameters of `dtype` (one `takes`)."""
    return f"fnx_sgd_{_SUFFIX[np.dtype(dtype)]}"


def rmsprop_loop(dtype: np.dtype, *, centered: bool, momentum: bool) -> str:
    """The name of the C loop of an RMSprop update of these options on parameters of `dtype` (one `takes`)."""
    return f"fnx_rmsprop_{_SUFFIX[np.dtype(dtype)]}_{int(centered)}{int(momentum)}"


def build_soon(loop: str) -> None:
    """Start building the C loop `loop` (a name from `adam_loop`, ...) on a thread of its own: an optimizer made
    over parameters whose update will run it, so that a training loop's first step finds it built."""
    _LIBRARY.start_functions([loop])


def adam(param_at: np.ndarray, grad_at: np.ndarray, offsets: np.ndarray, buffers: list, *, step: int, lr: float,
         beta1: float, beta2: float, eps: float, weight_decay: float, decoupled: bool, amsgrad: bool,
         maximize: bool) -> bool:
    """One Adam step in place over the C-contiguous parameters and gradients at the addresses `param_at` and
    `grad_at` (uintp), whose flat elements offsets[k]:offsets[k + 1] (int64) are the k-th's in the flat state
    `buffers` (exp_avg, exp_avg_sq and, for amsgrad, max_exp_avg_sq), all of one dtype that `takes` accepted.
    False (nothing done) where its C loop cannot be built: numpy's passes run instead."""
    fn = _library(adam_loop(buffers[0].dtype, weight_decay=weight_decay, decoupled=decoupled, amsgrad=amsgrad,
                            maximize=maximize))
    if fn is None:
        return False
    wd = 1 - lr * weight_decay if decoupled else weight_decay
    vm = data_pointer(buffers[2]) if amsgrad else None
    fn(
        data_pointer(param_at), data_pointer(grad_at), data_pointer(offsets), len(param_at), data_pointer(buffers[0]),
        data_pointer(buffers[1]), vm, beta1, 1 - beta1, beta2, 1 - beta2, (1 - beta2 ** step) ** 0.5, eps,
        lr / (1 - beta1 ** step), wd)
    return True


def sgd(param_at: np.ndarray, grad_at: np.ndarray, offsets: np.ndarray, momentum_buffer: np.ndarray | None,
        dtype: np.dtype, *, first: bool, lr: float, momentum: float, dampening: float, nesterov: bool,
        weight_decay: float, maximize: bool) -> bool:
    """One SGD step in place on parameters of `dtype` (as `adam`'s arguments and result; the flat momentum buffer,
    None without momentum, set to the gradient when `first`)."""
    fn = _library(sgd_loop(dtype))
    if fn is None:
        return False
    fn(
        data_pointer(param_at), data_pointer(grad_at), data_pointer(offsets), len(param_at),
        None if momentum_buffer is None else data_pointer(momentum_buffer), int(first), int(nesterov), int(maximize),
        lr, momentum, 1 - dampening, weight_decay)
    return True


def rmsprop(param_at: np.ndarray, grad_at: np.ndarray, offsets: np.ndarray, square_avg: np.ndarray,
            grad_avg: np.ndarray | None, momentum_buffer: np.ndarray | None, *, lr: float, alpha: float, eps: float,
            weight_decay: float, momentum: float, maximize: bool) -> bool:
    """One RMSprop step in place (as `adam`'s arguments and result; centered where the flat `grad_avg` is given,
    with momentum where `momentum_buffer` is)."""
    fn = _library(rmsprop_loop(square_avg.dtype, centered=grad_avg is not None, momentum=momentum_buffer is not None))
    if fn is None:
        return False
    fn(
        data_pointer(param_at), data_pointer(grad_at), data_pointer(offsets), len(param_at), data_pointer(square_avg),
        None if grad_avg is None else data_pointer(grad_avg),
        None if momentum_buffer is None else data_pointer(momentum_buffer), int(maximize), lr, alpha, 1 - alpha,
        eps, weight_decay, momentum)
    return True
