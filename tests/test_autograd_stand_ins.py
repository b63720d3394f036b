"""What a tape node keeps of the values its vjp does not read, and the check that keeps the declarations honest.

A node keeps a NaN stand-in in place of an intermediate its vjp does not declare it reads (`saves_inputs`,
`saves_output`), so that a rule reading an undeclared value shows in its gradient; a leaf that requires grad is
kept as it is (the node holds it anyway, as its parent). The op table's eager gradient checks run on leaves, so
the test here runs every differentiable op of the table on intermediates (a leaf times one), where every value
it did not declare is a stand-in, and compares the gradients with those on the leaves.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fnx
from fnx.autograd.tape import stand_in
from op_db import all_ops

GRAD_OPS = [op for op in all_ops() if op.grad]


def _tensors(args, through_an_op: bool):
    """Float64 tensors of the sample's float arrays; with `through_an_op`, each is an intermediate of its leaf."""
    leaves, inputs = [], []
    for a in args:
        if isinstance(a, np.ndarray) and a.dtype.kind == "f":
            leaf = fnx.tensor(a.astype("float64"), requires_grad=True)
            leaves.append(leaf)
            inputs.append(leaf * 1.0 if through_an_op else leaf)
        else:
            inputs.append(fnx.tensor(a) if isinstance(a, np.ndarray) else a)
    return leaves, inputs


def _first_float(out):
    for o in out if isinstance(out, (tuple, list)) else [out]:
        if isinstance(o, fnx.Tensor) and o.dtype.is_floating_point:
            return o
    return None


def _gradients(info, sample, through_an_op: bool):
    leaves, inputs = _tensors(sample.args, through_an_op)
    out = _first_float(info.op(*inputs, **sample.kwargs))
    if out is None or not out.requires_grad or out.numel() == 0:
        return None
    g = fnx.tensor(np.random.default_rng(3).standard_normal(tuple(out.shape)))
    grads = fnx.autograd.grad(out, leaves, g, allow_unused=True)
    return [None if gr is None else gr.numpy() for gr in grads]


@pytest.mark.parametrize("info", GRAD_OPS, ids=repr)
@settings(max_examples=2)
@given(data=st.data())
def test_a_rule_reads_only_the_values_it_declares(info, data):
    """Each op's gradient on intermediates (its undeclared values replaced by NaN stand-ins) is its gradient on
    leaves: a vjp that read a value its primitive does not save would give NaN here."""
    sample = data.draw(info.samples)
    on_leaves = _gradients(info, sample, through_an_op=False)
    if on_leaves is None:
        return
    on_intermediates = _gradients(info, sample, through_an_op=True)
    for a, b in zip(on_leaves, on_intermediates):
        assert (a is None) == (b is None), info.name
        if a is not None:
            np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12, err_msg=info.name)


def test_a_leaf_input_is_kept_and_an_intermediate_is_a_stand_in():
    """add's vjp reads only its inputs' shapes: a leaf that requires grad stays itself (its node holds it as its
    parent), an intermediate becomes the shared stand-in of its shape and dtype and is freed."""
    x = fnx.tensor([1.0, 2.0], requires_grad=True)
    t = x * 2.0
    y = x + t
    kept, replaced = y.grad_fn.inputs
    assert kept is x and y.grad_fn.parents[0] is x
    assert replaced is not t and replaced is stand_in(t._value, t.device) and np.isnan(replaced.numpy()).all()
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])
