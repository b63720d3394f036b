"""Eager layer_norm's C row loops (fnx/lowering/nn_kernels.py, templates/c_nn.c.j2) agree with the composition
of fnx ops that runs where they do not (small inputs, other devices, no compiler): values and gradients to
rounding, float64 gradients against finite differences, second derivatives through create_graph, column sums
independent of the thread count."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

import fnx
import fnx.nn.functional as F
from fnx.autograd.gradcheck import gradcheck
from fnx.lowering import nn_kernels

TOL = {np.float32: 3e-6, np.float64: 1e-14}


def _run(x, w, b, g, dims: int, input_grad: bool = True) -> list:
    """layer_norm's output and the gradients of (output * g).sum() of the given (numpy) input (if `input_grad`),
    weight, bias."""
    ts = [None if a is None else fnx.tensor(a, requires_grad=i > 0 or input_grad) for i, a in enumerate((x, w, b))]
    y = F.layer_norm(ts[0], x.shape[x.ndim - dims:], ts[1], ts[2])
    y.backward(fnx.tensor(g))
    return [y.detach().numpy()] + [t.grad.numpy() for t in ts if t is not None and t.requires_grad]


@settings(max_examples=16, deadline=None)
@given(features=st.sampled_from([1, 3, 127, 1000, (8, 16)]), dtype=st.sampled_from([np.float32, np.float64]),
       params=st.sampled_from(["weight and bias", "weight", "bias", "none"]), input_grad=st.booleans(),
       seed=st.integers(0, 2**16))
@example(features=1000, dtype=np.float32, params="weight", input_grad=False, seed=0)
@example(features=3, dtype=np.float64, params="bias", input_grad=True, seed=1)
def test_c_rows_match_the_composition(features, dtype, params, input_grad, seed):
    """Over the trailing dims of a (2, rows, *features) input, large enough for the C loops."""
    feat = features if isinstance(features, tuple) else (features,)
    rows = math.ceil(nn_kernels.ROW_MIN_ELEMENTS / math.prod(feat) / 2) + 3
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((2, rows) + feat) * 4 + 2).astype(dtype)
    w = rng.standard_normal(feat).astype(dtype) if "weight" in params else None
    b = rng.standard_normal(feat).astype(dtype) if "bias" in params else None
    g = rng.standard_normal(x.shape).astype(dtype)
    assert nn_kernels.layer_norm(x, w, b, len(feat), 1e-5) is not None   # the C loops run
    input_grad = input_grad or params == "none"   # something to differentiate
    got = _run(x, w, b, g, len(feat), input_grad)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(nn_kernels, "ROW_MIN_ELEMENTS", 10**12)
        want = _run(x, w, b, g, len(feat), input_grad)
    assert len(got) == len(want)
    tol = TOL[dtype]
    for a, e in zip(got, want):
        assert a.dtype == e.dtype and a.shape == e.shape
        np.testing.assert_allclose(a, e, rtol=tol * 10, atol=tol * 10 * np.abs(e).max())


@pytest.mark.parametrize("affine", [True, False])
def test_c_rows_float64_gradients_and_second_order(monkeypatch, affine):
    """With every size on the C loops: float64 gradients match finite differences, and create_graph (which runs
    the composition on the tape) gives the second derivatives of fnx.grad's traced composition."""
    monkeypatch.setattr(nn_kernels, "ROW_MIN_ELEMENTS", 1)
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal((3, 2, 5))] + ([rng.standard_normal((2, 5))] * 2 if affine else [])
    args = [fnx.tensor(a, requires_grad=True) for a in arrays]
    assert nn_kernels.layer_norm(arrays[0], None, None, 2, 1e-5) is not None
    assert gradcheck(lambda *ts: F.layer_norm(ts[0], (2, 5), *ts[1:]), tuple(args))
    ct = fnx.tensor(rng.standard_normal((3, 2, 5)))

    def loss(*ts):
        return (F.layer_norm(ts[0], (2, 5), *ts[1:], eps=1e-3) * ct).sum()

    argnums = tuple(range(len(args)))
    first = fnx.autograd.grad(loss(*args), args, create_graph=True)
    second = fnx.autograd.grad(sum((d * d * d).sum() for d in first), args, materialize_grads=True)

    def cubed(*ts):
        return sum((d * d * d).sum() for d in fnx.grad(loss, argnums=argnums)(*ts))

    plain = [fnx.tensor(a) for a in arrays]
    for got, want in zip(first + second, list(fnx.grad(loss, argnums=argnums)(*plain)) +
                         list(fnx.grad(cubed, argnums=argnums)(*plain))):
        np.testing.assert_allclose(got.detach().numpy(), want.numpy(), rtol=1e-10, atol=1e-10)


