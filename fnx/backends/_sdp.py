"""Which scaled-dot-product-attention backend runs: PyTorch's SDP switches (`torch.backends.cuda.enable_flash_sdp`,
`torch.nn.attention.sdpa_kernel`) and the checks that pick one backend for a call.

fnx has two SDPA paths: the fused one (one `attention` primitive running flash-attention loops, which stands in
for PyTorch's fused kernels) and the math one (the composition softmax(q k^T * scale + mask) v, PyTorch's MATH
backend). As in PyTorch on the CPU, FLASH_ATTENTION and MATH are available there; on CUDA fnx's fused path also
answers for EFFICIENT_ATTENTION and CUDNN_ATTENTION. The fused path takes what PyTorch's CPU flash kernel takes
(4-D inputs, one head size, matching batches, a 2-D or 4-D mask, no dropout); a mask is applied by the math
path's numbers even when a fused backend was chosen. Like PyTorch's, the switches are global to the process.
"""
from __future__ import annotations

import contextlib
import enum

from .._warn import warn
from ..errors import FnxRuntimeError

# torch.backends.cuda's names; torch.nn.attention's (SDPBackend, sdpa_kernel) and SDPA's choose_backend besides
__all__ = ["SDPAParams", "enable_flash_sdp", "flash_sdp_enabled", "enable_mem_efficient_sdp",
           "mem_efficient_sdp_enabled", "enable_math_sdp", "math_sdp_enabled", "enable_cudnn_sdp",
           "cudnn_sdp_enabled", "allow_fp16_bf16_reduction_math_sdp", "fp16_bf16_reduction_math_sdp_allowed",
           "is_flash_attention_available", "can_use_flash_attention", "can_use_efficient_attention",
           "can_use_cudnn_attention", "sdp_kernel"]


class SDPBackend(enum.IntEnum):
    """The backends of scaled_dot_product_attention that `sdpa_kernel` enables (PyTorch's values)."""

    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4

    def __str__(self) -> str:
        return f"SDPBackend.{self.name}"


_FUSED = (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION)
_AVAILABLE = {"cpu": {SDPBackend.MATH, SDPBackend.FLASH_ATTENTION},
              "cuda": {SDPBackend.MATH, *_FUSED}}
_enabled = {SDPBackend.MATH: True, SDPBackend.FLASH_ATTENTION: True, SDPBackend.EFFICIENT_ATTENTION: True,
            SDPBackend.CUDNN_ATTENTION: True, SDPBackend.OVERRIDEABLE: True}
_priority = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH,
             SDPBackend.CUDNN_ATTENTION, SDPBackend.OVERRIDEABLE]
_reduced_precision_math = [True]


def _set_enabled(backends: list[SDPBackend], set_priority: bool) -> None:
    """Enable exactly `backends`; with `set_priority`, they go first in the priority order, in their order."""
    for backend in _enabled:
        _enabled[backend] = backend in backends
    if set_priority:
        _priority[:] = list(backends) + [b for b in _priority if b not in backends]


@contextlib.contextmanager
def sdpa_kernel(backends: list[SDPBackend] | SDPBackend, set_priority: bool = False):
    """Let scaled_dot_product_attention use only `backends` (one or a list) inside the block; with
    `set_priority`, their order is the order in which they are tried. The switches are restored after it."""
    if not isinstance(backends, (list, SDPBackend)):
        raise AssertionError(f"Backend must be an instance of SDPBackend or a list of SDPBackend instances, got "
                             f"{type(backends).__name__}")
    backends = list(dict.fromkeys([backends] if isinstance(backends, SDPBackend) else backends))
    previous = [b for b in _priority if _enabled[b]]
    try:
        _set_enabled(backends, set_priority)
        yield {}
    finally:
        _set_enabled(previous, set_priority)


