"""What a compiled forward keeps for its backward: the fewest bytes from which the backward can recompute the rest.

A split vjp (fnx/transforms/jaxpr_rules.py `split_vjp_jaxpr`) saves every forward value that the backward reads.
Many of them are cheap to compute from others: a softmax's exponentials and probabilities from its scores and
row statistics, a layer norm's output from its input and statistics, an activation's output from its input, a
view from its base. As torch.compile's partitioner does, `rematerialize` finds the set of forward values of
least total size from which the backward can recompute everything it reads through elementwise and movement
equations and short expanding matrix products (attention's scores) alone (a minimum s-t cut of the forward's
graph, where each value is an edge weighted by its bytes, and values that other equations compute hang from the
source), makes those the residuals, and moves the recomputation into the backward, each equation just before
its first use there, so that a recomputed value lives no longer than the backward step that reads it. Constants
reach the backward as its own constants. As torch.compile's partitioner does, a value that a library step (a matrix
product, attention) reads in the forward and again in the backward is kept where recomputing it would run an
expensive primitive (exp, GELU, SiLU, ...): the forward writes it anyway, and the backward would compute and write
it again (GPT's GELU output, which its MLP's second product reads, and that product's weight gradient: a kernel as
long as the GELU itself in every layer's backward). What a short expanding product or im2col computes (attention's
probabilities, a convolution's columns) stays recomputed: keeping it would cost far more memory than its inputs.
"""
from __future__ import annotations

import math
from collections import deque

from ..ir import ClosedJaxpr, Eqn, Jaxpr, Var
from ..ops.windows import im2col_p
from .expressions import emittable

__all__ = ["rematerialize"]


SHORT_PRODUCT = 64   # a matrix product over at most this many terms per element may be recomputed (see below)


def _recomputable(eqn: Eqn, broadcast: set) -> bool:
    """Whether the backward may recompute `eqn` from its inputs: an elementwise or movement equation that a kernel
    computes (no random draw, no check: it would report its error twice), or a matrix product that expands its
    operands over a short contraction (attention's scores: T x T from T x E queries and keys, E <= SHORT_PRODUCT,
    E / 2 flops per byte not kept, which flash attention's backward recomputes too). A value read at a broadcast
    (`broadcast`: ids of values that an elementwise or movement equation with a larger result reads) is kept
    instead: a kernel would recompute it for every element of the larger result (a rotary embedding's cos and sin
    tables). A convolution's im2col columns are recomputed too: a copy of each input element to K places, which the
    compiled plan takes block by block (fnx/lowering/column_blocks.py) instead of keeping K times the input."""
    if id(eqn.outvars[0]) in broadcast:
        return False
    if eqn.prim is im2col_p:
        return True
    groups = eqn.prim.groups
    if eqn.prim.name == "matmul":
        a, b = (x.aval for x in eqn.inputs)
        return (a.ndim >= 2 and b.ndim >= 2 and a.shape[-1] <= SHORT_PRODUCT
                and _nbytes(eqn.outvars[0]) > sum(_nbytes(x) for x in eqn.inputs))
    return (len(eqn.outvars) == 1 and not eqn.prim.multiple_results and ("elementwise" in groups or "movement" in
            groups) and not groups & {"random", "check"} and emittable(eqn))


def _nbytes(v) -> int:
    return math.prod(v.aval.shape) * v.aval.dtype.np.itemsize


