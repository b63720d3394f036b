"""JAX-style parameter initializers (`jax.nn.initializers`): functions `init(key, shape, dtype) -> Tensor`.

fnx.nn.init fills existing tensors in place from the global generator, as PyTorch does; these instead draw new
tensors from an explicit `fnx.random` key, so they run under every transform (stax's layers use them). The
streams are fnx's own: the distributions match JAX's, the values do not.
"""
from __future__ import annotations

import math
from typing import Callable

from .. import dtypes as _dt
from .. import random
from ..errors import FnxValueError
from ..ops import creation, elementwise as ew
from ..tensor import Tensor

__all__ = ["zeros", "ones", "constant", "normal", "uniform", "truncated_normal", "variance_scaling", "glorot_normal",
           "glorot_uniform", "xavier_normal", "xavier_uniform", "he_normal", "he_uniform", "kaiming_normal",
           "kaiming_uniform", "lecun_normal", "lecun_uniform"]

Initializer = Callable[..., Tensor]
_REDRAWS = 8  # truncated normal: after 8 redraws a sample is outside [-2, 2] with probability 0.0455**9 ~ 1e-12


def _float(dtype):
    return _dt.get_default_dtype() if dtype is None else dtype


def zeros(key: Tensor, shape, dtype=None) -> Tensor:
    """All zeros (the key is unused; it is there for the common signature)."""
    return creation.zeros(tuple(shape), dtype=_float(dtype))


def ones(key: Tensor, shape, dtype=None) -> Tensor:
    """All ones."""
    return creation.ones(tuple(shape), dtype=_float(dtype))


def constant(value: float, dtype=None) -> Initializer:
    """An initializer filling with `value`."""
    def init(key, shape, dtype=dtype):
        return creation.full(tuple(shape), value, dtype=_float(dtype))
    return init


def normal(stddev: float = 1e-2, dtype=None) -> Initializer:
    """An initializer drawing from N(0, stddev^2)."""
    def init(key, shape, dtype=dtype):
        return random.normal(key, tuple(shape), _float(dtype)) * stddev
    return init


def uniform(scale: float = 1e-2, dtype=None) -> Initializer:
    """An initializer drawing from U[0, scale)."""
    def init(key, shape, dtype=dtype):
        return random.uniform(key, tuple(shape), _float(dtype)) * scale
    return init


def truncated_normal(stddev: float = 1e-2, dtype=None, lower: float = -2.0, upper: float = 2.0) -> Initializer:
    """An initializer drawing from N(0, 1) restricted to [lower, upper], times `stddev`."""
    def init(key, shape, dtype=dtype):
        return _truncated_standard_normal(key, tuple(shape), _float(dtype), lower, upper) * stddev
    return init


def _truncated_standard_normal(key: Tensor, shape: tuple, dtype, lower: float, upper: float) -> Tensor:
    """N(0, 1) samples in [lower, upper]: out-of-range samples are redrawn a fixed number of times (no
    data-dependent control flow, so it traces), then clipped."""
    keys = random.split(key, _REDRAWS + 1)
    z = random.normal(keys[0], shape, dtype)
    for k in keys[1:]:
        z = ew.where((z < lower) | (z > upper), random.normal(k, shape, dtype), z)
    return ew.clamp(z, lower, upper)


def _fans(shape: tuple, in_axis: int, out_axis: int) -> tuple[float, float]:
    if len(shape) < 2:
        raise FnxValueError(f"variance_scaling: needs a shape with at least 2 dims (input and output), got {shape}")
    receptive = math.prod(shape) / (shape[in_axis] * shape[out_axis])
    return shape[in_axis] * receptive, shape[out_axis] * receptive


def variance_scaling(scale: float, mode: str, distribution: str, in_axis: int = -2, out_axis: int = -1,
                     dtype=None) -> Initializer:
    """An initializer with variance `scale / n`, n the fan in, fan out or their mean (`mode`: "fan_in", "fan_out",
    "fan_avg"), drawn from `distribution`: "truncated_normal", "normal" or "uniform" (as JAX's)."""
    if mode not in ("fan_in", "fan_out", "fan_avg"):
        raise FnxValueError(f"variance_scaling: mode must be 'fan_in', 'fan_out' or 'fan_avg', got {mode!r}")
    if distribution not in ("truncated_normal", "normal", "uniform"):
        raise FnxValueError(f"variance_scaling: distribution must be 'truncated_normal', 'normal' or 'uniform', "
                            f"got {distribution!r}")

    def init(key, shape, dtype=dtype):
        shape, dtype = tuple(shape), _float(dtype)
        fan_in, fan_out = _fans(shape, in_axis, out_axis)
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2}[mode]
        variance = scale / n
        if distribution == "truncated_normal":  # the stddev of N(0, 1) truncated to [-2, 2] is 0.8796...
            return _truncated_standard_normal(key, shape, dtype, -2.0, 2.0) * (math.sqrt(variance) / .87962566103423978)
        if distribution == "normal":
            return random.normal(key, shape, dtype) * math.sqrt(variance)
        limit = math.sqrt(3 * variance)
        return random.uniform(key, shape, dtype, -limit, limit)
    return init


def glorot_normal(in_axis: int = -2, out_axis: int = -1, dtype=None) -> Initializer:
    """Glorot (Xavier) normal: variance 1 / fan_avg, truncated normal."""
    return variance_scaling(1.0, "fan_avg", "truncated_normal", in_axis, out_axis, dtype)


def glorot_uniform(in_axis: int = -2, out_axis: int = -1, dtype=None) -> Initializer:
    """Glorot (Xavier) uniform: variance 1 / fan_avg, uniform."""
    return variance_scaling(1.0, "fan_avg", "uniform", in_axis, out_axis, dtype)


def he_normal(in_axis: int = -2, out_axis: int = -1, dtype=None) -> Initializer:
    """He (Kaiming) normal: variance 2 / fan_in, truncated normal."""
    return variance_scaling(2.0, "fan_in", "truncated_normal", in_axis, out_axis, dtype)


def he_uniform(in_axis: int = -2, out_axis: int = -1, dtype=None) -> Initializer:
    """He (Kaiming) uniform: variance 2 / fan_in, uniform."""
    return variance_scaling(2.0, "fan_in", "uniform", in_axis, out_axis, dtype)


def lecun_normal(in_axis: int = -2, out_axis: int = -1, dtype=None) -> Initializer:
    """LeCun normal: variance 1 / fan_in, truncated normal."""
    return variance_scaling(1.0, "fan_in", "truncated_normal", in_axis, out_axis, dtype)


def lecun_uniform(in_axis: int = -2, out_axis: int = -1, dtype=None) -> Initializer:
    """LeCun uniform: variance 1 / fan_in, uniform."""
    return variance_scaling(1.0, "fan_in", "uniform", in_axis, out_axis, dtype)


xavier_normal, xavier_uniform = glorot_normal, glorot_uniform
kaiming_normal, kaiming_uniform = he_normal, he_uniform
