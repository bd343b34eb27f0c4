"""A hostile ACP client against the real `talos-ls --acp`, from raw bytes (`raw.py`).

The property, for each input: a JSON-RPC error with the code the spec gives it (-32700 for a
line that is not JSON, -32600 for one that is not a request, a batch or a line too long,
-32601 for an unknown method, -32602 for params of the wrong shape, -32002 for a session that
does not exist), the agent goes on serving (a normal request right after succeeds), and
nothing is applied: no command runs and no file is written on an answer that is not a
permission the agent offered. A client that closes stdin mid-turn gets an answer to each
request it sent, and the agent exits by itself with 0.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from talos_ls.demo.scripted_model import reply

from ..fuzz.raw import rss_kib
from ..system import require_sandbox
from .conftest import TALOS_LS, Acp
from .raw import Error, RawAcp, pump

# each test runs talos-ls and the scripted model: the full tier (CI, `--full`);
# the Python SDK's client tests (tests/acp) run in the default one
pytestmark = [pytest.mark.slow, pytest.mark.full]

MIB = 1024 * 1024


@pytest.fixture
def raw_agent(acp: Acp, tmp_path):
    """A factory of raw clients on `talos-ls --acp` with the test's home, store and model."""
    started: list[RawAcp] = []

    def start() -> RawAcp:
        acp.write_config()
        agent = RawAcp(
            [TALOS_LS, "--acp"], acp.env(), tmp_path, tmp_path / f"agent-{len(started)}.stderr"
        )
        started.append(agent)
        return agent

    yield start
    for agent in started:
        agent.close()


def code_of(message: dict[str, Any]) -> int:
    assert "error" in message, message
    return message["error"]["code"]


def still_serving(agent: RawAcp, ws: Path) -> str:
    """A session made now: the agent is up and answering. Its id."""
    assert agent.alive(), "the agent exited"
    return agent.result("session/new", {"cwd": str(ws), "mcpServers": []})["sessionId"]


# ------------------------------------------------------------------------ malformed lines
BAD_LINES = [
    (b"{not json", -32700),
    (b'{"jsonrpc": "2.0", "id": "bad-1", "method": "initialize"', -32700),  # cut short
    (b"\xff\xfe\x00garbage", -32700),  # not UTF-8
    (b"[1, 2]", -32600),  # a batch: ACP has none
    (b"[]", -32600),
    (b"42", -32600),
    (b'"initialize"', -32600),
    (b"null", -32600),
    (b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "initialize"}', -32600),  # id not a scalar
    (b'{"jsonrpc": "2.0", "id": "bad-2", "method": 7}', -32600),  # method not a string
    (b'{"jsonrpc": "1.0", "id": "bad-3", "method": "session/list"}', -32600),
    (b'{"id": "bad-4", "method": "session/list"}', -32600),  # no jsonrpc
]


def test_malformed_lines_each_get_their_error_and_the_agent_serves_on(acp: Acp, raw_agent):
    ws = acp.workspace()
    agent = raw_agent()
    agent.initialize()
    for bad, code in BAD_LINES:
        nulls, ids = len(agent.null_id_errors), set(agent.responses)

        def since(nulls: int = nulls, ids: set = ids) -> list[dict[str, Any]]:
            new = [r for k, r in agent.responses.items() if k not in ids and "error" in r]
            return agent.null_id_errors[nulls:] + new

        agent.send(bad + b"\n")
        agent.wait(since, f"the error for {bad!r}")
        still_serving(agent, ws)
        got = since()  # the next request answered: still one error for the line
        assert len(got) == 1, (bad, got)
        assert code_of(got[0]) == code, (bad, got[0])
        assert got[0]["error"]["message"].strip(), got[0]
    assert agent.garbage == []
    assert agent.duplicates == []


