"""Dynamic teams: while other processes keep the CPUs busy, fnx's kernel loops and numpy's OpenBLAS run on at most
the CPUs left free; `fnx.set_dynamic_threads(False)` (or FNX_DYNAMIC_THREADS=0) keeps the count set. The rest of
the suite runs with them off (tests/conftest.py), so that its thread counts are exact. Behaviour only: nothing is
timed; the busy-neighbour test waits for the pool's next load samples, up to a generous limit.
"""
import ctypes
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import fnx

ROOT = Path(fnx.__file__).resolve().parent.parent


def run_python(script: str, env: dict) -> str:
    """`script`'s output in a new process, with `env` over this one's environment (None: unset)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FNX_BACKEND": None, **env}
    env = {k: v for k, v in env.items() if v is not None}
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, env=env,
                         cwd=ROOT, timeout=300)
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


@pytest.fixture
def restore_dynamic():
    before = fnx.get_dynamic_threads()
    yield
    fnx.set_dynamic_threads(before)


def test_set_then_get_round_trips(restore_dynamic):
    for enabled in (True, False, True):
        fnx.set_dynamic_threads(enabled)
        assert fnx.get_dynamic_threads() is enabled


@pytest.mark.parametrize("bad", [1, 0, "yes", None])
def test_only_bools_are_taken(restore_dynamic, bad):
    fnx.set_dynamic_threads(True)
    with pytest.raises(TypeError, match=r"fnx.set_dynamic_threads: expected True or False, got "):
        fnx.set_dynamic_threads(bad)
    assert fnx.get_dynamic_threads() is True


def test_on_by_default_and_off_with_the_environment_variable():
    script = "import fnx; print(fnx.get_dynamic_threads())"
    assert run_python(script, {"FNX_DYNAMIC_THREADS": None}) == "True"
    assert run_python(script, {"FNX_DYNAMIC_THREADS": "0"}) == "False"


# The child pins itself and `cpus` spinning processes to the same CPUs (at most two of its affinity mask), asks
# for that many threads, first mostly sleeping (a window in which it used less than half a CPU is not counted:
# it keeps its team), then running a parallel kernel until the pool's load samples see the spinners: then the
# kernel runs on one thread and OpenBLAS has a count of one. Turning dynamic teams off gives back the full team
# at once, and with them on again the spinners' load still holds the team down. A niced child counts niced
# spinners too (a child that is not niced leaves them out, as the scheduler gives them little of its CPUs; that
# direction cannot be checked while other tests may load the machine).
BUSY_NEIGHBOURS = """
    import ctypes, json, os, subprocess, sys, time
    cpus = sorted(os.sched_getaffinity(0))[:2]
    os.sched_setaffinity(0, cpus)
    niced = os.environ["NICED"] == "1"
    if niced:
        os.nice(5)
    import fnx
    from fnx.lowering import cpu
    from threadpoolctl import threadpool_info

    fnx.set_num_threads(2)
    kernel = fnx.compile(lambda x: fnx.exp(x) * 2.0, backend="c")
    big = fnx.randn(200_000)
    kernel(big)
    pool = cpu.thread_pool()
    team = lambda: ctypes.c_int.in_dll(pool, "fnx_rt_last_team").value
    blas = lambda: [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas" and i["filepath"] in
                    fnx.threads.blas_on_pool() and i.get("threading_layer") == "pthreads"]
    spin = "import os, sys; os.sched_setaffinity(0, [int(sys.argv[1])]); os.nice(int(sys.argv[2]))\\nwhile True: pass"
    spinners = [subprocess.Popen([sys.executable, "-c", spin, str(c), "19" if niced else "0"])
                for c in cpus * (3 - len(cpus))]

    def busy_for(seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            kernel(big)

    try:
        for _ in range(4):   # mostly asleep beside them: windows it hardly used say nothing of its contention
            time.sleep(0.25)
            kernel(big)
        idle = team()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            busy_for(0.25)
            if team() == 1:
                break
        busy = team()
        (fnx.ones(64, 64) @ fnx.ones(64, 64)).sum()   # a product: the pool's poll keeps BLAS's count in step
        busy_blas = blas()
        fnx.set_dynamic_threads(False)
        kernel(big)
        fixed, fixed_blas = team(), blas()
        fnx.set_dynamic_threads(True)
        busy_for(0.5)
        again = team()
    finally:
        for s in spinners:
            s.kill()
    print(json.dumps([idle, busy, busy_blas, fixed, fixed_blas, again]))
"""


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this platform")
@pytest.mark.parametrize("niced", ["0", "1"])
def test_a_busy_neighbour_takes_the_team_down_to_the_free_cpus(niced):
    env = {"FNX_DYNAMIC_THREADS": None, "NICED": niced}
    idle, busy, busy_blas, fixed, fixed_blas, again = json.loads(run_python(BUSY_NEIGHBOURS, env))
    assert idle == 2 and busy == 1 and fixed == 2 and again == 1
    assert busy_blas in ([], [1]) and fixed_blas in ([], [2])   # []: numpy's BLAS is not on the pool here


MS = 1_000_000   # ns


@pytest.mark.parametrize("own, busy, free, want", [
    (150 * MS, 150 * MS, 1, 2),    # busy here, nobody else: both CPUs
    (150 * MS, 350 * MS, 2, 1),    # busy here beside one busy process: one
    (180 * MS, 500 * MS, 2, 1),    # 1.6 CPUs of others' load rounds to two: none left (a team of one)
    (10 * MS, 210 * MS, 2, 2),     # mostly idle here beside a busy process: the last busy window's count stays
    (10 * MS, 210 * MS, 1, 1),
    (10 * MS, 60 * MS, 1, 2),      # idle here and there (a quarter of a CPU): the stale count of one is dropped
    (0, 0, 1, 2),
])
def test_the_free_cpus_after_a_window(own, busy, free, want):
    """The pool's count of CPUs left free by other processes, from one 200 ms load window on 2 CPUs
    (c_threads.c.j2's fnx_rt_free_after)."""
    from fnx.lowering import cpu

    fnx.compile(lambda x: x * 2.0, backend="c")(fnx.ones(3))   # a kernel loads the pool
    pool = cpu.thread_pool()
    assert pool is not None, "the C toolchain builds kernels without threads (no OpenMP)"
    free_after = pool.fnx_rt_free_after
    free_after.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_int]
    got = free_after(2, own, busy, 200 * MS, free)
    assert max(got, 1) == want
