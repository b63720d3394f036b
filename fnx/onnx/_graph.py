"""The ONNX graph being written: nodes, initializers, the values of jaxpr atoms, and sizes as int64 tensors.

A `Graph` turns a jaxpr's atoms into ONNX value names (a literal becomes a scalar initializer, a `DimLiteral` a
small computation) and writes nodes with fresh output names. Shapes and integer params of a program with
symbolic dimensions hold `Dim` polynomials; `ints` writes such a list as a 1-D int64 tensor, computing each
symbol from the shape of the input it first appears in (Shape, then Mul and Add for the polynomial).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..export.symbolic import Dim, DimLiteral
from ..ir import Literal


def onnx_module():
    """The `onnx` package, or an ImportError saying how to install it."""
    try:
        import onnx
    except ImportError as e:
        raise ImportError("torch.onnx.export (fnx.onnx) needs the `onnx` package: pip install fnx[onnx] "
                          "(or pip install onnx)") from e
    return onnx


class Graph:
    """Nodes and initializers of one ONNX graph under construction, for opset `opset`."""

    def __init__(self, opset: int):
        self.onnx = onnx_module()
        self.opset = opset
        self.nodes: list = []
        self.initializers: list = []
        self.values: dict[int, str] = {}      # id(Var) -> the ONNX value holding it
        self.symbols: dict[str, str] = {}     # symbol -> a 1-D int64 [1] value holding its size
        self._count = 0
        self._consts: dict[tuple, str] = {}

    def fresh(self, hint: str = "v") -> str:
        self._count += 1
        return f"onnx::{hint}_{self._count}"

    # ---------------------------------------------------------------- writing
    def node(self, op: str, inputs: Sequence[str], outputs: int = 1, **attrs) -> str | list[str]:
        """Append a node; its output name (a list of names when `outputs` > 1). Attributes that are None are
        left out."""
        names = [self.fresh(op) for _ in range(outputs)]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(self.onnx.helper.make_node(op, list(inputs), names, **attrs))
        return names[0] if outputs == 1 else names

    def initializer(self, array: np.ndarray, name: str) -> str:
        self.initializers.append(self.onnx.numpy_helper.from_array(np.array(array, order="C"), name))
        return name

    def const(self, value, dtype) -> str:
        """A constant initializer holding `value` as numpy dtype `dtype` (written once per value)."""
        array = np.asarray(value, dtype=dtype)
        key = (array.dtype.str, array.shape, array.tobytes())
        if key not in self._consts:
            self._consts[key] = self.initializer(array, self.fresh("const"))
        return self._consts[key]

    # ---------------------------------------------------------------- reading atoms
    def read(self, atom) -> str:
        """The ONNX value of a jaxpr atom (a variable, a literal or a symbolic literal)."""
        if isinstance(atom, DimLiteral):
            n = self.dim(atom.dim)
            if atom.reciprocal:
                n = self.node("Reciprocal", [self.node("Cast", [n], to=self.onnx.TensorProto.DOUBLE)])
            scalar = self.node("Reshape", [n, self.const([], np.int64)])
            return self.node("Cast", [scalar], to=tensor_type(self.onnx, atom.aval.dtype))
        if isinstance(atom, Literal):
            return self.const(atom.val.numpy(), atom.aval.dtype.np)
        return self.values[id(atom)]

    def bind(self, var, name: str) -> None:
        self.values[id(var)] = name

    # ---------------------------------------------------------------- sizes
    def symbol(self, name: str, value: str, axis: int) -> None:
        """Symbol `name` is dimension `axis` of the graph input `value` (the first place it appears)."""
        if name not in self.symbols:
            self.symbols[name] = self.node("Shape", [value], start=axis, end=axis + 1)

    def dim(self, d) -> str:
        """A 1-D int64 [1] value holding the size `d` (an int or a Dim)."""
        if not isinstance(d, Dim):
            return self.const([d], np.int64)
        total = None
        for monomial, coeff in d.terms.items():
            term = self.const([coeff], np.int64) if coeff != 1 or not monomial else None
            for name in monomial:
                term = self.symbols[name] if term is None else self.node("Mul", [term, self.symbols[name]])
            total = term if total is None else self.node("Add", [total, term])
        return total

    def ints(self, values: Sequence) -> str:
        """A 1-D int64 value holding `values` (ints and Dims): an initializer unless a Dim is among them."""
        if not any(isinstance(v, Dim) for v in values):
            return self.const(list(values), np.int64)
        return self.node("Concat", [self.dim(v) for v in values], axis=0)


# fnx dtype name -> onnx.TensorProto's name
_TYPES = {"float32": "FLOAT", "float64": "DOUBLE", "float16": "FLOAT16", "bfloat16": "BFLOAT16", "int8": "INT8",
          "int16": "INT16", "int32": "INT32", "int64": "INT64", "uint8": "UINT8", "uint16": "UINT16",
          "uint32": "UINT32", "uint64": "UINT64", "bool": "BOOL"}


def tensor_type(onnx, dtype) -> int:
    """onnx.TensorProto's code for an fnx dtype; NotImplementedError for those ONNX cannot hold (complex)."""
    name = _TYPES.get(dtype.name)
    if name is None:
        raise NotImplementedError(f"torch.onnx.export: fnx's ONNX exporter does not write {dtype.name} tensors")
    return getattr(onnx.TensorProto, name)
