"""fnx.export's standalone C (fnx/export/c_program.py): the generated program compiles warning-free, runs, and
gives fnx's numbers.

Each test writes one program and compiles it once (`cc` takes a fraction of a second per program): the op
table runs as one program computing every float32 sample, the models as one program each.
"""
from __future__ import annotations

import math
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

import fnx
import fnx.nn as nn
from fnx.demo import DigitsCNN   # examples/04's model
from fnx.export.c_program import write_c
from fnx.export.c_ops import supported
from benchmarks.export import CharConfig, char_transformer, sampling_step
from op_db import as_tensor_function, chunks, stageable_ops

WARNINGS = "-std=c99 -O2 -Wall -Wextra -Werror"


def build(folder: Path, target: str = "main", openmp: bool = True, flags: str = "") -> Path:
    """Build `target` with the program's Makefile (OpenMP when the compiler has it, unless `openmp` is False),
    every warning an error, plus `flags`; the path of the program built."""
    r = subprocess.run(["make", target, f"CFLAGS={WARNINGS} {flags}", *([] if openmp else ["OPENMP="])], cwd=folder,
                       capture_output=True, text=True)
    assert r.returncode == 0, (r.stdout + r.stderr)[:4000]
    return folder / target


def export_and_run(tmp_path: Path, f, args: list, name: str = "model", *, embed: bool = False,
                   openmp: bool = True, threads: int = 1, flags: str = "") -> list[np.ndarray]:
    """make_jaxpr(f)(*args) written as C, compiled (with `flags` besides the warnings), run on `args` (on `threads`
    OpenMP threads); its outputs as numpy arrays."""
    closed = fnx.make_jaxpr(f)(*args)
    folder = tmp_path / name
    write_c(closed, closed.consts, folder, name, embed_weights=embed)
    main = build(folder, openmp=openmp, flags=flags)
    with open(folder / "inputs.bin", "wb") as fh:
        for a in args:
            fh.write(np.ascontiguousarray(a.numpy()).tobytes())
    r = subprocess.run([str(main), "-o", "outputs.bin", "inputs.bin"], cwd=folder, capture_output=True, text=True,
                       env={**os.environ, "OMP_NUM_THREADS": str(threads)})
    assert r.returncode == 0, r.stderr
    raw = (folder / "outputs.bin").read_bytes()
    outs, at = [], 0
    for aval in closed.out_avals:
        dt = np.dtype(aval.dtype.np)
        n = math.prod(aval.shape) * dt.itemsize
        outs.append(np.frombuffer(raw[at:at + n], dt).reshape(tuple(aval.shape)))
        at += n
    assert at == len(raw)
    return outs


def _ulp(x) -> np.ndarray:
    return np.spacing(np.abs(np.asarray(x, np.float32))).astype(np.float64)


# ---------------------------------------------------------------- the op table, float32, as one program
# Ops whose IR uses primitives the C has no implementation of (the error names them at write time).
NOT_IN_C = {"col2im", "linalg_solve", "linalg_inv", "linalg_cholesky", "linalg_det", "linalg_logabsdet",
            "linalg_detsign", "linalg_eigh", "linalg_svd", "linalg_qr", "linalg_pinv", "recurrence", "cond",
            "while_loop", "scan", "searchsorted", "linalg_matrix_exp", "linalg_lu_factor",
            "linalg_cholesky_ex", "linalg_singular_info", "linalg_ldl_factor", "linalg_ldl_solve"}
# Ops that add or multiply many values: compared in ulps of the sum of magnitudes (their rounding depends on the
# order of the additions, which differs from numpy's pairwise sums and BLAS's kernels).
SUMS = {"sum", "mean", "var", "var_correction0", "std", "var_mean", "std_mean", "logsumexp", "prod", "cumsum",
        "norm_fro", "norm_2", "norm_1", "norm_3", "norm_1.5", "nansum", "nanmean", "nanmean_nonan",
        "linalg.vector_norm", "linalg.matrix_norm", "linalg.norm", "trace", "matmul", "mm", "bmm", "dot", "mv",
        "inner", "addmm", "baddbmm", "tensordot", "einsum", "dist", "dist_1", "kron", "outer", "conv2d", "conv1d",
        "conv_transpose2d", "avg_pool2d", "unfold", "norm_inf", "norm_-inf", "norm_0", "count_nonzero",
        "linalg.vector_norm_0", "addcmul", "addcdiv", "lerp",
        "addmv", "addmv_beta0", "addr", "addbmm", "chain_matmul", "ormqr", "frobenius_norm"}
_FLOAT32_OPS = [op for op in stageable_ops() if "float32" in op.dtypes]


