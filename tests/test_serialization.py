"""fnx.save / fnx.load: round trips, map_location, and refusal of damaged, foreign and hostile files."""
import io
import json
import os
import pickle
import stat
import struct
import tracemalloc
import warnings
import zipfile
import zlib
from collections import OrderedDict

import numpy as np
import pytest

import fnx
import fnx.nn as nn
from fnx import optim
from fnx.serialization import MAX_MANIFEST_BYTES, UnpicklingError, load, save

PWNED = "/tmp/pwned_fnx"


def roundtrip(obj, **load_kwargs):
    buf = io.BytesIO()
    save(obj, buf)
    buf.seek(0)
    return load(buf, **load_kwargs)


def same(a, b):
    """Structural equality with tensors compared by dtype, shape and values."""
    if isinstance(a, fnx.Tensor):
        return (isinstance(b, fnx.Tensor) and a.dtype is b.dtype and a.shape == b.shape
                and a.requires_grad == b.requires_grad and np.array_equal(a.detach().float().numpy(),
                                                                          b.detach().float().numpy(), equal_nan=True))
    if isinstance(a, dict):
        return type(a) is type(b) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and a != a:
        return isinstance(b, float) and b != b
    return type(a) is type(b) and a == b


def test_round_trip_of_plain_values_and_tensors():
    obj = {"ints": [1, -2, 2 ** 70], "floats": (0.5, float("inf"), float("-inf"), float("nan")), "none": None,
           "flags": [True, False], "text": "héllo", 7: {"nested": OrderedDict(b=1, a=[()])},
           "dtypes": [fnx.float32, fnx.bfloat16, fnx.int64], "device": fnx.device("cpu"),
           "t": {dt.name: fnx.tensor([[1, 0], [3, 4]], dtype=dt) for dt in
                 (fnx.float16, fnx.bfloat16, fnx.float32, fnx.float64, fnx.int8, fnx.int16, fnx.int32, fnx.int64,
                  fnx.uint8, fnx.bool)},
           "scalar": fnx.tensor(2.5), "empty": fnx.zeros(0, 3), "grad": fnx.ones(2, requires_grad=True),
           "view": fnx.arange(12.0).reshape(3, 4).T, "np_scalar": np.float32(1.5)}
    back = roundtrip(obj)
    obj["np_scalar"] = 1.5
    assert same(obj, back)
    assert back["t"]["bfloat16"].tolist() == [[1.0, 0.0], [3.0, 4.0]]


def test_shared_tensors_are_stored_once_and_stay_shared(tmp_path):
    w = nn.Parameter(fnx.randn(3, 3))
    path = tmp_path / "tied.fnx"
    save({"enc": w, "dec": w, "copy": w.detach()}, path)
    assert len([n for n in zipfile.ZipFile(path).namelist() if n.endswith(".npy")]) == 1
    back = load(path)
    assert back["enc"] is back["dec"] and isinstance(back["enc"], nn.Parameter) and back["enc"].requires_grad
    with fnx.no_grad():
        back["enc"].add_(1.0)
    np.testing.assert_array_equal(back["copy"].numpy(), back["enc"].detach().numpy())


def test_model_and_optimizer_state_dicts(tmp_path):
    fnx.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.ReLU(), nn.Linear(3, 2))
    opt = optim.AdamW(model.parameters(), lr=1e-2, betas=(0.8, 0.9))
    model(fnx.randn(5, 4)).sum().backward()
    opt.step()
    path = str(tmp_path / "ckpt.fnx")
    save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 3}, path)
    back = load(path)
    assert same(model.state_dict(), back["model"]) and same(opt.state_dict(), back["optimizer"])
    assert back["optimizer"]["param_groups"][0]["betas"] == (0.8, 0.9)
    fresh = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.ReLU(), nn.Linear(3, 2))
    fresh.load_state_dict(back["model"])
    x = fnx.randn(2, 4)
    np.testing.assert_array_equal(fresh.eval()(x).detach().numpy(), model.eval()(x).detach().numpy())
    assert os.listdir(tmp_path) == ["ckpt.fnx"]  # the temporary file was renamed over the target


def test_atomic_write_keeps_the_old_file_on_failure(tmp_path):
    path = tmp_path / "keep.fnx"
    save({"v": 1}, path)
    with pytest.raises(TypeError, match="cannot save obj\\['bad'\\] of type object"):
        save({"v": 2, "bad": object()}, path)
    assert load(path) == {"v": 1} and os.listdir(tmp_path) == ["keep.fnx"]


