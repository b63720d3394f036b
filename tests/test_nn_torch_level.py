"""The torch-level functional names (fnx/nn/torch_level.py: torch.conv2d, torch.dropout, torch.batch_norm, ...):
PyTorch's signatures (recorded from torch 2.13's _VariableFunctions.pyi), and the same values and gradients as the
fnx.nn.functional forms they wrap (which the op table and test_nn_functional check against references)."""
from __future__ import annotations

import inspect

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fnx
import fnx.nn.functional as F
from fnx.nn import torch_level

# torch 2.13's parameters, in order; "=" marks those with a default (keyword-only ones, like kl_div's log_target
# and the `out` of hardshrink/threshold, are left out)
SIGNATURES = {
    "conv1d": "input weight bias= stride= padding= dilation= groups=",
    "conv2d": "input weight bias= stride= padding= dilation= groups=",
    "conv3d": "input weight bias= stride= padding= dilation= groups=",
    "conv_transpose1d": "input weight bias= stride= padding= output_padding= groups= dilation=",
    "conv_transpose2d": "input weight bias= stride= padding= output_padding= groups= dilation=",
    "conv_transpose3d": "input weight bias= stride= padding= output_padding= groups= dilation=",
    "dropout": "input p train", "dropout_": "input p train", "alpha_dropout": "input p train",
    "alpha_dropout_": "input p train", "feature_dropout": "input p train", "feature_dropout_": "input p train",
    "feature_alpha_dropout": "input p train", "feature_alpha_dropout_": "input p train",
    "embedding": "weight indices padding_idx= scale_grad_by_freq= sparse=",
    "embedding_bag": "weight indices offsets scale_grad_by_freq= mode= sparse= per_sample_weights= "
                     "include_last_offset= padding_idx=",
    "layer_norm": "input normalized_shape weight= bias= eps= cudnn_enable=",
    "group_norm": "input num_groups weight= bias= eps= cudnn_enabled=",
    "batch_norm": "input weight bias running_mean running_var training momentum eps cudnn_enabled",
    "instance_norm": "input weight bias running_mean running_var use_input_stats momentum eps cudnn_enabled",
    "rms_norm": "input normalized_shape weight= eps=",
    "pixel_shuffle": "input upscale_factor", "pixel_unshuffle": "input downscale_factor",
    "channel_shuffle": "input groups", "cosine_similarity": "x1 x2 dim= eps=",
    "pairwise_distance": "x1 x2 p= eps= keepdim=", "pdist": "input p=",
    "kl_div": "input target reduction=", "margin_ranking_loss": "input1 input2 target margin= reduction=",
    "triplet_margin_loss": "anchor positive negative margin= p= eps= swap= reduction=",
    "hinge_embedding_loss": "input target margin= reduction=",
    "cosine_embedding_loss": "input1 input2 target margin= reduction=",
    "poisson_nll_loss": "input target log_input full eps reduction",
    "ctc_loss": "log_probs targets input_lengths target_lengths blank= reduction= zero_infinity=",
    "binary_cross_entropy_with_logits": "input target weight= pos_weight= reduction=",
    "prelu": "input weight", "selu": "input", "selu_": "input", "celu": "input alpha=", "celu_": "input alpha=",
    "rrelu": "input lower= upper= training= generator=", "rrelu_": "input lower= upper= training= generator=",
    "hardshrink": "input lambd=", "threshold": "input threshold value", "threshold_": "input threshold value",
    "relu_": "input",
    "max_pool1d": "input kernel_size stride= padding= dilation= ceil_mode=",
    "max_pool1d_with_indices": "input kernel_size stride= padding= dilation= ceil_mode=",
    "max_pool2d": "input kernel_size stride= padding= dilation= ceil_mode=",
    "max_pool3d": "input kernel_size stride= padding= dilation= ceil_mode=",
    "avg_pool1d": "input kernel_size stride= padding= ceil_mode= count_include_pad=",
    "adaptive_avg_pool1d": "input output_size", "adaptive_max_pool1d": "input output_size",
    "bilinear": "input1 input2 weight bias=",
}


def positional_parameters(fn) -> str:
    """`fn`'s parameters that are not keyword-only, as "a b c=" (a trailing = where there is a default)."""
    params = [p for p in inspect.signature(fn).parameters.values() if p.kind is not p.KEYWORD_ONLY]
    return " ".join(p.name + ("=" if p.default is not p.empty else "") for p in params)


