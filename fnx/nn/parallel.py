"""`DistributedDataParallel`: one model replica per process; gradients are averaged over the processes in backward.

How gradients meet the all-reduce. fnx's tape hands a leaf one gradient per use and has no hook that runs
after the last one, so DDP's forward runs the module with each parameter replaced by an alias: the output of
a one-input autograd Function (`_GradReady`), through `functional_call`. The engine sums every use of an alias
before it runs the alias's backward, so that backward runs once per parameter with the parameter's complete
gradient for this backward (PyTorch's AccumulateGrad post-hook, without engine support). It hands the gradient
to the reducer instead of the parameter's `.grad`: the reducer copies `.grad` (what earlier `no_sync` steps
accumulated) plus the new gradient into the parameter's slice of a flat bucket, and when every parameter of a
bucket has arrived it starts that bucket's averaging all-reduce without blocking (buckets start in index order,
the same on every rank). When the last parameter that took part in the forward has arrived, which is the last
thing backward does for the model's parameters, the reducer waits for the buckets and writes the averages into
`.grad`. So the communication overlaps the rest of backward, and `.grad` is final when `backward()` returns.

After the forward, a walk over the output's graph finds the parameters it used: any other parameter would
never report, so it raises an error naming them, unless `find_unused_parameters=True`, which counts them as
ready with no new gradient (and leaves `.grad` alone for a parameter that no rank used).
"""
from __future__ import annotations

from contextlib import contextmanager

from .. import core
from ..autograd import no_grad
from ..autograd.function import Function
from ..core import FnxRuntimeError, FnxValueError
from ..distributed import broadcast
from ..distributed.process_group import world
from ..tensor import Tensor, make
from ..tree import tree_leaves
from .data_parallel import DataParallel
from .module import Module
from .stateless import functional_call

__all__ = ["DistributedDataParallel", "DataParallel"]


class _GradReady(Function):
    """The identity in forward; in backward, gives the parameter's complete gradient to the reducer."""

    @staticmethod
    def forward(ctx, param, reducer, index, generation):
        ctx.reducer, ctx.index, ctx.generation = reducer, index, generation
        return param

    @staticmethod
    def backward(ctx, grad):
        ctx.reducer.mark_ready(ctx.index, grad, ctx.generation)
        return None, None, None, None


class _Bucket:
    """Parameters whose gradients are averaged by one all-reduce of a flat buffer."""

    def __init__(self, indices: list, params: list, xp):
        self.indices = indices
        self.slices, start = {}, 0
        for i in indices:
            n = params[i].numel()
            self.slices[i] = (start, start + n)
            start += n
        self.buffer = xp.empty(start, params[indices[0]]._value.dtype)
        self.pending, self.work = len(indices), None


