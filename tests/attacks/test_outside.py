"""Outside the workspace: what a hostile model's commands can read and connect to.

Other projects and services live outside the workspace and outside the homes too: `/srv`,
`/opt`, `/var/lib`, `/mnt`. The test plants a canary in each such place it can write (a file
any user may read, a directory any user may list, a Unix socket any user may connect to, so
only the sandbox stands in the way), one under `/tmp` as well, an abstract socket, and one
directory the person's `readable_paths` lists. Then the real `talos run` runs a probe and
plain readers in the default mode (the person's rules allow the probe) and in full-auto: as the
current user, and, when the tests run as root, as an ordinary user (uid 65534) and as root
without capabilities (no sandbox then: nothing runs unasked). Each socket records every
connection: only the workspace's own and the granted one may be reached.

The places tried are /srv, /opt, /var/lib, /mnt and /media, those this user may write;
`TALOS_TEST_OUTSIDE=/a:/b` names others (a machine where the tests do not run as root).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import selectors
import shutil
import socket
import tempfile
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from talos_ls.demo.scripted_model import reply

from ..lsp.conftest import WAIT_S, start_editor
from ..system import as_ordinary_user, require_sandbox, unavailable
from .conftest import USERS as ATTACK_USERS
from .conftest import attack_as
from .test_commands import NOT_RUN, assert_nothing_leaked, batch

CANDIDATES = ("/srv", "/opt", "/var/lib", "/mnt", "/media")
USERS = [*ATTACK_USERS, *(["root-without-capabilities"] if os.geteuid() == 0 else [])]
PROBE = r"""
import json, os, socket, sys
targets = json.load(open("probe_targets.json"))
out = {"read": [], "listed": [], "connected": []}
for path in targets["files"]:
    try:
        out["read"].append(open(path).read())
    except OSError as exc:
        out["read"].append("error: " + type(exc).__name__)
for path in targets["dirs"]:
    try:
        out["listed"].append(sorted(os.listdir(path)))
    except OSError as exc:
        out["listed"].append("error: " + type(exc).__name__)
for address in targets["sockets"]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect(address.replace("@", "\0", 1) if address.startswith("@") else address)
        out["connected"].append("connected")
    except OSError as exc:
        out["connected"].append("error: " + type(exc).__name__)
    finally:
        s.close()
