"""fnx.compile: compile vs eager over the op table, the signature cache and its log, compile as a primitive under
every transform, eager backward through compiled code, control flow, pytrees, modules and inspection."""
from __future__ import annotations

import logging
import sys
import types
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fnx
import fnx.nn.functional as F
from fnx.ir import ClosedJaxpr, verify_jaxpr
from fnx.lowering import default_backend, lower
from fnx.lowering.interpret import Interpreted
from fnx.transforms import compile as compile_module
from fnx.transforms.compile import compile, jit
from fnx import _jax as fnx_jax


@pytest.fixture(autouse=True)
def _quiet_fallback():
    """The default backend may fall back to the interpreter with a warning; that is tested separately."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def x64(*values):
    return fnx.tensor(np.asarray(values, dtype=np.float64))


def counting(fn):
    """`fn` plus a list that grows by one each time it runs (i.e. each trace, under compile)."""
    calls = []

    def wrapped(*args, **kwargs):
        calls.append(1)
        return fn(*args, **kwargs)

    return wrapped, calls


def assert_close(got, expected, exact: bool = True, rtol: float = 1e-5, atol: float = 1e-6):
    g, e = fnx.tree.tree_leaves(got), fnx.tree.tree_leaves(expected)
    assert len(g) == len(e)
    for a, b in zip(g, e):
        assert tuple(a.shape) == tuple(b.shape) and a.dtype == b.dtype
        if exact or not b.dtype.is_floating_point:
            np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
        else:
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=rtol, atol=atol)


# ---------------------------------------------------------------- the op table
from op_db import as_tensor_function, stageable_ops  # noqa: E402

_COMPILABLE = stageable_ops()
# the default backend generates code per op: a cross-section of the families keeps this file fast
_DEFAULT_SUBSET = {"neg", "exp", "log1p", "tanh", "sigmoid", "gelu", "erf", "add", "mul", "div", "pow", "maximum",
                   "where", "eq", "clamp", "sum", "mean", "var", "amax", "argmax", "logsumexp", "cumsum", "matmul",
                   "reshape", "permute", "cat", "gather", "sort", "pad", "getitem_basic"}


def _compile_sample(info, data, backend, exact):
    sample = data.draw(info.samples)
    op, tensors = as_tensor_function(info, sample)
    if not tensors:
        return
    exact = exact and not info.extra.get("own_eager_form")   # its eager form rounds its own way
    assert_close(compile(op, backend=backend)(*tensors), op(*tensors), exact=exact, rtol=max(info.rtol, 1e-4),
                 atol=max(info.atol, 1e-5))


@pytest.mark.parametrize("info", _COMPILABLE, ids=repr)
@settings(max_examples=2)
@given(data=st.data())
def test_op_table_interpreted_matches_eager_exactly(info, data):
    _compile_sample(info, data, "interpret", exact=True)


@pytest.mark.parametrize("info", [op for op in _COMPILABLE if op.name in _DEFAULT_SUBSET], ids=repr)
@settings(max_examples=2)
@given(data=st.data())
def test_op_table_default_backend_matches_eager(info, data):
    _compile_sample(info, data, None, exact=False)


# ---------------------------------------------------------------- the op table in float32, against float64
from numerics_measure import op_table_errors  # noqa: E402

# How far compiled float32 results may be from eager float64 on the same values, by what computes them, in
# float32 ulps of the scale the op works at (numerics_measure.op_table_errors). The bounds hold on any CPU;
# `python -m benchmarks.numerics_report` prints a machine's figures.
#   exact (every op not listed): eager's bits. Data movement, selection (max, sort, median, where), counting,
#       comparisons, integer math, and float arithmetic whose every step is one correctly rounded IEEE
#       operation (kernels are built without FMA contraction) come out alike on every CPU.
#   math: elementwise functions through libm, libmvec or fnx's expf, alone or composed with arithmetic (gelu,
#       silu, softplus): within OP_BOUNDS["math"] ulps of the largest input or result, whatever eager's
#       accuracy (numpy's float32 functions are 1-3 ulp off, differently on each SIMD level). Measured: up to
#       1.0 (silu: x times a rounded sigmoid, rounded again).
#   reductions: anything that adds (or multiplies) several values into one, from sums and norms to matrix
#       products, linear algebra and index accumulation, does so in an order that depends on the CPU (the
#       vector width of compiled reductions, the BLAS kernels): at most OP_BOUNDS["reductions"] ulps further
#       from float64 than eager is, in ulps of the reduction's magnitude (sum |x| for a sum, |A| |B| for a
#       matrix product), which its rounding errors scale with. The worst case is a sum of equal values, which
#       rounds the same way at every step: for the op table's up to 64 values, 4.5 ulps with 16 lanes (16
#       values added lane by lane), 3 with 8, 4 with 4, against numpy's 2 (pairwise); measured up to 2 more
#       than eager.
# torch.special's series, rational approximations and recurrences (tests/op_db_special.py)
SPECIAL_SERIES = {"special.erfcx", "special.zeta", "special.airy_ai", "special.spherical_bessel_j0"} | {
    f"special.{kind}bessel_{f}" for kind, fs in (("", "j0 j1 y0 y1"), ("modified_", "i0 i1 k0 k1"),
                                                 ("scaled_modified_", "k0 k1")) for f in fs.split()} | {
    f"special.{name}_polynomial_{k}" for name, ks in (("chebyshev", "tuvw"), ("shifted_chebyshev", "tuvw"),
                                                      ("hermite", ("h", "he")), ("laguerre", "l"), ("legendre", "p"))
    for k in ks}
OP_CLASSES = {
    "math": {"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "tanh", "sinh", "cosh",
             "asin", "acos", "atan", "asinh", "acosh", "atanh", "sigmoid", "gelu", "gelu_tanh", "gelu_backward", "gelu_tanh_backward", "silu", "silu_backward", "softplus", "erf", "erfc", "pow",
             "pow_2.5", "rpow", "atan2", "special.ndtr", "special.entr", "special.xlog1py", "scipy.special.xlog1py", "lax.scan", "lax.fori_loop",
             "lax.cond"},
    "reductions": {"sum", "mean", "var", "var_correction0", "std", "var_mean", "std_mean", "logsumexp", "prod",
                   "cumsum", "cumprod", "cumprod_nonzero", "norm_fro", "norm_2", "norm_1", "norm_3", "norm_1.5",
                   "nansum", "nanmean", "nanmean_nonan", "linalg.vector_norm", "linalg.matrix_norm", "linalg.norm",
                   "trace", "matmul", "mm", "bmm", "dot", "mv", "inner", "addmm", "baddbmm", "tensordot", "einsum",
                   "linalg.solve", "linalg.solve_vector", "linalg.solve_right", "linalg.inv", "linalg.cholesky",
                   "linalg.cholesky_upper", "linalg.det", "linalg.slogdet", "linalg.slogdet_logabsdet",
                   "linalg.matrix_power", "linalg.cond", "linalg.cond_norms", "linalg.multi_dot",
                   "linalg.multi_dot_vectors", "linalg.solve_triangular", "linalg.solve_triangular_right", "index_add", "scatter_add", "scatter_reduce_add", "index_put_accumulate",
                   "put_accumulate", "lax.dot_general", "lax.conv_general_dilated", "lax.reduce_window_add",
                   "lax.associative_scan", "scipy.special.logsumexp", "avg_pool2d", "logcumsumexp",
                   "scipy.stats.multivariate_normal.logpdf", "scipy.stats.beta.logpdf", "nn.softmax_axis",
                   # special functions: series and Newton iterations (their terms add up like a reduction's)
                   "lgamma", "lgamma_large", "digamma", "polygamma_1", "polygamma_3", "mvlgamma", "erfinv",
                   "erfinv_tails", "special.ndtri", "special.log_ndtr", "i0", "special.i0e", "special.i1",
                   "special.i1e", *SPECIAL_SERIES,
                   # linalg gaps: products with an addend, chains, reflectors, the solver family's new names
                   "addmv", "addmv_beta0", "addr", "addbmm", "chain_matmul", "ormqr", "frobenius_norm",
                   "linalg.cholesky_ex", "linalg.inv_ex", "linalg.solve_ex", "linalg.solve_ex_vector", "cholesky",
                   "cholesky_solve", "cholesky_inverse", "triangular_solve", "linalg.tensorinv", "linalg.tensorsolve",
                   "linalg.ldl_solve"},
}
OP_BOUNDS = {"math": 2, "reductions": 8}   # math: compiled vs float64; reductions: compiled minus eager vs float64


def test_op_classes_name_op_table_ops():
    assert set.union(*OP_CLASSES.values()) <= {op.name for op in _COMPILABLE}
    assert not set.intersection(*OP_CLASSES.values()) and set(OP_CLASSES) == set(OP_BOUNDS)


@pytest.mark.parametrize("info", _COMPILABLE, ids=repr)
@settings(max_examples=3)
@given(data=st.data())
def test_op_table_c_backend_float32_within_bounds_of_float64(info, data):
    kind = info.extra.get("numerics") or next((k for k, names in OP_CLASSES.items() if info.name in names), "exact")
    errors = op_table_errors(info, data.draw(info.samples), reduction=kind == "reductions")
    if errors is None:
        return
    assert errors.exact_outputs_agree, f"{info.name}: integer or bool outputs differ from eager"
    if kind == "exact":
        assert errors.bitwise, f"{info.name}: not eager's bits"
    elif kind == "math":
        assert errors.compiled <= OP_BOUNDS["math"], f"{info.name}: {errors.compiled:.2f} ulp from float64"
    else:
        assert errors.compiled <= errors.eager + OP_BOUNDS["reductions"], \
            f"{info.name}: {errors.compiled:.2f} ulp from float64, eager {errors.eager:.2f}"


def _mlp_loss(w1, b1, w2, x, y):
    h = F.gelu(F.layer_norm(x @ w1 + b1, (4,)))
    return F.cross_entropy(F.log_softmax(h @ w2, -1), y) + fnx.logsumexp(h, -1).mean() + F.softmax(h, 0).sum()


@pytest.mark.parametrize("backend", ["interpret", None])
def test_nn_composites_forward_and_backward(backend):
    rng = np.random.default_rng(0)
    args = [fnx.tensor(rng.standard_normal(s).astype(np.float32)) for s in [(3, 4), (4,), (4, 3), (5, 3)]]
    args.append(fnx.tensor([0, 2, 1, 1, 0]))
    exact = backend == "interpret"
    assert_close(compile(_mlp_loss, backend=backend)(*args), _mlp_loss(*args), exact=exact)
    grads = fnx.grad(_mlp_loss, argnums=(0, 1, 2))
    assert_close(compile(grads, backend=backend)(*args), grads(*args), exact=exact, rtol=1e-4)


# ---------------------------------------------------------------- the signature cache
def test_same_signature_does_not_retrace():
    f, calls = counting(lambda x, y: fnx.sin(x) * y)
    cf = compile(f, backend="interpret")
    for _ in range(3):
        cf(fnx.ones(3), fnx.ones(3))
    assert len(calls) == 1
    cf(fnx.ones(4), fnx.ones(4))
    cf(fnx.ones(4), fnx.ones(4))
    assert len(calls) == 2
    cf(fnx.ones(3), fnx.ones(3))
    cf(fnx.ones(3, dtype=fnx.float64), fnx.ones(3, dtype=fnx.float64))
    assert len(calls) == 3
    assert_close(cf(x64(1, 2), x64(3, 4)), fnx.sin(x64(1, 2)) * x64(3, 4))


def test_static_arguments_are_part_of_the_key():
    def f(x, n, scale=1.0):
        for _ in range(n):
            x = x * scale
        return x

    f, calls = counting(f)
    cf = compile(f, static_argnums=1, static_argnames="scale", backend="interpret")
    assert_close(cf(fnx.ones(2), 3, scale=0.5), fnx.ones(2) * 0.125)
    cf(fnx.ones(2), 3, scale=0.5)
    assert len(calls) == 1
    cf(fnx.ones(2), 2, scale=0.5)
    cf(fnx.ones(2), 2, scale=2.0)
    assert len(calls) == 3
    assert len(cf.lower(fnx.ones(2), 2, scale=2.0).jaxpr.in_avals) == 1
    by_name = compile(f, static_argnames="n", backend="interpret")   # the name also covers the position
    assert_close(by_name(fnx.ones(2), 2, 3.0), fnx.ones(2) * 9.0)


def test_static_arguments_must_be_hashable_values():
    cf = compile(lambda x, shape: x.reshape(shape), static_argnums=1, backend="interpret")
    assert cf(fnx.ones(4), (2, 2)).shape == (2, 2)
    with pytest.raises(TypeError, match="argument 1 .*static.*hashable.*list"):
        cf(fnx.ones(4), [2, 2])
    with pytest.raises(TypeError, match="static.*Tensor"):
        cf(fnx.ones(4), fnx.ones(2))


def test_python_values_in_arguments_are_specialised():
    f, calls = counting(lambda x, s: x * s)
    cf = compile(f, backend="interpret")
    assert_close(cf(fnx.ones(2), 2.0), fnx.ones(2) * 2.0)
    cf(fnx.ones(2), 2.0)
    cf(fnx.ones(2), 3.0)
    assert len(calls) == 2
    assert_close(cf(fnx.ones(2), np.full(2, 2.0)), fnx.full((2,), 2.0, dtype=fnx.float64))   # numpy: an input
    assert_close(cf(fnx.ones(2), np.full(2, 3.0)), fnx.full((2,), 3.0, dtype=fnx.float64))
    assert len(calls) == 3
    with pytest.raises(TypeError, match="fnx.tensor"):
        cf(fnx.ones(2), bytearray(2))


def test_keyword_arguments_and_their_names():
    f, calls = counting(lambda x, y=None, z=None: x * 2.0 if y is None else x + y)
    cf = compile(f, backend="interpret")
    assert_close(cf(fnx.ones(2), y=fnx.ones(2)), fnx.ones(2) * 2.0)
    cf(fnx.ones(2), y=fnx.ones(2))
    assert len(calls) == 1
    assert_close(cf(fnx.ones(2), z=fnx.ones(2)), fnx.ones(2) * 2.0)
    assert len(calls) == 2


def test_pytree_arguments_and_outputs():
    f, calls = counting(lambda p, xs: {"out": p["w"] * xs[0] + xs[1], "n": (xs[0].sum(),)})
    cf = compile(f, backend="interpret")
    p, xs = {"w": fnx.tensor([1.0, 2.0])}, [fnx.ones(2), fnx.zeros(2)]
    assert_close(cf(p, xs), f(p, xs))
    cf({"w": fnx.tensor([3.0, 4.0])}, [fnx.ones(2), fnx.ones(2)])
    assert len(calls) == 2   # one trace and the eager reference
    cf(p, (fnx.ones(2), fnx.zeros(2)))   # a tuple instead of a list: another structure
    assert len(calls) == 3


def test_modules_are_pytree_arguments():
    fnx.manual_seed(0)
    model = fnx.nn.Linear(3, 2)
    x = fnx.ones(4, 3)

    def loss(m, x):
        return (m(x) ** 2).mean()

    f, calls = counting(loss)
    cf = compile(f, backend="interpret")
    assert_close(cf(model, x), loss(model, x))
    cf(fnx.nn.Linear(3, 2), x)
    g = fnx.grad(cf)(model, x)
    assert len(calls) == 1   # another Linear of the same shapes, and tracers of the same types, hit the cache
    expected = fnx.grad(loss)(model, x)
    assert_close(g.weight, expected.weight, exact=False)
    assert_close(g.bias, expected.bias, exact=False)


def test_non_tensor_outputs_are_rejected():
    with pytest.raises(TypeError, match="pytrees of Tensors"):
        compile(lambda x: (x, 3), backend="interpret")(fnx.ones(2))


def test_function_without_inputs():
    cf = compile(lambda: fnx.ones(3) * 2.0, backend="interpret")
    assert_close(cf(), fnx.ones(3) * 2.0)
    assert_close(fnx.make_jaxpr(lambda x: x + cf())(fnx.ones(3))(fnx.ones(3)), [fnx.ones(3) * 3.0])


# ---------------------------------------------------------------- FNX_LOG=compile
def test_log_traces_hits_and_recompilation_reasons(caplog):
    caplog.set_level(logging.DEBUG, logger="fnx.compile")

    def scaled(x, n):
        return x * n

    cf = compile(scaled, static_argnums=1, backend="interpret")
    cf(fnx.ones(3), 2)
    cf(fnx.ones(3), 2)
    cf(fnx.ones(4), 2)
    cf(fnx.ones(4, dtype=fnx.float64), 2)
    cf(fnx.ones(4, dtype=fnx.float64), 5)
    text = "\n".join(r.getMessage() for r in caplog.records if r.name == "fnx.compile")
    assert "tracing scaled for (x: float32[3], n: 2)" in text
    assert "cache hit for scaled (x: float32[3], n: 2)" in text
    assert "argument 0 (x): shape (3,) -> (4,)" in text
    assert "argument 0 (x): dtype float32 -> float64" in text
    assert "argument 1 (n): value 2 -> 5" in text
    assert text.count("recompiling") == 3
    caplog.clear()
    unmarked = compile(scaled, backend="interpret")   # a Python number that is not marked static: specialised too
    unmarked(fnx.ones(3), 2.5)
    unmarked(fnx.ones(3), 0.5)
    text = "\n".join(r.getMessage() for r in caplog.records if r.name == "fnx.compile")
    assert "tracing scaled for (x: float32[3], n: 2.5)" in text
    assert "(x: float32[3], n: 0.5): argument 1 (n): value 2.5 -> 0.5" in text


def test_log_structure_changes(caplog):
    caplog.set_level(logging.INFO, logger="fnx.compile")
    cf = compile(lambda xs: xs[0], backend="interpret")
    cf([fnx.ones(2)])
    cf((fnx.ones(2),))
    assert any("argument 0 (xs): structure" in r.getMessage() for r in caplog.records)


def _recompile_warnings(f, calls) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for args in calls:
            f(*args)
    return [str(w.message) for w in caught if "recompiled" in str(w.message)]


def test_a_python_number_that_keeps_changing_warns_once_at_the_eighth_recompilation():
    def step(w, lr):
        return w - lr * w

    f = compile(step, backend="interpret")
    w = fnx.ones(3)
    assert _recompile_warnings(f, [(w, 0.1 * k) for k in range(8)]) == []   # a trace and 7 recompilations
    (message,) = _recompile_warnings(f, [(w, 0.1 * k) for k in range(8, 20)])
    assert "step has recompiled 8 times; argument 1 (lr) keeps changing" in message
    assert "value 0.7000000000000001 -> 0.8" in message and "0-dim tensor" in message
    assert "static_argnums" in message and "FNX_LOG=compile" in message
    lr = fnx.tensor(0.1)
    g = compile(step, backend="interpret")   # the advice taken: one trace, whatever the value
    assert _recompile_warnings(g, [(w, lr.fill_(0.1 * k)) for k in range(20)]) == []


def test_the_recompilation_warning_names_the_argument_that_changes_most_and_how():
    f = compile(lambda x, y: x.sum() + y.sum(), backend="interpret")
    y = fnx.ones(2)
    calls = [(fnx.ones(n), y if n % 4 else fnx.ones(2, dtype=fnx.float64)) for n in range(1, 10)]
    (message,) = _recompile_warnings(f, calls)
    assert "argument 0 (x) keeps changing (last: argument 0 (x): shape (8,) -> (9,))" in message
    assert "keep its shape fixed" in message
    f.clear_cache()   # starts the count again
    assert len(_recompile_warnings(f, calls)) == 1


def test_fnx_log_environment_variable_turns_the_log_on(monkeypatch):
    log = logging.getLogger("fnx.compile")
    level, handlers = log.level, list(log.handlers)
    monkeypatch.setenv("FNX_LOG", "ops,compile")
    try:
        compile_module._configure_logging()
        assert log.isEnabledFor(logging.DEBUG)
    finally:
        log.setLevel(level)
        log.handlers[:] = handlers


# ---------------------------------------------------------------- compile as a primitive, under transforms
def _f(x, y):
    return (fnx.tanh(x * 2.0 + y) * x).sum()


X, Y = x64(0.5, -1.0, 2.0), x64(0.1, 0.2, -0.3)


def test_grad_of_compiled_runs_a_compiled_vjp():
    cf = compile(_f, backend="interpret")
    assert_close(fnx.grad(cf, argnums=(0, 1))(X, Y), fnx.grad(_f, argnums=(0, 1))(X, Y), exact=False, rtol=1e-12)
    staged = fnx.make_jaxpr(fnx.grad(cf))(X, Y)
    assert [e.prim.name for e in staged.eqns].count("compiled_call") == 2   # forward and backward
    assert ("vjp",) in cf.lower(X, Y).jaxpr.derived


def test_compile_of_grad_and_of_vmap_of_grad():
    g = fnx.grad(_f)
    assert_close(compile(g, backend="interpret")(X, Y), g(X, Y), exact=False, rtol=1e-12)
    vg = fnx.vmap(g)
    xs, ys = X.reshape(3, 1) * X, Y.reshape(3, 1) + Y
    assert_close(compile(vg, backend="interpret")(xs, ys), vg(xs, ys), exact=False, rtol=1e-12)


def test_vmap_jvp_and_higher_derivatives_of_compiled():
    cf = compile(_f, backend="interpret")
    xs = X.reshape(3, 1) * X
    assert_close(fnx.vmap(cf)(xs, xs), fnx.vmap(_f)(xs, xs), exact=False, rtol=1e-12)
    assert_close(fnx.vmap(cf, in_axes=(0, None))(xs, Y), fnx.vmap(_f, in_axes=(0, None))(xs, Y), exact=False,
                 rtol=1e-12)
    assert_close(fnx.jvp(cf, (X, Y), (Y, X)), fnx.jvp(_f, (X, Y), (Y, X)), exact=False, rtol=1e-12)
    assert_close(fnx.hessian(cf)(X, Y), fnx.hessian(_f)(X, Y), exact=False, rtol=1e-10)
    assert_close(fnx.jacrev(fnx.grad(cf))(X, Y), fnx.jacrev(fnx.grad(_f))(X, Y), exact=False, rtol=1e-10)


def test_compiled_inside_compiled_and_make_jaxpr():
    cf = compile(_f, backend="interpret")
    staged = fnx.make_jaxpr(lambda x: cf(x, Y) * 2.0)(X)
    assert [e.prim.name for e in staged.eqns] == ["compiled_call", "mul"]
    verify_jaxpr(staged)
    outer = compile(lambda x: cf(x, Y) * 2.0, backend="interpret")
    assert "compiled_call" not in outer.lower(X).as_text()   # inlined by the optimiser
    assert_close(outer(X), _f(X, Y) * 2.0)


def test_capturing_a_value_of_an_enclosing_transform():
    def per_example(a):
        return compile(lambda y: y * a.sum(), backend="interpret")(fnx.ones(2))

    xs = X.reshape(3, 1) * X
    expected = fnx.vmap(lambda a: fnx.ones(2) * a.sum())(xs)
    assert_close(fnx.vmap(per_example)(xs), expected, exact=False)

    def loss(a):
        return compile(lambda y: (y * a.exp()).sum(), backend="interpret")(fnx.ones(3, dtype=fnx.float64))

    assert_close(fnx.grad(loss)(X), X.exp(), exact=False, rtol=1e-12)


# ---------------------------------------------------------------- eager autograd through a compiled function
def test_eager_backward_through_compiled_function():
    cf = compile(lambda x, y, i: (fnx.tanh(x * 2.0 + y) * x).sum() + x[i].sum(), backend="interpret")
    x, y = x64(0.5, -1.0, 2.0).requires_grad_(), x64(0.1, 0.2, -0.3)
    i = fnx.tensor([0, 0, 2])
    out = cf(x, y, i)
    assert out.grad_fn is not None and "compiled_call" in out.grad_fn.name
    out.backward()
    x2 = x64(0.5, -1.0, 2.0).requires_grad_()
    ((fnx.tanh(x2 * 2.0 + y) * x2).sum() + x2[i].sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), x2.grad.numpy(), rtol=1e-12)
    with fnx.no_grad():
        assert cf(x, y, i).grad_fn is None


def test_eager_backward_with_several_outputs_and_captured_parameters():
    fnx.manual_seed(0)
    model = fnx.nn.Linear(3, 2)
    cf = compile(lambda x: (model(x).sum(), model(x).exp()), backend="interpret")
    x = fnx.ones(4, 3)
    s, e = cf(x)
    (s + e.sum()).backward()
    w_grad, b_grad = model.weight.grad.numpy().copy(), model.bias.grad.numpy().copy()
    model.zero_grad()
    (model(x).sum() + model(x).exp().sum()).backward()
    np.testing.assert_allclose(w_grad, model.weight.grad.numpy(), rtol=1e-5)
    np.testing.assert_allclose(b_grad, model.bias.grad.numpy(), rtol=1e-5)


# ---------------------------------------------------------------- control flow
def test_python_control_flow_on_traced_values_raises_clearly_with_fullgraph():
    cf = compile(lambda x: x if x.sum() > 0 else -x, backend="interpret", fullgraph=True)
    with pytest.raises(fnx.errors.ConcretizationError, match="fnx.where.*fnx.cond.*static_argnums"):
        cf(fnx.ones(2))
    with pytest.raises(TypeError, match="bool\\(\\) needs a concrete value"):
        fnx_jax.jit(lambda x: x if x.sum() > 0 else -x)(fnx.ones(2))   # jax.jit raises, as JAX does


class _Lengths(fnx.nn.Module):
    """Reads its lengths in Python (as pack_padded_sequence does) and keeps running statistics."""

    def __init__(self):
        super().__init__()
        self.norm = fnx.nn.BatchNorm1d(5)

    def forward(self, x, lengths):
        y = self.norm(x)
        return fnx.stack([y[i, :n].sum(0) for i, n in enumerate(lengths.tolist())])


def test_a_graph_break_runs_that_signature_eagerly_after_one_warning():
    """torch.compile's graph break, at the granularity of a call: the signature whose trace needed a tensor's value
    runs eagerly (right values for every input, module state updated once per call, gradients on the tape); the
    warning names the user's line; a new signature traces again; lower() raises what stopped the trace."""
    cf = compile(lambda x: x if x.sum() > 0 else -x)
    with pytest.warns(UserWarning, match="tracing stopped at .*test_compile.py:[0-9]+ \\(<lambda>\\): bool"):
        assert_close(cf(X), X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_close(cf(-X), X)
    with pytest.raises(fnx.errors.ConcretizationError):
        cf.lower(X)
    fnx.manual_seed(0)
    model, twin = _Lengths(), _Lengths()
    twin.load_state_dict(model.state_dict())
    x, lengths = fnx.randn(4, 5, 3), fnx.tensor([5, 2, 3, 1])
    compiled = compile(model)
    with pytest.warns(UserWarning, match="tracing stopped at .*test_compile.py:[0-9]+ \\(forward\\): tolist"):
        compiled(x, lengths).sum().backward()
    twin(x, lengths).sum().backward()
    for (name, a), b in zip(model.state_dict().items(), twin.state_dict().values()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, err_msg=name)
    np.testing.assert_allclose(model.norm.weight.grad.numpy(), twin.norm.weight.grad.numpy(), rtol=1e-6)


def test_torch_compile_keywords():
    f = lambda x: fnx.tanh(x).sum()  # noqa: E731
    for kw in ({"mode": "max-autotune"}, {"mode": "reduce-overhead", "dynamic": False}, {"backend": "inductor"},
               {"options": {"trace.enabled": False}, "dynamic": True}):
        assert_close(compile(f, **kw)(X), f(X), exact=False, rtol=1e-6)
    assert compile(f, disable=True) is f
    assert compile(disable=True)(f) is f
    with pytest.raises(ValueError, match="unknown mode 'fastest'; expected one of None, 'default'"):
        compile(f, mode="fastest")
    with pytest.raises(ValueError, match="unknown backend 'eager'"):
        compile(f, backend="eager")


def test_structured_control_flow_compiles():
    def f(x):
        c = fnx.cond(x.sum() > 0, lambda a: a * 2.0, lambda a: a - 1.0, x)
        s, ys = fnx.scan(lambda carry, xi: (carry + xi, carry * xi), fnx.zeros((), dtype=fnx.float64), c)
        w = fnx.while_loop(lambda v: v.sum() < 20.0, lambda v: v * 2.0, x.abs() + 0.1)
        return fnx.fori_loop(0, 3, lambda i, v: v * 0.5, s) + ys.sum() + w.sum()

    cf = compile(f, backend="interpret")
    for x in (X, -X):
        assert_close(cf(x), f(x), exact=False, rtol=1e-12)
    names = [e.prim.name for e in cf.lower(X).jaxpr.eqns]
    assert {"cond", "scan", "while_loop"} <= set(names)
    g = lambda x: fnx.fori_loop(0, 3, lambda i, v: fnx.sin(v) * x, x).sum()  # noqa: E731
    assert_close(fnx.grad(compile(g, backend="interpret"))(X), fnx.grad(g)(X), exact=False, rtol=1e-12)


# ---------------------------------------------------------------- inspection, backends, API
def test_lowered_inspection():
    cf = compile(lambda x: (x * 1.0).exp() + 0.5, backend="interpret")
    with pytest.raises(RuntimeError, match="not been called"):
        cf.kernels()
    lowered = cf.lower(fnx.ones(3))
    assert isinstance(lowered.jaxpr, ClosedJaxpr)
    verify_jaxpr(lowered.jaxpr)
    assert lowered.as_text() == str(lowered.jaxpr) and "mul" not in lowered.as_text()
    assert lowered.kernels() == [] and lowered.source() == ""
    exe = lowered.compile()
    assert_close(exe(fnx.zeros(3))[0], fnx.ones(3) * 1.5)
    assert cf.kernels() == [] and cf.source() == ""


def test_default_backend_kernels_and_source_are_inspectable():
    cf = compile(lambda x: fnx.tanh(x) * 2.0)
    cf(fnx.ones(8))
    kernels = cf.kernels()
    assert isinstance(kernels, list)
    assert cf.source() == "".join(k.source for k in kernels) or all(k.name in cf.source() for k in kernels)


def test_backend_choice(monkeypatch):
    cpu = fnx.device("cpu")
    monkeypatch.delenv("FNX_BACKEND", raising=False)
    assert default_backend([cpu]) == "c"
    monkeypatch.setenv("FNX_BACKEND", "interpret")
    assert default_backend([cpu]) == "interpret"
    with pytest.raises(ValueError, match="unknown backend"):
        compile(lambda x: x, backend="llvm")


def test_lower_falls_back_to_the_interpreter_with_one_warning(monkeypatch):
    plan = types.ModuleType("fnx.lowering.plan")

    def build_executable(closed, *, backend):
        raise NotImplementedError("no kernel for primitive 'exp' (a test double)")

    plan.build_executable = build_executable
    monkeypatch.setitem(sys.modules, "fnx.lowering.plan", plan)
    closed = fnx.make_jaxpr(fnx.exp)(fnx.ones(2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exes = [lower(closed, backend="c") for _ in range(3)]
    assert all(isinstance(e, Interpreted) for e in exes)
    assert len([w for w in caught if "test double" in str(w.message)]) == 1
    assert_close(compile(fnx.exp, backend="c")(fnx.zeros(2)), fnx.ones(2))


def test_runtime_errors_are_fnx_errors():
    cf = compile(lambda x, i: x[i], backend="interpret")
    with pytest.raises(fnx.core.FnxIndexError, match="^index 5 is out of bounds for dimension 0 with size 3$"):
        cf(fnx.ones(3), fnx.tensor([5]))   # eager mode's error (tests/test_compile_indices.py)


def test_jit_decorator_forms_and_methods():
    @jit
    def f(x):
        return x + 1.0

    @jit(static_argnums=1)
    def g(x, n):
        return x * n

    class Scaler(fnx.nn.Module):
        def __init__(self):
            super().__init__()
            self.s = fnx.nn.Parameter(fnx.tensor([2.0]))

        @jit(backend="interpret")
        def forward(self, x):
            return x * self.s

    assert f.__name__ == "f" and repr(f).startswith("<fnx.compile of")
    assert_close(f(fnx.zeros(2)), fnx.ones(2))
    assert_close(g(fnx.ones(2), 3), fnx.ones(2) * 3.0)
    assert_close(Scaler()(fnx.ones(2)), fnx.ones(2) * 2.0, exact=False)


def test_donated_arguments_stay_valid():
    cf = compile(lambda x, y: x * y, donate_argnums=0, backend="interpret")
    x = fnx.ones(3)
    assert_close(cf(x, fnx.ones(3) * 2.0), fnx.ones(3) * 2.0)
    assert_close(x, fnx.ones(3))
    with pytest.raises(TypeError, match="both static and donated"):
        compile(lambda x: x, static_argnums=0, donate_argnums=0)


@pytest.mark.parametrize("backend", ["interpret", "c"])
def test_a_returned_constant_is_a_fresh_tensor_on_every_call(backend):
    f = compile(lambda x: (fnx.arange(3.0), x + 1), backend=backend)
    first, _ = f(fnx.ones(2))
    first.add_(10.0)
    again, _ = f(fnx.ones(2))
    assert again.tolist() == [0.0, 1.0, 2.0]


def test_a_lowered_computation_checks_the_signature_it_was_compiled_for():
    """`f.lower(x).compile()` runs code generated for x's shape and dtype: another signature is an error naming
    both (it read past the argument's buffer), as JAX's compiled object refuses it; the right one runs."""
    exe = fnx.compile(lambda x: fnx.exp(x) * 2).lower(fnx.ones(100)).compile()
    np.testing.assert_allclose(exe(fnx.zeros(100))[0].numpy(), np.full(100, 2.0))
    wrong = r"argument 0 is f32\[3\], but this computation was compiled for f32\[100\]"
    with pytest.raises(fnx.errors.FnxTypeError, match=wrong):
        exe(fnx.ones(3))
    with pytest.raises(fnx.errors.FnxTypeError, match=r"f64\[100\]"):
        exe(fnx.ones(100, dtype=fnx.float64))
    with pytest.raises(fnx.errors.FnxTypeError, match="expected 1 arguments, got 2"):
        exe(fnx.ones(100), fnx.ones(100))
    assert exe.kernels()   # the Executable's other methods
