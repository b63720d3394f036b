"""Code generation (fnx/lowering: fusion, codegen, cpu): fused C kernels against eager, kernel counts, the cache.

Executables are built straight from `make_jaxpr` with `build_executable(closed, backend="c")`. Compiled
kernels go to one disk cache shared by the whole session (and by the xdist workers), so each distinct
kernel compiles once; the tests pack many ops into one jaxpr to keep that number small.
"""
from __future__ import annotations

import ctypes
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import fnx
import fnx.nn.functional as F
from fnx.core import Primitive
from fnx.lowering import cpu
from fnx.lowering.fusion import Kernel
from fnx.lowering.plan import build_executable, plan_steps
from fnx.ops import elementwise as E
from numerics_measure import BINARY, PRIMS, UNARY, float32_inputs, primitive_errors, rounded, ulp_distance

RNG = np.random.default_rng(0)


def compiled(f, *args):
    """(executable, its outputs, eager outputs) of `f` on `args`."""
    exe = build_executable(fnx.make_jaxpr(f)(*args), backend="c")
    got = exe(*args)
    want = f(*args)
    return exe, got, list(want) if isinstance(want, (list, tuple)) else [want]


def uniform(lo, hi, n=4096, dtype=np.float32):
    return fnx.tensor(RNG.uniform(lo, hi, n).astype(dtype))


# ---------------------------------------------------------------- float32 elementwise: bounds against float64
# Each compiled float32 primitive, per element, in ulps from its float64 result rounded to float32
# (numerics_measure.primitive_errors; `python -m benchmarks.numerics_report` prints the figures of a machine,
# eager's too). The bounds hold on any CPU, whatever its vector width or libmvec:
#   0: eager's bits. Exact operations, or one correctly rounded IEEE operation (or a fixed sequence of them:
#      rem, floordiv, integer_pow's multiplications), which every CPU rounds alike; kernels are built without
#      FMA contraction.
#   1: computed in double precision (glibc's libm or libmvec, a few double ulps from exact) and rounded once,
#      so one of the two floats around the exact value; exp is fnx's own expf, within 1 ulp of exact on every
#      float (test_float32_exp_is_faithful_over_its_whole_range).
#   2: sigmoid, fnx's expf then 1 / (1 + e) or e / (1 + e): two more roundings, the same bits on every CPU.
#   3: tanh, glibc's float32 tanhf: 2 ulp as a scalar call and in libmvec's x86-64 variants (glibc's
#      libm-test-ulps); aarch64's Advanced SIMD variant is documented at 2.58.
#   4, 5: gelu's derivative and gelu itself, fnx's own float32 forms (templates/gelu_math.h.j2): measured at 4 and
#      5 on every 97th float of |x| < 13 (2 for 99.9% of them), the same bits on every CPU; gelu_backward, the
#      derivative times the cotangent, adds a rounding. gelu_tanh (3) and its derivative (5, gelu_tanh_backward
#      too): fnx's float32 forms of the tanh formula, measured on every 97th float of |x| < 16 (test_eager_kernels).
# Eager float32 is numpy's and not bounded here: its SIMD functions are 1-3 ulp off, depending on the CPU.
ULP_BOUNDS = {"neg": 0, "sqrt": 0, "abs": 0, "sign": 0, "floor": 0, "ceil": 0, "round": 0, "trunc": 0, "isnan": 0,
              "rsqrt": 0, "rsqrt_backward": 0, "not": 0, "relu": 0, "add": 0, "sub": 0, "mul": 0, "div": 0,
              "max": 0, "min": 0, "rem": 0, "floordiv": 0, "relu_backward": 0, "eq": 0, "ne": 0, "lt": 0, "le": 0,
              "gt": 0, "ge": 0, "integer_pow": 0, "clamp": 0, "fmod": 0, "tanh_backward": 0, "sigmoid_backward": 0,
              "exp": 1, "exp2": 1, "expm1": 1, "log": 1, "log2": 1, "log10": 1, "log1p": 1, "sin": 1, "cos": 1,
              "tan": 1, "sinh": 1, "cosh": 1, "asin": 1, "acos": 1, "atan": 1, "asinh": 1, "acosh": 1,
              "atanh": 1, "erf": 1, "erfc": 1, "pow": 1,
              "atan2": 1, "pow_scalar": 1, "logit": 1, "lgamma": 1, "digamma": 1, "erfinv": 1, "softplus": 1,
              "sigmoid": 2, "silu": 3, "tanh": 3, "gelu_tanh": 3,
              "gelu_deriv": 4, "gelu": 5, "gelu_backward": 5, "silu_backward": 5, "gelu_tanh_deriv": 5,
              "gelu_tanh_backward": 5, "signbit": 0, "frexp_exponent": 0}


