"""The Tensor API (fnx.Tensor in docs/api.md): attributes, conversions, protocols, in-place methods, creation."""
import numpy as np
import pytest

import fnx


# ---------------------------------------------------------------- attributes
def test_shape_and_size():
    t = fnx.zeros(2, 3, 4)
    assert isinstance(t.shape, fnx.Size) and isinstance(t.shape, tuple)
    assert t.shape == (2, 3, 4) and t.size() == (2, 3, 4)
    assert repr(t.shape) == "fnx.Size([2, 3, 4])"
    assert t.size(1) == 3 and t.size(-1) == 4
    assert t.shape[1:] == (3, 4) and isinstance(t.shape[1:], fnx.Size)
    assert t.shape.numel() == 24 and t.numel() == 24
    assert t.ndim == 3 and t.dim() == 3
    assert fnx.tensor(1.0).shape == () and fnx.tensor(1.0).numel() == 1 and fnx.tensor(1.0).ndim == 0
    with pytest.raises(IndexError, match=r"size: dimension out of range \(expected to be in range of \[-3, 2\]"):
        t.size(3)


def test_dtype_and_device():
    t = fnx.ones(2, dtype=fnx.float16)
    assert t.dtype is fnx.float16
    assert t.device == fnx.device("cpu") and t.device.type == "cpu" and t.device.index is None
    assert not t.is_cuda and t.is_floating_point() and not fnx.ones(2, dtype=fnx.int64).is_floating_point()
    assert t.element_size() == 2


def test_transposes():
    t = fnx.arange(6.0).reshape(2, 3)
    assert t.T.shape == (3, 2) and t.T.tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    b = fnx.zeros(5, 2, 3)
    assert b.mT.shape == (5, 3, 2)
    assert b.T.shape == (3, 2, 5)
    assert fnx.arange(3).T.shape == (3,)
    with pytest.raises(RuntimeError, match="mT"):
        fnx.arange(3.0).mT


def test_autograd_attributes():
    x = fnx.ones(2)
    assert not x.requires_grad and x.grad is None and x.grad_fn is None and x.is_leaf
    x.requires_grad = True
    assert x.requires_grad and x.is_leaf
    y = x * 2
    assert y.requires_grad and not y.is_leaf and y.grad_fn is not None
    assert "Mul" in y.grad_fn.name
    d = y.data
    assert not d.requires_grad and d.is_leaf and d.grad_fn is None
    assert np.shares_memory(d.numpy(), y.detach().numpy())


def test_data_setter_replaces_values():
    w = fnx.ones(2, requires_grad=True)
    w.data = fnx.zeros(2)
    assert w.requires_grad and w.tolist() == [0.0, 0.0]


def test_grad_setter_checks_shape_and_type():
    x = fnx.ones(2, requires_grad=True)
    x.grad = fnx.full((2,), 3.0)
    assert x.grad.tolist() == [3.0, 3.0]
    with pytest.raises(RuntimeError, match=r"shape \[3\]"):
        x.grad = fnx.ones(3)
    with pytest.raises(TypeError):
        x.grad = [1.0, 2.0]
    x.grad = None
    assert x.grad is None


# ---------------------------------------------------------------- conversion
def test_numpy_shares_memory():
    t = fnx.zeros(3)
    a = t.numpy()
    a[0] = 5.0
    assert t.tolist() == [5.0, 0.0, 0.0]
    assert a.dtype == np.float32


def test_item_and_tolist():
    assert fnx.tensor(3.5).item() == 3.5 and isinstance(fnx.tensor(3.5).item(), float)
    assert fnx.tensor([7]).item() == 7 and isinstance(fnx.tensor([7]).item(), int)
    assert isinstance(fnx.tensor(True).item(), bool)
    assert fnx.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    assert fnx.tensor(2.0).tolist() == 2.0
    with pytest.raises(RuntimeError, match=r"3 elements"):
        fnx.ones(3).item()


def test_to_dtype_device_and_other():
    t = fnx.arange(3.0)
    assert t.to(fnx.float64).dtype is fnx.float64
    assert t.to(dtype=fnx.int32).dtype is fnx.int32
    assert t.to("cpu") is t and t.to(fnx.device("cpu")) is t and t.to(device="cpu") is t
    assert t.to(fnx.float32) is t
    both = t.to("cpu", fnx.float16)
    assert both.dtype is fnx.float16 and both.device == "cpu"
    assert t.to(device="cpu", dtype=fnx.int64).dtype is fnx.int64
    assert t.to(fnx.ones(1, dtype=fnx.bool)).dtype is fnx.bool
    copied = t.to(fnx.float32, copy=True)
    assert copied is not t and not np.shares_memory(copied.numpy(), t.numpy())
    assert t.cpu() is t
    with pytest.raises(TypeError, match="unexpected keyword"):
        t.to(fnx.float16, bogus=1)


