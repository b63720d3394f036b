"""The C loops of eager scaled_dot_product_attention (fnx/lowering/attention_kernels.py): values and gradients
against a float64 numpy reference and against the composition that the transforms trace, causal and not,
grouped-query heads read in place, odd sizes (one query, sequences not a multiple of the block, head dims 1 to
128), strided and broadcast operands, a float64 gradcheck, and the fallbacks (other dtypes, head dims above
MAX_HEAD_DIM, small problems)."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fnx
import fnx.nn.functional as F
from fnx.autograd import gradcheck
from fnx.lowering import attention_kernels
from fnx.ops import joins
from fnx.nn.functional_attention import reference


@pytest.fixture(autouse=True)
def _every_size_takes_the_c_loops(monkeypatch):
    monkeypatch.setattr(attention_kernels, "MIN_WORK", 0)


def _reference(q, k, v, groups, scale, causal, g):
    """out and (dq, dk, dv) for cotangent g, in float64 numpy."""
    q, k, v, g = (a.astype(np.float64) for a in (q, k, v, g))
    kr, vr = np.repeat(k, groups, axis=-3), np.repeat(v, groups, axis=-3)
    s = q @ np.swapaxes(kr, -1, -2) * scale
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], dtype=bool)), s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    dw = g @ np.swapaxes(vr, -1, -2)
    ds = w * (dw - (dw * w).sum(-1, keepdims=True)) * scale
    heads = k.shape[:-3] + (k.shape[-3], groups)

    def summed(x):
        return x.reshape(heads + x.shape[-2:]).sum(-3)

    return w @ vr, (ds @ kr, summed(np.swapaxes(ds, -1, -2) @ q), summed(np.swapaxes(w, -1, -2) @ g))


@st.composite
def _problems(draw):
    kv_heads, groups = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    batch = draw(st.integers(1, 2))
    length = draw(st.sampled_from([1, 2, 63, 64, 65, 130]))
    keys = draw(st.sampled_from([length, 1, 5, 64, 100]))
    e, d = draw(st.sampled_from([1, 3, 32, 128])), draw(st.sampled_from([1, 7, 32, 128]))
    return (batch, kv_heads * groups, length, e), (batch, kv_heads, keys, e), (batch, kv_heads, keys, d), groups


@settings(max_examples=30, deadline=None)
@given(_problems(), st.booleans(), st.sampled_from([np.float32, np.float64]), st.sampled_from([None, -0.6]),
       st.integers(0, 2 ** 32 - 1))
def test_values_and_gradients_match_the_reference(shapes, causal, dtype, scale, seed):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal(s).astype(dtype) for s in shapes[:3])
    groups = shapes[3]
    args = [fnx.tensor(a, requires_grad=True) for a in (q, k, v)]
    out = F.scaled_dot_product_attention(*args, is_causal=causal, scale=scale, enable_gqa=groups > 1)
    g = rng.standard_normal(out.shape).astype(dtype)
    out.backward(fnx.tensor(g))
    want, want_grads = _reference(q, k, v, groups, 1 / math.sqrt(q.shape[-1]) if scale is None else scale, causal, g)
    tol = dict(rtol=1e-4, atol=2e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-12)
    assert out.dtype == fnx.tensor(q).dtype and tuple(out.shape) == want.shape
    np.testing.assert_allclose(out.detach().numpy(), want, **tol)
    for arg, grad in zip(args, want_grads):
        assert arg.grad.dtype == arg.dtype
        np.testing.assert_allclose(arg.grad.numpy(), grad, **tol)


@pytest.mark.parametrize("causal, gqa", [(False, False), (True, True)])
def test_eager_node_matches_the_traced_composition(causal, gqa):
    """Eager SDPA is one `attention` node running the C loops; fnx.vjp of the reference composition gives the
    same values and float32 gradients within rounding."""
    rng = np.random.default_rng(1)
    q = rng.standard_normal((2, 4, 70, 16)).astype(np.float32)
    k, v = (rng.standard_normal((2, 4 // (1 + gqa), 70, 16)).astype(np.float32) for _ in range(2))
    g = fnx.tensor(rng.standard_normal((2, 4, 70, 16)).astype(np.float32))

    def attend(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)

    def composed(q, k, v):
        return reference(q, k, v, scale=1 / math.sqrt(16), is_causal=causal, groups=1 + gqa)[0]

    out, pullback = fnx.vjp(composed, *(fnx.tensor(a) for a in (q, k, v)))
    args = [fnx.tensor(a, requires_grad=True) for a in (q, k, v)]
    eager = attend(*args)
    assert eager.grad_fn.parents[0].name == "attentionBackward"
    eager.backward(g)
    np.testing.assert_allclose(eager.detach().numpy(), out.numpy(), rtol=1e-5, atol=1e-6)
    for arg, want in zip(args, pullback(g)):
        np.testing.assert_allclose(arg.grad.numpy(), want.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("transposed_cotangent", [False, True])
def test_strided_operands_as_a_transformer_makes_them(transposed_cotangent, monkeypatch):
    """q, k, v as views of one projection, (B, T, H, E) transposed to (B, H, T, E); the output takes that layout
    (as PyTorch's does), and the gradients are views of one new array laid out as the projection, so that
    transposing back and joining the split's pieces copy nothing (no concatenate runs); the cotangent as the next
    projection's gradient arrives, in that layout too, or contiguous."""
    rng = np.random.default_rng(2)
    qkv = fnx.tensor(rng.standard_normal((3, 67, 3 * 4 * 8)).astype(np.float32), requires_grad=True)
    q, k, v = (t.reshape(3, 67, 4, 8).transpose(1, 2) for t in qkv.chunk(3, -1))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert out.transpose(1, 2).is_contiguous()
    grads = attention_kernels.backward(*(t.detach().numpy() for t in (q, k, v)), out.detach().numpy(),
                                       np.zeros(out.shape[:-1], np.float32), np.ones(out.shape, np.float32), 1, 0.5,
                                       True)
    whole = grads[0].base
    assert whole.size == qkv.numel() and all(gr.base is whole for gr in grads)
    rows = [np.swapaxes(gr, 1, 2).reshape(3, 67, 32) for gr in grads]
    assert all(np.shares_memory(r, whole) for r in rows)
    g = rng.standard_normal(out.shape).astype(np.float32)
    cotangent = fnx.tensor(np.swapaxes(g, 1, 2).copy()).transpose(1, 2) if transposed_cotangent else fnx.tensor(g)
    assert cotangent.is_contiguous() is not transposed_cotangent
    monkeypatch.setattr(joins.concatenate_p, "impl", None)   # the split's backward joins views
    out.backward(cotangent)
    arrays = [np.ascontiguousarray(t.detach().numpy()) for t in (q, k, v)]
    want, grads = _reference(*arrays, 1, 1 / math.sqrt(8), True, g)
    np.testing.assert_allclose(out.detach().numpy(), want, rtol=1e-4, atol=2e-5)
    want_grad = np.concatenate([gr.transpose(0, 2, 1, 3).reshape(3, 67, 32) for gr in grads], -1)
    np.testing.assert_allclose(qkv.grad.numpy(), want_grad, rtol=1e-4, atol=2e-5)


def test_row_major_queries_give_an_output_laid_out_by_rows_of_heads():
    """Row-major (B, H, T, E) operands (compiled code's queries, after its rotary kernel): the output is laid out
    (B, T, H, D) all the same, as PyTorch's CPU flash attention lays out its own, so the model's transpose back and
    reshape to (B, T, H * D) copy nothing; its values are the reference's."""
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((2, 4, 33, 8)).astype(np.float32) for _ in range(3))
    out, lse = attention_kernels.forward(q, k, v, 1, 0.25, True)
    assert np.swapaxes(out, 1, 2).flags.c_contiguous
    merged = np.swapaxes(out, 1, 2).reshape(2, 33, 32)
    assert np.shares_memory(merged, out)
    want, _ = _reference(q, k, v, 1, 0.25, True, np.ones_like(q))
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=2e-5)


