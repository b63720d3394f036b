"""Code generation: one C expression emitter for both targets, Jinja2 templates for the kernel shells.

The per-primitive part is data: `EXPRESSIONS` maps a primitive name and an
operand class ("f" float32, "d" float64, "i" integers, "b" bool) to a C
expression over its operands `{0}`, `{1}`, `{2}`. Operands are always
names of earlier values or literals, so templates may repeat them. Calls
like `fnx_expf` go to the per-target prelude (templates/*_prelude.*.j2),
which is where the two targets differ: the C prelude makes float32 exp,
log, erf and pow correctly rounded through the double-precision libmvec
functions, CUDA uses its own float functions.

The shells (loops, indexing, the reduction skeleton) live in
templates/{c,cuda}_{elementwise,reduce}.*.j2 and read what `render` computes:
buffers, runtime sizes and strides (`meta`), index expressions and statements.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import numpy as np

from .fusion import Kernel, Node

__all__ = ["EXPRESSIONS", "C_TYPES", "emittable", "render", "render_module", "prelude", "GeneratedKernel"]

C_TYPES = {"float32": "float", "float64": "double", "bool": "unsigned char", "uint8": "unsigned char",
           "int8": "signed char", "int16": "short", "int32": "int", "int64": "long long"}
_CLASS = {"float32": "f", "float64": "d", "bool": "b", "uint8": "i", "int8": "i", "int16": "i", "int32": "i",
          "int64": "i"}
_SHORT = {"float32": "f32", "float64": "f64", "bool": "b8", "uint8": "u8", "int8": "i8", "int16": "i16",
          "int32": "i32", "int64": "i64"}


def _libm(f: str) -> dict:
    """A libm function: float32 goes through the double version (see the C prelude)."""
    return {"f": f"fnx_{f}f({{0}})", "d": f"{f}({{0}})"}


def _all(expr: str, classes: str = "fdib") -> dict:
    return {c: expr for c in classes}


_IREM = "({1} == 0 || {1} == -1 ? 0 : {0} % {1} + ({0} % {1} != 0 && ({0} % {1} < 0) != ({1} < 0) ? {1} : 0))"
_IFLOORDIV = ("({1} == 0 ? 0 : {1} == -1 ? -{0} : "
              "{0} / {1} - ({0} % {1} != 0 && ({0} % {1} < 0) != ({1} < 0) ? 1 : 0))")

# primitive -> operand class -> C expression. "select" is keyed by its branches' class.
EXPRESSIONS: dict[str, dict[str, str]] = {
    "neg": _all("(-{0})", "fdi"),
    "exp": _libm("exp"), "exp2": _libm("exp2"), "expm1": _libm("expm1"), "log": _libm("log"),
    "log2": _libm("log2"), "log10": _libm("log10"), "log1p": _libm("log1p"),
    "sqrt": {"f": "sqrtf({0})", "d": "sqrt({0})"},
    "sin": _libm("sin"), "cos": _libm("cos"), "tan": _libm("tan"), "tanh": _libm("tanh"),
    "sinh": _libm("sinh"), "cosh": _libm("cosh"), "asin": _libm("asin"), "acos": _libm("acos"),
    "atan": _libm("atan"),
    "sigmoid": {"f": "fnx_sigmoidf({0})", "d": "fnx_sigmoid({0})"},
    "erf": _libm("erf"),
    "abs": {"f": "fabsf({0})", "d": "fabs({0})", "i": "({0} < 0 ? -{0} : {0})", "b": "{0}"},
    "sign": {"f": "fnx_signf({0})", "d": "fnx_sign({0})", "i": "(({0} > 0) - ({0} < 0))"},
    "floor": {"f": "floorf({0})", "d": "floor({0})"}, "ceil": {"f": "ceilf({0})", "d": "ceil({0})"},
    "trunc": {"f": "truncf({0})", "d": "trunc({0})"},
    "round": {"f": "rintf({0})", "d": "rint({0})"},     # half to even, like numpy
    "not": _all("(!{0})"),
    "isnan": _all("({0} != {0})", "fd"),
    "add": {**_all("({0} + {1})", "fdi"), "b": "({0} | {1})"},
    "sub": _all("({0} - {1})", "fdi"),
    "mul": {**_all("({0} * {1})", "fdi"), "b": "({0} & {1})"},
    "div": _all("({0} / {1})", "fd"),
    "pow": {"f": "fnx_powf({0}, {1})", "d": "pow({0}, {1})"},
    "max": {"f": "fnx_maxf({0}, {1})", "d": "fnx_max({0}, {1})", "i": "({0} > {1} ? {0} : {1})", "b": "({0} | {1})"},
    "min": {"f": "fnx_minf({0}, {1})", "d": "fnx_min({0}, {1})", "i": "({0} < {1} ? {0} : {1})", "b": "({0} & {1})"},
    "atan2": {"f": "fnx_atan2f({0}, {1})", "d": "atan2({0}, {1})"},
    "rem": {"f": "fnx_remf({0}, {1})", "d": "fnx_rem({0}, {1})", "i": _IREM},
    "floordiv": {"f": "fnx_floordivf({0}, {1})", "d": "fnx_floordiv({0}, {1})", "i": _IFLOORDIV},
    "eq": _all("({0} == {1})"), "ne": _all("({0} != {1})"), "lt": _all("({0} < {1})"),
    "le": _all("({0} <= {1})"), "gt": _all("({0} > {1})"), "ge": _all("({0} >= {1})"),
    "and": {"b": "({0} & {1})"}, "or": {"b": "({0} | {1})"}, "xor": {"b": "({0} ^ {1})"},
    "select": _all("({0} ? {1} : {2})"),
    "convert": _all("{0}"),   # the cast is the declaration's type; conversion to bool is special-cased
}

# Reductions: monoid -> (identity per class, how a partial result absorbs a value).
_IDENTITY = {"add": {"f": "0.0f", "d": "0.0", "i": "0", "b": "0"},
             "mul": {"f": "1.0f", "d": "1.0", "i": "1", "b": "1"},
             "max": {"f": "(-FNX_INF_F)", "d": "(-FNX_INF_D)", "b": "0"},
             "min": {"f": "FNX_INF_F", "d": "FNX_INF_D", "b": "1"}}
_INT_LIMITS = {"uint8": (0, 255), "int8": (-128, 127), "int16": (-32768, 32767), "int32": (-2 ** 31, 2 ** 31 - 1),
               "int64": (-2 ** 63, 2 ** 63 - 1)}
_REDUCE_PRIMS = {"sum": "add", "reduce_prod": "mul", "reduce_max": "max", "reduce_min": "min"}


def _operand_class(eqn) -> str | None:
    return _CLASS.get(eqn.inputs[-1].aval.dtype.name)


def emittable(eqn) -> bool:
    """Whether codegen can express this elementwise or reduction equation (primitive and dtypes known)."""
    names = [a.aval.dtype.name for a in eqn.inputs] + [v.aval.dtype.name for v in eqn.outvars]
    if any(n not in _CLASS for n in names):
        return False
    name = eqn.prim.name
    if name in _REDUCE_PRIMS:
        return True
    return _operand_class(eqn) in EXPRESSIONS.get(name, {})


# Values worth keeping in a per-row scratch buffer rather than recomputing in a later loop over the cols.
_EXPENSIVE = frozenset({"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "tanh",
                        "sinh", "cosh", "asin", "acos", "atan", "atan2", "erf", "pow", "sigmoid", "rem",
                        "floordiv"})


def _col_closure(roots: list[Node]) -> set:
    """ids of the col-level nodes that computing `roots` inside a loop over the cols needs."""
    seen, stack = set(), [r for r in roots if r.level == "col"]
    while stack:
        n = stack.pop()
        if id(n) not in seen:
            seen.add(id(n))
            stack.extend(a for a in n.args if a.level == "col")
    return seen


# ---------------------------------------------------------------- literals
def literal(value, dtype) -> str:
    """A C literal of `dtype` with exactly `value` (shortest round-trip decimal for floats)."""
    name = dtype.name
    v = np.asarray(value).astype(dtype.np).item()
    if name in ("float32", "float64"):
        suffix, tag = ("f", "F") if name == "float32" else ("", "D")
        if math.isnan(v):
            return f"FNX_NAN_{tag}"
        if math.isinf(v):
            return f"FNX_INF_{tag}" if v > 0 else f"(-FNX_INF_{tag})"
        text = str(np.float32(v)) if name == "float32" else repr(float(v))
        return f"{text}{suffix}" if v >= 0 else f"({text}{suffix})"
    if name == "bool":
        return "1" if v else "0"
    if name == "int64" and v == -2 ** 63:
        return "(-9223372036854775807LL - 1)"
    return f"(({C_TYPES[name]}){int(v)}{'LL' if name == 'int64' else ''})"


# ---------------------------------------------------------------- templates
_ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(str(Path(__file__).parent / "templates")),
                          undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                          keep_trailing_newline=True)

# Math functions with SIMD variants in glibc's libmvec, declared `omp declare simd` when it is linked.
SIMD_FUNCTIONS = ("exp", "log", "erf", "pow", "exp2", "expm1", "log2", "log10", "log1p", "sin", "cos", "tan",
                  "tanh", "sinh", "cosh", "asin", "acos", "atan", "atan2")
_BINARY_MATH = ("pow", "atan2")


def prelude(target: str, *, simd: bool = True, data_offset: int = 16) -> str:
    """The target's prelude: includes, macros, math helpers (`simd`: declare libmvec's SIMD variants)."""
    return _ENV.get_template(f"{target}_prelude.{_EXT[target]}.j2").render(
        math_functions=SIMD_FUNCTIONS, binary_math=_BINARY_MATH, simd=simd, data_offset=data_offset)


def render_module(kernels: list["GeneratedKernel"], target: str, *, simd: bool = True, data_offset: int = 16) -> str:
    """One translation unit: the prelude followed by each distinct kernel once."""
    unique = {k.name: k.source for k in kernels}
    return prelude(target, simd=simd, data_offset=data_offset) + "".join(unique.values())


_EXT = {"c": "c", "cuda": "cu"}


@dataclass
class GeneratedKernel:
    """One rendered kernel: its name, target, source and the runtime values of its `meta` arguments."""

    name: str
    target: str
    source: str
    kernel: Kernel
    meta: list = field(default_factory=list)          # int values, in argument order
    n_buffers: int = 0

    def __repr__(self) -> str:
        return f"<kernel {self.name} ({self.target}), {self.n_buffers} buffers>"


def _stem(kernel: Kernel) -> str:
    """The readable part of a kernel's name: its kind, the first primitives it computes and its dtype."""
    kind = "reduce" if kernel.kind == "reduce" else "fused"
    ops = "_".join(kernel.ops[:4]) or ("copy" if kernel.inputs else "fill")
    return f"fnx_{kind}_{ops}_{_SHORT[kernel.outputs[0].aval.dtype.name]}"


