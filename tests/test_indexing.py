"""Indexing and shape semantics the op table cannot express: views, setitem, masks, in-place methods, errors."""
import numpy as np
import pytest

import fnx
from fnx.core import FnxIndexError


def arange(*shape, dtype=fnx.float32):
    return fnx.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)


def shares_memory(a, b) -> bool:
    return np.shares_memory(a.numpy(), b.numpy())


# ---------------------------------------------------------------- views
@pytest.mark.parametrize("view", [
    lambda x: x[0], lambda x: x[1:, ::2], lambda x: x[None, ..., 1], lambda x: x[-1, None],
    lambda x: x.narrow(1, 1, 2), lambda x: x.select(0, 1), lambda x: x.split(2, 1)[1], lambda x: x.chunk(2)[0],
    lambda x: x.unbind(1)[2], lambda x: x.diagonal(), lambda x: x[:, 1:].diagonal(-1),
], ids=["int", "slices", "none_ellipsis", "negative_int", "narrow", "select", "split", "chunk", "unbind", "diagonal",
        "diagonal_of_slice"])
def test_basic_indexing_returns_views(view):
    x = arange(3, 4)
    v = view(x)
    assert shares_memory(v, x)
    assert v._version is x._version
    before = x.numpy().copy()
    v.add_(1)
    assert x._version[0] == 1
    assert not np.array_equal(x.numpy(), before)
    np.testing.assert_array_equal(view(fnx.tensor(before)).numpy() + 1, v.numpy())


def test_view_write_reaches_base_and_base_write_reaches_view():
    x = arange(2, 3)
    row = x[1]
    row[0] = 100.0
    assert x[1, 0].item() == 100.0
    x.mul_(2)
    assert row[0].item() == 200.0


def test_advanced_indexing_copies():
    x = arange(3, 4)
    for y in (x[[0, 2]], x[x > 5], x[:, fnx.tensor([1, 1])]):
        assert not shares_memory(y, x)
        assert y._version is not x._version


def test_reshape_that_copies_gets_its_own_version_counter():
    x = arange(3, 4)
    flat = x.T.reshape(-1)
    assert not shares_memory(flat, x) and flat._version is not x._version
    assert x.reshape(-1)._version is x._version


def test_repeat_and_roll_return_new_memory():
    x = arange(1, 3)
    for y in (x.repeat(2, 1), x.repeat(1, 1), fnx.roll(x, 0, 1), x.tile((3, 1)), x.repeat_interleave(1, 0)):
        assert not shares_memory(y, x)


def test_iteration_and_len_use_unbind():
    x = arange(3, 2)
    rows = list(x)
    assert len(x) == 3 and len(rows) == 3
    np.testing.assert_array_equal(rows[2].numpy(), [4, 5])


# ---------------------------------------------------------------- getitem semantics
def test_getitem_matches_numpy_and_pytorch_placement():
    x = arange(2, 3, 4, 5)
    a = x.numpy()
    assert x[0, :, [0, 1]].shape == (3, 2, 5)               # PyTorch: the int indexes first, [0, 1] stays put
    assert x[:, [0, 1], :, [0, 1]].shape == (2, 2, 4)      # separated index arrays: their dim goes first
    np.testing.assert_array_equal(x[:, [0, 1], :, [0, 1]].numpy(), a[:, [0, 1], :, [0, 1]])
    np.testing.assert_array_equal(x[..., [[0], [3]], [1, 2, 3]].numpy(), a[..., [[0], [3]], [1, 2, 3]])
    np.testing.assert_array_equal(x[np.array([1, -1]), 1:].numpy(), a[np.array([1, -1]), 1:])
    np.testing.assert_array_equal(x[1, ..., None].numpy(), a[1, ..., None])
    assert x[True].shape == (1, 2, 3, 4, 5) and x[:, False].shape == (2, 0, 3, 4, 5)
    assert x[[]].shape == (0, 3, 4, 5)
    assert x[fnx.tensor(1)].shape == (3, 4, 5)
    assert x[5:, ::3, -100:100].shape == (0, 1, 4, 5)


