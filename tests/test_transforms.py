"""Functional transforms: grad, vjp, jvp, jacfwd, jacrev, vmap, checkpoint, and how they compose.

The composition matrix applies every pair (and several triples) of transforms to eight functions. Each
transform T maps a function h of one float64 tensor to another, and has a reference built from h alone
(central differences for the derivatives, a Python loop for vmap, h itself for checkpoint). T(h) must
equal ref_T(h) where h is itself a transformed function evaluated by fnx, so every level is checked
against the level below it.
"""
from __future__ import annotations

import collections
import itertools

import numpy as np
import pytest

import fnx

EPS = 1e-6


def t64(values) -> fnx.Tensor:
    return fnx.tensor(np.asarray(values, dtype=np.float64))


def arr(x) -> np.ndarray:
    return x.detach().numpy() if isinstance(x, fnx.Tensor) else np.asarray(x)


# ---------------------------------------------------------------- the functions (float64 tensor -> tensor)
IDX = fnx.tensor([2, 0, 2])
C = t64([[0.5], [-1.0]])


def f_scalar(x):
    return fnx.sin(x) * x * x + fnx.exp(x * 0.5)


def f_vector(x):
    return fnx.tanh(x) * fnx.exp(x * 0.3) + x.sum() * x


def f_matrix(x):
    w = x.reshape(2, 3)
    return fnx.tanh(w @ w.T) + w[:, :2].sum()


def f_reduce(x):
    return fnx.log(fnx.exp(x).sum()) + (x * x).mean() + x.amax() * 0.5


def f_broadcast(x):
    return fnx.sin(x[:, None] * x[None, :]).sum(0) + C * x


def f_index(x):
    return (x[1:] * x[:-1]).sum() + x[IDX] * 2.0


def f_cond(x):
    return fnx.cond(x.sum() > 0, lambda a: fnx.sin(a) * a, lambda a: fnx.cos(a) + a, x)


def f_scan(x):
    carry, ys = fnx.scan(lambda c, xi: (c * fnx.sin(xi) + xi, c * xi), t64(1.0), x)
    return ys * carry


FUNCTIONS = {"scalar": (f_scalar, 0.7), "vector": (f_vector, [0.3, -0.5, 0.8]),
             "matrix": (f_matrix, [0.3, -0.5, 0.8, 0.1, 0.2, -0.4]), "reduce": (f_reduce, [0.3, -0.5, 0.8]),
             "broadcast": (f_broadcast, [0.3, -0.5, 0.8]), "index": (f_index, [0.3, -0.5, 0.8]),
             "cond": (f_cond, [0.3, -0.5, 0.8]), "scan": (f_scan, [0.3, -0.5, 0.8])}


# ---------------------------------------------------------------- transforms and their references
def _weights(shape) -> fnx.Tensor:
    """A fixed cotangent / tangent of `shape` (no zeros, no symmetry)."""
    n = int(np.prod(shape))
    return t64(np.sin(np.arange(n) * 1.3 + 0.7).reshape(shape))


def _fd_columns(h, x: fnx.Tensor) -> np.ndarray:
    """Central-difference Jacobian of h at x, shaped out_shape + in_shape."""
    x0 = arr(x)
    cols = []
    for i in np.ndindex(x0.shape or ()):
        e = np.zeros_like(x0)
        e[i] = EPS
        cols.append((arr(h(t64(x0 + e))) - arr(h(t64(x0 - e)))) / (2 * EPS))
    out = np.stack(cols, axis=-1)
    return out.reshape(out.shape[:-1] + x0.shape)


def _contract_out(jac: np.ndarray, w: np.ndarray, in_ndim: int) -> np.ndarray:
    """w . J over the output axes (a vjp)."""
    out_axes = jac.ndim - in_ndim
    return np.tensordot(w, jac, axes=(list(range(out_axes)), list(range(out_axes))))


SCALES = (1.0, 1.1, 0.8)


def _batch(x: fnx.Tensor) -> fnx.Tensor:
    return fnx.stack([x * s for s in SCALES])


class T:
    """A transform: `apply(h)` with fnx, `ref(h)` from h by differences or loops."""

    def __init__(self, name, apply, ref):
        self.name, self.apply, self.ref = name, apply, ref

    def __repr__(self):
        return self.name


def _grad(h):
    def g(x):
        w = _weights(tuple(h(x).shape))
        return fnx.grad(lambda y: (h(y) * w).sum())(x)

    return g


def _grad_ref(h):
    def g(x):
        out = arr(h(x))
        return t64(_contract_out(_fd_columns(h, x), arr(_weights(out.shape)), x.ndim))

    return g


def _vjp(h):
    def g(x):
        out, pull = fnx.vjp(h, x)
        (ct,) = pull(_weights(tuple(out.shape)))
        return ct

    return g


def _jvp(h):
    return lambda x: fnx.jvp(h, (x,), (_weights(tuple(x.shape)),))[1]


def _jvp_ref(h):
    def g(x):
        v = arr(_weights(tuple(x.shape)))
        return t64((arr(h(t64(arr(x) + EPS * v))) - arr(h(t64(arr(x) - EPS * v)))) / (2 * EPS))

    return g


