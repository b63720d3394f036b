"""fnx.numpy's numerical routines, composed of fnx ops: `diff`, `trapezoid`, `interp`, `polyval`."""
from __future__ import annotations

from ..ops import elementwise as ew, joins as _joins, shape as _shape
from ..tensor import Tensor, canonical_dim
from .creation import asarray
from .indexing import searchsorted
from .reductions import _float, sum as _sum

__all__ = ["diff", "trapezoid", "interp", "polyval"]


def _along(a: Tensor, d: int, lo: int, hi: int) -> Tensor:
    return _joins.narrow(a, d, lo, hi - lo)


def diff(a, n: int = 1, axis: int = -1, prepend=None, append=None) -> Tensor:
    """The n-th differences a[i + 1] - a[i] along `axis`, after joining `prepend` and `append` there."""
    a = asarray(a)
    d = canonical_dim(axis, a.ndim, "jnp.diff")
    if prepend is not None or append is not None:
        edge = tuple(1 if k == d else s for k, s in enumerate(a.shape))

        def part(extra):
            e = asarray(extra, a.dtype)
            return [_shape.broadcast_to(e, edge) if e.ndim == 0 else e]

        a = _joins.cat((part(prepend) if prepend is not None else []) + [a]
                       + (part(append) if append is not None else []), d)
    for _ in range(n):
        m = a.shape[d]
        a = _along(a, d, 1, m) - _along(a, d, 0, m - 1)
    return a


def trapezoid(y, x=None, dx: float = 1.0, axis: int = -1) -> Tensor:
    """The integral of y over `axis` by the trapezoidal rule, at sample points `x` (or spaced by `dx`)."""
    y = _float(asarray(y), None)
    d = canonical_dim(axis, y.ndim, "jnp.trapezoid")
    m = y.shape[d]
    mid = (_along(y, d, 1, m) + _along(y, d, 0, m - 1)) * 0.5
    if x is None:
        return _sum(mid, d) * dx
    x = asarray(x)
    if x.ndim == 1:
        x = _shape.reshape(x, tuple(-1 if k == d else 1 for k in range(y.ndim)))
        steps = diff(x, axis=d)
    else:
        steps = diff(x, axis=axis)
    return _sum(mid * steps, d)


def interp(x, xp, fp, left=None, right=None, period=None) -> Tensor:
    """Piecewise-linear interpolation of the points (xp, fp) (xp increasing) at x; `left`/`right` beyond the
    ends (default fp[0] and fp[-1])."""
    if period is not None:
        raise NotImplementedError("jnp.interp: period is not supported")
    x, xp, fp = _float(asarray(x), None), _float(asarray(xp), None), _float(asarray(fp), None)
    n = xp.shape[0]
    if n < 2:
        return ew.where(ew.lt(x, xp[0]), fp[0] if left is None else left, fp[0] if right is None else right) \
            if n else x * 0.0
    i = ew.clamp(searchsorted(xp, x, side="right") - 1, 0, n - 2)
    x0, x1, f0, f1 = xp[i], xp[i + 1], fp[i], fp[i + 1]
    out = f0 + (x - x0) * (f1 - f0) / (x1 - x0)
    out = ew.where(ew.lt(x, xp[0]), fp[0] if left is None else left, out)
    return ew.where(ew.gt(x, xp[-1]), fp[-1] if right is None else right, out)


def polyval(p, x) -> Tensor:
    """The polynomial with coefficients p (highest power first) at x, by Horner's rule."""
    p, x = asarray(p), asarray(x)
    out = x * 0 + p[0] if p.shape[0] else x * 0
    for k in range(1, p.shape[0]):
        out = out * x + p[k]
    return out
