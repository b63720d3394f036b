"""`custom_fwd` / `custom_bwd`: autocast for the `forward` and `backward` of an `autograd.Function`, as PyTorch's.

`custom_fwd` records on `ctx` whether autocast was on during forward (and its dtype); with `cast_inputs`, it
instead casts the floating inputs on that device type to `cast_inputs` and runs forward with autocast off.
`custom_bwd` runs backward in the autocast state that forward saw.
"""
from __future__ import annotations

import functools

from .._warn import warn
from ..ops.autocast import autocast, get_autocast_dtype, is_autocast_enabled
from ..tensor import Tensor

__all__ = ["custom_fwd", "custom_bwd"]


def _cast(value, device_type: str, dtype):
    """`value` with its floating tensors on `device_type` cast to `dtype` (through lists, tuples and dicts)."""
    if isinstance(value, Tensor):
        return value.to(dtype) if value.is_floating_point() and value.device.type == device_type else value
    if isinstance(value, dict):
        return {k: _cast(v, device_type, dtype) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, device_type, dtype) for v in value)
    return value


def _check_device_type(device_type) -> None:
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")


def custom_fwd(fwd=None, *, device_type: str, cast_inputs=None):
    """Decorate a custom Function's `forward` (`@custom_fwd(device_type="cuda")`): see the module docstring."""
    _check_device_type(device_type)
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        ctx = args[0]
        ctx._dtype = get_autocast_dtype(device_type)
        if cast_inputs is None:
            ctx._fwd_used_autocast = is_autocast_enabled(device_type)
            return fwd(*args, **kwargs)
        ctx._fwd_used_autocast = False
        if not is_autocast_enabled(device_type):
            return fwd(*args, **kwargs)
        with autocast(device_type=device_type, enabled=False):
            return fwd(*_cast(args, device_type, cast_inputs), **_cast(kwargs, device_type, cast_inputs))

    return decorate_fwd


def custom_bwd(bwd=None, *, device_type: str):
    """Decorate a custom Function's `backward`: it runs with the autocast state its `custom_fwd` forward saw."""
    _check_device_type(device_type)
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        ctx = args[0]
        with autocast(device_type=device_type, enabled=ctx._fwd_used_autocast, dtype=ctx._dtype):
            return bwd(*args, **kwargs)

    return decorate_bwd


def cuda_custom_fwd(fwd=None, *, cast_inputs=None):
    """`torch.cuda.amp.custom_fwd` (deprecated): `custom_fwd(device_type="cuda")`."""
    warn("torch.cuda.amp.custom_fwd(args...) is deprecated. Please use "
         "torch.amp.custom_fwd(args..., device_type='cuda') instead.", FutureWarning)
    return custom_fwd(fwd, device_type="cuda", cast_inputs=cast_inputs)


def cuda_custom_bwd(bwd=None):
    """`torch.cuda.amp.custom_bwd` (deprecated): `custom_bwd(device_type="cuda")`."""
    warn("torch.cuda.amp.custom_bwd(args...) is deprecated. Please use "
         "torch.amp.custom_bwd(args..., device_type='cuda') instead.", FutureWarning)
    return custom_bwd(bwd, device_type="cuda")
