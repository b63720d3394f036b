"""torch.autograd.forward_ad: eager forward-mode autodiff with dual tensors.

A dual level is the jvp transform left open: `enter_dual_level` pushes a JVP trace on the calling thread's
trace stack, `make_dual(x, t)` is a tracer of that trace pairing primal `x` with tangent `t`, and every op
on it runs its primitive's jvp rule (fnx/transforms/ad.py) while plain tensors stay eager. `unpack_dual`
reads the pair back. The primal ops run eagerly on the autograd tape, so `backward()` works through both
the primal and the tangent (forward-over-reverse), as in PyTorch.

A dual tensor also reads as its primal in eager code (printing, `.numpy()`, `.item()`, `.backward()`,
`requires_grad`); after its level ends, out-of-place ops see its primal, as PyTorch's tensors lose their
tangent. PyTorch supports one level at a time, and so does this module.

Where fnx differs: writing a dual value in place into a plain tensor (PyTorch makes the plain tensor dual)
raises, since a concrete tensor cannot become a tracer; a tangent of another floating dtype than its primal
is converted to the primal's dtype.
"""
from __future__ import annotations

import contextvars
from contextlib import ContextDecorator
from typing import NamedTuple

from .. import core
from ..core import FnxRuntimeError, FnxValueError
from ..ops.elementwise import convert
from ..tensor import Tensor, Tracer
from .ad import JVPTrace, JVPTracer, _zero_tangent

