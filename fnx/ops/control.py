"""Structured control flow: `cond`/`switch`, `while_loop`, `fori_loop`, `scan`.

With concrete values (eager mode, or under grad/jvp of concrete inputs) they
run as plain Python control flow, so every transform sees the ops that
actually ran. When values are abstract (staged by make_jaxpr/compile, or a
batched predicate under vmap) the bodies are traced once into jaxprs and
bound as the primitives below; their rules transform those jaxprs
(fnx/transforms/jaxpr_rules.py).
"""
from __future__ import annotations

from .. import core
from ..autograd.grad_mode import no_grad
from ..core import FnxTypeError, Primitive, ShapedArray
from ..ir import ClosedJaxpr, Jaxpr, Var
from ..tensor import Tensor, Tracer, from_array
from ..transforms.jaxpr_rules import batch_jaxpr, closed_call, jvp_jaxpr, trace_flat, vjp_jaxpr
from ..tree import tree_flatten, tree_map, tree_unflatten
from ._batching import batch_size, move_to_front, with_batch_size
from .creation import arange, tensor, zeros, zeros_like
from .elementwise import clamp, eq, ne, where
from .joins import stack
from .reduce import any as _any
from .shape import movedim

__all__ = ["cond", "switch", "while_loop", "fori_loop", "scan"]


# ---------------------------------------------------------------- helpers
def _concrete(x):
    """The concrete value behind `x`, or None when it is abstract (staged or batched)."""
    if not isinstance(x, Tracer):
        return x
    try:
        return x._concrete("control flow")
    except core.FnxTypeError:
        return None


def _staging() -> bool:
    return core.state.dynamic_trace.level > 0


def _avals(xs) -> list:
    return [x.aval for x in xs]


def _as_tensor(x):
    if isinstance(x, Tensor):
        return x
    return tensor(x)


def _flatten_tensors(tree, op: str, what: str):
    leaves, treedef = tree_flatten(tree)
    for x in leaves:
        if not isinstance(x, Tensor):
            raise FnxTypeError(f"{op}: {what} must be pytrees of Tensors, got {type(x).__name__}; wrap numbers with "
                               f"fnx.tensor(...)")
    return leaves, treedef


def _tensor_impl(fn):
    """A primitive impl over arrays that runs `fn` on tensors (control-flow bodies are jaxprs of fnx ops)."""

    def impl(xp, *arrays, **params):
        with no_grad():
            outs = fn(*[from_array(a) for a in arrays], **params)
        return [o._value for o in outs]

    return impl


def _floats_only(values, rule_outs):
    """Spread `rule_outs` (one per floating value) over `values`, with None for the others."""
    it = iter(rule_outs)
    return [next(it) if v.dtype.is_floating_point else None for v in values]


def _move(x, d, size: int):
    return with_batch_size(x, d, size)


def _select(pred, on_true, on_false):
    """where(pred, on_true, on_false) with a (batch,) predicate broadcast over trailing dims."""
    return where(pred.reshape(tuple(pred.shape) + (1,) * (on_true.ndim - pred.ndim)), on_true, on_false)


# ---------------------------------------------------------------- cond / switch
cond_p = Primitive("cond", multiple_results=True)


def _cond_eval(index, *ops, branches):
    i = min(max(int(index.item()), 0), len(branches) - 1)
    return closed_call(branches[i], ops)


cond_p.def_impl(_tensor_impl(_cond_eval))
cond_p.def_abstract(lambda index, *ops, branches: list(branches[0].out_avals))


@cond_p.def_jvp
def _cond_jvp(primals, tangents, *, branches):
    index, ops = primals[0], list(primals[1:])
    tans = [t for t, o in zip(tangents[1:], ops) if o.dtype.is_floating_point]
    new = tuple(jvp_jaxpr(b, _avals(ops)) for b in branches)
    outs = cond_p.bind(index, *ops, *tans, branches=new)
    n = len(branches[0].out_avals)
    return outs[:n], _floats_only(outs[:n], outs[n:])


