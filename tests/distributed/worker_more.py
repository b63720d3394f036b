"""Run by tests/test_distributed.py with 3 ranks, as `mpiexec -n 3 python worker_more.py mpi` or
`python -m fnx run --nproc-per-node 3 worker_more.py gloo` (the TCP backend, met through a TCPStore): reduce, gather, scatter, the all-to-alls,
point-to-point messages, the object collectives and groups, each against its closed form (every rank knows the
others' inputs). The expected values were confirmed with PyTorch's gloo backend. A failed check raises, which
ends the job with a non-zero status; each rank prints "OK rank R" at the end.
"""
import os
import sys
import warnings
from datetime import timedelta

import numpy as np

import fnx
import fnx.distributed as dist

if sys.argv[1] == "gloo":   # the ranks meet through a TCPStore on MASTER_PORT, as torchrun's rendezvous does
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), size, rank == 0,
                          timeout=timedelta(seconds=20))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=size, timeout=timedelta(seconds=20))
    assert store.add("joined", 1) <= size
    if rank == 2:
        store.set("from 2", b"\x00two")
    assert dist.PrefixStore("ns", store).compare_set("k", "", str(rank)) in (b"0", b"1", b"2")
else:
    dist.init_process_group(sys.argv[1], timeout=timedelta(seconds=20))
RANK, SIZE = dist.get_rank(), dist.get_world_size()
assert SIZE == 3, SIZE
if sys.argv[1] == "gloo":
    assert store.get("from 2") == b"\x00two"   # waits for rank 2 to set it
    dist.barrier()
    assert store.get("joined") == b"3" and store.check(["ns/k"]) and store.num_keys() == 5, store.num_keys()


def check(got, want, what: str) -> None:
    got = got.numpy() if isinstance(got, fnx.Tensor) else got
    if not np.array_equal(np.asarray(got), np.asarray(want)):
        raise AssertionError(f"rank {RANK}: {what}: got {got}, expected {want}")


def raises(error, text: str, fn, *args, **kwargs) -> None:
    try:
        fn(*args, **kwargs)
    except error as e:
        assert text in str(e), (text, str(e))
        return
    raise AssertionError(f"rank {RANK}: {fn.__name__} did not raise {error.__name__}")


# ---------------------------------------------------------------- reduce, gather, scatter
t = fnx.tensor([RANK + 1.0, 2.0])
dist.reduce(t, dst=1)
check(t, [6.0, 6.0] if RANK == 1 else [RANK + 1.0, 2.0], "reduce")
t = fnx.tensor([RANK + 1, 3], dtype=fnx.int32)
dist.reduce(t, dst=2, op=dist.ReduceOp.MAX, async_op=True).wait()
check(t, [3, 3] if RANK == 2 else [RANK + 1, 3], "reduce max")
raises(ValueError, "must specify dst or group_dst", dist.reduce, t)

bf = fnx.tensor([RANK, 5.0], dtype=fnx.bfloat16)
outs = [fnx.zeros(2, dtype=fnx.bfloat16) for _ in range(SIZE)] if RANK == 0 else None
dist.gather(bf, outs)
if RANK == 0:
    check(fnx.stack(outs).float(), [[r, 5.0] for r in range(SIZE)], "gather")
raises(ValueError, "must NOT be specified on non-destination", dist.gather, bf, [bf] * 3, dst=(RANK + 1) % SIZE)

out = fnx.zeros(2, 2)
work = dist.scatter(out, [fnx.full((2, 2), float(i)) for i in range(SIZE)] if RANK == 1 else None, src=1,
                    async_op=True)
assert work.wait() and work.is_completed()
check(out, np.full((2, 2), float(RANK)), "scatter")

