"""Op table: matrix products, einsum, solvers, factorizations, determinants and norms."""
import math

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fnx
from op_db import OpInfo, Sample, floats, ints


# ---------------------------------------------------------------- strategies
@st.composite
def matmul_sample(draw, integer=False):
    """Operands of every matmul case: 1-D and 2-D operands, batches that broadcast."""
    s1, s2 = draw(hnp.mutually_broadcastable_shapes(signature=np.matmul.signature, max_dims=2,
                                                    max_side=4)).input_shapes
    make = (lambda s: ints(s, -3, 3)) if integer else floats
    return Sample((draw(make(s1)), draw(make(s2))))


@st.composite
def sized_sample(draw, shapes_of):
    """Float operands of the shapes that `shapes_of(n, k, m, b)` gives for drawn sides."""
    n, k, m, b = (draw(st.integers(1, 4)) for _ in range(4))
    return Sample(tuple(draw(floats(s)) for s in shapes_of(n, k, m, b)))


@st.composite
def tensordot_sample(draw):
    a_free = draw(hnp.array_shapes(min_dims=0, max_dims=2, max_side=3))
    shared = draw(hnp.array_shapes(min_dims=0, max_dims=2, max_side=3))
    b_free = draw(hnp.array_shapes(min_dims=0, max_dims=2, max_side=3))
    a = draw(floats(a_free + shared))
    b_dims = list(range(len(shared)))
    if draw(st.booleans()):
        return Sample((a, draw(floats(shared + b_free))), {"dims": len(shared)})
    perm = draw(st.permutations(b_dims))  # the contracted dims of b in another order
    b = draw(floats(tuple(shared[p] for p in perm) + b_free))
    dims_a = [len(a_free) + p for p in perm]
    return Sample((a, b), {"dims": (dims_a, list(range(len(shared))))})


