"""Collectives on tensors, PyTorch's `torch.distributed` API: they write their results into the tensors given.

Each call checks its arguments on this rank, then (by default) that every rank makes the same call on
tensors of the same shape and dtype: one small blocking allgather of a row of integers describing the call.
A mismatch raises a clear error on every rank, naming the ranks and what each passed, where MPI would
otherwise hang or reduce garbage. `FNX_DISTRIBUTED_DEBUG=0` (read by `init_process_group`) turns the check
off. The collective itself runs on the tensor's memory when it is contiguous (no copy), else on a contiguous
copy that is written back. Writing bumps the tensor's version counter, as every in-place op does; autograd
does not record these calls (use fnx.distributed.functional for differentiable collectives).
"""
from __future__ import annotations

import enum
from datetime import timedelta

import numpy as np

from .. import dtypes as _dt
from ..core import FnxRuntimeError, FnxTypeError, FnxValueError
from ..tensor import Tensor, Tracer
from .backends import contiguous
from .process_group import peer, resolve

__all__ = ["ReduceOp", "all_reduce", "broadcast", "all_gather", "all_gather_into_tensor", "reduce_scatter",
           "reduce_scatter_tensor", "barrier", "check_agreement", "op_name", "check_avg"]


class ReduceOp(enum.Enum):
    """How a reduction combines the ranks' values (PyTorch's `torch.distributed.ReduceOp`)."""

    SUM = "sum"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    AVG = "avg"


def op_name(op, what: str, allowed=tuple(o.value for o in ReduceOp)) -> str:
    """The name of reduction `op` (a ReduceOp or its name, any case), checked against `allowed`."""
    name = op.value if isinstance(op, ReduceOp) else op.lower() if isinstance(op, str) else None
    if name not in allowed:
        raise FnxValueError(f"fnx.distributed.{what}: unsupported reduction {op!r}; expected one of "
                            f"{', '.join(allowed)} (or fnx.distributed.ReduceOp members)")
    return name


def check_avg(op: str, dtype, what: str) -> None:
    if op == "avg" and not dtype.is_floating_point:
        raise FnxTypeError(f"fnx.distributed.{what}: ReduceOp.AVG needs a floating-point tensor, got {dtype}; "
                           f"reduce with SUM and divide by the world size yourself")


# ---------------------------------------------------------------- the cross-rank metadata check
_KINDS = ("all_reduce", "broadcast", "all_gather", "reduce_scatter", "reduce", "gather", "scatter")
_ROOTED = {"broadcast": "src", "gather": "dst", "scatter": "src"}
_OPS = tuple(o.value for o in ReduceOp)
_DTYPE_CODE = {d.np: i for i, d in enumerate(_dt.ALL)}
_DIMS = 7  # dims listed in the row; a hash of the whole shape catches differences beyond them


def _describe_row(row) -> str:
    kind, param, dt, ndim = (int(v) for v in row[:4])
    shape = ", ".join(str(int(d)) for d in row[5:5 + min(ndim, _DIMS)]) + (", ..." if ndim > _DIMS else "")
    name = _KINDS[kind]
    if name in _ROOTED:
        arg = f"{_ROOTED[name]}={param}"
    elif name == "reduce":
        arg = f"op={_OPS[param % len(_OPS)]}, dst={param // len(_OPS)}"
    else:
        arg = f"op={_OPS[param]}" if param >= 0 else ""
    return f"{name}({arg}) on {_dt.ALL[dt].name}[{shape}]"


_rows: dict = {}


def _row(kind: str, param: int, arr) -> tuple:
    """The int64 row describing a call (cached: the check runs before every collective), and its bytes."""
    key = (kind, param, arr.dtype, arr.shape)
    found = _rows.get(key)
    if found is None:
        if len(_rows) > 4096:
            _rows.clear()
        row = np.full(5 + _DIMS, -1, np.int64)
        row[:5] = (_KINDS.index(kind), param, _DTYPE_CODE[arr.dtype], arr.ndim, hash(arr.shape))
        row[5:5 + min(arr.ndim, _DIMS)] = arr.shape[:_DIMS]
        found = _rows[key] = (row, row.tobytes())
    return found


