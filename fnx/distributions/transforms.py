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
from ..nn.functional import logsigmoid, softplus
from ..ops.arrange import pad
from ..ops.creation import arange, eye
from ..ops.decompositions import cholesky
from ..ops.elementwise import atanh, exp, log, sigmoid, tanh
from ..ops.joins import cat, stack
from ..ops.shape import diag_embed
from ..tensor import Size, Tensor
from . import constraints
from .utils import tril_matrix_to_vec, vec_to_tril_matrix

__all__ = ["Transform", "ComposeTransform", "ExpTransform", "AffineTransform", "SigmoidTransform", "TanhTransform",
           "SoftplusTransform", "PowerTransform", "AbsTransform", "identity_transform", "IndependentTransform",
           "ReshapeTransform", "SoftmaxTransform", "StickBreakingTransform", "LowerCholeskyTransform",
           "PositiveDefiniteTransform", "CorrCholeskyTransform", "CatTransform", "StackTransform",
           "CumulativeDistributionTransform"]


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

    @property
    def in_event_dim(self) -> int:
        """The event dims of the domain: the rightmost dims of x that the map couples (PyTorch's
        `domain.event_dim`); differs from `out_event_dim` only where the map changes the rank."""
        return self.event_dim

    @property
    def out_event_dim(self) -> int:
        """The event dims of the codomain (PyTorch's `codomain.event_dim`)."""
        return self.event_dim

    def with_cache(self, cache_size: int = 1) -> "Transform":
        """This transform with the given cache size (itself when it already has it)."""
        if self._cache_size == cache_size:
            return self
        if type(self).__init__ is not Transform.__init__:
            raise NotImplementedError(f"{type(self).__name__}.with_cache is not implemented")
        return type(self)(cache_size=cache_size)

    def forward_shape(self, shape):
        """The shape of y for an x of `shape`."""
        return shape

    def inverse_shape(self, shape):
        """The shape of x for a y of `shape`."""
        return shape

    def __eq__(self, other) -> bool:
        return self is other if type(self).__init__ is not Transform.__init__ else type(other) is type(self)

    def __hash__(self) -> int:
        return id(self) if type(self).__init__ is not Transform.__init__ else hash(type(self))

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

    def with_cache(self, cache_size: int = 1) -> Transform:
        return self if self._cache_size == cache_size else self._inv.with_cache(cache_size).inv

    in_event_dim = property(lambda self: self._inv.out_event_dim)
    out_event_dim = property(lambda self: self._inv.in_event_dim)

    def forward_shape(self, shape):
        return self._inv.inverse_shape(shape)

    def inverse_shape(self, shape):
        return self._inv.forward_shape(shape)

    def __eq__(self, other) -> bool:
        return isinstance(other, _InverseTransform) and self._inv == other._inv

    def __hash__(self) -> int:
        return hash((_InverseTransform, self._inv))

    def __repr__(self) -> str:
        return f"{self._inv!r}.inv"

    def __call__(self, x: Tensor) -> Tensor:
        return self._inv._inv_call(x)

    def _inv_call(self, y: Tensor) -> Tensor:
        return self._inv(y)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return -self._inv.log_abs_det_jacobian(y, x)


