"""The executable plan: fused kernels and library calls in order, over buffers allocated per call.

`build_executable(closed, backend="c"|"cuda"|"opencl")` fuses the jaxpr, renders its
kernels, has the backend's `Target` (fnx/lowering/targets/) compile them
once, and returns an `Executable`. Everything that does
not depend on the arguments (kernel handles, argument blocks of sizes and
strides, buffer slots, which buffer dies after which step) is fixed at build
time, so a call only stores array addresses, allocates outputs (numpy or
CuPy) and launches; intermediates are dropped after their last use (large
freed blocks stay in the C heap for the next allocation: fnx/_heap.py). Equations that are not fused ("library" steps:
matmul, gather, sort, control flow, random bits, ...) run through their
primitive's `impl` on the arrays, exactly as eager mode runs them.

Checks (the "check" group: an index out of range): a kernel that computes one
stores 1 into the executable's error flag (a 1-element int32 array after
its buffers) where a value fails, and writes the checked values out. The C
driver reads the flag right after such a kernel, before any library step
reads the values (numpy would raise an error of its own), and so does the
OpenCL driver, whose library steps run on numpy too; the CUDA driver reads it
once per call, after the last step (one device-to-host copy, paid only by
executables that check; CuPy wraps an out-of-range index, so the steps in
between stay in bounds), keeping the checked values alive until then. A
raised flag is cleared, and each check's impl runs on its values in program
order: the first that fails raises eager mode's error and message.

Donation (`Executable.donating(positions)`): a second driver in which donated
inputs lend their buffers to kernel outputs of the same byte size. The plan
picks, per donated input, an output written after the input's last read, or
written by the kernel of that last read at exactly the index it reads the
input (in place: an elementwise kernel, or a reduction kernel's per-row output
computed after the row's reductions, which may read the input at that row's
index). At run time a buffer is taken only when nothing else can see it: its
reference count shows one tensor and the driver (no
second tensor, view, argument or live intermediate aliases it), it is
row-major and writeable, and its base, if any, is referenced by it alone.
"""
from __future__ import annotations

import ctypes
import functools
import math
import sys

import numpy as np

from .._graph import preorder
from .. import _heap, debug
from ..core import FnxRuntimeError
from ..ir import ClosedJaxpr, Literal, Var
from ..tensor import Tensor, make
from .codegen import GeneratedKernel, emittable, prelude, render, render_module
from .column_blocks import block_columns
from .fusion import Kernel, fuse
from .targets import Target, get_target
from .template_library import build_soon

__all__ = ["build_executable", "Executable", "Donating", "plan_steps", "generated_source", "working_set"]


def plan_steps(closed: ClosedJaxpr, target: Target | str) -> tuple[list, list[GeneratedKernel]]:
    """The fused steps of `closed` and the kernels rendered for `target` (a Target or its name: "c", "cuda",
    "opencl")."""
    scalars = {}
    for v, c in zip(closed.jaxpr.constvars, closed.consts):
        if v.aval.ndim == 0:
            value = c._value
            scalars[id(v)] = np.asarray(value.get() if hasattr(value, "get") else value)
    jaxpr = closed.jaxpr
    if get_target(target).name == "c":   # convolution columns in blocks of samples (its library steps run numpy)
        jaxpr = block_columns(jaxpr)
    steps = fuse(jaxpr, emittable, scalars)
    kernels = []
    for s in steps:
        if isinstance(s, Kernel):
            kernels.append(render(s, target))
    return steps, kernels


