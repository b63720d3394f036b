"""`fnx.compile` (alias `fnx.jit`): trace once per input signature, optimise the IR, lower it, run it.

A `Compiled` function keeps one entry per input signature: the pytree structure of the arguments, each
tensor leaf's shape, dtype and device, the values of static arguments and the keyword names. A call whose
signature is cached does one dict lookup and runs the entry's executable; a new signature is traced into
a jaxpr (fnx/transforms/tracing.py), optimised (fnx/lowering/passes.py) and lowered
(fnx/lowering/__init__.py). Non-tensor leaves of dynamic arguments (Python numbers, strings) are
specialised like static arguments: each new value traces again. `FNX_LOG=compile` logs every trace,
cache hit and recompilation with its reason to the "fnx.compile" logger; the 8th recompilation of one compiled
function warns (once), naming the argument that keeps changing and what to do about it (a Python number that
changes every call, such as a learning rate, should be a 0-dim tensor).

Compile is itself a primitive, `compiled_call`, holding the optimised jaxpr: outside any transform the
executable runs directly; under grad, jvp, vmap or an enclosing trace the call binds the primitive, whose
rules transform the held jaxpr (jaxpr_rules.py), optimise the result and bind `compiled_call` again, so
derivatives and batched versions are compiled too (and cached with the jaxpr they derive from). Eager
tensors that require grad make the call one node on the autograd tape whose backward is the compiled VJP.

`fnx.compile(module)` for a callable pytree of tensors (an nn.Module) passes the module to itself as its first
argument: its structure and training flags are part of the signature and its tensors are inputs read at every
call (torch.compile's guards on a module, as a signature).

Buffers of module arguments are state, as torch.compile treats them: while tracing, a buffer may be written in
place (`self.buf.add_(x)`) or rebound (`self.buf = new`, BatchNorm's running statistics in training mode); each
buffer that changed is an extra output of the compiled code, and the call copies it into the caller's buffer
(in place, detached, bumping its version counter, as eager mode does). Integer buffers (BatchNorm's
num_batches_tracked) are not pytree leaves, so they are extra trailing inputs of the jaxpr where the function
reads them. The module layer lists a pytree's buffers through `buffer_slots_hook`. Under grad or jvp the update's
primal value is written back, as eager BatchNorm does; under vmap a buffer update raises NotImplementedError.

Tensors that the function captures rather than takes as arguments are constants of the compiled
function, as in JAX (small values computed from them are folded at compile time); captured tensors that
require grad (a model's parameters) are passed to the executable at every call instead, so gradients
reach them, as with torch.compile.

Sampling from the global generators (fnx.rand, randn, bernoulli, F.dropout, nn.Dropout, ...) is compiled
as torch.compile does it, with a seed threaded into the compiled code: while tracing, each sampling site
draws from its own subkey of a per-device key (fnx/ops/sampling.py), and that key becomes a hidden
leading input of the jaxpr. Every call draws a fresh key from the device's default generator (one 64-bit
draw, advancing it as one eager sample would), so calls differ, `fnx.manual_seed` makes a sequence of
calls reproducible, and the cache key does not change. The backward of a compiled call gets the same
key, so it uses the same dropout mask as its forward. Around a compiled call the key draw obeys vmap's
`randomness` like any sampler ("error" raises, "same" shares one key, "different" batches the keys).
`make_jaxpr` does not thread keys: sampling there raises; `.lower(*args).as_text()` shows the key input.

`donate_argnums` donate every tensor leaf of the named positional arguments (a list, dict or module
donates each of its tensors), as in JAX: the "c" and "cuda" executables write outputs into donated
buffers of the same byte size, in place when an elementwise kernel reads the donated tensor at exactly
the index it writes, else after the tensor's last read (fnx/lowering/plan.py). A donated tensor whose
buffer now holds an output is invalid: any use of it raises an error naming the function and the
argument (fnx/transforms/donation.py). A donated tensor whose buffer is not taken stays valid: when no
output can take it (a warning, once per signature, like JAX's "Some donated buffers were not usable"),
or when something else shares its memory (another tensor, a view of it, the same tensor passed twice,
a numpy array it wraps) or it is not row-major (silently; `FNX_LOG=compile` logs it). Donation happens
only in a call that autograd does not record: donating a tensor that requires grad while grad mode is on
raises, and a call recorded for another argument's sake donates nothing. Under an enclosing transform
(grad, vmap, an outer compile), and with the "interpret" backend, donation is ignored.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import os
import sys
import threading
import time
import weakref

import numpy as np

from .. import core, debug
from ..autograd import no_grad
from .._warn import FNX_DIR, warn
from ..core import FnxRuntimeError, FnxTypeError, FnxValueError, Primitive
from ..errors import ConcretizationError
from ..dtypes import from_numpy_dtype
from ..ir import ClosedJaxpr, Jaxpr
from ..lowering import check_backend, default_backend, lower
from ..lowering.interpret import run_eagerly
from ..lowering.passes import optimize
from ..lowering.remat import rematerialize
from ..ops.autocast import autocast_key
from ..ops.creation import tensor, zeros_like
from ..ops.sampling import compiled_call_key, staged_keys
from ..tensor import Tensor, Tracer, from_array
from ..tree import tree_flatten, tree_leaves, tree_map, tree_unflatten
from .batching import batch_size
from .donation import Donation, donated_leaves
from .jaxpr_rules import batch_jaxpr, jvp_jaxpr, split_vjp_jaxpr, vjp_jaxpr
from .tracing import StagingTracer, trace_to_jaxpr

__all__ = ["compile", "jit", "Compiled", "Lowered", "CallJaxpr", "compiled_call_p", "tracing", "tracing_kinds",
           "compilation_disabled", "reset_all"]

_log = logging.getLogger("fnx.compile")
_DEBUG = logging.DEBUG
RECOMPILE_WARN = 8   # recompilations of one compiled function after which it warns, once (torch's recompile_limit)

# Set by fnx.nn.module (a layer above): buffer_slots_hook(tree) -> [(buffer dict, name), ...], where each buffer of
# the modules in a pytree lives, in a fixed order, so that compile reads and writes module state without nn.
buffer_slots_hook = None


def _configure_logging() -> None:
    """`FNX_LOG=compile` (a comma-separated list may name other layers too) turns the compile log on."""
    if "compile" not in os.environ.get("FNX_LOG", "").replace(",", " ").split():
        return
    _log.setLevel(logging.DEBUG)
    if not _log.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
        _log.addHandler(handler)


_configure_logging()


# ---------------------------------------------------------------- the compiled_call primitive
class CallJaxpr(ClosedJaxpr):
    """The jaxpr held by a compiled_call equation, with what is built from it cached for its lifetime:
    one executable per backend, and derived (jvp, vjp, batched) jaxprs, themselves CallJaxprs.

    `lock` is held while one of them is built (so two threads build it once) and while an executable runs:
    a generated driver keeps the addresses of a call's arrays in argument blocks that all its calls share
    (fnx/lowering/plan.py), so calls of one executable from several threads take turns.
    """

    __slots__ = ("executables", "derived", "lock")

    def __init__(self, closed: ClosedJaxpr):
        super().__init__(closed.jaxpr, closed.consts)
        self.executables: dict = {}
        self.derived: dict = {}
        self.lock = threading.RLock()

    def executable(self, backend: str):
        exe = self.executables.get(backend)
        if exe is None:
            with self.lock:
                exe = self.executables.get(backend)
                if exe is None:
                    exe = self.executables[backend] = lower(self, backend=backend)
        return exe

    def run(self, backend: str, args: list) -> list:
        exe = self.executable(backend)
        if core.profile_hook is not None:
            with core.profile_hook(f"compiled executable ({backend})"), self.lock:
                return exe(*args)
        with self.lock:
            return exe(*args)

    def consume(self, backend: str, args: list) -> list:
        """`run` on the tensors in `args`, emptying the list: the generated executables then free each input after
        its last use, where nothing else references it (the interpreter keeps its inputs until it returns)."""
        exe = self.executable(backend)
        if core.profile_hook is not None:
            with core.profile_hook(f"compiled executable ({backend})"), self.lock:
                return exe.consume(args) if hasattr(exe, "consume") else exe(*args)
        with self.lock:
            if hasattr(exe, "consume"):
                return exe.consume(args)
            return exe(*args)

    def derive(self, key: tuple, build) -> CallJaxpr:
        found = self.derived.get(key)
        if found is None:
            with self.lock:
                found = self.derived.get(key)
                if found is None:
                    found = self.derived[key] = CallJaxpr(optimize(build()))
        return found


compiled_call_p = Primitive("compiled_call", multiple_results=True)


@compiled_call_p.def_impl
def _call_impl(xp, *arrays, jaxpr: CallJaxpr, backend: str):
    outs = jaxpr.run(backend, [from_array(a) for a in arrays])
    return [o._value for o in outs]


@compiled_call_p.def_abstract
def _call_abstract(*avals, jaxpr: CallJaxpr, backend: str):
    if list(avals) != jaxpr.in_avals:
        raise FnxTypeError(f"compiled_call: called with {[a.str_short() for a in avals]}, but the compiled jaxpr takes "
                           f"{[a.str_short() for a in jaxpr.in_avals]}")
    return list(jaxpr.out_avals)


def _floats_only(values, rule_outs) -> list:
    """Spread `rule_outs` (one per floating value) over `values`, with None for the others."""
    it = iter(rule_outs)
    return [next(it) if v.dtype.is_floating_point else None for v in values]


@compiled_call_p.def_jvp
def _call_jvp(primals, tangents, *, jaxpr: CallJaxpr, backend: str):
    new = jaxpr.derive(("jvp",), lambda: jvp_jaxpr(jaxpr, jaxpr.in_avals))
    tans = [t for t, p in zip(tangents, primals) if p.dtype.is_floating_point]
    outs = compiled_call_p.bind(*primals, *tans, jaxpr=new, backend=backend)
    n = len(jaxpr.out_avals)
    return outs[:n], _floats_only(outs[:n], outs[n:])


@compiled_call_p.def_vjp
def _call_vjp(cts, primals, outs, *, jaxpr: CallJaxpr, backend: str):
    new = jaxpr.derive(("vjp",), lambda: vjp_jaxpr(jaxpr, jaxpr.in_avals))
    float_cts = [c if c is not None else zeros_like(o) for c, o in zip(cts, outs) if o.dtype.is_floating_point]
    return _floats_only(primals, compiled_call_p.bind(*primals, *float_cts, jaxpr=new, backend=backend))


# ---------------------------------------------------------------- a compiled call on the eager tape
# Recorded for `loss.backward()`, a compiled call runs the forward half of its split vjp (fwd: outputs and
# residuals), keeps the residuals in the tape node, and its backward runs only the backward half: the forward is
# not computed twice, as PyTorch's saved tensors avoid. The forward saves what fnx/lowering/remat.py picks (the
# backward recomputes cheap values from it), and the backward takes the residuals over, freeing each after its last
# use (as AOTAutograd's compiled backward clears its boxed inputs). A second backward through the node
# (retain_graph) and a backward that is itself differentiated (create_graph) take the full vjp.
class _Saved:
    """The residuals of one recorded compiled call, kept by its tape node until its backward takes them."""

    __slots__ = ("values",)

    def __init__(self):
        self.values = None


def _split(jaxpr: CallJaxpr, needs: tuple) -> tuple[CallJaxpr, CallJaxpr]:
    key = ("split", needs)
    found = jaxpr.derived.get(key)
    if found is None:
        with jaxpr.lock:
            found = jaxpr.derived.get(key)
            if found is None:
                fwd, bwd = rematerialize(*split_vjp_jaxpr(jaxpr, jaxpr.in_avals, needs), len(jaxpr.out_avals))
                found = jaxpr.derived[key] = (CallJaxpr(optimize(fwd)), CallJaxpr(optimize(bwd)))
    return found


# Its vjp reads the residuals the forward saved, not its inputs (buffers such as BatchNorm's running statistics,
# which the compiled call itself updates in place after its node is recorded): no version check on the inputs.
compiled_call_saving_p = Primitive("compiled_call_saving", multiple_results=True, saves_inputs=False)


@compiled_call_saving_p.def_impl
def _saving_impl(xp, *arrays, jaxpr: CallJaxpr, backend: str, saved: _Saved, needs: tuple):
    outs = _split(jaxpr, needs)[0].run(backend, [from_array(a) for a in arrays])
    n = len(jaxpr.out_avals)
    saved.values = outs[n:]
    return [o._value for o in outs[:n]]


@compiled_call_saving_p.def_abstract
def _saving_abstract(*avals, jaxpr: CallJaxpr, backend: str, saved: _Saved, needs: tuple):
    return _call_abstract(*avals, jaxpr=jaxpr, backend=backend)


@compiled_call_saving_p.def_vjp
def _saving_vjp(cts, primals, outs, *, jaxpr: CallJaxpr, backend: str, saved: _Saved, needs: tuple):
    if core.state.grad_enabled or core.state.transforms_active or saved.values is None:
        return _call_vjp(cts, primals, outs, jaxpr=jaxpr, backend=backend)
    float_cts = [c if c is not None else zeros_like(o) for c, o in zip(cts, outs) if o.dtype.is_floating_point]
    args, saved.values = saved.values + float_cts, None   # each residual is freed after its last use in bwd
    in_cts = iter(_split(jaxpr, needs)[1].consume(backend, args))
    return [next(in_cts) if need else None for need in needs]


@compiled_call_p.def_batch
def _call_batch(args, dims, *, jaxpr: CallJaxpr, backend: str):
    size = batch_size(args, dims)
    dims = tuple(dims)
    new = jaxpr.derive(("batch", dims, size), lambda: batch_jaxpr(jaxpr, jaxpr.in_avals, dims, size))
    outs = compiled_call_p.bind(*args, jaxpr=new, backend=backend)
    return outs, [0] * len(outs)


# ---------------------------------------------------------------- signatures
class _Marker:
    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


_STATIC, _TREE, _KWARGS = _Marker("static"), _Marker("tree"), _Marker("kwargs")
_AUTOCAST = _Marker("autocast")  # then the autocast settings a signature was traced under (fnx.autocast)


def _tensor_desc(x: Tensor) -> tuple:
    """(shape, numpy dtype, device): the same for a concrete tensor and a tracer of the same type."""
    if not isinstance(x, Tracer):   # a Tensor or a subclass of it (a Parameter): read the array directly
        v = x._value
        return v.shape, v.dtype, x._device
    a = x.aval
    return a.shape, a.dtype.np, a.device


def _numpy_to_tensors(args: tuple, kwargs: dict) -> tuple:
    """numpy arrays among the arguments as tensors of their dtype (as jax.jit takes them), each a traced input."""
    def convert(x):
        return tensor(x) if isinstance(x, np.ndarray) else x

    return tree_map(convert, args), tree_map(convert, kwargs)


def _static_desc(value, label: str) -> tuple:
    if isinstance(value, Tensor):
        raise FnxTypeError(f"compile: {label} is static, but it is a Tensor; static arguments are Python values "
                           f"that are part of the cache key; pass tensors as regular arguments")
    try:
        hash(value)
    except TypeError:
        raise FnxTypeError(f"compile: {label} is static, so it must be hashable (it is part of the cache key), "
                           f"got an unhashable {type(value).__name__}; pass a tuple instead of a list, or make it "
                           f"a regular argument") from None
    return _STATIC, type(value), value


def _format_desc(desc) -> str:
    if desc[0] is _STATIC:
        return repr(desc[2])
    if desc[0] is _TREE:
        if desc[1].kind is None:   # a lone Python value
            return _format_desc(desc[2][0])
        return f"{desc[1]} of ({', '.join(_format_desc(d) for d in desc[2])})"
    shape, npd, dev = desc
    return f"{from_numpy_dtype(npd).name}{list(shape)}" + ("" if dev.type == "cpu" else f"@{dev}")


def _explain_leaf(label: str, old, new) -> list[str]:
    """How one tensor or static value changed between two signatures."""
    if old[0] is _STATIC or new[0] is _STATIC:
        if old[0] is _STATIC and new[0] is _STATIC:
            return [f"{label}: value {old[2]!r} -> {new[2]!r}"]
        return [f"{label}: {_format_desc(old)} -> {_format_desc(new)}"]
    out = []
    if old[0] != new[0]:
        out.append(f"{label}: shape {tuple(old[0])} -> {tuple(new[0])}")
    if old[1] != new[1]:
        out.append(f"{label}: dtype {from_numpy_dtype(old[1]).name} -> {from_numpy_dtype(new[1]).name}")
    if old[2] is not new[2]:
        out.append(f"{label}: device {old[2]} -> {new[2]}")
    return out


def _explain_arg(label: str, old, new) -> list[str]:
    if old == new:
        return []
    if old[0] is _TREE and new[0] is _TREE:
        if old[1] != new[1]:
            return [f"{label}: structure {old[1]} -> {new[1]}"]
        leaf = (lambda k: label) if old[1].kind is None else (lambda k: f"{label} leaf {k}")
        return [r for k, (a, b) in enumerate(zip(old[2], new[2])) for r in _explain_leaf(leaf(k), a, b)]
    if (old[0] is _TREE) != (new[0] is _TREE):
        return [f"{label}: {_format_desc(old)} -> {_format_desc(new)}"]
    return _explain_leaf(label, old, new)


def _autocast_of(key: tuple) -> tuple | None:
    """The autocast settings a signature key was traced under (None: autocast off)."""
    return key[key.index(_AUTOCAST) + 1] if _AUTOCAST in key else None


def _split_key(key: tuple) -> tuple[list, dict]:
    """Positional descriptors and {keyword: descriptor} of a signature key."""
    if _AUTOCAST in key:
        key = key[:key.index(_AUTOCAST)]
    if _KWARGS not in key:
        return list(key), {}
    cut = key.index(_KWARGS)
    rest = key[cut + 1:]
    return list(key[:cut]), dict(zip(rest[0::2], rest[1::2]))


# ---------------------------------------------------------------- compiled functions
class _Entry:
    """One signature's compiled function: the optimised jaxpr, its executable and how to rebuild outputs."""

    __slots__ = ("closed", "backend", "key_devices", "lifted", "out_tree", "single", "exe", "cacheable", "donate",
                 "donation", "state")

    def __init__(self, closed: CallJaxpr, backend: str, key_devices: tuple, lifted: list, out_tree,
                 cacheable: bool, state: _State | None):
        self.closed, self.backend, self.lifted, self.out_tree = closed, backend, tuple(lifted), out_tree
        self.key_devices = key_devices  # one random key input per device whose global generator f samples
        self.single = out_tree.kind is None  # the function returns one tensor
        self.exe = None
        self.cacheable = cacheable
        self.donate: list = []     # (input position, label) of each donated tensor leaf
        self.donation = None       # the Donation, built at the first call
        self.state = state         # the buffers it reads as extra inputs and writes back; None when none

    def executable(self):
        if self.exe is None:
            self.exe = self.closed.executable(self.backend)
        return self.exe


