"""Sessions through the real `talos-ls --acp`: cancel mid-turn, load after a restart (the stored
transcript replayed), list, modes, and two sessions on two folders at once."""

from __future__ import annotations

import asyncio
import json

import pytest

from talos_ls.demo.scripted_model import hang, reply
from tests.acp.conftest import WAIT_S, call, start_agent

pytestmark = pytest.mark.slow


async def test_cancel_during_a_permission_prompt_denies_it_and_ends_the_turn(agent, model, ws):
    model.script = [
        reply(tool_calls=[call("c1", "run_command", command="touch made.txt")]),
        reply("never reached"),
        reply("after the cancel"),
    ]
    await agent.start()
    never = asyncio.Event()

    async def wait_for_ever(tool_call, options):
        await never.wait()
        return "allow_once"

    agent.person.permit = [wait_for_ever]
    sid = await agent.new(ws)
    turn = asyncio.ensure_future(agent.prompt(sid, "make a file"))
    await asyncio.wait_for(agent.person.asked.wait(), WAIT_S)
    await agent.conn.cancel(session_id=sid)
    assert (await turn).stop_reason == "cancelled"
    never.set()  # the person answers late: the turn is over, nothing runs
    await asyncio.sleep(0.3)
    assert not (ws / "made.txt").exists()
    # The session goes on.
    model.script = [reply("after the cancel")]
    assert (await agent.prompt(sid, "and now?")).stop_reason == "end_turn"
    assert "after the cancel" in agent.person.text(sid)


async def test_cancel_while_the_model_streams(agent, model, ws):
    model.script = [hang("Thinking about it")]
    await agent.start()
    sid = await agent.new(ws)
    turn = asyncio.ensure_future(agent.prompt(sid, "think"))
    await agent.until(lambda: "Thinking" in agent.person.text(sid), "the first chunk")
    await agent.conn.cancel(session_id=sid)
    assert (await turn).stop_reason == "cancelled"


async def test_load_after_a_restart_replays_the_transcript(home, model, ws):
    model.script = [
        reply(tool_calls=[call("c1", "read_file", path="src/app.py")]),
        reply("General Kenobi."),
    ]
    first = await start_agent(home)
    try:
        await first.start()
        sid = await first.new(ws)
        await first.prompt(sid, "Hello there")
        spent = first.person.updates(sid, "usage_update")[-1]["cost"]["amount"]
    finally:
        assert await first.stop() == 0
    second = await start_agent(home)
    try:
        await second.start()
        listed = await asyncio.wait_for(second.conn.list_sessions(cwd=str(ws)), WAIT_S)
        (info,) = listed.sessions
        assert info.session_id == sid and info.title == "Hello there" and info.cwd == str(ws)
        await asyncio.wait_for(
            second.conn.load_session(cwd=str(ws), session_id=sid, mcp_servers=[]), WAIT_S
        )
        person = second.person
        said = [u["content"]["text"] for u in person.updates(sid, "user_message_chunk")]
        assert said and said[0].startswith("Hello there")
        assert "General Kenobi." in person.text(sid)
        assert [u["kind"] for u in person.updates(sid, "tool_call")] == ["read"]
        # The loaded session goes on with its conversation.
        model.script = [reply("Again.")]
        await second.prompt(sid, "And again")
        sent = json.dumps(model.requests[-1]["body"]["messages"])
        assert "Hello there" in sent and "General Kenobi." in sent
        # The session's cost goes on from what it had spent before the restart.
        assert person.updates(sid, "usage_update")[-1]["cost"]["amount"] > spent
    finally:
        await second.stop()


