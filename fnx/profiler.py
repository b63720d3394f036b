"""`fnx.profiler`: PyTorch's torch.profiler (and torch.autograd.profiler) over fnx's ops.

While a `profile` records, every op that computes is an event: the `impl` of each primitive (eager ops, the
eager backward pass, the interpreter's steps) is wrapped as FNX_DEBUG wraps it (fnx/debug.py), and each call of
a compiled function's executable is one "compiled executable" range (through `core.profile_hook`). `record_function`
adds named ranges around user code, and an optimizer's step is the range "Optimizer.step#Adam.step" as in
PyTorch. Nothing is installed while no profile records, so ops cost what they cost without one.

An event's total time is its wall time; its self time excludes the events nested in it. With CUDA among the
`activities`, each op waits for the GPU before its clock stops, so that device work is counted in the op that
launched it (and is reported in the device columns too). `key_averages()` groups the events by name (and by
input shapes or source location) into PyTorch's table; `export_chrome_trace` writes the trace as Chrome's
trace-event JSON, which chrome://tracing, Perfetto and TensorBoard's profiler open.
"""
from __future__ import annotations

import enum
import functools
import gzip
import json
import os
import socket
import sys
import threading
import time
from typing import Callable, Iterable

import numpy as np

from . import core
from .core import FnxValueError, Primitive
from .cuda import is_available as cuda_is_available
from .debug import WrappedImpl

__all__ = ["profile", "record_function", "schedule", "tensorboard_trace_handler", "ProfilerActivity",
           "ProfilerAction", "supported_activities", "EventList", "FunctionEvent", "FunctionEventAvg"]

_FNX_DIR = os.path.dirname(os.path.abspath(__file__))


class ProfilerActivity(enum.Enum):
    """What a profile records: CPU (every op's wall time) and CUDA (device work, waited for inside each op)."""
    CPU = "CPU"
    CUDA = "CUDA"


def supported_activities() -> set:
    """The activities this process can record: CPU, and CUDA when a GPU is available."""
    return {ProfilerActivity.CPU, ProfilerActivity.CUDA} if cuda_is_available() else {ProfilerActivity.CPU}


class ProfilerAction(enum.Enum):
    """What a schedule asks of a step."""
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0,
             skip_first_wait: int = 0) -> Callable[[int], ProfilerAction]:
    """PyTorch's schedule: after `skip_first` steps, cycles of `wait` idle, `warmup` unrecorded and `active`
    recorded steps (the last of each cycle saves: on_trace_ready runs), `repeat` cycles (0: forever);
    `skip_first_wait` skips the first cycle's wait."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise FnxValueError(f"schedule: invalid profiler schedule arguments (wait={wait}, warmup={warmup}, "
                            f"active={active}, repeat={repeat}, skip_first={skip_first}): active must be positive "
                            f"and the others non-negative")

    def action(step: int) -> ProfilerAction:
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait:
            step += wait
        cycle = wait + warmup + active
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        at = step % cycle
        if at < wait:
            return ProfilerAction.NONE
        if at < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if at < cycle - 1 else ProfilerAction.RECORD_AND_SAVE
    return action


def _always_record(step: int) -> ProfilerAction:
    return ProfilerAction.RECORD


def tensorboard_trace_handler(dir_name: str, worker_name: str | None = None, use_gzip: bool = False) -> Callable:
    """An on_trace_ready handler writing each saved trace to `dir_name` as
    `<worker>.<time in ns>.pt.trace.json` (gzipped with `use_gzip`), the layout TensorBoard's profiler reads."""
    worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"

    def handler(prof: "profile") -> None:
        os.makedirs(dir_name, exist_ok=True)
        name = f"{worker}.{time.time_ns()}.pt.trace.json" + (".gz" if use_gzip else "")
        prof.export_chrome_trace(os.path.join(dir_name, name))
    return handler


