"""PyTorch's channels_last memory format: `to(memory_format=)` and `contiguous(memory_format=)` lay a tensor out
channels innermost; eager convolutions, batch_norm and elementwise ops read such tensors in place and give their
outputs the same layout, with the values (and gradients) of the row-major computation."""
import numpy as np
import pytest

import fnx
import fnx.nn.functional as F
from fnx.lowering import nn_kernels


def _last(t) -> bool:
    return t.is_contiguous(memory_format=fnx.channels_last) and not t.is_contiguous()


def _rng_tensor(rng, shape, dtype=np.float64):
    return fnx.tensor(rng.standard_normal(shape).astype(dtype))


def test_to_and_contiguous_lay_out_the_memory_format_and_gradients_flow():
    x = fnx.arange(2 * 3 * 4 * 5, dtype=fnx.float64).reshape(2, 3, 4, 5).requires_grad_()
    y = x.to(memory_format=fnx.channels_last)
    assert _last(y) and y.tolist() == x.tolist()
    assert y.to(memory_format=fnx.channels_last) is y and y.contiguous(memory_format=fnx.channels_last) is y
    back = y.contiguous()
    assert back.is_contiguous() and not _last(back) and back.tolist() == x.tolist()
    (y * fnx.arange(5, dtype=fnx.float64)).sum().backward()
    assert np.array_equal(x.grad.numpy(), np.broadcast_to(np.arange(5.0), (2, 3, 4, 5)))
    v = fnx.zeros(1, 2, 3, 4, 5).to(memory_format=fnx.channels_last_3d)
    assert v.is_contiguous(memory_format=fnx.channels_last_3d) and not v.is_contiguous()
    with pytest.raises(RuntimeError, match=r"to\(\): required rank 4 tensor to use channels_last format.*\[2, 3\]"):
        fnx.zeros(2, 3).to(memory_format=fnx.channels_last)
    with pytest.raises(RuntimeError, match=r"contiguous: required rank 5 tensor to use channels_last_3d"):
        x.contiguous(memory_format=fnx.channels_last_3d)


def test_module_to_memory_format_keeps_the_parameters_row_major():
    m = fnx.nn.Conv2d(3, 8, 3).to(memory_format=fnx.channels_last)
    assert m.weight.is_contiguous() and isinstance(m.weight, fnx.nn.Parameter)


@pytest.mark.parametrize("c, size, o, kernel, stride, padding", [
    (16, 8, 16, 3, 1, 1), (16, 9, 24, 3, 2, 1), (8, 7, 16, 3, 1, 0), (32, 8, 16, 1, 1, 0), (32, 8, 16, 1, 2, 0)])
@pytest.mark.parametrize("weight_last", [False, True])
def test_conv2d_on_channels_last_gives_channels_last_and_the_row_major_values(c, size, o, kernel, stride, padding,
                                                                            weight_last):
    rng = np.random.default_rng(0)
    x, w, b = _rng_tensor(rng, (2, c, size, size)), _rng_tensor(rng, (o, c, kernel, kernel)), _rng_tensor(rng, (o,))
    out = {}
    for last in (False, True):
        X = (x.to(memory_format=fnx.channels_last) if last else x.clone()).requires_grad_()
        W = (w.to(memory_format=fnx.channels_last) if last and weight_last else w.clone()).requires_grad_()
        B = b.clone().requires_grad_()
        y = F.conv2d(X, W, B, stride=stride, padding=padding)
        assert _last(y) == last
        (y * fnx.tensor(np.cos(np.arange(y.numel())).reshape(tuple(y.shape)))).sum().backward()
        assert _last(W.grad) == (last and weight_last and kernel > 1)
        out[last] = [t.detach().numpy() for t in (y, X.grad, W.grad, B.grad)]
    for a, b_ in zip(out[False], out[True]):
        np.testing.assert_allclose(b_, a, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("nd, kernel, stride, padding, dilation", [
    (2, 3, 1, 1, 1), (2, 3, 2, 1, 1), (2, 2, 2, 0, 1), (2, 3, 1, 0, 1), (2, 3, 1, 2, 1), (2, 3, 1, 3, 2),
    (2, 2, 1, 1, 1), (2, 3, 2, 2, 2), (1, 3, 1, 1, 1), (1, 5, 2, 4, 1), (3, 3, 1, 1, 1), (3, 2, 2, 0, 1)])
def test_conv_reads_its_input_with_or_without_a_frame(monkeypatch, nd, kernel, stride, padding, dilation):
    """Where no window needs the padding's zeros written, a channels-last or row-major input (and output gradient)
    is read in place, its windows' offsets shifted into the data; wider paddings take a frame. Both give the
    composite form's values and gradients (im2col and a product: no direct loops)."""
    from fnx.ops import conv as primitives

    rng = np.random.default_rng(nd * 100 + kernel * 10 + padding)
    size = {1: (11,), 2: (7, 6), 3: (5, 4, 5)}[nd]
    x, w = _rng_tensor(rng, (3, 16) + size), _rng_tensor(rng, (16, 16) + (kernel,) * nd)
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nd]
    out = {}
    for form in ("composite", "row-major", "channels-last"):
        monkeypatch.setattr(primitives, "ENABLED", form != "composite")
        last = form == "channels-last"
        X = x.permute(0, *range(2, nd + 2), 1).contiguous().permute(0, nd + 1, *range(1, nd + 1)) if last else x
        X = X.clone().requires_grad_()
        W = w.clone().requires_grad_()
        y = conv(X, W, stride=stride, padding=padding, dilation=dilation)
        (y * fnx.tensor(np.sin(np.arange(y.numel())).reshape(tuple(y.shape)))).sum().backward()
        out[form] = [t.detach().numpy() for t in (y, X.grad, W.grad)]
    for form in ("row-major", "channels-last"):
        for a, b in zip(out["composite"], out[form]):
            np.testing.assert_allclose(b, a, rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("last", [True, False])
def test_same_padded_conv_writes_no_frame(monkeypatch, last):
    """A 'same' convolution's windows need none of the padding's zeros, so a channels-last or row-major operand is
    read as it lies, forward and backward, strided and transposed convolutions too."""
    from fnx.ops import conv

    def no_frame(*args):
        raise AssertionError("an operand was copied into a frame")

    monkeypatch.setattr(conv, "_framed", no_frame)
    rng = np.random.default_rng(2)
    X = _rng_tensor(rng, (2, 16, 8, 8))
    X = (X.to(memory_format=fnx.channels_last) if last else X).requires_grad_()
    W = _rng_tensor(rng, (16, 16, 3, 3)).requires_grad_()
    for stride in (1, 2):
        y = F.conv2d(X, W, padding=1, stride=stride)
        (y * y).sum().backward()   # y's gradient 2 y, in y's layout
    up = F.conv_transpose2d(X, _rng_tensor(rng, (16, 16, 2, 2)), stride=2)
    assert _last(up) == last and tuple(up.shape) == (2, 16, 16, 16)


def test_conv_transpose2d_keeps_channels_last():
    rng = np.random.default_rng(1)
    x, w, b = _rng_tensor(rng, (2, 16, 5, 5)), _rng_tensor(rng, (16, 8, 2, 2)), _rng_tensor(rng, (8,))
    y = F.conv_transpose2d(x.to(memory_format=fnx.channels_last), w, b, stride=2)
    assert _last(y)
    np.testing.assert_allclose(y.numpy(), F.conv_transpose2d(x, w, b, stride=2).numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape, dtype", [((4, 16, 32, 32), np.float32), ((2, 24, 5, 7), np.float64),
                                          ((3, 32, 4, 4, 4), np.float64)])
def test_batch_norm_on_channels_last_keeps_it_with_the_row_major_values(shape, dtype):
    rng = np.random.default_rng(2)
    x, gy = rng.standard_normal(shape).astype(dtype) * 3 + 1, rng.standard_normal(shape).astype(dtype)
    fmt = fnx.channels_last if len(shape) == 4 else fnx.channels_last_3d
    out = {}
    for last in (False, True):
        X = fnx.tensor(x)
        X = (X.to(memory_format=fmt) if last else X).requires_grad_()
        bn = (fnx.nn.BatchNorm2d if len(shape) == 4 else fnx.nn.BatchNorm3d)(shape[1]).to(fnx.tensor(x).dtype)
        y = bn(X)
        assert y.is_contiguous(memory_format=fmt) == last or shape[1] == 1
        (y * fnx.tensor(gy)).sum().backward()
        out[last] = [t.detach().numpy() for t in (y, X.grad, bn.weight.grad, bn.bias.grad, bn.running_mean,
                                                  bn.running_var)]
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for a, b_ in zip(out[False], out[True]):
        np.testing.assert_allclose(b_, a, rtol=tol, atol=tol)