def test_basic_index_plans_kept_by_shape_and_index_read_under_grad_as_numpy():
    """getitem under grad keeps the plan of a basic index by the tensor's shape and the index: one index on
    several shapes, indices that differ only in their slices' bounds, and `True` beside `1` each get their own."""
    from fnx.ops import indexing
    indices = [(slice(None), 1), (slice(None), -1), (slice(1, None), 1), (slice(None, 2), 1), (slice(0, 3, 2), 1),
               (1, Ellipsis, None), (None, 0), 1, (slice(None), 1, slice(1, 3))]
    for shape in [(3, 4, 5), (4, 3, 2), (2, 2, 6)]:
        a = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        x = fnx.tensor(a, requires_grad=True)
        for index in indices * 2:   # the second pass reads the kept plans
            np.testing.assert_array_equal(x[index].detach().numpy(), a[index])
        assert x[True].shape == (1,) + shape and x[1].shape == shape[1:]
    y = fnx.ones(3, 4, requires_grad=True)
    y[:, 1].sum().backward()
    np.testing.assert_array_equal(y.grad.numpy(), np.eye(4, dtype=np.float32)[[1, 1, 1]])
    with pytest.raises(FnxIndexError, match="out of bounds"):
        y[:, 4]
    indexing._BASIC_PLANS.clear()


def test_bool_masks():
    x = arange(3, 4)
    a = x.numpy()
    np.testing.assert_array_equal(x[x > 4].numpy(), a[a > 4])
    np.testing.assert_array_equal(x[fnx.tensor([True, False, True])].numpy(), a[[0, 2]])
    np.testing.assert_array_equal(x[:, np.array([True, False, False, True])].numpy(), a[:, [0, 3]])
    np.testing.assert_array_equal(fnx.masked_select(x, x > 9).numpy(), [10, 11])
    np.testing.assert_array_equal(fnx.nonzero(x > 9).numpy(), [[2, 2], [2, 3]])
    rows, cols = fnx.nonzero(x > 9, as_tuple=True)
    assert rows.dtype is fnx.int64 and cols.tolist() == [2, 3]
    assert fnx.nonzero(fnx.tensor(3.0)).shape == (1, 0)


def test_gradient_through_mask_and_duplicate_indices():
    x = fnx.tensor([1.0, -2.0, 3.0], requires_grad=True)
    (x[x > 0] * 2).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2, 0, 2])
    x.grad = None
    x[[0, 0, 2, 0]].sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3, 0, 1])


@pytest.mark.parametrize("index", [(slice(None), 2), (1, slice(1, None, 2)), (None, Ellipsis, 0), (-1, None, 3),
                                   (0, 0, 0)], ids=["column", "row_strided", "none_ellipsis", "int_none", "element"])
def test_an_integer_or_none_index_under_grad_is_one_node_with_every_derivative(index):
    # x[:, t] in an RNN's loop: a slice node that also drops (or inserts) the dims of 1, not a slice and a
    # reshape; its gradient, through the engine's pieces, the rule (create_graph) and twice, is numpy's
    base = np.random.default_rng(0).standard_normal((3, 4, 5)).astype(np.float32)
    x = fnx.tensor(base, requires_grad=True)
    h = x * 1.0
    y = h[index]
    assert y.shape == base[index].shape and y.grad_fn.name == "SliceBackward"
    assert y.grad_fn.next_functions[0][0] is h.grad_fn
    w = np.arange(1, base[index].size + 1, dtype=np.float32).reshape(base[index].shape)
    want = np.zeros_like(base)
    want[index] = w
    (y * fnx.tensor(w)).sum().backward(retain_graph=True)
    np.testing.assert_array_equal(x.grad.numpy(), want)
    g, = fnx.autograd.grad((y ** 2 * 0.5).sum(), x, create_graph=True)
    np.testing.assert_array_equal(g.detach().numpy(), np.where(want != 0, base, 0))
    gg, = fnx.autograd.grad(g.sum(), x)
    np.testing.assert_array_equal(gg.numpy(), (want != 0).astype(np.float32))


