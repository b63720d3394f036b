"""W10: fnx.export's standalone C. The exported GEMM (one matmul written as C by `write_c`, built with
`cc -O3 -march=native -ffp-contract=fast -fopenmp`, called in-process through ctypes) against numpy's BLAS at
256, 512 and 1024, on 1 and 2 threads. GFLOP/s = 2 n^3 / time; the header names the CPU."""
from __future__ import annotations

import ctypes
import ctypes.util
import subprocess
import tempfile

import numpy as np

from .registry import Bench, Skip, note, workload

__all__ = ["GEMM_SIZES", "C_FLAGS"]

GEMM_SIZES = (256, 512, 1024)
C_FLAGS = ("-std=c99", "-O3", "-march=native", "-ffp-contract=fast", "-fopenmp")


def _operands(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(n)
    return rng.standard_normal((n, n), np.float32), rng.standard_normal((n, n), np.float32)


def _exported_gemm(n: int, threads: int):
    """The C program of `a @ b` at size n as a loaded library: a callable running it once on fixed operands."""
    import fnx
    from fnx.export.c_program import write_c

    a, b = _operands(n)
    closed = fnx.make_jaxpr(lambda x, y: x @ y)(fnx.tensor(a), fnx.tensor(b))
    folder = tempfile.mkdtemp(prefix="fnx-w10-")
    write_c(closed, closed.consts, folder, "gemm", embed_weights=True)
    built = subprocess.run(["cc", *C_FLAGS, "-shared", "-fPIC", "-o", "libgemm.so", "gemm.c", "-lm"], cwd=folder,
                           capture_output=True, text=True)
    if built.returncode != 0:
        raise Skip(f"cc could not build the exported C: {built.stderr[:200]}")
    lib = ctypes.CDLL(f"{folder}/libgemm.so")
    gomp = ctypes.util.find_library("gomp")
    if gomp is None:
        raise Skip("no libgomp to set the exported C's thread count")
    ctypes.CDLL(gomp).omp_set_num_threads(threads)
    lib.gemm_init(None)
    out = np.empty((n, n), np.float32)
    args = [ctypes.c_void_p(x.ctypes.data) for x in (a, b, out)]
    lib.gemm_run.restype = ctypes.c_int

    def run(operands=(a, b)):   # the operands stay alive as long as the pointers to them
        if lib.gemm_run(*args) != 0:
            raise RuntimeError("the exported GEMM failed")
        return out

    run()
    np.testing.assert_allclose(out, a @ b, rtol=1e-3, atol=1e-3 * n ** 0.5)
    return run


def _numpy_gemm(n: int, threads: int) -> Bench:
    from threadpoolctl import threadpool_limits

    a, b = _operands(n)
    limits = threadpool_limits(limits=threads)
    return Bench(lambda: a @ b, close=limits.restore_original_limits)


def _register(n: int, threads: int) -> None:
    @workload("W10", f"matmul {n}^3 f32, {threads} thread{'s' if threads > 1 else ''}: exported C vs BLAS",
              reference="numpy", frameworks=("fnx export-c", "numpy"), unit="ms")
    def build(fw: str, device: str) -> Bench:
        note(f"W10: the exported C is built with cc {' '.join(C_FLAGS)}; GFLOP/s = 2 n^3 / time")
        if fw == "numpy":
            return _numpy_gemm(n, threads)
        from threadpoolctl import threadpool_limits

        limits = threadpool_limits(limits=1)   # numpy's own BLAS threads stay out of the way
        return Bench(_exported_gemm(n, threads), close=limits.restore_original_limits)


for _threads in (1, 2):
    for _n in GEMM_SIZES:
        _register(_n, _threads)
