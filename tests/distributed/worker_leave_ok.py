"""Run by tests/test_distributed.py as `mpiexec -n 2 python worker_leave_ok.py`: ranks that leave once their last
collective is done do not fail the others, even while those are still waiting for that collective.

Rank 1 is the root of the last broadcast, which completes on the root as soon as its data is sent, and leaves at
once; rank 0 sleeps before receiving, so rank 1's word that it left (after joining that broadcast) is usually
there before the data is taken. The job must end normally.
"""
import time
from datetime import timedelta

import fnx
import fnx.distributed as dist

dist.init_process_group("mpi", timeout=timedelta(seconds=20))
rank = dist.get_rank()
t = fnx.full((3,), float(rank))
dist.all_reduce(t)
assert t.tolist() == [1.0, 1.0, 1.0], t
if rank == 0:
    work = dist.broadcast(t, src=1, async_op=True)
    time.sleep(1.0)
    work.wait()
    assert t.tolist() == [5.0, 5.0, 5.0], t
else:
    t.fill_(5.0)
    dist.broadcast(t, src=1)
print(f"OK rank {rank}", flush=True)
