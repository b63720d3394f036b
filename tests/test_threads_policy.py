"""fnx's thread policy: `fnx.set_num_threads` / `fnx.get_num_threads` size both fnx's kernel thread pool and
numpy's BLAS; the default follows OMP_NUM_THREADS, else the CPU affinity mask; kernels below the parallel
threshold run on the calling thread; kernels give the same bits on any number of threads, load no libgomp, and
work from several Python threads at once and in a forked child. Behaviour only: nothing here is timed.
"""
import ctypes
import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

import fnx
import fnx.nn.functional as F
from fnx.lowering import cpu

ROOT = Path(fnx.__file__).resolve().parent.parent


@pytest.fixture
def restore_threads():
    """Put back fnx's thread count and the BLAS pools' after the test."""
    before = fnx.get_num_threads()
    with threadpool_limits(None):
        yield
        fnx.set_num_threads(before)


def last_team() -> int:
    """Tasks of the last parallel loop that a kernel ran (1: it ran on the calling thread)."""
    pool = cpu.thread_pool()
    if pool is None:
        pytest.skip("this toolchain builds kernels without threads (no OpenMP)")
    return ctypes.c_int.in_dll(pool, "fnx_rt_last_team").value


def run_python(script: str, env: dict | None = None) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    env.pop("FNX_BACKEND", None)
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, env=env,
                         cwd=ROOT, timeout=300)
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


# ---------------------------------------------------------------- the setting
def test_set_then_get_round_trips(restore_threads):
    for n in (3, 1, 2):
        fnx.set_num_threads(n)
        assert fnx.get_num_threads() == n
    fnx.set_num_threads(np.int64(4))   # any integer type
    assert fnx.get_num_threads() == 4 and type(fnx.get_num_threads()) is int


@pytest.mark.parametrize("bad, error", [(0, ValueError), (-2, ValueError), (2.0, TypeError), ("2", TypeError),
                                        (True, TypeError), (None, TypeError)])
def test_bad_counts_are_rejected_and_change_nothing(restore_threads, bad, error):
    fnx.set_num_threads(2)
    with pytest.raises(error, match=r"fnx.set_num_threads: expected a positive int, got "):
        fnx.set_num_threads(bad)
    assert fnx.get_num_threads() == 2


def test_numpy_blas_follows_the_count(restore_threads):
    blas = lambda: [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
    if not blas():
        pytest.skip("numpy's BLAS exposes no thread pool here")
    for n in (3, 1):
        fnx.set_num_threads(n)
        assert blas() and all(count == n for count in blas())


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no CPU affinity on this platform")
def test_the_default_is_omp_num_threads_else_the_cpus_this_process_may_run_on():
    script = """
        import os
        {pin}
        import fnx
        print(fnx.get_num_threads(), len(os.sched_getaffinity(0)))
    """
    unset = {"OMP_NUM_THREADS": ""}
    count, cpus = run_python(script.format(pin=""), env=unset).split()
    assert count == cpus
    pinned = "os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})"   # fewer CPUs than the machine has
    assert run_python(script.format(pin=pinned), env=unset).split() == ["1", "1"]
    assert run_python(script.format(pin=""), env={"OMP_NUM_THREADS": "3,2"}).split()[0] == "3"
    assert run_python(script.format(pin=""), env={"OMP_NUM_THREADS": "many"}).split() == [cpus, cpus]


# ---------------------------------------------------------------- the kernels
BIG = 200_000   # elements: above the parallel threshold (FNX_PARALLEL_MIN in templates/c_prelude.c.j2)


def test_kernels_run_on_the_count_and_small_ones_on_the_calling_thread(restore_threads):
    f = fnx.compile(lambda x: fnx.exp(x) * 2.0, backend="c")
    big, small = fnx.randn(BIG), fnx.randn(100)
    for n in (3, 2, 1):
        fnx.set_num_threads(n)
        f(big)
        assert last_team() == n
        f(small)
        assert last_team() == 1


# Every kernel shell's parallel loop: flat, rows, transposed tiles, reductions over rows (many rows; a few long
# rows, split into blocks), reductions over columns.
SHAPES = {
    "flat": (lambda x: fnx.tanh(x) * x + 1.0, (BIG,)),
    "rows": (lambda x: x * fnx.arange(500.0), (400, 500)),
    "tiles": (lambda x: x + x.T * 2.0, (450, 450)),
    "reduce rows": (lambda x: F.softmax(x, -1), (400, 500)),
    "reduce long rows": (lambda x: (x - x.mean(-1, keepdim=True)).exp().sum(-1), (2, BIG)),
    "reduce columns": (lambda x: x.sum(0) * x.max(0).values, (500, 400)),
}


@pytest.mark.parametrize("name", SHAPES)
def test_results_match_eager_on_any_number_of_threads(restore_threads, name):
    """Reductions add in a fixed order of blocks: the same bits on any number of threads. An elementwise chunk
    boundary moves with the count, and tanh's scalar and vector forms may differ in the last bit."""
    fn, shape = SHAPES[name]
    x = fnx.randn(*shape)
    f = fnx.compile(fn, backend="c")
    results = []
    for n in (1, 3, 4, 3):
        fnx.set_num_threads(n)
        results.append(f(x).numpy())
    expected = fn(x.to(fnx.float64)).numpy()   # float32 sums of hundreds of values may cancel: compare with float64
    for r in results:
        np.testing.assert_allclose(r, expected, rtol=2e-5, atol=1e-4)
    assert np.array_equal(results[1], results[3])   # a rerun on the same count: the same bits
    if name.startswith("reduce"):
        assert all(np.array_equal(r, results[0]) for r in results)


def test_compiled_functions_share_the_pool_from_several_python_threads(restore_threads):
    fnx.set_num_threads(3)
    f = fnx.compile(lambda x: F.softmax(x * 2.0, -1), backend="c")
    inputs = [fnx.randn(300, 400) for _ in range(4)]
    expected = [f(x).numpy() for x in inputs]
    start, errors = threading.Barrier(len(inputs), timeout=60), []

    def work(i):
        try:
            start.wait()
            for _ in range(20):
                np.testing.assert_array_equal(f(inputs[i]).numpy(), expected[i])
        except BaseException as e:  # noqa: B036 - re-raised in the main thread
            errors.append(e)
            start.abort()

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads) and not errors, errors


