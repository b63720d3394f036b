"""User-defined derivative rules and rematerialisation: `custom_vjp`, `custom_jvp`, `checkpoint`.

Each is a call of a Python function with a rule attached. `custom_call`
hands it to the top trace, whose `process_custom` picks the call's method
for that transform: eager (records one node on the tape), jvp, vjp
(records one node on the vjp trace), batch (vmaps the function and its
rules) or inline (staging, where the transforms above have already applied
the rule).
"""
from __future__ import annotations

import functools

from .. import core
from ..core import FnxTypeError
from ..tensor import Tensor
from ..tree import tree_flatten, tree_unflatten

__all__ = ["custom_vjp", "custom_jvp", "checkpoint", "remat"]


def custom_call(call, args: list) -> list:
    """Run `call` (a _CustomCall) on flat tensor `args` under the current transforms."""
    if not core.transforms_active:
        return call.eager(args)
    top = core.find_top_trace(args)
    tracers = [core.full_raise(top, a) for a in args]
    outs = top.process_custom(call, tracers)
    return [core.full_lower(o) for o in outs]


class _CustomCall:
    """A flat function `fun(*tensors) -> list of tensors` plus the rule that replaces its derivative."""

    def __init__(self, fun):
        self.fun = fun

    def inline(self, args: list) -> list:
        return self.fun(*args)

    # -- reverse mode: a node whose vjp is `self.pullback(primals, outs)`
    def pullback(self, primals: list, outs: list):
        raise NotImplementedError

    def forward_for_vjp(self, primals: list):
        """(outs, pullback) for reverse mode; the default evaluates fun and asks `pullback`."""
        outs = self.fun(*primals)
        return outs, self.pullback(primals, outs)

    def eager(self, args: list) -> list:
        needs = core.grad_enabled and any(a._requires_grad for a in args)
        if not needs:
            return self.fun(*args)
        prev = core.set_grad_enabled_flag(False)
        try:
            detached = [a.detach() for a in args]
            outs, pull = self.forward_for_vjp(detached)
        finally:
            core.set_grad_enabled_flag(prev)
        return _record_eager(type(self).__name__.strip("_"), args, outs, pull)

    def jvp(self, trace, tracers):
        return self.fun(*tracers)

    def vjp(self, trace, tracers):
        primals = [t.primal for t in tracers]
        outs, pull = self.forward_for_vjp(primals)
        return trace.record_custom(tracers, outs, lambda cts, primals, outs: pull(cts))

    def batch(self, trace, tracers):
        return self.fun(*tracers)


def _record_eager(name: str, args: list, outs: list, pull) -> list:
    """Put one node on the eager tape whose backward is `pull(output cotangents) -> input cotangents`."""
    from ..autograd import tape
    from ..autograd.function import FunctionCtx, _FunctionNode, _OutputOf

    backward = staticmethod(lambda ctx, *cts: tuple(pull(list(cts))))
    rule = type(name, (), {"backward": backward})
    node = _FunctionNode(rule, FunctionCtx(tuple(a._requires_grad for a in args)),
                         tuple(tape.parent_of(a) for a in args), [(tuple(o.shape), o.dtype, o.device) for o in outs],
                         tuple(args))
    for k, o in enumerate(outs):
        if o.dtype.is_floating_point:
            o._node = node if len(outs) == 1 else _OutputOf(node, k, len(outs))
            o._requires_grad = True
    return outs


def _zeros_like(x):
    from ..ops.creation import zeros_like

    return zeros_like(x)


def _unbatched_sum(cts, dims):
    """Per-example cotangents summed over the batch for inputs that were not batched."""
    return [c.sum(0) if d is None and c is not None else c for c, d in zip(cts, dims)]


