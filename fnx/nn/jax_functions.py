"""JAX's `jax.nn` functions as lowercase names of fnx.nn (`fnx.nn.relu`, `fnx.nn.softmax(x, axis=-1)`, ...),
with JAX's signatures and defaults where they differ from PyTorch's functional forms: `gelu` is the tanh
approximation unless approximate=False, `softmax` / `log_softmax` take `axis`, `one_hot` returns floats and
maps out-of-range indices to all-zero rows, `softplus` is log(1 + exp(x)) without PyTorch's threshold.

They are thin wrappers over fnx.nn.functional and the fnx ops, so every transform applies."""
from __future__ import annotations

import math

from ..dtypes import as_dtype, float32, get_default_dtype
from ..ops import elementwise as ew
from ..numpy.creation import asarray
from ..ops.creation import arange, stop_gradient
from ..ops.reduce import amax, logsumexp as _logsumexp, mean as _mean, reduce_dims, sum as _sum
from ..ops.shape import movedim
from ..tensor import Tensor
from . import functional_activation as act, functional_attention as _attention

__all__ = ["relu", "relu6", "gelu", "sigmoid", "log_sigmoid", "silu", "swish", "elu", "celu", "selu", "leaky_relu",
           "softplus", "soft_sign", "hard_tanh", "tanh", "glu", "softmax", "log_softmax", "logsumexp", "one_hot",
           "standardize", "hard_sigmoid", "hard_silu", "hard_swish", "mish", "squareplus", "dot_product_attention"]


def _t(x) -> Tensor:
    x = x if isinstance(x, Tensor) else asarray(x)
    return x if x.dtype.is_floating_point else x.to(get_default_dtype())


def relu(x) -> Tensor:
    """max(x, 0)."""
    return ew.relu(_t(x))


def relu6(x) -> Tensor:
    """min(max(x, 0), 6)."""
    return act.relu6(_t(x))


def gelu(x, approximate: bool = True) -> Tensor:
    """The Gaussian error linear unit; JAX's default is the tanh approximation (approximate=False: exact erf)."""
    return ew.gelu(_t(x), approximate="tanh" if approximate else "none")


def sigmoid(x) -> Tensor:
    """1 / (1 + exp(-x))."""
    return ew.sigmoid(_t(x))


def log_sigmoid(x) -> Tensor:
    """log(sigmoid(x)), computed stably."""
    return act.logsigmoid(_t(x))


def silu(x) -> Tensor:
    """x * sigmoid(x)."""
    return ew.silu(_t(x))


swish = silu


def hard_sigmoid(x) -> Tensor:
    """relu6(x + 3) / 6."""
    return act.hardsigmoid(_t(x))


def hard_silu(x) -> Tensor:
    """x * hard_sigmoid(x)."""
    return act.hardswish(_t(x))


hard_swish = hard_silu


def mish(x) -> Tensor:
    """x * tanh(softplus(x))."""
    return act.mish(_t(x))


def squareplus(x, b: float = 4) -> Tensor:
    """(x + sqrt(x^2 + b)) / 2, a smooth ReLU."""
    x = _t(x)
    return (x + ew.sqrt(x * x + b)) / 2


def dot_product_attention(query, key, value, bias=None, mask=None, *, scale: float | None = None,
                          is_causal: bool = False) -> Tensor:
    """softmax(q k^T * scale + bias, masked) v in JAX's layout: q, k, v are (batch, length, heads, head_dim),
    or without the batch axis; `bias` and `mask` broadcast to (batch, heads, queries, keys), `mask` True where
    a query may see a key. fnx's scaled_dot_product_attention computes it in PyTorch's layout."""
    q, k, v = (movedim(_t(t), -2, -3) for t in (query, key, value))
    additive = None if bias is None else _t(bias).to(q.dtype)   # bias and mask: (batch, heads, queries, keys)
    if mask is not None:
        base = asarray(0.0, dtype=q.dtype) if additive is None else additive
        additive = ew.where(asarray(mask), base, -math.inf)
    out = _attention.scaled_dot_product_attention(q, k, v, attn_mask=additive, is_causal=is_causal, scale=scale)
    return movedim(out, -3, -2)


