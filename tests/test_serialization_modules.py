"""fnx.save of whole modules, numpy arrays, Python values and DLPack tensors; which classes fnx.load rebuilds."""
import io
import json
import sys
import zipfile

import numpy as np
import pytest

import fnx
import fnx.nn as nn
import fnx.nn.functional as F
from fnx.serialization import UnpicklingError, add_safe_globals, clear_safe_globals, load, safe_globals, save


def roundtrip(obj):
    buf = io.BytesIO()
    save(obj, buf)
    return load(io.BytesIO(buf.getvalue()))


def manifest_of(obj) -> dict:
    buf = io.BytesIO()
    save(obj, buf)
    return json.loads(zipfile.ZipFile(buf).read("manifest.json"))


def archive(obj, tensors=()) -> io.BytesIO:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("manifest.json", json.dumps({"format": "fnx", "version": 1, "tensors": list(tensors),
                                                 "object": obj}))
    buf.seek(0)
    return buf


class Block(nn.Module):  # a user's module: loading it needs permission
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.act = F.gelu
        self.scale = 0.5

    def forward(self, x):
        return self.act(self.proj(x)) * self.scale


def test_a_whole_fnx_model_round_trips_with_its_state_and_flags(tmp_path):
    model = nn.Sequential(nn.Linear(3, 4), nn.GELU(approximate="tanh"), nn.LayerNorm(4), nn.BatchNorm1d(4),
                          nn.Dropout(0.1))
    model(fnx.randn(8, 3))  # moves the batch-norm statistics
    model.eval()
    path = tmp_path / "model.pt"
    save(model, path)
    back = load(path)
    assert type(back) is nn.Sequential and [type(m) for m in back] == [type(m) for m in model]
    assert not back.training and not back[3].training and back[1].approximate == "tanh"
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in back.parameters())
    np.testing.assert_array_equal(back[3].running_mean.numpy(), model[3].running_mean.numpy())
    x = fnx.randn(5, 3)
    np.testing.assert_array_equal(back(x).detach().numpy(), model(x).detach().numpy())
    back.train()
    back(x).sum().backward()
    assert back[0].weight.grad is not None


def test_shared_parameters_and_submodules_stay_shared():
    emb, head = nn.Embedding(10, 4), nn.Linear(4, 10, bias=False)
    head.weight = emb.weight
    shared = nn.Linear(4, 4)
    model = nn.ModuleDict({"emb": emb, "head": head, "a": shared, "b": shared})
    back = roundtrip(model)
    assert back["head"].weight is back["emb"].weight and back["a"] is back["b"]
    assert len(list(back.parameters())) == 3
    assert manifest_of(model)["object"]["object"]["state"]["dict"]  # saved as an object, no pickle


def test_user_classes_need_permission_and_are_named():
    blob = io.BytesIO()
    save({"block": Block()}, blob)
    with pytest.raises(UnpicklingError, match=r"instance of [\w.]*Block, which is not allowed.*"
                                              r"add_safe_globals\(\[Block\]\)"):
        load(io.BytesIO(blob.getvalue()))
    with safe_globals([Block]):
        back = load(io.BytesIO(blob.getvalue()))["block"]
    assert type(back) is Block and back.act is F.gelu and back.scale == 0.5
    x = fnx.randn(2, 4)
    np.testing.assert_allclose(back(x).detach().numpy(), (F.gelu(back.proj(x)) * 0.5).detach().numpy())
    add_safe_globals([Block])
    try:
        assert type(load(io.BytesIO(blob.getvalue()))["block"]) is Block
    finally:
        clear_safe_globals()


def test_weights_only_false_trusts_the_file_as_torch_load_does():
    """pytorch/examples' word_language_model: `torch.save(model, f)`, then `torch.load(f, weights_only=False)`
    rebuilds the script's own class; a class of a module nobody imported is still not imported."""
    blob = io.BytesIO()
    save({"block": Block(), "fn": json.dumps}, blob)
    back = load(io.BytesIO(blob.getvalue()), weights_only=False)
    assert type(back["block"]) is Block and back["block"].act is F.gelu and back["fn"] is json.dumps
    with pytest.raises(UnpicklingError, match="not allowed"):
        load(io.BytesIO(blob.getvalue()), weights_only=True)
    before = set(sys.modules)
    with pytest.raises(UnpicklingError, match="fnx_not_imported_anywhere.Thing, which is not allowed"):
        load(archive(obj("fnx_not_imported_anywhere", "Thing")), weights_only=False)
    assert set(sys.modules) == before


def test_numpy_arrays_python_values_and_classes_by_name():
    arr = np.arange(6, dtype=np.int16).reshape(2, 3)
    obj = {"arr": arr, "again": arr, "c": np.array([1 + 2j], np.complex64), "f": np.float32(1.5),
           "b": np.array([True]), "big": np.arange(3, dtype=">f8"), "set": {1, "a"}, "fs": frozenset([2]),
           "z": complex(1, float("inf")), "bytes": b"\x00\xff", "cls": nn.Linear, "fn": F.relu, "top": fnx.tanh}
    back = roundtrip(obj)
    assert back["arr"].dtype == np.int16 and np.array_equal(back["arr"], arr) and back["again"] is back["arr"]
    assert back["c"].dtype == np.complex64 and back["c"][0] == 1 + 2j and back["f"] == 1.5
    assert back["big"].dtype == np.float64 and back["big"].tolist() == [0.0, 1.0, 2.0]
    assert back["set"] == {1, "a"} and back["fs"] == frozenset([2]) and back["z"] == complex(1, float("inf"))
    assert back["bytes"] == b"\x00\xff" and back["cls"] is nn.Linear and back["fn"] is F.relu
    assert back["top"] is fnx.tanh