_EINSUM = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 1)]),
    ("ij,jk", [(3, 2), (2, 2)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("iij->j", [(2, 2, 3)]),
    ("ij->ji", [(2, 3)]),
    ("ijk->", [(2, 3, 2)]),
    ("i,j->ij", [(3,), (2,)]),
    ("i,i", [(4,), (4,)]),
    ("ij,k->i", [(2, 3), (4,)]),
    ("ij,ij->", [(3, 2), (3, 2)]),
    ("ij,jk,kl->il", [(2, 3), (3, 2), (2, 4)]),
    ("...ij,...jk->...ik", [(2, 1, 2, 3), (3, 3, 2)]),
    ("b...,b...->b", [(2, 3), (2, 3)]),
    ("ij,jk->ik", [(3, 1), (4, 2)]),
    ("ii,i->i", [(3, 3), (3,)]),
]


@st.composite
def einsum_sample(draw):
    eq, shapes = draw(st.sampled_from(_EINSUM))
    return Sample((eq,) + tuple(draw(floats(s)) for s in shapes))


def _well_conditioned(a: np.ndarray) -> np.ndarray:
    """Entries in [-1, 1] plus (n + 1) I: strictly diagonally dominant, so comfortably invertible."""
    return a + (a.shape[-1] + 1) * np.eye(a.shape[-1])


@st.composite
def square_sample(draw, rhs=None):
    """A (batch of) well-conditioned square matrices, and for `rhs="vector"|"matrix"` a right-hand side."""
    n = draw(st.integers(1, 4))
    batch = draw(st.sampled_from([(), (2,), (2, 1)]))
    a = _well_conditioned(draw(floats(batch + (n, n), -1.0, 1.0)))
    if rhs is None:
        return Sample((a,))
    if rhs == "vector":
        b_shape = draw(st.sampled_from([(n,), batch + (n,)]))
    else:
        b_batch = draw(st.sampled_from([batch, batch[1:], (3,) + batch if batch[:1] != (2,) else batch]))
        b_shape = b_batch + (n, draw(st.integers(1, 3)))
    return Sample((a, draw(floats(b_shape))))


@st.composite
def norm_sample(draw, min_dims=1, max_dims=3, **kwargs):
    """Values from a seeded generator (no ties between |x| or between row and column sums), with kwargs."""
    shape = draw(hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, max_side=4))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    x = rng.uniform(0.2, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    chosen = {k: draw(v) if isinstance(v, st.SearchStrategy) else v for k, v in kwargs.items()}
    if chosen.get("dim") == "one":
        chosen["dim"] = draw(st.integers(-len(shape), len(shape) - 1))
    elif chosen.get("dim") == "two":
        chosen["dim"] = tuple(draw(st.permutations(range(len(shape))))[:2])
    return Sample((x,), chosen)


@st.composite
def spectral_sample(draw, shape="any", symmetric=False, rhs=False, **kwargs):
    """Matrices Q1 diag(s) Q2^T with random orthogonal factors and well-separated values s (|s| >= 0.5, gaps >=
    0.3; of either sign when `symmetric`, then Q2 = Q1), so singular vectors and eigenvectors are well defined and
    finite differences meaningful. `rhs`: also a right-hand side (m, k) or (m,)."""
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    m = draw(st.integers(1, 4))
    n = {"square": m, "tall": draw(st.integers(1, m)), "wide": draw(st.integers(m, 4))}.get(shape) or \
        draw(st.integers(1, 4))
    if symmetric:
        n = m
    batch = draw(st.sampled_from([(), (2,)]))
    k = min(m, n)
    values = 0.5 + 0.4 * np.arange(k) + rng.uniform(0, 0.1, k)
    if symmetric:
        values = values * rng.choice([-1.0, 1.0], k)
    values = rng.permutation(values)

    def orthogonal(size):
        return np.linalg.qr(rng.standard_normal(batch + (size, size)))[0]

    left = orthogonal(m)[..., :k]
    right = left if symmetric else orthogonal(n)[..., :k]
    a = (left * values) @ np.swapaxes(right, -1, -2)
    args = (a,)
    if rhs:
        args += (rng.standard_normal(batch + (m, 2)) if draw(st.booleans()) else rng.standard_normal(batch + (m,)),)
    return Sample(args, kwargs)


# ---------------------------------------------------------------- numpy references
def _solve_ref(a, b):
    vector = b.ndim == 1 or (b.ndim == a.ndim - 1 and b.shape == a.shape[:-1])
    if vector:
        return np.linalg.solve(a, b[..., None])[..., 0]
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return np.linalg.solve(np.broadcast_to(a, batch + a.shape[-2:]), np.broadcast_to(b, batch + b.shape[-2:]))


def _einsum_ref(eq, *ops):
    """numpy's einsum, plus PyTorch's summing of ellipsis dims that an explicit output leaves out."""
    lhs, arrow, rhs = eq.partition("->")
    if arrow and "..." in lhs and "..." not in rhs:
        out = np.einsum(f"{lhs}->...{rhs}", *ops)
        return out.sum(axis=tuple(range(out.ndim - len(rhs))))
    return np.einsum(eq, *ops)


def _spd(a):
    return a @ np.swapaxes(a, -1, -2) + a.shape[-1] * np.eye(a.shape[-1])


def _spd_fnx(a):
    return a @ a.mT + a.shape[-1] * fnx.eye(a.shape[-1], dtype=a.dtype)


def _vector_norm_ref(x, ord=2, dim=None, keepdim=False):
    axes = tuple(range(x.ndim)) if dim is None else (dim,) if isinstance(dim, int) else tuple(dim)
    a = np.abs(x)
    if ord == math.inf:
        return a.max(axis=axes, keepdims=keepdim)
    if ord == -math.inf:
        return a.min(axis=axes, keepdims=keepdim)
    if ord == 0:
        return (x != 0).sum(axis=axes, keepdims=keepdim).astype(x.dtype)
    return (a ** ord).sum(axis=axes, keepdims=keepdim) ** (1.0 / ord)


def _matrix_norm_ref(x, ord="fro", dim=(-2, -1), keepdim=False):
    moved = np.moveaxis(x, dim, (-2, -1))
    out = np.linalg.norm(moved, ord=ord, axis=(-2, -1))
    if keepdim:
        out = np.expand_dims(out, tuple(sorted(d % x.ndim for d in dim)))
    return out


def _sym(a):
    """The symmetric part: eigh reads one triangle, so the op table differentiates eigh(sym(a)) as PyTorch's
    tests do."""
    return 0.5 * (a + np.swapaxes(a, -1, -2)) if isinstance(a, np.ndarray) else 0.5 * (a + a.mT)


def _svd_invariants(lib):
    """Functions of (U, S, Vh) that do not depend on the singular vectors' signs, for fnx or numpy."""
    def invariants(a, full_matrices=False):
        u, s, vh = lib.linalg.svd(a, full_matrices=full_matrices)
        k = s.shape[-1]
        return u[..., :k] @ vh[..., :k, :], s, abs(u[..., :k]), abs(vh[..., :k, :])
    return invariants


def _svd_full_ref(a):
    m, n = a.shape[-2:]
    u, s, vh = np.linalg.svd(a)
    return u[..., :, :min(m, n)] @ vh[..., :min(m, n), :], np.broadcast_to(np.eye(m), u.shape), \
        np.broadcast_to(np.eye(n), vh.shape), s


def _svd_full(a):
    U, S, Vh = fnx.linalg.svd(a)
    k = S.shape[-1]
    return U[..., :, :k] @ Vh[..., :k, :], U @ U.mT, Vh.mT @ Vh, S


def _eigh_invariants(lib, UPLO="L"):
    """(Q * Q, L) of eigh(sym(a)): the squared eigenvectors do not depend on their signs."""
    def invariants(a):
        w, q = lib.linalg.eigh(_sym(a), UPLO=UPLO)
        return q * q, w
    return invariants


def _lstsq_ref(a, b, driver=None):
    x = np.linalg.pinv(a) @ (b[..., None] if b.ndim == a.ndim - 1 else b)
    m, n = a.shape[-2:]
    res = ((a @ x - (b[..., None] if b.ndim == a.ndim - 1 else b)) ** 2).sum(-2) if m > n else np.zeros(0)
    if b.ndim == a.ndim - 1:
        x, res = x[..., 0], (res[..., 0] if m > n else res)
    rank = np.linalg.matrix_rank(a)
    s = np.linalg.svd(a, compute_uv=False) if driver == "gelsd" else np.zeros(0)
    return x, res, rank, s


_ORDS = st.sampled_from([2, 1, 3, 1.5, math.inf, -math.inf])
_MATRIX_ORDS = st.sampled_from(["fro", 1, -1, math.inf, -math.inf])


def _solve_triangular_ref(a, b, upper, left=True, unitriangular=False):
    t = np.triu(a) if upper else np.tril(a)
    if unitriangular:
        t = t - np.eye(a.shape[-1]) * t + np.eye(a.shape[-1])
    return np.linalg.solve(t, b)

# ---------------------------------------------------------------- products with an addend, cross products, chains
def _cross_ref(a, b, dim=-1):
    return np.cross(a, b, axis=dim)


@st.composite
def cross_sample(draw, linalg=True):
    """Two tensors of one rank whose dim `dim` has size 3 and whose other dims broadcast."""
    s1, s2 = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=2, max_side=3)).input_shapes
    rank = max(len(s1), len(s2))
    s1, s2 = (1,) * (rank - len(s1)) + s1, (1,) * (rank - len(s2)) + s2
    d = draw(st.integers(0, rank))
    s1, s2 = s1[:d] + (3,) + s1[d:], s2[:d] + (3,) + s2[d:]
    dim = draw(st.sampled_from([d, d - rank - 1]))
    return Sample((draw(floats(s1)), draw(floats(s2))), {"dim": dim})


def _vander_ref(x, N=None, increasing=False):
    return np.vander(x, N, increasing=increasing)


def _linalg_vander_ref(x, N=None):
    n = x.shape[-1] if N is None else N
    return x[..., None] ** np.arange(n)


def _cholesky_ex_ref(a, upper=False):
    L = np.linalg.cholesky(_spd(a))
    return (np.swapaxes(L, -1, -2) if upper else L), np.zeros(a.shape[:-2], np.int32)


def _cholesky_solve_ref(b, a, upper=False):
    return np.linalg.solve(_spd(a), b)


def _spd_factor(a, upper=False):
    """fnx's Cholesky factor (upper or lower) of the symmetric positive-definite matrix built from `a`."""
    return fnx.linalg.cholesky(_spd_fnx(a), upper=upper)


def _triangular_solve_ref(b, a, upper=True, transpose=False, unitriangular=False):
    t = np.triu(a) if upper else np.tril(a)
    if unitriangular:
        t = t - np.eye(a.shape[-1]) * t + np.eye(a.shape[-1])
    t = np.swapaxes(t, -1, -2) if transpose else t
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return np.linalg.solve(t, b), np.broadcast_to(a, batch + a.shape[-2:])


@st.composite
def tensorsolve_sample(draw):
    """A of shape B.shape + X.shape (prod(B.shape) == prod(X.shape)), well conditioned, and maybe `dims`."""
    b_shape, x_shape = draw(st.sampled_from([((6,), (2, 3)), ((2, 3), (6,)), ((2, 2), (4,)), ((4,), (2, 2))]))
    n = math.prod(b_shape)
    a = _well_conditioned(draw(floats((n, n), -1.0, 1.0))).reshape(b_shape + x_shape)
    b = draw(floats(b_shape))
    if draw(st.booleans()):
        return Sample((a, b))
    # A stored with X's dims at other places (each group in its order); dims= moves them back last
    x_dims = sorted(draw(st.permutations(range(a.ndim)))[:len(x_shape)])
    stored = np.moveaxis(a, list(range(len(b_shape), a.ndim)), x_dims)
    return Sample((stored, b), {"dims": x_dims})


def _tensorsolve_ref(a, b, dims=None):
    if dims is not None:
        a = np.moveaxis(a, dims, list(range(a.ndim - len(dims), a.ndim)))
    return np.linalg.tensorsolve(a, b)


