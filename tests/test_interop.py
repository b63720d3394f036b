"""Interop with the Python ecosystem: f-string formatting as PyTorch, einops on fnx tensors, bfloat16 over DLPack."""
import ctypes
import os
import subprocess
import sys
import textwrap

import einops
import ml_dtypes
import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import fnx
import fnx.utils.dlpack
from fnx.utils.tensorboard import SummaryWriter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---------------------------------------------------------------- formatting
@pytest.mark.parametrize("value, dtype, spec, expected", [
    (1.25, fnx.float32, "", "1.25"), (1.23456, fnx.float32, ".3f", "1.235"), (2.0, fnx.float64, "8.2e", "2.00e+00"),
    (3, fnx.int64, "04d", "0003"), (3, fnx.int64, "", "3"), (True, fnx.bool, "", "True"),
    (0.5, fnx.float16, ".1%", "50.0%"), (1.5, fnx.bfloat16, ".2f", "1.50"),
])
def test_a_0_dim_tensor_formats_as_its_value(value, dtype, spec, expected):
    assert format(fnx.tensor(value, dtype=dtype), spec) == expected


def test_other_tensors_format_as_their_repr_and_refuse_a_spec():
    t = fnx.tensor([1.5, 2.0])
    assert f"{t}" == repr(t) == "tensor([1.5000, 2.0000])" and f"{fnx.tensor([3.0])}" == "tensor([3.])"
    loss = fnx.tensor(0.25, requires_grad=True) * 2
    assert f"loss {loss:.3f}" == "loss 0.500" and repr(loss).startswith("tensor(0.5000, grad_fn=")
    for tensor in (t, fnx.tensor([3.0]), fnx.nn.Parameter(fnx.tensor(1.0))):
        with pytest.raises(TypeError, match="unsupported format string passed to"):
            format(tensor, ".2f")
    assert f"{fnx.nn.Parameter(fnx.tensor(1.0))}".startswith("Parameter containing:")


# ---------------------------------------------------------------- einops
def test_einops_functions_accept_fnx_tensors():
    x = fnx.arange(24.0).reshape(2, 3, 4)
    ref = np.arange(24.0).reshape(2, 3, 4)
    out = einops.rearrange(x, "b c (h w) -> b (c h) w", w=2)
    assert type(out) is fnx.Tensor
    np.testing.assert_array_equal(out.numpy(), ref.reshape(2, 3, 2, 2).reshape(2, 6, 2))
    np.testing.assert_array_equal(einops.reduce(x, "b c h -> b h", "mean").numpy(), ref.mean(1))
    np.testing.assert_array_equal(einops.reduce(x, "b c h -> c", "max").numpy(), ref.max((0, 2)))
    np.testing.assert_allclose(einops.reduce(x, "b c h -> b", "prod").numpy(), ref.prod((1, 2)), rtol=1e-6)
    np.testing.assert_array_equal(einops.reduce(x > 10, "b c h -> b", "any").numpy(), [True, True])
    np.testing.assert_array_equal(einops.repeat(x, "b c h -> b c h r", r=2).numpy(), np.repeat(ref[..., None], 2, 3))
    np.testing.assert_array_equal(einops.repeat(x[0], "c h -> n c h", n=3).numpy(), np.stack([ref[0]] * 3))
    np.testing.assert_allclose(einops.einsum(x, x, "b c h, b c h -> b").numpy(), (ref * ref).sum((1, 2)))
    packed, shapes = einops.pack([x, x[:, :1]], "b * h")
    assert packed.shape == (2, 4, 4) and [s for s in shapes] == [(3,), (1,)]


def test_einops_under_grad_vmap_and_compile():
    x = fnx.randn(2, 3, 4, requires_grad=True)
    einops.reduce(einops.rearrange(x, "b c h -> h b c") ** 2, "h b c -> ", "sum").backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.detach().numpy(), rtol=1e-6)

    def f(t):
        return einops.reduce(einops.rearrange(t, "c (h w) -> h w c", w=2), "h w c -> w", "max")

    y = fnx.randn(5, 3, 4)
    expected = np.stack([f(row).numpy() for row in y])
    np.testing.assert_allclose(fnx.vmap(f)(y).numpy(), expected)
    np.testing.assert_allclose(fnx.compile(fnx.vmap(f))(y).numpy(), expected)


