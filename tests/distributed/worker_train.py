"""Run by tests/test_distributed.py as `mpiexec -n 2 python worker_train.py`: data-parallel training equivalences.

Each rank trains on its half of a batch; each rank also trains a reference copy on the whole batch by itself.
After 5 steps the weights must agree to 1e-10 (float64). Covers DistributedDataParallel (with SGD momentum),
no_sync accumulation, unused-parameter detection, and the functional step value_and_grad + all_reduce +
functional optimizer, eager and compiled. Any failed check raises, which aborts the job (non-zero status).
"""
import copy

import numpy as np

import fnx
import fnx.distributed as dist
import fnx.nn as nn
import fnx.nn.functional as F
from fnx.transforms.compile import compile as fnx_compile
from fnx.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("mpi")
RANK, SIZE = dist.get_rank(), dist.get_world_size()
STEPS, BATCH = 5, 16
rng = np.random.default_rng(0)
X = fnx.tensor(rng.standard_normal((BATCH, 6)))
Y = fnx.tensor(rng.integers(0, 3, BATCH))
HALF = slice(RANK * BATCH // SIZE, (RANK + 1) * BATCH // SIZE)


def mlp():
    fnx.manual_seed(100 + RANK)  # different initial weights on each rank: DDP must start from rank 0's
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 3)).double()


def assert_close(model_a, model_b, what: str, tol: float = 1e-10) -> None:
    for (name, a), b in zip(model_a.named_parameters(), model_b.parameters()):
        err = np.abs(a.detach().numpy() - b.detach().numpy()).max()
        if err > tol:
            raise AssertionError(f"rank {RANK}: {what}: {name} differs by {err}")


# ---------------------------------------------------------------- DDP on half batches == one process on the batch
model = DDP(mlp())
assert isinstance(model.module, nn.Sequential)
reference = copy.deepcopy(model.module)
opt = fnx.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
ref_opt = fnx.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
hook_calls = []
model.module[0].weight.register_hook(lambda g: hook_calls.append(1))
for _ in range(STEPS):
    opt.zero_grad()
    F.cross_entropy(model(X[HALF]), Y[HALF]).backward()
    opt.step()
    ref_opt.zero_grad()
    F.cross_entropy(reference(X), Y).backward()
    ref_opt.step()
assert_close(model.module, reference, "DDP vs one process")
assert len(hook_calls) == STEPS, "a hook on a parameter sees its gradient once per backward"
print(f"rank {RANK} ddp ok", flush=True)

# ---------------------------------------------------------------- no_sync: accumulate locally, average once
model.zero_grad()
reference.zero_grad()
quarter = BATCH // (2 * SIZE)
micro = [slice(HALF.start + k * quarter, HALF.start + (k + 1) * quarter) for k in range(2)]
with model.no_sync():
    F.cross_entropy(model(X[micro[0]]), Y[micro[0]]).backward()
local = model.module[0].weight.grad.numpy().copy()
F.cross_entropy(model(X[micro[1]]), Y[micro[1]]).backward()
for k in range(2 * SIZE):
    part = slice(k * quarter, (k + 1) * quarter)
    (F.cross_entropy(reference(X[part]), Y[part]) / SIZE).backward()
for p, q in zip(model.parameters(), reference.parameters()):
    assert np.abs(p.grad.numpy() - q.grad.numpy()).max() < 1e-10, "no_sync accumulation"
assert np.abs(local - model.module[0].weight.grad.numpy()).max() > 1e-6, "no_sync must not communicate"
print(f"rank {RANK} no_sync ok", flush=True)

# ---------------------------------------------------------------- unused parameters


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body, self.head, self.spare = nn.Linear(6, 4), nn.Linear(4, 3), nn.Linear(4, 3)

    def forward(self, x, use_spare: bool = False):
        h = self.body(x).relu()
        return self.head(h) + (self.spare(h) if use_spare else 0.0)


strict = DDP(TwoHeads().double())
try:
    strict(X[HALF])
except RuntimeError as e:
    assert "'spare.weight', 'spare.bias'" in str(e) and "find_unused_parameters=True" in str(e), str(e)
else:
    raise AssertionError("an unused parameter was not reported")
lenient = DDP(TwoHeads().double(), find_unused_parameters=True)
reference = copy.deepcopy(lenient.module)
F.cross_entropy(lenient(X[HALF]), Y[HALF]).backward()
F.cross_entropy(reference(X), Y).backward()
assert lenient.module.spare.weight.grad is None, "a parameter no rank used keeps grad None"
for name in ("body", "head"):
    a, b = getattr(lenient.module, name).weight.grad, getattr(reference, name).weight.grad
    assert np.abs(a.numpy() - b.numpy()).max() < 1e-10, f"find_unused_parameters: {name}"

# Rank 0 uses `spare`, rank 1 does not: rank 1 contributes zeros to its average.
lenient.zero_grad()
reference.zero_grad()
F.cross_entropy(lenient(X[HALF], use_spare=RANK == 0), Y[HALF]).backward()
for r in range(SIZE):
    part = slice(r * BATCH // SIZE, (r + 1) * BATCH // SIZE)
    (F.cross_entropy(reference(X[part], use_spare=r == 0), Y[part]) / SIZE).backward()
for p, q in zip(lenient.parameters(), reference.parameters()):
    assert np.abs(p.grad.numpy() - q.grad.numpy()).max() < 1e-10, "a parameter unused on one rank"
print(f"rank {RANK} unused ok", flush=True)

# ---------------------------------------------------------------- buffers start from rank 0's
bn = nn.BatchNorm1d(6).double()
bn.running_mean.fill_(float(RANK))
synced = DDP(nn.Sequential(nn.Linear(6, 6), bn).double())
assert np.all(synced.module[1].running_mean.numpy() == 0.0), "DDP copies rank 0's buffers"
synced(X[HALF]).sum().backward()
print(f"rank {RANK} buffers ok", flush=True)

# ---------------------------------------------------------------- the functional data-parallel step
net = mlp()
params = {k: v.detach() for k, v in net.named_parameters()}
params = {k: dist.functional.broadcast(v, src=0) for k, v in params.items()}  # start from rank 0's weights
opt = fnx.optim.functional.sgd(lr=0.1, momentum=0.9)


def loss_fn(p, x, y):
    return F.cross_entropy(nn.functional_call(net, p, (x,)), y)


def step(p, state, x, y, sync: bool):
    loss, grads = fnx.value_and_grad(loss_fn)(p, x, y)
    if sync:
        grads = fnx.tree.tree_map(lambda g: dist.functional.all_reduce(g, "avg"), grads)
    p, state = opt.update(grads, state, p)
    return p, state


compiled_step = fnx_compile(step, static_argnums=4)  # the plan calls the all-reduces between its kernels
for dp_step in (step, compiled_step):
    p_dp, s_dp = params, opt.init(params)
    p_ref, s_ref = params, opt.init(params)
    for _ in range(STEPS):
        p_dp, s_dp = dp_step(p_dp, s_dp, X[HALF], Y[HALF], True)
        p_ref, s_ref = step(p_ref, s_ref, X, Y, sync=False)
    for k in params:
        err = np.abs(p_dp[k].numpy() - p_ref[k].numpy()).max()
        assert err < 1e-10, f"rank {RANK}: functional data-parallel step ({dp_step}): {k} differs by {err}"
assert "all_reduce" in str(fnx.make_jaxpr(step, static_argnums=4)(params, s_dp, X[HALF], Y[HALF], True))
print(f"rank {RANK} functional ok", flush=True)
print(f"OK rank {RANK}", flush=True)
