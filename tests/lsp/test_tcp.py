"""`talos-ls --tcp`: loopback only, a token from a private file, one session, and probes or
intruders that change nothing (`talos_ls/lsp/tcp.py`). The real server process, real sockets
(port 0: the server picks a free port and logs it), the scripted model."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from talos_ls.demo.scripted_model import ScriptedModelServer
from talos_ls.server import main

from .conftest import WAIT_S, server_env

SERVER = [sys.executable, "-m", "talos_ls.server"]


def token_file(tmp_path: Path, mode: int = 0o600, token: str | None = None) -> tuple[Path, str]:
    token = secrets.token_urlsafe(24) if token is None else token
    path = tmp_path / f"token-{secrets.token_hex(4)}"
    path.write_text(token + "\n")
    path.chmod(mode)
    return path, token


def test_tcp_refuses_other_hosts_and_tokens_others_could_read(tmp_path, capsys):
    """Each refusal is a usage error (exit 2) that says what is wrong, before anything listens:
    the real process for one, `main` itself for the rest (the same code, without a start each)."""
    good, _ = token_file(tmp_path)
    readable, _ = token_file(tmp_path, 0o644)
    short, _ = token_file(tmp_path, token="short")
    link = tmp_path / "link"
    link.symlink_to(good)
    done = subprocess.run(
        [*SERVER, "--tcp", "0.0.0.0:0", "--token-file", str(good)],
        capture_output=True,
        text=True,
        env=server_env(tmp_path),
        timeout=60,
    )
    assert done.returncode == 2 and "this machine only" in done.stderr, done.stderr
    assert done.stdout == ""
    cases = [
        (["--tcp", "192.168.1.7:0", "--token-file", str(good)], "this machine only"),
        (["--tcp", "[::]:0", "--token-file", str(good)], "this machine only"),
        (["--tcp", "example.com:0", "--token-file", str(good)], "this machine only"),
        (["--tcp", "127.0.0.1:0"], "--tcp needs --token-file"),
        (["--tcp", "127.0.0.1:0", "--token-file", str(readable)], "chmod 600"),
        (["--tcp", "127.0.0.1:0", "--token-file", str(short)], "one token of 16"),
        (["--tcp", "127.0.0.1:0", "--token-file", str(link)], "symbolic link"),
        (["--tcp", "127.0.0.1:0", "--token-file", str(tmp_path / "none")], "cannot be opened"),
        (["--token-file", str(good)], "goes with --tcp"),
    ]
    for argv, why in cases:
        with pytest.raises(SystemExit) as stopped:
            main(argv)
        assert stopped.value.code == 2, argv
        assert re.search(why, capsys.readouterr().err), argv


class Conn:
    """One TCP connection speaking LSP frames."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.seen: list[dict[str, Any]] = []

    @classmethod
    async def open(cls, port: int) -> Conn:
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    async def send(self, message: dict[str, Any] | bytes) -> None:
        """Send a message; to a connection the server closed already, nothing."""
        body = message if isinstance(message, bytes) else json.dumps(message).encode()
        with contextlib.suppress(ConnectionError):
            self.writer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            await self.writer.drain()

    async def request(self, msg_id: Any, method: str, params: Any = None) -> None:
        await self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})

    async def next(self) -> dict[str, Any] | None:
        """The next message, or None when the server closed the connection."""
        try:
            header = await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), WAIT_S)
        except (asyncio.IncompleteReadError, ConnectionError):
            return None
        length = int(re.search(rb"Content-Length: (\d+)", header).group(1))
        message = json.loads(await asyncio.wait_for(self.reader.readexactly(length), WAIT_S))
        self.seen.append(message)
        return message

    async def answer(self, msg_id: Any) -> dict[str, Any]:
        """The response to `msg_id` (notifications on the way are kept in `seen`)."""
        while (message := await self.next()) is not None:
            if message.get("id") == msg_id and "method" not in message:
                return message
        raise AssertionError(f"the connection closed before the answer to {msg_id!r}")

    async def closed(self) -> bool:
        """The server closes this connection (whatever it sent before)."""
        while await self.next() is not None:
            pass
        return True

    def close(self) -> None:
        self.writer.close()


async def listening(proc: asyncio.subprocess.Process) -> int:
    """The port the server logged that it listens on."""
    assert proc.stderr is not None
    while line := await asyncio.wait_for(proc.stderr.readline(), WAIT_S):
        if found := re.search(rb"listens on \S+ port (\d+)", line):
            return int(found.group(1))
    raise AssertionError("talos-ls --tcp never said where it listens")


