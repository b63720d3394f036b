"""What a compiled forward keeps for its backward (fnx/lowering/remat.py), how long the backward keeps it
(Executable.consume), and fusion that does not stretch lifetimes across library steps."""
import gc
import math

import numpy as np
import pytest

import fnx
import fnx.nn.functional as F
from fnx.ir import Var
from fnx.lowering.fusion import Kernel
from fnx.lowering.plan import build_executable, plan_steps
from fnx.lowering.remat import SHORT_PRODUCT
from fnx.transforms.compile import _Saved, _split


def _attention(q, k, v):
    return (F.softmax(q @ k.mT * 0.5, -1) @ v).sum()


def _residual_bytes(fwd, n_outs: int) -> int:
    inputs = set(fwd.jaxpr.invars)
    return sum(math.prod(v.aval.shape) * v.aval.dtype.np.itemsize
               for v in fwd.jaxpr.outvars[n_outs:] if v not in inputs)


def _recomputed(bwd, n_cts: int = 1) -> list[str]:
    """The primitives of the backward's equations that read no cotangent: the forward's work it recomputes."""
    derived, names = set(bwd.jaxpr.invars[-n_cts:]), []
    for eqn in bwd.jaxpr.eqns:
        if any(isinstance(a, Var) and a in derived for a in eqn.inputs):
            derived.update(eqn.outvars)
        else:
            names.append(eqn.prim.name)
    return names


def _qkv(dtype=fnx.float64):
    fnx.manual_seed(0)
    return [fnx.randn(2, 12, 4, dtype=dtype, requires_grad=True) for _ in range(3)]


def test_attention_keeps_its_row_statistics_and_recomputes_scores_and_probabilities():
    f = fnx.compile(_attention)
    q, k, v = _qkv()
    f(q, k, v).backward()
    fwd, bwd = _split(f._latest().closed, (True, True, True))
    assert _residual_bytes(fwd, 1) <= 2 * 2 * 12 * 8   # rows' maxima and sums, not the 2 x 12 x 12 scores
    assert {"matmul", "exp"} <= set(_recomputed(bwd))


@pytest.mark.parametrize("inner, recomputed", [(16, True), (SHORT_PRODUCT + 1, False)])
def test_only_a_short_expanding_product_is_recomputed(inner, recomputed):
    f = fnx.compile(lambda x, w: fnx.exp(x @ w).sum())
    x = fnx.randn(200, inner, requires_grad=True)
    f(x, fnx.randn(inner, 200)).backward()
    fwd, bwd = _split(f._latest().closed, (True, False))
    assert (_residual_bytes(fwd, 1) == 0) == recomputed
    assert ("matmul" in _recomputed(bwd)) == recomputed


def test_gradients_with_recomputation_equal_eager():
    q, k, v = _qkv()
    _attention(q, k, v).backward()
    want = [t.grad.numpy().copy() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    fnx.compile(_attention)(q, k, v).backward()
    for t, w in zip((q, k, v), want):
        np.testing.assert_allclose(t.grad.numpy(), w, rtol=1e-10, atol=1e-12)


def test_recomputation_runs_just_before_its_first_use():
    def two_layers(x, w1, w2):
        h = fnx.tanh(x @ w1)
        return fnx.exp(fnx.tanh(h @ w2)).sum()

    f = fnx.compile(two_layers)
    fnx.manual_seed(0)
    args = [fnx.randn(3, 3, dtype=fnx.float64, requires_grad=True) for _ in range(3)]
    f(*args).backward()
    _, bwd = _split(f._latest().closed, (True, True, True))
    j = bwd.jaxpr
    derived = set(j.invars[-1:])
    reads_cotangent = []
    for eqn in j.eqns:
        reads_cotangent.append(any(isinstance(a, Var) and a in derived for a in eqn.inputs))
        if reads_cotangent[-1]:
            derived.update(eqn.outvars)
    # each recomputed value feeds (through other recomputed ones) the backward equation right after them
    for i, eqn in enumerate(j.eqns):
        if reads_cotangent[i]:
            continue
        pending = set(eqn.outvars)
        for later, reads in zip(j.eqns[i + 1:], reads_cotangent[i + 1:]):
            if any(a in pending for a in later.inputs if isinstance(a, Var)):
                pending.update(later.outvars)
            if reads:
                assert any(a in pending for a in later.inputs if isinstance(a, Var)), eqn.prim.name
                break


def test_a_consuming_call_empties_its_argument_list_and_gives_the_same_results():
    def f(a, b):
        return [fnx.exp(a) * 2.0, (a @ b).sum()]

    a, b = fnx.randn(4, 4), fnx.randn(4, 4)
    exe = build_executable(fnx.make_jaxpr(f)(a, b), backend="c")
    want = [t.numpy() for t in exe(a, b)]
    args = [a, b]
    got = exe.consume(args)
    assert args == []
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w)


def test_the_backward_takes_the_residuals_over():
    f = fnx.compile(lambda x: (fnx.sin(x) ** 2).sum())
    x = fnx.tensor([0.3, 1.2], dtype=fnx.float64, requires_grad=True)
    y = f(x)
    saved = [o for o in gc.get_objects() if type(o) is _Saved and o.values]
    assert len(saved) == 1
    y.backward()
    assert saved[0].values is None
    np.testing.assert_allclose(x.grad.numpy(), np.sin(2 * np.array([0.3, 1.2])), rtol=1e-12)