# ---------------------------------------------------------------- events
class FunctionEvent:
    """One recorded op or range: name, start and end (us since the profile began), self time, input shapes,
    bytes its outputs hold, the thread and (with_stack) the user's source lines that called it."""

    __slots__ = ("name", "start_us", "end_us", "child_us", "input_shapes", "cpu_memory_usage", "thread", "stack",
                 "device_us", "is_range")

    def __init__(self, name: str, start_us: float, input_shapes, thread: int, stack, is_range: bool):
        self.name, self.start_us, self.end_us, self.child_us = name, start_us, start_us, 0.0
        self.input_shapes, self.cpu_memory_usage, self.thread, self.stack = input_shapes, 0, thread, stack
        self.device_us, self.is_range = 0.0, is_range

    key = property(lambda self: self.name)
    cpu_time_total = property(lambda self: self.end_us - self.start_us)
    self_cpu_time_total = property(lambda self: self.cpu_time_total - self.child_us)
    device_time_total = property(lambda self: self.device_us)
    self_device_time_total = device_time_total
    self_cpu_memory_usage = property(lambda self: self.cpu_memory_usage)

    def __repr__(self) -> str:
        return (f"<FunctionEvent name={self.name} cpu_time_total={self.cpu_time_total:.1f}us "
                f"input_shapes={self.input_shapes}>")


class FunctionEventAvg:
    """The events of one key summed: totals, self totals, memory, count; `cpu_time` is the mean total."""

    def __init__(self, key: str, input_shapes=None, stack=None):
        self.key, self.input_shapes, self.stack = key, input_shapes, stack
        self.count = 0
        self.cpu_time_total = self.self_cpu_time_total = 0.0
        self.device_time_total = self.self_device_time_total = 0.0
        self.cpu_memory_usage = self.self_cpu_memory_usage = 0

    def add(self, event: FunctionEvent) -> None:
        self.count += 1
        self.cpu_time_total += event.cpu_time_total
        self.self_cpu_time_total += event.self_cpu_time_total
        self.device_time_total += event.device_us
        self.self_device_time_total += 0.0 if event.is_range else event.device_us
        self.cpu_memory_usage += event.cpu_memory_usage
        self.self_cpu_memory_usage += 0 if event.is_range else event.cpu_memory_usage

    cpu_time = property(lambda self: self.cpu_time_total / max(self.count, 1))
    device_time = property(lambda self: self.device_time_total / max(self.count, 1))

    def __repr__(self) -> str:
        return (f"<FunctionEventAvg key={self.key} self_cpu_time={self.self_cpu_time_total:.1f}us "
                f"cpu_time={self.cpu_time:.1f}us input_shapes={self.input_shapes}>")


_SORT_KEYS = {"cpu_time": "cpu_time", "cuda_time": "device_time", "device_time": "device_time",
              "cpu_time_total": "cpu_time_total", "cuda_time_total": "device_time_total",
              "device_time_total": "device_time_total", "self_cpu_time_total": "self_cpu_time_total",
              "self_cuda_time_total": "self_device_time_total", "self_device_time_total": "self_device_time_total",
              "cpu_memory_usage": "cpu_memory_usage", "self_cpu_memory_usage": "self_cpu_memory_usage",
              "count": "count"}


