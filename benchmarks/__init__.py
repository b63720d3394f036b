"""fnx's benchmark suite: `python -m benchmarks` (or `make bench`) prints one table of timings.

Workloads (see `python -m benchmarks --list`):
  W1   small-op dispatch: `a + b` and a chain of 10 ops on 4 floats (us/op; fnx vs torch)
  W1g  the same recording the autograd tape, with one backward per chain (us/op; fnx vs torch)
  W8   large ops: add, exp, sum on 2^24 floats, a 1024^3 matmul (ms; fnx vs numpy)

Layout: `registry.py` (the `@workload` decorator and `Bench`), `frameworks.py`
(optional imports of numpy/torch/jax, inputs, environment header),
`runner.py` (timing, table, JSON, profiles, command line), and one module per
workload group (`eager.py`). A new group is a module of decorated builder
functions added to `registry.MODULES`. Nothing here imports numpy at package
import time, so `__main__` can adjust the BLAS environment first.

Besides timings: `python -m benchmarks.numerics_report` prints this machine's
float32 error figures (compiled and eager against float64), whose CPU-independent
bounds the numerics tests assert.
"""
