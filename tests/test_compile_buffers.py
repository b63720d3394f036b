"""Buffers updated by a compiled forward (BatchNorm's running statistics, a module's own `self.buf.add_(...)` or
`self.buf = new`) are written back into the module after the call, as eager mode updates them."""
from __future__ import annotations

import numpy as np
import pytest

import fnx
import fnx.nn as nn
import fnx.nn.functional as F


def _close(a, b, tol: float = 1e-5) -> None:
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def _twins(build):
    """Two modules with the same parameters and buffers: one for eager mode, one to compile."""
    fnx.manual_seed(0)
    eager, compiled = build(), build()
    compiled.load_state_dict(eager.state_dict())
    return eager, compiled


def _assert_same_state(eager: nn.Module, compiled: nn.Module) -> None:
    for (name, a), (_, b) in zip(eager.named_buffers(), compiled.named_buffers()):
        assert a.dtype is b.dtype, name
        _close(b.numpy(), a.numpy())


def _cnn() -> nn.Module:
    """Convolutions without bias before BatchNorm (which cancels a bias: its gradient is rounding noise, which
    Adam would scale up to full steps)."""
    return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.Conv2d(4, 4, 3, bias=False), nn.BatchNorm2d(4, momentum=None), nn.ReLU(),
                         nn.Flatten(), nn.Linear(4 * 4 * 4, 3))


@pytest.mark.parametrize("optimizer", [fnx.optim.SGD, fnx.optim.Adam])
def test_a_compiled_cnn_trains_as_eager_then_evaluates_as_eager(optimizer):
    eager, model = _twins(_cnn)
    step = fnx.compile(model)
    opts = [optimizer(m.parameters(), lr=0.05) for m in (eager, model)]
    fnx.manual_seed(1)
    batches = [(fnx.randn(5, 2, 6, 6), fnx.randint(0, 3, (5,))) for _ in range(3)]
    for x, y in batches:
        losses = []
        for net, opt in zip((eager, step), opts):
            opt.zero_grad()
            loss = F.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        _close(losses[1], losses[0])
        _assert_same_state(eager, model)
    assert int(model[1].num_batches_tracked) == 3
    eager.eval()
    step.eval()
    with fnx.no_grad():
        _close(step(batches[0][0]).numpy(), eager(batches[0][0]).numpy())
    _assert_same_state(eager, model)


class _FunctionalBatchNorm(nn.Module):
    """Running statistics updated by F.batch_norm, which writes them in place."""

    def __init__(self):
        super().__init__()
        self.register_buffer("running_mean", fnx.zeros(3))
        self.register_buffer("running_var", fnx.ones(3))

    def forward(self, x):
        return F.batch_norm(x, self.running_mean, self.running_var, training=True, momentum=0.2)


@pytest.mark.parametrize("layer, shape", [
    (lambda: nn.BatchNorm1d(3), (6, 3)),
    (lambda: nn.BatchNorm1d(3, momentum=None), (6, 3, 2)),
    (lambda: nn.BatchNorm2d(3, affine=False), (4, 3, 2, 2)),
    (lambda: nn.BatchNorm3d(3, track_running_stats=False), (2, 3, 2, 2, 2)),
    (lambda: nn.InstanceNorm1d(3, track_running_stats=True), (2, 3, 4)),
    (lambda: _FunctionalBatchNorm(), (5, 3)),
])
def test_batch_norm_variants_update_as_eager(layer, shape):
    eager, bn = _twins(layer)
    step = fnx.compile(bn)
    for k in range(3):
        x = fnx.randn(*shape) + k
        _close(step(x).detach().numpy(), eager(x).detach().numpy())
        _assert_same_state(eager, bn)


