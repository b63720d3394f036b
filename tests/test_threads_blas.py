"""One thread pool for the whole process: numpy's OpenBLAS runs its jobs on fnx's kernel pool once the pool loads
(its threads callback), each job of a call on a thread of its own (a GEMM's jobs wait for each other), on the
pool's workers when the pool is free, else on threads started for the call. Behaviour only: nothing is timed;
every wait has a timeout, so a deadlock fails the test instead of hanging it.
"""
import contextlib
import ctypes
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, strategies as st
from threadpoolctl import threadpool_info

import fnx
import fnx.threads as threads
from fnx.lowering import cpu

ROOT = Path(fnx.__file__).resolve().parent.parent
TIMEOUT = 60.0
DOJOB = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_void_p, ctypes.c_int)
TASK = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def pool() -> ctypes.CDLL:
    """fnx's kernel thread pool, loaded by a compiled kernel."""
    fnx.compile(lambda x: x * 2.0, backend="c")(fnx.ones(3))
    assert cpu.thread_pool() is not None, "the C toolchain builds kernels without threads (no OpenMP)"
    return cpu.thread_pool()


def counter(name: str) -> int:
    return ctypes.c_long.in_dll(pool(), name).value


@contextlib.contextmanager
def on_threads(n: int):
    """fnx (and so OpenBLAS) on `n` threads, then back to the count before."""
    before = fnx.get_num_threads()
    fnx.set_num_threads(n)
    try:
        yield
    finally:
        fnx.set_num_threads(before)


@pytest.fixture
def two_threads():
    with on_threads(2):
        yield


def blas_jobs(jobs: int, dojob) -> None:
    """Call the pool's OpenBLAS callback as OpenBLAS does: `jobs` records of 8 bytes, record i holding i."""
    data = (ctypes.c_long * jobs)(*range(jobs))
    pool().fnx_rt_blas_jobs(1, dojob, jobs, ctypes.c_size_t(8), data, 7)


def gang(jobs: int):
    """A dojob that checks its arguments and that all `jobs` jobs run at once (a barrier across them, as a GEMM's
    jobs wait for each other); returns it, the threads each job ran on, and the errors seen."""
    barrier, ran_on, errors = threading.Barrier(jobs, timeout=TIMEOUT), {}, []

    def dojob(i, record, extra):
        try:
            assert ctypes.c_long.from_address(record).value == i and extra == 7
            ran_on[i] = threading.get_ident()
            barrier.wait()
        except BaseException as e:  # noqa: B036 - a ctypes callback cannot raise: reported by the test
            errors.append(e)
            barrier.abort()

    return DOJOB(dojob), ran_on, errors


@pytest.mark.parametrize("jobs", [1, 2, 3, 5, 8])
def test_a_calls_jobs_all_run_at_once_on_threads_of_their_own(jobs):
    dojob, ran_on, errors = gang(jobs)
    blas_jobs(jobs, dojob)
    assert not errors and sorted(ran_on) == list(range(jobs)) and len(set(ran_on.values())) == jobs


def test_jobs_run_on_new_threads_while_another_thread_holds_the_pool():
    """A kernel region of one Python thread holds the pool (its tasks wait for an event); a BLAS call from another
    thread then cannot use the pool's workers, and runs on threads started for it."""
    holding, release, errors = threading.Barrier(3, timeout=TIMEOUT), threading.Event(), []

    def task(_):
        try:
            holding.wait()
            assert release.wait(TIMEOUT)
        except BaseException as e:  # noqa: B036 - reported by the test
            errors.append(e)

    region_task = TASK(task)
    region = threading.Thread(target=lambda: pool().fnx_rt_parallel(region_task, None, 2), daemon=True)
    region.start()
    try:
        holding.wait()   # both tasks of the region are running: the pool is taken
        spawned = counter("fnx_rt_blas_spawned")
        dojob, ran_on, job_errors = gang(4)
        blas_jobs(4, dojob)
        assert not job_errors and len(set(ran_on.values())) == 4
        assert counter("fnx_rt_blas_spawned") == spawned + 1
    finally:
        release.set()
        region.join(TIMEOUT)
    assert not region.is_alive() and not errors


def numpy_blas_on_pool() -> list[str]:
    """The OpenBLAS libraries of this numpy that run their jobs on fnx's pool (once it has loaded). Another
    OpenBLAS loaded after the pool (scipy's, by an earlier test) keeps its own threads."""
    pool()
    routed = threads.blas_on_pool()
    numpy_libs = [path for path in threads.blas_callback_setters() if Path(path).parent.name == "numpy.libs"]
    assert numpy_libs and set(numpy_libs) <= set(routed), "numpy's OpenBLAS takes a callback and has fnx's"
    return routed