class _Tracing(threading.local):
    """Per thread: the traces running ("compile" for fnx.compile, "export" for fnx.export), innermost last, and how
    many fnx.compiler.disable(recursive=True) calls are running (compiled functions then run eagerly)."""
    kinds: tuple = ()
    disabled: int = 0


_tracing = _Tracing()
_compiled = weakref.WeakSet()   # every Compiled, for fnx.compiler.reset


@contextlib.contextmanager
def tracing(kind: str):
    """The code inside is traced by fnx.compile (`kind` "compile") or fnx.export ("export"): what
    fnx.compiler.is_compiling and is_exporting report."""
    outer = _tracing.kinds
    _tracing.kinds = (*outer, kind)
    try:
        yield
    finally:
        _tracing.kinds = outer


def tracing_kinds() -> tuple:
    """The traces running in this thread, innermost last ("compile", "export")."""
    return _tracing.kinds


@contextlib.contextmanager
def compilation_disabled():
    """Compiled functions called inside run their Python function eagerly (fnx.compiler.disable)."""
    _tracing.disabled += 1
    try:
        yield
    finally:
        _tracing.disabled -= 1


def reset_all() -> None:
    """Drop every compiled function's traced signatures: the next call of each traces again."""
    for compiled in list(_compiled):
        compiled.clear_cache()