class _Reducer:
    """Per-iteration state: which parameters reported, which buckets are in flight."""

    def __init__(self, world, names: list, params: list, cap_bytes: int, find_unused: bool):
        self.world, self.names, self.params, self.find_unused = world, names, params, find_unused
        self.buckets = _make_buckets(params, cap_bytes)
        self.bucket_of = {i: b for b in self.buckets for i in b.indices}
        self.generation, self.armed = 0, False
        self.seen: set = set()
        self.used: set = set()
        self.remaining, self.next_bucket = 0, 0

    def begin(self) -> tuple[dict, dict]:
        """Aliases of the parameters for a forward, and their autograd nodes (node id -> parameter index)."""
        if self.armed and self.seen:
            missing = [self.names[i] for i in sorted(self.used - self.seen)]
            self.armed = False
            raise FnxRuntimeError(
                f"DistributedDataParallel: the previous iteration's backward produced no gradient for parameters "
                f"that took part in its forward, so their all-reduce never finished: {missing}. Make sure every "
                f"output of the forward takes part in computing the loss (or do not return the others).")
        self.generation += 1
        aliases, nodes = {}, {}
        for i, (name, p) in enumerate(zip(self.names, self.params)):
            a = _GradReady.apply(p, self, i, self.generation)
            aliases[name], nodes[id(a._node)] = a, i
        return aliases, nodes

    def prepare(self, used: set) -> None:
        """Arm the reducer after a forward that used the parameters `used`."""
        unused = [i for i in range(len(self.params)) if i not in used]
        if unused and not self.find_unused:
            raise FnxRuntimeError(
                f"DistributedDataParallel: parameters that did not take part in computing the forward output, so "
                f"no gradient will reach them: {[self.names[i] for i in unused]}. Pass find_unused_parameters=True "
                f"to DistributedDataParallel if some parameters are legitimately unused in some iterations, or "
                f"freeze them with requires_grad_(False).")
        for b in self.buckets:
            b.pending, b.work = len(b.indices), None
        for i in unused:
            self._fill(i, None)
        self.used, self.seen = used, set()
        self.remaining, self.next_bucket, self.armed = len(used), 0, True

    def mark_ready(self, i: int, grad: Tensor, generation: int) -> None:
        if generation != self.generation or not self.armed or i in self.seen:
            raise FnxRuntimeError(
                f"DistributedDataParallel: parameter {self.names[i]!r} received a gradient from a backward through "
                f"the output of an earlier forward, or a second backward through the same one. DDP averages each "
                f"gradient once per forward: run a forward for every backward (accumulate over several inside "
                f"no_sync()).")
        for hook in list(getattr(self.params[i], "_hooks", None) or ()):
            out = hook(grad)
            if out is not None:
                grad = out
        self._fill(i, grad)
        self.seen.add(i)
        self._launch_ready()
        self.remaining -= 1
        if self.remaining == 0:
            self._finalize()

    def _fill(self, i: int, grad: Tensor | None) -> None:
        """Put the parameter's `.grad` plus `grad` (this backward's) into its bucket slice."""
        p, b = self.params[i], self.bucket_of[i]
        start, end = b.slices[i]
        slot = b.buffer[start:end].reshape(p._value.shape)
        old = p._grad
        xp = p._device.xp
        if grad is None:
            slot[...] = 0 if old is None else old._value
        elif old is None:
            slot[...] = grad._value
        else:
            xp.add(old._value, grad._value, out=slot)
        b.pending -= 1

    def _launch_ready(self) -> None:
        """Start the all-reduce of every complete bucket whose predecessors have started (the same order on every
        rank); let MPI progress the ones in flight."""
        buckets = self.buckets
        while self.next_bucket < len(buckets) and buckets[self.next_bucket].pending == 0:
            b = buckets[self.next_bucket]
            b.work = self.world.for_array(b.buffer, "DistributedDataParallel").all_reduce(b.buffer, b.buffer, "avg",
                                                                                         True)
            self.next_bucket += 1
        for b in buckets[:self.next_bucket]:
            b.work.is_completed()

    def _finalize(self) -> None:
        """Wait for every bucket and write the averaged gradients into `.grad`."""
        self._launch_ready()
        anyone_used = self._used_anywhere() if self.find_unused else None
        for b in self.buckets:
            b.work.wait()
            for i in b.indices:
                if anyone_used is not None and not anyone_used[i] and self.params[i]._grad is None:
                    continue
                start, end = b.slices[i]
                _write_grad(self.params[i], b.buffer[start:end])
        self.armed = False

    def _used_anywhere(self):
        """Which parameters some rank used in this iteration (one small all-reduce)."""
        import numpy as np

        flags = np.zeros(len(self.params), np.uint8)
        flags[list(self.used)] = 1
        self.world.host.all_reduce(flags, flags, "max", False)
        return flags.astype(bool)


def _make_buckets(params: list, cap_bytes: int) -> list:
    """Buckets of parameters in reverse registration order (roughly the order backward produces their
    gradients), one dtype and device per bucket, each up to `cap_bytes` (a larger parameter gets its own)."""
    buckets, open_ = [], {}
    for i in reversed(range(len(params))):
        p = params[i]
        key = (p.dtype, p.device)
        group = open_.setdefault(key, [[], 0])
        size = p.numel() * p.element_size()
        if group[0] and group[1] + size > cap_bytes:
            buckets.append(_Bucket(group[0], params, p._device.xp))
            group[0], group[1] = [], 0
        group[0].append(i)
        group[1] += size
    for (_, dev), (indices, _) in open_.items():
        if indices:
            buckets.append(_Bucket(indices, params, dev.xp))
    return buckets