# ---------------------------------------------------------------- all-to-alls
outs = [fnx.zeros(1, dtype=fnx.int64) for _ in range(SIZE)]
dist.all_to_all(outs, [fnx.tensor([10 * RANK + i]) for i in range(SIZE)])
check(fnx.cat(outs), [10 * r + RANK for r in range(SIZE)], "all_to_all")
o = fnx.zeros(6)
dist.all_to_all_single(o, fnx.arange(6.0) + 10 * RANK)
check(o, np.concatenate([[2 * RANK + 10 * r, 2 * RANK + 1 + 10 * r] for r in range(SIZE)]), "all_to_all_single")
# rank r sends r + 1 rows to each rank: rank s receives 1, 2, 3 rows from ranks 0, 1, 2
rows = fnx.arange(3.0 * (RANK + 1) * 2).reshape(3 * (RANK + 1), 2) + 100 * RANK
o = fnx.zeros(6, 2)
dist.all_to_all_single(o, rows, output_split_sizes=[1, 2, 3], input_split_sizes=[RANK + 1] * 3)
want = np.concatenate([(np.arange(3.0 * (r + 1) * 2).reshape(-1, 2) + 100 * r)[RANK * (r + 1):(RANK + 1) * (r + 1)]
                       for r in range(SIZE)])
check(o, want, "all_to_all_single splits")
raises(ValueError, "do not add up", dist.all_to_all_single, o, rows, [1, 2, 3], [1, 1, 0])
t = fnx.tensor([float(RANK)])
work = dist.all_reduce(t, async_op=True)
while not work.is_completed():   # is_completed finishes the collective once every rank's part has arrived
    pass
check(t, [3.0], "async all_reduce polled with is_completed")
a, b = fnx.ones(2), fnx.full((1, 2), 2.0)
dist.all_reduce_coalesced([a, b], op=dist.ReduceOp.SUM)
check(a, [3.0, 3.0], "coalesced a")
check(b, [[6.0, 6.0]], "coalesced b")

# ---------------------------------------------------------------- point to point
if RANK == 0:
    dist.send(fnx.tensor([7.0]), dst=2)
    w = dist.isend(fnx.tensor([8.0]), dst=2, tag=3)
    assert w.wait() and w.is_completed()
    dist.send_object_list([1, {"a": (2, "b")}], dst=1)
    raises(ValueError, "should not be the same as the rank", dist.send, fnx.ones(1), 0)
elif RANK == 1:
    got = [None, None]
    assert dist.recv_object_list(got) == 0
    check(np.array(got, dtype=object)[0], 1, "recv_object_list")
    assert got[1] == {"a": (2, "b")}, got
else:
    x, y = fnx.zeros(1), fnx.zeros(1)
    w = dist.irecv(y, src=0, tag=3)   # posted first, but matched by its tag
    assert dist.recv(x) == 0
    w.wait()
    assert w.is_completed()
    check(x, [7.0], "recv")
    check(y, [8.0], "irecv")
# a ring: every rank sends to the next and receives from the previous, in one batch
left, right = (RANK - 1) % SIZE, (RANK + 1) % SIZE
got = fnx.zeros(2, 2)
works = dist.batch_isend_irecv([dist.P2POp(dist.isend, fnx.full((2, 2), float(RANK)), right),
                                dist.P2POp(dist.irecv, got, left)])
for w in works:
    w.wait()
check(got, np.full((2, 2), float(left)), "batch_isend_irecv ring")
raises(ValueError, "Invalid ``op``", dist.P2POp, dist.all_reduce, got, 0)

# ---------------------------------------------------------------- objects
objs = [None] * SIZE
dist.all_gather_object(objs, {"r": RANK, "t": fnx.tensor([RANK])})
assert [o["r"] for o in objs] == [0, 1, 2] and [int(o["t"]) for o in objs] == [0, 1, 2], objs
items = [RANK, "x"] if RANK == 2 else [None, None]
dist.broadcast_object_list(items, src=2)
assert items == [2, "x"], items
gathered = [None] * SIZE if RANK == 1 else None
dist.gather_object(("g", RANK), gathered, dst=1)
assert gathered == ([("g", r) for r in range(SIZE)] if RANK == 1 else None), gathered
slot = [None]
dist.scatter_object_list(slot, [f"s{i}" for i in range(SIZE)] if RANK == 0 else None, src=0)
assert slot == [f"s{RANK}"], slot

