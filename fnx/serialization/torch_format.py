"""PyTorch checkpoints (`torch.save`'s zip format, also `.bin`/`.pt`/`.pth` files) read without torch.

Such a file is a zip archive whose entries share one folder, `<name>/`: `data.pkl` (the saved object, pickled
with protocol 2), `data/<key>` (each storage's raw bytes), `byteorder` ("little" or "big") and `version`. The
pickle is read by a restricted unpickler, as `torch.load(weights_only=True)` reads it: a global resolves only
through a table of the few names that state dicts use (tensor and parameter rebuild functions, storage types,
dtypes, `torch.Size`, `torch.device`, `collections.OrderedDict`, a handful of builtins) and of the classes the
caller allowed (`fnx.serialization.add_safe_globals`), each mapped to fnx's own counterpart, so torch is never
imported and nothing named in the file is ever looked up in a Python module. REDUCE calls only what that table
holds; BUILD and NEWOBJ act only on OrderedDicts and allowed classes; INST, OBJ and the extension registry are
refused. A persistent id names a storage by key: only the archive's own `data/<key>` entries are read, and
each must hold exactly the bytes its id declares. A tensor is rebuilt as a strided view of its storage (so
views and tensors that share a storage stay shared), after checking that every element it can reach lies inside
the storage.
"""
from __future__ import annotations

import _compat_pickle
import codecs
import io
import math
import pickle
import re
import struct
import zipfile
from collections import Counter, OrderedDict
from typing import Any, BinaryIO

import numpy as np

from .. import dtypes as _dt
from ..nn.parameter import Parameter
from ..tensor import Size, Tensor, from_array
from .common import UnpicklingError, parse_device, place, safe_global_table, short

__all__ = ["is_torch_archive", "load_archive", "refuse_plain_pickle"]

_LEGACY_MAGIC = pickle.dumps(0x1950A86A20F9469CFC6C, protocol=2)  # what torch.save wrote first before 1.6
_KEY = re.compile(r"[A-Za-z0-9_.-]+")
_STORAGE_DTYPES = {"FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16",
                   "BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32",
                   "ShortStorage": "int16", "CharStorage": "int8", "ByteStorage": "uint8", "BoolStorage": "bool",
                   "ComplexFloatStorage": "complex64", "ComplexDoubleStorage": "complex128"}
_TORCH_DTYPES = ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool",
                 "uint16", "uint32", "uint64", "complex32", "complex64", "complex128", "float8_e5m2",
                 "float8_e4m3fn", "float8_e5m2fnuz", "float8_e4m3fnuz", "float8_e8m0fnu")


def is_torch_archive(names: set[str]) -> bool:
    """Whether a zip archive's entry names are those of a `torch.save` file."""
    return any(n.count("/") == 1 and n.endswith("/data.pkl") for n in names)


def refuse_plain_pickle(fh: BinaryIO) -> None:
    """A file that is a bare pickle: PyTorch's format before 1.6 (not read), or any other pickle (refused)."""
    head = fh.read(len(_LEGACY_MAGIC))
    if head == _LEGACY_MAGIC:
        raise NotImplementedError("fnx.load: this is a PyTorch checkpoint in the legacy format of torch < 1.6, "
                                  "which fnx does not read; re-save it with a current PyTorch (torch.save writes "
                                  "the zip format that fnx.load reads)")
    raise UnpicklingError("fnx.load: this is a plain pickle file, not a checkpoint that fnx reads (fnx, PyTorch "
                          "zip or safetensors). fnx never runs a pickle, because unpickling can run arbitrary code")