def test_every_name_is_on_fnx_with_torchs_parameters():
    assert set(SIGNATURES) == set(torch_level.__all__)
    for name, recorded in SIGNATURES.items():
        assert positional_parameters(getattr(fnx, name)) == recorded, name


ALIASES = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "rms_norm",
           "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "cosine_similarity", "pairwise_distance", "pdist",
           "bilinear", "prelu", "hardshrink", "relu_", "adaptive_avg_pool1d", "selu_", "celu_"]


def test_names_whose_signature_agrees_are_the_functional_forms_themselves():
    for name in ALIASES:
        assert getattr(fnx, name) is getattr(F, name), name


def _pairs(r: np.random.Generator, n: int) -> tuple[dict, list]:
    """name -> (fnx-level call, the F call it stands for), as functions of fresh float64 tensors, and those
    tensors (the leaves to differentiate)."""
    leaves = []

    def t(*shape, positive=False):
        a = r.standard_normal(shape)
        leaves.append(fnx.tensor(np.abs(a) + 0.1 if positive else a, requires_grad=True))
        return leaves[-1]

    x3, x4, x5 = t(n, 4, 7), t(n, 4, 5, 6), t(n, 2, 4, 5, 6)
    b4 = t(4)
    sign = fnx.tensor(np.where(r.standard_normal((n, 3)) > 0, 1.0, -1.0))
    a, b, c, pos = t(n, 3), t(n, 3), t(n, 3), t(n, 3, positive=True)
    rm, rv = fnx.tensor(r.standard_normal(4)), fnx.tensor(np.abs(r.standard_normal(4)) + 0.5)
    logits = t(6, n, 4)
    targets, lens = fnx.tensor(r.integers(1, 4, (n, 2))), [6] * n
    table = t(5, 3)
    idx = fnx.tensor(r.integers(0, 5, (n, 2)))
    return {
        "embedding": (lambda: fnx.embedding(table, idx, 2), lambda: F.embedding(idx, table, 2)),
        "layer_norm": (lambda: fnx.layer_norm(x3, [7], None, None, 1e-3, False),
                       lambda: F.layer_norm(x3, [7], None, None, 1e-3)),
        "group_norm": (lambda: fnx.group_norm(x4, 2, b4, b4), lambda: F.group_norm(x4, 2, b4, b4)),
        "batch_norm": (lambda: fnx.batch_norm(x4, b4, None, rm, rv, False, 0.1, 1e-3, True),
                       lambda: F.batch_norm(x4, rm, rv, b4, None, False, 0.1, 1e-3)),
        "instance_norm": (lambda: fnx.instance_norm(x4, None, b4, None, None, True, 0.1, 1e-5, False),
                          lambda: F.instance_norm(x4, None, None, None, b4, True, 0.1, 1e-5)),
        "kl_div": (lambda: fnx.kl_div(a, pos), lambda: F.kl_div(a, pos, reduction="none")),
        "kl_div mean": (lambda: fnx.kl_div(a, b, 1, log_target=True),
                        lambda: F.kl_div(a, b, reduction="sum", log_target=True) / a.numel()),
        "margin_ranking_loss": (lambda: fnx.margin_ranking_loss(a, b, sign, 0.2, 2),
                                lambda: F.margin_ranking_loss(a, b, sign, 0.2, reduction="sum")),
        "triplet_margin_loss": (lambda: fnx.triplet_margin_loss(a, b, c, 0.5, 1.0, 1e-6, True, 1),
                                lambda: F.triplet_margin_loss(a, b, c, 0.5, 1.0, 1e-6, True)),
        "hinge_embedding_loss": (lambda: fnx.hinge_embedding_loss(a, sign),
                                 lambda: F.hinge_embedding_loss(a, sign, reduction="none")),
        "cosine_embedding_loss": (lambda: fnx.cosine_embedding_loss(a, b, sign[:, 0], 0.1, 1),
                                  lambda: F.cosine_embedding_loss(a, b, sign[:, 0], 0.1)),
        "poisson_nll_loss": (lambda: fnx.poisson_nll_loss(pos, pos * 2, False, True, 1e-8, 0),
                             lambda: F.poisson_nll_loss(pos, pos * 2, False, True, reduction="none")),
        "ctc_loss": (lambda: fnx.ctc_loss(F.log_softmax(logits, 2), targets, lens, [2] * n, 0, 1),
                     lambda: F.ctc_loss(F.log_softmax(logits, 2), targets, lens, [2] * n)),
        "binary_cross_entropy_with_logits": (
            lambda: fnx.binary_cross_entropy_with_logits(a, pos / (pos + 1), None, pos[0]),
            lambda: F.binary_cross_entropy_with_logits(a, pos / (pos + 1), reduction="none", pos_weight=pos[0])),
        "selu": (lambda: fnx.selu(x3), lambda: F.selu(x3)),
        "celu": (lambda: fnx.celu(x3, 0.5), lambda: F.celu(x3, 0.5)),
        "rrelu": (lambda: fnx.rrelu(x3, 0.1, 0.2), lambda: F.rrelu(x3, 0.1, 0.2)),
        "threshold": (lambda: fnx.threshold(x3, 0.1, -2.0), lambda: F.threshold(x3, 0.1, -2.0)),
        "max_pool1d": (lambda: fnx.max_pool1d(x3, 3, (), 1), lambda: F.max_pool1d(x3, 3, 3, 1)),
        "max_pool1d_with_indices": (lambda: fnx.max_pool1d_with_indices(x3, 2, 1),
                                    lambda: F.max_pool1d(x3, 2, 1, return_indices=True)),
        "max_pool2d": (lambda: fnx.max_pool2d(x4, 2, (), 0, 1, True), lambda: F.max_pool2d(x4, 2, ceil_mode=True)),
        "max_pool3d": (lambda: fnx.max_pool3d(x5, 2, 1), lambda: F.max_pool3d(x5, 2, 1)),
        "avg_pool1d": (lambda: fnx.avg_pool1d(x3, 3, (), 1, False, False),
                       lambda: F.avg_pool1d(x3, 3, None, 1, count_include_pad=False)),
        "adaptive_max_pool1d": (lambda: fnx.adaptive_max_pool1d(x3, 3),
                                lambda: F.adaptive_max_pool1d(x3, 3, return_indices=True)),
        "Tensor.prelu": (lambda: x3.prelu(b4), lambda: F.prelu(x3, b4)),
        "Tensor.hardshrink": (lambda: x3.hardshrink(0.3), lambda: F.hardshrink(x3, 0.3)),
    }, leaves


