"""The EditorPort of the ACP surface: how one folder's host reaches the person through an ACP
client (Zed, a JetBrains IDE, CodeCompanion, ...).

- The model's text streams as `agent_message_chunk`s; each tool call is a `tool_call` (its
  `kind`, `locations` and arguments) then a `tool_call_update` (completed or failed, and what
  it returned); a proposal is a `tool_call` of its own (kind `edit`) whose content is a `diff`;
  after every model call a `usage_update` carries the context's tokens and the session's cost.
- Questions from the rationed queue are `elicitation/create` (a form with one enum field of the
  options) when the client offers form elicitation, else `session/request_permission` whose
  options are the answers and a Skip. `decline`, `cancel`, Skip, an option never offered, an
  error or no reply within the prompt timeout: a non-answer, never evidence.
- Permission prompts (a command, applying a proposal, trusting a permissions file) are
  `session/request_permission` with the gate's options mapped onto ACP's kinds; a command's
  prompt also offers "Always deny" (`reject_always`: this session denies that same prompt
  without asking again). A cancelled request, an unknown option id, an error: a denial.
- The editor's text: `fs/read_text_file` when the client offers it (its unsaved buffer wins
  over the disk), and an application goes back through `fs/write_text_file`; the host checks
  the text is still the proposal's base first (`edits/apply.py`). Without those capabilities
  the host reads and writes the disk itself.

Which session an event belongs to: its task's (each prompt records the task it started), else
the session whose prompt is running in this context (`ACTIVE`), else none (an event of another
process's task, followed through the store, is not shown).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..agent import tasks
from ..agent.cost import TaskCost
from ..agent.loop import StepEvent
from ..agent.tasks import Task
from ..agent.tools import plan_steps
from ..display import visible
from ..edits.proposals import Proposal
from ..files import FileTooLarge
from ..gates.permissions import ALLOW_ONCE, DENY, NOT_NOW, TRUST
from ..gates.question_queue import QuestionCandidate
from ..host import APPLY, CONFIRMING, REJECT, assumed_block
from ..mcp.elicit import DECLINE
from .wire import MAX_LINE_BYTES, too_large

if TYPE_CHECKING:
    from ..host import Host
    from .wire import Outgoing

logger = logging.getLogger(__name__)
KINDS = {
    "list_files": "search",
    "read_file": "read",
    "search": "search",
    "propose_edit": "edit",
    "run_command": "execute",
    "remember": "think",
    "ask": "think",
    "load_skill": "read",
    "plan": "think",
}
TITLE_CHARS = 120
OUTPUT_CHARS = 8000
DOCUMENT_WAIT_S = 10.0  # a worker thread waits this long for the editor's text
ALWAYS_DENY = "Always deny"
SKIP = "Skip"
ACTIVE: contextvars.ContextVar[Session | None] = contextvars.ContextVar("acp_session", default=None)


@dataclass
class Session:
    """A live ACP session: its record's id, folder and host, and what its turn is doing."""

    id: str
    root: Path
    host: Host
    mode: str
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    busy: bool = False  # a prompt turn runs
    tasks: set[str] = field(default_factory=set)
    spent: dict[str, TaskCost] = field(default_factory=dict)
    calls: dict[tuple[str, str], str] = field(default_factory=dict)  # (task, model's id) -> ours
    current: dict[str, str] = field(default_factory=dict)  # task id -> its tool call now
    rejected: set[str] = field(default_factory=set)  # prompts denied for the session
    shown: set[str] = field(default_factory=set)  # proposals with a tool call already
    count: int = 0

    def next_id(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def cost(self) -> TaskCost:
        total = TaskCost()
        for spent in self.spent.values():
            total.absorb(spent)
        return total


class Surface(Protocol):
    """What a port needs of the agent (`agent.TalosAgent`): the way to the client, the live
    sessions, and what the client can do."""

    client: Outgoing
    sessions: dict[str, Session]

    @property
    def can_read(self) -> bool: ...
    @property
    def can_write(self) -> bool: ...
    @property
    def can_elicit(self) -> bool: ...
    @property
    def can_notice(self) -> bool: ...
    @property
    def can_compaction(self) -> bool: ...


def _kind(option: str) -> str:
    if option in (ALLOW_ONCE, APPLY, TRUST):
        return "allow_once"
    if option.startswith("Always allow"):
        return "allow_always"
    if option == ALWAYS_DENY:
        return "reject_always"
    if option in (DENY, REJECT, NOT_NOW, SKIP, DECLINE):  # DECLINE: an MCP server's question
        return "reject_once"
    return "allow_once"


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _arguments(raw: str) -> dict[str, Any]:
    try:
        args = json.loads(raw[:100_000] or "{}")
    except ValueError:
        return {}
    return args if isinstance(args, dict) else {}


class AcpPort:
    """One folder's port: `agent` is how it reaches the client and which sessions exist."""

    def __init__(self, agent: Surface, root: Path) -> None:
        self.agent = agent
        self.root = root
        self.loop = asyncio.get_running_loop()
        self.waiting_notices: list[str] = []  # said before any session of the folder existed

    @property
    def interactive(self) -> bool:
        return True

    # ------------------------------------------------------------ routing
    def _sessions(self) -> list[Session]:
        return [s for s in self.agent.sessions.values() if s.root == self.root]

    def _of_task(self, task_id: str | None) -> Session | None:
        for session in self._sessions():
            if task_id is not None and task_id in session.tasks:
                return session
        return None

    def _session(self) -> Session | None:
        active = ACTIVE.get()
        if active is not None and active.root == self.root:
            return active
        return self._of_task(tasks.CURRENT.get())

    def _update(self, session: Session, update: dict[str, Any]) -> None:
        self.agent.client.update(session.id, update)

    # ------------------------------------------------------------ prompts
    async def ask(self, question: QuestionCandidate) -> str | None:
        session = self._session()
        if session is None:
            return None
        labels = [o["label"] for o in question.options]
        shown = [visible(label, single_line=True) for label in labels]
        text = visible(question.question_text)
        if self.agent.can_elicit:
            ids = [f"a{i}" for i in range(len(labels))]
            reply = await self.agent.client.ask(
                session.cancelled,
                "elicitation/create",
                {
                    "sessionId": session.id,
                    "mode": "form",
                    "message": text,
                    "requestedSchema": {
                        "type": "object",
                        "properties": {
                            "answer": {
                                "type": "string",
                                "title": "Answer",
                                "oneOf": [
                                    {"const": i, "title": s}
                                    for i, s in zip(ids, shown, strict=True)
                                ],
                            }
                        },
                        "required": ["answer"],
                    },
                },
            )
            if not isinstance(reply, Mapping) or reply.get("action") != "accept":
                return None  # declined, cancelled, failed: never an answer
            content = reply.get("content")
            chosen = content.get("answer") if isinstance(content, Mapping) else None
            if chosen not in ids:
                self._unknown(session, "an answer")
                return None
            return labels[ids.index(chosen)]
        call_id = session.next_id("question-")
        self._update(
            session,
            {
                "sessionUpdate": "tool_call",
                "toolCallId": call_id,
                "title": f"Question: {visible(question.question_text, single_line=True)}"[
                    :TITLE_CHARS
                ],
                "kind": "think",
                "status": "pending",
                "content": [{"type": "content", "content": _text(text)}],
            },
        )
        choice = await self._permission(session, call_id, [*shown, SKIP], skip_last=True)
        done = "completed" if choice is not None else "failed"
        self._update(
            session, {"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": done}
        )
        return None if choice is None else labels[choice]

    async def confirm(self, message: str, options: Sequence[str]) -> str | None:
        session = self._session()
        if session is None:
            return None
        if message in session.rejected:
            return DENY if DENY in options else None
        offered = list(options)
        if DENY in offered:  # a command's prompt: a denial may be kept for the session
            offered.append(ALWAYS_DENY)
        # The host's Apply prompt points at its proposal's tool call (the card with its
        # diff); any other prompt at the tool call running, else a card of its own.
        about = CONFIRMING.get()
        call_id = (
            f"proposal-{about.id}"
            if about is not None
            else session.current.get(tasks.CURRENT.get() or "", "")
        )
        if not call_id or (about is not None and about.id not in session.shown):
            call_id = session.next_id("permission-")
            self._update(
                session,
                {
                    "sessionUpdate": "tool_call",
                    "toolCallId": call_id,
                    "title": visible(message.splitlines()[0] if message else "", single_line=True)[
                        :TITLE_CHARS
                    ],
                    "kind": "other",
                    "status": "pending",
                    "content": [{"type": "content", "content": _text(visible(message))}],
                },
            )
        choice = await self._permission(session, call_id, offered, message=message)
        if choice is None:
            return None
        if offered[choice] == ALWAYS_DENY:
            session.rejected.add(message)
            return DENY
        return offered[choice]

    async def _permission(
        self,
        session: Session,
        call_id: str,
        options: Sequence[str],
        skip_last: bool = False,
        message: str | None = None,
    ) -> int | None:
        """`session/request_permission`; the index of the option chosen, or None."""
        ids = [f"o{i}" for i in range(len(options))]
        listed = [
            {
                "optionId": oid,
                "name": visible(name, single_line=True),
                "kind": "reject_once"
                if skip_last and i == len(options) - 1
                else ("allow_once" if skip_last else _kind(name)),
            }
            for i, (oid, name) in enumerate(zip(ids, options, strict=True))
        ]
        tool_call: dict[str, Any] = {"toolCallId": call_id}
        if message is not None:
            tool_call["title"] = visible(message.splitlines()[0], single_line=True)[:TITLE_CHARS]
        reply = await self.agent.client.ask(
            session.cancelled,
            "session/request_permission",
            {"sessionId": session.id, "toolCall": tool_call, "options": listed},
        )
        outcome = reply.get("outcome") if isinstance(reply, Mapping) else None
        if not isinstance(outcome, Mapping) or outcome.get("outcome") != "selected":
            return None  # cancelled, dismissed, failed: a denial
        chosen = outcome.get("optionId")
        if chosen not in ids:
            self._unknown(session, "a permission option")
            return None
        index = ids.index(chosen)
        if skip_last and index == len(options) - 1:
            return None
        return index

    def _unknown(self, session: Session, what: str) -> None:
        logger.warning("the client chose %s Talos never offered: taken as a denial", what)
        self._say(
            session,
            f"The editor answered with {what} Talos never offered: taken as a denial.",
        )

    # ----------------------------------------------------------- documents
    def read_document(self, path: str) -> tuple[str, int | None] | None:
        """The editor's text through `fs/read_text_file`, from a worker thread; None when the
        client does not offer it, has no such file, or does not answer in time. FileTooLarge
        when the editor has it but its text is too large to read: never the disk's text
        instead (the person's unsaved buffer is not that), the reader says it cannot."""
        if not self.agent.can_read or self._on_loop():
            return None
        sessions = self._sessions()
        if not sessions:
            return None
        session = next((s for s in sessions if s.busy), sessions[0])
        target = str(self.root / path)
        future = asyncio.run_coroutine_threadsafe(
            self.agent.client.request(
                "fs/read_text_file", {"sessionId": session.id, "path": target}
            ),
            self.loop,
        )
        try:
            reply = future.result(DOCUMENT_WAIT_S)
        except Exception as exc:  # no such file in the editor, an error, no answer: the disk
            future.cancel()
            if too_large(exc) is not None:
                shown = visible(path, single_line=True)
                raise FileTooLarge(
                    f"the editor's text of {shown} is over {MAX_LINE_BYTES // (1024 * 1024)} "
                    "MiB: too large to read"
                ) from None
            return None
        content = reply.get("content") if isinstance(reply, Mapping) else None
        if not isinstance(content, str):
            return None
        # A version when the client can write: the application goes back through it; else
        # the host writes the disk.
        return content, (0 if self.agent.can_write else None)

    def _on_loop(self) -> bool:
        try:
            return asyncio.get_running_loop() is self.loop
        except RuntimeError:
            return False

    async def apply(self, proposal: Proposal, new_text: str, version: int) -> bool:
        session = self._of_task(proposal.task_id) or self._session()
        if session is None:
            sessions = self._sessions()
            if not sessions:
                return False
            session = sessions[0]
        if not self.agent.can_write:
            return False
        try:
            await self.agent.client.request(
                "fs/write_text_file",
                {
                    "sessionId": session.id,
                    "path": str(self.root / proposal.path),
                    "content": new_text,
                },
            )
        except Exception as exc:
            logger.warning("the editor did not write a proposal: %s", type(exc).__name__)
            return False
        if not self.agent.can_read:
            return True
        try:  # its answer is not trusted alone: the editor must now show the new text
            shown = await self.agent.client.request(
                "fs/read_text_file",
                {"sessionId": session.id, "path": str(self.root / proposal.path)},
            )
        except Exception:
            return False
        return isinstance(shown, Mapping) and shown.get("content") == new_text

    async def settle(self, proposal: Proposal) -> None:
        return None

    async def show_proposal(self, proposal: Proposal) -> None:
        session = self._of_task(proposal.task_id)
        if session is None:
            return
        call_id = f"proposal-{proposal.id}"
        status = {
            "pending": "pending",
            "partly_applied": "in_progress",
            "applied": "completed",
            "rejected": "failed",
            "stale": "failed",
            "undone": "completed",
        }.get(proposal.status, "pending")
        path = str(self.root / proposal.path)
        shown = visible(proposal.path, single_line=True)
        title = f"Proposal {proposal.id}: {shown} ({proposal.status})"
        update: dict[str, Any] = {
            "toolCallId": call_id,
            "title": title[:TITLE_CHARS],
            "kind": "edit",
            "status": status,
            "locations": [{"path": path, "line": _first_line(proposal)}],
            "content": [
                {
                    "type": "diff",
                    "path": path,
                    "oldText": proposal.base_text if proposal.base_text else None,
                    "newText": proposal.new_text,
                }
            ],
        }
        if proposal.id not in session.shown:
            session.shown.add(proposal.id)
            self._update(session, {"sessionUpdate": "tool_call", **update})
        else:
            self._update(session, {"sessionUpdate": "tool_call_update", **update})

    # ------------------------------------------------------------ progress
    async def begin(self, task: Task) -> None:
        return None

    def progress(self, task: Task, message: str) -> None:
        return None

    def stream(self, task: Task, text: str) -> None:
        session = self._of_task(task.id)
        if session is not None and text:
            self._update(
                session, {"sessionUpdate": "agent_message_chunk", "content": _text(visible(text))}
            )

    def step_event(self, task: Task, event: StepEvent) -> None:
        session = self._of_task(task.id)
        if session is None:
            return
        if event.kind == "tool_start" and event.tool == "plan":
            self._plan(session, event.arguments)
        elif event.kind == "tool_start":
            call_id = session.next_id(f"{task.id}-")
            session.calls[(task.id, event.call_id)] = call_id
            session.current[task.id] = call_id
            args = _arguments(event.arguments)
            self._update(
                session,
                {
                    "sessionUpdate": "tool_call",
                    "toolCallId": call_id,
                    "title": self._title(event.tool, args),
                    "kind": KINDS.get(event.tool, "other"),
                    "status": "in_progress",
                    "locations": self._locations(args),
                    "rawInput": _shown_input(args),
                },
            )
        elif event.kind == "tool_end":
            call_id = session.calls.pop((task.id, event.call_id), "")
            session.current.pop(task.id, None)
            if call_id:
                output = visible(event.output)
                if len(output) > OUTPUT_CHARS:
                    output = output[:OUTPUT_CHARS] + "\n[...]"
                self._update(
                    session,
                    {
                        "sessionUpdate": "tool_call_update",
                        "toolCallId": call_id,
                        "status": "failed" if event.failed else "completed",
                        "content": [{"type": "content", "content": _text(output)}],
                    },
                )
        elif event.kind == "model_call":
            session.spent[task.id] = session.host.meter.task(task.id)
            self._usage(session, event.used, event.window)
        elif event.kind == "compaction":
            self._compaction(session, event.output)

    def _plan(self, session: Session, arguments: str) -> None:
        """The agent stated its plan: a `plan` update (the whole list, as ACP wants it)."""
        checked = plan_steps(_arguments(arguments))
        if checked is None:
            return  # the tool refuses it too; the model hears why
        steps, done = checked
        entries = [
            {
                "content": visible(step, single_line=True),
                "priority": "medium",
                "status": "completed" if i < done else "in_progress" if i == done else "pending",
            }
            for i, step in enumerate(steps)
        ]
        self._update(session, {"sessionUpdate": "plan", "entries": entries})

    def _usage(self, session: Session, used: int, window: int) -> None:
        spent = session.cost()
        update: dict[str, Any] = {"sessionUpdate": "usage_update", "used": used, "size": window}
        if not spent.unpriced:
            update["cost"] = {"amount": float(spent.cost), "currency": "USD"}
        self._update(session, update)

    def _compaction(self, session: Session, line: str) -> None:
        if self.agent.can_compaction:
            self._update(
                session,
                {
                    "sessionUpdate": "compaction_update",
                    "compactionId": session.next_id("compaction-"),
                    "status": "completed",
                    "summary": [_text(visible(line))],
                },
            )
        else:
            self._update(
                session,
                {"sessionUpdate": "agent_thought_chunk", "content": _text(visible(line))},
            )

    def _title(self, tool: str, args: Mapping[str, Any]) -> str:
        what = args.get("command") or args.get("path") or args.get("pattern") or args.get("name")
        title = tool if tool in KINDS else "unknown tool"
        if isinstance(what, str) and what:
            title += f" {visible(what, single_line=True)}"
        return title[:TITLE_CHARS]

    def _locations(self, args: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Where the call looks, for the editor to follow: a path inside the folder only."""
        path = args.get("path")
        if not isinstance(path, str) or not path or "\x00" in path:
            return []
        rel = posixpath.normpath(path)
        absolute = Path(rel) if rel.startswith("/") else self.root / rel
        if (
            not (absolute == self.root or absolute.is_relative_to(self.root))
            or ".." in Path(rel).parts
        ):
            return []
        location: dict[str, Any] = {"path": str(absolute)}
        line = args.get("start_line")
        if isinstance(line, int) and not isinstance(line, bool) and line >= 1:
            location["line"] = line
        return [location]

    def end(self, task: Task) -> None:
        session = self._of_task(task.id)
        if session is None:
            return
        session.spent[task.id] = session.host.meter.task(task.id)
        session.current.pop(task.id, None)
        if task.state == "done" and task.assumed:
            self._update(
                session,
                {
                    "sessionUpdate": "agent_message_chunk",
                    "content": _text("\n\n" + visible(assumed_block(task.assumed))),
                },
            )
        elif task.state in ("failed", "stopped"):
            self._say(session, f"Talos stopped: {visible(task.error or task.state)}")

    # -------------------------------------------------------------- status
    def status(self, status: Mapping[str, Any]) -> None:
        return None

    def notice(self, message: str) -> None:
        session = self._session()
        targets = [session] if session is not None else self._sessions()
        if not targets:
            self.waiting_notices.append(message)
        for target in targets:
            self._say(target, message, notice=True)

    def flush_notices(self, session: Session) -> None:
        waiting, self.waiting_notices = self.waiting_notices, []
        for message in waiting:
            self._say(session, message, notice=True)

    def _say(self, session: Session, message: str, notice: bool = False) -> None:
        if notice and self.agent.can_notice:
            self._update(
                session,
                {
                    "sessionUpdate": "notice",
                    "severity": "warning",
                    "title": visible(message, single_line=True)[:300] or "Talos",
                },
            )
            return
        self._update(
            session,
            {"sessionUpdate": "agent_message_chunk", "content": _text(f"\n\n{visible(message)}\n")},
        )


def _shown_input(args: Mapping[str, Any]) -> dict[str, Any]:
    """A call's arguments as the client may show them: text escaped, a whole file's content
    and edit blocks left out (the proposal's diff shows them)."""
    return {
        k: visible(v, single_line=True)[:OUTPUT_CHARS] if isinstance(v, str) else v
        for k, v in args.items()
        if k not in ("content", "blocks") and isinstance(v, str | int | bool)
    }


def _first_line(proposal: Proposal) -> int:
    hunks = proposal.hunks
    return (hunks[0].base_start + 1) if hunks else 1
