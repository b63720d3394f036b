"""Eager random sampling: seeding, shapes and dtypes, value ranges, loose statistics, errors, in-place samplers."""
import math

import numpy as np
import pytest

import fnx
from fnx.core import FnxRuntimeError, FnxTypeError


@pytest.fixture(autouse=True)
def _restore_seed():
    """Each test starts from seed 0 and leaves the global generator seeded, so test order never matters."""
    fnx.manual_seed(0)
    yield
    fnx.manual_seed(0)


SAMPLERS = {
    "rand": lambda **kw: fnx.rand(3, 4, **kw),
    "randn": lambda **kw: fnx.randn(3, 4, **kw),
    "randint": lambda **kw: fnx.randint(0, 100, (3, 4), **kw),
    "randperm": lambda **kw: fnx.randperm(12, **kw),
    "normal": lambda **kw: fnx.normal(2.0, 3.0, (3, 4), **kw),
    "multinomial": lambda **kw: fnx.multinomial(fnx.ones(2, 10), 5, **kw),
    "bernoulli": lambda **kw: fnx.bernoulli(fnx.full((3, 4), 0.5), **kw),
    "poisson": lambda **kw: fnx.poisson(fnx.full((3, 4), 4.0), **kw),
    "binomial": lambda **kw: fnx.binomial(fnx.full((3, 4), 20.0), fnx.full((3, 4), 0.4), **kw),
}


@pytest.mark.parametrize("name", SAMPLERS)
def test_same_seed_same_numbers_and_different_seeds_differ(name):
    draw = SAMPLERS[name]
    fnx.manual_seed(123)
    first = draw().numpy().copy()
    fnx.manual_seed(123)
    np.testing.assert_array_equal(draw().numpy(), first)
    fnx.manual_seed(124)
    assert not np.array_equal(draw().numpy(), first)
    g = fnx.Generator().manual_seed(123)
    np.testing.assert_array_equal(draw(generator=g).numpy(), first)  # a private generator gives the same stream


def test_consecutive_draws_differ():
    assert not np.array_equal(fnx.rand(5).numpy(), fnx.rand(5).numpy())


def test_rng_state_round_trip():
    state = fnx.get_rng_state()
    assert state.dtype is fnx.uint8 and state.shape == (48,)
    a = fnx.randn(5).numpy().copy()
    fnx.set_rng_state(state)
    np.testing.assert_array_equal(fnx.randn(5).numpy(), a)
    with pytest.raises(FnxRuntimeError, match="expected a uint8 tensor of 48 bytes"):
        fnx.set_rng_state(fnx.zeros(3, dtype=fnx.uint8))
    with pytest.raises(TypeError, match="must be a uint8 tensor"):   # PyTorch: TypeError for another dtype
        fnx.set_rng_state(fnx.zeros(48))


def test_seed_and_initial_seed():
    fnx.manual_seed(7)
    assert fnx.initial_seed() == 7
    s = fnx.seed()
    assert fnx.initial_seed() == s
    g = fnx.Generator(device="cpu")
    assert g.initial_seed() == 67280421310721 and g.device == fnx.device("cpu")


@pytest.mark.parametrize("dtype", [fnx.float16, fnx.float32, fnx.float64])
def test_float_samplers_shapes_dtypes_and_ranges(dtype):
    u = fnx.rand(2, 3, dtype=dtype)
    assert u.shape == (2, 3) and u.dtype is dtype and u.device == fnx.device("cpu")
    big = fnx.rand(10000, dtype=dtype).numpy()
    assert big.min() >= 0.0 and big.max() < 1.0
    assert fnx.randn((4, 5), dtype=dtype).shape == (4, 5)
    assert fnx.rand(()).shape == ()
    assert fnx.rand(0, 3).shape == (0, 3)


def test_default_dtypes_and_requires_grad():
    assert fnx.rand(2).dtype is fnx.float32
    assert fnx.randint(5, (3,)).dtype is fnx.int64
    assert fnx.randperm(4).dtype is fnx.int64
    assert fnx.randint(5, (3,), dtype=fnx.float32).dtype is fnx.float32
    assert fnx.randn(3, requires_grad=True).requires_grad
    assert fnx.rand_like(fnx.zeros(2, 3, dtype=fnx.float64)).dtype is fnx.float64
    assert fnx.randn_like(fnx.zeros(2, 3)).shape == (2, 3)
    r = fnx.randint_like(fnx.zeros(50, dtype=fnx.int32), 3, 6)
    assert r.dtype is fnx.int32 and r.min().item() >= 3 and r.max().item() < 6


