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
