"""`fnx.Tensor`: an n-d array on a device, with autograd bookkeeping.

A concrete Tensor wraps a numpy (CPU) or CuPy (CUDA) array. Every op goes
through `fnx.core.bind`; the methods here only convert, inspect and route.
Ops are attached as methods by `fnx._methods`, so `x.exp()` and
`fnx.exp(x)` are the same function.

This module sits below `fnx.core` (which makes Tensors) and imports only leaf
modules. The methods that call ops are attached by the layers that own them:
the constructor, `to` and the tracer's `__setitem__` and `detach` by
`fnx._methods`; `backward`, `retain_grad` and `register_hook` by `fnx.autograd`.
"""
from __future__ import annotations

import sys
import weakref

import numpy as np

from . import _dlpack, dtypes as _dt
from .abstract import ShapedArray
from .device import cpu, device as _device_cls, device_of_array
from .errors import ConcretizationError, FnxIndexError, FnxRuntimeError, FnxTypeError
from .storage import TypedStorage, UntypedStorage, in_shared_memory, shared_copy

__all__ = ["Tensor", "Size", "layout", "strided", "sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc",
           "check_layout", "Tracer", "parse_to", "is_floating_point", "numel", "is_nonzero",
           "is_signed", "is_same_size", "get_device", "detach", "typename", "is_storage"]


class Size(tuple):
    """A tensor's shape: a tuple of ints (PyTorch's torch.Size)."""

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n

    def __repr__(self) -> str:
        return f"fnx.Size({list(self)})"

    def __getitem__(self, i):
        out = tuple.__getitem__(self, i)
        return Size(out) if isinstance(i, slice) else out


_SIZES: dict = {}   # shape tuple -> its Size: every tensor of a shape shares one (a Size is immutable)
_MAX_SIZES = 4096


def size_of(shape: tuple) -> Size:
    """The `Size` of a shape tuple, made once per shape: `Tensor.shape` runs for nearly every op, and a dict
    lookup costs about half of building a tuple subclass."""
    size = _SIZES.get(shape)
    if size is None:
        if len(_SIZES) >= _MAX_SIZES:
            _SIZES.clear()
        size = _SIZES[shape] = Size(shape)
    return size


class Tensor:
    """An n-dimensional array on a device, with a dtype, that autograd can track."""

    __slots__ = ("_value", "_device", "_node", "_requires_grad", "_grad", "_version", "_base", "_hooks",
                 "_retains_grad", "_views", "__weakref__")
    __array_priority__ = 1000  # numpy defers `ndarray + Tensor` to Tensor.__radd__

    # ------------------------------------------------------------------ metadata
    @property
    def shape(self) -> Size:
        """The sizes of the dims, as an `fnx.Size` (a tuple)."""
        shape = self._value.shape
        size = _SIZES.get(shape)   # size_of's lookup, inline: this property runs for nearly every op
        return size if size is not None else size_of(shape)

    @property
    def dtype(self) -> _dt.dtype:
        """The element type (an `fnx.dtype`)."""
        return _dt._BY_NP[self._value.dtype]

    @property
    def device(self) -> _device_cls:
        """Where the data lives: `fnx.device("cpu")` or `fnx.device("cuda", n)`."""
        return self._device

    @property
    def aval(self) -> ShapedArray:
        """The abstract value: shape, dtype and device without data (what tracing sees)."""
        return ShapedArray(self.shape, self.dtype, self.device)

    @property
    def ndim(self) -> int:
        """The number of dims."""
        return self._value.ndim

    def dim(self) -> int:
        """The number of dims (PyTorch's name; same as `ndim`)."""
        return self.ndim

    def size(self, dim: int | None = None):
        """The shape, or the size of dim `dim`."""
        shape = self.shape
        if dim is None:
            return shape
        return shape[canonical_dim(dim, len(shape), "size")]

    def numel(self) -> int:
        """The number of elements."""
        return self.shape.numel()

    nelement = numel

    def element_size(self) -> int:
        """Bytes per element."""
        return self.dtype.itemsize

    ndimension = dim

    @property
    def is_sparse(self) -> bool:
        """Whether the tensor is a sparse COO tensor (fnx.sparse); False for a dense one."""
        return False

    def get_device(self) -> int:
        """The CUDA device index, or -1 on the CPU (PyTorch's convention)."""
        return -1 if self.device.type == "cpu" else self.device.index

    @property
    def is_cuda(self) -> bool:
        """Whether the tensor lives on a CUDA device."""
        return self.device.type == "cuda"

    def is_floating_point(self) -> bool:
        """Whether the dtype is floating point."""
        return self.dtype.is_floating_point

    def is_signed(self) -> bool:
        """Whether the dtype holds negative values (floating, complex and signed integer dtypes)."""
        return self.dtype.is_signed

    def is_nonzero(self) -> bool:
        """Whether the tensor's single element is nonzero; a tensor of no or several elements raises."""
        n = self.numel()
        if n != 1:
            raise FnxRuntimeError(f"Boolean value of Tensor with {'no values' if n == 0 else 'more than one value'} "
                                  f"is ambiguous (shape {list(self.shape)})")
        return bool(self.item() != 0)

    def is_same_size(self, other: Tensor) -> bool:
        """Whether `other` has this tensor's shape."""
        return self.shape == other.shape

    @property
    def is_cpu(self) -> bool:
        """Whether the tensor lives in host memory."""
        return self.device.type == "cpu"

    @property
    def is_meta(self) -> bool:
        """Always False: fnx has no meta device (every tensor holds data)."""
        return False

    @property
    def layout(self) -> layout:
        """How the elements are stored: `strided` (dense), or `sparse_coo` for a sparse tensor (fnx.sparse)."""
        return strided

    def is_neg(self) -> bool:
        """Always False: fnx negates eagerly, it has no lazy negation bit (so `resolve_neg` returns the tensor)."""
        return False

    def dim_order(self, *, ambiguity_check: bool = False) -> tuple:
        """The dims from outermost to innermost in memory: sorted by stride, largest first (ties keep their order),
        as torch's. `ambiguity_check` (torch's check that the order is unique) is not implemented."""
        if ambiguity_check is not False:
            raise NotImplementedError("Tensor.dim_order: ambiguity_check is not implemented in fnx; call it without")
        strides = self.stride()
        return tuple(sorted(range(len(strides)), key=lambda d: -strides[d]))

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        """Bytes of the tensor's elements (numel * itemsize; a view counts its own elements)."""
        return self.numel() * self.dtype.itemsize

    def storage_offset(self) -> int:
        """Where the first element sits in the storage it views, in elements."""
        return (self.data_ptr() - self.untyped_storage().data_ptr()) // self.dtype.itemsize

    def pin_memory(self) -> Tensor:
        """The tensor itself: fnx does not page-lock host memory (a host-to-GPU copy works the same without), so
        `x.pin_memory().to("cuda", non_blocking=True)` runs as written. Only CPU tensors pin, as in PyTorch."""
        if self.device.type != "cpu":
            raise FnxRuntimeError(f"cannot pin a tensor on {self.device}: only dense CPU tensors can be pinned")
        return self

    def is_pinned(self) -> bool:
        """Always False: fnx does not page-lock host memory (see `pin_memory`)."""
        return False

    def is_contiguous(self, memory_format=None) -> bool:
        """Whether the elements are laid out row-major without gaps (the default, `contiguous_format`), or in the
        order `memory_format` names: `channels_last` (NHWC) or `channels_last_3d` (NDHWC), judged from the
        strides as PyTorch does (both hold where the two orders coincide: one channel, or one pixel)."""
        check_memory_format("is_contiguous", memory_format)
        order = {channels_last: (1, 3, 2, 0), channels_last_3d: (1, 4, 3, 2, 0)}.get(memory_format)
        if order is None:
            return bool(self._value.flags.c_contiguous)
        if len(order) != self.ndim:
            return False
        v = self._value
        expected = 1
        for d in order:
            if v.shape[d] != 1:
                if v.strides[d] != expected * v.itemsize:
                    return False
                expected *= v.shape[d]
        return True

    def data_ptr(self) -> int:
        """The address of the first element (host or device memory)."""
        v = self._value
        return v.__array_interface__["data"][0] if isinstance(v, np.ndarray) else v.data.ptr

    def untyped_storage(self) -> UntypedStorage:
        """The memory this tensor views, as bytes (shared by its views: the same `data_ptr()`)."""
        return UntypedStorage(self._value, self._device)

    def storage(self) -> TypedStorage:
        """The memory this tensor views, counted in elements of its dtype."""
        return TypedStorage(self._value, self._device, self.dtype)

    def is_shared(self) -> bool:
        """Whether the data is in shared memory (`share_memory_`)."""
        return self._device is cpu and in_shared_memory(self._value)

    def share_memory_(self) -> Tensor:
        """Move the data into shared memory, in place: processes forked afterwards (multiprocessing's "fork",
        Hogwild training) see each other's writes. Views made before keep the old memory; CUDA tensors stay as
        they are (as in PyTorch). Returns self."""
        if self._device is cpu and not in_shared_memory(self._value):
            self._value = shared_copy(self._value)
        return self

    def resize_(self, *sizes, memory_format=None) -> Tensor:
        """Give this tensor the shape `sizes` in place: its first elements (in order) are kept, as PyTorch keeps
        the storage's; elements beyond the old ones are zero. Not for tensors that require grad."""
        shape = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else tuple(sizes)
        if any(not isinstance(s, (int, np.integer)) or s < 0 for s in shape):
            raise FnxRuntimeError(f"resize_: sizes must be non-negative ints, got {list(shape)}")
        if self._requires_grad:
            raise FnxRuntimeError("cannot resize variables that require grad")
        xp, flat = self._device._xp, self._value.reshape(-1)
        count = int(np.prod(shape, dtype=np.int64))
        if count <= flat.size:
            self._value = flat[:count].reshape(shape)
        else:
            grown = xp.zeros(count, dtype=flat.dtype)
            grown[:flat.size] = flat
            self._value = grown.reshape(shape)
        self._version[0] += 1
        return self

    def resize_as_(self, tensor: Tensor, memory_format=None) -> Tensor:
        """resize_ to `tensor`'s shape."""
        return self.resize_(tuple(tensor.shape))

    def stride(self, dim: int | None = None):
        """Strides in elements (not bytes), or the stride of dim `dim`."""
        st = tuple(s // self._value.itemsize for s in self._value.strides)
        return st if dim is None else st[canonical_dim(dim, len(st), "stride")]

    @property
    def T(self) -> Tensor:
        """The dims reversed (a view; the transpose of a matrix)."""
        return self.permute(*reversed(range(self.ndim)))

    @property
    def mT(self) -> Tensor:
        """The last two dims swapped (a view): the transpose of each matrix in a batch."""
        n = self.ndim
        if n < 2:
            raise FnxRuntimeError(f"tensor.mT is only supported on matrices or batches of matrices, got a "
                                  f"{n}-D tensor")
        return self.transpose(n - 2, n - 1)

    @property
    def mH(self) -> Tensor:
        """The conjugate transpose of each matrix in a batch (mT for real tensors)."""
        return self.mT.conj() if self.dtype.is_complex else self.mT

    @property
    def H(self) -> Tensor:
        """The conjugate transpose of a matrix (T for real ones); other ranks raise, as in PyTorch."""
        if self.ndim not in (0, 2):
            raise FnxRuntimeError(f"tensor.H is only supported on matrices (2-D tensors), got a {self.ndim}-D tensor; "
                                  f"use .mH for batches of matrices")
        return self.T.conj() if self.dtype.is_complex else self.T

    def adjoint(self) -> Tensor:
        """The conjugate transpose of each matrix in a batch (Tensor.mH)."""
        return self.mH

    # ------------------------------------------------------------------ autograd state
    @property
    def requires_grad(self) -> bool:
        """Whether autograd records ops on this tensor; settable on leaves of floating dtype."""
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        self.requires_grad_(flag)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Set `requires_grad` in place and return the tensor."""
        if self._node is not None and not requires_grad:
            raise FnxRuntimeError("requires_grad_: you can only change requires_grad flags of leaf variables; "
                                  "use .detach() to get a tensor that does not require grad")
        if requires_grad and not self.dtype.is_inexact:
            raise FnxRuntimeError(f"requires_grad_: only tensors of floating point and complex dtype can require "
                                  f"gradients, got {self.dtype}")
        self._requires_grad = bool(requires_grad)
        if requires_grad and getattr(self, "_hooks", None) is None:
            self._hooks = None   # set: backward reads a leaf's hooks, and reading an unset slot raises inside
        return self

    @property
    def grad(self):
        """The gradient accumulated by `backward()` (None until then); leaves only unless `retain_grad()`."""
        return self._grad

    @grad.setter
    def grad(self, value) -> None:
        if value is not None:
            if not isinstance(value, Tensor):
                raise FnxTypeError(f"assigned grad expected to be a Tensor or None but got {type(value).__name__}")
            if value.shape != self.shape:
                raise FnxRuntimeError(f"assigned grad has shape {list(value.shape)} but the tensor has shape "
                                      f"{list(self.shape)}")
        self._grad = value

    @property
    def grad_fn(self):
        """The tape node that produced this tensor (None for leaves), e.g. `<MulBackward>`."""
        return self._node

    @property
    def retains_grad(self) -> bool:
        """Whether `retain_grad()` made this non-leaf tensor keep its `.grad` (False for leaves)."""
        return getattr(self, "_retains_grad", None) is not None

    @property
    def is_leaf(self) -> bool:
        """Whether the tensor was not produced by a recorded op (user-created, or does not require grad)."""
        return self._node is None

    @property
    def data(self) -> Tensor:
        """The tensor detached from autograd, sharing memory; `t.data = other` makes `t` hold `other`'s data."""
        return self.detach()

    @data.setter
    def data(self, other: Tensor) -> None:
        self._value = other._value
        self._device = other._device

    def detach(self) -> Tensor:
        """A tensor sharing this one's memory and version counter, cut from the autograd graph. As in PyTorch,
        in-place ops on it are allowed (`p.data.normal_()`, `p.detach().zero_()`) and are not recorded."""
        out = make(self._value, self._device)
        out._version = self._version
        return out

    def detach_(self) -> Tensor:
        """Detach this tensor from the graph in place: it becomes a leaf that does not require grad."""
        self._node = None
        self._requires_grad = False
        return self

    @property
    def output_nr(self) -> int:
        """Which output of its `grad_fn` this tensor is: always 0, since every fnx tape node has one output."""
        return 0

    @property
    def name(self) -> None:
        """None: fnx tensors carry no name (PyTorch's named tensors are not supported)."""
        return None

    def is_inference(self) -> bool:
        """Always False: fnx's `inference_mode` is `no_grad` and makes no inference tensors, so no tensor carries
        their restrictions (PyTorch's are True for tensors made inside `inference_mode`)."""
        return False

    def as_subclass(self, cls: type) -> Tensor:
        """This tensor as an instance of the Tensor subclass `cls`: the same memory, version counter and autograd
        history (`cls.__init__` is not called, as in PyTorch)."""
        if not (isinstance(cls, type) and issubclass(cls, Tensor)):
            raise FnxTypeError("Creating a Tensor subclass from a class that does not inherit from Tensor is not "
                               "possible. Make sure your class inherits from Tensor.")
        if isinstance(self, Tracer):
            raise NotImplementedError("Tensor.as_subclass under fnx transforms (grad, vmap, compile): call it on "
                                      "concrete tensors")
        out = object.__new__(cls)
        init_from_array(out, self._value, self._device)
        out._node, out._requires_grad, out._version, out._base = (self._node, self._requires_grad, self._version,
                                                                  self._base)
        out._hooks = None
        return out

    def set_(self, source=None, storage_offset: int = 0, size=None, stride=None) -> Tensor:
        """Make this tensor view other memory, in place: `set_(tensor)` shares `tensor`'s elements, shape and
        strides; `set_(storage, storage_offset, size, stride)` views a CPU storage (`untyped_storage()`) from
        `storage_offset` elements on; `set_()` leaves it empty (shape (0,)). Not for leaves that require grad."""
        if isinstance(self, Tracer):
            raise NotImplementedError("Tensor.set_ under fnx transforms (grad, vmap, compile): it swaps the memory "
                                      "a concrete tensor views; call it outside the transform")
        if self._requires_grad and self._node is None:
            raise FnxRuntimeError("set_: a leaf Variable that requires grad is being used in an in-place operation.")
        if isinstance(source, Tensor):
            if source.dtype is not self.dtype:
                raise FnxRuntimeError(f"set_: could not set a tensor of dtype {self.dtype} to a tensor of dtype "
                                      f"{source.dtype}")
            value, dev = source._value, source._device
        elif source is None:
            value, dev = self._device.xp.empty((0,), dtype=self._value.dtype), self._device
        elif isinstance(source, UntypedStorage):
            value, dev = self._view_storage(source, storage_offset, size, stride), source.device
        else:
            raise FnxTypeError(f"set_: expected a Tensor, a storage or nothing, got {type(source).__name__}")
        self._value, self._device = value, dev
        self._version[0] += 1
        return self

    def _view_storage(self, storage: UntypedStorage, offset: int, size, stride):
        """The array of this tensor's dtype viewing `storage` at `offset` with `size` and `stride` (elements)."""
        if storage.device.type != "cpu":
            raise NotImplementedError(f"set_: viewing a storage on {storage.device} is not supported; pass a tensor "
                                      f"(set_(tensor)) or a CPU storage")
        flat = storage._root.reshape(-1).view(np.uint8)
        flat = flat[:flat.size - flat.size % self._value.itemsize].view(self._value.dtype)
        size = (flat.size - offset,) if size is None else tuple(int(s) for s in size)
        if stride is None:
            stride = [1] * len(size)
            for d in reversed(range(len(size) - 1)):
                stride[d] = stride[d + 1] * max(size[d + 1], 1)
        stride = tuple(int(s) for s in stride)
        if len(stride) != len(size):
            raise FnxRuntimeError(f"set_: mismatch in length of strides and shape: {len(stride)} strides for size "
                                  f"{list(size)}")
        needed = offset + 1 + sum((n - 1) * s for n, s in zip(size, stride)) if all(size) else 0
        if offset < 0 or needed > flat.size:
            raise FnxRuntimeError(f"set_: sizes {list(size)}, strides {list(stride)} and storage offset {offset} "
                                  f"need {needed} elements, out of bounds for a storage of {flat.size}")
        return np.lib.stride_tricks.as_strided(flat[offset:], size, tuple(s * flat.itemsize for s in stride))

    def is_set_to(self, tensor: Tensor) -> bool:
        """Whether the two tensors view the same elements: the same memory, shape and strides (a `set_` pair)."""
        return (self.untyped_storage().data_ptr() == tensor.untyped_storage().data_ptr()
                and self.data_ptr() == tensor.data_ptr() and self.shape == tensor.shape
                and self.stride() == tensor.stride())

    # ------------------------------------------------------------------ conversion
    def numpy(self, *, force: bool = False) -> np.ndarray:
        """The data as a numpy array sharing memory with this CPU tensor; `force=True` also converts a tensor that
        requires grad or lives on a GPU (copied to the host)."""
        if self._requires_grad and not force:
            raise FnxRuntimeError("numpy(): can't call numpy() on a tensor that requires grad; use "
                                  "tensor.detach().numpy() instead")
        if self._device is not cpu:
            if not force:
                raise FnxTypeError(f"numpy(): can't convert a tensor on {self._device} to numpy; use "
                                   f"tensor.cpu() to copy it to host memory first")
            return self._value.get()
        return np.asarray(self._value)   # the same array; a donated tensor's stand-in raises its error here

    def item(self):
        """The value of a one-element tensor as a Python number."""
        if self.numel() != 1:
            raise FnxRuntimeError(f"item(): a tensor with {self.numel()} elements (shape {list(self.shape)}) "
                                  f"cannot be converted to a Python scalar; only one-element tensors can")
        v = self._value
        return (v.get() if self._device is not cpu else v).reshape(()).item()

    def tolist(self):
        """The data as nested Python lists of numbers."""
        v = self._value
        return (v.get() if self._device is not cpu else v).tolist()

    def __array__(self, dtype=None, copy=None):
        v = self.numpy()
        if dtype is not None and v.dtype != dtype:
            return v.astype(dtype)
        return v.copy() if copy else v

    def __array_wrap__(self, array, context=None, return_scalar=False):
        """numpy ufuncs applied to a tensor (`np.exp(t)`) return a tensor, as in PyTorch."""
        if array.dtype not in _dt._BY_NP:
            return array
        return make(array, cpu)

    def __dlpack__(self, stream=None, **kwargs):
        if self._requires_grad:
            raise FnxRuntimeError("__dlpack__: can't export a tensor that requires grad; use tensor.detach() first")
        if stream is not None:
            return self._value.__dlpack__(stream=stream, **kwargs)
        if self._device is cpu:
            return _dlpack.export_cpu(self._value, **kwargs)  # bfloat16 too, which numpy cannot export
        return self._value.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._value.__dlpack_device__()

    def cpu(self) -> Tensor:
        """A copy on the CPU (self when already there)."""
        return self.to("cpu")

    def cuda(self, device=None) -> Tensor:
        """A copy on a CUDA device (default: the first)."""
        return self.to(_device_cls("cuda", device) if isinstance(device, int) or device is None else device)

    def type(self, dtype=None):
        """The dtype's name as a string, or with a dtype, the tensor converted to it."""
        if dtype is None:
            return f"fnx.{self.dtype.name}"
        return self.to(dtype)

    def float(self) -> Tensor:
        """Converted to float32."""
        return self.to(_dt.float32)

    def double(self) -> Tensor:
        """Converted to float64."""
        return self.to(_dt.float64)

    def half(self) -> Tensor:
        """Converted to float16."""
        return self.to(_dt.float16)

    def bfloat16(self) -> Tensor:
        """Converted to bfloat16."""
        return self.to(_dt.bfloat16)

    def int(self) -> Tensor:
        """Converted to int32."""
        return self.to(_dt.int32)

    def long(self) -> Tensor:
        """Converted to int64."""
        return self.to(_dt.int64)

    def short(self) -> Tensor:
        """Converted to int16."""
        return self.to(_dt.int16)

    def bool(self) -> Tensor:
        """Converted to bool (nonzero is True)."""
        return self.to(_dt.bool)

    def byte(self) -> Tensor:
        """Converted to uint8."""
        return self.to(_dt.uint8)

    def cfloat(self) -> Tensor:
        """Converted to complex64."""
        return self.to(_dt.complex64)

    def cdouble(self) -> Tensor:
        """Converted to complex128."""
        return self.to(_dt.complex128)

    def char(self) -> Tensor:
        """Converted to int8."""
        return self.to(_dt.int8)

    # ------------------------------------------------------------------ Python callables per element (CPU)
    def _host_array(self, op: str) -> np.ndarray:
        """The CPU array that `apply_`, `map_` and `map2_` write in place, after PyTorch's checks."""
        if isinstance(self, Tracer):
            raise FnxRuntimeError(f"{op}() calls Python on each element and needs a concrete tensor, not a tracer "
                                  f"inside a transform")
        if self._requires_grad:
            raise FnxRuntimeError(f"Can't call {op}() on Variable that requires grad. Use var.detach().{op}() "
                                  f"instead.")
        if self._device is not cpu:
            raise FnxTypeError(f"{op}() is only implemented on CPU tensors, got one on {self.device}")
        return self._value

    def _write_elements(self, values: list) -> Tensor:
        arr = self._value
        arr[...] = np.asarray(values).astype(arr.dtype).reshape(arr.shape)
        self._version[0] += 1
        return self

    def apply_(self, callable) -> Tensor:
        """Replace each element `v` by `callable(v)` (a Python function of Python numbers); CPU only, slow."""
        arr = self._host_array("apply_")
        return self._write_elements([callable(v) for v in arr.reshape(-1).tolist()])

    def map_(self, tensor: Tensor, callable) -> Tensor:
        """Replace each element `a` by `callable(a, b)`, `b` the element of `tensor` (broadcast to this shape)."""
        arr = self._host_array("map_")
        other = np.broadcast_to(tensor._value, arr.shape).reshape(-1).tolist()
        return self._write_elements([callable(a, b) for a, b in zip(arr.reshape(-1).tolist(), other)])

    def map2_(self, x: Tensor, y: Tensor, callable) -> Tensor:
        """Replace each element `a` by `callable(a, b, c)`, `b` and `c` those of `x` and `y` (broadcast)."""
        arr = self._host_array("map2_")
        bs, cs = (np.broadcast_to(t._value, arr.shape).reshape(-1).tolist() for t in (x, y))
        return self._write_elements([callable(a, b, c) for a, b, c in zip(arr.reshape(-1).tolist(), bs, cs)])

    # ------------------------------------------------------------------ Python protocols
    def __len__(self) -> int:
        if self.ndim == 0:
            raise FnxTypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise FnxTypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise FnxRuntimeError(f"Boolean value of a tensor with {self.numel()} elements (shape "
                                  f"{list(self.shape)}) is ambiguous; use .any() or .all()")
        return bool(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __float__(self) -> float:
        return float(self.item())

    def __index__(self) -> int:
        if self.dtype.is_floating_point or self.numel() != 1:
            raise FnxTypeError(f"only integer tensors of a single element can be converted to an index, got "
                               f"{self.dtype} of shape {list(self.shape)}")
        return int(self.item())

    def __complex__(self):
        return complex(self.item())

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        """PyTorch's layout: `tensor([1.5000, 2.0000], dtype=fnx.float64, requires_grad=True)`."""
        v = self._value
        arr = np.asarray(v.get() if self._device is not cpu else v)
        prefix = "tensor("
        if arr.size == 0:
            body = "[]"
        else:
            body = np.array2string(arr, separator=", ", prefix=prefix, threshold=_PRINT["threshold"],
                                   edgeitems=_PRINT["edgeitems"], max_line_width=_PRINT["linewidth"],
                                   formatter={"all": _element_formatter(arr)})
        extras = []
        if arr.size == 0 and arr.ndim != 1:
            extras.append(f"size={tuple(arr.shape)}")
        if self._device is not cpu:
            extras.append(f"device='{self._device}'")
        dt = self.dtype
        default = _dt.get_default_dtype()
        if not (dt is default or dt is default.to_complex() or (arr.size and dt in (_dt.int64, _dt.bool))):
            extras.append(f"dtype={dt!r}")
        if self._node is not None:
            extras.append(f"grad_fn=<{self._node.name}>")
        elif self._requires_grad:
            extras.append("requires_grad=True")
        return prefix + body + "".join(", " + e for e in extras) + ")"

    def __format__(self, spec: str) -> str:
        """PyTorch's rule: a 0-dim tensor formats as its value (`f"{loss:.3f}"`, `f"{t}"` -> `1.5`); any other
        tensor (and a subclass: a Parameter, a tracer) formats as str() with an empty spec, else TypeError."""
        if type(self) is Tensor and self.ndim == 0:
            return format(self.item(), spec)
        return object.__format__(self, spec)

    def __reduce_ex__(self, protocol):
        raise FnxTypeError("fnx tensors are not picklable (pickle can execute code on load); use fnx.save/fnx.load")

    def __deepcopy__(self, memo):
        out = make(self._value.copy(), self._device)
        out._requires_grad = self._requires_grad
        if self._grad is not None:
            out._grad = self._grad.__deepcopy__(memo)
        memo[id(self)] = out
        return out


def _edges(arr: np.ndarray, n: int = 3) -> np.ndarray:
    """The elements a summarised print shows: the first and last `n` along every dim."""
    for axis, size in enumerate(arr.shape):
        if size > 2 * n:
            arr = np.concatenate([arr.take(range(n), axis), arr.take(range(size - n, size), axis)], axis)
    return arr


_PROFILES = {"default": dict(precision=4, threshold=1000, edgeitems=3, linewidth=80),
             "short": dict(precision=2, threshold=1000, edgeitems=2, linewidth=80),
             "full": dict(precision=4, threshold=sys.maxsize, edgeitems=3, linewidth=80)}
_PRINT = dict(_PROFILES["default"], sci_mode=None)


def set_printoptions(precision: int | None = None, threshold: float | None = None, edgeitems: int | None = None,
                     linewidth: int | None = None, profile: str | None = None, sci_mode: bool | None = None) -> None:
    """How tensors print, as PyTorch's `set_printoptions`: digits after the point, the element count above which
    only `edgeitems` per edge show, the line width, a `profile` ("default", "short", "full") setting all of
    these first, and `sci_mode` (True/False forces or forbids scientific notation; None decides per tensor)."""
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions: profile must be one of {list(_PROFILES)}, got {profile!r}")
        _PRINT.update(_PROFILES[profile])
    given = dict(precision=precision, threshold=threshold, edgeitems=edgeitems, linewidth=linewidth)
    _PRINT.update({k: v for k, v in given.items() if v is not None})
    if _PRINT["threshold"] == float("inf"):
        _PRINT["threshold"] = sys.maxsize
    _PRINT["sci_mode"] = sci_mode


def _element_formatter(arr: np.ndarray):
    """PyTorch's element format: ints as they are; floats as `1.`, `1.5000` or `1.5000e+09` (with
    `set_printoptions`' precision and sci_mode), right-aligned; complex numbers as `1.+2.j`, each part in the
    format of its kind."""
    if arr.dtype.kind == "c":
        real, imag = _element_formatter(arr.real), _element_formatter(arr.imag)

        def element(v) -> str:
            im = imag(v.imag).lstrip()
            return real(v.real) + ("" if im[0] == "-" else "+") + im + "j"

        return element
    if arr.dtype.kind in "biu":
        width = max(len(str(v)) for v in _edges(arr).reshape(-1).tolist())
        return lambda v: str(v).rjust(width)
    vals = _edges(arr).astype(np.float64).reshape(-1)
    shown = vals[np.isfinite(vals) & (vals != 0)]
    fmt, width, int_mode = "{:.0f}.", 1, True
    digits, sci = _PRINT["precision"], _PRINT["sci_mode"]
    if shown.size:
        mags = np.abs(shown)
        lo, hi = mags.min(), mags.max()
        int_mode = bool(np.all(shown == np.ceil(shown)))
        wide = hi / lo > 1000.0 or hi > 1.0e8
        if sci or (sci is None and (wide or (not int_mode and lo < 1.0e-4))):
            fmt, int_mode = f"{{:.{digits}e}}", False
        elif not int_mode:
            fmt = f"{{:.{digits}f}}"
        width = max(len(fmt.format(v)) for v in shown.tolist())

    def element(v) -> str:
        v = float(v)
        text = fmt.format(v) if np.isfinite(v) or not int_mode else f"{v:.0f}"
        return text.rjust(width)

    return element


def make(value, dev) -> Tensor:
    """Wrap an array (already on `dev`) as a fresh leaf tensor."""
    t = object.__new__(Tensor)
    init_from_array(t, value, dev)
    return t


def init_from_array(t: Tensor, value, dev) -> None:
    t._value = value
    t._device = dev
    t._node = None
    t._requires_grad = False
    t._grad = None
    t._version = [0]
    t._base = None
    t._views = None   # set: a view records itself in its base's list, and reading an unset slot raises inside


def from_array(value) -> Tensor:
    """Wrap a numpy or CuPy array, inferring the device."""
    if type(value) is not np.ndarray and not hasattr(value, "device"):
        value = np.asarray(value)
    _dt.from_numpy_dtype(value.dtype)
    return make(value, device_of_array(value))


def canonical_dim(dim: int, ndim: int, op: str) -> int:
    """Wrap a possibly negative `dim`; out-of-range dims raise IndexError naming the op."""
    if type(dim) is int and 0 <= dim < ndim:   # the common case, without the checks below
        return dim
    lo = -max(ndim, 1)
    if not lo <= dim < max(ndim, 1):
        raise FnxIndexError(f"{op}: dimension out of range (expected to be in range of [{lo}, "
                                 f"{max(ndim, 1) - 1}], but got {dim})")
    return dim % max(ndim, 1)


class Tracer(Tensor):
    """A stand-in for a tensor inside a transform: it has an aval, not data.

    Every Tensor method works on tracers because methods call fnx ops, which
    bind to the tracer's trace. Operations that need concrete values raise.
    In-place ops functionalize (fnx/ops/inplace.py): the tracer object takes
    over the payload of the out-of-place result (`_assume`), and a tracer made
    by a view primitive remembers its root and view chain (`note_view`) so that
    writing into it rewrites the root and the root's other views.
    """

    __slots__ = ("_trace", "_view_of")
    # tracers never carry eager autograd state: class-level defaults shadow the Tensor slots
    _node = None
    _requires_grad = False
    _grad = None
    _base = None

    @property
    def aval(self) -> ShapedArray:
        raise NotImplementedError

    @property
    def shape(self) -> Size:
        return Size(self.aval.shape)

    @property
    def ndim(self) -> int:
        return len(self.aval.shape)

    @property
    def dtype(self) -> _dt.dtype:
        return self.aval.dtype

    @property
    def device(self):
        return self.aval.device

    @property
    def _device(self):  # read by the eager fast path's device check only through real tensors
        return self.aval.device

    def full_lower(self):
        return self

    def _assume(self, other: Tracer) -> None:
        """Stand for `other`'s value from now on (`other`: a tracer of the same trace, of this class)."""
        raise NotImplementedError(f"{type(self).__name__} does not support in-place operations")

    def _check_mutable(self, op: str) -> None:
        """Raise if an in-place op must not rebind this tracer (the staging trace's inputs and constants)."""

    def _concrete(self, what: str) -> Tensor:
        """The concrete value behind this tracer, for Python control flow; raises when there is none."""
        raise ConcretizationError(
            f"{what} needs a concrete value, but this tensor is a tracer ({self.aval.str_short()}) inside "
            f"{type(self._trace).__name__.replace('Trace', '').lower() or 'a'} transform. Python control flow on "
            f"traced values cannot be staged: use fnx.where(cond, a, b) or fnx.cond(pred, true_fn, false_fn, "
            f"*operands), or mark the argument static (static_argnums)."
        )

    def _no_array(self, what: str):
        raise ConcretizationError(
            f"{what}: this tensor is a tracer ({self.aval.str_short()}) inside a transform and cannot become a "
            f"numpy array; return it from the transformed function instead, or use fnx ops on it")

    def numpy(self, *, force: bool = False):
        self._no_array("numpy()")

    def tolist(self):
        self._no_array("tolist()")

    def __array__(self, dtype=None, copy=None):
        self._no_array("conversion to a numpy array")

    def item(self):
        return self._concrete("item()").item()

    def __bool__(self):
        return bool(self._concrete("bool()"))

    def __int__(self):
        return int(self._concrete("int()"))

    def __float__(self):
        return float(self._concrete("float()"))

    def __index__(self):
        return self._concrete("use as an index").__index__()

    def __repr__(self) -> str:
        return f"Traced<{self.aval.str_short()}>with<{type(self._trace).__name__}>"


def note_view(out: Tracer, base: Tracer, prim, params: dict) -> None:
    """Record that `out` is `prim[params](base)` of a view primitive: its root tensor and the view chain from it."""
    root, chain = getattr(base, "_view_of", None) or (base, ())
    out._view_of = (root, chain + ((prim, params),))
    views = getattr(root, "_views", None)
    if views is None:
        views = root._views = []
    views.append(weakref.ref(out))


class _Named:
    """A named constant of the API (a memory format, a layout), shown as `fnx.<name>`."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"fnx.{self.name}"


class layout(_Named):
    """How a tensor's elements are stored (torch.layout): `strided`, dense elements at strides, or `sparse_coo`,
    the indices and values of the nonzero entries (fnx.sparse)."""

    __slots__ = ()


strided = layout("strided")
sparse_coo = layout("sparse_coo")
# PyTorch's compressed layouts: names to compare against; fnx makes no tensors of them (fnx.sparse raises)
sparse_csr, sparse_csc, sparse_bsr, sparse_bsc = (layout(n) for n in ("sparse_csr", "sparse_csc", "sparse_bsr",
                                                                      "sparse_bsc"))


def check_layout(op: str, value) -> None:
    """A factory's `layout=`: None or `strided` (fnx's factories make dense tensors); another raises, naming it."""
    if value is not None and value is not strided:
        raise NotImplementedError(f"{op}: layout={value!r} is not supported; fnx's factories make dense tensors "
                                  f"(layout=torch.strided): build sparse COO ones with torch.sparse_coo_tensor or "
                                  f"Tensor.to_sparse()")


class memory_format(_Named):
    """PyTorch's memory-format names: `to(memory_format=)`, `contiguous(memory_format=)` and `clone` lay a tensor
    out as named (`channels_last`: a 4-D tensor's channels innermost, NHWC in memory, its shape still NCHW;
    `channels_last_3d`: NDHWC), and eager CPU convolutions, batch_norm, max pooling, `cat` and elementwise ops keep
    that layout, as PyTorch's do; the values never depend on it."""

    __slots__ = ()


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")


# torch's queries for devices fnx does not have: always False
for _device, _what in (("xpu", "Intel XPU"), ("mps", "Apple Metal"), ("ipu", "Graphcore IPU"), ("mtia", "Meta MTIA"),
                       ("maia", "Microsoft MAIA"), ("xla", "XLA"), ("vulkan", "Vulkan")):
    setattr(Tensor, f"is_{_device}", property(lambda self: False, doc=f"Always False: fnx has no {_what} device."))
del _device, _what


def check_memory_format(op: str, fmt) -> None:
    """Refuse what is not one of the memory-format names or None (a common slip: passing a string)."""
    if fmt is not None and not isinstance(fmt, memory_format):
        raise FnxTypeError(f"{op}: memory_format must be fnx.contiguous_format, fnx.channels_last, "
                           f"fnx.channels_last_3d or fnx.preserve_format, got {fmt!r}")


def is_tensor(obj) -> bool:
    """Whether `obj` is an fnx Tensor (PyTorch's `is_tensor`)."""
    return isinstance(obj, Tensor)


# ---------------------------------------------------------------- PyTorch's function forms of Tensor queries
def is_floating_point(input: Tensor) -> bool:
    """Whether `input`'s dtype is floating point (`Tensor.is_floating_point`)."""
    return input.is_floating_point()


def numel(input: Tensor) -> int:
    """The number of elements of `input` (`Tensor.numel`)."""
    return input.numel()


def is_nonzero(input: Tensor) -> bool:
    """Whether the single element of `input` is nonzero (`Tensor.is_nonzero`)."""
    return input.is_nonzero()


def is_signed(input: Tensor) -> bool:
    """Whether `input`'s dtype holds negative values (`Tensor.is_signed`)."""
    return input.is_signed()


def is_same_size(input: Tensor, other: Tensor) -> bool:
    """Whether the two tensors have the same shape (`Tensor.is_same_size`)."""
    return input.is_same_size(other)


def get_device(input: Tensor) -> int:
    """The CUDA device index of `input`, -1 on the CPU (`Tensor.get_device`)."""
    return input.get_device()


def detach(input: Tensor) -> Tensor:
    """`input` cut from the autograd graph, sharing its memory (`Tensor.detach`)."""
    return input.detach()


def typename(obj) -> str:
    """A tensor's type string (`Tensor.type()`), or the dotted name of any other object's class or itself."""
    if isinstance(obj, Tensor):
        return obj.type()
    module = getattr(obj, "__module__", "") or ""
    if hasattr(obj, "__qualname__"):
        qualname = obj.__qualname__
    elif hasattr(obj, "__name__"):
        qualname = obj.__name__
    else:
        module, qualname = type(obj).__module__ or "", type(obj).__qualname__
    return qualname if module in ("", "builtins") else f"{module}.{qualname}"


def is_storage(obj) -> bool:
    """Whether `obj` is a storage (`Tensor.untyped_storage()` or `Tensor.storage()`)."""
    return isinstance(obj, UntypedStorage)


def parse_to(op: str, args: tuple, kwargs: dict, *, allow_copy: bool = True):
    """The (device, dtype, copy) of a `to(...)` call as PyTorch reads it, None where not given: `to(device)`
    (a name, a `device` or a CUDA index), `to(dtype)` (a dtype or its name), `to(device, dtype)`, `to(tensor)`,
    and the keywords device=, dtype=, non_blocking=, memory_format= (returned fourth, None where not given) and
    copy= where `allow_copy`. Shared by Tensor.to and nn.Module.to."""
    kwargs = dict(kwargs)
    dev, dt = kwargs.pop("device", None), kwargs.pop("dtype", None)
    copy = kwargs.pop("copy", False) if allow_copy else False
    kwargs.pop("non_blocking", None)
    fmt = kwargs.pop("memory_format", None)
    check_memory_format(op, fmt)
    if kwargs:
        raise FnxTypeError(f"{op}: unexpected keyword arguments {sorted(kwargs)}")
    for a in args:
        if isinstance(a, Tensor):
            dev, dt = a.device, a.dtype
        elif isinstance(a, _device_cls) or (isinstance(a, str) and a not in _dt._BY_NAME):
            dev = a
        elif isinstance(a, int) and not isinstance(a, bool):
            dev = _device_cls("cuda", a)
        elif a is not None:
            try:
                dt = _dt.as_dtype(a)
            except TypeError as e:
                raise FnxTypeError(f"{op}: expected a device, a dtype or a tensor, got {a!r} ({e})") from None
    return (None if dev is None else _device_cls(dev)), (None if dt is None else _dt.as_dtype(dt)), copy, fmt
