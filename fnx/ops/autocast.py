"""Autocast (mixed precision) as PyTorch's `torch.autocast`: inside a region, the ops of PyTorch's lists run in
the autocast dtype (matmul, linear, conv), in float32 (losses, norms, reductions) or in the widest input dtype
(cat, stack), whatever dtype their inputs have.

One mechanism: `autocast_op(name)` wraps the public function of that name where it is defined, and the wrapper
looks the name up in the table of autocast_lists.py for the device type of the op's first tensor. Outside every
region the wrapper costs one context-variable read; ops in no list are not wrapped at all. The casts are
ordinary `convert` ops, so they are differentiated (float32 parameters get float32 gradients), batched and
staged: a function that `fnx.compile` traces under autocast computes in the autocast dtype, and compile keys
its cache on `autocast_key()`. Like PyTorch's Autocast dispatch key, a wrapped op runs with autocast off
inside it, so the ops it is built from run in the dtype it chose.

The state is per thread (context variables), as PyTorch's. Casts of float32 leaf tensors that require grad
(parameters) are kept for the outermost region when `cache_enabled`, so a weight used by many ops is cast once.
"""
from __future__ import annotations

import contextvars
import functools
import inspect
from typing import Any, Callable

from .. import dtypes as _dt
from .._warn import warn
from ..core import state as _core_state
from ..errors import FnxRuntimeError, FnxTypeError, FnxValueError
from ..tensor import Tensor, Tracer
from .autocast_lists import POLICIES

__all__ = ["autocast", "is_autocast_available", "is_autocast_enabled", "get_autocast_dtype",
           "is_autocast_cache_enabled", "clear_autocast_cache", "set_autocast_enabled", "set_autocast_dtype",
           "set_autocast_cache_enabled"]

DEVICE_TYPES = ("cpu", "cuda")
_DEFAULT_DTYPES = {"cpu": _dt.bfloat16, "cuda": _dt.float16}
_SUPPORTED_DTYPES = {"cpu": (_dt.bfloat16, _dt.float16), "cuda": (_dt.float16, _dt.bfloat16)}

# {device type: dtype} of the enabled device types, or None when autocast is off: the wrappers' only read
_active = contextvars.ContextVar("fnx_autocast_active", default=None)
_get_active = _active.get
# what is_autocast_enabled / get_autocast_dtype report: ({device type: (enabled, dtype)}, cache_enabled)
_settings = contextvars.ContextVar(
    "fnx_autocast_settings", default=({d: (False, _DEFAULT_DTYPES[d]) for d in DEVICE_TYPES}, True))
# {(id, dtype, grad enabled): (tensor, version, cast)} for the outermost region, None outside every region
_cache = contextvars.ContextVar("fnx_autocast_cache", default=None)


def _check_device_type(op: str, device_type: str) -> str:
    if device_type not in DEVICE_TYPES:
        raise FnxValueError(f"{op}: device_type {device_type!r} is not supported; fnx autocasts on "
                            f"{' and '.join(map(repr, DEVICE_TYPES))}")
    return device_type


def is_autocast_available(device_type: str) -> bool:
    """Whether fnx can autocast on `device_type` ("cpu" and "cuda")."""
    return device_type in DEVICE_TYPES


def is_autocast_enabled(device_type: str = "cuda") -> bool:
    """Whether autocast is on for `device_type` in this thread (PyTorch's default device type is "cuda")."""
    return _settings.get()[0][_check_device_type("is_autocast_enabled", device_type)][0]


def get_autocast_dtype(device_type: str) -> _dt.dtype:
    """The dtype autocast lowers to on `device_type` (bfloat16 on "cpu", float16 on "cuda" unless set)."""
    return _settings.get()[0][_check_device_type("get_autocast_dtype", device_type)][1]


def is_autocast_cache_enabled() -> bool:
    """Whether casts of parameters are cached inside autocast regions (the innermost region's setting)."""
    return _settings.get()[1]


