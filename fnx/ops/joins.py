"""Joining tensors (cat, stack, ...) and splitting them into views (split, chunk, unbind, narrow, select)."""
from __future__ import annotations

import itertools
import operator

import numpy as np

from .autocast import autocast_op
from .. import core
from ..device import cpu
from ..array_pointers import data_pointer
from ..core import FnxIndexError, FnxRuntimeError, FnxTypeError, Primitive, ShapedArray
from ..tensor import Tensor, canonical_dim, make
from .. import array_layout as layout
from ._batching import batch_size, move_to_front, with_batch_size
from ._families import promote, same_device
from .shape import _atleast, _pad, _slice_dim, meshgrid, new_view, reshape_p, unsqueeze

__all__ = ["cat", "concatenate", "concat", "stack", "hstack", "vstack", "row_stack", "dstack", "column_stack", "split",
           "split_with_sizes", "hsplit", "vsplit", "dsplit", "chunk", "unbind", "narrow", "select", "tensor_split",
           "block_diag", "cartesian_prod", "combinations"]


concatenate_p = Primitive("concatenate", saves_inputs=False)


@concatenate_p.def_impl
def _concatenate_impl(xp, *xs, dim):
    if xp is not np:
        return xp.concatenate(xs, axis=dim)
    # numpy lays its join out in the order it finds the operands' memory in: row-major for row-major operands or
    # strided rows of them (a GRU cell's x[:, t] and h), channels-last for channels-last ones, as PyTorch's cat
    # (which has that memory format for 4-D and 5-D tensors only). Otherwise the join goes into a row-major array,
    # as PyTorch's: numpy's kept a transposed table transposed (every product with it then read it with a stride:
    # Llama's rotary cos/sin). Operands of more than two dims in another order join straight into it (Llama's
    # rotate_half of a query laid out (B, T, H, D): 49 us in two joins, 25 in one); matrices join first (checking
    # their strides cost more than a GRU cell's join).
    # Large joins copy each operand into its part of the output on fnx's threads (two channels-last (4, 16, 64,
    # 64) float32 arrays: 280 -> 120 us).
    nd = xs[0].ndim
    if nd > 2:
        if _channels_last(xs):
            return _joined(xs, dim, True)
        if not all(_rows_in_order(x.strides) for x in xs):
            return _joined(xs, dim, False)
    out = np.concatenate(xs, axis=dim)
    if out.flags.c_contiguous:
        return out
    return _joined(xs, dim, False)


def _channels_last(xs) -> bool:
    """Whether the operands are several arrays of 4 or 5 dims laid out channels-last, or slices of such along
    their channels."""
    return len(xs) > 1 and xs[0].ndim in (4, 5) and all(layout.channels_innermost(x) for x in xs)


def _joined(xs, dim: int, last: bool) -> np.ndarray:
    """The operands joined along `dim` into a new array, channels-last where `last`, else row-major."""
    shape = list(xs[0].shape)
    shape[dim] = sum(x.shape[dim] for x in xs)
    if last:
        out = layout.from_last(np.empty([shape[0], *shape[2:], shape[1]], xs[0].dtype))
    else:
        out = np.empty(shape, xs[0].dtype)
    if layout.native is None or out.nbytes < layout.native.MIN_BYTES:   # numpy's one call for small joins
        return np.concatenate(xs, axis=dim, out=out)
    start = 0
    for x in xs:
        layout.copy_into(out[(slice(None),) * dim + (slice(start, start + x.shape[dim]),)], x)
        start += x.shape[dim]
    return out


def _rows_in_order(strides: tuple) -> bool:
    """Whether an array's strides fall from its first dim to its last (a row-major array's, or a slice's)."""
    return all(a >= b for a, b in zip(strides, strides[1:]))


