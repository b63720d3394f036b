"""The C target: kernels for the CPU, a cached shared library each (built a few to a compiler run by the system C
compiler, fnx/lowering/cpu.py), called through ctypes with the addresses of the numpy array objects and a block of
sizes and strides."""
from __future__ import annotations

import ctypes
from collections.abc import Callable

import numpy as np

from ..._version import __version__
from ..cpu import ARRAY_DATA_OFFSET, compile_libraries, toolchain
from .base import Program, Target, translation_unit

__all__ = ["C", "CTarget"]


class CTarget(Target):
    """Builds with the system C compiler; the driver calls each kernel's C function itself (`c_call`)."""

    def prelude_context(self) -> dict:
        return {"data_offset": ARRAY_DATA_OFFSET}

    def require(self) -> None:
        toolchain()   # no C compiler: NoCompilerError (the default backend interprets instead, an explicit "c" raises)

    def build(self, kernels: list, prelude: Callable[..., str]) -> Program:
        bodies = {k.name: k.source for k in kernels}
        libs = compile_libraries(bodies, __version__, lambda simd: prelude(simd=simd)) if kernels else {}
        flag = np.zeros(1, np.int32) if any(k.kernel.checks for k in kernels) else None
        return Program(translation_unit(prelude(), kernels), flag, lambda gk: c_call(libs[gk.name], gk, flag))


def c_call(lib, gk, flag=None) -> tuple:
    """(C function, array-object block, argument block of sizes and strides) of kernel `gk` in `lib`. A kernel that
    checks values finds the error flag (a 1-element int32 array) after its buffers."""
    fn = lib[gk.name]
    fn.argtypes, fn.restype = None, None   # called with prebuilt ctypes pointers: nothing to convert
    objs = (ctypes.c_void_p * (gk.n_buffers + bool(gk.kernel.checks)))()
    if gk.kernel.checks:
        objs[gk.n_buffers] = id(flag)   # the driver's namespace keeps the flag alive
    return fn, objs, (ctypes.c_longlong * max(len(gk.meta), 1))(*gk.meta)


C = CTarget(name="c", extension="c", prelude="c_prelude.c.j2",
            kernels={"elementwise": "c_elementwise.c.j2", "reduce": "c_reduce.c.j2",
                     "reduce_columns": "c_reduce_columns.c.j2"},
            gpu=False, double_sums=True)