async def test_load_replays_each_turn_of_a_conversation_once(home, model, ws):
    """A follow-up's stored transcript begins with the conversation it continues, and its
    request goes on with Talos's notes (the conflict it went on, the question declined): the
    replay shows each request as the person sent it and each answer, once, in order."""
    (ws / "AGENTS.md").write_text("- Tests use unittest\n")
    (ws / "CLAUDE.md").write_text("- Tests use pytest\n")
    model.script = [reply("Writing them."), reply("Written again.")]
    first = await start_agent(home)
    try:
        await first.start()
        first.person.elicit = ["decline"]
        sid = await first.new(ws)
        await first.prompt(sid, "write the tests")
        await first.prompt(sid, "write the tests again")
    finally:
        assert await first.stop() == 0
    sent = model.requests[-1]["body"]["messages"][-1]["content"]
    assert sent.startswith("write the tests again\n\n") and "conflict" in sent  # the notes
    second = await start_agent(home)
    try:
        await second.start()
        await asyncio.wait_for(
            second.conn.load_session(cwd=str(ws), session_id=sid, mcp_servers=[]), WAIT_S
        )
        said = [
            (u["sessionUpdate"], u["content"]["text"].strip())
            for u in second.person.updates(sid)
            if u["sessionUpdate"] in ("user_message_chunk", "agent_message_chunk")
        ]
        assert said[:3] == [
            ("user_message_chunk", "write the tests"),
            ("agent_message_chunk", "Writing them."),
            ("user_message_chunk", "write the tests again"),
        ], said
        assert said[3] == ("agent_message_chunk", "Written again."), said
        assert all(kind == "agent_message_chunk" for kind, _ in said[4:]), said  # what it assumed
    finally:
        await second.stop()


async def test_load_refuses_an_unknown_or_foreign_session(agent, ws, tmp_path):
    from acp.exceptions import RequestError

    await agent.start()
    sid = await agent.new(ws)
    other = tmp_path / "other"
    other.mkdir()
    for cwd, session_id, said in [
        (ws, "s" + "0" * 20, "no session"),
        (ws, "../../etc/passwd", "no session"),
        (other, sid, "another folder"),
    ]:
        with pytest.raises(RequestError) as caught:
            await agent.conn.load_session(cwd=str(cwd), session_id=session_id, mcp_servers=[])
        assert said in str(caught.value)


async def test_modes_map_onto_the_permission_modes(agent, model, ws):
    from acp.exceptions import RequestError
    from acp.schema import McpServerStdio

    await agent.start()
    servers = [McpServerStdio(name="git", command="uvx", args=["mcp-server-git"], env=[])]
    reply_new = await agent.conn.new_session(cwd=str(ws), mcp_servers=servers)  # accepted
    sid = reply_new.session_id
    assert reply_new.modes.current_mode_id == "ask"
    assert [m.id for m in reply_new.modes.available_modes] == [
        "read-only",
        "ask",
        "auto-edit",
        "full-auto",
    ]
    with pytest.raises(RequestError):
        await agent.conn.set_session_mode(session_id=sid, mode_id="yolo")
    await agent.conn.set_session_mode(session_id=sid, mode_id="read-only")
    await agent.until(lambda: agent.person.updates(sid, "current_mode_update"), "the mode's update")
    model.script = [
        reply(tool_calls=[call("c1", "propose_edit", path="src/app.py", content="x = 1\n")]),
        reply("Could not."),
    ]
    await agent.prompt(sid, "rewrite app.py")
    assert agent.person.permissions == [] and agent.person.writes == []
    (end,) = [u for u in agent.person.updates(sid, "tool_call_update") if u["status"] == "failed"]
    assert "read-only" in end["content"][0]["content"]["text"]


async def test_two_sessions_on_two_folders_at_once(agent, model, tmp_path):
    roots = {}
    for name in ("alpha", "beta"):
        roots[name] = tmp_path / name
        roots[name].mkdir()
        (roots[name] / f"{name}.txt").write_text(f"{name} content\n")

    def step(body):
        text = json.dumps(body["messages"])
        name = "alpha" if "alpha task" in text else "beta"
        if '"role": "tool"' in text:
            return reply(f"{name} done", delay=0.01)
        return reply(tool_calls=[call("c1", "read_file", path=f"{name}.txt")], delay=0.01)

    model.script = [step] * 4
    await agent.start()
    sids = {name: await agent.new(root) for name, root in roots.items()}
    ends = await asyncio.gather(*(agent.prompt(sids[name], f"the {name} task") for name in roots))
    assert [e.stop_reason for e in ends] == ["end_turn", "end_turn"]
    for name, other in (("alpha", "beta"), ("beta", "alpha")):
        text = agent.person.text(sids[name])
        assert f"{name} done" in text and other not in text
        (read,) = agent.person.updates(sids[name], "tool_call")
        assert read["locations"] == [{"path": str(roots[name] / f"{name}.txt")}]