def test_kernels_load_no_libgomp_and_a_forked_child_runs_them():
    script = f"""
        import os
        import numpy as np
        import fnx
        from fnx.lowering import cpu
        maps = lambda: open("/proc/self/maps").read().count("libgomp")
        before = maps()
        fnx.set_num_threads(2)
        f = fnx.compile(lambda x: fnx.exp(x) * 2.0, backend="c")
        x = fnx.randn({BIG})
        expected = f(x).numpy()
        pid = os.fork()
        if pid == 0:   # the child has none of the parent's pool threads
            os._exit(0 if np.array_equal(f(x).numpy(), expected) else 1)
        _, status = os.waitpid(pid, 0)
        print(before == maps(), os.waitstatus_to_exitcode(status), cpu.thread_pool() is not None)
    """
    same, child, pooled = run_python(script).split()
    if pooled == "False":
        pytest.skip("this toolchain builds kernels without threads (no OpenMP)")
    assert (same, child) == ("True", "0")


# The child runs on one CPU with a team of two: after each parallel kernel its idle worker spins on the CPU that
# the main thread needs for Python work. A spin that yields leaves that CPU to the main thread; one that pauses
# (as the pool's did: in a virtual machine the host also takes the paused vCPU off its core, and a GEMM's jobs
# then waited milliseconds for it) took half of it. CPU times are in clock ticks, read from /proc.
SPIN_SHARE = """
    import json, os, time
    os.sched_setaffinity(0, [sorted(os.sched_getaffinity(0))[0]])
    import fnx
    from fnx.lowering import cpu
    fnx.set_num_threads(2)
    fnx.set_dynamic_threads(False)
    kernel = fnx.compile(lambda x: fnx.exp(x) * 2.0, backend="c")
    big = fnx.randn(200_000)
    kernel(big)

    def ticks():
        out = {}
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out[int(tid)] = int(fields[11]) + int(fields[12])   # utime + stime
        return out

    before = ticks()
    for _ in range(60):
        kernel(big)
        end = time.monotonic() + 0.005
        while time.monotonic() < end:
            pass
    after = ticks()
    main = os.getpid()
    others = sum(t - before.get(tid, 0) for tid, t in after.items() if tid != main)
    print(json.dumps([after[main] - before[main], others, cpu.thread_pool() is not None]))
"""


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this platform")
def test_an_idle_worker_spins_without_taking_the_cpu_from_the_thread_that_needs_it():
    main, workers, pooled = json.loads(run_python(SPIN_SHARE, {"FNX_DYNAMIC_THREADS": "0"}))
    if not pooled:
        pytest.skip("this toolchain builds kernels without threads (no OpenMP)")
    assert main >= 10 and workers <= main // 4, (main, workers)
