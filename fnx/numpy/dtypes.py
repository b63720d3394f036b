"""fnx.numpy's dtypes: JAX's scalar types over fnx dtypes, the defaults of JAX without x64, and promotion.

`jnp.float32` is a scalar type, as in JAX: `jnp.float32(1.5)` makes a 0-d array, `x.astype(jnp.float32)` and
`dtype=jnp.float32` work wherever fnx takes a dtype, and `x.dtype == jnp.float32` holds. JAX without x64
gives Python floats float32 and Python ints int32, and narrows 64-bit numpy inputs to 32 bits; fnx does the
same unless the default float dtype is float64 (`fnx.set_default_dtype(fnx.float64)`, fnx's counterpart of
`jax_enable_x64`), which makes them float64 and int64 and keeps numpy's 64-bit types.
"""
from __future__ import annotations

import builtins

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor

__all__ = ["float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool_", "bool",
           "float_", "int_", "dtype", "result_type", "promote_types", "can_cast", "issubdtype", "finfo", "iinfo",
           "generic", "number", "inexact", "floating", "integer", "signedinteger", "unsignedinteger",
           "complexfloating"]

# numpy's abstract scalar classes, as jnp has them (for issubdtype)
generic, number, inexact, floating = np.generic, np.number, np.inexact, np.floating
integer, signedinteger, unsignedinteger, complexfloating = np.integer, np.signedinteger, np.unsignedinteger, \
    np.complexfloating


class _ScalarType:
    """A dtype as JAX's scalar type: callable (a 0-d array, or the values converted), and equal to the fnx
    dtype it stands for."""

    __slots__ = ("fnx_dtype", "dtype", "__name__")

    def __init__(self, d: _dt.dtype):
        self.fnx_dtype = d
        self.dtype = d.np   # numpy reads `.dtype`: np.dtype(jnp.float32) and fnx's dtype arguments accept it
        self.__name__ = d.name

    def __call__(self, x=0):
        from .creation import asarray

        return asarray(x, dtype=self.fnx_dtype)

    def __eq__(self, other) -> builtins.bool:
        try:
            return as_fnx_dtype(other) is self.fnx_dtype
        except TypeError:
            return False

    def __hash__(self) -> builtins.int:
        return hash(self.fnx_dtype)

    def __repr__(self) -> str:
        return f"jnp.{self.__name__}"


def _scalar(d):
    return None if d is None else _ScalarType(d)


float16, bfloat16, float32, float64 = (_scalar(d) for d in (_dt.float16, _dt.bfloat16, _dt.float32, _dt.float64))
int8, int16, int32, int64, uint8 = (_scalar(d) for d in (_dt.int8, _dt.int16, _dt.int32, _dt.int64, _dt.uint8))
bool_ = _scalar(_dt.bool)
bool = bool_   # numpy 2's name; the builtin stays builtins.bool in this module
float_, int_ = float64, int64   # numpy's names for the 64-bit types; canonicalised like them without x64


def x64() -> builtins.bool:
    """Whether fnx.numpy runs as JAX with x64: the default float dtype is float64."""
    return _dt.get_default_dtype() is _dt.float64


def default_int() -> _dt.dtype:
    """int32, or int64 with x64 (JAX's default integer)."""
    return _dt.int64 if x64() else _dt.int32


def default_float() -> _dt.dtype:
    return _dt.get_default_dtype()


def canonical(d: _dt.dtype) -> _dt.dtype:
    """The dtype JAX gives an input of dtype `d` that it did not make itself: 64-bit narrowed without x64."""
    if x64():
        return d
    return {_dt.float64: _dt.float32, _dt.int64: _dt.int32}.get(d, d)


def as_fnx_dtype(d) -> _dt.dtype:
    """Any dtype-like (fnx dtype, jnp scalar type, numpy dtype or type, name, Python type) as an fnx dtype.

    Python's `float` and `int` mean the default float and int (JAX's reading), not float64 and int64."""
    if isinstance(d, _ScalarType):
        return d.fnx_dtype
    if d is builtins.float:
        return default_float()
    if d is builtins.int:
        return default_int()
    if d is builtins.bool:
        return _dt.bool
    return _dt.as_dtype(d)


def dtype(x) -> _dt.dtype:
    """The fnx dtype of `x`: a dtype-like (name, numpy or jnp type) or an array-like's dtype."""
    d = getattr(x, "dtype", None)
    if d is not None and not isinstance(x, (_ScalarType, np.dtype)):
        return as_fnx_dtype(d)
    return as_fnx_dtype(x)


def _promotion_operand(x):
    """What fnx.result_type reads for one of jnp.result_type's arguments."""
    if isinstance(x, (builtins.bool, builtins.int, builtins.float)):
        return x
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return x if isinstance(x, Tensor) else np.empty((0,) * len(x.shape), canonical(as_fnx_dtype(x.dtype)).np)
    return as_fnx_dtype(x)


def result_type(*args) -> _dt.dtype:
    """The dtype fnx.numpy's elementwise ops give for `args` (arrays, dtypes, Python scalars): fnx's promotion
    (docs/jax-numpy.md lists where it differs from JAX's)."""
    return _dt.result_type(*(_promotion_operand(a) for a in args))


def promote_types(a, b) -> _dt.dtype:
    """The dtype two dtypes promote to (fnx's table, the same as JAX's for the dtypes fnx has)."""
    return _dt.promote_types(as_fnx_dtype(a), as_fnx_dtype(b))


def can_cast(from_, to, casting: str = "safe") -> builtins.bool:
    """Whether `from_` converts to `to` under numpy's casting rule `casting` ('no', 'equiv', 'safe',
    'same_kind' or 'unsafe')."""
    return builtins.bool(np.can_cast(dtype(from_).np, as_fnx_dtype(to).np, casting))


_ABSTRACT = {
    np.generic: lambda d: True,
    np.number: lambda d: d is not _dt.bool,
    np.inexact: lambda d: d.is_inexact,
    np.floating: lambda d: d.is_floating_point,
    np.integer: lambda d: d.category == _dt._INT,
    np.signedinteger: lambda d: d.category == _dt._INT and d.is_signed,
    np.unsignedinteger: lambda d: d is _dt.uint8,
    np.complexfloating: lambda d: d.is_complex,
    np.bool_: lambda d: d is _dt.bool,
}


def issubdtype(arg1, arg2) -> builtins.bool:
    """Whether dtype `arg1` is `arg2` or lies under the abstract type `arg2` (jnp.floating, jnp.integer, ...)."""
    d = dtype(arg1)
    test = _ABSTRACT.get(arg2) if isinstance(arg2, type) else None
    if test is not None:
        return test(d)
    return d is as_fnx_dtype(arg2)


def finfo(d) -> _dt.finfo:
    """Machine limits of a floating dtype (eps, max, min, tiny, bits)."""
    return _dt.finfo(dtype(d))


def iinfo(d) -> _dt.iinfo:
    """Machine limits of an integer dtype (min, max, bits)."""
    return _dt.iinfo(dtype(d))

