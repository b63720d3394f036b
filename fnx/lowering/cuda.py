"""The CUDA backend: compile generated CUDA C with NVRTC (through CuPy), cache the binary, launch kernels.

CuPy is imported only when a CUDA executable is built. Compiled binaries go
to the fnx disk cache (`FNX_CACHE_DIR`) keyed by source, options, GPU
architecture and fnx version; when CuPy's NVRTC bindings are not usable the
source is handed to `cupy.RawModule`, which keeps its own cache. Raw kernels
check nothing about their arguments (DESIGN.md), so every size and stride
is passed as a `numpy.int64` and every buffer as a C-contiguous CuPy array.

`cuda_source(closed)` renders the CUDA translation unit of a jaxpr without
CuPy, so machines without a GPU can still compile-check it with nvcc.
"""
from __future__ import annotations

import logging
import math

import numpy as np

from .. import __version__
from ..ir import ClosedJaxpr
from .cache import cache_key, cached_file
from .codegen import GeneratedKernel, render_module
from .plan import plan_steps

__all__ = ["cuda_source", "load_module", "launcher", "OPTIONS"]

log = logging.getLogger("fnx.compile")

OPTIONS = ("--std=c++14", "--fmad=false")   # no contraction: results stay close to the CPU's, as without fast-math
_BLOCK = 256                                  # FNX_THREADS in the CUDA prelude


def cuda_source(closed: ClosedJaxpr) -> str:
    """The CUDA source that `build_executable(closed, backend="cuda")` would compile (CuPy not needed)."""
    _, kernels = plan_steps(closed, "cuda")
    return render_module(kernels, "cuda")


def _cupy():
    import cupy

    return cupy


def _compile_cubin(source: str, arch: str, tmp: str) -> None:
    from cupy_backends.cuda.libs import nvrtc

    prog = nvrtc.createProgram(source, "fnx_kernels.cu", (), ())
    try:
        try:
            nvrtc.compileProgram(prog, (*OPTIONS, f"--gpu-architecture=sm_{arch}"))
        except Exception as e:
            raise RuntimeError(f"fnx: NVRTC failed on generated CUDA source:\n{nvrtc.getProgramLog(prog)}") from e
        binary = nvrtc.getCUBIN(prog)
    finally:
        nvrtc.destroyProgram(prog)
    with open(tmp, "wb") as f:
        f.write(binary)


def load_module(source: str, names: list[str]):
    """A CuPy module holding the compiled kernels `names` of `source` (compiled once per machine, then cached)."""
    cp = _cupy()
    arch = cp.cuda.Device().compute_capability
    key = cache_key(source, " ".join(OPTIONS), arch, __version__)
    try:
        path, cached = cached_file(names[0], key, ".cubin", lambda tmp: _compile_cubin(source, arch, tmp))
        log.info("%s %s", "cache hit" if cached else "compiled", path.name)
        module = cp.RawModule(path=str(path))
    except (ImportError, AttributeError):   # no usable NVRTC bindings here: CuPy compiles (and caches) the source
        module = cp.RawModule(code=source, options=OPTIONS)
    for n in names:
        module.get_function(n)   # fail here, at build time, if a kernel is missing
    return module


def launcher(module, gk: GeneratedKernel):
    """A function launching `gk` on C-contiguous CuPy inputs; it allocates and returns the outputs."""
    cp = _cupy()
    fn = module.get_function(gk.name)
    k = gk.kernel
    if k.kind == "elementwise":
        total = math.prod(k.sizes)
        extra = total
        grid = max(1, min((total + _BLOCK - 1) // _BLOCK, cp.cuda.Device().attributes["MultiProcessorCount"] * 32))
    else:
        rows = math.prod(k.sizes[:k.n_rows])
        extra, grid = rows, rows
    meta = tuple(np.int64(v) for v in gk.meta) + (np.int64(extra),)
    specs = [(tuple(v.aval.shape), v.aval.dtype.np) for v in k.outputs]

    def run(*ins):
        outs = [cp.empty(shape, dtype) for shape, dtype in specs]
        fn((grid,), (_BLOCK,), (*ins, *outs, *meta))
        return outs

    return run
