"""Run the registered workloads, time them and print one table (and optionally write JSON or profiles).

Each row (a framework, or a framework's variant, on one case) is built and
timed in a worker process of its own (benchmarks/worker.py), so one
framework's OpenMP workers, BLAS threads and allocator never share a process
with another's; W9 and W12 start their own workers. Timing follows `timeit`:
`time.perf_counter`, warm-up repetitions first, the garbage collector paused
inside each timed repetition (and run between them), and the median over
several repetitions; the worker times each repetition so and reports it
(`Bench.measure`). The rows' repetitions of one case are interleaved, so a
burst of background load on this small machine slows every framework's
sample alike. Each row's ratio divides its median by the median of the
workload's reference framework on the same case and device.
"""
from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field

from .frameworks import FRAMEWORKS, describe, environment
from .profiling import print_profile
from .registry import INTERPRETERS, NOTES, SIZES, UNITS, Bench, Skip, Workload, all_workloads, note
from .worker import Worker, environment_note

__all__ = ["Result", "run_case", "timed", "format_table", "main"]


@dataclass
class Result:
    """The timings of one (case, framework, device), or why it was skipped."""

    workload: str
    case: str
    framework: str
    device: str
    unit: str
    reference: str
    ops: int = 1
    times_s: list = field(default_factory=list)  # seconds per repetition (bytes for a memory unit)
    skipped: str | None = None
    failed: bool = False  # the case raised an unexpected error (the run exits with status 1)
    ratio: float | None = None

    @property
    def value(self) -> float | None:
        """Median time per op in `unit`."""
        if not self.times_s:
            return None
        return statistics.median(self.times_s) / self.ops * UNITS[self.unit]

    @property
    def spread(self) -> float | None:
        """Interquartile range of the repetitions, relative to the median (None for one repetition or a zero
        median, as a step that allocates nothing new measures in W9m)."""
        median = statistics.median(self.times_s) if len(self.times_s) > 1 else 0.0
        if not median:
            return None
        q1, _, q3 = statistics.quantiles(self.times_s, n=4, method="inclusive")
        return (q3 - q1) / median


def _once(bench: Bench) -> float:
    t0 = time.perf_counter()
    out = bench.run()
    if bench.sync is not None:
        bench.sync(out)
    elapsed = time.perf_counter() - t0
    return elapsed if bench.measure is None else bench.measure(out)


def timed(bench: Bench) -> float:
    """One repetition with the garbage collector paused (it runs just before), as `timeit` does; the bench's
    settle runs last before the clock starts (a call that wakes a thread pool stays the last thing before it)."""
    gc.collect()
    if bench.settle is not None:
        bench.settle()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _once(bench)
    finally:
        if was_enabled:
            gc.enable()


def run_case(w: Workload, frameworks: list[str], device: str, repeats: int, profile_top: int = 0) -> list[Result]:
    """Time one case for each framework, interleaving their repetitions so that background load affects all alike.

    A `Skip` or `NotImplementedError` while building or warming up makes that framework's row a skipped one;
    any other exception is an error: its row says so, the traceback goes to stderr, and `failed` is set.
    """
    results, benches = [], []
    try:
        _measure_case(w, frameworks, device, repeats, profile_top, results, benches)
    finally:
        for _, bench in benches:
            if bench.close is not None:
                bench.close()
    return results


def _measure_case(w: Workload, frameworks: list[str], device: str, repeats: int, profile_top: int,
                  results: list, benches: list) -> None:
    for fw in frameworks:
        res = Result(w.id, w.case, fw, device, w.unit, w.reference)
        results.append(res)
        try:
            bench = w.build(fw, device) if w.own_processes else _in_worker(w, fw, device)
            benches.append((res, bench))   # closed by run_case, also when warming up fails
            for _ in range(w.warmup):
                _once(bench)
        except (Skip, NotImplementedError) as e:
            res.skipped = str(e).splitlines()[0] if str(e) else type(e).__name__
            continue
        except Exception as e:  # one broken case must not hide the other measurements
            traceback.print_exc()
            res.skipped = f"error: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            res.failed = True
            continue
        res.ops = bench.ops
    for _ in range(repeats):
        for res, bench in benches:
            if res.skipped is not None:
                continue
            res.times_s.append(timed(bench))
    if profile_top:
        for res, bench in benches:
            if res.skipped is None:
                print_profile(bench, f"{res.workload} {res.case} [{res.framework}]", profile_top)


