"""Primitives, `bind` and the trace stack: the one dispatch point of fnx.

Every op is a `Primitive` carrying its rules (impl, abstract, vjp, jvp,
batch, C expression). `bind` runs a primitive: with no transform active it calls
`impl` on the arrays directly (the eager fast path) and, if an input requires
grad, records a node on the autograd tape. When a transform is active, the
arguments are lifted to the top trace, which interprets the primitive
(JAX's classic trace stack with levels, as in Autodidax).

Grad mode, anomaly mode and the trace stack are per thread (context variables, read through
`state`), so that threads train, trace and switch grad mode independently, as with PyTorch's
grad mode.

Core imports only the leaf modules and the Tensor type below it. The layers above reach back in
through these hooks, each set once when its module is imported, never by a function-level import:

- `record_hook(prim, args, params, out)`, set by fnx.autograd.tape: records the tape node of an
  eager op whose input requires grad.
- `record_cpu_hook(prim, args, params, out)`, set by fnx.autograd.tape: `record_hook` for an op of one or two CPU
  tensors (`bind_unary`, `bind_binary`), whose caller has checked that grad mode is on and anomaly mode and
  saved-tensor hooks are off.
- `record_multiple_hook(prim, args, params, outs)`, set by fnx.autograd.function: records one tape
  node for the outputs of an eager multiple-result primitive.
- `stage_created_hook(value)`, set by fnx.transforms.tracing: while the staging trace (make_jaxpr,
  compile) is the dynamic trace, turns a tensor just made by a creation function into a constant
  of the jaxpr that in-place ops may rebind.
- `eager_kernel_hook(prim, *arrays, **params)`, set by fnx.lowering.eager_kernels: runs a "native"
  primitive (one that numpy has no fast form of: erf, gelu, ...) or a common one that numpy runs on one
  thread (add, mul, exp, ..., sum over trailing dims) on large CPU arrays as a compiled C kernel; returns
  None where it does not (a small array, no C compiler), and the primitive's numpy impl runs.
- `profile_hook(name)`, set by fnx.profiler while a profile records (None otherwise): a context manager that
  records a range; a compiled function's executable runs inside one.
- `sparse_hook(prim, args, params)`, set by fnx.sparse: runs a primitive that failed on an argument of a sparse
  layout (whose array is a stand-in that refuses numpy) as the sparse form of the op, or raises an error that names
  it. It is reached only from the failure path, so dense ops pay nothing for it.

The Tensor methods that call upward are attached to the class by their layer at import, in the same
spirit: the constructor, `to` and a tracer's `__setitem__`/`detach` by fnx._methods (ops), and
`backward`, `retain_grad`, `register_hook` by fnx.autograd. The layer order is the table in
tests/test_layers.py.
"""
from __future__ import annotations

import contextvars
from contextlib import contextmanager
from typing import Any, Callable

import numpy as np

from .abstract import ShapedArray
from .device import cpu as _cpu, device_of_array
from .errors import FnxIndexError, FnxRuntimeError, FnxTypeError, FnxValueError, _FnxError  # noqa: F401 (re-exported)
from .tensor import Tensor as _Tensor, Tracer, from_array, strided as _strided

__all__ = ["Primitive", "bind", "ShapedArray", "Trace", "Tracer", "MainTrace", "new_main"]

_ndarray = np.ndarray
_tensor_new = object.__new__  # the fast path makes its result with `_tensor_new(_Tensor)` and sets the slots


_RULE_USERS = {"impl": "eager execution", "abstract": "tracing (make_jaxpr, compile)",
               "vjp": "reverse-mode autodiff (backward, grad, vjp)", "jvp": "forward-mode autodiff (jvp, jacfwd)",
               "batch": "vmap"}


def _missing_rule(prim_name: str, rule: str):
    def raiser(*args, **params):
        raise NotImplementedError(f"primitive '{prim_name}' has no {rule} rule, so {_RULE_USERS[rule]} does not "
                                  f"support it yet")
    return raiser


