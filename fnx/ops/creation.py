"""Tensor creation, device transfer and copies.

Outside staging every creation function returns a concrete tensor (under grad, jvp and vmap too, so
writing a traced value into one raises: fnx/ops/inplace.py). While the staging trace of fnx.compile or
make_jaxpr is active they return a tracer of it instead (`_new`), a constant of the jaxpr that in-place
ops may rebind, so `buf = fnx.zeros(n); buf[i] = x` compiles (`core.stage_created_hook`, set by
fnx/transforms/tracing.py). A tensor that requires grad stays concrete: it is a leaf the caller may read
`.grad` of.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from .. import _dlpack, core, legacy_types
from .. import dtypes as _dt
from ..array_layout import copied, dense_order
from ..core import FnxRuntimeError, FnxTypeError, FnxValueError, Primitive, ShapedArray
from ..device import cpu, device as _device_cls, device_of_array, get_default_device, set_default_device
from ..tensor import (Size, Tensor, Tracer, channels_last, channels_last_3d, check_layout, check_memory_format,
                      contiguous_format, make, preserve_format)
from ..tree import tree_map
from ._batching import unary_batch_rule
from .joins import stack
from .shape import permute


__all__ = ["tensor", "as_tensor", "asarray", "from_numpy", "from_dlpack", "zeros", "ones", "empty", "full",
           "zeros_like", "ones_like", "empty_like", "full_like", "arange", "linspace", "logspace", "eye", "clone",
           "contiguous", "triu_indices", "tril_indices", "empty_strided", "empty_permuted", "scalar_tensor",
           "frombuffer", "set_default_tensor_type"]


def _new(value, dev, requires_grad: bool = False) -> Tensor:
    """The new tensor holding array `value`: concrete, or a tracer while staging (see the module docstring)."""
    t = make(value, dev)
    if requires_grad:
        return t.requires_grad_(True)
    if core.state.transforms_active and core.state.dynamic_trace.level:
        return core.stage_created_hook(t)
    return t


def _device(device) -> _device_cls:
    """The device a factory creates on: `device`, or the default one (fnx.set_default_device)."""
    return get_default_device() if device is None else _device_cls(device)


def _xp(dev: _device_cls, dt: _dt.dtype):
    """The array module of `dev`, after checking that it can hold `dt`."""
    xp = dev.xp
    if xp is not np:
        _check_cuda_dtype(dt)
    return xp


def sizes_or_size(sizes: tuple, size, op: str) -> tuple:
    """A factory's shape as PyTorch takes it: positional ints or one sequence (`zeros(2, 3)`, `zeros((2, 3))`), or
    the keyword `size=` (`zeros(size=(2, 3))`), not both."""
    if size is None:
        return sizes
    if sizes:
        raise FnxTypeError(f"{op}() got multiple values for argument 'size'")
    return (size,)


def _shape(size) -> tuple:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    shape = tuple(map(int, size))
    if shape and min(shape) < 0:
        raise FnxRuntimeError(f"trying to create tensor with negative dimension: {list(shape)}")
    return shape


def _infer_dtype(data) -> _dt.dtype:
    """The dtype PyTorch would give Python data: bool, int64, the default float or its complex type."""
    try:
        arr = np.asarray(data)
    except ValueError as e:
        raise FnxValueError(f"tensor(): nested sequences must be rectangular (every row the same length): {e}") from e
    if arr.dtype.kind == "b":
        return _dt.bool
    if arr.dtype.kind in "iu":
        return _dt.int64
    if arr.dtype.kind == "f":
        return _dt.get_default_dtype()
    if arr.dtype.kind == "c":
        return _dt.get_default_dtype().to_complex()
    raise FnxTypeError(f"tensor: could not infer a dtype for data of numpy kind {arr.dtype} ({type(data).__name__})")


def _host_array(data):
    """numpy array for Python data, numpy or CuPy arrays, tensors or nested lists of tensors."""
    if isinstance(data, Tensor):
        return data._value
    if isinstance(data, (list, tuple)) and any(isinstance(d, Tensor) for d in data):
        return np.stack([np.asarray(_host_array(d).get() if hasattr(_host_array(d), "get") else _host_array(d))
                         for d in data])
    return data


def tensor(data, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A new tensor holding a copy of `data`. Python floats give float32; numpy arrays keep their dtype."""
    src = data
    if isinstance(data, Tensor):
        if isinstance(data, Tracer):
            return _traced_copy(data, dtype, device, requires_grad)
        src = data._value
    elif isinstance(data, (list, tuple)) and any(isinstance(d, Tensor) for d in data):
        if any(isinstance(d, Tracer) for d in data):
            return _traced_copy(data, dtype, device, requires_grad)
        src = _host_array(data)
    if dtype is None:
        if isinstance(src, np.ndarray) or hasattr(src, "__cuda_array_interface__") or isinstance(src, np.generic):
            dt = _dt.from_numpy_dtype(src.dtype)
        else:
            dt = _infer_dtype(src)
    else:
        dt = _dt.as_dtype(dtype)
    if device is None and hasattr(src, "__cuda_array_interface__"):
        dev = device_of_array(src)
    else:
        dev = _device(device)
    xp = _xp(dev, dt)
    if dev is cpu and hasattr(src, "__cuda_array_interface__"):
        src = src.get()
    return _new(xp.array(src, dtype=dt.np, copy=True), dev, requires_grad)