def _vmap(h):
    """h over a batch of scaled copies of x: a function of x again."""
    return lambda x: fnx.vmap(h)(_batch(x))


def _vmap_ref(h):
    return lambda x: fnx.stack([h(x * s) for s in SCALES])


TRANSFORMS = {
    "grad": T("grad", _grad, _grad_ref),
    "vjp": T("vjp", _vjp, _grad_ref),
    "jvp": T("jvp", _jvp, _jvp_ref),
    "jacfwd": T("jacfwd", fnx.jacfwd, lambda h: lambda x: t64(_fd_columns(h, x))),
    "jacrev": T("jacrev", fnx.jacrev, lambda h: lambda x: t64(_fd_columns(h, x))),
    "vmap": T("vmap", _vmap, _vmap_ref),
    "checkpoint": T("checkpoint", fnx.checkpoint, lambda h: h),
}
PAIRS = [(a, b) for a in TRANSFORMS for b in TRANSFORMS]
TRIPLES = [("grad", "grad", "grad"), ("vmap", "grad", "grad"), ("grad", "vmap", "jvp"), ("jacfwd", "jacrev", "vmap"),
           ("jacrev", "jacfwd", "checkpoint"), ("vmap", "vmap", "jacrev"), ("checkpoint", "grad", "vmap"),
           ("jvp", "vjp", "jvp"), ("vjp", "jacfwd", "grad"), ("vmap", "checkpoint", "jvp")]


def _compose(names, f):
    """names[0](names[1](...(f))) applied with fnx."""
    h = f
    for n in reversed(names):
        h = TRANSFORMS[n].apply(h)
    return h


def _check_composition(names, fname):
    f, x = FUNCTIONS[fname]
    x = t64(x)
    inner = _compose(names[1:], f)
    got = arr(TRANSFORMS[names[0]].apply(inner)(x))
    expected = arr(TRANSFORMS[names[0]].ref(inner)(x))
    assert got.shape == expected.shape, f"{names} of {fname}: shape {got.shape}, reference {expected.shape}"
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7, err_msg=f"{names} of {fname}")


@pytest.mark.parametrize("fname", FUNCTIONS)
@pytest.mark.parametrize("name", TRANSFORMS)
def test_single_transform_matches_reference(name, fname):
    _check_composition((name,), fname)


@pytest.mark.parametrize("fname", FUNCTIONS)
@pytest.mark.parametrize("names", PAIRS, ids="-".join)
def test_pairs_of_transforms_compose(names, fname):
    _check_composition(names, fname)


@pytest.mark.parametrize("fname", ["vector", "broadcast", "index", "cond", "scan"])
@pytest.mark.parametrize("names", TRIPLES, ids="-".join)
def test_triples_of_transforms_compose(names, fname):
    _check_composition(names, fname)


# ---------------------------------------------------------------- named compositions
def test_named_compositions():
    f = lambda x: (fnx.sin(x) * x * x).sum()  # noqa: E731
    x = t64([0.3, -0.5, 0.8])
    xn = arr(x)
    np.testing.assert_allclose(arr(fnx.grad(fnx.grad(lambda s: fnx.sin(s) * s * s))(t64(0.3))),
                               -np.sin(0.3) * 0.09 + 4 * 0.3 * np.cos(0.3) + 2 * np.sin(0.3), rtol=1e-12)
    per_example = fnx.vmap(fnx.grad(f))(_batch(x))
    np.testing.assert_allclose(arr(per_example), np.stack([arr(fnx.grad(f)(x * s)) for s in SCALES]), rtol=1e-12)
    g = fnx.grad(lambda b: fnx.vmap(lambda r: fnx.sin(r) * r)(b).sum())(x.reshape(3, 1) * x)
    b = xn.reshape(3, 1) * xn
    np.testing.assert_allclose(arr(g), np.cos(b) * b + np.sin(b), rtol=1e-12)
    hess = arr(fnx.hessian(f)(x))
    np.testing.assert_allclose(arr(fnx.jacfwd(fnx.jacrev(f))(x)), hess, rtol=1e-12)
    np.testing.assert_allclose(arr(fnx.jacrev(fnx.jacfwd(f))(x)), hess, rtol=1e-12)
    np.testing.assert_allclose(hess, np.diag(-np.sin(xn) * xn ** 2 + 4 * xn * np.cos(xn) + 2 * np.sin(xn)),
                               rtol=1e-12, atol=1e-15)


def test_perturbation_confusion():
    """The inner grad differentiates w.r.t. y only; x stays a constant of the inner transform."""
    out = fnx.grad(lambda x: fnx.grad(lambda y: x * y)(t64(1.0)))(t64(2.0))
    assert float(out) == 1.0
    # the classic: d/dx [x * d/dy (x + y)] = 1, not 2
    out = fnx.grad(lambda x: x * fnx.grad(lambda y: x + y)(t64(1.0)))(t64(3.0))
    assert float(out) == 1.0
    out = fnx.jvp(lambda x: x * fnx.jvp(lambda y: x + y, (t64(1.0),), (t64(1.0),))[1], (t64(3.0),), (t64(1.0),))[1]
    assert float(out) == 1.0


