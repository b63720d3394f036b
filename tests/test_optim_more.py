"""Adagrad, Adadelta, Adamax, NAdam, RAdam and LBFGS vs PyTorch's documented update rules written out in numpy
(float64, step by step), their functional forms vs the stateful ones, param groups and state_dict round trips."""
import io

import numpy as np
import pytest

import fnx
from fnx import optim
from fnx.optim import functional as OF
from fnx.optim.lbfgs import cubic_interpolate, strong_wolfe
from fnx.serialization import load, save

RNG = np.random.default_rng(3)
P0 = {"w": RNG.standard_normal((3, 2)), "b": RNG.standard_normal(4)}
GRADS = [{k: RNG.standard_normal(v.shape) for k, v in P0.items()} for _ in range(8)]


# ---------------------------------------------------------------- numpy references (PyTorch's documented algorithms)
def _sign_and_decay(p, g, lr, weight_decay, decoupled, maximize):
    g = -g if maximize else g
    if weight_decay and decoupled:
        p = p * (1 - lr * weight_decay)
    elif weight_decay:
        g = g + weight_decay * p
    return p, g


def ref_adagrad(p, g, st, t, lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0, eps=1e-10,
                maximize=False):
    p, g = _sign_and_decay(p, g, lr, weight_decay, False, maximize)
    clr = lr / (1 + (t - 1) * lr_decay)
    st["sum"] = st.get("sum", initial_accumulator_value) + g * g
    return p - clr * g / (np.sqrt(st["sum"]) + eps)


def ref_adadelta(p, g, st, t, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0, maximize=False):
    p, g = _sign_and_decay(p, g, lr, weight_decay, False, maximize)
    st["v"] = rho * st.get("v", 0) + (1 - rho) * g * g
    delta = np.sqrt(st.get("u", 0) + eps) / np.sqrt(st["v"] + eps) * g
    st["u"] = rho * st.get("u", 0) + (1 - rho) * delta * delta
    return p - lr * delta


def ref_adamax(p, g, st, t, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, maximize=False):
    b1, b2 = betas
    p, g = _sign_and_decay(p, g, lr, weight_decay, False, maximize)
    st["m"] = b1 * st.get("m", 0) + (1 - b1) * g
    st["u"] = np.maximum(b2 * st.get("u", 0), np.abs(g) + eps)
    return p - lr / (1 - b1 ** t) * st["m"] / st["u"]


def ref_nadam(p, g, st, t, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, momentum_decay=4e-3,
              decoupled_weight_decay=False, maximize=False):
    b1, b2 = betas
    p, g = _sign_and_decay(p, g, lr, weight_decay, decoupled_weight_decay, maximize)
    mu = [b1 * (1 - 0.5 * 0.96 ** (i * momentum_decay)) for i in range(1, t + 2)]  # mu_1 ... mu_{t+1}
    st["m"] = b1 * st.get("m", 0) + (1 - b1) * g
    st["v"] = b2 * st.get("v", 0) + (1 - b2) * g * g
    m_hat = mu[t] * st["m"] / (1 - np.prod(mu[:t + 1])) + (1 - mu[t - 1]) * g / (1 - np.prod(mu[:t]))
    v_hat = st["v"] / (1 - b2 ** t)
    return p - lr * m_hat / (np.sqrt(v_hat) + eps)


def ref_radam(p, g, st, t, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, decoupled_weight_decay=False,
              maximize=False):
    b1, b2 = betas
    p, g = _sign_and_decay(p, g, lr, weight_decay, decoupled_weight_decay, maximize)
    st["m"] = b1 * st.get("m", 0) + (1 - b1) * g
    st["v"] = b2 * st.get("v", 0) + (1 - b2) * g * g
    m_hat = st["m"] / (1 - b1 ** t)
    rho_inf = 2 / (1 - b2) - 1
    rho_t = rho_inf - 2 * t * b2 ** t / (1 - b2 ** t)
    if rho_t <= 5:
        return p - lr * m_hat
    l_t = np.sqrt(1 - b2 ** t) / (np.sqrt(st["v"]) + eps)
    r_t = np.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
    return p - lr * m_hat * l_t * r_t


