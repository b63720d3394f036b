"""Eager random sampling (PyTorch's torch.rand family) from a global generator per device.

Each device has a default `Generator`: numpy's PCG64 on the CPU, CuPy's
generator on CUDA (created when first used). `manual_seed(seed)` seeds them
all, so a seeded program draws the same numbers on every run. Sampling is
not differentiable (PyTorch's samplers give zero gradients); the pure,
key-based samplers for transforms live in `fnx.random`.

Inside `fnx.compile` the out-of-place samplers (rand, randn, randint, randperm, bernoulli, normal, the
`*_like` forms, and so dropout) draw from a key instead, as torch.compile threads a seed into its graph:
while compile traces a function, each sampling site takes its own subkey (`fold_in` of a counter) of a
per-device key that the compiled function receives as a hidden input, and every call fills that input
with a fresh key drawn from the device's default generator (one 64-bit draw). Repeated calls thus give
new samples, `manual_seed` makes a sequence of calls reproducible, and no call retraces. The samples
follow the same distributions as eager ones, but are not the same numbers. Where a draw cannot become a
key input (make_jaxpr, bodies of cond/while_loop/scan, custom_vjp and checkpoint functions staged inside
compile, an explicit `generator`, multinomial) sampling under staging raises an error that says what to do
instead. In-place samplers on a traced tensor (torchvision's `torch.empty(size).bernoulli_(p)`, timm's
`x.new_empty(shape).bernoulli_(p)`) are functionalized: the tracer becomes the out-of-place sample.

The default generators are shared by all threads, as PyTorch's are. On the CPU, numpy's generator draws
under its own lock and a lock here guards creating and seeding the generators, so concurrent draws each
take their own numbers of the one stream (in an order that depends on the threads' timing); CuPy's
generator has no such lock (not tested from several threads). The key sources of compiles in progress are
per thread, as the trace stack is.

The CPU generator state (`get_rng_state`) is a uint8 tensor of 48 bytes:
PCG64's 128-bit state and increment, then its buffered-uint32 flag and value
as two 64-bit words, all little-endian; `fnx.save` can store it.
"""
from __future__ import annotations

import math
import os
import threading
from contextlib import contextmanager

import numpy as np

from .. import core
from .. import dtypes as _dt
from .. import random as keyed
from ..core import FnxRuntimeError, FnxTypeError, FnxValueError
from ..device import cpu, device as _device_cls, get_default_device
from ..tensor import Tensor, Tracer, check_layout, make
from ._batching import BatchTrace, BatchTracer
from ._families import same_device
from .complex import view_as_complex
from .creation import memory_order, sizes_or_size
from .inplace import _check_target, assign_, rebind_
from .sort import argsort

__all__ = ["Generator", "default_generator", "manual_seed", "seed", "initial_seed", "get_rng_state",
           "set_rng_state", "rand", "randn", "randint", "randperm", "multinomial", "bernoulli", "normal",
           "poisson", "binomial", "rand_like", "randn_like", "randint_like"]

_DEFAULT_SEED = 67280421310721  # PyTorch's default seed
_lock = threading.Lock()  # held while a generator is created or the default generators are seeded
_STATE_BYTES = 48
_UNIT_BITS = {"float16": 11, "bfloat16": 8}  # uniform floats exactly representable (and < 1) in these dtypes


# ---------------------------------------------------------------- generators
class Generator:
    """A random-number generator on one device (`fnx.Generator(device='cpu').manual_seed(0)`)."""

    def __init__(self, device="cpu"):
        self.device = _device_cls(device)
        self._initial_seed = _DEFAULT_SEED
        self._rng = None

    @property
    def rng(self):
        """The backend generator: numpy's `Generator(PCG64)` or CuPy's generator (created on first use)."""
        rng = self._rng
        if rng is None:
            with _lock:  # two threads drawing first must not each start a stream of their own
                if self._rng is None:
                    self._rng = self._new_rng()
                rng = self._rng
        return rng

    def _new_rng(self):
        if self.device is cpu:
            return np.random.Generator(np.random.PCG64(self._initial_seed))
        cp = self.device.xp
        with cp.cuda.Device(self.device.index):
            return cp.random.default_rng(self._initial_seed)

    def manual_seed(self, seed: int) -> Generator:
        """Restart the stream from `seed` (-2**63 <= seed < 2**64; negative seeds wrap to 64 bits, as in PyTorch)."""
        self._initial_seed = _seed_value(seed)
        self._rng = None
        return self

    def seed(self) -> int:
        """Seed from the operating system's entropy and return the seed used."""
        s = int.from_bytes(os.urandom(8), "little") >> 1
        self.manual_seed(s)
        return s

    def initial_seed(self) -> int:
        return self._initial_seed

    def get_state(self) -> Tensor:
        """The CPU generator's state as a uint8 tensor (see the module docstring for its layout)."""
        if self.device is not cpu:
            raise NotImplementedError(f"Generator(device='{self.device}').get_state: CuPy's generator state cannot "
                                      f"be exported; re-seed with manual_seed(seed) to reproduce a stream")
        st = self.rng.bit_generator.state
        raw = (st["state"]["state"].to_bytes(16, "little") + st["state"]["inc"].to_bytes(16, "little")
               + int(st["has_uint32"]).to_bytes(8, "little") + int(st["uinteger"]).to_bytes(8, "little"))
        return make(np.frombuffer(raw, dtype=np.uint8).copy(), cpu)

    def set_state(self, new_state: Tensor) -> Generator:
        """Restore a state from `get_state()`."""
        if self.device is not cpu:
            raise NotImplementedError(f"Generator(device='{self.device}').set_state: CuPy's generator state cannot "
                                      f"be restored; re-seed with manual_seed(seed) instead")
        arr = np.asarray(new_state.cpu().numpy() if isinstance(new_state, Tensor) else new_state)
        if arr.dtype != np.uint8:
            raise FnxTypeError(f"set_state: the state must be a uint8 tensor (PyTorch's ByteTensor) from get_state(), "
                               f"got {arr.dtype}")
        if arr.size != _STATE_BYTES:
            raise FnxRuntimeError(f"set_state: expected a uint8 tensor of {_STATE_BYTES} bytes from get_state(), "
                                  f"got {arr.dtype} with {arr.size} elements")
        raw = arr.tobytes()
        word = [int.from_bytes(raw[i:j], "little") for i, j in ((0, 16), (16, 32), (32, 40), (40, 48))]
        self.rng.bit_generator.state = {"bit_generator": "PCG64", "state": {"state": word[0], "inc": word[1]},
                                        "has_uint32": word[2], "uinteger": word[3]}
        return self

    def __repr__(self) -> str:
        return f"fnx.Generator(device='{self.device}', initial_seed={self._initial_seed})"


