"""A jaxpr as a standalone C99 program: `write_c` writes NAME.h, NAME.c, NAME.weights, main.c and a Makefile.

The program needs libc and libm only (OpenMP when the compiler has it). Each equation becomes one loop nest
(fnx/export/c_ops.py) over buffers allocated per call; matrix products go through one generated
cache-blocked GEMM (fnx/lowering/templates/c_gemm.c.j2, eager products' GEMM too). Sizes that are symbolic dimensions become `int64_t` arguments
of `NAME_run`, so one program serves every batch size or sequence length.

The C API (NAME.h documents it):
    int NAME_init(const char *weights_path);   load and check the weights (NULL when they are embedded)
    int NAME_run(<int64_t symbols>, const T *in0, ..., T *out0, ...);
    const char *NAME_last_error(void);
    void NAME_free(void);
Every call returns 0 or an error code: 1 bad argument, 2 index out of range, 3 out of memory, 4 weights file
rejected, 5 not initialised.

NAME.weights, little-endian: the 8 bytes "FNXWGT\\0\\1", uint32 version (1), uint32 tensor count, then per tensor
an 88-byte entry (uint32 dtype code, uint32 ndim, uint64 data offset from the file start, uint64 byte count,
uint64 dims[8]), then the data (C order, each tensor 64-byte aligned). Dtype codes: `DTYPE_CODES`. The loader
checks the magic, version, count, each entry against the tensor the program expects, and that every tensor
lies inside the file.

Supported primitives: every elementwise primitive that declares a C expression (`Primitive.c`), `convert`,
`select`, the reductions (sum, reduce_max/min/prod, argmax, argmin), `cumsum`, `cumprod`, `argsort` (sort,
topk, median), data movement (reshape, transpose, broadcast_to, slice, pad, concatenate, rev, diagonal, copy,
stop_gradient), `matmul`, `einsum`, `index`, `index_put`, `take_along_axis`, `check_index`, `im2col`,
`conv_output`, `window_argmax`, `window_max`, `window_take` and the random primitives of one key (`random_bits`,
`random_uniform`, `random_split`, `random_fold_in`; the same bits as fnx), and the fused primitives that
fnx/export/primitives.py `EXPANDED` lists (scaled_dot_product_attention's `attention` and `attention_vjp`), as
the compositions that define them. Not supported (named at write time): control flow (cond, while_loop, scan,
recurrence), scatter_add_along_axis, window_put, col2im, shift, searchsorted, linalg decompositions, collectives,
float16/bfloat16/complex data, random draws from a batch of keys.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import jinja2
import numpy as np

from ..ir import ClosedJaxpr, Literal, _Printer
from ..lowering.codegen import math_prelude
from ..lowering.expressions import literal
from ..lowering.gemm_kernels import gemm_context
from .c_emit import Operand, prod, size, text
from .c_ops import elementwise, emitter, fusible, supported
from .primitives import expand

__all__ = ["write_c", "DTYPE_CODES", "MAGIC", "VERSION"]

MAGIC = b"FNXWGT\x00\x01"
VERSION = 1
MAX_DIMS = 8
DTYPE_CODES = {"float32": 1, "float64": 2, "int64": 3, "int32": 4, "int16": 5, "int8": 6, "uint8": 7, "bool": 8}
# The C types of the program (<stdint.h>, so the API is exact about widths).
TYPES = {"float32": "float", "float64": "double", "int64": "int64_t", "int32": "int32_t", "int16": "int16_t",
         "int8": "int8_t", "uint8": "uint8_t", "bool": "uint8_t"}
_SUFFIX = {"float32": "f", "float64": "d", "int64": "i64", "int32": "i32", "int16": "i16", "int8": "i8",
                "uint8": "u8", "bool": "b"}
# The program's templates, and the GEMM that eager products share (fnx/lowering/templates/c_gemm.c.j2).
_ENV = jinja2.Environment(loader=jinja2.FileSystemLoader([str(Path(__file__).parent / "templates"),
                                                          str(Path(__file__).parents[1] / "lowering" / "templates")]),
                          undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                          keep_trailing_newline=True)


class CProgram:
    """The program being written: operands of the jaxpr's variables, one kernel function per equation (its
    lines, which may fail the call), and the run function's allocations and kernel calls."""

    types = TYPES
    temp_types = {**TYPES, "bool": "int"}

    def __init__(self, symbols: list[str]):
        self.symbols = symbols
        self.values: dict[int, Operand] = {}
        self.run: list[str] = []           # the run function's body: allocations and kernel calls
        self.buffers: list[tuple] = []     # (name, C type, element count) of each buffer in the workspace
        self.kernels: list[str] = []       # the kernel functions' sources
        self.lines: list[str] = []         # the current equation's kernel body
        self.written: list[str] = []       # the buffers the current equation writes
        self.gemms: dict[str, str] = {}
        self.sorts: dict[str, str] = {}

    def bind(self, var, ref: str) -> Operand:
        op = Operand(ref, var.aval.dtype, [size(d) for d in var.aval.shape])
        self.values[id(var)] = op
        return op

    def read(self, atom) -> Operand:
        if hasattr(atom, "c_expr"):   # a DimLiteral: a symbolic size (or its reciprocal) as a scalar
            ctype = self.types[atom.aval.dtype.name]
            return Operand(f"(({ctype}){atom.c_expr()})", atom.aval.dtype, [], True)
        if isinstance(atom, Literal):
            return Operand(self.literal(atom.val.item(), atom.aval.dtype), atom.aval.dtype, [], True)
        return self.values[id(atom)]

    def literal(self, value, dtype) -> str:
        return literal(value, dtype, self.types, "LL")

    def output(self, var) -> Operand:
        """A new buffer for `var`, in the workspace that the run function sizes for the call's sizes."""
        name = f"v{len(self.values)}"
        op = self.bind(var, name)
        ctype = self.types[var.aval.dtype.name]
        count = text(prod(op.shape))
        self.buffers.append((name, ctype, count))
        self.written.append(name)
        return op

    def alias(self, var, atom) -> None:
        """`var` holds the same values as `atom` (a reshape): the same pointer, or a buffer filled with a literal."""
        op = self.read(atom)
        if op.literal:
            out = self.output(var)
            self.emit([f"for (long long p = 0; p < {text(prod(out.shape))}; p++)", f"    {out.ref}[p] = {op.ref};"])
            return
        self.bind(var, op.ref)

    def emit(self, lines: list[str]) -> None:
        self.lines.extend(lines)

    def fail(self, code: int, message: str, *args: str) -> list[str]:
        """Lines that end the call with error `code` and a printf-style `message` (serial code only)."""
        rest = "".join(f", {a}" for a in args)
        return [f"return fnx_error({code}, \"{message}\"{rest});"]

    def check(self, condition: str, code: int, message: str) -> list[str]:
        return [f"if (!({condition})) {{"] + ["    " + line for line in self.fail(code, message)] + ["}"]

    def gemm(self, dtype_name: str) -> str:
        suffix = _SUFFIX[dtype_name]
        self.gemms[dtype_name] = suffix
        return f"fnx_gemm_{suffix}"

    def sort(self, dtype_name: str) -> str:
        suffix = _SUFFIX[dtype_name]
        self.sorts[dtype_name] = suffix
        return f"fnx_argsort_{suffix}"

    def kernel(self, eqns: list, texts: list[str], emit) -> None:
        """Emit equations `eqns` (`emit(self)` writes their lines) as one kernel function of the buffers and sizes
        it uses, and its call in the run function."""
        self.lines, self.written = [], []
        emit(self)
        if not self.lines:
            return
        n = len(self.kernels)
        name = f"fnx_eq{n}_" + "_".join(e.prim.name for e in eqns[:3])
        used = set(_IDENTIFIER.findall("\n".join(self.lines)))
        buffers = {op.ref: op for op in self.values.values() if not op.literal and not op.ref.startswith("fnx_w")}
        params, args = [], []
        for ref, op in buffers.items():
            if ref in used:
                ctype = self.types[op.dtype.name]
                params.append(f"{ctype} *restrict {ref}" if ref in self.written else f"const {ctype} *restrict {ref}")
                args.append(ref)
        for sym in self.symbols:
            if sym in used:
                params.append(f"int64_t {sym}")
                args.append(sym)
        body = "\n".join("    " + line for line in self.lines)
        comment = "\n   ".join(texts)
        self.kernels.append(f"/* {comment} */\nFNX_KERNEL {name}({', '.join(params) or 'void'})\n{{\n"
                            f"{body}\n    return 0;\n}}\n")
        self.run.append(f"FNX_CALL({name}({', '.join(args)}));")


