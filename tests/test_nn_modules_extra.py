"""nn names fnx added for PyTorch parity: MultiLabelMarginLoss, LazyInstanceNorm*d, the deprecated nn.init aliases
and the nn.utils fusion / initialization helpers, checked against numbers recorded from torch 2.13."""
from __future__ import annotations

import numpy as np
import pytest

import fnx
import fnx.nn as nn
import fnx.nn.functional as F


def test_multilabel_margin_loss_matches_torch():
    x = fnx.tensor([[0.1, 0.2, 0.4, 0.8], [0.3, -0.2, 0.5, 0.1]], requires_grad=True)
    target = fnx.tensor([[3, 0, -1, 1], [1, 1, 2, -1]])   # row 1 lists class 1 twice: it counts twice
    np.testing.assert_allclose(F.multilabel_margin_loss(x, target, reduction="none").detach().numpy(), [0.85, 1.75],
                               rtol=1e-6)
    np.testing.assert_allclose(F.multilabel_margin_loss(x, target, reduction="sum").item(), 2.6, rtol=1e-6)
    nn.MultiLabelMarginLoss()(x, target).backward()
    np.testing.assert_allclose(x.grad.numpy(), [[-0.25, 0.25, 0.25, -0.25], [0.375, -0.5, -0.25, 0.375]], rtol=1e-6)
    assert F.multilabel_margin_loss(x[0], target[0]).shape == ()
    assert F.multilabel_margin_loss(fnx.zeros(0, 4), fnx.zeros(0, 4, dtype=fnx.int64)).item() == 0.0


