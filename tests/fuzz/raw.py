"""A raw JSON-RPC client for the real `talos-ls` process: bytes in on its stdin, framed
messages out of its stdout, read by a thread with a timeout.

pytest-lsp's client can only send well-formed messages; these tests need to send anything (a
broken frame, invalid UTF-8, a lying `Content-Length`) and see exactly what comes back. The
server's own requests (configuration, progress, prompts) are answered as a minimal client would:
with null, so they never hold a task up.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..lsp.conftest import server_env

WAIT_S = 60.0  # generous: a stuck server fails the test instead of hanging it


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def encode(message: dict[str, Any]) -> bytes:
    return frame(json.dumps(message).encode())


def rss_kib(pid: int) -> int:
    """The process's resident set, in KiB (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


class RawServer:
    """`talos-ls` as a subprocess (or the Python script `argv` names). `request` and `notify`
    send well-formed messages; `send` sends any bytes. Responses are kept by id; notifications
    in `notifications`."""

    def __init__(self, home: Path, argv: Sequence[str] = ("-m", "talos_ls.server")) -> None:
        home.mkdir(parents=True, exist_ok=True)
        self.stderr_path = home / "server.stderr"
        self._stderr = self.stderr_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=server_env(home),
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._stdin = self.proc.stdin
        self._write_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._cond = threading.Condition()
        self.responses: dict[Any, dict[str, Any]] = {}
        self.null_id_errors: list[dict[str, Any]] = []  # errors for messages without an id
        self.duplicates: list[dict[str, Any]] = []  # a second response to one id
        self.notifications: queue.Queue[dict[str, Any]] = queue.Queue()
        self.notification_count = 0
        self.eof = False
        self._reader = threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True)
        self._reader.start()

    # ---------------------------------------------------------------- writing
    def send(self, data: bytes) -> None:
        with self._write_lock:
            self._stdin.write(data)
            self._stdin.flush()

    def request(self, method: str, params: Any = None, msg_id: Any = None) -> Any:
        """Send a request; its id."""
        msg_id = next(self._ids) if msg_id is None else msg_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(encode(message))
        return msg_id

    def notify(self, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(encode(message))

    def next_id(self) -> int:
        return next(self._ids)

    # ---------------------------------------------------------------- reading
    def response(self, msg_id: Any, timeout: float = WAIT_S) -> dict[str, Any]:
        """The response to `msg_id` (waits for it)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while msg_id not in self.responses:
                left = deadline - time.monotonic()
                if left <= 0 or self.eof:
                    closed = " (the server's stdout closed)" if self.eof else ""
                    raise AssertionError(f"no response to request {msg_id!r}{closed}")
                self._cond.wait(min(left, 0.5))
            return self.responses[msg_id]

    def answer(self, msg_id: Any, nulls: int, timeout: float = WAIT_S) -> dict[str, Any]:
        """The answer to a request whose id the server may not have been able to read: its
        response, or the next error with a null id (beyond the `nulls` seen before)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while msg_id not in self.responses and len(self.null_id_errors) <= nulls:
                left = deadline - time.monotonic()
                if left <= 0 or self.eof:
                    raise AssertionError(f"no answer to request {msg_id!r}, by id or null")
                self._cond.wait(min(left, 0.5))
            return self.responses.get(msg_id) or self.null_id_errors[nulls]

    def call(self, method: str, params: Any = None) -> dict[str, Any]:
        return self.response(self.request(method, params))

    def command(self, name: str, *arguments: Any) -> dict[str, Any]:
        return self.call(
            "workspace/executeCommand", {"command": name, "arguments": list(arguments)}
        )

    def null_id_error_count(self) -> int:
        with self._cond:
            return len(self.null_id_errors)

    def wait_null_id_errors(self, count: int, timeout: float = WAIT_S) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.null_id_errors) < count:
                left = deadline - time.monotonic()
                if left <= 0 or self.eof:
                    raise AssertionError(
                        f"{len(self.null_id_errors)} of {count} errors without an id arrived"
                    )
                self._cond.wait(min(left, 0.5))
            return list(self.null_id_errors)

    def _read(self, stdout: Any) -> None:
        try:
            while True:
                length = None
                while True:
                    line = stdout.readline()
                    if not line:
                        return
                    if line in (b"\r\n", b"\n"):
                        break
                    name, _, value = line.decode("ascii").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value.strip())
                assert length is not None, "a frame without Content-Length from the server"
                body = stdout.read(length)
                if len(body) < length:
                    return
                self._dispatch(json.loads(body))
        finally:
            with self._cond:
                self.eof = True
                self._cond.notify_all()

    def _dispatch(self, message: dict[str, Any]) -> None:
        if "method" in message and "id" in message:  # the server asks: a minimal client's null
            result: Any = None
            if message["method"] == "workspace/configuration":
                result = [None] * len(message.get("params", {}).get("items", []))
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
            with contextlib.suppress(BrokenPipeError, ValueError):
                self.send(encode(reply))
        elif "method" in message:
            self.notification_count += 1
            self.notifications.put(message)
        else:
            with self._cond:
                msg_id = message.get("id")
                if msg_id is None:
                    self.null_id_errors.append(message)
                elif msg_id in self.responses:
                    self.duplicates.append(message)
                else:
                    self.responses[msg_id] = message
                self._cond.notify_all()

    # -------------------------------------------------------------- lifecycle
    def initialize(self, root: Path, options: dict[str, Any]) -> dict[str, Any]:
        answer = self.call(
            "initialize",
            {
                "processId": None,
                "rootUri": root.as_uri(),
                "capabilities": {},
                "workspaceFolders": [{"uri": root.as_uri(), "name": root.name}],
                "initializationOptions": options,
            },
        )
        assert "result" in answer, answer
        self.notify("initialized", {})
        return answer

    def wait_ready(self, timeout: float = WAIT_S) -> None:
        """Until the status shows the folder's host (the store and the folder are open)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.command("talos.status", {})
            if status.get("result", {}).get("folders"):
                return
            time.sleep(0.05)
        raise AssertionError("the server never opened its folder")

    def close(self) -> int | None:
        """shutdown and exit when it still serves; then the process is ended for sure. The
        waits are hang guards (a loaded machine answers a flooded server's shutdown late)."""
        try:
            if self.proc.poll() is None and not self.eof:
                self.response(self.request("shutdown"), timeout=WAIT_S)
                self.notify("exit")
                self.proc.wait(WAIT_S)
        except (AssertionError, BrokenPipeError, OSError, subprocess.TimeoutExpired):
            pass
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        self._stderr.close()
        return self.proc.returncode
