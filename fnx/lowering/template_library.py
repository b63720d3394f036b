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
import functools
import json
import threading
from collections.abc import Callable
from pathlib import Path

from .._warn import warn
from ..threads import get_num_threads

__all__ = ["TemplateLibrary", "build_soon", "start_builder"]

_by_primitive: dict[str, list["TemplateLibrary"]] = {}   # primitive name -> the libraries its eager impl calls
libraries: list["TemplateLibrary"] = []                  # every library made, in order
_builders: list[threading.Thread] = []                   # start_builder's; joined at exit (no half-built files)


class TemplateLibrary:
    """The library `name` rendered from templates/`template` (with the variables `context`); `functions` return
    nothing (their restype is set to None) unless `restypes` names their result's type, `argtypes` gives the
    argument types of those that declare them; `what` and `fallback` name the loops and what runs instead in the
    warning of a failed build.

    `parts(function)` names the part of the library holding a function: each part builds on the first use of one
    of its functions (`function`), from the template rendered with `wanted(f)` true for its functions alone (the
    template leaves out the others), so an eager step waits only for the loops it calls (every LSTM, softmax,
    norm and loss loop of two dtypes took 3.6 s to compile, which the first step of a training loop waited for).
    Without `parts`, the library is one part (`get`) and `wanted` is always true.

    `after(function)` names the functions likely called soon after it (its backward, a loss's gradient): when a
    function's part builds on first use, theirs start building on a thread of their own, so that the compiler runs
    on a core that the caller's wait leaves idle (the first eager GPT step waited for 14 builds in turn, 4.2 s of
    its 4.6 on 2 cores). Each part has a lock of its own: a caller waits only for the part it calls."""

    def __init__(self, name: str, template: str, functions: list[str], what: str, fallback: str,
                 argtypes: dict[str, list] | None = None, context: dict | None = None,
                 restypes: dict[str, type] | None = None, primitives: tuple[str, ...] = (),
                 parts: Callable[[str], str] | None = None, after: Callable[[str], tuple[str, ...]] | None = None):
        self.name, self.template, self.functions, self.context = name, template, functions, context or {}
        self.what, self.fallback, self.argtypes = what, fallback, argtypes or {}
        self.restypes = restypes or {}
        self.parts = parts or (lambda function: "")
        self._parted = parts is not None
        self.after = after or (lambda function: ())
        self._libs: dict[str, ctypes.CDLL | None] = {}   # part -> the loaded library, or None where it cannot be built
        self._functions: dict[str, object] = {}          # name -> its C function, or None, once asked for
        self._locks: dict[str, threading.Lock] = {}      # part -> the lock its build holds
        self._lock = threading.Lock()                    # guards _locks and _started
        self._started: set[str] = set()   # the parts start_building has started
        for p in primitives:
            _by_primitive.setdefault(p, []).append(self)
        libraries.append(self)

    def get(self) -> ctypes.CDLL | None:
        """The loaded library (of a library without parts), or None: built (or read from the disk cache) by the first
        thread to ask."""
        return self._part("")

    def function(self, name: str):
        """C function `name` from its part's library, or None where that cannot be built."""
        try:
            return self._functions[name]
        except KeyError:
            part = self.parts(name)
            following = self.after(name)
            if following and part not in self._libs:
                self.start_functions(following)
            lib = self._part(part)
            fn = self._functions[name] = None if lib is None else getattr(lib, name)
            return fn

    def _part(self, part: str) -> ctypes.CDLL | None:
        if part in self._libs:
            return self._libs[part]
        with self._lock:
            lock = self._locks.setdefault(part, threading.Lock())
        with lock:
            if part not in self._libs:
                self._libs.update(self._build([part]))
        return self._libs[part]

    def start_building(self, dtypes: set[str] | None = None) -> None:
        """Build the parts of the library not built or building (those for `dtypes`, dtype names, where given: a
        part named for another dtype's suffix is left out) on a thread of their own, all at once (the caller goes on
        planning a program, not compiling); `get` and `function` wait for them."""
        parts = [p for p in self.every_part() if dtypes is None or _for_dtypes(p, dtypes)]
        self._start(parts, len(parts))

    def start_functions(self, names: list[str]) -> None:
        """Build the parts of functions `names` (not built or building) on a thread of their own, in this order, a
        few at a time: one fewer than the threads fnx uses, leaving a core to the caller, which may be building a
        part of its own meanwhile. For callers that know which loops a process will call soon."""
        self._start([self.parts(f) for f in names], max(1, get_num_threads() - 1))

    def _start(self, parts: list[str], at_once: int) -> None:
        """Build `parts` (those not built or started yet) in this order on a thread of their own, `at_once` at a
        time."""
        with self._lock:
            parts = [p for p in dict.fromkeys(parts) if p not in self._started and p not in self._libs]
            self._started.update(parts)
            for p in parts:
                self._locks.setdefault(p, threading.Lock())
        if not parts:
            return
        start_builder(f"fnx-build-{self.name}", self._build_parts, parts, at_once)

    def _build_parts(self, parts: list[str], at_once: int) -> None:
        """Build `parts` `at_once` at a time (compilers running side by side), each few holding their locks. No
        deadlock: a caller holds one lock at a time, waiting for none, and these parts are this thread's alone."""
        for i in range(0, len(parts), at_once):
            locks = [self._locks[p] for p in parts[i:i + at_once]]
            for lock in locks:
                lock.acquire()
            try:
                missing = [part for part in parts[i:i + at_once] if part not in self._libs]
                if missing:
                    self._libs.update(self._build(missing, ahead=True))
            finally:
                for lock in locks:
                    lock.release()

    def every_part(self) -> list[str]:
        """The names of the library's parts ("" for a library without parts)."""
        return sorted({self.parts(f) for f in self._names()}) if self._parted else [""]

    def source(self, part: str) -> str:
        """The C source of `part` (without the prelude): its template rendered with `wanted(f)` true for the
        functions of `part`. The text is kept in the disk cache under the templates, the context and those
        functions, so a process whose libraries are all cached compiles no template: Jinja2 took 0.12 s a template,
        0.37 s of a GPT's first training step with every library cached."""
        from .cache import cache_key, cached_text

        wanted = sorted(f for f in self._names() if self.parts(f) == part)
        fresh = lambda: _template(self.template).render(**self.context, wanted=set(wanted).__contains__)
        try:
            key = cache_key(_digest(), self.template, json.dumps(self.context, sort_keys=True), *wanted)
        except TypeError:   # a value JSON cannot hold: no key, render every time
            return fresh()
        return cached_text(f"fnx-render-{self.name}-{part}" if part else f"fnx-render-{self.name}", key, fresh)

    def _names(self) -> set[str]:
        return set(self.functions) | set(self.argtypes) | set(self.restypes)

    def _build(self, parts: list[str], ahead: bool = False) -> dict[str, ctypes.CDLL | None]:
        """The loaded library of each part (None where it cannot be built); `ahead`: before anyone waits for it
        (its compilers niced: cpu._build_all)."""
        from .._version import __version__
        from .codegen import prelude
        from .cpu import NoCompilerError, compile_libraries

        names = {part: f"{self.name}-{part}" if part else self.name for part in parts}
        try:
            bodies = {names[part]: self.source(part) for part in parts}
            built = compile_libraries(bodies, __version__, lambda simd: prelude("c", simd=simd), apart=True,
                                      ahead=ahead)
        except (NoCompilerError, ModuleNotFoundError):
            return dict.fromkeys(parts)
        except Exception as e:  # noqa: BLE001 (any failure to build leaves the fallback, which is always right)
            warn(f"fnx: {self.what} could not be built ({e}); {self.fallback} instead (slower)", RuntimeWarning)
            return dict.fromkeys(parts)
        libs = {part: built[names[part]] for part in parts}
        for name in self._names():
            lib = libs.get(self.parts(name))
            if lib is None:
                continue
            fn = getattr(lib, name)
            if name in self.functions or name in self.restypes:
                fn.restype = self.restypes.get(name)
            if name in self.argtypes:
                fn.argtypes = self.argtypes[name]
        return libs


