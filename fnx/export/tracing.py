"""Trace a function into a symbolic program, by tracing it at several sizes and fitting what changes.

fnx traces with concrete shapes (Python code reads `x.shape` as ints). To export a program whose dimensions
are symbols, `trace_symbolic` traces the function at a grid of sizes, three values per symbol (the example's
and two others, none below 2), plus one more size of every symbol to verify. The traces must have the same
structure: the same primitives in the same order reading the same variables. Every integer that differs
between them (a shape entry, a reshape's size, a slice's bound, a scan's length) is fitted with the polynomial
of degree at most 2 in each symbol that takes those values on the grid, with integer coefficients, and must
give the verification trace's value too; scalar literals that change (the `n` of a mean over a dynamic axis)
are fitted as `n` or `1/n`; constants made while tracing that change (an `arange(seq)`, a mask of ones) become
equations that compute them, when they are fills or aranges.
"""
from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Callable, Sequence

import numpy as np

from .. import dtypes as _dt
from ..core import FnxValueError, ShapedArray
from ..ir import ClosedJaxpr, Eqn, Jaxpr, Literal, Var
from ..lowering.passes import dce
from ..tensor import Tensor, from_array
from ..transforms.compile import tracing
from ..transforms.tracing import trace_to_jaxpr
from .primitives import exportable, prepare
from .specialize import on_device
from .symbolic import Dim, DimLiteral, IntOrDim, evaluate

__all__ = ["trace_symbolic", "sample_envs", "MAX_SYMBOLS"]

MAX_SYMBOLS = 4   # 3**4 + 1 traces
_DEGREE = 2       # per symbol


def sample_envs(examples: dict[str, int]) -> tuple[list[dict], list[dict]]:
    """(grid, verification): the symbol values to trace at. The grid takes three values of each symbol, the
    example's first (when it is at least 2), then smaller ones where the example allows, else larger ones;
    the verification environment takes a fourth value of each."""
    values = {}
    for name, v in examples.items():
        if v >= _DEGREE + 3:
            values[name] = [v - i for i in range(_DEGREE + 2)]
        else:
            start = [v] if v >= 2 else []
            values[name] = (start + [x for x in range(2, 2 + _DEGREE + 2) if x != v])[:_DEGREE + 2]
    names = list(examples)
    grid = [dict(zip(names, combo)) for combo in itertools.product(*[values[n][:_DEGREE + 1] for n in names])]
    return grid, [{n: values[n][_DEGREE + 1] for n in names}]


def trace_symbolic(flat_fun: Callable, in_avals: Sequence[ShapedArray], examples: dict[str, int]) -> ClosedJaxpr:
    """The program of `flat_fun` (flat tensors -> flat tensors) for inputs of `in_avals`, whose shapes may hold
    bare symbols (Dims) with the example values `examples`; constants come back as numpy arrays."""
    known = exportable()
    grid, check = sample_envs(examples) if examples else ([{}], [])
    envs = grid + check
    traces = []
    for env in envs:
        avals = [ShapedArray(tuple(evaluate(d, env) for d in a.shape), a.dtype, a.device) for a in in_avals]
        try:
            with tracing("export"):
                closed = trace_to_jaxpr(flat_fun, avals)
        except Exception as e:
            if env is envs[0]:
                raise
            sizes = ", ".join(f"{k}={v}" for k, v in env.items())
            raise FnxValueError(f"fnx.export: tracing the function at {sizes} (fnx.export traces at the example's "
                                f"sizes and the three below, or from 2 up, to find how shapes depend on the symbolic "
                                f"dimensions) failed: {type(e).__name__}: {e}. Give example arguments at the largest "
                                f"size the function accepts; a dimension that takes only some sizes (even ones, say) "
                                f"cannot be dynamic") from e
        traces.append(dce(prepare(closed, known)))   # dead code goes (it depends on no size: traces still align)
    return _Aligner(envs, _Fitter(list(examples), grid, check), known).closed(traces, in_avals)


