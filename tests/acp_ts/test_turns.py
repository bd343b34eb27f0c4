"""`talos-ls --acp` driven by the official ACP TypeScript SDK (`driver.mjs`): prompt turns end to
end, with the scripted model, a real workspace and a SQLite store.

Each test reads the SDK's log (every message both ways, checked against the schema) and the
workspace and store afterwards: a command runs only once permitted, an edit reaches the editor
through `fs/write_text_file` only once approved, an answered question moves the facts and a
declined one does not, a cancelled turn stops, a restarted agent replays a loaded session.
"""

from __future__ import annotations

import json
import subprocess
import threading

import pytest

from talos_ls.demo.scripted_model import hang, reply

from ..system import require_sandbox, sandbox_works, unique_seconds
from .conftest import PRICES, TALOS_LS, Acp, Log, init, new_session, prompt

# each test runs node, talos-ls and the scripted model: the full tier (CI, `--full`);
# the Python SDK's client tests (tests/acp) run in the default one
pytestmark = [pytest.mark.slow, pytest.mark.full]

USAGE = (1000, 500, 200)  # prompt, completion, cached tokens of every scripted call


def call_cost(usage: tuple[int, int, int] = USAGE) -> float:
    """USD of one model call at the test's prices (per million tokens)."""
    prompt_tokens, completion, cached = usage
    return (
        (prompt_tokens - cached) * PRICES["input"]
        + cached * PRICES["cached_input"]
        + completion * PRICES["output"]
    ) / 1e6


def tool(call_id: str, name: str, **arguments) -> dict:
    return reply(None, [(call_id, name, json.dumps(arguments))], usage=USAGE)


def tool_results(model, index: int) -> list[str]:
    """The tool messages the model was sent in its `index`-th call."""
    return [m["content"] for m in model.requests[index]["body"]["messages"] if m["role"] == "tool"]


def tool_calls(log: Log, session: str = "s") -> dict[str, list[dict]]:
    """Each tool call's updates (the `tool_call` and its `tool_call_update`s), by id."""
    calls: dict[str, list[dict]] = {}
    for u in log.updates(session):
        if u["sessionUpdate"] in ("tool_call", "tool_call_update"):
            calls.setdefault(u["toolCallId"], []).append(u)
    return calls


def diffs(log: Log, session: str = "s") -> list[dict]:
    return [
        c
        for u in log.updates(session)
        if u["sessionUpdate"] in ("tool_call", "tool_call_update")
        for c in (u.get("content") or [])
        if c.get("type") == "diff"
    ]


def said_after_notice(text: str) -> str:
    """A session's text without the no-sandbox notice: a client that does not take `notice`
    updates (this driver) gets it as a message first, on a machine without bwrap."""
    if sandbox_works():
        return text
    notice, _, rest = text.lstrip("\n").partition("\n")
    assert notice.startswith("Commands run without a sandbox"), text
    return rest


def mentions(request: dict, text: str) -> bool:
    return text in json.dumps(request["params"].get("toolCall", {}))


# ------------------------------------------------------------------ initialize, a text turn
def test_initialize_and_a_text_turn_with_its_cost(acp: Acp):
    ws = acp.workspace()
    acp.model.script.append(
        reply("Hello from the scripted model, in chunks.", usage=USAGE, delay=0.05)
    )
    log = acp.drive([init(), new_session(ws), prompt("s", "say hello", "turn")])
    log.assert_clean()
    hello = log.result("init")
    assert hello["protocolVersion"] == 1
    assert hello["agentCapabilities"]["loadSession"] is True
    assert log.result("new-s")["sessionId"]
    assert log.result("turn") == {"stopReason": "end_turn"}
    assert said_after_notice(log.text("s")) == "Hello from the scripted model, in chunks."
    assert len(log.updates("s", "agent_message_chunk")) > 1  # streamed, not sent at the end
    usage = log.updates("s", "usage_update")
    assert usage, "no usage_update"
    assert usage[-1]["cost"]["currency"] == "USD"
    assert usage[-1]["cost"]["amount"] == pytest.approx(call_cost(), rel=1e-6)
    assert usage[-1]["used"] > 0 and usage[-1]["size"] >= usage[-1]["used"]
    (sent,) = acp.model.requests
    assert "say hello" in json.dumps(sent["body"]["messages"])


