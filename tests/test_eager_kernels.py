"""Eager kernels (fnx/lowering/eager_kernels.py): the "native" primitives (erf, erfc, gelu, sigmoid, ...) run in
eager mode as the C kernels that compile generates for them, built once into the checked disk cache.

Eager results on large arrays equal the compiled kernels' bits and stay within the float32 ulp bounds against
float64 (binary ones too, gelu's vjps; an outer broadcast takes numpy); without a C compiler numpy's impl
runs; a damaged cached library is rebuilt; threads racing to the first call build once; the derivatives of gelu
(both forms) and silu (first and second order) match finite differences, and each vjp is one primitive; gelu's
float32 forms keep their ulp bounds where they cancel or shrink, and the tanh form's on every 97th float of |x| < 16;
float32 lgamma and digamma stay within 1 ulp on every binade and around their zeros; float32 fmod, % and //
are exact.
"""
from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

import fnx
import fnx.nn.functional as F
from fnx import core
from fnx.core import Primitive
from fnx.lowering import cpu, eager_kernels, template_library
from numerics_measure import rounded, ulp_distance
from test_codegen import ULP_BOUNDS

ROOT = Path(fnx.__file__).resolve().parent.parent
HAVE_CC = any(shutil.which(c) for c in ("cc", "gcc", "clang"))
needs_cc = pytest.mark.skipif(not HAVE_CC, reason="needs a C compiler")
NATIVE = sorted(name for name, p in Primitive.registry.items() if "native" in p.groups)
RANGES = {"logit": (1e-3, 1 - 1e-3), "erf": (-5, 5), "erfc": (-5, 10), "sigmoid": (-20, 20), "erfinv": (-1, 1)}   # else (-10, 10)
N = 3 * eager_kernels.MIN_ELEMENTS + 5   # large enough for the kernel, and no multiple of a vector width
RNG = np.random.default_rng(0)


def _inputs(name: str, dtype=np.float32, n: int = N) -> np.ndarray:
    return RNG.uniform(*RANGES.get(name, (-10, 10)), n).astype(dtype)


