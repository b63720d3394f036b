"""fnx.export: programs traced with symbolic dimensions, run, saved, loaded (never running code) and transformed."""
import numpy as np
import pytest

import fnx
from fnx.export.symbolic import Dim


def assert_close(a, b, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(np.asarray(a.numpy(force=True)), np.asarray(b.numpy(force=True)), rtol=rtol, atol=atol)


# ---------------------------------------------------------------- symbolic dimensions
def test_dim_polynomials_compute_print_parse_and_write_c():
    b, s = Dim.symbol("batch"), Dim.symbol("seq")
    d = b * s * 64 + s - 1
    assert str(d) == "batch*seq*64 + seq - 1" and Dim.parse(str(d)) == d
    assert d.evaluate({"batch": 2, "seq": 5}) == 644
    assert d.c_expr() == "(batch*seq*64 + seq - 1)"
    assert (s * 2) // 2 == s and b - b + 3 == 3 and isinstance(b - b, int)
    assert str(s * s * b * 4 - 2 * b) == "batch*seq*seq*4 - batch*2"
    with pytest.raises(fnx.errors.FnxValueError, match="not exact"):
        (s + 1) // 2
    for bad in ["1 +", "seq**2", "2seq", "a-(b)"]:
        with pytest.raises(fnx.errors.FnxValueError):
            Dim.parse(bad)


# ---------------------------------------------------------------- export and call
def mlp(params, x):
    h = fnx.tanh(x @ params["w1"] + params["b1"])
    return fnx.nn.functional.log_softmax(h @ params["w2"], dim=-1)


def _mlp_params(dtype=fnx.float32):
    g = np.random.default_rng(0)
    return {"w1": fnx.tensor(g.normal(size=(4, 8)), dtype=dtype), "b1": fnx.tensor(g.normal(size=8), dtype=dtype),
            "w2": fnx.tensor(g.normal(size=(8, 3)), dtype=dtype)}


def test_export_call_matches_the_function_at_new_batch_sizes():
    params = _mlp_params()
    x = fnx.randn(5, 4)
    ex = fnx.export(mlp, params, x, dynamic_shapes={"x": {0: "batch"}})
    assert ex.symbols == ("batch",)
    assert str(ex.in_avals[-1]) == "f32[batch,4]" and str(ex.out_avals[0]) == "f32[batch,3]"
    assert "tanh" in ex.as_text() and "batch" in ex.as_text()
    for n in (5, 1, 7):
        x = fnx.randn(n, 4)
        assert_close(ex.call(params, x), mlp(params, x))


def test_export_is_a_callable_module():
    import fnx.export as module

    assert module is fnx.export and callable(fnx.export) and callable(fnx.export.load)


# ---------------------------------------------------------------- the op table through export, save and load
from hypothesis import given, settings, strategies as st  # noqa: E402
from op_db import as_tensor_function, stageable_ops  # noqa: E402

from fnx.export.specialize import specialize  # noqa: E402
from fnx.ir import eval_jaxpr  # noqa: E402

_OPS = stageable_ops()


@pytest.fixture(scope="module")
def archive_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("archives")
# compiled calls generate code per op: a cross-section of the families
_COMPILED = {"tanh", "where", "sum", "matmul", "cat", "gather", "sort"}


@pytest.mark.parametrize("info", _OPS, ids=repr)
@settings(max_examples=1)
@given(data=st.data())
def test_op_table_export_save_load_equals_the_op(info, data, archive_dir):
    sample = data.draw(info.samples)
    for dtype in ("float32", "float64"):
        op, tensors = as_tensor_function(info, sample)
        if not tensors:
            return
        tensors = [t.to(dtype) if t.dtype.is_floating_point else t for t in tensors]
        want = fnx.tree.tree_leaves(op(*tensors))
        loaded = fnx.export.load(_saved(fnx.export(op, *tensors), archive_dir))
        concrete = specialize(loaded.jaxpr, {}, fnx.device("cpu"))
        for got, w in zip(eval_jaxpr(concrete.jaxpr, concrete.consts, *tensors), want):
            np.testing.assert_array_equal(got.numpy(), w.numpy())
        if info.name in _COMPILED:
            for got, w in zip(fnx.tree.tree_leaves(loaded.call(*tensors)), want):
                np.testing.assert_allclose(got.numpy(), w.numpy(), rtol=1e-4, atol=1e-5)


def _saved(exported, tmp_path, name="program.fnxp") -> str:
    path = str(tmp_path / name)
    exported.save(path)
    return path