@cond_p.def_vjp
def _cond_vjp(cts, primals, outs, *, branches):
    index, ops = primals[0], list(primals[1:])
    float_cts = [c for c, o in zip(cts, outs) if o.dtype.is_floating_point]
    new = tuple(vjp_jaxpr(b, _avals(ops)) for b in branches)
    return [None] + _floats_only(ops, cond_p.bind(index, *ops, *float_cts, branches=new))


@cond_p.def_batch
def _cond_batch(args, dims, *, branches):
    """Unbatched index: a cond of batched branches. Batched index: every branch runs, results are selected."""
    size = batch_size(args, dims)
    index, ops = args[0], list(args[1:])
    batched = [batch_jaxpr(b, _avals_unbatched(ops, dims[1:]), dims[1:], size) for b in branches]
    if dims[0] is None:
        return cond_p.bind(index, *ops, branches=tuple(batched)), [0] * len(branches[0].out_avals)
    idx = _move(index, dims[0], size)
    results = [closed_call(b, ops) for b in batched]
    if idx.dtype.name != "bool":
        idx = clamp(idx, 0, len(branches) - 1)
    outs = results[0]
    for i, res in enumerate(results[1:], start=1):
        pick = idx if idx.dtype.name == "bool" else eq(idx, i)
        outs = [_select(pick, r, o) for r, o in zip(res, outs)]
    return outs, [0] * len(outs)


def switch(index, branches, *operands):
    """`branches[index](*operands)`, with `index` clamped into range (JAX's lax.switch)."""
    if not branches:
        raise FnxTypeError("switch: needs at least one branch")
    idx = _concrete(index) if isinstance(index, Tensor) else index
    if idx is not None and not _staging():
        return branches[min(max(int(idx), 0), len(branches) - 1)](*operands)
    index = _as_tensor(index)
    if index.dtype.is_floating_point or tuple(index.shape) != ():
        raise FnxTypeError(f"switch: index must be an integer scalar, got {index.dtype}{list(index.shape)}")
    return _cond_staged(index if index.dtype.name == "bool" else index.to("int64"), branches, operands)


def cond(pred, true_fun, false_fun, *operands):
    """`true_fun(*operands)` if `pred` else `false_fun(*operands)`; both return the same structure (lax.cond).

    A concrete `pred` runs one branch as Python code; an abstract one (staged, or batched under vmap) traces
    both into a `cond` primitive, which vmap turns into a select between both branches' results.
    """
    p = _concrete(pred) if isinstance(pred, Tensor) else pred
    if p is not None and not _staging():
        return (true_fun if bool(p) else false_fun)(*operands)
    pred = _as_tensor(pred)
    if tuple(pred.shape) != ():
        raise FnxTypeError(f"cond: pred must be a scalar, got shape {list(pred.shape)}; under vmap each example's "
                           f"pred is a scalar")
    if pred.dtype.name != "bool":
        pred = ne(pred, 0)
    return _cond_staged(pred, [false_fun, true_fun], operands)


def _cond_staged(index: Tensor, branches, operands):
    """Trace every branch on the operands' avals and bind `cond` (index: a bool or int64 scalar)."""
    leaves, in_tree = _flatten_tensors(operands, "cond", "operands")
    out_trees, traced = [], []
    for fn in branches:
        def flat(*xs, fn=fn):
            o_leaves, o_def = tree_flatten(fn(*tree_unflatten(in_tree, list(xs))))
            out_trees.append(o_def)
            return [_as_tensor(o) for o in o_leaves]

        traced.append(trace_flat(flat, _avals(leaves)))
    if any(t != out_trees[0] for t in out_trees):
        shown = " and ".join(map(str, out_trees))
        raise FnxTypeError(f"cond: branches must return the same tree structure, got {shown}")
    first = traced[0][0].out_avals
    for closed, _ in traced[1:]:
        if closed.out_avals != first:
            raise FnxTypeError(f"cond: branches must return the same shapes and dtypes, got "
                               f"{[a.str_short() for a in first]} and {[a.str_short() for a in closed.out_avals]}")
    consts = [c for _, cs in traced for c in cs]
    branches_j = tuple(_take_all_consts(closed, i, [len(cs) for _, cs in traced], consts)
                       for i, (closed, _) in enumerate(traced))
    outs = cond_p.bind(index, *consts, *leaves, branches=branches_j)
    return tree_unflatten(out_trees[0], outs)


