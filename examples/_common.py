"""Helpers shared by the example notebooks: the device to run on, the fast-CI switch, the digits data."""
from __future__ import annotations

import os

import numpy as np

import fnx

# FNX_EXAMPLE_FAST=1 (set by tests/test_notebooks.py) shrinks sizes and epochs so every notebook runs in CI time.
FAST = os.environ.get("FNX_EXAMPLE_FAST", "") not in ("", "0")
DEVICE = fnx.device("cuda" if fnx.cuda.is_available() else "cpu")


def load_digits(device=DEVICE) -> tuple[fnx.Tensor, fnx.Tensor]:
    """scikit-learn's bundled 8x8 digits: (N, 1, 8, 8) float32 images in [0, 1] and (N,) int64 labels."""
    from sklearn.datasets import load_digits as sk_digits

    data = sk_digits()
    images = (data.images / 16.0).astype(np.float32)[:, None]
    return fnx.tensor(images, device=device), fnx.tensor(data.target.astype(np.int64), device=device)
