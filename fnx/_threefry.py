"""Threefry-2x32 (Salmon et al. 2011, 20 rounds): the block cipher under fnx.random, as array code and constants.

A leaf module: fnx/random.py hashes with `threefry2x32` on numpy or CuPy arrays, and the kernel generator
(fnx/lowering/codegen.py) writes the same rounds in C from `ROTATIONS`, so the two cannot drift apart.
"""
from __future__ import annotations

__all__ = ["ROTATIONS", "threefry2x32"]

ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))   # left rotations of the even and the odd groups of 4 rounds


def threefry2x32(xp, k0, k1, x0, x1):
    """Threefry-2x32 with 20 rounds on uint32 arrays of the array module `xp`, updating two new arrays in place."""
    u32 = xp.uint32
    ks = (k0, k1, k0 ^ k1 ^ u32(0x1BD11BDA))
    x0, x1 = x0 + ks[0], x1 + ks[1]
    spill = xp.empty_like(x1)
    for i in range(5):
        for r in ROTATIONS[i % 2]:
            xp.add(x0, x1, out=x0)
            xp.right_shift(x1, u32(32 - r), out=spill)   # x1 = rotate_left(x1, r) ^ x0
            xp.left_shift(x1, u32(r), out=x1)
            xp.bitwise_or(x1, spill, out=x1)
            xp.bitwise_xor(x1, x0, out=x1)
        xp.add(x0, ks[(i + 1) % 3], out=x0)
        xp.add(x1, ks[(i + 2) % 3] + u32(i + 1), out=x1)
    return x0, x1
