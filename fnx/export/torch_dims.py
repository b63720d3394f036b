"""torch.export's dynamic-shape specs: `Dim(name, min=, max=)`, `Dim.AUTO / STATIC / DYNAMIC`, `dims`,
`ShapesCollection`, and their resolution into fnx.export's symbolic dimensions.

A spec is given per argument of the module's forward (a dict by argument name or a tuple by position); for a
tensor it is `{axis: entry}` or a tuple with an entry per axis, for a container argument a container of specs of
the same structure. An entry is `None`, `Dim.STATIC` or an int (static), a `Dim` (a named symbol: equal names are
equal sizes, checked within `[min, max]`), `Dim.DYNAMIC` (an unnamed symbol) or `Dim.AUTO` (a symbol when the
program allows it, else static). As in PyTorch, sizes 0 and 1 are never symbolic: broadcasting gives them their
own meaning.
"""
from __future__ import annotations

import inspect
import math
from typing import Any, NamedTuple

from ..core import FnxRuntimeError, FnxTypeError
from ..tensor import Tensor
from ..tree import tree_flatten, tree_map

__all__ = ["Dim", "dims", "ShapesCollection", "ValueRanges", "DimHint", "resolve"]


class DimHint:
    """`Dim.AUTO`, `Dim.STATIC` or `Dim.DYNAMIC`: a dimension left to export to name (or to keep static);
    `Dim.DYNAMIC(min=3, max=10)` bounds it."""

    def __init__(self, kind: str, min: int | None = None, max: int | None = None):
        self.kind, self.min, self.max = kind, min, max

    def __call__(self, *, min: int | None = None, max: int | None = None) -> DimHint:
        return DimHint(self.kind, min, max)

    def __repr__(self) -> str:
        bounds = [f"{k}={v}" for k, v in (("min", self.min), ("max", self.max)) if v is not None]
        return f"DimHint({', '.join([self.kind, *bounds])})"


class Dim:
    """A named symbolic dimension for `torch.export.export(..., dynamic_shapes=)`, taking sizes in [min, max]
    (default [0, inf]). Example sizes 0 and 1 are never symbolic, and the default range starts at 2 (as in
    PyTorch, `min=1` lets the program run at size 1 too)."""

    AUTO = DimHint("AUTO")
    STATIC = DimHint("STATIC")
    DYNAMIC = DimHint("DYNAMIC")

    def __init__(self, name: str, *, min: int | None = None, max: int | None = None):
        if not isinstance(name, str) or not name.isidentifier():
            raise FnxTypeError(f"torch.export.Dim: the name is a Python identifier, got {name!r}")
        low = 0 if min is None else min
        high = math.inf if max is None else max
        if low < 0 or high < low:
            raise FnxRuntimeError(f"torch.export.Dim({name!r}): the range [{low}, {high}] is empty or negative")
        self.__name__, self.min, self.max = name, low, high

    def __repr__(self) -> str:
        bounds = ([] if self.min == 2 else [f"min={self.min}"]) + ([] if self.max == math.inf else [f"max={self.max}"])
        return f"Dim({', '.join([repr(self.__name__), *bounds])})"

    def _derived(self, *_):
        raise NotImplementedError(f"torch.export.Dim: derived dimensions ({self.__name__} * 2, {self.__name__} + 1) "
                                  f"are not supported by fnx's exporter; give each such dimension its own Dim, or "
                                  f"make it static")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __floordiv__ = _derived


def dims(*names: str, min: int | None = None, max: int | None = None) -> tuple[Dim, ...]:
    """One `Dim` per name, all with the range [min, max]."""
    return tuple(Dim(name, min=min, max=max) for name in names)


class ValueRanges(NamedTuple):
    """A symbol's range of sizes, as `ExportedProgram.range_constraints` gives it (`upper` may be inf)."""

    lower: int
    upper: float

    def __str__(self) -> str:
        return f"[{self.lower}, {'int_oo' if self.upper == math.inf else self.upper}]"

    def __repr__(self) -> str:
        return f"VR{self}"


