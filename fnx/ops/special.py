"""Special functions: lgamma, digamma, polygamma, multigammaln, erfinv, ndtr, ndtri, log_ndtr, the Bessel
functions i0, i0e, i1 and i1e, entr, xlog1py, erfcx (Cody's rational functions without their exp(-x²)) and the
Hurwitz zeta function (Cephes' Euler-Maclaurin sum). The other Bessel functions are in bessel.py.

lgamma, digamma and erfinv are primitives: eager mode runs their C loops on large CPU arrays
(templates/special_math.h.j2, as compiled code does on every target), where these compositions of fnx ops,
evaluated on the arrays, cost 40-90 ns an element on one thread against 2-10 for torch's; the compositions
remain their impl elsewhere (small arrays, CuPy, no C compiler). Their derivatives are digamma, polygamma(1, .)
and √π/2 exp(erfinv(x)²). The other functions are compositions, which differentiate (to any order), batch
and compile like any other fnx code. The gamma-family functions move x up by a recurrence to z = x + shift, where an asymptotic (Stirling) series is
accurate to float64 rounding, and reflect x < 1/2 to 1 - x (log Γ, ψ and ψ⁽ⁿ⁾ are defined on the whole real
line, as in PyTorch). erfinv starts from Giles' single-precision approximation ("Approximating the erfinv
function", GPU Computing Gems, 2011; an asymptotic start in the far tail) and takes Newton steps on erf or, in
the tails, on log erfc, so float64 results are within a few ulp and the derivative is that of the exact
inverse: √π/2 exp(erfinv(x)²).
"""
from __future__ import annotations

import functools
import math

import numpy as np

from .autocast import autocast_op
from .. import core
from .. import dtypes as _dt
from ..core import FnxRuntimeError, FnxTypeError
from ..device import device_of_array
from ..errors import ConcretizationError
from ..tensor import Tensor, Tracer, make
from ._families import as_operand, promote, unary
from .creation import full_like, stop_gradient, tensor
from .elementwise import (_ERFC_C, _ERFC_D, _ERFC_P, _ERFC_Q, abs as _abs, cos, eq, erf, erfc, exp, floor, isinf,
                          isnan, log, log1p, neg, pow as _pow, round as _round, sin, sqrt, trunc, where)

__all__ = ["lgamma", "digamma", "polygamma", "mvlgamma", "erfinv", "i0", "erfcx", "zeta"]

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
# Bernoulli numbers B_2, B_4, ..., B_20
_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510, 43867 / 798, -174611 / 330)
_SHIFT = 10   # z = x + 10: the series' first omitted term is below 1e-17 of the result


def _floating(op: str, x) -> Tensor:
    """`x` as a floating tensor (integers and Python numbers become the default float dtype, as in PyTorch)."""
    x = as_operand(x, op)
    if not isinstance(x, Tensor):
        x = tensor(float(x), dtype=_dt.get_default_dtype())
    if not x.dtype.is_floating_point:
        x = x.to(_dt.get_default_dtype())
    return x


def _widened(fn, x: Tensor) -> Tensor:
    """fn(x) computed in float64 and rounded once to x's dtype: the gamma family subtracts nearly equal terms
    (log Γ(2.6) = 19.3 - 18.9), which float32 arithmetic would leave tens of ulps off."""
    if x.dtype is _dt.float64:
        return fn(x)
    return fn(x.to(_dt.float64)).to(x.dtype)


def _on_arrays(composition):
    """The impl of a special-function primitive where its C loop does not run: `composition` (fnx ops) in float64
    on the arrays (numpy or CuPy), evaluated eagerly with grad mode off whatever transforms are active, and
    rounded once to the operand's dtype."""
    def impl(xp, x):
        saved = core.enter_eager_mode()
        try:
            out = composition(make(x.astype(xp.float64, copy=False), device_of_array(x)))
        finally:
            core.leave_eager_mode(saved)
        return out._value.astype(x.dtype, copy=False)

    return impl


def quiet_numpy(fn):
    """`fn` without numpy's floating-point warnings, for special functions that overflow to ±inf as PyTorch's do
    (silently) or whose discarded `where` branches divide by zero."""
    @functools.wraps(fn)
    def quiet(*args):
        with np.errstate(all="ignore"):
            return fn(*args)
    return quiet


