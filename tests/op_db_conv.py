"""Op table: convolutions, unfold/fold and pooling (fnx.nn.functional), on small inputs drawn by hypothesis.

The references are written out loop by loop in float64 numpy (test_nn_functional uses them too). Max pooling
draws distinct, well-separated values so that finite differences never cross a change of the maximum.
"""
import itertools
import math

import numpy as np
from hypothesis import strategies as st

import fnx
import fnx.nn.functional as F
from op_db import OpInfo, Sample, floats


# ---------------------------------------------------------------- numpy references
def ref_conv2d(x, w, b, stride, padding, dilation, groups):
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for b_, oc, i, j in itertools.product(range(n), range(o), range(oh), range(ow)):
        g = oc // og
        patch = xp[b_, g * cg:(g + 1) * cg, i * sh:i * sh + dh * (kh - 1) + 1:dh, j * sw:j * sw + dw * (kw - 1) + 1:dw]
        out[b_, oc, i, j] = (patch * w[oc]).sum() + (b[oc] if b is not None else 0.0)
    return out


def ref_conv_transpose2d(x, w, stride, padding, output_padding, groups, dilation):
    """Scatter form: every input pixel adds its value times the kernel into the output."""
    (sh, sw), (ph, pw), (oph, opw), (dh, dw) = stride, padding, output_padding, dilation
    n, cin, h, wd = x.shape
    _, og, kh, kw = w.shape
    full_h = (h - 1) * sh + dh * (kh - 1) + 1 + oph
    full_w = (wd - 1) * sw + dw * (kw - 1) + 1 + opw
    out = np.zeros((n, og * groups, full_h, full_w))
    cg = cin // groups
    for b_, c, i, j, a, e in itertools.product(range(n), range(cin), range(h), range(wd), range(kh), range(kw)):
        g = c // cg
        out[b_, g * og:(g + 1) * og, i * sh + a * dh, j * sw + e * dw] += x[b_, c, i, j] * w[c, :, a, e]
    return out[:, :, ph:full_h - ph, pw:full_w - pw]


