"""`torch.hub`: models from a repository's `hubconf.py` and checkpoints from URLs, as PyTorch's torch.hub.

`load(repo_or_dir, model, ...)` imports `hubconf.py` from a local directory (`source="local"`) or from a GitHub
repository (`"owner/name[:ref]"`) that it downloads once as GitHub's zip archive into `get_dir()` (then reuses,
under the name `owner_name_ref`), checks the module's `dependencies` list and calls its entry point `model`.
Running a repository's code needs trust, as in PyTorch: `trust_repo` ("check", True or False) and the
`trusted_list` file in `get_dir()`. The hubconf code runs as written; under `python -m fnx run` its
`import torch` gives fnx.

`load_state_dict_from_url` downloads a checkpoint once into `<get_dir()>/checkpoints` and reads it with
`fnx.load`, which never unpickles code: PyTorch `.pth` zip files and safetensors files are read weights-only.
`download_url_to_file` writes through a temporary file that it renames when the download is complete, and
checks a SHA-256 prefix. URLs go through urllib (http, https, file).

`import fnx` does not import this module (urllib is slow to import): `import fnx.hub`; under the torch alias
`torch.hub` imports it on first use.
"""
from __future__ import annotations

import builtins
import contextlib
import errno
import hashlib
import importlib.util
import json
import os
import re
import shutil
import sys
import tempfile
import types
import uuid
import zipfile
from pathlib import Path
from typing import Any, Callable
from urllib.error import HTTPError, URLError
from urllib.parse import urlparse
from urllib.request import Request, urlopen

from ._warn import warn
from .serialization import load as _fnx_load

__all__ = ["get_dir", "set_dir", "list", "help", "load", "download_url_to_file", "load_state_dict_from_url"]

HASH_REGEX = re.compile(r"-([a-f0-9]*)\.")
ENV_GITHUB_TOKEN = "GITHUB_TOKEN"
ENV_TORCH_HOME = "TORCH_HOME"
ENV_XDG_CACHE_HOME = "XDG_CACHE_HOME"
DEFAULT_CACHE_DIR = "~/.cache"
VAR_DEPENDENCY = "dependencies"
MODULE_HUBCONF = "hubconf.py"
READ_DATA_CHUNK = 128 * 1024
GITHUB = "https://github.com"            # where repositories' archives come from
GITHUB_API = "https://api.github.com"    # where a ref is checked to belong to the repository
_TRUSTED_REPO_OWNERS = ("facebookresearch", "facebookincubator", "pytorch", "fairinternal")
_PATH_SEP = re.compile(r"[/\\]")
_hub_dir: str | None = None


# ---------------------------------------------------------------- the cache directory
def _get_torch_home() -> str:
    """$TORCH_HOME, else $XDG_CACHE_HOME/torch, else ~/.cache/torch."""
    return os.path.expanduser(os.getenv(ENV_TORCH_HOME, os.path.join(os.getenv(ENV_XDG_CACHE_HOME, DEFAULT_CACHE_DIR),
                                                                     "torch")))


def get_dir() -> str:
    """The hub's cache directory: what `set_dir` set, else `$TORCH_HOME/hub` (TORCH_HOME defaulting to
    `$XDG_CACHE_HOME/torch`, XDG_CACHE_HOME to `~/.cache`)."""
    if os.getenv("TORCH_HUB"):
        warn("TORCH_HUB is deprecated, please use env TORCH_HOME instead")
    if _hub_dir is not None:
        return _hub_dir
    return os.path.join(_get_torch_home(), "hub")


def set_dir(d: str | os.PathLike) -> None:
    """Make `d` (with `~` expanded) the hub's cache directory."""
    global _hub_dir
    _hub_dir = os.path.expanduser(d)


# ---------------------------------------------------------------- downloads
def _progress(done: int, total: int | None) -> None:
    size = f"{done / 2 ** 20:.1f} MiB"
    sys.stderr.write(f"\r{size}" if not total else f"\r{100 * done // total:3d}% of {total / 2 ** 20:.1f} MiB")
    sys.stderr.flush()


