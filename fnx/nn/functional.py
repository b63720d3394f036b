"""`fnx.nn.functional` (import as F): PyTorch's functional neural-network API, as compositions of fnx ops.

This module holds the linear maps, dropout, embedding and vector utilities, and re-exports the families
that live in their own files: activations and softmax (functional_activation), convolution
(functional_conv), pooling (functional_pool), normalization (functional_norm), losses (functional_loss),
attention (functional_attention), resizing (functional_resize) and spatial sampling (functional_sampling).
Everything here works eagerly and under grad, vmap, jvp and compile.
"""
from __future__ import annotations

import math

import numpy as np

from ..ops.autocast import autocast_op
from .. import core
from ..autograd import Function, no_grad
from ..autograd.function import FunctionCtx, record_one, record_pullback
from ..core import FnxRuntimeError, FnxValueError
from ..ops import elementwise as ew, linalg
from ..ops import reduce as rd
from ..ops.arrange import pad as _pad
from ..ops.creation import arange, full, ones_like, tensor, zeros, zeros_like
from ..ops.joins import cat
from ..ops.indexing import index_select, one_hot, scatter_add, take_rows
from ..ops.linalg import einsum, matmul, matmul_p, require_same_dtype
from ..ops.norms import vector_norm
from ..ops.search import searchsorted
from ..ops.sampling import rand, rand_like
from ..sparse import sparse_coo_tensor
from ..tensor import Tensor, Tracer, make
from ..lowering.eager_kernels import THREADED
from .layout import keep_channels_last
from .functional_activation import *  # noqa: F401,F403
from .functional_activation import __all__ as _activation_all
from .functional_activation import _maybe_inplace, softmax
from .functional_attention import *  # noqa: F401,F403
from .functional_attention import __all__ as _attention_all
from .functional_conv import *  # noqa: F401,F403
from .functional_conv import __all__ as _conv_all
from .functional_loss import *  # noqa: F401,F403
from .functional_loss import __all__ as _loss_all
from .functional_norm import *  # noqa: F401,F403
from .functional_norm import __all__ as _norm_all
from .functional_pool import *  # noqa: F401,F403
from .functional_pool import __all__ as _pool_all
from .functional_resize import *  # noqa: F401,F403
from .functional_resize import __all__ as _resize_all
from .functional_sampling import *  # noqa: F401,F403
from .functional_sampling import __all__ as _sampling_all
from .functional_ctc import *  # noqa: F401,F403
from .functional_ctc import __all__ as _ctc_all

__all__ = ["linear", "bilinear", "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
           "feature_alpha_dropout", "embedding", "embedding_bag", "one_hot", "pad", "normalize", "cosine_similarity",
           "pairwise_distance", "pdist", "gumbel_softmax", "channel_shuffle", "native_channel_shuffle",
           *_activation_all, *_attention_all, *_conv_all, *_loss_all, *_norm_all, *_pool_all, *_resize_all,
           *_sampling_all, *_ctc_all]

# F.pad is fnx.ops' pad with PyTorch's layout: a channels-last 4-D or 5-D input gives a channels-last output
pad = keep_channels_last(4, 5)(_pad)


class _Linear(Function):
    """Eager `linear` as one tape node: the product and bias add run off the tape (as the primitives' impls on the
    arrays), and the backward is two products and a column sum, where the composition recorded a reshape, a
    transpose, a product and an add, and backpropagated through each (about ten binds fewer per layer and step).
    An input of more than two dims is not reshaped in the forward (matmul's impl folds its leading dims into one
    GEMM): only the backward folds them, for the weight's product and the bias's sum over all rows."""

    @staticmethod
    def forward(ctx, input, weight, bias):
        ctx.save_for_backward(input, weight)
        y = matmul(input, weight.mT)   # operands `_linear_eager` turned down: the ops' errors
        return y + bias if bias is not None else y

    @staticmethod
    def backward(ctx, g):
        input, weight = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad
        if not core.state.grad_enabled:   # no create_graph: the primitives' impls on the arrays, off the tape
            return _linear_backward_arrays(g, input, weight, ctx.needs_input_grad)
        d_input = matmul(g, weight) if need_x else None
        if input.ndim > 2 and (need_w or need_b):
            rows = math.prod(input.shape[:-1])
            g = g.reshape(rows, g.shape[-1])
            input = input.reshape(rows, input.shape[-1]) if need_w else input
        d_weight = matmul(g.mT, input) if need_w else None
        d_bias = rd.sum(g, 0) if need_b else None
        return d_input, d_weight, d_bias