# ------------------------------------------------- read, run (once, always), edit after approval
def test_a_turn_reads_the_buffer_runs_commands_and_writes_an_approved_edit(acp: Acp):
    require_sandbox()
    ws = acp.workspace()
    app = ws / "src" / "app.py"
    unsaved = "def main():\n    return 1  # unsaved\n"
    acp.model.script += [
        tool("c1", "read_file", path="src/app.py"),
        tool("c2", "run_command", command="touch once.txt"),
        tool("c3", "run_command", command="touch always.txt"),
        tool("c4", "run_command", command="touch always.txt"),  # allowed always: not asked
        tool("c5", "run_command", command="touch never.txt"),
        tool("c6", "run_command", command="touch never.txt"),  # denied always: not asked
        tool(
            "c7",
            "propose_edit",
            path="src/app.py",
            blocks=[{"search": "return 1", "replace": "return 2"}],
        ),
        reply("Done: main returns 2.", usage=USAGE),
    ]
    log = acp.drive(
        [init(), new_session(ws), prompt("s", "make main return 2", "turn")],
        client={
            "permission": [
                {"when": "touch once.txt", "answer": "allow_once"},
                {"when": "touch always.txt", "answer": "allow_always"},
                {"when": "touch never.txt", "answer": "reject_always"},
                {"when": "app.py", "answer": "allow_once"},
            ],
            "buffers": {str(app): unsaved},
        },
        argv=[TALOS_LS, "--acp", "--log-level", "debug"],
    )
    log.assert_clean()
    agent_log = log.stderr.read_text(errors="replace")
    for secret in ("make main return 2", "# unsaved", "sk-test-not-a-real-key"):
        assert secret not in agent_log, f"{secret!r} reached the agent's log"
    assert log.result("turn") == {"stopReason": "end_turn"}
    assert len(acp.model.requests) == 8

    # read: the editor's unsaved buffer, asked for by its absolute path
    # (and again for the edit's base and before writing it: the buffer may have changed)
    reads = log.requests("fs/read_text_file")
    assert {r["params"]["path"] for r in reads} == {str(app)}
    assert reads[0]["at"] < log.requests("session/request_permission")[0]["at"]
    assert "# unsaved" in tool_results(acp.model, 1)[0]

    # run: asked once for each command; "always" (allow or reject) is not asked again
    asked = log.requests("session/request_permission")
    commands = [r for r in asked if mentions(r, "touch ")]
    assert len(commands) == 3, [r["params"]["toolCall"] for r in commands]
    kinds = {o["kind"] for o in commands[0]["params"]["options"]}
    assert {"allow_once", "allow_always", "reject_once"} <= kinds
    assert (ws / "once.txt").exists() and (ws / "always.txt").exists()
    assert not any("not run" in t for t in tool_results(acp.model, 4))
    assert (
        "not run" in tool_results(acp.model, 5)[-1] and "not run" in tool_results(acp.model, 6)[-1]
    )
    assert not (ws / "never.txt").exists()

    # edit: shown as a diff from the buffer's text, approved, then written through the editor
    shown = [d for d in diffs(log) if d["path"] == str(app)]
    assert shown, "the edit was never shown as a diff"
    shown = shown[0]
    assert "return 2" in shown["newText"] and "# unsaved" in (shown.get("oldText") or "")
    (approval,) = [r for r in asked if mentions(r, "app.py")]
    assert approval["params"]["toolCall"]["toolCallId"] in tool_calls(log)
    (write,) = log.writes
    assert write["path"] == str(app)
    assert write["content"] == "def main():\n    return 2  # unsaved\n"
    assert write["at"] > approval["answeredAt"], "written before the person approved it"
    assert app.read_text() == write["content"]

    # every tool call was shown with its kind and ended
    calls = tool_calls(log)
    kinds_seen = {u.get("kind") for us in calls.values() for u in us if u.get("kind")}
    assert {"read", "execute", "edit"} <= kinds_seen
    ends = sorted(us[-1].get("status") for us in calls.values())
    assert ends == ["completed"] * (len(ends) - 2) + ["failed"] * 2, ends  # the denied two
    assert log.text("s").endswith("Done: main returns 2.")
    cost = log.updates("s", "usage_update")[-1]["cost"]
    assert cost["amount"] == pytest.approx(8 * call_cost(), rel=1e-6)


