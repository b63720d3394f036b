"""`export(f, *example_args, dynamic_shapes=None)` and `Exported`, a function as a program that runs without it."""
from __future__ import annotations

import inspect
import threading
from typing import Any, Callable, Sequence

import numpy as np

from .. import dtypes as _dt
from ..core import FnxRuntimeError, FnxTypeError, FnxValueError, ShapedArray
from ..device import cpu
from ..ir import ClosedJaxpr, _Printer, eval_jaxpr
from ..tensor import Tensor, from_array
from ..transforms.compile import compile as _compile
from ..tree import TreeDef, tree_flatten, tree_unflatten
from . import archive
from .specialize import on_device, specialize
from .symbolic import SYMBOL, Dim
from .tracing import MAX_SYMBOLS, trace_symbolic

__all__ = ["export", "load", "Exported"]


class Exported:
    """A function exported as a program: its IR (`jaxpr`, with symbolic shapes), constants and calling convention.

    - `jaxpr`: an `fnx.ir.ClosedJaxpr` in the form `fnx.make_jaxpr` gives, whose constvars are bound to `consts`
      (numpy arrays, also `jaxpr.consts`); shape entries and integer params are ints or
      `fnx.export.symbolic.Dim` polynomials over `symbols`, and a scalar literal may be a `DimLiteral` (a
      dimension as a value); it holds no call primitives (compiled calls, custom_jvp and checkpoint bodies are
      inlined).
    - `in_avals` / `out_avals`: the flat inputs' and outputs' abstract values (shapes may hold Dims);
      `in_tree` / `out_tree`: the pytree structures of the arguments (a tuple) and of the result.
    - `symbols`: the symbolic dimensions' names, in the order they first appear in the inputs.
    - `call(*args)` runs it, `as_text()` prints it, `save(path)` writes an archive that `fnx.export.load` reads,
      `save_c(folder, name)` writes it as standalone C.
    """

    def __init__(self, jaxpr: ClosedJaxpr, in_tree: TreeDef, out_tree: TreeDef, symbols: tuple,
                 symbol_examples: dict, arg_names: Sequence[str] = (), name: str = "f"):
        self.jaxpr, self.in_tree, self.out_tree = jaxpr, in_tree, out_tree
        self.symbols, self.symbol_examples = tuple(symbols), dict(symbol_examples)
        self.arg_names, self.name = tuple(arg_names), name
        self._labels = _leaf_labels(in_tree, self.arg_names)   # for messages: "argument 'params['w']'"
        self._runners: dict[tuple, Callable] = {}
        self._device_consts: dict = {}
        self._lock = threading.Lock()

    @property
    def consts(self) -> list:
        """The program's constants (numpy arrays), bound to `jaxpr`'s constvars."""
        return self.jaxpr.consts

    @property
    def in_avals(self) -> tuple:
        """The flat inputs' abstract values (`ShapedArray`s whose shapes may hold Dims)."""
        return tuple(v.aval for v in self.jaxpr.jaxpr.invars)

    @property
    def out_avals(self) -> tuple:
        """The flat outputs' abstract values."""
        return tuple(a.aval for a in self.jaxpr.jaxpr.outvars)

    def __repr__(self) -> str:
        ins = ", ".join(a.str_short() for a in self.in_avals)
        outs = ", ".join(a.str_short() for a in self.out_avals)
        return f"<fnx.export.Exported {self.name}({ins}) -> ({outs})>"

    def as_text(self) -> str:
        """The program in fnx's jaxpr text form, after a header line naming the function and its symbols."""
        head = f"# fnx.export of {self.name}" + (f"; symbolic dimensions: {', '.join(self.symbols)}"
                                                 if self.symbols else "")
        return head + "\n" + _Printer().jaxpr(self.jaxpr.jaxpr, indent=0)

    # ---------------------------------------------------------------- calling
    def call(self, *args) -> Any:
        """Run the program on `args` (the pytree structure it was exported with), compiled for the arguments'
        device; differentiable, batchable and compilable like any fnx function.

        The arguments are checked first: dtypes and static dimensions equal the exported ones, and each symbolic
        dimension takes one value across all the arguments.
        """
        leaves, tree = tree_flatten(args)
        if tree != self.in_tree:
            raise FnxTypeError(f"Exported.call({self.name}): the arguments have the structure {tree}, but the "
                               f"program was exported for {self.in_tree}")
        leaves = [x if isinstance(x, Tensor) else _as_tensor(x, self._labels[i]) for i, x in enumerate(leaves)]
        env = self._solve(leaves)
        device = leaves[0].device if leaves else cpu
        for i, x in enumerate(leaves):
            if x.device is not device:
                raise FnxValueError(f"Exported.call({self.name}): {self._labels[i]} is on {x.device} but "
                                    f"{self._labels[0]} on {device}; put every argument on one device")
        key = (tuple(sorted(env.items())), device)
        runner = self._runners.get(key)
        if runner is None:
            runner = self._runner(env, device)
        return tree_unflatten(self.out_tree, runner(*leaves))

    def _solve(self, leaves: list) -> dict:
        """The symbols' values from the arguments' shapes, after checking dtypes, ranks and static dimensions."""
        env: dict[str, int] = {}
        where: dict[str, str] = {}
        if len(leaves) != len(self.in_avals):
            raise FnxTypeError(f"Exported.call({self.name}): {len(leaves)} tensors given, the program takes "
                               f"{len(self.in_avals)}")
        for i, (x, aval) in enumerate(zip(leaves, self.in_avals)):
            label = self._labels[i]
            if x.dtype is not aval.dtype:
                raise FnxTypeError(f"Exported.call({self.name}): {label} has dtype {x.dtype.name}, the program "
                                   f"takes {aval.dtype.name} (convert it with .to({aval.dtype.name}))")
            if x.ndim != aval.ndim:
                raise FnxValueError(f"Exported.call({self.name}): {label} has shape {list(x.shape)}, the program "
                                    f"takes {aval.ndim} dimensions ({aval.str_short()})")
            for axis, (size, d) in enumerate(zip(x.shape, aval.shape)):
                if isinstance(d, Dim):
                    name = d.symbols[0]
                    if size < 1:
                        raise FnxValueError(f"Exported.call({self.name}): dimension {axis} of {label} is {size}, "
                                            f"but the symbolic dimension '{name}' is at least 1")
                    if name in env and env[name] != size:
                        raise FnxValueError(f"Exported.call({self.name}): dimension {axis} of {label} is {size}, "
                                            f"but symbol '{name}' is {env[name]} from {where[name]}; every "
                                            f"dimension named '{name}' must have one size")
                    env[name], where[name] = size, f"dimension {axis} of {label}"
                elif size != d:
                    raise FnxValueError(f"Exported.call({self.name}): dimension {axis} of {label} is {size}, but "
                                        f"the program was exported with the static size {d} there "
                                        f"({aval.str_short()}); declare it in dynamic_shapes to let it vary")
        return env

    def _runner(self, env: dict, device) -> Callable:
        """The compiled program for these symbol values on `device` (built once per sizes and device)."""
        with self._lock:
            consts = self._device_consts.get(device)
            if consts is None:
                consts = self._device_consts[device] = {}

            def const(a: np.ndarray) -> Tensor:
                t = consts.get(id(a))
                if t is None:
                    t = consts[id(a)] = on_device(from_array(a), device)
                return t

            try:
                concrete = specialize(self.jaxpr, env, device, const)
            except FnxRuntimeError as e:
                sizes = ", ".join(f"{k}={v}" for k, v in env.items())
                raise FnxRuntimeError(f"Exported.call({self.name}): the program cannot run at {sizes}: {e}") from e
            def program(*xs):
                return eval_jaxpr(concrete.jaxpr, concrete.consts, *xs)

            program.__name__ = program.__qualname__ = f"exported {self.name}"   # as compile's log names it
            runner = _compile(program)
            self._runners[(tuple(sorted(env.items())), device)] = runner
        return runner

    # ---------------------------------------------------------------- writing
    def save(self, path) -> None:
        """Write the program to `path` as an fnx.export archive (docs/export.md), atomically."""
        archive.save(self, path)

    def save_c(self, folder, name: str, embed_weights: bool = False) -> list[str]:
        """Write the program as standalone C99 into `folder` (`name.h`, `name.c`, the weights, a Makefile and a
        `main.c`) and return the paths written; see docs/export.md."""
        from .c_program import write_c   # the C generator loads its templates: only when C is asked for
        return write_c(self.jaxpr, self.consts, folder, name, embed_weights=embed_weights)


