# Two entry points for a fresh machine: `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-isa bench bench-w9 bench-programs apiref test-cuda bench-cuda clean

$(PY):
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e ".[test]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m fnx.demo

# One BLAS thread per test worker: two workers on two cores, no oversubscription.
test: $(STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) -m pytest -n 2 tests

# The suite again as on narrower x86-64 CPUs than this one: AVX2 without AVX-512, then x86-64-v2 without AVX. fnx's
# C kernels are built through compiler wrappers (tools/cc-*; each run builds every kernel anew, a cache of its own
# per wrapper), numpy's loops and OpenBLAS's kernels are those it picks on such a CPU (numpy >= 2.3 feature names).
ISA_RUN = OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) -m pytest -n 2 tests
test-isa: $(STAMP)
	CC=$(CURDIR)/tools/cc-avx2 NPY_DISABLE_CPU_FEATURES="X86_V4 AVX512_ICL AVX512_SPR" OPENBLAS_CORETYPE=Haswell \
	  $(ISA_RUN)
	CC=$(CURDIR)/tools/cc-x86-64-v2 NPY_DISABLE_CPU_FEATURES="X86_V3 X86_V4 AVX512_ICL AVX512_SPR" \
	  OPENBLAS_CORETYPE=Nehalem $(ISA_RUN)

bench: $(STAMP)
	$(PY) -m benchmarks

# W9 (whole-model training steps, each framework in a process of its own), W9m (their peak memory) and W9c (the
# first step, eager and compiled). TORCH_PYTHON: an interpreter with torch, e.g. a venv apart from fnx's (it needs fnx's
# dependencies too, for the "torch loaded" rows: numpy, jinja2, ml_dtypes, threadpoolctl); W9_ARGS: e.g. --size large, -k llama, --quick. On a
# shared machine, OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 keep busy-waiting thread pools apart.
bench-w9: $(STAMP)
	$(PY) -m benchmarks W9 W9m W9c $(if $(TORCH_PYTHON),--python torch=$(TORCH_PYTHON)) $(W9_ARGS)

# W12: whole programs in the form of their public code (benchmarks/programs), fnx against torch; TORCH_PYTHON as
# for bench-w9, W12_ARGS e.g. -k unet, --quick.
bench-programs: $(STAMP)
	$(PY) -m benchmarks W12 $(if $(TORCH_PYTHON),--python torch=$(TORCH_PYTHON)) $(W12_ARGS)

# Rewrite docs/api.md from the docstrings (tests/test_apiref.py fails until it is current).
apiref: $(STAMP)
	$(PY) tools/apiref.py

# On a GPU machine, from the tree with no install step.
test-cuda:
	PYTHONPATH=. python3 -m pytest -m cuda tests

# The cuda tests and the GPU benchmarks (W1 W8 W2 W3 W4 --device cuda) within one time budget, each step's log
# and summary.md under $OUT (default build/cuda-report): see benchmarks/cuda_report.py.
bench-cuda:
	PYTHONPATH=. python3 -m benchmarks.cuda_report --out "$${OUT:-build/cuda-report}"

clean:
	rm -rf $(VENV) build *.egg-info
