"""PyTorch's remaining top-level names and Tensor methods (fnx/ops/aten.py, fnx/nn/torch_native.py, the Tensor
queries in fnx/tensor.py): what the op table (tests/op_db_aten.py) cannot check. Values without a closed form are
PyTorch 2.13's, recorded."""
import warnings

import numpy as np
import pytest

import fnx
import fnx.nn.functional as F
from test_nn_torch_level import positional_parameters


def test_range_is_end_inclusive_float_and_deprecated():
    with pytest.warns(UserWarning, match="torch.range is deprecated"):
        r = fnx.range(1, 4)
    assert r.dtype is fnx.float32 and r.tolist() == [1.0, 2.0, 3.0, 4.0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert fnx.range(0, 1, 0.25).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
        assert fnx.range(4, 1, -1).tolist() == [4.0, 3.0, 2.0, 1.0]
        assert fnx.range(1, 3, dtype=fnx.int64).dtype is fnx.int64
        assert fnx.range(2, requires_grad=True).requires_grad
        with pytest.raises(RuntimeError, match="step must be nonzero"):
            fnx.range(1, 4, 0)
        with pytest.raises(RuntimeError, match="inconsistent with step sign"):
            fnx.range(4, 1)
        with pytest.raises(NotImplementedError, match="sparse_coo"):
            fnx.range(1, 4, layout="sparse_coo")


def test_newaxis_adjoint_and_in_place_functions():
    assert fnx.newaxis is None and fnx.ones(2)[:, fnx.newaxis].shape == (2, 1)
    z = fnx.tensor([[1 + 2j, 3j]])
    np.testing.assert_array_equal(fnx.adjoint(z).numpy(), z.numpy().conj().T)
    x = fnx.zeros(3)
    assert fnx.index_put_(x, (fnx.tensor([0, 2]),), fnx.tensor([1.0, 2.0])) is x and x.tolist() == [1, 0, 2]
    assert fnx.addmv_(x, fnx.eye(3), fnx.ones(3), beta=2).tolist() == [3, 1, 5]
    c = fnx.tensor([1 + 1j])
    assert fnx.conj_physical_(c) is c and c.tolist() == [1 - 1j]
    assert fnx.resize_as_(x, fnx.ones(1)) is x and x.tolist() == [3]
    w = fnx.ones(2, requires_grad=True)
    y = w * 2
    assert fnx.detach_(y) is y and y.grad_fn is None and not y.requires_grad


def test_fill_and_rsub_errors_as_pytorch():
    with pytest.raises(RuntimeError, match="0-dimension value tensor"):
        fnx.fill(fnx.ones(2), fnx.tensor([1.0]))
    assert fnx.fill(fnx.ones(2, dtype=fnx.int64), 2.7).tolist() == [2, 2]
    assert fnx.rsub(fnx.tensor([1, 2]), 3).dtype is fnx.int64
    with pytest.raises(RuntimeError):
        fnx.rsub(fnx.tensor([True]), fnx.tensor([True]))


def test_unsafe_splits_are_the_splits():
    x = fnx.arange(5)
    assert [t.tolist() for t in fnx.unsafe_split(x, 2)] == [[0, 1], [2, 3], [4]]
    assert [t.tolist() for t in x.unsafe_chunk(2)] == [[0, 1, 2], [3, 4]]
    assert [t.tolist() for t in x.unsafe_split_with_sizes([2, 3])] == [[0, 1], [2, 3, 4]]
    assert x.narrow_copy(0, 1, 2).tolist() == [1, 2]


def test_nonzero_static_edges_and_transforms():
    assert fnx.nonzero_static(fnx.tensor(5), size=2).shape == (2, 0)
    assert fnx.tensor([0, 3]).nonzero_static(size=2, fill_value=-5).tolist() == [[1], [-5]]
    with pytest.raises(RuntimeError, match="non-negative"):
        fnx.nonzero_static(fnx.ones(2), size=-1)
    rows = fnx.tensor([[0, 1, 1], [1, 0, 0]])
    expected = [[[1], [2]], [[0], [-1]]]
    assert fnx.vmap(lambda r: fnx.nonzero_static(r, size=2))(rows).tolist() == expected
    assert fnx.compile(lambda r: fnx.nonzero_static(r, size=4))(rows).tolist() == [[0, 1], [0, 2], [1, 0], [-1, -1]]


def test_matrix_rank_is_linalg_matrix_rank_with_a_warning():
    a = fnx.tensor([[1.0, 2.0], [2.0, 4.0]])
    with pytest.warns(FutureWarning, match="linalg.matrix_rank"):
        assert fnx.matrix_rank(a).item() == 1
    with pytest.warns(FutureWarning):
        assert fnx.matrix_rank(a, symmetric=True).item() == 1


def test_resize_and_resize_as_keep_the_element_count():
    x = fnx.arange(6.0, requires_grad=True)
    with pytest.warns(UserWarning, match="non-inplace resize is deprecated"):
        y = x.resize(2, 3)
    y.sum().backward()
    assert y.shape == (2, 3) and x.grad.tolist() == [1.0] * 6
    with pytest.warns(UserWarning, match="non-inplace resize_as is deprecated"):
        assert x.resize_as(fnx.ones(3, 2)).shape == (3, 2)
    with pytest.warns(UserWarning), pytest.raises(RuntimeError, match="autograd's resize"):
        x.resize(4)


def test_set_and_is_set_to_share_memory():
    a, b = fnx.ones(3), fnx.zeros(2, 2)
    assert a.is_set_to(a) and a.is_set_to(a.view(3)) and not a.is_set_to(a.clone())
    assert a.set_(b) is a and a.shape == (2, 2) and a.is_set_to(b)
    b[0, 0] = 5
    assert a[0, 0].item() == 5
    assert fnx.ones(3).set_().shape == (0,)
    assert fnx.ones(3).set_(b.untyped_storage(), 1, (3,), (1,)).tolist() == [0, 0, 0]
    assert fnx.ones(3).set_(b.untyped_storage()).tolist() == [5, 0, 0, 0]
    with pytest.raises(RuntimeError, match="out of bounds"):
        fnx.ones(3).set_(b.untyped_storage(), 2, (3,), (1,))
    with pytest.raises(RuntimeError, match="requires grad"):
        fnx.ones(2, requires_grad=True).set_(fnx.zeros(2))
    with pytest.raises(RuntimeError, match="dtype"):
        fnx.ones(2).set_(fnx.zeros(2, dtype=fnx.float64))
    with pytest.raises(NotImplementedError, match="under fnx transforms"):
        fnx.vmap(lambda t: t.set_(t))(fnx.ones(2, 2))


def test_tensor_queries():
    class Sub(fnx.Tensor):
        pass

    x = fnx.ones(2, requires_grad=True)
    s = (x * 2).as_subclass(Sub)
    assert type(s) is Sub and s.requires_grad and s.grad_fn is not None
    s.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]
    with pytest.raises(TypeError, match="inherit from Tensor"):
        x.as_subclass(int)
    assert x.output_nr == 0 and x.name is None
    with fnx.inference_mode():
        y = fnx.ones(2)
    assert not y.is_inference() and not fnx.is_inference(y)