class ComposeTransform(Transform):
    """The transforms applied in order: parts[0] first."""

    def __init__(self, parts: list, cache_size: int = 0):
        if cache_size:
            parts = [p.with_cache(cache_size) for p in parts]
        super().__init__(cache_size)
        self.parts = list(parts)
        self.bijective = all(p.bijective for p in self.parts)
        self.event_dim = max((p.event_dim for p in self.parts), default=0)

    @property
    def sign(self):
        """The product of the parts' signs: -1 where the composition decreases."""
        sign = 1
        for p in self.parts:
            sign = sign * p.sign
        return sign

    def with_cache(self, cache_size: int = 1) -> "ComposeTransform":
        return self if self._cache_size == cache_size else ComposeTransform(self.parts, cache_size)

    @property
    def domain(self) -> constraints.Constraint:
        """The first part's domain, over all the rightmost dims some part couples."""
        return _widened(self.parts[0].domain, self.in_event_dim) if self.parts else constraints.real

    @property
    def codomain(self) -> constraints.Constraint:
        return _widened(self.parts[-1].codomain, self.out_event_dim) if self.parts else constraints.real

    @property
    def in_event_dim(self) -> int:
        """The largest number of rightmost dims of x that some part couples (PyTorch's domain.event_dim)."""
        if not self.parts:
            return 0
        event_dim = self.parts[-1].out_event_dim
        for p in reversed(self.parts):
            event_dim = max(event_dim + p.in_event_dim - p.out_event_dim, p.in_event_dim)
        return event_dim

    @property
    def out_event_dim(self) -> int:
        if not self.parts:
            return 0
        event_dim = self.parts[0].in_event_dim
        for p in self.parts:
            event_dim = max(event_dim + p.out_event_dim - p.in_event_dim, p.out_event_dim)
        return event_dim

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
        event_dim = self.in_event_dim
        for i, p in enumerate(self.parts):
            y_p = y if i == len(self.parts) - 1 else p(x)
            total = total + _sum_rightmost(p.log_abs_det_jacobian(x, y_p), event_dim - p.in_event_dim)
            event_dim += p.out_event_dim - p.in_event_dim
            x = y_p
        return total

    def forward_shape(self, shape):
        for p in self.parts:
            shape = p.forward_shape(shape)
        return shape

    def inverse_shape(self, shape):
        for p in reversed(self.parts):
            shape = p.inverse_shape(shape)
        return shape

    def __eq__(self, other) -> bool:
        return isinstance(other, ComposeTransform) and self.parts == other.parts

    def __hash__(self) -> int:
        return hash((ComposeTransform, tuple(self.parts)))

    def __repr__(self) -> str:
        return f"ComposeTransform({', '.join(map(repr, self.parts))})"


def _widened(constraint: constraints.Constraint, event_dim: int) -> constraints.Constraint:
    """`constraint` over `event_dim` rightmost dims (independent over the extra ones)."""
    extra = event_dim - constraint.event_dim
    return constraints.independent(constraint, extra) if extra > 0 else constraint


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

    def with_cache(self, cache_size: int = 1) -> AffineTransform:
        if self._cache_size == cache_size:
            return self
        return AffineTransform(self.loc, self.scale, self.event_dim, cache_size)

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

    def with_cache(self, cache_size: int = 1) -> PowerTransform:
        return self if self._cache_size == cache_size else PowerTransform(self.exponent, cache_size)

    @property
    def sign(self):
        """+1 where the power increases (exponent > 0), -1 where it decreases."""
        e = self.exponent
        return e.sign() if isinstance(e, Tensor) else (1 if e > 0 else -1)

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


class IndependentTransform(Transform):
    """`base_transform` with its `reinterpreted_batch_ndims` rightmost batch dims taken as event dims: the log
    |det Jacobian| is summed over them."""

    def __init__(self, base_transform: Transform, reinterpreted_batch_ndims: int, cache_size: int = 0):
        super().__init__(cache_size)
        self.base_transform = base_transform.with_cache(cache_size)
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    def with_cache(self, cache_size: int = 1) -> IndependentTransform:
        if self._cache_size == cache_size:
            return self
        return IndependentTransform(self.base_transform, self.reinterpreted_batch_ndims, cache_size)

    domain = property(lambda self: constraints.independent(self.base_transform.domain,
                                                           self.reinterpreted_batch_ndims))
    codomain = property(lambda self: constraints.independent(self.base_transform.codomain,
                                                             self.reinterpreted_batch_ndims))
    bijective = property(lambda self: self.base_transform.bijective)
    sign = property(lambda self: self.base_transform.sign)
    event_dim = property(lambda self: self.base_transform.event_dim + self.reinterpreted_batch_ndims)
    in_event_dim = property(lambda self: self.base_transform.in_event_dim + self.reinterpreted_batch_ndims)
    out_event_dim = property(lambda self: self.base_transform.out_event_dim + self.reinterpreted_batch_ndims)

    def _call(self, x):
        if x.dim() < self.in_event_dim:
            raise ValueError("Too few dimensions on input")
        return self.base_transform(x)

    def _inverse(self, y):
        if y.dim() < self.out_event_dim:
            raise ValueError("Too few dimensions on input")
        return self.base_transform.inv(y)

    def log_abs_det_jacobian(self, x, y):
        return _sum_rightmost(self.base_transform.log_abs_det_jacobian(x, y), self.reinterpreted_batch_ndims)

    def forward_shape(self, shape):
        return self.base_transform.forward_shape(shape)

    def inverse_shape(self, shape):
        return self.base_transform.inverse_shape(shape)

    def __repr__(self) -> str:
        return f"IndependentTransform({self.base_transform!r}, {self.reinterpreted_batch_ndims})"


