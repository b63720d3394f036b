"""The on-disk cache of compiled kernels: hashed keys, atomic writes.

A key is the sha256 of everything that determines the compiled artifact
(source, flags, compiler identity, fnx version); the file name starts with
a readable stem so a person listing the folder sees what is there. Writers
produce the artifact under a temporary name in the cache folder and
`os.replace` it into place, so concurrent processes never see a partial
file: the worst case is that two of them compile the same source once each.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Callable

__all__ = ["cache_dir", "cache_key", "cached_file"]


def cache_dir() -> Path:
    """`FNX_CACHE_DIR`, else `$XDG_CACHE_HOME/fnx`, else `~/.cache/fnx`; created on first use."""
    found = os.environ.get("FNX_CACHE_DIR")
    if found:
        path = Path(found)
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = Path(base) / "fnx"
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_key(*parts: str) -> str:
    """A hex digest of `parts` (each part length-prefixed, so no two lists of parts collide)."""
    h = hashlib.sha256()
    for p in parts:
        data = p.encode()
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def cached_file(stem: str, key: str, suffix: str, produce: Callable[[str], None]) -> tuple[Path, bool]:
    """The cache file for `key`, made by `produce(tmp_path)` if absent; returns (path, was_cached).

    `produce` writes the artifact to the temporary path it is given; the file is then renamed into place
    atomically. On failure the temporary file is removed and the error propagates.
    """
    folder = cache_dir()
    path = folder / f"{stem[:48]}-{key[:32]}{suffix}"
    if path.exists():
        return path, True
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    os.close(fd)
    try:
        produce(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path, False
