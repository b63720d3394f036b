"""Compiled workloads: fused kernels against eager execution and other compilers.

W2 tanh-GELU on 2^24 float32 elements, with a plain copy of the same array as the memory-bandwidth
limit (eager copies allocate fresh pages; a compiled `x * 2` shows the limit with the recycled output
buffers that compiled code gets); W3 softmax over the last axis of (4096, 1024); W4 layernorm of
(4096, 1024) with weight and bias. Each has an "eager" case (fnx eager, numpy, torch eager, jax.numpy
without jit) and a "compiled" case (fnx.compile, torch.compile, jax.jit); compiling happens while
building the case and is not timed.
W1c is the other end: calling a compiled chain of 10 elementwise ops on shape (4,), where per-call
overhead is everything; W1m calls a compiled small MLP loss taking the model as an argument (module
flattening and signature checks per call). W2c times compilation itself: the first call of a compiled tanh-GELU with an
empty kernel cache (trace, fuse, generate C, run the C compiler, load), and a whole fresh Python
process calling it with a warm cache (interpreter start-up and `import fnx` included).
"""
from __future__ import annotations

import functools
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

from .eager import CHAIN_OPS, _small, chain
from .frameworks import array, load, sync_for
from .registry import Bench, Skip, workload

__all__ = ["GELU_N", "ROWS", "COLS"]

GELU_N, ROWS, COLS = 2 ** 24, 4096, 1024
N_CALLS = 2000   # W1c calls per repetition
_C = math.sqrt(2.0 / math.pi)


