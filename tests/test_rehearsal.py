"""The first task does no first-time work the process could have done while the person was
still reading (issue 30, figure 8): the LSP converter's code for a task's messages and the
model client's first-request work are rehearsed at start, and nothing later undoes them.

Each test watches for the work itself (code being written, the platform being read), not for
how long anything takes: timings are `bench/lsp_bench.py`'s, figure 8."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from lsprotocol import types
from pygls.protocol import JsonRPCNotification, JsonRPCResponseMessage

from talos_ls.agent.model import REHEARSAL_HOST, ModelClient, ModelConfig

from .fake_openai import reply


@contextmanager
def calls(keep: Callable[[str, str], bool]) -> Iterator[list[str]]:
    """The functions (file:name) entered in any thread meanwhile, those `keep` accepts."""
    seen: list[str] = []

    def profile(frame, event, arg):
        code = frame.f_code
        if event == "call" and keep(code.co_filename, code.co_name):
            seen.append(f"{code.co_filename}:{code.co_name}")

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        yield seen
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]


def written_code(filename: str, name: str) -> bool:
    """cattrs writes the (un)structuring code for a type at its first use, as source it runs."""
    return filename.startswith("<cattrs generated") and name == "<module>"


def task_messages(token: str) -> list[object]:
    """What a task sends the editor, in the order it does: the command's answer, the progress
    created, begun, reported and ended, a status, a message, an answer to a custom request."""
    progress = [
        types.WorkDoneProgressBegin(title="Talos", cancellable=True, message="thinking"),
        types.WorkDoneProgressReport(message="step 1"),
        types.WorkDoneProgressEnd(message="done"),
    ]
    return [
        types.ExecuteCommandResponse(id=1, result={"task_id": token, "turn": 3}),
        types.WorkDoneProgressCreateRequest(
            id=2, params=types.WorkDoneProgressCreateParams(token=token)
        ),
        *(types.ProgressNotification(params=types.ProgressParams(token, p)) for p in progress),
        JsonRPCNotification(
            method="talos/status", params={"tasks": [{"id": token}], "cost": 0.1}, jsonrpc="2.0"
        ),
        types.ShowMessageNotification(
            params=types.ShowMessageParams(types.MessageType.Info, "Talos: done")
        ),
        JsonRPCResponseMessage(id=3, result=None, jsonrpc="2.0"),
    ]


def test_a_tasks_messages_need_no_new_code_after_the_rehearsal():
    from talos_ls.lsp.transport import HardenedProtocol, converter
    from talos_ls.server import TalosServer

    protocol = HardenedProtocol(TalosServer(), converter())
    rehearsal = threading.Thread(target=protocol.rehearse)  # as at `initialized`: a worker
    rehearsal.start()
    rehearsal.join()
    with calls(written_code) as written:
        for message in task_messages("talos/task-1"):
            json.dumps(message, default=protocol._serialize_message)
        command = {"command": "talos.task.start", "arguments": [{"prompt": "fix it"}]}
        request = {"jsonrpc": "2.0", "id": 4, "method": "workspace/executeCommand"}
        protocol._structure({**request, "params": command}, "workspace/executeCommand")
    assert written == [], f"code written after the rehearsal, in the first task: {written}"


def test_without_the_rehearsal_the_first_task_writes_that_code():
    """The check above can fail: the same messages on a fresh converter write code."""
    from talos_ls.lsp.transport import HardenedProtocol, converter
    from talos_ls.server import TalosServer

    protocol = HardenedProtocol(TalosServer(), converter())
    with calls(written_code) as written:
        for message in task_messages("talos/task-1"):
            json.dumps(message, default=protocol._serialize_message)
    assert any("WorkDoneProgressBegin" in w for w in written), written


def test_the_model_clients_rehearsal_stays_in_memory_and_readies_our_client(server, monkeypatch):
    monkeypatch.setenv("TALOS_TEST_KEY", "sk-test-rehearsal-0123456789")
    client = ModelClient(ModelConfig("m", base_url=server.url, api_key_env="TALOS_TEST_KEY"))
    client.prepare().result(timeout=120)
    assert server.requests == []  # the rehearsal reached no endpoint

    def platform_read(filename: str, name: str) -> bool:
        return name == "get_platform" and filename.endswith("_base_client.py")

    server.script.append(reply("hello"))
    with calls(platform_read) as read:
        result = asyncio.run(client.complete([{"role": "user", "content": "hi"}], tools=[]))
    assert result.text == "hello" and len(server.requests) == 1
    assert read == [], "the first call read the platform: the rehearsal readied another client"
    assert REHEARSAL_HOST.endswith(".invalid")  # a name that never resolves (RFC 2606)