@concatenate_p.def_abstract
def _concatenate_abstract(*xs: ShapedArray, dim: int) -> ShapedArray:
    dev = same_device("cat", xs)
    first = xs[0]
    if first.ndim == 0:
        raise FnxRuntimeError("cat: zero-dimensional tensor (at position 0) cannot be concatenated")
    for i, x in enumerate(xs):
        if x.dtype is not first.dtype:
            raise FnxTypeError(f"cat: operands must share one dtype, got {first.dtype} and {x.dtype} (tensor "
                               f"number {i}); the fnx wrapper promotes, a direct bind must convert first")
        if x.ndim != first.ndim:
            raise FnxRuntimeError(f"cat: tensors must have same number of dimensions: got {first.ndim} and "
                                  f"{x.ndim} (tensor number {i}; shapes {list(first.shape)} and {list(x.shape)})")
        for d, (a, b) in enumerate(zip(first.shape, x.shape)):
            if d != dim and a != b:
                raise FnxRuntimeError(f"cat: sizes of tensors must match except in dimension {dim}. Expected size "
                                      f"{a} but got size {b} for tensor number {i} in the list (shapes "
                                      f"{list(first.shape)} and {list(x.shape)})")
    shape = list(first.shape)
    shape[dim] = sum(x.shape[dim] for x in xs)
    return ShapedArray(tuple(shape), first.dtype, dev)


@concatenate_p.def_vjp
def _concatenate_vjp(g, primals, out, *, dim):
    if type(g) is Tensor and core._get_flags() == core._NO_GRAD:   # a backward that records nothing
        return _views_along(g, dim, [x.shape[dim] for x in primals])
    cots, start = [], 0
    for x in primals:
        n = x.shape[dim]
        cots.append(_slice_dim(g, dim, start, start + n))
        start += n
    return tuple(cots)


def _views_along(g: Tensor, dim: int, sizes: list) -> tuple:
    """g's consecutive pieces of `sizes` along `dim` as numpy's views, each a view of g as slice_p's bind makes it
    (g's version counter and base): the binds, with nothing to record, cost about 2 us a piece more (a GRU cell's
    two cats a step)."""
    v, dev = g._value, g._device
    base = g if g._base is None else g._base
    lead, pieces, start = (slice(None),) * dim, [], 0
    for n in sizes:
        piece = make(v[lead + (slice(start, start + n),)], dev)
        piece._version, piece._base = g._version, base
        pieces.append(piece)
        start += n
    return tuple(pieces)


concatenate_p.def_jvp(lambda primals, tangents, *, dim: (concatenate_p.bind(*primals, dim=dim),
                                                         concatenate_p.bind(*tangents, dim=dim)))


@concatenate_p.def_batch
def _concatenate_batch(args, dims, *, dim):
    size = batch_size(args, dims)
    return concatenate_p.bind(*[with_batch_size(a, d, size) for a, d in zip(args, dims)], dim=dim + 1), 0


@autocast_op("cat")
def cat(tensors, dim: int = 0) -> Tensor:
    """Join tensors along the existing dim `dim`, promoting dtypes; 1-D empty tensors are skipped (as in PyTorch)."""
    tensors = list(tensors)
    if not tensors:
        raise FnxRuntimeError("cat(): expected a non-empty list of Tensors")
    first = tensors[0]
    if type(first) is Tensor and first._value.ndim > 1:   # plain tensors of one dtype and rank (a recurrent cell's
        dt, nd = first._value.dtype, first._value.ndim    # join every step): checked on their arrays, where the
        for t in tensors:                                 # properties below cost about 1 us a join
            if type(t) is not Tensor or t._value.dtype is not dt or t._value.ndim != nd:
                break
        else:
            return concatenate_p.bind(*tensors, dim=dim if type(dim) is int and 0 <= dim < nd else
                                      canonical_dim(dim, nd, "cat"))
    dtype, mixed, empty = None, False, False
    for i, t in enumerate(tensors):   # one pass: the checks took as long as the join of a GRU cell's (32, 64) pair
        if not isinstance(t, Tensor):
            raise FnxTypeError(f"cat(): expected a sequence of Tensors, but got {type(t).__name__} at position {i}")
        d = t.dtype
        if dtype is None:
            dtype = d
        elif d is not dtype:
            mixed = True
        if not empty and t.ndim == 1 and t.shape[0] == 0:
            empty = True
    if mixed:
        tensors = promote("cat", *tensors)
    kept = [t for t in tensors if tuple(t.shape) != (0,)] or tensors if empty else tensors
    if kept[0].ndim == 0:
        raise FnxRuntimeError("cat(): zero-dimensional tensor (at position 0) cannot be concatenated")
    return concatenate_p.bind(*kept, dim=canonical_dim(dim, kept[0].ndim, "cat"))


concat = cat


