"""fnx.onnx (torch.onnx.export): the ONNX models it writes pass onnx.checker, and onnxruntime running them gives
fnx's outputs, for the models of benchmarks/models.py (a GPT, an LSTM language model, the mnist CNN), an MLP, a
CNN with batch norm and pooling, the convolution family, dynamic axes at two sizes, and every op of the op table
whose primitives the exporter writes (float32, as one model per run of ops)."""
from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

import fnx
import fnx.nn as nn
import fnx.nn.functional as F
from fnx.export.primitives import exportable, prepare
from fnx.ir import eval_jaxpr
from fnx.onnx._ops import OPS
from fnx.torch_alias import _TORCH
from benchmarks.models import GPTConfig, LlamaConfig, LSTMConfig, define
from op_db import as_tensor_function, chunks, stageable_ops
from test_export_c import SUMS, _float32, _ulp

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

MODELS = define(fnx)


def _agree(program, args, expected, atol: float = 2e-6) -> None:
    """onnxruntime's outputs of `program` on `args` equal `expected` (fnx's) to float32 rounding."""
    got = program(*args)
    expected = fnx.tree.tree_leaves(expected)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        e = e.detach().numpy()
        assert g.shape == e.shape and g.numpy().dtype == e.dtype
        np.testing.assert_allclose(g.numpy(), e, rtol=1e-5, atol=atol)   # NaN where fnx has NaN


def _eval(model, *args):
    with fnx.no_grad():
        return model.eval()(*args)


# ---------------------------------------------------------------- models
def test_mlp_passes_the_checker_and_matches_fnx():
    mlp = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3), nn.LogSoftmax(-1))
    x = fnx.randn(2, 4)
    program = fnx.onnx.export(mlp, (x,))
    onnx.checker.check_model(program.model_proto, full_check=True)
    names = {t.name for t in program.model_proto.graph.initializer if not t.name.startswith("onnx::")}
    assert names == {"0.weight", "0.bias", "2.weight", "2.bias"}   # the state_dict's names
    assert [i.name for i in program.model_proto.graph.input] == ["input"]   # forward's parameter
    _agree(program, (x,), _eval(mlp, x))


def test_cnn_with_batch_norm_exports_in_eval_mode_and_keeps_the_training_flag():
    cnn = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Dropout(0.5), nn.AvgPool2d(2), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))
    cnn[1].running_mean, cnn[1].running_var = fnx.randn(8), fnx.rand(8) + 0.5   # statistics away from 0 and 1
    x = fnx.randn(2, 3, 8, 8)
    program = fnx.onnx.export(cnn, (x,))
    assert cnn.training and cnn[1].training   # restored
    ops = {n.op_type for n in program.model_proto.graph.node}
    assert "MaxPool" in ops and "RandomUniform" not in ops
    _agree(program, (x,), _eval(cnn, x))


def test_mnist_cnn_matches_fnx():
    net = MODELS.Net()
    x = fnx.randn(2, 1, 28, 28)
    _agree(fnx.onnx.export(net, (x,)), (x,), _eval(net, x))


def test_gpt_with_dynamic_batch_and_sequence_matches_fnx_at_two_sizes():
    # causal scaled_dot_product_attention, exact GELU, LayerNorm, tied embeddings, cross-entropy
    gpt = MODELS.GPT(GPTConfig(n_layer=1, n_head=2, n_embd=16, block_size=8, vocab_size=11))
    idx = fnx.randint(0, 11, (2, 6))
    spec = {0: "batch", 1: "seq"}
    program = fnx.onnx.export(gpt, (idx, idx), dynamic_shapes={"idx": spec, "targets": spec})
    inputs = program.model_proto.graph.input
    assert [d.dim_param for d in inputs[0].type.tensor_type.shape.dim] == ["batch", "seq"]
    names = {t.name for t in program.model_proto.graph.initializer}
    assert "transformer.wte.weight" in names and "lm_head.weight" not in names   # tied: one initializer
    for b, t in ((2, 6), (3, 4)):
        x = fnx.randint(0, 11, (b, t))
        _agree(program, (x, x), _eval(gpt, x, x))