def _traced_copy(data, dtype, device, requires_grad: bool) -> Tensor:
    """tensor() of a tracer, or of a list holding tracers: a detached copy (fnx.stack of the elements)."""
    if requires_grad:
        raise FnxRuntimeError("tensor(): requires_grad=True of a traced value inside a transform is not supported; "
                              "differentiate with the transform instead (fnx.grad)")
    if isinstance(data, (list, tuple)):
        parts = [tensor(d, dtype=dtype, device=device) for d in data]
        return stack(parts) if dtype is None else stack(parts).to(dtype)
    out = copy_p.bind(stop_gradient(data))
    out = out if dtype is None else out.to(dtype)
    return out if device is None else transfer(out, device)


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """`data` as a tensor, sharing memory when it already is one (or a numpy array) of that dtype/device."""
    if isinstance(data, Tensor):
        return data.to(device=device, dtype=dtype) if (device or dtype) else data
    if isinstance(data, np.ndarray) and _device(device) is cpu:
        if dtype is None or _dt.as_dtype(dtype).np == data.dtype:
            return from_numpy(data)
    return tensor(data, dtype=dtype, device=device)


asarray = as_tensor


def from_numpy(ndarray: np.ndarray) -> Tensor:
    """A CPU tensor sharing memory with `ndarray`."""
    if not isinstance(ndarray, np.ndarray):
        raise FnxTypeError(f"from_numpy: expected np.ndarray, got {type(ndarray).__name__}")
    _dt.from_numpy_dtype(ndarray.dtype)
    return _new(ndarray, cpu)


def from_dlpack(ext) -> Tensor:
    """A tensor sharing memory with any object that implements `__dlpack__` (numpy, CuPy, torch, jax)."""
    dev_type, dev_id = ext.__dlpack_device__()
    if int(dev_type) == 1:
        arr = _dlpack.import_cpu(ext)  # bfloat16 too, which numpy cannot import
    else:
        arr = _device_cls("cuda", dev_id).xp.from_dlpack(ext)
    _dt.from_numpy_dtype(arr.dtype)
    return _new(arr, device_of_array(arr))


def _filled(shape: tuple, value, dtype, device, fn: str, requires_grad: bool) -> Tensor:
    dev = _device(device)
    if dtype is None:
        dt = _dt.default_for_category(_dt.scalar_category(value)) if fn == "full" else _dt.get_default_dtype()
    else:
        dt = _dt.as_dtype(dtype)
    xp = _xp(dev, dt)
    if fn == "full":
        return _new(xp.full(shape, value, dtype=dt.np), dev, requires_grad)
    return _new(getattr(xp, fn)(shape, dtype=dt.np), dev, requires_grad)   # xp.zeros, ones, empty


