"""The language server's one error path, on the real process: an expected failure
(`errors.TalosError`) reaches the client with its message; anything else is a bug, logged with
its traceback (never its message, which may quote what was sent), told to the person as an
internal error with where the log is, and the server goes on serving."""

from __future__ import annotations

import queue
import time
import uuid
from pathlib import Path

from ..fuzz.raw import RawServer

BUGGY = Path(__file__).with_name("buggy_server.py")


def _shown(server: RawServer, until: str, timeout: float = 30.0) -> list[str]:
    """The `window/showMessage` texts sent until one containing `until` arrives (others come
    too: a machine without bwrap is told so once), or `timeout` passes."""
    texts: list[str] = []
    deadline = time.monotonic() + timeout
    while not any(until in t for t in texts) and time.monotonic() < deadline:
        try:
            message = server.notifications.get(timeout=0.5)
        except queue.Empty:
            continue
        if message["method"] == "window/showMessage":
            texts.append(message["params"]["message"])
    return texts


def test_an_expected_failure_reaches_the_client_with_its_message(tmp_path, ws, options):
    home = tmp_path / "home"
    home.mkdir()
    (home / "not-a-directory").write_text("")  # the store's file cannot be made under it
    url = "sqlite:///" + str(home / "not-a-directory" / "talos.db")
    server = RawServer(home)
    try:
        server.initialize(ws, {**options, "storeUrl": url})
        answer = server.command("talos.memory.list", {})
        error = answer["error"]  # a StoreError: -32603, with what is wrong
        assert error["code"] == -32603, answer
        assert error["message"].startswith("talos.memory.list: Talos's store is unavailable")
        assert "internal error" not in error["message"]
        assert server.command("talos.task.list", {})["result"] == []
    finally:
        assert server.close() == 0


def test_a_bug_is_logged_with_its_traceback_told_as_an_internal_error_and_serving_goes_on(
    tmp_path, ws, options
):
    home = tmp_path / "home"
    log = tmp_path / "talos-ls.log"
    marker = f"TalosBugMarker{uuid.uuid4().hex[:8]}"
    told = f"internal error (a bug); its traceback is in {log}"
    server = RawServer(home, [str(BUGGY), "--log-file", str(log)])
    try:
        server.initialize(ws, options)
        server.wait_ready()
        for _ in range(2):  # twice: the first left the server whole
            error = server.command("talos.test.bug", {"key": marker})["error"]
            assert error == {"code": -32603, "message": told}, error  # no traceback sent
        server.notify("talos/testBug", {"note": marker})
        shown = _shown(server, "internal error")
        assert [t for t in shown if "internal error" in t] == [f"Talos: {told}"], shown
        assert not [t for t in shown if marker in t], shown
        assert isinstance(server.command("talos.task.list", {})["result"], list)
        assert server.proc.poll() is None
    finally:
        assert server.close() == 0
    text = log.read_text()
    assert "in _lookup" in text and "KeyError (message withheld)" in text, text
    assert "in _notified" in text and "TypeError (message withheld)" in text, text
    assert marker not in text
