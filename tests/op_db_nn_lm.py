"""Op table: a language model's output and input ops (softmax, log_softmax, nll_loss, cross_entropy, embedding),
whose eager forms take fast paths (a log_softmax primitive, scatter-add over flat positions) that the generic
checks compare with numpy, finite differences and their composed forms under every transform."""
import numpy as np
from hypothesis import strategies as st

import fnx.nn.functional as F
from op_db import OpInfo, Sample, floats, shapes


def np_log_softmax(x, dim):
    z = x - x.max(dim, keepdims=True)
    return z - np.log(np.exp(z).sum(dim, keepdims=True))


@st.composite
def dim_sample(draw):
    x = draw(floats(draw(shapes(min_dims=1, max_dims=3))))
    return Sample((x, draw(st.integers(-x.ndim, x.ndim - 1))))


@st.composite
def class_sample(draw, ignore: bool):
    """Logits (N, C) or (N, C, d) and class indices, some equal to ignore_index -100 when `ignore`."""
    n, c = draw(st.integers(1, 4)), draw(st.integers(1, 5))
    extra = draw(st.sampled_from([(), (2,)]))
    x = draw(floats((n, c) + extra))
    target = np.asarray(draw(st.lists(st.integers(0, c - 1), min_size=n * (2 if extra else 1),
                                      max_size=n * (2 if extra else 1)))).reshape((n,) + extra)
    if ignore:
        target = np.where(np.arange(target.size).reshape(target.shape) % 3 == 1, -100, target)
    return Sample((x, target))


def np_nll(logp, target):
    """Mean over counted targets of -logp[target] (classes on dim 1, -100 ignored)."""
    counted = target != -100
    picked = np.take_along_axis(logp, np.expand_dims(np.where(counted, target, 0), 1), 1).squeeze(1)
    return -(picked * counted).sum() / counted.sum()


@st.composite
def embedding_sample(draw):
    v, d = draw(st.integers(1, 5)), draw(st.integers(1, 3))
    idx_shape = draw(shapes(min_dims=1, max_dims=2))
    idx = np.asarray(draw(st.lists(st.integers(0, v - 1), min_size=int(np.prod(idx_shape)),
                                   max_size=int(np.prod(idx_shape))))).reshape(idx_shape)
    return Sample((idx, draw(floats((v, d)))))


OPS = [
    OpInfo("nn.functional.log_softmax", lambda x, dim: F.log_softmax(x, dim), np_log_softmax, dim_sample(),
           double_grad=True, extra={"numerics": "reductions"}),
    OpInfo("nn.functional.softmax", lambda x, dim: F.softmax(x, dim),
           lambda x, dim: np.exp(np_log_softmax(x, dim)), dim_sample(), double_grad=True,
           extra={"numerics": "reductions"}),
    OpInfo("nn.functional.nll_loss", lambda x, t: F.nll_loss(F.log_softmax(x, 1), t),
           lambda x, t: np_nll(np_log_softmax(x, 1), t), class_sample(ignore=True),
           extra={"numerics": "reductions"}),
    OpInfo("nn.functional.cross_entropy", F.cross_entropy, lambda x, t: np_nll(np_log_softmax(x, 1), t),
           class_sample(ignore=False), double_grad=True, extra={"numerics": "reductions"}),
    OpInfo("nn.functional.embedding", F.embedding, lambda idx, w: w[idx], embedding_sample()),
]
