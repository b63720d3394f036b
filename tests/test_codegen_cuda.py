"""Generated CUDA kernels: every kernel kind compile-checked with nvcc, the launcher checked against a stand-in
for CuPy, and (tests marked `cuda`) the kernels run on a GPU against CPU eager.

The kernel kinds (`GeneratedKernel.mode`): "flat" elementwise kernels (a vector path of 16-byte loads and
stores when the index space is one contiguous dim, else unravelled per element), "rows" reductions (one block
per row), "columns" reductions over strided dims (2-D blocks, threads across contiguous rows) and "split"
reductions (few long rows: several blocks per row, the last one combines). Without a GPU the nvcc checks and
the launcher checks run; the `cuda` tests skip unless CuPy sees a GPU (tests/conftest.py). CUDA's float32
functions are within 1-2 ulp of the exact result and numpy's within 1-3, so float32 transcendentals are
compared within 4 ulp; everything else as on the CPU.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fnx
import fnx.nn.functional as F
from fnx.lowering import cuda as cuda_backend
from fnx.lowering.codegen import prelude, render_module
from fnx.lowering.gpu_launch import VECTOR
from fnx.lowering.plan import build_executable, plan_steps

from op_db import as_tensor_function, chunks, stageable_ops
from numerics_measure import BINARY, PARAMS, PRIMS, UNARY, ulp_distance
from test_codegen import RNG, ULP_BOUNDS

cuda = pytest.mark.cuda
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
H200_SMS = 132


def kernels_of(f, *args) -> list:
    return plan_steps(fnx.make_jaxpr(f)(*args), "cuda")[1]


def one_kernel(f, *args):
    (gk,) = kernels_of(f, *args)
    return gk


def _kinds() -> dict:
    """One small function per kernel kind (and variant), traced on CPU tensors: name -> generated kernels."""
    x, y, w, b = fnx.randn(64, 48), fnx.randn(64, 48), fnx.randn(48), fnx.randn(48)
    long, ints = fnx.randn(1 << 15), fnx.tensor(RNG.integers(-9, 9, 1 << 15))
    gelu = lambda x: 0.5 * x * (1.0 + fnx.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))
    return {
        "flat vector f32": kernels_of(gelu, long),
        "flat vector mixed dtypes": kernels_of(lambda x, i: [(x > 0) & (i < 3), x.double() * i], long, ints),
        "flat vector with a strided input": kernels_of(lambda x: x[::2] * 2.0 + x[1::2], long),
        "flat broadcast": kernels_of(lambda x, w: x * w + 1.0, x, w),
        "flat transposed": kernels_of(lambda x, y: x.T * 2.0 + y.T, x, y),
        "rows softmax": kernels_of(lambda x: F.softmax(x, -1), x),
        "rows layernorm": kernels_of(lambda x, w, b: F.layer_norm(x, (48,), w, b), x, w, b),
        "rows integer and bool": kernels_of(lambda i: [i.reshape(64, 512).sum(1), (i > 0).reshape(64, 512).any(1),
                                                       i.reshape(64, 512).amax(1)], ints),
        "columns sum": kernels_of(lambda x: x.sum(0), x),
        "columns logsumexp with NaN tracking": kernels_of(lambda x: fnx.logsumexp(x, 0), x),
        "columns with a map": kernels_of(lambda x: x - x.mean(0), x),
        "columns f64": kernels_of(lambda x: x.double().amin(0), x),
        "split sum": kernels_of(lambda x: x.sum(), long),
        "split max with NaN tracking": kernels_of(lambda x: x.amax() * 2.0, long),
        "split bool any": kernels_of(lambda x: (x > 3).any(), long),
        "split f64 and int64": kernels_of(lambda x, i: [x.double().sum(), i.sum()], long, ints),
        "split sum, max and any of one vector": kernels_of(lambda x: [x.sum(), x.amax(), (x > 0).any()], long),
    }


def test_every_kernel_kind_is_generated():
    kinds = _kinds()
    modes = {name: {k.mode for k in ks} for name, ks in kinds.items()}
    assert {m for ms in modes.values() for m in ms} == {"flat", "rows", "columns", "split"}
    for name, ms in modes.items():
        assert ms == {name.split()[0]}, (name, ms)
    vector = [k for name, ks in kinds.items() if name.startswith("flat vector") for k in ks]
    assert vector and all(k.aligned and "FNX_VEC4(" in k.source and "nvec" in k.source for k in vector)
    assert all(not k.aligned and "FNX_VEC4" not in k.source for k in kinds["flat broadcast"] + kinds["flat transposed"])
    (strided,) = kinds["flat vector with a strided input"]
    assert strided.source.count("*(FNX_GLOBAL const FNX_VEC4") == 0   # both inputs are strided: scalar loads
    assert strided.source.count("*(FNX_GLOBAL FNX_VEC4(float) *)(out0 + i)") == 1


def _nvcc(source: str, tmp_path) -> str:
    """PTX of `source` for sm_90 (an H100/H200); nvcc warnings are errors."""
    cu, ptx = tmp_path / "kernels.cu", tmp_path / "kernels.ptx"
    cu.write_text(source)
    r = subprocess.run(["nvcc", "-arch=sm_90", "--ptx", "-Werror", "all-warnings", str(cu), "-o", str(ptx)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-4000:]
    return ptx.read_text()


def _ptx_of(ptx: str, name: str) -> str:
    start = ptx.index(f".entry {name}(")
    end = ptx.find(".entry ", start + 1)
    return ptx[start:end if end > 0 else len(ptx)]


@needs_nvcc
def test_every_kernel_kind_compiles_with_nvcc(tmp_path):
    kinds = _kinds()
    ptx = _nvcc(render_module([k for ks in kinds.values() for k in ks], "cuda"), tmp_path)
    body = lambda name: _ptx_of(ptx, kinds[name][0].name)
    assert "ld.global.nc.v4.f32" in body("flat vector f32") and "st.global.v4.f32" in body("flat vector f32")
    mixed = body("flat vector mixed dtypes")   # int64 and double vectors: two 16-byte accesses each
    assert all(op in mixed for op in ("ld.global.nc.v2.u64", "st.global.v2.f64", "st.global.v4.u8"))
    assert "v4.f32" not in body("flat broadcast")
    for name in ("rows softmax", "split sum"):
        assert "shfl.sync.down" in body(name) and "bar.sync" in body(name)
    assert "atom.global.add.u32" in body("split sum") and "membar.gl" in body("split sum")
    assert "atom." not in body("rows softmax") and "atom." not in body("columns sum")   # no atomics elsewhere
    assert "shfl" not in body("columns sum") and "bar.sync" in body("columns sum")


@needs_nvcc
@pytest.mark.parametrize("chunk", chunks(stageable_ops()), ids=lambda c: c[0].name)
@settings(max_examples=1, deadline=None)
@given(data=st.data())
def test_op_table_cuda_source_compiles_with_nvcc(tmp_path_factory, chunk, data):
    """One sample of every traceable op of the table, float32 and float64: a run of ops' kernels in one unit."""
    kernels = []
    for info in chunk:
        sample = data.draw(info.samples, label=info.name)
        op, tensors = as_tensor_function(info, sample)
        for dtype in ("float32", "float64"):
            args = [t.to(getattr(fnx, dtype)) if t.dtype.is_floating_point else t for t in tensors]
            kernels += plan_steps(fnx.make_jaxpr(op)(*args), "cuda")[1]
    assert len({k.name for k in kernels}) > len(chunk) // 4
    _nvcc(render_module(kernels, "cuda"), tmp_path_factory.mktemp("op_table"))


