"""W9's worker processes: one framework stepping one model one way, in a process of its own.

Why a process each: frameworks cannot disturb each other's timings (OpenMP runtimes, BLAS thread pools,
allocator state) unless a case asks for it ("torch loaded"), each runs under the interpreter that has it
installed (`--python torch=PATH`), and a peak RSS belongs to one case. The runner's side is `Worker`:

    w = Worker({"framework": "fnx", "model": "gpt", "size": "small", "variant": "eager", "mode": "serve"})
    w.call("time")      # {"seconds": ...}: w.ops steps, timed inside the worker
    w.close()

started as `python -m benchmarks.worker SPEC` (SPEC a JSON object). Requests and answers are JSON lines
on the worker's stdin and original stdout (anything the frameworks print goes to stderr). `variant` is
"eager" (the model), "compile" (fnx.compile(model) / torch.compile(model), eager backward and optimizer)
or "functional" (fnx only: tasks.functional_step); `torch_loaded` first imports torch and runs a matmul
and an op in the worker, so an fnx case runs beside torch's OpenMP and BLAS thread pools; `neighbour` starts
one busy process (a Python loop) beside the worker while each of its repetitions is timed. Modes:

  serve       build, run WARMUP_STEPS steps (the first compiles), pick `ops` steps per repetition so one
              lasts at least MIN_REPETITION_S, answer {"ops", "env"}; then "time" -> {"seconds"} (the gc
              collected before and paused during, as the runner times), "profile N" -> {"text"}, "quit".
  memory      build, then MEMORY_STEPS steps; answer {"first": bytes, "steady": bytes}:
              first  = peak RSS over all the steps - RSS before step 1 (gradients, optimizer state,
                       compilation, caches and the step's activations: what training adds to a built model)
              steady = peak RSS over steps 2.. - RSS after step 1 (what a step in steady state allocates
                       on top of what it keeps; memory that an allocator keeps after freeing counts in the
                       baseline, not the peak).
              The peak is Linux's VmHWM, reset through /proc/self/clear_refs before each phase.
  first-call  build, time the first step (compilation included, with whatever caches the environment
              names: the runner passes empty ones), answer {"seconds"}.
A failure answers {"skip": reason} where the framework cannot run the case (not installed, a compile
that fails on this machine), else {"error": text} (its traceback goes to stderr).
"""
from __future__ import annotations

import gc
import importlib
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path

from .registry import INTERPRETERS, Bench, Skip

__all__ = ["Worker", "WARMUP_STEPS", "MIN_REPETITION_S", "MEMORY_STEPS"]