def concatenate(tensors, axis: int = 0) -> Tensor:
    """`cat` with numpy's keyword name (PyTorch's torch.concatenate)."""
    return cat(tensors, axis)


@autocast_op("stack")
def stack(tensors, dim: int = 0) -> Tensor:
    """Join equally shaped tensors along a new dim `dim`."""
    tensors = list(tensors)
    if not tensors:
        raise FnxRuntimeError("stack expects a non-empty TensorList")
    first = tensors[0]
    if not isinstance(first, Tensor):
        raise FnxTypeError(f"stack(): expected a sequence of Tensors, but got {type(first).__name__} at position 0")
    shape, dtype = first.shape, first.dtype
    mixed = False
    # A data loader's collate stacks a batch of samples every step: plain tensors are checked on their arrays
    # (a tuple and a numpy dtype), where the shape and dtype properties cost about 0.7 us a tensor
    np_dtype = first._value.dtype if type(first) is Tensor else None
    for i, t in enumerate(tensors):
        if type(t) is Tensor:
            v = t._value
            if v.shape == shape and v.dtype == np_dtype:
                continue
        elif not isinstance(t, Tensor):
            raise FnxTypeError(f"stack(): expected a sequence of Tensors, but got {type(t).__name__} at position {i}")
        if t.shape != shape:
            raise FnxRuntimeError(f"stack expects each tensor to be equal size, but got {list(shape)} at entry 0 "
                                  f"and {list(t.shape)} at entry {i}")
        mixed = mixed or t.dtype is not dtype
    if mixed:
        tensors = promote("stack", *tensors)
    d = canonical_dim(dim, len(shape) + 1, "stack")
    if d == len(shape):   # a new last dim: a view of each tensor with it, joined along it
        return concatenate_p.bind(*[unsqueeze(t, d) for t in tensors], dim=d)
    # Joined along dim d, then that dim split in two: two ops, where a view of each tensor and their join took
    # one op each (a data loader's collate stacks a batch of samples every step)
    return reshape_p.bind(concatenate_p.bind(*tensors, dim=d), shape=shape[:d] + (len(tensors),) + shape[d:])


def hstack(tensors) -> Tensor:
    """Concatenate column-wise: along dim 0 for 1-D tensors, dim 1 otherwise."""
    ts = [_atleast(t, 1) for t in tensors]
    return cat(ts, 0 if ts and ts[0].ndim == 1 else 1)


def vstack(tensors) -> Tensor:
    """Concatenate row-wise (1-D tensors become rows)."""
    return cat([_atleast(t, 2) for t in tensors], 0)


row_stack = vstack


def dstack(tensors) -> Tensor:
    """Concatenate depth-wise, along the third dim."""
    return cat([_atleast(t, 3) for t in tensors], 2)


def column_stack(tensors) -> Tensor:
    """Concatenate along dim 1, 0-d and 1-D tensors becoming columns (numpy's column_stack)."""
    if not len(tensors):
        raise FnxRuntimeError("column_stack expects a non-empty TensorList")
    return hstack([reshape_p.bind(t, shape=(t.numel(), 1)) if t.ndim <= 1 else t for t in tensors])


# ---------------------------------------------------------------- split (several views; one tape node)
split_p = Primitive("split", view=True, multiple_results=True, saves_inputs=False)


@split_p.def_impl
def _split_impl(xp, x, *, dim, sizes):
    lead, out, start = (slice(None),) * dim, [], 0
    for n in sizes:
        out.append(x[lead + (slice(start, start + n),)])
        start += n
    return out


@split_p.def_abstract
def _split_abstract(x: ShapedArray, *, dim: int, sizes: tuple) -> list:
    if not 0 <= dim < x.ndim:
        raise FnxIndexError(f"split: dim {dim} is out of range for a tensor of shape {list(x.shape)}")
    if sum(sizes) != x.shape[dim] or any(n < 0 for n in sizes):
        raise FnxRuntimeError(f"split: sizes {list(sizes)} must be non-negative and sum to {x.shape[dim]}, the "
                              f"size of dimension {dim} of the input (shape {list(x.shape)})")
    shape = list(x.shape)
    out = []
    for n in sizes:
        shape[dim] = n
        out.append(ShapedArray(tuple(shape), x.dtype, x.device))
    return out