def test_llama_with_rotary_embeddings_and_grouped_query_attention_matches_fnx():
    llama = MODELS.Llama(LlamaConfig(vocab_size=13, dim=16, n_layers=1, n_heads=4, n_kv_heads=2))
    program = fnx.onnx.export(llama, (fnx.randint(0, 13, (1, 5)),), dynamic_shapes=({1: "seq"},))
    for t in (5, 3):
        x = fnx.randint(0, 13, (1, t))
        _agree(program, (x,), _eval(llama, x))


def test_lstm_language_model_and_gru_match_fnx():
    lm = MODELS.LSTMLM(LSTMConfig(ntoken=20, ninp=8, nhid=8))
    tokens, hidden = fnx.randint(0, 20, (5, 2)), lm.init_hidden(2)
    program = fnx.onnx.export(lm, (tokens, hidden))
    assert [i.name for i in program.model_proto.graph.input] == ["input", "hidden_0", "hidden_1"]
    assert "LSTM" in {n.op_type for n in program.model_proto.graph.node}
    _agree(program, (tokens, hidden), _eval(lm, tokens, hidden))
    gru = nn.GRU(3, 4, num_layers=2, batch_first=True, bidirectional=True)
    x = fnx.randn(2, 5, 3)
    _agree(fnx.onnx.export(gru, (x,)), (x,), _eval(gru, x))


def test_convolutions_with_groups_dilation_padding_and_transposed_match_fnx():
    def convs(x1, x2, x3):
        return (F.conv1d(x1, w1, padding=2, dilation=2, groups=2), F.conv2d(x2, w2, b2, stride=2, padding="valid"),
                F.conv3d(x3, w3, padding=1), F.conv_transpose2d(x2, wt, stride=2, padding=1, output_padding=1),
                F.max_pool1d(x1, 3, 2, ceil_mode=True))

    w1, w2, b2 = fnx.randn(6, 2, 3), fnx.randn(5, 4, 3, 3), fnx.randn(5)
    w3, wt = fnx.randn(3, 2, 2, 2, 2), fnx.randn(4, 3, 3, 3)
    args = (fnx.randn(2, 4, 9), fnx.randn(2, 4, 7, 7), fnx.randn(1, 2, 4, 4, 4))
    _agree(fnx.onnx.export(convs, args), args, convs(*args))


def test_nan_propagates_as_in_fnx():
    # the first NaN is the argmax (onnxruntime's ArgMax alone passes over it); maximum, clamp, sort keep NaN
    def f(a, b):
        return a.argmax(1), b.argmin(0), fnx.maximum(a, b), a.clamp(-1, 0.5), a.sort(1).values

    a = fnx.tensor([[1.0, np.nan, 3.0, np.nan], [0.0, 2.0, -1.0, 1.0]])
    b = fnx.tensor([[np.nan, 1.0, -4.0, 0.0], [2.0, np.nan, 5.0, np.nan]])
    _agree(fnx.onnx.export(f, (a, b)), (a, b), f(a, b))


def test_dynamic_axes_name_inputs_and_outputs_and_run_at_two_batch_sizes(tmp_path):
    mlp = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 3))
    path = tmp_path / "mlp.onnx"
    result = fnx.onnx.export(mlp, (fnx.randn(2, 4),), str(path), input_names=["features"], output_names=["scores"],
                             dynamic_axes={"features": {0: "batch"}, "scores": [0]}, dynamo=False)
    assert result is None and path.exists() and (tmp_path / "mlp.onnx.data").exists()   # external weights
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert session.get_inputs()[0].shape == ["batch", 4]
    assert session.get_outputs()[0].shape == ["scores_dynamic_axes_1", 3]
    for n in (2, 7):
        x = fnx.randn(n, 4)
        np.testing.assert_allclose(session.run(None, {"features": x.numpy()})[0], _eval(mlp, x).numpy(),
                                   rtol=1e-5, atol=2e-6)


def test_saving_without_external_data_and_parameters_as_inputs():
    lin = nn.Linear(3, 2)
    x = fnx.randn(4, 3)
    program = fnx.onnx.export(lin, (x,))
    buffer = io.BytesIO()
    program.save(buffer)
    model = onnx.load_from_string(buffer.getvalue())
    assert {t.name for t in model.graph.initializer} >= {"weight", "bias"}
    program.save(buffer := io.BytesIO(), include_initializers=False, keep_initializers_as_inputs=True)
    session = ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    feeds = {"input": x.numpy(), "weight": 2 * lin.weight.detach().numpy(), "bias": lin.bias.detach().numpy()}
    expected = x.numpy() @ feeds["weight"].T + feeds["bias"]
    np.testing.assert_allclose(session.run(None, feeds)[0], expected, rtol=1e-5, atol=1e-6)


