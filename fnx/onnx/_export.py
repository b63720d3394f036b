"""`export(model, args, f, ...)`: a module or function as an ONNX model, and `ONNXProgram`, the result.

The model is traced by fnx.export's tracer (fnx/export/tracing.py: call bodies inlined, fused primitives
expanded, dynamic dimensions fitted as polynomials) with its parameters and buffers as inputs, so that they
become the ONNX graph's initializers under their state_dict names; each primitive of the program is then
written as ONNX nodes (fnx/onnx/_ops.py).
"""
from __future__ import annotations

import contextlib
import enum
import os
from typing import Any, Mapping, Sequence

import numpy as np

from .._version import __version__
from ..core import FnxTypeError, FnxValueError, ShapedArray
from ..device import cpu
from ..dtypes import from_numpy_dtype
from ..export.exported import _parameter_names
from ..export.primitives import exportable
from ..export.symbolic import SYMBOL, Dim
from ..export.tracing import MAX_SYMBOLS, trace_symbolic
from ..nn.module import Module
from ..nn.stateless import functional_call
from ..tensor import Tensor, from_array
from ..tree import tree_flatten, tree_unflatten
from ._graph import Graph, onnx_module, tensor_type
from ._ops import OPS
from .errors import OnnxExporterError, UnsupportedOperatorError

__all__ = ["export", "ONNXProgram", "TrainingMode", "OperatorExportTypes", "is_in_onnx_export", "DEFAULT_OPSET",
           "OPSETS"]

DEFAULT_OPSET = 17
OPSETS = range(17, 22)   # the opsets whose operators _ops.py writes

_exporting = [False]

# primitives without an ONNX form -> the PyTorch operations that produce them (for the error message)
_SOURCES = {"random_bits": "random draws (torch.rand*, dropout in training mode)",
            "random_uniform": "random draws (torch.rand*, dropout in training mode)",
            "cond": "torch.cond", "while_loop": "torch.while_loop", "scan": "fnx.scan / torch.func loops",
            "searchsorted": "torch.searchsorted / torch.bucketize",
            "atan2": "torch.atan2", "window_put": "max pooling's gradient or F.max_unpool"}


def _source(name: str) -> str | None:
    """The PyTorch operations that an fnx primitive without an ONNX form comes from, for the error message."""
    if name.startswith("linalg_"):
        return "torch.linalg"
    if name.endswith(("_backward", "_vjp", "_grad")):
        return "a gradient: export the forward pass"
    return _SOURCES.get(name)


class TrainingMode(enum.IntEnum):
    """The module mode to export in: EVAL (the default: dropout off, batch norm's running statistics),
    PRESERVE (the module's current mode) or TRAINING."""
    EVAL = 0
    PRESERVE = 1
    TRAINING = 2


class OperatorExportTypes(enum.IntEnum):
    """How the legacy exporter wrote operators ONNX lacks; fnx writes ONNX operators only (ONNX)."""
    ONNX = 0
    ONNX_ATEN = 1
    ONNX_ATEN_FALLBACK = 2
    ONNX_FALLTHROUGH = 3


def is_in_onnx_export() -> bool:
    """Whether torch.onnx.export is tracing a model right now (code may branch on it)."""
    return _exporting[0]