def test_gradients_share_one_array_only_where_q_k_v_tile_one_without_overlap():
    """dq, dk and dv are views of one new array only where q, k and v are disjoint views tiling one array: not
    for separate arrays, nor for one array read as all three (self-attention on x) or views that overlap, whose
    gradients the kernel must not write over each other; then the split's pieces join only side by side and in
    order."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 70, 8)).astype(np.float32)
    out = np.zeros_like(x)
    rest = (out, np.zeros(x.shape[:-1], np.float32), np.ones(x.shape, np.float32), 1, 0.5, False)
    separate = attention_kernels.backward(x, x.copy(), x.copy(), *rest)
    same = attention_kernels.backward(x, x, x, *rest)
    b = rng.standard_normal(x.shape[:-1] + (24,)).astype(np.float32)   # sizes that add up, k over q and a gap
    overlapping = attention_kernels.backward(b[..., :8], b[..., 4:12], b[..., 16:], *rest)
    for grads in (separate, same, overlapping):
        assert len({id(gr.base if gr.base is not None else gr) for gr in grads}) == 3
    q, k, v = np.split(rng.standard_normal((2, 70, 48)).astype(np.float32), 3, axis=-1)
    pieces = [fnx.from_numpy(a) for a in (q, k, v)]
    joined = joins._joined_view(pieces, 2)
    assert joined is not None and np.shares_memory(joined.numpy(), q) and joined.shape == (2, 70, 48)
    assert joins._joined_view(pieces[::-1], 2) is None and joins._joined_view([pieces[0], pieces[2]], 2) is None
    assert joins._joined_view([fnx.from_numpy(q.copy()), pieces[1]], 2) is None


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("length, e, d", [(70, 12, 20), (64, 32, 32), (9, 8, 16)])
def test_float32_blocks_transposed_in_tiles_and_their_edges(length, e, d, causal):
    """The float32 loops transpose whole 8 x 8 tiles in registers where the CPU has AVX, the rest element by
    element: sizes that are whole tiles, and ones that leave rows and columns over (70 = 8 * 8 + 6, 12, 20), from
    strided views of one projection."""
    rng = np.random.default_rng(length + e + d)
    x = rng.standard_normal((2, length, 2 * e + d + 5)).astype(np.float32)
    q, k, v = (np.swapaxes(x[..., i:j].reshape(2, length, 1, j - i), 1, 2)
               for i, j in ((0, e), (e, 2 * e), (2 * e, 2 * e + d)))
    args = [fnx.tensor(a, requires_grad=True) for a in (q, k, v)]
    out = F.scaled_dot_product_attention(*args, is_causal=causal)
    g = rng.standard_normal(out.shape).astype(np.float32)
    out.backward(fnx.tensor(g))
    want, grads = _reference(q, k, v, 1, 1 / math.sqrt(e), causal, g)
    np.testing.assert_allclose(out.detach().numpy(), want, rtol=1e-4, atol=2e-5)
    for arg, grad in zip(args, grads):
        np.testing.assert_allclose(arg.grad.numpy(), grad, rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("dtype, tol", [(np.float32, 1e-4), (np.float64, 1e-10)])
@pytest.mark.parametrize("length, keys", [(16, 16), (17, 17), (40, 40), (100, 100), (40, 23), (23, 40)])
def test_causal_diagonal_blocks_by_chunks(length, keys, dtype, tol):
    """A causal block on the diagonal takes its products by chunks of 16 keys or queries, each from (or up to) its
    own first (last) column: lengths on a chunk's edge, inside a chunk, past a block, and fewer keys than queries
    and more, with grouped heads."""
    rng = np.random.default_rng(length * 1000 + keys)
    q = rng.standard_normal((2, 4, length, 24)).astype(dtype)
    k, v = (rng.standard_normal((2, 2, keys, n)).astype(dtype) for n in (24, 20))
    args = [fnx.tensor(a, requires_grad=True) for a in (q, k, v)]
    out = F.scaled_dot_product_attention(*args, is_causal=True, enable_gqa=True)
    g = rng.standard_normal(out.shape).astype(dtype)
    out.backward(fnx.tensor(g))
    want, grads = _reference(q, k, v, 2, 1 / math.sqrt(24), True, g)
    np.testing.assert_allclose(out.detach().numpy(), want, rtol=tol, atol=tol)
    for arg, grad in zip(args, grads):
        np.testing.assert_allclose(arg.grad.numpy(), grad, rtol=tol, atol=tol)


def test_float64_gradcheck():
    rng = np.random.default_rng(4)
    args = [fnx.tensor(rng.standard_normal(s), requires_grad=True) for s in ((1, 2, 5, 3), (1, 1, 4, 3), (1, 1, 4, 2))]
    assert gradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True), args)


def test_the_forward_keeps_no_score_matrix():
    """What the node keeps for backward (its pullback's closure): q, k, v, the output and one logsumexp per query,
    nothing of L x S."""
    q, k, v = (fnx.randn(1, 2, 96, 4, requires_grad=True) for _ in range(3))
    out = F.scaled_dot_product_attention(q, k, v)
    held = [cell.cell_contents for cell in out.grad_fn.parents[0].ctx.pull.__closure__]
    kept = {id(t): t for value in held if isinstance(value, (list, tuple)) for t in value if isinstance(t, fnx.Tensor)}
    saved = sorted(tuple(t.shape) for t in kept.values())
    assert saved == [(1, 2, 96)] + [(1, 2, 96, 4)] * 4


def test_other_dtypes_wide_heads_and_small_problems_run_the_composition(monkeypatch):
    rng = np.random.default_rng(5)
    small = rng.standard_normal((1, 2, 8, 4))
    monkeypatch.setattr(attention_kernels, "MIN_WORK", 2 * 8 * 8 * 8 + 1)
    assert attention_kernels.forward(small, small, small, 1, 0.1, False) is None
    monkeypatch.setattr(attention_kernels, "MIN_WORK", 2 * 8 * 8 * 8)
    assert (attention_kernels.forward(small, small, small, 1, 0.1, False) is None) == \
        (attention_kernels._library("fnx_attention_forward_f64") is None)
    wide = rng.standard_normal((1, 1, 3, attention_kernels.MAX_HEAD_DIM + 1))
    assert attention_kernels.forward(wide, wide, wide, 1, 0.1, False) is None
    half = rng.standard_normal((1, 1, 3, 4)).astype(np.float16)
    assert attention_kernels.forward(half, half, half, 1, 0.1, False) is None
    out = F.scaled_dot_product_attention(*(fnx.tensor(wide) for _ in range(3)))
    np.testing.assert_allclose(out.numpy(), _reference(wide, wide, wide, 1, wide.shape[-1] ** -0.5, False,
                                                       np.zeros((1, 1, 3, wide.shape[-1])))[0], rtol=1e-10)


def test_grouped_query_heads_must_divide():
    q, k = fnx.randn(1, 3, 2, 4), fnx.randn(1, 2, 2, 4)
    with pytest.raises(RuntimeError, match="query heads \\(3\\) must be a multiple of the key heads \\(2\\)"):
        F.scaled_dot_product_attention(q, k, k, enable_gqa=True)


def test_key_and_value_shared_by_the_batch():
    """Keys and values expanded over the batch (stride 0), read in place."""
    rng = np.random.default_rng(6)
    q = rng.standard_normal((2, 3, 70, 8))
    k, v = rng.standard_normal((1, 3, 66, 8)), rng.standard_normal((1, 3, 66, 5))
    out = F.scaled_dot_product_attention(fnx.tensor(q), fnx.tensor(k).expand(2, 3, 66, 8),
                                         fnx.tensor(v).expand(2, 3, 66, 5), is_causal=True)
    want = _reference(q, np.broadcast_to(k, (2, 3, 66, 8)), np.broadcast_to(v, (2, 3, 66, 5)), 1, 8 ** -0.5, True,
                      np.zeros((2, 3, 70, 5)))[0]
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-10, atol=1e-12)