def test_save_rejects_what_it_cannot_store():
    with pytest.raises(TypeError, match="cannot save obj of type generator"):
        save((x for x in []), io.BytesIO())
    with pytest.raises(TypeError, match="keys must be str or int"):
        save({(1, 2): 3}, io.BytesIO())
    loop = []
    loop.append(loop)
    with pytest.raises(ValueError, match="reference cycle"):
        save(loop, io.BytesIO())


def test_map_location():
    obj = {"a": fnx.ones(2), "b": [fnx.zeros(1)]}
    assert roundtrip(obj, map_location="cpu")["a"].device == fnx.device("cpu")
    assert roundtrip(obj, map_location={"cuda:0": "cpu"})["b"][0].device == fnx.device("cpu")
    seen = []
    back = roundtrip(obj, map_location=lambda t, loc: seen.append(loc))
    assert seen == ["cpu", "cpu"] and back["a"].tolist() == [1.0, 1.0]


def make_archive(manifest=None, files=None, raw_manifest=None):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("manifest.json", raw_manifest if raw_manifest is not None else json.dumps(manifest))
        for name, payload in (files or {}).items():
            zf.writestr(name, payload)
    return buf.getvalue()


def npy_bytes(arr, allow_pickle=False):
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=allow_pickle)
    return buf.getvalue()


def entry(**kw):
    return {"data": "data/0.npy", "dtype": "float32", "shape": [2], "device": "cpu", "requires_grad": False,
            "parameter": False, **kw}


def manifest(tensors=(), obj=None):
    return {"format": "fnx", "version": 1, "tensors": list(tensors), "object": obj}


F32 = npy_bytes(np.ones(2, np.float32))


class Exploit:
    def __reduce__(self):
        return (os.system, (f"touch {PWNED}",))


@pytest.fixture
def no_pwn():
    if os.path.exists(PWNED):
        os.unlink(PWNED)
    yield
    assert not os.path.exists(PWNED), "loading ran code from the file"


@pytest.mark.parametrize("payload, message", [
    (pickle.dumps(Exploit()), "pickle file"),
    (pickle.dumps({"w": [1, 2]}, protocol=2), "pickle file"),
    (b"", "empty"),
    (b"not a checkpoint at all", "neither a zip archive"),
    (make_archive(raw_manifest="{]"), "not valid JSON"),
    (make_archive({"format": "other", "version": 1}), "format is not 'fnx'"),
    (make_archive({"format": "fnx", "version": 99, "tensors": [], "object": None}), "version 99"),
    (make_archive(manifest(obj={"exec": "os.system('touch /tmp/pwned_fnx')"})), "unknown tag 'exec'"),
    (make_archive(manifest(obj={"tensor": 0})), "malformed 'tensor'"),
    (make_archive(manifest(obj={"dict": [[1.5, 2]]})), "malformed dict item"),
    (make_archive(manifest(obj={"dtype": "complex32"})), "malformed 'dtype'"),
    (make_archive(manifest(obj={"device": "tpu:0"})), "unknown device"),
    (make_archive(manifest([entry()], {"tensor": 0})), "missing from the archive"),
    (make_archive(manifest([entry(data="../../etc/passwd")], None)), "invalid data file"),
    (make_archive(manifest([entry(dtype="object")], None), {"data/0.npy": F32}), "unknown dtype"),
    (make_archive(manifest([entry(shape=[3])], None), {"data/0.npy": F32}), "manifest says"),
    (make_archive(manifest([entry(dtype="int64", requires_grad=True)], None),
                  {"data/0.npy": npy_bytes(np.ones(2, np.int64))}), "cannot require grad"),
    (make_archive(manifest([entry()], None), {"data/0.npy": npy_bytes(np.array([Exploit(), 1]), True)}),
     "dtype object"),
    (make_archive(manifest([entry()], None), {"data/0.npy": b"\x93NUMPY garbage"}), "not a valid .npy"),
    (make_archive(manifest([entry()], None), {"data/0.npy": F32 + b"extra"}), "bytes of data"),
    (make_archive({"format": "fnx", "version": 1}), "lacks its 'tensors'"),
    (make_archive(raw_manifest="[" * 100000 + "]" * 100000), "manifest.json"),
])
def test_hostile_or_foreign_files_are_refused(payload, message, no_pwn):
    with pytest.raises(UnpicklingError, match=message) as info:
        load(io.BytesIO(payload))
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, pickle.UnpicklingError)