@functools.lru_cache(maxsize=None)
def _host(shape: tuple, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ---------------------------------------------------------------- the workloads, once per array module
def _gelu(xp):
    tanh = xp.tanh

    def gelu(x):   # as minGPT/nanoGPT write it: x ** 3, not x * x * x
        return 0.5 * x * (1.0 + tanh(_C * (x + 0.044715 * x ** 3)))

    return gelu


def _softmax(fw: str, xp):
    if fw == "fnx":
        import fnx.nn.functional as F

        return lambda x: F.softmax(x, -1)
    if fw == "torch":
        return lambda x: xp.softmax(x, -1)
    if fw == "jax":
        import jax

        return lambda x: jax.nn.softmax(x, axis=-1)

    def softmax(x):
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    return softmax


def _layernorm(fw: str, xp):
    if fw == "fnx":
        import fnx.nn.functional as F

        return lambda x, w, b: F.layer_norm(x, (COLS,), w, b)
    if fw == "torch":
        return lambda x, w, b: xp.nn.functional.layer_norm(x, (COLS,), w, b)

    def layernorm(x, w, b):   # numpy and jax.numpy
        mean = x.mean(-1, keepdims=True)
        c = x - mean
        return c / xp.sqrt((c * c).mean(-1, keepdims=True) + 1e-5) * w + b

    return layernorm


def _inputs(fw: str, device: str, which: str) -> tuple:
    if which == "gelu":
        return (array(fw, _host((GELU_N,), 0), device),)
    x = array(fw, _host((ROWS, COLS), 1), device)
    if which == "softmax":
        return (x,)
    return x, array(fw, _host((COLS,), 2), device), array(fw, _host((COLS,), 3), device)


_FUNCTIONS = {"gelu": lambda fw, xp: _gelu(xp), "softmax": _softmax, "layernorm": _layernorm}


def _compiler(fw: str):
    """fw's compiler: fnx.compile, torch.compile or jax.jit (Skip where there is none)."""
    if fw == "fnx":
        return load("fnx").compile
    if fw == "torch":
        return load("torch").compile
    if fw == "jax":
        load("jax")
        import jax

        return jax.jit
    raise Skip(f"{fw} has no compiler")


def _case(fw: str, device: str, which: str, compiled: bool) -> Bench:
    xp = load(fw)
    fn = _FUNCTIONS[which](fw, xp)
    args = _inputs(fw, device, which)
    if compiled:
        fn = _compiler(fw)(fn)
        try:
            fn(*args)   # compile outside the timed region
        except Skip:
            raise
        except Exception as e:   # torch.compile needs a working C++ toolchain; report, do not fail
            raise Skip(f"{fw} compile failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    return Bench(lambda: fn(*args), sync=sync_for(fw, device))


_EAGER = ("fnx", "numpy", "torch", "jax")
_COMPILED = ("fnx", "torch", "jax")
_DEVICES = ("cpu", "cuda")   # `--device cuda`: numpy and jax report themselves skipped there


@workload("W2", "copy 2^24 f32 (bandwidth limit)", reference="numpy", frameworks=("fnx", "numpy", "torch"))
def w2_copy(fw: str, device: str) -> Bench:
    (x,) = _inputs(fw, device, "gelu")
    copy = x.copy if fw == "numpy" else x.clone
    return Bench(copy, sync=sync_for(fw, device))


@workload("W2", "copy 2^24 f32 device to device (bandwidth limit)", reference="cupy",
          frameworks=("cupy", "fnx", "torch"), devices=("cuda",))
def w2_copy_device(fw: str, device: str) -> Bench:
    """On a GPU the copy allocates from the frameworks' memory pools: the device-to-device bandwidth limit."""
    (x,) = _inputs(fw, device, "gelu")
    copy = x.copy if fw == "cupy" else x.clone
    return Bench(copy, sync=sync_for(fw, device))


@workload("W2", "x * 2, 2^24 f32, compiled (bandwidth limit)", reference="fnx", frameworks=("fnx", "torch"),
          devices=("cpu", "cuda"))
def w2_copy_compiled(fw: str, device: str) -> Bench:
    """The bandwidth limit as compiled code sees it: output buffers recycled, so no fresh pages to fault in."""
    (x,) = _inputs(fw, device, "gelu")
    fn = _compiler(fw)(lambda x: x * 2.0)
    fn(x)
    return Bench(lambda: fn(x), sync=sync_for(fw, device))


@workload("W2", "tanh-GELU 2^24 f32, eager", reference="torch", frameworks=_EAGER, devices=_DEVICES)
def w2_gelu_eager(fw: str, device: str) -> Bench:
    return _case(fw, device, "gelu", compiled=False)


@workload("W2", "tanh-GELU 2^24 f32, compiled", reference="torch", frameworks=_COMPILED, devices=_DEVICES)
def w2_gelu_compiled(fw: str, device: str) -> Bench:
    return _case(fw, device, "gelu", compiled=True)


@workload("W3", f"softmax ({ROWS}, {COLS}) f32 last axis, eager", reference="torch", frameworks=_EAGER,
          devices=_DEVICES)
def w3_softmax_eager(fw: str, device: str) -> Bench:
    return _case(fw, device, "softmax", compiled=False)


@workload("W3", f"softmax ({ROWS}, {COLS}) f32 last axis, compiled", reference="torch", frameworks=_COMPILED,
          devices=_DEVICES)
def w3_softmax_compiled(fw: str, device: str) -> Bench:
    return _case(fw, device, "softmax", compiled=True)


@workload("W4", f"layernorm ({ROWS}, {COLS}) f32 + weight, bias, eager", reference="torch", frameworks=_EAGER,
          devices=_DEVICES)
def w4_layernorm_eager(fw: str, device: str) -> Bench:
    return _case(fw, device, "layernorm", compiled=False)


@workload("W4", f"layernorm ({ROWS}, {COLS}) f32 + weight, bias, compiled", reference="torch",
          frameworks=_COMPILED, devices=_DEVICES)
def w4_layernorm_compiled(fw: str, device: str) -> Bench:
    return _case(fw, device, "layernorm", compiled=True)


# ---------------------------------------------------------------- W1c: calling a small compiled function
@workload("W1c", f"compiled chain of {CHAIN_OPS} ops, (4,) f32, per call", reference="jax",
          frameworks=_COMPILED, unit="us/op", repeats=11)
def w1c_small_call(fw: str, device: str) -> Bench:
    xp = load(fw)
    a, b = _small(fw, device)
    fn = _compiler(fw)(lambda a, b: chain(xp, a, b))
    try:
        fn(a, b)
    except Exception as e:
        raise Skip(f"{fw} compile failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")

    def run():
        for _ in range(N_CALLS):
            c = fn(a, b)
        return c

    return Bench(run, ops=N_CALLS, sync=sync_for(fw, device))


# ---------------------------------------------------------------- W1m: a compiled call with a module argument
_MLP_WIDTH, _MLP_BATCH = 64, 32


def _mlp_loss(fw: str, device: str):
    """(loss function, its arguments): a 3-layer MLP of width 64 with cross-entropy on a batch of 32, the model
    an argument for fnx (a Module pytree) and jax (a list of (w, b)), captured by torch.compile."""
    xp = load(fw)
    host = [(_host((_MLP_WIDTH, _MLP_WIDTH), 10 + k), _host((_MLP_WIDTH,), 20 + k)) for k in range(3)]
    x = array(fw, _host((_MLP_BATCH, _MLP_WIDTH), 4), device)
    labels = np.arange(_MLP_BATCH) % _MLP_WIDTH
    if fw == "jax":
        import jax

        params = [(array(fw, w, device), array(fw, b, device)) for w, b in host]

        def loss(params, x, y):
            for k, (w, b) in enumerate(params):
                x = x @ w.T + b
                x = jax.nn.relu(x) if k < 2 else x
            return -jax.nn.log_softmax(x)[xp.arange(_MLP_BATCH), y].mean()

        return loss, (params, x, xp.asarray(labels))
    nn = xp.nn
    model = nn.Sequential(nn.Linear(_MLP_WIDTH, _MLP_WIDTH), nn.ReLU(), nn.Linear(_MLP_WIDTH, _MLP_WIDTH), nn.ReLU(),
                          nn.Linear(_MLP_WIDTH, _MLP_WIDTH))
    for layer, (w, b) in zip(model[::2], host):
        layer.weight.data = array(fw, w, device)
        layer.bias.data = array(fw, b, device)
    model.requires_grad_(False)
    y = xp.tensor(labels, device=device)
    if fw == "torch":
        return (lambda x, y: nn.functional.cross_entropy(model(x), y)), (x, y)
    return (lambda model, x, y: nn.functional.cross_entropy(model(x), y)), (model, x, y)


@workload("W1m", "compiled call with an nn.Module argument: 3-layer MLP, width 64, batch 32, per call",
          reference="jax", frameworks=_COMPILED, unit="us/op", repeats=11)
def w1m_module_call(fw: str, device: str) -> Bench:
    fn, args = _mlp_loss(fw, device)
    fn = _compiler(fw)(fn)
    try:
        fn(*args)
    except Exception as e:
        raise Skip(f"{fw} compile failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    n = N_CALLS // 4

    def run():
        for _ in range(n):
            c = fn(*args)
        return c

    return Bench(run, ops=n, sync=sync_for(fw, device))


# ---------------------------------------------------------------- W2c: compilation latency
@workload("W2c", "compile tanh-GELU: first call, empty kernel cache", reference="fnx", frameworks=("fnx",),
          repeats=5)
def w2c_cold_compile(fw: str, device: str) -> Bench:
    fnx = load("fnx")
    (x,) = _inputs(fw, device, "gelu")
    small = x[:1024]

    def run():
        with tempfile.TemporaryDirectory() as cache:
            old = os.environ.get("FNX_CACHE_DIR")
            os.environ["FNX_CACHE_DIR"] = cache
            try:
                return fnx.compile(_gelu(fnx))(small)
            finally:
                if old is None:
                    del os.environ["FNX_CACHE_DIR"]
                else:
                    os.environ["FNX_CACHE_DIR"] = old

    return Bench(run)


_FRESH = """
import fnx
x = fnx.randn(1024)
y = fnx.compile(lambda x: 0.5 * x * (1.0 + fnx.tanh({c} * (x + 0.044715 * x ** 3))))(x)
"""


@workload("W2c", "fresh process: start, import fnx, first call, warm cache", reference="fnx",
          frameworks=("fnx",), repeats=5)
def w2c_warm_fresh_process(fw: str, device: str) -> Bench:
    load("fnx")
    script = _FRESH.format(c=_C)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    run = lambda: subprocess.run([sys.executable, "-c", script], cwd=root, check=True)
    run()   # fills the cache
    return Bench(run)
