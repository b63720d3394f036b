"""Run by tests/test_distributed.py as plain `python worker_single.py [--no-mpi]`: a world of one process.

Without a launcher, init_process_group gives a world of size 1 in which every collective works (an
identity); with --no-mpi, mpi4py cannot be imported and the world of one needs no MPI at all.
"""
import sys

if "--no-mpi" in sys.argv:
    sys.modules["mpi4py"] = None  # `import mpi4py` now raises ImportError

import numpy as np

import fnx
import fnx.distributed as dist
import fnx.nn as nn
import fnx.nn.functional as F
from fnx.nn.parallel import DistributedDataParallel as DDP

assert not dist.is_initialized()
dist.init_process_group()
assert dist.is_initialized() and dist.get_rank() == 0 and dist.get_world_size() == 1 and dist.get_backend() == "mpi"
assert ("mpi4py.MPI" in sys.modules) != ("--no-mpi" in sys.argv)
t = fnx.arange(6.0).reshape(2, 3)
dist.all_reduce(t, op=dist.ReduceOp.AVG)
dist.broadcast(t, src=0)
outs = [fnx.zeros(2, 3)]
dist.all_gather(outs, t)
whole = fnx.zeros(2, 3)
dist.reduce_scatter_tensor(whole, t, async_op=True).wait()
dist.barrier()
for got in (t, outs[0], whole, dist.functional.all_reduce(t, "sum"), dist.functional.all_gather(t, dim=1)[:, :3]):
    assert np.array_equal(got.numpy(), np.arange(6.0).reshape(2, 3)), got
model = DDP(nn.Linear(3, 2).double())
x = fnx.randn(4, 3, dtype=fnx.float64)
F.mse_loss(model(x), fnx.zeros(4, 2, dtype=fnx.float64)).backward()
assert model.module.weight.grad is not None and model.module.weight.grad.shape == (2, 3)
# the collectives beyond all_reduce, in a world of one
t = fnx.arange(4.0)
dist.reduce(t, dst=0)
outs = [fnx.zeros(4)]
dist.gather(t, outs)
got = fnx.zeros(4)
dist.scatter(got, [t])
dist.all_to_all_single(got, t, [4], [4])
objs = [None]
dist.all_gather_object(objs, {"t": t})
assert np.array_equal(outs[0].numpy(), t.numpy()) and np.array_equal(got.numpy(), t.numpy()), (outs, got)
assert np.array_equal(objs[0]["t"].numpy(), t.numpy()) and dist.new_group([0]).size() == 1
assert dist.init_device_mesh("cpu", (1,)).get_group() is dist.group.WORLD
# the root's list arguments: one tensor per rank, given on the root
for call, text in ((lambda: dist.gather(t, [t, t]), "gather_list has 2 tensors, but the group has 1 ranks"),
                   (lambda: dist.scatter(got, None), "``scatter_list`` must be specified on source rank"),
                   (lambda: dist.all_to_all([got, got], [t]), "output_tensor_list has 2 tensors")):
    try:
        call()
        raise AssertionError(f"no error: {text}")
    except ValueError as e:
        assert text in str(e), e
sampler = fnx.data.DistributedSampler(range(5), shuffle=False)
assert list(sampler) == [0, 1, 2, 3, 4]
dist.destroy_process_group()
assert not dist.is_initialized()
print("OK single", flush=True)