def _float32(sample):
    sample.args = tuple(a.astype(np.float32) if isinstance(a, np.ndarray) and a.dtype == np.float64 else a
                        for a in sample.args)
    return sample


@pytest.mark.parametrize("chunk", chunks(_FLOAT32_OPS), ids=lambda c: c[0].name)
@settings(max_examples=1, deadline=None, phases=[Phase.generate])   # no shrinking: one program
@given(data=st.data())
def test_op_table_float32_in_c_programs_matches_fnx(tmp_path_factory, chunk, data):
    cases, missing, library_only = [], set(), 0
    for info in chunk:
        f, tensors = as_tensor_function(info, _float32(data.draw(info.samples)))
        if not tensors:
            continue
        closed = fnx.make_jaxpr(f)(*tensors)
        gaps = {p for e in closed.eqns if (p := supported(e)) is not None}
        if gaps:
            missing |= gaps
            library_only += 1
            continue
        cases.append((info.name, f, tensors, fnx.tree.tree_leaves(f(*tensors))))
    assert missing <= NOT_IN_C
    assert len(cases) > (len(chunk) - library_only) // 2   # most of the ops the C can run did run

    def everything(*flat):
        outs, at = [], 0
        for _, f, tensors, _ in cases:
            outs.append(f(*flat[at:at + len(tensors)]))
            at += len(tensors)
        return outs

    args = [t for _, _, tensors, _ in cases for t in tensors]
    got = iter(export_and_run(tmp_path_factory.mktemp("ops"), everything, args, "ops"))
    for name, _, tensors, expected in cases:
        for e in expected:
            e = e.detach().numpy()
            c = next(got)
            assert c.shape == e.shape and c.dtype == e.dtype, name
            if e.dtype.kind != "f":
                np.testing.assert_array_equal(c, e, err_msg=name)
                continue
            summed = name.removeprefix("jnp.") in SUMS   # the bound's scale: finite values (nanmean skips NaN)
            finite = [np.abs(v[np.isfinite(v)]) for v in (t.numpy() for t in tensors)]
            scale = max([float(a.sum() if summed else a.max(initial=0)) for a in finite]
                        + [float(np.abs(e[np.isfinite(e)]).max(initial=0))])
            bound = (8 if summed else 2) * _ulp(scale)
            same = (c == e) | (np.isnan(c) & np.isnan(e)) | (np.abs(c.astype(np.float64) - e) <= bound)
            assert same.all(), f"{name}: C {c[~same][:4]} vs fnx {e[~same][:4]} (bound {bound:.3g})"


# The GEMM's register tile as each build picks it: the x86-64 baseline (SSE), this machine's widest vectors (AVX or
# AVX-512 where the CPU has them), and the plain-array tile of compilers without GCC's vector types
GEMM_BUILDS = {"baseline": "", "native": "-O3 -march=native", "plain": "-DFNX_NO_VECTOR_TYPES"}


@pytest.mark.parametrize("build_kind", sorted(GEMM_BUILDS))
def test_blocked_gemm_with_edge_tiles_and_transposed_operands_matches_numpy(tmp_path, build_kind):
    # past every block size of the GEMM (K 256, rows 64) and no multiple of its tiles; b read transposed; on two
    # threads (the packing and the row blocks run in parallel); a float64 product; plus a batched product of small
    # matrices (the unpacked path)
    a, b = fnx.randn(2, 130, 300), fnx.randn(290, 300)
    p, q = fnx.randn(3, 5, 7), fnx.randn(3, 9, 7)
    c, d = fnx.randn(70, 260, dtype=fnx.float64), fnx.randn(260, 37, dtype=fnx.float64)
    big, small, wide = export_and_run(tmp_path, lambda a, b, p, q, c, d: (a @ b.T, p @ q.transpose(1, 2), c @ d),
                                      [a, b, p, q, c, d], "gemm", threads=2, flags=GEMM_BUILDS[build_kind])
    for got, x, y in ((big, a, b.T), (small, p, q.transpose(1, 2)), (wide, c, d)):
        x64, y64 = x.numpy().astype(np.float64), y.numpy().astype(np.float64)
        ulp = np.spacing(np.abs(x64) @ np.abs(y64)).astype(np.float64) if got.dtype == np.float64 else \
            _ulp(np.abs(x64) @ np.abs(y64))
        assert (np.abs(got - x64 @ y64) <= 8 * ulp).all()


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32", "int64", "bool"])
def test_integer_gemm_compiles_and_matches_fnx(tmp_path, dtype):
    # every element type has a register tile (1- and 2-byte integers and bools: the fallback tile alone)
    rng = np.random.default_rng(0)
    a = fnx.tensor(rng.integers(-3, 4, (70, 300))).to(getattr(fnx, dtype))
    b = fnx.tensor(rng.integers(-3, 4, (300, 90))).to(getattr(fnx, dtype))
    (got,) = export_and_run(tmp_path, lambda a, b: a @ b, [a, b], "intgemm", flags="-O3 -march=native")
    np.testing.assert_array_equal(got, (a @ b).numpy())


