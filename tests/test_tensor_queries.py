"""PyTorch's tensor queries and small factories: Tensor.is_cpu/nbytes/itemsize/storage_offset/is_signed/
is_nonzero/is_same_size/retains_grad/cfloat/cdouble, apply_/map_/map2_, cauchy_/geometric_,
register_post_accumulate_grad_hook, empty_strided/empty_permuted/new_empty_strided/scalar_tensor/frombuffer,
the default device, set_default_tensor_type, the function forms (numel, typename, ...) and the mode queries.
Expected values are PyTorch 2.13's where they are not closed forms."""
from __future__ import annotations

import array
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fnx

N = 200_000


def test_attributes():
    x = fnx.arange(12.0).reshape(3, 4)
    assert x.is_cpu and not x.is_meta and not x.is_cuda
    assert x.itemsize == 4 and x.nbytes == 48 and x[1:, 2:].nbytes == 16
    assert x.storage_offset() == 0 and x[1:, 2:].storage_offset() == 6 and x.t().storage_offset() == 0
    assert x.double().itemsize == 8
    assert x.cfloat().dtype is fnx.complex64 and x.cdouble().dtype is fnx.complex128
    np.testing.assert_array_equal(x.cdouble().real.numpy(), x.numpy())
    signed = {fnx.complex64: True, fnx.bool: False, fnx.uint8: False, fnx.int8: True, fnx.float16: True}
    for dt, want in signed.items():
        assert fnx.ones(1, dtype=dt).is_signed() is want and fnx.is_signed(fnx.ones(1, dtype=dt)) is want
    assert x.is_same_size(fnx.zeros(3, 4)) and not fnx.is_same_size(x, fnx.zeros(4, 3))
    assert fnx.numel(x) == 12 and fnx.is_floating_point(x) and not fnx.is_floating_point(x.long())
    assert fnx.get_device(x) == -1
    y = x.requires_grad_()
    assert not fnx.detach(y).requires_grad


def test_is_nonzero():
    assert fnx.tensor(3).is_nonzero() and not fnx.is_nonzero(fnx.tensor([0.0]))
    with pytest.raises(RuntimeError, match="no values is ambiguous"):
        fnx.tensor([]).is_nonzero()
    with pytest.raises(RuntimeError, match="more than one value is ambiguous"):
        fnx.tensor([1.0, 2.0]).is_nonzero()


def test_typename_and_is_storage():
    assert fnx.typename(1) == "int" and fnx.typename(fnx.nn.Linear) == "fnx.nn.layers.linear.Linear"
    assert fnx.typename(fnx.nn.Linear(1, 1)) == "fnx.nn.layers.linear.Linear"
    assert fnx.typename(fnx.ones(1)) == fnx.ones(1).type()
    x = fnx.ones(2)
    assert fnx.is_storage(x.untyped_storage()) and fnx.is_storage(x.storage()) and not fnx.is_storage(x)


def test_retains_grad():
    x = fnx.ones(2, requires_grad=True)
    y = x * 2
    assert not x.retains_grad and not y.retains_grad
    y.retain_grad()
    x.retain_grad()   # a no-op on leaves, as in PyTorch
    assert y.retains_grad and not x.retains_grad


def test_apply_map_map2_as_pytorch():
    z = fnx.tensor([1.0, 2.0, 3.0])
    assert z.apply_(lambda v: v * 2) is z
    np.testing.assert_array_equal(z.numpy(), [2.0, 4.0, 6.0])
    z.map_(fnx.tensor([10.0]), lambda a, b: a + b)
    np.testing.assert_array_equal(z.numpy(), [12.0, 14.0, 16.0])
    z.map2_(fnx.ones(3), fnx.tensor([2.0]), lambda a, b, c: a * b + c)
    np.testing.assert_array_equal(z.numpy(), [14.0, 16.0, 18.0])
    assert z._version[0] == 3
    with pytest.raises(RuntimeError, match="requires grad"):
        fnx.ones(3, requires_grad=True).apply_(lambda v: v)
    with pytest.raises(RuntimeError, match="tracer"):
        fnx.grad(lambda x: x.apply_(lambda v: v).sum())(fnx.ones(2))


