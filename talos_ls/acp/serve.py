"""`talos-ls --acp`: the ACP agent on stdio, and nothing else on its stdout, ever.

Before anything else runs, the protocol's input and output are moved to file descriptors of
their own; fd 0 becomes /dev/null and fd 1 a copy of stderr. A stray `print`, a library's
warning, a child process that inherits stdout: all land on stderr, never between two protocol
lines. The log goes to stderr or `--log-file`, redacted like the language server's, and the
records of libraries (the SDK logs what it could not handle) lose their arguments.

At the end of the input (the client closed it), the turns still running are cancelled (each
prompt answered `cancelled`, nothing half-applied), the requests already read are answered,
and the process exits 0.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import cast

from acp.agent.router import build_agent_router
from acp.connection import Connection
from acp.interfaces import Agent

from ..logs import configure_logging, internal_error
from .agent import PROMPT_TIMEOUT, TalosAgent
from .wire import CHUNK, LineTransport, Outgoing, guarded

logger = logging.getLogger(__name__)
SHUTDOWN_S = 10.0  # at the end of the input: the requests in flight get this long to finish


def serve(log_file: str | None, log_level: str) -> int:
    protocol_in, protocol_out = os.dup(0), os.dup(1)
    nothing = os.open(os.devnull, os.O_RDONLY)
    os.dup2(nothing, 0)
    os.close(nothing)
    os.dup2(2, 1)
    configure_logging(log_file, log_level)  # a library's records lose their arguments
    from ..agent.sandbox import protect_this_process

    protect_this_process()
    asyncio.run(_serve(protocol_in, protocol_out))
    return 0


async def _serve(fd_in: int, fd_out: int) -> None:
    reader = await _reader(fd_in)
    writes = ThreadPoolExecutor(1, "talos-acp-out")  # in order; a slow client blocks only it

    async def write(data: bytes) -> None:
        await asyncio.get_running_loop().run_in_executor(writes, _write_all, fd_out, data)

    transport = LineTransport(reader, write)
    agent = TalosAgent()
    agent.after_result = transport.after_result
    inflight: set[asyncio.Task] = set()
    router = build_agent_router(cast(Agent, agent))  # the SDK's Protocol, by its method names
    handler = guarded(router, internal_error, agent.observe, inflight)
    conn = Connection(handler, transport, listening=False)
    agent.client = Outgoing(conn, PROMPT_TIMEOUT)
    agent.client.start()
    try:
        await conn.main_loop()
    except Exception:
        logger.exception("the connection failed")
    finally:
        for session in list(agent.sessions.values()):
            await agent.cancel(session.id)
        if inflight:
            await asyncio.wait(list(inflight), timeout=SHUTDOWN_S)
        try:
            await asyncio.wait_for(agent.close(), SHUTDOWN_S)
        except TimeoutError:
            logger.warning("closing took longer than %.0f s; exiting anyway", SHUTDOWN_S)
        await agent.client.close()
        await conn.close()
        writes.shutdown(wait=False)
    sys.stderr.flush()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


async def _reader(fd: int) -> asyncio.StreamReader:
    """The protocol's input as a stream: a pipe (what clients give) read by the loop, with
    flow control; anything else (a file) by a thread."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=CHUNK)
    if stat.S_ISFIFO(os.fstat(fd).st_mode) or stat.S_ISSOCK(os.fstat(fd).st_mode):
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", buffering=0)
        )
        return reader

    def pump() -> None:
        try:
            while data := os.read(fd, CHUNK):
                loop.call_soon_threadsafe(reader.feed_data, data)
        except OSError:
            pass
        finally:
            loop.call_soon_threadsafe(reader.feed_eof)

    threading.Thread(target=pump, name="talos-acp-in", daemon=True).start()
    return reader
