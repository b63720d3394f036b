"""fnx.optim.Adafactor (its fused and per-parameter paths and its functional form) against trajectories recorded
from torch.optim.Adafactor (PyTorch 2.13), and lr_scheduler.MultiplicativeLR."""
import io

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fnx
from fnx import optim
from fnx.optim import functional as OF
from fnx.optim import lr_scheduler as S
from fnx.serialization import load, save

# torch.optim.Adafactor(params, **kwargs) after five steps on the loss of `_loss` from the parameters of `_params`
# (float64; the first parameter, [3, 4], flattened); recorded with PyTorch 2.13
TORCH_AFTER_5 = {
    "default": [0.4708919248346898, -1.2270158651960932, 1.9061763589922625, 0.06538884772242706,
                1.4590009503623664, -0.7598167564202263, 0.16623768767637248, -1.9392481678193099,
                0.23778045689648972, 0.5300374782971745, -0.9019046395596964, 1.1507438785802468],
    "wd": [0.6463761495898152, -1.3660853983995778, 2.427242058080285, 0.4602753383552865, 1.6702904056929064,
           -0.6691604277661333, 0.697617926035618, -2.3000763887951376, 0.6528733149857929, 0.980913187044635,
           -0.8550613399364797, 1.4319767963025405],
}
# the other parameters after five steps with the defaults: the vector [5], the scalar, and the 3-D [2, 3, 4]
TORCH_DEFAULT_REST = (
    [0.4538627618127502, -0.2957832501148382, 1.7036915193518989, -0.9587735762873851, 0.0040207934685979165],
    [0.6656980694680582],
    [-1.5875038825706562, -1.4384116126203013, -1.3051870240985473, -1.1777440915737425, -1.0194229341910774,
     -0.9246892240752511, -0.8177399949748384, -0.7029486183986632, -0.5473349096740954, -0.4055858180789654,
     -0.26294803276371376, -0.1197468641623527, 0.029209828981748405, 0.1678569183290058, 0.3069315449110267,
     0.44643732178440926, 0.5945294595403932, 0.7369057767967062, 0.879542119589799, 1.0224071932921337,
     1.1623731382492264, 1.3072570635075893, 1.451973472948575, 1.5964766024936239])
# row_var and col_var of the first parameter after two steps with the defaults
TORCH_FACTORS_AFTER_2 = ([64.1504850660006, 645.1671954762744, 1018.4516855737864],
                         [413.44007743559035, 458.6686111616546, 211.18045067600417, 1220.4033488814996])
CASES = {"default": {}, "wd": dict(lr=0.05, weight_decay=0.1, maximize=True, d=1.5, beta2_decay=-0.5,
                                   eps=(1e-3, 1e-2))}


def _params(dtype=fnx.float64) -> list:
    return [fnx.tensor([[0.5, -1.25, 2.0, 0.125], [1.5, -0.75, 0.25, -2.0], [0.3, 0.6, -0.9, 1.2]], dtype=dtype),
            fnx.tensor([0.5, -0.25, 1.75, -1.0, 0.05], dtype=dtype),
            fnx.tensor(0.7, dtype=dtype),
            (fnx.arange(24, dtype=dtype).reshape(2, 3, 4) - 11.5) / 7]


def _loss(ps) -> fnx.Tensor:
    return sum(((fnx.sin(p) * 3 + p * p) * (1 + fnx.arange(p.numel(), dtype=p.dtype).reshape(p.shape))).sum()
               for p in ps)


def _run(kwargs: dict, steps: int, dtype=fnx.float64, **flags) -> tuple:
    ps = [p.requires_grad_() for p in _params(dtype)]
    opt = optim.Adafactor(ps, **kwargs, **flags)
    for _ in range(steps):
        opt.zero_grad()
        _loss(ps).backward()
        opt.step()
    return ps, opt


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("foreach", [None, False])
def test_trajectory_matches_torch(case, foreach):
    ps, _ = _run(CASES[case], 5, foreach=foreach)
    np.testing.assert_allclose(ps[0].detach().numpy().ravel(), TORCH_AFTER_5[case], rtol=1e-13, atol=1e-14)
    if case == "default":
        for p, want in zip(ps[1:], TORCH_DEFAULT_REST):
            np.testing.assert_allclose(p.detach().numpy().ravel(), want, rtol=1e-13, atol=1e-14)