# Where fnx asks a tracer for its value on behalf of others: a graph break names the frame that called into these.
_MACHINERY = (os.path.join(FNX_DIR, "tensor.py"), os.path.join(FNX_DIR, "transforms", ""))
# The cache entry of a signature whose trace needed a concrete value: calls with it run the function eagerly.
_EAGER = object()


class _State:
    """Which buffers of the module arguments a compiled function reads as extra trailing inputs (integer buffers,
    which are not pytree leaves) and writes back from its extra trailing outputs, as indices into the arguments'
    buffer slots (`buffer_slots_hook`), of which there were `count` when it traced."""

    __slots__ = ("count", "inputs", "outputs")

    def __init__(self, count: int, inputs: tuple, outputs: tuple):
        self.count, self.inputs, self.outputs = count, inputs, outputs

    def slots(self, name: str, dynamic: list) -> list:
        slots = buffer_slots_hook(dynamic)
        if len(slots) != self.count:
            raise FnxRuntimeError(f"fnx.compile({name}): the module arguments have {len(slots)} buffers, but "
                                  f"{self.count} when this signature was traced (an integer buffer was added or "
                                  f"removed); call .clear_cache() to trace again")
        return slots

    def write_back(self, name: str, slots: list, values: list) -> None:
        """Copy each updated buffer's new value into the caller's buffer, in place (detached: an output of a call
        that autograd records is on the tape)."""
        with no_grad():
            for k, new in zip(self.outputs, values):
                store, key = slots[k]
                buf = store[key]
                if isinstance(new, Tracer) and not isinstance(buf, Tracer):
                    new = _concrete_update(name, key, new)
                buf.copy_(new if new._node is None else new.detach())


