"""One prompt turn through the real `talos-ls --acp`, as an ACP editor sees it: tool calls with
their kinds and locations, commands after `session/request_permission` (allowed once, then
always: the next is not asked), a proposal shown as a diff and applied after approval through
`fs/write_text_file` over the editor's unsaved text, the cost in `usage_update`s."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from talos_ls.demo.scripted_model import reply
from tests.acp.conftest import call
from tests.system import require_sandbox

pytestmark = pytest.mark.slow


async def test_initialize_advertises_what_is_supported(agent):
    init = await agent.start()
    assert init.protocol_version == 1
    caps = init.agent_capabilities
    assert caps.load_session is True
    assert caps.prompt_capabilities.embedded_context is True
    assert not caps.prompt_capabilities.image and not caps.prompt_capabilities.audio
    assert caps.session_capabilities.list is not None
    assert init.auth_methods == []


async def test_a_turn_reads_runs_proposes_and_applies(agent, model, ws, home):
    require_sandbox()
    app = ws / "src" / "app.py"
    unsaved = "def main():\n    return 2  # typed, not saved\n"
    model.script = [
        reply(tool_calls=[call("c1", "read_file", path="src/app.py")]),
        reply(tool_calls=[call("c2", "run_command", command="touch made.txt")]),
        reply(tool_calls=[call("c3", "run_command", command="mkdir -p d1")]),
        reply(tool_calls=[call("c4", "run_command", command="mkdir -p d2")]),
        reply(
            tool_calls=[
                call(
                    "c5",
                    "propose_edit",
                    path="src/app.py",
                    blocks=[{"search": "return 2", "replace": "return 3"}],
                )
            ]
        ),
        reply("Made the files and proposed the change."),
    ]
    await agent.start()
    person = agent.person
    person.buffers[str(app)] = unsaved
    person.permit = ["allow_once", "allow_always", "allow_once"]  # touch, mkdir d1, Apply
    sid = await agent.new(ws)
    done = await agent.prompt(sid, "make two folders and bump the return value")
    assert done.stop_reason == "end_turn"

    # The model read the editor's unsaved text, not the disk.
    assert str(app) in person.reads
    assert "typed, not saved" in json.dumps(model.requests[1]["body"]["messages"])
    # touch asked once; mkdir d1 asked and always allowed; mkdir d2 not asked; then Apply.
    asked = [options for _, options in person.permissions]
    assert len(asked) == 3, [tc.title for tc, _ in person.permissions]
    kinds = [{o.kind for o in options} for options in asked]
    assert {"allow_once", "allow_always", "reject_once", "reject_always"} <= kinds[0] | kinds[1]
    assert person.permissions[2][0].tool_call_id.startswith("proposal-")
    assert (ws / "made.txt").exists() and (ws / "d1").is_dir() and (ws / "d2").is_dir()
    saved = list((home / "config" / "talos" / "workspaces").glob("*.json"))
    assert any("mkdir" in json.loads(p.read_text())["commands"]["allow"] for p in saved)

    # Each tool call: its kind, where it looks, how it ended.
    starts = person.updates(sid, "tool_call")
    by_kind = [(u["kind"], u["title"].split()[0]) for u in starts]
    assert ("read", "read_file") in by_kind
    assert by_kind.count(("execute", "run_command")) == 3
    assert ("edit", "propose_edit") in by_kind
    read = next(u for u in starts if u["kind"] == "read")
    assert read["locations"] == [{"path": str(app)}]
    ends = {u["toolCallId"]: u["status"] for u in person.updates(sid, "tool_call_update")}
    assert ends[read["toolCallId"]] == "completed"

    # The proposal: a diff over the editor's text, applied through fs/write_text_file.
    proposal = next(u for u in starts if u["toolCallId"].startswith("proposal-"))
    (diff,) = proposal["content"]
    assert diff["type"] == "diff" and diff["path"] == str(app)
    assert diff["oldText"] == unsaved and diff["newText"] == unsaved.replace("2", "3", 1)
    assert person.writes == [(str(app), unsaved.replace("2", "3", 1))]
    assert ends[proposal["toolCallId"]] == "completed"

    # The text streamed, and the cost after every model call.
    assert "Made the files" in person.text(sid)
    usage = person.updates(sid, "usage_update")
    assert len(usage) == 6  # one after each model call
    assert usage[-1]["cost"]["currency"] == "USD" and usage[-1]["cost"]["amount"] > 0
    assert usage[-1]["cost"]["amount"] > usage[0]["cost"]["amount"]
    assert all(u["size"] > 0 and u["used"] > 0 for u in usage)

    # Undo puts the file back, through the editor.
    await agent.prompt(sid, "/undo")
    assert person.writes[-1] == (str(app), unsaved)
    assert Path(app).read_text() == unsaved


async def test_a_rejected_proposal_is_not_written(agent, model, ws):
    model.script = [
        reply(tool_calls=[call("c1", "propose_edit", path="src/app.py", content="x = 1\n")]),
        reply("Proposed."),
    ]
    await agent.start()
    agent.person.permit = ["reject_once"]
    sid = await agent.new(ws)
    assert (await agent.prompt(sid, "rewrite app.py")).stop_reason == "end_turn"
    assert agent.person.writes == []
    assert (ws / "src" / "app.py").read_text() == "def main():\n    return 1\n"
    ends = [u for u in agent.person.updates(sid, "tool_call_update")]
    assert any(u["toolCallId"].startswith("proposal-") and u["status"] == "failed" for u in ends)


async def test_always_deny_holds_for_the_session(agent, model, ws):
    require_sandbox()
    model.script = [
        reply(tool_calls=[call("c1", "run_command", command="touch a.txt")]),
        reply(tool_calls=[call("c2", "run_command", command="touch a.txt")]),
        reply("Could not."),
    ]
    await agent.start()
    agent.person.permit = ["reject_always", "allow_once"]
    sid = await agent.new(ws)
    await agent.prompt(sid, "make a.txt")
    assert len(agent.person.permissions) == 1  # the second was denied without asking
    assert not (ws / "a.txt").exists()
    results = [m["content"] for m in model.requests[2]["body"]["messages"] if m["role"] == "tool"]
    assert all("not run: denied by you" in r for r in results), results


@pytest.mark.parametrize("reads", [False, True])
async def test_without_the_editor_files_the_host_writes_the_disk(home, model, ws, reads):
    """No fs capability, or reads only: the disk is written by the host."""
    from acp.schema import FileSystemCapabilities

    from tests.acp.conftest import capabilities, start_agent

    model.script = [
        reply(tool_calls=[call("c1", "propose_edit", path="src/app.py", content="x = 2\n")]),
        reply("Proposed."),
    ]
    agent = await start_agent(home)
    try:
        caps = capabilities(fs=False)
        caps.fs = FileSystemCapabilities(read_text_file=reads, write_text_file=False)
        await agent.start(caps)
        agent.person.permit = ["allow_once"]
        sid = await agent.new(ws)
        await agent.prompt(sid, "rewrite app.py as x = 2")
        assert bool(agent.person.reads) == reads and agent.person.writes == []
        assert (ws / "src" / "app.py").read_text() == "x = 2\n"
        assert "rewrite app.py as x = 2" not in agent.log()  # the prompt is never logged
    finally:
        await agent.stop()


async def test_a_buffer_changed_before_apply_is_not_overwritten(agent, model, ws):
    """The person types in the buffer while the Apply prompt is open: the proposal's base is
    gone, so it is stale and nothing is written over their text."""
    app = str(ws / "src" / "app.py")
    model.script = [
        reply(tool_calls=[call("c1", "propose_edit", path="src/app.py", content="x = 1\n")]),
        reply("Proposed."),
    ]
    await agent.start()

    async def type_then_apply(tool_call, options):
        agent.person.buffers[app] = "def main():\n    return 42  # typed meanwhile\n"
        return "allow_once"

    agent.person.permit = [type_then_apply]
    sid = await agent.new(ws)
    await agent.prompt(sid, "rewrite app.py")
    assert agent.person.writes == []
    assert (ws / "src" / "app.py").read_text() == "def main():\n    return 1\n"
    updates = [u for u in agent.person.updates(sid) if u.get("toolCallId", "").startswith("prop")]
    assert updates[-1]["status"] == "failed" and "(stale)" in updates[-1]["title"]


async def test_the_step_cap_ends_the_turn_as_max_turn_requests(tmp_path, model, ws):
    from tests.acp.conftest import config_toml, start_agent, write_config

    home = tmp_path / "home"
    settings = config_toml(model, tmp_path / "talos.db")
    write_config(home, settings.replace("\n[prices", "\nmax_steps = 2\n[prices", 1))
    model.script = [
        reply(tool_calls=[call(f"c{n}", "read_file", path="src/app.py")]) for n in range(3)
    ]
    agent = await start_agent(home)
    try:
        await agent.start()
        sid = await agent.new(ws)
        assert (await agent.prompt(sid, "read forever")).stop_reason == "max_turn_requests"
        assert "Talos stopped: step cap reached" in agent.person.text(sid)
    finally:
        await agent.stop()


async def test_a_dismissed_proposal_waits_for_slash_apply(agent, model, ws):
    app = ws / "src" / "app.py"
    model.script = [
        reply(tool_calls=[call("c1", "propose_edit", path="src/app.py", content="x = 1\n")]),
        reply("Proposed."),
    ]
    await agent.start()
    agent.person.permit = ["cancel"]  # the Apply prompt dismissed: it stays pending
    sid = await agent.new(ws)
    await agent.prompt(sid, "rewrite app.py")
    assert app.read_text() == "def main():\n    return 1\n"
    commands = agent.person.updates(sid, "available_commands_update")
    assert {"undo", "apply", "reject"} <= {c["name"] for c in commands[0]["availableCommands"]}
    await agent.prompt(sid, "/apply")
    assert app.read_text() == "x = 1\n" and agent.person.writes == [(str(app), "x = 1\n")]
    assert "applied" in agent.person.text(sid)
    await agent.prompt(sid, "/reject")
    assert "No proposal of this session is waiting." in agent.person.text(sid)
    assert len(model.requests) == 2  # the commands never reached the model


async def test_a_write_the_editor_did_not_make_is_not_taken_as_applied(agent, model, ws):
    model.script = [
        reply(tool_calls=[call("c1", "propose_edit", path="src/app.py", content="x = 1\n")]),
        reply("Proposed."),
    ]
    await agent.start()
    agent.person.permit = ["allow_once"]
    agent.person.write_lands = False  # it answers the write, and does not make it
    sid = await agent.new(ws)
    await agent.prompt(sid, "rewrite app.py")
    assert len(agent.person.writes) == 1
    updates = [u for u in agent.person.updates(sid) if u.get("toolCallId", "").startswith("prop")]
    assert updates[-1]["status"] != "completed"
    agent.person.write_lands = True  # the claim was released: it can be applied again
    await agent.prompt(sid, "/apply")
    assert (ws / "src" / "app.py").read_text() == "x = 1\n"


async def test_the_apply_prompt_points_at_its_proposals_card(agent, model, ws):
    """The host says which proposal its Apply prompt is about (`host.CONFIRMING`), not its
    wording: the prompt's tool call is the proposal's own card, with its diff; no other card is
    made for it; the same prompt for a second proposal points at that one's card."""
    model.script = [
        reply(tool_calls=[call("c1", "propose_edit", path="src/app.py", content="x = 1\n")]),
        reply(tool_calls=[call("c2", "propose_edit", path="src/two.py", content="y = 2\n")]),
        reply("Proposed."),
    ]
    await agent.start()
    agent.person.permit = ["reject_once", "reject_once"]
    sid = await agent.new(ws)
    assert (await agent.prompt(sid, "rewrite both")).stop_reason == "end_turn"
    cards = [
        u["toolCallId"]
        for u in agent.person.updates(sid, "tool_call")
        if u["toolCallId"].startswith("proposal-")
    ]
    asked = [tool_call.tool_call_id for tool_call, _ in agent.person.permissions]
    assert len(cards) == 2 and sorted(asked) == sorted(cards), (asked, cards)
    made = [u["toolCallId"] for u in agent.person.updates(sid, "tool_call")]
    assert not [i for i in made if i.startswith("permission-")], made
    assert agent.person.writes == [] and not (ws / "src" / "two.py").exists()
