"""A hostile model against the real `talos run` process and the real sandbox.

Each attack test scripts the model (a real local server speaking the OpenAI streaming API) to
make attacker-chosen tool calls, runs `talos run` as a separate process in a workspace seeded
with bait (secrets in `.env`, a fake home with credential stores, an API key and other secrets
in the environment), and then checks what the model was sent back, what was stored, and what
happened on disk. A test must fail when the defence it covers is removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from talos_ls.store import open_store

from ..system import ORDINARY_UID, as_another_user, give_to, path_without, require_sandbox

TALOS = str(Path(sys.executable).with_name("talos"))
# Bait: none of these may ever reach the model, a transcript or the output.
API_KEY = "sk-proj-TalosBaitKey0123456789abcdefghijklmnop"
OTHER_SECRETS = {
    "GH_PAT": "ghp_TalosBait0123456789abcdefghijklmnopqrstuv",
    "DATABASE_URL": "postgres://app:TalosDbPassw0rd@db.internal:5432/app",
    "LLM_CREDENTIAL_X": "TalosOpaqueCredentialValue42",
}
ENV_FILE_SECRET = "TalosDotEnvSecret-7731"
SSH_KEY_MARKER = "TALOS-BAIT-SSH-PRIVATE-KEY"
AWS_MARKER = "TalosBaitAwsSecretAccessKey"
ALL_SECRETS = [
    API_KEY,
    *OTHER_SECRETS.values(),
    "TalosDbPassw0rd",
    ENV_FILE_SECRET,
    SSH_KEY_MARKER,
    AWS_MARKER,
]
# Who runs talos in a test parametrized by user: whoever runs the tests, and when that is root
# an ordinary user as well (the kernel treats root apart: RLIMIT_NPROC, bwrap's setuid checks).
USERS = ["as-is", *(["uid-65534"] if os.geteuid() == 0 else [])]


def call(name: str, **arguments) -> tuple[str, str]:
    """One tool call for `reply(None, [...])`: (name, JSON arguments); ids are added later."""
    return name, json.dumps(arguments)


@dataclass
class Attack:
    tmp: Path
    server: object
    ws: Path
    home: Path
    config: Path
    state: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    path: str | None = None  # PATH for the talos process (None: the current one)
    prefix: list[str] = field(default_factory=list)  # what starts talos (another user: setpriv)

    @property
    def store_url(self) -> str:
        return "sqlite:///" + str(self.state / "talos.db")

    def hand_over(self) -> None:
        """The tree the test built (as root) given to the ordinary user talos runs as."""
        if self.prefix == as_another_user() and self.prefix:
            give_to(ORDINARY_UID, self.tmp)

    def env(self) -> dict[str, str]:
        keep = ("PATH", "LANG", "LC_ALL", "TERM", "PYTHONPATH")  # PYTHONPATH: a scratch copy
        env = {k: v for k, v in os.environ.items() if k in keep}
        env.update(
            HOME=str(self.home),
            XDG_CONFIG_HOME=str(self.config),
            XDG_STATE_HOME=str(self.state),
            XDG_DATA_HOME=str(self.state / "data"),
            XDG_CACHE_HOME=str(self.state / "cache"),
            TALOS_STORE_URL=self.store_url,
            OPENAI_API_KEY=API_KEY,
            COLUMNS="200",
            **OTHER_SECRETS,
        )
        if self.path is not None:
            env["PATH"] = self.path
        env.update(self.extra_env)
        return env

    def script(self, *steps) -> None:
        """Queue model turns: each a `reply(...)` dict, or a list of `call(...)` tuples (tool
        calls, ids added), or a string (a final answer)."""
        from ..fake_openai import reply

        for n, step in enumerate(steps):
            if isinstance(step, str):
                self.server.script.append(reply(step))
            elif isinstance(step, list):
                calls = [(f"c{n}_{i}", name, args) for i, (name, args) in enumerate(step)]
                self.server.script.append(reply(None, calls))
            else:
                self.server.script.append(step)

    def run(
        self,
        *extra: str,
        request: str = "do the task",
        timeout: float = 90,
        mode: str | None = None,
        prefix: list[str] | None = None,
    ) -> subprocess.CompletedProcess:
        """`talos run --json` in the workspace, headless (no terminal: nobody approves);
        `prefix` starts it (`as_ordinary_user()`), else the attack's own (`self.prefix`)."""
        start = self.prefix if prefix is None else prefix
        args = [
            *start,
            TALOS,
            "run",
            request,
            "--workspace",
            str(self.ws),
            "--base-url",
            self.server.url,
            "--model",
            "fake-model",
            "--json",
            *extra,
        ]
        if mode:
            args += ["--mode", mode]
        return subprocess.run(
            args,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            env=self.env(),
            cwd=self.tmp,
        )

    def result(self, proc: subprocess.CompletedProcess) -> dict:
        assert proc.stdout.strip(), f"no JSON on stdout; stderr:\n{proc.stderr}"
        return json.loads(proc.stdout)

    # ------------------------------------------------------------ evidence
    def tool_results(self) -> list[str]:
        """Every tool result the model was sent, in order (from the last request)."""
        if not self.server.requests:
            return []
        messages = self.server.requests[-1]["body"]["messages"]
        return [m["content"] for m in messages if m["role"] == "tool"]

    def sent_to_model(self) -> str:
        return json.dumps([r["body"] for r in self.server.requests], ensure_ascii=False)

    def stored(self) -> str:
        """Every task record (transcripts included) in the store, as JSON text."""
        store = open_store(self.store_url)
        try:
            agent = str(self.ws.resolve())
            return json.dumps(store.task_list(agent), ensure_ascii=False)
        finally:
            store.close()

    def assert_no_secret_leaked(self, *outputs: str) -> None:
        for where, text in [
            ("model", self.sent_to_model()),
            ("store", self.stored()),
            *((f"output {i}", o) for i, o in enumerate(outputs)),
        ]:
            for secret in ALL_SECRETS:
                assert secret not in text, f"{secret!r} reached the {where}"

    def settings(self, **rules) -> None:
        """The person's own rules for this workspace (user config dir, outside the repo)."""
        from talos_ls.gates.permissions import workspace_settings_path

        path = workspace_settings_path(self.ws.resolve(), self.config / "talos")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(rules))


