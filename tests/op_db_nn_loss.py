"""Op table: loss functions of fnx.nn.functional with loop-by-loop numpy references."""
import numpy as np
from hypothesis import strategies as st

import fnx.nn.functional as F
from op_db import OpInfo, Sample


def ref_multilabel_margin_loss(x, target, reduction="mean"):
    """Per sample: sum over listed targets j (up to the first -1) and unlisted classes i of max(0, 1 - x[j] + x[i]),
    over C."""
    rows, tgt = x.reshape(-1, x.shape[-1] if x.ndim else 1), target.reshape(-1, x.shape[-1] if x.ndim else 1)
    losses = []
    for row, t in zip(rows, tgt):
        listed = list(t[:list(t).index(-1)] if -1 in t else t)
        others = [i for i in range(row.size) if i not in listed]
        losses.append(sum(max(0.0, 1.0 - row[j] + row[i]) for j in listed for i in others) / row.size)
    loss = np.asarray(losses).reshape(x.shape[:-1] if x.ndim else ())
    return loss if reduction == "none" else loss.sum() if reduction == "sum" else loss.mean()


@st.composite
def multilabel_sample(draw):
    """Scores spaced 0.37 apart (no hinge sits at its kink) and -1-terminated target lists, (C,) or (N, C)."""
    c = draw(st.integers(1, 5))
    shape = draw(st.sampled_from([(c,), (draw(st.integers(1, 3)), c)]))
    x = np.asarray(draw(st.permutations(range(int(np.prod(shape))))), dtype=np.float64).reshape(shape) * 0.37
    target = np.asarray(draw(st.lists(st.integers(-1, c - 1), min_size=x.size, max_size=x.size))).reshape(shape)
    return Sample((x, target), {"reduction": draw(st.sampled_from(["none", "mean", "sum"]))})


OPS = [
    OpInfo("multilabel_margin_loss", F.multilabel_margin_loss, ref_multilabel_margin_loss, multilabel_sample(),
           extra={"numerics": "reductions"}),
]
