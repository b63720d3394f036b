"""`torch.export.export` and `ExportedProgram` for PyTorch programs running on fnx (fnx/export/torch_api.py
gathers torch.export's names).

`export(mod, args, kwargs=None, *, dynamic_shapes=None)` traces the module with fnx.export's tracer into an
`ExportedProgram` with PyTorch's surface. As in PyTorch, the module's state is lifted: the program's inputs are
its parameters, buffers and constant tensor attributes (by state_dict name) followed by the user's tensors, and
its outputs are the buffers the forward changed (BatchNorm's running statistics in training mode) followed by
the user's outputs; `graph_signature` says which is which. The training flag is captured: the program behaves
as the module did in the mode it was in. `ep.module()` runs the program as a module holding the (shared)
state, checks each call against the exported shapes and ranges, and writes changed buffers (and inputs the
forward changed in place) back in place.
`save` / `load` use fnx's archive formats (JSON and `.npy`, never pickle), so PyTorch's own `.pt2` files do
not load.
"""
from __future__ import annotations

import copy
import dataclasses
from typing import Any, NamedTuple

from ..autograd import no_grad
from ..core import FnxRuntimeError, FnxTypeError, FnxValueError
from ..device import cpu
from ..dtypes import int64
from ..ir import ClosedJaxpr, Jaxpr, _Printer
from ..nn.module import Module
from ..nn.stateless import _reparametrize
from ..ops.creation import zeros
from ..ops.sampling import compiled_call_key, staged_keys
from ..tensor import Tensor
from ..transforms.tracing import StagingTracer
from ..tree import TreeDef, register_pytree_node, tree_flatten, tree_structure, tree_unflatten
from .exported import Exported, export as _fnx_export
from .symbolic import Dim as _Poly
from .torch_dims import ValueRanges, positional_names, resolve
from .torch_signature import (ConstantArgument, ExportGraphSignature, InputKind, InputSpec, OutputKind, OutputSpec,
                              TensorArgument)

__all__ = ["export", "ExportedProgram", "ExportedModule", "UnflattenedModule", "unflatten", "draft_export",
           "DraftExportReport", "default_decompositions", "register_dataclass", "CallSpec", "UserInputs", "GuardError",
           "ConstraintViolationError"]

_STATE_PREFIX = {InputKind.PARAMETER: "p_", InputKind.BUFFER: "b_", InputKind.CONSTANT_TENSOR: "c_"}


class GuardError(FnxRuntimeError, AssertionError):
    """An exported module called with inputs outside what it was exported for. PyTorch 2.13 raises an
    AssertionError ("Guard failed: ..."), earlier versions a RuntimeError: this is both."""


class ConstraintViolationError(FnxValueError, RuntimeError):
    """A dimension marked dynamic that the program cannot take dynamic (it specializes it, or computes with it
    what fnx.export cannot express). PyTorch raises a RuntimeError here, fnx.export a ValueError: this is both."""


class CallSpec(NamedTuple):
    """The pytree structures of the user inputs `(args, kwargs)` and of the user outputs."""

    in_spec: TreeDef
    out_spec: TreeDef


class UserInputs(NamedTuple):
    """How the user's `(args, kwargs)` map to the program: their structure, per leaf a label for messages and
    either None (a tensor, the program's next user input) or the constant it was exported with (an int, a flag),
    per tensor leaf its symbolic axes, and the forward's positional parameter names."""

    tree: TreeDef
    labels: list
    constants: list
    leaf_dims: list
    arg_names: list


_TENSOR = None   # in UserInputs.constants: this leaf is a tensor input