OPS = [
    OpInfo("matmul", fnx.matmul, np.matmul, matmul_sample(), double_grad=True),
    OpInfo("matmul_int", fnx.matmul, np.matmul, matmul_sample(integer=True), dtypes=("int64",), grad=False),
    OpInfo("mm", fnx.mm, np.matmul, sized_sample(lambda n, k, m, b: [(n, k), (k, m)])),
    OpInfo("bmm", fnx.bmm, np.matmul, sized_sample(lambda n, k, m, b: [(b, n, k), (b, k, m)])),
    OpInfo("dot", fnx.dot, np.dot, sized_sample(lambda n, k, m, b: [(k,), (k,)])),
    OpInfo("mv", fnx.mv, np.matmul, sized_sample(lambda n, k, m, b: [(n, k), (k,)])),
    OpInfo("outer", fnx.outer, np.outer, sized_sample(lambda n, k, m, b: [(n,), (m,)])),
    OpInfo("inner", fnx.inner, np.inner, sized_sample(lambda n, k, m, b: [(n, k), (b, m, k)])),
    OpInfo("addmm", lambda c, a, b: fnx.addmm(c, a, b, beta=0.5, alpha=2.0),
           lambda c, a, b: 0.5 * c + 2.0 * a @ b, sized_sample(lambda n, k, m, b: [(m,), (n, k), (k, m)])),
    OpInfo("baddbmm", fnx.baddbmm, lambda c, a, b: c + a @ b,
           sized_sample(lambda n, k, m, b: [(b, n, m), (b, n, k), (b, k, m)])),
    OpInfo("trace", fnx.trace, np.trace, sized_sample(lambda n, k, m, b: [(n, m)])),
    OpInfo("kron", fnx.kron, np.kron, sized_sample(lambda n, k, m, b: [(n, k), (b, 1, m)])),
    OpInfo("addmv", lambda c, a, v: fnx.addmv(c, a, v, beta=0.5, alpha=2.0), lambda c, a, v: 0.5 * c + 2.0 * a @ v,
           sized_sample(lambda n, k, m, b: [(n,) if b > 2 else (1,), (n, k), (k,)])),
    OpInfo("addmv_beta0", lambda c, a, v: fnx.addmv(c * np.nan, a, v, beta=0), lambda c, a, v: a @ v,
           sized_sample(lambda n, k, m, b: [(n,), (n, k), (k,)])),
    OpInfo("addr", lambda c, x, y: fnx.addr(c, x, y, beta=2.0, alpha=-0.5),
           lambda c, x, y: 2.0 * c - 0.5 * np.outer(x, y), sized_sample(lambda n, k, m, b: [(n, m), (n,), (m,)])),
    OpInfo("addbmm", lambda c, x, y: fnx.addbmm(c, x, y, beta=0.5, alpha=1.5),
           lambda c, x, y: 0.5 * c + 1.5 * (x @ y).sum(0),
           sized_sample(lambda n, k, m, b: [(m,) if b > 2 else (n, m), (b, n, k), (b, k, m)])),
    OpInfo("linalg.cross", fnx.linalg.cross, _cross_ref, cross_sample()),
    OpInfo("cross", fnx.cross, _cross_ref, cross_sample()),
    OpInfo("chain_matmul", fnx.chain_matmul, lambda a, b, c: a @ b @ c,
           sized_sample(lambda n, k, m, b: [(n, k), (k, m), (m, b)])),
    OpInfo("vander", fnx.vander, _vander_ref,
           st.builds(lambda x, n, inc: Sample((x,), {"N": n, "increasing": inc}), floats((3,)),
                     st.sampled_from([None, 2, 4]), st.booleans())),
    OpInfo("linalg.vander", fnx.linalg.vander, _linalg_vander_ref,
           st.builds(lambda x, n: Sample((x,), {"N": n}), floats(st.sampled_from([(3,), (2, 3)])),
                     st.sampled_from([None, 2, 4]))),
    OpInfo("linalg.diagonal", fnx.linalg.diagonal,
           lambda a, offset=0, dim1=-2, dim2=-1: np.diagonal(a, offset, dim1, dim2),
           st.builds(lambda a, kw: Sample((a,), kw), floats((2, 3, 4)),
                     st.sampled_from([{}, {"offset": 1}, {"offset": -1, "dim1": 0, "dim2": 2}]))),
    OpInfo("tensordot", fnx.tensordot, lambda a, b, dims: np.tensordot(a, b, dims), tensordot_sample()),
    OpInfo("einsum", fnx.einsum, _einsum_ref, einsum_sample(), double_grad=True),
    OpInfo("linalg.solve", fnx.linalg.solve, _solve_ref, square_sample("matrix"), double_grad=True),
    OpInfo("linalg.solve_vector", fnx.linalg.solve, _solve_ref, square_sample("vector")),
    OpInfo("linalg.solve_right", lambda a, b: fnx.linalg.solve(a, b, left=False),
           lambda a, b: np.swapaxes(np.linalg.solve(np.swapaxes(a, -1, -2), np.swapaxes(b, -1, -2)), -1, -2),
           square_sample().map(lambda s: Sample((s.args[0], s.args[0][..., :1, :] * 0.5 + 1.0)))),
    OpInfo("linalg.solve_triangular", lambda a, b, **kw: fnx.linalg.solve_triangular(a, b, **kw), _solve_triangular_ref,
           square_sample("matrix").flatmap(lambda s: st.fixed_dictionaries(
               {"upper": st.booleans(), "left": st.just(True), "unitriangular": st.booleans()}).map(
               lambda kw: Sample(s.args, kw)))),
    OpInfo("linalg.solve_triangular_right", lambda a, b, **kw: fnx.linalg.solve_triangular(a, b, left=False, **kw),
           lambda a, b, **kw: np.swapaxes(_solve_triangular_ref(np.swapaxes(a, -1, -2), np.swapaxes(b, -1, -2),
                                                                 upper=not kw["upper"], unitriangular=False), -1, -2),
           square_sample("matrix").map(lambda s: Sample((s.args[0], np.swapaxes(s.args[1], -1, -2)),
                                                        {"upper": True}))),
    OpInfo("linalg.multi_dot", lambda a, b, c: fnx.linalg.multi_dot([a, b, c]), lambda a, b, c: a @ b @ c,
           st.builds(lambda n, a, b, c: Sample((a, b, c)), st.just(0), floats((3, 5)), floats((5, 2)), floats((2, 4)))),
    OpInfo("linalg.multi_dot_vectors", lambda a, b, c: fnx.linalg.multi_dot([a, b, c]), lambda a, b, c: a @ b @ c,
           st.builds(lambda a, b, c: Sample((a, b, c)), floats((3,)), floats((3, 2)), floats((2,)))),
    OpInfo("linalg.cond", fnx.linalg.cond, lambda a, p=None: np.linalg.cond(a, p),
           spectral_sample("square").flatmap(lambda s: st.sampled_from([None, 2, -2]).map(
               lambda p: Sample(s.args, {"p": p})))),
    OpInfo("linalg.cond_norms", fnx.linalg.cond, lambda a, p: np.linalg.cond(a, p),
           square_sample().flatmap(lambda s: st.sampled_from(["fro", "nuc", 1, -1, np.inf, -np.inf]).map(
               lambda p: Sample(s.args, {"p": p}))), grad=False),
    OpInfo("linalg.inv", fnx.linalg.inv, np.linalg.inv, square_sample(), double_grad=True),
    OpInfo("linalg.cholesky", lambda a: fnx.linalg.cholesky(_spd_fnx(a)), lambda a: np.linalg.cholesky(_spd(a)),
           square_sample(), double_grad=True, rtol=1e-4),
    OpInfo("linalg.cholesky_upper", lambda a: fnx.linalg.cholesky(_spd_fnx(a), upper=True),
           lambda a: np.swapaxes(np.linalg.cholesky(_spd(a)), -1, -2), square_sample(), rtol=1e-4),
    OpInfo("linalg.det", fnx.linalg.det, np.linalg.det, square_sample(), double_grad=True, rtol=1e-4),
    OpInfo("linalg.slogdet", fnx.linalg.slogdet, np.linalg.slogdet, square_sample(), grad=False, rtol=1e-4),
    OpInfo("linalg.slogdet_logabsdet", lambda a: fnx.linalg.slogdet(a).logabsdet,
           lambda a: np.linalg.slogdet(a)[1], square_sample(), rtol=1e-4),
    OpInfo("linalg.matrix_power", lambda a, n: fnx.linalg.matrix_power(a, n),
           lambda a, n: np.linalg.matrix_power(a, n),
           st.builds(lambda s, n: Sample((s.args[0] * 0.3, n)), square_sample(), st.sampled_from([-2, -1, 1, 2, 3])),
           rtol=1e-4),
    OpInfo("linalg.vector_norm", fnx.linalg.vector_norm, _vector_norm_ref,
           norm_sample(ord=_ORDS, dim=st.sampled_from([None, "one", "two"]), keepdim=st.booleans())),
    OpInfo("linalg.vector_norm_0", fnx.linalg.vector_norm, _vector_norm_ref,
           norm_sample(ord=0, dim=st.sampled_from([None, "one"]), keepdim=st.booleans()), grad=False),
    OpInfo("linalg.matrix_norm", fnx.linalg.matrix_norm, _matrix_norm_ref,
           norm_sample(min_dims=2, ord=_MATRIX_ORDS, dim="two", keepdim=st.booleans())),
    OpInfo("linalg.matrix_norm_spectral", fnx.linalg.matrix_norm, _matrix_norm_ref,
           norm_sample(min_dims=2, ord=st.sampled_from(["nuc", 2, -2]), dim="two", keepdim=st.booleans())),
    OpInfo("linalg.svd", _svd_invariants(fnx), _svd_invariants(np), spectral_sample(), rtol=1e-4,
           double_grad=True),
    OpInfo("linalg.svd_u", lambda a: _svd_invariants(fnx)(a)[2] ** 2, lambda a: _svd_invariants(np)(a)[2] ** 2,
           spectral_sample("tall"), rtol=1e-4),
    OpInfo("linalg.svd_vh", lambda a: _svd_invariants(fnx)(a)[3] ** 2, lambda a: _svd_invariants(np)(a)[3] ** 2,
           spectral_sample("wide"), rtol=1e-4),
    OpInfo("linalg.svd_full", _svd_full, _svd_full_ref, spectral_sample("square"), rtol=1e-4),
    OpInfo("linalg.svd_full_rect", _svd_full, _svd_full_ref, spectral_sample(), rtol=1e-4),
    OpInfo("linalg.svdvals", fnx.linalg.svdvals, lambda a: np.linalg.svd(a, compute_uv=False), spectral_sample(),
           double_grad=True),
    OpInfo("linalg.eigh", _eigh_invariants(fnx), _eigh_invariants(np), spectral_sample(symmetric=True), rtol=1e-4,
           double_grad=True),
    OpInfo("linalg.eigh_upper", _eigh_invariants(fnx, "U"), _eigh_invariants(np, "U"),
           spectral_sample(symmetric=True), rtol=1e-4),
    OpInfo("linalg.eigvalsh", lambda a: fnx.linalg.eigvalsh(_sym(a)), lambda a: np.linalg.eigvalsh(_sym(a)),
           spectral_sample(symmetric=True), double_grad=True, rtol=1e-4),
    OpInfo("linalg.qr", fnx.linalg.qr, np.linalg.qr, spectral_sample("tall"), rtol=1e-4, double_grad=True),
    OpInfo("linalg.qr_r", lambda a: fnx.linalg.qr(a).R, lambda a: np.linalg.qr(a)[1], spectral_sample(),
           rtol=1e-4),
    OpInfo("linalg.qr_complete", lambda a: fnx.linalg.qr(a, mode="complete"),
           lambda a: np.linalg.qr(a, mode="complete"), spectral_sample("square"), rtol=1e-4),
    OpInfo("linalg.qr_complete_rect", lambda a: fnx.linalg.qr(a, mode="complete"),
           lambda a: np.linalg.qr(a, mode="complete"), spectral_sample("tall"), rtol=1e-4, grad=False),
    OpInfo("linalg.pinv", fnx.linalg.pinv, np.linalg.pinv, spectral_sample(), double_grad=True, rtol=1e-4),
    OpInfo("linalg.pinv_hermitian", lambda a: fnx.linalg.pinv(_sym(a), hermitian=True),
           lambda a: np.linalg.pinv(_sym(a), hermitian=True), spectral_sample(symmetric=True), rtol=1e-4),
    OpInfo("linalg.lstsq", fnx.linalg.lstsq, _lstsq_ref, spectral_sample(rhs=True), rtol=1e-4),
    OpInfo("linalg.lstsq_gelsd", lambda a, b: fnx.linalg.lstsq(a, b, driver="gelsd"),
           lambda a, b: _lstsq_ref(a, b, "gelsd"), spectral_sample(rhs=True), rtol=1e-4),
    OpInfo("linalg.matrix_rank", fnx.linalg.matrix_rank, np.linalg.matrix_rank,
           spectral_sample().map(lambda s: Sample((s.args[0] * (np.arange(s.args[0].shape[-1]) % 2),))), grad=False),
    OpInfo("svd_torch", lambda a: (lambda r: (r.U @ r.V.mT, r.S))(fnx.svd(a)),
           lambda a: (lambda u, s, vh: (u @ vh, s))(*np.linalg.svd(a, full_matrices=False)), spectral_sample(),
           rtol=1e-4),
    OpInfo("pinverse", fnx.pinverse, np.linalg.pinv, spectral_sample(), rtol=1e-4),
    OpInfo("linalg.norm", fnx.linalg.norm, lambda x, **kw: np.linalg.norm(x, **kw),
           norm_sample(max_dims=2, ord=st.sampled_from([None, 1, math.inf, -math.inf]))),
]