def test_indexing_is_64_bit_everywhere():
    """More than 2^31 elements (a zero-stride numpy view: nothing allocated): sizes travel as 64-bit metas and
    every index, offset and stride in the source is an `fnx_index` (the prelude's 64-bit integer)."""
    n = 3 << 30
    x = fnx.from_numpy(np.broadcast_to(np.float32(1), (n,)))
    kernels = kernels_of(lambda x: [x * 2.0 + 1.0], x) + kernels_of(lambda x: x.sum(), x) \
        + kernels_of(lambda x: x.reshape(3, 1 << 30).sum(0), x) + kernels_of(lambda x: x.reshape(1 << 30, 3).sum(1), x)
    assert {k.mode for k in kernels} == {"flat", "split", "columns", "rows"}
    for k in kernels:
        assert max(k.meta) >= 1 << 30 and "fnx_index" in k.source
        declared = re.findall(r"\b(int|unsigned|unsigned int|short|size_t)\s+(\w+)\s*[=;]", k.source)
        allowed = {"lane", "warp", "warps", "leader", "last", "active", "o", "e", "z", "x", "y"}
        assert {name for _, name in declared} <= allowed | \
            {name for _, name in declared if name.startswith(("pnan_", "nan_"))}, declared
        assert not re.search(r"\bint\s+\w+\s*=\s*(FNX_BLOCK|FNX_GRID|rows|cols|total|n\d)", k.source)
        for loop in re.findall(r"for \((\w+(?: \w+)?) (\w+) = ", k.source):
            assert loop[0] in ("fnx_index", "int") and (loop[0] == "fnx_index" or loop[1] in ("o", "e", "z"))
    assert "(fnx_index)FNX_BLOCK_X * FNX_BLOCK_DIM_X + FNX_THREAD_X" in kernels[0].source
    assert "typedef long long fnx_index;" in prelude("cuda")