def _linear_backward_arrays(g: Tensor, input: Tensor, weight: Tensor, needs: tuple) -> tuple:
    """`_Linear.backward`'s products and sum as calls of the matmul and sum primitives' impls on the arrays (the
    same results as their binds, without a dozen dispatched ops and their Tensors)."""
    xp, dev = g._device._xp, g._device
    gv, x = g._value, input._value
    d_input = make(matmul_p.impl(xp, gv, weight._value), dev) if needs[0] else None
    rows = gv.reshape(-1, gv.shape[-1])
    d_weight = make(matmul_p.impl(xp, rows.T, x.reshape(-1, x.shape[-1])), dev) if needs[1] else None
    d_bias = make(rd.sum_p.impl(xp, rows, axes=(0,), keepdims=False), dev) if needs[2] else None
    return d_input, d_weight, d_bias


def _linear_eager(input, weight, bias, flags: int) -> Tensor | None:
    """Eager `linear` of tensors of one dtype and device whose shapes fit (else None: the checks and errors of the
    composition): the product and bias add as the primitives' impls on the arrays, and under grad one `_Linear`
    node put on the tape as `_Linear.apply` would, without its generic steps (about 4 us of the 17 a GRU gate's
    (32, 128) x (64, 128) layer took)."""
    try:
        x, w, dev = input._value, weight._value, input._device
        b = None if bias is None else bias._value
    except AttributeError:   # not tensors
        return None
    if (w.ndim != 2 or x.ndim < 2 or x.shape[-1] != w.shape[1] or w.dtype is not x.dtype
            or weight._device is not dev or b is not None and (
                b.shape != w.shape[:1] or b.dtype is not x.dtype or bias._device is not dev)):
        return None
    xp = dev._xp
    gemm = linalg.gemm
    y = None
    if xp is np and gemm is not None and (b is None or b.strides[0] == b.itemsize) and gemm.takes_nt(x, w):
        y = gemm.linear(x, w, b)   # the product and the bias add in one pass
    if y is None:
        y = matmul_p.impl(xp, x, w.T)
        if b is not None:
            if xp is np and y.size < THREADED["add"][1]:   # numpy's add either way: into the product's new array
                np.add(y, b, out=y)
            else:
                y = ew.add_p.impl(xp, y, b)
    out = make(y, dev)
    needs = (input._requires_grad, weight._requires_grad, bias is not None and bias._requires_grad)
    if flags & core._NO_GRAD or True not in needs:   # no grad mode, or nothing to differentiate
        return out
    ctx = FunctionCtx(needs)
    ctx.save_for_backward(input, weight)
    return record_one(_Linear, ctx, (input, weight, bias), out)


@autocast_op("linear")
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """input @ weight.T + bias, with weight of shape (out_features, in_features).

    Leading dims of an input with more than two are folded into one (as PyTorch does), so the product and
    the weight's gradient are each one matrix product, not a batch of small ones and a sum over the batch.
    Input, weight and bias must share one dtype (no silent float64 model outputs), as in PyTorch.
    """
    flags = core._get_flags()
    if not flags & core._TRACING:
        out = _linear_eager(input, weight, bias, flags)
        if out is not None:
            return out
    require_same_dtype("linear", "input and weight", input, weight)
    if bias is not None:
        require_same_dtype("linear", "input and bias", input, bias)
    if weight.ndim != 2 or input.ndim < 2:
        y = matmul(input, weight.mT if weight.ndim == 2 else weight)
        return y + bias if bias is not None else y
    if not flags & core._TRACING and (bias is None or bias.ndim == 1):
        return _Linear.apply(input, weight, bias)   # eager: one tape node
    lead = tuple(input.shape[:-1])   # transforms see, fuse and differentiate the composition
    flat = input if input.ndim == 2 else input.reshape(math.prod(lead), input.shape[-1])
    y = matmul(flat, weight.mT)
    y = y + bias if bias is not None else y
    return y if input.ndim == 2 else y.reshape(*lead, weight.shape[0])