def _check_bool(op: str, name: str, value) -> bool:
    if not isinstance(value, bool):
        raise FnxTypeError(f"{op}: {name} must be a bool, got {type(value).__name__}")
    return value


def _set(devices: dict, cache_enabled: bool) -> None:
    """Make `devices` ({device type: (enabled, dtype)}) and `cache_enabled` the settings in force."""
    _settings.set((devices, cache_enabled))
    _active.set({d: t for d, (on, t) in devices.items() if on} or None)


def set_autocast_enabled(device_type: str | bool, enabled: bool | None = None) -> None:
    """Switch autocast on or off for `device_type` in this thread, until the enclosing region ends (if any).

    `set_autocast_enabled(enabled)`, PyTorch's older form, sets it for "cuda"."""
    if enabled is None and isinstance(device_type, bool):
        device_type, enabled = "cuda", device_type
    device_type = _check_device_type("set_autocast_enabled", device_type)
    devices, cache_enabled = _settings.get()
    on = _check_bool("set_autocast_enabled", "enabled", enabled)
    _set({**devices, device_type: (on, devices[device_type][1])}, cache_enabled)


def set_autocast_dtype(device_type: str, dtype) -> None:
    """Set the dtype autocast lowers to on `device_type` in this thread (until the enclosing region ends)."""
    device_type = _check_device_type("set_autocast_dtype", device_type)
    if not isinstance(dtype, _dt.dtype):
        raise FnxTypeError(f"set_autocast_dtype: dtype must be an fnx dtype such as fnx.bfloat16, got "
                           f"{type(dtype).__name__}")
    devices, cache_enabled = _settings.get()
    _set({**devices, device_type: (devices[device_type][0], dtype)}, cache_enabled)


def set_autocast_cache_enabled(enabled: bool) -> None:
    """Switch the caching of parameter casts inside autocast regions on or off (this thread)."""
    devices, _ = _settings.get()
    _set(devices, _check_bool("set_autocast_cache_enabled", "enabled", enabled))


def clear_autocast_cache() -> None:
    """Forget the cached casts of the current region (they are dropped anyway when the outermost one ends)."""
    cache = _cache.get()
    if cache is not None:
        cache.clear()


def autocast_key() -> tuple | None:
    """What autocast changes in a traced program: ((device type, dtype), ...) of the enabled device types, or
    None when autocast is off. `fnx.compile` adds it to its cache key."""
    active = _get_active()
    return None if active is None else tuple(sorted((d, t.name) for d, t in active.items()))


class autocast:
    """`with fnx.autocast("cpu"):` runs the ops of PyTorch's autocast lists in mixed precision; also a decorator.

    `dtype` defaults to bfloat16 on "cpu" and float16 on "cuda". Regions nest: an inner region (or one with
    `enabled=False`) changes its device type's setting until it ends. `cache_enabled` keeps the casts of
    parameters for the outermost region. An unsupported dtype, or "cuda" without a GPU, warns and disables
    autocast, as in PyTorch.
    """

    def __init__(self, device_type: str, dtype=None, enabled: bool = True, cache_enabled: bool | None = None):
        if not isinstance(device_type, str):
            raise FnxValueError(f"autocast: device_type must be a string such as 'cpu' or 'cuda', got "
                                f"{type(device_type).__name__}")
        self.device = _check_device_type("autocast", device_type)
        self.fast_dtype = _DEFAULT_DTYPES[self.device] if dtype is None else _dt.as_dtype(dtype)
        self._cache_enabled = True if cache_enabled is None else bool(cache_enabled)
        self._enabled = bool(enabled)
        if self._enabled and self.fast_dtype not in _SUPPORTED_DTYPES[self.device]:
            supported = " and ".join(d.name for d in _SUPPORTED_DTYPES[self.device])
            warn(f"autocast: {self.device} autocast supports {supported}, not {self.fast_dtype.name}; autocast is "
                 f"disabled in this region")
            self._enabled = False
        if self._enabled and self.device == "cuda":
            from ..device import is_cuda_available
            if not is_cuda_available():
                warn("autocast: device_type 'cuda' was given, but CUDA is not available; autocast is disabled in "
                     "this region")
                self._enabled = False
        self._tokens: list = []

    def __enter__(self) -> None:
        devices, _ = _settings.get()
        devices = {**devices, self.device: (self._enabled, self.fast_dtype)}
        active = {d: t for d, (on, t) in devices.items() if on} or None
        cache = _cache.get()
        self._tokens.append((_settings.set((devices, self._cache_enabled)), _active.set(active),
                             _cache.set({} if cache is None else cache)))

    def __exit__(self, *exc) -> bool:
        settings, active, cache = self._tokens.pop()
        _cache.reset(cache)
        _active.reset(active)
        _settings.reset(settings)
        return False

    def __call__(self, func: Callable) -> Callable:
        """Use as a decorator: `func` runs inside this region each time it is called."""
        @functools.wraps(func)
        def in_region(*args, **kwargs):
            with self:
                return func(*args, **kwargs)
        return in_region


