"""Layer modules: default initialisation, BatchNorm and Dropout train/eval behaviour, padding modes,
Embedding, nn.init, and (when PyTorch happens to be installed) outputs equal to torch.nn's after loading
its state_dict."""
import math

import numpy as np
import pytest

import fnx
import fnx.nn as nn
import fnx.nn.functional as F
from fnx.autograd import gradcheck
from fnx.lowering import nn_kernels

RNG = np.random.default_rng(2)


def T(a, requires_grad=False):
    return fnx.tensor(np.asarray(a), requires_grad=requires_grad)


def npy(t):
    return t.detach().numpy()


def test_linear_and_conv_default_initialisation_bounds():
    fnx.manual_seed(0)
    lin = nn.Linear(50, 40)
    assert lin.weight.shape == (40, 50) and lin.bias.shape == (40,)
    bound = 1 / math.sqrt(50)
    for p in (lin.weight, lin.bias):
        assert np.abs(npy(p)).max() <= bound and np.abs(npy(p)).max() > 0.8 * bound
    assert abs(npy(lin.weight).std() - bound / math.sqrt(3)) < 0.1 * bound
    conv = nn.Conv2d(4, 6, (3, 2), groups=2, bias=False)
    assert conv.weight.shape == (6, 2, 3, 2) and conv.bias is None
    assert np.abs(npy(conv.weight)).max() <= 1 / math.sqrt(12)
    convt = nn.ConvTranspose2d(4, 6, 3, groups=2)
    assert convt.weight.shape == (4, 3, 3, 3)
    assert nn.Linear(2, 3, dtype=fnx.float64).weight.dtype == fnx.float64
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="padding_mode"):
        nn.Conv2d(2, 2, 3, padding_mode="mirror")


@pytest.mark.parametrize("mode,np_mode", [("reflect", "reflect"), ("replicate", "edge"), ("circular", "wrap")])
def test_conv2d_padding_modes(mode, np_mode):
    conv = nn.Conv2d(2, 3, 3, padding=(1, 2), padding_mode=mode).double()
    x = RNG.standard_normal((1, 2, 4, 5))
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (2, 2)), mode=np_mode)
    ref = F.conv2d(T(xp), conv.weight, conv.bias)
    np.testing.assert_allclose(npy(conv(T(x))), npy(ref), rtol=1e-12)
    assert "padding_mode=" + mode in repr(conv)


def test_conv_transpose_output_size_and_same_padding_module():
    up = nn.ConvTranspose2d(2, 1, 3, stride=2, padding=1)
    x = fnx.randn(1, 2, 4, 4)
    assert up(x).shape == (1, 1, 7, 7)
    assert up(x, output_size=(8, 8)).shape == (1, 1, 8, 8)
    assert up(x, output_size=[1, 1, 8, 7]).shape == (1, 1, 8, 7)
    with pytest.raises(ValueError, match="requested an output size"):
        up(x, output_size=(10, 10))
    same = nn.Conv2d(2, 2, 4, padding="same", dilation=2)
    assert same(fnx.randn(1, 2, 5, 6)).shape == (1, 2, 5, 6)


def test_batchnorm_train_updates_and_eval_uses_running_stats():
    bn = nn.BatchNorm2d(3, momentum=0.25).double()
    x = RNG.standard_normal((4, 3, 2, 2)) * 2 + 1
    out = bn(T(x))
    mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    np.testing.assert_allclose(npy(out), (x - mean[:, None, None]) / np.sqrt(var[:, None, None] + 1e-5), atol=1e-12)
    np.testing.assert_allclose(bn.running_mean.numpy(), 0.25 * mean, rtol=1e-12)
    np.testing.assert_allclose(bn.running_var.numpy(), 0.75 + 0.25 * var * 16 / 15, rtol=1e-12)
    assert bn.num_batches_tracked.item() == 1
    bn.eval()
    rm, rv = bn.running_mean.numpy().copy(), bn.running_var.numpy().copy()
    y = RNG.standard_normal((2, 3, 2, 2))
    np.testing.assert_allclose(npy(bn(T(y))), (y - rm[:, None, None]) / np.sqrt(rv[:, None, None] + 1e-5),
                               atol=1e-12)
    np.testing.assert_array_equal(bn.running_mean.numpy(), rm)  # eval leaves the statistics alone
    assert bn.num_batches_tracked.item() == 1
    with pytest.raises(ValueError, match="expected 4D input"):
        bn(fnx.randn(2, 3))


