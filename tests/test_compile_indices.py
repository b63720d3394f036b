"""Compiled code is as strict as eager mode on bad indices: an index out of range raises the error eager mode
raises (same type, same message) under `fnx.compile` on every backend, gradients included, and ignore_index
stays ignored. Generated kernels flag a bad value, and the compiled call then runs the check on the host
(fnx/ops/indexing.py `check_index`, fnx/lowering/plan.py); the CUDA driver reads its flag once per call."""
from __future__ import annotations

import re
import shutil
import subprocess
from types import SimpleNamespace

import numpy as np
import pytest

import fnx
import fnx.nn.functional as F
from fnx.lowering import cuda as cuda_backend
from fnx.lowering.codegen import render_module
from fnx.lowering.plan import _Driver, plan_steps

from op_db import as_tensor_function
from op_db_indexing import BAD_INDICES, OPS, UNTRACED_INDICES

BACKENDS = ["interpret", "c"]
_BY_NAME = {info.name: info for info in OPS}


def eager_error(f, *args) -> BaseException:
    with pytest.raises(Exception) as caught:
        f(*args)
    return caught.value


def assert_same_error(f, args, backend) -> None:
    """f(*args) raises in eager mode, and compiled for `backend` raises the same type with the same message."""
    expected = eager_error(f, *args)
    with pytest.raises(type(expected)) as caught:
        fnx.compile(f, backend=backend)(*args)
    assert type(caught.value) is type(expected)
    assert str(caught.value) == str(expected)


# ---------------------------------------------------------------- the op table
def test_every_indexing_op_has_bad_index_samples():
    names = {info.name for info in OPS}
    assert set(BAD_INDICES) <= names
    assert names - set(BAD_INDICES) == UNTRACED_INDICES


_CASES = [(name, i) for name, samples in BAD_INDICES.items() for i in range(len(samples))]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name,i", _CASES, ids=[f"{n}-{i}" for n, i in _CASES])
def test_op_table_bad_indices_raise_as_in_eager_mode(name, i, backend):
    op, tensors = as_tensor_function(_BY_NAME[name], BAD_INDICES[name][i])
    assert_same_error(op, tensors, backend)


# ---------------------------------------------------------------- nn ops: losses, embedding, one_hot
_LOGITS = fnx.tensor(np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32))
_WEIGHT = fnx.tensor(np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32))
_IMAGE_LOGITS = fnx.tensor(np.random.default_rng(2).standard_normal((2, 4, 2, 2)).astype(np.float32))

