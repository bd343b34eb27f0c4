"""A raw ACP client for the real `talos-ls --acp`: bytes in on its stdin, one JSON object a line
out of its stdout, read by a thread.

The SDK's client only sends well-formed messages; the hostile tests need to send anything (a
line that is not JSON, a 64 MiB line, a batch, wrong types, answers with option ids never
offered) and see exactly what comes back. The agent's own requests are answered by `answer`
(a function of the request, returning a result, an `Error`, a list of replies to send, or
None to stay silent); by default as a client without files or questions would: cancelled.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WAIT_S = 60.0


@dataclass
class Error:
    """A JSON-RPC error as the client's answer to one of the agent's requests."""

    code: int
    message: str


def line(message: Any) -> bytes:
    return json.dumps(message).encode() + b"\n"


def default_answer(request: dict[str, Any]) -> Any:
    if request["method"] == "session/request_permission":
        return {"outcome": {"outcome": "cancelled"}}
    if request["method"] == "elicitation/create":
        return {"action": "cancel"}
    return Error(-32601, "Method not found")


class RawAcp:
    """`argv` as a subprocess. `request`/`notify` send well-formed messages, `send` any bytes;
    responses are kept by id, errors with a null id in order, the agent's notifications and
    requests in `notifications` / `agent_requests`, and lines that are not JSON objects in
    `garbage` (none may appear: a test asserts so)."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path, stderr: Path) -> None:
        self.stderr_path = stderr
        self._stderr = stderr.open("wb")
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            cwd=cwd,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._stdin = self.proc.stdin
        self._write_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._cond = threading.Condition()
        self.responses: dict[Any, dict[str, Any]] = {}
        self.duplicates: list[dict[str, Any]] = []
        self.null_id_errors: list[dict[str, Any]] = []
        self.notifications: list[dict[str, Any]] = []
        self.agent_requests: list[dict[str, Any]] = []
        self.garbage: list[bytes] = []
        self.answer: Callable[[dict[str, Any]], Any] = default_answer
        self.eof = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    # ------------------------------------------------------------------ writing
    def send(self, data: bytes) -> None:
        with self._write_lock:
            self._stdin.write(data)
            self._stdin.flush()

    def request(self, method: str, params: Any = None, msg_id: Any = None) -> Any:
        msg_id = next(self._ids) if msg_id is None else msg_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(line(message))
        return msg_id

    def notify(self, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(line(message))

    def close_stdin(self) -> None:
        with self._write_lock:
            self._stdin.close()

    # ------------------------------------------------------------------ reading
    def wait(self, check: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not (value := check()):
                left = deadline - time.monotonic()
                if left <= 0 or self.eof:
                    closed = " (the agent's stdout closed)" if self.eof else ""
                    raise AssertionError(f"timed out waiting for {what}{closed}")
                self._cond.wait(min(left, 0.5))
            return value

    def response(self, msg_id: Any, timeout: float = WAIT_S) -> dict[str, Any]:
        return self.wait(lambda: self.responses.get(msg_id), f"the response to {msg_id!r}", timeout)

    def call(self, method: str, params: Any = None) -> dict[str, Any]:
        return self.response(self.request(method, params))

    def result(self, method: str, params: Any = None) -> Any:
        got = self.call(method, params)
        assert "result" in got, got
        return got["result"]

    def null_errors(self, count: int, timeout: float = WAIT_S) -> list[dict[str, Any]]:
        """Wait until `count` errors with a null id have come; all of them."""
        self.wait(lambda: len(self.null_id_errors) >= count, f"{count} null-id errors", timeout)
        return list(self.null_id_errors)

    def agent_request(self, method: str, count: int = 1) -> dict[str, Any]:
        """The `count`-th request of `method` the agent made (waits for it)."""
        return self.wait(
            lambda: [r for r in self.agent_requests if r["method"] == method][count - 1 :][:1],
            f"{count} {method} request(s) from the agent",
        )[0]

    def updates(self, kind: str | None = None) -> list[dict[str, Any]]:
        return [
            n["params"]["update"]
            for n in self.notifications
            if n.get("method") == "session/update"
            and (kind is None or n["params"]["update"].get("sessionUpdate") == kind)
        ]

    def _read(self) -> None:
        stdout = self.proc.stdout
        assert stdout is not None
        try:
            for raw in stdout:
                try:
                    message = json.loads(raw)
                except ValueError:
                    message = None
                if not isinstance(message, dict):
                    with self._cond:
                        self.garbage.append(raw[:500])
                    continue
                self._dispatch(message)
        finally:
            with self._cond:
                self.eof = True
                self._cond.notify_all()

    def _dispatch(self, message: dict[str, Any]) -> None:
        if "method" in message and "id" in message:
            with self._cond:
                self.agent_requests.append(message)
                self._cond.notify_all()
            replies = self.answer(message)
            for reply in replies if isinstance(replies, list) else [replies]:
                if reply is None:
                    continue
                out: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
                if isinstance(reply, Error):
                    out["error"] = {"code": reply.code, "message": reply.message}
                else:
                    out["result"] = reply
                with contextlib.suppress(BrokenPipeError, ValueError, OSError):
                    self.send(line(out))
            return
        with self._cond:
            if "method" in message:
                self.notifications.append(message)
            elif message.get("id") is None:
                self.null_id_errors.append(message)
            elif message["id"] in self.responses:
                self.duplicates.append(message)
            else:
                self.responses[message["id"]] = message
            self._cond.notify_all()

    # ---------------------------------------------------------------- lifecycle
    def alive(self) -> bool:
        return self.proc.poll() is None

    def initialize(self, fs: bool = False) -> dict[str, Any]:
        caps = {"fs": {"readTextFile": fs, "writeTextFile": fs}, "terminal": False}
        return self.result("initialize", {"protocolVersion": 1, "clientCapabilities": caps})

    def close(self, timeout: float = 20.0) -> int | None:
        """stdin closed as a client that goes away; the agent must exit by itself (killed
        otherwise: the return code is then negative)."""
        with contextlib.suppress(OSError, ValueError):
            self.close_stdin()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self._reader.join(5)
        self._stderr.close()
        return self.proc.returncode


def pump(
    raw: RawAcp, size: int, head: bytes, tail: bytes, chunk: int = 1 << 20
) -> threading.Thread:
    """Write one line of `size` bytes (head, filler, tail, newline) from a thread: the agent
    reads it at its own pace while the test watches for the answer."""

    def run() -> None:
        with contextlib.suppress(BrokenPipeError, OSError, ValueError):
            raw.send(head)
            left = size - len(head) - len(tail) - 1
            block = b"A" * chunk
            while left > 0:
                raw.send(block[: min(chunk, left)])
                left -= chunk
            raw.send(tail + b"\n")

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread
