"""fnx standing in for `torch`: unmodified PyTorch programs import fnx when they import torch.

`install_torch_alias()` puts a finder first on `sys.meta_path` that answers `import torch` and every
`import torch.X.Y` with the fnx module of the same path (`torch.nn.functional` is `fnx.nn.functional`,
`torch.utils.data` is `fnx.utils.data`, ...), so no later import can load real PyTorch next to fnx. Each
`torch...` module is a thin alias object: reads and writes go to the fnx module it stands for (so
`torch.backends.cudnn.benchmark = True` sets fnx's flag), and a name fnx lacks raises an AttributeError or
ImportError that says fnx stands in for torch and what to do. fnx's own modules are not changed: `import fnx`
behaves the same with or without the alias. Processes started afresh from an aliased one (spawn, forkserver)
get the alias through fnx/_torch_shim. `python -m fnx run SCRIPT` installs it and runs the script.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import os
import runpy
import sys
import types

from .errors import FnxRuntimeError

__all__ = ["install_torch_alias", "run_script"]

_RENAMED = {  # torch modules whose fnx counterpart has another path
    "torch.optim.adamw": "fnx.optim.adam", "torch.nn.utils.clip_grad": "fnx.nn.utils",
    "torch.nn.utils.convert_parameters": "fnx.nn.utils", "torch.optim.adadelta": "fnx.optim.adagrad",
    "torch.optim.adamax": "fnx.optim.adam_variants", "torch.optim.nadam": "fnx.optim.adam_variants",
    "torch.optim.radam": "fnx.optim.adam_variants", "torch.nn.parallel.data_parallel": "fnx.nn.data_parallel",
}
_HELP = ("use what fnx offers instead (README 'Porting from PyTorch' lists the differences), or run the program "
         "with real PyTorch (plain `python`, without `-m fnx run` / fnx.install_torch_alias())")
_ALIASES: dict[str, _TorchModule] = {}
_SHIM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_torch_shim")


def _fnx_name(torch_name: str) -> str:
    return _RENAMED.get(torch_name, "fnx" + torch_name[len("torch"):])


class _TorchModule(types.ModuleType):
    """`torch.<path>` in an aliased program: attribute reads and writes go to the fnx module it stands for;
    a name that module lacks raises an AttributeError saying that fnx stands in for torch. Writes go to the fnx
    module, so `torch.backends.cudnn.benchmark = True` sets fnx's flag."""

    def __init__(self, name: str, target: types.ModuleType):
        super().__init__(name, target.__doc__)
        spec = importlib.machinery.ModuleSpec(name, _FINDER, is_package=True)
        spec.submodule_search_locations = []
        self.__dict__.update(__spec__=spec, __loader__=_FINDER, __package__=name, __path__=[], _fnx_target=target)
        # a module-level __getattr__ (PEP 562), not a method: a method would slow down every read, found or not
        self.__dict__["__getattr__"] = self._fnx_lookup

    def _fnx_lookup(self, attr: str):
        """Runs for names not in the alias's own dict: look the name up in the fnx module and keep it there,
        unless it is a plain value (a flag such as `cudnn.benchmark`), which is read through every time."""
        target = self.__dict__["_fnx_target"]
        value = getattr(target, attr, _MISSING)
        if value is _MISSING and not attr.startswith("__"):
            value = _submodule(target, attr)
        if value is _MISSING:
            if attr == "__all__":
                return [n for n in dir(target) if not n.startswith("_")]
            raise AttributeError(f"fnx stands in for torch in this program, and {target.__name__} has no "
                                 f"{attr!r}, so {self.__name__}.{attr} does not exist: {_HELP}", name=attr, obj=self)
        if isinstance(value, types.ModuleType) and (value.__name__ == "fnx" or value.__name__.startswith("fnx.")):
            value = _alias(f"{self.__name__}.{attr}", value)
        if not isinstance(value, _SETTINGS):
            self.__dict__[attr] = value  # the next read is a plain module lookup, as fast as fnx's own
        return value

    def __setattr__(self, attr: str, value) -> None:
        if attr.startswith("__") or isinstance(value, _TorchModule):  # module metadata, submodules set by import
            self.__dict__[attr] = value
        else:
            self.__dict__.pop(attr, None)
            setattr(self.__dict__["_fnx_target"], attr, value)

    def __delattr__(self, attr: str) -> None:
        value = self.__dict__.pop(attr, None)
        if not (attr.startswith("__") or isinstance(value, _TorchModule)):
            delattr(self.__dict__["_fnx_target"], attr)

    def __dir__(self) -> list[str]:
        return sorted(set(dir(self.__dict__["_fnx_target"])) | {n for n in self.__dict__ if n.startswith("__")})

    def __repr__(self) -> str:
        return f"<module {self.__name__!r}: fnx stands in, as {self.__dict__['_fnx_target'].__name__}>"


