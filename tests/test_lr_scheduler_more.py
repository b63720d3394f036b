"""ConstantLR, PolynomialLR, CosineAnnealingWarmRestarts, ReduceLROnPlateau, SequentialLR and ChainedScheduler:
PyTorch's values (closed forms, or tables worked out by hand from the documented rules), state_dict round trips."""
import io
import math

import numpy as np
import pytest

import fnx
from fnx import optim
from fnx.optim import lr_scheduler as S
from fnx.serialization import load, save

BASES = [0.1, 0.2]


def make_opt():
    return optim.SGD([{"params": [fnx.zeros(1, requires_grad=True)], "lr": lr} for lr in BASES], lr=BASES[0])


def trace(sched, n=20, metrics=None):
    lrs = [sched.get_last_lr()]
    for i in range(n):
        sched.optimizer.step()
        sched.step() if metrics is None else sched.step(metrics[i])
        lrs.append(sched.get_last_lr())
    return np.array(lrs)


def closed(fn, n=20):
    return np.array([[fn(base, t) for base in BASES] for t in range(n + 1)])


def sgdr(base, t, T_0, T_mult, eta_min):
    """SGDR at (possibly fractional) epoch t: find the period t falls in, then the cosine within it."""
    start, period = 0, T_0
    while t >= start + period:
        start, period = start + period, period * T_mult
    return eta_min + (base - eta_min) * (1 + math.cos(math.pi * (t - start) / period)) / 2


@pytest.mark.parametrize("make, formula", [
    (lambda o: S.ConstantLR(o, factor=0.5, total_iters=4), lambda b, t: b * (0.5 if t < 4 else 1.0)),
    (lambda o: S.ConstantLR(o), lambda b, t: b * (1 / 3 if t < 5 else 1.0)),
    (lambda o: S.PolynomialLR(o, total_iters=6, power=2.0), lambda b, t: b * (1 - min(t, 6) / 6) ** 2),
    (lambda o: S.PolynomialLR(o, total_iters=8, power=0.5), lambda b, t: b * (1 - min(t, 8) / 8) ** 0.5),
    (lambda o: S.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=0.01), lambda b, t: sgdr(b, t, 3, 2, 0.01)),
    (lambda o: S.CosineAnnealingWarmRestarts(o, T_0=4), lambda b, t: sgdr(b, t, 4, 1, 0.0)),
    (lambda o: S.SequentialLR(o, [S.LinearLR(o, start_factor=0.1, total_iters=3), S.ExponentialLR(o, gamma=0.9)],
                              milestones=[3]),
     lambda b, t: b * (0.1 + 0.9 * t / 3 if t < 3 else 0.9 ** (t - 3))),
    (lambda o: S.SequentialLR(o, [S.ConstantLR(o, factor=0.5, total_iters=2), S.CosineAnnealingWarmRestarts(o, 4),
                                  S.StepLR(o, step_size=2, gamma=0.5)], milestones=[2, 10]),
     lambda b, t: b * 0.5 if t < 2 else sgdr(b, t - 2, 4, 1, 0.0) if t < 10 else b * 0.5 ** ((t - 10) // 2)),
    (lambda o: S.ChainedScheduler([S.ConstantLR(o, factor=0.1, total_iters=2), S.ExponentialLR(o, gamma=0.9)]),
     lambda b, t: b * (0.1 if t < 2 else 1.0) * 0.9 ** t),
], ids=["constant", "constant-defaults", "poly2", "poly-sqrt", "sgdr-mult2", "sgdr", "seq-linear-exp",
        "seq-three", "chained"])
def test_schedules_follow_their_closed_forms(make, formula):
    opt = make_opt()
    lrs = trace(make(opt))
    np.testing.assert_allclose(lrs, closed(formula), rtol=1e-10, atol=1e-14)
    assert [g["lr"] for g in opt.param_groups] == list(lrs[-1])


def test_warm_restarts_take_fractional_epochs():
    opt = make_opt()
    sched = S.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2, eta_min=0.001)
    for epoch in range(7):
        for i in range(4):
            sched.step(epoch + i / 4)
            expected = [sgdr(b, epoch + i / 4, 2, 2, 0.001) for b in BASES]
            np.testing.assert_allclose(sched.get_last_lr(), expected, rtol=1e-12)
    assert sched.last_epoch == 6 and sched.T_i == 8
    with pytest.raises(ValueError, match="non-negative epoch"):
        sched.step(-1)
    with pytest.raises(ValueError, match="T_0"):
        S.CosineAnnealingWarmRestarts(opt, T_0=0)
    with pytest.raises(ValueError, match="T_mult"):
        S.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=1.5)