def _inputs(lo, hi):
    return fnx.tensor(float32_inputs(RNG, lo, hi))


def test_every_elementwise_primitive_declares_its_c_expression():
    """Each primitive defined in ops/elementwise.py is elementwise, and every primitive that a kernel computes
    per element declares a C expression for some operand classes and its number of operands; every float32 one
    is sampled against its bound."""
    defined = {p.name for p in vars(E).values() if isinstance(p, Primitive)}
    assert defined <= set(PRIMS)
    for name, p in Primitive.registry.items():
        if p.groups & {"elementwise", "random", "check"}:
            assert p.c and set(p.c) <= set("fdib"), name
        if "elementwise" in p.groups:
            assert len(p.groups & {"unary", "binary", "ternary"}) == 1, name
    # nextafter's float64 result is another function's (the float64 neighbour): checked bitwise below instead
    float_ops = {name for name, p in PRIMS.items() if "f" in p.c} - {"select", "convert", "nextafter"}
    assert float_ops == set(UNARY) | set(BINARY) == set(ULP_BOUNDS)


def test_float32_nextafter_gives_numpys_bits():
    x = np.concatenate([RNG.uniform(-5, 5, 512), [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 3.4028235e38,
                                                   1.0, 1.0]]).astype(np.float32)
    y = np.concatenate([RNG.uniform(-5, 5, 512), [-1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0, np.inf, 1.0, np.nan]])
    y = y.astype(np.float32)
    exe = build_executable(fnx.make_jaxpr(fnx.nextafter)(fnx.tensor(x), fnx.tensor(y)), backend="c")
    got = exe(fnx.tensor(x), fnx.tensor(y))[0].numpy()
    with np.errstate(over="ignore"):
        want = np.nextafter(x, y)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)   # NaN payloads may differ
    np.testing.assert_array_equal(got[~nan].view(np.int32), want[~nan].view(np.int32))


def test_a_declaration_lowering_cannot_use_fails_at_definition():
    for kwargs, message in [({"groups": ("elementwise", "unary")}, "declares its C expression"),
                            ({"groups": ("elementwize",)}, "unknown groups"),
                            ({"groups": ("reduction",)}, "declares its monoid"),
                            ({"groups": ("elementwise", "unary"), "c": {"f": "{0}"}, "cuda": {"d": "{0}"}}, "cuda="),
                            ({"groups": ("movement",)}, "already declared")]:
        name = "exp" if message == "already declared" else "made_up"
        with pytest.raises(ValueError, match=message):
            Primitive(name, **kwargs)
    assert "made_up" not in Primitive.registry


def test_float32_elementwise_within_bounds_of_float64():
    errors, kernels = primitive_errors()
    assert kernels == 1   # everything fuses into one kernel over the common shape
    assert set(errors) == set(ULP_BOUNDS)
    not_eager = [name for name, e in errors.items() if ULP_BOUNDS[name] == 0 and not e.bitwise]
    assert not not_eager, f"not eager's bits: {not_eager}"
    over = {name: (e.compiled, ULP_BOUNDS[name]) for name, e in errors.items()
            if ULP_BOUNDS[name] and e.compiled > ULP_BOUNDS[name]}
    assert not over, f"ulp from float64 above the bound: {over}"


