"""nn names fnx added for PyTorch parity: MultiLabelMarginLoss, LazyInstanceNorm*d, the deprecated nn.init aliases
and the nn.utils fusion / initialization helpers, checked against numbers recorded from torch 2.13."""
from __future__ import annotations

import numpy as np
import pytest

import fnx
import fnx.nn as nn
import fnx.nn.functional as F


def test_multilabel_margin_loss_matches_torch():
    x = fnx.tensor([[0.1, 0.2, 0.4, 0.8], [0.3, -0.2, 0.5, 0.1]], requires_grad=True)
    target = fnx.tensor([[3, 0, -1, 1], [1, 1, 2, -1]])   # row 1 lists class 1 twice: it counts twice
    np.testing.assert_allclose(F.multilabel_margin_loss(x, target, reduction="none").detach().numpy(), [0.85, 1.75],
                               rtol=1e-6)
    np.testing.assert_allclose(F.multilabel_margin_loss(x, target, reduction="sum").item(), 2.6, rtol=1e-6)
    nn.MultiLabelMarginLoss()(x, target).backward()
    np.testing.assert_allclose(x.grad.numpy(), [[-0.25, 0.25, 0.25, -0.25], [0.375, -0.5, -0.25, 0.375]], rtol=1e-6)
    assert F.multilabel_margin_loss(x[0], target[0]).shape == ()
    assert F.multilabel_margin_loss(fnx.zeros(0, 4), fnx.zeros(0, 4, dtype=fnx.int64)).item() == 0.0


def test_multilabel_margin_loss_errors():
    x = fnx.randn(2, 4)
    with pytest.raises(RuntimeError, match=r"inconsistent target size: \[2, 3\] for input of size: \[2, 4\]"):
        F.multilabel_margin_loss(x, fnx.zeros(2, 3, dtype=fnx.int64))
    with pytest.raises(RuntimeError, match="expected scalar type Long"):
        F.multilabel_margin_loss(x, fnx.zeros(2, 4))
    with pytest.raises(RuntimeError, match=r"class indices in \[0, 4\) or -1"):
        F.multilabel_margin_loss(x, fnx.tensor([[0, -1, 7, 0], [0, 1, 2, 3]]))
    with pytest.raises(RuntimeError, match="Expected non-empty vector or matrix"):
        F.multilabel_margin_loss(fnx.randn(2, 3, 4), fnx.zeros(2, 3, 4, dtype=fnx.int64))


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_lazy_instance_norm_becomes_instance_norm_with_tracked_stats(nd):
    lazy = getattr(nn, f"LazyInstanceNorm{nd}d")()
    x = fnx.randn(*(2, 3) + (4,) * nd)
    y = lazy(x)
    assert type(lazy) is getattr(nn, f"InstanceNorm{nd}d") and lazy.num_features == 3
    assert lazy.affine and lazy.track_running_stats   # PyTorch's lazy norms default both to True
    assert list(lazy.state_dict()) == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    real = getattr(nn, f"InstanceNorm{nd}d")(3, affine=True, track_running_stats=True)
    np.testing.assert_allclose(y.detach().numpy(), real(x).detach().numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(lazy.running_mean.numpy(), real.running_mean.numpy(), rtol=1e-6)
    plain = getattr(nn, f"LazyInstanceNorm{nd}d")(affine=False, track_running_stats=False)
    plain(x[0])   # unbatched: the channels are dim 0
    assert plain.num_features == 3 and list(plain.state_dict()) == []
