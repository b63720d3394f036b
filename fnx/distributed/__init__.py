"""fnx.distributed: data-parallel training across processes and machines, on MPI or TCP ("gloo", CPUs) and NCCL
(GPUs).

    import fnx.distributed as dist
    dist.init_process_group("mpi")            # launched as: mpiexec -n 4 python train.py
    dist.init_process_group("gloo")           # or: torchrun / fnx.multiprocessing.spawn (RANK, MASTER_ADDR, ...)
    model = fnx.nn.parallel.DistributedDataParallel(model)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)  # in place, PyTorch's API

The names and semantics follow `torch.distributed`. fnx.distributed.functional has the same collectives as
differentiable, batchable primitives that return new tensors, for code under fnx.grad, vmap and compile.
Nothing here imports mpi4py (which starts MPI) before `init_process_group` is called. No rank waits forever:
collectives time out (`init_process_group(timeout=...)`) and fail at once when a rank they need has left, with
a `DistBackendError` naming the collective and the rank (fnx/distributed/liveness.py).
"""
from . import functional
from .backends import Work
from .liveness import DistBackendError
from .collectives import (ReduceOp, all_gather, all_gather_into_tensor, all_reduce, barrier, broadcast,
                          reduce_scatter, reduce_scatter_tensor)
from .process_group import (destroy_process_group, get_backend, get_rank, get_world_size, init_process_group,
                            is_available, is_gloo_available, is_initialized, is_mpi_available, is_nccl_available)

__all__ = ["init_process_group", "destroy_process_group", "is_initialized", "is_available", "is_mpi_available",
           "is_nccl_available", "is_gloo_available", "get_rank", "get_world_size", "get_backend", "ReduceOp", "Work", "DistBackendError",
           "all_reduce", "broadcast", "all_gather", "all_gather_into_tensor", "reduce_scatter",
           "reduce_scatter_tensor", "barrier", "functional"]
