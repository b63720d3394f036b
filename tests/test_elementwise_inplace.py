"""In-place elementwise methods (`x.eq_(y)`, `x.arcsin_()`, ...) and PyTorch's top-level in-place functions
(`torch.exp_(x)`): the result of the out-of-place op written into the tensor, in its dtype, as PyTorch does.

Values and errors marked "torch" were recorded from PyTorch 2.13.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import fnx
from fnx.ops.inplace_functions import _NAMES as TOP_LEVEL_INPLACE

# method -> (extra arguments, input values): every in-place method this file adds, against its out-of-place op
UNARY = {"absolute_": (), "acos_": (), "arccos_": (), "arcsin_": (), "asin_": (), "atan_": (), "arctan_": (),
         "arcsinh_": (), "arctanh_": (), "cosh_": (), "sinh_": (), "erfc_": (), "exp2_": (), "fix_": (),
         "negative_": (), "sgn_": (), "sinc_": (), "frac_": (), "deg2rad_": (), "rad2deg_": (),
         "bitwise_not_": ()}
BINARY = ["arctan2_", "copysign_", "divide_", "eq_", "ge_", "greater_", "greater_equal_", "gt_", "hypot_", "le_",
          "less_", "less_equal_", "logical_and_", "logical_or_", "logical_xor_", "lt_", "multiply_", "ne_",
          "not_equal_", "subtract_", "xlogy_", "fmod_", "nextafter_", "heaviside_", "float_power_", "ldexp_"]


def _unit(shape):
    return hnp.arrays(np.float64, shape, elements=st.floats(-0.9, 0.9, allow_nan=False, width=64))


@pytest.mark.parametrize("name", sorted(UNARY))
@settings(max_examples=10, deadline=None)
@given(x=_unit(hnp.array_shapes(min_dims=0, max_dims=2, max_side=3)).map(lambda a: a + 0.05))
def test_unary_inplace_method_writes_the_out_of_place_result_into_the_tensor(name, x):
    if name == "bitwise_not_":
        x = (x * 10).astype(np.int64)
    t = fnx.tensor(x)
    expected = getattr(t, name[:-1])()
    version = t._version[0]
    out = getattr(t, name)()
    assert out is t and t.dtype is expected.dtype
    assert t._version[0] == version + 1
    np.testing.assert_array_equal(t.numpy(), expected.numpy())


@pytest.mark.parametrize("name", BINARY)
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_binary_inplace_method_writes_the_out_of_place_result_in_selfs_dtype(name, data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=2, max_side=3))
    x = np.abs(data.draw(_unit(shape))) + 0.05   # positive: in every op's domain
    y = np.abs(data.draw(_unit(shape[-1:]))) + 0.1
    if name == "ldexp_":
        y = np.round(y * 4).astype(np.int64)
    t = fnx.tensor(x)
    expected = getattr(t, name[:-1])(fnx.tensor(y)).to(t.dtype)
    assert getattr(t, name)(fnx.tensor(y)) is t and t.dtype is fnx.float64
    np.testing.assert_array_equal(t.numpy(), expected.numpy())


# torch: comparisons and logical ops write 1/0 in self's dtype
@pytest.mark.parametrize("call, dtype, expected", [
    (lambda t: t.eq_(fnx.tensor([1.0, 3.0])), fnx.float32, [1.0, 0.0]),
    (lambda t: t.not_equal_(2.0), fnx.float32, [1.0, 0.0]),
    (lambda t: t.greater_equal_(2.0), fnx.float32, [0.0, 1.0]),
    (lambda t: t.lt_(1.5), fnx.int64, [1, 0]),
    (lambda t: t.ge_(fnx.tensor([1.5, 1.5], dtype=fnx.float64)), fnx.int32, [0, 1]),
    (lambda t: t.logical_and_(fnx.tensor([0.0, 3.0])), fnx.float32, [0.0, 1.0]),
    (lambda t: t.logical_xor_(fnx.tensor([2, 0])), fnx.int64, [0, 1]),
    (lambda t: t.divide_(2, rounding_mode="trunc"), fnx.int64, [0, 1]),
])
def test_inplace_comparisons_and_logical_ops_keep_selfs_dtype(call, dtype, expected):
    t = fnx.tensor([1, 2], dtype=dtype)
    assert call(t) is t and t.dtype is dtype and t.tolist() == expected


def test_inplace_comparison_of_a_bool_tensor_stays_bool():
    t = fnx.tensor([True, False])
    t.eq_(fnx.tensor([1.0, 3.0]))
    assert t.dtype is fnx.bool and t.tolist() == [True, False]


@pytest.mark.parametrize("call, message", [
    (lambda: fnx.tensor([1, 2]).sin_(), "sin_: result type float32 can't be cast to the desired output type int64"),
    (lambda: fnx.tensor([1, 2]).divide_(2), "divide_: result type float32 can't be cast"),
    (lambda: fnx.tensor([1, 2]).multiply_(1.5), "multiply_: result type float32 can't be cast"),
    (lambda: fnx.tensor([1, 3]).ldexp_(fnx.tensor([2, -1])), "ldexp_: result type float32 can't be cast"),
    (lambda: fnx.tensor([180]).deg2rad_(), "deg2rad_: result type float32 can't be cast"),
    (lambda: fnx.tensor([3]).copysign_(fnx.tensor([-1])), "copysign_: result type float32 can't be cast"),
    (lambda: fnx.exp_(fnx.tensor([1])), "exp_: result type float32 can't be cast"),
    (lambda: fnx.clamp_(fnx.tensor([-3, 5]), min=0.5), "clamp_: result type float32 can't be cast"),
    (lambda: fnx.tensor([1.0]).eq_(fnx.tensor([1.0, 3.0])), "output with shape [1] doesn't match the broadcast"),
    (lambda: fnx.tensor([2.0]).float_power_(2), "has dtype float32 but the operation's result requires dtype "
                                                "float64"),
    (lambda: fnx.tensor([2]).float_power_(2), "has dtype int64"),
    (lambda: fnx.abs_(fnx.tensor([1j])), "in-place abs is not supported for complex tensors"),
    (lambda: fnx.tensor([True]).negative_(), "negation, the `-` operator, on a bool tensor"),
])
def test_an_inplace_result_that_self_cannot_hold_is_a_runtime_error(call, message):
    with pytest.raises(RuntimeError, match=message.replace("[", r"\[").replace("]", r"\]")):
        call()


def test_float_power_in_place_on_float64():
    t = fnx.tensor([2.0, 3.0], dtype=fnx.float64)
    assert t.float_power_(2) is t and t.tolist() == [4.0, 9.0]


# ---------------------------------------------------------------- top-level torch.X_(tensor)
def _argument_for(name: str):
    """Extra arguments and an input in each function's domain."""
    if name in ("clamp_", "clip_"):
        return (-0.5, 0.5), [0.2, 0.7, -0.9]
    if name in ("clamp_min_", "clamp_max_"):
        return (0.3,), [0.2, 0.7, -0.9]
    if name in ("acosh_", "arccosh_"):
        return (), [1.2, 2.0, 3.5]
    if name in ("xlogy_", "ldexp_"):
        return (fnx.tensor([2, 3, 1]),), [0.2, 0.7, 0.9]
    if name in ("gcd_", "lcm_"):
        return (fnx.tensor([18, 4, 0]),), [12, -6, 5]
    return (), [0.2, 0.7, 0.9]


