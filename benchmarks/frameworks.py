"""The frameworks compared (fnx, numpy, torch, jax, cupy): optional imports, inputs, syncs and the environment header.

Only fnx and numpy are required; torch, jax and cupy are used when importable
and otherwise reported as skipped. cupy runs on CUDA only: it is the
reference of the CUDA-only cases (device-to-device copy bandwidth).
"""
from __future__ import annotations

import importlib
import os
import platform
import subprocess
from pathlib import Path

import numpy as np

from .registry import Skip

__all__ = ["FRAMEWORKS", "load", "array", "sync_for", "environment", "describe", "BLAS_ENV_NOTE_VAR"]

FRAMEWORKS = ("fnx", "numpy", "torch", "jax", "cupy")
BLAS_ENV_NOTE_VAR = "FNX_BENCH_UNSET_BLAS_ENV"  # set by __main__ when it re-ran itself without the BLAS overrides

_MODULES = {"fnx": "fnx", "numpy": "numpy", "torch": "torch", "jax": "jax.numpy", "cupy": "cupy"}
_loaded: dict = {}


def load(fw: str):
    """The array module of framework `fw` (jax.numpy for jax); raises Skip when an optional one is missing."""
    if fw not in _loaded:
        try:
            _loaded[fw] = importlib.import_module(_MODULES[fw])
        except Exception as e:  # a missing or broken optional install must not stop the fnx measurements
            if fw in ("fnx", "numpy"):
                raise
            _loaded[fw] = (f"{fw} not installed" if isinstance(e, ImportError)
                           else f"{fw} failed to import: {type(e).__name__}: {e}")
    mod = _loaded[fw]
    if isinstance(mod, str):
        raise Skip(mod)
    return mod


def array(fw: str, host: np.ndarray, device: str = "cpu", requires_grad: bool = False):
    """A copy of the numpy array `host` as an array of framework `fw` on `device`."""
    xp = load(fw)
    if fw == "fnx":
        return xp.tensor(host, device=device, requires_grad=requires_grad)
    if fw == "torch":
        return xp.from_numpy(host.copy()).to(device).requires_grad_(requires_grad)
    if fw == "cupy":
        if device == "cpu":
            raise Skip("cupy runs on CUDA only")
        return xp.asarray(host)
    if device != "cpu":
        raise Skip(f"{fw} runs on the CPU only here")
    if fw == "jax":
        import jax

        return jax.device_put(host.copy())
    return host.copy()


def sync_for(fw: str, device: str):
    """What waits for `fw`'s queued work on `device` (None where every call is synchronous)."""
    if fw == "jax":
        import jax

        return jax.block_until_ready
    if device == "cpu":
        return None
    if fw == "torch":
        import torch

        return lambda out: torch.cuda.synchronize()
    if fw == "fnx":
        import fnx

        return lambda out: fnx.cuda.synchronize()
    if fw == "cupy":
        import cupy

        return lambda out: cupy.cuda.runtime.deviceSynchronize()
    return None


# ---------------------------------------------------------------- environment header
def environment() -> dict:
    """Machine, versions and BLAS configuration, for the table header and the JSON file."""
    env = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpu_flags": _cpu_flags(),
        "cores": os.cpu_count(),
        "load_average": _load_average(),
        "fnx_commit": _git_commit(),
        "numpy": np.__version__,
        "blas": _blas_info(),
        "blas_env": _blas_env_note(),
    }
    for fw in ("torch", "jax"):
        try:
            mod = load(fw)
        except Skip:
            env[fw] = None
            continue
        env[fw] = getattr(mod, "__version__", None) or importlib.import_module(fw).__version__
        if fw == "torch":
            env["torch_threads"] = mod.get_num_threads()
    return env


def _cpu_model() -> str:
    """The model name, with family and model numbers (a virtual machine may name only the vendor: "AMD EPYC")."""
    try:
        fields = {}
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
        if "model name" in fields:
            numbers = f" (family {fields['cpu family']}, model {fields['model']})" if "cpu family" in fields else ""
            return fields["model name"] + numbers
    except OSError:
        pass
    return platform.processor() or "unknown"


_SIMD_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
               "amx_tile", "neon", "asimd", "sve")


def _cpu_flags() -> list[str]:
    """The SIMD extensions among the CPU's flags (what compiled kernels and BLAS can use)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                have = set(line.split(":", 1)[1].split())
                return [f for f in _SIMD_FLAGS if f in have]
    except OSError:
        pass
    return []


def _load_average() -> list | None:
    """1, 5 and 15 minute load averages at start: other processes on a small machine skew timings."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def _git_commit() -> str | None:
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                              timeout=5)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def _blas_info() -> list[str]:
    """numpy's BLAS libraries with kernel architecture and threads (needs threadpoolctl; else empty)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    out = []
    for lib in threadpool_info():
        if lib.get("user_api") != "blas":
            continue
        out.append(f"{lib.get('internal_api')} {lib.get('version')} ({lib.get('architecture') or '?'}, "
                   f"{lib.get('num_threads')} threads)")
    return out


def _blas_env_note() -> str:
    unset = os.environ.get(BLAS_ENV_NOTE_VAR)
    if unset:
        return f"unset for this run only: {unset}"
    kept = [f"{k}={os.environ[k]}" for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ]
    return f"kept (--keep-blas-env): {', '.join(kept)}" if kept else "no OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE set"


def describe(env: dict) -> list[str]:
    """The header lines printed above the table."""
    lines = [f"fnx benchmarks  commit {env['fnx_commit'] or '?'}  python {env['python']}  {env['platform']}",
             f"cpu: {env['cpu']} x {env['cores']}  load average {env['load_average'] or '?'}",
             f"cpu flags: {' '.join(env['cpu_flags']) or '?'}",
             f"numpy {env['numpy']}  torch {env.get('torch') or 'not installed'}"
             + (f" ({env['torch_threads']} threads)" if env.get("torch_threads") else "")
             + f"  jax {env.get('jax') or 'not installed'}"]
    blas = "; ".join(env["blas"]) if env["blas"] else "(install threadpoolctl to show it)"
    lines.append(f"numpy BLAS: {blas}; BLAS env: {env['blas_env']}")
    for fw, path in env.get("interpreters", {}).items():
        lines.append(f"{fw} worker processes run {path}")
    return lines