class ExportedProgram:
    """A module exported by `torch.export.export`: the program (fnx IR over the lifted state and the user's
    tensors), its graph signature, state and calling convention. Run it with `.module()`."""

    def __init__(self, program: Exported, input_specs: list[InputSpec], writes: list[tuple], state_dict: dict,
                 constants: dict, user: UserInputs, out_tree: TreeDef, range_constraints: dict,
                 example_inputs: tuple | None):
        self._program, self._user, self._out_tree = program, user, out_tree
        self.state_dict, self.constants = state_dict, constants
        self.range_constraints, self.example_inputs = range_constraints, example_inputs
        tensor_specs = [s for s in input_specs if isinstance(s.arg, TensorArgument)]
        jaxpr = program.jaxpr.jaxpr
        names = {id(v): s.arg.name for v, s in zip(jaxpr.invars, tensor_specs)}
        if len(jaxpr.invars) > len(tensor_specs):   # the random key of a program that samples
            names[id(jaxpr.invars[-1])] = "rng_key"
        printer = _Printer(names)
        self._text = printer.jaxpr(jaxpr, indent=4)
        outs = [printer.name(v) for v in jaxpr.outvars]
        output_specs = [OutputSpec(kind, TensorArgument(n), target) for n, (kind, target) in zip(outs, writes)]
        output_specs += [OutputSpec(OutputKind.USER_OUTPUT, TensorArgument(n), None) for n in outs[len(writes):]]
        self.graph_signature = ExportGraphSignature(input_specs, output_specs)

    # ---------------------------------------------------------------- reading
    @property
    def graph(self) -> _Graph:
        """The program, printable (fnx's IR text, its inputs named as in `graph_signature`)."""
        return _Graph(self._text)

    @property
    def graph_module(self) -> _GraphModule:
        """The program as a callable on the flat inputs (state tensors, then user tensors) giving the flat outputs;
        printable, with `.graph` and `.code`."""
        return _GraphModule(self)

    @property
    def call_spec(self) -> CallSpec:
        return CallSpec(self._user.tree, self._out_tree)

    @property
    def dialect(self) -> str:
        return "TRAINING"

    @property
    def tensor_constants(self) -> dict:
        return {k: v for k, v in self.constants.items() if isinstance(v, Tensor)}

    @property
    def module_call_graph(self) -> list:
        raise NotImplementedError("ExportedProgram.module_call_graph: fnx's exporter inlines submodule calls and "
                                  "keeps no per-submodule call signatures")

    def named_parameters(self):
        """(state_dict name, parameter) for each parameter input, in graph order."""
        for name in self.graph_signature.parameters:
            yield name, self.state_dict[name]

    def parameters(self):
        for _, p in self.named_parameters():
            yield p

    def named_buffers(self):
        """(name, buffer) for each buffer input, persistent or not, in graph order."""
        for name in self.graph_signature.buffers:
            yield name, self.state_dict[name] if name in self.state_dict else self.constants[name]

    def buffers(self):
        for _, b in self.named_buffers():
            yield b

    def __str__(self) -> str:
        signature = str(self.graph_signature).replace("\n", "\n    ")
        return (f"ExportedProgram:\n    {self._text}\n\nGraph signature: {signature}\n"
                f"Range constraints: {self.range_constraints}\n")

    def __call__(self, *args, **kwargs):
        raise FnxRuntimeError("Unable to call ExportedProgram directly. You should use `exported_program.module()` "
                              "instead.")

    # ---------------------------------------------------------------- running
    def module(self, check_guards: bool = True) -> Module:
        """A module that runs the program: it holds the state (the same tensors as `state_dict`) under the
        original names and hierarchy, checks each call's inputs against the exported shapes and ranges (unless
        `check_guards=False`) and writes the buffers the program changes back in place. Its mode is the one
        exported: `train()` / `eval()` raise NotImplementedError, as in PyTorch."""
        return ExportedModule(self, check_guards)

    def _state_tensors(self, owner: Module | None = None) -> list:
        """The state inputs in graph order, read from `owner` (a module from `.module()`) or from the program."""
        out = []
        for spec in self.graph_signature.input_specs:
            if spec.kind is InputKind.USER_INPUT:
                continue
            name = spec.target
            if owner is not None:
                out.append(_attribute(owner, name))
            else:
                out.append(self.state_dict[name] if name in self.state_dict else self.constants[name])
        return out

    def _user_leaves(self, args: tuple, kwargs: dict) -> list:
        """The leaves of a call's `(args, kwargs)` after checking their structure against the exported one."""
        names = self._user.arg_names
        if len(args) < len(names) and any(n in kwargs for n in names[len(args):]):   # x=... for a positional x
            args = args + tuple(kwargs.pop(n) for n in names[len(args):] if n in kwargs)
        leaves, tree = tree_flatten((tuple(args), dict(kwargs)))
        if tree != self._user.tree:
            want_args, want_kwargs = self._user.tree.children
            if set(kwargs) != set(want_kwargs.aux or ()):
                raise FnxValueError(f"Ran into a kwarg keyword mismatch: Got the following keywords {sorted(kwargs)} "
                                    f"but expected {list(want_kwargs.aux or ())}")
            raise FnxValueError(f"Trying to flatten user inputs with exported input tree spec {self._user.tree} but "
                                f"actually got inputs with tree spec of {tree}: pass the same number and kinds of "
                                f"args and kwargs as the ones you used when exporting")
        return leaves

    def _check_inputs(self, leaves: list) -> None:
        """Raise GuardError when a leaf is outside what the program was exported for: a constant input that
        differs, a rank, a static size, two sizes of one symbol that differ, a size outside its range."""
        n_state = sum(s.kind is not InputKind.USER_INPUT for s in self.graph_signature.input_specs)
        avals = iter(self._program.in_avals[n_state:])
        env: dict[str, tuple[int, str]] = {}
        for x, label, constant in zip(leaves, self._user.labels, self._user.constants):
            if constant is not _TENSOR:
                if isinstance(x, Tensor) or x != constant:
                    raise GuardError(f"Guard failed: {label} == {constant!r} (the program was exported with that "
                                     f"value; got {x!r})")
                continue
            aval = next(avals)
            if not isinstance(x, Tensor):
                raise FnxTypeError(f"the exported module takes a tensor as {label}, got a {type(x).__name__}")
            if x.ndim != aval.ndim:
                raise GuardError(f"Guard failed: {label}.dim() == {aval.ndim} ({label} has shape {list(x.shape)}; "
                                 f"the program takes {aval.str_short()})")
            for axis, (size, d) in enumerate(zip(x.shape, aval.shape)):
                where = f"{label}.size()[{axis}]"
                if not isinstance(d, _Poly):
                    if size != d:
                        raise GuardError(f"Guard failed: {where} == {d} ({label} has shape {list(x.shape)}; the "
                                         f"program was exported for {aval.str_short()})")
                    continue
                name = d.symbols[0]
                low, high = self.range_constraints[name]
                if name in env and env[name][0] != size:
                    raise GuardError(f"Guard failed: {where} == {env[name][1]} ({size} against {env[name][0]}: both "
                                     f"are the dimension {name})")
                if size < low or size > high:
                    bound = f">= {low}" if size < low else f"<= {high}"
                    raise GuardError(f"Guard failed: {where} {bound} (it is {size}; {name} ranges over "
                                     f"{ValueRanges(low, high)!r})")
                env[name] = (size, where)

    def _run(self, owner: Module, leaves: list) -> Any:
        """Run the program on the state of `owner` (a module from `.module()`) and the user's leaves, write the
        buffers and inputs it changes back in place, and return the user outputs."""
        inputs = self._state_tensors(owner) + [x for x, c in zip(leaves, self._user.constants) if c is _TENSOR]
        if len(inputs) < len(self._program.in_avals):   # the program samples: a fresh key for this call
            inputs.append(compiled_call_key(inputs[0].device if inputs else cpu, "torch.export's module()"))
        outs = self._program.call(*inputs)
        user_inputs = [s.arg.name for s in self.graph_signature.input_specs if s.kind is InputKind.USER_INPUT]
        writes = [s for s in self.graph_signature.output_specs if s.kind is not OutputKind.USER_OUTPUT]
        with no_grad():
            for spec, new in zip(writes, outs):
                if spec.kind is OutputKind.BUFFER_MUTATION:
                    _attribute(owner, spec.target).copy_(new.detach())
                else:
                    leaves[user_inputs.index(spec.target)].copy_(new.detach())
        return tree_unflatten(self._out_tree, outs[len(writes):])

    # ---------------------------------------------------------------- transforming and checking
    def run_decompositions(self, decomp_table: dict | None = None,
                           decompose_custom_triton_ops: bool = False) -> ExportedProgram:
        """The same program: fnx's IR is already in fnx's primitive set, and buffer updates are already outputs.
        A non-empty `decomp_table` (ATen operators, which fnx programs hold none of) raises NotImplementedError."""
        if decomp_table:
            raise NotImplementedError(f"ExportedProgram.run_decompositions: fnx programs hold fnx primitives, not "
                                      f"ATen operators, so a decomposition table ({len(decomp_table)} entries) has "
                                      f"nothing to apply to; call it with no table")
        return copy.copy(self)

    def validate(self) -> None:
        """Check that the signature, the state and the program agree (counts, shapes, dtypes, names)."""
        specs = self.graph_signature.input_specs
        tensor_specs = [s for s in specs if isinstance(s.arg, TensorArgument)]
        avals = self._program.in_avals
        if len(avals) - len(tensor_specs) not in (0, 1):   # one more: the random key of a program that samples
            raise FnxRuntimeError(f"ExportedProgram.validate: the signature lists {len(tensor_specs)} tensor inputs, "
                                  f"the program takes {len(avals)}")
        for t, aval, spec in zip(self._state_tensors(), avals, tensor_specs):
            if tuple(t.shape) != tuple(aval.shape) or t.dtype is not aval.dtype:
                raise FnxRuntimeError(f"ExportedProgram.validate: the state {spec.target!r} is {t.dtype.name}"
                                      f"{list(t.shape)}, the program takes {aval.str_short()}")
        buffers = set(self.graph_signature.buffers)
        inputs = {s.arg.name for s in specs if s.kind is InputKind.USER_INPUT and isinstance(s.arg, TensorArgument)}
        for spec in self.graph_signature.output_specs:
            if spec.target is not None and spec.target not in (
                    buffers if spec.kind is OutputKind.BUFFER_MUTATION else inputs):
                raise FnxRuntimeError(f"ExportedProgram.validate: the program writes {spec.target!r}, which is no "
                                      f"{'buffer' if spec.kind is OutputKind.BUFFER_MUTATION else 'tensor input'}")
        n_out = len(self.graph_signature.output_specs)
        if n_out != len(self._program.out_avals):
            raise FnxRuntimeError(f"ExportedProgram.validate: the signature lists {n_out} outputs, the program gives "
                                  f"{len(self._program.out_avals)}")


