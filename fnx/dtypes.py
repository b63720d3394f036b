"""Dtypes, PyTorch's promotion rules and numeric limits.

An fnx dtype wraps a numpy dtype. Promotion follows PyTorch for the supported
dtypes: categories bool < integer < floating < complex; within a category the
wider type wins; mixed signed/unsigned ints widen; float16 with bfloat16 gives
float32; a float with a complex type gives the complex type whose parts hold
both (float64 + complex64 is complex128). Python scalars are weakly typed:
they only choose the category.
"""
from __future__ import annotations

import numpy as np

try:
    import ml_dtypes as _ml
except ImportError:  # bfloat16 needs ml_dtypes; everything else works without it
    _ml = None

__all__ = [
    "dtype", "float16", "bfloat16", "float32", "float64", "complex64", "complex128", "cfloat", "cdouble", "int8",
    "int16", "int32", "int64", "uint8",
    "bool", "half", "float", "double", "int", "long", "short", "get_default_dtype", "set_default_dtype",
    "promote_types", "result_type", "can_cast", "finfo", "iinfo", "set_flush_denormal",
]

_BOOL, _INT, _FLOAT, _COMPLEX = 0, 1, 2, 3


class dtype:
    """A tensor element type (`fnx.float32`, ...)."""

    __slots__ = ("name", "np", "itemsize", "category", "is_floating_point", "is_complex", "is_inexact", "is_signed",
                 "_rank")

    def __init__(self, name: str, npdtype, category: int, rank: int):
        self.name = name
        self.np = np.dtype(npdtype)
        self.itemsize = self.np.itemsize
        self.category = category
        self.is_floating_point = category == _FLOAT
        self.is_complex = category == _COMPLEX
        self.is_inexact = category >= _FLOAT   # floating or complex: the dtypes that carry gradients
        self.is_signed = category >= _FLOAT or (category == _INT and name != "uint8")
        self._rank = rank   # within a category; a complex type's rank is the rank of its parts' float type

    def to_complex(self) -> "dtype":
        """The complex dtype whose parts are this floating dtype (float32 -> complex64); complex stays."""
        if self.is_complex:
            return self
        if not self.is_floating_point:
            raise TypeError(f"to_complex: {self} is not a floating-point dtype")
        return complex128 if self is float64 else complex64

    def to_real(self) -> "dtype":
        """The dtype of a complex dtype's real and imaginary parts (complex64 -> float32); others stay."""
        return (float64 if self is complex128 else float32) if self.is_complex else self

    def __repr__(self) -> str:
        return f"fnx.{self.name}"

    def __reduce__(self):
        return self.name


bool = dtype("bool", np.bool_, _BOOL, 0)
uint8 = dtype("uint8", np.uint8, _INT, 1)
int8 = dtype("int8", np.int8, _INT, 1)
int16 = dtype("int16", np.int16, _INT, 2)
int32 = dtype("int32", np.int32, _INT, 3)
int64 = dtype("int64", np.int64, _INT, 4)
float16 = dtype("float16", np.float16, _FLOAT, 1)
bfloat16 = dtype("bfloat16", _ml.bfloat16, _FLOAT, 1) if _ml is not None else None
float32 = dtype("float32", np.float32, _FLOAT, 2)
float64 = dtype("float64", np.float64, _FLOAT, 3)
complex64 = dtype("complex64", np.complex64, _COMPLEX, 2)
complex128 = dtype("complex128", np.complex128, _COMPLEX, 3)
half, float, double, short, int, long = float16, float32, float64, int16, int32, int64
cfloat, cdouble = complex64, complex128

ALL = tuple(d for d in (bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64, complex64,
                        complex128) if d is not None)
_BY_NP = {d.np: d for d in ALL}
FLOAT_NP = frozenset(d.np for d in ALL if d.is_floating_point)  # the numpy dtypes of the floating dtypes
INEXACT_NP = frozenset(d.np for d in ALL if d.is_inexact)      # ... and of the complex ones
_BY_NAME = {d.name: d for d in ALL}
_BY_NAME.update(half=float16, float=float32, double=float64, short=int16, int=int32, long=int64, cfloat=complex64,
                cdouble=complex128)

_default_float = float32


def get_default_dtype() -> dtype:
    """The dtype that floating-point tensors get when none is given (float32 unless changed)."""
    return _default_float


def set_default_dtype(d: dtype) -> None:
    """Set the default floating-point dtype (float16, bfloat16, float32 or float64)."""
    global _default_float
    d = as_dtype(d)
    if not d.is_floating_point:
        raise TypeError(f"set_default_dtype: only floating-point dtypes can be the default, got {d}")
    _default_float = d


def set_flush_denormal(mode: bool) -> bool:
    """PyTorch's switch for flushing denormal floats to zero on the CPU. numpy offers no control of the FPU's
    flush-to-zero mode, so fnx keeps IEEE denormals and returns False ("not configured"), which PyTorch too
    returns on a CPU without the mode; `set_flush_denormal(False)` asks for what already holds: True."""
    return not mode


def as_dtype(d) -> dtype:
    """Accept an fnx dtype, a numpy dtype or type, or a name; return the fnx dtype."""
    if type(d) is dtype:
        return d
    if isinstance(d, str):
        found = _BY_NAME.get(d)
        if found is None:
            raise TypeError(f"unknown dtype name {d!r}; known: {sorted(_BY_NAME)}")
        return found
    if d is builtins_float:  # PyTorch: the Python type float means float64
        return float64
    if d is builtins_int:
        return int64
    if d is builtins_bool:
        return bool
    if d is builtins_complex:
        return complex128
    try:
        found = _BY_NP.get(np.dtype(d))
    except TypeError:
        found = None
    if found is None:
        raise TypeError(f"unsupported dtype {d!r}; fnx supports {', '.join(x.name for x in ALL)}")
    return found


