"""fnx.distributed: data-parallel training across processes and machines, on MPI or TCP ("gloo", CPUs) and NCCL
(GPUs).

    import fnx.distributed as dist
    dist.init_process_group("mpi")            # launched as: mpiexec -n 4 python train.py
    dist.init_process_group("gloo")           # or: torchrun / fnx.multiprocessing.spawn (RANK, MASTER_ADDR, ...)
    model = fnx.nn.parallel.DistributedDataParallel(model)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)  # in place, PyTorch's API

The names and semantics follow `torch.distributed`: the collectives above and reduce, gather, scatter,
all_to_all(_single), point-to-point send/recv (isend, irecv, batch_isend_irecv), the object collectives
(all_gather_object, broadcast_object_list, ...: pickles, for trusted peers only), groups (new_group) and the
key-value stores (TCPStore, FileStore, HashStore, PrefixStore); DeviceMesh lays the ranks out in a grid of groups.
fnx.distributed.functional has the same collectives as differentiable, batchable primitives that return new
tensors, for code under fnx.grad, vmap and compile.

Nothing here imports mpi4py (which starts MPI) before `init_process_group` is called. No rank waits forever:
collectives time out (`init_process_group(timeout=...)`) and fail at once when a rank they need has left, with
a `DistBackendError` naming the collective and the rank (fnx/distributed/liveness.py).
"""
from . import device_mesh, functional
from .device_mesh import DeviceMesh, init_device_mesh
from .backends import Work
from .liveness import DistBackendError
from .collectives import (ReduceOp, all_gather, all_gather_into_tensor, all_reduce, barrier, broadcast,
                          reduce_scatter, reduce_scatter_tensor)
from .exchange import all_reduce_coalesced, all_to_all, all_to_all_single, gather, monitored_barrier, reduce, scatter
from .groups import (Backend, GroupMember, get_backend_config, get_global_rank, get_group_rank, get_node_local_rank,
                     get_process_group_ranks, group, is_backend_available, is_torchelastic_launched, new_group,
                     new_subgroups)
from .objects import (all_gather_object, broadcast_object_list, gather_object, recv_object_list, scatter_object_list,
                      send_object_list)
from .store import DistStoreError, FileStore, HashStore, PrefixStore, Store, TCPStore
from .p2p import P2POp, batch_isend_irecv, irecv, isend, recv, send
from .process_group import (ProcessGroup, destroy_process_group, get_backend, get_rank, get_world_size,
                            init_process_group, is_available, is_gloo_available, is_initialized, is_mpi_available,
                            is_nccl_available)

__all__ = ["init_process_group", "destroy_process_group", "is_initialized", "is_available", "is_mpi_available",
           "is_nccl_available", "is_gloo_available", "get_rank", "get_world_size", "get_backend", "ReduceOp", "Work",
           "DistBackendError", "all_reduce", "broadcast", "all_gather", "all_gather_into_tensor", "reduce_scatter",
           "reduce_scatter_tensor", "barrier", "functional",
           "reduce", "gather", "scatter", "all_to_all", "all_to_all_single", "all_reduce_coalesced",
           "monitored_barrier",
           "send", "recv", "isend", "irecv", "P2POp", "batch_isend_irecv",
           "all_gather_object", "broadcast_object_list", "gather_object", "scatter_object_list", "send_object_list",
           "recv_object_list",
           "ProcessGroup", "new_group", "new_subgroups", "group", "GroupMember", "get_process_group_ranks",
           "get_global_rank", "get_group_rank", "Backend", "get_backend_config", "is_backend_available",
           "is_torchelastic_launched", "get_node_local_rank",
           "Store", "HashStore", "FileStore", "TCPStore", "PrefixStore", "DistStoreError",
           "device_mesh", "DeviceMesh", "init_device_mesh"]