def test_a_rejected_command_and_a_rejected_edit_change_nothing(acp: Acp):
    require_sandbox()
    ws = acp.workspace()
    app = ws / "src" / "app.py"
    acp.model.script += [
        tool("c1", "run_command", command="touch refused.txt"),
        tool("c2", "propose_edit", path="src/app.py", content="print('hostile')\n"),
        reply("Nothing changed.", usage=USAGE),
    ]
    log = acp.drive(
        [init(), new_session(ws), prompt("s", "change things", "turn")],
        client={"permission": ["reject_once", "reject_once"]},
    )
    log.assert_clean()
    assert log.result("turn") == {"stopReason": "end_turn"}
    assert len(log.requests("session/request_permission")) == 2
    assert not (ws / "refused.txt").exists()
    assert "not run" in tool_results(acp.model, 1)[0]
    assert log.writes == []
    assert app.read_text() == "def main():\n    return 1\n"


# ------------------------------------------------------------------ questions by elicitation
CONFLICT = {"AGENTS.md": "- Tests use unittest\n", "CLAUDE.md": "- Tests use pytest\n"}


def test_a_question_answered_through_elicitation_moves_the_facts(acp: Acp):
    ws = acp.workspace(files=CONFLICT)
    acp.model.script.append(reply("Writing tests.", usage=USAGE))
    log = acp.drive(
        [init(), new_session(ws), prompt("s", "write the tests", "turn")],
        client={"elicitation": [{"action": "accept", "choose": "pytest"}]},
    )
    log.assert_clean()
    assert log.result("turn") == {"stopReason": "end_turn"}
    (asked,) = log.requests("elicitation/create")
    params = asked["params"]
    assert params["mode"] == "form" and params["sessionId"] == log.vars["s"]
    offered = json.dumps(params["requestedSchema"])
    assert "pytest" in offered and "unittest" in offered
    assert asked["answer"]["action"] == "accept"
    facts = acp.confidences(ws)
    assert facts["Tests use pytest"] > 0.5 > facts["Tests use unittest"]
    _, (cand,) = acp.questions(ws)
    assert cand.status == "answered"


def test_a_declined_question_is_not_an_answer_and_is_not_asked_again(acp: Acp):
    """Declined in one folder, cancelled in another (each its own agent and budget), three
    turns each with a budget of one question a turn: asked once, never evidence, cooled."""
    acp.config["budget_turns"] = 1
    folders = {
        "decline": acp.workspace("ws-d", CONFLICT),
        "cancel": acp.workspace("ws-c", CONFLICT),
    }
    acp.model.script += [reply("ok", usage=USAGE) for _ in range(6)]
    steps = [init()]
    for action, ws in folders.items():
        steps.append(new_session(ws, action))
        steps += [prompt(action, "write the tests", f"{action}{i}") for i in range(3)]
    log = acp.drive(steps, client={"elicitation": [{"action": a} for a in folders]})
    log.assert_clean()
    for action, ws in folders.items():
        assert [log.result(f"{action}{i}")["stopReason"] for i in range(3)] == ["end_turn"] * 3
        (asked,) = [
            r
            for r in log.requests("elicitation/create")
            if r["params"]["sessionId"] == log.vars[action]
        ]
        assert asked["answer"] == {"action": action}
        assert set(acp.confidences(ws).values()) == {0.5}  # no evidence either way
        _, (cand,) = acp.questions(ws)
        assert cand.status == "cooled"


