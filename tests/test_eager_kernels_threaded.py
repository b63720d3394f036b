"""Eager kernels of the common primitives (fnx/lowering/eager_kernels.py, `THREADED`): large CPU float arrays run
through compiled C kernels on fnx's thread pool, for each broadcast pattern a kernel serves.

The C path runs (a spy on the eager kernel hook sees a result) for operands of one shape, a scalar, an operand
broadcast along the leading dims and one broadcast along the trailing dims, on either side; add, sub, mul, div and
max give numpy's bits there (NaN, infinities, signed zeros and subnormals included), also for non-contiguous
inputs and operands expanded by a view, and exp, tanh within their float32 ulp bounds; integer powers (a kernel
per exponent) and tanh's and sigmoid's backwards give numpy's bits; sums over trailing dims
run in C within rounding, sums over the leading dims of contiguous arrays of short rows with numpy's bits, and
batched outer products ((..., m, 1) * (..., 1, n), a matmul of such operands too) in their C loop with numpy's
bits; small arrays, other outer broadcasts, integer dtypes, sums over long rows or strided arrays and operands of
one shape on one thread keep numpy; a flat kernel stays vectorised below the parallel threshold.
"""
from __future__ import annotations

import math
import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fnx
from fnx import core
from fnx.abstract import ShapedArray
from fnx.device import cpu
from fnx.lowering import eager_kernels
from fnx.lowering.plan import plan_steps
from fnx.lowering.targets import get_target
from fnx.transforms.tracing import trace_to_jaxpr
from numerics_measure import rounded, ulp_distance
from test_codegen import ULP_BOUNDS

pytestmark = pytest.mark.skipif(not any(shutil.which(c) for c in ("cc", "gcc", "clang")), reason="needs a C compiler")
RNG = np.random.default_rng(0)
SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-310, 3.0]
# Operand shapes of each pattern over an output of (b, m, k): what the kernel's operands are viewed as
PATTERNS = {
    "flat": lambda b, m, k: [(b, m, k), (b, m, k)],
    "scalar rhs": lambda b, m, k: [(b, m, k), ()],
    "scalar lhs": lambda b, m, k: [(1, 1), (b, m, k)],
    "row rhs": lambda b, m, k: [(b, m, k), (k,)],        # x * weight, a bias add
    "row lhs": lambda b, m, k: [(1, m, k), (b, m, k)],
    "rows of trailing dims": lambda b, m, k: [(b, 3, m, k), (1, 1, m, k)],   # rotary's x * cos: (T, D) rows
    "col rhs": lambda b, m, k: [(b, m, k), (b, m, 1)],   # x * rstd
    "col lhs": lambda b, m, k: [(b, 1, 1), (b, m, k)],
}
BITWISE = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "maximum": np.maximum}


@pytest.fixture
def threads():
    """Run the test on `n` threads (`threads(n)`), then restore the count."""
    before = fnx.get_num_threads()
    yield fnx.set_num_threads
    fnx.set_num_threads(before)


@pytest.fixture
def c_results(monkeypatch):
    """The results the eager kernel hook computed in C (None where it left the op to numpy), in call order."""
    seen = []

    def spy(prim, *arrays, **params):
        out = eager_kernels.run(prim, *arrays, **params)
        seen.append(out)
        return out

    monkeypatch.setattr(core, "eager_kernel_hook", spy)
    return seen


def _operands(shapes, dtype) -> list[np.ndarray]:
    arrays = [RNG.uniform(-4, 4, s).astype(dtype) for s in shapes]
    for a in arrays:
        flat = a.reshape(-1)
        flat[:len(SPECIAL)] = np.array(SPECIAL, dtype)[:flat.size]
    return arrays