def test_igamma_methods():
    a, x = fnx.tensor([1.0, 2.0]), fnx.tensor([1.0, 2.0])
    np.testing.assert_allclose(a.igamma(x).numpy(), [0.6321, 0.5940], atol=1e-4)   # PyTorch 2.13's values
    np.testing.assert_allclose(a.igammac(x).numpy(), [0.3679, 0.4060], atol=1e-4)
    assert a.igamma_(x) is a
    np.testing.assert_allclose(a.numpy(), [0.6321, 0.5940], atol=1e-4)
    b = fnx.tensor([1.0, 2.0])
    b.igammac_(x)
    np.testing.assert_allclose(b.numpy(), [0.3679, 0.4060], atol=1e-4)


# ---------------------------------------------------------------- nn kernels
def test_native_dropout_returns_the_mask():
    fnx.manual_seed(0)
    x = fnx.ones(200)
    out, mask = fnx.native_dropout(x, 0.5, True)
    assert mask.dtype is fnx.bool and 40 < mask.sum().item() < 160
    np.testing.assert_array_equal(out.numpy(), np.where(mask.numpy(), 2.0, 0.0))
    out, mask = fnx.native_dropout(x, 0.5, False)
    assert mask.all().item() and out.tolist() == x.tolist() and out is not x
    assert not fnx.native_dropout(fnx.ones(3), 1.0, None)[1].any().item()
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        fnx.native_dropout(x, 1.5, True)


