"""Code generation: one emitter for every target, Jinja2 templates for the kernel shells.

The per-primitive part is the expression table (fnx/lowering/expressions.py);
the per-backend part is a `Target` (fnx/lowering/targets/): its type names,
its templates and the family of kernel shells it takes (`Target.gpu`).
`render` turns a fused `Kernel` into statements over named values, runtime
sizes and strides (`meta`) and index expressions, and hands them to the
target's shell template for the kernel's shape: templates/{c,cuda}_{elementwise,reduce}.*.j2,
plus {c,cuda}_reduce_columns.*.j2 for reductions over strided dims, and
c_reduce_stream.h.j2, the non-temporal stores of large row-kernel outputs. The per-target
preludes hold the math functions (templates/*_prelude.*.j2): on the CPU
float32 math goes through double precision except exp (fnx's own vectorised
version) and tanh (libmvec's), so results are within 1 ulp of exact; CUDA
uses its own float functions.
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import jinja2

from .._threefry import ROTATIONS
from ..core import Primitive
from .cache import cache_key, cached_text
from .expressions import CLASS, IDENTITY, INT_LIMITS, SHORT, emittable, expression
from .fusion import Kernel, Node
from .targets import Target, get_target, translation_unit

__all__ = ["emittable", "render", "render_module", "prelude", "math_prelude", "GeneratedKernel"]

def _in_group(node: Node, group: str) -> bool:
    """Whether the node computes a primitive of `group` (Primitive.GROUPS); loads, literals and reductions
    compute none."""
    prim = Primitive.registry.get(node.op)
    return prim is not None and group in prim.groups


def _column_mode(kernel: Kernel) -> bool:
    """Whether a reduction walks a strided dim while its rows are contiguous (a sum over the batch axis, say):
    then lanes run along the rows, and the loop over the reduced dims goes outside (no strided gathers)."""
    nr = kernel.n_rows
    if kernel.kind != "reduce" or nr == 0 or nr == len(kernel.sizes) or kernel.sizes[nr - 1] < 4:
        return False
    loads = {n.params["access"] for n in kernel.nodes if n.op == "load" and n.level == "col"}
    return any(kernel.accesses[a].strides[nr - 1] == 1 and kernel.accesses[a].strides[-1] not in (0, 1)
               for a in loads)


def _split_mode(kernel: Kernel) -> bool:
    """Whether a row kernel has too few rows to keep the threads busy but long contiguous rows (a full sum, say):
    then each row's blocks run in parallel and their partial results combine in block order (same numbers)."""
    nr = kernel.n_rows
    return (math.prod(kernel.sizes[:nr]) < _SPLIT_MAX_ROWS and len(kernel.sizes) == nr + 1
            and kernel.sizes[-1] >= _SPLIT_MIN_COLS)


_SPLIT_MAX_ROWS, _SPLIT_MIN_COLS = 8, 1 << 16
# C row kernels stream a per-element output of at least this many bytes past the cache (see `_streamed`): on a
# 2-core EPYC, layernorm rows took 0.64x the time with 16 MB outputs, 0.9x with 8 MB, and the same with 4 MB.
_STREAM_MIN_BYTES = 1 << 23


def _gpu_split(kernel: Kernel) -> bool:
    """GPU targets: whether a row kernel has too few rows to fill the GPU with one block per row, and reductions that
    need no other reduction's result, whose row-level results are all it writes (a sum and a max of one long
    vector, say): then several blocks share each row and the last to finish combines their partial results in
    block order (templates/cuda_reduce.cu.j2)."""
    nr = kernel.n_rows
    return (bool(kernel.phases) and all(level == "row" for _, _, level in kernel.stores)
            and not any(_needs_reduction(p.args[0]) for p in kernel.phases)
            and math.prod(kernel.sizes[:nr]) < _GPU_SPLIT_MAX_ROWS
            and math.prod(kernel.sizes[nr:]) >= _GPU_SPLIT_MIN_COLS)


