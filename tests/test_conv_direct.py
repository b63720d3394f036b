"""Eager convolutions run fnx/ops/conv.py's direct channels-last primitives: forward, input gradient (one direct
convolution per phase of the strides) and weight gradient (and grad of grad on the eager tape) equal the composite
form that transforms run (and a float64 numpy reference), the register tiles' channel and position tails included;
so do eager transposed convolutions, which bind conv_input_grad (their padding dropped rather than cropped)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fnx
import fnx.nn.functional as F
from fnx.ops import conv as direct
from fnx.ops import windows
from fnx import array_layout as layout
from fnx.array_pointers import data_pointer
from fnx.lowering import window_kernels
from op_db_conv import ref_conv2d

_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}


def _geometry(draw, max_kernel: int, max_stride: int) -> tuple:
    """(nd, groups, kernel, stride, dilation) of a drawn convolution."""
    nd = draw(st.integers(1, 3))
    groups = draw(st.integers(1, 2))
    kernel = tuple(draw(st.integers(1, max_kernel)) for _ in range(nd))
    stride = tuple(draw(st.integers(1, max_stride)) for _ in range(nd))
    return nd, groups, kernel, stride, tuple(draw(st.integers(1, 2)) for _ in range(nd))


@st.composite
def _cases(draw):
    nd, groups, kernel, stride, dilation = _geometry(draw, 3, 2)
    padding = tuple(draw(st.integers(0, 1)) for _ in range(nd))
    side = 14 if nd < 3 else 6   # large enough, with 8 channels, for the C loops
    spatial = tuple(d * (k - 1) + 1 + draw(st.integers(0, side)) for k, d in zip(kernel, dilation))
    n, c = draw(st.integers(1, 5)), draw(st.sampled_from([1, 3, 8])) * groups
    o = draw(st.sampled_from([3, 8, 17])) * groups   # the primitives: 8 or more out a group
    return dict(nd=nd, groups=groups, stride=stride, dilation=dilation, padding=padding,
                x=(n, c) + spatial, w=(o, c // groups) + kernel, bias=draw(st.booleans()),
                dtype=draw(st.sampled_from([np.float32, np.float64])))


def _inputs(case, seed=0):
    rng = np.random.default_rng(seed)
    dt = case["dtype"]
    x = rng.standard_normal(case["x"]).astype(dt)
    w = rng.standard_normal(case["w"]).astype(dt)
    b = rng.standard_normal(case.get("out", case["w"][0])).astype(dt) if case["bias"] else None   # out channels
    return x, w, b


def _conv(case):
    f, params = _CONV[case["nd"]], {k: case[k] for k in ("stride", "padding", "dilation", "groups")}
    return lambda x, w, b: f(x, w, b, **params)


def _close(got, want, dtype):
    tol = 2e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=tol, atol=tol * max(1.0, np.abs(want).max()))


@given(case=_cases())
@settings(max_examples=25, deadline=None)
def test_eager_direct_conv_and_gradients_equal_the_composite(case):
    _check_against_the_composite(case)


def _check_against_the_composite(case, f=None):
    x, w, b = _inputs(case)
    f = f or _conv(case)
    tx, tw = fnx.tensor(x, requires_grad=True), fnx.tensor(w, requires_grad=True)
    tb = None if b is None else fnx.tensor(b, requires_grad=True)
    y = f(tx, tw, tb)
    g = np.random.default_rng(1).standard_normal(y.shape).astype(case["dtype"])
    y.backward(fnx.tensor(g))
    args = [fnx.tensor(a) for a in (x, w, b) if a is not None]
    want_y = fnx.compile(lambda *a: f(a[0], a[1], a[2] if b is not None else None))(*args)
    loss = lambda *a: (f(a[0], a[1], a[2] if b is not None else None) * fnx.tensor(g)).sum()   # noqa: E731
    want = fnx.grad(loss, argnums=tuple(range(len(args))))(*args)
    _close(y.detach().numpy(), want_y.numpy(), case["dtype"])
    for leaf, grad in zip((tx, tw, tb), want):
        _close(leaf.grad.numpy(), grad.numpy(), case["dtype"])


def test_eager_conv2d_matches_a_float64_reference_and_keeps_the_batch_order():
    rng = np.random.default_rng(2)
    x, w, b = rng.standard_normal((5, 8, 9, 8)), rng.standard_normal((9, 8, 3, 2)), rng.standard_normal(9)
    got = F.conv2d(fnx.tensor(x), fnx.tensor(w), fnx.tensor(b), stride=(2, 1), padding=1, dilation=(1, 2))
    np.testing.assert_allclose(got.numpy(), ref_conv2d(x, w, b, (2, 1), (1, 1), (1, 2), 1), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("last", [False, True])
@pytest.mark.parametrize("out", [2, 5])
def test_pointwise_convolutions_into_few_channels_run_the_primitive_with_their_bias(last, out):
    # U-Net's OutConv (16 -> 2 classes, 1 x 1): a product whatever the channels, its bias added to the rows as
    # wider ones (2 outputs: 128 to a row) or, where the rows do not divide so (5), as they are
    rng = np.random.default_rng(7)
    x, w, b = (rng.standard_normal(s) for s in ((2, 16, 8, 16), (out, 16, 1, 1), (out,)))
    tx = fnx.tensor(x)
    tx = (tx.to(memory_format=fnx.channels_last) if last else tx).requires_grad_()
    y = F.conv2d(tx, fnx.tensor(w), fnx.tensor(b))
    assert y.grad_fn.name == "ConvBackward"
    np.testing.assert_allclose(y.detach().numpy(), ref_conv2d(x, w, b, (1, 1), (0, 0), (1, 1), 1), rtol=1e-12,
                               atol=1e-12)
    _check_against_the_composite(dict(nd=2, groups=1, stride=(1, 1), dilation=(1, 1), padding=(0, 0),
                                      x=(2, 16, 8, 16), w=(out, 16, 1, 1), bias=True, dtype=np.float32))


@pytest.mark.parametrize("wrt", ["input", "weight"])
def test_grad_of_grad_on_the_eager_tape_equals_the_composite(wrt):
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((4, 8, 12, 12)), rng.standard_normal((10, 8, 3, 3))
    v = rng.standard_normal((4, 8, 12, 12) if wrt == "input" else (10, 8, 3, 3))
    f = lambda x, w: F.conv2d(x, w, None, padding=1)   # noqa: E731

    def second(x, w):   # <v, d/d(wrt) of sum(conv(x, w)^2)>
        first = fnx.grad(lambda x, w: (f(x, w) ** 2).sum(), argnums=0 if wrt == "input" else 1)(x, w)
        return (first * fnx.tensor(v)).sum()

    want = fnx.grad(second, argnums=(0, 1))(fnx.tensor(x), fnx.tensor(w))
    tx, tw = fnx.tensor(x, requires_grad=True), fnx.tensor(w, requires_grad=True)
    assert f(tx, tw).grad_fn.name == "ConvBackward"
    (first,) = fnx.autograd.grad((f(tx, tw) ** 2).sum(), [tx if wrt == "input" else tw], create_graph=True)
    (first * fnx.tensor(v)).sum().backward()
    for leaf, grad in zip((tx, tw), want):
        np.testing.assert_allclose(leaf.grad.numpy(), grad.numpy(), rtol=1e-10, atol=1e-10)


def test_eager_mode_binds_the_primitives_without_padded_copies_and_transforms_see_the_composite():
    x, w = fnx.randn(8, 8, 8, 8, requires_grad=True), fnx.randn(8, 8, 3, 3, requires_grad=True)
    y = F.conv2d(x * 2, w, padding=1)
    assert y.grad_fn.name == "ConvBackward" and y.grad_fn.next_functions[0][0].name == "MulBackward"   # no pad
    t = F.conv_transpose2d(y, w, padding=1, stride=2, output_padding=1)
    assert t.grad_fn.name == "Conv_input_gradBackward" and t.shape == (8, 8, 16, 16)   # no crop
    prims = [e.prim.name for e in fnx.make_jaxpr(lambda x, w: F.conv2d(x, w, padding=1))(x.detach(), w.detach()).eqns]
    assert "conv" not in prims and {"pad", "im2col", "matmul"} <= set(prims)


def test_fnx_compile_binds_the_primitives_under_grad_and_the_composite_under_vmap():
    """In fnx.compile's trace, alone or under grad, convolutions bind the primitives (library steps running the
    eager C loops: their values); under vmap, whose batching rules they lack, the composite runs."""
    rng = np.random.default_rng(0)
    x, w, dw = (fnx.tensor(rng.standard_normal(s)) for s in ((4, 8, 8, 8), (8, 8, 3, 3), (8, 1, 3, 3)))

    def loss(x, w, dw):
        y = F.conv2d(x, w, padding=1)
        z = F.conv2d(y, dw, padding=1, groups=8)
        return (F.conv_transpose2d(z, w, padding=1) ** 2).sum()

    step = fnx.compile(fnx.value_and_grad(loss, argnums=(0, 1, 2)))
    prims = {e.prim.name for e in step.lower(x, w, dw).jaxpr.jaxpr.eqns}
    assert {"conv", "conv_input_grad", "conv_weight_grad", "depthwise_conv", "depthwise_conv_input_grad",
            "depthwise_conv_weight_grad"} <= prims and "im2col" not in prims
    value, grads = step(x, w, dw)
    leaves = [t.clone().requires_grad_() for t in (x, w, dw)]
    eager = loss(*leaves)
    eager.backward()
    np.testing.assert_allclose(value.numpy(), eager.detach().numpy(), rtol=1e-12)
    for g, leaf in zip(grads, leaves):
        np.testing.assert_allclose(g.numpy(), leaf.grad.numpy(), rtol=1e-11, atol=1e-11)
    batched = fnx.compile(fnx.vmap(lambda x: F.conv2d(x, w, padding=1)))
    prims = {e.prim.name for e in batched.lower(x[:, None]).jaxpr.jaxpr.eqns}
    assert "conv" not in prims and "im2col" in prims
    np.testing.assert_allclose(batched(x[:, None]).numpy()[:, 0], F.conv2d(x, w, padding=1).numpy(), rtol=1e-12,
                               atol=1e-12)


def test_the_primitives_are_off_for_half_floats_without_the_c_loops_and_when_disabled(monkeypatch):
    x, w = fnx.randn(8, 8, 8, 8, requires_grad=True), fnx.randn(8, 8, 3, 3, requires_grad=True)
    assert F.conv2d(x, w).grad_fn.name == "ConvBackward"
    assert F.conv2d(x[:, :3], w[:, :3]).grad_fn.name == "ConvBackward"   # any input channels
    assert F.conv2d(x, w[:4]).grad_fn.name != "ConvBackward"   # fewer than MIN_CHANNELS out
    assert F.conv2d(x, w[:, :4], groups=2).grad_fn.name != "ConvBackward"   # 4 out a group
    grouped = F.conv2d(x, fnx.randn(16, 4, 3, 3, requires_grad=True), groups=2)   # 8 a group: group by group
    assert grouped.grad_fn.name == "ConcatenateBackward"
    assert {f.name for f, _ in grouped.grad_fn.next_functions} == {"ConvBackward"}
    assert F.conv_transpose2d(x[:, :3], w[:3], stride=2).grad_fn.name == "Conv_input_gradBackward"   # 4 phases
    assert F.conv_transpose2d(x, w[:, :3]).grad_fn.name != "Conv_input_gradBackward"   # 3 out
    assert F.conv2d(x.to(fnx.bfloat16), w.to(fnx.bfloat16)).grad_fn.name != "ConvBackward"
    with monkeypatch.context() as m:
        m.setattr(windows.native, "available", lambda: False)   # no C compiler: the composite form
        y = F.conv2d(x, w, padding=1)
        assert y.grad_fn.name != "ConvBackward"
        _close(y.detach().numpy(), F.conv2d(x, w, padding=1).detach().numpy(), np.float32)
    monkeypatch.setattr(direct, "ENABLED", False)
    assert F.conv2d(x, w).grad_fn.name != "ConvBackward"


def test_two_threads_give_the_composite_values():
    saved = fnx.get_num_threads()
    fnx.set_num_threads(2)
    try:
        _check_against_the_composite(dict(nd=2, groups=1, stride=(1, 1), dilation=(1, 1), padding=(1, 1),
                                          x=(5, 8, 12, 12), w=(10, 8, 3, 3), bias=True, dtype=np.float32))
    finally:
        fnx.set_num_threads(saved)


def test_strided_operands_give_the_composite_values():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((7, 10, 10, 8)).astype(np.float32)   # channels last, read as (N, C, H, W) below
    w, b = rng.standard_normal((9, 8, 3, 3)).astype(np.float32), rng.standard_normal(9).astype(np.float32)
    g = rng.standard_normal((7, 8, 8, 9)).astype(np.float32)

    def run():
        tx, tw, tb = (fnx.tensor(a, requires_grad=True) for a in (x, w, b))
        y = F.conv2d(tx.permute(0, 3, 1, 2), tw, tb)
        y.backward(fnx.tensor(g).permute(0, 3, 1, 2))
        return [a.numpy() for a in (y.detach(), tx.grad, tw.grad, tb.grad)]

    f = lambda x, w, b: F.conv2d(x.permute(0, 3, 1, 2), w, b)   # noqa: E731
    loss = lambda x, w, b: (f(x, w, b) * fnx.tensor(g).permute(0, 3, 1, 2)).sum()   # noqa: E731
    args = [fnx.tensor(a) for a in (x, w, b)]   # the composite form, traced
    composite = [fnx.compile(f)(*args).numpy()] + [a.numpy() for a in fnx.grad(loss, argnums=(0, 1, 2))(*args)]
    for got, want in zip(run(), composite):
        _close(got, want, np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("stride", [1, 2])
def test_direct_tiles_cover_channel_and_position_tails_on_two_threads(dtype, stride):
    # 13 channels in (weight-gradient tiles of up to 8 rows, then the rest), 40 out (vectors of 16 floats or 8
    # doubles: two-vector tiles, then one vector, then zero channels of padding), 99 or 25 positions (tiles of up
    # to 8, then the rest), the weight gradient's sums in two parts (stride 1: 594 terms)
    saved = fnx.get_num_threads()
    fnx.set_num_threads(2)
    try:
        _check_against_the_composite(dict(nd=2, groups=1, stride=(stride, stride), dilation=(1, 1), padding=(1, 1),
                                          x=(6, 13, 11, 9), w=(40, 13, 3, 3), bias=True, dtype=dtype))
    finally:
        fnx.set_num_threads(saved)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_weights_more_than_twice_the_input_run_by_blocks_and_parts_of_the_taps(dtype):
    # 72 x 40 x 3 x 3 weights on 9 images of 4 x 4: the forward's tasks take one block of outputs over a run of
    # tiles (18 tiles: runs of 8, then the rest) and 128 of the inner group's 360 taps at a time, the tiles' sums
    # carried over in the output; 72 outputs: two-vector blocks, then a one-vector block; the weight gradient's
    # taps channel major (the weight larger than the input), its rows one transpose from (O, C, K)
    saved = fnx.get_num_threads()
    fnx.set_num_threads(2)
    try:
        _check_against_the_composite(dict(nd=2, groups=1, stride=(1, 1), dilation=(1, 1), padding=(1, 1),
                                          x=(9, 40, 4, 4), w=(72, 40, 3, 3), bias=True, dtype=dtype))
    finally:
        fnx.set_num_threads(saved)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_windows_in_the_padding_and_input_positions_no_element_reaches_give_the_composite_values(dtype):
    # a 1 x 2 kernel with padding 2: the border rows' windows read only padding (groups without taps: the bias);
    # 4 x 4 with a 3 x 3 kernel: the corner, edge and inner groups of kernel elements
    _check_against_the_composite(dict(nd=2, groups=1, stride=(1, 1), dilation=(1, 1), padding=(2, 2),
                                      x=(3, 9, 4, 5), w=(8, 9, 1, 2), bias=True, dtype=dtype))
    _check_against_the_composite(dict(nd=2, groups=1, stride=(1, 1), dilation=(1, 1), padding=(1, 1),
                                      x=(3, 16, 4, 4), w=(16, 16, 3, 3), bias=False, dtype=dtype))
    # stride 3 with a 1 x 2 kernel: two of every three input rows get no gradient (phases without elements)
    _check_against_the_composite(dict(nd=2, groups=1, stride=(3, 1), dilation=(1, 1), padding=(0, 0),
                                      x=(2, 8, 10, 6), w=(8, 8, 1, 2), bias=False, dtype=dtype))


@pytest.mark.parametrize("x_shape,w_shape,padding", [
    ((2, 8, 9, 7), (19, 8, 3, 3), 1),    # each tile over all its taps; 19 channels padded to whole vectors
    ((2, 40, 4, 4), (72, 40, 3, 3), 1),  # a weight more than twice the input: tiles summed over runs of taps
    ((3, 9, 4, 5), (8, 9, 1, 2), 2),     # border rows whose windows read only padding: the bias alone
])
def test_channels_last_convolutions_add_their_bias_after_the_sum(x_shape, w_shape, padding):
    # the tiles add the bias to each finished sum: the bits of the convolution without bias plus the bias
    rng = np.random.default_rng(5)
    x = fnx.tensor(rng.standard_normal(x_shape).astype(np.float32)).contiguous(memory_format=fnx.channels_last)
    w = fnx.tensor(rng.standard_normal(w_shape).astype(np.float32))
    b = fnx.tensor(rng.standard_normal(w_shape[0]).astype(np.float32))
    with fnx.no_grad():
        y = F.conv2d(x, w, b, padding=padding)
        want = F.conv2d(x, w, padding=padding) + b[:, None, None]
    assert layout.channels_last(y.numpy())
    np.testing.assert_array_equal(y.numpy(), want.numpy())


@pytest.mark.parametrize("shape", [(144,), (1, 2304, 128), (4, 4096, 32), (0, 3)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("zeroed", [False, True])
def test_aligned_empty_starts_at_a_cache_line(shape, dtype, zeroed):
    a = layout.aligned_empty(shape, dtype, zeroed)
    assert a.shape == shape and a.dtype == dtype and a.flags.c_contiguous and a.flags.writeable
    assert a.size == 0 or data_pointer(a) % 64 == 0
    assert not zeroed or not a.any()


def test_direct_convolutions_read_packed_weights_and_write_rows_at_cache_lines(monkeypatch):
    # each 64-byte vector of the tiles' weights and outputs within one cache line, forward and input gradient
    seen = []
    run = window_kernels.conv_direct

    def spy(source, packed, rows, *rest):
        seen.append((data_pointer(packed) % 64, data_pointer(rows) % 64))
        return run(source, packed, rows, *rest)

    monkeypatch.setattr(window_kernels, "conv_direct", spy)
    rng = np.random.default_rng(6)
    for c, o, side in ((64, 32, 16), (64, 128, 10), (16, 24, 12)):
        x = fnx.tensor(rng.standard_normal((2, c, side, side)).astype(np.float32), requires_grad=True)
        w = fnx.tensor(rng.standard_normal((o, c, 3, 3)).astype(np.float32), requires_grad=True)
        F.conv2d(x.contiguous(memory_format=fnx.channels_last), w, padding=1).sum().backward()
    assert len(seen) == 6 and set(seen) == {(0, 0)}


@pytest.mark.parametrize("n,c,o,side,stride,dilation,dtype", [
    (4, 32, 16, 20, 1, 1, np.float32),   # two vectors of taps a tile
    (3, 16, 16, 7, 1, 1, np.float32),    # one kernel element's 16 channels, and the last vector alone
    (2, 48, 12, 9, 2, 1, np.float32),    # 12 output channels padded to one vector; stride 2
    (2, 16, 8, 11, 1, 2, np.float64),    # float64: 8 lanes; dilation 2
    (12, 32, 16, 4, 1, 1, np.float32),   # a 4 x 4 image: every group at a border
])
def test_weight_gradients_into_one_vector_of_channels_swap_the_tiles_with_the_same_bits(n, c, o, side, stride,
                                                                                       dilation, dtype, monkeypatch):
    # 8 output channels of g broadcast against vectors of a kernel element's channels of x: conv_weight_direct's
    # sums in its order, so its bits; the values of the composite form
    calls = []
    run = window_kernels.conv_weight_swapped
    monkeypatch.setattr(window_kernels, "conv_weight_swapped", lambda *a: (calls.append(a[-1]), run(*a))[1])
    rng = np.random.default_rng(7)
    x = fnx.tensor(rng.standard_normal((n, c, side, side)).astype(dtype)).contiguous(memory_format=fnx.channels_last)
    w = fnx.tensor(rng.standard_normal((o, c, 3, 3)).astype(dtype), requires_grad=True)
    grads = []
    for swapped in (True, False):
        monkeypatch.setattr(direct, "SWAPPED", swapped)
        w.grad = None
        y = F.conv2d(x, w, stride=stride, padding=1, dilation=dilation)
        y.backward(fnx.tensor(np.linspace(-1, 1, y.numel()).reshape(y.shape).astype(dtype)))
        grads.append(w.grad.numpy())
    assert len(calls) == 1
    np.testing.assert_array_equal(grads[0], grads[1])
    _check_against_the_composite(dict(nd=2, groups=1, stride=(stride, stride), dilation=(dilation, dilation),
                                      padding=(1, 1), x=(n, c, side, side), w=(o, c, 3, 3), bias=False, dtype=dtype),
                                 lambda x, w, b: F.conv2d(x.contiguous(memory_format=fnx.channels_last), w, b,
                                                          stride=stride, padding=1, dilation=dilation))


@pytest.mark.parametrize("bias", [True, False])
def test_convolutions_large_enough_for_parallel_loops_give_the_composite_values(bias):
    # the frame, the direct loops of every phase and the transposes split over the pool
    _check_against_the_composite(dict(nd=2, groups=1, stride=(1, 2), dilation=(1, 1), padding=(1, 1),
                                      x=(4, 8, 32, 32), w=(16, 8, 3, 3), bias=bias, dtype=np.float32))


def test_eager_direct_gradients_match_finite_differences():
    rng = np.random.default_rng(5)
    x, w, b = (fnx.tensor(rng.standard_normal(s), requires_grad=True) for s in ((3, 8, 5, 5), (8, 8, 2, 2), (8,)))
    f = lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=1, dilation=(1, 2))   # noqa: E731
    assert f(x, w, b).grad_fn.name == "ConvBackward"
    assert fnx.autograd.gradcheck(f, (x, w, b))


_CONV_TRANSPOSE = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


@st.composite
def _transpose_cases(draw):
    nd, groups, kernel, stride, dilation = _geometry(draw, 4, 3)
    output_padding = tuple(draw(st.integers(0, s - 1)) for s in stride)
    padding = tuple(draw(st.integers(0, (d * (k - 1) + o) // 2)) for k, d, o in zip(kernel, dilation, output_padding))
    spatial = tuple(draw(st.integers(1, 9 if nd < 3 else 4)) for _ in range(nd))
    n, c, o = draw(st.integers(1, 3)), 3 * groups, draw(st.sampled_from([3, 8])) * groups   # 8 a group: the primitive
    return dict(nd=nd, groups=groups, stride=stride, dilation=dilation, padding=padding,
                output_padding=output_padding, x=(n, c) + spatial, w=(c, o // groups) + kernel, out=o,
                bias=draw(st.booleans()), dtype=draw(st.sampled_from([np.float32, np.float64])))


@given(case=_transpose_cases())
@settings(max_examples=40, deadline=None)
def test_eager_transposed_conv_and_gradients_equal_the_composite(case):
    """Eagerly conv_transpose is conv_input_grad (PyTorch's form), under transforms a convolution of the
    stride-dilated input: the same values and gradients, output_padding's zeros included."""
    params = {k: case[k] for k in ("stride", "padding", "output_padding", "groups", "dilation")}
    f = lambda x, w, b: _CONV_TRANSPOSE[case["nd"]](x, w, b, **params)   # noqa: E731
    _check_against_the_composite(case, f)


def test_eager_transposed_conv_binds_the_input_gradient_of_conv_and_its_gradients_match_finite_differences():
    rng = np.random.default_rng(6)
    x, w, b = (fnx.tensor(rng.standard_normal(s), requires_grad=True) for s in ((2, 4, 3, 4), (4, 8, 3, 2), (8,)))
    f = lambda x, w, b: F.conv_transpose2d(x, w, b, stride=(2, 3), padding=(1, 0), output_padding=(1, 2),   # noqa
                                           dilation=(2, 1))
    assert F.conv_transpose2d(x, w, stride=2).grad_fn.name == "Conv_input_gradBackward"
    assert fnx.autograd.gradcheck(f, (x, w, b))
    # second derivatives on the eager tape, against the composite's (fnx.grad traces it)
    square = lambda x, w, b: (f(x, w, b) ** 2).sum()   # noqa: E731
    got = fnx.autograd.grad(sum((g * g).sum() for g in fnx.autograd.grad(square(x, w, b), [x, w], create_graph=True)),
                            [x, w, b])
    want = fnx.grad(lambda *a: sum((g * g).sum() for g in fnx.grad(square, argnums=(0, 1))(*a)), argnums=(0, 1, 2))(
        *(t.detach() for t in (x, w, b)))
    for a, e in zip(got, want):
        np.testing.assert_allclose(a.numpy(), e.numpy(), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,stride,bias", [((3, 8, 9, 9), (1, 1), True), ((2, 16, 4, 4), (1, 1), False),
                                                ((2, 8, 9, 7), (2, 3), True), ((4, 8, 11), (2,), False),
                                                ((2, 8, 3, 4, 5), (1, 2, 1), True)])
