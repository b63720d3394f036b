"""Resizing of `fnx.nn.functional`: `interpolate` (and its deprecated aliases `upsample*`), as compositions.

'nearest' gathers, 'area' is adaptive average pooling. The other modes are separable: along each resized dim an
output element is a weighted sum of input elements, so the resize is one matrix product per dim by an
(in, out) weight matrix, built here in numpy from the sizes alone with PyTorch's rules:
- 'linear'/'bilinear'/'trilinear': two taps at the source index (clamped at 0 unless align_corners);
- 'bicubic': four taps of Keys' cubic convolution with A = -0.75, the source index unclamped and the taps'
  indices clamped to the input (edge replication);
- antialias=True ('bilinear', 'bicubic', 'lanczos'; PyTorch's `_upsample_*_aa`, Pillow's resampling): a filter
  (triangle, cubic with A = -0.5, Lanczos-3) centred on each output element, its support widened by the
  downscale factor when downsampling, the taps inside the input normalized to sum to one.
Gradients are the products by the transposed matrices, and transforms and compile see matmuls.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ..core import FnxRuntimeError, FnxTypeError, FnxValueError
from ..ops.creation import tensor
from ..ops.indexing import index_select
from ..ops.linalg import matmul
from ..ops.shape import movedim
from ..tensor import Tensor
from .functional_conv import _ntuple
from .functional_pool import _adaptive_avg
from .layout import keep_channels_last

__all__ = ["interpolate", "upsample", "upsample_nearest", "upsample_bilinear"]

_LINEAR = {"linear": 1, "bilinear": 2, "trilinear": 3}
_MODES = ("nearest", "linear", "bilinear", "bicubic", "trilinear", "lanczos", "area", "nearest-exact")
_ANTIALIAS_TAPS = {"bilinear": 2, "bicubic": 4, "lanczos": 6}   # the filter's width in input elements at scale 1


def _cubic_coefficients(t, a: float = -0.75) -> list:
    """Keys' cubic convolution weights of the four taps at offsets -1, 0, 1, 2 from floor(x), for t = x - floor(x)
    (numpy arrays or tensors; PyTorch's get_cubic_upsample_coefficients, A = -0.75 as in PyTorch)."""
    def near(s):       # |offset| <= 1
        return ((a + 2.0) * s - (a + 3.0)) * s * s + 1.0

    def far(s):        # 1 < |offset| < 2
        return ((a * s - 5.0 * a) * s + 8.0 * a) * s - 4.0 * a

    return [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]


def _antialias_filter(mode: str, x: np.ndarray) -> np.ndarray:
    """PyTorch's antialiasing filters at offsets x (in filter units): triangle, cubic (A = -0.5), Lanczos-3."""
    x = np.abs(x)
    if mode == "bilinear":
        return np.maximum(1.0 - x, 0.0)
    if mode == "bicubic":
        # Keys' kernel at |offset| x: the tap at offset 0 for t = x, the tap at offset -1 for t = x - 1
        near, far = _cubic_coefficients(x, -0.5)[1], _cubic_coefficients(x - 1.0, -0.5)[0]
        return np.where(x < 1.0, near, np.where(x < 2.0, far, 0.0))
    return np.where(x < 3.0, np.sinc(x) * np.sinc(x / 3.0), 0.0)


def _antialias_weights(n: int, m: int, scale: float, mode: str) -> np.ndarray:
    """(m, n) weights of PyTorch's _compute_weights_aa: the filter centred at scale * (i + 0.5), stretched by the
    scale when downsampling, over the input elements within its support (at most `widest`), normalized."""
    stretch = max(scale, 1.0)
    support = _ANTIALIAS_TAPS[mode] * 0.5 * stretch
    widest = math.ceil(support) * 2 + 1
    center = scale * (np.arange(m) + 0.5)
    lo = np.maximum((center - support + 0.5).astype(np.int64), 0)       # C's truncating casts, as PyTorch
    count = np.clip(np.minimum((center + support + 0.5).astype(np.int64), n) - lo, 0, widest)
    j = lo[:, None] + np.arange(widest)
    inside = np.arange(widest) < count[:, None]
    w = np.where(inside, _antialias_filter(mode, (j - center[:, None] + 0.5) / stretch), 0.0)
    total = w.sum(axis=1, keepdims=True)
    w = w / np.where(total != 0.0, total, 1.0)
    mat = np.zeros((m, n))
    rows = np.broadcast_to(np.arange(m)[:, None], j.shape)
    mat[rows[inside], j[inside]] = w[inside]
    return mat


@functools.lru_cache(maxsize=256)
def _weights(n: int, m: int, scale: float, mode: str, align_corners: bool, antialias: bool) -> np.ndarray:
    """(m, n) weights resizing a dim of n elements to m along which the source step is `scale` (cached: a model
    resizes the same sizes every step; read only)."""
    if antialias:
        return _antialias_weights(n, m, scale, mode)
    src = np.arange(m, dtype=np.float64) * scale
    if not align_corners:
        src = src + (0.5 * scale - 0.5)
        if mode != "bicubic":
            src = np.maximum(src, 0.0)
    low = np.minimum(np.floor(src).astype(np.int64), n - 1)
    t = np.clip(src - low, 0.0, 1.0)
    if mode == "bicubic":
        taps = [(low + k - 1, w) for k, w in enumerate(_cubic_coefficients(t))]
    else:
        taps = [(low, 1.0 - t), (low + 1, t)]
    mat = np.zeros((m, n))
    for index, w in taps:
        np.add.at(mat, (np.arange(m), np.clip(index, 0, n - 1)), w)
    return mat


def _check(input: Tensor, mode: str, align_corners, antialias: bool) -> int:
    """PyTorch's argument checks of interpolate, in its order; the number of spatial dims."""
    if not isinstance(input, Tensor):
        raise FnxTypeError(f"interpolate: expected input to be a Tensor, got {type(input).__name__}")
    nd = input.ndim - 2
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise FnxValueError("align_corners option can only be set with the interpolating modes: linear | "
                                "bilinear | bicubic | trilinear")
    if antialias and not (mode in _ANTIALIAS_TAPS and input.ndim == 4):
        raise FnxValueError("Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and requires a "
                            "4-D tensor as input")
    if mode in _LINEAR and nd in (1, 2, 3) and _LINEAR[mode] != nd:
        raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs {_LINEAR[mode] + 2}D input")
    if mode not in _MODES or nd not in (1, 2, 3) or (mode in ("bicubic", "lanczos") and nd != 2):
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.ndim}D) for "
                                  f"the modes: {' | '.join(_MODES)} (got {mode})")
    if mode == "lanczos" and align_corners:
        raise FnxValueError("Lanczos mode does not support align_corners=True")
    if mode == "lanczos" and not antialias:
        raise FnxValueError("Lanczos mode requires antialias=True")
    if mode not in ("nearest", "nearest-exact", "area") and not input.dtype.is_floating_point:
        raise NotImplementedError(f"interpolate: mode {mode!r} on {input.dtype.name} input is not implemented in "
                                  f"fnx; convert the input to a floating dtype first")
    return nd


