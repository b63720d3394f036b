"""`Target`: one backend as one object, what code generation asks of it and how it builds and launches kernels.

Code generation (fnx/lowering/codegen.py) reads a target's data: its C type names, the templates of its prelude
and kernel shells, which family of kernel shells it takes (`gpu`) and a few numerical choices. The executable
plan (fnx/lowering/plan.py) asks it to `build` the rendered kernels into a `Program` and to launch each one. A
new backend is a module defining one `Target` (templates/ holds its prelude and, unless it shares another
target's, its kernel shells), registered in fnx/lowering/targets/__init__.py.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..expressions import C_TYPES, TEMP_TYPES, literal

if TYPE_CHECKING:
    from ..codegen import GeneratedKernel

__all__ = ["Target", "GpuTarget", "Program", "translation_unit", "GPU_KERNELS"]

_CALL = re.compile(r"\b([A-Za-z_]\w*)\(")
# The kernel shells of the GPU targets (CUDA, OpenCL), written in the dialect that each one's prelude defines.
GPU_KERNELS = {"elementwise": "gpu_elementwise.j2", "reduce": "gpu_reduce.j2",
               "reduce_columns": "gpu_reduce_columns.j2"}


@dataclass
class Program:
    """A target's compiled kernels: the whole translation unit (prelude and kernels), the error flag that kernels
    which check values raise (a 1-element int32 array on the target's device; None where no kernel checks), and
    `launcher(gk)`, what the plan's driver runs kernel `gk` with (plan._Driver._kernel): on the CPU, the C
    function with its argument blocks, called inline; on a device, `run(*inputs) -> outputs`."""

    source: str
    flag: Any
    launcher: Callable[[GeneratedKernel], Any]


@dataclass(frozen=True, eq=False)
class Target:
    """A backend: its name (`backend="c"`), the data code generation reads, and `require`/`build` (subclasses).

    `gpu` chooses the family of kernel shells that codegen fills in: False for loops over rows that run on
    threads and that the C compiler vectorises (per-row scratch, lanes across rows in column mode, float32
    sums in double); True for a thread per element and a block per reduction row whose leader stores
    (2-D blocks in column mode, several blocks per row and a combining last block in split mode). The GPU
    targets share their kernel shells (templates/gpu_*.j2) and differ in their preludes, which define the
    dialect the shells are written in (FNX_KERNEL, FNX_SYNC, ...), and in `shuffles`: whether blocks combine
    partials with warp shuffles (CUDA) or through local memory (OpenCL), in the same order either way.
    """

    name: str                       # the backend's name; also salts each kernel's hash
    extension: str                  # suffix of a file holding its source: "c", "cu", "cl"
    prelude: str                    # template of the includes, macros and math functions before the kernels
    kernels: Mapping[str, str]      # kernel shell template per shape: "elementwise", "reduce", "reduce_columns"
    gpu: bool                       # the family of kernel shells (above)
    vector_width: int = 0           # flat elementwise kernels: elements per thread through one wide load; 0: none
    shuffles: bool = False          # GPU: blocks combine partials with warp shuffles (else through local memory)
    double_sums: bool = False       # float32 sums accumulate in double
    types: Mapping[str, str] = field(default_factory=lambda: C_TYPES)          # dtype name -> stored type
    temp_types: Mapping[str, str] = field(default_factory=lambda: TEMP_TYPES)  # dtype name -> a value's type
    math_names: Mapping[str, str] = field(default_factory=dict)   # calls of the expression table renamed
    long_suffix: str = "LL"         # of int64 literals ("L" where `long long` is not 64 bits: OpenCL C)

    def rename_calls(self, expression: str) -> str:
        """`expression` with its function calls renamed as `math_names` says (C and CUDA keep the table's)."""
        if not self.math_names:
            return expression
        return _CALL.sub(lambda m: self.math_names.get(m[1], m[1]) + "(", expression)

    def literal(self, value, dtype) -> str:
        """A literal of `dtype` with exactly `value`, spelled for this target."""
        return literal(value, dtype, self.types, self.long_suffix)

    def prelude_context(self) -> dict:
        """Values the prelude template reads besides the math function lists (C: where numpy's data pointer is)."""
        return {}

    def require(self) -> None:
        """Raise when this machine cannot build for the target (C: NoCompilerError without a C compiler)."""

    def build(self, kernels: list[GeneratedKernel], prelude: Callable[..., str]) -> Program:
        """Compile `kernels` (rendered for this target); `prelude(simd=True)` renders the target's prelude."""
        raise NotImplementedError(f"target {self.name!r} cannot build kernels")

    def __repr__(self) -> str:
        return f"<Target {self.name}>"


class GpuTarget(Target):
    """A GPU target: one module of all kernels, built and launched by its runtime module (`runtime()`:
    fnx/lowering/cuda.py, opencl.py), whose launchers allocate the outputs they are not given."""

    def runtime(self):
        """The module with `load_module(source, names)`, `error_flag()` and `launcher(module, gk, flag)`."""
        raise NotImplementedError(f"target {self.name!r} names no runtime")

    def build(self, kernels: list[GeneratedKernel], prelude: Callable[..., str]) -> Program:
        runtime = self.runtime()
        source = translation_unit(prelude(), kernels)
        module = runtime.load_module(source, [k.name for k in kernels]) if kernels else None
        flag = runtime.error_flag() if any(k.kernel.checks for k in kernels) else None
        return Program(source, flag, lambda gk: runtime.launcher(module, gk, flag))


def translation_unit(prelude: str, kernels: list[GeneratedKernel]) -> str:
    """One source: `prelude` followed by each distinct kernel once."""
    unique = {k.name: k.source for k in kernels}
    return prelude + "".join(unique.values())
