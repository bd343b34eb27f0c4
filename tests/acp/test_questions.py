"""Questions from the rationed queue, through an ACP client: `elicitation/create` (one enum field
of the options) when the client offers forms, else `session/request_permission` with the
answers and a Skip. An answer is evidence on the facts; a decline, a cancel or a Skip never is;
the budget (one question per K turns) holds across prompts."""

from __future__ import annotations

import pytest

from talos_ls.agent.workspace import agent_id
from talos_ls.demo.scripted_model import reply
from talos_ls.memory.facts import FactStore
from talos_ls.store import open_store
from tests.acp.conftest import call, capabilities, config_toml, start_agent, write_config

pytestmark = pytest.mark.slow
CONFLICT = {"AGENTS.md": "- Tests use unittest\n", "CLAUDE.md": "- Tests use pytest\n"}


def _conflicted(ws):
    for name, text in CONFLICT.items():
        (ws / name).write_text(text)


def _facts(tmp_path, ws) -> dict[str, float]:
    store = open_store("sqlite:///" + str(tmp_path / "talos.db"))
    try:
        facts = FactStore(store).list(agent_id(ws.resolve()), include_closed=False)
        return {f.statement: f.confidence for f in facts}
    finally:
        store.close()


async def test_an_answer_through_elicitation_is_evidence(agent, model, ws, tmp_path):
    _conflicted(ws)
    model.script = [reply("Writing tests.")]
    await agent.start()
    agent.person.elicit = ["pytest"]
    sid = await agent.new(ws)
    assert (await agent.prompt(sid, "write the tests")).stop_reason == "end_turn"
    ((message, mode),) = agent.person.elicitations
    assert "Tests use" in message or "test" in message.lower()
    field = mode.requested_schema.properties["answer"]
    assert mode.requested_schema.required == ["answer"]
    titles = [o.title for o in field.one_of]
    assert any("pytest" in t for t in titles) and any("unittest" in t for t in titles)
    assert agent.person.permissions == []  # asked once, by the form only
    facts = _facts(tmp_path, ws)
    assert facts["Tests use pytest"] > 0.5 > facts["Tests use unittest"]


@pytest.mark.parametrize("dismissal", ["decline", "cancel", "an answer never offered"])
async def test_a_declined_question_is_no_answer_and_is_not_asked_again(
    tmp_path, model, ws, dismissal
):
    _conflicted(ws)
    home = tmp_path / "home"
    settings = config_toml(model, tmp_path / "talos.db")
    write_config(home, settings.replace("\n[prices", "\nbudget_turns = 1\n[prices", 1))
    agent = await start_agent(home)
    try:
        await agent.start()
        agent.person.elicit = [dismissal]
        sid = await agent.new(ws)
        for _ in range(3):
            model.script.append(reply("ok"))
            assert (await agent.prompt(sid, "write the tests")).stop_reason == "end_turn"
        assert len(agent.person.elicitations) == 1  # cooled: not asked again so soon
        if dismissal.startswith("an answer"):
            assert "never offered" in agent.person.text(sid)
        assert set(_facts(tmp_path, ws).values()) == {0.5}  # never evidence
    finally:
        await agent.stop()


async def test_the_budget_holds_across_prompts(agent, model, ws, tmp_path):
    """Two questions waiting (the conflict, and one the model queued): one is asked in the
    first turn, none in the second (the budget is one per five turns)."""
    _conflicted(ws)
    model.script = [
        reply(
            tool_calls=[
                call("c1", "ask", question="Which tests runner for the tests?", options=["a", "b"])
            ]
        ),
        reply("ok"),
        reply("ok again"),
    ]
    await agent.start()
    agent.person.elicit = ["pytest", "a"]
    sid = await agent.new(ws)
    await agent.prompt(sid, "write the tests")
    await agent.prompt(sid, "write the tests runner config")
    assert len(agent.person.elicitations) == 1


async def test_without_elicitation_the_answers_are_permission_options(home, model, ws, tmp_path):
    _conflicted(ws)
    agent = await start_agent(home)
    try:
        model.script = [reply("Writing tests.")]
        await agent.start(capabilities(elicitation=False))
        agent.person.permit = ["pytest"]
        sid = await agent.new(ws)
        assert (await agent.prompt(sid, "write the tests")).stop_reason == "end_turn"
        ((tool_call, options),) = agent.person.permissions
        assert tool_call.tool_call_id.startswith("question-")
        assert options[-1].name == "Skip" and options[-1].kind == "reject_once"
        assert sum("pytest" in o.name for o in options) == 1
        facts = _facts(tmp_path, ws)
        assert facts["Tests use pytest"] > 0.5 > facts["Tests use unittest"]
    finally:
        await agent.stop()


async def test_a_question_waiting_in_one_session_does_not_hold_another(agent, model, ws):
    """Two sessions on one folder: the first's question waits on its person; the second's
    turn ends meanwhile."""
    import asyncio

    _conflicted(ws)
    model.script = [lambda body: reply("ok")] * 2
    release = asyncio.Event()

    async def later(message, mode):
        await release.wait()
        return "pytest"

    await agent.start()
    agent.person.elicit = [later]
    first, second = await agent.new(ws), await agent.new(ws)
    waiting = asyncio.ensure_future(agent.prompt(first, "write the tests"))
    await asyncio.wait_for(agent.person.asked.wait(), 60)
    assert (await agent.prompt(second, "write the docs")).stop_reason == "end_turn"
    assert not waiting.done()
    release.set()
    assert (await waiting).stop_reason == "end_turn"
    assert len(agent.person.elicitations) == 1
