"""`python -m fnx env`: what fnx runs on, as text to paste into a bug report (like PyTorch's collect_env).

Every probe is guarded: a missing or broken optional piece (CuPy, a GPU, MPI, a C compiler) is reported,
never raised. Nothing here initialises MPI or allocates on a GPU; the only program run is the C compiler
(its version, and a tiny probe of which flags work when no compile has recorded that yet) and
`mpiexec --version`.
"""
from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["report", "collect"]

_ENV_VARS = ("FNX_DEBUG", "FNX_LOG", "FNX_BACKEND", "FNX_CACHE_DIR", "FNX_CACHE_MAX_BYTES", "CC", "OMP_NUM_THREADS",
             "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES")


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _line(cmd: list[str], containing: str = "") -> str:
    """The first line of `cmd`'s output that contains `containing` (else its first line)."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"({type(e).__name__})"
    lines = [" ".join(ln.split()) for ln in (done.stdout or done.stderr).splitlines() if ln.strip()]
    return next((ln for ln in lines if containing in ln), lines[0] if lines else "?")


def _cpu() -> str:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{model} ({os.cpu_count()} logical cores, {usable} usable by this process)"


def _blas() -> str:
    """numpy's BLAS as built (numpy.show_config) and, with threadpoolctl installed, as loaded (threads)."""
    import numpy as np

    built = "unknown"
    try:
        deps = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        built = f"{deps.get('name', '?')} {deps.get('version', '')}".strip()
    except Exception:   # numpy < 1.25 has no mode="dicts"
        pass
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return f"{built} (install threadpoolctl to see its threads)"
    from .threads import blas_callback_setters

    pooled = blas_callback_setters()
    loaded = [f"{p.get('internal_api')} {p.get('version') or ''}, {p.get('num_threads')} threads".replace(" ,", ",")
              + (", jobs on fnx's kernel pool" if p.get("filepath") in pooled else "")
              for p in threadpool_info() if p.get("user_api") == "blas"]
    return f"{built}; loaded: {'; '.join(loaded) or 'none'}"


def _compiler() -> list[tuple[str, str]]:
    from .lowering import cpu

    try:
        tc = cpu.toolchain()
    except cpu.NoCompilerError as e:
        return [("C compiler", f"none: {e} (fnx.compile interprets the IR instead)")]
    except Exception as e:
        return [("C compiler", f"error: {e}")]
    version = tc.identity.split("|")[1]
    variant, how = tc.variant, "recorded by an earlier compile"
    if variant is None:
        how = "probed now"
        variant = next((v for v in range(len(cpu._VARIANTS)) if not cpu._probe_fails(tc, v)), None)
    if variant is None:
        return [("C compiler", f"{tc.cc} ({version})"), ("C flags", "no flag variant works: compiling fails")]
    extra, libs, threads, libmvec = cpu._VARIANTS[variant]
    what = f"{'OpenMP threads' if threads else 'no OpenMP threads (omp simd only)'}, " \
           f"{'libmvec vector math' if libmvec else 'scalar libm (no libmvec)'}"
    return [("C compiler", f"{tc.cc} ({version})"),
            ("C flags", f"{' '.join(cpu._BASE_FLAGS + extra + libs)}: {what} ({how})")]


def _cache() -> str:
    from .lowering import cache

    try:
        folder = cache.cache_dir()
        files, size = cache.usage(folder)
        return f"{folder}: {size / 2**20:.1f} MiB in {files} files (limit {cache.max_bytes() / 2**20:.0f} MiB)"
    except Exception as e:
        return f"error: {e}"


def _cuda() -> list[tuple[str, str]]:
    cupy_dist = next((d for d in ("cupy", "cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x") if _version(d)), None)
    nvcc = shutil.which("nvcc")
    rows = [("nvcc", f"{nvcc} ({_line([nvcc, '--version'], 'release')})" if nvcc else "not found")]
    if cupy_dist is None:
        return [("CuPy", "not installed (CUDA tensors unavailable)")] + rows
    try:
        import cupy

        count = cupy.cuda.runtime.getDeviceCount()
        runtime = cupy.cuda.runtime.runtimeGetVersion()
        driver = cupy.cuda.runtime.driverGetVersion()
        names = []
        for i in range(count):
            props = cupy.cuda.runtime.getDeviceProperties(i)
            name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
            names.append(f"cuda:{i} {name} ({props['totalGlobalMem'] / 2**30:.0f} GiB, "
                         f"compute {props['major']}.{props['minor']})")
        rows.insert(0, ("CuPy", f"{cupy.__version__} ({cupy_dist}); CUDA runtime {runtime}, driver {driver}"))
        rows.insert(1, ("GPUs", "; ".join(names) or "none"))
    except Exception as e:
        rows.insert(0, ("CuPy", f"{_version(cupy_dist)} ({cupy_dist}), unusable: {type(e).__name__}: {e}"))
    return rows


def _mpi() -> list[tuple[str, str]]:
    launcher = shutil.which("mpiexec") or shutil.which(str(Path(sys.executable).parent / "mpiexec"))
    version = _version("mpi4py")
    return [("mpi4py", version or "not installed (fnx.distributed's MPI backend unavailable)"),
            ("mpiexec", f"{launcher} ({_line([launcher, '--version'], 'ersion')})" if launcher else "not found")]


def collect() -> list[tuple[str, str]]:
    """The report as (label, value) rows."""
    import numpy as np

    from . import __file__ as fnx_file, __version__

    rows = [("fnx", f"{__version__} ({Path(fnx_file).parent})"),
            ("Python", f"{platform.python_version()} ({platform.python_implementation()}, {sys.executable})"),
            ("Platform", platform.platform()),
            ("CPU", _cpu()),
            ("numpy", f"{np.__version__}; BLAS: {_blas()}")]
    rows += [(dist, _version(dist) or "not installed") for dist in ("ml_dtypes", "jinja2")]
    rows += _compiler()
    rows.append(("kernel cache", _cache()))
    rows += _cuda()
    rows += _mpi()
    rows += [(name, _version(dist) or "not installed") for name, dist in (("PyTorch", "torch"), ("JAX", "jax"))]
    rows += [(f"${k}", os.environ[k]) for k in _ENV_VARS if k in os.environ]
    return rows


def report() -> str:
    rows = collect()
    width = max(len(label) for label, _ in rows)
    return "\n".join(f"{label + ':':<{width + 1}} {value}" for label, value in rows)
