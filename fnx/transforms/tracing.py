"""Staging: trace a Python function into a `Jaxpr` (`make_jaxpr`, and the front end of compile).

The staging trace is dynamic: while it is active every primitive binds to
it, including ops on constants, so the whole function lands in the IR.
An in-place op on a staging tracer rebinds it to the variable of the
functional result, so the IR holds only functional ops. Constants (tensors
captured from outside) cannot be rebound, nor can the inputs of a compiled
function (compile does not write back into its arguments); make_jaxpr's
inputs are the function's local values and can.
"""
from __future__ import annotations

import functools

from .. import core
from ..core import FnxRuntimeError, FnxTypeError, Primitive, ShapedArray, Trace, new_main
from ..ir import ClosedJaxpr, Eqn, Jaxpr, Literal, Var
from ..tensor import Tensor, Tracer, note_view
from ..tree import tree_flatten, tree_unflatten

__all__ = ["make_jaxpr", "trace_to_jaxpr", "StagingTracer", "CreatedTracer", "stage_created"]


class StagingTracer(Tracer):
    """An abstract value standing for an IR variable (`_var`). `_frozen`: why in-place ops must not rebind it
    (a constant, or an input of a compiled function), None when they may."""

    __slots__ = ("_aval", "_var", "_frozen")

    def __init__(self, trace: Trace, aval: ShapedArray, var: Var | Literal, frozen: str | None = None):
        self._trace, self._aval, self._var, self._frozen = trace, aval, var, frozen

    @property
    def aval(self) -> ShapedArray:
        return self._aval

    def _assume(self, other: StagingTracer) -> None:
        self._trace, self._aval, self._var = other._trace, other._aval, other._var

    def _check_mutable(self, op: str) -> None:
        if self._frozen is not None:
            raise FnxRuntimeError(f"{op}: in-place write into {self._frozen.format(self.aval.str_short())}")


class CreatedTracer(StagingTracer):
    """A tensor made by a creation function while staging: a mutable constant that knows its value (`_known`)
    until an in-place op rebinds it."""

    __slots__ = ("_known",)

    def __init__(self, trace: Trace, value: Tensor, atom: Var | Literal):
        super().__init__(trace, value.aval, atom)
        self._known = value

    def _assume(self, other: StagingTracer) -> None:
        super()._assume(other)
        self._known = None

    def _concrete(self, what: str) -> Tensor:
        return self._known if self._known is not None else super()._concrete(what)

    def numpy(self, *, force: bool = False):
        return self._known.numpy(force=force) if self._known is not None else super().numpy(force=force)

    def tolist(self):
        return self._known.tolist() if self._known is not None else super().tolist()

    def __array__(self, dtype=None, copy=None):
        return self._known.__array__(dtype, copy) if self._known is not None else super().__array__(dtype, copy)


class _Builder:
    """Collects the equations and constants of one trace."""

    def __init__(self):
        self.eqns: list[Eqn] = []
        self.consts: dict[int, tuple[Var, Tensor, StagingTracer]] = {}


class StagingTrace(Trace):
    __slots__ = ()

    @property
    def builder(self) -> _Builder:
        return self.main.global_data

    def pure(self, val):
        if isinstance(val, Tracer):  # a value from an outer transform: captured like a constant
            return self._const(val)
        if val.ndim == 0 and not val.requires_grad:
            return StagingTracer(self, val.aval, Literal(val, val.aval), _CAPTURED)
        return self._const(val)

    lift = pure

    def _const(self, val):
        b = self.builder
        found = b.consts.get(id(val))
        if found is None:
            t = StagingTracer(self, val.aval, Var(val.aval), _CAPTURED)
            b.consts[id(val)] = (t._var, val, t)
            return t
        return found[2]

    def process_custom(self, call, tracers):
        """custom_vjp / custom_jvp / checkpoint: one equation holding the call, so the rule survives staging."""
        return call.stage(tracers)

    def process_primitive(self, prim: Primitive, tracers, params):
        b = self.builder
        avals = prim.abstract(*[t.aval for t in tracers], **params)
        outs = [StagingTracer(self, a, Var(a)) for a in (avals if prim.multiple_results else [avals])]
        b.eqns.append(Eqn(prim, [t._var for t in tracers], dict(params), [o._var for o in outs]))
        if prim.view:
            note_view(outs[0], tracers[0], prim, params)
        return outs if prim.multiple_results else outs[0]


