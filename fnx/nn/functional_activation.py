"""Activation functions and softmax of `fnx.nn.functional`, as compositions of fnx ops (softmax and log_softmax
are also primitives of their own in eager mode, for speed).

Each works eagerly and under every transform. `inplace=True` writes the result into the input through
fnx's in-place machinery (so autograd's version checks apply), except on traced values, which are
immutable: there the result is returned out of place.
"""
from __future__ import annotations

import functools

import numpy as np

from ..core import Primitive, state
from ..lowering import nn_kernels
from ..ops.autocast import autocast_op
from ..ops import elementwise as ew
from ..ops import reduce as rd
from ..ops.inplace import inplace
from ..ops.joins import chunk
from ..tensor import Tensor, Tracer, canonical_dim
from .._warn import warn as _warn
from ..ops.sampling import rand

__all__ = ["relu", "relu_", "relu6", "elu", "elu_", "selu", "celu", "leaky_relu", "leaky_relu_", "prelu", "glu",
           "gelu", "logsigmoid", "hardshrink", "tanhshrink", "softsign", "softplus", "softmin", "softmax",
           "log_softmax", "tanh", "sigmoid", "hardsigmoid", "silu", "mish", "hardswish", "hardtanh", "hardtanh_",
           "threshold", "threshold_", "softshrink", "rrelu", "rrelu_", "selu_", "celu_"]


# The in-place method of each out-of-place function, made once (making it took 4-5 us of each
# nn.ReLU(inplace=True) call).
_inplace_method = functools.cache(inplace)


def _maybe_inplace(fn, input: Tensor, inplace: bool, *args, name: str | None = None):
    """fn(input, *args), written into `input` when `inplace` (functionalized on traced tensors); `name`: the
    in-place op's, where fnx/ops/inplace.py knows it."""
    if inplace:
        return _inplace_method(fn, name)(input, *args)
    return fn(input, *args)


def _relu(x: Tensor) -> Tensor:
    return ew.relu(x)


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """max(x, 0), elementwise."""
    return _maybe_inplace(_relu, input, inplace, name="relu_")


def relu_(input: Tensor) -> Tensor:
    """`relu` written into `input` in place."""
    return relu(input, inplace=True)


def _hardtanh(x: Tensor, min_val: float, max_val: float) -> Tensor:
    return ew.clamp(x, min_val, max_val)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    """x clamped to [min_val, max_val]."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return _maybe_inplace(_hardtanh, input, inplace, min_val, max_val)


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """`hardtanh` written into `input` in place."""
    return hardtanh(input, min_val, max_val, inplace=True)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """x clamped to [0, 6]."""
    return hardtanh(input, 0.0, 6.0, inplace)


def _elu(x: Tensor, alpha: float, scale: float = 1.0, input_scale: float = 1.0) -> Tensor:
    # expm1 of the clamped input: the branch where() discards must not overflow (inf * 0 gradient = nan)
    neg = ew.expm1(ew.clamp(x, max=0.0) * input_scale) * alpha
    out = ew.where(x > 0, x, neg)
    return out * scale if scale != 1.0 else out


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """x where x > 0, else alpha * (exp(x) - 1)."""
    return _maybe_inplace(_elu, input, inplace, alpha)


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """`elu` written into `input` in place."""
    return elu(input, alpha, inplace=True)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """scale * elu(x, alpha) with the self-normalizing constants (alpha 1.6733, scale 1.0507)."""
    return _maybe_inplace(_elu, input, inplace, _SELU_ALPHA, _SELU_SCALE)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """x where x > 0, else alpha * (exp(x / alpha) - 1)."""
    return _maybe_inplace(_elu, input, inplace, alpha, 1.0, 1.0 / alpha)


def selu_(input: Tensor) -> Tensor:
    """`selu` written into `input` in place."""
    return selu(input, inplace=True)


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """`celu` written into `input` in place."""
    return celu(input, alpha, inplace=True)


def _leaky_relu(x: Tensor, negative_slope: float) -> Tensor:
    """x times 1 where x > 0, else times negative_slope: the same values as where(x > 0, x, x * slope), and a
    backward of one multiply where the select's took four passes (its two masked gradients, the slope's product,
    their sum)."""
    return x * ew.where(x > 0, 1.0, x.new_full((), negative_slope))


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """x where x > 0, else negative_slope * x."""
    return _maybe_inplace(_leaky_relu, input, inplace, negative_slope)


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """`leaky_relu` written into `input` in place."""
    return leaky_relu(input, negative_slope, inplace=True)


@autocast_op("prelu")
def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """max(0, x) + weight * min(0, x), with one weight per channel (dim 1) or a single shared one."""
    if weight.numel() != 1:
        channels = input.shape[1] if input.ndim >= 2 else input.shape[0]
        if weight.numel() != channels:
            raise RuntimeError(f"prelu: mismatch of parameter numbers and input channel size. Found parameter "
                               f"numbers = {weight.numel()} and channel size = {channels}.")
        shape = [1] * input.ndim
        shape[1 if input.ndim >= 2 else 0] = channels
        weight = weight.reshape(shape)
    return ew.where(input > 0, input, weight * input)


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """a * sigmoid(b), where a and b are the two halves of `input` along `dim`."""
    if input.ndim == 0 or input.shape[dim] % 2:
        raise RuntimeError(f"glu: Halving dimension must be even, but dimension {dim} is size "
                           f"{input.shape[dim] if input.ndim else 0}")
    a, b = chunk(input, 2, dim)
    return a * ew.sigmoid(b)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """x * Phi(x) (the Gaussian CDF), or its tanh approximation with approximate="tanh"."""
    if approximate not in ("none", "tanh"):
        raise RuntimeError(f"approximate argument must be either none or tanh, got {approximate!r}")
    return ew.gelu(input, approximate=approximate)


def logsigmoid(input: Tensor) -> Tensor:
    """log(sigmoid(x)), computed as -softplus(-x)."""
    return -ew.softplus(-input)


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x where |x| > lambd, else 0."""
    return ew.where(ew.abs(input) > lambd, input, 0.0)


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x - lambd where x > lambd, x + lambd where x < -lambd, else 0."""
    return ew.where(input > lambd, input - lambd, ew.where(input < -lambd, input + lambd, 0.0))


def tanhshrink(input: Tensor) -> Tensor:
    """x - tanh(x)."""
    return input - ew.tanh(input)


def softsign(input: Tensor) -> Tensor:
    """x / (1 + |x|)."""
    return input / (ew.abs(input) + 1.0)


@autocast_op("softplus")
def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold."""
    return ew.softplus(input, beta, threshold)