def load(path) -> Exported:
    """The program that `Exported.save` wrote to `path`. Loading never runs code from the file (docs/export.md
    lists what it checks); a damaged, foreign, newer or hostile file raises `UnpicklingError` saying why."""
    return Exported(*archive.read(path))


def _as_tensor(x, label: str) -> Tensor:
    if isinstance(x, np.ndarray):
        return from_array(x)
    raise FnxTypeError(f"Exported.call: {label} is a {type(x).__name__}; pass tensors (or numpy arrays)")


def _leaf_labels(in_tree: TreeDef, arg_names: Sequence[str]) -> list[str]:
    """"argument 'x'", "argument 'params['w']'", ...: each leaf of the arguments' tuple, by its argument's name
    (or position) and its path inside the argument."""
    labels = []
    for k, child in enumerate(in_tree.children):
        name = arg_names[k] if k < len(arg_names) else f"args[{k}]"
        labels += [f"argument '{name}{path}'" for path in _paths(child)]
    return labels


def _paths(tree: TreeDef, prefix: str = "") -> list[str]:
    """`['w'][0]`-style paths of a treedef's leaves, in flattening order."""
    if tree.kind is None:
        return [prefix]
    if isinstance(tree.aux, tuple) and len(tree.aux) == len(tree.children):
        keys = tree.aux   # dict and OrderedDict keys
    else:
        keys = range(len(tree.children))
    return [p for k, child in zip(keys, tree.children) for p in _paths(child, f"{prefix}[{k!r}]")]