class ReshapeTransform(Transform):
    """The rightmost dims of shape `in_shape` reshaped to `out_shape` (same number of elements; Jacobian 1)."""

    bijective = True

    def __init__(self, in_shape, out_shape, cache_size: int = 0):
        self.in_shape, self.out_shape = Size(in_shape), Size(out_shape)
        if self.in_shape.numel() != self.out_shape.numel():
            raise ValueError("in_shape, out_shape have different numbers of elements")
        super().__init__(cache_size)

    def with_cache(self, cache_size: int = 1) -> ReshapeTransform:
        return self if self._cache_size == cache_size else ReshapeTransform(self.in_shape, self.out_shape, cache_size)

    domain = property(lambda self: constraints.independent(constraints.real, len(self.in_shape)))
    codomain = property(lambda self: constraints.independent(constraints.real, len(self.out_shape)))
    event_dim = property(lambda self: max(len(self.in_shape), len(self.out_shape)))
    in_event_dim = property(lambda self: len(self.in_shape))
    out_event_dim = property(lambda self: len(self.out_shape))

    def _call(self, x):
        return x.reshape(tuple(x.shape[:x.dim() - len(self.in_shape)]) + tuple(self.out_shape))

    def _inverse(self, y):
        return y.reshape(tuple(y.shape[:y.dim() - len(self.out_shape)]) + tuple(self.in_shape))

    def log_abs_det_jacobian(self, x, y):
        return x.new_zeros(tuple(x.shape[:x.dim() - len(self.in_shape)]))

    def forward_shape(self, shape):
        return _reshaped(shape, self.in_shape, self.out_shape)

    def inverse_shape(self, shape):
        return _reshaped(shape, self.out_shape, self.in_shape)


def _reshaped(shape, old: Size, new: Size) -> Size:
    """`shape` with its rightmost dims `old` replaced by `new` (PyTorch's errors otherwise)."""
    if len(shape) < len(old):
        raise ValueError("Too few dimensions on input")
    cut = len(shape) - len(old)
    if tuple(shape[cut:]) != tuple(old):
        raise ValueError(f"Shape mismatch: expected {Size(shape[cut:])} but got {old}")
    return Size(tuple(shape[:cut]) + tuple(new))


def _at_least_1d(shape):
    if len(shape) < 1:
        raise ValueError("Too few dimensions on input")
    return shape


class _VectorTransform(Transform):
    """A transform coupling the last dim (a vector to a vector); equal to any other instance of its class."""

    domain = constraints.real_vector
    event_dim = 1

    def forward_shape(self, shape):
        return _at_least_1d(shape)

    def inverse_shape(self, shape):
        return _at_least_1d(shape)


class SoftmaxTransform(_VectorTransform):
    """y = softmax(x) over the last dim (not bijective: the inverse is log y, one of the preimages)."""

    codomain = constraints.simplex

    def _call(self, x):
        probs = (x - x.amax(-1, keepdim=True)).exp()
        return probs / probs.sum(-1, keepdim=True)

    def _inverse(self, y):
        return y.log()


def _clipped_sigmoid(x: Tensor) -> Tensor:
    info = finfo(x.dtype)
    return sigmoid(x).clamp(min=info.tiny, max=1.0 - info.eps)


def _stick_offset(k: int, like: Tensor) -> Tensor:
    """log(k, k-1, ..., 1): the offsets that map x = 0 to the simplex's centre."""
    return arange(k, 0, -1, dtype=like.dtype, device=like.device).log()


class StickBreakingTransform(_VectorTransform):
    """A vector of K reals to a point of the K+1 simplex by stick breaking (bijective; the centre maps to 0)."""

    codomain = constraints.simplex
    bijective = True

    def _call(self, x):
        z = _clipped_sigmoid(x - _stick_offset(x.shape[-1], x))
        z_cumprod = (1 - z).cumprod(-1)
        return pad(z, [0, 1], value=1) * pad(z_cumprod, [1, 0], value=1)

    def _inverse(self, y):
        y_crop = y[..., :-1]
        sf = (1 - y_crop.cumsum(-1)).clamp(min=finfo(y.dtype).tiny)
        return y_crop.log() - sf.log() + _stick_offset(y_crop.shape[-1], y)

    def log_abs_det_jacobian(self, x, y):
        x = x - _stick_offset(x.shape[-1], x)
        return (-x + logsigmoid(x) + y[..., :-1].log()).sum(-1)

    def forward_shape(self, shape):
        return Size(tuple(_at_least_1d(shape)[:-1]) + (shape[-1] + 1,))

    def inverse_shape(self, shape):
        return Size(tuple(_at_least_1d(shape)[:-1]) + (shape[-1] - 1,))


