"""A hostile ACP client against the real `talos-ls --acp`: malformed lines, a 64 MiB line,
unknown methods, wrong types, paths that climb or do not exist, answers never offered,
requests after stdin closed. Each gets a JSON-RPC error; the process stays up; nothing is
applied. And stdout carries only protocol lines, however loud the agent is."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from talos_ls.demo.scripted_model import reply
from tests.acp.conftest import WAIT_S, call, ended, server_env, start_agent
from tests.system import require_sandbox, sandbox_works

pytestmark = pytest.mark.slow


NO_ANSWER = object()  # what `Raw.answer` returns for a request the person never answers


class Raw:
    """The process driven line by line: what is sent is bytes, what comes back is every line,
    kept raw (`lines`) and parsed (`messages`). Requests from the agent are answered by
    `answer(message) -> result` (default: a cancelled permission, an error otherwise;
    NO_ANSWER: none)."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[bytes] = []
        self.messages: list[dict[str, Any]] = []
        # None: the agent's requests are never answered
        self.answer: Any = lambda m: {"outcome": {"outcome": "cancelled"}}
        self.reading = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        assert self.process.stdout is not None
        while line := await self.process.stdout.readline():
            self.lines.append(line)
            message = json.loads(line)
            self.messages.append(message)
            if "method" in message and "id" in message and self.answer is not None:
                try:
                    result: Any = {"result": self.answer(message)}
                except Exception as exc:
                    result = {"error": {"code": -32603, "message": str(exc)}}
                if result.get("result") is not NO_ANSWER:
                    await self.send({"jsonrpc": "2.0", "id": message["id"], **result})

    async def send(self, message: Any) -> None:
        await self.write(json.dumps(message).encode() + b"\n")

    async def write(self, data: bytes) -> None:
        assert self.process.stdin is not None
        if self.process.stdin.is_closing():
            return
        self.process.stdin.write(data)
        await self.process.stdin.drain()

    async def request(self, msg_id: Any, method: str, params: Any) -> None:
        await self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})

    async def reply_to(self, msg_id: Any) -> dict[str, Any]:
        return await self.until(
            lambda: next(
                (m for m in self.messages if m.get("id") == msg_id and "method" not in m), None
            ),
            f"the reply to {msg_id!r}",
        )

    async def until(self, check, what: str) -> Any:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WAIT_S
        while not (found := check()):
            if loop.time() > deadline or self.reading.done():
                raise AssertionError(f"waited for {what}")
            await asyncio.sleep(0.02)
        return found

    async def close(self) -> int | None:
        code = await ended(self.process)
        await asyncio.wait_for(self.reading, WAIT_S)
        return code


async def start_raw(home: Path, args: tuple[str, ...] = (), env: dict | None = None) -> Raw:
    agent = await start_agent(home, env=env, args=args)
    return Raw(agent.process)


INIT = {"protocolVersion": 1, "clientCapabilities": {}}


def rpc(msg_id: Any, method: str, params: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}).encode()


