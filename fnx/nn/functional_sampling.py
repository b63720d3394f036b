"""Spatial sampling of `fnx.nn.functional`: `grid_sample` and `affine_grid` (2-D and 3-D), as compositions.

`grid_sample` maps each grid point to input coordinates (PyTorch's unnormalization, padding by border or
reflection), then reads the channels of the 2^d neighbouring input elements of each point and weighs them
(bilinear / trilinear), reads the nearest one, or (2-D) reads the 4 x 4 neighbours around the unpadded
coordinates, each neighbour's position padded, and weighs them by Keys' cubic convolution (bicubic, A = -0.75).
Row gathers and elementwise ops give the gradients with respect to both the input and the grid (zero with
respect to the grid for 'nearest', as in PyTorch), batching and compilation.
"""
from __future__ import annotations

import math

from ..ops.autocast import autocast_op
from ..core import FnxRuntimeError, FnxTypeError
from ..ops import elementwise as ew
from ..ops.creation import arange, ones, tensor, zeros
from ..ops.indexing import take_rows
from ..ops.joins import cat, stack
from ..ops.linalg import matmul
from ..tensor import Tensor
from .functional_resize import _cubic_coefficients

__all__ = ["grid_sample", "affine_grid"]

_MODES = ("bilinear", "nearest", "bicubic")
_PADDINGS = ("zeros", "border", "reflection")


def _unnormalize(g: Tensor, size: int, align_corners: bool) -> Tensor:
    """Grid values in [-1, 1] as input coordinates: -1 and 1 are the centres of the corner elements
    (align_corners) or their outer edges."""
    if align_corners:
        return (g + 1.0) * (0.5 * (size - 1))
    return ((g + 1.0) * size - 1.0) * 0.5


def _reflect(x: Tensor, twice_low: int, twice_high: int) -> Tensor:
    """x reflected back and forth into [twice_low / 2, twice_high / 2] (PyTorch's reflect_coordinates)."""
    if twice_low == twice_high:
        return x * 0.0
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    x = ew.abs(x - low)
    extra = ew.fmod(x, span)
    flips = ew.floor(x / span)
    return ew.where(ew.eq(ew.fmod(flips, 2.0), 0.0), extra + low, span - extra + low)


def _padded(x: Tensor, size: int, padding_mode: str, align_corners: bool) -> Tensor:
    """Input coordinates x along a dim of `size` moved inside by the padding (PyTorch's compute_coordinates)."""
    if padding_mode == "reflection":
        x = _reflect(x, 0, 2 * (size - 1)) if align_corners else _reflect(x, -1, 2 * size - 1)
    if padding_mode != "zeros":
        x = ew.clamp(x, 0.0, float(size - 1))
    return x


def _source(g: Tensor, size: int, align_corners: bool) -> Tensor:
    """Input coordinates of the grid values `g` along a dim of `size`; a NaN or infinite grid value is read as
    -2 (outside; border padding reads the first element, as PyTorch) instead of indexing with NaN."""
    return _unnormalize(ew.where(ew.isfinite(g), g, -2.0), size, align_corners)


def _bicubic_taps(g: Tensor, size: int, padding_mode: str, align_corners: bool) -> list:
    """(position, weight) of the four taps along a dim: around the unpadded coordinates, each tap's position
    padded (PyTorch's bicubic grid sampler); a NaN or infinite grid value gives NaN weights, as in PyTorch."""
    x = _source(g, size, align_corners)
    low = ew.floor(x)
    weights = _cubic_coefficients(_unnormalize(g, size, align_corners) - low)
    return [(_padded(low + float(k - 1), size, padding_mode, align_corners), w) for k, w in enumerate(weights)]


def _check_sample(input: Tensor, grid: Tensor, mode: str, padding_mode: str) -> int:
    if mode not in _MODES:
        raise FnxRuntimeError(f"grid_sample: nn.functional.grid_sample(): expected mode to be 'bilinear', "
                              f"'nearest' or 'bicubic', but got: '{mode}'")
    if padding_mode not in _PADDINGS:
        raise FnxRuntimeError(f"grid_sample: nn.functional.grid_sample(): expected padding_mode to be 'zeros', "
                              f"'border', or 'reflection', but got: '{padding_mode}'")
    if not isinstance(input, Tensor) or not isinstance(grid, Tensor):
        raise FnxTypeError("grid_sample: input and grid must be Tensors")
    if input.ndim not in (4, 5) or grid.ndim != input.ndim:
        raise FnxRuntimeError(f"grid_sample: expected 4-D or 5-D input and a grid of the same number of dims, got "
                              f"input of shape {list(input.shape)} and grid of shape {list(grid.shape)}")
    d = input.ndim - 2
    if mode == "bicubic" and d != 2:
        raise FnxRuntimeError(f"grid_sample: bicubic interpolation only supports 4D input, got input of shape "
                              f"{list(input.shape)}")
    if grid.shape[0] != input.shape[0] or grid.shape[-1] != d:
        raise FnxRuntimeError(f"grid_sample: expected grid of shape [N, {', '.join('*' * d)}, {d}] with N = "
                              f"{input.shape[0]} (the input's batch), got {list(grid.shape)}")
    if input.dtype is not grid.dtype or not input.dtype.is_floating_point:
        raise FnxRuntimeError(f"grid_sample: expected input and grid of one floating dtype, got "
                              f"{input.dtype.name} and {grid.dtype.name}")
    return d