def elu(x, alpha: float = 1.0) -> Tensor:
    """x for x > 0, alpha * (exp(x) - 1) otherwise."""
    return act.elu(_t(x), alpha)


def celu(x, alpha: float = 1.0) -> Tensor:
    """max(x, 0) + min(0, alpha * (exp(x / alpha) - 1))."""
    return act.celu(_t(x), alpha)


def selu(x) -> Tensor:
    """The scaled ELU of self-normalising networks."""
    return act.selu(_t(x))


def leaky_relu(x, negative_slope: float = 0.01) -> Tensor:
    """x for x >= 0, negative_slope * x otherwise."""
    return act.leaky_relu(_t(x), negative_slope)


def softplus(x) -> Tensor:
    """log(1 + exp(x)) = logaddexp(x, 0), without PyTorch's linear threshold."""
    return ew.logaddexp(_t(x), 0.0)


def soft_sign(x) -> Tensor:
    """x / (1 + |x|)."""
    return act.softsign(_t(x))


def hard_tanh(x) -> Tensor:
    """x clipped to [-1, 1]."""
    return act.hardtanh(_t(x))


def tanh(x) -> Tensor:
    """The hyperbolic tangent."""
    return ew.tanh(_t(x))


def glu(x, axis: int = -1) -> Tensor:
    """The gated linear unit: first half of `axis` times the sigmoid of the second half."""
    return act.glu(_t(x), axis)


def softmax(x, axis=-1, where=None) -> Tensor:
    """exp(x) normalised over `axis` (an int, a tuple, or None for all axes); `where` masks entries out."""
    x = _t(x)
    axes = reduce_dims(axis, x.ndim, "softmax")
    masked = x if where is None else ew.where(where, x, -math.inf)
    m = stop_gradient(amax(masked, axes, keepdim=True))
    e = ew.exp(masked - ew.where(ew.isfinite(m), m, 0.0))
    return e / _sum(e, axes, keepdim=True)


def log_softmax(x, axis=-1, where=None) -> Tensor:
    """x - logsumexp(x) over `axis`; `where` masks entries out (they come out as -inf)."""
    x = _t(x)
    axes = reduce_dims(axis, x.ndim, "log_softmax")
    masked = x if where is None else ew.where(where, x, -math.inf)
    return masked - _logsumexp(masked, axes, keepdim=True)


def logsumexp(a, axis=None, keepdims: bool = False) -> Tensor:
    """log(sum(exp(a))) over `axis` (all axes by default), computed stably."""
    return _logsumexp(_t(a), axis, keepdim=keepdims)


def one_hot(x, num_classes: int, *, dtype=float32, axis: int = -1) -> Tensor:
    """A new axis of length `num_classes` (at `axis`) holding 1 at each index of `x`, 0 elsewhere, in `dtype`
    (float32 by default, as in JAX); an index outside [0, num_classes) gives an all-zero row."""
    x = x if isinstance(x, Tensor) else asarray(x)
    hot = ew.eq(x.unsqueeze(-1), arange(int(num_classes), device=x.device)).to(as_dtype(dtype))
    return hot if axis in (-1, hot.ndim - 1) else movedim(hot, -1, axis)


def standardize(x, axis=-1, mean=None, variance=None, epsilon: float = 1e-5, where=None) -> Tensor:
    """(x - mean) / sqrt(variance + epsilon) over `axis`; the mean and variance are computed when not given."""
    x = _t(x)
    axes = reduce_dims(axis, x.ndim, "standardize")
    if where is not None:
        raise NotImplementedError("nn.standardize: where= is not supported in fnx; mask the input instead")
    mu = _mean(x, axes, keepdim=True) if mean is None else mean
    var = _mean(ew.square(x - mu), axes, keepdim=True) if variance is None else variance
    return (x - mu) * ew.rsqrt(var + epsilon)
