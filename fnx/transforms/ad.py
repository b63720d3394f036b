"""Automatic differentiation transforms: jvp (forward mode), vjp and grad (reverse mode), jacobians.

Both modes are interpreters of primitives on the trace stack. `JVPTrace`
pushes tangents forward with each primitive's jvp rule. `VJPTrace` records
each primitive applied to its tracers (a tape at this transform's level);
the returned vjp function walks it backwards with each primitive's vjp rule
(the walk the eager engine uses too: fnx/_graph.py `backprop`).
Rules are written with fnx ops, so they bind on the levels below: that is
why grad(grad(f)), vmap(grad(f)) and grad(vmap(f)) compose.
"""
from __future__ import annotations

import functools

from .. import core
from .._graph import OutputOf, backprop, next_seq
from ..ops.creation import eye, ones_like, stop_gradient, zeros_like  # stop_gradient: re-exported from the ops
from ..core import FnxTypeError, Primitive, ShapedArray, Trace, new_main
from ..tensor import Tensor, Tracer, note_view
from ..tree import tree_flatten, tree_map, tree_unflatten
from .batching import vmap

__all__ = ["jvp", "vjp", "grad", "value_and_grad", "jacfwd", "jacrev", "hessian", "stop_gradient", "linearize"]


def _zeros_like(x):
    return zeros_like(x)


def _zero_tangent(x):
    return _zeros_like(x) if x.dtype.is_inexact else None


def _concrete_primal(tracer, what: str):
    p = tracer.primal
    return p._concrete(what) if isinstance(p, Tracer) else p


# ---------------------------------------------------------------- forward mode
class JVPTracer(Tracer):
    """A primal value paired with its tangent (None for integer and bool values)."""

    __slots__ = ("primal", "tangent")

    def __init__(self, trace: Trace, primal, tangent):
        self._trace, self.primal, self.tangent = trace, primal, tangent

    @property
    def aval(self) -> ShapedArray:
        return self.primal.aval

    def _assume(self, other: JVPTracer) -> None:
        self._trace, self.primal, self.tangent = other._trace, other.primal, other.tangent

    _concrete = _concrete_primal


def _jvp_tracer(trace, primal, tangent) -> JVPTracer:
    """The invariant every rule relies on: floating values carry a tangent tensor, others carry None."""
    if not primal.dtype.is_inexact:
        return trace.tracer_type(trace, primal, None)
    return trace.tracer_type(trace, primal, tangent if tangent is not None else _zeros_like(primal))


class JVPTrace(Trace):
    __slots__ = ()
    tracer_type = JVPTracer   # forward_ad's dual level makes tracers that also read as eager tensors

    def pure(self, val):
        return self.tracer_type(self, val, _zero_tangent(val))

    lift = pure

    def process_primitive(self, prim: Primitive, tracers, params):
        primals = [t.primal for t in tracers]
        tangents = [t.tangent for t in tracers]
        if all(t is None for t in tangents) or not prim.differentiable:  # nothing to differentiate
            out = prim.bind(*primals, **params)
            if prim.multiple_results:
                return [self.pure(o) for o in out]
            result = self.pure(out)
        else:
            out, tangent_out = prim.jvp(primals, tangents, **params)
            if prim.multiple_results:
                return [_jvp_tracer(self, o, t) for o, t in zip(out, tangent_out)]
            result = _jvp_tracer(self, out, tangent_out)
        if prim.view:
            note_view(result, tracers[0], prim, params)
        return result

    def process_custom(self, call, tracers):
        return call.jvp(self, tracers)


def _check_tensors(leaves, op: str, what: str) -> None:
    for x in leaves:
        if not isinstance(x, Tensor):
            raise FnxTypeError(f"{op}: {what} must be pytrees of Tensors, got a leaf of type {type(x).__name__}; "
                               f"wrap numbers with fnx.tensor(...) or mark them static")


def jvp(fun, primals, tangents, has_aux: bool = False):
    """(fun(*primals), J_fun(primals) @ tangents[, aux]): the forward-mode derivative along `tangents`.

    `primals` and `tangents` are tuples (or lists) of pytrees of the same structure. Integer outputs get
    zero tangents of their own dtype (JAX's float0), so the tangent output has the output's structure.

    >>> import fnx
    >>> fnx.jvp(lambda x: x * x, (fnx.tensor([1.0, 2.0]),), (fnx.ones(2),))   # (x^2, 2x * tangent)
    (tensor([1., 4.]), tensor([2., 4.]))
    """
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise FnxTypeError("jvp: primals and tangents must be tuples or lists of arguments, e.g. jvp(f, (x,), (v,))")
    p_leaves, p_def = tree_flatten(tuple(primals))
    t_leaves, t_def = tree_flatten(tuple(tangents))
    if p_def != t_def:
        raise FnxTypeError(f"jvp: primals and tangents must have the same tree structure, got {p_def} and {t_def}")
    _check_tensors(p_leaves, "jvp", "primals")
    _check_tensors(t_leaves, "jvp", "tangents")
    for p, t in zip(p_leaves, t_leaves):
        if tuple(p.shape) != tuple(t.shape) or p.dtype is not t.dtype:
            raise FnxTypeError(f"jvp: primal {p.dtype}{list(p.shape)} and tangent {t.dtype}{list(t.shape)} must "
                               f"have the same shape and dtype")
    with new_main(JVPTrace) as main:
        trace = JVPTrace(main)
        args = tree_unflatten(p_def, [_jvp_tracer(trace, p, t) for p, t in zip(p_leaves, t_leaves)])
        out = fun(*args)
        if has_aux:
            out, aux = _split_aux(out, "jvp")
            aux = _lower_aux(aux, main)
        o_leaves, o_def = tree_flatten(out)
        _check_tensors(o_leaves, "jvp", "outputs of the function")
        outs = [core.full_raise(trace, o) for o in o_leaves]
        primal_out = [core.full_lower(o.primal) for o in outs]
        tangent_out = [core.full_lower(o.tangent) if o.tangent is not None else _zeros_like(o.primal) for o in outs]
    res = tree_unflatten(o_def, primal_out), tree_unflatten(o_def, tangent_out)
    return res + (aux,) if has_aux else res


def _split_aux(out, op: str):
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise FnxTypeError(f"{op}(has_aux=True): the function must return a pair (output, aux)")
    return out[0], out[1]


def _lower_aux(aux, main):
    """Auxiliary outputs leave the transform as plain values (their primal part)."""
    def lower(x):
        while isinstance(x, Tracer) and x._trace.main is main:
            x = x.primal
        return core.full_lower(x)

    return tree_map(lower, aux)


def linearize(fun, *primals):
    """(fun(*primals), f_jvp) where f_jvp(*tangents) is the jvp at `primals` (re-evaluates fun)."""
    out = fun(*primals)
    return out, lambda *tangents: jvp(fun, primals, tangents)[1]


# ---------------------------------------------------------------- reverse mode
class _Node:
    """A primitive applied during a vjp trace: what its vjp rule needs, and the nodes its inputs came from.

    A node of a primitive with several results is reached through an `OutputOf` per result.
    """

    __slots__ = ("prim", "params", "primals", "parents", "out", "seq")

    def __init__(self, prim, params, primals, parents, out):
        self.prim, self.params, self.primals, self.parents, self.out = prim, params, primals, parents, out
        self.seq = next_seq()

    def vjp(self, ct):
        prim = self.prim
        if prim.multiple_results:
            ct = [c if c is not None else _zeros_like(o) for c, o in zip(ct.items, self.out)]
        if prim.vjp_takes_needs:
            needs = tuple(p is not None for p in self.parents)
            return prim.vjp(ct, self.primals, self.out, needs=needs, **self.params)
        return prim.vjp(ct, self.primals, self.out, **self.params)


class _Leaf:
    """Input `index` of the function being differentiated."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index

    parents = ()


def _refs(node, outs: list) -> list:
    """Where each of a multi-result node's outputs sends its cotangent (None for integer outputs)."""
    return [OutputOf(node, i, len(outs)) if o.dtype.is_inexact else None for i, o in enumerate(outs)]