def _same_bits(got: np.ndarray, want: np.ndarray) -> bool:
    """Equal dtypes, shapes and bits (signed zeros included), NaN where the other has NaN. A NaN's sign and payload
    are not portable: of two NaN operands x86 returns the first, and numpy's SIMD levels order them differently
    (g * out (1 - out) with g and x NaN: -NaN from numpy's AVX2 loops, +NaN from its baseline ones)."""
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    nan = np.isnan(got)
    if not np.array_equal(nan, np.isnan(want)):
        return False
    bits = lambda a: np.ascontiguousarray(np.where(nan, 0, a)).view(np.uint8)
    return np.array_equal(bits(got), bits(want))


def _large(draw_dims):
    """(b, m, k) with at least BROADCAST_MIN and the flat threshold elements: each pattern's kernel runs."""
    b, m, k = draw_dims
    return b, m, max(k, -(-2 * eager_kernels.THREADED["mul"][1] // (b * m)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", ["add", "mul"])
@pytest.mark.parametrize("pattern", sorted(PATTERNS))
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(dims=st.tuples(st.integers(1, 9), st.integers(1, 70), st.integers(2, 300)))
def test_each_pattern_runs_in_c_with_numpys_bits(threads, c_results, pattern, op, dtype, dims):
    threads(2)
    x, y = _operands(PATTERNS[pattern](*_large(dims)), dtype)
    c_results.clear()
    with np.errstate(all="ignore"):
        got, want = getattr(fnx, op)(fnx.tensor(x), fnx.tensor(y)).numpy(), BITWISE[op](x, y)
    assert c_results and c_results[-1] is not None   # computed by the kernel, not numpy
    assert _same_bits(got, want)


@pytest.mark.parametrize("op", ["sub", "div", "maximum"])
def test_the_other_arithmetic_gives_numpys_bits(threads, c_results, op):
    threads(2)
    for dtype, pattern in [(np.float32, "row lhs"), (np.float64, "col rhs")]:
        x, y = _operands(PATTERNS[pattern](4, 64, 512), dtype)
        with np.errstate(all="ignore"):
            got, want = getattr(fnx, op)(fnx.tensor(x), fnx.tensor(y)).numpy(), BITWISE[op](x, y)
        assert c_results[-1] is not None and _same_bits(got, want), pattern
    x = _operands([(4, 64, 512)], np.float32)[0]
    assert _same_bits((-fnx.tensor(x)).numpy(), -x)
    assert c_results[-1] is not None


@pytest.mark.parametrize("name", ["exp", "tanh"])
def test_transcendentals_within_their_float32_bounds(threads, c_results, name):
    threads(2)
    x = _operands([(64, 4096)], np.float32)[0]
    got = getattr(fnx, name)(fnx.tensor(x)).numpy()
    assert c_results[-1] is not None
    with np.errstate(all="ignore"):
        assert ulp_distance(got, rounded(getattr(np, name)(x.astype(np.float64)))) <= ULP_BOUNDS[name]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_integer_powers_run_in_c_with_numpys_bits(threads, c_results, dtype):
    """integer_pow, an elementwise primitive with a param (its exponent), runs a kernel per exponent, each with the
    numpy impl's bits: x**3 multiplied in the impl's order."""
    threads(2)
    x = _operands([(64, 2048)], dtype)[0]
    with np.errstate(all="ignore"):
        cases = [(3, (x * x) * x), (2, x * x), (5, ((x * x) * (x * x)) * x), (-2, np.reciprocal(x * x))]
        for y, want in cases:
            c_results.clear()
            got = (fnx.tensor(x) ** y).numpy()
            assert c_results and c_results[-1] is not None, y
            assert _same_bits(got, want.astype(dtype)), y


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(5, 7), (64, 2048)])
def test_tanh_and_sigmoid_gradients_give_the_compositions_bits(threads, c_results, dtype, shape):
    """tanh's and sigmoid's vjps (tanh_backward, sigmoid_backward) give g (1 - out^2) and g out (1 - out) as the
    composition computed them, bit for bit: numpy on small arrays, the C kernel on large ones."""
    threads(2)
    x, g = _operands([shape, shape], dtype)
    one = dtype(1.0)
    for fn, deriv in [(fnx.tanh, lambda out: one - out * out), (fnx.sigmoid, lambda out: out * (one - out))]:
        t = fnx.tensor(x, requires_grad=True)
        out = fn(t)
        c_results.clear()
        with np.errstate(all="ignore"):
            out.backward(fnx.tensor(g))
            want = g * deriv(out.detach().numpy())
        assert _same_bits(t.grad.numpy(), want)
        assert bool(c_results) == (x.size >= 65536) and all(r is not None for r in c_results)


