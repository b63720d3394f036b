"""IR passes run by compile before lowering: inlining, constant folding, algebraic simplification, CSE, DCE.

Each pass maps a ClosedJaxpr to a new, equivalent ClosedJaxpr (the input is never mutated; variables
are shared between the two) and applies itself to the jaxprs nested in equation params (cond branches,
loop bodies), whose signatures it keeps. `optimize` runs them in order; tests verify the IR after each.

The rewrites are exact in IEEE arithmetic, signed zeros included: `x * 1`, `x / 1`, `x - 0.0` and
`x + -0.0` are `x` for every dtype, while `x + 0.0` is `x` only for integers (-0.0 + 0.0 is +0.0).
Captured tensors are constants: equations computing small values from literals and constants are
evaluated once, at compile time (tensors that require grad are not folded: they stay differentiable).
"""
from __future__ import annotations

import math

import numpy as np

from .. import debug
from ..core import ShapedArray
from ..ir import ClosedJaxpr, Eqn, Jaxpr, Literal, Var, eval_jaxpr
from ..ops.joins import concatenate_p
from ..ops.shape import broadcast_p, pad_p
from ..tensor import Tensor, from_array
from .interpret import run_eagerly

__all__ = ["optimize", "inline_calls", "fold_constants", "simplify", "cse", "dce", "PASSES"]

FOLD_LIMIT = 1024   # constant folding keeps results of at most this many elements per output


# ---------------------------------------------------------------- shared machinery
class _Rewriter:
    """Builds a new jaxpr from an old one: a substitution of atoms, new equations, new constants."""

    def __init__(self, closed: ClosedJaxpr):
        self.old = closed.jaxpr
        self.sub: dict[int, Var | Literal] = {}
        self.eqns: list[Eqn] = []
        self.constvars = list(self.old.constvars)
        self.consts = list(closed.consts)

    def read(self, a):
        return a if isinstance(a, Literal) else self.sub.get(id(a), a)

    def emit(self, eqn: Eqn, inputs: list) -> Eqn:
        new = Eqn(eqn.prim, inputs, eqn.params, eqn.outvars)
        self.eqns.append(new)
        return new

    def result(self) -> ClosedJaxpr:
        outvars = [self.read(v) for v in self.old.outvars]
        return ClosedJaxpr(Jaxpr(self.constvars, list(self.old.invars), self.eqns, outvars), self.consts)


def _nested(eqn: Eqn, pass_fn) -> Eqn:
    """`eqn` with `pass_fn` applied to the closed jaxprs in its params (compiled calls are left to inlining)."""
    if eqn.prim.name == "compiled_call" or not any(_holds_closed(v) for v in eqn.params.values()):
        return eqn
    params = {k: _map_closed(v, pass_fn) for k, v in eqn.params.items()}
    return Eqn(eqn.prim, eqn.inputs, params, eqn.outvars)


def _holds_closed(v) -> bool:
    return isinstance(v, ClosedJaxpr) or (isinstance(v, (tuple, list)) and any(_holds_closed(x) for x in v))


def _map_closed(v, fn):
    if isinstance(v, ClosedJaxpr):
        return fn(v)
    if isinstance(v, (tuple, list)) and _holds_closed(v):
        return type(v)(_map_closed(x, fn) for x in v)
    return v


# ---------------------------------------------------------------- inlining of nested compiled calls
def inline_calls(closed: ClosedJaxpr) -> ClosedJaxpr:
    """Replace each `compiled_call` equation (a compiled function called inside another) by its body."""
    rw = _Rewriter(closed)
    for eqn in rw.old.eqns:
        _inline_into(rw, _nested(eqn, inline_calls), [rw.read(a) for a in eqn.inputs])
    return rw.result()


