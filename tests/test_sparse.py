"""Sparse COO tensors (fnx.sparse, torch.sparse's API): construction, coalescing, products and their gradients,
sparse embedding gradients and the optimizers that take them, against numpy and recorded PyTorch 2.13 numbers."""
import io

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fnx
import fnx.nn.functional as F

I = np.array([[0, 1, 1, 0], [2, 0, 2, 2]])
V = np.array([3.0, 4.0, 5.0, 6.0], np.float32)
DENSE = np.array([[0, 0, 9], [4, 0, 5]], np.float32)   # I, V summed (the entry (0, 2) twice)


def _example(**kwargs):
    return fnx.sparse_coo_tensor(fnx.tensor(I), fnx.tensor(V), (2, 3), **kwargs)


@st.composite
def _coo(draw):
    """(indices, values, shape) of a random 2-D COO matrix with repeated indices, float64."""
    shape = (draw(st.integers(1, 5)), draw(st.integers(1, 5)))
    nnz = draw(st.integers(0, 8))
    rows = draw(st.lists(st.integers(0, shape[0] - 1), min_size=nnz, max_size=nnz))
    cols = draw(st.lists(st.integers(0, shape[1] - 1), min_size=nnz, max_size=nnz))
    values = draw(st.lists(st.floats(-3, 3), min_size=nnz, max_size=nnz))
    return np.array([rows, cols], np.int64).reshape(2, nnz), np.array(values, np.float64), shape


def _dense(indices, values, shape):
    out = np.zeros(shape)
    np.add.at(out, tuple(indices), values)
    return out


# ---------------------------------------------------------------- the tensor and its queries
def test_layout_queries():
    s = _example()
    assert s.is_sparse and s.layout is fnx.sparse_coo and isinstance(s, fnx.Tensor)
    assert s.shape == (2, 3) and s.dtype is fnx.float32 and s.ndim == 2 and s.numel() == 6
    assert (s.sparse_dim(), s.dense_dim(), s._nnz(), s.is_coalesced()) == (2, 0, 4, False)
    np.testing.assert_array_equal(s._indices().numpy(), I)
    np.testing.assert_array_equal(s._values().numpy(), V)
    assert not fnx.ones(2).is_sparse and fnx.ones(2).layout is fnx.strided
    assert not s.is_contiguous()


def test_dense_tensors_answer_sparse_queries_as_pytorch():
    x = fnx.ones(2, 3)
    assert (x.sparse_dim(), x.dense_dim(), x.is_sparse_csr) == (0, 2, False)
    with pytest.raises(RuntimeError, match="coalesce expected sparse coordinate tensor layout but got Strided"):
        x.coalesce()
    with pytest.raises(RuntimeError, match="values expected sparse tensor layout"):
        x.values()
    for refused in (x.to_sparse_csr, x.crow_indices, lambda: fnx.sparse_csr_tensor([0, 1], [0], [1.0])):
        with pytest.raises(NotImplementedError, match="compressed sparse layouts"):
            refused()
    assert fnx.sparse_csr is not fnx.sparse_coo and repr(fnx.sparse_csr) == "fnx.sparse_csr"


@settings(max_examples=25, deadline=None)
@given(_coo())
def test_coalesce_and_to_dense_match_numpy(coo):
    indices, values, shape = coo
    s = fnx.sparse_coo_tensor(fnx.tensor(indices), fnx.tensor(values), shape)
    np.testing.assert_allclose(s.to_dense().numpy(), _dense(indices, values, shape))
    c = s.coalesce()
    assert c.is_coalesced()
    keys = np.ravel_multi_index(tuple(c.indices().numpy()), shape)
    assert np.all(np.diff(keys) > 0)   # sorted and unique
    np.testing.assert_allclose(c.to_dense().numpy(), _dense(indices, values, shape))
    back = s.to_dense().to_sparse()
    assert back.is_coalesced()
    np.testing.assert_array_equal(back.to_dense().numpy(), s.to_dense().numpy())


def test_coalesce_sums_duplicates_in_index_order():
    c = _example().coalesce()
    np.testing.assert_array_equal(c.indices().numpy(), [[0, 1, 1], [2, 0, 2]])
    np.testing.assert_array_equal(c.values().numpy(), [9, 4, 5])
    with pytest.raises(RuntimeError, match="uncoalesced"):
        _example().indices()
    with pytest.raises(RuntimeError, match="uncoalesced"):
        _example().values()


