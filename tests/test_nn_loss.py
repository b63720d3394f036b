"""Loss functions and loss modules against float64 numpy references of PyTorch's formulas."""
import numpy as np
import pytest

import fnx
import fnx.nn as nn
import fnx.nn.functional as F
from fnx.autograd import gradcheck

RNG = np.random.default_rng(1)


def T(a, requires_grad=False):
    return fnx.tensor(np.asarray(a), requires_grad=requires_grad)


def close(a, b, tol=1e-10):
    np.testing.assert_allclose(a.detach().numpy(), b, rtol=tol, atol=tol)


def log_softmax(x, axis=1):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def ref_ce_indices(x, t, weight=None, ignore_index=-100, reduction="mean", eps=0.0):
    """PyTorch's cross entropy with class indices: (N, C, *d) logits, (N, *d) targets."""
    c = x.shape[1]
    lp = np.moveaxis(log_softmax(x, 1), 1, -1)                    # (N, *d, C)
    w = np.ones(c) if weight is None else weight
    valid = t != ignore_index
    safe = np.where(valid, t, 0)
    wt = w[safe] * valid
    nll = -np.take_along_axis(lp, safe[..., None], -1)[..., 0] * wt
    smooth = -(lp * w).sum(-1) * valid
    if reduction == "none":
        return (1 - eps) * nll + eps / c * smooth
    if reduction == "sum":
        return (1 - eps) * nll.sum() + eps / c * smooth.sum()
    return ((1 - eps) * nll.sum() + eps / c * smooth.sum()) / wt.sum()


def ref_ce_probs(x, p, weight=None, reduction="mean", label_smoothing=0.0):
    c = x.shape[1]
    q = p * (1 - label_smoothing) + label_smoothing / c
    w = np.ones(c) if weight is None else weight
    shape = [1] * x.ndim
    shape[1] = c
    loss = -(log_softmax(x, 1) * q * w.reshape(shape)).sum(1)
    return loss if reduction == "none" else loss.sum() if reduction == "sum" else loss.sum() / loss.size


CE_CASES = [dict(), dict(reduction="sum"), dict(reduction="none"), dict(weight=True), dict(ignore_index=2),
            dict(label_smoothing=0.2), dict(label_smoothing=0.3, weight=True),
            dict(label_smoothing=0.1, weight=True, reduction="none", ignore_index=1),
            dict(label_smoothing=0.1, weight=True, reduction="sum", ignore_index=1)]


@pytest.mark.parametrize("kw", CE_CASES, ids=str)
def test_cross_entropy_class_indices(kw):
    x = RNG.standard_normal((6, 4)) * 2
    t = np.array([0, 3, 1, 2, 2, 1])
    if "ignore_index" not in kw:
        t[2] = -100
    w = RNG.random(4) + 0.5
    fk = {k: v for k, v in kw.items() if k != "weight"}
    if kw.get("weight"):
        fk["weight"] = T(w)
    ref = ref_ce_indices(x, t, w if kw.get("weight") else None, kw.get("ignore_index", -100),
                         kw.get("reduction", "mean"), kw.get("label_smoothing", 0.0))
    close(F.cross_entropy(T(x), T(t), **fk), ref)
    module = nn.CrossEntropyLoss(**fk)
    close(module(T(x), T(t)), ref)
    if "label_smoothing" not in kw:
        close(F.nll_loss(F.log_softmax(T(x), 1), T(t), **fk), ref)


def test_cross_entropy_spatial_unbatched_and_probabilities():
    x = RNG.standard_normal((2, 3, 4, 2))
    t = RNG.integers(0, 3, (2, 4, 2))
    close(F.cross_entropy(T(x), T(t), label_smoothing=0.15), ref_ce_indices(x, t, eps=0.15))
    close(F.cross_entropy(T(x), T(t), reduction="none"), ref_ce_indices(x, t, reduction="none"))
    x1 = RNG.standard_normal(5)
    close(F.cross_entropy(T(x1), T(np.array(3))), -log_softmax(x1[None])[0, 3])
    p = RNG.random((2, 3, 4, 2))
    p /= p.sum(1, keepdims=True)
    w = RNG.random(3) + 0.5
    for kw in [dict(), dict(reduction="none"), dict(reduction="sum"), dict(label_smoothing=0.2)]:
        close(F.cross_entropy(T(x), T(p), **kw), ref_ce_probs(x, p, **kw))
    close(F.cross_entropy(T(x), T(p), weight=T(w)), ref_ce_probs(x, p, weight=w))


