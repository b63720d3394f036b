"""Containers: Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict (PyTorch semantics and keys)."""
from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from itertools import islice
from typing import Any, Iterator

from ..tensor import Tensor
from .module import Module, _addindent
from .parameter import Parameter

__all__ = ["Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"]


def _abs_index(idx, n: int) -> int:
    idx = operator.index(idx)
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range")
    return idx % n


class Sequential(Module):
    """Modules applied in order; children are named "0", "1", ... or by the keys of an OrderedDict."""

    def __init__(self, *args: Module):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for idx, module in enumerate(args):
                self.add_module(str(idx), module)

    def _key_at(self, idx) -> str:
        n = len(self._modules)
        return next(islice(iter(self._modules), _abs_index(idx, n), None))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return self._modules[self._key_at(idx)]

    def __setitem__(self, idx: int, module: Module) -> None:
        setattr(self, self._key_at(idx), module)

    def __delitem__(self, idx) -> None:
        if isinstance(idx, slice):
            for key in list(self._modules)[idx]:
                delattr(self, key)
        else:
            delattr(self, self._key_at(idx))
        self.__dict__["_modules"] = OrderedDict((str(i), m) for i, m in enumerate(self._modules.values()))

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __add__(self, other: Sequential) -> Sequential:
        if not isinstance(other, Sequential):
            raise ValueError(f"add operator supports only objects of Sequential class, but {type(other)} is given.")
        return Sequential(*self, *other)

    def __mul__(self, other: int) -> Sequential:
        if not isinstance(other, int) or other <= 0:
            raise ValueError(f"Non-positive multiplication factor {other} for {type(self)}")
        return Sequential(*(list(self) * other))

    def append(self, module: Module) -> Sequential:
        self.add_module(str(len(self)), module)
        return self

    def insert(self, index: int, module: Module) -> Sequential:
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        n = len(self._modules)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        index = index + n if index < 0 else index
        mods = list(self._modules.values())
        mods.insert(index, module)
        self.__dict__["_modules"] = OrderedDict((str(i), m) for i, m in enumerate(mods))
        return self

    def extend(self, sequential: Iterable[Module]) -> Sequential:
        for m in sequential:
            self.append(m)
        return self

    def pop(self, key: int) -> Module:
        v = self[key]
        del self[key]
        return v

    def forward(self, input):
        for module in self:
            input = module(input)
        return input


class ModuleList(Module):
    """A list of modules, registered under the names "0", "1", ..."""

    def __init__(self, modules: Iterable[Module] | None = None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(_abs_index(idx, len(self)))]

    def __setitem__(self, idx: int, module: Module) -> None:
        setattr(self, str(_abs_index(idx, len(self))), module)

    def __delitem__(self, idx) -> None:
        if isinstance(idx, slice):
            for k in range(len(self._modules))[idx]:
                delattr(self, str(k))
        else:
            delattr(self, str(_abs_index(idx, len(self))))
        self.__dict__["_modules"] = OrderedDict((str(i), m) for i, m in enumerate(self._modules.values()))

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __iadd__(self, modules: Iterable[Module]) -> ModuleList:
        return self.extend(modules)

    def __add__(self, other: Iterable[Module]) -> ModuleList:
        return ModuleList([*self, *other])

    def insert(self, index: int, module: Module) -> None:
        for i in range(len(self._modules), index, -1):
            self._modules[str(i)] = self._modules[str(i - 1)]
        self._modules[str(index)] = module

    def append(self, module: Module) -> ModuleList:
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        if not isinstance(modules, Iterable):
            raise TypeError("ModuleList.extend should be called with an iterable, but got " + type(modules).__name__)
        offset = len(self)
        for i, module in enumerate(modules):
            self.add_module(str(offset + i), module)
        return self

    def pop(self, key: int) -> Module:
        v = self[key]
        del self[key]
        return v

    def __repr__(self) -> str:
        """PyTorch's compressed form: runs of identical children print once as `(0-2): 3 x Linear(...)`."""
        reprs = [repr(m) for m in self]
        if not reprs:
            return self._get_name() + "()"
        runs = [[0, 0, reprs[0]]]
        for i, r in enumerate(reprs[1:], 1):
            if r == runs[-1][2]:
                runs[-1][1] = i
            else:
                runs.append([i, i, r])
        lines = []
        for start, end, r in runs:
            head = f"({start})" if start == end else f"({start}-{end}): {end - start + 1} x"
            lines.append(_addindent(f"{head}: {r}" if start == end else f"{head} {r}", 2))
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"