def zeros(*sizes, size=None, dtype=None, layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of zeros (default float dtype)."""
    check_layout("zeros", layout)
    return _filled(_shape(sizes_or_size(sizes, size, "zeros")), 0, dtype, device, "zeros", requires_grad)


def ones(*sizes, size=None, dtype=None, layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of ones (default float dtype)."""
    check_layout("ones", layout)
    return _filled(_shape(sizes_or_size(sizes, size, "ones")), 1, dtype, device, "ones", requires_grad)


def empty(*sizes, size=None, dtype=None, layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """An uninitialised tensor."""
    check_layout("empty", layout)
    return _filled(_shape(sizes_or_size(sizes, size, "empty")), 0, dtype, device, "empty", requires_grad)


def full(size, fill_value, *, dtype=None, layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor filled with `fill_value`; the dtype follows the value's kind (bool, int64, default float)."""
    check_layout("full", layout)
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    return _filled(_shape((size,)), fill_value, dtype, device, "full", requires_grad)


def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """An uninitialised tensor of shape `size` whose memory is laid out with strides `stride` (in elements)."""
    check_layout("empty_strided", layout)
    shape, strides = _shape((size,)), tuple(map(int, stride))
    if len(shape) != len(strides):
        raise FnxRuntimeError(f"empty_strided: mismatch in length of strides and shape: {len(strides)} strides for "
                              f"size {list(shape)}")
    if min(strides, default=0) < 0:
        raise FnxRuntimeError(f"empty_strided: strides must be non-negative, got {list(strides)}")
    dev = _device(device)
    dt = _dt.get_default_dtype() if dtype is None else _dt.as_dtype(dtype)
    xp = _xp(dev, dt)
    span = 1 + sum((n - 1) * st for n, st in zip(shape, strides)) if all(shape) else 0
    memory = xp.empty(span, dtype=dt.np)
    view = xp.lib.stride_tricks.as_strided(memory, shape, tuple(st * memory.itemsize for st in strides))
    return _new(view, dev, requires_grad)


def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None,
                   requires_grad: bool = False) -> Tensor:
    """An uninitialised dense tensor of shape `size` whose dims lie in memory in the order `physical_layout`
    (outermost first): empty_permuted((n, c, h, w), (0, 2, 3, 1)) is channels-last."""
    check_layout("empty_permuted", layout)
    shape, order = _shape((size,)), tuple(map(int, physical_layout))
    if sorted(order) != list(range(len(shape))):
        raise FnxRuntimeError(f"empty_permuted: physical_layout {list(order)} must be a permutation of the "
                              f"{len(shape)} dims of size {list(shape)}")
    memory = empty(tuple(shape[d] for d in order), dtype=dtype, device=device)
    return _new(memory._value.transpose(tuple(np.argsort(order))), memory._device, requires_grad)


def scalar_tensor(s, *, dtype=None, layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """A 0-d tensor holding the number `s`, of the default float dtype unless `dtype` is given."""
    check_layout("scalar_tensor", layout)
    return _filled((), s, _dt.get_default_dtype() if dtype is None else dtype, device, "full", requires_grad)


def frombuffer(buffer, *, dtype, count: int = -1, offset: int = 0, requires_grad: bool = False) -> Tensor:
    """A 1-D CPU tensor sharing memory with a Python buffer (bytearray, array.array, memoryview, mmap):
    `count` elements of `dtype` (-1: all) from byte `offset`. A read-only buffer (bytes) is copied."""
    dt = _dt.as_dtype(dtype)
    view = memoryview(buffer)
    total, size = view.nbytes, dt.itemsize
    if not 0 <= offset < max(total, 1):
        raise FnxValueError(f"frombuffer: offset ({offset} bytes) must be non-negative and no greater than buffer "
                            f"length ({total} bytes) minus 1")
    if count < 0:
        if (total - offset) % size:
            raise FnxValueError(f"frombuffer: buffer length ({total - offset} bytes) after offset ({offset} bytes) "
                                f"must be a multiple of element size ({size})")
        count = (total - offset) // size
    elif offset + count * size > total:
        raise FnxValueError(f"frombuffer: requested buffer length ({count} * {size} bytes) after offset ({offset} "
                            f"bytes) must not be greater than actual buffer length ({total} bytes)")
    arr = np.frombuffer(view.cast("B"), dtype=dt.np, count=count, offset=offset)
    if not arr.flags.writeable:
        warnings.warn("frombuffer: the given buffer is not writable, so fnx copies it (PyTorch would share it and "
                      "allow writes to memory Python considers immutable)", UserWarning, stacklevel=2)
        arr = arr.copy()
    return _new(arr, cpu, requires_grad)


def set_default_tensor_type(t) -> None:
    """Deprecated PyTorch form of set_default_dtype (and set_default_device for CUDA types): `t` is a legacy
    type (fnx.FloatTensor, fnx.DoubleTensor, ...) or its name ('torch.cuda.FloatTensor', ...)."""
    warnings.warn("set_default_tensor_type() is deprecated as of PyTorch 2.1, please use set_default_dtype() and "
                  "set_default_device() as alternatives", UserWarning, stacklevel=2)
    name = t if isinstance(t, str) else getattr(t, "__name__", "")
    short = name.rpartition(".")[2] if isinstance(name, str) else ""
    legacy = getattr(legacy_types, short) if short in legacy_types.__all__ else None
    if legacy is None:
        raise FnxTypeError(f"set_default_tensor_type: invalid type {t!r}; expected a legacy tensor type such as "
                           f"torch.FloatTensor or 'torch.cuda.DoubleTensor'")
    if not legacy.dtype.is_floating_point:
        raise FnxTypeError(f"set_default_tensor_type: only floating-point types are supported as the default type, "
                           f"got {name}")
    _dt.set_default_dtype(legacy.dtype)
    set_default_device("cuda" if isinstance(t, str) and ".cuda." in t else None)


def _like(input: Tensor, dtype, device):
    return (input.dtype if dtype is None else dtype), (input.device if device is None else device)


def zeros_like(input: Tensor, *, dtype=None, layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """Zeros with the shape (and, unless given, dtype and device) of `input`."""
    check_layout("zeros_like", layout)
    dt, dev = _like(input, dtype, device)
    return zeros(tuple(input.shape), dtype=dt, device=dev, requires_grad=requires_grad)


def ones_like(input: Tensor, *, dtype=None, layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """Ones with the shape (and, unless given, dtype and device) of `input`."""
    check_layout("ones_like", layout)
    dt, dev = _like(input, dtype, device)
    return ones(tuple(input.shape), dtype=dt, device=dev, requires_grad=requires_grad)


def empty_like(input: Tensor, *, dtype=None, layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """An uninitialised tensor with the shape (and, unless given, dtype and device) of `input`."""
    check_layout("empty_like", layout)
    dt, dev = _like(input, dtype, device)
    return empty(tuple(input.shape), dtype=dt, device=dev, requires_grad=requires_grad)


def full_like(input: Tensor, fill_value, *, dtype=None, layout=None, device=None,
              requires_grad: bool = False) -> Tensor:
    """`fill_value` everywhere, with the shape (and, unless given, dtype and device) of `input`."""
    check_layout("full_like", layout)
    dt, dev = _like(input, dtype, device)
    return full(tuple(input.shape), fill_value, dtype=dt, device=dev, requires_grad=requires_grad)


def arange(start, end=None, step=1, *, dtype=None, layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """Values from `start` to `end` (exclusive) by `step`; int64 if all three are ints, else default float."""
    check_layout("arange", layout)
    if end is None:
        start, end = 0, start
    vals = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    if vals[2] == 0:
        raise FnxRuntimeError("arange: step must be nonzero")
    if dtype is None:
        dtype = _dt.int64 if all(isinstance(v, int) for v in vals) else _dt.get_default_dtype()
    dt = _dt.as_dtype(dtype)
    n = max(0, math.ceil((vals[1] - vals[0]) / vals[2]))
    dev = _device(device)
    xp = _xp(dev, dt)
    value = (xp.arange(n, dtype=np.float64) * vals[2] + vals[0]).astype(dt.np) if dt.is_floating_point else \
        xp.arange(vals[0], vals[1], vals[2], dtype=dt.np)
    return _new(value, dev, requires_grad)


def linspace(start, end, steps: int, *, dtype=None, layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """`steps` evenly spaced values from `start` to `end` inclusive."""
    check_layout("linspace", layout)
    dev = _device(device)
    dt = _dt.as_dtype(dtype) if dtype is not None else _dt.get_default_dtype()
    return _new(_xp(dev, dt).linspace(start, end, int(steps)).astype(dt.np), dev, requires_grad)


def logspace(start, end, steps: int, base: float = 10.0, *, dtype=None, layout=None, device=None) -> Tensor:
    """`steps` values spaced evenly on a log scale: base ** linspace(start, end, steps)."""
    check_layout("logspace", layout)
    dev = _device(device)
    dt = _dt.as_dtype(dtype) if dtype is not None else _dt.get_default_dtype()
    return _new(_xp(dev, dt).logspace(start, end, int(steps), base=base).astype(dt.np), dev)


def eye(n: int, m: int | None = None, *, dtype=None, layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """An n x m identity matrix."""
    check_layout("eye", layout)
    dev = _device(device)
    dt = _dt.as_dtype(dtype) if dtype is not None else _dt.get_default_dtype()
    return _new(_xp(dev, dt).eye(n, n if m is None else m, dtype=dt.np), dev, requires_grad)


def _triangle_indices(op: str, row: int, col: int, offset: int, dtype, device, upper: bool) -> Tensor:
    dev = _device(device)
    dt = _dt.int64 if dtype is None else _dt.as_dtype(dtype)
    if dt not in (_dt.int32, _dt.int64):
        raise FnxTypeError(f"{op}: dtype must be fnx.int32 or fnx.int64, got {dt}")
    if row < 0 or col < 0:
        raise FnxRuntimeError(f"{op}: row and col must be non-negative, got row={row}, col={col}")
    pick = np.triu_indices if upper else np.tril_indices
    return _new(_xp(dev, dt).asarray(np.stack(pick(row, offset, col)).astype(dt.np)), dev)


def triu_indices(row: int, col: int, offset: int = 0, *, dtype=None, layout=None, device=None) -> Tensor:
    """The (2, N) row and column indices of the upper triangle of a row x col matrix, diagonal `offset` and above,
    in row-major order (PyTorch's `triu_indices`)."""
    check_layout("triu_indices", layout)
    return _triangle_indices("triu_indices", row, col, offset, dtype, device, upper=True)


def tril_indices(row: int, col: int, offset: int = 0, *, dtype=None, layout=None, device=None) -> Tensor:
    """The (2, N) row and column indices of the lower triangle of a row x col matrix, diagonal `offset` and below,
    in row-major order (PyTorch's `tril_indices`)."""
    check_layout("tril_indices", layout)
    return _triangle_indices("tril_indices", row, col, offset, dtype, device, upper=False)


# ---------------------------------------------------------------- copies and transfers
copy_p = Primitive("copy", saves_inputs=False, groups=("movement",))
copy_p.def_impl(lambda xp, x: copied(x) if xp is np else x.copy())
copy_p.def_abstract(lambda x: x)
copy_p.def_vjp(lambda g, primals, out: (g,))
copy_p.def_jvp(lambda primals, tangents: (copy_p.bind(primals[0]), tangents[0]))


def clone(input: Tensor, *, memory_format=preserve_format) -> Tensor:
    """A copy with its own memory, laid out as `memory_format` names: by default as `input` is where its elements
    fill a block of memory (a channels_last tensor stays so), else row-major; gradients flow through it."""
    check_memory_format("clone", memory_format)
    if memory_format is not preserve_format:
        out = to_memory_format(input, memory_format, "clone")
        return clone(out) if out is input else out
    order = memory_order(input)
    if order is None:
        return copy_p.bind(input)
    inverse = tuple(int(d) for d in np.argsort(order))
    return permute(copy_p.bind(permute(input, *order)), *inverse)


def contiguous(input: Tensor, memory_format=contiguous_format) -> Tensor:
    """`input` if already laid out as `memory_format` names (row-major by default), else a copy so laid out."""
    check_memory_format("contiguous", memory_format)
    if memory_format in _CHANNELS_LAST:
        return to_memory_format(input, memory_format, "contiguous")
    if not _is_tracer(input) and input._value.flags.c_contiguous:
        return input
    return copy_p.bind(input)


# the channels-last formats by the rank they lay out
_CHANNELS_LAST = {channels_last: 4, channels_last_3d: 5}


def to_memory_format(input: Tensor, memory_format, op: str) -> Tensor:
    """`input` laid out as `memory_format` names (PyTorch's `to(memory_format=)`): row-major for
    contiguous_format, channels innermost for channels_last (rank 4: NHWC in memory) and channels_last_3d (rank 5),
    as it is for preserve_format and None. A copy only where the layout changes (a permuted copy, so gradients
    flow); a tracer as it is (layout is an eager matter: the values are the same)."""
    check_memory_format(op, memory_format)
    rank = _CHANNELS_LAST.get(memory_format)
    if rank is None:
        return contiguous(input) if memory_format is contiguous_format else input
    if input.ndim != rank:
        raise FnxRuntimeError(f"{op}: required rank {rank} tensor to use {memory_format.name} format, got a tensor "
                              f"of shape {list(input.shape)}")
    if _is_tracer(input) or input.is_contiguous(memory_format=memory_format):
        return input
    inner = copy_p.bind(permute(input, 0, *range(2, rank), 1))
    return permute(inner, 0, rank - 1, *range(1, rank - 1))


# ---------------------------------------------------------------- stop_gradient
stop_gradient_p = Primitive("stop_gradient", saves_inputs=False, differentiable=False, groups=("movement",))
stop_gradient_p.def_impl(lambda xp, x: x)
stop_gradient_p.def_abstract(lambda x: x)
stop_gradient_p.def_vjp(lambda g, primals, out: (None,))
stop_gradient_p.def_jvp(lambda primals, tangents: (stop_gradient_p.bind(primals[0]), _zero_tangent(primals[0])))
stop_gradient_p.def_batch(lambda args, dims: (stop_gradient_p.bind(args[0]), dims[0]))


def stop_gradient(x):
    """`x` with no gradient flowing through it (a pytree of Tensors)."""
    return tree_map(lambda t: stop_gradient_p.bind(t) if isinstance(t, Tensor) else t, x)


def _zero_tangent(x):
    return zeros_like(x) if x.dtype.is_floating_point else None


def _is_tracer(t) -> bool:
    return isinstance(t, Tracer)


def memory_order(input: Tensor) -> tuple | None:
    """The order of the eager `input`'s dims in which its memory is row-major (a channels_last tensor:
    (0, 2, 3, 1)) where that is not its own order and its elements fill a block of memory; else None (row-major,
    strided views, tracers: they carry no layout)."""
    if _is_tracer(input) or input._value.flags.c_contiguous:
        return None
    return dense_order(input._value)


transfer_p = Primitive("device_put", saves_inputs=False)


@transfer_p.def_impl
def _transfer_impl(xp, x, *, device):
    if device is cpu:
        return x.get() if not isinstance(x, np.ndarray) else x.copy()
    cp = device.xp
    with cp.cuda.Device(device.index):  # CuPy's copy() lands on the current device
        return cp.asarray(x) if isinstance(x, np.ndarray) else x.copy()


transfer_p.def_abstract(lambda x, *, device: ShapedArray(x.shape, x.dtype, device))
transfer_p.def_vjp(lambda g, primals, out, *, device: (transfer(g, primals[0].device),))
transfer_p.def_jvp(lambda primals, tangents, *, device: (transfer(primals[0], device), transfer(tangents[0], device)))


def transfer(input: Tensor, device) -> Tensor:
    """A copy of `input` on `device` (differentiable: the gradient moves back)."""
    device = _device_cls(device)
    if device is input.device:
        return input
    _xp(device, input.dtype)  # raises a clear error when CUDA is unavailable or lacks the dtype
    if _is_tracer(input) or core.state.transforms_active:
        out = transfer_p.bind(input, device=device)
        if not _is_tracer(out):
            out._device = device
        return out
    # Eager: the output lives on another device than the input, which bind's fast path does not expect.
    out = make(_transfer_impl(None, input._value, device=device), device)
    if core.state.grad_enabled and input._requires_grad:
        return core.record_hook(transfer_p, (input,), {"device": device}, out)
    return out


_cuda_dtype_ok: dict = {}


def _check_cuda_dtype(dt: _dt.dtype) -> None:
    """CuPy has no bfloat16 (nor any ml_dtypes type): say so instead of failing deep inside CuPy."""
    ok = _cuda_dtype_ok.get(dt)
    if ok is None:
        try:
            _device_cls("cuda").xp.zeros(1, dtype=dt.np)
            ok = True
        except Exception:
            ok = False
        _cuda_dtype_ok[dt] = ok
    if not ok:
        raise FnxTypeError(f"{dt} tensors are not supported on CUDA by this CuPy build; convert first, e.g. "
                           f"tensor.float().cuda()")


copy_p.def_batch(unary_batch_rule(copy_p))
transfer_p.def_batch(unary_batch_rule(transfer_p))


# ---------------------------------------------------------------- Tensor.new_*: new tensors like `self`
def _like_self(self: Tensor, dtype, device) -> dict:
    return {"dtype": self.dtype if dtype is None else dtype, "device": self.device if device is None else device}


def new_tensor(self: Tensor, data, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A copy of `data` with `self`'s dtype and device unless given (PyTorch's `Tensor.new_tensor`)."""
    return tensor(data, **_like_self(self, dtype, device), requires_grad=requires_grad)


def new_zeros(self: Tensor, *size, dtype=None, layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """Zeros of shape `size` with `self`'s dtype and device unless given."""
    check_layout("new_zeros", layout)
    return zeros(*size, **_like_self(self, dtype, device), requires_grad=requires_grad)


def new_ones(self: Tensor, *size, dtype=None, layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """Ones of shape `size` with `self`'s dtype and device unless given."""
    check_layout("new_ones", layout)
    return ones(*size, **_like_self(self, dtype, device), requires_grad=requires_grad)


def new_empty(self: Tensor, *size, dtype=None, layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """An uninitialised tensor of shape `size` with `self`'s dtype and device unless given."""
    check_layout("new_empty", layout)
    return empty(*size, **_like_self(self, dtype, device), requires_grad=requires_grad)


def new_full(self: Tensor, size, fill_value, *, dtype=None, layout=None, device=None,
             requires_grad: bool = False) -> Tensor:
    """`fill_value` in shape `size` with `self`'s dtype and device unless given."""
    check_layout("new_full", layout)
    return full(size, fill_value, **_like_self(self, dtype, device), requires_grad=requires_grad)


def new_empty_strided(self: Tensor, size, stride, *, dtype=None, layout=None, device=None,
                      requires_grad: bool = False) -> Tensor:
    """`empty_strided(size, stride)` with `self`'s dtype and device unless given."""
    check_layout("new_empty_strided", layout)
    return empty_strided(size, stride, **_like_self(self, dtype, device), requires_grad=requires_grad)


def new(self: Tensor, *args, device=None) -> Tensor:
    """PyTorch's legacy `Tensor.new`, with `self`'s dtype (and device unless given): no arguments an empty (0,)
    tensor, sizes (ints, or one Size) an uninitialised tensor of that shape, one sequence, array or tensor a copy
    of its values."""
    like = _like_self(self, None, device)
    if not args:
        return empty(0, **like)
    if len(args) == 1 and not isinstance(args[0], (int, np.integer, Size)):
        return tensor(args[0].detach() if isinstance(args[0], Tensor) else args[0], **like)
    return empty(*args, **like)


METHODS: dict = {"new_tensor": new_tensor, "new_zeros": new_zeros, "new_ones": new_ones, "new_empty": new_empty,
                 "new_full": new_full, "new": new, "new_empty_strided": new_empty_strided}   # Tensor methods beyond those in fnx/_methods.py
INPLACE: dict = {}
