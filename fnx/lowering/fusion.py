"""Fusion: split a jaxpr into fused kernels and library steps, and fix each kernel's loop structure.

The unit of work is the *materialised* value: jaxpr outputs, inputs and outputs
of library equations (matmul, gather, sort, control flow, ...) and whatever
cannot be recomputed inside its consumer. Every other value is inlined into
the kernels that read it, through view arithmetic (fnx/lowering/views.py).

A kernel writes one or more materialised values over one index space:
- elementwise: the space is the output shape; one loop nest, one expression per output;
- reduce: the space is a reduction's input shape with its kept dims ("rows") first and its reduced
  dims ("cols") last. Per row the kernel runs *phases* (one loop over the cols per reduction, in
  dependency order), then one map loop for outputs of the full shape; outputs with one element per
  row are written once per row. Softmax, layernorm and logsumexp are one such kernel each.

The algorithm: mark the materialised values; make one kernel per materialised value produced by a
fusible equation; whenever an inlined value cannot be expressed in that kernel (an index needs a
division, a reduction is read at another index than its own row, a reduction would be recomputed
by two kernels, an expensive value would be recomputed at every index of a broadcast), materialise it and
start again. Then merge kernels over the same index space when no other
step lies between them (no path through another step, no library step between them in program order unless they
read one value of their space's size), and order all steps topologically.
"""
from __future__ import annotations

import bisect
import copy
import math
from dataclasses import dataclass, field
from typing import Callable

from ..ir import Eqn, Jaxpr, Literal, Var
from .expressions import random_half
from .views import View, canonical, input_view, row_major

__all__ = ["Node", "Access", "Kernel", "fuse", "RECOMPUTE_MAX", "NEAR_STEPS"]

# Operations of an inlined value from which two kernels that read it no longer each compute it: it is materialised
# (`_recomputed`). A few cheap operations cost less than writing the value out and reading it back.
RECOMPUTE_MAX = 8
# Library steps between two such kernels at most, for the value to be materialised (`_recomputed`).
NEAR_STEPS = 10


class _CantFuse(Exception):
    """`var` cannot be inlined into the kernel being built: it must be materialised."""

    def __init__(self, var: Var):
        self.var = var


@dataclass(eq=False)
class Node:
    """One value inside a kernel: a load, a literal, a primitive applied to nodes, or a reduction.

    `level` is "const" (literals), "row" (the same for every col of a row: reductions and what only they
    and row-invariant loads feed) or "col" (varies along the reduced dims; every value of an elementwise
    kernel is "col").
    """

    op: str                      # "load", "literal", "reduce" or a primitive name
    args: tuple
    dtype: object                # fnx dtype
    params: dict = field(default_factory=dict)  # load: {"access"}; literal: {"value"}; reduce: {"monoid"};
    #                              random: {"access" (its position), "half"} (expressions.random_half)
    level: str = "col"


@dataclass
class Access:
    """A buffer read or written at a view: `buffer` indexes kernel.inputs, then kernel.outputs; None for the
    position of a random value in its own output, which no buffer holds."""

    buffer: int | None
    strides: tuple
    offset: int


@dataclass
class Kernel:
    """A fused kernel: its index space, buffers, accesses and expression DAG, ready for codegen."""

    kind: str                    # "elementwise" or "reduce"
    sizes: tuple                 # kernel dims after coalescing, rows first
    n_rows: int                  # how many leading dims index rows (all of them for elementwise)
    inputs: list                 # Vars read
    outputs: list                # Vars written
    accesses: list               # Access
    nodes: list                  # Node, topologically ordered
    stores: list                 # (access index, node, level: "row" or "col")
    phases: list                 # reduce Nodes in dependency order
    checks: list = field(default_factory=list)   # (output Var, Eqn) of each check it computes, in order

    @property
    def ops(self) -> list:
        """Names of the primitives computed, in order of first appearance."""
        return list(dict.fromkeys(n.op if n.op != "reduce" else _REDUCE_NAMES[n.params["monoid"]]
                                  for n in self.nodes if n.op not in ("load", "literal")))


_REDUCE_NAMES = {"add": "sum", "mul": "prod", "max": "max", "min": "min"}


