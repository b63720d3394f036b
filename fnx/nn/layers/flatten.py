"""Flatten and Unflatten: reshape a range of dims into one, and one dim into several."""
from __future__ import annotations

from ...tensor import Tensor
from ..module import Module

__all__ = ["Flatten", "Unflatten"]


class Flatten(Module):
    """input.flatten(start_dim, end_dim); by default keeps the batch dim."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input: Tensor) -> Tensor:
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """input.unflatten(dim, unflattened_size)."""

    def __init__(self, dim: int, unflattened_size):
        super().__init__()
        if not isinstance(unflattened_size, (tuple, list)):
            raise TypeError("unflattened_size must be tuple of ints, but found type " + type(unflattened_size).__name__)
        self.dim, self.unflattened_size = dim, unflattened_size

    def forward(self, input: Tensor) -> Tensor:
        return input.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
