"""fnx.scipy: JAX's `jax.scipy` subset over fnx ops: `special`, `stats` and `linalg`.

Each function is a composition of fnx ops, so it works under grad, vmap and compile; SciPy itself is not
needed.
"""
from . import linalg, special, stats

__all__ = ["linalg", "special", "stats"]