def test_cross_entropy_gradient_and_errors():
    x = T(RNG.standard_normal((3, 4)), True)
    t = T(np.array([1, -100, 3]))
    assert gradcheck(lambda x: F.cross_entropy(x, t, label_smoothing=0.1), (x,))
    p = T(RNG.dirichlet(np.ones(4), 3))
    assert gradcheck(lambda x: F.cross_entropy(x, p), (x,))
    with pytest.raises(IndexError, match="Target 7 is out of bounds"):
        F.cross_entropy(x, T(np.array([1, 7, 0])))
    with pytest.raises(ValueError, match="batch_size"):
        F.cross_entropy(x, T(np.array([1, 2])))
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        F.cross_entropy(x, t, reduction="avg")


@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_under_transforms_picks_targets_with_a_select_not_a_scatter(weighted):
    """Staged for compile, the targets' log-probabilities are a masked sum over the classes, whose gradient is a
    select that compile fuses with log_softmax's; a gather's gradient would be a zero-filled buffer and an
    index_put into a copy of it. Values and gradients (ignored targets, spatial dims, class weights) equal eager's,
    staged or run op by op (there the gather)."""
    x = RNG.standard_normal((4, 5, 3))
    t = T(np.array([[1, -100, 4], [0, 2, 2], [3, 3, -100], [4, 0, 1]]))
    w = T(RNG.uniform(0.5, 2.0, 5)) if weighted else None

    def loss(x):
        return F.cross_entropy(x, t, weight=w, ignore_index=-100)

    jaxpr = fnx.make_jaxpr(fnx.grad(loss))(T(x))
    eqns = jaxpr.jaxpr.eqns
    assert "index_put" not in [e.prim.name for e in eqns]
    assert [e.inputs[0].aval.shape for e in eqns if e.prim.name == "index"] == ([(5,)] if weighted else [])
    eager = T(x, True)
    loss(eager).backward()
    close(fnx.grad(loss)(T(x)), eager.grad.numpy())
    close(fnx.compile(fnx.grad(loss))(T(x)), eager.grad.numpy())
    close(fnx.compile(loss)(T(x)), loss(T(x)).numpy())


def test_all_targets_ignored_gives_nan_like_pytorch():
    out = F.cross_entropy(fnx.randn(2, 3), fnx.tensor([-100, -100]))
    assert np.isnan(out.item())


def test_binary_cross_entropy_family():
    p = RNG.random((3, 4)) * 0.98 + 0.01
    y = (RNG.random((3, 4)) > 0.5).astype(float)
    w = RNG.random((3, 4))
    bce = -(y * np.log(p) + (1 - y) * np.log(1 - p))
    close(F.binary_cross_entropy(T(p), T(y)), bce.mean())
    close(F.binary_cross_entropy(T(p), T(y), weight=T(w), reduction="sum"), (w * bce).sum())
    close(nn.BCELoss(reduction="none")(T(p), T(y)), bce)
    edge = F.binary_cross_entropy(fnx.tensor([0.0, 1.0]), fnx.tensor([1.0, 0.0]), reduction="none")
    assert edge.tolist() == [100.0, 100.0]  # logs are clamped at -100
    x = RNG.standard_normal((3, 4)) * 3
    pw = RNG.random(4) + 0.5
    sig = 1 / (1 + np.exp(-x))
    ref = -(pw * y * np.log(sig) + (1 - y) * np.log(1 - sig))
    close(F.binary_cross_entropy_with_logits(T(x), T(y), pos_weight=T(pw), reduction="none"), ref)
    close(nn.BCEWithLogitsLoss(weight=T(w))(T(x), T(y)), (w * -(y * np.log(sig) + (1 - y) * np.log(1 - sig))).mean())
    big = F.binary_cross_entropy_with_logits(fnx.tensor([200.0, -200.0]), fnx.tensor([0.0, 1.0]), reduction="none")
    np.testing.assert_allclose(big.numpy(), [200.0, 200.0])
    zero = fnx.zeros(2, dtype=fnx.float64, requires_grad=True)
    F.binary_cross_entropy_with_logits(zero, T([1.0, 0.0]), reduction="sum").backward()
    assert zero.grad.tolist() == [-0.5, 0.5]
    assert gradcheck(lambda p: F.binary_cross_entropy(p, T(y)), (T(p, True),))
    with pytest.raises(ValueError, match="same as input size"):
        F.binary_cross_entropy_with_logits(fnx.zeros(2), fnx.zeros(3))


