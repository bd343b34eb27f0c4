"""The wire: LSP frames read from the editor, hardened against whatever arrives.

Why this module exists: pygls 2's reader (`pygls.io_.run_async`) trusts its input. A body that
is not JSON or not UTF-8, a request whose params do not fit the method's type, an envelope
without `jsonrpc`: each is logged and gets no response at all, so the client waits for ever. A
`Content-Length` of ten gigabytes is read (and allocated) as asked; a header line without a
newline is read whole; a frame shorter than it claims swallows the next message too. After
`shutdown` pygls drops every request silently, where the spec asks for an error; and the
params of a method lsprotocol does not know are rebuilt as namedtuples, one class per object
and named by a `type_name` field the client chooses. And the future of every command (and of
every async notification handler) stays in a dict for ever, holding its arguments and result.

Here, instead, every frame the editor sends is answered or dropped, and the reader survives:
- a request (a message with an id) always gets one response: its result, or an error naming
  what was wrong (-32700 for a body that is not UTF-8 JSON, -32600 for a malformed envelope,
  -32602 for params of the wrong shape, -32601 for an unknown method, -32002 before
  `initialize`, -32600 after `shutdown` and for a second `initialize`); a second
  `initialized` is dropped (it would open the store and the folders again);
- a body that cannot be decoded, or whose id cannot be read, is answered with an error whose id
  is null, as JSON-RPC 2.0 says;
- a notification whose params do not fit is dropped (the spec: no response), and logged
  without its content;
- a header line is read at most `MAX_HEADER_LINE` bytes at a time, and a `Content-Length` over
  `MAX_BODY` is refused with an error and never allocated; the reader then looks for the next
  frame's header. A frame whose body does not decode but holds the start of another frame (a
  truncated message) gives that frame back to the reader, so one short frame costs one message,
  not two.

Custom methods' params reach their handlers as plain JSON (dicts and lists).

The server's own requests to the client (progress, prompts, edits, configuration, documents)
are kept apart from the client's requests, in a table of their own (`HardenedProtocol.
send_request`): pygls keeps both in one dict, so a late reply (after the server stopped
waiting) resolved a cancelled future and raised `InvalidStateError` out of the reader, which
ended the process; a reply carrying the id of the client's own request resolved that request's
handler; and `$/cancelRequest` naming one of the server's ids cancelled it. Here a reply
resolves only a request of ours still waited for; anything else (late, twice, to an id never
sent) is dropped with a log line, and an error reply fails only the request it answers.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO

import attrs
import cattrs
from lsprotocol import types
from pygls.exceptions import (
    FeatureNotificationError,
    JsonRpcException,
    JsonRpcInternalError,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcParseError,
    JsonRpcServerNotInitialized,
)
from pygls.io_ import StdoutWriter
from pygls.protocol import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    LanguageServerProtocol,
)

from .. import logs
from ..errors import TalosError

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

logger = logging.getLogger(__name__)

MAX_BODY = 64 * 1024 * 1024  # bytes of one message; a larger Content-Length is refused
MAX_HEADER_LINE = 8 * 1024  # bytes of a header line read at once; longer ones are skipped
_CONTENT_LENGTH = re.compile(rb"content-length[ \t]*:[ \t]*(\d{1,20})[ \t]*\r?\n\Z", re.I)
_HEADER_START = b"content-length"


# ------------------------------------------------------------------- reading
class FrameReader:
    """Bytes from a blocking binary stream (stdin), read in an executor, with a push-back
    buffer: what a broken frame read too far is given back."""

    def __init__(self, stream: BinaryIO, executor: Executor | None = None) -> None:
        self.stream = stream
        self.executor = executor
        self._pending = bytearray()

    def unread(self, data: bytes) -> None:
        self._pending[:0] = data

    async def _run(self, call: Callable[[int], bytes], n: int) -> bytes:
        return await asyncio.get_running_loop().run_in_executor(self.executor, call, n)

    async def readline(self, limit: int) -> bytes:
        """A line (ending in b"\\n"), or at most `limit` bytes of one; b"" at the end."""
        if self._pending:
            end = self._pending.find(b"\n", 0, limit)
            cut = end + 1 if end >= 0 else min(limit, len(self._pending))
            head = bytes(self._pending[:cut])
            del self._pending[:cut]
            if head.endswith(b"\n") or len(head) >= limit:
                return head
            return head + await self._run(self.stream.readline, limit - len(head))
        return await self._run(self.stream.readline, limit)

    async def read(self, n: int) -> bytes:
        """`n` bytes, fewer only at the end of the stream."""
        head = bytes(self._pending[:n])
        del self._pending[:n]
        if len(head) == n:
            return head
        return head + await self._run(self.stream.read, n - len(head))


class StreamFrameReader(FrameReader):
    """The same over an asyncio stream (the TCP transport, `tcp.py`)."""

    def __init__(self, stream: asyncio.StreamReader) -> None:
        self.astream = stream
        self._pending = bytearray()

    async def readline(self, limit: int) -> bytes:
        if self._pending:
            return await super().readline(limit)
        try:
            return await self.astream.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:
            return exc.partial
        except asyncio.LimitOverrunError as exc:  # no newline within the stream's buffer
            return await self.astream.read(max(1, min(exc.consumed, limit)))

    async def read(self, n: int) -> bytes:
        head = bytes(self._pending[:n])
        del self._pending[:n]
        try:
            return head + await self.astream.readexactly(n - len(head))
        except asyncio.IncompleteReadError as exc:
            return head + exc.partial


async def read_frames(
    stop: threading.Event, reader: FrameReader, protocol: HardenedProtocol
) -> None:
    """The message loop: each frame's body handed over, until the stream ends."""
    while not stop.is_set():
        body = await next_body(reader, lambda size: protocol.reply_error(None, too_big(size)))
        if body is None:
            break
        rest = protocol.handle_body(body)
        if rest:
            reader.unread(rest)