def _seed_value(seed) -> int:
    """`seed` as the unsigned 64-bit seed PyTorch makes of it (int() of it, negative ones wrapped)."""
    value = int(seed)
    if not -2 ** 63 <= value < 2 ** 64:
        raise FnxValueError(f"manual_seed: the seed must be in [-2**63, 2**64 - 1], got {value}")
    return value % 2 ** 64


default_generator = Generator("cpu")
_defaults: dict = {cpu: default_generator}
_global_seed = _DEFAULT_SEED


def _generator(generator: Generator | None, device, op: str, staged: bool = False) -> Generator | None:
    """The generator to draw from: `generator` (checked against `device`) or the device's default one.

    While fnx.compile stages the function it is None: a sampler that passed `staged=True` then draws from
    the compiled call's key (`_draw_staged`); elsewhere a staged draw raises, since it would freeze a sample.
    """
    if core.state.dynamic_trace.level > 0:
        _check_staged_draw(generator, op, staged)
        return None
    if generator is not None:
        if not isinstance(generator, Generator):
            raise FnxTypeError(f"{op}: generator must be an fnx.Generator, got {type(generator).__name__}")
        if generator.device is not device:
            raise FnxRuntimeError(f"{op}: Expected a '{device}' generator for a tensor on {device}, but found a "
                                  f"generator on '{generator.device}'")
        return generator
    gen = _defaults.get(device)
    if gen is None:
        with _lock:
            gen = _defaults.get(device)
            if gen is None:
                gen = _defaults[device] = Generator(device).manual_seed(_cuda_seeds.get(device.index, _global_seed))
    return gen


def manual_seed(seed: int) -> Generator:
    """Seed the default generators of every device (CUDA ones too, now or when first used)."""
    global _global_seed
    with _lock:
        _global_seed = _seed_value(seed)
        _cuda_seeds.clear()
        for gen in _defaults.values():
            gen.manual_seed(seed)
    return default_generator


_cuda_seeds: dict = {}   # CUDA device index -> seed its default generator starts from, set by fnx.cuda's seeding


def manual_seed_cuda(seed: int, indices) -> None:
    """Seed the default generators of the CUDA devices `indices`, now or when first used (fnx.cuda.manual_seed
    and manual_seed_all); the CPU's generator keeps its stream."""
    with _lock:
        for index in indices:
            _cuda_seeds[index] = _seed_value(seed)
            gen = _defaults.get(_device_cls("cuda", index))
            if gen is not None:
                gen.manual_seed(seed)


def cuda_start_seed(index: int) -> int | None:
    """The seed that CUDA device `index`'s default generator (re)starts from while it has drawn nothing; None
    once it has drawn (CuPy's generator state cannot be saved). torch.random.fork_rng saves this."""
    gen = _defaults.get(_device_cls("cuda", index))
    if gen is None:
        return _cuda_seeds.get(index, _global_seed)
    return gen.initial_seed() if gen._rng is None else None


def restart_cuda(index: int, start_seed: int) -> None:
    """Put CUDA device `index`'s default generator back at the start of the stream of `start_seed` (it is
    created afresh at its next draw)."""
    with _lock:
        _defaults.pop(_device_cls("cuda", index), None)
        _cuda_seeds[index] = start_seed


def seed() -> int:
    """Seed every default generator from the operating system's entropy; return that seed."""
    s = default_generator.seed()
    manual_seed(s)
    return s


def initial_seed() -> int:
    """The seed of the default CPU generator."""
    return default_generator.initial_seed()


def get_rng_state() -> Tensor:
    """The default CPU generator's state (a uint8 tensor)."""
    return default_generator.get_state()


def set_rng_state(new_state: Tensor) -> None:
    """Restore the default CPU generator's state from `get_rng_state()`."""
    default_generator.set_state(new_state)


# ---------------------------------------------------------------- sampling while fnx.compile stages a function
class KeySource:
    """Keys for the global-generator samplers while fnx.compile traces a function on staging trace `main`.

    Each device's key is a placeholder constant of the trace, which compile turns into a hidden input of
    the jaxpr and fills with a fresh key at every call (`compiled_call_key`); each sampling site takes its
    own subkey of it (fold_in of a counter), so that the sites draw independent samples.
    """

    __slots__ = ("main", "placeholders", "count")

    def __init__(self, main):
        self.main = main
        self.placeholders: dict = {}  # device -> placeholder key tensor
        self.count = 0

    def next(self, device) -> Tensor:
        base = self.placeholders.get(device)
        if base is None:
            # made concretely (not by fnx.random.key, which the staging trace stages): compile finds this very
            # tensor among the jaxpr's constants and turns it into the hidden key input
            base = self.placeholders[device] = make(device.xp.zeros(2, dtype=np.int64), device)
        self.count += 1
        return keyed.fold_in(base, self.count)


class _KeySources(threading.local):
    """The key sources of the compiles in progress in the calling thread, innermost last."""

    def __init__(self):
        self.stack: list[KeySource] = []


_key_sources = _KeySources()