def _concrete_update(name: str, key: str, new: Tracer) -> Tensor:
    """The value of a buffer update made under grad or jvp, whose tracers carry it (eager BatchNorm writes it there
    too); under vmap an update has a value per batch element, and none can be written back."""
    try:
        return new._concrete(f"writing back the buffer {key!r}")
    except FnxTypeError:
        raise NotImplementedError(
            f"fnx.compile({name}): the function updates the buffer {key!r} ({new.aval.str_short()}) under vmap (or "
            f"another transform without a concrete value): writing a batched buffer update back into a module is "
            f"not supported. Call .eval() there, or build such layers with track_running_stats=False") from None


def _trace_buffers(name: str, slots: list, int_inputs: list, int_tracers: tuple):
    """Prepare the module copies' buffers for tracing: the integer buffers become the traced inputs `int_tracers`,
    and every buffer may be written in place. Returns a function that, after the call, gives (slot index, new
    value) for each buffer that changed and restores the buffers as they were passed."""
    for k, t in zip(int_inputs, int_tracers):
        store, key = slots[k]
        store[key] = t
    before = []
    for store, key in slots:
        t = store[key]
        if isinstance(t, StagingTracer):   # an input of this trace: in-place ops may rebind it, it is written back
            t._frozen = None
        before.append((t, getattr(t, "_var", None)))

    def changed() -> list:
        out = []
        for k, ((store, key), (t, var)) in enumerate(zip(slots, before)):
            now = store[key]
            if now is t and getattr(now, "_var", None) is var:
                continue
            if not isinstance(now, Tensor) or tuple(now.shape) != tuple(t.shape):
                what = f"shape {list(now.shape)}" if isinstance(now, Tensor) else f"a {type(now).__name__}"
                raise NotImplementedError(
                    f"fnx.compile({name}): the function rebinds the buffer {key!r} of shape {list(t.shape)} to "
                    f"{what}; a compiled call writes buffers back in place, so their shapes must stay: assign "
                    f"a tensor of the buffer's shape, or update it in place")
            out.append((k, now.detach()))
            store[key] = t
        return out

    return changed


class Lowered:
    """A compiled function for one signature, for inspection: the optimised IR and the generated kernels."""

    def __init__(self, entry: _Entry):
        self._entry = entry

    @property
    def jaxpr(self) -> ClosedJaxpr:
        """The optimised IR. Leading inputs: a random key per device that f samples on (see the module
        docstring), then captured constants that require grad."""
        return self._entry.closed

    @property
    def backend(self) -> str:
        return self._entry.backend

    def as_text(self) -> str:
        return str(self._entry.closed)

    def compile(self):
        """The Executable: call it on concrete tensors (the jaxpr's inputs, in order) for a list of outputs. Each
        call checks its arguments against the inputs it was compiled for (the generated code reads them with those
        shapes: another one would read past its buffers), as JAX's compiled object does."""
        return _CheckedExecutable(self._entry.executable(), self._entry.closed.in_avals)

    def kernels(self) -> list:
        return self.compile().kernels()

    def source(self) -> str:
        return self.compile().source()

    def __repr__(self) -> str:
        return f"Lowered(backend={self.backend!r}, {len(self._entry.closed.eqns)} equations)"


class _CheckedExecutable:
    """`Lowered.compile()`'s Executable: each call's tensors are checked against the avals it was compiled for;
    everything else (kernels, source, ...) is the Executable's."""

    def __init__(self, exe, avals: list):
        self._exe, self._avals = exe, avals

    def __call__(self, *args) -> list:
        if len(args) != len(self._avals):
            raise FnxTypeError(f"compiled function: expected {len(self._avals)} arguments, got {len(args)}")
        for i, (a, want) in enumerate(zip(args, self._avals)):
            if not isinstance(a, Tensor):
                raise FnxTypeError(f"compiled function: argument {i} must be a Tensor, got {type(a).__name__}")
            if a.aval != want:
                raise FnxTypeError(
                    f"compiled function: argument {i} is {a.aval.str_short()}, but this computation was compiled "
                    f"for {want.str_short()}; call the fnx.compile'd function itself, which compiles for each new "
                    f"signature, or lower it again with arguments of this one")
        return self._exe(*args)

    def __getattr__(self, name: str):
        return getattr(self._exe, name)


def _index_set(nums, what: str) -> tuple:
    nums = (nums,) if isinstance(nums, int) else tuple(nums)
    for n in nums:
        if type(n) is not int:
            raise FnxTypeError(f"compile: {what} must be ints, got {n!r}")
    return nums


