"""`python -m fnx` (and `python -m fnx env`) print the environment for bug reports, whatever is missing."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import numpy as np

import fnx

ROOT = pathlib.Path(__file__).resolve().parent.parent
LABELS = ("fnx", "Python", "Platform", "CPU", "numpy", "C compiler", "kernel cache", "CuPy", "nvcc", "mpi4py",
          "mpiexec", "PyTorch", "JAX")


def fnx_main(*args: str, **env: str) -> dict[str, str]:
    """The rows of `python -m fnx *args` ({label: value})."""
    done = subprocess.run([sys.executable, "-m", "fnx", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env}, check=True)
    rows = [line.split(":", 1) for line in done.stdout.splitlines()]
    return {label: value.strip() for label, value in rows}


def test_env_reports_versions_compiler_cache_gpu_and_mpi(tmp_path):
    rows = fnx_main(FNX_CACHE_DIR=str(tmp_path))
    assert set(LABELS) <= set(rows), rows
    assert rows["fnx"].startswith(f"{fnx.__version__} (") and str(ROOT / "fnx") in rows["fnx"]
    assert rows["numpy"].startswith(f"{np.__version__}; BLAS: ")
    assert rows["kernel cache"].startswith(f"{tmp_path}: 0.0 MiB in 0 files")
    assert rows["$FNX_CACHE_DIR"] == str(tmp_path)
    if not rows["C compiler"].startswith("none"):
        assert "-O3" in rows["C flags"] and ("OpenMP threads" in rows["C flags"] or "no OpenMP" in rows["C flags"])
    assert rows == {**fnx_main("env", FNX_CACHE_DIR=str(tmp_path)), "CPU": rows["CPU"]}


def test_env_without_a_compiler_says_so(tmp_path):
    rows = fnx_main("env", PATH=str(tmp_path), CC="", FNX_CACHE_DIR=str(tmp_path))
    assert rows["C compiler"].startswith("none: no C compiler found"), rows["C compiler"]
    assert rows["nvcc"] == "not found"