def build_executable(closed: ClosedJaxpr, *, backend: str) -> "Executable":
    """Compile `closed` for `backend`, the name of a target ("c": C on the CPU, "cuda": CUDA C through CuPy,
    "opencl": OpenCL C through pyopencl)."""
    target = get_target(backend)
    target.require()   # C without a compiler: NoCompilerError (the default backend interprets instead)
    if target.name == "c":   # the C libraries its library steps will call build while the steps are planned
        build_soon((e.prim.name, e.inputs[0].aval.dtype.name) for e in closed.jaxpr.eqns if e.inputs)
    steps, kernels = plan_steps(closed, target)
    program = target.build(kernels, functools.partial(prelude, target))
    source, launch, flag = program.source, program.launcher, program.flag
    if debug.LEVEL >= 3:   # FNX_DEBUG=3: how the IR was fused
        debug.log.debug("fused %d equations into %s", len(closed.jaxpr.eqns), _describe_steps(steps, kernels))
    exe = Executable(closed, steps, kernels, source, backend, launch, flag)
    if _array_module(closed) is np:   # its temporaries come from the C heap: keep them there for the next call
        _heap.keep_free(working_set(closed, steps))
    if debug.LEVEL >= 4:   # FNX_DEBUG=4: the generated kernels and the driver that calls them
        debug.log.debug("generated %s source:\n%s\ndriver:\n%s", backend, source, exe.driver_source)
    return exe


def _describe_steps(steps: list, kernels: list[GeneratedKernel]) -> str:
    names = iter(k.name for k in kernels)
    shown = [next(names) if isinstance(s, Kernel) else f"{s.prim.name} (library)" for s in steps]
    return f"{len(kernels)} kernel(s) and {len(steps) - len(kernels)} library step(s): {', '.join(shown)}"


def generated_source(closed: ClosedJaxpr, target: Target | str) -> str:
    """The source that `build_executable(closed, backend=target)` compiles, rendered without building (no compiler
    or GPU needed: a machine without one can still compile-check CUDA source with nvcc)."""
    return render_module(plan_steps(closed, target)[1], target)


class Executable:
    """Runs a compiled jaxpr: `exe(*tensors) -> list[Tensor]`; `.kernels()` and `.source()` show what runs.

    The steps become one generated Python function (`.driver_source`) with a line per array it touches:
    read the arguments, check that kernel inputs are row-major, allocate outputs, store array addresses,
    call the kernel or the library function, drop arrays after their last use, wrap the results.
    """

    def __init__(self, closed: ClosedJaxpr, steps: list, kernels: list[GeneratedKernel], source: str, backend: str,
                 launch, flag=None):
        self._kernels, self._source, self.backend = kernels, source, backend
        self._closed, self._steps, self._launch, self._flag = closed, steps, launch, flag
        self._n_in = len(closed.jaxpr.invars)
        self.driver_source, self._run = _Driver(closed, steps, kernels, launch, flag).build()
        self._donating: dict[tuple, Donating] = {}
        self._consuming = None

    def __call__(self, *args: Tensor) -> list[Tensor]:
        if len(args) != self._n_in:
            raise FnxRuntimeError(f"compiled function: expected {self._n_in} arguments, got {len(args)}")
        return self._run(*args)

    def consume(self, args: list[Tensor]) -> list[Tensor]:
        """Run on the tensors in `args`, emptying the list once they are read: an input that nothing else
        references (a backward's residuals) is then freed after its last use, not at the end of the call."""
        if len(args) != self._n_in:
            raise FnxRuntimeError(f"compiled function: expected {self._n_in} arguments, got {len(args)}")
        if self._consuming is None:
            self._consuming = _Driver(self._closed, self._steps, self._kernels, self._launch, self._flag,
                                      boxed=True).build()[1]
        return self._consuming(args)

    def donating(self, positions: tuple[int, ...]) -> "Donating":
        """The driver that lends the buffers of the inputs at `positions` to outputs (built once per set)."""
        found = self._donating.get(positions)
        if found is None:
            driver = _Driver(self._closed, self._steps, self._kernels, self._launch, self._flag, positions)
            source, run = driver.build()
            found = self._donating[positions] = Donating(run, source, driver.donors)
        return found

    def kernels(self) -> list[GeneratedKernel]:
        """The generated kernels, in execution order (each has .name, .source and .target)."""
        return list(self._kernels)

    def source(self) -> str:
        """The whole generated translation unit: the target's prelude and every kernel."""
        return self._source

    def __repr__(self) -> str:
        names = ", ".join(k.name for k in self._kernels) or "no kernels"
        return f"<Executable ({self.backend}): {names}>"


class Donating:
    """A driver lending donated input buffers to outputs: `run(*tensors, used) -> list[Tensor]`.

    `donors` maps each donated input position that has a planned output to that output's index; the
    driver appends to `used` the positions whose buffer it did take (their tensors must then be
    invalidated by the caller). Donated positions missing from `donors` have no output to go to.
    """

    __slots__ = ("run", "driver_source", "donors")

    def __init__(self, run, driver_source: str, donors: dict[int, int]):
        self.run, self.driver_source, self.donors = run, driver_source, donors


class _Holder:
    """Stands for a tensor in the reference-count probe below."""

    __slots__ = ("value",)


def _probe_refs() -> int:
    """References to an array held by one tensor slot and one local, as getrefcount sees it in a driver."""
    holder = _Holder()
    holder.value = np.empty(1)
    x = holder.value
    return sys.getrefcount(x)


def _base_refs(x) -> int:
    base = x.base
    return sys.getrefcount(base)


_SOLE_REFS = _probe_refs()
_BASE_REFS = _base_refs(np.empty(2)[:1])   # a base referenced by its one view only


def _unshared(x) -> bool:
    """Whether array `x` may be overwritten as far as its layout and base go (the caller counts `x`'s own
    references): row-major, writeable, and owning its memory or viewing a base that nothing else holds."""
    flags = x.flags
    if not (flags.c_contiguous and getattr(flags, "writeable", True)):   # CuPy arrays are always writeable
        return False
    base = x.base
    if base is None:
        return True
    return sys.getrefcount(base) == _BASE_REFS


class _Driver:
    """Writes the Python function that runs a plan's steps; the objects it uses go into its namespace."""

    def __init__(self, closed: ClosedJaxpr, steps: list, kernels: list[GeneratedKernel], launch, flag=None,
                 donate: tuple[int, ...] = (), boxed: bool = False):
        self.closed, self.steps, self.kernels, self.launch, self.flag = closed, steps, kernels, launch, flag
        self.boxed = boxed   # run(args): the arguments in a list, which the driver empties once it has read them
        self.xp = _array_module(closed)
        self.namespace = {"make": make, "ascontiguous": self.xp.ascontiguousarray, "flag": flag}
        self.names: dict[int, str] = {}
        self.lines: list[str] = []
        self.donate = donate
        self.lent: dict[int, tuple[int, Var]] = {}   # id(output var) -> (donated position, donated var)
        self.donors: dict[int, int] = {}             # donated position -> output index

    def build(self) -> tuple[str, object]:
        """(source, function) of the driver."""
        source, namespace = self.write()
        exec(compile(source, f"<fnx driver: {len(self.steps)} steps>", "exec"), namespace)
        run = namespace["run"]
        if debug.LEVEL:   # FNX_DEBUG >= 1: log each call
            backend = self.kernels[0].target if self.kernels else "c" if self.xp is np else "cuda"
            run = debug.compiled_call(run, backend, len(self.kernels),
                                      len(self.steps) - len(self.kernels))
        return source, run

    def value(self, obj, hint: str) -> str:
        """A namespace name bound to `obj`."""
        name = f"{hint}{len(self.namespace)}"
        self.namespace[name] = obj
        return name

    def var(self, v: Var) -> str:
        return self.names.setdefault(id(v), f"x{len(self.names)}")

    def atom(self, a) -> str:
        return self.value(a.val._value, "lit") if isinstance(a, Literal) else self.names[id(a)]

    def write(self) -> tuple[str, dict]:
        jaxpr = self.closed.jaxpr
        row_major = {id(v) for s in self.steps if isinstance(s, Kernel) for v in s.inputs}
        if self.xp is np:
            row_major |= _shared_transposed_operands(self.steps)
        args = [f"a{i}" for i in range(len(jaxpr.invars))]
        for i, (a, v) in enumerate(zip(args, jaxpr.invars)):
            x = self.var(v)
            self.lines.append(f"{x} = {f'args[{i}]' if self.boxed else a}._value")
            if id(v) in row_major:
                self.lines.append(f"if not {x}.flags.c_contiguous: {x} = ascontiguous({x})")
        if self.boxed:   # the list held the caller's references: each input may now die after its last use
            self.lines.append("args.clear()")
            args = ["args"]
        for v, c in zip(jaxpr.constvars, self.closed.consts):
            value = c._value
            if id(v) in row_major and not value.flags.c_contiguous:
                value = self.xp.ascontiguousarray(value)
            self.names[id(v)] = self.value(value, "const")
        last = _last_uses(self.closed, self.steps)
        deferred = self.flag is not None and self.xp is not np   # CUDA reads the flag once, after the last step
        if deferred:   # ... so the values it checked stay alive until then
            checked = {id(v) for gk in self.kernels for v, _ in gk.kernel.checks}
            for dead in last.values():
                dead[:] = [vid for vid in dead if vid not in checked]
        if self.donate:
            args.append("used")
            self._plan_donation(last)
        kernels = iter(self.kernels)
        for i, step in enumerate(self.steps):
            if isinstance(step, Kernel):
                self._kernel(step, next(kernels))
            else:
                self._library(step, row_major)
            dead = [self.names[vid] for vid in last.get(i, ()) if vid in self.names
                    and self.names[vid].startswith("x")]
            if dead:
                self.lines.append(f"del {', '.join(dead)}")
        if deferred:
            order = {id(e): i for i, e in enumerate(jaxpr.eqns)}
            checks = sorted((c for gk in self.kernels for c in gk.kernel.checks), key=lambda c: order[id(c[1])])
            self._check_flag(checks, "flag.get()[0]")
        outs = []
        consts = {id(v) for v in jaxpr.constvars}
        for a in jaxpr.outvars:   # literals and constants: a fresh array per call, as the interpreter gives
            fresh = isinstance(a, Literal) or id(a) in consts
            value = f"{self.atom(a)}.copy()" if fresh else self.atom(a)
            outs.append(f"make({value}, {self.value(a.aval.device, 'dev')})")
        self.lines.append(f"return [{', '.join(outs)}]")
        body = "\n".join("    " + line for line in self.lines)
        return f"def run({', '.join(args)}):\n{body}\n", self.namespace

    def _plan_donation(self, last: dict[int, list[int]]) -> None:
        """Pair each donated input with a kernel output that may take its buffer (see the module docstring).

        A donated input must outlive the reads of every view of it that library steps make, and it is kept
        alive (not dropped at its last read) until the step whose output takes its buffer.
        """
        jaxpr = self.closed.jaxpr
        outvars = {id(a) for a in jaxpr.outvars if isinstance(a, Var)}
        root = {id(v): id(v) for v in jaxpr.invars}   # id(view) -> id(the donated input it views)
        reads: dict[int, list[int]] = {}              # id(donated input) -> steps reading it or a view of it
        for i, s in enumerate(self.steps):
            ins = s.inputs if isinstance(s, Kernel) else [a for a in s.inputs if isinstance(a, Var)]
            for v in ins:
                if id(v) in root:
                    reads.setdefault(root[id(v)], []).append(i)
            if not isinstance(s, Kernel) and s.prim.view and isinstance(s.inputs[0], Var) and id(s.inputs[0]) in root:
                for v in s.outvars:
                    root[id(v)] = root[id(s.inputs[0])]
        visible = {root[vid] for vid in outvars if vid in root}   # donated inputs that are (views of) outputs
        out_index = {id(a): k for k, a in enumerate(jaxpr.outvars) if isinstance(a, Var)}
        kernel_steps = [s for s in self.steps if isinstance(s, Kernel)]
        split = {id(s): gk.split for s, gk in zip(kernel_steps, self.kernels)}   # id(kernel) -> rows shared?
        candidates = [(i, s, o) for i, s in enumerate(self.steps) if isinstance(s, Kernel)
                      for o in s.outputs if id(o) in out_index]
        for p in self.donate:
            v = jaxpr.invars[p]
            if id(v) in visible:
                continue
            end = max(reads.get(id(v), [-1]))
            size = _nbytes(v)
            for prefer_same in (True, False):
                found = next(((i, o) for i, s, o in candidates if id(o) not in self.lent and _nbytes(o) == size
                              and (not prefer_same or o.aval == v.aval)
                              and (i > end or i == end and _in_place(s, v, o, root, split[id(s)]))), None)
                if found is not None:
                    break
            if found is None:
                continue
            i, o = found
            self.lent[id(o)] = (p, v)
            self.donors[p] = out_index[id(o)]
            for dead in last.values():
                if id(v) in dead:
                    dead.remove(id(v))
            last.setdefault(i, []).append(id(v))

    def _kernel(self, k: Kernel, gk: GeneratedKernel) -> None:
        ins = [self.names[id(v)] for v in k.inputs]
        outs = [self.var(v) for v in k.outputs]
        call = self.launch(gk)
        self.lines.append(f"# {gk.name}")
        if gk.mode:   # GPU targets: the launcher allocates the outputs that it is not given
            if debug.LEVEL:   # FNX_DEBUG >= 1: log each launch
                call = debug.kernel_call(gk.name, gk.target, call)
            given = []
            for x, v in zip(outs, k.outputs):
                if id(v) in self.lent:
                    self._lend(x, v, "None")
                given.append(x if id(v) in self.lent else "None")
            lend = f", outs=({', '.join(given)},)" if any(g != "None" for g in given) else ""
            self.lines.append(f"{', '.join(outs)}, = {self.value(call, 'k')}({', '.join(ins)}{lend})")
            if k.checks and self.xp is np:   # OpenCL on numpy arrays: before a library step reads the values
                self._check_flag(k.checks, "flag.get()[0]")
            return
        fn, objs, meta = call
        if debug.LEVEL:   # FNX_DEBUG >= 1: log each call
            fn = debug.kernel_call(gk.name, "c", fn)
        self.namespace.setdefault("empty", np.empty)
        for x, v in zip(outs, k.outputs):
            shape, dtype = tuple(v.aval.shape), v.aval.dtype.np
            fresh = f"empty({self.value(shape, 'shape')}, {self.value(dtype, 'dtype')})"
            if id(v) in self.lent:
                self._lend(x, v, fresh)
            else:
                self.lines.append(f"{x} = {fresh}")
        o = self.value(objs, "objs")
        self.value(meta, "meta")   # the blocks stay referenced by the namespace; the call passes their addresses
        for i, x in enumerate(ins + outs):
            self.lines.append(f"{o}[{i}] = id({x})")
        pointers = [self.value(ctypes.c_void_p(ctypes.addressof(block)), "p") for block in (objs, meta)]
        self.lines.append(f"{self.value(fn, 'kernel')}({', '.join(pointers)})")
        if k.checks:   # C: before any library step can read a bad index (numpy would raise its own error)
            self._check_flag(k.checks, "flag[0]")

    def _check_flag(self, checks: list, raised: str) -> None:
        """A line that, where the flag is `raised`, re-runs the `checks` ((Var, Eqn) pairs) on the host."""
        self.namespace.setdefault("bad_value", _bad_value)
        impl = lambda e: self.value(functools.partial(e.prim.impl, self.xp, **e.params), e.prim.name)
        pairs = [f"({self.names[id(v)]}, {impl(e)})" for v, e in checks]
        self.lines.append(f"if {raised}: bad_value(flag, ({', '.join(pairs)},))")

    def _lend(self, x: str, v: Var, fallback: str) -> None:
        """Lines setting `x` to the buffer lent to output `v` when nothing else sees it, else to `fallback`."""
        p, donor = self.lent[id(v)]
        d = self.names[id(donor)]
        self.namespace.update(getrefcount=sys.getrefcount, unshared=_unshared, SOLE=_SOLE_REFS)
        same = donor.aval.shape == v.aval.shape and donor.aval.dtype == v.aval.dtype
        taken = d if same else f"{d}.reshape(-1).view({self.value(v.aval.dtype.np, 'dtype')})" \
            f".reshape({self.value(tuple(v.aval.shape), 'shape')})"
        self.lines.append(f"if getrefcount({d}) == SOLE and unshared({d}):   # input {p} lends its buffer")
        self.lines.append(f"    {x} = {taken}")
        self.lines.append(f"    used.append({p})")
        self.lines.append("else:")
        self.lines.append(f"    {x} = {fallback}")

    def _library(self, eqn, row_major: set) -> None:
        """A call of the primitive's impl with its params bound (as eager mode runs it), then per output: numpy's
        scalar for a 0-d result made an array, and a copy where a kernel reads a result that is not row-major."""
        prim = eqn.prim
        fn = self.value(functools.partial(prim.impl, self.xp, **eqn.params), prim.name)
        outs = [self.var(v) for v in eqn.outvars]
        args = ", ".join(self.atom(a) for a in eqn.inputs)
        self.lines.append(f"{', '.join(outs)}{',' if prim.multiple_results else ''} = {fn}({args})")
        for x, v in zip(outs, eqn.outvars):
            if v.aval.ndim == 0:
                self.namespace.setdefault("array0d", _array0d)
                self.lines.append(f"{x} = array0d({x})")
            elif id(v) in row_major:
                self.lines.append(f"if not {x}.flags.c_contiguous: {x} = ascontiguous({x})")


# Products with at most this many rows whose right operand is a transposed matrix read by two or more of them
# (`_shared_transposed_operands`).
SMALL_PRODUCT_ROWS = 64


def _shared_transposed_operands(steps: list) -> set:
    """The ids of the transposed matrices (a `transpose` library step's 2-D output: a view) that two or more
    products of at most SMALL_PRODUCT_ROWS rows read as their right operand: a recurrent cell's W.T, read once per
    time step of the unrolled loop. The driver makes each row-major once per call: OpenBLAS's product with a
    transposed right operand and few rows takes 2-2.5x its plain one ((32, 128) @ (128, 64): 10.5 us vs 4.3), and a
    copy of the matrix costs about as much as one such product loses, so a copy pays from its second reader on."""
    transposed = {id(s.outvars[0]) for s in steps
                  if not isinstance(s, Kernel) and s.prim.name == "transpose" and s.outvars[0].aval.ndim == 2}
    readers: dict[int, int] = {}
    for s in steps:
        if isinstance(s, Kernel) or s.prim.name != "matmul" or len(s.inputs) != 2:
            continue
        a, b = s.inputs
        if isinstance(b, Var) and id(b) in transposed and a.aval.ndim >= 2 and \
                math.prod(a.aval.shape[:-1]) <= SMALL_PRODUCT_ROWS:
            readers[id(b)] = readers.get(id(b), 0) + 1
    return {vid for vid, n in readers.items() if n >= 2}


def _array_module(closed: ClosedJaxpr):
    """numpy or CuPy: the module of the arrays a call of `closed` computes."""
    return closed.jaxpr.outvars[0].aval.device.xp if closed.jaxpr.outvars else np


def _last_uses(closed: ClosedJaxpr, steps: list) -> dict[int, list[int]]:
    """Step index -> ids of the variables last read there (jaxpr outputs are never dropped)."""
    keep = {id(a) for a in closed.jaxpr.outvars if isinstance(a, Var)}
    last: dict[int, int] = {}
    for i, s in enumerate(steps):
        for v in (s.inputs if isinstance(s, Kernel) else [a for a in s.inputs if isinstance(a, Var)]):
            last[id(v)] = i
    out: dict[int, list[int]] = {}
    for vid, i in last.items():
        if vid not in keep:
            out.setdefault(i, []).append(vid)
    return out


def working_set(closed: ClosedJaxpr, steps: list) -> int:
    """The most bytes that a call's own arrays (kernel outputs, library results other than views) hold at once,
    each dropped as the driver drops it, after the last read of it and of every view of it: what the heap should
    keep for the next call."""
    last = _last_uses(closed, steps)
    base: dict[int, int] = {}      # id(value) -> id of the array whose memory it is (a view: its base's)
    holders: dict[int, int] = {}   # id(array) -> how many values not yet dropped are it or views of it
    sizes: dict[int, int] = {}
    live = peak = 0
    for i, s in enumerate(steps):
        if isinstance(s, Kernel) or not s.prim.view:
            for v in (s.outputs if isinstance(s, Kernel) else s.outvars):
                base[id(v)], holders[id(v)], sizes[id(v)] = id(v), 1, _nbytes(v)
                live += sizes[id(v)]
        elif isinstance(s.inputs[0], Var) and id(s.inputs[0]) in base:   # views of inputs hold no memory of ours
            for v in s.outvars:
                base[id(v)] = base[id(s.inputs[0])]
                holders[base[id(v)]] += 1
        peak = max(peak, live)
        for vid in last.get(i, ()):
            b = base.pop(vid, None)
            if b is not None:
                holders[b] -= 1
                if not holders[b]:
                    live -= sizes.pop(b)
    return peak


