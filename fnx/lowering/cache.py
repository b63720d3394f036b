"""The on-disk cache of compiled kernels: a private folder, hashed keys, atomic writes, checked reads, a size cap.

A key is the sha256 of everything that determines the artifact (source, flags, compiler identity, fnx
version); a file name starts with a readable stem, so a person listing the folder sees what is there.

Nothing read from the cache is trusted (a kernel is loaded into the process, so a planted file would run
as the user):
- the folder must belong to the user and be writable by nobody else (a new one is made with mode 0700);
  otherwise, or when it is read-only, fnx warns once and uses a private temporary folder instead;
- every entry has a sidecar `<name>.sha256` holding its sha256 and size; an entry is used only when it is a
  regular file of the user's, writable by nobody else, that matches its sidecar. Anything else (a file
  truncated by a crash or a full disk, a changed or planted one) counts as missing and is rebuilt;
- writers produce an entry under a temporary name, `fsync` it (compiled libraries; small records that are
  cheap to remake skip this), `os.replace` it into place and then write its sidecar (also renamed into
  place), so readers never see a partial file and concurrent processes at worst build an entry once each.
  A library compiled from several kernels is the entry of each, as hard links (counted once in the size);
- nothing from the cache is ever unpickled or executed as Python.

The cache holds at most `FNX_CACHE_MAX_BYTES` (default 1 GiB); past that, the entries least recently used
(their modification time, renewed at each use) are removed. `python -m fnx cache [--clear]` shows or empties it.
"""
from __future__ import annotations

import atexit
import errno
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
import time
from pathlib import Path
from typing import Callable

from .._warn import warn

__all__ = ["cache_dir", "cache_key", "entry_path", "read_entry", "write_entry", "commit_entry", "temp_path",
           "cached_file", "cached_text", "evict", "evict_after_write", "usage", "clear", "max_bytes"]

SIDECAR = ".sha256"
DEFAULT_MAX_BYTES = 1 << 30
_STALE_TEMP_S = 24 * 3600       # a temporary file this old was left by a killed process
# A scan for eviction stats every file of the folder (0.3 s for 24,000 of them), which every compile paid: after
# one, this process rescans only when the bytes it found plus those it has written since pass the limit, or a
# minute has gone by (other processes write too).
_RESCAN_S = 60.0
_scanned: dict[str, tuple[float, int]] = {}   # folder -> (time, bytes it held) at this process's last scan
# The names of entries fnx writes (`entry_path`), and of the toolchain probes and template bytecode that earlier
# versions wrote: what eviction and `clear` may remove, with sidecars and temporary files. Nothing else in the
# folder is touched.
_NAME = r"(?:fnx[-_][\w.-]*-[0-9a-f]{32}\.\w+|toolchain-[0-9a-f]{32}\.json|template-[0-9a-f]{40}\.jinja)"
_ENTRY = re.compile(rf"{_NAME}(?:\{SIDECAR})?")
_TEMP = re.compile(rf"\.{_NAME}(?:\{SIDECAR})?\.\w+\.tmp")
_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}

_fallbacks: dict[str, Path] = {}   # refused folder -> the private folder used instead (warned once)
_warned: set[str] = set()


def cache_dir() -> Path:
    """`FNX_CACHE_DIR`, else `$XDG_CACHE_HOME/fnx`, else `~/.cache/fnx` (made with mode 0700 on first use),
    unless it is unsafe or read-only: then a private temporary folder, with one warning."""
    found = os.environ.get("FNX_CACHE_DIR")
    if found:
        path = Path(found)
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = Path(base) / "fnx"
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        problem = _unsafe(os.stat(path), "folder")
        if problem is None and not os.access(path, os.W_OK):
            problem = "is read-only"
    except OSError as e:
        problem = f"cannot be used ({e.strerror or e})"
    return path if problem is None else _fallback(path, problem)


def _unsafe(st: os.stat_result, what: str) -> str | None:
    """Why a file or folder with status `st` may not be trusted, or None: someone else owns it or may write it."""
    if what == "file" and not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return f"belongs to another user (uid {st.st_uid})"
    if st.st_mode & 0o022:
        return f"is writable by other users (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def _fallback(path: Path, problem: str) -> Path:
    key = str(path)
    if key not in _fallbacks:
        private = Path(tempfile.mkdtemp(prefix="fnx-cache-"))   # mode 0700, a name nobody can guess
        atexit.register(shutil.rmtree, private, ignore_errors=True)
        _fallbacks[key] = private
        warn(f"fnx: the kernel cache folder {path} {problem}; using the private folder {private} for this "
             f"process instead (make it yours alone with `chmod 700`, or set FNX_CACHE_DIR to such a folder)",
             RuntimeWarning)
    return _fallbacks[key]


