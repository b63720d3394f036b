"""Attention against a float64 numpy reference: scaled_dot_product_attention, MultiheadAttention (masks,
is_causal, need_weights, batch_first) and the transformer layers built on it."""
import math

import numpy as np
import pytest

import fnx
import fnx.nn as nn
import fnx.nn.functional as F
from fnx.autograd import gradcheck
from fnx.nn.functional_attention import reference

RNG = np.random.default_rng(3)


def T(a, requires_grad=False):
    return fnx.tensor(np.asarray(a), requires_grad=requires_grad)


def npy(t):
    return t.detach().numpy()


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def ref_sdpa(q, k, v, allowed=None, bias=None, scale=None):
    s = q @ np.swapaxes(k, -1, -2) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if bias is not None:
        s = s + bias
    if allowed is not None:
        s = np.where(allowed, s, -np.inf)
    return softmax(s) @ v


def ref_mha(mha, q, k, v, key_padding_mask=None, attn_mask=None, average=True):
    """Batch-first multi-head attention from the module's weights; boolean masks are True where masked."""
    e, h = mha.embed_dim, mha.num_heads
    d = e // h
    w, b = npy(mha.in_proj_weight), npy(mha.in_proj_bias)
    proj = [x @ w[i * e:(i + 1) * e].T + b[i * e:(i + 1) * e] for i, x in enumerate((q, k, v))]
    qh, kh, vh = [p.reshape(p.shape[0], p.shape[1], h, d).transpose(0, 2, 1, 3) for p in proj]
    scores = qh @ kh.transpose(0, 1, 3, 2) / math.sqrt(d)
    if attn_mask is not None:
        scores = np.where(attn_mask, -np.inf, scores) if attn_mask.dtype == bool else scores + attn_mask
    if key_padding_mask is not None:
        scores = np.where(key_padding_mask[:, None, None, :], -np.inf, scores)
    weights = softmax(scores)
    out = (weights @ vh).transpose(0, 2, 1, 3).reshape(q.shape[0], q.shape[1], e)
    out = out @ npy(mha.out_proj.weight).T + npy(mha.out_proj.bias)
    return out, weights.mean(1) if average else weights


# ---------------------------------------------------------------- scaled dot-product attention
def test_sdpa_plain_scaled_and_masked():
    q, k, v = RNG.standard_normal((2, 3, 4, 5)), RNG.standard_normal((2, 3, 6, 5)), RNG.standard_normal((2, 3, 6, 2))
    np.testing.assert_allclose(npy(F.scaled_dot_product_attention(T(q), T(k), T(v))), ref_sdpa(q, k, v), atol=1e-12)
    allowed = RNG.random((4, 6)) > 0.4
    allowed[:, 0] = True
    np.testing.assert_allclose(npy(F.scaled_dot_product_attention(T(q), T(k), T(v), attn_mask=T(allowed))),
                               ref_sdpa(q, k, v, allowed=allowed), atol=1e-12)
    bias = RNG.standard_normal((4, 6))
    np.testing.assert_allclose(npy(F.scaled_dot_product_attention(T(q), T(k), T(v), attn_mask=T(bias), scale=0.3)),
                               ref_sdpa(q, k, v, bias=bias, scale=0.3), atol=1e-12)
    causal = np.tril(np.ones((4, 6), dtype=bool))
    np.testing.assert_allclose(npy(F.scaled_dot_product_attention(T(q), T(k), T(v), is_causal=True)),
                               ref_sdpa(q, k, v, allowed=causal), atol=1e-12)
    with pytest.raises(RuntimeError, match="attn_mask should not be set when is_causal"):
        F.scaled_dot_product_attention(T(q), T(k), T(v), attn_mask=T(allowed), is_causal=True)


def test_sdpa_fully_masked_rows_give_zeros_and_finite_gradients():
    q = T(RNG.standard_normal((2, 3)), True)
    k, v = T(RNG.standard_normal((4, 3)), True), T(RNG.standard_normal((4, 2)))
    allowed = T(np.array([[True, False, True, False], [False] * 4]))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    assert not out.detach().numpy()[1].any()
    out.sum().backward()
    assert np.isfinite(q.grad.numpy()).all() and np.isfinite(k.grad.numpy()).all()