def turn_of(log: Log, request: dict, turns: list[str]) -> str:
    """The prompt step during which the agent made `request`."""
    for step in log.data["steps"]:
        if step["step"] in turns and step["start"] <= request["at"] <= step.get("end", 1e18):
            return step["step"]
    raise AssertionError(f"a request outside every turn: {request}")


def test_the_question_budget_holds_across_turns(acp: Acp):
    """Two conflicts, both relevant; one question per K=2 turns: turn 1 asks, turn 2 does not,
    turn 3 asks the other."""
    ws = acp.workspace(
        files={
            "AGENTS.md": "- Tests use unittest\n- The linter is flake8\n",
            "CLAUDE.md": "- Tests use pytest\n- The linter is ruff\n",
        }
    )
    acp.config["budget_turns"] = 2
    acp.model.script += [reply("ok", usage=USAGE) for _ in range(3)]
    turns = ["turn0", "turn1", "turn2"]
    ask = "write the tests and set up the linter"
    log = acp.drive(
        [init(), new_session(ws)] + [prompt("s", ask, t) for t in turns],
        client={
            "elicitation": [
                {"action": "accept", "choose": "pytest"},
                {"action": "accept", "choose": "ruff"},
            ]
        },
    )
    log.assert_clean()
    asked = log.requests("elicitation/create")
    assert [turn_of(log, r, turns) for r in asked] == ["turn0", "turn2"]
    last, _ = acp.questions(ws)
    assert last == 3
    facts = acp.confidences(ws)
    assert facts["Tests use pytest"] > 0.5 > facts["Tests use unittest"]
    assert facts["The linter is ruff"] > 0.5 > facts["The linter is flake8"]


# ---------------------------------------------------------------------------------- cancel
def test_cancel_mid_turn_stops_the_model_a_pending_permission_and_a_running_command(acp: Acp):
    require_sandbox()
    ws = acp.workspace()
    seconds = unique_seconds(300)
    running = f"touch started.txt && sleep {seconds} && touch finished.txt"
    acp.model.script += [
        hang("Thinking"),
        tool("c1", "run_command", command="touch held.txt"),
        tool("c2", "run_command", command=running),
        reply("after", usage=USAGE),
    ]
    log = acp.drive(
        [
            init(),
            new_session(ws),
            prompt("s", "think forever", "hung", wait=False),
            {"do": "wait_update", "session": "$s", "kind": "agent_message_chunk"},
            {"do": "cancel", "session": "$s"},
            {"do": "await", "prompt": "hung"},
            prompt("s", "run it", "asking", wait=False),
            {"do": "wait_request", "method": "session/request_permission"},
            {"do": "cancel", "session": "$s"},
            {"do": "await", "prompt": "asking"},
            prompt("s", "run the slow one", "running", wait=False),
            {"do": "wait_file", "path": str(ws / "started.txt")},
            {"do": "cancel", "session": "$s"},
            {"do": "await", "prompt": "running"},
            prompt("s", "again", "after"),
        ],
        client={"permission": [{"when": "touch held", "answer": {"hold": True}}, "allow_once"]},
    )
    log.assert_clean()
    assert log.result("hung") == {"stopReason": "cancelled"}
    assert acp.model.disconnected.wait(10), "the model's stream was not closed"
    assert log.result("asking") == {"stopReason": "cancelled"}
    assert not (ws / "held.txt").exists()
    assert log.result("running") == {"stopReason": "cancelled"}
    left = subprocess.run(["pgrep", "-f", f"sleep {seconds}"], capture_output=True, text=True)
    assert left.stdout == "", "the cancelled command is still running"
    assert not (ws / "finished.txt").exists()
    assert log.result("after") == {"stopReason": "end_turn"}
    assert log.text("s").endswith("after")
    assert len(acp.model.requests) == 4  # nothing ran on after any cancel