def _in_worker(w: Workload, row: str, device: str) -> Bench:
    """Row `row` of case `w` built and timed in a worker process of its own; its interpreter and thread pools
    go under the table (once per framework and environment)."""
    worker = Worker.for_case(w, row, device)
    note(environment_note(f"[{row.split()[0]}]", worker.hello["env"]))
    return worker.bench()


def _fill_ratios(results: list[Result]) -> None:
    refs = {(r.workload, r.case, r.device): r.value for r in results if r.framework == r.reference}
    for r in results:
        ref = refs.get((r.workload, r.case, r.device))
        if r.value is not None and ref:
            r.ratio = r.value / ref


# ---------------------------------------------------------------- output
def _fmt_value(r: Result) -> str:
    if r.value is None:
        return "error" if r.failed else "skipped"
    v = r.value
    digits = 3 if v < 10 else 2 if v < 100 else 1 if v < 1000 else 0
    return f"{v:.{digits}f} {r.unit}"


def _fmt_ratio(r: Result) -> str:
    if r.ratio is None:
        return "-" if r.value is None else f"(no {r.reference})"
    mark = "  (ref)" if r.framework == r.reference else ""
    return f"{r.ratio:.2f}x {r.reference}{mark}"


def format_table(results: list[Result]) -> str:
    """One aligned table: workload, case, framework, median, spread, ratio to the reference (and skip reasons)."""
    header = ("workload", "case", "framework", "median", "iqr", "vs reference")
    rows, last = [], None
    for r in results:
        group = (r.workload, r.case, r.device)
        shown = (r.workload, r.case + ("" if r.device == "cpu" else f" [{r.device}]")) if group != last else ("", "")
        last = group
        spread = f"{100 * r.spread:.0f}%" if r.spread is not None else ""
        ratio = _fmt_ratio(r) if r.skipped is None else f"({r.skipped})"
        rows.append((*shown, r.framework, _fmt_value(r), spread, ratio))
    widths = [max(len(str(x[i])) for x in [header, *rows]) for i in range(len(header) - 1)]
    align = ("<", "<", "<", ">", ">")
    lines = []
    for row in [header, *rows]:
        cells = [f"{c:{a}{w}}" for c, a, w in zip(row, align, widths)]
        lines.append("  ".join(cells + [row[-1]]).rstrip())
    lines.insert(1, "-" * max(len(line) for line in lines))
    return "\n".join(lines)


# ---------------------------------------------------------------- command line
def _parse(argv) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks",
                                description="Time fnx against numpy, torch and jax (those installed) and print "
                                            "one table.")
    p.add_argument("workloads", nargs="*", metavar="WORKLOAD",
                   help="workload ids to run (default: all but the slow ones run only when named: W9, W9m, W9c, W12), "
                        "e.g. W1 W8")
    p.add_argument("-k", dest="pattern", default="", metavar="TEXT",
                   help="run only the cases whose description contains TEXT (case-insensitive), e.g. -k llama")
    p.add_argument("--quick", action="store_true", help="3 repetitions per case instead of the workload's default")
    p.add_argument("--repeats", type=int, help="timed repetitions per case (overrides --quick)")
    p.add_argument("--frameworks", default=",".join(FRAMEWORKS),
                   help=f"comma-separated frameworks to run (default: {','.join(FRAMEWORKS)})")
    p.add_argument("--device", default="cpu", help="device for fnx/torch/jax arrays: cpu (default) or cuda")
    p.add_argument("--size", default="small", choices=SIZES,
                   help="configuration of workloads that have two (W9): small (default) or large")
    p.add_argument("--python", action="append", default=[], metavar="FW=PATH",
                   help="Python interpreter for FW's worker processes (each row runs in a process of its own), "
                        "e.g. torch=/path/venv/bin/python for a torch installed elsewhere; repeatable")
    p.add_argument("--json", metavar="PATH", help="also write the environment and results as JSON to PATH")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="after timing each case, cProfile one repetition and print its top N functions (stderr)")
    p.add_argument("--list", action="store_true", help="list the workloads and exit")
    p.add_argument("--keep-blas-env", action="store_true",
                   help="keep OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE (by default they are unset for this run)")
    return p.parse_args(argv)


