"""fnx.optim.swa_utils (torch.optim.swa_utils): weight averages, batch_norm statistics for them, and SWALR, against
float64 closed forms and PyTorch's documented numbers."""
import math

import numpy as np
import pytest

import fnx
import fnx.nn as nn
from fnx.optim import swa_utils


def _model():
    fnx.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2)).to(fnx.float64)


def _train_a_little(model, steps: int) -> list:
    """Perturb the weights and run a batch (which moves the running statistics) `steps` times; the values of
    every parameter and buffer after each step."""
    seen = []
    for _ in range(steps):
        with fnx.no_grad():
            for p in model.parameters():
                p.add_(fnx.randn(*p.shape, dtype=p.dtype))
        model(fnx.randn(8, 3, dtype=fnx.float64))
        seen.append({k: v.detach().numpy().copy() for k, v in model.state_dict().items()})
    return seen


def test_swa_is_the_equal_weight_average_and_copies_the_buffers():
    swa = swa_utils.AveragedModel(_model())
    model = _model()
    seen = []
    for _ in range(4):
        seen += _train_a_little(model, 1)
        swa.update_parameters(model)
    assert int(swa.n_averaged) == 4
    state = swa.state_dict()
    for name, p in model.named_parameters():
        want = np.mean([v[name] for v in seen], axis=0)
        np.testing.assert_allclose(state[f"module.{name}"].numpy(), want, rtol=1e-12, atol=1e-12)
    for name, b in model.named_buffers():   # copied from the model, not averaged
        np.testing.assert_array_equal(state[f"module.{name}"].numpy(), b.numpy())
    x = fnx.randn(5, 3, dtype=fnx.float64)
    swa.eval()
    np.testing.assert_array_equal(swa(x).detach().numpy(), swa.module(x).detach().numpy())


def test_ema_of_weights_and_buffers_through_multi_avg_fn_and_avg_fn():
    decay = 0.9
    for kind in ("multi", "single"):
        model = _model()
        fns = {"multi_avg_fn": swa_utils.get_ema_multi_avg_fn(decay)} if kind == "multi" else \
            {"avg_fn": swa_utils.get_ema_avg_fn(decay)}
        ema = swa_utils.AveragedModel(model, use_buffers=True, **fns)
        seen = []
        for _ in range(3):
            seen += _train_a_little(model, 1)
            ema.update_parameters(model)
        state = ema.state_dict()
        for name, value in seen[0].items():
            if value.dtype.kind != "f":
                continue
            want = value
            for later in seen[1:]:
                want = decay * want + (1 - decay) * later[name]
            np.testing.assert_allclose(state[f"module.{name}"].numpy(), want, rtol=1e-12, atol=1e-12, err_msg=name)
        assert state["module.1.num_batches_tracked"].dtype == fnx.int64


def test_a_torchvision_style_ema_subclass():
    """torchvision's references/classification/utils.py: ExponentialMovingAverage(AveragedModel) with avg_fn."""

    class ExponentialMovingAverage(swa_utils.AveragedModel):
        def __init__(self, model, decay, device="cpu"):
            def ema_avg(avg_model_param, model_param, num_averaged):
                return decay * avg_model_param + (1 - decay) * model_param

            super().__init__(model, device, ema_avg, use_buffers=True)

    model = _model()
    ema = ExponentialMovingAverage(model, decay=0.5)
    first = _train_a_little(model, 1)[0]
    ema.update_parameters(model)
    second = _train_a_little(model, 1)[0]
    ema.update_parameters(model)
    got = ema.module.state_dict()["0.weight"].numpy()
    np.testing.assert_allclose(got, 0.5 * first["0.weight"] + 0.5 * second["0.weight"], rtol=1e-12)


def test_update_bn_recomputes_the_statistics_as_cumulative_averages():
    model = _model()
    model.eval()
    batches = [(fnx.randn(16, 3, dtype=fnx.float64), fnx.zeros(16)) for _ in range(3)]
    swa_utils.update_bn(batches, model)
    bn = model[1]
    assert not model.training and bn.momentum == 0.1
    hidden = [model[0](x).detach().numpy() for x, _ in batches]
    np.testing.assert_allclose(bn.running_mean.numpy(), np.mean([h.mean(0) for h in hidden], 0), rtol=1e-12)
    np.testing.assert_allclose(bn.running_var.numpy(), np.mean([h.var(0, ddof=1) for h in hidden], 0), rtol=1e-12)
    swa_utils.update_bn([fnx.randn(4, 3)], nn.Linear(3, 3))   # no batch_norm: nothing to do


def test_swalr_anneals_to_swa_lr_as_pytorch_does():
    model = nn.Linear(2, 1)
    opt = fnx.optim.SGD(model.parameters(), lr=1.0)
    sched = swa_utils.SWALR(opt, swa_lr=0.1, anneal_epochs=3)
    lrs = []
    for _ in range(6):
        lrs.append(opt.param_groups[0]["lr"])
        sched.step()
    # PyTorch 2.x: [1.0, 0.775, 0.325, 0.1, 0.1, 0.1] (cosine: lr_t = swa + (1 - swa) (1 + cos(pi t / 3)) / 2)
    want = [0.1 + 0.9 * (1 + math.cos(math.pi * min(t, 3) / 3)) / 2 for t in range(6)]
    np.testing.assert_allclose(lrs, want, rtol=1e-12)
    opt2 = fnx.optim.SGD([{"params": [model.weight]}, {"params": [model.bias], "lr": 0.5}], lr=1.0)
    sched2 = swa_utils.SWALR(opt2, swa_lr=[0.2, 0.3], anneal_epochs=0, anneal_strategy="linear")
    assert [g["lr"] for g in opt2.param_groups] == [0.2, 0.3]
    restored = swa_utils.SWALR(fnx.optim.SGD(model.parameters(), lr=1.0), swa_lr=0.1)
    restored.load_state_dict(sched.state_dict())
    assert restored.anneal_func(0.5) == sched.anneal_func(0.5) and restored.last_epoch == sched.last_epoch
    assert sched2.get_last_lr() == [0.2, 0.3]


@pytest.mark.parametrize("make, message", [
    (lambda: swa_utils.get_ema_multi_avg_fn(1.5), "Invalid decay value 1.5"),
    (lambda: swa_utils.get_ema_avg_fn(-0.1), "Invalid decay value -0.1"),
    (lambda: swa_utils.AveragedModel(nn.Linear(1, 1), avg_fn=swa_utils.get_swa_avg_fn(),
                                     multi_avg_fn=swa_utils.get_swa_multi_avg_fn()), "only one of avg_fn"),
    (lambda: swa_utils.SWALR(fnx.optim.SGD(nn.Linear(1, 1).parameters(), lr=1.0), 0.1, anneal_strategy="exp"),
     "anneal_strategy must by one of 'cos' or 'linear'"),
    (lambda: swa_utils.SWALR(fnx.optim.SGD(nn.Linear(1, 1).parameters(), lr=1.0), [0.1, 0.2]),
     "expected 1 values for swa_lr, got 2"),
    (lambda: swa_utils.SWALR(fnx.optim.SGD(nn.Linear(1, 1).parameters(), lr=1.0), 0.1, anneal_epochs=-1),
     "anneal_epochs must be equal or greater than 0"),
])
def test_bad_arguments_are_named(make, message):
    with pytest.raises(ValueError, match=message):
        make()