def test_regression_losses():
    x, y = RNG.standard_normal((3, 4)) * 2, RNG.standard_normal((3, 4))
    d = x - y
    close(F.mse_loss(T(x), T(y)), (d ** 2).mean())
    close(nn.MSELoss(reduction="sum")(T(x), T(y)), (d ** 2).sum())
    close(F.l1_loss(T(x), T(y), reduction="none"), np.abs(d))
    w = RNG.random((3, 4))
    close(F.mse_loss(T(x), T(y), weight=T(w)), (w * d ** 2).sum() / w.sum())
    for beta in (0.5, 1.0):
        ref = np.where(np.abs(d) < beta, 0.5 * d ** 2 / beta, np.abs(d) - 0.5 * beta)
        close(F.smooth_l1_loss(T(x), T(y), beta=beta), ref.mean())
        close(nn.SmoothL1Loss(beta=beta, reduction="none")(T(x), T(y)), ref)
    close(F.smooth_l1_loss(T(x), T(y), beta=0.0), np.abs(d).mean())
    huber = np.where(np.abs(d) < 0.7, 0.5 * d ** 2, 0.7 * (np.abs(d) - 0.35))
    close(nn.HuberLoss(delta=0.7)(T(x), T(y)), huber.mean())
    with pytest.warns(UserWarning, match="different to the input size"):
        F.mse_loss(T(x), T(y[0]))
    assert gradcheck(lambda a: F.smooth_l1_loss(a, T(y)), (T(x, True),))


def test_kl_div_and_other_losses():
    lp = log_softmax(RNG.standard_normal((3, 4)))
    q = np.exp(log_softmax(RNG.standard_normal((3, 4))))
    close(F.kl_div(T(lp), T(q), reduction="batchmean"), (q * (np.log(q) - lp)).sum() / 3)
    close(F.kl_div(T(lp), T(np.log(q)), reduction="sum", log_target=True), (q * (np.log(q) - lp)).sum())
    x1, x2 = RNG.standard_normal(5), RNG.standard_normal(5)
    sgn = np.sign(RNG.standard_normal(5))
    close(F.margin_ranking_loss(T(x1), T(x2), T(sgn), 0.2), np.maximum(0, -sgn * (x1 - x2) + 0.2).mean())
    close(F.soft_margin_loss(T(x1), T(sgn)), np.log1p(np.exp(-sgn * x1)).mean())
    close(F.gaussian_nll_loss(T(x1), T(x2), T(np.abs(x1) + 0.1)),
          (0.5 * (np.log(np.abs(x1) + 0.1) + (x1 - x2) ** 2 / (np.abs(x1) + 0.1))).mean())
    close(F.poisson_nll_loss(T(x1), T(np.abs(x2))), (np.exp(x1) - np.abs(x2) * x1).mean())


def test_legacy_size_average_and_reduce_flags():
    """They still work, with PyTorch's deprecation warning naming the reduction= to write instead."""
    x, y = fnx.randn(3, 2, dtype=fnx.float64), fnx.randn(3, 2, dtype=fnx.float64)
    with pytest.warns(UserWarning, match=r"size_average and reduce args will be deprecated, please use "
                                         r"reduction='sum' instead\."):
        assert F.mse_loss(x, y, size_average=False).item() == pytest.approx(F.mse_loss(x, y, reduction="sum").item())
    with pytest.warns(UserWarning, match="reduction='none'"):
        assert nn.MSELoss(reduce=False)(x, y).shape == (3, 2)
    with pytest.warns(UserWarning, match="reduction='sum'"):
        assert nn.L1Loss(size_average=False).reduction == "sum"


def test_loss_modules_register_weights_as_buffers():
    w = fnx.tensor([1.0, 2.0])
    ce = nn.CrossEntropyLoss(weight=w)
    assert list(ce.state_dict()) == ["weight"]
    assert repr(ce) == "CrossEntropyLoss()"
    assert list(nn.BCEWithLogitsLoss(pos_weight=w).state_dict()) == ["pos_weight"]


def test_multi_margin_and_triplet_losses():
    x = RNG.standard_normal((3, 4))
    y = np.array([0, 3, 1])
    hinge = np.maximum(0, 1.0 - x[np.arange(3), y][:, None] + x)
    hinge[np.arange(3), y] = 0
    close(F.multi_margin_loss(T(x), T(y)), (hinge.sum(1) / 4).mean())
    close(nn.MultiMarginLoss(p=2, reduction="sum")(T(x), T(y)), (hinge ** 2).sum() / 4)
    a, p, n = (RNG.standard_normal((3, 2)) for _ in range(3))
    dist = lambda u, v: np.linalg.norm(u - v + 1e-6, axis=-1)  # noqa: E731
    ref = np.maximum(dist(a, p) - dist(a, n) + 1.0, 0).mean()
    close(F.triplet_margin_loss(T(a), T(p), T(n)), ref)
    close(nn.TripletMarginWithDistanceLoss()(T(a), T(p), T(n)), ref)


