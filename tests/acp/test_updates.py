"""Updates a client shows outside the conversation: the `notice` that commands run without a
sandbox (to a client that advertised `session.notices`; as a message to one that did not)."""

from __future__ import annotations

import pytest

from tests.acp.test_hostile import INIT, start_raw
from tests.system import path_without

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("notices", [True, False])
async def test_without_bwrap_the_person_is_told(home, ws, tmp_path, notices):
    caps = {"session": {"notices": {}}} if notices else {}
    raw = await start_raw(home, env={"PATH": path_without(tmp_path, "bwrap")})
    try:
        await raw.request(1, "initialize", {**INIT, "clientCapabilities": caps})
        await raw.request(2, "session/new", {"cwd": str(ws), "mcpServers": []})
        sid = (await raw.reply_to(2))["result"]["sessionId"]

        def told():
            for m in raw.messages:
                if m.get("method") == "session/update" and m["params"]["sessionId"] == sid:
                    update = m["params"]["update"]
                    text = update.get("title") or update.get("content", {}).get("text", "")
                    if "without a sandbox" in text:
                        return update
            return None

        update = await raw.until(told, "the sandbox's notice")
        if notices:
            assert update["sessionUpdate"] == "notice" and update["severity"] == "warning"
        else:
            assert update["sessionUpdate"] == "agent_message_chunk"
        # It follows the response that gave the client the session's id.
        order = [m.get("id") for m in raw.messages]
        first = next(
            i for i, m in enumerate(raw.messages) if m.get("params", {}).get("sessionId") == sid
        )
        assert order.index(2) < first
    finally:
        assert await raw.close() == 0


async def test_a_stated_plan_is_a_plan_update(agent, model, ws):
    from talos_ls.demo.scripted_model import reply
    from tests.acp.conftest import call

    model.script = [
        reply(tool_calls=[call("c1", "plan", steps=["read", "change", "check"], done=0)]),
        reply(tool_calls=[call("c2", "plan", steps=["read", "change", "check"], done=9)]),
        reply(tool_calls=[call("c3", "plan", steps=["read", "change\x1b[31m", "check"], done=2)]),
        reply("Planned."),
    ]
    await agent.start()
    sid = await agent.new(ws)
    await agent.prompt(sid, "plan it")
    plans = agent.person.updates(sid, "plan")
    assert [[e["status"] for e in p["entries"]] for p in plans] == [
        ["in_progress", "pending", "pending"],
        ["completed", "completed", "in_progress"],
    ]
    assert plans[1]["entries"][1]["content"] == "change\\x1b[31m"  # shown, never run
    results = [m["content"] for m in model.requests[2]["body"]["messages"] if m["role"] == "tool"]
    assert results[-1].startswith("error: plan needs")
    assert agent.person.updates(sid, "tool_call") == []  # a plan is no tool call to show


@pytest.mark.parametrize("compaction", [True, False])
async def test_compacted_context_is_said(tmp_path, model, ws, compaction):
    """A small context window and large reads: the context is compacted, and the client hears
    it (`compaction_update` when it advertised `session.compaction`, else a thought)."""
    from talos_ls.demo.scripted_model import reply
    from tests.acp.conftest import call, config_toml, write_config

    home = tmp_path / "home"
    settings = config_toml(model, tmp_path / "talos.db")
    write_config(home, settings.replace("\n[prices", "\ncontext_window = 6000\n[prices", 1))
    (ws / "big.txt").write_text("".join(f"line {n} of a long file\n" for n in range(2000)))
    model.script = [
        *(reply(tool_calls=[call(f"c{n}", "read_file", path="big.txt")]) for n in range(4)),
        reply("Read it all."),
    ]
    caps = {"session": {"compaction": {}}} if compaction else {}
    raw = await start_raw(home)
    try:
        await raw.request(1, "initialize", {**INIT, "clientCapabilities": caps})
        await raw.request(2, "session/new", {"cwd": str(ws), "mcpServers": []})
        sid = (await raw.reply_to(2))["result"]["sessionId"]
        prompt = [{"type": "text", "text": "read big.txt"}]
        await raw.request(3, "session/prompt", {"sessionId": sid, "prompt": prompt})
        assert (await raw.reply_to(3))["result"]["stopReason"] == "end_turn"
    finally:
        assert await raw.close() == 0
    updates = [m["params"]["update"] for m in raw.messages if m.get("method") == "session/update"]
    if compaction:
        said = [u for u in updates if u["sessionUpdate"] == "compaction_update"]
        assert said and all(u["status"] == "completed" for u in said)
        assert "context" in said[0]["summary"][0]["text"]
    else:
        said = [u for u in updates if u["sessionUpdate"] == "agent_thought_chunk"]
        assert said and "context" in said[0]["content"]["text"]
