"""Constraints on parameters and supports (PyTorch's torch.distributions.constraints).

A constraint's `check(value)` returns a bool tensor of the batch shape: True where the value satisfies it (its
`event_dim` rightmost dims are one event, checked together). The reprs are PyTorch's, since validation errors
quote them.
"""
from __future__ import annotations

import numpy as np

from ..dtypes import finfo
from ..ops.elementwise import abs as _abs, isclose, logical_and
from ..ops.joins import cat as _cat, stack as _stack
from ..ops.reduce import all as _all
from ..ops.creation import full, tensor
from ..tensor import Tensor, Tracer

__all__ = ["Constraint", "dependent", "dependent_property", "is_dependent", "real", "real_vector", "positive",
           "nonnegative", "greater_than", "greater_than_eq", "less_than", "unit_interval", "interval",
           "half_open_interval", "boolean", "nonnegative_integer", "integer_interval", "simplex", "one_hot",
           "independent", "lower_cholesky", "positive_definite", "symmetric", "positive_integer", "multinomial",
           "lower_triangular", "corr_cholesky", "square", "positive_semidefinite", "cat", "stack",
           "MixtureSameFamilyConstraint"]


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


def _all_of_matrix(value: Tensor) -> Tensor:
    """Per matrix of the bool batch `value`: whether all its entries are True."""
    return _all(value.reshape(tuple(value.shape[:-2]) + (-1,)), -1)


class _LowerTriangular(Constraint):
    """Lower-triangular matrices."""

    event_dim = 2

    def check(self, value: Tensor) -> Tensor:
        return _all_of_matrix(value.tril() == value)


class _LowerCholesky(_LowerTriangular):
    """Lower-triangular matrices with a positive diagonal."""

    def check(self, value: Tensor) -> Tensor:
        return super().check(value) & _all(value.diagonal(dim1=-2, dim2=-1) > 0, -1)


class _CorrCholesky(_LowerCholesky):
    """Cholesky factors of correlation matrices: lower Cholesky with rows of unit Euclidean norm."""

    def check(self, value: Tensor) -> Tensor:
        tol = finfo(value.dtype).eps * value.shape[-1] * 10
        row_norm = value.detach().pow(2).sum(-1).sqrt()
        return super().check(value) & _all((row_norm - 1.0).abs() <= tol, -1)


class _Square(Constraint):
    """Square matrices."""

    event_dim = 2

    def check(self, value: Tensor) -> Tensor:
        return full(tuple(value.shape[:-2]), value.shape[-2] == value.shape[-1], device=value.device)


class _Symmetric(_Square):
    """Square matrices equal to their transpose (within 1e-6)."""

    def check(self, value: Tensor) -> Tensor:
        if value.shape[-2] != value.shape[-1]:
            return super().check(value)
        return _all_of_matrix(isclose(value, value.mT, atol=1e-6))


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


class _PositiveSemidefinite(_Symmetric):
    """Symmetric with non-negative eigenvalues (checked in numpy per matrix, as _PositiveDefinite)."""

    def check(self, value: Tensor) -> Tensor:
        if isinstance(value, Tracer) or value.shape[-2] != value.shape[-1]:
            return super().check(value)
        arrays = value.detach().cpu().numpy()
        ok = [bool((np.linalg.eigvalsh(m) >= 0).all()) for m in arrays.reshape((-1,) + arrays.shape[-2:])]
        psd = tensor(np.array(ok, dtype=bool).reshape(arrays.shape[:-2]), device=value.device)
        return logical_and(super().check(value), psd)


class _Multinomial(Constraint):
    """Vectors of non-negative counts summing to at most `upper_bound`."""

    is_discrete = True
    event_dim = 1

    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, x: Tensor) -> Tensor:
        return _all(x >= 0, -1) & (x.sum(-1) <= self.upper_bound)


class _Cat(Constraint):
    """Constraints `cseq` on consecutive slices along `dim` of sizes `lengths` (1 each by default)."""

    def __init__(self, cseq, dim: int = 0, lengths=None):
        if not all(isinstance(c, Constraint) for c in cseq):
            raise AssertionError("All elements of cseq must be Constraint instances")
        self.cseq = list(cseq)
        self.lengths = [1] * len(self.cseq) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.cseq):
            raise AssertionError(f"lengths ({len(self.lengths)}) must match cseq ({len(self.cseq)})")
        self.dim = dim

    is_discrete = property(lambda self: any(c.is_discrete for c in self.cseq))
    event_dim = property(lambda self: max(c.event_dim for c in self.cseq))

    def check(self, value: Tensor) -> Tensor:
        _check_dim(value, self.dim)
        starts = [sum(self.lengths[:i]) for i in range(len(self.lengths))]
        return _cat([c.check(value.narrow(self.dim, s, n)) for c, s, n in zip(self.cseq, starts, self.lengths)],
                    self.dim)


class _Stack(Constraint):
    """Constraint i on slice i along `dim`."""

    def __init__(self, cseq, dim: int = 0):
        if not all(isinstance(c, Constraint) for c in cseq):
            raise AssertionError("All elements of cseq must be Constraint instances")
        self.cseq = list(cseq)
        self.dim = dim

    is_discrete = property(lambda self: any(c.is_discrete for c in self.cseq))

    @property
    def event_dim(self) -> int:
        dim = max(c.event_dim for c in self.cseq)
        return dim + 1 if self.dim + dim < 0 else dim

    def check(self, value: Tensor) -> Tensor:
        _check_dim(value, self.dim)
        return _stack([c.check(value.select(self.dim, i)) for i, c in enumerate(self.cseq)], self.dim)


def _check_dim(value: Tensor, dim: int) -> None:
    if not -value.dim() <= dim < value.dim():
        raise AssertionError(f"dim {dim} out of range for value with {value.dim()} dimensions")


class MixtureSameFamilyConstraint(Constraint):
    """The support of a MixtureSameFamily: its components' support, checked per mixture element and reduced
    over the component dim."""

    def __init__(self, base_constraint: Constraint):
        if not isinstance(base_constraint, Constraint):
            raise AssertionError(f"base_constraint must be a Constraint, got {type(base_constraint).__name__}")
        self.base_constraint = base_constraint

    is_discrete = property(lambda self: self.base_constraint.is_discrete)
    event_dim = property(lambda self: self.base_constraint.event_dim)

    def check(self, value: Tensor) -> Tensor:
        if value.dim() < self.event_dim:
            raise ValueError(f"Expected value.dim() >= {self.event_dim} but got {value.dim()}")
        result = self.base_constraint.check(value.unsqueeze(-1 - self.event_dim))
        keep = value.dim() - self.event_dim
        return _all(result.reshape(tuple(result.shape[:keep]) + (-1,)), -1)

    def __repr__(self) -> str:
        return f"MixtureSameFamilyConstraint({self.base_constraint!r})"


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
positive_integer = _IntegerGreaterThan(1)
multinomial = _Multinomial
lower_triangular = _LowerTriangular()
corr_cholesky = _CorrCholesky()
square = _Square()
positive_semidefinite = _PositiveSemidefinite()
cat = _Cat
stack = _Stack
independent = _Independent
simplex = _Simplex()
one_hot = _OneHot()
lower_cholesky = _LowerCholesky()
symmetric = _Symmetric()
positive_definite = _PositiveDefinite()
