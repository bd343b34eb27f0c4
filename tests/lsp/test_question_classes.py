"""Issue 31's classes, end to end through the real talos-ls on SQLite and on Redis: a request
that shares only a question's wording or another sense of its words gets no question; a
reference the person did not settle, and a conflict nobody answered, are said as assumptions
in the task's prompt and at the end of its summary; the person's earlier answer against the
file open now is not taken silently; the ranking is a setting.

Each test plays turns against a scripted model; `questionBudgetTurns` sets when the budget
is open, so what is (not) asked is decided by relevance alone."""

from __future__ import annotations

import json

import pytest

from talos_ls.demo.scripted_model import reply

from .conftest import PARSERS, start_indexed, user_message

CONFLICT = {"AGENTS.md": "- Tests use unittest\n", "CLAUDE.md": "- Tests use pytest\n"}
HEADING = "Not confirmed by you (say so if one is wrong):"


@pytest.fixture(params=["sqlite", pytest.param("redis", marks=pytest.mark.full)])
def backend(request) -> str:
    return request.param


@pytest.fixture
def options(options, store_url):
    return {**options, "storeUrl": store_url}


async def _asked(editor, n: int) -> None:
    """Wait until `n` questions were shown: one is delivered beside its task, not before it
    ends."""
    await editor.until(lambda: len(editor.prompts) >= n, f"question {n}")


async def _run(editor, model, prompt: str, **params) -> str:
    """One task; the rendered task (`talos.task.show`)."""
    model.script.append(reply("Done.", delay=0.05))
    task_id = (await editor.command("talos.task.start", {"prompt": prompt, **params}))["task_id"]
    await editor.finished(task_id)
    return await editor.command("talos.task.show", {"task_id": task_id})


async def test_the_question_s_own_words_make_no_request_relevant(tmp_path, ws, options, model):
    """An open conflict about the test runner; requests sharing only its wording ("two",
    "right", "use", "which", "notes") get no question, a request about the tests does."""
    for name, text in CONFLICT.items():
        (ws / name).write_text(text)
    editor = await start_indexed(tmp_path, ws, options)
    try:
        editor.replies.append(editor.button("pytest"))
        for request in ("is it right to use two spaces here?", "which notes say what we mean?"):
            shown = await _run(editor, model, request)
            assert editor.prompts == [], request
            assert "they conflict" not in shown  # nor said: not what the request is about
        await _run(editor, model, "write the tests for the app")
        await _asked(editor, 1)
        (asked,) = editor.prompts
        assert "Tests use pytest" in asked.message
    finally:
        await editor.stop()


async def test_the_seed_ranking_asks_on_the_question_s_wording(tmp_path, ws, options, model):
    """The same request under `questionRanking: seed`: the reference design's relevance (the
    question's words) asks; the setting reaches the queue."""
    for name, text in CONFLICT.items():
        (ws / name).write_text(text)
    editor = await start_indexed(tmp_path, ws, {**options, "questionRanking": "seed"})
    try:
        editor.replies.append(None)
        await _run(editor, model, "is it right to use two spaces here?")
        await _asked(editor, 1)
        assert len(editor.prompts) == 1
    finally:
        await editor.stop()


async def test_a_word_about_something_else_gets_no_question_and_an_assumption_is_said(
    tmp_path, parsers, options, model
):
    """'the parser' stays unsettled while the budget is closed: the prompt and the summary say
    what was assumed. Then, budget open, "parse the arguments" (another sense, another file)
    gets no question; "the parser is slow" does."""
    for name, text in CONFLICT.items():
        (parsers / name).write_text(text)
    editor = await start_indexed(tmp_path, parsers, {**options, "questionBudgetTurns": 2})
    try:
        editor.replies.append(editor.button("pytest"))
        await _run(editor, model, "write the tests")  # turn 1: the budget goes to the conflict
        await _asked(editor, 1)
        assert len(editor.prompts) == 1
        shown = await _run(editor, model, "now simplify the parser")  # turn 2: budget closed
        said = (
            "Assumed 'the parser' means src/parser.py (nothing in the request or the editor "
            "decides it; the one nearest the root), not tools/parser.py."
        )
        assert said in user_message(model, 1) and f"{HEADING}\n- {said}" in shown
        assert len(editor.prompts) == 1
        assert any("It assumed 1 thing(s)" in m for m in editor.messages())
        await _run(editor, model, "parse the CLI arguments in src/app.py")  # turn 3: open
        assert len(editor.prompts) == 1
        editor.replies.append(editor.button("tools/parser.py"))
        await _run(editor, model, "the parser is slow, speed it up")
        await _asked(editor, 2)
        assert len(editor.prompts) == 2 and "the parser" in editor.prompts[1].message
    finally:
        await editor.stop()


async def test_an_earlier_answer_against_the_open_file_is_said_not_taken_silently(
    tmp_path, parsers, options, model
):
    editor = await start_indexed(tmp_path, parsers, options)  # one question per 5 turns
    try:
        editor.replies.append(editor.button("tools/parser.py"))
        await _run(editor, model, "fix the parser")
        await _asked(editor, 1)
        assert len(editor.prompts) == 1
        uri = (parsers / "src" / "parser.py").as_uri()
        shown = await _run(editor, model, "now simplify the parser", uri=uri)
        said = (
            "Assumed 'the parser' means tools/parser.py (you said so when asked, though "
            "src/parser.py is the file open now), not src/parser.py."
        )
        assert said in user_message(model, 1) and f"{HEADING}\n- {said}" in shown
        assert len(editor.prompts) == 1  # the budget is closed: said instead of asked
    finally:
        await editor.stop()


