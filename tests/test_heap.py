"""fnx/_heap.py: on glibc, a large block freed by one step is reused by the next without new page faults."""
import platform
import resource

import numpy as np

import fnx  # noqa: F401  (its import sets the policy)
from fnx import _heap


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def test_a_freed_large_array_is_reused_without_page_faults():
    assert platform.libc_ver()[0] != "glibc" or _heap.keep_large_blocks()
    n = 48 << 20   # above glibc's default mmap threshold's ceiling (32 MiB): mapped and unmapped per use there
    a = np.ones(n, np.uint8)
    del a
    before = _faults()
    b = np.ones(n, np.uint8)   # touches every page
    after = _faults()
    assert b[-1] == 1
    assert after - before < 64, f"{after - before} page faults for a reused 48 MiB block"
