"""Thread safety: grad mode, anomaly mode and the transform trace stack are per thread (as PyTorch's grad mode
is); compiled functions and the global generators work from several threads at once.

Every test runs real threads. Barriers and Events force the interleaving a test is about (no sleeps); each
wait has a timeout, so a broken interleaving fails the test instead of hanging it.
"""
import sys
import threading

import numpy as np
import pytest

import fnx
import fnx.nn as nn

TIMEOUT = 30.0  # seconds any one wait may take


def wait(event: threading.Event) -> None:
    assert event.wait(TIMEOUT), "timed out waiting for another thread"


def run_in_threads(*targets, release=()):
    """Run each target in a thread of its own and re-raise the first error of one.

    `release`: the Events and Barriers the targets wait on; a failing target sets or breaks them all, so the
    other threads stop waiting for it.
    """
    errors = []

    def guarded(fn):
        try:
            fn()
        except BaseException as e:  # noqa: B036 - re-raised in the main thread
            errors.append(e)
            for r in release:
                r.abort() if isinstance(r, threading.Barrier) else r.set()

    threads = [threading.Thread(target=guarded, args=(fn,), daemon=True) for fn in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT * 2)
    assert not any(t.is_alive() for t in threads), "a thread did not finish"
    first = [e for e in errors if not isinstance(e, threading.BrokenBarrierError)] or errors
    if first:
        raise first[0]


