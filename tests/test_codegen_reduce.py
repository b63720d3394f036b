"""Row-reduction kernels of the C backend (fnx/lowering/codegen.py, templates/c_reduce*.c.j2): the per-element
output of a large row kernel streamed past the cache in whole 64-byte lines (`codegen._STREAM_MIN_BYTES`); and
the driver's library steps that feed such kernels (fnx/lowering/plan.py).

`streaming` lowers the threshold to 0 bytes so that small arrays take the streamed path: its values must be
the same bits as the plain path's and match numpy, on rows of odd lengths (cache lines split at every row
start), NaN and inf rows, broadcast and transposed operands, several reduced dims, and every output dtype.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

import fnx
import fnx.nn.functional as F
from fnx.lowering import codegen
from fnx.lowering.plan import build_executable

RNG = np.random.default_rng(0)


def build(f, *args, stream_min: int | None = None):
    """The C executable of `f` at `args`, rendered with `stream_min` as the streaming threshold if given."""
    closed = fnx.make_jaxpr(f)(*args)
    if stream_min is None:
        return build_executable(closed, backend="c")
    old = codegen._STREAM_MIN_BYTES
    codegen._STREAM_MIN_BYTES = stream_min
    try:
        return build_executable(closed, backend="c")
    finally:
        codegen._STREAM_MIN_BYTES = old


def run_both(f, *args) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Outputs of `f` compiled with every row kernel's output streamed, and with the default threshold."""
    streamed = build(f, *args, stream_min=0)
    assert "fnx_stream_line(" in streamed.source()
    plain = build(f, *args)
    return [t.numpy() for t in streamed(*args)], [t.numpy() for t in plain(*args)]


def layer_norm_ref(x, w, b, eps=1e-5):
    x64 = x.astype(np.float64)
    mean = x64.mean(-1, keepdims=True)
    var = ((x64 - mean) ** 2).mean(-1, keepdims=True)
    return ((x64 - mean) / np.sqrt(var + eps) * w + b).astype(x.dtype)


@given(rows=st.integers(1, 9), cols=st.sampled_from([2, 3, 15, 16, 17, 33, 100, 257]))
def test_streamed_layer_norm_matches_the_plain_path_and_numpy(rows, cols):
    x = RNG.standard_normal((rows, cols)).astype(np.float32)
    w, b = RNG.standard_normal(cols).astype(np.float32), RNG.standard_normal(cols).astype(np.float32)
    args = fnx.tensor(x), fnx.tensor(w), fnx.tensor(b)
    (got,), (plain,) = run_both(lambda x, w, b: F.layer_norm(x, (cols,), w, b), *args)
    assert np.array_equal(got.view(np.int32), plain.view(np.int32))
    np.testing.assert_allclose(got, layer_norm_ref(x, w, b), rtol=1e-4, atol=1e-4)


def test_nan_and_inf_rows_stream_like_the_plain_path():
    x = RNG.standard_normal((6, 37)).astype(np.float32)
    x[1, 5], x[2, 0], x[3, 36], x[4] = np.nan, np.inf, -np.inf, np.inf
    w = RNG.standard_normal(37).astype(np.float32)
    (got,), (plain,) = run_both(lambda x, w: (x - x.amax(-1, keepdim=True)) * w + x.sum(-1, keepdim=True),
                                fnx.tensor(x), fnx.tensor(w))
    with np.errstate(invalid="ignore"):
        want = (x - x.max(-1, keepdims=True)) * w + x.sum(-1, keepdims=True)
    np.testing.assert_array_equal(got, plain)   # NaN where numpy has NaN: array_equal treats them as equal
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert np.isnan(got[1]).all() and np.isnan(got[4]).all() and np.isfinite(got[0]).all()


def test_transposed_and_column_broadcast_operands():
    """Three rows (more would make the kernel walk the transposed operand along its rows: column mode)."""
    x = RNG.standard_normal((3, 19)).astype(np.float64)
    yt = RNG.standard_normal((19, 3)).astype(np.float64)     # read through a transpose inside the kernel
    scale = RNG.standard_normal((3, 1)).astype(np.float64)   # one value per row
    shift = RNG.standard_normal(19).astype(np.float64)       # one value per col

    def f(x, yt, scale, shift):
        return (x - x.mean(-1, keepdim=True)) * scale + shift * yt.T

    (got,), (plain,) = run_both(f, fnx.tensor(x), fnx.tensor(yt), fnx.tensor(scale), fnx.tensor(shift))
    assert np.array_equal(got, plain)
    want = (x - x.mean(-1, keepdims=True)) * scale + shift * yt.T
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_reduction_over_several_dims_streams_each_inner_run():
    x = RNG.standard_normal((3, 4, 21)).astype(np.float32)
    (got,), (plain,) = run_both(lambda x: x - x.mean((1, 2), keepdim=True), fnx.tensor(x))
    assert np.array_equal(got, plain)
    np.testing.assert_allclose(got, x - x.mean((1, 2), keepdims=True), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float64])
