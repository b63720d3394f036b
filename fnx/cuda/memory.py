"""GPU memory and device queries, streams and events under torch.cuda's names, on CuPy.

fnx's CUDA tensors live in CuPy's default memory pool: "allocated" is the pool's bytes in use, "reserved" the
bytes it holds from the driver. Peaks are counted by a thin allocator around the pool, installed by the first
`reset_peak_memory_stats` (or peak query): from then on every allocation updates them, so a benchmark that
resets, runs and reads gets PyTorch's figures. Without CUDA the memory counters are 0 and `empty_cache` does
nothing (as in a CPU build of PyTorch); the device, stream and event functions raise an error saying so.
"""
from __future__ import annotations

from collections import namedtuple
from contextlib import contextmanager

from ..device import is_cuda_available
from ..errors import FnxRuntimeError

__all__ = ["memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
           "reset_peak_memory_stats", "reset_max_memory_allocated", "memory_stats", "memory_summary", "mem_get_info",
           "get_device_name", "get_device_properties", "get_device_capability", "set_device", "Stream", "Event",
           "stream", "current_stream", "default_stream"]


def _cupy(what: str):
    if not is_cuda_available():
        raise FnxRuntimeError(f"fnx.cuda.{what}: CUDA is not available (CuPy is not installed or sees no GPU); "
                              f"check fnx.cuda.is_available() first")
    import cupy
    return cupy


def _index(device) -> int:
    if device is None:
        return 0
    if isinstance(device, int):
        return device
    index = getattr(device, "index", None)
    if index is None and isinstance(device, str):
        index = int(device.split(":")[1]) if ":" in device else 0
    return index or 0


class _Peaks:
    """The allocator around CuPy's pool that records the peaks of bytes in use and held."""

    def __init__(self, cupy):
        self.pool = cupy.get_default_memory_pool()
        self.allocated = self.reserved = 0
        cupy.cuda.set_allocator(self.malloc)

    def malloc(self, size: int):
        memory = self.pool.malloc(size)
        self.allocated = max(self.allocated, self.pool.used_bytes())
        self.reserved = max(self.reserved, self.pool.total_bytes())
        return memory

    def reset(self) -> None:
        self.allocated, self.reserved = self.pool.used_bytes(), self.pool.total_bytes()


_peaks: _Peaks | None = None


def _tracked():
    global _peaks
    if _peaks is None:
        _peaks = _Peaks(_cupy("reset_peak_memory_stats"))
    return _peaks


def memory_allocated(device=None) -> int:
    """Bytes of GPU memory that tensors hold (0 without CUDA)."""
    return _cupy("memory_allocated").get_default_memory_pool().used_bytes() if is_cuda_available() else 0


def memory_reserved(device=None) -> int:
    """Bytes of GPU memory the allocator holds, in use or cached (0 without CUDA)."""
    return _cupy("memory_reserved").get_default_memory_pool().total_bytes() if is_cuda_available() else 0


def max_memory_allocated(device=None) -> int:
    """The most bytes tensors held since `reset_peak_memory_stats` (from this first query where it was not
    called); 0 without CUDA."""
    return max(_tracked().allocated, memory_allocated()) if is_cuda_available() else 0


def max_memory_reserved(device=None) -> int:
    """The most bytes the allocator held since `reset_peak_memory_stats`; 0 without CUDA."""
    return max(_tracked().reserved, memory_reserved()) if is_cuda_available() else 0


def reset_peak_memory_stats(device=None) -> None:
    """Start the peaks afresh from the current figures."""
    if is_cuda_available():
        _tracked().reset()


def reset_max_memory_allocated(device=None) -> None:
    """PyTorch's older name for reset_peak_memory_stats."""
    reset_peak_memory_stats(device)


def memory_stats(device=None) -> dict:
    """The counters as PyTorch names them ("allocated_bytes.all.current", ... ".peak", "reserved_bytes...")."""
    return {"allocated_bytes.all.current": memory_allocated(device),
            "allocated_bytes.all.peak": max_memory_allocated(device),
            "reserved_bytes.all.current": memory_reserved(device),
            "reserved_bytes.all.peak": max_memory_reserved(device)}


