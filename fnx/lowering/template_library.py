"""A C library of hand-written loops for eager ops: one Jinja2 template (templates/) after the C prelude, built on
first use by the C toolchain's disk cache (fnx/lowering/cpu.py) under a lock, so a process that never calls those
ops never needs Jinja2 or a compiler. Where it cannot be built, `get` gives None and the caller runs its fallback.
"""
from __future__ import annotations

import ctypes
import threading
from pathlib import Path

from .._warn import warn

__all__ = ["TemplateLibrary"]


class TemplateLibrary:
    """The library `name` rendered from templates/`template` (with the variables `context`); `functions` return
    nothing (their restype is set to None) unless `restypes` names their result's type, `argtypes` gives the
    argument types of those that declare them; `what` and `fallback` name the loops and what runs instead in the
    warning of a failed build."""

    def __init__(self, name: str, template: str, functions: list[str], what: str, fallback: str,
                 argtypes: dict[str, list] | None = None, context: dict | None = None,
                 restypes: dict[str, type] | None = None):
        self.name, self.template, self.functions, self.context = name, template, functions, context or {}
        self.what, self.fallback, self.argtypes = what, fallback, argtypes or {}
        self.restypes = restypes or {}
        self._lib: list = []   # [the loaded library, or None where it cannot be built], once built
        self._lock = threading.Lock()

    def get(self) -> ctypes.CDLL | None:
        """The loaded library, or None: built (or read from the disk cache) by the first thread to ask."""
        if self._lib:
            return self._lib[0]
        with self._lock:
            if not self._lib:
                self._lib.append(self._build())
        return self._lib[0]

    def _build(self) -> ctypes.CDLL | None:
        from .._version import __version__
        from .codegen import prelude
        from .cpu import NoCompilerError, compile_libraries

        try:
            import jinja2

            loader = jinja2.FileSystemLoader(str(Path(__file__).parent / "templates"))   # for {% include %}
            body = jinja2.Environment(loader=loader).get_template(self.template).render(**self.context)

            def sources(simd: bool) -> dict[str, str]:
                return {self.name: prelude("c", simd=simd) + body}

            lib = compile_libraries(sources(True), __version__, sources)[self.name]
        except (NoCompilerError, ModuleNotFoundError):
            return None
        except Exception as e:  # noqa: BLE001 (any failure to build leaves the fallback, which is always right)
            warn(f"fnx: {self.what} could not be built ({e}); {self.fallback} instead (slower)", RuntimeWarning)
            return None
        for name in self.functions:
            getattr(lib, name).restype = self.restypes.get(name)
        for name, types in self.argtypes.items():
            getattr(lib, name).argtypes = types
        return lib
