"""The terminal EditorPort: Talos in a shell, for `talos run` and `talos demo`.

Questions and permission prompts are asked at the terminal when it is one (a numbered list;
an empty line or end of input is a dismissal, never an answer); without a terminal nothing is
asked and nothing waits. Proposals are shown as coloured diffs. The demo passes scripted
replies, which are printed as such.

Everything from the model or the workspace (questions, commands, paths, diffs, answers) is
printed as plain text with control characters made visible (`display.visible`): Rich markup in
it is never interpreted, so it can neither hide part of a prompt nor crash the output.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from .agent.tasks import Task
from .agent.workspace import Workspace
from .display import visible
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
        lines = "\n".join(
            f"  {i}. {visible(o, single_line=True)}" for i, o in enumerate(options, 1)
        )
        body = Text(f"{visible(title)}\n{lines}")
        self.console.print(Panel(body, title="Talos asks", border_style="cyan"))
        if self.scripted is not None:
            queue = self.scripted[kind]
            reply = queue.pop(0) if queue else None
            shown = "(no reply: dismissed)" if reply is None else visible(reply)
            self.console.print(Text.assemble((f"> {shown}", "cyan"), "  ",
                                             ("(scripted reply)", "dim")))  # fmt: skip
            return reply
        if not self.interactive:
            return None
        while True:
            try:
                reply = (await asyncio.to_thread(input, "> ")).strip()
            except EOFError:
                return None
            if reply.isdigit() and 1 <= int(reply) <= len(options):
                return options[int(reply) - 1]
            chosen = [o for o in options if o.casefold() == reply.casefold()]
            if kind == "ask" or not reply or chosen:  # a question takes words; Enter dismisses
                return chosen[0] if chosen else reply or None
            self.console.print(Text(f"Not one of the choices: answer 1 to {len(options)}, or "
                                    "press Enter to dismiss.", style="yellow"))  # fmt: skip

    async def ask(self, question: QuestionCandidate) -> str | None:
        labels = [o["label"] for o in question.options]
        return await self._choose(question.question_text, labels, "ask")

    async def confirm(self, message: str, options: Sequence[str]) -> str | None:
        return await self._choose(message, options, "confirm")

    async def show_proposal(self, proposal: Proposal) -> None:
        if proposal.status != "pending":
            return  # applying, rejecting: the terminal says so where it happens
        path = visible(proposal.path, single_line=True)
        self.console.print(
            Text.assemble(
                (f"proposal {proposal.id}", "bold"), f": {len(proposal.hunks)} change(s) to {path}"
            )
        )
        self.console.print(diff_text(proposal.diff()))

    async def apply(self, proposal: Proposal, new_text: str, version: int | None = None) -> bool:
        await asyncio.to_thread(self.workspace.write_text, proposal.path, new_text)
        path = visible(proposal.path, single_line=True)
        self.console.print(Text(f"applied {proposal.id} to {path}", style="green"))
        return True

    def read_document(self, path: str) -> tuple[str, int | None] | None:
        return None  # no editor buffers: the disk is the truth

    async def settle(self, proposal: Proposal) -> None:
        pass

    async def begin(self, task: Task) -> None:
        self.progress(task, "working")

    def progress(self, task: Task, message: str) -> None:
        self.console.print(Text(f"task {task.id}: {visible(message)}", style="dim"))

    def end(self, task: Task) -> None:
        pass  # `talos run` reports the outcome itself

    def status(self, status: Mapping[str, Any]) -> None:
        self.last_status = status

    def notice(self, message: str) -> None:
        self.console.print(Text(visible(message), style="yellow"))


def labelled(label: str, text: str, style: str = "bold") -> Text:
    """`label: text`, the label styled, the text shown as it is (model text, a path)."""
    return Text.assemble((label, style), " ", visible(text))


def diff_text(diff: str) -> Text:
    """A unified diff, coloured by line, every character shown as it is."""
    out = Text()
    for line in diff.splitlines(keepends=True):
        style = (
            "bold"
            if line.startswith(("+++", "---"))
            else "green"
            if line.startswith("+")
            else "red"
            if line.startswith("-")
            else "cyan"
            if line.startswith("@@")
            else ""
        )
        out.append(visible(line), style=style)  # fmt: skip
    return out