def load_archive(zf: zipfile.ZipFile, names: set[str], map_location) -> Any:
    """The object a `torch.save` zip archive holds, with fnx tensors in place of torch's."""
    pickles = [n for n in names if n.count("/") == 1 and n.endswith("/data.pkl")]
    if len(pickles) != 1:
        raise UnpicklingError(f"fnx.load: a PyTorch checkpoint holds one data.pkl; this archive holds "
                              f"{len(pickles)}: {short(sorted(pickles))}")
    prefix = pickles[0][:-len("data.pkl")]
    stray = sorted(n for n in names if not n.startswith(prefix))
    if stray:
        raise UnpicklingError(f"fnx.load: a PyTorch checkpoint keeps every entry in its folder {prefix!r}; this "
                              f"archive also holds {short(stray)}")
    byteorder = "little"
    if prefix + "byteorder" in names:
        info = zf.getinfo(prefix + "byteorder")
        byteorder = zf.read(info).decode("ascii", "replace").strip() if info.file_size <= 16 else "?"
        if byteorder not in ("little", "big"):
            raise UnpicklingError(f"fnx.load: the checkpoint's byteorder entry says {short(byteorder)}, neither "
                                  f"'little' nor 'big'")
    archive = _Archive(zf, prefix, names, byteorder, map_location)
    try:
        return _Unpickler(zf.read(prefix + "data.pkl"), archive).load()
    except UnpicklingError:
        raise
    except (pickle.UnpicklingError, TypeError, ValueError, KeyError, IndexError, AttributeError, EOFError,
            struct.error, OverflowError, RecursionError, UnicodeDecodeError, MemoryError) as e:
        raise UnpicklingError(f"fnx.load: the PyTorch checkpoint's data.pkl is damaged or is not a checkpoint "
                              f"({type(e).__name__}: {short(str(e), 200)})") from e


# ---------------------------------------------------------------- storages
class _StorageType:
    """`torch.FloatStorage`, `torch.UntypedStorage`, ...: how a persistent id names its storage's element type."""

    __slots__ = ("name", "dtype_name")

    def __init__(self, name: str, dtype_name: str):
        self.name, self.dtype_name = name, dtype_name

    def __repr__(self) -> str:
        return f"torch.{self.name}"


class _Storage:
    """One `data/<key>` entry of the archive: its raw bytes, the element type it was saved with, its location."""

    __slots__ = ("archive", "key", "raw", "dtype_name", "location")

    def __init__(self, archive: _Archive, key: str, raw: np.ndarray, dtype_name: str, location: str):
        self.archive, self.key, self.raw, self.dtype_name, self.location = archive, key, raw, dtype_name, location

    def typed(self, dtype: _dt.dtype):
        """The storage as a flat tensor of `dtype` on the device `map_location` gives, made once per dtype so
        that every tensor viewing it shares its memory."""
        return self.archive.typed(self, dtype)

    def __repr__(self) -> str:
        return f"<storage {self.key!r} of {self.raw.size} bytes>"


class _Archive:
    """The storages of one checkpoint, each read once and placed once per element type."""

    def __init__(self, zf: zipfile.ZipFile, prefix: str, names: set[str], byteorder: str, map_location):
        self.zf, self.prefix, self.names, self.byteorder, self.map_location = zf, prefix, names, byteorder, map_location
        self.raw: dict[str, np.ndarray] = {}
        self.placed: dict[tuple, Any] = {}

    def storage(self, pid) -> _Storage:
        """The storage a persistent id `('storage', storage_type, key, location, numel)` names."""
        if not (type(pid) is tuple and len(pid) == 5 and pid[0] in ("storage", b"storage")):
            raise UnpicklingError(f"fnx.load: unknown persistent id {short(pid)}; a PyTorch checkpoint's ids are "
                                  f"('storage', type, key, location, numel)")
        _, storage_type, key, location, numel = (x.decode("ascii") if type(x) is bytes else x for x in pid)
        if not isinstance(storage_type, _StorageType):
            raise UnpicklingError(f"fnx.load: persistent id {short(pid)} names {short(storage_type)}, not a "
                                  f"storage type")
        if not (type(key) is str and _KEY.fullmatch(key)) or type(location) is not str:
            raise UnpicklingError(f"fnx.load: persistent id {short(pid)} has a malformed key or location")
        if type(numel) is not int or numel < 0:
            raise UnpicklingError(f"fnx.load: persistent id {short(pid)} has a malformed size {short(numel)}")
        name = f"{self.prefix}data/{key}"
        if name not in self.names:
            raise UnpicklingError(f"fnx.load: the checkpoint refers to storage {key!r}, which is not in the "
                                  f"archive (no entry {name!r})")
        dtype = _fnx_dtype(storage_type.dtype_name)
        info = self.zf.getinfo(name)
        if info.file_size != numel * dtype.itemsize:
            raise UnpicklingError(f"fnx.load: storage {key!r} declares {numel} elements of {dtype.name} "
                                  f"({numel * dtype.itemsize} bytes), but its entry holds {info.file_size} bytes")
        raw = self.raw.get(key)
        if raw is None:
            raw = self.raw[key] = np.frombuffer(bytearray(self.zf.read(info)), np.uint8)
        return _Storage(self, key, raw, storage_type.dtype_name, str(parse_device(location)))

    def typed(self, storage: _Storage, dtype: _dt.dtype):
        found = self.placed.get((storage.key, dtype.name))
        if found is not None:
            return found
        raw, size = storage.raw, dtype.itemsize
        if raw.size % size:
            raise UnpicklingError(f"fnx.load: storage {storage.key!r} holds {raw.size} bytes, not a whole number of "
                                  f"{dtype.name} elements")
        if self.byteorder == "big" and size > 1:
            word = size // 2 if dtype.is_complex else size   # a complex number: two big-endian parts
            raw = raw.reshape(-1, word)[:, ::-1].reshape(-1)
        found = self.placed[(storage.key, dtype.name)] = place(from_array(raw.view(dtype.np)), storage.location,
                                                                self.map_location)
        return found


