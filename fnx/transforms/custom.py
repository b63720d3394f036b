"""User-defined derivative rules and rematerialisation: `custom_vjp`, `custom_jvp`, `checkpoint`.

Each is a call of a Python function with a rule attached. `core.custom_call`
hands it to the top trace, whose `process_custom` picks the call's method
for that transform: eager (records one node on the tape), jvp, vjp
(records one node on the vjp trace), batch (vmaps the function and its
rules) or stage (make_jaxpr/compile). Staging traces the function into a
jaxpr and binds one primitive (`checkpoint`, `custom_vjp_call`,
`custom_jvp_call`) holding that jaxpr and the call rebuilt on it, so a
transform applied to the staged IR still uses the custom rule.
"""
from __future__ import annotations

import contextlib
import functools

from .. import core
from ..autograd.function import record_pullback
from ..autograd.grad_mode import no_grad
from ..autograd.tape import saved_hooks
from ..core import FnxTypeError, Primitive, custom_call
from ..ops.creation import zeros_like
from ..ops.sampling import get_rng_state, set_rng_state
from ..tensor import Tensor, from_array
from ..tree import tree_flatten, tree_unflatten
from .ad import _jvp_tracer, jvp, vjp
from .batching import BatchTracer, vmap
from .jaxpr_rules import closed_call, trace_flat

__all__ = ["custom_vjp", "custom_jvp", "checkpoint", "remat"]


class _CustomCall:
    """A flat function `fun(*tensors) -> list of tensors` plus the rule that replaces its derivative."""

    kind = "custom_call"

    def __init__(self, fun, name: str = "f"):
        self.fun, self.name = fun, name

    def __repr__(self) -> str:
        return self.name

    def inline(self, args: list) -> list:
        return self.fun(*args)

    def stage(self, tracers: list) -> list:
        """Bind this call's primitive on staging tracers, holding an equivalent call built on fun's jaxpr."""
        fun_j, consts = trace_flat(self.fun, [t.aval for t in tracers])
        call = self.closed(lambda *a: closed_call(fun_j, list(a)), len(consts))
        return _PRIMS[self.kind].bind(*consts, *tracers, call=call, jaxpr=fun_j)

    def closed(self, fun, n_consts: int):
        """This call with `fun` (a traced copy taking `n_consts` captured values first, then the arguments)."""
        raise NotImplementedError

    # -- reverse mode: a node whose vjp is `self.pullback(primals, outs)`
    def pullback(self, primals: list, outs: list):
        raise NotImplementedError

    def forward_for_vjp(self, primals: list):
        """(outs, pullback) for reverse mode; the default evaluates fun and asks `pullback`."""
        outs = self.fun(*primals)
        return outs, self.pullback(primals, outs)

    def eager(self, args: list) -> list:
        needs = core.state.grad_enabled and any(a._requires_grad for a in args)
        if not needs:
            return self.fun(*args)
        if saved_hooks() is not None:
            raise NotImplementedError(f"saved_tensors_hooks: what an eager call of {self.name} (a custom_vjp, "
                                      f"custom_jvp or checkpoint) keeps for backward is not passed through "
                                      f"pack_hook; call it outside the hooks")
        prev = core.set_grad_enabled_flag(False)
        try:
            detached = [a.detach() for a in args]
            outs, pull = self.forward_for_vjp(detached)
        finally:
            core.set_grad_enabled_flag(prev)
        return record_pullback(self.name, args, outs, pull)

    def jvp(self, trace, tracers):
        return self.fun(*tracers)

    def vjp(self, trace, tracers):
        primals = [t.primal for t in tracers]
        outs, pull = self.forward_for_vjp(primals)
        return trace.record_custom(tracers, outs, lambda cts, primals, outs: pull(cts))

    def batch(self, trace, tracers):
        return self.fun(*tracers)


def _zeros_like(x):
    return zeros_like(x)


def _batched_call(trace, call, tracers) -> list:
    """Run `call` (built on vmapped functions) one level down; its outputs are batched at axis 0."""
    return [BatchTracer(trace, o, 0) for o in custom_call(call, [t.val for t in tracers])]