async def test_bad_lines_each_get_an_error_and_the_process_stays_up(home, ws):
    raw = await start_raw(home)
    try:
        await raw.request(1, "initialize", INIT)
        bad: list[tuple[bytes, Any, int]] = [
            (b"this is not json", None, -32700),
            (b"\xff\xfe\xfd not utf-8", None, -32700),
            (b"[1, 2]", None, -32600),
            (b'"a string"', None, -32600),
            (b'{"jsonrpc": "1.0", "id": 2, "method": "initialize"}', 2, -32600),
            (b'{"jsonrpc": "2.0", "id": {"no": 1}, "method": "initialize"}', None, -32600),
            (b'{"jsonrpc": "2.0", "id": 3, "method": 7}', 3, -32600),
            (rpc(4, "no/such/method", {}), 4, -32601),
            (rpc(5, "session/new", {"cwd": ["x"]}), 5, -32602),
            (rpc(6, "session/prompt", {"sessionId": 1, "prompt": "hi"}), 6, -32602),
            (rpc(7, "session/set_mode", {"sessionId": "s1", "modeId": "full-auto"}), 7, -32002),
            (rpc(8, "authenticate", {"methodId": "sk-secret-key-123"}), 8, -32602),
            (rpc(9, "session/new", {"cwd": "\ud800"}), 9, -32602),
        ]
        for line, _, _ in bad:
            await raw.write(line + b"\n")
        huge = b'{"jsonrpc": "2.0", "id": 10, "method": "session/new", "params": {"cwd": "'
        await raw.write(huge + b"a" * (64 * 1024 * 1024) + b'"}}\n')
        await raw.request(11, "initialize", INIT)
        assert "result" in await raw.reply_to(11)  # still up, after all of it
        errors = [m for m in raw.messages if "error" in m]
        for _, msg_id, code in bad:
            assert any(e["id"] == msg_id and e["error"]["code"] == code for e in errors), (
                msg_id,
                code,
                errors,
            )
        too_long = [e for e in errors if "Talos reads at most" in e["error"]["message"]]
        assert len(too_long) == 1 and too_long[0]["id"] is None
        assert len(errors) == len(bad) + 1
        assert all(len(line) < 10_000 for line in raw.lines)  # nothing echoed back whole
        assert "sk-secret-key-123" not in b"".join(raw.lines).decode()
    finally:
        assert await raw.close() == 0
    log = (home.parent / f"{home.name}-stderr.log").read_text()
    assert "sk-secret-key-123" not in log and "aaaaaaaaaaaaaaaa" not in log


async def test_requests_sent_before_stdin_closes_are_all_answered(home, ws):
    raw = await start_raw(home)
    await raw.request(1, "initialize", INIT)
    await raw.request(2, "session/new", {"cwd": str(ws), "mcpServers": []})
    await raw.request(3, "session/list", {})
    await raw.request(4, "no/such", {})
    assert await raw.close() == 0
    replies = {m["id"]: m for m in raw.messages if "id" in m and "method" not in m}
    assert set(replies) == {1, 2, 3, 4}
    assert "result" in replies[2] and "error" in replies[4]


async def test_stdin_closed_during_a_permission_prompt_ends_the_turn_cancelled(home, ws, model):
    """The client closes its end while the agent waits for a permission: the prompt is
    answered `cancelled`, the command never runs, the process exits 0."""
    model.script = [
        reply(tool_calls=[call("c1", "run_command", command="touch made.txt")]),
        reply("never"),
    ]
    raw = await start_raw(home)
    raw.answer = None
    await raw.request(1, "initialize", INIT)
    await raw.request(2, "session/new", {"cwd": str(ws), "mcpServers": []})
    sid = (await raw.reply_to(2))["result"]["sessionId"]
    prompt = [{"type": "text", "text": "make a file"}]
    await raw.request(3, "session/prompt", {"sessionId": sid, "prompt": prompt})
    await raw.until(
        lambda: any(m.get("method") == "session/request_permission" for m in raw.messages),
        "the permission prompt",
    )
    assert await raw.close() == 0
    (done,) = [m for m in raw.messages if m.get("id") == 3]
    assert done["result"]["stopReason"] == "cancelled"
    assert not (ws / "made.txt").exists()


async def test_a_client_cannot_point_the_agent_outside_a_real_folder(agent, ws, tmp_path):
    from acp.exceptions import RequestError
    from acp.schema import AudioContentBlock, ImageContentBlock, TextContentBlock

    (tmp_path / "a-file").write_text("x")
    await agent.start()
    for cwd, said in [
        ("ws", "absolute"),
        (str(tmp_path / "missing"), "existing directory"),
        (str(tmp_path / "a-file"), "not a directory"),
        (str(ws / ".." / "missing" / ".."), "existing directory"),
        (str(ws) + "\x00/etc", "absolute path"),
    ]:
        with pytest.raises(RequestError) as caught:
            await agent.conn.new_session(cwd=cwd, mcp_servers=[])
        assert said in str(caught.value), (cwd, str(caught.value))
    sid = await agent.new(ws)
    for prompt, said in [
        ([TextContentBlock(type="text", text="x" * 20_001)], "longer than"),
        ([TextContentBlock(type="text", text="   ")], "empty"),
        ([ImageContentBlock(type="image", data="AAAA", mime_type="image/png")], "image blocks"),
        ([AudioContentBlock(type="audio", data="AAAA", mime_type="audio/wav")], "audio blocks"),
    ]:
        with pytest.raises(RequestError) as caught:
            await agent.conn.prompt(session_id=sid, prompt=prompt)
        assert said in str(caught.value)
    with pytest.raises(RequestError):
        await agent.conn.prompt(session_id="s" + "1" * 20, prompt=[prompt[0]])