def test_batchnorm_writes_its_buffers_in_place_each_step():
    """The running statistics and the batch count change in the buffers' own memory (a view sees it, the version
    counters move, as PyTorch's in-place updates do), from float32 statistics of a batch large enough for the C
    loops, within float32 rounding of the float64 formulas."""
    bn = nn.BatchNorm2d(8, momentum=0.1)
    mean_view, count = bn.running_mean[:4], bn.num_batches_tracked
    versions = bn.running_mean._version[0], bn.running_var._version[0], count._version[0]
    batches = [RNG.standard_normal((4, 8, 16, 16)) * 3 + 2 for _ in range(2)]
    want_mean, want_var = np.zeros(8), np.ones(8)
    for b in batches:
        bn(T(b.astype(np.float32)))
        want_mean = 0.9 * want_mean + 0.1 * b.mean(axis=(0, 2, 3))
        want_var = 0.9 * want_var + 0.1 * b.var(axis=(0, 2, 3), ddof=1)
    np.testing.assert_allclose(bn.running_mean.numpy(), want_mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bn.running_var.numpy(), want_var, rtol=1e-5)
    np.testing.assert_array_equal(mean_view.numpy(), bn.running_mean.numpy()[:4])
    assert bn.num_batches_tracked is count and count.item() == 2
    assert (bn.running_mean._version[0], bn.running_var._version[0], count._version[0]) == \
        tuple(v + 2 for v in versions)


def test_batchnorm_cumulative_average_and_no_tracking():
    bn = nn.BatchNorm1d(2, momentum=None).double()
    batches = [RNG.standard_normal((5, 2)) for _ in range(3)]
    for b in batches:
        bn(T(b))
    np.testing.assert_allclose(bn.running_mean.numpy(), np.mean([b.mean(0) for b in batches], 0), rtol=1e-12)
    free = nn.BatchNorm1d(2, track_running_stats=False, affine=False)
    assert free.running_mean is None and list(free.state_dict()) == []
    free.eval()
    x = RNG.standard_normal((6, 2))
    np.testing.assert_allclose(npy(free(T(x))), (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-5), atol=1e-12)


def test_batchnorm_state_dict_and_old_checkpoints():
    bn = nn.BatchNorm1d(3)
    assert list(bn.state_dict()) == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    old = {k: v for k, v in bn.state_dict().items() if k != "num_batches_tracked"}
    assert nn.BatchNorm1d(3).load_state_dict(old) == ([], [])  # a checkpoint without version metadata
    with pytest.raises(RuntimeError, match="num_batches_tracked"):
        sd = bn.state_dict()
        del sd["num_batches_tracked"]
        nn.BatchNorm1d(3).load_state_dict(sd)


def test_batchnorm_gradient():
    bn = nn.BatchNorm1d(2).double()
    x = T(RNG.standard_normal((4, 2)), True)
    assert gradcheck(lambda x, w, b: F.batch_norm(x, None, None, w, b, True), (x, bn.weight, bn.bias))