class Compiled:
    """A function compiled per input signature; call it like the original. See the module docstring."""

    def __init__(self, fun, static_argnums=(), static_argnames=(), donate_argnums=(), backend=None,
                 fullgraph: bool = False):
        if not callable(fun):
            raise FnxTypeError(f"compile: expected a function to compile, got a {type(fun).__name__}")
        self._fun = fun
        self.__wrapped__ = fun
        self.__name__ = getattr(fun, "__name__", type(fun).__name__)
        self.__qualname__ = getattr(fun, "__qualname__", self.__name__)
        self.__doc__ = getattr(fun, "__doc__", None)
        self._backend = None if backend is None else check_backend(backend)
        self._fullgraph = bool(fullgraph)
        nums = _index_set(static_argnums, "static_argnums")
        names = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames)
        donate = _index_set(donate_argnums, "donate_argnums")
        self._params = _positional_names(fun)
        # A callable pytree of tensors (an nn.Module) is its own first argument, so that its tensors, structure and
        # training flags are part of each call's signature, as torch.compile(model) guards on them.
        fun_leaves, fun_tree = tree_flatten(fun)
        self._module = fun_tree.kind is not None and all(isinstance(x, Tensor) for x in fun_leaves)
        if self._module:
            self._params = ["self", *self._params]
            nums = tuple(n + 1 if n >= 0 else n for n in nums)
            donate = tuple(n + 1 if n >= 0 else n for n in donate)
        self.donate_argnums = donate
        nums += tuple(self._params.index(n) for n in names if n in self._params)
        names += tuple(self._params[i] for i in nums if 0 <= i < len(self._params))
        self._static_nums = frozenset(nums)
        self._negative_static = any(n < 0 for n in nums)
        self._static_names = frozenset(names)
        if set(self.donate_argnums) & self._static_nums:
            raise FnxTypeError("compile: an argument cannot be both static and donated")
        self._cache: dict[tuple, _Entry] = {}
        self._last: tuple | None = None   # (key, entry) of the latest traced or called signature
        self._recompiles = 0
        self._changes: dict[str, tuple[int, str]] = {}   # changed argument -> (recompilations, latest change)
        _compiled.add(self)

    def __repr__(self) -> str:
        return f"<fnx.compile of {self.__qualname__}>"

    def __getattr__(self, name: str):
        """What the compiled object does not have comes from the wrapped callable: `fnx.compile(model)` stands
        in for the model as `torch.compile(model)` does (`.train()`, `.eval()`, `.zero_grad()`, `.parameters()`)."""
        if name.startswith("__") or name == "_fun":
            raise AttributeError(name)
        return getattr(self._fun, name)

    def __get__(self, obj, objtype=None):
        """As a method decorator: bind the instance (a Module instance is then the first pytree argument)."""
        if obj is None:
            return self
        return functools.partial(self, obj)

    # ------------------------------------------------------------------ calling
    def __call__(self, *args, **kwargs):
        if _tracing.disabled:   # inside fnx.compiler.disable
            return self._fun(*args, **kwargs)
        if self._module:
            args = (self._fun, *args)
        key, leaves = None, args
        if not kwargs and not self._static_nums:  # the common case, inline: positional tensors only
            key = []
            for a in args:
                if type(a) is not Tensor:
                    key = None
                    break
                v = a._value
                key.append((v.shape, v.dtype, a._device))
        given = args, kwargs   # a numpy array among them rebuilds args: buffers are written back into these
        if key is None:
            args, kwargs, key, leaves = self._converted_signature(args, kwargs)
        else:
            key = tuple(key)
        amp = autocast_key()
        if amp is not None:   # traced under autocast: the casts are part of the program
            key = (*key, _AUTOCAST, amp)
        last = self._last   # a repeated signature compares equal without hashing every descriptor again
        entry = last[1] if last is not None and last[1].cacheable and last[0] == key else self._cache.get(key)
        if entry is None:
            try:
                entry = self._trace(key, args, kwargs, leaves)
            except ConcretizationError as e:
                if self._fullgraph:
                    raise
                entry = self._graph_break(key, e)
        elif _log.isEnabledFor(_DEBUG):
            _log.debug("cache hit for %s %s", self.__name__, self._describe(key))
        if entry is _EAGER:
            args, kwargs = given
            return self._fun(*args[1:], **kwargs) if self._module else self._fun(*args, **kwargs)
        self._last = (key, entry)
        state, slots = entry.state, None
        if state is not None:
            slots = state.slots(self.__qualname__, self._dynamic(*given))
            leaves = [*leaves, *[slots[k][0][slots[k][1]] for k in state.inputs]]
        lifted = entry.lifted
        if lifted:
            leaves = [*lifted, *leaves]
        if entry.key_devices:
            leaves = [*[compiled_call_key(d, f"fnx.compile({self.__name__})") for d in entry.key_devices], *leaves]
        if not core.state.transforms_active:
            if not (_requires_grad(leaves) and core.state.grad_enabled):
                v = None   # the key loop's last array: a reference here would keep its buffer from donation
                if core.profile_hook is not None:
                    with core.profile_hook(f"fnx.compile({self.__name__})"):
                        outs = self._run(entry, leaves)
                elif entry.donate and (entry.donation or self._donation(entry)):
                    with entry.closed.lock:
                        outs = entry.donation(leaves)
                else:   # the common case, inline (what `_run` does)
                    exe = entry.exe or entry.executable()
                    with entry.closed.lock:
                        outs = exe(*leaves)
                if state is not None:
                    outs = self._write_back(entry, slots, outs)
                return outs[0] if entry.single else tree_unflatten(entry.out_tree, outs)
            if entry.donate and (entry.donation or self._donation(entry)):
                entry.donation.refuse_recorded(leaves)
        if not leaves:  # nothing to differentiate, batch or stage: the outputs are constants
            with entry.closed.lock:
                outs = run_eagerly(entry.executable())
        elif not core.state.transforms_active:   # recorded on the eager tape: keep the residuals
            needs = tuple(a.dtype.is_floating_point and a.requires_grad for a in leaves)
            outs = compiled_call_saving_p.bind(*leaves, jaxpr=entry.closed, backend=entry.backend, saved=_Saved(),
                                               needs=needs)
        else:
            outs = compiled_call_p.bind(*leaves, jaxpr=entry.closed, backend=entry.backend)
        if state is not None:
            outs = self._write_back(entry, slots, outs)
        return outs[0] if entry.single else tree_unflatten(entry.out_tree, outs)

    def _run(self, entry, leaves: list) -> list:
        """The executable of `entry` on `leaves`, outside any transform (donating them where it donates)."""
        if entry.donate and (entry.donation or self._donation(entry)):
            with entry.closed.lock:
                return entry.donation(leaves)
        exe = entry.exe or entry.executable()
        with entry.closed.lock:
            return exe(*leaves)

    def _graph_break(self, key: tuple, error: ConcretizationError):
        """After a trace stopped on a value that only real data has: this signature runs eagerly from now on, as
        torch.compile runs the code around a graph break, with one warning that says where and what to do."""
        user, op = None, None   # the innermost frames outside fnx, and outside its tensors and transforms
        tb = error.__traceback__
        while tb is not None:
            file = tb.tb_frame.f_code.co_filename
            if not file.startswith(FNX_DIR):
                user = tb
            elif not file.startswith(_MACHINERY):
                op = tb
            tb = tb.tb_next
        tb = user or op
        where = "" if tb is None else f" at {tb.tb_frame.f_code.co_filename}:{tb.tb_lineno} " \
                                      f"({tb.tb_frame.f_code.co_name})"
        _log.info("running %s eagerly for %s: %s", self.__name__, self._describe(key), error)
        warn(f"fnx.compile({self.__qualname__}): tracing stopped{where}: {error}\nfnx.compile runs "
             f"{self.__qualname__} eagerly for this input signature instead (torch.compile's graph break), "
             f"without this warning again. fullgraph=True raises the error instead.")
        self._cache[key] = _EAGER
        return _EAGER

    def _write_back(self, entry: _Entry, slots: list, outs: list) -> list:
        """Copy the buffer updates (the trailing outputs) into the module arguments' buffers; the function's own
        outputs."""
        n = entry.out_tree.num_leaves
        entry.state.write_back(self.__qualname__, slots, outs[n:])
        return outs[:n]

    def _converted_signature(self, args: tuple, kwargs: dict) -> tuple[tuple, dict, tuple, list]:
        """(args, kwargs, cache key, tensor leaves), numpy arrays among the arguments converted to tensors first.

        The arguments are rebuilt only when they hold a numpy array: rebuilding a module argument copies it."""
        key, leaves = self._signature(args, kwargs)
        if key is None:
            args, kwargs = _numpy_to_tensors(args, kwargs)
            key, leaves = self._signature(args, kwargs)
        return args, kwargs, key, leaves

    def _signature(self, args: tuple, kwargs: dict) -> tuple[tuple | None, list]:
        """The cache key (one descriptor per argument) and the tensor leaves, in the jaxpr's input order; the key
        is None when an argument holds a numpy array (`_converted_signature` converts them)."""
        static = self._static_nums
        if self._negative_static:
            static = frozenset(i % len(args) for i in static if -len(args) <= i < len(args))
        parts, leaves = [], []
        for i, a in enumerate(args):
            if type(a) is Tensor and i not in static:
                v = a._value
                parts.append((v.shape, v.dtype, a._device))
                leaves.append(a)
            else:
                parts.append(self._describe_arg(a, i in static, i, leaves))
        if kwargs:
            parts.append(_KWARGS)
            for name in sorted(kwargs):
                parts.append(name)
                parts.append(self._describe_arg(kwargs[name], name in self._static_names, name, leaves))
        if None in parts:
            return None, leaves
        return tuple(parts), leaves

    def _describe_arg(self, a, static: bool, which: int | str, leaves: list) -> tuple | None:
        """The descriptor of argument `which` (a position or a keyword), its tensor leaves appended to `leaves`;
        None when it holds a numpy array."""
        if static:
            return _static_desc(a, self._label(which))
        if isinstance(a, Tensor):
            leaves.append(a)
            return _tensor_desc(a)
        flat, treedef = tree_flatten(a)
        descs = []
        for x in flat:
            if isinstance(x, Tensor):
                leaves.append(x)
                if isinstance(x, Tracer):
                    descs.append(_tensor_desc(x))
                else:   # _tensor_desc, inline: a module argument has a leaf per parameter
                    v = x._value
                    descs.append((v.shape, v.dtype, x._device))
            elif isinstance(x, np.ndarray):
                return None
            else:
                label = self._label(which)
                try:
                    descs.append(_static_desc(x, label))
                except FnxTypeError:
                    raise FnxTypeError(f"compile: {label} holds a {type(x).__name__}, which is neither a Tensor nor "
                                       f"a hashable Python value; convert arrays with fnx.tensor(...), or mark the "
                                       f"argument static") from None
        return _TREE, treedef, tuple(descs)

    def _label(self, which: int | str) -> str:
        """How messages name argument `which`: a position or a keyword."""
        if isinstance(which, str):
            return f"keyword argument {which!r}"
        return f"argument {which} ({self._params[which]})" if which < len(self._params) else f"argument {which}"

    def _describe(self, key: tuple) -> str:
        pos, kw = _split_key(key)
        parts = [f"{self._params[i]}: " if i < len(self._params) else "" for i in range(len(pos))]
        shown = [p + _format_desc(d) for p, d in zip(parts, pos)]
        shown += [f"{k}={_format_desc(d)}" for k, d in kw.items()]
        return f"({', '.join(shown)})"

    def _differences(self, old: tuple, new: tuple) -> list[tuple[str, list[str]]]:
        """Which arguments changed between two signatures: (what, [how it changed, ...]) per argument."""
        (op, ok), (np_, nk) = _split_key(old), _split_key(new)
        diffs = []
        if len(op) != len(np_):
            diffs.append(("the number of positional arguments", [f"number of positional arguments {len(op)} -> "
                                                                 f"{len(np_)}"]))
        if sorted(ok) != sorted(nk):
            diffs.append(("the keyword arguments", [f"keyword arguments {sorted(ok)} -> {sorted(nk)}"]))
        labelled = [(self._label(i), a, b) for i, (a, b) in enumerate(zip(op, np_))]
        labelled += [(f"keyword argument {k!r}", ok[k], nk[k]) for k in sorted(set(ok) & set(nk))]
        for label, a, b in labelled:
            reasons = _explain_arg(label, a, b)
            if reasons:
                diffs.append((label, reasons))
        old_amp, new_amp = _autocast_of(old), _autocast_of(new)
        if old_amp != new_amp:
            diffs.append(("the autocast settings", [f"autocast {old_amp} -> {new_amp}"]))
        return diffs

    def _recompiled(self, old: tuple, new: tuple) -> str:
        """Count a recompilation, warn (once) at the RECOMPILE_WARN-th, and return its reason."""
        diffs = self._differences(old, new)
        self._recompiles += 1
        for what, reasons in diffs:
            self._changes[what] = (self._changes.get(what, (0, ""))[0] + 1, reasons[-1])
        if self._recompiles == RECOMPILE_WARN and self._changes:
            what, (_, how) = max(self._changes.items(), key=lambda item: item[1][0])
            warn(f"fnx.compile: {self.__qualname__} has recompiled {self._recompiles} times; {what} keeps "
                 f"changing (last: {how}). {_advice(how)} FNX_LOG=compile logs each recompilation and its reason.")
        reasons = [r for _, rs in diffs for r in rs]
        return "; ".join(reasons) or "the previous trace was not cached (it captured values of an enclosing transform)"

    # ------------------------------------------------------------------ tracing
    def _trace(self, key: tuple, args: tuple, kwargs: dict, leaves: list) -> _Entry:
        reason = None if self._last is None else self._recompiled(self._last[0], key)
        if _log.isEnabledFor(logging.INFO):
            if self._last is None:
                _log.info("tracing %s for %s", self.__name__, self._describe(key))
            else:
                _log.info("recompiling %s for %s: %s", self.__name__, self._describe(key), reason)
        start = time.perf_counter()
        out_trees, keys, updated = [], [], []
        slots = buffer_slots_hook(self._dynamic(args, kwargs)) if buffer_slots_hook is not None else []
        int_inputs = [k for k, (store, name) in enumerate(slots) if not store[name].dtype.is_floating_point]
        n = len(leaves)

        def flat_fun(*flat):
            a, kw = self._substitute(args, kwargs, iter(flat[:n]))
            changed = _trace_buffers(self.__qualname__, buffer_slots_hook(self._dynamic(a, kw)) if slots else [],
                                     int_inputs, flat[n:])
            with staged_keys() as source:
                keys.append(source)
                if self._module:
                    out_leaves, out_tree = tree_flatten(a[0](*a[1:], **kw))
                else:
                    out_leaves, out_tree = tree_flatten(self._fun(*a, **kw))
            for o in out_leaves:
                if not isinstance(o, Tensor):
                    raise FnxTypeError(f"compile: {self.__qualname__} must return pytrees of Tensors, got a "
                                       f"{type(o).__name__}; wrap numbers with fnx.tensor(...)")
            updated.extend(changed())
            if self._module:
                _check_state_kept(self.__qualname__, a[0], flat[:n])
            out_trees.append(out_tree)
            return out_leaves + [v for _, v in updated]

        in_avals = [x.aval for x in leaves] + [slots[k][0][slots[k][1]].aval for k in int_inputs]
        with tracing("compile"):
            traced = trace_to_jaxpr(flat_fun, in_avals, frozen_inputs=f"fnx.compile({self.__name__})")
        traced, int_inputs = _drop_unread_inputs(traced, n, int_inputs)
        state = _State(len(slots), tuple(int_inputs), tuple(k for k, _ in updated)) if int_inputs or updated else None
        closed, key_devices, lifted = _lift_consts(traced, keys[0].placeholders)
        if debug.LEVEL >= 3:   # FNX_DEBUG=3: the IR as traced (fnx/lowering/passes.py logs it after each pass)
            debug.log_ir(f"IR of {self.__name__} as traced", closed)
        backend = self._backend or default_backend([v.aval.device for v in closed.jaxpr.invars])
        cacheable = not any(isinstance(c, Tracer) for c in lifted)
        entry = _Entry(CallJaxpr(optimize(closed)), backend, key_devices, lifted, out_trees[0], cacheable, state)
        if self.donate_argnums and backend != "interpret":
            first = len(key_devices) + len(lifted)
            entry.donate = donated_leaves(args, self.donate_argnums, first, self._label)
            if state is not None:   # a buffer written back after the call must stay valid: it is not donated
                kept = {id(slots[k][0][slots[k][1]]) for k in state.outputs}
                entry.donate = [(i, label) for i, label in entry.donate if id(leaves[i - first]) not in kept]
        if cacheable:
            self._cache[key] = entry
        if _log.isEnabledFor(logging.INFO):
            note = "" if cacheable else "; not cached: it captures values of an enclosing transform"
            _log.info("traced %s: %d equations after optimisation, backend %r, %.1f ms%s", self.__name__,
                      len(entry.closed.eqns), backend, 1e3 * (time.perf_counter() - start), note)
        return entry

    def _donation(self, entry: _Entry) -> Donation | None:
        """Build `entry`'s Donation; None (and no more donation) when its executable is the interpreter."""
        exe = entry.executable()
        if not hasattr(exe, "donating"):   # code generation was unavailable: the interpreter reuses no buffers
            entry.donate = []
            return None
        entry.donation = Donation(exe, entry.donate, self.__name__, self.donate_argnums)
        return entry.donation

    def _static_positions(self, args) -> set:
        return {i % len(args) for i in self._static_nums if -len(args) <= i < len(args)}

    def _dynamic(self, args, kwargs: dict) -> list:
        """The arguments that are not static, in signature order: those whose module buffers are state."""
        static = self._static_positions(args)
        return [a for i, a in enumerate(args) if i not in static] + \
            [kwargs[k] for k in sorted(kwargs) if k not in self._static_names]

    def _substitute(self, args: tuple, kwargs: dict, flat) -> tuple[list, dict]:
        """`args` and `kwargs` with their tensor leaves replaced, in signature order, by those of `flat`."""
        static = self._static_positions(args)

        def swap(a, is_static: bool):
            if is_static:
                return a
            if isinstance(a, Tensor):
                return next(flat)
            leaves, treedef = tree_flatten(a)
            return tree_unflatten(treedef, [next(flat) if isinstance(x, Tensor) else x for x in leaves])

        new_args = [swap(a, i in static) for i, a in enumerate(args)]
        new_kwargs = {k: swap(kwargs[k], k in self._static_names) for k in sorted(kwargs)}
        return new_args, new_kwargs

    # ------------------------------------------------------------------ inspection
    def lower(self, *args, **kwargs) -> Lowered:
        """The compiled function for these arguments' signature (traced now unless cached), for inspection."""
        if self._module:
            args = (self._fun, *args)
        args, kwargs, key, leaves = self._converted_signature(args, kwargs)
        amp = autocast_key()
        if amp is not None:
            key = (*key, _AUTOCAST, amp)
        entry = self._cache.get(key)
        if entry is None or entry is _EAGER:   # a signature that runs eagerly: its trace raises what stopped it
            entry = self._trace(key, args, kwargs, leaves)
        self._last = (key, entry)
        return Lowered(entry)

    def _latest(self) -> _Entry:
        if self._last is None:
            raise FnxRuntimeError(f"compile: {self.__qualname__} has not been called yet; call it, or inspect a "
                                  f"signature with .lower(*args)")
        return self._last[1]

    def kernels(self) -> list:
        """The generated kernels of the most recently used signature."""
        return self._latest().executable().kernels()

    def source(self) -> str:
        """The generated kernel source of the most recently used signature."""
        return self._latest().executable().source()

    def clear_cache(self) -> None:
        self._cache.clear()
        self._last = None
        self._recompiles = 0
        self._changes = {}


