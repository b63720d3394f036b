"""Generic checks over the whole op table (op_db.py): values, gradients, double backward."""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fnx
from op_db import all_ops

OPS = all_ops()
# Examples per op and check: the table's ~600 ops under four checks here were half the suite's time at the
# profile's 25 (derandomized, so every run checks the same examples)
TABLE_EXAMPLES = 12
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
@settings(max_examples=TABLE_EXAMPLES)
@given(data=st.data())
def test_value_matches_numpy(info, data):
    sample = data.draw(info.samples)
    for dtype in info.dtypes:
        args = [a.astype(dtype) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a for a in sample.args]
        expected = as_list(info.ref(*args, **sample.kwargs))
        got = as_list(info.op(*to_tensors(sample.args, dtype), **sample.kwargs))
        assert len(got) == len(expected), f"{info.name}: {len(got)} outputs, reference has {len(expected)}"
        tol = (info.rtol, info.atol) if dtype == "float64" else (
            max(info.rtol, 1e-4), max(info.atol, 1e-5, info.extra.get("float32_atol", 0.0)))
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
@settings(max_examples=TABLE_EXAMPLES)
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
@settings(max_examples=TABLE_EXAMPLES)
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
@settings(max_examples=TABLE_EXAMPLES)
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


# ---------------------------------------------------------------- powers with a constant exponent
X = np.array([-2.0, -0.5, 0.0, 0.7, 3.0])
SECOND_DERIVATIVES = {"hessian": fnx.hessian, "rev_rev": lambda f: fnx.jacrev(fnx.jacrev(f)),
                      "fwd_fwd": lambda f: fnx.jacfwd(fnx.jacfwd(f))}


@pytest.mark.parametrize("how", SECOND_DERIVATIVES)
@pytest.mark.parametrize("exponent", [3, 3.0, "tensor"])
def test_hessian_of_a_piecewise_power_is_finite_everywhere(how, exponent):
    """No exponent gradient of a constant exponent is formed (a Python number at any order; a constant tensor's
    zero tangent contributes exactly zero), so the unused branch of the `where` gives no NaN for x < 0."""
    y = fnx.tensor(3.0, dtype=fnx.float64) if exponent == "tensor" else exponent
    f = lambda x: fnx.where(x > 0, x ** y, fnx.sin(x)).sum()  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        h = SECOND_DERIVATIVES[how](f)(fnx.tensor(X)).numpy()
    np.testing.assert_allclose(h, np.diag(np.where(X > 0, 6 * X, -np.sin(X))), rtol=1e-12, atol=1e-12)


def test_eager_double_backward_of_a_piecewise_power():
    x = fnx.tensor(X, requires_grad=True)
    (g,) = fnx.autograd.grad(fnx.where(x > 0, x ** 3, fnx.sin(x)).sum(), x, create_graph=True)
    (h,) = fnx.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), np.where(X > 0, 6 * X, -np.sin(X)), rtol=1e-12, atol=1e-12)


def test_integer_powers_at_negative_points_are_exact_at_every_order_without_warnings():
    x = fnx.tensor(X)
    cube = lambda x: (x ** 3).sum()  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        d1 = fnx.grad(cube)(x)
        _, t = fnx.jvp(lambda x: x ** 3, (x,), (fnx.ones_like(x),))
        d3 = fnx.grad(lambda x: fnx.grad(lambda x: fnx.grad(cube)(x).sum())(x).sum())(x)
        d4 = fnx.grad(lambda x: fnx.grad(lambda x: fnx.grad(lambda x: fnx.grad(cube)(x).sum())(x).sum())(x).sum())(x)
        xr = fnx.tensor(X, requires_grad=True)
        (xr ** 3).sum().backward()
    for got in (d1, t, xr.grad):
        np.testing.assert_array_equal(got.numpy(), 3 * X ** 2)
    np.testing.assert_array_equal(d3.numpy(), np.full(5, 6.0))
    np.testing.assert_array_equal(d4.numpy(), np.zeros(5))


@pytest.mark.parametrize("exponent,prim", [(3, "integer_pow[y=3]"), (-2.0, "integer_pow[y=-2]"),
                                           (2.5, "pow_scalar[y=2.5]"), (0.5, "sqrt"), (-0.5, "sqrt"),
                                           (17, "pow_scalar[y=17.0]")])
def test_constant_exponents_stage_no_exponent_operand_and_no_log(exponent, prim):
    x = fnx.tensor([0.5, 2.0])
    assert prim in str(fnx.make_jaxpr(lambda x: x ** exponent)(x))
    text = str(fnx.make_jaxpr(fnx.hessian(lambda x: (x ** exponent).sum()))(x))
    assert " pow " not in text and "log" not in text