def test_a_hostile_pytorch_zip_checkpoint_is_refused(no_pwn):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("archive/data.pkl", pickle.dumps(Exploit()))
        zf.writestr("archive/version", "3\n")
    with pytest.raises(UnpicklingError, match="global posix.system, which is not allowed"):
        load(io.BytesIO(buf.getvalue()))


def test_truncated_and_damaged_files_are_refused(tmp_path, no_pwn):
    path = tmp_path / "ckpt.fnx"
    save({"w": fnx.randn(64, 8), "meta": {"step": 10}}, path)
    blob = path.read_bytes()
    for cut in (1, 4, 30, len(blob) // 3, len(blob) // 2, len(blob) - 22, len(blob) - 1):
        with pytest.raises(UnpicklingError, match="damaged or truncated|neither a zip|empty"):
            load(io.BytesIO(blob[:cut]))
    start = blob.index(b"\x93NUMPY") + 200  # inside the tensor data: the CRC check catches the flip
    flipped = blob[:start] + bytes([blob[start] ^ 0xFF]) + blob[start + 1:]
    with pytest.raises(UnpicklingError, match="damaged"):
        load(io.BytesIO(flipped))
    rng = np.random.default_rng(0)
    for _ in range(40):  # random corruption never escapes as anything but a clear refusal
        bad = bytearray(blob)
        for pos in rng.integers(0, len(blob), 3):
            bad[pos] ^= int(rng.integers(1, 256))
        try:
            load(io.BytesIO(bytes(bad)))
        except UnpicklingError:
            pass


def test_cuda_checkpoint_on_a_machine_without_cuda():
    if fnx.cuda.is_available():
        pytest.skip("this machine has CUDA")
    blob = make_archive(manifest([entry(device="cuda:0")], {"tensor": 0}), {"data/0.npy": F32})
    with pytest.raises(RuntimeError, match="CUDA is not available here; pass map_location='cpu'"):
        load(io.BytesIO(blob))
    assert load(io.BytesIO(blob), map_location="cpu").device == fnx.device("cpu")
    assert load(io.BytesIO(blob), map_location={"cuda:0": fnx.device("cpu")}).tolist() == [1.0, 1.0]


def test_load_options():
    with pytest.raises(ValueError, match="pickle_module"):
        load(io.BytesIO(b""), pickle_module=pickle)
    with pytest.raises(NotImplementedError, match="mmap"):
        load(io.BytesIO(b""), mmap=True)
    assert roundtrip([1], weights_only=False) == [1]


@pytest.mark.cuda
def test_cuda_tensors_and_map_location(tmp_path):
    path = tmp_path / "gpu.fnx"
    obj = {"w": fnx.randn(3, 2, device="cuda"), "b": fnx.ones(2, dtype=fnx.bfloat16, device="cuda"),
           "c": fnx.arange(3)}
    save(obj, path)
    back = load(path)
    assert back["w"].device == fnx.device("cuda:0") and back["c"].device == fnx.device("cpu")
    np.testing.assert_array_equal(back["w"].cpu().numpy(), obj["w"].cpu().numpy())
    assert back["b"].dtype is fnx.bfloat16 and back["b"].cpu().tolist() == [1.0, 1.0]
    on_cpu = load(path, map_location="cpu")
    assert on_cpu["w"].device == fnx.device("cpu") and on_cpu["b"].device == fnx.device("cpu")
    moved = load(path, map_location={"cpu": "cuda:0"})
    assert moved["c"].device == fnx.device("cuda:0")


# ---------------------------------------------------------------- archives built to exhaust memory or mislead
def test_a_compressed_manifest_bomb_is_refused_without_expanding_it():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        with zf.open("manifest.json", "w", force_zip64=True) as out:  # 64 MB of JSON deflated to ~64 KB
            out.write(b'{"format": "fnx", "version": 1, "tensors": [], "object": "')
            for _ in range(64):
                out.write(b" " * (1 << 20))
            out.write(b'"}')
    blob = buf.getvalue()
    assert len(blob) < 1 << 20
    tracemalloc.start()
    try:
        with pytest.raises(UnpicklingError, match="'manifest.json' is compressed"):
            load(io.BytesIO(blob))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, f"loading the refused file took {peak} bytes"


def test_an_oversized_manifest_is_refused_unread():
    head = b'{"format": "fnx", "version": 1, "tensors": [], "object": "'
    text = head + b"a" * (MAX_MANIFEST_BYTES - len(head) - 1) + b'"}'
    assert len(text) == MAX_MANIFEST_BYTES + 1
    blob = make_archive(raw_manifest=text)
    del text
    tracemalloc.start()
    try:
        with pytest.raises(UnpicklingError, match=f"holds {MAX_MANIFEST_BYTES + 1} bytes, more than the"):
            load(io.BytesIO(blob))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < MAX_MANIFEST_BYTES // 4, f"loading the refused file took {peak} bytes"
    just_fits = make_archive(raw_manifest=json.dumps(manifest(obj="a" * (MAX_MANIFEST_BYTES - 100))))
    assert len(load(io.BytesIO(just_fits))) == MAX_MANIFEST_BYTES - 100


def archive_with_duplicate(name):
    good = json.dumps(manifest([entry()], {"tensor": 0}))
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate name, and writes it
        with zipfile.ZipFile(buf, "w") as zf:
            zf.writestr("manifest.json", good)
            zf.writestr("data/0.npy", F32)
            zf.writestr(name, F32 if name.endswith(".npy") else json.dumps(manifest(obj="other")))
    return buf.getvalue()


@pytest.mark.parametrize("name", ["manifest.json", "data/0.npy"])
def test_duplicate_entry_names_are_refused(name):
    with pytest.raises(UnpicklingError, match=f"two entries named '{name}'"):
        load(io.BytesIO(archive_with_duplicate(name)))


@pytest.mark.parametrize("name", ["../escape.npy", "/etc/passwd", "data/../../x", "data\\0.npy", "C:/x", "a/./b"])
def test_entries_with_unsafe_names_are_refused(name):
    blob = make_archive(manifest(), {name: F32})
    assert name in zipfile.ZipFile(io.BytesIO(blob)).namelist()
    with pytest.raises(UnpicklingError, match="unsafe name"):
        load(io.BytesIO(blob))


@pytest.mark.parametrize("name", ["data/0.npy/../../manifest.json", "data/00.npy", "data/0.npy.bak", "data/-1.npy"])
def test_the_manifest_names_only_data_files(name):
    blob = make_archive(manifest([entry(data=name)], {"tensor": 0}), {"data/0.npy": F32})
    with pytest.raises(UnpicklingError, match="invalid data file"):
        load(io.BytesIO(blob))


def test_a_compressed_array_is_refused():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("manifest.json", json.dumps(manifest([entry()], {"tensor": 0})))
        zf.writestr("data/0.npy", F32, compress_type=zipfile.ZIP_DEFLATED)
    blob = buf.getvalue()
    with pytest.raises(UnpicklingError, match="data/0.npy' is compressed"):
        load(io.BytesIO(blob))


def _patch_central(blob: bytes, name: str, offset: int, fmt: str, value: int) -> bytes:
    """`blob` with the field at `offset` of `name`'s central directory record set to `value`."""
    at = blob.index(b"PK\x01\x02")
    while blob[at + 46:at + 46 + len(name)] != name.encode():
        at = blob.index(b"PK\x01\x02", at + 4)
    return blob[:at + offset] + struct.pack(fmt, value) + blob[at + offset + struct.calcsize(fmt):]


def test_entries_declaring_more_bytes_than_the_file_holds_are_refused():
    blob = make_archive(manifest([entry()], {"tensor": 0}), {"data/0.npy": F32})
    for offset in (20, 24):  # the compressed and the uncompressed size
        bad = _patch_central(blob, "data/0.npy", offset, "<L", 0x7FFFFFFF)
        with pytest.raises(UnpicklingError, match="damaged"):
            load(io.BytesIO(bad))
    big = _patch_central(_patch_central(blob, "data/0.npy", 20, "<L", 0x7FFFFFFF), "data/0.npy", 24, "<L", 0x7FFFFFFF)
    with pytest.raises(UnpicklingError, match="run past the end"):
        load(io.BytesIO(big))
    encrypted = _patch_central(blob, "data/0.npy", 8, "<H", 0x1)
    with pytest.raises(UnpicklingError, match="encrypted"):
        load(io.BytesIO(encrypted))


def raw_zip(members) -> bytes:
    """A zip archive written by hand: `members` lists (name, stored bytes, where its local header is: None for
    "next", or an offset into the bytes already written), so that entries can be made to overlap."""
    body, central = b"", b""
    for name, data, at in members:
        crc = zlib.crc32(data)
        local = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 0, 0, 0x21, crc, len(data), len(data), len(name), 0)
        if at is None:
            at = len(body)
            body += local + name.encode() + data
        central += struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 0, 0, 0x21, crc, len(data), len(data),
                               len(name), 0, 0, 0, 0, 0, at) + name.encode()
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(members), len(members), len(central), len(body), 0)
    return body + central + end


