"""`torch.export.export`: a module traced with fnx.export's tracer into an ExportedProgram (torch_program.py).

The module's state is lifted, as PyTorch lifts it: the traced function takes the parameters, buffers and tensor
attributes (swapped into the module for the call, as `functional_call` does) and the user's tensors, and returns
every buffer and user tensor as the forward left it, then the outputs; those left unchanged are dropped, the
others are the program's writes. Samplers of the global generator draw from a random key input, as under
fnx.compile.
"""
from __future__ import annotations

from typing import NamedTuple

from ..core import FnxRuntimeError, FnxValueError
from ..device import cpu
from ..dtypes import int64
from ..ir import ClosedJaxpr, Jaxpr
from ..nn.module import Module
from ..nn.stateless import _reparametrize
from ..ops.creation import zeros
from ..ops.sampling import staged_keys
from ..tensor import Tensor
from ..transforms.tracing import StagingTracer
from ..tree import TreeDef, tree_flatten, tree_structure, tree_unflatten
from .exported import Exported, export as _fnx_export
from .torch_dims import positional_names, resolve
from .torch_program import TENSOR_INPUT, ExportedProgram, UserInputs, state_attribute
from .torch_signature import ConstantArgument, InputKind, InputSpec, OutputKind, TensorArgument

__all__ = ["export", "draft_export", "DraftExportReport", "ConstraintViolationError"]

_STATE_PREFIX = {InputKind.PARAMETER: "p_", InputKind.BUFFER: "b_", InputKind.CONSTANT_TENSOR: "c_"}


class ConstraintViolationError(FnxValueError, RuntimeError):
    """A dimension marked dynamic that the program cannot take dynamic (it specializes it, or computes with it
    what fnx.export cannot express). PyTorch raises a RuntimeError here, fnx.export a ValueError: this is both."""


def export(mod: Module, args: tuple, kwargs: dict | None = None, *, dynamic_shapes=None, strict: bool = False,
           preserve_module_call_signature: tuple = (),
           prefer_deferred_runtime_asserts_over_guards: bool = False) -> ExportedProgram:
    """Trace `mod(*args, **kwargs)` into an ExportedProgram (PyTorch's torch.export.export; `strict` changes
    nothing: fnx has one tracer). `dynamic_shapes` marks dimensions that may change from call to call: by the
    forward's argument names (a dict) or by position (a tuple), with `Dim`s, `Dim.AUTO`, `Dim.DYNAMIC`,
    `Dim.STATIC` (or None), or a `ShapesCollection`."""
    if not isinstance(mod, Module):
        raise FnxValueError(f"Expected `mod` to be an instance of `torch.nn.Module`, got {type(mod)}.")
    if not isinstance(args, tuple):
        raise FnxRuntimeError(f"Expecting `args` to be a tuple of example positional inputs, got {type(args)}")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise FnxRuntimeError(f"Expecting `kwargs` to be a dict of example keyword inputs, got {type(kwargs)}")
    if preserve_module_call_signature:
        raise NotImplementedError(f"torch.export.export(preserve_module_call_signature="
                                  f"{preserve_module_call_signature!r}): fnx's exporter inlines submodule calls and "
                                  f"keeps no submodule signatures")
    kwargs = dict(kwargs or {})
    leaves, tree = tree_flatten((args, kwargs))
    arg_names = positional_names(mod, len(args))
    labels, graph_names = _leaf_names((args, kwargs), arg_names)
    found = resolve(mod, args, kwargs, dynamic_shapes, labels)
    state = _state_of(mod)

    def attempt(static: set) -> tuple:
        """The export with the AUTO dimensions in `static` made static: (leaf dims, program, out tree, writes)."""
        dims = [{a: s for a, s in d.items() if s not in static} for d in found.leaf_dims]
        return (dims, *_trace(mod, state, leaves, tree, dims, graph_names))

    try:
        leaf_dims, program, out_tree, writes = attempt(set())
    except FnxValueError:
        if not found.auto:
            raise
        # Dim.AUTO: dynamic where the program allows it. Keep each AUTO dimension that it takes dynamic on its
        # own (the others static); should those not go together, all of them become static
        kept = {s for s in found.auto if _succeeds(attempt, found.auto - {s})}
        try:
            leaf_dims, program, out_tree, writes = attempt(found.auto - kept)
        except FnxValueError:
            leaf_dims, program, out_tree, writes = attempt(found.auto)
    specs = [InputSpec(kind, TensorArgument(_STATE_PREFIX[kind] + name.replace(".", "_")), name, persistent)
             for name, kind, persistent, _ in state]
    constants = [TENSOR_INPUT if isinstance(x, Tensor) else x for x in leaves]
    specs += [InputSpec(InputKind.USER_INPUT, TensorArgument(n) if c is TENSOR_INPUT else ConstantArgument(n, c), None)
              for n, c in zip(graph_names, constants)]
    state_dict = {name: t for name, kind, persistent, t in state
                  if kind is InputKind.PARAMETER or (kind is InputKind.BUFFER and persistent)}
    lifted = {name: t for name, kind, persistent, t in state if name not in state_dict}
    user = UserInputs(tree, labels, constants, leaf_dims, arg_names)
    symbols = set(program.symbols)
    return ExportedProgram(program, specs, writes, state_dict, lifted, user, out_tree,
                           {s: r for s, r in found.ranges.items() if s in symbols}, (args, kwargs))


