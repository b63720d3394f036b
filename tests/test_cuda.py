"""CUDA against CPU: every op of the table (values and gradients), device transfers and mixed-device errors.

Every test here is marked `cuda` and skips unless CuPy sees a GPU (tests/conftest.py). An op whose table entry
sets `extra={"cuda": False}` (random sampling, say) is left out of the comparison.
"""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fnx
from op_db import all_ops

pytestmark = pytest.mark.cuda

OPS = [op for op in all_ops() if op.extra.get("cuda", True)]
GRAD_OPS = [op for op in OPS if op.grad]
DTYPES = [fnx.bool, fnx.uint8, fnx.int8, fnx.int16, fnx.int32, fnx.int64, fnx.float16, fnx.float32, fnx.float64]


def build(args, dtype: str, device: str, requires_grad: bool = False) -> list:
    """Sample args as tensors on `device`: float arrays cast to `dtype`, other arrays as they are."""
    out = []
    for a in args:
        if isinstance(a, np.ndarray):
            t = fnx.tensor(a.astype(dtype) if a.dtype.kind == "f" else a, device=device)
            if requires_grad and a.dtype.kind == "f":
                t.requires_grad_(True)
            out.append(t)
        else:
            out.append(a)
    return out


def flat(out) -> list:
    if isinstance(out, (tuple, list)):
        return [x for o in out for x in flat(o)]
    return [out]