# ---------------------------------------------------------------- index spaces
@dataclass(frozen=True)
class _Space:
    """A kernel's index space: kernel dims = X's kept dims then its reduced dims (or an output shape)."""

    shape: tuple                 # X, or the output shape of an elementwise kernel
    axes: tuple | None = None    # reduced dims of X; None for elementwise

    @property
    def order(self) -> tuple:
        if self.axes is None:
            return tuple(range(len(self.shape)))
        return tuple(d for d in range(len(self.shape)) if d not in self.axes) + self.axes

    @property
    def sizes(self) -> tuple:
        return tuple(self.shape[d] for d in self.order)

    @property
    def n_rows(self) -> int:
        return len(self.shape) - len(self.axes) if self.axes is not None else len(self.shape)

    @property
    def rows(self) -> int:
        return math.prod(self.sizes[:self.n_rows])

    def full_view(self) -> View:
        """Where a value laid out like X (any shape, same size) sits at each kernel index."""
        rm = row_major(self.shape)
        return View(canonical([rm[d] for d in self.order], self.sizes), 0)

    def row_view(self) -> View:
        """Where a value with one element per row (a reduction's result) sits at each kernel index."""
        rm = row_major(self.sizes[:self.n_rows])
        return View(canonical(list(rm) + [0] * (len(self.sizes) - self.n_rows), self.sizes), 0)

    def view_for(self, var: Var) -> tuple[View, str] | None:
        """The view and level at which this space writes `var`; None if it cannot."""
        n = math.prod(var.aval.shape)
        if n == math.prod(self.shape):
            return self.full_view(), "col"
        if self.axes is not None and n == self.rows:
            return self.row_view(), "row"
        return None


# ---------------------------------------------------------------- classification
def _classify(eqn: Eqn, emittable: Callable[[Eqn], bool]) -> str:
    """The equation's class: "reduce", "view" (a movement: moves elements), "elementwise" or "library" (runs its
    impl)."""
    if eqn.prim.multiple_results or len(eqn.outvars) != 1 or not emittable(eqn):
        return "library"
    if any(math.prod(a.aval.shape) == 0 for a in [*eqn.inputs, eqn.outvars[0]]):
        return "library"   # nothing to loop over; numpy handles the empty arrays
    groups = eqn.prim.groups
    return "reduce" if "reduction" in groups else "view" if "movement" in groups else "elementwise"


class _Graph:
    """The jaxpr with each variable's producer and class, and the set of materialised variables."""

    def __init__(self, jaxpr: Jaxpr, emittable: Callable[[Eqn], bool], scalar_consts: dict):
        self.jaxpr = jaxpr
        self.scalar_consts = scalar_consts       # id(constvar) -> 0-d array, inlined as literals
        self.producer: dict[int, tuple[int, Eqn]] = {}
        self.kind: dict[int, str] = {}
        self.eqn_kind = [_classify(e, emittable) for e in jaxpr.eqns]
        for i, (e, k) in enumerate(zip(jaxpr.eqns, self.eqn_kind)):
            for v in e.outvars:
                self.producer[id(v)] = (i, e)
                self.kind[id(v)] = k
        self.materialised: set[int] = {id(v) for v in list(jaxpr.invars) + list(jaxpr.constvars)}
        self.materialised.update(id(v) for v in jaxpr.outvars if isinstance(v, Var))
        for e, k in zip(jaxpr.eqns, self.eqn_kind):
            if k == "library":
                self.materialised.update(id(a) for a in e.inputs if isinstance(a, Var))
                self.materialised.update(id(v) for v in e.outvars)
        for e, k in zip(jaxpr.eqns, self.eqn_kind):   # a check's value is written out: the host re-checks it
            if k != "library" and "check" in e.prim.groups:   # when the kernel flags an error (plan.py)
                self.materialised.add(id(e.outvars[0]))
        read = {id(a) for e, k in zip(jaxpr.eqns, self.eqn_kind) if k == "library" for a in e.inputs}
        read.difference_update(id(v) for v in jaxpr.outvars)
        reshaped = set()   # values of `read` that a reshape reads
        for i in reversed(range(len(jaxpr.eqns))):   # a library step reads a reshaped or permuted kernel result:
            e = jaxpr.eqns[i]                          # the kernel writes it in its own layout, numpy views it,
            if self.eqn_kind[i] == "view" and id(e.outvars[0]) in read and isinstance(e.inputs[0], Var) \
                    and math.prod(e.inputs[0].aval.shape) == math.prod(e.outvars[0].aval.shape) \
                    and self.kind.get(id(e.inputs[0]), "library") != "library":
                if e.prim.name == "transpose" and id(e.outvars[0]) in reshaped:
                    continue   # but a permutation that is then reshaped: the kernel writes it permuted (numpy would
                    # copy the permuted view to reshape it: the heads of attention's output or gradient, say)
                self.materialised.add(id(e.inputs[0]))
                read.add(id(e.inputs[0]))
                if e.prim.name == "reshape":
                    reshaped.add(id(e.inputs[0]))
        for i, e in enumerate(jaxpr.eqns):   # a shape op on a materialised value, itself materialised: a numpy view
            if self.eqn_kind[i] == "view" and id(e.outvars[0]) in self.materialised \
                    and isinstance(e.inputs[0], Var) and id(e.inputs[0]) in self.materialised:
                self.eqn_kind[i] = self.kind[id(e.outvars[0])] = "library"

    def library_eqns(self) -> list[Eqn]:
        return [e for e, k in zip(self.jaxpr.eqns, self.eqn_kind) if k == "library"]

    def fusible_roots(self) -> list[Var]:
        return [e.outvars[0] for e, k in zip(self.jaxpr.eqns, self.eqn_kind)
                if k != "library" and id(e.outvars[0]) in self.materialised]


