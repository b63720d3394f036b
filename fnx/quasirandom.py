"""`torch.quasirandom`: `SobolEngine`, Sobol' low-discrepancy sequences giving PyTorch's numbers.

The direction numbers are Joe & Kuo's (new-joe-kuo-6.21201, up to 21201 dimensions), the table PyTorch's
engine uses, read from fnx/_tables/sobol_direction_numbers.npz (written by tools/sobol_table.py) and expanded
to 30 bits as PyTorch expands them. Point N of a sequence is `shift` XOR the direction numbers v_k of the set
bits k of N's Gray code N ^ (N >> 1), over 2**30: where PyTorch's engine walks the points with one XOR each,
this computes a draw in closed form, with the same results bit for bit (a float32 point is the 30-bit integer
rounded to float32, then scaled, as in PyTorch). The engine keeps only `num_generated`: `fast_forward` and
`reset` are counter updates.

Scrambling is PyTorch's: a random binary lower-triangular matrix with unit diagonal per dimension mixes the bits
of its direction numbers (linear matrix scrambling), and a random 30-bit digital shift starts the sequence.
The bits come from fnx's generator (`seed`: a fresh Generator seeded with it, else the default generator), so
scrambled points differ from PyTorch's but have the same distribution and keep the net property.
"""
from __future__ import annotations

import functools
import os

import numpy as np

from . import dtypes as _dt
from .errors import FnxRuntimeError, FnxValueError
from .ops.creation import tensor
from .ops.sampling import Generator, randint
from .tensor import Tensor

__all__ = ["SobolEngine"]

MAXBIT = 30
MAXDIM = 21201
_INIT_BITS = 18   # the most initial direction numbers of a dimension (the degree of its polynomial)
_TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_tables", "sobol_direction_numbers.npz")


@functools.cache
def _initial_numbers() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(poly, degree, vinit) of Joe & Kuo's table: vinit[d, j] for j < degree[d], zero after."""
    with np.load(_TABLE) as table:
        poly = table["poly"].astype(np.int64)
        bits = np.unpackbits(table["vinit_bits"], bitorder="little").astype(np.int64)
    degree = np.frexp(poly.astype(np.float64))[1].astype(np.int64) - 1   # bit_length - 1
    dims, js = np.nonzero(np.arange(_INIT_BITS)[None, :] < degree[:, None])   # the packing order
    start = np.cumsum(js + 1) - (js + 1)   # the j-th number of a dimension takes j + 1 bits, low bit first
    values = np.zeros(len(js), np.int64)
    for k in range(_INIT_BITS):
        has = js >= k
        values[has] |= bits[start[has] + k] << k
    vinit = np.zeros((len(poly), _INIT_BITS), np.int64)
    vinit[dims, js] = values
    return poly, degree, vinit


def direction_numbers(dimension: int) -> np.ndarray:
    """The (dimension, 30) int64 direction numbers of PyTorch's unscrambled engine (its `sobolstate`): the
    first dimension's are all 1, the others start from the table's numbers and continue by the recurrence of
    their primitive polynomial; column j is then scaled by 2**(29 - j)."""
    poly, degree, vinit = _initial_numbers()
    v = np.zeros((dimension, MAXBIT), np.int64)
    v[0] = 1
    p, m = poly[1:dimension], degree[1:dimension]
    v[1:, :_INIT_BITS] = vinit[1:dimension]
    for j in range(MAXBIT):
        rows = np.nonzero(m <= j)[0]
        if not len(rows):
            continue
        rp, rm, rv = p[rows], m[rows], v[1:][rows]
        newv = rv[np.arange(len(rows)), j - rm]
        for k in range(int(rm.max())):
            use = (k < rm) & (((rp >> np.maximum(rm - 1 - k, 0)) & 1) == 1)
            newv ^= np.where(use, rv[:, max(j - k - 1, 0)] << (k + 1), 0)
        v[rows + 1, j] = newv
    return v << np.arange(MAXBIT - 1, -1, -1)


def _parity(x: np.ndarray) -> np.ndarray:
    """1 where x (below 2**32) has an odd number of set bits."""
    for s in (16, 8, 4, 2, 1):
        x = x ^ (x >> s)
    return x & 1


def scramble_numbers(v: np.ndarray, generator: Generator | None) -> tuple[np.ndarray, np.ndarray]:
    """PyTorch's scrambling of direction numbers `v` (dimension, 30): (the scrambled numbers, the shift).

    The draws are PyTorch's, in its order: the shift's bits (dimension, 30), then a (dimension, 30, 30) bit
    tensor whose lower triangle, with ones on the diagonal, is each dimension's matrix L. Bit 29 - p of a
    scrambled number is the parity of (row p of L, read as a 30-bit number from its first column as the top
    bit) AND the number.
    """
    dimension = v.shape[0]
    shift = randint(2, (dimension, MAXBIT), generator=generator).numpy() @ (1 << np.arange(MAXBIT))
    ltm = np.tril(randint(2, (dimension, MAXBIT, MAXBIT), generator=generator).numpy())
    ltm[:, np.arange(MAXBIT), np.arange(MAXBIT)] = 1
    rows = ltm @ (1 << np.arange(MAXBIT - 1, -1, -1))   # (dimension, p)
    out = np.empty_like(v)
    for lo in range(0, dimension, 1024):   # (1024, 30, 30) int64 at a time
        both = rows[lo:lo + 1024, None, :] & v[lo:lo + 1024, :, None]   # (d, j, p)
        out[lo:lo + 1024] = (_parity(both) << np.arange(MAXBIT - 1, -1, -1)).sum(-1)
    return out, shift.astype(np.int64)