def test_float32_trajectory_matches_torch_to_float32_rounding():
    ps, _ = _run({}, 5, dtype=fnx.float32)
    assert ps[0].dtype is fnx.float32
    np.testing.assert_allclose(ps[0].detach().numpy().ravel(), TORCH_AFTER_5["default"], rtol=2e-6, atol=1e-6)


def test_state_has_torch_s_keys_and_factored_shapes():
    ps, opt = _run({}, 2)
    sd = opt.state_dict()
    assert sd["param_groups"][0] == {"lr": 0.01, "beta2_decay": -0.8, "eps": (None, 1e-3), "d": 1.0,
                                     "weight_decay": 0.0, "foreach": None, "maximize": False, "params": [0, 1, 2, 3]}
    state = sd["state"]
    assert list(state[0]) == ["step", "row_var", "col_var"] and list(state[1]) == ["step", "variance"]
    assert state[0]["step"].dtype is fnx.float32 and state[0]["step"].item() == 2.0
    assert state[0]["row_var"].shape == (3, 1) and state[0]["col_var"].shape == (1, 4)
    assert state[3]["row_var"].shape == (2, 3, 1) and state[3]["col_var"].shape == (2, 1, 4)
    assert state[1]["variance"].shape == (5,) and state[2]["variance"].shape == ()
    np.testing.assert_allclose(state[0]["row_var"].numpy().ravel(), TORCH_FACTORS_AFTER_2[0], rtol=1e-13)
    np.testing.assert_allclose(state[0]["col_var"].numpy().ravel(), TORCH_FACTORS_AFTER_2[1], rtol=1e-13)


@pytest.mark.parametrize("foreach", [None, False])
def test_state_dict_round_trip_resumes_identically(foreach):
    ps, opt = _run(CASES["wd"], 2, foreach=foreach)
    buf = io.BytesIO()
    save(opt.state_dict(), buf)
    buf.seek(0)
    clones = [p.detach().clone().requires_grad_() for p in ps]
    resumed = optim.Adafactor(clones, lr=1.0)
    resumed.load_state_dict(load(buf))
    assert resumed.param_groups[0]["lr"] == 0.05
    for _ in range(3):
        for group in (ps, clones):
            for p in group:
                p.grad = None
            _loss(group).backward()
        opt.step()
        resumed.step()
    for a, b in zip(ps, clones):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    np.testing.assert_allclose(ps[0].detach().numpy().ravel(), TORCH_AFTER_5["wd"], rtol=1e-13, atol=1e-14)


@settings(max_examples=15, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=0, max_size=3), seed=st.integers(0, 2 ** 16),
       wd=st.sampled_from([0.0, 0.2]), maximize=st.booleans())
