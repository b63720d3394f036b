"""The C loops of the window primitives (fnx/lowering/window_kernels.py) give the numpy impls' results bit for bit:
im2col, col2im, conv_output, window_argmax and window_max (first maximum, last NaN), window_take and window_put
(stored, or accumulated in order where windows overlap), for float32/float64 and 1-3 spatial dims, on arrays
large enough to take them."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fnx
from fnx.lowering import window_kernels
from fnx.ops import windows


def _numpy_and_native(impl, *args, **params):
    saved = windows.native
    windows.native = None
    try:
        want = impl(np, *args, **params)
    finally:
        windows.native = saved
    return want, impl(np, *args, **params)


def _same(want, got):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)   # NaN where NaN
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@st.composite
def _geometries(draw):
    nd = draw(st.integers(1, 3))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    stride = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    dilation = tuple(draw(st.integers(1, 2)) for _ in range(nd))
    spatial = tuple(d * (k - 1) + 1 + draw(st.integers(0, 12 if nd < 3 else 4))
                    for k, d in zip(kernel, dilation))
    lead = (draw(st.integers(1, 3)), draw(st.integers(1, 4)))
    lead = (max(lead[0], -(-window_kernels.MIN_ELEMENTS // (math.prod(spatial) * lead[1]))), lead[1])
    return lead + spatial, kernel, stride, dilation


@settings(max_examples=20, deadline=None)
@given(_geometries(), st.sampled_from([np.float32, np.float64]), st.integers(0, 2 ** 32 - 1))
def test_c_loops_equal_numpy(geometry, dtype, seed):
    shape, kernel, stride, dilation = geometry
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 4, size=shape).astype(dtype)   # small integers: many ties between window elements
    x.flat[rng.integers(0, x.size, size=3)] = np.nan
    x.flat[rng.integers(0, x.size, size=3)] = -0.0
    params = dict(kernel=kernel, stride=stride, dilation=dilation)
    nd = len(kernel)
    overlap = any(s < d * (k - 1) + 1 for k, s, d in zip(kernel, stride, dilation))

    for batch_inner in (False, True):
        want, got = _numpy_and_native(windows._im2col_impl, x, batch_inner=batch_inner, **params)
        _same(want, got)
        _same(*_numpy_and_native(windows._col2im_impl, rng.standard_normal(want.shape).astype(dtype),
                                 size=shape[2:], batch_inner=batch_inner, **params))
    # planes of a transposed input: the C loop reads them in place
    _same(*_numpy_and_native(windows._im2col_impl, x.swapaxes(0, 1), batch_inner=True, **params))
    want, pos = _numpy_and_native(windows._window_argmax_impl, x, **params)
    _same(want, pos)
    for want, got in zip(*_numpy_and_native(windows._window_max_impl, x, **params)):   # values, positions
        _same(want, got)
    _same(*_numpy_and_native(windows._window_take_impl, x, pos, nd=nd, overlap=overlap))
    g = rng.standard_normal(pos.shape).astype(dtype)
    g.flat[0] = -0.0
    _same(*_numpy_and_native(windows._window_put_impl, g, pos, size=shape[2:], overlap=overlap))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kernel, stride", [((2, 2), (2, 2)), ((3, 3), (1, 1)), ((2, 3), (1, 3)), ((1, 5), (2, 1)),
                                            ((1, 59), (1, 59)), ((2, 20), (2, 20))])
def test_window_argmax_over_rows_of_several_vectors(kernel, stride, dtype):
    """Rows of 18-59 windows: whole vector chunks, a partial one that reads on into the next row, and the last
    windows of the array compared one by one; rows of one to three windows (a pool over the whole sequence)
    window by window; NaN first elements, later NaNs and ties all as in numpy."""
    rng = np.random.default_rng(1)
    x = rng.integers(-2, 3, size=(3, 5, 7, 59)).astype(dtype)
    x[..., 0, ::7] = np.nan   # windows whose first element is NaN
    x.flat[rng.integers(0, x.size, size=40)] = np.nan
    params = dict(kernel=kernel, stride=stride, dilation=(1, 1))
    _same(*_numpy_and_native(windows._window_argmax_impl, x, **params))
    for want, got in zip(*_numpy_and_native(windows._window_max_impl, x, **params)):   # values, positions
        _same(want, got)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_point_windows_are_the_transposing_copies_of_a_convolution(dtype):
    """A one-point window with batch_inner swaps the two leading dims (the conv's output layout and its gradient):
    im2col copies each plane as one run, col2im stores instead of adding, and -0 still comes back +0 as from
    numpy's zeros + value."""
    x = np.random.default_rng(2).standard_normal((8, 5, 12, 13)).astype(dtype)   # over MIN_ELEMENTS
    x[1, 2, 3] = -0.0
    x[2, 3, 4, 5] = np.nan
    point = dict(kernel=(1, 1), stride=(1, 1), dilation=(1, 1), batch_inner=True)
    want, got = _numpy_and_native(windows._im2col_impl, x, **point)
    _same(want, got)
    np.testing.assert_array_equal(got[:, 0], x.swapaxes(0, 1))
    want, got = _numpy_and_native(windows._col2im_impl, got, size=(12, 13), **point)
    _same(want, got)
    assert not np.signbit(got[1, 2, 3]).any()


def test_large_conv_and_pool_take_the_c_loops_and_match_float64():
    assert window_kernels.available()
    fnx.manual_seed(0)
    x = fnx.randn(4, 8, 20, 20, requires_grad=True)
    w = fnx.randn(6, 8, 3, 3, requires_grad=True)
    y = fnx.nn.functional.max_pool2d(fnx.nn.functional.conv2d(x, w), 2)
    y.sum().backward()
    x64, w64 = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    saved = windows.native
    windows.native = None
    try:
        fnx.nn.functional.max_pool2d(fnx.nn.functional.conv2d(x64, w64), 2).sum().backward()
    finally:
        windows.native = saved
    np.testing.assert_allclose(x.grad.numpy(), x64.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(w.grad.numpy(), w64.grad.numpy(), rtol=1e-4, atol=1e-3)


@settings(max_examples=10, deadline=None)
@given(_geometries(), st.booleans())
def test_batch_inner_columns_move_the_batch_dim_and_col2im_is_their_transpose(geometry, native):
    """im2col's batch_inner layout (*b, C, K, N, *out) is the plain (*b, N, C, K, *out) one with N moved after K,
    and col2im is its transpose (<im2col(x), c> = <x, col2im(c)>), in numpy and in the C loops."""
    shape, kernel, stride, dilation = geometry
    params = dict(kernel=kernel, stride=stride, dilation=dilation)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape)
    saved = windows.native
    windows.native = window_kernels if native else None
    try:
        plain = windows._im2col_impl(np, x, batch_inner=False, **params)
        cols = windows._im2col_impl(np, x, batch_inner=True, **params)
        c = rng.standard_normal(cols.shape)
        back = windows._col2im_impl(np, c, size=shape[2:], batch_inner=True, **params)
    finally:
        windows.native = saved
    np.testing.assert_array_equal(cols, np.moveaxis(plain, 0, 2))   # (N, C, K, *out) -> (C, K, N, *out)
    np.testing.assert_allclose(np.vdot(cols, c), np.vdot(x, back), rtol=1e-12)


def test_conv_of_strided_and_doubly_vmapped_inputs_matches_the_plain_conv():
    """The C loops read a transposed input's planes in place and merge more than three leading dims (vmap of
    vmap of a batched conv); the results equal the conv of contiguous inputs, one by one."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4, 5, 12, 12)).astype(np.float32)
    w = fnx.tensor(rng.standard_normal((6, 5, 3, 3)).astype(np.float32))
    conv = fnx.nn.functional.conv2d
    want = np.stack([np.stack([conv(fnx.tensor(x[i, j]), w).numpy() for j in range(3)]) for i in range(2)])
    got = fnx.vmap(fnx.vmap(lambda a: conv(a, w)))(fnx.tensor(x))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
    swapped = fnx.tensor(np.ascontiguousarray(x[0, 0].swapaxes(0, 1))).transpose(0, 1)   # (N, C) over (C, N) memory
    np.testing.assert_array_equal(conv(swapped, w).numpy(), conv(fnx.tensor(x[0, 0]), w).numpy())


def test_col2im_names_the_expected_batch_inner_layout():
    with pytest.raises(fnx.errors.FnxRuntimeError, match=r"col2im: columns of shape \[3, 8, 2, 4, 4\].*\(\*b, C, K, N"):
        windows.col2im(fnx.zeros(3, 8, 2, 4, 4), (6, 6), (3, 3), (1, 1), (1, 1), batch_inner=True).shape
    with pytest.raises(fnx.errors.FnxRuntimeError, match="im2col: batch_inner needs"):
        windows.im2col(fnx.zeros(4, 6, 6), (3, 3), (1, 1), (1, 1), batch_inner=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_conv_output_c_loop_equals_numpy(dtype):
    """conv_output's C loop (the transposing copy adding each channel's bias) gives numpy's moveaxis + add exactly,
    with leading batch dims (vmap's) and -0 / NaN values."""
    rng = np.random.default_rng(3)
    y = rng.standard_normal((2, 6, 5, 12, 13)).astype(dtype)   # (*b, C, N, H, W)
    y[0, 1] = -0.0
    y[1, 2, 3, 4] = np.nan
    bias = rng.standard_normal((2, 6)).astype(dtype)
    bias[0, 1] = -0.0
    want, got = _numpy_and_native(windows._conv_output_impl, y, bias, nd=2)
    _same(want, got)
    np.testing.assert_array_equal(got[1, 3], y[1, :, 3] + bias[1, :, None, None])   # sample 3, every channel


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_conv_output_vjp_c_loop_swaps_back_exactly_and_sums_within_rounding(dtype):
    """conv_output's gradient in one C pass: the (*b, C, N, *s) swap equals numpy's exactly, the per-channel sums
    (in double, over planes of 340 values: whole runs of 16 and a tail) are within float rounding of numpy's."""
    rng = np.random.default_rng(4)
    g = rng.standard_normal((2, 7, 6, 17, 20)).astype(dtype)   # (*b, N, C, H, W), over MIN_ELEMENTS
    g[1, 2] = np.nan
    (want_y, want_b), (got_y, got_b) = _numpy_and_native(windows._conv_output_vjp_impl, g, nd=2)
    _same(want_y, got_y)
    assert got_b.dtype == want_b.dtype and got_b.shape == want_b.shape == (2, 6)
    np.testing.assert_allclose(got_b, want_b, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=0)
    exact = g[0].astype(np.float64).sum(axis=(0, 2, 3))
    np.testing.assert_allclose(got_b[0], exact, rtol=1e-7 if dtype == np.float32 else 1e-13)   # one rounding
    assert np.isnan(got_b[1]).all()


def test_conv2d_with_a_bias_is_one_conv_output_its_gradient_one_conv_output_vjp_and_names_a_wrong_bias():
    x, w, b = fnx.zeros(2, 3, 6, 6), fnx.zeros(4, 3, 3, 3), fnx.zeros(4)
    prims = [e.prim.name for e in fnx.make_jaxpr(fnx.nn.functional.conv2d)(x, w, b).eqns]
    assert "conv_output" in prims and "add" not in prims
    back = fnx.make_jaxpr(fnx.grad(lambda b: fnx.nn.functional.conv2d(x, w, b).sum()))(b)
    assert [e.prim.name for e in back.eqns].count("conv_output_vjp") == 1
    with pytest.raises(fnx.errors.FnxRuntimeError, match=r"conv2d: .*expected bias to be 1-dimensional with 4 "
                                                         r"elements, but got bias of size \[3\]"):
        fnx.nn.functional.conv2d(x, w, fnx.zeros(3))


def test_max_pool_is_one_window_max_and_its_gradient_one_window_put():
    x = fnx.randn(2, 3, 8, 8)
    jaxpr = fnx.make_jaxpr(fnx.grad(lambda a: fnx.nn.functional.max_pool2d(a, 2).sum()))(x)
    prims = [e.prim.name for e in jaxpr.eqns]
    assert prims.count("window_max") == 1 and prims.count("window_put") == 1
    assert "window_argmax" not in prims and "window_take" not in prims


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 3), st.integers(1, 70), st.integers(1, 70), st.integers(0, 17), st.integers(0, 17),
       st.booleans(), st.sampled_from([np.float32, np.float64]), st.integers(0, 2 ** 32 - 1))
def test_transpose_moves_every_element_of_wide_and_tall_matrices(n, rows, cols, spad, dpad, bias, dtype, seed):
    # whole and part tiles at both edges of wide and tall matrices put src[i, r, c] (+ bias[c]) at dst[i, c, r]
    # and leave the pitches' padding as it was
    rng = np.random.default_rng(seed)
    src = rng.standard_normal((n, rows, cols + spad)).astype(dtype)
    dst = np.full((n, cols, rows + dpad), 7.0, dtype)
    b = rng.standard_normal(cols).astype(dtype) if bias else None
    window_kernels.transpose(src, dst, b)
    want = src[:, :, :cols].transpose(0, 2, 1) + (0 if b is None else b[:, None])
    np.testing.assert_array_equal(dst[:, :, :rows], want)
    np.testing.assert_array_equal(dst[:, :, rows:], 7.0)
