"""The C of each primitive in a standalone program: one emitter per primitive (or family), over loop nests.

An emitter takes the program being written (fnx/export/c_program.py `CProgram`: operands, output buffers,
error exits) and one equation, and appends the lines that compute it. Elementwise primitives use the C
expression they declare for fnx.compile (`Primitive.c`, fnx/lowering/expressions.py), so the math is the
compiler's; random primitives call the same Threefry (templates/c_math.h.j2). Data movement (transpose,
broadcast, slice, flip, im2col) is index arithmetic on the operand (`c_emit.Access`).
"""
from __future__ import annotations

import itertools

from ..core import Primitive
from ..lowering.expressions import CLASS, IDENTITY, INT_LIMITS, expression, random_half
from .c_emit import Access, Operand, contiguous, nest, prod, size, static, text

__all__ = ["EMITTERS", "supported", "emitter", "elementwise", "fusible"]


def _broadcast_strides(shape: list, out_shape: list) -> list:
    """Strides that read an operand of `shape` at the points of `out_shape` (numpy broadcasting)."""
    own = contiguous(shape)
    lead = len(out_shape) - len(shape)
    out = [0] * lead
    for d, (n, st) in enumerate(zip(shape, own)):
        out.append(0 if n == 1 and out_shape[lead + d] != 1 else st)
    return out


# ---------------------------------------------------------------- elementwise
def _operand_value(prog, atom, out_shape, loads: list, accesses: list, temps: dict):
    """The C value of an elementwise operand: a temporary of the loop, a literal, or a load through a
    broadcasting access."""
    if id(atom) in temps:
        return temps[id(atom)]
    op = prog.read(atom)
    if op.literal:
        return op.ref
    acc = Access(op.ref, _broadcast_strides(op.shape, out_shape))
    accesses.append(acc)
    loads.append((f"a{len(loads)}", op.dtype, acc))
    return f"a{len(loads) - 1}"


def _elementwise_expr(prog, eqn, args: list[str]) -> str:
    """The primitive's C expression over operand values `args` (as fnx/lowering/codegen.py writes it)."""
    prim, out = eqn.prim, eqn.outvars[0].aval
    if prim.name == "convert":
        return f"({args[0]} != 0)" if out.dtype.name == "bool" else f"({prog.types[out.dtype.name]}){args[0]}"
    dtype = eqn.inputs[-1].aval.dtype
    form = expression(prim, CLASS[dtype.name], "c")
    if callable(form):
        return form(*args, **eqn.params)
    params = {k: prog.literal(v, dtype) for k, v in eqn.params.items()}
    return form.format(*args, **params)


def elementwise(prog, eqns: list, stored: set) -> None:
    """A chain of elementwise equations of one output shape as one loop (softmax's exp and division, layer norm's
    arithmetic): each value is a temporary of the loop body, stored only when `stored` holds its variable's id
    (something after the chain reads it)."""
    shape = [size(d) for d in eqns[0].outvars[0].aval.shape]
    loads, accesses, lines, stores, temps, read = [], [], [], [], {}, set()
    for k, eqn in enumerate(eqns):
        args = [_operand_value(prog, a, shape, loads, accesses, temps) for a in eqn.inputs]
        read.update(args)
        var = eqn.outvars[0]
        lines.append(f"const {prog.temp_types[var.aval.dtype.name]} t{k} = {_elementwise_expr(prog, eqn, args)};")
        temps[id(var)] = f"t{k}"
        if id(var) in stored:
            stores.append((Access(prog.output(var).ref, contiguous(shape)), f"t{k}"))

    read.update(name for _, name in stores)
    unused = [f"(void)t{k};" for k in range(len(eqns)) if f"t{k}" not in read]   # dead values: no warning

    def body(at, off):
        return ([f"const {prog.temp_types[dt.name]} {name} = {at(acc)};" for name, dt, acc in loads] + lines
                + unused + [f"{at(acc)} = {name};" for acc, name in stores])

    prog.emit(nest(shape, [acc for acc, _ in stores] + accesses, body))


