"""`python -m fnx [COMMAND]`: maintenance commands, and running PyTorch and JAX scripts on fnx.

    python -m fnx                  the environment (same as `env`)
    python -m fnx env              versions, platform, numpy's BLAS, C compiler and flags, kernel cache, GPU, MPI
    python -m fnx cache            where the kernel cache is, how much it holds, its limit
    python -m fnx cache --clear    remove every file fnx stored there
    python -m fnx run SCRIPT [ARGS...]   run an unmodified PyTorch script with fnx standing in for torch
    python -m fnx run --jax SCRIPT [ARGS...]   run an unmodified JAX script with fnx standing in for jax
"""
from __future__ import annotations

import argparse
import sys

from .lowering import cache


def _size(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024


def _cache(args: argparse.Namespace) -> int:
    folder = cache.cache_dir()
    if args.clear:
        files, size = cache.clear(folder)
        print(f"removed {files} files ({_size(size)}) from {folder}")
    files, size = cache.usage(folder)
    print(f"kernel cache: {folder}")
    print(f"size: {_size(size)} in {files} files (limit {_size(cache.max_bytes())}, set by FNX_CACHE_MAX_BYTES)")
    return 0


def _env(args: argparse.Namespace) -> int:
    from ._env import report

    print(report())
    return 0


def _run(args: argparse.Namespace) -> int:
    from . import jax_alias, torch_alias

    (jax_alias if args.jax else torch_alias).run_script(args.script, args.args)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fnx",
                                     description="fnx maintenance commands and the PyTorch / JAX script runner "
                                                 "(default: env)")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    p = commands.add_parser("env", help="print the environment for bug reports: versions, compiler, cache, GPU, MPI")
    p.set_defaults(run=_env)
    p = commands.add_parser("cache", help="show the compiled-kernel cache's location and size, or clear it")
    p.add_argument("--clear", action="store_true", help="remove every file fnx stored in the cache")
    p.set_defaults(run=_cache)
    p = commands.add_parser("run", help="run a PyTorch (or with --jax, a JAX) script unmodified, with fnx standing "
                                        "in for torch (jax)")
    p.add_argument("--jax", action="store_true", help="stand in for jax instead of torch")
    p.add_argument("script", help="the Python file to run as __main__")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments (sys.argv[1:])")
    p.set_defaults(run=_run)
    args = parser.parse_args(argv)
    return args.run(args) if args.command else _env(args)


if __name__ == "__main__":
    sys.exit(main())
