"""Devices: `cpu` runs on numpy, `cuda[:N]` on CuPy (imported only when first used)."""
from __future__ import annotations

import contextvars

import numpy as np

__all__ = ["device", "is_cuda_available", "cuda_device_count", "get_default_device", "set_default_device"]

_cupy = None
_cupy_error: Exception | None = None


def _import_cupy():
    global _cupy, _cupy_error
    if _cupy is None and _cupy_error is None:
        try:
            import cupy

            cupy.cuda.runtime.getDeviceCount()
            _cupy = cupy
        except Exception as e:  # no CuPy, no driver or no GPU: CUDA is unavailable
            _cupy_error = e
    return _cupy


def is_cuda_available() -> bool:
    cp = _import_cupy()
    return cp is not None and cp.cuda.runtime.getDeviceCount() > 0


def cuda_device_count() -> int:
    cp = _import_cupy()
    return cp.cuda.runtime.getDeviceCount() if cp is not None else 0


class device:
    """Where a tensor lives: `fnx.device("cpu")`, `fnx.device("cuda")`, `fnx.device("cuda", 1)`.

    Device objects are interned, so code compares them with `is`.
    """

    __slots__ = ("type", "index", "_xp")
    _cache: dict = {}

    def __new__(cls, spec="cpu", index: int | None = None):
        if isinstance(spec, device):
            return spec
        key = (spec, index)
        found = cls._cache.get(key)
        if found is not None:
            return found
        if type(spec) is int:  # PyTorch: device(0) is cuda:0
            spec, index = "cuda", spec
        if not isinstance(spec, str):
            raise TypeError(f"device: expected a string such as 'cpu' or 'cuda:0', got {type(spec).__name__}")
        kind, _, idx = spec.partition(":")
        if kind not in ("cpu", "cuda"):
            raise RuntimeError(f"device: unknown device type {kind!r} in {spec!r}; expected 'cpu' or 'cuda[:N]'")
        if idx:
            if not idx.isdigit():
                raise RuntimeError(f"device: invalid device string {spec!r}; expected 'cpu' or 'cuda[:N]' with N >= 0")
            if index is not None:
                raise RuntimeError(f"device: index given twice in device({spec!r}, {index})")
            index = int(idx)
        if index is not None and (type(index) is not int or index < 0):
            raise RuntimeError(f"device: the index must be a non-negative int, got {index!r}")
        if kind == "cuda" and index is None:
            index = 0
        if kind == "cpu":
            index = None
        canon = (kind, index)
        self = cls._cache.get(canon)
        if self is None:
            self = object.__new__(cls)
            self.type, self.index, self._xp = kind, index, np if kind == "cpu" else None
            cls._cache[canon] = self
        cls._cache[key] = self
        return self

    @property
    def xp(self):
        """The array module of this device: numpy or cupy."""
        xp = self._xp
        if xp is None:
            xp = _import_cupy()
            if xp is None:
                raise RuntimeError(
                    f"device {self}: CUDA is not available ({_cupy_error}). "
                    "Install fnx[cuda13] or fnx[cuda12] on a machine with an NVIDIA GPU, or use device='cpu'."
                )
            if self.index >= xp.cuda.runtime.getDeviceCount():
                raise RuntimeError(f"device {self}: only {xp.cuda.runtime.getDeviceCount()} CUDA device(s) present")
            self._xp = xp
        return xp

    def __repr__(self) -> str:
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            try:
                other = device(other)
            except RuntimeError:
                return False
        return self is other

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __reduce__(self):
        return (device, (str(self),))

    def __enter__(self) -> device:
        """`with fnx.device("cuda"):` makes factory functions without `device=` create there, as PyTorch does."""
        _entered.set(_entered.get() + (_default.get(),))
        _default.set(self)
        return self

    def __exit__(self, *exc) -> None:
        stack = _entered.get()
        _default.set(stack[-1])
        _entered.set(stack[:-1])


cpu = device("cpu")
# The device factory functions create on when given no `device=`: per thread, as PyTorch's
_default = contextvars.ContextVar("fnx_default_device", default=cpu)
_entered = contextvars.ContextVar("fnx_device_contexts", default=())   # the defaults `with device(...)` replaced


def get_default_device() -> device:
    """The device factory functions (zeros, randn, tensor, ...) create on when given none: cpu unless
    `set_default_device` or a `with fnx.device(...)` block changed it."""
    return _default.get()


def set_default_device(device_spec) -> None:
    """Make factory functions without `device=` create on `device_spec` (None: back to cpu), in this thread."""
    _default.set(cpu if device_spec is None else device(device_spec))


def device_of_array(arr) -> device:
    """The device holding a numpy or CuPy array."""
    if isinstance(arr, np.ndarray):
        return cpu
    dev = device("cuda", arr.device.id)
    dev.xp  # a CuPy array proves CuPy works: make the fast path's `_xp` ready
    return dev
