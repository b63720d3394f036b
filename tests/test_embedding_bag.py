"""F.embedding_bag / nn.EmbeddingBag (PyTorch's): each mode against a numpy loop over the bags (2-D inputs, 1-D with
offsets, include_last_offset, empty bags, padding_idx, per_sample_weights), float64 gradients against finite
differences, the layer, and the errors."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fnx
import fnx.nn.functional as F
from fnx import nn


def _reference(idx, weight, starts, ends, mode, padding_idx, psw):
    out = np.zeros((len(starts), weight.shape[1]))
    for b, (s, e) in enumerate(zip(starts, ends)):
        take = [i for i in range(s, e) if idx[i] != padding_idx]
        if not take:
            continue
        rows = weight[idx[take]] * (psw[take, None] if psw is not None else 1)
        out[b] = rows.sum(0) if mode == "sum" else rows.mean(0) if mode == "mean" else rows.max(0)
    return out


@st.composite
def _cases(draw):
    mode = draw(st.sampled_from(["sum", "mean", "max"]))
    two_d = draw(st.booleans())
    n = draw(st.integers(1, 12))
    idx = np.array(draw(st.lists(st.integers(0, 6), min_size=n, max_size=n)))
    if two_d:
        width = draw(st.sampled_from([1, 2, 3, 4, 6, 12]).filter(lambda w: n % w == 0))
        idx, offsets, last = idx.reshape(-1, width), None, False
    else:
        cuts = sorted(draw(st.lists(st.integers(0, n), min_size=0, max_size=4)))   # repeats: empty bags
        offsets, last = np.array([0] + cuts), draw(st.booleans())
    return dict(mode=mode, idx=idx, offsets=offsets, last=last, padding_idx=draw(st.sampled_from([None, 2])),
                weights=mode == "sum" and draw(st.booleans()))


@given(case=_cases())
@settings(max_examples=60, deadline=None)
def test_embedding_bag_matches_a_loop_over_the_bags(case):
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((7, 3))
    idx, offsets = case["idx"], case["offsets"]
    psw = rng.standard_normal(idx.shape) if case["weights"] else None
    got = F.embedding_bag(fnx.tensor(idx), fnx.tensor(weight), None if offsets is None else fnx.tensor(offsets),
                          mode=case["mode"], per_sample_weights=None if psw is None else fnx.tensor(psw),
                          include_last_offset=case["last"], padding_idx=case["padding_idx"])
    flat = idx.reshape(-1)
    if offsets is None:
        starts = np.arange(0, flat.size, idx.shape[1])
        ends = starts + idx.shape[1]
    else:
        starts, ends = offsets, np.append(offsets[1:], flat.size)
        if case["last"]:
            starts, ends = offsets[:-1], offsets[1:]
    want = _reference(flat, weight, starts, ends, case["mode"], case["padding_idx"],
                      None if psw is None else psw.reshape(-1))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
    if offsets is not None and case["mode"] != "max":   # offsets traced by compile: each entry's bag searched for
        traced = fnx.compile(lambda i, w, o, *p: F.embedding_bag(
            i, w, o, mode=case["mode"], per_sample_weights=p[0] if p else None, include_last_offset=case["last"],
            padding_idx=case["padding_idx"]), backend="interpret", fullgraph=True)
        got = traced(fnx.tensor(idx), fnx.tensor(weight), fnx.tensor(offsets), *([] if psw is None else
                                                                               [fnx.tensor(psw)]))
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)


def test_embedding_bag_compiles_with_its_offsets_as_inputs():
    """The EmbeddingBag tutorial's model under fnx.compile: offsets are traced, the step's loss and gradients are
    eager's; mode 'max' needs the offsets' values, so its signature runs eagerly after one warning."""
    fnx.manual_seed(0)
    bag = nn.EmbeddingBag(20, 4, mode="mean")
    text, offsets = fnx.tensor([1, 2, 4, 5, 4, 3, 2, 9, 7]), fnx.tensor([0, 4, 4, 6])
    bag(text, offsets).square().sum().backward()
    want = bag.weight.grad.numpy().copy()
    bag.zero_grad()
    compiled = fnx.compile(bag, fullgraph=True)
    loss = compiled(text, offsets).square().sum()
    loss.backward()
    np.testing.assert_allclose(bag.weight.grad.numpy(), want, rtol=1e-6, atol=1e-7)
    bag.mode = "max"
    compiled = fnx.compile(bag)
    with pytest.warns(UserWarning, match="tracing stopped at .*functional.py:[0-9]+ \\(embedding_bag\\): numpy\\(\\)"):
        got = compiled(text, offsets)
    np.testing.assert_array_equal(got.detach().numpy(), bag(text, offsets).detach().numpy())


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_gradients_match_finite_differences(mode):
    rng = np.random.default_rng(1)
    weight = fnx.tensor(rng.standard_normal((6, 3)), requires_grad=True)
    psw = fnx.tensor(rng.standard_normal(7), requires_grad=True) if mode == "sum" else None
    idx, offsets = fnx.tensor([0, 3, 5, 1, 1, 4, 2]), fnx.tensor([0, 3, 3, 5])
    args = (weight,) if psw is None else (weight, psw)
    assert fnx.autograd.gradcheck(lambda w, *p: F.embedding_bag(idx, w, offsets, mode=mode, padding_idx=4,
                                                                per_sample_weights=p[0] if p else None), args)


def test_the_layer_and_from_pretrained():
    bag = nn.EmbeddingBag(10, 4, mode="sum", padding_idx=0)
    assert tuple(bag.weight.shape) == (10, 4) and not bag.weight[0].detach().numpy().any()
    assert repr(bag) == "EmbeddingBag(10, 4, padding_idx=0, mode='sum')"
    text, offsets = fnx.tensor([1, 2, 4, 5, 4, 3, 2, 9]), fnx.tensor([0, 4])
    np.testing.assert_allclose(bag(text, offsets).detach().numpy(), F.embedding_bag(
        text, bag.weight.detach(), offsets, mode="sum").numpy(), rtol=1e-6)
    frozen = nn.EmbeddingBag.from_pretrained(fnx.ones(5, 2))
    assert not frozen.weight.requires_grad and frozen.mode == "mean"
    np.testing.assert_array_equal(frozen(fnx.tensor([[0, 1], [2, 3]])).numpy(), np.ones((2, 2)))


def test_embedding_bag_errors():
    w = fnx.randn(5, 2)
    with pytest.raises(ValueError, match="mode has to be one of sum, mean or max"):
        F.embedding_bag(fnx.tensor([[0, 1]]), w, mode="min")
    with pytest.raises(NotImplementedError, match="per_sample_weights is only supported for mode='sum'"):
        F.embedding_bag(fnx.tensor([[0, 1]]), w, per_sample_weights=fnx.ones(1, 2))
    with pytest.raises(ValueError, match="if input is 2D, then offsets has to be None"):
        F.embedding_bag(fnx.tensor([[0, 1]]), w, fnx.tensor([0]))
    with pytest.raises(ValueError, match="offsets has to be a 1D Tensor but got None"):
        F.embedding_bag(fnx.tensor([0, 1]), w)
    with pytest.raises(ValueError, match="offsets\\[0\\] has to be 0"):
        F.embedding_bag(fnx.tensor([0, 1]), w, fnx.tensor([1]))
    with pytest.raises(ValueError, match="must have the same shape as the input"):
        F.embedding_bag(fnx.tensor([[0, 1]]), w, mode="sum", per_sample_weights=fnx.ones(2))
