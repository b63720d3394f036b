"""Eager kernels: the "native" primitives (erf, erfc, gelu, ...) run in eager mode as compiled C kernels.

numpy has no fast form of these functions (erf in float64 numpy costs about 45 ns an element, the C kernel
1.5), so a native primitive's impl offers its CPU arrays to `run` first (`core.eager_kernel_hook`, set at
import). The kernel is the one `fnx.compile` generates for the primitive on flat arrays: traced, fused and
rendered by the same code, so eager and compiled results agree bit for bit, and the two share one cache
entry. Sizes are arguments, so one kernel per primitive and dtype serves every shape (a binary one: two
operands of one shape; broadcasting ones take numpy's impl). It is built once per
process, under a lock (a second thread waits for the first build), through the C target: the disk cache
checks a library against its recorded sha256 before loading it and rebuilds a damaged one, and a later
process loads it without compiling. Where no kernel can be built (no C compiler, Jinja2 missing) the
primitive's numpy impl runs, as it does for arrays below `MIN_ELEMENTS` and dtypes C lacks.
"""
from __future__ import annotations

import ctypes
import functools
import threading

import numpy as np

from .. import core
from .._warn import warn
from ..abstract import ShapedArray
from ..core import Primitive
from ..device import cpu
from ..dtypes import float32, float64
from ..transforms.tracing import trace_to_jaxpr

__all__ = ["run", "MIN_ELEMENTS"]

# Below this many elements numpy's impl runs. A kernel call costs about 2 us (ctypes, the output, the argument
# blocks) and beats numpy from a few dozen elements on (measured: erf 2 us vs 50 for 16 elements, sigmoid 4 vs 7
# for 512), but its first use costs a compile (about half a second, once per primitive, dtype and machine): a
# process that only ever sees small arrays (tests, toy examples) keeps numpy and never compiles.
MIN_ELEMENTS = 2048
_DTYPES = {np.dtype(np.float32): float32, np.dtype(np.float64): float64}
_ARRAYS = {n: ctypes.c_void_p * (n + 1) for n in (1, 2)}   # the kernel's array objects: n inputs, the output
_Sizes = ctypes.c_longlong * 1  # its sizes and strides: the element count, for a flat contiguous kernel

_kernels: dict = {}   # (primitive name, numpy dtype) -> C function, or None where numpy runs it
_build_lock = threading.Lock()


def run(prim: Primitive, *arrays: np.ndarray) -> np.ndarray | None:
    """`prim` applied to CPU arrays (one, or two of one shape) by its C kernel, or None where numpy should
    (small or broadcasting arrays, no kernel)."""
    x = arrays[0]
    if x.size < MIN_ELEMENTS or any(a.shape != x.shape or a.dtype != x.dtype for a in arrays[1:]):
        return None
    fn = _kernels.get((prim.name, x.dtype), False)
    if fn is False:
        fn = _load(prim, x.dtype)
    if fn is None:
        return None
    arrays = [np.ascontiguousarray(a) for a in arrays]
    out = np.empty(x.shape, x.dtype)
    fn(_ARRAYS[len(arrays)](*map(id, arrays), id(out)), _Sizes(x.size))
    return out


def _load(prim: Primitive, dtype: np.dtype):
    """The kernel of `prim` for `dtype`, built (or read from the disk cache) by the first thread to ask."""
    with _build_lock:
        key = (prim.name, dtype)
        if key not in _kernels:
            _kernels[key] = _build(prim, _DTYPES[dtype]) if dtype in _DTYPES else None
        return _kernels[key]


def _build(prim: Primitive, dtype):
    """The C function of `prim`'s compiled kernel over a flat array of `dtype`, or None (with a warning when a
    compiler exists but failed)."""
    # Imported here, not with fnx: code generation needs Jinja2, and the C toolchain module sets the OpenMP
    # wait policy for the process (as `lowering.backends` does).
    from .codegen import prelude
    from .cpu import NoCompilerError
    from .plan import plan_steps
    from .targets import get_target

    target = get_target("c")
    try:
        target.require()
        arity = 2 if "binary" in prim.groups else 1
        closed = trace_to_jaxpr(lambda *xs: [prim.bind(*xs)], [ShapedArray((MIN_ELEMENTS,), dtype, cpu)] * arity)
        _, kernels = plan_steps(closed, target)
        (gk,) = kernels
        if gk.n_buffers != arity + 1 or len(gk.meta) != 1 or gk.kernel.sizes != (MIN_ELEMENTS,):
            raise NotImplementedError(f"the kernel of {prim.name} is not flat over its inputs ({gk.kernel})")
        program = target.build([gk], functools.partial(prelude, target))
    except NoCompilerError:
        return None
    except ModuleNotFoundError as e:
        if (e.name or "").partition(".")[0] != "jinja2":   # code generation's optional dependency
            raise
        return None
    except Exception as e:  # noqa: BLE001 (any failure to build leaves numpy's impl, which is always right)
        warn(f"fnx: the eager C kernel of {prim.name} ({dtype}) could not be built ({e}); eager mode computes "
             f"{prim.name} with numpy instead (slower)", RuntimeWarning)
        return None
    return program.launcher(gk)[0]   # (C function, argument blocks): `run` makes its own blocks per call


core.eager_kernel_hook = run