@autocast_op("grid_sample")
def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear", padding_mode: str = "zeros",
                align_corners: bool | None = None) -> Tensor:
    """Sample `input` (N, C, H, W) or (N, C, D, H, W) at the grid's points (N, H', W', 2) or (N, D', H', W', 3),
    whose last dim holds (x, y[, z]) in [-1, 1]: bilinear (trilinear) interpolation, the nearest element or (4-D)
    bicubic interpolation; points outside read zeros, the border, or the input reflected at its edges.
    align_corners defaults to False."""
    d = _check_sample(input, grid, mode, padding_mode)
    align = bool(align_corners)
    n, c = input.shape[0], input.shape[1]
    in_sizes = tuple(input.shape[2:])             # (D,) H, W
    out_sizes = tuple(grid.shape[1:-1])
    points = math.prod(out_sizes)
    flat_grid = grid.reshape(n, points, d)
    axes = [(flat_grid[..., d - 1 - axis], in_sizes[axis]) for axis in range(d)]   # grid[..., 0] indexes W
    if mode == "bicubic":
        taps = [_bicubic_taps(g, size, padding_mode, align) for g, size in axes]
    else:
        taps = []
        for g, size in axes:
            x = _padded(_source(g, size, align), size, padding_mode, align)
            if mode == "nearest":
                taps.append([(ew.round(x), None)])
                continue
            low = ew.floor(x)
            # zero padding weighs by the grid's own coordinates: a non-finite one gives NaN, as in PyTorch
            frac = (_unnormalize(g, size, align) if padding_mode == "zeros" else x) - low
            taps.append([(low, 1.0 - frac), (low + 1.0, frac)])
    # the input as rows of channels (N * D * H * W, C) and a row of zeros that taps outside the input read; all
    # taps of all points in one row gather, whose gradient adds the rows back (take_rows' index_add): a gather
    # along the flat positions and a select per tap would index, scatter and mask every channel of every point
    # (about 5x slower forward and backward)
    positions = math.prod(in_sizes)
    rows = cat([input.reshape(n, c, positions).mT.reshape(n * positions, c), zeros(1, c, dtype=input.dtype,
                                                                                   device=input.device)])
    index = arange(n, device=input.device).reshape((n,) + (1,) * (d + 1)) * positions
    inside, weight = None, None
    for axis, size in enumerate(in_sizes):   # the taps of each axis along a dim of their own: (N, *taps, points)
        shape = (n,) + tuple(len(taps[axis]) if a == axis else 1 for a in range(d)) + (points,)
        position = stack([p for p, _ in taps[axis]], 1).reshape(shape)
        index = index + ew.clamp(position, 0.0, float(size - 1)).long() * math.prod(in_sizes[axis + 1:])
        ok = (position >= 0.0) & (position <= float(size - 1))
        inside = ok if inside is None else inside & ok
        if mode != "nearest":
            w = stack([w for _, w in taps[axis]], 1).reshape(shape)
            weight = w if weight is None else weight * w
    count = math.prod(len(t) for t in taps)
    values = take_rows(rows, ew.where(inside, index, n * positions).reshape(n, count * points))
    values = values.reshape(n, count, points, c)
    out = values[:, 0] if weight is None else (values * weight.reshape(n, count, points, 1)).sum(1)
    return out.mT.reshape(n, c, *out_sizes)


def _base_coordinates(steps: int, align_corners: bool, like: Tensor) -> Tensor:
    """The grid coordinates of `steps` elements along one dim in [-1, 1] (0 for a single element, as PyTorch)."""
    if steps <= 1:
        return tensor([0.0] * steps, dtype=like.dtype, device=like.device)
    i = arange(steps, dtype=like.dtype, device=like.device)
    if align_corners:
        return i * (2.0 / (steps - 1)) - 1.0
    return (i * 2.0 + 1.0) / steps - 1.0


def affine_grid(theta: Tensor, size, align_corners: bool | None = None) -> Tensor:
    """The sampling grid (N, H, W, 2) or (N, D, H, W, 3) of the affine maps `theta` (N, 2, 3) or (N, 3, 4) for an
    output of `size` (N, C, H, W) or (N, C, D, H, W), for `grid_sample`. align_corners defaults to False."""
    size = tuple(int(s) for s in size)
    if len(size) not in (4, 5):
        raise NotImplementedError(f"affine_grid: only 2-D and 3-D sizes (N, C, H, W) or (N, C, D, H, W) are "
                                  f"supported, got size {list(size)}")
    d = len(size) - 2
    if not isinstance(theta, Tensor) or not theta.dtype.is_floating_point:
        raise FnxTypeError(f"affine_grid: expected theta to be a floating point Tensor, got "
                           f"{getattr(theta, 'dtype', type(theta).__name__)}")
    if tuple(theta.shape) != (size[0], d, d + 1):
        raise FnxRuntimeError(f"affine_grid: Expected a batch of {d}D affine matrices of shape Nx{d}x{d + 1} for "
                              f"size {list(size)}. Got {list(theta.shape)}.")
    spatial = size[2:]                                          # (D,) H, W
    axes = [_base_coordinates(s, bool(align_corners), theta) for s in reversed(spatial)]   # x, y[, z]
    columns = []
    for k, values in enumerate(axes):
        shape = [1] * d
        shape[d - 1 - k] = spatial[d - 1 - k]
        columns.append(values.reshape(shape).expand(*spatial))
    columns.append(ones(spatial, dtype=theta.dtype, device=theta.device))
    base = stack(columns, -1).reshape(1, math.prod(spatial), d + 1)
    return matmul(base, theta.mT).reshape(size[0], *spatial, d)
