"""`fnx.version`: the names of PyTorch's `torch.version` that programs print or test: fnx's version, and the
CUDA/ROCm toolkit versions fnx was built against, None as fnx is not built against either (it reaches CUDA
through CuPy at run time; `fnx.cuda.is_available()` says whether it can)."""
from ._version import __version__

__all__ = ["__version__", "cuda", "hip"]

cuda = None
hip = None
