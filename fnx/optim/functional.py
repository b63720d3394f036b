"""Functional optimizers: pure `init`/`update` over pytrees, for fnx.grad, vmap, jvp and compile.

    opt = fnx.optim.functional.adam(lr=1e-3)
    state = opt.init(params)                                  # {'step': 0-d int64, 'exp_avg': tree, ...}
    params, state = opt.update(grads, state, params)

Each optimizer runs the same per-parameter rule as its stateful class (fnx.optim.SGD, ...), so the two
give the same numbers; here no tensor is written in place. `lr` is a float or a schedule: a function of
the number of updates done so far (a 0-d int64 tensor: 0 at the first update) returning the learning rate.
Leaves that are not floating point (integer buffers) pass through unchanged.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

from ..core import FnxValueError
from ..dtypes import complex128, float32, float64, int64
from ..ops.creation import full_like, zeros, zeros_like
from ..tree import tree_flatten, tree_unflatten
from .optimizer import init_buffer
from .adafactor import adafactor_update, check_adafactor, factored_shapes
from .adagrad import adadelta_update, adagrad_update, check_adadelta, check_adagrad
from .adam import adam_update, check_adam
from .adam_variants import adamax_update, check_nadam, mu_product_init, nadam_update, radam_update
from .rmsprop import check_rmsprop, rmsprop_update
from .asgd import asgd_update, check_asgd
from .muon import NS_COEFFICIENTS, check_muon, muon_update
from .rprop import check_rprop, rprop_update
from .sgd import check_sgd, sgd_update

__all__ = ["FunctionalOptimizer", "sgd", "adam", "adamw", "rmsprop", "adagrad", "adadelta", "adamax", "nadam", "radam",
           "rprop", "asgd", "adafactor", "muon"]


class FunctionalOptimizer(NamedTuple):
    """A pure optimizer: `init(params) -> state` and `update(grads, state, params) -> (new_params, new_state)`."""

    init: Callable[[Any], dict]
    update: Callable[[Any, dict, Any], tuple[Any, dict]]


def _functional(buffer_names: tuple[str, ...], lr, leaf_update: Callable,
                buffer_init: dict | None = None) -> FunctionalOptimizer:
    """Build init/update from `leaf_update(p, g, bufs, step, lr) -> (p, bufs)`, where `step` is this update's
    number (1 at the first) as a 0-d tensor in the parameter's scalar dtype and on its device. A buffer starts
    as zeros like its parameter, or as `buffer_init[name](p)`."""
    buffer_init = buffer_init or {}

    def init(params) -> dict:
        leaves, treedef = tree_flatten(params)
        state = {"step": zeros((), dtype=int64, device=leaves[0].device if leaves else None)}
        for name in buffer_names:
            make = buffer_init.get(name, zeros_like)
            state[name] = tree_unflatten(treedef, [init_buffer(make, p) for p in leaves])
        return state

    def update(grads, state: dict, params) -> tuple[Any, dict]:
        leaves, treedef = tree_flatten(params)
        grad_leaves = _leaves_like(grads, treedef, "grads")
        buffers = [_leaves_like(state[name], treedef, f"state[{name!r}]") for name in buffer_names]
        count = state["step"]
        lr_now = lr(count) if callable(lr) else lr
        steps: dict = {}
        new_leaves, new_buffers = [], [[] for _ in buffer_names]
        for i, (p, g) in enumerate(zip(leaves, grad_leaves)):
            bufs = tuple(b[i] for b in buffers)
            if p.dtype.is_floating_point or p.dtype.is_complex:
                key = (p.dtype, p.device)
                if key not in steps:
                    wide = p.dtype in (float64, complex128)
                    steps[key] = (count + 1).to(device=p.device, dtype=float64 if wide else float32)
                p, bufs = leaf_update(p, g, bufs, steps[key], lr_now)
            new_leaves.append(p)
            for out, buf in zip(new_buffers, bufs):
                out.append(buf)
        new_state = {"step": count + 1}
        for name, bufs in zip(buffer_names, new_buffers):
            new_state[name] = tree_unflatten(treedef, bufs)
        return tree_unflatten(treedef, new_leaves), new_state

    return FunctionalOptimizer(init, update)


def _leaves_like(tree, treedef, what: str) -> list:
    leaves, other = tree_flatten(tree)
    if other != treedef:
        raise FnxValueError(f"optimizer update: {what} has structure {other}, but params have {treedef}; pass "
                            f"gradients and state with the structure of the parameters")
    return leaves


def _check_lr(lr) -> None:
    if not callable(lr) and not lr >= 0.0:
        raise FnxValueError(f"Invalid learning rate: {lr}")


def sgd(lr, momentum: float = 0.0, dampening: float = 0.0, nesterov: bool = False, weight_decay: float = 0.0,
        maximize: bool = False) -> FunctionalOptimizer:
    """Functional SGD (fnx.optim.SGD's rule). State: step, and momentum_buffer when momentum != 0."""
    _check_lr(lr)
    check_sgd(0.0, momentum, dampening, nesterov, weight_decay)
    hyper = dict(momentum=momentum, nesterov=nesterov, weight_decay=weight_decay, maximize=maximize)

    def leaf_update(p, g, bufs, step, lr_now):
        if not bufs:
            return sgd_update(p, g, None, lr=lr_now, dampening=dampening, **hyper)[0], bufs
        # the buffer starts at zero, so taking no dampening at step 1 makes it the gradient, as in SGD
        damp = dampening * (step > 1).to(step.dtype) if dampening != 0 else 0.0
        new_p, buf = sgd_update(p, g, bufs[0], lr=lr_now, dampening=damp, **hyper)
        return new_p, (buf,)

    return _functional(("momentum_buffer",) if momentum != 0 else (), lr, leaf_update)


def _adam(lr, betas, eps, weight_decay, amsgrad, maximize, decoupled: bool) -> FunctionalOptimizer:
    _check_lr(lr)
    check_adam(0.0, betas, eps, weight_decay)
    hyper = dict(beta1=betas[0], beta2=betas[1], eps=eps, weight_decay=weight_decay, decoupled=decoupled,
                 amsgrad=amsgrad, maximize=maximize)

    def leaf_update(p, g, bufs, step, lr_now):
        max_sq = bufs[2] if amsgrad else None
        new_p, *new_bufs = adam_update(p, g, bufs[0], bufs[1], max_sq, step, lr=lr_now, **hyper)
        return new_p, tuple(new_bufs[:len(bufs)])

    names = ("exp_avg", "exp_avg_sq", "max_exp_avg_sq") if amsgrad else ("exp_avg", "exp_avg_sq")
    return _functional(names, lr, leaf_update)


def adam(lr=1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0,
         amsgrad: bool = False, maximize: bool = False) -> FunctionalOptimizer:
    """Functional Adam (fnx.optim.Adam's rule). State: step, exp_avg, exp_avg_sq (and max_exp_avg_sq)."""
    return _adam(lr, betas, eps, weight_decay, amsgrad, maximize, decoupled=False)


def adamw(lr=1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 1e-2,
          amsgrad: bool = False, maximize: bool = False) -> FunctionalOptimizer:
    """Functional AdamW (fnx.optim.AdamW's rule: decoupled weight decay)."""
    return _adam(lr, betas, eps, weight_decay, amsgrad, maximize, decoupled=True)


def rmsprop(lr=1e-2, alpha: float = 0.99, eps: float = 1e-8, weight_decay: float = 0.0, momentum: float = 0.0,
            centered: bool = False, maximize: bool = False) -> FunctionalOptimizer:
    """Functional RMSprop (fnx.optim.RMSprop's rule). State: step, square_avg (grad_avg, momentum_buffer)."""
    _check_lr(lr)
    check_rmsprop(0.0, alpha, eps, weight_decay, momentum)
    hyper = dict(alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum, centered=centered,
                 maximize=maximize)
    names = ("square_avg",) + (("grad_avg",) if centered else ()) + (("momentum_buffer",) if momentum > 0 else ())

    def leaf_update(p, g, bufs, step, lr_now):
        named = dict(zip(names, bufs))
        new_p, *new_bufs = rmsprop_update(p, g, named["square_avg"], named.get("grad_avg"),
                                          named.get("momentum_buffer"), lr=lr_now, **hyper)
        return new_p, tuple(b for b in new_bufs if b is not None)

    return _functional(names, lr, leaf_update)


def _per_leaf(update: Callable, **hyper) -> Callable:
    """A `leaf_update` running `update(p, g, *bufs, step, lr=..., **hyper) -> (p, *bufs)`."""

    def leaf_update(p, g, bufs, step, lr_now):
        new_p, *new_bufs = update(p, g, *bufs, step, lr=lr_now, **hyper)
        return new_p, tuple(new_bufs)

    return leaf_update


def adagrad(lr=1e-2, lr_decay: float = 0.0, weight_decay: float = 0.0, initial_accumulator_value: float = 0.0,
            eps: float = 1e-10, maximize: bool = False) -> FunctionalOptimizer:
    """Functional Adagrad (fnx.optim.Adagrad's rule). State: step, sum (starting at initial_accumulator_value)."""
    _check_lr(lr)
    check_adagrad(0.0, lr_decay, weight_decay, initial_accumulator_value, eps)
    leaf_update = _per_leaf(adagrad_update, lr_decay=lr_decay, weight_decay=weight_decay, eps=eps, maximize=maximize)
    return _functional(("sum",), lr, leaf_update, {"sum": lambda p: full_like(p, initial_accumulator_value)})


def adadelta(lr=1.0, rho: float = 0.9, eps: float = 1e-6, weight_decay: float = 0.0,
             maximize: bool = False) -> FunctionalOptimizer:
    """Functional Adadelta (fnx.optim.Adadelta's rule). State: step, square_avg, acc_delta."""
    _check_lr(lr)
    check_adadelta(0.0, rho, eps, weight_decay)
    leaf_update = _per_leaf(adadelta_update, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize)
    return _functional(("square_avg", "acc_delta"), lr, leaf_update)


def adamax(lr=2e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0,
           maximize: bool = False) -> FunctionalOptimizer:
    """Functional Adamax (fnx.optim.Adamax's rule). State: step, exp_avg, exp_inf."""
    _check_lr(lr)
    check_adam(0.0, betas, eps, weight_decay)
    leaf_update = _per_leaf(adamax_update, beta1=betas[0], beta2=betas[1], eps=eps, weight_decay=weight_decay,
                            maximize=maximize)
    return _functional(("exp_avg", "exp_inf"), lr, leaf_update)


def nadam(lr=2e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0,
          momentum_decay: float = 4e-3, decoupled_weight_decay: bool = False,
          maximize: bool = False) -> FunctionalOptimizer:
    """Functional NAdam (fnx.optim.NAdam's rule). State: step, mu_product (a 0-d tensor per leaf), exp_avg,
    exp_avg_sq."""
    _check_lr(lr)
    check_nadam(0.0, betas, eps, weight_decay, momentum_decay)
    leaf_update = _per_leaf(nadam_update, beta1=betas[0], beta2=betas[1], eps=eps, weight_decay=weight_decay,
                            momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
                            maximize=maximize)
    return _functional(("mu_product", "exp_avg", "exp_avg_sq"), lr, leaf_update, {"mu_product": mu_product_init})


def radam(lr=1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0,
          decoupled_weight_decay: bool = False, maximize: bool = False) -> FunctionalOptimizer:
    """Functional RAdam (fnx.optim.RAdam's rule; the rectification switch is a `where` on the step count).
    State: step, exp_avg, exp_avg_sq."""
    _check_lr(lr)
    check_adam(0.0, betas, eps, weight_decay)
    leaf_update = _per_leaf(radam_update, beta1=betas[0], beta2=betas[1], eps=eps, weight_decay=weight_decay,
                            decoupled_weight_decay=decoupled_weight_decay, maximize=maximize)
    return _functional(("exp_avg", "exp_avg_sq"), lr, leaf_update)


def rprop(lr: float = 1e-2, etas: tuple[float, float] = (0.5, 1.2), step_sizes: tuple[float, float] = (1e-6, 50),
          maximize: bool = False) -> FunctionalOptimizer:
    """Functional Rprop (fnx.optim.Rprop's rule). State: step, prev, step_size (starting at `lr`, a number: the
    step sizes adapt on their own, so no schedule applies)."""
    if callable(lr):
        raise FnxValueError("functional rprop: lr must be a number (it is the step sizes' start; they adapt on "
                            "their own)")
    check_rprop(lr, etas)
    leaf_update = _per_leaf(rprop_update, etaminus=etas[0], etaplus=etas[1], step_size_min=step_sizes[0],
                            step_size_max=step_sizes[1], maximize=maximize)
    return _functional(("prev", "step_size"), lr, leaf_update, {"step_size": lambda p: full_like(p, lr)})


def asgd(lr=1e-2, lambd: float = 1e-4, alpha: float = 0.75, t0: float = 1e6, weight_decay: float = 0.0,
         maximize: bool = False) -> FunctionalOptimizer:
    """Functional ASGD (fnx.optim.ASGD's rule). State: step, ax (the average of the iterates)."""
    _check_lr(lr)
    check_asgd(0.0, weight_decay)
    leaf_update = _per_leaf(asgd_update, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                            maximize=maximize)
    return _functional(("ax",), lr, leaf_update)


def _factored_init(which: int | None):
    """Adafactor's buffer start for a leaf: zeros of the row (which=0) or column (1) factor's shape for a leaf of
    two or more dimensions, of the leaf's shape for the full variance (None) of a vector or scalar; a 0-d zero
    where the leaf keeps no such buffer (so every leaf has the same three buffers)."""
    def make(p):
        shapes = factored_shapes(p)
        if (shapes is None) == (which is None):
            return zeros_like(p) if shapes is None else zeros(shapes[which], dtype=p.dtype, device=p.device)
        return zeros((), dtype=p.dtype, device=p.device)
    return make


def adafactor(lr=1e-2, beta2_decay: float = -0.8, eps: tuple = (None, 1e-3), d: float = 1.0,
              weight_decay: float = 0.0, maximize: bool = False) -> FunctionalOptimizer:
    """Functional Adafactor (fnx.optim.Adafactor's rule). State: step, row_var and col_var (the factored second
    moments of leaves of two or more dimensions), variance (that of vectors and scalars); a leaf's buffers of the
    other kind are 0-d zeros, unused."""
    _check_lr(lr)
    check_adafactor(0.0, beta2_decay, eps, d, weight_decay)
    hyper = dict(beta2_decay=beta2_decay, eps1=eps[0], eps2=eps[1], d=d, weight_decay=weight_decay,
                 maximize=maximize)

    def leaf_update(p, g, bufs, step, lr_now):
        if p.dtype.is_complex:
            raise FnxValueError("functional adafactor: Adafactor does not support complex parameters")
        factored = factored_shapes(p) is not None
        row_var, col_var, variance = bufs
        new_p, new_row, new_col, new_var = adafactor_update(
            p, g, row_var if factored else None, col_var if factored else None, None if factored else variance,
            step, lr=lr_now, **hyper)
        return new_p, (new_row, new_col, variance) if factored else (row_var, col_var, new_var)

    init = {"row_var": _factored_init(0), "col_var": _factored_init(1), "variance": _factored_init(None)}
    return _functional(("row_var", "col_var", "variance"), lr, leaf_update, init)


def muon(lr=1e-3, weight_decay: float = 0.1, momentum: float = 0.95, nesterov: bool = True,
         ns_coefficients: tuple = NS_COEFFICIENTS, eps: float = 1e-7, ns_steps: int = 5,
         adjust_lr_fn: str | None = None) -> FunctionalOptimizer:
    """Functional Muon (fnx.optim.Muon's rule) for pytrees of 2-D leaves. State: step, momentum_buffer."""
    _check_lr(lr)
    check_muon(0.0, weight_decay, momentum, adjust_lr_fn)
    hyper = dict(weight_decay=weight_decay, momentum=momentum, nesterov=nesterov, ns_coefficients=ns_coefficients,
                 ns_steps=ns_steps, eps=eps, adjust_lr_fn=adjust_lr_fn)

    def leaf_update(p, g, bufs, step, lr_now):
        if p.dtype.is_complex:
            raise FnxValueError("functional muon: Muon does not support complex parameters")
        new_p, buf = muon_update(p, g, bufs[0], lr=lr_now, **hyper)
        return new_p, (buf,)

    return _functional(("momentum_buffer",), lr, leaf_update)