def test_streamed_outputs_of_other_dtypes(dtype):
    x = RNG.integers(-50, 50, (5, 23)).astype(dtype)
    (got,), (plain,) = run_both(lambda x: x - x.amax(-1, keepdim=True), fnx.tensor(x))
    assert got.dtype == dtype and np.array_equal(got, plain)
    np.testing.assert_array_equal(got, x - x.max(-1, keepdims=True))


def test_only_large_outputs_and_unread_rows_stream():
    x = fnx.tensor(RNG.standard_normal((8, 64)).astype(np.float32))
    norm = lambda x: x - x.mean(-1, keepdim=True)
    source = build(norm, x).source()
    assert "fnx_stream_line(" in source and ">= 8388608LL" in source   # there, for outputs of 8 MiB and more
    # softmax keeps its exp values in the output row and reads them back: that row is not streamed
    assert "fnx_stream_line(" not in build(lambda x: F.softmax(x, -1), x, stream_min=0).source()
    # two per-element outputs: plain stores
    assert "fnx_stream_line(" not in build(lambda x: (norm(x), norm(x) * 2.0), x, stream_min=0).source()


def test_a_large_layer_norm_takes_the_streamed_path():
    """(2048, 1024) float32: an 8 MiB output, streamed by default; values as numpy's."""
    x = RNG.standard_normal((2048, 1024)).astype(np.float32)
    w, b = RNG.standard_normal(1024).astype(np.float32), RNG.standard_normal(1024).astype(np.float32)
    exe = build(lambda x, w, b: F.layer_norm(x, (1024,), w, b), fnx.tensor(x), fnx.tensor(w), fnx.tensor(b))
    (got,) = exe(fnx.tensor(x), fnx.tensor(w), fnx.tensor(b))
    np.testing.assert_allclose(got.numpy(), layer_norm_ref(x, w, b), rtol=1e-4, atol=1e-4)


def test_a_transposed_weight_that_several_small_products_read_is_made_row_major_once():
    """A recurrent cell's W.T read by a product per time step (few rows each): the driver copies it row-major once
    per call, so every product takes BLAS's plain path; read by one product, or by products of many rows, it
    stays a view. The values are the products'."""
    x = [RNG.standard_normal((8, 16)).astype(np.float32) for _ in range(3)]
    w = RNG.standard_normal((12, 16)).astype(np.float32)

    def cell(w, *xs):
        wt = w.T
        return [fnx.tanh(a @ wt) for a in xs]

    args = [fnx.tensor(a) for a in (w, *x)]
    exe = build(cell, *args)
    assert _copies_after_transpose(exe.driver_source)
    for got, a in zip(exe(*args), x):
        np.testing.assert_allclose(got.numpy(), np.tanh(a @ w.T), rtol=1e-5, atol=1e-6)
    assert not _copies_after_transpose(build(cell, *args[:2]).driver_source)
    assert not _copies_after_transpose(build(cell, args[0], fnx.ones(200, 16), fnx.ones(200, 16)).driver_source)


def _copies_after_transpose(driver: str) -> bool:
    """Whether the driver makes its transpose step's result row-major right after the step."""
    lines = driver.splitlines()
    at = next(i for i, line in enumerate(lines) if "transpose" in line)
    return "ascontiguous" in lines[at + 1]


def test_library_steps_give_kernels_row_major_arrays_and_0d_results_as_arrays():
    """numpy returns a scalar for a vector dot product and a transposed view for `.T`: the driver hands the
    kernels that read them a 0-d array and a row-major copy, and returns arrays."""
    a, b = RNG.standard_normal(5).astype(np.float32), RNG.standard_normal(5).astype(np.float32)
    m = RNG.standard_normal((3, 4)).astype(np.float32)

    def f(a, b, m):
        d = fnx.matmul(a, b)
        return d + 1.0, d, (m @ m.T).exp().sum(-1), fnx.sort(m.T, 0)[0] * 2.0

    args = fnx.tensor(a), fnx.tensor(b), fnx.tensor(m)
    exe = build(f, *args)
    assert "array0d(" in exe.driver_source   # (a kernel reading the sorted transpose as it lies would be wrong)
    got = [t._value for t in exe(*args)]
    want = [np.dot(a, b) + 1, np.dot(a, b), np.exp(m @ m.T).sum(-1), np.sort(m.T, 0) * 2]
    for g, w in zip(got, want):
        assert isinstance(g, np.ndarray) and g.shape == np.shape(w)
        np.testing.assert_allclose(g, w, rtol=1e-5)