@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5), (3, 3, 4, 5), (2, 3, 2, 3, 2), (16, 3, 12, 12)], ids=str)
@pytest.mark.parametrize("affine", ["both", "weight", "none"])
def test_eager_batch_norm_is_one_node_matching_the_composition_to_second_order(shape, affine):
    """Eager training-mode batch_norm runs as one tape node (PyTorch's native_batch_norm); its output, running
    statistics, gradients (on the arrays and, under create_graph, on tensors) and second derivatives match the
    traced composition's (fnx.grad), in float64."""
    x = T(RNG.standard_normal(shape) * 3 + 2, True)
    w = T(RNG.standard_normal(3), True) if affine != "none" else None
    b = T(RNG.standard_normal(3), True) if affine == "both" else None
    leaves = [t for t in (x, w, b) if t is not None]
    g = T(RNG.standard_normal(shape))

    def f(*args, stats=None):
        x, w, b = (list(args) + [None, None])[:3]
        return F.batch_norm(x, *(stats or (None, None)), w, b, True, 0.3, 1e-3)

    running = [fnx.zeros(3, dtype=fnx.float64), fnx.ones(3, dtype=fnx.float64)]
    y = f(*leaves, stats=running)
    assert y.grad_fn.parents[0].name == "_BatchNormBackward"   # output 0 of the one node
    want_y = fnx.compile(f)(*(t.detach() for t in leaves))   # the composition
    np.testing.assert_allclose(npy(y), npy(want_y), atol=1e-12)
    dims = (0,) + tuple(range(2, len(shape)))
    values = npy(x)
    np.testing.assert_allclose(running[0].numpy(), 0.3 * values.mean(dims), rtol=1e-12)
    np.testing.assert_allclose(running[1].numpy(), 0.7 + 0.3 * values.var(dims, ddof=1), rtol=1e-12)
    loss = lambda *a: (f(*a) * g).sum() ** 2   # noqa: E731
    argnums = tuple(range(len(leaves)))
    want = fnx.grad(loss, argnums=argnums)(*(t.detach() for t in leaves))
    plain = fnx.autograd.grad(loss(*leaves), leaves)
    grads = fnx.autograd.grad(loss(*leaves), leaves, create_graph=True)
    for got, again, expected in zip(plain, grads, want):
        np.testing.assert_allclose(npy(got), npy(expected), rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(npy(again), npy(expected), rtol=1e-9, atol=1e-9)
    second = fnx.autograd.grad(sum((d * d).sum() for d in grads), leaves)
    want2 = fnx.grad(lambda *a: sum((d * d).sum() for d in fnx.grad(loss, argnums=argnums)(*a)), argnums=argnums)(
        *(t.detach() for t in leaves))
    for got, expected in zip(second, want2):
        np.testing.assert_allclose(npy(got), npy(expected), rtol=1e-8, atol=1e-8)


def test_eager_batch_norm_in_float32_keeps_its_dtype_and_matches_float64():
    x = RNG.standard_normal((8, 4, 6, 6)) * 5 + 3
    bn = nn.BatchNorm2d(4)
    y = bn(fnx.tensor(x, dtype=fnx.float32))
    assert y.dtype == fnx.float32 and bn.running_var.dtype == fnx.float32
    mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    np.testing.assert_allclose(y.detach().numpy(), (x - mean[:, None, None]) / np.sqrt(var[:, None, None] + 1e-5),
                               atol=2e-5)


def test_eager_batch_norm_runs_c_loops_on_large_float32_inputs_with_numpys_values(monkeypatch):
    """From fnx/lowering/nn_kernels.MIN_ELEMENTS on, the statistics, output and gradients come from the C loops
    (sums in double): numpy's values to float32 rounding."""
    x = RNG.standard_normal((16, 8, 10, 10)) * 4 + 3
    g = RNG.standard_normal(x.shape)
    assert nn_kernels.batch_norm_forward(x.astype(np.float32).reshape(16, 8, 100), None, None, 1e-5) is not None

    def run():
        xt = T(x.astype(np.float32), True)
        w, b = T(np.linspace(0.5, 2, 8, dtype=np.float32), True), T(np.linspace(-1, 1, 8, dtype=np.float32), True)
        running = [fnx.zeros(8), fnx.ones(8)]
        y = F.batch_norm(xt, *running, w, b, True, 0.1, 1e-5)
        y.backward(T(g.astype(np.float32)))
        return [npy(a) for a in (y, xt.grad, w.grad, b.grad, *running)]

    native = run()
    monkeypatch.setattr(nn_kernels, "MIN_ELEMENTS", 1 << 40)   # numpy's passes
    for got, want in zip(native, run()):
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("rows", [False, True], ids=["channels_first", "channels_last_rows"])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batch_norm_c_loops_round_as_numpys_operations_on_their_own_statistics(affine, dtype, rows):
    """The C loops' terms are numpy's operations on the element type, bit for bit, from the loops' statistics and
    sums: rstd = 1 / sqrt(var + eps), y = x alpha + beta, dx = g alpha - (x - mean) scale - shift; the statistics
    and sums (in double) within rounding of float64 references; over (N, C, L) channels-first arrays (a channel a
    task) and over channels-last rows (M, C)."""
    n, c, length, eps = 6, 5, 900, 1e-3
    x = (RNG.standard_normal((n, c, length)) * 3 + 1).astype(dtype)
    g = RNG.standard_normal(x.shape).astype(dtype)
    w, b = (np.linspace(0.5, 2, c).astype(dtype), np.linspace(-1, 1, c).astype(dtype)) if affine else (None, None)
    if rows:   # each row one position's channels
        x, g = (np.ascontiguousarray(a.transpose(0, 2, 1).reshape(-1, c)) for a in (x, g))
        forward, backward, axes, per = (nn_kernels.batch_norm_forward_rows, nn_kernels.batch_norm_backward_rows, 0,
                                        lambda v: v)
    else:
        forward, backward, axes, per = (nn_kernels.batch_norm_forward, nn_kernels.batch_norm_backward, (0, 2),
                                        lambda v: v[:, None])
    y, mean, var, rstd = forward(x, w, b, eps)
    np.testing.assert_array_equal(rstd, 1.0 / np.sqrt(var + eps))
    alpha = rstd if w is None else rstd * w
    beta = -mean * alpha if b is None else b - mean * alpha
    np.testing.assert_array_equal(y, x * per(alpha) + per(beta))
    tol = 1e-6 if dtype == np.float32 else 1e-14
    x64, g64 = x.astype(np.float64), g.astype(np.float64)
    np.testing.assert_allclose(mean, x64.mean(axes), rtol=tol)
    np.testing.assert_allclose(var, x64.var(axes), rtol=tol)
    dx, sum_g, sum_gc = backward(g, x, mean, rstd, w, True)
    count = n * length
    scale, shift = alpha * rstd * rstd * sum_gc / count, alpha * sum_g / count
    np.testing.assert_array_equal(dx, g * per(alpha) - (x - per(mean)) * per(scale) - per(shift))
    for got, want in ((sum_g, g64.sum(axes)), (sum_gc, (g64 * (x64 - per(mean))).sum(axes))):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(g64).sum(axes).max())
    alone = backward(g, x, mean, rstd, w, False)
    assert alone[0] is None
    np.testing.assert_array_equal(alone[1], sum_g)
    np.testing.assert_array_equal(alone[2], sum_gc)


