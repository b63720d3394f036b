"""fnx's checkpoint format (`fnx.save`), and `fnx.load`, which reads it and recognises the other formats.

A file is an uncompressed zip archive holding

- `manifest.json`: `{"format": "fnx", "version": 1, "tensors": [...], "object": <value>}`, where
  each tensor entry is `{"data": "data/<k>.npy", "dtype": "<fnx dtype name>", "shape": [...],
  "device": "cpu" | "cuda:N", "requires_grad": bool, "parameter": bool}`, and a value is JSON
  `null`/`true`/`false`/number/string (None, bool, int, float, str), a JSON array (a list), or an
  object with one tag: `{"tuple": [values]}`, `{"dict": [[key, value], ...]}` (keys str or int),
  `{"odict": [[key, value], ...]}` (an OrderedDict), `{"set": [values]}`, `{"frozenset": [values]}`,
  `{"tensor": index}`, `{"ndarray": {"data": "data/<k>.npy", "dtype": "<f4", "shape": [...]}}` (a numpy
  array), `{"dtype": "float32"}`, `{"device": "cuda:0"}`, `{"float": "nan" | "inf" | "-inf"}`,
  `{"complex": [re, im]}`, `{"bytes": "<hex>"}`, `{"global": {"module": ..., "name": ...}}` (a class or function
  by name), `{"object": {"class": {"module": ..., "name": ...}, "id": n, "state": <its attributes>}}` (an
  instance, e.g. a whole module: its class by name and its `__dict__`; objects are numbered in the order they
  appear) or `{"ref": n}` (the object numbered n again). Names resolve as fnx/serialization/objects.py says: to
  fnx's own modules and public functions, or to what the caller allowed; nothing named is imported or called;
- `data/<k>.npy`: one `.npy` file (numpy's format, written without pickle) per distinct array;
  bfloat16 is stored as its uint16 bits. Tensors that are the same array are stored once. A tensor of another
  library that speaks DLPack (a torch tensor) is saved as the fnx tensor it converts to.

Loading reads JSON and `.npy` headers only (`np.load(..., allow_pickle=False)`), checks every entry
against the manifest, and raises `UnpicklingError` (a RuntimeError) naming the problem for a damaged,
truncated, foreign or hostile file. Before anything is read,
the archive's layout is checked, so that loading needs memory in proportion to the file's size and no more:
every entry is stored uncompressed (no compression bombs), lies inside the file without overlapping another
(no entry counted twice), has a plain name (`manifest.json`, `data/<k>.npy`: no `..`, no absolute path) that
appears once; the manifest is at most `MAX_MANIFEST_BYTES`; an array's entry holds exactly its `.npy` header
and the dtype and shape that the manifest gives it.

Files are written atomically (a temporary file in the same folder, fsynced, renamed over the target). A new
file gets the permissions `open()` would give it (0o666 less the umask); a file that is replaced keeps its
permissions.
"""
from __future__ import annotations

import io
import json
import math
import os
import re
import struct
import types
import zipfile
from collections import OrderedDict
from typing import Any, BinaryIO

import numpy as np

from .. import dtypes as _dt
from ..core import FnxTypeError, FnxValueError
from ..device import cpu, device as _device
from ..nn.parameter import Parameter
from ..ops.creation import from_dlpack
from . import safetensors_format, torch_format
from ..tensor import Tensor, Tracer, from_array
from .common import UnpicklingError, atomic_write, check_zip, parse_device, place, short
from .objects import global_path, new_instance, resolve_class, resolve_global

__all__ = ["save", "load", "FORMAT", "VERSION", "MAX_MANIFEST_BYTES"]

FORMAT, VERSION = "fnx", 1
MAX_MANIFEST_BYTES = 16 << 20  # about 100,000 tensors; parsing JSON can take ~30 times its size in memory
_MANIFEST = "manifest.json"
_ARRAY_NAME = re.compile(r"data/(0|[1-9][0-9]*)\.npy")
_TAGS = ("tuple", "dict", "odict", "tensor", "dtype", "device", "float", "complex", "bytes", "set", "frozenset",
         "ndarray", "global", "object", "ref")