def test_non_contiguous_inputs_give_numpys_bits(threads, c_results):
    threads(2)
    x = _operands([(512, 256)], np.float32)[0]
    for a, b in [(x.T, x.T[::-1]), (x.T, x[:, 0]), (x[:, ::2], x[:, :1])]:   # flat, row and col
        with np.errstate(all="ignore"):
            got, want = (fnx.tensor(a) * fnx.tensor(b)).numpy(), a * b
        assert c_results[-1] is not None and _same_bits(got, want)


def test_expanded_operands_run_as_their_broadcast_pattern(threads, c_results):
    """An operand broadcast by a view (stride 0, as `expand` and a keepdims sum's vjp make) is read in place as
    the column, row or scalar it expands (on one thread, where a flat loop would keep numpy); when both operands
    are such views numpy loops over them."""
    x, col, row = _operands([(8, 64, 512), (8, 64, 1), (512,)], np.float32)
    tx, expand = fnx.tensor(x), lambda a: fnx.tensor(a).expand(8, 64, 512)
    three = np.float32(3.0)
    with np.errstate(all="ignore"):
        threads(1)
        assert _same_bits((tx * expand(col)).numpy(), x * col) and c_results[-1] is not None
        assert _same_bits((expand(row) - tx).numpy(), row - x) and c_results[-1] is not None
        threads(2)
        assert _same_bits((tx / expand(three)).numpy(), x / three) and c_results[-1] is not None
        assert _same_bits((expand(col) + expand(row)).numpy(), col + row) and c_results[-1] is None

def test_a_call_planned_for_one_layout_is_planned_anew_for_another(threads, c_results):
    """`run` keeps its plan of a call by the operands' strides too: an operand expanded from a row (read in place as
    the row), then a full operand of the same shape, then its transpose's transpose (the same strides again), then
    a transposed one (the strided loop of fnx/lowering/strided_kernels.py: a copy for the kernel cost more), then
    the row again."""
    threads(2)
    x, row, full = _operands([(8, 64, 512), (512,), (8, 64, 512)], np.float32)
    tx = fnx.tensor(x)
    for y, kernel in ((fnx.tensor(row).expand(8, 64, 512), True), (fnx.tensor(full), True),
                      (fnx.tensor(full).mT.mT, True), (fnx.tensor(full.transpose(0, 2, 1).copy()).mT, True),
                      (fnx.tensor(row).expand(8, 64, 512), True)):
        with np.errstate(all="ignore"):
            assert _same_bits((tx * y).numpy(), x * y.numpy()) and (c_results[-1] is not None) is kernel


def test_an_operand_broadcast_within_the_trailing_dims_runs_the_strided_loop(threads, c_results):
    """Rotary's q * cos: a query laid out (B, T, H, D) viewed as (B, H, T, D) times a (1, 1, T, D) table runs the
    strided loop over the query's memory, reading the table in place, the result laid out as the query; so does a
    contiguous operand times a table broadcast in its middle dims."""
    base, cos = _operands([(8, 64, 4, 32), (1, 1, 64, 32)], np.float32)
    q = fnx.tensor(base).transpose(1, 2)
    for n in (2, 1):
        threads(n)
        out = (q * fnx.tensor(cos)).numpy()
        assert _same_bits(out, base.transpose(0, 2, 1, 3) * cos) and c_results[-1] is not None
        assert out.strides == base.transpose(0, 2, 1, 3).strides
    wide, table = _operands([(2, 64, 8, 32), (1, 64, 1, 32)], np.float32)
    assert _same_bits((fnx.tensor(wide) * fnx.tensor(table)).numpy(), wide * table) and c_results[-1] is not None