@pytest.fixture
def fast_switching():
    """Let threads switch every microsecond (Python's default is every 5 ms), so that they interleave almost
    at every bytecode."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


def records() -> bool:
    """Whether an op on a tensor that requires grad records a graph in the calling thread."""
    return (fnx.ones(2, requires_grad=True) * 2).requires_grad


def eager_backward() -> None:
    """An eager forward and backward; checks that the values are concrete and the gradient is right."""
    w = fnx.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = (w * w).sum()
    assert type(y) is fnx.Tensor and y.requires_grad
    y.backward()
    assert w.grad.tolist() == [2.0, 4.0, 6.0]


# ---------------------------------------------------------------- training
def train(seed: int, steps: int, barrier: threading.Barrier | None = None):
    """A small MLP fitted by SGD: its losses and final parameters."""
    rng = np.random.default_rng(seed)
    x = fnx.tensor(rng.standard_normal((16, 3)), dtype=fnx.float32)
    y = fnx.tensor(rng.standard_normal((16, 1)), dtype=fnx.float32)
    model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
    with fnx.no_grad():
        for p in model.parameters():
            p.copy_(fnx.tensor(0.5 * rng.standard_normal(tuple(p.shape)), dtype=fnx.float32))
    opt = fnx.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
    losses = []
    for _ in range(steps):
        if barrier is not None:
            barrier.wait(TIMEOUT)
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()  # updates the parameters under no_grad
        losses.append(loss.item())
    return losses, [p.detach().numpy().copy() for p in model.parameters()]


def test_four_threads_train_their_own_models(fast_switching):
    steps = 20
    expected = [train(seed, steps) for seed in range(4)]
    barrier = threading.Barrier(4)
    got = [None] * 4

    def worker(seed):
        return lambda: got.__setitem__(seed, train(seed, steps, barrier))

    run_in_threads(*[worker(seed) for seed in range(4)], release=[barrier])
    for (losses, params), (want_losses, want_params) in zip(got, expected):
        np.testing.assert_allclose(losses, want_losses, rtol=1e-6)
        for p, q in zip(params, want_params):
            np.testing.assert_allclose(p, q, rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------- grad modes
GRAD_OFF = {
    "no_grad": fnx.no_grad,
    "inference_mode": fnx.inference_mode,
    "set_grad_enabled": lambda: fnx.set_grad_enabled(False),
}


@pytest.mark.parametrize("mode", list(GRAD_OFF))
def test_grad_off_in_one_thread_leaves_recording_on_in_another(mode):
    a_inside, b_done = threading.Event(), threading.Event()

    def a():
        with GRAD_OFF[mode]():
            a_inside.set()
            wait(b_done)
            assert not fnx.is_grad_enabled() and not records()  # B's recording did not switch A's mode back on
        assert fnx.is_grad_enabled() and records()

    def b():
        wait(a_inside)  # A is inside its grad-off block now
        assert fnx.is_grad_enabled() and records()
        eager_backward()
        b_done.set()

    run_in_threads(a, b, release=[a_inside, b_done])
    assert fnx.is_grad_enabled() and records()


@pytest.mark.parametrize("mode", list(GRAD_OFF))
def test_overlapping_grad_off_blocks_leave_grad_mode_on(mode):
    """A enters, B enters, A leaves, B leaves: with one process-wide flag B would restore "off" for good."""
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()

    def a():
        with GRAD_OFF[mode]():
            a_in.set()
            wait(b_in)
        a_out.set()
        assert fnx.is_grad_enabled() and records()

    def b():
        wait(a_in)
        with GRAD_OFF[mode]():
            b_in.set()
            wait(a_out)
            assert not records()
        assert fnx.is_grad_enabled() and records()

    run_in_threads(a, b, release=[a_in, b_in, a_out])
    assert fnx.is_grad_enabled() and records()


def test_set_grad_enabled_false_switches_only_the_calling_thread():
    switched, checked = threading.Event(), threading.Event()

    def a():
        fnx.set_grad_enabled(False)  # not as a context manager: stays off for the rest of this thread
        switched.set()
        wait(checked)
        assert not records()

    def b():
        wait(switched)
        assert records()
        eager_backward()
        checked.set()

    run_in_threads(a, b, release=[switched, checked])
    assert fnx.is_grad_enabled() and records()


def test_enable_grad_in_one_thread_does_not_enable_another():
    b_off, a_on, b_checked = threading.Event(), threading.Event(), threading.Event()

    def a():
        wait(b_off)
        with fnx.enable_grad():
            a_on.set()
            wait(b_checked)

    def b():
        with fnx.no_grad():
            b_off.set()
            wait(a_on)
            assert not fnx.is_grad_enabled() and not records()
            b_checked.set()

    run_in_threads(a, b, release=[b_off, a_on, b_checked])


def test_a_new_thread_starts_with_grad_mode_on_and_no_transform():
    seen = {}

    def child():
        seen["grad"], seen["records"] = fnx.is_grad_enabled(), records()
        seen["anomaly"] = fnx.autograd.is_anomaly_enabled()
        eager_backward()  # no transform of the parent is active here
        seen["done"] = True

    def parent(x):
        with fnx.no_grad(), fnx.autograd.detect_anomaly():
            run_in_threads(child)
        return x * 2

    fnx.grad(lambda x: parent(x).sum())(fnx.ones(2))
    assert seen == {"grad": True, "records": True, "anomaly": False, "done": True}


def test_anomaly_mode_is_per_thread():
    a_inside, b_done = threading.Event(), threading.Event()

    def a():
        with fnx.autograd.detect_anomaly():
            a_inside.set()
            wait(b_done)
            assert fnx.autograd.is_anomaly_enabled()
        assert not fnx.autograd.is_anomaly_enabled()

    def b():
        wait(a_inside)
        assert not fnx.autograd.is_anomaly_enabled()
        b_done.set()

    run_in_threads(a, b, release=[a_inside, b_done])
    assert not fnx.autograd.is_anomaly_enabled()


def test_grad_mode_is_per_asyncio_task_too():
    """Grad mode lives in a context variable, so a task's no_grad does not reach a task running beside it."""
    import asyncio

    async def main():
        a_inside, b_done = asyncio.Event(), asyncio.Event()

        async def a():
            with fnx.no_grad():
                a_inside.set()
                await b_done.wait()
                assert not records()

        async def b():
            await a_inside.wait()
            assert records()
            eager_backward()
            b_done.set()

        await asyncio.wait_for(asyncio.gather(a(), b()), TIMEOUT)

    asyncio.run(main())
    assert records()


# ---------------------------------------------------------------- transforms in one thread, eager code in another
TRANSFORMS = {
    "grad": lambda f, x: fnx.grad(lambda x: f(x).sum())(x),
    "vjp": lambda f, x: fnx.vjp(f, x)[1](fnx.ones(3))[0],
    "jvp": lambda f, x: fnx.jvp(f, (x,), (fnx.ones(3),))[1],
    "vmap": lambda f, x: fnx.vmap(f)(x),
    "compile": lambda f, x: fnx.compile(f)(x),
    "make_jaxpr": lambda f, x: str(fnx.make_jaxpr(f)(x)),
}


def run_transform(name: str, x, middle=lambda: None):
    """TRANSFORMS[name] of `y = x * x; middle(); y + 1` (staged ops before and after `middle()`)."""
    def f(x):
        y = x * x
        middle()
        return y + fnx.ones(3)
    out = TRANSFORMS[name](f, x)
    return out if isinstance(out, str) else out.numpy()


