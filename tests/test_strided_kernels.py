"""The C loops of eager arithmetic on strided and broadcast layouts (fnx/lowering/strided_kernels.py): numpy's
bits, the first operand's layout, any view (permuted, sliced with steps, broadcast in any dims), and the calls of
Llama's rotary embedding through fnx's ops."""
from __future__ import annotations

import shutil
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fnx
from fnx import array_layout as layout
from fnx.core import Primitive
from fnx.lowering import eager_kernels, strided_kernels

pytestmark = pytest.mark.skipif(not any(shutil.which(c) for c in ("cc", "gcc", "clang")), reason="needs a C compiler")

NUMPY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide, "neg": np.negative}


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    """The same shape and bits (any NaN for a NaN)."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    nan = np.isnan(want)
    return bool(np.array_equal(np.isnan(got), nan) and np.array_equal(got[~nan], want[~nan])
                and np.array_equal(np.signbit(got[~nan]), np.signbit(want[~nan])))


@st.composite
def _views(draw, shape: tuple, dtype, sliced: bool = True) -> np.ndarray:
    """An array of `shape`: a permuted view of a base array, with `sliced` every other element of some of its
    dims."""
    order = draw(st.permutations(range(len(shape))))
    steps = [draw(st.sampled_from([1, 1, 2])) if sliced else 1 for _ in shape]
    base_shape = [shape[d] * steps[d] for d in order]
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    base = rng.standard_normal(base_shape).astype(dtype)
    if draw(st.booleans()):   # NaNs, infinities, signed zeros, a subnormal among the values
        flat = base.reshape(-1)
        flat[::5] = np.resize(np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40], dtype), flat[::5].size)
    view = base[tuple(slice(None, None, steps[d]) for d in order)]
    return np.asarray(view).transpose([order.index(d) for d in range(len(shape))])


@settings(max_examples=120, deadline=None)
@given(data=st.data(), op=st.sampled_from(sorted(strided_kernels.OPS)), dtype=st.sampled_from([np.float32, np.float64]),
       shape=st.lists(st.integers(1, 6), min_size=1, max_size=4).map(tuple))
def test_the_loops_give_numpys_bits_in_the_first_operands_layout(data, op, dtype, shape):
    binary = strided_kernels.OPS[op] == 2
    x = data.draw(_views(shape, dtype))
    operands = [x]
    if binary:
        kept = data.draw(st.lists(st.booleans(), min_size=len(shape), max_size=len(shape)))
        lead = data.draw(st.integers(0, len(shape)))
        y_shape = tuple(n if k else 1 for n, k in zip(shape, kept))[lead:]
        operands.append(data.draw(_views(y_shape, dtype)))
    with mock.patch.object(strided_kernels, "MIN_ELEMENTS", 1), np.errstate(all="ignore"):
        launch = strided_kernels.launch(Primitive.registry[op], tuple(operands))
        want = NUMPY[op](*operands)
        if launch is None:
            return
        got = eager_kernels._strided(launch, *operands)
    assert _same(got, want)
    order = tuple(range(x.ndim)) if x.flags.c_contiguous else layout.dense_order(x)
    if order is None:   # a strided first operand: the output in the order of its strides
        order = tuple(sorted(range(x.ndim), key=lambda d: -x.strides[d]))
    assert got.transpose(order).flags.c_contiguous


def test_the_loops_decline_what_numpy_loops_over_well():
    """Contiguous operands of the output's shape or broadcast along its leading dims, a broadcast first operand,
    integer and small operands, and a first operand that steps by more than one element along its innermost dim
    beside a second."""
    mul, neg = Primitive.registry["mul"], Primitive.registry["neg"]
    rng = np.random.default_rng(0)
    full = rng.standard_normal((64, 256)).astype(np.float32)
    row = rng.standard_normal(256).astype(np.float32)
    for args in ((mul, (full, full)), (mul, (full, row)), (mul, (row, full)), (neg, (full,)),
                 (mul, (full.astype(np.int64), full.astype(np.int64))), (mul, (full[:8], full[:8].T.copy().T)),
                 (mul, (full[:, ::2], full[:, :128]))):
        assert strided_kernels.launch(*args) is None


def test_rotary_embedding_runs_the_loops_with_numpys_values_and_layouts():
    """Llama's rotary q * cos + rotate_half(q) * sin on a query laid out (B, T, H, D) and seen as (B, H, T, D),
    the tables broadcast over the heads: the products, the sum and the negated half run the strided loops (their
    launches kept by layout) and give numpy's values and layouts; the gradient too."""
    rng = np.random.default_rng(1)
    base = rng.standard_normal((8, 64, 4, 32)).astype(np.float32)
    cos, sin = (rng.standard_normal((8, 1, 64, 32)).astype(np.float32) for _ in range(2))
    q = fnx.tensor(base, requires_grad=True)
    qt = q.transpose(1, 2)
    qn = base.transpose(0, 2, 1, 3)
    half = fnx.cat((-qt[..., 16:], qt[..., :16]), dim=-1)
    out = qt * fnx.tensor(cos) + half * fnx.tensor(sin)
    want_half = np.concatenate((-qn[..., 16:], qn[..., :16]), -1)
    want = qn * cos + want_half * sin
    assert _same(out.detach().numpy(), want) and out.stride() == qt.stride()
    strided = {key[0].name for key, launch in eager_kernels._launches.items() if len(launch) == 4}
    assert {"mul", "add", "neg"} <= strided
    g = rng.standard_normal(want.shape).astype(np.float32)
    out.backward(fnx.tensor(g))
    gq = g * cos
    gh = g * sin
    gq[..., 16:] -= gh[..., :16]
    gq[..., :16] += gh[..., 16:]
    np.testing.assert_allclose(q.grad.numpy(), gq.transpose(0, 2, 1, 3), rtol=1e-6, atol=1e-6)
