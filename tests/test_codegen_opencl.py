"""The GPU kernel shells run in every test run, without a GPU: compiled for OpenCL (the templates CUDA compiles
too, in OpenCL C) and executed on PoCL's CPU device, against eager.

Every kernel kind runs here: flat elementwise kernels (vector path and scalar rest), rows reductions (a
work-group per row), columns reductions (2-D work-groups) and split reductions (several work-groups per row,
the last combining their partials through the integer counter), the op table, fused random bits, index
checks, 64-bit index spaces, determinism. OpenCL combines partials through local memory where CUDA shuffles
within warps, in the same tree. PoCL compiles each kernel on its first launch (a second or more with LLVM's
optimisations), so the programs here are built with `-cl-opt-disable` (pyopencl's PYOPENCL_BUILD_OPTIONS) but
one (the count past 2^31), and many functions go into one compile. PoCL's kernel cache goes into the run's
FNX_CACHE_DIR.
"""
from __future__ import annotations

import functools
import re
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fnx
import fnx.nn.functional as F
from fnx.lowering import gpu_launch
from fnx.lowering import opencl as opencl_runtime
from fnx.lowering.codegen import prelude
from fnx.abstract import ShapedArray
from fnx.lowering.plan import build_executable, plan_steps
from fnx.lowering.targets import OPENCL

from op_db import as_tensor_function, chunks, stageable_ops
from numerics_measure import PRIMS, ulp_distance
from test_codegen import RNG
from test_codegen_cuda import assert_float32_primitives_within_4_ulp

pyopencl = pytest.importorskip("pyopencl", reason="the OpenCL tests need pyopencl and an OpenCL device (PoCL)")


@pytest.fixture(scope="module", autouse=True)
def pocl(kernel_cache):
    """PoCL's kernel cache in the run's cache directory (where it initialises in this process), unoptimised builds,
    and a skip where no OpenCL device is found."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("POCL_CACHE_DIR", str(kernel_cache / "pocl"))
        mp.setenv("PYOPENCL_BUILD_OPTIONS", "-cl-opt-disable")
        try:
            opencl_runtime.queue()
        except (RuntimeError, pyopencl.Error) as e:
            pytest.skip(f"no OpenCL device: {e}")
        yield mp


def opencl(f, *args):
    """(executable, OpenCL outputs as numpy, eager outputs as numpy) of `f`."""
    exe = build_executable(fnx.make_jaxpr(f)(*args), backend="opencl")
    got = [t.numpy() for t in exe(*args)]
    want = f(*args)
    want = [t.detach().numpy() for t in (want if isinstance(want, (list, tuple)) else [want])]
    assert len(got) == len(want)
    return exe, got, want


def assert_matches(got, want, rtol=1e-5, atol=1e-5):
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        if w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


# ---------------------------------------------------------------- the source
def test_opencl_source_is_the_gpu_shells_in_opencl_c():
    """One template set: float32 kernels that combine no partials within blocks are CUDA's, letter for letter
    (the preludes differ); no `long long` (128 bits in OpenCL C) anywhere, so every index is 64 bits wide."""
    x = fnx.randn(64, 48)
    ocl, cuda = [], []
    for f in (lambda x: F.softmax(x, -1), lambda x: x.sum(0), lambda x: x * 2.0 + 1.0, lambda x: (x > 0).sum(1)):
        closed = fnx.make_jaxpr(f)(x)
        ocl, cuda = ocl + plan_steps(closed, "opencl")[1], cuda + plan_steps(closed, "cuda")[1]
    assert [k.mode for k in ocl] == [k.mode for k in cuda] and {k.mode for k in ocl} == {"flat", "rows", "columns"}
    unnamed = lambda k: k.source.replace(k.name, "K")
    assert all(unnamed(a) == unnamed(b) for a, b in zip(ocl, cuda) if a.mode in ("flat", "columns"))
    source = re.sub(r"/\*.*?\*/", "", prelude("opencl") + "".join(k.source for k in ocl), flags=re.S)   # code only
    assert "long long" not in source and "LL" not in source and "typedef long fnx_index;" in source
    assert "FNX_SHUFFLE_DOWN" not in source and "tree_" in source   # blocks combine through local memory


# ---------------------------------------------------------------- every kernel kind
def _kinds():
    """One function per kernel kind and variant (as tests/test_codegen_cuda.py's), and their arguments."""
    x, y, w, b = fnx.randn(64, 48), fnx.randn(64, 48), fnx.randn(48), fnx.randn(48)
    long, ints = fnx.randn((1 << 15) + 3), fnx.tensor(RNG.integers(-9, 9, 1 << 15))
    nan = fnx.randn(1 << 15)
    nan[777] = float("nan")
    gelu = lambda x: 0.5 * x * (1.0 + fnx.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))
    return {
        "flat vector f32": (gelu, long),
        "flat vector mixed dtypes": (lambda x, i: [(x > 0) & (i < 3), x.double() * i], long[:1 << 15], ints),
        "flat vector with a strided input": (lambda x: x[::2] * 2.0 + x[1::2], long[:1 << 15]),
        "flat broadcast": (lambda x, w: x * w + 1.0, x, w),
        "flat transposed": (lambda x, y: x.T * 2.0 + y.T, x, y),
        "flat sliced, with offsets": (lambda x, y: x[1:, 2::3] * 2.0 - y[:-1, :16], x, y),
        "rows softmax": (lambda x: F.softmax(x, -1), x),
        "rows layernorm": (lambda x, w, b: F.layer_norm(x, (48,), w, b), x, w, b),
        "rows integer and bool": (lambda i: [i.reshape(64, 512).sum(1), (i > 0).reshape(64, 512).any(1),
                                             i.reshape(64, 512).amax(1)], ints),
        "columns sum": (lambda x: x.sum(0), x),
        "columns logsumexp with NaN tracking": (lambda x: fnx.logsumexp(x, 0), nan.reshape(512, 64)),
        "columns with a map": (lambda x: x - x.mean(0), x),
        "columns f64": (lambda x: x.double().amin(0), x),
        "split sum": (lambda x: x.sum(), long),
        "split max with NaN tracking": (lambda x: [x.amax() * 2.0, x.amin()], nan),
        "split bool any": (lambda x: (x > 3).any(), long),
        "split f64 and int64": (lambda x, i: [x.double().sum(), i.sum()], long, ints),
        "split sum, max and any of one vector": (lambda x: [x.sum(), x.amax(), (x > 0).any()], long),
        "split over two strided dims": (lambda x: x.permute(2, 0, 1).sum((1, 2)), fnx.randn(130, 131, 3).double()),
    }