def test_float32_exp_is_faithful_over_its_whole_range():
    """fnx's own vectorised expf, subnormal results and overflow included (numpy is 3 ulp off down there), and the
    inputs whose exp rounds to 0 (masked scores: -inf), which it gives without an underflowing product."""
    x = np.concatenate([RNG.uniform(-104.5, 89.5, 1 << 18), [-103.97, -87.33, 88.72, 88.73, -104.0, -104.01, -1e30,
                                                             -np.inf, np.inf, -np.finfo(np.float32).max, np.nan]])
    x = x.astype(np.float32)
    exe = build_executable(fnx.make_jaxpr(fnx.exp)(fnx.tensor(x)), backend="c")
    got = exe(fnx.tensor(x))[0].numpy()
    with np.errstate(over="ignore"):
        assert ulp_distance(got[:-1], rounded(np.exp(x[:-1].astype(np.float64)))) <= 1
    assert np.all(got[x <= -104.0] == 0) and np.isnan(got[-1])


def test_float64_elementwise_match_eager():
    names = ["exp", "log", "tanh", "sin", "erf", "sigmoid", "expm1", "log1p", "atan", "sqrt"]
    xs = [uniform(0.1, 3.0, 512, np.float64) for _ in names]
    y = uniform(0.5, 2.0, 512, np.float64)

    def f(*args):
        outs = [PRIMS[k].bind(a) for k, a in zip(names, args[:-1])]
        return outs + [PRIMS["pow"].bind(args[0], args[-1]), PRIMS["rem"].bind(args[1], args[-1]),
                       PRIMS["floordiv"].bind(args[2], args[-1])]

    _, got, want = compiled(f, *xs, y)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=4e-15, atol=0)


def test_integer_and_bool_elementwise_are_exact():
    a32 = fnx.tensor(RNG.integers(-100, 100, (6, 7)).astype(np.int32))
    b32 = fnx.tensor(np.where(np.arange(42).reshape(6, 7) % 5 == 0, 0, RNG.integers(-9, 9, (6, 7))).astype(np.int32))
    i8 = fnx.tensor(RNG.integers(-128, 128, (6, 7)).astype(np.int8))
    u8 = fnx.tensor(RNG.integers(0, 256, (6, 7)).astype(np.uint8))
    i64 = fnx.tensor(np.array([[-2 ** 63, 2 ** 63 - 1, -7, 7, 0, 5, -5]] * 6, dtype=np.int64))
    m64 = fnx.tensor(np.array([[-1, -1, 2, -2, 3, 0, 4]] * 6, dtype=np.int64))
    p, q = fnx.tensor(RNG.random((6, 7)) > 0.5), fnx.tensor(RNG.random((6, 7)) > 0.5)

    def f(a, b, c, u, x, m, p, q):
        return [a + b, a - b, a * b, PRIMS["rem"].bind(a, b), PRIMS["floordiv"].bind(a, b), fnx.maximum(a, b),
                fnx.minimum(a, b), -a, fnx.abs(a), fnx.sign(a), a < b, a == b, c + c, c * c, -c, fnx.abs(c), u + u,
                -u, u * u, PRIMS["floordiv"].bind(x, m), PRIMS["rem"].bind(x, m), x + x, p & q, p | q, p ^ q, ~p,
                p + q, p * q, fnx.where(p, a, b), a.float() * 0.5, (a.float() * 0.37).int(), a.bool(),
                fnx.maximum(p, q), x.double()]

    with np.errstate(all="ignore"):
        exe, got, want = compiled(f, a32, b32, i8, u8, i64, m64, p, q)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype, i
        np.testing.assert_array_equal(g.numpy(), w.numpy(), err_msg=f"output {i}")


def test_broadcasting_shapes_fuse_into_index_arithmetic():
    a, b, c, d, s = (fnx.randn(4, 5, 6), fnx.randn(5, 1), fnx.randn(6), fnx.randn(4, 1, 6), fnx.randn(()))

    def f(a, b, c, d, s):
        return [a + b, a * c - d, fnx.where(a > d, b, s), (b * c).exp(), a * s + 1.0, b - c]

    exe, got, want = compiled(f, a, b, c, d, s)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6, atol=1e-6)
    assert len(exe.kernels()) == 2   # outputs of one shape share a kernel: (4, 5, 6) and (5, 6)


def test_shape_ops_become_views_inside_kernels():
    x, y = fnx.randn(5, 6), fnx.randn(6, 5)

    def f(x, y):
        return [x.T * y, x[1:, ::2] * 2.0, x.flip(0) - x, (x.reshape(3, 10) + 1.0).reshape(30),
                x.unsqueeze(0).expand(2, 5, 6) * x, x.permute(1, 0).exp() + y]

    exe, got, want = compiled(f, x, y)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6, atol=1e-6)
    steps, _ = plan_steps(fnx.make_jaxpr(f)(x, y), "c")
    assert all(isinstance(s, Kernel) for s in steps)   # no copy or transpose runs as a library step


