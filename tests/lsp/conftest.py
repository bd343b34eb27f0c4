"""The real `talos-ls` process, driven by a real LSP client (pytest-lsp's), with the scripted
OpenAI-compatible server as the model. `Editor` plays the person: scripted replies to prompts,
every notification recorded."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp.client import LanguageClient, register_lsp_features

from talos_ls.demo.scripted_model import ScriptedModelServer

WAIT_S = 60.0  # generous: a stuck server fails the test instead of hanging it


def _converter():
    """lsprotocol 2025.0.0 decodes a CodeAction carrying a Command as a Command (client side
    only); this picks by the shape of "command"."""
    from typing import Union

    conv = default_converter()

    def hook(obj, _):
        kind = types.Command if isinstance(obj.get("command"), str) else types.CodeAction
        return conv.structure(obj, kind)

    conv.register_structure_hook(Union[types.Command, types.CodeAction], hook)  # noqa: UP007
    return conv


def capabilities(
    prompts: bool = True, progress: bool = True, watches: bool = False
) -> types.ClientCapabilities:
    window = types.WindowClientCapabilities(
        work_done_progress=progress,
        show_message=types.ShowMessageRequestClientCapabilities() if prompts else None,
    )
    workspace = types.WorkspaceClientCapabilities(
        apply_edit=True,
        configuration=True,
        workspace_folders=True,
        did_change_configuration=types.DidChangeConfigurationClientCapabilities(),
        did_change_watched_files=types.DidChangeWatchedFilesClientCapabilities(
            dynamic_registration=watches
        ),
    )
    return types.ClientCapabilities(window=window, workspace=workspace)


def offset(text: str, position: types.Position) -> int:
    """An LSP position (line, UTF-16 character) as an index into `text`."""
    from talos_ls.edits.proposals import lines

    cut = lines(text)
    start = sum(len(line) for line in cut[: position.line])
    line = cut[position.line] if position.line < len(cut) else ""
    units = 0
    for i, ch in enumerate(line):
        if units >= position.character:
            return start + i
        units += 2 if ord(ch) > 0xFFFF else 1
    return start + len(line.rstrip("\r\n")) if position.line < len(cut) else len(text)


def apply_edits(text: str, edits: list[types.TextEdit]) -> str:
    """What an editor does with a TextDocumentEdit: each range replaced, all against the
    original text."""
    spans = sorted(
        ((offset(text, e.range.start), offset(text, e.range.end), e.new_text) for e in edits),
        reverse=True,
    )
    for start, end, new in spans:
        text = text[:start] + new + text[end:]
    return text


class Editor:
    """A client and what the person does: `replies` answers prompts in order (None:
    dismissed), `prompts` keeps what was shown, `statuses` every `talos/status`."""

    def __init__(self, client: LanguageClient) -> None:
        self.client = client
        # Each reply: a button title, None (dismissed), or a function of the prompt.
        self.replies: list[Any] = []
        self.prompts: list[types.ShowMessageRequestParams] = []
        self.statuses: list[Any] = []
        self.proposals: list[Any] = []
        self.registrations: list[types.Registration] = []
        self.edits: list[types.ApplyWorkspaceEditParams] = []
        self.apply_ok = True
        self.versions: dict[str, int] = {}  # open documents' versions
        self.texts: dict[str, str] = {}  # and their text
        self.initialized: types.InitializeResult | None = None

    def open(self, path: Path, text: str | None = None) -> str:
        uri = path.as_uri()
        self.versions[uri] = 1
        text = path.read_text() if text is None else text
        self.texts[uri] = text
        item = types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=item))
        return uri

    def type(self, uri: str, text: str) -> None:
        """The person edits the buffer (unsaved)."""
        self.versions[uri] += 1
        self.texts[uri] = text
        doc = types.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri])
        change = types.TextDocumentContentChangeWholeDocument(text=text)
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(text_document=doc, content_changes=[change])
        )

    def button(self, containing: str) -> Callable[[Any], str]:
        """A reply: the button whose title contains `containing`."""
        return lambda params: next(a.title for a in params.actions if containing in a.title)

    async def command(self, name: str, *arguments: Any) -> Any:
        params = types.ExecuteCommandParams(command=name, arguments=list(arguments))
        return await asyncio.wait_for(self.client.workspace_execute_command_async(params), WAIT_S)

    async def until(self, check: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
        """Wait until `check()` is truthy; its value."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not (value := check()):
            if loop.time() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            await asyncio.sleep(0.02)
        return value

    def progress(self, task_id: str) -> list[Any]:
        return self.client.progress_reports.get(f"talos/task/{task_id}", [])

    async def finished(self, task_id: str) -> list[Any]:
        """The task's progress, once it has ended."""
        return await self.until(
            lambda: (
                (r := self.progress(task_id)) and isinstance(r[-1], types.WorkDoneProgressEnd) and r
            ),
            f"the end of task {task_id}",
        )

    async def task(self, task_id: str) -> dict:
        (task,) = [t for t in await self.command("talos.task.list", {}) if t["id"] == task_id]
        return task

    def messages(self) -> list[str]:
        return [m.message for m in self.client.messages]

    def last_status(self) -> Any:
        return self.statuses[-1] if self.statuses else None

    async def stop(self) -> None:
        """Shut the server down as an editor does, and if it does not go (it crashed, hangs,
        or the client already gave up), kill it: a test never leaves a daemon behind, to
        renew its lease in a shared store or hold a port, whatever failed before."""
        try:
            if not self.client.stopped:
                await asyncio.wait_for(self.client.shutdown_session(), WAIT_S)
        finally:
            server = getattr(self.client, "_server", None)  # pygls keeps the process there
            if server is not None and server.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    server.kill()
                await asyncio.wait_for(server.wait(), WAIT_S)
            await self.client.stop()