def test_constructors_and_their_checks():
    s = fnx.sparse_coo_tensor(I.tolist(), V.tolist())   # lists; size from the indices
    assert s.shape == (2, 3) and s.dtype is fnx.float32
    assert fnx.sparse_coo_tensor(I, V, (2, 3), is_coalesced=True).is_coalesced()
    legacy = fnx.sparse.FloatTensor(fnx.tensor(I), fnx.tensor(V), fnx.Size([2, 3]))
    assert isinstance(legacy, fnx.sparse.FloatTensor) and not isinstance(legacy, fnx.sparse.DoubleTensor)
    np.testing.assert_array_equal(legacy.to_dense().numpy(), DENSE)
    empty = fnx.sparse.DoubleTensor(4, 5)
    assert empty.shape == (4, 5) and empty._nnz() == 0 and empty.dtype is fnx.float64
    hybrid = fnx.sparse_coo_tensor([[0, 2]], np.ones((2, 3)), (4, 3))
    assert (hybrid.sparse_dim(), hybrid.dense_dim()) == (1, 1)
    with pytest.raises(RuntimeError, match="size is inconsistent with indices: for dim 0, size is 1"):
        fnx.sparse_coo_tensor(I, V, (1, 3), check_invariants=True)
    with pytest.raises(RuntimeError, match="nnz from indices: 4, nnz from values: 3"):
        fnx.sparse_coo_tensor(I, V[:3], (2, 3))
    with pytest.raises(RuntimeError, match="sparse_dim x nnz"):
        fnx.sparse_coo_tensor(I[0], V)
    with pytest.raises(RuntimeError, match="negative index"):
        fnx.sparse_coo_tensor([[-1]], [1.0], (2,))


def test_to_sparse_with_sparse_dim_and_sparse_mask():
    d = fnx.tensor([[0.0, 1.0, 0.0], [2.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    rows = d.to_sparse(1)
    assert (rows.sparse_dim(), rows.dense_dim(), rows._nnz()) == (1, 1, 2)
    np.testing.assert_array_equal(rows.values().numpy(), [[0, 1, 0], [2, 0, 0]])
    assert d.to_dense() is d and d.to_sparse_coo()._nnz() == 2
    masked = fnx.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3)).sparse_mask(_example())
    np.testing.assert_array_equal(masked._indices().numpy(), I)
    np.testing.assert_array_equal(masked._values().numpy(), [2, 3, 5, 2])


# ---------------------------------------------------------------- arithmetic
def test_arithmetic():
    s, t = _example(), fnx.sparse_coo_tensor([[1], [1]], [1.0], (2, 3))
    np.testing.assert_array_equal((s * 2)._values().numpy(), V * 2)
    np.testing.assert_array_equal((2 * s)._values().numpy(), V * 2)
    np.testing.assert_array_equal((s / 2)._values().numpy(), V / 2)
    np.testing.assert_array_equal((-s)._values().numpy(), -V)
    total = s + t
    assert total._nnz() == 5 and not total.is_coalesced()   # PyTorch's sum of uncoalesced operands: uncoalesced
    np.testing.assert_array_equal(total.to_dense().numpy(), DENSE + [[0, 0, 0], [0, 1, 0]])
    both = s.coalesce() + t.coalesce()   # coalesced operands: their coalesced union
    assert both.is_coalesced() and both._nnz() == 4
    np.testing.assert_array_equal((s - t).to_dense().numpy(), DENSE - [[0, 0, 0], [0, 1, 0]])
    ones = fnx.ones(2, 3)
    np.testing.assert_array_equal((ones + s).numpy(), 1 + DENSE)
    np.testing.assert_array_equal(fnx.add(ones, s, alpha=2).numpy(), 1 + 2 * DENSE)
    np.testing.assert_array_equal((ones - s).numpy(), 1 - DENSE)
    scaled = s * fnx.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3))
    np.testing.assert_array_equal(scaled._values().numpy(), V * [2, 3, 5, 2])
    with pytest.raises(RuntimeError, match=r"add\(sparse, dense\) is not supported. Use add\(dense, sparse\)"):
        s + ones
    np.testing.assert_array_equal(s.double().to_dense().numpy(), DENSE)
    assert s.double().dtype is fnx.float64 and s.to(fnx.float32) is s