@split_p.def_vjp
def _split_vjp(cts, primals, outs, *, dim, sizes):
    """Every output's cotangent is there (the tape and the vjp transform put zeros where none flowed): one
    concatenate, or, in a backward that records nothing, the view that the pieces already make together."""
    if core._get_flags() == core._NO_GRAD:
        joined = _joined_view(cts, dim)
        if joined is not None:
            return (joined,)
    return (concatenate_p.bind(*cts, dim=dim),)


def _joined_view(pieces, dim: int) -> Tensor | None:
    """The concatenation of CPU tensors along `dim` as a view, where their arrays are views of one array that lie
    side by side along `dim` with the same strides (the attention backward writes a model's dq, dk and dv so,
    into one array laid out as the q, k, v projection it splits: joining them copies nothing); else None."""
    first = pieces[0]
    if type(first) is not Tensor or first._device is not cpu:
        return None
    a = first._value
    base = a.base
    if type(a) is not np.ndarray or type(base) is not np.ndarray or not (base.flags.c_contiguous
                                                                       or base.flags.f_contiguous):
        return None
    step, at, size = a.strides[dim], data_pointer(a), 0
    for t in pieces:
        v = t._value if type(t) is Tensor and t._device is cpu else None
        if (type(v) is not np.ndarray or v.base is not base or v.strides != a.strides or v.dtype != a.dtype
                or data_pointer(v) != at + size * step
                or v.shape[:dim] + v.shape[dim + 1:] != a.shape[:dim] + a.shape[dim + 1:]):
            return None
        size += v.shape[dim]
    shape = a.shape[:dim] + (size,) + a.shape[dim + 1:]
    return make(np.ndarray(shape, a.dtype, base, data_pointer(a) - data_pointer(base), a.strides), cpu)


split_p.def_jvp(lambda primals, tangents, *, dim, sizes: (split_p.bind(primals[0], dim=dim, sizes=sizes),
                                                          split_p.bind(tangents[0], dim=dim, sizes=sizes)))
split_p.def_batch(lambda args, dims, *, dim, sizes: (
    split_p.bind(move_to_front(args[0], dims[0]), dim=dim + 1, sizes=sizes), [0] * len(sizes)))


def _no_0d(input: Tensor, op: str) -> None:
    if input.ndim == 0:
        raise FnxIndexError(f"{op}() cannot be applied to a 0-dim tensor.")


def _views_between(input: Tensor, dim: int, bounds: list) -> tuple:
    """The views `input[..., lo:hi]` along `dim` for each (lo, hi) of `bounds`.

    In eager mode, bounds that tile the dim make one `split`: one tape node whose backward is one concatenate
    (PyTorch's SplitBackward), where a slice per part would pad each part's gradient to the whole and sum them.
    Under a transform they are slices, which the transforms track as views of `input` (an in-place write
    through one shows in `input`) and compile fuses.
    """
    sizes = tuple([hi - lo for lo, hi in bounds])
    tiles = [lo for lo, _ in bounds] == [0] + [hi for _, hi in bounds[:-1]] and bounds[-1][1] == input.shape[dim]
    if tiles and min(sizes) >= 0 and not core.state.transforms_active:
        return tuple(split_p.bind(input, dim=dim, sizes=sizes))
    return tuple(new_view(_slice_dim(input, dim, lo, max(lo, hi)), input) for lo, hi in bounds)


def split(tensor: Tensor, split_size_or_sections, dim: int = 0) -> tuple:
    """Views of equal chunks of `split_size` (the last may be smaller), or of the given section sizes."""
    _no_0d(tensor, "split")
    d = canonical_dim(dim, tensor.ndim, "split")
    n = tensor.shape[d]
    if isinstance(split_size_or_sections, (list, tuple)):
        sections = [int(s) for s in split_size_or_sections]
        if any(s < 0 for s in sections):
            raise FnxRuntimeError(f"split_with_sizes expects split_sizes have only non-negative entries, but got "
                                  f"split_sizes={sections}")
        if sum(sections) != n:
            raise FnxRuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size "
                                  f"at dimension {d}), but got split_sizes={sections}")
    else:
        size = operator.index(split_size_or_sections)
        if size < 0:
            raise FnxRuntimeError(f"split expects split_size be non-negative, but got split_size={size}")
        if size == 0 and n:
            raise FnxRuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension size of {n}")
        sections = [min(size, n - s) for s in range(0, n, size)] if size else []
        sections = sections or [0]
    bounds, start = [], 0
    for s in sections:
        bounds.append((start, start + s))
        start += s
    return _views_between(tensor, d, bounds)


