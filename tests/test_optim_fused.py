"""The fused optimizer path (in-place numpy passes over a group's CPU parameters, the default) against the
per-parameter path of fnx ops (`foreach=False`): the same numbers, state and state_dicts; when each is taken."""
import numpy as np
import pytest

import fnx
from fnx import optim

RNG = np.random.default_rng(1)
SHAPES = {"w": (4, 3), "b": (3,), "e": (5, 4)}


def _grads(dtype, steps=4):
    return [{k: RNG.standard_normal(s).astype(dtype) for k, s in SHAPES.items()} for _ in range(steps)]


P0 = {k: RNG.standard_normal(s) for k, s in SHAPES.items()}
G64 = _grads(np.float64, steps=6)  # six: RAdam with betas[1] = 0.9 rectifies from the 6th step

CASES = [
    (optim.SGD, dict(lr=0.1)),
    (optim.SGD, dict(lr=0.1, momentum=0.9, dampening=0.2, weight_decay=0.05)),
    (optim.SGD, dict(lr=0.1, momentum=0.8, nesterov=True, maximize=True)),
    (optim.Adam, dict(lr=0.01)),
    (optim.Adam, dict(lr=0.01, weight_decay=0.1, amsgrad=True)),
    (optim.Adam, dict(lr=0.01, betas=(0.8, 0.9), maximize=True, weight_decay=0.02)),
    (optim.AdamW, dict(lr=0.01, weight_decay=0.3, amsgrad=True, maximize=True)),
    (optim.RMSprop, dict(lr=0.01, weight_decay=0.1)),
    (optim.RMSprop, dict(lr=0.01, centered=True, momentum=0.5, maximize=True)),
    (optim.Adagrad, dict(lr=0.1, lr_decay=0.05, weight_decay=0.1, initial_accumulator_value=0.3, maximize=True)),
    (optim.Adadelta, dict(lr=0.5, rho=0.8, weight_decay=0.1, maximize=True)),
    (optim.Adamax, dict(lr=0.01, weight_decay=0.1, maximize=True)),
    (optim.NAdam, dict(lr=0.01, momentum_decay=0.2, weight_decay=0.1)),
    (optim.NAdam, dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    (optim.RAdam, dict(lr=0.01, betas=(0.9, 0.9), weight_decay=0.1)),
    (optim.RAdam, dict(lr=0.01, betas=(0.8, 0.9), weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
]
IDS = [f"{c[0].__name__}-{'-'.join(f'{k}={v}' for k, v in c[1].items())}" for c in CASES]


def _params(dtype=np.float64):
    return {k: fnx.tensor(v.astype(dtype), requires_grad=True) for k, v in P0.items()}


def _groups(params, grouped: bool):
    """nanoGPT's configure_optimizers: weight decay on the >= 2-D parameters only."""
    if not grouped:
        return list(params.values())
    return [{"params": [p for p in params.values() if p.ndim >= 2], "weight_decay": 0.1},
            {"params": [p for p in params.values() if p.ndim < 2], "weight_decay": 0.0}]


def _run(cls, kwargs, grads, dtype=np.float64, grouped=False, opt=None, params=None):
    params = params if params is not None else _params(dtype)
    opt = opt if opt is not None else cls(_groups(params, grouped), **kwargs)
    for g in grads:
        for k, p in params.items():
            p.grad = fnx.tensor(g[k])
        opt.step()
    return params, opt


def _same_state(a, b, exact=True):
    sa, sb = a.state_dict(), b.state_dict()
    assert sa["param_groups"] == sb["param_groups"]
    assert sa["state"].keys() == sb["state"].keys()
    for i in sa["state"]:
        assert sa["state"][i].keys() == sb["state"][i].keys()
        for name, v in sa["state"][i].items():
            assert v.dtype is sb["state"][i][name].dtype, name
            check = np.testing.assert_array_equal if exact else np.testing.assert_allclose
            check(v.numpy(), sb["state"][i][name].numpy())


@pytest.mark.parametrize("grouped", [False, True], ids=["one-group", "decay-groups"])
@pytest.mark.parametrize("cls, kwargs", CASES, ids=IDS)
def test_fused_matches_per_parameter_path_float64(cls, kwargs, grouped):
    kw = dict(kwargs)
    if grouped:
        kw.pop("weight_decay", None)
    fused_p, fused = _run(cls, kw, G64, grouped=grouped)
    ref_p, ref = _run(cls, {**kw, "foreach": False}, G64, grouped=grouped)
    for k in P0:
        np.testing.assert_allclose(fused_p[k].detach().numpy(), ref_p[k].detach().numpy(), rtol=1e-15, atol=1e-15)
    for g in fused.param_groups + ref.param_groups:
        g.pop("foreach")
    _same_state(fused, ref, exact=False)


@pytest.mark.parametrize("cls, kwargs", CASES, ids=IDS)
def test_fused_matches_per_parameter_path_float32(cls, kwargs):
    grads = _grads(np.float32)
    fused_p, _ = _run(cls, kwargs, grads, dtype=np.float32)
    ref_p, _ = _run(cls, {**kwargs, "foreach": False}, grads, dtype=np.float32)
    for k in P0:
        assert fused_p[k].dtype is fnx.float32
        np.testing.assert_allclose(fused_p[k].detach().numpy(), ref_p[k].detach().numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("cls, kwargs", [c for c in CASES if c[0] is not optim.SGD or "momentum" in c[1]],
                         ids=[i for c, i in zip(CASES, IDS) if c[0] is not optim.SGD or "momentum" in c[1]])
def test_state_dict_round_trips_between_the_paths(cls, kwargs):
    """Two steps fused, the state_dict loaded into a per-parameter optimizer (and back), the other steps: the
    same as all the steps on either path."""
    first, second = G64[:2], G64[2:]
    params, fused = _run(cls, kwargs, first)
    ref = cls(list(params.values()), **kwargs, foreach=False)
    ref.load_state_dict(fused.state_dict())
    assert ref.param_groups[0]["foreach"] is None   # hyperparameters come from the state dict, as in PyTorch
    ref.param_groups[0]["foreach"] = False
    _run(cls, kwargs, second, opt=ref, params=params)
    whole_p, whole = _run(cls, kwargs, G64)
    for k in P0:
        np.testing.assert_allclose(params[k].detach().numpy(), whole_p[k].detach().numpy(), rtol=1e-15)
    back = cls(list(whole_p.values()), **kwargs)
    back.load_state_dict(whole.state_dict())
    ref.param_groups[0]["foreach"] = None
    _same_state(back, ref, exact=False)
    if "step" in whole.state[whole_p["w"]]:
        assert whole.state[whole_p["w"]]["step"].item() == len(G64)


@pytest.mark.parametrize("cls", [optim.AdamW, optim.Adagrad, optim.Adadelta, optim.Adamax, optim.NAdam, optim.RAdam])
def test_fused_path_dispatches_no_op_and_bumps_versions(monkeypatch, cls):
    from fnx import core

    params = _params(np.float32)
    opt = cls(_groups(params, True), lr=1e-3)
    _run(None, None, _grads(np.float32, 1), opt=opt, params=params)   # the first step creates the state
    versions = {k: p._version[0] for k, p in params.items()}
    calls = []
    monkeypatch.setattr(core.Primitive, "bind", lambda *a, **k: calls.append(a[0]))
    for k, p in params.items():
        p.grad = fnx.tensor(RNG.standard_normal(SHAPES[k]).astype(np.float32))
    opt.step()
    assert calls == []
    assert all(p._version[0] == versions[k] + 1 for k, p in params.items())
    assert all(s["step"].item() == 2.0 for s in opt.state.values())


def test_per_parameter_path_when_fused_cannot_run():
    half = fnx.ones(3, dtype=fnx.float16, requires_grad=True)
    half.grad = fnx.ones(3, dtype=fnx.float16)
    opt = optim.Adam([half], lr=0.1)
    opt.step()   # float16 parameters take the per-parameter path
    np.testing.assert_allclose(half.detach().numpy().astype(np.float64), 0.9, rtol=1e-3)
    with pytest.raises(RuntimeError, match=r"fused=True.*float16"):
        optim.Adam([half], lr=0.1, fused=True).step()
    tensor_lr = fnx.ones(2, dtype=fnx.float64, requires_grad=True)
    tensor_lr.grad = fnx.ones(2, dtype=fnx.float64)
    with pytest.raises(RuntimeError, match="lr=.*not a Python number"):
        optim.SGD([tensor_lr], lr=fnx.tensor(0.5), fused=True).step()
    optim.SGD([tensor_lr], lr=fnx.tensor(0.5)).step()
    assert tensor_lr.tolist() == [0.5, 0.5]
    with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot be `True` together"):
        optim.AdamW([tensor_lr], foreach=True, fused=True).step()
