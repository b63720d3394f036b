"""Adagrad, Adadelta, Adamax, NAdam and RAdam beyond test_optim.py's tables (update rules vs numpy, functional
forms, state_dict round trips): state layouts and the functional RAdam's switch; LBFGS vs PyTorch's documented
algorithm written out in numpy, its strong-Wolfe line search and cubic interpolation, its state_dict."""
import io

import numpy as np
import pytest

import fnx
from fnx import optim
from fnx.optim import functional as OF
from fnx.optim.lbfgs import cubic_interpolate, strong_wolfe
from fnx.serialization import load, save


def npy(t):
    return t.detach().numpy()


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


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_lbfgs_moves_a_complex_parameter_as_its_real_and_imaginary_parts(line_search_fn):
    """PyTorch's rule: the flat vector holds a complex parameter's real and imaginary parts (view_as_real)."""
    def run(p, parts):
        opt = optim.LBFGS([p], lr=0.5, max_iter=5, line_search_fn=line_search_fn)

        def closure():
            opt.zero_grad()
            q = parts(p)
            loss = (q * q).sum() + 0.1 * (q[:, 0] ** 3).sum() + 2 * q[:, 1].sum()
            loss.backward()
            return loss
        for _ in range(2):
            opt.step(closure)
        return npy(parts(p))

    start = np.array([[1.0, 2.0], [-0.5, 0.25]])
    real = run(fnx.tensor(start, requires_grad=True), lambda q: q)
    z = fnx.view_as_complex(fnx.tensor(start)).requires_grad_(True)
    np.testing.assert_allclose(run(z, fnx.view_as_real), real, rtol=1e-12, atol=1e-12)


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