def download_url_to_file(url: str, dst: str, hash_prefix: str | None = None, progress: bool = True) -> None:
    """Download `url` to the file `dst`: into a temporary file beside it first, renamed to `dst` once the whole
    object is there (and its SHA-256 starts with `hash_prefix`, if given; else RuntimeError, and no `dst`)."""
    dst = os.path.expanduser(dst)
    for _ in range(tempfile.TMP_MAX):
        tmp_dst = f"{dst}.{uuid.uuid4().hex}.partial"
        try:
            f = open(tmp_dst, "xb")
        except FileExistsError:
            continue
        break
    else:
        raise FileExistsError(errno.EEXIST, "No usable temporary file name found")
    try:
        with urlopen(Request(url, headers={"User-Agent": "torch.hub"})) as u:
            length = u.info().get_all("Content-Length")
            total = int(length[0]) if length else None
            sha256 = hashlib.sha256() if hash_prefix is not None else None
            done = 0
            while buffer := u.read(READ_DATA_CHUNK):
                f.write(buffer)
                if sha256 is not None:
                    sha256.update(buffer)
                done += len(buffer)
                if progress:
                    _progress(done, total)
            if progress:
                sys.stderr.write("\n")
        f.close()
        if sha256 is not None:
            digest = sha256.hexdigest()
            if digest[:len(hash_prefix)] != hash_prefix:
                raise RuntimeError(f'invalid hash value (expected "{hash_prefix}", got "{digest}")')
        shutil.move(f.name, dst)
    finally:
        f.close()
        if os.path.exists(f.name):
            os.remove(f.name)


def _safe_extract_zip(zip_file: zipfile.ZipFile, extract_to: str) -> None:
    """Extract every member under `extract_to`, refusing absolute paths and `..` (zip-slip)."""
    root = Path(extract_to).resolve(strict=False)
    for member in zip_file.infolist():
        name = os.path.normpath(member.filename)
        if name.startswith(("/", "\\")) or (len(name) >= 2 and name[1] == ":" and name[0].isalpha()):
            raise ValueError(f"Archive entry has absolute path: {member.filename}")
        if ".." in _PATH_SEP.split(name):
            raise ValueError(f"Archive entry contains directory traversal: {member.filename}")
        if not (root / name).resolve(strict=False).is_relative_to(root):
            raise ValueError(f"Archive entry escapes target directory: {member.filename}")
        zip_file.extract(member, root)


def _is_legacy_zip_format(filename: str) -> bool:
    """A zip holding one file (PyTorch's model zoo zipped single checkpoints), not torch.save's zip format."""
    if zipfile.is_zipfile(filename):
        with zipfile.ZipFile(filename) as zf:
            members = zf.infolist()
        return len(members) == 1 and not members[0].is_dir()
    return False


def load_state_dict_from_url(url: str, model_dir: str | None = None, map_location=None, progress: bool = True,
                             check_hash: bool = False, file_name: str | None = None,
                             weights_only: bool = True) -> dict[str, Any]:
    """The checkpoint at `url`, downloaded once into `model_dir` (default `<get_dir()>/checkpoints`) as
    `file_name` (default: the URL's file name) and read by `fnx.load(map_location=..., weights_only=...)`.

    `check_hash`: the file name's `-<hex>.` part is a prefix of the file's SHA-256 (`resnet18-5c106cde.pth`),
    checked on download. A zip holding a single file is extracted first, as PyTorch does with such files.
    """
    if os.getenv("TORCH_MODEL_ZOO"):
        warn("TORCH_MODEL_ZOO is deprecated, please use env TORCH_HOME instead")
    if model_dir is None:
        model_dir = os.path.join(get_dir(), "checkpoints")
    os.makedirs(model_dir, exist_ok=True)
    filename = file_name if file_name is not None else os.path.basename(urlparse(url).path)
    if not filename:
        raise ValueError(f"load_state_dict_from_url: the URL {url!r} names no file; pass file_name=")
    cached_file = os.path.join(model_dir, filename)
    if not os.path.exists(cached_file):
        sys.stdout.write(f'Downloading: "{url}" to {cached_file}\n')
        match = HASH_REGEX.search(filename) if check_hash else None
        download_url_to_file(url, cached_file, match.group(1) if match else None, progress=progress)
    if _is_legacy_zip_format(cached_file):
        warn("Falling back to the old format < 1.6. This support will be deprecated in favor of default zipfile "
             "format introduced in 1.6. Please redo torch.save() to save it in the new zipfile format.",
             FutureWarning)
        with zipfile.ZipFile(cached_file) as zf:
            _safe_extract_zip(zf, model_dir)
            cached_file = os.path.join(model_dir, zf.infolist()[0].filename)
    return _fnx_load(cached_file, map_location=map_location, weights_only=weights_only)


# ---------------------------------------------------------------- repositories
def _parse_repo_info(github: str) -> tuple[str, str, str]:
    """(owner, name, ref) of "owner/name[:ref]"; without a ref, "main" if the repository has that branch, else
    "master" (offline: whichever of the two is in the cache)."""
    repo_info, _, ref = github.partition(":")
    parts = repo_info.split("/")
    if len(parts) != 2 or not all(parts) or ":" in ref:
        raise ValueError(f'hub: expected a GitHub repository as "repo_owner/repo_name[:ref]", got {github!r} '
                         f'(for a local directory pass source="local")')
    owner, name = parts
    if ref:
        return owner, name, ref
    try:
        with urlopen(f"{GITHUB}/{owner}/{name}/tree/main/"):
            return owner, name, "main"
    except HTTPError as e:
        if e.code == 404:
            return owner, name, "master"
        raise
    except URLError as e:
        for possible in ("main", "master"):
            if os.path.exists(os.path.join(get_dir(), f"{owner}_{name}_{possible}")):
                return owner, name, possible
        raise RuntimeError(f"It looks like there is no internet connection and the repo could not be found in the "
                           f"cache ({get_dir()})") from e