def test_pointwise_convolutions_run_as_matrix_products_and_equal_the_composite(shape, stride, bias, dtype,
                                                                                monkeypatch):
    """1 x 1 kernels without padding (strided ones too, and transposed) skip the direct loops' frames."""
    def unused(*args):
        raise AssertionError("a pointwise convolution ran the direct loops")
    for name in ("pad_cl", "conv_direct", "conv_weight_direct"):
        monkeypatch.setattr(windows.native, name, unused)
    nd = len(shape) - 2
    case = dict(nd=nd, groups=1, stride=stride, dilation=(1,) * nd, padding=(0,) * nd, x=shape,
                w=(24, shape[1]) + (1,) * nd, bias=bias, dtype=dtype)
    _check_against_the_composite(case)
    case.update(w=(shape[1], 24) + (1,) * nd, out=24, output_padding=(0,) * nd)
    f = lambda x, w, b: _CONV_TRANSPOSE[nd](x, w, b, stride=stride)   # noqa: E731
    _check_against_the_composite(case, f)


@given(case=_cases(), transposed=st.booleans())
@settings(max_examples=25, deadline=None)
def test_convolutions_by_columns_equal_the_composite_for_any_geometry(case, transposed):
    """Every convolution run by columns (the ratio and work thresholds at zero, no bound on the columns): strides, dilations, paddings,
    1-3 spatial dims, transposed ones with their output padding."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(direct, "COLUMNS_RATIO", 0)
        m.setattr(direct, "COLUMNS_WORK", 0)
        m.setattr(direct, "COLUMNS_SIZE", 1 << 30)
        if not transposed:
            _check_against_the_composite(case)
            return
        nd, (n, c), w = case["nd"], case["x"][:2], case["w"]
        reach = [m_ + 2 * p - d * (k - 1) - 1 for m_, p, d, k in zip(case["x"][2:], case["padding"], case["dilation"],
                                                                    w[2:])]
        if min(reach) < 0:
            return
        params = {k: case[k] for k in ("stride", "padding", "dilation", "groups")}
        case = dict(case, x=(n, w[0]) + tuple(r // s + 1 for r, s in zip(reach, case["stride"])),
                    w=(w[0], c // case["groups"]) + w[2:], out=c,
                    output_padding=tuple(r % s for r, s in zip(reach, case["stride"])))
        _check_against_the_composite(case, lambda x, w, b: _CONV_TRANSPOSE[nd](
            x, w, b, output_padding=case["output_padding"], **params))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("last", [False, True])
@pytest.mark.parametrize("nd,x,w,geometry,bias", [
    (2, (2, 256, 4, 4), (256, 256, 3, 3), dict(padding=(1, 1)), True),
    (2, (4, 256, 6, 6), (256, 256, 3, 3), dict(padding=(1, 1), stride=(2, 2)), False),
    (2, (2, 256, 5, 5), (256, 256, 3, 3), dict(padding=(2, 2), dilation=(2, 2)), True),
    (1, (4, 512, 8), (512, 512, 3), dict(padding=(0,)), False)])
def test_weights_many_times_the_input_run_by_columns_and_equal_the_composite(nd, x, w, geometry, bias, last, dtype,
                                                                              monkeypatch):
    """U-Net's 4 x 4 layers: a weight at least COLUMNS_RATIO times the input, 2^24 multiply-adds or more, goes by
    im2col's columns and one product (a channels-last input and output moved to row-major and back)."""
    def unused(*args):
        raise AssertionError("a convolution by columns ran the direct loops")
    for name in ("pad_cl", "conv_direct", "conv_weight_direct"):
        monkeypatch.setattr(windows.native, name, unused)
    params = {"stride": (1,) * nd, "dilation": (1,) * nd, **geometry}
    case = dict(nd=nd, groups=1, x=x, w=w, bias=bias, dtype=dtype, **params)
    fmt = fnx.channels_last if last and nd == 2 else fnx.contiguous_format

    _check_against_the_composite(case, lambda x, w, b: _CONV[nd](x.to(memory_format=fmt), w, b, **params))
    tx = fnx.randn(*x, dtype=fnx.float64).to(memory_format=fmt).requires_grad_()
    y = _CONV[nd](tx, fnx.randn(*w, dtype=fnx.float64), None, **params)
    y.backward(fnx.randn(*y.shape, dtype=fnx.float64).to(memory_format=fmt))
    assert layout.channels_last(y.detach().numpy()) == layout.channels_last(tx.grad.numpy()) == (fmt is not
                                                                                                fnx.contiguous_format)
    reach = [m + 2 * p - d * (k - 1) - 1 for m, p, d, k in zip(x[2:], params["padding"], params["dilation"], w[2:])]
    case.update(x=(x[0], w[0]) + tuple(r // s + 1 for r, s in zip(reach, params["stride"])), out=w[1],
                output_padding=tuple(r % s for r, s in zip(reach, params["stride"])))   # back to x's shape
    # transposed: conv_input_grad by columns, and its gradients
    f = lambda x, w, b: _CONV_TRANSPOSE[nd](x.to(memory_format=fmt), w, b, **params)   # noqa: E731
    _check_against_the_composite(case, f)


def test_columns_larger_than_the_weight_are_not_written(monkeypatch):
    """A 3-D convolution whose 7 x 7 x 7 kernel would make columns 8 times the weight's size runs the direct
    loops, though its weight holds 8 times the input's elements (the ratio that pays)."""
    def unused(*args, **kwargs):
        raise AssertionError("columns larger than the weight were written")
    monkeypatch.setattr(direct, "_columns", unused)
    x, w = fnx.randn(1, 16, 8, 8, 8), fnx.randn(16, 16, 7, 7, 7)
    assert w.numel() >= direct.COLUMNS_RATIO * x.numel() and w.numel() * 512 >= direct.COLUMNS_WORK
    _close(F.conv3d(x, w, padding=3).numpy(), F.conv3d(x.double(), w.double(), padding=3).numpy(), np.float32)
