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
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .agent import tools
from .agent.cost import Caps, CostMeter, load_prices
from .agent.loop import AgentLoop, system_prompt
from .agent.model import ModelClient, ModelConfig
from .agent.sandbox import Sandbox
from .agent.skills import discover
from .agent.tasks import FINAL, Task, TaskRegistry
from .agent.workspace import MAX_READ_BYTES, Workspace
from .edits.proposals import Proposal, ProposalBook, ProposalError
from .files import read_regular
from .gates.permissions import Policy
from .gates.question_queue import AnswerResult, QuestionCandidate, QuestionQueue
from .memory.assembler import ContextAssembler
from .memory.facts import FactStore
from .memory.resolve import WorkspaceIndex, resolve
from .memory.rules import RulesFiles
from .store import Store

logger = logging.getLogger(__name__)
APPLY, REJECT = "Apply", "Reject"


class EditorPort(Protocol):
    """How the host reaches the person. `interactive` is False when nobody can answer."""

    interactive: bool

    async def ask(self, question: QuestionCandidate) -> str | None:
        """Deliver a question; the reply text, or None when dismissed."""

    async def confirm(self, message: str, options: Sequence[str]) -> str | None:
        """A choice (a permission prompt, applying a proposal); None when dismissed."""

    async def show_proposal(self, proposal: Proposal) -> None: ...

    async def apply(self, proposal: Proposal, new_text: str) -> bool:
        """Write the proposal's new content; True when it landed."""

    def progress(self, task: Task, message: str) -> None: ...

    def status(self, status: Mapping[str, Any]) -> None: ...

    def notice(self, message: str) -> None:
        """Something the person should know once (the sandbox is unavailable, say)."""


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
    auto_apply: bool = False  # `talos run --apply`
    prices: Mapping[str, Any] | None = None


@dataclass
class TurnResult:
    turn: int
    task: Task
    question: QuestionCandidate | None


