"""Model faults through the real `talos-ls`: whatever the endpoint does, the task ends
`failed` with an error that says what happened (in `talos.task.list`, the progress end message,
the warning shown, and the transcript `talos.task.show` renders), the scripted server counts a
bounded number of requests, and the daemon keeps serving: it answers while the model hangs,
and runs the next task. Cancelling a task whose model call hangs closes the HTTP stream."""

from __future__ import annotations

import asyncio
import json

import pytest
from lsprotocol import types

from talos_ls.demo.scripted_model import drop, error, hang, raw, reply, silent
from talos_ls.lsp.settings import Settings

from ..lsp.conftest import WAIT_S
from .conftest import PATIENT, QUICK_FIRST_BYTE, QUICK_IDLE

GARBAGE = 'data: {"choices": [{"delta": {"content": "ok"}}]}\n\ndata: }}not json{{\n\n'

FAULTS = {
    # name: (what the server plays, what the error says, how many requests it may get[, the
    # timeouts: long unless the fault is about one])
    "hang mid-stream, keep-alives": (
        [hang()],
        r"stalled: nothing for 1 s after output began \(modelIdleTimeout\)",
        1,
        QUICK_IDLE,
    ),
    "hang mid-stream, silence": (
        [hang(keepalive=False)],
        r"stalled: nothing for 1 s after output began",
        1,
        QUICK_IDLE,
    ),
    "hang before the first byte": (
        [silent()],
        r"no answer from http://127\.0\.0\.1:\d+/v1 within 1 s \(modelTimeout\)",
        1,
        QUICK_FIRST_BYTE,
    ),
    "connection closed mid-stream": (
        [drop(reply("a long answer, cut"), after=3)],
        r"ended before the model finished \(no finish reason",
        1,
    ),
    "connection reset mid-stream": (
        [drop(reply("a long answer, cut"), after=3, reset=True)],
        r"broke after output began: connection lost",
        1,
    ),
    "429 with Retry-After, for ever": (
        [error(429, "Rate limit reached", headers={"Retry-After": "1"})] * 8,
        r"429 from .* \(Rate limit reached\), 4 attempts; giving up",
        4,
    ),
    "500, for ever": (
        [error(500, "The server had an error")] * 8,
        r"500 from .* \(The server had an error\), 4 attempts; giving up",
        4,
    ),
    "200 with an HTML page": (
        [raw("<html><h1>Welcome to nginx!</h1></html>")],
        r"sent a 200 answer that is not a stream \(text/html\): is it an OpenAI-compatible",
        1,
    ),
    "SSE with a garbage chunk": (
        [raw(GARBAGE, "text/event-stream")],
        r"sent a stream event that is not JSON",
        1,
    ),
}


@pytest.mark.parametrize("fault", FAULTS)
async def test_a_model_fault_fails_the_task_clearly_and_the_daemon_goes_on(
    launch, base_options, model, fault
):
    import re

    steps, words, requests, *timeouts = FAULTS[fault]
    editor = await launch({**base_options, **(timeouts[0] if timeouts else PATIENT)})
    model.script += [dict(step) for step in steps]
    task_id = (await editor.command("talos.task.start", {"prompt": "misbehave"}))["task_id"]
    reports = await editor.finished(task_id)  # it ends: no task runs for ever

    task = await editor.task(task_id)
    assert task["state"] == "failed" and re.search(words, task["error"]), task
    end = reports[-1].message
    assert end.startswith("failed: ") and re.search(words, end), end
    await editor.until(
        lambda: any(
            m.startswith(f"Talos {task_id} failed: ") and re.search(words, m)
            for m in editor.messages()
        ),
        "the warning",
    )
    shown = await editor.command("talos.task.show", {"task_id": task_id})
    assert "Stopped because:" in shown and re.search(words, shown)
    # bounded: counted where they arrive. A loaded machine's server thread may read a request
    # after the client gave up on it (a 1 s timeout), and a loaded client may give up on its
    # only request before it left: retries are waited for, and never more are made.
    if requests > 1:
        await editor.until(lambda: len(model.requests) >= requests, f"{requests} request(s)")
    assert len(model.requests) <= requests
    if requests > 1:  # each retry said so in the progress, with the attempt
        steps_said = [r.message for r in reports if isinstance(r, types.WorkDoneProgressReport)]
        assert any(f"(attempt {requests} of {requests})" in m for m in steps_said), steps_said
    assert "sk-test-not-a-real-key" not in json.dumps([task, end, shown, editor.messages()])

    model.script[:] = [reply("all is well again")]
    after = (await editor.command("talos.task.start", {"prompt": "now behave"}))["task_id"]
    assert (await editor.finished(after))[-1].message.startswith("done")


@pytest.mark.parametrize(
    "fault",
    ["hang mid-stream, keep-alives", "hang mid-stream, silence", "hang before the first byte"],
)
async def test_the_daemon_answers_while_the_model_hangs_and_cancel_closes_the_stream(
    launch, base_options, model, ws, fault
):
    editor = await launch(base_options)  # the default timeouts: this hang lasts a minute
    model.script += FAULTS[fault][0]
    task_id = (await editor.command("talos.task.start", {"prompt": "hang"}))["task_id"]
    await editor.until(lambda: model.requests, "the model call")
    await asyncio.sleep(0.3)  # well into the hang

    status = await editor.command("talos.status", {})
    assert [t["id"] for t in status["running"]] == [task_id]
    uri = editor.open(ws / "src" / "app.py")
    whole = types.Range(
        start=types.Position(line=0, character=0), end=types.Position(line=1, character=0)
    )
    actions = await asyncio.wait_for(
        editor.client.text_document_code_action_async(
            types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                range=whole,
                context=types.CodeActionContext(diagnostics=[]),
            )
        ),
        WAIT_S,
    )
    assert "Ask Talos about the selection" in [a.title for a in actions]
    assert (await editor.task(task_id))["state"] == "running"

    assert (await editor.command("talos.task.cancel", {"task_id": task_id}))["cancelled"]
    reports = await editor.finished(task_id)
    assert reports[-1].message.startswith("cancelled")
    assert await asyncio.to_thread(model.disconnected.wait, WAIT_S), "the stream stayed open"
    assert len(model.requests) == 1


def test_the_timeouts_are_settings_checked_like_the_others():
    settings, problems = Settings().updated({"modelTimeout": 300, "modelIdleTimeout": 90})
    assert problems == []
    config = settings.model_config()
    assert (config.timeout, config.idle_timeout) == (300, 90)
    kept, problems = settings.updated({"modelIdleTimeout": 0, "modelTimeout": "soon"})
    assert sorted(problems) == [
        "modelIdleTimeout: must be a number of seconds from 1 to 86400",
        "modelTimeout: must be a number of seconds from 1 to 86400",
    ]
    assert kept.model_config().idle_timeout == 90  # the last good value stays
    default = Settings().model_config()
    assert (default.timeout, default.idle_timeout) == (120, 60)