def test_sdpa_grouped_query_attention_and_gradients():
    q, k, v = RNG.standard_normal((1, 4, 3, 2)), RNG.standard_normal((1, 2, 3, 2)), RNG.standard_normal((1, 2, 3, 2))
    out = F.scaled_dot_product_attention(T(q), T(k), T(v), enable_gqa=True)
    ref = ref_sdpa(q, np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1))
    np.testing.assert_allclose(npy(out), ref, atol=1e-12)
    args = (T(q[0, :1], True), T(k[0, :1], True), T(v[0, :1], True))
    assert gradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), args)


@pytest.mark.parametrize("causal, gqa", [(False, False), (True, False), (True, True)])
def test_sdpa_eager_node_matches_the_composition_to_second_order(causal, gqa):
    """Eager SDPA without mask or dropout is one tape node (the `attention` primitive, PyTorch's math backward
    as `attention_vjp`); fnx.grad of the composition gives the same first and second derivatives (backward with
    create_graph=True differentiates `attention_vjp` through the composition)."""
    q, k, v = RNG.standard_normal((2, 4, 5, 3)), RNG.standard_normal((2, 4 // (1 + gqa), 6, 3)), \
        RNG.standard_normal((2, 4 // (1 + gqa), 6, 2))
    w = T(RNG.standard_normal((2, 4, 5, 2)))

    def loss(q, k, v):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=0.7, enable_gqa=gqa)
        return (out * w).sum()

    def composed(q, k, v):
        return (reference(q, k, v, scale=0.7, is_causal=causal, groups=1 + gqa)[0] * w).sum()

    args = [T(a, True) for a in (q, k, v)]
    out = F.scaled_dot_product_attention(*args, is_causal=causal, scale=0.7, enable_gqa=gqa)
    assert out.grad_fn.parents[0].name == "attentionBackward"
    first = fnx.autograd.grad(loss(*args), args, create_graph=True)
    expected = fnx.grad(composed, argnums=(0, 1, 2))(*(T(a) for a in (q, k, v)))
    for got, want in zip(first, expected):
        np.testing.assert_allclose(npy(got), npy(want), rtol=1e-10, atol=1e-12)
    second = fnx.autograd.grad(sum((g * g).sum() for g in first), args)

    def grad_norm(q, k, v):
        return sum((g * g).sum() for g in fnx.grad(composed, argnums=(0, 1, 2))(q, k, v))

    for got, want in zip(second, fnx.grad(grad_norm, argnums=(0, 1, 2))(*(T(a) for a in (q, k, v)))):
        np.testing.assert_allclose(npy(got), npy(want), rtol=1e-9, atol=1e-11)


def test_sdpa_eager_node_keeps_only_what_its_backward_reads():
    q, k, v = (T(RNG.standard_normal((2, 3, 4)), True) for _ in range(3))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    (out * out).sum().backward()
    assert out.grad_fn.parents[0].ctx.pull is None
    with fnx.no_grad():
        assert F.scaled_dot_product_attention(q, k, v).grad_fn is None


# ---------------------------------------------------------------- multi-head attention
def mha_inputs(n=2, l=4, s=5, e=8):
    return RNG.standard_normal((n, l, e)), RNG.standard_normal((n, s, e)), RNG.standard_normal((n, s, e))


def test_mha_parameters_follow_pytorch_names():
    mha = nn.MultiheadAttention(8, 2)
    assert list(mha.state_dict()) == ["in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]
    assert not mha.in_proj_bias.numpy(force=True).any() and not npy(mha.out_proj.bias).any()
    assert repr(mha) == ("MultiheadAttention(\n  (out_proj): NonDynamicallyQuantizableLinear(in_features=8, "
                         "out_features=8, bias=True)\n)")
    kv = nn.MultiheadAttention(8, 2, kdim=3, vdim=5, add_bias_kv=True, bias=False)
    assert list(kv.state_dict()) == ["q_proj_weight", "k_proj_weight", "v_proj_weight", "bias_k", "bias_v",
                                     "out_proj.weight"]
    with pytest.raises(AssertionError, match="divisible"):
        nn.MultiheadAttention(6, 4)


@pytest.mark.parametrize("masks", ["none", "key_padding", "bool_attn", "float_attn", "both"])
@pytest.mark.parametrize("average", [True, False])
def test_mha_matches_reference(masks, average):
    mha = nn.MultiheadAttention(8, 2, batch_first=True).double()
    q, k, v = mha_inputs()
    kpm = np.array([[False, False, True, False, True], [False, True, False, False, False]])
    bool_mask = RNG.random((4, 5)) > 0.7
    bool_mask[:, 0] = False
    float_mask = RNG.standard_normal((4, 5))
    kw, ref_kw = {}, {}
    if masks in ("key_padding", "both"):
        kw["key_padding_mask"], ref_kw["key_padding_mask"] = T(kpm), kpm
    if masks in ("bool_attn", "both"):
        kw["attn_mask"], ref_kw["attn_mask"] = T(bool_mask), bool_mask
    if masks == "float_attn":
        kw["attn_mask"], ref_kw["attn_mask"] = T(float_mask), float_mask
    out, weights = mha(T(q), T(k), T(v), average_attn_weights=average, **kw)
    ref_out, ref_w = ref_mha(mha, q, k, v, average=average, **ref_kw)
    np.testing.assert_allclose(npy(out), ref_out, atol=1e-12)
    np.testing.assert_allclose(npy(weights), ref_w, atol=1e-12)
    out2, none = mha(T(q), T(k), T(v), need_weights=False, **kw)
    assert none is None
    np.testing.assert_allclose(npy(out2), ref_out, atol=1e-12)


@pytest.mark.parametrize("batch_first", [True, False])
def test_mha_self_attention_packed_projection(batch_first):
    """One tensor as query, key and value (projected with one product) gives what three equal copies give."""
    mha = nn.MultiheadAttention(8, 2, batch_first=batch_first).double()
    x = RNG.standard_normal((2, 4, 8))
    same, w_same = mha(T(x), T(x), T(x))
    xt = T(x)
    packed, w_packed = mha(xt, xt, xt)
    np.testing.assert_allclose(npy(packed), npy(same), atol=1e-12)
    np.testing.assert_allclose(npy(w_packed), npy(w_same), atol=1e-12)
    assert gradcheck(lambda t: mha(t, t, t, need_weights=False)[0], (T(x[:, :3], True),))


def test_mha_sequence_first_unbatched_and_causal():
    mha = nn.MultiheadAttention(8, 4).double()
    q, _, _ = mha_inputs(l=5)
    causal_bool = np.triu(np.ones((5, 5), dtype=bool), 1)
    ref, _ = ref_mha(mha, q, q, q, attn_mask=causal_bool)
    seq_first = T(q.transpose(1, 0, 2))
    out, _ = mha(seq_first, seq_first, seq_first, attn_mask=T(causal_bool))
    np.testing.assert_allclose(npy(out).transpose(1, 0, 2), ref, atol=1e-12)
    causal = nn.Transformer.generate_square_subsequent_mask(5, dtype=fnx.float64)
    for need_weights in (True, False):
        hinted, _ = mha(seq_first, seq_first, seq_first, attn_mask=causal, is_causal=True, need_weights=need_weights)
        np.testing.assert_allclose(npy(hinted).transpose(1, 0, 2), ref, atol=1e-12)
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        mha(seq_first, seq_first, seq_first, is_causal=True)
    single, w = mha(T(q[0]), T(q[0]), T(q[0]))
    ref0, ref_w0 = ref_mha(mha, q[:1], q[:1], q[:1])
    np.testing.assert_allclose(npy(single), ref0[0], atol=1e-12)
    assert w.shape == (5, 5)


def test_mha_dropout_only_in_training_and_gradients():
    fnx.manual_seed(0)
    mha = nn.MultiheadAttention(4, 2, dropout=0.5, batch_first=True).double()
    x = T(RNG.standard_normal((1, 3, 4)))
    a, _ = mha(x, x, x)
    b, _ = mha(x, x, x)
    assert not np.allclose(npy(a), npy(b))
    mha.eval()
    np.testing.assert_array_equal(npy(mha(x, x, x)[0]), npy(mha(x, x, x)[0]))
    xg = T(RNG.standard_normal((1, 2, 4)), True)
    assert gradcheck(lambda t: mha(t, t, t)[0], (xg,))
    g = fnx.grad(lambda m: m(x, x, x)[0].sum())(mha)
    assert g.in_proj_weight.shape == (12, 4) and g.out_proj.weight.shape == (4, 4)


# ---------------------------------------------------------------- transformer layers
def ref_layer_norm(x, w, b, eps=1e-5):
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps) * w + b


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_encoder_layer_matches_reference(norm_first):
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, norm_first=norm_first,
                                       activation="gelu").double()
    x = RNG.standard_normal((2, 4, 8))
    kpm = np.array([[False, False, False, True], [False] * 4])
    n1 = lambda t: ref_layer_norm(t, npy(layer.norm1.weight), npy(layer.norm1.bias))  # noqa: E731
    n2 = lambda t: ref_layer_norm(t, npy(layer.norm2.weight), npy(layer.norm2.bias))  # noqa: E731

    def ff(t):
        hidden = t @ npy(layer.linear1.weight).T + npy(layer.linear1.bias)
        hidden = npy(F.gelu(T(hidden)))
        return hidden @ npy(layer.linear2.weight).T + npy(layer.linear2.bias)

    def sa(t):
        return ref_mha(layer.self_attn, t, t, t, key_padding_mask=kpm)[0]

    if norm_first:
        y = x + sa(n1(x))
        ref = y + ff(n2(y))
    else:
        y = n1(x + sa(x))
        ref = n2(y + ff(y))
    np.testing.assert_allclose(npy(layer(T(x), src_key_padding_mask=T(kpm))), ref, atol=1e-10)


def test_transformer_encoder_stack_and_causal_detection():
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)
    enc = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(8)).double()
    assert [n for n, _ in enc.named_children()] == ["layers", "norm"]
    assert "layers.1.self_attn.in_proj_weight" in enc.state_dict()
    assert enc.layers[0].linear1.weight is not enc.layers[1].linear1.weight
    x = T(RNG.standard_normal((5, 2, 8)))
    mask = nn.Transformer.generate_square_subsequent_mask(5, dtype=fnx.float64)
    out = enc(x, mask=mask)
    manual = x
    for lyr in enc.layers:
        manual = lyr(manual, src_mask=mask)
    np.testing.assert_allclose(npy(out), npy(enc.norm(manual)), atol=1e-12)
    np.testing.assert_allclose(npy(enc(x, is_causal=True, mask=mask)), npy(out), atol=1e-12)