# ---------------------------------------------------------------- building one kernel
class _Builder:
    """Inlines the values a kernel writes down to materialised leaves, collecting nodes and accesses."""

    def __init__(self, graph: _Graph, space: _Space, members: set):
        self.g, self.space, self.members = graph, space, members   # members: ids of the vars this kernel writes
        self.sizes = space.sizes
        self.nodes: list[Node] = []
        self.memo: dict = {}
        self.inputs: list[Var] = []
        self.input_index: dict[int, int] = {}
        self.access_keys: dict = {}
        self.accesses: list[tuple] = []   # (("in"|"out", index), view)
        self.phases: list[Node] = []
        self.reduced: set[int] = set()    # ids of reduction vars computed as phases here
        self.touched: set[int] = set()    # ids of every var visited (inlined or loaded)
        self.stores: list[tuple] = []     # (root, view, node, level) of each var written

    def extended(self, members: set) -> "_Builder":
        """A copy that goes on inlining into this kernel with `members` written too; this one is left as it was."""
        b = copy.copy(self)
        b.members = self.members | members
        b.nodes, b.memo, b.inputs = list(self.nodes), dict(self.memo), list(self.inputs)
        b.input_index, b.access_keys, b.accesses = dict(self.input_index), dict(self.access_keys), list(self.accesses)
        b.phases, b.reduced, b.touched = list(self.phases), set(self.reduced), set(self.touched)
        b.stores = list(self.stores)
        return b

    def add(self, node: Node) -> Node:
        self.nodes.append(node)
        return node

    def access(self, where: tuple, view: View) -> int:
        key = (where, view)
        if key not in self.access_keys:
            self.access_keys[key] = len(self.accesses)
            self.accesses.append(key)
        return self.access_keys[key]

    def value(self, atom, view: View) -> Node:
        if isinstance(atom, Literal):
            return self.add(Node("literal", (), atom.aval.dtype, {"value": atom.val._value}, "const"))
        key = (id(atom), view)
        found = self.memo.get(key)
        if found is None:
            self.touched.add(id(atom))
            found = self.memo[key] = self._compute(atom, view)
        return found

    def _compute(self, var: Var, view: View) -> Node:
        g = self.g
        if id(var) in g.scalar_consts:
            return self.add(Node("literal", (), var.aval.dtype, {"value": g.scalar_consts[id(var)]}, "const"))
        if id(var) in g.materialised and id(var) not in self.members:
            if id(var) not in self.input_index:
                self.input_index[id(var)] = len(self.inputs)
                self.inputs.append(var)
            level = "col" if any(view.strides[self.space.n_rows:]) else "row"
            acc = self.access(("in", self.input_index[id(var)]), view)
            return self.add(Node("load", (), var.aval.dtype, {"access": acc}, level))
        _, eqn = g.producer[id(var)]
        kind = g.kind[id(var)]
        if kind == "reduce":
            return self._reduction(var, eqn, view)
        if "random" in eqn.prim.groups:
            return self._random(var, eqn, view)
        if "expensive" in eqn.prim.groups and _repeats(view, self.sizes, self.space.n_rows):
            raise _CantFuse(var)   # computed once per element of its own, not once per index that reads it
        out_shape = var.aval.shape
        args = []
        for a in eqn.inputs:
            if isinstance(a, Literal):
                args.append(self.value(a, view))
                continue
            v = input_view(eqn.prim.name, eqn.params, out_shape, a.aval.shape, view, self.sizes)
            if v is None:   # this value's index cannot be split per dimension here: it must be materialised
                raise _CantFuse(var)
            args.append(self.value(a, v))
        if kind == "view":
            return args[0]
        level = "col" if any(n.level == "col" for n in args) else "row" if any(n.level == "row" for n in args) \
            else "const"
        return self.add(Node(eqn.prim.name, tuple(args), var.aval.dtype, dict(eqn.params), level))

    def _reduction(self, var: Var, eqn: Eqn, view: View) -> Node:
        sp = self.space
        x = eqn.inputs[0]
        if (sp.axes is None or tuple(x.aval.shape) != sp.shape or tuple(eqn.params["axes"]) != sp.axes
                or view != sp.row_view()):
            raise _CantFuse(var)
        body = self.value(x, sp.full_view())
        node = self.add(Node("reduce", (body,), var.aval.dtype, {"monoid": eqn.prim.monoid}, "row"))
        self.phases.append(node)
        self.reduced.add(id(var))
        return node


    def _random(self, var: Var, eqn: Eqn, view: View) -> Node:
        """A counter-based random value: a function of the key's two words, read at every index, and of the
        element's position in `var` (the offset of `view`). A broadcast view would hash each counter again for
        every index it repeats at: then `var` is materialised instead."""
        if any(s == 0 and n > 1 for s, n in zip(view.strides, self.sizes)):
            raise _CantFuse(var)
        fixed = (0,) * len(self.sizes)
        words = tuple(self.value(eqn.inputs[0], View(fixed, w)) for w in (0, 1))
        position = self.access(("index", 0), view)
        level = "col" if any(view.strides[self.space.n_rows:]) else "row"
        params = {"access": position, "half": random_half(eqn)}
        return self.add(Node(eqn.prim.name, words, var.aval.dtype, params, level))