def memory_summary(device=None, abbreviated: bool = False) -> str:
    """The counters of memory_stats as a small table."""
    stats = memory_stats(device)
    width = max(len(k) for k in stats)
    return "\n".join(f"{k:<{width}}  {v / 2**20:12.2f} MiB" for k, v in stats.items()) + "\n"


def mem_get_info(device=None) -> tuple[int, int]:
    """(free, total) bytes of the GPU, as the driver reports them."""
    cupy = _cupy("mem_get_info")
    with cupy.cuda.Device(_index(device)):
        return cupy.cuda.runtime.memGetInfo()


_Properties = namedtuple("CudaDeviceProperties", ["name", "major", "minor", "total_memory", "multi_processor_count"])


def get_device_properties(device=None):
    """The GPU's name, compute capability (major, minor), memory in bytes and multiprocessor count."""
    props = _cupy("get_device_properties").cuda.runtime.getDeviceProperties(_index(device))
    name = props["name"]
    return _Properties(name.decode() if isinstance(name, bytes) else name, props["major"], props["minor"],
                       props["totalGlobalMem"], props["multiProcessorCount"])


def get_device_name(device=None) -> str:
    """The GPU's name ("NVIDIA H100 80GB HBM3")."""
    return get_device_properties(device).name


def get_device_capability(device=None) -> tuple[int, int]:
    """The GPU's compute capability, (major, minor)."""
    props = get_device_properties(device)
    return props.major, props.minor


def set_device(device) -> None:
    """Make `device` CuPy's current GPU (fnx's "cuda" tensors go to cuda:0 unless an index is given)."""
    _cupy("set_device").cuda.Device(_index(device)).use()


class Stream:
    """A CUDA stream (a CuPy stream): ops issued inside `with fnx.cuda.stream(s):` queue on it."""

    def __init__(self, device=None, priority: int = 0, *, _raw=None):
        cupy = _cupy("Stream")
        self.raw = _raw if _raw is not None else cupy.cuda.Stream(non_blocking=False, priority=priority)

    def synchronize(self) -> None:
        """Wait for the work queued on this stream."""
        self.raw.synchronize()

    def query(self) -> bool:
        """Whether all work queued on this stream has finished."""
        return self.raw.done

    def wait_stream(self, other: "Stream") -> None:
        """Make this stream wait for what `other` has queued so far."""
        self.raw.wait_event(other.raw.record())

    def wait_event(self, event: "Event") -> None:
        self.raw.wait_event(event.raw)

    def record_event(self, event: "Event | None" = None) -> "Event":
        event = event or Event()
        event.record(self)
        return event

    def __eq__(self, other) -> bool:
        return isinstance(other, Stream) and self.raw.ptr == other.raw.ptr

    def __hash__(self) -> int:
        return hash(self.raw.ptr)

    def __repr__(self) -> str:
        return f"<fnx.cuda.Stream ptr={self.raw.ptr:#x}>"


class Event:
    """A CUDA event: `record()` marks a point in a stream; `elapsed_time(end)` is the milliseconds between two
    (with enable_timing=True)."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        cupy = _cupy("Event")
        self.raw = cupy.cuda.Event(block=blocking, disable_timing=not enable_timing, interprocess=interprocess)

    def record(self, stream: Stream | None = None) -> None:
        self.raw.record(None if stream is None else stream.raw)

    def synchronize(self) -> None:
        self.raw.synchronize()

    def query(self) -> bool:
        return self.raw.done

    def wait(self, stream: Stream | None = None) -> None:
        (stream or current_stream()).raw.wait_event(self.raw)

    def elapsed_time(self, end_event: "Event") -> float:
        """Milliseconds from this event to `end_event` (both recorded, with enable_timing=True)."""
        return float(_cupy("Event.elapsed_time").cuda.get_elapsed_time(self.raw, end_event.raw))


def current_stream(device=None) -> Stream:
    """The stream ops are queued on now."""
    cupy = _cupy("current_stream")
    return Stream(_raw=cupy.cuda.get_current_stream())


def default_stream(device=None) -> Stream:
    """The device's default (null) stream."""
    cupy = _cupy("default_stream")
    return Stream(_raw=cupy.cuda.Stream.null)


@contextmanager
def stream(s: Stream | None):
    """Queue the ops inside on stream `s` (None: no change), as torch.cuda.stream."""
    if s is None:
        yield
        return
    with s.raw:
        yield