_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b")


def _check_supported(jaxpr) -> None:
    problems = sorted({p for e in jaxpr.eqns if (p := supported(e)) is not None})
    if problems:
        raise NotImplementedError(
            f"fnx.export C: no C implementation of {', '.join(problems)}; the standalone C supports elementwise "
            f"ops, reductions, data movement, matmul/einsum, gathers, im2col/pooling and one-key random draws "
            f"(fnx/export/c_program.py lists them)")


def _chains(jaxpr) -> list[tuple[list, set]]:
    """The equations in order, neighbouring elementwise ones of one output shape grouped into chains (one loop
    each): (equations, ids of the chain's values that something after it reads)."""
    last_use: dict[int, int] = {}
    for i, e in enumerate(jaxpr.eqns):
        for a in e.inputs:
            last_use[id(a)] = i
    for v in jaxpr.outvars:
        last_use[id(v)] = len(jaxpr.eqns)
    groups, i = [], 0
    while i < len(jaxpr.eqns):
        group = [jaxpr.eqns[i]]
        if fusible(group[0]):
            shape = tuple(group[0].outvars[0].aval.shape)
            while i + len(group) < len(jaxpr.eqns):
                e = jaxpr.eqns[i + len(group)]
                if not fusible(e) or tuple(e.outvars[0].aval.shape) != shape:
                    break
                group.append(e)
        end = i + len(group)
        stored = {id(v) for e in group for v in e.outvars if last_use.get(id(v), -1) >= end}
        groups.append((group, stored))
        i = end
    return groups