_MISSING = object()
_SETTINGS = (bool, int, float, complex, str, bytes, type(None))  # values a program may rebind: never cached


def _submodule(package: types.ModuleType, name: str):
    """`package.name` imported if it is a submodule not imported yet (as torch loads some lazily), else _MISSING."""
    if not hasattr(package, "__path__"):
        return _MISSING
    full = f"{package.__name__}.{name}"
    try:
        return importlib.import_module(full)
    except ModuleNotFoundError as e:
        if e.name != full:
            raise
        return _MISSING


def _alias(torch_name: str, target: types.ModuleType) -> _TorchModule:
    module = _ALIASES.get(torch_name)
    if module is None:
        module = _ALIASES[torch_name] = _TorchModule(torch_name, target)
        sys.modules[torch_name] = module
    return module


def _resolve(torch_name: str) -> types.ModuleType:
    """The fnx module that stands for `torch_name`, or a ModuleNotFoundError saying fnx has none."""
    name = _fnx_name(torch_name)
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if not (e.name == name or name.startswith(f"{e.name}.")):
            raise
        raise ModuleNotFoundError(f"fnx stands in for torch in this program and has no module {name}, so "
                                  f"`import {torch_name}` fails: {_HELP}", name=torch_name) from None


def _imported_torch() -> list[str]:
    """Modules of real PyTorch already imported into this process."""
    return sorted(n for n, m in sys.modules.items()
                  if (n == "torch" or n.startswith("torch.")) and not isinstance(m, _TorchModule))


class _TorchFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """First on sys.meta_path: answers every `torch` / `torch.X.Y` import with the fnx module's alias."""

    def find_spec(self, fullname: str, path=None, target=None):
        if fullname != "torch" and not fullname.startswith("torch."):
            return None
        if _imported_torch():
            raise ImportError(f"`import {fullname}`: real PyTorch is already imported in this process "
                              f"({_imported_torch()[0]}), and fnx stands in for torch here; mixing the two does "
                              f"not work. Install the alias before anything imports torch.", name=fullname)
        _resolve(fullname)
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _alias(spec.name, _resolve(spec.name))

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the alias reads everything from the fnx module."""


_FINDER = _TorchFinder()


def install_torch_alias() -> None:
    """Make `import torch` and every `import torch.X.Y` in this process give fnx (notebooks: call it first).

    Refuses with an error when real PyTorch is already imported, since the program would then mix the two;
    calling it again does nothing. `python -m fnx run SCRIPT` calls it for you.
    """
    if _FINDER in sys.meta_path:
        return
    real = _imported_torch()
    if real:
        where = getattr(sys.modules[real[0]], "__file__", None) or "?"
        raise FnxRuntimeError(f"install_torch_alias: PyTorch is already imported in this process ({real[0]} from "
                              f"{where}); fnx cannot stand in for torch now without the program mixing the two. "
                              f"Call fnx.install_torch_alias() before anything imports torch (in a notebook: "
                              f"restart the kernel and call it in the first cell), or run the script with "
                              f"`python -m fnx run SCRIPT`.")
    sys.meta_path.insert(0, _FINDER)
    if _SHIM not in sys.path:  # processes started afresh (spawn, forkserver) copy sys.path: see _torch_shim/
        sys.path.insert(0, _SHIM)


def run_script(path: str, args: list[str]) -> None:
    """Run the Python file `path` as `__main__` with `sys.argv = [path, *args]` and fnx standing in for torch,
    as `python path args...` runs it under PyTorch (its directory first on sys.path)."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"python -m fnx run: no such file {path!r}")
    install_torch_alias()
    sys.argv = [path, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    runpy.run_path(path, run_name="__main__")
