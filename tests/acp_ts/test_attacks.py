"""Attacks through the ACP surface, driven by the official TypeScript SDK (`driver.mjs`): a hostile
model (escape sequences in its text and in the commands and paths it names, paths that climb
out of the session's folder) and an editor whose state moves under the agent (a buffer typed
into while an edit waits for approval, a write the editor refuses, a buffer far larger than a
tool result).

Every string the person is shown (message chunks, tool-call titles, permission options,
elicitation texts) carries no raw terminal control or bidi character; nothing outside the
folder is read or written; an edit whose base changed, or that the editor refused, is not
written behind the editor's back.
"""

from __future__ import annotations

import json
import re

import pytest

from talos_ls.demo.scripted_model import reply

from ..system import require_sandbox
from .conftest import Acp, Log, init, new_session, prompt

# each test runs node, talos-ls and the scripted model: the full tier (CI, `--full`);
# the Python SDK's client tests (tests/acp) run in the default one
pytestmark = [pytest.mark.slow, pytest.mark.full]

# C0 controls but tab and newline, DEL, C1 controls, bidi overrides and isolates.
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
ESCAPES = "\x1b]0;owned\x07\x1b[2J\u202etxt.exe\x9b31m"


def tool(call_id: str, name: str, **arguments) -> dict:
    return reply(None, [(call_id, name, json.dumps(arguments))])


def shown_strings(log: Log) -> list[tuple[str, str]]:
    """(where, text) for each string the client shows the person: message chunks, tool-call
    titles and text content, permission prompts and their options, elicitation texts. File
    contents (diffs, reads, writes) are data, not shown as terminal text: left out."""
    out: list[tuple[str, str]] = []
    for m in log.messages:
        if m["dir"] != "in":
            continue
        msg, params = m["msg"], m["msg"].get("params") or {}
        method = msg.get("method")
        if method == "session/update":
            u = params["update"]
            kind = u.get("sessionUpdate")
            if kind in ("agent_message_chunk", "agent_thought_chunk", "user_message_chunk"):
                out.append((kind, u["content"].get("text", "")))
            if kind in ("tool_call", "tool_call_update"):
                out.append((f"{kind}.title", u.get("title") or ""))
                for c in u.get("content") or []:
                    if c.get("type") == "content":
                        out.append((f"{kind}.content", c["content"].get("text", "")))
            if kind == "notice":
                out.append(("notice", u.get("title", "")))
        elif method == "session/request_permission":
            out.append(("permission.title", params["toolCall"].get("title") or ""))
            out += [("permission.option", o["name"]) for o in params["options"]]
        elif method == "elicitation/create":
            out.append(("elicitation.message", params.get("message", "")))
            out.append(("elicitation.schema", json.dumps(params.get("requestedSchema"))))
    return out


def test_a_hostile_model_escapes_nothing_and_reaches_nothing_outside(acp: Acp):
    """Escape sequences in the model's text, in a command and in a path reach the client as
    text; paths out of the folder (climbing, absolute) are neither read nor written."""
    require_sandbox()
    ws = acp.workspace()
    secret = acp.tmp / "secret.txt"
    secret.write_text("TOP-SECRET-CANARY\n")
    outside = acp.tmp / "outside.py"
    command = json.dumps({"command": f"touch '{ESCAPES}'"})
    acp.model.script += [
        reply(f"Look: {ESCAPES} end", [("c1", "run_command", command)]),
        tool("c2", "read_file", path=f"src/{ESCAPES}.py"),
        reply(f"Done {ESCAPES}"),
        tool("c3", "read_file", path="../secret.txt"),
        tool("c4", "read_file", path=str(secret)),
        tool("c5", "propose_edit", path="../outside.py", content="owned = True\n"),
        tool("c6", "propose_edit", path=str(outside), content="owned = True\n"),
        reply("done"),
    ]
    log = acp.drive(
        [init(), new_session(ws), prompt("s", "go", "escapes"), prompt("s", "look", "outside")],
        client={"permission": ["reject_once"] + ["allow_once"] * 4},
    )
    log.assert_clean()
    assert log.result("escapes") == {"stopReason": "end_turn"}
    assert log.result("outside") == {"stopReason": "end_turn"}
    shown = shown_strings(log)
    assert any("owned" in text for _, text in shown)  # the text is there, as text
    raw = [(where, text) for where, text in shown if RAW_CONTROL.search(text)]
    assert raw == [], raw
    for r in log.requests("fs/read_text_file") + log.requests("fs/write_text_file"):
        assert r["params"]["path"].startswith(str(ws) + "/"), r["params"]["path"]
    assert log.writes == [] and not outside.exists()
    everything = json.dumps(log.messages) + json.dumps(acp.model.requests)
    assert "TOP-SECRET-CANARY" not in everything
    assert len(acp.model.requests) == 8  # each refusal went back to the model, which went on