def _take_all_consts(closed: ClosedJaxpr, i: int, counts: list, consts: list) -> ClosedJaxpr:
    """Branch `i` with inputs (every branch's consts, operands); it ignores the other branches' consts."""
    j = closed.jaxpr
    start = sum(counts[:i])
    pre = [Var(c.aval) for c in consts[:start]]
    post = [Var(c.aval) for c in consts[start + counts[i]:]]
    mine, rest = j.invars[:counts[i]], j.invars[counts[i]:]
    return ClosedJaxpr(Jaxpr([], pre + list(mine) + post + list(rest), j.eqns, j.outvars), [])


# ---------------------------------------------------------------- while_loop
while_p = Primitive("while_loop", multiple_results=True)


def _while_eval(*args, cond_jaxpr, body_jaxpr, n_cc, n_bc):
    cc, bc, val = list(args[:n_cc]), list(args[n_cc:n_cc + n_bc]), list(args[n_cc + n_bc:])
    while bool(closed_call(cond_jaxpr, cc + val)[0].item()):
        val = closed_call(body_jaxpr, bc + val)
    return val


while_p.def_impl(_tensor_impl(_while_eval))
while_p.def_abstract(lambda *avals, cond_jaxpr, body_jaxpr, n_cc, n_bc: list(avals[n_cc + n_bc:]))


@while_p.def_jvp
def _while_jvp(primals, tangents, *, cond_jaxpr, body_jaxpr, n_cc, n_bc):
    cc, bc = list(primals[:n_cc]), list(primals[n_cc:n_cc + n_bc])
    val = list(primals[n_cc + n_bc:])
    bc_t = [t for t, p in zip(tangents[n_cc:n_cc + n_bc], bc) if p.dtype.is_floating_point]
    val_t = [t for t, p in zip(tangents[n_cc + n_bc:], val) if p.dtype.is_floating_point]
    body_jvp = jvp_jaxpr(body_jaxpr, _avals(bc + val))
    n_bt, n_v = len(bc_t), len(val)

    def cond2(*a):
        return closed_call(cond_jaxpr, list(a[:n_cc]) + list(a[n_cc:n_cc + n_v]))

    def body2(*a):
        b, bt, v, vt = a[:n_bc], a[n_bc:n_bc + n_bt], a[n_bc + n_bt:n_bc + n_bt + n_v], a[n_bc + n_bt + n_v:]
        return closed_call(body_jvp, list(b) + list(v) + list(bt) + list(vt))

    cond_j, cond_consts = trace_flat(cond2, _avals(cc + val + val_t))
    body_j, body_consts = trace_flat(body2, _avals(bc + bc_t + val + val_t))
    outs = while_p.bind(*cond_consts, *cc, *body_consts, *bc, *bc_t, *val, *val_t, cond_jaxpr=cond_j,
                        body_jaxpr=body_j, n_cc=len(cond_consts) + n_cc,
                        n_bc=len(body_consts) + n_bc + n_bt)
    return outs[:n_v], _floats_only(outs[:n_v], outs[n_v:])


@while_p.def_vjp
def _while_vjp(cts, primals, outs, **params):
    raise NotImplementedError("reverse-mode differentiation (grad/vjp/backward) of while_loop is not supported, as "
                              "in JAX: the trip count is data-dependent. Use fori_loop with Python-int bounds or "
                              "scan, which are differentiable, or jvp/jacfwd (forward mode works).")


