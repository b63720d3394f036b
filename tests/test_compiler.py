"""fnx.compiler (torch.compiler's names): what tracing reports, disable's graph break, reset, the pass-through
decorators and the backend list, with torch 2.13's behaviour as the reference."""
import warnings

import numpy as np
import pytest

import fnx
from fnx import compiler


def _flags() -> tuple:
    return compiler.is_compiling(), compiler.is_dynamo_compiling(), compiler.is_exporting()


def test_flags_false_eagerly_and_under_eager_transforms():
    assert _flags() == (False, False, False)
    seen = []

    def f(x):
        seen.append(_flags())
        return (x * x).sum()

    fnx.grad(f)(fnx.ones(2))
    fnx.vmap(f)(fnx.ones(2, 3))
    assert seen == [(False, False, False)] * 2


def test_flags_while_compile_traces():
    seen = []

    @fnx.compile
    def f(x):
        seen.append(_flags())
        return x * 2

    np.testing.assert_array_equal(f(fnx.ones(2)).numpy(), [2, 2])
    f(fnx.ones(2))   # a cached signature does not run the Python again
    assert seen == [(True, True, False)]
    assert _flags() == (False, False, False)


def test_flags_while_export_traces():
    seen = []

    def f(x):
        seen.append(_flags())
        return x + 1.0

    exported = fnx.export(f, fnx.zeros(3))
    np.testing.assert_array_equal(exported.call(fnx.zeros(3)).numpy(), [1, 1, 1])
    # torch.export: is_compiling and is_exporting True, is_dynamo_compiling False (non-strict export)
    assert seen and set(seen) == {(True, False, True)}
    assert _flags() == (False, False, False)


def test_disable_graph_breaks_compile_and_runs_eagerly():
    calls = []

    @compiler.disable
    def g(x):
        calls.append(compiler.is_compiling())
        return x + 1

    h = fnx.compile(lambda x: g(x) * 2)
    with pytest.warns(UserWarning, match="fnx.compiler.disable"):
        out = h(fnx.zeros(2))
    np.testing.assert_array_equal(out.numpy(), [2, 2])   # torch.compile gives tensor([2.]) for zeros(1)
    assert calls == [False]
    with pytest.raises(fnx.errors.ConcretizationError, match="lambda>, which is wrapped with fnx.compiler.disable "
                                                             r"\(reason: slow\)"):
        fnx.compile(lambda x: compiler.disable(reason="slow")(lambda y: y)(x) * 2, fullgraph=True)(fnx.zeros(1))
    with pytest.raises(fnx.errors.ConcretizationError, match="disable"):
        fnx.compile(lambda x: g(x) * 2, fullgraph=True)(fnx.zeros(1))


def test_disable_is_traced_under_export():
    g = compiler.disable(lambda x: x + 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        exported = fnx.export(lambda x: g(x) * 2.0, fnx.zeros(2))
    np.testing.assert_array_equal(exported.call(fnx.ones(2)).numpy(), [4, 4])


def test_disable_recursive_runs_compiled_callees_eagerly():
    traced = []

    @fnx.compile
    def k(x):
        traced.append(compiler.is_compiling())
        return x + 1

    np.testing.assert_array_equal(compiler.disable(lambda x: k(x))(fnx.zeros(1)).numpy(), [1])
    assert traced == [False]   # k's Python ran eagerly: nothing traced
    np.testing.assert_array_equal(compiler.disable(lambda x: k(x), recursive=False)(fnx.zeros(1)).numpy(), [1])
    assert traced == [False, True]
    model = fnx.compile(fnx.nn.Linear(2, 1))
    x = fnx.ones(3, 2)
    np.testing.assert_allclose(compiler.disable(model)(x).detach().numpy(), model(x).detach().numpy(), rtol=1e-6)


def test_disable_keeps_name_and_refuses_non_callables():
    def g(x):
        """doc"""
        return x

    d = compiler.disable(g)
    assert d.__name__ == "g" and d.__doc__ == "doc" and d.__wrapped__ is g
    for decorator in (compiler.disable, compiler.allow_in_graph, compiler.assume_constant_result):
        with pytest.raises(TypeError, match="expected a callable, got a int"):
            decorator(3)


def test_reset_traces_again():
    traced = []

    @fnx.compile
    def f(x):
        traced.append(1)
        return x - 1

    f(fnx.ones(2))
    f(fnx.ones(2))
    assert len(traced) == 1
    compiler.reset()
    np.testing.assert_array_equal(f(fnx.ones(2)).numpy(), [0, 0])
    assert len(traced) == 2


def test_pass_through_decorators_and_compile():
    def g(x):
        return x.sin()

    assert compiler.allow_in_graph(g) is g
    assert compiler.allow_in_graph([g, g]) == [g, g]   # torch returns a list of each
    assert compiler.assume_constant_result(g) is g
    assert compiler.compile is fnx.compile
    assert compiler.cudagraph_mark_step_begin() is None
    f = compiler.compile(lambda x: compiler.allow_in_graph(g)(x) * 2)
    np.testing.assert_allclose(f(fnx.ones(2)).numpy(), 2 * np.sin([1.0, 1.0]), rtol=1e-6)


def test_list_backends():
    assert compiler.list_backends() == ["c", "cuda", "inductor", "opencl"]
    assert "interpret" in compiler.list_backends(None)
    assert compiler.list_backends(exclude_tags=()) == compiler.list_backends(None)
    for name in compiler.list_backends(None):
        fnx.compile(lambda x: x, backend=name)   # each is a backend fnx.compile accepts
