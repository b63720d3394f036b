"""nn.AdaptiveLogSoftmaxWithLoss: PyTorch 2.13's outputs, loss and gradients on the same weights (recorded below),
log_prob normalised over all classes, predict = the argmax of log_prob, errors."""
import numpy as np
import pytest

import fnx
from fnx import nn


def _module():
    asm = nn.AdaptiveLogSoftmaxWithLoss(16, 20, cutoffs=[5, 12], div_value=2.0)
    with fnx.no_grad():
        for i, p in enumerate(asm.parameters()):
            p.copy_(fnx.sin(fnx.arange(p.numel(), dtype=fnx.float32).reshape(p.shape) * (0.37 + 0.1 * i)) * 0.3)
    return asm


def test_outputs_loss_and_gradients_equal_pytorchs():
    asm = _module()
    x = fnx.cos(fnx.arange(6 * 16, dtype=fnx.float32).reshape(6, 16) * 0.21)
    out, loss = asm(x, fnx.tensor([0, 7, 19, 4, 12, 11]))
    loss.backward()
    np.testing.assert_allclose(out.detach().numpy(), [-0.80521, -3.27185, -6.72259, -1.74394, -5.66023, -3.54253],
                               atol=2e-5)
    assert float(loss) == pytest.approx(3.624389, abs=2e-6)
    np.testing.assert_allclose(asm.head.weight.grad.reshape(-1)[:5].numpy(),
                               [0.02274, 0.00453, -0.01389, -0.03169, -0.0481], atol=2e-5)
    np.testing.assert_allclose(asm.tail[1][0].weight.grad.reshape(-1)[:4].numpy(),
                               [-0.01788, -0.01582, -0.01307, -0.00974], atol=2e-5)
    lp = asm.log_prob(x)
    assert tuple(lp.shape) == (6, 20)
    np.testing.assert_allclose(lp.exp().sum(1).detach().numpy(), np.ones(6), rtol=1e-5)
    assert tuple(asm(x[0], fnx.tensor(7)).output.shape) == ()


def test_predict_is_the_argmax_of_log_prob():
    fnx.manual_seed(0)
    asm = nn.AdaptiveLogSoftmaxWithLoss(32, 30, cutoffs=[3, 10])
    x = fnx.randn(64, 32) * 4
    np.testing.assert_array_equal(asm.predict(x).numpy(), asm.log_prob(x).argmax(1).numpy())
    assert bool((asm.predict(x) >= 3).any())        # some rows reached through the clusters


@pytest.mark.parametrize("call, match", [
    (lambda: nn.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs=[]), "length larger than 0"),
    (lambda: nn.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs=[5, 3]), "sorted in an increasing order"),
    (lambda: nn.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs=[10]), "between 1 and n_classes-1"),
    (lambda: nn.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs=[4])(fnx.randn(2, 8), fnx.tensor([1, 10])),
     r"Target values should be in \[0, 9\]"),
    (lambda: nn.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs=[4])(fnx.randn(2, 8), fnx.tensor([1])),
     "same size in the batch dimension"),
])
def test_bad_arguments(call, match):
    with pytest.raises((ValueError, RuntimeError), match=match):
        call()