def test_zero_preserving_unary_ops_act_on_the_coalesced_values():
    s = fnx.sparse_coo_tensor(fnx.tensor(I), fnx.tensor([3.0, -4.0, 5.0, 6.0]), (2, 3))
    coalesced = np.array([9.0, -4.0, 5.0], np.float32)   # PyTorch's results: coalesced, the op on these
    for op, ref in ((fnx.abs, np.abs), (fnx.tanh, np.tanh), (F.relu, lambda v: np.maximum(v, 0)),
                    (lambda t: t ** 2, np.square), (fnx.sign, np.sign), (fnx.signbit, np.signbit)):
        out = op(s)
        assert out.is_sparse and out.is_coalesced()
        np.testing.assert_allclose(out._values().numpy(), ref(coalesced), rtol=1e-6)
    for refused in (fnx.exp, fnx.sigmoid, lambda t: t > 0, lambda t: t ** 0):   # f(0) != 0, or not one operand
        with pytest.raises(NotImplementedError, match="not supported for sparse COO tensors"):
            refused(s)
    leaf = _example(requires_grad=True)
    F.relu(leaf * -1.0 + leaf * 2.0).to_dense().sum().backward()
    np.testing.assert_array_equal(leaf.grad._values().numpy(), [1, 1, 1])


def test_in_place_and_transpose():
    s = _example()
    s.mul_(2)
    np.testing.assert_array_equal(s.to_dense().numpy(), 2 * DENSE)
    s.add_(_example())
    np.testing.assert_array_equal(s.to_dense().numpy(), 3 * DENSE)
    np.testing.assert_array_equal(s.t().to_dense().numpy(), 3 * DENSE.T)
    np.testing.assert_array_equal(s.transpose(0, 1)._indices().numpy(), np.concatenate([I, I], 1)[::-1])
    s.zero_()
    assert s._nnz() == 0 and s.shape == (2, 3)


def test_dense_ops_refuse_with_the_op_named():
    s = _example()
    with pytest.raises(NotImplementedError, match=r"exp: not supported for sparse COO tensors.*to_dense\(\)"):
        fnx.exp(s)
    with pytest.raises(NotImplementedError, match="to_dense"):
        F.softmax(s, 0)
    with pytest.raises(TypeError, match="to_dense"):
        s.numpy()
    with pytest.raises(NotImplementedError, match="indexing"):
        s[0]
    with pytest.raises(NotImplementedError, match="concatenate: not supported for sparse"):
        fnx.cat([s, s])
    with pytest.raises(NotImplementedError, match=r"fnx.save: obj\['adj'\] is a sparse COO tensor"):
        fnx.save({"adj": s}, io.BytesIO())
    with pytest.raises(RuntimeError, match="strides"):
        s.stride()


# ---------------------------------------------------------------- products, reductions, softmax
@settings(max_examples=20, deadline=None)
@given(_coo(), st.integers(1, 3))
def test_sparse_products_match_dense(coo, k):
    indices, values, shape = coo
    s = fnx.sparse_coo_tensor(fnx.tensor(indices), fnx.tensor(values), shape)
    dense = _dense(indices, values, shape)
    d = np.random.default_rng(0).standard_normal((shape[1], k))
    for out in (fnx.sparse.mm(s, fnx.tensor(d)), fnx.spmm(s, fnx.tensor(d)), fnx.mm(s, fnx.tensor(d)),
                fnx.matmul(s, fnx.tensor(d)), s @ fnx.tensor(d), fnx.dsmm(s, fnx.tensor(d))):
        np.testing.assert_allclose(out.numpy(), dense @ d, atol=1e-12)
    np.testing.assert_allclose((s @ fnx.tensor(d[:, 0])).numpy(), dense @ d[:, 0], atol=1e-12)
    left = np.random.default_rng(1).standard_normal((k, shape[0]))
    np.testing.assert_allclose(fnx.mm(fnx.tensor(left), s).numpy(), left @ dense, atol=1e-12)
    np.testing.assert_allclose(fnx.sparse.mm(s, s.t()).to_dense().numpy(), dense @ dense.T, atol=1e-12)
    m = np.ones((shape[0], k))
    np.testing.assert_allclose(fnx.sparse.addmm(fnx.tensor(m), s, fnx.tensor(d), beta=2.0, alpha=3.0).numpy(),
                               2 * m + 3 * dense @ d, atol=1e-12)
    h = fnx.hspmm(s, fnx.tensor(d))
    assert h.sparse_dim() == 1 and h._nnz() == np.unique(indices[0]).size
    np.testing.assert_allclose(h.to_dense().numpy(), dense @ d, atol=1e-12)
    np.testing.assert_allclose(fnx.smm(s, fnx.tensor(d)).to_dense().numpy(), dense @ d, atol=1e-12)