def _outputs_and_grads(fn, leaves: list) -> list:
    """The call's outputs, then the gradients of a sum of sines of its float outputs with respect to `leaves`."""
    out = fn()
    outs = out if isinstance(out, tuple) else (out,)
    loss = sum(((o * 1.3).sin().sum() for o in outs if o.dtype.is_floating_point), fnx.tensor(0.0, dtype=fnx.float64))
    grads = fnx.autograd.grad(loss, leaves, allow_unused=True)
    return [o.detach().numpy() for o in outs] + [np.zeros(()) if g is None else g.numpy() for g in grads]


@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1), n=st.integers(1, 3))
def test_values_and_gradients_equal_the_functional_forms(seed, n):
    pairs, leaves = _pairs(np.random.default_rng(seed), n)
    for name, (ours, theirs) in pairs.items():
        got, expected = _outputs_and_grads(ours, leaves), _outputs_and_grads(theirs, leaves)
        for g, e in zip(got, expected, strict=True):
            np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12, err_msg=name)


def test_losses_default_to_no_reduction_as_torchs_binding_does():
    # torch 2.13: torch.kl_div(x, t).shape == x.shape (the schema's at::Reduction::Mean default parses as 0)
    a, t = fnx.randn(2, 3), fnx.rand(2, 3)
    assert fnx.kl_div(a, t).shape == (2, 3)
    assert fnx.hinge_embedding_loss(a, t.sign()).shape == (2, 3)
    assert fnx.binary_cross_entropy_with_logits(a, t).shape == (2, 3)
    with pytest.raises(ValueError, match="kl_div: reduction must be 0"):
        fnx.kl_div(a, t, "mean")


@pytest.mark.parametrize("name", ["dropout", "alpha_dropout", "feature_dropout", "feature_alpha_dropout"])
def test_dropout_family(name):
    x = fnx.randn(4, 3, 5)
    drop, drop_ = getattr(fnx, name), getattr(fnx, name + "_")
    assert drop(x, 0.7, False) is x
    y = x.clone()
    assert drop_(y, 0.5, True) is y and not np.array_equal(y.numpy(), x.numpy())
    if name.startswith("feature"):   # one draw per (dim 0, dim 1) pair, shared along the last dim
        kept = drop(fnx.ones(4, 3, 5), 0.5, True).numpy()
        assert (kept == kept[..., :1]).all()
        with pytest.raises(RuntimeError, match="Feature dropout requires at least 2 dimensions"):
            drop(fnx.ones(3), 0.5, True)
    with pytest.raises(RuntimeError, match="dropout probability has to be between 0 and 1, but got 1.5"):
        drop(x, 1.5, True)