class Primitive:
    """An operation with all of its rules. Rules default to a clear error naming the primitive.

    What compile needs is declared here too, and fusion and codegen query it instead of keeping lists of
    names (tinygrad's op groups):
    - `groups`: which of `GROUPS` the primitive belongs to;
    - `c`: per operand class ("f" float32, "d" float64, "i" integers, "b" bool) a C expression over the
      operands `{0}`, `{1}`, ... and the params `{name}` (as C literals), or a function of the operands' names
      and the params that returns one; a class it lacks stays a library step (its impl runs);
    - `cuda`: replacements for some of `c`'s entries where CUDA needs another expression (usually the
      per-target preludes take the difference: `fnx_expf` is one function in each);
    - `monoid`: a reduction's ("add", "mul", "max" or "min");
    - `libm`: the C expression calls the libm function of the primitive's name, which the C prelude declares
      with its SIMD variants: "double" when float32 goes through the double version (the prelude's
      `fnx_<name>f`), "float" when the float32 version is called directly.
    A primitive that declares groups is listed in `Primitive.registry` under its name, which must be unique.
    """

    GROUPS = {
        "elementwise": "computes each element from the operands' elements at the same (broadcast) index: `c`",
        "unary": "takes one operand", "binary": "takes two operands", "ternary": "takes three operands",
        "reduction": "combines elements along axes with `monoid`",
        "movement": "moves elements without computing them: a fused kernel reads through index arithmetic "
                    "(lowering/views.py)",
        "random": "draws counter-based random values: `c` over the key words `{0}`, `{1}`, the element's position "
                  "`{2}` and the split point `{3}` (lowering.expressions.random_half)",
        "check": "passes its operand through; `c` is the condition under which a kernel flags an error",
        "complex": "takes complex operands (fnx/ops/complex.py); an elementwise op outside it refuses them",
        "expensive": "worth keeping in a scratch row rather than recomputing in a later loop",
        "native": "numpy has no fast form of it: eager mode runs its C expression as a compiled kernel on large CPU "
                  "arrays (`eager_kernel_hook`)",
    }
    registry: dict = {}   # name -> Primitive, for each primitive that declares groups

    __slots__ = ("name", "impl", "abstract", "vjp", "jvp", "batch", "view", "saves_inputs", "saves_output",
                 "multiple_results", "differentiable", "vjp_takes_needs", "groups", "c", "cuda", "monoid", "libm",
                 "ufunc", "ufunc_below", "vjp_ignores_out")

    def __init__(self, name: str, *, view: bool = False, saves_inputs: bool = True, saves_output: bool | tuple = False,
                 multiple_results: bool = False, differentiable: bool = True, groups=(), c: dict | None = None,
                 cuda: dict | None = None, monoid: str | None = None, libm: str | None = None):
        self.name = name
        for rule in _RULE_USERS:
            setattr(self, rule, _missing_rule(name, rule))
        self.view = view                    # eager output may alias the first input (shares its version counter)
        self.saves_inputs = saves_inputs    # the vjp reads primal inputs: guard them with version counters
        self.saves_output = saves_output    # the vjp reads the output (of several: True, or the indices it reads)
        self.multiple_results = multiple_results
        self.differentiable = differentiable
        self.vjp_takes_needs = False  # the vjp accepts needs=(bool per input) and skips unneeded cotangents
        self.vjp_ignores_out = False   # the vjp reads nothing of `out`, not even its shape: a node keeps None
        self.ufunc = None   # numpy's function of a binary op: `bind_binary` calls it on small CPU arrays
        self.ufunc_below = 0   # ... of fewer elements than this (larger ones go to impl's eager C kernels)
        self.groups, self.c, self.cuda, self.monoid, self.libm = frozenset(groups), c, cuda, monoid, libm
        if self.groups:
            self._check_declaration()
            Primitive.registry[name] = self

    def reads_output(self, k: int) -> bool:
        """Whether the vjp reads output `k`: an output it does not read may be written in place before backward."""
        return self.saves_output is True or (bool(self.saves_output) and k in self.saves_output)

    def _check_declaration(self) -> None:
        """A declaration that lowering could not use fails here, at import, naming the primitive."""
        def bad(why: str):
            return ValueError(f"primitive '{self.name}': {why}")

        unknown = self.groups - self.GROUPS.keys()
        if unknown:
            raise bad(f"unknown groups {sorted(unknown)} (known: {', '.join(self.GROUPS)})")
        if self.groups & {"elementwise", "random", "check"} and not self.c:
            raise bad("an elementwise, random or check primitive declares its C expression (c=...)")
        if self.cuda and not set(self.cuda) <= set(self.c or ()):
            raise bad("cuda= replaces entries of c=, for operand classes that c= has")
        if ("reduction" in self.groups) != (self.monoid is not None):
            raise bad("a reduction, and only a reduction, declares its monoid")
        if self.libm not in (None, "double", "float"):
            raise bad(f"libm is None, 'double' or 'float', not {self.libm!r}")
        if self.name in Primitive.registry:
            raise bad("another primitive of that name is already declared (Primitive.registry)")

    def def_impl(self, fn: Callable) -> Callable:
        self.impl = fn
        return fn

    def def_abstract(self, fn: Callable) -> Callable:
        self.abstract = fn
        return fn

    def def_vjp(self, fn: Callable) -> Callable:
        self.vjp = fn
        return fn

    def def_jvp(self, fn: Callable) -> Callable:
        self.jvp = fn
        return fn

    def def_batch(self, fn: Callable) -> Callable:
        self.batch = fn
        return fn

    def __repr__(self) -> str:
        return self.name


