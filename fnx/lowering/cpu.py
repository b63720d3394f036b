"""The C backend: compile generated C with the system compiler into cached shared libraries, load them with ctypes.

Flags: `-O3 -march=native -fno-math-errno -fno-trapping-math -ffp-contract=off
-fwrapv -fopenmp -fPIC -shared` (and `-mno-mmx` on x86: kernels leave the x87
registers alone), never `-ffast-math`: results must match eager
within a few ulp, so no reassociation and no FMA contraction of user
arithmetic; `-fno-trapping-math` only lets branches on floats become blends
(fnx never traps on floating-point exceptions); `-Werror=` for what GCC 14
and clang 16 refuse by default (implicit declarations, say), so every
compiler builds the same sources. On CPUs with AVX-512 and
BF16 (Intel's Sapphire Rapids and later, AMD's Zen 4 and later) also
`-mprefer-vector-width=512`: -march=native keeps GCC's auto-vectorized loops
to 256-bit vectors on Intel's AVX-512 CPUs (older ones slowed their clocks for
the wider ones; these do not), and the wider ones ran exp, tanh and sigmoid
over 2^24 floats 1.6-2.6x faster on a model 167 Xeon. glibc's libmvec gives SIMD
variants of exp, log, tanh, ... that `omp simd` loops call when it is linked
(`-lmvec`). The first compile on a machine tries the full flags; if the
toolchain lacks OpenMP or libmvec it probes which of them work and remembers
the answer in the disk cache (a JSON entry, validated when read).

Parallel loops run on fnx's own thread pool, not libgomp's: the kernel prelude
forwards the calls GCC's OpenMP lowering makes (GOMP_parallel and the thread
number queries) to a small library built from templates/c_threads.c.j2, loaded
once per process into the global symbol scope before any kernel; its size is
`fnx.get_num_threads()` (fnx/threads.py), read at every parallel loop, and its
idle workers sleep after a short spin whichever OpenMP runtime loaded first
(`--as-needed` leaves libgomp out of the kernels). Once it loads, numpy's
OpenBLAS (>= 0.3.27) runs its jobs on it too, so BLAS and kernels share one set
of threads.

Each kernel is a cache entry of its own, keyed by a hash of its source, flags,
compiler identity and fnx version, so kernels are shared between executables.
The missing ones compile in parallel, a few translation units at a time (the
prelude once per unit, not once per kernel); each kernel's entry is the library
of its unit, under its own name (fnx/lowering/cache.py links them). A library is loaded only once the cache
has checked it against the sha256 it recorded (fnx/lowering/cache.py): a
damaged or changed one is rebuilt, never loaded (a truncated one would crash
the process). Kernels take `(void *const *arrays,
const long long *meta)`: `arrays` holds the addresses of numpy array
*objects*; the kernel reads each data pointer from the object (at offset
`ARRAY_DATA_OFFSET`, found and checked at import), so a call costs one store
per array instead of numpy's slow `.ctypes.data`.
"""
from __future__ import annotations

import ctypes
import functools
import json
import logging
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import jinja2

from .._warn import warn
from ..threads import attach_pool, get_num_threads
from ..array_pointers import ARRAY_DATA_OFFSET
from .cache import (cache_dir, cache_key, commit_entry, entry_path, evict_after_write, read_entry, temp_path,
                    write_entry)

__all__ = ["Toolchain", "toolchain", "compile_libraries", "ARRAY_DATA_OFFSET", "compile_count", "NoCompilerError",
           "compiler", "thread_pool"]

log = logging.getLogger("fnx.compile")

# -mno-mmx on x86: GCC 12 building for x86-64-v2 (SSE4.2, no AVX) moves half of a vector reduction through an MMX
# register (movq2dq) and never issues the EMMS that hands the x87 registers back; the process's next x87 code (long
# double, OpenBLAS's x87 kernels: numpy's QR gave NaN) then finds them in use.
_X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")


