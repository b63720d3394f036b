"""Hand-written C loops (templates/c_windows.c.j2, c_nn.c.j2): a template rendered after the C prelude into one
shared library for every shape, built on first use through the C toolchain's disk cache (fnx/lowering/cpu.py)."""
from __future__ import annotations

import ctypes
from pathlib import Path

from .._warn import warn

__all__ = ["build_loops"]


def build_loops(name: str, template: Path, what: str) -> ctypes.CDLL | None:
    """The library `name` compiled from `template`, or None where it cannot be built (no C compiler, Jinja2
    missing; any other failure warns that numpy runs `what` instead)."""
    # Imported here, not with fnx: building needs Jinja2 and a C compiler, and a process that never runs these
    # loops needs neither.
    from .._version import __version__
    from .codegen import prelude
    from .cpu import NoCompilerError, compile_libraries

    try:
        import jinja2

        body = jinja2.Template(template.read_text()).render()

        def sources(simd: bool) -> dict[str, str]:
            return {name: prelude("c", simd=simd) + body}

        return compile_libraries(sources(True), __version__, sources)[name]
    except (NoCompilerError, ModuleNotFoundError):
        return None
    except Exception as e:  # noqa: BLE001 (any failure to build leaves numpy's impls, which are always right)
        warn(f"fnx: the C loops of {what} could not be built ({e}); numpy runs them instead (slower)", RuntimeWarning)
        return None
