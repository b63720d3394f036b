"""fnx.optim.Muon and fnx.optim.functional.muon (PyTorch's torch.optim.Muon): 5-step trajectories equal to
PyTorch's (recorded from torch 2.13 with the same starts and gradients), the Newton-Schulz orthogonalization,
the learning-rate adjustments, state and errors."""
import math

import numpy as np
import pytest

import fnx
from fnx import optim
from fnx.optim import functional as OF
from fnx.optim.muon import adjust_lr, zeropower_via_newtonschulz

CONFIGS = {
    "default": {},
    "plain": dict(nesterov=False, weight_decay=0.0, momentum=0.9),
    "adamw": dict(adjust_lr_fn="match_rms_adamw", lr=0.01),
    "custom": dict(ns_coefficients=(2.0, -1.5, 0.5), ns_steps=3, lr=0.05, weight_decay=0.01),
}

# torch.optim.Muon(params, lr=0.02, **CONFIGS[name]) after 5 steps in float64 (_inputs() below), to 15 decimals
TORCH = {
    ("default", "wide"): [
        [0.151896348397734, -0.125804500592148, 0.581161791912136, 0.05960944800689, -0.492577456109005],
        [0.342935943926778, 1.323513637645018, 0.941549203653454, -0.759343722652251, -1.266954734495407],
        [-0.684641938497354, 0.012197085472638, -2.306705510609018, -0.22264968493293, -1.230682350855313],
    ],
    ("default", "tall"): [
        [-0.687883873995162, -0.583934629718229, -0.381410958916776, 0.370574824646641],
        [1.027287956441757, -0.129400378309374, 1.299602743892626, -0.668971794700133],
        [0.375482368936805, 0.903034523396718, 0.111948611061055, -0.740789290165331],
        [-0.867437386216317, -0.457456390850594, 0.27429776463725, -0.99219789508796],
        [-0.150240377684166, -0.119553461410981, 0.527128415042788, 0.20714653318215],
        [0.379626333623738, -0.610184709719388, -0.158945338869842, 0.726748020894541],
    ],
    ("plain", "wide"): [
        [0.140383541405893, -0.120976933603802, 0.583508587943282, 0.06120871090304, -0.502134216911111],
        [0.350638023659485, 1.335582076380137, 0.948367584222992, -0.769907110806993, -1.288937096046053],
        [-0.696086962537352, 0.011013479347244, -2.322101087138834, -0.224227454948171, -1.243742978503065],
    ],
    ("plain", "tall"): [
        [-0.691350829263699, -0.588895192427949, -0.376006468849494, 0.376706170900857],
        [1.029141643210101, -0.138318269436205, 1.322879776102899, -0.680800004257592],
        [0.376128496018164, 0.919999453255941, 0.114141649504547, -0.757636441131004],
        [-0.871180729515247, -0.476551493905331, 0.266218739340311, -0.999792715649593],
        [-0.145498409878658, -0.117291850548277, 0.531929107130901, 0.209563992474966],
        [0.376596437304417, -0.607565785565384, -0.163210394862095, 0.738358507761647],
    ],
    ("adamw", "wide"): [
        [0.131234166573594, -0.130321447249611, 0.625379359722261, 0.094466380878533, -0.52453986301452],
        [0.356425775562977, 1.304767014870483, 0.943229016107685, -0.714255821207184, -1.262284891843343],
        [-0.635305472613492, 0.034689818424974, -2.314504660842142, -0.219055893864336, -1.239072910774999],
    ],
    ("adamw", "tall"): [
        [-0.721181068081613, -0.550569024363695, -0.328403604161143, 0.40217319901339],
        [1.036331883470939, -0.128332105335233, 1.34897823904682, -0.663962722917803],
        [0.355260827537639, 0.900691241683017, 0.097324368866144, -0.74073234839136],
        [-0.908084628303129, -0.456300996906837, 0.230368838277339, -1.003092646604542],
        [-0.196740321180413, -0.150796989368099, 0.536477700164362, 0.212497967799823],
        [0.359166673040721, -0.643130752137708, -0.135109801058779, 0.770168730692866],
    ],
    ("custom", "wide"): [
        [0.183039274225286, -0.120153015669947, 0.506240120944345, -0.002251507194776, -0.440099622185041],
        [0.316154710266971, 1.383664082138168, 0.950715429710559, -0.857278522415522, -1.302275215845827],
        [-0.786985492362195, -0.033671011600249, -2.339944062213845, -0.235441940023647, -1.222206550646489],
    ],
    ("custom", "tall"): [
        [-0.643269846009095, -0.652542575679124, -0.473211380392429, 0.330709358560789],
        [1.020188618138783, -0.128961915580029, 1.238759773847711, -0.687317320094921],
        [0.415334922364911, 0.922998384175692, 0.139486898806304, -0.752614741594756],
        [-0.787526810150883, -0.487327834457919, 0.348925930106883, -0.97228022127066],
        [-0.039770326545848, -0.069842190686361, 0.529766995812591, 0.211880510988891],
        [0.41832758137098, -0.554892260644739, -0.209888905493713, 0.674543158370042],
    ],
}