def test_overlapping_entries_are_refused():
    """Entry 0's data quotes entry 1 whole (its local header and data): N entries nested so would make the loader
    read N times what the file holds. Built apart, the same entries load."""
    inner = npy_bytes(np.ones(2, np.float32))
    quoted = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 0, 0, 0x21, zlib.crc32(inner), len(inner), len(inner),
                         10, 0) + b"data/1.npy" + inner
    outer = npy_bytes(np.frombuffer(quoted, np.uint8))
    text = json.dumps(manifest([entry(dtype="uint8", shape=[len(quoted)]), entry(data="data/1.npy")],
                               [{"tensor": 0}, {"tensor": 1}])).encode()
    apart = raw_zip([("manifest.json", text, None), ("data/0.npy", outer, None), ("data/1.npy", inner, None)])
    a, b = load(io.BytesIO(apart))
    assert a.numel() == len(quoted) and b.tolist() == [1.0, 1.0]
    start = 30 + len("manifest.json") + len(text) + 30 + len("data/0.npy") + len(outer) - len(quoted)
    nested = raw_zip([("manifest.json", text, None), ("data/0.npy", outer, None), ("data/1.npy", inner, start)])
    assert zipfile.ZipFile(io.BytesIO(nested)).read("data/1.npy") == inner  # zipfile alone would read both
    with pytest.raises(UnpicklingError, match="overlap"):
        load(io.BytesIO(nested))