async def test_a_permission_answer_never_offered_is_a_denial(agent, model, ws):
    require_sandbox()
    model.script = [
        reply(tool_calls=[call("c1", "run_command", command="touch made.txt")]),
        reply(tool_calls=[call("c2", "propose_edit", path="src/app.py", content="x = 1\n")]),
        reply("done"),
    ]
    await agent.start()
    agent.person.permit = ["o99", "not-an-option"]  # the command's prompt, then Apply's
    sid = await agent.new(ws)
    assert (await agent.prompt(sid, "make a file")).stop_reason == "end_turn"
    assert not (ws / "made.txt").exists()
    assert (ws / "src" / "app.py").read_text() == "def main():\n    return 1\n"
    assert agent.person.writes == []
    assert "never offered" in agent.person.text(sid)
    results = [m["content"] for m in model.requests[1]["body"]["messages"] if m["role"] == "tool"]
    assert "not run" in results[0]


async def test_only_protocol_lines_on_stdout_however_loud(home, ws, model, tmp_path):
    """Debug logging, Python's own verbose import trace and warnings, a stray print at exit:
    every stdout line is JSON-RPC 2.0; the stray print is on stderr."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import atexit, warnings\n"
        "atexit.register(lambda: print('STRAY PRINT AT EXIT', flush=True))\n"
        "warnings.simplefilter('always')\n"
    )
    model.script = [
        reply("Looking.", tool_calls=[call("c1", "read_file", path="src/app.py")]),
        reply(tool_calls=[call("c2", "run_command", command="echo TO STDOUT OF A COMMAND")]),
        reply(tool_calls=[call("c3", "run_command", command="touch asked.txt")]),
        reply("Done."),
    ]
    env = {"PYTHONPATH": f"{site}:{server_env(home).get('PYTHONPATH', '')}", "PYTHONVERBOSE": "1"}
    raw = await start_raw(home, args=("--log-level", "debug"), env=env)
    try:
        await raw.request(1, "initialize", INIT)
        await raw.request(2, "session/new", {"cwd": str(ws), "mcpServers": []})
        sid = (await raw.reply_to(2))["result"]["sessionId"]
        prompt = [{"type": "text", "text": "look around"}]
        await raw.request(3, "session/prompt", {"sessionId": sid, "prompt": prompt})
        assert (await raw.reply_to(3))["result"]["stopReason"] == "end_turn"
    finally:
        assert await raw.close() == 0
    for line in raw.lines:
        message = json.loads(line)
        assert message["jsonrpc"] == "2.0" and line.endswith(b"\n") and line.count(b"\n") == 1
    updates = [m for m in raw.messages if m.get("method") == "session/update"]
    kinds = {m["params"]["update"]["sessionUpdate"] for m in updates}
    assert {"agent_message_chunk", "tool_call", "tool_call_update", "usage_update"} <= kinds
    log = (home.parent / f"{home.name}-stderr.log").read_text()
    assert "STRAY PRINT AT EXIT" in log and log.count("import ") > 100  # loud, elsewhere
    asked = [m for m in raw.messages if m.get("method") == "session/request_permission"]
    # `touch` is asked (and the prompt cancelled: denied); without a sandbox `echo` is too
    assert len(asked) == (1 if sandbox_works() else 2) and not (ws / "asked.txt").exists()


async def test_a_store_that_cannot_open_is_a_server_error_not_a_crash(tmp_path, model, ws):
    from tests.acp.conftest import config_toml, write_config

    home = tmp_path / "home"
    write_config(home, config_toml(model, Path("/proc/no-such-dir/talos.db")))
    raw = await start_raw(home)
    try:
        await raw.request(1, "initialize", INIT)
        await raw.request(2, "session/new", {"cwd": str(ws), "mcpServers": []})
        failed = await raw.reply_to(2)
        assert failed["error"]["code"] == -32000 and "store" in failed["error"]["message"]
        await raw.request(3, "session/list", {})
        assert "result" in await raw.reply_to(3)
    finally:
        assert await raw.close() == 0


async def test_a_session_never_made_is_resource_not_found_naming_it(home, ws):
    """prompt, load and set_mode on a session this process does not know: -32002 with the id
    in `data` (ACP's "session not found"), the id escaped in the message and bounded in data;
    a cancel of one is a notification, never answered."""
    raw = await start_raw(home)
    try:
        await raw.request(1, "initialize", INIT)
        hostile = "s\x1b]0;owned\x07\u202e" + "9" * 10_000
        text = [{"type": "text", "text": "hi"}]
        asks: list[tuple[Any, str, dict[str, Any], str]] = [
            (2, "session/prompt", {"prompt": text}, "s" + "0" * 20),
            (3, "session/load", {"cwd": str(ws), "mcpServers": []}, "s" + "0" * 20),
            (4, "session/load", {"cwd": str(ws), "mcpServers": []}, "../../etc/passwd"),
            (5, "session/set_mode", {"modeId": "ask"}, "s" + "0" * 20),
            (6, "session/prompt", {"prompt": text}, hostile),
        ]
        await raw.send(
            {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s" + "1" * 20}}
        )
        for msg_id, method, params, sid in asks:
            await raw.request(msg_id, method, {"sessionId": sid, **params})
        for msg_id, method, _, sid in asks:
            error = (await raw.reply_to(msg_id))["error"]
            assert error["code"] == -32002, (method, error)
            assert error["message"].startswith("Resource not found: " + method), error
            assert "no session" in error["message"]
            assert error["data"]["sessionId"] == sid[:256]
        shown = (await raw.reply_to(6))["error"]["message"]
        assert "\x1b" not in shown and "\u202e" not in shown and len(shown) < 300
        await raw.request(7, "session/new", {"cwd": str(ws), "mcpServers": []})
        assert "result" in await raw.reply_to(7)
    finally:
        assert await raw.close() == 0
    assert [m for m in raw.messages if "id" in m and "method" not in m and m["id"] is None] == []


FS = {**INIT, "clientCapabilities": {"fs": {"readTextFile": True}}}


async def test_an_editor_buffer_too_large_to_read_is_never_replaced_by_the_disk(home, ws, model):
    """The editor's answer to `fs/read_text_file` is over the line limit: the read fails at
    once saying so (no wait for an answer that already came), read_file tells the model the
    file is too large in the editor, and no edit is proposed on the disk's text instead."""
    (ws / "src" / "app.py").write_text("DISK-ONLY-TEXT = 1\n")
    model.script = [
        reply(tool_calls=[call("c1", "read_file", path="src/app.py")]),
        reply(tool_calls=[call("c2", "read_file", path="src/app.py", start_line=1)]),
        reply(
            tool_calls=[
                call(
                    "c3",
                    "propose_edit",
                    path="src/app.py",
                    blocks=[{"search": "1", "replace": "2"}],
                )
            ]
        ),
        reply("done"),
    ]
    raw = await start_raw(home)
    reads: list[dict[str, Any]] = []

    def answer(message: dict[str, Any]) -> Any:
        if message["method"] == "fs/read_text_file":
            reads.append(message)
            return {"content": "x = 1\n" * (1536 * 1024)}  # 9 MiB, unsaved
        return {"outcome": {"outcome": "cancelled"}}

    raw.answer = answer
    try:
        await raw.request(1, "initialize", FS)
        await raw.request(2, "session/new", {"cwd": str(ws), "mcpServers": []})
        sid = (await raw.reply_to(2))["result"]["sessionId"]
        await raw.request(
            3, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "read"}]}
        )
        assert (await raw.reply_to(3))["result"]["stopReason"] == "end_turn"
    finally:
        assert await raw.close() == 0
    results = [m["content"] for m in model.requests[-1]["body"]["messages"] if m["role"] == "tool"]
    assert len(results) == 3 and len(reads) == 3
    for result in results:
        assert "DISK-ONLY-TEXT" not in result, results
        assert "editor's text of src/app.py is over 8 MiB: too large to read" in result, result
    assert [m for m in raw.messages if "error" in m and m.get("id") is None] == []  # not answered
    assert not [m for m in raw.messages if m.get("method") == "session/request_permission"]
    assert (ws / "src" / "app.py").read_text() == "DISK-ONLY-TEXT = 1\n"


