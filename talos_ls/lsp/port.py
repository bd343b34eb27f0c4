"""The EditorPort of the language server: how a host reaches the person through any LSP client.

Questions and permission prompts are `window/showMessageRequest` (options as buttons, and "Skip"
for questions), or `talos/prompt` answered by command for a client that asked for deferred
prompts (`prompts.py`); a null reply, "Skip", no reply within the prompt timeout, or a client that
cannot show prompts is a dismissal, never an answer. Tasks are work-done progress whose cancel
button cancels the task (pygls does not cancel `executeCommand` coroutines, so the task never
runs under the request). An edit is applied with the document version the host checked; the
result is not trusted alone (Neovim 0.7 answers `applied: true` to an edit it skipped): the
buffer must show the new text afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.progress import Progress
from pygls.workspace import Workspace

from ..agent.tasks import Task
from ..display import visible
from ..edits.proposals import Proposal
from ..gates.question_queue import QuestionCandidate
from . import review
from .daemon import Daemon, proposal_summary

logger = logging.getLogger(__name__)
SKIP = "Skip"
APPLIED_WAIT_S = 2.0  # how long the buffer may take to show an applied edit
SHORT_ANSWER_CHARS = 300
PROGRESS_CREATE_S = 120.0  # a task's progress waits this long for a busy client to create it
# A task's progress is reported at most once in this long: a report sent at once when none was
# sent in the last PROGRESS_S, else the latest held until then (the latest is always shown).
# Steps of a fast model, and their tools, come closer together than a person can read them.
PROGRESS_S = 0.1


class Client(Protocol):
    """What the port needs of the language server (`server.TalosServer` is one): the client's
    documents, prompts, messages, notifications, progress and edits, and what it can do."""

    closing: bool
    conversation: bool  # the client asked for `talos/conversation` events

    @property
    def can_prompt(self) -> bool: ...
    @property
    def can_show_progress(self) -> bool: ...
    @property
    def client_wait(self) -> float: ...
    @property
    def workspace(self) -> Workspace: ...
    @property
    def work_done_progress(self) -> Progress: ...
    async def prompt(self, message: str, options: Sequence[str], kind: str = ...) -> str | None: ...
    def show(self, kind: types.MessageType, message: str) -> None: ...
    def notify(self, method: str, params: Any) -> None: ...
    def text_document_publish_diagnostics(self, params: types.PublishDiagnosticsParams) -> None: ...
    async def workspace_apply_edit_async(
        self, params: types.ApplyWorkspaceEditParams
    ) -> types.ApplyWorkspaceEditResult: ...
    def refresh_lenses(self) -> None: ...
    def spawn(self, coro: Awaitable[Any]) -> None: ...


def _document(client: Client, path: Path) -> Any:
    """The editor's open document of `path`, or None (pygls keys them by unquoted URI)."""
    return client.workspace.text_documents.get(unquote(path.as_uri()))


