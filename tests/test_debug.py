"""FNX_DEBUG levels 1-4 log what their layer runs (checked in subprocesses: the level is read at import), and
docs/debugging.md shows what they print."""
from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "debugging.md"

PROGRAM = """
import fnx

x = fnx.ones(3, requires_grad=True)
loss = (x * x).sum()
loss.backward()


@fnx.compile
def f(a):
    return fnx.tanh(a * 2 + 1).sum()


y = f(x.detach())
"""
TIME = re.compile(r"\d+\.\d+ (us|ms)")


def run(program: str, level: str | None) -> str:
    """stderr of `program` run with FNX_DEBUG=`level` (None: unset)."""
    env = {k: v for k, v in os.environ.items() if k not in ("FNX_DEBUG", "FNX_LOG")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    if level is not None:
        env["FNX_DEBUG"] = level
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(program)], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stderr


@pytest.fixture(scope="module")
def outputs() -> dict:
    return {level: run(PROGRAM, level) for level in ("1", "2", "3", "4")}


def test_unset_installs_nothing():
    out = run("""
        import fnx
        from fnx.core import Primitive
        assert fnx.debug.LEVEL == 0
        assert type(Primitive.__dict__["impl"]).__name__ == "member_descriptor"   # the plain slot
        assert not fnx.debug.log.handlers
        fnx.compile(lambda a: (a * 2).sum())(fnx.ones(3) + 1)
    """, None)
    assert "fnx.debug" not in out


def test_zero_is_off_and_nonsense_says_so():
    assert "fnx.debug" not in run("import fnx; fnx.ones(2) + 1", "0")
    out = run("import fnx; fnx.ones(2) + 1", "verbose")
    assert "FNX_DEBUG='verbose' is not a level" in out and "fnx.debug" not in out


def test_level1_logs_ops_compiled_calls_and_kernels(outputs):
    lines = outputs["1"].splitlines()
    assert lines[:2] == ["fnx.debug: mul(f32[3], f32[3]) on cpu",
                         "fnx.debug: sum(f32[3], axes=(0,), keepdims=False) on cpu"]
    assert "fnx.debug: broadcast_to(f32[1], shape=(3,)) on cpu" in lines   # the backward pass
    assert "fnx.debug: compiled call (c: 1 kernel(s), 0 library step(s))" in lines
    assert any(re.fullmatch(r"fnx\.debug: kernel fnx_\w+ \(c\)", line) for line in lines)
    assert not TIME.search(outputs["1"]) and "lambda" not in outputs["1"]


def test_level2_adds_times(outputs):
    lines = outputs["2"].splitlines()
    assert len(lines) == len(outputs["1"].splitlines())
    assert all(TIME.search(line) for line in lines), outputs["2"]
    assert any(re.fullmatch(r"fnx\.debug: compiled call \(c: .*\): took \d+\.\d+ (us|ms)", line) for line in lines)
    assert any(re.fullmatch(r"fnx\.debug: kernel fnx_\w+ \(c\): ran in \d+\.\d+ (us|ms)", line) for line in lines)


def test_level3_adds_the_ir_after_each_pass(outputs):
    out = outputs["3"]
    assert "fnx.debug: IR of f as traced (4 equations):\n{ lambda ; a:f32[3]. let" in out
    for p in ("inline_calls", "fold_constants", "simplify", "cse", "dce"):
        assert f"fnx.debug: IR after {p}" in out
    assert "fnx.debug: fused 4 equations into 1 kernel(s) and 0 library step(s): fnx_" in out
    assert "generated c source" not in out


def test_level4_adds_kernel_source_and_driver(outputs):
    out = outputs["4"]
    assert "fnx.debug: generated c source:\n" in out and "#include <math.h>" in out
    assert "\ndriver:\ndef run(a0):" in out
    assert "fnx.debug: IR after dce" in out and "fnx.debug: mul(f32[3], f32[3]) on cpu" in out   # cumulative


def test_interpreter_and_library_steps_log_their_ops():
    out = run("""
        import fnx
        fnx.compile(lambda a: fnx.exp(a).sum(), backend="interpret")(fnx.ones(2))
        fnx.compile(lambda a, b: (a @ b).tanh())(fnx.ones(2, 3), fnx.ones(3, 4))
    """, "1")
    assert "fnx.debug: exp(f32[2]) on cpu\nfnx.debug: sum(f32[2], axes=(0,), keepdims=False) on cpu" in out
    assert ("fnx.debug: compiled call (c: 1 kernel(s), 1 library step(s))\n"
            "fnx.debug: matmul(f32[2,3], f32[3,4]) on cpu\n"
            "fnx.debug: kernel fnx_") in out


def test_transforms_log_the_ops_they_evaluate():
    out = run("""
        import fnx
        fnx.grad(lambda a: (a * a).sum())(fnx.ones(2))
        fnx.vmap(lambda a: a.sum())(fnx.ones(4, 3))
        fnx.make_jaxpr(lambda a: a.exp())(fnx.ones(5))   # tracing computes nothing
    """, "1")
    assert "fnx.debug: mul(f32[2], f32[2]) on cpu" in out
    assert "fnx.debug: sum(f32[4,3], axes=(1,), keepdims=False) on cpu" in out
    assert "f32[5]" not in out


def _normalise(text: str) -> list[str]:
    """Lines without the parts that vary from run to run: timings, and the hash that ends a kernel name."""
    text = TIME.sub("<time>", text)
    text = re.sub(r"(fnx_\w+)_[0-9a-f]{8}\b", r"\1_<hash>", text)
    return [line.rstrip() for line in text.strip("\n").splitlines()]


def test_page_shows_what_each_level_prints(outputs):
    page = PAGE.read_text()
    program = re.search(r"```python no-run\n(.*?)```", page, re.S).group(1)
    assert program.strip() == PROGRAM.strip(), "docs/debugging.md's example.py is PROGRAM"
    shown = re.findall(r"```console\n\$ FNX_DEBUG=(\d) python example.py(.*?)\n(.*?)```", page, re.S)
    assert [level for level, _, _ in shown] == ["1", "2", "3"]
    for level, pipe, expected in shown:
        out = outputs[level]
        if pipe.strip() == '2>&1 | grep -v " on cpu"':
            out = "\n".join(line for line in out.splitlines() if " on cpu" not in line)
        else:
            assert not pipe.strip(), f"unexpected command suffix {pipe!r}"
        assert _normalise(out) == _normalise(expected), f"FNX_DEBUG={level}:\n{out}"