# ---------------------------------------------------------------- custom_vjp
class _VJPCall(_CustomCall):
    def __init__(self, fun, fwd, bwd):
        super().__init__(fun)
        self.fwd, self.bwd = fwd, bwd

    def forward_for_vjp(self, primals):
        outs, res = self.fwd(*primals)
        return outs, lambda cts: self.bwd(res, cts)

    def batch(self, trace, tracers):
        from .batching import vmap

        vals, dims = [t.val for t in tracers], [t.bdim for t in tracers]
        fun = vmap(lambda *a: self.fun(*a), in_axes=tuple(dims))
        fwd = vmap(lambda *a: self.fwd(*a), in_axes=tuple(dims))

        def bwd(res, cts):
            per_example = vmap(lambda r, c: self.bwd(r, c))(res, cts)
            return _unbatched_sum(per_example, dims)

        outs = custom_call(_VJPCall(fun, fwd, bwd), vals)
        from .batching import BatchTracer

        return [BatchTracer(trace, o, 0) for o in outs]


class custom_vjp:
    """A function with a user-defined vjp: `f.defvjp(fwd, bwd)`, JAX's API.

    `fwd(*args) -> (out, residuals)`; `bwd(residuals, cotangent_of_out) -> tuple with one cotangent per
    positional argument` (None for zero). Arguments listed in `nondiff_argnums` are passed first to bwd.
    """

    def __init__(self, fun, nondiff_argnums=()):
        functools.update_wrapper(self, fun)
        self.fun, self.nondiff_argnums = fun, tuple(nondiff_argnums)
        self.fwd = self.bwd = None

    def defvjp(self, fwd, bwd):
        self.fwd, self.bwd = fwd, bwd
        return self

    def __call__(self, *args):
        if self.fwd is None:
            raise FnxTypeError(f"custom_vjp function {self.fun.__name__} has no rule: call .defvjp(fwd, bwd) first")
        nd = self.nondiff_argnums
        static = {i: args[i] for i in nd}
        diff_args = [a for i, a in enumerate(args) if i not in static]
        leaves, in_tree = tree_flatten(diff_args)
        out_tree = []

        def full(flat):
            it = iter(tree_unflatten(in_tree, list(flat)))
            return [static[i] if i in static else next(it) for i in range(len(args))]

        def flat_out(out):
            o_leaves, o_def = tree_flatten(out)
            out_tree[:] = [o_def]
            return o_leaves

        def fun(*flat):
            return flat_out(self.fun(*full(flat)))

        def fwd(*flat):
            out, res = self.fwd(*full(flat))
            return flat_out(out), res

        def bwd(res, cts):
            grads = self.bwd(*[static[i] for i in nd], res, tree_unflatten(out_tree[0], cts))
            grads = grads if isinstance(grads, tuple) else (grads,)
            if len(grads) != len(diff_args):
                raise FnxTypeError(f"custom_vjp bwd of {self.fun.__name__} returned {len(grads)} cotangents; "
                                   f"expected one per differentiable argument ({len(diff_args)})")
            flat = []
            for g, a in zip(grads, diff_args):
                a_leaves = tree_flatten(a)[0]
                flat += [_zeros_like(x) for x in a_leaves] if g is None else tree_flatten(g)[0]
            return flat

        for x in leaves:
            if not isinstance(x, Tensor):
                raise FnxTypeError(f"custom_vjp {self.fun.__name__}: arguments must be pytrees of Tensors; list "
                                   f"Python values in nondiff_argnums")
        outs = custom_call(_VJPCall(fun, fwd, bwd), leaves)
        return tree_unflatten(out_tree[0], outs)


