"""scaled_dot_product_attention under the transforms as one primitive pair (`attention`, `attention_vjp`;
fnx/nn/functional_attention.py): a compiled training step keeps no L x S array and calls the C loops, remat keeps
q, k, v, out and lse rather than recomputing attention, second derivatives (grad of grad, jvp of grad) match
the composition, vmap with shared operands matches a loop, and bad operands get errors naming the shapes. The
op table (op_db_attention.py) checks values, gradients, vmap and compile of both primitives."""
import math

import numpy as np
import pytest

import fnx
import fnx.nn.functional as F
from fnx.ir import Var
from fnx.lowering.plan import plan_steps
from fnx.nn.functional_attention import attention_p, attention_vjp_p, reference
from fnx.transforms.compile import _split

B, H, T, E = 2, 4, 40, 8   # T is no other dimension of the block, so a (T, T) array is a score matrix
D_MODEL = H * E


def _block_params(dtype=fnx.float32):
    fnx.manual_seed(0)
    return {"qkv": 0.2 * fnx.randn(D_MODEL, 3 * D_MODEL, dtype=dtype),
            "proj": 0.2 * fnx.randn(D_MODEL, D_MODEL, dtype=dtype)}


def _loss(params, x, kv_heads=H):
    """A GPT-style causal attention block (with grouped key/value heads when kv_heads < H) and a squared loss."""
    kv = kv_heads * E
    w = params["qkv"][:, :D_MODEL + 2 * kv]
    q, k, v = (x @ w).split([D_MODEL, kv, kv], dim=-1)
    q = q.reshape(B, T, H, E).transpose(1, 2)
    k, v = (t.reshape(B, T, kv_heads, E).transpose(1, 2) for t in (k, v))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=kv_heads < H)
    return ((y.transpose(1, 2).reshape(B, T, D_MODEL) @ params["proj"]) ** 2).mean()


def _square(shape) -> bool:
    return len(shape) >= 2 and tuple(shape[-2:]) == (T, T)


def _avals(closed):
    for eqn in closed.jaxpr.eqns:
        yield from (v.aval for v in eqn.outvars)


def test_a_compiled_training_step_keeps_no_score_matrix_and_calls_the_fused_loops():
    step = fnx.compile(fnx.value_and_grad(_loss))
    params, x = _block_params(), fnx.randn(B, T, D_MODEL)
    step(params, x)
    closed = step._latest().closed
    assert not [a for a in _avals(closed) if _square(a.shape)]
    steps, _ = plan_steps(closed, "c")
    library = [s.prim.name for s in steps if hasattr(s, "prim")]
    assert "attention" in library and "attention_vjp" in library
    loss, grads = step(params, x)
    want_loss, want = fnx.value_and_grad(_loss)(params, x)
    np.testing.assert_allclose(loss.numpy(), want_loss.numpy(), rtol=1e-5)
    for name in params:
        np.testing.assert_allclose(grads[name].numpy(), want[name].numpy(), rtol=1e-4, atol=1e-7)


def test_remat_keeps_q_k_v_out_and_lse_and_never_recomputes_attention():
    q, k, v = (fnx.randn(B, H, T, E, dtype=fnx.float64, requires_grad=True) for _ in range(3))
    f = fnx.compile(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True).sum())
    f(q, k, v).backward()
    fwd, bwd = _split(f._latest().closed, (True, True, True))
    kept = [tuple(v.aval.shape) for v in fwd.jaxpr.outvars[1:] if isinstance(v, Var)]
    assert sorted(kept) == [(B, H, T)] + [(B, H, T, E)] * 4
    assert [e.prim.name for e in bwd.jaxpr.eqns if e.prim in (attention_p, attention_vjp_p)] == ["attention_vjp"]
    assert not [a for a in _avals(fwd) if _square(a.shape)] and not [a for a in _avals(bwd) if _square(a.shape)]


