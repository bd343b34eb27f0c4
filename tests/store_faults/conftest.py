"""Storage faults under the real `talos-ls` process, driven by a real LSP client: the fault is
made for real (a file size limit on the server process, a read-only or full tmpfs, garbage
pages, a Redis server killed, slowed by a proxy, restarted), and the daemon must go on
answering, ask nothing, say once what is wrong, and take the store back without a restart."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from talos_ls.demo.scripted_model import ScriptedModelServer, reply

from ..lsp.conftest import WAIT_S, Editor, start_editor

UNAVAILABLE = "Talos's store is unavailable"
BACK = "Talos's store is available again"
RECOVERY_S = 60.0  # generous: the probe backs off to 5 s, and others run tests too


@pytest.fixture(name="model")
def _model():
    server = ScriptedModelServer()
    yield server
    server.close()


@pytest.fixture(name="ws")
def _ws(tmp_path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("def main():\n    return 1\n")
    return root


CONFLICT = {"AGENTS.md": "- Tests use unittest\n", "CLAUDE.md": "- Tests use pytest\n"}


def conflict(ws: Path) -> None:
    """Two rules files that disagree: the next turn has a question to deliver."""
    for name, text in CONFLICT.items():
        (ws / name).write_text(text)


def server_pid(editor: Editor) -> int:
    return editor.client._server.pid  # type: ignore[union-attr]


def store_of(status: Any) -> Any:
    return status.store


def said(editor: Editor, text: str) -> list[str]:
    return [m for m in editor.messages() if text in m]


async def degraded(editor: Editor, *expected: str) -> str:
    """Wait for `talos/status` to say the store is unavailable; its problem, which must name
    each of `expected`."""
    status = await editor.until(
        lambda: (s := editor.last_status()) is not None and not s.store.available and s,
        "a degraded store in talos/status",
        RECOVERY_S,
    )
    problem = status.store.problem
    for part in expected:
        assert part in problem, problem
    return problem


async def recovered(editor: Editor) -> None:
    await editor.until(
        lambda: (
            (s := editor.last_status()) is not None
            and s.store.available
            and s.store.problem is None
            and said(editor, BACK)
        ),
        "the store back in talos/status",
        RECOVERY_S,
    )


async def still_answers(editor: Editor, ws: Path) -> None:
    """The LSP surface that needs no store keeps answering while it fails."""
    app = ws / "src" / "app.py"
    uri = editor.open(app) if app.as_uri() not in editor.versions else app.as_uri()
    params = types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(
            start=types.Position(line=0, character=0), end=types.Position(line=1, character=0)
        ),
        context=types.CodeActionContext(diagnostics=[]),
    )
    actions = await asyncio.wait_for(editor.client.text_document_code_action_async(params), WAIT_S)
    assert any("Ask Talos" in a.title for a in actions or [])
    status = await editor.command("talos.status", {})
    assert status["store"]["available"] is False and status["store"]["problem"]
    assert isinstance(await editor.command("talos.task.list", {}), list)


async def refused(editor: Editor, command: str, argument: dict, *expected: str) -> str:
    """The command is answered with an error naming the problem, not acknowledged."""
    with pytest.raises(Exception) as caught:
        await editor.command(command, argument)
    text = str(caught.value)
    for part in expected:
        assert part in text, text
    return text


async def task_runs(editor: Editor, model: Any, prompt: str = "write the tests") -> str:
    model.script.append(reply("Done.", delay=0.05))
    task_id = (await editor.command("talos.task.start", {"prompt": prompt}))["task_id"]
    await editor.finished(task_id)
    assert (await editor.task(task_id))["state"] == "done"
    return task_id


async def start(home: Path, ws: Path, model: Any, url: str, **options: Any) -> Editor:
    options = {
        "model": "fake-model",
        "baseUrl": model.url,
        "storeUrl": url,
        "prices": {"fake-model": {"input": 1, "cached_input": 0.5, "output": 2}},
        **options,
    }
    editor = await start_editor(home, [ws], options)
    await editor.until(lambda: editor.statuses, "the first status")
    return editor


# ------------------------------------------------------------------- tmpfs
def can_mount() -> bool:
    if shutil.which("mount") is None:
        return False
    probe = Path("/tmp") / f"talos-mount-probe-{time.monotonic_ns()}"
    probe.mkdir()
    try:
        ok = (
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe)], capture_output=True
            ).returncode
            == 0
        )
        if ok:
            subprocess.run(["umount", str(probe)], check=True)
        return ok
    finally:
        probe.rmdir()


@pytest.fixture
def tmpfs(tmp_path):
    """A small tmpfs of our own, to fill or make read-only under the server (needs the right
    to mount: root in CI's container)."""
    if not can_mount():
        pytest.skip("cannot mount a tmpfs here (not root); the RLIMIT_FSIZE test covers disk full")
    where = tmp_path / "mnt"
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(where)], check=True)
    yield where
    subprocess.run(["umount", "-l", str(where)], check=False)


def remount(where: Path, mode: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{mode}", str(where)], check=True)


# ------------------------------------------------------------ a slow proxy
class DelayingProxy:
    """A TCP proxy to `port` that holds each chunk the client sends for `delay` seconds."""

    def __init__(self, port: int) -> None:
        self.upstream = port
        self.delay = 0.0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.upstream))
            except OSError:
                client.close()
                continue
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, delayed: bool) -> None:
        try:
            while chunk := src.recv(65536):
                if delayed and self.delay:
                    time.sleep(self.delay)
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()

    def close(self) -> None:
        self.closed = True
        self.listener.close()