def test_multilabel_margin_loss_errors():
    x = fnx.randn(2, 4)
    with pytest.raises(RuntimeError, match=r"inconsistent target size: \[2, 3\] for input of size: \[2, 4\]"):
        F.multilabel_margin_loss(x, fnx.zeros(2, 3, dtype=fnx.int64))
    with pytest.raises(RuntimeError, match="expected scalar type Long"):
        F.multilabel_margin_loss(x, fnx.zeros(2, 4))
    with pytest.raises(RuntimeError, match=r"class indices in \[0, 4\) or -1"):
        F.multilabel_margin_loss(x, fnx.tensor([[0, -1, 7, 0], [0, 1, 2, 3]]))
    with pytest.raises(RuntimeError, match="Expected non-empty vector or matrix"):
        F.multilabel_margin_loss(fnx.randn(2, 3, 4), fnx.zeros(2, 3, 4, dtype=fnx.int64))


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_lazy_instance_norm_becomes_instance_norm_with_tracked_stats(nd):
    lazy = getattr(nn, f"LazyInstanceNorm{nd}d")()
    x = fnx.randn(*(2, 3) + (4,) * nd)
    y = lazy(x)
    assert type(lazy) is getattr(nn, f"InstanceNorm{nd}d") and lazy.num_features == 3
    assert lazy.affine and lazy.track_running_stats   # PyTorch's lazy norms default both to True
    assert list(lazy.state_dict()) == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    real = getattr(nn, f"InstanceNorm{nd}d")(3, affine=True, track_running_stats=True)
    np.testing.assert_allclose(y.detach().numpy(), real(x).detach().numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(lazy.running_mean.numpy(), real.running_mean.numpy(), rtol=1e-6)
    plain = getattr(nn, f"LazyInstanceNorm{nd}d")(affine=False, track_running_stats=False)
    plain(x[0])   # unbatched: the channels are dim 0
    assert plain.num_features == 3 and list(plain.state_dict()) == []


OLD_INIT_NAMES = ["uniform", "normal", "constant", "eye", "dirac", "xavier_uniform", "xavier_normal",
                  "kaiming_uniform", "kaiming_normal", "orthogonal", "sparse"]


@pytest.mark.parametrize("old", OLD_INIT_NAMES)
def test_deprecated_init_names_warn_and_fill_as_the_new_ones(old):
    args = {"constant": (0.5,), "sparse": (0.5,)}.get(old, ())
    shape = (3, 3, 3) if old == "dirac" else (4, 6)
    fnx.manual_seed(1)
    expected = getattr(nn.init, old + "_")(fnx.empty(*shape), *args)
    fnx.manual_seed(1)
    with pytest.warns(FutureWarning, match=f"`nn.init.{old}` is now deprecated in favor of `nn.init.{old}_`"):
        got = getattr(nn.init, old)(fnx.empty(*shape), *args)
    np.testing.assert_array_equal(got.numpy(), expected.numpy())


def _eval_bn(n: int, nd: int, seed: int):
    r = np.random.default_rng(seed)
    bn = (nn.BatchNorm1d if nd == 1 else nn.BatchNorm2d)(n).eval()
    with fnx.no_grad():
        for t, v in ((bn.weight, r.standard_normal(n)), (bn.bias, r.standard_normal(n)),
                     (bn.running_mean, r.standard_normal(n)), (bn.running_var, np.abs(r.standard_normal(n)) + 0.5)):
            t.copy_(fnx.tensor(v, dtype=t.dtype))
    return bn


def test_fusing_batch_norm_keeps_the_eval_outputs():
    x = fnx.randn(2, 3, 6, 6)
    conv, bn = nn.Conv2d(3, 4, 3).eval(), _eval_bn(4, 2, 0)
    fused = nn.utils.fuse_conv_bn_eval(conv, bn)
    assert isinstance(fused.weight, nn.Parameter) and fused is not conv
    np.testing.assert_allclose(fused(x).detach().numpy(), bn(conv(x)).detach().numpy(), rtol=1e-5, atol=1e-5)
    convt = nn.ConvTranspose2d(3, 4, 2, bias=False).eval()
    fused = nn.utils.fuse_conv_bn_eval(convt, bn, transpose=True)
    np.testing.assert_allclose(fused(x).detach().numpy(), bn(convt(x)).detach().numpy(), rtol=1e-5, atol=1e-5)
    linear, bn1 = nn.Linear(5, 4).eval(), _eval_bn(4, 1, 1)
    z = fnx.randn(3, 5)
    np.testing.assert_allclose(nn.utils.fuse_linear_bn_eval(linear, bn1)(z).detach().numpy(),
                               bn1(linear(z)).detach().numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(AssertionError, match="Fusion only for eval!"):
        nn.utils.fuse_conv_bn_eval(conv.train(), bn)
    with pytest.raises(AssertionError, match="linear.out_features == bn.num_features"):
        nn.utils.fuse_linear_bn_eval(linear, _eval_bn(3, 1, 2))


def test_skip_init_leaves_the_random_stream_alone():
    fnx.manual_seed(7)
    expected = fnx.rand(3)
    fnx.manual_seed(7)
    layer = nn.utils.skip_init(nn.Linear, 5, 2, bias=False)
    assert layer.weight.shape == (2, 5) and layer.bias is None
    np.testing.assert_array_equal(fnx.rand(3).numpy(), expected.numpy())
    with pytest.raises(RuntimeError, match="Expected a Module"):
        nn.utils.skip_init(int)
    with pytest.raises(RuntimeError, match="Module must support a 'device' arg"):
        nn.utils.skip_init(nn.ReLU)


def test_conv_weight_memory_format_conversion_walks_the_tree():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Sequential(nn.ConvTranspose2d(4, 2, 2)), nn.Conv3d(1, 1, 1))
    before = [p.detach().clone() for p in model.parameters()]
    assert nn.utils.convert_conv2d_weight_memory_format(model, fnx.channels_last) is model
    assert model[0].weight.is_contiguous(memory_format=fnx.channels_last)
    assert model[2][0].weight.is_contiguous(memory_format=fnx.channels_last)
    nn.utils.convert_conv3d_weight_memory_format(model, fnx.channels_last_3d)
    assert model[3].weight.is_contiguous(memory_format=fnx.channels_last_3d)
    for b, p in zip(before, model.parameters()):
        np.testing.assert_array_equal(b.numpy(), p.detach().numpy())


def test_stateless_functional_call_is_the_deprecated_alias():
    layer = nn.Linear(2, 1)
    weight = fnx.ones(1, 2)
    with pytest.warns(FutureWarning, match="torch.nn.utils.stateless.functional_call` is deprecated"):
        y = nn.utils.stateless.functional_call(layer, {"weight": weight, "bias": fnx.zeros(1)}, (fnx.ones(3, 2),))
    np.testing.assert_array_equal(y.detach().numpy(), np.full((3, 1), 2.0))


def test_cross_map_lrn2d_reproduces_torchs_legacy_forward_and_backward():
    x = (fnx.arange(16, dtype=fnx.float64).reshape(2, 4, 1, 2) * 0.37).sin().requires_grad_()
    lrn = nn.CrossMapLRN2d(3, alpha=0.5, beta=0.75, k=1.0)
    assert repr(lrn) == "CrossMapLRN2d(3, alpha=0.5, beta=0.75, k=1.0)"
    y = lrn(x)
    y.backward(fnx.linspace(-1, 1, 16, dtype=fnx.float64).reshape(2, 4, 1, 2))
    # torch 2.13 on the same input and output gradient
    np.testing.assert_allclose(y.detach().numpy().reshape(-1), [
        0.0, 0.3244647538787109, 0.573452124951476, 0.7316931701901159, 0.796569407688429, 0.7652874505000616,
        0.6654259082934755, 0.4510019898395183, 0.17383121091585302, -0.1728798764101845, -0.4601588629073338,
        -0.6662098779590144, -0.7734755390732659, -0.7935853120717338, -0.7362423913815503, -0.5676149081892138],
        rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(x.grad.numpy().reshape(-1), [
        -0.9466908911302903, -0.7556288129640033, -0.5665478927070448, -0.36057299528836095, -0.22019035042593393,
        -0.08108806653815757, -0.023780378261683773, 0.014430909742042388, 0.06367210975536036, 0.18315236264249607,
        0.2741210555369489, 0.3333758138177153, 0.3704855393554454, 0.4094102720692935, 0.4989999463024106,
        0.6592009094117779], rtol=1e-13, atol=1e-15)
    with pytest.raises(ValueError, match="CrossMapLRN2d: Expected input to be 4D, got 3D instead."):
        lrn(fnx.randn(4, 2, 2))
