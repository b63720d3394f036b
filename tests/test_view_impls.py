"""The eager impls of the movement primitives: views where numpy's are views, the same values as numpy's."""
import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

import fnx


@given(hnp.mutually_broadcastable_shapes(num_shapes=1, min_dims=0, max_dims=4, max_side=3), st.booleans())
def test_broadcast_to_is_a_read_only_view_equal_to_numpys(shapes, transposed):
    (shape,), target = shapes
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    if transposed:   # a non-contiguous input
        x = x.T
        target = target[:len(target) - x.ndim] + x.shape
    t = fnx.tensor(x)
    out = fnx.broadcast_to(t, target)
    np.testing.assert_array_equal(out.numpy(), np.broadcast_to(x, target))
    assert out is t if target == x.shape else not out.numpy().flags.writeable
    assert out.numel() == 0 or np.shares_memory(out.numpy(), t.numpy())


def test_broadcast_to_a_wrong_shape_names_both_shapes():
    with pytest.raises(RuntimeError, match=r"cannot broadcast shape \[3\] to \[2\]"):
        fnx.broadcast_to(fnx.ones(3), (2,))


@st.composite
def _pieces(draw):
    """Pieces to join along their last dim: many rows (where runs are copied as opaque items) or few, some pieces
    empty or read through a stride, of one dtype."""
    rows = draw(st.sampled_from([(3,), (600,), (4, 160)]))
    dtype = draw(st.sampled_from([np.float32, np.float64, np.int64, np.float16, np.bool_]))
    rng = np.random.default_rng(draw(st.integers(0, 3)))
    pieces = []
    for width in draw(st.lists(st.integers(0, 40), min_size=1, max_size=3)):
        x = (rng.standard_normal(rows + (2 * width,)) * 100).astype(dtype)
        pieces.append(x[..., ::2] if draw(st.booleans()) else np.ascontiguousarray(x[..., :width]))
    return pieces


@given(_pieces())
def test_cat_along_the_last_dim_gives_numpys_bits(pieces):
    out = fnx.cat([fnx.tensor(p) for p in pieces], dim=-1).numpy()
    expected = np.concatenate(pieces, axis=-1)
    assert out.dtype == expected.dtype and out.shape == expected.shape
    assert out.tobytes() == expected.tobytes()


@given(_pieces(), st.integers(0, 5), st.integers(0, 5))
def test_pad_of_the_last_dim_gives_numpys_bits(pieces, lo, hi):
    x = pieces[0]
    out = fnx.nn.functional.pad(fnx.tensor(x), (lo, hi)).numpy()
    expected = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(lo, hi)])
    assert out.dtype == expected.dtype and out.tobytes() == expected.tobytes()
