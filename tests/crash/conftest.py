"""The real `talos-ls` process over stdio (pytest-lsp's client), killed with SIGKILL and started
again on the same store and workspace. The person here may never answer a prompt (`hold`): the
server dies with the prompt open."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pytest_lsp.client import LanguageClient, register_lsp_features

from talos_ls.store import open_store

from ..conftest import process_backends
from ..lsp.conftest import WAIT_S, Editor, _converter, apply_edits, capabilities, model, server_env

__all__ = ["model"]  # the scripted model of the language-server tests


@pytest.fixture(params=process_backends())
def backend(request) -> str:
    """SQLite on every run, the Redis family with --full (tests/conftest.py)."""
    return request.param


async def launch(home: Path, ws: Path, options: dict[str, Any], hold: bool = False) -> Editor:
    """A server on `ws`, ready (its folder's host started: recovery done)."""
    client = LanguageClient(converter_factory=_converter)
    register_lsp_features(client)
    editor = Editor(client)
    editor.hold = hold  # type: ignore[attr-defined]

    @client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
    async def on_prompt(ls, params: types.ShowMessageRequestParams):
        editor.prompts.append(params)
        if editor.hold:  # type: ignore[attr-defined]
            await asyncio.Event().wait()  # never answered: the server dies first
        reply = editor.replies.pop(0) if editor.replies else None
        if callable(reply):
            reply = reply(params)
        return None if reply is None else types.MessageActionItem(title=reply)

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def on_apply(ls, params: types.ApplyWorkspaceEditParams):
        (change,) = params.edit.document_changes
        uri, version = change.text_document.uri, change.text_document.version
        ok = editor.versions.get(uri) == version
        if ok:
            editor.type(uri, apply_edits(editor.texts[uri], change.edits))
        return types.ApplyWorkspaceEditResult(applied=ok)

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def on_register(ls, params):
        editor.registrations.extend(params.registrations)

    @client.feature("talos/status")
    def on_status(ls, params):
        editor.statuses.append(params)

    await client.start_io(sys.executable, "-m", "talos_ls.server", env=server_env(home))
    await asyncio.wait_for(
        client.initialize_session(
            types.InitializeParams(
                capabilities=capabilities(watches=True),
                root_uri=ws.as_uri(),
                workspace_folders=[types.WorkspaceFolder(uri=ws.as_uri(), name=ws.name)],
                initialization_options=options,
            )
        ),
        WAIT_S,
    )
    await editor.until(lambda: any(s.folders for s in editor.statuses), "the first status")
    return editor


async def sigkill(editor: Editor) -> None:
    """SIGKILL the server: no shutdown, no last write."""
    process = editor.client._server
    assert process is not None and process.returncode is None
    os.kill(process.pid, signal.SIGKILL)
    await asyncio.wait_for(process.wait(), WAIT_S)
    assert process.returncode == -signal.SIGKILL
    with contextlib.suppress(Exception):
        await asyncio.wait_for(editor.client.stop(), WAIT_S)


async def close(editor: Editor) -> None:
    """The end of a test: a server already killed is only forgotten."""
    with contextlib.suppress(Exception):
        await editor.stop()


def read_store(url: str, fn):
    store = open_store(url)
    try:
        return fn(store)
    finally:
        store.close()


def durable(url: str, agent: str) -> dict[str, Any]:
    """Everything of the agent's the store holds but its tasks: facts (evidence counts and
    all), the journal, question candidates, the budget, the turn counter, proposals."""

    def snap(store) -> dict[str, Any]:
        return {
            "facts": sorted(store.fact_list(agent), key=lambda f: f["key"]),
            "journal": sorted(store.journal_live(agent), key=lambda j: j["id"]),
            "candidates": sorted(store.qq_list(agent), key=lambda c: c["candidate_id"]),
            "last_delivery": store.qq_last_delivery(agent),
            "turn": store.turn_current(agent),
            "proposals": store.proposal_list(agent),
        }

    return read_store(url, snap)


async def stored_state(url: str, task_id: str, state: str) -> None:
    """Wait until the task's record in the store is in `state`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while True:
        row = read_store(url, lambda s: s.task_get(task_id))
        if row is not None and row["state"] == state:
            return
        if loop.time() > deadline:
            raise AssertionError(f"task {task_id} never stored as {state}: {row and row['state']}")
        await asyncio.sleep(0.05)


@pytest.fixture
def ws(tmp_path) -> Path:
    """Two files: the crash tests propose an edit to each."""
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("def main():\n    return 1\n")
    (root / "src" / "util.py").write_text("X = 1\n")
    return root


@pytest.fixture
def options(store_url, model) -> dict[str, Any]:
    return {
        "model": "fake-model",
        "baseUrl": model.url,
        "storeUrl": store_url,
        "prices": {"fake-model": {"input": 1, "cached_input": 0.5, "output": 2}},
    }
