"""Write fnx/_tables/sobol_direction_numbers.npz, the Joe & Kuo direction numbers that fnx.quasirandom's
SobolEngine starts from (those of PyTorch's SobolEngine: new-joe-kuo-6.21201, search criterion D(6)).

    python tools/sobol_table.py

The numbers come from SciPy's copy of the table (scipy.stats.qmc.Sobol), which is needed only to run this
script: fnx reads the file it writes. For each dimension d the table has its primitive polynomial `poly[d]`
(degree m = bit_length - 1) and m initial direction numbers, the j-th (from 0) odd and below 2**(j + 1).
The file keeps `poly` and those numbers bit-packed (j + 1 bits each, low bit first, dimension after
dimension), about 420 kB instead of SciPy's 590 kB; tests/test_quasirandom.py checks it against SciPy's.
"""
from __future__ import annotations

import importlib.util
import pathlib

import numpy as np

OUT = pathlib.Path(__file__).resolve().parent.parent / "fnx" / "_tables" / "sobol_direction_numbers.npz"


def scipy_table() -> tuple[np.ndarray, np.ndarray]:
    """SciPy's (poly, vinit): shapes (21201,) and (21201, 18), read without importing scipy.stats (slow)."""
    scipy_dir = pathlib.Path(importlib.util.find_spec("scipy").submodule_search_locations[0])
    with np.load(scipy_dir / "stats" / "_sobol_direction_numbers.npz") as table:
        return table["poly"], table["vinit"]


def pack(poly: np.ndarray, vinit: np.ndarray) -> np.ndarray:
    """The used initial direction numbers as one bit string (see the module docstring)."""
    bits = []
    for d, p in enumerate(poly):
        for j in range(int(p).bit_length() - 1):
            v = int(vinit[d, j])
            assert v % 2 == 1 and v < 2 ** (j + 1), (d, j, v)
            bits.extend((v >> k) & 1 for k in range(j + 1))
    return np.packbits(np.array(bits, np.uint8), bitorder="little")


def main() -> None:
    poly, vinit = scipy_table()
    np.savez_compressed(OUT, poly=poly.astype(np.uint32), vinit_bits=pack(poly, vinit))
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