@while_p.def_batch
def _while_batch(args, dims, *, cond_jaxpr, body_jaxpr, n_cc, n_bc):
    size = batch_size(args, dims)
    cc, bc = list(args[:n_cc]), list(args[n_cc:n_cc + n_bc])
    val = [_move(v, d, size) for v, d in zip(args[n_cc + n_bc:], dims[n_cc + n_bc:])]
    cc_d, bc_d = list(dims[:n_cc]), list(dims[n_cc:n_cc + n_bc])
    v_avals = [ShapedArray(v.shape[1:], v.dtype, v.device) for v in val]
    cond_b = batch_jaxpr(cond_jaxpr, _avals_unbatched(cc, cc_d) + v_avals, cc_d + [0] * len(val), size)
    body_b = batch_jaxpr(body_jaxpr, _avals_unbatched(bc, bc_d) + v_avals, bc_d + [0] * len(val), size)
    n_v = len(val)

    def cond2(*a):
        return [_any(closed_call(cond_b, list(a))[0])]

    def body2(*a):
        c, b, v = list(a[:n_cc]), list(a[n_cc:n_cc + n_bc]), list(a[n_cc + n_bc:])
        pred = closed_call(cond_b, c + v)[0]
        new = closed_call(body_b, b + v)
        return [_select(pred, x, y) for x, y in zip(new, v)]

    cond_j, cond_consts = trace_flat(cond2, _avals(cc + bc + val)[:n_cc] + _avals(val))
    body_j, body_consts = trace_flat(body2, _avals(cc + bc + val))
    outs = while_p.bind(*cond_consts, *cc, *body_consts, *cc, *bc, *val, cond_jaxpr=cond_j, body_jaxpr=body_j,
                        n_cc=len(cond_consts) + n_cc, n_bc=len(body_consts) + n_cc + n_bc)
    return outs, [0] * n_v


def _avals_unbatched(xs, ds) -> list:
    return [x.aval if d is None else ShapedArray(x.shape[:d] + x.shape[d + 1:], x.dtype, x.device)
            for x, d in zip(xs, ds)]


def while_loop(cond_fun, body_fun, init_val):
    """Repeat `val = body_fun(val)` while `cond_fun(val)`; forward-mode differentiable, vmappable."""
    leaves, treedef = _flatten_tensors(init_val, "while_loop", "init_val")
    if not _staging():
        val = init_val
        while True:
            pred = cond_fun(val)
            p = _concrete(pred) if isinstance(pred, Tensor) else pred
            if p is None:
                break
            if not bool(p):
                return val
            val = body_fun(val)
        leaves, treedef = _flatten_tensors(val, "while_loop", "the loop state")

    def cond_flat(*xs):
        pred = _as_tensor(cond_fun(tree_unflatten(treedef, list(xs))))
        if tuple(pred.shape) != () or pred.dtype.name != "bool":
            raise FnxTypeError(f"while_loop: cond_fun must return a bool scalar, got {pred.dtype}{list(pred.shape)}")
        return [pred]

    def body_flat(*xs):
        out, out_def = _flatten_tensors(body_fun(tree_unflatten(treedef, list(xs))), "while_loop", "body output")
        if out_def != treedef or _avals(out) != _avals(leaves):
            want, got = [a.str_short() for a in _avals(leaves)], [a.str_short() for a in _avals(out)]
            raise FnxTypeError(f"while_loop: body_fun must return the same structure, shapes and dtypes as its input "
                               f"({want}), got {got}")
        return out

    cond_j, cc = trace_flat(cond_flat, _avals(leaves))
    body_j, bc = trace_flat(body_flat, _avals(leaves))
    outs = while_p.bind(*cc, *bc, *leaves, cond_jaxpr=cond_j, body_jaxpr=body_j, n_cc=len(cc), n_bc=len(bc))
    return tree_unflatten(treedef, outs)


# ---------------------------------------------------------------- scan
scan_p = Primitive("scan", multiple_results=True)


def _scan_eval(*args, jaxpr, n_consts, n_carry, length, reverse):
    consts, carry = list(args[:n_consts]), list(args[n_consts:n_consts + n_carry])
    xs = list(args[n_consts + n_carry:])
    ys = []
    for i in (range(length - 1, -1, -1) if reverse else range(length)):
        out = closed_call(jaxpr, consts + carry + [x[i] for x in xs])
        carry, y = out[:n_carry], out[n_carry:]
        ys.append(y)
    if reverse:
        ys.reverse()
    y_avals = jaxpr.out_avals[n_carry:]
    stacked = [stack([y[k] for y in ys]) if ys else _empty((0,) + a.shape, a) for k, a in enumerate(y_avals)]
    return carry + stacked


