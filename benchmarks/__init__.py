"""fnx's benchmark suite: `python -m benchmarks` (or `make bench`) prints one table of timings.

Workloads (see `python -m benchmarks --list`):
  W1   small-op dispatch: `a + b` and a chain of 10 ops on 4 floats (us/op; fnx vs torch)
  W1g  the same recording the autograd tape, with one backward per chain (us/op; fnx vs torch)
  W8   large ops: add, exp, sum on 2^24 floats, a 1024^3 matmul (ms; fnx vs numpy)
  W11  ops beyond arithmetic as torch code calls them on 2^20 floats: clamp, where, softplus, gelu, erfinv,
       lgamma, digamma, fmod, asinh, topk (ms; fnx vs torch)
  W10  fnx.export's standalone C: the exported GEMM vs numpy's BLAS at 256, 512, 1024, 1 and 2 threads (ms);
       W10g (by name) tokens/s of the exported char transformer's C generation loop vs fnx compiled and torch
  W9   training steps of whole models written as public PyTorch code (GPT, Llama, LSTM LM, mnist CNN):
       eager, compile(model), fnx's compiled functional step, fnx beside torch (ms/step; fnx vs torch);
       W9m their peak memory, W9c the GPT's first step (eager and compiled). Slow: they run only when named,
       `python -m benchmarks W9 W9m W9c [--size large] [--python torch=PATH]` or `make bench-w9`.

Layout: `registry.py` (the `@workload` decorator and `Bench`), `frameworks.py`
(optional imports of numpy/torch/jax, inputs, environment header),
`runner.py` (timing, table, JSON, profiles, command line), `worker.py` (the
process each row runs in), and one module per workload group (`eager.py`). W9 keeps its models (`models.py`), their
training steps (`tasks.py`) and its worker processes (`worker.py`) apart from
its registration (`training.py`). A new group is a module of decorated builder
functions added to `registry.MODULES`. Nothing here imports numpy at package
import time, so `__main__` can adjust the BLAS environment first.

Besides timings: `python -m benchmarks.numerics_report` prints this machine's
float32 error figures (compiled and eager against float64), whose CPU-independent
bounds the numerics tests assert.
"""
