"""`fnx.special`: PyTorch's torch.special namespace.

The gamma family, erfinv, the normal distribution's functions and the Bessel functions are compositions in
fnx/ops/special.py (the incomplete gamma functions in fnx/scipy/special.py); the rest are fnx's own ops under
torch.special's names.
"""
from .nn.functional import log_softmax, softmax
from .ops.elementwise import erf, erfc, exp2, expm1, log1p, logit, round, sigmoid as expit, sinc, xlogy
from .ops.reduce import logsumexp
from .ops.special import (digamma, entr, erfinv, i0, i0e, i1, i1e, lgamma as gammaln, log_ndtr,
                          mvlgamma as multigammaln, ndtr, ndtri, polygamma, xlog1py)
from .scipy.special import gammainc, gammaincc

psi = digamma

__all__ = ["erf", "erfc", "erfinv", "expit", "logit", "gammaln", "digamma", "psi", "polygamma", "multigammaln",
           "xlogy", "xlog1py", "log_ndtr", "ndtr", "ndtri", "i0", "i0e", "i1", "i1e", "sinc", "entr", "logsumexp",
           "softmax", "log_softmax", "log1p", "expm1", "exp2", "round", "gammainc", "gammaincc"]