def test_randint_signatures_and_range():
    a = fnx.randint(10, (1000,)).numpy()
    assert a.min() >= 0 and a.max() <= 9 and len(set(a.tolist())) == 10
    b = fnx.randint(-3, 3, (1000,)).numpy()
    assert b.min() == -3 and b.max() == 2
    c = fnx.randint(low=5, high=7, size=(100,)).numpy()
    assert set(c.tolist()) == {5, 6}
    assert fnx.randint(3, size=(2, 2)).shape == (2, 2)


def test_factories_take_the_shape_as_the_keyword_size():
    """PyTorch's zeros/ones/empty/rand/randn take `size=` as well as positional sizes (pytorch/examples' GAT writes
    `torch.empty(size=(in_features, out_features))`); both at once is a TypeError, as there."""
    for factory in (fnx.zeros, fnx.ones, fnx.empty, fnx.rand, fnx.randn):
        assert factory(size=(2, 3)).shape == (2, 3) and factory(size=[4]).shape == (4,)
        assert factory(size=fnx.Size([1, 2]), dtype=fnx.float64).dtype is fnx.float64
        with pytest.raises(TypeError, match="multiple values for argument 'size'"):
            factory(2, size=(3,))
    assert fnx.ones(size=(2,)).tolist() == [1.0, 1.0] and fnx.zeros(size=()).shape == ()


def test_randperm_is_a_permutation():
    p = fnx.randperm(50).numpy()
    assert sorted(p.tolist()) == list(range(50))
    assert fnx.randperm(0).shape == (0,)


def test_statistics_of_100k_samples():
    fnx.manual_seed(2024)
    u = fnx.rand(100_000, dtype=fnx.float64).numpy()
    assert abs(u.mean() - 0.5) < 0.01 and abs(u.std() - math.sqrt(1 / 12)) < 0.01
    z = fnx.randn(100_000).numpy()
    assert abs(z.mean()) < 0.02 and abs(z.std() - 1.0) < 0.02
    n = fnx.normal(3.0, 2.0, (100_000,)).numpy()
    assert abs(n.mean() - 3.0) < 0.05 and abs(n.std() - 2.0) < 0.05
    b = fnx.bernoulli(fnx.full((100_000,), 0.3)).numpy()
    assert set(np.unique(b).tolist()) <= {0.0, 1.0} and abs(b.mean() - 0.3) < 0.01
    m = fnx.multinomial(fnx.tensor([1.0, 2.0, 7.0]), 100_000, replacement=True).numpy()
    np.testing.assert_allclose(np.bincount(m, minlength=3) / 1e5, [0.1, 0.2, 0.7], atol=0.01)


def test_normal_with_tensor_arguments():
    mean = fnx.tensor([0.0, 100.0])
    out = fnx.normal(mean, 0.0)
    np.testing.assert_array_equal(out.numpy(), [0.0, 100.0])
    std = fnx.tensor([[1.0], [2.0]])
    assert fnx.normal(mean, std).shape == (2, 2)
    assert not fnx.normal(mean.requires_grad_(), 1.0).requires_grad  # samplers are not differentiable


def test_multinomial_without_replacement_gives_distinct_indices():
    w = fnx.tensor([[1.0, 2.0, 3.0, 4.0, 0.0, 5.0], [5.0, 0.0, 1.0, 1.0, 1.0, 1.0]])
    for _ in range(20):
        idx = fnx.multinomial(w, 5)
        assert idx.dtype is fnx.int64 and idx.shape == (2, 5)
        for row, weights in zip(idx.tolist(), w.tolist()):
            assert len(set(row)) == 5
            assert all(weights[i] > 0 for i in row)  # zero-weight categories are never drawn


def test_multinomial_never_draws_zero_weight_categories_with_replacement():
    idx = fnx.multinomial(fnx.tensor([0.0, 1.0, 0.0, 1.0, 0.0]), 1000, replacement=True).numpy()
    assert set(idx.tolist()) == {1, 3}


