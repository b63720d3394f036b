"""fnx.distributed, DistributedDataParallel and DistributedSampler.

Multi-process tests launch `mpiexec -n 2 python tests/distributed/worker_*.py` (mpiexec comes with the `mpich`
wheel of the test extra, next to the Python executable) with a timeout; each worker checks its results itself
and prints "OK rank R" at the end, and a failed check raises, which aborts the job with a non-zero status.
"""
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import fnx
from fnx.data import DistributedSampler

ROOT = Path(__file__).resolve().parents[1]
WORKERS = Path(__file__).resolve().parent / "distributed"


def _mpiexec() -> str:
    beside = Path(sys.executable).parent / "mpiexec"
    found = str(beside) if beside.exists() else shutil.which("mpiexec")
    if found is None:
        pytest.fail("mpiexec not found next to the Python executable or on PATH: install the test extra "
                    "(pip install -e '.[test]'), whose mpich wheel provides it")
    return found


def _run(args: list, timeout: float) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    env.pop("FNX_DISTRIBUTED_DEBUG", None)
    return subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=ROOT)


def _launch(worker: str, ranks: int = 2, timeout: float = 90) -> subprocess.CompletedProcess:
    return _run([_mpiexec(), "-n", str(ranks), sys.executable, str(WORKERS / worker)], timeout)


def _assert_ok(proc: subprocess.CompletedProcess, ranks: int = 2) -> str:
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    for r in range(ranks):
        assert f"OK rank {r}" in out, out
    return out


def test_collectives_on_two_ranks_match_numpy():
    out = _assert_ok(_launch("worker_collectives.py"))
    assert out.count("mismatch error") == 4, out  # two mismatched calls, reported on both ranks


def test_data_parallel_training_matches_one_process():
    _assert_ok(_launch("worker_train.py"))


def test_a_rank_that_raises_ends_the_job():
    start = time.monotonic()
    proc = _launch("worker_crash.py", timeout=30)
    out = proc.stdout + proc.stderr
    assert time.monotonic() - start < 30
    assert proc.returncode != 0, out
    assert "ValueError: boom from rank 1" in out and "aborting the job" in out, out
    assert "rank 0 was not stopped" not in out


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