def test_native_batch_norm_evaluation_and_running_stats():
    x = fnx.arange(12.0).reshape(2, 3, 2)
    mean, var = fnx.zeros(3), fnx.ones(3)
    out, m, r = fnx.native_batch_norm(x, None, None, mean, var, True, 0.1, 1e-5)
    np.testing.assert_allclose(mean.numpy(), 0.1 * x.numpy().mean((0, 2)), rtol=1e-6)
    np.testing.assert_allclose(var.numpy(), 0.9 + 0.1 * x.numpy().var((0, 2), ddof=1), rtol=1e-6)
    out, m, r = fnx.native_batch_norm(x, None, None, mean, var, False, 0.1, 1e-5)
    assert m.shape == (0,) and r.shape == (0,)
    with pytest.raises(RuntimeError, match="running_mean"):
        fnx.native_batch_norm(x, None, None, None, None, False, 0.1, 1e-5)
    with pytest.raises(RuntimeError, match="N \\* C \\* HxW"):
        fnx.native_group_norm(x, None, None, 2, 3, 3, 3, 1e-5)


def test_convolution_and_conv_tbc_forms():
    x, w = fnx.randn(1, 2, 5), fnx.randn(3, 2, 2)
    np.testing.assert_allclose(fnx.convolution(x, w, None, [1], [0], [1], False, [0], 1).numpy(),
                               F.conv1d(x, w).numpy())
    with pytest.raises(RuntimeError, match="output_padding"):
        fnx.convolution(x, w, None, [1], [0], [1], False, [1], 1)
    with pytest.raises(RuntimeError, match="3-D, 4-D or 5-D weight"):
        fnx.convolution(x, fnx.ones(3), None, [1], [0], [1], False, [0], 1)
    assert F.conv_tbc is fnx.conv_tbc and F.native_channel_shuffle is fnx.native_channel_shuffle
    assert fnx.native_channel_shuffle(fnx.arange(6.0).reshape(1, 6, 1), 2).flatten().tolist() == [0, 3, 1, 4, 2, 5]
    with pytest.raises(RuntimeError, match="input channels"):
        fnx.conv_tbc(fnx.ones(3, 1, 2), fnx.ones(1, 3, 2), fnx.ones(2))


def test_grid_sampler_int_modes_and_affine_grid_generator():
    img, grid = fnx.randn(1, 2, 3, 4), fnx.rand(1, 2, 3, 2) * 2.4 - 1.2
    for i, mode in enumerate(("bilinear", "nearest")):
        for p, padding in enumerate(("zeros", "border", "reflection")):
            np.testing.assert_array_equal(fnx.grid_sampler_2d(img, grid, i, p, True).numpy(),
                                          F.grid_sample(img, grid, mode, padding, True).numpy())
    with pytest.raises(ValueError, match="padding_mode"):
        fnx.grid_sampler(img, grid, 0, 3, False)
    with pytest.raises(RuntimeError, match="5-D input"):
        fnx.grid_sampler_3d(img, grid, 0, 0, False)
    theta = fnx.randn(1, 2, 3)
    np.testing.assert_array_equal(fnx.affine_grid_generator(theta, [1, 1, 2, 3], False).numpy(),
                                  F.affine_grid(theta, [1, 1, 2, 3], False).numpy())