def test_random_draws_give_fnx_bits(tmp_path):
    def draws(key):
        a, b = fnx.random.split(fnx.random.fold_in(key, 12345))
        return (fnx.random.bits(a, (3, 5)), fnx.random.uniform(b, (7,)), fnx.random.uniform(b, (4,), dtype=fnx.float64),
                fnx.random.normal(a, (2, 3)), fnx.random.split(b, 3))

    key = fnx.random.key(2 ** 40 + 17)
    got, want = export_and_run(tmp_path, draws, [key], "draws"), [w.numpy() for w in draws(key)]
    for i in (0, 1, 2, 4):   # bits, uniforms and keys: the same bits
        np.testing.assert_array_equal(got[i], want[i])
    np.testing.assert_allclose(got[3], want[3], rtol=4e-7, atol=1e-7)   # normal: log and cos of those bits


# ---------------------------------------------------------------- models, end to end
def _close(c: np.ndarray, e, rtol: float = 1e-5) -> None:
    e = e.detach().numpy()
    np.testing.assert_allclose(c, e, rtol=rtol, atol=rtol * float(np.abs(e).max()))


def test_mlp_with_embedded_weights_built_without_openmp_matches_fnx(tmp_path):
    fnx.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(12, 64), nn.GELU(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 5),
                        nn.LogSoftmax(-1)).eval()
    x = fnx.randn(7, 12)
    (got,) = export_and_run(tmp_path, mlp, [x], "mlp", embed=True, openmp=False)
    _close(got, mlp(x))


def test_digits_cnn_on_two_threads_matches_fnx(tmp_path):
    fnx.manual_seed(1)
    model = DigitsCNN().eval()
    x = fnx.rand(64, 1, 8, 8)   # loops of 32768 elements and more run in parallel
    (got,) = export_and_run(tmp_path, model, [x], "cnn", threads=2)
    _close(got, model(x))
    np.testing.assert_array_equal(got.argmax(1), model(x).argmax(1).numpy())


# examples/05's character transformer, smaller (the model of the W10g benchmark)
CHAR = CharConfig(vocab=23, context=16, d_model=32, heads=4, layers=2)
VOCAB, CONTEXT = CHAR.vocab, CHAR.context


def transformer_and_params(seed: int):
    params, forward = char_transformer(CHAR, fnx.random.key(seed))
    return lambda p, t: forward(p, t), params


