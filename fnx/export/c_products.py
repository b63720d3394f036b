"""The C of products in a standalone program: batched matmul through the generated GEMM
(fnx/lowering/templates/c_gemm.c.j2) and any einsum as loops."""
from __future__ import annotations

from .c_emit import Access, broadcast_strides, contiguous, inner_loops, nest, prod, size, text

__all__ = ["matmul", "einsum"]


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
    a_bst = broadcast_strides(a_shape[:-2], batch) if batch else []
    b_bst = broadcast_strides(b_shape[:-2], batch) if batch else []
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
        loops, _ = inner_loops(list(range(len(summed))), [sizes[c] for c in summed], [0] * len(summed),
                                [f"acc += {product};"])
        for i, st in enumerate(inner):
            terms = "".join(f" + r{k} * {text(s)}" for k, s in enumerate(st) if s != 0)
            loops = [line.replace(f"{{t{i}}}", terms) for line in loops]
        return lines + loops + [f"{at(dst)} = ({ctype})acc;"]

    prog.emit(nest(out.shape, [dst] + outer, body))
