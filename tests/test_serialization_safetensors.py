"""fnx.save_safetensors / fnx.load_safetensors (and fnx.load of a .safetensors file): the format's rules, checked
against the reference implementation (the `safetensors` package, numpy API), and refusal of misleading files."""
import io
import json
import os
import struct

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, strategies as st
from safetensors import deserialize
from safetensors.numpy import save as st_save

import fnx
from fnx.serialization import UnpicklingError

DTYPES = [fnx.bool, fnx.uint8, fnx.int8, fnx.int16, fnx.int32, fnx.int64, fnx.float16, fnx.bfloat16, fnx.float32,
          fnx.float64]


def sample(dtype, shape, seed=0):
    values = np.random.default_rng(seed).normal(size=shape) * 50
    return fnx.tensor(values.astype(np.float64)).to(dtype)


def to_bytes(tensors, metadata=None):
    buf = io.BytesIO()
    fnx.save_safetensors(tensors, buf, metadata)
    return buf.getvalue()


def as_numpy(t):
    arr = t.numpy()
    return arr.view(np.uint16) if t.dtype is fnx.bfloat16 else arr


@given(st.lists(st.tuples(st.sampled_from(DTYPES), st.lists(st.integers(0, 3), max_size=3)), min_size=0,
                max_size=5))
def test_round_trip_and_agreement_with_the_reference_implementation(specs):
    tensors = {f"t{i}": sample(dtype, tuple(shape), i) for i, (dtype, shape) in enumerate(specs)}
    blob = to_bytes(tensors, {"format": "pt"})
    header_len = struct.unpack("<Q", blob[:8])[0]
    assert (8 + header_len) % 8 == 0  # the data starts aligned
    back = fnx.load_safetensors(io.BytesIO(blob))
    assert sorted(back) == sorted(tensors)
    reference = dict(deserialize(blob))  # what safetensors itself reads from fnx's file
    assert sorted(reference) == sorted(tensors)
    for name, t in tensors.items():
        assert back[name].dtype is t.dtype and back[name].shape == t.shape
        np.testing.assert_array_equal(as_numpy(back[name]), as_numpy(t))
        assert reference[name]["shape"] == list(t.shape) and bytes(reference[name]["data"]) == as_numpy(t).tobytes()


def test_files_written_by_the_reference_implementation_load():
    arrays = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "i": np.array([1, -2], np.int64),
              "b": np.array([True, False]), "h": np.array(1.5, np.float16), "e": np.zeros((0, 4), np.float64),
              "bf": np.array([1.5, -2], ml_dtypes.bfloat16)}
    blob = st_save(arrays, metadata={"framework": "np"})
    out = fnx.load(io.BytesIO(blob))  # fnx.load recognises the format by its content
    assert sorted(out) == sorted(arrays)
    for name, arr in arrays.items():
        assert out[name].dtype is fnx.dtypes.from_numpy_dtype(arr.dtype) and out[name].shape == arr.shape
        np.testing.assert_array_equal(out[name].float().numpy(), arr.astype(np.float32))


def test_paths_state_dicts_and_models(tmp_path):
    model = fnx.nn.Sequential(fnx.nn.Linear(3, 4), fnx.nn.LayerNorm(4))
    path = tmp_path / "model.safetensors"
    fnx.save_safetensors(model.state_dict(), path, metadata={"step": "3"})
    fresh = fnx.nn.Sequential(fnx.nn.Linear(3, 4), fnx.nn.LayerNorm(4))
    fresh.load_state_dict(fnx.load_safetensors(path))
    x = fnx.randn(2, 3)
    np.testing.assert_array_equal(fresh(x).detach().numpy(), model(x).detach().numpy())
    header = json.loads(path.read_bytes()[8:8 + struct.unpack("<Q", path.read_bytes()[:8])[0]])
    assert header["__metadata__"] == {"step": "3"}
    assert fnx.load(path, map_location="cpu")["0.weight"].shape == (4, 3)
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_views_and_grad_tensors_are_written_by_value():
    base = fnx.arange(12.0).reshape(3, 4).requires_grad_()
    back = fnx.load_safetensors(io.BytesIO(to_bytes({"t": base.t(), "col": base[:, 1]})))
    np.testing.assert_array_equal(back["t"].numpy(), np.arange(12.0).reshape(3, 4).T)
    assert back["col"].tolist() == [1.0, 5.0, 9.0] and not back["t"].requires_grad