def _expm_ref(a: np.ndarray) -> np.ndarray:
    """exp(a) by a 30-term Taylor series of a / 2^s (norm below 1/2), squared s times: independent of Padé."""
    a = np.asarray(a)
    norm = float(np.abs(a).sum(-2).max(initial=0.0))
    s = int(np.ceil(np.log2(norm / 0.5))) if norm > 0.5 else 0
    x = a / 2.0 ** s
    out = term = np.broadcast_to(np.eye(a.shape[-1], dtype=a.dtype), a.shape).copy()
    for k in range(1, 30):
        term = term @ x / k
        out = out + term
    for _ in range(s):
        out = out @ out
    return out


@st.composite
def matrix_exp_sample(draw):
    """Square matrices with 1-norms up to ~20, so that several squarings run."""
    n = draw(st.integers(1, 4))
    batch = draw(st.sampled_from([(), (2,)]))
    return Sample((draw(floats(batch + (n, n), -3.0, 3.0)) * draw(st.sampled_from([0.1, 1.0, 2.0])),))


OPS.append(OpInfo("linalg.matrix_exp", fnx.linalg.matrix_exp, _expm_ref, matrix_exp_sample(), rtol=1e-4,
                  double_grad=True))


def _householder_ref(a: np.ndarray, tau: np.ndarray) -> np.ndarray:
    m, n = a.shape[-2:]
    q = np.eye(m)[:, :n]
    for i in reversed(range(tau.shape[-1])):
        v = np.concatenate([np.zeros(i), [1.0], a[i + 1:, i]])
        q = q - tau[i] * np.outer(v, v @ q)
    return q