# ---------------------------------------------------------------- per-thread state read by the fast path
# Grad mode, anomaly mode and the trace stack live in context variables: every thread runs in a contextvars
# context of its own and starts from the defaults (grad mode on, anomaly mode off, no transform), as with
# PyTorch's thread-local grad mode; an asyncio task runs in a copy of its creator's context, so one task's
# `no_grad` does not reach the others either. (Free-threaded Python 3.14 starts a thread in a copy of its
# parent's context, sys.flags.thread_inherit_context: there a thread started inside no_grad starts in it.)
# `bind` reads the flags on every op: ContextVar.get costs about 15 ns, an attribute of a threading.local
# 40 ns or more.
_NO_GRAD = 1   # a bit of the flags: grad mode is off
_TRACING = 2   # a bit of the flags: a transform above the eager trace is active
_RECORD_EXTRAS = 4   # a bit of the flags: anomaly mode or saved-tensor hooks are on (nodes keep more)
_flags = contextvars.ContextVar("fnx_flags", default=0)
_get_flags = _flags.get
_set_flags = _flags.set
_anomaly = contextvars.ContextVar("fnx_anomaly", default=False)
anomaly_enabled = _anomaly.get  # fnx.autograd.detect_anomaly: record forward tracebacks, check backward for NaN
# The innermost (pack_hook, unpack_hook) pair of fnx.autograd.graph.saved_tensors_hooks, or None
saved_hooks = contextvars.ContextVar("fnx_saved_tensors_hooks", default=None)


class _State:
    """The calling thread's state by name: `core.state.grad_enabled`, `.transforms_active`, `.trace_stack`,
    `.dynamic_trace`."""

    __slots__ = ()

    @property
    def grad_enabled(self) -> bool:
        return not _get_flags() & _NO_GRAD

    @property
    def transforms_active(self) -> bool:
        return bool(_get_flags() & _TRACING)

    @property
    def trace_stack(self) -> tuple:
        return _traces.get()[0]

    @property
    def dynamic_trace(self) -> MainTrace:
        return _traces.get()[1]


state = _State()
record_hook = None  # set by fnx.autograd.tape: records a node for an eager op
record_cpu_hook = None  # set by fnx.autograd.tape: records a node for `bind_unary` and `bind_binary`
record_multiple_hook = None  # set by fnx.autograd.function: one node for an eager multiple-result op's outputs
stage_created_hook = None  # set by fnx.transforms.tracing: a tensor made while staging becomes a jaxpr constant
eager_kernel_hook = None  # set by fnx.lowering.eager_kernels: a primitive's C kernel on a large CPU array
profile_hook = None  # set by fnx.profiler while a profile records: a range around a compiled call
sparse_hook = None  # set by fnx.sparse: a primitive applied to a sparse COO tensor


def set_grad_enabled_flag(flag: bool) -> bool:
    """Switch grad mode in the calling thread; returns the previous mode."""
    flags = _get_flags()
    _set_flags(flags & ~_NO_GRAD if flag else flags | _NO_GRAD)
    return not flags & _NO_GRAD


def set_anomaly_enabled(mode: bool) -> bool:
    """Switch anomaly mode in the calling thread; returns the previous mode."""
    prev = _anomaly.get()
    _anomaly.set(bool(mode))
    _sync_record_extras()
    return prev


def set_saved_hooks(hooks) -> contextvars.Token:
    """Make `hooks` (a (pack_hook, unpack_hook) pair, or None) the calling thread's saved-tensor hooks; returns the
    token that `reset_saved_hooks` takes to restore the previous pair."""
    token = saved_hooks.set(hooks)
    _sync_record_extras()
    return token


def reset_saved_hooks(token: contextvars.Token) -> None:
    saved_hooks.reset(token)
    _sync_record_extras()