def ref_ctc(lp, target, steps, blank=0):
    """-log of the summed probability of every alignment of `target` in the first `steps` steps of lp (T, C):
    every path of symbols that, its repeats merged and its blanks dropped, reads `target`."""
    import itertools

    total = 0.0
    for path in itertools.product(range(lp.shape[1]), repeat=steps):
        merged = [s for i, s in enumerate(path) if i == 0 or s != path[i - 1]]
        if [s for s in merged if s != blank] == list(target):
            total += np.exp(sum(lp[t, s] for t, s in enumerate(path)))
    return -np.log(total) if total > 0 else np.inf


def test_ctc_loss_against_every_alignment():
    steps, n, c = 5, 4, 3
    logits = RNG.standard_normal((steps, n, c))
    lp = np.stack([log_softmax(logits[:, i], 1) for i in range(n)], 1)
    targets = np.array([[1, 1, 0], [2, 1, 2], [1, 0, 0], [2, 2, 0]])
    tlen, ilen = [2, 3, 0, 2], [5, 5, 4, 2]   # a repeat needs a blank between; the last cannot fit: inf
    want = np.array([ref_ctc(lp[:, i], targets[i, :tlen[i]], ilen[i]) for i in range(n)])
    x = T(logits, requires_grad=True)
    got = F.ctc_loss(F.log_softmax(x, 2), T(targets), ilen, tlen, reduction="none")
    close(got, want)
    flat = np.concatenate([targets[i, :tlen[i]] for i in range(n)])
    close(F.ctc_loss(F.log_softmax(x, 2), T(flat), T(ilen), T(tlen), reduction="none"), want)
    finite = np.isfinite(want)
    close(F.ctc_loss(F.log_softmax(x, 2), T(targets), ilen, tlen, zero_infinity=True, reduction="sum"),
          want[finite].sum())
    close(nn.CTCLoss(zero_infinity=True)(F.log_softmax(x, 2), T(targets), ilen, tlen),
          (np.where(finite, want, 0) / np.maximum(tlen, 1)).mean())
    unbatched = F.ctc_loss(F.log_softmax(x[:, 1], 1), T(targets[1]), [5], [3])
    close(unbatched, want[1] / 3)
    # gradients of the finite losses (impossible alignments send none with zero_infinity), and compile
    loss = lambda v: F.ctc_loss(F.log_softmax(v, 2), T(targets), ilen, tlen, zero_infinity=True)
    assert gradcheck(loss, (x,))
    loss(x).backward()
    assert np.isfinite(x.grad.numpy()).all() and (x.grad.numpy()[:, 3] == 0).all()
    close(fnx.compile(loss)(x.detach()), loss(x.detach()).item(), 1e-12)
    bad = [(lambda: F.ctc_loss(T(lp), T(targets), ilen, tlen, blank=3), "blank must be in label range"),
           (lambda: F.ctc_loss(T(lp), T(targets + 5), ilen, tlen), r"class indices in \[0, 3\)"),
           (lambda: F.ctc_loss(T(lp), T(targets), [6, 5, 5, 5], tlen), "at most the 5 time steps"),
           (lambda: F.ctc_loss(T(lp), T(targets), [5, 5], tlen), "one length per sample: expected 4, got 2")]
    for call, message in bad:
        with pytest.raises(RuntimeError, match=message):
            call()


@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_mse_loss_is_one_node_with_the_compositions_values(reduction, dtype):
    """Eager mse_loss of one shape (mean or sum) is one node (a difference and one dot product): numpy's float64
    values and gradients for both operands, float64 gradcheck and gradgradcheck (create_graph runs the composition),
    an in-place write to an input before backward caught, and no node where nothing requires grad."""
    x, y = RNG.standard_normal((7, 9)), RNG.standard_normal((7, 9))
    a, b = fnx.tensor(x, dtype=dtype, requires_grad=True), fnx.tensor(y, dtype=dtype, requires_grad=True)
    loss = F.mse_loss(a, b, reduction=reduction)
    assert loss.grad_fn.name == "_MSELossBackward" and loss.dtype is a.dtype
    d = a.detach().double().numpy() - b.detach().double().numpy()
    scale = 1 / d.size if reduction == "mean" else 1
    tol = 1e-5 if dtype == "float32" else 1e-12
    close(loss, (d * d).sum() * scale, tol)
    loss.backward()
    close(a.grad, 2 * d * scale, tol)
    close(b.grad, -2 * d * scale, tol)
    xs = fnx.tensor(x, requires_grad=True)
    assert gradcheck(lambda t: F.mse_loss(t, T(y), reduction=reduction), (xs,))
    assert fnx.autograd.gradgradcheck(lambda t: F.mse_loss(t, T(y), reduction=reduction), (xs,))
    c = xs * 1.0
    loss = F.mse_loss(c, T(y))
    with fnx.no_grad():
        c.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
    assert F.mse_loss(T(x), T(y)).grad_fn is None
