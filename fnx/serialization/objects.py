"""Classes and functions by name in fnx's format: what `fnx.save` records for them, and which `fnx.load` rebuilds.

`fnx.save(model)` records a whole module as its class's path and its attributes, as pickle does, but as data:
loading never imports a module or calls anything named in the file. A name resolves only to

- a class or function the caller allowed (`fnx.serialization.add_safe_globals` / `safe_globals`), or
- fnx's own: a subclass of `fnx.nn.Module` (instances and class values), or a public function (one its module
  lists in `__all__`) of fnx's ops or nn modules (an activation kept as an attribute: `self.act = F.gelu`),

looked up in modules that are already imported; anything else raises `UnpicklingError` naming it and the fix.
`fnx.load(weights_only=False)` trusts the file, as `torch.load(weights_only=False)` does: then any class or
function defined in an already-imported module (the script's own `__main__` classes included) resolves.
"""
from __future__ import annotations

import sys
import types
from typing import Any

from ..core import FnxTypeError
from ..nn.module import Module
from .common import UnpicklingError, safe_global_table, short

__all__ = ["global_path", "resolve_class", "resolve_global", "new_instance"]


def global_path(obj, where: str) -> dict:
    """`{"module": ..., "name": ...}` for a class or function defined at a module's top level."""
    module, name = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not (isinstance(module, str) and isinstance(name, str)) or "<" in name:
        raise FnxTypeError(f"{where} is {short(obj)}, which has no importable name (a lambda or a local class or "
                           f"function); define it at a module's top level to save it by name")
    return {"module": module, "name": name}


def resolve_class(path, trusted: bool = False) -> type:
    """The class an `{"object": ...}` entry names: an allowed class, or an fnx.nn.Module subclass (or, when the
    caller trusts the file, any class of an imported module)."""
    module, name = _split(path)
    found = safe_global_table().get(f"{module}.{name}")
    if isinstance(found, type):
        return found
    own = _defined_in(module, name, trusted)
    if isinstance(own, type) and (trusted or issubclass(own, Module)):
        return own
    raise UnpicklingError(f"fnx.load: the file holds an instance of {module}.{name}, which is not allowed: fnx.load "
                          f"rebuilds fnx's own modules and the classes you allow. If you trust this file, allow the "
                          f"class with fnx.serialization.add_safe_globals([{name}]) or the safe_globals([...]) "
                          f"context manager (after importing it)")


def resolve_global(path, trusted: bool = False) -> Any:
    """The class or function a `{"global": ...}` value names: an allowed one, an fnx.nn.Module subclass, or a
    public function of fnx's ops or nn modules (or, when the caller trusts the file, any class or function of an
    imported module)."""
    module, name = _split(path)
    table = safe_global_table()
    if f"{module}.{name}" in table:
        return table[f"{module}.{name}"]
    own = _defined_in(module, name, trusted)
    if isinstance(own, type) and (trusted or issubclass(own, Module)):
        return own
    if trusted and isinstance(own, (types.FunctionType, types.BuiltinFunctionType)):
        return own
    if (isinstance(own, (types.FunctionType, types.BuiltinFunctionType)) and module.split(".")[:2] in
            (["fnx", "nn"], ["fnx", "ops"]) and name in getattr(sys.modules[module], "__all__", ())):
        return own
    raise UnpicklingError(f"fnx.load: the file refers to {module}.{name}, which is not allowed: fnx.load resolves "
                          f"fnx's modules and public functions and what you allow. If you trust this file, allow it "
                          f"with fnx.serialization.add_safe_globals([{name}]) or the safe_globals([...]) context "
                          f"manager (after importing it)")


def new_instance(cls: type, state) -> Any:
    """An instance of `cls` made without running its `__init__`, given `state` as pickle gives it: through
    `__setstate__` if the class defines one, else as its attributes."""
    if not (isinstance(state, dict) and all(isinstance(k, str) for k in state)):
        raise UnpicklingError(f"fnx.load: the attributes of a {cls.__qualname__} are malformed: {short(state)}")
    try:
        obj = cls.__new__(cls)
        setstate = getattr(obj, "__setstate__", None)
        if setstate is not None:
            setstate(state)
        else:
            obj.__dict__.update(state)
    except (TypeError, ValueError, AttributeError) as e:
        raise UnpicklingError(f"fnx.load: could not rebuild a {cls.__qualname__} from its attributes ({e}); "
                              f"fnx.save records an object as its class and its __dict__, as pickle does") from e
    return obj


def _split(path) -> tuple[str, str]:
    if not (isinstance(path, dict) and set(path) == {"module", "name"} and isinstance(path["module"], str)
            and isinstance(path["name"], str)):
        raise UnpicklingError(f"fnx.load: malformed class or function name in the manifest: {short(path)}")
    return path["module"], path["name"]


def _defined_in(module: str, name: str, any_module: bool):
    """The object `module.name` if `module` is already imported (an fnx module unless `any_module`) and the object
    says it was defined there under that name (so no attribute of a module can stand for something imported into
    it)."""
    if not any_module and module != "fnx" and not module.startswith("fnx."):
        return None
    obj = sys.modules.get(module)
    for part in name.split("."):
        if obj is None or part.startswith("__"):
            return None
        obj = getattr(obj, part, None)
    if getattr(obj, "__module__", None) != module or getattr(obj, "__qualname__", None) != name:
        return None
    return obj