@contextmanager
def staged_keys():
    """While fnx.compile traces a function: its global-generator samplers draw from the `KeySource` yielded."""
    source = KeySource(core.state.dynamic_trace)
    stack = _key_sources.stack
    stack.append(source)
    try:
        yield source
    finally:
        stack.pop()


def _key_source() -> KeySource | None:
    """The key source of the staging trace in progress, when fnx.compile traces directly on it."""
    stack = _key_sources.stack
    if stack and stack[-1].main is core.state.dynamic_trace:
        return stack[-1]
    return None


def _check_staged_draw(generator, op: str, staged: bool) -> None:
    """Raise unless `op` can draw from the compiled call's key here (see the module docstring)."""
    if _key_source() is None:
        raise FnxRuntimeError(
            f"{op}: sampling from a global generator inside make_jaxpr (or inside a cond/while_loop/scan body, a "
            f"custom_vjp or a checkpoint function staged by compile) would freeze one sample into the IR. Draw "
            f"from a key instead (fnx.random.uniform/normal/bernoulli(key, ...), with the key passed as an "
            f"argument), or sample outside and pass the result in. fnx.compile passes a key to the samplers of "
            f"the function it compiles: see its IR with fnx.compile(f).lower(*args).as_text().")
    if generator is not None:
        raise FnxRuntimeError(f"{op}: sampling with an explicit generator inside fnx.compile is not supported; "
                              f"drop the generator argument (each call of the compiled function then draws its "
                              f"key from the device's default generator), or draw from an fnx.random key")
    if not staged:
        fix = ("use an out-of-place sampler (x = fnx.rand_like(x), fnx.randn_like(x), ...)" if op.endswith("_") else
               "draw the samples outside the compiled function and pass them in")
        raise FnxRuntimeError(f"{op}: this sampler cannot draw from the compiled call's key inside fnx.compile; "
                              f"{fix}, or draw from an fnx.random key passed as an argument")


def compiled_call_key(device, op: str) -> Tensor:
    """The key for one call of a compiled function that samples on `device`: a fresh draw from the device's
    default generator (a subkey of the enclosing key when that call is itself being compiled); vmap's
    `randomness` applies as to any sampler (a batch of keys under "different")."""
    gen = _generator(None, device, op, staged=True)
    if gen is None:
        return _draw_staged(op, device, False, _keys_like)
    return _draw(op, device, False, lambda pre: _key_words(gen, pre))


def _key_words(gen: Generator, pre: tuple):
    """Keys (pre + (2,), int64) of two 32-bit words, each key one 64-bit draw of the generator."""
    if gen.device is cpu:
        if not pre:
            raw = gen.rng.bit_generator.random_raw()
            return np.array([raw >> 32, raw & 0xFFFFFFFF], dtype=np.int64)
        raw = gen.rng.bit_generator.random_raw(pre)
        return np.stack([raw >> np.uint64(32), raw & np.uint64(0xFFFFFFFF)], axis=-1).astype(np.int64)
    return gen.rng.integers(0, 2 ** 32, size=pre + (2,), dtype=np.int64)


def _keys_like(key: Tensor, pre: tuple) -> Tensor:
    """`key`, or a batch (pre + (2,)) of independent keys split from it."""
    return key if not pre else keyed.split(key, math.prod(pre)).reshape(pre + (2,))


# ---------------------------------------------------------------- drawing arrays
def _uniform(gen: Generator, shape: tuple, dt: _dt.dtype):
    """Uniform [0, 1) floats of `dt`, drawn directly in float32/float64 (lower precisions: exactly rounded down)."""
    if dt.name in ("float32", "float64"):
        return gen.rng.random(shape, dtype=dt.np)
    u = gen.rng.random(shape, dtype=np.float32)
    scale = float(2 ** _UNIT_BITS[dt.name])
    return (gen.device.xp.floor(u * scale) / scale).astype(dt.np)


def _standard_normal(gen: Generator, shape: tuple, dt: _dt.dtype):
    if dt.name in ("float32", "float64"):
        return gen.rng.standard_normal(shape, dtype=dt.np)
    return gen.rng.standard_normal(shape, dtype=np.float32).astype(dt.np)


def _size(size, op: str) -> tuple:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    try:
        shape = tuple(int(s) for s in size)
    except TypeError:
        raise FnxTypeError(f"{op}: size must be ints or a tuple of ints, got {size!r}") from None
    if any(s < 0 for s in shape):
        raise FnxRuntimeError(f"{op}: trying to create tensor with negative dimension: {list(shape)}")
    return shape


def _float_dtype(dtype, op: str) -> _dt.dtype:
    dt = _dt.get_default_dtype() if dtype is None else _dt.as_dtype(dtype)
    if not dt.is_floating_point:
        raise FnxTypeError(f"{op}: expected a floating point dtype, got {dt.name}")
    return dt


def _draw(op: str, dev, requires_grad: bool, sample) -> Tensor:
    """The tensor of `sample(prefix)`, an array of shape prefix + the sample's own shape, on `dev`.

    Inside vmap the enclosing `randomness` decides: "error" raises, "same" draws once for the whole batch,
    "different" draws one sample per batch element (a leading dim per such vmap, outermost first).
    """
    different = _sampling_vmaps(op, 0) if core.state.transforms_active else []
    out = make(sample(tuple(m.global_data[0] for m in different)), dev)
    if not different:
        return out.requires_grad_(True) if requires_grad else out
    return _batched(out, different)


def _draw_staged(op: str, dev, requires_grad: bool, staged) -> Tensor:
    """`_draw` while fnx.compile stages the function: the tensor `staged(key, prefix)` drawn from a subkey
    of the compiled call's key. Only the vmaps inside the compiled function count (its calls obey those
    outside it)."""
    if requires_grad:
        raise FnxRuntimeError(f"{op}: requires_grad=True makes a new leaf tensor, which a compiled function cannot "
                              f"return as a leaf; sample outside fnx.compile, or compute with the sample instead")
    source = _key_source()
    different = _sampling_vmaps(op, source.main.level)
    out = staged(source.next(dev), tuple(m.global_data[0] for m in different))
    return _batched(out, different) if different else out