class LowerCholeskyTransform(Transform):
    """A square matrix to a lower-triangular one with a positive diagonal: the strict lower triangle kept, the
    diagonal exponentiated (not bijective: the upper triangle is dropped)."""

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.lower_cholesky
    event_dim = 2

    def _call(self, x):
        return x.tril(-1) + diag_embed(x.diagonal(dim1=-2, dim2=-1).exp())

    def _inverse(self, y):
        return y.tril(-1) + diag_embed(y.diagonal(dim1=-2, dim2=-1).log())


class PositiveDefiniteTransform(Transform):
    """A square matrix to a positive definite one: L Lᵀ with L its LowerCholeskyTransform."""

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.positive_definite
    event_dim = 2

    def _call(self, x):
        lower = LowerCholeskyTransform()(x)
        return lower @ lower.mT

    def _inverse(self, y):
        return LowerCholeskyTransform().inv(cholesky(y))


class CorrCholeskyTransform(Transform):
    """A vector of D(D-1)/2 reals to the Cholesky factor of a D x D correlation matrix (unit-norm rows): tanh
    to (-1, 1), then stick breaking row by row (bijective)."""

    domain = constraints.real_vector
    codomain = constraints.corr_cholesky
    bijective = True
    event_dim = 2
    in_event_dim = 1
    out_event_dim = 2

    def _call(self, x):
        eps = finfo(x.dtype).eps
        r = vec_to_tril_matrix(tanh(x).clamp(min=-1 + eps, max=1 - eps), diag=-1)
        z1m_cumprod_sqrt = (1 - r.pow(2)).sqrt().cumprod(-1)
        r = r + eye(r.shape[-1], dtype=r.dtype, device=r.device)
        return r * pad(z1m_cumprod_sqrt[..., :-1], [1, 0], value=1)

    def _inverse(self, y):
        y_cumsum = 1 - (y * y).cumsum(-1)
        y_cumsum_shifted = pad(y_cumsum[..., :-1], [1, 0], value=1)
        t = tril_matrix_to_vec(y, diag=-1) / tril_matrix_to_vec(y_cumsum_shifted, diag=-1).sqrt()
        return (t.log1p() - (-t).log1p()) / 2

    def log_abs_det_jacobian(self, x, y):
        y1m_cumsum = 1 - (y * y).cumsum(-1)
        stick_breaking_logdet = 0.5 * tril_matrix_to_vec(y1m_cumsum, diag=-2).log().sum(-1)
        tanh_logdet = -2 * (x + softplus(-2 * x) - math.log(2.0)).sum(-1)
        return stick_breaking_logdet + tanh_logdet

    def forward_shape(self, shape):
        n = _at_least_1d(shape)[-1]
        d = round((0.25 + 2 * n) ** 0.5 + 0.5)
        if d * (d - 1) // 2 != n:
            raise ValueError("Input is not a flattened lower-diagonal number")
        return Size(tuple(shape[:-1]) + (d, d))

    def inverse_shape(self, shape):
        if len(shape) < 2:
            raise ValueError("Too few dimensions on input")
        if shape[-2] != shape[-1]:
            raise ValueError("Input is not square")
        d = shape[-1]
        return Size(tuple(shape[:-2]) + (d * (d - 1) // 2,))


def _check_along(op: str, value: Tensor, dim: int, size: int, what: str) -> None:
    """CatTransform's and StackTransform's checks of their input (PyTorch's AssertionErrors)."""
    if not -value.dim() <= dim < value.dim():
        raise AssertionError(f"{op}: dim {dim} out of range for tensor with {value.dim()} dimensions")
    if value.shape[dim] != size:
        raise AssertionError(f"{op}: size {value.shape[dim]} along dim {dim} must equal {what} {size}")


class _SlicewiseTransform(Transform):
    """Transforms `tseq` applied to slices of the input along `dim` (CatTransform, StackTransform)."""

    def __init__(self, tseq, dim: int, cache_size: int):
        if not all(isinstance(t, Transform) for t in tseq):
            raise AssertionError("All elements of tseq must be Transform instances")
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size)
        self.transforms = list(tseq)
        self.dim = dim

    bijective = property(lambda self: all(t.bijective for t in self.transforms))


class CatTransform(_SlicewiseTransform):
    """Transforms applied to consecutive slices along `dim` (of sizes `lengths`, default 1 each) and
    concatenated back."""

    def __init__(self, tseq, dim: int = 0, lengths=None, cache_size: int = 0):
        super().__init__(tseq, dim, cache_size)
        self.lengths = [1] * len(self.transforms) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.transforms):
            raise AssertionError(f"lengths ({len(self.lengths)}) must match transforms ({len(self.transforms)})")

    def with_cache(self, cache_size: int = 1) -> CatTransform:
        if self._cache_size == cache_size:
            return self
        return CatTransform(self.transforms, self.dim, self.lengths, cache_size)

    event_dim = property(lambda self: max(t.event_dim for t in self.transforms))
    length = property(lambda self: sum(self.lengths))
    domain = property(lambda self: constraints.cat([t.domain for t in self.transforms], self.dim, self.lengths))
    codomain = property(lambda self: constraints.cat([t.codomain for t in self.transforms], self.dim,
                                                     self.lengths))

    def _slices(self, value: Tensor) -> list:
        _check_along("CatTransform", value, self.dim, self.length, "the total length")
        starts = [sum(self.lengths[:i]) for i in range(len(self.lengths))]
        return [value.narrow(self.dim, s, n) for s, n in zip(starts, self.lengths)]

    def _call(self, x):
        return cat([t(xs) for t, xs in zip(self.transforms, self._slices(x))], dim=self.dim)

    def _inverse(self, y):
        return cat([t.inv(ys) for t, ys in zip(self.transforms, self._slices(y))], dim=self.dim)

    def log_abs_det_jacobian(self, x, y):
        terms = [_sum_rightmost(t.log_abs_det_jacobian(xs, ys), self.event_dim - t.event_dim)
                 for t, xs, ys in zip(self.transforms, self._slices(x), self._slices(y))]
        dim = (self.dim - x.dim() if self.dim >= 0 else self.dim) + self.event_dim
        if dim < 0:
            return cat(terms, dim=dim)
        total = terms[0]
        for term in terms[1:]:
            total = total + term
        return total