def test_non_contiguous_arguments():
    x = fnx.randn(6, 5)
    exe = build_executable(fnx.make_jaxpr(lambda a: a * 2.0 + 1.0)(x.T), backend="c")
    np.testing.assert_allclose(exe(x.T)[0].numpy(), x.T.numpy() * 2 + 1, rtol=1e-6)


# ---------------------------------------------------------------- reductions
def test_reductions_over_any_axes():
    x, xi = fnx.randn(6, 7, 300), fnx.tensor(RNG.integers(-50, 50, (6, 7, 8)))

    def f(x, xi):
        return [x.sum(-1), x.sum(), x.sum(1), x.sum((0, 2), keepdim=True), x.amax(-1), x.amax((0, 1)),
                x.amin(1, keepdim=True), x.amin(), xi.sum(1), xi.amax(-1), (x > 0).any(-1), (x > 0).all(0),
                x.double().sum(0)]

    exe, got, want = compiled(f, x, xi)
    n = {0: 300, 1: 6 * 7 * 300, 2: 7, 3: 6 * 300}
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape and g.dtype == w.dtype
        if g.dtype == fnx.float32 and i in n:   # a different summation order: error grows with the length
            bound = n[i] * 2 ** -24 * np.abs(x.numpy()).max()
            np.testing.assert_allclose(g.numpy(), w.numpy(), atol=bound, rtol=0)
        else:
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-12)


def test_max_and_min_propagate_nan():
    x = fnx.randn(4, 40)
    x._value[1, 7] = np.nan
    x._value[3, 0] = np.nan
    _, got, want = compiled(lambda x: [x.amax(-1), x.amin(-1), fnx.maximum(x, 0.0)], x)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w.numpy())


def test_long_rows_are_accurate_and_deterministic():
    """Few long rows: the blocks of a row run in parallel and combine in order (the same numbers as serially)."""
    x = fnx.tensor(RNG.uniform(0, 1, 1 << 20).astype(np.float32))
    f = lambda x: [x.sum(), F.softmax(x, 0)]
    exe = build_executable(fnx.make_jaxpr(f)(x), backend="c")
    (a, sa), (b, sb) = exe(x), exe(x)
    assert a.numpy().tobytes() == b.numpy().tobytes() and sa.numpy().tobytes() == sb.numpy().tobytes()
    exact = x.numpy().astype(np.float64).sum()
    assert abs(float(a.item()) - exact) <= 4 * 2 ** -24 * exact   # blocked summation: a few roundings, not n
    np.testing.assert_allclose(sa.numpy(), f(x)[1].numpy(), rtol=1e-5)


def _softmax_rows() -> np.ndarray:
    x = RNG.standard_normal((6, 9, 37)).astype(np.float32)
    x[1, 2, :] = -np.inf    # max -inf: a NaN row
    x[2, 3, 5] = -np.inf    # one zero
    x[3, 4, 7] = np.nan     # a NaN row
    x[4, 0, 0] = np.inf     # inf - inf: a NaN row
    return x


def _exp_spills(source: str) -> tuple[bool, bool]:
    """(exp(...) stored into an output row inside a reduction loop, a scratch row allocated)."""
    return bool(re.search(r"fnx_expf\(v\d+\);\n\s+out\d+\[[^]]+\] = v\d+;\n\s+p_v", source)), "sc_v" in source


def _row_kernels_with_exp(exe) -> list:
    """Reduction kernels computing exp row by row (not over strided dims, where lanes recompute it instead)."""
    return [k for k in exe.kernels() if k.kernel.kind == "reduce" and "fnx_expf(" in k.source
            and "FNX_LANES]" not in k.source]