def _read_json(url: str, headers: dict):
    with urlopen(Request(url, headers=headers)) as r:
        return json.loads(r.read().decode(r.headers.get_content_charset("utf-8")))


def _validate_not_a_forked_repo(owner: str, name: str, ref: str) -> None:
    """Raise ValueError unless `ref` is a branch, tag or commit of owner/name itself (not of a fork)."""
    headers = {"Accept": "application/vnd.github.v3+json"}
    token = os.environ.get(ENV_GITHUB_TOKEN)
    if token is not None:
        headers["Authorization"] = f"token {token}"
    for kind in ("branches", "tags"):
        page = 0
        while True:
            page += 1
            url = f"{GITHUB_API}/repos/{owner}/{name}/{kind}?per_page=100&page={page}"
            try:
                response = _read_json(url, headers)
            except HTTPError:
                headers.pop("Authorization", None)   # retry without a token that may lack the permission
                response = _read_json(url, headers)
            if not response:
                break
            if any(item["name"] == ref or item["commit"]["sha"].startswith(ref) for item in response):
                return
    raise ValueError(f"Cannot find {ref} in https://github.com/{owner}/{name}. If it's a commit from a forked repo, "
                     f"please call hub.load() with forked repo directly.")


def _check_repo_is_trusted(owner: str, name: str, owner_name_branch: str, trust_repo) -> None:
    """PyTorch's trust check: a repository is trusted when listed in `<get_dir()>/trusted_list`, already in the
    cache, or owned by PyTorch's own organisations; otherwise (or with trust_repo=False) ask on the terminal.
    trust_repo=True (or None, the default of older PyTorch) trusts it without asking; a trusted repository is added
    to the list."""
    if trust_repo not in (True, False, "check", None):
        raise ValueError(f'hub: trust_repo must be "check", True or False, got {trust_repo!r}')
    hub_dir = get_dir()
    filepath = os.path.join(hub_dir, "trusted_list")
    Path(filepath).touch()
    with open(filepath) as file:
        trusted = {line.strip() for line in file}
    owner_name = f"{owner}_{name}"
    is_trusted = (owner_name in trusted or owner_name_branch in next(os.walk(hub_dir))[1]
                  or owner in _TRUSTED_REPO_OWNERS)
    if trust_repo is False or (trust_repo == "check" and not is_trusted):
        response = input(f"The repository {owner_name} does not belong to the list of trusted repositories and as such "
                         f"cannot be downloaded. Do you trust this repository and wish to add it to the trusted list "
                         f"of repositories (y/N)?")
        if response.lower() in ("y", "yes"):
            if is_trusted:
                print("The repository is already trusted.")
        elif response.lower() in ("n", "no", ""):
            raise Exception("Untrusted repository.")
        else:
            raise ValueError(f"Unrecognized response {response}.")
    if not is_trusted:
        with open(filepath, "a") as file:
            file.write(owner_name + "\n")


def _remove_if_exists(path: str) -> None:
    if os.path.isfile(path):
        os.remove(path)
    elif os.path.exists(path):
        shutil.rmtree(path)