class _Graph:
    """An exported program's graph, as text."""

    def __init__(self, text: str):
        self._text = text

    def __str__(self) -> str:
        return self._text

    __repr__ = __str__


class _GraphModule:
    """`ExportedProgram.graph_module`: the program on its flat inputs (state, then user tensors)."""

    def __init__(self, ep: ExportedProgram):
        self._ep = ep

    @property
    def graph(self) -> _Graph:
        return self._ep.graph

    @property
    def code(self) -> str:
        return self._ep._text

    def print_readable(self, print_output: bool = True) -> str:
        if print_output:
            print(self.code)
        return self.code

    def __call__(self, *flat):
        return tuple(self._ep._program.call(*flat))

    def __str__(self) -> str:
        return self.code


def _attribute(root: Module, target: str):
    """The tensor at a dotted state name of `root`."""
    path, _, attr = target.rpartition(".")
    return getattr(root.get_submodule(path), attr)


class _Submodule(Module):
    """A level of an exported module's hierarchy: it holds state; the program inlines its calls."""

    def forward(self, *args, **kwargs):
        raise NotImplementedError("a submodule of an exported program cannot run alone: fnx's exporter inlines "
                                  "submodule calls into one program; call the root module")


class ExportedModule(Module):
    """`ExportedProgram.module()`: the program as a module holding the exported state (the same tensors)."""

    def __init__(self, ep: ExportedProgram, check_guards: bool = True):
        super().__init__()
        self.__dict__.update(_ep=ep, _check_guards=check_guards)
        for spec in ep.graph_signature.input_specs:
            if spec.kind is InputKind.USER_INPUT:
                continue
            path, _, attr = spec.target.rpartition(".")
            owner = self
            for part in path.split(".") if path else ():
                if part not in owner._modules:
                    owner.add_module(part, _Submodule())
                owner = owner._modules[part]
            value = ep.state_dict.get(spec.target, ep.constants.get(spec.target))
            if spec.kind is InputKind.PARAMETER:
                owner.register_parameter(attr, value)
            elif spec.kind is InputKind.BUFFER:
                owner.register_buffer(attr, value, persistent=spec.persistent is not False)
            else:
                owner.__dict__[attr] = value

    @property
    def graph(self) -> _Graph:
        return self._ep.graph

    def forward(self, *args, **kwargs):
        ep = self._ep
        leaves = ep._user_leaves(args, kwargs)
        if self._check_guards:
            ep._check_inputs(leaves)
        return ep._run(self, leaves)

    def train(self, mode: bool = True) -> Module:
        raise NotImplementedError(f"Calling {'train' if mode else 'eval'}() is not supported yet: the program "
                                  f"captured the module's mode when it was exported; export it again in the other mode")

    def eval(self) -> Module:
        return self.train(False)