def test_fused_per_parameter_and_functional_paths_agree(shape, seed, wd, maximize):
    rng = np.random.default_rng(seed)
    start = rng.standard_normal(shape)
    grads = [rng.standard_normal(shape) for _ in range(3)]
    kwargs = dict(lr=0.03, weight_decay=wd, maximize=maximize)
    results = []
    for foreach in (None, False):
        p = fnx.tensor(start, requires_grad=True)
        opt = optim.Adafactor([p], foreach=foreach, **kwargs)
        for g in grads:
            p.grad = fnx.tensor(g)
            opt.step()
        results.append(p.detach().numpy())
    pure = OF.adafactor(**kwargs)
    params = {"w": fnx.tensor(start)}
    state = pure.init(params)
    for g in grads:
        params, state = pure.update({"w": fnx.tensor(g)}, state, params)
    results.append(params["w"].numpy())
    np.testing.assert_allclose(results[1], results[0], rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(results[2], results[0], rtol=1e-13, atol=1e-15)


def test_functional_form_is_differentiable_and_takes_a_schedule():
    pure = OF.adafactor(lr=lambda count: 0.05 / (1 + count.to(fnx.float64)))
    params = {"w": fnx.tensor([[0.5, -1.0], [2.0, 0.25]], dtype=fnx.float64),
              "b": fnx.tensor([0.3, -0.2], dtype=fnx.float64)}
    state = pure.init(params)
    assert state["row_var"]["w"].shape == (2, 1) and state["variance"]["b"].shape == (2,)
    assert state["variance"]["w"].shape == () and state["row_var"]["b"].shape == ()

    def loss(w):
        new, _ = pure.update({"w": w * 2, "b": fnx.ones(2, dtype=fnx.float64)}, state, {"w": w, "b": params["b"]})
        return (new["w"] ** 2).sum()

    g = fnx.grad(loss)(params["w"])
    eps = 1e-6
    bump = fnx.zeros(2, 2, dtype=fnx.float64)
    bump[0, 1] = eps
    numeric = (loss(params["w"] + bump) - loss(params["w"] - bump)) / (2 * eps)
    assert abs(g[0, 1].item() - numeric.item()) < 1e-6


def test_errors_match_torch():
    p = fnx.zeros(2, requires_grad=True)
    for kwargs, message in [(dict(lr=-1.0), "Learning rate should be >= 0"),
                            (dict(beta2_decay=0.5), "beta2_decay should be <= 0"),
                            (dict(eps=(-1.0, 1e-3)), "epsilon1 should be >= 0"),
                            (dict(eps=(None, -1.0)), "epsilon2"),
                            (dict(d=0.5), "Clipping threshold d should be >= 1"),
                            (dict(weight_decay=-0.1), "weight_decay should be >= 0")]:
        with pytest.raises(ValueError, match=message):
            optim.Adafactor([p], **kwargs)
    z = fnx.zeros(2, dtype=fnx.complex64, requires_grad=True)
    z.grad = fnx.ones(2, dtype=fnx.complex64)
    with pytest.raises(RuntimeError, match="does not support complex parameters"):
        optim.Adafactor([z]).step()


def test_multiplicative_lr_compounds_its_factors():
    p = fnx.zeros(1, requires_grad=True)
    opt = optim.SGD([{"params": [p]}, {"params": [fnx.zeros(1, requires_grad=True)], "lr": 0.5}], lr=1.0)
    sched = S.MultiplicativeLR(opt, [lambda e: 0.9, lambda e: 1.0 / (e + 1)])
    assert sched.get_last_lr() == [1.0, 0.5]
    seen = []
    for _ in range(3):
        opt.step()
        sched.step()
        seen.append(sched.get_last_lr())
    np.testing.assert_allclose(seen, [[0.9, 0.25], [0.81, 0.25 / 3], [0.729, 0.25 / 12]], rtol=1e-15)
    with pytest.raises(ValueError, match="Expected 2 lr_lambdas, but got 1"):
        S.MultiplicativeLR(opt, [lambda e: 0.9])
    with pytest.raises(TypeError, match="lr_lambda should be a function, but got float"):
        S.MultiplicativeLR(opt, 0.9)


class _Factor:
    def __init__(self, factor):
        self.factor = factor

    def __call__(self, epoch):
        return self.factor


def test_multiplicative_lr_state_dict_saves_callable_objects():
    opt = optim.SGD([fnx.zeros(1, requires_grad=True)], lr=1.0)
    sched = S.MultiplicativeLR(opt, _Factor(0.5))
    sched.step()
    sd = sched.state_dict()
    assert sd["lr_lambdas"] == [{"factor": 0.5}] and sd["last_epoch"] == 1
    other = S.MultiplicativeLR(optim.SGD([fnx.zeros(1, requires_grad=True)], lr=1.0), _Factor(0.1))
    other.load_state_dict(sd)
    assert other.lr_lambdas[0].factor == 0.5 and other.last_epoch == 1


def test_tensor_lr_takes_the_per_parameter_path_with_the_same_numbers():
    results = []
    for lr in (0.02, fnx.tensor(0.02, dtype=fnx.float64)):
        p = fnx.tensor([[1.0, -2.0], [0.5, 3.0]], dtype=fnx.float64, requires_grad=True)
        skipped = fnx.ones(3, requires_grad=True)
        opt = optim.Adafactor([p, skipped], lr=lr, weight_decay=0.1)
        for _ in range(3):
            p.grad = p.detach() * 2 + 1
            opt.step()
        assert skipped not in opt.state and skipped.tolist() == [1.0, 1.0, 1.0]
        results.append(p.detach().numpy())
    np.testing.assert_allclose(results[1], results[0], rtol=1e-15)
    with pytest.raises(ValueError, match="Tensor lr must be 1-element"):
        optim.Adafactor([fnx.zeros(2, requires_grad=True)], lr=fnx.tensor([0.1, 0.2]))
