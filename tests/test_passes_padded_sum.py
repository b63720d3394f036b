"""simplify's padded sum (fnx/lowering/passes.py `_padded_sum`): zero pads that place their operands side by side
and are summed (a split's backward) become one concatenate, exactly (signed zeros included)."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

import fnx
from fnx.ir import verify_jaxpr
from fnx.lowering.passes import dce, simplify


def _simplified(f, *args):
    out = dce(simplify(fnx.make_jaxpr(f)(*args)))
    verify_jaxpr(out)
    return out, [e.prim.name for e in out.eqns]


def _split_grad(sizes):
    def loss(x):
        parts = x.split(list(sizes), dim=1)
        return sum((p.sin() * (i + 1.0)).sum() for i, p in enumerate(parts))
    return fnx.grad(loss)


@settings(max_examples=20)
@given(st.lists(st.integers(1, 5), min_size=2, max_size=4))
def test_a_split_backward_becomes_one_concatenate(sizes):
    x = fnx.randn(3, sum(sizes))
    grad = _split_grad(sizes)
    out, ops = _simplified(grad, x)
    assert ops.count("concatenate") == 1 and "pad" not in ops
    assert ops.count("add") == 1   # + 0.0: the sum of pads turns -0.0 into +0.0
    np.testing.assert_array_equal(fnx.compile(grad, backend="interpret")(x).numpy(), grad(x).numpy())


def test_signed_zeros_are_those_of_the_sum():
    def f(a, b):
        return fnx.nn.functional.pad(a * 1.5, (0, 2)) + fnx.nn.functional.pad(b * 1.5, (2, 0))

    a, b = fnx.tensor([-0.0, 1.0]), fnx.tensor([2.0, -0.0])
    assert "concatenate" in _simplified(f, a, b)[1]
    want = f(a, b).numpy()
    assert not np.signbit(want).any()   # -0.0 + 0.0 is +0.0
    for backend in ("interpret", "c"):
        got = fnx.compile(f, backend=backend)(a, b).numpy()
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
        np.testing.assert_array_equal(got, want)


def test_parts_short_of_the_ends_are_padded_once():
    def f(a, b):
        return fnx.nn.functional.pad(a, (1, 3)) + fnx.nn.functional.pad(b, (3, 0))
    a, b = fnx.randn(2, 2), fnx.randn(2, 3)
    _, ops = _simplified(f, a, b)
    assert ops == ["concatenate", "pad", "add"]
    np.testing.assert_array_equal(fnx.compile(f, backend="interpret")(a, b).numpy(), f(a, b).numpy())


def test_integer_parts_need_no_added_zero():
    def f(a, b):
        return fnx.nn.functional.pad(a, (0, 2)) + fnx.nn.functional.pad(b, (2, 0))
    a, b = fnx.tensor([[1, 2]]), fnx.tensor([[3, 4]])
    assert _simplified(f, a, b)[1] == ["concatenate"]
    np.testing.assert_array_equal(fnx.compile(f, backend="interpret")(a, b).numpy(), [[1, 2, 3, 4]])


def test_overlapping_or_gapped_pads_stay_a_sum():
    def overlap(a, b):
        return fnx.nn.functional.pad(a, (0, 1)) + fnx.nn.functional.pad(b, (1, 0))

    def gap(a, b):
        return fnx.nn.functional.pad(a, (0, 3)) + fnx.nn.functional.pad(b, (3, 0))
    a, b = fnx.randn(2, 2), fnx.randn(2, 2)
    for f in (overlap, gap):
        _, ops = _simplified(f, a, b)
        assert "concatenate" not in ops and ops.count("pad") == 2
        np.testing.assert_allclose(fnx.compile(f, backend="interpret")(a, b).numpy(), f(a, b).numpy())


def test_one_other_term_is_added_to_the_concatenate():
    """rotate_half's backward: its two halves' pads beside the rotary product's own gradient."""
    def f(a, b, c):
        return fnx.nn.functional.pad(a * 1.5, (0, 2)) + c * 2.0 + fnx.nn.functional.pad(b * 1.5, (2, 0))

    def two_others(a, b, c):
        return f(a, b, c) + c
    a, b, c = fnx.tensor([[-0.0, 1.0]]), fnx.tensor([[2.0, -0.0]]), fnx.tensor([[-0.0, 3.0, 1.0, -0.0]])
    assert _simplified(f, a, b, c)[1] == ["mul", "mul", "mul", "concatenate", "add", "add"]
    want = f(a, b, c).numpy()
    for backend in ("interpret", "c"):
        got = fnx.compile(f, backend=backend)(a, b, c).numpy()
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
        np.testing.assert_array_equal(got, want)
    assert "concatenate" not in _simplified(two_others, a, b, c)[1]   # their order would matter
