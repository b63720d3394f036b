"""Constraints on parameters and supports (PyTorch's torch.distributions.constraints).

A constraint's `check(value)` returns a bool tensor of the batch shape: True where the value satisfies it (its
`event_dim` rightmost dims are one event, checked together). The reprs are PyTorch's, since validation errors
quote them.
"""
from __future__ import annotations

import numpy as np

from ..ops.elementwise import abs as _abs, isclose, logical_and
from ..ops.reduce import all as _all
from ..ops.creation import tensor
from ..tensor import Tensor, Tracer

__all__ = ["Constraint", "dependent", "dependent_property", "is_dependent", "real", "real_vector", "positive",
           "nonnegative", "greater_than", "greater_than_eq", "less_than", "unit_interval", "interval",
           "half_open_interval", "boolean", "nonnegative_integer", "integer_interval", "simplex", "one_hot",
           "independent", "lower_cholesky", "positive_definite", "symmetric"]


def format_value(value) -> str:
    """`value` as PyTorch's f-strings show it: a 0-dim tensor by its number (Tensor.__format__), else its repr."""
    if isinstance(value, Tensor) and value.dim() == 0 and not isinstance(value, Tracer):
        return str(value.item())
    return str(value)


class Constraint:
    """A region of values; `check(value)` says, per batch element, whether `value` lies in it."""

    is_discrete = False
    event_dim = 0

    def check(self, value: Tensor) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__}.check")

    def __repr__(self) -> str:
        return type(self).__name__.lstrip("_") + "()"


class _Dependent(Constraint):
    """A placeholder for a constraint that depends on other parameters (Uniform's low and high); never checked."""

    def __init__(self, *, is_discrete: bool = False, event_dim: int = 0):
        self.is_discrete = is_discrete
        self.event_dim = event_dim

    def __call__(self, *, is_discrete: bool = False, event_dim: int = 0) -> _Dependent:
        return _Dependent(is_discrete=is_discrete, event_dim=event_dim)

    def check(self, value: Tensor) -> Tensor:
        raise ValueError("Cannot determine validity of dependent constraint")


def is_dependent(constraint) -> bool:
    """Whether `constraint` is a placeholder that validation skips."""
    return isinstance(constraint, _Dependent)


class dependent_property(property):
    """A property of a distribution that is also a dependent constraint (a support that depends on parameters)."""

    def __init__(self, fget=None, *, is_discrete: bool = False, event_dim: int = 0):
        super().__init__(fget)
        self.is_discrete = is_discrete
        self.event_dim = event_dim

    def __call__(self, fget) -> dependent_property:
        return dependent_property(fget, is_discrete=self.is_discrete, event_dim=self.event_dim)


class _Real(Constraint):
    """Any real number that is not NaN."""

    def check(self, value: Tensor) -> Tensor:
        return value == value  # False only for NaN


class _Boolean(Constraint):
    """0 or 1."""

    is_discrete = True

    def check(self, value: Tensor) -> Tensor:
        return (value == 0) | (value == 1)


class _GreaterThan(Constraint):
    """Values strictly greater than `lower_bound`."""

    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value: Tensor) -> Tensor:
        return self.lower_bound < value

    def __repr__(self) -> str:
        return f"GreaterThan(lower_bound={format_value(self.lower_bound)})"


class _GreaterThanEq(Constraint):
    """Values greater than or equal to `lower_bound`."""

    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value: Tensor) -> Tensor:
        return self.lower_bound <= value

    def __repr__(self) -> str:
        return f"GreaterThanEq(lower_bound={format_value(self.lower_bound)})"


class _LessThan(Constraint):
    """Values strictly less than `upper_bound`."""

    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, value: Tensor) -> Tensor:
        return value < self.upper_bound

    def __repr__(self) -> str:
        return f"LessThan(upper_bound={format_value(self.upper_bound)})"


class _Interval(Constraint):
    """Values in the closed interval [lower_bound, upper_bound]."""

    def __init__(self, lower_bound, upper_bound):
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound

    def check(self, value: Tensor) -> Tensor:
        return (self.lower_bound <= value) & (value <= self.upper_bound)

    def __repr__(self) -> str:
        bounds = f"lower_bound={format_value(self.lower_bound)}, upper_bound={format_value(self.upper_bound)}"
        return f"{type(self).__name__.lstrip('_')}({bounds})"