def _bad_value(flag, checks: tuple) -> None:
    """A kernel raised the error flag: clear it and run each check's impl on the values it checked, in program
    order, so that the first failing one raises eager mode's error (type and message)."""
    flag.fill(0)
    for values, check in checks:
        check(values)
    raise FnxRuntimeError("compiled function: a kernel flagged a value that its check accepts on the host")


def _nbytes(v: Var) -> int:
    return math.prod(v.aval.shape) * v.aval.dtype.np.itemsize


def _in_place(k: Kernel, v: Var, o: Var, root: dict, split: bool) -> bool:
    """Whether kernel `k` may write `o` over `v`, the input it reads for the last time.

    It may when it reads `v` (and no view of it) only at the index where it writes `o`, element for element,
    and every read of an element comes before its write: always in an elementwise kernel (a loop iteration
    loads, then stores); in a reduction kernel, for an output written once per row, after the row's
    reductions, by the one thread (C: thread or lane; CUDA: the block's or column's leader, after the
    reduction's barrier) that alone read that row's element of `v`: so the reductions may read `v` (w[j]
    while summing column j), but the per-element outputs and the other row outputs, computed after, may not.
    Split rows (`split`: several threads or blocks reduce one row and the last combines) are refused.
    """
    if v.aval.dtype.np.itemsize != o.aval.dtype.np.itemsize:
        return False
    if any(root.get(id(u)) == id(v) and u is not v for u in k.inputs):
        return False
    if v not in k.inputs:
        return True
    src, dst = k.inputs.index(v), len(k.inputs) + k.outputs.index(o)
    written = next(a for a in k.accesses if a.buffer == dst)
    if not all((a.strides, a.offset) == (written.strides, written.offset) for a in k.accesses if a.buffer == src):
        return False
    if k.kind == "elementwise":
        return True
    if any(k.accesses[a].buffer == dst and level != "row" for a, _, level in k.stores):
        return False
    if split:
        return False
    later = [n for a, n, level in k.stores if level == "col" or k.accesses[a].buffer != dst]
    return not any(n.op == "load" and k.accesses[n.params["access"]].buffer == src for n in _closure(later))


def _closure(nodes: list) -> list:
    """`nodes` and every node they are computed from (not through reductions, which are computed already)."""
    return preorder(nodes, lambda n: n.args if n.op != "reduce" else ())


def _array0d(o):
    """numpy returns a scalar (np.generic) for some 0-d results: the 0-d array the plan expects instead."""
    return np.asarray(o) if isinstance(o, np.generic) else o
