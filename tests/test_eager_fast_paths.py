"""The eager fast paths of a language model's training step agree with their definitions: index_put's
scatter-add over flat positions and whole rows (embedding and NLL backward) with np.add.at, the softmax primitives
with their compositions (the op table, tests/op_db_nn_lm.py, checks values and gradients), the LSTM recurrence's C
loops with numpy's loop, on any number of threads; a stack of rows (strided too) times a matrix is one GEMM."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hypothesis import given, strategies as st

import fnx
import fnx.nn.functional as F
from fnx.lowering import cpu, nn_kernels, scatter_kernels
from fnx.nn.functional_activation import log_softmax_backward_p, log_softmax_p, softmax_p
from fnx.nn.recurrence import recurrence_p, recurrence_vjp_p
from fnx.ops import elementwise, indexing, linalg
from fnx.ops.elementwise import _summed_product
from fnx.ops.indexing import index_put_p


@given(data=st.data())
def test_scatter_add_matches_add_at(data):
    ndim = data.draw(st.integers(1, 4), label="ndim")
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim), label="shape"))
    dims = data.draw(st.sampled_from(_dim_sets(ndim)), label="dims")
    n_idx = data.draw(st.integers(0, 6), label="index length")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16), label="seed"))
    index_dtype = data.draw(st.sampled_from([np.int64, np.int32, np.uint8]), label="index dtype")
    low = [0 if index_dtype is np.uint8 else -shape[d] for d in dims]   # negative indices count from the end
    idx = [rng.integers(lo, shape[d], size=n_idx).astype(index_dtype) for lo, d in zip(low, dims)]
    if len(dims) > 1 and data.draw(st.booleans(), label="grid"):   # index arrays that broadcast to a 2-d grid
        idx[0] = idx[0][:, None]
    where = [slice(None)] * ndim
    for d, i in zip(dims, idx):
        where[d] = i
    x = rng.standard_normal(shape).astype(np.float32)
    target = x[tuple(where)].shape
    values = rng.standard_normal(target).astype(np.float32)
    if data.draw(st.booleans(), label="broadcast values") and len(target):
        values = values[..., :1]
    want = x.copy()
    np.add.at(want, tuple(where), values)
    got = index_put_p.impl(np, x, values, *idx, dims=dims, accumulate=True)
    np.testing.assert_array_equal(got, want)


def _dim_sets(ndim: int) -> list:
    """Every non-empty increasing tuple of dims (adjacent ones take the flat path, the others np.add.at)."""
    sets = [()]
    for d in range(ndim):
        sets += [s + (d,) for s in sets]
    return [s for s in sets if s]


@pytest.mark.parametrize("fn", [F.log_softmax, F.softmax], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_eager_softmax_primitives_give_the_composition_bits(fn, dtype):
    """Eagerly one primitive, under a transform the composition of fnx ops: the same values, bit for bit."""
    x = fnx.tensor(np.random.default_rng(0).standard_normal((3, 5, 7)) * 10, dtype=dtype)
    eager = fn(x, 1)
    traced = fnx.vmap(lambda row: fn(row, 0))(x)
    np.testing.assert_array_equal(eager.numpy(), traced.numpy())


@pytest.mark.parametrize("bias", [False, True])
def test_lstm_impls_leave_their_inputs_unchanged(bias):
    """The forward scales a copy of w_hh^T; with an output size of 1, w_hh^T is contiguous and must still be
    copied (the gradient check caught an in-place scaling of the weight)."""
    rng = np.random.default_rng(0)
    length, n, hid = 3, 2, 2
    args = [rng.standard_normal(s) for s in [(length, n, 4 * hid), (n, hid), (n, hid), (4 * hid, hid)]]
    args[1], args[3] = np.ascontiguousarray(args[1][:, :1]), np.ascontiguousarray(args[3][:, :1])
    w_hr = rng.standard_normal((1, hid))
    args += ([rng.standard_normal(4 * hid)] if bias else []) + [w_hr]
    before = [a.copy() for a in args]
    outs = recurrence_p.impl(np, *args, mode="LSTM", reverse=False, bias=bias, proj=True)
    recurrence_vjp_p.impl(np, *args, outs[0], *outs[3:], np.ones_like(outs[0]), np.ones_like(outs[1]),
                          np.ones_like(outs[2]), mode="LSTM", reverse=False, bias=bias, proj=True)
    for a, b in zip(args, before):
        np.testing.assert_array_equal(a, b)


def _lstm_case(dtype, shape: tuple, reverse: bool, bias: bool):
    """run() -> the LSTM recurrence's outputs and gradients through the impls, on random inputs of `shape`
    (length, batch, hidden)."""
    rng = np.random.default_rng(1)
    length, n, hid = shape
    args = [rng.standard_normal(s).astype(dtype) for s in [(length, n, 4 * hid), (n, hid), (n, hid)]]
    args.append((rng.standard_normal((4 * hid, hid)) / 8).astype(dtype))
    args += [rng.standard_normal(4 * hid).astype(dtype)] if bias else []
    cts = [rng.standard_normal(s).astype(dtype) for s in [(length, n, hid), (n, hid), (n, hid)]]
    params = {"mode": "LSTM", "reverse": reverse, "bias": bias, "proj": False}

    def run():
        outs = recurrence_p.impl(np, *args, **params)
        return outs + recurrence_vjp_p.impl(np, *args, outs[0], *outs[3:], *cts, **params)

    return run


@given(data=st.data())
def test_lstm_c_loops_match_the_numpy_loop(data):
    """Above MIN_ELEMENTS an LSTM's steps run in C: the same outputs and gradients as numpy's loop, which the op
    table checks against finite differences, for any batch and hidden size (whole and partial blocks of the C
    loops' rows and units)."""
    dtype, tol = data.draw(st.sampled_from([(np.float32, 2e-6), (np.float64, 1e-14)]), label="dtype")
    n, hid = data.draw(st.integers(1, 9), label="batch"), data.draw(st.integers(16, 80), label="hidden")
    length = -(-nn_kernels.MIN_ELEMENTS // (n * hid)) + data.draw(st.integers(0, 3), label="extra steps")
    reverse, bias = data.draw(st.booleans(), label="reverse"), data.draw(st.booleans(), label="bias")
    assert nn_kernels.lstm_loops(np.dtype(dtype), length * n * hid) is not None   # the C loops run
    run = _lstm_case(dtype, (length, n, hid), reverse, bias)
    c_results = run()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(nn_kernels, "MIN_ELEMENTS", 10**9)
        numpy_results = run()
    for got, want in zip(c_results, numpy_results):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=tol * 10, atol=tol * np.abs(want).max())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(16, 8, 64), (9, 7, 70)])   # whole and partial blocks of rows and units
