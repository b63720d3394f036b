"""fnx.nn.functional against float64 numpy references written out loop by loop, and gradients against
finite differences. Convolution and pooling parameters are drawn by hypothesis."""
import contextlib
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fnx
import fnx.nn.functional as F
from fnx.nn import functional_norm as FN
from fnx.autograd import gradcheck
from op_db_conv import ref_avg_pool2d, ref_conv2d, ref_conv_transpose2d, ref_max_pool2d

RNG = np.random.default_rng(0)


def T(a, requires_grad=False):
    return fnx.tensor(np.asarray(a), requires_grad=requires_grad)


def npy(t):
    return t.detach().numpy()


def close(a, b, tol=1e-10):
    np.testing.assert_allclose(npy(a), b, rtol=tol, atol=tol)


# ---------------------------------------------------------------- numpy references
def ref_log_softmax(x, axis):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


# ---------------------------------------------------------------- convolution
@st.composite
def conv_case(draw):
    groups = draw(st.sampled_from([1, 2]))
    cin, cout = groups * draw(st.integers(1, 2)), groups * draw(st.integers(1, 2))
    k = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    s = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    d = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    p = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    h = draw(st.integers(max(1, d[0] * (k[0] - 1) + 1 - 2 * p[0]), 6))
    w = draw(st.integers(max(1, d[1] * (k[1] - 1) + 1 - 2 * p[1]), 6))
    return groups, cin, cout, k, s, d, p, h, w, draw(st.booleans())


