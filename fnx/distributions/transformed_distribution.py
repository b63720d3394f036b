"""A distribution pushed through transforms (PyTorch's TransformedDistribution): samples are the base's samples
mapped by each transform in order; log_prob inverts them and subtracts each log |det Jacobian|."""
from __future__ import annotations

from ..tensor import Size, Tensor
from . import constraints
from .distribution import Distribution
from .independent import Independent
from .transforms import ComposeTransform, Transform, _sum_rightmost, _widened

__all__ = ["TransformedDistribution"]


class TransformedDistribution(Distribution):
    """`base_distribution` followed by `transforms` (one Transform or a list, applied first to last); the event
    dims are the base's or the largest a transform acts on."""

    arg_constraints: dict = {}

    def __init__(self, base_distribution: Distribution, transforms, validate_args: bool | None = None):
        if isinstance(transforms, Transform):
            transforms = [transforms]
        if not all(isinstance(t, Transform) for t in transforms):
            raise ValueError(f"transforms must be a Transform or a list of Transforms, but was {transforms}")
        self.transforms = list(transforms)
        base_shape = Size(tuple(base_distribution.batch_shape) + tuple(base_distribution.event_shape))
        base_dims = len(base_distribution.event_shape)
        transform = ComposeTransform(self.transforms)
        if len(base_shape) < transform.in_event_dim:
            raise ValueError(f"base_distribution needs to have shape with size at least {transform.in_event_dim}, "
                             f"but got {base_shape}.")
        shape = transform.forward_shape(base_shape)
        expanded_base_shape = transform.inverse_shape(shape)
        if tuple(base_shape) != tuple(expanded_base_shape):
            base_distribution = base_distribution.expand(expanded_base_shape[:len(expanded_base_shape) - base_dims])
        if transform.in_event_dim > base_dims:   # the transforms couple batch dims of the base: event dims now
            base_distribution = Independent(base_distribution, transform.in_event_dim - base_dims)
        self.base_dist = base_distribution
        event_dim = max(transform.out_event_dim, base_dims + transform.out_event_dim - transform.in_event_dim)
        cut = len(shape) - event_dim
        super().__init__(Size(shape[:cut]), Size(shape[cut:]), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> TransformedDistribution:
        new = self._get_checked_instance(TransformedDistribution, _instance)
        shape = tuple(batch_shape) + tuple(self.event_shape)
        for t in reversed(self.transforms):
            shape = t.inverse_shape(shape)
        new.base_dist = self.base_dist.expand(shape[:len(shape) - len(self.base_dist.event_shape)])
        new.transforms = self.transforms
        Distribution.__init__(new, Size(batch_shape), self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def has_rsample(self) -> bool:
        return self.base_dist.has_rsample

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        """The last transform's codomain, over all the event dims."""
        if not self.transforms:
            return self.base_dist.support
        return _widened(self.transforms[-1].codomain, len(self.event_shape))

    def sample(self, sample_shape=Size()) -> Tensor:
        x = self.base_dist.sample(sample_shape)
        for t in self.transforms:
            x = t(x)
        return x.detach()

    def rsample(self, sample_shape=Size()) -> Tensor:
        """The base's reparameterised sample through the transforms: differentiable in the parameters."""
        x = self.base_dist.rsample(sample_shape)
        for t in self.transforms:
            x = t(x)
        return x

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        event_dim = len(self.event_shape)
        result = 0.0
        y = value
        for t in reversed(self.transforms):
            x = t.inv(y)
            event_dim += t.in_event_dim - t.out_event_dim
            result = result - _sum_rightmost(t.log_abs_det_jacobian(x, y), event_dim - t.in_event_dim)
            y = x
        return result + _sum_rightmost(self.base_dist.log_prob(y), event_dim - len(self.base_dist.event_shape))

    def _flip(self, value: Tensor) -> Tensor:
        """`value` (a probability) flipped where the transforms decrease."""
        sign = ComposeTransform(self.transforms).sign
        return value if isinstance(sign, int) and sign == 1 else sign * (value - 0.5) + 0.5

    def cdf(self, value: Tensor) -> Tensor:
        """The base's cdf at the inverse image (for monotonic transforms; a decreasing one flips it)."""
        for t in reversed(self.transforms):
            value = t.inv(value)
        return self._flip(self.base_dist.cdf(value))

    def icdf(self, value: Tensor) -> Tensor:
        value = self.base_dist.icdf(self._flip(value))
        for t in self.transforms:
            value = t(value)
        return value