def _empty(shape, aval):
    return zeros(shape, dtype=aval.dtype, device=aval.device)


scan_p.def_impl(_tensor_impl(_scan_eval))


@scan_p.def_abstract
def _scan_abstract(*avals, jaxpr, n_consts, n_carry, length, reverse):
    ys = [ShapedArray((length,) + a.shape, a.dtype, a.device) for a in jaxpr.out_avals[n_carry:]]
    return list(avals[n_consts:n_consts + n_carry]) + ys


def _scan_parts(args, n_consts, n_carry):
    return list(args[:n_consts]), list(args[n_consts:n_consts + n_carry]), list(args[n_consts + n_carry:])


def _x_aval(x) -> ShapedArray:
    return ShapedArray(tuple(x.shape[1:]), x.dtype, x.device)


@scan_p.def_jvp
def _scan_jvp(primals, tangents, *, jaxpr, n_consts, n_carry, length, reverse):
    consts, carry, xs = _scan_parts(primals, n_consts, n_carry)
    c_t, k_t, x_t = [[t for t, p in zip(ts, ps) if p.dtype.is_floating_point]
                     for ts, ps in zip(_scan_parts(tangents, n_consts, n_carry), (consts, carry, xs))]
    body = jvp_jaxpr(jaxpr, _avals(consts) + _avals(carry) + [_x_aval(x) for x in xs])
    n_c, n_k, n_x = len(consts), len(carry), len(xs)
    n_ct, n_kt = len(c_t), len(k_t)
    n_y = len(jaxpr.out_avals) - n_carry
    out_fl = [a.dtype.is_floating_point for a in jaxpr.out_avals]
    n_kt_out = sum(out_fl[:n_carry])

    def body2(*a):
        c, ct = list(a[:n_c]), list(a[n_c:n_c + n_ct])
        k, kt = list(a[n_c + n_ct:n_c + n_ct + n_k]), list(a[n_c + n_ct + n_k:n_c + n_ct + n_k + n_kt])
        x, xt = list(a[n_c + n_ct + n_k + n_kt:n_c + n_ct + n_k + n_kt + n_x]), list(a[n_c + n_ct + n_k + n_kt + n_x:])
        out = closed_call(body, c + k + x + ct + kt + xt)
        prim_out, tan_out = out[:n_k + n_y], out[n_k + n_y:]
        return prim_out[:n_k] + tan_out[:n_kt_out] + prim_out[n_k:] + tan_out[n_kt_out:]

    avals = (_avals(consts) + _avals(c_t) + _avals(carry) + _avals(k_t) + [_x_aval(x) for x in xs]
             + [_x_aval(x) for x in x_t])
    body_j, extra = trace_flat(body2, avals)
    outs = scan_p.bind(*extra, *consts, *c_t, *carry, *k_t, *xs, *x_t, jaxpr=body_j,
                       n_consts=len(extra) + n_c + n_ct, n_carry=n_k + n_kt, length=length, reverse=reverse)
    k_out, kt_out = outs[:n_k], outs[n_k:n_k + n_kt_out]
    y_out, yt_out = outs[n_k + n_kt_out:n_k + n_kt_out + n_y], outs[n_k + n_kt_out + n_y:]
    return k_out + y_out, _floats_only(k_out, kt_out) + _floats_only(y_out, yt_out)


