"""Op table: F.grid_sample and F.affine_grid, against loop references written here from PyTorch's definitions."""
import itertools
import math

import numpy as np
from hypothesis import strategies as st

import fnx
from op_db import OpInfo, Sample

F = fnx.nn.functional


def _unnormalize(g, size, align):
    return (g + 1) / 2 * (size - 1) if align else ((g + 1) * size - 1) / 2


def _reflect(x, low2, high2):
    if low2 == high2:
        return 0.0
    low, span = low2 / 2, (high2 - low2) / 2
    x = abs(x - low)
    flips, extra = math.floor(x / span), math.fmod(x, span)
    return extra + low if flips % 2 == 0 else span - extra + low


def _source(g, size, padding, align):
    x = _unnormalize(g, size, align)
    if padding == "reflection":
        x = _reflect(x, 0, 2 * (size - 1)) if align else _reflect(x, -1, 2 * size - 1)
    if padding != "zeros":
        x = min(max(x, 0.0), size - 1.0)
    return x


def grid_sample_ref(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False):
    """One output point at a time: each neighbour's weight, and zero outside the input."""
    n, c, *sizes = x.shape
    d = len(sizes)
    out = np.zeros((n, c) + grid.shape[1:-1])
    for b in range(n):
        for point in np.ndindex(*grid.shape[1:-1]):
            coords = [_source(grid[(b, *point, d - 1 - axis)], sizes[axis], padding_mode, align_corners)
                      for axis in range(d)]
            if mode == "nearest":
                options = [[(float(np.round(p)), 1.0)] for p in coords]
            else:
                options = [[(math.floor(p), 1 - (p - math.floor(p))), (math.floor(p) + 1, p - math.floor(p))]
                           for p in coords]
            for corner in itertools.product(*options):
                index = tuple(int(i) for i, _ in corner)
                if all(0 <= i < s for i, s in zip(index, sizes)):
                    out[(b, slice(None), *point)] += math.prod(w for _, w in corner) * x[(b, slice(None), *index)]
    return out


def _to_grid(coord, size, align):
    """The grid value that unnormalizes to input coordinate `coord`."""
    if align:
        return coord / (size - 1) * 2 - 1 if size > 1 else coord
    return (2 * coord + 1) / size - 1


@st.composite
def grid_sample_sample(draw, dims=2):
    """Input coordinates k + u with u in [0.15, 0.35] or [0.65, 0.85]: away from the integers and half-integers
    where interpolation, rounding, clamping and reflection have kinks, so finite differences are meaningful."""
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    sizes = [draw(st.integers(1, 4 if dims == 2 else 3)) for _ in range(dims)]
    out_sizes = [draw(st.integers(1, 3)) for _ in range(dims)]
    kwargs = {"mode": draw(st.sampled_from(["bilinear", "nearest"])),
              "padding_mode": draw(st.sampled_from(["zeros", "border", "reflection"])),
              "align_corners": draw(st.booleans())}
    grid = np.empty([n] + out_sizes + [dims])
    for axis in range(dims):   # grid[..., 0] indexes the last input dim
        size = sizes[dims - 1 - axis]
        k = rng.integers(-2, size + 2, [n] + out_sizes)
        u = rng.uniform(0.15, 0.35, k.shape) + 0.5 * rng.integers(0, 2, k.shape)
        grid[..., axis] = _to_grid(k + u, size, kwargs["align_corners"])
    return Sample((rng.standard_normal([n, c] + sizes), grid), kwargs)


def affine_grid_ref(theta, size, align_corners=False):
    spatial = size[2:]

    def base(steps):
        if steps <= 1:
            return np.zeros(steps)
        i = np.arange(steps)
        return i * 2 / (steps - 1) - 1 if align_corners else (2 * i + 1) / steps - 1

    axes = list(np.meshgrid(*[base(s) for s in spatial], indexing="ij"))   # (D,) H, W order
    points = np.stack(axes[::-1] + [np.ones(spatial)], -1)           # x, y[, z], 1
    return np.einsum("...k,njk->n...j", points, theta)


@st.composite
def affine_grid_sample(draw, dims=2):
    n = draw(st.integers(1, 2))
    size = (n, 1) + tuple(draw(st.integers(1, 4)) for _ in range(dims))
    theta = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1))).standard_normal((n, dims, dims + 1))
    return Sample((theta, size), {"align_corners": draw(st.booleans())})


OPS = [
    OpInfo("grid_sample", F.grid_sample, grid_sample_ref, grid_sample_sample(), rtol=1e-4, atol=1e-5),
    OpInfo("grid_sample_3d", F.grid_sample, grid_sample_ref, grid_sample_sample(dims=3), rtol=1e-4, atol=1e-5),
    OpInfo("affine_grid", F.affine_grid, affine_grid_ref, affine_grid_sample()),
    OpInfo("affine_grid_3d", F.affine_grid, affine_grid_ref, affine_grid_sample(dims=3)),
]
