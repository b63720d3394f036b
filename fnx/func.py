"""`fnx.func`: torch.func's names for fnx's composable transforms (what `import torch.func` gives a program run with
fnx standing in for torch): grad, grad_and_value, vjp, jvp, jacrev, jacfwd, hessian, vmap, linearize,
functional_call, stack_module_state, functionalize and replace_all_batch_norm_modules_.

The transforms are fnx's own (fnx.grad, fnx.vmap, ...: JAX's forms); here they take PyTorch's argument names
(`in_dims`/`out_dims`) and give PyTorch's result orders (grad_and_value: gradient first), and dicts in results keep
the key order of the dicts they mirror (an argument's, the function's output's), as PyTorch's pytrees do where
fnx's (JAX's) sort the keys: per-sample gradients zip with model.parameters(). vmap's and jacrev's `chunk_size`
(PyTorch's way to bound memory by mapping in pieces) is not supported: it raises NotImplementedError.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

from .autograd import no_grad
from .errors import FnxRuntimeError
from .nn.layers.normalization import _BatchNorm
from .nn.module import Module
from .nn.stateless import functional_call
from .ops.joins import stack
from .transforms import ad as _ad
from .transforms.batching import vmap as _vmap

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "vmap", "linearize",
           "functional_call", "stack_module_state", "functionalize", "replace_all_batch_norm_modules_"]


def _ordered(template, value, inner=None):
    """`value` with every dict in the key order of the dict at its place in `template` (a tree of the same
    structure); where `template` has a leaf and `inner` is given, the subtree of `value` there follows `inner`
    (a Jacobian: the output's structure, each leaf holding one of the input's)."""
    if isinstance(template, dict) and isinstance(value, dict) and set(template) == set(value):
        return {k: _ordered(template[k], value[k], inner) for k in template}
    if isinstance(template, (list, tuple)) and isinstance(value, (list, tuple)) and len(template) == len(value) \
            and not hasattr(value, "_fields"):
        return type(value)(_ordered(t, v, inner) for t, v in zip(template, value))
    if inner is not None and not isinstance(template, (dict, list, tuple)):
        return _ordered(inner, value)
    return value


class _Recorded:
    """`func` called with its arguments' dicts in the key order of `args` (the caller's, set before each transform
    call: fnx's transforms rebuild them sorted) and keeping what its last call returned."""

    def __init__(self, func: Callable):
        self.func, self.args, self.out = func, None, None

    def __call__(self, *args, **kwargs):
        self.out = self.func(*_ordered(self.args, args), **kwargs)
        return self.out

    def given(self, args: tuple) -> "_Recorded":
        self.args = args
        return self


def _inputs(args: tuple, argnums):
    return tuple(args[i] for i in argnums) if isinstance(argnums, tuple) else args[argnums]


def _no_chunks(name: str, chunk_size) -> None:
    if chunk_size is not None:
        raise NotImplementedError(f"fnx.func.{name}: chunk_size is not supported (fnx maps the whole batch at "
                                  f"once); leave it None")


def grad(func: Callable, argnums=0, has_aux: bool = False) -> Callable:
    """The gradient of `func` (a scalar function) in its arguments `argnums` (torch.func.grad); with `has_aux`,
    func returns (output, aux) and the result is (gradient, aux)."""
    both = grad_and_value(func, argnums, has_aux)

    def run(*args, **kwargs):
        gradient, value = both(*args, **kwargs)
        return (gradient, value[1]) if has_aux else gradient
    return run


def grad_and_value(func: Callable, argnums=0, has_aux: bool = False) -> Callable:
    """(gradient, value) of `func` (torch.func.grad_and_value); with `has_aux`, (gradient, (value, aux))."""
    recorded = _Recorded(func)
    both = _ad.value_and_grad(recorded, argnums=argnums, has_aux=has_aux)

    def run(*args, **kwargs):
        recorded.given(args)
        value, gradient = both(*args, **kwargs)
        gradient = _ordered(_inputs(args, argnums), gradient)
        return gradient, (_ordered(recorded.out, value) if has_aux else value)
    return run


def vjp(func: Callable, *primals, has_aux: bool = False):
    """(func(*primals), vjp_fn) and with `has_aux` the aux output third (torch.func.vjp): vjp_fn(cotangents) gives
    the cotangents of the primals as a tuple."""
    recorded = _Recorded(func).given(primals)
    out, pullback, *aux = _ad.vjp(recorded, *primals, has_aux=has_aux)
    out = _ordered(recorded.out[0] if has_aux else recorded.out, out)
    aux = [_ordered(recorded.out[1], a) for a in aux]
    return (out, lambda *cts: _ordered(primals, pullback(*cts)), *aux)


def jvp(func: Callable, primals: tuple, tangents: tuple, *, strict: bool = False, has_aux: bool = False):
    """(func(*primals), its directional derivative along `tangents`), and with `has_aux` the aux output third
    (torch.func.jvp)."""
    recorded = _Recorded(func).given(tuple(primals))
    out, tangent, *aux = _ad.jvp(recorded, tuple(primals), tuple(tangents), has_aux=has_aux)
    template = recorded.out[0] if has_aux else recorded.out
    return (_ordered(template, out), _ordered(template, tangent), *(_ordered(recorded.out[1], a) for a in aux))


