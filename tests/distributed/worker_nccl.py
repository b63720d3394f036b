"""Run by tests/test_distributed.py (marked cuda) as `mpiexec -n N python worker_nccl.py`, N = number of GPUs.

The NCCL backend on CUDA tensors: collectives against the numpy result, and a DDP step on a CUDA model that
must match one process on the whole batch. Any failed check raises, which aborts the job.
"""
import copy

import numpy as np

import fnx
import fnx.distributed as dist
import fnx.nn as nn
import fnx.nn.functional as F
from fnx.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("nccl")
RANK, SIZE = dist.get_rank(), dist.get_world_size()
dev = fnx.device("cuda", dist.process_group.world().cuda.device)  # local rank modulo the GPUs on this machine
for dtype in (fnx.float32, fnx.float64, fnx.float16, fnx.bfloat16, fnx.int32, fnx.int16, fnx.bool):
    t = fnx.full((3, 5), RANK + 1, dtype=dtype, device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, async_op=True).wait()
    assert np.all(t.cpu().float().numpy() == (SIZE if dtype is not fnx.bool else 1)), (dtype, t)
t = fnx.full((4,), RANK + 1.0, device=dev)
dist.all_reduce(t)
assert np.allclose(t.cpu().numpy(), SIZE * (SIZE + 1) / 2)
t = fnx.full((4,), float(RANK), device=dev)
dist.broadcast(t, src=SIZE - 1)
assert np.allclose(t.cpu().numpy(), SIZE - 1)
whole = fnx.zeros(SIZE, 2, device=dev)
dist.all_gather_into_tensor(whole, fnx.full((1, 2), float(RANK), device=dev))
assert np.allclose(whole.cpu().numpy()[:, 0], np.arange(SIZE))
out = fnx.zeros(2, device=dev)
dist.reduce_scatter_tensor(out, fnx.ones(2 * SIZE, device=dev), op=dist.ReduceOp.AVG)
assert np.allclose(out.cpu().numpy(), 1.0)
x = fnx.ones(3, device=dev) * (RANK + 1)
assert np.allclose(dist.functional.all_reduce(x, "sum").cpu().numpy(), SIZE * (SIZE + 1) / 2)
dist.barrier()

rng = np.random.default_rng(0)
X = fnx.tensor(rng.standard_normal((4 * SIZE, 6)), device=dev)
Y = fnx.tensor(rng.integers(0, 3, 4 * SIZE), device=dev)
fnx.manual_seed(RANK)
model = DDP(nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)).double().to(dev), device_ids=[dev.index])
reference = copy.deepcopy(model.module)
F.cross_entropy(model(X[4 * RANK:4 * RANK + 4]), Y[4 * RANK:4 * RANK + 4]).backward()
F.cross_entropy(reference(X), Y).backward()
for p, q in zip(model.parameters(), reference.parameters()):
    assert np.abs(p.grad.cpu().numpy() - q.grad.cpu().numpy()).max() < 1e-10
print(f"OK rank {RANK}", flush=True)
