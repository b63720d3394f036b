"""Structured control flow: cond/switch, while_loop, fori_loop, scan.

Each runs eagerly (as Python control flow on concrete values), staged by make_jaxpr (as the cond /
while_loop / scan primitives with jaxpr parameters), and under grad, jvp and vmap in both modes.
"Staged" below means the function's jaxpr is traced and then evaluated, so the transforms apply the
primitives' rules rather than seeing Python control flow.
"""
from __future__ import annotations

import numpy as np
import pytest

import fnx

EPS = 1e-6


def t64(values):
    return fnx.tensor(np.asarray(values, dtype=np.float64))


def staged(f):
    """f evaluated through its jaxpr, so transforms see the control-flow primitives."""
    def g(*args):
        out = fnx.make_jaxpr(f)(*args)(*args)
        return out[0] if len(out) == 1 else tuple(out)

    return g


def fd_grad(f, x: np.ndarray) -> np.ndarray:
    """Central-difference gradient of scalar f at x (float64)."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = EPS
        g[i] = (float(f(t64(x + e))) - float(f(t64(x - e)))) / (2 * EPS)
    return g


def fd_jvp(f, x: np.ndarray, v: np.ndarray) -> np.ndarray:
    return (f(t64(x + EPS * v)).numpy() - f(t64(x - EPS * v)).numpy()) / (2 * EPS)


# ---------------------------------------------------------------- the functions
def f_cond(x):
    return fnx.cond(x.sum() > 0, lambda a: fnx.sin(a) * 2.0, lambda a: fnx.cos(a) - a, x)


def f_switch(x):
    index = (x.sum() > 0).long() + (x.sum() > 2).long()
    return fnx.switch(index, [lambda a: a * 3.0, lambda a: fnx.exp(a), lambda a: a * a], x)


def f_while(x):
    """An int counter and a float state: 1.5x + sin(x), five times."""
    _, v = fnx.while_loop(lambda s: s[0] < 5, lambda s: (s[0] + 1, s[1] * 1.5 + fnx.sin(s[1])),
                          (fnx.tensor(0), x))
    return v


def f_while_data(x):
    """The trip count depends on the data: double until the sum of squares reaches 10."""
    return fnx.while_loop(lambda v: (v * v).sum() < 10.0, lambda v: v * 2.0, x)


def f_fori(x):
    return fnx.fori_loop(0, 4, lambda i, v: v * fnx.sin(v) + i, x)


def f_scan(x):
    def step(carry, xi):
        return carry * fnx.sin(xi) + xi, carry * 2.0

    carry, ys = fnx.scan(step, fnx.ones((), dtype=fnx.float64), x)
    return carry + (ys * ys).sum()


def np_cond(x):
    return np.sin(x) * 2 if x.sum() > 0 else np.cos(x) - x


def np_switch(x):
    i = int(x.sum() > 0) + int(x.sum() > 2)
    return [x * 3, np.exp(x), x * x][i]


def np_while(x):
    for _ in range(5):
        x = x * 1.5 + np.sin(x)
    return x


def np_while_data(x):
    while (x * x).sum() < 10:
        x = x * 2
    return x


def np_fori(x):
    for i in range(4):
        x = x * np.sin(x) + i
    return x


def np_scan(x):
    carry, ys = 1.0, []
    for xi in x:
        carry, y = carry * np.sin(xi) + xi, carry * 2
        ys.append(y)
    return carry + (np.array(ys) ** 2).sum()


CASES = {"cond": (f_cond, np_cond), "switch": (f_switch, np_switch), "while": (f_while, np_while),
         "while_data": (f_while_data, np_while_data), "fori": (f_fori, np_fori), "scan": (f_scan, np_scan)}
PRIM = {"cond": "cond", "switch": "cond", "while": "while_loop", "while_data": "while_loop", "fori": "scan",
        "scan": "scan"}
INPUTS = [np.array([0.3, -0.2, 0.5]), np.array([-0.4, -0.1, 0.2]), np.array([1.1, 0.9, 0.7])]
REVERSE_OK = ["cond", "switch", "fori", "scan"]  # while_loop has no reverse mode once staged (as in JAX)


# ---------------------------------------------------------------- eager and staged values
@pytest.mark.parametrize("name", CASES)
def test_eager_values(name):
    f, ref = CASES[name]
    for x in INPUTS:
        np.testing.assert_allclose(f(t64(x)).numpy(), ref(x), rtol=1e-12)


@pytest.mark.parametrize("name", CASES)
def test_staged_primitive_appears_and_evaluates(name):
    f, ref = CASES[name]
    jaxpr = fnx.make_jaxpr(f)(t64(INPUTS[0]))
    assert PRIM[name] in [e.prim.name for e in jaxpr.eqns]
    fnx.ir.verify_jaxpr(jaxpr)
    for x in INPUTS:
        np.testing.assert_allclose(jaxpr(t64(x))[0].numpy(), ref(x), rtol=1e-12)


def test_fori_loop_with_traced_bounds_stages_a_while_loop():
    def f(x, n):
        return fnx.fori_loop(0, n, lambda i, v: v + i.double(), x)

    jaxpr = fnx.make_jaxpr(f)(t64([0.0]), fnx.tensor(3))
    assert "while_loop" in [e.prim.name for e in jaxpr.eqns]
    np.testing.assert_allclose(jaxpr(t64([1.0]), fnx.tensor(4))[0].numpy(), [7.0])
    np.testing.assert_allclose(f(t64([1.0]), fnx.tensor(4)).numpy(), [7.0])


def test_scan_options():
    xs = t64([1.0, 2.0, 3.0])

    def cumsum(c, x):
        return c + x, c + x

    for run in (lambda f: f(), lambda f: fnx.make_jaxpr(lambda: f())()()):
        carry, ys = run(lambda: fnx.scan(cumsum, t64(0.0), xs, reverse=True))
        np.testing.assert_allclose(np.asarray([v.numpy() for v in (carry, ys)], dtype=object)[1], [6.0, 5.0, 3.0])
        assert float(carry) == 6.0
    # pytree carry and xs, no ys, explicit length with xs=None
    (a, b), ys = fnx.scan(lambda c, x: ((c[0] + x["u"], c[1] * 2.0), None), (t64(0.0), t64(1.0)),
                          {"u": xs})
    assert float(a) == 6.0 and float(b) == 8.0 and ys is None
    count, ys = fnx.scan(lambda c, _: (c + 1.0, c), t64(0.0), None, length=4)
    np.testing.assert_allclose(ys.numpy(), [0.0, 1.0, 2.0, 3.0])
    jaxpr = fnx.make_jaxpr(lambda c: fnx.scan(lambda c, _: (c + 1.0, c), c, None, length=4))(t64(0.0))
    np.testing.assert_allclose(jaxpr(t64(1.0))[1].numpy(), [1.0, 2.0, 3.0, 4.0])


def test_switch_clamps_index_and_takes_pytrees():
    branches = [lambda d: d["a"] * 0.0, lambda d: d["a"] + d["b"], lambda d: d["a"] * d["b"]]
    ops = {"a": t64([2.0]), "b": t64([3.0])}
    for i, expected in [(-5, 0.0), (0, 0.0), (1, 5.0), (2, 6.0), (9, 6.0)]:
        assert float(fnx.switch(i, branches, ops)) == expected
        assert float(fnx.switch(fnx.tensor(i), branches, ops)) == expected
        jaxpr = fnx.make_jaxpr(lambda i, d: fnx.switch(i, branches, d))(fnx.tensor(0), ops)
        assert float(jaxpr(fnx.tensor(i), ops["a"], ops["b"])[0]) == expected


# ---------------------------------------------------------------- grad
@pytest.mark.parametrize("mode", ["eager", "staged"])
@pytest.mark.parametrize("name", REVERSE_OK)
def test_grad_matches_finite_differences(name, mode):
    f = CASES[name][0]
    loss = (lambda x: f(x).sum()) if mode == "eager" else staged(lambda x: f(x).sum())
    for x in INPUTS:
        np.testing.assert_allclose(fnx.grad(loss)(t64(x)).numpy(), fd_grad(loss, x), rtol=1e-6, atol=1e-8)


def test_grad_through_closed_over_values_in_bodies():
    """Body functions that capture outer tracers (consts of the staged jaxprs) get their gradients too."""
    def f(w, x):
        c = fnx.cond(x.sum() > 0, lambda a: a * w, lambda a: a - w, x)
        _, ys = fnx.scan(lambda carry, xi: (carry, xi * w), t64(0.0), c)
        return fnx.fori_loop(0, 2, lambda i, v: v * w, ys).sum()

    w, x = t64(0.7), INPUTS[0]
    for g in (f, staged(f)):
        got = fnx.grad(g)(w, t64(x))
        num = (float(g(t64(0.7 + EPS), t64(x))) - float(g(t64(0.7 - EPS), t64(x)))) / (2 * EPS)
        assert float(got) == pytest.approx(num, rel=1e-6)


def test_staged_while_loop_reverse_mode_raises():
    with pytest.raises(NotImplementedError, match="while_loop.*fori_loop.*scan"):
        fnx.grad(staged(lambda x: f_while(x).sum()))(t64(INPUTS[0]))
    with pytest.raises(NotImplementedError, match="while_loop"):
        fnx.vjp(staged(f_while_data), t64(INPUTS[0]))[1](t64([1.0, 1.0, 1.0]))


def test_eager_while_loop_is_python_control_flow_under_grad():
    """On concrete values while_loop runs as a Python loop, so reverse mode sees the ops that ran."""
    g = fnx.grad(lambda x: f_while_data(x).sum())(t64([0.5, 0.5, 0.5]))  # two trips
    np.testing.assert_allclose(g.numpy(), [4.0, 4.0, 4.0])


# ---------------------------------------------------------------- jvp
@pytest.mark.parametrize("mode", ["eager", "staged"])
@pytest.mark.parametrize("name", CASES)
def test_jvp_matches_finite_differences(name, mode):
    f = CASES[name][0] if mode == "eager" else staged(CASES[name][0])
    v = np.array([0.3, -1.0, 0.6])
    for x in INPUTS:
        out, tangent = fnx.jvp(f, (t64(x),), (t64(v),))
        np.testing.assert_allclose(out.numpy(), CASES[name][1](x), rtol=1e-12)
        np.testing.assert_allclose(tangent.numpy(), fd_jvp(f, x, v), rtol=1e-6, atol=1e-8)


def test_jacfwd_of_staged_while_loop():
    jac = fnx.jacfwd(staged(f_while))(t64(INPUTS[0]))
    x = INPUTS[0]
    expected = np.stack([fd_jvp(f_while, x, e) for e in np.eye(3)], axis=1)
    np.testing.assert_allclose(jac.numpy(), expected, rtol=1e-6, atol=1e-8)


# ---------------------------------------------------------------- vmap
@pytest.mark.parametrize("mode", ["eager", "staged"])
@pytest.mark.parametrize("name", CASES)
def test_vmap_with_batched_predicates_matches_loop(name, mode):
    """The examples take different branches and different trip counts."""
    f, ref = CASES[name]
    xs = np.stack(INPUTS)
    fn = fnx.vmap(f) if mode == "eager" else staged(fnx.vmap(f))
    np.testing.assert_allclose(fn(t64(xs)).numpy(), np.stack([ref(x) for x in INPUTS]), rtol=1e-12)
    # batched along axis 1, result along axis 1
    cols = fnx.vmap(f, in_axes=1, out_axes=-1)(t64(xs.T)).numpy()
    expected = np.stack([ref(x) for x in INPUTS], axis=-1)
    np.testing.assert_allclose(cols, expected, rtol=1e-12)


@pytest.mark.parametrize("mode", ["eager", "staged"])
def test_vmap_where_only_the_predicate_is_batched(mode):
    """Branches and loop bodies that see no batched value still give one result per example."""
    y, ps = t64([1.0, 2.0]), t64([-1.0, 3.0])
    cases = [(lambda p: fnx.cond(p > 0, lambda a: a * 2.0, lambda a: a - 1.0, y), [[0.0, 1.0], [2.0, 4.0]]),
             (lambda p: fnx.cond(p > 0, lambda: y * 2.0, lambda: y - 1.0), [[0.0, 1.0], [2.0, 4.0]]),
             (lambda p: fnx.switch((p > 0).long(), [lambda: y * 2.0, lambda: y - 1.0]), [[2.0, 4.0], [0.0, 1.0]]),
             (lambda p: fnx.while_loop(lambda v: v.sum() < p, lambda v: v + 1.0, y), [[1.0, 2.0], [1.0, 2.0]]),
             (lambda p: fnx.scan(lambda c, _: (c * p, c), t64(1.0), None, length=3)[1], [[1, -1, 1], [1, 3, 9]])]
    for f, expected in cases:
        fn = fnx.vmap(f) if mode == "eager" else staged(fnx.vmap(f))
        np.testing.assert_allclose(fn(ps).numpy(), expected)
    g = fnx.grad(lambda x: fnx.vmap(lambda p: fnx.cond(p > 0, lambda: y * x, lambda: y - x))(ps).sum())(t64(2.0))
    assert float(g) == 1.0


def test_vmap_of_loops_with_unbatched_state_and_batched_bounds():
    xs = t64([1.0, 2.0, 3.0])
    # only the closed-over value is batched: the carry becomes batched inside the loop
    out = fnx.vmap(lambda w: fnx.fori_loop(0, 3, lambda i, v: v * w, t64(1.0)))(xs)
    np.testing.assert_allclose(out.numpy(), [1.0, 8.0, 27.0])
    out = fnx.vmap(lambda w: fnx.scan(lambda c, x: (c + x * w, c), t64(0.0), t64([1.0, 1.0]))[0])(xs)
    np.testing.assert_allclose(out.numpy(), [2.0, 4.0, 6.0])
    # batched trip counts
    n = fnx.tensor([1, 3, 0])
    out = fnx.vmap(lambda k: fnx.fori_loop(0, k, lambda i, v: v + 1.0, t64(0.0)))(n)
    np.testing.assert_allclose(out.numpy(), [1.0, 3.0, 0.0])
    # while_loop whose predicate reads a batched constant
    limits = t64([2.0, 5.0, 9.0])
    out = fnx.vmap(lambda lim: fnx.while_loop(lambda v: v < lim, lambda v: v + 1.0, t64(0.0)))(limits)
    np.testing.assert_allclose(out.numpy(), [2.0, 5.0, 9.0])


def test_vmap_of_grad_and_grad_of_vmap_through_control_flow():
    xs = np.stack(INPUTS)
    for name in REVERSE_OK:
        f = CASES[name][0]
        for fn in (f, staged(f)):
            per = fnx.vmap(fnx.grad(lambda x: fn(x).sum()))(t64(xs)).numpy()
            loop = np.stack([fnx.grad(lambda x: fn(x).sum())(t64(x)).numpy() for x in INPUTS])
            np.testing.assert_allclose(per, loop, rtol=1e-10, err_msg=name)
            total = fnx.grad(lambda b: fnx.vmap(fn)(b).sum())(t64(xs)).numpy()
            np.testing.assert_allclose(total, loop, rtol=1e-10, err_msg=name)


def test_nested_vmap_of_cond():
    xs = np.stack([np.stack(INPUTS), -np.stack(INPUTS)])
    out = fnx.vmap(fnx.vmap(f_cond))(t64(xs)).numpy()
    np.testing.assert_allclose(out, np.stack([[np_cond(x) for x in row] for row in xs]), rtol=1e-12)


# ---------------------------------------------------------------- errors
def test_mismatched_branch_outputs_raise():
    x = fnx.ones(3)
    staged_pred = fnx.make_jaxpr
    with pytest.raises(TypeError, match="same shapes and dtypes"):
        staged_pred(lambda x: fnx.cond(x.sum() > 0, lambda a: a, lambda a: a.sum(), x))(x)
    with pytest.raises(TypeError, match="same shapes and dtypes"):
        staged_pred(lambda x: fnx.cond(x.sum() > 0, lambda a: a, lambda a: a.double(), x))(x)
    with pytest.raises(TypeError, match="same tree structure"):
        staged_pred(lambda x: fnx.cond(x.sum() > 0, lambda a: (a, a), lambda a: [a, a], x))(x)
    with pytest.raises(TypeError, match="same tree structure|same shapes"):
        fnx.vmap(lambda x: fnx.cond(x.sum() > 0, lambda a: a, lambda a: (a, a), x))(fnx.ones(2, 3))
    with pytest.raises(TypeError, match="scalar"):
        staged_pred(lambda x: fnx.cond(x > 0, lambda a: a, lambda a: a, x))(x)


def test_loop_errors():
    x = fnx.ones(3)
    with pytest.raises(TypeError, match="same structure, shapes and dtypes"):
        fnx.make_jaxpr(lambda x: fnx.while_loop(lambda v: v.sum() < 3, lambda v: v.sum(), x))(x)
    with pytest.raises(TypeError, match="bool scalar"):
        fnx.make_jaxpr(lambda x: fnx.while_loop(lambda v: v < 3, lambda v: v, x))(x)
    with pytest.raises(TypeError, match="carry of the same structure"):
        fnx.make_jaxpr(lambda x: fnx.scan(lambda c, xi: (c.double(), xi), c_init(), x))(x)
    with pytest.raises(TypeError, match="disagree"):
        fnx.scan(lambda c, xi: (c, xi), c_init(), (fnx.ones(3), fnx.ones(4)))
    with pytest.raises(TypeError, match="length"):
        fnx.scan(lambda c, xi: (c, xi), c_init(), None)
    with pytest.raises(TypeError, match="Tensors"):
        fnx.while_loop(lambda v: v < 3, lambda v: v + 1, 0)


def c_init():
    return fnx.zeros(())
