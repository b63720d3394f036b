"""fnx.distributed, DistributedDataParallel and DistributedSampler.

Multi-process tests launch `mpiexec -n 2 python tests/distributed/worker_*.py` (mpiexec comes with the `mpich`
wheel of the test extra, next to the Python executable) with a timeout; each worker checks its results itself
and prints "OK rank R" at the end, and a failed check raises, which aborts the job with a non-zero status.
"""
import copy
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest

import fnx
from fnx.data import DistributedSampler
from fnx.distributed import DistBackendError
from fnx.distributed.liveness import _ANSWER, _LEFT, _QUERY, Liveness
from fnx.distributed.nccl import Watchdog

ROOT = Path(__file__).resolve().parents[1]
WORKERS = Path(__file__).resolve().parent / "distributed"


def _mpiexec() -> str:
    beside = Path(sys.executable).parent / "mpiexec"
    found = str(beside) if beside.exists() else shutil.which("mpiexec")
    if found is None:
        pytest.fail("mpiexec not found next to the Python executable or on PATH: install the test extra "
                    "(pip install -e '.[test]'), whose mpich wheel provides it")
    return found


def _env() -> dict:
    """The launched jobs' environment. HWLOC_XMLFILE names no file: mpich's hydra then writes no topology file of
    its own (/tmp/hydra_hwloc_xmlfile_XXXXXX, whatever TMPDIR says), which a job that aborts left behind."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", HWLOC_XMLFILE=str(ROOT / "no-such-topology.xml"))
    env.pop("FNX_DISTRIBUTED_DEBUG", None)
    return env


def _run(args: list, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout,
                          env=_env(), cwd=ROOT)


def _launch(worker: str, ranks: int = 2, timeout: float = 90, args=()) -> subprocess.CompletedProcess:
    return _run([_mpiexec(), "-n", str(ranks), sys.executable, str(WORKERS / worker), *args], timeout)


def _assert_ok(proc: subprocess.CompletedProcess, ranks: int = 2) -> str:
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    for r in range(ranks):
        assert f"OK rank {r}" in out, out
    return out


def test_collectives_on_two_ranks_match_numpy():
    out = _assert_ok(_launch("worker_collectives.py"))
    assert out.count("mismatch error") == 4, out  # two mismatched calls, reported on both ranks


@pytest.mark.parametrize("backend", ["mpi", "gloo"])
def test_reduce_gather_scatter_p2p_objects_and_groups_on_three_ranks(backend):
    """worker_more.py checks the collectives beyond all_reduce (reduce, gather, scatter, all_to_all(_single),
    send/recv, batch_isend_irecv, the object collectives, new_group) on MPI and on the TCP backend."""
    if backend == "mpi":
        proc = _launch("worker_more.py", ranks=3, timeout=120, args=["mpi"])
    else:
        proc = _run([sys.executable, "-m", "fnx", "run", "--nproc-per-node", "3", str(WORKERS / "worker_more.py"),
                     "gloo"], timeout=120)
    _assert_ok(proc, ranks=3)


def test_data_parallel_training_matches_one_process():
    _assert_ok(_launch("worker_train.py"))


def test_sync_batch_norm_trains_as_one_batch():
    _assert_ok(_launch("worker_syncbn.py"))


def test_a_rank_that_raises_ends_the_job():
    start = time.monotonic()
    proc = _launch("worker_crash.py", timeout=30)
    out = proc.stdout + proc.stderr
    assert time.monotonic() - start < 30
    assert proc.returncode != 0, out
    assert "ValueError: boom from rank 1" in out and "aborting the job" in out, out
    assert "rank 0 was not stopped" not in out


# ---------------------------------------------------------------- ranks that stop taking part
def _launch_in_session(args: list, timeout: float) -> subprocess.CompletedProcess:
    """Run mpiexec in a session of its own, so that a hang is killed whole (frozen ranks included) and fails."""
    proc = subprocess.Popen([_mpiexec(), *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(), cwd=ROOT, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"the job hung: still running after {timeout} s\n{out}{err}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.parametrize("mode", ["exit", "return"])
def test_a_rank_that_leaves_fails_the_collective_it_never_joins(mode):
    proc = _launch_in_session(["-n", "2", sys.executable, str(WORKERS / "worker_leave.py"), mode], timeout=60)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert ("DistBackendError: fnx.distributed.all_reduce (2nd collective call of rank 0) can never complete: "
            "rank 1 left the job (the end of its script or sys.exit) after 1 collective call") in out, out
    assert "rank 0 was not stopped" not in out


def test_a_frozen_rank_times_out_the_collective():
    proc = _launch_in_session(["-n", "2", sys.executable, str(WORKERS / "worker_leave.py"), "stop"], timeout=60)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert ("DistBackendError: fnx.distributed.all_reduce (2nd collective call of rank 0) timed out after 3 s, "
            "waiting for rank 1: rank 1 did not answer") in out, out
    assert "aborting the job" in out and "rank 0 was not stopped" not in out


def test_a_killed_rank_ends_the_job():
    """mpiexec (MPICH's Hydra) ends the job when a rank dies, before fnx's timeout would."""
    proc = _launch_in_session(["-n", "2", sys.executable, str(WORKERS / "worker_leave.py"), "kill"], timeout=60)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "rank 0 was not stopped" not in out


def test_a_caught_timeout_leaves_the_group_unusable_and_aborts_at_exit():
    proc = _launch_in_session(["-n", "2", sys.executable, str(WORKERS / "worker_leave.py"), "caught"], timeout=60)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert ("caught: fnx.distributed.all_reduce (2nd collective call of rank 0) timed out after 1 s, waiting for "
            "rank 1: rank 1 did not answer") in out, out
    assert "then: fnx.distributed.barrier: the process group is unusable after an earlier error" in out, out
    assert "rank 0 exits after a failed collective" in out and "rank 1 was not stopped" not in out, out


def test_ranks_that_leave_after_their_last_collective_end_the_job_normally():
    _assert_ok(_launch_in_session(["-n", "2", sys.executable, str(WORKERS / "worker_leave_ok.py")], timeout=60))


def test_timeouts_are_timedeltas():
    import fnx.distributed as dist

    if dist.is_initialized():
        pytest.skip("a process group is initialised in this process")
    with pytest.raises(TypeError, match="timeout must be a datetime.timedelta, got int"):
        dist.init_process_group(timeout=5)
    with pytest.raises(ValueError, match="timeout must be positive"):
        dist.init_process_group(timeout=timedelta(0))
    assert not dist.is_initialized()


# ---------------------------------------------------------------- Liveness, against a fake MPI
class FakeMPI:
    ANY_SOURCE = ANY_TAG = -1
    BYTE, ERRORS_RETURN = "byte", "errors-return"

    class Exception(Exception):
        pass

    class Status:
        source = tag = -1
        data = b""

        def Get_source(self):
            return self.source

        def Get_tag(self):
            return self.tag

        def Get_count(self, datatype):
            return len(self.data)


class FakeRequest:
    def __init__(self, polls=None):
        self.polls = polls  # Test() is True after this many calls; None: never

    def Test(self):
        if self.polls is None:
            return False
        self.polls -= 1
        return self.polls < 0


class FakeComm:
    """Rank `rank` of `size`: `inbox` holds (source, tag, text) messages to receive, sends land in `outbox`, and
    `answers[dest]` (if any) is what rank dest answers to a query."""

    def __init__(self, rank=0, size=2, answers=None):
        self.rank, self.size, self.answers = rank, size, answers or {}
        self.inbox, self.outbox = [], []

    def Get_rank(self):
        return self.rank

    def Get_size(self):
        return self.size

    def Idup(self):
        return self, FakeRequest(0)

    def Set_errhandler(self, handler):
        pass

    def Iprobe(self, source, tag, status):
        if not self.inbox:
            return False
        status.source, status.tag, text = self.inbox[0]
        status.data = text.encode()
        return True

    def Recv(self, buf, source, tag):
        src, tg, text = self.inbox.pop(0)
        assert (src, tg) == (source, tag)
        buf[0][:] = text.encode()

    def Isend(self, buf, dest, tag):
        text = bytes(buf[0]).decode()
        self.outbox.append((dest, tag, text))
        if tag == _QUERY and dest in self.answers:
            self.inbox.append((dest, _ANSWER, self.answers[dest]))
        return FakeRequest(0)


def test_a_rank_that_left_after_joining_does_not_fail_the_collective():
    comm = FakeComm()
    live = Liveness(comm, FakeMPI, timeout=60.0)
    seq = live.begin("broadcast")
    comm.inbox.append((1, _LEFT, "1"))  # rank 1 joined this broadcast, then left
    live.wait(FakeRequest(polls=50), "broadcast", seq)
    assert live.left == {1: 1} and live.broken is None


def test_a_rank_that_left_before_joining_fails_the_collective_at_once():
    comm = FakeComm(size=3)
    live = Liveness(comm, FakeMPI, timeout=60.0)
    live.begin("all_reduce")
    seq = live.begin("all_reduce")
    comm.inbox.append((2, _LEFT, "1"))
    with pytest.raises(DistBackendError, match=r"all_reduce \(2nd collective call of rank 0\) can never complete: "
                                               r"rank 2 left the job .* after 1 collective call$"):
        live.wait(FakeRequest(), "all_reduce", seq)
    with pytest.raises(DistBackendError, match="barrier: the process group is unusable after an earlier error"):
        live.begin("barrier")


def test_a_timeout_names_the_ranks_that_have_not_joined():
    comm = FakeComm(rank=1, size=4, answers={0: "3 all_reduce", 3: "4 broadcast"})
    live = Liveness(comm, FakeMPI, timeout=0.2)
    for _ in range(3):
        seq = live.begin("all_reduce")
    with pytest.raises(DistBackendError) as info:
        live.wait(FakeRequest(), "all_reduce", seq)
    assert str(info.value) == ("fnx.distributed.all_reduce (3rd collective call of rank 1) timed out after 0.2 s, "
                               "waiting for ranks 2, 3: rank 2 did not answer (it may have died, hung, or be busy "
                               "outside fnx.distributed); rank 3 is waiting in broadcast (its 4th collective call). "
                               "init_process_group(timeout=...) sets the limit")
    assert sorted((d, t) for d, t, _ in comm.outbox) == [(0, _QUERY), (2, _QUERY), (3, _QUERY)]


def test_a_waiting_rank_answers_queries_and_a_leaving_rank_says_so():
    comm = FakeComm(size=3)
    live = Liveness(comm, FakeMPI, timeout=60.0)
    seq = live.begin("all_gather")
    comm.inbox += [(1, _QUERY, "?"), (2, _LEFT, "1")]
    live.wait(FakeRequest(polls=5), "all_gather", seq)
    assert comm.outbox == [(1, _ANSWER, "1 all_gather")]
    live.leave()
    live.leave()  # once only
    assert comm.outbox[1:] == [(1, _LEFT, "1")]  # rank 2 has left already


# ---------------------------------------------------------------- the NCCL watchdog, with fake GPU events
class FakeEvent:
    def __init__(self, done=False):
        self.done = done


def test_the_nccl_watchdog_reports_a_stuck_collective():
    fired = []
    ready = threading.Event()
    dog = Watchdog(0.3, lambda message: (fired.append(message), ready.set()), period=0.05)
    dog.watch(FakeEvent(done=True), "broadcast")
    dog.watch(FakeEvent(), "all_reduce")
    assert ready.wait(30), "the watchdog never fired"
    assert len(fired) == 1 and fired[0].startswith("NCCL all_reduce has not finished on the GPU"), fired
    assert "timeout 0.3 s" in fired[0]


def test_the_nccl_watchdog_lets_finished_collectives_go():
    dog = Watchdog(0.3, lambda message: pytest.fail(message), period=3600)
    event = FakeEvent()
    dog.watch(event, "all_gather")
    start = dog.pending[0][0]
    assert dog.late(start + 0.1) is None
    assert "all_gather" in dog.late(start + 1.0)
    event.done = True
    assert dog.late(start + 1.0) is None and not dog.pending
    dog.stop()


@pytest.mark.parametrize("flag", ["", "--no-mpi"])
def test_world_of_one_without_a_launcher(flag):
    proc = _run([sys.executable, str(WORKERS / "worker_single.py"), *([flag] if flag else [])], timeout=60)
    assert proc.returncode == 0 and "OK single" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.cuda
def test_nccl_backend_on_the_gpus():
    ranks = fnx.cuda.device_count()
    _assert_ok(_launch("worker_nccl.py", ranks=ranks, timeout=180), ranks)


def test_collectives_need_a_process_group():
    import fnx.distributed as dist

    if dist.is_initialized():
        pytest.skip("a process group is initialised in this process")
    with pytest.raises(RuntimeError, match="init_process_group"):
        dist.all_reduce(fnx.ones(2))
    with pytest.raises(RuntimeError, match="init_process_group"):
        dist.get_rank()


# ---------------------------------------------------------------- DistributedSampler
@pytest.mark.parametrize("n, replicas, drop_last", [(10, 3, False), (10, 3, True), (12, 4, False), (2, 3, False)])
@pytest.mark.parametrize("shuffle", [False, True])
def test_distributed_sampler_shards_are_disjoint_and_cover(n, replicas, drop_last, shuffle):
    shards = [list(DistributedSampler(range(n), num_replicas=replicas, rank=r, shuffle=shuffle, seed=3,
                                      drop_last=drop_last)) for r in range(replicas)]
    sizes = {len(s) for s in shards}
    assert len(sizes) == 1, shards
    assert len(DistributedSampler(range(n), num_replicas=replicas, rank=0, drop_last=drop_last)) == sizes.pop()
    flat = [i for s in shards for i in s]
    if drop_last:
        assert len(flat) == len(set(flat)) == n - n % replicas
    else:
        assert set(flat) == set(range(n))
        padding = len(flat) - n
        assert 0 <= padding < replicas, shards
        assert len(set(flat)) == n


def test_distributed_sampler_epochs_reshuffle_alike_on_every_rank():
    samplers = [DistributedSampler(range(20), num_replicas=2, rank=r, seed=7) for r in range(2)]
    first = [list(s) for s in samplers]
    assert sorted(first[0] + first[1]) == list(range(20))
    for s in samplers:
        s.set_epoch(1)
    second = [list(s) for s in samplers]
    assert sorted(second[0] + second[1]) == list(range(20))
    assert first != second
    assert [list(s) for s in samplers] == second  # the same epoch gives the same order


def test_distributed_sampler_checks_its_arguments():
    with pytest.raises(ValueError, match="rank should be in the interval"):
        DistributedSampler(range(4), num_replicas=2, rank=2)
    with pytest.raises(ValueError, match="init_process_group"):
        DistributedSampler(range(4))


def test_sync_batch_norm_is_batch_norm_without_a_process_group():
    fnx.manual_seed(0)
    model = fnx.nn.Sequential(fnx.nn.Conv1d(2, 3, 1), fnx.nn.BatchNorm1d(3, momentum=None))
    converted = fnx.nn.SyncBatchNorm.convert_sync_batchnorm(copy.deepcopy(model))
    assert isinstance(converted[1], fnx.nn.SyncBatchNorm) and list(converted.state_dict()) == list(model.state_dict())
    x = fnx.randn(4, 2, 5)
    for _ in range(2):
        assert fnx.equal(converted(x), model(x))
    assert fnx.equal(converted[1].running_var, model[1].running_var) and int(converted[1].num_batches_tracked) == 2
    with pytest.raises(ValueError, match="expected at least 2D input"):
        fnx.nn.SyncBatchNorm(3)(fnx.ones(3))