def pool_out(n, k, s, p, d, ceil):
    span = n + 2 * p - d * (k - 1) - 1
    out = (-(-span // s) if ceil else span // s) + 1
    if ceil and (out - 1) * s >= n + p:
        out -= 1
    return out


def ref_max_pool2d(x, k, s, p, d, ceil):
    n, c, h, w = x.shape
    oh, ow = pool_out(h, k[0], s[0], p[0], d[0], ceil), pool_out(w, k[1], s[1], p[1], d[1], ceil)
    out = np.full((n, c, oh, ow), -np.inf)
    idx = np.zeros((n, c, oh, ow), dtype=np.int64)
    for i, j, a, e in itertools.product(range(oh), range(ow), range(k[0]), range(k[1])):
        r, q = i * s[0] - p[0] + a * d[0], j * s[1] - p[1] + e * d[1]
        if 0 <= r < h and 0 <= q < w:
            better = x[:, :, r, q] > out[:, :, i, j]
            out[:, :, i, j] = np.where(better, x[:, :, r, q], out[:, :, i, j])
            idx[:, :, i, j] = np.where(better, r * w + q, idx[:, :, i, j])
    return out, idx


def ref_avg_pool2d(x, k, s, p, ceil, count_include_pad):
    n, c, h, w = x.shape
    oh, ow = pool_out(h, k[0], s[0], p[0], 1, ceil), pool_out(w, k[1], s[1], p[1], 1, ceil)
    out = np.zeros((n, c, oh, ow))
    for i, j in itertools.product(range(oh), range(ow)):
        r0, q0 = i * s[0] - p[0], j * s[1] - p[1]
        r1, q1 = min(r0 + k[0], h + p[0]), min(q0 + k[1], w + p[1])
        size = (r1 - r0) * (q1 - q0)
        r0c, q0c, r1c, q1c = max(r0, 0), max(q0, 0), min(r1, h), min(q1, w)
        total = x[:, :, r0c:r1c, q0c:q1c].sum(axis=(2, 3))
        out[:, :, i, j] = total / (size if count_include_pad else (r1c - r0c) * (q1c - q0c))
    return out


def ref_unfold(x, k, d, p, s):
    n, c = x.shape[:2]
    cols = []
    for a, e in itertools.product(range(k[0]), range(k[1])):   # each kernel offset: a one-hot kernel's conv
        w = np.zeros((c, 1) + tuple(k))
        w[:, 0, a, e] = 1.0
        cols.append(ref_conv2d(x, w, None, s, p, d, c))
    return np.stack(cols, 2).reshape(n, c * k[0] * k[1], -1)


def ref_fold(cols, size, k, d, p, s):
    """The transpose of unfold: each column's entries added back at their window's positions."""
    n, ck, _ = cols.shape
    c = ck // (k[0] * k[1])
    out = np.zeros((n, c) + tuple(size))
    base = np.zeros((n, c) + tuple(size))
    for i in np.ndindex(base.shape[1:]):
        base[(slice(None),) + i] = 1.0
        out[(slice(None),) + i] = (ref_unfold(base, k, d, p, s) * cols).sum(axis=(1, 2))
        base[(slice(None),) + i] = 0.0
    return out


# ---------------------------------------------------------------- strategies
@st.composite
def conv_sample(draw, transpose=False):
    groups = draw(st.integers(1, 2))
    cg, og = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    k = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    s = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    d = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    p = (draw(st.integers(0, 1)), draw(st.integers(0, 1)))
    h, w = (draw(st.integers(max(1, di * (ki - 1) + 1 - 2 * pi), 5)) for ki, di, pi in zip(k, d, p))
    n = draw(st.integers(1, 2))
    if transpose:
        op = tuple(draw(st.integers(0, max(si, di) - 1)) for si, di in zip(s, d))
        p = tuple(pi if (m - 1) * si + di * (ki - 1) + oi + 1 > 2 * pi else 0   # a non-empty output
                  for m, si, di, ki, oi, pi in zip((h, w), s, d, k, op, p))
        w_shape = (groups * cg, og, *k)
        return Sample((draw(floats((n, groups * cg, h, w))), draw(floats(w_shape)), None, s, p, op, groups, d))
    bias = draw(floats((groups * og,))) if draw(st.booleans()) else None
    return Sample((draw(floats((n, groups * cg, h, w))), draw(floats((groups * og, cg, *k))), bias, s, p, d, groups))


@st.composite
def conv1d_sample(draw):
    c, o, k = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    x = draw(floats((draw(st.integers(1, 2)), c, draw(st.integers(k, 6)))))
    return Sample((x, draw(floats((o, c, k)))), {"stride": draw(st.integers(1, 2)), "padding": draw(st.integers(0, 1))})


@st.composite
def pool_sample(draw, distinct=True, indices=False):
    k = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    s = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    d = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    p = tuple(draw(st.integers(0, (di * (ki - 1) + 1) // 2)) for ki, di in zip(k, d))
    h, w = (draw(st.integers(di * (ki - 1) + 1, 5)) for ki, di in zip(k, d))
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    if distinct:   # spaced 0.37 apart: far wider than finite differences' steps
        x = np.asarray(draw(st.permutations(range(n * c * h * w))), dtype=np.float64).reshape(n, c, h, w) * 0.37
        return Sample((x, k, s, p, d, draw(st.booleans()), indices))
    return Sample((draw(floats((n, c, h, w))), k, s, tuple(min(pi, ki // 2) for pi, ki in zip(p, k)),
                   draw(st.booleans()), draw(st.booleans())))


@st.composite
def unfold_sample(draw, fold=False):
    k = (draw(st.integers(1, 2)), draw(st.integers(1, 3)))
    d, p, s = (draw(st.integers(1, 2)), 1), (draw(st.integers(0, 1)), 0), (1, draw(st.integers(1, 2)))
    size = tuple(draw(st.integers(max(1, di * (ki - 1) + 1 - 2 * pi), 4)) for ki, di, pi in zip(k, d, p))
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    if not fold:
        return Sample((draw(floats((n, c) + size)), k, d, p, s))
    blocks = 1
    for m, ki, di, pi, si in zip(size, k, d, p, s):
        blocks *= (m + 2 * pi - di * (ki - 1) - 1) // si + 1
    return Sample((draw(floats((n, c * k[0] * k[1], blocks))), size, k, d, p, s))


def _fractional_starts(u, n, out, k):
    """ATen's generate_intervals, written out: window i starts at int((i + u) * alpha) - int(u * alpha)."""
    alpha = (n - k) / (out - 1) if out > 1 else 0.0
    return [n - k if i == out - 1 else int((i + u) * alpha) - int(u * alpha) for i in range(out)]


def ref_fractional_max_pool(x, k, out, samples, indices=False):
    """Loop-by-loop fractional max pooling: each window's first maximum and its flat position."""
    nd = len(k)
    n, c, spatial = x.shape[0], x.shape[1], x.shape[2:]
    values, where = np.empty((n, c) + tuple(out)), np.empty((n, c) + tuple(out), dtype=np.int64)
    order = (1, 0) if nd == 2 else (0, 1, 2)   # ATen reads the 2-D draws as (width, height)
    for b, ch in itertools.product(range(n), range(c)):
        starts = [_fractional_starts(samples[b][ch][order[d]], spatial[d], out[d], k[d]) for d in range(nd)]
        for o in itertools.product(*(range(m) for m in out)):
            window = x[(b, ch) + tuple(slice(starts[d][o[d]], starts[d][o[d]] + k[d]) for d in range(nd))]
            first = int(np.argmax(window))
            values[(b, ch) + o] = window.reshape(-1)[first]
            pos = np.unravel_index(first, window.shape)
            where[(b, ch) + o] = np.ravel_multi_index(tuple(starts[d][o[d]] + pos[d] for d in range(nd)), spatial)
    return (values, where) if indices else values


@st.composite
def fractional_pool_sample(draw, nd=2, indices=False):
    k = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    spatial = tuple(draw(st.integers(ki, 6 if nd == 2 else 4)) for ki in k)
    out = tuple(draw(st.integers(1, n - ki + 1)) for n, ki in zip(spatial, k))
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    x = np.asarray(draw(st.permutations(range(n * c * math.prod(spatial)))), dtype=np.float64) * 0.37
    u = st.floats(0.0, 1.0, exclude_max=True)
    samples = tuple(tuple(tuple(draw(u) for _ in range(nd)) for _ in range(c)) for _ in range(n))
    return Sample((x.reshape((n, c) + spatial), k, out, samples, indices))


def _fractional(fn):
    """`fn` given the draws as nested tuples (constants of the op, not differentiable inputs)."""
    return lambda x, k, out, samples, indices: fn(x, k, out, return_indices=indices,
                                                   _random_samples=fnx.tensor(samples, dtype=x.dtype))


def ref_adaptive_max_pool3d(x, out):
    values = np.empty(x.shape[:2] + tuple(out))
    bounds = [[((i * n) // m, -((-(i + 1) * n) // m)) for i in range(m)] for n, m in zip(x.shape[2:], out)]
    for o in itertools.product(*(range(m) for m in out)):
        cell = tuple(slice(*bounds[d][o[d]]) for d in range(3))
        values[(slice(None), slice(None)) + o] = x[(slice(None), slice(None)) + cell].max(axis=(2, 3, 4))
    return values


@st.composite
def adaptive_pool3d_sample(draw):
    spatial = tuple(draw(st.integers(1, 4)) for _ in range(3))
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    x = np.asarray(draw(st.permutations(range(n * c * math.prod(spatial)))), dtype=np.float64) * 0.37
    return Sample((x.reshape((n, c) + spatial), tuple(draw(st.integers(1, m + 1)) for m in spatial)))


def ref_lp_pool3d(x, p, k, s):
    out = tuple((m - ki) // si + 1 for m, ki, si in zip(x.shape[2:], k, s))
    y = np.empty(x.shape[:2] + out)
    for o in itertools.product(*(range(m) for m in out)):
        cell = tuple(slice(o[d] * s[d], o[d] * s[d] + k[d]) for d in range(3))
        y[(slice(None), slice(None)) + o] = (x[(slice(None), slice(None)) + cell] ** p).sum(axis=(2, 3, 4)) ** (1 / p)
    return y


@st.composite
def lp_pool3d_sample(draw):
    k = tuple(draw(st.integers(1, 2)) for _ in range(3))
    stride = tuple(draw(st.integers(1, 2)) for _ in range(3))
    x = draw(floats((draw(st.integers(1, 2)), 2) + tuple(draw(st.integers(ki, 4)) for ki in k), 0.5, 2.0))
    return Sample((x, float(draw(st.sampled_from([1, 2, 3]))), k, stride))


def _conv1d_ref(x, w, stride, padding):
    return ref_conv2d(x[:, :, None], w[:, :, None], None, (1, stride), (0, padding), (1, 1), 1)[:, :, 0]


# eager convolutions run fnx/ops/conv.py's primitives, transforms the composite: reductions (products) either way
OWN_EAGER_FORM = {"numerics": "reductions", "own_eager_form": True}

OPS = [
    OpInfo("conv2d", F.conv2d, ref_conv2d, conv_sample(), double_grad=True, extra=OWN_EAGER_FORM),
    OpInfo("conv1d", F.conv1d, lambda x, w, stride, padding: _conv1d_ref(x, w, stride, padding), conv1d_sample(),
           extra=OWN_EAGER_FORM),
    OpInfo("conv_transpose2d", F.conv_transpose2d,
           lambda x, w, b, s, p, op, g, d: ref_conv_transpose2d(x, w, s, p, op, g, d), conv_sample(transpose=True),
           extra=OWN_EAGER_FORM),
    OpInfo("max_pool2d", F.max_pool2d, lambda x, k, s, p, d, ceil, indices: ref_max_pool2d(x, k, s, p, d, ceil)[0],
           pool_sample(), double_grad=True),
    OpInfo("max_pool2d_with_indices", F.max_pool2d,
           lambda x, k, s, p, d, ceil, indices: ref_max_pool2d(x, k, s, p, d, ceil), pool_sample(indices=True)),
    OpInfo("avg_pool2d", F.avg_pool2d, ref_avg_pool2d, pool_sample(distinct=False)),
    # float64 only: the window starts round in the input's dtype, which the float64 reference does not mimic
    # (test_nn_pool_extra checks float32 starts against PyTorch's)
    OpInfo("fractional_max_pool2d", _fractional(F.fractional_max_pool2d), ref_fractional_max_pool,
           fractional_pool_sample(), dtypes=("float64",)),
    OpInfo("fractional_max_pool2d_with_indices", _fractional(F.fractional_max_pool2d), ref_fractional_max_pool,
           fractional_pool_sample(indices=True), dtypes=("float64",)),
    OpInfo("fractional_max_pool3d", _fractional(F.fractional_max_pool3d), ref_fractional_max_pool,
           fractional_pool_sample(nd=3, indices=True), dtypes=("float64",)),
    OpInfo("adaptive_max_pool3d", F.adaptive_max_pool3d, ref_adaptive_max_pool3d, adaptive_pool3d_sample()),
    OpInfo("lp_pool3d", F.lp_pool3d, ref_lp_pool3d, lp_pool3d_sample(), rtol=1e-4),
    OpInfo("unfold", F.unfold, ref_unfold, unfold_sample()),
    OpInfo("fold", F.fold, ref_fold, unfold_sample(fold=True)),
]