@pytest.mark.parametrize("name", TOP_LEVEL_INPLACE)
def test_top_level_inplace_function_is_the_inplace_method(name):
    args, values = _argument_for(name)
    out_of_place = getattr(fnx.tensor(values), name[:-1])(*args)
    t = fnx.tensor(values)
    assert getattr(fnx, name)(t, *args) is t
    np.testing.assert_array_equal(t.numpy(), out_of_place.numpy())
    assert getattr(fnx, name).__doc__


def test_top_level_inplace_functions_with_keywords_as_torch():
    t = fnx.tensor([1.234])
    fnx.round_(t, decimals=1)
    assert t.tolist() == pytest.approx([1.2000000476837158], abs=0)   # torch
    t = fnx.tensor([0.0])
    fnx.logit_(t, eps=0.1)
    assert t.tolist() == pytest.approx([-2.1972246170043945], rel=1e-7)   # torch
    t = fnx.tensor([math.nan, math.inf])
    fnx.nan_to_num_(t, nan=1.0, posinf=2.0)
    assert t.tolist() == [1.0, 2.0]
    t = fnx.tensor([-3, 2])
    assert fnx.relu_(t).tolist() == [0, 2] and fnx.square_(fnx.tensor([-3])).tolist() == [9]
    t = fnx.tensor([1.0, 2.0])
    assert fnx.fill_(t, 3.0) is t and t.tolist() == [3.0, 3.0] and fnx.zero_(t).tolist() == [0.0, 0.0]


