"""`GradScaler` as PyTorch's `torch.amp.GradScaler`: loss scaling for float16 training.

The loss is multiplied by a scale before backward so that small float16 gradients do not flush to zero;
`unscale_` divides the gradients by it again (so `clip_grad_norm_` sees true gradients), `step` skips the
optimizer step when a gradient holds inf or NaN, and `update` lowers the scale after such a step and raises it
after `growth_interval` clean ones. The scale is kept as a Python float: fnx computes on the host's numbers
anyway, so keeping it on the device would save nothing.
"""
from __future__ import annotations

import enum

import numpy as np

from .. import dtypes as _dt
from .._warn import warn
from ..autograd import no_grad
from ..device import is_cuda_available
from ..errors import FnxRuntimeError, FnxValueError
from ..ops.creation import tensor
from ..ops.elementwise import isfinite
from ..tensor import Tensor

__all__ = ["GradScaler"]


class _Stage(enum.Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


class GradScaler:
    """Scales the loss, unscales the gradients, skips steps with inf/NaN gradients and adapts the scale.

    >>> scaler = fnx.amp.GradScaler("cpu")
    >>> # with fnx.autocast("cpu"): loss = loss_fn(model(x), y)
    >>> # scaler.scale(loss).backward(); scaler.step(optimizer); scaler.update()

    With `enabled=False` every method passes through (`scale` returns its input, `step` just steps). On
    device "cuda" without a GPU the scaler warns and disables itself, as PyTorch's does.
    """

    def __init__(self, device: str = "cuda", init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True):
        self._device = str(device)
        self._enabled = bool(enabled)
        if self._enabled and self._device.startswith("cuda") and not is_cuda_available():
            warn("GradScaler is enabled for device 'cuda', but CUDA is not available; the scaler is disabled "
                 "(pass device='cpu' to scale on the CPU)")
            self._enabled = False
        if growth_factor <= 1.0:
            raise FnxValueError(f"GradScaler: growth_factor must be > 1.0, got {growth_factor}")
        if backoff_factor >= 1.0:
            raise FnxValueError(f"GradScaler: backoff_factor must be < 1.0, got {backoff_factor}")
        self._scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._growth_tracker = 0
        self._per_optimizer: dict[int, dict] = {}

    # ---------------------------------------------------------------- the training step
    def scale(self, outputs):
        """`outputs` (a tensor, or lists/tuples of tensors) multiplied by the scale, a float32 0-dim tensor."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            return outputs * tensor(self._scale, dtype=_dt.float32, device=outputs.device)
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise FnxValueError(f"GradScaler.scale: outputs must be a Tensor or a list/tuple of Tensors, got "
                            f"{type(outputs).__name__}")

    def _state(self, optimizer) -> dict:
        return self._per_optimizer.setdefault(id(optimizer), {"stage": _Stage.READY, "found_inf": None})

    def unscale_(self, optimizer) -> None:
        """Divide the gradients of `optimizer`'s parameters by the scale, in place, and note whether any is
        inf/NaN; call it before `clip_grad_norm_`. At most once per optimizer between `update` calls."""
        if not self._enabled:
            return
        state = self._state(optimizer)
        if state["stage"] is _Stage.UNSCALED:
            raise FnxRuntimeError("GradScaler.unscale_() has already been called on this optimizer since the "
                                  "last update()")
        if state["stage"] is _Stage.STEPPED:
            raise FnxRuntimeError("GradScaler.unscale_() is being called after step(); call it before step()")
        inv_scale = float(np.float32(1.0 / self._scale))
        found_inf = False
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is None:
                        continue
                    if g.dtype is _dt.float16:
                        raise FnxValueError("GradScaler.unscale_: attempting to unscale float16 gradients; keep the "
                                            "parameters in float32 and let autocast lower the ops")
                    seen = g._values() if g.is_sparse else g   # a sparse gradient: its values, as PyTorch's
                    if not found_inf and not bool(isfinite(seen).all()):
                        found_inf = True
                    g.mul_(inv_scale)
        state["found_inf"] = found_inf
        state["stage"] = _Stage.UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """`optimizer.step(*args, **kwargs)` after unscaling its gradients (unless `unscale_` did), skipped when a
        gradient holds inf or NaN. Returns what `optimizer.step` returns (None when skipped)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise FnxRuntimeError("GradScaler.step: a closure is not supported while the scaler is enabled")
        state = self._state(optimizer)
        if state["stage"] is _Stage.STEPPED:
            raise FnxRuntimeError("GradScaler.step() has already been called since the last update()")
        if state["stage"] is _Stage.READY:
            self.unscale_(optimizer)
        result = None if state["found_inf"] else optimizer.step(*args, **kwargs)
        state["stage"] = _Stage.STEPPED
        return result

    def update(self, new_scale: float | Tensor | None = None) -> None:
        """Adapt the scale after the iteration's steps: times `backoff_factor` if any step saw inf/NaN, times
        `growth_factor` after `growth_interval` clean iterations in a row; or set it to `new_scale`."""
        if not self._enabled:
            return
        if new_scale is not None:
            if isinstance(new_scale, Tensor):
                if new_scale.numel() != 1 or new_scale.requires_grad:
                    raise FnxValueError("GradScaler.update: new_scale must be a float or a one-element tensor "
                                        "that does not require grad")
                new_scale = new_scale.item()
            self._scale = float(new_scale)
        else:
            found = [s["found_inf"] for s in self._per_optimizer.values() if s["found_inf"] is not None]
            if not found:
                raise FnxRuntimeError("GradScaler.update: no inf checks were recorded before update(); call "
                                      "scaler.step(optimizer) (or unscale_) first")
            if any(found):
                self._scale *= self._backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    grown = self._scale * self._growth_factor
                    if np.isfinite(np.float32(grown)):
                        self._scale = grown
                    self._growth_tracker = 0
        self._per_optimizer = {}

    # ---------------------------------------------------------------- settings and state
    def get_scale(self) -> float:
        """The current scale (1.0 when disabled)."""
        return self._scale if self._enabled else 1.0

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = int(new_interval)

    def is_enabled(self) -> bool:
        """Whether the scaler scales (False when made with enabled=False, or for CUDA without a GPU)."""
        return self._enabled

    def state_dict(self) -> dict:
        """The scale, factors, interval and growth tracker as PyTorch names them ({} when disabled)."""
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor, "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval, "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore what `state_dict` returned (a PyTorch GradScaler's state dict loads too)."""
        if not self._enabled:
            return
        if not state_dict:
            raise FnxRuntimeError("GradScaler.load_state_dict: the state dict is empty, possibly because it was "
                                  "saved from a disabled GradScaler")
        self._scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])