def test_a_slice_viewed_with_other_dims_than_ones_is_refused_and_its_rules_keep_the_view():
    from fnx.ops.shape import slice_p
    x = fnx.randn(3, 4, 5)
    params = dict(starts=(0, 1, 0), stops=(3, 2, 5), steps=(1, 1, 1))
    with pytest.raises(fnx.core.FnxRuntimeError, match=r"slice of shape \[3, 1, 5\] cannot be viewed as \[5, 3\]"):
        fnx.make_jaxpr(lambda t: slice_p.bind(t, shape=(5, 3), **params))(x)   # traced: the abstract rule checks
    f = lambda t: slice_p.bind(t, shape=(3, 5), **params) * 2
    xs = fnx.randn(2, 3, 4, 5)
    np.testing.assert_array_equal(fnx.vmap(f)(xs).numpy(), xs.numpy()[:, :, 1] * 2)
    out, tangent = fnx.jvp(f, (x,), (fnx.ones(3, 4, 5),))
    assert out.shape == tangent.shape == (3, 5)
    np.testing.assert_array_equal(tangent.numpy(), np.full((3, 5), 2, np.float32))


# ---------------------------------------------------------------- setitem
def test_setitem_values_broadcasting_and_casts():
    x = fnx.zeros(3, 4)
    x[0] = 1.0
    x[1, 1:] = fnx.tensor([2.0, 3.0, 4.0])
    x[2] = fnx.tensor([[5.0, 6.0, 7.0, 8.0]])  # leading size-1 dims of the value are dropped
    x[:, 0] = fnx.tensor(9, dtype=fnx.int64)
    np.testing.assert_array_equal(x.numpy(), [[9, 1, 1, 1], [9, 2, 3, 4], [9, 6, 7, 8]])
    assert x._version[0] == 4
    n = fnx.zeros(4, dtype=fnx.int64)
    n[1:3] = 2.7
    n[[0, -1]] = fnx.tensor([5, 6], dtype=fnx.int32)
    assert n.tolist() == [5, 2, 2, 6] and n.dtype is fnx.int64


def test_setitem_advanced_and_masks():
    x = arange(3, 4)
    x[[0, 2], [1, 3]] = fnx.tensor([-1.0, -2.0])
    x[x > 9] = 0.0
    x[fnx.tensor([True, False, False]), 0] = 7.0
    np.testing.assert_array_equal(x.numpy(), [[7, -1, 2, 3], [4, 5, 6, 7], [8, 9, 0, -2]])
    y = arange(2, 3)
    y[:, [2, 0]] = fnx.tensor([[10.0], [20.0]])
    np.testing.assert_array_equal(y.numpy(), [[10, 1, 10], [20, 4, 20]])


def test_setitem_autograd_reaches_input_and_value():
    x = fnx.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    w = fnx.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 1
    y[0] = w
    (y * fnx.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 0, 0], [4, 5, 6]])
    np.testing.assert_array_equal(w.grad.numpy(), [1, 2, 3])
    assert y.grad_fn is not None and y.requires_grad


def test_setitem_scalar_and_broadcast_value_gradient():
    x = fnx.tensor(np.ones((3, 2)), requires_grad=True)
    s = fnx.tensor(2.0, requires_grad=True)
    y = x * 3
    y[1:, 1] = s
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[3, 3], [3, 0], [3, 0]])
    assert s.grad.item() == 2.0


@pytest.mark.parametrize("index", [(slice(1, None), None, 0), (np.array([0, 2]), slice(None, None, 2)),
                                   (Ellipsis, np.array([[1], [0]])), (np.array([True, False, True]),)],
                         ids=["basic", "advanced", "broadcast_arrays", "mask"])