def _composed(params, x, kv_heads=H):
    """`_loss` with the attention written as its reference composition."""
    kv = kv_heads * E
    q, k, v = (x @ params["qkv"][:, :D_MODEL + 2 * kv]).split([D_MODEL, kv, kv], dim=-1)
    q = q.reshape(B, T, H, E).transpose(1, 2)
    k, v = (t.reshape(B, T, kv_heads, E).transpose(1, 2) for t in (k, v))
    y = reference(q, k, v, scale=1 / math.sqrt(E), is_causal=True, groups=H // kv_heads)[0]
    return ((y.transpose(1, 2).reshape(B, T, D_MODEL) @ params["proj"]) ** 2).mean()


@pytest.mark.parametrize("kv_heads", [H, H // 2])
def test_second_derivatives_match_the_composition(kv_heads):
    """grad of grad (the vjp of attention_vjp) and jvp of grad (its jvp), grouped heads and not."""
    params, x = _block_params(fnx.float64), fnx.randn(B, T, D_MODEL, dtype=fnx.float64)
    direction = fnx.randn(B, T, D_MODEL, dtype=fnx.float64)

    def grad_norm(loss):
        return lambda x: (fnx.grad(loss, argnums=1)(params, x, kv_heads) ** 2).sum()

    got, want = fnx.grad(grad_norm(_loss))(x), fnx.grad(grad_norm(_composed))(x)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-8, atol=1e-12)
    got_t = fnx.jvp(lambda x: fnx.grad(_loss, argnums=1)(params, x, kv_heads), (x,), (direction,))[1]
    want_t = fnx.jvp(lambda x: fnx.grad(_composed, argnums=1)(params, x, kv_heads), (x,), (direction,))[1]
    np.testing.assert_allclose(got_t.numpy(), want_t.numpy(), rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
def test_vmap_with_shared_keys_and_values_matches_a_loop(causal):
    qs = fnx.randn(3, H, T, E, dtype=fnx.float64)
    k, v = fnx.randn(H // 2, T, E, dtype=fnx.float64), fnx.randn(H // 2, T, 6, dtype=fnx.float64)

    def attend(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)

    got = fnx.vmap(attend, in_axes=(0, None, None))(qs, k, v)
    want = fnx.stack([attend(q, k, v) for q in qs])
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-14)
    grads = fnx.vmap(fnx.grad(lambda q: (attend(q, k, v) ** 2).sum()))(qs)
    for q, g in zip(qs, grads):
        np.testing.assert_allclose(g.numpy(), fnx.grad(lambda q: (attend(q, k, v) ** 2).sum())(q).numpy(),
                                   rtol=1e-10, atol=1e-13)


def test_bad_operands_name_the_op_and_shapes():
    q, k = fnx.randn(2, 4, 5, 8), fnx.randn(2, 4, 5, 8)
    params = {"scale": 0.5, "is_causal": False, "groups": 1}
    with pytest.raises(fnx.errors.FnxRuntimeError, match=r"attention: .*key \[2, 4, 5, 6\]"):
        fnx.make_jaxpr(lambda q, k: attention_p.bind(q, k, k, **params))(q, fnx.randn(2, 4, 5, 6))
    with pytest.raises(fnx.errors.FnxRuntimeError, match=r"3 query heads per key head need a multiple of 3"):
        attention_p.bind(q, k[:, :1], k[:, :1], **{**params, "groups": 3})
    with pytest.raises(fnx.errors.FnxTypeError, match="one floating dtype, got float32, float64 and float32"):
        fnx.make_jaxpr(lambda q, k: attention_p.bind(q, k, q, **params))(q, k.double())


@pytest.mark.cuda
def test_cuda_matches_the_cpu():
    q, k, v = (fnx.randn(2, 4, T, E, requires_grad=True) for _ in range(3))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    out.square().sum().backward()
    qc, kc, vc = (t.detach().to("cuda").requires_grad_() for t in (q, k, v))
    out_c = F.scaled_dot_product_attention(qc, kc, vc, is_causal=True)
    out_c.square().sum().backward()
    np.testing.assert_allclose(out_c.cpu().detach().numpy(), out.detach().numpy(), rtol=1e-4, atol=1e-5)
    for a, b in zip((qc, kc, vc), (q, k, v)):
        np.testing.assert_allclose(a.grad.cpu().numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_eager_backward_refuses_an_operand_modified_in_place():
    q = fnx.randn(1, 2, T, E, requires_grad=True) * 1.0
    k, v = fnx.randn(1, 2, T, E), fnx.randn(1, 2, T, E)
    out = F.scaled_dot_product_attention(q, k, v)
    q.mul_(2.0)
    with pytest.raises(fnx.errors.FnxRuntimeError, match=r"modified by an inplace operation: input 0 of attention"):
        out.sum().backward()
