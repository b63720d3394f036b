"""`fnx.multiprocessing`: PyTorch's torch.multiprocessing: Python's multiprocessing under the same names, plus
`spawn` / `start_processes`, which run fn(i, *args) in nprocs new processes and raise in the parent, with the
child's traceback, as soon as one of them fails (the others are terminated).

fnx tensors cross processes by value (pickled): a tensor put on a Queue or passed to a Process is a copy in the
receiver, with or without `share_memory_()`; the sharing strategies therefore change nothing and are kept only
so that programs setting them run. `spawn` with the default start method "spawn" re-imports the main script in
each child, so its top level must sit under `if __name__ == "__main__":`, as with PyTorch.
"""
from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import signal
import sys
import traceback
from multiprocessing import *  # noqa: F401,F403  (Process, Queue, get_context, ...: __all__ lists fnx's own)
from typing import Callable

__all__ = ["spawn", "start_processes", "ProcessContext", "ProcessException",
           "ProcessRaisedException", "ProcessExitedException", "set_sharing_strategy", "get_sharing_strategy",
           "get_all_sharing_strategies"]

_STRATEGIES = {"file_descriptor", "file_system"}
_strategy = "file_descriptor"


def get_all_sharing_strategies() -> set:
    """The strategies PyTorch knows ({'file_descriptor', 'file_system'})."""
    return set(_STRATEGIES)


def get_sharing_strategy() -> str:
    """The strategy last set (fnx sends tensors by value whatever it is)."""
    return _strategy


def set_sharing_strategy(new_strategy: str) -> None:
    """Record `new_strategy` (fnx sends tensors by value: see the module docstring)."""
    global _strategy
    if new_strategy not in _STRATEGIES:
        raise ValueError(f"set_sharing_strategy: unknown strategy {new_strategy!r}; one of {sorted(_STRATEGIES)}")
    _strategy = new_strategy


class ProcessException(Exception):
    """A spawned process failed: `error_index` is its index, `pid` its process id."""

    def __init__(self, msg: str, error_index: int, pid: int):
        super().__init__(msg)
        self.msg, self.error_index, self.pid = msg, error_index, pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid)


class ProcessRaisedException(ProcessException):
    """A spawned process raised an exception; the message holds its traceback."""


class ProcessExitedException(ProcessException):
    """A spawned process exited with a nonzero code (or was killed by a signal) without an exception."""

    def __init__(self, msg: str, error_index: int, error_pid: int, exit_code: int, signal_name: str | None = None):
        super().__init__(msg, error_index, error_pid)
        self.exit_code, self.signal_name = exit_code, signal_name

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid, self.exit_code, self.signal_name)


def _run(fn: Callable, i: int, args: tuple, errors) -> None:
    """A child's body: fn(i, *args); an exception goes to the parent as its traceback text."""
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass
    except Exception:
        errors.put(traceback.format_exc())
        sys.exit(1)


class ProcessContext:
    """The processes of one `start_processes` call: `join` waits for them and raises when one fails."""

    def __init__(self, processes: list, error_queues: list):
        self.processes, self.error_queues = processes, error_queues
        self._left = {p.sentinel: i for i, p in enumerate(processes)}

    def pids(self) -> list:
        return [p.pid for p in self.processes]

    def join(self, timeout: float | None = None) -> bool:
        """Wait up to `timeout` seconds (None: until one ends) for the processes; True once all ended well.
        When one failed, terminate the others and raise ProcessRaisedException (it raised: its traceback) or
        ProcessExitedException (it exited with a nonzero code or a signal)."""
        if not self._left:
            return True
        for sentinel in multiprocessing.connection.wait(list(self._left), timeout=timeout):
            i = self._left.pop(sentinel)
            process = self.processes[i]
            process.join()
            if process.exitcode != 0:
                self._fail(i)
        return not self._left

    def _fail(self, i: int) -> None:
        for other in self.processes:
            if other.is_alive():
                other.terminate()
            other.join()
        process, queue = self.processes[i], self.error_queues[i]
        if not queue.empty():
            raise ProcessRaisedException(f"\n\n-- Process {i} terminated with the following error:\n{queue.get()}",
                                         i, process.pid)
        code = process.exitcode
        if code < 0:
            name = signal.Signals(-code).name
            raise ProcessExitedException(f"process {i} terminated with signal {name}", i, process.pid, code, name)
        raise ProcessExitedException(f"process {i} terminated with exit code {code}", i, process.pid, code)


def start_processes(fn: Callable, args: tuple = (), nprocs: int = 1, join: bool = True, daemon: bool = False,
                    start_method: str = "spawn") -> ProcessContext | None:
    """Run fn(i, *args) for i in 0..nprocs-1, each in a new process started with `start_method`; with `join`,
    wait for all (raising when one fails), else return their ProcessContext."""
    ctx = multiprocessing.get_context(start_method)
    processes, queues = [], []
    for i in range(nprocs):
        queue = ctx.SimpleQueue()
        process = ctx.Process(target=_run, args=(fn, i, tuple(args), queue), daemon=daemon)
        process.start()
        processes.append(process)
        queues.append(queue)
    context = ProcessContext(processes, queues)
    if not join:
        return context
    while not context.join():
        pass
    return None


def spawn(fn: Callable, args: tuple = (), nprocs: int = 1, join: bool = True, daemon: bool = False,
          start_method: str = "spawn") -> ProcessContext | None:
    """PyTorch's torch.multiprocessing.spawn: start_processes with the "spawn" start method."""
    return start_processes(fn, args, nprocs, join, daemon, start_method)
