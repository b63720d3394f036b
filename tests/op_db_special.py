"""Op table: special functions (fnx/ops/special.py), against float64 references computed here from `math`."""
import math

import numpy as np
import scipy.special as sc
from hypothesis import strategies as st

import fnx
from op_db import OpInfo, Sample, binary_sample, floats, shapes


def _vectorize(f):
    return np.vectorize(f, otypes=[np.float64])


def _inverse(f, lo: float, hi: float, target: float, decreasing: bool = False) -> float:
    """The x in [lo, hi] with f(x) = target, by bisection to the last bit (f monotonic)."""
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if (f(mid) < target) != decreasing:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def erfinv_ref(y: float) -> float:
    """erfinv by bisection on math.erf (on math.erfc beyond 1/2, where erf would lose the small 1 - y); below 1e-8
    the series y √π/2 (1 + π y²/12) is exact to rounding."""
    if abs(y) < 1e-8:
        return y * math.sqrt(math.pi) / 2
    if abs(y) < 0.5:
        return _inverse(math.erf, -1.0, 1.0, y)
    return math.copysign(_inverse(math.erfc, 0.0, 40.0, 1.0 - abs(y), decreasing=True), y)


def ndtri_ref(p: float) -> float:
    """The normal quantile by bisection on Φ(x) = erfc(-x / √2) / 2, for p <= 1/2; -ndtri(1 - p) above (1 - p is
    exact there, and Φ near 1 would round)."""
    if p > 0.5:
        return -ndtri_ref(1.0 - p)
    return _inverse(lambda x: 0.5 * math.erfc(-x / math.sqrt(2)), -40.0, 0.0, p)


def polygamma_ref(n: int, x: float) -> float:
    """ψ⁽ⁿ⁾(x) from its series: ψ(x) = -γ + Σ_k (1/(k + 1) - 1/(x + k)) (n = 0), else (-1)^(n+1) n! Σ_k (x + k)^-(n+1),
    K = 20000 terms plus the Euler-Maclaurin tail ∫_K^∞ f + f(K)/2 - f'(K)/12."""
    K = 20000
    k = np.arange(K, dtype=np.float64)
    big = x + K
    if n == 0:
        head = np.sum(1.0 / (k + 1.0) - 1.0 / (x + k))
        tail = math.log(big / (K + 1.0)) - 0.5 / big + 0.5 / (K + 1.0) + (1.0 / (K + 1.0) ** 2 - 1.0 / big ** 2) / 12
        return -0.5772156649015329 + head + tail
    head = np.sum((x + k) ** -(n + 1.0))
    tail = big ** -n / n + 0.5 * big ** -(n + 1.0) + (n + 1) * big ** -(n + 2.0) / 12
    return (-1) ** (n + 1) * math.factorial(n) * (head + tail)


def bessel_i1_ref(x: float) -> float:
    """I1 by its power series (x/2) Σ (x²/4)^k / (k! (k + 1)!), 120 terms: positive terms, no cancellation."""
    q, term, total = x * x / 4, 1.0, 1.0
    for k in range(1, 120):
        term *= q / (k * (k + 1))
        total += term
    return x / 2 * total


def away_from_poles(x: np.ndarray) -> np.ndarray:
    """x moved at least 0.1 away from the non-positive integers (the poles of the gamma family)."""
    nearest = np.round(x)
    close = (nearest <= 0) & (np.abs(x - nearest) < 0.1)
    return np.where(close, nearest + 0.1 * np.where(x >= nearest, 1, -1) + 0.05 * np.sign(x - nearest + 1e-9), x)


@st.composite
def gamma_sample(draw, lo=-4.5, hi=12.0, **kwargs):
    x = draw(floats(draw(shapes(max_dims=2)), lo, hi))
    return Sample((away_from_poles(x),), kwargs)


@st.composite
def unit_sample(draw, lo, hi, avoid=None, **kwargs):
    x = draw(floats(draw(shapes(max_dims=2)), lo, hi))
    if avoid is not None:   # keep finite differences off a kink
        x = np.where(np.abs(x - avoid) < 0.05, avoid + 0.1, x)
    return Sample((x,), kwargs)


@st.composite
def degree_sample(draw, lo=-1.2, hi=1.2, top=12):
    """x in [lo, hi] and a degree n in [-1, top], a Python int (the recurrence's length must be concrete under
    transforms; test_special.py checks tensors of degrees)."""
    return Sample((draw(floats(draw(shapes(max_dims=2)), lo, hi)), draw(st.integers(-1, top))))


