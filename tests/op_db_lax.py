"""Op table: fnx.lax, fnx.scipy and the jax.nn functions of fnx.nn (JAX's APIs), on small inputs drawn by
hypothesis, against float64 numpy references (math.erf / math.lgamma where numpy has none; SciPy is not used).

The control-flow entries (scan, fori_loop, cond, associative_scan) are compositions over fnx's loop
primitives, so the generic checks run them eagerly, differentiated, batched and compiled. The convolution
reference dilates and pads the input with numpy and correlates it loop by loop.
"""
import itertools
import math

import numpy as np
from hypothesis import strategies as st

import fnx
import fnx.lax as lax
import fnx.nn as nn
from fnx.scipy import linalg as sl, special, stats
from op_db import OpInfo, Sample, floats, shapes


# ---------------------------------------------------------------- numpy references
def ref_dot_general(x, y, dimension_numbers):
    (lc, rc), (lb, rb) = dimension_numbers
    letters = iter("abcdefghijklmnop")
    ls = [next(letters) for _ in range(x.ndim)]
    rs = [None] * y.ndim
    for a, b in zip(lc + lb, rc + rb):
        rs[b] = ls[a]
    rs = [s or next(letters) for s in rs]
    out = [ls[a] for a in lb] + [s for i, s in enumerate(ls) if i not in lc + lb] + \
          [s for i, s in enumerate(rs) if i not in rc + rb]
    return np.einsum(f"{''.join(ls)},{''.join(rs)}->{''.join(out)}", x, y)


def ref_pad(x, value, config):
    out = x
    for d, (lo, hi, interior) in enumerate(config):
        n = out.shape[d]
        size = n + max(n - 1, 0) * interior
        shape = list(out.shape)
        shape[d] = size
        grown = np.full(shape, value, dtype=out.dtype)
        index = [slice(None)] * out.ndim
        index[d] = slice(0, size, interior + 1)
        grown[tuple(index)] = out
        before = [(0, 0)] * out.ndim
        before[d] = (max(lo, 0), max(hi, 0))
        grown = np.pad(grown, before, constant_values=value)
        crop = [slice(None)] * out.ndim
        crop[d] = slice(max(-lo, 0), grown.shape[d] - max(-hi, 0))
        out = grown[tuple(crop)]
    return out


