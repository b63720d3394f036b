"""W9's benchmark code cannot rot: each model of benchmarks/models.py builds in fnx at a tiny size and takes one
eager training step (forward, loss, backward, optimizer step) that changes its parameters. No timing here:
benchmarks report numbers, tests assert behaviour."""
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import fnx
from benchmarks.models import PROBES, unsupported
from benchmarks.tasks import MODELS, make_task


@pytest.mark.parametrize("model", [m for m in MODELS if not m.startswith("makemore")])
def test_w9_model_takes_a_training_step(model):
    task = make_task(fnx, model, "tiny")
    before = {n: p.detach().numpy().copy() for n, p in task.model.named_parameters()}
    loss = task.step(task.model)
    assert math.isfinite(float(loss))
    changed = [n for n, p in task.model.named_parameters() if not np.array_equal(p.detach().numpy(), before[n])]
    assert changed, "the optimizer step changed no parameter"


def test_w9_makemore_steps_the_program_s_own_model_and_data_loader():
    """makemore's rows run tests/programs/makemore.py's classes under the torch alias, which takes over `import
    torch` for the whole process: in a process of its own, as a W9 worker is."""
    code = ("import fnx, numpy as np\n"
            "from benchmarks.tasks import make_task\n"
            "task = make_task(fnx, 'makemore-rnn', 'tiny')\n"
            "before = [p.detach().numpy().copy() for p in task.model.parameters()]\n"
            "losses = [float(task.step(task.model)) for _ in range(2)]\n"
            "print(type(task.model).__module__, all(np.isfinite(losses)),\n"
            "      any(not np.array_equal(p.detach().numpy(), b) for p, b in zip(task.model.parameters(), before)))\n")
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["w9_makemore", "True", "True"]


def test_w9_gpt_ties_the_embedding_to_the_lm_head():
    gpt = make_task(fnx, "gpt", "tiny").model
    assert gpt.lm_head.weight is gpt.transformer.wte.weight
    assert "lm_head.weight" not in dict(gpt.named_parameters())


def test_w9_probes_report_constructs_as_strings():
    found = unsupported(fnx)
    assert {c for c, _, _ in found} <= {c for c, _, _ in PROBES}
    assert all(isinstance(error, str) and error for _, _, error in found)


def test_the_table_takes_a_memory_row_of_zeros():
    """W9m rows can measure 0 bytes at every repetition (a step that allocates nothing new): the table shows no
    spread and no ratio against such a reference instead of dividing by zero."""
    from benchmarks.runner import Result, _fill_ratios, format_table

    rows = [Result("W9m", "case", fw, "cpu", "MiB", "torch", times_s=[0.0, 0.0, 0.0]) for fw in ("torch", "fnx")]
    _fill_ratios(rows)
    assert rows[0].spread is None and rows[1].ratio is None
    assert "0.000 MiB" in format_table(rows)


def test_a_bench_settles_before_each_timed_repetition_and_outside_the_clock(monkeypatch):
    """W10's rows first set their BLAS threads and wait for their pool to go idle (`Bench.settle`), which the
    runner calls before every repetition, off the clock (a fake clock here, which a settle moves by an hour; the
    builder runs in this process, as one that starts its own processes does)."""
    import benchmarks.runner as runner
    from benchmarks.registry import Bench, Workload

    now, calls = [0.0], []
    monkeypatch.setattr(runner.time, "perf_counter", lambda: now[0])

    def settle(fw):
        calls.append(f"settle {fw}")
        now[0] += 3600.0

    def build(fw, device):
        return Bench(lambda: calls.append(f"run {fw}"), settle=lambda: settle(fw))

    w = Workload("T", "case", build, reference="a", frameworks=("a", "b"), warmup=0, own_processes=True)
    results = runner.run_case(w, ["a", "b"], "cpu", repeats=2)
    assert calls == ["settle a", "run a", "settle b", "run b"] * 2
    assert [r.times_s for r in results] == [[0.0, 0.0], [0.0, 0.0]]


def _w1_add():
    from benchmarks.registry import all_workloads

    return next(w for w in all_workloads() if w.id == "W1" and w.case.startswith("a + b"))


def test_each_row_is_built_and_timed_in_a_worker_process_of_its_own():
    """Frameworks never share a process: the runner hands W1's numpy row to a worker, which builds the registered
    case and reports each repetition's time; the runner's own copy of the builder (here one that raises) never
    runs."""
    import dataclasses

    import benchmarks.runner as runner

    def build(fw, device):
        raise AssertionError("built in the runner's process")

    (row,) = runner.run_case(dataclasses.replace(_w1_add(), build=build), ["numpy"], "cpu", repeats=2)
    assert row.skipped is None and not row.failed
    assert len(row.times_s) == 2 and all(0 < t < 60 for t in row.times_s)


def test_a_case_the_worker_cannot_find_is_an_error_row():
    import dataclasses

    import benchmarks.runner as runner

    (row,) = runner.run_case(dataclasses.replace(_w1_add(), case="no such case"), ["numpy"], "cpu", repeats=1)
    assert row.failed and "no registered case W1 'no such case'" in row.skipped


def test_a_repetition_starts_once_the_other_workers_are_quiet(monkeypatch):
    """Before each repetition the runner waits until the other workers have used no CPU for a window (their thread
    pools spin after a repetition), and never longer than QUIET_MAX_S (a fake clock and CPU counter here)."""
    from types import SimpleNamespace

    import benchmarks.worker as worker

    clock = [0.0]
    monkeypatch.setattr(worker, "time", SimpleNamespace(monotonic=lambda: clock[0],
                                                        sleep=lambda s: clock.__setitem__(0, clock[0] + s)))
    other, me = SimpleNamespace(proc=SimpleNamespace(pid=1)), SimpleNamespace()
    monkeypatch.setattr(worker, "_live", [other, me])
    looks = iter([5, 9, 12, 12, 13])   # the other worker's CPU ticks: busy twice, then quiet
    monkeypatch.setattr(worker, "_cpu_ticks", lambda pid: next(looks))
    worker.Worker.wait_for_the_others(me)
    assert next(looks) == 13 and clock[0] == 3 * worker.QUIET_WINDOW_S

    clock[0] = 0.0
    monkeypatch.setattr(worker, "_cpu_ticks", lambda pid: clock[0])   # never quiet
    worker.Worker.wait_for_the_others(me)
    assert worker.QUIET_MAX_S <= clock[0] < worker.QUIET_MAX_S + 2 * worker.QUIET_WINDOW_S

    clock[0] = 0.0
    monkeypatch.setattr(worker, "_live", [me])   # no other worker: no wait
    worker.Worker.wait_for_the_others(me)
    assert clock[0] == 0.0


def test_w10s_exported_gemm_runs_and_leaves_no_folder_behind(monkeypatch, tmp_path):
    """W10 builds the exported GEMM in a temporary folder and loads it: the library outlives the folder, which is
    gone once it is loaded (a W10 run left one folder per row in /tmp)."""
    import tempfile

    from benchmarks.export import _exported_gemm, _operands

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    run = _exported_gemm(32, 1)
    a, b = _operands(32)
    np.testing.assert_allclose(run(), a @ b, rtol=1e-4, atol=1e-4)
    assert list(tmp_path.iterdir()) == []