CASES = [
    (optim.Adagrad, OF.adagrad, ref_adagrad, dict(lr=0.1)),
    (optim.Adagrad, OF.adagrad, ref_adagrad, dict(lr=0.1, lr_decay=0.05, weight_decay=0.1,
                                                  initial_accumulator_value=0.3, maximize=True)),
    (optim.Adadelta, OF.adadelta, ref_adadelta, dict()),
    (optim.Adadelta, OF.adadelta, ref_adadelta, dict(lr=0.5, rho=0.8, eps=1e-4, weight_decay=0.1, maximize=True)),
    (optim.Adamax, OF.adamax, ref_adamax, dict(lr=0.01)),
    (optim.Adamax, OF.adamax, ref_adamax, dict(lr=0.01, betas=(0.8, 0.9), weight_decay=0.1, maximize=True)),
    (optim.NAdam, OF.nadam, ref_nadam, dict(lr=0.01)),
    (optim.NAdam, OF.nadam, ref_nadam, dict(lr=0.01, momentum_decay=0.2, weight_decay=0.1)),
    (optim.NAdam, OF.nadam, ref_nadam, dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    # betas[1] = 0.9: rho_t passes 5 at the 6th step, so both branches of RAdam run
    (optim.RAdam, OF.radam, ref_radam, dict(lr=0.01, betas=(0.9, 0.9))),
    (optim.RAdam, OF.radam, ref_radam, dict(lr=0.01, betas=(0.8, 0.9), weight_decay=0.1, maximize=True)),
    (optim.RAdam, OF.radam, ref_radam, dict(lr=0.01, betas=(0.9, 0.9), weight_decay=0.1,
                                            decoupled_weight_decay=True)),
]
IDS = [f"{c[0].__name__}-{'-'.join(f'{k}={v}' for k, v in c[3].items())}" for c in CASES]


def params64():
    return {k: fnx.tensor(v, requires_grad=True) for k, v in P0.items()}


def run_stateful(opt, params, grads):
    for g in grads:
        for k, p in params.items():
            p.grad = fnx.tensor(g[k])
        opt.step()
    return opt


def npy(t):
    return t.detach().numpy()


def reference(ref, kwargs, grads=GRADS):
    out = {}
    for k in P0:
        p, st = P0[k].copy(), {}
        for t, g in enumerate(grads, 1):
            p = ref(p, g[k], st, t, **kwargs)
        out[k] = p
    return out


def test_radam_case_reaches_both_branches():
    rho_inf = 2 / 0.1 - 1
    rho = [rho_inf - 2 * t * 0.9 ** t / (1 - 0.9 ** t) for t in range(1, len(GRADS) + 1)]
    assert min(rho) <= 5 < max(rho)


@pytest.mark.parametrize("cls, functional, ref, kwargs", CASES, ids=IDS)
def test_stateful_matches_documented_rule(cls, functional, ref, kwargs):
    params = params64()
    run_stateful(cls(list(params.values()), **kwargs), params, GRADS)
    expected = reference(ref, kwargs)
    for k in P0:
        np.testing.assert_allclose(npy(params[k]), expected[k], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("cls, functional, ref, kwargs", CASES, ids=IDS)
def test_functional_matches_stateful(cls, functional, ref, kwargs):
    params = params64()
    run_stateful(cls(list(params.values()), **kwargs), params, GRADS)
    opt = functional(**kwargs)
    fparams = {k: fnx.tensor(v) for k, v in P0.items()}
    state = opt.init(fparams)
    for g in GRADS:
        fparams, state = opt.update({k: fnx.tensor(v) for k, v in g.items()}, state, fparams)
    assert int(state["step"]) == len(GRADS)
    for k in P0:
        np.testing.assert_allclose(npy(fparams[k]), npy(params[k]), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("cls, functional, ref, kwargs", CASES[::2], ids=IDS[::2])
def test_param_groups_and_state_dict_round_trip(cls, functional, ref, kwargs):
    """Two groups (the second with its own lr); three steps, a save/load into a fresh optimizer, three more."""
    params = params64()
    groups = [{"params": [params["w"]]}, {"params": [params["b"]], "lr": 0.003}]
    first = run_stateful(cls(groups, **kwargs), params, GRADS[:3])
    buf = io.BytesIO()
    save(first.state_dict(), buf)
    buf.seek(0)
    clones = {k: fnx.tensor(npy(p), requires_grad=True) for k, p in params.items()}
    second = cls([{"params": [clones["w"]]}, {"params": [clones["b"]]}], **kwargs)
    second.load_state_dict(load(buf))
    assert second.param_groups[1]["lr"] == 0.003
    run_stateful(first, params, GRADS[3:])
    run_stateful(second, clones, GRADS[3:])
    expected_w = reference(ref, kwargs)["w"]
    expected_b = reference(ref, {**kwargs, "lr": 0.003})["b"]
    for p in (params, clones):
        np.testing.assert_allclose(npy(p["w"]), expected_w, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(npy(p["b"]), expected_b, rtol=1e-12, atol=1e-12)


def test_state_layouts_are_pytorchs():
    a = fnx.ones(2, dtype=fnx.float64, requires_grad=True)
    adagrad = optim.Adagrad([a], initial_accumulator_value=0.5)
    assert list(adagrad.state[a]) == ["step", "sum"] and adagrad.state[a]["sum"].tolist() == [0.5, 0.5]
    late = fnx.ones(1, dtype=fnx.float64, requires_grad=True)
    adagrad.add_param_group({"params": [late], "initial_accumulator_value": 3.0})
    late.grad = fnx.ones_like(late)
    adagrad.step()
    assert adagrad.state[late]["sum"].tolist() == [4.0]
    layouts = {optim.Adadelta: ["step", "square_avg", "acc_delta"], optim.Adamax: ["step", "exp_avg", "exp_inf"],
               optim.NAdam: ["step", "mu_product", "exp_avg", "exp_avg_sq"],
               optim.RAdam: ["step", "exp_avg", "exp_avg_sq"]}
    for cls, names in layouts.items():
        opt = cls([a])
        a.grad = fnx.ones_like(a)
        opt.step()
        assert list(opt.state[a]) == names and opt.state[a]["step"].item() == 1.0
    assert opt.state_dict()["param_groups"][0]["decoupled_weight_decay"] is False


def test_functional_radam_is_differentiable_through_the_switch():
    """The rectification switch is a `where`, so grad through a step is finite on both sides of it."""
    opt = OF.radam(lr=0.1, betas=(0.9, 0.9))
    p = fnx.tensor([1.0, -2.0], dtype=fnx.float64)
    state = opt.init(p)
    for _ in range(6):
        g = fnx.grad(lambda q: opt.update(q * q, state, q)[0].sum())(p)
        assert np.isfinite(npy(g)).all()
        p, state = opt.update(p * p, state, p)


# ---------------------------------------------------------------- LBFGS
A = np.array([[3.0, 0.5, 0.0], [0.5, 2.0, 0.3], [0.0, 0.3, 1.0]])
B = np.array([1.0, -2.0, 0.5])


def quadratic(x):
    return 0.5 * x @ A @ x - B @ x, A @ x - B


def ref_lbfgs_step(x, st, f_and_g, lr, max_iter, history_size, tolerance_grad=1e-7, tolerance_change=1e-9):
    """One LBFGS.step(closure) without line search, as PyTorch's documented algorithm: two-loop recursion, the
    first step ever scaled by min(1, 1/|g|_1), curvature pairs kept when y.s > 1e-10."""
    f, g = f_and_g(x)
    if np.abs(g).max() <= tolerance_grad:
        return x
    for n_iter in range(1, max_iter + 1):
        st["n"] = st.get("n", 0) + 1
        if st["n"] == 1:
            d, st["hist"], st["H"] = -g, [], 1.0
        else:
            y, s = g - st["g_prev"], st["d"] * st["t"]
            if y @ s > 1e-10:
                st["hist"] = (st["hist"] + [(s, y, 1 / (y @ s))])[-history_size:]
                st["H"] = (y @ s) / (y @ y)
            q, al = -g, []
            for s_i, y_i, ro_i in reversed(st["hist"]):
                al.append(ro_i * s_i @ q)
                q = q - al[-1] * y_i
            r = q * st["H"]
            for (s_i, y_i, ro_i), a_i in zip(st["hist"], reversed(al)):
                r = r + s_i * (a_i - ro_i * y_i @ r)
            d = r
        st["g_prev"], f_prev = g, f
        t = min(1.0, 1.0 / np.abs(g).sum()) * lr if st["n"] == 1 else lr
        st["d"], st["t"] = d, t
        if g @ d > -tolerance_change:
            break
        x = x + t * d
        if n_iter == max_iter:
            break
        f, g = f_and_g(x)
        if np.abs(g).max() <= tolerance_grad or np.abs(d * t).max() <= tolerance_change \
                or abs(f - f_prev) < tolerance_change:
            break
    return x


def lbfgs_run(x0, steps, **kwargs):
    x = fnx.tensor(x0, requires_grad=True)
    opt = optim.LBFGS([x], **kwargs)
    a, b = fnx.tensor(A), fnx.tensor(B)

    def closure():
        opt.zero_grad()
        loss = 0.5 * (x @ a @ x) - b @ x
        loss.backward()
        return loss

    losses = [opt.step(closure).item() for _ in range(steps)]
    return x, opt, losses


@pytest.mark.parametrize("max_iter, history_size", [(1, 100), (4, 2), (20, 100)])
def test_lbfgs_matches_documented_algorithm(max_iter, history_size):
    x0 = np.array([2.0, -1.0, 0.5])
    x, opt, _ = lbfgs_run(x0, 3, lr=0.5, max_iter=max_iter, history_size=history_size)
    expected, st = x0, {}
    for _ in range(3):
        expected = ref_lbfgs_step(expected, st, quadratic, lr=0.5, max_iter=max_iter, history_size=history_size)
    np.testing.assert_allclose(npy(x), expected, rtol=1e-12, atol=1e-12)
    assert opt.state[x]["n_iter"] == st["n"] and len(opt.state[x]["old_dirs"]) == len(st["hist"])


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_lbfgs_state_dict_round_trip_resumes_identically(line_search_fn):
    kwargs = dict(lr=0.5, max_iter=1, history_size=4, line_search_fn=line_search_fn)
    x, opt, _ = lbfgs_run(np.array([2.0, -1.0, 0.5]), 2, **kwargs)
    buf = io.BytesIO()
    save(opt.state_dict(), buf)
    buf.seek(0)
    y = fnx.tensor(npy(x), requires_grad=True)
    resumed = optim.LBFGS([y], **kwargs)
    resumed.load_state_dict(load(buf))
    copied = optim.LBFGS([fnx.tensor(npy(x), requires_grad=True)], **kwargs)
    copied.load_state_dict(opt.state_dict())  # no save in between: the history is copied, not shared
    a, b = fnx.tensor(A), fnx.tensor(B)
    for o, v in ((opt, x), (resumed, y)):
        def closure():
            o.zero_grad()
            loss = 0.5 * (v @ a @ v) - b @ v
            loss.backward()
            return loss

        o.step(closure)
    np.testing.assert_array_equal(npy(y), npy(x))
    assert resumed.state[y]["n_iter"] == opt.state[x]["n_iter"] == 3
    state = next(iter(copied.state.values()))
    assert state["old_dirs"] is not opt.state[x]["old_dirs"] and len(state["old_dirs"]) == 1
    assert all(d is not e for d, e in zip(state["old_dirs"], opt.state[x]["old_dirs"]))


def test_lbfgs_strong_wolfe_solves_rosenbrock():
    x = fnx.tensor([-1.5, 2.0], dtype=fnx.float64, requires_grad=True)
    opt = optim.LBFGS([x], lr=1, max_iter=100, line_search_fn="strong_wolfe", tolerance_change=1e-15)

    def closure():
        opt.zero_grad()
        loss = (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2
        loss.backward()
        return loss

    opt.step(closure)
    np.testing.assert_allclose(npy(x), [1.0, 1.0], atol=1e-6)
    assert opt.state[x]["func_evals"] <= opt.param_groups[0]["max_eval"] + 25  # a last line search may run over


def test_lbfgs_converges_on_a_quadratic_and_stops_at_tolerance():
    tight = dict(tolerance_grad=1e-12, tolerance_change=1e-15)
    x, opt, losses = lbfgs_run(np.array([2.0, -1.0, 0.5]), 2, lr=1, max_iter=50, line_search_fn="strong_wolfe",
                               **tight)
    np.testing.assert_allclose(npy(x), np.linalg.solve(A, B), atol=1e-10)
    assert losses[1] < losses[0]
    x, opt, losses = lbfgs_run(np.linalg.solve(A, B), 1, lr=1, max_iter=50)  # the gradient is ~0 already
    assert opt.state[x]["func_evals"] == 1 and opt.state[x]["n_iter"] == 0
    np.testing.assert_array_equal(npy(x), np.linalg.solve(A, B))


def test_strong_wolfe_step_meets_the_conditions():
    def obj(x, t, d):
        y = x + t * npy(d)
        f, g = quadratic(y)
        return float(f), fnx.tensor(g)

    x = np.array([2.0, -1.0, 0.5])
    f, g = quadratic(x)
    d = fnx.tensor(-g * 3.0)  # a descent direction whose unit step overshoots
    gtd = float(g @ npy(d))
    f_new, g_new, t, evals = strong_wolfe(obj, x, 1.0, d, float(f), fnx.tensor(g), gtd)
    assert f_new <= f + 1e-4 * t * gtd
    assert abs(float(npy(g_new) @ npy(d))) <= -0.9 * gtd
    assert evals >= 1 and f_new == pytest.approx(quadratic(x + t * npy(d))[0])


def test_cubic_interpolate_finds_a_cubic_minimizer():
    def c(x):
        return x ** 3 - 3 * x, 3 * x ** 2 - 3  # local minimum at x = 1

    (f1, g1), (f2, g2) = c(0.0), c(2.0)
    assert cubic_interpolate(0.0, f1, g1, 2.0, f2, g2) == pytest.approx(1.0)
    assert cubic_interpolate(2.0, f2, g2, 0.0, f1, g1) == pytest.approx(1.0)
    assert cubic_interpolate(0.0, f1, g1, 2.0, f2, g2, bounds=(1.5, 3.0)) == 1.5
    assert cubic_interpolate(0.0, 0.0, 2.0, 1.0, 1.0, 2.0) == 0.5  # no real minimizer: the midpoint


def test_lbfgs_rejects_groups_unknown_line_search_and_missing_closure():
    a, b = fnx.ones(1, requires_grad=True), fnx.ones(1, requires_grad=True)
    with pytest.raises(ValueError, match="parameter groups"):
        optim.LBFGS([{"params": [a]}, {"params": [b]}])
    with pytest.raises(RuntimeError, match="strong_wolfe"):
        optim.LBFGS([a], line_search_fn="backtracking")
    with pytest.raises(RuntimeError, match="closure"):
        optim.LBFGS([a]).step(None)
    assert optim.LBFGS([a], max_iter=8).param_groups[0]["max_eval"] == 10