class _FlowGraph:
    """A directed graph with edge capacities, its maximum flow from `SOURCE` to `SINK` (Edmonds-Karp: shortest
    augmenting paths), and the nodes the source still reaches afterwards (the source side of a minimum cut)."""

    SOURCE, SINK = "source", "sink"

    def __init__(self):
        self.capacity: dict = {self.SOURCE: {}, self.SINK: {}}

    def edge(self, a, b, capacity: float) -> None:
        self.capacity.setdefault(a, {})
        self.capacity.setdefault(b, {})
        self.capacity[a][b] = self.capacity[a].get(b, 0) + capacity
        self.capacity[b].setdefault(a, 0)

    def _path(self) -> list | None:
        parent, queue = {self.SOURCE: None}, deque([self.SOURCE])
        while queue:
            a = queue.popleft()
            for b, left in self.capacity[a].items():
                if left > 0 and b not in parent:
                    parent[b] = a
                    if b == self.SINK:
                        path = [b]
                        while parent[path[-1]] is not None:
                            path.append(parent[path[-1]])
                        return path[::-1]
                    queue.append(b)
        return None

    def source_side(self) -> set:
        """Saturate every augmenting path, then the nodes still reachable from the source."""
        while (path := self._path()) is not None:
            pairs = list(zip(path, path[1:]))
            flow = min(self.capacity[a][b] for a, b in pairs)
            for a, b in pairs:
                self.capacity[a][b] -= flow
                self.capacity[b][a] += flow
        seen, queue = {self.SOURCE}, deque([self.SOURCE])
        while queue:
            for b, left in self.capacity[queue.popleft()].items():
                if left > 0 and b not in seen:
                    seen.add(b)
                    queue.append(b)
        return seen


def rematerialize(fwd: ClosedJaxpr, bwd: ClosedJaxpr, n_outs: int) -> tuple[ClosedJaxpr, ClosedJaxpr]:
    """`fwd` (*primals) -> (*outs, *residuals) and `bwd` (*residuals, *cotangents) -> ..., whose residual inputs
    are fwd's residual variables themselves (as split_vjp_jaxpr builds them), rewritten so that fwd saves a
    minimum-size set of values and bwd recomputes the other residuals from them (see the module docstring)."""
    f, b = fwd.jaxpr, bwd.jaxpr
    residuals = f.outvars[n_outs:]
    n_res = len(residuals)
    if b.constvars or any(r is not v for r, v in zip(residuals, b.invars)):
        return fwd, bwd
    producer = {id(v): e for e in f.eqns for v in e.outvars}
    consts = {id(v): (v, c) for v, c in zip(f.constvars, fwd.consts)}
    broadcast = {id(a) for e in f.eqns if e.prim.groups & {"elementwise", "movement"} for a in e.inputs
                 if isinstance(a, Var) and math.prod(a.aval.shape) < math.prod(e.outvars[0].aval.shape)}
    kept = _written_twice(f, b, residuals, producer, broadcast)
    cut = _min_cut(f, residuals, producer, consts, broadcast, kept)
    done, read = {id(v) for v in cut}, set()
    used_consts: dict[int, tuple] = {}
    eqns = []

    def need(a) -> None:
        """Make `a` available in bwd: a constant of bwd, or recomputed (its inputs first) unless saved."""
        pending = [(a, False)]
        while pending:
            v, ready = pending.pop()
            if not isinstance(v, Var) or id(v) in read:
                continue
            if id(v) in done:
                read.add(id(v))
                continue
            if id(v) in consts:
                used_consts[id(v)] = consts[id(v)]
                continue
            eqn = producer.get(id(v))
            if eqn is None:   # a value of bwd itself
                continue
            if ready:
                done.add(id(v))
                read.add(id(v))
                eqns.append(eqn)
                continue
            pending.append((v, True))
            pending.extend((x, False) for x in eqn.inputs)

    for eqn in b.eqns:
        for a in eqn.inputs:
            need(a)
        eqns.append(eqn)
    for a in b.outvars:
        need(a)
    saved = [v for v in cut if id(v) in read]   # a cut input whose consumers are all saved is not needed
    pairs = list(used_consts.values())
    new_fwd = ClosedJaxpr(Jaxpr(f.constvars, f.invars, f.eqns, f.outvars[:n_outs] + saved), fwd.consts)
    new_bwd = ClosedJaxpr(Jaxpr([v for v, _ in pairs], saved + b.invars[n_res:], eqns, b.outvars),
                          [c for _, c in pairs])
    return new_fwd, new_bwd


