"""fnx.profiler (torch.profiler): which events a profile records, how they nest and group, schedules, traces,
and that nothing stays installed afterwards. Times are measured, never asserted."""
import gzip
import json

import numpy as np
import pytest

import fnx
from fnx import nn
from fnx.core import Primitive
from fnx.profiler import ProfilerAction, ProfilerActivity, profile, record_function, schedule, \
    tensorboard_trace_handler


def _step(model, opt, x, y):
    with record_function("forward"):
        loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()


def _setup():
    fnx.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    return model, fnx.optim.SGD(model.parameters(), lr=0.1), fnx.randn(5, 8), fnx.randint(0, 4, (5,))


def test_ops_ranges_and_optimizer_steps_are_recorded_and_nest():
    model, opt, x, y = _setup()
    plain = Primitive.__dict__["impl"]
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=True) as prof:
        for _ in range(2):
            _step(model, opt, x, y)
    assert Primitive.__dict__["impl"] is plain      # nothing stays installed
    averages = {e.key: e for e in prof.key_averages()}
    assert averages["forward"].count == 2 and averages["Optimizer.step#SGD.step"].count == 2
    assert averages["matmul"].count >= 2 * 2       # two forward products a step, and their gradients
    for e in prof.events():
        assert 0 <= e.self_cpu_time_total <= e.cpu_time_total + 1e-6
    forward = [e for e in prof.events() if e.name == "forward"]
    inside = [e for e in prof.events() if e.name == "matmul" and forward[0].start_us <= e.start_us <= forward[0].end_us]
    assert inside and all(e.input_shapes for e in inside)
    assert forward[0].self_cpu_time_total < forward[0].cpu_time_total
    relu = [e for e in prof.events() if e.name == "max" or e.name == "relu"]
    assert relu and relu[0].cpu_memory_usage == 5 * 16 * 4        # its float32 output's bytes
    by_shape = prof.key_averages(group_by_input_shape=True)
    assert len({(e.key, str(e.input_shapes)) for e in by_shape}) == len(by_shape)
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=5)
    assert "Self CPU %" in table and "# of Calls" in table and "Self CPU time total:" in table
    assert len([line for line in table.splitlines() if "%" in line and "Self CPU %" not in line]) == 5
    with pytest.raises(ValueError, match="sort_by='speed' is not one of"):
        prof.key_averages().table(sort_by="speed")


def test_compiled_calls_are_ranges_and_nothing_records_outside_a_profile():
    f = fnx.compile(lambda a: (a * 2 + 1).sum())
    x = fnx.randn(16)
    f(x)
    with profile() as prof:
        f(x)
    names = [e.name for e in prof.events()]
    assert "fnx.compile(<lambda>)" in names, names
    with profile(enabled=False) as off:
        f(x)
    assert off.events() == []
    before = len(prof.events())
    f(x)
    assert len(prof.events()) == before


def test_a_schedule_records_its_active_steps_and_hands_each_cycle_to_on_trace_ready():
    action = schedule(wait=1, warmup=1, active=2, repeat=2, skip_first=1)
    assert [action(i) for i in range(11)] == [
        ProfilerAction.NONE, ProfilerAction.NONE, ProfilerAction.WARMUP, ProfilerAction.RECORD,
        ProfilerAction.RECORD_AND_SAVE, ProfilerAction.NONE, ProfilerAction.WARMUP, ProfilerAction.RECORD,
        ProfilerAction.RECORD_AND_SAVE, ProfilerAction.NONE, ProfilerAction.NONE]
    model, opt, x, y = _setup()
    saved = []
    with profile(schedule=action, on_trace_ready=lambda p: saved.append(
            sorted({e.name for e in p.events() if e.name.startswith("ProfilerStep")}))) as prof:
        for _ in range(11):
            _step(model, opt, x, y)
            prof.step()
    assert saved == [["ProfilerStep#3", "ProfilerStep#4"], ["ProfilerStep#7", "ProfilerStep#8"]]
    with pytest.raises(ValueError, match="active must be positive"):
        schedule(wait=1, warmup=0, active=0)


@pytest.mark.parametrize("use_gzip", [False, True])
def test_traces_are_chrome_trace_json(tmp_path, use_gzip):
    model, opt, x, y = _setup()
    with profile(on_trace_ready=tensorboard_trace_handler(str(tmp_path), "worker0", use_gzip), with_stack=True):
        _step(model, opt, x, y)
    (path,) = list(tmp_path.iterdir())
    assert path.name.startswith("worker0.") and path.name.endswith(".pt.trace.json" + (".gz" if use_gzip else ""))
    text = gzip.decompress(path.read_bytes()) if use_gzip else path.read_bytes()
    events = json.loads(text)["traceEvents"]
    assert {"forward", "matmul", "Optimizer.step#SGD.step"} <= {e["name"] for e in events}
    assert all(e["ph"] == "X" and e["dur"] >= 0 for e in events)
    assert any("test_profiler.py" in frame for e in events for frame in e["args"].get("Call stack", []))


def test_grouping_by_source_lines_and_the_older_autograd_profiler_api():
    x = fnx.randn(4, 4, requires_grad=True)
    with profile(with_stack=True, use_cuda=False) as prof:
        (x @ x).sum().backward()
    rows = prof.key_averages(group_by_stack_n=1)
    assert any(e.stack and "test_profiler.py" in e.stack[0] for e in rows)
    assert "Source Location" in rows.table()
    assert "matmul" in prof.table(sort_by="count")
    total = prof.key_averages().total_average()
    assert total.count == len(prof.events())
    np.testing.assert_allclose(total.self_cpu_time_total, sum(e.self_cpu_time_total for e in prof.events()))