# ---------------------------------------------------------------- export
def export(f: Callable, *example_args, dynamic_shapes=None) -> Exported:
    """Trace `f` on `example_args` (tensors, numpy arrays, or objects with `.shape` and `.dtype`, in pytrees) into
    an `Exported` program. `dynamic_shapes` names symbolic dimensions, by f's parameter names
    (`{"x": {0: "batch", 1: "seq"}}`) or by position (a tuple with one entry per argument); an entry is None
    (static), `{axis: name}` or a tuple with a name or None per axis for a tensor, or a pytree of those
    matching a pytree argument."""
    names = _parameter_names(f, len(example_args))
    per_arg = _dynamic_per_argument(dynamic_shapes, names, len(example_args))
    leaves, in_tree = tree_flatten(example_args)
    specs = []
    for i, arg in enumerate(example_args):
        specs += _leaf_specs(arg, per_arg[i], f"dynamic_shapes for argument '{names[i]}'")
    avals, examples, symbols = [], {}, []
    for k, (x, spec) in enumerate(zip(leaves, specs)):
        aval = _example_aval(x, k)
        shape = list(aval.shape)
        for axis, name in spec.items():
            if not -aval.ndim <= axis < aval.ndim:
                raise FnxValueError(f"fnx.export: dynamic_shapes names axis {axis} of an argument of shape "
                                    f"{list(aval.shape)}")
            axis %= aval.ndim
            size = aval.shape[axis]
            if name in examples and examples[name] != size:
                raise FnxValueError(f"fnx.export: the symbolic dimension '{name}' has the size {examples[name]} in "
                                    f"one example argument and {size} in another; give examples of equal size")
            if name not in examples:
                symbols.append(name)
            examples[name] = size
            shape[axis] = Dim.symbol(name)
        avals.append(ShapedArray(tuple(shape), aval.dtype, aval.device))
    if len(symbols) > MAX_SYMBOLS:
        raise NotImplementedError(f"fnx.export: {len(symbols)} symbolic dimensions ({', '.join(symbols)}); at most "
                                  f"{MAX_SYMBOLS} are supported")
    out_trees = []

    def flat_fun(*xs):
        out_leaves, out_tree = tree_flatten(f(*tree_unflatten(in_tree, list(xs))))
        out_trees.append(out_tree)
        return out_leaves

    closed = trace_symbolic(flat_fun, avals, examples)
    archive.encode_program(closed)   # raises here, not at save, for a parameter the format cannot hold
    if any(t != out_trees[0] for t in out_trees):
        raise FnxValueError("fnx.export: the function returns a different structure at different sizes")
    name = getattr(f, "__name__", type(f).__name__)
    return Exported(closed, in_tree, out_trees[0], tuple(symbols), examples, names, name)