def split_with_sizes(input: Tensor, split_sizes, dim: int = 0) -> tuple:
    """Views of `input` along `dim` of the given sizes, which must add up to its size there."""
    if not isinstance(split_sizes, (list, tuple)):
        raise FnxTypeError(f"split_with_sizes(): argument 'split_sizes' must be a list or tuple of ints, got "
                           f"{type(split_sizes).__name__}")
    return split(input, split_sizes, dim)


def _numpy_split(op: str, input: Tensor, indices_or_sections, dim: int, min_dims: int) -> tuple:
    """hsplit / vsplit / dsplit: tensor_split along `dim`, an int meaning equal parts that must divide the size."""
    if input.ndim < min_dims:
        raise FnxRuntimeError(f"torch.{op} requires a tensor with at least {min_dims} dimension, but got a tensor "
                              f"with {input.ndim} dimensions!")
    if not isinstance(indices_or_sections, (list, tuple, Tensor)):
        n, size = operator.index(indices_or_sections), input.shape[dim]
        if n == 0 or size % n:
            raise FnxRuntimeError(f"torch.{op} attempted to split along dimension {dim}, but the size of the "
                                  f"dimension {size} is not divisible by the split_size {n}!")
    return tensor_split(input, indices_or_sections, dim)


def hsplit(input: Tensor, indices_or_sections) -> tuple:
    """Split column-wise: along dim 1, or dim 0 of a 1-D tensor (numpy's hsplit; an int must divide the size)."""
    return _numpy_split("hsplit", input, indices_or_sections, 1 if input.ndim > 1 else 0, 1)


def vsplit(input: Tensor, indices_or_sections) -> tuple:
    """Split row-wise, along dim 0 of a tensor of at least 2 dims (numpy's vsplit)."""
    return _numpy_split("vsplit", input, indices_or_sections, 0, 2)


def dsplit(input: Tensor, indices_or_sections) -> tuple:
    """Split depth-wise, along dim 2 of a tensor of at least 3 dims (numpy's dsplit)."""
    return _numpy_split("dsplit", input, indices_or_sections, 2, 3)


def tensor_split(input: Tensor, indices_or_sections, dim: int = 0) -> tuple:
    """Views of `input` along `dim`: `n` near-equal parts for an int `n` (the first `size % n` one longer), or the
    parts between the given indices, read as Python slices (past the end: empty parts), as numpy's
    `array_split` (PyTorch's `tensor_split`; an int tensor works as the int or the list)."""
    _no_0d(input, "tensor_split")
    d = canonical_dim(dim, input.ndim, "tensor_split")
    size = input.shape[d]
    if isinstance(indices_or_sections, Tensor):
        indices_or_sections = indices_or_sections.tolist()
    if isinstance(indices_or_sections, (list, tuple)):
        points = [0, *(operator.index(i) for i in indices_or_sections), size]
        bounds = [slice(a, b).indices(size)[:2] for a, b in zip(points, points[1:])]
    else:
        n = operator.index(indices_or_sections)
        if n <= 0:
            raise FnxRuntimeError(f"tensor_split: number of sections must be larger than 0, got {n}")
        q, r = divmod(size, n)
        starts = [i * q + min(i, r) for i in range(n + 1)]
        bounds = list(zip(starts, starts[1:]))
    return _views_between(input, d, bounds)


