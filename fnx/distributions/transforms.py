"""Invertible maps between spaces of values (PyTorch's torch.distributions.transforms), for
TransformedDistribution: each has `__call__` (x -> y), `inv` (its inverse, itself a Transform),
`log_abs_det_jacobian(x, y)` and the constraints of its `domain` and `codomain`.

Every transform here acts elementwise (event_dim 0) except where it says otherwise; `cache_size` is accepted as
PyTorch's (0 or 1) and the last (x, y) pair is reused when it is 1, so that a tanh-squashed sample's log_prob
does not invert the tanh (SAC's policies rely on that).
"""
from __future__ import annotations

import math

from ..dtypes import finfo
from ..nn.functional import softplus
from ..ops.elementwise import atanh, exp, log, sigmoid, tanh
from ..tensor import Tensor
from . import constraints

__all__ = ["Transform", "ComposeTransform", "ExpTransform", "AffineTransform", "SigmoidTransform", "TanhTransform",
           "SoftplusTransform", "PowerTransform", "AbsTransform", "identity_transform"]


class Transform:
    """An invertible, differentiable map with a computable log |det Jacobian| (see the module docstring)."""

    bijective = False
    domain = constraints.real
    codomain = constraints.real
    event_dim = 0
    sign = 1

    def __init__(self, cache_size: int = 0):
        if cache_size not in (0, 1):
            raise ValueError(f"cache_size must be 0 or 1, got {cache_size}")
        self._cache_size = cache_size
        self._cached = (None, None)

    @property
    def inv(self) -> "Transform":
        """The inverse transform (y -> x)."""
        return _InverseTransform(self)

    def __call__(self, x: Tensor) -> Tensor:
        if self._cache_size and x is self._cached[0]:
            return self._cached[1]
        y = self._call(x)
        if self._cache_size:
            self._cached = (x, y)
        return y

    def _inv_call(self, y: Tensor) -> Tensor:
        if self._cache_size and y is self._cached[1]:
            return self._cached[0]
        x = self._inverse(y)
        if self._cache_size:
            self._cached = (x, y)
        return x

    def _call(self, x: Tensor) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not define its forward map")

    def _inverse(self, y: Tensor) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} is not invertible")

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        """log |dy/dx| at x (y = self(x))."""
        raise NotImplementedError(f"{type(self).__name__} does not define log_abs_det_jacobian")

    def forward_shape(self, shape):
        return shape

    def inverse_shape(self, shape):
        return shape

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class _InverseTransform(Transform):
    """The inverse of a transform: forward and inverse swapped, the Jacobian's log negated."""

    def __init__(self, transform: Transform):
        super().__init__(transform._cache_size)
        self._inv = transform
        self.domain, self.codomain = transform.codomain, transform.domain
        self.bijective, self.sign, self.event_dim = transform.bijective, transform.sign, transform.event_dim

    @property
    def inv(self) -> Transform:
        return self._inv

    def __call__(self, x: Tensor) -> Tensor:
        return self._inv._inv_call(x)

    def _inv_call(self, y: Tensor) -> Tensor:
        return self._inv(y)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return -self._inv.log_abs_det_jacobian(y, x)


class ComposeTransform(Transform):
    """The transforms applied in order: parts[0] first."""

    def __init__(self, parts: list, cache_size: int = 0):
        super().__init__(cache_size)
        self.parts = list(parts)
        self.bijective = all(p.bijective for p in self.parts)
        self.event_dim = max((p.event_dim for p in self.parts), default=0)
        if self.parts:
            self.domain, self.codomain = self.parts[0].domain, self.parts[-1].codomain
        sign = 1
        for p in self.parts:
            sign *= p.sign
        self.sign = sign

    def _call(self, x: Tensor) -> Tensor:
        for p in self.parts:
            x = p(x)
        return x

    def _inverse(self, y: Tensor) -> Tensor:
        for p in reversed(self.parts):
            y = p.inv(y)
        return y

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        if not self.parts:
            return x.new_zeros(tuple(x.shape))
        total = 0.0
        for p in self.parts:
            y_p = p(x)
            term = p.log_abs_det_jacobian(x, y_p)
            total = total + _sum_rightmost(term, self.event_dim - p.event_dim)
            x = y_p
        return total

    def __repr__(self) -> str:
        return f"ComposeTransform({', '.join(map(repr, self.parts))})"


identity_transform = ComposeTransform([])


def _sum_rightmost(value, dims: int):
    """`value` summed over its `dims` rightmost dims (a number stays as it is)."""
    if dims <= 0 or not isinstance(value, Tensor):
        return value
    return value.reshape(tuple(value.shape[:value.ndim - dims]) + (-1,)).sum(-1)


class ExpTransform(Transform):
    """y = exp(x)."""

    bijective = True
    codomain = constraints.positive

    def _call(self, x):
        return exp(x)

    def _inverse(self, y):
        return log(y)

    def log_abs_det_jacobian(self, x, y):
        return x


class AffineTransform(Transform):
    """y = loc + scale * x (over `event_dim` rightmost dims for the Jacobian)."""

    bijective = True

    def __init__(self, loc, scale, event_dim: int = 0, cache_size: int = 0):
        super().__init__(cache_size)
        self.loc, self.scale, self.event_dim = loc, scale, event_dim

    @property
    def sign(self):
        return self.scale.sign() if isinstance(self.scale, Tensor) else (1 if self.scale > 0 else -1)

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        scale = self.scale
        log_scale = scale.abs().log() if isinstance(scale, Tensor) else math.log(abs(scale))
        return _sum_rightmost(x.new_zeros(tuple(x.shape)) + log_scale, self.event_dim)

    def __repr__(self) -> str:
        return f"AffineTransform(loc={self.loc}, scale={self.scale})"


class SigmoidTransform(Transform):
    """y = 1 / (1 + exp(-x))."""

    bijective = True
    codomain = constraints.unit_interval

    def _call(self, x):
        return sigmoid(x)

    def _inverse(self, y):
        eps = finfo(y.dtype).tiny
        y = y.clamp(min=eps, max=1 - eps)
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x, y):
        return -softplus(-x) - softplus(x)


class TanhTransform(Transform):
    """y = tanh(x); its log |dy/dx| is 2 (log 2 - x - softplus(-2x)), stable for large |x|."""

    bijective = True
    codomain = constraints.interval(-1.0, 1.0)

    def _call(self, x):
        return tanh(x)

    def _inverse(self, y):
        return atanh(y)

    def log_abs_det_jacobian(self, x, y):
        return 2.0 * (math.log(2.0) - x - softplus(-2.0 * x))


class SoftplusTransform(Transform):
    """y = log(1 + exp(x))."""

    bijective = True
    codomain = constraints.positive

    def _call(self, x):
        return softplus(x)

    def _inverse(self, y):
        return (-(-y).expm1()).log() + y   # log(exp(y) - 1), stable

    def log_abs_det_jacobian(self, x, y):
        return -softplus(-x)


class PowerTransform(Transform):
    """y = x ** exponent, on positive x."""

    bijective = True
    domain = constraints.positive
    codomain = constraints.positive

    def __init__(self, exponent, cache_size: int = 0):
        super().__init__(cache_size)
        self.exponent = exponent

    def _call(self, x):
        return x.pow(self.exponent)

    def _inverse(self, y):
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x, y):
        return (self.exponent * y / x).abs().log()


class AbsTransform(Transform):
    """y = |x| (not bijective: its inverse gives the positive root)."""

    codomain = constraints.nonnegative

    def _call(self, x):
        return x.abs()

    def _inverse(self, y):
        return y