# ---------------------------------------------------------------- argnums, aux, values, pytrees
def test_grad_argnums_has_aux_and_value_and_grad():
    def f(x, y, z):
        return (x * y * y + z).sum(), {"y2": y * y}

    x, y, z = t64([1.0, 2.0]), t64([3.0, 4.0]), t64([5.0, 6.0])
    (gx, gz), aux = fnx.grad(f, argnums=(0, 2), has_aux=True)(x, y, z)
    np.testing.assert_allclose(arr(gx), [9.0, 16.0])
    np.testing.assert_allclose(arr(gz), [1.0, 1.0])
    np.testing.assert_allclose(arr(aux["y2"]), [9.0, 16.0])
    gy = fnx.grad(lambda *a: f(*a)[0], argnums=-2)(x, y, z)
    np.testing.assert_allclose(arr(gy), [6.0, 16.0])
    (value, aux), (gy,) = fnx.value_and_grad(f, argnums=(1,), has_aux=True)(x, y, z)
    assert float(value) == pytest.approx(9 + 32 + 11)
    np.testing.assert_allclose(arr(gy), [6.0, 16.0])
    v, g = fnx.value_and_grad(lambda x: (x * x).sum())(x)
    assert float(v) == 5.0 and arr(g).tolist() == [2.0, 4.0]
    assert not isinstance(aux["y2"], fnx.core.Tracer)


def test_grad_errors():
    x = t64([1.0, 2.0])
    with pytest.raises(TypeError, match="scalar"):
        fnx.grad(lambda x: x * 2)(x)
    with pytest.raises(TypeError, match="floating-point"):
        fnx.grad(lambda n: n.sum().double())(fnx.tensor([1, 2]))
    with pytest.raises(TypeError, match="argnums"):
        fnx.grad(lambda x: x.sum(), argnums=3)(x)
    with pytest.raises(TypeError, match="pair"):
        fnx.grad(lambda x: x.sum(), has_aux=True)(x)


Params = collections.namedtuple("Params", "w b")


def test_jvp_and_vjp_on_pytrees():
    p = {"w": t64([1.0, 2.0]), "pair": (t64(3.0), None), "nt": Params(t64([0.5]), t64([-1.0]))}

    def f(p):
        s = (p["w"] * p["pair"][0]).sum() + (p["nt"].w * p["nt"].b).sum()
        return {"s": s, "t": (p["w"] * 2.0, None)}

    tangent = {"w": t64([1.0, 0.0]), "pair": (t64(1.0), None), "nt": Params(t64([0.0]), t64([2.0]))}
    out, tout = fnx.jvp(f, (p,), (tangent,))
    assert float(out["s"]) == pytest.approx(9.0 - 0.5)
    assert float(tout["s"]) == pytest.approx(3.0 + 3.0 + 1.0)
    np.testing.assert_allclose(arr(tout["t"][0]), [2.0, 0.0])
    assert tout["t"][1] is None
    out, pull = fnx.vjp(f, p)
    (ct,) = pull({"s": t64(1.0), "t": (t64([1.0, 1.0]), None)})
    np.testing.assert_allclose(arr(ct["w"]), [5.0, 5.0])
    assert float(ct["pair"][0]) == 3.0 and ct["pair"][1] is None
    assert isinstance(ct["nt"], Params) and float(ct["nt"].w[0]) == -1.0 and float(ct["nt"].b[0]) == 0.5
    with pytest.raises(TypeError, match="structure"):
        pull({"s": t64(1.0)})
    with pytest.raises(TypeError, match="same tree structure"):
        fnx.jvp(f, (p,), ({"w": t64([1.0, 0.0])},))


def test_vjp_has_aux_and_multiple_primals():
    def f(x, y):
        return x * y, {"note": x + 1.0}

    out, pull, aux = fnx.vjp(f, t64([2.0]), t64([3.0]), has_aux=True)
    assert float(out[0]) == 6.0 and float(aux["note"][0]) == 3.0
    gx, gy = pull(t64([1.0]))
    assert float(gx[0]) == 3.0 and float(gy[0]) == 2.0


def test_jacobians_with_argnums_and_pytree_outputs():
    def f(x, y):
        return {"a": x * y, "b": (x * x).sum()}

    x, y = t64([1.0, 2.0]), t64([3.0, 4.0])
    for jac in (fnx.jacfwd, fnx.jacrev):
        j = jac(f, argnums=(0, 1))(x, y)
        np.testing.assert_allclose(arr(j["a"][0]), np.diag([3.0, 4.0]))
        np.testing.assert_allclose(arr(j["a"][1]), np.diag([1.0, 2.0]))
        np.testing.assert_allclose(arr(j["b"][0]), [2.0, 4.0])
        np.testing.assert_allclose(arr(j["b"][1]), [0.0, 0.0])
    h = fnx.hessian(lambda x, y: (x * x * y).sum(), argnums=0)(x, y)
    np.testing.assert_allclose(arr(h), np.diag([6.0, 8.0]))
    h, aux = fnx.hessian(lambda x: ((x * x * x).sum(), x.sum()), has_aux=True)(x)
    np.testing.assert_allclose(arr(h), np.diag([6.0, 12.0]))
    assert float(aux) == 3.0
    np.testing.assert_allclose(arr(fnx.jacrev(lambda x, scale: x * scale)(x, scale=3.0)), 3 * np.eye(2))