# ---------------------------------------------------------------- fitting integers
class _Fitter:
    """Fits the values an integer takes over the grid with a polynomial, checked on the verification sizes."""

    def __init__(self, names: list[str], grid: list[dict], check: list[dict]):
        self.names, self.grid, self.check = names, grid, check
        self.envs = grid + check
        self.inverses = []   # per symbol: the inverse Vandermonde matrix of its grid values
        for i, n in enumerate(names):
            nodes = [grid[k * (_DEGREE + 1) ** (len(names) - 1 - i)][n] for k in range(_DEGREE + 1)]
            self.inverses.append(_inverse_vandermonde(nodes))
        self.cache: dict[tuple, IntOrDim | None] = {}

    def fit(self, values: Sequence[int]) -> IntOrDim | None:
        """The polynomial taking `values` (one per environment), or None when there is none."""
        key = tuple(values)
        if all(v == key[0] for v in key):
            return key[0]
        if key not in self.cache:
            self.cache[key] = self._solve(key)
        return self.cache[key]

    def _solve(self, values: tuple) -> IntOrDim | None:
        n = len(self.names)
        coeffs = np.array([Fraction(v) for v in values[:len(self.grid)]], dtype=object).reshape((_DEGREE + 1,) * n)
        for axis, inv in enumerate(self.inverses):
            coeffs = np.moveaxis(np.tensordot(inv, coeffs, axes=([1], [axis])), 0, axis)
        terms = {}
        for powers in itertools.product(range(_DEGREE + 1), repeat=n):
            c = coeffs[powers]
            if c.denominator != 1:
                return None
            terms[tuple(name for name, p in zip(self.names, powers) for _ in range(p))] = int(c)
        poly = Dim.make(terms)
        if any(evaluate(poly, env) != v for env, v in zip(self.envs, values)):
            return None
        return poly

    def describe(self, values: Sequence) -> str:
        return ", ".join(f"{v} at {_sizes(env)}" for env, v in zip(self.envs, values))


def _inverse_vandermonde(nodes: list[int]) -> np.ndarray:
    """The inverse of V[i][k] = nodes[i]**k, in exact fractions (Gauss-Jordan on a 3x3 matrix)."""
    size = len(nodes)
    rows = [[Fraction(x) ** k for k in range(size)] + [Fraction(int(i == r)) for i in range(size)]
            for r, x in enumerate(nodes)]
    for col in range(size):
        pivot = next(r for r in range(col, size) if rows[r][col] != 0)
        rows[col], rows[pivot] = rows[pivot], rows[col]
        rows[col] = [x / rows[col][col] for x in rows[col]]
        for r in range(size):
            if r != col and rows[r][col] != 0:
                factor = rows[r][col]
                rows[r] = [a - factor * b for a, b in zip(rows[r], rows[col])]
    return np.array([row[size:] for row in rows], dtype=object)


def _sizes(env: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in env.items()) or "the example's sizes"


# ---------------------------------------------------------------- aligning traces
class _Mismatch(Exception):
    """The traces differ in structure; `what` says where, `traces` which ones differ from the first."""

    def __init__(self, what: str, traces: list[int]):
        super().__init__(what)
        self.what, self.traces = what, traces