def _inputs():
    """The starts of a wide (3, 5) and a tall (6, 4) parameter and 5 gradients of each."""
    rng = np.random.default_rng(0)
    starts = {"wide": rng.standard_normal((3, 5)), "tall": rng.standard_normal((6, 4))}
    grads = {k: [rng.standard_normal(v.shape) for _ in range(5)] for k, v in starts.items()}
    return starts, grads


@pytest.mark.parametrize("dtype, atol", [(fnx.float64, 1e-14), (fnx.float32, 1e-6)])
@pytest.mark.parametrize("name", CONFIGS)
def test_five_steps_equal_pytorch(name, dtype, atol):
    starts, grads = _inputs()
    params = {k: fnx.tensor(v, dtype=dtype, requires_grad=True) for k, v in starts.items()}
    opt = optim.Muon(params.values(), **{"lr": 0.02, **CONFIGS[name]})
    for step in range(5):
        for k, p in params.items():
            p.grad = fnx.tensor(grads[k][step], dtype=dtype)
        opt.step()
    for k, p in params.items():
        assert p.dtype is dtype
        np.testing.assert_allclose(p.detach().numpy(), TORCH[(name, k)], rtol=0, atol=atol)
    assert list(opt.state[params["wide"]]) == ["momentum_buffer"]


@pytest.mark.parametrize("name", CONFIGS)
def test_functional_form_gives_the_same_numbers(name):
    starts, grads = _inputs()
    pure = OF.muon(**{"lr": 0.02, **CONFIGS[name]})
    params = {k: fnx.tensor(v) for k, v in starts.items()}
    state = pure.init(params)
    for step in range(5):
        params, state = pure.update({k: fnx.tensor(grads[k][step]) for k in params}, state, params)
    for k, p in params.items():
        np.testing.assert_allclose(p.numpy(), TORCH[(name, k)], rtol=0, atol=1e-14)
    assert int(state["step"]) == 5 and state["momentum_buffer"]["tall"].shape == (6, 4)


@pytest.mark.parametrize("shape", [(4, 4), (3, 7), (9, 2)])
def test_newton_schulz_nearly_orthogonalizes(shape):
    g = fnx.tensor(np.random.default_rng(1).standard_normal(shape))
    o = zeropower_via_newtonschulz(g)
    assert o.dtype is fnx.bfloat16 and o.shape == shape
    singular = np.linalg.svd(o.to(fnx.float64).numpy(), compute_uv=False)
    assert singular.min() > 0.5 and singular.max() < 1.3   # PyTorch's coefficients: about 0.7 .. 1.2


def test_learning_rate_adjustments():
    assert adjust_lr(0.1, None, (8, 2)) == pytest.approx(0.2)
    assert adjust_lr(0.1, "original", (2, 8)) == pytest.approx(0.1)
    assert adjust_lr(0.1, "match_rms_adamw", (2, 16)) == pytest.approx(0.1 * 0.2 * 4)


@pytest.mark.parametrize("call, message", [
    (lambda: optim.Muon([fnx.zeros(3, requires_grad=True)]), r"Muon only supports 2D parameters.*\[3\]"),
    (lambda: optim.Muon([fnx.zeros(2, 2, 2, requires_grad=True)]), "Muon only supports 2D parameters"),
    (lambda: optim.Muon([fnx.zeros(2, 2, requires_grad=True)], lr=-1.0), "Learning rate should be >= 0"),
    (lambda: optim.Muon([fnx.zeros(2, 2, requires_grad=True)], momentum=-0.1), "momentum should be >= 0"),
    (lambda: optim.Muon([fnx.zeros(2, 2, requires_grad=True)], weight_decay=-1.0), "weight decay should be >= 0"),
    (lambda: optim.Muon([fnx.zeros(2, 2, requires_grad=True)], adjust_lr_fn="x"), "function x is not supported"),
    (lambda: zeropower_via_newtonschulz(fnx.ones(2, 2), ns_steps=100), "must be less than 100"),
    (lambda: zeropower_via_newtonschulz(fnx.ones(2, 2), ns_coefficients=(1.0, 2.0)), "exactly 3 values"),
    (lambda: zeropower_via_newtonschulz(fnx.ones(2)), "must be a 2D matrix"),
    (lambda: OF.muon(weight_decay=-1.0), "weight decay should be >= 0"),
])
def test_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_complex_parameters_are_an_error():
    p = fnx.zeros(2, 2, dtype=fnx.complex64, requires_grad=True)
    opt = optim.Muon([p])
    p.grad = fnx.ones(2, 2, dtype=fnx.complex64)
    with pytest.raises(RuntimeError, match="Muon does not support complex parameters"):
        opt.step()


def test_parameters_without_gradients_are_left_alone_and_state_round_trips():
    a, b = fnx.ones(2, 3, requires_grad=True), fnx.ones(3, 2, requires_grad=True)
    opt = optim.Muon([a, b], lr=0.1)
    a.grad = fnx.tensor([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]])
    opt.step()
    np.testing.assert_array_equal(b.detach().numpy(), np.ones((3, 2)))
    assert b not in opt.state and not math.isclose(a[0, 0].item(), 1.0)
    again = optim.Muon([a, b], lr=0.1)
    again.load_state_dict(opt.state_dict())
    np.testing.assert_array_equal(again.state[a]["momentum_buffer"].numpy(), opt.state[a]["momentum_buffer"].numpy())