def test_special_constant_exponents():
    x = fnx.tensor([-2.0, 0.0, 4.0, float("nan")])
    assert (x ** 0).tolist()[:3] == [1.0, 1.0, 1.0] and (x ** 0).tolist()[3] == 1.0   # as numpy and PyTorch
    y = x ** 1
    assert y is not x and y.dtype is fnx.float32
    y.add_(1.0)
    assert x.tolist()[:3] == [-2.0, 0.0, 4.0]
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal((x ** 0.5).numpy(), np.sqrt(x.numpy()))
        np.testing.assert_array_equal((x ** -0.5).numpy(), 1 / np.sqrt(x.numpy()))
        np.testing.assert_allclose((x ** 20).numpy(), x.numpy().astype(np.float64) ** 20, rtol=1e-6)
    assert fnx.grad(lambda x: (x ** 0).sum())(x[:3]).tolist() == [0.0, 0.0, 0.0]
    i = fnx.tensor([1, 2, 3])
    assert (i ** 2).tolist() == [1, 4, 9] and (i ** 2).dtype is fnx.int64 and (i ** 20).tolist()[1] == 2 ** 20
    assert (i ** 2.0).dtype is fnx.float32 and (fnx.tensor([True, False]) ** 2).dtype is fnx.int64
    assert fnx.float_power(fnx.ones(2), 3).dtype is fnx.float64
    assert (2.0 ** fnx.tensor([1.0, 3.0])).tolist() == [2.0, 8.0]


def test_compiled_integer_powers_are_multiplications_equal_to_eager():
    x = fnx.tensor(np.linspace(-3.0, 3.0, 65, dtype=np.float32))   # 0 included: x ** -n is inf in both
    powers = lambda x: [x ** n for n in range(-16, 17)]  # noqa: E731
    cf = fnx.compile(powers, backend="c")
    with np.errstate(divide="ignore"):
        got, want = cf(x), powers(x)
    for n, g, w in zip(range(-16, 17), got, want):
        np.testing.assert_array_equal(g.numpy(), w.numpy(), err_msg=f"x ** {n}")
    cube = fnx.compile(lambda x: x ** 3, backend="c")
    cube(x)
    source = "".join(k.source for k in cube.kernels())
    assert "pow(" not in source and "powf(" not in source and re.search(r"\(\(v\d+ \* v\d+\) \* v\d+\)", source), source
    i = fnx.tensor([-3, 2, 7], dtype=fnx.int32)
    assert fnx.compile(lambda i: i ** 5, backend="c")(i).tolist() == (i ** 5).tolist() == [-243, 32, 16807]


def test_tensor_exponent_gradient_is_nan_only_where_undefined():
    x = fnx.tensor([-2.0, 0.0, 0.0, 1.5], dtype=fnx.float64, requires_grad=True)
    y = fnx.tensor([3.0, 2.0, -1.0, 2.5], dtype=fnx.float64, requires_grad=True)
    with np.errstate(divide="ignore"):
        gx, gy = fnx.autograd.grad((x ** y).sum(), [x, y])
    # d/dy x**y = x**y log x: 0 at x == 0 for y >= 0 (the limit), -inf there for y < 0, undefined for x < 0
    np.testing.assert_array_equal(gy.numpy(), [np.nan, 0.0, -np.inf, 1.5 ** 2.5 * np.log(1.5)])
    np.testing.assert_allclose(gx.numpy(), [12.0, 0.0, -np.inf, 2.5 * 1.5 ** 1.5])


@pytest.mark.parametrize("n", [7, 5000])   # numpy's clip, and the compiled kernel on the same values
def test_clamp_by_numbers_keeps_nan_and_signed_zero_and_passes_the_gradient_at_the_bounds(n):
    """clamp(x, lo, hi) as numpy's clip: NaN stays NaN, -0.0 at a bound of 0 stays -0.0, lo > hi gives hi; the
    gradient passes where lo <= x <= hi (the bounds included, NaN not), as in PyTorch; compiled gives its bits."""
    x = np.resize(np.array([np.nan, -0.0, 0.0, -2.0, 5.0, 0.5, 1.0], np.float32), n)
    t = fnx.tensor(x, requires_grad=True)
    y = fnx.clamp(t, 0.0, 1.0)
    np.testing.assert_array_equal(y.detach().numpy().view(np.uint32), np.clip(x, 0.0, 1.0).view(np.uint32))
    y.sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), np.resize([0.0, 1, 1, 0, 0, 1, 1], n))
    compiled = fnx.compile(lambda v: fnx.clamp(v, 0.0, 1.0))(t.detach()).numpy()
    np.testing.assert_array_equal(compiled.view(np.uint32), y.detach().numpy().view(np.uint32))
    np.testing.assert_array_equal(fnx.clamp(t.detach(), 2.0, 1.0).numpy(), np.where(np.isnan(x), x, 1.0))
    assert fnx.clamp(fnx.tensor([3, -4]), 0, 2).tolist() == [2, 0]   # integers keep their dtype


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("other", [0.0, -0.0, 2.5])
def test_large_where_selects_bits_exactly_as_numpy(dtype, other):
    """Large float selects take the eager C loop (a branch of the condition's shape or one element) or a branch-free
    bitwise path (a shorter branch): every bit equals numpy's where, with NaN, inf and -0.0 among the values."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 5000)).astype(dtype)
    x[0, :4] = [np.nan, np.inf, -np.inf, -0.0]
    c = rng.random((3, 5000)) > 0.5
    for cond, a in [(c, x), (c[0], x), (c, x[0])]:
        got = fnx.where(fnx.tensor(cond), fnx.tensor(a), fnx.tensor(np.asarray(other, dtype))).numpy()
        want = np.where(cond, a, np.asarray(other, dtype))
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
