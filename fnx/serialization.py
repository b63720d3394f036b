"""`fnx.save` / `fnx.load`: checkpoints in a documented format that never executes code when loaded.

A file is an uncompressed zip archive holding

- `manifest.json`: `{"format": "fnx", "version": 1, "tensors": [...], "object": <value>}`, where
  each tensor entry is `{"data": "data/<k>.npy", "dtype": "<fnx dtype name>", "shape": [...],
  "device": "cpu" | "cuda:N", "requires_grad": bool, "parameter": bool}`, and a value is JSON
  `null`/`true`/`false`/number/string (None, bool, int, float, str), a JSON array (a list), or an
  object with one tag: `{"tuple": [values]}`, `{"dict": [[key, value], ...]}` (keys str or int),
  `{"odict": [[key, value], ...]}` (an OrderedDict), `{"tensor": index}`, `{"dtype": "float32"}`,
  `{"device": "cuda:0"}`, `{"float": "nan" | "inf" | "-inf"}`;
- `data/<k>.npy`: one `.npy` file (numpy's format, written without pickle) per distinct array;
  bfloat16 is stored as its uint16 bits. Tensors that are the same array are stored once.

Loading reads JSON and `.npy` headers only (`np.load(..., allow_pickle=False)`), checks every entry
against the manifest, and raises `UnpicklingError` (a RuntimeError) naming the problem for a damaged,
truncated, foreign or hostile file, including PyTorch's pickle-based checkpoints. Before anything is read,
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
import pickle
import re
import stat
import struct
import zipfile
from collections import OrderedDict
from typing import Any, BinaryIO, Callable

import numpy as np

from . import dtypes as _dt
from .core import FnxRuntimeError, FnxTypeError, FnxValueError
from .device import cpu, device as _device, is_cuda_available
from .nn.parameter import Parameter
from .tensor import Tensor, Tracer, from_array

__all__ = ["save", "load", "UnpicklingError", "FORMAT", "VERSION", "MAX_MANIFEST_BYTES"]

FORMAT, VERSION = "fnx", 1
MAX_MANIFEST_BYTES = 16 << 20  # about 100,000 tensors; parsing JSON can take ~30 times its size in memory
_MANIFEST = "manifest.json"
_ARRAY_NAME = re.compile(r"data/(0|[1-9][0-9]*)\.npy")
_TAGS = ("tuple", "dict", "odict", "tensor", "dtype", "device", "float")


class UnpicklingError(FnxRuntimeError, pickle.UnpicklingError):
    """`fnx.load` refused a file: damaged, truncated, not an fnx checkpoint, or hostile.

    Also a `pickle.UnpicklingError`, so code written for `torch.load(weights_only=True)` catches it.
    """


# ---------------------------------------------------------------- save
def save(obj: Any, f) -> None:
    """Save `obj` (nested dicts/lists/tuples of tensors and plain values, e.g. state dicts) to `f`, a path or
    a writable binary file. Paths are written atomically: a temporary file in the same directory is
    flushed, fsynced and renamed over the target."""
    tensors: list[dict] = []
    arrays: list[np.ndarray] = []
    manifest = {"format": FORMAT, "version": VERSION, "tensors": tensors,
                "object": _Encoder(tensors, arrays).encode(obj, "obj")}
    payload = json.dumps(manifest, allow_nan=False, separators=(",", ":")).encode()
    if not isinstance(f, (str, os.PathLike)):
        _write_zip(f, payload, arrays)
        return
    write_atomically(f, lambda fh: _write_zip(fh, payload, arrays))


def write_atomically(path, write: Callable[[BinaryIO], None]) -> None:
    """Write the file `path` with `write(fh)` atomically: a temporary file in the same directory is written,
    flushed, fsynced and renamed over the target (fnx.save, fnx.export's archives)."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    try:
        keep_mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        keep_mode = None
    # A new file is created 0o666 and the kernel applies the umask, as open() does; a file being replaced is
    # first written owner-only, then given the old file's permissions just before it takes its place.
    fd, tmp = _create_temp(directory, os.path.basename(path), 0o666 if keep_mode is None else 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            if keep_mode is not None:
                os.chmod(fh.fileno() if os.chmod in os.supports_fd else tmp, keep_mode)
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise
    _fsync_directory(directory)


def _create_temp(directory: str, name: str, mode: int) -> tuple[int, str]:
    """A new file `.<name>.<random>.tmp` in `directory`, opened for writing with `mode` (less the umask)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        tmp = os.path.join(directory, f".{name}.{os.urandom(6).hex()}.tmp")
        try:
            return os.open(tmp, flags, mode), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"fnx.save: could not create a temporary file next to {name!r} in {directory}")


def _write_zip(fh: BinaryIO, payload: bytes, arrays: list[np.ndarray]) -> None:
    with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        zf.writestr(_MANIFEST, payload)
        for k, arr in enumerate(arrays):
            with zf.open(f"data/{k}.npy", "w", force_zip64=True) as out:
                np.save(out, arr, allow_pickle=False)


def _fsync_directory(directory: str) -> None:
    """Make the rename durable (POSIX); a no-op where directories cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class _Encoder:
    """Turns an object into the manifest's JSON value, collecting tensors and their arrays."""

    def __init__(self, tensors: list[dict], arrays: list[np.ndarray]):
        self.tensors, self.arrays = tensors, arrays
        self.tensor_ids: dict[int, int] = {}
        self.array_ids: dict[int, int] = {}  # ids stay unique: everything keyed is alive inside the saved object
        self.open: set[int] = set()  # containers being encoded: a repeat is a reference cycle

    def encode(self, x, where: str):
        if x is None or isinstance(x, (bool, str)):
            return x
        if isinstance(x, int):
            return int(x)
        if isinstance(x, float):
            return float(x) if math.isfinite(x) else {"float": repr(float(x))}
        if isinstance(x, np.generic) and x.dtype.kind in "biuf":
            return self.encode(x.item(), where)
        if isinstance(x, Tensor):
            return {"tensor": self.tensor(x, where)}
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
        hint = "; save its state_dict() instead" if hasattr(x, "state_dict") else ""
        raise FnxTypeError(f"fnx.save: cannot save {where} of type {type(x).__name__}{hint}. fnx files hold dicts, "
                           f"lists, tuples, None, bool, int, float, str, tensors, dtypes and devices (no pickle)")

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


# ---------------------------------------------------------------- load
def load(f, map_location=None, pickle_module=None, *, weights_only: bool = True, mmap: bool | None = None) -> Any:
    """Load what `fnx.save` wrote to `f` (a path or a readable binary file).

    `map_location` moves tensors: None keeps the saved devices (a CUDA tensor needs CUDA), a device or
    string sends every tensor there, a dict maps saved locations ("cuda:1") to devices, and a callable
    `fn(tensor, location) -> Tensor | None` decides per tensor (None keeps the saved device). The format
    never runs code, so `weights_only` makes no difference; `pickle_module` must be None.
    """
    if pickle_module is not None:
        raise FnxValueError("fnx.load: pickle_module must be None; fnx files are never unpickled")
    if mmap:
        raise NotImplementedError("fnx.load(mmap=True): memory-mapping tensors is not supported yet; load without "
                                  "mmap (tensors are read into memory)")
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            return _load(fh, map_location)
    return _load(f, map_location)


def _load(fh: BinaryIO, map_location) -> Any:
    head = fh.read(4)
    fh.seek(-len(head), io.SEEK_CUR)
    if not head:
        raise UnpicklingError("fnx.load: the file is empty")
    if head != b"PK\x03\x04":
        if head[:1] == b"\x80":
            raise UnpicklingError("fnx.load: this is a pickle file (PyTorch's legacy torch.save format), not an fnx "
                                  "checkpoint. fnx never unpickles, because unpickling can run arbitrary code; "
                                  "convert it with PyTorch: load it with torch.load(path, weights_only=True) and "
                                  "save its tensors with fnx.save")
        raise UnpicklingError("fnx.load: not an fnx checkpoint (not a zip archive)")
    try:
        with zipfile.ZipFile(fh) as zf:
            return _Decoder(fh, zf, map_location).run()
    except zipfile.BadZipFile as e:
        raise UnpicklingError(f"fnx.load: the file is damaged or truncated ({e})") from e
    except (EOFError, OSError, struct.error, zipfile.LargeZipFile, NotImplementedError) as e:
        raise UnpicklingError(f"fnx.load: the file is damaged or truncated ({type(e).__name__}: {e})") from e


class _Decoder:
    """Reads the manifest and the arrays it names, checking each against the other."""

    def __init__(self, fh: BinaryIO, zf: zipfile.ZipFile, map_location):
        self.fh, self.zf, self.map_location = fh, zf, map_location
        self.arrays: dict[str, np.ndarray] = {}
        self.tensors: list = []

    def run(self) -> Any:
        infos = self.zf.infolist()
        check_names(infos)
        names = {info.filename for info in infos}
        if _MANIFEST not in names:
            if any(n.endswith("data.pkl") for n in names):
                raise UnpicklingError("fnx.load: this is a PyTorch checkpoint (torch.save's zip format, which holds "
                                      "a pickle), not an fnx one. fnx never unpickles, because unpickling can run "
                                      "arbitrary code; convert it with PyTorch: load it with torch.load(path, "
                                      "weights_only=True) and save its tensors with fnx.save")
            raise UnpicklingError("fnx.load: not an fnx checkpoint (the zip archive has no manifest.json)")
        check_layout(self.fh, infos)
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
            raise UnpicklingError(f"fnx.load: malformed value in the manifest: {_short(v)}")
        (tag, body), = v.items()
        if tag == "tuple" and isinstance(body, list):
            return tuple(self.decode(x) for x in body)
        if tag in ("dict", "odict") and isinstance(body, list):
            out = OrderedDict() if tag == "odict" else {}
            for item in body:
                if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], (str, int))
                        and not isinstance(item[0], bool)):
                    raise UnpicklingError(f"fnx.load: malformed dict item in the manifest: {_short(item)}")
                out[item[0]] = self.decode(item[1])
            return out
        if tag == "tensor" and isinstance(body, int) and not isinstance(body, bool) and 0 <= body < len(self.tensors):
            return self.tensors[body]
        if tag == "dtype" and body in _dt._BY_NAME:
            return _dt._BY_NAME[body]
        if tag == "device" and isinstance(body, str):
            return _parse_device(body)
        if tag == "float" and body in ("nan", "inf", "-inf"):
            return float(body)
        if tag not in _TAGS:
            raise UnpicklingError(f"fnx.load: unknown tag {tag!r} in the manifest (known: {', '.join(_TAGS)})")
        raise UnpicklingError(f"fnx.load: malformed {tag!r} value in the manifest: {_short(body)}")

    def tensor(self, entry, i: int) -> Tensor:
        if not isinstance(entry, dict):
            raise UnpicklingError(f"fnx.load: tensor entry {i} is not an object")
        dtype = _dt._BY_NAME.get(entry.get("dtype")) if isinstance(entry.get("dtype"), str) else None
        shape = entry.get("shape")
        location = entry.get("device")
        if dtype is None or dtype.name != entry["dtype"]:
            raise UnpicklingError(f"fnx.load: tensor entry {i} has an unknown dtype {_short(entry.get('dtype'))}")
        if not (isinstance(shape, list) and all(type(s) is int and s >= 0 for s in shape)):
            raise UnpicklingError(f"fnx.load: tensor entry {i} has a malformed shape {_short(shape)}")
        if not isinstance(location, str):
            raise UnpicklingError(f"fnx.load: tensor entry {i} has a malformed device {_short(location)}")
        saved_device = _parse_device(location)
        arr = self.array(entry.get("data"), dtype, tuple(shape), i)
        t = self.place(from_array(arr), str(saved_device))
        requires_grad = entry.get("requires_grad") is True
        if requires_grad and not dtype.is_floating_point:
            raise UnpicklingError(f"fnx.load: tensor entry {i} of dtype {dtype.name} cannot require grad")
        if entry.get("parameter") is True:
            return Parameter(t, requires_grad=requires_grad)
        return t.requires_grad_(True) if requires_grad else t

    def array(self, name, dtype: _dt.dtype, shape: tuple, i: int) -> np.ndarray:
        """The array stored as `name`, checked to hold `shape` elements of `dtype` and nothing else."""
        if not isinstance(name, str) or not _ARRAY_NAME.fullmatch(name):
            raise UnpicklingError(f"fnx.load: tensor entry {i} names an invalid data file {_short(name)} (expected "
                                  f"'data/<k>.npy')")
        stored = np.dtype(np.uint16) if dtype is _dt.bfloat16 else dtype.np
        arr = self.arrays.get(name)
        if arr is None:
            try:
                info = self.zf.getinfo(name)
            except KeyError:
                raise UnpicklingError(f"fnx.load: the manifest references the array {name!r}, which is missing "
                                      f"from the archive") from None
            arr = self.arrays[name] = read_npy(self.zf, info, stored, shape)
        if arr.dtype != stored or arr.shape != shape:
            raise UnpicklingError(f"fnx.load: tensor entry {i} expects {dtype.name}{list(shape)}, but {name} holds "
                                  f"{arr.dtype}{list(arr.shape)}")
        return arr.view(dtype.np) if dtype is _dt.bfloat16 else arr

    def place(self, t: Tensor, location: str) -> Tensor:
        """Move a loaded (CPU) tensor to where `map_location` says, or back to its saved device."""
        ml = self.map_location
        if callable(ml):
            moved = ml(t, location)
            if moved is not None:
                return moved
            target = location
        elif isinstance(ml, dict):
            target = ml.get(location, location)
        elif ml is not None:
            target = ml
        else:
            target = location
        target = _device(target)
        if target.type == "cuda" and not is_cuda_available():
            raise FnxRuntimeError(f"fnx.load: a tensor was saved on {location}, but CUDA is not available here; "
                                  f"pass map_location='cpu' to load it on the CPU")
        return t if target is cpu else t.to(target)


