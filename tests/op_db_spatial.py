"""Op table: F.grid_sample, F.affine_grid and F.interpolate's bicubic and antialiased modes, against loop references
written here from PyTorch's definitions."""
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


def _padded(x, size, padding, align):
    if padding == "reflection":
        x = _reflect(x, 0, 2 * (size - 1)) if align else _reflect(x, -1, 2 * size - 1)
    if padding != "zeros":
        x = min(max(x, 0.0), size - 1.0)
    return x


def _source(g, size, padding, align):
    return _padded(_unnormalize(g, size, align), size, padding, align)


def _keys(s, a=-0.75):
    """Keys' cubic convolution kernel at offset s."""
    s = abs(s)
    if s <= 1:
        return ((a + 2) * s - (a + 3)) * s * s + 1
    return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a if s < 2 else 0.0


def _pad_tap(i, size, padding, align):
    """An integer tap position moved inside by the padding (None: outside, reads zero)."""
    if padding == "zeros":
        return i if 0 <= i < size else None
    return int(round(_padded(i, size, padding, align)))


def grid_sample_ref(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False):
    """One output point at a time: each neighbour's weight, and zero outside the input; bicubic: the 4 x 4 taps
    around the unpadded coordinates, each tap's position padded."""
    n, c, *sizes = x.shape
    d = len(sizes)
    out = np.zeros((n, c) + grid.shape[1:-1])
    for b in range(n):
        for point in np.ndindex(*grid.shape[1:-1]):
            g = [grid[(b, *point, d - 1 - axis)] for axis in range(d)]
            if mode == "bicubic":
                for ty, tx in itertools.product(range(-1, 3), repeat=2):
                    (y, h), (xx, w) = [(_unnormalize(v, size, align_corners), size) for v, size in zip(g, sizes)]
                    iy, ix = math.floor(y) + ty, math.floor(xx) + tx
                    py, px = _pad_tap(iy, h, padding_mode, align_corners), _pad_tap(ix, w, padding_mode, align_corners)
                    if py is not None and px is not None:
                        out[b, :, point[0], point[1]] += _keys(y - iy) * _keys(xx - ix) * x[b, :, py, px]
                continue
            coords = [_source(v, sizes[axis], padding_mode, align_corners) for axis, v in enumerate(g)]
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
    kwargs = {"mode": draw(st.sampled_from(["bilinear", "nearest"] + ["bicubic"] * (dims == 2))),
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


def _resize_weights(n, m, scale, mode, align, antialias):
    """(m, n): each output element's weight on each input element, one output element at a time."""
    mat = np.zeros((m, n))
    for i in range(m):
        if antialias:     # the filter, stretched when downsampling, over the inputs within its support, normalized
            stretch = max(scale, 1.0)
            support = {"bilinear": 1.0, "bicubic": 2.0, "lanczos": 3.0}[mode] * stretch
            center = scale * (i + 0.5)
            for j in range(max(int(center - support + 0.5), 0), min(int(center + support + 0.5), n)):
                s = (j + 0.5 - center) / stretch
                mat[i, j] = {"bilinear": max(1 - abs(s), 0.0), "bicubic": _keys(s, -0.5),
                             "lanczos": np.sinc(s) * np.sinc(s / 3) if abs(s) < 3 else 0.0}[mode]
            if mat[i].sum() != 0:
                mat[i] /= mat[i].sum()
            continue
        src = i * scale if align else (i + 0.5) * scale - 0.5
        if mode == "bilinear":
            src = max(src, 0.0)
        low = min(math.floor(src), n - 1)
        taps = range(-1, 3) if mode == "bicubic" else range(2)
        for k in taps:
            t = src - (low + k)
            w = _keys(t) if mode == "bicubic" else max(1 - abs(t), 0.0)
            mat[i, min(max(low + k, 0), n - 1)] += w
    return mat


def interpolate_ref(x, size=None, scale_factor=None, mode="bicubic", align_corners=False,
                    recompute_scale_factor=None, antialias=False):
    for axis in (2, 3):
        n = x.shape[axis]
        m = size[axis - 2] if size else math.floor(n * scale_factor)
        if align_corners:
            scale = (n - 1) / (m - 1) if m > 1 else 0.0
        else:
            scale = 1 / scale_factor if scale_factor and not recompute_scale_factor else n / m
        x = np.moveaxis(np.moveaxis(x, axis, -1) @ _resize_weights(n, m, scale, mode, align_corners, antialias).T,
                        -1, axis)
    return x


@st.composite
def interpolate_sample(draw, antialias=False):
    """Bicubic (antialias=False) or antialiased bilinear/bicubic/lanczos resizes of small (N, C, H, W) inputs, to
    a size or by a scale factor (recomputed or not), up and down."""
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    shape = [draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 6)), draw(st.integers(1, 6))]
    mode = draw(st.sampled_from(["bilinear", "bicubic", "lanczos"])) if antialias else "bicubic"
    kwargs = {"mode": mode, "align_corners": mode != "lanczos" and draw(st.booleans()), "antialias": antialias}
    if draw(st.booleans()):
        kwargs["size"] = (draw(st.integers(1, 7)), draw(st.integers(1, 7)))
    else:
        factor = draw(st.sampled_from([0.5, 0.7, 1.5, 2.0, 2.6]))
        kwargs["scale_factor"] = factor if shape[2] * factor >= 1 and shape[3] * factor >= 1 else 2.0
        kwargs["recompute_scale_factor"] = draw(st.booleans())
    return Sample((rng.standard_normal(shape),), kwargs)


OPS = [
    # the taps' weighted values are summed as one reduction: compiled float32 may add them in another order
    OpInfo("grid_sample", F.grid_sample, grid_sample_ref, grid_sample_sample(), rtol=1e-4, atol=1e-5,
           extra={"numerics": "reductions"}),
    OpInfo("grid_sample_3d", F.grid_sample, grid_sample_ref, grid_sample_sample(dims=3), rtol=1e-4, atol=1e-5,
           extra={"numerics": "reductions"}),
    # one matrix product per resized dim: compiled float32 products may add in another order
    # four taps or more a row: a product the passes rewrite (transposes folded in) may round differently
    OpInfo("interpolate_bicubic", F.interpolate, interpolate_ref, interpolate_sample(),
           extra={"numerics": "reductions", "own_eager_form": True}),
    OpInfo("interpolate_antialias", F.interpolate, interpolate_ref, interpolate_sample(antialias=True),
           extra={"numerics": "reductions", "own_eager_form": True}),
    OpInfo("affine_grid", F.affine_grid, affine_grid_ref, affine_grid_sample()),
    OpInfo("affine_grid_3d", F.affine_grid, affine_grid_ref, affine_grid_sample(dims=3)),
]
