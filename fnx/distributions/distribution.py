"""The base class of the distributions (PyTorch's torch.distributions.Distribution).

A distribution holds parameters of shape `batch_shape` (+ its own event dims); `sample(sample_shape)` returns
`sample_shape + batch_shape + event_shape`, and `log_prob(value)` one number per event. With validation on (the
default, as in PyTorch) parameters and `log_prob`'s values are checked against their constraints and a
violation raises PyTorch's ValueError. Values traced by `vmap` or `compile` have no concrete value to check and
pass unchecked; under `grad` they are checked.
"""
from __future__ import annotations

import numbers

from ..core import FnxTypeError
from ..tensor import Size, Tensor
from . import constraints
from .constraints import format_value
from .utils import broadcast_all, lazy_property

__all__ = ["Distribution"]


def _known_all(valid: Tensor) -> bool:
    """Whether every element of the bool tensor `valid` is True; True when it is traced without a value."""
    try:
        return bool(valid.all())
    except FnxTypeError:
        return True


class Distribution:
    """A probability distribution with batch and event shapes (the base class; see PyTorch's Distribution)."""

    has_rsample = False
    has_enumerate_support = False
    _validate_args = True

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Turn argument validation on or off for distributions created from now on without `validate_args`."""
        if value not in (True, False):
            raise ValueError(f"set_default_validate_args: expected True or False, got {value!r}")
        Distribution._validate_args = value

    def __init__(self, batch_shape=Size(), event_shape=Size(), validate_args: bool | None = None):
        self._batch_shape = Size(batch_shape)
        self._event_shape = Size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            self._validate_parameters()

    def _init_params(self, validate_args: bool | None, **params) -> None:
        """`__init__` for parameters that broadcast elementwise: store them (tensors or numbers) broadcast
        together under their names, with their shape as the batch shape (empty when all are numbers)."""
        tensors = broadcast_all(*params.values())
        for name, value in zip(params, tensors):
            setattr(self, name, value)
        numbers_only = all(isinstance(v, numbers.Number) for v in params.values())
        Distribution.__init__(self, Size() if numbers_only else tensors[0].shape, validate_args=validate_args)

    def _expand_params(self, cls, batch_shape, _instance, *names: str) -> Distribution:
        """`expand` for parameters that broadcast elementwise: each named one expanded to `batch_shape`."""
        shape = Size(batch_shape)
        return self._expanded(cls, shape, _instance, {name: getattr(self, name).expand(shape) for name in names})

    def _validate_parameters(self) -> None:
        for param, constraint in self.arg_constraints.items():
            if constraints.is_dependent(constraint):
                continue
            if param not in self.__dict__ and isinstance(getattr(type(self), param), lazy_property):
                continue  # not given: computed from the parameter that was, which is checked
            value = getattr(self, param)
            if not _known_all(constraint.check(value)):
                raise ValueError(f"Expected parameter {param} ({type(value).__name__} of shape {tuple(value.shape)}) "
                                 f"of distribution {self!r} to satisfy the constraint {constraint!r}, but found "
                                 f"invalid values:\n{value}")

    @property
    def batch_shape(self) -> Size:
        """The shape over which parameters are batched."""
        return self._batch_shape

    @property
    def event_shape(self) -> Size:
        """The shape of a single sample (without batching)."""
        return self._event_shape

    @property
    def arg_constraints(self) -> dict:
        """The constraint each parameter must satisfy, by name."""
        raise self._missing("arg_constraints")

    @property
    def support(self):
        """The constraint that the distribution's values satisfy."""
        raise self._missing("support")

    def expand(self, batch_shape, _instance=None) -> Distribution:
        """A distribution of the same family with parameters broadcast to `batch_shape` (+ the event shape)."""
        raise self._missing("expand")

    @property
    def mean(self) -> Tensor:
        raise self._missing("mean")

    @property
    def mode(self) -> Tensor:
        raise self._missing("mode")

    @property
    def variance(self) -> Tensor:
        raise self._missing("variance")

    @property
    def stddev(self) -> Tensor:
        """The standard deviation: the square root of `variance`."""
        return self.variance.sqrt()

    def sample(self, sample_shape=Size()) -> Tensor:
        """Samples of shape `sample_shape + batch_shape + event_shape`, without gradients to the parameters."""
        return self.rsample(sample_shape).detach()

    def rsample(self, sample_shape=Size()) -> Tensor:
        """Reparameterised samples: differentiable with respect to the parameters."""
        raise NotImplementedError(f"{type(self).__name__}.rsample: this distribution has no reparameterised "
                                  f"sampler (has_rsample is False); use sample() for samples without gradients")

    def sample_n(self, n: int) -> Tensor:
        """`n` samples (`sample((n,))`)."""
        return self.sample(Size((n,)))

    def log_prob(self, value: Tensor) -> Tensor:
        raise self._missing("log_prob")

    def cdf(self, value: Tensor) -> Tensor:
        raise self._missing("cdf")

    def icdf(self, value: Tensor) -> Tensor:
        raise self._missing("icdf")

    def enumerate_support(self, expand: bool = True) -> Tensor:
        raise self._missing("enumerate_support")

    def entropy(self) -> Tensor:
        raise self._missing("entropy")

    def perplexity(self) -> Tensor:
        """exp(entropy)."""
        return self.entropy().exp()

    def _missing(self, what: str) -> NotImplementedError:
        """The error for a method or property this distribution does not define."""
        return NotImplementedError(f"{type(self).__name__} does not implement {what} (in fnx.distributions; a "
                                   f"subclass may define it)")

    def _extended_shape(self, sample_shape=Size()) -> Size:
        """sample_shape + batch_shape + event_shape."""
        if not isinstance(sample_shape, (tuple, list)):
            raise TypeError(f"sample_shape must be a tuple of ints (fnx.Size), got {type(sample_shape).__name__}")
        return Size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _validate_sample(self, value: Tensor) -> None:
        """PyTorch's checks of a value given to log_prob: a tensor, of a shape broadcastable to the batch and
        event shapes, inside the support."""
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_dim_start = value.dim() - len(self._event_shape)
        if tuple(value.shape[event_dim_start:]) != tuple(self._event_shape):
            raise ValueError(f"The right-most size of value must match event_shape: {value.shape} vs "
                             f"{self._event_shape}.")
        actual = tuple(value.shape)
        expected = tuple(self._batch_shape) + tuple(self._event_shape)
        for i, j in zip(reversed(actual), reversed(expected)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: {actual} vs {expected}.")
        support = self.support
        if not _known_all(support.check(value)):
            raise ValueError(f"Expected value argument ({type(value).__name__} of shape {actual}) to be within the "
                             f"support ({support!r}) of the distribution {self!r}, but found invalid values:\n"
                             f"{value}")

    def _expanded(self, cls, batch_shape: Size, _instance, params: dict) -> Distribution:
        """What `expand` returns: an instance of `cls` (or `_instance`) holding `params` (name -> tensor already
        expanded), with `batch_shape`, this event shape and this validation setting."""
        new = self._get_checked_instance(cls, _instance)
        for name, value in params.items():
            setattr(new, name, value)
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _get_checked_instance(self, cls, _instance):
        """The instance `expand` fills: `_instance`, or a new one of `cls` (a subclass must then define expand)."""
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(f"Subclass {self.__class__.__name__} of {cls.__name__} that defines a custom "
                                      f"__init__ method must also define a custom .expand() method.")
        return self.__new__(type(self)) if _instance is None else _instance

    def __repr__(self) -> str:
        names = [k for k in self.arg_constraints if k in self.__dict__]
        shown = ", ".join(f"{p}: {format_value(v) if v.numel() == 1 else v.size()}"
                          for p, v in ((p, self.__dict__[p]) for p in names))
        return f"{type(self).__name__}({shown})"


class LocatedDistribution(Distribution):
    """A distribution whose mean and mode are its `loc` parameter (Normal, MultivariateNormal)."""

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc
