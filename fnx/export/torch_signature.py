"""torch.export's graph signature: what each input and output of an exported program is (a parameter, a buffer,
a lifted constant tensor, a user input; a buffer's new value, a user output), named as PyTorch names them
(`p_fc_weight` for the parameter `fc.weight`, `b_bn_running_mean`, `c_scale`, the forward's argument names)."""
from __future__ import annotations

import dataclasses
import enum
from typing import Any

__all__ = ["InputKind", "OutputKind", "TensorArgument", "ConstantArgument", "InputSpec", "OutputSpec",
           "ExportGraphSignature"]


class InputKind(enum.Enum):
    USER_INPUT = 1
    PARAMETER = 2
    BUFFER = 3
    CONSTANT_TENSOR = 4
    CUSTOM_OBJ = 5
    TOKEN = 6


class OutputKind(enum.Enum):
    USER_OUTPUT = 1
    LOSS_OUTPUT = 2
    BUFFER_MUTATION = 3
    PARAMETER_MUTATION = 4
    GRADIENT_TO_PARAMETER = 5
    GRADIENT_TO_USER_INPUT = 6
    USER_INPUT_MUTATION = 7
    TOKEN = 8


@dataclasses.dataclass
class TensorArgument:
    """A tensor input or output of the graph, by its name there."""

    name: str


@dataclasses.dataclass
class ConstantArgument:
    """A non-tensor user input (an int, a flag), specialized to its example value."""

    name: str
    value: Any


@dataclasses.dataclass
class InputSpec:
    kind: InputKind
    arg: TensorArgument | ConstantArgument
    target: str | None
    persistent: bool | None = None

    def __str__(self) -> str:
        target = "" if self.target is None else f" target={self.target!r}"
        persistent = "" if self.persistent is None else f" persistent={self.persistent}"
        return f"{self.arg.name}: {self.kind.name}{target}{persistent}"


@dataclasses.dataclass
class OutputSpec:
    kind: OutputKind
    arg: TensorArgument | ConstantArgument
    target: str | None

    def __str__(self) -> str:
        target = "" if self.target is None else f" target={self.target!r}"
        return f"{self.arg.name}: {self.kind.name}{target}"


@dataclasses.dataclass
class ExportGraphSignature:
    """The graph's inputs in order (parameters, buffers, constant tensors, then user inputs) and outputs (buffer
    mutations, then user outputs), with the lookups PyTorch programs read (`inputs_to_parameters`, ...)."""

    input_specs: list[InputSpec]
    output_specs: list[OutputSpec]

    def _inputs(self, kind: InputKind) -> dict[str, str]:
        return {s.arg.name: s.target for s in self.input_specs if s.kind is kind}

    @property
    def parameters(self) -> tuple[str, ...]:
        return tuple(self._inputs(InputKind.PARAMETER).values())

    @property
    def buffers(self) -> tuple[str, ...]:
        return tuple(self._inputs(InputKind.BUFFER).values())

    @property
    def non_persistent_buffers(self) -> tuple[str, ...]:
        return tuple(s.target for s in self.input_specs if s.kind is InputKind.BUFFER and s.persistent is False)

    @property
    def lifted_tensor_constants(self) -> tuple[str, ...]:
        return tuple(self._inputs(InputKind.CONSTANT_TENSOR).values())

    @property
    def lifted_custom_objs(self) -> tuple[str, ...]:
        return ()

    @property
    def user_inputs(self) -> tuple:
        return tuple(s.arg.name if isinstance(s.arg, TensorArgument) else s.arg.value
                     for s in self.input_specs if s.kind is InputKind.USER_INPUT)

    @property
    def user_outputs(self) -> tuple:
        return tuple(s.arg.name for s in self.output_specs if s.kind is OutputKind.USER_OUTPUT)

    @property
    def inputs_to_parameters(self) -> dict[str, str]:
        return self._inputs(InputKind.PARAMETER)

    @property
    def inputs_to_buffers(self) -> dict[str, str]:
        return self._inputs(InputKind.BUFFER)

    @property
    def inputs_to_lifted_tensor_constants(self) -> dict[str, str]:
        return self._inputs(InputKind.CONSTANT_TENSOR)

    @property
    def inputs_to_lifted_custom_objs(self) -> dict[str, str]:
        return {}

    @property
    def buffers_to_mutate(self) -> dict[str, str]:
        return {s.arg.name: s.target for s in self.output_specs if s.kind is OutputKind.BUFFER_MUTATION}

    @property
    def parameters_to_mutate(self) -> dict[str, str]:
        return {}

    @property
    def user_inputs_to_mutate(self) -> dict[str, str]:
        return {s.arg.name: s.target for s in self.output_specs if s.kind is OutputKind.USER_INPUT_MUTATION}

    @property
    def backward_signature(self) -> None:
        return None

    @property
    def assertion_dep_token(self) -> None:
        return None

    @property
    def input_tokens(self) -> tuple:
        return ()

    @property
    def output_tokens(self) -> tuple:
        return ()

    def __str__(self) -> str:
        lines = ["", "# inputs", *map(str, self.input_specs), "", "# outputs", *map(str, self.output_specs), ""]
        return "\n".join(lines)
