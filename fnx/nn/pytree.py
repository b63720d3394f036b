"""Modules as pytrees (Equinox style): the leaves of a module are its parameters (in named_parameters order)
then its floating-point buffers; unflattening builds a shallow copy of the module tree holding new leaves,
without calling __init__. Every Module subclass registers these two functions with fnx.tree.
"""
from __future__ import annotations

__all__ = ["flatten_module", "unflatten_module"]


class _ModuleDef:
    """The static part of a flattened module: where each leaf lives, and a template to copy.

    Equality (which transforms use to match structures and key caches) is by structure: class, leaf
    locations, and every submodule's class and training flag; not by the template's identity.
    """

    __slots__ = ("template", "locations", "key")

    def __init__(self, template, locations: tuple, key: tuple):
        self.template, self.locations, self.key = template, locations, key

    def __eq__(self, other) -> bool:
        return isinstance(other, _ModuleDef) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        names = [".".join(x for x in (loc[0][0], loc[0][2]) if x) for loc in self.locations]
        return f"{type(self.template).__name__}<{', '.join(names)}>"


def flatten_module(module):
    """Leaves: parameters in named_parameters order, then floating-point buffers; a shared tensor once.

    Integer buffers (BatchNorm's num_batches_tracked) are static: they stay with the template, so that
    `fnx.grad` (which needs floating-point leaves) accepts every model.
    """
    mods = list(module.named_modules())
    leaves, locations, index = [], [], {}
    for store in ("_parameters", "_buffers"):
        for path, m in mods:
            for name, t in m.__dict__[store].items():
                if t is None or (store == "_buffers" and not t.dtype.is_floating_point):
                    continue
                i = index.get(id(t))
                if i is None:
                    i = index[id(t)] = len(leaves)
                    leaves.append(t)
                    locations.append([])
                locations[i].append((path, store, name))
    locations = tuple(tuple(loc) for loc in locations)
    key = (type(module), locations, tuple((p, type(m), m.training) for p, m in mods))
    return leaves, _ModuleDef(module, locations, key)


def unflatten_module(aux: _ModuleDef, leaves):
    """A shallow copy of the template module tree with `leaves` in the flattened places (no __init__ call)."""
    root = _copy_tree(aux.template, {})
    for leaf, locs in zip(leaves, aux.locations):
        for path, store, name in locs:
            root.get_submodule(path).__dict__[store][name] = leaf
    return root


def _copy_tree(m, memo: dict):
    """A copy of the module tree whose member dicts are new (shared submodules stay shared)."""
    c = memo.get(id(m))
    if c is not None:
        return c
    c = object.__new__(type(m))
    memo[id(m)] = c
    d = c.__dict__
    d.update(m.__dict__)
    d["_parameters"] = dict(m._parameters)
    d["_buffers"] = dict(m._buffers)
    d["_modules"] = {k: None if v is None else _copy_tree(v, memo) for k, v in m._modules.items()}
    return c
