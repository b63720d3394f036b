"""A symbolic program made concrete: every `Dim` evaluated for the symbols' values, on one device.

The result is an ordinary closed jaxpr (tensor constants, concrete shapes and params, plain literals), checked
with `verify_jaxpr`: each primitive's shape rule runs again on the concrete shapes, so sizes that the program
cannot take (a slice past the end of a weight) are refused with the rule's error.
"""
from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from ..core import ShapedArray
from ..ir import ClosedJaxpr, Eqn, Jaxpr, Literal, Var, verify_jaxpr
from ..tensor import Tensor, from_array
from .symbolic import Dim, DimLiteral, evaluate

__all__ = ["specialize", "on_device"]


def specialize(closed: ClosedJaxpr, env: Mapping[str, int], device,
               const: Callable[[np.ndarray], Tensor] | None = None) -> ClosedJaxpr:
    """`closed` with the symbols' values `env` on `device`; `const` turns a numpy constant into the tensor to use
    (by default a new tensor on `device`). Raises FnxRuntimeError when a shape rule rejects the sizes."""
    const = const or (lambda a: on_device(from_array(a), device))
    out = _Specializer(env, device, const).closed(closed)
    verify_jaxpr(out)
    return out


def on_device(t: Tensor, device) -> Tensor:
    """`t` on `device` (itself when it is there)."""
    return t if t.device is device else t.to(device)


class _Specializer:
    def __init__(self, env: Mapping[str, int], device, const: Callable):
        self.env, self.device, self.const = env, device, const

    def closed(self, closed: ClosedJaxpr) -> ClosedJaxpr:
        return ClosedJaxpr(self.jaxpr(closed.jaxpr), [self.const(c) for c in closed.consts])

    def jaxpr(self, j: Jaxpr) -> Jaxpr:
        sub: dict[int, Var] = {}

        def bind(vs):
            out = [Var(self.aval(v.aval)) for v in vs]
            sub.update((id(v), w) for v, w in zip(vs, out))
            return out

        def read(a):
            return self.literal(a) if isinstance(a, Literal) else sub[id(a)]

        constvars, invars = bind(j.constvars), bind(j.invars)
        eqns = []
        for e in j.eqns:
            inputs = [read(a) for a in e.inputs]
            params = {k: self.param(v) for k, v in e.params.items()}
            eqns.append(Eqn(e.prim, inputs, params, bind(e.outvars)))
        return Jaxpr(constvars, invars, eqns, [read(a) for a in j.outvars])

    def aval(self, a: ShapedArray) -> ShapedArray:
        return ShapedArray(tuple(evaluate(d, self.env) for d in a.shape), a.dtype, self.device)

    def literal(self, a: Literal) -> Literal:
        aval = self.aval(a.aval)
        if isinstance(a, DimLiteral):
            value = from_array(np.asarray(a.value(self.env), dtype=aval.dtype.np))
        else:
            value = a.val
        return Literal(on_device(value, self.device), aval)

    def param(self, v):
        if isinstance(v, Dim):
            return v.evaluate(self.env)
        if isinstance(v, tuple):
            return tuple(self.param(x) for x in v)
        if isinstance(v, ClosedJaxpr):
            return self.closed(v)
        if isinstance(v, Jaxpr):
            return self.jaxpr(v)
        return v