def host(t: fnx.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


def first_float(out):
    for o in flat(out):
        if isinstance(o, fnx.Tensor) and o.dtype.is_floating_point:
            return o
    return None


def assert_same(cpu, gpu, rtol: float, atol: float, what: str) -> None:
    if not isinstance(cpu, fnx.Tensor):
        assert cpu == gpu, what
        return
    assert isinstance(gpu, fnx.Tensor) and gpu.device.type == "cuda", f"{what}: result not on CUDA"
    assert gpu.dtype is cpu.dtype and gpu.shape == cpu.shape, f"{what}: {gpu.dtype}{list(gpu.shape)} on CUDA"
    c, g = host(cpu), host(gpu)
    if c.dtype.kind in "biu":
        np.testing.assert_array_equal(g, c, err_msg=what)
    else:
        np.testing.assert_allclose(g.astype(np.float64), c.astype(np.float64), rtol=rtol, atol=atol, err_msg=what)


# ---------------------------------------------------------------- the op table on CUDA
@pytest.mark.parametrize("info", OPS, ids=repr)
@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_op_matches_cpu(info, data):
    sample = data.draw(info.samples)
    for dtype in info.dtypes:
        cpu = flat(info.op(*build(sample.args, dtype, "cpu"), **sample.kwargs))
        gpu = flat(info.op(*build(sample.args, dtype, "cuda"), **sample.kwargs))
        assert len(cpu) == len(gpu), info.name
        tol = (info.rtol, info.atol) if dtype == "float64" else (max(info.rtol, 1e-4), max(info.atol, 1e-5))
        for c, g in zip(cpu, gpu):
            assert_same(c, g, *tol, f"{info.name}[{dtype}]")


@pytest.mark.parametrize("info", GRAD_OPS, ids=repr)
@settings(max_examples=3, deadline=None)
@given(data=st.data())
def test_gradient_matches_cpu(info, data):
    sample = data.draw(info.samples)
    grads = {}
    for device in ("cpu", "cuda"):
        args = build(sample.args, "float64", device, requires_grad=True)
        diff = [a for a in args if isinstance(a, fnx.Tensor) and a.requires_grad]
        out = first_float(info.op(*args, **sample.kwargs))
        if out is None or not out.requires_grad or out.numel() == 0:
            return
        g = fnx.tensor(np.cos(np.arange(out.numel())).reshape(tuple(out.shape)), dtype=out.dtype, device=device)
        got = fnx.autograd.grad(out, diff, g, allow_unused=True)
        for x in got:
            assert x is None or x.device.type == device, f"{info.name}: gradient on {x.device}"
        grads[device] = [None if x is None else host(x) for x in got]
    for c, g in zip(grads["cpu"], grads["cuda"]):
        assert (c is None) == (g is None), info.name
        if c is not None:
            np.testing.assert_allclose(g, c, rtol=max(info.grad_rtol, 1e-6), atol=1e-9, err_msg=info.name)


# ---------------------------------------------------------------- availability and transfers
def test_cuda_is_available():
    assert fnx.cuda.is_available() and fnx.cuda.device_count() >= 1
    fnx.cuda.synchronize()


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_round_trip_keeps_values_and_dtype(dtype):
    t = fnx.tensor([[0, 1, 2], [3, 4, 5]], dtype=dtype)
    g = t.cuda()
    assert g.device == fnx.device("cuda:0") and g.is_cuda and g.dtype is dtype and g.shape == (2, 3)
    back = g.cpu()
    assert back.device == "cpu" and back.dtype is dtype and back.tolist() == t.tolist()
    assert g.to("cuda") is g and g.to(fnx.device("cuda", 0)) is g


def test_bfloat16_round_trips_or_says_why_not():
    t = fnx.tensor([1.5, -2.0], dtype=fnx.bfloat16)
    try:
        g = t.cuda()
    except TypeError as e:
        assert "bfloat16" in str(e) and ".float()" in str(e)
        return
    assert g.cpu().tolist() == [1.5, -2.0]


def test_creation_on_cuda():
    for t in (fnx.zeros(2, 3, device="cuda"), fnx.ones(2, device="cuda:0"), fnx.full((2,), 3.0, device="cuda"),
              fnx.arange(4, device="cuda"), fnx.linspace(0, 1, 3, device="cuda"), fnx.eye(2, device="cuda"),
              fnx.tensor([1.0, 2.0], device="cuda"), fnx.empty(3, device="cuda"),
              fnx.zeros_like(fnx.ones(2, device="cuda"))):
        assert t.device.type == "cuda", t
    assert fnx.arange(4, device="cuda").tolist() == [0, 1, 2, 3]
    assert fnx.tensor([1.0, 2.0], device="cuda").dtype is fnx.float32


def test_conversions_of_cuda_tensors():
    g = fnx.tensor([1.5, 2.5], device="cuda")
    with pytest.raises(TypeError, match="cpu"):
        g.numpy()
    with pytest.raises(TypeError, match="cpu"):
        np.asarray(g)
    assert g.tolist() == [1.5, 2.5] and g.sum().item() == 4.0
    assert repr(g) == "tensor([1.5000, 2.5000], device='cuda:0')"
    assert g.to(fnx.ones(1)).device == "cpu" and fnx.ones(1).to(g).device.type == "cuda"
    assert g.double().device.type == "cuda" and g.clone().device.type == "cuda"


def test_dlpack_with_cupy():
    import cupy

    a = cupy.arange(3, dtype=cupy.float32)
    t = fnx.from_dlpack(a)
    assert t.device == fnx.device("cuda:0") and t.__dlpack_device__()[0] == 2
    a[0] = 7
    assert t.tolist() == [7.0, 1.0, 2.0]
    b = cupy.from_dlpack(t)
    b[1] = 9
    assert t.tolist() == [7.0, 9.0, 2.0]


def test_copy_between_devices():
    g = fnx.zeros(3, device="cuda")
    g.copy_(fnx.tensor([1.0, 2.0, 3.0]))
    assert g.device.type == "cuda" and g.tolist() == [1.0, 2.0, 3.0]
    c = fnx.zeros(3)
    c.copy_(g)
    assert c.tolist() == [1.0, 2.0, 3.0]


@pytest.mark.skipif(not fnx.cuda.is_available() or fnx.cuda.device_count() < 2, reason="needs two GPUs")
def test_transfer_between_gpus():
    a = fnx.arange(3.0, device="cuda:0")
    b = a.to("cuda:1")
    assert b.device == fnx.device("cuda:1") and b.tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(RuntimeError, match="cuda:0 and cuda:1"):
        a + b


# ---------------------------------------------------------------- autograd on CUDA
def test_gradients_flow_across_transfers():
    x = fnx.tensor([1.0, 2.0], requires_grad=True)
    (x.cuda() * 2).sum().backward()
    assert x.grad.device == "cpu" and x.grad.tolist() == [2.0, 2.0]
    w = fnx.tensor([1.0, 2.0], device="cuda", requires_grad=True)
    (w.cpu() * 3).sum().backward()
    assert w.grad.device.type == "cuda" and w.grad.tolist() == [3.0, 3.0]


def test_autograd_on_cuda():
    x = fnx.tensor([0.5, 1.5], dtype=fnx.float64, device="cuda", requires_grad=True)
    (g,) = fnx.autograd.grad((x ** 3).sum(), x, create_graph=True)
    (h,) = fnx.autograd.grad(g.sum(), x)
    assert h.device.type == "cuda"
    np.testing.assert_allclose(host(h), [3.0, 9.0], rtol=1e-14)
    y = x * 2
    z = y * y
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()
    assert fnx.autograd.gradcheck(lambda t: (t.sin() * t).sum(), (x,))


def test_detect_anomaly_on_cuda():
    x = fnx.tensor([0.0, 1.0], device="cuda", requires_grad=True)
    with fnx.autograd.detect_anomaly():
        with pytest.raises(RuntimeError, match="SqrtBackward"):
            (fnx.sqrt(x) * 0.0).sum().backward()


def test_erf_on_cuda():
    xs = np.array([-30.0, -3.0, -0.5, -1e-300, 0.0, 0.2, 0.46875, 1.0, 4.0, 5.5, 30.0])
    got = fnx.erf(fnx.tensor(xs, device="cuda")).cpu().numpy()
    np.testing.assert_allclose(got, [math.erf(v) for v in xs], rtol=1e-14, atol=1e-300)


# ---------------------------------------------------------------- mixing devices is an error
@pytest.mark.parametrize("call", [
    lambda c, g: c + g,
    lambda c, g: g * c,
    lambda c, g: fnx.maximum(c, g),
    lambda c, g: fnx.where(g > 0, c, g),
    lambda c, g: g.add_(c),
], ids=["add", "mul", "maximum", "where", "add_"])
def test_mixing_devices_names_both(call):
    with pytest.raises(RuntimeError, match="expected all tensors to be on the same device, but found devices "
                                           "cpu and cuda:0"):
        call(fnx.ones(2), fnx.ones(2, device="cuda"))


def test_python_scalars_follow_the_tensor_to_cuda():
    g = fnx.ones(2, device="cuda")
    for out in (g + 1, 2.5 * g, g > 0.5, fnx.where(g > 0, g, 0.0)):
        assert out.device.type == "cuda"


def test_memory_counters_streams_and_events():
    """torch.cuda's memory queries on CuPy's pool (peaks from reset_peak_memory_stats), device queries, events
    timing a stream's work."""
    fnx.cuda.reset_peak_memory_stats()
    base = fnx.cuda.memory_allocated()
    x = fnx.ones(1 << 20, device="cuda")                          # 4 MiB
    assert fnx.cuda.memory_allocated() >= base + 4 * 2**20
    del x
    assert fnx.cuda.max_memory_allocated() >= base + 4 * 2**20 and fnx.cuda.memory_reserved() >= 4 * 2**20
    free, total = fnx.cuda.mem_get_info()
    assert 0 < free <= total == fnx.cuda.get_device_properties(0).total_memory
    assert fnx.cuda.get_device_name() and len(fnx.cuda.get_device_capability()) == 2
    s = fnx.cuda.Stream()
    start, end = fnx.cuda.Event(enable_timing=True), fnx.cuda.Event(enable_timing=True)
    with fnx.cuda.stream(s):
        start.record(s)
        y = (fnx.ones(256, 256, device="cuda") @ fnx.ones(256, 256, device="cuda")).sum()
        end.record(s)
    end.synchronize()
    assert float(y.cpu()) == 256.0 ** 3 and start.elapsed_time(end) >= 0 and s.query()