def test_every_kernel_kind_runs_on_pocl():
    """Every kind in one executable (one program), each output against eager."""
    kinds = _kinds()
    args = [a for _, *xs in kinds.values() for a in xs]

    def every(*flat):
        it, outs = iter(flat), []
        for f, *xs in kinds.values():
            out = f(*[next(it) for _ in xs])
            outs += out if isinstance(out, list) else [out]
        return outs

    exe, got, want = opencl(every, *args)
    assert {k.mode for k in exe.kernels()} == {"flat", "rows", "columns", "split"}
    assert any(k.aligned for k in exe.kernels()) and all(k.target == "opencl" for k in exe.kernels())
    assert_matches(got, want)
    assert sum(np.isnan(g).any() for g in got if g.dtype.kind == "f") == 3   # logsumexp's NaN column, amax, amin


# ---------------------------------------------------------------- split reductions: several blocks, the counter
@pytest.mark.parametrize("units", [2, 132])
def test_split_reductions_combine_many_blocks_through_the_counter(monkeypatch, units):
    """With 132 compute units (an H200's SMs) a long row takes more blocks than a block has threads, so the last
    block's loop over the partials runs several rounds; every call resets the counters for the next one."""
    monkeypatch.setattr(opencl_runtime, "compute_units", lambda: units)
    long = fnx.tensor(RNG.standard_normal(3 * (1 << 20) + 12))   # float64: exact enough to compare tightly
    nan = long.clone()
    nan[12345] = float("nan")
    f = lambda long, nan: [long.sum(), long.amax(), nan.amax(), nan.amin(), (long > 4.5).any(),
                           long.reshape(3, -1).sum(1), (long * 1000).long().sum()]
    exe, got, want = opencl(f, long, nan)
    split = [k for k in exe.kernels() if k.mode == "split"]
    blocks = [gpu_launch.reduction(k, units).blocks for k in split]
    assert split and min(blocks) > 1 and (units == 2 or max(blocks) > gpu_launch.THREADS)
    assert_matches(got, want, rtol=1e-10, atol=1e-9)
    assert np.isnan(got[2]) and np.isnan(got[3])
    again = [t.numpy() for t in exe(long, nan)]
    assert all(a.tobytes() == b.tobytes() for a, b in zip(got, again))