def _horner(coefs, w: Tensor) -> Tensor:
    """coefs[0] + coefs[1] w + coefs[2] w^2 + ..."""
    acc = coefs[-1] * w
    for c in reversed(coefs[1:-1]):
        acc = (acc + c) * w
    return acc + coefs[0]


def _reflection(x: Tensor) -> tuple:
    """(neg, y, r, special): where x < 1/2 (reflected to y = 1 - x; elsewhere y = x), r = x - round(x) there (0.25
    elsewhere), and where x is ±inf or a pole (0, -1, -2, ...). Those get the stand-in 0.25, so no inf - inf or
    division by zero happens (nor warns), and the unused branches of the callers' `where`s stay finite for
    gradients; the callers put the limits in."""
    special = isinf(x) | ((x <= 0.0) & eq(x, floor(x)))
    x = where(special, 0.25, x)
    neg = x < 0.5
    y = where(neg, 1.0 - x, x)
    r = where(neg, x - _round(x), 0.25)
    return neg, y, r, special


def _limits(x: Tensor, at_inf: float, at_minus_inf: float, at_zero: float, at_negative_integers: float) -> Tensor:
    """The values a gamma-family function takes at +inf, -inf, 0 and the negative integers."""
    rest = where(x < 0.0, at_negative_integers, full_like(x, at_zero))
    return where(eq(x, math.inf), at_inf, where(eq(x, -math.inf), at_minus_inf, rest))


# ---------------------------------------------------------------- lgamma
def _lgamma_positive(y: Tensor) -> Tensor:
    """log Γ(y) for y >= 1/2: Stirling's series at z = y + 10 (when y < 10) minus log(y (y + 1) ... (y + 9))."""
    small = y < _SHIFT
    s = where(small, y, 1.0)   # a large y would overflow the product, which it does not use
    prod = s
    for k in range(1, _SHIFT):
        prod = prod * (s + float(k))
    z = where(small, y + float(_SHIFT), y)
    inv = 1.0 / z
    coefs = [b / (2 * k * (2 * k - 1)) for k, b in enumerate(_BERNOULLI[:7], 1)]
    stirling = (z - 0.5) * log(z) - z + _HALF_LOG_2PI + inv * _horner(coefs, inv * inv)
    return stirling - where(small, log(prod), 0.0)


def _lgamma(x: Tensor) -> Tensor:
    neg, y, r, special = _reflection(x)
    positive = _lgamma_positive(y)
    reflected = math.log(math.pi) - log(_abs(sin(r * math.pi))) - positive
    return where(special, math.inf, where(neg, reflected, positive))


lgamma_p = unary("lgamma", _on_arrays(_lgamma), lambda x, out: digamma(x), float_only=True, expensive=True,
                 native=True, c={"f": "fnx_lgammaf({0})", "d": "fnx_lgamma({0})"})


def lgamma(input: Tensor) -> Tensor:
    """log |Γ(x)|, elementwise, for every real x (inf at 0 and the negative integers)."""
    return lgamma_p.bind(_floating("lgamma", input))


# ---------------------------------------------------------------- digamma and polygamma
def _digamma_positive(y: Tensor) -> Tensor:
    """ψ(y) for y >= 1/2: the asymptotic series at z = y + 10, minus 1/y + ... + 1/(y + 9)."""
    recurrence = 1.0 / y
    for k in range(1, _SHIFT):
        recurrence = recurrence + 1.0 / (y + float(k))
    z = y + float(_SHIFT)
    inv2 = 1.0 / (z * z)
    coefs = [-b / (2 * k) for k, b in enumerate(_BERNOULLI[:7], 1)]
    return log(z) - 0.5 / z + inv2 * _horner(coefs, inv2) - recurrence


def _digamma(x: Tensor) -> Tensor:
    neg, y, r, special = _reflection(x)
    positive = _digamma_positive(y)
    reflected = positive - math.pi * cos(r * math.pi) / sin(r * math.pi)   # (1 / tan: see polygamma)
    limits = _limits(x, math.inf, math.nan, -math.inf, math.nan)
    return where(special, limits, where(neg, reflected, positive))