async def test_an_unanswered_conflict_is_said_when_the_budget_is_closed(
    tmp_path, parsers, options, model
):
    for name, text in CONFLICT.items():
        (parsers / name).write_text(text)
    editor = await start_indexed(tmp_path, parsers, options)
    try:
        editor.replies.append(editor.button("tools/parser.py"))
        await _run(editor, model, "fix the parser")  # the budget goes to this question
        shown = await _run(editor, model, "write the tests")
        await _asked(editor, 1)
        assert len(editor.prompts) == 1
        prompt = user_message(model, 1)
        (said,) = [line for line in prompt.splitlines() if "they conflict" in line]
        assert said.startswith("Assumed ") and "neither has more support" in said
        assert '"Tests use pytest"' in said and '"Tests use unittest"' in said
        assert f"- {said}" in shown
        shown = await _run(editor, model, "update the changelog")  # not about the tests
        assert HEADING not in shown and "they conflict" not in user_message(model, 2)
    finally:
        await editor.stop()


@pytest.mark.parametrize(
    "request_text",
    [
        "パーサーを直して",
        "修复parser里的bug",
        "Repariere den Parser",
        "corrige le parseur",
        "el analizador es muy lento",  # translations sharing no letter with the name
        "解析器太慢了",
    ],
)
async def test_a_request_in_another_language_is_asked_about_then_said(
    tmp_path, parsers, options, model, request_text
):
    """The workspace's names found in Japanese, Chinese, German, French and Spanish requests,
    by their letters or by the glossary's translations: with the budget open the question is
    asked; once it is spent, the same request is said to rest on
    an assumption, in the prompt and the summary."""
    editor = await start_indexed(tmp_path, parsers, options)
    try:
        editor.replies.append(None)  # dismissed: no answer, the question cools
        first = await _run(editor, model, request_text)
        await _asked(editor, 1)
        (asked,) = editor.prompts
        assert all(any(p in a.title for a in asked.actions) for p in PARSERS), asked.actions
        assert HEADING not in first  # asked, not assumed
        shown = await _run(editor, model, request_text)  # the budget is spent
        assert len(editor.prompts) == 1
        (said,) = [line for line in user_message(model, 1).splitlines() if "Assumed" in line]
        assert "src/parser.py" in said and "not tools/parser.py" in said
        assert said.split(" It is ambiguous")[0] in shown
    finally:
        await editor.stop()


def _reads(*paths: str) -> dict:
    calls = [(f"c{n}", "read_file", json.dumps({"path": p})) for n, p in enumerate(paths)]
    return reply(tool_calls=calls)


@pytest.mark.parametrize(
    "request_text",
    [
        "the syntax code rejects trailing commas, fix it",  # a synonym the glossary lacks
        "trailing commas are rejected when we parse",  # a bare verb
        "парсер слишком медленный",  # a language the finder does not read (Russian)
    ],
)
async def test_a_reference_the_finder_misses_is_said_from_what_the_task_worked_on(
    tmp_path, parsers, options, model, request_text
):
    """Nothing in these requests is found as a reference, so nothing is asked or said before
    the task. The task reads tools/parser.py only: its summary says that is the parser it took,
    not src/parser.py. A task that reads both took neither: nothing is said."""
    editor = await start_indexed(tmp_path, parsers, options)
    try:
        model.script.append(_reads("tools/parser.py"))
        shown = await _run(editor, model, request_text)
        said = (
            "Assumed the request meant tools/parser.py (the task read it; the request did not "
            "say which), not src/parser.py."
        )
        assert f"{HEADING}\n- {said}" in shown
        assert "Assumed" not in user_message(model, 0)  # not seen before: said after
        model.script.append(_reads("tools/parser.py", "src/parser.py"))
        shown = await _run(editor, model, request_text)
        assert HEADING not in shown
        assert editor.prompts == []
    finally:
        await editor.stop()


@pytest.mark.parametrize(
    "request_text", ["tokens out of parser look wrong", "parser is slow, fix it"]
)
async def test_a_bare_word_naming_two_files_is_said_in_the_prompt_never_asked(
    tmp_path, parsers, options, model, request_text
):
    """A word of prose that is the name of both parsers: with the budget open nothing is
    asked; the prompt says which the task may take; the summary says the one it read."""
    editor = await start_indexed(tmp_path, parsers, options)
    try:
        model.script.append(_reads("tools/parser.py"))
        shown = await _run(editor, model, request_text)
        (hint,) = [line for line in user_message(model, 0).splitlines() if "may name" in line]
        assert "'parser' in the request may name src/parser.py or tools/parser.py" in hint
        assert editor.prompts == []  # never asked, the budget open
        said = (
            "Assumed the request meant tools/parser.py (the task read it; the request did not "
            "say which), not src/parser.py."
        )
        assert f"{HEADING}\n- {said}" in shown
    finally:
        await editor.stop()
