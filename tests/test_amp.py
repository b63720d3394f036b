"""Mixed precision: fnx.autocast against PyTorch's op lists, op by op, and fnx.amp.GradScaler."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, strategies as st

import fnx
import fnx.nn.functional as F
from fnx.ops.autocast import _autocast_call
from fnx.ops.autocast_lists import LISTS, POLICIES

LOW = {"cpu": fnx.bfloat16, "cuda": fnx.float16}


# ---------------------------------------------------------------- sample inputs of every listed op fnx has
def _r(*shape, dtype=fnx.float32, lo=-1.0, hi=1.0):
    rng = np.random.default_rng(sum(shape) + len(shape))
    return fnx.tensor(rng.uniform(lo, hi, shape).astype(np.float32)).to(dtype)


def _spd(dt):
    a = _r(3, 3).to(fnx.float64)
    return (a @ a.T + 3 * fnx.eye(3, dtype=fnx.float64)).to(dt)


def _sign(n):
    return fnx.tensor([1.0, -1.0, 1.0][:n])


def _unpool2d(dt):
    out, idx = F.max_pool2d(_r(1, 1, 4, 4), 2, return_indices=True)
    return (out.to(dt), idx, 2), {}


def _unpool3d(dt):
    out, idx = F.max_pool3d(_r(1, 1, 4, 4, 4), 2, return_indices=True)
    return (out.to(dt), idx, 2), {}


_LONG = fnx.tensor([0, 2, 1])

# op name -> (dtype -> (args, kwargs)): floating inputs in the given dtype
SAMPLES = {
    # matrix products and convolutions
    "conv1d": lambda dt: ((_r(1, 2, 5, dtype=dt), _r(3, 2, 3, dtype=dt)), {}),
    "conv2d": lambda dt: ((_r(1, 2, 5, 5, dtype=dt), _r(3, 2, 3, 3, dtype=dt)), {}),
    "conv3d": lambda dt: ((_r(1, 2, 4, 4, 4, dtype=dt), _r(3, 2, 2, 2, 2, dtype=dt)), {}),
    "conv_transpose1d": lambda dt: ((_r(1, 2, 5, dtype=dt), _r(2, 3, 3, dtype=dt)), {}),
    "conv_transpose2d": lambda dt: ((_r(1, 2, 4, 4, dtype=dt), _r(2, 3, 3, 3, dtype=dt)), {}),
    "conv_transpose3d": lambda dt: ((_r(1, 2, 3, 3, 3, dtype=dt), _r(2, 3, 2, 2, 2, dtype=dt)), {}),
    "conv_tbc": lambda dt: ((_r(5, 2, 3, dtype=dt), _r(2, 3, 4, dtype=dt), _r(4, dtype=dt)), {}),
    "prelu": lambda dt: ((_r(2, 3, dtype=dt), _r(1, dtype=dt)), {}),
    "bmm": lambda dt: ((_r(2, 3, 4, dtype=dt), _r(2, 4, 5, dtype=dt)), {}),
    "mm": lambda dt: ((_r(3, 4, dtype=dt), _r(4, 5, dtype=dt)), {}),
    "mv": lambda dt: ((_r(3, 4, dtype=dt), _r(4, dtype=dt)), {}),
    "matmul": lambda dt: ((_r(3, 4, dtype=dt), _r(4, 5, dtype=dt)), {}),
    "einsum": lambda dt: (("ij,jk->ik", _r(3, 4, dtype=dt), _r(4, 5, dtype=dt)), {}),
    "linalg.vecdot": lambda dt: ((_r(3, 4, dtype=dt), _r(3, 4, dtype=dt)), {}),
    "ctc_loss": lambda dt: ((fnx.randn(4, 2, 3, dtype=dt).log_softmax(2), fnx.tensor([[1, 2], [2, 0]]), [4, 4],
                             [2, 1]), {}),
    "linalg.multi_dot": lambda dt: (([_r(3, 4, dtype=dt), _r(4, 2, dtype=dt), _r(2, 5, dtype=dt)],), {}),
    "linalg.cond": lambda dt: ((_r(3, 3, dtype=dt) + 3 * fnx.eye(3, dtype=dt),), {}),
    "baddbmm": lambda dt: ((_r(2, 3, 5, dtype=dt), _r(2, 3, 4, dtype=dt), _r(2, 4, 5, dtype=dt)), {}),
    "addmm": lambda dt: ((_r(3, 5, dtype=dt), _r(3, 4, dtype=dt), _r(4, 5, dtype=dt)), {}),
    "linear": lambda dt: ((_r(3, 4, dtype=dt), _r(5, 4, dtype=dt), _r(5, dtype=dt)), {}),
    "fft.fft": lambda dt: ((_r(4, 6, dtype=dt),), {}),
    "fft.ifft": lambda dt: ((_r(4, 6, dtype=dt),), {}),
    "fft.fft2": lambda dt: ((_r(4, 6, dtype=dt),), {}),
    "fft.ifft2": lambda dt: ((_r(4, 6, dtype=dt),), {}),
    "fft.fftn": lambda dt: ((_r(4, 6, dtype=dt),), {}),
    "fft.ifftn": lambda dt: ((_r(4, 6, dtype=dt),), {}),
    "fft.rfft": lambda dt: ((_r(4, 6, dtype=dt),), {}),
    "fft.irfft": lambda dt: ((_r(4, 6, dtype=dt),), {}),
    "fft.rfft2": lambda dt: ((_r(4, 6, dtype=dt),), {}),
    "fft.irfft2": lambda dt: ((_r(4, 6, dtype=dt),), {}),
    "fft.rfftn": lambda dt: ((_r(4, 6, dtype=dt),), {}),
    "fft.irfftn": lambda dt: ((_r(4, 6, dtype=dt),), {}),
    "fft.hfft": lambda dt: ((_r(4, 6, dtype=dt),), {}),
    "fft.ihfft": lambda dt: ((_r(4, 6, dtype=dt),), {}),
    "stft": lambda dt: ((_r(20, dtype=dt), 8), {"window": fnx.hann_window(8, dtype=dt), "return_complex": True}),
    "geqrf": lambda dt: ((_r(4, 3, dtype=dt),), {}),
    "orgqr": lambda dt: ((_r(4, 3, dtype=dt), _r(3, dtype=dt)), {}),
    "linalg.householder_product": lambda dt: ((_r(4, 3, dtype=dt), _r(3, dtype=dt)), {}),
    "linalg.eig": lambda dt: ((_r(3, 3, dtype=dt),), {}),
    "linalg.eigvals": lambda dt: ((_r(3, 3, dtype=dt),), {}),
    "lu_solve": lambda dt: ((_r(3, 2, dtype=dt), *fnx.linalg.lu_factor(_r(3, 3, dtype=fnx.float32)
                                                                      + 3 * fnx.eye(3))), {}),
    "quantile": lambda dt: ((_r(3, 5, dtype=dt), fnx.tensor([0.25, 0.5], dtype=dt)), {"dim": 1}),
    "nanquantile": lambda dt: ((_r(3, 5, dtype=dt), 0.5), {}),
    "scaled_dot_product_attention": lambda dt: ((_r(1, 2, 4, 8, dtype=dt), _r(1, 2, 4, 8, dtype=dt),
                                                 _r(1, 2, 4, 8, dtype=dt)), {}),
    # elementwise
    **{name: (lambda dt: ((_r(5, dtype=dt, lo=0.1, hi=0.9),), {})) for name in
       ["acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal", "rsqrt",
        "sinh", "tan", "softplus"]},
    "pow": lambda dt: ((_r(5, dtype=dt, lo=0.1), 2.5), {}),
    "addcdiv": lambda dt: ((_r(4, dtype=dt), _r(4, dtype=dt), _r(4, dtype=dt, lo=0.5)), {}),
    "addcmul": lambda dt: ((_r(4, dtype=dt), _r(4, dtype=dt), _r(4, dtype=dt)), {}),
    "atan2": lambda dt: ((_r(4, dtype=dt), _r(4, dtype=dt)), {}),
    "polar": lambda dt: ((_r(4, dtype=dt, lo=0.1), _r(4, dtype=dt)), {}),
    "view_as_complex": lambda dt: ((_r(3, 2, dtype=dt),), {}),
    "cdist": lambda dt: ((_r(3, 4, dtype=dt), _r(5, 4, dtype=dt)), {}),
    # reductions and norms
    **{name: (lambda dt: ((_r(3, 4, dtype=dt),), {"dim": 1})) for name in
       ["softmax", "log_softmax", "softmin", "cumprod", "cumsum", "logsumexp"]},
    **{name: (lambda dt: ((_r(3, 4, dtype=dt),), {})) for name in
       ["prod", "sum", "norm", "linalg.vector_norm", "linalg.matrix_norm", "normalize", "pdist", "trace"]},
    "dist": lambda dt: ((_r(3, 4, dtype=dt), _r(3, 4, dtype=dt)), {}),
    "renorm": lambda dt: ((_r(3, 4, dtype=dt), 2, 0, 0.5), {}),
    "dot": lambda dt: ((_r(4, dtype=dt), _r(4, dtype=dt)), {}),
    "tensordot": lambda dt: ((_r(3, 4, dtype=dt), _r(4, 5, dtype=dt)), {"dims": 1}),
    "cosine_similarity": lambda dt: ((_r(3, 4, dtype=dt), _r(3, 4, dtype=dt)), {}),
    "bilinear": lambda dt: ((_r(3, 4, dtype=dt), _r(3, 5, dtype=dt), _r(2, 4, 5, dtype=dt)), {}),
    "layer_norm": lambda dt: ((_r(3, 4, dtype=dt), (4,)), {}),
    "group_norm": lambda dt: ((_r(2, 4, 3, dtype=dt), 2), {}),
    # losses
    **{name: (lambda dt: ((_r(3, 4, dtype=dt), _r(3, 4, dtype=dt)), {})) for name in
       ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy_with_logits"]},
    "binary_cross_entropy": lambda dt: ((_r(3, 4, dtype=dt, lo=0.1, hi=0.9), _r(3, 4, dtype=dt, lo=0, hi=1)), {}),
    "kl_div": lambda dt: ((_r(3, 4, dtype=dt), _r(3, 4, dtype=dt, lo=0.1)), {"reduction": "batchmean"}),
    "poisson_nll_loss": lambda dt: ((_r(3, 4, dtype=dt), _r(3, 4, dtype=dt, lo=0.0, hi=3.0)), {}),
    "soft_margin_loss": lambda dt: ((_r(3, dtype=dt), _sign(3).to(dt)), {}),
    "hinge_embedding_loss": lambda dt: ((_r(3, dtype=dt), _sign(3).to(dt)), {}),
    "margin_ranking_loss": lambda dt: ((_r(3, dtype=dt), _r(3, dtype=dt), _sign(3).to(dt)), {}),
    "cosine_embedding_loss": lambda dt: ((_r(3, 4, dtype=dt), _r(3, 4, dtype=dt), _sign(3).to(dt)), {}),
    "triplet_margin_loss": lambda dt: ((_r(3, 4, dtype=dt), _r(3, 4, dtype=dt), _r(3, 4, dtype=dt, lo=0)), {}),
    "nll_loss": lambda dt: ((_r(3, 4, dtype=dt), _LONG), {}),
    "cross_entropy": lambda dt: ((_r(3, 4, dtype=dt), _LONG), {}),
    "multi_margin_loss": lambda dt: ((_r(3, 4, dtype=dt), _LONG), {}),
    # pooling
    "avg_pool3d": lambda dt: ((_r(1, 1, 4, 4, 4, dtype=dt), 2), {}),
    "max_pool3d": lambda dt: ((_r(1, 1, 4, 4, 4, dtype=dt), 2), {}),
    "adaptive_max_pool3d": lambda dt: ((_r(1, 2, 4, 4, 4, dtype=dt), 2), {}),
    "fractional_max_pool2d": lambda dt: ((_r(1, 2, 5, 5, dtype=dt), 2), {"output_size": 3}),
    "fractional_max_pool3d": lambda dt: ((_r(1, 2, 5, 5, 5, dtype=dt), 2), {"output_size": 3}),
    "multilabel_margin_loss": lambda dt: ((_r(3, 4, dtype=dt), fnx.tensor([[3, 0, -1, 1]] * 3)), {}),
    "adaptive_avg_pool3d": lambda dt: ((_r(1, 1, 4, 4, 4, dtype=dt), 2), {}),
    "max_unpool2d": _unpool2d,
    "max_unpool3d": _unpool3d,
    # linear algebra
    **{name: (lambda dt: ((_spd(dt),), {})) for name in
       ["inverse", "linalg.inv", "linalg.cholesky", "linalg.svdvals", "linalg.eigvalsh", "linalg.eigh", "linalg.qr",
        "linalg.svd", "linalg.matrix_rank", "pinverse", "qr", "svd", "cholesky", "cholesky_inverse", "linalg.cholesky_ex",
        "linalg.inv_ex"]},
    "cholesky_solve": lambda dt: ((_r(3, 2, dtype=dt), _spd(dt)), {}),
    "triangular_solve": lambda dt: ((_r(3, 2, dtype=dt), _spd(dt)), {}),
    "linalg.tensorinv": lambda dt: ((_spd(dt), 1), {}),
    "linalg.tensorsolve": lambda dt: ((_spd(dt), _r(3, dtype=dt)), {}),
    "addmv": lambda dt: ((_r(3, dtype=dt), _r(3, 4, dtype=dt), _r(4, dtype=dt)), {}),
    "addr": lambda dt: ((_r(3, 4, dtype=dt), _r(3, dtype=dt), _r(4, dtype=dt)), {}),
    "addbmm": lambda dt: ((_r(3, 5, dtype=dt), _r(2, 3, 4, dtype=dt), _r(2, 4, 5, dtype=dt)), {}),
    "chain_matmul": lambda dt: ((_r(3, 4, dtype=dt), _r(4, 2, dtype=dt), _r(2, 5, dtype=dt)), {}),
    "cross": lambda dt: ((_r(2, 3, dtype=dt), _r(2, 3, dtype=dt)), {"dim": 1}),
    "ormqr": lambda dt: ((_r(4, 3, dtype=dt), _r(3, dtype=dt), _r(4, 2, dtype=dt)), {}),
    "linalg.solve": lambda dt: ((_spd(dt), _r(3, 2, dtype=dt)), {}),
    "linalg.lstsq": lambda dt: ((_spd(dt), _r(3, 2, dtype=dt)), {}),
    # joins and indexed writes
    "cat": lambda dt: (([_r(2, 3, dtype=dt), _r(1, 3, dtype=dt)],), {}),
    "stack": lambda dt: (([_r(2, 3, dtype=dt), _r(2, 3, dtype=dt)],), {}),
    "index_copy": lambda dt: ((_r(3, 4, dtype=dt), 0, fnx.tensor([0, 2]), _r(2, 4, dtype=dt)), {}),
    "index_put": lambda dt: ((_r(3, 4, dtype=dt), (fnx.tensor([0, 2]),), _r(2, 4, dtype=dt)), {}),
    "grid_sample": lambda dt: ((_r(1, 2, 4, 4, dtype=dt), _r(1, 3, 3, 2, dtype=dt)), {"align_corners": False}),
    "scatter_add": lambda dt: ((_r(3, 4, dtype=dt), 0, fnx.tensor([[0, 1, 2, 0]]), _r(1, 4, dtype=dt)), {}),
}


def _functions(name: str) -> list:
    """fnx's functions of PyTorch's name `name` (torch.X and torch.nn.functional.X may be two; torch.X's with ATen's
    own signature, fnx/nn/torch_level.py, take other samples: test_nn_torch_level checks their autocasting)."""
    found = []
    for space in (F,) if name in fnx.nn.torch_level.__all__ else (fnx, F):
        obj = space
        try:
            for part in name.split("."):
                obj = getattr(obj, part)
        except AttributeError:
            continue
        if obj not in found:
            found.append(obj)
    return found


def _cases(device_type: str) -> list:
    return [pytest.param(name, policy, id=f"{name}") for name, policy in sorted(POLICIES[device_type].items())
            if _functions(name) and policy != "banned"]


def _floating_outputs(out) -> list:
    """The floating outputs of an op; a complex output (polar, view_as_complex) as the real view of its parts."""
    outs = list(out) if isinstance(out, tuple) else [out]
    outs = [fnx.view_as_real(o) if isinstance(o, fnx.Tensor) and o.dtype.is_complex else o for o in outs]
    return [o for o in outs if isinstance(o, fnx.Tensor) and o.dtype.is_floating_point]


def _inputs(name: str, policy: str, low):
    """Inputs that show the policy: float32 for "lower", the low dtype for "fp32", the low dtype with the first
    floating tensor in float32 for "promote"; and the dtype the outputs must have."""
    if policy == "lower":
        return (*SAMPLES[name](fnx.float32), low)
    args, kwargs = SAMPLES[name](low)
    if policy == "fp32":
        return args, kwargs, fnx.float32
    args = list(args)
    for i, a in enumerate(args):
        if isinstance(a, list):
            args[i] = [a[0].float(), *a[1:]]
            break
        if isinstance(a, fnx.Tensor) and a.dtype.is_floating_point:
            args[i] = a.float()
            break
    return tuple(args), kwargs, fnx.float32


def test_every_listed_op_fnx_has_is_wrapped_and_sampled():
    for device_type in LISTS:
        for name in POLICIES[device_type]:
            for fn in _functions(name):
                assert getattr(fn, "autocast_policies", {}).get(device_type) == POLICIES[device_type][name], name
                assert name in SAMPLES, f"{name}: add sample inputs to SAMPLES"


@pytest.mark.parametrize("name,policy", _cases("cpu"))
def test_cpu_autocast_dtypes_follow_pytorchs_lists(name, policy):
    args, kwargs, expected = _inputs(name, policy, fnx.bfloat16)
    for fn in _functions(name):
        with fnx.autocast("cpu"):
            outs = _floating_outputs(fn(*args, **kwargs))
        if name == "linalg.matrix_rank":
            assert outs == []
            continue
        assert outs and all(o.dtype == expected for o in outs), (name, [o.dtype for o in outs])


@pytest.mark.parametrize("name,policy", _cases("cuda"))
def test_cuda_lists_dtypes(name, policy):
    """The CUDA table's policies, applied to CPU tensors (the casting does not depend on the device)."""
    args, kwargs, expected = _inputs(name, policy, fnx.float16)
    for fn in _functions(name):
        policies = {"cpu": fn.autocast_policies["cuda"]}
        outs = _floating_outputs(_autocast_call(fn, name, policies, {"cpu": fnx.float16}, args, kwargs))
        assert outs and all(o.dtype == expected for o in outs), (name, [o.dtype for o in outs])