# ---------------------------------------------------------------- vmap axes
def test_vmap_in_axes_and_out_axes():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal(4)
    f = lambda x, y: x * y + 1.0  # noqa: E731
    np.testing.assert_allclose(arr(fnx.vmap(f, in_axes=(0, None))(t64(a), t64(b))), a * b + 1)
    np.testing.assert_allclose(arr(fnx.vmap(f, in_axes=(1, None))(t64(a.T), t64(b))), a * b + 1)
    np.testing.assert_allclose(arr(fnx.vmap(f, in_axes=(-1, None))(t64(a.T), t64(b))), a * b + 1)
    np.testing.assert_allclose(arr(fnx.vmap(f, in_axes=(0, None), out_axes=1)(t64(a), t64(b))), (a * b + 1).T)
    np.testing.assert_allclose(arr(fnx.vmap(f, in_axes=(0, None), out_axes=-1)(t64(a), t64(b))), (a * b + 1).T)
    np.testing.assert_allclose(arr(fnx.vmap(f, in_axes=[0, None])(t64(a), t64(b))), a * b + 1)
    np.testing.assert_allclose(arr(fnx.vmap(lambda x: x.sum(), in_axes=1)(t64(a))), a.sum(0))

    def g(d, scale):
        return {"sum": d["x"] + d["y"], "y": d["y"] * scale}, d["x"].sum()

    d = {"x": t64(a), "y": t64(a.T)}
    (out, s) = fnx.vmap(g, in_axes=({"x": 0, "y": 1}, None), out_axes=({"sum": 1, "y": 0}, 0))(d, t64(2.0))
    np.testing.assert_allclose(arr(out["sum"]), 2 * a.T)
    np.testing.assert_allclose(arr(out["y"]), 2 * a)
    np.testing.assert_allclose(arr(s), a.sum(1))
    # an output that does not depend on the mapped axis: out_axes=None returns it once, 0 broadcasts it
    const = fnx.vmap(lambda x, y: (x * 2.0, y), in_axes=(0, None), out_axes=(0, None))(t64(a), t64(b))
    np.testing.assert_allclose(arr(const[1]), b)
    bc = fnx.vmap(lambda x, y: y, in_axes=(0, None))(t64(a), t64(b))
    np.testing.assert_allclose(arr(bc), np.broadcast_to(b, (3, 4)))


def test_vmap_axis_errors():
    x = fnx.ones(3, 4)
    with pytest.raises(ValueError, match="inconsistent sizes"):
        fnx.vmap(lambda a, b: a + b)(x, fnx.ones(4, 4))
    with pytest.raises(ValueError, match="out of range"):
        fnx.vmap(lambda a: a, in_axes=2)(x)
    with pytest.raises(ValueError, match="at least one mapped"):
        fnx.vmap(lambda a: a, in_axes=None)(x)
    with pytest.raises(ValueError, match="out_axes=None"):
        fnx.vmap(lambda a: a, out_axes=None)(x)
    with pytest.raises(ValueError, match="in_axes"):
        fnx.vmap(lambda a, b: a, in_axes=(0, 0, 0))(x, x)
    with pytest.raises(TypeError, match="in_axes=None"):
        fnx.vmap(lambda a, n: a * n)(x, 3)
    assert arr(fnx.vmap(lambda a, n: a * n, in_axes=(0, None))(x, 3)).tolist() == [[3.0] * 4] * 3


def test_nested_vmap():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((4, 3))
    dots = fnx.vmap(fnx.vmap(lambda u, v: (u * v).sum(), in_axes=(None, 0)), in_axes=(0, None))(t64(a), t64(b))
    np.testing.assert_allclose(arr(dots), a @ b.T, rtol=1e-12)
    cube = rng.standard_normal((2, 3, 4))
    out = fnx.vmap(fnx.vmap(lambda r: fnx.exp(r) / fnx.exp(r).sum(), in_axes=1, out_axes=1))(t64(cube))
    e = np.exp(cube)
    np.testing.assert_allclose(arr(out), e / e.sum(1, keepdims=True), rtol=1e-12)


def test_vmap_randomness_modes():
    x = fnx.zeros(4, 3)
    with pytest.raises(RuntimeError, match="randomness"):
        fnx.vmap(lambda r: r + fnx.rand(3))(x)
    fnx.manual_seed(0)
    same = arr(fnx.vmap(lambda r: r + fnx.rand(3), randomness="same")(x))
    assert same.shape == (4, 3) and all(np.array_equal(same[0], row) for row in same)
    different = arr(fnx.vmap(lambda r: r + fnx.randn(3), randomness="different")(x))
    assert different.shape == (4, 3) and len({row.tobytes() for row in different}) == 4
    nested = arr(fnx.vmap(fnx.vmap(lambda r: r + fnx.rand(()), randomness="different"),
                          randomness="same")(x))
    assert all(np.array_equal(nested[0], row) for row in nested) and len(set(nested[0].tolist())) == 3
    with pytest.raises(ValueError, match="randomness"):
        fnx.vmap(lambda r: r, randomness="sometimes")


