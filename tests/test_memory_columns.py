"""Compiled convolutions that run the composite take their im2col columns in blocks of samples
(fnx/lowering/column_blocks.py): a compiled training step's values and gradients equal eager mode's, its plan holds
no array of the batch's columns, and equations that do not match the pattern are left alone. fnx.compile binds the
convolution primitives where they run (fnx/nn/functional_conv.py); these tests trace the composite wherever it may
run (fewer output channels than the primitives take, half floats, no C loops)."""
import contextlib
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import fnx
import fnx.nn.functional as F
from fnx.lowering import column_blocks
from fnx.lowering.column_blocks import block_columns
from fnx.lowering.fusion import Kernel
from fnx.lowering.plan import plan_steps
from fnx.nn import functional_conv
from fnx.ops import conv as eager_conv
from fnx.transforms.compile import _split

_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_BLOCKED = {"columns_product", "columns_product_t", "product_col2im"}


@contextlib.contextmanager
def _block_bytes(n: int):
    saved, column_blocks.BLOCK_BYTES = column_blocks.BLOCK_BYTES, n
    try:
        yield
    finally:
        column_blocks.BLOCK_BYTES = saved


@contextlib.contextmanager
def _composite():
    """Convolutions traced by fnx.compile as the composite, as where the primitives do not run."""
    saved = functional_conv._primitives_bind
    functional_conv._primitives_bind = lambda: not fnx.core.state.transforms_active
    try:
        yield
    finally:
        functional_conv._primitives_bind = saved


@st.composite
def _cases(draw):
    nd = draw(st.integers(1, 3))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    dilation = tuple(draw(st.integers(1, 2)) for _ in range(nd))
    side = 12 if nd < 3 else 5
    spatial = tuple(d * (k - 1) + 1 + draw(st.integers(0, side)) for k, d in zip(kernel, dilation))
    return dict(nd=nd, x=(draw(st.integers(4, 9)), draw(st.sampled_from([1, 3, 8]))) + spatial,
                w=(draw(st.integers(2, 5)), None) + kernel, dilation=dilation,
                stride=tuple(draw(st.integers(1, 2)) for _ in range(nd)),
                padding=tuple(draw(st.integers(0, 1)) for _ in range(nd)), groups=draw(st.sampled_from([1, 1, 2])),
                bias=draw(st.booleans()), block=draw(st.sampled_from([1, 3000, 1 << 20])),
                dtype=draw(st.sampled_from([np.float32, np.float64])))


def _loss(case):
    f = _CONV[case["nd"]]
    params = {k: case[k] for k in ("stride", "padding", "dilation", "groups")}
    return lambda x, w, b: (f(x, w, b, **params) ** 2).sum()


def _inputs(case):
    rng = np.random.default_rng(0)
    n, c = case["x"][:2]
    c *= case["groups"]
    w = (case["w"][0] * case["groups"], c // case["groups"]) + case["w"][2:]
    values = [rng.standard_normal(shape) for shape in ((n, c) + case["x"][2:], w, w[:1])]
    return [fnx.tensor(v.astype(case["dtype"])) for v in values]


def _step_names(closed) -> set[str]:
    return {s.prim.name for s in plan_steps(closed, "c")[0] if not isinstance(s, Kernel)}


@settings(max_examples=20, deadline=None)
@given(_cases())
def test_compiled_gradients_match_eager(case):
    """value_and_grad over input, weight and bias (the three products with columns) under fnx.compile equals eager
    mode, over one block or many, for every window geometry; ungrouped convolutions of many blocks run blocked."""
    x, w, b = _inputs(case)
    step = fnx.value_and_grad(_loss(case), argnums=(0, 1, 2))
    want_loss, want = step(x, w, b)
    with _block_bytes(case["block"]), _composite():
        compiled = fnx.compile(step)
        got_loss, got = compiled(x, w, b)
        names = _step_names(compiled.lower(x, w, b).jaxpr)
    tol = 2e-5 if case["dtype"] == np.float32 else 1e-11
    scale = float(np.abs(want_loss.numpy()))
    np.testing.assert_allclose(got_loss.numpy(), want_loss.numpy(), rtol=tol)
    for g, e in zip(got, want):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=tol, atol=tol * max(1.0, scale))
    if case["groups"] == 1 and case["block"] == 1:   # one sample per block: always at least MIN_BLOCKS
        assert _BLOCKED <= names and not names & {"im2col", "col2im"}
    if case["groups"] == 2:   # grouped columns are 3-D: left as they were
        assert not names & _BLOCKED


def _largest(closed) -> int:
    """The most elements of one array that a step of the C plan of `closed` makes."""
    return max(math.prod(v.aval.shape) for s in plan_steps(closed, "c")[0]
               for v in (s.outputs if isinstance(s, Kernel) else s.outvars))


def test_training_step_plan_holds_no_batch_columns(monkeypatch):
    """A compiled CNN training step (conv, relu, conv, loss; gradients of both weights and the first layer's
    output): no step of its plan makes an array as large as the second convolution's columns for the batch, which
    the plan holds with the rewrite turned off (FNX_CONV_BLOCKS=0)."""
    rng = np.random.default_rng(1)
    x = fnx.tensor(rng.standard_normal((64, 1, 12, 12)).astype(np.float32))
    w1 = fnx.tensor(rng.standard_normal((16, 1, 3, 3)).astype(np.float32))
    w2 = fnx.tensor(rng.standard_normal((32, 16, 3, 3)).astype(np.float32))

    def loss(w1, w2):
        return (F.conv2d(fnx.relu(F.conv2d(x, w1)), w2) ** 2).mean()

    with _composite():
        closed = fnx.compile(fnx.value_and_grad(loss, argnums=(0, 1))).lower(w1, w2).jaxpr
    columns = 64 * 16 * 9 * 8 * 8   # (N, C*K, P) of the second convolution
    with _block_bytes(1 << 16):
        assert _largest(closed) < columns
        monkeypatch.setattr(eager_conv, "ENABLED", False)
        assert block_columns(closed.jaxpr) is closed.jaxpr
        assert _largest(closed) == columns


def test_a_compiled_forward_saves_the_input_not_its_columns():
    """fnx.compile's split backward (eager backward of a compiled function) recomputes im2col from the saved input
    (fnx/lowering/remat.py) instead of saving the K times larger columns, and its gradient equals eager mode's."""
    rng = np.random.default_rng(2)
    x = fnx.tensor(rng.standard_normal((8, 4, 10, 10)).astype(np.float32), requires_grad=True)
    w = fnx.tensor(rng.standard_normal((6, 4, 3, 3)).astype(np.float32), requires_grad=True)
    f = fnx.compile(lambda x, w: (F.conv2d(x, w) ** 2).sum())
    with _block_bytes(1):
        f(x, w).backward()
    got, x.grad, w.grad = (x.grad, w.grad), None, None
    (F.conv2d(x, w) ** 2).sum().backward()
    for g, e in zip(got, (x.grad, w.grad)):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=2e-5, atol=2e-5 * float(np.abs(e.numpy()).max()))
    fwd, bwd = _split(f._latest().closed, (True, True))
    saved = [v for v in fwd.jaxpr.outvars[1:] if v not in set(fwd.jaxpr.invars)]
    assert sum(math.prod(v.aval.shape) for v in saved) < 8 * 4 * 9 * 8 * 8   # less than the columns
    assert "im2col" in {e.prim.name for e in bwd.jaxpr.eqns}