def _needs_reduction(node: Node) -> bool:
    seen, stack = set(), [node]
    while stack:
        n = stack.pop()
        if n.op == "reduce":
            return True
        if id(n) not in seen:
            seen.add(id(n))
            stack.extend(n.args)
    return False


_GPU_SPLIT_MAX_ROWS, _GPU_SPLIT_MIN_COLS = 128, 1 << 14


def _shares_rows(kernel: Kernel, target: Target) -> bool:
    """Whether several threads (C) or blocks (GPU) share each row of a reduction kernel, the last combining their
    partial results: split mode. On the GPU a kernel in columns never splits; for C the row count and length
    decide even there (so donation, which asks, conservatively writes no output of such a kernel in place)."""
    if target.gpu:
        return not _column_mode(kernel) and _gpu_split(kernel)
    return _split_mode(kernel)


def _tile_dim(kernel: Kernel) -> int | None:
    """C elementwise kernels: the outer dim to tile together with the innermost one, or None for the plain loop.

    An input read transposed (unit stride along an outer dim `t`, a longer one along the innermost dim) takes a
    new cache line at every element of a row; with a power-of-two row stride all those lines fall into the same
    few cache sets and evict each other before the next row reads them again. Square tiles over `t` and the
    innermost dim reuse each line read across `_TILE` rows: on a 2-core EPYC, ReLU's backward select of W5
    ((512, 256) float32, both inputs transposed) took 320 us in rows, 85 us in tiles (untransposed: 27 us).
    Where several inputs are transposed: the dim most of them walk contiguously (the innermost on a tie)."""
    rank, n_in = len(kernel.sizes), len(kernel.inputs)
    if kernel.kind != "elementwise" or rank < 2:
        return None
    walked = [acc.strides.index(1) for acc in kernel.accesses
              if acc.buffer is not None and acc.buffer < n_in and acc.strides[-1] not in (0, 1)
              and 1 in acc.strides[:-1]]
    return max(walked, key=lambda t: (walked.count(t), t)) if walked else None


# Tile side in elements: 16 float32s fill a 64-byte cache line, and 16 lines per tile of a transposed operand
# stay in L1 even when its row stride maps them all to two cache sets (8 ways each).
_TILE = 16


def _col_closure(roots: list[Node]) -> set:
    """ids of the col-level nodes that computing `roots` inside a loop over the cols needs."""
    seen, stack = set(), [r for r in roots if r.level == "col"]
    while stack:
        n = stack.pop()
        if id(n) not in seen:
            seen.add(id(n))
            stack.extend(a for a in n.args if a.level == "col")
    return seen


# ---------------------------------------------------------------- templates
_ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(str(Path(__file__).parent / "templates")),
                          undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                          keep_trailing_newline=True)
# `{{ lines | block(8) }}` at the start of a template line: a macro's lines, indented, without the final newline.
_ENV.filters["block"] = lambda text, width: textwrap.indent(str(text).rstrip("\n"), " " * width)


def _render(template: str, **context) -> str:
    """`template` rendered with `context`. The text is kept in the disk cache, so a fresh process whose kernels are
    all cached compiles no template (most of a warm first call). Only rendered text is cached, checked like every
    entry: Jinja2's bytecode cache would unpickle and run whatever was planted there."""
    fresh = lambda: _ENV.get_template(template).render(**context)
    try:
        key = cache_key(templates_digest(), template, json.dumps(context, sort_keys=True))
    except TypeError:   # a value JSON cannot hold: no key, render every time
        return fresh()
    return cached_text(f"fnx-render-{template}", key, fresh)


@functools.cache
def templates_digest() -> str:
    """What rendering depends on besides its arguments: the templates, this file (filters, options), Jinja2."""
    files = sorted((Path(__file__).parent / "templates").glob("*.j2")) + [Path(__file__)]
    return cache_key(jinja2.__version__, *(f.read_text() for f in files))


def _libm_functions() -> dict:
    """The libm functions that primitives call (Primitive.libm), which have SIMD variants in glibc's libmvec
    (declared `omp declare simd` when it is linked): all of them, those whose float32 version is called
    directly (accurate and fast in libmvec), and those of two operands."""
    prims = [p for p in Primitive.registry.values() if p.libm]
    return {"math_functions": [p.name for p in prims],
            "float_functions": [p.name for p in prims if p.libm == "float"],
            "binary_math": [p.name for p in prims if "binary" in p.groups]}