async def next_body(
    reader: FrameReader, oversized: Callable[[int], None], limit: int = MAX_BODY
) -> bytes | None:
    """The next frame's body: headers, then `Content-Length` bytes; None when the stream ends.
    A length over `limit` is given to `oversized` and never read (its body, if it comes, is
    skipped as lines until the next header)."""
    length: int | None = None
    while True:
        line = await reader.readline(MAX_HEADER_LINE)
        if not line:
            return None
        match = _CONTENT_LENGTH.search(line)  # also at the end of garbage: resynchronised
        if match:
            length = int(match.group(1))
            continue
        if line.strip() or length is None:
            continue  # another header (Content-Type), garbage, or a stray blank line
        size, length = length, None
        if size > limit:
            oversized(size)
            continue
        body = await reader.read(size)
        return body if len(body) == size else None  # short: the stream ended inside it


def too_big(size: int, limit: int = MAX_BODY) -> JsonRpcException:
    return JsonRpcInvalidRequest(
        f"a message of {size} bytes is over the limit of {limit} bytes; it was not read"
    )


def next_frame_start(body: bytes) -> int | None:
    """Where in an undecodable body another frame's header may begin: `Content-Length`, or a
    start of it at the very end (the rest of it still unread)."""
    lower = body.lower()
    at = lower.find(_HEADER_START)
    if at >= 0:
        return at
    for k in range(min(len(_HEADER_START) - 1, len(lower)), 0, -1):
        if lower.endswith(_HEADER_START[:k]):
            return len(body) - k
    return None


# ----------------------------------------------------------------- decoding
def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _salvage_id(body: bytes) -> Any:
    """The id of a message whose body is not valid UTF-8, when the rest of it is JSON."""
    try:
        data = json.loads(body.decode("utf-8", "replace"), parse_constant=_no_constants)
    except (ValueError, RecursionError):
        return None
    msg_id = data.get("id") if isinstance(data, dict) else None
    return msg_id if valid_id(msg_id) and "method" in data else None


def _plain(cls: type) -> Callable[[Any, Any], Any]:
    """Structure a generic message keeping its params (or result) as plain JSON."""
    fields = [field.name for field in attrs.fields(cls)]

    def hook(obj: Any, _: Any) -> Any:
        return cls(**{f: obj.get(f) for f in fields})

    return hook


def converter() -> cattrs.Converter:
    """pygls's converter, but the params of methods lsprotocol does not know (and results of
    requests it does not know) stay plain JSON, not namedtuples named by the client."""
    from pygls.protocol import default_converter

    conv = default_converter()
    for cls in (JsonRPCRequestMessage, JsonRPCNotification, JsonRPCResponseMessage):
        conv.register_structure_hook(cls, _plain(cls))
    return conv


class JsonRpcRequestFailed(TalosError, JsonRpcException):
    """LSP's RequestFailed: the request was understood but cannot be served now."""

    CODE = -32803
    MESSAGE = "Request Failed"


@dataclass
class _Outgoing:
    """One of the server's requests, waiting for the client's reply."""

    method: str
    future: Future[Any]
    result_type: Any


EXPIRED_KEPT = 256  # ids of requests given up on, remembered to say so when a reply comes


