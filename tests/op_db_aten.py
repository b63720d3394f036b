"""Op table: PyTorch's ATen-level top-level names (fnx/ops/aten.py, fnx/ops/segment.py, fnx/nn/torch_native.py):
rsub, fill, constant_pad_nd, norm_except_dim, narrow_copy, nonzero_static, segment_reduce, lobpcg, convolution, the
native_* normalisations, conv_tbc and the recurrent kernels, against numpy references (the recurrent ones against
op_db_rnn's loop). Thin aliases of table ops (native_norm, rnn_tanh_cell, ...) are checked in test_aten.py."""
import numpy as np
from hypothesis import strategies as st

import fnx
from op_db import OpInfo, Sample, binary_sample, floats, ints, shapes
from op_db_conv import OWN_EAGER_FORM, conv_sample, ref_conv2d, ref_conv_transpose2d
from op_db_rnn import ref_cell, ref_recurrence


# ---------------------------------------------------------------- tensor functions
@st.composite
def pad_sample(draw):
    """An array and constant_pad_nd's (left, right) pairs from the last dim, some negative (cropping)."""
    x = draw(floats(draw(shapes(min_dims=1, max_dims=3, min_side=2))))
    pads = []
    for n in reversed(x.shape[x.ndim - draw(st.integers(1, x.ndim)):]):
        pads += [draw(st.integers(-1 if n > 2 else 0, 2)), draw(st.integers(-1 if n > 2 else 0, 2))]
    return Sample((x, pads, draw(st.sampled_from([0, 1.5]))))


def ref_constant_pad(x, pads, value):
    for i in range(len(pads) // 2):
        axis, (lo, hi) = x.ndim - 1 - i, pads[2 * i:2 * i + 2]
        x = np.moveaxis(np.moveaxis(x, axis, 0)[max(-lo, 0):x.shape[axis] - max(-hi, 0)], 0, axis)
        widths = [(0, 0)] * x.ndim
        widths[axis] = (max(lo, 0), max(hi, 0))
        x = np.pad(x, widths, constant_values=value)
    return x


@st.composite
def norm_except_sample(draw):
    x = draw(floats(draw(shapes(min_dims=1, max_dims=3)), 0.5, 2.0)) * draw(st.sampled_from([1, -1]))
    return Sample((x, draw(st.sampled_from([2, 3])), draw(st.integers(-1, x.ndim - 1))))


def ref_norm_except_dim(x, p, dim):
    if dim == -1:
        return (np.abs(x) ** p).sum() ** (1 / p)
    axes = tuple(a for a in range(x.ndim) if a != dim)
    return (np.abs(x) ** p).sum(axes, keepdims=True) ** (1 / p)


@st.composite
def narrow_sample(draw):
    x = draw(floats(draw(shapes(min_dims=1, max_dims=3))))
    dim = draw(st.integers(0, x.ndim - 1))
    start = draw(st.integers(0, x.shape[dim] - 1))
    return Sample((x, dim, start, draw(st.integers(0, x.shape[dim] - start))))


@st.composite
def nonzero_static_sample(draw):
    x = draw(ints(draw(shapes(max_dims=3)), 0, 2))
    return Sample((x,), {"size": draw(st.integers(0, x.size + 2)), "fill_value": draw(st.sampled_from([-1, 7]))})


def ref_nonzero_static(x, size, fill_value):
    found = np.argwhere(x)[:size]
    return np.concatenate([found, np.full((size - len(found), x.ndim), fill_value)]).astype(np.int64)


# ---------------------------------------------------------------- nn kernels
@st.composite
def norm_sample(draw, weight_shape):
    """(N, C, L) floats with an affine weight and bias of `weight_shape(C, L)`."""
    n, c, length = draw(st.integers(1, 3)), draw(st.integers(1, 4)), draw(st.integers(2, 4))
    x = draw(floats((n, c, length)))
    return x, draw(floats(weight_shape(c, length), 0.5, 2)), draw(floats(weight_shape(c, length)))


def ref_stats(x, axes, eps):
    mean = x.mean(axes, keepdims=True)
    return mean, 1 / np.sqrt(((x - mean) ** 2).mean(axes, keepdims=True) + eps)


def ref_layer_norm(x, shape, w, b, eps):
    mean, rstd = ref_stats(x, (-1,), eps)
    return [(x - mean) * rstd * w + b, mean, rstd]


@st.composite
def group_norm_sample(draw):
    x, w, b = draw(norm_sample(lambda c, length: (c,)))
    groups = draw(st.sampled_from([g for g in range(1, x.shape[1] + 1) if x.shape[1] % g == 0]))
    return Sample((x, w, b, x.shape[0], x.shape[1], x.shape[2], groups, 1e-5))


def ref_group_norm(x, w, b, n, c, hw, groups, eps):
    mean, rstd = ref_stats(x.reshape(n, groups, -1), (2,), eps)
    out = ((x.reshape(n, groups, -1) - mean) * rstd).reshape(x.shape) * w[:, None] + b[:, None]
    return [out, mean.reshape(n, groups), rstd.reshape(n, groups)]


def ref_batch_norm(x, w, b, mean, var, training, momentum, eps):
    mean, rstd = ref_stats(x, (0, 2), eps)
    return [(x - mean) * rstd * w[:, None] + b[:, None], mean.reshape(-1), rstd.reshape(-1)]


@st.composite
def conv_tbc_sample(draw):
    k, c, o = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    pad = draw(st.integers(0, 1))
    x = draw(floats((draw(st.integers(max(1, k - 2 * pad), 5)), draw(st.integers(1, 2)), c)))
    return Sample((x, draw(floats((k, c, o))), draw(floats((o,))), pad))


def ref_conv_tbc(x, w, b, pad):
    x = np.pad(x, ((pad, pad), (0, 0), (0, 0)))
    steps = x.shape[0] - w.shape[0] + 1
    return sum(np.einsum("tbc,co->tbo", x[k:k + steps], w[k]) for k in range(w.shape[0])) + b


@st.composite
def cell_sample(draw, mode):
    """input (N, I), state, w_ih, w_hh and maybe both biases of one step."""
    n, i, h = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    gates = {"LSTM": 4, "GRU": 3}.get(mode, 1) * h
    state = [draw(floats((n, h), -1, 1)) for _ in range(2 if mode == "LSTM" else 1)]
    biases = (draw(floats((gates,), -1, 1)), draw(floats((gates,), -1, 1))) if draw(st.booleans()) else ()
    return Sample((draw(floats((n, i), -1, 1)), *state, draw(floats((gates, i), -1, 1)),
                   draw(floats((gates, h), -1, 1)), *biases))


def _lstm_cell(x, h, c, *weights):
    return list(fnx.lstm_cell(x, [h, c], *weights))


def ref_step(mode):
    def ref(x, *args):
        state, (w_ih, w_hh, *biases) = (tuple(args[:2]), args[2:]) if mode == "LSTM" else (args[0], args[1:])
        b_ih, b_hh = biases or (None, None)
        out = ref_cell(mode, x @ w_ih.T + (0 if b_ih is None else b_ih), state, w_hh, b_hh)
        return list(out) if mode == "LSTM" else out
    return ref


@st.composite
def lstm_sample(draw):
    """A one-layer LSTM, maybe bidirectional, over a (L, N, I) sequence, its flat parameter list with biases."""
    length, n, i, h = draw(st.integers(1, 3)), draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 2))
    directions = draw(st.integers(1, 2))
    params = [draw(floats(shape, -1, 1)) for _ in range(directions)
              for shape in ((4 * h, i), (4 * h, h), (4 * h,), (4 * h,))]
    hx = [draw(floats((directions, n, h), -1, 1)) for _ in range(2)]
    return Sample((draw(floats((length, n, i), -1, 1)), *hx, *params))