@contextlib.contextmanager
def sdp_kernel(enable_flash: bool = True, enable_math: bool = True, enable_mem_efficient: bool = True,
               enable_cudnn: bool = True):
    """PyTorch's older form of `sdpa_kernel`: only the backends switched on here are enabled inside the block."""
    warn("`torch.backends.cuda.sdp_kernel()` is deprecated. In the future, this context manager will be removed. "
         "Please see `torch.nn.attention.sdpa_kernel()` for the new context manager, with updated signature.",
         FutureWarning)
    named = ((enable_flash, SDPBackend.FLASH_ATTENTION), (enable_mem_efficient, SDPBackend.EFFICIENT_ATTENTION),
             (enable_math, SDPBackend.MATH), (enable_cudnn, SDPBackend.CUDNN_ATTENTION))
    with sdpa_kernel([backend for on, backend in named if on]) as context:
        yield context


def enable_flash_sdp(enabled: bool) -> None:
    """Enable or disable the FLASH_ATTENTION backend of scaled_dot_product_attention (fnx's fused path)."""
    _enabled[SDPBackend.FLASH_ATTENTION] = bool(enabled)


def flash_sdp_enabled() -> bool:
    """Whether the FLASH_ATTENTION backend is enabled."""
    return _enabled[SDPBackend.FLASH_ATTENTION]


def enable_mem_efficient_sdp(enabled: bool) -> None:
    """Enable or disable the EFFICIENT_ATTENTION backend (fnx's fused path, on CUDA)."""
    _enabled[SDPBackend.EFFICIENT_ATTENTION] = bool(enabled)


def mem_efficient_sdp_enabled() -> bool:
    """Whether the EFFICIENT_ATTENTION backend is enabled."""
    return _enabled[SDPBackend.EFFICIENT_ATTENTION]


def enable_math_sdp(enabled: bool) -> None:
    """Enable or disable the MATH backend (the composition softmax(q k^T * scale + mask) v)."""
    _enabled[SDPBackend.MATH] = bool(enabled)


def math_sdp_enabled() -> bool:
    """Whether the MATH backend is enabled."""
    return _enabled[SDPBackend.MATH]


def enable_cudnn_sdp(enabled: bool) -> None:
    """Enable or disable the CUDNN_ATTENTION backend (fnx's fused path, on CUDA)."""
    _enabled[SDPBackend.CUDNN_ATTENTION] = bool(enabled)


def cudnn_sdp_enabled() -> bool:
    """Whether the CUDNN_ATTENTION backend is enabled."""
    return _enabled[SDPBackend.CUDNN_ATTENTION]


def allow_fp16_bf16_reduction_math_sdp(enabled: bool) -> None:
    """PyTorch's permission for the MATH backend to reduce in float16/bfloat16 (recorded; fnx's math path
    computes in the inputs' dtype either way)."""
    _reduced_precision_math[0] = bool(enabled)


def fp16_bf16_reduction_math_sdp_allowed() -> bool:
    """The flag set by `allow_fp16_bf16_reduction_math_sdp` (True by default)."""
    return _reduced_precision_math[0]


def is_flash_attention_available() -> bool:
    """Whether this build has a FLASH_ATTENTION backend: always True in fnx (its fused path, on every device)."""
    return True


class SDPAParams:
    """The arguments of one scaled_dot_product_attention call, for the `can_use_*` checks (PyTorch's order:
    query, key, value, attn_mask, dropout, is_causal, enable_gqa)."""

    def __init__(self, query, key, value, attn_mask, dropout: float, is_causal: bool, enable_gqa: bool = False):
        self.query, self.key, self.value, self.attn_mask = query, key, value, attn_mask
        self.dropout, self.is_causal, self.enable_gqa = float(dropout), bool(is_causal), bool(enable_gqa)


