"""Sparse COO tensors (PyTorch's `torch.sparse_coo` layout) and `fnx.sparse` (torch.sparse).

coo.py holds the tensor (`SparseTensor`: the indices and values of its specified entries, gradients flowing to
the values), its construction and conversions; ops.py its products and softmax, and the sparse forms of the dense
primitives that have one, reached from `bind`'s failure path (dense ops pay nothing for them). Here is the public
surface: torch.sparse's names, its legacy constructors, and what a dense tensor answers to the sparse methods.
"""
from __future__ import annotations

from .. import dtypes as _dt, legacy_types as _legacy_types
from ..errors import FnxRuntimeError, FnxTypeError
from ..ops.creation import zeros
from ..tensor import Tensor
from .coo import SparseTensor, _dense_to_dense, _make, _to_sparse_coo, sparse_coo_tensor, sparse_mask, sum, to_sparse
from .ops import addmm, dsmm, hspmm, log_softmax, mm, smm, softmax, spdiags, spmm

__all__ = ["sparse_coo_tensor", "mm", "addmm", "sum", "softmax", "log_softmax", "spdiags", "spmm", "smm", "hspmm",
           "dsmm", "to_sparse", "sparse_mask", "check_sparse_tensor_invariants", "sparse_csr_tensor",
           "sparse_csc_tensor", "sparse_bsr_tensor", "sparse_bsc_tensor", "sparse_compressed_tensor", "FloatTensor",
           "DoubleTensor", "HalfTensor", "BFloat16Tensor", "ByteTensor", "CharTensor", "ShortTensor", "IntTensor",
           "LongTensor", "BoolTensor"]


# ---------------------------------------------------------------- legacy constructors (torch.sparse.FloatTensor)
class _SparseLegacyType(type):
    """`Type(indices, values, size)` or `Type(indices, values)`: a sparse tensor (values keep their dtype, as in
    PyTorch); `Type(*sizes)` or `Type()`: an empty one of the type's dtype. `isinstance` checks the layout and
    dtype."""

    def __call__(cls, *args) -> Tensor:
        if len(args) in (2, 3) and all(isinstance(a, Tensor) for a in args[:2]):
            return sparse_coo_tensor(*args)
        sizes = tuple(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
        if not all(isinstance(s, int) for s in sizes):
            raise FnxTypeError(f"torch.sparse.{cls.__name__}: expected (indices, values[, size]) or sizes, got "
                               f"{[type(a).__name__ for a in args]}")
        empty_indices = zeros((len(sizes), 0), dtype=_dt.int64)
        return _make(empty_indices, zeros((0,), dtype=cls.dtype), sizes or (0,), True)

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, SparseTensor) and obj.dtype is cls.dtype and obj.device.type == "cpu"


def _legacy(name: str, dtype: _dt.dtype) -> type:
    return _SparseLegacyType(name, (), {"dtype": dtype, "__doc__": f"A sparse CPU tensor of {dtype} (PyTorch's "
                                                                    f"legacy torch.sparse.{name})."})


for _name in _legacy_types.__all__:   # torch.sparse.FloatTensor, ...: one per dense legacy type, of its dtype
    globals()[_name] = _legacy(_name, getattr(_legacy_types, _name).dtype)
del _name


class check_sparse_tensor_invariants:
    """PyTorch's switch for checking sparse indices at construction: fnx always checks them, so enabling,
    disabling or entering it changes nothing."""

    def __init__(self, enable: bool = True):
        self.enable_ = enable

    @staticmethod
    def is_enabled() -> bool:
        """True: fnx always checks."""
        return True

    @staticmethod
    def enable() -> None:
        """Nothing to do: fnx always checks."""

    @staticmethod
    def disable() -> None:
        """Nothing to do: fnx always checks."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None


# ---------------------------------------------------------------- what a dense tensor answers
def _coo_only(name: str, what: str):
    """A sparse tensor's method `name` as a dense tensor has it: PyTorch's error naming the layout it expects."""
    def method(self, *args, **kwargs):
        raise FnxRuntimeError(f"{name} expected {what} layout but got Strided")

    method.__name__ = name
    method.__doc__ = f"A sparse COO tensor's `{name}` (fnx.sparse); a dense tensor raises, as in PyTorch."
    return method


def _compressed(name: str):
    """PyTorch's compressed-layout (CSR, CSC, BSR, BSC) function `name`: not supported in fnx."""
    def refuse(*args, **kwargs):
        raise NotImplementedError(f"{name}: fnx has no compressed sparse layouts (CSR, CSC, BSR, BSC); use the COO "
                                  f"layout (fnx.sparse_coo_tensor, Tensor.to_sparse()) or dense tensors")

    refuse.__name__ = name
    refuse.__doc__ = f"PyTorch's `{name}`: raises NotImplementedError (fnx has only the COO sparse layout)."
    return refuse


def _dense_sparse_dim(input: Tensor) -> int:
    """0: a dense tensor has no sparse dims."""
    return 0


def _dense_dense_dim(input: Tensor) -> int:
    """Every dim of a dense tensor is dense."""
    return input.ndim


sparse_csr_tensor, sparse_csc_tensor, sparse_bsr_tensor, sparse_bsc_tensor, sparse_compressed_tensor = (
    _compressed(n) for n in ("sparse_csr_tensor", "sparse_csc_tensor", "sparse_bsr_tensor", "sparse_bsc_tensor",
                             "sparse_compressed_tensor"))

METHODS = {"to_sparse": to_sparse, "to_sparse_coo": _to_sparse_coo, "sparse_mask": sparse_mask,
           "to_dense": _dense_to_dense, "sparse_dim": _dense_sparse_dim, "dense_dim": _dense_dense_dim,
           "is_sparse_csr": property(lambda self: False, doc="False: fnx has no CSR tensors."),
           **{n: _coo_only(n, "sparse coordinate tensor") for n in ("coalesce", "indices", "is_coalesced", "_indices",
                                                                    "_nnz")},
           **{n: _coo_only(n, "sparse tensor") for n in ("values", "_values")},
           **{n: _compressed(n) for n in ("to_sparse_csr", "to_sparse_csc", "to_sparse_bsr", "to_sparse_bsc",
                                          "crow_indices", "col_indices", "ccol_indices", "row_indices")}}