def check_names(infos: list, who: str = "fnx.load") -> None:
    """Refuse duplicate entry names (a zip tool and a loader could each pick a different one) and names that
    would escape a folder if the archive were extracted."""
    seen: set[str] = set()
    for info in infos:
        name = info.filename
        if name in seen:
            raise UnpicklingError(f"{who}: the archive holds two entries named {_short(name)}; a file built to "
                                  f"show one content to one reader and another to the next is refused")
        seen.add(name)
        parts = name.split("/")
        if (name.startswith("/") or "\\" in name or ":" in parts[0]
                or any(p in ("", ".", "..") for p in parts[:-1]) or parts[-1] in (".", "..")):
            raise UnpicklingError(f"{who}: the archive holds an entry with an unsafe name {_short(name)} (an "
                                  f"absolute path, a drive, a backslash or a '..' component)")


def check_layout(fh: BinaryIO, infos: list, who: str = "fnx.load") -> None:
    """Check, before reading any entry, that each is stored uncompressed, unencrypted, inside the file and apart
    from every other: then reading the entries takes no more memory than the file's size."""
    size = fh.seek(0, io.SEEK_END)
    spans = []
    for info in infos:
        name = _short(info.filename)
        if info.flag_bits & 0x1:
            raise UnpicklingError(f"{who}: {name} is encrypted; fnx checkpoints are not")
        if info.compress_type != zipfile.ZIP_STORED:
            raise UnpicklingError(f"{who}: {name} is compressed (zip method {info.compress_type}); fnx "
                                  f"checkpoints store every entry uncompressed, and a compressed entry could expand "
                                  f"without bound, so it is not read")
        if info.compress_size != info.file_size:
            raise UnpicklingError(f"{who}: {name} is stored uncompressed in {info.compress_size} bytes but "
                                  f"declares {info.file_size}; the file is damaged")
        local = b""
        if 0 <= info.header_offset <= size - 30:
            fh.seek(info.header_offset)
            local = fh.read(30)
        if len(local) != 30 or local[:4] != b"PK\x03\x04":
            raise UnpicklingError(f"{who}: the file is damaged or truncated (no local header for {name})")
        name_len, extra_len = struct.unpack("<HH", local[26:30])
        end = info.header_offset + 30 + name_len + extra_len + info.compress_size
        if end > size:
            raise UnpicklingError(f"{who}: {name} declares {info.file_size} bytes, which run past the end of the "
                                  f"{size}-byte file; the file is damaged or truncated")
        spans.append((info.header_offset, end, name))
    spans.sort()
    for (_, end, first), (start, _, second) in zip(spans, spans[1:]):
        if start < end:
            raise UnpicklingError(f"{who}: the entries {first} and {second} overlap in the file; fnx "
                                  f"checkpoints store each entry once, apart from the others")


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
        if header_dtype.hasobject or header_dtype.kind not in "biuf":
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


def _parse_device(text: str):
    try:
        return _device(text)
    except (RuntimeError, TypeError) as e:
        raise UnpicklingError(f"fnx.load: unknown device {_short(text)} in the manifest") from e


def _short(v, limit: int = 80) -> str:
    text = repr(v)
    return text if len(text) <= limit else text[:limit] + "..."
