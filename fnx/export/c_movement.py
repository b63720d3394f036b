"""The C of data movement in a standalone program: views read through strides (transpose, broadcast, slice, split,
flip, diagonal, im2col), copies with offsets (pad, concatenate) and pooling's window maxima (fnx/export/c_ops.py
dispatches to them)."""
from __future__ import annotations

import itertools

from .c_emit import Access, broadcast_strides, contiguous, nest, prod, size, static, text

__all__ = ["alias", "transpose", "broadcast_to", "slice_", "split", "rev", "diagonal", "im2col", "conv_output", "pad",
           "concatenate", "window_argmax", "window_max", "window_take"]


def alias(prog, eqn) -> None:
    """reshape, copy, stop_gradient: the same contiguous values under a new shape (values are never written
    again, so sharing is safe)."""
    prog.alias(eqn.outvars[0], eqn.inputs[0])


def _gather_view(prog, eqn, strides: list, base=0, outvar=None) -> None:
    """out[i] = x[base + sum(i_d * strides[d])]: a copy through a strided view, into `outvar` (by default the
    equation's one output)."""
    x = prog.read(eqn.inputs[0])
    out = prog.output(eqn.outvars[0] if outvar is None else outvar)
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
    _gather_view(prog, eqn, [] if x.literal else broadcast_strides(x.shape, out_shape))


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


def split(prog, eqn) -> None:
    """Each output: the input's elements from its start along `dim` on, read through the input's strides."""
    x = prog.read(eqn.inputs[0])
    st = contiguous(x.shape)
    dim, start = eqn.params["dim"], 0
    for var, n in zip(eqn.outvars, eqn.params["sizes"]):
        _gather_view(prog, eqn, st, start * st[dim], var)
        start += n


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
    """(*lead, *spatial) -> (*lead, prod(kernel), *out) (with batch_inner, (*b, N, C, *spatial) -> (*b, C,
    prod(kernel), N, *out)): each kernel offset's strided view of the input."""
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
    if eqn.params["batch_inner"]:   # out is (*b, C, K, N, *out): the loop's (N, C, *kernel) dims step as there
        ost, b = contiguous(out.shape), lead - 2
        dst = Access(out.ref, ost[:b] + [ost[b + 2], ost[b]] + [s * ost[b + 1] for s in contiguous(kernel)]
                     + ost[b + 3:])
    else:
        dst = Access(out.ref, contiguous(shape))
    prog.emit(nest(shape, [dst, src], lambda at, off: [f"{at(dst)} = {at(src)};"]))


def conv_output(prog, eqn) -> None:
    """(*b, C, N, *s) + bias (*b, C) -> (*b, N, C, *s): a convolution's product in (N, C) order plus its bias."""
    y, bias = prog.read(eqn.inputs[0]), prog.read(eqn.inputs[1])
    out = prog.output(eqn.outvars[0])
    b = len(bias.shape) - 1
    ost = contiguous(out.shape)
    dst = Access(out.ref, ost[:b] + [ost[b + 1], ost[b]] + ost[b + 2:])
    src = Access(y.ref, contiguous(y.shape))
    add = Access(bias.ref, contiguous(bias.shape) + [0] * (len(y.shape) - b - 1))
    prog.emit(nest(y.shape, [dst, src, add], lambda at, off: [f"{at(dst)} = {at(src)} + {at(add)};"]))


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


# ---------------------------------------------------------------- windows (pooling)
def window_argmax(prog, eqn) -> None:
    """The flat spatial position of each window's first maximum (the last NaN, if any)."""
    _window_argmax(prog, eqn, prog.output(eqn.outvars[0]), None)


def window_max(prog, eqn) -> None:
    """Each window's maximum and its flat spatial position (window_argmax and the value there)."""
    _window_argmax(prog, eqn, prog.output(eqn.outvars[1]), prog.output(eqn.outvars[0]))


def _window_argmax(prog, eqn, out, values) -> None:
    """window_argmax into `out`, and with `values` (else None) the element at each position into it."""
    x = prog.read(eqn.inputs[0])
    kernel, stride, dilation = eqn.params["kernel"], eqn.params["stride"], eqn.params["dilation"]
    nd = len(kernel)
    lead = len(x.shape) - nd
    spatial = x.shape[lead:]
    if not all(static(n) for n in spatial):
        raise NotImplementedError(f"{eqn.prim.name}: symbolic spatial dimensions have no C implementation in "
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
        lines += ["}", f"{at(dst)} = {off(pos)} + offs[which];"]
        if values is not None:
            lines.append(f"{values.ref}[{off(dst)}] = {x.ref}[{base} + offs[which]];")
        return lines

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
