"""`python3 -m benchmarks.cuda_report [--out DIR] [--budget SECONDS]`: one run gives what a GPU session brings back.

`make bench-cuda` runs this on a GPU machine (CuPy, torch, pytest; from the tree, no install). GPU loans
are short, so the steps share one time budget, each getting what is left, and run in order of value: the
generated-kernel tests (quick; they say whether the numbers mean anything), the compiled benchmarks (W2 W3
W4), the eager ones (W1 W8), then the rest of the `cuda` test suite (the op table on CUDA: the slow part).
Every step's output goes to its own log under DIR; summary.md has each step's status and time, the test
counts with the failures' names, the benchmark table, and the headline figures of issue 6: the compiled
tanh-GELU as a share of the device-to-device copy bandwidth (target >= 80%) and against torch.compile
(target <= 1.0x).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

__all__ = ["main"]

_ROOT = Path(__file__).resolve().parent.parent
_KERNEL_TESTS = "tests/test_codegen_cuda.py"
_GELU_BYTES = 2 * 4 * 2 ** 24   # W2 reads and writes 2^24 float32 values


def _steps(out: Path) -> list[tuple[str, list[str]]]:
    py = sys.executable
    pytest = [py, "-m", "pytest", "-m", "cuda", "-q", "-rfE", "-p", "no:cacheprovider"]
    bench = [py, "-m", "benchmarks", "--device", "cuda"]
    return [
        ("environment", [py, "-c", "import sys, cupy, numpy; print(sys.version); cupy.show_config(); "
                                   "print(numpy.__version__)"]),
        ("gpu", ["nvidia-smi"]),
        ("kernel-tests", [*pytest, _KERNEL_TESTS, f"--junitxml={out / 'kernel-tests.xml'}"]),
        ("bench-compiled", [*bench, "W2", "W3", "W4", "--json", str(out / "bench-compiled.json")]),
        ("bench-eager", [*bench, "W1", "W8", "--json", str(out / "bench-eager.json")]),
        ("cuda-tests", [*pytest, "tests", f"--ignore={_KERNEL_TESTS}", f"--junitxml={out / 'cuda-tests.xml'}"]),
    ]


def _run(name: str, cmd: list[str], out: Path, timeout: float) -> dict:
    """Run one step with its output in out/NAME.log; its status, exit code and time."""
    start = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(_ROOT), os.environ.get("PYTHONPATH")]))}
    with open(out / f"{name}.log", "w") as log:
        log.write(f"$ {' '.join(cmd)}\n")
        log.flush()
        if timeout <= 0:
            return {"step": name, "status": "not run (no time left)", "seconds": 0.0}
        try:
            done = subprocess.run(cmd, cwd=_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=timeout)
            status = "ok" if done.returncode == 0 else f"exit {done.returncode}"
        except subprocess.TimeoutExpired:
            status = f"timed out after {timeout:.0f} s"
        except OSError as e:
            status = f"could not start: {e}"
    return {"step": name, "status": status, "seconds": round(time.perf_counter() - start, 1)}


def _tests(xml: Path) -> str:
    """`passed, failed, errors, skipped` of a junit file, and the names of what failed."""
    if not xml.exists():
        return "no result file (see the log)"
    root = ET.parse(xml).getroot()
    suites = [root] if root.tag == "testsuite" else list(root)
    count = lambda key: sum(int(s.get(key, 0)) for s in suites)
    total, failed, errors, skipped = count("tests"), count("failures"), count("errors"), count("skipped")
    lines = [f"{total - failed - errors - skipped} passed, {failed} failed, {errors} errors, {skipped} skipped"]
    for case in root.iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            lines.append(f"  - {case.get('classname')}::{case.get('name')}")
    return "\n".join(lines)


def _results(out: Path) -> list[dict]:
    rows = []
    for name in ("bench-compiled.json", "bench-eager.json"):
        path = out / name
        if path.exists():
            rows += json.loads(path.read_text())["results"]
    return rows


def _value(rows: list[dict], framework: str, *words: str) -> float | None:
    """The median of `framework` on the first case whose name holds every one of `words`."""
    for r in rows:
        if r["framework"] == framework and r["value"] is not None and all(w in r["case"] for w in words):
            return r["value"]
    return None


def _headline(rows: list[dict]) -> list[str]:
    """Issue 6's targets from the W2 rows, and the other compiled cases against torch.compile (ms)."""
    copy = _value(rows, "cupy", "device to device") or _value(rows, "torch", "device to device")
    fnx, torch = (_value(rows, fw, "tanh-GELU", "compiled") for fw in ("fnx", "torch"))
    lines = []
    if copy and fnx:
        lines.append(f"- W2 compiled tanh-GELU: {fnx:.3f} ms = {_GELU_BYTES / fnx / 1e6:.0f} GB/s, "
                     f"{100 * copy / fnx:.0f}% of the device-to-device copy ({copy:.3f} ms; target >= 80%)")
    if fnx and torch:
        lines.append(f"- W2 compiled tanh-GELU: fnx / torch.compile = {fnx / torch:.2f}x (target <= 1.0x)")
    for case in ("softmax", "layernorm"):
        f, t = (_value(rows, fw, case, "compiled") for fw in ("fnx", "torch"))
        if f and t:
            lines.append(f"- {case} compiled: fnx / torch.compile = {f / t:.2f}x ({f:.3f} ms vs {t:.3f} ms)")
    return lines or ["- no W2 figures (see bench-compiled.log)"]


