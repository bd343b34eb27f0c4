"""The real `talos-ls --acp`, driven by a client nobody here wrote: the official ACP TypeScript
SDK (`@agentclientprotocol/sdk`, pinned in package-lock.json), through `driver.mjs`.

The SDK is installed once into a cache directory (`npm ci` from the lock file; a lock held
across the xdist workers), or the tests skip with the command that installs it. A test writes
a scenario (the client's scripted answers and a list of steps), `Acp.drive` runs the driver on
it and returns the `Log` of every message both ways; `Log.assert_clean` fails on anything the
schema refused, a line on the agent's stdout that is not JSON, or an agent that did not exit
when the client went away.
"""

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
from typing import Any

import pytest

from talos_ls.agent.workspace import agent_id
from talos_ls.gates.question_queue import QuestionCandidate
from talos_ls.memory.facts import FactStore
from talos_ls.store import open_store

from ..lsp.conftest import server_env
from ..system import require_binary, unavailable

HERE = Path(__file__).resolve().parent
DRIVER = HERE / "driver.mjs"
LOCK = HERE / "package-lock.json"
SDK = "@agentclientprotocol/sdk"
SDK_VERSION = "2.4.0"
INSTALL = "cd tests/acp_ts && npm ci"
NODE_INSTALL = "apt-get install -y nodejs npm"
WAIT_S = 60.0  # generous: the driver's own waits are 60 s; a stuck agent fails, never hangs
# The agent under test: this checkout's `talos-ls`, or $TALOS_TEST_ACP_AGENT (another build's,
# to run these tests against it).
TALOS_LS = os.environ.get("TALOS_TEST_ACP_AGENT") or str(Path(sys.executable).with_name("talos-ls"))
PRICES = {"input": 1.0, "cached_input": 0.5, "output": 2.0}  # USD per million tokens


def cache_dir() -> Path:
    """Where the SDK is installed: $TALOS_ACP_TS_DIR, else ~/.cache/talos-acp-ts, one directory
    per lock file (a new pin installs beside the old one)."""
    root = Path(os.environ.get("TALOS_ACP_TS_DIR") or Path.home() / ".cache" / "talos-acp-ts")
    return root / hashlib.sha256(LOCK.read_bytes()).hexdigest()[:16]


def _installed(where: Path) -> bool:
    manifest = where / "node_modules" / "@agentclientprotocol" / "sdk" / "package.json"
    with contextlib.suppress(OSError, ValueError):
        return json.loads(manifest.read_text())["version"] == SDK_VERSION
    return False