def ref_conv(x, w, strides, pads, lhs_dilation, rhs_dilation, groups):
    """NCHW x OIHW cross-correlation with JAX's conv_general_dilated arguments."""
    x = ref_pad(x, 0.0, [(0, 0, 0), (0, 0, 0)] + [(lo, hi, d - 1) for (lo, hi), d in zip(pads, lhs_dilation)])
    k = [(s - 1) * d + 1 for s, d in zip(w.shape[2:], rhs_dilation)]
    out_sp = [(n - kk) // s + 1 for n, kk, s in zip(x.shape[2:], k, strides)]
    o, cg = w.shape[0], w.shape[1]
    out = np.zeros((x.shape[0], o) + tuple(out_sp))
    for oc, pos in itertools.product(range(o), itertools.product(*map(range, out_sp))):
        g = oc // (o // groups)
        window = tuple(slice(p * s, p * s + kk, d) for p, s, kk, d in zip(pos, strides, k, rhs_dilation))
        patch = x[(slice(None), slice(g * cg, (g + 1) * cg)) + window]
        out[(slice(None), oc) + pos] = (patch * w[oc]).reshape(x.shape[0], -1).sum(-1)
    return out


def ref_reduce_window(x, init, reduce, window, strides, pads):
    x = np.pad(x, pads, constant_values=init)
    out_sp = [(n - k) // s + 1 for n, k, s in zip(x.shape, window, strides)]
    out = np.empty(out_sp)
    for pos in itertools.product(*map(range, out_sp)):
        out[pos] = reduce(x[tuple(slice(p * s, p * s + k) for p, s, k in zip(pos, strides, window))])
    return out


def ref_scan(c, xs):
    ys = []
    for x in xs:
        c = np.tanh(c * x + 0.5)
        ys.append(c * 2.0)
    return c, np.stack(ys) if ys else np.zeros((0,) + np.shape(c))


# ---------------------------------------------------------------- samples
@st.composite
def dot_general_sample(draw):
    nb, nc, nl, nr = (draw(st.integers(0, 1)), draw(st.integers(1, 2)), draw(st.integers(0, 1)),
                      draw(st.integers(0, 1)))
    sizes = [draw(st.integers(1, 3)) for _ in range(nb + nc + nl + nr)]
    b, c, fl, fr = sizes[:nb], sizes[nb:nb + nc], sizes[nb + nc:nb + nc + nl], sizes[nb + nc + nl:]
    lhs_order = draw(st.permutations(["b"] * nb + ["c"] * nc + ["l"] * nl)) if nb + nc + nl else []
    rhs_order = draw(st.permutations(["b"] * nb + ["c"] * nc + ["r"] * nr))

    def layout(order, free):
        shape, dims = [], {"b": [], "c": [], "f": []}
        it = {"b": iter(b), "c": iter(c), "f": iter(free)}
        for i, kind in enumerate(order):
            k = "f" if kind in "lr" else kind
            shape.append(next(it[k]))
            dims[k].append(i)
        return shape, dims

    ls, ld = layout(lhs_order, fl)
    rs, rd = layout(rhs_order, fr)
    dn = ((tuple(ld["c"]), tuple(rd["c"])), (tuple(ld["b"]), tuple(rd["b"])))
    return Sample((draw(floats(tuple(ls))), draw(floats(tuple(rs))), dn))


@st.composite
def dynamic_slice_sample(draw):
    shape = draw(shapes(min_dims=1, max_dims=3))
    sizes = tuple(draw(st.integers(0, n)) for n in shape)
    starts = tuple(draw(st.integers(-1, n + 1)) for n in shape)
    return Sample((draw(floats(shape)), starts, sizes))


@st.composite
def dynamic_update_sample(draw):
    shape = draw(shapes(min_dims=1, max_dims=3))
    sizes = tuple(draw(st.integers(1, n)) for n in shape)
    starts = tuple(draw(st.integers(-1, n + 1)) for n in shape)
    return Sample((draw(floats(shape)), draw(floats(sizes)), starts))


def ref_dynamic_slice(x, starts, sizes):
    starts = [min(max(s, 0), n - k) for s, n, k in zip(starts, x.shape, sizes)]
    return x[tuple(slice(s, s + k) for s, k in zip(starts, sizes))]


def ref_dynamic_update_slice(x, u, starts):
    starts = [min(max(s, 0), n - k) for s, n, k in zip(starts, x.shape, u.shape)]
    out = x.copy()
    out[tuple(slice(s, s + k) for s, k in zip(starts, u.shape))] = u
    return out


@st.composite
def pad_sample(draw):
    shape = draw(shapes(min_dims=1, max_dims=3, max_side=3))
    config = [(draw(st.integers(-1, 2)), draw(st.integers(-1, 2)), draw(st.integers(0, 2))) for _ in shape]
    config = [(lo, max(hi, -lo - n - (n - 1) * i), i) for n, (lo, hi, i) in zip(shape, config)]  # size >= 0
    return Sample((draw(floats(shape)), draw(st.floats(-2, 2)), config))


@st.composite
def conv_sample(draw):
    nd = draw(st.integers(1, 2))
    groups = draw(st.integers(1, 2))
    cin, cout = groups * draw(st.integers(1, 2)), groups * draw(st.integers(1, 2))
    kernel = [draw(st.integers(1, 3)) for _ in range(nd)]
    rhs_dil = [draw(st.integers(1, 2)) for _ in range(nd)]
    lhs_dil = [draw(st.integers(1, 2)) for _ in range(nd)]
    strides = [draw(st.integers(1, 2)) for _ in range(nd)]
    spatial = [draw(st.integers((k - 1) * d + 2, (k - 1) * d + 4)) for k, d in zip(kernel, rhs_dil)]
    padding = draw(st.sampled_from(["SAME", "VALID", "pairs"]))
    if padding == "pairs":
        padding = [(draw(st.integers(-1, 2)), draw(st.integers(0, 2))) for _ in range(nd)]
    x = draw(floats((2, cin) + tuple(spatial)))
    w = draw(floats((cout, cin // groups) + tuple(kernel)))
    return Sample((x, w, tuple(strides), padding, tuple(lhs_dil), tuple(rhs_dil), groups))


def lax_conv_nchw(x, w, strides, padding, lhs_dil, rhs_dil, groups):
    return lax.conv_general_dilated(x, w, strides, padding, lhs_dil, rhs_dil, feature_group_count=groups)


def ref_conv_nchw(x, w, strides, padding, lhs_dil, rhs_dil, groups):
    if isinstance(padding, str):
        window = [(k - 1) * d + 1 for k, d in zip(w.shape[2:], rhs_dil)]
        padding = lax.padtype_to_pads(x.shape[2:], window, strides, padding)
    return ref_conv(x, w, strides, padding, lhs_dil, rhs_dil, groups)


@st.composite
def reduce_window_sample(draw, distinct: bool):
    shape = draw(shapes(min_dims=1, max_dims=2, min_side=2, max_side=4))
    window = tuple(draw(st.integers(1, n)) for n in shape)
    strides = tuple(draw(st.integers(1, 2)) for _ in shape)
    padding = draw(st.sampled_from(["SAME", "VALID"]))
    x = draw(floats(shape))
    if distinct:
        x = np.asarray(draw(st.permutations(list(np.arange(x.size) * 0.37 - 1)))).reshape(shape)
    return Sample((x, window, strides, padding))


def _pads(x, window, strides, padding):
    return lax.padtype_to_pads(x.shape, window, strides, padding)


@st.composite
def scan_sample(draw):
    n = draw(st.integers(0, 4))
    shape = draw(shapes(max_dims=1))
    return Sample((draw(floats(shape, -1, 1)), draw(floats((n,) + shape, -1, 1))))


def lax_scan(c, xs):
    return lax.scan(lambda c, x: (lax.tanh(c * x + 0.5), lax.tanh(c * x + 0.5) * 2.0), c, xs, unroll=2)


@st.composite
def vector_sample(draw, min_side=1, separated=False):
    shape = draw(shapes(min_dims=1, max_dims=2, min_side=min_side, max_side=5))
    x = draw(floats(shape))
    if separated:
        x = np.asarray(draw(st.permutations(list(np.arange(x.size) * 0.37 - 1)))).reshape(shape)
    return Sample((x, draw(st.integers(0, len(shape) - 1)), draw(st.booleans())))


def flipped(fn, x, axis, reverse):
    return np.flip(fn(np.flip(x, axis), axis), axis) if reverse else fn(x, axis)


def linear_recurrence(x, axis, reverse):
    """h_t = a_t h_{t-1} + b_t as an associative scan over (a, b) pairs (the combine is not commutative)."""
    a, b = lax.logistic(x), x

    def combine(first, second):
        return first[0] * second[0], second[0] * first[1] + second[1]
    return lax.associative_scan(combine, (a, b), reverse=reverse, axis=axis)[1]


def ref_linear_recurrence(x, axis, reverse):
    a, b = 1 / (1 + np.exp(-x)), x
    a, b = np.moveaxis(a, axis, 0), np.moveaxis(b, axis, 0)
    if reverse:
        a, b = a[::-1], b[::-1]
    h, out = np.zeros_like(b[0]), []
    for t in range(b.shape[0]):
        h = a[t] * h + b[t] if t else b[t]
        out.append(h)
    out = np.stack(out)
    return np.moveaxis(out[::-1] if reverse else out, 0, axis)


def ref_fori(x):
    for i in range(3):
        x = x * np.cos(x) + i
    return x


def ref_while(x):
    while x.sum() < 10:
        x = np.abs(x) * 1.5 + 1
    return x


@st.composite
def sort_sample(draw):
    n = draw(st.integers(1, 6))
    keys = np.asarray(draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)), dtype=np.int64)
    vals = np.asarray(draw(st.permutations(list(np.arange(n) * 0.37 - 1))))
    return Sample((keys, vals))


def ref_sort_two(keys, vals):
    order = np.lexsort((vals, keys))
    return keys[order], vals[order]


def ref_attention(q, k, v):
    """Causal softmax(q k^T / sqrt(d)) v in JAX's (batch, length, heads, head_dim) layout."""
    scores = np.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1])
    scores = np.where(np.tril(np.ones(scores.shape[-2:], bool)), scores, -np.inf)
    w = np.exp(scores - scores.max(-1, keepdims=True))
    return np.einsum("bhqk,bkhd->bqhd", w / w.sum(-1, keepdims=True), v)


def ref_sdpa(q, k, v, is_causal, enable_gqa):
    """softmax(q k^T / sqrt(d)) v in PyTorch's (batch, heads, length, head_dim) layout, each key/value head read by
    a group of query heads."""
    groups = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, groups, 1), np.repeat(v, groups, 1)
    scores = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])
    if is_causal:
        scores = np.where(np.tril(np.ones(scores.shape[-2:], bool)), scores, -np.inf)
    w = np.exp(scores - scores.max(-1, keepdims=True))
    return w / w.sum(-1, keepdims=True) @ v