def test_transformer_decoder_and_full_model_shapes():
    model = nn.Transformer(8, 2, 1, 1, 16, dropout=0.0, batch_first=True)
    src, tgt = fnx.randn(2, 6, 8), fnx.randn(2, 4, 8)
    out = model(src, tgt, tgt_mask=model.generate_square_subsequent_mask(4))
    assert out.shape == (2, 4, 8)
    names = list(model.state_dict())
    assert "decoder.layers.0.multihead_attn.in_proj_weight" in names and "encoder.norm.weight" in names


# ---------------------------------------------------------------- torch.nn.attention: backends and causal biases
from fnx.nn.attention import SDPAParams, SDPBackend, can_use_flash_attention, sdpa_kernel  # noqa: E402
from fnx.nn.attention.bias import CausalBias, CausalVariant, causal_lower_right, causal_upper_left  # noqa: E402


def _primitives(fn, *args) -> set:
    return {eqn.prim.name for eqn in fnx.make_jaxpr(fn)(*args).jaxpr.eqns}


def test_sdpa_kernel_sets_the_switches_inside_the_block_and_restores_them():
    cuda = fnx.backends.cuda
    assert cuda.flash_sdp_enabled() and cuda.math_sdp_enabled() and cuda.mem_efficient_sdp_enabled()
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION) as context:
        assert context == {}
        assert cuda.flash_sdp_enabled() and not cuda.math_sdp_enabled() and not cuda.cudnn_sdp_enabled()
        with sdpa_kernel([SDPBackend.MATH, SDPBackend.MATH]):
            assert cuda.math_sdp_enabled() and not cuda.flash_sdp_enabled()
        assert cuda.flash_sdp_enabled() and not cuda.math_sdp_enabled()
    assert cuda.flash_sdp_enabled() and cuda.math_sdp_enabled() and cuda.cudnn_sdp_enabled()
    with pytest.warns(FutureWarning, match="sdpa_kernel"), \
            cuda.sdp_kernel(enable_flash=False, enable_mem_efficient=False):
        assert cuda.math_sdp_enabled() and not cuda.flash_sdp_enabled()
    cuda.enable_math_sdp(False)
    try:
        assert not cuda.math_sdp_enabled()
    finally:
        cuda.enable_math_sdp(True)
    with pytest.raises(AssertionError, match="instance of SDPBackend"):
        with sdpa_kernel("math"):
            pass
    assert (repr(SDPBackend.MATH), str(SDPBackend.FLASH_ATTENTION), int(SDPBackend.CUDNN_ATTENTION)) == \
        ("<SDPBackend.MATH: 0>", "SDPBackend.FLASH_ATTENTION", 3)