async def test_stdin_closed_during_an_apply_prompt_leaves_no_task_and_no_traceback(home, ws, model):
    """The request waiting on the person when the input closes is failed by the closing
    connection while its turn is cancelled: its task is retrieved, nothing in the log says it
    leaked, nothing is written."""
    model.script = [
        reply(tool_calls=[call("c1", "propose_edit", path="src/app.py", content="owned = 1\n")]),
        reply("never"),
    ]
    raw = await start_raw(home)
    prompts: list[dict[str, Any]] = []

    def answer(message: dict[str, Any]) -> Any:
        if message["method"] == "fs/read_text_file":  # the editor answers; the person never
            return {"content": Path(message["params"]["path"]).read_text()}
        prompts.append(message)
        return NO_ANSWER

    raw.answer = answer
    fs = {"fs": {"readTextFile": True, "writeTextFile": True}}
    await raw.request(1, "initialize", {**INIT, "clientCapabilities": fs})
    await raw.request(2, "session/new", {"cwd": str(ws), "mcpServers": []})
    sid = (await raw.reply_to(2))["result"]["sessionId"]
    prompt = [{"type": "text", "text": "edit it"}]
    await raw.request(3, "session/prompt", {"sessionId": sid, "prompt": prompt})
    await raw.until(lambda: prompts, "the Apply prompt")
    assert await raw.close() == 0
    assert [m["method"] for m in prompts] == ["session/request_permission"]
    (done,) = [m for m in raw.messages if m.get("id") == 3]
    assert done["result"]["stopReason"] == "cancelled"
    log = (home.parent / f"{home.name}-stderr.log").read_text()
    assert "never retrieved" not in log and "Traceback" not in log, log[-3000:]
    assert not [m for m in raw.messages if m.get("method") == "fs/write_text_file"]
    assert (ws / "src" / "app.py").read_text() == "def main():\n    return 1\n"


