"""Donated arguments of `fnx.compile`: which tensor leaves are donated, and what happens to them.

A compiled call donates the tensor leaves of the arguments named by `donate_argnums` (every tensor of a
list, dict or module argument). The executable's donating driver (fnx/lowering/plan.py) writes outputs
into donated buffers where that is safe and reports which it took; those tensors are then invalidated by
swapping their array for a `DonatedBuffer`, whose every use raises an error naming the compiled function
and the argument. Nothing changes on the eager hot path: a valid tensor is untouched, and an invalidated
one fails at its first attribute lookup on the array.

Donating a tensor that requires grad while grad mode is on raises (autograd may need its value, as with
PyTorch's in-place ops on leaves); under `fnx.no_grad()` it is donated like any other tensor.
"""
from __future__ import annotations

import logging

from ..core import FnxRuntimeError
from ..tree import tree_flatten
from ..tensor import Tensor
from .._warn import warn as _warn

__all__ = ["DonatedBuffer", "Donation", "donated_leaves"]

_log = logging.getLogger("fnx.compile")


class DonatedBuffer:
    """Stands in for the array of a tensor whose buffer was donated: every use raises the donation error."""

    __slots__ = ("message",)

    def __init__(self, message: str):
        self.message = message

    def fail(self, *args, **kwargs):
        raise FnxRuntimeError(self.message)

    def __getattr__(self, name: str):
        raise FnxRuntimeError(self.message)

    __repr__ = __str__ = __format__ = fail   # `print(t.numpy())` of a donated tensor says why it fails too
    __array__ = __array_ufunc__ = __array_function__ = fail
    __len__ = __iter__ = __getitem__ = __setitem__ = __contains__ = fail
    __bool__ = __float__ = __int__ = __index__ = __complex__ = fail
    __neg__ = __pos__ = __abs__ = __invert__ = fail
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = fail
    __hash__ = fail


def _binary_dunders() -> None:
    for op in ("add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor",
               "lshift", "rshift"):
        for form in (f"__{op}__", f"__r{op}__", f"__i{op}__"):
            setattr(DonatedBuffer, form, DonatedBuffer.fail)


_binary_dunders()


def donated_leaves(args: tuple, donate_argnums: tuple, first: int, label) -> list[tuple[int, str]]:
    """(position among the executable's inputs, label) of each tensor leaf of the donated arguments.

    `args` are the positional arguments of the call; their tensor leaves are the executable's inputs from
    position `first` on (after the lifted captured tensors), in argument order. `label(i)` names argument i.
    """
    donated = {i % len(args) for i in donate_argnums if -len(args) <= i < len(args)}
    out, position = [], first
    for i, a in enumerate(args):
        if isinstance(a, Tensor):
            leaves, single = [a], True
        else:
            leaves, single = [x for x in tree_flatten(a)[0] if isinstance(x, Tensor)], False
        for k in range(len(leaves)):
            if i in donated:
                out.append((position, label(i) if single else f"{label(i)} leaf {k}"))
            position += 1
    return out


class Donation:
    """One signature's donation: the donating driver, one poison per donor, and the messages to give."""

    __slots__ = ("run", "poisons", "labels", "fun_name")

    def __init__(self, executable, leaves: list[tuple[int, str]], fun_name: str, donate_argnums: tuple):
        self.labels = dict(leaves)
        self.fun_name = fun_name
        driver = executable.donating(tuple(p for p, _ in leaves))
        self.run = driver.run
        self.poisons = {p: DonatedBuffer(f"{label} was donated to compiled function `{fun_name}` (donate_argnums="
                                         f"{donate_argnums}) and its buffer now holds an output; pass a copy, or "
                                         f"stop donating it") for p, label in leaves if p in driver.donors}
        unusable = [label for p, label in leaves if p not in driver.donors]
        if unusable:
            _warn(f"fnx.compile: some donated buffers of `{fun_name}` were not usable (no output of the "
                  f"same byte size can take them): {', '.join(unusable)}; those tensors stay valid",
                  UserWarning)

    def __call__(self, leaves: list) -> list[Tensor]:
        used: list[int] = []
        outs = self.run(*leaves, used)
        poisons = self.poisons
        for p in used:
            leaves[p]._value = poisons[p]
        if len(used) < len(poisons) and _log.isEnabledFor(logging.DEBUG):
            kept = [self.labels[p] for p in poisons if p not in used]
            _log.debug("%s: donated %s kept: another tensor, view or argument shares its memory, or it is not "
                       "row-major", self.fun_name, ", ".join(kept))
        return outs

    def refuse_recorded(self, leaves: list) -> None:
        """The call is recorded by autograd, so it does not donate; a donated leaf requiring grad is an error."""
        for p, label in self.labels.items():
            if leaves[p]._requires_grad:
                raise FnxRuntimeError(f"{label} of compiled function `{self.fun_name}` is donated but requires "
                                      f"grad: autograd needs its value for the backward pass; donate it under "
                                      f"fnx.no_grad(), pass it detached, or stop donating it")
