"""Bounded waits for MPI collectives, and word between the ranks about who has left the job.

MPI has no timeouts: a collective that one rank never joins blocks the others forever. So every host
collective is started nonblocking (MPI's I* calls) and waited for here, by polling its request. Between polls
the wait reads the small messages that ranks exchange on a private duplicate of the communicator:

- LEFT: a rank that leaves the job normally (the end of its script, or `sys.exit`) tells the others how many
  collectives it joined. A rank waiting in a later collective raises at once, naming the collective and the
  rank that left.
- QUERY / ANSWER: a rank whose wait reaches the timeout asks the others what they are doing. Ranks waiting in
  a collective answer with its name and number; a rank that died, hangs or is busy outside fnx.distributed
  does not. The error names the ranks that have not joined.

The error is a `DistBackendError`; uncaught, it aborts the whole job like any exception (process_group.py),
so the other ranks do not wait for their own timeouts. MPI moves the data of a nonblocking collective only
while it is polled, so a wait polls without pause (yielding the CPU to other processes between polls, as MPI's
blocking calls do) for its first second, then every millisecond.
"""
from __future__ import annotations

import os
import time

from ..core import FnxRuntimeError

__all__ = ["DistBackendError", "Liveness", "Deadline", "settle"]

_LEFT, _QUERY, _ANSWER = 1, 2, 3
_SPIN_SECONDS = 1.0  # how long a wait polls without sleeping: a large transfer moves only while polled
_MAX_NAP = 1e-3      # the longest sleep between polls after that
_GRACE = 2.0         # seconds to wait for answers to a query, or for LEFT messages to go out


class DistBackendError(FnxRuntimeError):
    """A collective cannot complete: a rank left the job, or the timeout passed (PyTorch's DistBackendError).

    The process group is unusable afterwards: later collectives raise it again."""


def settle(req, limit: float, what: str) -> None:
    """Wait for `req` for at most `limit` seconds, polling; raise DistBackendError naming `what` after that."""
    deadline = time.monotonic() + limit
    nap = 1e-5
    while not req.Test():
        if time.monotonic() > deadline:
            raise DistBackendError(f"fnx.distributed.{what} timed out after {limit:g} s: not every rank called it "
                                   f"(init_process_group(timeout=...) sets the limit)")
        time.sleep(nap)
        nap = min(nap * 2, _MAX_NAP)


class Deadline:
    """The waits of a group made by `new_group`: bounded by the timeout, but without Liveness's word about ranks
    that left (its counts are the world's), so a rank that left a group is noticed by the timeout."""

    def __init__(self, timeout: float):
        self.timeout = timeout

    def begin(self, what: str, check: bool = False) -> int:
        return 0

    def wait(self, req, what: str, seq: int, timeout: float | None = None) -> None:
        settle(req, self.timeout if timeout is None else timeout, what)


