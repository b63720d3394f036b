"""The IR: make_jaxpr's printed form, verify_jaxpr, eval_jaxpr and static arguments."""
from __future__ import annotations

import numpy as np
import pytest

import fnx
from fnx.core import ShapedArray
from fnx.ir import ClosedJaxpr, Eqn, Jaxpr, Var, eval_jaxpr, verify_jaxpr
from sample_programs import controls, mlp, vmap_grad


def f_small(x, y):
    z = fnx.exp(x) * 2.0
    return z + y.sum(), x @ x


EXPECTED_SMALL = """\
{ lambda ; a:f32[3] b:f32[2,3]. let
    c:f32[3] = exp a
    d:f32[3] = mul c 2.0:f32[]
    e:f32[] = sum[axes=(0, 1), keepdims=False] b
    f:f32[3] = add d e
    g:f32[] = matmul a a
  in (f, g) }"""

EXPECTED_COND = """\
{ lambda ; a:f64[3]. let
    b:f64[] = sum[axes=(0,), keepdims=False] a
    c:bool[] = gt b 0.0:f64[]
    d:f64[3] = cond[
      branches=(
        { lambda ; e:f64[3]. let
            f:f64[3] = neg e
          in (f,) }
        { lambda ; g:f64[3]. let
            h:f64[3] = mul g 2.0:f64[]
          in (h,) }
      )
    ] c a
  in (d,) }"""


def x64(*values):
    return fnx.tensor(np.asarray(values, dtype=np.float64))


def test_printed_text_is_jax_style():
    jaxpr = fnx.make_jaxpr(f_small)(fnx.ones(3), fnx.ones(2, 3))
    assert str(jaxpr) == EXPECTED_SMALL
    assert repr(jaxpr) == EXPECTED_SMALL
    single = fnx.make_jaxpr(lambda x: fnx.sin(fnx.exp(x)))(fnx.ones(3))
    assert str(single) == "{ lambda ; a:f32[3]. let\n    b:f32[3] = exp a\n    c:f32[3] = sin b\n  in (c,) }"


def test_nested_jaxprs_print_indented_with_shared_names():
    jaxpr = fnx.make_jaxpr(lambda x: fnx.cond(x.sum() > 0, lambda a: a * 2.0, lambda a: -a, x))(x64(1, 2, 3))
    assert str(jaxpr) == EXPECTED_COND


def test_captured_tensors_become_constvars():
    w = fnx.tensor([1.0, 2.0])
    jaxpr = fnx.make_jaxpr(lambda x: x[1:] * w)(fnx.ones(3))
    text = str(jaxpr)
    assert text.startswith("{ lambda a:f32[2]; b:f32[3]. let")
    assert len(jaxpr.consts) == 1 and jaxpr.consts[0] is w
    np.testing.assert_allclose(jaxpr(fnx.tensor([5.0, 6.0, 7.0]))[0].numpy(), [6.0, 14.0])
    verify_jaxpr(jaxpr)


def test_avals_and_multiple_outputs():
    jaxpr = fnx.make_jaxpr(lambda d: {"s": d["a"].sum(), "m": d["b"].mean(0)})({"a": fnx.ones(2), "b": fnx.ones(4, 3)})
    assert jaxpr.in_avals == [ShapedArray((2,), fnx.float32, fnx.device("cpu")),
                              ShapedArray((4, 3), fnx.float32, fnx.device("cpu"))]
    assert [a.shape for a in jaxpr.out_avals] == [(3,), ()]  # leaves in sorted-key order: m, s


def _softmax(r):
    e = fnx.exp(r - r.amax())
    return e / e.sum()


def _functions():
    x = x64(0.5, -1.0, 2.0)

    return x, [("exp", lambda x: fnx.exp(x) * 2.0), ("mlp", mlp), ("index", lambda x: (x[1:] * x[fnx.tensor([0, 2])])),
               ("controls", controls), ("grad", fnx.grad(mlp)), ("grad_controls", fnx.grad(controls)),
               ("vmap", lambda x: fnx.vmap(_softmax)(x.reshape(3, 1) * x)),
               ("vmap_grad", vmap_grad),
               ("jacfwd", fnx.jacfwd(lambda x: fnx.sin(x) * x.sum())),
               ("while", lambda x: fnx.while_loop(lambda v: v.sum() < 20.0, lambda v: v * 2.0, x))]


@pytest.mark.parametrize("name", [n for n, _ in _functions()[1]])
def test_traced_jaxprs_verify_and_evaluate_like_the_function(name):
    x, fns = _functions()
    fn = dict(fns)[name]
    jaxpr = fnx.make_jaxpr(fn)(x)
    verify_jaxpr(jaxpr)
    verify_jaxpr(jaxpr.jaxpr)
    expected = fn(x)
    got = jaxpr(x)
    assert len(got) == 1
    np.testing.assert_allclose(got[0].numpy(), expected.numpy(), rtol=1e-12)
    x2 = x64(0.25, 1.5, -0.5)
    np.testing.assert_allclose(eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, x2)[0].numpy(), fn(x2).numpy(), rtol=1e-12)