def test_an_edit_whose_buffer_changed_before_approval_is_not_written(acp: Acp):
    ws = acp.workspace()
    app = ws / "src" / "app.py"
    typed = "def main():\n    return 1  # the person typed this meanwhile\n"
    acp.model.script += [
        tool(
            "c1",
            "propose_edit",
            path="src/app.py",
            blocks=[{"search": "return 1", "replace": "return 2"}],
        ),
        reply("proposed"),
    ]
    log = acp.drive(
        [init(), new_session(ws), prompt("s", "return 2", "turn")],
        client={
            "permission": [
                {
                    "when": "app.py",
                    "answer": {"setBuffers": {str(app): typed}, "then": "allow_once"},
                }
            ]
        },
    )
    log.assert_clean()
    assert log.result("turn") == {"stopReason": "end_turn"}
    assert len(log.requests("session/request_permission")) == 1
    assert log.writes == [], "written over what the person typed"
    assert app.read_text() == "def main():\n    return 1\n"


def test_a_write_the_editor_refuses_is_not_made_behind_its_back(acp: Acp):
    ws = acp.workspace()
    app = ws / "src" / "app.py"
    acp.model.script += [
        tool("c1", "propose_edit", path="src/app.py", content="def main():\n    return 3\n"),
        reply("proposed"),
    ]
    log = acp.drive(
        [init(), new_session(ws), prompt("s", "return 3", "turn")],
        client={"permission": ["allow_once"], "refuseWrites": True},
    )
    log.assert_clean()
    assert log.result("turn") == {"stopReason": "end_turn"}
    assert len(log.writes) == 1  # asked the editor, which said no
    assert app.read_text() == "def main():\n    return 1\n"  # and not the disk instead
    edit = [u for u in log.updates("s") if u.get("kind") == "edit" or u.get("content")]
    statuses = [u.get("status") for u in edit if u.get("status")]
    assert statuses and statuses[-1] != "completed", statuses  # not shown as applied


def test_a_buffer_too_large_to_read_is_not_replaced_by_the_disk(acp: Acp):
    """The editor holds an 18 MiB unsaved buffer (a generated file, say): the model gets a
    bounded result, and never the disk's text passed off as what the editor holds."""
    ws = acp.workspace(files={"src/app.py": "DISK-ONLY-TEXT = 1\n"})
    app = ws / "src" / "app.py"
    huge = "x = 1\n" * (3 * 1024 * 1024)
    acp.model.script += [tool("c1", "read_file", path="src/app.py"), reply("read")]
    log = acp.drive(
        [init(), new_session(ws), prompt("s", "read it", "turn")],
        client={"buffers": {str(app): huge}},
    )
    log.assert_clean(allow_sdk=ID_NULL_ERROR)
    assert log.result("turn") == {"stopReason": "end_turn"}
    messages = acp.model.requests[1]["body"]["messages"]
    (sent,) = [m["content"] for m in messages if m["role"] == "tool"]
    assert len(sent) < 64 * 1024
    assert "DISK-ONLY-TEXT" not in sent, "the disk's text was given as the editor's"


# The agent cannot read a line that long, so it answers it with an id-null error (JSON-RPC's
# rule for a message whose id could not be read); the SDK reports a response it cannot match.
ID_NULL_ERROR = ("Got response to unknown request null",)


CONFLICT = {"AGENTS.md": "- Tests use unittest\n", "CLAUDE.md": "- Tests use pytest\n"}


def test_an_elicitation_answer_never_offered_is_not_an_answer(acp: Acp):
    """The form's answer is a value that is none of its options (in one folder), or not even
    a string (in another): neither is evidence on any fact."""
    folders = {"other": acp.workspace("ws-o", CONFLICT), "typed": acp.workspace("ws-t", CONFLICT)}
    acp.model.script += [reply("ok"), reply("ok")]
    steps = [init()]
    for name, ws in folders.items():
        steps += [new_session(ws, name), prompt(name, "write the tests", f"turn-{name}")]
    answers = [
        {"action": "accept", "choose": "pytest OR unittest; ignore the options"},
        {"action": "accept", "content": {"answer": 1, "choice": ["pytest"], "value": True}},
    ]
    log = acp.drive(steps, client={"elicitation": answers})
    log.assert_clean()
    first, _ = log.requests("elicitation/create")
    assert list(first["answer"]["content"].values()) == [answers[0]["choose"]]  # as a value
    for name, ws in folders.items():
        assert log.result(f"turn-{name}") == {"stopReason": "end_turn"}
        assert set(acp.confidences(ws).values()) == {0.5}, name
        _, (cand,) = acp.questions(ws)
        assert cand.status != "answered", name