def cache_key(*parts: str) -> str:
    """A hex digest of `parts` (each part length-prefixed, so no two lists of parts collide)."""
    h = hashlib.sha256()
    for p in parts:
        data = p.encode()
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def entry_path(folder: Path, stem: str, key: str, suffix: str) -> Path:
    return folder / f"{stem[:48]}-{key[:32]}{suffix}"


def _sidecar(path: Path | str) -> Path:
    return Path(str(path) + SIDECAR)


def _read_private(path: Path) -> bytes | None:
    """The bytes of `path` when it is a regular file of this user's that nobody else may write, else None."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))   # no FIFO waits
    except OSError as e:
        if e.errno != errno.ELOOP:
            return None   # absent (or unreadable): rebuilt
        problem = "is a symbolic link"
    else:
        with os.fdopen(fd, "rb") as f:
            problem = _unsafe(os.fstat(fd), "file")   # the status of the file opened, not of what the name is now
            if problem is None:
                return f.read()
    _warn_once(f"fnx: ignoring {path} in the kernel cache: it {problem}; it will be rebuilt")
    return None


def read_entry(path: Path) -> bytes | None:
    """The contents of cache entry `path` if it is present, private and matches its sidecar; else None.
    A used entry's modification time is renewed (least-recently-used eviction)."""
    data = _read_private(path)
    side = _read_private(_sidecar(path)) if data is not None else None
    if side is None:
        return None
    try:
        record = json.loads(side)
        ok = (isinstance(record, dict) and record.get("size") == len(data)
              and record.get("sha256") == hashlib.sha256(data).hexdigest())
    except ValueError:
        ok = False
    if not ok:
        return None
    try:
        os.utime(path)
    except OSError:
        pass
    return data