@pytest.mark.parametrize("call, error, message", [
    (lambda: fnx.randint(5, 3, (2,)), FnxRuntimeError, "expected low < high, but got low=5 and high=3"),
    (lambda: fnx.randint(3, 3, (2,)), FnxRuntimeError, "expected low < high"),
    (lambda: fnx.randint(10), FnxTypeError, "missing the required argument 'high'"),
    (lambda: fnx.randint(10, 5), FnxTypeError, "size must be a tuple"),
    (lambda: fnx.randint(0, 300, (2,), dtype=fnx.uint8), FnxRuntimeError, "does not fit in uint8"),
    (lambda: fnx.multinomial(fnx.ones(3), 4), FnxRuntimeError,
     r"cannot sample n_sample > prob_dist.size\(-1\) samples without replacement"),
    (lambda: fnx.multinomial(fnx.tensor([1.0, 0.0, 0.0]), 2), FnxRuntimeError, "not enough non-negative category"),
    (lambda: fnx.multinomial(fnx.tensor([1.0, -1.0]), 1), FnxRuntimeError, "element < 0"),
    (lambda: fnx.multinomial(fnx.zeros(3), 1), FnxRuntimeError, "sum of probabilities <= 0"),
    (lambda: fnx.multinomial(fnx.ones(2, 2, 2), 1), FnxRuntimeError, "prob_dist must be 1 or 2 dim"),
    (lambda: fnx.multinomial(fnx.tensor([1, 2]), 1), FnxTypeError, "only floating-point dtypes"),
    (lambda: fnx.rand(2, dtype=fnx.int64), FnxTypeError, "rand: expected a floating point dtype"),
    (lambda: fnx.randperm(-1), FnxRuntimeError, "n must be non-negative"),
    (lambda: fnx.bernoulli(fnx.tensor([0.5, 1.5])), FnxRuntimeError, r"probabilities to be in \[0, 1\]"),
    (lambda: fnx.normal(0.0, -1.0, (2,)), FnxRuntimeError, "expects std >= 0.0"),
    (lambda: fnx.normal(0.0, 1.0), FnxTypeError, "size must be given"),
    (lambda: fnx.rand(2, generator=fnx.Generator("cpu"), device="cuda"), Exception, "cuda"),
])
def test_sampling_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


# ---------------------------------------------------------------- in-place samplers
def test_inplace_samplers_write_memory_and_bump_the_version():
    x = fnx.zeros(1000)
    view = x.view(10, 100)
    ptr, version = x.data_ptr(), x._version[0]
    assert x.uniform_(-2.0, 3.0) is x
    assert x.data_ptr() == ptr and x._version[0] == version + 1
    a = x.numpy()
    assert a.min() >= -2.0 and a.max() < 3.0 and a.std() > 1.0
    assert view.numpy().min() == a.min()  # views see the new values
    x.normal_(5.0, 0.1)
    assert abs(x.numpy().mean() - 5.0) < 0.05
    x.bernoulli_(0.25)
    assert set(np.unique(x.numpy()).tolist()) <= {0.0, 1.0}
    x.exponential_(2.0)
    assert x.numpy().min() >= 0.0 and abs(x.numpy().mean() - 0.5) < 0.1
    x.log_normal_(0.0, 0.5)
    assert x.numpy().min() > 0.0
    assert x.uniform_(**{"from": 1.0, "to": 2.0}).numpy().min() >= 1.0
    assert x._version[0] == version + 6


def test_inplace_samplers_keep_dtype_and_sample_in_it():
    x = fnx.zeros(100, dtype=fnx.float64)
    x.uniform_()
    assert x.dtype is fnx.float64 and len(set(x.tolist())) == 100
    fnx.manual_seed(5)
    y = fnx.zeros(4, dtype=fnx.float32).normal_()
    fnx.manual_seed(5)
    np.testing.assert_array_equal(y.numpy(), np.random.Generator(np.random.PCG64(5)).standard_normal(
        4, dtype=np.float32))


def test_random_ranges():
    x = fnx.zeros(1000, dtype=fnx.int64)
    assert x.random_(10).numpy().max() < 10
    assert x.random_(5, 8).numpy().min() >= 5 and x.numpy().max() < 8
    u8 = fnx.zeros(1000, dtype=fnx.uint8).random_()
    assert u8.numpy().max() > 200
    f = fnx.zeros(100).random_()
    assert np.all(f.numpy() == np.round(f.numpy())) and f.numpy().max() <= 2 ** 24
    b = fnx.zeros(100, dtype=fnx.bool).random_()
    assert set(b.tolist()) == {False, True}


def test_inplace_sampling_refuses_a_leaf_that_requires_grad():
    w = fnx.zeros(3, requires_grad=True)
    for op in (lambda: w.uniform_(), lambda: w.normal_(), lambda: w.bernoulli_(), lambda: w.random_(3),
               lambda: w.exponential_()):
        with pytest.raises(FnxRuntimeError, match="a leaf Variable that requires grad"):
            op()
    with pytest.raises(FnxRuntimeError, match="a view of a leaf Variable that requires grad"):
        w.view(3, 1).uniform_()
    with fnx.no_grad():
        w.uniform_()
        w.normal_()
    assert w.requires_grad and w.is_leaf


