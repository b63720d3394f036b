"""fnx.load of PyTorch checkpoints (torch.save's zip format), built here by hand, and refusal of hostile pickles.

The files are written as torch.save writes them (a zip of <name>/data.pkl, <name>/data/<key>, byteorder,
version), with the pickle made by Python's own pickler and a few hand-made opcodes; torch is never imported.
"""
import io
import os
import pickle
import re
import struct
import zipfile
from collections import OrderedDict

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, strategies as st

import fnx
from fnx.serialization import UnpicklingError, add_safe_globals, clear_safe_globals, load, safe_globals
from test_serialization import PWNED, no_pwn  # noqa: F401  (no_pwn: a fixture; the sentinel file it checks)


# ---------------------------------------------------------------- writing torch-format files without torch
class Global:
    """Pickles as the GLOBAL opcode naming `path` (a torch name need not exist here)."""

    def __init__(self, path):
        self.module, self.name = path.rsplit(".", 1)

    def __call__(self, *args):
        raise AssertionError("only pickled")


class Call:
    """Pickles as REDUCE: `func(*args)`."""

    def __init__(self, func, *args):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


class Storage:
    """A storage: pickled as the persistent id ('storage', torch.<Type>Storage, key, location, numel)."""

    def __init__(self, key, data: np.ndarray, storage_type, location="cpu", numel=None):
        self.key, self.data, self.type, self.location = str(key), data, storage_type, location
        self.numel = data.size if numel is None else numel

    def pid(self):
        return ("storage", Global(f"torch.{self.type}"), self.key, self.location, self.numel)


class TorchPickler(pickle._Pickler):
    dispatch = dict(pickle._Pickler.dispatch)

    def save_marker(self, obj):
        self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())

    dispatch[Global] = save_marker

    def persistent_id(self, obj):
        return obj.pid() if isinstance(obj, Storage) else None


def tensor(storage, offset, size, stride, requires_grad=False, *, hooks=None):
    return Call(Global("torch._utils._rebuild_tensor_v2"), storage, offset, tuple(size), tuple(stride),
                requires_grad, OrderedDict() if hooks is None else hooks)


def collect_storages(obj, found):
    if isinstance(obj, Storage):
        found[obj.key] = obj
    elif isinstance(obj, Call):
        collect_storages(obj.args, found)
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            collect_storages(x, found)
    elif isinstance(obj, dict):
        for x in obj.values():
            collect_storages(x, found)
    return found


def torch_file(obj=None, *, pkl=None, name="archive", storages=None, extra=None, byteorder="little"):
    """The bytes of a torch.save zip file holding `obj` (or the raw pickle `pkl`)."""
    if pkl is None:
        buf = io.BytesIO()
        TorchPickler(buf, protocol=2).dump(obj)
        pkl = buf.getvalue()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        zf.writestr(f"{name}/data.pkl", pkl)
        zf.writestr(f"{name}/byteorder", byteorder)
        for key, s in (storages if storages is not None else collect_storages(obj, {})).items():
            data = s.data.astype(s.data.dtype.newbyteorder(">")) if byteorder == "big" else s.data
            zf.writestr(f"{name}/data/{key}", data.tobytes())
        for entry, payload in (extra or {}).items():
            zf.writestr(entry, payload)
        zf.writestr(f"{name}/version", "3\n")
    return out.getvalue()


def load_bytes(blob, **kw):
    return load(io.BytesIO(blob), **kw)


# ---------------------------------------------------------------- what loads
def test_a_state_dict_loads_as_fnx_tensors_into_a_model():
    w = np.arange(12, dtype=np.float32).reshape(4, 3)
    b = np.array([0.5, -1, 2, 3], np.float32)
    sw, sb = Storage(0, w.ravel(), "FloatStorage"), Storage(1, b, "FloatStorage")
    sd = OrderedDict([("weight", tensor(sw, 0, (4, 3), (3, 1))), ("bias", tensor(sb, 0, (4,), (1,)))])
    loaded = load_bytes(torch_file(sd))
    assert type(loaded) is OrderedDict and list(loaded) == ["weight", "bias"]
    assert all(type(t) is fnx.Tensor for t in loaded.values())
    np.testing.assert_array_equal(loaded["weight"].numpy(), w)
    model = fnx.nn.Linear(3, 4)
    model.load_state_dict(loaded)
    np.testing.assert_array_equal(model(fnx.ones(1, 3)).detach().numpy(), (w.sum(1) + b)[None])