def test_lstm_c_loops_give_the_same_bits_on_any_number_of_threads(dtype, shape):
    """The C loops split the batch's rows over fnx's pool: every thread count gives one thread's bits. The
    weights' gradient is BLAS's product over all steps and rows, which on some CPUs splits its sum by the thread
    count (OpenBLAS's Haswell kernels on an AMD EPYC Zen 3): that one agrees to rounding."""
    before, pool = fnx.get_num_threads(), cpu.thread_pool()   # pool: None where kernels build without threads
    try:
        results = {}
        for threads in (1, 2, 3):
            fnx.set_num_threads(threads)
            results[threads] = _lstm_case(dtype, shape, True, True)()
            assert pool is None or ctypes.c_int.in_dll(pool, "fnx_rt_last_team").value == threads   # a team ran it
    finally:
        fnx.set_num_threads(before)
    for threads in (2, 3):
        *loops, d_weights, d_bias = results[threads]
        *want_loops, want_weights, want_bias = results[1]
        for got, want in zip(loops + [d_bias], want_loops + [want_bias]):
            np.testing.assert_array_equal(got, want)
        tol = np.finfo(dtype).eps * 64
        np.testing.assert_allclose(d_weights, want_weights, rtol=tol, atol=tol * np.abs(want_weights).max())


def _c_rows_and_numpy(monkeypatch, x, g, dim):
    """(log_softmax, its backward, softmax) of x along `dim` (g the backward's gradient) as the impls run them,
    then as numpy does (the C loops' threshold out of reach)."""
    def run():
        out = log_softmax_p.impl(np, x, dim=dim)
        return out, log_softmax_backward_p.impl(np, g, out, dim=dim), softmax_p.impl(np, x, dim=dim)

    got = run()
    monkeypatch.setattr(nn_kernels, "ROW_MIN_ELEMENTS", 10**9)
    return got, run()