def test_sum():
    s = _example()
    assert fnx.sparse.sum(s).item() == 18 and s.sum().item() == 18
    by_col = fnx.sparse.sum(s, 0)
    assert by_col.is_sparse and by_col.is_coalesced()
    np.testing.assert_array_equal(by_col.indices().numpy(), [[0, 2]])
    np.testing.assert_array_equal(by_col.values().numpy(), [4, 14])
    assert fnx.sparse.sum(s, (0, 1)).item() == 18
    hybrid = fnx.sparse_coo_tensor([[0, 2]], np.arange(6.0).reshape(2, 3), (4, 3))
    np.testing.assert_array_equal(fnx.sparse.sum(hybrid, 1).to_dense().numpy(), [3, 0, 12, 0])


def test_softmax_over_the_specified_entries():
    s = _example()
    x = np.where(DENSE != 0, DENSE, -np.inf)
    ref = np.exp(x - x.max(1, keepdims=True))
    ref = ref / ref.sum(1, keepdims=True)
    soft = fnx.sparse.softmax(s, 1)
    assert soft.is_coalesced()
    np.testing.assert_allclose(soft.to_dense().numpy(), ref, rtol=1e-6)
    np.testing.assert_allclose(fnx.sparse.log_softmax(s, 1).values().numpy(), np.log(ref[DENSE != 0]), rtol=1e-6)


def test_spdiags_matches_scipy_layout():
    diags = fnx.tensor([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]])
    out = fnx.sparse.spdiags(diags, fnx.tensor([0, -1]), (4, 4)).to_dense().numpy()
    ref = np.diag([1.0, 2, 3, 4]) + np.diag([5.0, 6, 7], -1)
    np.testing.assert_array_equal(out, ref)


# ---------------------------------------------------------------- gradients
def test_gradients_of_sparse_mm_vs_finite_differences():
    d = np.random.default_rng(2).standard_normal((3, 2))

    def f(values, dense):
        return fnx.sparse.mm(fnx.sparse_coo_tensor(fnx.tensor(I), values, (2, 3)), dense)

    args = (fnx.tensor(V.astype(np.float64), requires_grad=True), fnx.tensor(d, requires_grad=True))
    assert fnx.autograd.gradcheck(f, args)
    s = fnx.sparse_coo_tensor(fnx.tensor(I), args[0], (2, 3))
    assert not s.is_leaf and s.requires_grad


# d/dvalues of (f(S) * W).sum() for an uncoalesced S, f as below: PyTorch 2.13's (float64)
GRAD_TORCH = {
    "softmax": [0.0, -3.52512e-05, 3.52512e-05, 0.0, 0.0],
    "log_softmax": [-0.6962995043, 0.0, 0.6962995043, -0.6962995043, 0.0],
    "sum": [0.2857142857, 0.0, 0.2857142857, 0.2857142857, 0.1428571429],
    "mm": [0.4693877551, 0.2857142857, 1.7551020408, 0.4693877551, 1.7551020408],
    "mul_dense": [0.0816326531, 0.1836734694, 0.5102040816, 0.0816326531, 1.0],
}


@pytest.mark.parametrize("name", sorted(GRAD_TORCH))
def test_value_gradients_match_torch(name):
    w = fnx.tensor(np.arange(9.0).reshape(3, 3) / 7)   # float64, as v
    f = {"softmax": lambda s: fnx.sparse.softmax(s, 1).to_dense() * w,
         "log_softmax": lambda s: fnx.sparse.log_softmax(s, 0).to_dense() * w,
         "sum": lambda s: fnx.sparse.sum(s, 0).to_dense() * w[0],
         "mm": lambda s: fnx.sparse.mm(s, w) * w,
         "mul_dense": lambda s: (s * w).to_dense() * w}[name]
    v = fnx.tensor([3.0, -4.0, 5.0, 6.0, 0.5], dtype=fnx.float64, requires_grad=True)
    f(fnx.sparse_coo_tensor([[0, 1, 1, 0, 2], [2, 0, 2, 2, 1]], v, (3, 3))).sum().backward()
    np.testing.assert_allclose(v.grad.numpy(), GRAD_TORCH[name], rtol=1e-8, atol=1e-10)


