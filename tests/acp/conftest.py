"""The real `talos-ls --acp` process, driven by the Python ACP SDK's client side.

`Person` is the client and the person at it: it answers permission prompts and elicitations
from lists the test fills (`permit`, `elicit`), holds the editor's buffers (`buffers`: the
unsaved text `fs/read_text_file` returns; `fs/write_text_file` writes the disk and the buffer,
as an editor saving), and records every message the agent sent, raw (`seen`), so a test reads
updates the SDK's models do not know (`notice`, `compaction_update`) too.

`start_agent(home, model)` starts the process with the person's config file (the scripted
model's URL, a SQLite store, prices) in a fake home; `Agent.stop()` closes its input and waits
for it to exit (killing it if it does not), and is always called.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from acp import connect_to_agent
from acp.connection import StreamEvent
from acp.exceptions import RequestError
from acp.schema import (
    AcceptElicitationResponse,
    AllowedOutcome,
    CancelElicitationResponse,
    ClientCapabilities,
    DeclineElicitationResponse,
    DeniedOutcome,
    ElicitationCapabilities,
    ElicitationFormCapabilities,
    FileSystemCapabilities,
    ReadTextFileResponse,
    RequestPermissionResponse,
    TextContentBlock,
    WriteTextFileResponse,
)

from talos_ls.demo.scripted_model import ScriptedModelServer
from tests.lsp.conftest import server_env, ws  # noqa: F401  (`ws`: the LSP tests' workspace)

WAIT_S = 60.0
LIMIT = 64 * 1024 * 1024


def config_toml(model: ScriptedModelServer, store: Path, mode: str = "ask") -> str:
    return (
        f'model = "fake-model"\nbase_url = "{model.url}"\nstore = "sqlite:///{store}"\n'
        f'mode = "{mode}"\n'
        '[prices."fake-model"]\ninput = 1\ncached_input = 0.5\noutput = 2\n'
    )


def write_config(home: Path, text: str) -> None:
    folder = home / "config" / "talos"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.toml").write_text(text)


class Person:
    """The ACP client and the person at it (see the module's docstring)."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.permit: list[Any] = []  # "allow_once", "allow_always", "reject_*", "cancel", an id
        self.permissions: list[tuple[Any, list[Any]]] = []
        self.elicit: list[Any] = []  # an option's title, "decline", "cancel", or a coroutine fn
        self.elicitations: list[tuple[str, Any]] = []
        self.buffers: dict[str, str] = {}
        self.reads: list[str] = []
        self.writes: list[tuple[str, str]] = []
        self.write_lands = True  # False: a client that answers a write it did not make
        self.asked = asyncio.Event()  # set at each prompt (a permission or a question)

    # ------------------------------------------------- what the agent asks
    async def request_permission(self, session_id, tool_call, options, **_):
        self.permissions.append((tool_call, options))
        self.asked.set()
        reply = self.permit.pop(0) if self.permit else "cancel"
        if callable(reply):
            reply = await reply(tool_call, options)
        if reply == "cancel":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        chosen = next((o.option_id for o in options if o.kind == reply), None)
        chosen = chosen or next((o.option_id for o in options if reply in o.name), reply)
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=chosen)
        )

    async def create_elicitation(self, message, mode, **_):
        self.elicitations.append((message, mode))
        self.asked.set()
        reply = self.elicit.pop(0) if self.elicit else "cancel"
        if callable(reply):
            reply = await reply(message, mode)
        if reply == "decline":
            return DeclineElicitationResponse(action="decline")
        if reply == "cancel":
            return CancelElicitationResponse(action="cancel")
        field = mode.requested_schema.properties["answer"]
        chosen = next((o.const for o in field.one_of if reply in o.title), reply)
        return AcceptElicitationResponse(action="accept", content={"answer": chosen})

    async def read_text_file(self, session_id, path, line=None, limit=None, **_):
        self.reads.append(path)
        if path in self.buffers:
            return ReadTextFileResponse(content=self.buffers[path])
        if Path(path).is_file():
            return ReadTextFileResponse(content=Path(path).read_text())
        raise RequestError.resource_not_found(path)

    async def write_text_file(self, session_id, path, content, **_):
        self.writes.append((path, content))
        if self.write_lands:
            Path(path).write_text(content)
            self.buffers[path] = content
        return WriteTextFileResponse()

    async def session_update(self, session_id, update, **_):
        return None

    def on_connect(self, conn: Any) -> None:
        return None

    # ------------------------------------------------------- what it saw
    def observe(self, event: StreamEvent) -> None:
        if event.direction.value == "incoming":
            self.seen.append(event.message)

    def updates(self, session_id: str | None = None, kind: str | None = None) -> list[dict]:
        out = []
        for m in self.seen:
            if m.get("method") != "session/update":
                continue
            params = m.get("params") or {}
            update = params.get("update") or {}
            if session_id is not None and params.get("sessionId") != session_id:
                continue
            if kind is None or update.get("sessionUpdate") == kind:
                out.append(update)
        return out

    def text(self, session_id: str) -> str:
        return "".join(
            u["content"].get("text", "") for u in self.updates(session_id, "agent_message_chunk")
        )


