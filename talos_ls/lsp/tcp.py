"""`talos-ls --tcp`: the language server on a loopback socket, for one client that proves it
may drive it.

Why it is guarded: a socket is open to every process of every user on the machine, and the
server behind it starts tasks that run commands, applies edits, reads transcripts and answers
the person's prompts. pygls's TCP transport accepted any host, let any connection speak
without initializing, sent every reply to the newest connection, and ended the server when any
connection closed. Here:
- the socket binds a loopback address only (`loopback`): another host is refused at start;
- the first message of a connection must be `initialize` carrying the token
  (`initializationOptions.tcpToken`) read from a file only the user can read (`read_token`);
  anything else (another request, a wrong or missing token, bytes that are no message, nothing
  within `HELLO_S` seconds) is answered with an error on that connection alone, which is then
  closed: it reaches no handler, so it can start no task, apply nothing, read nothing, answer
  no prompt;
- what an unproven connection may cost is small: its first message is at most `MAX_HELLO`
  bytes (an initialize is a few KiB; a larger length is refused unread), and at most
  `MAX_WAITING` such connections wait at once. The waiting slots cannot be held: a new
  connection when all are taken drops the one that has waited longest (told why), so an idle
  prober keeping connections open delays nobody who sends initialize at once;
- one session at a time: the first connection that initializes with the token owns the
  server; every other connection is refused at once and closed, and replies go only to the
  session's connection (the only writer the protocol ever gets);
- a connection that closes before initializing (a port probe) changes nothing; the session's
  connection closing ends the server, as the end of stdin does.
The token is never given on the command line: every local user can read a process's
arguments (`ps`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import json
import logging
import os
import stat
import threading
from typing import TYPE_CHECKING, Any

from pygls.exceptions import JsonRpcException, JsonRpcInvalidRequest, JsonRpcServerNotInitialized

from ..errors import TalosError
from .transport import (
    HardenedProtocol,
    StreamFrameReader,
    next_body,
    read_frames,
    too_big,
    valid_id,
)

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

logger = logging.getLogger(__name__)
TOKEN_OPTION = "tcpToken"
MIN_TOKEN_CHARS = 16
MAX_TOKEN_BYTES = 4096
HELLO_S = 5.0  # a connection must initialize within this, or it is closed
MAX_WAITING = 8  # connections at once that have not initialized yet; a ninth drops the oldest
MAX_HELLO = 256 * 1024  # bytes of a connection's first message (an initialize is a few KiB)
LINGER_S = 1.0  # a refused connection's last bytes are read this long before it is closed


class TcpError(TalosError):
    """`--tcp` or `--token-file` cannot be used; the message says why and what to do."""


def loopback(host: str) -> str:
    """The address to bind: `host` when it is a loopback address (`localhost` is 127.0.0.1)."""
    if host.lower() == "localhost":
        return "127.0.0.1"
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        address = None
    if address is None or not address.is_loopback:
        raise TcpError(
            f"--tcp listens on this machine only (127.0.0.1, ::1 or localhost), "
            f"not {host!r}: any other address would let other machines drive "
            "Talos"
        )
    return str(address)


def read_token(path: str) -> str:
    """The token in `path`: a regular file of the user's that no one else may read, holding
    at least `MIN_TOKEN_CHARS` characters."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise TcpError(
            f"--token-file {path!r} cannot be opened ({exc.strerror}); it must be "
            "a regular file, not a symbolic link"
        ) from None
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise TcpError(f"--token-file {path!r} is not a regular file")
        if info.st_uid != os.getuid():
            raise TcpError(f"--token-file {path!r} belongs to another user; use a file of your own")
        if info.st_mode & 0o077:
            raise TcpError(
                f"--token-file {path!r} can be read or written by others (mode "
                f"{info.st_mode & 0o777:o}); chmod 600 it"
            )
        raw = fh.read(MAX_TOKEN_BYTES + 1)
    token = raw.decode("utf-8", "replace").strip()
    if (
        len(raw) > MAX_TOKEN_BYTES
        or len(token) < MIN_TOKEN_CHARS
        or any(c.isspace() for c in token)
    ):
        raise TcpError(
            f"--token-file {path!r} must hold one token of {MIN_TOKEN_CHARS} to "
            f"{MAX_TOKEN_BYTES} characters without spaces (for example: python3 "
            "-c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    return token


class Refused(TalosError):
    """A connection may not speak to the server; `error` is what it is told."""

    def __init__(self, msg_id: Any, error: JsonRpcException) -> None:
        super().__init__(error.message)
        self.msg_id = msg_id
        self.error = error


def _hello(body: bytes, token: str) -> bytes:
    """The first message of a connection, checked: an `initialize` request with the token.
    Returns it without the token, to be handled; raises `Refused` otherwise."""
    try:
        data = json.loads(body.decode("utf-8"))
    except (ValueError, RecursionError):
        raise Refused(
            None, JsonRpcInvalidRequest("the first message must be an initialize request")
        ) from None
    msg_id = data.get("id") if isinstance(data, dict) else None
    if not valid_id(msg_id):
        msg_id = None
    if not isinstance(data, dict) or data.get("method") != "initialize" or msg_id is None:
        raise Refused(
            msg_id,
            JsonRpcServerNotInitialized(
                "this connection must first send initialize, with initializationOptions."
                f"{TOKEN_OPTION}"
            ),
        )
    params = data.get("params")
    options = params.get("initializationOptions") if isinstance(params, dict) else None
    given = options.pop(TOKEN_OPTION, None) if isinstance(options, dict) else None
    if not isinstance(given, str) or not hmac.compare_digest(given.encode(), token.encode()):
        raise Refused(
            msg_id,
            JsonRpcInvalidRequest(
                f"initialize: initializationOptions.{TOKEN_OPTION} is missing or wrong; it must "
                "be the token in the file given to talos-ls --token-file"
            ),
        )
    return json.dumps(data).encode()


async def _refuse(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, msg_id: Any, error: JsonRpcException
) -> None:
    """Tell this connection (only) why it is refused, and close it: our side first, then
    what it still sends is read and dropped for a moment, so the close is no reset that could
    discard the error before the client reads it."""
    error_object = {"code": error.code, "message": error.message}
    body = json.dumps({"jsonrpc": "2.0", "id": msg_id, "error": error_object}).encode()
    with contextlib.suppress(OSError, RuntimeError, TimeoutError):
        writer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        await asyncio.wait_for(writer.drain(), LINGER_S)
        if writer.can_write_eof():
            writer.write_eof()
        async with asyncio.timeout(LINGER_S):
            while await reader.read(65536):
                pass
    writer.close()


def serve_tcp(server: LanguageServer, host: str, port: int, token: str) -> None:
    """Listen on `host:port` (loopback only) for one session; return when it ends."""
    protocol = server.protocol
    assert isinstance(protocol, HardenedProtocol)
    server._stop_event = stop = threading.Event()
    address = loopback(host)
    session: list[asyncio.StreamWriter] = []  # the one connection that initialized
    # Connections that have not initialized yet, oldest first, each with its handler.
    waiting: dict[asyncio.StreamWriter, asyncio.Task[Any]] = {}
    dropped: set[asyncio.StreamWriter] = set()

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if session:
            logger.warning("a TCP connection was refused: another client is connected")
            refusal = JsonRpcInvalidRequest(
                "talos-ls serves one client at a time: another client is connected"
            )
            await _refuse(reader, writer, None, refusal)
            return
        if len(waiting) >= MAX_WAITING:  # the slots are not held by whoever took them first
            oldest, handler = next(iter(waiting.items()))
            del waiting[oldest]
            dropped.add(oldest)
            handler.cancel()
            logger.warning(
                "%d TCP connections wait without initializing; the oldest is dropped", MAX_WAITING
            )
        me = asyncio.current_task()
        assert me is not None
        waiting[writer] = me
        frames = StreamFrameReader(reader)

        try:
            try:
                body = await asyncio.wait_for(next_body(frames, _oversized, MAX_HELLO), HELLO_S)
            finally:  # waiting no more, before any refusal is sent: not dropped while refused
                waiting.pop(writer, None)
            if writer in dropped:  # its message came as it was dropped: it goes on
                dropped.discard(writer)
                me.uncancel()
            if body is None:  # closed before a message: a probe
                writer.close()
                return
            hello = _hello(body, token)
            if session:  # another connection won meanwhile
                raise Refused(None, JsonRpcInvalidRequest("another client is connected"))
        except asyncio.CancelledError:
            if writer not in dropped:
                raise  # the server stops
            me.uncancel()
            dropped.discard(writer)
            await _refuse(
                reader,
                writer,
                None,
                JsonRpcServerNotInitialized(
                    f"dropped: {MAX_WAITING} connections waited without initializing and a newer "
                    "one came; send initialize as soon as you connect"
                ),
            )
            return
        except TimeoutError:
            logger.warning("a TCP connection sent no initialize within %.0f s", HELLO_S)
            await _refuse(
                reader,
                writer,
                None,
                JsonRpcServerNotInitialized(f"no initialize within {HELLO_S:.0f} s"),
            )
            return
        except Refused as exc:
            logger.warning("a TCP connection was refused: %s", exc.error.message[:120])
            await _refuse(reader, writer, exc.msg_id, exc.error)
            return
        session.append(writer)
        protocol.set_writer(writer)  # type: ignore[arg-type]
        protocol.handle_body(hello)
        await read_frames(stop, frames, protocol)
        logger.info("the TCP client is gone; talos-ls stops")
        server.shutdown()

    async def listen() -> None:
        server._server = await asyncio.start_server(connection, address, port)
        bound = server._server.sockets[0].getsockname()
        logger.warning(
            "talos-ls listens on %s port %d (one client, with the token)", bound[0], bound[1]
        )
        async with server._server:
            await server._server.serve_forever()

    with contextlib.suppress(asyncio.CancelledError):
        asyncio.run(listen())


def _oversized(size: int) -> None:
    raise Refused(None, too_big(size, MAX_HELLO))


__all__ = ["TOKEN_OPTION", "TcpError", "loopback", "read_token", "serve_tcp"]
