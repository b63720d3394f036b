"""Lazy modules: the first call reads the input size, builds the real module's parameters in place (an optimizer
built before holds them) and turns the module into the real class, initialised as that class initialises."""
import numpy as np

import fnx
import fnx.nn as nn


def test_lazy_modules_become_the_real_ones_on_the_first_call():
    model = nn.Sequential(nn.LazyConv2d(4, 3, padding=1), nn.LazyBatchNorm2d(), nn.ReLU(), nn.Flatten(),
                          nn.LazyLinear(5))
    assert model[0].has_uninitialized_params() and isinstance(model[4].weight, nn.UninitializedParameter)
    params = list(model.parameters())
    opt = fnx.optim.SGD(params, lr=0.1)
    out = model(fnx.randn(2, 3, 6, 6))
    assert out.shape == (2, 5) and [type(m) for m in model][:2] == [nn.Conv2d, nn.BatchNorm2d]
    assert type(model[4]) is nn.Linear and model[4].in_features == 144 and model[1].num_features == 4
    assert all(a is b for a, b in zip(params, model.parameters()))
    assert [tuple(p.shape) for p in params] == [(4, 3, 3, 3), (4,), (4,), (4,), (5, 144), (5,)]
    before = params[4].detach().clone()
    out.sum().backward()
    opt.step()
    assert not fnx.equal(params[4], before) and "1.running_mean" in model.state_dict()


def test_lazy_initialisation_equals_the_real_class_s():
    x = fnx.randn(2, 7)
    fnx.manual_seed(3)
    lazy = nn.LazyLinear(3)
    lazy.eval()
    y = lazy(x)
    fnx.manual_seed(3)
    real = nn.Linear(7, 3)
    np.testing.assert_array_equal(lazy.weight.detach().numpy(), real.weight.detach().numpy())
    assert fnx.equal(y, real(x)) and not lazy.training
    conv = nn.LazyConvTranspose1d(2, 3, stride=2, bias=False)
    assert conv(fnx.randn(5, 4)).shape == (2, 9) and conv.in_channels == 5 and conv.bias is None   # unbatched
    bn = nn.LazyBatchNorm1d(affine=False)
    assert bn(fnx.randn(4, 6)).shape == (4, 6) and bn.weight is None and bn.running_mean.shape == (6,)


def test_an_uninitialized_parameter_materializes_in_place():
    p = nn.UninitializedParameter(dtype=fnx.float64)
    assert repr(p) == "<UninitializedParameter>" and p.requires_grad
    p.materialize((2, 3))
    assert type(p) is nn.Parameter and p.shape == (2, 3) and p.dtype is fnx.float64
    assert nn.LazyLinear(3).in_features == 0 and nn.LazyConv2d(4, 3).in_channels == 0   # PyTorch's placeholders