@autocast_op("bilinear")
def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """y_o = x1 @ weight[o] @ x2 + bias_o, with weight of shape (out, in1, in2)."""
    y = einsum("...i,oij,...j->...o", input1, weight, input2)
    return y + bias if bias is not None else y


# ---------------------------------------------------------------- dropout
def _check_p(p: float) -> None:
    if p < 0.0 or p > 1.0:
        raise FnxValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _uniform(input: Tensor, shape: tuple) -> Tensor:
    """Uniform draws of `shape` from fnx's global generator (under fnx.compile from the key each call receives,
    so the backward reuses the forward's mask); of input's shape, laid out as input is (a channels_last input
    gives a channels_last mask and so a channels_last output, as in PyTorch)."""
    if shape == tuple(input.shape):
        return rand_like(input)
    return rand(*shape, dtype=input.dtype, device=input.device)


def _keep_mask(input: Tensor, p: float, shape: tuple) -> Tensor:
    """1/(1-p) where an element is kept (probability 1 - p), else 0."""
    keep = _uniform(input, shape) >= p
    return keep.to(input.dtype) * (1.0 / (1.0 - p)) if p < 1.0 else keep.to(input.dtype)


def _dropout(input: Tensor, p: float, shape: tuple) -> Tensor:
    return input * _keep_mask(input, p, shape)


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability p and scale the rest by 1/(1-p) (identity when not training)."""
    _check_p(p)
    if not training or p == 0.0:
        return input
    return _maybe_inplace(_dropout, input, inplace, p, tuple(input.shape))


def _feature_dropout(input: Tensor, p: float, training: bool, inplace: bool, nd: int, op: str) -> Tensor:
    """Dropout of whole channels: one draw per (sample, channel), shared over the `nd` trailing dims."""
    _check_p(p)
    if input.ndim not in (nd + 1, nd + 2):
        raise FnxValueError(f"{op}: Expected {nd + 1}D or {nd + 2}D input, but received a {input.ndim}D input")
    if not training or p == 0.0:
        return input
    shape = tuple(input.shape[:-nd]) + (1,) * nd
    return _maybe_inplace(_dropout, input, inplace, p, shape)


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of a (N, C, L) input with probability `p` in training, scaling the rest by 1/(1-p)."""
    return _feature_dropout(input, p, training, inplace, 1, "dropout1d")


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of a (N, C, H, W) input with probability `p` in training, scaling the rest by 1/(1-p)."""
    return _feature_dropout(input, p, training, inplace, 2, "dropout2d")


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of a (N, C, D, H, W) input with probability `p` in training, scaling the rest by 1/(1-p)."""
    return _feature_dropout(input, p, training, inplace, 3, "dropout3d")


_SELU_NEG = 1.7580993408473766  # -scale * alpha of SELU: where a dropped SELU activation sits


def _alpha_dropout(input: Tensor, p: float, shape: tuple) -> Tensor:
    keep = (_uniform(input, shape) >= p).to(input.dtype)
    a = 1.0 / ((_SELU_NEG ** 2 * p + 1.0) * (1.0 - p)) ** 0.5
    return input * (keep * a) + ((keep - 1.0) * (_SELU_NEG * a) + _SELU_NEG * a * p)


def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    """Dropout that keeps SELU's self-normalizing mean and variance."""
    _check_p(p)
    if not training or p == 0.0:
        return input
    return _maybe_inplace(_alpha_dropout, input, inplace, p, tuple(input.shape))


def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    """Alpha dropout (SELU-preserving) of whole channels: one mask value per (sample, channel)."""
    _check_p(p)
    if not training or p == 0.0:
        return input
    shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2)
    return _maybe_inplace(_alpha_dropout, input, inplace, p, shape)


# ---------------------------------------------------------------- embedding
def _counts(idx: Tensor, n: int, weight: Tensor) -> Tensor:
    """How often each of the n rows occurs in the flat index tensor `idx` (in weight's dtype)."""
    return scatter_add(zeros(n, dtype=weight.dtype, device=weight.device), 0, idx, ones_like(idx, dtype=weight.dtype))


