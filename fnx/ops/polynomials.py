"""The classical orthogonal polynomials of torch.special, p_n(x) for tensors of x and integer degrees n.

Each follows PyTorch's evaluation (aten/src/ATen/native/Math.h): n is truncated to an integer and p_n = 0 for
n < 0 (and for a NaN or infinite n); the Chebyshev kinds take their trigonometric closed forms inside (-1, 1)
above a small degree and their exact values at ±1; elsewhere the three-term recurrence runs, here over whole
tensors, each element's result taken where its degree is reached. The result dtype is that of x and n promoted
(integers give the default float dtype), computed in that dtype as PyTorch does. As in PyTorch the polynomials
are not differentiable: their results do not require grad (torch.func gives a zero derivative).

The recurrence's length is the largest degree, so n must be concrete: a Python number or a tensor outside
transforms (inside one, pass n as a Python int).
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as _dt
from ..errors import ConcretizationError
from ..tensor import Tensor, Tracer
from ._families import as_operand, promote
from .creation import full_like, stop_gradient
from .elementwise import abs as _abs, acos, cos, eq, isfinite, sin, trunc, where
from .shape import broadcast_tensors
from .special import quiet_numpy

__all__ = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
           "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
           "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l",
           "legendre_polynomial_p"]


def _operands(op: str, x, n) -> tuple:
    """(x, n, degrees, xs): x and n detached, broadcast and of the result dtype, n truncated to whole numbers (-1
    where it is NaN or infinite, as PyTorch's cast gives a negative degree there); the degrees and x's values
    as numpy arrays (xs None where x is traced), read before any op so that staging transforms leave them
    concrete."""
    if not isinstance(x, Tensor) and not isinstance(n, Tensor):
        raise TypeError(f"special.{op}: expected x or n to be a Tensor, got {type(x).__name__} and "
                        f"{type(n).__name__}")
    if isinstance(n, Tracer):
        raise ConcretizationError(f"special.{op}: the degree n must be concrete (its largest value sets the "
                                  f"recurrence's length), but it is traced inside a transform; pass n as a Python "
                                  f"int there")
    x, n = promote(f"special.{op}", as_operand(x, op), as_operand(n, op))
    if not x.dtype.is_floating_point:
        x, n = x.to(_dt.get_default_dtype()), n.to(_dt.get_default_dtype())
    degrees = n.numpy(force=True)
    degrees = np.where(np.isfinite(degrees), np.trunc(degrees), -1.0)
    xs = None if isinstance(x, Tracer) else x.numpy(force=True)
    x, n = broadcast_tensors(stop_gradient(x), stop_gradient(n))
    return x, where(isfinite(n), trunc(n), -1.0), degrees, xs


def _top(degrees: np.ndarray, needed: np.ndarray | None = None) -> int:
    """The largest degree (of the elements `needed` marks): the recurrence's length."""
    if needed is not None:
        degrees = np.where(needed, degrees, 0.0)
    return int(np.max(degrees)) if np.size(degrees) else 0


def _parity(n: Tensor) -> Tensor:
    """(-1)^n for whole numbers n."""
    return 1.0 - 2.0 * (n - 2.0 * trunc(n * 0.5))


def _recurrence(x: Tensor, n: Tensor, top: int, first: Tensor, step) -> Tensor:
    """p_n with p_0 = 1, p_1 = `first` and p_{k+1} = step(k, p_k, p_{k-1}), for each element's degree n >= 0."""
    p, q = full_like(x, 1.0), first
    out = where(eq(n, 0.0), 1.0, where(eq(n, 1.0), first, 0.0))
    for k in range(1, top):
        p, q = q, step(k, q, p)
        out = where(eq(n, float(k + 1)), q, out)
    return out


@quiet_numpy
def _chebyshev(op: str, x, n, shifted: bool, kind: str) -> Tensor:
    """Chebyshev polynomials of the first to fourth kinds (T, U, V, W) of y = x, or of y = 2x - 1 (shifted)."""
    x, n, degrees, xs = _operands(op, x, n)
    y = x + x - 1.0 if shifted else x
    threshold = {"t": 6, "u": 6 if shifted else 8, "v": 6 if shifted else 8, "w": 4 if shifted else 8}[kind]
    inside = _abs(y) < 1.0
    closed_form = inside & (n > float(threshold))
    # the recurrence runs to the largest degree that takes it (all of them where x is traced)
    needed = None if xs is None else ~((np.abs(xs + xs - 1 if shifted else xs) < 1) & (degrees > threshold))
    first = {"t": y, "u": y + y, "v": y + y - 1.0, "w": y + y + 1.0}[kind]
    value = _recurrence(y, n, _top(degrees, needed), first, lambda k, q, p: (y + y) * q - p)
    theta = acos(where(inside, y, 0.0))
    sign, odd = _parity(n), n + n + 1.0   # (-1)^n, 2n + 1
    if kind == "t":
        closed, at_one, at_minus_one = cos(n * theta), 1.0, sign
    elif kind == "u":
        s = sin(theta)
        closed = where(eq(s, 0.0), (n + 1.0) * cos((n + 1.0) * theta) / y, sin((n + 1.0) * theta) / s)
        at_one, at_minus_one = n + 1.0, sign * (n + 1.0)
    elif kind == "v":
        closed = where(eq(sin(theta * 0.5), 1.0), sign * odd, cos((n + 0.5) * theta) / cos(theta * 0.5))
        at_one, at_minus_one = 1.0, sign * odd
    else:
        edge = where(y > 0.0, odd, sign)
        closed = where(eq(cos(theta * 0.5), 1.0), edge, sin((n + 0.5) * theta) / sin(theta * 0.5))
        at_one, at_minus_one = odd, sign
    value = where(closed_form, closed, value)
    value = where(eq(y, 1.0), at_one, where(eq(y, -1.0), at_minus_one, value))
    return where(n < 0.0, 0.0, value)


def chebyshev_polynomial_t(input, n) -> Tensor:
    """Chebyshev polynomial of the first kind T_n(x): T_0 = 1, T_1 = x, T_{k+1} = 2x T_k - T_{k-1}."""
    return _chebyshev("chebyshev_polynomial_t", input, n, False, "t")


def chebyshev_polynomial_u(input, n) -> Tensor:
    """Chebyshev polynomial of the second kind U_n(x): U_0 = 1, U_1 = 2x, U_{k+1} = 2x U_k - U_{k-1}."""
    return _chebyshev("chebyshev_polynomial_u", input, n, False, "u")


def chebyshev_polynomial_v(input, n) -> Tensor:
    """Chebyshev polynomial of the third kind V_n(x): V_0 = 1, V_1 = 2x - 1, V_{k+1} = 2x V_k - V_{k-1}."""
    return _chebyshev("chebyshev_polynomial_v", input, n, False, "v")


def chebyshev_polynomial_w(input, n) -> Tensor:
    """Chebyshev polynomial of the fourth kind W_n(x): W_0 = 1, W_1 = 2x + 1, W_{k+1} = 2x W_k - W_{k-1}."""
    return _chebyshev("chebyshev_polynomial_w", input, n, False, "w")


def shifted_chebyshev_polynomial_t(input, n) -> Tensor:
    """Shifted Chebyshev polynomial of the first kind T*_n(x) = T_n(2x - 1), orthogonal on [0, 1]."""
    return _chebyshev("shifted_chebyshev_polynomial_t", input, n, True, "t")


def shifted_chebyshev_polynomial_u(input, n) -> Tensor:
    """Shifted Chebyshev polynomial of the second kind U*_n(x) = U_n(2x - 1)."""
    return _chebyshev("shifted_chebyshev_polynomial_u", input, n, True, "u")


def shifted_chebyshev_polynomial_v(input, n) -> Tensor:
    """Shifted Chebyshev polynomial of the third kind V*_n(x) = V_n(2x - 1)."""
    return _chebyshev("shifted_chebyshev_polynomial_v", input, n, True, "v")


def shifted_chebyshev_polynomial_w(input, n) -> Tensor:
    """Shifted Chebyshev polynomial of the fourth kind W*_n(x) = W_n(2x - 1)."""
    return _chebyshev("shifted_chebyshev_polynomial_w", input, n, True, "w")


# PyTorch's largest degree of the Hermite polynomials (NaN above): 128 in float32 (and below), 512 in float64
_HERMITE_LIMIT = {_dt.float64: 512}


@quiet_numpy
def _hermite(op: str, x, n, physicists: bool) -> Tensor:
    x, n, degrees, _ = _operands(op, x, n)
    limit = _HERMITE_LIMIT.get(x.dtype, 128)
    top = _top(degrees)
    if physicists:   # H_{k+1} = 2x H_k - 2k H_{k-1}
        value = _recurrence(x, n, min(top, limit), x + x, lambda k, q, p: (x + x) * q - float(2 * k) * p)
    else:            # He_{k+1} = x He_k - k He_{k-1}
        value = _recurrence(x, n, min(top, limit), x, lambda k, q, p: x * q - float(k) * p)
    value = where(n > float(limit), math.nan, value)
    return where(n < 0.0, 0.0, value)


def hermite_polynomial_h(input, n) -> Tensor:
    """Physicists' Hermite polynomial H_n(x): H_0 = 1, H_1 = 2x, H_{k+1} = 2x H_k - 2k H_{k-1} (NaN above
    degree 512 in float64, 128 in float32, as in PyTorch)."""
    return _hermite("hermite_polynomial_h", input, n, True)


def hermite_polynomial_he(input, n) -> Tensor:
    """Probabilists' Hermite polynomial He_n(x): He_0 = 1, He_1 = x, He_{k+1} = x He_k - k He_{k-1} (NaN above
    degree 512 in float64, 128 in float32, as in PyTorch)."""
    return _hermite("hermite_polynomial_he", input, n, False)


@quiet_numpy
def laguerre_polynomial_l(input, n) -> Tensor:
    """Laguerre polynomial L_n(x): L_0 = 1, L_1 = 1 - x, (k + 1) L_{k+1} = (2k + 1 - x) L_k - k L_{k-1};
    1 at x = 0."""
    x, n, degrees, _ = _operands("laguerre_polynomial_l", input, n)
    value = _recurrence(x, n, _top(degrees), 1.0 - x,
                        lambda k, q, p: ((float(2 * k) + (1.0 - x)) * q - float(k) * p) / float(k + 1))
    return where(n < 0.0, 0.0, where(eq(x, 0.0), 1.0, value))


@quiet_numpy
def legendre_polynomial_p(input, n) -> Tensor:
    """Legendre polynomial P_n(x): P_0 = 1, P_1 = x, (k + 1) P_{k+1} = (2k + 1) x P_k - k P_{k-1}; exact at
    ±1."""
    x, n, degrees, _ = _operands("legendre_polynomial_p", input, n)
    value = _recurrence(x, n, _top(degrees), x,
                        lambda k, q, p: (float(2 * k + 1) * x * q - float(k) * p) / float(k + 1))
    value = where(eq(x, 1.0), 1.0, where(eq(x, -1.0), _parity(n), value))
    return where(n < 0.0, 0.0, value)