def test_views_keep_their_offsets_strides_and_shared_storage():
    data = np.arange(24, dtype=np.float32)
    s = Storage(0, data, "FloatStorage")
    obj = {"x": tensor(s, 0, (4, 6), (6, 1)), "xt": tensor(s, 0, (6, 4), (1, 6)), "row": tensor(s, 6, (6,), (1,)),
           "col": tensor(s, 2, (4,), (6,)), "sl": tensor(s, 6, (2, 3), (6, 2)), "bcast": tensor(s, 5, (3, 2), (0, 1)),
           "scalar": tensor(s, 23, (), ()), "empty": tensor(s, 24, (0, 3), (3, 1))}
    out = load_bytes(torch_file(obj))
    x = data.reshape(4, 6)
    np.testing.assert_array_equal(out["xt"].numpy(), x.T)
    np.testing.assert_array_equal(out["row"].numpy(), x[1])
    np.testing.assert_array_equal(out["col"].numpy(), x[:, 2])
    np.testing.assert_array_equal(out["sl"].numpy(), x[1:3, ::2])
    np.testing.assert_array_equal(out["bcast"].numpy(), [[5, 6]] * 3)
    assert out["scalar"].shape == () and out["scalar"].item() == 23.0 and out["empty"].shape == (0, 3)
    out["x"][1, 2] = -1.0  # one storage: a write through one tensor shows through every view of it
    assert out["xt"][2, 1].item() == -1.0 and out["row"][2].item() == -1.0 and out["col"][1].item() == -1.0


@pytest.mark.parametrize("storage_type, np_dtype, fnx_dtype", [
    ("FloatStorage", np.float32, fnx.float32), ("DoubleStorage", np.float64, fnx.float64),
    ("HalfStorage", np.float16, fnx.float16), ("BFloat16Storage", ml_dtypes.bfloat16, fnx.bfloat16),
    ("LongStorage", np.int64, fnx.int64), ("IntStorage", np.int32, fnx.int32), ("ShortStorage", np.int16, fnx.int16),
    ("CharStorage", np.int8, fnx.int8), ("ByteStorage", np.uint8, fnx.uint8), ("BoolStorage", np.bool_, fnx.bool),
    ("ComplexFloatStorage", np.complex64, fnx.complex64), ("ComplexDoubleStorage", np.complex128, fnx.complex128),
])
@pytest.mark.parametrize("byteorder", ["little", "big"])
def test_every_storage_type_and_byte_order(storage_type, np_dtype, fnx_dtype, byteorder):
    values = np.array([0, 1, 1, 0, 3, 2], dtype=np.float64).astype(np_dtype)
    out = load_bytes(torch_file({"t": tensor(Storage(0, values, storage_type), 1, (2, 2), (1, 2))},
                                byteorder=byteorder))["t"]
    assert out.dtype is fnx_dtype
    np.testing.assert_array_equal(out.numpy(), np.lib.stride_tricks.as_strided(values[1:], (2, 2),
                                                                               (values.itemsize, 2 * values.itemsize)))


def test_untyped_storages_with_rebuild_tensor_v3_and_dtype_globals():
    raw = np.array([1.5, -2.0], np.float32).view(np.uint8)
    s = Storage(0, raw, "UntypedStorage")
    obj = [Call(Global("torch._utils._rebuild_tensor_v3"), s, 0, (2,), (1,), False, OrderedDict(),
                Global("torch.float32")),
           Call(Global("torch._utils._rebuild_tensor_v3"), s, 0, (4,), (1,), False, OrderedDict(),
                Global("torch.bfloat16")),
           Global("torch.float16")]
    f32, bf16, dt = load_bytes(torch_file(obj))
    assert f32.tolist() == [1.5, -2.0] and bf16.dtype is fnx.bfloat16 and dt is fnx.float16
    np.testing.assert_array_equal(bf16.numpy().view(np.uint16), raw.view(np.uint16))


