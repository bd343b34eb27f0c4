"""The conversation (`initializationOptions.conversation: true`): each task streams to the
client as `talos/conversation` events (begin, text as it arrives, steps, proposals, end), and
`talos.task.followUp` continues an ended task's conversation, over the real server."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pygls.exceptions import JsonRpcException

from talos_ls.demo.scripted_model import error, hang, reply

from .conftest import Editor, start_editor

ANSWER = "The answer, in **Markdown**:\n\n- one\n- two\n"
EDIT = json.dumps({"path": "src/app.py", "blocks": [{"search": "return 1", "replace": "return 2"}]})


def plain(value: Any) -> Any:
    """A notification's params as pygls decoded them (objects), as JSON values."""
    if hasattr(value, "_asdict"):
        value = value._asdict()
    elif hasattr(value, "__dict__"):
        value = vars(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


class Conversation:
    """The `talos/conversation` events the client got, in order."""

    def __init__(self, editor: Editor) -> None:
        self.events: list[dict[str, Any]] = []
        editor.client.feature("talos/conversation")(
            lambda ls, params: self.events.append(plain(params))
        )

    def of(self, task_id: str, kind: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.events if e["task_id"] == task_id and kind in (None, e["kind"])]

    async def ended(self, editor: Editor, task_id: str) -> dict[str, Any]:
        (end,) = await editor.until(lambda: self.of(task_id, "end"), f"the end of {task_id}")
        return end


async def conversing(tmp_path, ws, options, **more: Any) -> tuple[Editor, Conversation]:
    editor = await start_editor(tmp_path / "home", [ws], {**options, **more})
    return editor, Conversation(editor)


async def start(editor: Editor, prompt: str) -> str:
    return (await editor.command("talos.task.start", {"prompt": prompt}))["task_id"]


async def follow_up(editor: Editor, task_id: str, prompt: str) -> str:
    params = {"task_id": task_id, "prompt": prompt}
    return (await editor.command("talos.task.followUp", params))["task_id"]


async def test_a_task_streams_its_text_steps_and_end_and_no_toast(tmp_path, ws, options, model):
    editor, talk = await conversing(tmp_path, ws, options, conversation=True)
    try:
        model.script.append(reply(ANSWER, delay=0.01))
        task_id = await start(editor, "explain the list")
        end = await talk.ended(editor, task_id)
        kinds = [e["kind"] for e in talk.of(task_id)]
        assert kinds[0] == "begin" and kinds[-1] == "end"
        (begin,) = talk.of(task_id, "begin")
        assert begin["title"] == "explain the list" and begin["follows"] is None
        assert begin["folder"] == ws.as_uri()
        texts = [e["text"] for e in talk.of(task_id, "text")]
        assert len(texts) > 3 and "".join(texts) == ANSWER  # piece by piece, newlines kept
        assert "step 1: thinking" in [e["message"] for e in talk.of(task_id, "step")]
        assert end["state"] == "done" and end["result"] == ANSWER and end["error"] is None
        assert end["tokens"] > 0 and end["cost"] > 0
        await editor.finished(task_id)
        assert not [m for m in editor.messages() if task_id in m]  # the client says it ended
        listed = await editor.task(task_id)
        assert (listed["state"], listed["step"]) == ("done", "")  # no "step 1: thinking" left
    finally:
        await editor.stop()


async def test_without_asking_there_are_no_events_and_the_end_is_a_message(
    tmp_path, ws, options, model
):
    editor, talk = await conversing(tmp_path, ws, options)
    try:
        model.script.append(reply(ANSWER))
        task_id = await start(editor, "explain the list")
        await editor.finished(task_id)
        await editor.until(lambda: [m for m in editor.messages() if task_id in m], "the toast")
        assert talk.events == []
    finally:
        await editor.stop()


async def test_a_proposal_and_a_failure_are_events_of_their_task(tmp_path, ws, options, model):
    editor, talk = await conversing(tmp_path, ws, options, conversation=True)
    try:
        model.script += [reply("", [("c1", "propose_edit", EDIT)]), reply("proposed")]
        task_id = await start(editor, "return 2")
        await talk.ended(editor, task_id)
        (event,) = talk.of(task_id, "proposal")
        assert event["proposal"]["path"] == "src/app.py" and event["proposal"]["task_id"] == task_id
        proposal_id = event["proposal"]["id"]
        await editor.command("talos.proposal.reject", {"proposal_id": proposal_id})
        states = await editor.until(
            lambda: [e["proposal"]["status"] for e in talk.of(task_id, "proposal")][1:],
            "the rejection",
        )
        assert states == ["rejected"]
        model.script.append(error(400, "no such model"))
        failed = await start(editor, "again")
        end = await talk.ended(editor, failed)
        assert end["state"] == "failed" and "no such model" in end["error"]
    finally:
        await editor.stop()


async def test_hostile_model_text_arrives_escaped(tmp_path, ws, options, model):
    editor, talk = await conversing(tmp_path, ws, options, conversation=True)
    try:
        model.script.append(reply("ok \x1b[2J\u202eevil\u200b done\r\n"))
        task_id = await start(editor, "hi")
        end = await talk.ended(editor, task_id)
        streamed = "".join(e["text"] for e in talk.of(task_id, "text"))
        for shown in (streamed, end["result"]):
            assert not any(c in shown for c in "\x1b\u202e\u200b\r")
            assert "\\x1b" in shown and "\\u202e" in shown and shown.endswith("\n")
    finally:
        await editor.stop()


async def test_a_follow_up_carries_the_requests_and_answers_not_the_tool_output(
    tmp_path, ws, options, model
):
    (ws / "notes.txt").write_text("TOOL-OUTPUT-MARKER\n")
    editor, talk = await conversing(tmp_path, ws, options, conversation=True)
    try:
        read = json.dumps({"path": "notes.txt"})
        model.script += [reply("", [("c1", "read_file", read)]), reply("It says a marker.")]
        first = await start(editor, "what do the notes say?")
        await talk.ended(editor, first)
        model.script.append(reply("Yes: one marker."))
        second = await follow_up(editor, first, "only one?")
        end = await talk.ended(editor, second)
        assert end["result"] == "Yes: one marker."
        (begin,) = talk.of(second, "begin")
        assert begin["follows"] == first and begin["title"] == "only one?"
        messages = model.requests[-1]["body"]["messages"]
        said = [(m["role"], m["content"]) for m in messages[1:]]
        assert said[0][0] == "user" and said[0][1].startswith("what do the notes say?")
        assert said[1:] == [("assistant", "It says a marker."), ("user", "only one?")]
        assert "TOOL-OUTPUT-MARKER" not in json.dumps(messages)
        # A follow-up of the follow-up carries the whole conversation.
        model.script.append(reply("Sure."))
        third = await follow_up(editor, second, "thanks")
        await talk.ended(editor, third)
        contents = [m["content"] for m in model.requests[-1]["body"]["messages"][1:]]
        assert contents[1:] == ["It says a marker.", "only one?", "Yes: one marker.", "thanks"]
    finally:
        await editor.stop()


async def test_a_follow_up_is_refused_while_its_task_runs_or_when_it_names_no_task(
    tmp_path, ws, options, model
):
    editor, talk = await conversing(tmp_path, ws, options, conversation=True)
    try:
        model.script.append(hang())
        running = await start(editor, "think")
        await editor.until(lambda: model.requests, "the model call")
        for params, says in [
            ({"task_id": running, "prompt": "and?"}, "is still running"),
            ({"task_id": "t-nothing", "prompt": "and?"}, "no task 't-nothing'"),
            ({"task_id": running, "prompt": "  "}, "'prompt' is empty"),
            ({"prompt": "and?"}, "'task_id' is required"),
        ]:
            with pytest.raises(JsonRpcException) as caught:
                await editor.command("talos.task.followUp", params)
            assert caught.value.code == -32602 and says in caught.value.message
        await editor.command("talos.task.cancel", {"task_id": running})
        assert (await talk.ended(editor, running))["state"] == "cancelled"
    finally:
        await editor.stop()


async def test_a_follow_up_after_a_restart_reads_the_conversation_from_the_store(
    tmp_path, ws, options, model
):
    editor, talk = await conversing(tmp_path, ws, options, conversation=True)
    try:
        model.script.append(reply("First answer."))
        first = await start(editor, "first question")
        await talk.ended(editor, first)
    finally:
        await editor.stop()
    editor, talk = await conversing(tmp_path, ws, options, conversation=True)
    try:
        model.script.append(reply("Second answer."))
        second = await follow_up(editor, first, "second question")
        await talk.ended(editor, second)
        contents = [m["content"] for m in model.requests[-1]["body"]["messages"][1:]]
        assert contents[1:] == ["First answer.", "second question"]
    finally:
        await editor.stop()


async def test_a_long_task_in_a_small_window_compacts_and_says_so(tmp_path, ws, options, model):
    from ..test_context import Reader, _plan, _workspace

    _workspace(ws)
    model.context_window = 8_192  # the endpoint enforces it, as OpenAI does
    reader = Reader(_plan(30, command=False))
    model.script = [reader] * 100
    editor, talk = await conversing(
        tmp_path, ws, options, conversation=True, contextWindow=8_192, maxSteps=200
    )
    try:
        task_id = await start(editor, "read the big modules")
        end = await talk.ended(editor, task_id)
        assert end["state"] == "done", end["error"]
        steps = [e["message"] for e in talk.of(task_id, "step")]
        assert any("cut to stubs" in s for s in steps)
        assert model.refused == 0 and max(model.sizes) <= 8_192 and reader.done == 29
    finally:
        await editor.stop()


async def test_a_task_cancelled_while_its_answer_streamed_counts_it_and_says_estimated(
    tmp_path, ws, options, model
):
    """The endpoint never sends usage for a call cut short: what streamed is counted from its
    length, and the end (the event and the progress) says the figure is estimated."""
    editor, talk = await conversing(tmp_path, ws, options, conversation=True)
    try:
        model.script.append(hang("Thinking about it at some length"))
        running = await start(editor, "think")
        await editor.until(lambda: talk.of(running, "text"), "the answer streaming")
        await editor.command("talos.task.cancel", {"task_id": running})
        end = await talk.ended(editor, running)
        assert end["state"] == "cancelled" and end["estimated"] is True, end
        assert end["tokens"] > 0 and end["cost"] > 0, end
        reports = await editor.finished(running)
        assert reports[-1].message.startswith("cancelled"), reports[-1].message
        assert reports[-1].message.endswith("(estimated)"), reports[-1].message
    finally:
        await editor.stop()