def test_sparse_leaf_gradient_is_sparse_and_coalesced():
    d = np.random.default_rng(3).standard_normal((3, 2)).astype(np.float32)
    s = _example(requires_grad=True)
    assert s.is_leaf and s.requires_grad
    dense = fnx.tensor(d, requires_grad=True)
    fnx.sparse.mm(s, dense).sum().backward()
    g = s.grad   # PyTorch's: the gradient at the coalesced tensor's indices, each once
    assert g.is_sparse
    np.testing.assert_array_equal(g._indices().numpy(), [[0, 1, 1], [2, 0, 2]])
    np.testing.assert_allclose(g._values().numpy(), d.sum(1)[[2, 0, 2]], rtol=1e-6)
    np.testing.assert_allclose(dense.grad.numpy(), DENSE.T @ np.ones((2, 2)), rtol=1e-6)
    s.grad = None
    s.to_dense().sum().backward()
    np.testing.assert_array_equal(s.grad._values().numpy(), [1, 1, 1])


# ---------------------------------------------------------------- Embedding(sparse=True) and the optimizers
X = [[1, 3, 1], [0, 3, 4]]


def test_sparse_embedding_gradient():
    emb = fnx.nn.Embedding(5, 2, sparse=True)
    emb(fnx.tensor(X)).sum().backward()
    g = emb.weight.grad
    assert g.is_sparse and not g.is_coalesced()   # one entry per lookup, in the input's order, as PyTorch's
    np.testing.assert_array_equal(g._indices().numpy(), [[1, 3, 1, 0, 3, 4]])
    np.testing.assert_array_equal(g._values().numpy(), np.ones((6, 2)))
    emb(fnx.tensor([2])).sum().backward()   # accumulating joins the entries
    np.testing.assert_array_equal(emb.weight.grad._indices().numpy(), [[1, 3, 1, 0, 3, 4, 2]])
    padded = fnx.nn.Embedding(5, 2, sparse=True, padding_idx=3)
    padded(fnx.tensor(X)).sum().backward()
    np.testing.assert_array_equal(padded.weight.grad._indices().numpy(), [[1, 1, 0, 4]])
    freq = fnx.nn.Embedding(5, 2, sparse=True, scale_grad_by_freq=True)
    with pytest.raises(RuntimeError, match="scale_grad_by_freq not supported with sparse gradients"):
        freq(fnx.tensor(X)).sum().backward()


def test_sparse_and_dense_gradients_of_one_weight_add_up_dense():
    emb = fnx.nn.Embedding(5, 2, sparse=True)   # a weight that is also used densely (tied): its gradient is dense
    rows = emb(fnx.tensor([1, 3, 1]))
    (rows.sum() + emb.weight.sum() * 2).backward()
    g = emb.weight.grad
    assert not g.is_sparse
    np.testing.assert_array_equal(g.numpy()[:, 0], [2, 4, 2, 3, 2])


def test_sparse_embedding_bag_gradient():
    bag = fnx.nn.EmbeddingBag(5, 2, sparse=True, mode="mean")
    bag(fnx.tensor(X)).sum().backward()
    np.testing.assert_array_equal(bag.weight.grad._indices().numpy(), [[1, 3, 1, 0, 3, 4]])
    np.testing.assert_allclose(bag.weight.grad._values().numpy(), np.full((6, 2), 1 / 3), rtol=1e-6)
    bag = fnx.nn.EmbeddingBag(5, 2, sparse=True, mode="sum")
    bag(fnx.tensor([1, 3, 1, 0, 4]), fnx.tensor([0, 2]), per_sample_weights=fnx.tensor([1.0, 2, 3, 4, 5])).sum() \
        .backward()
    np.testing.assert_array_equal(bag.weight.grad._values().numpy()[:, 0], [1, 2, 3, 4, 5])
    with pytest.raises(ValueError, match="max mode does not support sparse weights"):
        fnx.nn.EmbeddingBag(5, 2, sparse=True, mode="max")(fnx.tensor(X))