@pytest.mark.parametrize("m", [5, 27, 32, 130], ids=lambda m: f"rows_of_{m}")
@pytest.mark.parametrize("dtype, tol", [(np.float32, 2e-6), (np.float64, 1e-14)])
def test_softmax_and_log_softmax_c_rows_match_numpy(monkeypatch, dtype, tol, m):
    """log_softmax (and its backward) and softmax over the last dim of a large float array, run as C loops (in
    blocks of rows below FNX_SHORT_ROW, several blocks, on the thread pool), over rows shorter than a vector, of
    a multiple of one and longer: numpy's values to rounding, NaN rows NaN, -inf entries 0 in softmax."""
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((2, -(-40000 // (2 * m)), m)) * 20).astype(dtype)
    x[0, 3, m // 2] = np.nan
    x[1, 2, m - 1] = x[1, 4, 0] = -np.inf
    g = rng.standard_normal(x.shape).astype(dtype)
    assert nn_kernels.log_softmax(x, 2) is not None   # the C loops run
    got, want = _c_rows_and_numpy(monkeypatch, x, g, 2)
    assert all(np.isnan(a[0, 3]).all() for a in got)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=tol * 10, atol=tol * np.abs(b[np.isfinite(b)]).max())   # -inf: 0


@pytest.mark.parametrize("g_layout", ["channels_last", "row_major"])
def test_softmax_over_the_dim_memory_holds_innermost_runs_the_c_rows(monkeypatch, g_layout):
    """Channels-last logits (N, C, H, W) over dim 1, the classes (U-Net's 2): the C loops run over the memory's
    rows (numpy's reductions over so short an axis took 40 us per 1000 rows), the backward's gradient moved to
    that order where it is row-major; numpy's values, the outputs laid out as the input."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 32, 32, 2)).astype(np.float32).transpose(0, 3, 1, 2)   # channels-last
    g = rng.standard_normal((4, 32, 32, 2)).astype(np.float32).transpose(0, 3, 1, 2)
    g = np.ascontiguousarray(g) if g_layout == "row_major" else g
    assert nn_kernels.softmax(x, 1) is not None and nn_kernels.log_softmax_backward(g, x, 1) is not None
    assert nn_kernels.softmax(np.ascontiguousarray(x), 1) is None   # dim 1 not innermost: numpy
    got, want = _c_rows_and_numpy(monkeypatch, x, g, 1)
    for a, b in zip(got, want):
        assert a.strides == x.strides
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=2e-6 * np.abs(b).max())


def test_softmax_c_rows_of_a_million_sum_to_float32_accuracy_on_any_vector_width():
    """The C loops' row sums over one row of 2^20 float32s (softmax's and log_softmax's denominators, the
    backward's sum of g) are summed in blocks combined in double: within a few float32 eps of float64 whatever the
    CPU's vector width (summed in the lanes alone they were 1.2e-6 off with 16 lanes, 4.7e-5 with 4)."""
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 1, 1 << 20).astype(np.float32)
    g = rng.uniform(0, 1, x.size).astype(np.float32)
    assert nn_kernels.softmax(x, 0) is not None   # the C loops run
    x64, g64 = x.astype(np.float64), g.astype(np.float64)
    e = np.exp(x64 - x64.max())
    want_softmax, want_log = e / e.sum(), x64 - x64.max() - np.log(e.sum())
    eps = np.finfo(np.float32).eps
    assert np.abs(softmax_p.impl(np, x, dim=0) / want_softmax - 1).max() < 4 * eps
    out = log_softmax_p.impl(np, x, dim=0)
    assert np.abs(out - want_log).max() < 4 * eps * np.abs(want_log).max()
    want_dx = g64 - np.exp(out.astype(np.float64)) * g64.sum()
    dx = log_softmax_backward_p.impl(np, g, out, dim=0)
    assert np.abs(dx - want_dx).max() < 4 * eps * np.abs(want_dx).max()


@given(data=st.data())
def test_scatter_add_of_rows_in_c_matches_add_at(data):
    """index_put's scatter-add of whole rows of a large float array (an embedding's backward) runs as a C loop:
    np.add.at's bits, duplicates included."""
    dtype = data.draw(st.sampled_from([np.float32, np.float64]), label="dtype")
    pre, words = data.draw(st.integers(1, 3), label="leading size"), data.draw(st.integers(1, 40), label="words")
    row = data.draw(st.integers(scatter_kernels.MIN_ROW, 200), label="row length")
    n_idx = -(-scatter_kernels.MIN_ELEMENTS // (pre * row)) + data.draw(st.integers(0, 50), label="extra tokens")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16), label="seed"))
    x = rng.standard_normal((pre, words, row)).astype(dtype)
    idx = rng.integers(-words, words, size=n_idx)   # negative indices count from the end
    values = rng.standard_normal((pre, n_idx, 1 if data.draw(st.booleans(), label="broadcast") else row))
    values = values.astype(dtype)
    want = x.copy()
    np.add.at(want, (slice(None), idx), values)
    assert scatter_kernels.scatter_add_rows(np.zeros((4, row), dtype), np.zeros(pre * n_idx, np.int64),
                                            np.ones((pre * n_idx, row), dtype))   # the C loop runs
    got = index_put_p.impl(np, x, values, idx, dims=(1,), accumulate=True)
    np.testing.assert_array_equal(got, want)


@given(data=st.data())
def test_scatter_add_of_rows_by_one_index_array_over_dim_0_matches_add_at(data):
    """An embedding's backward (rows of the weight picked by a (batch, tokens) index array) goes straight to the C
    loop, with the few numpy calls it needs: np.add.at's bits, duplicates, negative indices and values broadcast
    along a row included."""
    dtype = data.draw(st.sampled_from([np.float32, np.float64]), label="dtype")
    words, row = data.draw(st.integers(1, 40), label="words"), data.draw(st.integers(scatter_kernels.MIN_ROW, 200),
                                                                          label="row length")
    batch = data.draw(st.integers(1, 3), label="batch")
    tokens = -(-scatter_kernels.MIN_ELEMENTS // (batch * row)) + data.draw(st.integers(0, 50), label="extra tokens")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16), label="seed"))
    x = rng.standard_normal((words, row)).astype(dtype)
    low = -words if data.draw(st.booleans(), label="negative indices") else 0
    idx = rng.integers(low, words, size=(batch, tokens))
    values = rng.standard_normal((batch, tokens, 1 if data.draw(st.booleans(), label="broadcast") else row))
    values = values.astype(dtype)
    want = x.copy()
    np.add.at(want, idx, values)
    direct = x.copy()
    assert indexing._scatter_rows(direct, values, idx)   # the short path took it
    np.testing.assert_array_equal(direct, want)
    np.testing.assert_array_equal(index_put_p.impl(np, x, values, idx, dims=(0,), accumulate=True), want)


def test_data_pointer_reads_numpys_address_of_any_array():
    """The C loops' argument addresses (fnx/array_pointers.py) are numpy's own `.ctypes.data`: of a
    contiguous array, of views at an offset, strided and transposed, of an empty one, of another dtype; a numpy
    scalar (another object layout) is refused rather than read."""
    from fnx.array_pointers import data_pointer

    base = np.arange(60.0).reshape(3, 4, 5)
    arrays = [base, base[1:, 2:], base[:, ::2, 1], base.T, base.astype(np.int8)[2], np.empty((0, 3), np.float32),
              np.zeros(())]
    for a in arrays:
        assert data_pointer(a) == a.ctypes.data
    with pytest.raises(TypeError, match="numpy array"):
        data_pointer(np.float32(1.0))


class _RecordingNumpy:
    """numpy's matmul and multiply, noting the operands' shapes of each product."""

    def __init__(self):
        self.products = []

    def matmul(self, a, b):
        self.products.append((a.shape, b.shape))
        return np.matmul(a, b)

    multiply = staticmethod(np.multiply)


@pytest.mark.parametrize("stack", ["contiguous", "permuted", "time step"])
def test_a_stack_of_rows_times_a_matrix_is_one_product(stack):
    """nn.Linear on a permuted RNN output or on one time step sliced from a gradient: one (rows, K) @ (K, N) GEMM,
    where numpy's matmul would run one product per leading index."""
    rng = np.random.default_rng(0)
    a = {"contiguous": lambda: rng.standard_normal((6, 5, 16)),
         "permuted": lambda: rng.standard_normal((5, 6, 16)).transpose(1, 0, 2),
         "time step": lambda: rng.standard_normal((6, 9, 16))[:, 3:8]}[stack]()
    b = rng.standard_normal((24, 16)).T
    xp = _RecordingNumpy()
    out = linalg._product(xp, a, b)
    assert xp.products == [((30, 16), (16, 24))]
    np.testing.assert_allclose(out, np.matmul(a, b), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("threads", [2, 3, 8])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_whole_array_sums_on_the_pool_give_numpys_pairwise_bits(threads, dtype):
    """The sum of a whole large contiguous float array runs numpy's pairwise order with its top halves as tasks on
    the pool (2, 4 and 8 of them here): numpy's bits, whatever the size's remainders by 8 and the threads; a
    non-contiguous one is numpy's own."""
    from fnx.lowering import eager_kernels

    saved = fnx.get_num_threads()
    fnx.set_num_threads(threads)
    try:
        rng = np.random.default_rng(threads)
        for n in (eager_kernels.PAIRWISE_MIN, eager_kernels.PAIRWISE_MIN + 13, 3_000_001):
            x = (rng.standard_normal(n) * 10).astype(dtype)
            assert fnx.tensor(x).sum().numpy() == x.sum()
        x = rng.standard_normal((1100, 1000)).astype(dtype)
        assert fnx.tensor(x).sum().numpy() == x.sum()
        assert fnx.tensor(x).sum(dim=(0, 1), keepdim=True).numpy() == x.sum(keepdims=True)
        assert fnx.tensor(x).T.sum().numpy() == x.T.sum()
    finally:
        fnx.set_num_threads(saved)


@pytest.mark.parametrize("x_shape, y_shape", [((4, 6, 5), (4, 6, 1)), ((4, 6, 5), (5,)), ((5,), (4, 6, 5)),
                                              ((4, 6, 5), (6, 5)), ((4, 6, 5), ()), ((2, 3, 4), (3, 1)),
                                              ((4, 1, 5), (5,))], ids=str)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_mul_gradient_of_a_broadcast_operand_is_the_summed_product(monkeypatch, x_shape, y_shape, dtype):
    """x * y with one operand broadcast along leading or trailing dims (a norm's weight, RMSNorm's (..., 1)
    scale): the eager backward sums g * x over those dims in one einsum pass; both gradients are the vjp's (the
    unbroadcast sum), to rounding; an operand broadcast along middle dims takes the family's rule."""
    calls = []

    def spy(g, a, shape):   # the einsum pass's shapes, where it ran
        out = _summed_product(g, a, shape)
        if out is not None:
            calls.append(shape)
        return out

    monkeypatch.setattr(elementwise, "_summed_product", spy)
    rng = np.random.default_rng(5)
    x = fnx.tensor(rng.standard_normal(x_shape).astype(dtype), requires_grad=True)
    y = fnx.tensor(rng.standard_normal(y_shape).astype(dtype), requires_grad=True)
    g = fnx.tensor(rng.standard_normal(np.broadcast_shapes(x_shape, y_shape)).astype(dtype))
    (x * y).backward(g)
    _, pull = fnx.vjp(lambda a, b: a * b, x.detach().double(), y.detach().double())
    tol = 1e-12 if dtype == np.float64 else 2e-6
    for got, want in zip((x.grad, y.grad), pull(g.double())):
        assert got.dtype == x.dtype and tuple(got.shape) == tuple(want.shape)
        np.testing.assert_allclose(got.double().numpy(), want.numpy(), rtol=tol, atol=tol)
    full = np.broadcast_shapes(x_shape, y_shape)
    assert calls == ([] if y_shape == (3, 1) else [y_shape if y_shape != full else x_shape])



def test_cat_of_plain_matrices_promotes_and_checks_as_the_general_path():
    """cat's check on the arrays of plain tensors of one dtype and rank (a recurrent cell's join) hands every other
    join to the general checks: mixed dtypes promote as PyTorch's (int64 with float32 gives float32, not numpy's
    float64), a Parameter joins, dims count from the end, and a dim out of range names cat."""
    a, b = fnx.ones(2, 3), fnx.arange(6).reshape(2, 3)
    assert fnx.cat([a, b], dim=1).dtype == fnx.float32
    np.testing.assert_array_equal(fnx.cat([a, b], dim=-2).numpy(),
                                  np.concatenate([np.ones((2, 3)), np.arange(6).reshape(2, 3)]))
    w = fnx.nn.Parameter(fnx.zeros(2, 3))
    assert fnx.cat([a, w], 1).shape == (2, 6) and fnx.cat([a, w], 1).requires_grad
    with pytest.raises(IndexError, match="out of range"):
        fnx.cat([a, a], dim=2)
    with pytest.raises(RuntimeError, match="cat|concatenate"):
        fnx.cat([a, fnx.ones(3, 3)], dim=1)
