"""Generated CUDA kernels on a GPU against CPU eager: elementwise, reductions, row kernels, determinism.

Every test is marked `cuda` and skips unless CuPy sees a GPU (tests/conftest.py). CUDA's float32
functions are within 1-2 ulp of the exact result and numpy's within 1-3, so float32 transcendentals are
compared within 4 ulp; everything else as on the CPU.
"""
from __future__ import annotations

import numpy as np
import pytest

import fnx
import fnx.nn.functional as F
from fnx.lowering.plan import build_executable

from test_codegen import BINARY, PRIMS, RNG, UNARY, _inputs, ulp_distance
from test_codegen import kernel_cache  # noqa: F401  (the shared kernel cache fixture)

pytestmark = pytest.mark.cuda


def on_gpu(f, *args):
    """(executable, GPU outputs as numpy, CPU eager outputs as numpy) of `f`."""
    gpu_args = [a.to("cuda") for a in args]
    exe = build_executable(fnx.make_jaxpr(f)(*gpu_args), backend="cuda")
    got = [t.cpu().numpy() for t in exe(*gpu_args)]
    want = f(*args)
    want = [t.detach().numpy() for t in (want if isinstance(want, (list, tuple)) else [want])]
    return exe, got, want


def test_float32_elementwise_on_gpu():
    xs = [_inputs(*r) for r in UNARY.values()]
    pairs = [(_inputs(*r), _inputs(*r)) for r in BINARY.values()]

    def f(*args):
        it = iter(args)
        return [PRIMS[k].bind(next(it)) for k in UNARY] + [PRIMS[k].bind(next(it), next(it)) for k in BINARY]

    with np.errstate(all="ignore"):
        exe, got, want = on_gpu(f, *xs, *[t for p in pairs for t in p])
    assert len(exe.kernels()) == 1 and exe.kernels()[0].target == "cuda"
    for name, g, w in zip(list(UNARY) + list(BINARY), got, want):
        if w.dtype == np.bool_:
            np.testing.assert_array_equal(g, w, err_msg=name)
        else:
            assert ulp_distance(g, w) <= 4, name


def test_integer_ops_on_gpu_are_exact():
    a = fnx.tensor(RNG.integers(-100, 100, (64, 33)).astype(np.int32))
    b = fnx.tensor(np.where(RNG.random((64, 33)) < 0.2, 0, RNG.integers(-9, 9, (64, 33))).astype(np.int32))

    def f(a, b):
        return [a * b - a, PRIMS["rem"].bind(a, b), PRIMS["floordiv"].bind(a, b), fnx.maximum(a, b), a < b,
                a.sum(1), a.amax(0), (a > 0).any(1)]

    with np.errstate(all="ignore"):
        _, got, want = on_gpu(f, a, b)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_reductions_and_row_kernels_on_gpu():
    x, w, b = fnx.randn(300, 1000), fnx.randn(1000), fnx.randn(1000)

    def f(x, w, b):
        return [F.softmax(x, -1), F.layer_norm(x, (1000,), w, b), fnx.logsumexp(x, 0), x.sum(), x.amax((0, 1)),
                F.gelu(x, approximate="tanh"), x.T * 2.0 + x.mean()]

    exe, got, want = on_gpu(f, x, w, b)
    for g, e in zip(got, want):
        np.testing.assert_allclose(g, e, rtol=2e-5, atol=2e-4)


def test_gpu_kernels_are_deterministic():
    x = fnx.randn(512, 4096).to("cuda")
    exe = build_executable(fnx.make_jaxpr(lambda x: [x.sum(-1), F.softmax(x, -1), x.sum()])(x), backend="cuda")
    first, second = exe(x), exe(x)
    for a, b in zip(first, second):
        assert a.cpu().numpy().tobytes() == b.cpu().numpy().tobytes()


def test_gpu_library_steps_and_views():
    x, w = fnx.randn(64, 32), fnx.randn(32, 16)
    _, got, want = on_gpu(lambda x, w: [F.relu(x @ w + 1.0), x[1:, ::2].exp(), fnx.sort(x, -1).values], x, w)
    for g, e in zip(got, want):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)
