"""`--profile N`: cProfile one repetition of a case and print its top functions per op.

cProfile adds a fixed cost to every Python call, so its absolute numbers
overstate small functions; read the columns as shares and call counts (a
sampling profiler such as py-spy gives truer proportions).
"""
from __future__ import annotations

import cProfile
import pstats
import sys

from .registry import Bench

__all__ = ["print_profile", "profile_text"]


def print_profile(bench: Bench, title: str, top: int) -> None:
    """cProfile one repetition of `bench` (in its worker process, for a case measured in one); print its `top`
    functions by own time, per op, to stderr."""
    text = bench.profile(top) if bench.profile is not None else profile_text(bench, top)
    print(f"\nprofile: {title}  {text}", file=sys.stderr)


def profile_text(bench: Bench, top: int) -> str:
    """cProfile one repetition of `bench`; its `top` functions by own time, per op, as lines of text."""
    prof = cProfile.Profile()
    prof.enable()
    out = bench.run()
    if bench.sync is not None:
        bench.sync(out)
    prof.disable()
    stats = pstats.Stats(prof).stats
    total = sum(tt for (_, _, tt, _, _) in stats.values())
    rows = sorted(stats.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
    scale = 1e6 / bench.ops
    lines = [f"(cProfile, {total * scale:.2f} us/op profiled)",
             f"{'own us/op':>10} {'cum us/op':>10} {'calls/op':>9}  function"]
    for (path, line, name), (_, ncalls, tt, ct, _) in rows:
        where = f"{_short_path(path)}:{line}({name})" if line else name
        lines.append(f"{tt * scale:10.3f} {ct * scale:10.3f} {ncalls / bench.ops:9.2f}  {where}")
    return "\n".join(lines)


def _short_path(path: str) -> str:
    parts = path.replace("\\", "/").split("/")
    for anchor in ("fnx", "benchmarks", "torch", "jax", "numpy"):
        if anchor in parts:
            return "/".join(parts[len(parts) - 1 - parts[::-1].index(anchor):])
    return parts[-1]