def autocast_op(name: str) -> Callable[[Callable], Callable]:
    """Decorate the public function `name` (PyTorch's name, e.g. "linear", "linalg.vecdot") with its autocast
    policies; a name in no list leaves the function as it is."""
    policies = {d: POLICIES[d][name] for d in DEVICE_TYPES if name in POLICIES[d]}

    def decorate(fn: Callable) -> Callable:
        if not policies:
            return fn
        op = _wrapper(fn, name, policies)
        op.autocast_policies = policies
        return op

    return decorate


def _wrapper(fn: Callable, name: str, policies: dict) -> Callable:
    """`fn` behind the autocast check, written with `fn`'s own parameters: forwarding them by name costs about a
    third of what packing them into *args and **kwargs does (about 35 ns against 95 per call, autocast off).
    Inside a region the parameters reach `_autocast_call` as keywords (positionally before a *args)."""
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    varargs = any(p.kind is p.VAR_POSITIONAL for p in params)
    # the generated code's own names start with _ac_, so that no parameter of `fn` can shadow them
    env = {"_ac_fn": fn, "_ac_get_active": _get_active, "_ac_call": _autocast_call, "_ac_name": name,
           "_ac_policies": policies}
    header, call, slow_args, slow_kwargs = [], [], [], []
    for i, p in enumerate(params):
        default = ""
        if p.default is not p.empty:
            env[f"_ac_default{i}"] = p.default
            default = f"=_ac_default{i}"
        if p.kind is p.VAR_POSITIONAL:
            header.append(f"*{p.name}")
            call.append(f"*{p.name}")
            slow_args.append(f"*{p.name}")
        elif p.kind is p.VAR_KEYWORD:
            header.append(f"**{p.name}")
            call.append(f"**{p.name}")
            slow_kwargs.append(f"**{p.name}")
        elif p.kind is p.KEYWORD_ONLY:
            if not varargs and "*" not in header:
                header.append("*")
            header.append(p.name + default)
            call.append(f"{p.name}={p.name}")
            slow_kwargs.append(f"{p.name!r}: {p.name}")
        else:
            header.append(p.name + default)
            call.append(p.name)
            if varargs or p.kind is p.POSITIONAL_ONLY:
                slow_args.append(p.name)
            else:
                slow_kwargs.append(f"{p.name!r}: {p.name}")
        if p.kind is p.POSITIONAL_ONLY and (i + 1 == len(params) or params[i + 1].kind is not p.POSITIONAL_ONLY):
            header.append("/")
    source = (f"def {fn.__name__}({', '.join(header)}):\n"
              f"    _ac_active = _ac_get_active()\n"
              f"    if _ac_active is None:\n"
              f"        return _ac_fn({', '.join(call)})\n"
              f"    return _ac_call(_ac_fn, _ac_name, _ac_policies, _ac_active, "
              f"({''.join(a + ', ' for a in slow_args)}), {{{', '.join(slow_kwargs)}}})\n")
    exec(compile(source, __file__, "exec"), env)   # this file's name: warnings skip fnx's frames by file
    return functools.wraps(fn)(env[fn.__name__])


