"""`jax.tree` under fnx's jax alias: JAX's short names for the pytree functions (`jax.tree.map`, ...), which fnx
calls `fnx.tree_util.tree_map`, ..."""
from .tree_util import tree_all as all
from .tree_util import tree_flatten as flatten
from .tree_util import tree_leaves as leaves
from .tree_util import tree_map as map
from .tree_util import tree_reduce as reduce
from .tree_util import tree_structure as structure
from .tree_util import tree_unflatten as unflatten

__all__ = ["all", "flatten", "leaves", "map", "reduce", "structure", "unflatten"]
