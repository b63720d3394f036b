"""fnx.hub (torch.hub): the cache directory, downloads from a local HTTP server and file:// URLs, checkpoints
from URLs read by fnx.load, and hubconf.py entry points from local directories and (served) GitHub archives."""
from __future__ import annotations

import hashlib
import http.server
import io
import os
import threading
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

import fnx
from fnx import hub
from test_serialization_torch import Storage, tensor, torch_file

HUBCONF = '''
dependencies = ["numpy"]


def tiny(n=2, scale=1.0):
    """A tiny model: Linear(n, 1) with its weight filled with `scale`."""
    import fnx
    model = fnx.nn.Linear(n, 1)
    fnx.nn.init.constant_(model.weight, scale)
    return model


def _private():
    return 0


not_callable = 3
'''


class _Server:
    """An HTTP server on 127.0.0.1 answering GETs from `routes` (path with query -> bytes or an HTTP status)."""

    def __init__(self):
        routes = self.routes = {}
        self.requests = []
        requests = self.requests

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                requests.append(self.path)
                body = routes.get(self.path, 404)
                if isinstance(body, int):
                    self.send_error(body)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("no_proxy", "127.0.0.1")   # a proxy set in the environment must not see these requests
    s = _Server()
    yield s
    s.close()


@pytest.fixture
def hub_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(hub, "_hub_dir", str(tmp_path / "hub"))
    return tmp_path / "hub"


def _state_dict_file() -> tuple[bytes, np.ndarray]:
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    return torch_file(OrderedDict(weight=tensor(Storage(0, w.ravel(), "FloatStorage"), 0, (2, 3), (3, 1)))), w


# ---------------------------------------------------------------- the cache directory
def test_get_dir_follows_torch_home_and_xdg_cache_home(monkeypatch, tmp_path):
    monkeypatch.setattr(hub, "_hub_dir", None)
    monkeypatch.delenv("TORCH_HOME", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hub.get_dir() == str(tmp_path / "xdg" / "torch" / "hub")
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "th"))
    assert hub.get_dir() == str(tmp_path / "th" / "hub")
    monkeypatch.delenv("TORCH_HOME")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert hub.get_dir() == os.path.expanduser("~/.cache/torch/hub")
    hub.set_dir("~/elsewhere")
    assert hub.get_dir() == os.path.expanduser("~/elsewhere")


