"""torch's layout, return_types, to_dlpack and Tensor queries in fnx, against torch 2.13's answers."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import fnx
from fnx import return_types


def test_layout():
    x = fnx.ones(2, 3)
    assert x.layout is fnx.strided and isinstance(fnx.strided, fnx.layout)
    assert repr(fnx.strided) == "fnx.strided"
    assert x.t().layout is fnx.strided


@given(st.lists(st.integers(1, 4), min_size=0, max_size=4), st.randoms(use_true_random=False))
def test_dim_order_sorts_by_stride(shape, rng):
    perm = list(range(len(shape)))
    rng.shuffle(perm)
    x = fnx.zeros(*shape).permute(*perm)
    order = x.dim_order()
    strides = x.stride()
    assert sorted(order) == list(range(len(shape)))
    assert all(strides[a] >= strides[b] for a, b in zip(order, order[1:]))


def test_dim_order_matches_torch():
    x = fnx.zeros(2, 3, 4)
    assert x.dim_order() == (0, 1, 2)
    assert x.permute(2, 0, 1).dim_order() == (1, 2, 0)   # torch's values for these five
    assert fnx.zeros(2, 1, 3).permute(1, 0, 2).dim_order() == (0, 1, 2)
    assert fnx.zeros(1, 1).t().dim_order() == (0, 1)
    assert fnx.tensor(1.0).dim_order() == ()
    with pytest.raises(NotImplementedError, match="ambiguity_check"):
        x.dim_order(ambiguity_check=True)


def test_tensor_queries():
    x = fnx.ones(2)
    assert x.is_neg() is False and (-x).is_neg() is False
    for name in ("is_xpu", "is_mps", "is_ipu", "is_mtia", "is_maia", "is_xla", "is_vulkan"):
        assert getattr(x, name) is False
        assert getattr(fnx.Tensor, name).__doc__.startswith("Always False")


def test_return_types_are_what_ops_return():
    x = fnx.tensor([[3.0, 1.0, 2.0], [0.5, 4.0, -1.0]], dtype=fnx.float64)
    a = x @ x.mT + fnx.eye(2, dtype=fnx.float64)
    cases = {"max": fnx.max(x, 0), "min": fnx.min(x, 0), "sort": fnx.sort(x), "topk": fnx.topk(x, 2),
             "kthvalue": fnx.kthvalue(x, 1), "median": fnx.median(x, 1), "mode": fnx.mode(x, 1),
             "nanmedian": fnx.nanmedian(x, 1), "aminmax": fnx.aminmax(x), "cummax": fnx.cummax(x, 1),
             "cummin": fnx.cummin(x, 1), "frexp": fnx.frexp(x), "slogdet": fnx.slogdet(a),
             "linalg_slogdet": fnx.linalg.slogdet(a), "linalg_eigh": fnx.linalg.eigh(a),
             "linalg_qr": fnx.linalg.qr(a), "linalg_svd": fnx.linalg.svd(a), "svd": fnx.svd(a),
             "linalg_lu_factor": fnx.linalg.lu_factor(a), "linalg_cholesky_ex": fnx.linalg.cholesky_ex(a),
             "linalg_inv_ex": fnx.linalg.inv_ex(a), "histogram": fnx.histogram(x.flatten())}
    for name, result in cases.items():
        assert isinstance(result, getattr(return_types, name)), name
    assert return_types.max._fields == ("values", "indices")
    assert return_types.linalg_svd._fields == ("U", "S", "Vh") and return_types.svd._fields == ("U", "S", "V")
    assert set(return_types.__all__) <= set(dir(return_types))


def test_to_dlpack_round_trip():
    x = fnx.arange(6.0).reshape(2, 3)
    y = fnx.from_dlpack(fnx.to_dlpack(x))
    np.testing.assert_array_equal(y.numpy(), x.numpy())
    x[0, 0] = 7.0   # the memory is shared, as torch's
    assert y[0, 0].item() == 7.0
    assert fnx.to_dlpack is fnx.utils.dlpack.to_dlpack