def test_setitem_gradient_matches_finite_differences(index):
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((3, 2))
    target = x0[index].shape
    v0 = rng.standard_normal(target[1:])  # broadcast along the first result dim
    g = rng.standard_normal((3, 2))

    def f(x, v):
        y = x * x
        y[index] = v * v
        return y

    x, v = fnx.tensor(x0, requires_grad=True), fnx.tensor(v0, requires_grad=True)
    (f(x, v) * fnx.tensor(g)).sum().backward()
    eps = 1e-6
    for t, base, other in ((x, x0, v0), (v, v0, x0)):
        d = rng.standard_normal(base.shape)

        def value(sign):
            args = (base + sign * eps * d, other) if t is x else (other, base + sign * eps * d)
            return float((f(fnx.tensor(args[0]), fnx.tensor(args[1])).numpy() * g).sum())

        numeric = (value(1) - value(-1)) / (2 * eps)
        assert float((t.grad.numpy() * d).sum()) == pytest.approx(numeric, rel=1e-6, abs=1e-8)


def test_setitem_on_leaf_that_requires_grad():
    x = fnx.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x[0] = 2.0
    with fnx.no_grad():
        x[0] = 2.0
    assert x.tolist() == [2.0, 1.0, 1.0] and x.is_leaf


def test_setitem_bumps_version_and_guards_saved_tensors():
    a = fnx.ones(3, requires_grad=True)
    b = a * 2
    c = b * b
    b[0] = 5.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        c.sum().backward()


def test_setitem_under_a_transform_is_functionalized():
    g = fnx.grad(lambda x: (_set_first(x * 1) * x).sum())(fnx.tensor([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(g.numpy(), [0.0, 4.0, 6.0])


def test_setitem_of_a_traced_value_into_a_concrete_tensor_is_a_clear_error():
    with pytest.raises(RuntimeError, match="concrete tensor"):
        fnx.grad(lambda x: _set_first_to(fnx.zeros(3), x.sum()).sum())(fnx.ones(3))


def _set_first_to(y, value):
    y[0] = value
    return y


def _set_first(y):
    y[0] = 0.0
    return y


# ---------------------------------------------------------------- in-place methods of the family
def test_inplace_methods():
    x = fnx.zeros(2, 3)
    x.scatter_(1, fnx.tensor([[2], [0]]), 1.0)
    x.scatter_add_(0, fnx.tensor([[1, 1, 1]]), fnx.ones(1, 3))
    x.index_add_(1, fnx.tensor([0, 0]), fnx.ones(2, 2), alpha=2)
    x.index_fill_(0, fnx.tensor([0]), -1.0)
    x.masked_fill_(x > 4, 4.0)
    np.testing.assert_array_equal(x.numpy(), [[-1, -1, -1], [4, 1, 1]])
    t = fnx.ones(3, 3)
    assert t.tril_(-1).sum().item() == 3 and t.triu_(1).sum().item() == 0
    p = fnx.zeros(2, 2)
    p.index_put_((fnx.tensor([0, 0]), fnx.tensor([1, 1])), fnx.tensor(1.5), accumulate=True)
    p.put_(fnx.tensor([3]), fnx.tensor([2.0]))
    np.testing.assert_array_equal(p.numpy(), [[0, 3], [0, 2]])


def test_scatter_gather_duplicates_and_gradients():
    x = fnx.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    idx = fnx.tensor([[0, 0], [2, 2]])
    fnx.gather(x, 1, idx).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[2, 0, 0], [0, 0, 2]])
    src = fnx.tensor(np.ones((2, 2)), requires_grad=True)
    out = fnx.scatter_add(fnx.zeros(2, 3, dtype=fnx.float64), 1, idx, src)
    np.testing.assert_array_equal(out.detach().numpy(), [[2, 0, 0], [0, 0, 2]])
    (out * fnx.tensor([[1.0, 2, 3], [4, 5, 6]])).sum().backward()
    np.testing.assert_array_equal(src.grad.numpy(), [[1, 1], [6, 6]])
    x.grad = None
    fnx.scatter(x, 1, fnx.tensor([[1], [0]]), 9.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[1, 0, 1], [0, 1, 1]])


