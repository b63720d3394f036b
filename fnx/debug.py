"""`FNX_DEBUG`: what fnx does, logged while it does it, one level per layer (levels are cumulative).

    FNX_DEBUG=1   every op as it runs (primitive, input shapes and dtypes, device), every compiled call
                  and every kernel it launches
    FNX_DEBUG=2   adds the wall time of each of those
    FNX_DEBUG=3   adds the IR: as traced by compile, after each optimisation pass, and how it was fused
    FNX_DEBUG=4   adds the generated kernel source and the Python driver that calls the kernels

The variable is read once, when fnx is imported (`LEVEL`). Messages go to the "fnx.debug" logger; a
handler printing them to stderr is installed only when FNX_DEBUG is set (and no logging is configured).

With FNX_DEBUG unset nothing is installed: the eager fast path in `fnx.core.bind` is the same code.
With level 1 or more, `_install` wraps every primitive's `impl` as it is read, by putting a descriptor in
place of `Primitive.impl` (a slot). `impl` is what actually computes: eager ops (also those run for
grad, vjp, jvp, vmap and the eager backward pass), the IR interpreter and a compiled function's library
steps all call it, while tracing (make_jaxpr, compile) does not. The lowering layer calls `compiled_call`
and `kernel_call` below when it builds an executable, and `log_ir` for each pass.
"""
from __future__ import annotations

import logging
import os
import sys
import time

import numpy as np

from .abstract import _SHORT
from . import core
from .core import Primitive

__all__ = ["LEVEL", "level", "log", "log_ir", "compiled_call", "kernel_call"]

log = logging.getLogger("fnx.debug")


def _read_level() -> int:
    raw = os.environ.get("FNX_DEBUG", "").strip()
    try:
        return max(int(raw or 0), 0)
    except ValueError:
        print(f"fnx: FNX_DEBUG={raw!r} is not a level (0-4); debug output stays off", file=sys.stderr)
        return 0


LEVEL = _read_level()


def level() -> int:
    """The FNX_DEBUG level this process runs with (0: off), read once when fnx was imported."""
    return LEVEL


# ---------------------------------------------------------------- formatting
def _describe(a) -> str:
    shape, dtype = getattr(a, "shape", None), getattr(a, "dtype", None)
    if shape is None or dtype is None:
        text = repr(a)
        return text if len(text) <= 24 else type(a).__name__
    name = getattr(dtype, "name", str(dtype))
    return f"{_SHORT.get(name, name)}[{','.join(map(str, shape))}]"


_SIMPLE = (int, float, bool, str, type(None))


def _param(value) -> str:
    if isinstance(value, _SIMPLE) or (isinstance(value, tuple) and all(isinstance(v, _SIMPLE) for v in value)):
        text = repr(value)
        return text if len(text) <= 40 else "..."
    name = getattr(value, "name", None)   # an fnx dtype or device
    return name if isinstance(name, str) else "..."


def _device(xp, arrays) -> str:
    if xp is np:
        return "cpu"
    for a in arrays:
        dev = getattr(a, "device", None)
        if dev is not None and hasattr(dev, "id"):
            return f"cuda:{dev.id}"
    return "cuda"


def _op_line(name: str, xp, arrays, params) -> str:
    shown = [_describe(a) for a in arrays] + [f"{k}={_param(v)}" for k, v in params.items()]
    return f"{name}({', '.join(shown)}) on {_device(xp, arrays)}"


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


# ---------------------------------------------------------------- level 1 and 2: ops, compiled calls, kernels
def _logged_impl(name: str, impl):
    """`impl` logging each call (level 1: before it runs; level 2: after, with its wall time)."""
    if LEVEL >= 2:
        def timed(xp, *arrays, **params):
            start = time.perf_counter()
            try:
                return impl(xp, *arrays, **params)
            finally:
                log.debug("%s: %s", _op_line(name, xp, arrays, params), _us(time.perf_counter() - start))
        return timed

    def logged(xp, *arrays, **params):
        log.debug("%s", _op_line(name, xp, arrays, params))
        return impl(xp, *arrays, **params)
    return logged


class WrappedImpl:
    """Stands in for the `impl` slot of Primitive: reading `prim.impl` gives `wrap(prim.name, impl)`; assigning
    stores the plain function in the slot (kept as `slot`), as before. FNX_DEBUG and fnx.profiler install one."""

    def __init__(self, slot, wrap):
        self.slot, self.wrap = slot, wrap

    def __get__(self, prim, owner=None):
        if prim is None:
            return self
        return self.wrap(prim.name, self.slot.__get__(prim, owner))

    def __set__(self, prim, fn) -> None:
        self.slot.__set__(prim, fn)


def _timed(label: str, fn, verb: str):
    """`fn` logging each call with `label` (and its wall time from level 2)."""
    if LEVEL >= 2:
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                log.debug("%s: %s %s", label, verb, _us(time.perf_counter() - start))
        return timed

    def logged(*args, **kwargs):
        log.debug("%s", label)
        return fn(*args, **kwargs)
    return logged


def compiled_call(run, backend: str, kernels: int, library: int):
    """The driver `run` of an executable, logging each call (the lowering layer calls this when LEVEL >= 1)."""
    return _timed(f"compiled call ({backend}: {kernels} kernel(s), {library} library step(s))", run, "took")


def kernel_call(name: str, backend: str, fn):
    """Kernel `fn` logging each launch. A CUDA launch is asynchronous: its time is the launch's, not the GPU's."""
    return _timed(f"kernel {name} ({backend})", fn, "ran in" if backend == "c" else "launched in")


# ---------------------------------------------------------------- level 3 and 4: IR and source
def log_ir(what: str, closed, previous: str | None = None) -> str:
    """Log the IR `closed` (a ClosedJaxpr) under the heading `what`, or only that it is unchanged when its text
    is `previous`; returns the text."""
    text = str(closed)
    if text == previous:
        log.debug("%s: unchanged", what)
    else:
        log.debug("%s (%d equations):\n%s", what, len(closed.jaxpr.eqns), text)
    return text


def _install() -> None:
    if not log.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
        log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    core.set_impl_descriptor(WrappedImpl(Primitive.__dict__["impl"], _logged_impl))


if LEVEL:
    _install()
