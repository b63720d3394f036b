"""fnx's GEMM (fnx/lowering/gemm_kernels.py, templates/c_gemm.c.j2) under eager float32 products: values within the
float32 bound of a product against float64 for every layout (row-major, transposed, strided, reversed, broadcast
rows), edge tiles and blocks of K, its packed and unpacked paths; the same bits on any number of threads; which
products it takes."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fnx
from fnx.lowering import gemm_kernels as G


def _bound_ok(got, a, b):
    """|got - a @ b| <= K u |a| @ |b| elementwise (u = 2^-24), the bound of a float32 product summed in any order."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    k = a.shape[1]
    bound = 1.01 * k * 2.0 ** -24 * (np.abs(a64) @ np.abs(b64)) + 1e-30
    return np.all(np.abs(got.astype(np.float64) - a64 @ b64) <= bound)


def _layout(x: np.ndarray, how: str) -> np.ndarray:
    """`x` (rows, cols) as an array of the same values in layout `how`."""
    if how == "rows":
        return np.ascontiguousarray(x)
    if how == "columns":   # transposed storage: the column stride is 1
        return np.asfortranarray(x)
    if how == "strided":   # neither stride is 1
        big = np.zeros((x.shape[0] * 2, x.shape[1] * 3), x.dtype)
        big[::2, ::3] = x
        return big[::2, ::3]
    if how == "reversed":
        return np.ascontiguousarray(x[::-1])[::-1]
    raise ValueError(how)


LAYOUTS = ["rows", "columns", "strided", "reversed"]


class _threads:
    """fnx.set_num_threads(n) for a block, then back."""

    def __init__(self, n: int):
        self.n = n

    def __enter__(self):
        self.old = fnx.get_num_threads()
        fnx.set_num_threads(self.n)

    def __exit__(self, *exc):
        fnx.set_num_threads(self.old)


@pytest.mark.parametrize("a_layout", LAYOUTS)
@pytest.mark.parametrize("b_layout", LAYOUTS)
def test_every_layout_within_the_float32_bound(a_layout, b_layout):
    rng = np.random.default_rng(0)
    # edge tiles in both dims (no multiple of 12, 16 or 32), K past one block (256): a model's sizes
    a = rng.standard_normal((77, 301), np.float32)
    b = rng.standard_normal((301, 61), np.float32)
    x, y = _layout(a, a_layout), _layout(b, b_layout)
    assert G.takes(x, y)
    got = G.gemm(x, y)
    assert got.flags.c_contiguous and got.shape == (77, 61) and got.dtype == np.float32
    assert _bound_ok(got, a, b)


def test_broadcast_rows_and_the_packed_path_of_large_products():
    rng = np.random.default_rng(1)
    row = rng.standard_normal((1, 200), np.float32)
    a = np.broadcast_to(row, (64, 200))   # stride 0 between rows
    b = rng.standard_normal((200, 96), np.float32)
    assert _bound_ok(G.gemm(a, b), np.ascontiguousarray(a), b)
    # a large product on one thread: B read transposed (packed by register transposes), A where it lies
    big_a = rng.standard_normal((517, 263), np.float32)
    big_b = np.asfortranarray(rng.standard_normal((263, 515), np.float32))
    with _threads(1):
        got = G.gemm(big_a, big_b)
    assert _bound_ok(got, big_a, np.ascontiguousarray(big_b))


@pytest.mark.parametrize("shape", [(512, 128, 128), (128, 512, 128), (64, 512, 352), (96, 777, 80), (517, 263, 515),
                                   (1460, 1500, 1460)])
def test_the_same_bits_on_any_number_of_threads(shape):
    """Each element sums its products in one order whatever the split (and the unpacked and packed paths, which
    the tasks' sizes choose between, read the same values); a weight gradient's two halves of K (K at least 512,
    M and N) run in turn on one thread, up to a C of 8 MB (past it, (1460, 1500, 1460), C's rows split)."""
    m, k, n = shape
    rng = np.random.default_rng(2)
    a = rng.standard_normal((k, m), np.float32).T   # a weight gradient's x.T
    b = rng.standard_normal((k, n), np.float32)
    results = []
    for threads in (1, 2, 3):
        with _threads(threads):
            results.append(G.gemm(a, b))
    assert all(np.array_equal(results[0], r) for r in results[1:])
    assert _bound_ok(results[0], np.ascontiguousarray(a), b)