def check_agreement(w, kind: str, arr, param: int = -1) -> None:
    """Raise on every rank unless all ranks call collective `kind` with `param` on arrays like `arr`."""
    if w.size() == 1 or not w.debug:
        return
    row, expected = _row(kind, param, arr)
    table = w.host.gather_rows(row, kind)
    if table.tobytes() == expected * w.size():
        return
    groups: dict[str, list[int]] = {}
    for r, other in enumerate(table):
        groups.setdefault(_describe_row(other), []).append(r)
    calls = "; ".join(f"rank{'s' if len(rs) > 1 else ''} {', '.join(map(str, rs))}: {d}" for d, rs in groups.items())
    raise FnxRuntimeError(f"fnx.distributed.{kind}: the ranks' calls do not match ({calls}). Every rank must make "
                          f"the same collective call on tensors of the same shape and dtype. (This check runs "
                          f"before each collective; FNX_DISTRIBUTED_DEBUG=0 turns it off.)")


# ---------------------------------------------------------------- tensors in, buffers out
def _tensor(t, what: str, name: str = "tensor") -> Tensor:
    if isinstance(t, Tracer):
        raise FnxRuntimeError(f"fnx.distributed.{what} writes into its tensor and cannot run inside fnx.grad/vmap/"
                              f"compile; use fnx.distributed.functional.{what}, which returns a new tensor")
    if not isinstance(t, Tensor):
        raise FnxTypeError(f"fnx.distributed.{what}: {name} must be an fnx.Tensor, got {type(t).__name__}")
    return t


def _writable(t: Tensor, what: str):
    """`t`'s array, which the collective is about to write (its version counter says so)."""
    v = t._value
    if not v.flags.writeable:
        raise FnxRuntimeError(f"fnx.distributed.{what}: the tensor is a read-only view (expand/broadcast); "
                              f".clone() it first")
    t._version[0] += 1
    return v


def _output(t: Tensor, what: str, then: list):
    """A contiguous buffer holding `t`'s values that the collective may overwrite; appends the write-back."""
    v = _writable(t, what)
    if v.flags.c_contiguous:
        return v
    buf = v.copy(order="C")
    then.append(lambda: t._value.__setitem__(Ellipsis, buf))
    return buf


def _same_kind(ts, ref: Tensor, what: str, name: str) -> None:
    for i, t in enumerate(ts):
        _tensor(t, what, f"{name}[{i}]")
        if t.shape != ref.shape or t.dtype is not ref.dtype or t.device is not ref.device:
            raise FnxValueError(f"fnx.distributed.{what}: {name}[{i}] is {t.dtype}{list(t.shape)} on {t.device}, "
                                f"but every entry must match the tensor {ref.dtype}{list(ref.shape)} on {ref.device}")