def test_is_in_onnx_export_is_true_while_tracing_only_and_kwargs_become_inputs():
    seen = []

    def f(x, *, scale, offset=1.0):
        seen.append(fnx.onnx.is_in_onnx_export())
        return x * scale + offset

    x, scale = fnx.ones(2), fnx.tensor([2.0, 3.0])
    program = fnx.onnx.export(f, (x,), kwargs={"scale": scale, "offset": 0.5}, verify=True,
                              operator_export_type=fnx.onnx.OperatorExportTypes.ONNX)
    assert seen[0] is True and not fnx.onnx.is_in_onnx_export()
    assert [i.name for i in program.model_proto.graph.input] == ["x", "scale"]   # 0.5 is fixed in the graph
    assert program(x, scale=scale)[0].tolist() == [2.5, 3.5]


def test_torch_onnx_names_resolve_to_fnx_onnx():
    # the alias maps torch.onnx to fnx.onnx (tests/test_torch_alias.py runs the alias itself in fresh processes)
    assert _TORCH.fnx_name("torch.onnx") == "fnx.onnx" and _TORCH.fnx_name("torch.onnx.errors") == "fnx.onnx.errors"
    assert issubclass(fnx.onnx.errors.UnsupportedOperatorError, fnx.onnx.OnnxExporterError)
    assert fnx.onnx.OnnxExporterError is fnx.onnx.errors.OnnxExporterError


# ---------------------------------------------------------------- errors
def test_an_unsupported_primitive_raises_not_implemented_naming_it():
    with pytest.raises(NotImplementedError, match="'atan2'.*torch.atan2") as info:
        fnx.onnx.export(fnx.atan2, (fnx.randn(3), fnx.randn(3)))
    assert isinstance(info.value, fnx.onnx.errors.UnsupportedOperatorError)
    assert isinstance(info.value, fnx.onnx.OnnxExporterError)
    with pytest.raises(NotImplementedError, match="cumprod along a dynamic dimension"):
        fnx.onnx.export(lambda x: x.cumprod(0), (fnx.randn(3),), dynamic_shapes=({0: "n"},))
    with pytest.raises(NotImplementedError, match="bitwise_and.*opset_version=18"):
        fnx.onnx.export(lambda a, b: a & b, (fnx.tensor([3]), fnx.tensor([5])))
    program = fnx.onnx.export(lambda a, b: a & b, (fnx.tensor([3]), fnx.tensor([5])), opset_version=18)
    assert program(fnx.tensor([3]), fnx.tensor([5]))[0].tolist() == [1]


def test_bad_arguments_are_refused_with_the_reason():
    lin = nn.Linear(3, 2)
    x = fnx.randn(4, 3)
    with pytest.raises(ValueError, match="opset_version=16.*17 to 21"):
        fnx.onnx.export(lin, (x,), opset_version=16)
    with pytest.raises(ValueError, match="2 input_names for a model with 1"):
        fnx.onnx.export(lin, (x,), input_names=["a", "b"])
    with pytest.raises(ValueError, match="not both"):
        fnx.onnx.export(lin, (x,), dynamic_axes={"input": [0]}, dynamic_shapes={"input": {0: "b"}})
    with pytest.raises(ValueError, match="dynamo=False.*dynamic_axes"):
        fnx.onnx.export(lin, (x,), dynamic_shapes={"input": {0: "b"}}, dynamo=False)
    with pytest.raises(ValueError, match="'nope'.*positional parameters"):
        fnx.onnx.export(lin, (x,), dynamic_shapes={"nope": {0: "b"}})
    with pytest.raises(ValueError, match="names a dimension '2b'"):
        fnx.onnx.export(lin, (x,), dynamic_axes={"input": {0: "2b"}})
    with pytest.raises(fnx.onnx.OnnxExporterError, match="tracing the model failed: .*sampling"):
        fnx.onnx.export(lambda x: F.dropout(x, 0.5, training=True), (x,))   # a random draw in the graph
    with pytest.raises(TypeError, match="must be an nn.Module or a function"):
        fnx.onnx.export(3, (x,))
    with pytest.raises(NotImplementedError, match="custom_translation_table"):
        fnx.onnx.export(lin, (x,), custom_translation_table={})


