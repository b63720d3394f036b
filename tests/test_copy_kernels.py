"""Strided copies on fnx's threads (fnx/lowering/copy_kernels.py, `array_layout.copy_into` / `copied`): any layout
of source and destination (permuted, sliced with steps, a channel slice of a channels-last array) of every element
size gives numpy's copy, writing nothing outside the destination; contiguous copies in one order, element sizes the
loops do not have and small copies stay with numpy; the eager ops that copy by them (clone and contiguous of
strided tensors, the join of channels-last tensors) give numpy's values in PyTorch's layouts."""
from __future__ import annotations

import shutil
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fnx
from fnx import array_layout as layout
from fnx.lowering import copy_kernels

pytestmark = pytest.mark.skipif(not any(shutil.which(c) for c in ("cc", "gcc", "clang")), reason="needs a C compiler")
DTYPES = [np.uint8, np.float16, np.int32, np.float32, np.float64, np.complex64]


@st.composite
def _views(draw, shape: tuple, dtype) -> tuple:
    """(a base array, the function that views it as `shape`): its dims permuted and some taken every other
    element or from an offset."""
    order = draw(st.permutations(range(len(shape))))
    steps = [draw(st.sampled_from([1, 1, 2])) for _ in shape]
    starts = [draw(st.integers(0, 1)) for _ in shape]
    base_shape = [shape[d] * steps[d] + starts[d] for d in order]
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    base = rng.integers(0, 1 << 7, base_shape).astype(dtype)
    index = tuple(slice(starts[d], starts[d] + shape[d] * steps[d], steps[d]) for d in order)
    return base, lambda b: b[index].transpose([order.index(d) for d in range(len(shape))])


@settings(max_examples=150, deadline=None)
@given(data=st.data(), dtype=st.sampled_from(DTYPES),
       shape=st.lists(st.integers(1, 7), min_size=1, max_size=5).map(tuple))
def test_any_layouts_copy_as_numpy_does_and_nothing_else_is_written(data, dtype, shape):
    source, view = data.draw(_views(shape, dtype))
    src = view(source)
    base, view = data.draw(_views(shape, dtype))
    want = base.copy()
    view(want)[...] = src
    with mock.patch.object(copy_kernels, "MIN_BYTES", 1):
        ran = copy_kernels.copy_into(view(base), src)
    if not ran:   # one memcpy, from one block of memory to another: numpy's
        assert layout.dense_order(src) is not None and layout.dense_order(view(base)) is not None
        return
    assert np.array_equal(base, want)


def test_the_loops_decline_contiguous_copies_small_ones_and_wide_elements():
    a = np.arange(1 << 16, dtype=np.float32).reshape(256, 256)
    assert not copy_kernels.copy_into(np.empty_like(a), a)   # one memcpy: numpy's
    small = a[:8, ::2]
    assert not copy_kernels.copy_into(np.empty(small.shape, small.dtype), small)
    wide = a.astype(np.complex128)[:, ::2]
    assert not copy_kernels.copy_into(np.empty(wide.shape, wide.dtype), wide)
    strided = a[:, ::2]
    out = np.empty(strided.shape, strided.dtype)
    assert copy_kernels.copy_into(out, strided) and np.array_equal(out, strided)


def test_clone_contiguous_and_joins_of_strided_tensors_give_numpys_values_in_pytorchs_layouts():
    rng = np.random.default_rng(0)
    big = fnx.tensor(rng.standard_normal((4, 32, 16, 16)).astype(np.float32)).to(memory_format=fnx.channels_last)
    part = big[:, 8:24]   # a channel slice of a channels-last tensor, as cat's backward hands out
    want = big.numpy()[:, 8:24]
    last = part.contiguous(memory_format=fnx.channels_last)
    assert last.is_contiguous(memory_format=fnx.channels_last) and np.array_equal(last.numpy(), want)
    rows = part.contiguous()
    assert rows.is_contiguous() and np.array_equal(rows.numpy(), want)
    joined = fnx.cat([last, big, part], dim=1)
    assert joined.is_contiguous(memory_format=fnx.channels_last)
    assert np.array_equal(joined.numpy(), np.concatenate([want, big.numpy(), want], axis=1))
    turned = fnx.cat([rows.transpose(2, 3), rows.transpose(2, 3)], dim=0)   # no common layout: row-major
    assert turned.is_contiguous() and np.array_equal(turned.numpy(), np.concatenate([want.transpose(0, 1, 3, 2)] * 2))