def _get_cache_or_reload(github: str, force_reload: bool, trust_repo, verbose: bool = True,
                         skip_validation: bool = False) -> str:
    """The directory of the repository `github` in the cache, downloaded (GitHub's zip archive) unless there."""
    hub_dir = get_dir()
    os.makedirs(hub_dir, exist_ok=True)
    owner, name, ref = _parse_repo_info(github)
    normalized_ref = ref.replace("/", "_")   # a branch name may hold "/"
    owner_name_branch = f"{owner}_{name}_{normalized_ref}"
    repo_dir = os.path.join(hub_dir, owner_name_branch)
    _check_repo_is_trusted(owner, name, owner_name_branch, trust_repo)
    if not force_reload and os.path.exists(repo_dir):
        if verbose:
            sys.stderr.write(f"Using cache found in {repo_dir}\n")
        return repo_dir
    if not skip_validation:
        _validate_not_a_forked_repo(owner, name, ref)
    cached_file = os.path.join(hub_dir, normalized_ref + ".zip")
    _remove_if_exists(cached_file)
    url = f"{GITHUB}/{owner}/{name}/zipball/{ref}"
    sys.stdout.write(f'Downloading: "{url}" to {cached_file}\n')
    try:
        download_url_to_file(url, cached_file, progress=False)
    except HTTPError as err:
        if err.code != 300:
            raise
        warn(f"The ref {ref} is ambiguous. Perhaps it is both a tag and a branch in the repo? Torchhub will "
             f"now assume that it's a branch. You can disambiguate tags and branches by explicitly passing "
             f"refs/heads/branch_name or refs/tags/tag_name as the ref. That might require using "
             f"skip_validation=True.")
        download_url_to_file(f"{GITHUB}/{owner}/{name}/zipball/refs/heads/{ref}", cached_file, progress=False)
    with zipfile.ZipFile(cached_file) as zf:
        extracted_repo = os.path.join(hub_dir, zf.infolist()[0].filename)
        _remove_if_exists(extracted_repo)
        _safe_extract_zip(zf, hub_dir)
    _remove_if_exists(cached_file)
    _remove_if_exists(repo_dir)
    shutil.move(extracted_repo, repo_dir)
    return repo_dir


# ---------------------------------------------------------------- hubconf.py
@contextlib.contextmanager
def _on_sys_path(path: str):
    sys.path.insert(0, path)
    try:
        yield
    finally:
        sys.path.remove(path)


def _import_hubconf(repo_dir: str) -> types.ModuleType:
    path = os.path.join(repo_dir, MODULE_HUBCONF)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"hub: {repo_dir!r} has no {MODULE_HUBCONF}: a hub repository or directory defines "
                                f"its entry points there")
    spec = importlib.util.spec_from_file_location(MODULE_HUBCONF, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _load_entry_from_hubconf(module: types.ModuleType, model: str) -> Callable:
    """The entry point `model` of a hubconf module, after checking that its `dependencies` are importable."""
    if not isinstance(model, str):
        raise ValueError("Invalid input: model should be a string of function name")
    dependencies = getattr(module, VAR_DEPENDENCY, None)
    if dependencies is not None:
        missing = [pkg for pkg in dependencies if importlib.util.find_spec(pkg) is None]
        if missing:
            raise RuntimeError(f"Missing dependencies: {', '.join(missing)}")
    func = getattr(module, model, None) if model in dir(module) else None
    if func is None or not callable(func):
        raise RuntimeError(f"Cannot find callable {model} in hubconf")
    return func


def _repo_dir(repo_or_dir: str, source: str, force_reload: bool, trust_repo, verbose: bool,
              skip_validation: bool) -> str:
    source = source.lower()
    if source not in ("github", "local"):
        raise ValueError(f'Unknown source: "{source}". Allowed values: "github" | "local".')
    if source == "local":
        return repo_or_dir
    return _get_cache_or_reload(repo_or_dir, force_reload, trust_repo, verbose=verbose, skip_validation=skip_validation)


def list(github: str, force_reload: bool = False, skip_validation: bool = False, trust_repo="check",
         verbose: bool = True, *, source: str = "github") -> builtins.list[str]:
    """The names of the public callables (entry points) in the repository's hubconf.py; `source="local"` (an
    fnx extension) reads a local directory's."""
    repo_dir = _repo_dir(github, source, force_reload, trust_repo, verbose, skip_validation)
    with _on_sys_path(repo_dir):
        module = _import_hubconf(repo_dir)
    return [f for f in dir(module) if callable(getattr(module, f)) and not f.startswith("_")]


def help(github: str, model: str, force_reload: bool = False, skip_validation: bool = False, trust_repo="check",
         *, source: str = "github") -> str | None:
    """The docstring of the entry point `model` of the repository's hubconf.py (`source="local"`: a local
    directory's, an fnx extension)."""
    repo_dir = _repo_dir(github, source, force_reload, trust_repo, True, skip_validation)
    with _on_sys_path(repo_dir):
        module = _import_hubconf(repo_dir)
    return _load_entry_from_hubconf(module, model).__doc__


def load(repo_or_dir: str, model: str, *args, source: str = "github", trust_repo="check", force_reload: bool = False,
         verbose: bool = True, skip_validation: bool = False, **kwargs) -> Any:
    """`model(*args, **kwargs)`, the entry point of hubconf.py in a GitHub repository ("owner/name[:ref]",
    downloaded into get_dir() once) or a local directory (`source="local"`), with its directory on sys.path."""
    repo_dir = _repo_dir(repo_or_dir, source, force_reload, trust_repo, verbose, skip_validation)
    with _on_sys_path(repo_dir):
        entry = _load_entry_from_hubconf(_import_hubconf(repo_dir), model)
        return entry(*args, **kwargs)
