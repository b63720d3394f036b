"""torch.autograd.functional's names (fnx/autograd_functional.py, `import torch.autograd.functional` under the torch
alias): Jacobians, Hessians and vector products shaped as PyTorch's, against closed forms."""
import numpy as np
import pytest

import fnx
from fnx import autograd_functional as AF

X = fnx.tensor([1.0, 2.0], dtype=fnx.float64)
Y = fnx.tensor([3.0, 4.0], dtype=fnx.float64)


def f(x, y):
    return (x ** 2 * y).sum()


def _close(got, want):
    np.testing.assert_allclose(got.numpy(), np.asarray(want, dtype=np.float64), rtol=1e-12)


def test_jacobians_and_hessians_take_pytorchs_shapes():
    for strategy in ("reverse-mode", "forward-mode"):
        _close(AF.jacobian(lambda a: a ** 2, X, strategy=strategy), [[2, 0], [0, 4]])
    jx, jy = AF.jacobian(f, (X, Y))
    _close(jx, [6, 16])
    _close(jy, [1, 4])
    (hxx, hxy), (hyx, hyy) = AF.hessian(f, (X, Y))
    _close(hxx, np.diag([6, 8]))
    _close(hxy, np.diag([2, 4]))
    _close(hyx, np.diag([2, 4]))
    _close(hyy, np.zeros((2, 2)))
    assert not AF.jacobian(lambda a: a ** 2, X.requires_grad_()).requires_grad


def test_vector_products():
    out, product = AF.vjp(lambda a: a ** 2, X, fnx.ones(2, dtype=fnx.float64))
    _close(out, [1, 4])
    _close(product, [2, 4])
    _, product = AF.vjp(lambda a: (a ** 2).sum(), X)   # a one-element output: v = 1
    _close(product, [2, 4])
    _, product = AF.jvp(lambda a: a ** 2, X, fnx.ones(2, dtype=fnx.float64))
    _close(product, [2, 4])
    v = (fnx.ones(2, dtype=fnx.float64), fnx.zeros(2, dtype=fnx.float64))
    for fn in (AF.hvp, AF.vhp):
        value, (px, py) = fn(f, (X, Y), v)
        _close(value, 19)
        _close(px, [6, 8])
        _close(py, [2, 4])


def test_what_is_refused():
    with pytest.raises(NotImplementedError, match="jacobian: create_graph=True is not supported"):
        AF.jacobian(lambda a: a, X, create_graph=True)
    with pytest.raises(ValueError, match="Expected strategy to be either"):
        AF.jacobian(lambda a: a, X, strategy="sideways")
    with pytest.raises(RuntimeError, match="The vector v can only be None if"):
        AF.vjp(lambda a: a * 2, X)
