"""`python -m benchmarks [WORKLOAD ...] [--quick] [--json PATH]`: time fnx against numpy/torch/jax, print one table.

On some processors this environment sets OPENBLAS_CORETYPE and
OPENBLAS_L2_SIZE (older OpenBLAS builds need them), which slow a current
numpy. OpenBLAS reads them when it loads, so before anything imports numpy
this process re-runs itself once without them (this run only; the header says
so); `--keep-blas-env` keeps them.
"""
import os
import sys

_BLAS_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
_NOTE_VAR = "FNX_BENCH_UNSET_BLAS_ENV"  # frameworks.BLAS_ENV_NOTE_VAR (not imported: that would load numpy)


def _rerun_without_blas_overrides() -> None:
    found = {k: os.environ[k] for k in _BLAS_VARS if k in os.environ}
    if not found or "--keep-blas-env" in sys.argv or not sys.executable:
        return
    env = {k: v for k, v in os.environ.items() if k not in _BLAS_VARS}
    env[_NOTE_VAR] = ", ".join(f"{k}={v}" for k, v in found.items())
    os.execve(sys.executable, [sys.executable, "-m", "benchmarks", *sys.argv[1:]], env)


if __name__ == "__main__":
    _rerun_without_blas_overrides()
    from .runner import main

    sys.exit(main())