def _renorm_rows_(weight: Tensor, idx: Tensor, max_norm: float, norm_type: float) -> None:
    """Scale the referenced rows of `weight` whose norm exceeds max_norm down to max_norm, in place."""
    with no_grad():
        counts = _counts(idx, weight.shape[0], weight)
        norms = vector_norm(weight, norm_type, dim=1)
        scale = ew.where((counts > 0) & (norms > max_norm), max_norm / (norms + 1e-7), 1.0)
        weight.mul_(scale.unsqueeze(1))


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None, max_norm: float | None = None,
              norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Rows of `weight` picked by the integer `input`. Rows at `padding_idx` get no gradient; with
    `scale_grad_by_freq` a row's gradient is divided by how often it occurs in `input`; with `max_norm`
    the referenced rows are renormalized in place first. With `sparse`, a leaf weight's gradient is a sparse COO
    tensor (fnx.sparse), as PyTorch's."""
    n = weight.shape[0]
    if padding_idx is not None:
        if not -n <= padding_idx < n:
            raise FnxValueError("Padding_idx must be within num_embeddings")
        padding_idx %= n
    if sparse and weight.requires_grad and core.state.grad_enabled and not core.state.transforms_active:
        return _rows_with_sparse_grad(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq)
    if padding_idx is None and max_norm is None and not scale_grad_by_freq and weight.ndim \
            and not core.state.transforms_active:
        return take_rows(weight, input)   # eager: one gather in the input's shape, one tape node
    idx = input.reshape(-1)
    if max_norm is not None:
        _renorm_rows_(weight, idx, max_norm, norm_type)
    out = index_select(weight, 0, idx).reshape(tuple(input.shape) + tuple(weight.shape[1:]))
    if padding_idx is None and not scale_grad_by_freq:
        return out
    scale = ones_like(input, dtype=weight.dtype)
    if padding_idx is not None:
        scale = scale * (input != padding_idx).to(weight.dtype)
    if scale_grad_by_freq:
        scale = scale / index_select(_counts(idx, n, weight), 0, idx).reshape(tuple(input.shape))
    held = out.detach()  # same value, gradient scaled per looked-up row
    return held + (out - held) * scale.reshape(tuple(scale.shape) + (1,) * (weight.ndim - 1))


def _rows_with_sparse_grad(input: Tensor, weight: Tensor, padding_idx: int | None, max_norm: float | None,
                           norm_type: float, scale_grad_by_freq: bool) -> Tensor:
    """`embedding` whose backward gives the weight a sparse gradient: one entry per looked-up row, in input's order,
    rows at padding_idx left out (PyTorch's sparse embedding backward, uncoalesced). A weight that is not a leaf
    gets the same gradient dense."""
    idx = input.reshape(-1)
    if max_norm is not None:
        _renorm_rows_(weight, idx, max_norm, norm_type)
    with no_grad():
        out = take_rows(weight, input)

    def pull(cts):
        if scale_grad_by_freq:
            raise FnxRuntimeError("embedding_backward: scale_grad_by_freq not supported with sparse gradients")
        rows, values = idx, cts[0].reshape((-1,) + tuple(weight.shape[1:]))
        if padding_idx is not None:
            keep = rows != padding_idx
            rows, values = rows[keep], values[keep]
        if weight.grad_fn is not None:
            return (zeros_like(weight).index_add(0, rows, values),)
        return (sparse_coo_tensor(rows.unsqueeze(0), values, tuple(weight.shape)),)

    return record_pullback("EmbeddingBackward", [weight], [out], pull)[0]