def _succeeds(attempt, static: set) -> bool:
    try:
        attempt(static)
    except FnxValueError:
        return False
    return True


class _StateEntry(NamedTuple):
    name: str
    kind: InputKind
    persistent: bool | None
    tensor: Tensor


def _state_of(mod: Module) -> list[_StateEntry]:
    """The module's state in PyTorch's graph order: parameters, buffers, then tensor attributes (constants);
    a tensor reachable under several names (tied weights) once, under its first name."""
    out, seen = [], set()

    def add(prefix: str, name: str, kind: InputKind, persistent: bool | None, t: Tensor) -> None:
        if id(t) not in seen:
            seen.add(id(t))
            out.append(_StateEntry(f"{prefix}.{name}" if prefix else name, kind, persistent, t))

    for name, p in mod.named_parameters():
        add("", name, InputKind.PARAMETER, None, p)
    modules = list(mod.named_modules())
    for prefix, m in modules:
        for name, b in m._buffers.items():
            if b is not None:
                add(prefix, name, InputKind.BUFFER, name not in m._non_persistent_buffers_set, b)
    for prefix, m in modules:
        for name, value in vars(m).items():
            if isinstance(value, Tensor):
                add(prefix, name, InputKind.CONSTANT_TENSOR, None, value)
    return out


def _leaf_names(inputs: tuple, arg_names: list[str]) -> tuple[list[str], list[str]]:
    """(labels, graph names) of the leaves of `(args, kwargs)`: `x`, `x[0]`, `x['k']` for messages, and `x`,
    `x_0`, `x_k` as PyTorch names the graph's inputs."""
    args, kwargs = inputs
    labels, names = [], []
    for name, value in [*zip(arg_names, args), *sorted(kwargs.items())]:
        for path in _paths(value):
            labels.append(name + "".join(f"[{k!r}]" for k in path))
            names.append("_".join([name, *map(str, path)]))
    return labels, names


def _paths(value) -> list[tuple]:
    """The key path of each leaf of a pytree, in fnx's flattening order."""
    leaves, tree = tree_flatten(value)
    if tree.kind is None:
        return [()]
    if isinstance(value, dict):
        return [(k, *p) for k in sorted(value) for p in _paths(value[k])]
    if isinstance(value, (tuple, list)):
        return [(i, *p) for i, v in enumerate(value) for p in _paths(v)]
    return [(i,) for i in range(len(leaves))]


