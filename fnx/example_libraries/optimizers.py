"""JAX's example optimizers (`jax.example_libraries.optimizers`) over fnx tensors.

An optimizer is an `(init_fun, update_fun, get_params)` triple of pure functions over pytrees of tensors:

    opt_init, opt_update, get_params = optimizers.adam(1e-3)
    opt_state = opt_init(params)
    opt_state = opt_update(step, grads, opt_state)      # step: the update's index, 0 first; an int or a 0-d tensor
    params = get_params(opt_state)

Each rule is written for one array (`init(x0)`, `update(i, g, state)`, `get_params(state)`) and lifted to pytrees
by the `optimizer` decorator; the state is an `OptimizerState` pytree, so whole update steps run under
`fnx.compile`, `grad` and `vmap`. The update rules and defaults are JAX's (so `adagrad` has momentum 0.9, and
`rmsprop` adds `eps` inside the square root).
"""
from __future__ import annotations

import functools
from collections import namedtuple
from typing import Any, Callable, NamedTuple

from .. import numpy as jnp
from ..errors import FnxTypeError, FnxValueError
from ..ops import creation, reduce
from ..ops import elementwise as ew
from ..tensor import Tensor
from ..tree import register_pytree_node, tree_flatten, tree_map, tree_unflatten

__all__ = ["Optimizer", "OptimizerState", "JoinPoint", "optimizer", "sgd", "momentum", "nesterov", "adagrad",
           "rmsprop", "rmsprop_momentum", "adam", "adamax", "sm3", "constant", "exponential_decay",
           "inverse_time_decay", "polynomial_decay", "piecewise_constant", "make_schedule", "l2_norm", "clip_grads",
           "unpack_optimizer_state", "pack_optimizer_state"]

Schedule = Callable[[Any], Any]

OptimizerState = namedtuple("OptimizerState", ["packed_state", "tree_def", "subtree_defs"])
OptimizerState.__doc__ = """The state of an optimizer over a pytree: each parameter's flattened state
(`packed_state`), the parameters' structure (`tree_def`) and each parameter state's structure (`subtree_defs`).
A pytree whose leaves are the tensors of `packed_state`."""
register_pytree_node(OptimizerState, lambda s: ((s.packed_state,), (s.tree_def, s.subtree_defs)),
                     lambda aux, children: OptimizerState(children[0], *aux))


class Optimizer(NamedTuple):
    """An `(init_fn, update_fn, params_fn)` triple: what every optimizer here returns."""

    init_fn: Callable
    update_fn: Callable
    params_fn: Callable


def _as_tensor(x) -> Tensor:
    return x if isinstance(x, Tensor) else jnp.asarray(x)


def optimizer(opt_maker: Callable) -> Callable[..., Optimizer]:
    """Decorator: turn a maker of single-array `(init, update, get_params)` functions into one whose functions
    take pytrees of parameters and keep the state as an `OptimizerState`."""

    @functools.wraps(opt_maker)
    def tree_opt_maker(*args, **kwargs) -> Optimizer:
        init, update, get_params = opt_maker(*args, **kwargs)

        @functools.wraps(init)
        def tree_init(x0_tree) -> OptimizerState:
            x0_flat, tree = tree_flatten(x0_tree)
            states = [tree_flatten(init(_as_tensor(x0))) for x0 in x0_flat]
            return OptimizerState([s for s, _ in states], tree, tuple(d for _, d in states))

        @functools.wraps(update)
        def tree_update(i, grad_tree, opt_state: OptimizerState) -> OptimizerState:
            states_flat, tree, subtrees = opt_state
            grad_flat, grad_tree_def = tree_flatten(grad_tree)
            if grad_tree_def != tree:
                raise FnxTypeError(f"optimizer update: the gradient tree {grad_tree_def} does not match the "
                                   f"parameter tree {tree} the optimizer was initialized with; pass gradients "
                                   f"with the parameters' structure")
            new_flat = []
            for g, state, subtree in zip(grad_flat, states_flat, subtrees):
                leaves, new_subtree = tree_flatten(update(i, g, tree_unflatten(subtree, state)))
                if new_subtree != subtree:
                    raise FnxTypeError(f"optimizer update: the update rule returned a state of structure "
                                       f"{new_subtree}, but its input had {subtree}")
                new_flat.append(leaves)
            return OptimizerState(new_flat, tree, subtrees)

        @functools.wraps(get_params)
        def tree_get_params(opt_state: OptimizerState):
            states_flat, tree, subtrees = opt_state
            return tree_unflatten(tree, [get_params(tree_unflatten(d, s)) for s, d in zip(states_flat, subtrees)])

        return Optimizer(tree_init, tree_update, tree_get_params)
    return tree_opt_maker


def _first(state):
    return state[0]


def _bias_correction(b: float, i, like: Tensor):
    """1 - b ** (i + 1) in the parameter's dtype (`i` an int or a 0-d integer tensor)."""
    return 1 - creation.tensor(b, dtype=like.dtype, device=like.device) ** (i + 1)


