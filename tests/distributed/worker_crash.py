"""Run by tests/test_distributed.py as `mpiexec -n 2 python worker_crash.py`: rank 1 raises while rank 0 waits.

Rank 0 blocks in an all_reduce that rank 1 never joins; rank 1's uncaught exception must abort the whole job
(fnx.distributed's excepthook calls MPI Abort), so mpiexec returns promptly with a non-zero status.
"""
import fnx
import fnx.distributed as dist

dist.init_process_group("mpi")
if dist.get_rank() == 1:
    raise ValueError("boom from rank 1")
dist.all_reduce(fnx.ones(3))
print("rank 0 was not stopped", flush=True)