def test_plain_dropout_keeps_with_probability_1_minus_p_and_rescales():
    y = fnx.dropout(fnx.ones(20000), 0.25, True).numpy()
    assert set(np.unique(y)) <= {np.float32(0.0), np.float32(4.0 / 3.0)}
    assert abs((y == 0).mean() - 0.25) < 0.02


def test_in_place_activations_write_their_input():
    x = fnx.tensor([-2.0, -0.5, 0.5, 2.0])
    for name, args, expected in [("selu_", (), F.selu(x)), ("celu_", (0.5,), F.celu(x, 0.5)),
                                 ("threshold_", (0.6, 9.0), F.threshold(x, 0.6, 9.0)), ("relu_", (), F.relu(x)),
                                 ("rrelu_", (0.1, 0.3), F.rrelu(x, 0.1, 0.3))]:
        y = x.clone()
        assert getattr(fnx, name)(y, *args) is y
        np.testing.assert_array_equal(y.numpy(), expected.numpy(), err_msg=name)


def test_rrelu_draws_its_training_slopes_from_the_given_generator():
    x = -fnx.ones(1000)
    first = fnx.rrelu(x, 0.1, 0.3, True, fnx.Generator().manual_seed(3))
    again = fnx.rrelu(x, 0.1, 0.3, True, fnx.Generator().manual_seed(3))
    np.testing.assert_array_equal(first.numpy(), again.numpy())
    assert (-first.numpy() >= 0.1).all() and (-first.numpy() <= 0.3).all()


def test_embedding_bag_returns_torchs_four_tensors():
    weight = (fnx.arange(30, dtype=fnx.float64).reshape(10, 3) * 0.77).sin().requires_grad_()
    indices, offsets = fnx.tensor([1, 2, 4, 5, 4, 3, 2, 9]), fnx.tensor([0, 4, 4])
    # torch 2.13 on the same arguments (the middle bag is empty; padding_idx 4 does not count)
    out, offset2bag, bag_size, max_indices = fnx.embedding_bag(weight, indices, offsets, False, 2, False, None,
                                                               False, 4)
    assert offset2bag.tolist() == [0, 0, 0, 0, 2, 2, 2, 2] and bag_size.tolist() == [3, 0, 3]
    assert max_indices.tolist() == [[1, 1, 5], [0, 0, 0], [9, 3, 3]]
    np.testing.assert_array_equal(out.detach().numpy(), F.embedding_bag(indices, weight, offsets, mode="max",
                                                                        padding_idx=4).detach().numpy())
    _, offset2bag, bag_size, max_indices = fnx.embedding_bag(weight, indices, offsets, mode=1)
    assert bag_size.tolist() == [4, 0, 4] and max_indices.tolist() == [4, 0, 4]
    out, _, bag_size, _ = fnx.embedding_bag(weight, indices, offsets)
    assert bag_size.tolist() == [0, 0, 0]
    np.testing.assert_array_equal(out.detach().numpy(), F.embedding_bag(indices, weight, offsets, mode="sum")
                                  .detach().numpy())
    with pytest.raises(RuntimeError, match="expected 1-D indices and offsets"):
        fnx.embedding_bag(weight, indices.reshape(2, 4), offsets)


def test_torch_level_names_autocast_as_pytorch_lists_them():
    from fnx.ops.autocast_lists import POLICIES
    for device_type, policies in POLICIES.items():
        for name in set(policies) & set(torch_level.__all__):
            assert getattr(fnx, name).autocast_policies[device_type] == policies[name], (device_type, name)
    x, t = fnx.randn(3, 4, dtype=fnx.bfloat16), fnx.rand(3, 4, dtype=fnx.bfloat16)
    with fnx.autocast("cpu"):
        assert fnx.kl_div(x, t, 1).dtype == fnx.float32   # CPU's fp32 list
        assert fnx.max_pool3d(fnx.randn(1, 1, 4, 4, 4), 2).dtype == fnx.float32
        assert fnx.conv1d(fnx.randn(1, 2, 5), fnx.randn(3, 2, 2)).dtype == fnx.bfloat16