WARMUP_STEPS = 2        # the first compiles; a second catches a recompilation (torch.compile guards)
MIN_REPETITION_S = 0.25  # a repetition runs whole steps for at least this long
MEMORY_STEPS = 3
_ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- the runner's side
class Worker:
    """A started worker process: its first answer (`hello`), `call(request...)` and `close()`."""

    def __init__(self, spec: dict, env: dict | None = None):
        self.spec = spec
        self.label = f"{spec['framework']} {spec['variant']} {spec['model']} {spec['size']} {spec['mode']}"
        python = _interpreter(spec)
        path = os.pathsep.join(p for p in (str(_ROOT), os.environ.get("PYTHONPATH", "")) if p)
        try:
            self.proc = subprocess.Popen([python, "-m", "benchmarks.worker", json.dumps(spec)], cwd=_ROOT,
                                         env={**os.environ, **(env or {}), "PYTHONPATH": path},
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        except OSError as e:
            raise Skip(f"cannot start {python}: {e}") from e
        self.hello = self._answer()

    @classmethod
    def once(cls, spec: dict, env: dict | None = None) -> dict:
        """The first answer of a worker whose mode answers once (memory, first-call); the process then ends."""
        worker = cls(spec, env)
        worker.close()
        return worker.hello

    def call(self, *request) -> dict:
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return self._answer()

    def _answer(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            status = self.proc.wait()
            raise RuntimeError(f"W9 worker ({self.label}) exited with status {status}; its stderr is above")
        answer = json.loads(line)
        if "skip" in answer or "error" in answer:
            self.close()
            if "skip" in answer:
                raise Skip(answer["skip"])
            raise RuntimeError(f"W9 worker ({self.label}): {answer['error']}")
        return answer

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps(["quit"]) + "\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):   # gone or stuck: stop it
                self.proc.kill()
                self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                pipe.close()
            except OSError:
                pass


def _interpreter(spec: dict) -> str:
    """The Python that runs `spec`: --python torch=... for anything that imports torch, else --python FW=..."""
    needs = "torch" if spec["framework"] == "torch" or spec.get("torch_loaded") else spec["framework"]
    return INTERPRETERS.get(needs) or sys.executable


# ---------------------------------------------------------------- the worker's side
def _load_torch() -> None:
    """Import torch and run one matmul and one op, so its thread pools exist in this process."""
    import torch

    a = torch.randn(256, 256)
    float(torch.relu(a @ a).sum())


def _framework(name: str):
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise Skip(f"{name} not installed for {sys.executable} ({e}); see --python") from e


def _stepper(xp, spec: dict):
    """run(): one training step of the spec's model, the way `variant` says."""
    from .tasks import functional_step, make_task

    task = make_task(xp, spec["model"], spec["size"])
    if spec["variant"] == "functional":
        if spec["framework"] != "fnx":
            raise Skip("the functional step is fnx's (value_and_grad + fnx.optim.functional)")
        return functional_step(xp, task)
    net = xp.compile(task.model) if spec["variant"] == "compile" else task.model
    return lambda: task.step(net)


def _first_step(spec: dict, run) -> float:
    """Run (and time) the first step; a compiled variant that fails to compile is a Skip, as in W5."""
    t0 = time.perf_counter()
    try:
        run()
    except Exception as e:
        if spec["variant"] == "eager":
            raise
        traceback.print_exc()
        what = f"{spec['framework']}.compile" if spec["variant"] == "compile" else "fnx.compile (functional step)"
        raise Skip(f"{what} failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from e
    return time.perf_counter() - t0


def _environment(spec: dict) -> dict:
    """This process's interpreter, versions and thread pools (after the warm-up, so compiled kernels' OpenMP
    runtime shows too)."""
    env = {"python": sys.executable, "python_version": platform.python_version()}
    # real torch only: a makemore row runs fnx under the torch alias, whose `torch` is fnx
    real_torch = spec["framework"] == "torch" or spec.get("torch_loaded")
    for name in ("numpy", "fnx", "torch"):
        mod = sys.modules.get(name)
        if mod is not None and (name != "torch" or real_torch):
            env[name] = getattr(mod, "__version__", "?")
    fnx = sys.modules.get("fnx")
    if fnx is not None:
        env["fnx_threads"] = fnx.get_num_threads()
    torch = sys.modules.get("torch") if real_torch else None
    if torch is not None:
        env["torch_threads"] = torch.get_num_threads()
        env["torch_blas"] = "mkl" if torch.backends.mkl.is_available() else "?"
        env["torch_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    try:
        from threadpoolctl import threadpool_info

        env["threadpools"] = [_describe_pool(p) for p in threadpool_info()]
    except ImportError:
        env["threadpools"] = ["(install threadpoolctl to list them)"]
    return env


def _describe_pool(pool: dict) -> str:
    """E.g. "openmp (libgomp, 2 threads) torch/lib/libgomp.so.1": which library, loaded from where."""
    name = " ".join(str(pool[k]) for k in ("internal_api", "version") if pool.get(k))
    where = "/".join(Path(pool.get("filepath", "?")).parts[-3:])
    return f"{name} ({pool.get('architecture') or pool.get('prefix')}, {pool.get('num_threads')} threads) {where}"


def _status_bytes(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise Skip(f"/proc/self/status has no {field}")


def _reset_peak() -> None:
    """Reset VmHWM to the current RSS (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError as e:
        raise Skip(f"cannot reset the peak RSS through /proc/self/clear_refs: {e}") from e


def _memory(spec: dict, run) -> dict:
    if not sys.platform.startswith("linux"):
        raise Skip("peak RSS is measured through Linux's /proc")
    gc.collect()
    before = _status_bytes("VmRSS")
    _reset_peak()
    _first_step(spec, run)
    peak_first = _status_bytes("VmHWM")
    after_first = _status_bytes("VmRSS")
    _reset_peak()
    for _ in range(MEMORY_STEPS - 1):
        run()
    peak_rest = _status_bytes("VmHWM")
    return {"first": max(peak_first, peak_rest) - before, "steady": peak_rest - after_first}


def _timed_beside_neighbour(bench: Bench) -> float:
    """`timed(bench)` while another process spins, only for as long as this row is measured: the runner
    interleaves rows, and a neighbour left running would slow every other row's measurement too."""
    from .runner import timed

    neighbour = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        return timed(bench)
    finally:
        neighbour.kill()
        neighbour.wait()


def _serve(spec: dict, run, send) -> None:
    from .profiling import profile_text
    from .runner import timed

    for _ in range(WARMUP_STEPS):
        last = _first_step(spec, run)
    ops = max(1, round(MIN_REPETITION_S / max(last, 1e-9)))

    def steps():
        for _ in range(ops):
            run()

    bench = Bench(steps, ops=ops)
    send({"ops": ops, "env": _environment(spec)})
    for line in sys.stdin:
        request = json.loads(line)
        if request[0] == "time":
            send({"seconds": _timed_beside_neighbour(bench) if spec.get("neighbour") else timed(bench)})
        elif request[0] == "profile":
            send({"text": profile_text(bench, int(request[1]))})
        else:
            return


def main(argv: list[str]) -> int:
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)   # the frameworks' own prints go to stderr, not into the answers

    def send(msg: dict) -> None:
        answers.write(json.dumps(msg) + "\n")

    spec = json.loads(argv[0])
    try:
        if spec.get("torch_loaded"):
            _framework("torch")
            _load_torch()
        xp = _framework(spec["framework"])
        run = _stepper(xp, spec)
        if spec["mode"] == "memory":
            send(_memory(spec, run))
        elif spec["mode"] == "first-call":
            send({"seconds": _first_step(spec, run)})
        else:
            _serve(spec, run, send)
    except (Skip, NotImplementedError) as e:
        send({"skip": str(e).splitlines()[0] if str(e) else type(e).__name__})
    except Exception as e:   # reported to the runner, which marks the row as an error
        traceback.print_exc()
        send({"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
