"""The C of each primitive in a standalone program: the table of emitters, and those of the elementwise, random
and reduction primitives (data movement: c_movement.py; gathers and scatters: c_indexing.py; products:
c_products.py).

An emitter takes the program being written (fnx/export/c_program.py `CProgram`: operands, output buffers,
error exits) and one equation, and appends the lines that compute it over loop nests (c_emit.py). Elementwise
primitives use the C expression they declare for fnx.compile (`Primitive.c`, fnx/lowering/expressions.py), so
the math is the compiler's, and neighbouring ones run as one loop; random primitives call the same Threefry
(templates/c_math.h.j2 of fnx/lowering).
"""
from __future__ import annotations

from ..core import Primitive
from ..lowering.expressions import CLASS, IDENTITY, INT_LIMITS, expression, random_half
from .c_emit import Access, broadcast_strides, contiguous, inner_loops, nest, prod, size, split_axes, static, text
from .c_indexing import check_index, index, index_put, take_along_axis
from .c_movement import (alias, broadcast_to, concatenate, conv_output, diagonal, im2col, pad, rev, slice_, split,
                         transpose, window_argmax, window_max, window_take)
from .c_products import einsum, matmul
from .primitives import EXPANDED

__all__ = ["EMITTERS", "supported", "emitter", "elementwise", "fusible"]


# ---------------------------------------------------------------- elementwise
def _operand_value(prog, atom, out_shape, loads: list, accesses: list, temps: dict):
    """The C value of an elementwise operand: a temporary of the loop, a literal, or a load through a
    broadcasting access."""
    if id(atom) in temps:
        return temps[id(atom)]
    op = prog.read(atom)
    if op.literal:
        return op.ref
    acc = Access(op.ref, broadcast_strides(op.shape, out_shape))
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


def reduction(prog, eqn) -> None:
    x = prog.read(eqn.inputs[0])
    out = prog.output(eqn.outvars[0])
    monoid = _MONOIDS[eqn.prim.name]
    dt = x.dtype.name
    cls, ctype = CLASS[dt], prog.types[dt]
    kept, reduced = split_axes(x.shape, eqn.params["axes"])
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
        loop, terms = inner_loops(reduced, x.shape, strides, [f"const {ctype} v = {x.ref}[{off(src)}{{t}}];",
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
    kept, _ = split_axes(x.shape, (axis,))
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
    """A stable sort's order along one axis (NaN last ascending, first descending), one row at a time; its first
    `k` positions where the param is set (topk)."""
    x, out, shape, src, _, n, st = _along_axis(prog, eqn)
    axis = eqn.params["axis"]
    kept, _ = split_axes(out.shape, (axis,))
    out_strides = contiguous(out.shape)
    dst = Access(out.ref, [out_strides[d] for d in kept])
    k, out_st = text(out.shape[axis]), text(out_strides[axis])
    sort = prog.sort(x.dtype.name)
    prog.emit([f"int64_t *row = (int64_t *)malloc(sizeof(int64_t) * (size_t)(2 * {n} + 1));"]
              + prog.check("row", 3, "argsort: out of memory"))
    prog.emit(nest(shape, [dst, src], lambda at, off: [
        f"{sort}({x.ref} + {off(src)}, {st}, {n}, {int(eqn.params['descending'])}, row, row + {n});",
        f"for (long long r = 0; r < {k}; r++)", f"    {out.ref}[{off(dst)} + r * {out_st}] = row[r];"],
        parallel=False))
    prog.emit(["free(row);"])


EMITTERS = {"reshape": alias, "copy": alias, "stop_gradient": alias, "transpose": transpose,
            "broadcast_to": broadcast_to, "slice": slice_, "split": split, "rev": rev, "pad": pad,
            "concatenate": concatenate, "im2col": im2col, "conv_output": conv_output, "window_argmax": window_argmax,
            "window_max": window_max, "window_take": window_take,
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
    if prim.name in EMITTERS or prim.name in EXPANDED:   # EXPANDED: write_c writes the defining composition
        return None
    if "elementwise" in prim.groups and prim.c and CLASS[eqn.inputs[-1].aval.dtype.name] in prim.c:
        return None
    return prim.name


def emitter(prim: Primitive):
    """The emitter of a primitive that is not elementwise (those go through `elementwise`, in chains)."""
    return EMITTERS[prim.name]