# ---------------------------------------------------------------- save
def save(obj: Any, f) -> None:
    """Save `obj` to `f`, a path or a writable binary file, as `torch.save` does, in a format that is never
    pickled: state dicts, tensors, numpy arrays, Python numbers, strings and containers, whole modules (their
    class by name and their attributes; `fnx.load` rebuilds fnx's own and the ones you allow). Paths are written
    atomically: a temporary file in the same directory is flushed, fsynced and renamed over the target."""
    tensors: list[dict] = []
    arrays: list[np.ndarray] = []
    manifest = {"format": FORMAT, "version": VERSION, "tensors": tensors,
                "object": _Encoder(tensors, arrays).encode(obj, "obj")}
    payload = json.dumps(manifest, allow_nan=False, separators=(",", ":")).encode()
    if isinstance(f, (str, os.PathLike)):
        atomic_write(f, lambda fh: _write_zip(fh, payload, arrays), "fnx.save")
    else:
        _write_zip(f, payload, arrays)


def _write_zip(fh: BinaryIO, payload: bytes, arrays: list[np.ndarray]) -> None:
    with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        zf.writestr(_MANIFEST, payload)
        for k, arr in enumerate(arrays):
            with zf.open(f"data/{k}.npy", "w", force_zip64=True) as out:
                np.save(out, arr, allow_pickle=False)