def test_one_hot_and_take_along_dim():
    labels = fnx.tensor([2, 0, 1])
    assert fnx.one_hot(labels).tolist() == [[0, 0, 1], [1, 0, 0], [0, 1, 0]]
    assert fnx.one_hot(labels, 4).dtype is fnx.int64 and fnx.one_hot(labels, 4).shape == (3, 4)
    x = arange(2, 3)
    best = x.argmax(1, keepdim=True)
    assert fnx.take_along_dim(x, best, 1).tolist() == [[2.0], [5.0]]
    assert fnx.take(x, fnx.tensor([[-1, 0]])).tolist() == [[5.0, 0.0]]


# ---------------------------------------------------------------- shape ops: specifics
def test_split_chunk_cat_specifics():
    x = arange(5, 2)
    assert [t.shape[0] for t in x.split(2)] == [2, 2, 1]
    assert [t.shape[0] for t in x.split([1, 4])] == [1, 4]
    assert [t.shape[0] for t in fnx.arange(6).chunk(4)] == [2, 2, 2]  # fewer chunks, as in PyTorch
    assert len(fnx.zeros(0).chunk(3)) == 3
    mixed = fnx.cat([fnx.ones(2, dtype=fnx.int32), fnx.ones(1), fnx.zeros(0)])
    assert mixed.dtype is fnx.float32 and mixed.shape == (3,)
    assert fnx.cat([fnx.zeros(0), arange(2, 2)]).shape == (2, 2)  # legacy: 1-D empty tensors are skipped
    assert fnx.stack([fnx.ones(2), fnx.zeros(2)], dim=-1).shape == (2, 2)
    assert fnx.hstack([fnx.ones(2), fnx.ones(3)]).shape == (5,)
    assert fnx.vstack([fnx.ones(2), fnx.ones(1, 2)]).shape == (2, 2)


def test_misc_shape_ops():
    x = arange(2, 3)
    assert fnx.roll(x, 1).tolist() == [[5.0, 0.0, 1.0], [2.0, 3.0, 4.0]]
    assert x.flip(0, 1).tolist() == [[5.0, 4.0, 3.0], [2.0, 1.0, 0.0]]
    assert fnx.repeat_interleave(fnx.tensor([1, 2])).tolist() == [0, 1, 1]
    assert x.repeat_interleave(fnx.tensor([2, 0]), dim=0).shape == (2, 3)
    ii, jj = fnx.meshgrid(fnx.arange(2), fnx.arange(3), indexing="ij")
    xx, yy = fnx.meshgrid(fnx.arange(2), fnx.arange(3), indexing="xy")
    assert ii.shape == (2, 3) and xx.shape == (3, 2) and yy[:, 0].tolist() == [0, 1, 2]
    assert fnx.pad(x, (1, 1), mode="reflect").tolist()[0] == [1.0, 0.0, 1.0, 2.0, 1.0]
    assert fnx.pad(x, (0, 0, 1, 0), value=-1.0)[0].tolist() == [-1.0, -1.0, -1.0]
    assert fnx.pad(x, (-1, 0)).shape == (2, 2)
    assert fnx.diag(fnx.diag(fnx.tensor([1.0, 2.0]))).tolist() == [1.0, 2.0]
    assert fnx.broadcast_shapes((2, 1), (3,)) == (2, 3)
    assert fnx.atleast_3d(fnx.ones(2)).shape == (1, 2, 1)


def test_vmap_of_indexing():
    x = fnx.tensor(np.arange(24.0).reshape(4, 2, 3))
    i = fnx.tensor([[0, 2], [1, 1], [2, 0], [0, 0]])
    out = fnx.vmap(lambda x, i: x[:, i])(x, i)
    np.testing.assert_array_equal(out.numpy(), np.stack([x.numpy()[b][:, i.numpy()[b]] for b in range(4)]))
    g = fnx.vmap(fnx.grad(lambda x, i: (x[1, i] ** 2).sum()))(x, i)
    assert g.shape == (4, 2, 3)