def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple:
    """Split into `chunks` views of size ceil(n / chunks) (fewer when the sizes run out, as in PyTorch)."""
    if chunks <= 0:
        raise FnxRuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    _no_0d(input, "chunk")
    d = canonical_dim(dim, input.ndim, "chunk")
    n = input.shape[d]
    size = -(-n // chunks)
    return split(input, [0] * chunks if size == 0 else size, d)


def unbind(input: Tensor, dim: int = 0) -> tuple:
    """The slices along `dim`, each without that dim (views)."""
    _no_0d(input, "unbind")
    d = canonical_dim(dim, input.ndim, "unbind")
    shape = tuple(input.shape)
    parts = _views_between(input, d, [(i, i + 1) for i in range(shape[d])]) if shape[d] else ()
    return tuple([reshape_p.bind(p, shape=shape[:d] + shape[d + 1:]) for p in parts])


def narrow(input: Tensor, dim: int, start, length: int) -> Tensor:
    """The view `input[..., start:start + length, ...]` along `dim`; a negative start counts from the end."""
    _no_0d(input, "narrow")
    d = canonical_dim(dim, input.ndim, "narrow")
    n = input.shape[d]
    start, length = operator.index(start), operator.index(length)
    if not -n <= start <= n:
        raise FnxIndexError(f"narrow(): start out of range (expected to be in range of [{-n}, {n}], but got "
                            f"{start})")
    start = start + n if start < 0 else start
    if length < 0 or start + length > n:
        raise FnxRuntimeError(f"narrow(): start ({start}) + length ({length}) exceeds dimension size ({n}).")
    return new_view(_slice_dim(input, d, start, start + length), input)


def select(input: Tensor, dim: int, index) -> Tensor:
    """The view of `input` at `index` along `dim`, without that dim."""
    _no_0d(input, "select")
    d = canonical_dim(dim, input.ndim, "select")
    shape = tuple(input.shape)
    i = operator.index(index)
    if not -shape[d] <= i < shape[d]:
        raise FnxIndexError(f"select(): index {i} out of range for tensor of size {list(shape)} at dimension {d}")
    i %= shape[d]
    return reshape_p.bind(_slice_dim(input, d, i, i + 1), shape=shape[:d] + shape[d + 1:])



def block_diag(*tensors) -> Tensor:
    """The matrices `tensors` (0-D: 1 x 1, 1-D: one row, 2-D) down the diagonal of one matrix, zeros elsewhere,
    in their promoted dtype."""
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise FnxTypeError(f"block_diag(): argument {i} must be a Tensor, got {type(t).__name__}")
        if t.ndim > 2:
            raise FnxRuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {i} has "
                                  f"{t.ndim} dimensions")
    if not tensors:   # PyTorch's answer: one row of no columns
        return make(np.zeros((1, 0), np.float32), cpu)
    blocks = [t.reshape(1, -1) if t.ndim < 2 else t for t in promote("block_diag", *tensors)]
    width = sum(b.shape[1] for b in blocks)
    rows, left = [], 0
    for b in blocks:
        rows.append(_pad(b, (0, left), (0, width - left - b.shape[1]), (0, 0), 0))
        left += b.shape[1]
    return cat(rows, 0)


def cartesian_prod(*tensors) -> Tensor:
    """Every combination of one element from each 1-D tensor (one dtype), as the rows of an (n, len(tensors))
    tensor (the last tensor varying fastest, as itertools.product); one tensor is returned as it is."""
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor) or t.ndim != 1:
            got = f"{t.ndim}-D" if isinstance(t, Tensor) else type(t).__name__
            raise FnxRuntimeError(f"cartesian_prod: expect a 1D vector, but got {got} (argument {i})")
    if len({t.dtype for t in tensors}) > 1:
        raise FnxRuntimeError(f"cartesian_prod: expects all tensors to have the same dtype, got "
                              f"{', '.join(str(t.dtype) for t in tensors)}")
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return stack([g.reshape(-1) for g in grids], 1)


def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:
    """The r-element combinations of the 1-D `input`'s elements as rows, in itertools.combinations' order
    (combinations_with_replacement's with `with_replacement`); a gather, so gradients flow to the elements."""
    if input.ndim != 1:
        raise FnxRuntimeError(f"combinations: Expect a 1D vector, but got shape {list(input.shape)}")
    r = operator.index(r)
    if r < 0:
        raise FnxRuntimeError(f"combinations: Expect a non-negative number, but got {r}")
    if r == 0:
        return input[:0]
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = np.array(list(pick(range(input.shape[0]), r)), dtype=np.int64).reshape(-1, r)
    return input[make(input._device.xp.asarray(rows), input._device)]


METHODS: dict = {"split": split, "chunk": chunk, "unbind": unbind, "narrow": narrow, "select": select,
                 "tensor_split": tensor_split, "split_with_sizes": split_with_sizes, "hsplit": hsplit,
                 "vsplit": vsplit, "dsplit": dsplit}
INPLACE: dict = {}