def _sampling_vmaps(op: str, floor: int) -> list:
    """The vmaps above trace level `floor` that draw one sample per batch element; raises in "error" mode."""
    mains = [m for m in core.state.trace_stack if m.trace_type is BatchTrace and m.level > floor]
    for m in mains:
        if m.global_data[1] == "error":
            raise FnxRuntimeError(f"vmap: called random operation {op} while in randomness error mode; pass "
                                  f"randomness='same' or 'different' to vmap, or draw the samples outside vmap")
    return [m for m in mains if m.global_data[1] == "different"]


def _batched(out: Tensor, different: list) -> Tensor:
    """`out`, with a leading dim per vmap of `different` (outermost first), as a tracer of the innermost."""
    for m in different:
        out = BatchTracer(BatchTrace(m), out, 0)
    return out


def _dev(device):
    return get_default_device() if device is None else _device_cls(device)


# ---------------------------------------------------------------- creation
def rand(*sizes, size=None, generator: Generator | None = None, dtype=None, layout=None, device=None,
         requires_grad: bool = False) -> Tensor:
    """Uniform samples from [0, 1); a complex dtype draws the real and imaginary parts each from [0, 1), as
    PyTorch does."""
    check_layout("rand", layout)
    size = sizes_or_size(sizes, size, "rand")
    if dtype is not None and _dt.as_dtype(dtype).is_complex:
        parts = rand(_size(size, "rand") + (2,), generator=generator, dtype=_dt.as_dtype(dtype).to_real(),
                     device=device)
        return view_as_complex(parts).requires_grad_(requires_grad)
    dev, dt, shape = _dev(device), _float_dtype(dtype, "rand"), _size(size, "rand")
    gen = _generator(generator, dev, "rand", staged=True)
    if gen is None:
        return _draw_staged("rand", dev, requires_grad, lambda key, pre: keyed.uniform(key, pre + shape, dt))
    return _draw("rand", dev, requires_grad, lambda pre: _uniform(gen, pre + shape, dt))


def randn(*sizes, size=None, generator: Generator | None = None, dtype=None, layout=None, device=None,
          requires_grad: bool = False) -> Tensor:
    """Standard normal samples; a complex dtype draws the real and imaginary parts each from N(0, 1/2), as
    PyTorch does (so E|z|^2 = 1)."""
    check_layout("randn", layout)
    size = sizes_or_size(sizes, size, "randn")
    if dtype is not None and _dt.as_dtype(dtype).is_complex:
        parts = randn(_size(size, "randn") + (2,), generator=generator, dtype=_dt.as_dtype(dtype).to_real(),
                      device=device)
        return view_as_complex(parts * math.sqrt(0.5)).requires_grad_(requires_grad)
    dev, dt, shape = _dev(device), _float_dtype(dtype, "randn"), _size(size, "randn")
    gen = _generator(generator, dev, "randn", staged=True)
    if gen is None:
        return _draw_staged("randn", dev, requires_grad, lambda key, pre: _keyed_normal(key, pre + shape, dt))
    return _draw("randn", dev, requires_grad, lambda pre: _standard_normal(gen, pre + shape, dt))


def _keyed_normal(key: Tensor, shape: tuple, dt: _dt.dtype) -> Tensor:
    """fnx.random.normal in `dt`, computed in float32 for the half-precision dtypes."""
    if dt.name in ("float32", "float64"):
        return keyed.normal(key, shape, dt)
    return keyed.normal(key, shape, _dt.float32).to(dt)


def _check_int_range(low: int, high: int, dt: _dt.dtype, op: str) -> None:
    if high <= low:
        raise FnxRuntimeError(f"{op}: expected low < high, but got low={low} and high={high} (the range [low, high) "
                              f"is empty)")
    if dt.category == 1:  # integer dtypes must hold the whole range
        info = _dt.iinfo(dt)
        if low < info.min or high - 1 > info.max:
            raise FnxRuntimeError(f"{op}: the range [{low}, {high}) does not fit in {dt.name} "
                                  f"([{info.min}, {info.max}])")


def _randint_array(gen: Generator, low: int, high: int, shape: tuple, dt: _dt.dtype):
    return gen.rng.integers(low, high, size=shape, dtype=np.int64).astype(dt.np, copy=False)


def randint(*args, size=None, low=None, high=None, generator: Generator | None = None, dtype=None, layout=None,
            device=None, requires_grad: bool = False) -> Tensor:
    """Integers uniform in [low, high): `randint(high, size)` or `randint(low, high, size)` (default dtype int64)."""
    check_layout("randint", layout)
    args = list(args)
    if size is None:
        if not args:
            raise FnxTypeError("randint: missing the required argument 'size' (a tuple of ints)")
        size = args.pop()
    if high is None:
        if not args:
            raise FnxTypeError("randint: missing the required argument 'high'")
        high = args.pop()
    if low is None:
        low = args.pop() if args else 0
    if args:
        raise FnxTypeError("randint: takes randint(high, size) or randint(low, high, size); got extra arguments")
    if not isinstance(size, (tuple, list)):
        raise FnxTypeError(f"randint: size must be a tuple of ints, got {type(size).__name__}")
    dev, shape, low, high = _dev(device), _size((size,), "randint"), int(low), int(high)
    dt = _dt.int64 if dtype is None else _dt.as_dtype(dtype)
    gen = _generator(generator, dev, "randint", staged=True)
    _check_int_range(low, high, dt, "randint")
    if gen is None:
        return _draw_staged("randint", dev, requires_grad,
                            lambda key, pre: _keyed_randint(key, low, high, pre + shape, dt))
    return _draw("randint", dev, requires_grad, lambda pre: _randint_array(gen, low, high, pre + shape, dt))