class ONNXProgram:
    """An exported ONNX model: `model_proto` (an onnx.ModelProto), `save(path)`, and calling it runs the model
    with onnxruntime (when installed) on fnx tensors, returning fnx tensors."""

    def __init__(self, model_proto, input_names: Sequence[str], weights: Sequence[str]):
        self._proto = model_proto
        self._input_names, self._weights = list(input_names), set(weights)
        self._session = None
        self.exported_program = None

    @property
    def model_proto(self):
        """The model as an `onnx.ModelProto` (weights included)."""
        return self._proto

    def __repr__(self) -> str:
        ins = ", ".join(i.name for i in self._proto.graph.input)
        outs = ", ".join(o.name for o in self._proto.graph.output)
        return f"ONNXProgram(opset {self._proto.opset_import[0].version}: ({ins}) -> ({outs}))"

    def save(self, destination, *, include_initializers: bool = True, keep_initializers_as_inputs: bool = False,
             external_data: bool | None = None) -> None:
        """Write the model to `destination` (a path or a binary file). With `external_data` the initializers go
        to a file named `destination` + ".data" beside it; `include_initializers=False` leaves the weights (the
        parameters and buffers) out; `keep_initializers_as_inputs` also lists them as graph inputs (so they can
        be fed at run time)."""
        onnx = onnx_module()
        proto = onnx.ModelProto()
        proto.CopyFrom(self._proto)
        weights = [t for t in proto.graph.initializer if t.name in self._weights]
        if keep_initializers_as_inputs:
            proto.graph.input.extend(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                                     for t in weights)
        if not include_initializers:
            kept = [t for t in proto.graph.initializer if t.name not in self._weights]
            del proto.graph.initializer[:]
            proto.graph.initializer.extend(kept)
        if external_data and not isinstance(destination, (str, os.PathLike)):
            raise TypeError("ONNXProgram.save: external_data=True needs a file path as the destination, got a "
                            f"{type(destination).__name__}")
        if isinstance(destination, (str, os.PathLike)):
            path = os.fspath(destination)
            if external_data:
                location = os.path.basename(path) + ".data"
                onnx.save_model(proto, path, save_as_external_data=True, all_tensors_to_one_file=True,
                                location=location, size_threshold=0)
            else:
                onnx.save_model(proto, path)
        else:
            destination.write(proto.SerializeToString())

    def initialize_inference_session(self, initializer=None) -> None:
        """Create the onnxruntime session that calls run in (`initializer(model_bytes)`, by default
        onnxruntime.InferenceSession on the CPU)."""
        if initializer is None:
            try:
                import onnxruntime
            except ImportError as e:
                raise ImportError("calling an ONNXProgram runs it with onnxruntime: pip install onnxruntime") from e
            options = onnxruntime.SessionOptions()
            options.log_severity_level = 3   # errors only, as PyTorch's ONNXProgram runs it
            initializer = lambda model: onnxruntime.InferenceSession(model, options,
                                                                     providers=["CPUExecutionProvider"])
        self._session = initializer(self._proto.SerializeToString())

    def release(self) -> None:
        """Drop the inference session (its memory); the next call makes a new one."""
        self._session = None

    def __call__(self, *args, **kwargs) -> tuple:
        """Run the model with onnxruntime on the tensors among `args` and `kwargs` (the structure the model was
        exported with); the outputs as a flat tuple of fnx tensors."""
        leaves = [x for x in tree_flatten((args, kwargs))[0] if isinstance(x, (Tensor, np.ndarray))]
        if len(leaves) != len(self._input_names):
            raise FnxValueError(f"ONNXProgram: {len(leaves)} tensors given, the model takes "
                                f"{len(self._input_names)} ({', '.join(self._input_names)})")
        if self._session is None:
            self.initialize_inference_session()
        feeds = {name: (x.numpy(force=True) if isinstance(x, Tensor) else x)
                 for name, x in zip(self._input_names, leaves)}
        return tuple(from_array(np.asarray(o)) for o in self._session.run(None, feeds))