class _Aligner:
    """Walks the traces in step and builds one symbolic program from them."""

    def __init__(self, envs: list[dict], fitter: _Fitter, known: dict):
        self.envs, self.fitter, self.known = envs, fitter, known

    def closed(self, traces: list[ClosedJaxpr], in_avals: Sequence[ShapedArray]) -> ClosedJaxpr:
        try:
            return self._closed(traces, in_avals)
        except _Mismatch as m:
            raise FnxValueError(f"fnx.export: the program's structure depends on {self._blame(m.traces)}: "
                                f"{m.what}. Make the function trace the same operations at every size (no Python "
                                f"branch on a dynamic dimension), or make that dimension static") from None

    def _blame(self, differing: list[int]) -> str:
        base = self.envs[0]
        best = min(differing, key=lambda i: sum(self.envs[i][n] != base[n] for n in base))
        names = [n for n in base if self.envs[best][n] != base[n]]
        return " or ".join(f"dimension '{n}'" for n in names) + f" (compare {_sizes(base)} with " \
                                                                  f"{_sizes(self.envs[best])})"

    def _closed(self, traces, in_avals) -> ClosedJaxpr:
        jaxprs = [t.jaxpr for t in traces]
        maps: list[dict] = [{} for _ in traces]
        self._same([len(j.constvars) for j in jaxprs], "the number of constants")
        consts, constvars, prologue = [], [], []
        for k, vs in enumerate(zip(*[j.constvars for j in jaxprs])):
            values = [t.consts[k] for t in traces]
            if _same_values(values):
                v = Var(self._aval([x.aval for x in vs], f"constant {k}"))
                constvars.append(v)
                consts.append(_host(values[0]))
            else:
                v = _generate(values, self._aval([x.aval for x in vs], f"constant {k}"), self.fitter, self.known,
                              prologue)
            for m, x in zip(maps, vs):
                m[id(x)] = v
        invars = self._binders(maps, [j.invars for j in jaxprs], "the inputs")
        for v, want in zip(invars, in_avals):
            v.aval = ShapedArray(want.shape, v.aval.dtype, v.aval.device)
        eqns = prologue + self._eqns(maps, jaxprs)
        outvars = self._atoms(maps, [j.outvars for j in jaxprs], "the outputs")
        return ClosedJaxpr(Jaxpr(constvars, invars, eqns, outvars), consts)

    def _nested(self, closeds: list, where: str):
        jaxprs = [c.jaxpr if isinstance(c, ClosedJaxpr) else c for c in closeds]
        maps: list[dict] = [{} for _ in closeds]
        constvars = self._binders(maps, [j.constvars for j in jaxprs], f"{where}'s constants")
        invars = self._binders(maps, [j.invars for j in jaxprs], f"{where}'s inputs")
        eqns = self._eqns(maps, jaxprs)
        outvars = self._atoms(maps, [j.outvars for j in jaxprs], f"{where}'s outputs")
        j = Jaxpr(constvars, invars, eqns, outvars)
        if not isinstance(closeds[0], ClosedJaxpr):
            return j
        for k in range(len(constvars)):
            if not _same_values([c.consts[k] for c in closeds]):
                raise FnxValueError(f"fnx.export: a constant of {where} changes with the symbolic dimensions; "
                                    f"compute it from the inputs")
        return ClosedJaxpr(j, [_host(c) for c in closeds[0].consts])

    def _eqns(self, maps, jaxprs) -> list[Eqn]:
        self._same([len(j.eqns) for j in jaxprs], "the number of equations")
        out = []
        for i, es in enumerate(zip(*[j.eqns for j in jaxprs])):
            where = f"equation {i} ({es[0].prim.name})"
            self._same([e.prim.name for e in es], f"the primitive of equation {i}")
            inputs = self._atoms(maps, [e.inputs for e in es], where)
            keys = [tuple(sorted(e.params)) for e in es]
            self._same(keys, f"the parameter names of {where}")
            params = {k: self._param([e.params[k] for e in es], f"{where}'s parameter '{k}'") for k in keys[0]}
            outvars = self._binders(maps, [e.outvars for e in es], where)
            out.append(Eqn(es[0].prim, inputs, params, outvars))
        return out

    def _binders(self, maps, lists, where: str) -> list[Var]:
        self._same([len(vs) for vs in lists], f"the number of variables {where} binds")
        out = []
        for vs in zip(*lists):
            v = Var(self._aval([x.aval for x in vs], where))
            for m, x in zip(maps, vs):
                m[id(x)] = v
            out.append(v)
        return out

    def _atoms(self, maps, lists, where: str) -> list:
        self._same([len(a) for a in lists], f"the number of operands of {where}")
        out = []
        for atoms in zip(*lists):
            if all(isinstance(a, Var) for a in atoms):
                found = [m[id(a)] for m, a in zip(maps, atoms)]
                self._same([id(f) for f in found], f"which variable {where} reads")
                out.append(found[0])
            elif all(isinstance(a, Literal) for a in atoms):
                out.append(self._literal(atoms, where))
            else:   # a variable in some traces, a literal in others: this raises
                self._same(["a variable" if isinstance(a, Var) else "a literal" for a in atoms],
                           f"an operand of {where}")
        return out

    def _literal(self, atoms, where: str) -> Literal:
        aval = self._aval([a.aval for a in atoms], f"a literal of {where}")
        values = [a.val.numpy() for a in atoms]
        if _same_values(values):
            return atoms[0]
        found = _fit_scalar(values, aval.dtype, self.fitter)
        if found is None:
            raise FnxValueError(f"fnx.export: a constant of {where} takes the values {self.fitter.describe(values)}, "
                                f"which are neither a polynomial n in the symbolic dimensions nor 1/n; compute it "
                                f"from the inputs' shapes with tensor operations instead")
        return found(aval)

    def _param(self, values: list, where: str):
        v0 = values[0]
        if isinstance(v0, bool) or not isinstance(v0, (int, tuple, Jaxpr, ClosedJaxpr)):
            self._same([_key(v) for v in values], f"{where} ({v0!r})")
            return v0
        if isinstance(v0, int):
            self._same([type(v) for v in values], where)
            return self._fit(values, where)
        if isinstance(v0, tuple):
            self._same([type(v) is tuple and len(v) for v in values], f"the length of {where}")
            return tuple(self._param(list(col), f"{where}[{i}]") for i, col in enumerate(zip(*values)))
        self._same([type(v) for v in values], where)
        return self._nested(values, where)

    def _aval(self, avals: list[ShapedArray], where: str) -> ShapedArray:
        self._same([(a.ndim, a.dtype, a.device) for a in avals], f"the rank, dtype or device of {where}")
        shape = [self._fit(sizes, f"dimension {axis} of {where}")
                 for axis, sizes in enumerate(zip(*[a.shape for a in avals]))]
        return ShapedArray(tuple(shape), avals[0].dtype, avals[0].device)

    def _fit(self, values, what: str) -> IntOrDim:
        found = self.fitter.fit(values)
        if found is None:
            raise FnxValueError(f"fnx.export: {what} takes the values {self.fitter.describe(values)}, which no "
                                f"polynomial in the symbolic dimensions with integer coefficients gives (of degree at "
                                f"most {_DEGREE} in each): it depends on them through something else than +, - and * "
                                f"(min, //, a Python branch)")
        return found

    @staticmethod
    def _same(keys: list, what: str) -> None:
        differing = [i for i, k in enumerate(keys) if k != keys[0]]
        if differing:
            raise _Mismatch(f"{what} differs ({keys[0]!r} against {keys[differing[0]]!r})", differing)