def test_embedding_renorm_matches_pytorch():
    w = fnx.tensor([[3.0, 4.0], [0.3, 0.4], [1.0, 0.0]])
    assert fnx.embedding_renorm_(w, fnx.tensor([0, 1, 1]), 1.0, 2.0) is w
    np.testing.assert_allclose(w.numpy(), [[0.6, 0.8], [0.3, 0.4], [1.0, 0.0]], rtol=1e-6)


@pytest.mark.parametrize("mode", ["gru", "rnn_tanh", "rnn_relu"])
def test_recurrent_kernels_match_the_modules(mode):
    fnx.manual_seed(0)
    layer = {"gru": fnx.nn.GRU, "rnn_tanh": fnx.nn.RNN,
             "rnn_relu": lambda *a, **k: fnx.nn.RNN(*a, nonlinearity="relu", **k)}[mode](
        3, 4, num_layers=2, bidirectional=True, batch_first=True)
    x, h0 = fnx.randn(2, 5, 3), fnx.randn(4, 2, 4)
    params = [p for p in layer.parameters()]
    out, h = getattr(fnx, mode)(x, h0, params, True, 2, 0.0, False, True, True)
    want_out, want_h = layer(x, h0)
    np.testing.assert_allclose(out.detach().numpy(), want_out.detach().numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(h.detach().numpy(), want_h.detach().numpy(), rtol=1e-6, atol=1e-6)


def test_lstm_with_projection_and_errors():
    fnx.manual_seed(0)
    layer = fnx.nn.LSTM(3, 4, proj_size=2, bias=False)
    x, h0, c0 = fnx.randn(5, 2, 3), fnx.randn(1, 2, 2), fnx.randn(1, 2, 4)
    out, h, c = fnx.lstm(x, (h0, c0), list(layer.parameters()), False, 1, 0.0, False, False, False)
    want_out, (want_h, want_c) = layer(x, (h0, c0))
    for got, want in ((out, want_out), (h, want_h), (c, want_c)):
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6, atol=1e-6)
    with pytest.raises(NotImplementedError, match="packed-sequence"):
        fnx.lstm(x, fnx.tensor([2, 2]), (h0, c0), list(layer.parameters()), False, 1, 0.0, False, False)
    with pytest.raises(RuntimeError, match="3-D input"):
        fnx.lstm(x[0], (h0, c0), list(layer.parameters()), False, 1, 0.0, False, False, False)
    with pytest.raises(RuntimeError, match="parameters"):
        fnx.lstm(x, (h0, c0), list(layer.parameters())[:1], False, 1, 0.0, False, False, False)


def test_segment_reduce_matches_pytorch():
    d = fnx.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], dtype=fnx.float64, requires_grad=True)
    lengths, weights = fnx.tensor([2, 0, 3, 1]), fnx.tensor([1.0, 2.0, 3.0, 4.0], dtype=fnx.float64)
    # PyTorch 2.13: values, values with initial=2 and gradients of sum(out * weights), empty segments as zeros
    expected = {"sum": ([3, 0, 12, 6], [5, 2, 14, 8], [1, 1, 3, 3, 3, 4]),
                "mean": ([1.5, np.nan, 4, 6], [2.5, 2, 14 / 3, 8], [0.5, 0.5, 1, 1, 1, 4]),
                "max": ([2, -np.inf, 5, 6], [2, 2, 5, 6], [0, 1, 0, 0, 3, 4]),
                "min": ([1, np.inf, 3, 6], [1, 2, 2, 2], [1, 0, 3, 0, 0, 4]),
                "prod": ([2, 1, 60, 6], [4, 2, 120, 12], [2, 1, 60, 45, 36, 4])}
    for reduce, (values, with_initial, grad) in expected.items():
        out = fnx.segment_reduce(d, reduce, lengths=lengths)
        np.testing.assert_allclose(out.detach().numpy(), values)
        np.testing.assert_allclose(fnx.segment_reduce(d, reduce, lengths=lengths, initial=2.0).detach().numpy(),
                                   with_initial)
        (g,) = fnx.autograd.grad((out.nan_to_num(0, 0, 0) * weights).sum(), d)
        np.testing.assert_allclose(g.numpy(), grad)
    np.testing.assert_array_equal(fnx.segment_reduce(d, "sum", offsets=fnx.tensor([0, 2, 2, 5, 6])).detach().numpy(),
                                  [3, 0, 12, 6])
    x = fnx.arange(12.0).reshape(2, 6)
    assert fnx.segment_reduce(x, "sum", lengths=fnx.tensor([[2, 4], [3, 3]]), axis=1).tolist() == [[1, 14], [21, 30]]
    assert fnx.segment_reduce(x.T, "amax", lengths=fnx.tensor([2, 4])).tolist() == [[1, 7], [5, 11]]
    tie = fnx.tensor([3.0, 3.0, 1.0], requires_grad=True)
    fnx.segment_reduce(tie, "max", lengths=fnx.tensor([3])).sum().backward()
    assert tie.grad.tolist() == [0.5, 0.5, 0.0]
    assert fnx.segment_reduce(fnx.ones(3), "sum", lengths=fnx.tensor([1, 1]), unsafe=True).tolist() == [1, 1]