# ---------------------------------------------------------------- export
def export(model, args=(), f=None, *, kwargs: dict | None = None, verbose: bool | None = None,
           input_names: Sequence[str] | None = None, output_names: Sequence[str] | None = None,
           opset_version: int | None = None, dynamo: bool = True, external_data: bool = True,
           dynamic_shapes=None, custom_translation_table=None, report: bool = False, optimize: bool = True,
           verify: bool = False, profile: bool = False, dump_exported_program: bool = False,
           artifacts_dir=".", export_params: bool = True, keep_initializers_as_inputs: bool = False,
           dynamic_axes: Mapping | None = None, training: TrainingMode = TrainingMode.EVAL,
           operator_export_type=None, do_constant_folding: bool = True, custom_opsets=None,
           export_modules_as_functions: bool = False, autograd_inlining: bool = True) -> ONNXProgram | None:
    """Export `model` (an nn.Module or a function of tensors) called on `args` (and `kwargs`) to ONNX.

    The tensors among the arguments become the graph's inputs (named after forward's parameters, or
    `input_names`); other values are fixed in the graph. A module's parameters and buffers become initializers
    under their state_dict names; it is traced in eval mode unless `training` says otherwise (PyTorch 2.13
    honours `training` with dynamo=False only, and exports a module in training mode as it is, with a warning).
    `dynamic_axes` ({"x": {0: "batch"}}, by input or output name) or `dynamic_shapes` (by forward's parameter
    names or position, as torch.export takes them) make dimensions symbolic; sizes derived from them must be
    polynomials in them (a batch or sequence length, not a spatial size through a strided pooling). Returns an
    `ONNXProgram` (None with dynamo=False) and writes it to `f` when given (the weights to f + ".data" when
    `external_data` and f is a path). `opset_version` is 17 (the default; PyTorch 2.13's is 20) to 21;
    `optimize`, `do_constant_folding`, `verbose` and `autograd_inlining` change nothing here (fnx writes the
    traced program as it is).
    """
    opset = DEFAULT_OPSET if opset_version is None else opset_version
    if not isinstance(opset, int) or opset not in OPSETS:
        raise ValueError(f"torch.onnx.export: opset_version={opset_version!r} is not supported; fnx writes opsets "
                         f"{OPSETS.start} to {OPSETS.stop - 1}")
    unsupported = {"custom_translation_table": custom_translation_table is not None, "report": report,
                   "profile": profile, "dump_exported_program": dump_exported_program,
                   "custom_opsets": bool(custom_opsets),
                   "export_modules_as_functions": bool(export_modules_as_functions),
                   "operator_export_type": operator_export_type not in (None, OperatorExportTypes.ONNX)}
    for name, given in unsupported.items():
        if given:
            raise NotImplementedError(f"torch.onnx.export: {name} is not supported by fnx's ONNX exporter")
    if training not in tuple(TrainingMode):
        raise ValueError(f"torch.onnx.export: training must be a torch.onnx.TrainingMode, got {training!r}")
    if dynamic_axes is not None and dynamic_shapes is not None:
        raise ValueError("torch.onnx.export: give dynamic_shapes or dynamic_axes, not both")
    if dynamic_shapes and not dynamo:
        raise ValueError("torch.onnx.export: with dynamo=False, dynamic dimensions are given through dynamic_axes, "
                         "not dynamic_shapes")
    if not isinstance(args, tuple):
        args = (args,)
    kwargs = dict(kwargs or {})
    program = _export(model, args, kwargs, opset, input_names, output_names, dynamic_axes, dynamic_shapes, training)
    if verify:
        _verify(program, model, args, kwargs, training)
    if f is not None:
        program.save(f, include_initializers=export_params,
                     keep_initializers_as_inputs=keep_initializers_as_inputs,
                     external_data=external_data and isinstance(f, (str, os.PathLike)))
    return program if dynamo else None


@contextlib.contextmanager
def _mode(model, training: TrainingMode):
    """The module in the mode to export in, restored afterwards; also sets is_in_onnx_export()."""
    was = [(m, m.training) for m in model.modules()] if isinstance(model, Module) else []
    if was and training != TrainingMode.PRESERVE:
        model.train(training == TrainingMode.TRAINING)
    _exporting[0] = True
    try:
        yield
    finally:
        _exporting[0] = False
        for m, mode in was:
            m.training = mode