class LspPort:
    """One workspace folder's port: `client` is how it reaches the person, `daemon` what it
    reports to (the folder's status, its proposals across the session, a cancelled task)."""

    def __init__(self, client: Client, daemon: Daemon, root: Path) -> None:
        self.client = client
        self.daemon = daemon
        self.root = root
        self._tokens: dict[str, str] = {}  # task id -> progress token, while it runs
        self._reported: dict[str, float] = {}  # task id -> when its progress was last reported
        self._held: dict[str, tuple[Task, str, asyncio.TimerHandle]] = {}  # and what is due

    @property
    def interactive(self) -> bool:
        return self.client.can_prompt

    # ------------------------------------------------------------- prompts
    async def ask(self, question: QuestionCandidate) -> str | None:
        labels = [visible(o["label"], single_line=True) for o in question.options]
        skip = SKIP
        while skip in labels:  # a model's option named like ours: ours stays distinct
            skip += " (no answer)"
        reply = await self.client.prompt(visible(question.question_text), [*labels, skip])
        if reply is None or reply not in labels or labels.count(reply) > 1:
            return None  # dismissed, skipped, or a button that is not one answer
        return question.options[labels.index(reply)]["label"]

    async def confirm(self, message: str, options: Sequence[str]) -> str | None:
        reply = await self.client.prompt(message, list(options), kind="permission")
        return reply if reply in options else None

    # ----------------------------------------------------------- documents
    def read_document(self, path: str) -> tuple[str, int | None] | None:
        doc = _document(self.client, self.root / path)
        if doc is None:
            return None
        return doc.source, doc.version

    async def show_proposal(self, proposal: Proposal) -> None:
        """The file's proposals as diagnostics (open or not: clients show both) and as a
        `talos/proposals` notification; code actions and lenses are asked for by the client."""
        uri = (self.root / proposal.path).as_uri()
        mine = self.daemon.proposals_at(self.root / proposal.path)
        if self.client.closing:
            return
        self.client.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=review.diagnostics(mine))
        )
        self.client.notify(
            "talos/proposals", {"uri": uri, "proposals": [proposal_summary(p) for p in mine]}
        )
        if proposal.task_id:
            self._converse(proposal.task_id, "proposal", proposal=proposal_summary(proposal))
        self.client.refresh_lenses()

    async def apply(self, proposal: Proposal, new_text: str, version: int) -> bool:
        path = self.root / proposal.path
        uri, current = path.as_uri(), _document(self.client, path)
        if current is None or current.version != version:
            return False
        edit = types.TextDocumentEdit(
            text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
            edits=list(review.text_edits(current.source, new_text)),
        )
        try:  # the editor may ask the person first: waited for as long as a prompt
            result = await asyncio.wait_for(
                self.client.workspace_apply_edit_async(
                    types.ApplyWorkspaceEditParams(
                        edit=types.WorkspaceEdit(document_changes=[edit]),
                        label=f"Talos: {proposal.id}",
                    )
                ),
                self.daemon.settings.prompt_timeout,
            )
        except JsonRpcException as exc:
            logger.warning("the editor refused an edit: %s", exc.message)
            return False
        except TimeoutError:
            logger.warning("the editor did not answer an edit within promptTimeout")
            return False
        if result is None or not result.applied:
            return False
        return await self._until(path, lambda doc: doc is not None and doc.source == new_text)

    async def settle(self, proposal: Proposal) -> None:
        """Before an application: a document still at version 0 is moved past it.

        Neovim (0.7 at least) opens a document at version 0 and checks an edit's version only
        when it is above 0: an edit at 0 would replace whatever the person typed on its lines
        meanwhile, and the buffer would then show the expected text. So an empty edit (an
        insertion of nothing, which cannot overwrite typing) goes first: Neovim answers it with
        a didChange, and the real edit then goes at that version, which it checks. A client
        that sends no didChange keeps version 0 (the unchecked edit): one round trip, and at
        most `APPLIED_WAIT_S`, spent on a document's first edit only."""
        path = self.root / proposal.path
        doc = _document(self.client, path)
        if doc is None or doc.version != 0 or self.client.closing:
            return
        start = types.Position(line=0, character=0)
        nothing = types.TextEdit(range=types.Range(start=start, end=start), new_text="")
        edit = types.TextDocumentEdit(
            text_document=types.OptionalVersionedTextDocumentIdentifier(
                uri=path.as_uri(), version=0
            ),
            edits=[nothing],
        )
        try:
            await asyncio.wait_for(
                self.client.workspace_apply_edit_async(
                    types.ApplyWorkspaceEditParams(
                        edit=types.WorkspaceEdit(document_changes=[edit])
                    )
                ),
                self.client.client_wait,
            )
        except (JsonRpcException, TimeoutError):
            return
        await self._until(path, lambda doc: doc is None or doc.version != 0)

    async def _until(self, path: Path, done: Callable[[Any], bool]) -> bool:
        """Whether the editor's document of `path` comes to pass `done` within
        `APPLIED_WAIT_S` (its didChange may trail the reply to an edit)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + APPLIED_WAIT_S
        while not done(_document(self.client, path)):
            if loop.time() > deadline:
                return False
            await asyncio.sleep(0.02)
        return True

    # ------------------------------------------------------------ progress
    async def begin(self, task: Task) -> None:
        """The task's progress in the editor, before its first step when the client answers
        within `client_wait`. A busy editor that answers later (seconds, under load) still gets
        it: the creation goes on in the background while the task runs, its steps until then
        are not shown, and a task that ended meanwhile has its progress begun and ended."""
        self._converse(
            task.id, "begin", title=visible(task.title, single_line=True), follows=task.follows
        )
        if not self.client.can_show_progress or self.client.closing:
            return
        created = asyncio.ensure_future(self._create_progress(task))
        self.client.spawn(created)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(created), self.client.client_wait)

    async def _create_progress(self, task: Task) -> None:
        token = f"talos/task/{task.id}"
        progress = self.client.work_done_progress
        try:  # a client that never answers holds nothing up: this is given up on at last
            await asyncio.wait_for(progress.create_async(token), PROGRESS_CREATE_S)
        except (JsonRpcException, TimeoutError):
            return
        if self.client.closing:
            return
        progress.begin(
            token,
            types.WorkDoneProgressBegin(
                title=f"Talos: {visible(task.title, single_line=True)[:60]}",
                cancellable=True,
                message=visible(task.activity or "starting", single_line=True),
            ),
        )
        self._tokens[task.id] = token
        cancelled = progress.tokens[token]
        cancelled.add_done_callback(
            lambda f: f.cancelled() and self.daemon.cancel(self.root, task.id)
        )
        if task.state not in ("queued", "running"):  # it ended while the client was busy
            self._end_progress(task)

    def progress(self, task: Task, message: str) -> None:
        """What the task does now: a `talos/conversation` step event for a client that asked
        for them (every one), and the progress's report (at most one each PROGRESS_S)."""
        self._converse(task.id, "step", message=visible(message, single_line=True))
        if self.client.closing or task.id not in self._tokens:
            return
        held = self._held.get(task.id)
        if held is not None:  # a report is due: it says this instead
            self._held[task.id] = (task, message, held[2])
            return
        loop = asyncio.get_running_loop()
        wait = self._reported.get(task.id, -math.inf) + PROGRESS_S - loop.time()
        if wait <= 0:
            self._report(task, message)
        else:
            timer = loop.call_later(wait, self._report_held, task.id)
            self._held[task.id] = (task, message, timer)

    def _report_held(self, task_id: str) -> None:
        held = self._held.pop(task_id, None)
        if held is not None:
            self._report(held[0], held[1])

    def _report(self, task: Task, message: str) -> None:
        token = self._tokens.get(task.id)
        if token is None or self.client.closing:
            return
        self._reported[task.id] = asyncio.get_running_loop().time()
        line = f"{visible(message, single_line=True)} · {self._spent(task)}"
        self.client.work_done_progress.report(token, types.WorkDoneProgressReport(message=line))

    def stream(self, task: Task, text: str) -> None:
        """The model's text as it arrives, to a client that shows the conversation; to others
        the progress says what the task does, and the answer comes when it ends."""
        self._converse(task.id, "text", text=visible(text))

    def _converse(self, task_id: str, kind: str, **event: Any) -> None:
        """One `talos/conversation` event, to a client that asked for them."""
        if self.client.conversation and not self.client.closing:
            event = {"task_id": task_id, "kind": kind, "folder": self.root.as_uri(), **event}
            self.client.notify("talos/conversation", event)

    def _cost(self, task: Task) -> tuple[int, float, bool]:
        """Tokens, cost, and whether some of it is estimated (the endpoint reported no usage,
        as for a call cancelled while its output streamed)."""
        host = self.daemon.hosts.get(self.root)
        if host is None:
            return 0, 0.0, False
        spent = host.meter.task(task.id)
        return spent.tokens_in + spent.tokens_out, float(spent.cost), spent.estimated

    def _spent(self, task: Task) -> str:
        tokens, cost, estimated = self._cost(task)
        return f"{tokens} tokens · ${cost:.4f}" + (" (estimated)" if estimated else "")

    def _end_progress(self, task: Task) -> None:
        held = self._held.pop(task.id, None)
        if held is not None:  # the end says how it ended
            held[2].cancel()
        self._reported.pop(task.id, None)
        token = self._tokens.pop(task.id, None)
        if token is not None and not self.client.closing:
            why = visible(task.error or "", single_line=True)[:SHORT_ANSWER_CHARS]
            said = f"{task.state}: {why}" if why and task.state in ("failed", "stopped") else None
            outcome = f"{said or task.state} · {self._spent(task)}"
            self.client.work_done_progress.end(token, types.WorkDoneProgressEnd(message=outcome))
            self.client.work_done_progress.tokens.pop(token, None)

    def end(self, task: Task) -> None:
        self._end_progress(task)
        if self.client.conversation:  # the client says it ends, with a way to the conversation
            tokens, cost, estimated = self._cost(task)
            error = None if task.error is None else visible(task.error)
            result = visible(task.result or "")
            self._converse(
                task.id,
                "end",
                state=task.state,
                result=result,
                error=error,
                tokens=tokens,
                cost=cost,
                estimated=estimated,
            )
        elif task.state == "done":
            answer = visible(task.result or "", single_line=True)
            if len(answer) > SHORT_ANSWER_CHARS:
                answer = answer[:SHORT_ANSWER_CHARS] + "…"
            if task.assumed:  # the summary ends with them: the toast is too short for it
                answer = f"{answer} It assumed {len(task.assumed)} thing(s) you did not say."
            shown = f"Talos {task.id} done: {answer} (talos.task.show for all)"
            self.client.show(types.MessageType.Info, shown)
        elif task.state in ("failed", "stopped"):
            reason = visible(task.error or "", single_line=True)[:SHORT_ANSWER_CHARS]
            self.client.show(types.MessageType.Warning, f"Talos {task.id} {task.state}: {reason}")

    # -------------------------------------------------------------- status
    def status(self, status: Mapping[str, Any]) -> None:
        self.daemon.folder_status(self.root, status)

    def notice(self, message: str) -> None:
        self.client.show(types.MessageType.Warning, message)