@pytest.mark.parametrize("kwargs, match", [({"lengths": fnx.tensor([2, 2])}, "sum to data.size"),
                                           ({"lengths": fnx.tensor([2, -1, 5])}, "negative"),
                                           ({}, "Either lengths or offsets"),
                                           ({"indices": fnx.tensor([0, 1])}, "indices based"),
                                           ({"lengths": fnx.tensor([[6]])}, "last dimension of lengths")])
def test_segment_reduce_errors(kwargs, match):
    with pytest.raises(RuntimeError, match=match):
        fnx.segment_reduce(fnx.ones(6), "sum", **kwargs)
    with pytest.raises(RuntimeError, match="must be either sum"):
        fnx.segment_reduce(fnx.ones(6), "median", lengths=fnx.tensor([6]))


FACTORIES = {
    "zeros": lambda **k: fnx.zeros(2, **k), "ones": lambda **k: fnx.ones(2, **k),
    "empty": lambda **k: fnx.empty(2, **k), "full": lambda **k: fnx.full((2,), 1.0, **k),
    "zeros_like": lambda **k: fnx.zeros_like(fnx.ones(2), **k),
    "full_like": lambda **k: fnx.full_like(fnx.ones(2), 3, **k),
    "arange": lambda **k: fnx.arange(2, **k), "linspace": lambda **k: fnx.linspace(0, 1, 2, **k),
    "eye": lambda **k: fnx.eye(2, **k), "empty_strided": lambda **k: fnx.empty_strided((2,), (1,), **k),
    "scalar_tensor": lambda **k: fnx.scalar_tensor(1, **k), "tril_indices": lambda **k: fnx.tril_indices(2, 2, **k),
    "rand": lambda **k: fnx.rand(2, **k), "randn_like": lambda **k: fnx.randn_like(fnx.ones(2), **k),
    "randint": lambda **k: fnx.randint(3, (2,), **k), "randperm": lambda **k: fnx.randperm(2, **k),
    "normal": lambda **k: fnx.normal(0.0, 1.0, (2,), **k), "new_zeros": lambda **k: fnx.ones(1).new_zeros(2, **k),
}


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_factories_take_layout_strided_only(name):
    assert FACTORIES[name](layout=fnx.strided).layout is fnx.strided
    with pytest.raises(NotImplementedError, match=f"{name}: layout=fnx.sparse_coo is not supported"):
        FACTORIES[name](layout=fnx.sparse_coo)