@pytest.fixture
def model():
    server = ScriptedModelServer()
    yield server
    server.close()


def hello(token: str | None, ws: Path, store: Path, model_url: str) -> dict[str, Any]:
    options: dict[str, Any] = {
        "model": "fake-model",
        "baseUrl": model_url,
        "storeUrl": f"sqlite:///{store}",
        "prices": {"fake-model": {"input": 1, "cached_input": 0.5, "output": 2}},
    }
    if token is not None:
        options["tcpToken"] = token
    return {
        "processId": os.getpid(),
        "rootUri": ws.as_uri(),
        "capabilities": {},
        "workspaceFolders": [{"uri": ws.as_uri(), "name": ws.name}],
        "initializationOptions": options,
    }


async def test_one_session_with_the_token_and_nothing_for_probes_or_intruders(tmp_path, model):
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "app.py").write_text("def main():\n    return 1\n")
    path, token = token_file(tmp_path)
    store = tmp_path / "talos.db"
    proc = await asyncio.create_subprocess_exec(
        *SERVER,
        "--tcp",
        "127.0.0.1:0",
        "--token-file",
        str(path),
        env=server_env(tmp_path),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    start = {"command": "talos.task.start", "arguments": [{"prompt": "touch pwned"}]}
    try:
        port = await listening(proc)
        # A port probe: connect and close. The server goes on listening.
        (await Conn.open(port)).close()
        # Before initialize: no task, no transcript; refused and closed.
        early = await Conn.open(port)
        await early.request(1, "workspace/executeCommand", start)
        assert (await early.answer(1))["error"]["code"] == -32002
        assert await early.closed()
        # Bytes that are no message; a wrong token; no token: each refused and closed.
        for first in (
            b"GET / HTTP/1.1",
            hello("x" * 32, ws, store, model.url),
            hello(None, ws, store, model.url),
        ):
            conn = await Conn.open(port)
            if isinstance(first, bytes):
                await conn.send(first)
            else:
                await conn.request(7, "initialize", first)
            assert await conn.closed()
            (error,) = [m for m in conn.seen if "error" in m]
            assert (
                "tcpToken" in error["error"]["message"] or "initialize" in error["error"]["message"]
            ), error
            assert not [m for m in conn.seen if "result" in m]
        # The client with the token: the session.
        client = await Conn.open(port)
        await client.request(1, "initialize", hello(token, ws, store, model.url))
        assert (await client.answer(1))["result"]["serverInfo"]["name"] == "talos-ls"
        await client.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        for n in range(2, 400):
            await client.request(
                n, "workspace/executeCommand", {"command": "talos.status", "arguments": [{}]}
            )
            if (await client.answer(n))["result"]["folders"]:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the folder was never opened")
        # An intruder now, even with the token: refused at once, and it hears nothing of the
        # session; the session's replies still come to the session.
        intruder = await Conn.open(port)
        await intruder.request(900, "initialize", hello(token, ws, store, model.url))
        await intruder.request(901, "workspace/executeCommand", start)
        assert await intruder.closed()
        assert all(m.get("id") in (None, 900, 901) and "error" in m for m in intruder.seen)
        assert "one client at a time" in intruder.seen[0]["error"]["message"]
        await client.request(
            500, "workspace/executeCommand", {"command": "talos.task.list", "arguments": [{}]}
        )
        assert (await client.answer(500))["result"] == []  # nobody else started a task
        assert model.requests == []
        await client.request(501, "shutdown")
        assert (await client.answer(501))["result"] is None
        await client.send({"jsonrpc": "2.0", "method": "exit"})
        await asyncio.wait_for(proc.wait(), WAIT_S)
        assert await proc.stdout.read() == b""  # the protocol went to the socket only
        log = (await proc.stderr.read()).decode()
        assert token not in log
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


async def test_the_sessions_connection_closing_ends_the_server(tmp_path, model):
    ws = tmp_path / "ws"
    ws.mkdir()
    path, token = token_file(tmp_path)
    proc = await asyncio.create_subprocess_exec(
        *SERVER,
        "--tcp",
        "localhost:0",
        "--token-file",
        str(path),
        env=server_env(tmp_path),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        port = await listening(proc)
        client = await Conn.open(port)
        await client.request(1, "initialize", hello(token, ws, tmp_path / "t.db", model.url))
        assert "result" in await client.answer(1)
        client.close()  # as stdin's end does: the session is over, and the server
        await asyncio.wait_for(proc.wait(), WAIT_S)
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
