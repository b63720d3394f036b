"""A C library of hand-written loops for eager ops: one Jinja2 template (templates/) after the C prelude, built on
first use by the C toolchain's disk cache (fnx/lowering/cpu.py) under a lock, so a process that never calls those
ops never needs Jinja2 or a compiler. Where it cannot be built, `get` gives None and the caller runs its fallback.
A library names the primitives whose eager impls call it: when fnx.compile lowers a program holding one of them,
`build_soon` starts its build on a thread of its own, so the C compiler runs on a core that the lowering's own
Python work leaves idle (the first compiled GPT training step with empty caches waited for the GEMM's and
attention's libraries in turn, 2.6 s of its 10.7).
"""
from __future__ import annotations

import atexit
import ctypes
import threading
from pathlib import Path

from .._warn import warn

__all__ = ["TemplateLibrary", "build_soon"]

_by_primitive: dict[str, list["TemplateLibrary"]] = {}   # primitive name -> the libraries its eager impl calls
_builders: list[threading.Thread] = []                   # started by build_soon; joined at exit (no half-built files)


class TemplateLibrary:
    """The library `name` rendered from templates/`template` (with the variables `context`); `functions` return
    nothing (their restype is set to None) unless `restypes` names their result's type, `argtypes` gives the
    argument types of those that declare them; `what` and `fallback` name the loops and what runs instead in the
    warning of a failed build."""

    def __init__(self, name: str, template: str, functions: list[str], what: str, fallback: str,
                 argtypes: dict[str, list] | None = None, context: dict | None = None,
                 restypes: dict[str, type] | None = None, primitives: tuple[str, ...] = ()):
        self.name, self.template, self.functions, self.context = name, template, functions, context or {}
        self.what, self.fallback, self.argtypes = what, fallback, argtypes or {}
        self.restypes = restypes or {}
        self._lib: list = []   # [the loaded library, or None where it cannot be built], once built
        self._lock = threading.Lock()
        self._started = False
        for p in primitives:
            _by_primitive.setdefault(p, []).append(self)

    def get(self) -> ctypes.CDLL | None:
        """The loaded library, or None: built (or read from the disk cache) by the first thread to ask."""
        if self._lib:
            return self._lib[0]
        with self._lock:
            if not self._lib:
                self._lib.append(self._build())
        return self._lib[0]

    def start_building(self) -> None:
        """Build the library (or read it from the disk cache) on a thread of its own, unless it is built or
        building; `get` waits for it."""
        if self._lib or self._started:
            return
        self._started = True
        thread = threading.Thread(target=self.get, name=f"fnx-build-{self.name}", daemon=True)
        _builders.append(thread)
        thread.start()

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


def build_soon(primitive_names) -> None:
    """Start building the libraries that the eager impls of these primitives call (see the module's docstring)."""
    for name in set(primitive_names):
        for library in _by_primitive.get(name, ()):
            library.start_building()


@atexit.register
def _finish_builds() -> None:
    for thread in _builders:
        thread.join()