def assert_same(got, want) -> None:
    if isinstance(want, str):
        assert got == want
    else:
        np.testing.assert_allclose(got, want)


@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_eager_autograd_runs_while_another_thread_is_inside_a_transform(name):
    held, release = threading.Event(), threading.Event()
    x = fnx.tensor([1.0, 2.0, 3.0])
    out = {}

    def hold():
        held.set()
        wait(release)

    def a():
        out["a"] = run_transform(name, x, hold)

    def b():
        wait(held)  # A is in the middle of its transform
        eager_backward()
        assert type(fnx.ones(2) + 1) is fnx.Tensor  # not staged into A's trace
        with fnx.no_grad():
            assert not records()
        release.set()

    run_in_threads(a, b, release=[held, release])
    assert_same(out["a"], run_transform(name, x))


@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_two_threads_inside_transforms_at_once(name):
    """A enters its transform, then B does; A leaves while B is still inside: each thread has its own stack."""
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    xs = [fnx.tensor([1.0, 2.0, 3.0]), fnx.tensor([-1.0, 0.5, 4.0])]
    out = [None, None]

    def a_middle():
        a_in.set()
        wait(b_in)

    def a():
        out[0] = run_transform(name, xs[0], a_middle)
        a_out.set()

    def b_middle():
        b_in.set()
        wait(a_out)

    def b():
        wait(a_in)
        out[1] = run_transform(name, xs[1], b_middle)

    run_in_threads(a, b, release=[a_in, b_in, a_out])
    for got, x in zip(out, xs):
        assert_same(got, run_transform(name, x))


# ---------------------------------------------------------------- compiled functions and random numbers
def test_one_compiled_function_called_from_threads(fast_switching):
    """Concurrent calls: first tracing (two threads per signature, two signatures at once), then running the
    same executables (whose generated drivers share argument blocks between calls) many times."""
    f = fnx.compile(lambda a, b: (a * b + 1.0).exp().sum(dim=-1))
    barrier = threading.Barrier(4)

    def worker(i):
        def run():
            rng = np.random.default_rng(i)
            shape = (3, 5 + i % 2)
            barrier.wait(TIMEOUT)
            for _ in range(1500):
                a, b = rng.standard_normal(shape, np.float32), rng.standard_normal(shape, np.float32)
                got = f(fnx.tensor(a), fnx.tensor(b)).numpy()
                np.testing.assert_allclose(got, np.exp(a * b + 1).sum(-1), rtol=1e-5)
        return run

    run_in_threads(*[worker(i) for i in range(4)], release=[barrier])


def test_compiled_functions_that_sample_trace_in_two_threads_at_once():
    """A's compile starts tracing, then B's; A samples while B's trace is the latest: each draws from the key
    of its own trace (the key sources of compiles in progress are per thread)."""
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()

    def noisy_a(x):
        a_in.set()
        wait(b_in)
        return x + fnx.rand(3)

    def noisy_b(x):
        b_in.set()
        wait(a_out)
        return x + fnx.rand(3)

    out = [None, None]

    def a():
        out[0] = fnx.compile(noisy_a)(fnx.zeros(3))
        a_out.set()

    def b():
        wait(a_in)
        out[1] = fnx.compile(noisy_b)(fnx.full((3,), 10.0))

    run_in_threads(a, b, release=[a_in, b_in, a_out])
    for o, base in zip(out, (0.0, 10.0)):
        v = o.numpy() - base
        assert ((v >= 0) & (v < 1)).all()


def test_global_generator_draws_from_threads_are_the_serial_draws(fast_switching):
    """Threads share one stream (as in PyTorch): every draw is one of the serial sequence's, none repeats,
    also when the threads' first draws after `manual_seed` create the generator together."""
    n_threads, draws, rounds = 4, 5, 20
    fnx.manual_seed(123)
    serial = {tuple(fnx.rand(4).tolist()) for _ in range(n_threads * draws)}
    barrier = threading.Barrier(n_threads, action=lambda: fnx.manual_seed(123))  # reseeds before each round
    got = [[] for _ in range(rounds)]

    def worker():
        for r in range(rounds):
            barrier.wait(TIMEOUT)
            for _ in range(draws):
                got[r].append(tuple(fnx.rand(4).tolist()))

    run_in_threads(*[worker] * n_threads, release=[barrier])
    for drawn in got:
        assert len(set(drawn)) == len(drawn) and set(drawn) == serial