class Liveness:
    """This rank's side of the watch: counts the collectives it joins, waits for them with a deadline, answers
    the other ranks' questions and tells them when it leaves."""

    def __init__(self, comm, MPI, timeout: float):
        self.MPI, self.timeout = MPI, timeout
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.ctl, req = comm.Idup()
        settle(req, timeout, "init_process_group")
        self.ctl.Set_errhandler(MPI.ERRORS_RETURN)  # a message to a dead rank fails here, not the job
        self.status = MPI.Status()
        self.joined = 0                   # collectives this rank has started
        self.left: dict[int, int] = {}    # rank -> collectives it had joined when it left
        self.answers: dict[int, str] = {}
        self.sends: list = []             # (request, buffer) of messages on their way
        self.broken: str | None = None    # the error that made the process group unusable
        self.gone = False

    # ------------------------------------------------------------ collectives
    def begin(self, what: str, check: bool = False) -> int:
        """The number of the collective `what` that this rank is about to start. The metadata check before a
        collective (`check`) is numbered as the collective that follows it, and counts only with it."""
        if self.broken is not None:
            raise DistBackendError(f"fnx.distributed.{what}: the process group is unusable after an earlier error: "
                                   f"{self.broken}")
        if check:
            return self.joined + 1
        self.joined += 1
        return self.joined

    def wait(self, req, what: str, seq: int, timeout: float | None = None) -> None:
        """Wait until `req` (collective number `seq`, named `what`) completes; raise DistBackendError when a rank
        that has to join it has left, or after `timeout` seconds (default: the process group's)."""
        if req.Test():
            return
        limit = self.timeout if timeout is None else timeout
        start = time.monotonic()
        deadline, spin_until, look, nap = start + limit, start + _SPIN_SECONDS, start, 1e-5
        while not req.Test():
            now = time.monotonic()
            if now >= look:  # the messages, every millisecond: reading them costs more than a poll
                look = now + _MAX_NAP
                self.serve(what, seq)
                if self.left:
                    self._check_left(what, seq)
                if now > deadline:
                    self._fail(self._timed_out(what, seq, limit))
            if now < spin_until:
                os.sched_yield()
            else:
                time.sleep(nap)
                nap = min(nap * 2, _MAX_NAP)

    def _check_left(self, what: str, seq: int) -> None:
        gone = sorted((r, n) for r, n in self.left.items() if n < seq)
        if gone:
            who = "; ".join(f"rank {r} left the job (the end of its script or sys.exit) after {_calls(n)}"
                            for r, n in gone)
            self._fail(f"fnx.distributed.{what} ({_nth(seq)} collective call of rank {self.rank}) can never "
                       f"complete: {who}")

    def _timed_out(self, what: str, seq: int, limit: float) -> str:
        """The timeout error: asks the other ranks what they are doing and names those that have not joined."""
        self.answers = {}
        asked = [r for r in range(self.size) if r != self.rank and r not in self.left]
        for r in asked:
            self._send(r, _QUERY, "?")
        end = time.monotonic() + min(limit, _GRACE)
        while len(self.answers) < len(asked) and time.monotonic() < end:
            self.serve(what, seq)
            time.sleep(_MAX_NAP)
        missing, notes = [], []
        for r in range(self.size):
            answer = self.answers.get(r)
            if r == self.rank or answer == f"{seq} {what}":
                continue
            missing.append(r)
            if r in self.left:
                notes.append(f"rank {r} left the job after {_calls(self.left[r])}")
            elif answer is None:
                notes.append(f"rank {r} did not answer (it may have died, hung, or be busy outside "
                             f"fnx.distributed)")
            elif answer.startswith("- "):
                notes.append(f"rank {r} is leaving the job")
            else:
                n, _, doing = answer.partition(" ")
                notes.append(f"rank {r} is waiting in {doing} (its {_nth(int(n))} collective call)")
        waiting_for = (f"waiting for rank{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))}: "
                       f"{'; '.join(notes)}" if missing else "although every rank is waiting in it")
        return (f"fnx.distributed.{what} ({_nth(seq)} collective call of rank {self.rank}) timed out after "
                f"{limit:g} s, {waiting_for}. init_process_group(timeout=...) sets the limit")

    def _fail(self, message: str):
        self.broken = message
        raise DistBackendError(message)

    # ------------------------------------------------------------ messages
    def serve(self, what: str | None, seq: int) -> None:
        """Read the messages that have arrived: note who left, answer queries, collect answers."""
        MPI, ctl, status = self.MPI, self.ctl, self.status
        try:
            while ctl.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG, status):
                src, tag = status.Get_source(), status.Get_tag()
                buf = bytearray(status.Get_count(MPI.BYTE))
                ctl.Recv([buf, MPI.BYTE], src, tag)
                text = buf.decode()
                if tag == _LEFT:
                    self.left[src] = int(text)
                elif tag == _QUERY:
                    self._send(src, _ANSWER, f"{seq} {what}" if what is not None else "- leaving")
                elif tag == _ANSWER:
                    self.answers[src] = text
        except MPI.Exception:
            pass  # a broken connection to a dead rank: the deadline still holds

    def _send(self, dest: int, tag: int, text: str) -> None:
        data = bytearray(text.encode())
        try:
            self.sends.append((self.ctl.Isend([data, self.MPI.BYTE], dest, tag), data))
        except self.MPI.Exception:
            pass
        self.sends = [(req, buf) for req, buf in self.sends if not self._sent(req)]

    def _sent(self, req) -> bool:
        try:
            return req.Test()
        except self.MPI.Exception:
            return True

    def leave(self) -> None:
        """At exit: tell the ranks still in the job how many collectives this rank joined (once)."""
        if self.gone:
            return
        self.gone = True
        self.serve(None, self.joined)
        for r in range(self.size):
            if r != self.rank and r not in self.left:
                self._send(r, _LEFT, str(self.joined))
        end = time.monotonic() + _GRACE
        while self.sends and time.monotonic() < end:
            self.sends = [(req, buf) for req, buf in self.sends if not self._sent(req)]
            time.sleep(_MAX_NAP)


def _nth(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 < 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _calls(n: int) -> str:
    return f"{n} collective call{'s' if n != 1 else ''}"
