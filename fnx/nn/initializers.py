"""jax.nn.initializers: functions `init(key, shape, dtype=float32)` that return a new array drawn from a key.

`glorot_*`, `lecun_*` and `he_*` are `variance_scaling` with JAX's scales, fan modes and distributions (the
`_normal` ones draw from a normal truncated to two standard deviations, rescaled to the target variance, as
JAX does). Fans follow JAX: the last axis is the output, the one before it the input, any others form the
receptive field.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

from ..core import FnxValueError
from ..dtypes import as_dtype, float32
from ..ops import elementwise as ew
from ..ops.special import erfinv
from ..ops.creation import full, ones as _ones, zeros as _zeros
from ..random import normal as _normal, uniform as _uniform
from ..tensor import Tensor

__all__ = ["zeros", "ones", "constant", "normal", "uniform", "truncated_normal", "variance_scaling",
           "glorot_normal", "glorot_uniform", "xavier_normal", "xavier_uniform", "lecun_normal", "lecun_uniform",
           "he_normal", "he_uniform", "kaiming_normal", "kaiming_uniform"]

Initializer = Callable[..., Tensor]


def _shape(shape) -> tuple:
    return (int(shape),) if isinstance(shape, int) else tuple(int(n) for n in shape)


def zeros(key, shape, dtype=float32) -> Tensor:
    """An array of zeros (the key is unused)."""
    return _zeros(_shape(shape), dtype=as_dtype(dtype))


def ones(key, shape, dtype=float32) -> Tensor:
    """An array of ones (the key is unused)."""
    return _ones(_shape(shape), dtype=as_dtype(dtype))


def constant(value, dtype=float32) -> Initializer:
    """An initializer filling with `value`."""
    def init(key, shape, dtype=dtype) -> Tensor:
        return full(_shape(shape), value, dtype=as_dtype(dtype))
    return init


def normal(stddev: float = 1e-2, dtype=float32) -> Initializer:
    """An initializer drawing from N(0, stddev²)."""
    def init(key, shape, dtype=dtype) -> Tensor:
        return _normal(key, _shape(shape), as_dtype(dtype)) * stddev
    return init


def uniform(scale: float = 1e-2, dtype=float32) -> Initializer:
    """An initializer drawing uniformly from [0, scale)."""
    def init(key, shape, dtype=dtype) -> Tensor:
        return _uniform(key, _shape(shape), as_dtype(dtype)) * scale
    return init


def _truncated(key, shape: tuple, dtype, lower: float, upper: float) -> Tensor:
    """Standard normal samples restricted to [lower, upper], by the inverse CDF of a uniform draw in between."""
    lo, hi = (0.5 * math.erfc(-v / math.sqrt(2)) for v in (lower, upper))
    u = _uniform(key, shape, dtype, minval=lo, maxval=hi)
    return ew.clamp(math.sqrt(2.0) * erfinv(2.0 * u - 1.0), lower, upper)


def truncated_normal(stddev: float = 1e-2, dtype=float32, lower: float = -2.0, upper: float = 2.0) -> Initializer:
    """An initializer drawing from N(0, 1) truncated to [lower, upper], times `stddev`."""
    def init(key, shape, dtype=dtype) -> Tensor:
        return _truncated(key, _shape(shape), as_dtype(dtype), lower, upper) * stddev
    return init


def _axes(ax, ndim: int) -> list:
    return [a % ndim for a in ((ax,) if isinstance(ax, int) else ax)]


def _fans(shape: tuple, in_axis, out_axis, batch_axis) -> tuple[float, float]:
    if len(shape) < 1:
        return 1.0, 1.0
    if len(shape) == 1:
        return float(shape[0]), float(shape[0])
    n = len(shape)
    size = lambda axes: math.prod(shape[a] for a in _axes(axes, n))  # noqa: E731
    receptive = math.prod(shape) / size(in_axis) / size(out_axis) / size(batch_axis)
    return size(in_axis) * receptive, size(out_axis) * receptive


# the standard deviation of N(0, 1) truncated to [-2, 2]: dividing by it restores the requested variance
_TRUNCATED_STD = 0.87962566103423978


def variance_scaling(scale: float, mode: str, distribution: str, in_axis: int | Sequence[int] = -2,
                     out_axis: int | Sequence[int] = -1, batch_axis: Sequence[int] = (),
                     dtype=float32) -> Initializer:
    """An initializer with variance scale / fan, fan by `mode` ('fan_in', 'fan_out', 'fan_avg', 'fan_geo_avg'),
    drawn from `distribution` ('truncated_normal', 'normal' or 'uniform')."""
    if mode not in ("fan_in", "fan_out", "fan_avg", "fan_geo_avg"):
        raise FnxValueError(f"variance_scaling: unknown mode {mode!r}; expected 'fan_in', 'fan_out', 'fan_avg' or "
                            f"'fan_geo_avg'")
    if distribution not in ("truncated_normal", "normal", "uniform"):
        raise FnxValueError(f"variance_scaling: unknown distribution {distribution!r}; expected 'truncated_normal', "
                            f"'normal' or 'uniform'")

    def init(key, shape, dtype=dtype) -> Tensor:
        shape, dt = _shape(shape), as_dtype(dtype)
        fan_in, fan_out = _fans(shape, in_axis, out_axis, batch_axis)
        fan = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2,
               "fan_geo_avg": math.sqrt(fan_in * fan_out)}[mode]
        variance = scale / fan
        if distribution == "truncated_normal":
            return _truncated(key, shape, dt, -2.0, 2.0) * (math.sqrt(variance) / _TRUNCATED_STD)
        if distribution == "normal":
            return _normal(key, shape, dt) * math.sqrt(variance)
        return _uniform(key, shape, dt, minval=-1.0, maxval=1.0) * math.sqrt(3 * variance)

    return init


def glorot_normal(in_axis=-2, out_axis=-1, batch_axis=(), dtype=float32) -> Initializer:
    """Variance 1 / fan_avg, truncated normal (Glorot & Bengio)."""
    return variance_scaling(1.0, "fan_avg", "truncated_normal", in_axis, out_axis, batch_axis, dtype)


def glorot_uniform(in_axis=-2, out_axis=-1, batch_axis=(), dtype=float32) -> Initializer:
    """Variance 1 / fan_avg, uniform (Glorot & Bengio)."""
    return variance_scaling(1.0, "fan_avg", "uniform", in_axis, out_axis, batch_axis, dtype)


def lecun_normal(in_axis=-2, out_axis=-1, batch_axis=(), dtype=float32) -> Initializer:
    """Variance 1 / fan_in, truncated normal (LeCun)."""
    return variance_scaling(1.0, "fan_in", "truncated_normal", in_axis, out_axis, batch_axis, dtype)


def lecun_uniform(in_axis=-2, out_axis=-1, batch_axis=(), dtype=float32) -> Initializer:
    """Variance 1 / fan_in, uniform (LeCun)."""
    return variance_scaling(1.0, "fan_in", "uniform", in_axis, out_axis, batch_axis, dtype)


def he_normal(in_axis=-2, out_axis=-1, batch_axis=(), dtype=float32) -> Initializer:
    """Variance 2 / fan_in, truncated normal (He et al.)."""
    return variance_scaling(2.0, "fan_in", "truncated_normal", in_axis, out_axis, batch_axis, dtype)


def he_uniform(in_axis=-2, out_axis=-1, batch_axis=(), dtype=float32) -> Initializer:
    """Variance 2 / fan_in, uniform (He et al.)."""
    return variance_scaling(2.0, "fan_in", "uniform", in_axis, out_axis, batch_axis, dtype)


xavier_normal, xavier_uniform = glorot_normal, glorot_uniform
kaiming_normal, kaiming_uniform = he_normal, he_uniform
