"""jax.scipy.stats over fnx ops: the `norm`, `multivariate_normal`, `bernoulli` and `beta` modules, each with
SciPy's function names and keyword arguments (loc, scale, ...)."""
from . import bernoulli, beta, multivariate_normal, norm

__all__ = ["norm", "multivariate_normal", "bernoulli", "beta"]