def _repeats(view: View, sizes: tuple, n_rows: int) -> bool:
    """Whether a value read at `view` in a kernel of `sizes` would be computed again for indices that read the same
    element (a broadcast): along a row dim, or along a col dim where it varies along another col dim (a value
    constant along every col dim is a "row" value, computed once per row)."""
    dims = range(n_rows) if not any(view.strides[n_rows:]) else range(len(sizes))
    return any(view.strides[d] == 0 and sizes[d] > 1 for d in dims)


def _reductions_below(graph: _Graph, root: Var) -> list[Eqn]:
    """Reduction equations inlined into `root` (depth first from the root), stopping at materialised values."""
    found, seen, stack = [], set(), [root]
    while stack:
        v = stack.pop()
        if id(v) in seen or id(v) not in graph.producer:
            continue
        seen.add(id(v))
        if v is not root and id(v) in graph.materialised:
            continue
        _, e = graph.producer[id(v)]
        if graph.kind[id(v)] == "reduce":
            found.append(e)
        stack.extend(a for a in reversed(e.inputs) if isinstance(a, Var))
    return found


def _space_for(graph: _Graph, root: Var) -> _Space:
    """The index space of a kernel writing `root`: its reduction's, one whose size fits, or its own shape."""
    _, e = graph.producer[id(root)]
    if graph.kind[id(root)] == "reduce":
        return _Space(tuple(e.inputs[0].aval.shape), tuple(e.params["axes"]))
    n = math.prod(root.aval.shape)
    for red in _reductions_below(graph, root):
        sp = _Space(tuple(red.inputs[0].aval.shape), tuple(red.params["axes"]))
        if n == sp.rows or n == math.prod(sp.shape) and _rows_parallel(sp):
            return sp
    return _Space(tuple(root.aval.shape))


# Row kernels run their rows in parallel, or the blocks of each row when there are few long rows (codegen's
# split mode); a big map over a few short rows would run on one thread.
_PARALLEL_MIN, _MIN_ROWS, _SPLIT_COLS = 32768, 16, 1 << 16


