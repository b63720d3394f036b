"""torch's runtime switches that fnx records: inter-op threads, the deterministic debug mode, and the
torch.backends modules of libraries fnx does not use (mkl, mkldnn, openmp, nnpack, opt_einsum). Values and
errors as torch 2.13 gives them."""
import importlib.util

import pytest
from hypothesis import given, strategies as st

import fnx
from fnx import backends


@pytest.fixture
def restore_determinism():
    yield
    fnx.use_deterministic_algorithms(False)


@given(st.integers(1, 64))
def test_interop_threads_round_trip(n):
    old = fnx.get_num_interop_threads()
    try:
        fnx.set_num_interop_threads(n)
        assert fnx.get_num_interop_threads() == n
    finally:
        fnx.set_num_interop_threads(old)


def test_interop_threads_default_and_errors():
    assert fnx.get_num_interop_threads() >= 1
    for bad in (0, -1):
        with pytest.raises(RuntimeError, match="expected a positive integer"):
            fnx.set_num_interop_threads(bad)
    with pytest.raises(RuntimeError, match="expected an int, but got float"):
        fnx.set_num_interop_threads(2.0)


def test_deterministic_debug_mode(restore_determinism):
    assert fnx.get_deterministic_debug_mode() == 0
    fnx.set_deterministic_debug_mode("warn")
    assert fnx.get_deterministic_debug_mode() == 1
    assert fnx.are_deterministic_algorithms_enabled() and fnx.is_deterministic_algorithms_warn_only_enabled()
    fnx.set_deterministic_debug_mode(2)
    assert fnx.get_deterministic_debug_mode() == 2
    assert fnx.are_deterministic_algorithms_enabled() and not fnx.is_deterministic_algorithms_warn_only_enabled()
    fnx.use_deterministic_algorithms(True, warn_only=True)
    assert fnx.get_deterministic_debug_mode() == 1
    fnx.set_deterministic_debug_mode("default")
    assert fnx.get_deterministic_debug_mode() == 0 and not fnx.are_deterministic_algorithms_enabled()
    fnx.set_deterministic_debug_mode("error")
    assert fnx.get_deterministic_debug_mode() == 2


def test_deterministic_debug_mode_errors():
    with pytest.raises(RuntimeError, match="expected one of `default`, `warn`, `error`, but got x"):
        fnx.set_deterministic_debug_mode("x")
    with pytest.raises(RuntimeError, match="expected 0, 1, or 2, but got 3"):
        fnx.set_deterministic_debug_mode(3)
    with pytest.raises(TypeError, match="debug_mode must be str or int, but got float"):
        fnx.set_deterministic_debug_mode(1.0)
    assert fnx.get_deterministic_debug_mode() == 0


def test_unused_libraries_are_unavailable():
    for module in (backends.mkl, backends.mkldnn, backends.openmp, backends.nnpack):
        assert module.is_available() is False
    with backends.mkl.verbose(backends.mkl.VERBOSE_ON):
        pass


def test_mkldnn_flags():
    assert (backends.mkldnn.enabled, backends.mkldnn.deterministic, backends.mkldnn.allow_tf32) == (True, False, True)
    with backends.mkldnn.flags(enabled=False, deterministic=True):
        assert (backends.mkldnn.enabled, backends.mkldnn.deterministic) == (False, True)
    assert (backends.mkldnn.enabled, backends.mkldnn.deterministic) == (True, False)
    assert backends.mkldnn.set_flags(_enabled=False) == (True, False, True)
    assert backends.mkldnn.set_flags(_enabled=True) == (False, False, True)


def test_nnpack_flags():
    assert backends.nnpack.set_flags(True) == (False,)   # torch: the previous setting, as a 1-tuple
    with backends.nnpack.flags(enabled=False):
        assert backends.nnpack.set_flags(False) == (False,)
    assert backends.nnpack.set_flags(False) == (True,)


def test_opt_einsum():
    installed = importlib.util.find_spec("opt_einsum") is not None
    assert backends.opt_einsum.is_available() is installed
    assert backends.opt_einsum.enabled is installed
    assert backends.opt_einsum.strategy == ("auto" if installed else None)
    assert (backends.opt_einsum.get_opt_einsum() is None) is not installed
    with backends.opt_einsum.flags(enabled=True, strategy="greedy"):
        assert (backends.opt_einsum.enabled, backends.opt_einsum.strategy) == (True, "greedy")
    assert backends.opt_einsum.enabled is installed
    with pytest.raises(ValueError, match="strategy must be one of"):
        backends.opt_einsum.flags(strategy="bad")
