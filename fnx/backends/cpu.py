"""`fnx.backends.cpu`: what the CPU offers fnx's generated kernels."""
from __future__ import annotations

__all__ = ["get_cpu_capability"]


def get_cpu_capability() -> str:
    """The widest x86 vector extension this CPU has, in PyTorch's words ("AVX512", "AVX2" or "DEFAULT")."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return "DEFAULT"
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= set(flags):
        return "AVX512"
    return "AVX2" if "avx2" in flags else "DEFAULT"
