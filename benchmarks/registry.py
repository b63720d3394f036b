"""The workload registry: one decorated builder function per benchmark case.

A builder takes `(framework, device)` and returns a `Bench`: a callable that
runs one timed repetition, the number of ops that repetition performs, and
(for asynchronous backends: jax, CUDA) how to wait for its result. A builder
raises `Skip` when a framework cannot run the case (a missing op, a missing
device); the runner reports that in the table instead of failing.

A framework entry may name a variant after a space ("fnx compile", "torch
compile"): the row shows it, and `--frameworks fnx` selects it by its first
word. The runner builds and times each row in a worker process of its own
(benchmarks/worker.py), so frameworks never share a process. A workload whose
builder starts its own processes (`own_processes`: W9's workers, W9m's fresh
process per sample) is built in the runner; its Bench reports the samples
taken there through `Bench.measure` (seconds, or bytes for a memory unit) and
stops those processes through `Bench.close`. A workload with a large configuration
registers its cases once per `size`; `--size` picks which run. An `explicit`
workload (a slow one) runs only when named on the command line.

Adding a workload is one function in a new module listed in `MODULES`:

    @workload("W5", "conv2d 3x3, 32x64x56x56 f32", reference="torch", frameworks=("fnx", "torch"))
    def w5_conv(fw: str, device: str) -> Bench:
        ...
        return Bench(run)
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["Bench", "Skip", "Workload", "workload", "all_workloads", "note", "MODULES", "UNITS", "SIZES", "NOTES",
           "INTERPRETERS"]

# Modules whose import registers workloads, in table order.
MODULES = ("benchmarks.eager", "benchmarks.transforms", "benchmarks.nn", "benchmarks.distributed", "benchmarks.compile",
           "benchmarks.export", "benchmarks.training")

# How a unit turns a sample per op (seconds; bytes for MiB) into the number shown.
UNITS = {"ns/op": 1e9, "us/op": 1e6, "ms/op": 1e3, "ms": 1e3, "s": 1.0, "MiB": 2.0 ** -20}
SIZES = ("small", "large")

# Set by the runner: framework -> Python interpreter for the worker processes of workloads that run each
# framework in a process of its own (`--python torch=PATH`); unset ones use the runner's interpreter.
INTERPRETERS: dict = {}
# Lines a workload adds under the table (the environment of its worker processes, gaps it found).
NOTES: list = []


class Skip(Exception):
    """A framework cannot run this case; the message says why and appears in the table."""


@dataclass
class Bench:
    """One timed repetition (`run`), the ops it performs, and how to wait for its result."""

    run: Callable[[], Any]
    ops: int = 1
    sync: Callable[[Any], Any] | None = None  # called on run()'s result inside the timed region
    measure: Callable[[Any], float] | None = None  # the sample from run()'s result instead of its wall time
    close: Callable[[], None] | None = None  # called once after the case's repetitions
    settle: Callable[[], None] | None = None  # called before each repetition, untimed (thread pools, caches)
    profile: Callable[[int], str] | None = None  # profiles a repetition elsewhere: top N functions, as text


@dataclass(frozen=True)
class Workload:
    """A benchmark case: `build(framework, device)` makes its `Bench` for each listed framework."""

    id: str
    case: str
    build: Callable[[str, str], Bench]
    reference: str
    frameworks: tuple
    unit: str = "ms"
    devices: tuple = ("cpu",)
    repeats: int = 7
    warmup: int = 1
    size: str | None = None  # "small" or "large" for a workload with both; None: runs at every --size
    explicit: bool = False  # runs only when named on the command line (a slow workload)
    own_processes: bool = False  # the builder runs the row in processes of its own (else the runner's worker)


_REGISTRY: list[Workload] = []


def workload(id: str, case: str, *, reference: str, frameworks: tuple, unit: str = "ms",
             devices: tuple = ("cpu",), repeats: int = 7, warmup: int = 1, size: str | None = None,
             explicit: bool = False, own_processes: bool = False):
    """Register the decorated builder as case `case` of workload `id`; times are compared to `reference`."""
    if unit not in UNITS:
        raise ValueError(f"workload {id}: unknown unit {unit!r}; expected one of {sorted(UNITS)}")
    if reference not in frameworks:
        raise ValueError(f"workload {id}: reference {reference!r} is not among its frameworks {frameworks}")
    if size is not None and size not in SIZES:
        raise ValueError(f"workload {id}: unknown size {size!r}; expected one of {SIZES}")

    def register(build: Callable[[str, str], Bench]) -> Callable[[str, str], Bench]:
        _REGISTRY.append(Workload(id, case, build, reference, tuple(frameworks), unit, tuple(devices), repeats,
                                  warmup, size, explicit, own_processes))
        return build

    return register


def all_workloads() -> list[Workload]:
    """Every registered case, importing the workload modules on first use."""
    for name in MODULES:
        importlib.import_module(name)
    return list(_REGISTRY)


def note(line: str) -> None:
    """Add `line` under the table (once, however often it is noted)."""
    if line not in NOTES:
        NOTES.append(line)