# ---------------------------------------------------------------- downloads
def test_download_url_to_file_checks_the_hash_prefix_and_leaves_nothing_on_failure(server, tmp_path, capsys):
    payload = bytes(range(256)) * 1000
    server.routes["/blob.bin"] = payload
    digest = hashlib.sha256(payload).hexdigest()
    dst = tmp_path / "blob.bin"
    hub.download_url_to_file(f"{server.url}/blob.bin", str(dst), hash_prefix=digest[:10])
    assert dst.read_bytes() == payload and "100% of" in capsys.readouterr().err
    bad = tmp_path / "bad.bin"
    with pytest.raises(RuntimeError, match=f'invalid hash value \\(expected "0000", got "{digest}"\\)'):
        hub.download_url_to_file(f"{server.url}/blob.bin", str(bad), hash_prefix="0000", progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blob.bin"]   # no dst, no .partial file
    with pytest.raises(Exception, match="404"):
        hub.download_url_to_file(f"{server.url}/missing", str(bad), progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blob.bin"]
    hub.download_url_to_file(dst.as_uri(), str(tmp_path / "copy.bin"), progress=False)
    assert (tmp_path / "copy.bin").read_bytes() == payload


def test_load_state_dict_from_url_downloads_once_and_loads_weights_only(server, hub_dir, capsys):
    blob, w = _state_dict_file()
    digest = hashlib.sha256(blob).hexdigest()
    name = f"tiny-{digest[:8]}.pth"
    server.routes[f"/models/{name}"] = blob
    sd = hub.load_state_dict_from_url(f"{server.url}/models/{name}", progress=False, check_hash=True)
    np.testing.assert_array_equal(sd["weight"].numpy(), w)
    assert (hub_dir / "checkpoints" / name).exists()
    assert f'Downloading: "{server.url}/models/{name}"' in capsys.readouterr().out
    del server.routes[f"/models/{name}"]
    again = hub.load_state_dict_from_url(f"{server.url}/models/{name}", progress=False, check_hash=True)
    np.testing.assert_array_equal(again["weight"].numpy(), w)   # from the cache, no request
    server.routes["/models/wrong-deadbeef.pth"] = blob
    with pytest.raises(RuntimeError, match="invalid hash value"):
        hub.load_state_dict_from_url(f"{server.url}/models/wrong-deadbeef.pth", check_hash=True, progress=False)
    assert not (hub_dir / "checkpoints" / "wrong-deadbeef.pth").exists()
    sd = hub.load_state_dict_from_url(f"{server.url}/models/wrong-deadbeef.pth", progress=False,
                                      model_dir=str(hub_dir / "mine"), file_name="renamed.pth", map_location="cpu")
    assert (hub_dir / "mine" / "renamed.pth").exists() and sd["weight"].device.type == "cpu"
    with pytest.raises(ValueError, match="names no file"):
        hub.load_state_dict_from_url(f"{server.url}/", progress=False)


def test_a_zip_holding_one_checkpoint_is_extracted_as_pytorch_does(server, hub_dir, tmp_path):
    path = tmp_path / "model.fnx"
    fnx.save({"w": fnx.arange(3.0)}, str(path))
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w") as zf:
        zf.write(path, "model.fnx")
    server.routes["/model.zip"] = zipped.getvalue()
    with pytest.warns(FutureWarning, match="Falling back to the old format < 1.6"):
        sd = hub.load_state_dict_from_url(f"{server.url}/model.zip", progress=False)
    np.testing.assert_array_equal(sd["w"].numpy(), [0.0, 1.0, 2.0])
    evil = io.BytesIO()
    with zipfile.ZipFile(evil, "w") as zf:
        zf.writestr("../escape.pth", b"x")
    server.routes["/evil.zip"] = evil.getvalue()
    with pytest.raises(ValueError, match="directory traversal"), pytest.warns(FutureWarning):
        hub.load_state_dict_from_url(f"{server.url}/evil.zip", progress=False)
    assert not (hub_dir / "escape.pth").exists()


# ---------------------------------------------------------------- hubconf.py
def _repo(tmp_path, hubconf=HUBCONF):
    repo = tmp_path / "repo"
    repo.mkdir(parents=True)
    (repo / "hubconf.py").write_text(hubconf)
    return repo


def test_local_load_list_help_and_errors(tmp_path):
    repo = str(_repo(tmp_path))
    model = hub.load(repo, "tiny", 3, source="local", scale=2.0)
    assert isinstance(model, fnx.nn.Linear) and model.weight.shape == (1, 3)
    np.testing.assert_array_equal(model.weight.detach().numpy(), [[2.0, 2.0, 2.0]])
    assert repo not in __import__("sys").path
    assert hub.list(repo, source="local") == ["tiny"]
    assert hub.help(repo, "tiny", source="local").startswith("A tiny model")
    with pytest.raises(RuntimeError, match="Cannot find callable nope in hubconf"):
        hub.load(repo, "nope", source="local")
    with pytest.raises(RuntimeError, match="Cannot find callable not_callable"):
        hub.load(repo, "not_callable", source="local")
    with pytest.raises(ValueError, match="model should be a string"):
        hub.load(repo, 3, source="local")
    with pytest.raises(ValueError, match='Unknown source: "svn"'):
        hub.load(repo, "tiny", source="svn")
    with pytest.raises(FileNotFoundError, match="has no hubconf.py"):
        hub.load(str(tmp_path), "tiny", source="local")
    missing = str(_repo(tmp_path / "m", 'dependencies = ["numpy", "no_such_package_xyz"]\ndef f(): pass\n'))
    with pytest.raises(RuntimeError, match="Missing dependencies: no_such_package_xyz"):
        hub.load(missing, "f", source="local")


def _github_routes(server, owner="someone", name="models", ref="main", hubconf=HUBCONF):
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(f"{owner}-{name}-0123abc/", "")
        zf.writestr(f"{owner}-{name}-0123abc/hubconf.py", hubconf)
    server.routes[f"/{owner}/{name}/zipball/{ref}"] = archive.getvalue()
    server.routes[f"/repos/{owner}/{name}/branches?per_page=100&page=1"] = \
        f'[{{"name": "{ref}", "commit": {{"sha": "0123abc"}}}}]'.encode()


def test_github_repos_download_once_into_the_cache_with_trust_and_validation(server, hub_dir, monkeypatch, capsys):
    monkeypatch.setattr(hub, "GITHUB", server.url)
    monkeypatch.setattr(hub, "GITHUB_API", server.url)
    _github_routes(server)
    monkeypatch.setattr("builtins.input", lambda prompt: "n")
    with pytest.raises(Exception, match="Untrusted repository"):
        hub.load("someone/models:main", "tiny")
    model = hub.load("someone/models:main", "tiny", 2, trust_repo=True)
    assert model.weight.shape == (1, 2)
    assert (hub_dir / "someone_models_main" / "hubconf.py").exists()
    assert (hub_dir / "trusted_list").read_text() == "someone_models\n"
    assert sorted(os.listdir(hub_dir)) == ["someone_models_main", "trusted_list"]   # no zip left behind
    server.routes.clear()
    assert hub.list("someone/models:main") == ["tiny"]   # trusted now, and from the cache: no request
    assert "Using cache found in" in capsys.readouterr().err
    server.routes["/someone/models/tree/main/"] = 404   # no ref: main if the repository has it, else master
    _github_routes(server, ref="master")
    assert hub.help("someone/models", "tiny", force_reload=True).startswith("A tiny model")
    assert (hub_dir / "someone_models_master").exists()
    server.routes["/repos/someone/models/branches?per_page=100&page=2"] = b"[]"
    server.routes["/repos/someone/models/tags?per_page=100&page=1"] = b"[]"
    with pytest.raises(ValueError, match="Cannot find v9 in https://github.com/someone/models"):
        hub.load("someone/models:v9", "tiny")
    with pytest.raises(ValueError, match="repo_owner/repo_name"):
        hub.load("not-a-repo", "tiny")
    with pytest.raises(ValueError, match="trust_repo must be"):
        hub.load("someone/models:main", "tiny", trust_repo="yes")
