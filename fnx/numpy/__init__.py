"""`fnx.numpy` (import it as `jnp`): the NumPy API over fnx tensors, with JAX's semantics where they differ.

Every function takes fnx tensors, numpy arrays, nested lists and Python scalars, and returns `fnx.Tensor`s
built from fnx's ops, so `fnx.grad`, `vmap`, `jvp` and `compile` apply to everything here. Default dtypes are
JAX's without x64 (float32, int32); docs/jax-numpy.md lists where fnx.numpy differs from jax.numpy.
"""
from math import e, inf, nan, pi

from ..tensor import Tensor
from . import fft, linalg
from .creation import *  # noqa: F401,F403  (each module lists its public names in __all__)
from .dtypes import *  # noqa: F401,F403
from .indexing import *  # noqa: F401,F403
from .manipulation import *  # noqa: F401,F403
from .numerical import *  # noqa: F401,F403
from .products import *  # noqa: F401,F403
from .reductions import *  # noqa: F401,F403
from .sets import *  # noqa: F401,F403
from .statistics import *  # noqa: F401,F403
from .ufuncs import *  # noqa: F401,F403
from . import creation, dtypes as _dtypes, indexing, manipulation, numerical, products, reductions, sets, statistics, \
    ufuncs

newaxis = None
euler_gamma = 0.5772156649015329
ndarray = Tensor   # jnp.ndarray is the array type: isinstance(x, jnp.ndarray)

_MODULES = (creation, _dtypes, indexing, manipulation, numerical, products, reductions, sets, statistics, ufuncs)
__all__ = sorted({name for module in _MODULES for name in module.__all__}) + ["e", "inf", "nan", "pi", "newaxis",
                                                                             "euler_gamma", "ndarray"]