def _fused_problems(params: SDPAParams) -> list[str]:
    """Why the fused path cannot run these arguments; [] if it can. It takes q, k, v of one floating dtype and
    rank with the same leading dims (no broadcasting; with enable_gqa, H query heads over H / g key/value heads),
    no dropout (as PyTorch's CPU kernel), and a mask each of whose dims is 1 or the scores' (PyTorch's 2-D and
    4-D masks; fnx applies a mask with the math path's numbers)."""
    q, k, v, mask = params.query, params.key, params.value, params.attn_mask
    if params.dropout > 0.0:
        return ["Both fused kernels do not support non-zero dropout."]
    shapes = f"Query.sizes(): {list(q.shape)}, Key.sizes(): {list(k.shape)}, Value.sizes(): {list(v.shape)}"
    if not (q.dtype.is_floating_point and q.dtype is k.dtype is v.dtype):
        return [f"The fused kernels need query, key and value of one floating dtype, got {q.dtype.name}, "
                f"{k.dtype.name} and {v.dtype.name}."]
    if not q.ndim == k.ndim == v.ndim or q.ndim < 2:
        return [f"The fused kernels need query, key and value of one rank, at least 2: {shapes}."]
    batch = tuple(q.shape[:-2])
    if params.enable_gqa and q.ndim > 2 and k.shape[-3] and q.shape[-3] % k.shape[-3] == 0:
        batch = batch[:-1] + (k.shape[-3],)
    if not batch == tuple(k.shape[:-2]) == tuple(v.shape[:-2]) or k.shape[-2] != v.shape[-2] \
            or q.shape[-1] != k.shape[-1]:
        return [f"For dense inputs, the fused kernels need query, key and value with the same batch size and "
                f"num_heads (query heads a multiple of the key/value heads with enable_gqa) and no broadcasting: "
                f"{shapes}. Broadcast them first (expand)."]
    scores = tuple(q.shape[:-1]) + (k.shape[-2],)
    if mask is not None and (mask.ndim > len(scores) or any(
            m not in (1, n) for m, n in zip(mask.shape, scores[len(scores) - mask.ndim:]))):
        return [f"The fused kernels need a mask each of whose dims is 1 or the scores' {list(scores)}, got "
                f"{list(mask.shape)}."]
    return []


def _can_use(backend: SDPBackend, params: SDPAParams, debug: bool) -> bool:
    """Whether `backend` is available on the query's device and the fused path takes `params`."""
    device = params.query.device.type
    problems = [] if backend in _AVAILABLE.get(device, ()) else [f"{backend} is not available on {device}"]
    problems = problems or _fused_problems(params)
    if debug:
        for problem in problems:
            warn(problem)
    return not problems


def can_use_flash_attention(params: SDPAParams, debug: bool = False) -> bool:
    """Whether scaled_dot_product_attention can run `params` with FLASH_ATTENTION (fnx's fused path, on every
    device); `debug` warns the reasons why not."""
    return _can_use(SDPBackend.FLASH_ATTENTION, params, debug)


def can_use_efficient_attention(params: SDPAParams, debug: bool = False) -> bool:
    """Whether scaled_dot_product_attention can run `params` with EFFICIENT_ATTENTION (fnx's fused path, on
    CUDA only, as in PyTorch); `debug` warns the reasons why not."""
    return _can_use(SDPBackend.EFFICIENT_ATTENTION, params, debug)


def can_use_cudnn_attention(params: SDPAParams, debug: bool = False) -> bool:
    """Whether scaled_dot_product_attention can run `params` with CUDNN_ATTENTION (fnx's fused path, on CUDA
    only); `debug` warns the reasons why not."""
    return _can_use(SDPBackend.CUDNN_ATTENTION, params, debug)


def choose_backend(params: SDPAParams) -> SDPBackend:
    """The first enabled backend, in priority order, that can run `params` (MATH takes everything); PyTorch's
    RuntimeErrors when none can."""
    device = params.query.device.type
    candidates = [b for b in _priority if _enabled[b] and b in _AVAILABLE.get(device, ())]
    if not candidates:
        raise FnxRuntimeError(f"No viable backend for scaled_dot_product_attention was found. This is likely due to "
                              f"turning off both the math kernel and the fused kernels. On {device} fnx has "
                              f"{sorted(str(b) for b in _AVAILABLE.get(device, ()))}: enable one of them "
                              f"(sdpa_kernel).")
    problems = _fused_problems(params)
    usable = [b for b in candidates if b is SDPBackend.MATH or not problems]
    if not usable:
        raise FnxRuntimeError(f"No available kernel.  Aborting execution. The enabled backends "
                              f"{[str(b) for b in candidates]} cannot run this call: {' '.join(problems)} Enable "
                              f"SDPBackend.MATH (sdpa_kernel([..., SDPBackend.MATH])) to run it.")
    return usable[0]
