"""`torch.nn.attention`: which backend scaled_dot_product_attention uses (`sdpa_kernel`, `SDPBackend`), causal
biases (`bias`) and attention with user-defined score and mask functions (`flex_attention`).

fnx's backends are described in fnx/backends/_sdp.py: on the CPU, FLASH_ATTENTION (fnx's fused flash-attention
path) and MATH (the composition) are available, as in PyTorch; a block that enables only backends the device
lacks makes scaled_dot_product_attention raise "No viable backend", one whose backends cannot run the call
(dropout, 3-D inputs, ... for the fused path) raises "No available kernel". PyTorch's registry of external flash
attention kernels (FA3, FA4: CUDA libraries) has no counterpart.
"""
from __future__ import annotations

from ...backends._sdp import (SDPAParams, SDPBackend, can_use_efficient_attention, can_use_flash_attention,
                              sdpa_kernel)
from . import bias, flex_attention

__all__ = ["SDPBackend", "sdpa_kernel", "WARN_FOR_UNFUSED_KERNELS", "SDPAParams", "can_use_flash_attention",
           "can_use_efficient_attention", "bias", "flex_attention"]

# PyTorch warns why its fused kernels were not used for a CausalBias when this is True; fnx's causal biases
# always run as a boolean mask, so there is nothing to warn about (the flag is kept for programs that set it)
WARN_FOR_UNFUSED_KERNELS = False