def _numpy_impl(prim: Primitive, *arrays: np.ndarray) -> np.ndarray:
    """The primitive's numpy impl (the hook unset)."""
    hook, core.eager_kernel_hook = core.eager_kernel_hook, None
    try:
        return prim.impl(np, *arrays)
    finally:
        core.eager_kernel_hook = hook


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """An empty kernel table (and plans and launches, which keep the kernels they ran) and disk cache: the next
    native call builds its kernel."""
    monkeypatch.setenv("FNX_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(eager_kernels, "_kernels", {})
    monkeypatch.setattr(eager_kernels, "_plans", {})
    monkeypatch.setattr(eager_kernels, "_launches", {})
    return tmp_path


def test_the_native_primitives():
    assert NATIVE == ["digamma", "erf", "erfc", "erfinv", "fmod", "gelu", "gelu_backward", "gelu_deriv",
                      "gelu_tanh", "gelu_tanh_backward", "gelu_tanh_deriv", "lgamma", "logit", "relu", "relu_backward",
                      "rem", "sigmoid", "silu", "silu_backward", "softplus"]


def _operands(name: str, dtype=np.float32) -> list[np.ndarray]:
    """The inputs of native primitive `name`: a binary one (gelu_backward) takes a cotangent first."""
    x = _inputs(name, dtype)
    return [RNG.uniform(-3, 3, x.size).astype(dtype), x] if "binary" in Primitive.registry[name].groups else [x]


@needs_cc
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", NATIVE)
def test_eager_gives_the_compiled_kernels_bits(name, dtype):
    prim = Primitive.registry[name]
    args = [fnx.tensor(a.reshape(1, N)) for a in _operands(name, dtype)]
    eager = prim.bind(*args).numpy()
    assert eager_kernels._kernels[name, np.dtype(dtype), ("flat",) * len(args), ()] is not None   # the kernel ran
    compiled = fnx.compile(prim.bind, backend="c")(*args).numpy()
    assert eager.dtype == dtype and np.array_equal(eager, compiled)


@needs_cc
@pytest.mark.parametrize("name", NATIVE)
def test_float32_within_the_ulp_bound_of_float64(name):
    args = _operands(name)
    args[-1][:5] = [0.0, -0.0, np.nan, 1e-40, -1e-40]
    if len(args) == 2:
        args[0][5:8] = [0.0, -0.0, np.inf]   # cotangents
    got = Primitive.registry[name].bind(*map(fnx.tensor, args)).numpy()
    with np.errstate(all="ignore"):
        want = rounded(_numpy_impl(Primitive.registry[name], *(a.astype(np.float64) for a in args)))
    assert ulp_distance(got, want) <= ULP_BOUNDS[name]


def test_an_outer_broadcast_of_a_binary_native_primitive_takes_numpy(fresh):
    g, x = RNG.uniform(-3, 3, (3, 1)).astype(np.float32), _inputs("gelu").reshape(1, -1)
    got = fnx.ops.elementwise.gelu_backward_p.bind(fnx.tensor(g), fnx.tensor(x)).numpy()
    assert eager_kernels._kernels == {}
    assert np.array_equal(got, _numpy_impl(fnx.ops.elementwise.gelu_backward_p, g, x))


def test_small_and_odd_arrays_take_numpy_or_a_contiguous_copy(fresh):
    small = _inputs("erf", n=eager_kernels.EXPENSIVE_MIN_ELEMENTS - 1)
    assert np.array_equal(fnx.erf(fnx.tensor(small)).numpy(), _numpy_impl(fnx.ops.elementwise.erf_p, small))
    cheap = _inputs("relu", n=eager_kernels.MIN_ELEMENTS - 1)   # relu: native, but numpy's maximum is fast
    assert np.array_equal(F.relu(fnx.tensor(cheap)).numpy(), np.maximum(cheap, 0))
    assert eager_kernels._kernels == {}
    half = fnx.tensor(_inputs("erf", np.float16))
    assert fnx.erf(half).dtype == fnx.float16 and eager_kernels._kernels == {}
    if HAVE_CC:
        x = fnx.tensor(_inputs("gelu").reshape(-1, 1)).expand(-1, 3).T   # a strided view
        assert not x.is_contiguous()
        assert np.array_equal(F.gelu(x).numpy(), F.gelu(x.contiguous()).numpy())


@needs_cc
@pytest.mark.parametrize("name", ["sigmoid", "erf", "gelu"])
def test_expensive_native_primitives_take_their_kernel_on_small_arrays(fresh, name):
    """Well below MIN_ELEMENTS (numpy's passes or polynomials cost more than a kernel call at any size): an
    LSTMCell's gates over a batch of 97 x 20 run as kernels, as in compiled code."""
    prim = getattr(fnx.ops.elementwise, f"{name}_p")
    x = _inputs(name, n=97 * 20)
    got = prim.bind(fnx.tensor(x)).numpy()
    assert [key[0] for key in eager_kernels._kernels] == [name]
    assert ulp_distance(got, _numpy_impl(prim, x)) <= ULP_BOUNDS[name]


def test_without_a_compiler_numpy_runs(fresh, monkeypatch):
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("PATH", str(fresh))   # no cc, gcc or clang
    before = cpu.compile_count
    x = _inputs("erf")
    assert np.array_equal(fnx.erf(fnx.tensor(x)).numpy(), _numpy_impl(fnx.ops.elementwise.erf_p, x))
    assert eager_kernels._kernels == {("erf", np.dtype(np.float32), ("flat",), ()): None}
    assert cpu.compile_count == before
    y = fnx.tensor(x.astype(np.float64), requires_grad=True)
    F.gelu(y, approximate="tanh").sum().backward()
    assert y.grad is not None
    tried = [k for k in eager_kernels._kernels if k[:2] == ("gelu_tanh_backward", np.dtype(np.float64))]
    assert tried and all(eager_kernels._kernels[k] is None for k in tried)


@needs_cc
def test_an_activations_first_kernel_starts_its_backwards(fresh, monkeypatch):
    """gelu's first eager kernel starts gelu_backward's on a thread, which the backward finds built."""
    monkeypatch.setattr(eager_kernels, "_key_locks", {})
    x = fnx.tensor(_inputs("gelu"), requires_grad=True)
    y = F.gelu(x)
    template_library._finish_builds()
    key = ("gelu_backward", np.dtype(np.float32), ("flat", "flat"), ())
    assert eager_kernels._kernels[key] is not None
    g = _inputs("gelu")
    before = cpu.compile_count
    y.backward(fnx.tensor(g))
    assert cpu.compile_count == before
    np.testing.assert_allclose(x.grad.numpy(), _numpy_impl(Primitive.registry["gelu_backward"], g,
                                                           x.detach().numpy()), rtol=1e-5)


@needs_cc
def test_threads_racing_to_the_first_call_build_once(fresh):
    x = fnx.tensor(_inputs("erfc"))
    barrier, results = threading.Barrier(4), [None] * 4

    def call(i):
        barrier.wait()
        results[i] = fnx.erfc(x).numpy()

    before = cpu.compile_count
    threads = [threading.Thread(target=call, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cpu.compile_count == before + 1
    assert all(np.array_equal(r, results[0]) for r in results)
    fnx.erfc(x)
    assert cpu.compile_count == before + 1   # built once: later calls never reach the compiler


def _run_python(script: str, cache_folder: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "FNX_CACHE_DIR": str(cache_folder), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, env=env,
                          cwd=ROOT)


@needs_cc
def test_a_damaged_cached_kernel_is_rebuilt_not_loaded(tmp_path):
    """In a subprocess: loading a damaged library could crash (SIGBUS) instead of failing."""
    script = """
        import fnx
        from fnx.lowering import cpu
        out = fnx.erf(fnx.linspace(-3.0, 3.0, 4097))
        print(cpu.compile_count, round(float(out.sum().item()), 3))
    """
    assert _run_python(script, tmp_path).stdout.split() == ["2", "0.0"]   # the kernel and fnx's thread pool
    (library,) = tmp_path.glob("fnx_*erf*.so")
    good = library.read_bytes()
    for damage in (good[:len(good) // 2], good[:-1] + bytes([good[-1] ^ 0xFF])):
        library.write_bytes(damage)
        run = _run_python(script, tmp_path)
        assert run.returncode == 0, run.stderr
        assert run.stdout.split() == ["1", "0.0"]   # rebuilt
    assert _run_python(script, tmp_path).stdout.split() == ["0", "0.0"]   # and then loaded from the cache


ACTIVATIONS = {"gelu": F.gelu, "gelu_tanh": lambda v: F.gelu(v, approximate="tanh"), "silu": F.silu}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_derivatives_match_finite_differences(name):
    """Elementwise, so one central difference per element gives the derivative; float64, on arrays large enough
    for the kernels (where there is a compiler)."""
    x = RNG.uniform(-6, 6, N)
    x[:4] = [0.0, -0.7518, 1e-3, -1.2785]
    h = 1e-5
    f = ACTIVATIONS[name]
    first = lambda v: fnx.grad(lambda u: f(u).sum())(v)
    second = fnx.grad(lambda u: first(u).sum())
    t, plus, minus = fnx.tensor(x), fnx.tensor(x + h), fnx.tensor(x - h)
    np.testing.assert_allclose(first(t).numpy(), (f(plus) - f(minus)).numpy() / (2 * h), rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(second(t).numpy(), (first(plus) - first(minus)).numpy() / (2 * h), rtol=1e-6,
                               atol=1e-8)
    leaf = fnx.tensor(x, requires_grad=True)
    (g,) = fnx.autograd.grad(f(leaf).sum(), leaf, create_graph=True)
    g.sum().backward()
    np.testing.assert_allclose(leaf.grad.numpy(), second(t).numpy(), rtol=1e-12, atol=1e-15)


def _float32_errors(prim: Primitive, x: np.ndarray) -> int:
    """The worst distance in ulps of float32 `prim` on `x` from float64's result rounded to float32."""
    got = prim.bind(fnx.tensor(x)).numpy()
    with np.errstate(all="ignore"):
        want = rounded(_numpy_impl(prim, x.astype(np.float64)))
    return ulp_distance(got, want)


@needs_cc
@pytest.mark.parametrize("name, tail", [("gelu", -12.9), ("gelu_deriv", -12.9), ("gelu_tanh", -10.9),
                                        ("gelu_tanh_deriv", -10.9)])
def test_float32_gelu_within_its_bound_near_the_root_of_the_derivative_and_in_the_tail(name, tail):
    """Dense float32 inputs where a float form would lose relative accuracy: around gelu's minimum at
    x = -0.7518 (-0.7525 for the tanh form), where the derivative crosses 0 (its root is factored out), and the
    tail, where the results shrink to 1e-37 (exp(-x^2 / 2) corrected for the rounding of x^2; the tanh form's
    exponent carried in two floats) and, for the tanh form, to subnormals."""
    x = np.concatenate([np.linspace(-0.80, -0.70, N), np.linspace(tail, -3.0, N)]).astype(np.float32)
    assert _float32_errors(Primitive.registry[name], x) <= ULP_BOUNDS[name]


@needs_cc
@pytest.mark.parametrize("name, limit, step", [("gelu_tanh", 16.0, 97), ("gelu_tanh_deriv", 16.0, 97),
                                               ("softplus", 128.0, 97), ("erfinv", 1.0, 997)])
def test_float32_within_the_bound_on_every_nth_float(name, limit, step):
    """The tanh form of gelu's float32 value and derivative, softplus (fnx_softplusf's own exp and log1p) and
    erfinv (fnx_erfinvf's fitted polynomials), on every 97th float of |x| < limit, both signs (22-23 million, in
    slices), every 997th for erfinv (2 million: its float64 reference is the slow part): every binade, from
    subnormal inputs to results that underflow (softplus: exp(x) far below 1, and x itself above 17) or, for
    erfinv, reach 3.8 next to 1."""
    magnitudes = np.arange(0, np.float32(limit).view(np.int32), step, dtype=np.int32).view(np.float32)
    prim = Primitive.registry[name]
    for part in np.array_split(magnitudes, 8):
        assert _float32_errors(prim, np.concatenate([part, -part])) <= ULP_BOUNDS[name]


@needs_cc
def test_float32_lgamma_within_one_ulp_on_every_binade_and_around_its_zeros():
    """fnx_lgammaf (double without branches: Stirling's series, Taylor series at the zeros 1 and 2, the
    reflection left of 1/2) on every 4099th float of either sign, and dense where lgamma crosses 0 (1, 2, and
    -2.457 and -2.748 left of 0): within 1 ulp of math.lgamma rounded once, +0 at 1 and 2, +inf at the poles."""
    magnitudes = np.arange(0, np.float32(np.inf).view(np.int32), 4099, dtype=np.int32).view(np.float32)
    zeros = np.concatenate([np.linspace(c - 0.2, c + 0.2, 4001) for c in (1.0, 2.0, -2.4570247, -2.7476826)])
    edges = [1.0, 2.0, 0.0, -0.0, -3.0, np.inf, -np.inf]
    x = np.concatenate([magnitudes, -magnitudes, zeros, edges]).astype(np.float32)
    got = fnx.lgamma(fnx.tensor(x)).numpy()
    assert eager_kernels._kernels["lgamma", np.dtype(np.float32), ("flat",), ()] is not None
    poles = lambda v: math.isinf(v) or (v <= 0 and v.is_integer())
    want = np.array([math.inf if poles(v) else math.lgamma(v) for v in x.astype(float).tolist()])
    with np.errstate(over="ignore"):
        assert ulp_distance(got, want.astype(np.float32)) <= 1
    assert got[-7:].tolist() == [0.0, 0.0] + [math.inf] * 5 and not np.signbit(got[-7:-5]).any()


@needs_cc
def test_float32_digamma_within_one_ulp_of_the_double_form_and_its_poles():
    """fnx_digammaf (double without branches: the shift's sum as one fraction, the asymptotic series, a Taylor
    series about the zero 1.4616, the reflection left of 1/2) on every 4099th float of either sign and dense
    around its zeros: within 1 ulp of the double form (fnx_digamma, glibc's log) rounded once; -inf at 0, NaN at
    the negative integers and -inf, +inf at +inf."""
    magnitudes = np.arange(0, np.float32(np.inf).view(np.int32), 4099, dtype=np.int32).view(np.float32)
    zeros = np.concatenate([np.linspace(c - 0.2, c + 0.2, 4001) for c in (1.4616321, -0.5040830, -1.5734633)])
    x = np.concatenate([magnitudes, -magnitudes, zeros]).astype(np.float32)
    got = fnx.digamma(fnx.tensor(x)).numpy()
    assert eager_kernels._kernels["digamma", np.dtype(np.float32), ("flat",), ()] is not None
    with np.errstate(over="ignore"):
        assert ulp_distance(got, fnx.digamma(fnx.tensor(x.astype(np.float64))).numpy().astype(np.float32)) <= 1
    edges = np.resize(np.array([0.0, -0.0, -1.0, -7.0, -np.inf, np.inf], np.float32), N)   # a kernel's size
    special = fnx.digamma(fnx.tensor(edges)).numpy()[:6]
    assert special[:2].tolist() == [-math.inf] * 2 and np.isnan(special[2:5]).all() and special[5] == math.inf


@needs_cc
def test_float32_fmod_remainder_and_floor_division_are_exact():
    """fnx_fmodf (|x| - n |y| in double for quotients below 2^29, libm's fmodf beyond) gives numpy's bits on
    random bit patterns (every exponent, so both paths), on x one ulp either side of a multiple of y (remainders
    next to 0 and to |y|) and on zeros, infinities and NaN; `%` and `//` go through it too."""
    bits = RNG.integers(0, 2 ** 32, (2, 50000), dtype=np.uint64).astype(np.uint32).view(np.float32)
    y = RNG.integers(1, 1000, 50000).astype(np.float32) / np.float32(7)
    multiples = (RNG.integers(0, 100000, 50000) * y).astype(np.float32)
    near = np.concatenate([np.nextafter(multiples, np.float32(0)), np.nextafter(multiples, np.float32(np.inf))])
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -3.5, 1e-45, 3e38], np.float32)
    x = np.concatenate([bits[0], near, np.repeat(specials, specials.size)])
    d = np.concatenate([bits[1], y, y, np.tile(specials, specials.size)])
    a, b = fnx.tensor(x), fnx.tensor(d)
    with np.errstate(all="ignore"):
        for got, want in [(fnx.fmod(a, b), np.fmod(x, d)), (a % b, np.remainder(x, d)),
                          (a // b, np.floor_divide(x, d))]:
            got = got.numpy()
            same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
            assert same.all(), (x[~same][:5], d[~same][:5], got[~same][:5], want[~same][:5])
    assert eager_kernels._kernels["fmod", np.dtype(np.float32), ("flat", "flat"), ()] is not None


@needs_cc
def test_float32_silu_backward_within_its_bound_near_the_root_of_the_derivative():
    """silu'(x) crosses 0 at x = -1.2785, where float32's 1 + x sigmoid(-x) would cancel: the root factored out
    within 0.5 of it, dense inputs around it and across the band's edges."""
    x = np.concatenate([np.linspace(-1.29, -1.27, N), np.linspace(-1.85, -0.7, N)]).astype(np.float32)
    g = RNG.uniform(-3, 3, x.size).astype(np.float32)
    got = fnx.ops.elementwise.silu_backward_p.bind(fnx.tensor(g), fnx.tensor(x)).numpy()
    assert eager_kernels._kernels["silu_backward", np.dtype(np.float32), ("flat", "flat"), ()] is not None
    want = rounded(_numpy_impl(fnx.ops.elementwise.silu_backward_p, g.astype(np.float64), x.astype(np.float64)))
    assert ulp_distance(got, want) <= ULP_BOUNDS["silu_backward"]


def test_activation_vjps_are_one_primitive_each():
    """The backward of gelu (both forms), silu, tanh and sigmoid binds its backward primitive (g, x or out) once:
    one pass, no product with the derivative."""
    activations = {**ACTIVATIONS, "tanh": fnx.tanh, "sigmoid": fnx.sigmoid}
    for name, backward in [("gelu", "gelu_backward"), ("gelu_tanh", "gelu_tanh_backward"),
                           ("silu", "silu_backward"), ("tanh", "tanh_backward"), ("sigmoid", "sigmoid_backward")]:
        jaxpr = fnx.make_jaxpr(fnx.grad(lambda v: activations[name](v).sum()))(fnx.ones(5))
        prims = [eqn.prim.name for eqn in jaxpr.jaxpr.eqns]
        assert prims.count(backward) == 1 and "mul" not in prims, prims


@needs_cc
def test_layouts_that_no_kernel_takes_are_declined_at_once(fresh, monkeypatch):
    """A call of two large operands that no kernel takes (every other column of a matrix times a full operand:
    numpy's strided loop) is kept as declined by its layouts: later calls on those layouts return None at once,
    without planning again, and the op's values are numpy's."""
    mul = Primitive.registry["mul"]
    x = RNG.standard_normal((64, 2048)).astype(np.float32)[:, ::2]
    y = RNG.standard_normal((64, 1024)).astype(np.float32)
    assert eager_kernels.run(mul, x, y) is None
    assert eager_kernels._launches[(mul, x.shape, x.strides, x.dtype, y.shape, y.strides, y.dtype,
                                    eager_kernels.team_size.value > 1)] is eager_kernels._DECLINED

    def planned(*args, **kwargs):
        raise AssertionError("a declined layout was planned again")

    monkeypatch.setattr(eager_kernels, "_run_elementwise", planned)
    monkeypatch.setattr(eager_kernels.strided_kernels, "launch", planned)
    x2 = RNG.standard_normal((64, 2048)).astype(np.float32)[:, ::2]   # new values, the same layouts
    assert eager_kernels.run(mul, x2, y) is None
    assert np.array_equal((fnx.from_numpy(x2) * fnx.from_numpy(y)).numpy(), x2 * y)


@needs_cc
def test_a_plan_that_kept_its_launch_computes_each_new_call(fresh):
    """A plan keeps its kernel and meta block after its first call (no params), and contiguous operands' layouts
    their launch (`_launches`); later calls on new operands (one operand, two of one shape, a row broadcast either
    side, one array as both operands, a strided operand, which the kept launch copies first) give the bits of a
    first call's path."""
    sigmoid, gelu_backward = Primitive.registry["sigmoid"], Primitive.registry["gelu_backward"]
    cases = [(sigmoid, [(N,)]), (gelu_backward, [(4, N), (4, N)]), (gelu_backward, [(4, N), (N,)]),
             (gelu_backward, [(N,), (4, N)])]
    for prim, shapes in cases:
        for _ in range(3):
            arrays = [RNG.uniform(-4, 4, s).astype(np.float32) for s in shapes]
            kept = eager_kernels._plans, eager_kernels._launches
            eager_kernels._plans, eager_kernels._launches = {}, {}   # a plan of its own: a first call's path
            try:
                want = eager_kernels.run(prim, *arrays)
            finally:
                eager_kernels._plans, eager_kernels._launches = kept
            got = eager_kernels.run(prim, *arrays)
            assert want is not None and np.array_equal(got, want)
        assert any(plan and plan[-1] for plan in eager_kernels._plans.values())
        assert any(key[0] is prim for key in eager_kernels._launches)   # the later calls' first look
    x = RNG.uniform(-4, 4, (4, N)).astype(np.float32)
    want = _numpy_impl(gelu_backward, x, x)
    for _ in range(2):
        assert ulp_distance(eager_kernels.run(gelu_backward, x, x), want) <= ULP_BOUNDS["gelu_backward"]
    for _ in range(3):   # new values each call: the launch reads each call's operand
        strided = RNG.uniform(-4, 4, (2 * N,)).astype(np.float32)[::2]
        assert np.array_equal(eager_kernels.run(sigmoid, strided), eager_kernels.run(sigmoid, strided.copy()))
    key = next(k for k in eager_kernels._plans if k[0] is sigmoid and k[5] == strided.strides)
    assert eager_kernels._plans[key][-1][0][-1]   # kept, and copies first
