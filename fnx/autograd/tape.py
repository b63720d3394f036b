"""The eager autograd tape: one `Node` per recorded op, holding what its vjp rule needs.

`record` is called by `core.bind` when grad mode is on and an input
requires grad. A node keeps its primitive, params, the input tensors, the
nodes that produced them (captured now, so later in-place ops cannot rewire
the graph) and version counters that detect in-place changes to saved values.

A node keeps only the values its vjp reads (the primitive's `saves_inputs` and `saves_output`): in place of
the others it keeps a stand-in (`stand_in`), a shared read-only tensor of the value's shape, dtype and device
whose elements are NaN, so that the forward's intermediates are freed as soon as nothing else uses them, as
PyTorch's saved variables are, and a rule that read a value it did not declare would show in its gradient
(tests/test_autograd_stand_ins.py runs every op of the table that way). An input that is a leaf requiring grad is
kept as it is: the node holds it anyway, as the parent its gradient flows to.
The backward walk releases each node's saved values once its vjp has run (`release`).
"""
from __future__ import annotations

import contextvars
import sys
import traceback
import weakref

import numpy as np

from .. import core
from .._graph import next_seq as _next_seq
from .._warn import FNX_DIR as _FNX_DIR
from ..core import FnxRuntimeError, FnxTypeError
from ..device import cpu, device_of_array
from ..dtypes import INEXACT_NP as _INEXACT_NP
from ..sparse import SparseTensor as _Sparse
from ..tensor import Tensor, make

__all__ = ["Node", "record", "register_hook", "retain_grad", "RemovableHandle", "stand_in"]

_state = core.state  # the calling thread's grad mode
_anomaly_enabled = core.anomaly_enabled


def forward_stack() -> list:
    """The Python stack up to the user's call into fnx (fnx's own frames at its end are left out)."""
    frames = traceback.extract_stack()
    while frames and frames[-1].filename.startswith(_FNX_DIR):
        frames.pop()
    return traceback.format_list(frames)


def stand_in(value, device) -> Tensor:
    """A read-only tensor of `value`'s shape and dtype on `device`, NaN (or 0 for integers) everywhere, over one
    element: what a node keeps of a value its vjp does not read.

    One tensor per (shape, dtype, device) serves every node, found when the node is recorded: making one costs
    about 2 us, more than the rest of a small node's backward, and a model asks for the same few shapes again
    and again.
    """
    shape, dtype = value.shape, value.dtype
    table = _CPU_STAND_INS.get(dtype) if device is cpu else None
    if table is not None:
        key = shape
    else:
        table, key = _STAND_INS, (shape, dtype, device)
    out = table.get(key)
    if out is None:
        xp = device._xp
        one = xp.full(1, _fill(dtype), dtype=dtype)
        if device is cpu:
            one.flags.writeable = False
            array = np.ndarray(shape, dtype, one, 0, (0,) * len(shape))   # np.broadcast_to: 13 us
        else:
            array = xp.broadcast_to(one.reshape(()), shape)
        out = make(array, device)
        if len(table) >= _MAX_STAND_INS:
            table.clear()
        table[key] = out
    return out


def _fill(dtype) -> float:
    return float("nan") if dtype in _INEXACT_NP else 0


# The stand-ins of float and complex CPU values, by dtype, then by shape: `record` finds a node's table once, from
# its output's dtype, and each value's stand-in with one lookup by shape (hashing a numpy dtype costs about as much
# as a lookup). It holds exactly the float and complex dtypes, so that one lookup also tells whether an output can
# have a node.
_CPU_STAND_INS: dict = {dt: {} for dt in _INEXACT_NP}
_STAND_INS: dict = {}   # the others (integer and bool values, other devices): (shape, dtype, device) -> stand-in
_MAX_STAND_INS = 4096   # per table


def _stand_in_of(a, table, dtype) -> Tensor:
    """The stand-in of tensor `a`: from `table` (None, or the CPU stand-ins of `dtype` when `a` is on the CPU)
    when `a` is of `dtype`."""
    v = a._value
    if table is not None and v.dtype is dtype:
        s = table.get(v.shape)
        if s is not None:
            return s
    return stand_in(v, a._device)


