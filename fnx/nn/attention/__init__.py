"""`torch.nn.attention`: which backend scaled_dot_product_attention uses (`sdpa_kernel`, `SDPBackend`), causal
biases (`bias`) and attention with user-defined score and mask functions (`flex_attention`).

fnx's backends are described in fnx/backends/_sdp.py: on the CPU, FLASH_ATTENTION (fnx's fused flash-attention
path) and MATH (the composition) are available, as in PyTorch; a block that enables only backends the device
lacks makes scaled_dot_product_attention raise "No viable backend", one whose backends cannot run the call
(dropout, broadcast batches) raises "No available kernel". PyTorch's registry of external flash-attention
kernels (FA3, FA4: CUDA libraries that register with PyTorch's dispatcher) lists none here.
"""
from __future__ import annotations

from ...backends._sdp import (SDPAParams, SDPBackend, can_use_efficient_attention, can_use_flash_attention,
                              sdpa_kernel)
from ...errors import FnxValueError
from . import bias, flex_attention

__all__ = ["SDPBackend", "sdpa_kernel", "WARN_FOR_UNFUSED_KERNELS", "SDPAParams", "can_use_flash_attention",
           "can_use_efficient_attention", "bias", "flex_attention", "register_flash_attention_impl",
           "activate_flash_attention_impl", "list_flash_attention_impls", "current_flash_attention_impl",
           "restore_flash_attention_impl"]

# PyTorch warns why its fused kernels were not used for a CausalBias when this is True; fnx's causal biases
# always run as a boolean mask, so there is nothing to warn about (the flag is kept for programs that set it)
WARN_FOR_UNFUSED_KERNELS = False


def list_flash_attention_impls() -> list[str]:
    """The external flash-attention kernels that can be activated: none in fnx (PyTorch lists FA3 and FA4, CUDA
    libraries; fnx's SDPA has its own fused path)."""
    return []


def current_flash_attention_impl() -> str | None:
    """The activated external flash-attention kernel: None, fnx's own fused path."""
    return None


def activate_flash_attention_impl(impl: str) -> None:
    """Activate an external flash-attention kernel: none is registered in fnx, so this raises PyTorch's error for
    an unknown one."""
    raise FnxValueError(f"Unknown flash attention impl '{impl}'. Available implementations: "
                        f"{list_flash_attention_impls()}")


def restore_flash_attention_impl(_raise_warn: bool = True) -> None:
    """Go back to the default flash-attention kernel: fnx always runs its own, so there is nothing to undo."""


def register_flash_attention_impl(impl: str, *, register_fn) -> None:
    """Register an external flash-attention kernel: such kernels install themselves in PyTorch's dispatcher,
    which fnx does not have."""
    raise NotImplementedError(f"register_flash_attention_impl({impl!r}): external flash-attention kernels register "
                              f"with PyTorch's dispatcher, which fnx lacks; fnx's scaled_dot_product_attention runs "
                              f"its own fused path (sdpa_kernel chooses it)")