# ---------------------------------------------------------------- the launcher, against a stand-in for CuPy
class _FakeArray:
    def __init__(self, shape, dtype, ptr: int):
        self.shape, self.dtype, self.data = tuple(np.atleast_1d(shape)), np.dtype(dtype), SimpleNamespace(ptr=ptr)


class _FakeCupy:
    """What cuda.launcher uses of CuPy: the device's SM count and 256-byte aligned allocations."""

    uint32 = np.uint32

    def __init__(self, sms: int = H200_SMS):
        self.cuda = SimpleNamespace(Device=lambda: SimpleNamespace(attributes={"MultiProcessorCount": sms}))
        self.address = 1 << 20

    def empty(self, shape, dtype):
        a = _FakeArray(shape, dtype, self.address)
        self.address += -(-max(1, int(np.prod(a.shape)) * a.dtype.itemsize) // 256) * 256 + 256
        return a

    zeros = empty

    def input(self, shape, dtype=np.float32, misalign: int = 0) -> _FakeArray:
        a = self.empty(shape, dtype)
        a.data.ptr += misalign
        return a


class _Kernel:
    def __init__(self):
        self.calls = []

    def __call__(self, grid, block, args):
        self.calls.append((grid, block, args))


@pytest.fixture
def fake_cupy(monkeypatch):
    fake = _FakeCupy()
    monkeypatch.setattr(cuda_backend, "_cupy", lambda: fake)
    return fake


def launch(gk, fake, *inputs):
    """(grid, block, args) of one launch of `gk` through the real launcher."""
    fn = _Kernel()
    run = cuda_backend.launcher(SimpleNamespace(get_function=lambda name: fn), gk)
    outs = run(*inputs)
    assert len(outs) == len(gk.kernel.outputs)
    (call,) = fn.calls
    return call


def parameters(gk) -> list[str]:
    head = re.search(rf"FNX_KERNEL {gk.name}\((.*?)\)\n{{", gk.source, re.S).group(1)
    return [p.strip() for p in head.split(",")]


def assert_arguments_match(gk, args) -> None:
    """Every pointer parameter gets an array and every `long long` a numpy.int64, in order (raw kernels check
    nothing: a wrong count or type silently computes garbage)."""
    params = parameters(gk)
    assert len(params) == len(args), (params, args)
    for p, a in zip(params, args):
        if "*" in p:
            assert isinstance(a, _FakeArray), (p, a)
        else:
            assert p.startswith("const fnx_index ") and type(a) is np.int64, (p, a)


def test_launcher_vector_path_follows_alignment(fake_cupy):
    n = (1 << 24) + 3
    x = fnx.from_numpy(np.broadcast_to(np.float32(1), (n,)))
    gk = one_kernel(lambda x: 0.5 * x * (1.0 + fnx.tanh(x)), x)
    grid, block, args = launch(gk, fake_cupy, fake_cupy.input((n,)))
    assert_arguments_match(gk, args)
    assert block == (256,) and args[-2:] == (n, n // VECTOR)
    assert grid == (min(-(-(n // VECTOR + 1) // 256), H200_SMS * 32),)
    grid, _, args = launch(gk, fake_cupy, fake_cupy.input((n,), misalign=4))   # a view one float in
    assert args[-2:] == (n, 0) and grid == (H200_SMS * 32,)
    small = one_kernel(lambda x: x * 2.0, fnx.ones(10))
    grid, _, args = launch(small, fake_cupy, fake_cupy.input((10,)))
    assert grid == (1,) and args[-2:] == (10, 2)


def test_launcher_arguments_of_every_kind(fake_cupy):
    for name, ks in _kinds().items():
        for gk in ks:
            ins = [fake_cupy.input(tuple(v.aval.shape), v.aval.dtype.np) for v in gk.kernel.inputs]
            grid, block, args = launch(gk, fake_cupy, *ins)
            assert_arguments_match(gk, args)
            rows = int(np.prod(gk.kernel.sizes[:gk.kernel.n_rows]))
            if gk.mode == "rows":
                assert grid == (rows,) and block == (256,), name
            elif gk.mode == "columns":
                assert grid == (-(-rows // 32),) and block == (32, 8), name
            elif gk.mode == "split":
                blocks = grid[0]
                assert grid == (blocks, rows) and block == (256,) and 1 < blocks <= H200_SMS * 8, name
                *partials, arrived = args[-1 - len(gk.kernel.phases):]
                for p, phase in zip(partials, gk.kernel.phases):
                    assert p.shape == (rows * blocks,) and p.dtype == phase.dtype.np
                assert arrived.shape == (rows,) and arrived.dtype == np.uint32


def test_launcher_fixes_grids_and_workspaces_once(fake_cupy):
    gk = one_kernel(lambda x: x.sum(), fnx.randn(1 << 15))
    fn = _Kernel()
    run = cuda_backend.launcher(SimpleNamespace(get_function=lambda name: fn), gk)
    x = fake_cupy.input((1 << 15,))
    run(x)
    run(x)
    (g1, b1, a1), (g2, b2, a2) = fn.calls
    assert g1 is g2 and b1 is b2 and a1[-2] is a2[-2] and a1[-1] is a2[-1]   # the same workspace every call


# ---------------------------------------------------------------- on a GPU
def on_gpu(f, *args):
    """(executable, GPU outputs as numpy, CPU eager outputs as numpy) of `f`."""
    gpu_args = [a.to("cuda") for a in args]
    exe = build_executable(fnx.make_jaxpr(f)(*gpu_args), backend="cuda")
    got = [t.cpu().numpy() for t in exe(*gpu_args)]
    want = f(*args)
    want = [t.detach().numpy() for t in (want if isinstance(want, (list, tuple)) else [want])]
    return exe, got, want


def assert_float32_primitives_within_4_ulp(run) -> None:
    """Every float32 elementwise primitive of the ulp tables in one function, run by `run(f, *args)` -> (executable,
    outputs, eager outputs): one kernel, each result within 4 ulp of eager's (bool results equal), or of the
    primitive's own float32 bound where that is larger (fnx's forms of gelu and silu: 5). Inputs of their own
    seed: the same whatever ran before in the worker."""
    rng = np.random.default_rng(1)
    inputs = lambda lo, hi: fnx.tensor(rng.uniform(lo, hi, 4096).astype(np.float32))
    xs = [inputs(*r) for r in UNARY.values()]
    pairs = [(inputs(*r), inputs(*r)) for r in BINARY.values()]

    def f(*args):
        it = iter(args)
        return ([PRIMS[k].bind(next(it), **PARAMS.get(k, {})) for k in UNARY]
                + [PRIMS[k].bind(next(it), next(it)) for k in BINARY])

    with np.errstate(all="ignore"):
        exe, got, want = run(f, *xs, *[t for p in pairs for t in p])
    assert len(exe.kernels()) == 1
    for name, g, w in zip(list(UNARY) + list(BINARY), got, want):
        if w.dtype == np.bool_:
            np.testing.assert_array_equal(g, w, err_msg=name)
        else:
            assert ulp_distance(g, w) <= max(4, ULP_BOUNDS[name]), name


@cuda
def test_float32_elementwise_on_gpu():
    assert_float32_primitives_within_4_ulp(on_gpu)


@cuda
def test_vector_and_scalar_paths_agree_on_gpu():
    x = fnx.randn((1 << 20) + 7)
    f = lambda x: [0.5 * x * (1.0 + fnx.tanh(0.7978845608 * (x + 0.044715 * x * x * x))), x > 0.5]
    _, got, want = on_gpu(f, x)
    np.testing.assert_allclose(got[0], want[0], rtol=2e-6, atol=1e-6)
    np.testing.assert_array_equal(got[1], want[1])
    g = x.to("cuda")
    shifted = g[1:]   # contiguous, one float past an aligned allocation: the scalar path
    exe = build_executable(fnx.make_jaxpr(f)(shifted), backend="cuda")
    np.testing.assert_allclose(exe(shifted)[0].cpu().numpy(), got[0][1:], rtol=0, atol=0)


@cuda
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


@cuda
def test_reductions_and_row_kernels_on_gpu():
    x, w, b = fnx.randn(300, 1000), fnx.randn(1000), fnx.randn(1000)

    def f(x, w, b):
        return [F.softmax(x, -1), F.layer_norm(x, (1000,), w, b), fnx.logsumexp(x, 0), x.sum(), x.amax((0, 1)),
                F.gelu(x, approximate="tanh"), x.T * 2.0 + x.mean()]

    exe, got, want = on_gpu(f, x, w, b)
    for g, e in zip(got, want):
        np.testing.assert_allclose(g, e, rtol=2e-5, atol=2e-4)


@cuda
def test_column_and_split_reductions_on_gpu():
    x = fnx.tensor(RNG.standard_normal((517, 333)))          # float64: exact enough to compare tightly
    long = fnx.tensor(RNG.standard_normal(3 * (1 << 20) + 12))
    nan = long.clone()
    nan[12345] = float("nan")

    def f(x, long, nan):
        return [x.sum(0), x - x.mean(0), fnx.logsumexp(x, 0), x.amin(0), long.sum(), long.amax(), nan.amax(),
                nan.amin(), (long > 4.5).any(), long.reshape(3, -1).sum(1)]

    exe, got, want = on_gpu(f, x, long, nan)
    assert {"columns", "split"} <= {k.mode for k in exe.kernels()}
    for g, e in zip(got, want):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-9)
    assert np.isnan(got[6]) and np.isnan(got[7])


@cuda
def test_gpu_kernels_are_deterministic():
    x = fnx.randn(512, 4096).to("cuda")
    f = lambda x: [x.sum(-1), F.softmax(x, -1), x.sum(), x.sum(0), x.reshape(-1).sum()]
    exe = build_executable(fnx.make_jaxpr(f)(x), backend="cuda")
    first, second = exe(x), exe(x)
    for a, b in zip(first, second):
        assert a.cpu().numpy().tobytes() == b.cpu().numpy().tobytes()


@cuda
def test_more_than_2_31_elements_on_gpu():
    import cupy

    n = (1 << 31) + 77
    x = fnx.from_dlpack(cupy.zeros(n, cupy.uint8))
    x[n - 5] = 7
    exe = build_executable(fnx.make_jaxpr(lambda x: [x + 1, x.amax()])(x), backend="cuda")
    y, top = exe(x)
    assert top.item() == 7 and y[n - 5].item() == 8 and y[n - 1].item() == 1 and y[0].item() == 1


@cuda
def test_gpu_library_steps_and_views():
    x, w = fnx.randn(64, 32), fnx.randn(32, 16)
    _, got, want = on_gpu(lambda x, w: [F.relu(x @ w + 1.0), x[1:, ::2].exp(), fnx.sort(x, -1).values], x, w)
    for g, e in zip(got, want):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)