def from_numpy_dtype(npd) -> dtype:
    found = _BY_NP.get(npd)
    if found is None:
        raise TypeError(f"numpy dtype {npd} has no fnx equivalent; fnx supports {', '.join(x.name for x in ALL)}")
    return found


import builtins as _builtins  # noqa: E402  (the names bool/int/float are shadowed above)

builtins_bool, builtins_int, builtins_float = _builtins.bool, _builtins.int, _builtins.float
builtins_complex = _builtins.complex


def _promote2(a: dtype, b: dtype) -> dtype:
    if a is b:
        return a
    if a.is_complex or b.is_complex:   # the complex type whose parts hold both (float16 parts are complex64's)
        return complex128 if _promote2(a.to_real(), b.to_real()) is float64 else complex64
    if a.category != b.category:
        return a if a.category > b.category else b
    if a.category == _INT and (a is uint8) != (b is uint8):
        other = b if a is uint8 else a
        return int16 if other is int8 else other
    if a._rank == b._rank:  # float16 with bfloat16
        return float32
    return a if a._rank > b._rank else b


_PROMOTE = {(a, b): _promote2(a, b) for a in ALL for b in ALL}


def promote_types(a, b) -> dtype:
    """The smallest dtype both `a` and `b` convert to without losing their category (PyTorch's table)."""
    return _PROMOTE[as_dtype(a), as_dtype(b)]


def can_cast(from_, to) -> bool:
    """Whether PyTorch casts `from_` to `to` where it casts implicitly (results of in-place ops): any cast
    except a float to an integer or bool, and an integer to bool."""
    return as_dtype(from_).category <= as_dtype(to).category


def scalar_category(x) -> int:
    t = type(x)
    if t is builtins_bool:
        return _BOOL
    if t is builtins_int:
        return _INT
    if t is builtins_complex:
        return _COMPLEX
    return _FLOAT


def default_for_category(cat: int) -> dtype:
    """The dtype a Python scalar of category `cat` gets alone (a complex one: the default float's complex)."""
    if cat == _COMPLEX:
        return complex128 if _default_float is float64 else complex64
    return (bool, int64, _default_float)[cat]


def result_type(*args) -> dtype:
    """The dtype of an elementwise op over `args`: tensors, Python scalars or dtypes.

    Like PyTorch: tensors with dimensions outrank zero-dim tensors, which
    outrank Python scalars, as long as the lower tier does not bring a higher
    category (bool < int < float).
    """
    dims = zero = None
    scalar_cat = -1
    for x in args:
        if isinstance(x, dtype):
            dims = x if dims is None else _PROMOTE[dims, x]
            continue
        d = getattr(x, "dtype", None)
        if d is None:
            if not isinstance(x, (builtins_bool, builtins_int, builtins_float, builtins_complex, np.generic)):
                raise TypeError(f"result_type: expected tensors, dtypes or Python scalars, got {type(x).__name__}")
            if isinstance(x, np.generic):
                d = as_dtype(x.dtype)
                zero = d if zero is None else _PROMOTE[zero, d]
            else:
                scalar_cat = max(scalar_cat, scalar_category(x))
            continue
        d = as_dtype(d)
        if len(x.shape):
            dims = d if dims is None else _PROMOTE[dims, d]
        else:
            zero = d if zero is None else _PROMOTE[zero, d]
    out = dims
    if zero is not None:
        if out is None or zero.category > out.category:
            # a complex zero-dim tensor keeps a floating tensor's precision too (float64 + complex64: complex128)
            out = _PROMOTE[out, zero] if zero.is_complex and out is not None and out.is_floating_point else zero
    if scalar_cat >= 0 and (out is None or scalar_cat > out.category):
        # a complex scalar keeps a floating tensor's precision (float64 tensor * 1j is complex128)
        out = out.to_complex() if scalar_cat == _COMPLEX and out is not None and out.is_floating_point \
            else default_for_category(scalar_cat)
    if out is None:
        raise TypeError("result_type: needs at least one argument")
    return out


class finfo:
    """Machine limits of a floating-point dtype (`fnx.finfo(fnx.float32).eps`)."""

    def __init__(self, d=None):
        d = as_dtype(d if d is not None else _default_float).to_real()   # a complex type: its parts' limits
        if not d.is_floating_point:
            raise TypeError(f"finfo: {d} is not a floating-point dtype; use fnx.iinfo")
        info = _ml.finfo(d.np) if d is bfloat16 else np.finfo(d.np)
        self.dtype, self.bits = d, d.itemsize * 8
        self.eps, self.max, self.min = builtins_float(info.eps), builtins_float(info.max), builtins_float(info.min)
        self.tiny = self.smallest_normal = builtins_float(info.tiny)
        self.resolution = builtins_float(info.resolution)

    def __repr__(self) -> str:
        return f"finfo(dtype={self.dtype.name}, eps={self.eps}, max={self.max}, min={self.min}, tiny={self.tiny})"


class iinfo:
    """Machine limits of an integer dtype."""

    def __init__(self, d):
        d = as_dtype(d)
        if d.category != _INT:
            raise TypeError(f"iinfo: {d} is not an integer dtype; use fnx.finfo")
        info = np.iinfo(d.np)
        self.dtype, self.bits, self.max, self.min = d, d.itemsize * 8, builtins_int(info.max), builtins_int(info.min)

    def __repr__(self) -> str:
        return f"iinfo(dtype={self.dtype.name}, min={self.min}, max={self.max})"
