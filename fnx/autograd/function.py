"""`fnx.autograd.Function`: user-defined ops with a hand-written backward (PyTorch's API)."""
from __future__ import annotations

from .. import core
from .._graph import Cotangents, OutputOf, next_seq
from ..core import FnxRuntimeError
from ..dtypes import INEXACT_NP as _INEXACT_NP, _BY_NP
from ..ops._families import shape_of
from ..ops.creation import zeros
from ..tensor import Tensor
from . import tape

__all__ = ["Function", "FunctionCtx", "record_one", "record_pullback"]


class FunctionCtx:
    """The `ctx` passed to `forward` and `backward`."""

    # its own attributes are slots (set or read on every call); what a Function stores on it goes to `__dict__`
    __slots__ = ("needs_input_grad", "materialize_grads", "pull", "pull_holds_values", "_saved", "_versions",
                 "_non_diff", "_packed", "__dict__")

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad
        self._saved = ()
        self._versions = ()
        self.materialize_grads = True
        self._non_diff = ()
        self._packed = False   # _saved holds tape.pack_saved entries (saved_tensors_hooks)
        self.pull = None   # record_pullback's backward
        self.pull_holds_values = True   # whether `pull` keeps tensors alive (released after the backward)

    def save_for_backward(self, *tensors) -> None:
        hooks = tape.saved_hooks()
        if hooks is not None:
            self._saved = tuple([tape.pack_saved(t, hooks) if t is not None else None for t in tensors])
            self._packed = True
            return
        self._saved = tensors
        versions = []
        for t in tensors:   # a loop, not a comprehension (a function call in Python 3.11): Linear saves two
            versions.append(t._version[0] if t is not None else None)
        self._versions = versions

    @property
    def saved_tensors(self):
        if self._saved is None:
            raise FnxRuntimeError("Trying to backward through the graph a second time: saved tensors were freed; "
                                  "specify retain_graph=True")
        if self._packed:
            return tuple([tape.unpack_saved(e) if e is not None else None for e in self._saved])
        for i, (t, v) in enumerate(zip(self._saved, self._versions)):
            if t is not None and t._version[0] != v:
                raise tape._modified_error("a custom Function", i, t, v)
        return self._saved

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = value

    def mark_non_differentiable(self, *tensors) -> None:
        self._non_diff = {id(t) for t in tensors}

    def mark_dirty(self, *tensors) -> None:
        raise NotImplementedError("autograd.Function: mark_dirty (in-place custom functions) is not supported; "
                                  "return a new tensor from forward instead")


class _FunctionNode:
    """A custom function's tape node. Of its inputs it keeps the shapes and dtypes (`inputs`, None for
    non-tensors), so that only what `ctx` saved stays alive for backward."""

    __slots__ = ("fn", "ctx", "parents", "outputs_meta", "hooks", "stack", "inputs", "seq", "__weakref__")

    def __init__(self, fn, ctx, parents, outputs_meta, inputs):
        self.fn, self.ctx, self.parents, self.outputs_meta, self.inputs = fn, ctx, parents, outputs_meta, inputs
        self.seq = next_seq()
        self.hooks = None
        self.stack = tape.forward_stack() if core.anomaly_enabled() else None

    @property
    def name(self) -> str:
        return f"{self.fn.__name__}Backward"

    def __repr__(self) -> str:
        return f"<{self.name}>"

    def release(self) -> None:
        """Free what ctx saved and the pullback once the backward has run; a ctx that saved nothing and a pullback
        that holds no values (`record_pullback`'s `holds_values`) stay, so a second backward works (PyTorch's)."""
        ctx = self.ctx
        if ctx._saved:
            ctx._saved = None
        if ctx.pull_holds_values:
            ctx.pull = None

    def vjp(self, cot):
        if isinstance(cot, Cotangents):
            items = cot.items
            if self.ctx.materialize_grads:
                items = [zeros(shape, dtype=dt, device=dev) if g is None else g
                         for g, (shape, dt, dev) in zip(items, self.outputs_meta)]
            grads = self.fn.backward(self.ctx, *items)
        else:   # one output, and the walk sends only cotangents it received: nothing to materialize
            grads = self.fn.backward(self.ctx, cot)
        grads = grads if isinstance(grads, tuple) else (grads,)
        n_in = len(self.parents)
        if len(grads) < n_in:
            raise FnxRuntimeError(f"function {self.name} returned an incorrect number of gradients (expected "
                                  f"{n_in}, got {len(grads)})")
        grads = list(grads[:n_in])
        for i, (g, meta) in enumerate(zip(grads, self.inputs)):
            if g is None or meta is None:
                continue
            shape, dtype = meta
            if shape_of(g) != shape:
                raise FnxRuntimeError(f"function {self.name} returned an invalid gradient at index {i} - got "
                                      f"{list(g.shape)} but expected shape compatible with {list(shape)}")
            if isinstance(g, Tensor) and g.dtype is not dtype and g.dtype.is_floating_point and \
                    dtype.is_floating_point:   # PyTorch casts a gradient to its input's dtype (autocast backward)
                grads[i] = g.to(dtype)
        return tuple(grads)