def test_sdpa_backends_are_pytorch_cpus_flash_and_math():
    """FLASH_ATTENTION runs the fused primitive, MATH the composition; a block of backends the CPU lacks, or of
    fused ones that cannot take the call (dropout, broadcast batches), raises PyTorch's errors."""
    q, k = fnx.randn(1, 2, 3, 4), fnx.randn(1, 2, 5, 4)
    sdpa = lambda q, k: F.scaled_dot_product_attention(q, k, k)  # noqa: E731
    assert "attention" in _primitives(sdpa, q, k)
    with sdpa_kernel(SDPBackend.MATH):
        assert "attention" not in _primitives(sdpa, q, k)
        math_out = sdpa(q, k)
    with sdpa_kernel([SDPBackend.MATH, SDPBackend.FLASH_ATTENTION], set_priority=True):
        assert "attention" not in _primitives(sdpa, q, k)
    assert "attention" in _primitives(sdpa, q, k)   # the priority order is restored too
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        np.testing.assert_allclose(npy(sdpa(q, k)), npy(math_out), atol=1e-6)
        F.scaled_dot_product_attention(q, k, k, attn_mask=fnx.ones(3, 5, dtype=fnx.bool))
        with pytest.raises(RuntimeError, match="No available kernel.*dropout"):
            F.scaled_dot_product_attention(q, k, k, dropout_p=0.5)
        with pytest.raises(RuntimeError, match="No available kernel.*broadcasting"):
            F.scaled_dot_product_attention(q, k.expand(2, 2, 5, 4), k.expand(2, 2, 5, 4))
    for backends in (SDPBackend.EFFICIENT_ATTENTION, [SDPBackend.CUDNN_ATTENTION, SDPBackend.OVERRIDEABLE], []):
        with sdpa_kernel(backends), pytest.raises(RuntimeError, match="No viable backend"):
            sdpa(q, k)


