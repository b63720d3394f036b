"""Run by tests/test_distributed.py as `mpiexec -n 2 python worker_collectives.py`: every collective against numpy.

Each rank makes its own input from a seed (rank, case), so each rank can also make the other ranks' inputs
and compute the expected result with numpy. Any failed check raises, which aborts the job (non-zero status).
"""
import os

import numpy as np

import fnx
import fnx.distributed as dist
import fnx.distributed.functional as F

dist.init_process_group("mpi")
RANK, SIZE = dist.get_rank(), dist.get_world_size()
assert SIZE == 2, SIZE
NP = {"bool": np.bool_, "uint8": np.uint8, "int8": np.int8, "int16": np.int16, "int32": np.int32,
      "int64": np.int64, "float16": np.float16, "float32": np.float32, "float64": np.float64}
DTYPES = ["float32", "float64", "float16", "bfloat16", "int32", "int64", "int16", "int8", "uint8", "bool"]
SHAPES = [(), (5,), (3, 4), (2, 3, 2)]
case = 0


def data(rank: int, shape, dtype: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng([rank, seed])
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype in ("uint8", "int8", "int16", "int32", "int64"):
        return rng.integers(0, 5, size=shape).astype(NP[dtype])
    vals = rng.integers(-8, 8, size=shape) / 4  # exact in every float dtype, and so are their sums
    return vals.astype(np.float32) if dtype == "bfloat16" else vals.astype(NP[dtype])


def as_tensor(a: np.ndarray, dtype: str):
    return fnx.tensor(a, dtype=getattr(fnx, dtype))


def values(t) -> np.ndarray:
    return t.float().numpy() if t.dtype is fnx.bfloat16 else t.numpy()


REDUCE = {"sum": lambda xs: sum(xs[1:], xs[0]), "max": lambda xs: np.maximum(*xs), "min": lambda xs: np.minimum(*xs),
          "product": lambda xs: xs[0] * xs[1]}


def expected_reduction(xs, op: str, dtype: str) -> np.ndarray:
    if dtype == "bool":
        return (np.logical_or if op in ("sum", "max") else np.logical_and)(*xs)
    if op == "avg":
        return REDUCE["sum"](xs) / SIZE
    return REDUCE[op](xs)


def check(got, want, what: str) -> None:
    want = np.asarray(want)
    if not np.array_equal(np.asarray(got, dtype=want.dtype), want):
        raise AssertionError(f"rank {RANK}: {what}: got {got}, expected {want}")


# ---------------------------------------------------------------- in-place collectives, sync and async
for dtype in DTYPES:
    for shape in SHAPES:
        case += 1
        xs = [data(r, shape, dtype, case) for r in range(SIZE)]
        ops = ["sum", "max", "min", "product"] + (["avg"] if dtype.startswith(("float", "bfloat")) else [])
        for op in ops:
            for async_op in (False, True):
                t = as_tensor(xs[RANK], dtype)
                work = dist.all_reduce(t, op=dist.ReduceOp[op.upper()], async_op=async_op)
                if async_op:
                    work.wait()
                    assert work.is_completed()
                check(values(t), expected_reduction(xs, op, dtype), f"all_reduce {op} {dtype}{shape} async={async_op}")
        for src in range(SIZE):
            t = as_tensor(xs[RANK], dtype)
            work = dist.broadcast(t, src=src, async_op=src == 1)
            if work is not None:
                work.wait()
            check(values(t), xs[src], f"broadcast src={src} {dtype}{shape}")
        outs = [as_tensor(np.zeros(shape, xs[0].dtype), dtype) for _ in range(SIZE)]
        dist.all_gather(outs, as_tensor(xs[RANK], dtype))
        for r in range(SIZE):
            check(values(outs[r]), xs[r], f"all_gather {dtype}{shape}")
        if shape:
            whole = as_tensor(np.zeros((SIZE * shape[0],) + shape[1:], xs[0].dtype), dtype)
            dist.all_gather_into_tensor(whole, as_tensor(xs[RANK], dtype), async_op=True).wait()
            check(values(whole), np.concatenate(xs), f"all_gather_into_tensor {dtype}{shape}")
            op = "max" if dtype == "bool" else "sum"
            inputs = [data(r, (SIZE,) + shape, dtype, case + 1000) for r in range(SIZE)]
            out = as_tensor(np.zeros(shape, xs[0].dtype), dtype)
            dist.reduce_scatter(out, [as_tensor(a, dtype) for a in inputs[RANK]], op=op)
            check(values(out), expected_reduction([a[RANK] for a in inputs], op, dtype), f"reduce_scatter {dtype}")
            out = as_tensor(np.zeros(shape, xs[0].dtype), dtype)
            dist.reduce_scatter_tensor(out, as_tensor(inputs[RANK], dtype), op=op, async_op=True).wait()
            check(values(out), expected_reduction([a[RANK] for a in inputs], op, dtype), "reduce_scatter_tensor")

# A non-contiguous tensor (a transposed view) is reduced in place, through its base.
base = fnx.tensor(np.arange(12.0).reshape(3, 4) * (RANK + 1))
view = base.T
version = view._version[0]
dist.all_reduce(view)
check(base.numpy(), np.arange(12.0).reshape(3, 4) * 3, "all_reduce of a transposed view")
assert view._version[0] == version + 1, "all_reduce bumps the version counter"
dist.barrier()
dist.barrier(async_op=True).wait()

# ---------------------------------------------------------------- functional collectives and their rules
xs = [data(r, (3, 4), "float64", 7) for r in range(SIZE)]
x = fnx.tensor(xs[RANK])
check(F.all_reduce(x, "avg").numpy(), (xs[0] + xs[1]) / 2, "functional all_reduce avg")
check(F.all_gather(x, dim=1).numpy(), np.concatenate(xs, axis=1), "functional all_gather dim=1")
check(F.reduce_scatter(x, "sum", dim=1).numpy(), (xs[0] + xs[1])[:, 2 * RANK:2 * RANK + 2], "reduce_scatter dim=1")
check(F.broadcast(x, src=1).numpy(), xs[1], "functional broadcast")
assert np.array_equal(x.numpy(), xs[RANK]), "functional collectives leave their input alone"

# Gradients, in the SPMD sense: each rank differentiates its own output; the rules add up the ranks' cotangents.
w = RANK + 1.0
g = fnx.grad(lambda a: (F.all_reduce(a * a, "sum") * w).sum())(x)
check(g.numpy(), 2 * xs[RANK] * 3.0, "vjp of all_reduce sum")
g = fnx.grad(lambda a: (F.all_reduce(a, "avg") * w).sum())(x)
check(g.numpy(), np.full((3, 4), 1.5), "vjp of all_reduce avg")
g = fnx.grad(lambda a: (F.all_reduce(a, "max") * w).sum())(x)
top = np.maximum(xs[0], xs[1])
ties = (xs[0] == top).astype(float) + (xs[1] == top).astype(float)
check(g.numpy(), 3.0 * (xs[RANK] == top) / ties, "vjp of all_reduce max (ties split)")
g = fnx.grad(lambda a: (F.all_gather(a, dim=0) * w).sum())(x)
check(g.numpy(), np.full((3, 4), 3.0), "vjp of all_gather is a summing reduce_scatter")
g = fnx.grad(lambda a: (F.reduce_scatter(a, "sum", dim=1) * w).sum())(x)
check(g.numpy(), np.tile([1.0, 1.0, 2.0, 2.0], (3, 1)), "vjp of reduce_scatter is an all_gather")
g = fnx.grad(lambda a: (F.broadcast(a, src=0) * w).sum())(x)
check(g.numpy(), np.full((3, 4), 3.0 if RANK == 0 else 0.0), "vjp of broadcast sums on the source")
leaf = fnx.tensor(xs[RANK], requires_grad=True)
(F.all_reduce(leaf * leaf, "sum") * w).sum().backward()
check(leaf.grad.numpy(), 2 * xs[RANK] * 3.0, "eager backward through all_reduce")
_, tangent = fnx.jvp(lambda a: F.all_reduce(a, "sum"), (x,), (fnx.ones_like(x) * w,))
check(tangent.numpy(), np.full((3, 4), 3.0), "jvp of all_reduce sum")
batched = fnx.vmap(lambda a: F.all_reduce(a, "sum"), in_axes=1)(x)
check(batched.numpy(), (xs[0] + xs[1]).T, "vmap of all_reduce")
batched = fnx.vmap(lambda a: F.all_gather(a, dim=0), in_axes=1)(x)
check(batched.numpy(), np.concatenate(xs, axis=0).T, "vmap of all_gather")
jaxpr = str(fnx.make_jaxpr(lambda a: F.all_reduce(a, "avg"))(x))
assert "all_reduce[op='avg']" in jaxpr, jaxpr

# ---------------------------------------------------------------- mismatched calls raise a clear error on every rank
for shape, dtype in (((2 + RANK,), fnx.float32), ((4,), fnx.float32 if RANK == 0 else fnx.float64)):
    try:
        dist.all_reduce(fnx.ones(shape, dtype=dtype))
    except RuntimeError as e:
        msg = str(e)
        assert "rank 0: all_reduce(op=sum) on float32[" in msg and "rank 1: all_reduce(op=sum) on float" in msg, msg
        assert "FNX_DISTRIBUTED_DEBUG=0" in msg, msg
        print(f"rank {RANK} mismatch error: {msg}", flush=True)
    else:
        raise AssertionError(f"rank {RANK}: a mismatched all_reduce did not raise")
try:
    dist.broadcast(fnx.ones(3), src=RANK)
except RuntimeError as e:
    assert "rank 0: broadcast(src=0)" in str(e) and "rank 1: broadcast(src=1)" in str(e), str(e)
else:
    raise AssertionError("broadcasts from different sources did not raise")

# FNX_DISTRIBUTED_DEBUG=0 turns the check off (read when the process group starts).
dist.destroy_process_group()
os.environ["FNX_DISTRIBUTED_DEBUG"] = "0"
dist.init_process_group("mpi")
assert not fnx.distributed.process_group.world().debug
t = fnx.ones(4) * (RANK + 1)
dist.all_reduce(t)
check(t.numpy(), np.full(4, 3.0), "all_reduce without the metadata check")
print(f"OK rank {RANK}", flush=True)