class VJPTracer(Tracer):
    """A primal value and the node of the trace's tape that computed it; None for constants."""

    __slots__ = ("primal", "ref")

    def __init__(self, trace: Trace, primal, ref):
        self._trace, self.primal, self.ref = trace, primal, ref

    @property
    def aval(self) -> ShapedArray:
        return self.primal.aval

    def _assume(self, other: VJPTracer) -> None:
        self._trace, self.primal, self.ref = other._trace, other.primal, other.ref

    _concrete = _concrete_primal


class VJPTrace(Trace):
    __slots__ = ()

    def pure(self, val):
        return VJPTracer(self, val, None)

    lift = pure

    def process_primitive(self, prim: Primitive, tracers, params):
        primals = [t.primal for t in tracers]
        out = prim.bind(*primals, **params)
        refs = [t.ref for t in tracers]
        if not prim.differentiable or all(r is None for r in refs):
            if prim.multiple_results:
                return [VJPTracer(self, o, None) for o in out]
            result = VJPTracer(self, out, None)
        else:
            node = _Node(prim, params, primals, refs, out)
            if prim.multiple_results:
                return [VJPTracer(self, o, r) for o, r in zip(out, _refs(node, out))]
            result = VJPTracer(self, out, node if out.dtype.is_inexact else None)
        if prim.view:
            note_view(result, tracers[0], prim, params)
        return result

    def process_custom(self, call, tracers):
        return call.vjp(self, tracers)

    def record_custom(self, tracers, outs: list, vjp_rule) -> list:
        """Outputs `outs` (values below this level) of one node whose vjp is `vjp_rule(cts, primals, outs)`."""
        refs = [t.ref for t in tracers]
        if all(r is None for r in refs):
            return [VJPTracer(self, o, None) for o in outs]
        prim = Primitive("custom_call", multiple_results=True)
        prim.vjp = vjp_rule
        node = _Node(prim, {}, [t.primal for t in tracers], refs, outs)
        return [VJPTracer(self, o, r) for o, r in zip(outs, _refs(node, outs))]


def _backward_pass(out_refs, cts, leaves):
    """Cotangents of `leaves` (primal values) given cotangents `cts` of the outputs computed by `out_refs`."""
    result = [None] * len(leaves)

    def leaf(node, ct):
        result[node.index] = ct

    backprop(out_refs, cts, leaf)
    return [r if r is not None else _zeros_like(x) for r, x in zip(result, leaves)]


def vjp(fun, *primals, has_aux: bool = False):
    """(fun(*primals), vjp_fn[, aux]): vjp_fn(cotangent) gives the cotangents of `primals` (a tuple).

    `fun` runs once, now; `vjp_fn` can then pull back any number of cotangents of the output's structure
    (reverse mode: one call per output direction, whatever the number of inputs).

    >>> import fnx
    >>> y, f_vjp = fnx.vjp(fnx.sin, fnx.tensor([0.0, 1.0]))
    >>> f_vjp(fnx.ones(2))   # cotangent * cos(x), one entry per primal
    (tensor([1.0000, 0.5403]),)
    """
    p_leaves, p_def = tree_flatten(primals)
    _check_tensors(p_leaves, "vjp", "primals")
    with new_main(VJPTrace) as main:
        trace = VJPTrace(main)
        tracers = [VJPTracer(trace, p, _Leaf(i) if p.dtype.is_inexact else None)
                   for i, p in enumerate(p_leaves)]
        out = fun(*tree_unflatten(p_def, tracers))
        if has_aux:
            out, aux = _split_aux(out, "vjp")
        o_leaves, o_def = tree_flatten(out)
        _check_tensors(o_leaves, "vjp", "outputs of the function")
        outs = [core.full_raise(trace, o) for o in o_leaves]
        refs = [o.ref for o in outs]
        primal_out = [core.full_lower(o.primal) for o in outs]
        if has_aux:
            aux = _lower_aux(aux, main)
    leaf_values = [core.full_lower(p) for p in p_leaves]

    def vjp_fn(cotangent):
        c_leaves, c_def = tree_flatten(cotangent)
        if c_def != o_def:
            raise FnxTypeError(f"vjp_fn: cotangent structure {c_def} does not match the output structure {o_def}")
        for c, o in zip(c_leaves, primal_out):
            if not isinstance(c, Tensor) or tuple(c.shape) != tuple(o.shape) or c.dtype is not o.dtype:
                got = f"{c.dtype}{list(c.shape)}" if isinstance(c, Tensor) else type(c).__name__
                raise FnxTypeError(f"vjp_fn: cotangent {got} must match the output {o.dtype}{list(o.shape)}")
        return tree_unflatten(p_def, _backward_pass(refs, c_leaves, leaf_values))

    out_tree = tree_unflatten(o_def, primal_out)
    return (out_tree, vjp_fn, aux) if has_aux else (out_tree, vjp_fn)