# ------------------------------------------------------------------ session/load after restart
def test_session_load_after_a_restart_replays_the_transcript(acp: Acp):
    ws = acp.workspace()
    acp.model.script += [
        reply("The first answer.", usage=USAGE),
        reply("The follow-up answer.", usage=USAGE),
    ]
    first = acp.drive(
        [
            init(),
            new_session(ws),
            prompt("s", "the first request", "turn"),
            prompt("s", "the follow-up request", "again"),
        ]
    )
    first.assert_clean()
    sid = first.vars["s"]

    acp.model.script += [reply("The second answer.", usage=USAGE)]
    unknown = {"do": "load_session", "sessionId": "no-such-session", "cwd": str(ws)}
    load = {"do": "load_session", "sessionId": sid, "cwd": str(ws), "as": "s", "name": "load"}
    second = acp.drive(
        [init(), {**unknown, "name": "unknown"}, load, prompt("s", "the second request", "turn")]
    )
    second.assert_clean()
    assert second.result("init")["agentCapabilities"]["loadSession"] is True
    second.result("load")
    loaded_at = second.results["load"]["at"]
    before = [u for u in second.updates("s") if u["_at"] <= loaded_at]
    said = {
        kind: [u for u in before if u["sessionUpdate"] == kind]
        for kind in ("user_message_chunk", "agent_message_chunk")
    }
    user = "".join(u["content"].get("text", "") for u in said["user_message_chunk"])
    agent = "".join(u["content"].get("text", "") for u in said["agent_message_chunk"])
    # each turn once, in order (a follow-up's stored transcript begins with the one before)
    assert user.count("the first request") == 1 and "the follow-up request" in user, before
    assert agent.count("The first answer.") == 1 and "The follow-up answer." in agent, before
    chunks = [u["content"].get("text", "") for u in before if u["sessionUpdate"] in said]
    turns = ["the first request", "The first answer.", "the follow-up request", "The follow-up"]
    at = [next(i for i, c in enumerate(chunks) if t in c) for t in turns]
    assert at == sorted(at), chunks
    assert second.result("turn") == {"stopReason": "end_turn"}
    sent = json.dumps(acp.model.requests[-1]["body"]["messages"])
    assert "the first request" in sent and "The first answer." in sent  # the conversation goes on
    assert second.error("unknown")["code"] == -32002  # ACP's "session not found"


# ---------------------------------------------------------------- two sessions, two folders
def test_two_sessions_on_two_folders_at_once(acp: Acp):
    """Both turns are in flight together (each model call waits until the other's first call
    has arrived); each reads its own folder's file and says what it read."""
    alpha = acp.workspace("alpha", {"marker.txt": "ALPHA-MARK\n"})
    beta = acp.workspace("beta", {"marker.txt": "BETA-MARK\n"})
    both = threading.Barrier(2, timeout=30)

    def step(body: dict) -> dict:
        results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
        if results:
            return reply(f"I read {results[-1].strip()}", usage=USAGE)
        both.wait()  # the other session's turn is running too
        return tool("r1", "read_file", path="marker.txt")

    acp.model.script += [step, step, step, step]
    log = acp.drive(
        [
            init(),
            new_session(alpha, "a"),
            new_session(beta, "b"),
            prompt("a", "read the marker", "ta", wait=False),
            prompt("b", "read the marker", "tb", wait=False),
            {"do": "await", "prompt": "ta"},
            {"do": "await", "prompt": "tb"},
        ]
    )
    log.assert_clean()
    assert log.vars["a"] != log.vars["b"]
    assert log.result("ta") == {"stopReason": "end_turn"}
    assert log.result("tb") == {"stopReason": "end_turn"}
    assert said_after_notice(log.text("a")) == "I read ALPHA-MARK"
    assert log.text("b") == "I read BETA-MARK"
    reads = {
        (r["params"]["sessionId"], r["params"]["path"]) for r in log.requests("fs/read_text_file")
    }
    assert reads == {
        (log.vars["a"], str(alpha / "marker.txt")),
        (log.vars["b"], str(beta / "marker.txt")),
    }
