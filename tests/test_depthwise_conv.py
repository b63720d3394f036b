"""Eager depthwise convolutions (groups = input channels, one input channel a group) run fnx/ops/depthwise_conv.py's
C loops: forward, input gradient (phase by phase of the strides) and weight gradient, with any channel multiplier,
equal the composite form that transforms run, and so do the transposed ones (their input gradient); grad of grad
on the eager tape equals the composite's; chunks of samples, tails of the vector runs and the pool's tasks give the
same values."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fnx
import fnx.nn.functional as F
from fnx.ops import depthwise_conv
from test_conv_direct import _CONV, _CONV_TRANSPOSE, _check_against_the_composite, _close, _inputs


def _geometry(draw, most_dims: int) -> tuple:
    """(nd, kernel, stride, dilation) of a drawn depthwise convolution."""
    nd = draw(st.integers(1, most_dims))
    return nd, *(tuple(draw(st.integers(1, most)) for _ in range(nd)) for most in (4, 3, 2))


@st.composite
def _cases(draw):
    nd, kernel, stride, dilation = _geometry(draw, 3)
    padding = tuple(draw(st.integers(0, 2)) for _ in range(nd))
    side = 12 if nd < 3 else 5
    spatial = tuple(d * (k - 1) + 1 + draw(st.integers(0, side)) for k, d in zip(kernel, dilation))
    n, c, m = draw(st.integers(1, 4)), draw(st.integers(2, 6)), draw(st.integers(1, 3))
    return dict(nd=nd, groups=c, stride=stride, dilation=dilation, padding=padding, x=(n, c) + spatial,
                w=(c * m, 1) + kernel, bias=draw(st.booleans()), dtype=draw(st.sampled_from([np.float32, np.float64])))


def _binds_depthwise(case) -> bool:
    x, w, b = _inputs(case)
    params = {k: case[k] for k in ("stride", "padding", "dilation", "groups")}
    y = _CONV[case["nd"]](fnx.tensor(x, requires_grad=True), fnx.tensor(w), None, **params)
    return y.grad_fn.name == "Depthwise_convBackward"


@given(case=_cases())
@settings(max_examples=40, deadline=None)
def test_eager_depthwise_conv_and_gradients_equal_the_composite(case):
    assert _binds_depthwise(case)
    _check_against_the_composite(case)


@st.composite
def _transpose_cases(draw):
    nd, kernel, stride, dilation = _geometry(draw, 2)
    output_padding = tuple(draw(st.integers(0, max(s, d) - 1)) for s, d in zip(stride, dilation))
    padding = tuple(draw(st.integers(0, (d * (k - 1) + o) // 2)) for k, d, o in zip(kernel, dilation, output_padding))
    spatial = tuple(draw(st.integers(1, 9)) for _ in range(nd))
    n, c = draw(st.integers(1, 3)), draw(st.integers(2, 5))
    return dict(nd=nd, groups=c, stride=stride, dilation=dilation, padding=padding, output_padding=output_padding,
                x=(n, c) + spatial, w=(c, 1) + kernel, out=c, bias=draw(st.booleans()),
                dtype=draw(st.sampled_from([np.float32, np.float64])))


@given(case=_transpose_cases())
@settings(max_examples=25, deadline=None)
def test_eager_depthwise_transposed_conv_and_gradients_equal_the_composite(case):
    params = {k: case[k] for k in ("stride", "padding", "output_padding", "groups", "dilation")}
    f = lambda x, w, b: _CONV_TRANSPOSE[case["nd"]](x, w, b, **params)   # noqa: E731
    x, w, _ = _inputs(case)
    assert f(fnx.tensor(x, requires_grad=True), fnx.tensor(w), None).grad_fn.name == \
        "Depthwise_conv_input_gradBackward"
    _check_against_the_composite(case, f)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("stride", [1, 2])
def test_large_depthwise_convolutions_in_chunks_and_vector_tails_equal_the_composite(threads, dtype, stride,
                                                                                      monkeypatch):
    # 3 samples a chunk (the frame's budget cut to 3 samples' blocks): chunks of 3, 3 and 1; runs of 4 vectors,
    # then single vectors, then scalars; MobileNet's 3 x 3 with padding 1 and a multiplier of 2
    out = ((32 - 1) // stride + 1, (31 - 1) // stride + 1)
    geometry = (7, 24, 2, (32, 31), out, (3, 3), (stride, stride), (1, 1), (1, 1))
    sizes = depthwise_conv._plan(*geometry)["sizes"]   # ... P phases, S samples a chunk, a phase's Dq Hq Wq ...
    monkeypatch.setattr(depthwise_conv, "FRAME_VALUES", 3 * sizes[16] * sizes[18] * sizes[19] * sizes[20])
    depthwise_conv._plan.cache_clear()
    saved = fnx.get_num_threads()
    fnx.set_num_threads(threads)
    try:
        assert depthwise_conv._plan(*geometry)["sizes"][17] == 3
        case = dict(nd=2, groups=24, stride=(stride, stride), dilation=(1, 1), padding=(1, 1), x=(7, 24, 32, 31),
                    w=(48, 1, 3, 3), bias=True, dtype=dtype)
        _check_against_the_composite(case)
    finally:
        fnx.set_num_threads(saved)
        depthwise_conv._plan.cache_clear()


@pytest.mark.parametrize("wrt", ["input", "weight"])
def test_grad_of_grad_of_a_depthwise_conv_on_the_eager_tape_equals_the_composite(wrt):
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((2, 3, 7, 6)), rng.standard_normal((6, 1, 3, 2))
    v = rng.standard_normal(x.shape if wrt == "input" else w.shape)
    f = lambda x, w: F.conv2d(x, w, stride=(2, 1), padding=1, dilation=(1, 2), groups=3)   # noqa: E731

    def first(x, w):
        return fnx.grad(lambda x, w: (f(x, w) ** 2).sum(), argnums=0 if wrt == "input" else 1)(x, w)

    want = fnx.grad(lambda x, w: (first(x, w) * fnx.tensor(v)).sum(), argnums=(0, 1))(fnx.tensor(x), fnx.tensor(w))
    tx, tw = fnx.tensor(x, requires_grad=True), fnx.tensor(w, requires_grad=True)
    (g,) = fnx.autograd.grad((f(tx, tw) ** 2).sum(), [tx if wrt == "input" else tw], create_graph=True)
    (g * fnx.tensor(v)).sum().backward()
    for leaf, grad in zip((tx, tw), want):
        np.testing.assert_allclose(leaf.grad.numpy(), grad.numpy(), rtol=1e-10, atol=1e-10)


def test_depthwise_gradients_match_finite_differences():
    rng = np.random.default_rng(8)
    x, w, b = (fnx.tensor(rng.standard_normal(s), requires_grad=True) for s in ((2, 3, 6, 5), (6, 1, 3, 3), (6,)))
    assert fnx.autograd.gradcheck(lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=(2, 1), groups=3), (x, w, b))


def test_depthwise_primitives_run_only_in_eager_mode_on_what_the_loops_take(monkeypatch):
    x, w = fnx.randn(2, 4, 6, 6, requires_grad=True), fnx.randn(4, 1, 3, 3, requires_grad=True)
    assert F.conv2d(x, w, groups=4).grad_fn.name == "Depthwise_convBackward"
    prims = {e.prim.name for e in fnx.make_jaxpr(lambda x, w: F.conv2d(x, w, groups=4))(x.detach(), w.detach()).eqns}
    assert "depthwise_conv" not in prims and "im2col" in prims
    assert F.conv2d(x[:, :2], fnx.randn(4, 1, 3, 3), groups=2).grad_fn.name == "Depthwise_convBackward"   # m = 2
    assert F.conv2d(x, fnx.randn(4, 2, 3, 3), groups=2).grad_fn.name != "Depthwise_convBackward"   # 2 a group
    half = F.conv2d(x.to(fnx.float16), w.to(fnx.float16), groups=4)
    assert half.grad_fn.name != "Depthwise_convBackward"
    monkeypatch.setattr(depthwise_conv, "native", None)
    y = F.conv2d(x, w, groups=4)
    assert y.grad_fn.name != "Depthwise_convBackward"
    _close(y.detach().numpy(), F.conv2d(x.detach().double(), w.detach().double(), groups=4).numpy(), np.float32)