def test_can_use_flash_attention_gives_the_fused_paths_reasons():
    q, k = fnx.randn(2, 4, 3, 8), fnx.randn(2, 2, 5, 8)
    assert can_use_flash_attention(SDPAParams(q, k, k, None, 0.0, False, True))
    assert can_use_flash_attention(SDPAParams(q, q, q, fnx.ones(1, 4, 3, 1, dtype=fnx.bool), 0.0, False))
    assert not fnx.backends.cuda.can_use_efficient_attention(SDPAParams(q, q, q, None, 0.0, False))
    with pytest.warns(UserWarning, match="num_heads"):
        assert not can_use_flash_attention(SDPAParams(q, k, k, None, 0.0, False, False), True)
    with pytest.warns(UserWarning, match="a mask each of whose dims"):
        assert not can_use_flash_attention(SDPAParams(q, q, q, fnx.ones(3, 1, 3), 0.0, False), debug=True)
    assert can_use_flash_attention(SDPAParams(q, q, fnx.randn(2, 4, 3, 6), fnx.ones(4, 3, 3), 0.0, False))


def test_no_external_flash_attention_kernels_are_registered():
    from fnx.nn import attention

    assert attention.list_flash_attention_impls() == [] and attention.current_flash_attention_impl() is None
    attention.restore_flash_attention_impl()
    with pytest.raises(ValueError, match="Unknown flash attention impl 'FA4'. Available implementations: \\[\\]"):
        attention.activate_flash_attention_impl("FA4")
    with pytest.raises(NotImplementedError, match="dispatcher"):
        attention.register_flash_attention_impl("FA4", register_fn=lambda: None)


