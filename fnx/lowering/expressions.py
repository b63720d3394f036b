"""The expression table: each elementwise primitive as a C expression per operand class (codegen as data).

`EXPRESSIONS` maps a primitive name and an operand class ("f" float32, "d"
float64, "i" integers, "b" bool) to a C expression over its operands `{0}`,
`{1}`, `{2}` (or, for a primitive with params, a function of the operands'
names and the params that returns one). Operands are always names of earlier
values or literals, so an expression may repeat them. Calls like `fnx_expf`
go to the per-target prelude (templates/*_prelude.*.j2), which is where the
two targets differ.
`RANDOM` holds the counter-based random primitives of fnx/random.py, whose
values are a function of the key words and of the element's position.
`CHECKS` holds the checking primitives: their value is their operand, and
where the condition holds the kernel raises its error flag (see codegen).
numpy's semantics where C's differ (NaN-propagating max and min,
Python-style remainder and floor division, integer division by zero giving
0, bool arithmetic as logic) are spelled out here or in the prelude.
"""
from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from .. import dtypes as _dt
from .views import VIEW_PRIMS

__all__ = ["EXPRESSIONS", "RANDOM", "CHECKS", "C_TYPES", "TEMP_TYPES", "CLASS", "SHORT", "IDENTITY", "INT_LIMITS",
           "emittable", "random_fusible", "random_half", "literal"]

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


def _libm(f: str) -> dict:
    """A libm function: float32 goes through the double version (see the C prelude)."""
    return {"f": f"fnx_{f}f({{0}})", "d": f"{f}({{0}})"}


def _all(expr: str, classes: str = "fdib") -> dict:
    return {c: expr for c in classes}