# patience 2, factor 0.5, rel. threshold 0.1 (better: below 0.9 best), cooldown 1, min_lr per group (0.02, 0.06):
# epoch 4 is the third bad one -> halve; epoch 5 is bad but in cooldown; epoch 6 improves (8 < 9); epochs 7-9 bad
# -> halve at 9 (group 1 clamps at 0.06); 10 cooldown; 11-13 bad -> halve at 13 (group 0 clamps at 0.02).
PLATEAU_METRICS = [10, 9, 9.5, 9.2, 9.1, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8]
PLATEAU_LRS = [[0.1, 0.2]] * 4 + [[0.05, 0.1]] * 5 + [[0.025, 0.06]] * 4 + [[0.02, 0.06]] * 3


def test_reduce_lr_on_plateau_follows_the_documented_rule():
    opt = make_opt()
    sched = S.ReduceLROnPlateau(opt, patience=2, factor=0.5, threshold=0.1, cooldown=1, min_lr=[0.02, 0.06])
    lrs = trace(sched, len(PLATEAU_METRICS), [fnx.tensor(m) for m in PLATEAU_METRICS])
    np.testing.assert_allclose(lrs, PLATEAU_LRS, rtol=1e-12)
    assert sched.best == 8 and sched.last_epoch == len(PLATEAU_METRICS)


def test_reduce_lr_on_plateau_max_mode_abs_threshold_and_eps():
    # better means above best + 0.5: 1.6 and 3 improve; 1.2 / 1.7 and 3.1 / 3.2 are bad (patience 1 -> halve)
    opt = make_opt()
    sched = S.ReduceLROnPlateau(opt, mode="max", patience=1, factor=0.5, threshold=0.5, threshold_mode="abs")
    lrs = trace(sched, 8, [1, 1.2, 1.6, 1.7, 3, 3.1, 3.2, 3.3])
    expected = [[0.1, 0.2]] * 7 + [[0.05, 0.1]] * 2
    np.testing.assert_allclose(lrs, expected)
    tiny = S.ReduceLROnPlateau(make_opt(), patience=0, factor=0.5, eps=0.06)  # group 0 would move by 0.05 < eps
    trace(tiny, 2, [1.0, 1.0])
    assert tiny.get_last_lr() == [0.1, 0.1]
    with pytest.raises(ValueError, match="Factor"):
        S.ReduceLROnPlateau(opt, factor=1.0)
    with pytest.raises(ValueError, match="mode avg is unknown"):
        S.ReduceLROnPlateau(opt, mode="avg")
    with pytest.raises(ValueError, match="threshold mode"):
        S.ReduceLROnPlateau(opt, threshold_mode="pct")
    with pytest.raises(ValueError, match="expected 2 values for min_lr"):
        S.ReduceLROnPlateau(opt, min_lr=[0.1])


def _round_trip(state):
    buf = io.BytesIO()
    save(state, buf)
    buf.seek(0)
    return load(buf)


@pytest.mark.parametrize("make", [
    lambda o: S.ReduceLROnPlateau(o, patience=2, factor=0.5, threshold=0.1, cooldown=1, min_lr=[0.02, 0.06]),
    lambda o: S.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2),
    lambda o: S.SequentialLR(o, [S.ConstantLR(o, factor=0.5, total_iters=2), S.PolynomialLR(o, total_iters=5)],
                             milestones=[3]),
    lambda o: S.ChainedScheduler([S.ConstantLR(o, factor=0.1, total_iters=2), S.ExponentialLR(o, gamma=0.9)]),
], ids=["plateau", "sgdr", "sequential", "chained"])
def test_state_dict_round_trip_resumes_identically(make):
    plateau = "Plateau" in type(make(make_opt())).__name__
    metrics = PLATEAU_METRICS if plateau else None
    opt = make_opt()
    sched = make(opt)
    trace(sched, 6, metrics)
    opt2 = make_opt()
    resumed = make(opt2)
    resumed.load_state_dict(_round_trip(sched.state_dict()))
    for g2, g in zip(opt2.param_groups, opt.param_groups):
        g2["lr"] = g["lr"]
    rest = metrics[6:] if plateau else None
    np.testing.assert_allclose(trace(resumed, 8, rest), trace(sched, 8, rest))


def test_composites_check_their_schedulers():
    opt, other = make_opt(), make_opt()
    with pytest.raises(ValueError, match="at least one scheduler"):
        S.SequentialLR(opt, [], milestones=[])
    with pytest.raises(ValueError, match="one more than the number of milestone"):
        S.SequentialLR(opt, [S.ConstantLR(opt)], milestones=[2])
    with pytest.raises(ValueError, match="ReduceLROnPlateau"):
        S.ChainedScheduler([S.ReduceLROnPlateau(opt)])
    with pytest.raises(ValueError, match="same optimizer"):
        S.ChainedScheduler([S.ConstantLR(opt), S.ExponentialLR(other, 0.9)])
    with pytest.raises(ValueError, match="between 0 and 1"):
        S.ConstantLR(opt, factor=1.5)