def _sizes_and_scales(spatial: tuple, size, scale_factor, recompute_scale_factor, nd: int) -> tuple[tuple, list]:
    """The output size and, per dim, the scale PyTorch's kernels get: 1 / scale_factor where given and not
    recomputed, else None (input size / output size)."""
    if (size is None) == (scale_factor is None):
        raise FnxValueError("only one of size or scale_factor should be defined" if size is not None
                            else "either size or scale_factor should be defined")
    if size is not None:
        if isinstance(size, (tuple, list)) and len(size) != nd:
            raise FnxValueError(f"Input and output must have the same number of spatial dimensions, but got input "
                                f"with spatial dimensions of {list(spatial)} and output size of {size}.")
        if recompute_scale_factor:
            raise FnxValueError("recompute_scale_factor is not meaningful with an explicit size.")
        return _ntuple(size, nd, "size"), [None] * nd
    factors = scale_factor if isinstance(scale_factor, (tuple, list)) else (scale_factor,) * nd
    if len(factors) != nd:
        raise FnxValueError(f"Input and scale_factor must have the same number of spatial dimensions, but got input "
                            f"with spatial dimensions of {list(spatial)} and scale_factor of shape {scale_factor}.")
    out = tuple(int(math.floor(n * f)) for n, f in zip(spatial, factors))
    return out, [None if recompute_scale_factor else 1.0 / f for f in factors]


@keep_channels_last(4, 5)
def interpolate(input: Tensor, size=None, scale_factor=None, mode: str = "nearest", align_corners: bool | None = None,
                recompute_scale_factor: bool | None = None, antialias: bool = False) -> Tensor:
    """Resize the spatial dims of (N, C, *spatial) to `size` or by `scale_factor`: 'nearest', 'nearest-exact',
    'linear'/'bilinear'/'trilinear', 'bicubic' (4-D), 'area' (adaptive average pooling), with antialias=True
    (4-D) PyTorch's antialiased 'bilinear'/'bicubic'/'lanczos' (the latter needs it) - as PyTorch."""
    nd = _check(input, mode, align_corners, antialias)
    spatial = tuple(input.shape[2:])
    out, scales = _sizes_and_scales(spatial, size, scale_factor, recompute_scale_factor, nd)
    if min(spatial) <= 0 or min(out) <= 0:
        names = ("D", "H", "W")[3 - nd:]
        shown = [", ".join(f"{k}: {v}" for k, v in zip(names, sizes)) for sizes in (spatial, out)]
        joint = " and" if nd == 1 else ""     # PyTorch's wording differs by rank
        raise FnxRuntimeError(f"Input and output sizes should be greater than 0, but got input ({shown[0]}){joint} "
                              f"output ({shown[1]})")
    if mode == "area":
        return _adaptive_avg(input, out, nd, "interpolate")
    x = input
    for i, (n, m, scale) in enumerate(zip(spatial, out, scales)):
        if mode in ("nearest", "nearest-exact"):
            shift = 0.5 if mode == "nearest-exact" else 0.0
            step = n / m if scale is None else scale
            src = np.minimum(np.floor((np.arange(m) + shift) * step), n - 1).astype(np.int64)
            x = index_select(x, 2 + i, tensor(src, device=x.device))
            continue
        if align_corners:
            scale = (n - 1) / (m - 1) if m > 1 else 0.0
        mat = _weights(n, m, n / m if scale is None else scale, mode, bool(align_corners), antialias)
        weights = tensor(mat.T, dtype=x.dtype, device=x.device)
        x = movedim(matmul(movedim(x, 2 + i, -1), weights), -1, 2 + i)
    return x


def upsample(input: Tensor, size=None, scale_factor=None, mode: str = "nearest", align_corners=None) -> Tensor:
    """Deprecated alias of `interpolate` (PyTorch's `upsample`)."""
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """`interpolate` with mode="nearest" (deprecated in PyTorch)."""
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """`interpolate` with mode="bilinear" and align_corners=True (deprecated in PyTorch)."""
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)