# ---------------------------------------------------------------- custom_vjp
class _VJPCall(_CustomCall):
    kind = "custom_vjp_call"

    def __init__(self, fun, fwd, bwd, name: str = "f"):
        super().__init__(fun, name)
        self.fwd, self.bwd = fwd, bwd

    def closed(self, fun, n_consts):
        """fwd and bwd stay Python functions (as in JAX, they must not capture traced values)."""
        fwd, bwd = self.fwd, self.bwd

        def bwd_all(res, cts):  # captured values get no cotangent, as in the eager rule
            return [None] * n_consts + list(bwd(res, cts))

        return _VJPCall(fun, lambda *a: fwd(*a[n_consts:]), bwd_all, self.name)

    def forward_for_vjp(self, primals):
        outs, res = self.fwd(*primals)
        return outs, lambda cts: self.bwd(res, cts)

    def batch(self, trace, tracers):
        """vmap fun, fwd and bwd; input cotangents come back in the inputs' batch layout (summed if unbatched)."""
        dims = tuple(t.bdim for t in tracers)
        statics = []  # residuals that are not tensors (Python values) pass around vmap unchanged

        def fwd_tensors(*a):
            outs, res = self.fwd(*a)
            leaves, treedef = tree_flatten(res)
            statics[:] = [treedef, [None if isinstance(x, Tensor) else x for x in leaves]]
            return outs, [x for x in leaves if isinstance(x, Tensor)]

        def bwd_tensors(res_tensors, cts):
            treedef, kept = statics
            it = iter(res_tensors)
            return self.bwd(tree_unflatten(treedef, [next(it) if k is None else k for k in kept]), cts)

        def bwd(res, cts):
            per_example = vmap(bwd_tensors, out_axes=[0 if d is None else d for d in dims])(res, cts)
            return [c.sum(0) if d is None and c is not None else c for c, d in zip(per_example, dims)]

        fun = vmap(self.fun, in_axes=dims)
        fwd = vmap(fwd_tensors, in_axes=dims)
        return _batched_call(trace, _VJPCall(fun, fwd, bwd, self.name), tracers)


def _split_args(args: tuple, nondiff_argnums: tuple):
    """Static (non-differentiable) args by position, the others, their leaves and structure, and a function
    rebuilding the full argument list from new leaves."""
    static = {i: args[i] for i in nondiff_argnums}
    diff_args = [a for i, a in enumerate(args) if i not in static]
    leaves, in_tree = tree_flatten(diff_args)

    def full(flat) -> list:
        it = iter(tree_unflatten(in_tree, list(flat)))
        return [static[i] if i in static else next(it) for i in range(len(args))]

    return static, diff_args, leaves, in_tree, full


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
        static, diff_args, leaves, in_tree, full = _split_args(args, nd)
        out_tree = []

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
            for k, (g, a) in enumerate(zip(grads, diff_args)):
                a_leaves, a_def = tree_flatten(a)
                if g is None:
                    flat += [_zeros_like(x) for x in a_leaves]
                    continue
                g_leaves, g_def = tree_flatten(g)
                if g_def != a_def or any(not isinstance(c, Tensor) or tuple(c.shape) != tuple(x.shape)
                                         for c, x in zip(g_leaves, a_leaves)):
                    raise FnxTypeError(f"custom_vjp bwd of {self.fun.__name__}: cotangent {k} must have the structure "
                                       f"and shapes of its differentiable argument ({a_def}, shapes "
                                       f"{[list(x.shape) for x in a_leaves]}), got {g_def}")
                flat += g_leaves
            return flat

        for x in leaves:
            if not isinstance(x, Tensor):
                raise FnxTypeError(f"custom_vjp {self.fun.__name__}: arguments must be pytrees of Tensors; list "
                                   f"Python values in nondiff_argnums")
        outs = custom_call(_VJPCall(fun, fwd, bwd, getattr(self.fun, "__name__", "f")), leaves)
        return tree_unflatten(out_tree[0], outs)


# ---------------------------------------------------------------- custom_jvp
class _JVPCall(_CustomCall):
    kind = "custom_jvp_call"

    def __init__(self, fun, rule, name: str = "f"):
        super().__init__(fun, name)
        self.rule = rule

    def closed(self, fun, n_consts):
        """The rule stays a Python function, traced only when a jvp needs it (it usually calls the function
        itself, so tracing it while staging would recurse)."""
        rule = self.rule
        return _JVPCall(fun, lambda p, t: rule(p[n_consts:], t[n_consts:]), self.name)

    def jvp(self, trace, tracers):
        outs, touts = self.rule([t.primal for t in tracers], [t.tangent for t in tracers])
        return [_jvp_tracer(trace, o, t) for o, t in zip(outs, touts)]

    def pullback(self, primals, outs):
        def pull(cts):
            _, fn = vjp(lambda *t: self.rule(primals, list(t))[1], *[_zeros_like(p) for p in primals])
            return list(fn(list(cts)))

        return pull

    def batch(self, trace, tracers):
        """vmap fun and the rule; a tangent has its primal's batch layout one level down."""
        dims = tuple(t.bdim for t in tracers)
        n = len(dims)

        def rule(primals, tangents):
            outs, touts = vmap(lambda *a: tuple(self.rule(list(a[:n]), list(a[n:]))), in_axes=dims + dims)(
                *primals, *tangents)
            return list(outs), list(touts)

        return _batched_call(trace, _JVPCall(vmap(self.fun, in_axes=dims), rule, self.name), tracers)


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
        static, diff_args, leaves, in_tree, full = _split_args(args, nd)
        out_tree = []

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

        outs = custom_call(_JVPCall(fun, rule, getattr(self.fun, "__name__", "f")), leaves)
        return tree_unflatten(out_tree[0], outs)