def test_cuda_binary_cross_entropy_is_banned_with_the_fix_named():
    p, t = _r(3, lo=0.1, hi=0.9), _r(3, lo=0, hi=1)
    with pytest.raises(RuntimeError, match="binary_cross_entropy_with_logits"):
        _autocast_call(F.binary_cross_entropy, "binary_cross_entropy", {"cpu": "banned"}, {"cpu": fnx.float16},
                       (p, t), {})


def test_unlisted_ops_float64_and_explicit_dtype_are_left_alone():
    x, w = _r(3, 4), _r(5, 4)
    with fnx.autocast("cpu"):
        assert (x + x).dtype == fnx.float32 and fnx.relu(x).dtype == fnx.float32
        assert F.linear(x.double(), w.double()).dtype == fnx.float64   # float64 is not eligible
        assert fnx.prod(x.bfloat16(), dtype=fnx.bfloat16).dtype == fnx.bfloat16   # the caller's dtype wins
        assert fnx.prod(x.bfloat16()).dtype == fnx.float32


@pytest.mark.parametrize("name", ["linear", "conv2d", "bmm", "scaled_dot_product_attention"])
def test_bfloat16_computes_close_to_float32(name):
    args, kwargs = SAMPLES[name](fnx.float32)
    fn = _functions(name)[0]
    with fnx.autocast("cpu"):
        low = fn(*args, **kwargs)
    assert low.dtype == fnx.bfloat16
    np.testing.assert_allclose(low.float().numpy(), fn(*args, **kwargs).numpy(), rtol=0.05, atol=0.05)