@pytest.fixture(scope="session")
def sdk_modules() -> Path:
    """The node_modules holding the pinned SDK: `npm ci` into the cache the first time."""
    require_binary("node", NODE_INSTALL)
    npm = require_binary("npm", NODE_INSTALL)
    where = cache_dir()
    where.mkdir(parents=True, exist_ok=True)
    with (where / ".install-lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one worker installs, the others wait for it
        if not _installed(where):
            shutil.copy(HERE / "package.json", where / "package.json")
            shutil.copy(LOCK, where / "package-lock.json")
            try:
                done = subprocess.run(
                    [npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts"],
                    cwd=where,
                    capture_output=True,
                    text=True,
                    timeout=300,
                )
                failed = done.returncode != 0
                lines = (done.stderr or done.stdout).strip().splitlines()
                why = [ln for ln in lines if "complete log" not in ln][:2] if failed else []
            except subprocess.TimeoutExpired:
                failed, why = True, ["npm ci took more than 300 s"]
            if failed or not _installed(where):
                unavailable(f"needs {SDK}@{SDK_VERSION} from npm ({' '.join(why)}): {INSTALL}")
    return where / "node_modules"


class Log:
    """What the driver saw: `messages` both ways ({dir, at, msg}), `results` by step name,
    the client requests the agent made and what the script answered."""

    def __init__(self, data: dict[str, Any], stderr: Path) -> None:
        self.data = data
        self.stderr = stderr
        self.messages: list[dict[str, Any]] = data["messages"]
        self.results: dict[str, Any] = data["results"]
        self.vars: dict[str, Any] = data["vars"]
        self.client_requests: list[dict[str, Any]] = data["clientRequests"]
        self.writes: list[dict[str, Any]] = data["writes"]

    def __repr__(self) -> str:
        return f"<Log of {len(self.messages)} messages; stderr in {self.stderr}>"

    def result(self, name: str) -> Any:
        """A step's result; fails with the error when it had one."""
        got = self.results.get(name)
        assert got is not None, f"step {name} never finished: {self.summary()}"
        assert "result" in got, f"step {name} failed: {got['error']}; {self.summary()}"
        return got["result"]

    def error(self, name: str) -> dict[str, Any]:
        got = self.results.get(name)
        assert got is not None and "error" in got, f"step {name} did not fail: {got}"
        return got["error"]

    def updates(self, session: str | None = None, kind: str | None = None) -> list[dict]:
        """The `session/update` updates (params.update), in order, of a session (a name of
        the scenario's or an id) and kind."""
        sid = self.vars.get(session, session) if session else None
        out = []
        for m in self.messages:
            if m["dir"] != "in" or m["msg"].get("method") != "session/update":
                continue
            params = m["msg"].get("params") or {}
            update = params.get("update") or {}
            if sid is not None and params.get("sessionId") != sid:
                continue
            if kind is not None and update.get("sessionUpdate") != kind:
                continue
            out.append({**update, "_at": m["at"]})
        return out

    def text(self, session: str | None = None, kind: str = "agent_message_chunk") -> str:
        """The text of a session's chunks of `kind`, joined."""
        return "".join(
            u["content"].get("text", "")
            for u in self.updates(session, kind)
            if u.get("content", {}).get("type") == "text"
        )

    def requests(self, method: str) -> list[dict[str, Any]]:
        return [r for r in self.client_requests if r["method"] == method]

    def summary(self) -> str:
        tail = self.stderr.read_text(errors="replace")[-3000:] if self.stderr.exists() else ""
        return (
            f"driver error: {self.data.get('driverError')}; exit {self.data.get('exit')}; "
            f"unexpected client requests: {self.data.get('unexpected')}; agent stderr tail:\n"
            f"{tail}"
        )

    def assert_clean(self, allow_sdk: tuple[str, ...] = ()) -> None:
        """Every message passed the schema, stdout held only JSON lines, the script had an
        answer for every request, the steps ran, and the agent exited by itself with 0 when its
        stdin closed. `allow_sdk`: complaints of the SDK's a test expects (exact texts)."""
        errors = [
            e
            for e in self.data["schemaErrors"]
            if not (e["source"] == "sdk" and e.get("text") in allow_sdk)
        ]
        assert errors == [], errors
        assert self.data["stdoutNotJson"] == [], self.data["stdoutNotJson"]
        assert self.data["driverError"] is None, self.summary()
        assert self.data["unexpected"] == [], self.summary()
        assert self.data["killed"] is None, self.summary()
        assert self.data["exit"] is not None and self.data["exit"]["code"] == 0, self.summary()


class Acp:
    """One test's agent: a home (XDG dirs, the user's config.toml: the scripted model and its
    prices), a SQLite store, and the scripted model (`server`)."""

    def __init__(self, tmp_path: Path, model: Any, modules: Path) -> None:
        self.tmp = tmp_path
        self.model = model
        self.modules = modules
        self.home = tmp_path / "home"
        self.store_url = "sqlite:///" + str(tmp_path / "talos.db")
        self.runs = 0
        self.config: dict[str, Any] = {}

    def workspace(self, name: str = "ws", files: dict[str, str] | None = None) -> Path:
        root = self.tmp / name
        (root / "src").mkdir(parents=True, exist_ok=True)
        (root / ".git").mkdir(exist_ok=True)  # a project root, as the person's would be
        for rel, text in {"src/app.py": "def main():\n    return 1\n", **(files or {})}.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        return root

    def env(self) -> dict[str, str]:
        env = server_env(self.home)
        env = {k: v for k, v in env.items() if not k.startswith("OPENAI_BASE")}
        env.update(
            {
                "TALOS_STORE_URL": self.store_url,
                "OPENAI_BASE_URL": self.model.url,
                "TALOS_MODEL": "fake-model",
            }
        )
        return env

    def write_config(self) -> None:
        """The user's config.toml: the model, its prices, and the test's settings."""
        path = self.home / "config" / "talos" / "config.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = ['model = "fake-model"', f'base_url = "{self.model.url}"']
        lines += [f"{k} = {json.dumps(v)}" for k, v in self.config.items()]
        lines += ['[prices."fake-model"]'] + [f"{k} = {v}" for k, v in PRICES.items()]
        path.write_text("\n".join(lines) + "\n")

    def drive(
        self,
        steps: list[dict[str, Any]],
        client: dict[str, Any] | None = None,
        argv: list[str] | None = None,
        cwd: Path | None = None,
    ) -> Log:
        """Run the driver: `talos-ls --acp` started by it, the steps, stdin closed, the exit."""
        self.write_config()
        self.runs += 1
        run = self.tmp / f"acp-run-{self.runs}"
        run.mkdir()
        scenario = {
            "argv": argv or [TALOS_LS, "--acp"],
            "cwd": str(cwd or self.tmp),
            "env": self.env(),
            "stderr": str(run / "agent.stderr"),
            "client": client or {},
            "steps": steps,
        }
        (run / "scenario.json").write_text(json.dumps(scenario))
        env = {**os.environ, "ACP_NODE_MODULES": str(self.modules)}
        done = subprocess.run(
            ["node", str(DRIVER), str(run / "scenario.json"), str(run / "log.json")],
            env=env,
            capture_output=True,
            text=True,
            timeout=WAIT_S * 4,
        )
        (run / "driver.stderr").write_text(done.stderr)
        assert done.returncode == 0 and (run / "log.json").exists(), done.stderr[-3000:]
        return Log(json.loads((run / "log.json").read_text()), run / "agent.stderr")

    def confidences(self, ws: Path) -> dict[str, float]:
        """The workspace agent's facts: statement -> confidence (what `talos memory`
        lists), read from the store the agent wrote."""
        store = open_store(self.store_url)
        try:
            facts = FactStore(store).list(agent_id(ws))
        finally:
            store.close()
        return {f.statement: f.confidence for f in facts}

    def questions(self, ws: Path) -> tuple[int | None, list[QuestionCandidate]]:
        """The workspace agent's last delivery turn and every question candidate (what
        `talos questions --all` lists)."""
        store = open_store(self.store_url)
        try:
            agent = agent_id(ws)
            last = store.qq_agents().get(agent)
            return last, [QuestionCandidate(**row) for row in store.qq_list(agent)]
        finally:
            store.close()


@pytest.fixture
def acp(tmp_path, server, sdk_modules) -> Acp:
    return Acp(tmp_path, server, sdk_modules)


def init(name: str = "init", **kw: Any) -> dict[str, Any]:
    return {"do": "initialize", "name": name, **kw}


def new_session(cwd: Path, as_: str = "s", name: str | None = None) -> dict[str, Any]:
    return {"do": "new_session", "cwd": str(cwd), "as": as_, "name": name or f"new-{as_}"}


def prompt(session: str, text: str, name: str, wait: bool = True) -> dict[str, Any]:
    return {"do": "prompt", "session": f"${session}", "text": text, "name": name, "wait": wait}
