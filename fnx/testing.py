"""`fnx.testing` (torch.testing): `assert_close` and `make_tensor`, for tests written against PyTorch's API.

`assert_close(actual, expected)` compares tensors, numpy arrays, Python numbers and nested sequences or
mappings of them, |actual - expected| <= atol + rtol |expected| elementwise, with PyTorch's default tolerances
per dtype (0 for integers and bools: exact), and checks shapes, dtypes and devices as PyTorch does. A failure
says how many elements differ and the greatest absolute and relative differences with their indices.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from . import dtypes as _dt
from ._warn import warn
from .ops.creation import tensor
from .ops.sampling import rand, randint
from .tensor import Tensor

__all__ = ["assert_close", "assert_allclose", "make_tensor"]

# (rtol, atol) by dtype, PyTorch's defaults
_TOLERANCES = {_dt.float16: (1e-3, 1e-5), _dt.bfloat16: (1.6e-2, 1e-5), _dt.float32: (1.3e-6, 1e-5),
               _dt.float64: (1e-7, 1e-7), _dt.complex64: (1.3e-6, 1e-5), _dt.complex128: (1e-7, 1e-7)}


def _as_tensor(x: Any) -> Tensor | None:
    if isinstance(x, Tensor):
        return x.detach()
    if isinstance(x, (bool, int, float, complex, np.ndarray, np.generic)):
        return tensor(x)
    return None


def assert_close(actual: Any, expected: Any, *, allow_subclasses: bool = True, rtol: float | None = None,
                 atol: float | None = None, equal_nan: bool = False, check_device: bool = True,
                 check_dtype: bool = True, check_layout: bool = True, check_stride: bool = False,
                 msg: str | None = None) -> None:
    """Raise AssertionError unless `actual` and `expected` are close (see the module docstring); `rtol` and
    `atol` go together (both or neither), NaNs match each other with `equal_nan`."""
    if (rtol is None) != (atol is None):
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, but got no "
                         f"{'atol' if atol is None else 'rtol'}.")
    _compare(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, check_stride, msg, ())


# assert_allclose's (rtol, atol) by dtype, the larger of the two inputs' applying; (0, 0) for the others
_ALLCLOSE_TOLERANCES = {_dt.float16: (1e-3, 1e-3), _dt.float32: (1e-4, 1e-5), _dt.float64: (1e-5, 1e-8)}


def assert_allclose(actual: Any, expected: Any, rtol: float | None = None, atol: float | None = None,
                    equal_nan: bool = True, msg: str = "") -> None:
    """Deprecated since PyTorch 1.12 (warns a FutureWarning): `assert_close` without the dtype check, with
    NaNs equal by default and its own default tolerances; a non-tensor `expected` takes `actual`'s dtype."""
    warn("`torch.testing.assert_allclose()` is deprecated since 1.12 and will be removed in a future release. "
         "Please use `torch.testing.assert_close()` instead. You can find detailed upgrade instructions in "
         "https://github.com/pytorch/pytorch/issues/61844.", FutureWarning)
    actual = actual if isinstance(actual, Tensor) else tensor(actual)
    expected = expected if isinstance(expected, Tensor) else tensor(expected, dtype=actual.dtype)
    if rtol is None and atol is None:
        rtol, atol = map(max, zip(*(_ALLCLOSE_TOLERANCES.get(t.dtype, (0.0, 0.0)) for t in (actual, expected))))
    assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan, check_device=True, check_dtype=False,
                 check_stride=False, msg=msg or None)


def _compare(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, check_stride, msg, path) -> None:
    where = "".join(f"[{p!r}]" for p in path)
    a, e = _as_tensor(actual), _as_tensor(expected)
    if a is None or e is None:
        if isinstance(actual, Mapping) and isinstance(expected, Mapping):
            if set(actual) != set(expected):
                raise AssertionError(msg or f"The keys of the mappings do not match{' at ' + where if where else ''}: "
                                            f"{sorted(map(str, actual))} != {sorted(map(str, expected))}")
            for k in expected:
                _compare(actual[k], expected[k], rtol, atol, equal_nan, check_device, check_dtype, check_stride, msg,
                         path + (k,))
            return
        if isinstance(actual, Sequence) and isinstance(expected, Sequence) and not isinstance(actual, str):
            if len(actual) != len(expected):
                raise AssertionError(msg or f"The length of the sequences mismatch{' at ' + where if where else ''}: "
                                            f"{len(actual)} != {len(expected)}")
            for i, (x, y) in enumerate(zip(actual, expected)):
                _compare(x, y, rtol, atol, equal_nan, check_device, check_dtype, check_stride, msg, path + (i,))
            return
        if actual == expected:
            return
        raise AssertionError(msg or f"Values are not equal{' at ' + where if where else ''}: {actual!r} != "
                                    f"{expected!r}")
    _compare_tensors(a, e, rtol, atol, equal_nan, check_device, check_dtype, check_stride, msg, where)