@scan_p.def_vjp
def _scan_vjp(cts, primals, outs, *, jaxpr, n_consts, n_carry, length, reverse):
    consts, carry, xs = _scan_parts(primals, n_consts, n_carry)
    n_k = n_carry
    # forward again, keeping the carry that enters each step
    keep = _carry_history(consts, carry, xs, jaxpr, n_carry, length, reverse)
    ct_carry = [c if c is not None else zeros_like(o) for c, o in zip(cts[:n_k], outs[:n_k])]
    ct_ys = [c if c is not None else zeros_like(o) for c, o in zip(cts[n_k:], outs[n_k:])]
    in_avals = _avals(consts) + _avals(carry) + [_x_aval(x) for x in xs]
    body_vjp = vjp_jaxpr(jaxpr, in_avals)
    fl_in = [a.dtype.is_floating_point for a in in_avals]
    fl_out = [a.dtype.is_floating_point for a in jaxpr.out_avals]
    n_c, n_x = len(consts), len(xs)
    c_fl = [i for i in range(n_c) if fl_in[i]]
    k_fl = [i for i in range(n_k) if fl_in[n_c + i]]
    x_fl = [i for i in range(n_x) if fl_in[n_c + n_k + i]]
    ct_acc = [zeros_like(consts[i]) for i in c_fl]
    ck = [ct_carry[i] for i in range(n_k) if fl_out[i]]

    def bwd(*a):
        c = list(a[:n_c])
        acc, kct = list(a[n_c:n_c + len(c_fl)]), list(a[n_c + len(c_fl):n_c + len(c_fl) + len(ck)])
        rest = list(a[n_c + len(c_fl) + len(ck):])
        k_i, x_i, yct = rest[:n_k], rest[n_k:n_k + n_x], rest[n_k + n_x:]
        out_cts = kct + [y for y, f in zip(yct, fl_out[n_k:]) if f]
        in_cts = closed_call(body_vjp, c + k_i + x_i + out_cts)
        it = iter(in_cts)
        per_in = [next(it) if f else None for f in fl_in]
        new_acc = [s + per_in[i] for s, i in zip(acc, c_fl)]
        new_kct = [per_in[n_c + i] for i in k_fl]
        return new_acc + new_kct + [per_in[n_c + n_k + i] for i in x_fl]

    avals = (_avals(consts) + _avals(ct_acc) + _avals(ck) + [_x_aval(h) for h in keep] + [_x_aval(x) for x in xs]
             + [_x_aval(y) for y in ct_ys])
    bwd_j, extra = trace_flat(bwd, avals)
    res = scan_p.bind(*extra, *consts, *ct_acc, *ck, *keep, *xs, *ct_ys, jaxpr=bwd_j,
                      n_consts=len(extra) + n_c, n_carry=len(c_fl) + len(ck), length=length, reverse=not reverse)
    acc_out, kct_out, xct = res[:len(c_fl)], res[len(c_fl):len(c_fl) + len(ck)], res[len(c_fl) + len(ck):]
    out = [None] * (n_c + n_k + n_x)
    for i, g in zip(c_fl, acc_out):
        out[i] = g
    for i, g in zip(k_fl, kct_out):
        out[n_c + i] = g
    for i, g in zip(x_fl, xct):
        out[n_c + n_k + i] = g
    return out


def _carry_history(consts, carry, xs, jaxpr, n_carry, length, reverse) -> list:
    """Stacked carries entering each step (index i: the carry before step i)."""
    def body(*a):
        c, k, x = list(a[:len(consts)]), list(a[len(consts):len(consts) + n_carry]), list(a[len(consts) + n_carry:])
        out = closed_call(jaxpr, c + k + x)
        return out[:n_carry] + k

    body_j, extra = trace_flat(body, _avals(consts) + _avals(carry) + [_x_aval(x) for x in xs])
    outs = scan_p.bind(*extra, *consts, *carry, *xs, jaxpr=body_j, n_consts=len(extra) + len(consts),
                       n_carry=n_carry, length=length, reverse=reverse)
    return list(outs[n_carry:])


@scan_p.def_batch
def _scan_batch(args, dims, *, jaxpr, n_consts, n_carry, length, reverse):
    size = batch_size(args, dims)
    consts, carry, xs = _scan_parts(args, n_consts, n_carry)
    c_d = list(dims[:n_consts])
    carry = [_move(k, d, size) for k, d in zip(carry, dims[n_consts:n_consts + n_carry])]
    xs_b = []
    x_d = []
    for x, d in zip(xs, dims[n_consts + n_carry:]):
        if d is None:
            xs_b.append(x)
            x_d.append(None)
        else:
            xs_b.append(movedim(move_to_front(x, d), 0, 1))
            x_d.append(0)
    in_avals = (_avals_unbatched(consts, c_d) + [ShapedArray(k.shape[1:], k.dtype, k.device) for k in carry]
                + [_x_aval(x) if d is None else ShapedArray(x.shape[2:], x.dtype, x.device) for x, d in zip(xs_b, x_d)])
    body_b = batch_jaxpr(jaxpr, in_avals, c_d + [0] * n_carry + x_d, size)
    outs = scan_p.bind(*consts, *carry, *xs_b, jaxpr=body_b, n_consts=n_consts, n_carry=n_carry, length=length,
                       reverse=reverse)
    return outs, [0] * n_carry + [1] * (len(outs) - n_carry)


