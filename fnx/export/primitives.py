"""Which primitives an exported program may hold, and the pass that makes a traced program exportable.

An exported program names its primitives; `fnx.export.load` looks each name up in `exportable()`, the
primitives that fnx's modules define, less those that cannot leave the process (`REFUSED`). Calls whose body
is a jaxpr are inlined at export (`INLINED`), and a fused primitive whose definition is a composition of fnx ops
is replaced by that composition's trace (`EXPANDED`: the program then holds only primitives that the
interpreter, the compiler and the standalone C program all know); what is left must be exportable, or export
fails naming the primitive.
"""
from __future__ import annotations

import sys

from ..core import Primitive
from ..ir import ClosedJaxpr, Eqn, Jaxpr, Literal, Var
from ..nn.functional_attention import attention_p, attention_vjp_p, reference, vjp_reference
from ..transforms.tracing import trace_to_jaxpr

__all__ = ["exportable", "prepare", "expand", "REFUSED", "INLINED", "EXPANDED"]

# a call whose body (param "jaxpr") is inlined: the program keeps the computation, and grad of a loaded program
# differentiates the body (a custom_jvp rule is a Python function, which an archive cannot hold)
INLINED = {"compiled_call", "compiled_call_saving", "custom_jvp_call", "checkpoint"}

# a fused primitive -> its definition in fnx ops, (*inputs, **params) -> list of outputs, traced at export in its
# place: scaled_dot_product_attention's C loops (forward and backward) become the products and softmax they compute
EXPANDED = {attention_p.name: reference, attention_vjp_p.name: vjp_reference}

REFUSED = {
    "custom_vjp_call": "its backward pass is a Python function, which a saved program cannot hold, and inlining "
                       "its body would silently change the gradient; export the function without custom_vjp",
    "custom_call": "it is a Python function with a custom derivative (an autograd.Function)",
    "device_put": "it moves data between devices, while an exported program runs where its inputs are; move "
                  "the inputs before calling it",
    "all_reduce": "collectives need a process group", "all_gather": "collectives need a process group",
    "reduce_scatter": "collectives need a process group", "broadcast": "collectives need a process group",
}


def exportable() -> dict[str, Primitive | None]:
    """Name -> primitive, for every primitive defined at module level in fnx's loaded modules, less `REFUSED`
    and `INLINED`; a name that two primitives share maps to None (a program could not tell them apart)."""
    found: dict[str, Primitive | None] = {}
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "fnx" or name.startswith("fnx.")):
            continue
        for value in list(vars(module).values()):
            if isinstance(value, Primitive) and found.setdefault(value.name, value) is not value:
                found[value.name] = None
    for name in (*REFUSED, *INLINED):
        found.pop(name, None)
    return found


def prepare(closed: ClosedJaxpr, known: dict[str, Primitive]) -> ClosedJaxpr:
    """`closed` with the calls of `INLINED` replaced by their bodies and the primitives of `EXPANDED` by their
    definitions' traces, at every depth; raises for a primitive that is refused or not in `known`."""
    def body(e: Eqn) -> ClosedJaxpr | None:
        if e.prim.name in INLINED:
            return prepare(e.params["jaxpr"], known)
        if e.prim.name in EXPANDED:
            return prepare(_trace_definition(e), known)
        _check(e.prim, known)
        return None

    return _rewrite(closed, body, lambda v: _prepare_param(v, known))


def expand(closed: ClosedJaxpr) -> ClosedJaxpr:
    """`closed` with the equations of `EXPANDED`'s primitives replaced by their definitions' traces (for the
    standalone C of a jaxpr that fnx.make_jaxpr made; an exported program is expanded already)."""
    return _rewrite(closed, lambda e: expand(_trace_definition(e)) if e.prim.name in EXPANDED else None,
                    lambda v: v)


def _rewrite(closed: ClosedJaxpr, body_of, param) -> ClosedJaxpr:
    """`closed` with each equation for which `body_of` gives a jaxpr replaced by that jaxpr's equations; the
    other equations keep their primitive, with `param` applied to each of their params."""
    j = closed.jaxpr
    eqns: list[Eqn] = []
    sub: dict[int, Var | Literal] = {}
    constvars, consts = list(j.constvars), list(closed.consts)

    def read(a):
        return a if isinstance(a, Literal) else sub.get(id(a), a)

    for e in j.eqns:
        inputs = [read(a) for a in e.inputs]
        body = body_of(e)
        if body is not None:
            outs = _inline(body, inputs, eqns, constvars, consts)
            sub.update((id(v), o) for v, o in zip(e.outvars, outs))
            continue
        eqns.append(Eqn(e.prim, inputs, {k: param(v) for k, v in e.params.items()}, e.outvars))
    return ClosedJaxpr(Jaxpr(constvars, list(j.invars), eqns, [read(a) for a in j.outvars]), consts)


def _trace_definition(eqn: Eqn) -> ClosedJaxpr:
    """The jaxpr of `EXPANDED`'s definition of `eqn`'s primitive, on the avals of its inputs."""
    define = EXPANDED[eqn.prim.name]
    return trace_to_jaxpr(lambda *xs: define(*xs, **eqn.params), [a.aval for a in eqn.inputs])


def _check(prim: Primitive, known: dict) -> None:
    if prim.name in REFUSED:
        raise NotImplementedError(f"fnx.export: the program uses the primitive '{prim.name}', which cannot be "
                                  f"exported: {REFUSED[prim.name]}")
    if prim.name in known and known[prim.name] is None:
        raise NotImplementedError(f"fnx.export: the program uses the primitive '{prim.name}', and two of fnx's "
                                  f"primitives have that name, so a loaded program could not tell which")
    if known.get(prim.name) is not prim:
        raise NotImplementedError(f"fnx.export: the program uses the primitive '{prim.name}', which is not one of "
                                  f"fnx's module-level primitives, so a loaded program could not name it")


def _prepare_param(v, known):
    if isinstance(v, ClosedJaxpr):
        return prepare(v, known)
    if isinstance(v, Jaxpr):
        return prepare(ClosedJaxpr(v, []), known).jaxpr
    if isinstance(v, tuple):
        return tuple(_prepare_param(x, known) for x in v)
    return v


def _inline(body: ClosedJaxpr, inputs: list, eqns: list, constvars: list, consts: list) -> list:
    """Append `body`'s equations (on fresh variables) reading `inputs`; its constants join the outer ones."""
    j = body.jaxpr
    env: dict[int, Var | Literal] = {id(v): a for v, a in zip(j.invars, inputs)}
    for v, c in zip(j.constvars, body.consts):
        fresh = Var(v.aval)
        constvars.append(fresh)
        consts.append(c)
        env[id(v)] = fresh
    for e in j.eqns:
        outs = [Var(v.aval) for v in e.outvars]
        eqns.append(Eqn(e.prim, [a if isinstance(a, Literal) else env[id(a)] for a in e.inputs], e.params, outs))
        env.update((id(v), w) for v, w in zip(e.outvars, outs))
    return [a if isinstance(a, Literal) else env[id(a)] for a in j.outvars]