def _parameter_names(f: Callable, n: int) -> list[str]:
    """The names of f's first `n` positional parameters ("args[i]" past those it names); a module's are those of
    its `forward`."""
    target = f.forward if callable(getattr(f, "forward", None)) else f
    try:
        params = [p for p in inspect.signature(target).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return [params[i].name if i < len(params) else f"args[{i}]" for i in range(n)]


def _dynamic_per_argument(dynamic_shapes, names: list[str], n: int) -> list:
    if dynamic_shapes is None:
        return [None] * n
    if isinstance(dynamic_shapes, dict):
        unknown = set(dynamic_shapes) - set(names)
        if unknown:
            raise FnxValueError(f"fnx.export: dynamic_shapes names {sorted(unknown)}, which are not parameters of "
                                f"the function (its positional parameters: {names})")
        return [dynamic_shapes.get(name) for name in names]
    if isinstance(dynamic_shapes, (tuple, list)):
        if len(dynamic_shapes) != n:
            raise FnxValueError(f"fnx.export: dynamic_shapes has {len(dynamic_shapes)} entries for {n} arguments")
        return list(dynamic_shapes)
    raise FnxTypeError(f"fnx.export: dynamic_shapes is a dict by parameter name or a tuple by position, not a "
                       f"{type(dynamic_shapes).__name__}")


def _is_leaf_spec(spec) -> bool:
    return spec is None or (isinstance(spec, dict) and all(isinstance(k, int) for k in spec)) or (
        isinstance(spec, (tuple, list)) and all(s is None or isinstance(s, str) for s in spec))


def _leaf_specs(arg, spec, where: str) -> list[dict]:
    """One {axis: symbol} per tensor leaf of `arg`, from the argument's dynamic_shapes entry."""
    leaves, tree = tree_flatten(arg)
    if spec is None:
        return [{} for _ in leaves]
    if tree.kind is None:   # a tensor argument
        if not _is_leaf_spec(spec):
            raise FnxTypeError(f"fnx.export: {where} is {spec!r}; a tensor's entry is {{axis: name}} or a tuple "
                               f"with a name or None per axis")
        items = spec.items() if isinstance(spec, dict) else enumerate(spec)
        out = {}
        for axis, name in items:
            if name is None:
                continue
            if not isinstance(name, str) or not SYMBOL.fullmatch(name):
                raise FnxValueError(f"fnx.export: {where} names a dimension {name!r}; a symbolic dimension's name "
                                    f"is an identifier such as 'batch'")
            out[axis] = name
        return [out]
    spec_leaves, spec_tree = tree_flatten(spec, is_leaf=_is_leaf_spec)
    if len(spec_leaves) != len(leaves):
        raise FnxValueError(f"fnx.export: {where} has the structure {spec_tree}, but the argument has {tree}; give "
                            f"one entry per tensor (None for static ones)")
    return [s for x, sp in zip(leaves, spec_leaves) for s in _leaf_specs(x, sp, where)]


def _example_aval(x, k: int) -> ShapedArray:
    if isinstance(x, Tensor):
        return ShapedArray(tuple(x.shape), x.dtype, x.device)
    if isinstance(x, np.ndarray):
        return ShapedArray(x.shape, _dt.from_numpy_dtype(x.dtype), cpu)
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        shape = tuple(x.shape)
        if not all(isinstance(s, (int, np.integer)) and s >= 0 for s in shape):
            raise FnxTypeError(f"fnx.export: example argument leaf {k} has the shape {shape}; give sizes as ints")
        return ShapedArray(tuple(int(s) for s in shape), _dt.as_dtype(x.dtype), cpu)
    raise FnxTypeError(f"fnx.export: example argument leaf {k} is a {type(x).__name__}; give tensors, numpy arrays "
                       f"or shape/dtype specs (objects with .shape and .dtype), and close over Python values "
                       f"(functools.partial)")