def test_cauchy_and_geometric_follow_their_distributions():
    fnx.manual_seed(0)
    c = fnx.empty(N, dtype=fnx.float64).cauchy_(1.0, 2.0).numpy()
    q1, q2, q3 = np.percentile(c, [25, 50, 75])
    assert abs(q2 - 1.0) < 0.05 and abs((q3 - q1) - 4.0) < 0.1   # median, interquartile range 2 sigma
    g = fnx.empty(N, dtype=fnx.int64).geometric_(0.3)
    assert g.dtype is fnx.int64 and g.numpy().min() == 1
    assert abs(g.numpy().mean() - 1 / 0.3) < 0.05 and abs((g.numpy() == 1).mean() - 0.3) < 0.01
    with pytest.raises(RuntimeError, match="p to be in"):
        fnx.empty(2).geometric_(1.5)
    with pytest.raises(RuntimeError, match="sigma > 0"):
        fnx.empty(2).cauchy_(sigma=-1.0)
    with pytest.raises(TypeError, match="floating point"):
        fnx.empty(2, dtype=fnx.int64).cauchy_()


def test_cauchy_and_geometric_under_compile():
    def f(x):
        e = fnx.empty_like(x)
        return e.clone().cauchy_(0.0, 1.0), e.clone().geometric_(0.5)

    c, g = [t.numpy() for t in fnx.compile(f)(fnx.ones(N, dtype=fnx.float64))]
    assert abs(np.median(c)) < 0.02 and g.min() == 1 and abs(g.mean() - 2.0) < 0.05


def test_post_accumulate_grad_hook_steps_in_backward():
    w = fnx.tensor([1.0, 2.0], requires_grad=True)
    seen = []

    def step(p):   # optimizer-in-backward: read .grad after it is accumulated, update, clear
        seen.append(p.grad.tolist())
        with fnx.no_grad():
            p.sub_(0.5 * p.grad)
        p.grad = None

    handle = w.register_post_accumulate_grad_hook(step)
    (w * w).sum().backward()
    assert seen == [[2.0, 4.0]] and w.grad is None
    np.testing.assert_allclose(w.detach().numpy(), [0.0, 0.0])
    handle.remove()
    (w * 3).sum().backward()
    assert len(seen) == 1 and w.grad.tolist() == [3.0, 3.0]
    with pytest.raises(RuntimeError, match="non-leaf"):
        (w * 2).register_post_accumulate_grad_hook(step)
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        fnx.ones(2).register_post_accumulate_grad_hook(step)


@settings(max_examples=20, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.randoms(use_true_random=False))
def test_empty_strided_and_permuted_have_the_strides(shape, rnd):
    layout = list(range(len(shape)))
    rnd.shuffle(layout)
    e = fnx.empty_permuted(shape, layout, dtype=fnx.float64)
    assert tuple(e.shape) == tuple(shape)
    expected, acc = [0] * len(shape), 1
    for d in reversed(layout):
        expected[d], acc = acc, acc * shape[d]
    assert [s for s, n in zip(e.stride(), shape) if n > 1] == [s for s, n in zip(expected, shape) if n > 1]
    strides = [rnd.randint(0, 5) for _ in shape]
    s = fnx.empty_strided(shape, strides)
    assert tuple(s.shape) == tuple(shape) and list(s.stride()) == strides and s.dtype is fnx.float32
    assert list(e.new_empty_strided(shape, strides).stride()) == strides


def test_empty_strided_permuted_pytorch_cases():
    assert fnx.empty_permuted((2, 3, 4), (0, 2, 1)).stride() == (12, 1, 3)
    assert fnx.empty_strided((2, 3), (1, 2)).stride() == (1, 2)
    assert fnx.ones(1).new_empty_strided((2, 2), (1, 2)).stride() == (1, 2)
    with pytest.raises(RuntimeError, match="permutation"):
        fnx.empty_permuted((2, 3), (0, 0))
    with pytest.raises(RuntimeError, match="mismatch in length"):
        fnx.empty_strided((2, 3), (1,))