def _sync_record_extras() -> None:
    """Keep the flags' _RECORD_EXTRAS bit on exactly while anomaly mode or saved-tensor hooks are: `bind_binary`
    reads it with the other flags and leaves such nodes to `record_hook`, which checks both."""
    flags = _get_flags()
    if _anomaly.get() or saved_hooks.get() is not None:
        _set_flags(flags | _RECORD_EXTRAS)
    else:
        _set_flags(flags & ~_RECORD_EXTRAS)


def bind(prim: Primitive, *args, **params):
    """Apply `prim` to tensors `args`; the single entry point of every op."""
    flags = _get_flags()
    if flags and flags & _TRACING:  # flags is 0 (grad mode on, no transform) in the common case: test that first
        return _bind_traced(prim, args, params)
    a0 = args[0]
    try:
        dev = a0._device
        n = len(args)
        if n == 2:
            a1 = args[1]
            if a1._device is not dev:
                raise _device_mismatch(prim, args)
            out = prim.impl(dev._xp, a0._value, a1._value, **params) if params else \
                prim.impl(dev._xp, a0._value, a1._value)
        elif n == 1:
            out = prim.impl(dev._xp, a0._value, **params) if params else prim.impl(dev._xp, a0._value)
        else:
            for a in args:
                if a._device is not dev:
                    raise _device_mismatch(prim, args)
            out = prim.impl(dev._xp, *[a._value for a in args], **params)
    except _FnxError:
        raise
    except Exception as e:
        if any(isinstance(a, _Tensor) and a.layout is not _strided for a in args):
            return sparse_hook(prim, args, params)
        if isinstance(e, AttributeError):
            bad = [type(a).__name__ for a in args if not isinstance(a, _Tensor)]
            if bad:
                raise FnxTypeError(f"{prim.name}(): arguments must be Tensors, got {', '.join(bad)}; wrap values "
                                   f"with fnx.tensor(...)") from e
        raise explain_failure(prim, args, params, e) from e
    if type(out) is not _ndarray:
        if prim.multiple_results:
            return _wrap_multiple(prim, args, params, out)
        if isinstance(out, np.generic):  # numpy turns 0-d results into scalars
            out = np.asarray(out)
        elif dev is _cpu or out.device.id != dev.index:  # the op moved data (device_put)
            dev = device_of_array(out)
    t = _tensor_new(_Tensor)
    t._value = out
    t._device = dev
    t._node = None
    t._requires_grad = False
    t._grad = None
    if prim.view:   # the output aliases the first input: it shares its version counter and base
        t._version = a0._version
        t._base = a0 if a0._base is None else a0._base
    else:
        t._version = [0]
        t._base = None
    t._views = None   # as in tensor.make
    if not flags & _NO_GRAD:  # grad mode on (and no transform, tested above)
        if a0._requires_grad or (n == 2 and a1._requires_grad):
            return record_hook(prim, args, params, t)
        if n > 2:
            for a in args:
                if a._requires_grad:
                    return record_hook(prim, args, params, t)
    return t


# `prim.bind(x, y)` is `bind(prim, x, y)` with no extra frame: a function stored on the class binds as a method.
Primitive.bind = bind


def bind_unary(prim: Primitive, x: _Tensor):
    """`bind(prim, x)` for an elementwise primitive with a numpy function, `prim.ufunc`, on a Tensor (not a
    subclass): a small CPU array in eager mode goes straight to the ufunc (what impl would call: its eager C
    kernels start at `prim.ufunc_below` elements), its node to `record_cpu_hook`. Everything else takes `bind`,
    as in `bind_binary`."""
    flags = _get_flags()
    out = None
    if flags <= _NO_GRAD and direct_ufuncs:
        try:
            xv = x._value
            if x._device is _cpu and xv.size < prim.ufunc_below:
                out = prim.ufunc(xv)
        except Exception:   # not a Tensor, an unsupported dtype: bind's error names the op
            pass
    if out is None:
        return bind(prim, x)
    if type(out) is not _ndarray:   # numpy turns 0-d results into scalars
        out = np.asarray(out)
    t = _tensor_new(_Tensor)   # tensor.make's slots, set here (a call to it costs a tenth of this path)
    t._value, t._device, t._node, t._requires_grad, t._grad = out, _cpu, None, False, None
    t._version, t._base, t._views = [0], None, None
    if not flags and x._requires_grad:
        return record_cpu_hook(prim, (x,), {}, t)
    return t