def _advice(change: str) -> str:
    """What to do about an argument that keeps changing, from how it changed (`_explain_leaf`'s wording)."""
    if ": value " in change:
        return ("Pass it as a 0-dim tensor (fnx.tensor(value)): a tensor's value is an input of the compiled code, "
                "while a Python value is part of its signature, so each new one traces and compiles again. If it "
                "takes only a few values, mark it static (static_argnums/static_argnames) and expect one "
                "compilation each.")
    if ": shape " in change:
        return "Each new shape compiles again: keep its shape fixed (pad, or bucket it to a few sizes)."
    return "Each new signature (structure, dtype, device, keywords) compiles again: keep it fixed between calls."


def _check_state_kept(name: str, module, inputs: tuple) -> None:
    """`fnx.compile(module)` passes the module's tensors as inputs and runs its forward on a copy: buffer updates
    are written back (`_trace_buffers`), but a forward that replaces a parameter or registers a new tensor would
    change only the copy."""
    now = tree_leaves(module)
    if len(now) > len(inputs) or any(x is not y for x, y in zip(now, inputs)):
        raise NotImplementedError(
            f"fnx.compile({name}): the module's forward replaces one of its parameters or registers a new tensor; "
            f"a compiled call writes back only updates of existing buffers. Set parameters up before the call, "
            f"or compile a function that takes the module as an argument and returns the new values")