def _fnx_dtype(name: str) -> _dt.dtype:
    found = _dt._BY_NAME.get(name)
    if found is None or found.name != name:
        raise UnpicklingError(f"fnx.load: the checkpoint holds a tensor of dtype torch.{name}, which fnx does not "
                              f"have (fnx dtypes: {', '.join(d.name for d in _dt.ALL)})")
    return found


# ---------------------------------------------------------------- rebuild functions
def _ints(v, what: str) -> tuple:
    if not (isinstance(v, (tuple, list)) and all(type(s) is int and s >= 0 for s in v)):
        raise UnpicklingError(f"fnx.load: a tensor's {what} is malformed: {short(v)}")
    return tuple(v)


def _view(storage, dtype: _dt.dtype, offset, size, stride) -> Tensor:
    """The tensor `size`/`stride` elements of `dtype` from element `offset` of `storage`, checked to stay inside."""
    if not isinstance(storage, _Storage):
        raise UnpicklingError(f"fnx.load: a tensor is rebuilt from {short(storage)}, not from a storage")
    size, stride = _ints(size, "size"), _ints(stride, "stride")
    if type(offset) is not int or offset < 0 or len(size) != len(stride):
        raise UnpicklingError(f"fnx.load: a tensor has a malformed offset {short(offset)} or stride {stride} for "
                              f"its size {size}")
    flat = storage.typed(dtype)
    n = flat.shape[0]
    if math.prod(size) == 0:
        end = offset
    else:
        end = offset + 1 + sum((d - 1) * s for d, s in zip(size, stride))
    if end > n:
        raise UnpicklingError(f"fnx.load: a tensor of size {list(size)}, stride {list(stride)} and offset {offset} "
                              f"reaches element {end - 1} of storage {storage.key!r}, which holds {n} {dtype.name} "
                              f"elements")
    view = flat.device.xp.lib.stride_tricks.as_strided(flat._value[offset:], size,
                                                         tuple(s * dtype.itemsize for s in stride))
    return from_array(view)


def _finish(t: Tensor, requires_grad, backward_hooks, metadata) -> Tensor:
    if type(requires_grad) is not bool or not isinstance(backward_hooks, dict):
        raise UnpicklingError(f"fnx.load: a tensor has a malformed requires_grad {short(requires_grad)} or "
                              f"backward hooks {short(backward_hooks)}")
    if metadata is not None and not (isinstance(metadata, dict) and not any(metadata.values())):
        raise UnpicklingError(f"fnx.load: a tensor carries PyTorch metadata {short(metadata)} (conjugate or "
                              f"negative bits), which fnx does not represent")
    if requires_grad:
        if not t.dtype.is_floating_point:
            raise UnpicklingError(f"fnx.load: a tensor of dtype {t.dtype.name} cannot require grad")
        t.requires_grad_(True)
    return t


def _rebuild_tensor(storage, storage_offset, size, stride) -> Tensor:
    dtype = _fnx_dtype(storage.dtype_name) if isinstance(storage, _Storage) else None
    return _view(storage, dtype, storage_offset, size, stride)


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks, metadata=None):
    return _finish(_rebuild_tensor(storage, storage_offset, size, stride), requires_grad, backward_hooks, metadata)


def _rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad, backward_hooks, dtype, metadata=None):
    if not isinstance(dtype, _dt.dtype):
        raise UnpicklingError(f"fnx.load: a tensor's dtype is {short(dtype)}, not a dtype")
    return _finish(_view(storage, dtype, storage_offset, size, stride), requires_grad, backward_hooks, metadata)


def _rebuild_parameter(data, requires_grad, backward_hooks) -> Parameter:
    if not isinstance(data, Tensor) or type(requires_grad) is not bool:
        raise UnpicklingError(f"fnx.load: a parameter is rebuilt from {short(data)}, not from a tensor")
    return Parameter(data, requires_grad=requires_grad)