def fusible(eqn) -> bool:
    """Whether `eqn` is computed by `elementwise` (and may join a chain)."""
    return eqn.prim.name not in EMITTERS


def random_values(prog, eqn) -> None:
    """random_bits / random_uniform of one key: value p from the Threefry of the key words and position p."""
    key = prog.read(eqn.inputs[0])
    out = prog.output(eqn.outvars[0])
    form = expression(eqn.prim, CLASS[eqn.outvars[0].aval.dtype.name], "c")
    dst = Access(out.ref, contiguous(out.shape))
    n = prod(out.shape)
    if static(n):
        half = random_half(eqn)
    else:   # the split point of fnx/lowering/expressions.py `random_half`, in C
        wide = eqn.prim.name == "random_uniform" and eqn.outvars[0].aval.dtype.name == "float64"
        half = text(n) if wide else f"(({text(n)} + 1) / 2)"
    prog.emit([f"const long long k0_{out.ref} = {key.ref}[0], k1_{out.ref} = {key.ref}[1];"])
    prog.emit(nest(out.shape, [dst], lambda at, off: [
        f"{at(dst)} = {form.format(f'k0_{out.ref}', f'k1_{out.ref}', off(dst), half)};"]))


def random_split(prog, eqn) -> None:
    key = prog.read(eqn.inputs[0])
    out = prog.output(eqn.outvars[0])
    num = eqn.params["num"]
    prog.emit([f"for (long long p = 0; p < {2 * num}; p++)",
               f"    {out.ref}[p] = (int64_t)fnx_random_bits((unsigned){key.ref}[0], (unsigned){key.ref}[1], "
               f"(unsigned)p, {num}u);"])


def random_fold_in(prog, eqn) -> None:
    key = prog.read(eqn.inputs[0])
    out = prog.output(eqn.outvars[0])
    prog.emit(["{", f"    unsigned x0 = 0u, x1 = {eqn.params['data'] & 0xFFFFFFFF}u;",
               f"    fnx_threefry2x32((unsigned){key.ref}[0], (unsigned){key.ref}[1], &x0, &x1);",
               f"    {out.ref}[0] = (int64_t)x0;", f"    {out.ref}[1] = (int64_t)x1;", "}"])


# ---------------------------------------------------------------- reductions
_MONOIDS = {"sum": "add", "reduce_max": "max", "reduce_min": "min", "reduce_prod": "mul"}


def _split_axes(shape: list, axes) -> tuple[list, list]:
    axes = set(axes)
    return [d for d in range(len(shape)) if d not in axes], [d for d in range(len(shape)) if d in axes]


def _inner_loops(dims: list, shape: list, strides: list, body: list[str], var: str = "r") -> tuple[list, str]:
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


def reduction(prog, eqn) -> None:
    x = prog.read(eqn.inputs[0])
    out = prog.output(eqn.outvars[0])
    monoid = _MONOIDS[eqn.prim.name]
    dt = x.dtype.name
    cls, ctype = CLASS[dt], prog.types[dt]
    kept, reduced = _split_axes(x.shape, eqn.params["axes"])
    strides = contiguous(x.shape)
    acc_type = "double" if dt == "float32" and monoid == "add" else ctype
    if cls == "i" and monoid in ("max", "min"):
        lo, hi = INT_LIMITS[dt]
        init = prog.literal(lo if monoid == "max" else hi, x.dtype)
    else:
        init = IDENTITY[monoid][cls]
    update = {"add": "acc = acc + v;", "mul": "acc = acc * v;"}.get(monoid)
    if update is None:
        fn = {"f": "fnx_{m}f", "d": "fnx_{m}"}.get(cls)
        if fn:
            update = f"acc = {fn.format(m=monoid)}(acc, v);"
        elif cls == "b":
            update = "acc = acc | v;" if monoid == "max" else "acc = acc & v;"
        else:
            update = f"acc = v {'>' if monoid == 'max' else '<'} acc ? v : acc;"
    src = Access(x.ref, [strides[d] for d in kept])
    dst = Access(out.ref, contiguous([x.shape[d] for d in kept]))

    def body(at, off):
        loop, terms = _inner_loops(reduced, x.shape, strides, [f"const {ctype} v = {x.ref}[{off(src)}{{t}}];",
                                                               update])
        loop = [line.replace("{t}", terms) for line in loop]
        return [f"{acc_type} acc = {init};"] + loop + [f"{at(dst)} = ({ctype})acc;"]

    prog.emit(nest([x.shape[d] for d in kept], [dst, src], body))