def _time(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    return f"{us / 1e3:.3f}ms" if us >= 1e3 else f"{us:.3f}us"


def _bytes(n: float) -> str:
    for unit, size in (("Gb", 1 << 30), ("Mb", 1 << 20), ("Kb", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{int(n)} b"


class EventList(list):
    """A list of events (FunctionEvent) or of their averages (FunctionEventAvg), with PyTorch's `table`."""

    def __init__(self, items=(), *, devices: bool = False, memory: bool = False):
        super().__init__(items)
        self._devices, self._memory = devices, memory

    def table(self, sort_by: str | None = None, row_limit: int = 100, max_src_column_width: int = 75,
              max_name_column_width: int = 55, max_shapes_column_width: int = 80, header: str | None = None,
              top_level_events_only: bool = False) -> str:
        """PyTorch's profiler table: one row per item, sorted by `sort_by` (descending), at most `row_limit`."""
        rows = list(self)
        if sort_by is not None:
            if sort_by not in _SORT_KEYS:
                raise FnxValueError(f"table: sort_by={sort_by!r} is not one of {sorted(_SORT_KEYS)}")
            rows.sort(key=lambda e: getattr(e, _SORT_KEYS[sort_by]), reverse=True)
        if row_limit is not None and row_limit > 0:
            rows = rows[:row_limit]
        self_total = sum(e.self_cpu_time_total for e in self) or 1.0
        total = self_total
        shapes = any(getattr(e, "input_shapes", None) for e in rows) and isinstance(self[0], FunctionEventAvg) \
            and any(e.input_shapes is not None for e in self)
        stacks = any(getattr(e, "stack", None) for e in rows)
        columns = [("Name", max_name_column_width), ("Self CPU %", 10), ("Self CPU", 12), ("CPU total %", 11),
                   ("CPU total", 12), ("CPU time avg", 12)]
        if self._devices:
            columns += [("Self CUDA", 12), ("Self CUDA %", 11), ("CUDA total", 12), ("CUDA time avg", 13)]
        if self._memory:
            columns += [("CPU Mem", 12), ("Self CPU Mem", 12)]
        columns += [("# of Calls", 10)]
        if shapes:
            columns += [("Input Shapes", max_shapes_column_width)]
        if stacks:
            columns += [("Source Location", max_src_column_width)]
        rule = "  ".join("-" * w for _, w in columns)
        lines = [header] if header else []
        lines += [rule, "  ".join(f"{n:>{w}}" if i else f"{n:<{w}}" for i, (n, w) in enumerate(columns)), rule]
        device_total = sum(getattr(e, "self_device_time_total", 0.0) for e in self) or 1.0
        for e in rows:
            count = getattr(e, "count", 1)
            cells = [e.key[:max_name_column_width], f"{100 * e.self_cpu_time_total / total:.2f}%",
                     _time(e.self_cpu_time_total), f"{100 * e.cpu_time_total / total:.2f}%", _time(e.cpu_time_total),
                     _time(e.cpu_time_total / max(count, 1))]
            if self._devices:
                cells += [_time(e.self_device_time_total), f"{100 * e.self_device_time_total / device_total:.2f}%",
                          _time(e.device_time_total), _time(e.device_time_total / max(count, 1))]
            if self._memory:
                cells += [_bytes(e.cpu_memory_usage), _bytes(e.self_cpu_memory_usage)]
            cells += [str(count)]
            if shapes:
                cells += [str(e.input_shapes)[:max_shapes_column_width]]
            if stacks:
                cells += [(" <- ".join(e.stack or ()))[:max_src_column_width]]
            lines.append("  ".join(f"{c:>{w}}" if i else f"{c:<{w}}" for i, (c, (_, w)) in
                                   enumerate(zip(cells, columns))))
        lines += [rule, f"Self CPU time total: {_time(self_total if self else 0.0)}"]
        if self._devices:
            lines.append(f"Self CUDA time total: {_time(sum(e.self_device_time_total for e in self))}")
        return "\n".join(lines) + "\n"

    def __str__(self) -> str:
        return self.table()

    def total_average(self) -> FunctionEventAvg:
        """All items summed into one."""
        total = FunctionEventAvg("Total")
        for e in self:
            if isinstance(e, FunctionEventAvg):
                for name in ("count", "cpu_time_total", "self_cpu_time_total", "device_time_total",
                             "self_device_time_total", "cpu_memory_usage", "self_cpu_memory_usage"):
                    setattr(total, name, getattr(total, name) + getattr(e, name))
            else:
                total.add(e)
        return total


# ---------------------------------------------------------------- recording
class _Recorder:
    """The events of one recording and the stack of open ones per thread (nested ranges and ops)."""

    def __init__(self, record_shapes: bool, profile_memory: bool, with_stack: bool, sync_device: bool):
        self.record_shapes, self.profile_memory, self.with_stack = record_shapes, profile_memory, with_stack
        self.sync_device = sync_device
        self.events: list[FunctionEvent] = []
        self.origin = time.perf_counter()
        self.open = threading.local()

    def begin(self, name: str, shapes, is_range: bool) -> FunctionEvent:
        stack = getattr(self.open, "stack", None)
        if stack is None:
            stack = self.open.stack = []
        event = FunctionEvent(name, (time.perf_counter() - self.origin) * 1e6, shapes, threading.get_ident(),
                              _user_stack() if self.with_stack else None, is_range)
        stack.append(event)
        return event

    def end(self, event: FunctionEvent, device_us: float = 0.0) -> None:
        event.end_us = (time.perf_counter() - self.origin) * 1e6
        event.device_us = device_us
        stack = self.open.stack
        stack.pop()
        if stack and stack[-1].is_range:   # a range's totals include what ran inside it
            stack[-1].child_us += event.cpu_time_total
            stack[-1].device_us += event.device_us
            stack[-1].cpu_memory_usage += event.cpu_memory_usage
        elif stack:
            stack[-1].child_us += event.cpu_time_total
        self.events.append(event)


_active: list[_Recorder] = []   # the recording profiles (ops record into each)
_install_lock = threading.Lock()


def _user_stack(depth: int = 5) -> tuple:
    """The innermost `depth` frames outside fnx as 'file(line): function'."""
    frames, f = [], sys._getframe(2)
    while f is not None and len(frames) < depth:
        path = f.f_code.co_filename
        if not os.path.abspath(path).startswith(_FNX_DIR + os.sep):
            frames.append(f"{path}({f.f_lineno}): {f.f_code.co_name}")
        f = f.f_back
    return tuple(frames)


def _shapes(arrays) -> list:
    return [list(getattr(a, "shape", ())) for a in arrays]


def _sync(arrays) -> None:
    """Wait for the GPU where an output lives on one (a CuPy array)."""
    for a in arrays if isinstance(arrays, (list, tuple)) else (arrays,):
        if not isinstance(a, np.ndarray) and hasattr(a, "device") and hasattr(a.device, "synchronize"):
            a.device.synchronize()
            return


def _nbytes(out) -> int:
    outs = out if isinstance(out, (list, tuple)) else (out,)
    return int(sum(getattr(o, "nbytes", 0) for o in outs))


def _profiled_impl(name: str, impl):
    def run(xp, *arrays, **params):
        recorders = list(_active)
        if not recorders:
            return impl(xp, *arrays, **params)
        events = [(r, r.begin(name, _shapes(arrays) if r.record_shapes else None, False)) for r in recorders]
        start = time.perf_counter()
        out = impl(xp, *arrays, **params)
        device_us = 0.0
        if xp is not np and any(r.sync_device for r in recorders):
            _sync(out)
            device_us = (time.perf_counter() - start) * 1e6
        size = _nbytes(out) if any(r.profile_memory for r in recorders) else 0
        for r, event in reversed(events):
            event.cpu_memory_usage = size
            r.end(event, device_us)
        return out
    return run


class _Range:
    """A context manager recording one range event in every active recorder."""

    __slots__ = ("name", "events")

    def __init__(self, name: str):
        self.name, self.events = name, []

    def __enter__(self):
        self.events = [(r, r.begin(self.name, None, True)) for r in _active]
        return self

    def __exit__(self, *exc) -> None:
        for r, event in reversed(self.events):
            r.end(event)
        self.events = []


def _start(recorder: _Recorder) -> None:
    with _install_lock:
        if not _active:
            core.set_impl_descriptor(WrappedImpl(Primitive.__dict__["impl"], _profiled_impl))
            core.profile_hook = _Range
        _active.append(recorder)


def _stop(recorder: _Recorder) -> None:
    with _install_lock:
        if recorder in _active:
            _active.remove(recorder)
        installed = Primitive.__dict__["impl"]
        if not _active and isinstance(installed, WrappedImpl) and installed.wrap is _profiled_impl:
            core.set_impl_descriptor(installed.slot)
            core.profile_hook = None


class record_function:
    """A named range in the profile (a context manager or a decorator), as torch.profiler.record_function: the
    ops inside count toward its total time. Costs a list check when no profile records."""

    def __init__(self, name: str, args: str | None = None):
        self.name = name
        self._range = None

    def __enter__(self):
        if _active:
            self._range = _Range(self.name).__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._range is not None:
            self._range.__exit__()
            self._range = None

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with record_function(self.name):
                return fn(*args, **kwargs)
        return wrapped


class profile:
    """Record the ops run inside `with profile(...) as prof:` (PyTorch's torch.profiler.profile).

    `activities`: ProfilerActivity.CPU and/or CUDA (default: what `supported_activities()` gives);
    `schedule`: which steps (`prof.step()`) record, see `schedule()`; `on_trace_ready(prof)` runs when a
    recording ends (the end of each active cycle, or the profile's end); `record_shapes` keeps each op's input
    shapes (`key_averages(group_by_input_shape=True)`); `profile_memory` the bytes each op's outputs hold;
    `with_stack` the user's source lines that called it (`group_by_stack_n`). `with_flops`, `with_modules` and the
    experimental options are accepted and not recorded (FLOP counts and TorchScript module scopes are not
    measured). The older torch.autograd.profiler.profile arguments `enabled` and `use_cuda`/`use_device` work
    too.
    """

    def __init__(self, activities: Iterable | None = None, *, schedule: Callable | None = None,
                 on_trace_ready: Callable | None = None, record_shapes: bool = False, profile_memory: bool = False,
                 with_stack: bool = False, with_flops: bool = False, with_modules: bool = False,
                 experimental_config=None, execution_trace_observer=None, acc_events: bool = False,
                 enabled: bool = True, use_cuda: bool = False, use_device: str | None = None,
                 custom_trace_id_callback=None, **unused):
        chosen = set(activities) if activities is not None else supported_activities()
        if use_cuda or use_device == "cuda":
            chosen.add(ProfilerActivity.CUDA)
        for a in chosen:
            if not isinstance(a, ProfilerActivity):
                raise FnxValueError(f"profile: activities must be ProfilerActivity values, got {a!r}")
        self.activities = chosen
        self.schedule = schedule or _always_record
        self.on_trace_ready = on_trace_ready
        self.record_shapes, self.profile_memory, self.with_stack = record_shapes, profile_memory, with_stack
        self.enabled = enabled
        self.step_num = 0
        self._action = ProfilerAction.NONE
        self._recorder: _Recorder | None = None
        self._step_range: FunctionEvent | None = None
        self._events: list[FunctionEvent] = []

    # -------------------------------------------------------------- lifecycle
    def __enter__(self) -> "profile":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        """Begin: step 0's action decides whether it records."""
        self.step_num = 0
        self._transition(self.schedule(0))

    def stop(self) -> None:
        """End the profile: a recording in progress ends, and on_trace_ready runs for it."""
        if self._recorder is not None:
            self._finish(save=True)
        self._action = ProfilerAction.NONE

    def step(self) -> None:
        """Mark the end of a training step: the schedule's action for the next one takes effect. With a schedule,
        each recorded step is a range "ProfilerStep#N", as in PyTorch."""
        self.step_num += 1
        self._transition(self.schedule(self.step_num))

    def _transition(self, action: ProfilerAction) -> None:
        recording = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
        previous, self._action = self._action, action
        if self._recorder is not None and (previous == ProfilerAction.RECORD_AND_SAVE or action not in recording):
            self._finish(save=True)
        if action in recording and self._recorder is None and self.enabled:
            self._recorder = _Recorder(self.record_shapes, self.profile_memory, self.with_stack,
                                       ProfilerActivity.CUDA in self.activities)
            _start(self._recorder)
        if self._recorder is not None and self.schedule is not _always_record:
            self._close_step()
            self._step_range = self._recorder.begin(f"ProfilerStep#{self.step_num}", None, True)

    def _close_step(self) -> None:
        if self._step_range is not None:
            self._recorder.end(self._step_range)
            self._step_range = None

    def _finish(self, save: bool) -> None:
        self._close_step()
        recorder, self._recorder = self._recorder, None
        _stop(recorder)
        self._events = sorted(recorder.events, key=lambda e: e.start_us)
        if save and self.on_trace_ready is not None:
            self.on_trace_ready(self)

    # -------------------------------------------------------------- results
    def events(self) -> EventList:
        """The events of the last recording, in start order."""
        return EventList(self._events, devices=ProfilerActivity.CUDA in self.activities, memory=self.profile_memory)

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0,
                     group_by_overload_name: bool = False) -> EventList:
        """The events summed by name (and by input shapes, or by the first `group_by_stack_n` source lines)."""
        groups: dict = {}
        for e in self._events:
            shapes = str(e.input_shapes) if group_by_input_shape else None
            stack = tuple(e.stack[:group_by_stack_n]) if group_by_stack_n and e.stack else None
            key = (e.name, shapes, stack)
            if key not in groups:
                groups[key] = FunctionEventAvg(e.name, e.input_shapes if group_by_input_shape else None, stack)
            groups[key].add(e)
        return EventList(groups.values(), devices=ProfilerActivity.CUDA in self.activities,
                         memory=self.profile_memory)

    def table(self, *args, **kwargs) -> str:
        """key_averages().table(...) (the older torch.autograd.profiler API)."""
        return self.key_averages().table(*args, **kwargs)

    def export_chrome_trace(self, path: str) -> None:
        """Write the events as Chrome trace-event JSON (gzipped when `path` ends in .gz), atomically."""
        pid = os.getpid()
        trace = {"traceEvents": [
            {"name": e.name, "ph": "X", "cat": "user_annotation" if e.is_range else "cpu_op", "ts": e.start_us,
             "dur": e.cpu_time_total, "pid": pid, "tid": e.thread,
             "args": {k: v for k, v in (("Input Dims", e.input_shapes), ("Call stack", list(e.stack or ())))
                      if v}} for e in self._events], "displayTimeUnit": "ms"}
        data = json.dumps(trace).encode()
        tmp = f"{path}.tmp{os.getpid()}"
        with (gzip.open(tmp, "wb") if path.endswith(".gz") else open(tmp, "wb")) as f:
            f.write(data)
        os.replace(tmp, path)

    def __repr__(self) -> str:
        return f"<fnx.profiler.profile step={self.step_num} events={len(self._events)}>"