def test_c_parameter_gradients_do_not_depend_on_the_thread_count():
    """Large enough for the loops to share rows and column blocks among threads: the same bits on any number."""
    rng = np.random.default_rng(4)
    x, w, b, g = (rng.standard_normal(s).astype(np.float32) for s in [(300, 130), (130,), (130,), (300, 130)])
    before = fnx.get_num_threads()
    runs = []
    try:
        for threads in (1, 2, 3):
            fnx.set_num_threads(threads)
            runs.append(_run(x, w, b, g, 1))
    finally:
        fnx.set_num_threads(before)
    for run in runs[1:]:
        for a, e in zip(run, runs[0]):
            np.testing.assert_array_equal(a, e)


def test_c_rows_leave_nan_rows_nan():
    x = np.random.default_rng(5).standard_normal((64, 128)).astype(np.float32)
    x[7, 3] = np.nan
    y, mean, rstd = nn_kernels.layer_norm(x, None, None, 1, 1e-5)
    assert np.isnan(y[7]).all() and np.isnan(mean[7]).all() and not np.isnan(np.delete(y, 7, 0)).any()


@pytest.mark.parametrize("grads", ["input", "weight and bias", "none"])
def test_eager_node_is_the_functions_recorded_without_apply(monkeypatch, grads):
    """An eager float layer_norm puts `_LayerNorm`'s node on the tape through `record_one` (Function.apply's steps
    left out): the values and gradients of `_LayerNorm.apply`, under saved-tensor hooks and anomaly mode too; no
    node where nothing requires grad."""
    from fnx.autograd.function import Function
    from fnx.autograd.graph import saved_tensors_hooks
    from fnx.nn.functional_norm import _LayerNorm

    applied = []
    monkeypatch.setattr(Function, "apply", classmethod(lambda cls, *a: applied.append(cls) or None))
    rng = np.random.default_rng(5)
    x, w, b = rng.standard_normal((4, 6)), rng.standard_normal(6), rng.standard_normal(6)
    ts = [fnx.tensor(a, requires_grad=(grads == "input") == (i == 0) and grads != "none") for i, a in enumerate((x, w, b))]
    packed = []
    with saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t), fnx.autograd.detect_anomaly():
        y = F.layer_norm(ts[0], (6,), ts[1], ts[2])
    assert applied == []
    if grads == "none":
        assert y.grad_fn is None and not y.requires_grad
        return
    assert y.grad_fn.fn is _LayerNorm and y.grad_fn.stack and len(packed) == 4
    g = fnx.tensor(rng.standard_normal((4, 6)))
    monkeypatch.undo()
    want_ts = [fnx.tensor(a, requires_grad=t.requires_grad) for a, t in zip((x, w, b), ts)]
    want = _LayerNorm.apply(*want_ts, (1,), 1e-5)
    np.testing.assert_array_equal(y.detach().numpy(), want.detach().numpy())
    got = fnx.autograd.grad(y, [t for t in ts if t.requires_grad], g)
    expected = fnx.autograd.grad(want, [t for t in want_ts if t.requires_grad], g)
    for a, e in zip(got, expected):
        np.testing.assert_array_equal(a.numpy(), e.numpy())