class ModuleDict(Module):
    """An ordered dict of modules, registered under their keys."""

    def __init__(self, modules: Mapping[str, Module] | None = None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: str) -> bool:
        return key in self._modules

    def clear(self) -> None:
        self._modules.clear()

    def pop(self, key: str) -> Module:
        v = self[key]
        del self[key]
        return v

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules) -> None:
        items = modules.items() if isinstance(modules, Mapping) else modules
        for j, kv in enumerate(items):
            if not isinstance(kv, Mapping) and len(kv) != 2:
                raise ValueError(f"ModuleDict update sequence element #{j} has length {len(kv)}; 2 is required")
            self[kv[0]] = kv[1]


def _param_line(k, p) -> str:
    if isinstance(p, Tensor):
        size = "x".join(str(s) for s in p.shape)
        dev = f" ({p.device})" if p.device.type == "cuda" else ""
        kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
        return f"  ({k}): {kind} containing: [{p.dtype} of size {size}{dev}]"
    return f"  ({k}): Object of type: {type(p).__name__}"


def _as_parameter(value):
    return Parameter(value) if isinstance(value, Tensor) and not isinstance(value, Parameter) else value


class ParameterList(Module):
    """A list of parameters, registered under the names "0", "1", ...; plain tensors become Parameters."""

    def __init__(self, values: Iterable[Any] | None = None):
        super().__init__()
        self._size = 0
        if values is not None:
            self += values

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)([self[i] for i in range(len(self))[idx]])
        return getattr(self, str(_abs_index(idx, self._size)))

    def __setitem__(self, idx: int, param) -> None:
        setattr(self, str(_abs_index(idx, self._size)), _as_parameter(param))

    def __len__(self) -> int:
        return self._size

    def __iter__(self):
        return iter(self[i] for i in range(len(self)))

    def __iadd__(self, parameters: Iterable[Any]) -> ParameterList:
        return self.extend(parameters)

    def append(self, value) -> ParameterList:
        n = self._size
        self._size += 1
        setattr(self, str(n), _as_parameter(value))
        return self

    def extend(self, values: Iterable[Any]) -> ParameterList:
        if not isinstance(values, Iterable) or isinstance(values, Tensor):
            raise TypeError("ParameterList.extend should be called with an iterable, but got " + type(values).__name__)
        for v in values:
            self.append(v)
        return self

    def extra_repr(self) -> str:
        return "\n".join(_param_line(k, p) for k, p in enumerate(self))


class ParameterDict(Module):
    """An ordered dict of parameters, registered under their keys; plain tensors become Parameters."""

    def __init__(self, parameters: Any = None):
        super().__init__()
        self._keys: dict[str, None] = {}
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str):
        return getattr(self, key)

    def __setitem__(self, key: str, value) -> None:
        self._keys[key] = None
        setattr(self, key, _as_parameter(value))

    def __delitem__(self, key: str) -> None:
        del self._keys[key]
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __contains__(self, key: str) -> bool:
        return key in self._keys

    def keys(self):
        return self._keys.keys()

    def items(self):
        return ((k, self[k]) for k in self._keys)

    def values(self):
        return (self[k] for k in self._keys)

    def get(self, key: str, default=None):
        return self[key] if key in self else default

    def pop(self, key: str):
        v = self[key]
        del self[key]
        return v

    def clear(self) -> None:
        for k in list(self._keys):
            del self[k]

    def update(self, parameters) -> None:
        items = parameters.items() if isinstance(parameters, Mapping) else parameters
        for k, v in items:
            self[k] = v

    def extra_repr(self) -> str:
        return "\n".join(_param_line(k, p) for k, p in self.items())