@settings(max_examples=25)
@given(conv_case())
def test_conv2d_matches_loops(case):
    groups, cin, cout, k, s, d, p, h, w, bias = case
    x = RNG.standard_normal((2, cin, h, w))
    wt = RNG.standard_normal((cout, cin // groups) + k)
    b = RNG.standard_normal(cout) if bias else None
    out = F.conv2d(T(x), T(wt), None if b is None else T(b), s, p, d, groups)
    close(out, ref_conv2d(x, wt, b, s, p, d, groups))


@settings(max_examples=25)
@given(conv_case(), st.integers(0, 1), st.integers(0, 1))
def test_conv_transpose2d_matches_scatter(case, op_h, op_w):
    groups, cin, cout, k, s, d, p, h, w, _ = case
    op = (min(op_h, max(s[0], d[0]) - 1), min(op_w, max(s[1], d[1]) - 1))
    p = tuple(min(pi, (di * (ki - 1) + (n - 1) * si) // 2) for pi, di, ki, n, si in zip(p, d, k, (h, w), s))
    x = RNG.standard_normal((2, cin, h, w))
    wt = RNG.standard_normal((cin, cout // groups) + k)
    out = F.conv_transpose2d(T(x), T(wt), None, s, p, op, groups, d)
    close(out, ref_conv_transpose2d(x, wt, s, p, op, groups, d))


def test_conv_padding_strings_1d_3d_and_unbatched():
    x = RNG.standard_normal((1, 2, 5, 4))
    w = RNG.standard_normal((3, 2, 2, 3))
    same = F.conv2d(T(x), T(w), padding="same", dilation=(1, 2))
    assert same.shape == (1, 3, 5, 4)
    # 'same' pads the extra row/column at the end, as PyTorch does
    xp = np.pad(x, ((0, 0), (0, 0), (0, 1), (2, 2)))
    close(same, ref_conv2d(xp, w, None, (1, 1), (0, 0), (1, 2), 1))
    close(F.conv2d(T(x), T(w), padding="valid"), ref_conv2d(x, w, None, (1, 1), (0, 0), (1, 1), 1))
    close(F.conv2d(T(x[0]), T(w)), ref_conv2d(x, w, None, (1, 1), (0, 0), (1, 1), 1)[0])
    x1, w1 = x[:, :, 0], w[:, :, 0]
    close(F.conv1d(T(x1), T(w1), stride=2, padding=1),
          ref_conv2d(x1[:, :, None], w1[:, :, None], None, (1, 2), (0, 1), (1, 1), 1)[:, :, 0])
    x3 = RNG.standard_normal((1, 2, 3, 3, 3))
    w3 = RNG.standard_normal((2, 2, 2, 2, 2))
    out3 = F.conv3d(T(x3), T(w3))
    assert out3.shape == (1, 2, 2, 2, 2)
    for z, y in itertools.product(range(2), range(2)):
        expect = (x3[0, :, z:z + 2, y:y + 2, 0:2] * w3[1]).sum()
        assert abs(out3[0, 1, z, y, 0].item() - expect) < 1e-10
    x1t = RNG.standard_normal((1, 2, 4))
    w1t = RNG.standard_normal((2, 3, 3))
    close(F.conv_transpose1d(T(x1t), T(w1t), stride=2),
          ref_conv_transpose2d(x1t[:, :, None], w1t[:, :, None], (1, 2), (0, 0), (0, 0), 1, (1, 1))[:, :, 0])


def test_conv_errors_name_shapes():
    with pytest.raises(RuntimeError, match="expected input.*to have 4 channels, but got 3"):
        F.conv2d(fnx.zeros(1, 3, 5, 5), fnx.zeros(2, 4, 3, 3))
    with pytest.raises(ValueError, match="not supported for strided"):
        F.conv2d(fnx.zeros(1, 3, 5, 5), fnx.zeros(2, 3, 3, 3), stride=2, padding="same")
    with pytest.raises(RuntimeError, match="Kernel size can't be greater"):
        F.conv2d(fnx.zeros(1, 3, 2, 2), fnx.zeros(2, 3, 3, 3))


def test_conv_gradients_match_finite_differences():
    x = T(RNG.standard_normal((1, 2, 4, 4)), True)
    w = T(RNG.standard_normal((4, 1, 2, 3)), True)
    b = T(RNG.standard_normal(4), True)
    assert gradcheck(lambda x, w, b: F.conv2d(x, w, b, (2, 1), 1, (1, 2), 2), (x, w, b))
    wt = T(RNG.standard_normal((2, 2, 2, 2)), True)
    assert gradcheck(lambda x, w: F.conv_transpose2d(x, w, None, 2, 1, 1), (x, wt))


# ---------------------------------------------------------------- pooling
@st.composite
def pool_case(draw):
    k = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    s = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    d = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    p = tuple(draw(st.integers(0, (di * (ki - 1) + 1) // 2)) for ki, di in zip(k, d))
    h = draw(st.integers(d[0] * (k[0] - 1) + 1, 6))
    w = draw(st.integers(d[1] * (k[1] - 1) + 1, 6))
    return k, s, d, p, h, w, draw(st.booleans())


@settings(max_examples=25)
@given(pool_case())
def test_max_pool2d_values_and_indices(case):
    k, s, d, p, h, w, ceil = case
    x = RNG.permutation(2 * 3 * h * w).reshape(2, 3, h, w).astype(np.float64)  # distinct values
    out, idx = F.max_pool2d(T(x), k, s, p, d, ceil_mode=ceil, return_indices=True)
    ref, ref_idx = ref_max_pool2d(x, k, s, p, d, ceil)
    close(out, ref)
    np.testing.assert_array_equal(idx.numpy(), ref_idx)


@settings(max_examples=25)
@given(pool_case(), st.booleans())
def test_avg_pool2d_divisors(case, count_include_pad):
    k, s, _, p, h, w, ceil = case
    p = tuple(min(pi, ki // 2) for pi, ki in zip(p, k))
    x = RNG.standard_normal((2, 2, h, w))
    out = F.avg_pool2d(T(x), k, s, p, ceil_mode=ceil, count_include_pad=count_include_pad)
    close(out, ref_avg_pool2d(x, k, s, p, ceil, count_include_pad))


def test_adaptive_pools_and_1d_forms():
    x = RNG.standard_normal((2, 3, 5, 7))
    out = F.adaptive_avg_pool2d(T(x), (3, 2))
    ref = np.zeros((2, 3, 3, 2))
    for i, j in itertools.product(range(3), range(2)):
        r0, r1 = (i * 5) // 3, -((-(i + 1) * 5) // 3)
        q0, q1 = (j * 7) // 2, -((-(j + 1) * 7) // 2)
        ref[:, :, i, j] = x[:, :, r0:r1, q0:q1].mean(axis=(2, 3))
    close(out, ref)
    close(F.adaptive_avg_pool2d(T(x), 1), x.mean(axis=(2, 3), keepdims=True))
    close(F.adaptive_avg_pool2d(T(x), (None, 7)), x)
    close(F.adaptive_max_pool2d(T(x), 1), x.max(axis=(2, 3), keepdims=True))
    x1 = x[:, :, 0]
    close(F.max_pool1d(T(x1), 2), np.maximum(x1[:, :, 0:6:2], x1[:, :, 1:7:2]))
    close(F.avg_pool1d(T(x1), 3, 2), (x1[:, :, 0:5:2] + x1[:, :, 1:6:2] + x1[:, :, 2:7:2]) / 3)


@pytest.mark.parametrize("kernel, size, ceil", [((4, 3), (8, 9), False), ((2, 2), (7, 5), False),
                                                ((4, 4), (4, 4), False), ((2, 3), (5, 7), True)])
def test_avg_pools_whose_windows_tile_the_input_match_the_reference_and_gradients(kernel, size, ceil):
    # stride = kernel, no padding: a reshape's sum (an input tail past the last window dropped; ceil_mode's partial
    # windows keep the windows' form)
    x = RNG.standard_normal((2, 3) + size)
    close(F.avg_pool2d(T(x), kernel, ceil_mode=ceil), ref_avg_pool2d(x, kernel, kernel, (0, 0), ceil, True))
    t = T(x[:1, :1], True)
    assert gradcheck(lambda t: F.avg_pool2d(t, kernel, ceil_mode=ceil), (t,))
    x3 = RNG.standard_normal((1, 2, 4, 5, 6))
    want = x3[:, :, :4, :4, :6].reshape(1, 2, 2, 2, 2, 2, 3, 2).mean(axis=(3, 5, 7))
    close(F.avg_pool3d(T(x3), 2), want)


def test_pool_errors():
    with pytest.raises(RuntimeError, match="pad should be at most half"):
        F.max_pool2d(fnx.zeros(1, 1, 4, 4), 2, padding=2)


def test_pool_gradients():
    x = T(RNG.permutation(32).reshape(1, 2, 4, 4) / 7.0, True)
    assert gradcheck(lambda x: F.max_pool2d(x, 3, 2, 1), (x,))
    assert gradcheck(lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False), (x,))
    assert gradcheck(lambda x: F.adaptive_avg_pool2d(x, (3, 2)), (x,))


def test_max_pool_gradient_goes_to_the_first_maximum_like_pytorch():
    x = fnx.zeros(1, 1, 2, 2, requires_grad=True)
    F.max_pool2d(x, 2).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy()[0, 0], [[1.0, 0.0], [0.0, 0.0]])


def test_max_pool_output_may_be_written_in_place_before_backward():
    """PyTorch's max-pool backward reads the input and the argmax positions, not the pooled values: the spatial
    transformer tutorial's `nn.MaxPool2d(2), nn.ReLU(True)` rectifies them in place (also under saved-tensor hooks)."""
    x = fnx.tensor([[[[1.0, -2.0], [-3.0, -4.0]], [[-5.0, -1.0], [-6.0, -7.0]]]], requires_grad=True)
    for hooks in (contextlib.nullcontext(), fnx.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t)):
        x.grad = None
        with hooks:
            y = F.relu(F.max_pool2d(x * 2, 2), inplace=True)
        y.sum().backward()
        assert y.flatten().tolist() == [2.0, 0.0]
        assert x.grad.flatten().tolist() == [2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]


def test_max_pool_ties_and_nans_pick_pytorchs_index():
    """Ties go to the first maximum of the window (row-major); a window holding NaN gives NaN at its last NaN."""
    x = np.array([[1.0, 3.0, 3.0, 0.0], [3.0, 2.0, np.nan, np.nan], [5.0, 5.0, 1.0, 1.0], [5.0, 5.0, 1.0, 1.0]])
    out, idx = F.max_pool2d(T(x[None, None]), 2, return_indices=True)
    np.testing.assert_array_equal(out.numpy()[0, 0], [[3.0, np.nan], [5.0, 1.0]])
    np.testing.assert_array_equal(idx.numpy()[0, 0], [[1, 7], [8, 10]])
    overlapping = F.max_pool2d(T(x[None, None]), 3, stride=1, return_indices=True)[1]
    np.testing.assert_array_equal(overlapping.numpy()[0, 0], [[6, 7], [6, 7]])


def test_unfold_fold_are_transposes():
    x = RNG.standard_normal((2, 3, 5, 4))
    cols = F.unfold(T(x), (2, 3), dilation=1, padding=1, stride=(2, 1))
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    oh, ow = (7 - 2) // 2 + 1, (6 - 3) + 1
    ref = np.stack([xp[:, :, i * 2:i * 2 + 2, j:j + 3].reshape(2, -1) for i in range(oh) for j in range(ow)], -1)
    close(cols, ref)
    y = RNG.standard_normal(tuple(cols.shape))
    # <unfold(x), y> == <x, fold(y)>
    lhs = (ref * y).sum()
    rhs = (x * npy(F.fold(T(y), (5, 4), (2, 3), padding=1, stride=(2, 1)))).sum()
    assert abs(lhs - rhs) < 1e-9
    with pytest.raises(RuntimeError, match=r"number of sliding blocks 3 \* 4 = 12, but got input.size\(2\)=11"):
        F.fold(fnx.zeros(2, 18, 11), (5, 4), (2, 3), padding=1, stride=(2, 1))


def test_interpolate_modes():
    x = RNG.standard_normal((1, 2, 3, 4))
    near = F.interpolate(T(x), scale_factor=2)
    close(near, x.repeat(2, axis=2).repeat(2, axis=3))
    lin = F.interpolate(T(x), size=(5, 7), mode="bilinear", align_corners=True)
    rows, cols = np.linspace(0, 2, 5), np.linspace(0, 3, 7)
    ref = np.empty((1, 2, 5, 7))
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            r0, c0 = min(int(r), 1), min(int(c), 2)
            a, b = r - r0, c - c0
            ref[:, :, i, j] = ((1 - a) * (1 - b) * x[:, :, r0, c0] + a * (1 - b) * x[:, :, r0 + 1, c0]
                               + (1 - a) * b * x[:, :, r0, c0 + 1] + a * b * x[:, :, r0 + 1, c0 + 1])
    close(lin, ref)
    close(F.interpolate(T(x), size=(1, 2), mode="area"), x.reshape(1, 2, 1, 3, 2, 2).mean(axis=(3, 5)))


# ---------------------------------------------------------------- activations and softmax
ACTIVATIONS = {
    "relu": lambda x: np.maximum(x, 0), "relu6": lambda x: np.clip(x, 0, 6),
    "elu": lambda x: np.where(x > 0, x, np.expm1(x)), "leaky_relu": lambda x: np.where(x > 0, x, 0.01 * x),
    "selu": lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(x)),
    "celu": lambda x: np.where(x > 0, x, np.expm1(x)),
    "gelu": lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2))),
    "silu": lambda x: x / (1 + np.exp(-x)), "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "tanh": np.tanh,
    "softplus": lambda x: np.log1p(np.exp(x)), "mish": lambda x: x * np.tanh(np.log1p(np.exp(x))),
    "hardtanh": lambda x: np.clip(x, -1, 1), "hardsigmoid": lambda x: np.clip(x / 6 + 0.5, 0, 1),
    "hardswish": lambda x: x * np.clip(x / 6 + 0.5, 0, 1), "logsigmoid": lambda x: -np.log1p(np.exp(-x)),
    "softsign": lambda x: x / (1 + np.abs(x)), "tanhshrink": lambda x: x - np.tanh(x),
    "hardshrink": lambda x: np.where(np.abs(x) > 0.5, x, 0), "softshrink": lambda x: np.sign(x) * np.maximum(
        np.abs(x) - 0.5, 0),
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_values_and_gradients(name):
    x = RNG.standard_normal((3, 4)) * 3
    x = np.where(np.abs(x) < 0.05, 0.3, x)
    x = np.where(np.abs(np.abs(x) - 0.5) < 0.05, 0.7, x)
    fn = getattr(F, name)
    close(fn(T(x)), ACTIVATIONS[name](x), 1e-8)
    if name not in ("relu6", "hardtanh", "hardsigmoid", "hardswish"):  # kinks at +-1, +-3, 6
        assert gradcheck(fn, (T(x, True),))


def test_softplus_takes_x_above_its_threshold_and_float32_needs_no_select_for_it():
    """PyTorch's softplus is x above the threshold (gradient 1). float32's default (beta 1, threshold 20) leaves
    out the select: there its softplus rounds to x and its sigmoid to 1, so values and gradients are the
    select's, bit for bit; float64 and other betas keep it."""
    x = np.concatenate([np.linspace(-30, 30, 4001), [20.0, 20.000002, 25.0, 1e6, 3e38, -np.inf, np.inf]])
    for dtype, beta, select in [(np.float32, 1.0, False), (np.float64, 1.0, True), (np.float32, 2.0, True)]:
        t = fnx.tensor(x.astype(dtype), requires_grad=True)
        with np.errstate(over="ignore"):   # 3e38 * 2 in float32
            y = F.softplus(t, beta)
            y.sum().backward()
        above = x * beta > 20
        assert np.array_equal(y.detach().numpy()[above], x.astype(dtype)[above])
        assert np.all(t.grad.numpy()[above] == 1)
        close(y[~above], np.logaddexp(0, beta * x[~above]) / beta, 1e-6)
        assert ("select" in str(fnx.make_jaxpr(lambda a: F.softplus(a, beta))(t.detach()))) == select


def test_gelu_tanh_glu_prelu_threshold():
    x = RNG.standard_normal((2, 4))
    tanh_gelu = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    close(F.gelu(T(x), approximate="tanh"), tanh_gelu, 1e-8)
    close(F.glu(T(x)), x[:, :2] / (1 + np.exp(-x[:, 2:])))
    w = np.array([0.1, 0.2])
    x3 = RNG.standard_normal((2, 2, 3))
    close(F.prelu(T(x3), T(w)), np.where(x3 > 0, x3, w[None, :, None] * x3))
    close(F.threshold(T(x), 0.1, 20.0), np.where(x > 0.1, x, 20.0))


def test_activation_gradient_is_finite_for_large_inputs():
    x = fnx.tensor([-100.0, 100.0, 1000.0], dtype=fnx.float32, requires_grad=True)
    F.elu(x).sum().backward()
    assert np.all(np.isfinite(x.grad.numpy()))


def test_inplace_activations_write_into_the_input():
    x = fnx.tensor([-1.0, 2.0])
    y = F.relu(x, inplace=True)
    assert y is x and x.tolist() == [0.0, 2.0]
    leaf = fnx.tensor([-1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        F.relu(leaf, inplace=True)
    h = leaf * 1.0
    F.leaky_relu(h, 0.5, inplace=True).sum().backward()
    assert leaf.grad.tolist() == [0.5, 1.0]
    # relu_ keeps no copy of the old value (its gradient reads the result): the gradient is still the old sign's
    a = fnx.tensor(RNG.standard_normal((3, 5)), requires_grad=True)
    w = RNG.standard_normal((3, 5))
    for act in (fnx.nn.ReLU(inplace=True), lambda t: t.relu_()):
        a.grad = None
        h = a * 1.0
        out = act(h)
        assert out is h and np.array_equal(h.detach().numpy(), np.maximum(a.detach().numpy(), 0))
        (out * T(w)).sum().backward()
        np.testing.assert_array_equal(a.grad.numpy(), np.where(a.detach().numpy() > 0, w, 0.0))


def test_leaky_relu_is_the_select_bit_for_bit_and_its_gradient_at_zero_is_the_slope():
    x = np.array([-np.inf, -3.5, -1e-45, -0.0, 0.0, 1e-45, 2.25, np.inf, np.nan], np.float32)
    for slope in (0.2, 0.01, 0.0):
        with np.errstate(invalid="ignore"):   # -inf * 0 is NaN in both forms
            got, want = F.leaky_relu(T(x), slope).numpy(), np.where(x > 0, x, x * np.float32(slope))
        assert got.dtype == np.float32 and np.array_equal(got.view(np.int32), want.view(np.int32))
    leaf = fnx.tensor([-2.0, 0.0, 3.0], dtype=fnx.float64, requires_grad=True)
    F.leaky_relu(leaf, 0.2).sum().backward()
    assert leaf.grad.tolist() == [0.2, 0.2, 1.0]


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_family(dim):
    x = RNG.standard_normal((3, 4, 2)) * 5
    ref = ref_log_softmax(x, dim)
    close(F.log_softmax(T(x), dim), ref)
    close(F.softmax(T(x), dim), np.exp(ref))
    close(F.softmin(T(x), dim), np.exp(ref_log_softmax(-x, dim)))
    assert gradcheck(lambda t: F.log_softmax(t, dim), (T(x[:2, :2], True),))
    assert gradcheck(lambda t: F.softmax(t, dim), (T(x[:2, :2], True),))


def test_softmax_is_stable_and_defaults_dim_with_a_warning():
    big = fnx.tensor([1000.0, 1001.0, -1000.0])
    np.testing.assert_allclose(F.softmax(big, 0).numpy(), [1 / (1 + math.e), math.e / (1 + math.e), 0], rtol=1e-6)
    assert np.isfinite(F.log_softmax(big, 0).numpy()).all()
    with pytest.warns(UserWarning, match="Implicit dimension"):
        assert F.softmax(fnx.ones(2, 3)).shape == (2, 3)
    assert F.softmax(fnx.ones(2, 3), dtype=fnx.float64).dtype == fnx.float64


def test_warnings_point_at_the_users_line():
    """However deep inside fnx a warning is raised (a module's forward calling F.softmax or a loss), it names
    this file."""
    with pytest.warns(UserWarning) as record:
        fnx.nn.Softmax()(fnx.ones(2, 3))
        fnx.nn.KLDivLoss()(fnx.zeros(2, 3), fnx.ones(2, 3))
        fnx.nn.MSELoss()(fnx.zeros(2, 3), fnx.ones(3))
    assert len(record) == 3
    assert [w.filename for w in record] == [__file__] * 3, [str(w.message)[:30] for w in record]


# ---------------------------------------------------------------- normalization
def test_batch_norm_training_updates_running_stats():
    x = RNG.standard_normal((4, 3, 2))
    rm, rv = fnx.zeros(3, dtype=fnx.float64), fnx.ones(3, dtype=fnx.float64)
    w, b = RNG.standard_normal(3), RNG.standard_normal(3)
    out = F.batch_norm(T(x), rm, rv, T(w), T(b), training=True, momentum=0.3, eps=1e-3)
    mean, var = x.mean(axis=(0, 2)), x.var(axis=(0, 2))
    ref = (x - mean[None, :, None]) / np.sqrt(var[None, :, None] + 1e-3) * w[None, :, None] + b[None, :, None]
    close(out, ref)
    close(rm, 0.3 * mean)
    close(rv, 0.7 + 0.3 * var * 8 / 7)  # the running variance is unbiased
    ev = F.batch_norm(T(x), rm, rv, training=False, eps=1e-3)
    close(ev, (x - npy(rm)[None, :, None]) / np.sqrt(npy(rv)[None, :, None] + 1e-3))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        F.batch_norm(fnx.ones(1, 3), None, None, training=True)


@pytest.mark.parametrize("last", [False, True])
def test_batch_norm_updates_running_stats_in_place_with_the_new_values_bits(monkeypatch, last):
    """Eager training: nn.BatchNorm2d and F.batch_norm update the running statistics in their own arrays (the
    buffers' identity and memory kept, their version bumped) with exactly the values the out-of-place update
    computes (running * (1 - momentum) + momentum * batch, the variance unbiased)."""
    rng = np.random.default_rng(3)
    xs = [fnx.tensor(rng.standard_normal((4, 16, 8, 8)).astype(np.float32) * 3 + 1) for _ in range(3)]
    if last:
        xs = [x.to(memory_format=fnx.channels_last) for x in xs]
    def run():
        fnx.manual_seed(0)
        bn = fnx.nn.BatchNorm2d(16, momentum=0.3)
        arrays, version = (bn.running_mean.numpy(), bn.running_var.numpy()), bn.running_mean._version[0]
        rm, rv = fnx.zeros(16), fnx.ones(16)
        for x in xs:
            bn(x.requires_grad_()).sum().backward()
            F.batch_norm(x, rm, rv, training=True, momentum=0.2)
        assert bn.running_mean.numpy() is arrays[0] and bn.running_var.numpy() is arrays[1]
        assert bn.running_mean._version[0] == version + len(xs)
        return [t.numpy().copy() for t in (bn.running_mean, bn.running_var, rm, rv)]
    in_place = run()
    monkeypatch.setattr(FN, "_updated_in_place", lambda *args: False)
    for got, want in zip(in_place, run()):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", ["running_mean", "running_var", "weight", "bias"])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_names_a_per_channel_tensor_of_another_channel_count(name, training):
    """As PyTorch: "<name> should contain 4 elements not 16", where numpy's broadcast error came out (a BatchNorm2d
    built for 16 channels on a 4-channel input), channels-last inputs and modules too."""
    given = {"running_mean": fnx.zeros(4), "running_var": fnx.ones(4), name: fnx.ones(16)}
    x = fnx.randn(2, 4, 3, 3)
    with pytest.raises(RuntimeError, match=f"batch_norm: {name} should contain 4 elements not 16"):
        F.batch_norm(x, training=training, **given)
    with pytest.raises(RuntimeError, match="batch_norm: running_mean should contain 4 elements not 16"):
        fnx.nn.BatchNorm2d(16).train(training)(x.to(memory_format=fnx.channels_last))


def test_layer_group_rms_instance_norm():
    x = RNG.standard_normal((2, 4, 3))
    w, b = RNG.standard_normal((4, 3)), RNG.standard_normal((4, 3))
    m, v = x.mean(axis=(1, 2), keepdims=True), x.var(axis=(1, 2), keepdims=True)
    close(F.layer_norm(T(x), (4, 3), T(w), T(b), 1e-4), (x - m) / np.sqrt(v + 1e-4) * w + b)
    close(F.rms_norm(T(x), (3,), T(w[0]), 1e-4), x / np.sqrt((x ** 2).mean(-1, keepdims=True) + 1e-4) * w[0])
    g = x.reshape(2, 2, 6)
    gn = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5)).reshape(x.shape)
    close(F.group_norm(T(x), 2, T(w[:, 0]), T(b[:, 0])), gn * w[None, :, 0, None] + b[None, :, 0, None])
    inst = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    close(F.instance_norm(T(x)), inst)
    with pytest.raises(RuntimeError, match="normalized_shape"):
        F.layer_norm(T(x), (4,))
    xs = T(x[:, :2, :2], True)
    assert gradcheck(lambda t: F.layer_norm(t, (2,)), (xs,))
    assert gradcheck(lambda t: F.group_norm(t, 1), (xs,))
    assert gradcheck(lambda t: F.batch_norm(t, None, None, training=True), (xs,))
    assert gradcheck(lambda t: F.rms_norm(t, (2,)), (xs,))


@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_eager_node_matches_the_composition_to_second_order(affine):
    """Eager layer_norm is one tape node with the closed-form backward; fnx.grad traces the composition. First
    and second derivatives (backward with create_graph=True) agree."""
    x, w, b = RNG.standard_normal((2, 4, 3)), RNG.standard_normal((4, 3)), RNG.standard_normal((4, 3))
    ct = T(RNG.standard_normal((2, 4, 3)))
    arrays = (x, w, b) if affine else (x,)

    def loss(*ts):
        return (F.layer_norm(ts[0], (4, 3), *ts[1:], eps=1e-3) * ct).sum()

    args = [T(a, True) for a in arrays]
    assert F.layer_norm(args[0], (4, 3), *args[1:]).grad_fn.name == "_LayerNormBackward"
    argnums = tuple(range(len(arrays)))
    first = fnx.autograd.grad(loss(*args), args, create_graph=True)
    for got, want in zip(first, fnx.grad(loss, argnums=argnums)(*(T(a) for a in arrays))):
        close(got, npy(want))
    second = fnx.autograd.grad(sum((g * g * g).sum() for g in first), args, materialize_grads=True)

    def cubed(*ts):
        return sum((g * g * g).sum() for g in fnx.grad(loss, argnums=argnums)(*ts))

    for got, want in zip(second, fnx.grad(cubed, argnums=argnums)(*(T(a) for a in arrays))):
        close(got, npy(want), tol=1e-8)


@pytest.mark.parametrize("shape,frozen", [((5, 3), ()), ((2, 5, 3), ()), ((2, 5, 3), (1,)), ((5, 3), (0, 2)),
                                         ((2, 2, 5, 3), (0, 2))])
def test_linear_eager_node_matches_the_composition_to_second_order(shape, frozen):
    """Eager linear is one tape node; fnx.grad traces the composition. First and second derivatives agree, and
    inputs that do not require grad get none (a frozen weight or bias, an input batch)."""
    x, w, b = RNG.standard_normal(shape), RNG.standard_normal((4, 3)), RNG.standard_normal(4)
    ct = T(RNG.standard_normal(shape[:-1] + (4,)))

    def loss(*ts):
        return (F.linear(*ts) * ct).sum()

    args = [T(a, i not in frozen) for i, a in enumerate((x, w, b))]
    live = [i for i in range(3) if i not in frozen]
    assert F.linear(args[0].reshape(-1, 3), *args[1:]).grad_fn.name == "_LinearBackward"
    first = fnx.autograd.grad(loss(*args), [args[i] for i in live], create_graph=True)
    for got, want in zip(first, fnx.grad(loss, argnums=tuple(live))(*(T(a) for a in (x, w, b)))):
        close(got, npy(want))
    assert all(args[i].grad is None for i in frozen)

    if frozen:   # the first derivatives of a product are linear in the rest: no second order to compare
        return

    def cubed(*ts):
        return sum((g * g * g).sum() for g in fnx.grad(loss, argnums=(0, 1, 2))(*ts))

    second = fnx.autograd.grad(sum((g * g * g).sum() for g in first), args, materialize_grads=True)
    for got, want in zip(second, fnx.grad(cubed, argnums=(0, 1, 2))(*(T(a) for a in (x, w, b)))):
        close(got, npy(want), tol=1e-8)


def test_normalize_cosine_similarity_pairwise_distance():
    x, y = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))
    close(F.normalize(T(x)), x / np.linalg.norm(x, axis=1, keepdims=True))
    close(F.normalize(T(x), p=1, dim=0), x / np.abs(x).sum(0, keepdims=True))
    cos = (x * y).sum(1) / np.linalg.norm(x, axis=1) / np.linalg.norm(y, axis=1)
    close(F.cosine_similarity(T(x), T(y)), cos)
    close(F.pairwise_distance(T(x), T(y)), np.linalg.norm(x - y + 1e-6, axis=1))
    assert gradcheck(lambda a, b: F.cosine_similarity(a, b), (T(x, True), T(y, True)))


# ---------------------------------------------------------------- dropout, embedding, linear
def test_dropout_masks_scales_and_is_identity_in_eval():
    fnx.manual_seed(0)
    x = fnx.ones(2000)
    y = F.dropout(x, 0.25)
    vals = set(np.unique(y.numpy()).tolist())
    assert vals <= {0.0, float(np.float32(1 / 0.75))}
    assert abs((y.numpy() == 0).mean() - 0.25) < 0.05
    assert F.dropout(x, 0.25, training=False) is x
    assert F.dropout(x, 0.0) is x
    assert not F.dropout(x, 1.0).numpy().any()
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.dropout(x, 1.5)
    fnx.manual_seed(3)
    a = F.dropout(x, 0.5)
    fnx.manual_seed(3)
    assert np.array_equal(a.numpy(), F.dropout(x, 0.5).numpy())
    ch = F.dropout2d(fnx.ones(4, 6, 3, 3), 0.5)
    per_channel = ch.numpy().reshape(4, 6, 9)
    assert np.all(per_channel.min(-1) == per_channel.max(-1))


def test_dropout_gradient_uses_the_same_mask():
    fnx.manual_seed(1)
    x = fnx.ones(50, requires_grad=True)
    y = F.dropout(x, 0.5)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), y.detach().numpy())


def test_embedding_padding_idx_max_norm_and_frequency_scaling():
    w = RNG.standard_normal((5, 3))
    w /= np.linalg.norm(w, axis=1, keepdims=True)   # unit rows: at 3x each is over max_norm, whatever RNG drew
    idx = np.array([[0, 2, 2], [4, 1, 2]])
    close(F.embedding(T(idx), T(w)), w[idx])
    wt = T(w, True)
    F.embedding(T(idx), wt, padding_idx=2).sum().backward()
    np.testing.assert_array_equal(wt.grad.numpy()[:, 0], [1, 1, 0, 0, 1])
    wt.grad = None
    F.embedding(T(idx), wt, scale_grad_by_freq=True).sum().backward()
    np.testing.assert_array_equal(wt.grad.numpy()[:, 0], [1, 1, 1, 0, 1])
    wr = T(w * 3)
    out = F.embedding(T(idx), wr, max_norm=1.0)
    norms = np.linalg.norm(wr.numpy(), axis=1)
    assert np.all(norms[[0, 1, 2, 4]] <= 1.0 + 1e-6) and norms[3] > 1.0
    close(out, wr.numpy()[idx])


def test_eager_embedding_is_one_gather_with_the_transforms_values_gradients_and_errors():
    """Eager F.embedding gathers rows in the index's shape as one tape node; the composition that transforms
    trace (flatten, index_select, reshape) gives the same values and gradients, repeated rows summed."""
    w = RNG.standard_normal((5, 3)).astype(np.float32)
    idx = T(np.array([[0, 2, 2], [4, 1, 2]]))
    wt = T(w, True)
    out = F.embedding(idx, wt)
    assert out.grad_fn.name == "IndexBackward" and out.grad_fn.next_functions[0][0] is None
    g = RNG.standard_normal((2, 3, 3)).astype(np.float32)
    out.backward(T(g))
    want_out, want_grad = fnx.vjp(lambda w: F.embedding(idx, w), T(w))
    np.testing.assert_array_equal(out.detach().numpy(), want_out.numpy())
    np.testing.assert_array_equal(wt.grad.numpy(), want_grad(T(g))[0].numpy())
    with pytest.raises(IndexError, match="index_select: index 5 is out of bounds for dimension 0 with size 5"):
        F.embedding(T(np.array([[1, 5]])), wt)
    with pytest.raises(IndexError, match="index_select: index -1 is out of bounds for dimension 0 with size 5"):
        F.embedding(T(np.array([-1])), wt)


def test_linear_bilinear_one_hot_pad():
    x, w, b = RNG.standard_normal((2, 3)), RNG.standard_normal((4, 3)), RNG.standard_normal(4)
    close(F.linear(T(x), T(w), T(b)), x @ w.T + b)
    w2 = RNG.standard_normal((2, 3, 5))
    x2 = RNG.standard_normal((2, 5))
    close(F.bilinear(T(x), T(x2), T(w2)), np.einsum("ni,oij,nj->no", x, w2, x2))
    assert F.one_hot(fnx.tensor([1, 0]), 3).tolist() == [[0, 1, 0], [1, 0, 0]]
    close(F.pad(T(x), (1, 0)), np.pad(x, ((0, 0), (1, 0))))
    assert gradcheck(lambda x, w, b: F.linear(x, w, b), (T(x, True), T(w, True), T(b, True)))


def test_linear_folds_leading_dims():
    """Inputs of more than two dims (also non-contiguous, empty, or under vmap) give x @ w.T + b per row."""
    x, w, b = RNG.standard_normal((2, 3, 4, 5)), RNG.standard_normal((6, 5)), RNG.standard_normal(6)
    close(F.linear(T(x), T(w), T(b)), x @ w.T + b)
    xt = T(x).transpose(0, 2)
    close(F.linear(xt, T(w)), x.transpose(2, 1, 0, 3) @ w.T)
    assert F.linear(fnx.zeros(0, 3, 5, dtype=fnx.float64), T(w)).shape == (0, 3, 6)
    close(fnx.vmap(lambda xi: F.linear(xi, T(w), T(b)))(T(x)), x @ w.T + b)
    assert gradcheck(lambda x, w, b: F.linear(x, w, b), (T(x[:, :2, :2], True), T(w, True), T(b, True)))


def test_functional_composes_with_transforms():
    x = fnx.randn(3, 1, 4, 4, dtype=fnx.float64)
    w = fnx.randn(2, 1, 3, 3, dtype=fnx.float64)
    per_example = fnx.vmap(lambda xi: F.conv2d(xi, w, padding=1))(x)
    close(per_example, npy(F.conv2d(x, w, padding=1)))
    g = fnx.grad(lambda w: F.max_pool2d(F.relu(F.conv2d(x, w)), 2).sum())(w)
    wl = w.detach().requires_grad_()
    F.max_pool2d(F.relu(F.conv2d(x, wl)), 2).sum().backward()
    close(g, wl.grad.numpy())
    _, tangent = fnx.jvp(lambda t: F.log_softmax(t, -1), (x,), (fnx.ones_like(x),))
    close(tangent, np.zeros(tuple(x.shape)))  # softmax is invariant to adding a constant


def test_local_response_norm_unpool_lp_pool_pdist_rrelu():
    x = RNG.standard_normal((2, 5, 3))
    sq = np.pad(x ** 2, ((0, 0), (1, 1), (0, 0)))
    div = (1.0 + 1e-2 / 3 * (sq[:, :-2] + sq[:, 1:-1] + sq[:, 2:])) ** 0.75
    close(F.local_response_norm(T(x), 3, alpha=1e-2), x / div)
    img = RNG.permutation(32).reshape(1, 2, 4, 4).astype(np.float64)
    values, idx = F.max_pool2d(T(img), 2, return_indices=True)
    restored = F.max_unpool2d(values, idx, 2)
    kept = npy(restored) != 0
    assert kept.sum() == 8 and np.all(npy(restored)[kept] == img[kept])
    close(F.lp_pool2d(T(img), 2, 2), np.sqrt((img ** 2).reshape(1, 2, 2, 2, 2, 2).sum(axis=(3, 5))))
    rows = RNG.standard_normal((4, 3))
    expected = [np.linalg.norm(rows[i] - rows[j]) for i in range(4) for j in range(i + 1, 4)]
    close(F.pdist(T(rows)), np.array(expected))
    close(F.rrelu(T(x)), np.where(x >= 0, x, x * (1 / 8 + 1 / 3) / 2))
    fnx.manual_seed(0)
    slopes = npy(F.rrelu(fnx.full((1000,), -1.0, dtype=fnx.float64), training=True)) * -1
    assert slopes.min() >= 1 / 8 and slopes.max() <= 1 / 3


# ---------------------------------------------------------------- grid_sample, affine_grid
# PyTorch's outputs for these inputs (torch 2.x, computed once): x = arange(16).reshape(1, 1, 4, 4)
_TORCH_GRID_SAMPLE = {
    ("bilinear", "zeros", False): [[0.0, 0.75, 0.75], [3.0, 7.5, 4.5], [3.0, 6.75, 3.75]],
    ("nearest", "zeros", False): [[0.0, 2.0, 0.0], [8.0, 10.0, 0.0], [0.0, 0.0, 0.0]],
    ("bilinear", "border", False): [[0.0, 1.5, 3.0], [6.0, 7.5, 9.0], [12.0, 13.5, 15.0]],
    ("bilinear", "reflection", True): [[6.0, 4.65, 5.7, 6.75, 5.4], [7.05, 6.6, 8.25, 9.9, 8.85],
                                       [8.1, 7.35, 8.4, 9.15, 7.5]],
}


@pytest.mark.parametrize("mode, padding, align", list(_TORCH_GRID_SAMPLE))
def test_grid_sample_matches_pytorch(mode, padding, align):
    x = fnx.arange(16.0).reshape(1, 1, 4, 4)
    theta = fnx.tensor([[[1.0, 0, 0], [0, 1, 0]]])
    theta, size = (theta * 1.7 + 0.1, (1, 1, 3, 5)) if align else (theta * 1.5, (1, 1, 3, 3))
    grid = F.affine_grid(theta, size, align_corners=align)
    out = F.grid_sample(x, grid, mode=mode, padding_mode=padding, align_corners=align)
    np.testing.assert_allclose(out.numpy()[0, 0], _TORCH_GRID_SAMPLE[mode, padding, align], rtol=1e-5, atol=1e-5)


def test_identity_affine_grid_samples_the_input_back():
    x = fnx.randn(2, 3, 4, 5, 6)
    theta = fnx.eye(3, 4).expand(2, 3, 4)
    for align in (False, True):
        grid = F.affine_grid(theta, (2, 3, 4, 5, 6), align_corners=align)
        np.testing.assert_allclose(F.grid_sample(x, grid, align_corners=align).numpy(), x.numpy(), atol=1e-5)


def test_grid_sample_and_affine_grid_errors():
    x, grid = fnx.ones(1, 1, 3, 3), fnx.zeros(1, 2, 2, 2)
    with pytest.raises(fnx.core.FnxRuntimeError, match="expected padding_mode to be 'zeros', 'border', or 'reflection'"):
        F.grid_sample(x, grid, padding_mode="wrap")
    with pytest.raises(fnx.core.FnxRuntimeError, match="expected mode to be 'bilinear', 'nearest' or 'bicubic'"):
        F.grid_sample(x, grid, mode="cubic")
    with pytest.raises(fnx.core.FnxRuntimeError, match=r"expected grid of shape \[N, \*, \*, 2\]"):
        F.grid_sample(x, fnx.zeros(1, 2, 2, 3))
    with pytest.raises(fnx.core.FnxRuntimeError, match="Expected a batch of 2D affine matrices of shape Nx2x3"):
        F.affine_grid(fnx.zeros(1, 3, 3), (1, 1, 4, 4))


def test_grid_sample_non_finite_grid_values_as_pytorch():
    """PyTorch 2.13: bilinear with zero padding gives NaN, nearest reads zero, border and reflection the edge."""
    for value in (float("nan"), float("inf"), -float("inf")):
        grid = fnx.tensor([[[[value, 0.0]]]])
        with np.errstate(invalid="ignore"):
            assert math.isnan(F.grid_sample(fnx.ones(1, 1, 2, 2), grid).item())
        assert F.grid_sample(fnx.ones(1, 1, 2, 2), grid, mode="nearest").item() == 0.0
        for padding in ("border", "reflection"):
            assert F.grid_sample(fnx.ones(1, 1, 2, 2), grid, padding_mode=padding).item() == 1.0


@pytest.mark.parametrize("shape, size", [((4, 6, 8, 12), 1), ((4, 6, 8, 12), (2, 3)), ((6, 8, 12), (4, 4)),
                                         ((4, 6, 16), 1), ((4, 6, 16), 4), ((2, 3, 4, 6, 8), (1, 2, 4))])
def test_adaptive_avg_pool_of_tiling_windows_is_a_mean_of_each_tile(shape, size, monkeypatch):
    """Output sizes that divide the input's (a global average above all) take a reshape and a sum, not the product
    by window weights: the values and float64 gradients of the windows' means."""
    from fnx.nn import functional_pool

    monkeypatch.setattr(functional_pool, "matmul", lambda *a: pytest.fail("adaptive pooling took the window product"))
    nd = {4: 2, 3: 1 if isinstance(size, int) and len(shape) == 3 and shape[-1] == 16 else 2, 5: 3}[len(shape)]
    fn = {1: F.adaptive_avg_pool1d, 2: F.adaptive_avg_pool2d, 3: F.adaptive_avg_pool3d}[nd]
    x = np.random.default_rng(2).standard_normal(shape)
    out = fn(fnx.tensor(x), size)
    sizes = (size,) * nd if isinstance(size, int) else size
    lead = x.shape[:-nd]
    tiles = x.reshape(lead + tuple(v for n, m in zip(x.shape[-nd:], sizes) for v in (m, n // m)))
    want = tiles.mean(tuple(len(lead) + 1 + 2 * i for i in range(nd)))
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-12, atol=1e-12)
    assert fnx.autograd.gradcheck(lambda t: fn(t, size), (fnx.tensor(x[..., :4] if nd == 1 else x,
                                                                      requires_grad=True),)) if nd == 1 and sizes[0] == 1 \
        else fnx.autograd.gradcheck(lambda t: fn(t, size), (fnx.tensor(x, requires_grad=True),))


def test_adaptive_avg_pool_output_written_in_place_still_differentiates():
    """As in PyTorch (torchvision's squeeze-and-excitation blocks): the pooled output's node does not read it."""
    x = fnx.tensor(np.random.default_rng(3).standard_normal((2, 3, 4, 4)), requires_grad=True)
    for size in (1, 2):
        y = F.adaptive_avg_pool2d(x * 1.0, size)
        F.silu(y, inplace=True)
        y.sum().backward()
    assert x.grad is not None