def _eqn_text(printer: _Printer, eqn) -> str:
    """The equation as fnx prints it (`outs = prim[params] ins`, named as in the printed jaxpr), for the comment
    above its kernel."""
    return printer.eqn(eqn, 0).splitlines()[0].replace("*/", "* /")[:200]


def _symbols(avals) -> list[str]:
    """The symbolic dimensions among the inputs' shapes, in order of appearance."""
    names: list[str] = []
    for aval in avals:
        for d in aval.shape:
            if hasattr(d, "c_expr"):
                for s in _dim_symbols(d):
                    if s not in names:
                        names.append(s)
    return names


def _dim_symbols(d) -> list[str]:
    symbols = getattr(d, "symbols", None)
    found = symbols() if callable(symbols) else symbols
    return sorted(found) if found is not None else [d.c_expr()]


def _tensor_info(prefix: str, i: int, aval, ref: str) -> dict:
    shape = [size(d) for d in aval.shape]
    return {"ref": ref, "ctype": TYPES[aval.dtype.name], "dtype": aval.dtype.name, "count": text(prod(shape)),
            "shape": [text(s) for s in shape], "shown": "[" + ", ".join(str(d) for d in aval.shape) + "]"}


def _weights_blob(consts: list[np.ndarray]) -> bytes:
    header_size = 16 + 88 * len(consts)
    offset = (header_size + 63) // 64 * 64
    entries, chunks = [], []
    for c in consts:
        data = np.ascontiguousarray(c).astype(c.dtype.newbyteorder("<"), copy=False).tobytes()
        dims = list(c.shape) + [0] * (MAX_DIMS - c.ndim)
        entry = np.array([DTYPE_CODES[c.dtype.name], c.ndim], "<u4").tobytes()
        entry += np.array([offset, len(data)] + dims, "<u8").tobytes()
        entries.append(entry)
        chunks.append((offset, data))
        offset = (offset + len(data) + 63) // 64 * 64
    out = bytearray(MAGIC + np.array([VERSION, len(consts)], "<u4").tobytes() + b"".join(entries))
    for start, data in chunks:
        out += b"\0" * (start - len(out)) + data
    return bytes(out)


