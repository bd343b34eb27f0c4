"""`talos doctor` as the real process: each check does what Talos will do (a write to the
store read back, `PRAGMA quick_check`, a command in the sandbox, the models list with the key)
and says `ok` or `problem` with the fix; nothing is sent without a key to a non-local endpoint;
a parse error is a problem line, never a traceback."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from talos_ls.store import open_store

from .system import path_without, require_sandbox

TALOS = str(Path(sys.executable).with_name("talos"))


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TALOS_", "OPENAI_"))}
    env.update(
        TALOS_STORE_URL="sqlite:///" + str(tmp_path / "talos.db"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        **extra,
    )
    return env


def doctor(tmp_path, ws, *args, env=None, **kw):
    return subprocess.run(
        [TALOS, "doctor", "--workspace", str(ws), *args],
        capture_output=True,
        text=True,
        env=env or env_for(tmp_path),
        timeout=60,
        **kw,
    )


def lines(out: str, prefix: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith(prefix)]


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    return root


class Recorder:
    """A local HTTP server answering every GET with `body`, counting requests; as a proxy it
    sees any request sent to any host (HTTP_PROXY/HTTPS_PROXY point at it)."""

    def __init__(self, body: bytes, content_type: str) -> None:
        self.hits: list[str] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self):
                recorder.hits.append(f"{self.command} {self.path}")
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_CONNECT = do_POST = _answer

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_all_ok(tmp_path, server, ws):
    require_sandbox()
    r = doctor(
        tmp_path,
        ws,
        "--base-url",
        server.url,
        "--api-key-env",
        "TALOS_TEST_KEY",
        env=env_for(tmp_path, TALOS_TEST_KEY="k"),
    )
    assert r.returncode == 0, r.stdout
    assert not lines(r.stdout, "problem"), r.stdout
    for expected in (
        "takes a write and reads it back and its pages are sound",
        "API key in $TALOS_TEST_KEY",
        f"model endpoint {server.url} answers",
        "command sandbox: bubblewrap",
    ):
        assert expected in r.stdout, r.stdout


def test_no_key_for_a_remote_endpoint_contacts_nothing(tmp_path, ws):
    """Through a recording proxy: without a key nothing reaches it; with one, the models list
    does (so the test would see a request if one were sent)."""
    proxy = Recorder(b'{"object": "list", "data": []}', "application/json")
    try:
        base = ["--base-url", "http://models.doctor.test/v1"]
        env = env_for(tmp_path, HTTP_PROXY=proxy.url, http_proxy=proxy.url)
        env.pop("NO_PROXY", None)
        env.pop("no_proxy", None)
        r = doctor(tmp_path, ws, *base, env=env)
        assert r.returncode == 1
        assert (
            "problem no API key in $OPENAI_API_KEY: export it, or use --base-url for a local server"
        ) in r.stdout
        assert proxy.hits == []
        keyed = doctor(tmp_path, ws, *base, env={**env, "OPENAI_API_KEY": "k"})
        assert "ok      model endpoint http://models.doctor.test/v1 answers" in keyed.stdout
        assert proxy.hits == ["GET http://models.doctor.test/v1/models"]
    finally:
        proxy.close()


def test_a_200_that_is_not_a_model_list_is_a_problem_line(tmp_path, ws):
    page = Recorder(b"<html><body>Sign in to the Wi-Fi</body></html>", "text/html")
    try:
        r = doctor(tmp_path, ws, "--base-url", page.url + "/v1")
    finally:
        page.close()
    assert "Traceback" not in r.stdout + r.stderr and r.returncode == 1
    (line,) = [line for line in lines(r.stdout, "problem") if "model" in line]
    assert "is it an OpenAI-compatible endpoint?" in line, r.stdout
    assert "problem no API key" not in r.stdout  # a local server needs none


def test_corrupted_store(tmp_path, ws, server):
    db = tmp_path / "talos.db"
    store = open_store("sqlite:///" + str(db))
    for i in range(200):  # pages enough that the garbage is past the schema
        store.turn_next(f"agent-{i}")
    store.close()
    page = int.from_bytes(db.read_bytes()[16:18], "big") or 65536
    with db.open("r+b") as fh:
        fh.seek(page)
        fh.write(os.urandom(db.stat().st_size - page))
    r = doctor(tmp_path, ws, "--base-url", server.url)
    # The store's line (without bwrap or rg there are others).
    (line,) = [line for line in lines(r.stdout, "problem") if str(db) in line] or [""]
    assert r.returncode == 1 and "is corrupted; move it aside" in line, r.stdout


def test_store_that_cannot_grow(tmp_path, ws, server):
    """A file size limit at the database's size: it opens, and the probe's write fails."""
    db = tmp_path / "talos.db"
    open_store("sqlite:///" + str(db)).close()
    size = db.stat().st_size

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, resource.RLIM_INFINITY))

    r = doctor(tmp_path, ws, "--base-url", server.url, preexec_fn=limit)
    store_lines = [line for line in r.stdout.splitlines() if str(db) in line]
    assert r.returncode == 1 and len(store_lines) == 1, r.stdout
    assert store_lines[0].startswith("problem disk full"), r.stdout
    assert "free some space" in store_lines[0]


def test_without_a_sandbox_or_ripgrep(tmp_path, server, ws):
    env = env_for(tmp_path, PATH=path_without(tmp_path, "bwrap", "rg"))
    r = doctor(tmp_path, ws, "--base-url", server.url, env=env)
    assert r.returncode == 1
    assert (
        "problem no command sandbox, so every command is asked: bubblewrap (bwrap) is not "
        "installed: apt-get install bubblewrap"
    ) in r.stdout
    assert "problem search: ripgrep (rg) not found" in r.stdout
    assert "apt-get install ripgrep" in r.stdout
    assert "in the sandbox:" not in r.stdout  # its programs are not looked for: no sandbox


def test_python3_node_and_git_are_looked_for_inside_the_sandbox(tmp_path, server, ws):
    """Each of python3, node and git is run in the sandbox: python3 from a pyenv-style home
    (its shim finds its version through PYENV_ROOT) is found; node, installed by nvm under
    the home but not on the PATH doctor was started with, is a problem with the hint."""
    require_sandbox()
    home = tmp_path / "home"
    for path, text in {
        home / ".pyenv" / "shims" / "python3": '#!/bin/sh\nexec "$PYENV_ROOT/versions/3.12.0'
        '/bin/python3" "$@"\n',
        home / ".pyenv" / "versions" / "3.12.0" / "bin" / "python3": "#!/bin/sh\necho Py-fake\n",
        home / ".nvm" / "versions" / "node" / "v20.0.0" / "bin" / "node": "#!/bin/sh\n",
    }.items():
        path.parent.mkdir(parents=True)
        path.write_text(text)
        path.chmod(0o755)
    shims = home / ".pyenv" / "shims"
    env = env_for(tmp_path, HOME=str(home), PATH=f"{shims}:{path_without(tmp_path, 'node')}")
    env.pop("PYENV_ROOT", None)
    r = doctor(tmp_path, ws, "--base-url", server.url, env=env)
    assert f"ok      in the sandbox: python3 is {shims}/python3 (Py-fake)\n" in r.stdout, r.stdout
    (node,) = lines(r.stdout, "problem in the sandbox: node")
    assert node.startswith("problem in the sandbox: node is not on the PATH Talos was started")
    assert "installed at ~/.nvm/versions/node/v20.0.0/bin/node: start Talos" in node, node
    (git,) = lines(r.stdout, "ok      in the sandbox: git is ")
    assert "(git version " in git, r.stdout
