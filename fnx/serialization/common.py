"""What every checkpoint format of fnx shares: the refusal error, atomic writes, zip archive checks, map_location.

`fnx.load` reads fnx's own archives (fnx/serialization.py), PyTorch's zip checkpoints
(fnx/torch_format.py) and safetensors files (fnx/serialization_safetensors.py); each checks its file with
the helpers here before reading a byte of tensor data.
"""
from __future__ import annotations

import contextlib
import io
import os
import pickle
import stat
import struct
import zipfile
from typing import Any, BinaryIO, Callable, Iterator

from ..core import FnxRuntimeError
from ..device import cpu, device as _device, is_cuda_available
from ..tensor import Tensor

__all__ = ["UnpicklingError", "add_safe_globals", "get_safe_globals", "clear_safe_globals", "safe_globals",
           "atomic_write", "check_zip", "place", "parse_device", "short"]


class UnpicklingError(FnxRuntimeError, pickle.UnpicklingError):
    """`fnx.load` refused a file: damaged, truncated, not a checkpoint it reads, or hostile.

    Also a `pickle.UnpicklingError`, so code written for `torch.load(weights_only=True)` catches it.
    """


# ---------------------------------------------------------------- classes the caller trusts
_SAFE_GLOBALS: list = []


def add_safe_globals(safe_globals: list) -> None:
    """Allow `fnx.load` to rebuild instances of these classes (and, in PyTorch checkpoints, to call these
    functions), as `torch.serialization.add_safe_globals` does. An entry is a class or function, or a pair
    `(obj, "module.name")` naming the path the file uses for it."""
    for entry in safe_globals:
        _global_path(entry)
        _SAFE_GLOBALS.append(entry)


def get_safe_globals() -> list:
    """The entries `add_safe_globals` has added (a copy)."""
    return list(_SAFE_GLOBALS)


def clear_safe_globals() -> None:
    """Forget every entry `add_safe_globals` added."""
    _SAFE_GLOBALS.clear()


@contextlib.contextmanager
def safe_globals(safe_globals: list) -> Iterator[None]:
    """Allow these classes and functions for the `fnx.load` calls inside the block (then the list is as before)."""
    before = list(_SAFE_GLOBALS)
    add_safe_globals(safe_globals)
    try:
        yield
    finally:
        _SAFE_GLOBALS[:] = before


def safe_global_table() -> dict[str, Any]:
    """The allowed classes and functions by the path a file names them with ("module.QualName")."""
    table = {}
    for entry in _SAFE_GLOBALS:
        obj = entry[0] if isinstance(entry, tuple) else entry
        table[_global_path(entry)] = obj
    return table


def _global_path(entry) -> str:
    if isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[1], str):
        return entry[1]
    module, name = getattr(entry, "__module__", None), getattr(entry, "__qualname__", None)
    if not (isinstance(module, str) and isinstance(name, str)) or "<locals>" in name:
        raise TypeError(f"add_safe_globals: expected classes or functions defined at a module's top level, or "
                        f"(obj, 'module.name') pairs, got {entry!r}")
    return f"{module}.{name}"


# ---------------------------------------------------------------- writing
def atomic_write(path, write: Callable[[BinaryIO], None], op: str) -> None:
    """Write a file at `path` with `write(fh)`, atomically: a temporary file in the same directory is written,
    flushed, fsynced and renamed over the target. A new file gets the permissions `open()` would give it (0o666
    less the umask); a file that is replaced keeps its permissions."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    try:
        keep_mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        keep_mode = None
    # A new file is created 0o666 and the kernel applies the umask, as open() does; a file being replaced is
    # first written owner-only, then given the old file's permissions just before it takes its place.
    fd, tmp = _create_temp(directory, os.path.basename(path), 0o666 if keep_mode is None else 0o600, op)
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


def _create_temp(directory: str, name: str, mode: int, op: str) -> tuple[int, str]:
    """A new file `.<name>.<random>.tmp` in `directory`, opened for writing with `mode` (less the umask)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        tmp = os.path.join(directory, f".{name}.{os.urandom(6).hex()}.tmp")
        try:
            return os.open(tmp, flags, mode), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"{op}: could not create a temporary file next to {name!r} in {directory}")


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


# ---------------------------------------------------------------- zip archives
def check_zip(fh: BinaryIO, infos: list, who: str = "fnx.load") -> None:
    """Check a zip archive before reading any entry: names unique and safe, every entry stored uncompressed,
    unencrypted, inside the file and apart from every other. Then reading the entries takes no more memory than
    the file's size, and no entry can escape a folder if the archive were extracted."""
    _check_names(infos, who)
    _check_layout(fh, infos, who)


def _check_names(infos: list, who: str) -> None:
    """Refuse duplicate entry names (a zip tool and a loader could each pick a different one) and names that
    would escape a folder if the archive were extracted."""
    seen: set[str] = set()
    for info in infos:
        name = info.filename
        if name in seen:
            raise UnpicklingError(f"{who}: the archive holds two entries named {short(name)}; a file built to "
                                  f"show one content to one reader and another to the next is refused")
        seen.add(name)
        parts = name.split("/")
        if (name.startswith("/") or "\\" in name or ":" in parts[0]
                or any(p in ("", ".", "..") for p in parts[:-1]) or parts[-1] in (".", "..")):
            raise UnpicklingError(f"{who}: the archive holds an entry with an unsafe name {short(name)} (an "
                                  f"absolute path, a drive, a backslash or a '..' component)")


def _check_layout(fh: BinaryIO, infos: list, who: str) -> None:
    size = fh.seek(0, io.SEEK_END)
    spans = []
    for info in infos:
        name = short(info.filename)
        if info.flag_bits & 0x1:
            raise UnpicklingError(f"{who}: {name} is encrypted; checkpoints are not")
        if info.compress_type != zipfile.ZIP_STORED:
            raise UnpicklingError(f"{who}: {name} is compressed (zip method {info.compress_type}); checkpoints "
                                  f"store every entry uncompressed, and a compressed entry could expand without "
                                  f"bound, so it is not read")
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
            raise UnpicklingError(f"{who}: the entries {first} and {second} overlap in the file; checkpoints "
                                  f"store each entry once, apart from the others")


# ---------------------------------------------------------------- devices
def place(t: Tensor, location: str, map_location) -> Tensor:
    """Move a loaded (CPU) tensor to where `map_location` says, or back to its saved `location`.

    `map_location`: None keeps the saved device, a device or string sends every tensor there, a dict maps saved
    locations ("cuda:1") to devices, and a callable `fn(tensor, location) -> Tensor | None` decides per tensor
    (None keeps the saved device)."""
    if callable(map_location):
        moved = map_location(t, location)
        if moved is not None:
            return moved
        target = location
    elif isinstance(map_location, dict):
        target = map_location.get(location, location)
    elif map_location is not None:
        target = map_location
    else:
        target = location
    target = _device(target)
    if target.type == "cuda" and not is_cuda_available():
        raise FnxRuntimeError(f"fnx.load: a tensor was saved on {location}, but CUDA is not available here; "
                              f"pass map_location='cpu' to load it on the CPU")
    return t if target is cpu else t.to(target)


def parse_device(text: str):
    try:
        return _device(text)
    except (RuntimeError, TypeError, ValueError) as e:
        raise UnpicklingError(f"fnx.load: unknown device {short(text)} in the file; pass map_location='cpu' to "
                              f"load its tensors on the CPU") from e


def short(v, limit: int = 80) -> str:
    text = repr(v)
    return text if len(text) <= limit else text[:limit] + "..."