def test_causal_biases_are_their_triangles_as_attention_masks():
    for (lq, lk) in ((3, 5), (4, 4)):
        upper, lower = causal_upper_left(lq, lk), causal_lower_right(lq, lk)
        assert isinstance(lower, CausalBias) and lower.variant is CausalVariant.LOWER_RIGHT
        assert (upper.seq_len_q, upper.seq_len_kv, upper.dtype) == (lq, lk, fnx.bool)
        np.testing.assert_array_equal(npy(upper), np.tril(np.ones((lq, lk), bool)))
        np.testing.assert_array_equal(npy(lower), np.tril(np.ones((lq, lk), bool), lk - lq))
        q, k, v = RNG.standard_normal((2, 2, lq, 4)), RNG.standard_normal((2, 2, lk, 4)), \
            RNG.standard_normal((2, 2, lk, 3))
        for bias in (upper, lower):
            out = F.scaled_dot_product_attention(T(q), T(k), T(v), attn_mask=bias)
            np.testing.assert_allclose(npy(out), ref_sdpa(q, k, v, allowed=npy(bias)), atol=1e-12)
    assert repr(causal_upper_left(2, 2)) == repr(fnx.tensor([[True, False], [True, True]]))
    with pytest.raises(AssertionError, match="only supports 2D"):
        causal_lower_right(3)
    with pytest.raises(ValueError, match="CausalBias should not be used with causal=True"):
        F.scaled_dot_product_attention(T(q), T(k), T(v), attn_mask=upper, is_causal=True)


def test_a_lower_right_bias_with_more_queries_than_keys_gives_zeros_to_rows_that_see_nothing():
    with pytest.warns(UserWarning, match="seq_len_q > seq_len_kv"):
        bias = causal_lower_right(4, 2)
    q = T(RNG.standard_normal((1, 1, 4, 3)), requires_grad=True)
    k = T(RNG.standard_normal((1, 1, 2, 3)))
    out = F.scaled_dot_product_attention(q, k, k, attn_mask=bias)
    np.testing.assert_array_equal(npy(out)[0, 0, :2], 0.0)
    out.sum().backward()
    assert np.isfinite(npy(q.grad)).all()


def test_a_causal_bias_equal_to_is_causal_runs_the_fused_path():
    q, k = fnx.randn(1, 2, 3, 4), fnx.randn(1, 2, 5, 4)
    assert "attention" in _primitives(lambda q, k: F.scaled_dot_product_attention(
        q, k, k, attn_mask=causal_upper_left(3, 5)), q, k)
    assert "attention" not in _primitives(lambda q, k: F.scaled_dot_product_attention(
        q, k, k, attn_mask=causal_lower_right(3, 5)), q, k)