def _along_axis(prog, eqn):
    """What an op along axis `eqn.params["axis"]` works with: (x, out, the other dims' sizes, an access to x at
    their points, x's strides, the axis's size and stride as C)."""
    x = prog.read(eqn.inputs[0])
    out = prog.output(eqn.outvars[0])
    axis = eqn.params["axis"]
    kept, _ = _split_axes(x.shape, (axis,))
    strides = contiguous(x.shape)
    src = Access(x.ref, [strides[d] for d in kept])
    return x, out, [x.shape[d] for d in kept], src, [strides[d] for d in kept], text(x.shape[axis]), \
        text(strides[axis])


def arg_extremum(prog, eqn) -> None:
    """argmax/argmin along one axis: the first extreme value; the first NaN wins, as numpy's."""
    x, out, shape, src, _, n, st = _along_axis(prog, eqn)
    dst = Access(out.ref, contiguous(shape))
    cmp = ">" if eqn.prim.name == "argmax" else "<"
    nan = x.dtype.name in ("float32", "float64")
    better = f"v {cmp} best" + (" || (v != v && best == best)" if nan else "")
    ctype = prog.types[x.dtype.name]

    def body(at, off):
        base = off(src)
        return [f"{ctype} best = {x.ref}[{base}];", "long long where = 0;",
                f"for (long long r = 1; r < {n}; r++) {{",
                f"    const {ctype} v = {x.ref}[{base} + r * {st}];",
                f"    if ({better}) {{ best = v; where = r; }}", "}", f"{at(dst)} = where;"]

    prog.emit(prog.check(f"{n} > 0", 1, f"{eqn.prim.name}: the reduced dimension is empty"))
    prog.emit(nest(shape, [dst, src], body))


def scan(prog, eqn) -> None:
    """cumsum / cumprod along one axis, in order (numpy's sequential sums and products in the dtype)."""
    x, out, shape, src, strides, n, st = _along_axis(prog, eqn)
    dst = Access(out.ref, strides)
    ctype = prog.types[x.dtype.name]
    pos = f"({n} - 1 - r)" if eqn.params["reverse"] else "r"

    def body(at, off):
        return [f"{ctype} acc = {0 if eqn.prim.name == 'cumsum' else 1};", f"for (long long r = 0; r < {n}; r++) {{",
                f"    acc = acc {'+' if eqn.prim.name == 'cumsum' else '*'} {x.ref}[{off(src)} + {pos} * {st}];",
                f"    {out.ref}[{off(dst)} + {pos} * {st}] = acc;", "}"]

    prog.emit(nest(shape, [dst, src], body))


def argsort(prog, eqn) -> None:
    """A stable sort's order along one axis (NaN last ascending, first descending), one row at a time."""
    x, out, shape, src, strides, n, st = _along_axis(prog, eqn)
    dst = Access(out.ref, strides)
    sort = prog.sort(x.dtype.name)
    prog.emit([f"int64_t *row = (int64_t *)malloc(sizeof(int64_t) * (size_t)(2 * {n} + 1));"]
              + prog.check("row", 3, "argsort: out of memory"))
    prog.emit(nest(shape, [dst, src], lambda at, off: [
        f"{sort}({x.ref} + {off(src)}, {st}, {n}, {int(eqn.params['descending'])}, row, row + {n});",
        f"for (long long r = 0; r < {n}; r++)", f"    {out.ref}[{off(dst)} + r * {st}] = row[r];"], parallel=False))
    prog.emit(["free(row);"])


# ---------------------------------------------------------------- data movement
def alias(prog, eqn) -> None:
    """reshape, copy, stop_gradient: the same contiguous values under a new shape (values are never written
    again, so sharing is safe)."""
    prog.alias(eqn.outvars[0], eqn.inputs[0])