def embedding_bag(input: Tensor, weight: Tensor, offsets: Tensor | None = None, max_norm: float | None = None,
                  norm_type: float = 2, scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights: Tensor | None = None, include_last_offset: bool = False,
                  padding_idx: int | None = None) -> Tensor:
    """The sum, mean or max of each bag of `weight`'s rows picked by `input` (PyTorch's F.embedding_bag): a 2-D
    input is one bag a row; a 1-D one is cut into bags at `offsets` (their starts; with `include_last_offset` the
    last entry ends the last bag). Entries at `padding_idx` count for nothing; an empty bag gives zeros;
    `per_sample_weights` (mode 'sum') scales each entry's row. With `sparse` (modes 'sum' and 'mean'), a leaf
    weight's gradient is a sparse COO tensor, one entry per bag entry."""
    if mode not in ("sum", "mean", "max"):
        raise FnxValueError("mode has to be one of sum, mean or max")
    if sparse and mode == "max":
        raise FnxValueError("max mode does not support sparse weights")
    if per_sample_weights is not None:
        if mode != "sum":
            raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                      f"supported for mode='sum' (got mode='{mode}')")
        if tuple(per_sample_weights.shape) != tuple(input.shape):
            raise FnxValueError(f"embedding_bag: If per_sample_weights ({list(per_sample_weights.shape)}) is not "
                                f"None, then it must have the same shape as the input ({list(input.shape)})")
    if input.ndim == 2:
        if offsets is not None:
            raise FnxValueError("embedding_bag: if input is 2D, then offsets has to be None, as input is treated as "
                                "a mini-batch of fixed length sequences")
        bags, length = input.shape
        starts = np.arange(0, bags * length, length)
        input = input.reshape(-1)
    elif input.ndim != 1:
        raise FnxValueError(f"embedding_bag: input has to be 1D or 2D Tensor, but got Tensor of dimension "
                            f"{input.ndim}")
    elif offsets is None or offsets.ndim != 1:
        raise FnxValueError(f"embedding_bag: offsets has to be a 1D Tensor but got "
                            f"{None if offsets is None else f'{offsets.ndim}D'}")
    elif isinstance(offsets, Tracer) and mode != "max":   # traced offsets (compile, vmap): no numpy value to cut at
        return _traced_bags(input, weight, offsets, include_last_offset, mode, per_sample_weights,
                            lambda used: embedding(used, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq),
                            padding_idx)
    else:
        starts = offsets.numpy().astype(np.int64)
        if starts.size and starts[0] != 0:
            raise FnxValueError(f"embedding_bag: offsets[0] has to be 0, i.e., the first sequence in the mini-batch "
                                f"has to start from position 0. However, got {int(starts[0])}")
    ends = np.append(starts[1:], input.shape[0])
    if include_last_offset:
        starts, ends = starts[:-1], starts[1:]
    bag = np.repeat(np.arange(len(starts)), np.maximum(ends - starts, 0))   # each entry's bag, entries in order
    used = input[:int(ends[-1])] if len(starts) else input[:0]
    rows = embedding(used, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse)
    keep = _bag_keep(used, weight, padding_idx)
    if mode == "max":
        return _bag_max(rows, keep, starts, ends, (len(starts), weight.shape[1]))
    return _bag_sum(rows, keep, per_sample_weights, tensor(bag, device=weight.device), len(starts), mode)


def _bag_keep(used: Tensor, weight: Tensor, padding_idx: int | None) -> Tensor:
    """1 for each bag entry that counts, 0 for those at padding_idx."""
    if padding_idx is None:
        return ones_like(used, dtype=weight.dtype)
    return (used != padding_idx % weight.shape[0]).to(weight.dtype)


def _bag_sum(rows: Tensor, keep: Tensor, per_sample_weights: Tensor | None, at: Tensor, bags: int,
             mode: str) -> Tensor:
    """embedding_bag's sum or mean of the entries' `rows` into the `bags` bags that `at` gives them."""
    scale = keep if per_sample_weights is None else keep * per_sample_weights.reshape(-1)[:rows.shape[0]]
    out_shape = (bags, rows.shape[1])
    total = zeros(out_shape, dtype=rows.dtype, device=rows.device).index_add(0, at, rows * scale.unsqueeze(1))
    if mode == "sum":
        return total
    count = zeros(bags, dtype=rows.dtype, device=rows.device).index_add(0, at, keep)
    return total / ew.clamp_min(count, 1).unsqueeze(1)


def _traced_bags(input: Tensor, weight: Tensor, offsets: Tensor, include_last_offset: bool, mode: str,
                 per_sample_weights: Tensor | None, lookup, padding_idx: int | None) -> Tensor:
    """embedding_bag's sum or mean with offsets known only as a traced tensor: each entry's bag is the last start
    at or before it (a search); entries outside every bag (before the first start, or after the last offset with
    `include_last_offset`) go to one extra bag, dropped at the end."""
    starts = offsets[:-1] if include_last_offset else offsets
    bags = starts.shape[0]
    position = arange(input.shape[0], device=offsets.device)
    at = searchsorted(starts, position, right=True) - 1
    outside = at < 0
    if include_last_offset:
        outside = outside | (position >= offsets[-1])
    at = ew.where(outside, bags, at)
    return _bag_sum(lookup(input), _bag_keep(input, weight, padding_idx), per_sample_weights, at, bags + 1,
                    mode)[:bags]