# ---------------------------------------------------------------- stop_gradient, custom rules, checkpoint
def test_stop_gradient():
    x = t64([1.0, 2.0])
    g = fnx.grad(lambda x: (x * fnx.stop_gradient(x * x)).sum())(x)
    np.testing.assert_allclose(arr(g), [1.0, 4.0])
    tout = fnx.jvp(lambda x: x + fnx.stop_gradient(x), (x,), (t64([1.0, 1.0]),))[1]
    np.testing.assert_allclose(arr(tout), [1.0, 1.0])
    tree = fnx.stop_gradient({"a": x, "b": None})
    assert tree["b"] is None and arr(tree["a"]).tolist() == [1.0, 2.0]
    g = fnx.grad(lambda x: (x * x.detach()).sum())(x)  # detach under a transform is stop_gradient
    np.testing.assert_allclose(arr(g), [1.0, 2.0])
    per = fnx.vmap(fnx.grad(lambda r: (r * fnx.stop_gradient(r)).sum()))(t64([[1.0, 2.0], [3.0, 4.0]]))
    np.testing.assert_allclose(arr(per), [[1.0, 2.0], [3.0, 4.0]])


@fnx.custom_vjp
def clip_gradient(x, lo, hi):
    """Identity whose gradient is clipped to [lo, hi] (a rule that differs from the true derivative)."""
    return x * 1.0


def _clip_fwd(x, lo, hi):
    return x * 1.0, (lo, hi)


def _clip_bwd(res, g):
    lo, hi = res
    return fnx.clamp(g, lo, hi), None, None


clip_gradient.defvjp(_clip_fwd, _clip_bwd)


def test_custom_vjp_under_grad_vmap_and_eager_backward():
    lo, hi = t64(-1.0), t64(1.0)
    x = t64([1.0, 2.0, 3.0])
    g = fnx.grad(lambda x: (clip_gradient(x, lo, hi) * t64([0.5, 3.0, -4.0])).sum())(x)
    np.testing.assert_allclose(arr(g), [0.5, 1.0, -1.0])
    np.testing.assert_allclose(arr(clip_gradient(x, lo, hi)), arr(x))
    per = fnx.vmap(fnx.grad(lambda r: (clip_gradient(r, lo, hi) * r).sum()))(t64([[0.5, 2.0], [-3.0, 0.1]]))
    np.testing.assert_allclose(arr(per), [[1.0, 3.0], [-4.0, 0.2]])
    out = fnx.vmap(lambda r: clip_gradient(r, lo, hi) * 2.0)(t64([[0.5, 2.0], [-3.0, 0.1]]))
    np.testing.assert_allclose(arr(out), [[1.0, 4.0], [-6.0, 0.2]])
    leaf = t64([1.0, 2.0, 3.0]).requires_grad_(True)
    (clip_gradient(leaf, lo, hi) * t64([0.5, 3.0, -4.0])).sum().backward()
    np.testing.assert_allclose(arr(leaf.grad), [0.5, 1.0, -1.0])
    # the rule also runs when the clipped value feeds a vmapped gradient of a batched bound
    g = fnx.grad(lambda x: fnx.vmap(lambda h: (clip_gradient(x, -h, h) * 3.0).sum())(t64([1.0, 2.0])).sum())(x)
    np.testing.assert_allclose(arr(g), [3.0, 3.0, 3.0])


def test_custom_vjp_nondiff_argnums_and_pytrees():
    calls = []

    def scaled(n, p):
        return {"y": p["a"] * n + p["b"]}

    f = fnx.custom_vjp(scaled, nondiff_argnums=(0,))

    def fwd(n, p):
        calls.append(n)
        return scaled(n, p), p["a"]

    def bwd(n, a, ct):
        return ({"a": ct["y"] * n * 10.0, "b": ct["y"]},)

    f.defvjp(fwd, bwd)
    p = {"a": t64([1.0, 2.0]), "b": t64([0.0, 1.0])}
    g = fnx.grad(lambda p: f(3, p)["y"].sum())(p)
    np.testing.assert_allclose(arr(g["a"]), [30.0, 30.0])
    np.testing.assert_allclose(arr(g["b"]), [1.0, 1.0])
    assert calls == [3]
    with pytest.raises(TypeError, match="defvjp"):
        fnx.custom_vjp(lambda x: x)(t64(1.0))


@fnx.custom_jvp
def log1pexp(x):
    """softplus with a stable derivative rule: the naive one overflows for large x."""
    return fnx.log(1.0 + fnx.exp(x))


@log1pexp.defjvp
def _log1pexp_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return log1pexp(x), t * fnx.sigmoid(x)


