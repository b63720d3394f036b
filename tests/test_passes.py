"""IR passes (fnx/lowering/passes.py): each pass on hand-built and traced jaxprs, verified after every pass,
and the whole pipeline preserving results over the op table."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fnx
from fnx.core import ShapedArray
from fnx.ir import ClosedJaxpr, Eqn, Jaxpr, Literal, Var, verify_jaxpr
from fnx.lowering import passes
from fnx.lowering.passes import cse, dce, fold_constants, inline_calls, optimize, simplify
from fnx.ops.elementwise import add_p, convert_p, div_p, exp_p, mul_p, neg_p, sub_p
from fnx.ops.shape import broadcast_p, reshape_p, transpose_p
from fnx.transforms.compile import compile
from sample_programs import controls, mlp, vmap_grad

CPU = fnx.device("cpu")


def aval(shape, dtype=fnx.float32) -> ShapedArray:
    return ShapedArray(shape, dtype, CPU)


def lit(value, dtype=fnx.float32) -> Literal:
    t = fnx.tensor(value, dtype=dtype)
    return Literal(t, t.aval)


def closed_of(invars, eqns, outvars, constvars=(), consts=()) -> ClosedJaxpr:
    closed = ClosedJaxpr(Jaxpr(list(constvars), list(invars), list(eqns), list(outvars)), list(consts))
    verify_jaxpr(closed)
    return closed


def names(closed: ClosedJaxpr) -> list[str]:
    return [e.prim.name for e in closed.eqns]


def run(pass_fn, closed: ClosedJaxpr) -> ClosedJaxpr:
    out = pass_fn(closed)
    verify_jaxpr(out)
    verify_jaxpr(closed)  # the input is left intact
    return out


def pipeline(closed: ClosedJaxpr) -> ClosedJaxpr:
    for p in passes.PASSES:
        closed = run(p, closed)
    return closed


def x64(*values):
    return fnx.tensor(np.asarray(values, dtype=np.float64))


# ---------------------------------------------------------------- DCE
def test_dce_removes_dead_equations_and_constants():
    a, b, d, c = Var(aval((3,))), Var(aval((3,))), Var(aval((3,))), Var(aval((3,)))
    closed = closed_of([a], [Eqn(exp_p, [a], {}, [b]), Eqn(neg_p, [a], {}, [d])], [b], [c], [fnx.ones(3)])
    out = run(dce, closed)
    assert names(out) == ["exp"] and out.consts == [] and out.jaxpr.invars == [a]
    assert names(closed) == ["exp", "neg"]


def test_dce_inside_cond_branches_and_keeps_used_multiple_results():
    def f(x):
        def branch(a):
            a.sin()  # dead
            return a * 2.0, a.exp()

        return fnx.cond(x.sum() > 0, branch, lambda a: (a, a), x)[0]

    closed = fnx.make_jaxpr(f)(x64(1, 2))
    out = run(dce, closed)
    cond = [e for e in out.eqns if e.prim.name == "cond"][0]
    assert "sin" not in names(cond.params["branches"][1])
    assert len(cond.outvars) == 2
    np.testing.assert_array_equal(out(x64(1, 2))[0].numpy(), f(x64(1, 2)).numpy())


# ---------------------------------------------------------------- CSE
def test_cse_merges_identical_equations_transitively():
    closed = fnx.make_jaxpr(lambda x: x.exp().sin() + x.exp().sin())(fnx.ones(3))
    out = run(cse, closed)
    assert names(out) == ["exp", "sin", "add"]
    add = out.eqns[-1]
    assert add.inputs[0] is add.inputs[1]


def test_cse_tells_params_and_literals_apart():
    closed = fnx.make_jaxpr(lambda x: x.sum(0) + x.sum(1))(fnx.ones(3, 3))
    assert names(run(cse, closed)) == ["sum", "sum", "add"]
    a = Var(aval((3,)))
    outs = [Var(aval((3,))) for _ in range(4)]
    eqns = [Eqn(mul_p, [a, lit(0.0)], {}, [outs[0]]), Eqn(mul_p, [a, lit(-0.0)], {}, [outs[1]]),
            Eqn(mul_p, [a, lit(2.0)], {}, [outs[2]]), Eqn(mul_p, [a, lit(2.0)], {}, [outs[3]])]
    out = run(cse, closed_of([a], eqns, outs))
    assert len(out.eqns) == 3
    assert out.jaxpr.outvars[2] is out.jaxpr.outvars[3] and out.jaxpr.outvars[0] is not out.jaxpr.outvars[1]


# ---------------------------------------------------------------- constant folding
def test_fold_scalar_literals_into_a_literal():
    a, b, c = Var(aval(())), Var(aval(())), Var(aval(()))
    closed = closed_of([a], [Eqn(mul_p, [lit(2.0), lit(3.0)], {}, [b]), Eqn(add_p, [a, b], {}, [c])], [c])
    out = run(fold_constants, closed)
    assert names(out) == ["add"]
    folded = out.eqns[0].inputs[1]
    assert isinstance(folded, Literal) and folded.val.item() == 6.0


def test_fold_computations_on_captured_constants():
    w = fnx.tensor([0.5, 2.0])
    closed = fnx.make_jaxpr(lambda x: x + w.exp())(fnx.ones(2))
    out = run(fold_constants, closed)
    assert names(dce(out)) == ["add"]
    np.testing.assert_allclose(out(fnx.zeros(2))[0].numpy(), np.exp([0.5, 2.0]), rtol=1e-6)


def test_fold_uniform_results_into_a_broadcast_literal():
    closed = fnx.make_jaxpr(lambda x: x + fnx.ones(3) * 2.0)(fnx.ones(3))
    out = dce(run(fold_constants, closed))
    assert names(out) == ["broadcast_to", "add"] and out.consts == []
    assert out.eqns[0].inputs[0].val.item() == 2.0
    np.testing.assert_array_equal(out(fnx.zeros(3))[0].numpy(), [2.0, 2.0, 2.0])


def test_fold_keeps_signed_zeros_apart():
    """[0.0, -0.0] compare equal elementwise but are not one splat: x + them differs in sign at x = -0.0."""
    c = fnx.tensor([1.0, -1.0])
    closed = fnx.make_jaxpr(lambda x: x + c * 0.0)(fnx.ones(2))
    out = run(fold_constants, closed)
    assert "broadcast_to" not in names(out)
    got = out(fnx.tensor([-0.0, -0.0]))[0].numpy()
    np.testing.assert_array_equal(np.signbit(got), [False, True])


def test_fold_leaves_large_results_and_grad_constants():
    big = fnx.arange(passes.FOLD_LIMIT + 1, dtype=fnx.float32)
    assert "exp" in names(run(fold_constants, fnx.make_jaxpr(lambda x: x + big.exp())(big)))
    w = fnx.tensor([1.0, 2.0], requires_grad=True)
    assert "exp" in names(run(fold_constants, fnx.make_jaxpr(lambda x: x * w.exp())(fnx.ones(2))))


# ---------------------------------------------------------------- algebraic simplification
def test_simplify_drops_arithmetic_identities():
    closed = fnx.make_jaxpr(lambda x: ((x * 1.0) / 1.0 - 0.0 + (-0.0)).neg().neg())(fnx.ones(3))
    out = run(simplify, closed)
    assert out.jaxpr.outvars[0] is out.jaxpr.invars[0]
    assert names(run(dce, out)) == []
    a, b = Var(aval((3,))), Var(aval((3,)))
    lhs = run(simplify, closed_of([a], [Eqn(mul_p, [lit(1.0), a], {}, [b])], [b]))
    assert lhs.jaxpr.outvars[0] is a


def test_simplify_keeps_signed_zero_additions_of_floats():
    closed = fnx.make_jaxpr(lambda x: x + 0.0)(fnx.ones(3))
    assert names(run(simplify, closed)) == ["add"]
    closed = fnx.make_jaxpr(lambda x: x - (-0.0))(fnx.ones(3))
    assert names(run(simplify, closed)) == ["sub"]
    ints = fnx.make_jaxpr(lambda x: x + 0)(fnx.tensor([1, 2]))
    assert names(run(simplify, ints)) == []


def test_simplify_no_op_conversions_and_layout_changes():
    a = Var(aval((2, 3)))
    outs = [Var(aval((2, 3))) for _ in range(4)]
    eqns = [Eqn(convert_p, [a], {"dtype": fnx.float32}, [outs[0]]),
            Eqn(reshape_p, [outs[0]], {"shape": (2, 3)}, [outs[1]]),
            Eqn(transpose_p, [outs[1]], {"perm": (0, 1)}, [outs[2]]),
            Eqn(broadcast_p, [outs[2]], {"shape": (2, 3)}, [outs[3]])]
    out = run(simplify, closed_of([a], eqns, [outs[3]]))
    assert out.jaxpr.outvars[0] is a and names(dce(out)) == []
    sq = Var(aval((3, 3)))
    t = Var(aval((3, 3)))
    kept = run(simplify, closed_of([sq], [Eqn(transpose_p, [sq], {"perm": (1, 0)}, [t])], [t]))
    assert names(kept) == ["transpose"]


def test_simplify_cancels_transposes_and_turns_a_transposed_product_around():
    def weight_grad(x, g):   # the weight gradient of x @ W.T, as the vjp of matmul writes it
        return fnx.matmul(x.T, g).T * 2, fnx.permute(fnx.permute(x, (1, 0)), (1, 0)) + 1
    x, g = fnx.randn(4, 3), fnx.randn(4, 5)
    closed = fnx.make_jaxpr(weight_grad)(x, g)
    out = run(dce, run(simplify, closed))
    assert names(out) == ["transpose", "matmul", "mul", "add"]
    (t,), (mm,) = [[e for e in out.eqns if e.prim.name == n] for n in ("transpose", "matmul")]
    assert t.inputs[0] is out.jaxpr.invars[1] and mm.inputs == [t.outvars[0], out.jaxpr.invars[0]]
    for got, want in zip(compile(weight_grad)(x, g), weight_grad(x, g)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


def test_simplify_keeps_a_transposed_product_that_is_used_twice():
    def f(a, b):
        p = fnx.matmul(a, b)
        return p.T, p
    closed = fnx.make_jaxpr(f)(fnx.randn(2, 3), fnx.randn(3, 4))
    assert names(run(dce, run(simplify, closed))) == ["matmul", "transpose"]


def test_simplify_sees_through_broadcast_literals_only_when_the_type_is_unchanged():
    a = Var(aval((3,)))
    one3, one23 = Var(aval((3,))), Var(aval((2, 3)))
    same, wider = Var(aval((3,))), Var(aval((2, 3)))
    eqns = [Eqn(broadcast_p, [lit(1.0)], {"shape": (3,)}, [one3]),
            Eqn(broadcast_p, [lit(1.0)], {"shape": (2, 3)}, [one23]),
            Eqn(mul_p, [a, one3], {}, [same]), Eqn(mul_p, [a, one23], {}, [wider])]
    out = run(simplify, closed_of([a], eqns, [same, wider]))
    assert out.jaxpr.outvars[0] is a
    assert names(out) == ["broadcast_to", "broadcast_to", "mul"]


def test_simplify_division_and_subtraction_only_on_the_right():
    a, b, c = Var(aval((3,))), Var(aval((3,))), Var(aval((3,)))
    eqns = [Eqn(div_p, [lit(1.0), a], {}, [b]), Eqn(sub_p, [lit(0.0), b], {}, [c])]
    assert names(run(simplify, closed_of([a], eqns, [c]))) == ["div", "sub"]


# ---------------------------------------------------------------- inlining
def test_inline_nested_compiled_calls_with_fresh_variables():
    w = fnx.tensor([1.0, 2.0, 3.0])
    inner = compile(lambda x: (x * w).exp(), backend="interpret")
    closed = fnx.make_jaxpr(lambda x: inner(x) + inner(x * 3.0))(fnx.ones(3))
    assert names(closed).count("compiled_call") == 2
    out = run(inline_calls, closed)
    assert "compiled_call" not in names(out)
    assert names(out).count("exp") == 2 and len(out.consts) == 2
    x = fnx.tensor([0.1, 0.2, 0.3])
    np.testing.assert_allclose(out(x)[0].numpy(), closed(x)[0].numpy(), rtol=1e-6)


def test_optimize_reaches_into_cond_branches():
    f = lambda x: fnx.cond(x.sum() > 0, lambda a: a * 1.0, lambda a: -a, x)  # noqa: E731
    out = pipeline(fnx.make_jaxpr(f)(x64(1, 2)))
    cond = [e for e in out.eqns if e.prim.name == "cond"][0]
    assert names(cond.params["branches"][1]) == []
    for x in (x64(1, 2), x64(-1, -2)):
        np.testing.assert_array_equal(out(x)[0].numpy(), f(x).numpy())


# ---------------------------------------------------------------- the pipeline on traced functions
TRACED = {"mlp": mlp, "controls": controls, "grad_mlp": fnx.grad(mlp), "grad_controls": fnx.grad(controls),
          "vmap_grad": vmap_grad,
          "jacfwd": fnx.jacfwd(lambda x: fnx.sin(x) * x.sum()),
          "hessian": fnx.hessian(lambda x: (x.exp() * x).sum()),
          "while": lambda x: fnx.while_loop(lambda v: v.sum() < 20.0, lambda v: v * 2.0, x)}


@pytest.mark.parametrize("name", list(TRACED))
def test_pipeline_preserves_traced_functions(name):
    fn = TRACED[name]
    x = x64(0.5, -1.0, 2.0)
    closed = fnx.make_jaxpr(fn)(x)
    out = pipeline(closed)
    assert len(out.eqns) <= len(closed.eqns)
    for arg in (x, x64(0.25, 1.5, -0.5)):
        np.testing.assert_array_equal(out(arg)[0].numpy(), fn(arg).numpy())


def test_optimize_shrinks_a_gradient():
    closed = fnx.make_jaxpr(fnx.grad(lambda x: (fnx.tanh(x * 2.0) * 1.0).sum()))(fnx.ones(3))
    out = optimize(closed)
    verify_jaxpr(out)
    assert len(out.eqns) < len(closed.eqns)
    assert "sum" not in names(out)  # the forward's reduction is dead in the gradient


# ---------------------------------------------------------------- the op table
from op_db import as_tensor_function, assert_like_eager, stageable_ops  # noqa: E402

_STAGEABLE = stageable_ops()


@pytest.mark.parametrize("info", _STAGEABLE, ids=repr)
@settings(max_examples=2)
@given(data=st.data())
def test_op_table_optimised_matches_eager(info, data):
    """Every op, staged then optimised with the IR verified after each pass, evaluates to the eager result."""
    sample = data.draw(info.samples)
    op, tensors = as_tensor_function(info, sample)
    if not tensors:
        return
    closed = pipeline(fnx.make_jaxpr(op)(*tensors))
    expected = op(*tensors)
    expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    got = closed(*tensors)
    assert len(got) == len(expected)
    assert_like_eager(info, got, expected)