_CAPTURED = ("a tensor captured from outside the traced function ({}), which a trace cannot change: work on a "
             "copy (`t = t.clone()` before the in-place op), or pass the tensor as an argument and return the new "
             "value")


def stage_created(value: Tensor) -> CreatedTracer:
    """`value`, just made by a creation function while the staging trace is active, as a constant of that trace
    (a literal when 0-d) which in-place ops may rebind; the folding pass turns small uses of it into literals."""
    trace = StagingTrace(core.state.dynamic_trace)
    if value.ndim == 0:
        return CreatedTracer(trace, value, Literal(value, value.aval))
    var = Var(value.aval)
    trace.builder.consts[id(value)] = (var, value, StagingTracer(trace, value.aval, var, _CAPTURED))
    return CreatedTracer(trace, value, var)


core.stage_created_hook = stage_created


def trace_to_jaxpr(fun, in_avals: list[ShapedArray], frozen_inputs: str | None = None):
    """Trace `fun` (taking and returning flat lists of tensors) on abstract inputs into a ClosedJaxpr.

    In-place ops may rebind the input tracers (the function's local values), unless `frozen_inputs` names
    the caller (e.g. "fnx.compile(f)"): then they raise an error saying to return the new value instead.
    """
    builder = _Builder()
    with new_main(StagingTrace, global_data=builder, dynamic=True) as main:
        trace = StagingTrace(main)
        frozen = None if frozen_inputs is None else (
            f"an input ({{}}) of {frozen_inputs}, which does not write back into its arguments: return the new "
            f"value instead (`x = x.clone()` before the in-place op, return x) and assign it outside, e.g. "
            f"`x.copy_(f(x))`")
        ins = [StagingTracer(trace, a, Var(a), frozen) for a in in_avals]
        invars = [t._var for t in ins]
        results = list(fun(*ins))
        for o in results:
            if not isinstance(o, Tensor):
                raise FnxTypeError(f"make_jaxpr: the function must return pytrees of Tensors, got a "
                                   f"{type(o).__name__}; wrap numbers with fnx.tensor(...)")
        outs = [core.full_raise(trace, o) for o in results]
        outvars = [t._var for t in outs]
    used = {id(a) for e in builder.eqns for a in e.inputs}.union(id(v) for v in outvars)
    pairs = [(v, c) for v, c, _ in builder.consts.values() if id(v) in used]  # created values only read in Python
    constvars, consts = [v for v, _ in pairs], [c for _, c in pairs]
    return ClosedJaxpr(Jaxpr(constvars, invars, builder.eqns, outvars), consts)


def make_jaxpr(fun, static_argnums=()):
    """A function that traces `fun` on its arguments' shapes and dtypes and returns the printable IR.

    Tensor leaves of the positional and keyword arguments become the jaxpr's inputs, in that order;
    arguments listed in `static_argnums` are passed to `fun` as they are (Python values, shapes, flags).
    """
    static = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)

    @functools.wraps(fun)
    def make(*args, **kwargs) -> ClosedJaxpr:
        fixed = {i % len(args) for i in static if -len(args) <= i < len(args)}
        dynamic = [a for i, a in enumerate(args) if i not in fixed]
        leaves, treedef = tree_flatten((dynamic, kwargs))
        for x in leaves:
            if not isinstance(x, Tensor):
                raise FnxTypeError(f"make_jaxpr: arguments must be pytrees of Tensors, got {type(x).__name__}; "
                                   f"mark Python values static with static_argnums")

        def flat_fun(*flat):
            dyn, kw = tree_unflatten(treedef, list(flat))
            it = iter(dyn)
            full = [a if i in fixed else next(it) for i, a in enumerate(args)]
            out_leaves, _ = tree_flatten(fun(*full, **kw))
            return out_leaves

        return trace_to_jaxpr(flat_fun, [x.aval for x in leaves])

    return make