@settings(max_examples=15, deadline=None)
@given(m=st.integers(16, 140), k=st.integers(16, 700), n=st.integers(16, 140),
       a_layout=st.sampled_from(LAYOUTS), b_layout=st.sampled_from(LAYOUTS))
def test_shapes_and_layouts_within_the_float32_bound(m, k, n, a_layout, b_layout):
    rng = np.random.default_rng(m * 1000 + n)
    a = rng.standard_normal((m, k), np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    assert _bound_ok(G.gemm(_layout(a, a_layout), _layout(b, b_layout)), a, b)


def test_float64_products_of_the_library():
    """The library's float64 GEMM (fnx.export's programs build the same one); eager float64 stays with OpenBLAS."""
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((70, 260)), rng.standard_normal((260, 37))
    exact = a @ b
    bound = 260 * 2.0 ** -53 * 1.01 * (np.abs(a) @ np.abs(b))
    for x, y in ((np.asfortranarray(a), b), (a, np.asfortranarray(b))):   # A, then B, read transposed
        assert np.all(np.abs(G.gemm(x, y) - exact) <= bound)
    assert not G.takes(a, b)


@pytest.mark.parametrize("a_layout", ["rows", "columns"])
def test_float64_packed_panels_of_a_large_product(a_layout):
    """A large product: a row-major A read where it lies (its edge panel packed), a transposed A's panels
    packed a column at a time (a fixed-size copy, element by element at the edge), a row-major B whose row stride is
    a multiple of 512 bytes packed, the halves of K (K at least M and N) on one thread in turn."""
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((523, 601)), rng.standard_normal((601, 512))
    exact = a @ b
    bound = 601 * 2.0 ** -53 * 1.01 * (np.abs(a) @ np.abs(b))
    with _threads(1):
        got = G.gemm(_layout(a, a_layout), b)
    assert np.all(np.abs(got - exact) <= bound)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rows_of_a_4096_bytes_apart_are_packed_to_the_same_bits(dtype):
    """A whose rows lie a multiple of 4096 bytes apart is packed (read where it lies, its tile's rows would share
    one set of L1); the panels hold A's values, so the product has the bits of the same A at another stride."""
    rng = np.random.default_rng(5)
    k = 4096 // np.dtype(dtype).itemsize
    wide = rng.standard_normal((300, k + 16)).astype(dtype)
    aliased = np.ascontiguousarray(wide[:, :k])   # rows 4096 bytes apart, K past several blocks
    other = wide[:, :k]                           # the same values, rows 4096 + 16 elements apart
    b = rng.standard_normal((k, 100)).astype(dtype)
    assert aliased.strides[0] == 4096 and other.strides[0] != 4096
    got = G.gemm(aliased, b)
    assert np.array_equal(got, G.gemm(other, b))
    exact = aliased.astype(np.float64) @ b.astype(np.float64)
    u = 2.0 ** -24 if dtype == np.float32 else 2.0 ** -53
    assert np.all(np.abs(got - exact) <= 1.01 * k * u * (np.abs(aliased).astype(np.float64) @ np.abs(b)) + 1e-30)


@pytest.mark.parametrize("k", [16, 45, 301])
def test_a_transposed_b_is_packed_to_the_same_bits_as_its_rows(k):
    """x @ w.T: B's panels are packed from its columns (a block at a time, transposed in registers, the rest of K
    element by element); the panels hold the values a row-major B gives, so the product has its bits."""
    rng = np.random.default_rng(k)
    x = rng.standard_normal((400, k), np.float32)
    w = rng.standard_normal((200, k), np.float32)
    assert G.takes(x, w.T)
    assert np.array_equal(G.gemm(x, w.T), G.gemm(x, np.ascontiguousarray(w.T)))


def test_which_eager_products_it_takes():
    f32 = lambda *s: np.zeros(s, np.float32)   # noqa: E731
    assert G.takes(f32(512, 128), f32(128, 128))
    assert G.takes(f32(512, 128).T, f32(512, 64))
    assert not G.takes(f32(32, 64), f32(64, 128))              # one thread here: numpy's call is cheaper
    assert not G.takes(f32(4096, 128), f32(128, 8))            # a dim below MIN_DIM: one lane of the tile
    assert G.takes(f32(256, 784), f32(784, 512).T.copy().T)    # large ones too (W5's first layer)
    assert not G.takes(f32(2048, 2048), f32(2048, 1024))      # past MAX_WORK: OpenBLAS's packed kernels
    assert not G.takes(np.zeros((512, 128)), np.zeros((128, 128)))        # float64
    assert not G.takes(f32(512, 128), np.zeros((128, 128)))               # mixed dtypes
    assert not G.takes(np.zeros((512, 128), np.int32), np.zeros((128, 128), np.int32))
    odd = np.zeros(512 * 129 * 4 + 2, np.uint8)[2:].view(np.float32).reshape(512, 129)[:, :128]
    assert odd.strides[0] % 4 == 0 and G.takes(odd, f32(128, 128))


def test_linear_layers_forward_and_backward_go_through_it(monkeypatch):
    calls = []
    real = G.gemm
    monkeypatch.setattr(G, "gemm", lambda a, b: calls.append((a.shape, b.shape)) or real(a, b))
    layer = fnx.nn.Linear(128, 96)
    x = fnx.randn(8, 64, 128, requires_grad=True)
    y = layer(x)
    y.square().sum().backward()
    # forward (512, 128) @ (128, 96); backward: the input's gradient and the weight's
    assert ((512, 128), (128, 96)) in calls and ((512, 96), (96, 128)) in calls and ((96, 512), (512, 128)) in calls
    x64 = x.detach().numpy().astype(np.float64).reshape(512, 128)
    w64 = layer.weight.detach().numpy().astype(np.float64)
    want = x64 @ w64.T + layer.bias.detach().numpy()
    np.testing.assert_allclose(y.detach().numpy().reshape(512, 96), want, rtol=1e-5, atol=1e-5)
    g = 2 * y.detach().numpy().astype(np.float64).reshape(512, 96)
    np.testing.assert_allclose(layer.weight.grad.numpy(), g.T @ x64, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(x.grad.numpy().reshape(512, 128), g @ w64, rtol=1e-4, atol=1e-3)


# ---------------------------------------------------------------- the dot-product tile of x @ w.T (G.linear)
@pytest.mark.parametrize("lanes", [4, 8, 16])
def test_the_tiles_sum_tree_puts_each_vectors_sum_in_its_lane(lanes):
    """The shuffle-and-add steps of c_gemm_lib.c.j2's tile, run on numpy vectors: lane p of the result is the sum of
    the lanes of the vector that `owner[p]` names (so the tile's p-th sum comes out in lane p)."""
    tree = G._sum_tree(lanes)
    values = {f"s{r}": np.random.default_rng(r).standard_normal(lanes) for r in range(lanes)}
    for name, x, y, lo, hi in tree["steps"]:
        both = np.concatenate([values[x], values[y]])
        values[name] = both[lo] + both[hi]
    got = values[tree["result"]]
    want = [values[f"s{tree['owner'][p]}"].sum() for p in range(lanes)]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert sorted(tree["owner"]) == list(range(lanes))


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 70), k=st.integers(1, 300), n=st.integers(1, 70), bias=st.booleans())
def test_linear_tile_within_the_float32_bound(m, k, n, bias):
    """x @ w.T (+ bias) by the tile at any M, N (edge tiles) and K (its last K % lanes products from padded
    vectors), whatever the machine's BLAS: the library's own kernel, called directly."""
    rng = np.random.default_rng(m * 10007 + k * 101 + n)
    x = rng.standard_normal((m, k), np.float32)
    w = rng.standard_normal((n, k), np.float32)
    b = rng.standard_normal(n).astype(np.float32) if bias else None
    got = G.linear(x, w, b)
    assert got.shape == (m, n) and got.dtype == np.float32
    if b is not None:
        got = got - b   # the bias is added once to the rounded sum: within one rounding of it
        b_bound = 2.0 ** -24 * np.abs(got.astype(np.float64) + b)
    else:
        b_bound = 0.0
    a64, w64 = x.astype(np.float64), w.astype(np.float64)
    bound = 1.01 * k * 2.0 ** -24 * (np.abs(a64) @ np.abs(w64.T)) + 2 * b_bound + 1e-30
    assert np.all(np.abs(got - a64 @ w64.T) <= bound)