def _export(model, args: tuple, kwargs: dict, opset: int, input_names, output_names, dynamic_axes,
            dynamic_shapes, training) -> ONNXProgram:
    onnx = onnx_module()
    if not callable(model):
        raise FnxTypeError(f"torch.onnx.export: the model must be an nn.Module or a function, got a "
                           f"{type(model).__name__}")
    state = _state(model)
    leaves, in_tree = tree_flatten((args, kwargs))
    where = [i for i, x in enumerate(leaves) if isinstance(x, (Tensor, np.ndarray))]
    names = _input_names(model, args, kwargs, leaves, where, input_names)
    specs = _dynamic_specs(model, args, kwargs, leaves, where, names, dynamic_axes, dynamic_shapes)
    avals, examples, first_use = [], {}, {}
    for (name, t) in state:
        avals.append(ShapedArray(tuple(t.shape), t.dtype, cpu))
    for k, i in enumerate(where):
        x = leaves[i]
        dtype = x.dtype if isinstance(x, Tensor) else from_numpy_dtype(x.dtype)
        shape = list(x.shape)
        for axis, sym in specs[k].items():
            if not -len(shape) <= axis < len(shape):
                raise FnxValueError(f"torch.onnx.export: a dynamic axis {axis} of input '{names[k]}', which has "
                                    f"shape {list(x.shape)}")
            axis %= len(shape)
            if sym in examples and examples[sym] != shape[axis]:
                raise FnxValueError(f"torch.onnx.export: the dynamic dimension '{sym}' has the size {examples[sym]} "
                                    f"in one input and {shape[axis]} in '{names[k]}'; give examples of equal size")
            examples[sym] = shape[axis]
            first_use.setdefault(sym, (k, axis))
            shape[axis] = Dim.symbol(sym)
        avals.append(ShapedArray(tuple(shape), dtype, cpu))
    if len(examples) > MAX_SYMBOLS:
        raise NotImplementedError(f"torch.onnx.export: {len(examples)} dynamic dimensions; at most {MAX_SYMBOLS}")

    def flat_fun(*xs):
        params = {n: x for (n, _), x in zip(state, xs)}
        full = list(leaves)
        for i, x in zip(where, xs[len(state):]):
            full[i] = x
        call_args, call_kwargs = tree_unflatten(in_tree, full)
        out = functional_call(model, params, call_args, call_kwargs) if params else model(*call_args, **call_kwargs)
        outs, tree = tree_flatten(out)
        if not all(isinstance(o, Tensor) for o in outs):
            raise FnxTypeError(f"torch.onnx.export: the model returns {tree}, whose leaves must all be tensors")
        return outs

    with _mode(model, training):
        try:
            closed = trace_symbolic(flat_fun, avals, examples)
        except Exception as e:   # as PyTorch's exporter reports a failed torch.export
            raise OnnxExporterError(f"torch.onnx.export: tracing the model failed: {type(e).__name__}: {e}") from e
    return ONNXProgram(_model_proto(onnx, closed, state, names, first_use, output_names, dynamic_axes, opset),
                       names, [name for name, _ in state])


def _state(model) -> list[tuple[str, Tensor]]:
    """(state_dict name, tensor) of a module's parameters and buffers (a tied tensor once, under its first
    name); none for a function."""
    if not isinstance(model, Module):
        return []
    return list(model.named_parameters()) + [(n, b) for n, b in model.named_buffers() if b is not None]


def _input_names(model, args, kwargs, leaves, where, given) -> list[str]:
    """The graph inputs' names: forward's parameter names (with _0, _1, ... for each tensor of a nested
    argument) and kwargs' keys, or `given` (the first ones)."""
    params = _parameter_names(model, len(args))
    names = []
    for k, a in enumerate(args):
        inner = [x for x in tree_flatten(a)[0] if isinstance(x, (Tensor, np.ndarray))]
        base = params[k].replace("args[", "input_").replace("]", "")
        names += [base] if isinstance(a, (Tensor, np.ndarray)) else [f"{base}_{i}" for i in range(len(inner))]
    for key, v in kwargs.items():
        inner = [x for x in tree_flatten(v)[0] if isinstance(x, (Tensor, np.ndarray))]
        names += [key] if isinstance(v, (Tensor, np.ndarray)) else [f"{key}_{i}" for i in range(len(inner))]
    if given is not None:
        given = list(given)
        if len(given) > len(names):
            raise ValueError(f"torch.onnx.export: {len(given)} input_names for a model with {len(names)} tensor "
                             f"inputs")
        names[:len(given)] = given
    if len(set(names)) != len(names):
        raise ValueError(f"torch.onnx.export: the input names {names} repeat a name")
    return names