@st.composite
def zeta_sample(draw):
    """x in [1.2, 12] and q in [0.05, 20], a Python float (the number of terms is set by the smallest q, which must
    be concrete under transforms; test_special.py checks tensors of q and its gradient)."""
    return Sample((draw(floats(draw(shapes(max_dims=2)), 1.2, 12.0)), draw(st.floats(0.05, 20.0))))


def _polynomial_ref(eval_fn, shift: bool = False):
    """The polynomial from scipy.special's eval_* (of 2x - 1 when shifted): 0 for n < 0, as PyTorch's."""
    def ref(x, n):
        x, n = np.broadcast_arrays(x, n)
        y = 2 * x - 1 if shift else x
        return np.where(n < 0, 0.0, eval_fn(np.maximum(n, 0).astype(np.int64), y))
    return ref


def _chebyshev_v(n, x):
    """V_n = U_n - U_{n-1} (U_{-1} = 0)."""
    return sc.eval_chebyu(n, x) - np.where(n > 0, sc.eval_chebyu(np.maximum(n - 1, 0), x), 0.0)


def _chebyshev_w(n, x):
    """W_n = U_n + U_{n-1}."""
    return sc.eval_chebyu(n, x) + np.where(n > 0, sc.eval_chebyu(np.maximum(n - 1, 0), x), 0.0)


_POLYNOMIALS = [("chebyshev_polynomial_t", sc.eval_chebyt, False), ("chebyshev_polynomial_u", sc.eval_chebyu, False),
                ("chebyshev_polynomial_v", _chebyshev_v, False), ("chebyshev_polynomial_w", _chebyshev_w, False),
                ("shifted_chebyshev_polynomial_t", sc.eval_chebyt, True),
                ("shifted_chebyshev_polynomial_u", sc.eval_chebyu, True),
                ("shifted_chebyshev_polynomial_v", _chebyshev_v, True),
                ("shifted_chebyshev_polynomial_w", _chebyshev_w, True),
                ("hermite_polynomial_h", sc.eval_hermite, False), ("hermite_polynomial_he", sc.eval_hermitenorm, False),
                ("laguerre_polynomial_l", sc.eval_laguerre, False), ("legendre_polynomial_p", sc.eval_legendre, False)]

_lgamma = _vectorize(math.lgamma)
_digamma = _vectorize(lambda x: polygamma_ref(0, x))
_erfc = _vectorize(math.erfc)

OPS = [
    OpInfo("lgamma", fnx.lgamma, _lgamma, gamma_sample(), double_grad=True, atol=1e-5),
    OpInfo("lgamma_large", fnx.lgamma, _lgamma, unit_sample(5.0, 1e4), rtol=1e-5),
    OpInfo("digamma", fnx.digamma, _digamma, gamma_sample(), double_grad=True, rtol=1e-5, atol=1e-5),
    OpInfo("polygamma_1", lambda x: fnx.polygamma(1, x), _vectorize(lambda x: polygamma_ref(1, x)),
           gamma_sample(-3.5, 8.0), rtol=1e-5),
    OpInfo("polygamma_3", lambda x: fnx.polygamma(3, x), _vectorize(lambda x: polygamma_ref(3, x)),
           gamma_sample(-2.5, 8.0), rtol=1e-4),
    OpInfo("mvlgamma", lambda x: fnx.mvlgamma(x, 3), lambda x: 1.5 * math.log(math.pi) + _lgamma(x) +
           _lgamma(x - 0.5) + _lgamma(x - 1.0), unit_sample(1.2, 8.0), atol=1e-5),
    OpInfo("erfinv", fnx.erfinv, _vectorize(erfinv_ref), unit_sample(-0.95, 0.95), double_grad=True),
    OpInfo("erfinv_tails", fnx.erfinv, _vectorize(erfinv_ref), unit_sample(0.95, 0.9999).map(
        lambda s: Sample((s.args[0] * np.where(np.arange(s.args[0].size).reshape(s.args[0].shape) % 2, 1, -1),)))),
    OpInfo("special.ndtr", fnx.special.ndtr, lambda x: 0.5 * _erfc(-x / math.sqrt(2)), unit_sample(-8.0, 8.0)),
    OpInfo("special.ndtri", fnx.special.ndtri, _vectorize(ndtri_ref), unit_sample(1e-4, 1 - 1e-4)),
    OpInfo("special.log_ndtr", fnx.special.log_ndtr, lambda x: np.log(0.5 * _erfc(-x / math.sqrt(2))),
           unit_sample(-30.0, 8.0)),
    OpInfo("i0", fnx.i0, np.i0, unit_sample(-40.0, 40.0), rtol=1e-5),
    OpInfo("special.i0e", fnx.special.i0e, lambda x: np.i0(x) * np.exp(-np.abs(x)),
           unit_sample(-40.0, 40.0, avoid=0.0)),
    OpInfo("special.i1", fnx.special.i1, _vectorize(bessel_i1_ref), unit_sample(-40.0, 40.0), rtol=1e-5),
    OpInfo("special.i1e", fnx.special.i1e, lambda x: _vectorize(bessel_i1_ref)(x) * np.exp(-np.abs(x)),
           unit_sample(-40.0, 40.0, avoid=0.0)),
    OpInfo("special.entr", fnx.special.entr, lambda x: -x * np.log(x), unit_sample(0.05, 4.0)),
    # x = 0 exactly has PyTorch's zero derivative in x, which finite differences cannot see: moved off it
    OpInfo("special.xlog1py", fnx.special.xlog1py, lambda x, y: x * np.log1p(y),
           binary_sample(lo2=-0.9, hi2=3.0).map(lambda s: Sample((np.where(s.args[0] == 0, 0.5, s.args[0]),
                                                                 s.args[1])))),
]