_NN = {
    "cross_entropy": lambda t: F.cross_entropy(_LOGITS, t),
    "cross_entropy_sum_weighted": lambda t: F.cross_entropy(_LOGITS, t, weight=fnx.ones(4), reduction="sum"),
    "cross_entropy_smoothed": lambda t: F.cross_entropy(_LOGITS, t, label_smoothing=0.1),
    "nll_loss": lambda t: F.nll_loss(F.log_softmax(_LOGITS, 1), t),
    "nll_loss_none": lambda t: F.nll_loss(F.log_softmax(_LOGITS, 1), t, reduction="none"),
    "nll_loss_ignore_2": lambda t: F.nll_loss(F.log_softmax(_LOGITS, 1), t, ignore_index=2),
    "cross_entropy_grad": lambda t: fnx.grad(lambda x: F.cross_entropy(x, t))(_LOGITS),
    "one_hot": lambda t: F.one_hot(t, 4),
    "embedding": lambda t: F.embedding(t, _WEIGHT),
    "embedding_padding": lambda t: F.embedding(t, _WEIGHT, padding_idx=0),
    "embedding_grad": lambda t: fnx.grad(lambda w: (F.embedding(t, w) ** 2).sum())(_WEIGHT),
    "embedding_grad_by_freq": lambda t: fnx.grad(lambda w: F.embedding(t, w, scale_grad_by_freq=True).sum())(_WEIGHT),
    "gather_grad": lambda t: fnx.grad(lambda x: fnx.gather(x, 1, t.reshape(3, 1) % 7).sum())(_LOGITS),
}
_BAD_TARGETS = {"negative": [0, -1, 2], "size": [0, 4, 1], "far": [100, 1, -50]}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bad", sorted(_BAD_TARGETS))
@pytest.mark.parametrize("name", sorted(_NN))
def test_nn_bad_indices_raise_as_in_eager_mode(name, bad, backend):
    target = _BAD_TARGETS[bad]
    if name == "nll_loss_ignore_2":
        target = [2 if t == 0 else t for t in target]   # ignored targets mixed in: the bad one still raises
    if name.startswith("embedding"):
        target = [t + 1 if t == 4 else t for t in target]   # 5 rows: the size is 5
    assert_same_error(_NN[name], [fnx.tensor(target)], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_ignored_targets_are_not_bad_indices(backend):
    """Targets equal to ignore_index (default -100, or any other value) are skipped; others still count."""
    for loss, target in [(lambda t: F.cross_entropy(_LOGITS, t), [1, -100, 3]),
                         (lambda t: F.cross_entropy(_LOGITS, t, reduction="none"), [-100, -100, 0]),
                         (lambda t: F.nll_loss(F.log_softmax(_LOGITS, 1), t, ignore_index=7), [7, 2, 7]),
                         (lambda t: F.nll_loss(F.log_softmax(_LOGITS, 1), t, ignore_index=-1), [-1, 0, 3]),
                         (lambda t: F.cross_entropy(_IMAGE_LOGITS, t), [[[0, -100], [3, 1]], [[-100, 2], [1, 0]]])]:
        t = fnx.tensor(target)
        np.testing.assert_allclose(fnx.compile(loss, backend=backend)(t).numpy(), loss(t).numpy(), rtol=1e-6)
    bad = fnx.tensor([[[0, -100], [4, 1]], [[-100, 2], [1, 0]]])
    assert_same_error(lambda t: F.cross_entropy(_IMAGE_LOGITS, t), [bad], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_good_indices_still_compute_eager_values(backend):
    """The checks change nothing on the good path, negative indices that an op counts from the end included."""
    x = fnx.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    i = fnx.tensor([0, 2, 1])
    for f, args in [(lambda x, i: fnx.gather(x, 0, i.reshape(1, 3)), (x, i)),
                    (lambda x, i: fnx.take(x, i - 12), (x, i)),
                    (lambda x, i: x[i - 3], (x, i)),
                    (lambda i: F.one_hot(i, 3), (i,)),
                    (lambda w, i: fnx.grad(lambda w: F.embedding(i, w).sum())(w), (_WEIGHT, i))]:
        np.testing.assert_array_equal(fnx.compile(f, backend=backend)(*args).numpy(), f(*args).numpy())


def test_a_compiled_call_is_usable_after_a_bad_index():
    """The error flag is cleared once raised: the next call with good indices runs normally."""
    f = fnx.compile(lambda w, i: F.embedding(i, w), backend="c")
    for _ in range(2):
        with pytest.raises(IndexError, match="index_select: index 5 is out of bounds for dimension 0 with size 5"):
            f(_WEIGHT, fnx.tensor([1, 5]))
        np.testing.assert_array_equal(f(_WEIGHT, fnx.tensor([4, 0])).numpy(), _WEIGHT.numpy()[[4, 0]])


def test_the_first_bad_check_in_program_order_raises():
    """Two checks failing in one kernel (or one call): the error is the one eager mode meets first."""
    f = lambda i: [fnx.index_select(fnx.ones(3), 0, i), F.one_hot(i, 2)]
    for backend in BACKENDS:
        assert_same_error(f, [fnx.tensor([0, 3])], backend)
    g = lambda i: [F.one_hot(i, 2), fnx.index_select(fnx.ones(3), 0, i)]
    assert_same_error(g, [fnx.tensor([0, 3])], "c")


def test_vmap_checks_batched_indices():
    x = fnx.tensor(np.arange(6, dtype=np.float32))
    with pytest.raises(IndexError, match="index_select: index 6 is out of bounds for dimension 0 with size 6"):
        fnx.vmap(lambda i: fnx.index_select(x, 0, i))(fnx.tensor([[0, 1], [6, 2]]))
    np.testing.assert_array_equal(fnx.vmap(lambda i: fnx.index_select(x, 0, i))(fnx.tensor([[0, 1], [5, 2]])).numpy(),
                                  [[0, 1], [5, 2]])


# ---------------------------------------------------------------- generated code
def test_checks_are_staged_and_flag_in_the_kernel():
    jaxpr = fnx.make_jaxpr(lambda t: F.cross_entropy(_LOGITS, t))(fnx.tensor([0, 1, 2]))
    assert "check_index[dim=0, high=4, kind='target', low=0, op='cross_entropy']" in str(jaxpr)
    steps, kernels = plan_steps(jaxpr, "c")
    flagged = [k for k in kernels if k.kernel.checks]
    assert flagged and all("FNX_FLAG(fnx_bad)" in k.source and "int *fnx_bad" in k.source for k in flagged)
    assert all("fnx_bad" not in k.source for k in kernels if not k.kernel.checks)
    (first,) = [k for k in flagged if "ne" in k.kernel.ops]   # the target's check fuses with ignore_index's select
    assert re.search(r"if \((v\d+) < 0LL \|\| \1 >= 4LL\) FNX_FLAG\(fnx_bad\);", first.source)


def test_the_c_driver_checks_the_flag_right_after_the_kernel():
    """Before a library step (numpy) can read the index: numpy would raise an error of its own."""
    exe = fnx.compile(lambda w, i: F.embedding(i, w), backend="c").lower(_WEIGHT, fnx.tensor([1])).compile()
    lines = exe.driver_source.splitlines()
    call = next(n for n, line in enumerate(lines) if line.strip().startswith("kernel"))
    assert lines[call + 1].strip().startswith("if flag[0]: bad_value(flag, ((x")
    assert "index" in "\n".join(lines[call + 2:])


def _cuda_kernels(f, *args) -> list:
    return plan_steps(fnx.make_jaxpr(f)(*args), "cuda")[1]


def test_cuda_kernels_take_the_flag_after_their_buffers():
    kernels = _cuda_kernels(lambda t: F.cross_entropy(_LOGITS, t), fnx.tensor([0, 1, 2])) \
        + _cuda_kernels(lambda i: F.one_hot(i, 5), fnx.tensor(np.arange(1 << 12) % 5))
    flagged = [k for k in kernels if k.kernel.checks]
    assert flagged
    for k in flagged:
        head = re.search(rf"FNX_KERNEL {k.name}\((.*?)\)\n{{", k.source, re.S).group(1)
        params = [p.strip() for p in head.split(",")]
        n = len(k.kernel.inputs) + len(k.kernel.outputs)
        assert params[n] == "FNX_GLOBAL int *FNX_RESTRICT fnx_bad"
        assert all(p.startswith("const fnx_index") for p in params[n + 1:])
        assert "FNX_FLAG(fnx_bad);" in k.source
    assert "#define FNX_FLAG(flag)" in render_module(kernels, "cuda")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_cuda_kernels_with_checks_compile_with_nvcc(tmp_path):
    kernels = _cuda_kernels(lambda t: F.cross_entropy(_LOGITS, t), fnx.tensor([0, 1, 2])) \
        + _cuda_kernels(lambda i: F.one_hot(i, 5), fnx.tensor(np.arange(1 << 12) % 5)) \
        + _cuda_kernels(lambda x, i: x.sum(1) + F.one_hot(i, 4).sum(1), fnx.randn(64, 4), fnx.tensor(np.arange(64) % 4))
    cu = tmp_path / "kernels.cu"
    cu.write_text(render_module(kernels, "cuda"))
    r = subprocess.run(["nvcc", "-arch=sm_90", "--ptx", "-Werror", "all-warnings", str(cu), "-o",
                        str(tmp_path / "kernels.ptx")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-4000:]
    assert "st.global.u32" in (tmp_path / "kernels.ptx").read_text()


class _Flag:
    """A stand-in for the CUDA executable's 1-element device flag: `.get()` copies it to the host."""

    def __init__(self):
        self.value = np.zeros(1, np.int32)
        self.reads = 0

    def get(self):
        self.reads += 1
        return self.value.copy()

    def fill(self, v):
        self.value[:] = v


def _fake_cuda_launch(flag: _Flag):
    """Launches of `plan_steps` kernels computed on the host: checks set the flag as the CUDA kernels do."""
    def launch(gk):
        k = gk.kernel

        def run(*ins, outs=None):
            assert len(k.outputs) == 1 and len(ins) == 1
            (var, eqn), = k.checks
            v = ins[0]
            if v.size and (v.min() < eqn.params["low"] or v.max() >= eqn.params["high"]):
                flag.value[0] = 1
            return [v.copy()]

        return run

    return launch


def test_the_cuda_driver_reads_the_flag_once_per_call():
    """The CUDA driver (with a stand-in for the device) checks the flag after its last step, once per call, and
    keeps the checked values alive until then; a bad index raises eager mode's error."""
    w = fnx.tensor(np.arange(15, dtype=np.float32).reshape(5, 3))
    closed = fnx.make_jaxpr(lambda w, i: F.embedding(i, w))(w, fnx.tensor([0, 1]))
    steps, kernels = plan_steps(closed, "cuda")
    assert [type(s).__name__ for s in steps] == ["Kernel", "Eqn"]   # the check, then the gather (a library step)
    flag = _Flag()
    driver = _Driver(closed, steps, kernels, _fake_cuda_launch(flag), flag)
    driver.xp = SimpleNamespace()   # not numpy (CuPy): the driver defers the flag to the end of the call
    source, run = driver.build()
    lines = source.splitlines()
    assert sum("flag.get()" in line for line in lines) == 1
    assert lines[-2].strip().startswith("if flag.get()[0]: bad_value(flag, ((x")
    assert "index" in next(line for line in reversed(lines[:-2]) if "=" in line)   # after the gather
    checked = re.search(r"bad_value\(flag, \(\((x\d+),", source).group(1)
    assert not any(line.strip().startswith("del") and checked in line for line in lines)
    (gather,) = [name for name in driver.namespace if name.startswith("index")]
    driver.namespace[gather] = lambda w, i: w[i % len(w)]   # CuPy wraps an index out of range (numpy raises)
    np.testing.assert_array_equal(run(w, fnx.tensor([4, 1]))[0].numpy(), w.numpy()[[4, 1]])
    with pytest.raises(IndexError, match="index_select: index 7 is out of bounds for dimension 0 with size 5"):
        run(w, fnx.tensor([7, 1]))
    assert flag.value[0] == 0 and flag.reads == 2


def test_the_cuda_launcher_passes_the_flag(monkeypatch):
    class FakeCupy:
        cuda = SimpleNamespace(Device=lambda: SimpleNamespace(attributes={"MultiProcessorCount": 132}))

        @staticmethod
        def empty(shape, dtype):
            return SimpleNamespace(shape=shape, dtype=dtype, data=SimpleNamespace(ptr=1 << 20))

        zeros = empty

    monkeypatch.setattr(cuda_backend, "_cupy", lambda: FakeCupy)
    (gk,) = _cuda_kernels(lambda i: F.one_hot(i, 5), fnx.tensor([0, 1]))[:1]
    assert gk.kernel.checks
    calls = []
    flag = object()
    run = cuda_backend.launcher(SimpleNamespace(get_function=lambda name: lambda *a: calls.append(a)), gk, flag)
    ins = [FakeCupy.empty((2,), np.int64)]
    run(*ins)
    (_, _, args), = calls
    n = len(gk.kernel.inputs) + len(gk.kernel.outputs)
    assert args[n] is flag and all(type(a) is np.int64 for a in args[n + 1:])
