"""`python -m benchmarks.numerics_report [--examples N]`: this machine's float32 error figures, as markdown tables.

The numerics tests assert bounds that hold on any CPU (tests/test_codegen.py: `ULP_BOUNDS`, tests/test_compile.py:
`OP_CLASSES` and `OP_BOUNDS`, tests/test_compile_numerics.py: `COMPOSITE_BOUNDS`); the exact figures move from
CPU to CPU (vector width and libmvec in compiled kernels, numpy's SIMD level and BLAS kernels in eager mode),
so they are printed here, next to those bounds, with the CPU named: docs/numerics.md shows one run as an
example. The measuring code is the tests' own (tests/numerics_measure.py), on the tests' inputs: every
float32 primitive on 4096 values, and `--examples` hypothesis draws (derandomized) per op-table op and per
composite function.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import warnings
from pathlib import Path

_TESTS = Path(__file__).resolve().parent.parent / "tests"

__all__ = ["main"]


def _cpu() -> str:
    """The CPU model and its vector extensions (what `-march=native` and numpy's dispatch see)."""
    model, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model in ("", platform.machine(), platform.processor()):
                model = value.strip()
            elif key.strip() in ("flags", "Features") and not flags:
                flags = set(value.split())
    except OSError:
        pass
    shown = [f for f in ("avx512f", "avx2", "fma", "sse4_2", "asimd", "sve") if f in flags]
    return f"{model} ({platform.machine()}{': ' + ' '.join(shown) if shown else ''})"


def _environment() -> list[str]:
    import numpy as np

    from fnx.lowering import cpu

    try:
        from numpy._core._multiarray_umath import __cpu_baseline__, __cpu_dispatch__, __cpu_features__
        simd = " ".join(__cpu_baseline__ + [f for f in __cpu_dispatch__ if __cpu_features__.get(f)])
    except ImportError:
        simd = "?"
    blas = np.__config__.CONFIG.get("Build Dependencies", {}).get("blas", {}).get("name", "?")
    try:
        from threadpoolctl import threadpool_info
        blas += "".join(f" ({i['architecture']} kernels)" for i in threadpool_info() if i.get("architecture"))
    except ImportError:
        pass
    tc = cpu.toolchain()
    variant = tc.variant or 0
    return [f"- CPU: {_cpu()}",
            f"- compiled kernels: {tc.identity.split('|')[1]}: `{' '.join(tc.command(variant, '<src>', '<so>'))}`"
            f" (libmvec: {'yes' if tc.libmvec else 'no'})",
            f"- eager: numpy {np.__version__}, SIMD {simd}; BLAS {blas}",
            f"- {' '.join(platform.libc_ver())}, Python {platform.python_version()}",
            *[f"- {k}={os.environ[k]}" for k in ("NPY_DISABLE_CPU_FEATURES", "OPENBLAS_CORETYPE") if k in os.environ]]


def _draws(strategy, n: int, measure) -> None:
    """Call `measure(example)` on `n` derandomized draws of `strategy`."""
    from hypothesis import HealthCheck, given, settings, strategies as st

    @settings(max_examples=n, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def run(data):
        measure(data.draw(strategy))

    run()


def _primitives() -> list[str]:
    from numerics_measure import primitive_errors
    from test_codegen import ULP_BOUNDS

    errors, _ = primitive_errors()
    lines = ["| primitive | compiled | eager | bound (compiled) |", "|---|---|---|---|"]
    for name, e in errors.items():
        bound = "eager's bits" if ULP_BOUNDS[name] == 0 else ULP_BOUNDS[name]
        mark = "" if e.bitwise else " *"
        lines.append(f"| {name} | {e.compiled}{mark} | {e.eager} | {bound} |")
    return lines


def _op_table(examples: int) -> list[str]:
    from numerics_measure import op_table_errors
    from op_db import stageable_ops
    from test_compile import OP_BOUNDS, OP_CLASSES

    kind_of = {name: kind for kind, names in OP_CLASSES.items() for name in names}
    rows, bitwise = [], 0
    for info in stageable_ops():
        kind = kind_of.get(info.name, "exact")
        worst = {"compiled": 0.0, "eager": 0.0, "excess": 0.0, "bitwise": True}

        def measure(sample):
            e = op_table_errors(info, sample, reduction=kind == "reductions")
            if e is not None:
                worst["compiled"] = max(worst["compiled"], e.compiled)
                worst["eager"] = max(worst["eager"], e.eager)
                worst["excess"] = max(worst["excess"], e.compiled - e.eager)
                worst["bitwise"] &= e.bitwise

        _draws(info.samples, examples, measure)
        if worst["bitwise"]:
            bitwise += 1
            continue
        bound = {"exact": "eager's bits", "math": f"{OP_BOUNDS['math']}",
                 "reductions": f"eager + {OP_BOUNDS['reductions']}"}[kind]
        rows.append(f"| {info.name} | {kind} | {worst['compiled']:.2f} | {worst['eager']:.2f} | "
                    f"{worst['excess']:.2f} | {bound} |")
    return [f"{bitwise} of {bitwise + len(rows)} ops gave eager's bits on every draw; the others:", "",
            "| op | class | compiled | eager | compiled - eager | bound (compiled) |", "|---|---|---|---|---|---|",
            *rows]


def _composites(examples: int) -> list[str]:
    from numerics_measure import COMPOSITES, composite_errors
    from test_compile_numerics import COMPOSITE_BOUNDS

    lines = ["| function | measure | compiled | eager | bounds (compiled, eager) |", "|---|---|---|---|---|"]
    for name, case in COMPOSITES.items():
        worst = [0.0, 0.0]

        def measure(args):
            for i, e in enumerate(composite_errors(name, args)):
                worst[i] = max(worst[i], e)

        _draws(case.samples, examples, measure)
        bounds = ", ".join(f"{b:g}" for b in COMPOSITE_BOUNDS[name])
        lines.append(f"| {name} | {case.metric} | {worst[0]:.3g} | {worst[1]:.3g} | {bounds} |")
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.numerics_report", description=__doc__.splitlines()[0])
    p.add_argument("--examples", type=int, default=10, help="hypothesis draws per op and per composite (default 10)")
    args = p.parse_args(argv)
    sys.path.insert(0, str(_TESTS))
    warnings.simplefilter("ignore")
    import numpy as np

    np.seterr(all="ignore")
    sections = [
        ("float32 errors against float64, measured on this machine", _environment()),
        ("Elementwise primitives: worst ulps from the float64 result rounded to float32 (* not eager's bits)",
         _primitives()),
        (f"Op table: worst ulps (of the scale each op works at) from float64 over {args.examples} draws per op",
         _op_table(args.examples)),
        (f"Composite functions: worst error from float64 over {args.examples} draws each", _composites(args.examples)),
    ]
    for title, lines in sections:
        print(f"## {title}\n\n" + "\n".join(lines) + "\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