def _keyed_randint(key: Tensor, low: int, high: int, shape: tuple, dt: _dt.dtype) -> Tensor:
    """Integers in [low, high): a 64-bit random number hi * 2**32 + lo modulo the span, computed without
    overflow for spans up to 2**31 (the remainder's bias is then below 2**-32)."""
    span = high - low
    if span > 2 ** 31:
        raise NotImplementedError(f"randint: inside fnx.compile the range [low, high) can span at most 2**31 "
                                  f"values (got {span}); draw the integers outside the compiled function")
    words = keyed.bits(key, shape + (2,))
    hi, lo = words[..., 0], words[..., 1]
    return (((hi % span) * (2 ** 32 % span) + lo) % span + low).to(dt)


def randperm(n: int, *, generator: Generator | None = None, dtype=None, layout=None, device=None,
             requires_grad: bool = False) -> Tensor:
    """A random permutation of 0 .. n-1 (default dtype int64)."""
    check_layout("randperm", layout)
    n = int(n)
    if n < 0:
        raise FnxRuntimeError(f"randperm: n must be non-negative, got {n}")
    dev = _dev(device)
    dt = _dt.int64 if dtype is None else _dt.as_dtype(dtype)
    gen = _generator(generator, dev, "randperm", staged=True)
    if gen is None:
        return _draw_staged("randperm", dev, requires_grad,
                            lambda key, pre: argsort(keyed.uniform(key, pre + (n,), _dt.float64), dim=-1).to(dt))

    def sample(pre: tuple):
        if dev is cpu and not pre:
            return gen.rng.permutation(n).astype(dt.np)
        return dev.xp.argsort(gen.rng.random(pre + (n,)), axis=-1).astype(dt.np)  # ranks of uniforms

    return _draw("randperm", dev, requires_grad, sample)


def _check_probabilities(op: str, xp, p) -> None:
    bad = ~xp.isfinite(p) | (p < 0)
    if bool(bad.any()):
        raise FnxRuntimeError(f"{op}: probability tensor contains either `inf`, `nan` or element < 0")


def _reject_tracer(op: str, *args, what: str = "probabilities") -> None:
    if any(isinstance(a, Tracer) for a in args):
        raise FnxTypeError(f"{op}: sampling from traced {what} (inside grad, vmap or compile) is not "
                           f"supported; draw the samples outside the transform, or use fnx.random's key-based "
                           f"samplers")


def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *,
                generator: Generator | None = None) -> Tensor:
    """Indices drawn from the categories weighted by each row of `input` (1-D or 2-D; int64 output).

    Without replacement, a row never repeats an index (sampling by exponential races: each category's
    Exp(1) / weight, smallest first, which is equivalent to drawing one after another).
    """
    if not isinstance(input, Tensor) or not input.dtype.is_floating_point:
        got = input.dtype.name if isinstance(input, Tensor) else type(input).__name__
        raise FnxTypeError(f"multinomial: only floating-point dtypes are supported for input, got {got}")
    _reject_tracer("multinomial", input)
    if input.ndim not in (1, 2):
        raise FnxRuntimeError(f"multinomial: prob_dist must be 1 or 2 dim, got {input.ndim} dims")
    n_cat, num_samples = input.shape[-1], int(num_samples)
    if num_samples <= 0:
        raise FnxRuntimeError(f"multinomial: cannot sample n_sample <= 0 samples (got {num_samples})")
    if not replacement and num_samples > n_cat:
        raise FnxRuntimeError(f"multinomial: cannot sample n_sample > prob_dist.size(-1) samples without "
                              f"replacement ({num_samples} > {n_cat})")
    dev = input.device
    xp, gen = dev.xp, _generator(generator, dev, "multinomial")
    w = input._value.reshape(-1, n_cat).astype(np.float64)
    _check_probabilities("multinomial", xp, w)
    if n_cat == 0 or bool((w.sum(axis=1) <= 0).any()):
        raise FnxRuntimeError("multinomial: invalid multinomial distribution (sum of probabilities <= 0)")
    if not replacement and bool(((w > 0).sum(axis=1) < num_samples).any()):
        raise FnxRuntimeError("multinomial: invalid multinomial distribution (with replacement=False, not enough "
                              "non-negative category to sample)")
    own = tuple(input.shape[:-1]) + (num_samples,)

    def sample(pre: tuple):
        rows = xp.broadcast_to(w, pre + w.shape).reshape(-1, n_cat)
        return _multinomial_rows(gen, rows, num_samples, replacement).reshape(pre + own)

    return _draw("multinomial", dev, False, sample)


def _multinomial_rows(gen: Generator, w, num_samples: int, replacement: bool):
    """int64 indices (rows, num_samples) drawn by the non-negative weights `w` (rows, categories)."""
    xp = gen.device.xp
    rows, n_cat = w.shape
    if replacement:
        # one sorted search over all rows: row r's normalised CDF is shifted by r, and so are its uniforms
        cdf = xp.cumsum(w, axis=1)
        cdf = cdf / cdf[:, -1:]
        shift = xp.arange(rows, dtype=np.float64).reshape(rows, 1)
        u = gen.rng.random((rows, num_samples), dtype=np.float64)
        pos = xp.searchsorted((cdf + shift).reshape(-1), (u + shift).reshape(-1), side="right")
        idx = xp.clip(pos.reshape(rows, num_samples) - shift.astype(np.int64) * n_cat, 0, n_cat - 1)
    else:
        e = gen.rng.standard_exponential((rows, n_cat), dtype=np.float64)
        keys = xp.where(w > 0, e / xp.where(w > 0, w, 1.0), np.inf)
        idx = xp.argsort(keys, axis=1)[:, :num_samples]
    return idx.astype(np.int64)