def bind_binary(prim: Primitive, x: _Tensor, y: _Tensor):
    """`bind(prim, x, y)` for a binary elementwise primitive with a numpy function, `prim.ufunc`, on two Tensors
    (not subclasses) of one dtype: the operator path of `a + b`, `a * b`, ...

    Small CPU arrays, the first one contiguous or 1-d, in eager mode go straight to the ufunc (what impl would
    call: its eager C kernels start at `prim.ufunc_below` elements, and it keeps a strided first operand's
    layout), and their node to `record_cpu_hook`. Everything else takes `bind`: a transform, another device,
    anomaly mode or saved-tensor hooks, an impl wrapped by fnx.debug or fnx.profiler, and any error (bind's
    names the op). Recording a node this way costs about half of what `bind` and `record_hook` do.
    """
    flags = _get_flags()
    out = None
    if flags <= _NO_GRAD and direct_ufuncs:
        try:
            xv = x._value
            yv = y._value
            below = prim.ufunc_below
            if (x._device is _cpu and y._device is _cpu and xv.size < below and yv.size < below
                    and (xv.ndim < 2 or xv.flags.c_contiguous)):
                out = prim.ufunc(xv, yv)
        except Exception:   # shapes that do not broadcast, a bool subtraction: bind's error names the op
            pass
    if out is None:
        return bind(prim, x, y)
    if type(out) is not _ndarray:
        out = np.asarray(out)
    t = _tensor_new(_Tensor)
    t._value, t._device, t._node, t._requires_grad, t._grad = out, _cpu, None, False, None
    t._version, t._base, t._views = [0], None, None
    if not flags and (x._requires_grad or y._requires_grad):
        return record_cpu_hook(prim, (x, y), {}, t)
    return t


# False while fnx.debug or fnx.profiler wraps Primitive.impl (`set_impl_descriptor`): every op runs its impl then
direct_ufuncs = True
_IMPL_SLOT = Primitive.__dict__["impl"]


def set_impl_descriptor(descriptor) -> None:
    """Put `descriptor` (a wrapper of fnx.debug or fnx.profiler, or the slot it wraps) in place of
    `Primitive.impl`."""
    global direct_ufuncs
    Primitive.impl = descriptor
    direct_ufuncs = descriptor is _IMPL_SLOT


def _wrap_multiple(prim: Primitive, args, params, outs) -> list:
    """Eager outputs of a multiple-result primitive; one tape node covers them all."""
    if prim.view:   # each output aliases the first input, as a view primitive's one output does (see `bind`)
        a0 = args[0]
        dev, version, base = a0._device, a0._version, a0 if a0._base is None else a0._base
        tensors = []
        for o in outs:   # views of a0's array: its device and dtype, nothing to infer (a chunk of gates a step)
            t = _tensor_new(_Tensor)
            t._value, t._device, t._node, t._requires_grad, t._grad = o, dev, None, False, None
            t._version, t._base, t._views = version, base, None
            tensors.append(t)
    else:
        tensors = [from_array(o) for o in outs]
    if state.grad_enabled and prim.differentiable and any(a._requires_grad for a in args):
        return record_multiple_hook(prim, args, params, tensors)
    return tensors


def _device_mismatch(prim: Primitive, args) -> FnxRuntimeError:
    devs = sorted({str(a.device) for a in args})
    return FnxRuntimeError(f"{prim.name}: expected all tensors to be on the same device, but found devices "
                           f"{' and '.join(devs)}; move them with .to(device) first (fnx never moves data silently)")


def explain_failure(prim: Primitive, args, params, exc: Exception) -> Exception:
    """Turn a backend error into fnx's own: run the abstract rule, which names the op, shapes and dtypes."""
    try:
        prim.abstract(*[a.aval for a in args], **params)
    except _FnxError as clear:
        return clear
    except NotImplementedError:
        pass
    shapes = ", ".join(f"{a.dtype.name}{list(a.shape)}" for a in args)
    return FnxRuntimeError(f"{prim.name} failed on inputs ({shapes}) with params {params}: {exc}")


# ---------------------------------------------------------------- trace stack (used by fnx.transforms)
class MainTrace:
    """One transform in progress: its level in the stack and its trace class."""

    __slots__ = ("level", "trace_type", "global_data")

    def __init__(self, level: int, trace_type: type, global_data: Any = None):
        self.level, self.trace_type, self.global_data = level, trace_type, global_data

    def __repr__(self) -> str:
        return f"MainTrace({self.level}, {self.trace_type.__name__})"


