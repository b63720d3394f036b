"""fnx.signal.windows (PyTorch's torch.signal.windows): values against scipy.signal.windows for symmetric and
periodic windows of every length class, dtypes, requires_grad, PyTorch's errors, and the torch alias path."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.signal.windows as scipy_windows
from hypothesis import given, settings
from hypothesis import strategies as st

import fnx
from fnx.signal import windows

# name -> (fnx keyword arguments, scipy keyword arguments)
WINDOWS = {
    "bartlett": ({}, {}),
    "blackman": ({}, {}),
    "cosine": ({}, {}),
    "exponential": ({"tau": 3.0}, {"tau": 3.0}),
    "gaussian": ({"std": 2.5}, {"std": 2.5}),
    "general_cosine": ({"a": [0.5, 0.3, 0.2]}, {"a": [0.5, 0.3, 0.2]}),
    "general_hamming": ({"alpha": 0.6}, {"alpha": 0.6}),
    "hamming": ({}, {}),
    "hann": ({}, {}),
    "kaiser": ({"beta": 5.0}, {"beta": 5.0}),
    "nuttall": ({}, {}),
}


@pytest.mark.parametrize("name", WINDOWS)
@settings(max_examples=15, deadline=None)
@given(M=st.integers(0, 70), sym=st.booleans())
def test_windows_equal_scipy(name, M, sym):
    ours, theirs = WINDOWS[name]
    got64 = getattr(windows, name)(M, sym=sym, dtype=fnx.float64, **ours)
    got32 = getattr(windows, name)(M, sym=sym, dtype=fnx.float32, **ours)
    want = getattr(scipy_windows, name)(M, sym=sym, **theirs)
    assert got64.dtype is fnx.float64 and got32.dtype is fnx.float32 and got64.shape == got32.shape == (M,)
    np.testing.assert_allclose(got64.numpy(), want, rtol=0, atol=1e-14)
    np.testing.assert_allclose(got32.numpy(), want, rtol=0, atol=1e-6)   # PyTorch's float32 differs by <= 7e-7


def test_defaults_match_pytorch():
    assert windows.hann(4).dtype is fnx.get_default_dtype()
    np.testing.assert_allclose(windows.kaiser(5).numpy(), scipy_windows.kaiser(5, beta=12.0), atol=1e-7)
    np.testing.assert_allclose(windows.gaussian(6).numpy(), scipy_windows.gaussian(6, std=1.0), atol=1e-7)
    np.testing.assert_allclose(windows.general_hamming(6).numpy(), scipy_windows.general_hamming(6, 0.54), atol=1e-7)
    # the periodic windows are the first M points of the symmetric window of M + 1 points
    np.testing.assert_allclose(windows.hann(8, sym=False).numpy(), windows.hann(9).numpy()[:8], atol=1e-7)


def test_exponential_with_a_center():
    got = windows.exponential(5, center=1.0, tau=2.0, sym=False, dtype=fnx.float64).numpy()
    np.testing.assert_allclose(got, scipy_windows.exponential(5, center=1.0, tau=2.0, sym=False), atol=1e-15)
    # a one-point window with a center is exp(-|center| / tau) in PyTorch (scipy returns 1): PyTorch's 0.60653067
    np.testing.assert_allclose(windows.exponential(1, center=1.0, tau=2.0, sym=False).numpy(), [0.60653067])


def test_requires_grad_gives_a_leaf():
    w = windows.hann(5, requires_grad=True)
    assert w.requires_grad and w.is_leaf
    (w * w).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), 2 * w.detach().numpy())


@pytest.mark.parametrize("call, error, message", [
    (lambda: windows.hann(-1), ValueError, "general_cosine requires non-negative window length, got M=-1"),
    (lambda: windows.bartlett(-2), ValueError, "bartlett requires non-negative window length"),
    (lambda: windows.hann(3, dtype=fnx.float16), ValueError, "expects float32 or float64 dtypes, got: .*float16"),
    (lambda: windows.cosine(3, dtype=fnx.int64), ValueError, "cosine expects float32 or float64 dtypes"),
    (lambda: windows.gaussian(3, std=0.0), ValueError, "gaussian: standard deviation must be positive"),
    (lambda: windows.kaiser(3, beta=-1.0), ValueError, "kaiser: beta must be non-negative"),
    (lambda: windows.exponential(3, center=1.0), ValueError, "center must be None for symmetric windows"),
    (lambda: windows.exponential(3, tau=0.0), ValueError, "exponential: tau must be positive"),
    (lambda: windows.general_cosine(3, a=[]), ValueError, "coefficients a cannot be empty"),
    (lambda: windows.general_cosine(3, a=1.0), TypeError, "coefficients a must be a list/tuple"),
])
def test_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_torch_signal_windows_resolves_under_the_alias(tmp_path):
    script = tmp_path / "script.py"
    script.write_text("import torch\nimport torch.signal.windows\nfrom torch.signal.windows import hann\n"
                      "w = torch.signal.windows.hann(4, sym=False)\n"
                      "print(type(w).__module__, hann(3).tolist(), w.tolist())\n")
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root), "OPENBLAS_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-m", "fnx", "run", str(script)], capture_output=True, text=True,
                            env=env, cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["fnx.tensor", "[0.0,", "1.0,", "0.0]", "[0.0,", "0.5,", "1.0,", "0.5]"]