class Agent:
    def __init__(self, process: asyncio.subprocess.Process, person: Person, stderr: Path) -> None:
        self.process = process
        self.person = person
        self.stderr = stderr
        self.conn: Any = None

    async def start(self, caps: ClientCapabilities | None = None) -> Any:
        self.conn = connect_to_agent(  # the Python SDK calls elicitation "unstable"
            self.person,
            self.process.stdin,
            self.process.stdout,
            observers=[self.person.observe],
            use_unstable_protocol=True,
        )
        return await asyncio.wait_for(
            self.conn.initialize(protocol_version=1, client_capabilities=caps or capabilities()),
            WAIT_S,
        )

    async def new(self, cwd: Path) -> str:
        reply = await asyncio.wait_for(self.conn.new_session(cwd=str(cwd), mcp_servers=[]), WAIT_S)
        return reply.session_id

    async def prompt(self, session_id: str, text: str) -> Any:
        blocks = [TextContentBlock(type="text", text=text)]
        return await asyncio.wait_for(
            self.conn.prompt(session_id=session_id, prompt=blocks), WAIT_S
        )

    async def until(self, check: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not (found := check()):
            if loop.time() > deadline or self.process.returncode is not None:
                raise AssertionError(f"waited for {what}; stderr:\n{self.log()[-3000:]}")
            await asyncio.sleep(0.02)
        return found

    def log(self) -> str:
        return self.stderr.read_text(errors="replace") if self.stderr.exists() else ""

    async def stop(self) -> int | None:
        with contextlib.suppress(Exception):
            if self.conn is not None:
                await asyncio.wait_for(self.conn.close(), 5)
        return await ended(self.process)


async def ended(process: asyncio.subprocess.Process) -> int | None:
    """Its input closed, the process's exit status; killed if it does not exit in WAIT_S."""
    with contextlib.suppress(Exception):
        assert process.stdin is not None
        process.stdin.close()
    try:
        await asyncio.wait_for(process.wait(), WAIT_S)
    except TimeoutError:
        process.kill()
        await process.wait()
    return process.returncode


def capabilities(fs: bool = True, elicitation: bool = True, **extra: Any) -> ClientCapabilities:
    caps = ClientCapabilities(
        fs=FileSystemCapabilities(read_text_file=fs, write_text_file=fs),
        elicitation=ElicitationCapabilities(form=ElicitationFormCapabilities())
        if elicitation
        else None,
    )
    return caps


async def start_agent(
    home: Path, env: dict[str, str] | None = None, args: tuple[str, ...] = ()
) -> Agent:
    """The real process, its stderr in a file beside `home`."""
    stderr = home.parent / f"{home.name}-stderr.log"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "talos_ls.server",
        "--acp",
        "--log-level",
        "info",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=stderr.open("ab"),
        env={**server_env(home), **(env or {})},
        limit=LIMIT,
    )
    return Agent(process, Person(), stderr)


def call(call_id: str, name: str, **arguments: Any) -> tuple[str, str, str]:
    return (call_id, name, json.dumps(arguments))


@pytest.fixture
def model(server: ScriptedModelServer) -> ScriptedModelServer:
    """The scripted model (`server`, tests/conftest.py), by the name the LSP tests give it."""
    return server


@pytest.fixture
def home(tmp_path, model) -> Path:
    home = tmp_path / "home"
    write_config(home, config_toml(model, tmp_path / "talos.db"))
    return home


@pytest.fixture
async def agent(home):
    agent = await start_agent(home)
    try:
        yield agent
    finally:
        await agent.stop()