# ---------------------------------------------------------------- file permissions and atomic writes
@pytest.fixture
def umask():
    previous = os.umask(0o022)
    os.umask(previous)
    yield lambda mask: os.umask(mask)
    os.umask(previous)


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664), (0o077, 0o600)],
                         ids=lambda m: f"{m:04o}")
def test_a_new_file_gets_the_umask_permissions(tmp_path, umask, mask, mode):
    umask(mask)
    path = tmp_path / "new.fnx"
    save({"w": fnx.ones(2)}, path)
    assert stat.S_IMODE(os.stat(path).st_mode) == mode
    with open(tmp_path / "reference", "wb"):
        pass
    assert stat.S_IMODE(os.stat(tmp_path / "reference").st_mode) == mode  # what open() gives


@pytest.mark.parametrize("mode, mask", [(0o644, 0o077), (0o640, 0o022), (0o600, 0o022), (0o664, 0o027)],
                         ids=lambda m: f"{m:04o}")
def test_a_replaced_file_keeps_its_permissions(tmp_path, umask, mode, mask):
    path = tmp_path / "old.fnx"
    save({"v": 1}, path)
    os.chmod(path, mode)
    umask(mask)
    save({"v": 2}, path)
    assert load(path) == {"v": 2}
    assert stat.S_IMODE(os.stat(path).st_mode) == mode
    assert os.listdir(tmp_path) == ["old.fnx"]


@pytest.mark.parametrize("exists", [True, False])
def test_a_write_that_fails_midway_leaves_no_temporary_file(tmp_path, monkeypatch, exists):
    path = tmp_path / "ckpt.fnx"
    if exists:
        save({"v": 1}, path)
    real = fnx.serialization.fnx_format._write_zip

    def fail_midway(fh, payload, arrays):
        real(fh, payload, arrays)
        assert [n for n in os.listdir(tmp_path) if n.endswith(".tmp")], "the temporary file exists while writing"
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fnx.serialization.fnx_format, "_write_zip", fail_midway)
    with pytest.raises(OSError, match="No space left"):
        save({"v": 2, "w": fnx.ones(3)}, path)
    assert os.listdir(tmp_path) == (["ckpt.fnx"] if exists else [])
    if exists:
        assert load(path) == {"v": 1}