def products(dtype):
    """Products that OpenBLAS splits into jobs (GEMM above 64**3 multiply-adds, GEMV above 2304 * 4 elements):
    plain, transposed operands, batched, matrix-vector."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((300, 200)).astype(dtype), rng.standard_normal((200, 250)).astype(dtype)
    v = rng.standard_normal(200).astype(dtype)
    return [a @ b, b.T @ a.T, np.matmul(np.stack([a, -a, 2 * a]), b), np.repeat(a, 20, axis=0) @ v]


def test_products_on_the_pool_are_the_bits_of_openblas_own_threads():
    """The same job split, so the same bits: products before fnx's pool loads (OpenBLAS's threads) and after."""
    script = """
        import numpy as np, fnx
        from fnx.lowering import cpu
        from tests.test_threads_blas import products, counter
        fnx.set_num_threads(2)
        assert cpu.thread_pool() is None
        before = {dt: products(dt) for dt in (np.float32, np.float64)}
        calls = counter("fnx_rt_blas_calls")   # loads the pool
        after = {dt: products(dt) for dt in (np.float32, np.float64)}
        assert counter("fnx_rt_blas_calls") >= calls + 8, "the products did not run on fnx's pool"
        for dt in before:
            for x, y in zip(before[dt], after[dt]):
                assert x.dtype == dt and np.array_equal(x, y)
        print("ok")
    """
    if not numpy_blas_on_pool():
        pytest.fail("numpy's BLAS is not an OpenBLAS with a threads callback (>= 0.3.27)")
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, cwd=ROOT,
                         timeout=300)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr


@given(st.integers(65, 160), st.integers(65, 160), st.integers(65, 160), st.sampled_from([np.float32, np.float64]),
       st.booleans())
def test_matmuls_on_the_pool_match_a_reference(m, k, n, dtype, transposed):
    """Against a float64 sum of outer products (no BLAS)."""
    numpy_blas_on_pool()
    rng = np.random.default_rng(m * k * n)
    a, b = rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)
    if transposed:
        a, b = np.asfortranarray(a), np.asfortranarray(b)
    expected = sum(np.multiply.outer(a[:, i].astype(np.float64), b[i].astype(np.float64)) for i in range(k))
    with on_threads(2):
        got = a @ b
    np.testing.assert_allclose(got, expected, rtol=1e-4 if dtype == np.float32 else 1e-12, atol=1e-3)


def test_one_thread_then_two(two_threads):
    """On one thread OpenBLAS runs a call itself; on two it hands its jobs to the pool (the split may change the
    last bits)."""
    numpy_blas_on_pool()
    want = products(np.float64)
    for n, more_calls in ((1, False), (2, True)):
        fnx.set_num_threads(n)
        before = counter("fnx_rt_blas_calls")
        for x, y in zip(products(np.float64), want):
            np.testing.assert_allclose(x, y, rtol=1e-13, atol=1e-13)
        assert (counter("fnx_rt_blas_calls") > before) == more_calls


def test_matmuls_and_kernels_from_two_python_threads_finish(two_threads):
    """Matmuls in one thread, compiled kernels (the pool's regions) in another, both at once, many times: no
    deadlock, the right values (the BLAS jobs then run on the pool or on threads of their own)."""
    numpy_blas_on_pool()
    f = fnx.compile(lambda x: fnx.tanh(x) * 2.0 + 1.0, backend="c")
    x = fnx.randn(200_000)
    kernel_want = f(x).numpy()
    blas_want = products(np.float32)
    start, errors = threading.Barrier(2, timeout=TIMEOUT), []

    def matmuls():
        start.wait()
        for _ in range(30):
            for got, want in zip(products(np.float32), blas_want):
                np.testing.assert_array_equal(got, want)

    def kernels():
        start.wait()
        for _ in range(200):
            np.testing.assert_array_equal(f(x).numpy(), kernel_want)

    def guarded(fn):
        try:
            fn()
        except BaseException as e:  # noqa: B036 - re-raised in the main thread
            errors.append(e)
            start.abort()

    workers = [threading.Thread(target=guarded, args=(fn,), daemon=True) for fn in (matmuls, kernels)]
    for t in workers:
        t.start()
    for t in workers:
        t.join(TIMEOUT * 2)
    assert not any(t.is_alive() for t in workers), "deadlock: a thread did not finish"
    if errors:
        raise errors[0]


FAKE_OPENBLAS = """
void *registered = 0;
void {name}(void *callback) {{ registered = callback; }}
"""


def fake_openblas(tmp_path, stem: str, name: str | None) -> str:
    """A shared library standing in for a BLAS; with `name`, it exports that callback setter."""
    src, out = tmp_path / f"{stem}.c", tmp_path / f"lib{stem}.so"
    src.write_text(FAKE_OPENBLAS.format(name=name or "openblas_get_config"))
    subprocess.run([cpu.compiler(), "-shared", "-fPIC", str(src), "-o", str(out)], check=True)
    return str(out)


def test_the_callback_goes_only_to_an_openblas_that_exports_the_setter(tmp_path, monkeypatch):
    import threadpoolctl

    with_setter = fake_openblas(tmp_path, "new", "scipy_openblas_set_threads_callback_function64_")
    without = fake_openblas(tmp_path, "old", None)
    mkl = fake_openblas(tmp_path, "mkl", "openblas_set_threads_callback_function")
    infos = [{"user_api": "blas", "internal_api": "openblas", "filepath": without},
             {"user_api": "blas", "internal_api": "openblas", "filepath": with_setter},
             {"user_api": "blas", "internal_api": "mkl", "filepath": mkl}]
    monkeypatch.setattr(threadpoolctl, "threadpool_info", lambda: infos)
    monkeypatch.setattr(threads, "_blas_on_pool", [])
    assert threads.run_blas_on(12345) == [with_setter]
    assert ctypes.c_void_p.in_dll(ctypes.CDLL(with_setter), "registered").value == 12345
    assert ctypes.c_void_p.in_dll(ctypes.CDLL(mkl), "registered").value is None
    assert threads.run_blas_on(678) == [with_setter]   # once per library
    assert ctypes.c_void_p.in_dll(ctypes.CDLL(with_setter), "registered").value == 12345


def test_products_openblas_runs_on_one_thread_leave_its_count_alone(two_threads, monkeypatch):
    """OpenBLAS runs a product of at most 65536 x 4 multiply-adds on one thread whatever its count: such products
    skip the pool's poll (setting the count to 1 and back); larger ones poll. With the count at 2 OpenBLAS hands
    none of them to the pool (matrix-matrix, matrix-vector, a matrix times its transpose)."""
    numpy_blas_on_pool()
    x = fnx.randn(64, 64)
    before = counter("fnx_rt_blas_calls")
    for a, b in ((fnx.randn(32, 128), fnx.randn(64, 128).T), (fnx.randn(256, 1024), fnx.randn(1024)),
                 (fnx.randn(1, 1024), fnx.randn(1024, 256)), (x, x.T), (fnx.randn(4, 16, 64), fnx.randn(64, 64))):
        fnx.matmul(a, b)
    assert counter("fnx_rt_blas_calls") == before
    polled = []
    monkeypatch.setattr(threads, "_poll", lambda work: polled.append(work) or 0)
    fnx.matmul(fnx.randn(32, 128), fnx.randn(64, 128).T)   # a GRU cell's product: 262144
    assert polled == []
    fnx.matmul(fnx.randn(33, 128), fnx.randn(128, 64))
    assert polled == [33 * 128 * 64]


def test_a_small_product_runs_on_one_thread_while_the_workers_sleep(two_threads):
    """A product's jobs wait for each other, so on two threads a product waits for a sleeping worker to wake
    (milliseconds on a VM). A small one runs on the calling thread instead while the workers sleep; a large one
    wakes them; after either OpenBLAS has the team again. Tries the small one several times: a worker that the OS
    has not let finish its spin yet counts as awake."""
    routed = numpy_blas_on_pool()
    fnx.compile(lambda x: fnx.exp(x) * 2.0, backend="c")(fnx.randn(200_000))   # a parallel loop: workers start
    # float64: fnx's own GEMM takes float32 products of these sizes (test_gemm.py)
    small = fnx.randn(416, 64, dtype=fnx.float64), fnx.randn(27, 64, dtype=fnx.float64).T   # OpenBLAS: two jobs
    large = fnx.randn(256, 256, dtype=fnx.float64), fnx.randn(256, 256, dtype=fnx.float64)  # 2**24 multiply-adds

    def pool_calls(a, b):
        want = a.numpy().astype(np.float64) @ b.numpy()
        time.sleep(0.2)   # the workers' spin (10 ms) ends: they sleep
        before = counter("fnx_rt_blas_calls")
        got = fnx.matmul(a, b).numpy()
        calls = counter("fnx_rt_blas_calls") - before
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        return calls

    assert any(pool_calls(*small) == 0 for _ in range(10))
    assert pool_calls(*large) == 1
    counts = {i["num_threads"] for i in threadpool_info() if i["filepath"] in routed}
    assert counts == {2}
