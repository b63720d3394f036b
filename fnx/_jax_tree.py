"""`jax.tree` under fnx's jax alias: JAX's short names for the pytree functions (`jax.tree.map`, ...), which fnx
calls `fnx.tree.tree_map`, ..."""
from .tree import tree_flatten as flatten
from .tree import tree_leaves as leaves
from .tree import tree_map as map
from .tree import tree_structure as structure
from .tree import tree_unflatten as unflatten

__all__ = ["flatten", "leaves", "map", "structure", "unflatten"]