def test_small_integer_and_outer_operands_keep_numpy(threads, c_results, monkeypatch):
    monkeypatch.setattr(eager_kernels, "_kernels", {})
    monkeypatch.setattr(eager_kernels, "_plans", {})
    monkeypatch.setattr(eager_kernels, "_launches", {})
    threads(2)
    k = (eager_kernels.BROADCAST_MIN - 1) // 7
    small_row = _operands([(7, k), (k,)], np.float32)
    small_flat = _operands([(eager_kernels.THREADED["mul"][1] - 1,)] * 2, np.float32)
    ints = [RNG.integers(-9, 9, (512, 512)), RNG.integers(-9, 9, 512)]
    outer = _operands([(2, 512, 1), (1, 1, 512)], np.float32)   # leading dims that broadcast: not the outer loop's
    for x, y in (small_row, small_flat, ints, outer):
        with np.errstate(all="ignore"):
            assert _same_bits((fnx.tensor(x) * fnx.tensor(y)).numpy(), x * y)
    assert c_results and all(r is None for r in c_results) and eager_kernels._kernels == {}


def test_operands_of_one_shape_or_few_rows_take_c_only_on_several_threads(threads, c_results):
    """One C thread is as fast as numpy's flat loop: no gain to pay the call for. A broadcast over many rows beats
    numpy's broadcasting loop on one thread too; over few long rows it is a flat loop again."""
    x, y = _operands(PATTERNS["flat"](4, 64, 1024), np.float32)
    w = _operands([(1024,)], np.float32)[0]
    long_rows, long_w = _operands([(eager_kernels.MANY_ROWS - 1, 8192), (8192,)], np.float32)
    threads(1)
    assert _same_bits((fnx.tensor(x) + fnx.tensor(y)).numpy(), x + y) and c_results[-1] is None
    assert _same_bits((fnx.tensor(long_rows) * fnx.tensor(long_w)).numpy(), long_rows * long_w)
    assert c_results[-1] is None
    assert _same_bits((fnx.tensor(x) + fnx.tensor(w)).numpy(), x + w) and c_results[-1] is not None
    threads(2)
    assert _same_bits((fnx.tensor(x) + fnx.tensor(y)).numpy(), x + y) and c_results[-1] is not None