def _rows_parallel(space: _Space) -> bool:
    """Whether a full-size map over `space` may run inside a row kernel without losing parallelism."""
    n = math.prod(space.shape)
    return space.rows >= _MIN_ROWS or n < _PARALLEL_MIN or n // max(space.rows, 1) >= _SPLIT_COLS


@dataclass
class _Draft:
    """A kernel before coalescing: its space, the vars it writes, and the builder that inlined them."""

    space: _Space
    roots: list
    builder: _Builder
    order: int                   # index of its first root's equation (for scheduling)


def _build(graph: _Graph, space: _Space, roots: list, base: _Draft | None = None) -> _Draft:
    """Inline `roots` into one kernel over `space`; raises _CantFuse naming a value to materialise. On a `base`
    kernel over `space` that read none of `roots`, its work is kept and `roots` are inlined after its own: the kernel
    that building base.roots + roots would make, without inlining base's roots again."""
    members = {id(r) for r in roots}
    b = base.builder.extended(members) if base is not None else _Builder(graph, space, members)
    for r in roots:
        placed = space.view_for(r)
        if placed is None:
            raise _CantFuse(r)
        view, level = placed
        node = b.value(r, view)
        if level == "row" and node.level == "col":
            raise _CantFuse(r)
        b.stores.append((r, view, node, level))
    roots = list(roots) if base is None else base.roots + list(roots)
    return _Draft(space, roots, b, min(graph.producer[id(r)][0] for r in roots))


# ---------------------------------------------------------------- the whole jaxpr
def fuse(jaxpr: Jaxpr, emittable: Callable[[Eqn], bool], scalar_consts: dict | None = None) -> list:
    """The jaxpr as an ordered list of steps: `Kernel`s and library `Eqn`s.

    `emittable(eqn)` says whether codegen can express an elementwise or reduction equation (its
    primitive and dtype are in the expression table); `scalar_consts` maps id(constvar) of 0-d
    constants to their values, which are inlined as literals.
    """
    graph = _Graph(jaxpr, emittable, scalar_consts or {})
    built: dict[int, _Draft] = {}
    while True:
        drafts = _merge(graph, _single_root_drafts(graph, built))
        recomputed = _recomputed(graph, drafts)
        if not recomputed:
            break
        graph.materialised.update(recomputed)
        _forget(built, recomputed)
    steps = _schedule(graph, drafts)
    return [_finish(s) if isinstance(s, _Draft) else s for s in steps]


def _single_root_drafts(graph: _Graph, built: dict[int, _Draft]) -> list[_Draft]:
    """One kernel per materialised fusible value, materialising more values until every kernel builds; `built`
    (id of a root -> its kernel) keeps the kernels built so far, here and by earlier calls (merging copies them).

    Materialising a value only invalidates the kernels that inlined it; the others are kept (`fuse`'s rounds of
    materialising recomputed values rebuilt every kernel each round: 4 rounds for a GPT's training step).
    """
    while True:
        retry = None
        for root in graph.fusible_roots():
            if id(root) not in built:
                try:
                    built[id(root)] = _build_root(graph, root)
                except _CantFuse as e:
                    retry = e.var
                    break
        if retry is None:
            retry = _shared_reduction(graph, list(built.values()))
        if retry is None:
            return [built[id(r)] for r in graph.fusible_roots()]
        if id(retry) in graph.materialised:
            raise AssertionError(f"fusion: {retry} is materialised and still cannot be computed")
        graph.materialised.add(id(retry))
        _forget(built, {id(retry)})


def _forget(built: dict[int, _Draft], materialised: set[int]) -> None:
    """Drop from `built` the kernels that inlined one of the newly `materialised` values (ids): they now load it."""
    for rid in [rid for rid, d in built.items() if not d.builder.touched.isdisjoint(materialised)]:
        del built[rid]


def _build_root(graph: _Graph, root: Var) -> _Draft:
    """The kernel writing `root`: over its reduction's space if it can, else over its own shape."""
    space = _space_for(graph, root)
    try:
        return _build(graph, space, [root])
    except _CantFuse as e:
        if e.var is not root or space.axes is None or graph.kind[id(root)] == "reduce":
            raise
    return _build(graph, _Space(tuple(root.aval.shape)), [root])