class UnflattenedModule(ExportedModule):
    """`torch.export.unflatten(ep)`: the exported module with the original hierarchy of submodules holding the
    state. The root runs the program; a submodule cannot run alone (fnx's exporter inlines submodule calls)."""


def unflatten(module: ExportedProgram, flat_args_adapter=None) -> UnflattenedModule:
    """The exported program as a module with the original module hierarchy (see UnflattenedModule)."""
    if flat_args_adapter is not None:
        raise NotImplementedError("torch.export.unflatten(flat_args_adapter=...): fnx's exported programs keep the "
                                  "exported calling convention; adapting it is not supported")
    return UnflattenedModule(module)


# ---------------------------------------------------------------- export
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
    leaf_dims, ranges = found.leaf_dims, found.ranges
    try:
        program, out_tree, writes = _trace(mod, state, leaves, tree, leaf_dims, graph_names)
    except FnxValueError:
        if not found.auto:
            raise
        # Dim.AUTO: dynamic where the program allows it. It does not take them all dynamic, and fnx.export does
        # not say which one fails: all the AUTO dimensions become static
        leaf_dims = [{a: s for a, s in d.items() if s not in found.auto} for d in leaf_dims]
        ranges = {s: r for s, r in ranges.items() if s not in found.auto}
        program, out_tree, writes = _trace(mod, state, leaves, tree, leaf_dims, graph_names)
    specs = [InputSpec(kind, TensorArgument(_STATE_PREFIX[kind] + name.replace(".", "_")), name, persistent)
             for name, kind, persistent, _ in state]
    constants = [_TENSOR if isinstance(x, Tensor) else x for x in leaves]
    specs += [InputSpec(InputKind.USER_INPUT, TensorArgument(n) if c is _TENSOR else ConstantArgument(n, c), None)
              for n, c in zip(graph_names, constants)]
    state_dict = {name: t for name, kind, persistent, t in state
                  if kind is InputKind.PARAMETER or (kind is InputKind.BUFFER and persistent)}
    lifted = {name: t for name, kind, persistent, t in state if name not in state_dict}
    user = UserInputs(tree, labels, constants, leaf_dims, arg_names)
    symbols = set(program.symbols)
    return ExportedProgram(program, specs, writes, state_dict, lifted, user, out_tree,
                           {s: r for s, r in ranges.items() if s in symbols}, (args, kwargs))


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
            new = [_attribute(mod, state[k].name) for k in buffers]
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


# ---------------------------------------------------------------- the rest of torch.export
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


def default_decompositions() -> dict:
    """The decomposition table for `run_decompositions`: empty, as fnx programs are already in fnx's primitive
    set."""
    return {}


def register_dataclass(cls: type, *, serialized_type_name: str | None = None) -> None:
    """Make the dataclass `cls` a pytree node (its fields are its children), so export takes and returns it."""
    if not dataclasses.is_dataclass(cls):
        raise FnxTypeError(f"register_dataclass: {cls!r} is not a dataclass")
    names = [f.name for f in dataclasses.fields(cls) if f.init]
    register_pytree_node(cls, lambda x: ([getattr(x, n) for n in names], None),
                         lambda _, children: cls(**dict(zip(names, children))))