def bernoulli(input: Tensor, p=None, *, generator: Generator | None = None) -> Tensor:
    """1 with probability `input` (or `p` for every element, if given), else 0; the dtype of `input`."""
    if p is None and not input.dtype.is_floating_point:
        raise FnxTypeError(f"bernoulli: expected a floating point tensor of probabilities, got {input.dtype}")
    probs = input if p is None else p
    dev, shape = input.device, tuple(input.shape)
    gen = _generator(generator, dev, "bernoulli", staged=True)
    raw = None if isinstance(probs, Tracer) else probs._value if isinstance(probs, Tensor) else float(probs)
    if raw is not None:
        _check_unit_interval("bernoulli", dev.xp, raw)
    if raw is None or gen is None:  # compose: vmap batches traced probabilities, compile draws from its key
        u_dtype = probs.dtype if isinstance(probs, Tensor) else \
            input.dtype if input.dtype.is_floating_point else _dt.float32
        return (rand(shape, dtype=u_dtype, device=dev, generator=gen) < probs).to(input.dtype)
    return _draw("bernoulli", dev, False, lambda pre: _bernoulli_array(gen, pre + shape, raw, input.dtype))


def _check_unit_interval(op: str, xp, probs) -> None:
    if isinstance(probs, float):
        if not 0.0 <= probs <= 1.0:
            raise FnxRuntimeError(f"{op}: expects p to be in [0, 1], but got p={probs}")
    elif bool(((probs < 0) | (probs > 1) | xp.isnan(probs)).any()):
        raise FnxRuntimeError(f"{op}: expects all probabilities to be in [0, 1]")


def _bernoulli_array(gen: Generator, shape: tuple, probs, dt: _dt.dtype):
    wide = isinstance(probs, float) or probs.dtype == np.float64
    u = gen.rng.random(shape, dtype=np.float64 if wide else np.float32)
    return (u < probs).astype(dt.np)


def normal(mean, std=1.0, size=None, *, generator: Generator | None = None, dtype=None, layout=None, device=None,
           requires_grad: bool = False) -> Tensor:
    """Normal samples: tensor `mean`/`std` broadcast elementwise, or Python numbers with a `size`.

    Like PyTorch's, the samples carry no gradient to `mean` and `std` in eager mode; with traced `mean` or
    `std` (inside grad or vmap) they are composed as mean + std * randn, which is differentiable.
    """
    check_layout("normal", layout)
    tensors = [t for t in (mean, std) if isinstance(t, Tensor)]
    if not tensors:
        if size is None:
            raise FnxTypeError("normal: size must be given when mean and std are both numbers")
        dev, dt = _dev(device), _float_dtype(dtype, "normal")
        shape = _size((size,), "normal")
    else:
        if size is not None:
            raise FnxTypeError("normal: size cannot be combined with tensor mean or std (their shape is used)")
        dev = tensors[0].device
        dt = _dt.result_type(*tensors)
        dt = dt if dt.is_floating_point else _dt.get_default_dtype()
        shape = tuple(np.broadcast_shapes(*(tuple(t.shape) for t in tensors)))
    gen = _generator(generator, dev, "normal", staged=True)
    if not isinstance(std, Tensor) and std < 0:
        raise FnxRuntimeError(f"normal: expects std >= 0.0, but found std {std}")
    if gen is None or any(isinstance(t, Tracer) for t in tensors):  # compile draws randn from its key
        return mean + std * randn(shape, dtype=dt, device=dev, generator=gen)
    xp = dev.xp
    m = mean._value.astype(dt.np) if isinstance(mean, Tensor) else float(mean)
    s = std._value.astype(dt.np) if isinstance(std, Tensor) else float(std)
    if bool(xp.any(xp.asarray(s) < 0)):
        raise FnxRuntimeError(f"normal: expects std >= 0.0, but found std {xp.asarray(s).min().item()}")

    def sample(pre: tuple):
        return (_standard_normal(gen, pre + shape, dt) * s + m).astype(dt.np, copy=False)

    return _draw("normal", dev, requires_grad, sample)


def _check_float(op: str, name: str, t) -> None:
    if not isinstance(t, Tensor) or not t.dtype.is_floating_point:
        got = t.dtype.name if isinstance(t, Tensor) else type(t).__name__
        raise FnxTypeError(f"{op}: only floating-point tensors are supported for {name}, got {got}")


def poisson(input: Tensor, generator: Generator | None = None) -> Tensor:
    """Poisson counts, one per element of the non-negative rates `input`, in its dtype and device.

    Eager only (as multinomial): the samples carry no gradient, and inside fnx.compile, grad or vmap of the
    rates they must be drawn outside and passed in.
    """
    _check_float("poisson", "input", input)
    _reject_tracer("poisson", input, what="rates")
    dev, dt = input.device, input.dtype
    xp, gen = dev.xp, _generator(generator, dev, "poisson")
    rates = input._value.astype(np.float64)
    if not bool((rates >= 0).all()):
        raise FnxRuntimeError("poisson: invalid Poisson rate, expected rate to be non-negative (got a negative or "
                              "NaN rate)")
    if not bool(xp.isfinite(rates).all()):
        raise FnxRuntimeError("poisson: invalid Poisson rate, expected a finite rate (got inf)")
    shape = tuple(input.shape)
    return _draw("poisson", dev, False,
                 lambda pre: xp.asarray(gen.rng.poisson(xp.broadcast_to(rates, pre + shape))).astype(dt.np))


