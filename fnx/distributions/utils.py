"""Helpers shared by the distributions (PyTorch's torch.distributions.utils)."""
from __future__ import annotations

import numbers

from .. import dtypes as _dt
from ..nn.functional import softmax
from ..ops.creation import arange, as_tensor, zeros
from ..ops.elementwise import log, log1p, sigmoid
from ..ops.joins import cat
from ..ops.shape import broadcast_tensors
from ..tensor import Tensor

__all__ = ["broadcast_all", "lazy_property", "logits_to_probs", "probs_to_logits", "clamp_probs", "BinaryParameters",
           "euler_constant", "tril_matrix_to_vec", "vec_to_tril_matrix"]

euler_constant = 0.57721566490153286061  # Euler-Mascheroni constant


class lazy_property:
    """A property computed on first access and then stored on the instance (Bernoulli's `probs` from `logits`,
    MultivariateNormal's `covariance_matrix` from `scale_tril`)."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


def broadcast_all(*values) -> tuple:
    """`values` (tensors and numbers) as tensors of one broadcast shape; numbers take the dtype and device of the
    first tensor among them, or the default dtype when there is none."""
    if not all(isinstance(v, (Tensor, numbers.Number)) for v in values):
        raise ValueError("Input arguments must all be instances of numbers.Number or fnx.Tensor.")
    first = next((v for v in values if isinstance(v, Tensor)), None)
    if first is None:
        dt = _dt.get_default_dtype()
        return broadcast_tensors(*(as_tensor(float(v), dtype=dt) for v in values))
    return broadcast_tensors(*(v if isinstance(v, Tensor) else as_tensor(v, dtype=first.dtype, device=first.device)
                               for v in values))


def probs_or_logits(probs, logits):
    """The one given of `probs` and `logits`; PyTorch's error unless exactly one is."""
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")
    return probs if probs is not None else logits


def clamp_probs(probs: Tensor) -> Tensor:
    """`probs` clamped to [eps, 1 - eps] of its dtype, so that their logarithms stay finite."""
    eps = _dt.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def logits_to_probs(logits: Tensor, is_binary: bool = False) -> Tensor:
    """Probabilities from logits: the sigmoid for binary events, else the softmax over the last dim."""
    return sigmoid(logits) if is_binary else softmax(logits, dim=-1)


def probs_to_logits(probs: Tensor, is_binary: bool = False) -> Tensor:
    """Logits from probabilities: log(p) - log(1 - p) for binary events, else log(p) (unnormalised logits)."""
    ps = clamp_probs(probs)
    return log(ps) - log1p(-ps) if is_binary else log(ps)


def sum_rightmost(value: Tensor, dim: int) -> Tensor:
    """`value` summed over its `dim` rightmost dims."""
    return value.reshape(tuple(value.shape[:value.dim() - dim]) + (-1,)).sum(-1) if dim > 0 else value


class BinaryParameters:
    """The `probs` / `logits` pair of a binary event (Bernoulli, Geometric, Binomial, the relaxed Bernoulli):
    whichever was not given is computed from the other on first use."""

    @lazy_property
    def logits(self) -> Tensor:
        """The log-odds log(p / (1 - p))."""
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:
        """The probability of 1 (of a success)."""
        return logits_to_probs(self.logits, is_binary=True)


def _tril_positions(n: int, diag: int, device) -> Tensor:
    """The flat indices (row-major) of the n x n entries on or below diagonal `diag`, in row order."""
    i = arange(n, device=device)
    keep = (i < i.reshape(-1, 1) + (diag + 1)).reshape(-1)
    return arange(n * n, device=device)[keep]


def tril_matrix_to_vec(mat: Tensor, diag: int = 0) -> Tensor:
    """The entries of the (batched) square `mat` on or below diagonal `diag`, row by row, as the last dim."""
    n = mat.shape[-1]
    if diag < -n or diag >= n:
        raise ValueError(f"diag ({diag}) provided is outside [{-n}, {n - 1}].")
    return mat.reshape(tuple(mat.shape[:-2]) + (n * n,))[..., _tril_positions(n, diag, mat.device)]


def vec_to_tril_matrix(vec: Tensor, diag: int = 0) -> Tensor:
    """The inverse of tril_matrix_to_vec: a (batched) square matrix, zero above diagonal `diag`."""
    k = vec.shape[-1]
    n = (-(1 + 2 * diag) + ((1 + 2 * diag) ** 2 + 8 * k + 4 * abs(diag) * (diag + 1)) ** 0.5) / 2
    if round(n) - n > _dt.finfo(vec.dtype).eps:
        raise ValueError(f"The size of last dimension is {k} which cannot be expressed as the lower triangular "
                         f"part of a square D x D matrix.")
    n = round(n)
    index = zeros(n * n, dtype=_dt.int64, device=vec.device) + k   # k: a zero appended to vec
    index[_tril_positions(n, diag, vec.device)] = arange(k, device=vec.device)
    padded = cat([vec, vec.new_zeros(tuple(vec.shape[:-1]) + (1,))], -1)
    return padded[..., index].reshape(tuple(vec.shape[:-1]) + (n, n))