def test_a_strided_row_or_column_takes_c_on_one_thread_a_strided_output_sized_operand_numpy(threads, c_results):
    """numpy reads a strided row or column (rotary's transposed cos table) with a stride in its inner loop: the
    kernel reads a contiguous copy, over few rows and from STRIDED_MIN elements too. A transposed output-sized
    operand the kernel reads in its own order (the row its column once moved), the result laid out as numpy's."""
    threads(1)
    rows = eager_kernels.MANY_ROWS // 2
    cols = -(-eager_kernels.STRIDED_MIN // rows)   # few rows of STRIDED_MIN elements: below BROADCAST_MIN
    x, row2, col2 = (fnx.tensor(a) for a in _operands([(rows, cols), (cols, 2), (rows, 2)], np.float32))
    strided = [(x, row2[:, 0]), (row2[:, 1], x), (x, col2[:, :1]), (col2[:, 1:], x)]
    for a, b in strided + [(x, row2[:, 0].contiguous()), (col2[:, :1].contiguous(), x)]:
        c_path = not (a.is_contiguous() and b.is_contiguous())
        with np.errstate(all="ignore"):
            assert _same_bits((a * b).numpy(), a.numpy() * b.numpy())
        assert (c_results[-1] is not None) == c_path
    xt, w = (fnx.tensor(a) for a in _operands([(2048, 4 * eager_kernels.MANY_ROWS), (2048,)], np.float32))
    with np.errstate(all="ignore"):
        product, expected = (xt.T * w).numpy(), xt.numpy().T * w.numpy()
    assert _same_bits(product, expected) and c_results[-1] is not None
    assert product.strides == expected.strides


def test_gradients_through_the_kernels_match_numpy(threads):
    """A norm-like step on large arrays, forward and backward through the C paths, against the same in numpy."""
    threads(2)
    x, w, r = (RNG.uniform(-4, 4, s) for s in [(8, 64, 256), (256,), (8, 64, 1)])
    tx, tw = fnx.tensor(x, requires_grad=True), fnx.tensor(w, requires_grad=True)
    ((tx * fnx.tensor(r)) * tw * 0.5).sum().backward()
    np.testing.assert_array_equal(tx.grad.numpy(), np.broadcast_to(0.5 * r * w, x.shape))
    np.testing.assert_allclose(tw.grad.numpy(), (x * r * 0.5).sum(axis=(0, 1)), rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sums_over_trailing_dims_run_in_c_within_rounding(c_results, dtype):
    """Per row, within a few rounding errors of the row's sum of magnitudes (the kernel adds float32 in blocks
    combined in double; numpy pairwise); the bits of the compiled sum; leading dims keep numpy's bits."""
    x = RNG.uniform(-4, 4, (6, 50, 300)).astype(dtype)
    eps = np.finfo(dtype).eps
    for axes, keepdims in [((2,), True), ((1, 2), False), ((2,), False)]:
        got = fnx.tensor(x).sum(dim=axes, keepdim=keepdims).numpy()
        assert c_results[-1] is not None
        want = x.astype(np.float64).sum(axis=axes, keepdims=keepdims)
        bound = 4 * eps * np.abs(x).astype(np.float64).sum(axis=axes, keepdims=keepdims)
        assert got.dtype == dtype and got.shape == want.shape and (np.abs(got - want) <= bound).all()
    compiled = fnx.compile(lambda t: t.sum(dim=-1), backend="c")(fnx.tensor(x)).numpy()
    assert _same_bits(fnx.tensor(x).sum(dim=-1).numpy(), compiled)
    assert _same_bits(fnx.tensor(x).sum(dim=0).numpy(), x.sum(axis=0)) and c_results[-1] is None


def test_small_and_strided_sums(c_results):
    small = RNG.uniform(-4, 4, (8, eager_kernels.SUM_MIN // 8 - 1)).astype(np.float32)
    assert _same_bits(fnx.tensor(small).sum(dim=-1).numpy(), small.sum(axis=-1))
    assert all(r is None for r in c_results)
    x = RNG.uniform(-4, 4, (300, 600)).astype(np.float32)
    got = fnx.tensor(x).T.sum(dim=-1).numpy()   # a transposed view: summed from a contiguous copy
    assert c_results[-1] is not None
    np.testing.assert_allclose(got, x.astype(np.float64).sum(axis=0), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("axes", [(0, 2, 3), (0, 2), (1,), (0, 1, 3), (2, 3)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_sums_of_channels_last_arrays_run_over_their_memory(c_results, axes, keepdims):
    """A channels-last gradient summed to a bias's shape (over N, H, W: its memory's leading dims) runs the column
    loop over the memory as it lies, not numpy's strided one; a sum over its trailing dim in memory (C) the row
    loop; the result in the input's order of dims. Over H and W (in the middle of its memory) the row loop runs on
    a row-major copy, as before; over N, C and W numpy runs it."""
    x = RNG.uniform(-4, 4, (4, 16, 32, 32)).astype(np.float32)
    t = fnx.tensor(x).to(memory_format=fnx.channels_last)
    got = t.sum(dim=axes, keepdim=keepdims).numpy()
    want = x.astype(np.float64).sum(axis=axes, keepdims=keepdims)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-3)
    ran = c_results[-1] is not None
    assert ran == (axes != (0, 1, 3))


def test_a_flat_kernel_below_the_parallel_threshold_stays_vectorised():
    """The flat loop's `if` names the parallel construct: a bare `if` on `parallel for simd` applies to `simd`
    too (OpenMP 5.0), and gcc then compiles a scalar loop for the arrays below the threshold (tanh of 16384
    float32 elements took 330 us instead of 14)."""
    closed = trace_to_jaxpr(lambda x: [fnx.tanh(x)], [ShapedArray((4096,), fnx.float32, cpu)])
    (gk,) = plan_steps(closed, get_target("c"))[1]
    (pragma,) = [line.strip() for line in gk.source.splitlines() if "omp parallel" in line]
    assert "simd" in pragma and "if (parallel: " in pragma, pragma


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lead=st.lists(st.integers(1, 9), min_size=1, max_size=3), cols=st.integers(2, eager_kernels.COLUMNS_MAX),
       dtype=st.sampled_from([np.float32, np.float64]), keepdims=st.booleans())
def test_sums_over_leading_dims_run_in_c_with_numpys_bits(threads, c_results, lead, cols, dtype, keepdims):
    """The column loop adds each column row after row from 0, numpy's order: numpy's bits (signed zeros, NaN and
    magnitudes far apart included) on one thread or several."""
    first = lead[0] + -(-eager_kernels.SUM_MIN // (math.prod(lead[1:]) * cols))   # SUM_MIN elements or more
    x = _operands([(first, *lead[1:], cols)], dtype)[0] * np.float32(10.0) ** RNG.integers(-4, 5, cols)
    x[..., 0] = -0.0
    axes = tuple(range(len(lead)))
    want = x.sum(axis=axes, keepdims=keepdims, dtype=x.dtype)
    for n in (1, 2, 3):   # the columns split in 1 to 3 ranges
        threads(n)
        got = fnx.tensor(x).sum(dim=axes, keepdim=keepdims).numpy()
        assert c_results[-1] is not None and _same_bits(got, want)


def test_sums_over_leading_dims_of_long_rows_or_strided_keep_numpy(c_results):
    """Over rows longer than COLUMNS_MAX numpy's loop is the faster; a strided array numpy sums in its own order."""
    long_rows = _operands([(eager_kernels.SUM_MIN // 1024 + 1, 1024)], np.float32)[0]
    assert _same_bits(fnx.tensor(long_rows).sum(dim=0).numpy(), long_rows.sum(axis=0)) and c_results[-1] is None
    x = _operands([(300, 600)], np.float32)[0]
    got = fnx.tensor(x)[:, ::2].sum(dim=0).numpy()   # a strided view
    assert _same_bits(got, x[:, ::2].sum(axis=0)) and c_results[-1] is None



@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lead=st.lists(st.integers(1, 5), max_size=2), m=st.integers(1, 80), n=st.integers(1, 40),
       dtype=st.sampled_from([np.float32, np.float64]), swap=st.booleans(), large=st.sampled_from(["m", "n"]))
def test_batched_outer_products_run_in_c_with_numpys_bits(threads, c_results, lead, m, n, dtype, swap, large):
    """(..., m, 1) * (..., 1, n) in either order, one operand large enough for the eager hook: one multiply per
    element in the C loop, numpy's bits (NaN, infinities, signed zeros included), on one thread or several."""
    at_least = -(-fnx.ops.elementwise._EAGER_C_FROM // math.prod(lead))
    m, n = (max(m, at_least), n) if large == "m" else (m, max(n, at_least))
    x, y = _operands([(*lead, m, 1), (*lead, 1, n)], dtype)
    with np.errstate(invalid="ignore"):   # inf * 0
        want = x * y
    for count in (1, 2):
        threads(count)
        got = (fnx.tensor(y) * fnx.tensor(x)) if swap else (fnx.tensor(x) * fnx.tensor(y))
        assert c_results[-1] is not None and _same_bits(got.numpy(), want)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lead=st.lists(st.integers(1, 9), max_size=2), m=st.integers(1, 80), n=st.integers(1, 80))
def test_matmuls_that_are_outer_products_run_the_c_loop(c_results, lead, m, n):
    """Per-example gradients of a linear layer (vmap of grad), nn.Linear(1, n) and the input's gradient through
    nn.Linear(n, 1): (..., m, 1) @ (..., 1, n) from MIN_ELEMENTS outputs on, numpy's bits (a multiply per element,
    no BLAS call)."""
    m = max(m, -(-eager_kernels.MIN_ELEMENTS // (math.prod(lead) * n)))
    x, y = _operands([(*lead, m, 1), (*lead, 1, n)], np.float32)
    got = fnx.matmul(fnx.tensor(x), fnx.tensor(y)).numpy()
    with np.errstate(invalid="ignore"):   # inf * 0
        assert c_results[-1] is not None and _same_bits(got, x * y)


def test_strided_outer_operands_keep_numpy(c_results):
    x, y = _operands([(4, 64, 8), (4, 1, 64)], np.float32)
    got = fnx.matmul(fnx.tensor(x)[:, :, :1], fnx.tensor(y)).numpy()   # a strided (4, 64, 1) view
    assert _same_bits(got, x[:, :, :1] * y) and c_results[-1] is None


def test_a_unary_kernel_in_place_keeps_its_launch_by_the_operands_layout():
    """relu_ on a channels-last activation (nn.ReLU(inplace=True)): the first call plans the flat loop over the
    memory, later calls on that layout run it at once, with the same values."""
    x = fnx.tensor(RNG.uniform(-4, 4, (4, 16, 32, 32)).astype(np.float32)).to(memory_format=fnx.channels_last)
    for _ in range(3):
        a = x.clone()
        want = np.maximum(a.numpy(), 0)
        with fnx.no_grad():
            a.relu_()
        assert a.is_contiguous(memory_format=fnx.channels_last)
        np.testing.assert_array_equal(a.numpy(), want)
    kept = [k for k in eager_kernels._launches if k[-1] == eager_kernels._IN_PLACE]
    assert any(k[1] == (4, 16, 32, 32) and k[2] == x.numpy().strides for k in kept)


@pytest.mark.parametrize("cols", [1, 2, 5, 16, 17])
def test_small_sums_over_many_short_rows_run_the_column_loop_with_numpys_bits(c_results, cols):
    """Below SUM_MIN elements a sum over leading dims of COLUMNS_ROWS_MIN rows or more runs the column loop (a few
    columns: their sums in registers), numpy's bits; fewer rows, or a sum over trailing dims, stay numpy's."""
    rows = eager_kernels.COLUMNS_SMALL_MIN // min(cols, 4) + 3
    x = RNG.uniform(-4, 4, (rows, cols)).astype(np.float32)
    assert x.size < eager_kernels.SUM_MIN
    got = fnx.tensor(x).sum(dim=0).numpy()
    assert (c_results[-1] is not None) == (cols > 1) and _same_bits(got, x.sum(axis=0))
    memory = RNG.uniform(-4, 4, (4, 64, 64, cols)).astype(np.float32)   # a channels-last (4, cols, 64, 64)
    last = fnx.tensor(memory).permute(0, 3, 1, 2)
    got = last.sum(dim=(0, 2, 3)).numpy()
    assert (c_results[-1] is not None) == (cols > 1) and _same_bits(got, memory.reshape(-1, cols).sum(axis=0))
    few = RNG.uniform(-4, 4, (eager_kernels.COLUMNS_ROWS_MIN - 1, 16)).astype(np.float32)
    assert _same_bits(fnx.tensor(few).sum(dim=0).numpy(), few.sum(axis=0)) and c_results[-1] is None
    rows_of = x.T.copy()
    assert _same_bits(fnx.tensor(rows_of).sum(dim=-1).numpy(), rows_of.sum(axis=-1)) and c_results[-1] is None
