"""The executable plan: fused kernels and library calls in order, over buffers allocated per call.

`build_executable(closed, backend="c"|"cuda")` fuses the jaxpr, renders and
compiles its kernels once, and returns an `Executable`. Everything that does
not depend on the arguments (kernel handles, argument blocks of sizes and
strides, buffer slots, which buffer dies after which step) is fixed at build
time, so a call only stores array addresses, allocates outputs with numpy
(or CuPy) and launches. Equations that are not fused ("library" steps:
matmul, gather, sort, control flow, random bits, ...) run through their
primitive's `impl` on the arrays, exactly as eager mode runs them.
"""
from __future__ import annotations

import ctypes
import logging

import numpy as np

from .. import __version__
from ..core import FnxRuntimeError
from ..ir import ClosedJaxpr, Literal, Var
from ..tensor import Tensor, make
from .codegen import GeneratedKernel, emittable, prelude, render, render_module
from .fusion import Kernel, fuse

__all__ = ["build_executable", "Executable", "plan_steps"]

log = logging.getLogger("fnx.compile")


def plan_steps(closed: ClosedJaxpr, target: str) -> tuple[list, list[GeneratedKernel]]:
    """The fused steps of `closed` and the kernels rendered for `target` ("c" or "cuda")."""
    scalars = {}
    for v, c in zip(closed.jaxpr.constvars, closed.consts):
        if v.aval.ndim == 0:
            value = c._value
            scalars[id(v)] = np.asarray(value.get() if hasattr(value, "get") else value)
    steps = fuse(closed.jaxpr, emittable, scalars)
    kernels = []
    for s in steps:
        if isinstance(s, Kernel):
            kernels.append(render(s, target))
    return steps, kernels


def build_executable(closed: ClosedJaxpr, *, backend: str) -> "Executable":
    """Compile `closed` for `backend` ("c": C on the CPU, "cuda": CUDA C through CuPy)."""
    if backend == "c":
        from .cpu import ARRAY_DATA_OFFSET, compile_libraries, toolchain

        toolchain()   # no C compiler: NotImplementedError, and the caller interprets instead
        steps, kernels = plan_steps(closed, "c")

        def sources(simd: bool) -> dict[str, str]:
            head = prelude("c", simd=simd, data_offset=ARRAY_DATA_OFFSET)
            return {k.name: head + k.source for k in kernels}

        libs = compile_libraries(sources(True), __version__, sources) if kernels else {}
        source = render_module(kernels, "c", data_offset=ARRAY_DATA_OFFSET)
        launch = lambda gk: _c_launcher(libs[gk.name], gk)
    elif backend == "cuda":
        from .cuda import load_module, launcher

        steps, kernels = plan_steps(closed, "cuda")
        source = render_module(kernels, "cuda")
        module = load_module(source, [k.name for k in kernels]) if kernels else None
        launch = lambda gk: launcher(module, gk)
    else:
        raise ValueError(f"build_executable: backend must be 'c' or 'cuda', got {backend!r}")
    log.debug("generated source:\n%s", source)
    return Executable(closed, steps, kernels, source, backend, launch)


class Executable:
    """Runs a compiled jaxpr: `exe(*tensors) -> list[Tensor]`; `.kernels()` and `.source()` show what runs."""

    def __init__(self, closed: ClosedJaxpr, steps: list, kernels: list[GeneratedKernel], source: str, backend: str,
                 launch):
        self._kernels, self._source, self.backend = kernels, source, backend
        jaxpr = closed.jaxpr
        self._n_in = len(jaxpr.invars)
        slots: dict[int, int] = {}

        def slot(v: Var) -> int:
            return slots.setdefault(id(v), len(slots))

        self._in_slots = [slot(v) for v in jaxpr.invars]
        self._consts = [(slot(v), c._value) for v, c in zip(jaxpr.constvars, closed.consts)]
        contiguous: set[int] = set()       # slots read by kernels, which assume row-major layout
        for s in steps:
            if isinstance(s, Kernel):
                contiguous.update(slot(v) for v in s.inputs)
        runs, reads = [], []
        kernel_iter = iter(kernels)
        for s in steps:
            if isinstance(s, Kernel):
                gk = next(kernel_iter)
                runs.append(launch(gk)(self._slots_of(s.inputs, slot), self._slots_of(s.outputs, slot),
                                       [(tuple(v.aval.shape), v.aval.dtype.np) for v in s.outputs]))
                reads.append([slot(v) for v in s.inputs])
            else:
                runs.append(_library_step(s, slot, contiguous))
                reads.append([slot(a) for a in s.inputs if isinstance(a, Var)])
        self._outs = [("value", a.val._value) if isinstance(a, Literal) else ("slot", slot(a))
                      for a in jaxpr.outvars]
        self._devices = [a.aval.device for a in jaxpr.outvars]
        keep = {s for kind, s in self._outs if kind == "slot"}
        last: dict[int, int] = {}
        for i, r in enumerate(reads):
            for s in r:
                last[s] = i
        frees = [[] for _ in runs]
        for s, i in last.items():
            if s not in keep:
                frees[i].append(s)
        self._steps = list(zip(runs, [tuple(f) for f in frees]))
        self._n_slots = len(slots)
        self._check = [(s, True) for s in self._in_slots if s in contiguous]
        self._consts = [(s, _contiguous(c) if s in contiguous else c) for s, c in self._consts]

    @staticmethod
    def _slots_of(vars_, slot) -> list[int]:
        return [slot(v) for v in vars_]

    def __call__(self, *args: Tensor) -> list[Tensor]:
        if len(args) != self._n_in:
            raise FnxRuntimeError(f"compiled function: expected {self._n_in} arguments, got {len(args)}")
        env = [None] * self._n_slots
        for s, t in zip(self._in_slots, args):
            env[s] = t._value
        for s, _ in self._check:
            a = env[s]
            if not a.flags.c_contiguous:
                env[s] = _contiguous(a)
        for s, c in self._consts:
            env[s] = c
        for run, free in self._steps:
            run(env)
            for s in free:
                env[s] = None
        return [make(env[x] if kind == "slot" else x.copy(), dev) for (kind, x), dev in zip(self._outs, self._devices)]

    def kernels(self) -> list[GeneratedKernel]:
        """The generated kernels, in execution order (each has .name, .source and .target)."""
        return list(self._kernels)

    def source(self) -> str:
        """The whole generated translation unit: the target's prelude and every kernel."""
        return self._source

    def __repr__(self) -> str:
        names = ", ".join(k.name for k in self._kernels) or "no kernels"
        return f"<Executable ({self.backend}): {len(self._steps)} steps; {names}>"


def _contiguous(a):
    if a.flags.c_contiguous:
        return a
    return a.__array_namespace__().ascontiguousarray(a) if hasattr(a, "__array_namespace__") else np.ascontiguousarray(a)


def _library_step(eqn, slot, contiguous: set):
    """Run one equation through its primitive's impl, as eager mode does."""
    prim, params = eqn.prim, eqn.params
    ins = [(None, a.val._value) if isinstance(a, Literal) else (slot(a), None) for a in eqn.inputs]
    outs = [slot(v) for v in eqn.outvars]
    fix = [s in contiguous for s in outs]
    multiple = prim.multiple_results
    xp = eqn.outvars[0].aval.device.xp if eqn.outvars else np

    def run(env):
        arrays = [env[s] if s is not None else v for s, v in ins]
        result = prim.impl(xp, *arrays, **params)
        for s, o, f in zip(outs, result if multiple else (result,), fix):
            if isinstance(o, np.generic):
                o = np.asarray(o)
            env[s] = _contiguous(o) if f else o

    return run


def _c_launcher(lib, gk: GeneratedKernel):
    """A factory of step functions calling C kernel `gk` from `lib` with the array objects of its buffers."""
    fn = lib[gk.name]
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    fn.restype = None
    meta = (ctypes.c_longlong * max(len(gk.meta), 1))(*gk.meta)

    def bind(in_slots: list[int], out_slots: list[int], out_specs: list):
        objs = (ctypes.c_void_p * gk.n_buffers)()
        objs_addr, meta_addr = ctypes.addressof(objs), ctypes.addressof(meta)
        n_in = len(in_slots)
        outs = list(zip(range(n_in, n_in + len(out_slots)), out_slots, out_specs))
        ins = list(enumerate(in_slots))
        empty = np.empty

        def run(env):
            for i, s in ins:
                objs[i] = id(env[s])
            for i, s, (shape, dtype) in outs:
                a = env[s] = empty(shape, dtype)
                objs[i] = id(a)
            fn(objs_addr, meta_addr)   # the arrays stay referenced by env during the call

        run.meta = meta   # keeps the argument block alive with the step
        return run

    return bind