def test_parameters_requires_grad_sizes_devices_and_plain_values():
    s = Storage(0, np.ones(3, np.float32), "FloatStorage")
    obj = {"p": Call(Global("torch._utils._rebuild_parameter"), tensor(s, 0, (3,), (1,)), True, OrderedDict()),
           "frozen": Call(Global("torch._utils._rebuild_parameter"), tensor(s, 0, (3,), (1,)), False, OrderedDict()),
           "rg": tensor(s, 0, (2,), (1,), True),
           "typed": Call(Global("torch._tensor._rebuild_from_type_v2"), Global("torch._utils._rebuild_tensor_v2"),
                         Global("torch.Tensor"), (s, 0, (1,), (1,), False, OrderedDict()), {}),
           "size": Call(Global("torch.Size"), (2, 3)), "dev": Call(Global("torch.device"), "cpu"),
           "plain": [1, 2.5, "s", (None, True), b"\x00\xff", {1, 2}, 3 + 4j, bytearray(b"ab")], "epoch": 7}
    out = load_bytes(torch_file(obj))
    assert isinstance(out["p"], fnx.nn.Parameter) and out["p"].requires_grad
    assert isinstance(out["frozen"], fnx.nn.Parameter) and not out["frozen"].requires_grad
    assert out["rg"].requires_grad and out["rg"].is_leaf and out["typed"].tolist() == [1.0]
    assert out["size"] == fnx.Size([2, 3]) and isinstance(out["size"], fnx.Size) and out["dev"] == fnx.device("cpu")
    assert out["plain"] == [1, 2.5, "s", (None, True), b"\x00\xff", {1, 2}, 3 + 4j, bytearray(b"ab")]
    assert out["epoch"] == 7


def test_a_state_dicts_metadata_attribute_is_kept():
    class StateDict(OrderedDict):  # pickles as torch's: OrderedDict, then BUILD of its _metadata attribute
        def __reduce__(self):
            return OrderedDict, (), {"_metadata": {"": {"version": 1}}}, None, iter(self.items())

    sd = StateDict(w=tensor(Storage(0, np.zeros(1, np.float32), "FloatStorage"), 0, (1,), (1,)))
    out = load_bytes(torch_file(sd))
    assert type(out) is OrderedDict and out._metadata == {"": {"version": 1}} and out["w"].tolist() == [0.0]


def test_legacy_bin_name_and_map_location(tmp_path):
    path = tmp_path / "pytorch_model.bin"
    path.write_bytes(torch_file({"w": tensor(Storage(0, np.ones(2, np.float32), "FloatStorage", location="cuda:0"),
                                             0, (2,), (1,))}, name="pytorch_model"))
    assert load(path, map_location="cpu")["w"].device == fnx.device("cpu")
    seen = []
    out = load(path, map_location=lambda t, location: seen.append(location) or t)
    assert seen == ["cuda:0"] and out["w"].tolist() == [1.0, 1.0]
    if not fnx.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA is not available here; pass map_location='cpu'"):
            load(path)


def test_allowed_user_classes_are_rebuilt_and_others_named():
    blob = torch_file({"cfg": Config(3)})
    with pytest.raises(UnpicklingError, match=r"global [\w.]*Config, which is not allowed.*"
                                              r"add_safe_globals\(\[Config\]\)"):
        load_bytes(blob)
    with safe_globals([Config]):
        assert load_bytes(blob)["cfg"].width == 3
    with pytest.raises(UnpicklingError, match="not allowed"):
        load_bytes(blob)  # the context manager restored the list
    add_safe_globals([Config])
    try:
        assert fnx.serialization.get_safe_globals() == [Config] and load_bytes(blob)["cfg"].width == 3
    finally:
        clear_safe_globals()
    assert fnx.serialization.get_safe_globals() == []


class Config:
    def __init__(self, width):
        self.width = width


# ---------------------------------------------------------------- hostile and damaged files
class RunsCommand:
    def __init__(self, func, *args):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


def touch_command():
    return f"touch {PWNED}"


