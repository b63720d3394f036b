"""The safetensors format (Hugging Face's weights files), read and written without the `safetensors` package.

A file is 8 bytes holding N, the header's length (unsigned, little-endian), N bytes of UTF-8 JSON starting with
`{` (padded with spaces), then the data. The header maps each tensor's name to `{"dtype": "F32", "shape": [...],
"data_offsets": [begin, end]}` (offsets into the data, which holds each tensor's elements little-endian in
row-major order), plus an optional `"__metadata__"` of string to string. Reading checks what the format's rules
require: a header of at most `MAX_HEADER_BYTES`, no duplicate names, each tensor's bytes exactly its dtype's size
times its element count, and the tensors' ranges covering the data with no gap, no overlap and nothing after.
Writing pads the header so that the data starts 8-byte aligned and orders the tensors by decreasing element
size, then name (as the reference writer does), so every tensor's data is aligned to its element size.
"""
from __future__ import annotations

import io
import json
import math
import os
import struct
from typing import Any, BinaryIO

import numpy as np

from .. import dtypes as _dt
from ..core import FnxTypeError, FnxValueError
from ..tensor import Tensor, Tracer, from_array
from .common import UnpicklingError, atomic_write, place, short

__all__ = ["save_safetensors", "load_safetensors", "looks_like_safetensors", "read_safetensors",
           "MAX_HEADER_BYTES"]

MAX_HEADER_BYTES = 100_000_000  # the format's own limit
_CODES = {"BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "I32": "int32", "I64": "int64",
          "F16": "float16", "BF16": "bfloat16", "F32": "float32", "F64": "float64"}
_KNOWN = ("U16", "U32", "U64", "F8_E5M2", "F8_E4M3", "F8_E8M0", "F4", "F6_E2M3", "F6_E3M2", "C64")
_BY_DTYPE = {name: code for code, name in _CODES.items()}


def save_safetensors(tensors: dict[str, Tensor], path, metadata: dict[str, str] | None = None) -> None:
    """Write a flat dict of tensors (a state dict) to `path` as a safetensors file, atomically.

    `metadata` is a dict of strings stored in the header's `__metadata__`. Tensors are written as their values
    (detached, on the CPU, contiguous); tensors sharing memory are each written in full."""
    if not isinstance(tensors, dict):
        raise FnxTypeError(f"fnx.save_safetensors: expected a dict of name -> tensor, got {type(tensors).__name__}")
    if metadata is not None and not (isinstance(metadata, dict) and
                                     all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())):
        raise FnxTypeError(f"fnx.save_safetensors: metadata must be a dict of str to str, got {short(metadata)}")
    arrays = {}
    for name, t in tensors.items():
        if not isinstance(name, str) or name == "__metadata__":
            raise FnxValueError(f"fnx.save_safetensors: tensor names are strings other than '__metadata__', got "
                                f"{name!r}")
        if not isinstance(t, Tensor) or isinstance(t, Tracer):
            raise FnxTypeError(f"fnx.save_safetensors: {name!r} is a {type(t).__name__}, not a concrete tensor; a "
                               f"safetensors file holds a flat dict of tensors (save other objects with fnx.save)")
        arrays[name] = (t.dtype, t.detach().cpu().numpy())  # tobytes() writes row-major order
    header: dict[str, Any] = {"__metadata__": metadata} if metadata else {}
    offset = 0
    order = sorted(arrays, key=lambda n: (-arrays[n][0].itemsize, n))
    for name in order:
        dtype, arr = arrays[name]
        header[name] = {"dtype": _BY_DTYPE[dtype.name], "shape": list(arr.shape),
                        "data_offsets": [offset, offset + arr.nbytes]}
        offset += arr.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(len(text) + 8) % 8)

    def write(fh: BinaryIO) -> None:
        fh.write(struct.pack("<Q", len(text)) + text)
        for name in order:
            fh.write(arrays[name][1].tobytes())

    if isinstance(path, (str, os.PathLike)):
        atomic_write(path, write, "fnx.save_safetensors")
    else:
        write(path)


def load_safetensors(path, device=None) -> dict[str, Tensor]:
    """The tensors of a safetensors file (a path or a readable binary file), by name, on `device` (default: the
    CPU). The header's `__metadata__` is not returned; a malformed or misleading file raises `UnpicklingError`."""
    if isinstance(path, (str, os.PathLike)):
        with open(path, "rb") as fh:
            return read_safetensors(fh, device)
    return read_safetensors(path, device)


def looks_like_safetensors(fh: BinaryIO) -> bool:
    """Whether the file starts as a safetensors file does: a header length, then `{`."""
    head = fh.read(9)
    fh.seek(-len(head), io.SEEK_CUR)
    return len(head) == 9 and head[8:9] == b"{" and struct.unpack("<Q", head[:8])[0] >= 2