@st.composite
def householder_sample(draw):
    n = draw(st.integers(1, 3))
    m = draw(st.integers(n, 4))
    return Sample((draw(floats((m, n), -1.5, 1.5)), draw(floats((draw(st.integers(1, n)),), 0.0, 2.0))))


OPS.append(OpInfo("linalg.householder_product", fnx.linalg.householder_product, _householder_ref,
                  householder_sample(), double_grad=True))


def _lu_ref(a: np.ndarray):
    """(P, L, U, smallest pivot margin) of one matrix by Doolittle elimination with partial pivoting; the margin
    is how much the chosen pivot's magnitude beats the runner-up's (finite differences need it positive)."""
    a = np.array(a, dtype=np.float64)
    m, n = a.shape
    k = min(m, n)
    perm, margin = np.arange(m), np.inf
    for j in range(k):
        col = np.abs(a[j:, j])
        p = j + int(np.argmax(col))
        if col.size > 1:
            margin = min(margin, col.max() - np.sort(col)[-2])
        a[[j, p]], perm[[j, p]] = a[[p, j]], perm[[p, j]]
        with np.errstate(divide="ignore", invalid="ignore"):   # a zero pivot: the sample is filtered out
            a[j + 1:, j] /= a[j, j]
        a[j + 1:, j + 1:] -= np.outer(a[j + 1:, j], a[j, j + 1:])
    L = np.tril(a[:, :k], -1) + np.eye(m, k)
    return np.eye(m)[perm].T, L, np.triu(a[:k]), margin