# ---------------------------------------------------------------- errors
@pytest.mark.parametrize("index, exc, match", [
    ((3,), IndexError, "index 3 is out of bounds for dimension 0 with size 3"),
    ((0, -5), IndexError, "index -5 is out of bounds for dimension 1 with size 4"),
    (([0, 3],), IndexError, "index 3 is out of bounds for dimension 0 with size 3"),
    ((0, 0, 0), IndexError, "too many indices for tensor of dimension 2"),
    ((Ellipsis, 0, Ellipsis), IndexError, "single ellipsis"),
    ((slice(None, None, -1),), ValueError, "step must be greater than zero"),
    ((slice(None, None, 0),), ValueError, "slice step cannot be zero"),
    ((fnx.tensor([0.0]),), IndexError, "long, int, byte or bool"),
    ((fnx.tensor([True, False]),), IndexError, r"The shape of the mask \[2\] at index 0 does not match"),
    (("a",), IndexError, "only integers, slices"),
    (([[0, 1]], [0, 1, 2]), IndexError, "could not be broadcast together"),
])
def test_getitem_errors(index, exc, match):
    x = arange(3, 4)
    with pytest.raises(exc, match=match):
        x[index]


def test_op_errors_name_the_op():
    x = arange(3, 4)
    with pytest.raises(FnxIndexError, match="gather: index 5 is out of bounds for dimension 1 with size 4"):
        fnx.gather(x, 1, fnx.tensor([[5]]))
    with pytest.raises(FnxIndexError, match="index_select: index -1 is out of bounds for dimension 0 with size 3"):
        fnx.index_select(x, 0, fnx.tensor([-1]))
    with pytest.raises(IndexError, match="select\\(\\): index 3 out of range"):
        x.select(0, 3)
    with pytest.raises(RuntimeError, match="shape mismatch: value tensor of shape \\[3\\] cannot be broadcast"):
        x[0] = fnx.ones(3)
    with pytest.raises(RuntimeError, match="Sizes of tensors must match|sizes of tensors must match"):
        fnx.cat([x, fnx.ones(2, 3)], 1)
    with pytest.raises(RuntimeError, match="stack expects each tensor to be equal size"):
        fnx.stack([x, x[:2]])
    with pytest.raises(RuntimeError, match="narrow\\(\\): start \\(2\\) \\+ length \\(3\\) exceeds"):
        x.narrow(0, 2, 3)
    with pytest.raises(RuntimeError, match="split_with_sizes expects split_sizes to sum exactly to 3"):
        x.split([1, 1])
    with pytest.raises(RuntimeError, match="negative output size"):
        fnx.pad(x, (-3, -2))
    with pytest.raises(RuntimeError, match="padding size should be less than"):
        fnx.pad(x, (4, 0), mode="reflect")
    with pytest.raises(NotImplementedError, match="reduce='multiply'"):
        fnx.scatter(x, 0, fnx.tensor([[0]]), 2.0, reduce="multiply")
    with pytest.raises(RuntimeError, match="only supports boolean masks"):
        x.masked_fill(fnx.ones(4), 0.0)
    with pytest.raises(RuntimeError, match="Class values must be smaller than num_classes"):
        fnx.one_hot(fnx.tensor([3]), 3)


def test_value_dependent_ops_under_vmap_are_clear_errors():
    x = arange(2, 3)
    with pytest.raises(TypeError, match="boolean mask indexing"):
        fnx.vmap(lambda r: r[r > 1])(x)
    with pytest.raises(TypeError, match="nonzero"):
        fnx.vmap(lambda r: fnx.nonzero(r))(x)


def test_value_dependent_ops_work_under_grad():
    x = fnx.tensor([1.0, -2.0, 3.0])
    np.testing.assert_array_equal(fnx.grad(lambda x: (x[x > 0] ** 2).sum())(x).numpy(), [2, 0, 6])