class Node:
    """A recorded application of a primitive: the tensor's `grad_fn`. Made by `record`, which sets the slots one
    by one (a class call that runs a Python `__init__` costs a fifth of recording an op)."""

    __slots__ = ("prim", "params", "inputs", "parents", "versions", "out_value", "out_version", "hooks", "stack",
                 "packed", "seq", "__weakref__")

    @property
    def name(self) -> str:
        return f"{self.prim.name.capitalize()}Backward"

    def __repr__(self) -> str:
        return f"<{self.name}>"

    @property
    def next_functions(self):
        return tuple((p if isinstance(p, Node) else None, 0) for p in self.parents)

    def release(self) -> None:
        """Free the values the vjp read, once it has run. A node that saves none keeps its stand-ins, which free
        nothing, so a second backward through it works, as in PyTorch (`b = a + 1`, then two `b.sum().backward()`)."""
        prim = self.prim
        if prim.saves_inputs or prim.saves_output:
            self.inputs = self.out_value = self.packed = None

    def vjp(self, cot):
        """The cotangents of the inputs given `cot`, the output's; first checks that the saved values are intact."""
        if self.packed is not None:
            return self._packed_vjp(cot)
        inputs, prim = self.inputs, self.prim
        if inputs is None:
            raise FnxRuntimeError(
                f"Trying to backward through the graph a second time (through {self.name}): its saved tensors "
                f"were freed by the first backward. Specify retain_graph=True in the first .backward() or "
                f"autograd.grad() call if you need to backward twice.")
        if prim.saves_inputs:
            versions = self.versions
            if len(inputs) == 2:   # the binary family, written out (this runs for every node of a backward)
                if inputs[0]._version[0] != versions[0] or inputs[1]._version[0] != versions[1]:
                    self._check_versions(inputs, versions)
            else:
                self._check_versions(inputs, versions)
        value = self.out_value
        if type(value) is Tensor:
            out = value   # a stand-in: the rule reads its shape and dtype only (no node: it is shared)
        elif value is None:
            out = None   # the rule reads nothing of it (prim.vjp_ignores_out)
        else:
            ver, at = self.out_version
            if ver[0] != at:
                raise FnxRuntimeError(
                    f"one of the variables needed for gradient computation has been modified by an inplace "
                    f"operation: the output of {self.name} is at version {ver[0]}; expected version {at} instead. "
                    f"Use an out-of-place op (x = x.op(...)) or .clone() the tensor before modifying it.")
            out = make(value, cpu if type(value) is np.ndarray else device_of_array(value))
            out._node, out._requires_grad = self, True
        return self._rule(cot, inputs, out)

    def _check_versions(self, inputs, versions) -> None:
        """Raise if a saved input was written in place since the node was recorded."""
        for i, (a, v) in enumerate(zip(inputs, versions)):
            if a._version[0] != v:
                raise _modified_error(self.name, i, a, v)

    def _packed_vjp(self, cot):
        """vjp of a node recorded under saved_tensors_hooks: the saved values come back through unpack_hook."""
        packed_inputs, packed_out = self.packed
        inputs = self.inputs if packed_inputs is None else tuple([unpack_saved(e) for e in packed_inputs])
        out = self.out_value if packed_out is None else unpack_saved(packed_out)
        return self._rule(cot, inputs, out)

    def _rule(self, cot, inputs, out):
        prim, params = self.prim, self.params
        if prim.vjp_takes_needs:
            parents = self.parents
            if len(parents) == 2:   # the binary family: no list to build
                needs = (parents[0] is not None, parents[1] is not None)
            else:
                needs = tuple([p is not None for p in parents])
            if params:
                return prim.vjp(cot, inputs, out, needs=needs, **params)
            return prim.vjp(cot, inputs, out, needs=needs)
        if params:
            return prim.vjp(cot, inputs, out, **params)
        return prim.vjp(cot, inputs, out)


def _modified_error(name: str, i: int, a, v: int) -> FnxRuntimeError:
    return FnxRuntimeError(
        f"one of the variables needed for gradient computation has been modified by an inplace operation: "
        f"input {i} of {name} ({a.dtype.name}{list(a.shape)}) is at version {a._version[0]}; expected version "
        f"{v} instead. Use an out-of-place op (x = x.op(...)) or .clone() the tensor before modifying it.")


def parent_of(a):
    """What gradient flows to from tensor `a`: its node, itself (a leaf that requires grad), or None."""
    if a._node is not None:
        return a._node
    return a if a._requires_grad else None