@st.composite
def lu_sample(draw, square: bool = False, rhs: bool = False):
    """Matrices whose pivots win by at least 0.2 and are at least 0.3 in size (stable under finite differences)."""
    m = draw(st.integers(1, 4))
    n = m if square else draw(st.integers(1, 4))
    batch = draw(st.sampled_from([(), (2,)]))
    a = draw(floats(batch + (m, n), -2.0, 2.0).filter(
        lambda x: all(_lu_ref(mat)[3] > 0.2 and np.abs(np.diag(_lu_ref(mat)[2])).min() > 0.3
                      for mat in x.reshape((-1, m, n)))))
    if rhs:
        return Sample((a, draw(floats(batch + (m, draw(st.integers(1, 2))), -2.0, 2.0))))
    return Sample((a,))


def _lu_batched_ref(a: np.ndarray):
    parts = [_lu_ref(mat)[:3] for mat in a.reshape((-1,) + a.shape[-2:])]
    return tuple(np.stack([p[i] for p in parts]).reshape(a.shape[:-2] + parts[0][i].shape) for i in range(3))


OPS += [
    OpInfo("linalg.lu", lambda a: tuple(fnx.linalg.lu(a))[1:], lambda a: _lu_batched_ref(a)[1:], lu_sample(),
           double_grad=True),
    OpInfo("linalg.lu_P", lambda a: fnx.linalg.lu(a).P, lambda a: _lu_batched_ref(a)[0], lu_sample(), grad=False),
    OpInfo("linalg.lu_solve", lambda a, b: fnx.linalg.lu_solve(*fnx.linalg.lu_factor(a), b), np.linalg.solve,
           lu_sample(square=True, rhs=True)),
]


