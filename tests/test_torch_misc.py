"""PyTorch's torch.random (fork_rng, seeding), torch's global flags (warn_always, the autocast setters, autograd's
multithreading), torch.testing.assert_allclose and torch.utils.swap_tensors."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import fnx
from fnx import rng
from fnx.ops import sampling
from fnx.torch_alias import _TORCH


# ---------------------------------------------------------------- torch.random
def test_torch_random_is_fnx_rng_and_fnx_random_stays_jax():
    assert _TORCH.fnx_name("torch.random") == "fnx.rng"
    assert not hasattr(fnx.random, "manual_seed") and hasattr(fnx.random, "PRNGKey")
    assert rng.default_generator is fnx.default_generator and rng.Generator is fnx.Generator
    assert rng.thread_safe_generator() is None


def test_fork_rng_restores_state_and_seed():
    fnx.manual_seed(1)
    fnx.rand(3)
    expected = fnx.rand(4)
    fnx.manual_seed(1)
    fnx.rand(3)
    with rng.fork_rng():
        fnx.manual_seed(5)
        inside = fnx.rand(4)
    assert rng.initial_seed() == 1   # as PyTorch, the seed comes back too
    np.testing.assert_array_equal(fnx.rand(4).numpy(), expected.numpy())
    fnx.manual_seed(5)
    np.testing.assert_array_equal(fnx.rand(4).numpy(), inside.numpy())


def test_fork_rng_restores_on_error_and_disabled_forks_nothing():
    fnx.manual_seed(3)
    state = rng.get_rng_state()
    with pytest.raises(ZeroDivisionError):
        with rng.fork_rng(devices=[]):
            fnx.rand(10)
            1 / 0
    np.testing.assert_array_equal(rng.get_rng_state().numpy(), state.numpy())
    with rng.fork_rng(enabled=False):
        fnx.rand(2)
    assert not np.array_equal(rng.get_rng_state().numpy(), state.numpy())
    with rng.fork_rng(device_type="meta"), rng.fork_rng(device_type="cpu"):
        pass
    with pytest.raises(RuntimeError, match="device_type 'xpu' has no generators"):
        with rng.fork_rng(device_type="xpu"):
            pass


def test_fork_rng_cuda_generators_not_yet_drawn_restart_from_their_seed():
    """A CUDA default generator that has drawn nothing is restored exactly: it starts again from its seed (no
    GPU is touched: generators are created lazily)."""
    dev = fnx.device("cuda", 0)
    fnx.manual_seed(7)
    with rng.fork_rng(devices=[0]):
        fnx.cuda.manual_seed(11)
        assert sampling._cuda_seeds[0] == 11
    assert sampling._cuda_seeds[0] == 7 and dev not in sampling._defaults
    fnx.manual_seed(0)


def test_manual_seed_range_and_state_dtype_like_pytorch():
    assert rng.manual_seed(-1).initial_seed() == 2 ** 64 - 1
    assert rng.manual_seed(-2 ** 63).initial_seed() == 2 ** 63
    for bad in (2 ** 64, -2 ** 63 - 1):
        with pytest.raises(ValueError, match="seed must be in"):
            rng.manual_seed(bad)
    with pytest.raises(TypeError, match="uint8"):
        rng.set_rng_state(fnx.zeros(48))
    rng.manual_seed(0)


# ---------------------------------------------------------------- flags
def test_warn_always_repeats_warn_once_warnings():
    assert fnx.is_warn_always_enabled() is False
    with pytest.raises(TypeError, match="expects a bool"):
        fnx.set_warn_always(1)
    a = fnx.randn(3, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fnx.chain_matmul(a, a)   # warned once now, if no earlier test did
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fnx.chain_matmul(a, a)
        fnx.set_warn_always(True)
        try:
            fnx.chain_matmul(a, a)
            fnx.chain_matmul(a, a)
        finally:
            fnx.set_warn_always(False)
    assert len(caught) == 2 and "chain_matmul is deprecated" in str(caught[0].message)


def test_autocast_setters_switch_autocast_outside_regions():
    x = fnx.ones(2, 2)
    assert not fnx.is_autocast_enabled("cpu")
    fnx.set_autocast_enabled("cpu", True)
    try:
        assert (x @ x).dtype is fnx.bfloat16
        fnx.set_autocast_dtype("cpu", fnx.float16)
        assert (x @ x).dtype is fnx.float16 and fnx.get_autocast_dtype("cpu") is fnx.float16
        with fnx.autocast("cpu", enabled=False):
            fnx.set_autocast_enabled("cpu", True)   # undone when the region ends, as in PyTorch
        assert fnx.is_autocast_enabled("cpu")
    finally:
        fnx.set_autocast_enabled("cpu", False)
        fnx.set_autocast_dtype("cpu", fnx.bfloat16)
    assert (x @ x).dtype is fnx.float32
    fnx.set_autocast_enabled(True)   # the older one-argument form is "cuda"'s
    assert fnx.is_autocast_enabled() and not fnx.is_autocast_enabled("cpu")
    fnx.set_autocast_enabled(False)
    fnx.set_autocast_cache_enabled(False)
    assert fnx.is_autocast_cache_enabled() is False
    fnx.set_autocast_cache_enabled(True)
    with pytest.raises(TypeError, match="enabled must be a bool"):
        fnx.set_autocast_enabled("cpu", 1)
    with pytest.raises(TypeError, match="dtype must be an fnx dtype"):
        fnx.set_autocast_dtype("cpu", "float16")
    with pytest.raises(ValueError, match="device_type 'xla' is not supported"):
        fnx.set_autocast_enabled("xla", True)


def test_deprecated_per_device_autocast_names_warn_and_delegate():
    with pytest.warns(DeprecationWarning, match=r"torch.set_autocast_cpu_enabled\(enabled\) is deprecated"):
        fnx.set_autocast_cpu_enabled(True)
    with pytest.warns(DeprecationWarning, match=r"use torch.is_autocast_enabled\('cpu'\)"):
        assert fnx.is_autocast_cpu_enabled()
    fnx.set_autocast_enabled("cpu", False)
    with pytest.warns(DeprecationWarning):
        fnx.set_autocast_gpu_dtype(fnx.bfloat16)
    with pytest.warns(DeprecationWarning):
        assert fnx.get_autocast_gpu_dtype() is fnx.bfloat16
    fnx.set_autocast_dtype("cuda", fnx.float16)
    with pytest.warns(DeprecationWarning):
        fnx.set_autocast_cpu_dtype(fnx.float16)
    with pytest.warns(DeprecationWarning):
        assert fnx.get_autocast_cpu_dtype() is fnx.float16
    fnx.set_autocast_dtype("cpu", fnx.bfloat16)


def test_multithreading_flag_function_context_manager_and_decorator():
    ag = fnx.autograd
    assert ag.is_multithreading_enabled() and ag.is_view_replay_enabled() is False
    with ag.set_multithreading_enabled(False):
        assert not ag.is_multithreading_enabled()
    assert ag.is_multithreading_enabled()

    @ag.set_multithreading_enabled(False)
    def inside():
        return ag.is_multithreading_enabled()

    assert ag.is_multithreading_enabled() and inside() is False and ag.is_multithreading_enabled()
    ag.set_multithreading_enabled(False)
    assert not ag.is_multithreading_enabled()
    ag.set_multithreading_enabled(True)


# ---------------------------------------------------------------- testing.assert_allclose, utils.swap_tensors
def test_assert_allclose_deprecated_alias():
    with pytest.warns(FutureWarning, match="assert_allclose\\(\\)` is deprecated since 1.12"):
        fnx.testing.assert_allclose(fnx.ones(2), fnx.ones(2) + 5e-5)   # float32: rtol 1e-4, atol 1e-5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        fnx.testing.assert_allclose(fnx.tensor([np.nan, 1.0]), [np.nan, 1.0])   # NaNs equal; a list takes the dtype
        fnx.testing.assert_allclose(fnx.ones(2, dtype=fnx.float64), fnx.ones(2))   # dtypes are not compared
        with pytest.raises(AssertionError, match="Mismatched elements: 2 / 2"):
            fnx.testing.assert_allclose(fnx.ones(2), fnx.ones(2) + 1e-3)
        with pytest.raises(AssertionError, match="custom"):
            fnx.testing.assert_allclose(fnx.ones(2), fnx.zeros(2), msg="custom")


def test_swap_tensors_exchanges_contents_keeping_identity():
    a, b = fnx.ones(2, requires_grad=True), fnx.zeros(3)
    fnx.utils.swap_tensors(a, b)
    assert a.shape == (3,) and not a.requires_grad and b.shape == (2,) and b.requires_grad
    p, q = fnx.nn.Parameter(fnx.ones(2)), fnx.nn.Parameter(fnx.zeros(2))
    q.tag = "q"
    model = fnx.nn.Linear(2, 2)
    model.weight, model.bias = p, q
    fnx.utils.swap_tensors(p, q)
    assert model.weight.tag == "q" and not hasattr(q, "tag")
    np.testing.assert_array_equal(model.weight.detach().numpy(), [0.0, 0.0])
    with pytest.raises(RuntimeError, match="different slots"):
        fnx.utils.swap_tensors(fnx.ones(2), fnx.nn.Parameter(fnx.ones(2)))
    with pytest.raises(TypeError, match="t2 must be a tensor"):
        fnx.utils.swap_tensors(fnx.ones(2), np.ones(2))
