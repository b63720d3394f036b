"""fnx.export: programs traced with symbolic dimensions, run, saved, loaded (never running code) and transformed."""
import numpy as np
import pytest

import fnx
from hypothesis import given, settings, strategies as st

from fnx.export.symbolic import Dim, evaluate


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


_TERM = st.tuples(st.lists(st.sampled_from(["batch", "seq"]), max_size=4), st.integers(-50, 50))


@settings(max_examples=30)
@given(terms=st.lists(_TERM, max_size=5))
def test_dim_text_round_trips_and_evaluates_like_the_terms(terms):
    poly = Dim.make({})
    for names, c in terms:
        poly = poly + Dim.make({tuple(names): c})
    env = {"batch": 3, "seq": 7}
    assert evaluate(poly, env) == sum(c * np.prod([env[n] for n in names], dtype=np.int64) for names, c in terms)
    if isinstance(poly, Dim):
        assert Dim.parse(str(poly)) == poly
        assert eval(poly.c_expr(), {}, env) == poly.evaluate(env)   # C's + - * on these ints is Python's


@settings(max_examples=30)
@given(coeffs=st.lists(st.integers(-20, 20), min_size=9, max_size=9),
       examples=st.tuples(st.integers(1, 40), st.integers(1, 40)))
def test_fitting_recovers_every_polynomial_of_degree_two_per_symbol(coeffs, examples):
    from fnx.export.tracing import _Fitter, sample_envs

    monomials = [("batch",) * i + ("seq",) * j for i in range(3) for j in range(3)]
    poly = Dim.make(dict(zip(monomials, coeffs)))
    grid, check = sample_envs({"batch": examples[0], "seq": examples[1]})
    fitter = _Fitter(["batch", "seq"], grid, check)
    assert fitter.fit([evaluate(poly, env) for env in grid + check]) == poly
    assert fitter.fit([env["batch"] // 2 for env in grid + check]) is None


# ---------------------------------------------------------------- export and call
def mlp(params, x):
    h = fnx.tanh(x @ params["w1"] + params["b1"])
    return fnx.nn.functional.log_softmax(h @ params["w2"], dim=-1)


def _mlp_params(dtype=fnx.float32):
    g = np.random.default_rng(0)
    return {"w1": fnx.tensor(g.normal(size=(4, 8)), dtype=dtype), "b1": fnx.tensor(g.normal(size=8), dtype=dtype),
            "w2": fnx.tensor(g.normal(size=(8, 3)), dtype=dtype)}


def test_export_call_matches_the_function_at_new_batch_sizes(monkeypatch):
    monkeypatch.setenv("FNX_BACKEND", "interpret")   # each size is a compile: the other tests compile to C
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
def test_op_table_through_export(info, data, archive_dir):
    """Each op sample, float32 and float64, exported, saved and loaded gives the op's values exactly (evaluated;
    a few compiled); with a dynamic leading dimension, export refuses or is right at a size it did not trace."""
    sample = data.draw(info.samples)
    for dtype in ("float32", "float64"):
        op, tensors = as_tensor_function(info, sample)
        if not tensors:
            return
        tensors = [t.to(dtype) if t.dtype.is_floating_point else t for t in tensors]
        want = fnx.tree.tree_leaves(op(*tensors))
        loaded = fnx.export.load(_saved(fnx.export(op, *tensors), archive_dir))
        _assert_evaluates_to(loaded, {}, tensors, want)
        if info.name in _COMPILED:
            for got, w in zip(fnx.tree.tree_leaves(loaded.call(*tensors)), want):
                np.testing.assert_allclose(got.numpy(), w.numpy(), rtol=1e-4, atol=1e-5)
    if len(tensors) == 1 and tensors[0].ndim >= 1 and tensors[0].shape[0] >= 2:
        _check_dynamic_leading_dimension(op, tensors[0])


def _assert_evaluates_to(exported, env: dict, args: list, want: list) -> None:
    concrete = specialize(exported.jaxpr, env, fnx.device("cpu"))
    for got, w in zip(eval_jaxpr(concrete.jaxpr, concrete.consts, *args), want):
        np.testing.assert_array_equal(got.numpy(), w.numpy())


def _check_dynamic_leading_dimension(op, x) -> None:
    try:
        ex = fnx.export(op, x, dynamic_shapes=({0: "n"},))
    except fnx.errors.FnxValueError as e:   # sizes that are no polynomial of n, a trace that changes with n
        assert "fnx.export: " in str(e)
        return
    bigger = fnx.cat([x, x, x[:1]])
    try:
        want = fnx.tree.tree_leaves(op(bigger))
    except fnx.errors.FnxRuntimeError:   # the op itself does not take that size
        return
    _assert_evaluates_to(ex, {"n": bigger.shape[0]}, [bigger], want)


def _saved(exported, tmp_path, name="program.fnxp") -> str:
    path = str(tmp_path / name)
    exported.save(path)
    return path


# ---------------------------------------------------------------- models: an MLP, the digits CNN, a char transformer
def test_mlp_saved_loaded_and_called_at_other_batch_sizes(tmp_path):
    params = _mlp_params(fnx.float64)
    ex = fnx.export(mlp, params, fnx.randn(6, 4, dtype=fnx.float64), dynamic_shapes=(None, {0: "batch"}))
    loaded = fnx.export.load(_saved(ex, tmp_path))
    assert loaded.symbols == ("batch",) and loaded.in_tree == ex.in_tree and loaded.out_tree == ex.out_tree
    assert [str(a) for a in loaded.in_avals] == [str(a) for a in ex.in_avals]
    assert loaded.as_text().splitlines()[1:] == ex.as_text().splitlines()[1:]
    x = fnx.randn(3, 4, dtype=fnx.float64)
    assert_close(loaded.call(params, x), mlp(params, x), rtol=1e-12)


class DigitsCNN(fnx.nn.Module):
    """The examples' digits classifier (8x8 images)."""

    def __init__(self):
        super().__init__()
        self.conv1 = fnx.nn.Conv2d(1, 8, kernel_size=3, padding=1)
        self.conv2 = fnx.nn.Conv2d(8, 16, kernel_size=3, padding=1)
        self.dropout = fnx.nn.Dropout(0.1)
        self.fc = fnx.nn.Linear(16 * 2 * 2, 10)

    def forward(self, x):
        F = fnx.nn.functional
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(self.dropout(x.flatten(1)))


def test_digits_cnn_with_a_dynamic_batch(tmp_path):
    fnx.manual_seed(0)
    model = DigitsCNN().eval()
    ex = fnx.export(model, fnx.randn(4, 1, 8, 8), dynamic_shapes={"x": {0: "batch"}})
    assert str(ex.in_avals[0]) == "f32[batch,1,8,8]" and len(ex.consts) == 6   # the weights are constants
    loaded = fnx.export.load(_saved(ex, tmp_path))
    x = fnx.randn(9, 1, 8, 8)
    with fnx.no_grad():
        assert_close(loaded.call(x), model(x))


VOCAB, CONTEXT, D_MODEL, HEADS = 11, 8, 16, 2


def transformer_params():
    keys = iter(fnx.random.split(fnx.random.key(0), 8))

    def normal(*shape):
        return 0.3 * fnx.random.normal(next(keys), shape)

    ln = {"w": fnx.ones(D_MODEL), "b": fnx.zeros(D_MODEL)}
    return {"tokens": normal(VOCAB, D_MODEL), "positions": normal(CONTEXT, D_MODEL), "ln_f": ln,
            "blocks": [{"ln1": ln, "qkv": normal(D_MODEL, 3 * D_MODEL), "proj": normal(D_MODEL, D_MODEL),
                        "ln2": ln, "fc": normal(D_MODEL, 4 * D_MODEL), "fc_out": normal(4 * D_MODEL, D_MODEL)}]}


def transformer(params, tokens):
    """The char-level transformer of examples/05_tiny_transformer.ipynb, smaller."""
    F = fnx.nn.functional

    def layer_norm(p, x):
        return F.layer_norm(x, (D_MODEL,), p["w"], p["b"])

    def attention(p, x):
        B, T, _ = x.shape
        q, k, v = (x @ p["qkv"]).split(D_MODEL, dim=-1)
        heads = lambda t: t.reshape(B, T, HEADS, D_MODEL // HEADS).transpose(1, 2)   # noqa: E731
        out = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        return out.transpose(1, 2).reshape(B, T, D_MODEL) @ p["proj"]

    x = params["tokens"][tokens] + params["positions"][:tokens.shape[1]]
    for block in params["blocks"]:
        x = x + attention(block, layer_norm(block["ln1"], x))
        x = x + F.gelu(layer_norm(block["ln2"], x) @ block["fc"]) @ block["fc_out"]
    return layer_norm(params["ln_f"], x) @ params["tokens"].T


def next_token(params, window, key, temperature):
    logits = transformer(params, window[None])[0, -1] / temperature
    return fnx.random.categorical(key, logits)


def test_char_transformer_with_dynamic_batch_and_seq(tmp_path):
    params = transformer_params()
    ex = fnx.export(transformer, params, fnx.randint(0, VOCAB, (2, CONTEXT)),
                    dynamic_shapes={"tokens": {0: "batch", 1: "seq"}})
    assert ex.symbols == ("batch", "seq") and str(ex.out_avals[0]) == f"f32[batch,seq,{VOCAB}]"
    # SDPA's fused primitive is written as the composition that defines it (fnx/export/primitives.py EXPANDED)
    names = {e.prim.name for e in ex.jaxpr.jaxpr.eqns}
    assert "attention" not in names and {"matmul", "exp"} <= names
    loaded = fnx.export.load(_saved(ex, tmp_path))
    tokens = fnx.randint(0, VOCAB, (3, 5))
    assert_close(loaded.call(params, tokens), transformer(params, tokens), rtol=1e-4, atol=1e-5)
    # positions[:seq] needs seq <= CONTEXT
    with pytest.raises(fnx.errors.FnxRuntimeError, match=f"cannot run at batch=1, seq={CONTEXT + 1}: .*slice"):
        loaded.call(params, fnx.randint(0, VOCAB, (1, CONTEXT + 1)))


def test_char_transformer_sampling_step_gives_the_same_tokens(tmp_path, monkeypatch):
    monkeypatch.setenv("FNX_BACKEND", "interpret")   # each size is a compile: the other tests compile to C
    params = transformer_params()
    ex = fnx.export(next_token, params, fnx.randint(0, VOCAB, (CONTEXT,)), fnx.random.key(0), fnx.tensor(0.8),
                    dynamic_shapes={"window": {0: "seq"}})
    loaded = fnx.export.load(_saved(ex, tmp_path))
    for seq in (3, CONTEXT):
        window = fnx.randint(0, VOCAB, (seq,))
        for seed in range(4):
            key, t = fnx.random.key(seed), fnx.tensor(0.8)
            assert int(loaded.call(params, window, key, t)) == int(next_token(params, window, key, t))


# ---------------------------------------------------------------- a loaded program is IR: grad, vmap, jvp, compile
def test_grad_vmap_jvp_and_compile_of_a_loaded_program(tmp_path):
    params = _mlp_params(fnx.float64)
    x = fnx.randn(5, 4, dtype=fnx.float64)
    loaded = fnx.export.load(_saved(fnx.export(mlp, params, x, dynamic_shapes=(None, {0: "batch"})), tmp_path))

    def loss(f):
        return lambda p, x: f(p, x)[:, 0].sum()

    for got, want in zip(fnx.tree.tree_leaves(fnx.grad(loss(loaded.call))(params, x)),
                         fnx.tree.tree_leaves(fnx.grad(loss(mlp))(params, x))):
        assert_close(got, want, rtol=1e-10)
    xs = fnx.randn(3, 2, 4, dtype=fnx.float64)
    assert_close(fnx.vmap(loaded.call, in_axes=(None, 0))(params, xs), fnx.vmap(mlp, in_axes=(None, 0))(params, xs))
    dx = fnx.randn(5, 4, dtype=fnx.float64)
    _, t1 = fnx.jvp(lambda x: loaded.call(params, x), (x,), (dx,))
    _, t2 = fnx.jvp(lambda x: mlp(params, x), (x,), (dx,))
    assert_close(t1, t2, rtol=1e-10)
    assert_close(fnx.compile(loaded.call)(params, x), mlp(params, x))


def test_control_flow_with_a_dynamic_scan_length(tmp_path):
    from sample_programs import controls

    x = fnx.randn(6, dtype=fnx.float64)
    loaded = fnx.export.load(_saved(fnx.export(controls, x, dynamic_shapes={"x": {0: "n"}}), tmp_path))
    assert "length=n" in loaded.as_text()
    for n in (2, 9):
        x = fnx.randn(n, dtype=fnx.float64)
        assert_close(loaded.call(x), controls(x), rtol=1e-12)


def test_calls_inside_the_function_are_inlined():
    inner = fnx.compile(lambda x: fnx.exp(x) * 2)

    @fnx.custom_jvp
    def soft(x):
        return fnx.log1p(fnx.exp(x))

    soft.defjvp(lambda primals, tangents: (soft(primals[0]), tangents[0] * fnx.sigmoid(primals[0])))

    def f(x):
        return fnx.checkpoint(lambda y: soft(inner(y)).sum())(x)

    x = fnx.randn(3)
    ex = fnx.export(f, x)
    text = ex.as_text()
    assert all(name not in text for name in ("compiled_call", "custom_jvp_call", "checkpoint"))
    assert_close(ex.call(x), f(x))


# ---------------------------------------------------------------- call-time checks of the dimensions
def test_call_checks_dtypes_static_dims_and_symbols():
    params = _mlp_params()

    def two(params, x, y):
        return mlp(params, x) + mlp(params, y)

    ex = fnx.export(two, params, fnx.randn(2, 4), fnx.randn(2, 4), dynamic_shapes={"x": {0: "batch"},
                                                                                     "y": {0: "batch"}})
    with pytest.raises(fnx.errors.FnxValueError, match=r"dimension 0 of argument 'y' is 3, but symbol 'batch' is 2 "
                                                       r"from dimension 0 of argument 'x'"):
        ex.call(params, fnx.randn(2, 4), fnx.randn(3, 4))
    with pytest.raises(fnx.errors.FnxValueError, match=r"dimension 1 of argument 'x' is 5, but the program was "
                                                       r"exported with the static size 4"):
        ex.call(params, fnx.randn(2, 5), fnx.randn(2, 4))
    with pytest.raises(fnx.errors.FnxTypeError, match=r"argument 'x' has dtype float64, the program takes float32"):
        ex.call(params, fnx.randn(2, 4, dtype=fnx.float64), fnx.randn(2, 4))
    with pytest.raises(fnx.errors.FnxTypeError, match=r"argument 'params\['b1'\]' has dtype float64"):
        ex.call(_mlp_params(fnx.float64), fnx.randn(2, 4), fnx.randn(2, 4))
    with pytest.raises(fnx.errors.FnxTypeError, match="structure"):
        ex.call(params, fnx.randn(2, 4))


# ---------------------------------------------------------------- what export refuses, and says why
def test_export_refuses_structure_that_depends_on_a_dimension():
    def f(x):
        return x.sum() if x.shape[0] > 3 else x.mean()

    with pytest.raises(fnx.errors.FnxValueError, match="structure depends on dimension 'n'"):
        fnx.export(f, fnx.randn(5), dynamic_shapes={"x": {0: "n"}})


def test_export_refuses_sizes_that_are_no_polynomial():
    with pytest.raises(fnx.errors.FnxValueError, match="no polynomial"):
        fnx.export(lambda x: x[:x.shape[0] // 2] * 2, fnx.randn(6), dynamic_shapes=({0: "n"},))


def test_export_fits_dimensions_used_as_values():
    def f(x):
        return x.mean(0), x.var(0), x.sum() / x.numel()

    ex = fnx.export(f, fnx.randn(5, 3), dynamic_shapes=({0: "n"},))
    assert "(n*3):f32[]" in ex.as_text()
    x = fnx.randn(11, 3)
    for got, want in zip(ex.call(x), f(x)):
        assert_close(got, want)


def test_export_refuses_custom_vjp_and_names_it():
    @fnx.custom_vjp
    def clip_grad(x):
        return x

    clip_grad.defvjp(lambda x: (x, None), lambda res, g: (g.clamp(-1, 1),))
    with pytest.raises(NotImplementedError, match="custom_vjp_call"):
        fnx.export(lambda x: clip_grad(x) * 2, fnx.randn(3))


def test_dynamic_shapes_errors_name_the_problem():
    with pytest.raises(fnx.errors.FnxValueError, match=r"not parameters of the function"):
        fnx.export(mlp, _mlp_params(), fnx.randn(2, 4), dynamic_shapes={"z": {0: "batch"}})
    with pytest.raises(fnx.errors.FnxValueError, match="identifier"):
        fnx.export(lambda x: x * 2, fnx.randn(2), dynamic_shapes=({0: "2x"},))
    with pytest.raises(fnx.errors.FnxValueError, match="equal size"):
        fnx.export(lambda x, y: x + y, fnx.randn(2), fnx.randn(3), dynamic_shapes=({0: "n"}, {0: "n"}))


# ---------------------------------------------------------------- damaged and hostile archives are refused
import io  # noqa: E402
import json  # noqa: E402
import zipfile  # noqa: E402

from fnx.serialization import UnpicklingError  # noqa: E402


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    """The entries of a valid archive (a small model with a weight constant and a dynamic batch)."""
    w = fnx.tensor(np.arange(12.0, dtype=np.float32).reshape(4, 3))
    ex = fnx.export(lambda x: fnx.relu(x @ w).reshape(-1), fnx.randn(2, 4), dynamic_shapes=({0: "batch"},))
    path = _saved(ex, tmp_path_factory.mktemp("valid"))
    with zipfile.ZipFile(path) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def _write(entries: dict, path) -> str:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
    return str(path)


def _edited(archive, tmp_path, manifest=None, program=None, **replace) -> str:
    entries = dict(archive)
    for name, edit in (("manifest.json", manifest), ("program.json", program)):
        if edit is not None:
            doc = json.loads(entries[name])
            edit(doc)
            entries[name] = json.dumps(doc).encode()
    entries.update(replace)
    return _write(entries, tmp_path / "edited.fnxp")


def _eqn(doc, primitive):
    return next(e for e in doc["jaxpr"]["eqns"] if e["primitive"] == primitive)


def test_the_valid_archive_loads(archive, tmp_path):
    loaded = fnx.export.load(_edited(archive, tmp_path))
    x = fnx.randn(3, 4)
    assert loaded.call(x).shape == (9,)


def test_truncated_and_foreign_files_are_refused(archive, tmp_path):
    whole = (tmp_path / "whole.fnxp")
    _write(archive, whole)
    data = whole.read_bytes()
    for cut in (len(data) // 3, len(data) - 10):
        (tmp_path / "cut.fnxp").write_bytes(data[:cut])
        with pytest.raises(UnpicklingError, match="fnx.export.load: .*(damaged|truncated|not)"):
            fnx.export.load(tmp_path / "cut.fnxp")
    (tmp_path / "pickle.fnxp").write_bytes(b"\x80\x04K\x01.")
    with pytest.raises(UnpicklingError, match="not a zip"):
        fnx.export.load(tmp_path / "pickle.fnxp")


def test_other_format_versions_are_refused(archive, tmp_path):
    with pytest.raises(UnpicklingError, match="format version 2, written by a newer fnx"):
        fnx.export.load(_edited(archive, tmp_path, manifest=lambda m: m.update(version=2)))
    with pytest.raises(UnpicklingError, match="format version 0, which this fnx does not read"):
        fnx.export.load(_edited(archive, tmp_path, manifest=lambda m: m.update(version=0)))
    with pytest.raises(UnpicklingError, match="format is not 'fnx.export'"):
        fnx.export.load(_edited(archive, tmp_path, manifest=lambda m: m.update(format="fnx")))


def test_unknown_and_refused_primitives_are_named(archive, tmp_path):
    def rename(name):
        return lambda p: _eqn(p, "relu").update(primitive=name)

    with pytest.raises(UnpicklingError, match="equation .* uses the primitive 'os.system', which this fnx does not"):
        fnx.export.load(_edited(archive, tmp_path, program=rename("os.system")))
    with pytest.raises(UnpicklingError, match="'device_put'.*moves data between devices"):
        fnx.export.load(_edited(archive, tmp_path, program=rename("device_put")))


def test_ill_typed_and_unknown_params_are_named(archive, tmp_path):
    with pytest.raises(UnpicklingError, match=r"\(reshape\): parameter 'shape' is 'abc', but it must be a tuple"):
        fnx.export.load(_edited(archive, tmp_path, program=lambda p: _eqn(p, "reshape")["params"].update(shape="abc")))
    with pytest.raises(UnpicklingError, match=r"\(reshape\) has 1 inputs and the parameters \['evil', 'shape'\], "
                                              r"which the primitive's"):
        fnx.export.load(_edited(archive, tmp_path, program=lambda p: _eqn(p, "reshape")["params"].update(evil=1)))
    with pytest.raises(UnpicklingError, match="malformed value"):
        fnx.export.load(_edited(archive, tmp_path,
                                program=lambda p: _eqn(p, "reshape")["params"].update(shape={"py/object": "os"})))


def test_undefined_variables_and_inconsistent_shapes_are_refused(archive, tmp_path):
    with pytest.raises(UnpicklingError, match="uses the variable 'zz', which is not defined before it"):
        fnx.export.load(_edited(archive, tmp_path, program=lambda p: _eqn(p, "relu").update(inputs=["zz"])))

    def wrong_shape(p):
        _eqn(p, "relu")["outputs"][0]["shape"] = ["batch", 4]

    with pytest.raises(UnpicklingError, match="inconsistent.*relu"):
        fnx.export.load(_edited(archive, tmp_path, program=wrong_shape))
    with pytest.raises(UnpicklingError, match="symbols \\['evil'\\], which the manifest does not declare"):
        fnx.export.load(_edited(archive, tmp_path, program=lambda p: _eqn(p, "relu")["outputs"][0].update(
            shape=["evil", 3])))


def test_constants_are_checked_against_the_manifest(archive, tmp_path):
    def declare(shape):
        return lambda m: m["consts"][0].update(shape=shape)

    with pytest.raises(UnpicklingError, match="holds float32\\[4, 3\\], but the manifest says float32\\[3, 4\\]"):
        fnx.export.load(_edited(archive, tmp_path, manifest=declare([3, 4])))
    with pytest.raises(UnpicklingError, match="manifest says float32\\[1099511627776, 1099511627776\\]"):
        fnx.export.load(_edited(archive, tmp_path, manifest=declare([2 ** 40, 2 ** 40])))   # never allocated
    with pytest.raises(UnpicklingError, match="malformed shape"):
        fnx.export.load(_edited(archive, tmp_path, manifest=declare([2 ** 70])))
    with pytest.raises(UnpicklingError, match="symbol_examples"):
        fnx.export.load(_edited(archive, tmp_path, manifest=lambda m: m["symbol_examples"].update(batch=2 ** 40)))


class _CreatesAFile:
    """Unpickling this would create the file `path` (a stand-in for any code a pickle can run)."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return open, (self.path, "w")


def test_a_pickle_inside_an_npy_entry_never_runs(archive, tmp_path):
    marker = tmp_path / "pwned"
    buf = io.BytesIO()
    np.save(buf, np.array([_CreatesAFile(marker)], dtype=object), allow_pickle=True)
    assert not marker.exists()
    path = _edited(archive, tmp_path, **{"consts/0.npy": buf.getvalue()})
    with pytest.raises(UnpicklingError, match="object"):
        fnx.export.load(path)
    with pytest.raises(UnpicklingError, match="unknown dtype 'object'"):
        fnx.export.load(_edited(archive, tmp_path, manifest=lambda m: m["consts"][0].update(dtype="object"),
                                **{"consts/0.npy": buf.getvalue()}))
    with pytest.raises(UnpicklingError, match="unexpected entries"):
        fnx.export.load(_edited(archive, tmp_path, **{"data.pkl": buf.getvalue()}))
    assert not marker.exists()


# ---------------------------------------------------------------- example arguments and the program's form
def test_examples_may_be_arrays_and_shape_dtype_specs():
    from types import SimpleNamespace

    spec = SimpleNamespace(shape=(3, 4), dtype="float32")
    ex = fnx.export(lambda a, b: a @ b.T, spec, np.ones((2, 4), np.float32), dynamic_shapes=({0: "m"}, {0: "n"}))
    assert [str(a) for a in ex.in_avals] == ["f32[m,4]", "f32[n,4]"]
    a, b = fnx.randn(5, 4), fnx.randn(6, 4)
    assert_close(ex.call(a, b.numpy()), a @ b.T)


def test_the_program_is_a_jaxpr_with_dims_and_numpy_constants():
    """What tools that read programs (the C generator) rely on."""
    from fnx.export import DimLiteral

    w = fnx.randn(4, 4)
    ex = fnx.export(lambda x: (x @ w).reshape(-1).mean(), fnx.randn(3, 4), dynamic_shapes=({0: "batch"},))
    assert isinstance(ex.jaxpr, fnx.ClosedJaxpr) and ex.jaxpr.consts is ex.consts
    assert all(type(c) is np.ndarray for c in ex.consts) and np.array_equal(ex.consts[0], w.numpy())
    reshape = next(e for e in ex.jaxpr.eqns if e.prim.name == "reshape")
    size, = reshape.params["shape"]
    assert isinstance(size, Dim) and size.c_expr() == "(batch*4)" and size.evaluate({"batch": 5}) == 20
    literal = next(a for e in ex.jaxpr.eqns for a in e.inputs if isinstance(a, DimLiteral))
    assert str(literal.dim) == "batch*4" and literal.value({"batch": 2}) == 8 and not literal.reciprocal


def test_varying_constants_other_than_fills_and_aranges_are_refused():
    with pytest.raises(fnx.errors.FnxValueError, match="neither a fill nor an arange"):
        fnx.export(lambda x: x * fnx.eye(x.shape[0]), fnx.randn(4, 4), dynamic_shapes=({0: "n", 1: "n"},))


@pytest.mark.cuda
def test_a_loaded_program_runs_on_cuda(tmp_path):
    params = transformer_params()
    ex = fnx.export(transformer, params, fnx.randint(0, VOCAB, (2, CONTEXT)),
                    dynamic_shapes={"tokens": {0: "batch", 1: "seq"}})
    loaded = fnx.export.load(_saved(ex, tmp_path))
    gpu = fnx.tree.tree_map(lambda t: t.to("cuda"), params)
    tokens = fnx.randint(0, VOCAB, (3, 5))
    out = loaded.call(gpu, tokens.to("cuda"))
    assert out.device.type == "cuda"
    assert_close(out, transformer(params, tokens), rtol=1e-4, atol=1e-5)


def test_a_trace_failing_at_a_sampled_size_is_explained():
    def pairs(x):
        return x.reshape(x.shape[0] // 2, 2).sum(1)

    with pytest.raises(fnx.errors.FnxValueError, match="tracing the function at n=7 .* failed"):
        fnx.export(pairs, fnx.randn(8), dynamic_shapes=({0: "n"},))