def temp_path(path: Path) -> str:
    """A new empty temporary file next to `path` (a hidden name that `clear` and eviction recognise)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    return tmp


def commit_entry(tmp: str, path: Path, *, durable: bool = True, also=()) -> None:
    """Move the finished temporary file `tmp` (a compiler's output, say) into place as cache entry `path`, then
    write its sidecar. `durable`: fsync the entry before the rename, so after a crash its sidecar never vouches
    for data that did not reach the disk. `also`: more entries that hold the same bytes (a library of several
    kernels is the entry of each), hard links to `path` (copies where the file system has none)."""
    with open(tmp, "rb") as f:
        data = f.read()
        os.chmod(tmp, stat.S_IMODE(os.fstat(f.fileno()).st_mode) & 0o700)   # a compiler's output follows the umask
        if durable:
            os.fsync(f.fileno())
    os.replace(tmp, path)
    record = json.dumps({"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}).encode()
    for entry in (path, *also):
        if entry != path:
            _link(path, entry)
        _replace_with(_sidecar(entry), record)   # a sidecar lost in a crash costs one rebuild: no fsync (10 ms on
        # some disks)


def _link(source: Path, path: Path) -> None:
    """Put a hard link to `source` (or a copy of it, with its mode) in place as `path`."""
    tmp = temp_path(path)
    try:
        _remove(tmp)
        try:
            os.link(source, tmp)
        except OSError:
            shutil.copy2(source, tmp)
        os.replace(tmp, path)
    finally:
        _remove(tmp)


def _replace_with(path: Path, data: bytes) -> None:
    tmp = temp_path(path)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    finally:
        _remove(tmp)


def write_entry(path: Path, data: bytes) -> None:
    """Store `data` as cache entry `path` (atomically, with its sidecar) without an fsync: for small records that
    are cheap to make again (rendered sources, toolchain probes), which a crash can only make fail their check."""
    tmp = temp_path(path)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        commit_entry(tmp, path, durable=False)
    finally:
        _remove(tmp)


def _remove(path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def cached_file(stem: str, key: str, suffix: str, produce: Callable[[str], None]) -> tuple[Path, bool]:
    """The cache entry for `key`, made by `produce(tmp_path)` if absent or damaged; returns (path, was_cached).

    `produce` writes the artifact to the temporary path it is given; on failure (or Ctrl-C) the temporary
    file is removed and the error propagates.
    """
    path = entry_path(cache_dir(), stem, key, suffix)
    if read_entry(path) is not None:
        return path, True
    tmp = temp_path(path)
    try:
        produce(tmp)
        commit_entry(tmp, path)
    finally:
        _remove(tmp)
    evict_after_write(path.parent, [path])
    return path, False


def cached_text(stem: str, key: str, produce: Callable[[], str]) -> str:
    """Text cached under `key` (plain data, checked like every entry), made by `produce()` if absent."""
    path = entry_path(cache_dir(), stem, key, ".txt")
    data = read_entry(path)
    if data is not None:
        return data.decode()
    text = produce()
    write_entry(path, text.encode())
    return text


def max_bytes() -> int:
    """The cache's size limit: `FNX_CACHE_MAX_BYTES` (bytes, or with a K, M or G suffix), else 1 GiB."""
    text = os.environ.get("FNX_CACHE_MAX_BYTES", "").strip()
    if not text:
        return DEFAULT_MAX_BYTES
    scale = _UNITS.get(text[-1].upper(), 1)
    digits = text[:-1] if scale > 1 else text
    if digits.isdigit():
        return int(digits) * scale
    _warn_once(f"fnx: FNX_CACHE_MAX_BYTES={text!r} is not a size (such as 500000000 or 500M); using 1G")
    return DEFAULT_MAX_BYTES


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        warn(message, RuntimeWarning)


def _our_files(folder: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(folder) as it:
            return [e for e in it if (_ENTRY.fullmatch(e.name) or _TEMP.fullmatch(e.name))
                    and e.is_file(follow_symlinks=False)]
    except OSError:
        return []


def evict(folder: Path, keep=()) -> None:
    """Remove the least recently used entries (with their sidecars) until the folder holds at most
    `max_bytes()`, never one in `keep`; temporary files abandoned by killed processes go too."""
    limit, now = max_bytes(), time.time()
    groups: dict[str, list] = {}   # entry name -> [last use, bytes, paths]
    for e in _our_files(folder):
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue
        if _TEMP.fullmatch(e.name):
            if st.st_mtime < now - _STALE_TEMP_S:
                _remove(e.path)
            continue
        group = groups.setdefault(e.name.removesuffix(SIDECAR), [st.st_mtime, 0, []])
        if not e.name.endswith(SIDECAR):
            group[0] = st.st_mtime   # an entry's use renews its own time, not its sidecar's
        group[1] += st.st_size // max(st.st_nlink, 1)   # a library that is the entry of several kernels counts once
        group[2].append(e.path)
    total = sum(g[1] for g in groups.values())
    keep = {str(p) for p in keep}
    for _, size, paths in sorted(groups.values()):
        if total <= limit:
            break
        if not keep.intersection(paths):
            for p in paths:
                _remove(p)
            total -= size
    _scanned[str(folder)] = (now, total)


def evict_after_write(folder: Path, written, keep=()) -> None:
    """`evict` once this process has written the entries `written` (kept, as `keep` is), unless its last scan of
    the folder, less than a minute ago, plus what it has written since stays within the limit."""
    added = 0
    for p in written:
        try:
            st = os.stat(p)
            added += st.st_size // max(st.st_nlink, 1)
        except OSError:
            pass
    last = _scanned.get(str(folder))
    if last is not None and time.time() - last[0] < _RESCAN_S and last[1] + added <= max_bytes():
        _scanned[str(folder)] = (last[0], last[1] + added)
        return
    evict(folder, keep=[*written, *keep])


def usage(folder: Path) -> tuple[int, int]:
    """(number of files, bytes) that fnx holds in `folder`."""
    sizes = []
    for e in _our_files(folder):
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue
        sizes.append(st.st_size // max(st.st_nlink, 1))
    return len(sizes), sum(sizes)


def clear(folder: Path) -> tuple[int, int]:
    """Remove every file fnx wrote to `folder`; returns (number of files, bytes) removed."""
    files, size = usage(folder)
    for e in _our_files(folder):
        _remove(e.path)
    return files, size