# ---------------------------------------------------------------- state: nesting, decorator, threads, aliases
def test_defaults_nesting_and_disable_restore():
    assert not fnx.is_autocast_enabled("cpu")
    assert fnx.get_autocast_dtype("cpu") == fnx.bfloat16 and fnx.get_autocast_dtype("cuda") == fnx.float16
    x, w = _r(3, 4), _r(5, 4)
    with fnx.autocast("cpu"):
        assert fnx.is_autocast_enabled("cpu") and not fnx.is_autocast_enabled("cuda")
        with fnx.autocast("cpu", dtype=fnx.float16):
            assert fnx.get_autocast_dtype("cpu") == fnx.float16
            assert F.linear(x, w).dtype == fnx.float16
            with fnx.autocast("cpu", enabled=False):
                assert not fnx.is_autocast_enabled("cpu")
                assert F.linear(x, w).dtype == fnx.float32
            assert F.linear(x, w).dtype == fnx.float16
        assert fnx.get_autocast_dtype("cpu") == fnx.bfloat16
        with pytest.raises(ValueError):
            with fnx.autocast("cpu", enabled=False):
                raise ValueError("leaves the region")
        assert fnx.is_autocast_enabled("cpu")
        assert F.linear(x, w).dtype == fnx.bfloat16
    assert not fnx.is_autocast_enabled("cpu") and F.linear(x, w).dtype == fnx.float32


