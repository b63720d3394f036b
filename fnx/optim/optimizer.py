"""`Optimizer`: the base of the stateful optimizers (PyTorch's torch.optim.Optimizer).

An optimizer holds `param_groups` (dicts with the parameters and their own
hyperparameters) and `state` (a dict per parameter). Subclasses implement
`_update_group(group)`, which updates a group in one of two ways:

- the fused path (PyTorch's `foreach`/`fused` implementations), the default when every parameter is a
  float32 or float64 CPU tensor and the hyperparameters are numbers: each parameter's update runs as a few
  in-place numpy passes over its arrays, with no op dispatch and no autograd graph;
- the per-parameter path (`foreach=False`, or anything else): a pure per-parameter rule written with fnx ops
  (the same one the functional optimizers use), written in place under `fnx.no_grad()`.

Both compute the same operations in the same order, so they give the same numbers.
"""
from __future__ import annotations

import functools
from collections import defaultdict
from typing import Any, Callable, Iterable

import numpy as np

from ..autograd import enable_grad, no_grad
from ..core import FnxRuntimeError, FnxTypeError, FnxValueError
from ..device import cpu
from ..dtypes import float32
from ..lowering import optim_kernels
from ..ops.complex import view_as_complex, view_as_real
from ..ops.creation import tensor, zeros_like
from ..ops.inplace import assign_
from ..profiler import record_function
from ..sparse import SparseTensor
from ..tensor import Tensor, Tracer

__all__ = ["Optimizer"]

_FUSED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