def read_safetensors(fh: BinaryIO, map_location=None) -> dict[str, Tensor]:
    """Read a safetensors file from `fh`; `map_location` as `fnx.load` takes it (the saved location is "cpu")."""
    start = fh.tell()
    size = fh.seek(0, io.SEEK_END) - start
    fh.seek(start)
    head = fh.read(8)
    if len(head) != 8:
        raise UnpicklingError("fnx.load: the safetensors file is truncated (no header length)")
    n = struct.unpack("<Q", head)[0]
    if n > MAX_HEADER_BYTES or n > size - 8:
        raise UnpicklingError(f"fnx.load: the safetensors header declares {n} bytes, more than the file's "
                              f"{size - 8} after its length or the format's limit of {MAX_HEADER_BYTES}")
    header = _parse_header(fh.read(n))
    header.pop("__metadata__", None)
    spans = sorted((_check_entry(name, entry) + (name,) for name, entry in header.items()))
    data_size = size - 8 - n
    end = 0
    for begin, stop, name in spans:
        if begin != end:
            raise UnpicklingError(f"fnx.load: in the safetensors file, {short(name)} starts at byte {begin} of the "
                                  f"data where the previous tensor ends at {end}; tensors must cover the data with "
                                  f"no gap and no overlap")
        end = stop
    if end != data_size:
        raise UnpicklingError(f"fnx.load: the safetensors tensors cover {end} bytes of data, but the file holds "
                              f"{data_size}; the file is truncated or has bytes no tensor accounts for")
    out = {}
    base = start + 8 + n
    for name, entry in header.items():
        dtype = _dt._BY_NAME[_CODES[entry["dtype"]]]
        begin, stop = entry["data_offsets"]
        fh.seek(base + begin)
        raw = np.frombuffer(bytearray(fh.read(stop - begin)), np.uint8)
        stored = np.dtype(np.uint16 if dtype is _dt.bfloat16 else dtype.np).newbyteorder("<")
        arr = raw.view(stored).astype(stored.newbyteorder("="), copy=False)
        if dtype is _dt.bfloat16:
            arr = arr.view(dtype.np)
        out[name] = place(from_array(arr.reshape(entry["shape"])), "cpu", map_location)
    return out


def _parse_header(text: bytes) -> dict:
    def unique(pairs: list) -> dict:
        keys = [k for k, _ in pairs]
        if len(set(keys)) != len(keys):
            raise UnpicklingError(f"fnx.load: the safetensors header names {short(sorted(keys))} with duplicates")
        return dict(pairs)

    if text[:1] != b"{":
        raise UnpicklingError("fnx.load: the safetensors header does not start with '{'")
    try:
        header = json.loads(text.decode("utf-8"), object_pairs_hook=unique)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise UnpicklingError(f"fnx.load: the safetensors header is not valid JSON ({short(str(e), 200)})") from e
    if not isinstance(header, dict):
        raise UnpicklingError("fnx.load: the safetensors header is not a JSON object")
    metadata = header.get("__metadata__", {})
    if not (isinstance(metadata, dict) and all(isinstance(v, str) for v in metadata.values())):
        raise UnpicklingError(f"fnx.load: the safetensors __metadata__ must map strings to strings, got "
                              f"{short(metadata)}")
    return header


def _check_entry(name: str, entry) -> tuple[int, int]:
    """An entry's (begin, end) after checking its dtype, shape and size against each other."""
    if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
        raise UnpicklingError(f"fnx.load: the safetensors entry {short(name)} is malformed: {short(entry)}")
    code, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if code not in _CODES:
        known = code in _KNOWN
        raise UnpicklingError(f"fnx.load: the safetensors tensor {short(name)} has dtype {short(code)}, "
                              + ("which fnx does not have" if known else "which the format does not define")
                              + f" (fnx reads {', '.join(_CODES)})")
    if not (isinstance(shape, list) and all(type(s) is int and s >= 0 for s in shape)):
        raise UnpicklingError(f"fnx.load: the safetensors tensor {short(name)} has a malformed shape {short(shape)}")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int for o in offsets)
            and 0 <= offsets[0] <= offsets[1]):
        raise UnpicklingError(f"fnx.load: the safetensors tensor {short(name)} has malformed data_offsets "
                              f"{short(offsets)}")
    nbytes = math.prod(shape) * _dt._BY_NAME[_CODES[code]].itemsize
    if offsets[1] - offsets[0] != nbytes:
        raise UnpicklingError(f"fnx.load: the safetensors tensor {short(name)} of dtype {code} and shape {shape} "
                              f"needs {nbytes} bytes, but its data_offsets {offsets} span {offsets[1] - offsets[0]}")
    return offsets[0], offsets[1]