def _inline_into(rw: _Rewriter, eqn: Eqn, inputs: list) -> None:
    if eqn.prim.name != "compiled_call":
        rw.emit(eqn, inputs)
        return
    inner = inline_calls(eqn.params["jaxpr"])
    j = inner.jaxpr
    env: dict[int, Var | Literal] = {id(v): a for v, a in zip(j.invars, inputs)}
    for v, c in zip(j.constvars, inner.consts):
        fresh = Var(v.aval)
        rw.constvars.append(fresh)
        rw.consts.append(c)
        env[id(v)] = fresh
    for e in j.eqns:
        outs = [Var(v.aval) for v in e.outvars]
        rw.eqns.append(Eqn(e.prim, [a if isinstance(a, Literal) else env[id(a)] for a in e.inputs], e.params, outs))
        env.update((id(v), w) for v, w in zip(e.outvars, outs))
    for v, o in zip(eqn.outvars, j.outvars):
        rw.sub[id(v)] = o if isinstance(o, Literal) else env[id(o)]


# ---------------------------------------------------------------- constant folding
def fold_constants(closed: ClosedJaxpr) -> ClosedJaxpr:
    """Evaluate equations whose inputs are all literals or constants, when their results are small.

    Scalar results become literals, results whose elements are all equal a broadcast literal (a splat, which
    simplification and code generation see through), others new constants. Constants that require grad, and
    values captured from an enclosing transform (tracers), are not known: they stay inputs of the equations.
    """
    rw = _Rewriter(closed)
    known = {id(v): c for v, c in zip(rw.constvars, rw.consts) if type(c) is Tensor and not c.requires_grad}
    for eqn in rw.old.eqns:
        eqn = _nested(eqn, fold_constants)
        inputs = [rw.read(a) for a in eqn.inputs]
        values = _known_values(inputs, known)
        outs = None if values is None else _evaluate(eqn, inputs, values)
        if outs is None:
            rw.emit(eqn, inputs)
            continue
        for v, o in zip(eqn.outvars, outs):
            known[id(v)] = o
            if o.ndim == 0:
                rw.sub[id(v)] = Literal(o, v.aval)
            elif _uniform(o):
                first = from_array(o._value.reshape(-1)[:1].reshape(()))
                lit = Literal(first, first.aval)
                rw.emit(Eqn(broadcast_p, [lit], {"shape": v.aval.shape}, [v]), [lit])
            else:
                rw.constvars.append(v)
                rw.consts.append(o)
    return rw.result()


def _uniform(t: Tensor) -> bool:
    """Whether all of t's elements have the same bits (so -0.0 beside 0.0 is not uniform, unlike `==`)."""
    v = t._value
    if v.size <= 1:
        return False
    bits = v.flatten().view(np.uint8).reshape(v.size, -1)
    return bool((bits == bits[0]).all())


def _known_values(inputs: list, known: dict):
    values = []
    for a in inputs:
        if isinstance(a, Literal):
            values.append(a.val)
        elif id(a) in known:
            values.append(known[id(a)])
        else:
            return None
    return values


def _evaluate(eqn: Eqn, inputs: list, values: list):
    """The eqn's outputs on concrete `values`, or None when they are large or cannot be computed now."""
    if any(_numel(v.aval.shape) > FOLD_LIMIT for v in eqn.outvars):
        return None
    params = [Var(a.aval) for a in inputs]
    one = Jaxpr([], params, [Eqn(eqn.prim, params, eqn.params, eqn.outvars)], list(eqn.outvars))
    try:
        outs = run_eagerly(eval_jaxpr, one, [], *values)
    except Exception:  # the op fails on these values: leave it for run time, where it raises as in eager mode
        return None
    if any(o.aval != v.aval for o, v in zip(outs, eqn.outvars)):
        return None
    return outs


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