class _Encoder:
    """Turns an object into the manifest's JSON value, collecting tensors and their arrays."""

    def __init__(self, tensors: list[dict], arrays: list[np.ndarray]):
        self.tensors, self.arrays = tensors, arrays
        self.tensor_ids: dict[int, int] = {}
        self.array_ids: dict[int, int] = {}  # ids stay unique: everything keyed is alive inside the saved object
        self.open: set[int] = set()  # containers being encoded: a repeat is a reference cycle
        self.object_ids: dict[int, int] = {}  # objects encoded so far: a repeat is stored as a reference

    def encode(self, x, where: str):
        if x is None or isinstance(x, (bool, str)):
            return x
        if isinstance(x, int):
            return int(x)
        if isinstance(x, float):
            return float(x) if math.isfinite(x) else {"float": repr(float(x))}
        if isinstance(x, np.generic) and x.dtype.kind in "biufc":
            return self.encode(x.item(), where)
        if isinstance(x, complex):
            return {"complex": [self.encode(x.real, where), self.encode(x.imag, where)]}
        if isinstance(x, bytes):
            return {"bytes": x.hex()}
        if isinstance(x, Tensor):
            if x.is_sparse:
                raise NotImplementedError(f"fnx.save: {where} is a sparse COO tensor, which fnx's format does not "
                                          f"hold; save its .to_dense(), or its _indices() and _values()")
            return {"tensor": self.tensor(x, where)}
        if isinstance(x, np.ndarray):
            return {"ndarray": self.ndarray(x, where)}
        if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__") and not isinstance(x, type):
            return {"tensor": self.tensor(_from_foreign(x), where)}
        if isinstance(x, _dt.dtype):
            return {"dtype": x.name}
        if isinstance(x, _device):
            return {"device": str(x)}
        if type(x) is list or type(x) is tuple or isinstance(x, dict):
            if id(x) in self.open:
                raise FnxValueError(f"fnx.save: {where} contains itself (a reference cycle), which cannot be saved")
            self.open.add(id(x))
            try:
                if isinstance(x, dict):
                    items = [[self.key(k, where), self.encode(v, f"{where}[{k!r}]")] for k, v in x.items()]
                    return {"odict" if isinstance(x, OrderedDict) else "dict": items}
                values = [self.encode(v, f"{where}[{i}]") for i, v in enumerate(x)]
                return values if type(x) is list else {"tuple": values}
            finally:
                self.open.discard(id(x))
        if type(x) is set or type(x) is frozenset:
            return {type(x).__name__: [self.encode(v, f"{where}{{{v!r}}}") for v in x]}
        if isinstance(x, (type, types.FunctionType, types.BuiltinFunctionType)):
            return {"global": global_path(x, f"fnx.save: {where}")}
        if hasattr(x, "__dict__") and not isinstance(x, types.ModuleType):
            return self.object(x, where)
        raise FnxTypeError(f"fnx.save: cannot save {where} of type {type(x).__name__}. fnx files hold dicts, lists, "
                           f"tuples, sets, None, bool, int, float, complex, str, bytes, tensors, numpy arrays, "
                           f"dtypes, devices, classes and functions by name, and objects by class and attributes "
                           f"(no pickle)")

    def object(self, x, where: str) -> dict:
        """An instance as its class's path and its attributes (its `__dict__`), as pickle records it."""
        if id(x) in self.open:
            raise FnxValueError(f"fnx.save: {where} contains itself (a reference cycle), which cannot be saved")
        found = self.object_ids.get(id(x))
        if found is not None:
            return {"ref": found}
        path = global_path(type(x), f"fnx.save: {where}")
        self.object_ids[id(x)] = len(self.object_ids)  # numbered in the order the loader meets them
        self.open.add(id(x))
        try:
            state = self.encode(dict(vars(x)), f"{where}.__dict__")
        finally:
            self.open.discard(id(x))
        return {"object": {"class": path, "id": self.object_ids[id(x)], "state": state}}

    def ndarray(self, arr: np.ndarray, where: str) -> dict:
        if arr.dtype.kind not in "biufc" or arr.dtype.hasobject:
            raise FnxTypeError(f"fnx.save: {where} is a numpy array of dtype {arr.dtype}; fnx files hold numeric "
                               f"arrays only (bool, int, float, complex)")
        k = self.array_ids.get(id(arr))
        if k is None:
            k = self.array_ids[id(arr)] = len(self.arrays)
            self.arrays.append(arr)
        return {"data": f"data/{k}.npy", "dtype": arr.dtype.newbyteorder("=").str, "shape": list(arr.shape)}

    @staticmethod
    def key(k, where: str):
        if isinstance(k, str) or (isinstance(k, int) and not isinstance(k, bool)):
            return k
        raise FnxTypeError(f"fnx.save: {where} has a key {k!r} of type {type(k).__name__}; dict keys must be str "
                           f"or int")

    def tensor(self, t: Tensor, where: str) -> int:
        if isinstance(t, Tracer):
            raise FnxTypeError(f"fnx.save: {where} is a traced tensor inside a transform; save concrete tensors "
                               f"outside fnx.grad/vmap/compile")
        found = self.tensor_ids.get(id(t))
        if found is not None:
            return found
        value = t._value
        k = self.array_ids.get(id(value))
        if k is None:
            arr = value if t.device is cpu else value.get()
            if t.dtype is _dt.bfloat16:
                arr = arr.view(np.uint16)
            k = self.array_ids[id(value)] = len(self.arrays)
            self.arrays.append(arr)
        self.tensor_ids[id(t)] = len(self.tensors)
        self.tensors.append({"data": f"data/{k}.npy", "dtype": t.dtype.name, "shape": list(t.shape),
                             "device": str(t.device), "requires_grad": t.requires_grad,
                             "parameter": isinstance(t, Parameter)})
        return self.tensor_ids[id(t)]


def _from_foreign(x) -> Tensor:
    """A DLPack-capable tensor of another library (a torch tensor, a JAX array) as an fnx tensor."""
    requires_grad = getattr(x, "requires_grad", False) is True
    t = from_dlpack(x.detach() if requires_grad else x)
    return t.requires_grad_(True) if requires_grad and t.dtype.is_floating_point else t