def test_scalar_tensor():
    for s, want in ((1, 1.0), (True, 1.0), (2.5, 2.5)):
        t = fnx.scalar_tensor(s)
        assert t.shape == () and t.dtype is fnx.float32 and t.item() == want
    assert fnx.scalar_tensor(2, dtype=fnx.int64).dtype is fnx.int64


def test_frombuffer_shares_and_checks_like_pytorch():
    a = array.array("f", [1, 2, 3, 4])
    t = fnx.frombuffer(a, dtype=fnx.float32)
    t[0] = 9
    assert a[0] == 9.0
    assert fnx.frombuffer(a, dtype=fnx.float32, count=2, offset=4).tolist() == [2.0, 3.0]
    for kw, msg in ((dict(offset=20), "no greater than buffer length"), (dict(count=5), "must not be greater"),
                    (dict(offset=3), "multiple of element size")):
        with pytest.raises(ValueError, match=msg):
            fnx.frombuffer(a, dtype=fnx.float32, **kw)
    with pytest.warns(UserWarning, match="not writable"):
        assert fnx.frombuffer(b"\x00\x00\x80?", dtype=fnx.float32).tolist() == [1.0]
    assert fnx.frombuffer(bytearray(8), dtype=fnx.float64, requires_grad=True).requires_grad


def test_default_device_and_device_context():
    assert fnx.get_default_device() == "cpu"
    fnx.set_default_device("cpu")
    with fnx.device("cpu") as d:
        assert d == "cpu" and fnx.get_default_device() is d
        assert fnx.zeros(2).device == "cpu" and fnx.randn(2).device == "cpu"
    fnx.set_default_device(None)
    assert fnx.get_default_device() == "cpu"


def test_set_default_tensor_type():
    try:
        with pytest.warns(UserWarning, match="deprecated"):
            fnx.set_default_tensor_type(fnx.DoubleTensor)
        assert fnx.tensor([1.0]).dtype is fnx.float64 and fnx.get_default_dtype() is fnx.float64
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fnx.set_default_tensor_type("torch.FloatTensor")
            assert fnx.get_default_dtype() is fnx.float32
            with pytest.raises(TypeError, match="only floating-point"):
                fnx.set_default_tensor_type(fnx.LongTensor)
            with pytest.raises(TypeError, match="invalid type"):
                fnx.set_default_tensor_type("torch.NoSuchTensor")
    finally:
        fnx.set_default_dtype(fnx.float32)
        fnx.set_default_device(None)


def test_modes():
    assert not fnx.is_inference_mode_enabled()
    with fnx.inference_mode():
        assert fnx.is_inference_mode_enabled() and not fnx.is_grad_enabled()
        with fnx.inference_mode(False):
            assert not fnx.is_inference_mode_enabled()
    assert not fnx.is_inference_mode_enabled()
    assert fnx.is_anomaly_check_nan_enabled() and not fnx.is_anomaly_enabled()
    x = fnx.tensor([0.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="nan"), fnx.autograd.detect_anomaly():
        (fnx.sqrt(x) * 0).sum().backward()   # 0 * inf: a NaN gradient
    prev = fnx.set_anomaly_enabled(True, check_nan=False)
    try:
        assert fnx.is_anomaly_enabled() and not fnx.is_anomaly_check_nan_enabled()
        (fnx.sqrt(x) * 0).sum().backward()   # no NaN check to raise
        assert np.isnan(x.grad.item())
    finally:
        fnx.set_anomaly_enabled(*prev)
    assert not fnx.is_anomaly_enabled() and fnx.is_anomaly_check_nan_enabled()
    assert fnx.set_flush_denormal(False) and not fnx.set_flush_denormal(True)