class ForeignTensor:
    """A tensor of another library, as fnx sees it: DLPack, and torch's requires_grad/detach."""

    def __init__(self, arr, requires_grad=False):
        self.arr, self.requires_grad = arr, requires_grad

    def detach(self):
        return ForeignTensor(self.arr)

    def __dlpack__(self, **kwargs):
        if self.requires_grad:
            raise RuntimeError("can't export a tensor that requires grad")
        return self.arr.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.arr.__dlpack_device__()


def test_dlpack_tensors_of_other_libraries_are_saved_as_fnx_tensors():
    back = roundtrip({"w": ForeignTensor(np.ones((2, 2), np.float32), requires_grad=True),
                      "i": ForeignTensor(np.arange(3))})
    assert isinstance(back["w"], fnx.Tensor) and back["w"].requires_grad and back["w"].tolist() == [[1, 1], [1, 1]]
    assert back["i"].dtype is fnx.int64 and not back["i"].requires_grad


class Slotted:
    __slots__ = ("x",)

    def __new__(cls, x):
        return super().__new__(cls)


def test_an_allowed_class_that_cannot_be_rebuilt_is_refused():
    blob = archive({"object": {"class": {"module": Slotted.__module__, "name": "Slotted"}, "id": 0,
                               "state": {"dict": [["x", 1]]}}})
    with safe_globals([Slotted]), pytest.raises(UnpicklingError, match="could not rebuild a Slotted"):
        load(blob)


def test_what_cannot_be_saved_is_named():
    model = nn.Linear(2, 2)
    model.act = lambda x: x
    with pytest.raises(TypeError, match=r"obj.__dict__\['act'\] is .*lambda.*define it at a module's top level"):
        save(model, io.BytesIO())
    with pytest.raises(TypeError, match="numpy array of dtype object"):
        save(np.array([None]), io.BytesIO())
    with pytest.raises(TypeError, match="cannot save obj of type generator"):
        save((i for i in range(2)), io.BytesIO())
    loop = nn.Linear(2, 2)
    loop.me = loop
    with pytest.raises(ValueError, match="reference cycle"):
        save(loop, io.BytesIO())


def obj(module, name, state=None, oid=0):
    return {"object": {"class": {"module": module, "name": name}, "id": oid, "state": state or {"dict": []}}}


@pytest.mark.parametrize("value, message", [
    (obj("os", "system"), "instance of os.system, which is not allowed"),
    (obj("builtins", "eval"), "instance of builtins.eval, which is not allowed"),
    (obj("subprocess", "Popen"), "instance of subprocess.Popen"),
    (obj("fnx.serialization.fnx_format", "os.system"), "not allowed"),
    (obj("fnx.serialization.fnx_format", "_Decoder"), "fnx.serialization.fnx_format._Decoder, which is not allowed"),
    (obj("fnx.nn.layers.linear", "Linear.__class__"), "not allowed"),
    (obj("fnx_not_imported_anywhere", "Thing"), "not allowed"),
    ({"global": {"module": "os", "name": "system"}}, "refers to os.system, which is not allowed"),
    ({"global": {"module": "builtins", "name": "exec"}}, "refers to builtins.exec"),
    ({"global": {"module": "fnx.serialization.common", "name": "atomic_write"}}, "not allowed"),
    ({"global": {"module": "fnx.torch_alias", "name": "run_script"}}, "not allowed"),
    ({"global": {"module": "fnx.nn.functional", "name": "os"}}, "not allowed"),
    ({"global": {"module": "fnx", "name": "__builtins__"}}, "not allowed"),
    ({"global": "os.system"}, "malformed class or function name"),
    (obj("fnx.nn.layers.linear", "Linear", {"dict": [[1, 2]]}), "attributes of a Linear are malformed"),
    (obj("fnx.nn.layers.linear", "Linear", oid=3), "malformed object id"),
    (obj("fnx.nn.layers.linear", "Linear", {"dict": [["me", {"ref": 0}]]}), "malformed 'ref'"),
    ({"ref": 0}, "malformed 'ref'"),
    ({"ndarray": {"data": "data/0.npy", "dtype": "|O", "shape": [1]}}, "malformed 'ndarray'"),
    ({"ndarray": {"data": "../x.npy", "dtype": "<f4", "shape": [1]}}, "invalid data file"),
    ({"bytes": "zz"}, "malformed 'bytes'"),
    ({"set": [[1]]}, "malformed 'set'"),
    ({"complex": ["a", 1]}, "malformed 'complex'"),
])
def test_hostile_manifests_are_refused_without_importing_or_calling(value, message):
    load(archive(1))   # the archive reader's own lazy imports (zipfile's cp437 codec) happen here, not below
    before = set(sys.modules)
    with pytest.raises(UnpicklingError, match=message):
        load(archive(value))
    assert set(sys.modules) == before
