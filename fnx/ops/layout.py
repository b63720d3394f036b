"""Channels-last arrays (PyTorch's channels_last memory format): an (N, C, *spatial) array whose memory holds
(N, *spatial, C), each position's channels together. Eager convolutions and batch_norm read such arrays as rows
of channels, (N * positions, C), in place, and give their outputs the same layout, so a channels_last model moves
no operand between the layouts from one layer to the next."""
from __future__ import annotations

import numpy as np

__all__ = ["channels_last", "rows", "from_rows"]


def channels_last(a) -> bool:
    """Whether the array a (N, C, *spatial) lies channels innermost and not also row-major (one channel or one
    position: both orders coincide, and row-major wins, as in PyTorch)."""
    return a.ndim >= 3 and not a.flags.c_contiguous and np.moveaxis(a, 1, -1).flags.c_contiguous


def rows(a, index: tuple = ()):
    """The positions of the (N, C, *spatial) array `a` as rows of channels, (N * P, C), those of the spatial
    `index` where given: a view of a channels-last array where every position is read, else a copy."""
    inner = np.moveaxis(a, 1, -1)
    if index:
        inner = inner[(slice(None),) + tuple(index)]
    return np.reshape(inner, (-1, a.shape[1]))


def from_rows(r, n: int, spatial: tuple):
    """Rows of channels (n * P, C) as the channels-last (n, C, *spatial) array (a view)."""
    return np.moveaxis(r.reshape((n,) + tuple(spatial) + (r.shape[-1],)), -1, 1)
