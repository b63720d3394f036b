"""The multivariate normal's density, as jax.scipy.stats.multivariate_normal: logpdf and pdf."""
from __future__ import annotations

import math

from ...ops import elementwise as ew
from ...ops.decompositions import cholesky
from ...ops.shape import broadcast_shapes
from ...tensor import Tensor
from ..linalg import solve_triangular
from ..special import _floats

__all__ = ["logpdf", "pdf"]


def logpdf(x, mean, cov, allow_singular: bool = False) -> Tensor:
    """log N(x; mean, cov) over the last axis of `x` (leading axes broadcast with mean's and cov's)."""
    if allow_singular:
        raise NotImplementedError("multivariate_normal.logpdf: allow_singular=True (a pseudo-determinant) is not "
                                  "supported in fnx")
    x, mean, cov = _floats(x, mean, cov)
    diff = x - mean
    n = diff.shape[-1]
    if cov.ndim < 2 or tuple(cov.shape[-2:]) != (n, n):
        raise ValueError(f"multivariate_normal.logpdf: cov must be ({n}, {n}) (or a batch of those) for x of shape "
                         f"{list(x.shape)}, got {list(cov.shape)}")
    batch = broadcast_shapes(tuple(diff.shape[:-1]), tuple(cov.shape[:-2]))
    L = cholesky(cov).expand(tuple(batch) + (n, n))
    z = solve_triangular(L, diff.expand(tuple(batch) + (n,)), lower=True)
    half_log_det = ew.log(L.diagonal(dim1=-2, dim2=-1)).sum(-1)
    return -0.5 * (z * z).sum(-1) - half_log_det - 0.5 * n * math.log(2 * math.pi)


def pdf(x, mean, cov) -> Tensor:
    """N(x; mean, cov)."""
    return ew.exp(logpdf(x, mean, cov))