def _gather_view(prog, eqn, strides: list, base=0) -> None:
    """out[i] = x[base + sum(i_d * strides[d])]: a copy through a strided view."""
    x = prog.read(eqn.inputs[0])
    out = prog.output(eqn.outvars[0])
    if x.literal:
        src = None
    else:
        src = Access(x.ref, strides, base)
    dst = Access(out.ref, contiguous(out.shape))
    prog.emit(nest(out.shape, [dst] + ([src] if src else []),
                   lambda at, off: [f"{at(dst)} = {at(src) if src else x.ref};"]))


def transpose(prog, eqn) -> None:
    x = prog.read(eqn.inputs[0])
    st = contiguous(x.shape)
    _gather_view(prog, eqn, [st[p] for p in eqn.params["perm"]])


def broadcast_to(prog, eqn) -> None:
    x = prog.read(eqn.inputs[0])
    out_shape = [size(d) for d in eqn.outvars[0].aval.shape]
    _gather_view(prog, eqn, [] if x.literal else _broadcast_strides(x.shape, out_shape))


def slice_(prog, eqn) -> None:
    x = prog.read(eqn.inputs[0])
    st = contiguous(x.shape)
    p = eqn.params
    for d, (a, b, n) in enumerate(zip(p["starts"], p["stops"], x.shape)):
        # sizes the program cannot take (a slice past the end of a table) are refused at run time
        unknown = [f"{text(lo)} <= {text(hi)}" for lo, hi in ((0, a), (a, b), (b, n))
                   if not static(size(hi) - size(lo))]
        if unknown:
            prog.emit(prog.check(" && ".join(unknown), 1,
                                 f"slice: {a}:{b} does not fit dimension {d} of size {n} at these sizes"))
    base = 0
    for a, s in zip(p["starts"], st):
        base = base + size(a) * s
    _gather_view(prog, eqn, [size(k) * s for k, s in zip(p["steps"], st)], base)


def rev(prog, eqn) -> None:
    x = prog.read(eqn.inputs[0])
    st = contiguous(x.shape)
    base, strides = 0, list(st)
    for d in eqn.params["dims"]:
        base = base + (x.shape[d] - 1) * st[d]
        strides[d] = -1 * st[d]
    _gather_view(prog, eqn, strides, base)


def diagonal(prog, eqn) -> None:
    x = prog.read(eqn.inputs[0])
    p = eqn.params
    st = contiguous(x.shape)
    d1, d2, offset = p["dim1"], p["dim2"], p["offset"]
    keep = [d for d in range(len(x.shape)) if d not in (d1, d2)]
    base = offset * st[d2] if offset >= 0 else -offset * st[d1]
    _gather_view(prog, eqn, [st[d] for d in keep] + [st[d1] + st[d2]], base if prod(eqn.outvars[0].aval.shape) else 0)


def im2col(prog, eqn) -> None:
    """(*lead, *spatial) -> (*lead, prod(kernel), *out): each kernel offset's strided view of the input."""
    x = prog.read(eqn.inputs[0])
    out = prog.output(eqn.outvars[0])
    kernel, stride, dilation = eqn.params["kernel"], eqn.params["stride"], eqn.params["dilation"]
    nd = len(kernel)
    st = contiguous(x.shape)
    lead = len(x.shape) - nd
    out_sp = out.shape[lead + 1:]
    shape = list(x.shape[:lead]) + [int(k) for k in kernel] + list(out_sp)
    strides = st[:lead] + [d * s for d, s in zip(dilation, st[lead:])] + [t * s for t, s in zip(stride, st[lead:])]
    src = Access(x.ref, strides)
    dst = Access(out.ref, contiguous(shape))
    prog.emit(nest(shape, [dst, src], lambda at, off: [f"{at(dst)} = {at(src)};"]))