def _trace(mod: Module, state: list[_StateEntry], leaves: list, tree: TreeDef, leaf_dims: list, user_names: list):
    """fnx.export of the module as a function of its state and the user's tensors; returns (program, user output
    structure, what it writes: (OutputKind, buffer or user input name) per leading output). The program returns
    every buffer and user tensor input as the forward left it, then its outputs; those left unchanged are
    dropped. A random key is its last input when the forward samples (dropout in training mode), as fnx.compile
    passes one: `.module()` draws a fresh key from the default generator at every call."""
    n_state = len(state)
    tensor_at = [i for i, x in enumerate(leaves) if isinstance(x, Tensor)]
    buffers = [k for k, e in enumerate(state) if e.kind is InputKind.BUFFER]
    writable = buffers + list(range(n_state, n_state + len(tensor_at)))
    out_trees = []

    def program(*flat):
        flat, key = flat[:-1], flat[-1]
        tensors = {e.name: t for e, t in zip(state, flat)}
        for k in writable:   # a buffer or input may be written in place (self.count.add_(1)): the program returns it
            if isinstance(flat[k], StagingTracer):
                flat[k]._frozen = None
        user = list(leaves)
        for i, t in zip(tensor_at, flat[n_state:]):
            user[i] = t
        args, kwargs = tree_unflatten(tree, user)
        with _reparametrize(mod, tensors, True, False), staged_keys() as keys:
            keys.placeholders[key.device] = key   # the global generator's samplers draw from this input
            out = mod(*args, **kwargs)
            new = [state_attribute(mod, state[k].name) for k in buffers]
        out_leaves, out_tree = tree_flatten(out)
        out_trees.append(out_tree)
        return new + list(flat[n_state:]) + out_leaves

    program.__name__ = type(mod).__name__
    examples = [e.tensor for e in state] + [leaves[i] for i in tensor_at]
    examples.append(zeros(2, dtype=int64, device=examples[0].device if examples else cpu))
    dynamic = [None] * n_state + [leaf_dims[i] or None for i in tensor_at] + [None]
    try:
        traced = _fnx_export(program, *examples, dynamic_shapes=tuple(dynamic))
    except FnxValueError as e:
        symbols = sorted({s for d in leaf_dims for s in d.values()})
        if not symbols or not str(e).startswith("fnx.export:"):
            raise
        raise ConstraintViolationError(f"torch.export.export: constraints violated ({', '.join(symbols)})! {e}") from e
    j = traced.jaxpr.jaxpr
    writes, outvars = [], []
    for out, k in zip(j.outvars, writable):
        if out is j.invars[k]:
            continue
        name = state[k].name if k < n_state else user_names[tensor_at[k - n_state]]
        if out.aval.shape != j.invars[k].aval.shape or out.aval.dtype is not j.invars[k].aval.dtype:
            raise NotImplementedError(f"torch.export.export: the forward replaces {name!r} "
                                      f"({j.invars[k].aval.str_short()}) with a tensor of another shape or dtype "
                                      f"({out.aval.str_short()}); an exported module writes it back in place: "
                                      f"assign a tensor of the same shape and dtype, or update it in place")
        writes.append((OutputKind.BUFFER_MUTATION if k < n_state else OutputKind.USER_INPUT_MUTATION, name))
        outvars.append(out)
    outvars += j.outvars[len(writable):]
    key = j.invars[-1]
    invars = j.invars if any(a is key for e in j.eqns for a in e.inputs) else j.invars[:-1]
    closed = ClosedJaxpr(Jaxpr(j.constvars, invars, j.eqns, outvars), traced.jaxpr.consts)
    exported = Exported(closed, tree_structure(tuple(range(len(invars)))), tree_structure(list(range(len(outvars)))),
                        traced.symbols, traced.symbol_examples, traced.arg_names, traced.name)
    return exported, out_trees[0], writes


class DraftExportReport:
    """What `draft_export` found: fnx's exporter either succeeds soundly or raises, so there are no failures."""

    def __init__(self):
        self.failures: list = []

    def successful(self) -> bool:
        return True

    def __str__(self) -> str:
        return "No issues are found during export, and it was able to soundly produce a graph."


def draft_export(mod: Module, args: tuple, kwargs: dict | None = None, *, dynamic_shapes=None,
                 preserve_module_call_signature: tuple = (), strict: bool = False,
                 prefer_deferred_runtime_asserts_over_guards: bool = False) -> ExportedProgram:
    """`export`, with a report (`ep._report`) of what would have failed: fnx's exporter raises instead of
    guessing, so a program it returns has none."""
    ep = export(mod, args, kwargs, dynamic_shapes=dynamic_shapes, strict=strict,
                preserve_module_call_signature=preserve_module_call_signature)
    ep._report = DraftExportReport()
    return ep