class StackTransform(_SlicewiseTransform):
    """Transform i applied to slice i along `dim`, the results stacked back along `dim`."""

    def __init__(self, tseq, dim: int = 0, cache_size: int = 0):
        super().__init__(tseq, dim, cache_size)

    def with_cache(self, cache_size: int = 1) -> StackTransform:
        return self if self._cache_size == cache_size else StackTransform(self.transforms, self.dim, cache_size)
    domain = property(lambda self: constraints.stack([t.domain for t in self.transforms], self.dim))
    codomain = property(lambda self: constraints.stack([t.codomain for t in self.transforms], self.dim))

    def _slices(self, value: Tensor) -> list:
        _check_along("StackTransform", value, self.dim, len(self.transforms), "the number of transforms")
        return [value.select(self.dim, i) for i in range(value.shape[self.dim])]

    def _call(self, x):
        return stack([t(xs) for t, xs in zip(self.transforms, self._slices(x))], dim=self.dim)

    def _inverse(self, y):
        return stack([t.inv(ys) for t, ys in zip(self.transforms, self._slices(y))], dim=self.dim)

    def log_abs_det_jacobian(self, x, y):
        return stack([t.log_abs_det_jacobian(xs, ys)
                      for t, xs, ys in zip(self.transforms, self._slices(x), self._slices(y))], dim=self.dim)


class CumulativeDistributionTransform(Transform):
    """y = distribution.cdf(x): the distribution's support to [0, 1] (inverse: icdf; log |dy/dx| is the
    log-density)."""

    bijective = True
    codomain = constraints.unit_interval

    def __init__(self, distribution, cache_size: int = 0):
        super().__init__(cache_size)
        self.distribution = distribution

    def with_cache(self, cache_size: int = 1) -> CumulativeDistributionTransform:
        if self._cache_size == cache_size:
            return self
        return CumulativeDistributionTransform(self.distribution, cache_size)

    domain = property(lambda self: self.distribution.support)

    def _call(self, x):
        return self.distribution.cdf(x)

    def _inverse(self, y):
        return self.distribution.icdf(y)

    def log_abs_det_jacobian(self, x, y):
        return self.distribution.log_prob(x)
