"""`fnx.special`: PyTorch's torch.special namespace.

The gamma family, erfinv, erfcx, zeta, the normal distribution's functions and i0/i1 are compositions in
fnx/ops/special.py (the incomplete gamma functions in fnx/scipy/special.py), the other Bessel functions and
airy_ai in fnx/ops/bessel.py, the orthogonal polynomials in fnx/ops/polynomials.py; the rest are fnx's own ops
under torch.special's names.
"""
from .nn.functional import log_softmax, softmax
from .ops.elementwise import erf, erfc, exp2, expm1, log1p, logit, round, sigmoid as expit, sinc, xlogy
from .ops.reduce import logsumexp
from .ops.bessel import (airy_ai, bessel_j0, bessel_j1, bessel_y0, bessel_y1, modified_bessel_i0, modified_bessel_i1,
                         modified_bessel_k0, modified_bessel_k1, scaled_modified_bessel_k0, scaled_modified_bessel_k1,
                         spherical_bessel_j0)
from .ops.special import (digamma, entr, erfcx, erfinv, i0, i0e, i1, i1e, lgamma as gammaln, log_ndtr,
                          mvlgamma as multigammaln, ndtr, ndtri, polygamma, xlog1py, zeta)
from .ops.polynomials import (chebyshev_polynomial_t, chebyshev_polynomial_u, chebyshev_polynomial_v,
                              chebyshev_polynomial_w, hermite_polynomial_h, hermite_polynomial_he,
                              laguerre_polynomial_l, legendre_polynomial_p, shifted_chebyshev_polynomial_t,
                              shifted_chebyshev_polynomial_u, shifted_chebyshev_polynomial_v,
                              shifted_chebyshev_polynomial_w)
from .scipy.special import gammainc, gammaincc
from .ops.inplace import inplace
from .tensor import Tensor

psi = digamma

__all__ = ["erf", "erfc", "erfinv", "expit", "logit", "gammaln", "digamma", "psi", "polygamma", "multigammaln",
           "xlogy", "xlog1py", "log_ndtr", "ndtr", "ndtri", "i0", "i0e", "i1", "i1e", "sinc", "entr", "logsumexp",
           "softmax", "log_softmax", "log1p", "expm1", "exp2", "round", "gammainc", "gammaincc",
           "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
           "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
           "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l",
           "legendre_polynomial_p", "erfcx", "zeta", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1",
           "modified_bessel_i0", "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1",
           "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0", "airy_ai"]

# Tensor.igamma / igammac and their in-place forms: the functions live in this layer, above the Tensor methods
Tensor.igamma, Tensor.igammac = gammainc, gammaincc
Tensor.igamma_, Tensor.igammac_ = inplace(gammainc, "igamma_"), inplace(gammaincc, "igammac_")