def _symbol_name(value, where: str) -> str:
    """A dynamic dimension's name from a string, an fnx.export Dim symbol or a torch.export.Dim-like object."""
    if isinstance(value, Dim) and value.is_symbol():
        value = str(value)
    elif not isinstance(value, str):
        value = getattr(value, "__name__", None)
    if not isinstance(value, str) or not SYMBOL.fullmatch(value):
        raise FnxValueError(f"torch.onnx.export: {where} names a dimension {value!r}; a dynamic dimension's name is "
                            f"an identifier such as 'batch'")
    return value


def _axes_spec(spec, name: str, where: str) -> dict[int, str]:
    """{axis: symbol} from a dynamic_axes entry (a dict, or a list of axes named NAME_dynamic_axes_i) or a
    dynamic_shapes entry (a dict or a per-axis tuple, None for static axes)."""
    if spec is None:
        return {}
    if isinstance(spec, Mapping):
        items = spec.items()
    elif isinstance(spec, (list, tuple)) and where == "dynamic_axes":
        items = [(axis, f"{name}_dynamic_axes_{i + 1}") for i, axis in enumerate(spec)]
    elif isinstance(spec, (list, tuple)):
        items = enumerate(spec)
    else:
        raise FnxTypeError(f"torch.onnx.export: {where} for '{name}' is {spec!r}; give {{axis: name}}")
    out = {}
    for axis, sym in items:
        if sym is None:
            continue
        if not isinstance(axis, int):
            raise FnxTypeError(f"torch.onnx.export: {where} for '{name}' has the axis {axis!r}; axes are ints")
        out[axis] = _symbol_name(sym, f"{where} for '{name}'")
    return out


def _dynamic_specs(model, args, kwargs, leaves, where, names, dynamic_axes, dynamic_shapes) -> list[dict]:
    """One {axis: symbol} per tensor input."""
    specs = [{} for _ in where]
    if dynamic_axes is not None:
        for key, spec in dynamic_axes.items():
            if key in names:
                specs[names.index(key)] = _axes_spec(spec, key, "dynamic_axes")
        return specs
    if dynamic_shapes is None:
        return specs
    params = _parameter_names(model, len(args))
    if isinstance(dynamic_shapes, Mapping):
        unknown = set(dynamic_shapes) - set(params) - set(kwargs)
        if unknown:
            raise FnxValueError(f"torch.onnx.export: dynamic_shapes names {sorted(unknown)}, which are not "
                                f"arguments of the model (its positional parameters: {params})")
        per_arg = [dynamic_shapes.get(p) for p in params] + [dynamic_shapes.get(k) for k in kwargs]
    elif isinstance(dynamic_shapes, (tuple, list)):
        if len(dynamic_shapes) != len(args) + len(kwargs):
            raise FnxValueError(f"torch.onnx.export: dynamic_shapes has {len(dynamic_shapes)} entries for "
                                f"{len(args) + len(kwargs)} arguments")
        per_arg = list(dynamic_shapes)
    else:
        raise FnxTypeError(f"torch.onnx.export: dynamic_shapes is a dict by parameter name or a tuple by position, "
                           f"not a {type(dynamic_shapes).__name__}")
    k = 0
    for a, spec in zip(list(args) + list(kwargs.values()), per_arg):
        tensors = [x for x in tree_flatten(a)[0] if isinstance(x, (Tensor, np.ndarray))]
        if isinstance(a, (Tensor, np.ndarray)):
            specs[k] = _axes_spec(spec, names[k], "dynamic_shapes")
        elif spec is not None:
            entries = tree_flatten(spec, is_leaf=lambda s: s is None or isinstance(s, Mapping))[0]
            if len(entries) != len(tensors):
                raise FnxValueError(f"torch.onnx.export: dynamic_shapes for '{names[k]}' has {len(entries)} "
                                    f"entries for {len(tensors)} tensors")
            for j, e in enumerate(entries):
                specs[k + j] = _axes_spec(e, names[k + j], "dynamic_shapes")
        k += len(tensors)
    return specs


