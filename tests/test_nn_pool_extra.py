"""Fractional max pooling, 3-D adaptive max and Lp pooling (functional and modules): PyTorch's window choices
(indices recorded from torch 2.13 on the same inputs and `_random_samples`), its errors, and the modules' state.
Values and gradients against loop-by-loop references are in the op table (op_db_conv)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fnx
import fnx.nn as nn
import fnx.nn.functional as F

SAMPLES_2D = [[[0.1, 0.7], [0.93, 0.25], [0.5, 0.0]], [[0.33, 0.66], [0.999, 0.01], [0.41, 0.87]]]
TORCH_INDICES_2D = [  # torch 2.13, float32, kernel 3, output (4, 5), the input below
    [[[20, 20, 14, 14, 8], [27, 39, 39, 33, 33], [46, 39, 58, 58, 52], [64, 64, 77, 77, 71]],
     [[2, 21, 21, 15, 15], [27, 21, 40, 40, 34], [46, 46, 40, 40, 53], [65, 65, 59, 59, 78]],
     [[9, 3, 3, 15, 15], [28, 22, 22, 34, 34], [47, 47, 41, 41, 53], [72, 66, 66, 78, 78]]],
    [[[10, 10, 4, 4, 16], [29, 29, 41, 41, 35], [54, 48, 41, 60, 60], [54, 73, 66, 60, 79]],
     [[11, 11, 23, 23, 17], [36, 29, 23, 42, 42], [36, 48, 48, 42, 42], [73, 73, 67, 67, 61]],
     [[11, 11, 5, 5, 24], [36, 30, 30, 24, 24], [55, 49, 49, 43, 43], [74, 74, 68, 68, 80]]]]
TORCH_INDICES_3D = [  # torch 2.13, float64, kernel (2, 3, 2), output_ratio 0.5 of (6, 7, 5)
    [[[[0, 44], [50, 19], [25, 69]], [[75, 113], [126, 88], [126, 138]], [[176, 188], [151, 163], [201, 163]]],
     [[[35, 4], [10, 54], [60, 29]], [[110, 79], [85, 123], [136, 98]], [[186, 148], [186, 198], [161, 173]]]]]


def test_fractional_max_pool2d_picks_torchs_windows_in_float32():
    x = fnx.arange(2 * 3 * 9 * 9, dtype=fnx.float32).reshape(2, 3, 9, 9).sin()
    values, indices = F.fractional_max_pool2d(x, 3, output_size=(4, 5), return_indices=True,
                                              _random_samples=fnx.tensor(SAMPLES_2D, dtype=fnx.float32))
    assert indices.dtype == fnx.int64 and indices.tolist() == TORCH_INDICES_2D
    np.testing.assert_array_equal(values.numpy(), np.take_along_axis(x.numpy().reshape(2, 3, -1),
                                                                     indices.numpy().reshape(2, 3, -1), 2)
                                  .reshape(2, 3, 4, 5))


def test_fractional_max_pool3d_output_ratio_and_torchs_windows():
    x = fnx.arange(2 * 6 * 7 * 5, dtype=fnx.float64).reshape(1, 2, 6, 7, 5).cos()
    samples = fnx.tensor([[[0.2, 0.55, 0.9], [0.71, 0.05, 0.38]]], dtype=fnx.float64)
    values, indices = F.fractional_max_pool3d_with_indices(x, (2, 3, 2), output_ratio=(0.5, 0.5, 0.5),
                                                           _random_samples=samples)
    assert values.shape == (1, 2, 3, 3, 2) and indices.tolist() == TORCH_INDICES_3D


def test_unbatched_input_and_fresh_draws():
    x = fnx.arange(50, dtype=fnx.float32).reshape(2, 5, 5)
    _, indices = F.fractional_max_pool2d(x, 2, output_size=3, return_indices=True,
                                         _random_samples=fnx.tensor([[[0.5, 0.5], [0.2, 0.8]]]))
    assert indices.tolist() == [[[6, 8, 9], [16, 18, 19], [21, 23, 24]], [[6, 7, 9], [11, 12, 14], [21, 22, 24]]]
    x = fnx.randn(4, 8, 20, 20)
    fnx.manual_seed(0)
    first = F.fractional_max_pool2d(x, 3, output_ratio=0.5)
    second = F.fractional_max_pool2d(x, 3, output_ratio=0.5)
    fnx.manual_seed(0)
    assert not np.array_equal(first.numpy(), second.numpy())
    np.testing.assert_array_equal(first.numpy(), F.fractional_max_pool2d(x, 3, output_ratio=0.5).numpy())


@settings(max_examples=10, deadline=None)
@given(n=st.integers(3, 12), k=st.integers(1, 3), seed=st.integers(0, 2 ** 16))
def test_windows_stay_inside_and_the_last_ends_at_the_edge(n, k, seed):
    k = min(k, n)
    out = 1 + seed % (n - k + 1)
    fnx.manual_seed(seed)
    x = fnx.arange(n * n, dtype=fnx.float64).reshape(1, 1, n, n)   # increasing: each window's max is its corner
    _, indices = F.fractional_max_pool2d(x, k, output_size=out, return_indices=True)
    rows, cols = np.divmod(indices.numpy()[0, 0], n)
    assert rows[-1, 0] == n - 1 and cols[0, -1] == n - 1
    assert (np.diff(rows[:, 0]) >= 1).all() and (np.diff(cols[0]) >= 1).all()


def test_fractional_errors():
    x = fnx.randn(1, 1, 5, 5)
    with pytest.raises(RuntimeError, match=r"fractional_max_pool2d\(\): pool height 4 too large relative to input "
                                           r"height 5"):
        F.fractional_max_pool2d(x, 4, output_size=3)
    with pytest.raises(ValueError, match="requires specifying either an output_size or an output_ratio"):
        F.fractional_max_pool2d(x, 2)
    with pytest.raises(RuntimeError, match=r"_random_samples of shape \[1, 1, 2\]"):
        F.fractional_max_pool2d(x, 2, output_size=2, _random_samples=fnx.rand(1, 2, 2))
    with pytest.raises(RuntimeError, match="Expected 3D \\(unbatched\\) or 4D"):
        F.fractional_max_pool2d(fnx.randn(5, 5), 2, output_size=2)
    with pytest.raises(ValueError, match="only one of output_size and output_ratio"):
        nn.FractionalMaxPool2d(2, output_size=2, output_ratio=0.5)
    with pytest.raises(ValueError, match=r"output_ratio must be between 0 and 1 \(got 1.5\)"):
        nn.FractionalMaxPool3d(2, output_ratio=1.5)
    with pytest.raises(ValueError, match="kernel_size must be greater than 0"):
        nn.FractionalMaxPool3d(0, output_size=2)


def test_fractional_modules_keep_their_samples_as_a_buffer_and_backpropagate():
    samples = fnx.tensor(SAMPLES_2D, dtype=fnx.float32)
    pool = nn.FractionalMaxPool2d(3, output_size=(4, 5), return_indices=True, _random_samples=samples)
    assert list(pool.state_dict()) == ["_random_samples"]
    x = fnx.arange(2 * 3 * 9 * 9, dtype=fnx.float32).reshape(2, 3, 9, 9).sin().requires_grad_()
    values, indices = pool(x)
    assert indices.tolist() == TORCH_INDICES_2D
    values.sum().backward()
    expected = np.zeros((2, 3, 81), np.float32)
    for b in range(2):
        for c in range(3):
            np.add.at(expected[b, c], indices.numpy()[b, c].reshape(-1), 1.0)
    np.testing.assert_array_equal(x.grad.numpy().reshape(2, 3, 81), expected)
    assert nn.FractionalMaxPool3d(2, output_ratio=0.5)(fnx.randn(2, 3, 8, 6, 4)).shape == (2, 3, 4, 3, 2)


def test_adaptive_max_pool3d_and_lp_pool3d_modules():
    x = fnx.arange(2 * 4 * 5 * 6, dtype=fnx.float32).reshape(1, 2, 4, 5, 6)
    values, indices = nn.AdaptiveMaxPool3d((2, 1, 3), return_indices=True)(x)
    assert values.shape == (1, 2, 2, 1, 3)
    corner = x.numpy()[:, :, [1, 3]][:, :, :, [4]][:, :, :, :, [1, 3, 5]]   # increasing: each window's far corner
    np.testing.assert_array_equal(values.numpy(), corner)
    picked = np.take_along_axis(x.numpy().reshape(1, 2, -1), indices.numpy().reshape(1, 2, -1), 2)
    np.testing.assert_array_equal(values.numpy().reshape(1, 2, -1), picked)
    assert nn.AdaptiveMaxPool3d(2)(x[0]).shape == (2, 2, 2, 2)
    y = fnx.ones(1, 1, 4, 4, 4) * 2.0
    np.testing.assert_allclose(nn.LPPool3d(2, 2)(y).numpy(), np.full((1, 1, 2, 2, 2), np.sqrt(8 * 4.0)), rtol=1e-6)
    assert nn.LPPool3d(1, (2, 1, 2), stride=1)(y).shape == (1, 1, 3, 4, 3)