def test_what_cannot_be_saved_is_refused():
    with pytest.raises(TypeError, match="'w' is a ndarray, not a concrete tensor"):
        fnx.save_safetensors({"w": np.ones(2)}, io.BytesIO())
    with pytest.raises(ValueError, match="'__metadata__'"):
        fnx.save_safetensors({"__metadata__": fnx.ones(1)}, io.BytesIO())
    with pytest.raises(TypeError, match="metadata must be a dict of str to str"):
        fnx.save_safetensors({"w": fnx.ones(1)}, io.BytesIO(), {"step": 3})
    with pytest.raises(TypeError, match="expected a dict"):
        fnx.save_safetensors([fnx.ones(1)], io.BytesIO())


def build(header: dict, data: bytes = b"", pad: bytes = b"", length=None) -> bytes:
    text = json.dumps(header).encode() + pad
    return struct.pack("<Q", len(text) if length is None else length) + text + data


F32x2 = np.ones(2, np.float32).tobytes()


@pytest.mark.parametrize("blob, message", [
    (build({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, F32x2[:4]), "truncated or has bytes"),
    (build({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, F32x2 + b"xx"), "truncated or has bytes"),
    (build({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
            "b": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, F32x2), "no gap and no overlap"),
    (build({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, F32x2), "no gap and no overlap"),
    (build({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, F32x2), "needs 12 bytes"),
    (build({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}}, F32x2), "malformed data_offsets"),
    (build({"a": {"dtype": "F32", "shape": [2], "data_offsets": [-8, 0]}}, F32x2), "malformed data_offsets"),
    (build({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}, F32x2), "malformed shape"),
    (build({"a": {"dtype": "U16", "shape": [4], "data_offsets": [0, 8]}}, F32x2), "U16', which fnx does not have"),
    (build({"a": {"dtype": "OBJ", "shape": [1], "data_offsets": [0, 8]}}, F32x2), "the format does not define"),
    (build({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8], "x": 1}}, F32x2), "malformed"),
    (build({"a": [1]}), "malformed"),
    (build({"__metadata__": {"k": 1}}), "strings to strings"),
    (struct.pack("<Q", 10) + b'{"a":1,"a":2}'[:10], "not valid JSON"),
    (build({"a": 1}, length=10**12), "more than the file's"),
    (struct.pack("<Q", 15) + b'{"a": {}, "a": {}}'[:15] + b"}", "not valid JSON|duplicates"),
    (struct.pack("<Q", 19) + b'{"a": {}, "a": {} }', "duplicates"),
])
def test_misleading_files_are_refused(blob, message):
    with pytest.raises(UnpicklingError, match=message):
        fnx.load(io.BytesIO(blob))


def test_header_padding_and_an_empty_file_of_tensors():
    blob = build({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, F32x2, pad=b"     ")
    assert fnx.load_safetensors(io.BytesIO(blob))["a"].tolist() == [1.0, 1.0]
    assert fnx.load_safetensors(io.BytesIO(to_bytes({}))) == {}


@pytest.mark.cuda
def test_loading_onto_cuda():
    blob = to_bytes({"w": fnx.arange(4.0)})
    out = fnx.load_safetensors(io.BytesIO(blob), device="cuda")
    assert out["w"].device == fnx.device("cuda:0") and out["w"].cpu().tolist() == [0.0, 1.0, 2.0, 3.0]
