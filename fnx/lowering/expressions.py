"""The C vocabulary of generated kernels: types, operand classes, literals, reduction identities.

What each primitive computes is declared with the primitive itself (fnx/core.py `Primitive`): its groups
(elementwise, reduction, movement, random, check, expensive), and its C expression per operand class ("f"
float32, "d" float64, "i" integers, "b" bool) over its operands `{0}`, `{1}`, `{2}` and its params (or a
function of the operands' names and the params that returns one). Operands are always names of earlier
values or literals, so an expression may repeat them. Calls like `fnx_expf` go to the per-target prelude
(templates/*_prelude.*.j2), which is where the two targets differ; a primitive whose CUDA expression must
differ declares it as `Primitive.cuda`. This module reads those declarations (`emittable`, `expression`).
"""
from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

__all__ = ["C_TYPES", "TEMP_TYPES", "CLASS", "SHORT", "IDENTITY", "INT_LIMITS", "emittable", "expression",
           "random_fusible", "random_half", "literal"]

C_TYPES = {"float32": "float", "float64": "double", "bool": "unsigned char", "uint8": "unsigned char",
           "int8": "signed char", "int16": "short", "int32": "int", "int64": "long long"}
# Types of values computed inside a kernel: bool temporaries are `int` (storage stays one byte), so that a loop
# mixing comparisons with float math has one lane width and vectorises (gcc finds no vector type for a char
# operand of a float-sized lane).
TEMP_TYPES = {**C_TYPES, "bool": "int"}
CLASS = {"float32": "f", "float64": "d", "bool": "b", "uint8": "i", "int8": "i", "int16": "i", "int32": "i",
         "int64": "i"}
SHORT = {"float32": "f32", "float64": "f64", "bool": "b8", "uint8": "u8", "int8": "i8", "int16": "i16",
         "int32": "i32", "int64": "i64"}   # for kernel names


# Reductions: the identity of each monoid per class (integer max/min start from the type's limits).
IDENTITY = {"add": {"f": "0.0f", "d": "0.0", "i": "0", "b": "0"},
            "mul": {"f": "1.0f", "d": "1.0", "i": "1", "b": "1"},
            "max": {"f": "(-FNX_INF_F)", "d": "(-FNX_INF_D)", "b": "0"},
            "min": {"f": "FNX_INF_F", "d": "FNX_INF_D", "b": "1"}}
INT_LIMITS = {"uint8": (0, 255), "int8": (-128, 127), "int16": (-32768, 32767), "int32": (-2 ** 31, 2 ** 31 - 1),
              "int64": (-2 ** 63, 2 ** 63 - 1)}


def _operand_class(eqn) -> str | None:
    return CLASS.get(eqn.inputs[-1].aval.dtype.name)


def emittable(eqn) -> bool:
    """Whether a kernel can compute this equation: a reduction, a movement, or a primitive with a C expression
    for its operands' class (elementwise, random, check), on dtypes that C has (float16 and bfloat16 stay
    library steps)."""
    names = [a.aval.dtype.name for a in eqn.inputs] + [v.aval.dtype.name for v in eqn.outvars]
    if any(n not in CLASS for n in names):
        return False
    groups = eqn.prim.groups
    if "reduction" in groups or "movement" in groups:
        return True
    if "random" in groups:
        return random_fusible(eqn)
    if "check" in groups:
        return _operand_class(eqn) == "i"
    return "elementwise" in groups and _operand_class(eqn) in eqn.prim.c


def expression(prim, cls: str, target: str):
    """The C expression of `prim` for operand class `cls` on `target` ("c", "cuda", "opencl"): its CUDA
    replacement where it declares one."""
    if target == "cuda" and prim.cuda and cls in prim.cuda:
        return prim.cuda[cls]
    return prim.c[cls]


def random_fusible(eqn) -> bool:
    """Whether a kernel can draw this random equation's values: one key (no batch of keys, whose outputs would
    need a division of the index into key and position), fewer than 2**32 values (32-bit counters), an output
    class that its C expression has."""
    out = eqn.outvars[0].aval
    return (tuple(eqn.inputs[0].aval.shape) == (2,) and 0 < math.prod(out.shape) < 2 ** 32
            and CLASS.get(out.dtype.name) in eqn.prim.c)


def random_half(eqn) -> int:
    """Where the position space of a random equation splits (fnx/random.py `_hash`): position p < half is the first
    Threefry word of counter (p, p + half), p >= half the second word of counter (p - half, p). float64 uniforms
    use both words of counter (p, p + n), with half = n."""
    out = eqn.outvars[0].aval
    n = math.prod(out.shape)
    return n if eqn.prim.name == "random_uniform" and out.dtype.name == "float64" else (n + 1) // 2


def literal(value, dtype, types: Mapping[str, str] = C_TYPES, long_suffix: str = "LL") -> str:
    """A C literal of `dtype` with exactly `value` (shortest round-trip decimal for floats; integers cast to their
    name in `types`, int64 ones with `long_suffix`: "L" in OpenCL C, whose long long is 128 bits wide)."""
    name = dtype.name
    v = np.asarray(value).astype(dtype.np).item()
    if name in ("float32", "float64"):
        suffix, tag = ("f", "F") if name == "float32" else ("", "D")
        if math.isnan(v):
            return f"FNX_NAN_{tag}"
        if math.isinf(v):
            return f"FNX_INF_{tag}" if v > 0 else f"(-FNX_INF_{tag})"
        text = str(np.float32(v)) if name == "float32" else repr(float(v))
        return f"{text}{suffix}" if v >= 0 else f"({text}{suffix})"
    if name == "bool":
        return "1" if v else "0"
    if name == "int64" and v == -2 ** 63:
        return f"(-9223372036854775807{long_suffix} - 1)"
    return f"(({types[name]}){int(v)}{long_suffix if name == 'int64' else ''})"
