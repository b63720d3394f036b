"""Training steps of whole models, written as public PyTorch code: W9, W9m, W9c (benchmarks/models.py), W12
(benchmarks/programs).

W9   time per training step (forward, loss, backward, optimizer step) of a nanoGPT GPT (with nn.GELU(),
     and two smaller cases with the tanh GELU and minGPT's `x ** 3` NewGELU), a Hugging Face style Llama, a
     2-layer LSTM language model and pytorch/examples' mnist CNN (configurations: tasks.SIZES; `--size
     large` for 4 layers x 256 wide on 16 x 256 tokens). The rows are ways of running it:
       fnx / torch                 eager
       fnx compile / torch compile fnx.compile(model) / torch.compile(model); backward and optimizer eager
       fnx functional              the whole step as one fnx.compile'd function: value_and_grad over the
                                   parameters, fnx.optim.functional updates per parameter group, donated
       ... [torch loaded]          the fnx row in a process that has imported torch and run a matmul and
                                   an op first (speed must not collapse beside torch's OpenMP and BLAS)
       ... [busy neighbour]        the row while one other process spins on the machine (the fnx/torch
                                   ratio must stay near its quiet value: thread pools that wait for a
                                   descheduled thread collapse)
     Every row runs in a worker process of its own (benchmarks/worker.py) that builds the model, warms up
     (compiling) and then times whole steps itself; the runner interleaves the rows' repetitions.
W9m  peak RSS of training steps above the worker's RSS before them, in a fresh process per sample:
     over the first steps (what training adds to a built model: gradients, optimizer state, compilation,
     activations), and over steady-state steps (what one step allocates on top of what it keeps). See
     worker.py for the exact definitions.
W9c  the first step of the GPT, compilation included, with empty kernel caches (FNX_CACHE_DIR,
     TORCHINDUCTOR_CACHE_DIR), in a fresh process per sample; torch's compiled figure includes importing
     dynamo and inductor, which happens on the first compile. The eager rows show what a script's first
     step waits for (fnx's eager C loops build on first use; torch ships its kernels built). Its "warm
     caches" rows: the same in a process whose caches an earlier one filled (every later run of a script).
W12  time per training step of whole programs in the form of their public code (pytorch-cifar's ResNet-18
     and MobileNetV2, EfficientNet-B0, DCGAN, ConvNeXt, U-Net, TCN, a text CNN, a TransformerEncoder
     classifier, a packed LSTM, an EmbeddingBag classifier: programs.PROGRAMS), fnx (through the torch
     alias) against torch, eager, each in a worker process of its own as W9's rows.

torch can live in another environment than fnx: `python -m benchmarks W9 --python
torch=/path/to/venv/bin/python` runs the torch rows (and the "torch loaded" ones) under that interpreter,
with this checkout on its PYTHONPATH (so it needs fnx's dependencies as well: numpy, jinja2, ml_dtypes, threadpoolctl).
"""
from __future__ import annotations

import functools
import shutil
import tempfile

from .registry import SIZES, Bench, Skip, note, workload
from .programs import PROGRAMS
from .tasks import SIZES as CONFIGS
from .tasks import describe_model
from .worker import MEMORY_STEPS, Worker, environment_note

__all__ = ["VARIANTS"]

# Row label -> (framework, variant, torch loaded in the process, a busy process beside it).
VARIANTS = {
    "fnx": ("fnx", "eager", False, False),
    "fnx compile": ("fnx", "compile", False, False),
    "fnx functional": ("fnx", "functional", False, False),
    "fnx [torch loaded]": ("fnx", "eager", True, False),
    "fnx compile [torch loaded]": ("fnx", "compile", True, False),
    "fnx functional [torch loaded]": ("fnx", "functional", True, False),
    "torch": ("torch", "eager", False, False),
    "torch compile": ("torch", "compile", False, False),
    "fnx [busy neighbour]": ("fnx", "eager", False, True),
    "fnx compile [busy neighbour]": ("fnx", "compile", False, True),
    "fnx functional [busy neighbour]": ("fnx", "functional", False, True),
    "torch [busy neighbour]": ("torch", "eager", False, True),
    "torch compile [busy neighbour]": ("torch", "compile", False, True),
}
_ACTIVATION_ROWS = ("fnx", "fnx compile", "torch", "torch compile")
_MEMORY_ROWS = ("fnx", "fnx compile", "fnx functional", "torch", "torch compile")
_FIRST_CALL_ROWS = ("fnx", "fnx compile", "fnx functional", "torch", "torch compile")
_MAIN_MODELS = ("gpt", "llama", "lstm", "cnn")