class HardenedProtocol(LanguageServerProtocol):
    """pygls's protocol with a checked envelope, a response to every request, the spec's
    errors before `initialize` and after `shutdown`, and the server's own requests kept
    apart from the client's (any reply, at any time, is taken or dropped, never raised)."""

    initialized = False  # `initialize` was received
    started = False  # `initialized` was received

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._outgoing: dict[Any, _Outgoing] = {}
        self._expired: OrderedDict[Any, str] = OrderedDict()  # id -> method, given up on

    def rehearse(self) -> None:
        """Read one of each message a task receives (the command, the reply to a progress's
        creation) and serialise one of each it sends (its progress created, begun, reported,
        ended; a message; the command's result), and drop them. The converter writes its code
        for a message type at the type's first use (several ms for a progress's begin and end),
        which the first task would spend on the event loop; done here, in a worker thread, at
        `initialized`."""
        token = "talos/rehearsal"
        progress = (
            types.WorkDoneProgressBegin(title="", cancellable=True, message=""),
            types.WorkDoneProgressReport(message=""),
            types.WorkDoneProgressEnd(message=""),
        )
        messages: list[Any] = [
            types.WorkDoneProgressCreateRequest(
                id=token, params=types.WorkDoneProgressCreateParams(token=token)
            ),
            *(types.ProgressNotification(params=types.ProgressParams(token, p)) for p in progress),
            types.ShowMessageNotification(
                params=types.ShowMessageParams(types.MessageType.Info, "")
            ),
            types.ExecuteCommandResponse(id=token, result={"task_id": token}),
        ]
        for message in messages:
            json.dumps(message, default=self._serialize_message)
        method = types.WORKSPACE_EXECUTE_COMMAND
        command = {"command": "talos.task.start", "arguments": [{"prompt": ""}]}
        self._structure({"jsonrpc": "2.0", "id": 0, "method": method, "params": command}, method)
        created = {"jsonrpc": "2.0", "id": 0, "result": None}
        self._converter.structure(created, types.WorkDoneProgressCreateResponse)

    # ------------------------------------------------------ our requests
    def send_request(
        self,
        method: str,
        params: Any | None = None,
        callback: Callable[[Any], None] | None = None,
        msg_id: Any = None,
    ) -> Future[Any]:
        """pygls's, but the request waits in `_outgoing`, not among the client's requests.
        Whoever stops waiting (a timeout, a cancelled task) cancels the future, and the
        request is forgotten then: a reply that comes later is dropped."""
        msg_id = str(uuid.uuid4()) if msg_id is None else msg_id
        request_type = self.get_message_type(method) or JsonRPCRequestMessage
        request = request_type(id=msg_id, method=method, params=params, jsonrpc="2.0")
        future: Future[Any] = Future()
        entry = _Outgoing(method, future, self.get_result_type(method))
        self._outgoing[msg_id] = entry
        future.add_done_callback(lambda done: self._given_up(msg_id, entry))
        if callback is not None:
            future.add_done_callback(
                lambda done: (
                    None if done.cancelled() or done.exception() else callback(done.result())
                )
            )
        self._send_data(request)
        return future

    def _given_up(self, msg_id: Any, entry: _Outgoing) -> None:
        if self._outgoing.get(msg_id) is entry:  # not answered: cancelled, or timed out
            del self._outgoing[msg_id]
            self._expired[msg_id] = entry.method
            while len(self._expired) > EXPIRED_KEPT:
                self._expired.popitem(last=False)

    def cancel_outgoing(self) -> None:
        """Stop waiting for every reply (shutdown)."""
        for entry in list(self._outgoing.values()):
            entry.future.cancel()

    def _dropped(self, msg_id: Any, entry: _Outgoing | None) -> None:
        late = entry.method if entry is not None else self._expired.get(msg_id)
        if late is not None:
            logger.warning(
                "a late reply to %s was dropped (the server had stopped waiting for it)", late[:64]
            )
        else:
            logger.warning(
                "a reply to no request the server is waiting for was dropped (a "
                "second reply, or an id it never sent)"
            )

    def _execute_handler(
        self, msg_id: Any, handler: Any, callback: Any, args: Any = None, kwargs: Any = None
    ) -> None:
        """pygls's, minus its leak: the future of a handler run for a notification or inside
        a built-in (`executeCommand` runs every command so) is kept under a fresh id that
        nothing removes, and with it the handler's result or exception, its traceback and its
        arguments. Each is forgotten when it is done."""
        super()._execute_handler(msg_id, handler, callback, args, kwargs)
        future = self._request_futures.get(msg_id)
        if future is not None:
            future.add_done_callback(lambda done: self._forget(msg_id, done))

    def _send_handler_result(self, future: Any, *, msg_id: Any) -> None:
        """pygls's, but a request refused for load (`JsonRpcRequestFailed`) is answered
        without pygls's traceback in the log: a burst of them would flood it; and an exception
        that is no JSON-RPC error is answered as `failure` says (pygls would send its message
        and traceback to the client)."""
        exc = None if future.cancelled() else future.exception()
        if isinstance(exc, JsonRpcRequestFailed):
            logger.info("a request was refused for load")
            error: JsonRpcException = exc
        elif exc is not None and not isinstance(exc, JsonRpcException):
            error = JsonRpcInternalError(failure(exc))
        else:
            super()._send_handler_result(future, msg_id=msg_id)
            return
        self._request_futures.pop(msg_id, None)
        self._send_response(msg_id, error=error.to_response_error())

    def _check_handler_result(self, future: Any) -> None:
        """A notification handler's exception, given to the server's `report_server_error`
        as it is (pygls passes on only its text)."""
        exc = None if future.cancelled() else future.exception()
        if exc is not None:
            self._server._report_server_error(exc, FeatureNotificationError)

    def _forget(self, msg_id: Any, future: Any) -> None:
        if self._request_futures.get(msg_id) is future:
            self._request_futures.pop(msg_id, None)

    def reply_error(self, msg_id: Any, error: JsonRpcException) -> None:
        """An error response; with `"id": null` when the id is unknown (lsprotocol would
        leave the field out)."""
        if msg_id is not None:
            self._send_response(msg_id, error=error.to_response_error())
            return
        self._send_data(
            {"jsonrpc": "2.0", "id": None, "error": {"code": error.code, "message": error.message}}
        )

    def handle_body(self, body: bytes) -> bytes | None:
        """One frame's body: handled, or answered with the error. Returns the bytes to give
        back to the reader when the body holds the start of another frame."""
        try:
            data = json.loads(body.decode("utf-8"), parse_constant=_no_constants)
        except (ValueError, RecursionError) as exc:
            return self._undecodable(body, exc)
        self.handle_json(data)
        return None

    def _undecodable(self, body: bytes, exc: Exception) -> bytes | None:
        if isinstance(exc, UnicodeDecodeError):
            msg_id = _salvage_id(body)
            if msg_id is not None:  # a whole message, but for its bytes: answered by its id
                logger.warning("a message that is not UTF-8 (byte %d) was refused", exc.start)
                self.reply_error(
                    msg_id,
                    JsonRpcParseError(f"the message is not valid UTF-8 (at byte {exc.start})"),
                )
                return None
        start = next_frame_start(body)
        if start is not None and start > 0:  # a truncated frame ran into the next one
            logger.warning("a truncated message was refused")
            self.reply_error(None, JsonRpcParseError("the message is truncated: it is not JSON"))
            return body[start:]
        if isinstance(exc, UnicodeDecodeError):
            what = f"not valid UTF-8 (at byte {exc.start})"
        else:
            what = "nested too deeply" if isinstance(exc, RecursionError) else "not JSON"
        logger.warning("a message that is %s was refused", what)
        self.reply_error(None, JsonRpcParseError(f"the message is {what}"))
        return None

    def handle_json(self, data: Any) -> None:
        """A decoded message: its envelope checked, structured, and handled."""
        if not isinstance(data, dict):
            kind = "a batch (LSP has none)" if isinstance(data, list) else type(data).__name__
            self.reply_error(
                None, JsonRpcInvalidRequest(f"a message must be an object, not {kind}")
            )
            return
        has_id, msg_id, method = "id" in data, data.get("id"), data.get("method")
        if has_id and not valid_id(msg_id):
            self.reply_error(None, JsonRpcInvalidRequest("the id must be a string or an integer"))
            return
        problem = None
        if data.get("jsonrpc") != "2.0":
            problem = 'the field "jsonrpc" must be "2.0"'
        elif "method" in data and not isinstance(method, str):
            problem = 'the field "method" must be a string'
        elif "method" not in data and not ("result" in data or "error" in data):
            problem = 'a message needs a "method", a "result" or an "error"'
        if problem:
            logger.warning("a malformed message was refused: %s", problem)
            if has_id and "method" not in data and msg_id in self._outgoing:
                self._fail_pending(self._outgoing.pop(msg_id), problem)  # a broken reply to ours
            else:  # answered by its id, or with a null id (JSON-RPC 2.0)
                self.reply_error(msg_id, JsonRpcInvalidRequest(problem))
            return
        if method is None:  # a response to one of our requests
            self._handle_client_response(data, msg_id)
        elif has_id:
            self._handle_client_request(data, msg_id, method)
        else:
            self._handle_client_notification(data, method)

    def _handle_client_request(self, data: dict[str, Any], msg_id: Any, method: str) -> None:
        if self._shutdown and method != types.EXIT:
            self.reply_error(
                msg_id,
                JsonRpcInvalidRequest(f"{method}: the server is shut down; only exit is accepted"),
            )
            return
        if not self.initialized and method != types.INITIALIZE:
            self.reply_error(
                msg_id, JsonRpcServerNotInitialized(f"{method}: the server is not initialized yet")
            )
            return
        if self.initialized and method == types.INITIALIZE:  # it would drop the open documents
            self.reply_error(
                msg_id, JsonRpcInvalidRequest("initialize: the server is initialized already")
            )
            return
        try:
            message = self._structure(data, method)
        except JsonRpcException as exc:
            self.reply_error(msg_id, exc)
            return
        if method == types.INITIALIZE:
            self.initialized = True
        try:
            self.handle_message(message)
        except Exception as exc:  # pygls answers its own handlers' errors; this is a backstop
            self.reply_error(msg_id, JsonRpcInternalError(f"{method}: {failure(exc)}"))

    def _handle_client_notification(self, data: dict[str, Any], method: str) -> None:
        if not self.initialized and method != types.EXIT:
            return  # the spec: notifications before initialize are dropped
        if method == types.INITIALIZED:
            if self.started:
                return  # once: a second one would open the store and the folders again
            self.started = True
        try:
            message = self._structure(data, method)
            self.handle_message(message)
        except Exception as exc:
            logger.warning("the notification %s was dropped: %s", method[:64], type(exc).__name__)

    def _handle_client_response(self, data: dict[str, Any], msg_id: Any) -> None:
        """A reply: to one of our requests still waited for, given to whoever waits for it;
        else dropped, with a log line. Never raised: the reader goes on whatever the client
        answers, and whenever."""
        entry = self._outgoing.pop(msg_id, None)
        if entry is None or entry.future.done():
            self._dropped(msg_id, entry)
            return
        failed = "error" in data
        kind = types.ResponseErrorMessage if failed else entry.result_type or JsonRPCResponseMessage
        try:
            message = self._converter.structure(data, kind)
        except Exception:
            self._fail_pending(entry, "the response does not fit the request")
            return
        if failed and message.error is not None:
            entry.future.set_exception(JsonRpcException.from_error(message.error))
        else:
            entry.future.set_result(None if failed else message.result)

    def _fail_pending(self, entry: _Outgoing, problem: str) -> None:
        """A malformed response to one of our requests: the request fails, not hangs."""
        logger.warning("a reply to %s was refused: %s", entry.method[:64], problem)
        if not entry.future.done():
            entry.future.set_exception(JsonRpcInternalError(f"the client's response: {problem}"))

    def _structure(self, data: dict[str, Any], method: str) -> Any:
        kind = self.get_message_type(method)
        if kind is None:
            kind = JsonRPCRequestMessage if "id" in data else JsonRPCNotification
        try:
            return self._converter.structure(data, kind)
        except Exception:
            raise JsonRpcInvalidParams(
                f"{method[:200]}: the params do not have the shape this method takes"
            ) from None


def failure(exc: BaseException) -> str:
    """What the person is told of a handler's exception: a `TalosError`'s message; anything
    else is a bug, logged with its traceback (`logs.py` withholds its message) and told as an
    internal error, with where the log is."""
    if isinstance(exc, TalosError):
        return str(exc)
    logger.error("a bug: %s", type(exc).__name__, exc_info=exc)
    return logs.internal_error()


# ---------------------------------------------------------------- transports
def serve_io(
    server: LanguageServer, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None
) -> None:
    """What `LanguageServer.start_io` does, with the hardened reader."""
    assert isinstance(server.protocol, HardenedProtocol)
    server._stop_event = stop = threading.Event()
    reader = FrameReader(stdin or sys.stdin.buffer, server.thread_pool)
    server.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
    try:
        asyncio.run(read_frames(stop, reader, server.protocol))
    except BrokenPipeError:
        logger.error("the connection to the client is lost; shutting down")
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.shutdown()


__all__ = [
    "MAX_BODY",
    "MAX_HEADER_LINE",
    "HardenedProtocol",
    "JsonRpcRequestFailed",
    "converter",
    "next_body",
    "read_frames",
    "serve_io",
]
