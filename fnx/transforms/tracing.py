"""Staging: trace a Python function into a `Jaxpr` (`make_jaxpr`, and the front end of compile).

The staging trace is dynamic: while it is active every primitive binds to
it, including ops on constants, so the whole function lands in the IR.
"""
from __future__ import annotations

import functools

from .. import core
from ..core import FnxTypeError, Primitive, ShapedArray, Trace, new_main
from ..ir import ClosedJaxpr, Eqn, Jaxpr, Literal, Var
from ..tensor import Tensor, Tracer
from ..tree import tree_flatten, tree_unflatten

__all__ = ["make_jaxpr", "trace_to_jaxpr", "StagingTracer"]


class StagingTracer(Tracer):
    """An abstract value standing for an IR variable."""

    __slots__ = ("_aval",)

    def __init__(self, trace: Trace, aval: ShapedArray):
        self._trace, self._aval = trace, aval

    @property
    def aval(self) -> ShapedArray:
        return self._aval


class _Builder:
    """Collects equations, constants and the tracer -> variable map of one trace."""

    def __init__(self):
        self.eqns: list[Eqn] = []
        self.vars: dict[int, Var | Literal] = {}
        self.tracers: list[StagingTracer] = []   # keeps tracers alive so ids stay unique
        self.consts: dict[int, tuple[Var, Tensor]] = {}

    def new_tracer(self, trace, aval: ShapedArray, atom=None) -> StagingTracer:
        t = StagingTracer(trace, aval)
        self.tracers.append(t)
        self.vars[id(t)] = atom if atom is not None else Var(aval)
        return t


class StagingTrace(Trace):
    __slots__ = ()

    @property
    def builder(self) -> _Builder:
        return self.main.global_data

    def pure(self, val):
        if isinstance(val, Tracer):  # a value from an outer transform: captured like a constant
            return self._const(val)
        if val.ndim == 0 and not val.requires_grad:
            return self.builder.new_tracer(self, val.aval, Literal(val, val.aval))
        return self._const(val)

    lift = pure

    def _const(self, val):
        b = self.builder
        found = b.consts.get(id(val))
        if found is None:
            t = b.new_tracer(self, val.aval)
            b.consts[id(val)] = (b.vars[id(t)], val, t)
            return t
        return found[2]

    def process_custom(self, call, tracers):
        """custom_vjp / custom_jvp / checkpoint: one equation holding the call, so the rule survives staging."""
        return call.stage(tracers)

    def process_primitive(self, prim: Primitive, tracers, params):
        b = self.builder
        avals = prim.abstract(*[t.aval for t in tracers], **params)
        outs = [b.new_tracer(self, a) for a in (avals if prim.multiple_results else [avals])]
        b.eqns.append(Eqn(prim, [b.vars[id(t)] for t in tracers], dict(params), [b.vars[id(o)] for o in outs]))
        return outs if prim.multiple_results else outs[0]


def trace_to_jaxpr(fun, in_avals: list[ShapedArray]):
    """Trace `fun` (taking and returning flat lists of tensors) on abstract inputs into a ClosedJaxpr."""
    builder = _Builder()
    with new_main(StagingTrace, global_data=builder, dynamic=True) as main:
        trace = StagingTrace(main)
        ins = [builder.new_tracer(trace, a) for a in in_avals]
        results = list(fun(*ins))
        for o in results:
            if not isinstance(o, Tensor):
                raise FnxTypeError(f"make_jaxpr: the function must return pytrees of Tensors, got a "
                                   f"{type(o).__name__}; wrap numbers with fnx.tensor(...)")
        outs = [core.full_raise(trace, o) for o in results]
        invars = [builder.vars[id(t)] for t in ins]
        outvars = [builder.vars[id(t)] for t in outs]
    constvars = [v for v, _, _ in builder.consts.values()]
    consts = [c for _, c, _ in builder.consts.values()]
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