W0 = np.random.RandomState(0).randn(6, 3).astype(np.float32)
BATCHES = [[[1, 3, 1], [0, 3, 4]], [[5, 5, 2]], [[0, 1], [1, 4]], [[3]]]
TORCH = {   # PyTorch 2.13's weights after the 4 steps of `_trajectory`
    "sparse_adam": [[1.5783291, 0.21472186, 0.79310083], [2.055145, 1.6818283, -0.79253376],
                    [0.8756748, -0.22577086, -0.17763251], [0.23915589, -0.026777558, 1.2820818],
                    [0.57544917, -0.06345474, 0.25840098], [0.25926065, 1.4196655, -0.27957192]],
    "sparse_adam_max": [[1.8581293, 0.49426207, 1.072826], [2.334966, 1.9616339, -1.0714029],
                        [0.98837745, -0.11306836, -0.064929985], [0.49901146, 0.2325876, 1.5425104],
                        [0.85513085, 0.21579294, 0.5379664], [0.37196332, 1.5323682, -0.16686934]],
    "sgd_momentum": [[-0.21989144, -0.38863254, -0.31705055], [-1.9294304, -1.7347287, -0.2510901],
                     [0.3213301, -0.3025287, -0.27526316], [-0.82978237, -0.7332468, -1.2077595],
                     [-0.3439844, -0.42308635, -0.38322523], [-0.38928807, -0.23518617, -0.46084502]],
    "sgd_nesterov": [[0.9985195, 0.09579157, 0.47873974], [0.55524373, 0.41150975, -0.68375206],
                     [0.67819685, -0.21672772, -0.17761531], [-0.027627036, -0.16590239, 0.5137792],
                     [0.33464935, -0.08852886, 0.124719515], [0.021046463, 0.7462994, -0.31572387]],
    "adagrad": [[1.5966362, 0.23701589, 0.81263644], [2.0729244, 1.6998197, -0.8181987],
                [0.8516619, -0.24152756, -0.195195], [0.27160287, 0.0072089094, 1.3127674],
                [0.5956658, -0.037316315, 0.28033757], [0.23510665, 1.395147, -0.30079007]],
}
OPTIMIZERS = {
    "sparse_adam": lambda p: fnx.optim.SparseAdam(p, lr=0.1),
    "sparse_adam_max": lambda p: fnx.optim.SparseAdam(p, lr=0.05, betas=(0.8, 0.9), eps=1e-6, maximize=True),
    "sgd_momentum": lambda p: fnx.optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.2),
    "sgd_nesterov": lambda p: fnx.optim.SGD(p, lr=0.05, momentum=0.5, nesterov=True),
    "adagrad": lambda p: fnx.optim.Adagrad(p, lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1),
}


def _trajectory(make_optimizer, steps: int = 4):
    emb = fnx.nn.Embedding(6, 3, sparse=True)
    with fnx.no_grad():
        emb.weight.copy_(fnx.tensor(W0))
    opt = make_optimizer(emb.parameters())
    for batch in BATCHES[:steps]:
        opt.zero_grad()
        rows = emb(fnx.tensor(batch))
        (rows.pow(2).sum() + emb(fnx.tensor(batch)).sum()).backward()
        opt.step()
    return emb.weight.detach().numpy(), opt


@pytest.mark.parametrize("name", sorted(TORCH))
def test_optimizers_on_sparse_gradients_follow_torch(name):
    got, opt = _trajectory(OPTIMIZERS[name])
    np.testing.assert_allclose(got, np.array(TORCH[name], np.float32), rtol=0, atol=1e-6)
    if name.startswith("sgd"):
        assert opt.state[opt.param_groups[0]["params"][0]]["momentum_buffer"].is_sparse


def test_sparse_adam_state_and_refusals():
    got, opt = _trajectory(OPTIMIZERS["sparse_adam"], steps=1)
    state = opt.state[opt.param_groups[0]["params"][0]]
    assert list(state) == ["step", "exp_avg", "exp_avg_sq"] and state["step"] == 1
    assert not state["exp_avg"].is_sparse
    untouched = [2, 5]   # rows of no gradient yet: their moments and weights stay
    assert state["exp_avg"][untouched].abs().sum().item() == 0 and state["exp_avg_sq"][untouched].sum().item() == 0
    np.testing.assert_array_equal(got[untouched], W0[untouched])
    with pytest.raises(ValueError, match=r"Sparse params at indices \[\[0, 0\]\]: SparseAdam requires dense"):
        fnx.optim.SparseAdam([fnx.zeros(2).to_sparse()])
    dense = fnx.nn.Parameter(fnx.ones(2))
    dense.grad = fnx.ones(2)
    with pytest.raises(RuntimeError, match="SparseAdam does not support dense gradients"):
        fnx.optim.SparseAdam([dense]).step()


