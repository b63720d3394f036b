"""Generic checks over the whole op table (op_db.py): values, gradients, double backward."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

import fnx
from op_db import all_ops

OPS = all_ops()
GRAD_OPS = [op for op in OPS if op.grad]
DOUBLE_OPS = [op for op in OPS if op.double_grad]


def to_tensors(args, dtype: str, requires_grad: bool = False):
    out = []
    for a in args:
        if isinstance(a, np.ndarray):
            if a.dtype.kind == "f":
                t = fnx.tensor(a.astype(dtype))
                if requires_grad:
                    t.requires_grad_(True)
            else:
                t = fnx.tensor(a)
            out.append(t)
        else:
            out.append(a)
    return out


def as_list(out) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def to_numpy(x):
    return x.detach().numpy() if isinstance(x, fnx.Tensor) else np.asarray(x)


def first_float(out):
    """The first floating output of an op (values of a (values, indices) pair)."""
    for o in as_list(out):
        if isinstance(o, fnx.Tensor) and o.dtype.is_floating_point:
            return o
    return None


@pytest.mark.parametrize("info", [op for op in OPS if op.ref is not None], ids=repr)
@given(data=st.data())
def test_value_matches_numpy(info, data):
    sample = data.draw(info.samples)
    for dtype in info.dtypes:
        args = [a.astype(dtype) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a for a in sample.args]
        expected = as_list(info.ref(*args, **sample.kwargs))
        got = as_list(info.op(*to_tensors(sample.args, dtype), **sample.kwargs))
        assert len(got) == len(expected), f"{info.name}: {len(got)} outputs, reference has {len(expected)}"
        tol = (info.rtol, info.atol) if dtype == "float64" else (max(info.rtol, 1e-4), max(info.atol, 1e-5))
        for g, e in zip(got, expected):
            g, e = to_numpy(g), np.asarray(e)
            assert g.shape == e.shape, f"{info.name}[{dtype}]: shape {g.shape} != reference {e.shape}"
            if e.dtype.kind == "b" or g.dtype.kind == "b":
                np.testing.assert_array_equal(g, e, err_msg=f"{info.name}[{dtype}]")
            else:
                np.testing.assert_allclose(g.astype(np.float64), e.astype(np.float64), rtol=tol[0], atol=tol[1],
                                           err_msg=f"{info.name}[{dtype}]")


def _directional(info, sample, rng):
    """Analytic and central-difference values of <g, J v> at the sample point (float64)."""
    args = to_tensors(sample.args, "float64", requires_grad=True)
    diff = [i for i, a in enumerate(args) if isinstance(a, fnx.Tensor) and a.requires_grad]
    out = first_float(info.op(*args, **sample.kwargs))
    assert out is not None, f"{info.name}: no floating output to differentiate"
    if not diff or out.numel() == 0:
        return None
    g = fnx.tensor(rng.standard_normal(tuple(out.shape)))
    grads = fnx.autograd.grad(out, [args[i] for i in diff], g, allow_unused=True)
    vs = [rng.standard_normal(tuple(args[i].shape)) for i in diff]
    analytic = sum(float((gr.numpy() * v).sum()) for gr, v in zip(grads, vs) if gr is not None)

    def f(sign):
        shifted = list(sample.args)
        for i, v in zip(diff, vs):
            shifted[i] = np.asarray(sample.args[i] + sign * info.fd_eps * v)
        with fnx.no_grad():
            o = first_float(info.op(*to_tensors(shifted, "float64"), **sample.kwargs))
        return float((o.numpy() * g.numpy()).sum())

    numeric = (f(1) - f(-1)) / (2 * info.fd_eps)
    return analytic, numeric


@pytest.mark.parametrize("info", GRAD_OPS, ids=repr)
@given(data=st.data())
def test_gradient_matches_finite_differences(info, data):
    sample = data.draw(info.samples)
    rng = np.random.default_rng(0)
    got = _directional(info, sample, rng)
    if got is None:
        return
    analytic, numeric = got
    assert analytic == pytest.approx(numeric, rel=info.grad_rtol, abs=info.grad_atol * 10), info.name


@pytest.mark.parametrize("info", DOUBLE_OPS, ids=repr)
@given(data=st.data())
def test_double_backward(info, data):
    """d/dx <grad_x <f(x), g>, w> against central differences of the first gradient."""
    sample = data.draw(info.samples)
    rng = np.random.default_rng(1)
    args = to_tensors(sample.args, "float64", requires_grad=True)
    diff = [i for i, a in enumerate(args) if isinstance(a, fnx.Tensor) and a.requires_grad]
    out = first_float(info.op(*args, **sample.kwargs))
    g = fnx.tensor(rng.standard_normal(tuple(out.shape)))
    ws = [fnx.tensor(rng.standard_normal(tuple(args[i].shape))) for i in diff]
    vs = [rng.standard_normal(tuple(args[i].shape)) for i in diff]

    def h(arrays, create_graph):
        ts = to_tensors(arrays, "float64", requires_grad=True)
        o = first_float(info.op(*ts, **sample.kwargs))
        gr = fnx.autograd.grad(o, [ts[i] for i in diff], g, create_graph=create_graph, allow_unused=True)
        total = sum((x * w).sum() for x, w in zip(gr, ws) if x is not None)
        return total, ts

    total, ts = h(sample.args, True)
    if not isinstance(total, fnx.Tensor) or not total.requires_grad:
        return
    second = fnx.autograd.grad(total, [ts[i] for i in diff], allow_unused=True)
    analytic = sum(float((s.numpy() * v).sum()) for s, v in zip(second, vs) if s is not None)
    eps = 1e-5

    def shifted(sign):
        arr = list(sample.args)
        for i, v in zip(diff, vs):
            arr[i] = np.asarray(sample.args[i] + sign * eps * v)
        return float(h(arr, False)[0].detach().numpy())

    numeric = (shifted(1) - shifted(-1)) / (2 * eps)
    assert analytic == pytest.approx(numeric, rel=1e-4, abs=1e-6), info.name


@pytest.mark.parametrize("info", GRAD_OPS, ids=repr)
@given(data=st.data())
def test_jvp_matches_vjp(info, data):
    """<g, J v> from forward mode equals <J^T g, v> from the tape."""
    sample = data.draw(info.samples)
    rng = np.random.default_rng(2)
    args = to_tensors(sample.args, "float64", requires_grad=True)
    diff = [i for i, a in enumerate(args) if isinstance(a, fnx.Tensor) and a.requires_grad]
    out = first_float(info.op(*args, **sample.kwargs))
    if not diff or out.numel() == 0:
        return
    g = fnx.tensor(rng.standard_normal(tuple(out.shape)))
    vs = [fnx.tensor(rng.standard_normal(tuple(args[i].shape))) for i in diff]
    grads = fnx.autograd.grad(out, [args[i] for i in diff], g, allow_unused=True)
    reverse = sum(float((gr * v).sum()) for gr, v in zip(grads, vs) if gr is not None)

    def f(*ds):
        full = list(args)
        for i, d in zip(diff, ds):
            full[i] = d
        return first_float(info.op(*full, **sample.kwargs))

    with fnx.no_grad():
        _, tangent = fnx.jvp(f, [args[i].detach() for i in diff], vs)
    forward = float((tangent * g).sum())
    assert forward == pytest.approx(reverse, rel=1e-7, abs=1e-9), info.name