@optimizer
def sgd(step_size) -> Optimizer:
    """Stochastic gradient descent: x <- x - step_size(i) * g. `step_size`: a number or a schedule."""
    step_size = make_schedule(step_size)
    return Optimizer(lambda x0: x0, lambda i, g, x: x - step_size(i) * g, lambda x: x)


def _heavy_ball(step_size, mass: float, nesterov: bool) -> Optimizer:
    """v <- mass * v + g, then a step along v (or, Nesterov's, along mass * v + g)."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, velocity = state
        velocity = mass * velocity + g
        return x - step_size(i) * (mass * velocity + g if nesterov else velocity), velocity
    return Optimizer(lambda x0: (x0, creation.zeros_like(x0)), update, _first)


@optimizer
def momentum(step_size, mass: float) -> Optimizer:
    """SGD with momentum: v <- mass * v + g; x <- x - step_size(i) * v."""
    return _heavy_ball(step_size, mass, nesterov=False)


@optimizer
def nesterov(step_size, mass: float) -> Optimizer:
    """SGD with Nesterov momentum: v <- mass * v + g; x <- x - step_size(i) * (mass * v + g)."""
    return _heavy_ball(step_size, mass, nesterov=True)


@optimizer
def adagrad(step_size, momentum: float = 0.9) -> Optimizer:
    """Adagrad (Duchi et al. 2011) with momentum, as JAX's: the step is a momentum average of g / sqrt(sum g^2)."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, g_sq, m = state
        g_sq = g_sq + ew.square(g)
        g_sq_inv_sqrt = ew.where(g_sq > 0, 1.0 / ew.sqrt(g_sq), 0.0)
        m = (1.0 - momentum) * (g * g_sq_inv_sqrt) + momentum * m
        return x - step_size(i) * m, g_sq, m
    return Optimizer(lambda x0: (x0, creation.zeros_like(x0), creation.zeros_like(x0)), update, _first)


@optimizer
def rmsprop(step_size, gamma: float = 0.9, eps: float = 1e-8) -> Optimizer:
    """RMSProp: a <- gamma * a + (1 - gamma) * g^2; x <- x - step_size(i) * g / sqrt(a + eps)."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, avg_sq_grad = state
        avg_sq_grad = avg_sq_grad * gamma + ew.square(g) * (1.0 - gamma)
        return x - step_size(i) * g / ew.sqrt(avg_sq_grad + eps), avg_sq_grad
    return Optimizer(lambda x0: (x0, creation.zeros_like(x0)), update, _first)


@optimizer
def rmsprop_momentum(step_size, gamma: float = 0.9, eps: float = 1e-8, momentum: float = 0.9) -> Optimizer:
    """RMSProp with momentum: m <- momentum * m + step_size(i) * g / sqrt(a + eps); x <- x - m."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, avg_sq_grad, mom = state
        avg_sq_grad = avg_sq_grad * gamma + ew.square(g) * (1.0 - gamma)
        mom = momentum * mom + step_size(i) * g / ew.sqrt(avg_sq_grad + eps)
        return x - mom, avg_sq_grad, mom
    return Optimizer(lambda x0: (x0, creation.zeros_like(x0), creation.zeros_like(x0)), update, _first)