def test_other_optimizers_refuse_sparse_gradients():
    for make, message in ((lambda p: fnx.optim.Adam(p), "Adam does not support sparse gradients, please consider "
                                                        "SparseAdam"),
                          (lambda p: fnx.optim.RMSprop(p), "RMSprop does not support sparse gradients"),
                          (lambda p: fnx.optim.SGD(p, lr=0.1, weight_decay=0.1), r"add\(sparse, dense\)"),
                          (lambda p: fnx.optim.Adagrad(p, weight_decay=0.1), "weight_decay option is not compatible")):
        with pytest.raises(RuntimeError, match=message):
            _trajectory(make, steps=1)


def test_zero_grad_and_clip_grad_norm():
    emb = fnx.nn.Embedding(5, 2, sparse=True)
    opt = fnx.optim.SGD(emb.parameters(), lr=0.1)
    emb(fnx.tensor(X)).sum().backward()
    opt.zero_grad(set_to_none=False)
    assert emb.weight.grad.is_sparse and emb.weight.grad._nnz() == 0
    opt.zero_grad()
    assert emb.weight.grad is None
    emb(fnx.tensor(X)).sum().backward()
    assert abs(emb.weight.grad.norm().item() - np.sqrt(20)) < 1e-6   # of the coalesced gradient, as PyTorch's
    with pytest.raises(NotImplementedError, match="sparse"):   # PyTorch 2.13 refuses too (no sparse vector_norm)
        fnx.nn.utils.clip_grad_norm_(emb.parameters(), 1.0)


def test_grad_scaler_unscales_sparse_gradients():
    emb = fnx.nn.Embedding(5, 2, sparse=True)
    before = emb.weight.detach().clone()
    opt, scaler = fnx.optim.SGD(emb.parameters(), lr=0.5), fnx.amp.GradScaler("cpu", init_scale=1024.0)
    scaler.scale(emb(fnx.tensor(X)).sum()).backward()
    scaler.step(opt)
    expected = before.numpy() - 0.5 * np.bincount(np.ravel(X), minlength=5)[:, None]
    np.testing.assert_allclose(emb.weight.detach().numpy(), expected, rtol=1e-6)


# ---------------------------------------------------------------- Kipf's GCN (pygcn), as its train.py runs it
GCN_LOSSES_TORCH = [1.095265507698059, 1.0825165510177612, 1.0717617273330688, 1.0634276866912842,
                    1.0582903623580933, 1.0561861991882324, 1.0561524629592896, 1.0568125247955322]


def test_two_layer_gcn_follows_torch():
    rng = np.random.RandomState(0)
    a = np.zeros((30, 30), np.float32)
    e = rng.randint(0, 30, size=(80, 2))
    a[e[:, 0], e[:, 1]] = 1
    a = np.maximum(a, a.T) + np.eye(30, dtype=np.float32)
    a = a / a.sum(1, keepdims=True)
    rows, cols = np.nonzero(a)
    x = fnx.from_numpy((rng.rand(30, 8) > 0.6).astype(np.float32))
    y = fnx.from_numpy(rng.randint(0, 3, 30))
    params = [fnx.nn.Parameter(fnx.from_numpy(rng.uniform(-0.3, 0.3, s).astype(np.float32)))
              for s in ((8, 16), (16,), (16, 3), (3,))]
    adj = fnx.sparse.FloatTensor(fnx.from_numpy(np.stack([rows, cols]).astype(np.int64)),
                                 fnx.from_numpy(a[rows, cols]), fnx.Size([30, 30]))
    opt = fnx.optim.Adam(params, lr=0.01, weight_decay=5e-4)
    losses = []
    for _ in range(8):
        opt.zero_grad()
        h = F.relu(fnx.spmm(adj, fnx.mm(x, params[0])) + params[1])
        out = F.log_softmax(fnx.spmm(adj, fnx.mm(h, params[2])) + params[3], dim=1)
        loss = F.nll_loss(out[:20], y[:20])
        loss.backward()
        opt.step()
        losses.append(loss.item())
    np.testing.assert_allclose(losses, GCN_LOSSES_TORCH, rtol=0, atol=1e-6)