def test_softmax_keeps_exp_in_its_output_row_and_scales_it_in_place():
    """exp(x - max) goes into the output row while its sum runs; the last loop divides it there (no scratch row),
    for contiguous, transposed (rows with strided cols) and broadcast inputs, reductions over one or two dims."""
    x = fnx.tensor(_softmax_rows())

    def f(x):
        xt = x.permute(0, 2, 1)
        e = (xt - xt.amax((1, 2), keepdim=True)).exp()   # over two dims that do not coalesce
        return [F.softmax(x, -1), F.softmax(x.permute(2, 1, 0), -1), F.softmax(x[:, :1].expand(6, 9, 37), -1),
                e / e.sum((1, 2), keepdim=True), F.softmax(x, -1) * 2.0 + x]

    with np.errstate(invalid="ignore"):
        exe, got, want = compiled(f, x)
        xd = x.numpy().astype(np.float64)
        e = np.exp(xd - xd.max(-1, keepdims=True))
        np.testing.assert_allclose(got[0].numpy(), e / e.sum(-1, keepdims=True), rtol=2e-6, atol=1e-7)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=2e-6, atol=1e-7)
    assert np.isnan(got[0].numpy()[[1, 3, 4], [2, 4, 0]]).all() and got[0].numpy()[2, 3, 5] == 0
    finite = np.isfinite(got[0].numpy()).all(-1)
    np.testing.assert_allclose(got[0].numpy()[finite].sum(-1), 1.0, rtol=4e-7)
    rows = _row_kernels_with_exp(exe)
    assert len(rows) >= 2 and all(_exp_spills(k.source) == (True, False) for k in rows)


def test_spilled_values_use_scratch_rows_without_an_output_of_their_type():
    """No per-element output to hold exp(x - max) (only row sums, or a bool output): a per-thread scratch row."""
    x = fnx.tensor(_softmax_rows())

    def f(x):
        e = (x - x.amax(-1, keepdim=True)).exp()
        return [e.sum(-1), (e * x).sum(-1), F.softmax(x, -1) > 0.05]

    with np.errstate(invalid="ignore"):
        exe, got, want = compiled(f, x)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=2e-6, atol=1e-7)
    rows = _row_kernels_with_exp(exe)
    assert rows and all(_exp_spills(k.source) == (False, True) for k in rows)


# ---------------------------------------------------------------- fusion: kernel counts and library steps
def _kernels(f, *args):
    exe, got, want = compiled(f, *args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.detach().numpy(), rtol=2e-5, atol=1e-6)
    return exe


def test_gelu_is_one_kernel():
    assert len(_kernels(lambda x: F.gelu(x, approximate="tanh"), fnx.randn(64, 1024)).kernels()) == 1


def test_softmax_and_log_softmax_are_one_row_kernel_each():
    x = fnx.randn(64, 1024)
    assert len(_kernels(lambda x: F.softmax(x, -1), x).kernels()) <= 2
    exe = _kernels(lambda x: [F.softmax(x, -1), F.log_softmax(x, -1), fnx.logsumexp(x, -1)], x)
    assert len(exe.kernels()) == 1 and exe.kernels()[0].kernel.kind == "reduce"


def test_layernorm_is_one_kernel():
    x, w, b = fnx.randn(64, 1024), fnx.randn(1024), fnx.randn(1024)
    assert len(_kernels(lambda x, w, b: F.layer_norm(x, (1024,), w, b), x, w, b).kernels()) <= 2


def test_matmul_stays_a_library_step():
    x, w, b = fnx.randn(8, 16), fnx.randn(16, 4), fnx.randn(4)
    closed = fnx.make_jaxpr(lambda x, w, b: F.relu(x @ w + b))(x, w, b)
    steps, kernels = plan_steps(closed, "c")
    assert [s.prim.name if not isinstance(s, Kernel) else "kernel" for s in steps] == ["matmul", "kernel"]
    _kernels(lambda x, w, b: F.relu(x @ w + b), x, w, b)


def test_backward_of_softmax_and_layernorm_fuse_and_match():
    x, y, w, b = fnx.randn(8, 16), fnx.randn(8, 16), fnx.randn(16), fnx.randn(16)
    g = fnx.grad(lambda x, w, b: (F.layer_norm(F.softmax(x, -1), (16,), w, b) * y).sum(), argnums=(0, 1, 2))
    exe = _kernels(g, x, w, b)
    assert len(exe.kernels()) <= 4


