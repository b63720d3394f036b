"""nn.utils.prune: masks as PyTorch 2.13 computes them (recorded below from the same numpy draws), iterative
pruning in a PruningContainer, global pruning, gradients through the mask, remove, errors."""
import numpy as np
import pytest

import fnx
from fnx import nn
from fnx.nn.utils import prune


def _linear(rng, i, o):
    m = nn.Linear(i, o)
    with fnx.no_grad():
        m.weight.copy_(fnx.tensor(rng.standard_normal((o, i)), dtype=fnx.float32))
        m.bias.copy_(fnx.tensor(rng.standard_normal(o), dtype=fnx.float32))
    return m


# PyTorch's masks for these draws: l1 30%, then the weakest row by L2 norm, then two more entries by magnitude
L1 = [0, 0, 1, 0, 1, 1, 1, 1, 1, 1, 1, 0, 1, 0, 1, 1, 1, 0, 1, 1, 0, 1, 1, 1]
LN = [0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 1, 0, 1, 1, 1, 0, 1, 1, 0, 1, 1, 1]
L1_AGAIN = [0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 1, 0, 1, 1, 1, 0, 0, 1, 0, 1, 1, 0]
GLOBAL = ([1, 1, 1, 1, 0, 1, 0, 0, 1, 0, 0, 1, 1, 1, 0], [0, 0, 1, 1, 0, 1], [1, 1, 0])


def test_iterative_pruning_matches_pytorch_and_masks_the_gradient():
    rng = np.random.default_rng(0)
    m = _linear(rng, 6, 4)
    prune.l1_unstructured(m, "weight", amount=0.3)
    assert m.weight_mask.reshape(-1).tolist() == L1
    assert sorted(n for n, _ in m.named_parameters()) == ["bias", "weight_orig"]
    assert [n for n, _ in m.named_buffers()] == ["weight_mask"]
    prune.ln_structured(m, "weight", amount=1, n=2, dim=0)
    assert m.weight_mask.reshape(-1).tolist() == LN
    prune.l1_unstructured(m, "weight", amount=2)
    assert m.weight_mask.reshape(-1).tolist() == L1_AGAIN
    (hook,) = [h for h, _, _ in m._forward_pre_hooks.values()]
    assert isinstance(hook, prune.PruningContainer) and len(hook) == 3
    m(fnx.tensor(rng.standard_normal((3, 6)), dtype=fnx.float32)).sum().backward()
    grad = m.weight_orig.grad.numpy().reshape(-1)
    assert (grad[np.array(L1_AGAIN) == 0] == 0).all() and (grad[np.array(L1_AGAIN) == 1] != 0).all()
    prune.remove(m, "weight")
    assert sorted(n for n, _ in m.named_parameters()) == ["bias", "weight"] and not prune.is_pruned(m)
    assert (m.weight.detach().numpy().reshape(-1)[np.array(L1_AGAIN) == 0] == 0).all()


def test_global_custom_identity_and_importance_scores():
    rng = np.random.default_rng(0)
    _linear(rng, 6, 4), rng.standard_normal((3, 6))   # the draws of the first test's module and input
    a, b = _linear(rng, 5, 3), _linear(rng, 3, 2)
    prune.global_unstructured([(a, "weight"), (b, "weight"), (a, "bias")], pruning_method=prune.L1Unstructured,
                              amount=0.4)
    masks = (a.weight_mask, b.weight_mask, a.bias_mask)
    assert tuple(mask.reshape(-1).tolist() for mask in masks) == GLOBAL
    c = _linear(rng, 4, 3)
    prune.custom_from_mask(c, "bias", fnx.tensor([1.0, 0.0, 1.0]))
    prune.identity(c, "weight")
    assert c.bias.tolist() == (c.bias_orig * fnx.tensor([1.0, 0.0, 1.0])).tolist() and prune.is_pruned(c)
    assert list(c.state_dict()) == ["bias_orig", "weight_orig", "bias_mask", "weight_mask"]
    d = _linear(rng, 4, 3)
    prune.l1_unstructured(d, "weight", amount=3, importance_scores=fnx.arange(12.0).reshape(3, 4))
    assert d.weight_mask.reshape(-1).tolist() == [0, 0, 0] + [1] * 9


def test_random_methods_prune_the_asked_number():
    fnx.manual_seed(0)
    conv = nn.Conv2d(4, 6, 3)
    prune.random_unstructured(conv, "weight", amount=0.25)
    assert int((conv.weight_mask == 0).sum()) == round(0.25 * conv.weight.numel())
    prune.random_structured(conv, "weight", amount=2, dim=0)
    alive = conv.weight_mask.sum((1, 2, 3)) != 0
    assert int((~alive).sum()) == 2


@pytest.mark.parametrize("call, error, match", [
    (lambda m: prune.l1_unstructured(m, "weight", amount=1.5), ValueError, "float in the range \\[0, 1\\]"),
    (lambda m: prune.l1_unstructured(m, "weight", amount=5), ValueError, "smaller than the number of parameters"),
    (lambda m: prune.l1_unstructured(m, "weight", amount="half"), TypeError, "Must be int or float"),
    (lambda m: prune.remove(m, "weight"), ValueError, "has to be pruned before pruning can be removed"),
    (lambda m: prune.global_unstructured([(m, "weight")], prune.RandomStructured, amount=1), TypeError,
     'Only "unstructured" PRUNING_TYPE'),
])
def test_bad_arguments(call, error, match):
    m = nn.Linear(2, 2)
    with pytest.raises(error, match=match):
        call(m)
    assert sorted(n for n, _ in m.named_parameters()) == ["bias", "weight"]   # nothing half-done