def prelude(target: Target | str, *, simd: bool = True) -> str:
    """The target's prelude: includes, macros, math helpers (`simd`: declare libmvec's SIMD variants)."""
    target = get_target(target)
    return _render(
        target.prelude, **_libm_functions(), simd=simd, rotations=ROTATIONS, **target.prelude_context())


def math_prelude(*, simd: bool = False) -> str:
    """The C math every target's C shares (templates/c_math.h.j2): libm declarations, fnx's float32 exp, numpy's
    semantics where C's differ, Threefry; standalone (fnx.export's C programs include it)."""
    return _render("c_math.h.j2", **_libm_functions(), simd=simd, rotations=ROTATIONS)


def render_module(kernels: list["GeneratedKernel"], target: Target | str, *, simd: bool = True) -> str:
    """One translation unit: the prelude followed by each distinct kernel once."""
    return translation_unit(prelude(target, simd=simd), kernels)


@dataclass
class GeneratedKernel:
    """One rendered kernel: its name, target, source and the runtime values of its `meta` arguments."""

    name: str
    target: str
    source: str
    kernel: Kernel
    meta: list = field(default_factory=list)          # int values, in argument order
    n_buffers: int = 0
    mode: str = ""              # GPU targets: "flat" (elementwise), "rows", "columns" or "split" (reductions)
    aligned: tuple = ()         # GPU targets: buffers whose alignment the launcher checks to take the vector path
    split: bool = False         # several threads or blocks share each row (`_shares_rows`)

    def __repr__(self) -> str:
        return f"<kernel {self.name} ({self.target}), {self.n_buffers} buffers>"


def _stem(kernel: Kernel) -> str:
    """The readable part of a kernel's name: its kind, the first primitives it computes and its dtype."""
    kind = "reduce" if kernel.kind == "reduce" else "fused"
    ops = "_".join(kernel.ops[:4]) or ("copy" if kernel.inputs else "fill")
    return f"fnx_{kind}_{ops}_{SHORT[kernel.outputs[0].aval.dtype.name]}"


def render(kernel: Kernel, target: Target | str) -> GeneratedKernel:
    """Render one fused kernel for `target` (a Target, or its name: "c", "cuda").

    The name ends in a short hash of the kernel's layout, so the same kernel gets the same name (and
    source, and cache entry) in every executable and for all sizes that take the same loop structure:
    sizes and strides are arguments.
    """
    target = get_target(target)
    ctx = _Context(kernel, target)
    layout = ctx.layout()
    digest = hashlib.sha256(json.dumps([target.name, layout], sort_keys=True).encode()).hexdigest()[:8]
    name = f"{_stem(kernel)}_{digest}"
    shell = target.kernels[kernel.kind + ("_columns" if ctx.columns else "")]
    source = _render(shell, k={**layout, "name": name})
    mode = "flat" if kernel.kind == "elementwise" else "columns" if ctx.columns else \
        "split" if layout["split"] else "rows"
    return GeneratedKernel(name, target.name, source, kernel, ctx.meta_values, len(kernel.inputs) + len(kernel.outputs),
                           mode if target.gpu else "", ctx.aligned, _shares_rows(kernel, target))