def _drop_unread_inputs(closed: ClosedJaxpr, first: int, int_inputs: list) -> tuple[ClosedJaxpr, list]:
    """The jaxpr without the integer-buffer inputs (from position `first` on) that it does not read, and the slot
    indices of those it keeps: a call then reads only the buffers the function uses."""
    j = closed.jaxpr
    used = {id(a) for e in j.eqns for a in e.inputs}.union(id(v) for v in j.outvars)
    kept = [(v, k) for v, k in zip(j.invars[first:], int_inputs) if id(v) in used]
    if len(kept) == len(int_inputs):
        return closed, int_inputs
    jaxpr = Jaxpr(j.constvars, j.invars[:first] + [v for v, _ in kept], j.eqns, j.outvars)
    return ClosedJaxpr(jaxpr, closed.consts), [k for _, k in kept]


def _requires_grad(tensors) -> bool:
    for t in tensors:
        if t._requires_grad:
            return True
    return False


def _positional_names(fun) -> list[str]:
    """Names of `fun`'s positional parameters (for messages and static_argnames), [] when unknown."""
    try:
        sig = inspect.signature(fun)
    except (TypeError, ValueError):
        return []
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [p.name for p in sig.parameters.values() if p.kind in kinds]


def _lift_consts(closed: ClosedJaxpr, keys: dict) -> tuple[ClosedJaxpr, tuple, list]:
    """Turn the random-key placeholders `keys` ({device: tensor}), then captured tensors that require grad
    and tracers of enclosing transforms, into leading inputs: (jaxpr, key devices, lifted tensors).

    All must be inputs of the compiled call (not constants inside it): each call passes fresh keys, and
    the enclosing autograd or transform must see the lifted tensors.
    """
    j = closed.jaxpr
    device_of_key = {id(k): d for d, k in keys.items()}
    key_pairs, lifted, kept = [], [], []
    for v, c in zip(j.constvars, closed.consts):
        if id(c) in device_of_key:
            key_pairs.append((v, device_of_key[id(c)]))
        elif isinstance(c, Tracer) or c.requires_grad:
            lifted.append((v, c))
        else:
            kept.append((v, c))
    if not key_pairs and not lifted:
        return closed, (), []
    jaxpr = Jaxpr([v for v, _ in kept], [v for v, _ in key_pairs + lifted] + list(j.invars), j.eqns, j.outvars)
    return ClosedJaxpr(jaxpr, [c for _, c in kept]), tuple(d for _, d in key_pairs), [c for _, c in lifted]