# -------------------------------------------------------------- unknown methods, wrong types
def test_unknown_methods_and_wrong_types_are_errors_naming_the_problem(acp: Acp, raw_agent):
    ws = acp.workspace()
    agent = raw_agent()
    agent.initialize()
    sid = still_serving(agent, ws)
    assert code_of(agent.call("talos/nope", {})) == -32601
    assert code_of(agent.call("session/teleport", {"sessionId": sid})) == -32601
    agent.notify("nope/notification", {"x": 1})  # a notification: never an answer
    agent.notify("session/cancel", {"sessionId": "s" + "0" * 20})  # a session never made
    agent.notify("session/cancel", {"sessionId": 12})
    wrong: list[tuple[str, Any]] = [
        ("session/new", {"cwd": 5, "mcpServers": []}),
        ("session/new", {"cwd": "relative/dir", "mcpServers": []}),
        ("session/new", {"mcpServers": []}),
        ("session/new", {"cwd": str(ws), "mcpServers": "none"}),
        ("session/new", {"cwd": str(ws / "no-such-dir"), "mcpServers": []}),
        ("session/new", ["not", "an", "object"]),
        ("session/prompt", {"sessionId": sid, "prompt": "a string, not blocks"}),
        ("session/prompt", {"sessionId": sid, "prompt": [{"type": "text"}]}),
        ("session/prompt", {"sessionId": 7, "prompt": [{"type": "text", "text": "hi"}]}),
        ("session/prompt", {"prompt": [{"type": "text", "text": "hi"}]}),
        ("session/load", {"sessionId": sid, "cwd": 3, "mcpServers": []}),
        ("session/set_mode", {"sessionId": sid, "modeId": ["ask"]}),
    ]
    for method, params in wrong:
        got = agent.call(method, params)
        assert code_of(got) == -32602, (method, params, got)
        assert got["error"]["message"].strip(), got
    climbing = {"sessionId": "../../../etc/passwd", "cwd": str(ws), "mcpServers": []}
    assert code_of(agent.call("session/load", climbing)) in (-32602, -32002)
    assert still_serving(agent, ws)
    assert agent.null_id_errors == [] and agent.garbage == [] and agent.duplicates == []
    assert acp.model.requests == []  # nothing reached the model
    unknown = {"sessionId": "s" + "0" * 20, "prompt": [{"type": "text", "text": "hi"}]}
    assert code_of(agent.call("session/prompt", unknown)) == -32002  # ACP's "session not found"


# ------------------------------------------------------------------------------ a huge line
def test_a_64_mib_line_is_refused_unread_and_the_next_line_is_served(acp: Acp, raw_agent):
    ws = acp.workspace()
    agent = raw_agent()
    agent.initialize()
    still_serving(agent, ws)
    rss_before = rss_kib(agent.proc.pid)
    head = b'{"jsonrpc": "2.0", "id": "huge", "method": "session/new", "params": {"cwd": "'
    writer = pump(agent, 64 * MIB + 1024, head, b'", "mcpServers": []}}')
    error = agent.wait(
        lambda: agent.responses.get("huge") or next(iter(agent.null_id_errors), None),
        "the error for the 64 MiB line",
    )
    writer.join(60)
    assert not writer.is_alive(), "the agent stopped reading its stdin"
    assert code_of(error) == -32600, error
    assert "bytes" in error["error"]["message"], error  # says what was wrong: the size
    assert still_serving(agent, ws)
    grown = rss_kib(agent.proc.pid) - rss_before
    assert grown < 48 * 1024, f"the agent grew by {grown} KiB: it held the line in memory"
    assert agent.garbage == []


