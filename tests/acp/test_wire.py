"""The ACP wire's line reader (`talos_ls/acp/wire.py: LineTransport`) on a real stream: a line
too long to read that answers one of the agent's own requests fails that request at once (an
error in its place, never an answer on the wire), found by the id at the line's start only;
any other line too long is the id-null invalid request it always was."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from acp.exceptions import RequestError

from talos_ls.acp.wire import MAX_LINE_BYTES, LineTransport, too_large

BIG = MAX_LINE_BYTES + 1024


def huge(head: str, tail: str = '"}}') -> bytes:
    return head.encode() + b"x" * BIG + tail.encode() + b"\n"


async def transport(*lines: bytes) -> tuple[LineTransport, list[dict[str, Any]]]:
    reader = asyncio.StreamReader(limit=64 * 1024)
    for line in lines:
        reader.feed_data(line)
    reader.feed_eof()
    written: list[dict[str, Any]] = []

    async def write(data: bytes) -> None:
        written.extend(json.loads(line) for line in data.splitlines())

    return LineTransport(reader, write), written


async def asked(wire: LineTransport, *ids: int) -> None:
    for msg_id in ids:
        await wire.send({"jsonrpc": "2.0", "id": msg_id, "method": "fs/read_text_file"})


async def test_a_too_long_answer_to_a_request_waiting_fails_that_request():
    after = b'{"jsonrpc": "2.0", "id": 9, "result": {"content": "small"}}\n'
    wire, written = await transport(
        huge('{"jsonrpc":"2.0","id":7,"result":{"content":"'),
        huge('{"id": 8, "jsonrpc": "2.0", "error": {"code": 1, "message": "'),
        after,
    )
    await asked(wire, 7, 8, 9)
    first, second, third = [await wire.receive() for _ in range(3)]
    assert first is not None and second is not None
    assert first["id"] == 7 and first["error"]["message"].startswith("the answer to fs/read")
    for failed in (first, second):
        raised = RequestError(failed["error"]["code"], "", failed["error"]["data"])  # the SDK's
        assert (too_large(raised) or 0) > MAX_LINE_BYTES
    assert too_large(RequestError(-32600, "", {"talosTooLarge": True})) is None
    assert too_large(RequestError(-32002, "", None)) is None
    assert second["id"] == 8
    assert third == json.loads(after)  # the line after is read as usual
    assert written == [w for w in written if "method" in w]  # no error sent for an answer
    assert await wire.receive() is None


async def test_a_too_long_line_with_an_id_never_asked_or_not_at_its_start_is_refused():
    """Ids the agent never asked (or already answered), an id nested in the result, a string
    id, a request: each the id-null -32600 of a line too long; no request of ours fails."""
    wire, written = await transport(
        b'{"jsonrpc": "2.0", "id": 3, "result": {}}\n',  # 3 answered: no longer waiting
        huge('{"jsonrpc": "2.0", "id": 3, "result": {"content": "'),
        huge('{"jsonrpc": "2.0", "id": 12345, "result": {"content": "'),
        huge('{"jsonrpc": "2.0", "result": {"id": 4, "content": "'),
        huge('{"jsonrpc": "2.0", "id": "4", "result": {"content": "'),
        huge('{"jsonrpc": "2.0", "id": 4, "method": "session/new", "params": {"cwd": "'),
        huge(" " * 2048 + '{"id": 4, "result": {"content": "'),  # its id past the bytes read
    )
    await asked(wire, 3, 4)
    assert (await wire.receive()) == {"jsonrpc": "2.0", "id": 3, "result": {}}
    assert await wire.receive() is None  # everything else was refused
    errors = [w for w in written if "error" in w]
    assert len(errors) == 6
    assert all(e["id"] is None and e["error"]["code"] == -32600 for e in errors), errors
    assert wire.asked == {4: "fs/read_text_file"}  # still waiting, untouched
