"""`talos-ls --tcp` against a local process that tries to cost the server memory or lock the
person's client out before proving anything (`talos_ls/lsp/tcp.py`): the real server process,
real sockets, raw LSP frames.

- A connection's first message is bounded far below the session's (`MAX_HELLO`, not 64 MiB):
  a larger length is refused at once, unread.
- Connections that never initialize cannot hold the waiting slots: with all `MAX_WAITING`
  taken by idle probers, the client with the token still gets in, and the prober that waited
  longest is dropped and told why.
"""

from __future__ import annotations

import asyncio

import pytest

from talos_ls.demo.scripted_model import ScriptedModelServer
from talos_ls.lsp.tcp import MAX_HELLO, MAX_WAITING
from talos_ls.lsp.transport import MAX_BODY

from ..lsp.conftest import WAIT_S, server_env
from ..lsp.test_tcp import SERVER, Conn, hello, listening, token_file


@pytest.fixture
def model():
    server = ScriptedModelServer()
    yield server
    server.close()


async def test_idle_probers_neither_cost_much_nor_lock_the_client_out(tmp_path, model):
    ws = tmp_path / "ws"
    ws.mkdir()
    path, token = token_file(tmp_path)
    store = tmp_path / "talos.db"
    proc = await asyncio.create_subprocess_exec(
        *SERVER,
        "--tcp",
        "127.0.0.1:0",
        "--token-file",
        str(path),
        env=server_env(tmp_path),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    probers: list[Conn] = []
    try:
        port = await listening(proc)
        # A first message announced as 1 MiB (64 times less than the session may send, far more
        # than an initialize): refused at once, naming the bound, without waiting for the body.
        assert MAX_HELLO < 2**20 < MAX_BODY
        big = await Conn.open(port)
        big.writer.write(b"Content-Length: %d\r\n\r\n{" % 2**20)
        await big.writer.drain()
        (error,) = [m for m in [await big.next()] if m and "error" in m]
        assert f"over the limit of {MAX_HELLO} bytes" in error["error"]["message"], error
        assert await big.closed()
        # Every waiting slot taken by a prober that connects and says nothing.
        # (The server accepts connections in the order they were made: these before the client.)
        for _ in range(MAX_WAITING):
            probers.append(await Conn.open(port))
        client = await Conn.open(port)
        await client.request(1, "initialize", hello(token, ws, store, model.url))
        answer = await client.answer(1)
        assert answer.get("result", {}).get("serverInfo", {}).get("name") == "talos-ls", answer
        # The oldest prober was dropped, and told why; it heard nothing of the session.
        assert await probers[0].closed()
        (dropped,) = probers[0].seen
        assert "dropped" in dropped["error"]["message"], dropped
        assert "send initialize as soon as you connect" in dropped["error"]["message"]
        await client.request(2, "shutdown")
        assert (await client.answer(2))["result"] is None
        await client.send({"jsonrpc": "2.0", "method": "exit"})
        await asyncio.wait_for(proc.wait(), WAIT_S)
    finally:
        for conn in probers:
            conn.close()
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