def test_library_steps_run_through_their_impl():
    x, i = fnx.randn(5, 6), fnx.tensor(np.array([3, 0, 1]))

    def f(x, i):
        s = fnx.sort(x, -1).values * 2.0
        return [s, x[i].exp(), fnx.cumsum(x, 1), fnx.cond(x.sum() > 0, lambda a: a + 1.0, lambda a: a - 1.0, x)]

    _kernels(f, x, i)


# ---------------------------------------------------------------- the executable and its kernels
def test_kernels_have_readable_names_and_their_source():
    exe = _kernels(lambda x, w, b: F.layer_norm(x, (1024,), w, b), fnx.randn(4, 1024), fnx.randn(1024),
                   fnx.randn(1024))
    (k,) = exe.kernels()
    assert re.fullmatch(r"fnx_reduce_sum_div_sub_mul_f32_[0-9a-f]{8}", k.name) and k.target == "c"
    assert k.name in k.source and k.source in exe.source() and "#pragma omp" in exe.source()
    assert "ffast-math" not in exe.source()


def test_same_kernel_is_shared_across_shapes():
    f = lambda x: (x * 2.0).tanh()
    a = build_executable(fnx.make_jaxpr(f)(fnx.randn(10)), backend="c")
    b = build_executable(fnx.make_jaxpr(f)(fnx.randn(1000)), backend="c")
    assert a.kernels()[0].name == b.kernels()[0].name   # sizes are arguments, not part of the source
    np.testing.assert_allclose(b(fnx.ones(1000))[0].numpy(), np.tanh(np.full(1000, 2.0, np.float32)))


def test_outputs_that_are_inputs_literals_or_constants():
    c = fnx.randn(3)
    closed = fnx.make_jaxpr(lambda x: [x, fnx.tensor(2.0), x * c, c])(fnx.randn(3))
    exe = build_executable(closed, backend="c")
    x = fnx.randn(3)
    out = exe(x)
    assert out[0] is not None and np.array_equal(out[0].numpy(), x.numpy()) and float(out[1].item()) == 2.0
    np.testing.assert_allclose(out[2].numpy(), x.numpy() * c.numpy())
    np.testing.assert_array_equal(out[3].numpy(), c.numpy())


def test_zero_sized_values_and_half_floats_run_as_library_steps():
    _kernels(lambda x: [x.exp() + 1.0, x.sum(-1)], fnx.randn(0, 4))
    x = fnx.randn(4, 6).half()
    f = lambda x: (x.reshape(6, 4).float() * 2.0).exp().half()   # no float16 in C: the casts run in numpy
    exe, got, want = compiled(f, x)
    assert len(exe.kernels()) == 1 and got[0].dtype == fnx.float16
    np.testing.assert_allclose(got[0].numpy().astype(np.float32), want[0].numpy().astype(np.float32), rtol=1e-3)


# ---------------------------------------------------------------- the compiler and the disk cache
def test_disk_cache_hit_in_a_fresh_process(tmp_path):
    script = textwrap.dedent("""
        import fnx, fnx.nn.functional as F
        from fnx.lowering import cpu
        from fnx.lowering.plan import build_executable
        x = fnx.ones(8, 32)
        exe = build_executable(fnx.make_jaxpr(lambda x: F.softmax(x * 3.0, -1))(x), backend="c")
        print(cpu.compile_count, float(exe(x)[0].sum().item()))
    """)
    env = {**os.environ, "FNX_CACHE_DIR": str(tmp_path)}   # its own cache: other workers write to the shared one
    run = lambda: subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                                 cwd=os.path.dirname(os.path.dirname(fnx.__file__)), check=True).stdout.split()
    run()                      # compiles (or finds) the kernel
    count, total = run()       # a fresh process: everything comes from the disk cache
    assert count == "0" and abs(float(total) - 8.0) < 1e-4
    assert not list(tmp_path.glob("*.tmp"))


