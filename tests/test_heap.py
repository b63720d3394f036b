"""fnx/_heap.py: on glibc, a large block freed by one step is reused by the next without new page faults."""
import platform
import resource

import numpy as np

import fnx  # its import sets the policy
from fnx import _heap
from fnx.lowering.plan import plan_steps, working_set


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


def test_freed_blocks_up_to_the_kept_working_set_stay_in_the_heap():
    """More than TRIM_THRESHOLD freed at once (a compiled step's temporaries at its end) stays for the next use
    once a program's working set asked for it: no page faults when the blocks are allocated again."""
    blocks, size = 9, 32 << 20   # 288 MiB from the heap (each block below MMAP_THRESHOLD)
    assert blocks * size > _heap.TRIM_THRESHOLD
    _heap.keep_free(blocks * size)
    assert platform.libc_ver()[0] != "glibc" or _heap.kept_free() >= _heap.TRIM_THRESHOLD + blocks * size
    arrays = [np.ones(size, np.uint8) for _ in range(blocks)]
    del arrays
    before = _faults()
    arrays = [np.ones(size, np.uint8) for _ in range(blocks)]
    after = _faults()
    assert all(a[-1] == 1 for a in arrays)
    assert after - before < 64 * blocks, f"{after - before} page faults for {blocks} reused 32 MiB blocks"


def test_a_compiled_program_keeps_its_working_set(monkeypatch):
    """A C executable's working set: the most of its own arrays alive at once (here two: a matmul's operand
    b = x @ x with its result c, then c with the output c + 1), which building it asks the heap to keep."""
    def f(x):
        return (x @ x) @ x + 1.0

    x = fnx.ones((64, 64))
    closed = fnx.make_jaxpr(f)(x)
    steps, _ = plan_steps(closed, "c")
    assert working_set(closed, steps) == 2 * 64 * 64 * 4
    asked = []
    monkeypatch.setattr(_heap, "keep_free", asked.append)
    fnx.compile(f)(x)
    assert asked == [2 * 64 * 64 * 4]
