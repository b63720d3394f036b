"""fnx.export's standalone C (fnx/export/c_program.py): the generated program compiles warning-free, runs, and
gives fnx's numbers.

Each test writes one program and compiles it once (`cc` takes a fraction of a second per program): the op
table runs as one program computing every float32 sample, the models as one program each.
"""
from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

import fnx
import fnx.nn as nn
import fnx.nn.functional as F
from fnx.export.c_program import write_c
from fnx.export.c_ops import supported
from op_db import as_tensor_function, stageable_ops

CC = shutil.which("cc")
WARNINGS = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror"]


def _has_openmp() -> bool:
    probe = subprocess.run([CC, "-fopenmp", "-x", "c", "-", "-o", "/dev/null"], input="int main(void){return 0;}",
                           capture_output=True, text=True)
    return probe.returncode == 0


OPENMP = ["-fopenmp"] if CC and _has_openmp() else []


def build(folder: Path, name: str, flags=OPENMP) -> Path:
    """Compile the program in `folder` with every warning an error; the path of its `main`."""
    r = subprocess.run([CC, *WARNINGS, *flags, "-o", "main", "main.c", f"{name}.c", "-lm"], cwd=folder,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[:4000]
    return folder / "main"


def export_and_run(tmp_path: Path, f, args: list, name: str = "model", *, embed: bool = False,
                   flags=OPENMP) -> list[np.ndarray]:
    """make_jaxpr(f)(*args) written as C, compiled, run on `args`; its outputs as numpy arrays."""
    closed = fnx.make_jaxpr(f)(*args)
    folder = tmp_path / name
    write_c(closed, closed.consts, folder, name, embed_weights=embed)
    main = build(folder, name, flags)
    with open(folder / "inputs.bin", "wb") as fh:
        for a in args:
            fh.write(np.ascontiguousarray(a.numpy()).tobytes())
    r = subprocess.run([str(main), "-o", "outputs.bin", "inputs.bin"], cwd=folder, capture_output=True, text=True)
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
NOT_IN_C = {"index_put", "col2im", "linalg_solve", "linalg_inv", "linalg_cholesky", "linalg_det", "linalg_logabsdet",
            "linalg_detsign", "cumprod", "recurrence", "diagonal", "argsort"}
# Ops that add or multiply many values: compared in ulps of the sum of magnitudes (their rounding depends on the
# order of the additions, which differs from numpy's pairwise sums and BLAS's kernels).
SUMS = {"sum", "mean", "var", "var_correction0", "std", "var_mean", "std_mean", "logsumexp", "prod", "cumsum",
        "norm_fro", "norm_2", "norm_1", "norm_3", "norm_1.5", "nansum", "nanmean", "nanmean_nonan",
        "linalg.vector_norm", "linalg.matrix_norm", "linalg.norm", "trace", "matmul", "mm", "bmm", "dot", "mv",
        "inner", "addmm", "baddbmm", "tensordot", "einsum", "dist", "dist_1", "kron", "outer", "conv2d", "conv1d",
        "conv_transpose2d", "avg_pool2d", "unfold", "norm_inf", "norm_-inf", "norm_0", "count_nonzero",
        "linalg.vector_norm_0", "addcmul", "addcdiv", "lerp"}
_FLOAT32_OPS = [op for op in stageable_ops() if "float32" in op.dtypes]


def _float32(sample):
    sample.args = tuple(a.astype(np.float32) if isinstance(a, np.ndarray) and a.dtype == np.float64 else a
                        for a in sample.args)
    return sample


@pytest.mark.skipif(CC is None, reason="no C compiler")   # never taken where fnx's own tests run (compile needs cc)
@settings(max_examples=1, deadline=None, phases=[Phase.generate])   # no shrinking: one program
@given(data=st.data())
def test_op_table_float32_in_one_c_program_matches_fnx(tmp_path_factory, data):
    cases, missing = [], set()
    for info in _FLOAT32_OPS:
        f, tensors = as_tensor_function(info, _float32(data.draw(info.samples)))
        if not tensors:
            continue
        closed = fnx.make_jaxpr(f)(*tensors)
        gaps = {p for e in closed.eqns if (p := supported(e)) is not None}
        if gaps:
            missing |= gaps
            continue
        cases.append((info.name, f, tensors, fnx.tree.tree_leaves(f(*tensors))))
    assert missing == NOT_IN_C
    assert len(cases) > 180

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
            scale = max([float(np.abs(t.numpy()).sum() if name in SUMS else np.abs(t.numpy()).max(initial=0))
                         for t in tensors] + [float(np.abs(e[np.isfinite(e)]).max(initial=0))])
            bound = (8 if name in SUMS else 2) * _ulp(scale)
            same = (c == e) | (np.isnan(c) & np.isnan(e)) | (np.abs(c.astype(np.float64) - e) <= bound)
            assert same.all(), f"{name}: C {c[~same][:4]} vs fnx {e[~same][:4]} (bound {bound:.3g})"