def server_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TALOS_", "XDG_"))}
    env.update(
        {
            "XDG_CONFIG_HOME": str(home / "config"),
            "XDG_STATE_HOME": str(home / "state"),
            "XDG_DATA_HOME": str(home / "data"),
            "XDG_CACHE_HOME": str(home / "cache"),
            "OPENAI_API_KEY": "sk-test-not-a-real-key-000000000000",
        }
    )
    return env


async def start_editor(
    home: Path,
    folders: list[Path],
    options: dict[str, Any],
    caps: types.ClientCapabilities | None = None,
    configuration: dict[str, Any] | None = None,
    prefix: Sequence[str] = (),
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    args: Sequence[str] = (),
) -> Editor:
    """The real server (`prefix`: a program to start it through, as `setpriv ...`). With
    `cwd`, it is started there as an editor starts it, by its `talos-ls` script (`python -m`
    would import from that directory first); `env` adds to its environment, `args` to its
    command line."""
    client = LanguageClient(converter_factory=_converter)
    register_lsp_features(client)
    editor = Editor(client)
    if configuration is not None:
        client.set_configuration(configuration, section="talos")

    @client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
    def on_prompt(ls, params: types.ShowMessageRequestParams):
        editor.prompts.append(params)
        reply = editor.replies.pop(0) if editor.replies else None
        if callable(reply):
            reply = reply(params)
        return None if reply is None else types.MessageActionItem(title=reply)

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def on_apply(ls, params: types.ApplyWorkspaceEditParams):
        """As an editor does: edits at the buffer's version land, and the buffer's change is
        sent before the reply; `apply_ok` False plays a refusal."""
        editor.edits.append(params)
        (change,) = params.edit.document_changes
        uri, version = change.text_document.uri, change.text_document.version
        ok = editor.apply_ok and editor.versions.get(uri) == version
        if ok:
            editor.type(uri, apply_edits(editor.texts[uri], change.edits))
        return types.ApplyWorkspaceEditResult(applied=ok)

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def on_register(ls, params: types.RegistrationParams):
        editor.registrations.extend(params.registrations)

    @client.feature("talos/status")
    def on_status(ls, params):
        editor.statuses.append(params)

    @client.feature("talos/proposals")
    def on_proposals(ls, params):
        editor.proposals.append(params)

    argv = (
        [str(Path(sys.executable).with_name("talos-ls"))]
        if cwd
        else [sys.executable, "-m", "talos_ls.server"]
    )
    await client.start_io(*prefix, *argv, *args, env={**server_env(home), **(env or {})}, cwd=cwd)
    editor.initialized = await asyncio.wait_for(
        client.initialize_session(
            types.InitializeParams(
                capabilities=caps or capabilities(),
                root_uri=folders[0].as_uri() if folders else None,
                workspace_folders=[
                    types.WorkspaceFolder(uri=f.as_uri(), name=f.name) for f in folders
                ],
                initialization_options=options,
            )
        ),
        WAIT_S,
    )
    return editor


@pytest.fixture
def model():
    server = ScriptedModelServer()
    yield server
    server.close()


@pytest.fixture
def ws(tmp_path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("def main():\n    return 1\n")
    return root


@pytest.fixture
def options(tmp_path, model) -> dict[str, Any]:
    return {
        "model": "fake-model",
        "baseUrl": model.url,
        "storeUrl": "sqlite:///" + str(tmp_path / "talos.db"),
        "prices": {"fake-model": {"input": 1, "cached_input": 0.5, "output": 2}},
    }


@pytest.fixture
async def editor(tmp_path, ws, options):
    editor = await start_editor(tmp_path / "home", [ws], options)
    await editor.until(lambda: any(s.folders for s in editor.statuses), "the first status")
    yield editor
    await editor.stop()


PARSERS = ("src/parser.py", "tools/parser.py")  # "the parser" has two candidates


@pytest.fixture
def parsers(ws):
    """The workspace with a parser in `src/` and one in `tools/`."""
    for rel in PARSERS:
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text("def parse(text):\n    return text\n")
    return ws


async def start_indexed(tmp_path: Path, ws: Path, options: dict[str, Any]) -> Editor:
    """The real server on `ws`, once its index is ready (references resolve in full)."""
    editor = await start_editor(tmp_path / "home", [ws], options)
    await editor.until(
        lambda: any(f.index.ready for s in editor.statuses for f in s.folders), "the index"
    )
    return editor


def user_message(model, request: int) -> str:
    """The person's message as the model got it in its `request`-th call."""
    return next(
        m["content"] for m in model.requests[request]["body"]["messages"] if m["role"] == "user"
    )