def test_custom_jvp_rule_drives_both_modes():
    x = t64([0.0, 2.0, 1000.0])
    out, tout = fnx.jvp(log1pexp, (x,), (t64([1.0, 1.0, 1.0]),))
    np.testing.assert_allclose(arr(tout), [0.5, 1 / (1 + np.exp(-2.0)), 1.0])
    g = fnx.grad(lambda x: log1pexp(x).sum())(x)
    np.testing.assert_allclose(arr(g), [0.5, 1 / (1 + np.exp(-2.0)), 1.0])  # no nan: the rule was used
    per = fnx.vmap(fnx.grad(lambda r: log1pexp(r).sum()))(x.reshape(3, 1))
    np.testing.assert_allclose(arr(per).ravel(), arr(g))
    jac = fnx.jacfwd(log1pexp)(x)
    np.testing.assert_allclose(np.diag(arr(jac)), arr(g))
    hess = fnx.hessian(lambda x: log1pexp(x).sum())(t64([0.0, 2.0]))
    s = 1 / (1 + np.exp(-np.array([0.0, 2.0])))
    np.testing.assert_allclose(np.diag(arr(hess)), s * (1 - s), rtol=1e-10)
    vm = fnx.vmap(log1pexp)(x[:2].reshape(2, 1))
    np.testing.assert_allclose(arr(vm).ravel(), np.logaddexp(0, arr(x[:2])))


def test_checkpoint_rematerialises():
    calls = []

    def block(x):
        calls.append(1)
        return fnx.sin(x) * fnx.exp(x)

    x = t64([0.1, 0.2])
    g = fnx.grad(lambda x: fnx.checkpoint(block)(x).sum())(x)
    assert len(calls) == 2  # once forward, once more in the backward pass
    xn = arr(x)
    np.testing.assert_allclose(arr(g), (np.cos(xn) + np.sin(xn)) * np.exp(xn), rtol=1e-12)
    calls.clear()
    fnx.grad(lambda x: block(x).sum())(x)
    assert len(calls) == 1
    calls.clear()
    leaf = t64([0.1, 0.2]).requires_grad_(True)
    fnx.checkpoint(block)(leaf).sum().backward()
    assert len(calls) == 2
    np.testing.assert_allclose(arr(leaf.grad), arr(g), rtol=1e-12)
    out = fnx.checkpoint(lambda x, n: x * n, static_argnums=1)(x, 3)
    np.testing.assert_allclose(arr(out), arr(x) * 3)
    assert fnx.remat is fnx.checkpoint


@pytest.mark.parametrize("how", ["backward", "grad"])
def test_checkpoint_recomputes_the_same_dropout_mask(how):
    """The backward pass reruns the block from the forward's generator state: the mask it differentiates is the
    one the forward applied, and the generator continues as if nothing had been recomputed."""
    import fnx.nn.functional as F

    def block(v):
        return F.dropout(v * 2.0, 0.5, training=True)

    fnx.manual_seed(3)
    x = fnx.randn(500, dtype=fnx.float64)
    if how == "backward":
        leaf = x.clone().requires_grad_(True)
        y = fnx.checkpoint(block)(leaf)
        y.sum().backward()
        grad, kept = leaf.grad.numpy(), y.detach().numpy() != 0
    else:   # the outputs are tracers here: the generator check below tells a second mask apart
        grad = fnx.grad(lambda v: fnx.checkpoint(block)(v).sum())(x).numpy()
        kept = grad != 0
    np.testing.assert_array_equal(grad, np.where(kept, 4.0, 0.0))
    after = fnx.rand(3).tolist()
    fnx.manual_seed(3)
    block(fnx.randn(500, dtype=fnx.float64))   # the same draws without checkpoint
    assert fnx.rand(3).tolist() == after


def test_custom_vjp_batched_layouts_and_python_residuals():
    """Under vmap the rule's cotangents come back in each input's batch layout; non-tensor residuals pass."""
    def fwd(x, w):
        return x * w, (w, "note", 2.0)

    def bwd(res, g):
        w, note, two = res
        assert note == "note"
        return g * w * two, g  # a deliberately different rule: d/dx = 2w, d/dw = 1

    f = fnx.custom_vjp(lambda x, w: x * w)
    f.defvjp(fwd, bwd)
    x = t64([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])  # examples along axis 1
    w = t64([0.5, -1.0])
    gx, gw = fnx.grad(lambda x, w: fnx.vmap(f, in_axes=(1, None))(x, w).sum(), argnums=(0, 1))(x, w)
    np.testing.assert_allclose(arr(gx), 2 * np.broadcast_to(arr(w)[:, None], (2, 3)))
    np.testing.assert_allclose(arr(gw), [3.0, 3.0])  # per-example ones, summed over the 3 examples
    per = fnx.vmap(fnx.grad(lambda x: f(x, w).sum()), in_axes=1, out_axes=1)(x)
    np.testing.assert_allclose(arr(per), arr(gx))
    with pytest.raises(TypeError, match="structure and shapes"):
        g = fnx.custom_vjp(lambda x: x * 2.0)
        g.defvjp(lambda x: (x * 2.0, None), lambda res, ct: (ct.sum(),))
        fnx.grad(lambda x: g(x).sum())(t64([1.0, 2.0]))