def test_which_products_take_the_linear_tile(monkeypatch):
    f32 = lambda *s: np.zeros(s, np.float32)   # noqa: E731
    monkeypatch.setattr(G, "_direct", True)
    assert G.takes_nt(f32(32, 128), f32(64, 128))          # a makemore GRU's gate
    assert not G.takes_nt(f32(16, 128), f32(64, 128))      # fewer rows than NT_MIN_ROWS
    assert not G.takes_nt(f32(128, 32), f32(64, 32))       # K below NT_MIN_K
    assert not G.takes_nt(f32(32, 100), f32(64, 100))      # K no multiple of 16
    assert not G.takes_nt(f32(512, 128), f32(64, 128))     # past NT_MAX_WORK
    assert not G.takes_nt(f32(32, 64), f32(16, 64))        # below NT_MIN_WORK
    assert not G.takes_nt(f32(32, 256).T.copy().T, f32(32, 256))   # x not row-major
    assert not G.takes_nt(np.zeros((32, 128)), np.zeros((64, 128)))   # float64
    monkeypatch.setattr(G, "_direct", False)   # a BLAS without OpenBLAS's direct kernel: numpy's product
    assert not G.takes_nt(f32(32, 128), f32(64, 128))


@pytest.mark.parametrize("direct", [True, False])
def test_linear_and_x_at_w_t_take_the_tile_where_the_blas_has_the_direct_kernel(monkeypatch, direct):
    calls = []
    real = G.linear
    monkeypatch.setattr(G, "_direct", direct)
    monkeypatch.setattr(G, "linear", lambda x, w, b: calls.append((x.shape, w.shape, b is not None)) or real(x, w, b))
    layer = fnx.nn.Linear(128, 64)
    x = fnx.randn(32, 128, requires_grad=True)
    y = layer(x)
    z = x @ layer.weight.T
    assert calls == ([((32, 128), (64, 128), True), ((32, 128), (64, 128), False)] if direct else [])
    w64 = layer.weight.detach().numpy().astype(np.float64)
    x64 = x.detach().numpy().astype(np.float64)
    np.testing.assert_allclose(y.detach().numpy(), x64 @ w64.T + layer.bias.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(z.detach().numpy(), x64 @ w64.T, rtol=1e-5, atol=1e-5)
    y.square().sum().backward()
    g = 2 * y.detach().numpy().astype(np.float64)
    np.testing.assert_allclose(layer.weight.grad.numpy(), g.T @ x64, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(layer.bias.grad.numpy(), g.sum(0), rtol=1e-4, atol=1e-3)


def test_the_direct_kernel_is_read_from_numpys_own_openblas(monkeypatch):
    """numpy's BLAS is the one in its wheel's numpy.libs where several are loaded; the tile runs only where that is
    an OpenBLAS whose core has the direct kernel (AVX-512 cores), whatever this machine is."""
    import os

    import threadpoolctl

    libs = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(np.__file__))), "numpy.libs")

    def blas(path, api="openblas", core="SkylakeX"):
        return {"user_api": "blas", "internal_api": api, "filepath": path, "architecture": core}

    cases = [([blas(f"{libs}/libscipy_openblas64_.so")], True),
             ([blas(f"{libs}/libscipy_openblas64_.so", core="Haswell")], False),
             ([blas(f"{libs}/libscipy_openblas64_.so", core="SapphireRapids"), blas("/opt/other/libopenblas.so",
                                                                                   core="Zen")], True),
             ([blas("/usr/lib/libmkl_rt.so", api="mkl")], False),
             ([blas("/a/libopenblas.so"), blas("/b/libopenblas.so")], False),   # which one numpy runs: unknown
             ([], False)]
    for info, want in cases:
        monkeypatch.setattr(threadpoolctl, "threadpool_info", lambda info=info: info)
        monkeypatch.setattr(G, "_direct", None)
        assert G.numpy_blas_has_direct_kernel() is want, info



