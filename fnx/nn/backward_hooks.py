"""Module backward hooks (PyTorch's `register_full_backward_hook` / `register_full_backward_pre_hook`).

A module call with backward hooks passes its tensor inputs and its tensor outputs through identity nodes on
the eager tape. In backward, the outputs' node sees the gradients w.r.t. the outputs (`grad_output`): it runs
the pre-hooks, which may replace them. The inputs' node sees the gradients w.r.t. the inputs (`grad_input`,
one entry per positional argument: None for non-tensors, zeros for tensors that need no gradient) once all of
them are known: it runs the hooks `hook(module, grad_input, grad_output)`, which may replace `grad_input`. When no input
needs a gradient, the hooks run from the outputs' node with a `grad_input` of Nones, as in PyTorch. The hooks
belong to the eager tape: under fnx.grad, vmap or compile, and without grad mode, they do not run.
"""
from __future__ import annotations

from typing import Callable

from .. import core, tree
from ..autograd.function import record_pullback
from ..core import FnxRuntimeError
from ..ops.creation import zeros
from ..tensor import Tensor

__all__ = ["call_with_backward_hooks"]


def _needs_grad(x) -> bool:
    return isinstance(x, Tensor) and x.requires_grad and x.dtype.is_floating_point


def _replaced(kind: str, given: tuple, returned) -> tuple:
    """Check a hook's replacement gradients: None keeps `given`, else a tuple/list of its length."""
    if returned is None:
        return given
    returned = tuple(returned) if isinstance(returned, (tuple, list)) else (returned,)
    if len(returned) != len(given):
        raise FnxRuntimeError(f"Backward hook returned an invalid number of {kind}, got {len(returned)}, but "
                              f"expected {len(given)}")
    return returned


def _identity(name: str, tensors: list, pull: Callable) -> list:
    """Aliases of `tensors` whose one tape node maps the aliases' cotangents through `pull`."""
    outs = [t.detach() for t in tensors]
    return record_pullback(name, tensors, outs, lambda cts: list(pull(tuple(cts))))


def call_with_backward_hooks(module, args: tuple, call: Callable):
    """`call(*args)` (the module's forward with its forward hooks) with the module's backward hooks attached."""
    if not core.state.grad_enabled or core.state.transforms_active:
        return call(*args)
    seen: dict = {}
    positions = [i for i, a in enumerate(args) if _needs_grad(a)]

    def run_hooks(grad_input: tuple) -> tuple:
        for hook in list(module._backward_hooks.values()):
            grad_input = _replaced("grad_input", grad_input, hook(module, grad_input, seen["grad_output"]))
        return grad_input

    # tensors needing no gradient get zeros in grad_input, as PyTorch's materialized gradients
    zero_like = {i: (tuple(a.shape), a.dtype, a.device) for i, a in enumerate(args)
                 if isinstance(a, Tensor) and i not in positions}

    def pull_inputs(cts: tuple) -> tuple:
        grad_input = [None] * len(args)
        for i, (shape, dtype, device) in zero_like.items():
            grad_input[i] = zeros(shape, dtype=dtype, device=device)
        for i, g in zip(positions, cts):
            grad_input[i] = g
        grad_input = run_hooks(tuple(grad_input))
        return tuple(grad_input[i] for i in positions)

    if positions:
        wrapped = _identity("BackwardHookFunction", [args[i] for i in positions], pull_inputs)
        args = list(args)
        for i, t in zip(positions, wrapped):
            args[i] = t
        args = tuple(args)
    result = call(*args)

    leaves, treedef = tree.tree_flatten(result)
    out_positions = [i for i, leaf in enumerate(leaves) if _needs_grad(leaf)]
    if not out_positions:
        return result

    def pull_outputs(cts: tuple) -> tuple:
        for hook in list(module._backward_pre_hooks.values()):
            cts = _replaced("grad_output", cts, hook(module, cts))
        seen["grad_output"] = cts
        if not positions and module._backward_hooks:
            run_hooks((None,) * len(args))
        return cts

    wrapped = _identity("BackwardHookFunction", [leaves[i] for i in out_positions], pull_outputs)
    for i, t in zip(out_positions, wrapped):
        leaves[i] = t
    return tree.tree_unflatten(treedef, leaves)