def _views(eqn: Eqn) -> bool:
    """Whether `eqn` makes a view or rearrangement of one value (reshape, transpose, broadcast): what a library step
    reads through it, it reads from its input."""
    return "movement" in eqn.prim.groups and len(eqn.outvars) == 1 and sum(isinstance(a, Var) for a in eqn.inputs) == 1


def _library_reads(j: Jaxpr) -> set[int]:
    """The ids of the values of `j` that an equation no kernel computes (a matrix product, attention) reads, directly
    or through views: each of them is written to memory."""
    found = {id(a) for e in j.eqns if not emittable(e) for a in e.inputs if isinstance(a, Var)}
    for eqn in reversed(j.eqns):
        if _views(eqn) and id(eqn.outvars[0]) in found:
            found.update(id(a) for a in eqn.inputs if isinstance(a, Var))
    return found


def _written_twice(f: Jaxpr, b: Jaxpr, residuals: list, producer: dict, broadcast: set) -> set[int]:
    """The ids of the values of `f` to keep whatever their size (see the module docstring): values that library
    steps read in the forward and, through a residual that is the value or a view of it (the transposed activation
    that a weight gradient reads), in the backward, and that are costly to recompute (`_costly`). Keeping the value
    itself rather than the view lets the backward take its other views from it too (tanh's derivative reads its
    output)."""
    forward, backward = _library_reads(f), _library_reads(b)
    found = set()
    for r, seen in zip(residuals, b.invars):
        if id(seen) not in backward:
            continue
        v = r
        while (eqn := producer.get(id(v))) is not None and _views(eqn):
            v = next(a for a in eqn.inputs if isinstance(a, Var))
        if id(v) in forward and _costly(v, producer, broadcast):
            found.add(id(v))
    return found


def _costly(v: Var, producer: dict, broadcast: set) -> bool:
    """Whether recomputing `v` from the values that must be kept would run an expensive primitive and no expanding
    product or im2col."""
    stack, seen, expensive = [v], set(), False
    while stack:
        eqn = producer.get(id(stack.pop()))
        if eqn is None or id(eqn) in seen or not _recomputable(eqn, broadcast):
            continue
        if eqn.prim.name == "matmul" or eqn.prim is im2col_p:
            return False
        seen.add(id(eqn))
        expensive = expensive or "expensive" in eqn.prim.groups
        stack.extend(a for a in eqn.inputs if isinstance(a, Var))
    return expensive


def _min_cut(f: Jaxpr, residuals: list, producer: dict, consts: dict, broadcast: set,
             kept: set[int]) -> list[Var]:
    """The values of `f` to save, in program order: a minimum cut between what only the forward computes (its
    inputs cost nothing to keep) and the `residuals`, through recomputable equations; the values whose ids are in
    `kept` hang from the source: saved, never recomputed (`rematerialize`)."""
    graph, seen, stack = _FlowGraph(), set(), list(residuals)
    infinite = float("inf")
    inputs = {id(v) for v in f.invars}
    for r in residuals:
        graph.edge(("out", id(r)), graph.SINK, infinite)
    while stack:   # the values the residuals are computed from, as far as recomputation reaches
        v = stack.pop()
        if id(v) in seen or id(v) in consts:
            continue
        seen.add(id(v))
        graph.edge(("in", id(v)), ("out", id(v)), 0 if id(v) in inputs else _nbytes(v))
        eqn = producer.get(id(v))
        # an input, a value only the forward computes, or one to keep
        if eqn is None or id(v) in kept or not _recomputable(eqn, broadcast):
            graph.edge(graph.SOURCE, ("in", id(v)), infinite)
            continue
        for a in eqn.inputs:
            if isinstance(a, Var) and id(a) not in consts:
                graph.edge(("out", id(a)), ("in", id(v)), infinite)
                stack.append(a)
    reached = graph.source_side()
    order = list(f.invars) + [v for e in f.eqns for v in e.outvars]
    return [v for v in order if ("in", id(v)) in reached and ("out", id(v)) not in reached]