def protocol0(text: str) -> bytes:
    return text.encode()


HOSTILE = [
    ("GLOBAL os.system", pickle.dumps(RunsCommand(os.system, touch_command()), protocol=2), "global posix.system"),
    ("GLOBAL os.system, protocol 0", protocol0(f"cos\nsystem\n(S'{touch_command()}'\ntR."), "global os.system"),
    ("STACK_GLOBAL builtins.eval", pickle.dumps(RunsCommand(eval, f"__import__('os').system('{touch_command()}')"),
                                                protocol=4), "global builtins.eval"),
    ("STACK_GLOBAL builtins.exec", pickle.dumps(RunsCommand(exec, f"import os; os.system('{touch_command()}')"),
                                                protocol=4), "global builtins.exec"),
    ("subprocess", protocol0(f"csubprocess\ncheck_call\n((S'touch'\nS'{PWNED}'\nltR."), "global subprocess.check_call"),
    ("getattr chain", protocol0("cbuiltins\ngetattr\n(cbuiltins\n__import__\n(S'os'\ntRS'system'\ntR"
                                f"(S'{touch_command()}'\ntR."),
     "global builtins.getattr"),
    ("torch-looking path", protocol0(f"ctorch._utils\nos.system\n(S'{touch_command()}'\ntR."),
     "PyTorch's torch._utils.os.system"),
    ("a whole torch model", protocol0("ctorch.nn.modules.container\nSequential\n)\x81."), "save model.state_dict()"),
    ("REDUCE on a dtype", protocol0("ctorch\nfloat32\n(S'x'\ntR."), "calls fnx.float32"),
    ("REDUCE on a storage type", protocol0("ctorch\nFloatStorage\n(I3\ntR."), "calls torch.FloatStorage"),
    ("REDUCE with non-tuple args", protocol0("ccollections\nOrderedDict\n(lR."), "malformed arguments"),
    ("INST of an allowed class", protocol0("(icollections\nOrderedDict\n."),
     "INST, OBJ"),
    ("INST os.system", protocol0(f"(S'{touch_command()}'\nios\nsystem\n."), "INST, OBJ"),
    ("OBJ of an allowed class", protocol0("(ccollections\nOrderedDict\no."), "INST, OBJ"),
    ("EXT1", b"\x80\x02\x82\x01.", "INST, OBJ or the copyreg extension registry"),
    ("BUILD on a dtype", protocol0("ctorch\nfloat32\n(dS'name'\nS'evil'\nsb."), "sets the state of a dtype"),
    ("BUILD slots on a dtype", protocol0("ctorch\nfloat32\n(N(dS'name'\nS'evil'\nstb."), "sets the state of a dtype"),
    ("BUILD on a list", protocol0("(l(dS'x'\nI1\nsb."), "sets the state of a list"),
    ("BUILD on an OrderedDict with odd keys", protocol0("ccollections\nOrderedDict\n)R(dI1\nI1\nsb."),
     "malformed attributes"),
    ("NEWOBJ of a function", b"\x80\x02ctorch\nSize\n)\x81.", "creates an object of"),
    ("NEWOBJ_EX", b"\x80\x04ccollections\nOrderedDict\n)}\x92.", "creates an object of"),
    ("_codecs.encode abuse", protocol0("c_codecs\nencode\n(S'x'\nS'rot13'\ntR."), "is not how a pickle spells bytes"),
    ("persistent id not a storage", protocol0("(S'module'\nS'os'\ntQ."), "unknown persistent id"),
    ("persistent id with a string type", protocol0("(S'storage'\nS'FloatStorage'\nS'0'\nS'cpu'\nI1\ntQ."),
     "not a storage type"),
    ("persistent id outside the archive", protocol0("(S'storage'\nctorch\nFloatStorage\nS'../../etc/passwd'\n"
                                                    "S'cpu'\nI1\ntQ."), "malformed key"),
    ("persistent id to a missing storage", protocol0("(S'storage'\nctorch\nFloatStorage\nS'9'\nS'cpu'\nI1\ntQ."),
     "not in the archive"),
    ("persistent id to another entry", protocol0("(S'storage'\nctorch\nFloatStorage\nS'version'\nS'cpu'\nI1\ntQ."),
     "not in the archive"),
    ("truncated string", b"\x80\x02X\xff\xff\xff\x7fabc", "damaged"),
    ("garbage", b"\x80\x02\xfe\xfe", "damaged"),
]