# ---------------------------------------------------------------- custom_jvp
class _JVPCall(_CustomCall):
    def __init__(self, fun, rule):
        super().__init__(fun)
        self.rule = rule

    def jvp(self, trace, tracers):
        from .ad import JVPTracer, _zero_tangent

        primals = [t.primal for t in tracers]
        tangents = [t.tangent if t.tangent is not None else _zero_tangent(t.primal) for t in tracers]
        outs, touts = self.rule(primals, tangents)
        return [JVPTracer(trace, o, t) for o, t in zip(outs, touts)]

    def pullback(self, primals, outs):
        from .ad import vjp

        def pull(cts):
            _, fn = vjp(lambda *t: self.rule(primals, list(t))[1], *[_zeros_like(p) for p in primals])
            return list(fn(list(cts)))

        return pull

    def batch(self, trace, tracers):
        from .batching import BatchTracer, vmap

        vals, dims = [t.val for t in tracers], [t.bdim for t in tracers]
        fun = vmap(lambda *a: self.fun(*a), in_axes=tuple(dims))

        def rule(primals, tangents):
            b_dims = tuple(dims) + tuple(0 for _ in tangents)

            def one(*a):
                n = len(primals)
                return tuple(self.rule(list(a[:n]), list(a[n:])))

            outs, touts = vmap(one, in_axes=tuple(dims) + tuple(dims))(*primals, *tangents)
            return list(outs), list(touts)

        outs = custom_call(_JVPCall(fun, rule), vals)
        return [BatchTracer(trace, o, 0) for o in outs]


class custom_jvp:
    """A function with a user-defined jvp: `@f.defjvp def f_jvp(primals, tangents): return out, tangent_out`.

    Reverse mode uses the same rule: the vjp is the transpose of the rule's (linear) tangent map.
    """

    def __init__(self, fun, nondiff_argnums=()):
        functools.update_wrapper(self, fun)
        self.fun, self.nondiff_argnums = fun, tuple(nondiff_argnums)
        self.rule = None

    def defjvp(self, rule):
        self.rule = rule
        return rule

    def __call__(self, *args):
        if self.rule is None:
            raise FnxTypeError(f"custom_jvp function {self.fun.__name__} has no rule: decorate one with .defjvp")
        nd = self.nondiff_argnums
        static = {i: args[i] for i in nd}
        diff_args = [a for i, a in enumerate(args) if i not in static]
        leaves, in_tree = tree_flatten(diff_args)
        out_tree = []

        def full(flat):
            it = iter(tree_unflatten(in_tree, list(flat)))
            return [static[i] if i in static else next(it) for i in range(len(args))]

        def fun(*flat):
            o_leaves, o_def = tree_flatten(self.fun(*full(flat)))
            out_tree[:] = [o_def]
            return o_leaves

        def rule(primals, tangents):
            p_args = full(primals)
            t_it = iter(tree_unflatten(in_tree, list(tangents)))
            t_args = [next(t_it) for i in range(len(args)) if i not in static]
            out, tout = self.rule(*[static[i] for i in nd], tuple(a for i, a in enumerate(p_args) if i not in static),
                                  tuple(t_args))
            o_leaves, o_def = tree_flatten(out)
            out_tree[:] = [o_def]
            return o_leaves, tree_flatten(tout)[0]

        outs = custom_call(_JVPCall(fun, rule), leaves)
        return tree_unflatten(out_tree[0], outs)


# ---------------------------------------------------------------- checkpoint
class _RematCall(_CustomCall):
    def pullback(self, primals, outs):
        from .ad import vjp

        def pull(cts):
            _, fn = vjp(lambda *p: self.fun(*p), *primals)
            return list(fn(list(cts)))

        return pull


def checkpoint(fun, *, static_argnums=()):
    """`fun` whose intermediate values are not kept for the backward pass but recomputed there."""
    static = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)

    @functools.wraps(fun)
    def wrapped(*args):
        dyn = [a for i, a in enumerate(args) if i not in static]
        leaves, in_tree = tree_flatten(dyn)
        out_tree = []

        def flat(*xs):
            it = iter(tree_unflatten(in_tree, list(xs)))
            o_leaves, o_def = tree_flatten(fun(*[a if i in static else next(it) for i, a in enumerate(args)]))
            out_tree[:] = [o_def]
            return o_leaves

        outs = custom_call(_RematCall(flat), leaves)
        return tree_unflatten(out_tree[0], outs)

    return wrapped


remat = checkpoint