# ---------------------------------------------------------------- algebraic simplification
def simplify(closed: ClosedJaxpr) -> ClosedJaxpr:
    """Drop identities: x*1, 1*x, x/1, x-0, x+0 (see the module docstring for signed zeros; the literal may
    also be broadcast), neg(neg x), transpose(transpose x), and convert/reshape/broadcast_to/transpose that
    change nothing; turn transpose(a @ b) into b.T @ a.T (see `_transposed_product`) and a sum of zero pads
    side by side into one concatenate (see `_padded_sum`)."""
    rw = _Rewriter(closed)
    producers: dict[int, tuple[Eqn, list]] = {}
    uses = _use_counts(rw.old)
    summed = {id(a) for e in rw.old.eqns if e.prim.name == "add" for a in e.inputs if uses.get(id(a)) == 1}
    for eqn in rw.old.eqns:
        eqn = _nested(eqn, simplify)
        inputs = [rw.read(a) for a in eqn.inputs]
        same = _identity_of(eqn, inputs, producers)
        if same is not None:
            rw.sub[id(eqn.outvars[0])] = same
            continue
        if _transposed_product(rw, eqn, inputs, producers, uses):
            continue
        if id(eqn.outvars[0]) not in summed and _padded_sum(rw, eqn, inputs, producers, uses):
            continue
        new = rw.emit(eqn, inputs)
        for v in new.outvars:
            producers[id(v)] = (new, inputs)
    return rw.result()


def _use_counts(jaxpr: Jaxpr) -> dict[int, int]:
    uses: dict[int, int] = {}
    for a in [a for eqn in jaxpr.eqns for a in eqn.inputs] + list(jaxpr.outvars):
        if isinstance(a, Var):
            uses[id(a)] = uses.get(id(a), 0) + 1
    return uses


def _transposed_product(rw: _Rewriter, eqn: Eqn, ins: list, producers: dict, uses: dict) -> bool:
    """Emit transpose(a @ b), swapping the last two dims of a product used only there, as b.T @ a.T (each
    operand's last two dims swapped; batch dims broadcast alike either way).

    Backward passes are full of these (the weight gradient of x @ W.T is (x.T @ g).T; attention's key gradient
    is (q.T @ dS).T per head). The rewritten product comes out row-major, so the kernels reading it (optimizer
    updates, the sum over a grouped-query attention's repeated heads) stream contiguous memory; the library
    reads the transposed operands as they are, and transposes of transposes cancel.
    """
    if eqn.prim.name != "transpose" or len(eqn.params["perm"]) < 2 or \
            tuple(eqn.params["perm"]) != _last_two_swapped(len(eqn.params["perm"])):
        return False
    made = producers.get(id(ins[0]))
    if made is None or made[0].prim.name != "matmul" or uses.get(id(made[0].outvars[0])) != 1:
        return False
    a, b = made[1]
    if a.aval.ndim < 2 or b.aval.ndim < 2:
        return False
    operands = []
    for x in (b, a):
        perm = _last_two_swapped(x.aval.ndim)
        inner = producers.get(id(x))
        if inner is not None and inner[0].prim.name == "transpose" and tuple(inner[0].params["perm"]) == perm:
            operands.append(inner[1][0])
            continue
        shape = x.aval.shape
        xt = Var(ShapedArray((*shape[:-2], shape[-1], shape[-2]), x.aval.dtype, x.aval.device))
        rw.emit(Eqn(eqn.prim, [x], {"perm": perm}, [xt]), [x])
        operands.append(xt)
    new = rw.emit(Eqn(made[0].prim, operands, made[0].params, eqn.outvars), operands)
    producers[id(eqn.outvars[0])] = (new, operands)
    return True


def _last_two_swapped(ndim: int) -> tuple:
    return (*range(ndim - 2), ndim - 1, ndim - 2)