def run_main(folder: Path, args: list, *sizes: str) -> bytes:
    """Run a built program's main on `args` at symbolic `sizes` ("seq=5"); its outputs as raw bytes."""
    (folder / "in.bin").write_bytes(b"".join(np.ascontiguousarray(a.numpy()).tobytes() for a in args))
    r = subprocess.run(["./main", "-o", "out.bin", *sizes, "in.bin"], cwd=folder, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return (folder / "out.bin").read_bytes()


def test_char_transformer_with_dynamic_batch_and_seq_matches_fnx(tmp_path):
    transformer, params = transformer_and_params(0)
    step = lambda t: (transformer(params, t), transformer(params, t)[:, -1].argmax(-1))
    example = fnx.zeros(2, CONTEXT, dtype=fnx.long)
    exported = fnx.export(step, example, dynamic_shapes={"t": {0: "batch", 1: "seq"}})
    assert exported.symbols == ("batch", "seq")
    exported.save_c(tmp_path / "gpt", "gpt")
    build(tmp_path / "gpt")
    for batch, seq in ((3, 12), (1, 1), (2, CONTEXT)):
        tokens = fnx.random.randint(fnx.random.key(seq), (batch, seq), 0, VOCAB)
        raw = run_main(tmp_path / "gpt", [tokens], f"batch={batch}", f"seq={seq}")
        want_logits, want_greedy = step(tokens)
        n = want_logits.numel() * 4
        _close(np.frombuffer(raw[:n], np.float32).reshape(tuple(want_logits.shape)), want_logits)
        np.testing.assert_array_equal(np.frombuffer(raw[n:], np.int64), want_greedy.numpy())
    (tmp_path / "gpt" / "in.bin").write_bytes(np.zeros(CONTEXT + 1, np.int64).tobytes())
    r = subprocess.run(["./main", f"batch=1", f"seq={CONTEXT + 1}", "in.bin"], cwd=tmp_path / "gpt",
                       capture_output=True, text=True)
    assert r.returncode == 1 and "slice" in r.stderr   # past the position table: refused, not read out of bounds


def generate_in_python(step, prompt: list[int], count: int, temperature: float, seed: int) -> list[int]:
    key, tokens = fnx.random.key(seed), list(prompt)
    for t in range(count):
        greedy, sampled = step(fnx.tensor([tokens[-CONTEXT:]]), fnx.random.fold_in(key, t),
                               fnx.tensor(temperature, dtype=fnx.float32))
        tokens.append(int(greedy if temperature == 0 else sampled))
    return tokens[len(prompt):]


def test_generation_loop_in_c_gives_pythons_tokens(tmp_path):
    from fnx.export.c_generate import write_gen_c

    transformer, params = transformer_and_params(2)
    step = sampling_step(params, transformer)
    example = (fnx.zeros(1, CONTEXT, dtype=fnx.long), fnx.random.key(0), fnx.tensor(1.0))
    exported = fnx.export(step, *example, dynamic_shapes={"tokens": {1: "seq"}})
    alphabet = "abcdefghijklmnopqrstuvw"[:VOCAB]
    folder = tmp_path / "gen"
    write_gen_c(exported, folder, "charlm", alphabet, CONTEXT)
    build(folder, "gen")
    prompt = "bad"
    for temperature, seed in ((0.0, 0), (0.8, 3), (1.5, 11)):
        r = subprocess.run(["./gen", "-n", "24", "-t", str(temperature), "-s", str(seed), "-i", prompt], cwd=folder,
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        got = [int(t) for t in r.stdout.split()]
        assert got == generate_in_python(step, [alphabet.index(c) for c in prompt], 24, temperature, seed)
    text = subprocess.run(["./gen", "-n", "5", prompt], cwd=folder, capture_output=True, text=True).stdout
    assert text.startswith(prompt) and len(text.strip()) == len(prompt) + 5 and set(text.strip()) <= set(alphabet)


# ---------------------------------------------------------------- errors
def test_unsupported_primitive_is_named_at_write_time(tmp_path):
    closed = fnx.make_jaxpr(lambda x: fnx.linalg.inv(x) * 2)(fnx.randn(3, 3))
    with pytest.raises(NotImplementedError, match="linalg_inv"):
        write_c(closed, closed.consts, tmp_path / "inv", "inv")
    assert not (tmp_path / "inv").exists()


def _init_status(folder: Path, weights: bytes) -> tuple[int, str]:
    (folder / "bad.weights").write_bytes(weights)
    r = subprocess.run(["./main", "-w", "bad.weights", "inputs.bin"], cwd=folder, capture_output=True, text=True)
    return r.returncode, r.stderr


def test_damaged_weights_files_are_refused_with_an_error_code(tmp_path):
    lin = nn.Linear(3, 2)
    x = fnx.randn(4, 3)
    export_and_run(tmp_path, lin, [x], "lin")
    folder = tmp_path / "lin"
    good = (folder / "lin.weights").read_bytes()
    assert _init_status(folder, good)[0] == 0
    damaged = {"bad magic": b"XXXX" + good[4:], "truncated": good[:-4], "empty": b"",
               "another version": good[:8] + b"\x02" + good[9:], "another count": good[:12] + b"\x05" + good[13:],
               "another shape": good[:16 + 24] + b"\x07" + good[16 + 25:],
               "data past the end": good[:16 + 8] + b"\xff" * 8 + good[16 + 16:]}
    for what, blob in damaged.items():
        code, message = _init_status(folder, blob)
        assert code == 4 and "lin_init" in message, what
    code, message = _init_status(folder, good)
    (folder / "bad.weights").unlink()
    r = subprocess.run(["./main", "-w", "bad.weights", "inputs.bin"], cwd=folder, capture_output=True, text=True)
    assert r.returncode == 4 and "cannot open" in r.stderr


def test_index_out_of_range_returns_an_error_code(tmp_path):
    table = fnx.randn(5, 3)
    closed = fnx.make_jaxpr(lambda i: table[i])(fnx.tensor([0, 4]))
    folder = tmp_path / "emb"
    write_c(closed, closed.consts, folder, "emb")
    build(folder)
    for idx, code in (([1, -5], 0), ([0, 5], 2), ([-6, 0], 2)):
        (folder / "in.bin").write_bytes(np.array(idx, np.int64).tobytes())
        r = subprocess.run(["./main", "in.bin"], cwd=folder, capture_output=True, text=True)
        assert r.returncode == code, (idx, r.stderr)
        if code:
            assert "out of" in r.stderr
        else:
            np.testing.assert_allclose(np.array(r.stdout.split(), np.float32).reshape(2, 3),
                                       table.numpy()[idx], rtol=0)
