"""jax.scipy.stats over fnx ops: the `norm`, `multivariate_normal` and `bernoulli` modules, each with SciPy's
function names and keyword arguments (loc, scale, ...)."""
from . import bernoulli, multivariate_normal, norm

__all__ = ["norm", "multivariate_normal", "bernoulli"]
