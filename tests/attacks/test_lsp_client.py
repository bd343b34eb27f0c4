"""A lying or hostile LSP client against the real `talos-ls` process: replies to the server's
own requests that come late (after the server stopped waiting), twice, as errors, in the wrong
shape, or carrying ids the server never sent; and a burst of ten thousand task starts.

The server must drop each such reply with a log line and go on serving (a late reply to
`window/workDoneProgress/create` used to raise `InvalidStateError` inside pygls and end the
process), and a late "Allow once" must never run what was already denied. The client is raw
(`tests/lsp/lying_client.py`): pytest-lsp's client cannot answer late or twice.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from talos_ls.demo.scripted_model import ScriptedModelServer, hang, reply
from talos_ls.lsp.daemon import MAX_QUEUED, TASKS_AT_ONCE

from ..fuzz.raw import encode, rss_kib
from ..lsp.lying_client import LyingClient

PROGRESS = "window/workDoneProgress/create"
PROMPT = "window/showMessageRequest"
APPLY = "workspace/applyEdit"
SHOW = "window/showDocument"
CONFIG = "workspace/configuration"
REGISTER = "client/registerCapability"
REFRESH = "workspace/codeLens/refresh"


@pytest.fixture
def model():
    server = ScriptedModelServer()
    yield server
    server.close()


def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "app.py").write_text("def main():\n    return 1\n")
    return ws


def options(tmp_path: Path, model: ScriptedModelServer, **more: Any) -> dict[str, Any]:
    return {
        "model": "fake-model",
        "baseUrl": model.url,
        "storeUrl": "sqlite:///" + str(tmp_path / "talos.db"),
        "prices": {"fake-model": {"input": 1, "cached_input": 0.5, "output": 2}},
        **more,
    }


def calls(name: str, arguments: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [("c1", name, json.dumps(arguments))]


def alive(client: LyingClient) -> None:
    """The process runs and answers, and no request was answered twice."""
    assert client.proc.poll() is None, client.stderr()[-3000:]
    assert "settings" in client.result("talos.status", {})
    assert not client.duplicates, client.duplicates[:3]


def late_lines(client: LyingClient) -> int:
    return client.stderr().count("was dropped")


def test_every_request_to_the_client_answered_late_twice_wrongly_or_with_an_error(tmp_path, model):
    ws = workspace(tmp_path)
    # promptTimeout 1: prompts and edits wait 1 s, and so does every other request (its
    # wait is 5 s or promptTimeout, whichever is shorter).
    modes = {CONFIG: "hold", REGISTER: "hold", REFRESH: "hold"}
    client = LyingClient(tmp_path / "home", modes)
    try:
        # ---- at start: the configuration pull and the watcher registration, both late.
        client.initialize_with([ws], options(tmp_path, model, promptTimeout=1))
        client.wait_ready()  # the server stopped waiting for both and opened the folder
        assert client.reply_held(CONFIG, "twice") == 1
        assert client.reply_held(REGISTER, "twice") == 1
        alive(client)
        (folder,) = client.result("talos.status", {})["folders"]
        assert folder["index"]["watched_by"] == "server"  # the late registration was dropped
        client.modes.update({CONFIG: "answer", REGISTER: "answer"})

        # ---- progress: late (twice), and each other lie, on four tasks.
        held = None
        for mode in ("hold", "twice", "error", "wrong"):
            client.modes[PROGRESS] = mode
            model.script.append(reply(f"done with progress {mode}"))
            task_id = client.result("talos.task.start", {"prompt": f"progress {mode}"})["task_id"]
            assert client.finished(task_id)["state"] == "done"
            held = held or task_id
        asked = len(client.asked)
        # Answered after its task ended (a busy editor): the progress still comes, begun and
        # ended at once, and the second answer is dropped.
        assert client.reply_held(PROGRESS, "twice") == 1
        token = f"talos/task/{held}"
        client.until(
            lambda: (
                [
                    n["params"]["value"]["kind"]
                    for n in client.notifications_of("$/progress")
                    if n["params"]["token"] == token
                ]
                == ["begin", "end"]
            ),
            "the late progress, begun and ended",
        )
        alive(client)
        client.modes[PROGRESS] = "answer"

        # ---- a permission prompt: late "Allow once" (twice) after the denial, and a
        # $/cancelRequest naming the prompt's id, which is no request of the client's.
        pwned = ws / "pwned"
        for mode in ("hold", "error", "wrong", "twice"):
            client.modes[PROMPT] = mode
            model.script += [
                reply("", calls("run_command", {"command": f"touch {pwned}"})),
                reply("finished"),
            ]
            task_id = client.result("talos.task.start", {"prompt": f"prompt {mode}"})["task_id"]
            if mode == "hold":
                (prompt,) = client.wait_asked(PROMPT)[-1:]
                client.notify("$/cancelRequest", {"id": prompt["id"]})
            assert client.finished(task_id)["state"] == "done"  # not cancelled by the client
            result = model.requests[-1]["body"]["messages"][-1]["content"]
            assert result.startswith("error: not run"), (mode, result)
            if mode == "hold":
                assert client.reply_held(PROMPT, "twice", {"title": "Allow once"}) == 1
                alive(client)
            assert not pwned.exists(), mode
        client.modes[PROMPT] = "answer"

        # ---- an edit of an open document, and the diff shown as a document.
        edit = {"path": "src/app.py", "blocks": [{"search": "return 1", "replace": "return 2"}]}
        model.script += [reply("", calls("propose_edit", edit)), reply("proposed")]
        task_id = client.result("talos.task.start", {"prompt": "return 2"})["task_id"]
        assert client.finished(task_id)["state"] == "done"
        (proposal,) = client.result("talos.proposal.list", {})
        uri = (ws / "src" / "app.py").as_uri()
        client.notify(
            "textDocument/didOpen",
            {
                "textDocument": {
                    "uri": uri,
                    "languageId": "python",
                    "version": 1,
                    "text": "def main():\n    return 1\n",
                }
            },
        )
        for mode in ("hold", "error", "wrong", "twice"):
            client.modes[APPLY] = mode
            msg_id = client.request(
                "workspace/executeCommand",
                {"command": "talos.proposal.apply", "arguments": [{"proposal_id": proposal["id"]}]},
            )
            if mode == "hold":  # a "response" carrying the id of the client's own request
                client.wait_asked(APPLY)
                client.send(
                    encode(
                        {
                            "jsonrpc": "2.0",
                            "id": msg_id,
                            "result": {"applied": True, "status": "applied"},
                        }
                    )
                )
            answer = client.response(msg_id)
            assert answer["result"]["applied"] is False, (mode, answer)
            assert answer["result"]["status"] == "pending", (mode, answer)
            if mode == "hold":
                assert client.reply_held(APPLY, "twice", {"applied": True}) == 1
                alive(client)
        assert (ws / "src" / "app.py").read_text() == "def main():\n    return 1\n"
        client.modes[APPLY] = "answer"
        for mode in ("hold", "error", "wrong", "twice"):
            client.modes[SHOW] = mode
            shown = client.result("talos.proposal.diff", {"proposal_id": proposal["id"]})
            assert "return 2" in shown["diff"]
            assert (shown["uri"] is None) == (mode != "twice"), (mode, shown)
            if mode == "hold":
                assert client.reply_held(SHOW, "twice") == 1
                alive(client)

        # ---- a configuration change without its section: the pull, late.
        client.modes[CONFIG] = "hold"
        client.notify("workspace/didChangeConfiguration", {"settings": {}})
        client.wait_asked(CONFIG, 2)
        statuses = len(client.notifications_of("talos/status"))  # the server is idle now
        client.until(
            lambda: len(client.notifications_of("talos/status")) > statuses,
            "the status the change publishes once the pull is given up",
        )
        assert client.reply_held(CONFIG, "twice") == 1
        assert client.reply_held(REFRESH, "twice") >= 1  # lens refreshes, never answered
        alive(client)

        # ---- replies to nothing: ids never sent, a result and an error at once, an error
        # object that is no error object.
        first = client.asked[0]["id"]
        for lie in (
            {"id": "never-sent", "result": None},
            {"id": 424242, "result": [1]},
            {"id": "x", "result": 1, "error": {"code": 1, "message": "m"}},
            {"id": first, "error": {"code": "NaN", "message": 7}},
        ):
            client.send(encode({"jsonrpc": "2.0", **lie}))
        alive(client)
        assert client.asked[asked:]  # the server went on asking, and was answered
        assert late_lines(client) >= 8, client.stderr()[-3000:]
        assert "Traceback" not in client.stderr()

        # ---- and it still does its work.
        model.script.append(reply("The answer is 42."))
        task_id = client.result("talos.task.start", {"prompt": "the answer?"})["task_id"]
        assert client.finished(task_id)["state"] == "done"
        assert "The answer is 42." in client.result("talos.task.show", {"task_id": task_id})
    finally:
        assert client.close() == 0, client.stderr()[-3000:]


def burst(client: LyingClient, count: int = 10_000) -> tuple[list[str], list[dict]]:
    """`count` task starts sent at once; the ids of the tasks started, and the refusals."""
    ids = [
        client.request(
            "workspace/executeCommand",
            {"command": "talos.task.start", "arguments": [{"prompt": f"task {n}"}]},
        )
        for n in range(count)
    ]
    answers = [client.response(i, timeout=180) for i in ids]
    return (
        [a["result"]["task_id"] for a in answers if "result" in a],
        [a["error"] for a in answers if "error" in a],
    )


@pytest.mark.full
def test_a_burst_of_ten_thousand_task_starts_is_refused_past_the_bound(tmp_path, model):
    ws = workspace(tmp_path)
    client = LyingClient(tmp_path / "home")
    try:
        client.initialize_with([ws], options(tmp_path, model))
        client.wait_ready()
        model.script += [hang() for _ in range(TASKS_AT_ONCE)] + [reply("after the burst")]
        before = rss_kib(client.proc.pid)
        started, refused = burst(client)
        assert len(started) + len(refused) == 10_000
        assert MAX_QUEUED <= len(started) <= MAX_QUEUED + TASKS_AT_ONCE, len(started)
        for error in refused:
            assert error["code"] == -32803, error
            assert "too many tasks queued: " in error["message"], error
            assert "running, " in error["message"] and "queued; cancel one" in error["message"]
        alive(client)
        tasks = client.result("talos.task.list", {})
        states = [t["state"] for t in tasks]
        assert states.count("running") == TASKS_AT_ONCE, states
        assert len(tasks) == len(started)
        after = rss_kib(client.proc.pid)
        again, _ = burst(client)  # the queue is full: all refused, and memory stays
        assert again == []
        last = rss_kib(client.proc.pid)
        print(
            f"\n10,000 task starts: {len(started)} taken, {len(refused)} refused; RSS "
            f"{before // 1024} MiB before, {after // 1024} MiB after, {last // 1024} MiB "
            "after 10,000 more"
        )
        # Measured: 53 MiB, 83 after (10,000 requests in flight at once), 84 after 10,000
        # more and flat over 40,000 more: bounded, not growing with the starts.
        assert after - before < 64 * 1024, f"RSS grew from {before} to {after} KiB"
        assert last - after < 8 * 1024, f"RSS grew from {after} to {last} KiB"
        # Everything cancelled (the queued first, so none starts meanwhile): then the
        # daemon serves a task as before.
        for state in ("queued", "running"):
            for task in [t for t in tasks if t["state"] == state]:
                assert client.result("talos.task.cancel", {"task_id": task["id"]})["cancelled"]
        client.until(
            lambda: (
                not [
                    t
                    for t in client.result("talos.task.list", {})
                    if t["state"] in ("queued", "running")
                ]
            ),
            "every task to end",
        )
        assert {t["state"] for t in client.result("talos.task.list", {})} == {"cancelled"}
        task_id = client.result("talos.task.start", {"prompt": "one more"})["task_id"]
        assert client.finished(task_id)["state"] == "done"
        assert "Traceback" not in client.stderr()
    finally:
        assert client.close() == 0, client.stderr()[-3000:]