class Optimizer:
    """Base class of the stateful optimizers: param groups, per-parameter state and their state_dict.

    A sparse gradient (Embedding(sparse=True)) takes the per-parameter path of the optimizers that set
    `_takes_sparse_grads` (SGD, Adagrad, SparseAdam); the others refuse it with PyTorch's error.
    """

    _takes_sparse_grads = False
    _sparse_hint = ""   # what the refusal of a sparse gradient adds (Adam: try SparseAdam)

    def __init__(self, params: Iterable, defaults: dict):
        self.defaults = defaults
        self.state: defaultdict = defaultdict(dict)
        self.param_groups: list[dict] = []
        self._flat_layouts: dict = {}   # id(param group) -> the flat layouts of its state (multi_tensor.py)
        if isinstance(params, Tensor):
            raise FnxTypeError(f"params argument given to the optimizer should be an iterable of Tensors or dicts, "
                               f"but got {type(params).__name__}")
        param_groups = list(params)
        if not param_groups:
            raise FnxValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    def add_param_group(self, param_group: dict) -> None:
        """Add a group of parameters; hyperparameters it does not set come from the optimizer's defaults."""
        if not isinstance(param_group, dict):
            raise FnxTypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise FnxTypeError("optimizer parameters need to be organized in ordered collections, but the ordering "
                               "of tensors in sets will change between runs; use a list instead")
        params = list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise FnxTypeError(f"optimizer can only optimize Tensors, but one of the params is "
                                   f"{type(p).__name__}")
            if not p.is_leaf:
                raise FnxValueError("can't optimize a non-leaf Tensor")
        if len({id(p) for p in params}) != len(params):
            raise FnxValueError("optimizer contains a parameter group with duplicate parameters")
        group = {**param_group, "params": params}
        for name, default in self.defaults.items():
            group.setdefault(name, default)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params):
            raise FnxValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)
        self._start_fused_loop(group)

    def _fused_loop(self, group: dict, dtype: np.dtype) -> str | None:
        """The name of the C loop (lowering/optim_kernels.py) of `group`'s fused update on parameters of `dtype`, for
        the optimizers that have one."""
        return None

    def _start_fused_loop(self, group: dict) -> None:
        """Where `group`'s fused update will run a C loop (CPU parameters of one float dtype, enough elements,
        numbers for hyperparameters), start building it on a thread now, so that a training loop's first step does
        not wait for the compiler (a CNN's SGD loop took 0.4-0.6 s of its first step on 2 cores)."""
        params = group["params"]
        if (not params or group.get("foreach") is False and not group.get("fused")
                or any(isinstance(p, Tracer) or p._device is not cpu for p in params)
                or not all(isinstance(v, (int, float)) for k, v in group.items()
                           if k in ("lr", "weight_decay", "momentum", "alpha"))):
            return
        dtypes = {p._value.dtype for p in params}
        dtype = dtypes.pop()
        if dtypes or not optim_kernels.takes_elements(dtype, sum(p._value.size for p in params)):
            return
        loop = self._fused_loop(group, dtype)
        if loop is not None:
            optim_kernels.build_soon(loop)

    def _layouts_of(self, group: dict) -> dict:
        """The cache of `group`'s flat state layouts (the fused updates'); all are dropped when the groups were
        replaced (load_state_dict), so that no cache keeps the arrays of state tensors no longer in use."""
        layouts = self._flat_layouts
        if id(group) not in layouts and len(layouts) >= len(self.param_groups):
            layouts.clear()
        return layouts.setdefault(id(group), {})

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of every parameter: to None (the default) or to zeros in place."""
        for group in self.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    g.detach_()
                    with no_grad():
                        g.zero_()

    def step(self, closure: Callable[[], Any] | None = None):
        """Update every parameter that has a gradient; `closure` re-evaluates the loss (with grad enabled)."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad(), record_function(f"Optimizer.step#{type(self).__name__}.step"):
            for group in self.param_groups:
                self._update_group(group)
        return loss

    def _with_state(self, group: dict, buffers: tuple[str, ...], init: dict | None = None):
        """(p, p.grad, state) of each parameter of `group` that has a gradient; a parameter's first update
        starts its state with a step count and `buffers`, in that order (PyTorch's state_dict layout): zeros
        like the parameter, or `init[name](p)` for the names `init` has."""
        init = init or {}
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state[p]
            if not state:
                state["step"] = tensor(0.0, dtype=float32)
                for name in buffers:
                    state[name] = init_buffer(init.get(name, zeros_like), p)
            yield p, p.grad, state

    def _update_with(self, group: dict, buffers: tuple[str, ...], update: Callable, fused: Callable, hyper: dict,
                     init: dict | None = None) -> None:
        """Update `group` on the fused path, `fused(items, **hyper)` over its (p, grad, state), or else on the
        per-parameter path: `update(p, g, *buffers, step, **hyper) -> (p, *buffers)` (out of place, fnx ops,
        the rule the functional optimizer runs too), written into each parameter and its state."""
        if self._fused(group, hyper):
            fused(self._with_state(group, buffers, init), **hyper)
            return
        for p, g, state in self._with_state(group, buffers, init):
            step = advance_step(state)
            bufs = tuple(state[name] for name in buffers)
            new_p, *new_bufs = update(p, g, *bufs, step, **hyper)
            write_all_(p, new_p, bufs, new_bufs)

    def _fused(self, group: dict, hyper: dict) -> bool:
        """Whether `group` takes the fused path: `foreach`/`fused` not False, every parameter with a gradient
        a float32/float64 CPU tensor (not a tracer) with a gradient of its dtype and shape, and the values of
        `hyper` (the update's hyperparameters) plain numbers. `fused=True` where it cannot run is an error."""
        if any(type(p._grad) is SparseTensor for p in group["params"]):   # the gradients' slot: a step's cost
            if not self._takes_sparse_grads:
                raise FnxRuntimeError(f"{type(self).__name__} does not support sparse gradients{self._sparse_hint}")
            if group.get("fused"):
                raise FnxRuntimeError(f"{type(self).__name__}(fused=True) does not support sparse gradients")
            return False
        foreach, fused = group.get("foreach"), group.get("fused")
        if fused and foreach:
            raise FnxRuntimeError(f"{type(self).__name__}: `fused` and `foreach` cannot be `True` together")
        if foreach is False and not fused:
            return False
        why = _fused_obstacle(group, hyper)
        if why and fused:
            raise FnxRuntimeError(f"{type(self).__name__}(fused=True): {why}; pass fused=None to use the "
                                  f"per-parameter path for such parameters")
        return why is None

    def _update_group(self, group: dict) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not implement step()")

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        """PyTorch's layout: {'state': {index: {...}}, 'param_groups': [{..., 'params': [indices]}]}.

        Parameters are numbered in the order of the groups; state tensors are references, not copies.
        """
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = [index.setdefault(id(p), len(index)) for p in group["params"]]
            groups.append(packed)
        state = {index[id(p)]: dict(s) for p, s in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore hyperparameters and state from `state_dict()` (tensors are copied to each parameter's
        device, and floating ones to its dtype, except 'step' counters)."""
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise FnxValueError(f"loaded state dict has {len(saved_groups)} parameter groups, but the optimizer has "
                                f"{len(self.param_groups)}")
        by_index = {}
        for group, saved in zip(self.param_groups, saved_groups):
            if len(saved["params"]) != len(group["params"]):
                raise FnxValueError(f"loaded state dict contains a parameter group with {len(saved['params'])} "
                                    f"parameters, which doesn't match the size of the optimizer's group "
                                    f"({len(group['params'])})")
            by_index.update(zip(saved["params"], group["params"]))
        self.state = defaultdict(dict)
        for key, saved_state in state_dict["state"].items():
            p = by_index.get(key)
            if p is not None:
                self.state[p] = {name: _cast_state(p, name, v) for name, v in saved_state.items()}
        for i, saved in enumerate(saved_groups):
            self.param_groups[i] = {**saved, "params": self.param_groups[i]["params"]}

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {group[k]}" for k in sorted(group) if k != "params"]
        return "\n".join(lines + [")"])


def _cast_state(p: Tensor, name: str, value):
    """A private copy of a saved state value, on the parameter's device (and dtype, for float state); lists,
    tuples and dicts of them (LBFGS's history) are copied item by item."""
    if isinstance(value, dict):
        return {k: _cast_state(p, name, v) for k, v in value.items()}
    if type(value) in (list, tuple):
        return type(value)(_cast_state(p, name, v) for v in value)
    if not isinstance(value, Tensor):
        return value
    if name == "step":
        return value.clone()
    if value.dtype.is_floating_point and p.dtype.is_floating_point:
        return value.to(device=p.device, dtype=p.dtype, copy=True)
    return value.to(device=p.device, copy=True)


def _fused_obstacle(group: dict, hyper: dict) -> str | None:
    """Why `group` cannot take the fused path (None: it can)."""
    for name, value in hyper.items():
        if not isinstance(value, (int, float)):
            return f"the hyperparameter {name}={value!r} is not a Python number"
    for p in group["params"]:
        g = p.grad
        if g is None:
            continue
        if isinstance(p, Tracer) or isinstance(g, Tracer):
            return "a parameter or its gradient is traced (inside a transform)"
        if p._device is not cpu or g._device is not cpu:
            return f"the fused update runs on CPU tensors, but a parameter is on {p.device}"
        if p._value.dtype not in _FUSED_DTYPES or g._value.dtype != p._value.dtype:
            return (f"the fused update takes float32 or float64 parameters with gradients of their dtype, got a "
                    f"{p.dtype.name} parameter with a {g.dtype.name} gradient")
        if g._value.shape != p._value.shape or not p._value.flags.writeable:
            return f"a parameter of shape {list(p.shape)} is read-only or has a gradient of another shape"
    return None


def bump(t: Tensor) -> None:
    """Count an in-place write into `t`'s array (its version counter), as every fnx in-place op does."""
    t._version[0] += 1


def advance_step_fused(state: dict) -> int:
    """`advance_step` on the step's array directly (the fused path dispatches no op)."""
    step = state["step"]
    if not isinstance(step, Tensor) or step._device is not cpu:
        return advance_step(state)
    value = step._value
    value += 1
    bump(step)
    return int(value)


def sign_and_decay(p: Tensor, g: Tensor, lr, weight_decay: float, decoupled: bool, maximize: bool):
    """The per-parameter rules' first part, out of place: the gradient's sign (`maximize`) and weight decay,
    L2 (added to the gradient) or decoupled (the parameter shrinks by lr * weight_decay). Returns (p, g)."""
    if maximize:
        g = -g
    if weight_decay != 0:
        if decoupled:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + p * weight_decay
    return p, g


def hyperparameters(group: dict, names: tuple[str, ...]) -> dict:
    """The update's keyword arguments from a param group: `names`, with 'betas' split into beta1 and beta2."""
    hyper = {}
    for name in names:
        if name == "betas":
            hyper["beta1"], hyper["beta2"] = group["betas"]
        else:
            hyper[name] = group[name]
    return hyper


def decay_fused(P: np.ndarray, G: np.ndarray, lr: float, weight_decay: float, decoupled: bool,
                maximize: bool) -> np.ndarray:
    """On arrays, as the per-parameter rules do: the gradient's sign (`maximize`) and weight decay, L2 (a new
    gradient array) or decoupled (P shrinks in place). Returns the gradient to use."""
    if maximize:
        G = np.negative(G)
    if weight_decay != 0:
        if decoupled:
            P *= 1 - lr * weight_decay
        else:
            G = G + P * weight_decay
    return G


def write_(dst: Tensor, src: Tensor) -> None:
    """Write a new value into a parameter or state tensor in place (bumps its version counter); a sparse state
    tensor (SGD's momentum of a sparse gradient) takes the new one's indices and values."""
    if type(dst) is SparseTensor:
        dst.copy_(src)
        return
    assign_(dst, src, "optimizer.step")


def complex_as_real(update: Callable) -> Callable:
    """An update rule that treats a complex parameter as PyTorch's optimizers do, as two real parameters (its
    real and imaginary parts, `view_as_real`), its gradient and state buffers alike. The rule's outputs of the
    real view's shape (the parameter and its buffers) come back complex; others (0-d state) stay."""
    @functools.wraps(update)
    def rule(p: Tensor, g: Tensor, *rest, **hyper):
        if not p.dtype.is_complex:
            return update(p, g, *rest, **hyper)
        rest = [view_as_real(t) if isinstance(t, Tensor) and t.dtype.is_complex else t for t in rest]
        outs = update(view_as_real(p), view_as_real(g), *rest, **hyper)
        parts = tuple(p.shape) + (2,)
        return tuple(view_as_complex(o) if isinstance(o, Tensor) and tuple(o.shape) == parts else o for o in outs)
    return rule


def init_buffer(make: Callable, p: Tensor) -> Tensor:
    """A state buffer's start, `make(p)`; for a complex parameter made from its real view, so that a start such
    as Rprop's lr or Adagrad's initial accumulator holds for the imaginary parts too (as in PyTorch)."""
    if not p.dtype.is_complex:
        return make(p)
    out = make(view_as_real(p))
    return view_as_complex(out) if tuple(out.shape) == tuple(p.shape) + (2,) else out


def write_all_(p: Tensor, new_p: Tensor, bufs: tuple, new_bufs: list) -> None:
    """Write a parameter's new value and its state buffers' (None: a buffer this configuration lacks)."""
    write_(p, new_p)
    for buf, new in zip(bufs, new_bufs):
        if buf is not None:
            write_(buf, new)


def advance_step(state: dict) -> int:
    """Count one more update in `state['step']` (a 0-d float32 tensor, PyTorch's layout); return the count."""
    step = state["step"]
    if not isinstance(step, Tensor):  # a number, as in checkpoints of PyTorch before 1.12
        step = state["step"] = tensor(float(step), dtype=float32)
    count = int(step.item()) + 1
    step.fill_(count)
    return count


def check_hyper(label: str, value, high: float | None = None) -> None:
    """PyTorch's hyperparameter checks: `value >= 0` (and `< high` when given), else ValueError."""
    if isinstance(value, Tensor):
        return
    if not 0.0 <= value or (high is not None and not value < high):
        raise FnxValueError(f"Invalid {label}: {value}")


def check_differentiable(cls: str, differentiable: bool, functional: str) -> None:
    if differentiable:
        raise NotImplementedError(f"{cls}(differentiable=True): the stateful optimizers update parameters in place "
                                  f"and cannot be differentiated through; use fnx.optim.functional.{functional}, "
                                  f"whose update is a pure function that fnx.grad can differentiate")
