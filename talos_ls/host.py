"""The host: one turn of Talos, end to end, whatever the editor.

A turn is one request from the person. The host advances the agent's persisted turn counter
(the agent is the workspace by default, so every editor window and daemon on it shares one
question budget), then:

1. syncs the rules files, resolves conflicts the evidence has settled, assembles the relevant
   facts (`note_use` on what was injected) and lets all three producers propose questions;
2. asks the queue for the next question with the request as cues. A question is delivered
   through the EditorPort without blocking: the task starts at once on what is known. The reply
   is recorded when it comes (a dismissal is a non-answer); if the task is still running, the
   chosen option reaches the agent as a note;
3. runs the agent as a background task; its proposals are shown as they come, and applied when
   the mode or the person says so;
4. reports status: running tasks, tokens, cost, open questions, when the budget reopens.

The host talks to the person only through an EditorPort: the terminal (`cli.py`), the language
server (`server.py`) and scripted ports in tests each implement it.

A language server hosts this for weeks, one host per workspace folder, so the event loop only
coordinates: the turn's preparation, tool work, index building and store writes run in the
host's threads (`offload.py`), the workspace index is built in the background and kept current
from file events, and finished tasks, answers and proposals leave memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import functools
import json
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .agent import tasks, tools
from .agent.cost import Caps, CostMeter, load_prices
from .agent.limits import Limits
from .agent.loop import AgentLoop, system_prompt
from .agent.model import ModelClient, ModelConfig
from .agent.sandbox import Sandbox, SandboxState
from .agent.skills import Skill, discover
from .agent.tasks import FINAL, Task, TaskRegistry
from .agent.workspace import SandboxError, Workspace, agent_id
from .display import visible
from .edits import apply
from .edits.apply import Rewound, disk_text, disk_write
from .edits.proposals import OPEN, Proposal, ProposalBook, ProposalError
from .gates import question_value
from .gates.permissions import MODES, NOT_NOW, TRUST, Policy
from .gates.producers import (
    answered_referents,
    propose_from_disjunctions,
    propose_from_gate,
    propose_from_resolution,
)
from .gates.question_queue import (
    QUESTION_GATE_THRESHOLD,
    AnswerResult,
    QuestionCandidate,
    QuestionQueue,
)
from .mcp import config as mcp_config
from .mcp.client import McpManager
from .mcp.elicit import ask_person
from .mcp.launch import plan as plan_server
from .memory.assembler import ContextAssembler
from .memory.facts import FactStore
from .memory.index import WorkspaceIndex
from .memory.resolve import (
    Evidence,
    ResolutionRecord,
    assumptions,
    evidence_notes,
    resolve,
    worked_on,
)
from .memory.rules import RulesFiles
from .offload import Offload
from .store import Store, StoreError
from .watch import watch

logger = logging.getLogger(__name__)
APPLY, REJECT = "Apply", "Reject"
# The proposal an Apply prompt is about, while `EditorPort.confirm` asks it (None for any
# other prompt): a port that shows each proposal as an item of its own (ACP's tool calls)
# ties the prompt to that item. The other ports need not read it.
CONFIRMING: contextvars.ContextVar[Proposal | None] = contextvars.ContextVar(
    "talos_confirming", default=None
)
KEEP_ANSWERS = 64  # answers kept in memory for the session's report; all are in the store
MAX_CONTEXT_CHARS = 4000  # the editor's selection, as given to the model
TOUCHED_TASKS = 3  # the files the last this many tasks read or edited are "recently touched"
SYNC_S = 0.25  # how often the store is asked whether another server moved a proposal
PERSON_EDITS = 50  # the person's latest edits kept for "recently touched" (since those tasks)


class EditorPort(Protocol):
    """How the host reaches the person. `interactive` is False when nobody can answer.

    Used where a port has them (`getattr`), for an MCP server's elicitation (docs/mcp.md):
    `async ask_text(message, options) -> str | None` (words typed: a free-text field; the
    terminal has it) and `async elicit(server, params) -> ElicitResult` (a client's own
    elicitation, as ACP's `elicitation/create`)."""

    @property
    def interactive(self) -> bool:
        """False when nobody can answer: prompts are not shown, questions not asked."""

    async def ask(self, question: QuestionCandidate) -> str | None:
        """Deliver a question; the reply text, or None when dismissed."""

    async def confirm(self, message: str, options: Sequence[str]) -> str | None:
        """A choice (a permission prompt, applying a proposal); None when dismissed."""

    async def show_proposal(self, proposal: Proposal) -> None:
        """A proposal was made, or its state changed (applied, rejected, stale, undone)."""

    async def apply(self, proposal: Proposal, new_text: str, version: int) -> bool:
        """Write the proposal's new content over the editor's open document at `version` (the
        version the host checked; a file that is not open the host writes itself). True when
        it landed."""

    async def settle(self, proposal: Proposal) -> None:
        """Before an application: make the editor able to check the edit's version (see
        LspPort.settle); nothing to do elsewhere."""

    def read_document(self, path: str) -> tuple[str, int | None] | None:
        """The editor's text of a workspace file and its version, when the editor has it open
        (unsaved text wins over the disk); None otherwise. FileTooLarge when the editor has it
        but its text cannot be read (the disk's is not the person's then). Called from worker
        threads."""

    async def begin(self, task: Task) -> None:
        """A task was started: open its progress view."""

    def progress(self, task: Task, message: str) -> None: ...

    def stream(self, task: Task, text: str) -> None:
        """A piece of the model's text as it arrives. Optional: the host calls it only on a
        port that has it (one without shows the text when the task ends). Likewise optional,
        and not declared here so ports need not have it: `step_event(task, event)`, each step
        as data (`agent.loop.StepEvent`: a tool call begun or ended, a model call metered, the
        context compacted), for a surface that shows each tool call (ACP)."""

    def end(self, task: Task) -> None:
        """A task reached a final state: close its progress view."""

    def status(self, status: Mapping[str, Any]) -> None: ...

    def notice(self, message: str) -> None:
        """Something the person should know once (the sandbox is unavailable, say)."""


@dataclass(frozen=True)
class EditorContext:
    """Where the person was when they asked: a file, a selection, the problems shown there."""

    path: str  # relative to the workspace
    start_line: int | None = None  # 0-based, inclusive
    end_line: int | None = None
    selection: str = ""
    diagnostics: tuple[str, ...] = ()

    def describe(self) -> str:
        """The context as the model reads it, after the request."""
        where = self.path
        if self.start_line is not None:
            where += f", lines {self.start_line + 1}-{(self.end_line or self.start_line) + 1}"
        parts = [f"The person is in {where}."]
        if self.selection:
            parts.append(f"Selected text:\n```\n{self.selection[:MAX_CONTEXT_CHARS]}\n```")
        if self.diagnostics:
            parts.append(
                "Problems reported there:\n" + "\n".join(f"- {d}" for d in self.diagnostics[:20])
            )
        return "\n".join(parts)


@dataclass
class HostConfig:
    workspace: Path
    model: ModelConfig
    agent_id: str | None = None  # default: the workspace's resolved path
    mode: str = "ask"
    caps: Caps = field(default_factory=Caps)
    # Below this, the top fact for a request is withheld and the person asked to confirm it. A
    # fresh fact sits at 0.5 and passes; a fact the evidence has gone against does not.
    confidence_gate: float | None = 0.5
    concurrency: int = 2
    budget_turns: int = 5
    ranking: str = "value"  # which open question goes first (`question_value.RANKINGS`)
    auto_apply: bool = False  # `talos run --apply`
    ask_to_apply: bool = True  # a prompt per proposal at the task's end (the terminal)
    prices: Mapping[str, Any] | None = None
    # The index is always built behind. A one-shot run's turn waits for it while it is small
    # (`WorkspaceIndex.settle`: all of a small workspace, some milliseconds of a large one); a
    # daemon's turn never waits (the index was started when the folder opened).
    background_index: bool = False
    watch: bool = False  # keep the index current from file events (a daemon)
    readable_paths: tuple[Path, ...] = ()  # shown to commands outside the workspace
    limits: Limits | None = None  # what one command may use (None: the machine's defaults)


@dataclass
class TurnResult:
    turn: int
    task: Task
    question: QuestionCandidate | None
    delivery: asyncio.Future | None = None  # the question's delivery, until answered or not


@dataclass
class _Prepared:
    turn: int
    prompt: str
    system: str
    question: QuestionCandidate | None
    assumed: list[str]  # what the task goes on without the person's word: its summary says it
    resolution: ResolutionRecord  # the request's references: `_worked_on` says what they missed


# Before the assumptions a task's summary lists: the person's cue to correct one.
ASSUMED_HEADING = "Not confirmed by you (say so if one is wrong):"


def assumed_block(assumed: Sequence[str]) -> str:
    """Every assumption a task went on, one per line, under ASSUMED_HEADING."""
    return "\n".join([ASSUMED_HEADING, *(f"- {line}" for line in assumed)])


def with_assumptions(task: Task, summary: str) -> str:
    """The task's summary, then every assumption it went on: said by Talos, so none is silent
    even when the model's reply forgets it. Its transcript ends with them too (what
    `talos.task.show` renders, and what a follow-up's conversation carries)."""
    if not task.assumed:
        return summary
    block = assumed_block(task.assumed)
    task.transcript.append({"role": "assistant", "content": block})
    return f"{summary.rstrip()}\n\n{block}".lstrip()


def _paths_used(task: Task, tools_named: Sequence[str]) -> list[str]:
    """The `path` arguments of the task's calls to these tools, in the order made."""
    paths = []
    for message in list(task.transcript):
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            if function.get("name") not in tools_named:
                continue
            try:
                args = json.loads(str(function.get("arguments") or "{}")[:100_000])
            except ValueError:
                continue
            if isinstance(args, dict) and isinstance(args.get("path"), str):
                paths.append(args["path"])
    return paths


class Host:
    policy: Policy
    sandbox_state: SandboxState
    skills: dict[str, Skill]
    skill_problems: list[str]

    def __init__(
        self, store: Store, config: HostConfig, port: EditorPort, offload: Offload | None = None
    ) -> None:
        """Cheap: nothing here touches the disk beyond resolving the root. `start` (awaited by
        the first turn) probes the sandbox, loads the rules and builds the index, off the loop."""
        self.store = store
        self.config = config
        self.port = port
        self.offload = offload or Offload()
        self._owns_offload = offload is None
        self.workspace = Workspace(config.workspace)
        self.agent_id = config.agent_id or agent_id(self.workspace.root)
        self.facts = FactStore(store)
        # The value ranking by default: it asked less and better than the seed's order on
        # bench/question_value.py (bench/README.md, "Question value"); `questionRanking`.
        gate = QUESTION_GATE_THRESHOLD if config.confidence_gate is None else config.confidence_gate
        self.queue = QuestionQueue(
            store,
            facts=self.facts,
            budget_turns=config.budget_turns,
            ranking=config.ranking,
            gate_threshold=gate,
        )
        self.rules = RulesFiles(self.facts, self.queue.reconciler)
        self.assembler = ContextAssembler(
            self.facts, confidence_gate_threshold=config.confidence_gate
        )
        self.sandbox = Sandbox(
            self.workspace.root,
            hidden=store.local_files(),
            readable=config.readable_paths,
            limits=config.limits,
        )
        self.proposals = ProposalBook(store, self.agent_id)
        self.meter = CostMeter(prices=dict(config.prices or load_prices()))
        config.caps.require_enforceable(config.model.model, self.meter.prices)
        self.registry = TaskRegistry(
            store, self.meter, config.concurrency, self.offload, on_change=self._task_changed
        )
        self.model = ModelClient(config.model)
        self.loop = AgentLoop(self.model, self.meter, config.caps, self.registry)
        self.index = WorkspaceIndex(self.workspace.root)
        self.answers: deque[tuple[QuestionCandidate, AnswerResult]] = deque(maxlen=KEEP_ANSWERS)
        self._edits: deque[tuple[float, str]] = deque(maxlen=PERSON_EDITS)  # (time, path)
        self._background: set[asyncio.Future] = set()
        self._deliveries: set[asyncio.Future] = set()  # questions' deliveries, of `_background`
        self._daemon_jobs: set[asyncio.Future] = set()
        self._starting: asyncio.Future[None] | None = None
        self._rules_reviewed = False
        self._stop = asyncio.Event()
        self._status_dirty = False
        self._status_job: asyncio.Task | None = None
        self._last_stored: dict[str, Any] = {
            "turn": 0,
            "open_questions": 0,
            "budget_opens_at_turn": None,
        }
        # The workspace folders open inside this one, with their policies (a daemon serving
        # several sets it): their deny and ask rules bind this folder's tasks too.
        self.nested: Callable[[], Sequence[tuple[str, Policy]]] = lambda: ()
        self.sandbox.inner = lambda: [self.workspace.root / rel for rel, _ in self.nested()]
        self.mcp = McpManager(None, self._mcp_notice)
        self.mcp_session: list[mcp_config.ServerConfig] = []  # an ACP session's servers
        self.mcp_loaded = mcp_config.Loaded([])

    # ---------------------------------------------------------------- start
    async def start(self) -> None:
        """Prepare the model client, probe the sandbox, load the rules and skills, start the
        index; once per host."""
        if self._starting is None:
            self._starting = asyncio.ensure_future(self._start())
        await asyncio.shield(self._starting)

    async def _start(self) -> None:
        root = self.workspace.root
        self.model.prepare()  # the SDK's import, meanwhile: the first task does not wait for it
        self.sandbox_state = await self.offload.run(self.sandbox.probe)
        if not self.sandbox_state.available:
            self.port.notice(
                f"Commands run without a sandbox: {self.sandbox_state.detail}. Each "
                "command will be asked before it runs."
            )
        # The folder's rules, shared by its tasks (an "Always allow" or a trust counts for all).
        # The mode is only ever a task's (`for_task` in `turn`): this one is never asked for a
        # decision, and were it asked, read-only would refuse.
        self.policy = await self.offload.run(
            Policy.load, root, "read-only", sandboxed=self.sandbox_state.available
        )
        self.policy.nested = lambda: self.nested()
        self.skills, self.skill_problems = await self.offload.run(discover, root)
        await self.load_mcp()
        await self.offload.run(self.proposals.load)  # what an earlier server left to review
        try:  # the rules files read now, so the first turn finds them read, as later ones do
            await self.offload.run(self.rules.sync, self.agent_id, root)
        except Exception:  # only ever a head start: the turn syncs them (and says why not)
            logger.debug("the rules files were not read at start", exc_info=True)
        self.spawn(self._follow_store(), daemon=True)
        # Tasks a dead process left running are interrupted, here and while we run.
        self._interrupted(await self.registry.recover(self.agent_id))
        self.spawn(
            self.registry.keep_alive(self.agent_id, self._stop, self._interrupted), daemon=True
        )
        if self.config.watch:  # first: a change during the scan is applied after it
            self.spawn(watch(root, self.files_changed, self._stop), daemon=True)
        self.spawn(self._build_index(), daemon=True)

    async def show_open(self) -> None:
        """Show the proposals still to review (an earlier server's, after a restart), one per
        file: the port shows each file's proposals together."""
        for proposal in {p.path: p for p in self.proposals.list() if p.status in OPEN}.values():
            await self.port.show_proposal(proposal)

    async def _follow_store(self) -> None:
        """Another server on the store (a second window, `talos apply`) may make, apply or
        reject a proposal: the store's proposal stamp is read every SYNC_S and, when it moved,
        what changed is shown again here, so this editor's diagnostics and lenses follow. A
        failing store is tried again at the next tick (its health reports the outage)."""
        stamp = None
        while not self._stop.is_set():
            try:
                now = await self.offload.run(self.store.proposal_stamp, self.agent_id)
                if now != stamp or self.proposals.moved:
                    stamp = now
                    for proposal in await self.offload.run(self.proposals.load, False):
                        await self.port.show_proposal(proposal)
            except StoreError:
                stamp = None  # read everything again once the store is back
            except Exception:  # a bug must not stop this window following the others
                logger.exception("following the store's proposals failed")
                stamp = None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), SYNC_S)

    async def _build_index(self) -> None:
        scan = asyncio.ensure_future(self.offload.run(self.index.scan))
        try:
            await self.offload.run(self.index.wait_ready)  # the listing, published
            self.report_status()  # the status says when the index is ready
            await scan  # and the symbols, read
        finally:
            scan.cancel()

    def files_changed(self, changes: Sequence[tuple[str, str]]) -> None:
        """Files changed on disk (a watcher, the editor's didChangeWatchedFiles): the index
        takes them in a worker thread."""
        if changes:
            self.spawn(self._apply_changes(list(changes)))

    async def _apply_changes(self, changes: list[tuple[str, str]]) -> None:
        await self.offload.run(self.index.apply, changes)
        for path in {path for _, path in changes}:
            where = Path(path)
            rel = (
                where.relative_to(self.workspace.root).as_posix()
                if where.is_relative_to(self.workspace.root)
                else None
            )
            if rel and any(p.status in OPEN for p in self.proposals.list(rel)):
                try:  # written on disk under a proposal (the editor's buffer wins if open)
                    text, _ = await self.offload.run(self._current, rel)
                except (OSError, ValueError, SandboxError):
                    text = ""  # gone or unreadable: not the proposal's base any more
                self.document_changed(rel, text)
        self.report_status()

    # ---------------------------------------------------------------- turns
    async def turn(
        self,
        request: str,
        context: EditorContext | None = None,
        history: Sequence[Mapping[str, Any]] = (),
        follows: str | None = None,
    ) -> TurnResult:
        """One request: questions considered, the task started. Returns once the task is
        queued; the work runs in the background. A follow-up names the task it `follows` and
        carries that conversation (`loop.conversation`) as `history`."""
        if not isinstance(request, str) or not request.strip():
            raise ValueError("the request is empty")
        # The configuration at the request is the task's for its whole run: the endpoint, key
        # variable and caps (in the loop), the mode (its policy), what its commands may read
        # and use (its sandbox). A later change is for later tasks (`reconfigure`).
        config, loop = self.config, self.loop
        await self.start()
        await self.review_rules()
        await self.load_mcp()  # an edited mcp.json counts from the next task on
        policy = self.policy.for_task(config.mode)
        sandbox = self.sandbox.configured(readable=config.readable_paths, limits=config.limits)
        prepared = await self.offload.run(self._prepare, request, context)

        async def run(task: Task) -> str:
            await self.port.begin(task)  # the editor's progress, shown once it answers
            ctx = tools.ToolContext(
                agent_id=self.agent_id,
                task_id=task.id,
                turn=prepared.turn,
                workspace=self.workspace,
                policy=policy,
                proposals=self.proposals,
                facts=self.facts,
                queue=self.queue,
                prompter=self.port.confirm if self.port.interactive else None,
                skills={name: s.body for name, s in self.skills.items()},
                on_proposal=lambda p: self.spawn(self.port.show_proposal(p)),
                read_document=self.port.read_document,
                sandbox=sandbox,
                offload=self.offload,
                notice=self.port.notice,
                mcp=self.mcp if self.mcp.connections else None,
                elicit=self._elicit if self.port.interactive else None,
            )
            stream = getattr(self.port, "stream", None)
            step_event = getattr(self.port, "step_event", None)
            text = await loop.run(
                ctx,
                task,
                prepared.prompt,
                prepared.system,
                on_text=(lambda piece: stream(task, piece)) if stream else None,
                on_step=lambda message: self._step(task, message),
                history=history,
                on_event=(lambda event: step_event(task, event)) if step_event else None,
            )
            await self._settle_proposals(task, policy)
            task.assumed += await self.offload.run(self._worked_on, task, request, prepared)
            return with_assumptions(task, text)

        task = self.registry.start(self.agent_id, request, run)
        task.follows, task.assumed = follows, prepared.assumed
        delivery = None
        if prepared.question is not None:
            delivery = self.spawn(self._deliver(prepared.question, task))
            self._deliveries.add(delivery)
            delivery.add_done_callback(self._deliveries.discard)
        self.report_status()
        return TurnResult(prepared.turn, task, prepared.question, delivery)

    def _prepare(self, request: str, context: EditorContext | None) -> _Prepared:
        """The turn's bookkeeping, in a worker thread: the counter, rules, reconciliation, the
        relevant facts, the producers, and at most one question."""
        agent = self.agent_id
        turn = self.store.turn_next(agent)
        self.rules.sync(agent, self.workspace.root)
        self.queue.reconciler.reconcile_pass(agent)
        cues = request if context is None else f"{request}\n{context.path}"
        assembled = self.assembler.assemble(agent, cues)
        self.queue.note_use(agent, assembled.keys, turn)
        propose_from_gate(self.queue, agent, assembled.metadata, turn, request)
        if not self.config.background_index:
            self.index.settle()  # what is ready of a large workspace: its first call not delayed
        resolution = resolve(agent, turn, request, self.index, self._evidence(context))
        if not self.config.background_index and not self.index.complete.is_set():
            self.index.close()  # a one-shot run: the rest would only slow its task down
        propose_from_resolution(self.queue, resolution, turn)
        propose_from_disjunctions(self.queue, agent, turn)
        question = None
        if self.port.interactive:  # nobody to ask: spend no budget on a question
            question = self.queue.next_question(agent, turn, query_cues=cues)
        rules = [
            f for f in self.facts.list(agent, include_closed=False) if f.source == "rules file"
        ]
        system = system_prompt(
            rules,
            [f for f in assembled.records if f.source != "rules file"],
            {name: s.description for name, s in self.skills.items()},
        )
        prompt = request if context is None else f"{request}\n\n{context.describe()}"
        conflicts = self._conflicts_assumed(cues, question)
        notes = evidence_notes(resolution)  # what the editor's evidence decided, and why
        if conflicts:
            notes += [
                *conflicts,
                "Go on those unless the request says otherwise, and say in your reply which "
                "side of each conflict you followed.",
            ]
        if notes:
            prompt += "\n\n" + "\n".join(notes)
        asked = None if question is None else question.question_text
        assumed = assumptions(resolution, asked) + conflicts
        return _Prepared(turn, prompt, system, question, assumed, resolution)

    def _conflicts_assumed(self, cues: str, asked: QuestionCandidate | None) -> list[str]:
        """What the task goes on for each unanswered conflict the request is about (its
        subject words, as relevance is judged), but the one asked now: said in its prompt
        and its summary. Never raises: a conflict not said is one more the model sees in
        the rules alone."""
        try:
            request = question_value.request_stems(cues)
            lines = []
            for _, a, b in self.queue.reconciler.conflicts(self.agent_id):
                if a is None or b is None or (asked and {a.key, b.key} == set(asked.target_keys)):
                    continue
                if question_value.facts_about_request((a, b), request):
                    lines.append(self.queue.reconciler.conflict_assumption(a, b))
            return lines
        except Exception:
            logger.exception("the unanswered conflicts could not be listed")
            return []

    def _evidence(self, context: EditorContext | None) -> Evidence:
        """What surrounds the request, for `resolve`: the person's earlier answers to "which do
        you mean", the editor's context, and the files touched lately, most recent first: those
        the person edited in the editor since the oldest of the last TOUCHED_TASKS tasks began,
        and those these tasks read (read_file) or proposed edits to, from the tasks still in
        memory. Never raises: without it, questions are asked."""
        touched: list[str] = []
        try:
            recent = sorted(
                self.registry.list(self.agent_id), key=lambda t: t.created_at, reverse=True
            )[:TOUCHED_TASKS]
            since = recent[-1].created_at if len(recent) == TOUCHED_TASKS else 0.0
            touched += [path for at, path in reversed(self._edits) if at >= since]
            proposed = self.proposals.list()
            for task in recent:
                touched += [p.path for p in reversed(proposed) if p.task_id == task.id]
                touched += reversed(_paths_used(task, ("read_file", "propose_edit")))
        except Exception:
            logger.exception("the recently touched files could not be listed")
        touched = list(dict.fromkeys(touched))
        answers = tuple(answered_referents(self.queue, self.agent_id))
        if context is None:
            return Evidence(touched=tuple(touched), answers=answers)
        return Evidence(
            context.path, context.selection, context.diagnostics, tuple(touched), answers
        )

    def _worked_on(self, task: Task, request: str, prepared: _Prepared) -> list[str]:
        """Which of several same-named files the task took where its request did not say
        (`resolve.worked_on`), from the files it changed, else read. Never raises: a line
        not said is one the model's reply may still say."""
        try:
            changed = [p.path for p in self.proposals.of_task(task.id)]
            read = _paths_used(task, ("read_file",))
            return worked_on(request, prepared.resolution, self.index, changed, read)
        except Exception:
            logger.exception("what the task worked on could not be listed")
            return []

    def _step(self, task: Task, message: str) -> None:
        task.activity = message
        self.port.progress(task, message)
        self.report_status()

    def _interrupted(self, tasks: list[Task]) -> None:
        if tasks:
            titles = "; ".join(visible(t.title, single_line=True)[:60] for t in tasks[:3])
            more = f" and {len(tasks) - 3} more" if len(tasks) > 3 else ""
            self.port.notice(
                f"Talos: {len(tasks)} task(s) were interrupted when talos-ls "
                f"stopped: {titles}{more}. talos.task.show has what each did."
            )
            self.report_status()

    def _task_changed(self, task: Task) -> None:
        if task.state in FINAL:
            # before the end is reported: a list asked for on seeing it shows the pruned book
            self.proposals.forget_settled()
            self.port.end(task)
            self.spawn(self.offload.run(self.proposals.prune))
        self.report_status()

    # ------------------------------------------------------------------ MCP
    async def load_mcp(self, session: Sequence[mcp_config.ServerConfig] | None = None) -> None:
        """Read the MCP configuration (the person's, the workspace's once trusted, and the
        servers `session` names: an ACP client's `session/new`) and use it from the next
        tool list on. Local servers start in this workspace's sandbox, when there is one."""
        if session is not None:
            self.mcp_session = list(session)
        loaded = await self.offload.run(
            mcp_config.load, self.workspace.root, None, self.mcp_session
        )
        self.mcp_loaded = loaded
        state = getattr(self, "sandbox_state", None)
        available = state is not None and state.available
        self.mcp.planner = (
            functools.partial(self._plan_server, self.config.readable_paths) if available else None
        )
        self.mcp.sandbox_problem = None if state is None else state.detail
        said = set(self.mcp.problems)
        self.mcp.configure(loaded.servers, loaded.problems)
        for problem in loaded.problems:
            if problem not in said:  # once, not at every task
                self.port.notice(f"MCP: {problem}")

    def _mcp_notice(self, message: str) -> None:
        """A server failed (or was cut): said once, and the status shows it."""
        self.port.notice(message)
        self.report_status()

    def _plan_server(self, readable: Sequence[Path], server: mcp_config.ServerConfig) -> Any:
        return plan_server(self.sandbox, server, readable)

    async def _elicit(self, server: str, params: Any) -> Any:
        """A server's question, put to the person: through the port's own `elicit(server,
        params) -> ElicitResult` when it has one (an ACP client's `elicitation/create`), else
        as prompts (`mcp/elicit.py`: `confirm`, and `ask_text` for free text where the port
        has it)."""
        native = getattr(self.port, "elicit", None)
        if native is not None:
            return await native(server, params)
        ask_text = getattr(self.port, "ask_text", None)
        return await ask_person(server, params, self.port.confirm, ask_text)

    async def review_mcp(self, prompter: Any) -> None:
        """The workspace's `.talos/mcp.json` would start programs: offered for trust once;
        until then it starts nothing."""
        loaded = self.mcp_loaded
        if not loaded.untrusted or loaded.workspace_sha256 is None:
            return
        listed = "\n".join(
            f"  - {s.name}: {s.describe()}" for s in loaded.untrusted[: mcp_config.MAX_SERVERS]
        )
        message = (
            f"The workspace's {mcp_config.MCP_FILE} (sha256 {loaded.workspace_sha256[:12]}) "
            f"came with the repository. It would start these MCP servers:\n{listed}\n"
            "Until you trust this exact file it starts nothing. Trust it?"
        )
        if prompter is not None and await prompter(message, [TRUST, NOT_NOW]) == TRUST:
            sha = loaded.workspace_sha256
            await self.offload.run(mcp_config.trust, self.workspace.root, sha)
            await self.load_mcp()
            return
        names = ", ".join(s.name for s in loaded.untrusted[:5])
        self.port.notice(
            f"Not trusted: the workspace's {mcp_config.MCP_FILE} would start the MCP servers "
            f"{visible(names, single_line=True)}; none is started (talos mcp trust to trust it)."
        )

    async def review_rules(self) -> None:
        """Once per host: a workspace's own permissions file that would allow something is
        offered for trust (it came with the repository); until then it only restricts. The
        same for its MCP servers file."""
        if self._rules_reviewed:
            return
        self._rules_reviewed = True
        prompter = self.port.confirm if self.port.interactive else None
        await self.review_mcp(prompter)
        if await self.policy.review_workspace_file(prompter) is False:
            grants = ", ".join(
                visible(g, single_line=True) for g in self.policy.untrusted_grants[:5]
            )
            self.port.notice(
                f"Not trusted: the workspace's .talos/permissions.json would allow "
                f"{grants}; only its deny and ask rules apply (talos permissions "
                "--trust to trust it)."
            )

    def phrase(self, question: QuestionCandidate) -> QuestionCandidate:
        """The question as the person should see it: a confirmation names the fact's statement
        instead of the producer's wording (which carries an internal key)."""
        if question.kind == "confirmation" and question.target_keys:
            fact = self.facts.get(question.target_keys[0])
            if fact is not None:
                text = f"Is this still right: {fact.statement!r}?"
                return dataclasses.replace(question, question_text=text)
        return question

    async def _deliver(self, question: QuestionCandidate, task: Task | None) -> None:
        tasks.CURRENT.set(task.id if task else None)  # the question is sent as the task's
        reply = await self.port.ask(await self.offload.run(self.phrase, question))
        await self.answer(question, reply, task)

    async def answer(
        self, question: QuestionCandidate, reply: str | None, task: Task | None = None
    ) -> AnswerResult:
        """Record the person's reply (None or "": a non-answer, cooled, never evidence); when
        the task that was running meanwhile still runs, it hears the chosen option."""
        result = await self.offload.run(self._record, question, reply or "")
        self.answers.append((question, result))
        if (
            task is not None
            and result.applied
            and result.option_index is not None
            and task.state not in FINAL
        ):
            label = question.options[result.option_index]["label"]
            task.notes.append(
                f"The person answered the question {question.question_text!r}: {label}."
            )
        self.report_status()
        return result

    def _record(self, question: QuestionCandidate, reply: str) -> AnswerResult:
        turn = self.store.turn_current(self.agent_id)
        return self.queue.record_answer(question, reply, turn)

    def spawn(self, coro: Any, daemon: bool = False) -> asyncio.Future:
        """Run `coro` beside the turn. Daemon jobs (the watcher, the index build) live as long
        as the host; the others are what `wait` waits for."""
        jobs = self._daemon_jobs if daemon else self._background
        job = asyncio.ensure_future(coro)
        jobs.add(job)

        def done(job: asyncio.Future) -> None:
            jobs.discard(job)
            if not job.cancelled() and job.exception() is not None:
                logger.error("a background job of the host failed", exc_info=job.exception())

        job.add_done_callback(done)
        return job

    async def wait_turn(self, turn: TurnResult) -> Task:
        """The turn's task finished, its question answered or dismissed, and the host's other
        jobs of the moment (showing proposals) settled; not another turn's question, which
        waits on its own person (a surface with several conversations on one folder)."""
        await self.registry.wait(turn.task)
        if turn.delivery is not None:
            await asyncio.gather(turn.delivery, return_exceptions=True)
        while others := [job for job in self._background if job not in self._deliveries]:
            await asyncio.gather(*others, return_exceptions=True)
        return turn.task

    async def wait(self, task: Task) -> Task:
        """The task, finished, with its question's delivery and proposals settled."""
        await self.registry.wait(task)
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)
        self.port.status(await self.status())
        return task

    def cancel(self, task_id: str) -> bool:
        return self.registry.cancel(task_id)

    # ------------------------------------------------------------ proposals
    async def _settle_proposals(self, task: Task, policy: Policy) -> None:
        """Apply what the mode or a path rule allows (or everything with --apply, `auto_apply`);
        ask about the rest at an interactive terminal; leave it pending otherwise (an editor
        reviews it with code actions)."""
        for proposal in self.proposals.list():
            if proposal.task_id != task.id or proposal.status != "pending":
                continue
            verdict = policy.check_write(proposal.path).verdict
            if verdict == "deny":
                await self.reject_proposal(proposal.id)
            elif verdict == "allow" or self.config.auto_apply:
                await self._apply_or_say(proposal)
            elif self.port.interactive and self.config.ask_to_apply:
                about = CONFIRMING.set(proposal)
                try:
                    choice = await self.port.confirm(
                        f"Apply proposal {proposal.id} to "
                        f"{visible(proposal.path, single_line=True)}?",
                        [APPLY, REJECT],
                    )
                finally:
                    CONFIRMING.reset(about)
                if choice == APPLY:
                    await self._apply_or_say(proposal)
                elif choice == REJECT:
                    await self.reject_proposal(proposal.id)
                # dismissed: it stays pending (`talos run` says `talos apply ID` applies it)

    async def _apply_or_say(self, proposal: Proposal) -> None:
        if not await self.apply_proposal(proposal.id) and proposal.status == "stale":
            self.port.notice(
                f"Proposal {proposal.id} was not applied: "
                f"{visible(proposal.path, single_line=True)} changed since it was "
                "made (it is stale)."
            )

    def _current(self, path: str, proposal: Proposal | None = None) -> tuple[str, int | None]:
        """A file's text as the person sees it: the editor's buffer, else the disk."""
        open_doc = self.port.read_document(path)
        if open_doc is not None:
            return open_doc
        return disk_text(self.workspace, path, proposal), None

    async def read(self, proposal: Proposal) -> tuple[str, int | None]:
        """`edits.apply.Files`: the editor's buffer (made able to check the edit's version
        first: `EditorPort.settle`), else the disk. A path that leads out of the workspace now
        (a symlink put there since) is refused before either is touched."""
        await self.offload.run(functools.partial(self.workspace.resolve, write=True), proposal.path)
        await self.port.settle(proposal)
        return await self.offload.run(self._current, proposal.path, proposal)

    async def write(self, proposal: Proposal, text: str, version: int | None) -> bool:
        """`edits.apply.Files`: an open document through the editor, at the version read; a
        file that is not open on disk, by the host (it owns the workspace)."""
        if version is None:
            await self.offload.run(disk_write, self.workspace, proposal.path, text)
            return True
        return await self.port.apply(proposal, text, version)

    async def apply_proposal(self, proposal_id: str, hunks: Sequence[int] | None = None) -> bool:
        """Apply a proposal (`edits.apply`), refusing a stale one. True when it landed."""
        try:
            landed = await apply.apply(self.proposals, self, proposal_id, hunks, self.offload.run)
        except (ProposalError, SandboxError, OSError) as exc:
            logger.info("proposal %s not applied: %s", proposal_id, exc)
            with contextlib.suppress(ProposalError):  # shown as it is now (stale, say)
                await self.port.show_proposal(
                    await self.offload.run(self.proposals.get, proposal_id)
                )
            return False
        proposal = await self.offload.run(self.proposals.get, proposal_id)
        if not landed:  # the person may have typed meanwhile (an edit refused for its version)
            try:
                current = (await self.offload.run(self._current, proposal.path))[0]
            except (ProposalError, SandboxError, OSError) as exc:  # an editor's buffer too large
                logger.info("proposal %s: its file cannot be read now: %s", proposal_id, exc)
            else:
                await self._base_changed(proposal.path, current)
            return False
        await self.port.show_proposal(proposal)
        return True

    async def reject_proposal(self, proposal_id: str) -> Proposal:
        proposal = await self.offload.run(self.proposals.reject, proposal_id)
        await self.port.show_proposal(proposal)
        return proposal

    def person_edited(self, path: str) -> None:
        """The person changed `path` in the editor: "recently touched" evidence for the next
        requests (`_evidence`)."""
        self._edits.append((time.time(), path))

    def document_changed(self, path: str, text: str) -> None:
        """The person edited a file (in the editor, or on disk): the proposals made on what it
        was turn stale, and are shown so."""
        self.spawn(self._base_changed(path, text))

    async def _base_changed(self, path: str, text: str) -> None:
        for proposal in await self.offload.run(self.proposals.base_changed, path, text):
            await self.port.show_proposal(proposal)

    async def undo(self, proposal_id: str | None = None) -> Proposal:
        """Put back the file a proposal changed (the last applied one by default), if the file
        is still as the proposal left it (`edits.apply`)."""
        proposal = await apply.undo(self.proposals, self, proposal_id, self.offload.run)
        await self.port.show_proposal(proposal)
        return proposal

    async def rewind(self, task_id: str) -> Rewound:
        """Put back every file the task changed (`edits.apply.rewind`): in the editor's buffer
        at its version when open, else on disk. A file changed since is left and named."""
        done = await apply.rewind(self.proposals, self, task_id, self.offload.run)
        for proposal in done.undone:
            await self.port.show_proposal(proposal)
        return done

    # --------------------------------------------------------------- status
    def report_status(self) -> None:
        """Tell the port the status soon; changes close together make one report."""
        self._status_dirty = True
        if self._status_job is None or self._status_job.done():
            self._status_job = asyncio.ensure_future(self._send_status())

    async def _send_status(self) -> None:
        while self._status_dirty:
            self._status_dirty = False
            try:
                self.port.status(await self.status())
            except Exception:
                logger.exception("the status could not be reported")
            await asyncio.sleep(0.05)

    async def status(self) -> dict[str, Any]:
        stored = await self.offload.run(self._stored_status)
        agent = self.agent_id
        running = [t for t in self.registry.list(agent) if t.state in ("queued", "running")]
        session = self.meter.session()
        state = getattr(self, "sandbox_state", None)
        return {
            **stored,
            "root": visible(str(self.workspace.root), single_line=True),
            "running": [
                {
                    "id": t.id,
                    "title": visible(t.title, single_line=True),
                    "state": t.state,
                    "step": visible(t.activity, single_line=True),
                    "cost": str(spent.cost),
                    "tokens_in": spent.tokens_in,
                    "tokens_out": spent.tokens_out,
                    "unpriced": spent.unpriced,
                }
                for t in running
                for spent in [self.meter.task(t.id)]
            ],
            "tokens_in": session.tokens_in,
            "tokens_out": session.tokens_out,
            "cost_session": str(session.cost),
            "index": {
                "ready": self.index.ready.is_set(),
                "files": len(self.index),
                "watched_by": "server" if self.config.watch else "editor",
            },
            "sandbox": None
            if state is None
            else {"available": state.available, "detail": state.detail},
            "mcp": [{k: s[k] for k in ("name", "state", "error")} for s in self.mcp.status()],
        }

    def _stored_status(self) -> dict[str, Any]:
        """From the store; while it fails, what it said last (the status never fails)."""
        agent = self.agent_id
        try:
            last = self.store.qq_last_delivery(agent)
            self._last_stored = {
                "turn": self.store.turn_current(agent),
                "open_questions": len(self.store.qq_open(agent)),
                "budget_opens_at_turn": None if last is None else last + self.queue.budget_turns,
            }
        except StoreError:
            pass
        return self._last_stored

    # -------------------------------------------------------- configuration
    def reconfigure(self, config: HostConfig) -> None:
        """New settings for the tasks started from now on. Nothing a running task holds is
        changed: its loop, policy and sandbox were made for it (`turn`)."""
        if config.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {config.mode!r}")
        prices = dict(config.prices or load_prices())
        config.caps.require_enforceable(config.model.model, prices)
        self.config = config
        self.meter.prices = prices
        if config.model != self.model.config:  # a new client only for a new endpoint or model
            self.model = ModelClient(config.model)
            self.model.prepare()
        self.loop = AgentLoop(self.model, self.meter, config.caps, self.registry)
        self.queue.budget_turns = config.budget_turns
        self.queue.ranking = config.ranking
        self.report_status()

    async def close(self) -> None:
        self._stop.set()
        self.index.close()  # a scan under way stops: the process need not wait for it
        await self.registry.shutdown()
        jobs = [*self._background, *self._daemon_jobs]
        for job in jobs:
            job.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)
        if self._status_job is not None:
            self._status_job.cancel()
        await self.mcp.close()
        self.sandbox.close()
        if self._owns_offload:
            self.offload.close()