@optimizer
def adam(step_size, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> Optimizer:
    """Adam (Kingma & Ba 2015): bias-corrected moment estimates, x <- x - step_size(i) * m^ / (sqrt(v^) + eps)."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, m, v = state
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * ew.square(g) + b2 * v
        mhat = m / _bias_correction(b1, i, m)
        vhat = v / _bias_correction(b2, i, m)
        return x - step_size(i) * mhat / (ew.sqrt(vhat) + eps), m, v
    return Optimizer(lambda x0: (x0, creation.zeros_like(x0), creation.zeros_like(x0)), update, _first)


@optimizer
def adamax(step_size, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> Optimizer:
    """AdaMax, Adam's infinity-norm variant: u <- max(b2 * u, |g|), and the step is
    step_size(i) * m / ((1 - b1^(i+1)) * (u + eps))."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, m, u = state
        m = (1 - b1) * g + b1 * m
        u = ew.maximum(b2 * u, ew.abs(g))
        return x - (step_size(i) / _bias_correction(b1, i, m)) * m / (u + eps), m, u
    return Optimizer(lambda x0: (x0, creation.zeros_like(x0), creation.zeros_like(x0)), update, _first)


@optimizer
def sm3(step_size, momentum: float = 0.9) -> Optimizer:
    """SM3 (Anil et al. 2019), memory-efficient Adagrad: one accumulator vector per dim of each parameter.

    The state holds the parameter in its own shape (JAX's keeps it at least 1-d, plus its shape); the rule is
    the same.
    """
    step_size = make_schedule(step_size)

    def init(x0):
        dims = x0.shape or (1,)
        return x0, creation.zeros_like(x0), [creation.zeros((n,), dtype=x0.dtype, device=x0.device) for n in dims]

    def update(i, g, state):
        x, m, vs = state
        g1 = g.reshape(g.shape or (1,))
        ndim = g1.ndim
        accum = functools.reduce(ew.minimum, [v.reshape([-1 if d == k else 1 for d in range(ndim)])
                                             for k, v in enumerate(vs)]) + ew.square(g1)
        accum_inv_sqrt = ew.where(accum > 0, 1.0 / ew.sqrt(accum), 0.0)
        m = (1.0 - momentum) * (g * accum_inv_sqrt.reshape(g.shape)) + momentum * m
        vs = [reduce.amax(accum, tuple(d for d in range(ndim) if d != k)) if ndim > 1 else accum
              for k in range(ndim)]
        return x - step_size(i) * m, m, vs
    return Optimizer(init, update, _first)


def constant(step_size) -> Schedule:
    """The schedule that is `step_size` at every step."""
    return lambda i: step_size


def exponential_decay(step_size, decay_steps, decay_rate) -> Schedule:
    """step_size * decay_rate ** (i / decay_steps)."""
    return lambda i: step_size * decay_rate ** (i / decay_steps)


def inverse_time_decay(step_size, decay_steps, decay_rate, staircase: bool = False) -> Schedule:
    """step_size / (1 + decay_rate * i / decay_steps); with `staircase`, i / decay_steps is floored."""
    if staircase:
        return lambda i: step_size / (1 + decay_rate * (i // decay_steps))
    return lambda i: step_size / (1 + decay_rate * i / decay_steps)


def polynomial_decay(step_size, decay_steps, final_step_size, power: float = 1.0) -> Schedule:
    """From `step_size` down to `final_step_size` along (1 - i / decay_steps) ** power, then constant."""
    def schedule(i):
        i = ew.clamp(i, max=decay_steps) if isinstance(i, Tensor) else min(i, decay_steps)
        return (1 - i / decay_steps) ** power * (step_size - final_step_size) + final_step_size
    return schedule


def piecewise_constant(boundaries, values) -> Schedule:
    """values[0] up to step boundaries[0], values[1] up to boundaries[1], ...; `values` has one more entry."""
    boundaries, values = _as_tensor(boundaries), _as_tensor(values)
    if not boundaries.ndim == values.ndim == 1:
        raise FnxValueError(f"piecewise_constant: boundaries and values must be sequences, got shapes "
                            f"{tuple(boundaries.shape)} and {tuple(values.shape)}")
    if boundaries.shape[0] != values.shape[0] - 1:
        raise FnxValueError(f"piecewise_constant: needs one more value than boundaries, got "
                            f"{values.shape[0]} values and {boundaries.shape[0]} boundaries")
    return lambda i: values[reduce.sum(boundaries < i)]


def make_schedule(scalar_or_schedule) -> Schedule:
    """A schedule: a callable is one already; a number (or 0-d tensor) becomes `constant(number)`."""
    if callable(scalar_or_schedule):
        return scalar_or_schedule
    if isinstance(scalar_or_schedule, (int, float)) or getattr(scalar_or_schedule, "ndim", None) == 0:
        return constant(scalar_or_schedule)
    raise FnxTypeError(f"make_schedule: expected a number or a callable step -> step size, got "
                       f"{type(scalar_or_schedule).__name__}")


def l2_norm(tree) -> Tensor:
    """The l2 norm of all leaves of a pytree of tensors together (for weight decay and clipping)."""
    leaves, _ = tree_flatten(tree)
    return ew.sqrt(sum(reduce.sum(x * x) for x in leaves))


def clip_grads(grad_tree, max_norm: float):
    """Scale the gradients down so that their joint l2 norm is at most `max_norm`."""
    norm = l2_norm(grad_tree)
    return tree_map(lambda g: ew.where(norm < max_norm, g, g * (max_norm / norm)), grad_tree)


class JoinPoint:
    """A leaf of `unpack_optimizer_state`'s result: one parameter's optimizer state, kept whole."""

    def __init__(self, subtree):
        self.subtree = subtree

    def __iter__(self):
        yield self.subtree


def unpack_optimizer_state(opt_state: OptimizerState):
    """An `OptimizerState` as a pytree of the parameters' structure with a `JoinPoint` for each parameter's
    state (for saving it)."""
    states_flat, tree_def, subtree_defs = opt_state
    return tree_unflatten(tree_def, [JoinPoint(tree_unflatten(d, s)) for s, d in zip(states_flat, subtree_defs)])


def pack_optimizer_state(marked_pytree) -> OptimizerState:
    """The inverse of `unpack_optimizer_state`."""
    sentinels, tree_def = tree_flatten(marked_pytree)
    if not all(isinstance(s, JoinPoint) for s in sentinels):
        raise FnxTypeError("pack_optimizer_state: expected a pytree whose leaves are JoinPoints, as "
                           "unpack_optimizer_state returns")
    states = [tree_flatten(s.subtree) for s in sentinels]
    return OptimizerState([s for s, _ in states], tree_def, tuple(d for _, d in states))