class _HalfOpenInterval(_Interval):
    """Values in the half-open interval [lower_bound, upper_bound)."""

    def check(self, value: Tensor) -> Tensor:
        return (self.lower_bound <= value) & (value < self.upper_bound)


class _IntegerInterval(_Interval):
    """Integers in [lower_bound, upper_bound]."""

    is_discrete = True

    def check(self, value: Tensor) -> Tensor:
        return (value % 1 == 0) & super().check(value)


class _IntegerGreaterThan(_GreaterThanEq):
    """Integers greater than or equal to `lower_bound`."""

    is_discrete = True

    def check(self, value: Tensor) -> Tensor:
        return (value % 1 == 0) & super().check(value)

    def __repr__(self) -> str:
        return f"IntegerGreaterThan(lower_bound={format_value(self.lower_bound)})"


class _Independent(Constraint):
    """`base_constraint` over the rightmost `reinterpreted_batch_ndims` dims taken together."""

    def __init__(self, base_constraint: Constraint, reinterpreted_batch_ndims: int):
        self.base_constraint = base_constraint
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    @property
    def is_discrete(self) -> bool:
        return self.base_constraint.is_discrete

    @property
    def event_dim(self) -> int:
        return self.base_constraint.event_dim + self.reinterpreted_batch_ndims

    def check(self, value: Tensor) -> Tensor:
        result = self.base_constraint.check(value)
        n = self.reinterpreted_batch_ndims
        if result.dim() < n:
            raise ValueError(f"Expected value.dim() >= {n} but got {result.dim()}")
        return _all(result.reshape(result.shape[:result.dim() - n] + (-1,)), -1) if n else result

    def __repr__(self) -> str:
        return f"IndependentConstraint({self.base_constraint!r}, {self.reinterpreted_batch_ndims})"


class _Simplex(Constraint):
    """Vectors (the last dim) of non-negative values summing to 1 (within 1e-6)."""

    event_dim = 1

    def check(self, value: Tensor) -> Tensor:
        return _all(value >= 0, -1) & (_abs(value.sum(-1) - 1) < 1e-6)


class _OneHot(Constraint):
    """Vectors (the last dim) of zeros with a single one."""

    is_discrete = True
    event_dim = 1

    def check(self, value: Tensor) -> Tensor:
        return _all((value == 0) | (value == 1), -1) & (value.sum(-1) == 1)


class _LowerCholesky(Constraint):
    """Lower-triangular matrices with a positive diagonal."""

    event_dim = 2

    def check(self, value: Tensor) -> Tensor:
        lower = _all((value.tril() == value).reshape(value.shape[:-2] + (-1,)), -1)
        return lower & _all(value.diagonal(dim1=-2, dim2=-1) > 0, -1)


class _Symmetric(Constraint):
    """Square matrices equal to their transpose (within 1e-6)."""

    event_dim = 2

    def check(self, value: Tensor) -> Tensor:
        close = isclose(value, value.mT, atol=1e-6)
        return _all(close.reshape(value.shape[:-2] + (-1,)), -1)


class _PositiveDefinite(_Symmetric):
    """Symmetric with a Cholesky factor. The factorisation is a check only, so it runs in numpy per matrix; a
    traced value (inside grad, vmap or compile) is checked for symmetry only."""

    def check(self, value: Tensor) -> Tensor:
        if isinstance(value, Tracer):
            return super().check(value)
        arrays = value.detach().cpu().numpy()
        factors = [_has_cholesky(m) for m in arrays.reshape((-1,) + arrays.shape[-2:])]
        factorable = tensor(np.array(factors, dtype=bool).reshape(arrays.shape[:-2]), device=value.device)
        return logical_and(super().check(value), factorable)


def _has_cholesky(m: np.ndarray) -> bool:
    try:
        np.linalg.cholesky(m)
    except np.linalg.LinAlgError:
        return False
    return True


dependent = _Dependent()
real = _Real()
real_vector = _Independent(real, 1)
boolean = _Boolean()
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
greater_than = _GreaterThan
greater_than_eq = _GreaterThanEq
less_than = _LessThan
unit_interval = _Interval(0.0, 1.0)
interval = _Interval
half_open_interval = _HalfOpenInterval
integer_interval = _IntegerInterval
nonnegative_integer = _IntegerGreaterThan(0)
independent = _Independent
simplex = _Simplex()
one_hot = _OneHot()
lower_cholesky = _LowerCholesky()
symmetric = _Symmetric()
positive_definite = _PositiveDefinite()
