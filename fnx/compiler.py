"""`fnx.compiler`: torch.compiler's public surface over `fnx.compile` (fnx/transforms/compile.py).

`is_compiling()` is True while fnx.compile or fnx.export traces a function (its Python code runs once per input
signature on tracers, like code torch.compile's Dynamo traces), `is_exporting()` only under fnx.export, and
`is_dynamo_compiling()` only under fnx.compile (torch's non-strict export does not run Dynamo). `disable(fn)` keeps
fn out of compiled code: called while fnx.compile traces, it stops the trace, so that input signature runs eagerly,
fn included (fnx's graph break runs the whole signature eagerly, where torch.compile compiles the code around the
call); `fullgraph=True` raises instead, as torch does. Under fnx.export, fn is traced like any function, as torch's
non-strict export traces it. With `recursive=True` (the default) the compiled functions fn calls run eagerly too.
"""
from __future__ import annotations

import functools
from typing import Callable

from .errors import ConcretizationError
from .lowering import backends
from .transforms.compile import compilation_disabled, compile, reset_all, tracing_kinds

__all__ = ["is_compiling", "is_dynamo_compiling", "is_exporting", "disable", "reset", "allow_in_graph",
           "assume_constant_result", "compile", "list_backends", "cudagraph_mark_step_begin"]

# Backends only for checking the others (torch.compiler.list_backends's "debug" tag); "inductor" is fnx's default.
_DEBUG_BACKENDS = ("interpret",)


def is_compiling() -> bool:
    """True while fnx.compile or fnx.export traces the code that asks (its Python runs on tracers), else False."""
    return bool(tracing_kinds())


def is_dynamo_compiling() -> bool:
    """True while fnx.compile traces the code that asks (torch.compile's Dynamo); False eagerly and under
    fnx.export, as under torch's non-strict export."""
    return "compile" in tracing_kinds()


def is_exporting() -> bool:
    """True while fnx.export traces the code that asks, else False."""
    return "export" in tracing_kinds()


def _callable(fn, what: str):
    if not callable(fn):
        raise TypeError(f"fnx.compiler.{what}: expected a callable, got a {type(fn).__name__}")


def disable(fn: Callable | None = None, recursive: bool = True, *, reason: str | None = None):
    """`fn` kept out of compiled code (usable as a decorator, with or without arguments): see the module docstring.

    `recursive=False` keeps only fn's own code out: compiled functions it calls still compile. `reason` is shown
    in the error or warning of the graph break.
    """
    if fn is None:
        return functools.partial(disable, recursive=recursive, reason=reason)
    _callable(fn, "disable")
    name = getattr(fn, "__qualname__", type(fn).__name__)
    why = "" if reason is None else f" (reason: {reason})"

    @functools.wraps(fn)
    def disabled(*args, **kwargs):
        kinds = tracing_kinds()
        if kinds and kinds[-1] == "compile":
            raise ConcretizationError(f"fnx.compile does not trace {name}, which is wrapped with "
                                      f"fnx.compiler.disable{why}; remove the disable to compile it")
        if not recursive:
            return fn(*args, **kwargs)
        with compilation_disabled():
            return fn(*args, **kwargs)

    return disabled


def reset() -> None:
    """Clear every fnx.compile'd function's cache of traced signatures: each traces again on its next call
    (generated kernels stay in fnx's on-disk kernel cache, as torch's inductor keeps its cache)."""
    reset_all()


def allow_in_graph(fn):
    """`fn` itself (or a list of each of a list's functions): fnx.compile traces every Python function into the
    compiled program, so the ops fn runs are in the graph already."""
    if isinstance(fn, (list, tuple)):
        return [allow_in_graph(f) for f in fn]
    _callable(fn, "allow_in_graph")
    return fn


def assume_constant_result(fn):
    """`fn` itself: fnx.compile runs Python code once per input signature while tracing, so the Python values a
    function returns are constants of the compiled program already (its tensors are traced)."""
    _callable(fn, "assume_constant_result")
    return fn


def list_backends(exclude_tags=("debug", "experimental")) -> list[str]:
    """The backend names fnx.compile accepts, sorted ("inductor" is the default backend; "interpret", the oracle the
    others are checked against, has the "debug" tag). `exclude_tags=None` lists every backend."""
    names = {"inductor", *backends()}
    if exclude_tags is not None and "debug" in exclude_tags:
        names -= set(_DEBUG_BACKENDS)
    return sorted(names)


def cudagraph_mark_step_begin() -> None:
    """Nothing to do: torch's marks where a training step starts for CUDA graph trees, which may overwrite a
    compiled call's outputs on the next call; fnx.compile does not replay CUDA graphs and never reuses the memory
    of outputs it returned."""