class Host:
    def __init__(self, store: Store, config: HostConfig, port: EditorPort) -> None:
        self.store = store
        self.config = config
        self.port = port
        self.workspace = Workspace(config.workspace)
        self.agent_id = config.agent_id or str(self.workspace.root)
        self.facts = FactStore(store)
        self.queue = QuestionQueue(store, facts=self.facts, budget_turns=config.budget_turns)
        self.rules = RulesFiles(self.facts, self.queue.reconciler)
        self.assembler = ContextAssembler(
            self.facts, confidence_gate_threshold=config.confidence_gate
        )
        self.sandbox = Sandbox(self.workspace.root, hidden=store.local_files())
        self.sandbox_state = self.sandbox.probe()
        if not self.sandbox_state.available:
            port.notice(f"Commands run without a sandbox: {self.sandbox_state.detail}. Each "
                        "command will be asked before it runs.")  # fmt: skip
        self.policy = Policy.load(self.workspace.root, config.mode,
                                  sandboxed=self.sandbox_state.available)  # fmt: skip
        self._rules_reviewed = False
        self.proposals = ProposalBook()
        self.meter = CostMeter(prices=dict(config.prices or load_prices()))
        config.caps.require_enforceable(config.model.model, self.meter.prices)
        self.registry = TaskRegistry(store, self.meter, config.concurrency)
        self.model = ModelClient(config.model)
        self.loop = AgentLoop(self.model, self.meter, config.caps, self.registry)
        self.skills, self.skill_problems = discover(self.workspace.root)
        self.index = WorkspaceIndex.build(self.workspace.root)
        self.answers: list[tuple[QuestionCandidate, AnswerResult]] = []
        self._background: set[asyncio.Task] = set()

    # ---------------------------------------------------------------- turns
    async def turn(self, request: str) -> TurnResult:
        """One request: questions considered, the task started. Returns at once."""
        if not isinstance(request, str) or not request.strip():
            raise ValueError("the request is empty")
        await self._review_rules()
        agent = self.agent_id
        turn = self.store.turn_next(agent)
        self.rules.sync(agent, self.workspace.root)
        self.queue.reconciler.reconcile_pass(agent)
        assembled = self.assembler.assemble(agent, request)
        self.queue.note_use(agent, assembled.keys, turn)
        self.queue.propose_from_gate(agent, assembled.metadata, turn, request)
        self.index.refresh()  # re-reads only files that changed
        self.queue.propose_from_resolution(resolve(agent, turn, request, self.index), turn)
        self.queue.propose_from_disjunctions(agent, turn)
        question = None
        if self.port.interactive:  # nobody to ask: spend no budget on a question
            question = self.queue.next_question(agent, turn, query_cues=request)
        rules = [
            f for f in self.facts.list(agent, include_closed=False) if f.source == "rules file"
        ]
        system = system_prompt(
            rules,
            [f for f in assembled.records if f.source != "rules file"],
            {name: s.description for name, s in self.skills.items()},
        )

        async def run(task: Task) -> str:
            ctx = tools.ToolContext(
                agent_id=agent, task_id=task.id, turn=turn, workspace=self.workspace,
                policy=self.policy, proposals=self.proposals, facts=self.facts, queue=self.queue,
                prompter=self.port.confirm if self.port.interactive else None,
                skills={name: s.body for name, s in self.skills.items()},
                on_proposal=lambda p: self._spawn(self.port.show_proposal(p)),
                sandbox=self.sandbox,
            )  # fmt: skip
            self.port.progress(task, "working")
            text = await self.loop.run(ctx, task, request, system)
            await self._settle_proposals(task)
            return text

        task = self.registry.start(agent, request, run)
        if question is not None:
            self._spawn(self._deliver(question, task))
        self.port.status(self.status())
        return TurnResult(turn, task, question)

    async def _review_rules(self) -> None:
        """Once per host: a workspace's own permissions file that would allow something is
        offered for trust (it came with the repository); until then it only restricts."""
        if self._rules_reviewed:
            return
        self._rules_reviewed = True
        prompter = self.port.confirm if self.port.interactive else None
        if await self.policy.review_workspace_file(prompter) is False:
            grants = ", ".join(self.policy.untrusted_grants[:5])
            self.port.notice(f"Not trusted: the workspace's .talos/permissions.json would allow "
                             f"{grants}; only its deny and ask rules apply (talos permissions "
                             "--trust to trust it).")  # fmt: skip

    def phrase(self, question: QuestionCandidate) -> QuestionCandidate:
        """The question as the person should see it: a confirmation names the fact's statement
        instead of the producer's wording (which carries an internal key)."""
        if question.kind == "confirmation" and question.target_keys:
            fact = self.facts.get(question.target_keys[0])
            if fact is not None:
                text = f"Is this still right: {fact.statement!r}?"
                return dataclasses.replace(question, question_text=text)
        return question

    async def _deliver(self, question: QuestionCandidate, task: Task) -> None:
        reply = await self.port.ask(self.phrase(question))
        turn = self.store.turn_current(self.agent_id)
        result = self.queue.record_answer(question, reply or "", turn)  # None: a non-answer
        self.answers.append((question, result))
        if result.applied and result.option_index is not None and task.state not in FINAL:
            label = question.options[result.option_index]["label"]
            task.notes.append(
                f"The person answered the question {question.question_text!r}: {label}."
            )
        self.port.status(self.status())

    def _spawn(self, coro: Any) -> None:
        job = asyncio.get_running_loop().create_task(coro)
        self._background.add(job)
        job.add_done_callback(self._background.discard)

    async def wait(self, task: Task) -> Task:
        """The task, finished, with its question's delivery and proposals settled."""
        await self.registry.wait(task.id)
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)
        self.port.status(self.status())
        return task

    # ------------------------------------------------------------ proposals
    async def _settle_proposals(self, task: Task) -> None:
        """Apply what the mode or a path rule allows (or everything with --apply, `auto_apply`);
        ask about the rest at an interactive port; leave it pending otherwise."""
        for proposal in self.proposals.list():
            if proposal.task_id != task.id or proposal.status != "pending":
                continue
            verdict = self.policy.check_write(proposal.path).verdict
            if verdict == "deny":
                self.proposals.reject(proposal.id)
            elif verdict == "allow" or self.config.auto_apply:
                await self.apply_proposal(proposal.id)
            elif self.port.interactive:
                choice = await self.port.confirm(
                    f"Apply proposal {proposal.id} to {proposal.path}?", [APPLY, REJECT]
                )
                if choice == APPLY:
                    await self.apply_proposal(proposal.id)
                elif choice == REJECT:
                    self.proposals.reject(proposal.id)

    async def apply_proposal(self, proposal_id: str, hunks: Sequence[int] | None = None) -> bool:
        """Apply a proposal through the port, refusing a stale one. True when it landed."""
        proposal = self.proposals.get(proposal_id)
        real = self.workspace.resolve(proposal.path, write=True)
        try:
            current = read_regular(real, MAX_READ_BYTES).decode() if real.exists() else ""
            new_text = self.proposals.apply(proposal_id, current, hunks)
        except (ProposalError, OSError, UnicodeDecodeError) as exc:
            logger.info("proposal %s not applied: %s", proposal_id, exc)
            return False
        if not await self.port.apply(proposal, new_text):
            return False
        self.proposals.applied(proposal_id, new_text, hunks)
        return True

    # --------------------------------------------------------------- status
    def status(self) -> dict[str, Any]:
        agent = self.agent_id
        running = [t for t in self.registry.list(agent) if t.state in ("queued", "running")]
        last = self.store.qq_last_delivery(agent)
        open_questions = self.store.qq_open(agent)  # open ones only, not the whole history
        spent = [self.meter.task(t.id) for t in self.registry.list(agent)]
        return {
            "turn": self.store.turn_current(agent),
            "running": [{"id": t.id, "title": t.title, "state": t.state} for t in running],
            "tokens_in": sum(s.tokens_in for s in spent),
            "tokens_out": sum(s.tokens_out for s in spent),
            "cost_session": str(self.meter.session_cost),
            "open_questions": len(open_questions),
            "budget_opens_at_turn": None if last is None else last + self.config.budget_turns,
            "sandbox": {"available": self.sandbox_state.available,
                        "detail": self.sandbox_state.detail},
        }  # fmt: skip

    async def close(self) -> None:
        await self.registry.shutdown()
        for job in list(self._background):
            job.cancel()
        await asyncio.gather(*list(self._background), return_exceptions=True)