def _padded_sum(rw: _Rewriter, eqn: Eqn, ins: list, producers: dict, uses: dict) -> bool:
    """Emit a sum of zero pads that place their operands side by side along one dim, plus at most one other term
    of the sum's shape, as one concatenate (padded at its ends if the parts leave them), + 0.0 for floats (as
    the sum turns -0.0 into +0.0), + the other term.

    A split's backward is such a sum: the gradients of q, k and v sliced from one projection each padded to
    the projection's width and added (rotate_half's halves, and the rotary product's own gradient beside
    them). The concatenate copies each part once, where the sum zero-fills an array per part and reads them
    all. At each element one part at most is not zero, so with one other term the sum adds the same two
    values in any order. `eqn` is the outermost add of the sum (an add, or a pad, used only there is part of
    it); a literal +0.0 addend is dropped.
    """
    if eqn.prim.name != "add":
        return False
    out = eqn.outvars[0]
    parts, others, pending = [], [], list(ins)
    while pending:
        a = pending.pop()
        if isinstance(a, Literal):
            if not _neutral("sub", a):   # +0.0 (or an integer 0): adding it changes nothing here
                return False
            continue
        made = producers.get(id(a))
        if made is not None and uses.get(id(a)) == 1 and made[0].prim.name == "add":
            pending.extend(made[1])
            continue
        part = _zero_pad_part(made) if uses.get(id(a)) == 1 else None
        if part is not None:
            parts.append(part)
        elif a.aval == out.aval:
            others.append(a)
        else:
            return False
    if len(parts) < 2 or len(others) > 1 or len({d for d, _, _ in parts}) != 1:
        return False
    parts.sort(key=lambda part: part[1])
    d = parts[0][0]
    if any(lo + x.aval.shape[d] != next_lo for (_, lo, x), (_, next_lo, _) in zip(parts, parts[1:])):
        return False
    pieces = [x for _, _, x in parts]
    shape = list(out.aval.shape)
    shape[d] = sum(x.aval.shape[d] for x in pieces)
    joined = Var(ShapedArray(tuple(shape), out.aval.dtype, out.aval.device))
    rw.emit(Eqn(concatenate_p, pieces, {"dim": d}, [joined]), pieces)
    lo, hi = parts[0][1], out.aval.shape[d] - shape[d] - parts[0][1]
    if lo or hi:
        ndim = len(shape)
        edges = {"lo": tuple(lo if k == d else 0 for k in range(ndim)),
                 "hi": tuple(hi if k == d else 0 for k in range(ndim)), "interior": (0,) * ndim, "value": 0}
        padded = Var(out.aval)
        rw.emit(Eqn(pad_p, [joined], edges, [padded]), [joined])
        joined = padded
    terms = others
    if out.aval.dtype.is_floating_point:
        terms = [Literal(from_array(np.zeros((), out.aval.dtype.np)), ShapedArray((), out.aval.dtype,
                                                                                   out.aval.device))] + others
    if not terms:
        rw.sub[id(out)] = joined
        return True
    for i, term in enumerate(terms):
        total = out if i == len(terms) - 1 else Var(out.aval)
        rw.emit(Eqn(eqn.prim, [joined, term], eqn.params, [total]), [joined, term])
        joined = total
    return True


def _zero_pad_part(made) -> tuple | None:
    """(dim, offset, operand) of a pad equation (`made`: (eqn, inputs)) that places its operand at an offset
    along one dim in +0.0 (or integer 0) padding; None for any other equation."""
    if made is None or made[0].prim.name != "pad" or not isinstance(made[1][0], Var):
        return None
    p = made[0].params
    if p["value"] != 0 or math.copysign(1.0, p["value"]) < 0 or any(p["interior"]):
        return None
    dims = [d for d, (lo, hi) in enumerate(zip(p["lo"], p["hi"])) if lo or hi]
    return (dims[0], p["lo"][dims[0]], made[1][0]) if len(dims) == 1 else None


def _identity_of(eqn: Eqn, ins: list, producers: dict):
    """The input atom that `eqn` returns unchanged, or None."""
    name, out = eqn.prim.name, eqn.outvars[0].aval
    if name in ("mul", "add", "sub", "div"):
        x, y = ins
        if _neutral(name, _splat_value(y, producers)) and x.aval == out:
            return x
        if name in ("mul", "add") and _neutral(name, _splat_value(x, producers)) and y.aval == out:
            return y
        return None
    if name == "neg":
        made = producers.get(id(ins[0]))
        if made is not None and made[0].prim.name == "neg":
            return made[1][0]
        return None
    if name == "transpose":
        made = producers.get(id(ins[0]))
        if made is not None and made[0].prim.name == "transpose":
            inner, outer = made[0].params["perm"], eqn.params["perm"]
            if all(inner[o] == i for i, o in enumerate(outer)):
                return made[1][0]
    if name in ("convert", "reshape", "broadcast_to", "transpose") and ins[0].aval == out:
        if name == "transpose" and tuple(eqn.params["perm"]) != tuple(range(len(out.shape))):
            return None
        return ins[0]
    return None