class _OutputOf(OutputOf):
    """Output `index` of a multi-output Function node, as the tensor's `grad_fn`."""

    __slots__ = ("hooks", "__weakref__")

    def __init__(self, node, index: int, n: int):
        super().__init__(node, index, n)
        self.hooks = None

    name = "OutputBackward"

    def release(self) -> None:
        pass


class Function:
    """Subclass with static `forward(ctx, *args)` and `backward(ctx, *grads)`; call with `.apply(*args)`."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("autograd.Function subclasses must define forward(ctx, ...)")

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError("autograd.Function subclasses must define backward(ctx, *grads)")

    @classmethod
    def apply(cls, *args):
        flags = core._get_flags()   # read once, and set back as it was after the forward (no grad inside it)
        if flags & core._TRACING:
            raise FnxRuntimeError(f"{cls.__name__}.apply: autograd.Function is eager-only; inside fnx.grad/vmap/"
                                  f"compile use fnx.custom_vjp instead")
        needs = []
        for a in args:   # a loop, not a comprehension: most calls have two or three arguments
            needs.append(isinstance(a, Tensor) and a._requires_grad)
        ctx = FunctionCtx(tuple(needs))
        core._set_flags(flags | core._NO_GRAD)
        try:
            outs = cls.forward(ctx, *args)
        finally:
            core._set_flags(flags)
        if flags & core._NO_GRAD or True not in needs:
            return outs
        if not isinstance(outs, tuple):
            return _record_function(cls, ctx, args, [outs])[0]
        return tuple(_record_function(cls, ctx, args, list(outs)))


def _record_function(fn, ctx, args: tuple, outs: list) -> list:
    """Put one `_FunctionNode` on the tape for `outs`, what `fn.forward` returned for `args`."""
    inputs, parents = [], []
    for a in args:
        if isinstance(a, Tensor):
            inputs.append((a._value.shape, a.dtype))   # concrete: no transform
            parents.append(a._node if a._node is not None else (a if a._requires_grad else None))
        else:
            inputs.append(None)
            parents.append(None)
    tensors, meta = [], []
    for i, o in enumerate(outs):
        if isinstance(o, Tensor):
            for a in args:
                if o is a:   # an input returned as it is: the output is a new tensor of the same value
                    o = outs[i] = o.detach()
                    break
            tensors.append(o)
            meta.append((o._value.shape, o.dtype, o._device))
    node = _FunctionNode(fn, ctx, tuple(parents), meta, tuple(inputs))
    non_diff = ctx._non_diff
    n = len(tensors)
    for k, o in enumerate(tensors):
        if id(o) not in non_diff and o._value.dtype in _INEXACT_NP:
            o._node = node if n == 1 else _OutputOf(node, k, n)
            o._requires_grad = True
    return outs


class _OwnFunctionNode(_FunctionNode):
    """The node of one of fnx's own Functions (`record_one`): one output, and a backward whose gradients have
    their inputs' shapes and dtypes, so its vjp skips the checks of a user's Function (1.5-2 us of a layer's)."""

    __slots__ = ()

    def vjp(self, cot):
        return self.fn.backward(self.ctx, cot)


def record_one(fn, ctx, args: tuple, out: Tensor) -> Tensor:
    """`_record_function` for a new float tensor `out` that `fn.forward` made of `args`, tensors of its dtype (or
    None): the same node, without the general case's checks (a layer's call, every time step of an RNN), its
    slots set one by one as `tape.record` sets a primitive's (0.92 -> 0.55 us a Linear's node)."""
    value = out._value
    dtype = _BY_NP[value.dtype]
    parents, inputs = [], []
    for a in args:
        if a is None:
            parents.append(None)
            inputs.append(None)
        else:
            parents.append(a._node if a._node is not None else (a if a._requires_grad else None))
            inputs.append((a._value.shape, dtype))
    node = _new_node(_OwnFunctionNode)
    node.fn, node.ctx, node.parents, node.inputs = fn, ctx, tuple(parents), tuple(inputs)
    node.outputs_meta = [(value.shape, dtype, out._device)]
    node.seq = next_seq()
    node.hooks = None
    node.stack = tape.forward_stack() if core.anomaly_enabled() else None
    out._node = node
    out._requires_grad = True
    return out


_new_node = object.__new__


class _Pullback:
    """The rule of a node that `record_pullback` put on the tape: it calls the pullback its ctx holds. One rule
    object per name, no class per node: a class is a reference cycle, and a node hanging off one (with what
    its pullback keeps: a compiled call's residuals) would wait for Python's cycle collector to be freed."""

    def __init__(self, name: str):
        self.__name__ = name

    @staticmethod
    def backward(ctx, *cts):
        if ctx.pull is None:
            raise FnxRuntimeError("Trying to backward through the graph a second time: saved tensors were freed; "
                                  "specify retain_graph=True")
        return tuple(ctx.pull(list(cts)))


def record_pullback(name: str, args: list, outs: list, pull, holds_values: bool = True) -> list:
    """Put one node on the eager tape whose backward is `pull(output cotangents) -> input cotangents`.

    The node drops `pull` (and what it holds) when backward releases it, unless `holds_values` is False (it
    reads shapes only, and a second backward may use it again); until then a pullback that holds the outputs
    forms a cycle with them, as a saved output of a primitive does."""
    ctx = FunctionCtx(tuple([a._requires_grad for a in args]))
    ctx.pull = pull
    ctx.pull_holds_values = holds_values
    rule = _PULLBACKS.get(name)
    if rule is None:
        rule = _PULLBACKS[name] = _Pullback(name)
    node = _FunctionNode(rule, ctx, tuple([tape.parent_of(a) for a in args]),
                         [(o._value.shape, o.dtype, o._device) for o in outs],
                         tuple([(a._value.shape, a.dtype) for a in args]))
    n = len(outs)
    for k, o in enumerate(outs):
        if o.dtype.is_inexact:
            o._node = node if n == 1 else _OutputOf(node, k, n)
            o._requires_grad = True
    return outs


_PULLBACKS: dict = {}   # name -> its _Pullback rule, shared by the nodes of that name


def _record_multiple(prim, args, params, outs) -> list:
    """`core.record_multiple_hook`: one node on the eager tape for all outputs of a multiple-result primitive."""
    hooks = tape.saved_hooks()
    if hooks is not None and not prim.view:
        return _record_multiple_packed(prim, args, params, outs, hooks)
    if not prim.view:
        # the values its vjp reads, as the primitive declares, are checked against in-place writes before it runs
        read = [*(args if prim.saves_inputs else ()), *(o for k, o in enumerate(outs) if prim.reads_output(k))]
        versions = [t._version[0] for t in read]

        def pull(cts):
            for i, (t, v) in enumerate(zip(read, versions)):
                if t._version[0] != v:
                    raise tape._modified_error(f"{prim.name} (its inputs, then its outputs)", i, t, v)
            return prim.vjp(cts, args, outs, **params)

        return record_pullback(prim.name, list(args), outs, pull)
    # The outputs of a view primitive are views of its input, and its vjp only moves cotangents (it reads shapes):
    # the node keeps stand-ins, so it forms no cycle with the outputs and keeps no tensor alive.
    seen_args = [tape.stand_in(a._value, a._device) for a in args]
    seen_outs = [tape.stand_in(o._value, o._device) for o in outs]
    record_pullback(prim.name, list(args), outs, lambda cts: prim.vjp(cts, seen_args, seen_outs, **params),
                    holds_values=False)
    for o in outs:   # an in-place write through another view of the base refreshes these views' nodes
        tape._note_view(o._base, o)
    return outs


def _record_multiple_packed(prim, args, params, outs, hooks) -> list:
    """`_record_multiple` under saved_tensors_hooks: the node keeps pack_hook's results of the values its vjp reads
    (stand-ins for the others) and unpacks them in backward."""
    if "saved" in params:   # compiled_call_saving: the residuals of a compiled call, kept in its params
        raise NotImplementedError(f"saved_tensors_hooks: the residuals that an eager call of an fnx.compile'd "
                                  f"function keeps for backward ({prim.name}) are not passed through pack_hook; "
                                  f"call it outside the hooks, or the uncompiled function inside them")
    ins = [tape.pack_saved(a, hooks) if prim.saves_inputs else tape.stand_in(a._value, a._device) for a in args]
    kept = []

    def pull(cts):
        unpack = [tape.unpack_saved(e) if isinstance(e, tuple) else e for e in (*ins, *kept)]
        return prim.vjp(cts, unpack[:len(ins)], unpack[len(ins):], **params)

    outs = record_pullback(prim.name, list(args), outs, pull)
    # packed once recorded, so that each output's place in the graph is its node
    kept.extend(tape.pack_saved(o, hooks) if prim.reads_output(k) else tape.stand_in(o._value, o._device)
                for k, o in enumerate(outs))
    return outs


core.record_multiple_hook = _record_multiple