# ---------------------------------------------------------------- load
def load(f, map_location=None, pickle_module=None, *, weights_only: bool = True, mmap: bool | None = None) -> Any:
    """Load the checkpoint in `f` (a path or a readable binary file): what `fnx.save` wrote, or a PyTorch
    `torch.save` zip file (`.pt`, `.pth`, `.bin`), read as `torch.load(weights_only=True)` reads it, into fnx
    tensors, without torch. Nothing in the file is ever run; a damaged or hostile file raises `UnpicklingError`.

    `map_location` moves tensors: None keeps the saved devices (a CUDA tensor needs CUDA), a device or
    string sends every tensor there, a dict maps saved locations ("cuda:1") to devices, and a callable
    `fn(tensor, location) -> Tensor | None` decides per tensor (None keeps the saved device; for a PyTorch file
    it is called once per storage, with the storage as a flat tensor). `pickle_module` must be None.

    `weights_only=False` says the caller trusts the file, as in `torch.load`: whole objects saved by `fnx.save`
    then rebuild with any class of a module already imported (a script's own model class), not only fnx's and
    the allowed ones. A PyTorch file is read weights-only whatever `weights_only` says.
    """
    if pickle_module is not None:
        raise FnxValueError("fnx.load: pickle_module must be None; fnx.load reads pickles only with its own "
                            "restricted unpickler")
    if mmap:
        raise NotImplementedError("fnx.load(mmap=True): memory-mapping tensors is not supported yet; load without "
                                  "mmap (tensors are read into memory)")
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            return _load(fh, map_location, weights_only is False)
    return _load(f, map_location, weights_only is False)


def _load(fh: BinaryIO, map_location, trusted: bool) -> Any:
    head = fh.read(4)
    fh.seek(-len(head), io.SEEK_CUR)
    if not head:
        raise UnpicklingError("fnx.load: the file is empty")
    if head != b"PK\x03\x04":
        if head[:1] == b"\x80":
            torch_format.refuse_plain_pickle(fh)
        if safetensors_format.looks_like_safetensors(fh):
            return safetensors_format.read_safetensors(fh, map_location)
        raise UnpicklingError("fnx.load: not a checkpoint that fnx reads (neither a zip archive, fnx's or "
                              "PyTorch's, nor a safetensors file)")
    try:
        with zipfile.ZipFile(fh) as zf:
            return _Decoder(fh, zf, map_location, trusted).run()
    except zipfile.BadZipFile as e:
        raise UnpicklingError(f"fnx.load: the file is damaged or truncated ({e})") from e
    except (EOFError, OSError, struct.error, zipfile.LargeZipFile, NotImplementedError) as e:
        raise UnpicklingError(f"fnx.load: the file is damaged or truncated ({type(e).__name__}: {e})") from e