def _splat_value(a, producers: dict):
    """The literal that `a` is, or that it broadcasts to every element; None when `a` is not such a splat."""
    if not isinstance(a, Literal):
        made = producers.get(id(a))
        if made is None or made[0].prim.name != "broadcast_to" or not isinstance(made[1][0], Literal):
            return None
        a = made[1][0]
    return a


def _neutral(name: str, lit) -> bool:
    """Whether literal `lit` is the right identity of `name`, exactly for its dtype."""
    if lit is None:
        return False
    value = lit.val.item()
    if name in ("mul", "div"):
        return value == 1
    if value != 0:
        return False
    if not lit.aval.dtype.is_floating_point:
        return True
    negative_zero = str(value).startswith("-")
    return negative_zero if name == "add" else not negative_zero


# ---------------------------------------------------------------- common subexpression elimination
def cse(closed: ClosedJaxpr) -> ClosedJaxpr:
    """Merge equations with the same primitive, params and inputs (primitives are pure functions)."""
    rw = _Rewriter(closed)
    seen: dict[tuple, list] = {}
    for eqn in rw.old.eqns:
        eqn = _nested(eqn, cse)
        inputs = [rw.read(a) for a in eqn.inputs]
        key = _eqn_key(eqn, inputs)
        first = seen.get(key) if key is not None else None
        if first is not None:
            rw.sub.update((id(v), w) for v, w in zip(eqn.outvars, first))
            continue
        rw.emit(eqn, inputs)
        if key is not None:
            seen[key] = eqn.outvars
    return rw.result()


def _eqn_key(eqn: Eqn, inputs: list):
    """A hashable key equal for equations that compute the same values; None when params are unhashable."""
    atoms = tuple(("lit", a.aval, repr(a.val.item())) if isinstance(a, Literal) else id(a) for a in inputs)
    key = (eqn.prim, tuple(sorted((k, _frozen(v)) for k, v in eqn.params.items())), atoms)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _frozen(v):
    """A param as a key that tells 1 from 1.0 and True, and 0.0 from -0.0."""
    if isinstance(v, (tuple, list)):
        return (type(v), tuple(_frozen(x) for x in v))
    if isinstance(v, float):
        return (float, repr(v))
    return (type(v), v)


# ---------------------------------------------------------------- dead code elimination
def dce(closed: ClosedJaxpr) -> ClosedJaxpr:
    """Remove equations and constants that no output depends on (inputs stay: they are the signature)."""
    j = closed.jaxpr
    live = {id(v) for v in j.outvars if isinstance(v, Var)}
    kept = []
    for eqn in reversed(j.eqns):
        if any(id(v) in live for v in eqn.outvars):
            eqn = _nested(eqn, dce)
            kept.append(eqn)
            live.update(id(a) for a in eqn.inputs if isinstance(a, Var))
    kept.reverse()
    pairs = [(v, c) for v, c in zip(j.constvars, closed.consts) if id(v) in live]
    return ClosedJaxpr(Jaxpr([v for v, _ in pairs], list(j.invars), kept, list(j.outvars)), [c for _, c in pairs])


# ---------------------------------------------------------------- the pipeline
PASSES = (inline_calls, fold_constants, simplify, cse, dce)


def optimize(closed: ClosedJaxpr) -> ClosedJaxpr:
    """All passes in order: inline nested compiled calls, fold constants, simplify, CSE, DCE."""
    shown = None
    for p in PASSES:
        closed = p(closed)
        if debug.LEVEL >= 3:   # FNX_DEBUG=3: the IR after each pass
            shown = debug.log_ir(f"IR after {p.__name__}", closed, shown)
    return closed