def test_decorator_and_pytorch_paths():
    x, w = _r(3, 4), _r(5, 4)

    @fnx.autocast("cpu")
    def forward(x, w):
        return F.linear(x, w)

    assert forward(x, w).dtype == fnx.bfloat16 and not fnx.is_autocast_enabled("cpu")
    assert fnx.amp.autocast is fnx.autocast
    with fnx.cpu.amp.autocast():
        assert F.linear(x, w).dtype == fnx.bfloat16
    with fnx.cpu.amp.autocast(dtype=fnx.float16):
        assert F.linear(x, w).dtype == fnx.float16
    assert fnx.amp.is_autocast_available("cpu") and not fnx.amp.is_autocast_available("mps")


def test_pytorch_amp_imports_under_the_torch_alias(tmp_path):
    script = tmp_path / "amp_script.py"
    script.write_text(
        "import torch\n"
        "import torch.nn.functional as F\n"
        "from torch.cuda.amp import GradScaler, autocast\n"
        "import torch.cpu.amp\n"
        "assert torch.amp.autocast is torch.autocast and torch.amp.GradScaler is torch.GradScaler\n"
        "with torch.cpu.amp.autocast():\n"
        "    print(F.linear(torch.randn(2, 3), torch.randn(4, 3)).dtype, torch.is_autocast_enabled('cpu'))\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    result = subprocess.run([sys.executable, "-m", "fnx", "run", str(script)], capture_output=True, text=True,
                            env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["fnx.bfloat16", "True"]


def test_state_is_per_thread():
    seen = []
    with fnx.autocast("cpu"):
        t = threading.Thread(target=lambda: seen.append((fnx.is_autocast_enabled("cpu"),
                                                         F.linear(_r(3, 4), _r(5, 4)).dtype)))
        t.start()
        t.join()
    assert seen == [(False, fnx.float32)]


def test_bad_arguments():
    with pytest.raises(ValueError, match="device_type 'tpu'"):
        fnx.autocast("tpu")
    with pytest.warns(UserWarning, match="not float32"):
        region = fnx.autocast("cpu", dtype=fnx.float32)
    with region:
        assert not fnx.is_autocast_enabled("cpu")


@pytest.mark.skipif(fnx.cuda.is_available(), reason="checks the behaviour without a GPU")
def test_cuda_autocast_without_a_gpu_warns_and_disables():
    with pytest.warns(UserWarning, match="CUDA is not available"):
        region = fnx.cuda.amp.autocast()
    with region:
        assert not fnx.is_autocast_enabled("cuda")
    with pytest.warns(UserWarning, match="CUDA is not available"):
        assert not fnx.cuda.amp.GradScaler().is_enabled()


@pytest.mark.cuda
def test_cuda_autocast_on_the_gpu():
    x, w = _r(8, 16).to("cuda"), _r(4, 16).to("cuda")
    with fnx.autocast("cuda"):
        y = F.linear(x, w)
        assert y.dtype == fnx.float16 and F.softmax(y, -1).dtype == fnx.float32
        assert F.linear(x.cpu(), w.cpu()).dtype == fnx.float32   # CPU tensors: cuda autocast does not apply
    np.testing.assert_allclose(y.float().cpu().numpy(), F.linear(x, w).cpu().numpy(), rtol=0.01, atol=0.01)


# ---------------------------------------------------------------- gradients, the cast cache, compile
def test_float32_parameters_get_float32_gradients():
    model = fnx.nn.Sequential(fnx.nn.Linear(6, 8), fnx.nn.ReLU(), fnx.nn.Linear(8, 3))
    x, y = _r(5, 6), fnx.tensor([0, 1, 2, 0, 1])
    with fnx.autocast("cpu"):
        loss = F.cross_entropy(model(x), y)
    assert loss.dtype == fnx.float32
    loss.backward()
    grads = {n: p.grad for n, p in model.named_parameters()}
    model.zero_grad()
    F.cross_entropy(model(x), y).backward()
    for n, p in model.named_parameters():
        assert grads[n].dtype == fnx.float32
        np.testing.assert_allclose(grads[n].numpy(), p.grad.numpy(), rtol=0.1, atol=0.02)


def test_cached_parameter_casts_follow_in_place_updates():
    x, w = _r(2, 4), fnx.nn.Parameter(_r(3, 4))
    for cache_enabled in (True, False):
        with fnx.autocast("cpu", cache_enabled=cache_enabled):
            first = F.linear(x, w)
            with fnx.no_grad():
                w.mul_(2.0)
            second = F.linear(x, w)
        np.testing.assert_allclose(second.detach().float().numpy(), 2 * first.detach().float().numpy(),
                                   rtol=0.02, atol=0.02)
        with fnx.no_grad():
            w.mul_(0.5)


def test_compile_traced_under_autocast_computes_in_bfloat16():
    x, w = _r(4, 8), _r(3, 8)

    def f(x, w):
        return F.softmax(F.linear(x, w), -1).sum(-1)

    compiled = fnx.compile(f)
    assert compiled(x, w).dtype == fnx.float32
    with fnx.autocast("cpu"):
        eager = f(x, w)
        out = compiled(x, w)
        text = str(fnx.make_jaxpr(f)(x, w))
    assert "convert[dtype=bfloat16]" in text and "bf16" in text
    assert out.dtype == eager.dtype == fnx.bfloat16
    np.testing.assert_allclose(out.float().numpy(), eager.float().numpy(), rtol=0.02)
    assert compiled(x, w).dtype == fnx.float32   # outside the region: the float32 trace again


# ---------------------------------------------------------------- GradScaler
def _problem(seed=0):
    rng = np.random.default_rng(seed)
    x = fnx.tensor(rng.normal(size=(64, 4)).astype(np.float32))
    y = x @ fnx.tensor([[1.0], [-2.0], [0.5], [3.0]]) + 0.25
    return x, y


def test_scale_unscale_and_clip_see_true_gradients():
    model = fnx.nn.Linear(4, 1)
    x, y = _problem()
    F.mse_loss(model(x), y).backward()
    true = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    scaler = fnx.amp.GradScaler("cpu", init_scale=1024.0)
    loss = F.mse_loss(model(x), y)
    scaled = scaler.scale(loss)
    assert scaled.dtype == fnx.float32 and float(scaled) == pytest.approx(1024.0 * float(loss), rel=1e-6)
    assert [t.item() for t in scaler.scale([loss, loss])] == pytest.approx([float(scaled)] * 2, rel=1e-6)
    scaled.backward()
    opt = fnx.optim.SGD(model.parameters(), lr=0.1)
    scaler.unscale_(opt)
    for p, g in zip(model.parameters(), true):
        np.testing.assert_allclose(p.grad.numpy(), g.numpy(), rtol=1e-5)
    norm = fnx.nn.utils.clip_grad_norm_(model.parameters(), 1e9)
    assert float(norm) == pytest.approx(float(fnx.sqrt(sum((g ** 2).sum() for g in true))), rel=1e-5)
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.unscale_(opt)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.step(opt)
    scaler.update()


def test_step_is_skipped_on_inf_and_the_scale_backs_off():
    model = fnx.nn.Linear(4, 1)
    before = [p.detach().clone() for p in model.parameters()]
    opt = fnx.optim.Adam(model.parameters(), lr=0.1, fused=True)
    scaler = fnx.amp.GradScaler("cpu", init_scale=8.0)
    x, y = _problem()
    scaler.scale(F.mse_loss(model(x), y)).backward()
    model.weight.grad[0, 0] = float("inf")
    assert scaler.step(opt) is None
    for p, b in zip(model.parameters(), before):
        np.testing.assert_array_equal(p.detach().numpy(), b.numpy())
    scaler.update()
    assert scaler.get_scale() == 4.0


@given(st.lists(st.booleans(), min_size=1, max_size=12), st.integers(1, 3))
def test_growth_and_backoff_schedule(infs, interval):
    scaler = fnx.amp.GradScaler("cpu", init_scale=16.0, growth_interval=interval, growth_factor=2.0,
                                backoff_factor=0.25)
    p = fnx.nn.Parameter(fnx.zeros(2))
    opt = fnx.optim.SGD([p], lr=0.0)
    scale, clean = 16.0, 0
    for inf in infs:
        p.grad = fnx.tensor([float("nan") if inf else 1.0, 0.0])
        scaler.step(opt)
        scaler.update()
        if inf:
            scale, clean = scale * 0.25, 0
        else:
            clean += 1
            if clean == interval:
                scale, clean = scale * 2.0, 0
        assert scaler.get_scale() == scale


def test_state_dict_round_trip_and_explicit_scale():
    scaler = fnx.amp.GradScaler("cpu", init_scale=32.0, growth_interval=7)
    p = fnx.nn.Parameter(fnx.zeros(1))
    p.grad = fnx.ones(1)
    opt = fnx.optim.SGD([p], lr=0.1)
    scaler.step(opt)
    scaler.update()
    state = scaler.state_dict()
    assert state == {"scale": 32.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 7,
                     "_growth_tracker": 1}
    other = fnx.amp.GradScaler("cpu")
    other.load_state_dict(state)
    assert other.state_dict() == state
    other.update(new_scale=3.0)
    assert other.get_scale() == 3.0
    with pytest.raises(RuntimeError, match="empty"):
        other.load_state_dict(fnx.amp.GradScaler("cpu", enabled=False).state_dict())


def test_disabled_scaler_passes_through():
    scaler = fnx.amp.GradScaler("cpu", enabled=False)
    loss = fnx.tensor(2.0)
    assert scaler.scale(loss) is loss and scaler.get_scale() == 1.0 and not scaler.is_enabled()
    p = fnx.nn.Parameter(fnx.ones(1))
    p.grad = fnx.ones(1)
    opt = fnx.optim.SGD([p], lr=0.5)
    scaler.unscale_(opt)
    scaler.step(opt)
    scaler.update()
    assert p.item() == 0.5 and scaler.state_dict() == {}


def test_training_with_autocast_and_grad_scaler_converges():
    fnx.manual_seed(0)
    model = fnx.nn.Sequential(fnx.nn.Linear(4, 16), fnx.nn.Tanh(), fnx.nn.Linear(16, 1))
    opt = fnx.optim.Adam(model.parameters(), lr=0.02)
    scaler = fnx.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=5)
    x, y = _problem(1)
    losses = []
    for _ in range(150):
        opt.zero_grad()
        with fnx.autocast("cpu"):
            loss = F.mse_loss(model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        fnx.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    assert all(p.dtype == fnx.float32 for p in model.parameters())
    assert losses[-1] < 0.05 * losses[0]
    assert scaler.get_scale() > 2.0 ** 10   # clean steps grew the scale


def test_no_warning_from_plain_use():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with fnx.autocast("cpu"):
            F.linear(_r(2, 3), _r(4, 3))
        fnx.amp.GradScaler("cpu")


def test_the_docs_table_lists_every_op():
    text = (Path(__file__).resolve().parent.parent / "docs" / "nn-optim-data.md").read_text()
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 4 and cells[0] in LISTS:
            rows.setdefault(cells[0], []).append(set(re.findall(r"`([\w.]+)`", cells[2] + cells[3])))
    for device_type, lists in LISTS.items():
        assert rows[device_type] == [set(names) for names in lists.values()], device_type
