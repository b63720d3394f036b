"""fnx.testing (torch.testing): assert_close's tolerances, checks and messages, and make_tensor."""
import numpy as np
import pytest

import fnx
from fnx.testing import assert_close, make_tensor


def test_assert_close_uses_pytorch_s_tolerances_per_dtype():
    assert_close(fnx.tensor([1.0, 2.0]), fnx.tensor([1.0, 2.0 + 2e-6]))            # float32: 1.3e-6 rel + 1e-5 abs
    with pytest.raises(AssertionError, match=r"Mismatched elements: 1 / 2 \(50.0%\)\n.*at index \(1,\) \(up to "
                                             r"1e-05 allowed\)"):
        assert_close(fnx.tensor([1.0, 2.0]), fnx.tensor([1.0, 2.001]))
    assert_close(fnx.tensor([1.0], dtype=fnx.float64), fnx.tensor([1.0 + 1e-8], dtype=fnx.float64))
    with pytest.raises(AssertionError, match="Tensor-likes are not equal!"):   # integers: exact
        assert_close(fnx.tensor([1, 2]), fnx.tensor([1, 3]))
    assert_close(fnx.tensor([1.0]), fnx.tensor([1.5]), rtol=0.0, atol=0.5)
    with pytest.raises(ValueError, match="Both 'rtol' and 'atol'"):
        assert_close(fnx.tensor([1.0]), fnx.tensor([1.0]), rtol=0.1)


def test_assert_close_checks_shape_dtype_nan_and_containers():
    with pytest.raises(AssertionError, match="'dtype' do not match: fnx.float32 != fnx.float64"):
        assert_close(fnx.tensor([1.0]), fnx.tensor([1.0], dtype=fnx.float64))
    assert_close(fnx.tensor([1.0]), fnx.tensor([1.0], dtype=fnx.float64), check_dtype=False)
    with pytest.raises(AssertionError, match="'shape' do not match"):
        assert_close(fnx.ones(2), fnx.ones(3))
    with pytest.raises(AssertionError, match="Greatest absolute difference: nan"):
        assert_close(fnx.tensor([float("nan")]), fnx.tensor([float("nan")]))
    assert_close(fnx.tensor([float("nan"), float("inf")]), fnx.tensor([float("nan"), float("inf")]), equal_nan=True)
    assert_close({"a": [fnx.ones(2), 3]}, {"a": [np.ones(2, np.float32), 3]})
    with pytest.raises(AssertionError, match=r"Scalars are not close at input\['a'\]\[0\]!"):
        assert_close({"a": [fnx.tensor(2.0)]}, {"a": [fnx.tensor(2.5)]})
    with pytest.raises(AssertionError, match="custom"):
        assert_close(fnx.ones(1), fnx.zeros(1), msg="custom")


def test_make_tensor_draws_in_range_with_the_layout_asked_for():
    fnx.manual_seed(0)
    t = make_tensor(3, 4, dtype=fnx.float64, low=-1, high=1)
    assert t.shape == (3, 4) and t.dtype is fnx.float64 and float(t.abs().max()) <= 1
    i = make_tensor((50,), dtype=fnx.int64, low=2, high=5, exclude_zero=True)
    assert i.dtype is fnx.int64 and 2 <= int(i.min()) and int(i.max()) < 5
    assert not make_tensor(3, 4, dtype=fnx.float32, noncontiguous=True).is_contiguous()
    assert make_tensor(2, dtype=fnx.float32, requires_grad=True).requires_grad
    assert make_tensor(4, dtype=fnx.bool).dtype is fnx.bool
