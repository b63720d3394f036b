"""The C of gathers and scatters in a standalone program: numpy's advanced indexing (index, index_put),
take_along_axis and index checks, each index checked against its dimension first (error code 2)."""
from __future__ import annotations

from .c_emit import Access, Operand, broadcast_strides, contiguous, nest, prod, size, text

__all__ = ["index", "index_put", "take_along_axis", "check_index"]


def _element(idx) -> str:
    """Element p of index operand `idx` (a literal index is the same at every p)."""
    return idx.ref if idx.literal else f"{idx.ref}[p]"


def _bounds_check(prog, idx, n, what: str) -> None:
    """A serial pass over index array `idx` that fails the call (error code 2) on an index outside [-n, n)."""
    count, at = text(prod(idx.shape)), _element(idx)
    prog.emit([f"for (long long p = 0; p < {count}; p++)",
               f"    if ({at} < -{text(n)} || {at} >= {text(n)}) {{"]
              + ["        " + line for line in prog.fail(
                  2, f"{what}: index %lld is out of range for a dimension of size %lld",
                  f"(long long){at}", f"(long long){text(n)}")] + ["    }"])


def _indexed(prog, x, idxs: list, dims: tuple, shape: list, op: str):
    """How x[idx_0, ..., idx_k at dims] (numpy's advanced indexing, negative indices wrapped) walks x at the
    points of the result's `shape`: (accesses to read, `where(at, off)` -> (lines, x's offset there))."""
    for i, d in zip(idxs, dims):
        _bounds_check(prog, i, x.shape[d], op)
    xst = contiguous(x.shape)
    nb = len(shape) - (len(x.shape) - len(dims))
    first = dims[0] if dims[-1] - dims[0] == len(dims) - 1 else 0   # where the index dims land (numpy's rule)
    rest = [d for d in range(len(x.shape)) if d not in dims]
    rank = len(shape)
    base = Access(x.ref, [0] * rank)
    for p, d in enumerate(rest):
        base.strides[p if p < first else p + nb] = xst[d]
    idx_acc = []
    for i in idxs:
        full = [0] * rank
        full[first:first + nb] = broadcast_strides(i.shape, list(shape[first:first + nb]))
        idx_acc.append(Access(i.ref, full))

    def where(at, off):
        lines, terms = [], []
        for k, (acc, d) in enumerate(zip(idx_acc, dims)):
            lines.append(f"long long j{k} = (long long){at(acc)};")
            lines.append(f"j{k} = j{k} < 0 ? j{k} + {text(x.shape[d])} : j{k};")
            terms.append(f" + j{k} * {text(xst[d])}")
        return lines, off(base) + "".join(terms)

    return [base] + idx_acc, where


def index(prog, eqn) -> None:
    """x[idx_0, ..., idx_k at dims]."""
    x = prog.read(eqn.inputs[0])
    idxs = [prog.read(a) for a in eqn.inputs[1:]]
    out = prog.output(eqn.outvars[0])
    reads, where = _indexed(prog, x, idxs, eqn.params["dims"], out.shape, "index")
    dst = Access(out.ref, contiguous(out.shape))

    def body(at, off):
        lines, offset = where(at, off)
        return lines + [f"{at(dst)} = {x.ref}[{offset}];"]

    prog.emit(nest(out.shape, [dst] + reads, body))


def index_put(prog, eqn) -> None:
    """x with x[idx_0, ..., idx_k at dims] set to (or, accumulating, increased by) values: a copy of x, then one
    serial pass in order (a repeated index: the last value wins, or all of them add up, as numpy's)."""
    x, values = prog.read(eqn.inputs[0]), prog.read(eqn.inputs[1])
    idxs = [prog.read(a) for a in eqn.inputs[2:]]
    out = prog.output(eqn.outvars[0])
    count = text(prod(x.shape))
    prog.emit([f"for (long long p = 0; p < {count}; p++)", f"    {out.ref}[p] = {x.ref}[p];"])
    dims = eqn.params["dims"]
    nb = max(len(i.shape) for i in idxs)
    rest = [x.shape[d] for d in range(len(x.shape)) if d not in dims]
    first = dims[0] if dims[-1] - dims[0] == len(dims) - 1 else 0
    bshape = [1] * nb
    for i in idxs:   # the index arrays' broadcast shape
        for k, n in enumerate(i.shape):
            pos = nb - len(i.shape) + k
            bshape[pos] = n if bshape[pos] == 1 else bshape[pos]
    shape = rest[:first] + bshape + rest[first:]
    reads, where = _indexed(prog, Operand(out.ref, x.dtype, x.shape), idxs, dims, shape, "index_put")
    src = None if values.literal else Access(values.ref, broadcast_strides(values.shape, shape))
    update = "+=" if eqn.params["accumulate"] else "="

    def body(at, off):
        lines, offset = where(at, off)
        return lines + [f"{out.ref}[{offset}] {update} {at(src) if src else values.ref};"]

    prog.emit(nest(shape, reads + ([src] if src else []), body, parallel=False))


def take_along_axis(prog, eqn) -> None:
    x, idx = prog.read(eqn.inputs[0]), prog.read(eqn.inputs[1])
    out = prog.output(eqn.outvars[0])
    axis = eqn.params["axis"]
    n = x.shape[axis]
    _bounds_check(prog, idx, n, "take_along_axis")
    xst = contiguous(x.shape)
    strides = [0 if x.shape[d] == 1 and out.shape[d] != 1 else xst[d] for d in range(len(x.shape))]
    strides[axis] = 0
    src = Access(x.ref, strides)
    ia = Access(idx.ref, contiguous(idx.shape))
    dst = Access(out.ref, contiguous(out.shape))
    prog.emit(nest(out.shape, [dst, src, ia], lambda at, off: [
        f"long long j = (long long){at(ia)};", f"j = j < 0 ? j + {text(n)} : j;",
        f"{at(dst)} = {x.ref}[{off(src)} + j * {text(xst[axis])}];"]))


def check_index(prog, eqn) -> None:
    idx = prog.read(eqn.inputs[0])
    p = eqn.params
    count, at = text(prod(idx.shape)), _element(idx)
    what = p.get("op") or "index"
    low, high = size(p["low"]), size(p["high"])
    prog.emit([f"for (long long p = 0; p < {count}; p++)",
               f"    if ({at} < {text(low)} || {at} >= {text(high)}) {{"]
              + ["        " + line for line in prog.fail(
                  2, f"{what}: index %lld is out of bounds for dimension {p['dim']} (valid: %lld to %lld)",
                  f"(long long){at}", f"(long long){text(low)}", f"(long long){text(high - 1)}")] + ["    }"])
    prog.alias(eqn.outvars[0], eqn.inputs[0])