def _rebuild_parameter_with_state(data, requires_grad, backward_hooks, state) -> Parameter:
    if state:
        raise UnpicklingError(f"fnx.load: a parameter carries Python attributes {short(state)}, which fnx does not "
                              f"restore on parameters")
    return _rebuild_parameter(data, requires_grad, backward_hooks)


class _TensorType:
    """`torch.Tensor` as `_rebuild_from_type_v2` names it: only plain tensors are rebuilt."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "torch.Tensor"


_TENSOR_TYPE = _TensorType()


def _rebuild_from_type_v2(func, new_type, args, state) -> Tensor:
    if func not in _REBUILDERS or new_type is not _TENSOR_TYPE or type(args) is not tuple or state:
        raise UnpicklingError(f"fnx.load: a tensor of type {short(new_type)} with state {short(state)}; fnx rebuilds "
                              f"plain tensors only (no tensor subclasses, no Python attributes on tensors)")
    return func(*args)


def _size(values=()) -> Size:
    return Size(_ints(values, "size"))


def _torch_device(kind, index=None):
    if type(kind) is not str or not (index is None or type(index) is int):
        raise UnpicklingError(f"fnx.load: malformed torch.device({short(kind)}, {short(index)})")
    return parse_device(kind if index is None else f"{kind}:{index}")


def _encode(text, encoding="utf-8") -> bytes:
    """`_codecs.encode`, as protocol 2 pickles spell bytes: only from text to bytes, in latin-1."""
    if type(text) is not str or encoding not in ("latin1", "latin-1"):
        raise UnpicklingError(f"fnx.load: _codecs.encode({short(text)}, {short(encoding)}) is not how a pickle "
                              f"spells bytes")
    return codecs.encode(text, encoding)


_REBUILDERS = (_rebuild_tensor, _rebuild_tensor_v2, _rebuild_tensor_v3)


def _allowed() -> dict[str, Any]:
    """The globals a PyTorch checkpoint may name, by their torch path, as what fnx gives for each."""
    table: dict[str, Any] = {
        "torch._utils._rebuild_tensor": _rebuild_tensor, "torch._utils._rebuild_tensor_v2": _rebuild_tensor_v2,
        "torch._utils._rebuild_tensor_v3": _rebuild_tensor_v3, "torch._utils._rebuild_parameter": _rebuild_parameter,
        "torch._utils._rebuild_parameter_with_state": _rebuild_parameter_with_state,
        "torch._tensor._rebuild_from_type_v2": _rebuild_from_type_v2, "torch.Tensor": _TENSOR_TYPE,
        "torch.Size": _size, "torch.device": _torch_device, "collections.OrderedDict": OrderedDict,
        "collections.Counter": Counter, "builtins.set": set, "builtins.frozenset": frozenset,
        "builtins.complex": complex, "builtins.bytearray": bytearray, "_codecs.encode": _encode,
        "torch.UntypedStorage": _StorageType("UntypedStorage", "uint8"),
        "torch.storage.UntypedStorage": _StorageType("UntypedStorage", "uint8"),
    }
    for name, dtype_name in _STORAGE_DTYPES.items():
        table[f"torch.{name}"] = _StorageType(name, dtype_name)
    for name in _TORCH_DTYPES:
        found = _dt._BY_NAME.get(name)
        if found is not None and found.name == name:
            table[f"torch.{name}"] = found
    return table


_ALLOWED = _allowed()
_CALLABLE = tuple(v for v in _ALLOWED.values() if callable(v) and not isinstance(v, _dt.dtype))


# ---------------------------------------------------------------- the unpickler
class _Unpickler(pickle._Unpickler):
    """Python's own unpickler with every opcode that can reach code restricted (see the module's docstring).

    The pure-Python unpickler is used, not the C one, because its opcode table can be changed: BUILD, NEWOBJ and
    REDUCE are checked here against what they act on, which `find_class` alone cannot do."""

    dispatch = dict(pickle._Unpickler.dispatch)

    def __init__(self, data: bytes, archive: _Archive):
        super().__init__(io.BytesIO(data), fix_imports=False, encoding="utf-8")
        self.archive = archive
        self.user = safe_global_table()

    def find_class(self, module: str, name: str):
        if (module, name) in _compat_pickle.NAME_MAPPING:  # protocol 2 writes Python 2's names (`__builtin__.set`)
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        path = f"{module}.{name}"
        found = _ALLOWED.get(path, self.user.get(path))
        if found is not None:
            return found
        if module == "torch" and name in _TORCH_DTYPES:
            _fnx_dtype(name)
        if path.startswith("torch.") and name.endswith("Storage") or path in ("torch._utils._rebuild_qtensor",
                                                                              "torch._utils._rebuild_sparse_tensor"):
            raise UnpicklingError(f"fnx.load: the checkpoint needs {path}, a PyTorch feature fnx does not load "
                                  f"(quantized, sparse or other special tensors)")
        if module == "torch" or module.startswith("torch."):
            raise UnpicklingError(f"fnx.load: the checkpoint refers to PyTorch's {path}; fnx rebuilds tensors, "
                                  f"storages, dtypes and plain containers from PyTorch files, not other PyTorch "
                                  f"objects (a whole model saved with torch.save(model)): in PyTorch, save "
                                  f"model.state_dict() and load that into the fnx model with load_state_dict")
        raise UnpicklingError(f"fnx.load: the checkpoint refers to the global {path}, which is not allowed: only "
                              f"tensors, storages, dtypes and plain containers are rebuilt, as with "
                              f"torch.load(weights_only=True). If you trust this file and {path}, allow it with "
                              f"fnx.serialization.add_safe_globals([{name}]) or the safe_globals([...]) context "
                              f"manager")

    def persistent_load(self, pid) -> _Storage:
        return self.archive.storage(pid)

    def _user_class(self, obj) -> bool:
        return isinstance(obj, type) and any(obj is v for v in self.user.values())

    def load_reduce(self):
        args = self.stack.pop()
        func = self.stack[-1]
        if not (any(func is f for f in _CALLABLE) or any(func is f for f in self.user.values())):
            raise UnpicklingError(f"fnx.load: the checkpoint calls {short(func)}, which is not a function or class "
                                  f"that fnx.load calls")
        if type(args) is not tuple:
            raise UnpicklingError(f"fnx.load: malformed arguments {short(args)} for {short(func)}")
        self.stack[-1] = func(*args)

    def load_build(self):
        state = self.stack.pop()
        inst = self.stack[-1]
        if type(inst) is OrderedDict:  # a state dict's `_metadata` attribute
            if not (isinstance(state, dict) and all(type(k) is str for k in state)):
                raise UnpicklingError(f"fnx.load: malformed attributes {short(state)} for an OrderedDict")
            inst.__dict__.update(state)
        elif self._user_class(type(inst)):
            self.stack.append(state)
            pickle._Unpickler.load_build(self)
        else:
            raise UnpicklingError(f"fnx.load: the checkpoint sets the state of a {type(inst).__qualname__}; only "
                                  f"OrderedDicts and classes allowed with fnx.serialization.add_safe_globals are "
                                  f"given state")

    def load_newobj(self):
        args = self.stack.pop()
        cls = self.stack.pop()
        if not (cls is OrderedDict or self._user_class(cls)) or type(args) is not tuple:
            raise UnpicklingError(f"fnx.load: the checkpoint creates an object of {short(cls)}; only OrderedDicts "
                                  f"and classes allowed with fnx.serialization.add_safe_globals are created")
        self.append(cls.__new__(cls, *args))

    def load_newobj_ex(self):
        kwargs = self.stack.pop()
        args = self.stack.pop()
        cls = self.stack.pop()
        if not self._user_class(cls) or type(args) is not tuple or type(kwargs) is not dict:
            raise UnpicklingError(f"fnx.load: the checkpoint creates an object of {short(cls)}; only classes allowed "
                                  f"with fnx.serialization.add_safe_globals are created")
        self.append(cls.__new__(cls, *args, **kwargs))

    def refuse(self):
        raise UnpicklingError("fnx.load: the checkpoint uses a pickle opcode that PyTorch checkpoints never use "
                              "(INST, OBJ or the copyreg extension registry), which could create arbitrary objects")

    dispatch[pickle.REDUCE[0]] = load_reduce
    dispatch[pickle.BUILD[0]] = load_build
    dispatch[pickle.NEWOBJ[0]] = load_newobj
    dispatch[pickle.NEWOBJ_EX[0]] = load_newobj_ex
    for _op in (pickle.INST, pickle.OBJ, pickle.EXT1, pickle.EXT2, pickle.EXT4):
        dispatch[_op[0]] = refuse
    del _op
