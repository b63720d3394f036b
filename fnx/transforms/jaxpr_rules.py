"""Transforms of closed jaxprs, for primitives that hold jaxprs (cond, while_loop, scan).

Each builds a new jaxpr by tracing `eval_jaxpr` under the transform, so a
control-flow primitive's rules reuse jvp, vjp and vmap instead of
re-implementing them.
"""
from __future__ import annotations

from ..core import ShapedArray
from ..ir import ClosedJaxpr, Jaxpr, Var, eval_jaxpr
from ..ops.creation import zeros_like
from .ad import jvp, vjp
from .batching import vmap, with_batch_size
from .tracing import trace_to_jaxpr

__all__ = ["closed_call", "trace_flat", "jvp_jaxpr", "vjp_jaxpr", "batch_jaxpr", "split_vjp_jaxpr"]


def closed_call(closed: ClosedJaxpr, args) -> list:
    """Evaluate a const-free closed jaxpr on `args`."""
    return eval_jaxpr(closed.jaxpr, closed.consts, *args)


def trace_flat(fun, avals) -> tuple[ClosedJaxpr, list]:
    """Trace `fun` (flat tensors -> flat tensors) on `avals`; captured constants become leading inputs.

    Returns the const-free jaxpr and the constants to pass before the real arguments.
    """
    closed = trace_to_jaxpr(fun, list(avals))
    j = closed.jaxpr
    return ClosedJaxpr(Jaxpr([], list(j.constvars) + list(j.invars), j.eqns, j.outvars), []), list(closed.consts)


def _no_consts(pair) -> ClosedJaxpr:
    closed, consts = pair
    return _inline_consts(closed, consts) if consts else closed


def _inline_consts(closed: ClosedJaxpr, consts) -> ClosedJaxpr:
    """Keep captured constants (concrete tensors) as constvars of the jaxpr."""
    j = closed.jaxpr
    n = len(consts)
    return ClosedJaxpr(Jaxpr(list(j.invars[:n]), list(j.invars[n:]), j.eqns, j.outvars), list(consts))


def _floats(avals) -> list[int]:
    return [i for i, a in enumerate(avals) if a.dtype.is_floating_point]


def jvp_jaxpr(closed: ClosedJaxpr, in_avals) -> ClosedJaxpr:
    """(*primals, *float_tangents) -> (*outs, *float_out_tangents)."""
    fl = _floats(in_avals)
    n = len(in_avals)

    def fun(*args):
        primals, tans = list(args[:n]), list(args[n:])
        it = iter(tans)
        tangents = [next(it) if i in fl else _zeros(p) for i, p in enumerate(primals)]
        outs, touts = jvp(lambda *p: closed_call(closed, p), tuple(primals), tuple(tangents))
        return list(outs) + [t for t, o in zip(touts, outs) if o.dtype.is_floating_point]

    return _no_consts(trace_flat(fun, list(in_avals) + [in_avals[i] for i in fl]))


def vjp_jaxpr(closed: ClosedJaxpr, in_avals) -> ClosedJaxpr:
    """(*primals, *float_out_cotangents) -> float input cotangents."""
    n = len(in_avals)
    out_avals = closed.out_avals
    out_fl = _floats(out_avals)
    in_fl = _floats(in_avals)

    def fun(*args):
        primals, cts = list(args[:n]), list(args[n:])
        outs, fn = vjp(lambda *p: closed_call(closed, p), *primals)
        it = iter(cts)
        full_cts = [next(it) if i in out_fl else _zeros(o) for i, o in enumerate(outs)]
        in_cts = fn(list(full_cts))
        return [in_cts[i] for i in in_fl]

    return _no_consts(trace_flat(fun, list(in_avals) + [out_avals[i] for i in out_fl]))


def split_vjp_jaxpr(closed: ClosedJaxpr, in_avals, needs: tuple) -> tuple[ClosedJaxpr, ClosedJaxpr]:
    """The vjp of `closed` as two programs, so that a backward pass reuses the forward's work instead of
    recomputing it: fwd (*primals) -> (*outs, *residuals) and bwd (*residuals, *float_out_cotangents) -> the
    cotangents of the inputs marked in `needs` (one bool per input; the others cost no backward work, as an
    eager tape skips inputs that do not require grad). Every equation that depends on the primals alone runs
    in fwd (partial evaluation with the cotangents unknown); the residuals are fwd's values that bwd reads."""
    n = len(in_avals)
    out_avals = closed.out_avals
    out_fl, in_fl = _floats(out_avals), [i for i in _floats(in_avals) if needs[i]]

    def fun(*args):
        primals, cts = list(args[:n]), list(args[n:])
        outs, fn = vjp(lambda *p: closed_call(closed, p), *primals)
        it = iter(cts)
        in_cts = fn([next(it) if i in out_fl else _zeros(o) for i, o in enumerate(outs)])
        return list(outs) + [in_cts[i] for i in in_fl]

    both = _no_consts(trace_flat(fun, list(in_avals) + [out_avals[i] for i in out_fl]))
    j = both.jaxpr
    unknown = set(j.invars[n:])
    known_eqns, unknown_eqns = [], []
    for eqn in j.eqns:
        if any(isinstance(v, Var) and v in unknown for v in eqn.inputs):
            unknown.update(eqn.outvars)
            unknown_eqns.append(eqn)
        else:
            known_eqns.append(eqn)
    residuals, seen = [], set()
    bwd_outs = j.outvars[len(out_avals):]
    for v in [v for eqn in unknown_eqns for v in eqn.inputs] + list(bwd_outs):
        if isinstance(v, Var) and v not in unknown and v not in seen:
            seen.add(v)
            residuals.append(v)
    fwd = ClosedJaxpr(Jaxpr(j.constvars, j.invars[:n], known_eqns, list(j.outvars[:len(out_avals)]) + residuals),
                      both.consts)
    bwd = ClosedJaxpr(Jaxpr([], residuals + list(j.invars[n:]), unknown_eqns, list(bwd_outs)), [])
    return fwd, bwd


def batch_jaxpr(closed: ClosedJaxpr, in_avals, dims, size: int) -> ClosedJaxpr:
    """The jaxpr on inputs batched at `dims` (None: unbatched), with every output batched at axis 0."""
    batched = [a if d is None else ShapedArray(a.shape[:d] + (size,) + a.shape[d:], a.dtype, a.device)
               for a, d in zip(in_avals, dims)]

    def fun(*args):
        if all(d is None for d in dims):  # nothing mapped inside (e.g. only a cond's index is batched)
            return [with_batch_size(o, None, size) for o in closed_call(closed, args)]
        return list(vmap(lambda *x: closed_call(closed, x), in_axes=tuple(dims))(*args))

    return _no_consts(trace_flat(fun, batched))


def _zeros(x):
    return zeros_like(x)