def _shared_reduction(graph: _Graph, drafts: list[_Draft]) -> Var | None:
    """A reduction computed as a phase by two kernels: materialise it rather than compute it twice."""
    seen: set[int] = set()
    for d in drafts:
        for vid in d.builder.reduced:
            if vid in seen:
                return graph.producer[vid][1].outvars[0]
            seen.add(vid)
    return None


def _recomputed(graph: _Graph, drafts: list[_Draft]) -> set[int]:
    """ids of the values that two or more kernels, two of them near each other (NEAR_STEPS library steps apart or
    fewer), each compute from RECOMPUTE_MAX operations or more: materialised rather than computed again by every
    kernel that reads them. A recurrence's state (an RNN's hidden state, or its gradient in the backward) is read by
    its own step and the next: inlined, each step's kernel recomputed every earlier step (makemore GRU's compiled
    backward: kernels of 64 inputs over 13 steps, 50-130 us each for 2048 elements). Kernels far apart (a layer
    norm's centred input, read by its forward kernel and, in a compiled training step, by its backward's) each
    compute it: written once, it would be kept from one to the other (GPT's compiled functional training step at
    4 x 256 wide: 40 MiB more at its peak)."""
    library = sorted(i for i, k in enumerate(graph.eqn_kind) if k == "library")
    where: dict[int, list[tuple[int, Node]]] = {}
    for d in drafts:
        nodes = {}
        for (vid, _), node in d.builder.memo.items():
            if vid not in graph.materialised and graph.kind.get(vid) not in (None, "view", "reduce") \
                    and node.op not in ("load", "literal"):
                nodes.setdefault(vid, node)
        for vid, node in nodes.items():
            where.setdefault(vid, []).append((bisect.bisect_left(library, d.order), node))
    found = set()
    for vid, readers in where.items():
        steps = sorted(step for step, _ in readers)
        if any(b - a <= NEAR_STEPS for a, b in zip(steps, steps[1:])) and _operations(readers[0][1]) >= RECOMPUTE_MAX:
            found.add(vid)
    return found


def _operations(root: Node) -> int:
    """The operations (nodes other than loads and literals) that computing `root` takes."""
    seen, stack, count = set(), [root], 0
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        count += n.op not in ("load", "literal")
        stack.extend(n.args)
    return count


def _reads(graph: _Graph, d) -> set:
    """ids of materialised vars a step reads."""
    if isinstance(d, _Draft):
        return {id(v) for v in d.builder.inputs}
    return {id(a) for a in d.inputs if isinstance(a, Var)}


def _writes(d) -> set:
    if isinstance(d, _Draft):
        return {id(r) for r in d.roots}
    return {id(v) for v in d.outvars}


def _merge(graph: _Graph, drafts: list[_Draft]) -> list[_Draft]:
    """Merge kernels over the same index space when no other step must run between them.

    Each round merges the first mergeable pair in program order. A merge only adds dependencies between the
    other steps (the merged kernel depends on, and feeds, what either part did), so a pair refused once stays
    refused: the next round checks, before the merged kernel's place, only the pairs with the merged kernel."""
    drafts = sorted(drafts, key=lambda d: d.order)
    failed: set = set()
    apart = _apart(graph)
    deps = _Dependencies(graph, drafts + graph.library_eqns())
    through = deps.through
    fresh = None   # the kernel the last round made
    while True:
        merged = None
        start = 0 if fresh is None else next(i for i, d in enumerate(drafts) if d is fresh)
        for i, a in enumerate(drafts):
            for b in (drafts[i + 1:] if i >= start else (fresh,)):
                if not _compatible(a.space, b.space) or apart(a, b):
                    continue
                key = (tuple(id(r) for r in a.roots), tuple(id(r) for r in b.roots))
                if key in failed or through(a, b) or through(b, a):
                    continue
                try:
                    merged = _merged(graph, a, b)
                except _CantFuse:
                    failed.add(key)
                    continue
                merged.order = min(a.order, b.order)
                drafts = sorted([d for d in drafts if d is not a and d is not b] + [merged], key=lambda d: d.order)
                deps.merge(a, b, merged)
                break
            if merged is not None:
                break
        if merged is None:
            return drafts
        fresh = merged