def _key(v):
    """A comparable form of a parameter value: NaN equals NaN, and 0.0 differs from -0.0."""
    if isinstance(v, float):
        return ("float", np.float64(v).tobytes())
    return (type(v).__name__, v)


def _host(value) -> np.ndarray:
    """A constant as a numpy array (on the host)."""
    return np.asarray(value.numpy(force=True)) if isinstance(value, Tensor) else np.asarray(value)


def _same_values(values: list) -> bool:
    first = values[0]
    if all(v is first for v in values):
        return True
    arrays = [_host(v) for v in values]
    return all(a.shape == arrays[0].shape and a.dtype == arrays[0].dtype and a.tobytes() == arrays[0].tobytes()
               for a in arrays)


def _fit_scalar(values: list, dtype: _dt.dtype, fitter: _Fitter):
    """A function of the literal's aval giving the DimLiteral that takes `values`, or None."""
    wide = [float(np.asarray(v, dtype=np.float64)) for v in values]
    for reciprocal in (False, True):
        try:
            ints = [round(1.0 / w) if reciprocal else round(w) for w in wide]
        except (ZeroDivisionError, OverflowError, ValueError):
            continue
        poly = fitter.fit(ints)
        if isinstance(poly, Dim) and all(
                np.asarray(DimLiteral.value_of(poly, reciprocal, env), dtype=dtype.np).tobytes()
                == np.asarray(v, dtype=dtype.np).tobytes() for env, v in zip(fitter.envs, values)):
            return lambda aval, poly=poly, reciprocal=reciprocal: DimLiteral(poly, reciprocal, aval)
    return None