class Trace:
    """Interprets primitives applied to its tracers."""

    __slots__ = ("main",)

    def __init__(self, main: MainTrace):
        self.main = main

    def pure(self, val):
        raise NotImplementedError

    lift = pure

    def process_primitive(self, prim: Primitive, tracers, params):
        raise NotImplementedError

    def process_custom(self, call, tracers):
        """A function call with a custom rule (custom_vjp, custom_jvp, checkpoint); inlined by default."""
        return call.inline(tracers)


class EvalTrace(Trace):
    """Level 0: run the primitive eagerly (impl plus the autograd tape)."""

    __slots__ = ()

    def pure(self, val):
        return val

    lift = pure

    def process_primitive(self, prim, tracers, params):
        flags = _get_flags()
        _set_flags(flags & ~_TRACING)
        try:
            return bind(prim, *tracers, **params)
        finally:
            _set_flags(_get_flags() | flags & _TRACING)

    def process_custom(self, call, tracers):
        flags = _get_flags()
        _set_flags(flags & ~_TRACING)
        try:
            return call.eager(tracers)
        finally:
            _set_flags(_get_flags() | flags & _TRACING)


_EVAL_MAIN = MainTrace(0, EvalTrace)  # the bottom of every thread's trace stack: eager evaluation
_traces = contextvars.ContextVar("fnx_traces", default=((_EVAL_MAIN,), _EVAL_MAIN))  # (stack, dynamic trace)


@contextmanager
def new_main(trace_type: type, global_data: Any = None, dynamic: bool = False):
    """Push a transform's main trace on the calling thread's stack; with `dynamic`, every op binds to it
    (staging for compile)."""
    prev = _traces.get()
    stack, dynamic_trace = prev
    main = MainTrace(len(stack), trace_type, global_data)
    _traces.set((stack + (main,), main if dynamic else dynamic_trace))
    prev_flags = _get_flags()
    _set_flags(prev_flags | _TRACING)
    try:
        yield main
    finally:
        _traces.set(prev)
        _set_flags(_get_flags() & ~_TRACING | prev_flags & _TRACING)  # grad mode stays as the body left it


def enter_eager_mode() -> tuple:
    """Switch the calling thread to plain eager evaluation with grad mode off, whatever transforms are active
    (to run the equations of a compiled call on concrete tensors); returns what `leave_eager_mode` restores."""
    saved = _get_flags(), _traces.get()
    _set_flags(_NO_GRAD)
    _traces.set((saved[1][0], _EVAL_MAIN))
    return saved


def leave_eager_mode(saved: tuple) -> None:
    _set_flags(saved[0])
    _traces.set(saved[1])


def _bind_traced(prim: Primitive, args, params):
    top = find_top_trace(args)
    tracers = [full_raise(top, a) for a in args]
    out = top.process_primitive(prim, tracers, params)
    if prim.multiple_results:
        return [full_lower(o) for o in out]
    return full_lower(out)


def custom_call(call, args: list) -> list:
    """Run `call` (a function with a custom rule: fnx/transforms/custom.py) on flat tensor `args` under the
    current transforms; the top trace's `process_custom` picks the call's rule, as `bind` does for primitives."""
    if not state.transforms_active:
        return call.eager(args)
    top = find_top_trace(args)
    tracers = [full_raise(top, a) for a in args]
    outs = top.process_custom(call, tracers)
    return [full_lower(o) for o in outs]


def find_top_trace(args) -> Trace:
    top = _EVAL_MAIN
    for a in args:
        if isinstance(a, Tracer) and a._trace.main.level > top.level:
            top = a._trace.main
    dynamic = _traces.get()[1]
    if dynamic.level > top.level:
        top = dynamic
    return top.trace_type(top)


def full_raise(trace: Trace, val):
    if not isinstance(val, Tracer):
        return trace.pure(val)
    level = val._trace.main.level
    if val._trace.main is trace.main:
        return val
    if level < trace.main.level:
        return trace.lift(val)
    if level > trace.main.level:
        raise FnxRuntimeError(f"a tracer from an inner transform (level {level}) escaped into an outer one "
                              f"(level {trace.main.level}); return values from transformed functions instead "
                              f"of storing them in outer variables")
    raise FnxRuntimeError(f"a tracer of a transform that has already finished (level {level}) was used; it "
                          f"leaked out of its transform through a side effect")


def full_lower(val):
    if isinstance(val, Tracer):
        return val.full_lower()
    return val