def _select(all_w: list[Workload], ids: list[str], device: str, size: str = "small",
            pattern: str = "") -> list[Workload]:
    known = list(dict.fromkeys(w.id for w in all_w))
    wanted = {i.lower() for i in ids}
    unknown = wanted - {k.lower() for k in known}
    if unknown:
        raise SystemExit(f"unknown workload(s) {', '.join(sorted(unknown))}; available: {', '.join(known)}")
    chosen = [w for w in all_w if (w.id.lower() in wanted if wanted else not w.explicit) and w.size in (None, size)
              and pattern.lower() in w.case.lower()]
    if not chosen:
        raise SystemExit(f"no case of {', '.join(ids) or 'the default workloads'} at --size {size} matches -k "
                         f"{pattern!r}")
    on_device = [w for w in chosen if device.split(":")[0] in w.devices]
    if chosen and not on_device:
        raise SystemExit(f"none of the selected workloads has a {device} variant")
    return on_device


def _interpreters(specs: list[str]) -> dict:
    out = {}
    for spec in specs:
        fw, sep, path = spec.partition("=")
        if not sep or fw not in FRAMEWORKS or not path:
            raise SystemExit(f"--python {spec!r}: expected FW=PATH with FW one of {', '.join(FRAMEWORKS)}")
        out[fw] = path
    return out


def main(argv=None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    INTERPRETERS.clear()
    INTERPRETERS.update(_interpreters(args.python))
    NOTES.clear()
    workloads = all_workloads()
    if args.list:
        for w in workloads:
            size = (f"  size {w.size}" if w.size else "") + ("  (only when named)" if w.explicit else "")
            print(f"{w.id:5} {w.case:40} {w.unit:6} ref {w.reference:6} {','.join(w.frameworks)}  "
                  f"devices {','.join(w.devices)}{size}")
        return 0
    selected = _select(workloads, args.workloads, args.device, args.size, args.pattern)
    frameworks = [f.strip() for f in args.frameworks.split(",") if f.strip()]
    bad = set(frameworks) - set(FRAMEWORKS)
    if bad:
        raise SystemExit(f"unknown framework(s) {', '.join(sorted(bad))}; known: {', '.join(FRAMEWORKS)}")
    env = environment()
    env["interpreters"] = dict(INTERPRETERS)
    header = describe(env)
    print("\n".join(header), flush=True)
    results: list[Result] = []
    start = time.perf_counter()
    for w in selected:
        repeats = args.repeats or (3 if args.quick else w.repeats)
        fws = [fw for fw in w.frameworks if fw.split()[0] in frameworks]   # "fnx compile" is an fnx variant
        case_results = run_case(w, fws, args.device, repeats, args.profile)
        for r in case_results:
            status = _fmt_value(r) if r.skipped is None else f"skipped: {r.skipped}"
            print(f"  {w.id} {w.case} [{r.framework}]: {status}", file=sys.stderr, flush=True)
        results += case_results
    elapsed = time.perf_counter() - start
    _fill_ratios(results)
    reps = "--repeats" if args.repeats else "--quick" if args.quick else "default"
    print(f"timing: median of repetitions ({reps}; iqr = interquartile range / median), perf_counter, gc paused "
          f"while timed, each row in a worker process of its own, rows interleaved; run took {elapsed:.0f} s\n")
    print(format_table(results))
    if NOTES:
        print("\n" + "\n".join(NOTES))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"environment": env, "args": vars(args), "notes": NOTES,
                       "results": [{**asdict(r), "value": r.value, "spread": r.spread} for r in results]}, f,
                      indent=1)
        print(f"\nwrote {args.json}")
    return 1 if any(r.failed for r in results) else 0
