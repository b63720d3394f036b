"""Run the registered workloads, time them and print one table (and optionally write JSON or profiles).

Timing follows `timeit`: `time.perf_counter`, warm-up repetitions first, the
garbage collector paused inside each timed repetition (and run between
them), and the median over several repetitions. The frameworks' repetitions
of one case are interleaved, so a burst of background load on this small
machine slows every framework's sample alike. Each row's ratio divides
its median by the median of the workload's reference framework on the same
case and device.
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
from .registry import UNITS, Bench, Skip, Workload, all_workloads

__all__ = ["Result", "run_case", "format_table", "main"]


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
    times_s: list = field(default_factory=list)  # seconds per repetition
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
        """Interquartile range of the repetitions, relative to the median."""
        if len(self.times_s) < 2:
            return None
        q1, _, q3 = statistics.quantiles(self.times_s, n=4, method="inclusive")
        return (q3 - q1) / statistics.median(self.times_s)


def _once(bench: Bench) -> float:
    t0 = time.perf_counter()
    out = bench.run()
    if bench.sync is not None:
        bench.sync(out)
    return time.perf_counter() - t0


def _timed(bench: Bench) -> float:
    """One repetition with the garbage collector paused (it runs just before), as `timeit` does."""
    gc.collect()
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
    for fw in frameworks:
        res = Result(w.id, w.case, fw, device, w.unit, w.reference)
        results.append(res)
        try:
            bench = w.build(fw, device)
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
        benches.append((res, bench))
    for _ in range(repeats):
        for res, bench in benches:
            res.times_s.append(_timed(bench))
    if profile_top:
        for res, bench in benches:
            print_profile(bench, f"{res.workload} {res.case} [{res.framework}]", profile_top)
    return results


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
    p.add_argument("workloads", nargs="*", metavar="WORKLOAD", help="workload ids to run (default: all), e.g. W1 W8")
    p.add_argument("--quick", action="store_true", help="3 repetitions per case instead of the workload's default")
    p.add_argument("--repeats", type=int, help="timed repetitions per case (overrides --quick)")
    p.add_argument("--frameworks", default=",".join(FRAMEWORKS),
                   help=f"comma-separated frameworks to run (default: {','.join(FRAMEWORKS)})")
    p.add_argument("--device", default="cpu", help="device for fnx/torch/jax arrays: cpu (default) or cuda")
    p.add_argument("--json", metavar="PATH", help="also write the environment and results as JSON to PATH")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="after timing each case, cProfile one repetition and print its top N functions (stderr)")
    p.add_argument("--list", action="store_true", help="list the workloads and exit")
    p.add_argument("--keep-blas-env", action="store_true",
                   help="keep OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE (by default they are unset for this run)")
    return p.parse_args(argv)


def _select(all_w: list[Workload], ids: list[str], device: str) -> list[Workload]:
    known = list(dict.fromkeys(w.id for w in all_w))
    wanted = {i.lower() for i in ids}
    unknown = wanted - {k.lower() for k in known}
    if unknown:
        raise SystemExit(f"unknown workload(s) {', '.join(sorted(unknown))}; available: {', '.join(known)}")
    chosen = [w for w in all_w if not wanted or w.id.lower() in wanted]
    on_device = [w for w in chosen if device.split(":")[0] in w.devices]
    if chosen and not on_device:
        raise SystemExit(f"none of the selected workloads has a {device} variant")
    return on_device


def main(argv=None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    workloads = all_workloads()
    if args.list:
        for w in workloads:
            print(f"{w.id:5} {w.case:40} {w.unit:6} ref {w.reference:6} {','.join(w.frameworks)}  "
                  f"devices {','.join(w.devices)}")
        return 0
    selected = _select(workloads, args.workloads, args.device)
    frameworks = [f.strip() for f in args.frameworks.split(",") if f.strip()]
    bad = set(frameworks) - set(FRAMEWORKS)
    if bad:
        raise SystemExit(f"unknown framework(s) {', '.join(sorted(bad))}; known: {', '.join(FRAMEWORKS)}")
    env = environment()
    header = describe(env)
    print("\n".join(header), flush=True)
    results: list[Result] = []
    start = time.perf_counter()
    for w in selected:
        repeats = args.repeats or (3 if args.quick else w.repeats)
        fws = [fw for fw in w.frameworks if fw in frameworks]
        case_results = run_case(w, fws, args.device, repeats, args.profile)
        for r in case_results:
            status = _fmt_value(r) if r.skipped is None else f"skipped: {r.skipped}"
            print(f"  {w.id} {w.case} [{r.framework}]: {status}", file=sys.stderr, flush=True)
        results += case_results
    elapsed = time.perf_counter() - start
    _fill_ratios(results)
    reps = "--repeats" if args.repeats else "--quick" if args.quick else "default"
    print(f"timing: median of repetitions ({reps}; iqr = interquartile range / median), perf_counter, gc paused "
          f"while timed, frameworks interleaved; run took {elapsed:.0f} s\n")
    print(format_table(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"environment": env, "args": vars(args),
                       "results": [{**asdict(r), "value": r.value, "spread": r.spread} for r in results]}, f,
                      indent=1)
        print(f"\nwrote {args.json}")
    return 1 if any(r.failed for r in results) else 0
