"""torch.autograd.functional's names over fnx's transforms (what `import torch.autograd.functional` gives a program
run with fnx standing in for torch): jacobian, hessian, vjp, jvp, hvp and vhp of a function of tensors.

`inputs` is a tensor or a tuple of tensors passed to `func` as its arguments; results are shaped as PyTorch's (a
Jacobian's output dims first; tuples where inputs or outputs are tuples) and detached. `create_graph=True` (results
differentiable on the eager tape) is not supported: it raises NotImplementedError; use fnx.grad of fnx.jacrev, or
torch.func's composable forms (fnx.func).
"""
from __future__ import annotations

from typing import Callable

from .ops.creation import ones_like
from .tensor import Tensor
from .transforms import ad as _ad

__all__ = ["jacobian", "hessian", "vjp", "jvp", "hvp", "vhp"]


def _args(inputs) -> tuple[tuple, bool]:
    """(the inputs as a tuple of detached tensors, whether they came as one tensor)."""
    single = isinstance(inputs, Tensor)
    return tuple(t.detach() for t in ((inputs,) if single else tuple(inputs))), single


def _check(name: str, create_graph: bool) -> None:
    if create_graph:
        raise NotImplementedError(f"torch.autograd.functional.{name}: create_graph=True is not supported by fnx; "
                                  f"compose fnx.func / fnx.grad transforms for higher derivatives")


def _detached(tree):
    if isinstance(tree, Tensor):
        return tree.detach()
    return type(tree)(_detached(t) for t in tree)


def jacobian(func: Callable, inputs, create_graph: bool = False, strict: bool = False, vectorize: bool = False,
             strategy: str = "reverse-mode"):
    """The Jacobian of `func` at `inputs` (each output's dims, then each input's)."""
    _check("jacobian", create_graph)
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your '
                         'function has more outputs than inputs, "forward-mode" tends to be more performant. '
                         'Otherwise, prefer to use "reverse-mode".')
    args, single = _args(inputs)
    transform = _ad.jacrev if strategy == "reverse-mode" else _ad.jacfwd
    return _detached(transform(func, argnums=0 if single else tuple(range(len(args))))(*args))


def hessian(func: Callable, inputs, create_graph: bool = False, strict: bool = False, vectorize: bool = False,
            outer_jacobian_strategy: str = "reverse-mode"):
    """The Hessian of the scalar `func` at `inputs` (a tuple of tuples for several inputs)."""
    _check("hessian", create_graph)
    args, single = _args(inputs)
    return _detached(_ad.hessian(func, argnums=0 if single else tuple(range(len(args))))(*args))


def vjp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """(func(*inputs), v^T J): `v` shaped as the output (None for a one-element output: 1)."""
    _check("vjp", create_graph)
    args, single = _args(inputs)
    out, pullback = _ad.vjp(func, *args)
    if v is None:
        if not isinstance(out, Tensor) or out.numel() != 1:
            raise RuntimeError("The vector v can only be None if the user-provided function returns a single "
                               "Tensor with a single element.")
        v = ones_like(out)
    grads = pullback(v)
    return _detached(out), _detached(grads[0] if single else tuple(grads))


def jvp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """(func(*inputs), J v): `v` shaped as the inputs (None for a one-element input: 1)."""
    _check("jvp", create_graph)
    args, single = _args(inputs)
    if v is None:
        if len(args) != 1 or args[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the input to the user-provided function is a "
                               "single Tensor with a single element.")
        v = ones_like(args[0])
    tangents = (v,) if single or isinstance(v, Tensor) else tuple(v)
    out, tangent = _ad.jvp(func, args, tuple(t.detach() for t in tangents))
    return _detached(out), _detached(tangent)


def hvp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """(func(*inputs), H v) of the scalar `func`: forward mode over its gradient."""
    _check("hvp", create_graph)
    args, single = _args(inputs)
    tangents = (v,) if single else tuple(v)
    gradient = _ad.grad(func, argnums=tuple(range(len(args))))
    _, product = _ad.jvp(gradient, args, tuple(t.detach() for t in tangents))
    return _detached(func(*args)), _detached(product[0] if single else tuple(product))


def vhp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """(func(*inputs), v^T H) of the scalar `func`: reverse mode over its gradient."""
    _check("vhp", create_graph)
    args, single = _args(inputs)
    cotangents = (v,) if single else tuple(v)
    gradient = _ad.grad(func, argnums=tuple(range(len(args))))
    _, pullback = _ad.vjp(gradient, *args)
    product = pullback(tuple(t.detach() for t in cotangents))
    return _detached(func(*args)), _detached(product[0] if single else tuple(product))