def render(kernel: Kernel, target: str) -> GeneratedKernel:
    """Render one fused kernel for `target` ("c" or "cuda").

    The name ends in a short hash of the kernel's layout, so the same kernel gets the same name (and
    source, and cache entry) in every executable and for every size: sizes and strides are arguments.
    """
    ctx = _Context(kernel, target)
    layout = ctx.layout()
    digest = hashlib.sha256(json.dumps([target, layout], sort_keys=True).encode()).hexdigest()[:8]
    name = f"{_stem(kernel)}_{digest}"
    source = _ENV.get_template(f"{target}_{kernel.kind}.{_EXT[target]}.j2").render(k={**layout, "name": name})
    return GeneratedKernel(name, target, source, kernel, ctx.meta_values, len(kernel.inputs) + len(kernel.outputs))


# ---------------------------------------------------------------- the emitter
class _Context:
    """Names, runtime sizes/strides and statements of one kernel, for one target."""

    def __init__(self, kernel: Kernel, target: str):
        self.k, self.target = kernel, target
        self.meta_names: list[str] = []
        self.meta_values: list[int] = []
        self.names = {id(n): f"v{i}" for i, n in enumerate(kernel.nodes)}
        self.sizes = [self._meta(f"n{d}", s) for d, s in enumerate(kernel.sizes)]
        self.strides = []   # per access, per dim: None (0), "1" or a meta name
        self.offsets = []
        for a, acc in enumerate(kernel.accesses):
            self.offsets.append(self._meta(f"o{a}", acc.offset) if acc.offset else None)
            self.strides.append([None if s == 0 else "1" if s == 1 and d == len(kernel.sizes) - 1
                                 else self._meta(f"s{a}_{d}", s) for d, s in enumerate(acc.strides)])

    def _meta(self, name: str, value: int) -> str:
        self.meta_names.append(name)
        self.meta_values.append(int(value))
        return name

    # ---------------- buffers and indexing
    def buffers(self) -> list[dict]:
        k = self.k
        out = []
        for i, v in enumerate(k.inputs + k.outputs):
            is_in = i < len(k.inputs)
            out.append({"name": f"in{i}" if is_in else f"out{i - len(k.inputs)}", "const": is_in,
                        "ctype": C_TYPES[v.aval.dtype.name]})
        return out

    def buffer_name(self, access: int) -> str:
        b = self.k.accesses[access].buffer
        n_in = len(self.k.inputs)
        return f"in{b}" if b < n_in else f"out{b - n_in}"

    def offset_terms(self, a: int, dims: range, index: str) -> list[str]:
        """Terms of access `a`'s offset over kernel `dims`, each dim's index named `{index}{d}`."""
        return [f"{index}{d}" if s == "1" else f"{index}{d} * {s}" for d in dims
                if (s := self.strides[a][d]) is not None]

    def inner(self, a: int, j: str) -> str:
        """` + j * stride` of access `a` along the innermost dim (empty where it does not move)."""
        s = self.strides[a][-1]
        return "" if s is None else f" + {j}" if s == "1" else f" + {j} * {s}"

    # ---------------- statements
    def expr(self, node: Node, index_of) -> str:
        """The C expression of a non-load node over its operands' names."""
        args = [self.ref(a) for a in node.args]
        if node.op == "convert":
            if node.dtype.name == "bool":
                return f"({args[0]} != 0)"
            return f"({C_TYPES[node.dtype.name]}){args[0]}"
        cls = _CLASS[(node.args[-1].dtype if node.args else node.dtype).name]
        return EXPRESSIONS[node.op][cls].format(*args)

    def ref(self, node: Node) -> str:
        if node.op == "literal":
            return literal(node.params["value"], node.dtype)
        return self.names[id(node)]

    def statement(self, node: Node, index_of) -> str:
        ctype = C_TYPES[node.dtype.name]
        if node.op == "load":
            a = node.params["access"]
            rhs = f"{self.buffer_name(a)}[{index_of(a)}]"
        else:
            rhs = self.expr(node, index_of)
        return f"const {ctype} {self.names[id(node)]} = {rhs};"

    def statements(self, nodes: list[Node], index_of) -> list[str]:
        return [self.statement(n, index_of) for n in nodes if n.op not in ("literal", "reduce")]

    def store(self, access: int, node: Node, index_of) -> str:
        return f"{self.buffer_name(access)}[{index_of(access)}] = {self.ref(node)};"

    # ---------------- layouts for the templates
    def layout(self) -> dict:
        base = {"buffers": self.buffers(), "meta": self.meta_names, "sizes": self.sizes,
                "n_accesses": len(self.k.accesses)}
        if self.k.kind == "elementwise":
            return {**base, **self._elementwise()}
        return {**base, **self._reduce()}

    def _elementwise(self) -> dict:
        k = self.k
        rank = len(k.sizes)
        flat = rank == 1 or self.target == "cuda"
        if flat:   # one loop over the flat index (CUDA: unravelled per element)
            j = "i" if rank == 1 else None
            index_of = (lambda a: self._flat_index(a, j)) if rank == 1 else (lambda a: f"p{a}")
        else:      # rows in parallel, a vectorised loop along the last dim
            index_of = lambda a: f"r{a}{self.inner(a, 'j')}"
        body = self.statements(k.nodes, index_of) + [self.store(a, n, index_of) for a, n, _ in k.stores]
        return {"rank": rank, "body": body, "outer": self._unravel(range(rank - 1), "i"),
                "all_dims": self._unravel(range(rank), "i"),
                "row_offsets": [self._offset(a, range(rank - 1), "i") for a in range(len(k.accesses))],
                "flat_offsets": [self._offset(a, range(rank), "i") for a in range(len(k.accesses))],
                "total": " * ".join(self.sizes)}

    def _flat_index(self, a: int, j: str) -> str:
        off = self.offsets[a]
        step = self.inner(a, j)
        if off is None:
            return step[3:] if step else "0"
        return f"{off}{step}"

    def _offset(self, a: int, dims: range, index: str) -> str:
        terms = ([self.offsets[a]] if self.offsets[a] else []) + self.offset_terms(a, dims, index)
        return " + ".join(terms) if terms else "0"

    def _unravel(self, dims: range, index: str) -> list[dict]:
        """Innermost first: the index of each dim, peeled off a flat counter by % and / (`used`: some access moves)."""
        return [{"index": f"{index}{d}", "size": self.sizes[d], "used": any(st[d] is not None for st in self.strides)}
                for d in reversed(dims)]

    def _reduce(self) -> dict:
        k = self.k
        nr, rank = k.n_rows, len(k.sizes)
        cols = range(nr, rank)
        col_outer = range(nr, rank - 1)
        row_index = lambda a: f"r{a}"
        if self.target == "cuda":
            col_index = lambda a: f"c{a}"            # per element: row base + unravelled col offset
        elif len(col_outer) == 0:
            col_index = lambda a: f"r{a}{self.inner(a, 'j')}"
        else:
            col_index = lambda a: f"c{a}{self.inner(a, 'j')}"
        col_linear = "j" if not col_outer else f"co * {self.sizes[-1]} + j"
        steps, emitted = [], set()
        spilled: dict[int, str] = {}     # node id -> per-thread scratch row holding its values (C only)
        pending = {id(p): _col_closure([p.args[0]]) for p in k.phases}
        col_stores = [(a, n) for a, n, level in k.stores if level == "col"]
        pending["map"] = _col_closure([n for _, n in col_stores])

        def code(line: str) -> None:
            if steps and steps[-1]["kind"] == "code":
                steps[-1]["lines"].append(line)
            else:
                steps.append({"kind": "code", "lines": [line]})

        def need_row(node: Node) -> None:
            if id(node) in emitted or node.op == "literal":
                return
            emitted.add(id(node))
            if node.op == "reduce":
                run_loop(id(node), [node.args[0]], lambda body, index: self._phase(node, body, self.ref(node.args[0])))
                return
            for a in node.args:
                need_row(a)
            code(self.statement(node, row_index))

        def run_loop(key, roots: list[Node], make) -> None:
            """Emit one loop over the cols: row-level operands first, spilled values reloaded, new ones spilled."""
            del pending[key]
            order, seen = [], set()

            def visit(n: Node) -> None:
                if id(n) in seen:
                    return
                seen.add(id(n))
                if n.level != "col":
                    need_row(n)
                elif id(n) in spilled:
                    order.append(("reload", n))
                else:
                    for a in n.args:
                        visit(a)
                    order.append(("compute", n))

            for r in roots:
                visit(r)
            used: set[int] = set()

            def index(a: int) -> str:
                used.add(a)
                return col_index(a)

            body = []
            for how, n in order:
                if how == "reload":
                    body.append(f"const {C_TYPES[n.dtype.name]} {self.ref(n)} = {spilled[id(n)]}[{col_linear}];")
                    continue
                body += self.statements([n], index)
                later = any(id(n) in c for c in pending.values())
                if self.target == "c" and n.op in _EXPENSIVE and later:
                    spilled[id(n)] = f"sc_{self.ref(n)}"
                    body.append(f"{spilled[id(n)]}[{col_linear}] = {self.ref(n)};")
            step = make(body, index)
            step["col_offsets"] = [{"a": a, "outer": " + ".join(self.offset_terms(a, col_outer, "c_")) or "0",
                                    "all": " + ".join(self.offset_terms(a, cols, "c_")) or "0"} for a in sorted(used)]
            steps.append(step)

        for node in k.phases:
            need_row(node)
        for a, n in [(a, n) for a, n, level in k.stores if level == "row"]:
            need_row(n)
            store = self.store(a, n, row_index)
            code(store if self.target == "c" else f"if (threadIdx.x == 0) {store}")   # CUDA: one thread per row
        if col_stores:
            run_loop("map", [n for _, n in col_stores],
                     lambda body, index: {"kind": "map", "body": body + [self.store(a, n, index) for a, n in col_stores]})
        accesses = range(len(k.accesses))
        scratch = [{"name": name, "ctype": C_TYPES[n.dtype.name]} for n in k.nodes
                   if (name := spilled.get(id(n))) is not None]
        return {"n_rows": nr, "rows": " * ".join(self.sizes[:nr]), "cols": " * ".join(self.sizes[nr:]),
                "inner": self.sizes[-1], "col_outer": " * ".join(self.sizes[d] for d in col_outer) or None,
                "row_dims": self._unravel(range(nr), "i"), "col_dims": self._unravel(col_outer, "c_"),
                "all_col_dims": self._unravel(cols, "c_"),
                "row_offsets": [self._offset(a, range(nr), "i") for a in accesses],
                "steps": steps, "scratch": scratch}

    def _phase(self, node: Node, body: list[str], value: str) -> dict:
        """One reduction loop: accumulator types, identity, update and combine for the node's monoid."""
        monoid, name = node.params["monoid"], self.names[id(node)]
        dt = node.dtype.name
        cls = _CLASS[dt]
        ctype = C_TYPES[dt]
        acc_type = "double" if (dt == "float32" and monoid == "add" and self.target == "c") else ctype
        if cls == "i" and monoid in ("max", "min"):
            lo, hi = _INT_LIMITS[dt]
            init = literal(lo if monoid == "max" else hi, node.dtype)
        else:
            init = _IDENTITY[monoid][cls]
        nan_check = cls in "fd" and monoid in ("max", "min")
        if monoid == "add":
            update, op = "{p} = {p} + {v};", "+"
        elif monoid == "mul":
            update, op = "{p} = {p} * {v};", "*"
        elif cls == "b":
            update, op = ("{p} = {p} | {v};", "|") if monoid == "max" else ("{p} = {p} & {v};", "&")
        else:
            cmp = ">" if monoid == "max" else "<"
            update, op = f"{{p}} = {{v}} {cmp} {{p}} ? {{v}} : {{p}};", monoid
        return {"kind": "phase", "name": name, "ctype": ctype, "acc_type": acc_type, "init": init,
                "body": body, "value": value, "absorb": update.format(p=f"p_{name}", v=value),
                "combine": update.format(p=f"a_{name}", v=f"p_{name}"),
                "merge": update.format(p=f"p_{name}", v=f"q_{name}"), "op": op, "nan": nan_check,
                "shuffle_type": ctype if ctype in ("float", "double", "long long", "int") else "int"}