class SobolEngine:
    """Sobol' sequences in `dimension` dimensions (1 to 21201), PyTorch's engine: `draw(n)` gives the next n
    points as an (n, dimension) tensor in [0, 1); `scramble=True` scrambles them (seeded by `seed`)."""

    MAXBIT = MAXBIT
    MAXDIM = MAXDIM

    def __init__(self, dimension: int, scramble: bool = False, seed: int | None = None):
        if dimension > MAXDIM or dimension < 1:
            raise FnxValueError(f"Supported range of dimensionality for SobolEngine is [1, {MAXDIM}]")
        self.seed, self.scramble, self.dimension = seed, scramble, dimension
        self._v = direction_numbers(dimension)
        self._shift = np.zeros(dimension, np.int64)
        if scramble:
            generator = None if seed is None else Generator().manual_seed(seed)
            self._v, self._shift = scramble_numbers(self._v, generator)
        self._first_point = (tensor(self._shift) / 2 ** MAXBIT).reshape(1, -1)   # PyTorch's: in the default dtype
        self.num_generated = 0

    @property
    def sobolstate(self) -> Tensor:
        """The direction numbers, (dimension, 30) int64 (scrambled with the engine)."""
        return tensor(self._v)

    @property
    def shift(self) -> Tensor:
        """The digital shift, (dimension,) int64: zeros unless scrambled."""
        return tensor(self._shift)

    @property
    def quasi(self) -> Tensor:
        """The last point drawn as 30-bit integers, (dimension,) int64 (the shift before any draw)."""
        return tensor(self._points(max(self.num_generated - 1, 0), 1)[0])

    def _points(self, start: int, n: int) -> np.ndarray:
        """Points start .. start + n - 1 as 30-bit integers, (n, dimension) int64."""
        index = np.arange(start, start + n, dtype=np.int64)
        gray = index ^ (index >> 1)
        out = np.broadcast_to(self._shift, (n, self.dimension)).copy()
        for k in range(MAXBIT):
            out[((gray >> k) & 1) == 1] ^= self._v[:, k]
        return out

    def draw(self, n: int = 1, out: Tensor | None = None, dtype=None) -> Tensor:
        """The next `n` points, (n, dimension), in `dtype` (float32 or float64; default: the default dtype);
        written into `out` (resized) if given."""
        dtype = _dt.get_default_dtype() if dtype is None else _dt.as_dtype(dtype)
        if dtype not in (_dt.float32, _dt.float64):
            raise NotImplementedError(f"SobolEngine.draw: dtype {dtype.name} is not supported (as in PyTorch, points "
                                      f"are float32 or float64); draw one of those and convert with .to()")
        if n < 0:
            raise FnxValueError(f"SobolEngine.draw: n must be >= 0, got {n}")
        if self.num_generated + n > 2 ** MAXBIT:
            raise FnxRuntimeError(f"SobolEngine.draw: a Sobol' sequence of {MAXBIT} bits has 2**{MAXBIT} points; "
                                  f"{self.num_generated} were drawn, {n} more do not fit")
        points = self._points(self.num_generated, n).astype(dtype.np) * dtype.np.type(2.0 ** -MAXBIT)
        if self.num_generated == 0 and n:
            points[0] = self._first_point.to(dtype).numpy()[0]
        self.num_generated += n
        result = tensor(points)
        if out is not None:
            out.resize_as_(result).copy_(result)
            return out
        return result

    def draw_base2(self, m: int, out: Tensor | None = None, dtype=None) -> Tensor:
        """The next 2**m points, when the points drawn so far plus these make a power of 2 (which keeps the
        sequence's balance properties); else ValueError."""
        n = 2 ** m
        total_n = self.num_generated + n
        if total_n & (total_n - 1) != 0:
            raise FnxValueError(f"The balance properties of Sobol' points require n to be a power of 2. "
                                f"{self.num_generated} points have been previously generated, then: "
                                f"n={self.num_generated}+2**{m}={total_n}. If you still want to do this, please "
                                f"use 'SobolEngine.draw()' instead.")
        return self.draw(n=n, out=out, dtype=dtype)

    def reset(self) -> SobolEngine:
        """Start the sequence again from its first point."""
        self.num_generated = 0
        return self

    def fast_forward(self, n: int) -> SobolEngine:
        """Skip `n` points, as drawing them would."""
        if n < 0:
            raise FnxValueError(f"SobolEngine.fast_forward: n must be >= 0, got {n}")
        self.num_generated += n
        return self

    def __repr__(self) -> str:
        fields = [f"dimension={self.dimension}"]
        if self.scramble:
            fields.append("scramble=True")
        if self.seed is not None:
            fields.append(f"seed={self.seed}")
        return f"{type(self).__name__}({', '.join(fields)})"