def record(prim, args, params, out):
    """`core.record_hook`: put `out`'s node on the tape (an op on inputs of which one requires grad).

    An op of one or two CPU tensors, the common case, goes to `record_cpu`; this is the general form (other
    devices, views, more inputs, anomaly mode, saved-tensor hooks). An input that is a leaf requiring grad is its
    own parent, which the node holds anyway, so it is kept as it is rather than replaced by a stand-in.
    """
    if len(args) <= 2 and out._device is cpu and not core._get_flags() & core._RECORD_EXTRAS:
        return record_cpu(prim, args, params, out)
    value = out._value
    dtype = value.dtype
    table = _CPU_STAND_INS.get(dtype)
    if table is None or not prim.differentiable:   # not a float or complex output: no gradient flows through it
        return out
    if out._device is not cpu:
        table = None
    node = _new_node(Node)
    node.seq = _next_seq()
    parents = node.parents = tuple([parent_of(a) for a in args])
    if prim.saves_inputs:
        node.inputs = args
        node.versions = tuple([a._version[0] for a in args])
    else:   # bind ran it on one device: the output's, unless the op moved data
        node.inputs = tuple([a if p is a else _stand_in_of(a, table if a._device is cpu else None, dtype)
                             for a, p in zip(args, parents)])
        node.versions = None
    node.prim = prim
    node.params = params
    node.hooks = None
    node.packed = None
    node.stack = forward_stack() if _anomaly_enabled() else None
    hooks = _saved_hooks.get()
    if hooks is not None and (prim.saves_inputs or prim.saves_output):
        _pack_node(node, prim, args, out, hooks)
    else:
        _keep_output(node, prim, out, value, table)
    out._node = node
    out._requires_grad = True
    if prim.view:   # an in-place write through another view of the base refreshes this one's node
        _note_view(out._base, out)
    return out


_F32 = np.dtype(np.float32)
_F32_STAND_INS = _CPU_STAND_INS[_F32]   # found without hashing a dtype, which costs as much as the lookup


def record_cpu(prim, args, params, out):
    """`core.record_cpu_hook`, and `record` of an op of one or two CPU tensors: the node of `out` in grad mode,
    without anomaly mode or saved-tensor hooks (the caller has checked).

    This runs for nearly every recorded op, so it is written out: one lookup of the output's dtype finds the
    stand-ins of its dtype (and tells an integer output, which has no node), and a value's stand-in costs one
    lookup by shape.
    """
    value = out._value
    dtype = value.dtype
    table = _F32_STAND_INS if dtype is _F32 else _CPU_STAND_INS.get(dtype)
    if table is None or not prim.differentiable:   # not a float or complex output: no gradient flows through it
        return out
    node = _new_node(Node)
    node.seq = _next_seq()
    if len(args) == 2:
        x, y = args
        px = x._node if x._node is not None else (x if x._requires_grad else None)
        py = y._node if y._node is not None else (y if y._requires_grad else None)
        node.parents = (px, py)
        if prim.saves_inputs:
            node.inputs = args
            node.versions = (x._version[0], y._version[0])
        else:
            node.inputs = (x if px is x else _stand_in_of(x, table, dtype),
                           y if py is y else _stand_in_of(y, table, dtype))
            node.versions = None
    else:
        x = args[0]
        px = x._node if x._node is not None else x   # its one input requires grad
        node.parents = (px,)
        if prim.saves_inputs:
            node.inputs = args
            node.versions = (x._version[0],)
        else:
            node.inputs = (x if px is x else _stand_in_of(x, table, dtype),)
            node.versions = None
    node.prim = prim
    node.params = params
    node.hooks = None
    node.packed = None
    node.stack = None
    _keep_output(node, prim, out, value, table)
    out._node = node
    out._requires_grad = True
    if prim.view:   # as in `record`
        _note_view(out._base, out)
    return out


def _keep_output(node, prim, out, value, table) -> None:
    """Set what `node` keeps of its output `out` (array `value`): the array and its version where the vjp reads it,
    nothing where the rule never looks at it, else its stand-in (`table`: the CPU stand-ins of its dtype, or
    None)."""
    if prim.saves_output:
        ver = out._version
        node.out_value = value
        node.out_version = (ver, ver[0])
        return
    node.out_version = None
    if prim.vjp_ignores_out:
        node.out_value = None
        return
    stand = table.get(value.shape) if table is not None else None
    node.out_value = stand if stand is not None else stand_in(value, out._device)