@pytest.mark.parametrize("what, pkl, message", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_pickles_are_refused_without_running_anything(what, pkl, message, no_pwn):
    with pytest.raises(UnpicklingError, match=re.escape(message)):
        load_bytes(torch_file(pkl=pkl, storages={}))
    assert fnx.float32.name == "float32"


def test_hostile_globals_are_named_not_imported(no_pwn):
    pkl = protocol0("cnot_a_module_fnx_would_import\nanything\n.")
    with pytest.raises(UnpicklingError, match="global not_a_module_fnx_would_import.anything"):
        load_bytes(torch_file(pkl=pkl, storages={}))
    assert "not_a_module_fnx_would_import" not in __import__("sys").modules


@given(st.integers(0, 12), st.lists(st.tuples(st.integers(0, 4), st.integers(0, 5)), max_size=3), st.integers(0, 8))
def test_any_view_inside_its_storage_loads_and_any_other_is_refused(n, dims, offset):
    data = np.arange(n, dtype=np.float32)
    size, stride = tuple(d for d, _ in dims), tuple(s for _, s in dims)
    blob = torch_file({"t": tensor(Storage(0, data, "FloatStorage"), offset, size, stride)})
    reach = offset + sum((d - 1) * s for d, s in dims) + 1 if all(d > 0 for d in size) else offset
    if reach > n:
        with pytest.raises(UnpicklingError, match="reaches element"):
            load_bytes(blob)
    else:
        expected = np.lib.stride_tricks.as_strided(data[offset:], size, tuple(4 * s for s in stride))
        np.testing.assert_array_equal(load_bytes(blob)["t"].numpy(), expected)


@pytest.mark.cuda
def test_map_location_cuda_keeps_views_sharing_one_device_storage():
    s = Storage(0, np.arange(6, dtype=np.float32), "FloatStorage")
    out = load_bytes(torch_file({"x": tensor(s, 0, (2, 3), (3, 1)), "col": tensor(s, 1, (2,), (3,))}),
                     map_location="cuda:0")
    assert out["x"].device == fnx.device("cuda:0") and out["col"].cpu().tolist() == [1.0, 4.0]
    out["x"][1, 1] = -1.0
    assert out["col"].cpu().tolist() == [1.0, -1.0]


@pytest.mark.parametrize("offset, size, stride, message", [
    (0, (5,), (1,), "reaches element 4 of storage '0', which holds 4"),
    (3, (2,), (1,), "reaches element 4"),
    (0, (2, 2), (2, 2), "reaches element 4"),
    (5, (0,), (1,), "reaches element 4"),
    (-1, (1,), (1,), "malformed offset"),
    (0, (2,), (-1,), "stride is malformed"),
    (0, (2, 2), (1,), "malformed offset"),
    (0, (2.0,), (1,), "size is malformed"),
    (True, (1,), (1,), "malformed offset"),
])
def test_tensors_reaching_outside_their_storage_are_refused(offset, size, stride, message):
    s = Storage(0, np.zeros(4, np.float32), "FloatStorage")
    with pytest.raises(UnpicklingError, match=message):
        load_bytes(torch_file({"t": Call(Global("torch._utils._rebuild_tensor_v2"), s, offset, size, stride, False,
                                         OrderedDict())}))


@pytest.mark.parametrize("numel, payload, message", [
    (100, np.zeros(2, np.float32), "declares 100 elements of float32 \\(400 bytes\\), but its entry holds 8"),
    (1, np.zeros(2, np.float32), "declares 1 elements"),
    (-1, np.zeros(2, np.float32), "malformed size"),
])
def test_storages_whose_size_lies_are_refused(numel, payload, message):
    s = Storage(0, payload, "FloatStorage", numel=numel)
    with pytest.raises(UnpicklingError, match=message):
        load_bytes(torch_file({"t": tensor(s, 0, (1,), (1,))}))


def test_odd_tensor_arguments_are_refused():
    s = Storage(0, np.zeros(2, np.float32), "FloatStorage")
    cases = [
        (Call(Global("torch._utils._rebuild_tensor_v2"), "not a storage", 0, (1,), (1,), False, OrderedDict()),
         "not from a storage"),
        (tensor(Storage(0, np.zeros(1, np.int64), "LongStorage"), 0, (1,), (1,), True), "cannot require grad"),
        (tensor(s, 0, (1,), (1,), "yes"), "malformed requires_grad"),
        (Call(Global("torch._utils._rebuild_tensor_v2"), s, 0, (1,), (1,), False, OrderedDict(), {"conj": True}),
         "conjugate or negative bits"),
        (Call(Global("torch._utils._rebuild_parameter"), "data", True, OrderedDict()), "not from a tensor"),
        (Call(Global("torch._tensor._rebuild_from_type_v2"), Global("torch._utils._rebuild_tensor_v2"),
              Global("torch.Tensor"), (s, 0, (1,), (1,), False, OrderedDict()), {"attr": 1}), "no tensor subclasses"),
        (Call(Global("torch._tensor._rebuild_from_type_v2"), Global("torch.Size"), Global("torch.Tensor"), ((1,),),
              None), "no tensor subclasses"),
        (Call(Global("torch._utils._rebuild_qtensor"), 1), "quantized, sparse"),
        (Call(Global("torch.device"), "tpu"), "unknown device"),
        (Global("torch.uint16"), "dtype torch.uint16, which fnx does not have"),
        (Call(Global("torch._utils._rebuild_tensor_v2"), s, 0, (1,)), "damaged"),
    ]
    for obj, message in cases:
        with pytest.raises(UnpicklingError, match=message):
            load_bytes(torch_file({"t": obj}, storages={"0": s}))


@pytest.mark.parametrize("entry", ["../evil", "/abs/evil", "archive/../../evil", "archive/data/..", "c:evil"])
def test_archive_entries_with_unsafe_names_are_refused(entry, tmp_path):
    blob = torch_file({"a": 1}, extra={entry: b"x"})
    with pytest.raises(UnpicklingError, match="unsafe name"):
        load_bytes(blob)
    assert not (tmp_path / "evil").exists()


def test_archives_that_do_not_look_like_torch_save_are_refused():
    with pytest.raises(UnpicklingError, match="also holds"):
        load_bytes(torch_file({"a": 1}, extra={"other/file": b"x"}))
    with pytest.raises(UnpicklingError, match="holds one data.pkl"):
        load_bytes(torch_file({"a": 1}, extra={"archive2/data.pkl": pickle.dumps(1)}))
    with pytest.raises(UnpicklingError, match="neither 'little' nor 'big'"):
        load_bytes(torch_file({"a": 1}, byteorder="middle"))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("archive/data.pkl", pickle.dumps({"a": 1}, protocol=2))
    with pytest.raises(UnpicklingError, match="compressed"):
        load_bytes(buf.getvalue())


def test_legacy_and_plain_pickles_are_refused_unread(no_pwn):
    legacy = pickle.dumps(0x1950A86A20F9469CFC6C, protocol=2) + pickle.dumps(RunsCommand(os.system, touch_command()))
    with pytest.raises(NotImplementedError, match="legacy format of torch < 1.6"):
        load_bytes(legacy)
    with pytest.raises(UnpicklingError, match="plain pickle file"):
        load_bytes(pickle.dumps(RunsCommand(os.system, touch_command())))


def test_a_real_checkpoint_layout_with_torchs_extra_entries_loads():
    s = Storage(0, np.arange(4, dtype=np.float32), "FloatStorage")
    blob = torch_file({"w": tensor(s, 0, (2, 2), (2, 1))}, name="model",
                      extra={"model/.format_version": b"1", "model/.storage_alignment": b"64",
                             "model/.data/serialization_id": b"1234"})
    assert load_bytes(blob)["w"].tolist() == [[0.0, 1.0], [2.0, 3.0]]
    assert struct.unpack("<I", blob[:4])[0] == 0x04034B50