# ---------------------------------------------------------------- the emitter
class _Context:
    """The emitter for one kernel and target: value names, runtime sizes and strides (`meta`), index
    expressions, statements, and the layout dict that a shell template renders."""

    def __init__(self, kernel: Kernel, target: Target):
        self.k, self.target = kernel, target
        self.columns = _column_mode(kernel)   # C: lanes in arrays; GPU: 2-D blocks over groups of rows
        self.aligned: tuple = ()              # GPU elementwise: buffers the vector path reads or writes
        self.meta_names: list[str] = []
        self.meta_values: list[int] = []
        self.names = {id(n): f"v{i}" for i, n in enumerate(kernel.nodes)}
        self.lanes: set[int] = set()      # column mode: row-level values held per lane, `v[b]`
        self.sizes = [self._meta(f"n{d}", s) for d, s in enumerate(kernel.sizes)]
        self.strides = []   # per access, per dim: None (0), "1" (on the vectorised dim) or a meta name
        self.offsets = []
        vector_dim = kernel.n_rows - 1 if self.columns else len(kernel.sizes) - 1
        for a, acc in enumerate(kernel.accesses):
            self.offsets.append(self._meta(f"o{a}", acc.offset) if acc.offset else None)
            self.strides.append([None if s == 0 else "1" if s == 1 and d == vector_dim
                                 else self._meta(f"s{a}_{d}", s) for d, s in enumerate(acc.strides)])
        self.halves = {id(n): self._meta(f"h{i}", n.params["half"]) for i, n in enumerate(kernel.nodes)
                       if _in_group(n, "random")}   # random values: where their position space splits (runtime)

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
                        "ctype": self.target.types[v.aval.dtype.name]})
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
            return f"({self.target.types[node.dtype.name]}){args[0]}"
        prim = Primitive.registry[node.op]
        if "check" in prim.groups:   # the operand's value; `statement` adds the test
            return args[0]
        if "random" in prim.groups:   # a function of the key words and the element's position
            return self.target.rename_calls(expression(prim, CLASS[node.dtype.name], self.target.name).format(
                *args, index_of(node.params["access"]), self.halves[id(node)]))
        dtype = node.args[-1].dtype if node.args else node.dtype
        form = expression(prim, CLASS[dtype.name], self.target.name)
        if callable(form):
            return self.target.rename_calls(form(*args, **node.params))
        params = {k: self.target.literal(v, dtype) for k, v in node.params.items()}
        return self.target.rename_calls(form.format(*args, **params))

    def ref(self, node: Node) -> str:
        if node.op == "literal":
            return self.target.literal(node.params["value"], node.dtype)
        return self.names[id(node)] + ("[b]" if id(node) in self.lanes else "")

    def statement(self, node: Node, index_of) -> str:
        ctype = self.target.temp_types[node.dtype.name]
        if node.op == "load":
            a = node.params["access"]
            rhs = f"{self.buffer_name(a)}[{index_of(a)}]"
        else:
            rhs = self.expr(node, index_of)
        if id(node) in self.lanes:
            line = f"{self.ref(node)} = {rhs};"
        else:
            line = f"const {ctype} {self.names[id(node)]} = {rhs};"
        if _in_group(node, "check"):   # raise the call's error flag (one store, only where a value fails)
            p = node.params
            test = expression(Primitive.registry[node.op], "i", self.target.name).format(
                self.ref(node.args[0]), low=f"{p['low']}{self.target.long_suffix}",
                high=f"{p['high']}{self.target.long_suffix}")
            line += f" if {test} FNX_FLAG(fnx_bad);"
        return line

    def statements(self, nodes: list[Node], index_of) -> list[str]:
        return [self.statement(n, index_of) for n in nodes if n.op not in ("literal", "reduce")]

    def store(self, access: int, node: Node, index_of) -> str:
        return f"{self.buffer_name(access)}[{index_of(access)}] = {self.ref(node)};"

    # ---------------- layouts for the templates
    def layout(self) -> dict:
        base = {"buffers": self.buffers(), "meta": self.meta_names, "sizes": self.sizes,
                "n_accesses": len(self.k.accesses), "flag": bool(self.k.checks)}
        if self.target.gpu:   # how its blocks combine partials: warp shuffles, or local memory
            base["shuffles"] = self.target.shuffles
        if self.k.kind == "elementwise":
            return {**base, **self._elementwise()}
        return {**base, **self._reduce()}

    def _elementwise(self) -> dict:
        k = self.k
        rank = len(k.sizes)
        flat = rank == 1 or self.target.gpu
        if flat:   # one loop over the flat index (GPU: unravelled per element)
            j = "i" if rank == 1 else None
            index_of = (lambda a: self._flat_index(a, j)) if rank == 1 else (lambda a: f"p{a}")
        else:      # rows in parallel, a vectorised loop along the last dim
            index_of = lambda a: f"r{a}{self.inner(a, 'j')}"
        body = self.statements(k.nodes, index_of) + [self.store(a, n, index_of) for a, n, _ in k.stores]
        t = None if flat else _tile_dim(k)
        tile = None if t is None else {
            "dim": f"i{t}", "size": self.sizes[t], "side": _TILE,
            "others": " * ".join(self.sizes[d] for d in range(rank - 1) if d != t) or None,
            "outer": self._unravel([d for d in range(rank - 1) if d != t], "i")}
        return {"rank": rank, "body": body, "tile": tile, "outer": self._unravel(range(rank - 1), "i"),
                "all_dims": self._unravel(range(rank), "i"),
                "row_offsets": [self._offset(a, range(rank - 1), "i") for a in range(len(k.accesses))],
                "flat_offsets": [self._offset(a, range(rank), "i") for a in range(len(k.accesses))],
                "total": " * ".join(self.sizes), "vector": self._vector() if self.target.vector_width else None}

    def _vector(self) -> dict | None:
        """GPU, one flat dim: the body over the `vector_width` consecutive elements `i + e` of one thread, reading
        inputs that move with the index (stride 1, no offset) through one wide load each (`l{a}.v[e]`) and
        writing the outputs through wide stores (`w{a}.v[e]`); other inputs load element by element."""
        k = self.k
        if len(k.sizes) != 1:
            return None
        wide = {a for a in range(len(k.accesses)) if self.strides[a][0] == "1" and self.offsets[a] is None}
        if any(a not in wide for a, _, _ in k.stores):
            return None
        loads = sorted({n.params["access"] for n in k.nodes if n.op == "load"} & wide)
        body = []
        for n in k.nodes:
            if n.op == "load" and n.params["access"] in wide:
                body.append(f"const {self.target.temp_types[n.dtype.name]} {self.ref(n)} = l{n.params['access']}.v[e];")
            elif n.op not in ("literal", "reduce"):
                body.append(self.statement(n, lambda a: self._flat_index(a, "(i + e)")))
        body += [f"w{a}.v[e] = {self.ref(n)};" for a, n, _ in k.stores]
        buffers = self.buffers()
        wide_of = lambda a: {"a": a, "buffer": self.buffer_name(a), "ctype": buffers[k.accesses[a].buffer]["ctype"]}
        stores = [a for a, _, _ in k.stores]
        self.aligned = tuple(sorted({k.accesses[a].buffer for a in loads + stores}))
        return {"width": self.target.vector_width, "loads": [wide_of(a) for a in loads],
                "stores": [wide_of(a) for a in stores], "body": body}

    def _flat_index(self, a: int, j: str) -> str:
        off = self.offsets[a]
        step = self.inner(a, j)
        if off is None:
            return step[3:] if step else "0"
        return f"{off}{step}"

    def _offset(self, a: int, dims: range, index: str) -> str:
        terms = ([self.offsets[a]] if self.offsets[a] else []) + self.offset_terms(a, dims, index)
        return " + ".join(terms) if terms else "0"

    def _unravel(self, dims: range | list, index: str) -> list[dict]:
        """Innermost first: the index of each dim, peeled off a flat counter by % and / (`used`: some access moves)."""
        return [{"index": f"{index}{d}", "size": self.sizes[d], "used": any(st[d] is not None for st in self.strides)}
                for d in reversed(dims)]

    def _reduce(self) -> dict:
        """A reduction kernel: its steps (`_RowSteps`), and where its rows and cols are."""
        if self.columns and not self.target.gpu:   # lanes `b` walk the contiguous innermost row dim, cols outside
            self.lanes = {id(n) for n in self.k.nodes if n.level == "row"}
        steps = _RowSteps(self)
        steps.emit()
        if self.columns and not self.target.gpu:
            return self._lanes_layout(steps)
        return self._rows_layout(steps)

    def _rows_layout(self, steps: _RowSteps) -> dict:
        """Rows in parallel (GPU: a block per row, or 2-D blocks over groups of rows in column mode), each row's
        steps in order; split mode shares long rows among several threads or blocks."""
        k = self.k
        nr, rank = k.n_rows, len(k.sizes)
        col_outer = range(nr, rank - 1)
        streamed = steps.streamed
        return {"n_rows": nr, "rows": " * ".join(self.sizes[:nr]), "cols": " * ".join(self.sizes[nr:]),
                "split": _shares_rows(k, self.target),
                "columns": self.columns, "phase_steps": [s for s in steps.steps if s["kind"] == "phase"],
                "row_stores": any(level == "row" for _, _, level in k.stores),
                "inner": self.sizes[-1], "col_outer": " * ".join(self.sizes[d] for d in col_outer) or None,
                "row_dims": self._unravel(range(nr), "i"), "col_dims": self._unravel(col_outer, "c_"),
                "all_col_dims": self._unravel(range(nr, rank), "c_"),
                "row_offsets": [self._offset(a, range(nr), "i") for a in range(len(k.accesses))],
                "steps": steps.steps, "scratch": steps.scratch,
                "stream": None if streamed is None else self.target.types[streamed[1].dtype.name],
                "stream_min": _STREAM_MIN_BYTES}

    def _lanes_layout(self, steps: _RowSteps) -> dict:
        """C, column mode: tasks of `FNX_LANES` rows along the contiguous innermost row dim (the lanes), each
        running its steps with the loops over the cols outside and the lanes inside."""
        k = self.k
        nr = k.n_rows
        return {"rows": " * ".join(self.sizes[:nr - 1]) or "1", "lanes": self.sizes[nr - 1],
                "cols": " * ".join(self.sizes[nr:]), "row_dims": self._unravel(range(nr - 1), "i"),
                "col_dims": self._unravel(range(nr, len(k.sizes)), "c_"),
                "row_offsets": [self._lane_block_offset(a) for a in range(len(k.accesses))], "steps": steps.steps,
                "lane_arrays": [{"name": self.names[id(n)], "ctype": self.target.types[n.dtype.name]}
                                for n in k.nodes if id(n) in self.lanes and n.op != "reduce"]}

    def lane(self, a: int) -> str:
        """Column mode: ` + b * stride` of access `a` along the vectorised row dim."""
        s = self.strides[a][self.k.n_rows - 1]
        return "" if s is None else " + b" if s == "1" else f" + b * {s}"

    def _lane_block_offset(self, a: int) -> str:
        """Column mode: access `a`'s offset at the first lane of block `rb` of row `ro`."""
        terms = [self._offset(a, range(self.k.n_rows - 1), "i")]
        s = self.strides[a][self.k.n_rows - 1]
        if s is not None:
            terms.append("rb" if s == "1" else f"rb * {s}")
        return " + ".join(t for t in terms if t != "0") or "0"


