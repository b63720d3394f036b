"""`functional_call`: run a module with some of its parameters and buffers replaced (torch.func semantics).

The replacement tensors are swapped into the module's member dicts by dotted name for the duration of
the call and the originals restored afterwards, so the module stays a plain object while `fnx.grad`,
`vmap` or `compile` see the replacements as the function's inputs.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any

from ..core import FnxRuntimeError
from ..tensor import Tensor
from .module import Module

__all__ = ["functional_call"]

_MISSING = object()


def _swap(module: Module, name: str, value) -> Any:
    """Put `value` (or remove the attribute, for _MISSING) at `name` of `module`; return what was there."""
    d = module.__dict__
    for store in ("_parameters", "_buffers"):
        if name in d[store]:
            old = d[store][name]
            if value is _MISSING:
                del d[store][name]
            else:
                d[store][name] = value
            return old
    old = getattr(module, name, _MISSING)
    if old is not _MISSING and old is not None and not isinstance(old, Tensor):
        raise TypeError(f"attribute `{name}`: {old} is not an instance of fnx.Tensor")
    if value is not _MISSING:
        object.__setattr__(module, name, value)
    elif name in d:
        del d[name]
    return old


def _untie(module: Module, given: dict) -> dict:
    """`given` plus entries for every name that shares a tensor with a given name (tied weights)."""
    names_of: dict[int, list[str]] = {}
    for name, t in (*module.named_parameters(remove_duplicate=False), *module.named_buffers(remove_duplicate=False)):
        names_of.setdefault(id(t), []).append(name)
    tied = {n: group for group in names_of.values() if len(group) > 1 for n in group}
    out = dict(given)
    for name in given:
        for other in tied.get(name, ()):
            if other in given and given[other] is not given[name]:
                raise ValueError(f"functional_call got multiple values for keys {sorted(tied[name])}, which are "
                                 f"tied. Consider using tie_weights=False")
            out.setdefault(other, given[name])
    return out


@contextmanager
def _reparametrize(module: Module, tensors: dict, tie_weights: bool, strict: bool):
    if tie_weights:
        tensors = _untie(module, tensors)
    if strict:
        known = {n for n, _ in module.named_parameters(remove_duplicate=False)} | \
                {n for n, _ in module.named_buffers(remove_duplicate=False)}
        missing, unexpected = sorted(known - set(tensors)), sorted(set(tensors) - known)
        errors = ([f"Unexpected key(s): {', '.join(map(repr, unexpected))}."] if unexpected else []) + \
                 ([f"Missing key(s): {', '.join(map(repr, missing))}."] if missing else [])
        if errors:
            raise FnxRuntimeError(f"Error(s) in reparametrizing for {module._get_name()}:\n\t" + "\n\t".join(errors))
    originals = {}
    try:
        for name, value in tensors.items():
            path, _, attr = name.rpartition(".")
            originals[name] = _swap(module.get_submodule(path), attr, value)
        yield
    finally:
        for name, old in originals.items():
            path, _, attr = name.rpartition(".")
            _swap(module.get_submodule(path), attr, old)


def functional_call(module: Module, parameter_and_buffer_dicts, args=None, kwargs: dict | None = None, *,
                    tie_weights: bool = True, strict: bool = False):
    """`module(*args, **kwargs)` with the parameters and buffers named in `parameter_and_buffer_dicts` (a dict,
    or a sequence of dicts with distinct keys) standing in for the module's own, e.g.
    `fnx.grad(lambda p: loss(functional_call(model, p, (x,)), y))(dict(model.named_parameters()))`."""
    if isinstance(parameter_and_buffer_dicts, dict):
        tensors = parameter_and_buffer_dicts
    else:
        tensors = {}
        for d in parameter_and_buffer_dicts:
            overlap = set(tensors) & set(d)
            if overlap:
                raise ValueError(f"{sorted(overlap)} appeared in multiple dictionaries; behavior of functional call "
                                 f"is ambiguous")
            tensors.update(d)
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    with _reparametrize(module, tensors, tie_weights, strict):
        return module(*args, **(kwargs or {}))
