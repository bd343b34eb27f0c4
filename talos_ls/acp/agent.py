"""The ACP agent: Talos's hosts behind the Agent Client Protocol's methods (v1).

One host per folder (a session's `cwd`), shared by the sessions on it; the store opened once;
settings from the person's config file and environment, as `talos run` reads them (the client
sends none). A session is a conversation: each `session/prompt` is one turn of its folder's host
(the question channel's turn, then the agent's steps), following up the session's previous task.
Its records (`sessions.py`) let `session/load` replay it after a restart.

Every method checks what the client sent before anything is done: a `cwd` must be an absolute
path to a real directory, a session id one this process knows (or has a record of), a prompt
text of bounded size. A refusal is a JSON-RPC error naming what was wrong (`wire.guarded`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import logging
import os
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from acp.exceptions import RequestError

from .. import __version__, config
from ..agent.cost import TaskCost
from ..agent.loop import conversation
from ..agent.tasks import FINAL, Task
from ..constants import MODES
from ..display import visible
from ..edits.proposals import OPEN, ProposalError
from ..errors import TalosError
from ..host import Host, HostConfig
from ..mcp import config as mcp_config
from ..offload import Offload
from ..settings import SETTINGS
from ..store import Store, open_store
from .port import ACTIVE, AcpPort, Session
from .sessions import TITLE_CHARS, SessionBook, SessionRecord
from .wire import INVALID_PARAMS, NOT_FOUND, SERVER_ERROR, Outgoing

logger = logging.getLogger(__name__)
MAX_PROMPT_CHARS = 20_000  # the person's words, as the LSP surface takes them
MAX_CONTEXT_CHARS = 200_000  # files and selections the client attaches to a prompt, in all
TASKS_AT_ONCE = 4  # per folder
PAGE = 50  # sessions a `session/list` answer holds
LIVE_SESSIONS = 256  # sessions held in memory; the least recent idle ones leave (loadable)
PROMPTS_AT_ONCE = 32  # turns running or queued in the process; more are refused
MAX_ID_CHARS = 256  # of a session id echoed back in an error's data
PROMPT_TIMEOUT = next(s.default for s in SETTINGS if s.name == "prompt_timeout")
MODE_NAMES = {
    "read-only": ("Read-only", "Reads and searches; no edits; commands only when a rule allows"),
    "ask": ("Ask", "Asks before each command and each edit a rule does not allow"),
    "auto-edit": ("Auto-edit", "Applies edits without asking; asks before commands"),
    "full-auto": (
        "Full auto",
        "Runs what no rule denies (in the sandbox); asks only what an ask rule covers",
    ),
}
COMMANDS = [
    {"name": "undo", "description": "Put back the file the last applied proposal changed"},
    {"name": "apply", "description": "Apply this session's proposals still waiting"},
    {"name": "reject", "description": "Reject this session's proposals still waiting"},
]


def bad(message: str) -> RequestError:
    return RequestError(INVALID_PARAMS, message)


def not_found(method: str, session_id: str) -> RequestError:
    """ACP's "session not found" (the TypeScript SDK's `RequestError.sessionNotFound`):
    -32002 with the id in `data`, so a client can tell it from params of the wrong shape."""
    shown = visible(session_id[:64], single_line=True)
    why = (
        "Talos has no record of it"
        if method == "session/load"
        else "not in this process; session/load it first"
    )
    return RequestError(
        NOT_FOUND,
        f"Resource not found: {method}: no session {shown!r} ({why})",
        {"sessionId": session_id[:MAX_ID_CHARS]},
    )


class TalosAgent:
    """The methods of ACP's agent side, as the SDK's router calls them (snake_case params)."""

    def __init__(self, client: Outgoing | None = None, book: SessionBook | None = None) -> None:
        self.client: Outgoing = client  # type: ignore[assignment]  # set by serve() before use
        self.book = book or SessionBook()
        self.offload = Offload(workers=4, name="talos-acp")
        self.sessions: dict[str, Session] = {}
        self.hosts: dict[Path, Host] = {}
        self.store: Store | None = None
        self._opening = asyncio.Lock()
        self.capabilities: Mapping[str, Any] = {}
        self.after_result: list[Any] | None = None  # the transport's hook (`wire`)

    # --------------------------------------------------- what the client can
    def observe(self, method: str, params: Any) -> None:
        if method == "initialize" and isinstance(params, Mapping):
            caps = params.get("clientCapabilities")
            self.capabilities = caps if isinstance(caps, Mapping) else {}

    def _cap(self, *path: str) -> bool:
        here: Any = self.capabilities
        for key in path:
            if not isinstance(here, Mapping):
                return False
            here = here.get(key)
        return here is True or isinstance(here, Mapping)

    @property
    def can_read(self) -> bool:
        return self._cap("fs", "readTextFile")

    @property
    def can_write(self) -> bool:
        return self._cap("fs", "writeTextFile")

    @property
    def can_elicit(self) -> bool:
        return self._cap("elicitation", "form")

    @property
    def can_notice(self) -> bool:
        return self._cap("session", "notices")

    @property
    def can_compaction(self) -> bool:
        return self._cap("session", "compaction")

    # ------------------------------------------------------------ methods
    async def initialize(self, protocol_version: int, **_: Any) -> dict[str, Any]:
        return {
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
                "mcpCapabilities": {"http": True, "sse": False},
                "sessionCapabilities": {"list": {}},
            },
            "authMethods": [],
            "agentInfo": {"name": "talos", "title": "Talos", "version": __version__},
        }

    async def authenticate(self, method_id: str, **_: Any) -> dict[str, Any]:
        raise bad(
            "Talos needs no authentication: it reads the model's key from the environment "
            "variable named by api_key_env (talos config)"
        )

    async def new_session(
        self, cwd: str, mcp_servers: Sequence[Any] | None = None, **_: Any
    ) -> dict[str, Any]:
        root = self._root(cwd)
        servers = _mcp_servers("session/new", mcp_servers)
        host = await self._host(root)
        record = SessionRecord.new(root, host.config.mode)
        await self.offload.run(self.book.save, record)
        session = self._live(record, host)
        await host.load_mcp(session=servers)
        self._after_response(session)
        return {"sessionId": record.id, "modes": self._modes(session.mode)}

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: Sequence[Any] | None = None, **_: Any
    ) -> dict[str, Any]:
        root = self._root(cwd)
        record = await self.offload.run(self.book.get, session_id)
        if record is None:
            raise not_found("session/load", session_id)
        if Path(record.cwd) != root:
            raise bad("session/load: that session belongs to another folder (its cwd differs)")
        if session_id in self.sessions and self.sessions[session_id].busy:
            raise bad("session/load: that session is running a prompt; cancel it first")
        servers = _mcp_servers("session/load", mcp_servers)
        host = await self._host(root)
        session = self._live(record, host)
        await host.load_mcp(session=servers)
        session.tasks.update(record.tasks)
        await self._replay(session, record)
        await self.client.flush()
        self._after_response(session, replayed=True)
        return {"modes": self._modes(session.mode)}

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **_: Any
    ) -> dict[str, Any]:
        where = self._root(cwd) if cwd is not None else None
        start = 0
        if cursor is not None:
            if not cursor.isdigit() or len(cursor) > 9:
                raise bad("session/list: cursor is not one Talos gave")
            start = int(cursor)
        records = await self.offload.run(self.book.list, where)
        page = records[start : start + PAGE]
        out: dict[str, Any] = {
            "sessions": [
                {
                    "sessionId": r.id,
                    "cwd": r.cwd,
                    "title": visible(r.title, single_line=True) or None,
                    "updatedAt": datetime.datetime.fromtimestamp(r.updated_at, datetime.UTC)
                    .isoformat()
                    .replace("+00:00", "Z"),
                }
                for r in page
            ]
        }
        if start + PAGE < len(records):
            out["nextCursor"] = str(start + PAGE)
        return out

    async def set_session_mode(self, session_id: str, mode_id: str, **_: Any) -> dict[str, Any]:
        session = self._session("session/set_mode", session_id)
        if mode_id not in MODES:
            raise bad(f"session/set_mode: modeId must be one of {', '.join(MODES)}")
        session.mode = mode_id
        record = await self.offload.run(self.book.get, session.id)
        if record is not None:
            record.mode = mode_id
            await self.offload.run(self.book.save, record)
        self.client.update(
            session.id, {"sessionUpdate": "current_mode_update", "currentModeId": mode_id}
        )
        return {}

    async def prompt(self, session_id: str, prompt: Sequence[Any], **_: Any) -> dict[str, Any]:
        session = self._session("session/prompt", session_id)
        text = _prompt_text(prompt)
        if session.busy:
            raise RequestError(
                -32600, "session/prompt: a prompt is already running in this session"
            )
        if sum(s.busy for s in self.sessions.values()) >= PROMPTS_AT_ONCE:
            raise RequestError(
                SERVER_ERROR,
                f"session/prompt: {PROMPTS_AT_ONCE} prompts are running; wait or cancel one",
            )
        session.busy = True
        session.cancelled.clear()
        token = ACTIVE.set(session)
        try:
            command = text.strip().split()[0] if text.strip().startswith("/") else None
            reason = "end_turn"
            if command is not None and command[1:] in {c["name"] for c in COMMANDS}:
                await self._command(session, command[1:])
            else:
                task = await self._turn(session, text)
                error = task.error or ""
                if task.state == "stopped" and error.startswith("step cap"):
                    reason = "max_turn_requests"
                elif task.state == "stopped" and error.startswith("token cap"):
                    reason = "max_tokens"
            await self.client.flush()
            return {"stopReason": "cancelled" if session.cancelled.is_set() else reason}
        finally:
            session.busy = False
            ACTIVE.reset(token)

    async def cancel(self, session_id: str, **_: Any) -> None:
        session = self.sessions.get(session_id)
        if session is None or not session.busy:
            return
        session.cancelled.set()  # open prompts resolve as dismissed (`Outgoing.ask`)
        for task_id in session.tasks:
            session.host.cancel(task_id)

    # ------------------------------------------------------------- turns
    async def _turn(self, session: Session, text: str) -> Task:
        host = session.host
        record = await self.offload.run(self.book.get, session.id)
        if record is None:
            record = SessionRecord(session.id, str(session.root), session.mode)
        history, follows = await self._history(host, record)
        host.reconfigure(dataclasses.replace(host.config, mode=session.mode))
        result = await host.turn(text, history=history, follows=follows)
        task = result.task
        session.tasks.add(task.id)
        record.tasks.append(task.id)
        record.sizes[task.id] = len(text)
        record.title = record.title or text.strip().splitlines()[0][:TITLE_CHARS]
        record.mode = session.mode
        await self.offload.run(self.book.save, record)
        if session.cancelled.is_set():  # cancelled while the turn was being prepared
            host.cancel(task.id)
        return await host.wait_turn(result)  # and its question, answered or not; its proposals

    async def _history(
        self, host: Host, record: SessionRecord
    ) -> tuple[list[dict[str, str]], str | None]:
        """The session's conversation so far (its last task's requests and answers)."""
        if not record.tasks:
            return [], None
        last = record.tasks[-1]
        task = host.registry.get(last)
        if task is not None and task.state in FINAL:
            return conversation(task.transcript), last
        await host.registry.flush()
        row = await self.offload.run(host.store.task_get, last)
        if row is None or row.get("agent_id") != host.agent_id:
            return [], None
        return conversation(row.get("transcript") or []), last

    async def _command(self, session: Session, name: str) -> None:
        """A slash command: `/undo` the last applied proposal; `/apply` or `/reject` the
        session's proposals still pending (one dismissed at its prompt, say)."""
        host = session.host
        if name == "undo":
            try:
                proposal = await host.undo(None)
            except (ProposalError, TalosError, OSError) as exc:
                said = f"Nothing undone: {visible(str(exc))}"
            else:
                said = f"Undone: proposal {proposal.id} ({visible(proposal.path)}) put back."
        else:
            pending = [
                p for p in host.proposals.list() if p.status in OPEN and p.task_id in session.tasks
            ]
            lines = []
            for proposal in pending:
                where = visible(proposal.path, single_line=True)
                if name == "apply":
                    done = await host.apply_proposal(proposal.id)
                    lines.append(
                        f"{proposal.id} ({where}): {'applied' if done else proposal.status}"
                    )
                else:
                    await host.reject_proposal(proposal.id)
                    lines.append(f"{proposal.id} ({where}): rejected")
            said = "\n".join(lines) or "No proposal of this session is waiting."
        self.client.update(
            session.id,
            {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": said}},
        )

    async def _replay(self, session: Session, record: SessionRecord) -> None:
        """The stored transcript as `session/update`s: the person's requests, Talos's text,
        each tool call (completed), so the client shows the conversation as it was."""
        host = session.host
        await host.registry.flush()
        for task_id in record.tasks:
            row = await self.offload.run(host.store.task_get, task_id)
            if row is None or row.get("agent_id") != host.agent_id:
                continue
            with contextlib.suppress(ArithmeticError, TypeError, ValueError):
                session.spent[task_id] = TaskCost(cost=Decimal(str(row.get("cost") or 0)))
            asked = False
            for message in _own(row.get("transcript") or [], str(row.get("title") or "")):
                role, content = message.get("role"), message.get("content")
                if role == "user" and isinstance(content, str) and not asked:
                    asked = True
                    kind = "user_message_chunk"
                    size = record.sizes.get(task_id, 0)
                    content = content[:size] if size > 0 else content
                elif role == "assistant" and isinstance(content, str) and content:
                    kind = "agent_message_chunk"
                else:
                    kind = ""
                if kind and isinstance(content, str):
                    said = {"type": "text", "text": visible(content)}
                    self.client.update(session.id, {"sessionUpdate": kind, "content": said})
                for call in message.get("tool_calls") or []:
                    function = call.get("function") if isinstance(call, Mapping) else None
                    if not isinstance(function, Mapping):
                        continue
                    name = str(function.get("name") or "")
                    self.client.update(
                        session.id,
                        {
                            "sessionUpdate": "tool_call",
                            "toolCallId": session.next_id(f"{task_id}-"),
                            "title": visible(name, single_line=True)[:120] or "tool",
                            "kind": _kind(name),
                            "status": "completed",
                        },
                    )

    # ------------------------------------------------------------ helpers
    def _root(self, cwd: str) -> Path:
        """The session's folder: an absolute path to a real directory, resolved."""
        if not cwd or "\x00" in cwd or len(cwd) > 4096:
            raise bad("cwd must be an absolute path to a directory")
        path = Path(cwd)
        if not path.is_absolute():
            raise bad("cwd must be an absolute path (ACP requires it)")
        try:
            root = path.resolve(strict=True)
        except (OSError, RuntimeError):
            raise bad("cwd is not an existing directory") from None
        if not root.is_dir():
            raise bad("cwd is not a directory")
        return root

    def _session(self, method: str, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None:
            raise not_found(method, session_id)
        return session

    def _live(self, record: SessionRecord, host: Host) -> Session:
        session = self.sessions.pop(record.id, None)
        if session is None:
            session = Session(record.id, Path(record.cwd), host, record.mode)
        self.sessions[record.id] = session  # the most recent last
        idle = [s for s in self.sessions.values() if not s.busy and s is not session]
        for old in idle[: max(0, len(self.sessions) - LIVE_SESSIONS)]:
            del self.sessions[old.id]  # its record stays: session/load brings it back
        return session

    def _after_response(self, session: Session, replayed: bool = False) -> None:
        """What a session's client hears once it has the session's id: the commands it
        offers, and the notices its folder's host gave before the session existed."""

        def send() -> None:
            self.client.update(
                session.id,
                {"sessionUpdate": "available_commands_update", "availableCommands": COMMANDS},
            )
            port = session.host.port
            if isinstance(port, AcpPort):
                port.flush_notices(session)

        if self.after_result is not None:
            self.after_result.append(send)
        else:
            send()

    def _modes(self, current: str) -> dict[str, Any]:
        return {
            "currentModeId": current,
            "availableModes": [
                {"id": mode, "name": MODE_NAMES[mode][0], "description": MODE_NAMES[mode][1]}
                for mode in MODES
            ],
        }

    async def _host(self, root: Path) -> Host:
        async with self._opening:
            host = self.hosts.get(root)
            if host is not None:
                return host
            if self.store is None:
                user = await self.offload.run(config.load, None, {}, dict(os.environ))
                # a StoreError says why; the client hears it as a server error (`wire`)
                self.store = await self.offload.run(open_store, user.value("store"))
            effective = await self.offload.run(config.load, root, {}, dict(os.environ))
            for warning in effective.warnings:
                logger.warning("%s", warning)
            model = dataclasses.replace(effective.model_config())
            host_config = HostConfig(
                workspace=root,
                model=model,
                mode=effective.value("mode"),
                caps=effective.caps(),
                budget_turns=effective.value("budget_turns"),
                ranking=effective.value("question_ranking"),
                prices=effective.prices,
                concurrency=TASKS_AT_ONCE,
                ask_to_apply=True,
                background_index=True,
                watch=True,
                readable_paths=effective.readable_paths(),
                limits=effective.limits(),
            )
            try:
                host = Host(self.store, host_config, AcpPort(self, root), offload=self.offload)
                await host.start()
            except ValueError as exc:
                raise bad(f"Talos cannot serve {visible(str(root))}: {exc}") from None
            self.hosts[root] = host
            return host

    async def close(self) -> None:
        """Every turn cancelled (recorded as cancelled), every host closed, the store closed."""
        for session in self.sessions.values():
            await self.cancel(session.id)
        hosts = list(self.hosts.values())
        self.hosts.clear()
        await asyncio.gather(*(h.close() for h in hosts), return_exceptions=True)
        await self.offload.drain()
        if self.store is not None:
            self.store.close()
        self.offload.close()


def _kind(tool: str) -> str:
    from .port import KINDS

    return KINDS.get(tool, "other")


def _own(transcript: Sequence[Any], title: str) -> list[Mapping[str, Any]]:
    """A task's own messages, from its request on. A follow-up's transcript begins with the
    conversation it continues (`loop.conversation`: plain requests and answers, as the model
    is sent them), which the replay of the tasks before it showed already. Its request is the
    last of the person's messages in that plain start beginning with the task's title (the
    request's first characters); without one, the whole transcript."""
    messages = [m for m in transcript if isinstance(m, Mapping)]
    start = 0
    for i, message in enumerate(messages):
        if message.get("tool_calls") or message.get("role") not in ("system", "user", "assistant"):
            break
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, str) and title:
            start = i if content.startswith(title) else start
    return messages[start:]


def _prompt_text(blocks: Sequence[Any]) -> str:
    """The prompt's words, then the context the client attached (files, selections), as the
    model reads them. Images and audio are refused: Talos advertises text only."""
    words: list[str] = []
    context: list[str] = []
    size = 0
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind == "text":
            words.append(block.text)
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            if not isinstance(text, str):
                raise bad("session/prompt: only text resources are taken (no binary blobs)")
            size += len(text)
            fence = "`" * max(3, 1 + max(map(len, re.findall("`+", text)), default=0))
            where = visible(resource.uri, single_line=True)
            context.append(f"Attached {where}:\n{fence}\n{text}\n{fence}")
        elif kind == "resource_link":
            context.append(f"The person points at {visible(block.uri, single_line=True)}.")
        else:
            raise bad(
                f"session/prompt: Talos takes text prompts; {kind} blocks are not supported "
                f"(promptCapabilities.{kind} is false)"
            )
    said = "\n".join(words)
    if not said.strip() and not context:
        raise bad("session/prompt: the prompt is empty")
    if len(said) > MAX_PROMPT_CHARS:
        raise bad(f"session/prompt: the prompt is longer than {MAX_PROMPT_CHARS} characters")
    if size > MAX_CONTEXT_CHARS:
        raise bad(
            f"session/prompt: the attached context is longer than {MAX_CONTEXT_CHARS} characters"
        )
    return "\n\n".join(p for p in [said, *context] if p)


def _mcp_servers(method: str, items: Sequence[Any] | None) -> list[mcp_config.ServerConfig]:
    """The MCP servers a client names for a session (`mcpServers`: stdio, or Streamable HTTP),
    checked as a configuration file's are; an invalid-params error naming what is wrong (never
    a value of `env` or `headers`). They are used beside the person's and the trusted
    workspace's servers, for the folder's tasks from the next prompt on."""
    raw = [
        i.model_dump(by_alias=True, exclude_none=True) if hasattr(i, "model_dump") else i
        for i in items or ()
    ]
    if any(isinstance(i, Mapping) and i.get("type") == "sse" for i in raw):
        raise bad(f"{method}: mcpServers: SSE servers are not supported; use Streamable HTTP")
    try:
        return mcp_config.session_servers(raw)
    except mcp_config.McpConfigError as exc:
        raise bad(f"{method}: mcpServers: {exc}") from None
