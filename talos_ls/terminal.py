"""The terminal EditorPort: Talos in a shell, for `talos run` and `talos demo`.

Questions and permission prompts are asked at the terminal when it is one (a numbered list;
an empty line or end of input is a dismissal, never an answer); without a terminal nothing is
asked and nothing waits. Proposals are shown as coloured diffs. The demo passes scripted
replies, which are printed as such.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.syntax import Syntax

from .agent.tasks import Task
from .agent.workspace import Workspace
from .edits.proposals import Proposal
from .gates.question_queue import QuestionCandidate


class TerminalPort:
    def __init__(
        self,
        console: Console,
        workspace: Workspace,
        *,
        interactive: bool,
        scripted_answers: Sequence[str | None] | None = None,
        scripted_confirms: Sequence[str | None] | None = None,
    ) -> None:
        self.console = console
        self.workspace = workspace
        self.scripted = None
        if scripted_answers is not None or scripted_confirms is not None:
            self.scripted = {"ask": list(scripted_answers or []),
                             "confirm": list(scripted_confirms or [])}  # fmt: skip
        self.interactive = interactive or self.scripted is not None
        self.last_status: Mapping[str, Any] = {}
        # One prompt at a time: a question and a permission prompt must not both wait on
        # the same keyboard, or an answer could land on the wrong one.
        self._prompting = asyncio.Lock()

    async def _choose(self, title: str, options: Sequence[str], kind: str) -> str | None:
        async with self._prompting:
            return await self._prompt(title, options, kind)

    async def _prompt(self, title: str, options: Sequence[str], kind: str) -> str | None:
        lines = "\n".join(f"  {i}. {o}" for i, o in enumerate(options, 1))
        self.console.print(Panel(f"{title}\n{lines}", title="Talos asks", border_style="cyan"))
        if self.scripted is not None:
            queue = self.scripted[kind]
            reply = queue.pop(0) if queue else None
            shown = "(no reply: dismissed)" if reply is None else reply
            self.console.print(f"[cyan]> {shown}[/]  [dim](scripted reply)[/]")
            return reply
        if not self.interactive:
            return None
        try:
            reply = await asyncio.to_thread(input, "> ")
        except EOFError:
            return None
        reply = reply.strip()
        if reply.isdigit() and 1 <= int(reply) <= len(options):
            return options[int(reply) - 1]
        return reply or None

    async def ask(self, question: QuestionCandidate) -> str | None:
        labels = [o["label"] for o in question.options]
        return await self._choose(question.question_text, labels, "ask")

    async def confirm(self, message: str, options: Sequence[str]) -> str | None:
        return await self._choose(message, options, "confirm")

    async def show_proposal(self, proposal: Proposal) -> None:
        self.console.print(
            f"[bold]proposal {proposal.id}[/]: {len(proposal.hunks)} change(s) to {proposal.path}"
        )
        self.console.print(Syntax(proposal.diff(), "diff", theme="ansi_dark"))

    async def apply(self, proposal: Proposal, new_text: str) -> bool:
        self.workspace.write_text(proposal.path, new_text)
        self.console.print(f"[green]applied {proposal.id} to {proposal.path}[/]")
        return True

    def progress(self, task: Task, message: str) -> None:
        self.console.print(f"[dim]task {task.id}: {message}[/]")

    def status(self, status: Mapping[str, Any]) -> None:
        self.last_status = status
