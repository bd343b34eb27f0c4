"""A raw LSP client that answers the server's own requests as a test tells it: at once, never
(held, and answered later by the test: a late reply), twice, with an error, or with a result
of the wrong shape. Built on `tests/fuzz/raw.py`'s `RawServer` (bytes in, frames out), with
every write going through one writer thread so the reader never waits on a write: a burst of
thousands of requests cannot deadlock against the server's own writes.
"""

from __future__ import annotations

import queue
import threading
import time
from pathlib import Path
from typing import Any

from ..fuzz.raw import WAIT_S, RawServer, encode

# What a capable editor says it can do: every server-to-client request Talos sends is enabled.
CAPABILITIES = {
    "window": {"workDoneProgress": True, "showMessage": {}, "showDocument": {"support": True}},
    "workspace": {
        "applyEdit": True,
        "configuration": True,
        "workspaceFolders": True,
        "didChangeConfiguration": {},
        "codeLens": {"refreshSupport": True},
        "didChangeWatchedFiles": {"dynamicRegistration": True},
    },
}
MODES = ("answer", "hold", "twice", "error", "wrong")


def good_result(message: dict[str, Any]) -> Any:
    """What a well-behaved editor answers to one of the server's requests."""
    method, params = message["method"], message.get("params") or {}
    if method == "workspace/configuration":
        return [None] * len(params.get("items", []))
    if method == "window/showMessageRequest":
        actions = params.get("actions") or []
        return actions[-1] if actions else None  # the last button: Deny, Skip, Not now
    if method == "workspace/applyEdit":
        return {"applied": False, "failureReason": "the test's editor applies nothing"}
    if method == "window/showDocument":
        return {"success": True}
    return None  # progress create, registerCapability, codeLens/refresh


class LyingClient(RawServer):
    """`modes[method]` says how the server's requests of that method are answered (default
    "answer"); `asked` keeps every request the server sent; `held` the unanswered ones."""

    def __init__(self, home: Path, modes: dict[str, str] | None = None) -> None:
        self.modes: dict[str, str] = dict(modes or {})
        self.asked: list[dict[str, Any]] = []
        self.held: list[dict[str, Any]] = []
        self._kept: list[dict[str, Any]] = []  # notifications taken from the queue
        self._out: queue.Queue[bytes | None] = queue.Queue()
        self._writer = threading.Thread(target=self._write_all, daemon=True)
        super().__init__(home)
        self._writer.start()

    # ---------------------------------------------------------------- writing
    def send(self, data: bytes) -> None:
        self._out.put(data)

    def _write_all(self) -> None:
        while (data := self._out.get()) is not None:
            try:
                self._stdin.write(data)
                self._stdin.flush()
            except (BrokenPipeError, ValueError, OSError):
                return

    def reply(self, message: dict[str, Any], how: str = "answer", result: Any = None) -> None:
        """Answer one of the server's requests: `how` is a mode; `result` replaces the good
        result when given."""
        msg_id = message["id"]
        good = good_result(message) if result is None else result
        if how == "error":
            body: dict[str, Any] = {
                "jsonrpc": "2.0",
                "id": msg_id,
                "error": {"code": -32603, "message": "the editor failed"},
            }
        elif how == "wrong":
            body = {"jsonrpc": "2.0", "id": msg_id, "result": {"unexpected": [1, {"x": None}]}}
        else:
            body = {"jsonrpc": "2.0", "id": msg_id, "result": good}
        self.send(encode(body))
        if how == "twice":
            self.send(encode(body))

    def reply_held(self, method: str, how: str = "answer", result: Any = None) -> int:
        """Answer every held request of `method` (late); how many there were."""
        with self._cond:
            mine = [m for m in self.held if m["method"] == method]
            self.held = [m for m in self.held if m["method"] != method]
        for message in mine:
            self.reply(message, how, result)
        return len(mine)

    # ---------------------------------------------------------------- reading
    def _dispatch(self, message: dict[str, Any]) -> None:
        if "method" in message and "id" in message:  # the server asks
            mode = self.modes.get(message["method"], "answer")
            with self._cond:
                self.asked.append(message)
                if mode == "hold":
                    self.held.append(message)
                self._cond.notify_all()
            if mode != "hold":
                self.reply(message, mode)
            return
        super()._dispatch(message)

    def wait_asked(self, method: str, count: int = 1, timeout: float = WAIT_S) -> list[dict]:
        """Until the server has sent `count` requests of `method`; those requests."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(mine := [m for m in self.asked if m["method"] == method]) < count:
                left = deadline - time.monotonic()
                if left <= 0 or self.eof:
                    raise AssertionError(f"{len(mine)} of {count} {method} requests came")
                self._cond.wait(min(left, 0.5))
            return mine

    def notifications_of(self, method: str) -> list[dict[str, Any]]:
        """Every notification of `method` received so far (kept: the queue is drained)."""
        while True:
            try:
                self._kept.append(self.notifications.get_nowait())
            except queue.Empty:
                break
        return [n for n in self._kept if n.get("method") == method]

    def initialize_with(
        self,
        folders: list[Path],
        options: dict[str, Any],
        capabilities: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        answer = self.call(
            "initialize",
            {
                "processId": None,
                "rootUri": folders[0].as_uri(),
                "capabilities": CAPABILITIES if capabilities is None else capabilities,
                "workspaceFolders": [{"uri": f.as_uri(), "name": f.name} for f in folders],
                "initializationOptions": options,
            },
        )
        assert "result" in answer, answer
        self.notify("initialized", {})
        return answer

    def until(self, check: Any, what: str, timeout: float = WAIT_S) -> Any:
        deadline = time.monotonic() + timeout
        while not (value := check()):
            if time.monotonic() > deadline or self.eof:
                raise AssertionError(
                    f"timed out waiting for {what}"
                    + (" (the server's stdout closed)" if self.eof else "")
                )
            time.sleep(0.02)
        return value

    def result(self, name: str, *arguments: Any) -> Any:
        """A command's result; an error response fails the test."""
        answer = self.command(name, *arguments)
        assert "result" in answer, answer
        return answer["result"]

    def task(self, task_id: str) -> dict[str, Any]:
        (task,) = [t for t in self.result("talos.task.list", {}) if t["id"] == task_id]
        return task

    def finished(self, task_id: str) -> dict[str, Any]:
        return self.until(
            lambda: (t := self.task(task_id))["state"] not in ("queued", "running") and t,
            f"task {task_id} to end",
        )

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def close(self) -> int | None:
        code = super().close()
        self._out.put(None)
        return code
