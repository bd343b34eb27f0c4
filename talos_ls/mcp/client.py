"""The connections to MCP servers, on a thread and event loop of their own.

A server's messages are parsed (a 4 MB line from a hostile server, pydantic over a 10,000
tool list) away from the loop that answers the editor: every call from a task is handed over
(`McpManager._on_loop`) and awaited there. Servers start lazily, when a task first needs the
tools, each with a start-up timeout; a server that dies is reported once and started again at
the next call after a back-off (1, 2, 4... seconds), and given up after MAX_RESTARTS tries in
a row; `close` stops them all.

A stdio server is read by our own transport (`_stdio`), not the SDK's: a line longer than
MAX_MESSAGE stops the server (it is reported), so nothing a server sends is held unbounded.
The SDK (`mcp` 1.x, the v1 API: the servers people run speak the 2025-06-18 and 2025-11-25
protocol versions, docs/mcp.md) does the protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar

from ..display import visible
from ..errors import TalosError
from ..redact import add_secret, redact
from .adapt import ToolSpec, adapt_tools
from .config import ServerConfig
from .launch import Launch, LaunchError

logger = logging.getLogger(__name__)
T = TypeVar("T")

MAX_MESSAGE = 4 * 1024 * 1024  # one JSON-RPC message from a stdio server
MAX_STDERR = 4096  # of a server's stderr, kept to say why it failed (redacted)
MAX_RESTARTS = 5
MAX_ALL_SCHEMAS = 128 * 1024  # every server's tools together, of the model's context
BACKOFF = (1.0, 2.0, 4.0, 8.0, 30.0)
# Elicitation: asks the person on their loop; None when nobody is attached (declined).
Elicit = Callable[[str, Any], Coroutine[Any, Any, Any]]
# Starts a stdio server's sandbox (blocking, run in a worker thread); raises McpError.
Planner = Callable[[ServerConfig], Launch]


class McpError(TalosError):
    """A server could not be started or called; the message says which and why. `final`:
    trying again would not help (no sandbox here, no such program)."""

    def __init__(self, message: str, *, final: bool = False) -> None:
        super().__init__(message)
        self.final = final


@dataclass
class Connection:
    """One server: its state, its tools, and the task that holds its session."""

    config: ServerConfig
    state: str = "stopped"  # stopped | starting | ready | restarting | failed
    error: str = ""  # why it failed or stopped, as the person reads it
    tools: list[ToolSpec] = field(default_factory=list)
    dropped: str = ""  # what of its tool list was not offered (too many, too big)
    failures: int = 0
    next_try: float = 0.0
    reported: bool = False  # its failure was said once
    session: Any = None
    _owner: asyncio.Task | None = None
    _stop: asyncio.Event | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _askers: list[Elicit] = field(default_factory=list)
    died: asyncio.Event = field(default_factory=asyncio.Event)

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.config.name,
            "source": self.config.source,
            "transport": self.config.transport,
            "state": self.state,
            "error": self.error,
            "tools": [t.full for t in self.tools],
            "dropped": self.dropped,
            "describe": self.config.describe(),
        }


class McpManager:
    """Every configured server of one workspace (`configure`), for the tasks of a host."""

    def __init__(
        self,
        planner: Planner | None,
        notice: Callable[[str], None] | None = None,
        sandbox_problem: str | None = None,
    ) -> None:
        """`planner` lays out a stdio server's sandbox (None: no local server can start, and
        `sandbox_problem` says why); `notice` tells the person once what went wrong."""
        self.planner = planner
        self.sandbox_problem = sandbox_problem
        self.notice = notice or (lambda _: None)
        self.connections: dict[str, Connection] = {}
        self.problems: list[str] = []  # configuration problems, said by `talos mcp list`
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Lock()
        self._host_loop: asyncio.AbstractEventLoop | None = None
        self._cut_said = False

    # ------------------------------------------------------------ the loop
    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._started:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                self._thread = threading.Thread(target=run, name="talos-mcp", daemon=True)
                self._thread.start()
                ready.wait()
                self._loop = loop
            return self._loop

    async def _on_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        """`coro` on the MCP thread's loop, awaited from the caller's; cancelling the caller
        cancels it there."""
        self._host_loop = asyncio.get_running_loop()
        future = asyncio.run_coroutine_threadsafe(coro, self._ensure_loop())
        return await asyncio.wrap_future(future)

    # ------------------------------------------------------- configuration
    def configure(self, servers: Sequence[ServerConfig], problems: Sequence[str] = ()) -> None:
        """The servers to use from now on (the person's, a trusted workspace file's, an ACP
        session's). A server no longer configured, or configured differently, is stopped; a
        new one starts when a task needs it."""
        wanted = {s.name: s for s in servers}
        for server in servers:  # a configured secret never reaches the model or a log
            for value in server.secrets:
                add_secret(value)
        for name, conn in list(self.connections.items()):
            if wanted.get(name) != conn.config:
                del self.connections[name]
                if conn._owner is not None and self._loop is not None:
                    asyncio.run_coroutine_threadsafe(self._stop_one(conn), self._loop)
        for name, server in wanted.items():
            if name not in self.connections:
                self.connections[name] = Connection(server)
        self.problems = list(problems)

    # ------------------------------------------------------------ the tools
    async def tools(self) -> list[ToolSpec]:
        """Every ready server's tools, starting those not started yet (in parallel, each
        within its timeout). A server that cannot start is reported, not raised."""
        if not self.connections:
            return []
        return await self._on_loop(self._all_tools())

    async def _all_tools(self) -> list[ToolSpec]:
        """Every ready server's tools, within MAX_ALL_SCHEMAS of the model's context, in the
        order the servers were configured; what is past it is left out, and said once."""
        conns = list(self.connections.values())
        await asyncio.gather(*(self._ready(c) for c in conns), return_exceptions=True)
        kept: list[ToolSpec] = []
        room, cut = MAX_ALL_SCHEMAS, []
        for conn in conns:
            if conn.state != "ready":
                continue
            for tool in conn.tools:
                size = len(json.dumps(tool.schema()))
                if size > room:
                    cut.append(conn.config.name)
                    continue
                room -= size
                kept.append(tool)
        if cut and not self._cut_said:
            self._cut_said = True
            names = ", ".join(dict.fromkeys(cut))
            self._say(
                f"MCP: the servers' tools passed {MAX_ALL_SCHEMAS // 1024} KB of the model's "
                f"context: some tools of {names} are left out"
            )
        return kept

    def spec(self, full: str) -> tuple[Connection, ToolSpec] | None:
        for conn in self.connections.values():
            for tool in conn.tools:
                if tool.full == full:
                    return conn, tool
        return None

    async def call(
        self, full: str, arguments: dict[str, Any], elicit: Elicit | None
    ) -> tuple[Any, ServerConfig]:
        """Call a tool by its full name; the SDK's result. McpError when the server cannot
        be reached, dies or does not answer within its call timeout."""
        found = self.spec(full)
        if found is None:
            raise McpError(f"there is no MCP tool {full!r}")
        conn, tool = found
        return await self._on_loop(self._call(conn, tool, arguments, elicit)), conn.config

    async def _call(
        self, conn: Connection, tool: ToolSpec, arguments: dict[str, Any], elicit: Elicit | None
    ) -> Any:
        await self._ready(conn)
        asker = elicit
        if asker is not None:
            conn._askers.append(asker)
        try:
            result = await asyncio.wait_for(
                conn.session.call_tool(tool.name, arguments), conn.config.call_timeout
            )
            conn.failures = 0  # it works: a later death starts the back-off afresh, and is said
            conn.reported = False
            return result
        except TimeoutError:
            raise McpError(
                f"the MCP server {conn.config.name} did not answer within "
                f"{conn.config.call_timeout:g} s"
            ) from None
        except McpError:
            raise
        except Exception as exc:
            owner = conn._owner
            if owner is not None and _closed(exc):  # it died: say how, once it is gone
                with contextlib.suppress(TimeoutError):  # killed: seconds at most, even loaded
                    await asyncio.wait_for(conn.died.wait(), 30)
                await asyncio.wait([owner], timeout=10)
            if conn.state != "ready":  # it died during the call
                raise McpError(f"the MCP server {conn.config.name} stopped: {conn.error}") from None
            why = visible(redact(str(exc)), single_line=True)[:300]
            raise McpError(f"the MCP server {conn.config.name} failed the call: {why}") from None
        finally:
            if asker is not None:
                conn._askers.remove(asker)

    # ------------------------------------------------------ start and stop
    async def _ready(self, conn: Connection) -> None:
        async with conn._lock:
            if conn.state == "ready":
                return
            if conn.state == "failed":
                raise McpError(f"the MCP server {conn.config.name} is not available: {conn.error}")
            wait = conn.next_try - time.monotonic()
            if wait > 0:
                raise McpError(
                    f"the MCP server {conn.config.name} stopped ({conn.error}); it is started "
                    f"again in {wait:.0f} s"
                )
            # Its failures count, and are said once, until a call succeeds (`_call`).
            try:
                await self._start(conn)
            except McpError as exc:
                conn.failures += 1
                conn.error = str(exc)
                if conn.failures >= MAX_RESTARTS or exc.final:
                    conn.state = "failed"
                    conn.reported = False  # given up: said, even after an earlier report
                else:
                    conn.state = "restarting"
                    conn.next_try = time.monotonic() + BACKOFF[conn.failures - 1]
                self._report(conn)
                raise

    def _report(self, conn: Connection) -> None:
        if not conn.reported:
            conn.reported = True
            self._say(f"MCP server {conn.config.name}: {conn.error}")

    def _say(self, message: str) -> None:
        """Tell the person (on their loop) and the log: escaped and redacted already."""
        logger.warning("%s", message)
        loop = self._host_loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.notice, message)

    async def _start(self, conn: Connection) -> None:
        config = conn.config
        try:
            import mcp  # noqa: F401 - the optional extra
        except ImportError:
            raise McpError(
                "the MCP SDK is not installed: pip install 'talos-ls[mcp]'", final=True
            ) from None
        conn.state, conn.error = "starting", ""
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        conn._stop = asyncio.Event()
        conn._owner = asyncio.ensure_future(self._hold(conn, ready))
        try:
            await asyncio.wait_for(asyncio.shield(ready), config.timeout)
        except TimeoutError:
            await self._stop_one(conn)
            raise McpError(f"did not start within {config.timeout:g} s") from None
        except McpError:
            await self._stop_one(conn)
            raise
        except Exception as exc:
            await self._stop_one(conn)
            raise McpError(f"could not start: {_said(exc)}") from None
        conn.state = "ready"

    async def _hold(self, conn: Connection, ready: asyncio.Future[None]) -> None:
        """The task that owns the server's transport and session, from start to stop."""
        from mcp import ClientSession

        died = conn.died = asyncio.Event()
        try:
            async with (
                self._transport(conn, died) as (read, write),
                ClientSession(
                    read,
                    write,
                    read_timeout_seconds=timedelta(seconds=conn.config.call_timeout + 5),
                    elicitation_callback=self._elicitation(conn),
                ) as session,
            ):
                await session.initialize()
                conn.tools, conn.dropped = await adapt_tools(conn.config.name, session)
                if conn.dropped:
                    conn.error = conn.dropped
                    self._report_dropped(conn)
                conn.session = session
                ready.set_result(None)
                stop = asyncio.ensure_future(conn._stop.wait()) if conn._stop else None
                gone = asyncio.ensure_future(died.wait())
                await asyncio.wait(
                    [f for f in (stop, gone) if f], return_when=asyncio.FIRST_COMPLETED
                )
                for f in (stop, gone):
                    if f is not None:
                        f.cancel()
        except asyncio.CancelledError:
            if not ready.done():
                ready.set_exception(McpError("stopped while starting"))
            raise
        except BaseException as exc:  # a task group wraps the failure: reported, not raised
            if not ready.done():
                if not isinstance(exc, McpError) and conn.died.is_set() and conn.error:
                    exc = McpError(conn.error)  # it exited while starting: how, not the SDK's
                ready.set_exception(exc if isinstance(exc, McpError) else McpError(_said(exc)))
            elif not conn.error:
                conn.error = _said(exc)
        finally:
            conn.session = None
            stopping = conn._stop is not None and conn._stop.is_set()
            if ready.done() and not ready.exception() and not stopping:
                conn.state = "restarting"
                conn.error = conn.error or "it exited"
                conn.failures += 1
                if conn.failures >= MAX_RESTARTS:
                    conn.state = "failed"
                    conn.reported = False  # given up: said, even after an earlier report
                conn.next_try = time.monotonic() + BACKOFF[min(conn.failures, len(BACKOFF)) - 1]
                self._report(conn)
            elif ready.done() and ready.exception() is not None:
                ready.exception()  # retrieved: reported by `_ready`

    def _report_dropped(self, conn: Connection) -> None:
        self._say(f"MCP server {conn.config.name}: {conn.dropped}")

    @contextlib.asynccontextmanager
    async def _transport(self, conn: Connection, died: asyncio.Event) -> AsyncIterator[Any]:
        config = conn.config
        if config.transport == "http":
            import httpx
            from mcp.client.streamable_http import streamable_http_client

            async with (
                httpx.AsyncClient(
                    headers=dict(config.headers), timeout=httpx.Timeout(30, read=300)
                ) as http,
                streamable_http_client(str(config.url), http_client=http) as (read, write, _),
            ):
                yield read, write
            return
        if self.planner is None:
            raise McpError(
                f"a local server runs only in the sandbox, and there is none here "
                f"({self.sandbox_problem or 'no sandbox'})",
                final=True,
            )
        try:
            launch = await asyncio.to_thread(self.planner, config)
        except LaunchError as exc:
            raise McpError(str(exc), final=True) from None
        try:
            async with _stdio(launch, conn, died) as streams:
                yield streams
        finally:
            notes = await asyncio.to_thread(launch.release)
            for note in notes:
                logger.warning("after the MCP server %s: %s", config.name, visible(note))

    def _elicitation(self, conn: Connection) -> Any:
        async def callback(context: Any, params: Any) -> Any:
            from mcp import types

            asker = conn._askers[-1] if conn._askers else None
            host = self._host_loop
            if asker is None or host is None or host.is_closed():
                return types.ElicitResult(action="decline")
            future = asyncio.run_coroutine_threadsafe(asker(conn.config.name, params), host)
            try:
                answer = await asyncio.wrap_future(future)
            except Exception:
                logger.exception("the elicitation from %s failed", conn.config.name)
                return types.ElicitResult(action="decline")
            return answer

        return callback

    async def _stop_one(self, conn: Connection) -> None:
        if conn._stop is not None:
            conn._stop.set()
        owner, conn._owner = conn._owner, None
        if owner is not None:
            try:
                await asyncio.wait_for(asyncio.shield(owner), 5)
            except (TimeoutError, Exception):
                owner.cancel()
                with contextlib.suppress(BaseException):
                    await owner

    async def close(self) -> None:
        """Stop every server, then the thread."""
        loop = self._loop
        if loop is None:
            return
        conns = list(self.connections.values())

        async def stop_all() -> None:
            await asyncio.gather(*(self._stop_one(c) for c in conns), return_exceptions=True)
            for c in conns:
                c.state = "stopped"

        with contextlib.suppress(Exception):
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(stop_all(), loop))
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 10)
            if not self._thread.is_alive():
                loop.close()
        self._loop = None

    def status(self) -> list[dict[str, Any]]:
        return [c.summary() for c in self.connections.values()]

    async def check(self) -> list[dict[str, Any]]:
        """Start every server (as a task would) and say how each is: `talos doctor`,
        `talos mcp list`."""
        await self.tools()
        return self.status()