# -------------------------------------------------- permission answers the agent never offered
def test_permission_answers_never_offered_apply_nothing(acp: Acp, raw_agent):
    """Each command's prompt and the edit's approval answered with something that is not one
    of the options offered (or twice): nothing runs, nothing is written, the turn ends."""
    require_sandbox()
    ws = acp.workspace()
    app = ws / "src" / "app.py"
    calls = [
        ("c1", "run_command", {"command": "touch a.txt"}),
        ("c2", "run_command", {"command": "touch b.txt"}),
        ("c3", "run_command", {"command": "touch c.txt"}),
        ("c4", "run_command", {"command": "touch d.txt"}),
        ("c5", "propose_edit", {"path": "src/app.py", "content": "print('owned')\n"}),
    ]
    acp.model.script += [reply(None, [(i, n, json.dumps(a))]) for i, n, a in calls]
    acp.model.script.append(reply("done"))
    asked: list[dict[str, Any]] = []

    def answer(request: dict[str, Any]) -> Any:
        if request["method"] != "session/request_permission":
            return Error(-32601, "Method not found")
        asked.append(request)
        offered = [o["optionId"] for o in request["params"]["options"]]
        allow = next(o["optionId"] for o in request["params"]["options"] if "allow" in o["kind"])
        reject = next(o["optionId"] for o in request["params"]["options"] if "reject" in o["kind"])
        n = len(asked)
        if n == 1:  # an id never offered
            return {"outcome": {"outcome": "selected", "optionId": "never-offered-" + allow}}
        if n == 2:  # the wrong type
            return {"outcome": {"outcome": "selected", "optionId": offered}}
        if n == 3:  # an error instead of an answer
            return Error(-32603, "the client broke")
        if n == 4:  # answered twice: the first answer stands
            return [
                {"outcome": {"outcome": "selected", "optionId": reject}},
                {"outcome": {"outcome": "selected", "optionId": allow}},
            ]
        return {"outcome": {"outcome": "selected", "optionId": allow.upper() + " "}}

    agent = raw_agent()
    agent.answer = answer
    agent.initialize(fs=True)
    sid = still_serving(agent, ws)
    agent.send(b'{"jsonrpc": "2.0", "id": "never-asked", "result": {"outcome": "allow"}}\n')
    turn = agent.call(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "do it"}]}
    )
    assert turn.get("result") == {"stopReason": "end_turn"}, turn
    assert len(asked) == 5
    for name in "abcd":
        assert not (ws / f"{name}.txt").exists(), f"{name}.txt: a command ran"
    results = [
        m["content"] for m in acp.model.requests[-1]["body"]["messages"] if m["role"] == "tool"
    ]
    assert len(results) == 5
    assert all("not run" in r for r in results[:4]), results
    assert [r for r in agent.agent_requests if r["method"] == "fs/write_text_file"] == []
    assert app.read_text() == "def main():\n    return 1\n"
    assert still_serving(agent, ws)
    assert agent.garbage == []


# --------------------------------------------------------------- the client goes away mid-turn
def test_a_client_that_closes_stdin_mid_turn_gets_answers_and_nothing_is_applied(
    acp: Acp, raw_agent
):
    """The prompt's turn proposes an edit and waits for its approval when stdin closes: every
    request sent gets one answer, the edit is not applied, the agent exits with 0."""
    ws = acp.workspace()
    app = ws / "src" / "app.py"
    edit = json.dumps({"path": "src/app.py", "content": "print('unapproved')\n"})
    acp.model.script += [reply(None, [("c1", "propose_edit", edit)]), reply("done")]
    agent = raw_agent()

    def answer(request: dict[str, Any]) -> Any:
        if request["method"] == "fs/read_text_file":  # the editor answers; the person never does
            return {"content": Path(request["params"]["path"]).read_text()}
        return None

    agent.answer = answer
    agent.initialize(fs=True)
    sid = still_serving(agent, ws)
    turn = agent.request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "edit it"}]}
    )
    agent.agent_request("session/request_permission")  # waiting on the person
    more = agent.request("session/new", {"cwd": str(ws), "mcpServers": []})
    bad = agent.request("session/prompt", {"sessionId": 1})
    agent.close_stdin()
    for msg_id in (turn, more, bad):
        agent.response(msg_id)
    assert code_of(agent.responses[bad]) == -32602
    answered = agent.responses[turn]
    assert answered.get("result") == {"stopReason": "cancelled"} or "error" in answered, answered
    assert agent.close() == 0
    assert agent.duplicates == [] and agent.garbage == []
    log = agent.stderr_path.read_text(errors="replace")
    assert "Task exception was never retrieved" not in log, log[-2000:]  # a request leaked
    assert [r for r in agent.agent_requests if r["method"] == "fs/write_text_file"] == []
    assert app.read_text() == "def main():\n    return 1\n"