def test_inplace_sampling_errors():
    with pytest.raises(FnxTypeError, match="uniform_: expected a floating point tensor"):
        fnx.zeros(3, dtype=fnx.int64).uniform_()
    with pytest.raises(FnxRuntimeError, match=r"uniform_: expects to return a \[from, to\) range"):
        fnx.zeros(3).uniform_(2.0, 1.0)
    with pytest.raises(FnxRuntimeError, match="normal_: expects std >= 0.0"):
        fnx.zeros(3).normal_(0.0, -1.0)
    with pytest.raises(FnxRuntimeError, match="bernoulli_: expects p to be in"):
        fnx.zeros(3).bernoulli_(1.5)
    with pytest.raises(FnxRuntimeError, match="exponential_: expects lambda > 0.0"):
        fnx.zeros(3).exponential_(0.0)


def test_bernoulli_with_tensor_probabilities():
    p = fnx.tensor([0.0, 1.0, 0.0, 1.0])
    np.testing.assert_array_equal(fnx.bernoulli(p).numpy(), [0.0, 1.0, 0.0, 1.0])
    np.testing.assert_array_equal(fnx.zeros(2, 4).bernoulli_(p).numpy(), [[0, 1, 0, 1], [0, 1, 0, 1]])
    np.testing.assert_array_equal(fnx.bernoulli(fnx.zeros(3), p=1.0).numpy(), [1.0, 1.0, 1.0])
    assert p.bernoulli().shape == (4,) and p.multinomial(2).shape == (2,)


@pytest.mark.cuda
def test_cuda_sampling_is_seeded_and_on_device():
    fnx.manual_seed(3)
    a = fnx.randn(4, 5, device="cuda")
    assert a.device == fnx.device("cuda") and a.dtype is fnx.float32
    fnx.manual_seed(3)
    np.testing.assert_array_equal(fnx.randn(4, 5, device="cuda").cpu().numpy(), a.cpu().numpy())
    assert sorted(fnx.randperm(20, device="cuda").cpu().tolist()) == list(range(20))
    idx = fnx.multinomial(fnx.ones(3, 6, device="cuda"), 4)
    assert all(len(set(r)) == 4 for r in idx.cpu().tolist())
    x = fnx.zeros(100, device="cuda").uniform_(1.0, 2.0)
    assert 1.0 <= x.cpu().numpy().min() and x.cpu().numpy().max() < 2.0
    g = fnx.Generator("cuda").manual_seed(1)
    assert fnx.rand(3, device="cuda", generator=g).device == fnx.device("cuda")


# ---------------------------------------------------------------- samplers inside vmap
def test_vmap_randomness_modes():
    from fnx.transforms.batching import vmap

    x = fnx.zeros(4, 3)
    with pytest.raises(FnxRuntimeError, match="randomness error mode"):
        vmap(lambda r: r + fnx.rand(3))(x)
    same = vmap(lambda r: r + fnx.rand(3), randomness="same")(x).numpy()
    assert same.shape == (4, 3) and np.all(same == same[0])
    different = vmap(lambda r: r + fnx.randn(3), randomness="different")(x).numpy()
    assert different.shape == (4, 3) and len({tuple(row) for row in different.tolist()}) == 4
    perms = vmap(lambda r: fnx.randperm(5), randomness="different")(x).numpy()
    assert all(sorted(p) == list(range(5)) for p in perms.tolist())


def test_vmap_of_bernoulli_with_batched_probabilities():
    from fnx.transforms.batching import vmap

    p = fnx.tensor([[0.0, 1.0], [1.0, 0.0], [0.0, 0.0]])
    flips = vmap(lambda q: fnx.bernoulli(q), randomness="different")(p)
    np.testing.assert_array_equal(flips.numpy(), p.numpy())


def test_vmap_of_samplers_with_batched_parameters():
    from fnx.transforms.batching import vmap

    p = fnx.tensor([[0.0, 1.0], [1.0, 0.0], [0.0, 0.0]])
    means = fnx.tensor([0.0, 100.0, -100.0])
    draws = vmap(lambda m: fnx.normal(m, 0.01), randomness="different")(means).numpy()
    np.testing.assert_allclose(draws, [0.0, 100.0, -100.0], atol=0.1)
    with pytest.raises(FnxTypeError, match="multinomial: sampling from traced probabilities"):
        vmap(lambda q: fnx.multinomial(q, 1), randomness="different")(p + 1.0)
