"""W10: fnx.export's standalone C, built with `C_FLAGS` (vectorised for this machine, libmvec's math).

W10 the exported GEMM (one matmul written as C by `write_c`, called in-process through ctypes) against numpy's
BLAS at 256, 512 and 1024, on 1 and 2 threads; GFLOP/s = 2 n^3 / time, the header names the CPU.
W10g (slow: it runs when named, `python -m benchmarks W10g`) text generation with examples/05's character
transformer (random weights): per token, the exported sampling step in its C loop (gen.c, `write_gen_c`) against
the same step in fnx compiled and torch eager, each called from a Python loop. The model lives here
(`char_transformer`); tests/test_export_c.py uses it.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

import numpy as np

from .registry import Bench, Skip, note, workload

__all__ = ["GEMM_SIZES", "C_FLAGS", "CharConfig", "char_transformer", "sampling_step"]

GEMM_SIZES = (256, 512, 1024)
C_FLAGS = ("-std=c99", "-O3", "-march=native", "-ffp-contract=fast", "-fno-math-errno", "-DFNX_LIBMVEC", "-fopenmp")


def _operands(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(n)
    return rng.standard_normal((n, n), np.float32), rng.standard_normal((n, n), np.float32)


def _exported_gemm(n: int, threads: int):
    """The C program of `a @ b` at size n as a loaded library: a callable running it once on fixed operands."""
    import fnx
    from fnx.export.c_program import write_c

    a, b = _operands(n)
    closed = fnx.make_jaxpr(lambda x, y: x @ y)(fnx.tensor(a), fnx.tensor(b))
    with tempfile.TemporaryDirectory(prefix="fnx-w10-") as folder:   # the loaded library outlives its file
        write_c(closed, closed.consts, folder, "gemm", embed_weights=True)
        built = subprocess.run(["cc", *C_FLAGS, "-shared", "-fPIC", "-o", "libgemm.so", "gemm.c", "-lm"], cwd=folder,
                               capture_output=True, text=True)
        if built.returncode != 0:
            raise Skip(f"cc could not build the exported C: {built.stderr[:200]}")
        lib = ctypes.CDLL(f"{folder}/libgemm.so")
    gomp = ctypes.util.find_library("gomp")
    if gomp is None:
        raise Skip("no libgomp to set the exported C's thread count")
    ctypes.CDLL(gomp).omp_set_num_threads(threads)
    lib.gemm_init(None)
    out = np.empty((n, n), np.float32)
    args = [ctypes.c_void_p(x.ctypes.data) for x in (a, b, out)]
    lib.gemm_run.restype = ctypes.c_int

    def run(operands=(a, b)):   # the operands stay alive as long as the pointers to them
        if lib.gemm_run(*args) != 0:
            raise RuntimeError("the exported GEMM failed")
        return out

    run()
    np.testing.assert_allclose(out, a @ b, rtol=1e-3, atol=1e-3 * n ** 0.5)
    return run


def _row(run, threads: int) -> Bench:
    """W10's Bench of `run` with numpy's BLAS on `threads` threads (the row's worker process is its own). Each
    repetition follows one untimed call (`settle`): threads that slept since the last repetition took
    milliseconds to wake on a 2-core VM (a 256^3 product on two threads 6-7 ms after a pause, 0.13 ms hot)."""
    from threadpoolctl import threadpool_limits

    limits = threadpool_limits(limits=threads, user_api="blas")
    return Bench(run, settle=run, close=limits.restore_original_limits)


def _register(n: int, threads: int) -> None:
    @workload("W10", f"matmul {n}^3 f32, {threads} thread{'s' if threads > 1 else ''}: exported C vs BLAS",
              reference="numpy", frameworks=("fnx export-c", "numpy"), unit="ms")
    def build(fw: str, device: str) -> Bench:
        note(f"W10: the exported C is built with cc {' '.join(C_FLAGS)}; GFLOP/s = 2 n^3 / time")
        if fw == "numpy":
            a, b = _operands(n)
            return _row(lambda: a @ b, threads)
        return _row(_exported_gemm(n, threads), 1)   # numpy's own BLAS stays out of the way


for _threads in (1, 2):
    for _n in GEMM_SIZES:
        _register(_n, _threads)


# ---------------------------------------------------------------- W10g: the character transformer
@dataclass(frozen=True)
class CharConfig:
    vocab: int = 40
    context: int = 32
    d_model: int = 64
    heads: int = 4
    layers: int = 2


def char_transformer(cfg: CharConfig, key):
    """(params, forward) of examples/05's character transformer: forward(params, tokens (B, T)) -> logits."""
    import fnx
    import fnx.nn.functional as F

    keys = iter(fnx.random.split(key, 5 + 10 * cfg.layers))
    normal = lambda shape, std=0.2: std * fnx.random.normal(next(keys), shape)
    d = cfg.d_model
    ln = lambda: {"w": 1.0 + normal((d,)), "b": normal((d,))}
    params = {"tokens": normal((cfg.vocab, d)), "positions": normal((cfg.context, d)), "ln_f": ln(),
              "blocks": [{"ln1": ln(), "qkv": normal((d, 3 * d)), "proj": normal((d, d)), "ln2": ln(),
                          "fc": normal((d, 4 * d)), "fc_out": normal((4 * d, d))} for _ in range(cfg.layers)]}

    def layer_norm(p, x):
        return F.layer_norm(x, (d,), p["w"], p["b"])

    def attention(p, x):
        B, T, _ = x.shape
        q, k, v = (x @ p["qkv"]).split(d, dim=-1)
        heads = lambda t: t.reshape(B, T, cfg.heads, d // cfg.heads).transpose(1, 2)
        out = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        return out.transpose(1, 2).reshape(B, T, d) @ p["proj"]

    def forward(params, tokens):
        T = tokens.shape[1]
        x = params["tokens"][tokens] + params["positions"][:T]
        for block in params["blocks"]:
            x = x + attention(block, layer_norm(block["ln1"], x))
            x = x + F.gelu(layer_norm(block["ln2"], x) @ block["fc"]) @ block["fc_out"]
        return layer_norm(params["ln_f"], x) @ params["tokens"].T

    return params, forward


def sampling_step(params, forward):
    """step(tokens (1, T), key, temperature) -> (greedy, sampled): the last position's argmax, and a draw from
    softmax(logits / temperature) (the temperature of 0 draws at 1; the loop takes the greedy token then)."""
    import fnx

    def step(tokens, key, temperature):
        logits = forward(params, tokens)[:, -1]
        scale = fnx.where(temperature > 0, temperature, fnx.ones_like(temperature))
        return logits.argmax(-1), fnx.random.categorical(key, logits / scale)

    return step


GEN_TOKENS = 200


def _gen_c(cfg: CharConfig) -> Bench:
    import fnx
    from fnx.export.c_generate import write_gen_c

    params, forward = char_transformer(cfg, fnx.random.key(0))
    step = sampling_step(params, forward)
    example = (fnx.zeros(1, cfg.context, dtype=fnx.long), fnx.random.key(0), fnx.tensor(1.0))
    exported = fnx.export(step, *example, dynamic_shapes={"tokens": {1: "seq"}})
    folder = tempfile.mkdtemp(prefix="fnx-w10g-")
    alphabet = "".join(chr(33 + i) for i in range(cfg.vocab))
    write_gen_c(exported, folder, "charlm", alphabet, cfg.context)
    built = subprocess.run(["cc", *C_FLAGS, "-o", "gen", "gen.c", "charlm.c", "-lm"], cwd=folder, capture_output=True,
                           text=True)
    if built.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        raise Skip(f"cc could not build the exported C: {built.stderr[:200]}")
    prompt = alphabet[:cfg.context]

    def run() -> float:
        r = subprocess.run(["./gen", "-n", str(GEN_TOKENS), "-t", "0.8", "-s", "1", prompt], cwd=folder,
                           capture_output=True, text=True, env={"OMP_NUM_THREADS": "1"})
        if r.returncode != 0:
            raise RuntimeError(f"gen failed: {r.stderr}")
        return float(r.stderr.split(" in ")[1].split(" s ")[0])   # "200 tokens in 0.123 s of CPU time: ..."

    return Bench(run, ops=GEN_TOKENS, measure=lambda seconds: seconds,
                 close=lambda: shutil.rmtree(folder, ignore_errors=True))


def _gen_fnx(cfg: CharConfig) -> Bench:
    import fnx

    params, forward = char_transformer(cfg, fnx.random.key(0))
    step = fnx.compile(sampling_step(params, forward))
    key, temperature = fnx.random.key(1), fnx.tensor(0.8)
    start = list(range(cfg.context))

    def run():
        tokens = list(start)
        for t in range(GEN_TOKENS):
            _, sampled = step(fnx.tensor([tokens[-cfg.context:]]), fnx.random.fold_in(key, t), temperature)
            tokens.append(int(sampled))
        return tokens

    return Bench(run, ops=GEN_TOKENS)


def _gen_torch(cfg: CharConfig) -> Bench:
    from .frameworks import load

    torch = load("torch")
    import fnx

    params, _ = char_transformer(cfg, fnx.random.key(0))
    p = fnx.tree.tree_map(lambda t: torch.from_numpy(t.numpy().copy()), params)
    F = torch.nn.functional
    d = cfg.d_model

    def forward(tokens):
        T = tokens.shape[1]
        x = p["tokens"][tokens] + p["positions"][:T]
        for b in p["blocks"]:
            h = F.layer_norm(x, (d,), b["ln1"]["w"], b["ln1"]["b"])
            q, k, v = (h @ b["qkv"]).split(d, dim=-1)
            heads = lambda t: t.reshape(1, T, cfg.heads, d // cfg.heads).transpose(1, 2)
            a = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
            x = x + a.transpose(1, 2).reshape(1, T, d) @ b["proj"]
            x = x + F.gelu(F.layer_norm(x, (d,), b["ln2"]["w"], b["ln2"]["b"]) @ b["fc"]) @ b["fc_out"]
        return F.layer_norm(x, (d,), p["ln_f"]["w"], p["ln_f"]["b"]) @ p["tokens"].T

    torch.set_num_threads(1)   # as the C loop: one thread (two oversubscribe a loaded 2-core machine)
    generator = torch.Generator().manual_seed(1)
    start = list(range(cfg.context))

    def run():
        tokens = list(start)
        with torch.no_grad():
            for _ in range(GEN_TOKENS):
                logits = forward(torch.tensor([tokens[-cfg.context:]]))[0, -1]
                tokens.append(int(torch.multinomial(torch.softmax(logits / 0.8, -1), 1, generator=generator)))
        return tokens

    return Bench(run, ops=GEN_TOKENS)


@workload("W10g", f"char transformer sampling, {GEN_TOKENS} tokens (context 32, width 64, 2 layers), per token",
          reference="fnx compile", frameworks=("fnx export-c", "fnx compile", "torch"), unit="ms/op", repeats=3,
          explicit=True)
def w10g_generation(fw: str, device: str) -> Bench:
    note("W10g: tokens/s = 1000 / (ms per token); the exported C's loop runs in gen.c on one thread")
    cfg = CharConfig()
    if fw == "fnx export-c":
        return _gen_c(cfg)
    if fw == "fnx compile":
        return _gen_fnx(cfg)
    return _gen_torch(cfg)
