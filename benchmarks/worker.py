"""Worker processes: every row of the table runs in a process of its own, one framework in it.

Why a process each: frameworks cannot disturb each other's timings (OpenMP runtimes whose idle workers
busy-wait, BLAS thread pools, allocator state) unless a case asks for it ("torch loaded"), each runs under
the interpreter that has it installed (`--python torch=PATH`), and a peak RSS belongs to one case. Two
kinds of worker: a registered case built by its builder in the worker (`Worker.for_case`: W1-W8, W10,
W11, D1, D2), and W9's and W12's training steps of one model one way. The runner's side is `Worker`:

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
  case        build the registered case {"workload", "case", "size", "row", "device"} (the row's builder,
              in this process), answer {"ops", "env"}; then "time" -> {"seconds"} of one repetition as the
              runner times it (settle, sync and measure included; the runner's warm-up repetitions are "time"
              requests too), "profile N", "quit" (the case's close runs).
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

from .registry import INTERPRETERS, Bench, Skip, Workload, all_workloads

__all__ = ["Worker", "environment_note", "WARMUP_STEPS", "MIN_REPETITION_S", "MEMORY_STEPS"]

QUIET_WINDOW_S = 0.02   # another worker is quiet when it has used no CPU for this long (the kernel counts in
QUIET_MAX_S = 1.0       # 10 ms ticks), waited for at most this long before each repetition
WARMUP_STEPS = 2        # the first compiles; a second catches a recompilation (torch.compile guards)
MIN_REPETITION_S = 0.25  # a repetition runs whole steps for at least this long
MEMORY_STEPS = 3
_ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- the runner's side
class Worker:
    """A started worker process: its first answer (`hello`), `call(request...)` and `close()`."""

    def __init__(self, spec: dict, env: dict | None = None):
        self.spec = spec
        self.label = (f"{spec['row']}: {spec['workload']} {spec['case']}" if spec["mode"] == "case" else
                      f"{spec['framework']} {spec['variant']} {spec['model']} {spec['size']} {spec['mode']}")
        python = _interpreter(spec)
        path = os.pathsep.join(p for p in (str(_ROOT), os.environ.get("PYTHONPATH", "")) if p)
        try:
            self.proc = subprocess.Popen([python, "-m", "benchmarks.worker", json.dumps(spec)], cwd=_ROOT,
                                         env={**os.environ, **(env or {}), "PYTHONPATH": path},
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        except OSError as e:
            raise Skip(f"cannot start {python}: {e}") from e
        _live.add(self)
        self.hello = self._answer()

    @classmethod
    def once(cls, spec: dict, env: dict | None = None) -> dict:
        """The first answer of a worker whose mode answers once (memory, first-call); the process then ends."""
        worker = cls(spec, env)
        worker.close()
        return worker.hello

    @classmethod
    def for_case(cls, w: Workload, row: str, device: str) -> "Worker":
        """A worker that builds row `row` ("fnx", "torch compile", ...) of the registered case `w` on `device`."""
        return cls({"framework": row.split()[0], "row": row, "workload": w.id, "case": w.case, "size": w.size,
                    "device": device, "mode": "case"})

    def bench(self) -> Bench:
        """The runner's Bench of a serving worker: each repetition timed in the worker, which reports it."""
        return Bench(lambda: self.call("time")["seconds"], ops=self.hello["ops"], measure=float, close=self.close,
                     settle=self.wait_for_the_others, profile=lambda top: self.call("profile", top)["text"])

    def wait_for_the_others(self) -> None:
        """Wait until the runner's other workers are quiet (no CPU used for QUIET_WINDOW_S, at most QUIET_MAX_S):
        after its repetition a worker's thread pools spin for a while (OpenBLAS's about 0.1 s, libgomp's after
        each region), which would take a core from this worker's next repetition on a small machine."""
        others = [w.proc.pid for w in _live if w is not self]
        deadline = time.monotonic() + QUIET_MAX_S
        used = [_cpu_ticks(pid) for pid in others]
        while others and time.monotonic() < deadline:
            time.sleep(QUIET_WINDOW_S)
            now = [_cpu_ticks(pid) for pid in others]
            if now == used:
                return
            used = now

    def call(self, *request) -> dict:
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return self._answer()

    def _answer(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            status = self.proc.wait()
            raise RuntimeError(f"worker ({self.label}) exited with status {status}; its stderr is above")
        answer = json.loads(line)
        if "skip" in answer or "error" in answer:
            self.close()
            if "skip" in answer:
                raise Skip(answer["skip"])
            raise RuntimeError(f"worker ({self.label}): {answer['error']}")
        return answer

    def close(self) -> None:
        _live.discard(self)
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


_live: set = set()   # the workers started and not yet closed


def _cpu_ticks(pid: int) -> int | None:
    """CPU time that process `pid` has used (all its threads, user and system) in clock ticks; None once gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[11]) + int(fields[12])


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


def environment_note(title: str, env: dict) -> str:
    """The line under the table that says what a worker ran under: interpreter, versions, thread pools."""
    versions = ", ".join(f"{k} {env[k]}" for k in ("fnx", "torch", "numpy") if k in env)
    torch = (f"; torch {env['torch_threads']} threads, BLAS {env['torch_blas']}, {env['torch_cpu_capability']}"
             if "torch_threads" in env else "")
    fnx = f"; fnx {env['fnx_threads']} threads" if "fnx_threads" in env else ""
    return (f"{title} worker: {env['python']} (python {env['python_version']}), {versions}{fnx}{torch}; "
            f"thread pools: {'; '.join(sorted(env['threadpools'])) or 'none'}")


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


def _steps(spec: dict, run) -> Bench:
    """Whole steps of a W9/W12 model for one repetition, after WARMUP_STEPS of them (the first compiles)."""
    for _ in range(WARMUP_STEPS):
        last = _first_step(spec, run)
    ops = max(1, round(MIN_REPETITION_S / max(last, 1e-9)))

    def steps():
        for _ in range(ops):
            run()

    return Bench(steps, ops=ops)


def _case(spec: dict) -> Bench:
    """The Bench of the registered case the spec names, built by its builder in this process."""
    for w in all_workloads():
        if (w.id, w.case, w.size) == (spec["workload"], spec["case"], spec["size"]):
            return w.build(spec["row"], spec["device"])
    raise LookupError(f"no registered case {spec['workload']} {spec['case']!r} (size {spec['size']})")


def _serve(spec: dict, bench: Bench, send) -> None:
    from .profiling import profile_text
    from .runner import timed

    send({"ops": bench.ops, "env": _environment(spec)})
    try:
        for line in sys.stdin:
            request = json.loads(line)
            if request[0] == "time":
                send({"seconds": _timed_beside_neighbour(bench) if spec.get("neighbour") else timed(bench)})
            elif request[0] == "profile":
                send({"text": profile_text(bench, int(request[1]))})
            else:
                return
    finally:
        if bench.close is not None:
            bench.close()


def main(argv: list[str]) -> int:
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)   # the frameworks' own prints go to stderr, not into the answers

    def send(msg: dict) -> None:
        answers.write(json.dumps(msg) + "\n")

    spec = json.loads(argv[0])
    try:
        if spec["mode"] == "case":
            _serve(spec, _case(spec), send)
            return 0
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
            _serve(spec, _steps(spec, run), send)
    except (Skip, NotImplementedError) as e:
        send({"skip": str(e).splitlines()[0] if str(e) else type(e).__name__})
    except Exception as e:   # reported to the runner, which marks the row as an error
        traceback.print_exc()
        send({"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