def _corrupt_cases():
    def fresh():
        return fnx.make_jaxpr(lambda x: fnx.sin(fnx.exp(x)) * 2.0)(fnx.ones(3)).jaxpr

    j = fresh()
    j.eqns.reverse()  # uses before definitions
    yield "undefined variable", j
    j = fresh()
    j.eqns[0].outvars[0].aval = ShapedArray((4,), fnx.float32, fnx.device("cpu"))
    yield "abstract rule gives", j
    j = fresh()
    j.eqns[1].outvars[0] = j.eqns[0].outvars[0]
    yield "bound twice", j
    j = fresh()
    j.outvars[0] = Var(ShapedArray((3,), fnx.float32, fnx.device("cpu")))
    yield "undefined variable", j
    j = fresh()
    j.eqns[0].inputs.append(j.invars[0])
    yield "abstract rule rejects", j
    outer = fnx.make_jaxpr(lambda x: fnx.cond(x.sum() > 0, lambda a: a * 2.0, lambda a: -a, x))(fnx.ones(3))
    branch = outer.jaxpr.eqns[-1].params["branches"][1].jaxpr
    branch.eqns[0].outvars[0].aval = ShapedArray((3,), fnx.float64, fnx.device("cpu"))
    yield "abstract rule gives", outer
    closed = fnx.make_jaxpr(lambda x: x * fnx.tensor([1.0, 2.0, 3.0]))(fnx.ones(3))
    yield "constants", ClosedJaxpr(closed.jaxpr, [])


@pytest.mark.parametrize("message, jaxpr", list(_corrupt_cases()), ids=lambda v: v if isinstance(v, str) else "")
def test_verify_catches_corrupted_jaxprs(message, jaxpr):
    with pytest.raises(RuntimeError, match=message):
        verify_jaxpr(jaxpr)


def test_handwritten_jaxpr_evaluates():
    from fnx.ops.elementwise import exp

    a = Var(ShapedArray((2,), fnx.float32, fnx.device("cpu")))
    b = Var(a.aval)
    x = fnx.tensor([0.0, 1.0])
    prim = fnx.make_jaxpr(exp)(x).eqns[0].prim
    j = Jaxpr([], [a], [Eqn(prim, [a], {}, [b])], [b])
    verify_jaxpr(j)
    np.testing.assert_allclose(eval_jaxpr(j, [], x)[0].numpy(), np.exp([0.0, 1.0]), rtol=1e-6)
    with pytest.raises(RuntimeError, match="expected 1 arguments"):
        eval_jaxpr(j, [])


def test_static_argnums():
    def f(x, n, scale):
        for _ in range(n):  # Python control flow on a static argument
            x = x * scale
        return x

    jaxpr = fnx.make_jaxpr(f, static_argnums=(1, 2))(fnx.ones(2), 3, 0.5)
    assert [e.prim.name for e in jaxpr.eqns] == ["mul"] * 3
    assert len(jaxpr.in_avals) == 1
    np.testing.assert_allclose(jaxpr(fnx.tensor([8.0, 16.0]))[0].numpy(), [1.0, 2.0])
    assert len(fnx.make_jaxpr(f, static_argnums=1)(fnx.ones(2), 1, fnx.ones(2)).in_avals) == 2
    with pytest.raises(TypeError, match="static_argnums"):
        fnx.make_jaxpr(f)(fnx.ones(2), 3, 0.5)


def test_data_dependent_python_branch_raises_clearly():
    def f(x):
        return x if x.sum() > 0 else -x

    with pytest.raises(TypeError, match="fnx.where.*fnx.cond.*static_argnums"):
        fnx.make_jaxpr(f)(fnx.ones(2))


def test_staging_records_ops_on_constants():
    jaxpr = fnx.make_jaxpr(lambda x: x + fnx.ones(3).exp())(fnx.ones(3))
    assert "exp" in [e.prim.name for e in jaxpr.eqns]


# ---------------------------------------------------------------- the op table, staged
from hypothesis import given, settings, strategies as st  # noqa: E402

from op_db import as_tensor_function, assert_like_eager, stageable_ops  # noqa: E402

_STAGEABLE = stageable_ops()


@pytest.mark.parametrize("info", _STAGEABLE, ids=repr)
@settings(max_examples=3)
@given(data=st.data())
def test_op_table_stages_verifies_and_evaluates_like_eager(info, data):
    """make_jaxpr of every op: the jaxpr verifies (abstract rules agree with themselves) and evaluates to
    the eager result with the same shapes and dtypes (abstract rules agree with the impls)."""
    sample = data.draw(info.samples)
    op, tensors = as_tensor_function(info, sample)
    if not tensors:
        return
    jaxpr = fnx.make_jaxpr(op)(*tensors)
    verify_jaxpr(jaxpr)
    expected = op(*tensors)
    expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    got = jaxpr(*tensors)
    assert len(got) == len(expected)
    assert_like_eager(info, got, expected)