def _compare_tensors(a: Tensor, e: Tensor, rtol, atol, equal_nan, check_device, check_dtype, check_stride, msg,
                     where: str) -> None:
    at = f" at input{where}" if where else ""
    if tuple(a.shape) != tuple(e.shape):
        raise AssertionError(msg or f"The values for attribute 'shape' do not match{at}: {a.shape} != {e.shape}.")
    if check_device and a.device != e.device:
        raise AssertionError(msg or f"The values for attribute 'device' do not match{at}: {a.device} != {e.device}.")
    if check_dtype and a.dtype != e.dtype:
        raise AssertionError(msg or f"The values for attribute 'dtype' do not match{at}: {a.dtype} != {e.dtype}.")
    if check_stride and a.stride() != e.stride():
        raise AssertionError(msg or f"The values for attribute 'stride()' do not match{at}: {a.stride()} != "
                                    f"{e.stride()}.")
    if rtol is None:
        rtol, atol = max(_TOLERANCES.get(a.dtype, (0.0, 0.0)), _TOLERANCES.get(e.dtype, (0.0, 0.0)))
    x, y = a.cpu().numpy(), e.cpu().numpy()
    wide = np.complex128 if np.iscomplexobj(x) or np.iscomplexobj(y) else np.float64
    x, y = x.astype(wide), y.astype(wide)
    with np.errstate(invalid="ignore"):   # inf - inf: NaN, a mismatch unless both are the same infinity
        diff = np.abs(x - y)
        ok = diff <= atol + rtol * np.abs(y)
    ok |= x == y
    if equal_nan:
        ok |= np.isnan(x) & np.isnan(y)
    if ok.all():
        return
    if msg is not None:
        raise AssertionError(msg)
    bad = int((~ok).sum())
    exact = rtol == 0 and atol == 0
    kind = ("Scalars" if x.ndim == 0 else "Tensor-likes") + (" are not equal" if exact else " are not close")
    allowed = (lambda tol: "") if exact else (lambda tol: f" (up to {tol} allowed)")
    value = (lambda v: int(v)) if exact and np.isrealobj(x) and float(np.abs(x - np.round(x)).max()) == 0 else float
    if x.ndim == 0:
        relative = diff.item() / abs(y.item()) if y.item() else np.inf
        raise AssertionError(f"{kind}{at}!\n\nExpected {y.item()} but got {x.item()}.\n"
                             f"Absolute difference: {value(diff.item())}{allowed(atol)}\n"
                             f"Relative difference: {relative}{allowed(rtol)}")
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = diff / np.abs(y)
    ia = np.unravel_index(int(np.argmax(np.where(np.isnan(diff), np.inf, diff))), x.shape)
    ir = np.unravel_index(int(np.argmax(np.where(np.isnan(relative), np.inf, relative))), x.shape)
    raise AssertionError(f"{kind}{at}!\n\nMismatched elements: {bad} / {x.size} ({100 * bad / x.size:.1f}%)\n"
                         f"Greatest absolute difference: {value(diff[ia])} at index {tuple(int(i) for i in ia)}"
                         f"{allowed(atol)}\n"
                         f"Greatest relative difference: {float(relative[ir])} at index {tuple(int(i) for i in ir)}"
                         f"{allowed(rtol)}")


def make_tensor(*shape, dtype, device=None, low: float | None = None, high: float | None = None,
                requires_grad: bool = False, noncontiguous: bool = False, exclude_zero: bool = False,
                memory_format=None) -> Tensor:
    """A tensor of `shape` with values drawn uniformly from [low, high) (defaults: -9 to 9, or 0 to 10 for
    unsigned integers; bools True or False), as torch.testing.make_tensor; zeros are replaced by a small value
    with `exclude_zero`."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    dtype = _dt.as_dtype(dtype) if not isinstance(dtype, _dt.dtype) else dtype
    if dtype is _dt.bool:
        out = randint(0, 2, shape, device=device).to(_dt.bool)
    elif dtype.is_floating_point or dtype.is_complex:
        lo, hi = -9.0 if low is None else low, 9.0 if high is None else high
        base = _dt.float64 if dtype in (_dt.float64, _dt.complex128) else _dt.float32
        out = (rand(*shape, dtype=base, device=device) * (hi - lo) + lo).to(dtype)
        if exclude_zero:
            out = out.masked_fill(out == 0, float(np.finfo(np.float16 if dtype is _dt.float16 else np.float32).eps))
    else:
        lo = (0 if dtype is _dt.uint8 else -9) if low is None else int(low)
        hi = 10 if high is None else int(high)
        out = randint(lo, hi, shape, device=device).to(dtype)
        if exclude_zero:
            out = out.masked_fill(out == 0, 1)
    if noncontiguous and out.numel() > 1:
        out = out.repeat_interleave(2, dim=-1)[..., ::2]
    if memory_format is not None:
        out = out.contiguous(memory_format=memory_format)
    return out.requires_grad_(requires_grad) if requires_grad else out