# torch.compile's modes: each compiles the same way in fnx (they tune Inductor and CUDA graphs, which fnx has not).
TORCH_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def compile(fun=None, static_argnums=(), static_argnames=(), donate_argnums=(), backend: str | None = None, *,
            fullgraph: bool = False, dynamic: bool | None = None, mode: str | None = None,
            options: dict | None = None, disable: bool = False):
    """Compile `fun`: trace it once per input signature into the IR, optimise, generate kernels, run them.

    `static_argnums` / `static_argnames`: arguments passed to `fun` as Python values (part of the cache
    key, so they must be hashable); `donate_argnums`: positional arguments whose tensors' buffers the
    compiled code may reuse for its outputs (like JAX's; a donated tensor whose buffer was reused is
    invalid afterwards, any use raises; see the module docstring); `backend`: "interpret", "c", "cuda" or
    "opencl" (CPU tensors, kernels on an OpenCL device through pyopencl; default: "cuda" for CUDA inputs,
    else "c"; `FNX_BACKEND` overrides; "interpret" ignores donation; torch's "inductor" is the default).
    Usable as a decorator, with or without arguments.

    A function that needs a traced tensor's value in Python (`if x.sum() > 0`, `x.tolist()`, `x.item()`) cannot
    be traced: unless `fullgraph=True` (which raises the error), that input signature then runs eagerly, with one
    warning naming the line, as torch.compile runs the code around a graph break. torch.compile's other keywords
    are accepted: `mode` (any of its modes compiles the same way), `dynamic` and `options` (fnx always
    specialises on shapes: a new shape traces again), `disable=True` (returns `fun` itself).

    >>> import fnx
    >>> @fnx.compile
    ... def f(x):
    ...     return fnx.tanh(x * 2.0).sum()
    >>> f(fnx.zeros(3))   # the first call for a signature traces, optimises and compiles; later calls just run
    tensor(0.)
    >>> print(f.lower(fnx.zeros(3)).as_text())   # the optimised IR
    { lambda ; a:f32[3]. let
        b:f32[3] = mul a 2.0:f32[]
        c:f32[3] = tanh b
        d:f32[] = sum[axes=(0,), keepdims=False] c
      in (d,) }
    >>> len(f.kernels())   # mul, tanh and sum fused into one generated kernel
    1
    """
    if mode not in TORCH_MODES:
        raise FnxValueError(f"fnx.compile: unknown mode {mode!r}; expected one of "
                            f"{', '.join(repr(m) for m in TORCH_MODES)}")
    if options is not None and not isinstance(options, dict):
        raise FnxTypeError(f"fnx.compile: options must be a dict, got a {type(options).__name__}")
    if dynamic not in (None, True, False):
        raise FnxTypeError(f"fnx.compile: dynamic must be None, True or False, got {dynamic!r}")
    if backend == "inductor":
        backend = None

    def make(f):
        if disable:
            return f
        return Compiled(f, static_argnums, static_argnames, donate_argnums, backend, fullgraph)

    return make if fun is None else make(fun)


jit = compile