def test_eval_batch_norm_is_two_passes_over_the_input():
    """Constant statistics: x * alpha + beta per channel (PyTorch's CPU form), two ops on the input's shape where
    (x - mean) * rstd * weight + bias took four; the values of the centered form to rounding."""
    x, stats = RNG.standard_normal((4, 3, 5, 5)), [RNG.standard_normal(3), RNG.random(3) + 0.5]
    w, b = RNG.standard_normal(3), RNG.standard_normal(3)
    f = lambda x, m, v, w, b: F.batch_norm(x, m, v, w, b, False, 0.1, 1e-3)   # noqa: E731
    args = [T(a) for a in (x, *stats, w, b)]
    jaxpr = fnx.make_jaxpr(f)(*args)
    assert sum(tuple(v.aval.shape) == x.shape for e in jaxpr.eqns for v in e.outvars) == 2
    c = (slice(None), None, None)
    want = (x - stats[0][c]) / np.sqrt(stats[1][c] + 1e-3) * w[c] + b[c]
    np.testing.assert_allclose(npy(f(*args)), want, atol=1e-12)


def test_dropout_module_train_and_eval():
    fnx.manual_seed(0)
    drop = nn.Dropout(0.5)
    x = fnx.ones(1000)
    y = drop(x)
    assert 0.4 < (y.numpy() == 0).mean() < 0.6 and set(np.unique(y.numpy()).tolist()) <= {0.0, 2.0}
    drop.eval()
    assert drop(x) is x
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(-0.1)


def test_embedding_module():
    fnx.manual_seed(0)
    emb = nn.Embedding(6, 3, padding_idx=-1)
    assert emb.padding_idx == 5 and not npy(emb.weight)[5].any()
    idx = fnx.tensor([[0, 5], [2, 2]])
    out = emb(idx)
    np.testing.assert_array_equal(npy(out), npy(emb.weight)[[[0, 5], [2, 2]]])
    out.sum().backward()
    np.testing.assert_array_equal(emb.weight.grad.numpy()[:, 0], [1, 0, 2, 0, 0, 0])
    pre = nn.Embedding.from_pretrained(fnx.eye(3))
    assert not pre.weight.requires_grad and pre(fnx.tensor([1])).tolist() == [[0.0, 1.0, 0.0]]