def _argnums_tuple(argnums, nargs: int, op: str) -> tuple:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for a in nums:
        if not -nargs <= a < nargs:
            raise FnxTypeError(f"{op}: argnums {argnums} out of range for a function called with {nargs} "
                               f"positional arguments")
    return tuple(a % nargs for a in nums)


def value_and_grad(fun, argnums=0, has_aux: bool = False):
    """A function returning (fun(*args), gradient of fun with respect to args[argnums])."""

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        nums = _argnums_tuple(argnums, len(args), "grad")
        for a in nums:
            for leaf in tree_flatten(args[a])[0]:
                if not isinstance(leaf, Tensor) or not leaf.dtype.is_inexact:
                    what = f"{leaf.dtype}" if isinstance(leaf, Tensor) else type(leaf).__name__
                    raise FnxTypeError(f"grad: differentiated arguments must be floating-point or complex Tensors, "
                                       f"got {what} "
                                       f"in argument {a}; convert with fnx.tensor(..., dtype=fnx.float32) or "
                                       f"exclude it from argnums")

        def f_of_diff(*diff):
            full = list(args)
            for a, d in zip(nums, diff):
                full[a] = d
            return fun(*full, **kwargs)

        res = vjp(f_of_diff, *[args[a] for a in nums], has_aux=has_aux)
        out, fn = res[0], res[1]
        if not isinstance(out, Tensor) or out.numel() != 1 or out.ndim != 0 or not out.dtype.is_floating_point:
            got = f"{out.dtype}{list(out.shape)}" if isinstance(out, Tensor) else type(out).__name__
            raise FnxTypeError(f"grad requires a real scalar output (shape []), got {got}; reduce it (e.g. .sum()) "
                               f"or use vjp/jacrev for non-scalar outputs")
        g = fn(ones_like(out))
        g = g[0] if isinstance(argnums, int) else tuple(g)
        return ((out, res[2]), g) if has_aux else (out, g)

    return wrapped


def grad(fun, argnums=0, has_aux: bool = False):
    """A function returning the gradient of scalar `fun` with respect to args[argnums] (JAX semantics).

    `argnums` may be a tuple (then the gradient is a tuple); arguments may be pytrees (the gradient has
    their structure); with `has_aux`, `fun` returns (value, aux) and the function returns (gradient, aux).

    >>> import fnx
    >>> fnx.grad(lambda x: (x ** 3).sum())(fnx.tensor([1.0, 2.0]))
    tensor([ 3., 12.])
    >>> fnx.grad(fnx.grad(lambda x: x ** 3))(fnx.tensor(2.0))   # transforms compose: d2/dx2 x^3 = 6x
    tensor(12.)
    """
    vg = value_and_grad(fun, argnums, has_aux)

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        (value, g) = vg(*args, **kwargs)
        return (g, value[1]) if has_aux else g

    return wrapped


def _std_basis(x: Tensor):
    """Identity of size numel(x), shaped (numel, *x.shape)."""
    n = x.numel()
    return eye(n, dtype=x.dtype, device=x.device).reshape((n,) + tuple(x.shape))


def _diff_leaves(args, nums, op: str):
    """Flat leaves of the differentiated arguments (checked to be floating tensors) and their treedef."""
    leaves, treedef = tree_flatten([args[a] for a in nums])
    for x in leaves:
        if not isinstance(x, Tensor) or not x.dtype.is_inexact:
            what = f"{x.dtype}" if isinstance(x, Tensor) else type(x).__name__
            raise FnxTypeError(f"{op}: differentiated arguments must be floating-point or complex Tensors, got "
                               f"{what}; "
                               f"exclude it from argnums")
    return leaves, treedef