# ---------------------------------------------------------------- the op table
# runs of at most 32 ops: PoCL's CPU device crashed (SIGSEGV) running one fused kernel of 42 unrelated 0-d special
# functions that a run of 64 ops drew (the C and CUDA targets take such kernels)
@pytest.mark.parametrize("chunk", chunks(stageable_ops(), 32), ids=lambda c: c[0].name)
@settings(max_examples=1, deadline=None)
@given(data=st.data())
def test_op_table_on_pocl(chunk, data):
    """One float64 sample of every traceable op of a run of the table in one compiled function (float32
    expressions: `test_float32_elementwise_on_pocl`; PoCL's first launch of a kernel takes longer than its size
    grows)."""
    cases = []
    for info in chunk:
        op, tensors = as_tensor_function(info, data.draw(info.samples, label=info.name))
        if tensors:
            cases.append((info, op, [t.double() if t.dtype.is_floating_point else t for t in tensors]))

    def table(*flat):
        it = iter(flat)
        return [op(*[next(it) for _ in args]) for _, op, args in cases]

    flat = [a for _, _, args in cases for a in args]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # eager numpy on edge values
        got, want = fnx.compile(table, backend="opencl")(*flat), table(*flat)
    assert len(cases) > len(chunk) // 2
    for (info, _, _), g, w in zip(cases, got, want):
        for a, b in zip(fnx.tree.tree_leaves(g), fnx.tree.tree_leaves(w)):
            a, b = a.numpy(), b.detach().numpy()
            assert a.dtype == b.dtype and a.shape == b.shape, info.name
            np.testing.assert_allclose(a, b, rtol=max(info.rtol, 1e-4), atol=max(info.atol, 1e-5), err_msg=info.name)


def test_float32_elementwise_on_pocl():
    """OpenCL's float functions (PoCL: SLEEF) are within 4 ulp of numpy's, as CUDA's are."""
    assert_float32_primitives_within_4_ulp(opencl)


def test_integer_ops_are_exact():
    a = fnx.tensor(RNG.integers(-100, 100, (64, 33)).astype(np.int32))
    b = fnx.tensor(np.where(RNG.random((64, 33)) < 0.2, 0, RNG.integers(-9, 9, (64, 33))).astype(np.int32))
    big = fnx.tensor(RNG.integers(-2 ** 62, 2 ** 62, 1000))

    def f(a, b, big):
        return [a * b - a, PRIMS["rem"].bind(a, b), PRIMS["floordiv"].bind(a, b), fnx.maximum(a, b), a < b,
                a.sum(1), a.amax(0), (a > 0).any(1), big + (1 << 40), big.amin(), big.amax() - (-2 ** 63)]

    with np.errstate(all="ignore"):
        _, got, want = opencl(f, a, b, big)
    assert_matches(got, want)


# ---------------------------------------------------------------- random bits, checks, 64-bit indices
def test_fused_random_bits_equal_fnx_random_byte_for_byte():
    key = fnx.random.key(7)

    def f(k):
        return [fnx.random.bits(k, (1001,)) + 1, fnx.random.uniform(k, (33, 31)) * 2.0,
                fnx.random.uniform(k, (77,), dtype=fnx.float64) - 0.5, fnx.random.normal(k, (513,))]

    exe, got, want = opencl(f, key)
    assert any("random" in k.kernel.ops[0] for k in exe.kernels())
    for g, w in zip(got[:3], want[:3]):
        assert g.tobytes() == w.tobytes()
    assert ulp_distance(got[3], want[3]) <= 4   # uniforms through log1p, sqrt and cos: OpenCL's float functions


