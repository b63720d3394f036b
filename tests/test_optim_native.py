"""The fused Adam/AdamW, SGD (with momentum) and RMSprop updates as one C pass (fnx/lowering/optim_kernels.py):
taken for a large group of contiguous float parameters, with the numpy passes' bits on one thread and on two, for
every option; the numpy passes stay for small groups and non-contiguous parameters."""
import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fnx
from fnx import optim
from fnx.lowering import optim_kernels

SHAPES = [(64, 700), (7,), (0,), (3, 1000), ()]   # 47808 elements: above MIN_ELEMENTS and FNX_PARALLEL_MIN
OPTIONS = [dict(zip(("amsgrad", "maximize", "weight_decay"), values))
           for values in itertools.product([False, True], [False, True], [0, 0.1])]
SGD_OPTIONS = [dict(momentum=momentum, dampening=dampening, nesterov=nesterov, maximize=maximize, weight_decay=decay)
               for momentum, dampening, nesterov, maximize, decay in itertools.product(
                   [0, 0.9], [0, 0.2], [False, True], [False, True], [0, 0.1])
               if not (nesterov and (dampening or not momentum))]
RMSPROP_OPTIONS = [dict(centered=centered, momentum=momentum, maximize=maximize, weight_decay=decay)
                   for centered, momentum, maximize, decay in itertools.product([False, True], [0, 0.5],
                                                                                 [False, True], [0, 0.1])]
UPDATES = [(optim.Adam, OPTIONS), (optim.AdamW, OPTIONS), (optim.SGD, SGD_OPTIONS), (optim.RMSprop, RMSPROP_OPTIONS)]


@pytest.fixture
def native_calls(monkeypatch):
    """One True per C pass (an optim_kernels.adam, sgd or rmsprop call that ran its loop) run."""
    calls = []

    def spy(update):
        def run(*args, **kwargs):
            ran = update(*args, **kwargs)
            if ran:
                calls.append(True)
            return ran
        return run
    for name in ("adam", "sgd", "rmsprop"):
        monkeypatch.setattr(optim_kernels, name, spy(getattr(optim_kernels, name)))
    return calls


@pytest.fixture
def threads():
    before = fnx.get_num_threads()
    yield fnx.set_num_threads
    fnx.set_num_threads(before)


def _train(cls, kwargs, dtype, params=None, steps=3, replace=False, shapes=SHAPES):
    """The parameters and flat state after `steps` updates of seeded random gradients (`replace`: each
    parameter's array replaced by a copy before each step, as `p.data = ...` does)."""
    rng = np.random.default_rng(0)
    params = params or [fnx.tensor(rng.standard_normal(s).astype(dtype), requires_grad=True) for s in shapes]
    opt = cls(params, lr=0.01, **kwargs)
    for _ in range(steps):
        for p in params:
            if replace:
                p._value = p._value.copy()
            p.grad = fnx.tensor(rng.standard_normal(p.shape).astype(dtype))
        opt.step()
    state = [s[k]._value for s in opt.state.values() for k in sorted(s) if k != "step"]
    return [p._value.copy() for p in params] + [s.copy() for s in state]


def _numpy_passes(cls, kwargs, dtype, monkeypatch, shapes=SHAPES):
    with monkeypatch.context() as m:
        m.setattr(optim_kernels, "MIN_ELEMENTS", 10 ** 12)
        return _train(cls, kwargs, dtype, shapes=shapes)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cls, options", UPDATES, ids=[cls.__name__ for cls, _ in UPDATES])
def test_c_pass_taken_with_numpys_bits(cls, options, dtype, native_calls, threads, monkeypatch):
    for kwargs in options:
        native_calls.clear()
        expected = _numpy_passes(cls, kwargs, dtype, monkeypatch)
        assert native_calls == []
        for n in (1, 2):
            threads(n)
            native_calls.clear()
            got = _train(cls, kwargs, dtype)
            assert native_calls == [True] * 3, (kwargs, n)
            for a, b in zip(got, expected):
                assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), (cls.__name__, dtype, kwargs, n)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(0, 20000), min_size=1, max_size=6).filter(lambda s: sum(s) >= 4096),
       amsgrad=st.booleans())
def test_any_parameter_sizes_on_two_threads_give_numpys_bits(sizes, amsgrad, native_calls, threads, monkeypatch):
    threads(2)
    shapes = [(n,) for n in sizes]
    native_calls.clear()
    expected = _numpy_passes(optim.AdamW, dict(amsgrad=amsgrad), np.float32, monkeypatch, shapes)
    got = _train(optim.AdamW, dict(amsgrad=amsgrad), np.float32, shapes=shapes)
    assert native_calls == [True] * 3
    for a, b in zip(got, expected):
        assert a.tobytes() == b.tobytes()


def test_parameter_arrays_replaced_between_steps(native_calls, monkeypatch):
    expected = _numpy_passes(optim.AdamW, {}, np.float32, monkeypatch)
    got = _train(optim.AdamW, {}, np.float32, replace=True)
    assert native_calls == [True] * 3
    for a, b in zip(got, expected):
        assert a.tobytes() == b.tobytes()