def _with_leaves(args, nums, treedef, leaves) -> list:
    full = list(args)
    for a, sub in zip(nums, tree_unflatten(treedef, list(leaves))):
        full[a] = sub
    return full


def _assemble(out_def, in_def, blocks, argnums):
    """Jacobian pytree: the output structure, holding at each output leaf the inputs' structure of blocks.

    `blocks[j][k]` is the block of output leaf j and input leaf k.
    """
    per_out = []
    for row in blocks:
        by_arg = tree_unflatten(in_def, row)
        per_out.append(by_arg[0] if isinstance(argnums, int) else tuple(by_arg))
    return tree_unflatten(out_def, per_out)


def jacfwd(fun, argnums=0, has_aux: bool = False):
    """Jacobian by forward mode: one jvp per input element, batched with vmap.

    Each block has shape output.shape + input.shape; inputs and outputs may be pytrees.
    """
    def jac(*args, **kwargs):
        nums = _argnums_tuple(argnums, len(args), "jacfwd")
        leaves, in_def = _diff_leaves(args, nums, "jacfwd")
        for p in leaves:
            if p.dtype.is_complex:   # its real tangent basis would miss the imaginary directions (as in JAX)
                raise FnxTypeError(f"jacfwd: complex inputs ({p.dtype}) are not supported (a basis of real "
                                   f"tangents misses the imaginary directions); use jacrev or grad, or pass the "
                                   f"input as real pairs with fnx.view_as_real")

        def f_flat(*ls):
            return fun(*_with_leaves(args, nums, in_def, ls), **kwargs)

        cols, out_def, aux = [], None, None
        for k, p in enumerate(leaves):
            def push(t, k=k):
                tangents = tuple(t if j == k else _zeros_like(q) for j, q in enumerate(leaves))
                res = jvp(f_flat, tuple(leaves), tangents, has_aux=has_aux)
                return (res[1], res[2]) if has_aux else res[1]

            res = vmap(push, out_axes=(-1, None) if has_aux else -1)(_std_basis(p))
            t_out, aux = res if has_aux else (res, None)
            o_leaves, out_def = tree_flatten(t_out)
            cols.append([c.reshape(tuple(c.shape[:-1]) + tuple(p.shape)) for c in o_leaves])
        blocks = [[col[j] for col in cols] for j in range(out_def.num_leaves)]
        res = _assemble(out_def, in_def, blocks, argnums)
        return (res, aux) if has_aux else res

    return jac


def jacrev(fun, argnums=0, has_aux: bool = False):
    """Jacobian by reverse mode: one vjp per output element, batched with vmap.

    Each block has shape output.shape + input.shape; inputs and outputs may be pytrees.
    """
    def jac(*args, **kwargs):
        nums = _argnums_tuple(argnums, len(args), "jacrev")
        leaves, in_def = _diff_leaves(args, nums, "jacrev")

        def f_flat(*ls):
            return fun(*_with_leaves(args, nums, in_def, ls), **kwargs)

        res = vjp(f_flat, *leaves, has_aux=has_aux)
        out, fn = res[0], res[1]
        o_leaves, o_def = tree_flatten(out)
        blocks = []
        for j, o in enumerate(o_leaves):
            def pull(ct, j=j):
                cts = [ct if i == j else _zeros_like(q) for i, q in enumerate(o_leaves)]
                return list(fn(tree_unflatten(o_def, cts)))

            rows = vmap(pull)(_std_basis(o))
            blocks.append([r.reshape(tuple(o.shape) + tuple(r.shape[1:])) for r in rows])
        jac_tree = _assemble(o_def, in_def, blocks, argnums)
        return (jac_tree, res[2]) if has_aux else jac_tree

    return jac


def hessian(fun, argnums=0, has_aux: bool = False):
    """Matrix of second derivatives: jacfwd(jacrev(fun)) (forward over reverse, as JAX does)."""
    return jacfwd(jacrev(fun, argnums, has_aux=has_aux), argnums, has_aux=has_aux)