def test_an_index_out_of_range_raises_eager_mode_error():
    logits = fnx.tensor(RNG.standard_normal((3, 4)).astype(np.float32))
    f = fnx.compile(lambda t: F.cross_entropy(logits, t), backend="opencl")
    np.testing.assert_allclose(f(fnx.tensor([0, 1, 2])).numpy(), F.cross_entropy(logits, fnx.tensor([0, 1, 2])).numpy(),
                               rtol=1e-6)
    with pytest.raises(IndexError, match="cross_entropy: Target 4 is out of bounds"):
        f(fnx.tensor([0, 4, 2]))
    np.testing.assert_allclose(f(fnx.tensor([3, 1, 2])).numpy(), F.cross_entropy(logits, fnx.tensor([3, 1, 2])).numpy(),
                               rtol=1e-6)   # the flag was cleared


def test_more_than_2_31_elements(monkeypatch):
    """A count of 2^31 + 77 elements (one broadcast value: a stride-0 input, one byte in memory), which a 32-bit
    loop index would wrap; built with LLVM's optimisations, as a user's kernels are (unoptimised, PoCL takes ten
    times longer to run it)."""
    monkeypatch.delenv("PYOPENCL_BUILD_OPTIONS")
    one, n = fnx.ones(1, dtype=fnx.int8), (1 << 31) + 77
    exe = build_executable(fnx.make_jaxpr(lambda one: one.expand(n).long().sum())(one), backend="opencl")
    assert [k.mode for k in exe.kernels()] == ["split"] and exe(one)[0].item() == n   # (eager would take 16 GB)


# ---------------------------------------------------------------- determinism, donation, workloads
def test_deterministic_mode_is_bit_identical_across_calls_and_compiles():
    fnx.use_deterministic_algorithms(True)
    try:
        x = fnx.randn(300, 2048)
        f = lambda x: [x.sum(-1), F.softmax(x, -1), x.sum(), x.sum(0), x.reshape(-1).sum(), fnx.logsumexp(x, 0)]
        first = [t.numpy().tobytes() for t in fnx.compile(f, backend="opencl")(x)]
        for _ in range(2):
            again = fnx.compile(lambda x: f(x), backend="opencl")(x)   # a new trace and new launchers
            assert [t.numpy().tobytes() for t in again] == first
    finally:
        fnx.use_deterministic_algorithms(False)


def test_a_donated_input_receives_the_output():
    """The launcher copies the result into the buffer the driver lends it (the donated input's)."""
    step = fnx.compile(lambda p, g: p - 0.1 * g, backend="opencl", donate_argnums=0)
    p, g = fnx.randn(64, 48), fnx.randn(64, 48)
    want, address = p.numpy() - np.float32(0.1) * g.numpy(), p.data_ptr()
    out = step(p, g)
    assert out.data_ptr() == address
    np.testing.assert_array_equal(out.numpy(), want)


def test_w2_w4():
    """tanh-GELU (W2), softmax (W3) and layernorm (W4), smaller than the benchmarks'."""
    gelu = lambda x: 0.5 * x * (1.0 + fnx.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))
    x, w, b = fnx.randn(256, 1024), fnx.randn(1024), fnx.randn(1024)
    flat = fnx.randn((1 << 18) + 3)
    for f, args in [(gelu, (flat,)), (lambda x: F.softmax(x, -1), (x,)),
                    (lambda x, w, b: F.layer_norm(x, (1024,), w, b), (x, w, b))]:
        got = fnx.compile(f, backend="opencl")(*args)
        np.testing.assert_allclose(got.numpy(), f(*args).numpy(), rtol=2e-5, atol=2e-5)


def test_without_pyopencl_the_backend_says_what_to_install(monkeypatch):
    def missing():
        raise ModuleNotFoundError("No module named 'pyopencl'", name="pyopencl")

    monkeypatch.setattr(opencl_runtime, "queue", missing)
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'fnx\[opencl\]'"):
        fnx.compile(lambda x: x * 2.0, backend="opencl")(fnx.ones(3))


def test_gpu_tensors_are_refused_with_the_fix():
    kernels = plan_steps(fnx.make_jaxpr(lambda x: x * 2.0)(fnx.ones(3)), OPENCL)[1]
    v = kernels[0].kernel.inputs[0]
    v.aval = ShapedArray(v.aval.shape, v.aval.dtype, fnx.device("cuda"))
    with pytest.raises(NotImplementedError, match=r"runs on CPU tensors .* got cuda tensors; move them with .cpu\(\)"):
        OPENCL.build(kernels, functools.partial(prelude, OPENCL))