@pytest.fixture
def attack(tmp_path, server) -> Attack:
    """A workspace full of bait, a fake home with credential stores, secrets in the env."""
    return seed(tmp_path, server)


@contextlib.contextmanager
def attack_as(user: str, tmp_path: Path, server: object) -> Iterator[Attack]:
    """The `attack` tree, for `user` of `USERS`: under tmp_path, or for uid 65534 under a
    directory of /tmp it may enter (tmp_path's parents are root's alone), removed after. The
    test builds the tree, then calls `attack.hand_over()`."""
    if user != "uid-65534":
        yield seed(tmp_path, server)
        return
    base = Path(tempfile.mkdtemp(prefix="talos-ordinary-", dir="/tmp"))
    try:
        base.chmod(0o755)
        attack = seed(base, server)
        attack.prefix = as_another_user()
        yield attack
    finally:
        shutil.rmtree(base, ignore_errors=True)


def seed(tmp_path: Path, server: object) -> Attack:
    """The `attack` fixture's tree under `tmp_path` (a test that needs it elsewhere)."""
    ws, home = tmp_path / "ws", tmp_path / "home"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "app.py").write_text("def main():\n    return 1\n")
    (ws / ".env").write_text(f"API_TOKEN={ENV_FILE_SECRET}\n")
    (ws / "src" / ".env.local").write_text(f"OTHER={ENV_FILE_SECRET}\n")
    (ws / ".gitignore").write_text(".env\n")
    subprocess.run(["git", "init", "-q", str(ws)], check=True, capture_output=True)
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(
        f"-----BEGIN OPENSSH PRIVATE KEY-----\n{SSH_KEY_MARKER}\n"
    )
    (home / ".aws").mkdir()
    (home / ".aws" / "credentials").write_text(f"aws_secret_access_key = {AWS_MARKER}\n")
    (home / ".netrc").write_text("machine x login me password TalosNetrcPass\n")
    (tmp_path / "state").mkdir()
    return Attack(tmp_path, server, ws, home, tmp_path / "config", tmp_path / "state")


@pytest.fixture
def sandboxed() -> str:
    """The real bubblewrap sandbox (skips with the install command without it, fails instead
    under TALOS_TEST_REQUIRE_ALL=1)."""
    return require_sandbox()


@pytest.fixture
def no_bwrap(attack) -> Attack:
    """The same attack with bwrap hidden from PATH: the fallback, not a skip."""
    attack.path = path_without(attack.tmp, "bwrap")
    return attack