# ---------------------------------------------------------------- writing the graph
def _model_proto(onnx, closed, state, names, first_use, output_names, dynamic_axes, opset: int):
    j = closed.jaxpr
    g = Graph(opset)
    helper = onnx.helper
    for (name, t), v in zip(state, j.invars):
        g.bind(v, g.initializer(t.numpy(force=True), name))
    inputs = []
    for k, (name, v) in enumerate(zip(names, j.invars[len(state):])):
        g.bind(v, name)
        inputs.append(helper.make_tensor_value_info(name, tensor_type(onnx, v.aval.dtype), _dims(v.aval.shape)))
    for sym, (k, axis) in first_use.items():
        g.symbol(sym, names[k], axis)
    for v, c in zip(j.constvars, closed.consts):
        g.bind(v, g.const(c, c.dtype))
    known = exportable()
    for e in j.eqns:
        if all(_empty(v.aval) for v in e.outvars):   # onnxruntime's shape inference trips on some empty results
            for v in e.outvars:
                g.bind(v, g.const(np.zeros(v.aval.shape, v.aval.dtype.np), v.aval.dtype.np))
            continue
        emit = OPS.get(e.prim.name)
        if emit is None:
            hint = _source(e.prim.name)
            raise UnsupportedOperatorError(
                f"torch.onnx.export: the model uses the fnx primitive '{e.prim.name}'"
                + (f" (from {hint})" if hint else "") + ", which fnx's ONNX exporter has no ONNX form for"
                + ("" if e.prim.name in known else " (it cannot be exported at all)"))
        outs = emit(g, e, [g.read(a) for a in e.inputs])
        for v, name in zip(e.outvars, [outs] if isinstance(outs, str) else outs):
            if name is not None:
                g.bind(v, name)
    outs = output_names or []
    if len(outs) > len(j.outvars):
        raise ValueError(f"torch.onnx.export: {len(outs)} output_names for a model with {len(j.outvars)} outputs")
    out_names = list(outs) + [f"output_{k}" for k in range(len(outs), len(j.outvars))]
    overlap = set(out_names) & set(names)
    if overlap:
        raise ValueError(f"torch.onnx.export: {sorted(overlap)} name both an input and an output")
    outputs = []
    for name, atom in zip(out_names, j.outvars):
        g.nodes.append(helper.make_node("Identity", [g.read(atom)], [name]))
        shape = _dims(atom.aval.shape)
        for axis, sym in _axes_spec((dynamic_axes or {}).get(name), name, "dynamic_axes").items():
            shape[axis] = sym
        outputs.append(helper.make_tensor_value_info(name, tensor_type(onnx, atom.aval.dtype), shape))
    used = {name for n in g.nodes for name in n.input}
    graph = helper.make_graph(g.nodes, "main_graph", inputs, outputs, [t for t in g.initializers if t.name in used])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="fnx",
                              producer_version=__version__)
    model.ir_version = min(model.ir_version, 10)   # onnxruntime 1.2x reads up to 10
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as e:
        raise OnnxExporterError(f"torch.onnx.export: the ONNX model fnx wrote fails onnx.checker: {e}") from e
    return model


def _empty(aval) -> bool:
    return any(isinstance(d, int) and d == 0 for d in aval.shape)


def _dims(shape) -> list:
    return [str(d) if isinstance(d, Dim) else d for d in shape]


def _verify(program: ONNXProgram, model, args, kwargs, training) -> None:
    """verify=True: the ONNX model run by onnxruntime gives the model's outputs (to float32 rounding)."""
    with _mode(model, training):
        expected = tree_flatten(model(*args, **kwargs))[0]
    got = program(*args, **kwargs)
    for k, (e, o) in enumerate(zip(expected, got)):
        e, o = e.numpy(force=True), o.numpy()
        if e.shape != o.shape or not np.allclose(o, e, rtol=1e-4, atol=1e-5, equal_nan=True):
            raise OnnxExporterError(f"torch.onnx.export(verify=True): output {k} of the ONNX model (shape "
                                    f"{list(o.shape)}) differs from the model's (shape {list(e.shape)})")