def tanh(input: Tensor) -> Tensor:
    """Hyperbolic tangent, elementwise (fnx.tanh)."""
    return ew.tanh(input)


def sigmoid(input: Tensor) -> Tensor:
    """1 / (1 + exp(-x)), elementwise (fnx.sigmoid)."""
    return ew.sigmoid(input)


def _hardsigmoid(x: Tensor) -> Tensor:
    return ew.clamp(x + 3.0, 0.0, 6.0) / 6.0


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """relu6(x + 3) / 6: a piecewise-linear sigmoid."""
    return _maybe_inplace(_hardsigmoid, input, inplace)


def _hardswish(x: Tensor) -> Tensor:
    return x * _hardsigmoid(x)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """x * relu6(x + 3) / 6."""
    return _maybe_inplace(_hardswish, input, inplace)


def _silu(x: Tensor) -> Tensor:
    return ew.silu(x)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """x * sigmoid(x) (swish)."""
    return _maybe_inplace(_silu, input, inplace)


def _mish(x: Tensor) -> Tensor:
    return x * ew.tanh(ew.softplus(x))


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """x * tanh(softplus(x))."""
    return _maybe_inplace(_mish, input, inplace)


def _threshold(x: Tensor, threshold: float, value: float) -> Tensor:
    return ew.where(x > threshold, x, value)


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """x where x > threshold, else `value`."""
    return _maybe_inplace(_threshold, input, inplace, threshold, value)


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    """`threshold` written into `input` in place."""
    return _maybe_inplace(_threshold, input, True, threshold, value)


def _rrelu(x: Tensor, lower: float, upper: float, training: bool, generator=None) -> Tensor:
    if not training:
        return _leaky_relu(x, (lower + upper) / 2)
    slope = rand(*x.shape, generator=generator, dtype=x.dtype, device=x.device) * (upper - lower) + lower
    return ew.where(x >= 0, x, x * slope)


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
          inplace: bool = False) -> Tensor:
    """Leaky ReLU with a random slope from U(lower, upper) per element in training, their mean in eval."""
    return _maybe_inplace(_rrelu, input, inplace, lower, upper, training)


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False) -> Tensor:
    """`rrelu` written into `input` in place."""
    return rrelu(input, lower, upper, training, True)


# ---------------------------------------------------------------- softmax family
def _softmax_dim(name: str, ndim: int) -> int:
    _warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X as "
          f"an argument.")
    return 0 if ndim in (0, 1, 3) else 1