def test_norm_and_shape_modules():
    x = fnx.randn(2, 4, 3, dtype=fnx.float64)
    ln = nn.LayerNorm(3, elementwise_affine=False)
    assert ln.weight is None and list(ln.state_dict()) == []
    np.testing.assert_allclose(npy(nn.LayerNorm([4, 3]).double()(x)), npy(F.layer_norm(x, (4, 3))), atol=1e-12)
    gn = nn.GroupNorm(2, 4).double()
    np.testing.assert_allclose(npy(gn(x)), npy(F.group_norm(x, 2)), atol=1e-12)
    rms = nn.RMSNorm([3], eps=1e-6).double()
    np.testing.assert_allclose(npy(rms(x)), npy(F.rms_norm(x, (3,), eps=1e-6)), atol=1e-12)
    with pytest.raises(ValueError, match="divisible"):
        nn.GroupNorm(3, 4)
    assert nn.Flatten()(x).shape == (2, 12) and nn.Flatten(0, 1)(x).shape == (8, 3)
    assert nn.Unflatten(1, (2, 2))(x).shape == (2, 2, 2, 3)
    assert nn.Identity(1, k=2)(x) is x
    pool = nn.MaxPool2d(2, return_indices=True)
    values, idx = pool(fnx.arange(16.0).reshape(1, 1, 4, 4))
    assert values.tolist() == [[[[5.0, 7.0], [13.0, 15.0]]]] and idx.tolist() == [[[[5, 7], [13, 15]]]]
    assert nn.AdaptiveAvgPool2d(1)(fnx.ones(2, 3, 4, 4)).shape == (2, 3, 1, 1)


def test_activation_modules_match_functions():
    x = fnx.randn(3, 4, dtype=fnx.float64)
    pairs = [(nn.ReLU(), F.relu(x)), (nn.GELU(), F.gelu(x)), (nn.SiLU(), F.silu(x)), (nn.Tanh(), F.tanh(x)),
             (nn.Sigmoid(), F.sigmoid(x)), (nn.Softmax(dim=1), F.softmax(x, 1)),
             (nn.LogSoftmax(dim=0), F.log_softmax(x, 0)), (nn.LeakyReLU(0.2), F.leaky_relu(x, 0.2)),
             (nn.ELU(0.5), F.elu(x, 0.5)), (nn.Softplus(2.0), F.softplus(x, 2.0)), (nn.Mish(), F.mish(x))]
    for module, expected in pairs:
        np.testing.assert_array_equal(npy(module(x)), npy(expected))
    prelu = nn.PReLU(4).double()
    np.testing.assert_allclose(npy(prelu(x)), np.where(npy(x) > 0, npy(x), 0.25 * npy(x)))
    assert repr(nn.LeakyReLU(0.2, inplace=True)) == "LeakyReLU(negative_slope=0.2, inplace=True)"
    assert repr(nn.Softmax(dim=-1)) == "Softmax(dim=-1)"


def test_init_functions():
    fnx.manual_seed(0)
    w = fnx.empty(200, 100)
    nn.init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu")
    assert abs(w.numpy().std() - math.sqrt(2 / 200)) < 0.05 * math.sqrt(2 / 200)
    nn.init.kaiming_uniform_(w, a=0.0)
    assert np.abs(w.numpy()).max() <= math.sqrt(3) * math.sqrt(2 / 100)
    nn.init.xavier_uniform_(w, gain=2.0)
    assert np.abs(w.numpy()).max() <= 2.0 * math.sqrt(6 / 300)
    nn.init.xavier_normal_(w)
    assert abs(w.numpy().std() - math.sqrt(2 / 300)) < 0.05 * math.sqrt(2 / 300)
    nn.init.trunc_normal_(w, std=2.0, a=-1.0, b=1.5)
    assert w.numpy().min() >= -1.0 and w.numpy().max() <= 1.5
    nn.init.orthogonal_(w[:50, :60].contiguous())
    q = fnx.empty(4, 6)
    nn.init.orthogonal_(q, gain=2.0)
    np.testing.assert_allclose(q.numpy() @ q.numpy().T, 4 * np.eye(4), atol=1e-5)
    nn.init.eye_(q)
    assert q.numpy().trace() == 4
    nn.init.constant_(q, 0.5)
    assert (q.numpy() == 0.5).all()
    k = fnx.empty(3, 3, 3)
    nn.init.dirac_(k)
    x = fnx.randn(1, 3, 5)
    np.testing.assert_allclose(npy(F.conv1d(x, k, padding=1)), npy(x), rtol=1e-6)
    p = nn.Parameter(fnx.empty(3))
    nn.init.normal_(p, 1.0, 0.0)  # runs under no_grad: fine on a leaf that requires grad
    assert p.tolist() == [1.0, 1.0, 1.0] and p.requires_grad
    assert nn.init.calculate_gain("leaky_relu", 0.2) == pytest.approx(math.sqrt(2 / 1.04))
    assert nn.init.calculate_gain("tanh") == pytest.approx(5 / 3)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        nn.init.xavier_uniform_(fnx.empty(3))
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        nn.init.calculate_gain("swish")
