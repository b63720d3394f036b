"""Modules as pytrees (Equinox style): the leaves of a module are its parameters (in named_parameters order)
then its floating-point buffers; unflattening builds a shallow copy of the module tree holding new leaves,
without calling __init__. Every Module subclass registers these two functions with fnx.tree.

Flattening walks the whole module tree, and a compiled call flattens its module arguments at every call, so
the result is remembered per module (a flattening plan) with a snapshot of everything it depends on: each
submodule's training flag and its parameter, buffer and submodule dicts (the dict objects, their keys and
the identity of their values). A later flatten compares the snapshot by identity and reuses the plan when
nothing was registered, replaced or removed, by any route (attribute assignment, register_*, writes into
the dicts); parameter values changed in place are not structure and need no new plan.
"""
from __future__ import annotations

import operator
import weakref

__all__ = ["flatten_module", "unflatten_module"]


class _Layout:
    """Where a module tree's leaves live (per leaf, its (path, store, name) locations) and the structural key,
    with its hash computed once."""

    __slots__ = ("locations", "key", "hash")

    def __init__(self, locations: tuple, key: tuple):
        self.locations, self.key = locations, key
        self.hash = hash(key)


class _ModuleDef:
    """The static part of a flattened module: where each leaf lives, and a template to copy.

    Equality (which transforms use to match structures and key caches) is by structure: class, leaf
    locations, and every submodule's class and training flag; not by the template's identity.
    """

    __slots__ = ("template", "layout")

    def __init__(self, template, layout: _Layout):
        self.template, self.layout = template, layout

    @property
    def locations(self) -> tuple:
        return self.layout.locations

    @property
    def key(self) -> tuple:
        return self.layout.key

    def __eq__(self, other) -> bool:
        if not isinstance(other, _ModuleDef):
            return False
        a, b = self.layout, other.layout
        return a is b or (a.hash == b.hash and a.key == b.key)

    def __hash__(self) -> int:
        return self.layout.hash

    def __repr__(self) -> str:
        names = [".".join(x for x in (loc[0][0], loc[0][2]) if x) for loc in self.locations]
        return f"{type(self.template).__name__}<{', '.join(names)}>"


class _Plan:
    """A module's flattening, valid while `_snapshot(dicts)` is identical, item by item, to `state`.

    It holds the modules' `__dict__`s and a weak reference to the root, so it keeps no module alive.
    """

    __slots__ = ("ref", "dicts", "state", "leaves", "layout")

    def __init__(self, ref, dicts: tuple, leaves: tuple, layout: _Layout):
        self.ref, self.dicts, self.leaves, self.layout = ref, dicts, leaves, layout
        self.state = _snapshot(dicts)

    def valid(self) -> bool:
        now = _snapshot(self.dicts)
        return len(now) == len(self.state) and all(map(operator.is_, now, self.state))


def _snapshot(dicts: tuple) -> list:
    """Everything a module tree's flattening depends on, as objects compared by identity (never by value:
    a tensor's == is elementwise)."""
    out = []
    for d in dicts:
        p, b, m = d["_parameters"], d["_buffers"], d["_modules"]
        out += (d["training"], p, *p, *p.values(), b, *b, *b.values(), m, *m, *m.values())
    return out


_PLANS: dict[int, _Plan] = {}   # id(module) -> its plan; the entry goes when the module is collected


def _remember(module, dicts: tuple, leaves: tuple, layout: _Layout) -> None:
    key = id(module)

    def forget(ref, key=key):
        plan = _PLANS.get(key)
        if plan is not None and plan.ref is ref:
            del _PLANS[key]

    _PLANS[key] = _Plan(weakref.ref(module, forget), dicts, leaves, layout)


def _current_plan(module) -> _Plan | None:
    plan = _PLANS.get(id(module))
    if plan is not None and plan.ref() is module and plan.valid():
        return plan
    return None


def flatten_module(module):
    """Leaves: parameters in named_parameters order, then floating-point buffers; a shared tensor once.

    Integer buffers (BatchNorm's num_batches_tracked) are static: they stay with the template, so that
    `fnx.grad` (which needs floating-point leaves) accepts every model.
    """
    plan = _current_plan(module)
    if plan is not None:
        return list(plan.leaves), _ModuleDef(module, plan.layout)
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
    layout = _Layout(locations, (type(module), locations, tuple((p, type(m), m.training) for p, m in mods)))
    _remember(module, tuple(m.__dict__ for _, m in mods), tuple(leaves), layout)
    return leaves, _ModuleDef(module, layout)


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