class _Decoder:
    """Reads the manifest and the arrays it names, checking each against the other."""

    def __init__(self, fh: BinaryIO, zf: zipfile.ZipFile, map_location, trusted: bool):
        self.fh, self.zf, self.map_location, self.trusted = fh, zf, map_location, trusted
        self.arrays: dict[str, np.ndarray] = {}
        self.tensors: list = []
        self.objects: dict[int, Any] = {}

    def run(self) -> Any:
        infos = self.zf.infolist()
        check_zip(self.fh, infos)
        names = {info.filename for info in infos}
        if _MANIFEST not in names:
            if torch_format.is_torch_archive(names):
                return torch_format.load_archive(self.zf, names, self.map_location)
            raise UnpicklingError("fnx.load: neither an fnx checkpoint nor a PyTorch one (the zip archive has no "
                                  "manifest.json and no data.pkl)")
        info = self.zf.getinfo(_MANIFEST)
        if info.file_size > MAX_MANIFEST_BYTES:
            raise UnpicklingError(f"fnx.load: manifest.json holds {info.file_size} bytes, more than the "
                                  f"{MAX_MANIFEST_BYTES} that fnx.load reads (fnx.serialization.MAX_MANIFEST_BYTES; "
                                  f"raise it to load a file you trust)")
        try:
            manifest = json.loads(self.zf.read(info).decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise UnpicklingError(f"fnx.load: manifest.json is not valid JSON ({e})") from e
        except RecursionError as e:
            raise UnpicklingError("fnx.load: manifest.json nests too deeply") from e
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise UnpicklingError("fnx.load: manifest.json does not describe an fnx checkpoint (format is not 'fnx')")
        if manifest.get("version") != VERSION:
            raise UnpicklingError(f"fnx.load: unsupported fnx checkpoint version {manifest.get('version')!r}; this "
                                  f"fnx reads version {VERSION}")
        entries = manifest.get("tensors")
        if not isinstance(entries, list) or "object" not in manifest:
            raise UnpicklingError("fnx.load: manifest.json lacks its 'tensors' list or its 'object'")
        self.tensors = [self.tensor(e, i) for i, e in enumerate(entries)]
        try:
            return self.decode(manifest["object"])
        except RecursionError as e:
            raise UnpicklingError("fnx.load: the saved object nests too deeply") from e

    def decode(self, v) -> Any:
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, list):
            return [self.decode(x) for x in v]
        if not isinstance(v, dict) or len(v) != 1:
            raise UnpicklingError(f"fnx.load: malformed value in the manifest: {short(v)}")
        (tag, body), = v.items()
        if tag == "tuple" and isinstance(body, list):
            return tuple(self.decode(x) for x in body)
        if tag in ("dict", "odict") and isinstance(body, list):
            out = OrderedDict() if tag == "odict" else {}
            for item in body:
                if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], (str, int))
                        and not isinstance(item[0], bool)):
                    raise UnpicklingError(f"fnx.load: malformed dict item in the manifest: {short(item)}")
                out[item[0]] = self.decode(item[1])
            return out
        if tag == "tensor" and isinstance(body, int) and not isinstance(body, bool) and 0 <= body < len(self.tensors):
            return self.tensors[body]
        if tag == "dtype" and body in _dt._BY_NAME:
            return _dt._BY_NAME[body]
        if tag == "device" and isinstance(body, str):
            return parse_device(body)
        if tag == "float" and body in ("nan", "inf", "-inf"):
            return float(body)
        if tag == "complex" and isinstance(body, list) and len(body) == 2:
            parts = [self.decode(x) for x in body]
            if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in parts):
                return complex(*parts)
        if tag == "bytes" and isinstance(body, str) and re.fullmatch(r"([0-9a-f]{2})*", body):
            return bytes.fromhex(body)
        if tag in ("set", "frozenset") and isinstance(body, list):
            values = [self.decode(x) for x in body]
            try:
                return set(values) if tag == "set" else frozenset(values)
            except TypeError:
                pass
        if tag == "ndarray":
            return self.ndarray(body)
        if tag == "global":
            return resolve_global(body, self.trusted)
        if tag == "object" and isinstance(body, dict) and set(body) == {"class", "id", "state"}:
            return self.object(body)
        if tag == "ref" and type(body) is int and self.objects.get(body) is not None:
            return self.objects[body]
        if tag not in _TAGS:
            raise UnpicklingError(f"fnx.load: unknown tag {tag!r} in the manifest (known: {', '.join(_TAGS)})")
        raise UnpicklingError(f"fnx.load: malformed {tag!r} value in the manifest: {short(body)}")

    def object(self, body: dict):
        cls = resolve_class(body["class"], self.trusted)
        if type(body["id"]) is not int or body["id"] != len(self.objects):
            raise UnpicklingError(f"fnx.load: malformed object id {short(body['id'])} in the manifest")
        self.objects[body["id"]] = None  # a reference to an object from inside its own state is malformed
        obj = self.objects[body["id"]] = new_instance(cls, self.decode(body["state"]))
        return obj

    def ndarray(self, body) -> np.ndarray:
        try:
            dtype = np.dtype(body["dtype"]) if isinstance(body, dict) and isinstance(body.get("dtype"), str) else None
        except TypeError:
            dtype = None
        shape = body.get("shape") if isinstance(body, dict) else None
        if (dtype is None or dtype.kind not in "biufc" or dtype.str != body["dtype"] or not isinstance(shape, list)
                or not all(type(s) is int and s >= 0 for s in shape)):
            raise UnpicklingError(f"fnx.load: malformed 'ndarray' value in the manifest: {short(body)}")
        return self.array(body.get("data"), dtype, tuple(shape), "of a numpy array")

    def tensor(self, entry, i: int) -> Tensor:
        if not isinstance(entry, dict):
            raise UnpicklingError(f"fnx.load: tensor entry {i} is not an object")
        dtype = _dt._BY_NAME.get(entry.get("dtype")) if isinstance(entry.get("dtype"), str) else None
        shape = entry.get("shape")
        location = entry.get("device")
        if dtype is None or dtype.name != entry["dtype"]:
            raise UnpicklingError(f"fnx.load: tensor entry {i} has an unknown dtype {short(entry.get('dtype'))}")
        if not (isinstance(shape, list) and all(type(s) is int and s >= 0 for s in shape)):
            raise UnpicklingError(f"fnx.load: tensor entry {i} has a malformed shape {short(shape)}")
        if not isinstance(location, str):
            raise UnpicklingError(f"fnx.load: tensor entry {i} has a malformed device {short(location)}")
        saved_device = parse_device(location)
        stored = np.dtype(np.uint16) if dtype is _dt.bfloat16 else dtype.np
        arr = self.array(entry.get("data"), stored, tuple(shape), f"tensor entry {i}")
        arr = arr.view(dtype.np) if dtype is _dt.bfloat16 else arr
        t = place(from_array(arr), str(saved_device), self.map_location)
        requires_grad = entry.get("requires_grad") is True
        if requires_grad and not dtype.is_floating_point:
            raise UnpicklingError(f"fnx.load: tensor entry {i} of dtype {dtype.name} cannot require grad")
        if entry.get("parameter") is True:
            return Parameter(t, requires_grad=requires_grad)
        return t.requires_grad_(True) if requires_grad else t

    def array(self, name, stored: np.dtype, shape: tuple, what: str) -> np.ndarray:
        """The array stored as `name`, checked to hold `shape` elements of `stored` and nothing else."""
        if not isinstance(name, str) or not _ARRAY_NAME.fullmatch(name):
            raise UnpicklingError(f"fnx.load: {what} names an invalid data file {short(name)} (expected "
                                  f"'data/<k>.npy')")
        arr = self.arrays.get(name)
        if arr is None:
            try:
                info = self.zf.getinfo(name)
            except KeyError:
                raise UnpicklingError(f"fnx.load: the manifest references the array {name!r}, which is missing "
                                      f"from the archive") from None
            arr = self.arrays[name] = read_npy(self.zf, info, stored, shape)
        if arr.dtype != stored or arr.shape != shape:
            raise UnpicklingError(f"fnx.load: {what} expects {stored}{list(shape)}, but {name} holds "
                                  f"{arr.dtype}{list(arr.shape)}")
        return arr