@st.composite
def sdpa_sample(draw):
    kv_heads, groups = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    length, keys, e, d = (draw(st.integers(1, 3)) for _ in range(4))
    q = draw(floats((1, kv_heads * groups, length, e)))
    k, v = draw(floats((1, kv_heads, keys, e))), draw(floats((1, kv_heads, keys, d)))
    return Sample((q, k, v), dict(is_causal=draw(st.booleans()), enable_gqa=groups > 1))


@st.composite
def logsumexp_sample(draw):
    shape = draw(shapes(min_dims=1, max_dims=3))
    axis = draw(st.sampled_from([None, -1, tuple(range(len(shape)))]))
    b = draw(floats(shape, 0.2, 2.0)) if draw(st.booleans()) else None
    return Sample((draw(floats(shape)), axis, b, draw(st.booleans())))


def ref_logsumexp(a, axis, b, keepdims):
    w = np.ones_like(a) if b is None else b
    return np.log(np.sum(w * np.exp(a), axis=axis, keepdims=keepdims))


def _spd(m):
    return m @ m.T + m.shape[0] * np.eye(m.shape[0])


def _spd_fnx(m):
    return m @ m.mT + m.shape[0] * fnx.eye(m.shape[0], dtype=m.dtype)


@st.composite
def matrix_and_rhs(draw, batch_x=False):
    n = draw(st.integers(1, 4))
    lead = (draw(st.integers(1, 3)),) if batch_x else ()
    return Sample((draw(floats((n, n), -1, 1)), draw(floats(lead + (n,)))))


