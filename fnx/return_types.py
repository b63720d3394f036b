"""`fnx.return_types` (torch.return_types): the named-tuple types of ops that return several tensors, under torch's
names, for `isinstance` checks and type hints. Each is the type the op returns (torch.linalg's ops under their
`linalg_` names; `lu_unpack` shares `linalg_lu`'s type, as its fields are the same)."""
from __future__ import annotations

from .ops.decompositions import CholeskyExResult as linalg_cholesky_ex
from .ops.decompositions import SlogdetResult as slogdet
from .ops.decompositions import TriangularSolveResult as triangular_solve
from .ops.elementwise import frexp_result as frexp
from .ops.ldl import LDLFactorExResult as linalg_ldl_factor_ex
from .ops.ldl import LDLFactorResult as linalg_ldl_factor
from .ops.least_squares import LstsqResult as linalg_lstsq
from .ops.lu import InvExResult as linalg_inv_ex
from .ops.lu import LUFactorExResult as linalg_lu_factor_ex
from .ops.lu import LUFactorResult as linalg_lu_factor
from .ops.lu import LUResult as linalg_lu
from .ops.lu import SolveExResult as linalg_solve_ex
from .ops.reduce import aminmax_result as aminmax
from .ops.reduce import cummax_result as cummax
from .ops.reduce import cummin_result as cummin
from .ops.reduce import max_result as max
from .ops.reduce import min_result as min
from .ops.sort import kthvalue_result as kthvalue
from .ops.sort import median_result as median
from .ops.sort import mode_result as mode
from .ops.sort import nanmedian_result as nanmedian
from .ops.sort import sort_result as sort
from .ops.sort import topk_result as topk
from .ops.spectral import EigResult as linalg_eig
from .ops.spectral import EighResult as linalg_eigh
from .ops.spectral import GeqrfResult as geqrf
from .ops.spectral import LegacySVDResult as svd
from .ops.spectral import QRResult as qr
from .ops.spectral import SVDResult as linalg_svd
from .ops.statistics import histogram_result as histogram
from .ops.statistics import histogramdd_result as histogramdd

__all__ = ["aminmax", "cummax", "cummin", "frexp", "geqrf", "histogram", "histogramdd", "kthvalue",
           "linalg_cholesky_ex", "linalg_eig", "linalg_eigh", "linalg_inv_ex", "linalg_ldl_factor",
           "linalg_ldl_factor_ex", "linalg_lstsq", "linalg_lu", "linalg_lu_factor", "linalg_lu_factor_ex", "linalg_qr",
           "linalg_slogdet", "linalg_solve_ex", "linalg_svd", "lu_unpack", "max", "median", "min", "mode", "nanmedian",
           "qr", "slogdet", "sort", "svd", "topk", "triangular_solve"]

linalg_qr = qr
linalg_slogdet = slogdet
lu_unpack = linalg_lu