def _table(rows: list[dict]) -> list[str]:
    lines = ["| workload | case | framework | median | vs reference |", "|---|---|---|---|---|"]
    for r in rows:
        median = f"{r['value']:.4g} {r['unit']}" if r["value"] is not None else f"({r['skipped'] or 'error'})"
        ratio = f"{r['ratio']:.2f}x {r['reference']}" if r.get("ratio") is not None else ""
        lines.append(f"| {r['workload']} | {r['case']} | {r['framework']} | {median} | {ratio} |")
    return lines


def _summary(out: Path, done: list[dict], budget: float) -> str:
    rows = _results(out)
    lines = ["# fnx on CUDA: tests and benchmarks", "",
             f"Budget {budget:.0f} s; each step's output is in its .log file next to this one.", "",
             "| step | status | seconds |", "|---|---|---|"]
    lines += [f"| {d['step']} | {d['status']} | {d['seconds']} |" for d in done]
    lines += ["", "## Tests", "", "Generated kernels (tests/test_codegen_cuda.py):", "",
              _tests(out / "kernel-tests.xml"), "", "Everything else marked `cuda`:", "",
              _tests(out / "cuda-tests.xml"), "", "## Headline", ""]
    lines += _headline(rows)
    lines += ["", "## Benchmarks (median of repetitions; see the .log files for spreads)", ""]
    lines += _table(rows) if rows else ["no benchmark results (see the bench-*.log files)"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m benchmarks.cuda_report", description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.environ.get("OUT") or "build/cuda-report", help="folder for logs and summary")
    p.add_argument("--budget", type=float, default=float(os.environ.get("FNX_REPORT_BUDGET", 540)),
                   help="seconds for all steps together (default 540, or FNX_REPORT_BUDGET)")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    deadline = time.perf_counter() + args.budget
    done = []
    for name, cmd in _steps(out):
        done.append(_run(name, cmd, out, deadline - time.perf_counter()))
        print(f"{name}: {done[-1]['status']} ({done[-1]['seconds']} s)", flush=True)
        (out / "summary.md").write_text(_summary(out, done, args.budget))   # a partial summary survives a kill
    print(f"wrote {out / 'summary.md'}")
    return 0 if all(d["status"] == "ok" for d in done) else 1


if __name__ == "__main__":
    sys.exit(main())
