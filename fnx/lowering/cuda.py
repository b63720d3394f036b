"""The CUDA backend: compile generated CUDA C with NVRTC (through CuPy), cache the binary, launch kernels.

CuPy is imported only when a CUDA executable is built. Compiled binaries go
to the fnx disk cache (`FNX_CACHE_DIR`) keyed by source, options, GPU
architecture and fnx version, and are checked against their recorded sha256
before CuPy loads them (fnx/lowering/cache.py); when CuPy's NVRTC bindings
are not usable the source is handed to `cupy.RawModule`, which keeps its own
cache (`CUPY_CACHE_DIR`, hash-checked by CuPy, outside fnx's control). Raw kernels
check nothing about their arguments (docs/architecture.md), so every size and stride
is passed as a `numpy.int64` and every buffer as a C-contiguous CuPy array.
The CUDA target (fnx/lowering/targets/cuda.py) builds and launches through
this module; `plan.generated_source(closed, "cuda")` renders a jaxpr's CUDA
source without CuPy, so machines without a GPU can still compile-check it.
"""
from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING

import numpy as np

from .._version import __version__
from .cache import cache_key, cached_file
from .gpu_launch import THREADS, VECTOR, flat_grid, reduction

if TYPE_CHECKING:
    from .codegen import GeneratedKernel

__all__ = ["load_module", "launcher", "error_flag", "OPTIONS"]

log = logging.getLogger("fnx.compile")

OPTIONS = ("--std=c++14", "--fmad=false")   # no contraction: results stay close to the CPU's, as without fast-math


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


def error_flag():
    """A zeroed 1-element int32 device array: the flag that kernels which check values raise."""
    return _cupy().zeros(1, np.int32)


def launcher(module, gk: GeneratedKernel, flag=None):
    """A function launching `gk` on C-contiguous CuPy inputs; it allocates the outputs (CuPy's memory pool) and
    returns them. Grids (fnx/lowering/gpu_launch.py), argument tuples and reduction workspaces are fixed here, once
    per kernel. A kernel that checks values gets the executable's error flag `flag` (a 1-element int32 CuPy array)
    after its buffers."""
    cp = _cupy()
    fn = module.get_function(gk.name)
    k = gk.kernel
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    meta = tuple(np.int64(v) for v in gk.meta)
    if k.checks:   # the flag goes between the buffers and the sizes, as the kernel's parameters list it
        meta = (cp.zeros(1, np.int32) if flag is None else flag,) + meta
    specs = [(tuple(v.aval.shape), v.aval.dtype.np) for v in k.outputs]
    if gk.mode == "flat":
        return _flat_launcher(cp, fn, gk, meta, specs, sms)
    launch = reduction(gk, sms)
    grid, block, rows = launch.grid, launch.block, launch.rows
    tail = (np.int64(rows),)
    if gk.mode == "split":
        partials = tuple(cp.empty(rows * launch.blocks, p.dtype.np) for p in k.phases)   # one per reduction
        arrived = cp.zeros(rows, cp.uint32)   # the kernel's last block per row resets its counter to 0
        tail += (*partials, arrived)

    def run(*ins, outs=None):
        outs = _outputs(cp, specs, outs)
        fn(grid, block, (*ins, *outs, *meta, *tail))
        return outs

    return run


def _outputs(cp, specs: list, given) -> list:
    """The kernel's output buffers: those the driver lends (donated inputs, `given`; None where it lends none),
    the rest fresh from CuPy's memory pool."""
    if given is None:
        return [cp.empty(shape, dtype) for shape, dtype in specs]
    return [cp.empty(shape, dtype) if g is None else g for g, (shape, dtype) in zip(given, specs)]


def _flat_launcher(cp, fn, gk: GeneratedKernel, meta: tuple, specs: list, sms: int):
    """Elementwise kernels: the vector path when every buffer it reads or writes wide is aligned to its vector's
    size (CuPy's allocations are), else the scalar loop alone."""
    total = math.prod(gk.kernel.sizes)
    grid = lambda work: flat_grid(work, sms)
    block = (THREADS,)
    if not gk.aligned:
        scalar_grid, scalar_args = grid(total), (*meta, np.int64(total))

        def run_scalar(*ins, outs=None):
            outs = _outputs(cp, specs, outs)
            fn(scalar_grid, block, (*ins, *outs, *scalar_args))
            return outs

        return run_scalar
    dtypes = [v.aval.dtype.np for v in gk.kernel.inputs + gk.kernel.outputs]
    checks = [(b, VECTOR * dtypes[b].itemsize) for b in gk.aligned]
    scalar = (grid(total), (*meta, np.int64(total), np.int64(0)))
    vector = (grid(-(-total // VECTOR)), (*meta, np.int64(total), np.int64(total // VECTOR)))

    def run(*ins, outs=None):
        outs = _outputs(cp, specs, outs)
        buffers = (*ins, *outs)
        wide = all(buffers[b].data.ptr % size == 0 for b, size in checks)
        g, args = vector if wide else scalar
        fn(g, block, (*buffers, *args))
        return outs

    return run