def test_checkpoint_under_vmap_and_keyword_arguments():
    calls = []

    def block(x, scale=None):
        calls.append(1)
        return fnx.sin(x) * scale

    x = t64([[0.1, 0.2], [0.3, 0.4]])
    g = fnx.grad(lambda x: fnx.vmap(lambda r: fnx.checkpoint(block)(r, scale=t64(2.0)))(x).sum())(x)
    np.testing.assert_allclose(arr(g), 2 * np.cos(arr(x)), rtol=1e-12)
    assert len(calls) == 2  # vmap keeps the rematerialisation: forward again in the backward pass
    out = fnx.vmap(lambda r, scale: r * scale)(x, scale=t64([1.0, 3.0]))  # keyword arguments map over axis 0
    np.testing.assert_allclose(arr(out), arr(x) * np.array([[1.0], [3.0]]))
    jaxpr = fnx.make_jaxpr(lambda r, scale: r * scale)(x, scale=t64(2.0))
    assert len(jaxpr.in_avals) == 2


def test_jacobians_of_pytree_parameters():
    rng = np.random.default_rng(3)
    params = _mlp_params(rng)
    x, y = t64(rng.standard_normal(4)), t64(0.5)
    g = fnx.grad(_mlp_loss)(params, x, y)
    for jac in (fnx.jacfwd, fnx.jacrev):
        j = jac(_mlp_loss)(params, x, y)
        assert set(j) == set(params)
        for name in params:
            assert tuple(j[name].shape) == tuple(params[name].shape)
            np.testing.assert_allclose(arr(j[name]), arr(g[name]), rtol=1e-10, atol=1e-14)
    with pytest.raises(TypeError, match="floating-point"):
        fnx.jacfwd(lambda n: n.double())(fnx.tensor([1, 2]))
    (j, aux) = fnx.jacfwd(lambda x: (x * x, x.sum()), has_aux=True)(t64([1.0, 2.0]))
    np.testing.assert_allclose(arr(j), np.diag([2.0, 4.0]))
    assert float(aux) == 3.0
    out, tangent, aux = fnx.jvp(lambda x: (x * x, {"x": x}), (t64([3.0]),), (t64([1.0]),), has_aux=True)
    assert float(tangent[0]) == 6.0 and float(aux["x"][0]) == 3.0 and not isinstance(aux["x"], fnx.core.Tracer)


def test_integer_outputs_and_cotangent_checks():
    def f(x):
        return x * 2.0, (x > 0).long()

    out, tangent = fnx.jvp(f, (t64([1.0, -1.0]),), (t64([1.0, 1.0]),))
    assert tangent[1].dtype == fnx.int64 and arr(tangent[1]).tolist() == [0, 0]
    out, pull = fnx.vjp(f, t64([1.0, -1.0]))
    (g,) = pull((t64([1.0, 1.0]), fnx.zeros(2, dtype=fnx.int64)))
    np.testing.assert_allclose(arr(g), [2.0, 2.0])
    with pytest.raises(TypeError, match="must match the output"):
        pull((fnx.ones(2), fnx.zeros(2, dtype=fnx.int64)))  # float32 cotangent for a float64 output


def test_custom_rules_survive_staging():
    """make_jaxpr keeps custom_vjp / custom_jvp / checkpoint as equations, so transforms of the IR use the rules."""
    lo, hi, w = t64(-1.0), t64(1.0), t64([0.5, 3.0, -4.0])
    x = t64([1.0, 2.0, 3.0])
    jaxpr = fnx.make_jaxpr(lambda x: (clip_gradient(x, lo, hi) * w).sum())(x)
    assert [e.prim.name for e in jaxpr.eqns][0] == "custom_vjp_call"
    fnx.ir.verify_jaxpr(jaxpr)
    np.testing.assert_allclose(arr(fnx.grad(lambda x: jaxpr(x)[0])(x)), [0.5, 1.0, -1.0])
    per = fnx.vmap(fnx.grad(lambda x: jaxpr(x)[0]))(t64([[1.0, 2.0, 3.0], [0.1, 0.2, 0.3]]))
    np.testing.assert_allclose(arr(per), [[0.5, 1.0, -1.0], [0.5, 1.0, -1.0]])
    leaf = t64([1.0, 2.0, 3.0]).requires_grad_(True)
    jaxpr(leaf)[0].backward()  # evaluated eagerly, the tape uses the rule too
    np.testing.assert_allclose(arr(leaf.grad), [0.5, 1.0, -1.0])

    soft = fnx.make_jaxpr(lambda x: log1pexp(x).sum())(x)
    assert "custom_jvp_call" in str(soft)
    big = t64([0.0, 1000.0])
    np.testing.assert_allclose(arr(fnx.grad(lambda x: soft(x)[0])(big)), [0.5, 1.0])
    np.testing.assert_allclose(arr(fnx.jvp(lambda x: soft(x)[0], (big,), (t64([1.0, 1.0]),))[1]), 1.5)

    def block(x):
        return fnx.sin(x) * w

    remat = fnx.make_jaxpr(lambda x: fnx.checkpoint(block)(x).sum())(x)
    assert remat.eqns[0].prim.name == "checkpoint"
    np.testing.assert_allclose(arr(fnx.grad(lambda x: remat(x)[0])(x)), np.cos(arr(x)) * arr(w), rtol=1e-12)
    staged_grad = fnx.make_jaxpr(fnx.grad(lambda x: fnx.checkpoint(block)(x).sum()))(x)
    assert [e.prim.name for e in staged_grad.eqns].count("sin") == 2  # the forward runs again in the backward