def _cpu_flags() -> set[str]:
    """The feature flags of /proc/cpuinfo's first CPU (empty where it cannot be read)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.partition(":")[2].split())
    except OSError:
        pass
    return set()


def wide_vectors(flags: set[str]) -> tuple[str, ...]:
    """The flag that lets GCC's auto-vectorized loops use 512-bit vectors, on an x86 CPU with these feature flags
    that has AVX-512 and runs it at full clock (BF16: Intel's Sapphire Rapids and later, AMD's Zen 4 and later;
    Skylake-SP and Cascade Lake lowered their clocks for it, Ice Lake less, which is why GCC prefers 256-bit
    vectors on Intel's AVX-512 CPUs)."""
    return ("-mprefer-vector-width=512",) if {"avx512f", "avx512_bf16"} <= flags else ()


# What GCC 14 and clang 16 refuse by default and older compilers only warn about: errors with every compiler, so a
# template that relies on them fails here too (the GEMM called memcpy without string.h: GCC 14 would not build it).
_STRICT = ("-Werror=implicit-function-declaration", "-Werror=implicit-int", "-Werror=int-conversion",
           "-Werror=incompatible-pointer-types")
_BASE_FLAGS = ("-O3", "-march=native", *(wide_vectors(_cpu_flags()) if _X86 else ()), "-fno-math-errno",
               "-fno-trapping-math", "-ffp-contract=off", "-fwrapv", "-fPIC", "-shared", "-pthread",
               "-Wl,--as-needed") + (("-mno-mmx",) if _X86 else ()) + _STRICT

# What to try, best first: (extra flags, libraries, OpenMP threads?, libmvec?).
_VARIANTS = ((("-fopenmp",), ("-lmvec", "-lm"), True, True), (("-fopenmp",), ("-lm",), True, False),
             (("-fopenmp-simd",), ("-lm",), False, False))
_NICE = shutil.which("nice")   # runs the compilers of builds ahead of need at a lower priority
compile_count = 0  # compiler invocations by this process (tests check that a warm cache makes none)
_warned: set[str] = set()
_POOL_TEMPLATE = Path(__file__).parent / "templates" / "c_threads.c.j2"
# How long (ns) an idle pool worker spins before it sleeps: a few milliseconds, so that the next kernel or BLAS call
# of a training step finds it awake. A BLAS call's jobs wait for each other: with a busy process beside it, a W9
# GPT step took 184 ms when they waited for sleeping workers (after a spin of 60-170 us), 104 ms after one of
# several milliseconds, 84-137 ms on OpenBLAS's own threads (which spin for 0.1 s).
_POOL_SPIN_NS = 10_000_000
# Multiply-adds below which a matrix product runs on one thread while the pool's workers sleep (c_threads.c.j2's
# fnx_rt_poll): about 100 us on one core, what waking a sleeping worker can cost on a bare machine.
_SMALL_PRODUCT = 1 << 22
_pool: ctypes.CDLL | None = None
_pool_lock = threading.Lock()


class NoCompilerError(NotImplementedError):
    """No C compiler on this machine: the default backend interprets instead; an explicit backend="c" fails."""


@dataclass(frozen=True)
class Toolchain:
    """The C compiler, its identity (part of every cache key) and the flag variant known to work, if any."""

    cc: str
    identity: str
    variant: int | None     # index into _VARIANTS once known

    @property
    def libmvec(self) -> bool:
        return _VARIANTS[self.variant or 0][3]

    def command(self, variant: int, src: str, out: str) -> list[str]:
        extra, libs, _, _ = _VARIANTS[variant]
        return [self.cc, *_BASE_FLAGS, *extra, src, "-o", out, *libs]


def compiler() -> str:
    """`$CC`, else the first of cc, gcc and clang on PATH (with a warning when CC names no executable)."""
    requested = os.environ.get("CC")
    for name in (requested, "cc", "gcc", "clang"):
        found = shutil.which(name) if name else None
        if found:
            if requested and name != requested and requested not in _warned:
                _warned.add(requested)
                warn(f"fnx: CC={requested!r} is not an executable on PATH (CC must name one program, without "
                     f"options); compiling with {found} instead", RuntimeWarning)
            return found
    raise NoCompilerError("no C compiler found (looked for $CC, cc, gcc, clang): install gcc or set CC")


def _machine() -> str:
    """What -march=native depends on: the CPU model and feature flags."""
    try:
        lines = [ln for ln in Path("/proc/cpuinfo").read_text().splitlines()
                 if ln.startswith(("model name", "flags"))][:2]
        return platform.machine() + "|" + "|".join(lines)
    except OSError:
        return platform.machine() + "|" + platform.processor()


def _variant_file(identity: str) -> Path:
    return entry_path(cache_dir(), "fnx-toolchain", cache_key("toolchain", identity), ".json")


@functools.lru_cache(maxsize=None)
def _identity(cc: str) -> str:
    version = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
    return f"{cc}|{version[0] if version else '?'}|{_machine()}"


def toolchain() -> Toolchain:
    """The compiler and (when a previous compile found it) the flag variant that works on this machine."""
    cc = compiler()
    identity = _identity(cc)
    return Toolchain(cc, identity, _remembered(_variant_file(identity)))


def _remembered(path: Path) -> int | None:
    """The flag variant recorded in `path`, if it holds a valid record (checked, as everything from the cache)."""
    data = read_entry(path)
    try:
        variant = json.loads(data)["variant"] if data is not None else None
    except (ValueError, TypeError, KeyError):
        return None
    return variant if type(variant) is int and 0 <= variant < len(_VARIANTS) else None


def _remember(tc: Toolchain, variant: int) -> None:
    record = {"variant": variant, "flags": list(_VARIANTS[variant][0] + _VARIANTS[variant][1])}
    write_entry(_variant_file(tc.identity), json.dumps(record).encode())


def _build_all(tc: Toolchain, jobs: list[tuple[str, list[Path]]], variant: int, ahead: bool = False) -> list[str]:
    """Compile (source, cache paths) pairs concurrently and store each library in the cache under each of its paths;
    returns the compiler errors (empty if all built, else nothing is stored). Interrupted (Ctrl-C), it stops the
    compilers; its temporary files are removed in any case. Compilers building `ahead` of need run niced (where
    `nice` exists), so that a build some thread waits for takes the cores first."""
    niced = [_NICE, "-n", "10"] if ahead and _NICE else []
    global compile_count
    procs, outs, temps = [], [], []
    try:
        for source, (path, *_) in jobs:
            out = temp_path(path)
            outs.append(out)
            temps += [out, out + ".c"]
            with open(out + ".c", "w") as f:
                f.write(source)
            procs.append(subprocess.Popen(niced + tc.command(variant, out + ".c", out), stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True))
        errors = []
        for p in procs:
            output, _ = p.communicate()
            compile_count += 1
            if p.returncode != 0:
                errors.append(output)
        if not errors:
            for (_, (path, *also)), out in zip(jobs, outs):
                commit_entry(out, path, also=also)
        return errors
    except BaseException:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        raise
    finally:
        for t in temps:
            if os.path.exists(t):
                os.unlink(t)


def compile_libraries(bodies: dict[str, str], version: str, head: Callable[[bool], str], *,
                      apart: bool = False, ahead: bool = False) -> dict[str, ctypes.CDLL]:
    """The shared library of each kernel `name -> body`, whose source is `head(libmvec)` then its body, compiling
    the ones not in the disk cache (`head(False)` for a toolchain without libmvec) a few to a translation unit, or
    each in its own where they are `apart` (bodies that define the same helpers: the parts of a template library);
    `ahead`: built before anyone waits for them (`_build_all`)."""
    tc = toolchain()
    variant = tc.variant if tc.variant is not None else 0
    while True:
        prelude = head(_VARIANTS[variant][3])
        paths, missing = _entries(tc, variant, prelude, bodies, version)
        if not missing:
            log.debug("%d kernel(s) from the disk cache %s", len(paths), cache_dir())
            break
        units = [(prelude + bodies[name], [path]) for name, path in missing] if apart else \
            _translation_units(prelude, bodies, missing)
        errors = _build_all(tc, units, variant, ahead)
        if not errors:
            if tc.variant != variant:
                _remember(tc, variant)
            evict_after_write(cache_dir(), [path for _, path in missing], keep=paths.values())
            log.info("compiled %d kernel(s) with %s", len(missing), " ".join(tc.command(variant, "<src>", "<so>")))
            break
        if tc.variant is not None or variant + 1 == len(_VARIANTS) or not _probe_fails(tc, variant):
            raise RuntimeError(f"fnx: the C compiler failed on generated kernels:\n{errors[0][-4000:]}")
        variant += 1   # this toolchain lacks OpenMP or libmvec: try the next variant
    if _VARIANTS[variant][2]:
        _start_pool(tc, variant, version)
    return {name: ctypes.CDLL(str(path)) for name, path in paths.items()}


def _entries(tc: Toolchain, variant: int, head: str, bodies: dict[str, str],
             version: str) -> tuple[dict[str, Path], list[tuple[str, Path]]]:
    """Each kernel's cache path, and the (name, path) pairs whose library the cache lacks (or holds damaged)."""
    folder, paths, missing = cache_dir(), {}, []
    for name, body in bodies.items():
        key = cache_key(head + body, " ".join(tc.command(variant, "", "")), tc.identity, version)
        path = paths[name] = entry_path(folder, name, key, ".so")
        if read_entry(path) is None:   # absent, or not the library recorded: (re)build it
            missing.append((name, path))
    return paths, missing


def _translation_units(head: str, bodies: dict[str, str], missing: list) -> list[tuple[str, list[Path]]]:
    """The missing kernels as (source, cache paths) of a few translation units, `head` once then their bodies: two
    per thread fnx uses (`fnx.get_num_threads()`), balanced by length. A compiler run per kernel read the 36 KB
    prelude and started a process for each: a GPT training step's 40 kernels took 5.0 s on 2 cores so, 2.9 s as 4
    units."""
    units = [[0, [], []] for _ in range(min(len(missing), 2 * get_num_threads()))]
    for name, path in sorted(missing, key=lambda m: -len(bodies[m[0]])):
        unit = min(units, key=lambda u: u[0])
        unit[0] += len(bodies[name])
        unit[1].append(bodies[name])
        unit[2].append(path)
    return [(head + "".join(texts), paths) for _, texts, paths in units]


def _start_pool(tc: Toolchain, variant: int, version: str) -> None:
    """Load the kernels' thread pool (templates/c_threads.c.j2) once per process, building it if the cache lacks
    it, into the global symbol scope, where the kernels loaded after it find it, and give it fnx's thread count."""
    global _pool
    with _pool_lock:
        if _pool is not None:
            return
        source = jinja2.Template(_POOL_TEMPLATE.read_text()).render(spin_ns=_POOL_SPIN_NS, small_product=_SMALL_PRODUCT)
        paths, missing = _entries(tc, variant, "", {"fnx-thread-pool": source}, version)
        errors = _build_all(tc, _translation_units("", {"fnx-thread-pool": source}, missing), variant)
        if errors:
            raise RuntimeError(f"fnx: the C compiler failed on fnx's thread pool:\n{errors[0][-4000:]}")
        pool = ctypes.CDLL(str(paths["fnx-thread-pool"]), mode=os.RTLD_GLOBAL)
        attach_pool(pool)
        _pool = pool


def thread_pool() -> ctypes.CDLL | None:
    """The loaded thread pool library (None before the first kernel with threads loads); its int
    `fnx_rt_last_team` is the number of tasks of the last parallel loop (1: it ran on the calling thread), its
    longs `fnx_rt_blas_calls` and `fnx_rt_blas_spawned` count OpenBLAS calls whose jobs it ran, and of those the
    ones that ran on threads started for them."""
    return _pool


_PROBE = """#include <math.h>
#pragma omp declare simd notinbranch
double exp(double);
void probe(const double *restrict x, double *restrict y, long long n) {
  #pragma omp parallel for simd
  for (long long i = 0; i < n; i++) y[i] = exp(x[i]);
}
"""


def _probe_fails(tc: Toolchain, variant: int) -> bool:
    """Whether flag variant `variant` itself fails on this toolchain (a tiny program, not the kernels)."""
    with tempfile.TemporaryDirectory() as work:
        src, out = os.path.join(work, "probe.c"), os.path.join(work, "probe.so")
        with open(src, "w") as f:
            f.write(_PROBE)
        return subprocess.run(tc.command(variant, src, out), capture_output=True).returncode != 0