def _write_grad(p: Tensor, flat) -> None:
    """Set `p.grad` to `flat` (reshaped), in place when `p.grad` is a plain writable tensor of the right kind."""
    values = flat.reshape(p._value.shape)
    g = p._grad
    if (g is not None and not g._requires_grad and g.dtype is p.dtype and g.shape == p.shape
            and g._value.flags.writeable):
        g._value[...] = values
        g._version[0] += 1
    else:
        p._grad = make(values.copy(), p._device)


def _reached(outputs, nodes: dict) -> set:
    """Indices of the aliases (`nodes`: node id -> index) that the autograd graph of `outputs` reaches."""
    found, seen = set(), set()
    stack = [t._node for t in tree_leaves(outputs) if isinstance(t, Tensor) and t._node is not None]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        i = nodes.get(id(node))
        if i is not None:
            found.add(i)
        else:
            stack.extend(p for p in node.parents if p is not None and not isinstance(p, Tensor))
    return found


class DistributedDataParallel(Module):
    """Data parallelism over the processes of `fnx.distributed`'s process group (torch's DDP).

    At construction, rank 0's parameters and buffers are copied to every rank. Each rank then runs the module
    on its own part of the batch; backward averages the gradients over the ranks, in buckets of about
    `bucket_cap_mb` MB whose all-reduces start while backward is still running. Inside `no_sync()` gradients
    accumulate locally and are averaged at the first backward after it. With `broadcast_buffers`, rank 0's
    buffers (running statistics) are copied to every rank at each forward that records gradients.
    """

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0,
                 broadcast_buffers: bool = True, process_group=None, bucket_cap_mb: float = 25,
                 find_unused_parameters: bool = False):
        super().__init__()
        w = world("nn.parallel.DistributedDataParallel", process_group)
        if dim != 0:
            raise FnxValueError("DistributedDataParallel: only dim=0 is supported (each rank feeds its own batch)")
        self.module = module
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        devices = {p.device for _, p in named}
        if len(devices) > 1:
            raise FnxValueError(f"DistributedDataParallel: the module's parameters are on several devices "
                                f"{sorted(map(str, devices))}; DDP needs one device per process")
        _check_device_ids(device_ids, next(iter(devices), None))
        self.device_ids, self.output_device = device_ids, output_device
        self.broadcast_buffers, self.find_unused_parameters = broadcast_buffers, find_unused_parameters
        self.bucket_bytes_cap = int(bucket_cap_mb * 2 ** 20)
        self.require_backward_grad_sync = True
        with no_grad():
            for t in (*module.parameters(), *module.buffers()):
                broadcast(t, 0)
        self._synced_buffers = [b for _, b in module.named_buffers()]
        self._reducer = _Reducer(w, [n for n, _ in named], [p for _, p in named], self.bucket_bytes_cap,
                                 find_unused_parameters) if named else None

    def forward(self, *inputs, **kwargs):
        recording = core.state.grad_enabled and not core.state.transforms_active
        if recording and self.broadcast_buffers and self._synced_buffers:
            with no_grad():
                for b in self._synced_buffers:
                    broadcast(b, 0)
        if not (recording and self.require_backward_grad_sync and self._reducer is not None):
            return self.module(*inputs, **kwargs)
        aliases, nodes = self._reducer.begin()
        out = functional_call(self.module, aliases, inputs, kwargs)
        self._reducer.prepare(_reached(out, nodes))
        return out

    @contextmanager
    def no_sync(self):
        """Inside this context, backward accumulates gradients on each rank without communicating."""
        previous, self.require_backward_grad_sync = self.require_backward_grad_sync, False
        try:
            yield
        finally:
            self.require_backward_grad_sync = previous

    def extra_repr(self) -> str:
        return f"find_unused_parameters={self.find_unused_parameters}" if self.find_unused_parameters else ""


def _check_device_ids(device_ids, dev) -> None:
    if device_ids is None:
        return
    if dev is None or dev.type != "cuda":
        raise FnxValueError(f"DistributedDataParallel: device_ids={device_ids} is for modules on a CUDA device; "
                            f"leave it None for a CPU module")
    ids = list(device_ids)
    if len(ids) != 1 or int(str(ids[0]).rpartition(":")[2]) != dev.index:
        raise FnxValueError(f"DistributedDataParallel: device_ids must list the one device the module is on "
                            f"([{dev.index}]), got {device_ids}")
