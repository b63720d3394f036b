"""simplify's transposed product (fnx/lowering/passes.py `_transposed_product`) on batched matrix products: the
last two dims of (a @ b) swapped become b.T @ a.T, row-major for the kernels that read it (attention's key
gradient, summed over a grouped-query attention's repeated heads)."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

import fnx
from fnx.ir import verify_jaxpr
from fnx.lowering.passes import dce, simplify


def _simplified(f, *args):
    out = dce(simplify(fnx.make_jaxpr(f)(*args)))
    verify_jaxpr(out)
    return out


@settings(max_examples=20)
@given(st.lists(st.integers(1, 3), min_size=0, max_size=2), st.integers(1, 4), st.integers(1, 4),
       st.integers(1, 4), st.booleans())
def test_a_transposed_batched_product_is_computed_transposed(batch, m, k, n, matrix_b):
    a = fnx.randn(*batch, m, k)
    b = fnx.randn(k, n) if matrix_b else fnx.randn(*batch, k, n)

    def f(a, b):
        return fnx.matmul(a, b).transpose(-1, -2)

    out = _simplified(f, a, b)
    (mm,) = [e for e in out.eqns if e.prim.name == "matmul"]
    assert mm.outvars[0] is out.jaxpr.outvars[0]   # no transpose after the product
    np.testing.assert_allclose(fnx.compile(f, backend="interpret")(a, b).numpy(), f(a, b).numpy(), rtol=1e-6,
                               atol=1e-6)


def test_the_key_gradient_of_attention_comes_out_row_major():
    q, k, g = fnx.randn(2, 3, 5, 4), fnx.randn(2, 3, 5, 4), fnx.randn(2, 3, 5, 5)

    def key_grad(q, k):
        return fnx.vjp(lambda k: fnx.matmul(q, k.transpose(-1, -2)), k)[1](g)[0]

    out = _simplified(key_grad, q, k)
    assert [e.prim.name for e in out.eqns] == ["transpose", "matmul"]   # g.T @ q: no transpose of the result
    np.testing.assert_allclose(fnx.compile(key_grad)(q, k).numpy(), key_grad(q, k).numpy(), rtol=1e-5, atol=1e-6)


def test_a_batch_permutation_is_not_a_transposed_product():
    a, b = fnx.randn(2, 3, 4), fnx.randn(2, 4, 5)
    out = _simplified(lambda a, b: fnx.matmul(a, b).permute(1, 0, 2), a, b)
    assert [e.prim.name for e in out.eqns] == ["matmul", "transpose"]