def _c_array(c: np.ndarray) -> str:
    """The values of `c` as a C initializer, exact (hexadecimal floats)."""
    flat = c.reshape(-1)
    if c.dtype.kind == "f":
        suffix = "f" if c.dtype == np.float32 else ""
        tag = "F" if c.dtype == np.float32 else "D"
        items = [f"FNX_NAN_{tag}" if np.isnan(v) else (f"FNX_INF_{tag}" if v > 0 else f"(-FNX_INF_{tag})")
                 if np.isinf(v) else float(v).hex() + suffix for v in flat.tolist()]
    else:
        items = [str(int(v)) + ("LL" if c.dtype == np.int64 else "") for v in flat.tolist()]
    items = items or ["0"]
    return ",\n".join(", ".join(items[i:i + 8]) for i in range(0, len(items), 8))


def write_c(jaxpr, consts, folder, name: str, *, embed_weights: bool = False) -> list[str]:
    """Write `jaxpr` (a closed jaxpr of fnx.make_jaxpr, or its Jaxpr with `consts`) as standalone C into `folder`:
    NAME.h, NAME.c, NAME.weights (unless `embed_weights`), main.c and a Makefile. Returns the paths written.

    Raises NotImplementedError naming every primitive that has no C implementation, before writing anything."""
    if not name.isidentifier():
        raise ValueError(f"write_c: the program's name {name!r} must be a C identifier (it prefixes the API)")
    if hasattr(jaxpr, "jaxpr"):
        jaxpr = jaxpr.jaxpr
    if len(consts) != len(jaxpr.constvars):
        raise ValueError(f"write_c: the jaxpr has {len(jaxpr.constvars)} constants, {len(consts)} were given")
    expanded = expand(ClosedJaxpr(jaxpr, list(consts)))
    jaxpr = expanded.jaxpr
    consts = [np.asarray(c.detach().numpy() if hasattr(c, "detach") else c) for c in expanded.consts]
    _check_supported(jaxpr)
    prog = CProgram(_symbols([v.aval for v in jaxpr.invars]))
    weights = []
    for i, (v, c) in enumerate(zip(jaxpr.constvars, consts)):
        prog.bind(v, f"fnx_w{i}")
        weights.append({**_tensor_info(name, i, v.aval, f"fnx_w{i}"), "code": DTYPE_CODES[c.dtype.name],
                        "ndim": c.ndim, "dims": list(c.shape), "initializer": _c_array(c) if embed_weights else None})
    inputs = []
    for i, v in enumerate(jaxpr.invars):
        prog.bind(v, f"in{i}")
        inputs.append(_tensor_info(name, i, v.aval, f"in{i}"))
    printer = _Printer()
    for v in list(jaxpr.constvars) + list(jaxpr.invars):
        printer.name(v)
    for group, stored in _chains(jaxpr):
        texts = [_eqn_text(printer, e) for e in group]
        if fusible(group[0]):
            prog.kernel(group, texts, lambda p, g=group, s=stored: elementwise(p, g, s))
        else:
            prog.kernel(group, texts, lambda p, e=group[0]: emitter(e.prim)(p, e))
    outputs = []
    for i, v in enumerate(jaxpr.outvars):
        info = _tensor_info(name, i, v.aval, f"out{i}")
        info["source"] = prog.read(v)
        outputs.append(info)
    symbols = prog.symbols
    context = {"name": name, "upper": name.upper(), "inputs": inputs, "outputs": outputs, "weights": weights,
               "symbols": symbols, "embed": embed_weights, "lines": prog.run, "kernels": prog.kernels,
               "buffers": prog.buffers, "magic": list(MAGIC), "version": VERSION, "max_dims": MAX_DIMS,
               "math": math_prelude(simd=True),
               "gemms": [gemm_context(d, TYPES[d], s) for d, s in prog.gemms.items()],
               "sorts": [{"t": TYPES[d], "s": s, "float": d in ("float32", "float64")} for d, s in prog.sorts.items()]}
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    files = {f"{name}.h": "c_header.h.j2", f"{name}.c": "c_program.c.j2", "main.c": "c_main.c.j2",
             "Makefile": "Makefile.j2"}
    written = []
    for filename, template in files.items():
        path = folder / filename
        path.write_text(_ENV.get_template(template).render(**context))
        written.append(str(path))
    if not embed_weights:
        path = folder / f"{name}.weights"
        tmp = path.with_suffix(".weights.tmp")
        tmp.write_bytes(_weights_blob(consts))
        os.replace(tmp, path)
        written.append(str(path))
    return written