def all_reduce(tensor: Tensor, op=ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduce `tensor` over all ranks with `op`; every rank ends with the result in `tensor`."""
    w = resolve("all_reduce", group)
    if w is None:
        return None
    _tensor(tensor, "all_reduce")
    op = op_name(op, "all_reduce")
    check_avg(op, tensor.dtype, "all_reduce")
    check_agreement(w, "all_reduce", tensor._value, _OPS.index(op))
    then: list = []
    buf = _output(tensor, "all_reduce", then)
    return w.for_array(buf, "all_reduce").all_reduce(buf, buf, op, async_op, then)


def broadcast(tensor: Tensor, src: int | None = None, group=None, async_op: bool = False,
              group_src: int | None = None):
    """Copy rank `src`'s `tensor` (a global rank; or `group_src`, a rank of `group`) into `tensor` on every
    other rank of the group."""
    w = resolve("broadcast", group)
    if w is None:
        return None
    _tensor(tensor, "broadcast")
    src = peer(w, src, group_src, ("src", "group_src"), "broadcast")
    check_agreement(w, "broadcast", tensor._value, src)
    then: list = []
    buf = _output(tensor, "broadcast", then)
    return w.for_array(buf, "broadcast").broadcast(buf, src, async_op, then)


def all_gather(tensor_list: list, tensor: Tensor, group=None, async_op: bool = False):
    """Fill `tensor_list[r]` with rank r's `tensor`, on every rank."""
    w = resolve("all_gather", group)
    if w is None:
        return None
    _tensor(tensor, "all_gather")
    if len(tensor_list) != w.size():
        raise FnxValueError(f"fnx.distributed.all_gather: tensor_list has {len(tensor_list)} tensors, but the world "
                            f"has {w.size()} ranks; pass one output tensor per rank")
    _same_kind(tensor_list, tensor, "all_gather", "tensor_list")
    send = contiguous(tensor._value)
    recv = tensor._device.xp.empty((w.size(),) + send.shape, send.dtype)
    check_agreement(w, "all_gather", send)
    for t in tensor_list:
        _writable(t, "all_gather")

    def scatter_back():
        for t, part in zip(tensor_list, recv):
            t._value[...] = part

    return w.for_array(send, "all_gather").all_gather(send, recv, async_op, [scatter_back])


def all_gather_into_tensor(output_tensor: Tensor, input_tensor: Tensor, group=None, async_op: bool = False):
    """Rank r's `input_tensor` goes to block r of `output_tensor` (world_size times its size), on every rank."""
    w = resolve("all_gather_into_tensor", group)
    if w is None:
        return None
    _tensor(input_tensor, "all_gather_into_tensor", "input_tensor")
    _tensor(output_tensor, "all_gather_into_tensor", "output_tensor")
    _check_blocks(output_tensor, input_tensor, w.size(), "all_gather_into_tensor", "output_tensor")
    send = contiguous(input_tensor._value)
    check_agreement(w, "all_gather", send)
    then: list = []
    recv = _output(output_tensor, "all_gather_into_tensor", then)
    return w.for_array(send, "all_gather_into_tensor").all_gather(send, recv, async_op, then)


def reduce_scatter(output: Tensor, input_list: list, op=ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduce `input_list` over the ranks with `op`; rank r receives the reduction of entry r in `output`."""
    w = resolve("reduce_scatter", group)
    if w is None:
        return None
    _tensor(output, "reduce_scatter", "output")
    if len(input_list) != w.size():
        raise FnxValueError(f"fnx.distributed.reduce_scatter: input_list has {len(input_list)} tensors, but the "
                            f"world has {w.size()} ranks; pass one input tensor per rank")
    _same_kind(input_list, output, "reduce_scatter", "input_list")
    op = op_name(op, "reduce_scatter")
    check_avg(op, output.dtype, "reduce_scatter")
    send = output._device.xp.stack([t._value for t in input_list])
    return _reduce_scatter(w, output, send, op, async_op, "reduce_scatter")


def reduce_scatter_tensor(output: Tensor, input: Tensor, op=ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduce `input` (world_size blocks of `output`'s size) over the ranks; rank r receives block r."""
    w = resolve("reduce_scatter_tensor", group)
    if w is None:
        return None
    _tensor(output, "reduce_scatter_tensor", "output")
    _tensor(input, "reduce_scatter_tensor", "input")
    _check_blocks(input, output, w.size(), "reduce_scatter_tensor", "input")
    op = op_name(op, "reduce_scatter_tensor")
    check_avg(op, output.dtype, "reduce_scatter_tensor")
    send = contiguous(input._value)
    return _reduce_scatter(w, output, send, op, async_op, "reduce_scatter_tensor")


def _reduce_scatter(w, output: Tensor, send, op: str, async_op: bool, what: str):
    check_agreement(w, "reduce_scatter", send, _OPS.index(op))
    then: list = []
    recv = _output(output, what, then)
    return w.for_array(send, what).reduce_scatter(send, recv, op, async_op, then)


def _check_blocks(whole: Tensor, block: Tensor, size: int, what: str, name: str) -> None:
    if whole.numel() != size * block.numel() or whole.dtype is not block.dtype or whole.device is not block.device:
        raise FnxValueError(f"fnx.distributed.{what}: {name} must hold world_size ({size}) blocks of the other "
                            f"tensor's size and have its dtype and device; got {whole.dtype}{list(whole.shape)} "
                            f"and {block.dtype}{list(block.shape)}")


def barrier(group=None, async_op: bool = False, device_ids=None, timeout: timedelta | None = None):
    """Wait until every rank of the group has reached this call (with NCCL, after this GPU's queued work has
    finished), for at most `timeout` (default: the process group's)."""
    w = resolve("barrier", group)
    if w is None:
        return None
    if w.cuda is not None:
        w.cuda.synchronize()
    if timeout is None:
        return w.host.barrier(async_op)
    work = w.host.barrier(True)
    if async_op:
        return work
    work.wait(timeout)
    return None