# ---------------------------------------------------------------- batched products (G.batched)
def _batched_bound_ok(got, a, b):
    """`_bound_ok` for every matrix of stacks a @ b."""
    a2, b2 = a.reshape((-1,) + a.shape[-2:]), b.reshape((-1,) + b.shape[-2:])
    return all(_bound_ok(g, x, y) for g, x, y in zip(got.reshape((-1,) + got.shape[-2:]), a2, b2))


def _attention_operands(rng, batch=3, tokens=37, heads=4, features=33):
    """q viewed from (batch, tokens, heads * features) and transposed to (batch, heads, tokens, features) (its heads
    a row apart, its samples a block apart: two batch strides), and k, a contiguous stack of q's shape."""
    x = rng.standard_normal((batch, tokens, heads * features), np.float32)
    q = x.reshape(batch, tokens, heads, features).transpose(0, 2, 1, 3)
    return q, rng.standard_normal(q.shape, np.float32)


def test_batched_attention_products_within_the_float32_bound():
    """q @ k^T, p @ v and the gradients' transposed stacks (edge tiles in every dim), as numpy's values."""
    rng = np.random.default_rng(7)
    q, k = _attention_operands(rng)
    p = rng.standard_normal(q.shape[:-1] + (q.shape[-2],), np.float32)
    cases = [(q, k.swapaxes(-1, -2)), (p, k), (p.swapaxes(-1, -2), q), (q.swapaxes(-1, -2), k),
             (rng.standard_normal((2, 3, 5, 40, 33), np.float32), rng.standard_normal((2, 3, 5, 33, 50), np.float32))]
    for a, b in cases:
        got = G.batched(a, b)
        assert got is not None and got.flags.c_contiguous and got.shape == a.shape[:-1] + b.shape[-1:]
        assert _batched_bound_ok(got, a, b)


