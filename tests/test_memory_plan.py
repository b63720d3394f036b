"""The working set of a compiled plan (fnx/lowering/plan.py `working_set`), which the C heap keeps between calls
(fnx/_heap.py): an array counts until its last read and the last read of every view of it."""
import numpy as np

import fnx
from fnx.lowering.plan import plan_steps, working_set


def test_a_view_keeps_its_base_in_the_working_set():
    """exp(x) is a kernel's output that a library reshape views; the product reads the view, so exp(x) is alive
    when the product's result is made: both count."""
    x, w = fnx.tensor(np.ones((64, 64), np.float32)), fnx.tensor(np.ones((128, 32), np.float32))
    closed = fnx.compile(lambda x, w: fnx.exp(x).reshape(32, 128) @ w).lower(x, w).jaxpr
    steps = plan_steps(closed, "c")[0]
    assert any(getattr(s, "prim", None) is not None and s.prim.name == "reshape" for s in steps)
    assert working_set(closed, steps) == (64 * 64 + 32 * 32) * 4