def test_conversion_methods():
    t = fnx.tensor([1.5, -2.5, 0.0])
    assert t.float().dtype is fnx.float32 and t.half().dtype is fnx.float16 and t.double().dtype is fnx.float64
    assert t.int().dtype is fnx.int32 and t.int().tolist() == [1, -2, 0]
    assert t.long().dtype is fnx.int64 and t.bool().tolist() == [True, True, False]
    assert t.bfloat16().dtype is fnx.bfloat16 and t.short().dtype is fnx.int16
    assert t.byte().dtype is fnx.uint8 and t.char().dtype is fnx.int8


def test_detach_shares_memory_and_version():
    x = fnx.ones(3, requires_grad=True)
    d = x.detach()
    assert not d.requires_grad and d.is_leaf
    with fnx.no_grad():
        d.mul_(2)
    assert x.tolist() == [2.0, 2.0, 2.0]
    assert d._version is x._version


def test_clone_copies_and_contiguous():
    t = fnx.arange(6.0).reshape(2, 3)
    c = t.clone()
    c.add_(1)
    assert t.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert t.contiguous() is t
    tt = t.T
    assert not tt.is_contiguous()
    ct = tt.contiguous()
    assert ct.is_contiguous() and ct.tolist() == tt.tolist()


def test_array_protocol():
    t = fnx.arange(4.0)
    a = np.asarray(t)
    assert isinstance(a, np.ndarray) and np.shares_memory(a, t.numpy())
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    assert np.array(t) is not a and not np.shares_memory(np.array(t), t.numpy())
    with pytest.raises(RuntimeError, match="requires grad"):
        np.asarray(fnx.ones(2, requires_grad=True))


def test_numpy_ufuncs_and_operators_return_tensors():
    t = fnx.ones(3)
    for out in (np.ones(3) + t, np.ones(3) * t, np.ones(3) - t, np.ones(3) / t, np.ones(3) ** t, np.exp(t)):
        assert isinstance(out, fnx.Tensor)
    assert (np.ones(3) + t).dtype is fnx.float64  # a dimensioned float64 operand, as in PyTorch
    assert isinstance(np.ones(3) < t, fnx.Tensor) and (np.ones(3) < t).dtype is fnx.bool
    np.testing.assert_allclose(np.exp(t).numpy(), np.exp(np.ones(3, dtype=np.float32)))
    assert t.__array_priority__ > 0


def test_dlpack_round_trip():
    t = fnx.arange(4.0)
    assert t.__dlpack_device__() == (1, 0)
    a = np.from_dlpack(t)
    assert np.shares_memory(a, t.numpy())
    back = fnx.from_dlpack(a)
    assert np.shares_memory(back.numpy(), t.numpy())
    arr = np.arange(3, dtype=np.int32)
    u = fnx.from_dlpack(arr)
    arr[0] = 9
    assert u.dtype is fnx.int32 and u.tolist() == [9, 1, 2]
    with pytest.raises(RuntimeError, match="requires grad"):
        fnx.ones(2, requires_grad=True).__dlpack__()


def test_from_numpy_and_as_tensor_share_memory():
    arr = np.arange(3)
    t = fnx.from_numpy(arr)
    arr[0] = 7
    assert t.tolist() == [7, 1, 2] and t.dtype is fnx.int64
    assert fnx.as_tensor(arr).numpy() is arr
    assert fnx.as_tensor(arr, dtype=fnx.float32).dtype is fnx.float32
    assert not np.shares_memory(fnx.tensor(arr).numpy(), arr)
    x = fnx.ones(2)
    assert fnx.as_tensor(x) is x
    assert fnx.as_tensor([1.0, 2.0]).tolist() == [1.0, 2.0]
    with pytest.raises(TypeError, match="from_numpy"):
        fnx.from_numpy([1, 2])
    with pytest.raises(TypeError, match="uint16"):
        fnx.from_numpy(np.ones(2, dtype=np.uint16))