def _merged(graph: _Graph, a: _Draft, b: _Draft) -> _Draft:
    """One kernel writing a's and b's roots, over a's space when it has reduced dims, else b's. When that is a's
    space and a read none of b's roots, b's roots are inlined on a's kernel as it is (a merged kernel grows by one
    small kernel a round: rebuilding it whole took 1.0-1.2 s of a GPT step's first compiled call)."""
    space = a.space if a.space.axes is not None else b.space
    if space == a.space and a.builder.touched.isdisjoint(id(r) for r in b.roots):
        return _build(graph, space, b.roots, base=a)
    return _build(graph, space, a.roots + b.roots)


def _apart(graph: _Graph):
    """`apart(a, b)`: whether a library step lies between two kernels' roots in program order and they read no
    whole-space value in common. A merged kernel runs where its first root was, so merging across one would keep
    the later kernel's outputs alive longer (a backward's values recomputed for every layer at once, say) for no
    saving of memory traffic. Kernels that read the same value of their space's size save a pass over it, and
    share what they compute from it: SiLU's backward and the SiLU that its product's weight gradient reads (in
    Llama's backward, on either side of that gradient's matrix products) take one sigmoid per element, not two."""
    pos = {id(v): i for i, e in enumerate(graph.jaxpr.eqns) for v in e.outvars}
    library = sorted(i for i, k in enumerate(graph.eqn_kind) if k == "library")

    def apart(a: _Draft, b: _Draft) -> bool:
        at = [pos[id(r)] for r in a.roots + b.roots]
        if bisect.bisect_left(library, min(at)) == bisect.bisect_left(library, max(at)):
            return False
        size = math.prod(a.space.shape)
        whole = {id(v) for v in a.builder.inputs if math.prod(v.aval.shape) == size}
        return not any(id(v) in whole for v in b.builder.inputs)

    return apart


def _compatible(a: _Space, b: _Space) -> bool:
    if a.axes is not None and b.axes is not None:
        return a == b
    if a.axes is None and b.axes is None:
        return a.shape == b.shape
    rows = a if a.axes is not None else b
    return a.shape == b.shape and _rows_parallel(rows)


class _Dependencies:
    """Which steps (kernels and library equations) read what others write, kept up to date as `_merge` joins two
    kernels into one (rebuilding it for each of a GPT step's 817 merges took a seventh of its first compiled call).
    `through(a, b)`: whether `b` depends on `a` through at least one other step (so they cannot merge)."""

    def __init__(self, graph: _Graph, steps: list):
        self.graph = graph
        self.steps: dict = {}     # id(step) -> (step, its bit in the reach sets, what it reads, what it writes)
        self.writer: dict = {}    # id(var) -> id of the step that writes it
        self.readers: dict = {}   # id(var) -> ids of the steps that read it
        self.succ: dict = {}      # id(step) -> ids of the steps that read what it writes
        self.pred: dict = {}
        self.reach: dict = {}     # id(step) -> bits of the steps reachable from it (until the next merge)
        self.bits = 0
        for st in steps:
            self._add(st)
        for st in steps:
            self._link_reads(id(st))

    def _add(self, st) -> None:
        sid = id(st)
        self.steps[sid] = (st, self.bits, _reads(self.graph, st), _writes(st))
        self.bits += 1
        self.succ[sid], self.pred[sid] = set(), set()
        for vid in self.steps[sid][3]:
            self.writer[vid] = sid

    def _link_reads(self, sid: int) -> None:
        for vid in self.steps[sid][2]:
            self.readers.setdefault(vid, set()).add(sid)
            w = self.writer.get(vid)
            if w is not None and w != sid:
                self.succ[w].add(sid)
                self.pred[sid].add(w)

    def merge(self, a: _Draft, b: _Draft, merged: _Draft) -> None:
        """Replace kernels `a` and `b` by `merged`, which computes both."""
        for old in (id(a), id(b)):
            _, _, reads, writes = self.steps.pop(old)
            for p in self.pred.pop(old):
                self.succ[p].discard(old)
            for c in self.succ.pop(old):
                self.pred[c].discard(old)
            for vid in reads:
                self.readers[vid].discard(old)
            for vid in writes:
                if self.writer.get(vid) == old:
                    del self.writer[vid]
        self._add(merged)
        sid = id(merged)
        self._link_reads(sid)
        for vid in self.steps[sid][3]:
            for r in self.readers.get(vid, ()):
                if r != sid:
                    self.succ[sid].add(r)
                    self.pred[r].add(sid)
        self.reach = {}

    def _reachable(self, sid: int) -> int:
        reach, succ, steps = self.reach, self.succ, self.steps
        stack = [sid]
        while stack:
            j = stack[-1]
            pending = [c for c in succ[j] if c not in reach]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            if j not in reach:
                bits = 0
                for c in succ[j]:
                    bits |= (1 << steps[c][1]) | reach[c]
                reach[j] = bits
        return reach[sid]

    def through(self, a, b) -> bool:
        bit = self.steps[id(b)][1]
        return any(self._reachable(c) >> bit & 1 for c in self.succ[id(a)])