# ---------------------------------------------------------------- constants that change with the dimensions
def _generate(values: list, aval: ShapedArray, fitter: _Fitter, known: dict, eqns: list) -> Var:
    """Append equations computing a constant that changes with the dimensions (a fill, or an arange along one
    axis broadcast over the others) to `eqns`, and return the variable holding it."""
    arrays = [_host(v) for v in values]
    flat = [a.reshape(-1) for a in arrays]
    dtype, device = aval.dtype, aval.device
    if all(f.size for f in flat) and all(np.all(f == f[0]) and f[0] == flat[0][0] for f in flat):
        return _emit(eqns, known["broadcast_to"], [_literal(arrays[0].reshape(-1)[0], dtype, device)],
                     {"shape": aval.shape}, aval)
    for axis in range(aval.ndim):
        pattern = _arange_along(arrays, axis)
        if pattern is not None:
            return _emit_arange(eqns, known, aval, axis, *pattern)
    raise FnxValueError(f"fnx.export: a constant {aval.str_short()} made while tracing changes with the symbolic "
                        f"dimensions and is neither a fill nor an arange: compute it from the inputs with tensor "
                        f"operations, or make those dimensions static")


def _arange_along(arrays: list[np.ndarray], axis: int):
    """(start, step) when every array is start + step * index along `axis` (integers, the same in all)."""
    first = arrays[0]
    if first.shape[axis] < 2 or first.dtype.kind not in "iuf" or 0 in first.shape:
        return None
    line = np.moveaxis(first, axis, 0).reshape(first.shape[axis], -1)[:, 0]
    start, step = line[0].item(), line[1].item() - line[0].item()
    if start != int(start) or step != int(step):
        return None
    start, step = int(start), int(step)
    for a in arrays:
        n = a.shape[axis]
        expect = (start + step * np.arange(n, dtype=np.int64)).astype(a.dtype)
        expect = expect.reshape((1,) * axis + (n,) + (1,) * (a.ndim - axis - 1))
        if not np.array_equal(np.broadcast_to(expect, a.shape), a):
            return None
    return start, step


def _emit_arange(eqns: list, known: dict, aval: ShapedArray, axis: int, start: int, step: int) -> Var:
    n, device, i64 = aval.shape[axis], aval.device, _dt.int64
    one = _literal(1, i64, device)
    line = ShapedArray((n,), i64, device)
    x = _emit(eqns, known["broadcast_to"], [one], {"shape": (n,)}, line)
    x = _emit(eqns, known["cumsum"], [x], {"axis": 0, "reverse": False}, line)
    x = _emit(eqns, known["sub"], [x, one], {}, line)
    if step != 1:
        x = _emit(eqns, known["mul"], [x, _literal(step, i64, device)], {}, line)
    if start != 0:
        x = _emit(eqns, known["add"], [x, _literal(start, i64, device)], {}, line)
    if aval.dtype is not i64:
        x = _emit(eqns, known["convert"], [x], {"dtype": aval.dtype}, ShapedArray((n,), aval.dtype, device))
    if aval.ndim > 1:
        shape = (1,) * axis + (n,) + (1,) * (aval.ndim - axis - 1)
        x = _emit(eqns, known["reshape"], [x], {"shape": shape}, ShapedArray(shape, aval.dtype, device))
    if x.aval.shape != aval.shape:
        x = _emit(eqns, known["broadcast_to"], [x], {"shape": aval.shape}, aval)
    return x


def _emit(eqns: list, prim, inputs: list, params: dict, aval: ShapedArray) -> Var:
    out = Var(aval)
    eqns.append(Eqn(prim, inputs, params, [out]))
    return out


def _literal(value, dtype: _dt.dtype, device) -> Literal:
    return Literal(on_device(from_array(np.asarray(value, dtype=dtype.np)), device), ShapedArray((), dtype, device))