def _pack_node(node, prim, args, out, hooks) -> None:
    """What `record` keeps of `node`'s saved values under saved_tensors_hooks: pack_hook's results in
    `node.packed`, stand-ins in their place."""
    packed_inputs = None
    if prim.saves_inputs:
        packed_inputs = tuple([pack_saved(a, hooks) for a in args])
        node.inputs = tuple([a if p is a else stand_in(a._value, a._device) for a, p in zip(args, node.parents)])
        node.versions = None
    node.out_value = stand_in(out._value, out._device)
    node.out_version = None
    node.packed = (packed_inputs, pack_saved(out, hooks, node) if prim.saves_output else None)


# ---------------------------------------------------------------- saved_tensors_hooks (fnx.autograd.graph)
# The innermost (pack_hook, unpack_hook) pair of the calling thread, or None; and the message that refuses new
# pairs inside disable_saved_tensors_hooks.
_saved_hooks = core.saved_hooks
_hooks_disabled = contextvars.ContextVar("fnx_saved_tensors_hooks_disabled", default=None)


def saved_hooks():
    """The calling thread's active (pack_hook, unpack_hook) pair, or None."""
    return _saved_hooks.get()


def pack_saved(t, hooks, node=None) -> tuple:
    """A tensor that a backward rule reads, as pack_hook keeps it: (packed, where it sits in the graph, unpack).

    The hook runs with grad mode off and the hooks themselves off (a pack_hook that calls ops on the tensor does
    not pack their inputs in turn). `node`: the tensor is that node's output (recorded right now).
    """
    pack, unpack = hooks
    token = _saved_hooks.set(None)
    prev = core.set_grad_enabled_flag(False)
    try:
        packed = pack(t)
    finally:
        core.set_grad_enabled_flag(prev)
        _saved_hooks.reset(token)
    if node is not None:
        place = node
    elif t._node is not None:
        place = t._node
    else:
        place = t if t._requires_grad else None   # a leaf is held by its node anyway, as its parent
    return packed, place, unpack


def unpack_saved(entry):
    """The tensor unpack_hook gives back for a `pack_saved` entry, put back in its place in the graph (so that
    create_graph differentiates through it): a leaf is itself, whose value the hooks must keep."""
    packed, place, unpack = entry
    token = _saved_hooks.set(None)
    try:
        got = unpack(packed)
    finally:
        _saved_hooks.reset(token)
    if not isinstance(got, Tensor):
        raise FnxTypeError(f"Output of saved tensor unpack_hook expected to be a Tensor but got result of type "
                           f"{type(got).__name__}")
    if isinstance(place, Tensor):
        return place
    out = make(got._value, got._device)
    if place is not None:
        out._node, out._requires_grad = place, True
    return out


_new_node = object.__new__   # `record` sets a Node's slots one by one: a class call with an `__init__` costs more


def _note_view(base, view) -> None:
    """Add `view` to the weak list of `base`'s views, dropping the dead ones as it grows.

    A weight's views die with each step's graph (`W.mT` in every linear), so without the pruning its list would
    grow by one per step for the whole training run. It is pruned when its length reaches a power of two and at
    least half of it is dead, which keeps the cost per view constant however many stay alive.
    """
    views = getattr(base, "_views", None)
    if views is None:
        views = base._views = []
    views.append(weakref.ref(view))
    n = len(views)
    if n >= 16 and not n & (n - 1):
        alive = [ref for ref in views if ref() is not None]
        if len(alive) <= n // 2:
            base._views = alive


core.record_hook = record
core.record_cpu_hook = record_cpu


class RemovableHandle:
    """Returned by `register_hook`; `.remove()` unregisters the hook."""

    def __init__(self, hooks: list, hook):
        self._hooks, self._hook = hooks, hook

    def remove(self) -> None:
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)


def register_hook(t, hook) -> RemovableHandle:
    """Call `hook(grad)` once per backward with the whole gradient of `t`; a non-None return replaces it
    (for a leaf: what is accumulated into `.grad`). As in PyTorch, a `retain_grad` hook always runs last."""
    if not t._requires_grad:
        raise FnxRuntimeError("register_hook: cannot register a hook on a tensor that doesn't require gradient")
    if t._node is None:
        hooks = getattr(t, "_hooks", None)
        if hooks is None:
            hooks = t._hooks = []
    else:
        hooks = t._node.hooks
        if hooks is None:
            hooks = t._node.hooks = []
    if hooks and hooks[-1] is getattr(t, "_retains_grad", None):
        hooks.insert(len(hooks) - 1, hook)
    else:
        hooks.append(hook)
    return RemovableHandle(hooks, hook)