def scan(f, init, xs=None, length: int | None = None, reverse: bool = False):
    """Loop `carry, y = f(carry, x)` over the leading axis of `xs`; returns (carry, stacked ys) (lax.scan)."""
    x_leaves, x_def = _flatten_tensors(xs, "scan", "xs")
    lengths = {x.shape[0] for x in x_leaves if x.ndim}
    if len(lengths) > 1 or (length is not None and lengths and length not in lengths):
        raise FnxTypeError(f"scan: xs leading axis sizes {sorted(lengths)} disagree (length={length})")
    if length is None:
        if not lengths:
            raise FnxTypeError("scan: pass length= when xs is None or has no leaves")
        length = lengths.pop()
    if not _staging():
        carry, ys = init, []
        for i in (range(length - 1, -1, -1) if reverse else range(length)):
            carry, y = f(carry, tree_map(lambda x: x[i], xs))
            ys.append(y)
        if reverse:
            ys.reverse()
        if not ys:
            return carry, None
        return carry, tree_map(lambda *ts: stack(list(ts)), *ys)
    k_leaves, k_def = _flatten_tensors(init, "scan", "init")
    y_def = []

    def body(*a):
        k = tree_unflatten(k_def, list(a[:len(k_leaves)]))
        x = tree_unflatten(x_def, list(a[len(k_leaves):]))
        new_k, y = f(k, x)
        nk, nk_def = _flatten_tensors(new_k, "scan", "the carry returned by f")
        if nk_def != k_def or _avals(nk) != _avals(k_leaves):
            want, got = [v.str_short() for v in _avals(k_leaves)], [v.str_short() for v in _avals(nk)]
            raise FnxTypeError(f"scan: f must return a carry of the same structure, shapes and dtypes as init "
                               f"({want}), got {got}")
        yl, yd = _flatten_tensors(y, "scan", "ys")
        y_def[:] = [yd]
        return nk + yl

    body_j, consts = trace_flat(body, _avals(k_leaves) + [_x_aval(x) for x in x_leaves])
    outs = scan_p.bind(*consts, *k_leaves, *x_leaves, jaxpr=body_j, n_consts=len(consts), n_carry=len(k_leaves),
                       length=length, reverse=reverse)
    return tree_unflatten(k_def, outs[:len(k_leaves)]), tree_unflatten(y_def[0], outs[len(k_leaves):])


def _static_bound(b):
    """A loop bound as a Python int when it is known now (an int, or a concrete tensor outside staging)."""
    if isinstance(b, Tensor):
        c = None if _staging() else _concrete(b)
        return None if c is None else int(c)
    return int(b)


def fori_loop(lower, upper, body_fun, init_val):
    """`val = body_fun(i, val)` for i in [lower, upper), i an int64 scalar tensor (lax.fori_loop).

    Bounds known at trace time (Python ints) make it a scan, which every transform differentiates; traced
    bounds make it a while_loop (forward mode and vmap only, as in JAX).
    """
    lo, hi = _static_bound(lower), _static_bound(upper)
    static = lo is not None and hi is not None
    if static:
        lower, upper = lo, hi
    if static and not _staging():
        val = init_val
        for i in range(lower, upper):
            val = body_fun(tensor(i), val)
        return val
    if static:
        carry, _ = scan(lambda v, i: (body_fun(i, v), None), init_val, arange(lower, upper))
        return carry
    lo, hi = _as_tensor(lower).to("int64"), _as_tensor(upper).to("int64")
    _, val = while_loop(lambda s: s[0] < hi, lambda s: (s[0] + 1, body_fun(s[0], s[1])), (lo, init_val))
    return val