def test_sgd_parameters_that_start_later_take_numpys_bits(native_calls, monkeypatch):
    # a parameter whose first gradient comes a step later starts its momentum buffer then (a batch of its own that
    # step: the buffer set to the gradient)

    def train(native: bool):
        rng = np.random.default_rng(2)
        params = [fnx.tensor(rng.standard_normal((64, 100)).astype(np.float32), requires_grad=True) for _ in "ab"]
        grads = [[fnx.tensor(rng.standard_normal((64, 100)).astype(np.float32)) for _ in "ab"] for _ in range(3)]
        opt = optim.SGD(params, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)
        with monkeypatch.context() as m:
            if not native:
                m.setattr(optim_kernels, "MIN_ELEMENTS", 10 ** 12)
            for step, (ga, gb) in enumerate(grads):
                params[0].grad, params[1].grad = ga, gb if step else None
                opt.step()
        return [p._value.copy() for p in params] + [opt.state[p]["momentum_buffer"]._value.copy() for p in params]

    got, want = train(True), train(False)
    assert len(native_calls) == 4   # step 1: one batch; steps 2 and 3: the buffers that started at 1 and at 2
    for a, b in zip(got, want):
        assert a.tobytes() == b.tobytes()


def test_numpy_passes_for_small_groups_no_compiler_and_strided_parameters(native_calls, monkeypatch):
    small = [fnx.tensor(np.ones((4, 3), np.float32), requires_grad=True)]
    _train(optim.AdamW, {}, np.float32, params=small, steps=1)
    assert native_calls == []
    with monkeypatch.context() as m:
        m.setattr(optim_kernels, "_library", lambda name: None)   # no C compiler
        _train(optim.AdamW, {}, np.float32, steps=1)
    assert native_calls == []
    strided = fnx.tensor(np.ones((200, 100), np.float32), requires_grad=True)
    strided._value = np.ones((100, 200), np.float32).T
    got = _train(optim.AdamW, {}, np.float32, params=[strided], steps=2)
    assert native_calls == []
    assert np.all(np.isfinite(got[0])) and not np.array_equal(got[0], np.ones((200, 100), np.float32))


def test_c_steps_keep_state_views_and_allocate_no_scratch(native_calls):
    rng = np.random.default_rng(1)
    params = [fnx.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True) for s in SHAPES]
    opt = optim.Adam(params, lr=0.01)
    for _ in range(2):
        for p in params:
            p.grad = fnx.tensor(np.ones(p.shape, np.float32))
        opt.step()
    assert native_calls == [True, True]
    layouts = [layout for group in opt._flat_layouts.values() for layout in group.values()]
    assert layouts and all(layout.grad is None and layout.scratch is None for layout in layouts)  # numpy's only
    for p in params:
        exp_avg = opt.state[p]["exp_avg"]._value
        assert exp_avg.base is not None and int(opt.state[p]["step"]._value) == 2
        np.testing.assert_allclose(exp_avg, 0.19, rtol=1e-6)


def test_an_update_builds_its_own_loop_alone():
    """A library per C function: the first AdamW step waited for all 34 loops to compile (3 s), now for its one."""
    name = "fnx_adam_f32_0decoupled0"
    _train(optim.AdamW, {}, np.float32, steps=1)
    lib = optim_kernels._library.__self__._part(name[4:])   # the library of its part
    assert lib is not None and hasattr(lib, name)
    assert not any(hasattr(lib, other) for other in optim_kernels._ARGTYPES if other != name)


@pytest.mark.parametrize("cls, options", [(optim.AdamW, {}), (optim.Adam, dict(weight_decay=0.1, amsgrad=True)),
                                          (optim.SGD, dict(momentum=0.9)), (optim.SGD, {}),
                                          (optim.RMSprop, dict(centered=True, momentum=0.5))])
def test_an_optimizer_starts_building_the_loop_its_first_step_calls(cls, options, monkeypatch):
    """Made over parameters that its fused update runs in C, an optimizer starts building that loop (so a
    training loop's first step need not wait for the compiler): the one its step then calls, and nothing for small
    groups, foreach=False or another device's parameters."""
    started, called = [], []
    monkeypatch.setattr(optim_kernels, "build_soon", started.append)
    real = optim_kernels._library
    monkeypatch.setattr(optim_kernels, "_library", lambda name: called.append(name) or real(name))
    big = [fnx.zeros(64, 100, requires_grad=True), fnx.zeros(10, requires_grad=True)]
    opt = cls(big, lr=0.01, **options)
    assert len(started) == 1
    for p in big:
        p.grad = fnx.ones(p.shape)
    opt.step()
    assert called == started
    started.clear()
    cls([fnx.zeros(10, 10, requires_grad=True)], lr=0.01, **options)
    cls(big, lr=0.01, foreach=False, **options)
    cls([fnx.zeros(64, 100, dtype=fnx.float16, requires_grad=True)], lr=0.01, **options)
    assert started == []
