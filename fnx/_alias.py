"""fnx standing in for another framework's package: the machinery that the torch and jax aliases share.

An `Alias` is a finder put first on `sys.meta_path` that answers `import ROOT` and every `import ROOT.X.Y` with
the fnx module standing for that path (`fnx.X.Y` unless the alias renames it), so no later import can load the
real framework next to fnx. Each `ROOT...` module is a thin `ModuleAlias` object: reads and writes go to the fnx
module it stands for, and a name fnx lacks raises an AttributeError or ImportError that says fnx stands in for
ROOT and what to do. fnx's own modules are not changed: `import fnx` behaves the same with or without an alias.
Processes started afresh from an aliased one (spawn, forkserver) get the alias through a shim folder holding
only a ROOT package that installs it.
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

_MISSING = object()
_SETTINGS = (bool, int, float, complex, str, bytes, type(None))  # values a program may rebind: never cached


class ModuleAlias(types.ModuleType):
    """`ROOT.<path>` in an aliased program: attribute reads and writes go to the fnx module it stands for; a
    name that module lacks raises an AttributeError saying that fnx stands in for ROOT. Writes go to the fnx
    module, so `torch.backends.cudnn.benchmark = True` sets fnx's flag."""

    def __init__(self, name: str, target: types.ModuleType, alias: Alias):
        super().__init__(name, target.__doc__)
        spec = importlib.machinery.ModuleSpec(name, alias, is_package=True)
        spec.submodule_search_locations = []
        self.__dict__.update(__spec__=spec, __loader__=alias, __package__=name, __path__=[], _fnx_target=target,
                             _fnx_alias=alias)
        if getattr(target, "__file__", None):   # `from torch import missing` then names fnx's file in its error
            self.__dict__["__file__"] = target.__file__
        # a module-level __getattr__ (PEP 562), not a method: a method would slow down every read, found or not
        self.__dict__["__getattr__"] = self._fnx_lookup

    def _fnx_lookup(self, attr: str):
        """Runs for names not in the alias's own dict: look the name up in the fnx module (or as a submodule
        ROOT.<path>.<attr>) and keep it there, unless it is a plain value (a flag such as `cudnn.benchmark`),
        which is read through every time."""
        target, alias = self.__dict__["_fnx_target"], self.__dict__["_fnx_alias"]
        path = f"{self.__name__}.{attr}"
        # a renamed submodule first: torch.jit is fnx.torchscript, though fnx.jit is JAX's jit
        value = alias.submodule(path) if path in alias.renamed else getattr(target, attr, _MISSING)
        if value is _MISSING and not attr.startswith("__"):
            value = alias.submodule(path)
        if value is _MISSING:
            if attr == "__all__":
                return [n for n in dir(target) if not n.startswith("_")]
            raise AttributeError(f"fnx stands in for {alias.root} in this program, and {target.__name__} has no "
                                 f"{attr!r}, so {self.__name__}.{attr} does not exist: {alias.help}",
                                 name=attr, obj=self)
        if isinstance(value, types.ModuleType) and (value.__name__ == "fnx" or value.__name__.startswith("fnx.")):
            value = alias.module(f"{self.__name__}.{attr}", value)
        if not isinstance(value, _SETTINGS):
            self.__dict__[attr] = value  # the next read is a plain module lookup, as fast as fnx's own
        return value

    def __setattr__(self, attr: str, value) -> None:
        if attr.startswith("__") or isinstance(value, ModuleAlias):  # module metadata, submodules set by import
            self.__dict__[attr] = value
        else:
            self.__dict__.pop(attr, None)
            setattr(self.__dict__["_fnx_target"], attr, value)

    def __delattr__(self, attr: str) -> None:
        value = self.__dict__.pop(attr, None)
        if not (attr.startswith("__") or isinstance(value, ModuleAlias)):
            delattr(self.__dict__["_fnx_target"], attr)

    def __dir__(self) -> list[str]:
        return sorted(set(dir(self.__dict__["_fnx_target"])) | {n for n in self.__dict__ if n.startswith("__")})

    def __repr__(self) -> str:
        return f"<module {self.__name__!r}: fnx stands in, as {self.__dict__['_fnx_target'].__name__}>"


class Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """fnx standing in for the package `root` (of the framework called `framework`): first on sys.meta_path,
    it answers every `root` / `root.X.Y` import with the alias of the fnx module standing for that path.

    `renamed` maps the paths whose fnx module has another name than `fnx` + the rest of the path (the root
    itself may be one); `help` ends each missing-name error; `shim` is the folder whose `root` package installs
    the alias in processes started afresh; `install_name` names fnx's function that installs it.
    """

    def __init__(self, root: str, framework: str, renamed: dict[str, str], help: str, shim: str,
                 install_name: str, run_command: str):
        self.root, self.framework, self.renamed, self.help = root, framework, renamed, help
        self.shim, self.install_name, self.run_command = shim, install_name, run_command
        self.aliases: dict[str, ModuleAlias] = {}

    def _ours(self, name: str) -> bool:
        return name == self.root or name.startswith(self.root + ".")

    def fnx_name(self, name: str) -> str:
        return self.renamed.get(name, "fnx" + name[len(self.root):])

    def module(self, name: str, target: types.ModuleType) -> ModuleAlias:
        """The alias module `name` standing for `target` (made once, and registered in sys.modules)."""
        module = self.aliases.get(name)
        if module is None:
            module = self.aliases[name] = ModuleAlias(name, target, self)
            sys.modules[name] = module
        return module

    def resolve(self, name: str) -> types.ModuleType:
        """The fnx module that stands for `name`, or a ModuleNotFoundError saying fnx has none."""
        fnx_name = self.fnx_name(name)
        try:
            return importlib.import_module(fnx_name)
        except ModuleNotFoundError as e:
            if not (e.name == fnx_name or fnx_name.startswith(f"{e.name}.")):
                raise
            raise ModuleNotFoundError(f"fnx stands in for {self.root} in this program and has no module "
                                      f"{fnx_name}, so `import {name}` fails: {self.help}", name=name) from None

    def submodule(self, name: str):
        """The alias of the fnx module standing for `name` if there is one (imported now if need be, as
        packages load some submodules lazily), else _MISSING."""
        try:
            return self.module(name, self.resolve(name))
        except ModuleNotFoundError as e:
            if e.name != name:
                raise
            return _MISSING

    def imported_real(self) -> list[str]:
        """Modules of the real framework already imported into this process."""
        return sorted(n for n, m in sys.modules.items() if self._ours(n) and not isinstance(m, ModuleAlias))

    def find_spec(self, fullname: str, path=None, target=None):
        if not self._ours(fullname):
            return None
        real = self.imported_real()
        if real:
            raise ImportError(f"`import {fullname}`: real {self.framework} is already imported in this process "
                              f"({real[0]}), and fnx stands in for {self.root} here; mixing the two does not "
                              f"work. Install the alias before anything imports {self.root}.", name=fullname)
        self.resolve(fullname)
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return self.module(spec.name, self.resolve(spec.name))

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the alias reads everything from the fnx module."""

    def install(self) -> None:
        """Put the alias first on sys.meta_path (once); refuse when the real framework is already imported."""
        if self in sys.meta_path:
            return
        real = self.imported_real()
        if real:
            where = getattr(sys.modules[real[0]], "__file__", None) or "?"
            raise FnxRuntimeError(
                f"{self.install_name}: {self.framework} is already imported in this process ({real[0]} from "
                f"{where}); fnx cannot stand in for {self.root} now without the program mixing the two. Call "
                f"fnx.{self.install_name}() before anything imports {self.root} (in a notebook: restart the kernel "
                f"and call it in the first cell), or run the script with `{self.run_command}`.")
        sys.meta_path.insert(0, self)
        if self.shim not in sys.path:  # processes started afresh (spawn, forkserver) copy sys.path
            sys.path.insert(0, self.shim)

    def run_script(self, path: str, args: list[str]) -> None:
        """Run the Python file `path` as `__main__` with `sys.argv = [path, *args]` and fnx standing in for
        the root package, as `python path args...` runs it (its directory first on sys.path)."""
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{self.run_command}: no such file {path!r}")
        self.install()
        sys.argv = [path, *args]
        sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
        runpy.run_path(path, run_name="__main__")
