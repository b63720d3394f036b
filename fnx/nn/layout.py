"""PyTorch's layout for the eager nn ops that compute in row-major order (resizing, padding, pooling): where the
input is a channels-last (N, C, *spatial) CPU tensor (fnx/array_layout.py), their outputs and input gradients lie
channels-last too, as PyTorch lays them out, so the next convolution reads its operand in place."""
from __future__ import annotations

import functools

import numpy as np

from .. import core
from ..array_layout import channels_last
from ..autograd.function import Function

__all__ = ["keep_channels_last"]


def _eager_last(t) -> bool:
    """Whether the tensor t holds a channels-last numpy array (tracers carry no layout)."""
    return type(getattr(t, "_value", None)) is np.ndarray and channels_last(t._value)


def _as_last(t):
    """The (N, C, *spatial) tensor t laid out channels-last (a copy where it is not)."""
    if _eager_last(t):
        return t
    return t.permute(0, *range(2, t.ndim), 1).contiguous().permute(0, t.ndim - 1, *range(1, t.ndim - 1))


class _GradientLast(Function):
    """Passes a tensor on as a view and lays its gradient out channels-last."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return _as_last(g)


def _out_last(out, rank: int):
    """An output of the op laid out channels-last (a copy where it is not; an index output too, as PyTorch's)."""
    if type(out) is tuple:
        return tuple(_out_last(o, rank) for o in out)
    return _as_last(out) if getattr(out, "ndim", None) == rank else out


def keep_channels_last(*ranks: int):
    """A decorator: `op(input, ...)` with PyTorch's layout, where `input` is an eager channels-last
    (N, C, *spatial) tensor of one of the `ranks` PyTorch keeps for the op: its outputs of that rank and its
    gradient are laid out channels-last too (the values are those of `op`)."""
    def decorate(op):
        @functools.wraps(op)
        def wrapped(input, *args, **kwargs):
            if getattr(input, "ndim", None) not in ranks or not _eager_last(input):
                return op(input, *args, **kwargs)
            x = input
            if input._requires_grad and not core._get_flags() & core._TRACING:   # a Function runs eagerly only
                x = _GradientLast.apply(input)
            return _out_last(op(x, *args, **kwargs), input.ndim)
        return wrapped
    return decorate