def binomial(count: Tensor, prob: Tensor, generator: Generator | None = None) -> Tensor:
    """The number of successes in `count` Bernoulli(`prob`) trials, elementwise (count and prob broadcast; both
    floating point of one dtype, which the counts have). Counts are whole numbers >= 0 (a fraction is dropped).

    Eager only, like poisson. Unlike PyTorch, which returns meaningless numbers there, a negative or NaN count
    or a probability outside [0, 1] raises.
    """
    _check_float("binomial", "count", count)
    _check_float("binomial", "prob", prob)
    if count.dtype is not prob.dtype:
        raise FnxRuntimeError(f"binomial: count and prob must have the same dtype, got {count.dtype.name} and "
                              f"{prob.dtype.name}; convert one with .to(dtype)")
    _reject_tracer("binomial", count, prob, what="parameters")
    same_device("binomial", (count, prob))
    dev, dt = count.device, count.dtype
    xp, gen = dev.xp, _generator(generator, dev, "binomial")
    n, p = count._value.astype(np.float64), prob._value.astype(np.float64)
    if not bool((n >= 0).all()):
        raise FnxRuntimeError("binomial: expected count to be non-negative (got a negative or NaN count)")
    _check_unit_interval("binomial", xp, p)
    try:
        shape = tuple(np.broadcast_shapes(tuple(count.shape), tuple(prob.shape)))
    except ValueError:
        raise FnxRuntimeError(f"binomial: the shapes of count {list(count.shape)} and prob {list(prob.shape)} do "
                              f"not broadcast") from None
    n = n.astype(np.int64)

    def sample(pre: tuple):
        drawn = gen.rng.binomial(xp.broadcast_to(n, pre + shape), xp.broadcast_to(p, pre + shape))
        return xp.asarray(drawn).astype(dt.np)

    return _draw("binomial", dev, False, sample)


def _like_args(input: Tensor, dtype, device):
    return (input.dtype if dtype is None else dtype), (input.device if device is None else device)


def _in_layout(input: Tensor, draw, requires_grad: bool) -> Tensor:
    """draw(shape) with `input`'s shape, laid out as `input` is where it fills a block of memory in another order
    (PyTorch's preserve_format: a channels_last input gives a channels_last draw): drawn in that order, viewed
    back (that view the leaf that requires grad, if asked)."""
    order = memory_order(input)
    if order is None:
        out = draw(tuple(input.shape))
    else:
        out = draw(tuple(input.shape[d] for d in order)).permute(*(int(d) for d in np.argsort(order)))
    return out.requires_grad_() if requires_grad else out