def _lstm(x, h0, c0, *params):
    return list(fnx.lstm(x, [h0, c0], list(params), True, 1, 0.0, False, len(params) == 8, False))


def ref_lstm(x, h0, c0, *params):
    outs, hs, cs = [], [], []
    for d in range(len(params) // 4):
        w_ih, w_hh, b_ih, b_hh = params[4 * d:4 * d + 4]
        ys, h, c = ref_recurrence("LSTM", x @ w_ih.T + b_ih, h0[d], c0[d], w_hh, b_hh, reverse=d == 1)
        outs.append(ys), hs.append(h), cs.append(c)
    return [np.concatenate(outs, -1), np.stack(hs), np.stack(cs)]


@st.composite
def segment_sample(draw):
    """(N,) or (B, N) data of distinct values away from `initial` (finite differences), lengths along the last
    axis per row; empty segments only where an initial value fills them (else max gives -inf, mean NaN)."""
    reduce = draw(st.sampled_from(["sum", "mean", "prod", "max", "min"]))
    initial = draw(st.sampled_from([None, 0.25]))
    batch = draw(st.sampled_from([(), (2,)]))
    segments = draw(st.integers(1, 3))
    lengths = np.array([draw(st.lists(st.integers(0 if initial is not None else 1, 3), min_size=segments,
                                      max_size=segments)) for _ in range(max(1, len(batch) and 2))])
    lengths[:, -1] += lengths.sum(1).max() - lengths.sum(1)          # every row covers the same length
    n = int(lengths[0].sum())
    values = np.asarray(draw(st.permutations(range(int(np.prod(batch + (n,))))))) * 0.37 - 1.1
    data = np.where(np.abs(values - 0.25) < 0.1, values + 0.2, values).reshape(batch + (n,))
    return Sample((data, reduce), {"lengths": lengths.reshape(batch + (segments,)), "axis": len(batch),
                                   "initial": initial})


def ref_segment_reduce(data, reduce, lengths, axis, initial):
    rows = data.reshape(int(np.prod(data.shape[:-1])), data.shape[-1])
    out = []
    for row, lens in zip(rows, lengths.reshape(-1, lengths.shape[-1])):
        parts = np.split(row, np.cumsum(lens)[:-1])
        extra = [] if initial is None else [initial]
        if reduce == "mean":
            out.append([(p.sum() + sum(extra)) / len(p) if len(p) else initial for p in parts])
        else:
            fn = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}[reduce]
            out.append([fn(np.concatenate([p, extra])) for p in parts])
    return np.asarray(out, dtype=np.float64).reshape(lengths.shape)


