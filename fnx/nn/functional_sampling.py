"""Spatial sampling of `fnx.nn.functional`: `grid_sample` and `affine_grid` (2-D and 3-D), as compositions.

`grid_sample` maps each grid point to input coordinates (PyTorch's unnormalization, padding by border or
reflection), then gathers the 2^d neighbouring input elements of each point and weighs them (bilinear /
trilinear) or gathers the nearest one. Gathers and elementwise ops give the gradients with respect to both the
input and the grid (zero with respect to the grid for 'nearest', as in PyTorch), batching and compilation.
"""
from __future__ import annotations

import itertools
import math

from ..ops.autocast import autocast_op
from ..core import FnxRuntimeError, FnxTypeError
from ..ops import elementwise as ew
from ..ops.creation import arange, ones, tensor
from ..ops.indexing import gather
from ..ops.joins import stack
from ..ops.linalg import matmul
from ..tensor import Tensor

__all__ = ["grid_sample", "affine_grid"]

_MODES = ("bilinear", "nearest")
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


def _source(g: Tensor, size: int, padding_mode: str, align_corners: bool) -> Tensor:
    """Input coordinates of the grid values `g` along a dim of `size`; a NaN grid value reads outside (zero
    padding) or the first element, instead of indexing with NaN."""
    x = _unnormalize(ew.where(g != g, -2.0, g), size, align_corners)
    if padding_mode == "reflection":
        x = _reflect(x, 0, 2 * (size - 1)) if align_corners else _reflect(x, -1, 2 * size - 1)
    if padding_mode != "zeros":
        x = ew.clamp(x, 0.0, float(size - 1))
    return x


def _check_sample(input: Tensor, grid: Tensor, mode: str, padding_mode: str) -> int:
    if mode == "bicubic":
        raise NotImplementedError("grid_sample: mode='bicubic' is not implemented in fnx; use 'bilinear' or "
                                  "'nearest'")
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
    whose last dim holds (x, y[, z]) in [-1, 1]: bilinear (trilinear) interpolation or the nearest element;
    points outside read zeros, the border, or the input reflected at its edges. align_corners defaults to False."""
    d = _check_sample(input, grid, mode, padding_mode)
    align = bool(align_corners)
    n, c = input.shape[0], input.shape[1]
    in_sizes = tuple(input.shape[2:])             # (D,) H, W
    out_sizes = tuple(grid.shape[1:-1])
    points = math.prod(out_sizes)
    flat_grid = grid.reshape(n, 1, points, d)
    coords = [_source(flat_grid[..., d - 1 - axis], in_sizes[axis], padding_mode, align) for axis in range(d)]
    strides = [math.prod(in_sizes[axis + 1:]) for axis in range(d)]
    source = input.reshape(n, c, math.prod(in_sizes))
    if mode == "nearest":
        corners = [[(ew.round(x), None)] for x in coords]
    else:
        corners = []
        for x in coords:
            low = ew.floor(x)
            frac = x - low
            corners.append([(low, 1.0 - frac), (low + 1.0, frac)])
    out = None
    for choice in itertools.product(*corners):
        index, weight, inside = None, None, None
        for axis, (position, w) in enumerate(choice):
            size = in_sizes[axis]
            ok = (position >= 0.0) & (position <= float(size - 1))
            clamped = ew.clamp(position, 0.0, float(size - 1)).long() * strides[axis]
            index = clamped if index is None else index + clamped
            inside = ok if inside is None else inside & ok
            if w is not None:
                weight = w if weight is None else weight * w
        values = gather(source, 2, index.expand(n, c, points))
        term = ew.where(inside, values if weight is None else values * weight, 0.0)
        out = term if out is None else out + term
    return out.reshape(n, c, *out_sizes)


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