digamma_p = unary("digamma", _on_arrays(_digamma), lambda x, out: polygamma(1, x), float_only=True,
                  expensive=True, native=True, c={"f": "fnx_digammaf({0})", "d": "fnx_digamma({0})"})


def digamma(input: Tensor) -> Tensor:
    """ψ(x) = d/dx log Γ(x), elementwise, for every real x (-inf at 0, nan at the negative integers)."""
    return digamma_p.bind(_floating("digamma", input))


def _cot_derivative_coefficients(n: int) -> list:
    """Coefficients of P_n with d^n/dx^n cot(πx) = π^n P_n(cot(πx)): P_0(c) = c, P_{k+1} = -(1 + c^2) P_k'(c)."""
    p = [0.0, 1.0]
    for _ in range(n):
        d = [i * p[i] for i in range(1, len(p))] + [0.0, 0.0]
        p = [-(d[i] + (d[i - 2] if i >= 2 else 0.0)) for i in range(len(d))]
    return p


def _polygamma_positive(n: int, y: Tensor) -> Tensor:
    """ψ⁽ⁿ⁾(y), n >= 1, y >= 1/2: (-1)^(n+1) [n! Σ_k (y + k)^-(n+1) + the asymptotic series at z = y + shift]."""
    shift = _SHIFT + n
    total = None
    for k in range(shift):
        term = (y + float(k)) ** float(-(n + 1))
        total = term if total is None else total + term
    z = y + float(shift)
    inv = 1.0 / z
    fact = math.factorial
    # (n-1)!/z^n + n!/(2 z^(n+1)) + Σ_k B_2k (2k+n-1)!/(2k)! / z^(2k+n)
    coefs = [fact(n - 1), fact(n) / 2]
    for k, b in enumerate(_BERNOULLI, 1):
        coefs += [b * fact(2 * k + n - 1) / fact(2 * k), 0.0]
    series = inv ** float(n) * _horner(coefs, inv)
    return (-1.0) ** (n + 1) * (fact(n) * total + series)


