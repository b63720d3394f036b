"""Run by tests/test_distributed.py as `mpiexec -n 2 python worker_leave.py MODE`: after one all_reduce together,
rank 1 stops taking part while rank 0 waits in the next all_reduce, under a timeout of 3 s. The job must end with
a non-zero status and an error naming the all_reduce and rank 1, instead of hanging.

MODE is how rank 1 stops: `exit` (sys.exit(0)), `return` (its script ends), `stop` (SIGSTOP to itself: frozen,
like a machine gone from the network), `kill` (SIGKILL to itself; mpiexec, MPICH's Hydra, then ends the job
itself, before fnx's timeout). In `caught`, rank 1 sleeps; rank 0 catches the timeout of an async all_reduce's
Work.wait(timeout=1 s), finds the process group unusable, and exits normally, which aborts the job.
"""
import os
import signal
import sys
import time
from datetime import timedelta

mode = sys.argv[1]
if mode == "caught":
    os.environ["FNX_DISTRIBUTED_DEBUG"] = "0"  # no metadata check: the async all_reduce itself waits

import fnx  # noqa: E402
import fnx.distributed as dist  # noqa: E402

dist.init_process_group("mpi", timeout=timedelta(seconds=3))
t = fnx.ones(3)
dist.all_reduce(t)
assert t.tolist() == [2.0, 2.0, 2.0], t
if dist.get_rank() == 1:
    if mode == "exit":
        sys.exit(0)
    if mode in ("kill", "stop"):
        os.kill(os.getpid(), signal.SIGKILL if mode == "kill" else signal.SIGSTOP)
    if mode == "caught":
        time.sleep(60)  # rank 0's abort ends this process long before
        print("rank 1 was not stopped", flush=True)
elif mode == "caught":
    work = dist.all_reduce(t, async_op=True)
    try:
        work.wait(timeout=timedelta(seconds=1))
    except dist.DistBackendError as e:
        print(f"caught: {e}", flush=True)
    try:
        dist.barrier()
    except dist.DistBackendError as e:
        print(f"then: {e}", flush=True)
    sys.exit(0)
else:
    dist.all_reduce(t)
    print("rank 0 was not stopped", flush=True)
