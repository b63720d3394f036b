"""unique, searchsorted/bucketize, Tensor.unfold, as_strided and the in-place shape methods beyond the op table:
errors, eager-only outputs, autograd through in-place shape changes."""
import numpy as np
import pytest

import fnx
from fnx.core import FnxRuntimeError


def test_unique_is_eager_only_with_a_clear_error():
    with pytest.raises(FnxRuntimeError, match="unique: the number of unique elements depends on the values"):
        fnx.vmap(fnx.unique)(fnx.tensor([[1, 2], [2, 2]]))
    with pytest.raises(FnxRuntimeError, match="unique_consecutive: the number"):
        fnx.compile(fnx.unique_consecutive)(fnx.tensor([1, 1, 2]))


def test_unique_sorted_false_and_method_forms():
    x = fnx.tensor([3.0, 1.0, 3.0, 2.0])
    assert fnx.unique(x, sorted=False).tolist() == [1.0, 2.0, 3.0]
    values, counts = x.unique(return_counts=True)
    assert values.dtype is fnx.float32 and counts.dtype is fnx.int64 and counts.tolist() == [1, 1, 2]
    assert x.unique_consecutive().tolist() == [3.0, 1.0, 3.0, 2.0]


def test_searchsorted_and_bucketize_options():
    seq = fnx.tensor([1.0, 3.0, 5.0, 7.0])
    assert fnx.searchsorted(seq, fnx.tensor([3.0, 6.0])).tolist() == [1, 3]
    assert fnx.searchsorted(seq, fnx.tensor([3.0, 6.0]), side="right").tolist() == [2, 3]
    assert fnx.searchsorted(seq, 5.0, right=True).item() == 3 and fnx.searchsorted(seq, 5.0).ndim == 0
    assert fnx.bucketize(fnx.tensor([[0, 3], [8, 5]]), fnx.tensor([1, 3, 5, 7]), out_int32=True).dtype is fnx.int32
    unsorted = fnx.tensor([7.0, 1.0, 5.0, 3.0])
    assert fnx.searchsorted(unsorted, fnx.tensor([4.0]), sorter=fnx.argsort(unsorted)).tolist() == [2]
    with pytest.raises(FnxRuntimeError, match="side and right can't be set to opposites"):
        fnx.searchsorted(seq, fnx.tensor([1.0]), right=True, side="left")
    with pytest.raises(FnxRuntimeError, match="first N-1 dimensions of boundaries tensor and input value tensor"):
        fnx.searchsorted(fnx.ones(2, 3), fnx.ones(3, 1))
    with pytest.raises(FnxRuntimeError, match="bucketize: boundaries tensor must be 1 dimension"):
        fnx.bucketize(fnx.ones(3), fnx.ones(2, 2))


def test_unfold_errors_and_gradient_sums_overlapping_windows():
    x = fnx.arange(5.0, requires_grad=True)
    x.unfold(0, 3, 1).sum().backward()
    assert x.grad.tolist() == [1.0, 2.0, 3.0, 2.0, 1.0]
    with pytest.raises(FnxRuntimeError, match="maximum size for tensor at dimension 0 is 5 but size is 6"):
        x.unfold(0, 6, 1)
    with pytest.raises(FnxRuntimeError, match="step is 0 but must be > 0"):
        x.unfold(0, 2, 0)
    assert fnx.tensor(2.0).unfold(0, 1, 1).tolist() == [2.0]


def test_as_strided_reads_row_major_data_and_checks_bounds():
    x = fnx.arange(6.0).reshape(2, 3).t()   # a transposed view: as_strided reads its row-major order
    np.testing.assert_array_equal(fnx.as_strided(x, (2,), (1,), 1).numpy(), x.contiguous().reshape(-1)[1:3].numpy())
    y = fnx.arange(4.0, requires_grad=True)
    y.as_strided((3, 2), (1, 1)).sum().backward()   # overlapping windows: gradients add up
    assert y.grad.tolist() == [1.0, 2.0, 2.0, 1.0]
    with pytest.raises(FnxRuntimeError, match="as_strided: setStorage: .* require a storage of 7 elements"):
        fnx.as_strided(fnx.ones(4), (2, 2), (3, 2), 1)


def test_in_place_shape_methods_keep_memory_and_graph():
    x = fnx.zeros(2, 1, 3)
    alias = x.squeeze_(1)
    assert alias is x and x.shape == (2, 3)
    x.unsqueeze_(0)
    assert x.shape == (1, 2, 3)
    x.transpose_(0, 2)
    assert x.shape == (3, 2, 1)
    m = fnx.arange(6.0).reshape(2, 3)
    m.t_()
    assert m.tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    a = fnx.ones(3, requires_grad=True)
    b = a * 2.0
    b.unsqueeze_(1)
    (b * fnx.arange(3.0).reshape(3, 1)).sum().backward()
    assert a.grad.tolist() == [0.0, 2.0, 4.0]
    with pytest.raises(FnxRuntimeError, match="unsqueeze_: a leaf Variable that requires grad"):
        a.unsqueeze_(0)


def test_in_place_shape_methods_under_transforms():
    def f(x):
        y = x * 1.0
        y.unsqueeze_(0)
        y.t_()
        return (y * fnx.arange(3.0).reshape(3, 1)).sum()

    assert fnx.grad(f)(fnx.ones(3)).tolist() == [0.0, 1.0, 2.0]
    assert fnx.compile(f)(fnx.ones(3)).item() == 3.0


def test_vmap_of_searchsorted_over_values_with_an_unbatched_2d_sequence():
    """Each example's rows of values search the matching rows of one N-D sequence (a vmap bug: the unbatched
    sequence was not expanded to the batch, found by a clean-clone run's draw)."""
    seq = fnx.tensor([[0.0, 1.0, 2.0], [1.0, 2.0, 3.0]])
    values = fnx.tensor(np.random.default_rng(0).uniform(0, 3, (4, 2, 3)))
    got = fnx.vmap(lambda v: fnx.searchsorted(seq, v))(values)
    want = fnx.stack([fnx.searchsorted(seq, values[i]) for i in range(4)])
    np.testing.assert_array_equal(got.numpy(), want.numpy())
