"""Compiled (C backend) and eager numerics of the composite nn-style functions, against float64, within bounds
that hold on any CPU.

tests/test_codegen.py bounds single float32 elementwise primitives and tests/test_compile.py the op table;
this file does the same for compositions. Each function of numerics_measure.COMPOSITES runs compiled and
eager on float32 inputs (hypothesis draws shapes, scales up to 1e4 and mostly-negative or mostly-positive
rows), and eager in float64 on the same values as the reference. Two measures of error, `ulp` for
elementwise-shaped results and `rel` for reductions, matmuls and gradients (see
numerics_measure.scaled_ulp_error and relative_error). `python -m benchmarks.numerics_report` prints a
machine's figures.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from numerics_measure import COMPOSITES, composite_errors

# Bounds on the worst error against float64 as (compiled, eager), in float32 ulps ("ulp") or as a relative
# error ("rel"; float32's eps is 1.19e-7). They hold on any CPU: they were checked over 10-600 derandomized
# draws per function with compiled kernels of 16, 8 and 4 float lanes (AVX-512, AVX2 and SSE builds), with
# and without libmvec, and eager numpy dispatching to AVX-512, AVX2 or SSE4, and they are about twice the
# worst measured, or the worst case of the summation order where that is larger. The summation order is
# what moves: a compiled row sum adds n / lanes values in each vector lane, then the lanes one by one
# (n / lanes + lanes roundings in a row: 20 for rows of 64 with 4 or 16 lanes), numpy adds pairwise (11),
# and on rows of near-equal values those roundings all point the same way. Softmax divides every element by
# that sum: up to 20 + 5 ulps compiled (measured 21 with 4 lanes, 10 with 16), 11 + 5 eager; the log of the
# sum in log_softmax, logsumexp and cross entropy shrinks it. A wrong kernel (an element missed, an overflow,
# a lost max-subtraction) is off by orders of magnitude more.
COMPOSITE_BOUNDS = {
    "gelu": (2, 2),
    "gelu_tanh": (3, 3),
    "softmax": (25, 16),
    "log_softmax": (6, 4),
    "layer_norm": (8, 4),
    "logsumexp": (5e-7, 3e-7),
    "cross_entropy": (5e-7, 4e-7),
    "cross_entropy_label_smoothing": (5e-7, 6e-7),
    "mlp_forward": (1e-6, 1e-6),
    "mlp_value_and_grad": (3e-6, 3e-6),
}


def test_bounds_cover_every_composite():
    assert set(COMPOSITE_BOUNDS) == set(COMPOSITES)
    assert {c.metric for c in COMPOSITES.values()} == {"ulp", "rel"}


@pytest.mark.parametrize("name", sorted(COMPOSITES))
@settings(max_examples=10)
@given(data=st.data())
def test_compiled_and_eager_composite_within_bounds_of_float64(name, data):
    args = data.draw(COMPOSITES[name].samples)
    with np.errstate(all="ignore"):
        measured = composite_errors(name, args)
    bounds = COMPOSITE_BOUNDS[name]
    assert all(m <= b for m, b in zip(measured, bounds)), f"{name}: measured {measured}, bounds {bounds}"