def _eager_float(input: Tensor) -> bool:
    """Whether `input` is a concrete non-empty floating tensor of at least one dim outside any transform (the
    primitives' case)."""
    return not isinstance(input, Tracer) and not state.transforms_active and input.dtype.is_floating_point and \
        input.ndim > 0 and input.numel() > 0


def _shifted(input: Tensor, dim: int) -> Tensor:
    """input minus its max along `dim`, the max held constant (the result is shift-invariant, so the
    gradient is exact and no exp can overflow)."""
    return input - rd.amax(input, dim, keepdim=True).detach()


# Eagerly, log_softmax and softmax are one primitive each: numpy runs log_softmax in four passes over the input
# (a C loop in one or two, over the last dim of large float arrays: fnx/lowering/nn_kernels.py) and its backward
# g - exp(out) sum(g) likewise, where the composition (and its derivative through each of its six ops) takes
# more, each op with a tape node. Under a transform the composition runs, so compile fuses it and every
# transform applies its own rules to its ops; numpy's impls give the composition's bits.
log_softmax_p = Primitive("log_softmax", saves_inputs=False, saves_output=True)
log_softmax_backward_p = Primitive("log_softmax_backward")


@log_softmax_p.def_impl
def _log_softmax_impl(xp, x, *, dim):
    fast = nn_kernels.log_softmax(x, dim) if xp is np else None
    if fast is not None:
        return fast
    out = x - x.max(dim, keepdims=True)
    total = xp.exp(out).sum(dim, keepdims=True, dtype=x.dtype)
    out -= xp.log(total, out=total)
    return out


log_softmax_p.def_abstract(lambda x, *, dim: x)
log_softmax_p.def_vjp(lambda g, primals, out, *, dim: (log_softmax_backward_p.bind(g, out, dim=dim),))


@log_softmax_backward_p.def_impl
def _log_softmax_backward_impl(xp, g, out, *, dim):
    fast = nn_kernels.log_softmax_backward(g, out, dim) if xp is np else None
    if fast is not None:
        return fast
    dx = xp.exp(out)
    dx *= g.sum(dim, keepdims=True, dtype=g.dtype)
    return xp.subtract(g, dx, out=dx)


log_softmax_backward_p.def_abstract(lambda g, out, *, dim: g)


@log_softmax_backward_p.def_vjp
def _log_softmax_backward_vjp(ct, primals, dx, *, dim):
    g, out = primals
    p = ew.exp(out)
    return ct - rd.sum(ct * p, dim, keepdim=True), -(ct * p * rd.sum(g, dim, keepdim=True))


@autocast_op("log_softmax")
def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """log(softmax(input)) along `dim`, computed stably as x - max - log(sum(exp(x - max))).

    `_stacklevel` is accepted for PyTorch's signature; fnx's warnings always point at the caller's line."""
    if dim is None:
        dim = _softmax_dim("log_softmax", input.ndim)
    if dtype is not None:
        input = input.to(dtype)
    if _eager_float(input):
        return log_softmax_p.bind(input, dim=canonical_dim(dim, input.ndim, "log_softmax"))
    z = _shifted(input, dim)
    return z - ew.log(rd.sum(ew.exp(z), dim, keepdim=True))


softmax_p = Primitive("softmax", saves_inputs=False, saves_output=True)


@softmax_p.def_impl
def _softmax_impl(xp, x, *, dim):
    fast = nn_kernels.softmax(x, dim) if xp is np else None
    if fast is not None:
        return fast
    out = xp.exp(x - x.max(dim, keepdims=True))
    out /= out.sum(dim, keepdims=True, dtype=x.dtype)
    return out


softmax_p.def_abstract(lambda x, *, dim: x)
softmax_p.def_vjp(lambda g, primals, out, *, dim: (out * (g - rd.sum(g * out, dim, keepdim=True)),))


@autocast_op("softmax")
def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """exp(x) / sum(exp(x)) along `dim`, with the max subtracted first."""
    if dim is None:
        dim = _softmax_dim("softmax", input.ndim)
    if dtype is not None:
        input = input.to(dtype)
    if _eager_float(input):
        return softmax_p.bind(input, dim=canonical_dim(dim, input.ndim, "softmax"))
    e = ew.exp(_shifted(input, dim))
    return e / rd.sum(e, dim, keepdim=True)


@autocast_op("softmin")
def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """softmax(-x) along `dim`."""
    if dim is None:
        dim = _softmax_dim("softmin", input.ndim)
    if dtype is not None:
        input = input.to(dtype)
    return softmax(-input, dim)