# ---------------------------------------------------------------- groups
assert dist.group.WORLD is dist.GroupMember.WORLD and dist.get_process_group_ranks(dist.group.WORLD) == [0, 1, 2]
g = dist.new_group([2, 1])
if RANK == 0:
    assert g == dist.GroupMember.NON_GROUP_MEMBER and dist.get_rank(g) == -1 and dist.get_world_size(g) == -1
    t = fnx.tensor([5.0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert dist.all_reduce(t, group=g) is None
    assert "does not belong to the given group" in str(caught[0].message)
    check(t, [5.0], "non-member all_reduce")
else:
    assert dist.get_process_group_ranks(g) == [1, 2] and dist.get_rank(g) == RANK - 1 and dist.get_world_size(g) == 2
    assert dist.get_global_rank(g, 1) == 2 and dist.get_group_rank(g, 2) == 1 and g.size() == 2
    raises(ValueError, "not part of the group", dist.get_group_rank, g, 0)
    t = fnx.tensor([float(RANK)])
    dist.all_reduce(t, group=g)
    check(t, [3.0], "group all_reduce")
    t = fnx.tensor([float(RANK)])
    dist.broadcast(t, src=2, group=g)
    check(t, [2.0], "group broadcast (global src)")
    t = fnx.tensor([float(RANK)])
    dist.broadcast(t, group=g, group_src=0)
    check(t, [1.0], "group broadcast (group_src)")
    outs = [fnx.zeros(1) for _ in range(2)]
    dist.all_gather(outs, fnx.tensor([10.0 * RANK]), group=g)
    check(fnx.cat(outs), [10.0, 20.0], "group all_gather")
    objs = [None, None]
    dist.all_gather_object(objs, RANK, group=g)
    assert objs == [1, 2], objs
    if RANK == 1:
        dist.send(fnx.tensor([4.0]), group_dst=1, group=g)
    else:
        x = fnx.zeros(1)
        assert dist.recv(x, group=g) == 1
        check(x, [4.0], "group recv")
    raises(ValueError, "is not part of the group", dist.broadcast, t, src=0, group=g)
    dist.barrier(group=g)
mesh = dist.init_device_mesh("cpu", (3,))
assert mesh.get_group() is dist.group.WORLD and mesh.size() == 3 and mesh.get_local_rank() == RANK
mesh = dist.init_device_mesh("cpu", (1, 3), mesh_dim_names=("dp", "tp"))
assert mesh.shape == (1, 3) and mesh.get_coordinate() == (0, RANK) and mesh["tp"].get_local_rank() == RANK
assert dist.get_process_group_ranks(mesh.get_group("dp")) == [RANK] and mesh["dp"].size() == 1
t = fnx.tensor([float(RANK)])
dist.all_reduce(t, group=mesh.get_group("dp"))   # a group of one: itself
dist.all_reduce(t, group=mesh["tp"].get_group())
check(t, [3.0], "all_reduce over a mesh dimension")
check(mesh.mesh, [[0, 1, 2]], "mesh")
mine, groups = dist.new_subgroups(group_size=1)
assert len(groups) == 3 and dist.get_process_group_ranks(mine) == [RANK]
dist.monitored_barrier(timeout=timedelta(seconds=30))
assert dist.get_backend_config() == f"cpu:{sys.argv[1]}" and dist.Backend("GLOO") == dist.Backend.GLOO == "gloo"
assert dist.is_torchelastic_launched() == (sys.argv[1] == "gloo")
assert dist.get_node_local_rank(fallback_rank=RANK) == RANK
dist.destroy_process_group()
print(f"OK rank {RANK}", flush=True)