def test_cache_dir_follows_xdg_when_unset(monkeypatch, tmp_path):
    from fnx.lowering.cache import cache_dir, cache_key

    monkeypatch.delenv("FNX_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "fnx" and cache_dir().is_dir()
    assert cache_key("a", "bc") != cache_key("ab", "c")


def test_no_c_compiler_raises_not_implemented(monkeypatch):
    monkeypatch.setenv("PATH", "")
    monkeypatch.delenv("CC", raising=False)
    with pytest.raises(NotImplementedError, match="no C compiler"):
        build_executable(fnx.make_jaxpr(lambda x: x + 1.0)(fnx.ones(2)), backend="c")


def test_wide_vectors_only_where_avx512_runs_at_full_clock():
    from fnx.lowering import cpu

    wide = ("-mprefer-vector-width=512",)
    assert cpu.wide_vectors({"sse4_2", "avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile"}) == wide
    assert cpu.wide_vectors({"avx2", "avx512f", "avx512_vnni"}) == ()   # Cascade Lake, Ice Lake: 256 bits
    assert cpu.wide_vectors({"avx2", "fma"}) == ()
    flags = cpu._cpu_flags()
    assert ("-mprefer-vector-width=512" in cpu._BASE_FLAGS) == (cpu._X86 and cpu.wide_vectors(flags) == wide)


def test_flags_never_include_fast_math():
    tc = cpu.toolchain()
    cmd = " ".join(tc.command(0, "k.c", "k.so"))
    assert "-O3" in cmd and "-fno-math-errno" in cmd and "fast-math" not in cmd and "-ffp-contract=off" in cmd


def test_math_helpers_are_inlined_into_long_kernels(monkeypatch, tmp_path):
    """fnx's C helpers (sigmoid, expf, ...) are always inlined: in a kernel as long as a GRU's backward over its
    time steps, gcc's growth limits once left them as calls, which kept the loop from vectorising (makemore's GRU:
    1.9 ms for that kernel instead of 0.12). The built library holds no copy of them (`nm` lists every function
    it defines)."""
    monkeypatch.setenv("FNX_CACHE_DIR", str(tmp_path))

    def gru_like(x, b, c):   # eight GRU-like steps, each step's state summed over the batch: one reduce kernel
        h, sums = x, []
        for _ in range(8):
            z, r = (h + b).sigmoid(), (h * c + b).sigmoid()
            h = z * h + (1.0 - z) * (r * h + c).tanh()
            sums.append(h.sum(0))
        return sums

    (k,) = _kernels(gru_like, fnx.randn(32, 64), fnx.randn(64), fnx.randn(64)).kernels()
    (lib,) = tmp_path.glob(f"{k.name}-*.so")
    defined = subprocess.run(["nm", "--defined-only", str(lib)], capture_output=True, text=True, check=True).stdout
    assert re.search(rf"\b{k.name}\b", defined)
    assert not re.search(r"\bfnx_(sigmoidf|expf|pow2if)\b", defined), defined


_X87_TAGS = r"""
unsigned short fnx_test_x87_tags(void)   /* the x87 tag word: 0xffff when every register is empty */
{
    unsigned short env[14];
    __asm__ volatile ("fnstenv %0\n\tfldenv %0" : "=m" (env));
    return env[4];
}
"""


def test_kernels_built_for_x86_64_v2_leave_the_x87_registers_empty(tmp_path, monkeypatch):
    """GCC 12 building for x86-64-v2 moved half of an int32 max reduction through an MMX register and never issued
    EMMS: the x87 registers stayed in use, and numpy's QR (OpenBLAS's x87 kernels on such CPUs) then gave NaN.
    Kernels are built with -mno-mmx."""
    (tmp_path / "x87.c").write_text(_X87_TAGS)
    subprocess.run([cpu.compiler(), "-shared", "-fPIC", "-O2", str(tmp_path / "x87.c"), "-o", str(tmp_path / "x87.so")],
                   check=True)
    tags = ctypes.CDLL(str(tmp_path / "x87.so")).fnx_test_x87_tags
    tags.restype = ctypes.c_ushort
    assert tags() == 0xFFFF
    monkeypatch.setenv("CC", str(Path(__file__).resolve().parents[1] / "tools" / "cc-x86-64-v2"))
    x = fnx.tensor(RNG.integers(-50, 50, (5, 23)).astype(np.int32))
    _, got, want = compiled(lambda x: x - x.amax(-1, keepdim=True), x)
    assert np.array_equal(got[0].numpy(), want[0].numpy())
    assert tags() == 0xFFFF, f"x87 tag word {tags():#06x} after a kernel"