def test_inplace_functions_record_gradients_like_the_out_of_place_op():
    leaf = fnx.tensor([0.3, -1.2, 2.0], requires_grad=True)
    x = leaf * 1.0
    fnx.sigmoid_(x)
    x.deg2rad_()
    x.sum().backward()
    s = 1 / (1 + np.exp(-leaf.detach().numpy()))
    np.testing.assert_allclose(leaf.grad.numpy(), s * (1 - s) * math.pi / 180, rtol=1e-6)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        fnx.exp_(leaf)


def test_inplace_methods_are_functionalized_under_transforms():
    def f(x):
        y = x * 1.0
        y.sinh_()
        y.frac_()
        return y.sum()

    x = fnx.tensor([0.3, 1.1, -0.7], dtype=fnx.float64)
    np.testing.assert_allclose(fnx.grad(f)(x).numpy(), np.cosh(x.numpy()), rtol=1e-12)
    np.testing.assert_allclose(fnx.compile(f)(x).item(), f(x).item(), rtol=1e-6)


# ---------------------------------------------------------------- in-place operators
def test_inplace_bitwise_and_shift_operators_write_into_the_tensor():
    t = fnx.tensor([3, 12, -5])
    same = t
    t <<= 2
    t >>= 1
    t &= fnx.tensor([6, 255, -1])
    t |= 1
    t ^= fnx.tensor([0, 1, 2])
    assert t is same and t.tolist() == [7, 24, -11]   # torch
    m = fnx.tensor([True, False])
    m &= fnx.tensor([True, True])
    assert m.dtype is fnx.bool and m.tolist() == [True, False]
    assert (1 << fnx.tensor([3])).tolist() == [8] and (64 >> fnx.tensor([3])).tolist() == [8]


@pytest.mark.parametrize("last", [False, True])
@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (4, 16, 32, 32)])
def test_recorded_relu_in_place_writes_the_tensors_memory_and_differentiates(shape, last):
    # nn.ReLU(inplace=True) after a layer: relu's result computed into the activation's own array (numpy below
    # the C kernels' size, the C kernel above it; channels-last arrays in their memory order), its node recorded
    # on that array, its gradient g where the result is positive
    rng = np.random.default_rng(0)
    x = fnx.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=True)
    y = (x.to(memory_format=fnx.channels_last) if last else x) * 1.0   # a channels-last result, not a view
    array, version = y._value, y._version[0]
    out = y.relu_()
    assert out is y and y._value is array and y._version[0] == version + 1
    assert y.grad_fn.name == "ReluBackward" and y.is_contiguous(memory_format=fnx.channels_last) == last
    want = np.maximum(x.detach().numpy(), 0)
    np.testing.assert_array_equal(y.detach().numpy(), want)
    g = rng.standard_normal(shape).astype(np.float32)
    y.backward(fnx.tensor(g))
    np.testing.assert_array_equal(x.grad.numpy(), np.where(want > 0, g, 0))


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (4, 16, 32, 32)])
def test_relu_in_place_where_nothing_records_writes_the_memory_it_is_given(shape):
    # inference (no_grad, or no input requiring grad): relu's result computed into the tensor's own array, a
    # channels-last one or a strided view of a base (which sees the write), no new array
    rng = np.random.default_rng(1)
    values = rng.standard_normal((shape[0], 2 * shape[1]) + shape[2:]).astype(np.float32)
    for make in (lambda t: t[:, :shape[1]], lambda t: t[:, :shape[1]].contiguous(memory_format=fnx.channels_last),
                 lambda t: t[:, ::2].contiguous()):
        base = fnx.tensor(values.copy())
        y = make(base)
        before, array, version = y.numpy().copy(), y._value, y._version[0]
        with fnx.no_grad():
            assert y.relu_() is y
        assert y._value is array and y._version[0] == version + 1
        np.testing.assert_array_equal(y.numpy(), np.maximum(before, 0))
        if y._base is base:   # the view's write reached the base, and only that part of it
            np.testing.assert_array_equal(base.numpy()[:, :shape[1]], np.maximum(values[:, :shape[1]], 0))
            np.testing.assert_array_equal(base.numpy()[:, shape[1]:], values[:, shape[1]:])


def test_relu_in_place_of_a_value_another_node_saved_fails_its_backward():
    x = fnx.randn(8, 1024, requires_grad=True)
    y = x * 1.0
    z = y * y   # saves y
    y.relu_()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()