def read_npy(zf: zipfile.ZipFile, info: zipfile.ZipInfo, dtype: np.dtype, shape: tuple,
             who: str = "fnx.load") -> np.ndarray:
    """Check an .npy entry's header against the manifest before reading its data with np.load."""
    with zf.open(info) as fh:
        try:
            version = np.lib.format.read_magic(fh)
            if version == (1, 0):
                header_shape, _, header_dtype = np.lib.format.read_array_header_1_0(fh)
            elif version == (2, 0):
                header_shape, _, header_dtype = np.lib.format.read_array_header_2_0(fh)
            else:
                raise ValueError(f"unsupported .npy format version {version}")
        except ValueError as e:
            raise UnpicklingError(f"{who}: {info.filename} is not a valid .npy file ({e})") from e
        if header_dtype.hasobject or header_dtype.kind not in "biufc":
            raise UnpicklingError(f"{who}: {info.filename} has dtype {header_dtype}; fnx checkpoints hold only "
                                  f"numeric arrays (object arrays would need pickle)")
        if header_dtype.newbyteorder("=") != dtype or tuple(header_shape) != shape:
            raise UnpicklingError(f"{who}: {info.filename} holds {header_dtype}{list(header_shape)}, but the "
                                  f"manifest says {dtype}{list(shape)}")
        nbytes = math.prod(shape) * dtype.itemsize
        if info.file_size != fh.tell() + nbytes:
            raise UnpicklingError(f"{who}: {info.filename} has {info.file_size - fh.tell()} bytes of data where "
                                  f"its header announces {nbytes}")
        fh.seek(0)
        try:
            arr = np.load(fh, allow_pickle=False)
        except ValueError as e:
            raise UnpicklingError(f"{who}: {info.filename} is damaged ({e})") from e
    return arr if arr.dtype.isnative else arr.astype(arr.dtype.newbyteorder("="))