def _bag_max(rows: Tensor, keep: Tensor, starts: np.ndarray, ends: np.ndarray, out_shape: tuple) -> Tensor:
    """embedding_bag's max: each bag's rows gathered into one row of a (bags, longest bag) grid whose other cells,
    and the padding entries, hold -inf, the max over it; an empty bag gives zeros."""
    sizes = np.maximum(ends - starts, 0)
    width = max(int(sizes.max(initial=0)), 1)
    cells = np.arange(width)
    grid = np.where(cells < sizes[:, None], starts[:, None] + cells, rows.shape[0])   # the extra row: -inf
    floor = ew.where(keep.unsqueeze(1) > 0, rows, float("-inf"))
    floor = cat([floor, full((1, out_shape[1]), float("-inf"), dtype=rows.dtype, device=rows.device)])
    best = rd.amax(index_select(floor, 0, tensor(grid.reshape(-1), device=rows.device)).reshape(
        out_shape[0], width, out_shape[1]), 1)
    return ew.where(best == float("-inf"), 0.0, best)


# ---------------------------------------------------------------- vector utilities
def _clamped_norm(x: Tensor, p: float, dim: int, eps: float) -> Tensor:
    """max(||x||_p, eps), the clamp applied to the value only (PyTorch clamps under no_grad)."""
    n = vector_norm(x, p, dim=dim, keepdim=True)
    return n + (ew.clamp_min(n, eps) - n).detach()


@autocast_op("normalize")
def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out: Tensor | None = None) -> Tensor:
    """input / max(||input||_p, eps) along `dim`."""
    y = input / ew.clamp_min(vector_norm(input, p, dim=dim, keepdim=True), eps)
    if out is not None:
        return out.copy_(y)
    return y


@autocast_op("cosine_similarity")
def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """sum((x1 / max(||x1||, eps)) * (x2 / max(||x2||, eps))) along `dim`."""
    return rd.sum((x1 / _clamped_norm(x1, 2, dim, eps)) * (x2 / _clamped_norm(x2, 2, dim, eps)), dim)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> Tensor:
    """||x1 - x2 + eps||_p over the last dim."""
    return vector_norm(x1 - x2 + eps, p, dim=-1, keepdim=keepdim)


@autocast_op("pdist")
def pdist(input: Tensor, p: float = 2.0) -> Tensor:
    """The p-norm distance between every pair of rows i < j of an (N, M) input, in row-major pair order."""
    n = input.shape[0]
    rows, cols = np.triu_indices(n, 1)
    dev = input.device
    diff = index_select(input, 0, tensor(rows, device=dev)) - index_select(input, 0, tensor(cols, device=dev))
    return vector_norm(diff, p, dim=-1)


def gumbel_softmax(logits: Tensor, tau: float = 1.0, hard: bool = False, eps: float = 1e-10, dim: int = -1) -> Tensor:
    """softmax((logits + Gumbel noise) / tau); with `hard`, a one-hot sample with the soft sample's gradient."""
    u = rand(*logits.shape, dtype=logits.dtype, device=logits.device)
    gumbels = -ew.log(-ew.log(u + eps) + eps)
    y = softmax((logits + gumbels) / tau, dim)
    if not hard:
        return y
    k = logits.shape[dim]
    y_hard = one_hot(rd.argmax(y, dim), k).to(y.dtype).movedim(-1, dim)
    return y_hard - y.detach() + y


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """Interleave the channels (dim 1) of `groups` groups: (N, g*c, ...) -> (N, c*g, ...)."""
    n, c = input.shape[0], input.shape[1]
    if c % groups:
        raise FnxValueError(f"Number of channels must be divisible by groups. Got {c} channels and {groups} groups.")
    rest = tuple(input.shape[2:])
    return input.reshape((n, groups, c // groups) + rest).transpose(1, 2).reshape(tuple(input.shape))


native_channel_shuffle = channel_shuffle   # ATen's name for the same op (F.native_channel_shuffle)

