"""`ExportedProgram`, what `torch.export.export` (torch_tracing.py) gives, and the module that runs it.

The program's inputs are the module's lifted state (parameters, buffers, tensor attributes, by state_dict name)
followed by the user's tensors (and a random key when it samples); its outputs are what it writes (buffers the
forward changed, inputs it changed in place) followed by the user's outputs; `graph_signature` says which is
which. The training flag was captured at export. `ep.module()` runs the program as a module holding the (shared)
state, checks each call against the exported shapes and ranges, and writes the changed tensors back in place.
"""
from __future__ import annotations

import copy
import dataclasses
from typing import Any, NamedTuple

from ..autograd import no_grad
from ..core import FnxRuntimeError, FnxTypeError, FnxValueError
from ..device import cpu
from ..ir import _Printer
from ..nn.module import Module
from ..ops.sampling import compiled_call_key
from ..tensor import Tensor
from ..tree import TreeDef, register_pytree_node, tree_flatten, tree_unflatten
from .exported import Exported
from .symbolic import Dim as _Poly
from .torch_dims import ValueRanges
from .torch_signature import ExportGraphSignature, InputKind, InputSpec, OutputKind, OutputSpec, TensorArgument

__all__ = ["ExportedProgram", "ExportedModule", "UnflattenedModule", "unflatten", "default_decompositions",
           "register_dataclass", "CallSpec", "UserInputs", "GuardError", "TENSOR_INPUT", "state_attribute"]

class GuardError(FnxRuntimeError, AssertionError):
    """An exported module called with inputs outside what it was exported for. PyTorch 2.13 raises an
    AssertionError ("Guard failed: ..."), earlier versions a RuntimeError: this is both."""


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


TENSOR_INPUT = None   # in UserInputs.constants: this leaf is a tensor input


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
                out.append(state_attribute(owner, name))
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
            if constant is not TENSOR_INPUT:
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
        inputs = self._state_tensors(owner) + [x for x, c in zip(leaves, self._user.constants) if c is TENSOR_INPUT]
        if len(inputs) < len(self._program.in_avals):   # the program samples: a fresh key for this call
            inputs.append(compiled_call_key(inputs[0].device if inputs else cpu, "torch.export's module()"))
        outs = self._program.call(*inputs)
        user_inputs = [s.arg.name for s in self.graph_signature.input_specs if s.kind is InputKind.USER_INPUT]
        writes = [s for s in self.graph_signature.output_specs if s.kind is not OutputKind.USER_OUTPUT]
        with no_grad():
            for spec, new in zip(writes, outs):
                if spec.kind is OutputKind.BUFFER_MUTATION:
                    state_attribute(owner, spec.target).copy_(new.detach())
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


def state_attribute(root: Module, target: str) -> Tensor:
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



# ---------------------------------------------------------------- the rest of torch.export
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