class ShapesCollection:
    """dynamic_shapes by tensor: `sc[x] = {0: batch}` for tensors inside the example inputs, then
    `sc.dynamic_shapes(mod, args, kwargs)` (or passing `sc` itself to export) builds the spec by argument name."""

    def __init__(self):
        self._specs: dict[int, tuple[Tensor, Any]] = {}

    def __setitem__(self, t: Tensor, spec) -> None:
        if not isinstance(t, Tensor):
            raise FnxTypeError(f"ShapesCollection: keys are tensors of the example inputs, got {type(t).__name__}")
        self._specs[id(t)] = (t, spec)

    def __getitem__(self, t: Tensor):
        return self._specs[id(t)][1]

    def __contains__(self, t) -> bool:
        return id(t) in self._specs

    def __len__(self) -> int:
        return len(self._specs)

    def dynamic_shapes(self, m, args: tuple, kwargs: dict | None = None) -> dict:
        """The spec by argument name of `m`'s forward: each tensor's entry where one was set, else None."""
        names = positional_names(m, len(args))
        values = {**dict(zip(names, args)), **(kwargs or {})}
        return {name: tree_map(lambda x: self[x] if x in self else None, value) for name, value in values.items()}


def positional_names(mod, n: int) -> list[str]:
    """The names of the module's forward's first `n` positional parameters (`args_<i>` past those it names)."""
    try:
        params = [p for p in inspect.signature(mod.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return [params[i].name if i < len(params) else f"args_{i}" for i in range(n)]


class Resolved(NamedTuple):
    """The dynamic dimensions found in a spec: per tensor leaf `{axis: symbol}`, the symbols' ranges, and which
    symbols are `Dim.AUTO` (static where the program cannot take them dynamic)."""

    leaf_dims: list
    ranges: dict
    auto: set


def resolve(mod, args: tuple, kwargs: dict, dynamic_shapes, labels: list[str]) -> Resolved:
    """Resolve `dynamic_shapes` against the example inputs; `labels` names each leaf of `(args, kwargs)` in
    flattening order, for messages."""
    names = positional_names(mod, len(args))
    inputs = list(args) + [kwargs[k] for k in kwargs]
    all_names = names + list(kwargs)
    if isinstance(dynamic_shapes, ShapesCollection):
        dynamic_shapes = dynamic_shapes.dynamic_shapes(mod, args, kwargs)
    if dynamic_shapes is None:
        per_arg = [None] * len(inputs)
    elif isinstance(dynamic_shapes, dict):
        unknown = [k for k in dynamic_shapes if k not in all_names]
        if unknown:
            raise FnxRuntimeError(f"torch.export.export: when `dynamic_shapes` is specified as a dict, its top-level "
                                  f"keys must be the arg names {all_names} of `inputs`, but here they are "
                                  f"{list(dynamic_shapes)}. Alternatively, give `dynamic_shapes` as a list/tuple "
                                  f"matching `inputs`")
        per_arg = [dynamic_shapes.get(k) for k in all_names]
    elif isinstance(dynamic_shapes, (tuple, list)):
        if len(dynamic_shapes) != len(inputs):
            raise FnxRuntimeError(f"torch.export.export: detected mismatch between the structure of `inputs` and "
                                  f"`dynamic_shapes`: `inputs` has {len(inputs)} elements, but `dynamic_shapes` has "
                                  f"{len(dynamic_shapes)} elements")
        per_arg = list(dynamic_shapes)
    else:
        raise FnxTypeError(f"torch.export.export: dynamic_shapes is a dict by argument name, a tuple by position or "
                           f"a ShapesCollection, not a {type(dynamic_shapes).__name__}")
    # (args, kwargs) flattens as fnx's pytrees do (dict keys sorted): pair each leaf with its entry that way
    entries = dict(zip(all_names, per_arg))
    spec_tree = (tuple(entries[n] for n in names), {k: entries[k] for k in kwargs})
    leaves, _ = tree_flatten((args, kwargs))
    specs = _leaf_specs((args, kwargs), spec_tree, "dynamic_shapes")
    state = _Symbols()
    leaf_dims = [state.leaf(x, spec, label) if isinstance(x, Tensor) else {}
                 for x, spec, label in zip(leaves, specs, labels)]
    return Resolved(leaf_dims, state.ranges, state.auto)


def _leaf_specs(value, spec, where: str) -> list:
    """The spec of each leaf of `value` (fnx's flattening order), `spec` mirroring its structure."""
    if isinstance(value, Tensor) or spec is None:
        return [spec] if isinstance(value, Tensor) else [None] * len(tree_flatten(value)[0])
    if isinstance(value, dict) and isinstance(spec, dict):
        if set(spec) - set(value):
            raise FnxRuntimeError(f"torch.export.export: {where} names keys {sorted(set(spec) - set(value))} that "
                                  f"the input does not have")
        return [s for k in sorted(value) for s in _leaf_specs(value[k], spec.get(k), f"{where}[{k!r}]")]
    if isinstance(value, (tuple, list)) and isinstance(spec, (tuple, list)) and len(spec) == len(value):
        return [s for i, (v, sp) in enumerate(zip(value, spec)) for s in _leaf_specs(v, sp, f"{where}[{i}]")]
    if not isinstance(value, (tuple, list, dict)):
        return [None] * len(tree_flatten(value)[0])   # an int, a flag, None: constants of the program
    raise FnxRuntimeError(f"torch.export.export: {where} is {spec!r}, which does not match the structure of the "
                          f"input ({type(value).__name__} of {len(value)})")


class _Symbols:
    """Names the symbols of the dynamic dimensions and collects their ranges."""

    def __init__(self):
        self.ranges: dict[str, ValueRanges] = {}
        self.auto: set[str] = set()
        self.sizes: dict[str, int] = {}

    def leaf(self, x: Tensor, spec, label: str) -> dict:
        if spec is None:
            return {}
        if isinstance(spec, (tuple, list)):
            if len(spec) != x.ndim:
                raise FnxRuntimeError(f"torch.export.export: the dynamic_shapes of {label} has {len(spec)} entries, "
                                      f"but it has {x.ndim} dimensions")
            spec = dict(enumerate(spec))
        if not isinstance(spec, dict):
            raise FnxRuntimeError(f"torch.export.export: the dynamic_shapes of tensor {label} is a dict "
                                  f"{{axis: Dim}} or a tuple with an entry per axis, not {spec!r}")
        out = {}
        for axis, entry in spec.items():
            if not isinstance(axis, int) or not -x.ndim <= axis < x.ndim:
                raise FnxRuntimeError(f"torch.export.export: dynamic_shapes names axis {axis!r} of {label}, which "
                                      f"has shape {list(x.shape)}")
            axis %= x.ndim
            name = self.entry(entry, int(x.shape[axis]), f"{label}.size()[{axis}]")
            if name is not None:
                out[axis] = name
        return out

    def entry(self, entry, size: int, where: str) -> str | None:
        """The symbol an entry names for a dimension of this example size (None: static)."""
        if entry is None or isinstance(entry, DimHint) and entry.kind == "STATIC":
            return None
        if isinstance(entry, int) and not isinstance(entry, bool):
            if entry != size:
                raise FnxRuntimeError(f"torch.export.export: dynamic_shapes gives {where} the static size {entry}, "
                                      f"but the example's is {size}")
            return None
        if isinstance(entry, DimHint):   # AUTO or DYNAMIC
            if size < 2:
                if entry.kind == "DYNAMIC":
                    raise self._specialized(where, size, "Dim.DYNAMIC")
                return None
            name = f"s{len(self.ranges)}"
            found = ValueRanges(entry.min or 2, math.inf if entry.max is None else entry.max)
            if not found.lower <= size <= found.upper:
                raise FnxRuntimeError(f"torch.export.export: constraints violated ({name})! {where} is {size}, not "
                                      f"in range {found} of {entry!r}")
            if entry.kind == "AUTO":
                self.auto.add(name)
            self.ranges[name], self.sizes[name] = found, size
            return name
        if not isinstance(entry, Dim):
            raise FnxRuntimeError(f"torch.export.export: unexpected dimension {entry!r} at {where} (expected None, "
                                  f"an int, a Dim, Dim.AUTO, Dim.STATIC, or Dim.DYNAMIC)")
        name = entry.__name__
        found = ValueRanges(entry.min or 2, entry.max)   # as in PyTorch: min=0 (the default) is 2, min=1 stays
        if not entry.min <= size <= entry.max:
            raise FnxRuntimeError(f"torch.export.export: constraints violated ({name})! {where} is {size}, not in "
                                  f"range {found}")
        if size < 2:
            raise self._specialized(where, size, name)
        if name in self.sizes and (self.sizes[name], self.ranges[name]) != (size, found):
            raise FnxRuntimeError(f"torch.export.export: constraints violated ({name})! {where} is {size}, but "
                                  f"another dimension marked {name} is {self.sizes[name]}")
        self.ranges[name], self.sizes[name] = found, size
        return name

    @staticmethod
    def _specialized(where: str, size: int, name: str) -> FnxRuntimeError:
        return FnxRuntimeError(f"torch.export.export: constraints violated ({name})! You marked {where} as dynamic "
                               f"but the example's size is {size}, a constant: sizes 0 and 1 are never dynamic. Use "
                               f"an example of size 2 or more, or Dim.STATIC / Dim.AUTO there")