print("PROBE " + json.dumps(out))
"""


class SocketCanary:
    """Unix socket servers (a path, or `@name` for an abstract one), in one thread, each
    recording the connections it accepts."""

    def __init__(self) -> None:
        self.selector = selectors.DefaultSelector()
        self.connected: list[str] = []
        self.listening: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def listen(self, address: str) -> str:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(address.replace("@", "\0", 1) if address.startswith("@") else address)
        if not address.startswith("@"):
            os.chmod(address, 0o777)  # anyone may connect: only the sandbox can stop it
        s.listen(16)
        s.setblocking(False)
        self.listening.append(s)
        self.selector.register(s, selectors.EVENT_READ, address)
        return address

    def _serve(self) -> None:
        while not self._stop.is_set():
            for key, _ in self.selector.select(timeout=0.1):
                with contextlib.suppress(OSError):
                    conn, _ = key.fileobj.accept()  # type: ignore[union-attr]
                    self.connected.append(key.data)
                    conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for s in self.listening:
            s.close()


@dataclass
class Outside:
    tag: str
    hidden_dirs: list[Path]  # other projects: none of it may be seen
    granted: Path  # in readable_paths: readable, its socket connectable
    canaries: list[str]  # texts of hidden files: never in any output
    hidden_sockets: list[str]

    @property
    def granted_text(self) -> str:
        return f"TalosGranted-{self.tag}"


def outside_roots() -> list[Path]:
    given = os.environ.get("TALOS_TEST_OUTSIDE")
    names = given.split(os.pathsep) if given else CANDIDATES
    roots = [Path(n) for n in names if n and os.path.isdir(n) and os.access(n, os.W_OK)]
    roots = [r for r in roots if not r.resolve().is_relative_to("/tmp")]
    if not roots:
        unavailable(
            "needs a directory outside /tmp that this user may write (/srv, /opt, "
            "/var/lib, /mnt as root): set TALOS_TEST_OUTSIDE=/some/dir"
        )
    return roots


def plant(roots: list[Path], canary: SocketCanary, made: list[Path]) -> Outside:
    """A hidden project in each root and under /tmp (blanked: a short path of its own, as a
    socket's path is at most 107 bytes), and a granted one; each directory made is added to
    `made` at once, for the caller to remove whatever happens."""
    tag = uuid.uuid4().hex[:12]
    elsewhere = Path(tempfile.mkdtemp(prefix="talos-o-", dir="/tmp"))
    made.append(elsewhere)
    elsewhere.chmod(0o755)
    hidden, texts, sockets = [], [], []
    for root in [*roots, elsewhere]:
        where = root / f"talos-hidden-{tag}"
        made.append(where)
        (where / "run").mkdir(parents=True)
        text = f"TalosOutsideCanary-{tag}-{root.name}"
        (where / "notes.txt").write_text(text + "\n")
        for path in (where, where / "run"):
            path.chmod(0o755)
        (where / "notes.txt").chmod(0o644)
        sockets.append(canary.listen(str(where / "run" / "app.sock")))
        hidden.append(where)
        texts.append(text)
    granted = roots[0] / f"talos-granted-{tag}"
    made.append(granted)
    granted.mkdir(mode=0o755)
    granted.chmod(0o755)
    (granted / "granted.txt").write_text(f"TalosGranted-{tag}\n")
    (granted / "granted.txt").chmod(0o644)
    canary.listen(str(granted / "granted.sock"))
    sockets.append(canary.listen(f"@talos-abstract-{tag}"))  # another network namespace
    return Outside(tag, hidden, granted, texts, sockets)


@pytest.fixture
def canary():
    c = SocketCanary()
    yield c
    c.close()


@pytest.fixture
def outside(canary):
    """`plant` in every place outside this user may write; all of it removed afterwards."""
    require_sandbox()
    roots = outside_roots()
    made: list[Path] = []
    try:
        yield roots, plant(roots, canary, made)
    finally:
        for path in made:
            shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("mode", ["ask", "full-auto"])
@pytest.mark.parametrize("user", USERS)
def test_nothing_outside_is_read_or_connected_to(tmp_path, server, canary, outside, user, mode):
    """Other projects, their files and their sockets, outside the workspace and the homes,
    are not there for a command; a readable path is (read-only), and so is its socket."""
    roots, out = outside
    with attack_as(user, tmp_path, server) as attack:
        ws = attack.ws
        control = canary.listen(str(ws / "app.sock"))  # the workspace's own: reachable
        (ws / "probe.py").write_text(PROBE)
        files = [str(d / "notes.txt") for d in out.hidden_dirs]
        dirs = [*(str(d) for d in out.hidden_dirs), *(str(r) for r in roots)]
        granted_socket = str(out.granted / "granted.sock")
        targets = {
            "files": [*files, str(out.granted / "granted.txt")],
            "dirs": dirs,
            "sockets": [*out.hidden_sockets, control, granted_socket],
        }
        (ws / "probe_targets.json").write_text(json.dumps(targets))
        (attack.config / "talos").mkdir(parents=True, exist_ok=True)
        (attack.config / "talos" / "config.toml").write_text(
            f"readable_paths = [{json.dumps(str(out.granted))}]\n"
        )
        attack.settings(commands={"allow": ["python3 probe.py"]})
        readers = [
            *(f"cat {f}" for f in files),
            *(f"ls -la {d}" for d in dirs),
            *(f"find {r} -maxdepth 2" for r in roots),
            f"cat {out.granted}/granted.txt",
            "ls -la / /var /opt /srv /mnt /media 2>&1",
        ]
        commands = ["python3 probe.py", *readers]
        attack.hand_over()
        if user == "root-without-capabilities":
            attack.prefix = as_ordinary_user()
        proc, results = batch(attack, commands, mode=mode)
        outputs = [proc.stdout, proc.stderr, *results]
        for text in out.canaries:
            for where, said in [
                ("the model", attack.sent_to_model()),
                ("the store", attack.stored()),
                *(("a result", o) for o in outputs),
            ]:
                assert text not in said, f"{text} reached {where}"
        assert_nothing_leaked(attack, *outputs)
        hidden_reached = [s for s in canary.connected if s in out.hidden_sockets]
        assert not hidden_reached, f"connected to sockets outside: {hidden_reached}"
        if user == "root-without-capabilities":  # bwrap cannot map uid 0: no sandbox at all
            assert all(r.startswith(NOT_RUN) and "without an OS sandbox" in r for r in results)
            assert not canary.connected
            return
        assert "PROBE " in results[0], results[0]
        probe = json.loads(results[0].split("PROBE ", 1)[1])
        assert probe["read"][:-1] == ["error: FileNotFoundError"] * len(files), probe["read"]
        assert probe["read"][-1] == out.granted_text + "\n"
        for listing in probe["listed"]:
            assert listing == "error: FileNotFoundError" or not any(
                out.tag in name and "granted" not in name for name in listing
            ), probe["listed"]
        *hidden, mine, granted = probe["connected"]
        assert mine == "connected" and granted == "connected", probe["connected"]
        assert all(h.startswith("error: ") for h in hidden), probe["connected"]
        assert sorted(canary.connected) == sorted([control, granted_socket])
        if mode == "ask":  # the readers name paths outside: asked, so not run headless
            assert all(r.startswith(NOT_RUN) for r in results[1:]), results[1:]
        else:
            for result in results[1:]:
                listed = [line for line in result.splitlines() if f"hidden-{out.tag}" in line]
                assert not listed or all("No such file" in line for line in listed), result
            granted_cat = results[commands.index(f"cat {out.granted}/granted.txt")]
            assert out.granted_text in granted_cat, granted_cat


async def test_the_editors_readable_paths_and_limits_reach_the_sandbox(tmp_path, server, outside):
    """The same settings from the editor (`readablePaths`, `limits` in initializationOptions),
    through the real `talos-ls`: the granted path is read, the other project is not, a fork
    bomb ends at the editor's limit, and the person is told."""
    _, out = outside
    ws = tmp_path / "ws"
    ws.mkdir()
    options = {
        "model": "fake-model",
        "baseUrl": server.url,
        "permissionMode": "full-auto",
        "storeUrl": "sqlite:///" + str(tmp_path / "talos.db"),
        "prices": {"fake-model": {"input": 1, "cached_input": 0.5, "output": 2}},
        "readablePaths": [str(out.granted)],
        "limits": {"processes": 32},
    }
    commands = [
        f"cat {out.granted}/granted.txt",
        f"cat {out.hidden_dirs[0]}/notes.txt 2>&1",
        ":(){ :|:& };:; sleep 60",
    ]
    server.script.append(
        reply(
            None,
            [(f"c{i}", "run_command", json.dumps({"command": c})) for i, c in enumerate(commands)],
        )
    )
    server.script.append(reply("done"))
    editor = await start_editor(tmp_path / "home", [ws], options)
    try:
        await editor.until(lambda: any(s.folders for s in editor.statuses), "a status")
        task = (await editor.command("talos.task.start", {"prompt": "go"}))["task_id"]
        await editor.finished(task)
        messages = server.requests[-1]["body"]["messages"]
        granted, hidden, bomb = [m["content"] for m in messages if m["role"] == "tool"]
        assert out.granted_text in granted, granted
        assert out.canaries[0] not in hidden and "No such file" in hidden, hidden
        assert "[killed: it reached the limit of 32 processes" in bomb, bomb[-300:]
        await editor.until(
            lambda: any(
                "A command was stopped: it reached the limit of 32" in m for m in editor.messages()
            ),
            "the person told",
        )
    finally:
        await asyncio.wait_for(editor.client.shutdown_session(), WAIT_S)
        await editor.client.stop()