async def test_a_buffer_grown_too_large_after_a_write_fails_the_apply_quietly(home, ws, model):
    """The editor says it wrote the proposal, then answers the read-back (and every read after)
    with a buffer over the line limit: not taken as applied, the turn ends as usual, no
    traceback, the disk untouched."""
    model.script = [
        reply(tool_calls=[call("c1", "propose_edit", path="src/app.py", content="x = 2\n")]),
        reply("proposed"),
    ]
    raw = await start_raw(home)
    wrote: list[dict[str, Any]] = []

    def answer(message: dict[str, Any]) -> Any:
        if message["method"] == "fs/read_text_file":
            if wrote:
                return {"content": "x = 2\n" * (1536 * 1024)}  # 9 MiB
            return {"content": Path(message["params"]["path"]).read_text()}
        if message["method"] == "fs/write_text_file":
            wrote.append(message)
            return {}
        allow = next(o for o in message["params"]["options"] if o["kind"] == "allow_once")
        return {"outcome": {"outcome": "selected", "optionId": allow["optionId"]}}

    raw.answer = answer
    fs = {"fs": {"readTextFile": True, "writeTextFile": True}}
    try:
        await raw.request(1, "initialize", {**INIT, "clientCapabilities": fs})
        await raw.request(2, "session/new", {"cwd": str(ws), "mcpServers": []})
        sid = (await raw.reply_to(2))["result"]["sessionId"]
        prompt = [{"type": "text", "text": "edit it"}]
        await raw.request(3, "session/prompt", {"sessionId": sid, "prompt": prompt})
        assert (await raw.reply_to(3))["result"]["stopReason"] == "end_turn"
    finally:
        assert await raw.close() == 0
    assert len(wrote) == 1
    updates = [m["params"]["update"] for m in raw.messages if m.get("method") == "session/update"]
    card = [u for u in updates if str(u.get("toolCallId", "")).startswith("proposal-")]
    assert card and all(u.get("status") != "completed" for u in card), card
    log = (home.parent / f"{home.name}-stderr.log").read_text()
    assert "Traceback" not in log and "Talos stopped" not in json.dumps(updates), log[-3000:]
    assert (ws / "src" / "app.py").read_text() == "def main():\n    return 1\n"
