"""Lowering: from an optimised ClosedJaxpr to an `Executable` that runs it on concrete tensors.

`lower(closed, backend=...)` is the one entry point. "interpret" evaluates the jaxpr op by op (the
reference semantics every compile test compares against); every other backend is a `Target` registered in
fnx/lowering/targets/ ("c", "cuda"), for which fnx/lowering/plan.py generates fused kernels. Where code
generation is unavailable (no C compiler for the default backend, the template engine it renders with is not
installed, complex values, which the kernels have no arithmetic for, or a primitive of this jaxpr it does not
support yet), the jaxpr runs on the interpreter instead, with one warning per reason; a backend="c" asked for
explicitly (or by `FNX_BACKEND`) on a machine without a C compiler is an error instead, and so is any other
failure, a broken import included.

Importing lowering also registers its eager kernels (fnx/lowering/eager_kernels.py): the compiled C kernels
that eager mode runs for the primitives numpy has no fast form of (erf, gelu, ...).
"""
from __future__ import annotations

import os
from typing import Protocol

from .._warn import warn
from ..ir import ClosedJaxpr
from ..tensor import Tensor
from . import eager_kernels  # noqa: F401  (sets core.eager_kernel_hook)
from . import scatter_kernels  # noqa: F401  (sets fnx.ops.indexing.native)
from . import depthwise_kernels  # noqa: F401  (sets fnx.ops.depthwise_conv.native)
from . import gemm_kernels  # noqa: F401  (sets fnx.ops.linalg.gemm)
from . import window_kernels  # noqa: F401  (sets fnx.ops.windows.native)
from . import copy_kernels  # noqa: F401  (sets fnx.array_layout.native)

__all__ = ["lower", "Executable", "backends", "check_backend", "default_backend"]

# Third-party packages that code generation needs and whose absence leaves the interpreter (an ImportError of
# anything else is a bug, and raises).
_OPTIONAL = frozenset({"jinja2"})


class Executable(Protocol):
    """What `lower` returns: a callable on concrete tensors (the jaxpr's invars, in order)."""

    def __call__(self, *args: Tensor) -> list[Tensor]:
        ...

    def kernels(self) -> list:
        """Generated kernels (objects with .name, .source, .target); [] for the interpreter."""
        ...

    def source(self) -> str:
        """All generated kernel source, concatenated ("" for the interpreter)."""
        ...


_warned: set[str] = set()


def default_backend(devices) -> str:
    """`FNX_BACKEND` when set, else "cuda" when any input lives on a GPU, else "c" when there is a C compiler,
    else "interpret" (with one warning)."""
    from .cpu import NoCompilerError, compiler

    forced = os.environ.get("FNX_BACKEND")
    if forced:
        return check_backend(forced)
    if any(d.type == "cuda" for d in devices):
        return "cuda"
    try:
        compiler()
    except NoCompilerError as e:
        _warn_once(f"fnx.compile: {e}; running the IR interpreter instead (same results as eager mode, slower)")
        return "interpret"
    return "c"


def backends() -> tuple[str, ...]:
    """The backend names: "interpret", then the registered targets' ("c", "cuda")."""
    # Imported on first use, not with fnx: the targets bring in their toolchain modules (fnx/lowering/cpu.py, cuda.py).
    from .targets import TARGETS

    return ("interpret", *TARGETS)


def check_backend(backend: str) -> str:
    """`backend`, when it names a backend (else ValueError)."""
    names = backends()
    if backend not in names:
        raise ValueError(f"fnx.compile: unknown backend {backend!r}; expected one of {', '.join(names)}")
    return backend


def lower(closed: ClosedJaxpr, *, backend: str) -> Executable:
    """An Executable running `closed` with `backend` ("interpret", "c" or "cuda")."""
    from .interpret import Interpreted

    if check_backend(backend) == "interpret":
        return Interpreted(closed)
    complex_dtypes = _complex_dtypes(closed)
    if complex_dtypes:
        _warn_once(f"fnx.compile: the {backend!r} backend has no complex arithmetic (this function holds "
                   f"{', '.join(complex_dtypes)} values); running the IR interpreter instead (eager mode's numbers "
                   f"at eager speed: call the function without fnx.compile to skip the staging)")
        return Interpreted(closed)
    try:
        from .plan import build_executable
    except ModuleNotFoundError as e:
        if (e.name or "").partition(".")[0] not in _OPTIONAL:
            raise
        _warn_once(f"fnx.compile: the {backend!r} code generator is unavailable ({e}); running the IR interpreter "
                   f"instead")
        return Interpreted(closed)
    from .cpu import NoCompilerError

    try:
        return build_executable(closed, backend=backend)
    except NoCompilerError as e:   # backend="c" was asked for (default_backend checks for a compiler)
        raise NoCompilerError(f"fnx.compile: backend {backend!r} was asked for (by backend= or FNX_BACKEND), but "
                              f"{e}; or ask for backend=\"interpret\"") from None
    except NotImplementedError as e:
        _warn_once(f"fnx.compile: the {backend!r} backend cannot compile this function ({e}); running the IR "
                   f"interpreter instead")
        return Interpreted(closed)


def _complex_dtypes(closed: ClosedJaxpr) -> list[str]:
    """The names of the complex dtypes among the values of `closed` (its inputs and equation outputs)."""
    j = closed.jaxpr
    values = [*j.constvars, *j.invars, *(v for e in j.eqns for v in e.outvars)]
    return sorted({v.aval.dtype.name for v in values if v.aval.dtype.is_complex})


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        warn(message, RuntimeWarning)