def _autocast_call(fn: Callable, name: str, policies: dict, active: dict, args: tuple, kwargs: dict):
    """Run `fn` with its floating inputs cast by its policy for the device type of its first tensor, with
    autocast off inside."""
    device_type = _device_type(args, kwargs)
    dtype = active.get(device_type)
    policy = policies.get(device_type)
    if dtype is None or policy is None:
        return fn(*args, **kwargs)
    if policy == "banned":
        raise FnxRuntimeError(
            f"{name} is unsafe to autocast: many models apply a sigmoid right before it, and in {dtype.name} that "
            f"loses the small probabilities. Use binary_cross_entropy_with_logits (nn.BCEWithLogitsLoss) on the "
            f"logits, which is safe under autocast")
    if policy == "fp32" and kwargs.get("dtype") is not None:
        target = None   # the caller chose the dtype
    else:
        target = cast_target(policy, dtype, device_type, args, kwargs)
    if target is not None:
        args, kwargs = cast_inputs(target, device_type, args, kwargs)
    token = _active.set(None)
    try:
        return fn(*args, **kwargs)
    finally:
        _active.reset(token)


def _tensors(args: tuple, kwargs: dict):
    """The tensors among the arguments, also inside lists and tuples (cat, stack, einsum operands)."""
    for a in (*args, *kwargs.values()):
        if isinstance(a, Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            for x in a:
                if isinstance(x, Tensor):
                    yield x


def _device_type(args: tuple, kwargs: dict) -> str | None:
    for t in _tensors(args, kwargs):
        return t._device.type
    return None


def _eligible(t: Tensor, device_type: str) -> bool:
    """Autocast casts floating tensors of its device type other than float64 (as PyTorch's is_eligible)."""
    dt = t.dtype
    return dt.is_floating_point and dt is not _dt.float64 and t._device.type == device_type


def cast_target(policy: str, dtype: _dt.dtype, device_type: str, args: tuple, kwargs: dict) -> _dt.dtype:
    """The dtype `policy` casts the eligible inputs to: `dtype` ("lower"), float32 ("fp32"), or for "promote"
    float32 when any eligible input is float32 (or of another low dtype), else `dtype`."""
    if policy == "lower":
        return dtype
    if policy == "fp32":
        return _dt.float32
    widest = dtype
    for t in _tensors(args, kwargs):
        if _eligible(t, device_type) and t.dtype is not dtype:
            widest = _dt.float32
    return widest


def cast_inputs(target: _dt.dtype, device_type: str, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """`args` and `kwargs` with every eligible tensor (also in lists and tuples) cast to `target`."""
    def cast(a: Any):
        if isinstance(a, Tensor):
            return _cast(a, target) if _eligible(a, device_type) and a.dtype is not target else a
        if isinstance(a, (list, tuple)) and any(isinstance(x, Tensor) for x in a):
            return type(a)(cast(x) for x in a)
        return a

    return tuple(cast(a) for a in args), {k: cast(v) for k, v in kwargs.items()}


def _cast(t: Tensor, target: _dt.dtype) -> Tensor:
    """t.to(target), cached for float32 parameters (leaves that require grad) in eager code."""
    cache = _cache.get()
    if (cache is None or not _settings.get()[1] or target is _dt.float32 or not t._requires_grad
            or t._node is not None or isinstance(t, Tracer) or _core_state.transforms_active):
        return t.to(target)
    grad_on = _core_state.grad_enabled
    key = (id(t), target, grad_on)
    hit = cache.get(key)
    if hit is not None and hit[0] is t and hit[1] == t._version[0]:
        return hit[2]
    out = t.to(target)
    cache[key] = (t, t._version[0], out)
    return out