def test_batch_norm_on_channels_last_without_its_backwards_rows_loop_runs_numpys(monkeypatch):
    """A forward over channels-last rows whose backward's loop did not build (its part of the library failed):
    the backward runs the channels-first form, the same gradients."""
    rng = np.random.default_rng(4)
    x, gy = rng.standard_normal((4, 16, 32, 32)) * 3 + 1, rng.standard_normal((4, 16, 32, 32))
    grads = []
    for loop in (nn_kernels.batch_norm_backward_rows, lambda *args: None):
        monkeypatch.setattr(nn_kernels, "batch_norm_backward_rows", loop)
        X = fnx.tensor(x).to(memory_format=fnx.channels_last).requires_grad_()
        bn = fnx.nn.BatchNorm2d(16).double()
        (bn(X) * fnx.tensor(gy)).sum().backward()
        grads.append([t.numpy() for t in (X.grad, bn.weight.grad, bn.bias.grad)])
    for a, b_ in zip(*grads):
        np.testing.assert_allclose(b_, a, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("op", [lambda a, b: a + b, lambda a, b: a * b, lambda a, b: fnx.relu(a),
                                lambda a, b: a.exp(), lambda a, b: F.relu(a + b, inplace=True)])
def test_elementwise_ops_keep_channels_last(op):
    rng = np.random.default_rng(3)
    a, b = _rng_tensor(rng, (4, 16, 16, 16), np.float32), _rng_tensor(rng, (4, 16, 16, 16), np.float32)
    y = op(a.to(memory_format=fnx.channels_last), b.to(memory_format=fnx.channels_last))
    assert _last(y)
    np.testing.assert_array_equal(y.numpy(), op(a, b).numpy())


@pytest.mark.parametrize("shape, kernel, stride, padding, dtype", [
    ((4, 16, 32, 32), 2, 2, 0, np.float32), ((2, 24, 11, 11), 3, 2, 0, np.float64), ((2, 16, 8, 8), 3, 1, 1, np.float32)])
def test_max_pool2d_on_channels_last_gives_the_row_major_values_indices_and_gradients(shape, kernel, stride, padding,
                                                                                     dtype):
    rng = np.random.default_rng(4)
    x = rng.standard_normal(shape).astype(dtype)
    x[0, 0, :2, :2] = np.nan   # a window's NaN wins, as in PyTorch
    x[1, 1, :4, :4] = 1.0      # ties: the first maximum
    gy, out = None, {}
    for last in (False, True):
        X = fnx.tensor(x)
        X = (X.to(memory_format=fnx.channels_last) if last else X).requires_grad_()
        y, index = F.max_pool2d(X, kernel, stride, padding, return_indices=True)
        assert _last(y) == last and _last(index) == last   # as PyTorch's, padded or not
        gy = fnx.tensor(rng.standard_normal(tuple(y.shape)).astype(dtype)) if gy is None else gy
        (y * gy).sum().backward()
        out[last] = [t.detach().numpy() for t in (y, index, X.grad)]
    for a, b_ in zip(out[False], out[True]):
        np.testing.assert_array_equal(b_, a)


def test_cat_clone_and_pad_keep_channels_last():
    a, b = fnx.randn(2, 3, 4, 5), fnx.randn(2, 6, 4, 5)
    al, bl = a.to(memory_format=fnx.channels_last), b.to(memory_format=fnx.channels_last)
    for dim, other, other_last in ((1, b, bl), (0, a, al), (2, a, al), (-1, a, al)):
        y = fnx.cat([al, other_last], dim)
        assert _last(y) and y.tolist() == fnx.cat([a, other], dim).tolist()
    assert not _last(fnx.cat([al, b], 1))   # mixed layouts: row-major
    c = al.clone()
    assert _last(c) and c.tolist() == a.tolist() and c.data_ptr() != al.data_ptr()
    assert al.clone(memory_format=fnx.contiguous_format).is_contiguous()
    assert fnx.randn(3, 4).t().clone().stride() == (1, 4)   # a transpose's clone keeps its strides, as PyTorch's
    p = F.pad(al, [0, 0, 0, 0])
    assert _last(p) and p.data_ptr() != al.data_ptr()


def test_cat_of_other_layouts_is_row_major():
    """As PyTorch's cat: transposed or permuted operands (and 3-D ones channels innermost, a layout PyTorch has no
    memory format for) give a row-major result, which `.view` accepts; a stack of them too."""
    a, b = fnx.randn(4, 6).t(), fnx.randn(4, 6).t()
    q = fnx.randn(2, 5, 3, 8).transpose(1, 2)
    freqs = fnx.randn(1, 16, 64).transpose(1, 2)
    qv = q.numpy()
    for y, want in ((fnx.cat([a, b], 1), np.concatenate([a.numpy(), b.numpy()], 1)),
                    (fnx.cat([a, b], 0), np.concatenate([a.numpy(), b.numpy()], 0)),
                    (fnx.cat([-q[..., 4:], q[..., :4]], -1), np.concatenate([-qv[..., 4:], qv[..., :4]], -1)),
                    (fnx.cat([freqs, freqs], -1), np.concatenate([freqs.numpy()] * 2, -1)),
                    (fnx.stack([a, b], 1), np.stack([a.numpy(), b.numpy()], 1))):
        assert y.is_contiguous() and np.array_equal(y.numpy(), want)
        assert np.array_equal(y.view(-1).numpy(), want.reshape(-1))


def test_cat_of_permuted_operands_joins_once(monkeypatch):
    """Operands of more than two dims laid out in another order (Llama's rotate_half of a (B, T, H, D) query seen
    as (B, H, T, D)) are joined once, straight into the row-major result, not joined and then copied."""
    q = fnx.randn(2, 5, 3, 8).transpose(1, 2)
    halves = [-q[..., 4:], q[..., :4]]
    calls, concatenate = [], np.concatenate
    monkeypatch.setattr(np, "concatenate", lambda *args, **kwargs: calls.append(1) or concatenate(*args, **kwargs))
    y = fnx.cat(halves, -1)
    assert len(calls) == 1 and y.is_contiguous()
    assert np.array_equal(y.numpy(), concatenate([h.numpy() for h in halves], -1))


def test_a_binary_op_of_two_layouts_takes_the_first_operands():
    """As PyTorch's: x permuted (a (B, T, H, D) block viewed as (B, H, T, D)) + y row-major is laid out as x, and
    y + x as y; the merge of the heads of such a sum back to (B, T, H * D) is then a view."""
    base = fnx.randn(2, 5, 3, 8)
    x, y = base.transpose(1, 2), fnx.randn(2, 3, 5, 8)
    for a, b in ((x, y), (y, x)):
        for op in (lambda a, b: a + b, lambda a, b: a * b, lambda a, b: a - b):
            assert op(a, b).stride() == a.stride()
            np.testing.assert_array_equal(op(a, b).numpy(), op(a.numpy(), b.numpy()))
    s = x + y
    merged = s.transpose(1, 2).reshape(2, 5, 24)
    assert np.shares_memory(merged.numpy(), s.numpy())
    assert np.array_equal(merged.numpy(), (x.numpy() + y.numpy()).transpose(0, 2, 1, 3).reshape(2, 5, 24))


def test_conv3d_eval_batch_norm_and_reshape_on_channels_last():
    rng = np.random.default_rng(5)
    x3, w3 = _rng_tensor(rng, (2, 16, 6, 6, 6)), _rng_tensor(rng, (16, 16, 3, 3, 3))
    y3 = F.conv3d(x3.to(memory_format=fnx.channels_last_3d), w3, padding=1)
    assert y3.is_contiguous(memory_format=fnx.channels_last_3d) and not y3.is_contiguous()
    np.testing.assert_allclose(y3.numpy(), F.conv3d(x3, w3, padding=1).numpy(), rtol=1e-12, atol=1e-12)
    bn = fnx.nn.BatchNorm2d(16).double().eval()
    x = _rng_tensor(rng, (4, 16, 8, 8))
    y = bn(x.to(memory_format=fnx.channels_last))
    assert _last(y) and np.array_equal(y.detach().numpy(), bn(x).detach().numpy())
    xl = x.to(memory_format=fnx.channels_last)
    assert xl.reshape(4, -1).tolist() == x.reshape(4, -1).tolist()
    with pytest.raises(RuntimeError, match="view size is not compatible with input tensor's size and stride"):
        xl.view(4, -1)   # as in PyTorch: a channels_last tensor is not a row-major block


# (op, output strides PyTorch 2.13 gives for a channels_last (2, 3, 8, 8) float input)
_KEEPING = [
    (lambda x: F.interpolate(x, scale_factor=2, mode="nearest"), (768, 1, 48, 3)),
    (lambda x: F.interpolate(x, scale_factor=2, mode="nearest-exact"), (768, 1, 48, 3)),
    (lambda x: F.interpolate(x, size=(5, 7), mode="bilinear"), (105, 1, 21, 3)),
    (lambda x: F.interpolate(x, size=(5, 7), mode="bilinear", align_corners=True), (105, 1, 21, 3)),
    (lambda x: F.interpolate(x, size=(4, 4), mode="area"), (48, 1, 12, 3)),
    (lambda x: F.interpolate(x, size=(5, 7), mode="bicubic"), (105, 1, 21, 3)),
    (lambda x: F.interpolate(x, size=(5, 7), mode="bicubic", antialias=True), (105, 1, 21, 3)),
    (lambda x: F.interpolate(x, size=(5, 7), mode="bilinear", antialias=True), (105, 1, 21, 3)),
    (lambda x: F.upsample_bilinear(x, scale_factor=2), (768, 1, 48, 3)),
    (lambda x: fnx.nn.Upsample(scale_factor=2)(x), (768, 1, 48, 3)),
    (lambda x: F.pad(x, (1, 2, 3, 4)), (495, 1, 33, 3)),
    (lambda x: F.pad(x, (1, 2, 3, 4), value=2.5), (495, 1, 33, 3)),
    (lambda x: F.pad(x, (1, 2, 3, 4), mode="reflect"), (495, 1, 33, 3)),
    (lambda x: F.pad(x, (1, 2, 3, 4), mode="replicate"), (495, 1, 33, 3)),
    (lambda x: fnx.nn.ReflectionPad2d(2)(x), (432, 1, 36, 3)),
    (lambda x: F.adaptive_avg_pool2d(x, (3, 3)), (27, 1, 9, 3)),
    (lambda x: F.adaptive_max_pool2d(x, (3, 3)), (27, 1, 9, 3)),
    (lambda x: F.avg_pool2d(x, 2), (48, 1, 12, 3)),
    (lambda x: F.avg_pool2d(x, 3, 1, 1), (192, 1, 24, 3)),
    (lambda x: F.max_pool2d(x, 2), (48, 1, 12, 3)),
    (lambda x: F.max_pool2d(x, 3, 1, 1), (192, 1, 24, 3)),
    (lambda x: F.lp_pool2d(x, 2, 2), (48, 1, 12, 3)),
    (lambda x: F.pixel_unshuffle(x, 2), (192, 1, 48, 12)),
]


@pytest.mark.parametrize("case", range(len(_KEEPING)))
def test_resizing_padding_and_pooling_keep_channels_last_as_pytorch(case):
    """Ops computed in row-major order lay their output and input gradient out channels-last where the input
    is (PyTorch's strides), with the row-major values and gradients."""
    op, strides = _KEEPING[case]
    rng = np.random.default_rng(case)
    x = _rng_tensor(rng, (2, 3, 8, 8))
    out = {}
    for last in (False, True):
        X = (x.to(memory_format=fnx.channels_last) if last else x.clone()).requires_grad_()
        y = op(X)
        assert y.stride() == strides if last else not _last(y)
        gy = fnx.tensor(np.cos(np.arange(y.numel())).reshape(tuple(y.shape)))
        (y * gy).sum().backward()
        assert _last(X.grad) == last
        out[last] = [t.detach().numpy() for t in (y, X.grad)]
    for a, b_ in zip(out[False], out[True]):   # pooling's sums may add in another order
        np.testing.assert_allclose(b_, a, rtol=1e-14, atol=1e-14)


def test_pixel_shuffle_and_the_indices_of_adaptive_max_pool_keep_channels_last():
    x = fnx.randn(2, 12, 4, 4, dtype=fnx.float64)
    y = F.pixel_shuffle(x.to(memory_format=fnx.channels_last), 2)
    assert y.stride() == (192, 1, 24, 3) and y.tolist() == F.pixel_shuffle(x, 2).tolist()
    values, index = F.adaptive_max_pool2d(x.to(memory_format=fnx.channels_last), 3, return_indices=True)
    assert values.stride() == index.stride() == (108, 1, 36, 12)
    assert index.tolist() == F.adaptive_max_pool2d(x, 3, return_indices=True)[1].tolist()


def test_row_major_and_traced_inputs_are_left_as_they_are():
    x = fnx.randn(2, 3, 8, 8)
    assert F.interpolate(x, scale_factor=2, mode="bilinear").is_contiguous()
    assert F.adaptive_avg_pool2d(x, 3).is_contiguous() and F.pad(x, (1, 1, 1, 1), mode="reflect").is_contiguous()
    f = fnx.compile(lambda t: F.adaptive_avg_pool2d(F.pad(t, (1, 1, 1, 1), mode="reflect"), 3))
    xl = x.to(memory_format=fnx.channels_last)
    np.testing.assert_allclose(f(xl).numpy(), F.adaptive_avg_pool2d(F.pad(x, (1, 1, 1, 1), mode="reflect"),
                                                                     3).numpy(), rtol=1e-6)


def _last_3d(t) -> bool:
    return t.is_contiguous(memory_format=fnx.channels_last_3d) and not t.is_contiguous()


# (op, whether PyTorch 2.13 keeps a channels_last_3d (2, 3, 4, 4, 4) input's layout, its strides then)
_KEEPING_3D = [
    (lambda x: F.pad(x, (1, 1, 1, 1, 1, 1)), (648, 1, 108, 18, 3)),
    (lambda x: F.pad(x, (1, 1, 1, 1, 1, 1), mode="reflect"), (648, 1, 108, 18, 3)),
    (lambda x: F.interpolate(x, scale_factor=2, mode="trilinear"), (1536, 1, 192, 24, 3)),
    (lambda x: F.interpolate(x, scale_factor=2), (1536, 1, 192, 24, 3)),
    (lambda x: F.max_pool3d(x, 2), (24, 1, 12, 6, 3)),
]


@pytest.mark.parametrize("case", range(len(_KEEPING_3D)))
def test_channels_last_3d_is_kept_where_pytorch_keeps_it(case):
    op, strides = _KEEPING_3D[case]
    x = _rng_tensor(np.random.default_rng(case), (2, 3, 4, 4, 4))
    X = x.to(memory_format=fnx.channels_last_3d).requires_grad_()
    y = op(X)
    assert y.stride() == strides and np.array_equal(y.detach().numpy(), op(x).numpy())
    y.sum().backward()
    assert _last_3d(X.grad)


def test_channels_innermost_rank_3_inputs_keep_their_layout_where_pytorch_does():
    """A (N, L, C) tensor seen as (N, C, L): PyTorch's 1-d average pools keep its strides, padding and resizing
    give row-major."""
    x = fnx.randn(2, 8, 3, dtype=fnx.float64).permute(0, 2, 1)
    assert F.avg_pool1d(x, 2).stride() == (12, 1, 3) and F.adaptive_avg_pool1d(x, 3).stride() == (9, 1, 3)
    assert F.adaptive_max_pool1d(x, 3).stride() == (9, 1, 3)
    assert F.pad(x, (1, 1)).stride() == (30, 10, 1) and F.interpolate(x, size=5, mode="linear").stride() == (15, 5, 1)