class _RowSteps:
    """The body of a reduction kernel's row as steps for its shell template, in the order they run: `code`
    (row-level statements), `phase` (a loop over the cols that reduces) and `map` (the loop over the cols that
    writes the per-element outputs).

    A row-level value is emitted after its operands; a reduction is emitted as its phase loop, which computes
    the col-level values it needs. On C (rows per thread, not in column mode), an expensive col-level value
    that a later loop reads again is spilled: into the row of a per-element output of its type while one is
    free (the map loop reads an element there before it overwrites it, and the output's cache lines are
    fetched during the expensive loop), else into a per-thread scratch row; later loops reload it.
    """

    def __init__(self, ctx: _Context):
        self.ctx = ctx
        k = ctx.k
        self.col_outer = range(k.n_rows, len(k.sizes) - 1)
        self.row_index, self.col_index = self._index_functions()
        self.col_linear = "j" if not self.col_outer else f"co * {ctx.sizes[-1]} + j"
        self.steps: list[dict] = []
        self.emitted: set[int] = set()
        self.col_stores = [(a, n) for a, n, level in k.stores if level == "col"]
        self.spilled: dict[int, Callable] = {}   # node id -> (a loop's index function -> its lvalue there)
        self.scratch: list[dict] = []
        self.hosts = [a for a, _ in self.col_stores]   # per-element outputs whose rows may hold a spill
        # loop (a reduction's node id, or "map") -> ids of the col-level nodes it computes: spill what a later one reads
        self.pending = {id(p): _col_closure([p.args[0]]) for p in k.phases}
        self.pending["map"] = _col_closure([n for _, n in self.col_stores])
        self.streamed: tuple | None = None

    def _index_functions(self) -> tuple[Callable, Callable]:
        """(row index, col index): access `a`'s index expression at row level and inside a loop over the cols."""
        ctx = self.ctx
        nr = ctx.k.n_rows
        if ctx.columns and not ctx.target.gpu:   # lanes `b`; the col loops run outside them
            return (lambda a: f"r{a}{ctx.lane(a)}",
                    lambda a: f"r{a}{ctx.lane(a)}" + (f" + c{a}" if any(ctx.strides[a][nr:]) else ""))
        row_index = lambda a: f"r{a}"
        if ctx.target.gpu:
            return row_index, lambda a: f"c{a}"   # per element: row base + unravelled col offset
        if len(self.col_outer) == 0:
            return row_index, lambda a: f"r{a}{ctx.inner(a, 'j')}"
        return row_index, lambda a: f"c{a}{ctx.inner(a, 'j')}"

    def emit(self) -> None:
        """All steps: the reductions, the per-row outputs, then the per-element outputs."""
        for node in self.ctx.k.phases:
            self.need_row(node)
        self.row_stores()
        self.streamed = self._streamed()
        if self.col_stores:
            self.run_loop("map", [n for _, n in self.col_stores], self._map_step)

    def code(self, line: str) -> None:
        """A row-level statement, appended to the last step when that is code too."""
        if self.steps and self.steps[-1]["kind"] == "code":
            self.steps[-1]["lines"].append(line)
        else:
            self.steps.append({"kind": "code", "lines": [line]})

    def need_row(self, node: Node) -> None:
        """Emit row-level `node` once, after its operands (a reduction: its phase loop)."""
        if id(node) in self.emitted or node.op == "literal":
            return
        self.emitted.add(id(node))
        if node.op == "reduce":
            self.run_loop(id(node), [node.args[0]],
                          lambda body, index: self.phase(node, body, self.ctx.ref(node.args[0])))
            return
        for a in node.args:
            self.need_row(a)
        self.code(self.ctx.statement(node, self.row_index))

    def row_stores(self) -> None:
        """The per-row outputs (GPU: the row's leader thread stores)."""
        ctx = self.ctx
        for a, n in [(a, n) for a, n, level in ctx.k.stores if level == "row"]:
            self.need_row(n)
            store = ctx.store(a, n, self.row_index)
            self.code(store if not ctx.target.gpu else f"if (leader) {store}")

    def run_loop(self, key, roots: list[Node], make: Callable[[list[str], Callable], dict]) -> None:
        """Emit one loop over the cols computing `roots` (`pending` key `key`): `make(body, index)` makes its step."""
        del self.pending[key]
        order = self._loop_order(roots)
        used: set[int] = set()

        def index(a: int) -> str:
            used.add(a)
            return self.col_index(a)

        step = make(self._loop_body(order, index), index)
        ctx, cols = self.ctx, range(self.ctx.k.n_rows, len(self.ctx.k.sizes))
        step["col_offsets"] = [{"a": a, "outer": " + ".join(ctx.offset_terms(a, self.col_outer, "c_")) or "0",
                                "all": " + ".join(ctx.offset_terms(a, cols, "c_")) or "0"} for a in sorted(used)]
        self.steps.append(step)

    def _loop_order(self, roots: list[Node]) -> list[tuple[str, Node]]:
        """The col-level nodes of a loop, operands first: ("compute", node), or ("reload", node) for a spilled one.
        Row-level operands are emitted on the way, before the loop."""
        order: list[tuple[str, Node]] = []
        seen: set[int] = set()
        for r in roots:
            self._visit(r, order, seen)
        return order

    def _visit(self, n: Node, order: list, seen: set) -> None:
        if id(n) in seen:
            return
        seen.add(id(n))
        if n.level != "col":
            self.need_row(n)
        elif id(n) in self.spilled:
            order.append(("reload", n))
        else:
            for a in n.args:
                self._visit(a, order, seen)
            order.append(("compute", n))

    def _loop_body(self, order: list[tuple[str, Node]], index: Callable) -> list[str]:
        """The statements of a loop over the cols: spilled values reloaded, the others computed, new ones spilled."""
        ctx = self.ctx
        body = []
        for how, n in order:
            if how == "reload":
                body.append(f"const {ctx.target.types[n.dtype.name]} {ctx.ref(n)} = {self.spilled[id(n)](index)};")
                continue
            body += ctx.statements([n], index)
            later = any(id(n) in c for c in self.pending.values())
            if not ctx.target.gpu and not ctx.columns and _in_group(n, "expensive") and later:
                self.spill(n)
                body.append(f"{self.spilled[id(n)](index)} = {ctx.ref(n)};")
        return body

    def spill(self, n: Node) -> None:
        """Give expensive value `n` a place for later loops: a free output row of its type, else a scratch row."""
        ctx = self.ctx
        ctype = ctx.target.types[n.dtype.name]
        buffers = ctx.buffers()
        host = next((a for a in self.hosts if buffers[ctx.k.accesses[a].buffer]["ctype"] == ctype), None)
        if host is not None:
            self.hosts.remove(host)
            self.spilled[id(n)] = lambda index: f"{ctx.buffer_name(host)}[{index(host)}]"
        else:
            name = f"sc_{ctx.ref(n)}"
            self.scratch.append({"name": name, "ctype": ctype})
            self.spilled[id(n)] = lambda index: f"{name}[{self.col_linear}]"

    def _map_step(self, body: list[str], index: Callable) -> dict:
        """The loop writing the per-element outputs (and, when streamed, the same body writing a cache line's
        worth into `line` first)."""
        ctx = self.ctx
        step = {"kind": "map", "body": body + [ctx.store(a, n, index) for a, n in self.col_stores], "stream": None}
        if self.streamed is not None:
            a, n = self.streamed
            step["stream"] = {"buffer": ctx.buffer_name(a), "base": f"c{a}" if self.col_outer else f"r{a}",
                              "line": body + [f"line[j - jc] = {ctx.ref(n)};"]}
        return step

    def _streamed(self) -> tuple | None:
        """C row kernels: the per-element output written with non-temporal stores when the kernel's output is
        large (templates/c_reduce_stream.h.j2): the only one, contiguous along the cols, and not a spill host
        (a streamed line bypasses the cache, so its values should not be read back). None where there is none."""
        ctx = self.ctx
        if ctx.target.gpu or ctx.columns or _split_mode(ctx.k) or len(self.col_stores) != 1:
            return None
        a, n = self.col_stores[0]
        return (a, n) if ctx.strides[a][-1] == "1" and a in self.hosts else None

    def phase(self, node: Node, body: list[str], value: str) -> dict:
        """One reduction loop: accumulator types, identity, update and combine for the node's monoid."""
        ctx = self.ctx
        monoid, name = node.params["monoid"], ctx.names[id(node)]
        dt = node.dtype.name
        cls = CLASS[dt]
        ctype = ctx.target.types[dt]
        acc_type = "double" if (dt == "float32" and monoid == "add" and ctx.target.double_sums) else ctype
        if cls == "i" and monoid in ("max", "min"):
            lo, hi = INT_LIMITS[dt]
            init = ctx.target.literal(lo if monoid == "max" else hi, node.dtype)
        else:
            init = IDENTITY[monoid][cls]
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
                "absorb_lane": update.format(p=f"a_{name}[b]", v=value),
                "merge": update.format(p=f"p_{name}", v=f"q_{name}"), "op": op, "nan": nan_check,
                "shuffle_type": ctype if dt in ("float32", "float64", "int64", "int32") else "int"}