# ---------------------------------------------------------------- the op table
# Ops whose IR holds primitives that the exporter writes, but whose samples it does not run: erfcx computes in
# float64, where onnxruntime has no Erf kernel; an LSTM with a projection has no ONNX LSTM form.
SKIP = {"special.erfcx", "recurrence_lstm_proj"}
# Primitives without an ONNX form here (the exporter raises naming them): linear algebra, control flow, the
# derivative primitives of gradients, special functions and integer functions ONNX lacks
NO_ONNX = {"linalg_pinv", "linalg_svd", "linalg_qr", "linalg_solve", "linalg_eigh", "linalg_lu_factor",
           "linalg_matrix_exp", "linalg_singular_info", "linalg_cholesky", "linalg_inv", "linalg_cholesky_ex",
           "linalg_detsign", "linalg_logabsdet", "linalg_det", "linalg_ldl_solve", "linalg_ldl_factor", "lgamma",
           "digamma", "erfinv", "searchsorted", "gcd", "lcm", "nextafter", "frexp_exponent", "signbit",
           "atan2", "scan", "while_loop", "cond", "bitwise_left_shift", "bitwise_right_shift", "rsqrt_backward",
           "tanh_backward", "sigmoid_backward", "relu_backward", "gelu_backward", "gelu_tanh_backward", "silu_backward"}
_OPS = [op for op in stageable_ops() if "float32" in op.dtypes and op.name not in SKIP]


@pytest.mark.parametrize("chunk", chunks(_OPS), ids=lambda c: c[0].name)
@settings(max_examples=1, deadline=None, phases=[Phase.generate])   # one model per run of ops
@given(data=st.data())
def test_op_table_float32_in_onnxruntime_matches_fnx(chunk, data):
    known = exportable()
    cases, missing = [], set()
    for info in chunk:
        f, tensors = as_tensor_function(info, _float32(data.draw(info.samples)))
        expected = fnx.tree.tree_leaves(f(*tensors)) if tensors else []
        if not tensors or any(e.dtype.is_complex for e in expected):
            continue
        closed = prepare(fnx.make_jaxpr(f)(*tensors), known)
        gaps = {e.prim.name for e in closed.eqns} - set(OPS)
        if gaps:
            missing |= gaps
            continue
        cases.append((info.name, closed, tensors, expected))
    assert missing <= NO_ONNX

    def everything(*flat):   # each op's program again (tracing it anew would cost more than the export)
        outs, at = [], 0
        for _, closed, tensors, _ in cases:
            outs.append(eval_jaxpr(closed.jaxpr, closed.consts, *flat[at:at + len(tensors)]))
            at += len(tensors)
        return outs

    args = [t for _, _, tensors, _ in cases for t in tensors]
    program = fnx.onnx.export(everything, tuple(args), opset_version=18)   # 18: the bitwise operators
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL   # the graph as written, sooner
    program.initialize_inference_session(lambda m: ort.InferenceSession(m, options,
                                                                        providers=["CPUExecutionProvider"]))
    got = iter(program(*args))
    for name, _, tensors, expected in cases:
        for e in expected:
            e, o = e.detach().numpy(), next(got).numpy()
            assert o.shape == e.shape and o.dtype == e.dtype, name
            if e.dtype.kind != "f":
                np.testing.assert_array_equal(o, e, err_msg=name)
                continue
            summed = name.removeprefix("jnp.") in SUMS   # the bound's scale, as tests/test_export_c.py's
            finite = [np.abs(v[np.isfinite(v)]) for v in (t.numpy() for t in tensors)]
            scale = max([float(a.sum() if summed else a.max(initial=0)) for a in finite]
                        + [float(np.abs(e[np.isfinite(e)]).max(initial=0))])
            bound = (8 if summed else 2) * _ulp(scale)
            same = (o == e) | (np.isnan(o) & np.isnan(e)) | (np.abs(o.astype(np.float64) - e) <= bound)
            assert same.all(), f"{name}: onnxruntime {o[~same][:4]} vs fnx {e[~same][:4]} (bound {bound:.3g})"