def rand_like(input: Tensor, *, dtype=None, layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """Uniform samples on [0, 1) with the shape and layout (and, unless given, dtype and device) of `input`."""
    check_layout("rand_like", layout)
    dt, dev = _like_args(input, dtype, device)
    return _in_layout(input, lambda shape: rand(shape, dtype=dt, device=dev), requires_grad)


def randn_like(input: Tensor, *, dtype=None, layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """Standard normal samples with the shape and layout (and, unless given, dtype and device) of `input`."""
    check_layout("randn_like", layout)
    dt, dev = _like_args(input, dtype, device)
    return _in_layout(input, lambda shape: randn(shape, dtype=dt, device=dev), requires_grad)


def randint_like(input: Tensor, low: int = 0, high: int | None = None, *, dtype=None, layout=None, device=None,
                 requires_grad: bool = False) -> Tensor:
    """`randint_like(input, high)` or `randint_like(input, low, high)`: integers in [low, high), input's shape."""
    check_layout("randint_like", layout)
    if high is None:
        low, high = 0, low
    dt, dev = _like_args(input, dtype, device)
    return randint(low, high, tuple(input.shape), dtype=dt, device=dev, requires_grad=requires_grad)


# ---------------------------------------------------------------- in-place sampling methods
def _target(self: Tensor, op: str, floating: bool = True) -> None:
    if not isinstance(self, Tracer):
        _check_target(self, op)
    base = self._base
    if core.state.grad_enabled and base is not None and base._requires_grad and base._node is None:
        raise FnxRuntimeError(f"{op}: a view of a leaf Variable that requires grad is being used in an in-place "
                              f"operation; wrap it in `with fnx.no_grad():`")
    if floating and not self.dtype.is_floating_point:
        raise FnxTypeError(f"{op}: expected a floating point tensor, got {self.dtype}")


def _write(self: Tensor, value) -> Tensor:
    """Overwrite `self` with freshly sampled values: a new version, and no longer part of any graph."""
    self._value[...] = value
    self._version[0] += 1
    if core.state.grad_enabled and self._node is not None:
        self._node, self._requires_grad = None, False
    return self


def uniform_(self: Tensor, from_: float = 0.0, to: float = 1.0, *, generator: Generator | None = None,
             **kwargs) -> Tensor:
    """Fill with uniform samples from [from, to) (PyTorch spells the first argument `from`)."""
    from_ = kwargs.pop("from", from_)
    if kwargs:
        raise FnxTypeError(f"uniform_: unexpected keyword arguments {sorted(kwargs)}")
    _target(self, "uniform_")
    if from_ > to:
        raise FnxRuntimeError(f"uniform_: expects to return a [from, to) range, but found from={from_} > to={to}")
    if isinstance(self, Tracer):
        u = rand(tuple(self.shape), dtype=self.dtype, device=self.device, generator=generator)
        return rebind_(self, u * (to - from_) + from_, "uniform_")
    u = _uniform(_generator(generator, self.device, "uniform_"), tuple(self.shape), self.dtype)
    return _write(self, u * (to - from_) + from_ if (from_, to) != (0.0, 1.0) else u)


def normal_(self: Tensor, mean: float = 0.0, std: float = 1.0, *, generator: Generator | None = None) -> Tensor:
    """Fill with normal samples of `mean` and `std`."""
    _target(self, "normal_")
    if std < 0:
        raise FnxRuntimeError(f"normal_: expects std >= 0.0, but found std {std}")
    if isinstance(self, Tracer):
        z = randn(tuple(self.shape), dtype=self.dtype, device=self.device, generator=generator)
        return rebind_(self, z * std + mean, "normal_")
    z = _standard_normal(_generator(generator, self.device, "normal_"), tuple(self.shape), self.dtype)
    return _write(self, z * std + mean if (mean, std) != (0.0, 1.0) else z)


def bernoulli_(self: Tensor, p=0.5, *, generator: Generator | None = None) -> Tensor:
    """Fill with 1 with probability `p` (a number, or a tensor broadcast to this shape), else 0."""
    _target(self, "bernoulli_", floating=False)
    if isinstance(self, Tracer) or isinstance(p, Tracer):
        return assign_(self, bernoulli(self, p, generator=generator), "bernoulli_")
    if isinstance(p, Tensor):
        probs = self.device.xp.broadcast_to(p._value, tuple(self.shape))
    else:
        probs = float(p)
    _check_unit_interval("bernoulli_", self.device.xp, probs)
    gen = _generator(generator, self.device, "bernoulli_")
    return _write(self, _bernoulli_array(gen, tuple(self.shape), probs, self.dtype))


def random_(self: Tensor, from_: int | None = None, to: int | None = None, *, generator: Generator | None = None,
            **kwargs) -> Tensor:
    """Fill with integers: `random_(to)` in [0, to), `random_(from, to)` in [from, to), `random_()` in
    [0, 2**mantissa] for floats and [0, max] for integers (PyTorch's ranges)."""
    from_ = kwargs.pop("from", from_)
    if kwargs:
        raise FnxTypeError(f"random_: unexpected keyword arguments {sorted(kwargs)}")
    _target(self, "random_", floating=False)
    dt = self.dtype
    if from_ is not None and to is None:
        from_, to = 0, from_
    if to is None:
        digits = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}.get(dt.name)
        to = 2 if dt is _dt.bool else 2 ** digits + 1 if digits else _dt.iinfo(dt).max + 1
    low = 0 if from_ is None else int(from_)
    draw_dt = _dt.int64 if dt.is_floating_point or dt is _dt.bool else dt
    _check_int_range(low, int(to), draw_dt, "random_")
    if isinstance(self, Tracer):
        drawn = randint(low, int(to), tuple(self.shape), dtype=draw_dt, device=self.device, generator=generator)
        return rebind_(self, drawn.to(dt), "random_")
    gen = _generator(generator, self.device, "random_")
    value = _randint_array(gen, low, int(to), tuple(self.shape), draw_dt)
    return _write(self, value.astype(dt.np))


def exponential_(self: Tensor, lambd: float = 1.0, *, generator: Generator | None = None) -> Tensor:
    """Fill with exponential samples of rate `lambd`."""
    _target(self, "exponential_")
    if not lambd > 0:
        raise FnxRuntimeError(f"exponential_: expects lambda > 0.0, but found lambda={lambd}")
    if isinstance(self, Tracer):
        u = rand(tuple(self.shape), dtype=self.dtype, device=self.device, generator=generator)
        return rebind_(self, -(1 - u).log() / lambd, "exponential_")
    gen = _generator(generator, self.device, "exponential_")
    wide = self.dtype.name == "float64"
    e = gen.rng.standard_exponential(tuple(self.shape), dtype=np.float64 if wide else np.float32)
    return _write(self, (e / lambd if lambd != 1.0 else e).astype(self.dtype.np, copy=False))


def log_normal_(self: Tensor, mean: float = 1.0, std: float = 2.0, *, generator: Generator | None = None) -> Tensor:
    """Fill with exp(N(mean, std**2)) samples."""
    _target(self, "log_normal_")
    if not std > 0:
        raise FnxRuntimeError(f"log_normal_: expects std > 0.0, but found std={std}")
    if isinstance(self, Tracer):
        z = randn(tuple(self.shape), dtype=self.dtype, device=self.device, generator=generator)
        return rebind_(self, (z * std + mean).exp(), "log_normal_")
    z = _standard_normal(_generator(generator, self.device, "log_normal_"), tuple(self.shape), self.dtype)
    return _write(self, self.device.xp.exp(z * std + mean))


def cauchy_(self: Tensor, median: float = 0.0, sigma: float = 1.0, *, generator: Generator | None = None) -> Tensor:
    """Fill with Cauchy samples of location `median` and scale `sigma`: median + sigma tan(pi (u - 1/2))."""
    _target(self, "cauchy_")
    if not sigma > 0:
        raise FnxRuntimeError(f"cauchy_: expects sigma > 0.0, but found sigma={sigma}")
    if isinstance(self, Tracer):
        u = rand(tuple(self.shape), dtype=self.dtype, device=self.device, generator=generator)
        return rebind_(self, ((u - 0.5) * math.pi).tan() * sigma + median, "cauchy_")
    u = _uniform(_generator(generator, self.device, "cauchy_"), tuple(self.shape), self.dtype)
    return _write(self, self.device.xp.tan((u - 0.5) * math.pi) * sigma + median)


def geometric_(self: Tensor, p: float, *, generator: Generator | None = None) -> Tensor:
    """Fill with the number of Bernoulli(p) trials up to the first success (1, 2, ...); any real dtype."""
    _target(self, "geometric_", floating=False)
    if not 0 < p < 1:
        raise FnxRuntimeError(f"geometric_: expects p to be in (0, 1), but got p={p}")
    if isinstance(self, Tracer):
        u = rand(tuple(self.shape), dtype=_dt.float64, device=self.device, generator=generator)
        k = ((1 - u).log() / math.log1p(-p)).ceil().clamp(min=1)
        return rebind_(self, k.to(self.dtype), "geometric_")
    xp = self.device.xp
    u = _uniform(_generator(generator, self.device, "geometric_"), tuple(self.shape), _dt.float64)
    k = xp.maximum(xp.ceil(xp.log1p(-u) / math.log1p(-p)), 1.0)   # 1 - u in (0, 1]: k >= 1
    return _write(self, k.astype(self.dtype.np))


METHODS: dict = {
    "uniform_": uniform_, "normal_": normal_, "bernoulli_": bernoulli_, "random_": random_,
    "exponential_": exponential_, "log_normal_": log_normal_, "cauchy_": cauchy_, "geometric_": geometric_, "bernoulli": bernoulli, "multinomial": multinomial,
}
INPLACE: dict = {}