# torch.special's Bessel and Airy functions and orthogonal polynomials are not differentiable (grad=False, as in
# PyTorch); erfcx and zeta are
OPS += [
    OpInfo("special.erfcx", fnx.special.erfcx, sc.erfcx, unit_sample(-8.0, 30.0), double_grad=True),
    OpInfo("special.zeta", fnx.special.zeta, sc.zeta, zeta_sample(), rtol=1e-5),
    OpInfo("special.bessel_j0", fnx.special.bessel_j0, sc.j0, unit_sample(-40.0, 40.0), grad=False),
    OpInfo("special.bessel_j1", fnx.special.bessel_j1, sc.j1, unit_sample(-40.0, 40.0), grad=False),
    OpInfo("special.bessel_y0", fnx.special.bessel_y0, sc.y0, unit_sample(0.05, 40.0), grad=False),
    OpInfo("special.bessel_y1", fnx.special.bessel_y1, sc.y1, unit_sample(0.05, 40.0), grad=False),
    OpInfo("special.modified_bessel_i0", fnx.special.modified_bessel_i0, sc.i0, unit_sample(-40.0, 40.0),
           grad=False),
    OpInfo("special.modified_bessel_i1", fnx.special.modified_bessel_i1, sc.i1, unit_sample(-40.0, 40.0),
           grad=False),
    OpInfo("special.modified_bessel_k0", fnx.special.modified_bessel_k0, sc.k0, unit_sample(0.01, 40.0),
           grad=False),
    OpInfo("special.modified_bessel_k1", fnx.special.modified_bessel_k1, sc.k1, unit_sample(0.01, 40.0),
           grad=False),
    OpInfo("special.scaled_modified_bessel_k0", fnx.special.scaled_modified_bessel_k0, sc.k0e,
           unit_sample(0.01, 40.0), grad=False),
    OpInfo("special.scaled_modified_bessel_k1", fnx.special.scaled_modified_bessel_k1, sc.k1e,
           unit_sample(0.01, 40.0), grad=False),
    OpInfo("special.spherical_bessel_j0", fnx.special.spherical_bessel_j0, lambda x: sc.spherical_jn(0, x),
           unit_sample(-30.0, 30.0), grad=False),
    OpInfo("special.airy_ai", fnx.special.airy_ai, lambda x: sc.airy(x)[0], unit_sample(-15.0, 15.0),
           grad=False),
]
# float32 Chebyshev values follow PyTorch's closed forms (through acos), which lose digits next to x = +-1:
# test_special_torch.py records torch's float32 values there; the table checks them in float64
OPS += [OpInfo(f"special.{name}", getattr(fnx.special, name), _polynomial_ref(fn, shifted),
               degree_sample(-0.2 if shifted else -1.2, 1.2 if shifted else 1.2), grad=False, rtol=1e-4, atol=1e-4,
               dtypes=("float64",) if "chebyshev" in name else ("float32", "float64"))
        for name, fn, shifted in _POLYNOMIALS]
