"""PyTorch's torch.signal: the window functions of `fnx.signal.windows` (SciPy's scipy.signal.windows names)."""
from . import windows

__all__ = ["windows"]
