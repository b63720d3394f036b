"""Run by tests/test_distributed.py as `mpiexec -n 2 python worker_syncbn.py`: SyncBatchNorm across ranks.

Each rank trains a converted copy (SyncBatchNorm, under DistributedDataParallel) on its half of a batch and a
reference with plain BatchNorm on the whole batch by itself. After 3 SGD steps the weights, the running
statistics and the evaluated outputs must agree to 1e-10 (float64): the statistics and their gradients span both
halves as one batch's would. Any failed check raises, which aborts the job (non-zero status).
"""
import copy

import numpy as np

import fnx
import fnx.distributed as dist
import fnx.nn as nn
import fnx.nn.functional as F
from fnx.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("mpi")
RANK, SIZE = dist.get_rank(), dist.get_world_size()
BATCH = 8
rng = np.random.default_rng(0)
X = fnx.tensor(rng.standard_normal((BATCH, 3, 6, 6)))
Y = fnx.tensor(rng.integers(0, 3, BATCH))
HALF = slice(RANK * BATCH // SIZE, (RANK + 1) * BATCH // SIZE)

fnx.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Conv2d(4, 4, 3), nn.BatchNorm2d(4),
                      nn.Flatten(), nn.Linear(16, 3)).double()
reference = copy.deepcopy(model)
synced = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(copy.deepcopy(model)))
assert isinstance(synced.module[1], nn.SyncBatchNorm) and isinstance(synced.module[4], nn.SyncBatchNorm)
opt_ref = fnx.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
opt = fnx.optim.SGD(synced.parameters(), lr=0.1, momentum=0.9)
for _ in range(3):
    opt_ref.zero_grad()
    F.cross_entropy(reference(X), Y).backward()
    opt_ref.step()
    opt.zero_grad()
    F.cross_entropy(synced(X[HALF]), Y[HALF]).backward()
    opt.step()
for (name, a), b in zip(reference.state_dict().items(), synced.module.state_dict().values()):
    np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-10, atol=1e-10, err_msg=name)
reference.eval(), synced.eval()
np.testing.assert_allclose(synced(X).detach().numpy(), reference(X).detach().numpy(), rtol=1e-10, atol=1e-10)
print(f"OK rank {RANK}", flush=True)
dist.destroy_process_group()
