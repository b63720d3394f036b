"""vmap over the whole op table: batched results equal a Python loop over the examples.

For each op, hypothesis draws a sample; a batch of B examples is built from it (float arrays scaled by
1, 1.05, 1.1, which keeps every sample's domain and ordering; integer and bool arrays rolled along their
first axis, which keeps indices in range and distinct), stacked along a drawn axis (0, 1 or -1) or left
unbatched (in_axes=None). `fnx.vmap(op)` must equal the loop's results stacked with numpy (float64).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fnx
from op_db import all_ops

B = 3
OPS = all_ops()

# Ops whose output shape depends on the values (eager only, as in JAX): vmap cannot batch them.
DYNAMIC_SHAPE = {"nonzero", "nonzero_tuple", "masked_select", "getitem_mask", "getitem_mask_inner", "unique",
                 "unique_dim", "unique_consecutive"}
# In-place writes (x[i] = v) raise a clear error under every transform; they are tested eagerly elsewhere.
IN_PLACE = {"setitem_basic", "setitem_advanced", "setitem_mask"}
# Arguments whose values decide the output shape: they may be passed unbatched only.
VALUE_SHAPED_ARGS = {"repeat_interleave_tensor": {1}}
VMAP_OPS = [op for op in OPS if op.name not in DYNAMIC_SHAPE | IN_PLACE]
GRAD_OPS = [op for op in VMAP_OPS if op.grad]


def _example(a: np.ndarray, k: int) -> np.ndarray:
    """Example k of the batch built from sample array `a`."""
    if a.dtype.kind == "f":
        return a * (1.0 + 0.05 * k)
    return np.roll(a, k, axis=0) if a.ndim else a


def _draw_batch(data, sample, info):
    """(per-example arg lists, batched args, in_axes): array args stacked along drawn axes or left unbatched."""
    fixed = VALUE_SHAPED_ARGS.get(info.name, set())
    arrays = [i for i, a in enumerate(sample.args) if isinstance(a, np.ndarray) and i not in fixed]
    if not arrays:
        return None
    mapped = set(data.draw(st.lists(st.sampled_from(arrays), min_size=1, unique=True), label="mapped args"))
    examples = [list(sample.args) for _ in range(B)]
    batched, in_axes = list(sample.args), []
    for i, a in enumerate(sample.args):
        if i not in mapped:
            in_axes.append(None)
            if isinstance(a, np.ndarray):
                batched[i] = fnx.tensor(a)
            continue
        axis = data.draw(st.sampled_from([0, 1, -1] if a.ndim else [0, -1]), label=f"in_axes[{i}]")
        per = [_example(a, k) for k in range(B)]
        for k in range(B):
            examples[k][i] = fnx.tensor(per[k])
        batched[i] = fnx.tensor(np.stack(per, axis=axis))
        in_axes.append(axis)
    for k in range(B):
        examples[k] = [fnx.tensor(a) if isinstance(a, np.ndarray) else a for a in examples[k]]
    return examples, batched, tuple(in_axes)


def _outputs(out) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _compare(name: str, got: list, per_example: list) -> None:
    assert len(got) == len(per_example[0]), f"{name}: vmap gave {len(got)} outputs, the op gives {len(per_example[0])}"
    for j, g in enumerate(got):
        expected = np.stack([np.asarray(outs[j].detach().numpy()) for outs in per_example])
        g = g.detach().numpy()
        assert g.shape == expected.shape, f"{name} output {j}: vmap shape {g.shape}, loop shape {expected.shape}"
        assert g.dtype == expected.dtype, f"{name} output {j}: vmap dtype {g.dtype}, loop dtype {expected.dtype}"
        if expected.dtype.kind in "biu":
            np.testing.assert_array_equal(g, expected, err_msg=f"{name} output {j}")
        else:
            np.testing.assert_allclose(g, expected, rtol=1e-10, atol=1e-12, err_msg=f"{name} output {j}")


@pytest.mark.parametrize("info", VMAP_OPS, ids=repr)
@settings(max_examples=5)
@given(data=st.data())
def test_vmap_matches_loop(info, data):
    sample = data.draw(info.samples, label="sample")
    drawn = _draw_batch(data, sample, info)
    if drawn is None:
        return
    examples, batched, in_axes = drawn

    def op(*args):
        return info.op(*args, **sample.kwargs)

    per_example = [_outputs(op(*ex)) for ex in examples]
    got = _outputs(fnx.vmap(op, in_axes=in_axes)(*batched))
    _compare(info.name, got, per_example)


@pytest.mark.parametrize("info", GRAD_OPS, ids=repr)
@settings(max_examples=5)
@given(data=st.data())
def test_vmap_of_grad_matches_loop(info, data):
    """Per-example gradients: vmap(grad(<op(x), w>)) equals grad of each example."""
    sample = data.draw(info.samples, label="sample")
    drawn = _draw_batch(data, sample, info)
    if drawn is None:
        return
    examples, batched, in_axes = drawn
    floats = tuple(i for i, a in enumerate(sample.args) if isinstance(a, np.ndarray) and a.dtype.kind == "f")
    if not floats:
        return
    out0 = next(o for o in _outputs(info.op(*examples[0], **sample.kwargs)) if o.dtype.is_floating_point)
    w = fnx.tensor(np.random.default_rng(0).standard_normal(tuple(out0.shape)))

    def loss(*args):
        out = next(o for o in _outputs(info.op(*args, **sample.kwargs)) if o.dtype.is_floating_point)
        return (out * w).sum()

    per_example = [list(fnx.grad(loss, argnums=floats)(*ex)) for ex in examples]
    got = list(fnx.vmap(fnx.grad(loss, argnums=floats), in_axes=in_axes)(*batched))
    _compare(info.name, got, per_example)
