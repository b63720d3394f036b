"""The backends that generate kernels, one `Target` each (fnx/lowering/targets/base.py), by name.

A new backend is one module here defining its `Target`, its templates in fnx/lowering/templates/, and one
entry in `TARGETS`. Importing this package imports no template engine and no GPU library: the C target's
toolchain module (fnx/lowering/cpu.py) and the GPU targets' runtimes (fnx/lowering/cuda.py and opencl.py, which
import CuPy and pyopencl only when they build).
"""
from __future__ import annotations

from .base import Program, Target, translation_unit
from .c import C
from .cuda import CUDA
from .opencl import OPENCL

__all__ = ["TARGETS", "Target", "Program", "get_target", "translation_unit", "C", "CUDA", "OPENCL"]

TARGETS: dict[str, Target] = {t.name: t for t in (C, CUDA, OPENCL)}


def get_target(target: Target | str) -> Target:
    """The target named `target` (a Target is returned as it is)."""
    if isinstance(target, Target):
        return target
    found = TARGETS.get(target)
    if found is None:
        raise ValueError(f"unknown target {target!r}; expected one of {', '.join(TARGETS)}")
    return found
