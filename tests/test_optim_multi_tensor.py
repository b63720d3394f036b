"""Adam's fused path updates all parameters of a dtype and step count at once over flat state arrays
(fnx/optim/multi_tensor.py): it must give the per-parameter path's numbers (`foreach=False`) whatever changes
between steps: which parameters have gradients, their dtypes, step counts, and state loaded or replaced."""
import numpy as np
import pytest

import fnx
from fnx import optim

RNG = np.random.default_rng(7)
SHAPES = [(4, 3), (3,), (), (2, 1, 5)]


def _params(dtypes):
    return [fnx.tensor(RNG.standard_normal(s).astype(d), requires_grad=True) for s, d in zip(SHAPES, dtypes)]


def _schedule(steps, dtypes, skip=None):
    """Gradients per step; `skip[(step, i)]` leaves parameter i without one at that step."""
    skip = skip or set()
    return [[None if (k, i) in skip else RNG.standard_normal(s).astype(d)
             for i, (s, d) in enumerate(zip(SHAPES, dtypes))] for k in range(steps)]


def _train(foreach, params, schedule, opt=None, **kwargs):
    opt = opt or optim.Adam(params, foreach=foreach, **kwargs)
    for grads in schedule:
        for p, g in zip(params, grads):
            p.grad = None if g is None else fnx.tensor(g)
        opt.step()
    return opt


def _copy(params):
    return [fnx.tensor(p.detach().numpy().copy(), requires_grad=True) for p in params]


def _same(a, b):
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.detach().numpy(), y.detach().numpy())


@pytest.mark.parametrize("kwargs", [dict(lr=0.01), dict(lr=0.01, weight_decay=0.1, amsgrad=True, maximize=True)])
def test_changing_parameter_sets_and_step_counts(kwargs):
    dtypes = [np.float64] * 4
    schedule = _schedule(5, dtypes, skip={(1, 0), (2, 0), (2, 3), (3, 1)})
    fused = _params(dtypes)
    loop = _copy(fused)
    opt = _train(None, fused, schedule, **kwargs)
    ref = _train(False, loop, schedule, **kwargs)
    _same(fused, loop)
    for p, q in zip(fused, loop):
        for name in ("step", "exp_avg", "exp_avg_sq"):
            np.testing.assert_array_equal(opt.state[p][name].numpy(), ref.state[q][name].numpy())


def test_mixed_dtypes_in_one_group():
    dtypes = [np.float32, np.float64, np.float32, np.float64]
    schedule = _schedule(3, dtypes)
    fused = _params(dtypes)
    loop = [fnx.tensor(p.detach().numpy().copy(), requires_grad=True) for p in fused]
    _train(None, fused, schedule, lr=0.02)
    _train(False, loop, schedule, lr=0.02)
    _same(fused, loop)
    assert [p.dtype for p in fused] == [fnx.float32, fnx.float64, fnx.float32, fnx.float64]


def test_state_loaded_or_replaced_between_steps():
    dtypes = [np.float64] * 4
    first, second = _schedule(2, dtypes), _schedule(3, dtypes)
    fused = _params(dtypes)
    loop = _copy(fused)
    opt = _train(None, fused, first, lr=0.01)
    ref = _train(False, loop, first, lr=0.01)
    opt.load_state_dict(opt.state_dict())          # new state tensors (copies): the flat layout is built again
    _train(None, fused, second[:1], opt=opt)
    _train(False, loop, second[:1], opt=ref)
    for o, p in ((opt, fused), (ref, loop)):
        o.state[p[1]]["exp_avg"] = fnx.zeros_like(o.state[p[1]]["exp_avg"])   # one replaced by the user
        o.state[p[2]]["exp_avg_sq"].mul_(0.5)     # one written in place
    _train(None, fused, second[1:], opt=opt)
    _train(False, loop, second[1:], opt=ref)
    _same(fused, loop)


def test_step_bumps_versions_and_keeps_state_tensors():
    dtypes = [np.float32] * 4
    params = _params(dtypes)
    opt = _train(None, params, _schedule(1, dtypes), lr=0.01)
    state = [opt.state[p]["exp_avg"] for p in params]
    versions = [p._version[0] for p in params] + [s._version[0] for s in state]
    _train(None, params, _schedule(1, dtypes), opt=opt)
    assert [opt.state[p]["exp_avg"] for p in params] == state   # the same tensors, updated in place
    assert [p._version[0] for p in params] + [s._version[0] for s in state] == [v + 1 for v in versions]