def ref_mvn_logpdf(m, x):
    cov = _spd(m)
    d = x
    quad = np.einsum("...i,ij,...j->...", d, np.linalg.inv(cov), d)
    return -0.5 * quad - 0.5 * np.log(np.linalg.det(cov)) - 0.5 * len(cov) * np.log(2 * np.pi)


def ref_triangular(a, b):
    t = np.tril(a) + 3 * np.eye(len(a))      # a well-conditioned lower triangle
    return np.linalg.solve(t.T, b[..., None])[..., 0] if b.ndim == 2 else np.linalg.solve(t.T, b)


OPS = [
    OpInfo("lax.dot_general", lax.dot_general, ref_dot_general, dot_general_sample()),
    OpInfo("lax.dynamic_slice", lax.dynamic_slice, ref_dynamic_slice, dynamic_slice_sample()),
    OpInfo("lax.dynamic_update_slice", lax.dynamic_update_slice, ref_dynamic_update_slice, dynamic_update_sample()),
    OpInfo("lax.pad", lax.pad, ref_pad, pad_sample()),
    OpInfo("lax.conv_general_dilated", lax_conv_nchw, ref_conv_nchw, conv_sample(), rtol=1e-5, atol=1e-5,
           extra={"own_eager_form": True}),
    OpInfo("lax.reduce_window_add", lambda x, w, s, p: lax.reduce_window(x, 0.0, lax.add, w, s, p),
           lambda x, w, s, p: ref_reduce_window(x, 0.0, np.sum, w, s, _pads(x, w, s, p)),
           reduce_window_sample(distinct=False)),
    OpInfo("lax.reduce_window_max", lambda x, w, s, p: lax.reduce_window(x, -np.inf, lax.max, w, s, p),
           lambda x, w, s, p: ref_reduce_window(x, -np.inf, np.max, w, s, _pads(x, w, s, p)),
           reduce_window_sample(distinct=True)),
    OpInfo("lax.scan", lax_scan, ref_scan, scan_sample()),
    OpInfo("lax.fori_loop", lambda x: lax.fori_loop(0, 3, lambda i, v: v * lax.cos(v) + i, x), ref_fori,
           st.builds(lambda x: Sample((x,)), floats(shapes(max_dims=2)))),
    OpInfo("lax.while_loop", lambda x: lax.while_loop(lambda v: v.sum() < 10, lambda v: lax.abs(v) * 1.5 + 1, x),
           ref_while, st.builds(lambda x: Sample((x,)), floats(shapes(max_dims=2))), grad=False),
    OpInfo("lax.cond", lambda p, x: lax.cond(p.sum() > 0, lambda v: lax.exp(v), lambda v: v * 3.0, x),
           lambda p, x: np.exp(x) if p.sum() > 0 else x * 3.0,
           st.builds(lambda p, sign, x: Sample((p * sign, x)), floats((2,), 0.5, 2.0), st.sampled_from([-1.0, 1.0]),
                     floats(shapes(max_dims=2)))),
    OpInfo("lax.associative_scan", linear_recurrence, ref_linear_recurrence, vector_sample()),
    OpInfo("lax.cummax", lambda x, a, r: lax.cummax(x, a, r),
           lambda x, a, r: flipped(np.maximum.accumulate, x, a, r), vector_sample(separated=True)),
    OpInfo("lax.sort_two_keys", lambda k, v: lax.sort((k, v), num_keys=2), ref_sort_two, sort_sample()),
    OpInfo("scipy.special.logsumexp", special.logsumexp, ref_logsumexp, logsumexp_sample()),
    OpInfo("scipy.special.xlog1py", special.xlog1py, lambda x, y: np.where(x == 0, 0.0, x * np.log1p(y)),
           st.builds(lambda x, y: Sample((np.where(np.abs(x) < 0.3, 0.0, x), y)), floats((3,)), floats((3,), -0.5, 2))),
    OpInfo("scipy.stats.beta.logpdf", lambda x, a, b: stats.beta.logpdf(x, a, b),
           lambda x, a, b: (a - 1) * np.log(x) + (b - 1) * np.log1p(-x) - np.vectorize(
               lambda u, v: math.lgamma(u) + math.lgamma(v) - math.lgamma(u + v))(a, b),
           st.builds(lambda x, a, b: Sample((x, a, b)), floats((3,), 0.05, 0.95), floats((3,), 0.5, 4.0),
                     floats((3,), 0.5, 4.0)), rtol=1e-5),
    OpInfo("scipy.stats.norm.logpdf", lambda x, m, s: stats.norm.logpdf(x, m, s),
           lambda x, m, s: -0.5 * ((x - m) / s) ** 2 - 0.5 * np.log(2 * np.pi) - np.log(s),
           st.builds(lambda x, m, s: Sample((x, m, s)), floats((3,)), floats((3,)), floats((3,), 0.5, 2.0))),
    OpInfo("scipy.stats.multivariate_normal.logpdf",
           lambda m, x: stats.multivariate_normal.logpdf(x, fnx.zeros(m.shape[0], dtype=m.dtype), _spd_fnx(m)),
           ref_mvn_logpdf, matrix_and_rhs(batch_x=True)),
    OpInfo("scipy.linalg.solve_triangular",
           lambda a, b: sl.solve_triangular(a + 3 * fnx.eye(a.shape[0], dtype=a.dtype), b, trans="T", lower=True),
           ref_triangular, matrix_and_rhs()),
    OpInfo("scipy.linalg.cho_solve", lambda m, b: sl.cho_solve(sl.cho_factor(_spd_fnx(m)), b),
           lambda m, b: np.linalg.solve(_spd(m), b), matrix_and_rhs()),
    OpInfo("nn.softmax_axis", lambda x: nn.softmax(x, axis=0),
           lambda x: np.exp(x) / np.exp(x).sum(axis=0, keepdims=True),
           st.builds(lambda x: Sample((x,)), floats(shapes(min_dims=1)))),
    OpInfo("nn.standardize", nn.standardize,
           lambda x: (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5),
           st.builds(lambda x: Sample((x,)), floats(shapes(min_dims=1)))),
    OpInfo("nn.squareplus", nn.squareplus, lambda x: (x + np.sqrt(x * x + 4)) / 2,
           st.builds(lambda x: Sample((x,)), floats(shapes()))),
    OpInfo("nn.dot_product_attention", lambda q, k, v: nn.dot_product_attention(q, k, v, is_causal=True),
           ref_attention, st.builds(lambda q, k, v: Sample((q, k, v)),
                                    floats((2, 3, 2, 4)), floats((2, 3, 2, 4)), floats((2, 3, 2, 4))),
           extra={"numerics": "reductions"}),
    OpInfo("nn.functional.scaled_dot_product_attention", nn.functional.scaled_dot_product_attention, ref_sdpa,
           sdpa_sample(), double_grad=True, extra={"numerics": "reductions"}),
]
