"""Sizes and loop nests of the standalone C program: the pieces every primitive's C is written with.

A size is an `int` or a symbolic dimension (fnx.export's `Dim`, a polynomial over named sizes), so the same
emitter writes static and dynamic programs: arithmetic on sizes is Python's (`Dim` folds what is known), and
`text` writes a size as C (a Dim as its `int64_t` expression over the program's size arguments). An array
operand is read through an `Access` (a base offset and a stride per loop dim), so transposes, broadcasts,
slices and flips are index arithmetic, never copies.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Operand", "Access", "size", "prod", "text", "static", "contiguous", "broadcast_strides", "split_axes",
           "nest", "inner_loops", "PARALLEL_MIN"]

# Loops with fewer iterations than this run on one thread (a parallel region costs a few microseconds).
PARALLEL_MIN = 32768


def size(d):
    """A shape entry or integer param as a size: an int, or the symbolic dim itself."""
    return d if hasattr(d, "c_expr") else int(d)


def static(x) -> bool:
    """Whether a size is known (an int) rather than symbolic."""
    return isinstance(x, int)


def prod(xs):
    out = 1
    for x in xs:
        out = out * size(x)
    return out


def text(x) -> str:
    """A size as C source: an int literal, or a symbolic dim's parenthesised expression."""
    return str(x) if isinstance(x, int) else f"({x.c_expr()})"


def contiguous(shape) -> list:
    """Row-major strides of `shape` (sizes)."""
    strides, step = [], 1
    for d in reversed(list(shape)):
        strides.append(step)
        step = step * size(d)
    return strides[::-1]


@dataclass
class Operand:
    """A value of the program: a pointer name (or, with `literal`, a C expression of one element: a literal or a
    temporary of a loop), its dtype and its shape (sizes)."""

    ref: str
    dtype: object
    shape: list
    literal: bool = False


@dataclass
class Access:
    """An array read or written in a loop nest: `pointer[base + sum(i_d * strides[d])]`."""

    pointer: str
    strides: list
    base: object = 0   # a size

    def offset(self, index: list[str]) -> str:
        terms = [] if self.base == 0 else [text(self.base)]
        for i, s in zip(index, self.strides):
            if s != 0:
                terms.append(i if s == 1 else f"{i} * {text(s)}")
        return " + ".join(terms) or "0"

    def at(self, index: list[str]) -> str:
        return f"{self.pointer}[{self.offset(index)}]"


def _merge(shape: list, strides: list[list]) -> tuple[list, list[list]]:
    """Merge neighbouring dims that every access walks as one (static sizes only): fewer, longer loops."""
    out_shape, out_strides = [shape[-1]], [[st[-1]] for st in strides]
    for d in range(len(shape) - 2, -1, -1):
        n = out_shape[0]
        if all(isinstance(st[d], int) and isinstance(o[0], int) and st[d] == o[0] * n
               for st, o in zip(strides, out_strides)):
            out_shape[0] = shape[d] * n
        else:
            out_shape.insert(0, shape[d])
            for st, o in zip(strides, out_strides):
                o.insert(0, st[d])
    return out_shape, out_strides


def nest(shape: list, accesses: list[Access], make_body, *, parallel: bool = True) -> list[str]:
    """A loop nest over `shape` whose innermost lines are `make_body(at, off)`: `at(access)` is the element of one
    of `accesses` at the current point, `off(access)` its offset (neighbouring dims merged where every access
    allows). The outer dims run in parallel (OpenMP) when the nest is large; the innermost loop is left plain
    for the compiler to vectorise."""
    shape = list(shape)
    reduced = {id(a): a for a in accesses}
    if len(shape) > 1 and all(isinstance(s, int) for s in shape):
        shape, strides = _merge(shape, [a.strides for a in accesses])
        reduced = {id(a): Access(a.pointer, st, a.base) for a, st in zip(accesses, strides)}
    rank = len(shape)
    index = [f"i{d}" for d in range(rank)]
    body = make_body(lambda a: reduced[id(a)].at(index), lambda a: reduced[id(a)].offset(index))
    if rank == 0:
        return ["{"] + ["    " + b for b in body] + ["}"]
    lines = []
    total = prod(shape)
    if parallel and not (isinstance(total, int) and total < PARALLEL_MIN):
        collapse = f" collapse({rank - 1})" if rank > 2 else ""
        cond = "" if isinstance(total, int) else f" if ({text(total)} >= {PARALLEL_MIN})"
        lines.append(f"FNX_OMP(omp parallel for{collapse}{cond})")
    for d in range(rank):
        lines.append("    " * d + f"for (long long {index[d]} = 0; {index[d]} < {text(shape[d])}; {index[d]}++)"
                     + (" {" if d == rank - 1 else ""))
    lines += ["    " * rank + b for b in body]
    lines.append("    " * (rank - 1) + "}")
    return lines


def broadcast_strides(shape: list, out_shape: list) -> list:
    """Strides that read an operand of `shape` at the points of `out_shape` (numpy broadcasting)."""
    own = contiguous(shape)
    lead = len(out_shape) - len(shape)
    out = [0] * lead
    for d, (n, st) in enumerate(zip(shape, own)):
        out.append(0 if n == 1 and out_shape[lead + d] != 1 else st)
    return out


def split_axes(shape: list, axes) -> tuple[list, list]:
    axes = set(axes)
    return [d for d in range(len(shape)) if d not in axes], [d for d in range(len(shape)) if d in axes]


def inner_loops(dims: list, shape: list, strides: list, body: list[str], var: str = "r") -> tuple[list, str]:
    """Serial loops over `dims` (inside a nest) and the offset they add: (lines, offset terms)."""
    lines, terms = [], []
    for k, d in enumerate(dims):
        lines.append("    " * k + f"for (long long {var}{k} = 0; {var}{k} < {text(shape[d])}; {var}{k}++)"
                     + (" {" if k == len(dims) - 1 else ""))
        if strides[d] != 0:
            terms.append(f"{var}{k} * {text(strides[d])}")
    if not dims:
        return body, ""
    return lines + ["    " * len(dims) + b for b in body] + ["    " * (len(dims) - 1) + "}"], \
        "".join(f" + {t}" for t in terms)