def test_kernels_merge_only_where_no_library_step_lies_between_them_or_they_read_one_value():
    def between(x, y, w):
        return fnx.exp(x) * 2.0, fnx.exp(x) @ w, fnx.tanh(y) + 1.0

    def adjacent(x, y, w):
        return fnx.exp(x) * 2.0, fnx.tanh(y) + 1.0, x @ w

    def sharing(x, y, w):   # the kernels on either side of the product read all of x: one pass over it
        return fnx.exp(x) * 2.0, fnx.exp(x) @ w, fnx.tanh(x) + y

    x, y, w = fnx.randn(8, 8), fnx.randn(8, 8), fnx.randn(8, 8)
    assert len(fnx.compile(between).lower(x, y, w).kernels()) == 2
    assert len(fnx.compile(adjacent).lower(x, y, w).kernels()) == 1
    assert len(fnx.compile(sharing).lower(x, y, w).kernels()) == 1
    for got, want in zip(fnx.compile(sharing)(x, y, w), sharing(x, y, w)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def test_a_value_read_at_a_broadcast_is_kept_rather_than_recomputed_per_element():
    f = fnx.compile(lambda x, t: (x * fnx.cos(t)).sum())   # cos(t) would run for every element of x
    x = fnx.randn(64, 16, requires_grad=True)
    f(x, fnx.randn(16)).backward()
    fwd, bwd = _split(f._latest().closed, (True, False))
    assert _residual_bytes(fwd, 1) == 16 * 4
    assert "cos" not in _recomputed(bwd)


def test_a_permuted_kernel_result_that_a_library_step_reads_is_written_in_order_and_viewed():
    def f(x, w):
        return fnx.exp(x).mT @ w

    x, w = fnx.randn(64, 48), fnx.randn(64, 8)
    steps, _ = plan_steps(fnx.make_jaxpr(f)(x, w), "c")
    kernels = [s for s in steps if isinstance(s, Kernel)]
    assert [tuple(v.aval.shape) for k in kernels for v in k.outputs] == [(64, 48)]   # not a transposed copy
    assert [s.prim.name for s in steps if not isinstance(s, Kernel)] == ["transpose", "matmul"]
    np.testing.assert_allclose(fnx.compile(f)(x, w).numpy(), np.exp(x.numpy()).T @ w.numpy(), rtol=1e-5, atol=1e-4)


def _mlp(x, w1, w2, activation):
    return F.linear(activation(F.linear(x, w1)), w2).sum()


# activation, its primitive, whether its output is kept, the (32, 32) buffers kept: GELU's input and output (its
# derivative reads the input), tanh's output alone (its derivative reads that too), a cheap activation's input
@pytest.mark.parametrize("activation, name, kept, buffers", [(F.gelu, "gelu", True, 2), (fnx.tanh, "tanh", True, 1),
                                                             (lambda h: h * 2.0 + 1.0, "mul", False, 1)])
def test_an_expensive_value_that_products_read_in_both_passes_is_kept_not_recomputed(activation, name, kept, buffers):
    # GPT's MLP: the second product reads the activation in the forward, and its weight gradient reads it in the
    # backward; recomputing an expensive one there would compute and write it a second time
    f = fnx.compile(lambda x, w1, w2: _mlp(x, w1, w2, activation))
    fnx.manual_seed(0)
    x, w1, w2 = fnx.randn(4, 8, 16), fnx.randn(32, 16, requires_grad=True), fnx.randn(16, 32, requires_grad=True)
    f(x, w1, w2).backward()
    fwd, bwd = _split(f._latest().closed, (False, True, True))
    recomputed = _recomputed(bwd)
    assert (name not in recomputed) == kept
    assert _residual_bytes(fwd, 1) == buffers * 32 * 32 * 4
    want = [w.grad.numpy().copy() for w in (w1, w2)]
    for w in (w1, w2):
        w.grad = None
    _mlp(x, w1, w2, activation).backward()
    for w, g in zip((w1, w2), want):
        np.testing.assert_allclose(g, w.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_a_kernel_result_permuted_then_reshaped_for_a_library_step_is_written_permuted():
    def f(x, w):   # attention heads back to rows: numpy would copy the permuted view to reshape it
        return fnx.exp(x).transpose(1, 2).reshape(2, 8, 64) @ w

    x, w = fnx.randn(2, 4, 8, 16), fnx.randn(64, 8)
    steps, _ = plan_steps(fnx.make_jaxpr(f)(x, w), "c")
    kernels = [s for s in steps if isinstance(s, Kernel)]
    assert [tuple(v.aval.shape) for k in kernels for v in k.outputs] == [(2, 8, 4, 16)]
    assert [s.prim.name for s in steps if not isinstance(s, Kernel)] == ["reshape", "matmul"]
    want = np.exp(x.numpy()).transpose(0, 2, 1, 3).reshape(2, 8, 64) @ w.numpy()
    np.testing.assert_allclose(fnx.compile(f)(x, w).numpy(), want, rtol=1e-5, atol=1e-4)