def test_einops_found_either_import_order_and_its_torch_layers_and_tensorboard_under_the_alias():
    script = textwrap.dedent("""
        import einops                      # einops first: fnx registers its backend when imported
        import fnx
        x = fnx.ones(2, 3)
        assert einops.rearrange(x, "a b -> b a").shape == (3, 2)
        fnx.install_torch_alias()
        import torch
        from einops.layers.torch import Rearrange, Reduce
        model = torch.nn.Sequential(Rearrange("b c h -> b (c h)"), torch.nn.Linear(12, 5), Reduce("b f -> b", "max"))
        assert isinstance(model[0], fnx.nn.Module)
        out = model(torch.randn(2, 3, 4))
        out.sum().backward()
        assert out.shape == (2,) and model[1].weight.grad is not None
        from torch.utils.tensorboard import SummaryWriter
        assert SummaryWriter is fnx.utils.tensorboard.SummaryWriter
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": ROOT})
    assert done.stdout.strip() == "ok", done.stderr


def test_einops_layers_without_the_alias_say_what_to_do():
    with pytest.raises(NotImplementedError, match="torch alias"):
        einops._backends.get_backend(fnx.ones(1)).layers()


# ---------------------------------------------------------------- bfloat16 over DLPack
_get_name = ctypes.pythonapi.PyCapsule_GetName
_get_name.restype, _get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype, _get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]


def dtype_bytes(capsule):
    """The (code, bits, lanes) bytes of a capsule's DLTensor dtype (DLPack's struct layout)."""
    name = _get_name(capsule)
    at = _get_pointer(capsule, name) + 20 + (32 if name == b"dltensor_versioned" else 0)
    return (ctypes.c_uint8 * 4).from_address(at)


class Bfloat16Producer:
    """A library that exports bfloat16: its data is a uint16 buffer, its capsule says bfloat16 (code 4)."""

    def __init__(self, bits: np.ndarray):
        self.bits = bits

    def __dlpack__(self, **kwargs):
        capsule = self.bits.__dlpack__(**kwargs)
        dtype_bytes(capsule)[0] = 4
        return capsule

    def __dlpack_device__(self):
        return self.bits.__dlpack_device__()


def test_a_bfloat16_producer_is_imported_sharing_memory():
    values = np.array([[1.5, -2.0, 3.25], [0.0, 1e3, -1e-3]], ml_dtypes.bfloat16)
    bits = values.view(np.uint16).copy()
    t = fnx.from_dlpack(Bfloat16Producer(bits))
    assert t.dtype is fnx.bfloat16 and t.shape == (2, 3)
    np.testing.assert_array_equal(t.numpy().view(np.uint16), bits)
    bits[0, 0] = np.array(7.0, ml_dtypes.bfloat16).view(np.uint16)
    assert t[0, 0].item() == 7.0
    strided = fnx.from_dlpack(Bfloat16Producer(bits[:, ::2]))
    np.testing.assert_array_equal(strided.numpy().view(np.uint16), bits[:, ::2])
    assert fnx.utils.dlpack.from_dlpack(Bfloat16Producer(bits).__dlpack__()).tolist()[0] == [7.0, -2.0, 3.25]


def test_a_bfloat16_tensor_exports_as_bfloat16():
    t = fnx.tensor([1.5, -2.0, 65280.0], dtype=fnx.bfloat16)
    for capsule in (t.__dlpack__(), t.__dlpack__(max_version=(1, 0)), fnx.utils.dlpack.to_dlpack(t)):
        assert list(dtype_bytes(capsule)) == [4, 16, 1, 0]
    again = fnx.from_dlpack(t)
    assert again.dtype is fnx.bfloat16 and again.tolist() == [1.5, -2.0, 65280.0]
    again[0] = 4.0
    assert t[0].item() == 4.0  # the same memory


def test_other_dtypes_cross_dlpack_unchanged():
    for arr in (np.arange(6, dtype=np.int32).reshape(2, 3), np.ones(3, np.float16), np.array([True, False])):
        t = fnx.from_dlpack(arr)
        assert t.dtype is fnx.dtypes.from_numpy_dtype(arr.dtype)
        np.testing.assert_array_equal(np.from_dlpack(t), arr)


# ---------------------------------------------------------------- TensorBoard
def events(folder):
    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0, "histograms": 0, "tensors": 0})
    acc.Reload()
    return acc


def test_summary_writer_logs_what_tensorboard_reads(tmp_path):
    with SummaryWriter(tmp_path / "run") as writer:
        assert (tmp_path / "run").is_dir() and writer.get_logdir() == str(tmp_path / "run")
        for step, value in enumerate([fnx.tensor(0.5), np.float32(0.25), 0.125, fnx.tensor([2.0])]):
            writer.add_scalar("loss/train", value, step)
        writer.add_scalar("precise", fnx.tensor(1 / 3, dtype=fnx.float64), 0, new_style=True, double_precision=True)
        writer.add_scalars("lr", {"head": fnx.tensor(0.1), "body": 0.01}, 5)
        writer.add_histogram("weights", fnx.tensor([-1.0, 0.0, 0.0, 2.5]), 1)
        writer.add_histogram("ints", np.arange(10), 2, bins=3)
        writer.add_text("notes", "**bold** text", 3)
        writer.flush()
    run = events(tmp_path / "run")
    assert [(e.step, e.value) for e in run.Scalars("loss/train")] == [(0, 0.5), (1, 0.25), (2, 0.125), (3, 2.0)]
    assert run.Tensors("precise")[0].tensor_proto.double_val == [1 / 3]
    histo = run.Histograms("weights")[0].histogram_value
    assert (histo.min, histo.max, histo.num, histo.sum, histo.sum_squares) == (-1.0, 2.5, 4, 1.5, 7.25)
    assert sum(histo.bucket) == 4 and histo.bucket[0] == 0 and list(histo.bucket_limit) == sorted(histo.bucket_limit)
    ints = run.Histograms("ints")[0].histogram_value
    assert list(ints.bucket) == [0, 3, 3, 4] and list(ints.bucket_limit) == [0.0, 3.0, 6.0, 9.0]
    assert run.Tensors("notes/text_summary")[0].tensor_proto.string_val == [b"**bold** text"]
    for name, value in (("lr_head", 0.1), ("lr_body", 0.01)):
        scalars = events(tmp_path / "run" / name).Scalars("lr")
        assert [(e.step, round(e.value, 6)) for e in scalars] == [(5, value)]


def test_summary_writer_defaults_and_errors(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    writer = SummaryWriter(comment="_exp")
    assert writer.get_logdir().startswith("runs" + os.sep) and writer.get_logdir().endswith("_exp")
    with pytest.raises(ValueError, match="must hold one value, got shape \\[2\\]"):
        writer.add_scalar("x", fnx.ones(2))
    with pytest.raises(ValueError, match="values are empty"):
        writer.add_histogram("x", fnx.ones(0))
    with pytest.raises(NotImplementedError, match="SummaryWriter.add_image is not implemented in fnx"):
        writer.add_image("x", fnx.ones(3, 2, 2))
    writer.close()
    writer.add_scalar("after", 1.0, 0)  # a closed writer opens a new event file, as PyTorch's does
    writer.close()
    assert len(os.listdir(writer.get_logdir())) == 2


def test_without_tensorboard_the_error_says_what_to_install():
    script = "import sys; sys.modules['tensorboard'] = None\nimport fnx.utils.tensorboard"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": ROOT})
    assert "ImportError: fnx.utils.tensorboard writes through the `tensorboard` package" in done.stderr
    assert "pip install tensorboard" in done.stderr
