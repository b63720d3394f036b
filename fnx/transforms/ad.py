"""Forward-mode differentiation: `jvp` as an interpreter of primitives (JAX's JVPTrace)."""
from __future__ import annotations

from .. import core
from ..core import FnxTypeError, Trace, new_main
from ..tensor import Tensor, Tracer

__all__ = ["jvp"]


class JVPTracer(Tracer):
    """A primal value paired with its tangent (None for integer and bool values)."""

    __slots__ = ("primal", "tangent")

    def __init__(self, trace: Trace, primal, tangent):
        self._trace, self.primal, self.tangent = trace, primal, tangent

    @property
    def aval(self):
        return self.primal.aval


def _zero_tangent(x):
    from ..ops.creation import zeros_like

    return zeros_like(x) if x.dtype.is_floating_point else None


class JVPTrace(Trace):
    __slots__ = ()

    def pure(self, val):
        return JVPTracer(self, val, _zero_tangent(val))

    lift = pure

    def process_primitive(self, prim, tracers, params):
        primals = [t.primal for t in tracers]
        tangents = [t.tangent if t.tangent is not None or not t.dtype.is_floating_point else _zero_tangent(t.primal)
                    for t in tracers]
        out, tangent_out = prim.jvp(primals, tangents, **params)
        if prim.multiple_results:
            return [JVPTracer(self, o, t) for o, t in zip(out, tangent_out)]
        return JVPTracer(self, out, tangent_out)


def _flat(x, what: str) -> list:
    items = list(x) if isinstance(x, (tuple, list)) else [x]
    for i in items:
        if not isinstance(i, Tensor):
            raise FnxTypeError(f"jvp: {what} must be Tensors (or tuples/lists of them), got {type(i).__name__}")
    return items


def jvp(fun, primals, tangents):
    """(fun(*primals), J_fun(primals) @ tangents): forward-mode derivative along `tangents`."""
    primals, tangents = _flat(primals, "primals"), _flat(tangents, "tangents")
    if len(primals) != len(tangents):
        raise FnxTypeError(f"jvp: got {len(primals)} primals but {len(tangents)} tangents")
    for p, t in zip(primals, tangents):
        if tuple(p.shape) != tuple(t.shape) or p.dtype is not t.dtype:
            raise FnxTypeError(f"jvp: primal {p.dtype}{list(p.shape)} and tangent {t.dtype}{list(t.shape)} must "
                               f"have the same shape and dtype")
    with new_main(JVPTrace) as main:
        trace = JVPTrace(main)
        out = fun(*[JVPTracer(trace, p, t) for p, t in zip(primals, tangents)])
        single = not isinstance(out, (tuple, list))
        outs = [core.full_raise(trace, o) for o in ([out] if single else out)]
        primal_out = [o.primal for o in outs]
        tangent_out = [o.tangent if o.tangent is not None else _zero_tangent(o.primal) for o in outs]
    if single:
        return primal_out[0], tangent_out[0]
    return type(out)(primal_out), type(out)(tangent_out)