OPS += [
    OpInfo("linalg.cholesky_ex", lambda a, upper: fnx.linalg.cholesky_ex(_spd_fnx(a), upper=upper),
           _cholesky_ex_ref, square_sample().flatmap(lambda s: st.booleans().map(
               lambda u: Sample(s.args, {"upper": u}))), rtol=1e-4, double_grad=True),
    OpInfo("linalg.inv_ex", fnx.linalg.inv_ex, lambda a: (np.linalg.inv(a), np.zeros(a.shape[:-2], np.int32)),
           square_sample(), double_grad=True),
    OpInfo("linalg.solve_ex", fnx.linalg.solve_ex,
           lambda a, b: (_solve_ref(a, b), np.zeros(a.shape[:-2], np.int32)), square_sample("matrix")),
    OpInfo("linalg.solve_ex_vector", fnx.linalg.solve_ex,
           lambda a, b: (_solve_ref(a, b), np.zeros(a.shape[:-2], np.int32)), square_sample("vector")),
    OpInfo("linalg.tensorinv", lambda a, ind: fnx.linalg.tensorinv(a, ind=ind),
           lambda a, ind: np.linalg.tensorinv(a, ind=ind),
           square_sample().filter(lambda s: s.args[0].ndim == 2 and s.args[0].shape[0] in (4, 2)).map(
               lambda s: Sample((s.args[0].reshape((2, 2, 2, 2) if s.args[0].shape[0] == 4 else (2, 2)),),
                                {"ind": 2 if s.args[0].shape[0] == 4 else 1}))),
    OpInfo("linalg.tensorsolve", fnx.linalg.tensorsolve, _tensorsolve_ref, tensorsolve_sample()),
    OpInfo("cholesky", lambda a, upper: fnx.cholesky(_spd_fnx(a), upper),
           lambda a, upper: _cholesky_ex_ref(a, upper)[0],
           square_sample().flatmap(lambda s: st.booleans().map(lambda u: Sample(s.args, {"upper": u}))), rtol=1e-4),
    OpInfo("cholesky_solve", lambda b, a, upper: fnx.cholesky_solve(b, _spd_factor(a, upper), upper),
           _cholesky_solve_ref, square_sample("matrix").flatmap(lambda s: st.booleans().map(
               lambda u: Sample((s.args[1], s.args[0]), {"upper": u}))), rtol=1e-4),
    OpInfo("cholesky_inverse", lambda a, upper: fnx.cholesky_inverse(_spd_factor(a, upper), upper),
           lambda a, upper: np.linalg.inv(_spd(a)), square_sample().flatmap(lambda s: st.booleans().map(
               lambda u: Sample(s.args, {"upper": u}))), rtol=1e-4),
    OpInfo("triangular_solve", fnx.triangular_solve, _triangular_solve_ref,
           square_sample("matrix").flatmap(lambda s: st.fixed_dictionaries(
               {"upper": st.booleans(), "transpose": st.booleans(), "unitriangular": st.booleans()}).map(
               lambda kw: Sample((s.args[1], s.args[0]), kw)))),
]


def _ormqr_ref(a, tau, c, left=True, transpose=False):
    m = a.shape[-2]
    q = np.eye(m)
    for i in range(tau.shape[-1]):
        v = np.concatenate([np.zeros(i), [1.0], a[i + 1:, i]])
        q = q @ (np.eye(m) - tau[i] * np.outer(v, v))
    q = q.T if transpose else q
    return q @ c if left else c @ q


@st.composite
def ormqr_sample(draw):
    n = draw(st.integers(1, 3))
    m = draw(st.integers(n, 4))
    left, transpose = draw(st.booleans()), draw(st.booleans())
    p = draw(st.integers(1, 3))
    c = draw(floats((m, p) if left else (p, m)))
    return Sample((draw(floats((m, n), -1.5, 1.5)), draw(floats((draw(st.integers(1, n)),), 0.0, 2.0)), c),
                  {"left": left, "transpose": transpose})


def _nuclear_ref(x, dim=(-2, -1), keepdim=False):
    return _matrix_norm_ref(x, "nuc", dim, keepdim)


OPS += [
    OpInfo("ormqr", fnx.ormqr, _ormqr_ref, ormqr_sample(), double_grad=True),
    OpInfo("nuclear_norm", fnx.nuclear_norm, _nuclear_ref, spectral_sample().flatmap(lambda s: st.sampled_from(
        [{}, {"keepdim": True}, {"dim": (-1, -2)}]).map(lambda kw: Sample(s.args, kw))), rtol=1e-4),
    OpInfo("frobenius_norm", fnx.frobenius_norm, lambda x, dim, keepdim=False: _vector_norm_ref(x, 2, dim, keepdim),
           norm_sample(dim=st.sampled_from(["one", "two"]), keepdim=st.booleans())),
]



OPS.append(OpInfo("linalg.ldl_solve", lambda a, b: fnx.linalg.ldl_solve(*fnx.linalg.ldl_factor(a), b),
                  lambda a, b: np.linalg.solve(a, b), spectral_sample(symmetric=True).flatmap(
                      lambda s: floats(s.args[0].shape[:-1] + (2,)).map(lambda b: Sample((s.args[0], b)))),
                  grad=False, rtol=1e-4))