@functools.cache
def _digest() -> str:
    """What a library's rendering depends on besides its template's name, context and functions: the templates,
    the options of code generation and of this file."""
    from .cache import cache_key
    from .codegen import templates_digest

    return cache_key(templates_digest(), Path(__file__).read_text())


@functools.cache
def _template(name: str):
    """templates/`name`, compiled once per process (Jinja2's own options: the templates lay out their C so)."""
    import jinja2

    loader = jinja2.FileSystemLoader(str(Path(__file__).parent / "templates"))   # for {% include %}
    return jinja2.Environment(loader=loader).get_template(name)


def start_builder(name: str, build: Callable, *args) -> None:
    """Run `build(*args)` on a thread of its own, `name`d, which the process waits for at exit (no half-built
    files)."""
    thread = threading.Thread(target=build, args=args, name=name, daemon=True)
    _builders.append(thread)
    thread.start()


_SUFFIXES = {"float32": "f32", "float64": "f64"}   # how part names spell the dtypes of their functions


def _for_dtypes(part: str, dtypes: set[str]) -> bool:
    """Whether `part` holds functions for one of `dtypes` (or for no dtype in particular)."""
    named = [sfx for sfx in _SUFFIXES.values() if sfx in part]
    return not named or any(_SUFFIXES.get(d) in named for d in dtypes)


def build_soon(uses) -> None:
    """Start building the libraries that the eager impls of these primitives call (see the module's docstring), the
    parts for the dtypes they take: `uses` are (primitive name, dtype name) pairs."""
    dtypes: dict[TemplateLibrary, set[str]] = {}
    for name, dtype in uses:
        for library in _by_primitive.get(name, ()):
            dtypes.setdefault(library, set()).add(dtype)
    for library, names in dtypes.items():
        library.start_building(names)


@atexit.register
def _finish_builds() -> None:
    for thread in _builders:
        thread.join()