def test_lobpcg_generalized_problem_and_arguments():
    scipy_linalg = pytest.importorskip("scipy.linalg")
    rng = np.random.default_rng(0)
    m, b = rng.standard_normal((9, 9)), rng.standard_normal((9, 9))
    A, B = m @ m.T + np.eye(9), b @ b.T + 9 * np.eye(9)
    values, vectors = scipy_linalg.eigh(A, B)
    E, X = fnx.lobpcg(fnx.tensor(A), k=2, B=fnx.tensor(B))
    np.testing.assert_allclose(E.numpy(), values[::-1][:2], rtol=1e-10)
    np.testing.assert_allclose(np.abs(X.numpy()), np.abs(vectors[:, ::-1][:, :2]), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose((X.mT @ fnx.tensor(B) @ X).numpy(), np.eye(2), atol=1e-12)
    E, X = fnx.lobpcg(fnx.tensor(A), X=fnx.ones(9, 3, dtype=fnx.float64), largest=False)
    np.testing.assert_allclose(E.numpy(), np.linalg.eigvalsh(A)[:3], rtol=1e-10)
    At = fnx.tensor(A, requires_grad=True)
    E, X = fnx.lobpcg(At, k=2)
    E.sum().backward()   # d(sum of the top eigenvalues)/dA = X X^T (PyTorch's gradient too)
    np.testing.assert_allclose(At.grad.numpy(), (X @ X.mT).detach().numpy(), atol=1e-10)
    with pytest.raises(ValueError, match="smaller than 3 x the number of requested eigenpairs"):
        fnx.lobpcg(fnx.tensor(A), k=4)
    with pytest.raises(NotImplementedError, match="tracker"):
        fnx.lobpcg(fnx.tensor(A), tracker=print)


def test_native_norm_and_elman_cells():
    x = fnx.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(fnx.native_norm(x).item(), np.sqrt(55), rtol=1e-6)
    np.testing.assert_allclose(fnx.native_norm(x, 1, [1], True, None).numpy(), [[3.0], [12.0]])
    assert fnx.native_norm(x, None, [1], False, fnx.float64).dtype is fnx.float64
    fnx.manual_seed(0)
    for nonlinearity, step in (("tanh", fnx.rnn_tanh_cell), ("relu", fnx.rnn_relu_cell)):
        layer = fnx.nn.RNNCell(3, 4, nonlinearity=nonlinearity)
        inp, h = fnx.randn(2, 3), fnx.randn(2, 4)
        np.testing.assert_allclose(step(inp, h, layer.weight_ih, layer.weight_hh, layer.bias_ih, layer.bias_hh)
                                   .detach().numpy(), layer(inp, h).detach().numpy(), rtol=1e-6)


# PyTorch 2.13's positional parameters (ATen schemas, `self` named `input` as torch's Python binding names it)
SIGNATURES = {
    "range": "start= end= step=", "rsub": "input other alpha=", "fill": "input value", "adjoint": "input",
    "constant_pad_nd": "input pad value=", "norm_except_dim": "v pow= dim=", "narrow_copy": "input dim start length",
    "unsafe_chunk": "input chunks dim=", "unsafe_split": "tensor split_size_or_sections dim=",
    "unsafe_split_with_sizes": "input split_sizes dim=", "nonzero_static": "input",
    "matrix_rank": "input tol= symmetric=", "segment_reduce": "data reduce",
    "convolution": "input weight bias stride padding dilation transposed output_padding groups",
    "native_layer_norm": "input normalized_shape weight bias eps",
    "native_batch_norm": "input weight bias running_mean running_var training momentum eps",
    "native_group_norm": "input weight bias N C HxW group eps", "native_dropout": "input p train",
    "native_channel_shuffle": "input groups", "conv_tbc": "input weight bias pad=",
    "embedding_renorm_": "input indices max_norm norm_type",
    "grid_sampler": "input grid interpolation_mode padding_mode align_corners",
    "affine_grid_generator": "theta size align_corners",
    "lstm": "input hx params has_biases num_layers dropout train bidirectional batch_first",
    "gru": "input hx params has_biases num_layers dropout train bidirectional batch_first",
    "lstm_cell": "input hx w_ih w_hh b_ih= b_hh=", "gru_cell": "input hx w_ih w_hh b_ih= b_hh=",
    "lobpcg": "A k= B= X= n= iK= niter= tol= largest= method= tracker= ortho_iparams= ortho_fparams= ortho_bparams=",
}


def test_signatures_are_pytorchs():
    for name, recorded in SIGNATURES.items():
        assert positional_parameters(getattr(fnx, name)) == recorded, name
