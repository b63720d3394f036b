"""JAX's small example libraries over fnx: `optimizers` (init/update/get_params triples) and `stax` (layers as
init/apply pairs), with JAX's call signatures, so published JAX code that uses them runs on fnx."""
from . import optimizers, stax

__all__ = ["optimizers", "stax"]