def _power_by_squaring(x: str, n: int) -> str:
    """x**n (n >= 1) as multiplications, in the order of the eager impl (ops/elementwise.py)."""
    if n == 1:
        return x
    half = _power_by_squaring(x, n // 2)
    square = f"({half} * {half})"
    return f"({square} * {x})" if n % 2 else square


def _integer_pow(one: str):
    """integer_pow's expression, a function of its param `y` (the exponent): multiplications, never pow."""
    def form(x: str, *, y: int) -> str:
        if y == 0:
            return one
        product = _power_by_squaring(x, abs(y))
        return product if y > 0 else f"({one} / {product})"

    return form


_IREM = "({1} == 0 || {1} == -1 ? 0 : {0} % {1} + ({0} % {1} != 0 && ({0} % {1} < 0) != ({1} < 0) ? {1} : 0))"
_IFLOORDIV = ("({1} == 0 ? 0 : {1} == -1 ? -{0} : "
              "{0} / {1} - ({0} % {1} != 0 && ({0} % {1} < 0) != ({1} < 0) ? 1 : 0))")

# primitive -> operand class -> C expression. "select" is keyed by its branches' class.
EXPRESSIONS: dict[str, dict[str, str]] = {
    "neg": _all("(-{0})", "fdi"),
    "exp": _libm("exp"), "exp2": _libm("exp2"), "expm1": _libm("expm1"), "log": _libm("log"),
    "log2": _libm("log2"), "log10": _libm("log10"), "log1p": _libm("log1p"),
    "sqrt": {"f": "sqrtf({0})", "d": "sqrt({0})"},
    "sin": _libm("sin"), "cos": _libm("cos"), "tan": _libm("tan"),
    "tanh": {"f": "tanhf({0})", "d": "tanh({0})"},   # libmvec's tanhf: 1 ulp, as fast as a copy (double: 5x slower)
    "sinh": _libm("sinh"), "cosh": _libm("cosh"), "asin": _libm("asin"), "acos": _libm("acos"),
    "atan": _libm("atan"),
    "sigmoid": {"f": "fnx_sigmoidf({0})", "d": "fnx_sigmoid({0})"},
    "erf": _libm("erf"), "erfc": _libm("erfc"),
    "abs": {"f": "fabsf({0})", "d": "fabs({0})", "i": "({0} < 0 ? -{0} : {0})", "b": "{0}"},
    "sign": {"f": "fnx_signf({0})", "d": "fnx_sign({0})", "i": "(({0} > 0) - ({0} < 0))"},
    "floor": {"f": "floorf({0})", "d": "floor({0})"}, "ceil": {"f": "ceilf({0})", "d": "ceil({0})"},
    "trunc": {"f": "truncf({0})", "d": "trunc({0})"},
    "round": {"f": "rintf({0})", "d": "rint({0})"},     # half to even, like numpy
    "relu": {"f": "fnx_maxf({0}, 0.0f)", "d": "fnx_max({0}, 0.0)", "i": "({0} > 0 ? {0} : 0)"},
    "not": _all("(!{0})"),
    "isnan": _all("({0} != {0})", "fd"),
    "add": {**_all("({0} + {1})", "fdi"), "b": "({0} | {1})"},
    "sub": _all("({0} - {1})", "fdi"),
    "mul": {**_all("({0} * {1})", "fdi"), "b": "({0} & {1})"},
    "div": _all("({0} / {1})", "fd"),
    "pow": {"f": "fnx_powf({0}, {1})", "d": "pow({0}, {1})"},
    "integer_pow": {"f": _integer_pow("1.0f"), "d": _integer_pow("1.0"), "i": _integer_pow("1")},
    "pow_scalar": {"f": lambda x, *, y: f"fnx_powf({x}, {literal(y, _dt.float32)})",
                   "d": lambda x, *, y: f"pow({x}, {literal(y, _dt.float64)})"},
    "max": {"f": "fnx_maxf({0}, {1})", "d": "fnx_max({0}, {1})", "i": "({0} > {1} ? {0} : {1})", "b": "({0} | {1})"},
    "min": {"f": "fnx_minf({0}, {1})", "d": "fnx_min({0}, {1})", "i": "({0} < {1} ? {0} : {1})", "b": "({0} & {1})"},
    "atan2": {"f": "fnx_atan2f({0}, {1})", "d": "atan2({0}, {1})"},
    "rem": {"f": "fnx_remf({0}, {1})", "d": "fnx_rem({0}, {1})", "i": _IREM},
    "floordiv": {"f": "fnx_floordivf({0}, {1})", "d": "fnx_floordiv({0}, {1})", "i": _IFLOORDIV},
    "eq": _all("({0} == {1})"), "ne": _all("({0} != {1})"), "lt": _all("({0} < {1})"),
    "le": _all("({0} <= {1})"), "gt": _all("({0} > {1})"), "ge": _all("({0} >= {1})"),
    "and": {"b": "({0} & {1})"}, "or": {"b": "({0} | {1})"}, "xor": {"b": "({0} ^ {1})"},
    "select": _all("({0} ? {1} : {2})"),
    "convert": _all("{0}"),   # the cast is the declaration's type; conversion to bool is special-cased
}

# Random primitives -> output class -> C expression over the key words `{0}`, `{1}` (int64 loads), the element's
# position `{2}` in the output and the primitive's split point `{3}` (random_half): the prelude's Threefry-2x32.
RANDOM: dict[str, dict[str, str]] = {
    "random_bits": {"i": "((long long)fnx_random_bits((unsigned){0}, (unsigned){1}, (unsigned)({2}), (unsigned){3}))"},
    "random_uniform": {"f": "fnx_random_uniformf((unsigned){0}, (unsigned){1}, (unsigned)({2}), (unsigned){3})",
                       "d": "fnx_random_uniform((unsigned){0}, (unsigned){1}, (unsigned)({2}), (unsigned){3})"},
}

# Checks -> the C condition on an integer operand `{0}` under which the kernel flags an error: fnx/ops/indexing.py's
# check_index (the bounds `low` and `high` are its params). The compiled call then runs the primitive's impl on
# the checked values, which raises eager mode's error (fnx/lowering/plan.py).
CHECKS: dict[str, str] = {"check_index": "({0} < {low} || {0} >= {high})"}

# Reductions: the identity of each monoid per class (integer max/min start from the type's limits).
IDENTITY = {"add": {"f": "0.0f", "d": "0.0", "i": "0", "b": "0"},
            "mul": {"f": "1.0f", "d": "1.0", "i": "1", "b": "1"},
            "max": {"f": "(-FNX_INF_F)", "d": "(-FNX_INF_D)", "b": "0"},
            "min": {"f": "FNX_INF_F", "d": "FNX_INF_D", "b": "1"}}
INT_LIMITS = {"uint8": (0, 255), "int8": (-128, 127), "int16": (-32768, 32767), "int32": (-2 ** 31, 2 ** 31 - 1),
              "int64": (-2 ** 63, 2 ** 63 - 1)}
_REDUCE_PRIMS = {"sum": "add", "reduce_prod": "mul", "reduce_max": "max", "reduce_min": "min"}


def _operand_class(eqn) -> str | None:
    return CLASS.get(eqn.inputs[-1].aval.dtype.name)


def emittable(eqn) -> bool:
    """Whether a kernel can compute this equation: an elementwise primitive of the table, a reduction or a
    shape op (views.VIEW_PRIMS), on dtypes that C has (float16 and bfloat16 stay library steps)."""
    names = [a.aval.dtype.name for a in eqn.inputs] + [v.aval.dtype.name for v in eqn.outvars]
    if any(n not in CLASS for n in names):
        return False
    name = eqn.prim.name
    if name in _REDUCE_PRIMS or name in VIEW_PRIMS:
        return True
    if name in RANDOM:
        return random_fusible(eqn)
    if name in CHECKS:
        return _operand_class(eqn) == "i"
    return _operand_class(eqn) in EXPRESSIONS.get(name, {})


def random_fusible(eqn) -> bool:
    """Whether a kernel can draw this random equation's values: one key (no batch of keys, whose outputs would
    need a division of the index into key and position), fewer than 2**32 values (32-bit counters), an output
    class of the table."""
    out = eqn.outvars[0].aval
    return (tuple(eqn.inputs[0].aval.shape) == (2,) and 0 < math.prod(out.shape) < 2 ** 32
            and CLASS.get(out.dtype.name) in RANDOM[eqn.prim.name])


def random_half(eqn) -> int:
    """Where the position space of a random equation splits (fnx/random.py `_hash`): position p < half is the first
    Threefry word of counter (p, p + half), p >= half the second word of counter (p - half, p). float64 uniforms
    use both words of counter (p, p + n), with half = n."""
    out = eqn.outvars[0].aval
    n = math.prod(out.shape)
    return n if eqn.prim.name == "random_uniform" and out.dtype.name == "float64" else (n + 1) // 2


def literal(value, dtype, types: Mapping[str, str] = C_TYPES) -> str:
    """A C literal of `dtype` with exactly `value` (shortest round-trip decimal for floats; integers cast to their
    name in `types`)."""
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
        return "(-9223372036854775807LL - 1)"
    return f"(({types[name]}){int(v)}{'LL' if name == 'int64' else ''})"