# ---------------------------------------------------------------- Python protocols
def test_len_iter_bool():
    t = fnx.arange(6.0).reshape(3, 2)
    assert len(t) == 3
    with pytest.raises(TypeError, match="0-d"):
        len(fnx.tensor(1.0))
    if hasattr(fnx, "unbind"):
        rows = list(t)
        assert len(rows) == 3 and rows[1].tolist() == [2.0, 3.0]
    assert bool(fnx.tensor([2.0])) and not bool(fnx.tensor(0)) and bool(fnx.tensor([[True]]))
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(fnx.ones(2))
    assert int(fnx.tensor(3.7)) == 3 and float(fnx.tensor(2)) == 2.0
    assert [10, 20, 30][fnx.tensor(1)] == 20
    with pytest.raises(TypeError):
        [1, 2][fnx.tensor(1.0)]


def test_arithmetic_operators():
    a, b = fnx.tensor([1.0, 2.0, 4.0]), fnx.tensor([2.0, 2.0, 2.0])
    assert (a + b).tolist() == [3.0, 4.0, 6.0] and (a - b).tolist() == [-1.0, 0.0, 2.0]
    assert (a * b).tolist() == [2.0, 4.0, 8.0] and (a / b).tolist() == [0.5, 1.0, 2.0]
    assert (a // b).tolist() == [0.0, 1.0, 2.0] and (a % b).tolist() == [1.0, 0.0, 0.0]
    assert (a ** b).tolist() == [1.0, 4.0, 16.0] and (-a).tolist() == [-1.0, -2.0, -4.0]
    assert abs(fnx.tensor([-1.5])).tolist() == [1.5] and (+a) is a


def test_reflected_operators_with_python_scalars():
    a = fnx.tensor([1.0, 2.0, 4.0])
    assert (1 + a).tolist() == [2.0, 3.0, 5.0] and (1 - a).tolist() == [0.0, -1.0, -3.0]
    assert (2 * a).tolist() == [2.0, 4.0, 8.0] and (4 / a).tolist() == [4.0, 2.0, 1.0]
    assert (2 ** a).tolist() == [2.0, 4.0, 16.0] and (5 // a).tolist() == [5.0, 2.0, 1.0]
    assert (5 % a).tolist() == [0.0, 1.0, 1.0]
    i = fnx.tensor([1, 2, 3])
    assert (7 % i).tolist() == [0, 1, 1] and (7 // i).tolist() == [7, 3, 2] and (2 ** i).tolist() == [2, 4, 8]


def test_comparison_operators():
    a = fnx.tensor([1.0, 2.0, 3.0])
    assert (a == 2).tolist() == [False, True, False] and (a != 2).tolist() == [True, False, True]
    assert (a < 2).tolist() == [True, False, False] and (a <= 2).tolist() == [True, True, False]
    assert (a > 2).tolist() == [False, False, True] and (a >= 2).tolist() == [False, True, True]
    assert (2 < a).tolist() == [False, False, True]
    m = a > 1
    assert (~m).tolist() == [True, False, False] and (m & (a < 3)).tolist() == [False, True, False]
    assert (m | (a < 2)).tolist() == [True, True, True] and (m ^ (a > 2)).tolist() == [False, True, False]


def test_inplace_operators_keep_identity():
    x = fnx.ones(3)
    y = x
    x += 1
    x *= 3
    x -= 1
    x /= 5
    assert x is y and x.tolist() == [1.0, 1.0, 1.0]


def test_hash_and_identity():
    a = fnx.ones(2)
    assert len({a, fnx.ones(2)}) == 2 and {a: 1}[a] == 1


# ---------------------------------------------------------------- in-place methods and version counters
INPLACE = [
    ("add_", lambda t: t.add_(1), [2.0, 3.0, 5.0]),
    ("add_alpha", lambda t: t.add_(fnx.ones(3), alpha=2), [3.0, 4.0, 6.0]),
    ("sub_", lambda t: t.sub_(1, alpha=2), [-1.0, 0.0, 2.0]),
    ("mul_", lambda t: t.mul_(2), [2.0, 4.0, 8.0]),
    ("div_", lambda t: t.div_(2), [0.5, 1.0, 2.0]),
    ("pow_", lambda t: t.pow_(2), [1.0, 4.0, 16.0]),
    ("neg_", lambda t: t.neg_(), [-1.0, -2.0, -4.0]),
    ("sqrt_", lambda t: t.sqrt_(), [1.0, 2.0 ** 0.5, 2.0]),
    ("clamp_", lambda t: t.clamp_(1.5, 3.0), [1.5, 2.0, 3.0]),
    ("clamp_min", lambda t: t.clamp_(min=2.5), [2.5, 2.5, 4.0]),
    ("zero_", lambda t: t.zero_(), [0.0, 0.0, 0.0]),
    ("fill_", lambda t: t.fill_(7), [7.0, 7.0, 7.0]),
    ("fill_tensor", lambda t: t.fill_(fnx.tensor(3.0)), [3.0, 3.0, 3.0]),
    ("copy_", lambda t: t.copy_(fnx.tensor([9.0, 8.0, 7.0])), [9.0, 8.0, 7.0]),
    ("copy_numpy", lambda t: t.copy_(np.array([1, 2, 3])), [1.0, 2.0, 3.0]),
    ("copy_broadcast", lambda t: t.copy_(fnx.tensor(5.0)), [5.0, 5.0, 5.0]),
]


@pytest.mark.parametrize("name,op,expected", INPLACE, ids=[c[0] for c in INPLACE])
def test_inplace_methods(name, op, expected):
    t = fnx.tensor([1.0, 2.0, 4.0])
    view = t.reshape(3, 1)
    before = t._version[0]
    assert op(t) is t
    np.testing.assert_allclose(t.numpy(), expected, rtol=1e-6)
    assert t._version[0] == before + 1
    assert view._version[0] == t._version[0]
    np.testing.assert_allclose(view.numpy().reshape(-1), expected, rtol=1e-6)


def test_inplace_through_a_view_writes_the_base():
    base = fnx.zeros(2, 3)
    flat = base.reshape(6)
    flat.add_(1)
    assert base.tolist() == [[1.0] * 3] * 2 and base._version[0] == 1


def test_inplace_dtype_rules():
    i = fnx.tensor([1, 2])
    i.mul_(2)
    assert i.tolist() == [2, 4] and i.dtype is fnx.int64
    with pytest.raises(RuntimeError, match="float32 can't be cast to the desired output type int64"):
        i.add_(1.5)
    f = fnx.tensor([1.0, 2.0])
    f.add_(fnx.tensor([1, 1]))
    assert f.dtype is fnx.float32 and f.tolist() == [2.0, 3.0]
    c = fnx.tensor([1, 2])
    c.copy_(fnx.tensor([1.7, -2.2]))
    assert c.tolist() == [1, -2]


def test_inplace_broadcast_rules():
    t = fnx.ones(2, 3)
    t.add_(fnx.tensor([1.0, 2.0, 3.0]))
    assert t.tolist() == [[2.0, 3.0, 4.0]] * 2
    with pytest.raises(RuntimeError, match=r"output with shape \[3\] doesn't match the broadcast shape \[2, 3\]"):
        fnx.ones(3).add_(fnx.ones(2, 3))


def test_inplace_under_no_grad_on_parameters():
    w = fnx.ones(2, requires_grad=True)
    with fnx.no_grad():
        w.sub_(0.5)
        w.mul_(2)
    assert w.requires_grad and w.is_leaf and w.tolist() == [1.0, 1.0]


# ---------------------------------------------------------------- repr
def test_repr_like_pytorch():
    assert repr(fnx.tensor([1.0, 2.0])) == "tensor([1., 2.])"
    assert repr(fnx.tensor([1.5, 2.0], dtype=fnx.float64)) == "tensor([1.5000, 2.0000], dtype=fnx.float64)"
    assert repr(fnx.tensor([1.0, -2.0, 3.0])) == "tensor([ 1., -2.,  3.])"
    assert repr(fnx.tensor(3.0)) == "tensor(3.)" and repr(fnx.tensor(3.25)) == "tensor(3.2500)"
    assert repr(fnx.tensor([1e-5, 1.0])) == "tensor([1.0000e-05, 1.0000e+00])"
    assert repr(fnx.tensor([float("nan"), 1.0, float("inf")])) == "tensor([nan, 1., inf])"
    assert repr(fnx.tensor([1, 2])) == "tensor([1, 2])"
    assert repr(fnx.tensor([1, 2], dtype=fnx.int32)) == "tensor([1, 2], dtype=fnx.int32)"
    assert repr(fnx.tensor([True, False])) == "tensor([ True, False])"
    assert repr(fnx.zeros(2)) == "tensor([0., 0.])"
    assert repr(fnx.zeros(0)) == "tensor([])"
    assert repr(fnx.zeros(0, 3)) == "tensor([], size=(0, 3))"
    assert repr(fnx.zeros(0, dtype=fnx.int64)) == "tensor([], dtype=fnx.int64)"
    assert repr(fnx.ones(2, requires_grad=True)) == "tensor([1., 1.], requires_grad=True)"
    assert repr(fnx.ones(2, requires_grad=True) * 2) == "tensor([2., 2.], grad_fn=<MulBackward>)"
    assert repr(fnx.arange(6.0).reshape(2, 3) / 4) == ("tensor([[0.0000, 0.2500, 0.5000],\n"
                                                       "        [0.7500, 1.0000, 1.2500]])")
    assert repr(fnx.arange(2000)) == "tensor([   0,    1,    2, ..., 1997, 1998, 1999])"
    assert "dtype=fnx.bfloat16" in repr(fnx.ones(2, dtype=fnx.bfloat16))
    assert f"{fnx.tensor(2.5):.2f}" == "2.50"


def test_repr_follows_default_dtype():
    try:
        fnx.set_default_dtype(fnx.float64)
        assert repr(fnx.tensor([1.0])) == "tensor([1.])"
        assert repr(fnx.tensor([1.0], dtype=fnx.float32)) == "tensor([1.], dtype=fnx.float32)"
    finally:
        fnx.set_default_dtype(fnx.float32)


# ---------------------------------------------------------------- creation
def test_tensor_copies_and_keywords():
    data = [[1.0, 2.0], [3.0, 4.0]]
    t = fnx.tensor(data, dtype=fnx.float64, device="cpu", requires_grad=True)
    assert t.dtype is fnx.float64 and t.device == "cpu" and t.requires_grad and t.is_leaf
    assert fnx.tensor(t).requires_grad is False  # a copy, cut from the graph
    assert fnx.tensor([fnx.tensor(1.0), fnx.tensor(2.0)]).tolist() == [1.0, 2.0]
    assert fnx.tensor([[1, 2], [3, 4]], dtype=fnx.float16).dtype is fnx.float16
    with pytest.raises(RuntimeError, match="floating point"):
        fnx.tensor([1, 2], requires_grad=True)


def test_tensor_class_constructor():
    assert fnx.Tensor([1, 2]).dtype is fnx.float32
    assert fnx.Tensor(2, 3).shape == (2, 3)
    assert fnx.Tensor().shape == (0,)


@pytest.mark.parametrize("fn,value", [(fnx.zeros, 0.0), (fnx.ones, 1.0), (fnx.empty, None)])
def test_filled_creation(fn, value):
    for t in (fn(2, 3), fn((2, 3)), fn([2, 3])):
        assert t.shape == (2, 3) and t.dtype is fnx.float32
        if value is not None:
            assert t.tolist() == [[value] * 3] * 2
    t = fn(2, dtype=fnx.int32, device="cpu", requires_grad=False)
    assert t.dtype is fnx.int32
    assert fn(2, requires_grad=True).requires_grad
    assert fn().shape == ()
    with pytest.raises(RuntimeError, match="negative dimension"):
        fn(2, -1)


def test_full():
    assert fnx.full((2, 2), 3.5).tolist() == [[3.5, 3.5], [3.5, 3.5]]
    assert fnx.full((2,), 7, dtype=fnx.float64).dtype is fnx.float64
    assert fnx.full((3,), fnx.tensor(2.0)).tolist() == [2.0, 2.0, 2.0]
    assert fnx.full([2], 1.0, requires_grad=True).requires_grad


def test_arange():
    assert fnx.arange(5).tolist() == [0, 1, 2, 3, 4]
    assert fnx.arange(1, 10, 3).tolist() == [1, 4, 7]
    assert fnx.arange(10, 0, -3).tolist() == [10, 7, 4, 1]
    assert fnx.arange(-1, -5, -1).tolist() == [-1, -2, -3, -4]
    assert fnx.arange(0, 1, 0.25).tolist() == [0.0, 0.25, 0.5, 0.75]
    assert fnx.arange(1.0, 0.0, -0.25).tolist() == [1.0, 0.75, 0.5, 0.25]
    assert fnx.arange(0, 1, 0.1).shape == (10,)
    assert fnx.arange(5, 2).shape == (0,)
    assert fnx.arange(4, dtype=fnx.float32).tolist() == [0.0, 1.0, 2.0, 3.0]
    assert fnx.arange(fnx.tensor(3)).tolist() == [0, 1, 2]
    with pytest.raises(RuntimeError, match="step"):
        fnx.arange(0, 3, 0)


def test_linspace_and_eye():
    assert fnx.linspace(0, 1, 5).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert fnx.linspace(2, -2, 3).tolist() == [2.0, 0.0, -2.0]
    assert fnx.linspace(0, 1, 1).tolist() == [0.0]
    assert fnx.linspace(0, 1, 3, dtype=fnx.float64).dtype is fnx.float64
    assert fnx.eye(2).tolist() == [[1.0, 0.0], [0.0, 1.0]]
    assert fnx.eye(2, 3).tolist() == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    assert fnx.eye(3, dtype=fnx.int64).dtype is fnx.int64


def test_like_functions():
    src = fnx.ones(2, 3, dtype=fnx.float16)
    for fn in (fnx.zeros_like, fnx.ones_like, fnx.empty_like):
        t = fn(src)
        assert t.shape == (2, 3) and t.dtype is fnx.float16 and t.device == src.device and not t.requires_grad
    assert fnx.zeros_like(src).tolist() == [[0.0] * 3] * 2
    assert fnx.ones_like(src, dtype=fnx.int64).dtype is fnx.int64
    assert fnx.full_like(src, 7).tolist() == [[7.0] * 3] * 2 and fnx.full_like(src, 7).dtype is fnx.float16
    assert fnx.zeros_like(src, requires_grad=True).requires_grad


# ---------------------------------------------------------------- devices
def test_device_parsing_and_equality():
    cpu = fnx.device("cpu")
    assert cpu.type == "cpu" and cpu.index is None and str(cpu) == "cpu" and repr(cpu) == "device(type='cpu')"
    assert fnx.device("cpu") is cpu and cpu == "cpu" and cpu != "cuda"
    c = fnx.device("cuda")
    assert c.type == "cuda" and c.index == 0 and str(c) == "cuda:0"
    assert repr(c) == "device(type='cuda', index=0)"
    assert fnx.device("cuda:1").index == 1 and fnx.device("cuda", 1) is fnx.device("cuda:1")
    assert fnx.device("cuda:0") == fnx.device("cuda") and fnx.device("cuda:0") != fnx.device("cuda:1")
    assert fnx.device(0) is fnx.device("cuda:0") and fnx.device(cpu) is cpu
    assert hash(fnx.device("cuda:0")) == hash(fnx.device("cuda"))
    assert cpu != "not a device"
    with pytest.raises(RuntimeError, match="unknown device type 'tpu'"):
        fnx.device("tpu")
    with pytest.raises(RuntimeError, match="invalid device string 'cuda:x'"):
        fnx.device("cuda:x")
    with pytest.raises(TypeError):
        fnx.device(1.5)


@pytest.mark.skipif(fnx.cuda.is_available(), reason="checks the messages of a machine without CUDA")
def test_cuda_unavailable_errors_name_the_fix():
    assert fnx.cuda.is_available() is False and fnx.cuda.device_count() == 0
    fnx.cuda.synchronize()  # a no-op without CUDA
    t = fnx.ones(2)
    for attempt in (t.cuda, lambda: t.to("cuda"), lambda: fnx.ones(2, device="cuda"),
                    lambda: fnx.tensor([1.0], device="cuda:0")):
        with pytest.raises(RuntimeError, match=r"CUDA is not available.*fnx\[cuda1[23]\].*device='cpu'"):
            attempt()


def test_to_reads_its_arguments_as_pytorch_for_tensors_and_modules():
    """Tensor.to and nn.Module.to share one reading of their arguments (fnx.tensor.parse_to)."""
    t = fnx.ones(2)
    assert t.to("float64").dtype == fnx.float64 and t.to("cpu", fnx.float16).dtype == fnx.float16
    assert t.to(fnx.zeros(1, dtype=fnx.float64)).dtype == fnx.float64
    assert t.to(non_blocking=True, memory_format=None) is t   # layout is always row-major
    assert t.to(copy=True) is not t
    with pytest.raises(TypeError, match=r"to\(\): expected a device, a dtype or a tensor, got 3.5"):
        t.to(3.5)
    m = fnx.nn.Linear(2, 2)
    assert m.to(fnx.float64).weight.dtype == fnx.float64
    with pytest.raises(TypeError, match=r"nn.Module.to\(\): unexpected keyword arguments \['copy'\]"):
        m.to(copy=True)
    with pytest.raises(TypeError, match="only accepts floating point"):
        m.to(fnx.int64)