__all__ = ["dual_level", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual", "UnpackedDualTensor"]

_active = contextvars.ContextVar("fnx_dual_level", default=None)   # (main trace, its new_main context) or None


class UnpackedDualTensor(NamedTuple):
    """What `unpack_dual` returns: the primal and the tangent (None for a tensor that is not dual)."""

    primal: Tensor
    tangent: Tensor | None


class DualTensor(JVPTracer):
    """A tracer of the dual level that also behaves as its primal where eager code reads values.

    `_zero` marks a tensor whose tangent is a stand-in zero (a plain tensor lifted into the level, or the
    result of detach and other non-differentiable ops): `unpack_dual` gives None for it, as PyTorch does.
    """

    __slots__ = ("_zero",)

    def __init__(self, trace, primal, tangent, zero: bool = False):
        super().__init__(trace, primal, tangent)
        self._zero = zero or tangent is None
        self._mirror()

    def _mirror(self) -> None:
        """Hold the concrete primal's data, so that eager ops read it after the level ends."""
        p = self.primal
        if not isinstance(p, Tracer):
            self._value, self._version = p._value, p._version

    def _assume(self, other: DualTensor) -> None:
        super()._assume(other)
        self._zero = other._zero
        self._mirror()

    def _live(self) -> bool:
        state = _active.get()
        return state is not None and state[0] is self._trace.main

    @property
    def requires_grad(self) -> bool:
        return self.primal.requires_grad

    @property
    def grad_fn(self):
        return self.primal.grad_fn

    @property
    def is_leaf(self) -> bool:
        return self.primal.is_leaf

    def __repr__(self) -> str:
        text = repr(self.primal)
        if not self._live() or self._zero:
            return text
        return f"{text[:-1]},\n       tangent={self.tangent!r})"


def _primal_method(name: str):
    def method(self, *args, **kwargs):
        return getattr(self.primal, name)(*args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"`{name}` of the primal (a dual tensor reads as its primal in eager code)."
    return method


for _name in ("numpy", "tolist", "__array__", "backward", "retain_grad", "register_hook"):
    setattr(DualTensor, _name, _primal_method(_name))


class DualTrace(JVPTrace):
    """The trace of a dual level: a JVP trace whose tracers are DualTensors."""

    __slots__ = ()
    tracer_type = DualTensor
    eager_autograd = True   # the primals live on the eager tape: backward() may run inside the level

    def pure(self, val):
        return DualTensor(self, val, _zero_tangent(val), zero=True)

    lift = pure


def _check_level(level, op: str):
    """The active level's main trace; raises for a level other than the active one."""
    state = _active.get()
    if level is not None and (state is None or level != 0):
        raise FnxRuntimeError(f"{op}: invalid level {level}: the active forward AD level is "
                              f"{'0' if state is not None else 'none'} (PyTorch supports one level at a time)")
    return None if state is None else state[0]


def enter_dual_level() -> int:
    """Open a forward AD level (PyTorch's one level: 0) and return its index; prefer `with dual_level():`."""
    if _active.get() is not None:
        raise FnxRuntimeError("enter_dual_level: nested forward mode AD is not supported at the moment (a dual "
                              "level is already active; exit it first)")
    ctx = core.new_main(DualTrace)
    _active.set((ctx.__enter__(), ctx))
    return 0


def exit_dual_level(*, level: int | None = None) -> None:
    """Close the active forward AD level: its dual tensors become plain tensors (their primal)."""
    state = _active.get()
    if state is None:
        raise FnxRuntimeError("exit_dual_level: no forward AD level is active (enter one with dual_level())")
    _check_level(level, "exit_dual_level")
    main, ctx = state
    if core.state.trace_stack[-1] is not main:
        raise FnxRuntimeError("exit_dual_level: a transform entered inside the dual level is still active; "
                              "leave it first")
    _active.set(None)
    ctx.__exit__(None, None, None)


class dual_level(ContextDecorator):
    """Context manager (or decorator) of a forward AD level: dual tensors made inside carry tangents.

    >>> import fnx
    >>> import fnx.transforms.forward_ad as fwAD
    >>> with fwAD.dual_level():
    ...     y = fnx.sin(fwAD.make_dual(fnx.tensor([0.0, 1.0]), fnx.ones(2)))
    ...     fwAD.unpack_dual(y).tangent   # cos(x) * tangent
    tensor([1.0000, 0.5403])
    """

    def __enter__(self) -> int:
        return enter_dual_level()

    def __exit__(self, *exc) -> None:
        exit_dual_level()


def make_dual(tensor: Tensor, tangent: Tensor, *, level: int | None = None) -> Tensor:
    """A dual tensor: `tensor` paired with `tangent` (same shape) in the active level; ops on it carry the
    tangent forward (the Jacobian-vector product)."""
    main = _check_level(level, "make_dual")
    if main is None:
        raise FnxRuntimeError("make_dual: trying to create a dual Tensor for forward AD but no level exists, make "
                              "sure to enter_dual_level() (or `with dual_level():`) first")
    if not isinstance(tensor, Tensor) or not isinstance(tangent, Tensor):
        raise FnxValueError(f"make_dual: expected Tensors, got {type(tensor).__name__} and "
                            f"{type(tangent).__name__}")
    for what, t in (("primal", tensor), ("tangent", tangent)):
        if not t.dtype.is_inexact:
            raise FnxValueError(f"make_dual: expected {what} to be floating point or complex, but got: {t.dtype}")
    if isinstance(tensor, DualTensor) and tensor._trace.main is main and not tensor._zero:
        raise FnxRuntimeError("make_dual: making a dual Tensor based on a Tensor that already has a forward "
                              "gradient at the same level 0 is not supported; unpack_dual(t).primal first")
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise FnxRuntimeError(f"make_dual: trying to set a forward gradient that has a different size than that "
                              f"of the original Tensor: the tensor is of size {list(tensor.shape)} while the given "
                              f"forward gradient is of size {list(tangent.shape)}")
    if tangent.device != tensor.device:
        raise FnxRuntimeError(f"make_dual: the tangent is on {tangent.device} and the tensor on {tensor.device}; "
                              f"move the tangent with .to(tensor.device)")
    if isinstance(tensor, DualTensor) and tensor._trace.main is main:
        tensor = tensor.primal
    return DualTensor(DualTrace(main), tensor, convert(tangent, tensor.dtype))


def unpack_dual(tensor: Tensor, *, level: int | None = None) -> UnpackedDualTensor:
    """(primal, tangent) of a dual tensor of the active level; (tensor, None) for any other tensor."""
    main = _check_level(level, "unpack_dual")
    if not isinstance(tensor, DualTensor):
        return UnpackedDualTensor(tensor, None)
    primal = core.full_lower(tensor.primal)
    if tensor._trace.main is not main or tensor._zero:
        return UnpackedDualTensor(primal, None)
    return UnpackedDualTensor(primal, core.full_lower(tensor.tangent))