def pad(prog, eqn) -> None:
    x = prog.read(eqn.inputs[0])
    out = prog.output(eqn.outvars[0])
    p = eqn.params
    fill = prog.literal(p["value"], eqn.outvars[0].aval.dtype)
    dst = Access(out.ref, contiguous(out.shape))
    prog.emit(nest(out.shape, [dst], lambda at, off: [f"{at(dst)} = {fill};"]))
    ost = contiguous(out.shape)
    shape, base, strides, src_base = [], 0, [], 0
    xst = contiguous(x.shape)
    for d, (n, low, high, inner) in enumerate(zip(x.shape, p["lo"], p["hi"], p["interior"])):
        step = inner + 1
        if low >= 0 and high >= 0:
            k0, k1 = 0, n
        elif isinstance(n, int):
            total = out.shape[d]
            k0, k1 = max(0, -(low // step)), min(n, -((low - total) // step))
            if k1 <= k0:
                return
        else:
            raise NotImplementedError(f"pad: negative padding of the symbolic dimension {d} has no C "
                                      f"implementation in fnx.export; crop with a slice first")
        shape.append(k1 - k0)
        base = base + (low + k0 * step) * ost[d]
        strides.append(step * ost[d])
        src_base = src_base + k0 * xst[d]
    src = Access(x.ref, xst, src_base)
    into = Access(out.ref, strides, base)
    prog.emit(nest(shape, [into, src], lambda at, off: [f"{at(into)} = {at(src)};"]))


def concatenate(prog, eqn) -> None:
    out = prog.output(eqn.outvars[0])
    dim = eqn.params["dim"]
    ost = contiguous(out.shape)
    start = 0
    for atom in eqn.inputs:
        x = prog.read(atom)
        src = Access(x.ref, contiguous(x.shape))
        into = Access(out.ref, ost, start * ost[dim])
        prog.emit(nest(x.shape, [into, src], lambda at, off: [f"{at(into)} = {at(src)};"]))
        start = start + x.shape[dim]


# ---------------------------------------------------------------- gathers
def _bounds_check(prog, idx, n, what: str) -> None:
    """A serial pass over index array `idx` that fails the call (error code 2) on an index outside [-n, n)."""
    count = text(prod(idx.shape))
    prog.emit([f"for (long long p = 0; p < {count}; p++)",
               f"    if ({idx.ref}[p] < -{text(n)} || {idx.ref}[p] >= {text(n)}) {{"]
              + ["        " + line for line in prog.fail(
                  2, f"{what}: index %lld is out of range for a dimension of size %lld",
                  f"(long long){idx.ref}[p]", f"(long long){text(n)}")] + ["    }"])


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
        full[first:first + nb] = _broadcast_strides(i.shape, list(shape[first:first + nb]))
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
    src = None if values.literal else Access(values.ref, _broadcast_strides(values.shape, shape))
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
    count = text(prod(idx.shape))
    what = p.get("op") or "index"
    low, high = size(p["low"]), size(p["high"])
    prog.emit([f"for (long long p = 0; p < {count}; p++)",
               f"    if ({idx.ref}[p] < {text(low)} || {idx.ref}[p] >= {text(high)}) {{"]
              + ["        " + line for line in prog.fail(
                  2, f"{what}: index %lld is out of bounds for dimension {p['dim']} (valid: %lld to %lld)",
                  f"(long long){idx.ref}[p]", f"(long long){text(low)}", f"(long long){text(high - 1)}")] + ["    }"])
    prog.alias(eqn.outvars[0], eqn.inputs[0])


# ---------------------------------------------------------------- windows (pooling)
def window_argmax(prog, eqn) -> None:
    """The flat spatial position of each window's first maximum (the last NaN, if any)."""
    x = prog.read(eqn.inputs[0])
    out = prog.output(eqn.outvars[0])
    kernel, stride, dilation = eqn.params["kernel"], eqn.params["stride"], eqn.params["dilation"]
    nd = len(kernel)
    lead = len(x.shape) - nd
    spatial = x.shape[lead:]
    if not all(static(n) for n in spatial):
        raise NotImplementedError("window_argmax: symbolic spatial dimensions have no C implementation in "
                                  "fnx.export; export with static image sizes")
    step = contiguous(spatial)
    plane = prod(spatial)
    offsets = [sum(o * d * t for o, d, t in zip(offs, dilation, step))
               for offs in itertools.product(*(range(k) for k in kernel))]
    shape = list(x.shape[:lead]) + list(out.shape[lead:])
    src = Access(x.ref, [s * plane for s in contiguous(x.shape[:lead])] + [t * s for t, s in zip(stride, step)])
    pos = Access("", [0] * lead + [t * s for t, s in zip(stride, step)])
    dst = Access(out.ref, contiguous(shape))
    ctype = prog.types[x.dtype.name]
    nan = x.dtype.name in ("float32", "float64")
    table = ", ".join(str(o) for o in offsets)

    def body(at, off):
        base = off(src)
        lines = [f"static const long long offs[{len(offsets)}] = {{{table}}};",
                 f"{ctype} best = {x.ref}[{base}];", "int which = 0;",
                 f"for (int k = 1; k < {len(offsets)}; k++) {{",
                 f"    const {ctype} v = {x.ref}[{base} + offs[k]];"]
        if nan:
            lines.append("    if (v != v || v > best) { best = v; which = k; }")
        else:
            lines.append("    if (v > best) { best = v; which = k; }")
        return lines + ["}", f"{at(dst)} = {off(pos)} + offs[which];"]

    prog.emit(nest(shape, [dst, src, pos], body))


def window_take(prog, eqn) -> None:
    """values at the flat spatial positions of `pos`, per leading index."""
    x, pos = prog.read(eqn.inputs[0]), prog.read(eqn.inputs[1])
    out = prog.output(eqn.outvars[0])
    nd = eqn.params["nd"]
    lead = len(x.shape) - nd
    plane, count = prod(x.shape[lead:]), prod(pos.shape[lead:])
    rows = prod(x.shape[:lead])
    src = Access(x.ref, [plane, 0])
    ia = Access(pos.ref, [count, 1])
    dst = Access(out.ref, [count, 1])
    prog.emit(nest([rows, count], [dst, src, ia], lambda at, off: [
        f"const long long j = {at(ia)};",
        f"{at(dst)} = (j >= 0 && j < {text(plane)}) ? {x.ref}[{off(src)} + j] : 0;"]))


# ---------------------------------------------------------------- products
def matmul(prog, eqn) -> None:
    """Batched matrix products through the program's cache-blocked GEMM (one call per batch index; a stack of
    rows times one matrix is one call)."""
    a, b = prog.read(eqn.inputs[0]), prog.read(eqn.inputs[1])
    out = prog.output(eqn.outvars[0])
    a_shape = list(a.shape) if len(a.shape) > 1 else [1] + list(a.shape)
    b_shape = list(b.shape) if len(b.shape) > 1 else list(b.shape) + [1]
    m, k, n = a_shape[-2], a_shape[-1], b_shape[-1]
    batch = [size(d) for d in eqn.outvars[0].aval.shape[:len(eqn.outvars[0].aval.shape)
                                                          - (len(a.shape) > 1) - (len(b.shape) > 1)]]
    gemm = prog.gemm(a.dtype.name)
    if len(b_shape) == 2 and len(a_shape) > 2:   # one GEMM over all rows of the stack
        m, batch = prod(a_shape[:-1]), []
        a_shape = [m, k]
    a_bst = _broadcast_strides(a_shape[:-2], batch) if batch else []
    b_bst = _broadcast_strides(b_shape[:-2], batch) if batch else []
    a_batch = Access("", [s * m * k for s in a_bst])
    b_batch = Access("", [s * k * n for s in b_bst])
    c_batch = Access("", [s * m * n for s in contiguous(batch)])
    call = (f"{gemm}({text(m)}, {text(n)}, {text(k)}, {a.ref} + {{a}}, {text(k)}, 1, {b.ref} + {{b}}, {text(n)}, 1, "
            f"{out.ref} + {{c}}, {text(n)})")
    lines = nest(batch, [a_batch, b_batch, c_batch], lambda at, off: [
        f"if ({call.format(a=off(a_batch), b=off(b_batch), c=off(c_batch))}) failed = 1;"], parallel=False)
    prog.emit(["int failed = 0;"] + lines)
    prog.emit(["if (failed) {"] + ["    " + line for line in prog.fail(3, "matmul: out of memory")] + ["}"])


def einsum(prog, eqn) -> None:
    """Any einsum: a loop over the output's labels, the summed labels inside (float32 sums in double)."""
    ins, out_labels = eqn.params["equation"].replace(" ", "").split("->")
    subs = ins.split(",")
    ops = [prog.read(a) for a in eqn.inputs]
    out = prog.output(eqn.outvars[0])
    sizes = {}
    for sub, op in zip(subs, ops):
        for c, n in zip(sub, op.shape):
            if sizes.get(c, 1) == 1:
                sizes[c] = n
    summed = [c for c in sizes if c not in out_labels]
    dt = eqn.outvars[0].aval.dtype.name
    ctype = prog.types[dt]
    acc_type = "double" if dt == "float32" else ctype

    def strides_of(op, sub, labels):
        own = contiguous(op.shape)
        st = {}
        for c, n, s in zip(sub, op.shape, own):
            if not (n == 1 and sizes[c] != 1):
                st[c] = st.get(c, 0) + s   # a repeated label (a diagonal) walks both strides
        return [st.get(c, 0) for c in labels]

    outer = [Access(op.ref, strides_of(op, sub, list(out_labels))) for op, sub in zip(ops, subs)]
    inner = [strides_of(op, sub, summed) for op, sub in zip(ops, subs)]
    dst = Access(out.ref, contiguous(out.shape))

    def body(at, off):
        product = " * ".join(f"({acc_type}){op.ref}[{off(acc)}{{t{i}}}]" for i, (op, acc) in enumerate(zip(ops, outer)))
        lines = [f"{acc_type} acc = 0;"]
        loops, _ = _inner_loops(list(range(len(summed))), [sizes[c] for c in summed], [0] * len(summed),
                                [f"acc += {product};"])
        for i, st in enumerate(inner):
            terms = "".join(f" + r{k} * {text(s)}" for k, s in enumerate(st) if s != 0)
            loops = [line.replace(f"{{t{i}}}", terms) for line in loops]
        return lines + loops + [f"{at(dst)} = ({ctype})acc;"]

    prog.emit(nest(out.shape, [dst] + outer, body))


EMITTERS = {"reshape": alias, "copy": alias, "stop_gradient": alias, "transpose": transpose,
            "broadcast_to": broadcast_to, "slice": slice_, "rev": rev, "pad": pad, "concatenate": concatenate,
            "im2col": im2col, "window_argmax": window_argmax, "window_take": window_take,
            "sum": reduction, "reduce_max": reduction, "reduce_min": reduction, "reduce_prod": reduction,
            "argmax": arg_extremum, "argmin": arg_extremum, "cumsum": scan, "cumprod": scan, "argsort": argsort,
            "diagonal": diagonal,
            "index": index, "index_put": index_put, "take_along_axis": take_along_axis, "check_index": check_index,
            "matmul": matmul, "einsum": einsum,
            "random_bits": random_values, "random_uniform": random_values, "random_split": random_split,
            "random_fold_in": random_fold_in}


def supported(eqn) -> str | None:
    """None when the standalone C can compute `eqn`, else why not."""
    prim = eqn.prim
    names = [a.aval.dtype.name for a in eqn.inputs] + [v.aval.dtype.name for v in eqn.outvars]
    if any(n not in CLASS for n in names):
        return f"{prim.name} on {', '.join(sorted(set(names)))}: float16/bfloat16/complex have no C type here"
    if prim.name in ("random_bits", "random_uniform", "random_split", "random_fold_in"):
        if tuple(eqn.inputs[0].aval.shape) != (2,):
            return f"{prim.name} with a batch of keys {list(eqn.inputs[0].aval.shape)} (one key only)"
        return None
    if prim.name in EMITTERS:
        return None
    if "elementwise" in prim.groups and prim.c and CLASS[eqn.inputs[-1].aval.dtype.name] in prim.c:
        return None
    return prim.name


def emitter(prim: Primitive):
    """The emitter of a primitive that is not elementwise (those go through `elementwise`, in chains)."""
    return EMITTERS[prim.name]