def _closed(exc: BaseException) -> bool:
    """The SDK's error for a connection that closed under a request."""
    from mcp.types import CONNECTION_CLOSED

    return getattr(getattr(exc, "error", None), "code", None) == CONNECTION_CLOSED


def _said(exc: BaseException) -> str:
    """An exception as the person reads it: redacted, escaped, one line, bounded. A task
    group's wrapper is unwrapped to the first error inside."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc) or type(exc).__name__
    return visible(redact(text), single_line=True)[:300]


@contextlib.asynccontextmanager
async def _stdio(launch: Launch, conn: Connection, died: asyncio.Event) -> AsyncIterator[Any]:
    """The server's process and two streams of SDK messages, read a line at a time with a
    limit of MAX_MESSAGE (past it, the server is stopped and that said)."""
    import anyio
    from mcp import types
    from mcp.shared.message import SessionMessage

    errlog = tempfile.TemporaryFile()  # noqa: SIM115 - closed when the server stops
    try:
        proc = await asyncio.create_subprocess_exec(
            *launch.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=errlog,
            env=launch.env,
            pass_fds=(launch.options_fd,),
            start_new_session=True,
            limit=MAX_MESSAGE,
        )
    except OSError as exc:
        errlog.close()
        raise McpError(f"could not start: {_said(exc)}") from None
    finally:
        launch.close()
    read_send, read_recv = anyio.create_memory_object_stream[Any](0)
    write_send, write_recv = anyio.create_memory_object_stream[Any](0)
    assert proc.stdout is not None and proc.stdin is not None
    stdout, stdin = proc.stdout, proc.stdin

    async def reader() -> None:
        while True:
            try:
                line = await stdout.readline()
            except (ValueError, asyncio.LimitOverrunError):
                conn.error = f"it sent a message over {MAX_MESSAGE // 1024 // 1024} MB: stopped"
                break
            if not line:
                break
            if not line.strip():
                continue
            try:
                message = types.JSONRPCMessage.model_validate_json(line)
            except Exception as exc:
                await read_send.send(exc)
                continue
            await read_send.send(SessionMessage(message))

    async def writer() -> None:
        async with write_recv:
            async for item in write_recv:
                data = item.message.model_dump_json(by_alias=True, exclude_none=True)
                stdin.write(data.encode() + b"\n")
                await stdin.drain()

    async def watch() -> None:
        try:
            await reader()
        finally:
            await _kill(proc)
            stopping = conn._stop is not None and conn._stop.is_set()
            if not conn.error and not stopping:
                conn.error = _exit_said(proc.returncode, errlog)
            died.set()  # how it ended is known before the session hears the stream close
            await read_send.aclose()

    tasks = [asyncio.ensure_future(watch()), asyncio.ensure_future(writer())]
    try:
        yield read_recv, write_send
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await _kill(proc)
        stdin.close()
        with contextlib.suppress(Exception):  # to its end: the pipes close, then the transport
            while await asyncio.wait_for(stdout.read(1 << 20), 5):
                pass
        errlog.close()


def _exit_said(code: int | None, errlog: Any) -> str:
    """How a server ended, with the last of its stderr (redacted, escaped, one line)."""
    tail = ""
    with contextlib.suppress(OSError, ValueError):
        errlog.seek(max(0, os.fstat(errlog.fileno()).st_size - MAX_STDERR))
        tail = errlog.read().decode(errors="replace").strip()
    what = f"it exited (code {code})" if code is not None else "it exited"
    if tail:
        last = visible(redact(tail.splitlines()[-1]), single_line=True)[:300]
        what += f": {last}"
    return what


async def _kill(proc: asyncio.subprocess.Process) -> None:
    """The server's whole process group, then reaped."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        await asyncio.wait_for(proc.wait(), 10)
