"""torch.nn.attention.flex_attention: values against scaled_dot_product_attention with the equivalent explicit
mask (a float64 numpy reference), gradients against finite differences (to tensors a score_mod captures; the op
table, tests/op_db_attention.py, checks q, k, v, jvp, vmap and compile), grad and compile against eager, and
BlockMask's layout against PyTorch 2.13's (recorded)."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fnx
import fnx.nn.functional as F
from fnx.autograd import gradcheck
from fnx.nn.attention.flex_attention import (AuxOutput, AuxRequest, BlockMask, and_masks, create_block_mask,
                                             create_mask, flex_attention, noop_mask, or_masks)
from test_nn_attention import T, npy, ref_sdpa

RNG = np.random.default_rng(5)


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def window(b, h, q_idx, kv_idx):
    return (q_idx - kv_idx).abs() <= 2


def _grid(L, S):
    return np.arange(L)[:, None], np.arange(S)[None, :]


MASKS = {   # name -> (mask_mod, the same mask in numpy over (H, L, S))
    "causal": (causal, lambda H, L, S: np.broadcast_to(np.greater_equal(*_grid(L, S)), (H, L, S))),
    "window_and_causal": (and_masks(causal, window),
                          lambda H, L, S: np.broadcast_to(np.greater_equal(*_grid(L, S))
                                                          & (abs(np.subtract(*_grid(L, S))) <= 2), (H, L, S))),
    "head_or_window": (or_masks(lambda b, h, q, k: h == 1, window),
                       lambda H, L, S: (np.arange(H)[:, None, None] == 1) | (abs(np.subtract(*_grid(L, S))) <= 2)),
}


@settings(max_examples=8, deadline=None)
@given(L=st.integers(1, 9), S=st.integers(1, 9), block=st.sampled_from([1, 2, 3, 128, (2, 4)]),
       mask=st.sampled_from(sorted(MASKS)), heads=st.sampled_from([(2, 2), (4, 2)]))
def test_masks_and_alibi_match_sdpa_with_the_explicit_mask(L, S, block, mask, heads):
    """A block mask plus an ALiBi score_mod (slopes[h] * (kv_idx - q_idx)) is SDPA with the additive bias and
    the boolean mask; GQA shares key/value heads; a query that sees no key gets zeros and lse -inf."""
    hq, hkv = heads
    q, k, v = RNG.standard_normal((2, hq, L, 3)), RNG.standard_normal((2, hkv, S, 3)), \
        RNG.standard_normal((2, hkv, S, 4))
    slopes = RNG.standard_normal(hq)
    mask_mod, ref_mask = MASKS[mask]
    block_mask = create_block_mask(mask_mod, None, hq, L, S, device="cpu", BLOCK_SIZE=block)
    out, aux = flex_attention(T(q), T(k), T(v), lambda s, b, h, qi, ki: s + T(slopes)[h] * (ki - qi), block_mask,
                              enable_gqa=hq != hkv, return_aux=AuxRequest(lse=True, max_scores=True))
    allowed = ref_mask(hq, L, S)
    bias = -slopes[:, None, None] * np.subtract(*_grid(L, S))   # slopes[h] * (j - i)
    g = hq // hkv
    kr, vr = np.repeat(k, g, 1), np.repeat(v, g, 1)
    with np.errstate(invalid="ignore"):   # the reference's NaN rows are the ones that see no key
        want = np.where(allowed.any(-1, keepdims=True), ref_sdpa(q, kr, vr, allowed, bias), 0.0)
    np.testing.assert_allclose(npy(out), want, atol=1e-12)
    scores = np.where(allowed, q @ kr.swapaxes(-1, -2) / math.sqrt(3) + bias, -np.inf)
    with np.errstate(divide="ignore"):
        np.testing.assert_allclose(npy(aux.lse), np.log(np.exp(scores).sum(-1)), atol=1e-12)
    np.testing.assert_allclose(npy(aux.max_scores), scores.max(-1), atol=1e-12)


def test_score_mods_relative_bias_document_mask_and_soft_capping():
    B, H, L, E = 2, 2, 6, 4
    q, k, v = (RNG.standard_normal((B, H, L, E)) for _ in range(3))
    table, doc = RNG.standard_normal(2 * L), np.array([0, 0, 1, 1, 1, 2])
    rel = flex_attention(T(q), T(k), T(v), lambda s, b, h, qi, ki: s + T(table)[qi - ki + L])
    i, j = _grid(L, L)
    np.testing.assert_allclose(npy(rel), ref_sdpa(q, k, v, bias=table[i - j + L]), atol=1e-12)
    docs = T(doc)
    block_mask = create_block_mask(lambda b, h, qi, ki: docs[qi] == docs[ki], B, None, L, L, device="cpu",
                                   BLOCK_SIZE=2)
    out = flex_attention(T(q), T(k), T(v), block_mask=block_mask)
    np.testing.assert_allclose(npy(out), ref_sdpa(q, k, v, allowed=doc[i] == doc[j]), atol=1e-12)
    capped = flex_attention(T(q), T(k), T(v), lambda s, b, h, qi, ki: fnx.tanh(s / 0.5) * 0.5, scale=0.3)
    s = np.tanh(q @ k.swapaxes(-1, -2) * 0.3 / 0.5) * 0.5
    np.testing.assert_allclose(npy(capped), np.exp(s) / np.exp(s).sum(-1, keepdims=True) @ v, atol=1e-12)


def test_query_row_blocks_give_the_same_attention(monkeypatch):
    """Queries are taken in blocks of rows (about _SCORES_PER_BLOCK scores each): blocks of 2 rows, and 1, give
    what one block gives, block-mask rows and score_mod indices included."""
    import fnx.nn.attention.flex_attention as flex_module

    q, k = T(RNG.standard_normal((1, 2, 5, 3))), T(RNG.standard_normal((1, 2, 7, 3)))
    block_mask = create_block_mask(and_masks(causal, window), 1, 2, 5, 7, device="cpu", BLOCK_SIZE=(2, 3))

    def attend():
        return flex_attention(q, k, k, lambda s, b, h, qi, ki: s * (qi + 1), block_mask,
                              return_aux=AuxRequest(lse=True, max_scores=True))

    whole = attend()
    for rows in (2, 1):
        monkeypatch.setattr(flex_module, "_SCORES_PER_BLOCK", rows * 2 * 7)
        for got, want in zip((attend()[0], *attend()[1]), (whole[0], *whole[1])):
            np.testing.assert_allclose(npy(got), npy(want), rtol=1e-14, atol=1e-14)


def test_fully_masked_rows_give_zeros_lse_minus_inf_and_finite_gradients():
    q = T(RNG.standard_normal((1, 2, 4, 3)), requires_grad=True)
    k = T(RNG.standard_normal((1, 2, 5, 3)), requires_grad=True)
    block_mask = create_block_mask(lambda b, h, qi, ki: qi >= 2, 1, 1, 4, 5, device="cpu", BLOCK_SIZE=2)
    with pytest.warns(FutureWarning, match="return_lse is deprecated"):
        out, lse = flex_attention(q, k, k, block_mask=block_mask, return_lse=True)
    np.testing.assert_array_equal(npy(out)[:, :, :2], 0.0)
    assert np.isneginf(npy(lse)[:, :, :2]).all() and np.isfinite(npy(lse)[:, :, 2:]).all()
    out.sum().backward()
    assert np.isfinite(npy(q.grad)).all() and np.isfinite(npy(k.grad)).all()


def test_gradients_reach_the_query_and_captured_tensors():
    """(The op table checks the gradients to q, k and v.)"""
    q = T(RNG.standard_normal((1, 2, 3, 2)), requires_grad=True)
    k, v = T(RNG.standard_normal((1, 2, 4, 2))), T(RNG.standard_normal((1, 2, 4, 2)))
    slopes, table = T(RNG.standard_normal(2), True), T(RNG.standard_normal(7), True)
    block_mask = create_block_mask(lambda b, h, qi, ki: qi + 1 >= ki, 1, 1, 3, 4, device="cpu", BLOCK_SIZE=2)

    def attend(q, slopes, table):
        return flex_attention(q, k, v, lambda s, b, h, qi, ki: s + slopes[h] * (ki - qi) + table[qi - ki + 3],
                              block_mask)

    assert gradcheck(attend, (q, slopes, table))


def test_grad_and_compile_match_eager():
    q, k, v = (T(RNG.standard_normal((2, 2, n, 3))) for n in (5, 6, 6))
    slopes = T(RNG.standard_normal(2))
    block_mask = create_block_mask(and_masks(causal, window), 2, 2, 5, 6, device="cpu", BLOCK_SIZE=2)

    def loss(q, slopes):
        out = flex_attention(q, k, v, lambda s, b, h, qi, ki: s + slopes[h] * (ki - qi), block_mask)
        return (out * out).sum()

    qg, sg = q.clone().requires_grad_(True), slopes.clone().requires_grad_(True)
    loss(qg, sg).backward()
    # the op table compiles flex_attention with the C backend; here the staged gradient, captured slopes included
    for fn in (fnx.grad(loss, argnums=(0, 1)), fnx.compile(fnx.grad(loss, argnums=(0, 1)), backend="interpret")):
        dq, ds = fn(q, slopes)
        np.testing.assert_allclose(npy(dq), npy(qg.grad), atol=1e-12)
        np.testing.assert_allclose(npy(ds), npy(sg.grad), atol=1e-12)


def test_block_masks_are_pytrees_that_compiled_functions_take_and_return():
    """torch.compile(create_block_mask) and compiled functions taking a BlockMask are common in PyTorch code."""
    made = fnx.compile(create_block_mask, backend="interpret")(causal, None, None, 6, 6, "cpu", 4)
    eager = create_block_mask(causal, None, None, 6, 6, "cpu", 4)
    assert isinstance(made, BlockMask) and made.mask_mod is causal and made.BLOCK_SIZE == (4, 4)
    assert made.kv_indices.tolist() == eager.kv_indices.tolist()
    assert made.full_q_num_blocks.tolist() == eager.full_q_num_blocks.tolist()
    q = fnx.randn(1, 2, 6, 3)
    attend = fnx.compile(lambda q, bm: flex_attention(q, q, q, block_mask=bm), backend="interpret")
    np.testing.assert_allclose(npy(attend(q, eager)), npy(flex_attention(q, q, q, block_mask=eager)), atol=1e-6)
    assert eager.to("cpu").kv_num_blocks.tolist() == eager.kv_num_blocks.tolist()


def test_low_precision_inputs_compute_scores_in_float32():
    q, k = (fnx.randn(1, 1, 4, 8).to(fnx.bfloat16) for _ in range(2))
    out, (lse, _) = flex_attention(q, k, k, return_aux=AuxRequest(lse=True))
    assert out.dtype is fnx.bfloat16 and lse.dtype is fnx.float32
    want = F.scaled_dot_product_attention(q.float(), k.float(), k.float())
    np.testing.assert_allclose(npy(out.float()), npy(want), atol=2e-2)


def test_a_key_value_batch_of_one_is_shared_by_the_block_masks_batches():
    q, kv = RNG.standard_normal((3, 2, 4, 2)), RNG.standard_normal((1, 2, 4, 2))
    block_mask = create_block_mask(causal, 3, None, 4, 4, device="cpu", BLOCK_SIZE=2)
    out = flex_attention(T(q), T(kv), T(kv), block_mask=block_mask)
    np.testing.assert_allclose(npy(out), ref_sdpa(q, np.broadcast_to(kv, q.shape), np.broadcast_to(kv, q.shape),
                                                  np.tril(np.ones((4, 4), bool))), atol=1e-12)


def test_the_block_layout_matches_pytorch():
    """Recorded from PyTorch 2.13: create_block_mask(causal, None, None, 5, 7, BLOCK_SIZE=(2, 3))."""
    bm = create_block_mask(causal, None, None, 5, 7, device="cpu", BLOCK_SIZE=(2, 3))
    recorded = {"kv_num_blocks": [[[1, 1, 2]]], "kv_indices": [[[[0, 1, 2], [1, 0, 2], [0, 1, 2]]]],
                "full_kv_num_blocks": [[[0, 1, 0]]], "full_kv_indices": [[[[0, 1, 2], [0, 1, 2], [0, 1, 2]]]],
                "q_num_blocks": [[[2, 2, 0]]], "q_indices": [[[[0, 2, 1], [1, 2, 0], [0, 1, 2]]]],
                "full_q_num_blocks": [[[1, 0, 0]]], "full_q_indices": [[[[1, 0, 2], [0, 1, 2], [0, 1, 2]]]]}
    for name, value in recorded.items():
        assert getattr(bm, name).tolist() == value and getattr(bm, name).dtype is fnx.int32, name
    assert (bm.shape, bm.BLOCK_SIZE, bm.seq_lengths, bm.numel()) == ((1, 1, 5, 7), (2, 3), (5, 7), 35)
    assert bm.sparsity() == pytest.approx(14.285714285714)
    assert bm.to_dense().tolist() == [[[[1, 0, 0], [1, 1, 0], [1, 1, 0]]]]
    assert str(bm) == "BlockMask(shape=(1, 1, 5, 7), sparsity=14.29%, \n(0, 0)\n██    \n████  \n████\n)"
    assert "    BLOCK_SIZE=(2, 3),\n    shape=(1, 1, 5, 7),\n    sparsity=14.29%,\n    mask_mod=causal\n)" in repr(bm)
    assert len(bm.as_tuple()) == 17 and bm.as_tuple()[:2] == (5, 7) and bm.as_tuple()[-1] is causal
    assert len(bm.as_tuple(flatten=False)) == 15


def test_indexing_cropping_and_drawing_match_pytorch():
    bm = create_block_mask(lambda b, h, q, k: (q >= k) & (q - k < 3) & (h > 0), 2, 3, 16, 16, device="cpu",
                           BLOCK_SIZE=4, separate_full_blocks=False)
    assert bm.full_kv_num_blocks is None and bm.sparsity() == pytest.approx(70.833333333)
    assert bm.to_string(limit=3).split("\n")[6:11] == ["(0, 1)", "██      ", "████    ", "  ████  ", "    ████"]
    assert bm.to_string(limit=3).endswith("You can also index (BlockMask[batch, head]) to choose a specific batch "
                                          "or head")
    first = bm[1]
    assert first.shape == (1, 3, 16, 16) and first.kv_num_blocks.tolist() == [[[0, 0, 0, 0], [1, 2, 2, 2],
                                                                                [1, 2, 2, 2]]]
    assert bm[1, -1].kv_indices.tolist() == [[[[0, 1, 2, 3], [0, 1, 2, 3], [1, 2, 0, 3], [2, 3, 0, 1]]]]
    assert bm[:, 1:].shape == (2, 2, 16, 16)
    with pytest.raises(RuntimeError, match="sliced BlockMask"):
        flex_attention(*(fnx.randn(1, 1, 16, 2) for _ in range(3)), block_mask=bm[0, 0])
    cropped = bm._adjust(9, 10)
    assert cropped.shape == (2, 3, 9, 10)
    assert cropped.kv_num_blocks.tolist()[0] == [[0, 0, 0], [1, 2, 2], [1, 2, 2]]


def test_blocks_left_out_of_a_block_mask_are_skipped():
    """A BlockMask made from its block lists masks what they leave out, as PyTorch's compiled kernels do
    (recorded from torch.compile(flex_attention) on PyTorch 2.13: the second row block sees nothing)."""
    bm = BlockMask.from_kv_blocks(fnx.tensor([[[1, 0]]], dtype=fnx.int32),
                                  fnx.tensor([[[[0, 1], [0, 1]]]], dtype=fnx.int32), BLOCK_SIZE=2)
    assert bm.shape == (1, 1, 4, 4) and bm.sparsity() == 75.0 and bm.mask_mod is noop_mask
    assert bm.q_num_blocks.tolist() == [[[1, 0]]] and bm.q_indices.tolist() == [[[[0, 1], [0, 1]]]]
    q, k, v = (RNG.standard_normal((1, 1, 4, 4)) for _ in range(3))
    allowed = np.zeros((4, 4), bool)
    allowed[:2, :2] = True
    with np.errstate(invalid="ignore"):
        want = np.where(allowed.any(-1, keepdims=True), ref_sdpa(q, k, v, allowed), 0.0)
    np.testing.assert_allclose(npy(flex_attention(T(q), T(k), T(v), block_mask=bm)), want, atol=1e-12)


def test_create_mask_of_mask_and_score_mods():
    assert create_mask(noop_mask, 1, 1, 2, 2, device="cpu").tolist() == [[[[True, True], [True, True]]]]
    got = create_mask(lambda s, b, h, q, k: fnx.where(q >= k, s, -math.inf), None, None, 3, 3, device="cpu")
    np.testing.assert_array_equal(npy(got), np.tril(np.ones((1, 1, 3, 3), bool)))
    got = create_mask(lambda b, h, q, k: (q >= k) & (h > 0), 1, 2, 3, 4, device="cpu")
    assert got.shape == (1, 2, 3, 4) and not npy(got)[0, 0].any()


def test_bad_arguments_raise_pytorchs_errors():
    q = fnx.randn(1, 2, 4, 3)
    with pytest.raises(NotImplementedError, match="4D"):
        flex_attention(q[0], q[0], q[0])
    with pytest.raises(ValueError, match="enable_gqa=True"):
        flex_attention(q, q[:, :1], q[:, :1])
    with pytest.raises(ValueError, match="same embedding dimension"):
        flex_attention(q, fnx.randn(1, 2, 4, 2), fnx.randn(1, 2, 4, 2))
    with pytest.raises(ValueError, match="created for a smaller length"):
        flex_attention(q, q, q, block_mask=create_block_mask(causal, 1, 1, 2, 4, device="cpu"))
    with pytest.raises(ValueError, match="_adjust"):
        flex_attention(q, q, q, block_mask=create_block_mask(causal, 1, 1, 8, 4, device="cpu"))
    with pytest.raises(ValueError, match="both return_lse and return_aux"):
        flex_attention(q, q, q, return_lse=True, return_aux=AuxRequest(lse=True))
    with pytest.raises(AssertionError, match="requires a mask_mod"):
        create_block_mask(lambda s, b, h, q, k: s, 1, 1, 4, 4, device="cpu")
    with pytest.raises(RuntimeError, match="callable"):
        and_masks(causal, 3)
    with pytest.raises(NotImplementedError, match="compute_dq_write_order"):
        create_block_mask(causal, 1, 1, 4, 4, device="cpu", compute_dq_write_order=True)
    out, aux = flex_attention(q, q, q, return_aux=AuxRequest())
    assert isinstance(aux, AuxOutput) and aux == (None, None) and out.shape == (1, 2, 4, 3)