def polygamma(n: int, input: Tensor) -> Tensor:
    """ψ⁽ⁿ⁾(x), the n-th derivative of digamma (n = 0: digamma itself), elementwise, for every real x."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise FnxRuntimeError(f"polygamma: polygamma(n, x) does not support negative or non-integer n, got {n!r}")
    x = _floating("polygamma", input)
    if n == 0:
        return digamma(x)
    return _widened(lambda v: _polygamma(n, v), x)


def _polygamma(n: int, x: Tensor) -> Tensor:
    neg, y, r, special = _reflection(x)
    positive = _polygamma_positive(n, y)
    c = cos(r * math.pi) / sin(r * math.pi)   # not 1 / tan: its derivatives cancel catastrophically near r = 1/2
    derivative = _horner(_cot_derivative_coefficients(n), c) * math.pi ** (n + 1)
    reflected = (-1.0) ** n * positive - derivative   # ψ⁽ⁿ⁾(x) = (-1)^n ψ⁽ⁿ⁾(1 - x) - π dⁿ/dxⁿ cot(πx)
    pole = math.inf if n % 2 else math.nan   # (x + k)^-(n+1) from both sides: +inf for odd n, ±inf for even n
    return where(special, _limits(x, 0.0, math.nan, pole, pole), where(neg, reflected, positive))


def mvlgamma(input: Tensor, p: int) -> Tensor:
    """The multivariate log-gamma function of dimension p: p(p-1)/4 log π + Σ_j lgamma(x - j/2), j < p."""
    if isinstance(p, bool) or not isinstance(p, int) or p < 1:
        raise FnxRuntimeError(f"mvlgamma: p has to be greater than or equal to 1, got {p!r}")
    x = _floating("mvlgamma", input)
    total = p * (p - 1) / 4 * math.log(math.pi)
    for j in range(p):
        total = total + lgamma(x - j / 2)
    return total


# ---------------------------------------------------------------- erfinv and the normal quantile
_GILES_CENTRAL = (1.50140941, 0.246640727, -0.00417768164, -0.00125372503, 0.00021858087, -4.39150654e-06,
                  -3.5233877e-06, 3.43273939e-07, 2.81022636e-08)
_GILES_TAIL = (2.83297682, 1.00167406, 0.00943887047, -0.0076224613, 0.00573950773, -0.00367342844,
               0.00134934322, 0.000100950558, -0.000200214257)
_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)


def _inverse_erf(a: Tensor, q: Tensor) -> Tensor:
    """x >= 0 with erf(x) = a and erfc(x) = q = 1 - a, for 0 <= a < 1 (q given accurately, even where it is tiny;
    both carry the derivative: a may be a signed value times a constant sign, so the derivative at 0 survives).

    The start is Giles' approximation of w = -log(q (2 - q)) (w < 5 and w < 16, float32's range, where it holds),
    else erfc(x) ~ exp(-x^2) / (x √π) solved once; it is a constant for differentiation. Four Newton steps follow:
    on erf for a < 1/2, on log erfc above (where erf(x) - a would cancel), so each step's derivative with respect
    to a is 1 / erf'(x), that of the exact inverse.
    """
    w = neg(log(q * (2.0 - q)))
    central = _horner(_GILES_CENTRAL, w - 2.5) * a
    tail = _horner(_GILES_TAIL, sqrt(where(w < 5.0, 5.0, w)) - 3.0) * a
    big = where(w < 16.0, 16.0, w)
    far = sqrt(big - log(sqrt(big) * math.sqrt(math.pi)))
    x = stop_gradient(where(w < 5.0, central, where(w < 16.0, tail, far)))
    small = a < 0.5
    log_q = log(where(small, 0.5, q))
    for _ in range(4):
        slope = _TWO_OVER_SQRT_PI * exp(neg(x * x))
        c = erfc(x)
        on_erf = (erf(x) - a) / slope
        on_log_erfc = (log_q - log(where(small, 0.5, c))) * c / slope   # Newton on log erfc(x) = log q
        x = x - where(small, on_erf, on_log_erfc)
    return x


def _erfinv(y: Tensor) -> Tensor:
    s = where(y < 0.0, -1.0, full_like(y, 1.0))
    inside = _abs(y) < 1.0
    a = where(inside, s * y, 0.0)
    x = s * _inverse_erf(a, 1.0 - a)
    edge = where(eq(y, 1.0), math.inf, where(eq(y, -1.0), -math.inf, full_like(y, math.nan)))
    return where(inside, x, edge)


# d/dy erfinv(y) = 1 / erf'(x) = √π/2 exp(x²), x = erfinv(y): that of the exact inverse, from the output
erfinv_p = unary("erfinv", _on_arrays(_erfinv), lambda y, out: exp(out * out) * (math.sqrt(math.pi) / 2),
                 float_only=True, expensive=True, native=True, saves_output=True,
                 c={"f": "fnx_erfinvf({0})", "d": "fnx_erfinv({0})"})


@autocast_op("erfinv")
def erfinv(input: Tensor) -> Tensor:
    """The inverse error function, elementwise: erf(erfinv(y)) = y on (-1, 1); ±inf at ±1, nan beyond."""
    return erfinv_p.bind(_floating("erfinv", input))


def ndtr(input: Tensor) -> Tensor:
    """The standard normal CDF Φ(x) = erfc(-x / √2) / 2."""
    return 0.5 * erfc(_floating("special.ndtr", input) * -math.sqrt(0.5))


def ndtri(input: Tensor) -> Tensor:
    """The standard normal quantile Φ⁻¹(p), accurate for tiny p and 1 - p too; ±inf at 1 and 0, nan outside."""
    p = _floating("special.ndtri", input)
    low = p < 0.5
    inside = (p > 0.0) & (p < 1.0)
    safe = where(inside, p, 0.5)
    a = where(low, 1.0 - 2.0 * safe, 2.0 * safe - 1.0)   # |2p - 1|, exact for p in [1/4, 1]
    q = where(low, 2.0 * safe, 2.0 - 2.0 * safe)          # 1 - a, exact
    x = where(low, -math.sqrt(2.0), full_like(p, math.sqrt(2.0))) * _inverse_erf(a, q)
    edge = where(eq(p, 0.0), -math.inf, where(eq(p, 1.0), math.inf, full_like(p, math.nan)))
    return where(inside, x, edge)


# log Φ(x) in the far left tail: -x²/2 - log(-x) - log(2π)/2 + log(1 - 1/x² + 3/x⁴ - 15/x⁶ ...), the asymptotic
# series of the Mills ratio (its first omitted term is below 1e-16 of the sum for x < -20, 1e-8 for x < -8); erfc
# would underflow near x = -38 (x = -13 in float32)
_MILLS = tuple((-1) ** k * math.prod(range(1, 2 * k, 2)) for k in range(8))


def log_ndtr(input: Tensor) -> Tensor:
    """log Φ(x), accurate in both tails (no underflow for very negative x, no cancellation near Φ = 1)."""
    x = _floating("special.log_ndtr", input)
    start = -20.0 if x.dtype is _dt.float64 else -8.0
    far = x < start
    xf = where(far, x, start)   # each branch on inputs where it is finite, so the unused ones pass no NaN gradient
    inv2 = 1.0 / (xf * xf)
    asymptotic = -0.5 * xf * xf - log(neg(xf)) - _HALF_LOG_2PI + log(_horner(_MILLS, inv2))
    right = x > 0.0
    upper = log1p(-0.5 * erfc(where(right, x, 0.0) * math.sqrt(0.5)))   # log(1 - Φ(-x)): no cancellation near 1
    lower = log(0.5 * erfc(where(right | far, 0.0, x) * -math.sqrt(0.5)))
    return where(far, asymptotic, where(right, upper, lower))


# ---------------------------------------------------------------- Bessel I0 and I1
_BESSEL_TERMS = 46   # the power series in (x²/4)^k for |x| <= 30: its terms peak near k = |x| / 2, below 1e-18 by 45


def _asymptotic_coefficients(nu: int) -> tuple:
    """c_k of I_ν(x) ~ e^x / √(2πx) Σ c_k x^-k: (-1)^k (4ν² - 1²)(4ν² - 3²)...(4ν² - (2k-1)²) / (k! 8^k)."""
    return tuple((-1) ** k * math.prod(4 * nu * nu - (2 * j - 1) ** 2 for j in range(1, k + 1))
                 / (math.factorial(k) * 8 ** k) for k in range(14))


_ASYMPTOTIC = {0: _asymptotic_coefficients(0), 1: _asymptotic_coefficients(1)}


def _bessel_i_scaled(nu: int, x: Tensor) -> Tensor:
    """exp(-|x|) I_ν(x) for ν = 0, 1: the power series (x/2)^ν Σ (x²/4)^k / (k! (k + ν)!) for |x| <= 30, the
    asymptotic series above (times the sign of x for the odd I1)."""
    a = _abs(x)
    big = a > 30.0
    small = where(big, 0.0, x)
    q = small * small * 0.25
    term = full_like(x, 1.0 / math.factorial(nu))
    total = term
    for k in range(1, _BESSEL_TERMS):
        term = term * q / float(k * (k + nu))
        total = total + term
    series = total * exp(neg(_abs(small))) * (small * 0.5 if nu else 1.0)
    ab = where(big, a, 30.0)
    asymptotic = _horner(_ASYMPTOTIC[nu], 1.0 / ab) / sqrt(ab * (2 * math.pi))
    if nu:
        asymptotic = where(x < 0.0, neg(asymptotic), asymptotic)
    return where(big, asymptotic, series)


def _bessel_i(nu: int, x: Tensor) -> Tensor:
    """I_ν(x) = exp(|x|) times the scaled function; ±inf at ±inf."""
    infinite = isinf(x)
    finite = where(infinite, 0.0, x)
    limit = x if nu else _abs(x)
    return where(infinite, limit, _bessel_i_scaled(nu, finite) * exp(_abs(finite)))


def i0(input: Tensor) -> Tensor:
    """The modified Bessel function of the first kind of order 0, elementwise."""
    return _bessel_i(0, _floating("i0", input))


def i0e(input: Tensor) -> Tensor:
    """exp(-|x|) i0(x), without the overflow of i0 for large |x|."""
    return _bessel_i_scaled(0, _floating("special.i0e", input))


def i1(input: Tensor) -> Tensor:
    """The modified Bessel function of the first kind of order 1, elementwise."""
    return _bessel_i(1, _floating("special.i1", input))


def i1e(input: Tensor) -> Tensor:
    """exp(-|x|) i1(x), without the overflow of i1 for large |x|."""
    return _bessel_i_scaled(1, _floating("special.i1e", input))


# ---------------------------------------------------------------- erfcx
def _cody_rational(t: Tensor, num: tuple, den: tuple, n: int) -> Tensor:
    """Cody's rational function (fnx/ops/elementwise.py's `_rational`, in fnx ops):
    (num[-1] t^(n+1) + num[0] t^n + ... + num[n]) / (t^(n+1) + den[0] t^n + ... + den[n])."""
    xnum, xden = t * num[-1], t
    for i in range(n):
        xnum = (xnum + num[i]) * t
        xden = (xden + den[i]) * t
    return (xnum + num[n]) / (xden + den[n])


def _erfcx_positive(y: Tensor) -> Tensor:
    """exp(y²) erfc(y) for y >= 0.46875: Cody's rational functions without their exp(-y²) factor (CALERF's
    jint = 2), in y up to 4 and in 1/y² above."""
    mid = where(y <= 4.0, y, 4.0)
    near = _cody_rational(mid, _ERFC_C, _ERFC_D, 7)
    tail = where(y > 4.0, y, 4.0)
    inv = 1.0 / (tail * tail)
    far = (1 / math.sqrt(math.pi) - inv * _cody_rational(inv, _ERFC_P, _ERFC_Q, 4)) / tail
    return where(y <= 4.0, near, far)


def _erfcx(x: Tensor) -> Tensor:
    small = (_abs(x) <= 0.46875) | isnan(x)
    s = where(small, x, 0.0)
    central = exp(s * s) * erfc(s)
    y = where(small, 1.0, _abs(x))
    positive = _erfcx_positive(y)
    # x < -0.46875: 2 exp(x²) - erfcx(-x), exp(x²) as exp(h²) exp((x - h)(x + h)), h = x truncated to 1/16, so
    # that the rounding of x² costs no accuracy (Cody's CALERF)
    finite = (x < 0.0) & (x >= -26.7)   # below, exp(x²) overflows
    n = where(finite, x, -1.0)   # each branch on the inputs it is for: no inf * 0 in the unused ones' gradients
    h = trunc(n * 16.0) / 16.0
    negative = where(x < -26.7, math.inf, 2.0 * exp(h * h) * exp((n - h) * (n + h)) - positive)
    return where(small, central, where(x > 0.0, positive, negative))


@quiet_numpy
def erfcx(input) -> Tensor:
    """The scaled complementary error function exp(x²) erfc(x), elementwise, without erfc's underflow for large x
    (~1/(x√π) there); inf below x ≈ -26.6. Differentiable: d/dx = 2x erfcx(x) - 2/√π. float32 inputs are
    computed in float64 and rounded once."""
    return _widened(_erfcx, _floating("special.erfcx", input))


# ---------------------------------------------------------------- Hurwitz zeta
# Euler-Maclaurin's correction terms (Cephes zeta.c): (2k)! / B_2k for k = 1 ... 12
_ZETA_A = (12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
           -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15, 1.8152105401943546773e17,
           -7.1661652561756670113e18)
_ZETA_TERMS = 10   # terms summed directly for q >= 0: the correction starts at w = q + 9 >= 9, as Cephes


def _zeta_terms(q) -> int:
    """The number of terms summed directly: 10, and as many more as the most negative q needs to reach 0."""
    if isinstance(q, Tracer):
        raise ConcretizationError("special.zeta: q must be concrete (its smallest value sets the number of terms "
                                  "summed), but it is traced inside a transform; pass q as a Python number or a "
                                  "tensor from outside the transform")
    values = np.asarray(q.numpy(force=True) if isinstance(q, Tensor) else q, dtype=np.float64)
    low = float(np.min(values[np.isfinite(values)], initial=0.0))   # (±inf and nan take no terms: see zeta)
    return _ZETA_TERMS + (int(math.ceil(-low)) if low < 0.0 else 0)


def _zeta(x: Tensor, q: Tensor, terms: int) -> Tensor:
    """Σ_{k < terms} (q + k)^-x plus the Euler-Maclaurin tail from the last term's w = q + terms - 1 on (Cephes
    zeta.c, which sums until its terms are negligible instead of a fixed count)."""
    total = b = _pow(q, neg(x))
    for k in range(1, terms):
        b = _pow(q + float(k), neg(x))
        total = total + b
    w = q + float(terms - 1)
    total = total + b * w / (x - 1.0) - 0.5 * b
    a, k = 1.0, 0.0
    for coef in _ZETA_A:
        a = a * (x + k)
        b = b / w
        total = total + a * b / coef
        a = a * (x + (k + 1.0))
        b = b / w
        k += 2.0
    return total


@quiet_numpy
def zeta(input, other) -> Tensor:
    """The Hurwitz zeta function ζ(x, q) = Σ_k (k + q)^-x, elementwise with broadcasting (x = input, q = other;
    q = 1 gives Riemann's ζ(x)). As in PyTorch: inf at x = 1 and at the poles q = 0, -1, -2, ...; nan for x < 1
    and for q < 0 with a non-integer x. Differentiable in q (d/dq = -x ζ(x + 1, q), as PyTorch's) and in x."""
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise FnxTypeError("special.zeta: expected at least one Tensor argument")
    terms = _zeta_terms(other)
    x, q = promote("special.zeta", _float_or_number(input), _float_or_number(other))
    if not x.dtype.is_floating_point:
        x, q = x.to(_dt.get_default_dtype()), q.to(_dt.get_default_dtype())
    pole = (q <= 0.0) & eq(q, floor(q))
    undefined = (x < 1.0) | ((q < 0.0) & ~eq(x, floor(x)))
    ok = ~(pole | undefined | eq(x, 1.0))
    value = _widened(lambda v: _zeta(v, where(ok, q, 1.0).to(v.dtype), terms), where(ok, x, 2.0))
    return where(eq(x, 1.0) | (pole & ~(x < 1.0)), math.inf, where(undefined, math.nan, value))


# ---------------------------------------------------------------- entropy terms
def entr(input: Tensor) -> Tensor:
    """-x log x for x > 0, 0 at x = 0 and -inf for x < 0, elementwise."""
    x = _floating("special.entr", input)
    positive = x > 0.0
    value = neg(x) * log(where(positive, x, 1.0))
    return where(positive, value, where(eq(x, 0.0), 0.0, where(x < 0.0, -math.inf, x)))


def xlog1py(input, other) -> Tensor:
    """x * log1p(y), taken as 0 where x == 0 (unless y is nan). Its gradient in x is log1p(y) there too, as
    PyTorch's (0 where log1p(y) is not finite)."""
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise FnxTypeError("special.xlog1py: expected at least one Tensor argument")
    x, y = promote("special.xlog1py", _float_or_number(input), _float_or_number(other))
    infinite = eq(x, 0.0) & ((y <= -1.0) | (y == float("inf")))
    return x * log1p(where(infinite, 0.0, y))   # no 0 * inf where the result is 0


def _float_or_number(v):
    return v if not isinstance(v, Tensor) or v.dtype.is_floating_point else v.to(_dt.get_default_dtype())


def _polygamma_method(self: Tensor, n: int) -> Tensor:
    """`x.polygamma(n)`: polygamma(n, x)."""
    return polygamma(n, self)


METHODS: dict = {"lgamma": lgamma, "digamma": digamma, "erfinv": erfinv, "i0": i0, "mvlgamma": mvlgamma,
                 "polygamma": _polygamma_method}
INPLACE: dict = {"lgamma_": lgamma, "digamma_": digamma, "erfinv_": erfinv, "i0_": i0, "mvlgamma_": mvlgamma,
                 "polygamma_": _polygamma_method}
