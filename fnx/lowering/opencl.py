"""The OpenCL backend's runtime: build generated OpenCL C with pyopencl, launch kernels on numpy arrays.

pyopencl is imported only when an OpenCL executable is built. The device is the one `PYOPENCL_CTX` names
(pyopencl's convention, e.g. "0:1"), else the first GPU of any platform, else the first device (PoCL's CPU
device, say). Tensors stay on the CPU: a launch copies its inputs to device buffers and its outputs back, so
an executable's library steps (numpy) and kernels can alternate. Programs are built once per process, source
and build options (fnx's `OPTIONS`, plus pyopencl's `PYOPENCL_BUILD_OPTIONS`); the OpenCL implementation
keeps its own cache of compiled kernels (PoCL: `POCL_CACHE_DIR`), while pyopencl's disk cache, which
unpickles what it reads, is not used. Every size and stride is passed as a
`numpy.int64` (the kernels declare 64-bit `fnx_index` parameters).
"""
from __future__ import annotations

import functools
import math
import os
import threading
from typing import TYPE_CHECKING

import numpy as np

from .gpu_launch import THREADS, VECTOR, flat_grid, ndrange, reduction

if TYPE_CHECKING:
    from .codegen import GeneratedKernel

__all__ = ["queue", "compute_units", "load_module", "launcher", "error_flag", "OPTIONS"]

# Correctly rounded float32 division and sqrt, as in C and CUDA (OpenCL allows 2.5 and 3 ulp otherwise); the
# prelude turns contraction off (CUDA: --fmad=false).
OPTIONS = ("-cl-std=CL1.2", "-cl-fp32-correctly-rounded-divide-sqrt")

_programs: dict[tuple, dict] = {}   # (source, PYOPENCL_BUILD_OPTIONS) -> its kernels by name
_lock = threading.Lock()   # over builds and launches


def _cl():
    import pyopencl

    return pyopencl


@functools.cache
def queue():
    """The command queue of the device that OpenCL executables run on (see the module docstring)."""
    cl = _cl()
    if os.environ.get("PYOPENCL_CTX"):
        context = cl.create_some_context(interactive=False)
    else:
        devices = [d for p in cl.get_platforms() for d in p.get_devices()]
        if not devices:
            raise RuntimeError("fnx.compile(backend='opencl'): no OpenCL device found; install an OpenCL "
                               "implementation (pip install pocl-binary-distribution gives a CPU device)")
        gpus = [d for d in devices if d.type & cl.device_type.GPU]
        context = cl.Context([(gpus or devices)[0]])
    device = context.devices[0]
    if "cl_khr_fp64" not in device.extensions.split():
        raise NotImplementedError(f"OpenCL device {device.name!r} has no float64 (cl_khr_fp64), which the "
                                  f"generated kernels use")
    return cl.CommandQueue(context)


def compute_units() -> int:
    """The device's compute units, which grids scale with (the CPU threads of PoCL's device)."""
    return queue().device.max_compute_units


def load_module(source: str, names: list[str]) -> dict:
    """The kernels `names` of `source`, by name (built once per process; a missing kernel fails here)."""
    key = (source, os.environ.get("PYOPENCL_BUILD_OPTIONS"))
    with _lock:
        kernels = _programs.get(key)
        if kernels is None:
            cl = _cl()
            program = cl.Program(queue().context, source).build(options=list(OPTIONS), cache_dir=False)
            kernels = _programs[key] = {n: cl.Kernel(program, n) for n in names}
    return kernels


def error_flag():
    """A zeroed 1-element int32 device array (pyopencl.array: `.get()`, `.fill(0)`): the flag that kernels which
    check values raise."""
    import pyopencl.array

    return pyopencl.array.zeros(queue(), 1, np.int32)


def launcher(kernels: dict, gk: GeneratedKernel, flag=None):
    """A function launching `gk` on C-contiguous numpy inputs; it returns numpy outputs (those the driver lends,
    `outs`, filled in place). NDRanges (fnx/lowering/gpu_launch.py), arguments and reduction workspaces are fixed
    here, once per kernel. A kernel that checks values gets the error flag `flag` after its buffers."""
    cl = _cl()
    q = queue()
    kernel = kernels[gk.name]
    k = gk.kernel
    units = compute_units()
    meta = tuple(np.int64(v) for v in gk.meta)
    if k.checks:   # the flag goes between the buffers and the sizes, as the kernel's parameters list it
        meta = ((error_flag() if flag is None else flag).data,) + meta
    specs = [(tuple(v.aval.shape), v.aval.dtype.np) for v in k.outputs]
    if gk.mode == "flat":
        total = math.prod(k.sizes)
        if gk.aligned:   # fresh buffers are aligned to the device's base address alignment (>= 128 bytes)
            grid, tail = flat_grid(-(-total // VECTOR), units), (np.int64(total), np.int64(total // VECTOR))
        else:
            grid, tail = flat_grid(total, units), (np.int64(total),)
        block = (THREADS,)
    else:
        launch = reduction(gk, units)
        grid, block, tail = launch.grid, launch.block, (np.int64(launch.rows),)
        if gk.mode == "split":   # a partial per block and reduction; counters that the last block resets to 0
            partials = tuple(_buffer(cl, q, launch.rows * launch.blocks * p.dtype.np.itemsize) for p in k.phases)
            arrived = _upload(cl, q, np.zeros(launch.rows, np.uint32), writable=True)
            tail += (*partials, arrived)
    global_size, local_size = ndrange(grid, block)
    fits = kernel.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, q.device)
    if math.prod(local_size) > fits:
        raise NotImplementedError(f"OpenCL device {q.device.name!r} runs kernel {gk.name} in work-groups of at most "
                                  f"{fits} work-items; fnx's kernels take {math.prod(local_size)}")

    def run(*ins, outs=None):
        outs = [np.empty(shape, dtype) if o is None else o
                for o, (shape, dtype) in zip(outs or [None] * len(specs), specs)]
        written = [_buffer(cl, q, o.nbytes) for o in outs]
        with _lock:   # setting a kernel's arguments and enqueueing it are two steps; executables share kernels
            kernel(q, global_size, local_size, *[_upload(cl, q, x) for x in ins], *written, *meta, *tail)
        for o, b in zip(outs, written):
            if o.nbytes:
                cl.enqueue_copy(q, o, b)
        return outs

    return run


def _buffer(cl, q, nbytes: int):
    """An uninitialised device buffer of `nbytes` (at least one: OpenCL has no empty buffers)."""
    return cl.Buffer(q.context, cl.mem_flags.READ_WRITE, max(nbytes, 1))


def _upload(cl, q, x: np.ndarray, writable: bool = False):
    """A device buffer holding a copy of the C-contiguous array `x`."""
    if not x.nbytes:
        return _buffer(cl, q, 1)
    access = cl.mem_flags.READ_WRITE if writable else cl.mem_flags.READ_ONLY
    return cl.Buffer(q.context, access | cl.mem_flags.COPY_HOST_PTR, hostbuf=x)