def test_batched_products_it_takes_and_the_ones_numpy_runs():
    f32 = lambda *s: np.zeros(s, np.float32)   # noqa: E731
    assert G.batched(f32(32, 64, 32), f32(32, 32, 64)) is not None
    assert G.batched(f32(8, 4, 64, 32), f32(8, 4, 32, 64).swapaxes(0, 1).copy().swapaxes(0, 1)) is not None
    assert G.batched(f32(256, 16, 16), f32(256, 16, 16)) is None    # a matrix below BATCHED_MIN_WORK
    assert G.batched(f32(32, 64, 32), f32(1, 32, 64)) is None       # a broadcast batch: numpy's matmul
    assert G.batched(f32(32, 64, 32), f32(32, 64)) is None
    assert G.batched(np.zeros((32, 64, 32)), np.zeros((32, 32, 64))) is None   # float64
    three = f32(4, 3, 2, 64, 32).transpose(2, 1, 0, 3, 4)   # three batch strides
    assert G.batched(three, f32(2, 3, 4, 32, 64)) is None


@pytest.mark.parametrize("count, shape", [(3, (300, 200, 100)), (6, (64, 32, 64)), (2, (120, 600, 80))])
def test_batched_bits_on_any_number_of_threads(count, shape):
    """A matrix per thread or each matrix over the threads (few large ones), one matrix's bits whatever the count."""
    m, k, n = shape
    rng = np.random.default_rng(8)
    a = rng.standard_normal((count, k, m), np.float32).swapaxes(-1, -2)   # transposed, as a weight gradient's
    b = rng.standard_normal((count, k, n), np.float32)
    results = []
    for threads in (1, 2, 3, 8):
        with _threads(threads):
            results.append(G.batched(a, b))
    assert all(np.array_equal(results[0], r) for r in results[1:])
    assert _batched_bound_ok(results[0], a, b)


def test_eager_batched_matmul_forward_and_backward_go_through_it(monkeypatch):
    """Attention written out (q @ k.transpose(-2, -1)): the product and both gradients' products run batched, with
    numpy's float64 values to float32 rounding."""
    calls = []
    real = G.batched
    monkeypatch.setattr(G, "batched", lambda a, b: calls.append(a.shape) or real(a, b))
    rng = np.random.default_rng(9)
    q, k = _attention_operands(rng)
    tq, tk = fnx.tensor(q, requires_grad=True), fnx.tensor(k, requires_grad=True)
    s = tq @ tk.transpose(-2, -1)
    g = rng.standard_normal(s.shape)
    s.backward(fnx.tensor(g.astype(np.float32)))
    assert len(calls) == 3
    q64, k64 = q.astype(np.float64), k.astype(np.float64)
    np.testing.assert_allclose(s.detach().numpy(), q64 @ k64.swapaxes(-1, -2), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(tq.grad.numpy(), g @ k64, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(tk.grad.numpy(), g.swapaxes(-1, -2) @ q64, rtol=1e-4, atol=1e-4)
