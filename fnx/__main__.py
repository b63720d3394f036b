"""`python -m fnx [COMMAND]`: maintenance commands, and running PyTorch and JAX scripts on fnx.

    python -m fnx                  the environment (same as `env`)
    python -m fnx env              versions, platform, numpy's BLAS, C compiler and flags, kernel cache, GPU, MPI
    python -m fnx cache            where the kernel cache is, how much it holds, its limit
    python -m fnx cache --clear    remove every file fnx stored there
    python -m fnx run SCRIPT [ARGS...]   run an unmodified PyTorch script with fnx standing in for torch
    python -m fnx run --jax SCRIPT [ARGS...]   run an unmodified JAX script with fnx standing in for jax
    python -m fnx run --nproc-per-node N SCRIPT [ARGS...]   torchrun's single-machine launch: N ranks of SCRIPT
"""
from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time

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

    if args.nproc_per_node > 1:
        return _launch(args)
    (jax_alias if args.jax else torch_alias).run_script(args.script, args.args)
    return 0


def _launch(args: argparse.Namespace) -> int:
    """torchrun on one machine: N processes running the script, each with RANK, LOCAL_RANK, WORLD_SIZE,
    LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT (what init_process_group("gloo") reads) and TORCHELASTIC_RUN_ID
    set. When one fails the others are stopped; the exit status is the first failure's."""
    n = args.nproc_per_node
    if args.master_port:
        port = args.master_port
    else:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    command = [sys.executable, "-m", "fnx", "run", *(["--jax"] if args.jax else []), args.script, *args.args]
    ranks = [subprocess.Popen(command, env=dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(n),
                                                LOCAL_WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1",
                                                MASTER_PORT=str(port), TORCHELASTIC_RUN_ID=f"fnx-{port}"))
             for r in range(n)]
    status = 0
    while any(p.poll() is None for p in ranks):
        failed = [p.returncode for p in ranks if p.returncode not in (None, 0)]
        if failed:
            status = failed[0]
            for p in ranks:
                if p.poll() is None:
                    p.terminate()
        time.sleep(0.05)
    return status or next((p.returncode for p in ranks if p.returncode), 0)


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
    p.add_argument("--nproc-per-node", "--nproc_per_node", type=int, default=1, metavar="N",
                   help="start N ranks of the script, as torchrun does on one machine (RANK, WORLD_SIZE, "
                        "MASTER_ADDR, MASTER_PORT set for init_process_group('gloo'))")
    p.add_argument("--master-port", "--master_port", type=int, default=0, metavar="PORT",
                   help="rank 0's port with --nproc-per-node (default: a free one)")
    p.add_argument("script", help="the Python file to run as __main__")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments (sys.argv[1:])")
    p.set_defaults(run=_run)
    args = parser.parse_args(argv)
    return args.run(args) if args.command else _env(args)


if __name__ == "__main__":
    sys.exit(main())