# ---------------------------------------------------------------- per-example gradients of an MLP
def _mlp_params(rng):
    return {"w1": t64(rng.standard_normal((4, 8)) * 0.5), "b1": t64(rng.standard_normal(8) * 0.1),
            "w2": t64(rng.standard_normal((8, 1)) * 0.5), "b2": t64(rng.standard_normal(1) * 0.1)}


def _mlp_loss(params, x, y):
    h = fnx.tanh(x @ params["w1"] + params["b1"])
    pred = (h @ params["w2"] + params["b2"]).reshape(())
    return (pred - y) ** 2


def test_per_example_gradients_of_mlp():
    rng = np.random.default_rng(2)
    params = _mlp_params(rng)
    xs, ys = t64(rng.standard_normal((5, 4))), t64(rng.standard_normal(5))
    per = fnx.vmap(fnx.grad(_mlp_loss), in_axes=(None, 0, 0))(params, xs, ys)
    for k in range(5):
        one = fnx.grad(_mlp_loss)(params, xs[k], ys[k])
        for name in params:
            np.testing.assert_allclose(arr(per[name][k]), arr(one[name]), rtol=1e-12, atol=1e-14)
    # the mean of per-example gradients is the gradient of the mean loss
    full = fnx.grad(lambda p: fnx.vmap(_mlp_loss, in_axes=(None, 0, 0))(p, xs, ys).mean())(params)
    for name in params:
        np.testing.assert_allclose(arr(per[name].mean(0)), arr(full[name]), rtol=1e-12, atol=1e-14)


# ---------------------------------------------------------------- the eager tape and Python control flow
def test_transforms_interoperate_with_the_eager_tape():
    w = t64([1.0, 2.0, 3.0]).requires_grad_(True)
    x = t64([0.5, -1.0, 2.0])
    g = fnx.grad(lambda x: (x * w * x).sum())(x)  # closed-over parameter that requires grad
    np.testing.assert_allclose(arr(g), 2 * arr(x) * arr(w))
    assert g.requires_grad
    g.sum().backward()  # the gradient itself is recorded on the tape: d/dw sum(2 x w) = 2 x
    np.testing.assert_allclose(arr(w.grad), 2 * arr(x))
    w.grad = None
    out = fnx.vmap(lambda r: (r * w).sum())(x.reshape(3, 1) * x)
    assert out.requires_grad
    out.sum().backward()
    np.testing.assert_allclose(arr(w.grad), (arr(x).reshape(3, 1) * arr(x)).sum(0))
    w.grad = None
    tangent = fnx.jvp(lambda r: r * r * w, (x,), (t64([1.0, 1.0, 1.0]),))[1]
    tangent.sum().backward()
    np.testing.assert_allclose(arr(w.grad), 2 * arr(x))


def test_eager_backward_inside_a_transform_raises():
    x = t64([1.0, 2.0])

    def bad(x):
        loss = (x * x).sum()
        loss.backward()
        return loss

    for transform in (fnx.grad, fnx.vmap):
        with pytest.raises(RuntimeError, match="fnx.grad"):
            transform(bad)(x if transform is fnx.grad else x.reshape(2, 1))


def test_python_control_flow_on_tracers():
    def f(x):
        if x > 0:
            return x * 2.0
        return -x

    assert float(fnx.grad(f)(t64(3.0))) == 2.0
    assert float(fnx.grad(f)(t64(-3.0))) == -1.0
    assert float(fnx.jvp(f, (t64(-3.0),), (t64(1.0),))[1]) == -1.0
    assert float(fnx.grad(lambda x: x * float(x))(t64(3.0))) == 3.0
    with pytest.raises(TypeError, match=r"fnx\.where.*fnx\.cond.*static_argnums"):
        fnx.vmap(f)(t64([1.0, -2.0]))
    with pytest.raises(TypeError, match=r"fnx\.where.*fnx\.cond.*static_argnums"):
        fnx.vmap(lambda x: x * x.item())(t64([1.0, -2.0]))
    with pytest.raises(TypeError, match="tracer"):
        fnx.vmap(lambda x: x.numpy())(t64([1.0, -2.0]))


def test_tracer_leak_is_reported():
    leaked = []
    fnx.vmap(lambda x: leaked.append(x) or x)(t64([1.0, 2.0]))
    with pytest.raises(RuntimeError, match="leaked|escaped"):
        fnx.grad(lambda y: (y * leaked[0]).sum())(t64(1.0))


def test_transform_helpers_are_exported():
    for name in ("grad", "value_and_grad", "vjp", "jvp", "jacfwd", "jacrev", "hessian", "vmap", "checkpoint",
                 "custom_vjp", "custom_jvp", "stop_gradient", "make_jaxpr", "cond", "while_loop", "fori_loop",
                 "scan", "switch"):
        assert callable(getattr(fnx, name)), name
    assert list(itertools.islice(TRANSFORMS, 1)) == ["grad"]
