"""`fnx.export`: a function as a saved program that runs without its Python code (docs/export.md).

`fnx.export(f, *example_args, dynamic_shapes=None)` traces `f` into an `Exported` program (the module itself
is callable); `fnx.export.load(path)` reads one that `Exported.save` wrote. Loading never runs code from the
file: the archive is JSON and `.npy` arrays, checked before use.
"""
from __future__ import annotations

import sys
import types

from .archive import FORMAT, VERSION
from .exported import Exported, export, load
from .symbolic import Dim, DimLiteral

__all__ = ["export", "Exported", "load", "Dim", "DimLiteral", "FORMAT", "VERSION"]


class _CallableModule(types.ModuleType):
    """The `fnx.export` module, which is also the `export` function (a module's class may be replaced by a
    ModuleType subclass: Python's data model, "Customizing module attribute access")."""

    def __call__(self, f, *example_args, dynamic_shapes=None) -> Exported:
        return export(f, *example_args, dynamic_shapes=dynamic_shapes)


sys.modules[__name__].__class__ = _CallableModule