class _Counter(nn.Module):
    """A buffer written in place twice in one forward, one copied into, and one rebound to a new tensor."""

    def __init__(self):
        super().__init__()
        self.register_buffer("total", fnx.zeros(2))
        self.register_buffer("last", fnx.zeros(2))
        self.register_buffer("calls", fnx.tensor(0))

    def forward(self, x):
        self.total.add_(x.sum(0))
        self.total.mul_(0.5)
        self.last.copy_(x[-1])
        self.calls = self.calls + 1
        return x * self.total


def test_buffers_written_in_place_or_rebound_are_written_back_keeping_their_identity():
    eager, counter = _twins(_Counter)
    step = fnx.compile(counter)
    buffers = dict(counter.named_buffers())
    versions = {name: b._version[0] for name, b in buffers.items()}
    for k in range(3):
        x = fnx.randn(3, 2)
        _close(step(x).numpy(), eager(x).numpy())
        _assert_same_state(eager, counter)
    assert int(counter.calls) == 3
    for name, b in counter.named_buffers():
        assert b is buffers[name], name
        assert b._version[0] == versions[name] + 3, name


def test_a_compiled_function_taking_the_model_updates_its_buffers():
    eager, model = _twins(lambda: nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3)))
    step = fnx.compile(lambda m, x: (m(x) ** 2).mean())
    for k in range(2):
        x = fnx.randn(4, 3)
        _close(step(model, x).item(), (eager(x) ** 2).mean().item())
        _assert_same_state(eager, model)


def test_a_compiled_call_in_eval_mode_reads_no_integer_buffer_and_writes_nothing():
    bn = nn.BatchNorm1d(3).eval()
    step, version = fnx.compile(bn), bn.running_mean._version[0]
    x = fnx.randn(4, 3)
    step(x)
    assert "i64" not in step.lower(x).as_text()
    assert bn.running_mean._version[0] == version and int(bn.num_batches_tracked) == 0


def test_buffer_updates_under_vmap_are_refused_by_name():
    step = fnx.compile(nn.BatchNorm1d(3))
    with pytest.raises(NotImplementedError, match="'running_mean' .* under vmap"):
        fnx.vmap(step)(fnx.randn(2, 4, 3))


@pytest.mark.parametrize("transform", ["grad", "jvp"])
def test_buffer_updates_under_grad_and_jvp_write_the_primal_values_as_eager(transform):
    eager, bn = _twins(lambda: nn.BatchNorm1d(3))
    step = fnx.compile(bn)
    x = fnx.randn(6, 3)
    for net in (eager, step):
        if transform == "grad":
            fnx.grad(lambda v: (net(v) ** 3).sum())(x)
        else:
            fnx.jvp(net, (x,), (fnx.ones_like(x),))
    _assert_same_state(eager, bn)
    assert int(bn.num_batches_tracked) == 1


def test_a_buffer_rebound_to_another_shape_is_refused_by_name():
    class Grow(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("seen", fnx.zeros(1))

        def forward(self, x):
            self.seen = fnx.cat([self.seen, x])
            return x

    with pytest.raises(NotImplementedError, match="rebinds the buffer 'seen' of shape"):
        fnx.compile(Grow())(fnx.ones(2))


def test_a_compiled_call_inside_another_writes_back_through_the_outer_one():
    eager, bn = _twins(lambda: nn.BatchNorm1d(3))
    inner = fnx.compile(lambda m, x: m(x))
    outer = fnx.compile(lambda m, x: inner(m, x) * 2)
    for k in range(2):
        x = fnx.randn(5, 3)
        _close(outer(bn, x).detach().numpy(), (eager(x) * 2).detach().numpy())
        _assert_same_state(eager, bn)


def test_a_donated_module_keeps_the_buffers_it_gets_back_valid():
    eager, bn = _twins(lambda: nn.BatchNorm1d(3, affine=False))
    step = fnx.compile(lambda m, x: m(x), donate_argnums=0)
    for k in range(2):
        x = fnx.randn(4, 3)
        _close(step(bn, x).numpy(), eager(x).numpy())
        _assert_same_state(eager, bn)
