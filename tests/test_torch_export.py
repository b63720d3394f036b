"""torch.export on fnx (fnx/export/torch_api.py, which the torch alias maps `torch.export` to): PyTorch's
`export(mod, args, kwargs, dynamic_shapes=)` over fnx.export's tracer, `ExportedProgram`'s surface, Dims and
their ranges checked at call time, buffers written in training mode, save / load. Errors are matched against
PyTorch 2.13's (recorded from scratch runs of real torch.export on the same modules)."""
import io
import math
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import fnx
import fnx.nn as nn
import fnx.nn.functional as F
from fnx.export import torch_api as E
from fnx.export.torch_signature import InputKind, OutputKind
from fnx.serialization import UnpicklingError

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _interpreted(monkeypatch):
    """Exported programs run compiled, once per size: interpreted here, where each test runs a few sizes once."""
    monkeypatch.setenv("FNX_BACKEND", "interpret")


class Net(nn.Module):
    """A linear layer, batch norm, a buffer and a constant tensor attribute; an optional keyword input."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.bn = nn.BatchNorm1d(3)
        self.register_buffer("scale", fnx.full((3,), 0.5))
        self.c = fnx.tensor([2.0, 2.0, 2.0])

    def forward(self, x, y=None):
        h = self.bn(self.fc(x)) * self.scale * self.c
        return h if y is None else (h, y + 1)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.head = nn.Linear(4, 2)

    def forward(self, img):
        return self.head(F.relu(self.conv(img)).mean((2, 3)))


class TinyGPT(nn.Module):
    """Token and position embeddings, causal self-attention, a tied output projection."""

    def __init__(self, vocab=11, block=8, d=8):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(block, d)
        self.qkv, self.ln = nn.Linear(d, 3 * d), nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.wte.weight

    def forward(self, idx):
        t = idx.shape[1]
        h = self.wte(idx) + self.wpe(fnx.arange(t))
        q, k, v = self.qkv(self.ln(h)).split(h.shape[-1], dim=-1)
        h = h + F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.head(h)


def _same(a, b, tol=1e-5):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


def test_signature_state_and_printing_match_pytorch():
    fnx.manual_seed(0)
    m = Net()
    ep = E.export(m, (fnx.randn(5, 4),), {"y": fnx.randn(5, 3)})
    sig = ep.graph_signature
    # what torch.export prints for this module (torch 2.13), input by input
    assert [str(s) for s in sig.input_specs] == [
        "p_fc_weight: PARAMETER target='fc.weight'", "p_fc_bias: PARAMETER target='fc.bias'",
        "p_bn_weight: PARAMETER target='bn.weight'", "p_bn_bias: PARAMETER target='bn.bias'",
        "b_scale: BUFFER target='scale' persistent=True",
        "b_bn_running_mean: BUFFER target='bn.running_mean' persistent=True",
        "b_bn_running_var: BUFFER target='bn.running_var' persistent=True",
        "b_bn_num_batches_tracked: BUFFER target='bn.num_batches_tracked' persistent=True",
        "c_c: CONSTANT_TENSOR target='c'", "x: USER_INPUT", "y: USER_INPUT"]
    # training mode: the buffers BatchNorm updates are outputs (torch shows them after run_decompositions)
    assert list(sig.buffers_to_mutate.values()) == ["bn.running_mean", "bn.running_var", "bn.num_batches_tracked"]
    assert [s.kind for s in sig.output_specs] == [OutputKind.BUFFER_MUTATION] * 3 + [OutputKind.USER_OUTPUT] * 2
    assert sig.inputs_to_parameters == {"p_fc_weight": "fc.weight", "p_fc_bias": "fc.bias",
                                        "p_bn_weight": "bn.weight", "p_bn_bias": "bn.bias"}
    assert sig.user_inputs == ("x", "y") and sig.lifted_tensor_constants == ("c",)
    assert [s.kind for s in sig.input_specs[7:]] == [InputKind.BUFFER, InputKind.CONSTANT_TENSOR] + \
        [InputKind.USER_INPUT] * 2
    assert list(ep.state_dict) == ["fc.weight", "fc.bias", "bn.weight", "bn.bias", "scale", "bn.running_mean",
                                   "bn.running_var", "bn.num_batches_tracked"]
    assert ep.state_dict["fc.weight"] is m.fc.weight and list(ep.constants) == ["c"]
    assert [n for n, _ in ep.named_parameters()] == list(sig.parameters) and len(list(ep.buffers())) == 4
    text = str(ep)
    assert text.startswith("ExportedProgram:\n    { lambda ; p_fc_weight:f32[3,4]") and "x:f32[5,4]" in text
    assert "Graph signature: \n    # inputs" in text and "Range constraints: {}" in text
    assert str(ep.graph) == ep.graph_module.code and ep.example_inputs[1]["y"].shape == (5, 3)
    assert ep.call_spec.in_spec == fnx.tree.tree_structure(ep.example_inputs)
    with pytest.raises(RuntimeError, match=r"Unable to call ExportedProgram directly. You should use "
                                           r"`exported_program.module\(\)` instead."):
        ep(fnx.randn(5, 4))
    ep.validate()
    assert E.draft_export(m, (fnx.randn(5, 4),))._report.failures == []


def test_module_runs_the_program_and_writes_buffers_back():
    fnx.manual_seed(1)
    m, ref = Net(), Net()
    ref.load_state_dict(m.state_dict())
    batch = E.Dim("batch", min=2, max=10)
    ep = E.export(m, (fnx.randn(5, 4),), {"y": fnx.randn(5, 3)}, dynamic_shapes={"x": {0: batch}, "y": {0: batch}})
    assert ep.range_constraints == {"batch": (2, 10)} and repr(ep.range_constraints["batch"]) == "VR[2, 10]"
    mod = ep.module()
    assert mod.get_parameter("fc.weight") is m.fc.weight   # shared with the module, as in PyTorch
    x, y = fnx.randn(3, 4), fnx.randn(3, 3)
    out, expect = mod(x, y=y), ref(x, y=y)
    _same(out[0], expect[0])
    _same(out[1], expect[1])
    _same(mod.get_buffer("bn.running_var"), ref.bn.running_var)
    assert int(m.bn.num_batches_tracked) == 1 and not m.bn.running_var.requires_grad
    out[0].sum().backward()   # the program is differentiable: gradients reach the shared parameters
    expect[0].sum().backward()
    _same(m.fc.weight.grad, ref.fc.weight.grad, 1e-4)
    with pytest.raises(NotImplementedError, match=r"Calling eval\(\) is not supported yet"):
        mod.eval()


def test_eval_mode_is_captured_and_inplace_updates_are_outputs():
    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = nn.BatchNorm1d(2)
            self.register_buffer("calls", fnx.zeros(()))

        def forward(self, x, acc):
            self.calls.add_(1)
            acc.add_(1)
            return self.bn(x)

    m = Counter().eval()
    ep = E.export(m, (fnx.randn(4, 2), fnx.zeros(2)))
    sig = ep.graph_signature   # as torch 2.13 gives it (after run_decompositions)
    assert list(sig.buffers_to_mutate.values()) == ["calls"] and list(sig.user_inputs_to_mutate.values()) == ["acc"]
    assert [s.kind for s in sig.output_specs] == [OutputKind.BUFFER_MUTATION, OutputKind.USER_INPUT_MUTATION,
                                                  OutputKind.USER_OUTPUT]
    x, acc = fnx.randn(4, 2), fnx.zeros(2)
    _same(ep.module()(x, acc), x / math.sqrt(1 + 1e-5))   # eval mode: the running statistics, 0 and 1
    assert float(m.calls) == 1.0 and acc.tolist() == [1.0, 1.0] and float(m.bn.running_var.sum()) == 2.0

    class Rebind(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("h", fnx.zeros(2))

        def forward(self, x):
            self.h = fnx.zeros(3)
            return x

    with pytest.raises(NotImplementedError, match="replaces 'h' \\(f32\\[2\\]\\) with a tensor of another shape"):
        E.export(Rebind(), (fnx.ones(2),))


def test_dropout_in_training_mode_draws_fresh_masks_per_call():
    """As fnx.compile does, the program takes a key; the module draws one per call from the default generator."""
    m = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    ep = E.export(m, (fnx.randn(3, 4),), dynamic_shapes=({0: E.Dim("b")},))
    assert "rng_key:i64[2]" in str(ep.graph) and "random_uniform" in str(ep.graph)
    mod, x = ep.module(), fnx.randn(6, 4)
    fnx.manual_seed(4)
    first, second = mod(x), mod(x)
    fnx.manual_seed(4)
    again = mod(x)
    kept = (first != 0).float()
    assert not fnx.equal(kept, (second != 0).float()) and fnx.equal(first, again)
    _same(first, m[0](x) * kept * 2)   # the kept units are scaled by 1 / (1 - p)


def test_guards_at_call_time_raise_as_pytorch():
    ep = E.export(nn.Linear(4, 3), (fnx.randn(5, 4),), dynamic_shapes=({0: E.Dim("b", min=3, max=6)},))
    mod = ep.module()
    # PyTorch 2.13: AssertionError("Guard failed: input.size()[0] <= 6"); earlier versions a RuntimeError
    for shape, message in [((7, 4), r"Guard failed: input.size\(\)\[0\] <= 6"),
                           ((2, 4), r"Guard failed: input.size\(\)\[0\] >= 3"),
                           ((4, 5), r"Guard failed: input.size\(\)\[1\] == 4"),
                           ((4, 4, 1), r"Guard failed: input.dim\(\) == 2")]:
        for error in (AssertionError, RuntimeError):
            with pytest.raises(error, match=message):
                mod(fnx.randn(*shape))
    assert mod(fnx.randn(6, 4)).shape == (6, 3) and mod(input=fnx.randn(3, 4)).shape == (3, 3)
    with pytest.raises(ValueError, match="Trying to flatten user inputs with exported input tree spec"):
        mod(fnx.randn(4, 4), fnx.randn(4, 4))
    assert ep.module(check_guards=False)(fnx.randn(7, 4)).shape == (7, 3)
    with pytest.raises(TypeError, match="has dtype float64"):
        mod(fnx.randn(4, 4, dtype=fnx.float64))


def test_cnn_and_gpt_with_dynamic_dims():
    fnx.manual_seed(2)
    cnn = CNN()
    ep = E.export(cnn, (fnx.randn(3, 1, 6, 6),), dynamic_shapes={"img": (E.Dim.DYNAMIC, None, None, None)})
    img = fnx.randn(2, 1, 6, 6)
    _same(ep.module()(img), cnn(img))
    gpt = TinyGPT()
    seq = E.Dim("seq", max=8)
    ep = E.export(gpt, (fnx.randint(0, 11, (2, 8)),), dynamic_shapes=({1: seq},))
    assert [n for n, _ in ep.named_parameters()] == ["wte.weight", "wpe.weight", "qkv.weight", "qkv.bias",
                                                     "ln.weight", "ln.bias"]   # the tied head once, as in torch
    idx = fnx.randint(0, 11, (2, 5))
    _same(ep.module()(idx), gpt(idx), 1e-4)
    with pytest.raises(AssertionError, match=r"idx.size\(\)\[1\] <= 8"):
        ep.module()(fnx.randint(0, 11, (2, 9)))


def test_dynamic_shapes_forms_and_export_errors():
    lin = nn.Linear(2, 2)
    x = fnx.randn(3, 2)
    sc = E.ShapesCollection()
    sc[x] = {0: E.Dim("b")}
    assert sc.dynamic_shapes(lin, (x,)) == {"input": sc[x]}
    assert list(E.export(lin, (x,), dynamic_shapes=sc).range_constraints) == ["b"]
    assert E.export(lin, (x,), dynamic_shapes=[[E.Dim.DYNAMIC, None]]).range_constraints == {"s0": (2, math.inf)}
    # Dim.AUTO: dynamic where the program allows it (the batch), else static (a Linear's feature size)
    auto = E.export(lin, (x,), dynamic_shapes=({0: E.Dim.AUTO, 1: E.Dim.AUTO},))
    assert auto.range_constraints == {"s0": (2, math.inf)} and str(auto._program.in_avals[-1].shape) == "(s0, 2)"
    assert repr(E.Dim("b", min=2, max=10)) == "Dim('b', max=10)" and repr(E.Dim("b")) == "Dim('b', min=0)"
    assert [d.min for d in E.dims("p", "q", min=3)] == [3, 3] and repr(E.Dim.AUTO) == "DimHint(AUTO)"
    bounded = E.Dim.DYNAMIC(min=3, max=10)   # torch 2.13: DimHint(DYNAMIC, min=3, max=10), range VR[3, 10]
    assert repr(bounded) == "DimHint(DYNAMIC, min=3, max=10)"
    assert E.export(lin, (fnx.randn(4, 2),), dynamic_shapes=({0: bounded},)).range_constraints == {"s0": (3, 10)}
    # PyTorch 2.13's errors, in gist
    cases = [((lambda v: v + 1, (x,)), {}, ValueError, "Expected `mod` to be an instance of `torch.nn.Module`"),
             ((lin, x), {}, RuntimeError, "Expecting `args` to be a tuple of example positional inputs"),
             ((lin, (fnx.randn(1, 2),)), {"dynamic_shapes": ({0: E.Dim("b")},)}, RuntimeError,
              r"constraints violated \(b\)! You marked input.size\(\)\[0\] as dynamic"),
             ((lin, (fnx.randn(12, 2),)), {"dynamic_shapes": ({0: E.Dim("b", max=10)},)}, RuntimeError,
              r"12, not in range \[2, 10\]"),   # torch 2.13: "12 not in range [2, 10]"
             ((lin, (x,)), {"dynamic_shapes": {"inp": {0: E.Dim("b")}}}, RuntimeError,
              r"top-level keys must be the arg names \['input'\]"),
             ((lin, (x,)), {"dynamic_shapes": ({0: E.Dim("b")}, None)}, RuntimeError,
              "`inputs` has 1 elements, but `dynamic_shapes` has 2 elements"),
             ((lin, (x,)), {"dynamic_shapes": ({0: "batch"},)}, RuntimeError, "unexpected dimension 'batch'"),
             ((lin, (x,)), {"preserve_module_call_signature": ("fc",)}, NotImplementedError,
              "preserve_module_call_signature"),
             # a dimension the program specializes: PyTorch's UserError is a RuntimeError, fnx.export's a ValueError
             ((lin, (x,)), {"dynamic_shapes": ({1: E.Dim.DYNAMIC},)}, RuntimeError,
              r"constraints violated \(s0\)! fnx.export: tracing the function at s0=3 .* failed"),
             ((lin, (x,)), {"dynamic_shapes": ({1: E.Dim("f")},)}, ValueError, r"constraints violated \(f\)")]
    for args, kwargs, error, message in cases:
        with pytest.raises(error, match=message):
            E.export(*args, **kwargs)
    with pytest.raises(NotImplementedError, match="derived dimensions"):
        E.Dim("b") * 2


def test_constant_inputs_nested_inputs_and_dataclasses():
    @dataclass
    class Pair:
        a: fnx.Tensor
        b: fnx.Tensor

    E.register_dataclass(Pair)

    class M(nn.Module):
        def forward(self, xs, n: int, pair):
            return (xs[0] + xs[1]) * n, pair.a - pair.b

    xs = [fnx.randn(2, 3), fnx.randn(2, 3)]
    ep = E.export(M(), (xs, 3, Pair(fnx.ones(2), fnx.zeros(2))))
    sig = ep.graph_signature
    assert [s.arg.name for s in sig.input_specs] == ["xs_0", "xs_1", "n", "pair_0", "pair_1"]
    assert sig.input_specs[2].arg.value == 3 and sig.user_inputs[2] == 3
    mod = ep.module()
    out = mod(xs, 3, Pair(fnx.ones(2), fnx.ones(2)))
    _same(out[0], (xs[0] + xs[1]) * 3)
    with pytest.raises(AssertionError, match="Guard failed: n == 3"):
        mod(xs, 4, Pair(fnx.ones(2), fnx.ones(2)))


def test_save_load_round_trip_and_foreign_files(tmp_path):
    fnx.manual_seed(3)
    m = Net()
    ep = E.export(m, (fnx.randn(5, 4),), dynamic_shapes=({0: E.Dim("batch", max=10)},))
    buf = io.BytesIO()
    E.save(ep, buf, extra_files={"note.txt": "hello"})
    buf.seek(0)
    extra = {"note.txt": ""}
    loaded = E.load(buf, extra_files=extra)
    assert extra == {"note.txt": "hello"} and str(loaded) == str(ep)
    assert loaded.range_constraints == ep.range_constraints and loaded.state_dict["fc.weight"].requires_grad
    x = fnx.randn(7, 4)
    _same(loaded.module()(x), ep.module()(x))
    _same(loaded.state_dict["bn.running_mean"], m.bn.running_mean)
    path = tmp_path / "m.pt2"
    E.save(ep, path)
    assert E.unflatten(E.load(path)).fc.weight.shape == (3, 4)
    # a .pt2 file of real PyTorch (its layout: <name>/models/model.json, data/weights/...)
    import zipfile
    with zipfile.ZipFile(tmp_path / "torch.pt2", "w") as zf:
        zf.writestr("m/models/model.json", "{}")
    with pytest.raises(UnpicklingError, match="written by PyTorch's torch.export.save"):
        E.load(tmp_path / "torch.pt2")
    (tmp_path / "junk.pt2").write_bytes(b"hello")
    with pytest.raises(UnpicklingError, match="not a zip archive"):
        E.load(tmp_path / "junk.pt2")
    with pytest.raises(TypeError, match="must be an instance of 'ExportedProgram'"):
        E.save(m, buf)


def test_unflatten_and_decompositions():
    ep = E.export(nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)), (fnx.randn(4, 2),))
    u = E.unflatten(ep)
    assert [n for n, _ in u.named_children()] == ["0", "2"] and list(u.state_dict()) == list(ep.state_dict)
    x = fnx.randn(4, 2)
    _same(u(x), ep.module()(x))
    with pytest.raises(NotImplementedError, match="cannot run alone"):
        u[0](x) if hasattr(u, "__getitem__") else getattr(u, "0")(x)
    assert E.default_decompositions() == {} and str(ep.run_decompositions().graph) == str(ep.graph)
    with pytest.raises(NotImplementedError, match="decomposition table"):
        ep.run_decompositions({"aten.linear": None})


def test_a_pytorch_script_exports_under_the_alias(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent("""
        import torch
        import torch.nn as nn
        from torch.export import Dim, export, load, save
        from torch.export.graph_signature import InputKind

        class MLP(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 2))

            def forward(self, x):
                return self.net(x).softmax(-1)

        model = MLP().eval()
        batch = Dim("batch", min=1, max=64)
        ep = export(model, (torch.randn(8, 4),), dynamic_shapes={"x": {0: batch}})
        assert isinstance(ep, torch.export.ExportedProgram)
        assert ep.graph_signature.input_specs[0].kind == InputKind.PARAMETER
        save(ep, "mlp.pt2")
        loaded = load("mlp.pt2").module()
        x = torch.randn(3, 4)
        print(torch.allclose(loaded(x), model(x)), list(ep.range_constraints.values()))
        try:
            loaded(torch.randn(65, 4))
        except AssertionError as e:
            print(str(e).split(" (")[0])
    """))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
           "FNX_BACKEND": "interpret"}
    result = subprocess.run([sys.executable, "-m", "fnx", "run", str(script)], capture_output=True, text=True,
                            env=env, cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr
    # torch 2.13 prints the same ranges: min=1 stays 1 (the default min=0 becomes 2)
    assert result.stdout.splitlines() == ["True [VR[1, 64]]", "Guard failed: x.size()[0] <= 64"]