def _schedule(graph: _Graph, drafts: list[_Draft]) -> list:
    """Kernels and library equations in a dependency order that follows the jaxpr's order where it can."""
    pos = {id(e): i for i, e in enumerate(graph.jaxpr.eqns)}
    steps = [(d.order, d) for d in drafts] + [(pos[id(e)], e) for e in graph.library_eqns()]
    writer = {vid: s for _, s in steps for vid in _writes(s)}
    deps = {id(s): {id(writer[v]) for v in _reads(graph, s) if v in writer and writer[v] is not s}
            for _, s in steps}
    done, out, pending = set(), [], sorted(steps, key=lambda t: t[0])
    while pending:
        for i, (_, s) in enumerate(pending):
            if deps[id(s)] <= done:
                out.append(s)
                done.add(id(s))
                del pending[i]
                break
        else:
            raise AssertionError("fusion: the steps form a cycle")
    return out


# ---------------------------------------------------------------- finishing: buffers, coalescing
def _finish(d: _Draft) -> Kernel:
    b = d.builder
    outputs = [r for r, _, _, _ in b.stores]
    stores = []
    for i, (r, view, node, level) in enumerate(b.stores):
        stores.append((b.access(("out", i), view), node, level))
    buffer = {"in": lambda i: i, "out": lambda i: len(b.inputs) + i, "index": lambda i: None}
    accesses = [Access(buffer[where](idx), view.strides, view.offset) for (where, idx), view in b.accesses]
    sizes, n_rows, accesses = _coalesce(d.space.sizes, d.space.n_rows, accesses, d.space.axes is not None)
    live = _topological([n for _, n, _ in stores])
    checks = [(r, b.g.producer[id(r)]) for r in outputs if "check" in b.g.producer[id(r)][1].prim.groups]
    checks = [(r, eqn) for r, (_, eqn) in sorted(checks, key=lambda c: c[1][0])]   # in program order
    return Kernel("reduce" if d.space.axes is not None else "elementwise", sizes, n_rows, list(b.inputs), outputs,
                  accesses, live, stores, [n for n in live if n.op == "reduce"], checks)


def _topological(roots: list[Node]) -> list[Node]:
    out, seen = [], set()

    def visit(n: Node) -> None:
        if id(n) in seen:
            return
        seen.add(id(n))
        for a in n.args:
            visit(a)
        out.append(n)

    for r in roots:
        visit(r)
    return out


def _coalesce(sizes: tuple, n_rows: int, accesses: list, is_reduce: bool):
    """Drop size-1 dims and merge neighbours that every access walks contiguously (rows and cols apart)."""
    def group(dims: list) -> list:
        dims = [k for k in dims if sizes[k] != 1]
        merged: list[list] = []
        for k in dims:
            if merged:
                prev = merged[-1]
                inner = prev[-1]
                if all(a.strides[inner] == a.strides[k] * sizes[k] for a in accesses) and k == inner + 1:
                    prev.append(k)
                    continue
            merged.append([k])
        return merged

    rows = group(list(range(n_rows)))
    cols = group(list(range(n_rows, len(sizes))))
    if not rows:
        rows = [[]]
    if is_reduce and not cols:
        cols = [[]]
    new_sizes = tuple(math.prod(sizes[k] for k in g) for g in rows + cols)
    new_accesses = [Access(a.buffer, tuple(a.strides[g[-1]] if g else 0 for g in rows + cols), a.offset)
                    for a in accesses]
    return new_sizes, len(rows), new_accesses