def _jacobian(transform, func: Callable, argnums, has_aux: bool) -> Callable:
    recorded = _Recorded(func)
    jac = transform(recorded, argnums=argnums, has_aux=has_aux)

    def run(*args, **kwargs):
        result = jac(*recorded.given(args).args, **kwargs)
        inputs = _inputs(args, argnums)
        if not has_aux:
            return _ordered(recorded.out, result, inputs)
        return _ordered(recorded.out[0], result[0], inputs), _ordered(recorded.out[1], result[1])
    return run


def jacrev(func: Callable, argnums=0, *, has_aux: bool = False, chunk_size: int | None = None,
           _preallocate_and_copy: bool = False) -> Callable:
    """The Jacobian of `func` by reverse mode (torch.func.jacrev)."""
    _no_chunks("jacrev", chunk_size)
    return _jacobian(_ad.jacrev, func, argnums, has_aux)


def jacfwd(func: Callable, argnums=0, has_aux: bool = False, *, randomness: str = "error") -> Callable:
    """The Jacobian of `func` by forward mode (torch.func.jacfwd)."""
    return _jacobian(_ad.jacfwd, func, argnums, has_aux)


def hessian(func: Callable, argnums=0) -> Callable:
    """The Hessian of a scalar `func` (torch.func.hessian: jacfwd of jacrev)."""
    recorded = _Recorded(func)
    second = _ad.hessian(recorded, argnums=argnums)

    def run(*args, **kwargs):
        inputs = _inputs(args, argnums)
        return _ordered(inputs, second(*recorded.given(args).args, **kwargs), inputs)
    return run


def vmap(func: Callable, in_dims: Any = 0, out_dims: Any = 0, randomness: str = "error", *,
         chunk_size: int | None = None) -> Callable:
    """`func` mapped over the dims `in_dims` of its arguments (None: not mapped), its outputs' batch at `out_dims`
    (torch.func.vmap); `randomness`: 'error', 'different' or 'same'."""
    _no_chunks("vmap", chunk_size)
    recorded = _Recorded(func)
    mapped = _vmap(recorded, in_axes=in_dims, out_axes=out_dims, randomness=randomness)

    def run(*args, **kwargs):
        result = mapped(*recorded.given(args).args, **kwargs)
        return _ordered(recorded.out, result)
    return run


def linearize(func: Callable, *primals) -> tuple:
    """(func(*primals), jvp_fn): jvp_fn(*tangents) is the directional derivative at `primals`
    (torch.func.linearize)."""
    recorded = _Recorded(func).given(primals)
    out, push = _ad.linearize(recorded, *primals)
    template = recorded.out
    return _ordered(template, out), lambda *tangents: _ordered(template, push(*tangents))


def stack_module_state(models) -> tuple[dict, dict]:
    """(params, buffers): each name's tensors of `models` (modules of one structure) stacked along a new first dim,
    for vmap over an ensemble with functional_call (torch.func.stack_module_state); the stacked parameters are new
    leaves that require grad where the originals do."""
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not all(isinstance(m, Module) for m in models):
        raise TypeError("stack_module_state: expected a sequence of fnx.nn.Module")
    if any(m.training != models[0].training for m in models):
        raise RuntimeError("stack_module_state: Expected all models to have the same training/eval mode.")
    kinds = [type(m) for m in models]
    if any(k is not kinds[0] for k in kinds):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")

    def stacked(named, leaf: bool) -> dict:
        out = {}
        for name, first in named(models[0]):
            with no_grad():
                t = stack([dict(named(m))[name] for m in models])
            out[name] = t.requires_grad_(first.requires_grad) if leaf else t
        return out
    return (stacked(lambda m: m.named_parameters(), True), stacked(lambda m: m.named_buffers(), False))


_REMOVE = ("mutations", "mutations_and_views")


def functionalize(func: Callable, *, remove: str = "mutations") -> Callable:
    """`func` with its mutations (and with "mutations_and_views", its aliasing) removed, as torch.func's.

    fnx's transforms already trace every in-place op as its out-of-place form (fnx/ops/inplace.py: a written
    tensor becomes the result of the functional op, a written view rewrites its root), which is what
    functionalize does; and eager calls keep func's semantics, input mutations included, which functionalize
    promises too. So the functionalized function runs `func` itself: under make_jaxpr, compile, grad or vmap it
    holds no mutation, and eagerly it behaves as `func`.
    """
    if remove not in _REMOVE:
        raise FnxRuntimeError(f"functionalize(f, remove='mutations'): received invalid argument for remove={remove!r}; "
                         f"valid options are {list(_REMOVE)}")

    @functools.wraps(func)
    def functionalized(*args, **kwargs):
        return func(*args, **kwargs)

    return functionalized


def replace_all_batch_norm_modules_(root: Module) -> Module:
    """Make every BatchNorm in `root` use batch statistics only, in place (running_mean, running_var and
    num_batches_tracked None, track_running_stats False), so that vmap over a model does not write its running
    statistics; returns `root`."""
    for module in root.modules():
        if isinstance(module, _BatchNorm):
            module.running_mean = None
            module.running_var = None
            module.num_batches_tracked = None
            module.track_running_stats = False
    return root