_post_accumulate: dict = {}   # id(leaf) -> its post-accumulate-grad hooks (dropped when the leaf dies)


def register_post_accumulate_grad_hook(t, hook) -> RemovableHandle:
    """Call `hook(t)` each time a gradient has been accumulated into leaf `t`'s `.grad` (PyTorch's hook for
    running an optimizer step per parameter during backward)."""
    if not t._requires_grad:
        raise FnxRuntimeError("register_post_accumulate_grad_hook: cannot register a hook on a tensor that doesn't "
                              "require gradient")
    if t._node is not None:
        raise FnxRuntimeError("register_post_accumulate_grad_hook: post accumulate grad hooks cannot be registered "
                              "on non-leaf tensors")
    key = id(t)
    hooks = _post_accumulate.get(key)
    if hooks is None:
        hooks = _post_accumulate[key] = []
        weakref.finalize(t, _post_accumulate.pop, key, None)
    hooks.append(hook)
    return RemovableHandle(hooks, hook)


def accumulate_grad(t, g, sole: bool = False) -> None:
    """Add gradient `g` into `t.grad`, as PyTorch's AccumulateGrad does.

    The first gradient is stored as a fresh, writable copy: the incoming one may be a read-only broadcast
    view or flow to other tensors too. `sole`: the caller knows nothing else refers to `g` or its array
    (`sole_gradient`); then an array that owns its writable memory is taken as it is, without the copy
    (AccumulateGrad steals such a gradient too: an embedding table's gradient is tens of MB). Later gradients
    add in place (`t.grad` keeps its identity), except while a graph is being built (create_graph=True),
    where the sum stays differentiable.
    """
    old = t._grad
    if type(g) is _Sparse or type(old) is _Sparse:
        t._grad = _sum_with_sparse(old, g, _state.grad_enabled)
    elif _state.grad_enabled:
        t._grad = g.clone() if old is None else old + g
    elif old is None:
        v = g._value
        owned = sole and v.base is None and v.dtype == t._value.dtype and (
            not isinstance(v, np.ndarray) or v.flags.writeable)
        t._grad = make(v if owned else v.copy(order="K"), g._device)   # K: a channels-last gradient stays so
    elif old._requires_grad or old.dtype is not g.dtype or old.shape != g.shape or not old._value.flags.writeable:
        t._grad = (old + g).detach()
    else:
        v = old._value
        v += g._value
        old._version[0] += 1
    if _post_accumulate:
        for hook in list(_post_accumulate.get(id(t), ())):
            hook(t)


def _sum_with_sparse(old, g, keep_graph: bool):
    """A leaf's accumulated gradient where it or the new one is sparse (Embedding(sparse=True)): sparse ones join
    (their entries in order, uncoalesced, as PyTorch's), a dense one takes the sparse one's values added in."""
    if old is None:
        out = g.clone()
    elif type(old) is _Sparse and type(g) is not _Sparse:
        out = g + old
    else:
        out = old + g
    return out if keep_graph else out.detach()


# sys.getrefcount counts every reference in CPython before 3.14 with the GIL; from 3.14 some are borrowed and go
# uncounted (and free-threaded builds defer counts), so there no gradient is known to be sole and each is copied.
_COUNTS_REFS = sys.implementation.name == "cpython" and sys.version_info < (3, 14) and getattr(
    sys, "_is_gil_enabled", lambda: True)()


def sole_gradient(g, refs: int) -> bool:
    """Whether gradient `g` has no references but the `refs` its caller counted (its own frames' and the
    argument's of this call) and its array none but `g`'s: what `accumulate_grad` may then take without a copy."""
    return _COUNTS_REFS and sys.getrefcount(g) <= refs + 1 and sys.getrefcount(g._value) <= 2


def retain_grad(t) -> None:
    """Keep `.grad` of a non-leaf tensor after backward."""
    if not t._requires_grad:
        raise FnxRuntimeError("retain_grad: can't retain_grad on a tensor that has requires_grad=False")
    if t._node is None or getattr(t, "_retains_grad", None) is not None:
        return
    ref = weakref.ref(t)

    def keep(grad):
        target = ref()
        if target is not None:
            accumulate_grad(target, grad)

    register_hook(t, keep)
    t._retains_grad = keep  # the hook that register_hook keeps last


def has_nan(t) -> bool:
    v = t._value
    return bool(v.dtype in _INEXACT_NP and t._device.xp.isnan(v).any())