@st.composite
def lobpcg_sample(draw):
    """Symmetric positive definite Q diag(s) Q^T, 3-4 rows (LOBPCG wants 3 per eigenpair), well-separated s."""
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    m, batch = draw(st.integers(3, 4)), draw(st.sampled_from([(), (2,)]))
    q = np.linalg.qr(rng.standard_normal(batch + (m, m)))[0]
    values = rng.permutation(0.5 + 0.4 * np.arange(m) + rng.uniform(0, 0.1, m))
    return Sample(((q * values) @ np.swapaxes(q, -1, -2),), {"largest": draw(st.booleans())})


def _lobpcg(lib):
    """(E, X * X) of the extreme eigenpair of the symmetric part (the squares do not depend on the signs)."""
    def invariants(a, largest):
        a = 0.5 * (a + np.swapaxes(a, -1, -2)) if lib is np else 0.5 * (a + a.mT)
        if lib is fnx:
            e, x = fnx.lobpcg(a, k=1, largest=largest)
            return e, x * x
        e, x = np.linalg.eigh(a)
        pick = slice(-1, None) if largest else slice(0, 1)
        return e[..., pick], x[..., pick] ** 2
    return invariants


def _convolution(x, w, b, s, p, *rest):
    """fnx.convolution on conv_sample's arguments: (dilation, groups), or transposed (output_padding, groups,
    dilation)."""
    if len(rest) == 2:
        return fnx.convolution(x, w, b, s, p, rest[0], False, (0, 0), rest[1])
    return fnx.convolution(x, w, b, s, p, rest[2], True, rest[0], rest[1])


def _ref_convolution(x, w, b, s, p, *rest):
    if len(rest) == 2:
        return ref_conv2d(x, w, b, s, p, *rest)
    return ref_conv_transpose2d(x, w, s, p, *rest)


PRODUCTS = {"numerics": "reductions"}
OPS = [
    OpInfo("rsub", lambda x, y: fnx.rsub(x, y, alpha=2), lambda x, y: y - 2 * x, binary_sample(scalar_rhs=True)),
    OpInfo("fill", fnx.fill, lambda x, v: np.full_like(x, v),
           st.builds(lambda x, v: Sample((x, v)), floats(shapes()), floats(()))),
    OpInfo("constant_pad_nd", fnx.constant_pad_nd, ref_constant_pad, pad_sample()),
    OpInfo("norm_except_dim", fnx.norm_except_dim, ref_norm_except_dim, norm_except_sample(), double_grad=True,
           extra=PRODUCTS),
    OpInfo("narrow_copy", fnx.narrow_copy, lambda x, d, s, n: np.take(x, range(s, s + n), d), narrow_sample()),
    OpInfo("nonzero_static", fnx.nonzero_static, ref_nonzero_static, nonzero_static_sample(), grad=False),
    OpInfo("segment_reduce", fnx.segment_reduce, ref_segment_reduce, segment_sample(), extra=PRODUCTS),
    OpInfo("lobpcg", _lobpcg(fnx), _lobpcg(np), lobpcg_sample(), rtol=1e-4, extra=PRODUCTS),
    OpInfo("convolution", _convolution, _ref_convolution, conv_sample(False) | conv_sample(True), extra=OWN_EAGER_FORM),
    OpInfo("native_layer_norm", fnx.native_layer_norm, ref_layer_norm,
           norm_sample(lambda c, length: (length,)).map(lambda a: Sample((a[0], [a[0].shape[-1]], a[1], a[2], 1e-5)))
           , extra=PRODUCTS),
    OpInfo("native_group_norm", fnx.native_group_norm, ref_group_norm, group_norm_sample(),
           extra=PRODUCTS),
    OpInfo("native_batch_norm", fnx.native_batch_norm, ref_batch_norm,
           norm_sample(lambda c, length: (c,)).map(lambda a: Sample((*a, None, None, True, 0.1, 1e-5))),
           extra=OWN_EAGER_FORM),   # eager training batch_norm is one tape node (_BatchNorm), staged the composite
    OpInfo("conv_tbc", fnx.conv_tbc, ref_conv_tbc, conv_tbc_sample(), extra=OWN_EAGER_FORM),
    # the recurrent steps: matrix products through sigmoid and tanh
    OpInfo("lstm_cell", _lstm_cell, ref_step("LSTM"), cell_sample("LSTM"), extra=PRODUCTS),
    OpInfo("gru_cell", fnx.gru_cell, ref_step("GRU"), cell_sample("GRU"), extra=PRODUCTS),
    OpInfo("lstm", _lstm, ref_lstm, lstm_sample(), extra=PRODUCTS),
]