# ---------------------------------------------------------------- checkpoint
class _RematCall(_CustomCall):
    """Reverse mode keeps only the inputs and runs fun again, under vjp, when the cotangents arrive."""

    kind = "checkpoint"
    rng_state = None   # the CPU generator's state when the forward drew concretely: the recomputation replays it

    def closed(self, fun, n_consts):
        return _RematCall(fun, self.name)

    def pullback(self, primals, outs):
        def pull(cts):
            with _replaying(self.rng_state):
                _, fn = vjp(self.fun, *primals)
            return list(fn(list(cts)))

        return pull

    def batch(self, trace, tracers):
        fun = vmap(self.fun, in_axes=tuple(t.bdim for t in tracers))
        return _batched_call(trace, _RematCall(fun, self.name), tracers)


@contextlib.contextmanager
def _replaying(state):
    """Run the block from the CPU generator's `state` (if any), then put back the state it had."""
    if state is None:
        yield
        return
    now = get_rng_state()
    set_rng_state(state)
    try:
        yield
    finally:
        set_rng_state(now)


def checkpoint(fun, *, static_argnums=()):
    """`fun` whose intermediate values are not kept for the backward pass but recomputed there.

    Outside `fnx.compile` the recomputation starts from the CPU generator's state of the forward pass, so
    dropout masks and other draws come out the same (PyTorch's `preserve_rng_state`). Tensor leaves of the positional (except `static_argnums`) and keyword arguments are its inputs.
    """
    static = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        fixed = {i % len(args) for i in static if -len(args) <= i < len(args)}
        leaves, in_tree = tree_flatten(([a for i, a in enumerate(args) if i not in fixed], kwargs))
        for x in leaves:
            if not isinstance(x, Tensor):
                raise FnxTypeError(f"checkpoint: arguments must be pytrees of Tensors, got {type(x).__name__}; "
                                   f"list Python values in static_argnums")
        out_tree = []

        def flat(*xs):
            dyn, kw = tree_unflatten(in_tree, list(xs))
            it = iter(dyn)
            o_leaves, o_def = tree_flatten(fun(*[a if i in fixed else next(it) for i, a in enumerate(args)], **kw))
            out_tree[:] = [o_def]
            return o_leaves

        call = _RematCall(flat, getattr(fun, "__name__", "f"))
        if not core.state.dynamic_trace.level:   # drawn concretely: the recomputation must repeat the draws
            call.rng_state = get_rng_state()
        outs = custom_call(call, leaves)
        return tree_unflatten(out_tree[0], outs)

    return wrapped


remat = checkpoint


# ---------------------------------------------------------------- staged calls
def _staged_primitive(name: str) -> Primitive:
    """The primitive of a staged call: params `call` (a closed _CustomCall) and `jaxpr` (its function).

    Every rule hands the call back to the transform one level down, so the custom rule keeps applying
    when a staged jaxpr is evaluated under jvp, vjp/grad or vmap.
    """
    prim = Primitive(name, multiple_results=True)

    def impl(xp, *arrays, call, jaxpr):
        with no_grad():
            return [o._value for o in call.fun(*[from_array(a) for a in arrays])]

    def jvp_rule(primals, tangents, *, call, jaxpr):
        tangents = [t if t is not None else _zeros_like(p) for t, p in zip(tangents, primals)]
        return jvp(lambda *a: custom_call(call, list(a)), tuple(primals), tuple(tangents))

    def vjp_rule(cts, primals, outs, *, call, jaxpr):
        return vjp(lambda *a: custom_call(call, list(a)), *primals)[1](list(cts))

    def batch_rule(args, dims, *, call, jaxpr):
        outs = vmap(lambda *a: custom_call(call, list(a)), in_axes=tuple(dims))(*args)
        return outs, [0] * len(outs)

    prim.def_impl(impl)
    prim.def_abstract(lambda *avals, call, jaxpr: list(jaxpr.out_avals))
    prim.def_jvp(jvp_rule)
    prim.def_vjp(vjp_rule)
    prim.def_batch(batch_rule)
    return prim


_PRIMS = {kind: _staged_primitive(kind) for kind in ("checkpoint", "custom_vjp_call", "custom_jvp_call")}