def _spec(model: str, size: str, label: str, mode: str) -> dict:
    framework, variant, torch_loaded, neighbour = VARIANTS[label]
    return {"framework": framework, "variant": variant, "torch_loaded": torch_loaded, "neighbour": neighbour,
            "model": model,
            "size": size, "mode": mode}


def _check(device: str, label: str) -> None:
    if device != "cpu":
        raise Skip("W9 trains on the CPU")
    if VARIANTS[label][0] == "fnx":
        _note_fnx_gaps()


@functools.lru_cache(maxsize=None)
def _note_fnx_gaps() -> None:
    """Under the table: the PyTorch constructs of the public code that fnx lacks (models.PROBES)."""
    import fnx

    from .models import unsupported

    for construct, where, error in unsupported(fnx):
        note(f"W9: fnx cannot run {construct} ({where}): {error}")


# ---------------------------------------------------------------- W9: time per step
def _time_case(model: str, size: str, label: str, device: str) -> Bench:
    _check(device, label)
    worker = Worker(_spec(model, size, label, "serve"))
    note(environment_note(f"W9 [{label}]", worker.hello["env"]))
    return worker.bench()


# ---------------------------------------------------------------- W9m, W9c: a fresh process per sample
@functools.lru_cache(maxsize=None)
def _memory_sample(model: str, size: str, label: str, k: int) -> dict:
    """Sample `k` of a (model, size, row): both memory figures come from the same worker."""
    return Worker.once(_spec(model, size, label, "memory"))


def _first_call_sample(model: str, size: str, label: str, warm: bool) -> float:
    """The first step of a fresh process with empty caches, or (`warm`) with the caches an earlier process of the
    same row filled: what every later run of a script waits for."""
    cache = tempfile.mkdtemp(prefix="fnx-bench-w9c-")
    try:
        env = {"FNX_CACHE_DIR": f"{cache}/fnx", "TORCHINDUCTOR_CACHE_DIR": f"{cache}/inductor"}
        if warm:
            Worker.once(_spec(model, size, label, "first-call"), env)
        return Worker.once(_spec(model, size, label, "first-call"), env)["seconds"]
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def _fresh_process_bench(sample) -> Bench:
    """A Bench whose repetition k is `sample(k)`, each from a new worker process. The builder takes sample 0
    (so a framework that cannot run the case is a Skip there, not an error mid-table) and the first
    repetition returns it: these workloads register no warm-up."""
    pending, taken = [sample(0)], [1]

    def run():
        if pending:
            return pending.pop()
        taken[0] += 1
        return sample(taken[0] - 1)

    return Bench(run, measure=float)


def _memory_case(model: str, size: str, which: str, label: str, device: str) -> Bench:
    _check(device, label)
    return _fresh_process_bench(lambda k: _memory_sample(model, size, label, k)[which])


def _first_call_case(model: str, warm: bool, size: str, label: str, device: str) -> Bench:
    _check(device, label)
    return _fresh_process_bench(lambda k: _first_call_sample(model, size, label, warm))


# ---------------------------------------------------------------- registration
for _size in SIZES:
    for _model in CONFIGS[_size]:
        workload("W9", f"{describe_model(_model, _size)}, train step", reference="torch",
                 frameworks=tuple(VARIANTS) if _model in _MAIN_MODELS else _ACTIVATION_ROWS, unit="ms/op",
                 repeats=5, size=_size, explicit=True, own_processes=True)(
                     functools.partial(_time_case, _model, _size))
    for _model in _MAIN_MODELS:
        for _which, _what in (("first", f"peak RSS of steps 1-{MEMORY_STEPS} above RSS before"),
                              ("steady", f"peak RSS of steps 2-{MEMORY_STEPS} above RSS after step 1")):
            workload("W9m", f"{describe_model(_model, _size)}: {_what}", reference="torch",
                     frameworks=_MEMORY_ROWS, unit="MiB", repeats=3, warmup=0, size=_size, explicit=True,
                     own_processes=True)(functools.partial(_memory_case, _model, _size, _which))
    for _warm, _caches in ((False, "empty"), (True, "warm")):
        workload("W9c", f"{describe_model('gpt', _size)}: first step, {_caches} caches", reference="torch compile",
                 frameworks=_FIRST_CALL_ROWS, unit="s", repeats=3, warmup=0, size=_size, explicit=True,
                 own_processes=True)(functools.partial(_first_call_case, "gpt", _warm, _size))
for _model in PROGRAMS:
    workload("W12", f"{describe_model(_model, 'small')}, train step", reference="torch", frameworks=("fnx", "torch"),
             unit="ms/op", repeats=5, size="small", explicit=True, own_processes=True)(
        functools.partial(_time_case, _model, "small"))
