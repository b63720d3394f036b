"""fnx.lax: JAX's `jax.lax` API over fnx's primitives.

Control flow (`cond`, `switch`, `while_loop`, `fori_loop`, `scan`, `map`, `associative_scan`), dynamic slices,
`dot_general`, `conv_general_dilated`, `reduce_window`, and the elementwise, shape and reduction functions under
their lax names and signatures. Everything is a composition of fnx ops (or fnx's control-flow primitives), so
it works under grad, vjp, jvp, vmap and compile. Differences from JAX: operands of different dtypes are
promoted rather than rejected, `precision` and `unroll` arguments are accepted and ignored, `fori_loop`'s
index is int64.
"""
from . import contraction as _contraction, control as _control, convolution as _convolution
from . import elementwise as _elementwise, reductions as _reductions, slicing as _slicing
from .contraction import *  # noqa: F401,F403  (each module lists its public names in __all__)
from .control import *  # noqa: F401,F403
from .convolution import *  # noqa: F401,F403
from .elementwise import *  # noqa: F401,F403
from .reductions import *  # noqa: F401,F403
from .slicing import *  # noqa: F401,F403

__all__ = [*_control.__all__, *_convolution.__all__, *_contraction.__all__, *_elementwise.__all__,
           *_reductions.__all__, *_slicing.__all__]
