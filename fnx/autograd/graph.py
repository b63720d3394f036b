"""torch.autograd.graph's hooks on saved tensors: `saved_tensors_hooks`, `save_on_cpu`,
`disable_saved_tensors_hooks`.

Inside `saved_tensors_hooks(pack_hook, unpack_hook)`, every tensor that the tape keeps for a backward rule (the
inputs and outputs a primitive's vjp reads, those of multiple-result primitives, what a custom Function saves
with `ctx.save_for_backward`) is handed to `pack_hook` when the op records, and the tape keeps what it returns
instead of the tensor; backward gets the tensor back from `unpack_hook`. Only the innermost pair applies, as in
PyTorch. The hooks must give back a tensor of the same value: a saved leaf that requires grad is used as itself
(the tape holds it anyway, as the parent its gradient flows to).

Not covered, and refused with NotImplementedError while hooks are active: the residuals that an eager call of
an fnx.compile'd function, a custom_vjp or a checkpoint keeps for its backward.
"""
from __future__ import annotations

from typing import Callable

from .. import core
from ..core import FnxRuntimeError
from ..tensor import Tensor
from . import tape

__all__ = ["saved_tensors_hooks", "save_on_cpu", "disable_saved_tensors_hooks"]


class saved_tensors_hooks:
    """Context manager: the tape keeps `pack_hook(tensor)` for each tensor it saves, and backward reads
    `unpack_hook(packed)` (see the module docstring)."""

    def __init__(self, pack_hook: Callable[[Tensor], object], unpack_hook: Callable[[object], Tensor]):
        self.pack_hook, self.unpack_hook = pack_hook, unpack_hook

    def __enter__(self):
        message = tape._hooks_disabled.get()
        if message is not None:
            raise FnxRuntimeError(message)
        self._token = core.set_saved_hooks((self.pack_hook, self.unpack_hook))
        return self

    def __exit__(self, *exc) -> None:
        core.reset_saved_hooks(self._token)


class save_on_cpu(saved_tensors_hooks):
    """Keep the tensors saved for backward in CPU memory and move them back to their device in backward (GPU
    memory for activations traded for transfers). fnx does not page-lock memory, so `pin_memory` changes nothing."""

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda"):
        def pack_to_cpu(tensor: Tensor):
            return tensor.device, tensor.cpu()

        def unpack_from_cpu(packed) -> Tensor:
            device, tensor = packed
            return tensor.to(device, non_blocking=pin_memory)

        super().__init__(pack_to_cpu, unpack_from_cpu)


class disable_saved_tensors_hooks:
    """Context manager (or decorator) in which entering `saved_tensors_hooks` raises RuntimeError(`error_message`):
    for code whose saved tensors must not be redirected."""

    def __init__(self, error_message: str):
        self.error_message = error_message

    def __enter__(self):
        self._token = tape._hooks_disabled.set(self.error_message)
        return self

    def __exit__(self, *exc) -> None:
        tape._hooks_disabled.reset(self._token)

    def __call__(self, fn):
        def wrapper(*args, **kwargs):
            with disable_saved_tensors_hooks(self.error_message):
                return fn(*args, **kwargs)

        wrapper.__name__, wrapper.__doc__ = fn.__name__, fn.__doc__
        return wrapper
