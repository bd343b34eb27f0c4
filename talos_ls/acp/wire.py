"""ACP's wire: JSON-RPC 2.0, one JSON object per line, on stdio, hardened against the client.

The SDK (`acp`, PyPI `agent-client-protocol`) routes requests to the agent and validates their
params with its pydantic models; its own line reader is not used, because it drops a line that
is not JSON without a reply, joins a line of any length in memory, and ends the connection on a
line that is JSON but not an object. `LineTransport` (the SDK's `Transport` seam) reads at most
`MAX_LINE_BYTES` a line and answers each bad line with a JSON-RPC error: a parse error (-32700)
for what is not JSON, an invalid request (-32600) for a batch, a non-object, a wrong `jsonrpc`
or `id`, a `method` that is not a string, a line too long. A line too long that is the answer
to one of the agent's own requests (its id read from the line's first bytes, and one the agent
is waiting for) is not answered: that request fails at once, saying the answer was too large
(`too_large`), rather than waiting for an answer that already came.

`guarded` wraps the SDK's router: params of the wrong shape are an invalid-params error naming
the fields (never quoting what was sent), a `TalosError` (the store, the person's config: not
the client's fault) is a server error (-32000) with its message, and a bug is an internal
error saying where its traceback is.

Only this module writes to the protocol's output, which is not file descriptor 1: `serve.py`
moves the protocol off fds 0 and 1 before anything else runs, so a stray print, a library's
warning or a child process inheriting stdout can never put a line on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from acp.exceptions import RequestError
from pydantic import ValidationError

from ..errors import TalosError

logger = logging.getLogger(__name__)
MAX_LINE_BYTES = 8 * 1024 * 1024  # one message; more is refused, and skipped to its newline
CHUNK = 64 * 1024
PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS, INTERNAL = -32700, -32600, -32602, -32603
SERVER_ERROR = -32000  # JSON-RPC's range for the server's own failures
NOT_FOUND = -32002  # ACP's "Resource not found" (a session this process does not know)
HEAD_BYTES = 1024  # of a line too long, what is kept to read its id
ASKED = 4096  # ids of the agent's requests remembered (the oldest forgotten first)
# The start of a response: the top-level "id" (an integer, as the agent's own requests have),
# then "result" or "error"; "jsonrpc" may come first or between. Anchored and bounded: the
# line's first HEAD_BYTES are all it ever reads.
_JSONRPC = rb'(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?'
_RESPONSE = re.compile(
    rb"\s{0,64}\{\s{0,64}"
    + _JSONRPC
    + rb'"id"\s*:\s*(\d{1,15})\s*,\s*'
    + _JSONRPC
    + rb'"(?:result|error)"\s*:'
)


def error(msg_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}


def too_large(exc: BaseException) -> int | None:
    """The size of the answer, when `exc` is a request's failure because the client's answer
    was a line too long to read (`LineTransport`); else None."""
    data = getattr(exc, "data", None)
    size = data.get("talosTooLarge") if isinstance(data, dict) else None
    return size if isinstance(size, int) and not isinstance(size, bool) else None


def _valid_id(value: Any) -> bool:
    return value is None or (isinstance(value, int | str) and not isinstance(value, bool))


class LineTransport:
    """Newline-delimited JSON over a reader and a writer (the SDK's `Transport`): `receive`
    returns the next well-formed message and answers every other line itself."""

    def __init__(
        self, reader: asyncio.StreamReader, write: Callable[[bytes], Awaitable[None]]
    ) -> None:
        self.reader = reader
        self.write = write
        self._lock = asyncio.Lock()
        self.too_long = 0  # the size of the line just skipped
        self.head = b""  # its first HEAD_BYTES
        self.asked: dict[int, str] = {}  # the agent's requests not answered yet: id -> method
        self.broken = False  # the output is gone (the client closed its end)
        # Run once the next result is written: a new session's first updates follow the
        # response that gives the client its id.
        self.after_result: list[Callable[[], None]] = []

    async def send(self, message: dict[str, Any]) -> None:
        failure = message.get("error")
        if isinstance(failure, dict) and failure.get("data") is None:
            failure.pop("data", None)  # the SDK writes `"data": null`; absent is cleaner
        try:
            line = json.dumps(message, allow_nan=False)
        except (TypeError, ValueError):
            logger.error("a message could not be serialised (a bug): %s", message.get("method"))
            if "id" not in message or "method" in message:
                return
            line = json.dumps(error(message["id"], INTERNAL, "internal error (a bug)"))
        msg_id = message.get("id")
        if "method" in message and isinstance(msg_id, int):
            self.asked[msg_id] = str(message["method"])
            while len(self.asked) > ASKED:  # one whose answer never came (it timed out)
                del self.asked[next(iter(self.asked))]
        await self._write((line + "\n").encode())
        if "result" in message and self.after_result:
            waiting, self.after_result = self.after_result, []
            for callback in waiting:
                callback()

    async def _write(self, data: bytes) -> None:
        if self.broken:
            raise ConnectionError("the client closed its input")
        async with self._lock:
            try:
                await self.write(data)
            except (ConnectionError, OSError, RuntimeError) as exc:
                self.broken = True
                raise ConnectionError("the client closed its input") from exc

    async def _answer(self, reply: dict[str, Any]) -> None:
        with contextlib.suppress(ConnectionError):
            await self._write((json.dumps(reply) + "\n").encode())

    async def _line(self) -> bytes | None:
        """The next line (without its newline), b"" for one too long (skipped), None at EOF."""
        parts: list[bytes] = []
        size = 0
        head = b""
        while True:
            try:
                part = await self.reader.readuntil(b"\n")
                done = True
            except asyncio.LimitOverrunError as exc:
                part = await self.reader.readexactly(exc.consumed)
                done = False
            except asyncio.IncompleteReadError as exc:
                part, done = exc.partial, True
                if not part and not parts:
                    return None
            size += len(part)
            if len(head) < HEAD_BYTES:
                head += part[: HEAD_BYTES - len(head)]
            if size <= MAX_LINE_BYTES:
                parts.append(part)
            if done:
                break
        if size > MAX_LINE_BYTES:
            self.too_long = size
            self.head = head
            return b""
        return b"".join(parts).rstrip(b"\r\n")

    async def receive(self) -> dict[str, Any] | None:
        while True:
            self.too_long = 0
            line = await self._line()
            if line is None:
                return None
            if self.too_long:
                answered = self._too_large_answer()
                if answered is not None:
                    return answered
                await self._answer(
                    error(
                        None,
                        INVALID_REQUEST,
                        f"Invalid request: a message of {self.too_long} bytes; Talos reads at "
                        f"most {MAX_LINE_BYTES} bytes a line",
                    )
                )
                continue
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except (ValueError, RecursionError):
                await self._answer(error(None, PARSE_ERROR, "Parse error: the line is not JSON"))
                continue
            problem = _shape(message)
            if problem is not None:
                msg_id = message.get("id") if isinstance(message, dict) else None
                await self._answer(
                    error(msg_id if _valid_id(msg_id) else None, INVALID_REQUEST, problem)
                )
                continue
            if "method" not in message and isinstance(message.get("id"), int):
                self.asked.pop(message["id"], None)
            return message

    def _too_large_answer(self) -> dict[str, Any] | None:
        """The line too long is the answer to a request of the agent's still waiting: an
        error in its place (a response is never answered), so that request fails now."""
        found = _RESPONSE.match(self.head)
        self.head = b""
        msg_id = int(found.group(1)) if found else None
        method = self.asked.pop(msg_id, None) if msg_id is not None else None
        if method is None:
            return None
        logger.warning("the answer to %s was %d bytes: too large to read", method, self.too_long)
        return {
            "jsonrpc": "2.0",
            "id": msg_id,
            "error": {
                "code": INVALID_REQUEST,
                "message": f"the answer to {method} is over {MAX_LINE_BYTES} bytes: too large",
                "data": {"talosTooLarge": self.too_long},
            },
        }

    async def close(self) -> None:
        self.broken = True


def _shape(message: Any) -> str | None:
    """What is wrong with a decoded line as a JSON-RPC 2.0 message, or None."""
    if isinstance(message, list):
        return "Invalid request: ACP sends one JSON object a line (no batches)"
    if not isinstance(message, dict):
        return "Invalid request: a message must be a JSON object"
    if message.get("jsonrpc") != "2.0":
        return 'Invalid request: "jsonrpc" must be "2.0"'
    if "id" in message and not _valid_id(message["id"]):
        return 'Invalid request: "id" must be a string, an integer or null'
    if "method" in message:
        if not isinstance(message["method"], str):
            return 'Invalid request: "method" must be a string'
        if "params" in message and not isinstance(message["params"], dict | list | None):
            return 'Invalid request: "params" must be an object'
        return None
    if "id" not in message or not ("result" in message or "error" in message):
        return 'Invalid request: a message needs a "method", or an "id" and a "result" or "error"'
    return None


Handler = Callable[[str, Any, bool], Awaitable[Any]]


def guarded(
    router: Handler,
    internal: Callable[[], str],
    observe: Callable[[str, Any], None],
    inflight: set[asyncio.Task],
) -> Handler:
    """The SDK's router, with errors a client can read (see the module's docstring).
    `observe` sees each message's raw params first (the SDK's models drop fields newer than
    them, as a client's `session.notices` capability); `inflight` holds the requests being
    handled, so the process answers them before it exits at the end of its input."""

    async def handle(method: str, params: Any, is_notification: bool) -> Any:
        me = asyncio.current_task()
        if me is not None and not is_notification:
            inflight.add(me)
        try:
            observe(method, params)
            return await router(method, params, is_notification)
        except RequestError:
            raise
        except ValidationError as exc:
            fields = sorted({".".join(str(p) for p in e["loc"]) or "params" for e in exc.errors()})
            raise RequestError(
                INVALID_PARAMS,
                f"Invalid params for {method}: wrong or missing {', '.join(fields[:8])}",
            ) from None
        except TalosError as exc:  # the store, the person's config: not the client's fault
            raise RequestError(SERVER_ERROR, f"{method}: {exc}") from None
        except (asyncio.CancelledError, KeyboardInterrupt, SystemExit):
            raise
        except Exception:
            logger.exception("%s failed (a bug)", method)
            raise RequestError(INTERNAL, internal()) from None
        finally:
            if me is not None:
                inflight.discard(me)

    return handle


CLIENT_S = 10.0  # a request that needs no person (a file read or write) waits this long


class Outgoing:
    """What the agent sends the client. Session updates go in order through one queue (a
    port's callbacks are not coroutines); a request first lets the updates before it out, so
    a permission prompt never arrives before the tool call it is about. A failure to send
    (the client gone) is never the sender's error: updates are dropped, requests fail."""

    def __init__(self, conn: Any, prompt_timeout: float) -> None:
        self.conn = conn
        self.prompt_timeout = prompt_timeout
        self.queue: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue()
        self.worker: asyncio.Task | None = None
        self.lost = False  # an update could not be sent (said once in the log)
        self.requests: set[asyncio.Task] = set()  # the requests waiting for their answers

    def start(self) -> None:
        self.worker = asyncio.ensure_future(self._drain())

    def update(self, session_id: str, update: dict[str, Any]) -> None:
        self.queue.put_nowait(("session/update", {"sessionId": session_id, "update": update}))

    async def _drain(self) -> None:
        while True:
            method, params = await self.queue.get()
            try:
                await self.conn.send_notification(method, params)
            except Exception as exc:  # the client is gone: nobody to tell
                if not self.lost:
                    logger.info("updates are not sent any more: %s", type(exc).__name__)
                self.lost = True
            finally:
                self.queue.task_done()

    async def flush(self) -> None:
        """Until every update queued so far is written (before a response that ends them)."""
        await self.queue.join()

    def _send(self, method: str, params: dict[str, Any]) -> asyncio.Task:
        """The request as a task of its own, held until it ends; its failure is always
        retrieved (the connection closing fails every request waiting: that is no leak)."""
        task = asyncio.ensure_future(self.conn.send_request(method, params))
        self.requests.add(task)
        task.add_done_callback(self._ended)
        return task

    def _ended(self, task: asyncio.Task) -> None:
        self.requests.discard(task)
        if not task.cancelled():
            task.exception()  # read here; the caller that still waits reads it too

    async def request(self, method: str, params: dict[str, Any], timeout: float = CLIENT_S) -> Any:
        await self.flush()
        return await asyncio.wait_for(self._send(method, params), timeout)

    async def ask(self, cancelled: asyncio.Event, method: str, params: dict[str, Any]) -> Any:
        """A request the person answers: its result, or None when it failed, was not answered
        within the prompt timeout, or the session's turn was cancelled meanwhile."""
        await self.flush()
        request = self._send(method, params)
        stop = asyncio.ensure_future(cancelled.wait())
        try:
            done, _ = await asyncio.wait(
                {request, stop}, timeout=self.prompt_timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            stop.cancel()
            if not request.done():
                request.cancel()
        if request not in done or request.cancelled():
            return None
        if request.exception() is not None:
            logger.info("%s failed: %s", method, type(request.exception()).__name__)
            return None
        return request.result()

    async def close(self) -> None:
        """The update worker stopped, and every request still waiting cancelled and awaited:
        no task outlives the connection."""
        waiting = [*self.requests, *([self.worker] if self.worker is not None else [])]
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)
