"""The editor as evidence before asking, end to end: "the parser" with two candidates is
settled by the active document or by the file the last task read, without a question; with
neither, the question is asked."""

from __future__ import annotations

import json

import pytest

from talos_ls.demo.scripted_model import reply

from .conftest import PARSERS, start_indexed, user_message

# What the prompt says of a reference that no evidence decided (an assumption, not a choice).
UNSETTLED = "(nothing in the request or the editor decides it; the one nearest the root)"


async def _run(editor, params) -> str:
    task_id = (await editor.command("talos.task.start", params))["task_id"]
    await editor.finished(task_id)
    return task_id


async def test_the_active_document_settles_the_parser_without_a_question(
    tmp_path, parsers, options, model
):
    editor = await start_indexed(tmp_path, parsers, options)
    try:
        model.script.append(reply("Fixed."))
        uri = (parsers / "tools" / "parser.py").as_uri()
        await _run(editor, {"prompt": "fix the parser", "uri": uri})
        assert editor.prompts == []  # not asked
        assert await editor.command("talos.questions.list", {}) == []  # nor queued
        prompt = user_message(model, 0)
        assert (
            "Assumed 'the parser' means tools/parser.py (it is the active document), "
            "not src/parser.py."
        ) in prompt
    finally:
        await editor.stop()


async def test_without_context_the_question_is_asked(tmp_path, parsers, options, model):
    editor = await start_indexed(tmp_path, parsers, options)
    try:
        editor.replies.append(editor.button("tools/parser.py"))
        model.script.append(reply("Fixed.", delay=0.05))
        await _run(editor, {"prompt": "fix the parser"})
        (asked,) = editor.prompts
        assert "the parser" in asked.message
        titles = [a.title for a in asked.actions]
        assert all(any(p in t for t in titles) for p in PARSERS)
        assert UNSETTLED in user_message(model, 0)  # nothing decided it: said to be assumed
    finally:
        await editor.stop()


async def test_the_file_the_last_task_read_settles_the_parser(tmp_path, parsers, options, model):
    editor = await start_indexed(tmp_path, parsers, options)
    try:
        read = json.dumps({"path": "tools/parser.py"})
        model.script += [
            reply("", [("c1", "read_file", read)]),
            reply("It parses."),
            reply("Fixed."),
        ]
        await _run(editor, {"prompt": "look around the tools folder"})
        await _run(editor, {"prompt": "now fix the parser"})
        referents = [
            q for q in await editor.command("talos.questions.list", {}) if q["kind"] == "referent"
        ]
        assert editor.prompts == [] and referents == []
        assert "tools/parser.py (it is the one of them touched in the last turns)" in user_message(
            model, 2
        )
    finally:
        await editor.stop()


@pytest.mark.parametrize(
    "where, why",
    [
        (
            {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 9}}},
            "the selection names it",
        ),
        (
            {
                "diagnostics": [
                    {"message": "tools/parser.py:2: error: Returning Any", "source": "mypy"}
                ]
            },
            "a diagnostic in range names it",
        ),
    ],
)
async def test_the_selection_or_a_diagnostic_settles_the_parser(
    tmp_path, parsers, options, model, where, why
):
    (parsers / "src" / "app.py").write_text("from tools.parser import parse\n")
    editor = await start_indexed(tmp_path, parsers, options)
    try:
        model.script.append(reply("Fixed."))
        uri = (parsers / "src" / "app.py").as_uri()
        await _run(editor, {"prompt": "fix the parser", "uri": uri, **where})
        assert editor.prompts == []
        assert f"tools/parser.py ({why})" in user_message(model, 0)
    finally:
        await editor.stop()


async def test_the_file_the_person_just_edited_settles_the_parser(
    tmp_path, parsers, options, model
):
    editor = await start_indexed(tmp_path, parsers, options)
    try:
        uri = editor.open(parsers / "tools" / "parser.py")
        editor.type(uri, "def parse(text):\n    return text.strip()\n")
        editor.open(parsers / "src" / "parser.py")  # opened, looked at, not edited
        model.script.append(reply("Fixed."))
        await _run(editor, {"prompt": "fix the parser", "uri": (parsers / "README.md").as_uri()})
        assert editor.prompts == []
        assert "tools/parser.py (it is the one of them touched in the last turns)" in user_message(
            model, 0
        )
    finally:
        await editor.stop()


async def test_an_earlier_answer_settles_the_same_words_later(tmp_path, parsers, options, model):
    editor = await start_indexed(tmp_path, parsers, options)
    try:
        editor.replies.append(editor.button("tools/parser.py"))
        model.script.append(reply("Fixed.", delay=0.05))
        await _run(editor, {"prompt": "fix the parser"})
        assert len(editor.prompts) == 1  # asked once
        for _ in range(3):  # the last three tasks' files are no longer what decides it
            model.script.append(reply("Noted."))
            await _run(editor, {"prompt": "update the changelog"})
        model.script.append(reply("Simpler."))
        await _run(editor, {"prompt": "now simplify the parser"})
        assert len(editor.prompts) == 1  # not asked again
        assert len(model.requests) == 5
        assert "tools/parser.py (you said so when asked)" in user_message(model, 4)
    finally:
        await editor.stop()


async def test_an_edit_whose_uri_climbs_out_of_the_folder_touches_nothing(
    tmp_path, parsers, options, model
):
    """A client's URI may carry `..`: `<ws>/src/../../elsewhere/tools/parser.py` is no file of
    the workspace, even though it starts with the workspace's path and ends like a candidate."""
    outside = tmp_path / "elsewhere" / "tools" / "parser.py"
    outside.parent.mkdir(parents=True)
    outside.write_text("x = 1\n")
    editor = await start_indexed(tmp_path, parsers, options)
    try:
        climbing = f"{(parsers / 'src').as_uri()}/../../elsewhere/tools/parser.py"
        editor.open(outside)
        editor.versions[climbing], editor.texts[climbing] = 1, ""
        editor.type(climbing, "x = 2\n")
        editor.replies.append(editor.button("tools/parser.py"))
        model.script.append(reply("Fixed.", delay=0.05))
        await _run(editor, {"prompt": "fix the parser"})
        assert len(editor.prompts) == 1  # still asked
        assert UNSETTLED in user_message(model, 0)  # nothing decided it: said to be assumed
    finally:
        await editor.stop()
