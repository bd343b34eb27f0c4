"""MCP servers for the tests: our hostile ones (tests/mcp/hostile), the npm reference servers
(installed once, with `npm ci` from tests/mcp/npm's lock file, into a cache under the home
directory: the sandbox must show them from there), and a Python server from PyPI in a
virtualenv of its own. Each is used as a person configures it: a `mcp.json` in Talos's
config directory."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ..system import require_sandbox, unavailable

HERE = Path(__file__).resolve().parent
HOSTILE = HERE / "hostile" / "server.py"
NPM = HERE / "npm"
TALOS = str(Path(sys.executable).with_name("talos"))
TIME_SERVER = "mcp-server-time==2026.8.18"  # the last on the 1.x SDK (mcp<2)
NPM_INSTALL = f"cd {NPM} && npm ci --ignore-scripts --no-audit --no-fund"


def cache_dir() -> Path:
    """Where the servers are installed, once per machine: under the home directory, as
    `npx` and `uvx` put theirs (TALOS_TEST_MCP_CACHE to move it)."""
    given = os.environ.get("TALOS_TEST_MCP_CACHE")
    return Path(given) if given else Path.home() / ".cache" / "talos-tests" / "mcp"


@contextlib.contextmanager
def _locked(path: Path):
    """One installer at a time (the suite runs in parallel workers)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def npm_servers() -> Path:
    """The directory holding node_modules with server-everything and server-filesystem."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        unavailable(f"needs node and npm (apt-get install -y nodejs npm), then: {NPM_INSTALL}")
    lock = (NPM / "package-lock.json").read_bytes()
    where = cache_dir() / ("npm-" + hashlib.sha256(lock).hexdigest()[:16])
    done = where / "node_modules" / ".bin" / "mcp-server-everything"
    with _locked(cache_dir() / "npm.lock"):
        if not done.exists():
            shutil.rmtree(where, ignore_errors=True)
            where.mkdir(parents=True)
            for name in ("package.json", "package-lock.json"):
                shutil.copy(NPM / name, where / name)
            r = subprocess.run(
                ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"],
                cwd=where,
                capture_output=True,
                text=True,
                timeout=600,
            )
            if r.returncode != 0:
                shutil.rmtree(where, ignore_errors=True)
                unavailable(f"npm ci failed ({r.stderr.strip()[-300:]}): {NPM_INSTALL}")
    return where


@pytest.fixture(scope="session")
def time_server() -> Path:
    """`mcp-server-time` from PyPI, in a virtualenv of its own: its program."""
    where = cache_dir() / "time-venv"
    program = where / "bin" / "mcp-server-time"
    install = f"python -m venv {where} && {where}/bin/pip install {TIME_SERVER}"
    with _locked(cache_dir() / "time.lock"):
        if not program.exists():
            shutil.rmtree(where, ignore_errors=True)
            made = subprocess.run(
                [sys.executable, "-m", "venv", str(where)], capture_output=True, timeout=300
            )
            pip = subprocess.run(
                [str(where / "bin" / "pip"), "install", "-q", TIME_SERVER],
                capture_output=True,
                text=True,
                timeout=600,
            )
            if made.returncode != 0 or pip.returncode != 0:
                shutil.rmtree(where, ignore_errors=True)
                unavailable(f"could not install {TIME_SERVER}: {install}")
    return program


@pytest.fixture
def sandbox() -> str:
    return require_sandbox()


def hostile(mode: str, **extra) -> dict:
    """A configuration entry for the hostile server in `mode`."""
    return {"command": sys.executable, "args": [str(HOSTILE), mode], **extra}


class Person:
    """The person's Talos configuration (XDG_CONFIG_HOME under tmp_path): their MCP servers,
    their permission rules, and the environment `talos` runs with."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.config = tmp_path / "config"
        (self.config / "talos").mkdir(parents=True, exist_ok=True)
        self.ws = tmp_path / "ws"
        (self.ws / "src").mkdir(parents=True, exist_ok=True)
        (self.ws / "src" / "app.py").write_text("def main():\n    return 1\n")

    def servers(self, servers: dict) -> None:
        (self.config / "talos" / "mcp.json").write_text(json.dumps({"mcpServers": servers}))

    def allow(self, *tools: str) -> None:
        (self.config / "talos" / "permissions.json").write_text(
            json.dumps({"tools": {"allow": list(tools)}})
        )

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TALOS_", "OPENAI_"))}
        env.update(
            TALOS_STORE_URL="sqlite:///" + str(self.tmp / "talos.db"),
            COLUMNS="200",
            XDG_CONFIG_HOME=str(self.config),
            XDG_STATE_HOME=str(self.tmp / "state"),
            XDG_DATA_HOME=str(self.tmp / "data"),
            **extra,
        )
        return env

    def run_argv(self, server, request: str = "use the tool", *more: str) -> list[str]:
        return [
            TALOS,
            "run",
            request,
            "--workspace",
            str(self.ws),
            "--base-url",
            server.url,
            "--model",
            "fake-model",
            *more,
        ]

    def talos(self, *args: str, timeout: float = 120, **env: str):
        """`talos ARGS --workspace WS`, as the person runs it."""
        return subprocess.run(
            [TALOS, *args, "--workspace", str(self.ws)],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            env=self.env(**env),
        )

    def run(self, server, *more: str, timeout: float = 120, **env: str):
        return subprocess.run(
            self.run_argv(server, "use the tool", *more),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            env=self.env(**env),
        )


@pytest.fixture
def person(tmp_path) -> Person:
    return Person(tmp_path)


def tool_results(server) -> list[str]:
    """The tool results the model was sent, in order (from its last request)."""
    last = server.requests[-1]["body"]["messages"]
    return [m["content"] for m in last if m.get("role") == "tool"]


def offered(server, index: int = 0) -> dict[str, dict]:
    """The tools offered to the model in request `index`, by name."""
    tools = server.requests[index]["body"].get("tools", [])
    return {t["function"]["name"]: t["function"] for t in tools}
