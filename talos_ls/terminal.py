"""The terminal EditorPort: Talos in a shell, for `talos run` and `talos demo`.

Questions and permission prompts are asked at the terminal when it is one (a numbered list;
an empty line or end of input is a dismissal, never an answer; a choice that is not one is
asked again); without a terminal nothing is asked and nothing waits. Proposals are shown as
coloured diffs. The demo passes scripted replies, which are printed as such.

At a terminal (stdout one, not --json) a live display sits at the bottom, as in Claude Code or
Codex: the model's text as it streams (the last lines of the current step), and a status line
per task (step, tool, elapsed time, tokens, cost), refreshed a few times a second. A step's
text is printed for good when the step turns out to call a tool; the final answer is left to
the caller (`talos run` prints it once). A prompt stops the live display, and whatever would
have been printed meanwhile (a diff, a notice, text) is held and printed after the reply, so
nothing interleaves with a question. Without a terminal there is no live display: progress is
a plain line per step, as a log would want.

Prompts read stdin through the event loop (`add_reader`), not a thread, so cancelling the task
(Ctrl-C) ends a prompt at once. What was typed before a prompt appeared is discarded, so a key
pressed while the model worked cannot answer a prompt nobody has read.

Everything from the model or the workspace (text, questions, commands, paths, diffs, answers)
is printed as plain text with control characters made visible (`display.visible`): Rich markup
in it is never interpreted, so it can neither hide part of a prompt nor crash the output.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import termios
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.control import Control
from rich.live import Live
from rich.live_render import LiveRender
from rich.panel import Panel
from rich.segment import ControlType, Segment
from rich.text import Text

from .agent.tasks import Task
from .agent.workspace import Workspace
from .display import visible
from .edits.proposals import Proposal
from .gates.question_queue import QuestionCandidate

REFRESH_PER_SECOND = 8
TAIL_LINES = 3  # of the streaming text, shown above the status line
TAIL_CHARS = 4000  # enough source for TAIL_LINES at any sane width; wrapping more is waste
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


@dataclass
class _View:
    """What the live display knows of one running task."""

    task_id: str
    started: float = field(default_factory=time.monotonic)
    activity: str = "starting"
    text: str = ""  # the current step's streamed text, not yet printed for good
    tokens_in: int = 0
    tokens_out: int = 0
    cost: str = "0"
    unpriced: bool = False


def _control(text: str) -> Control:
    control = Control()
    control.segment = Segment(text, None, [(ControlType.ERASE_IN_LINE, 0)])
    return control


class _LiveRender(LiveRender):
    """Rich's live region, erased with `ESC[K` and `ESC[A` rather than `ESC[2K` and `ESC[1A`.

    Same effect on screen; the point is that the sequences Talos itself writes are never the
    ones a hostile payload is checked for (tests/attacks look for a raw `ESC[2K` or `ESC[1A`
    anywhere in the output), so such a check still catches a payload that got through."""

    def position_cursor(self) -> Control:
        height = self.last_render_height
        return _control("\r\x1b[K" + "\x1b[A\x1b[K" * (height - 1)) if height else Control()

    def restore_cursor(self) -> Control:
        height = self.last_render_height
        return _control("\r" + "\x1b[A\x1b[K" * height) if height else Control()


class _Display:
    """The live display's renderable, computed when drawn: the refresh thread's redraws and
    the redraw under each printed line both show the state of that moment."""

    def __init__(self, port: TerminalPort) -> None:
        self.port = port

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.port._render()


class TerminalPort:
    def __init__(
        self,
        console: Console,
        workspace: Workspace,
        *,
        interactive: bool,
        scripted_answers: Sequence[str | None] | None = None,
        scripted_confirms: Sequence[str | None] | None = None,
        live: bool | None = None,
    ) -> None:
        """`live`: show the live display (default: when the console is a terminal on stdout;
        with --json the console is stderr and there is none)."""
        self.console = console
        self.workspace = workspace
        self.scripted = None
        if scripted_answers is not None or scripted_confirms is not None:
            self.scripted = {
                "ask": list(scripted_answers or []),
                "confirm": list(scripted_confirms or []),
            }
        self.interactive = interactive or self.scripted is not None
        self.live_enabled = (
            console.is_terminal and not console.is_dumb_terminal and not console.stderr
            if live is None
            else live
        )
        # One prompt at a time: a question and a permission prompt must not both wait on
        # the same keyboard, or an answer could land on the wrong one.
        self._prompting = asyncio.Lock()
        self._views: dict[str, _View] = {}
        self._live: Live | None = None
        self._paused = 0  # prompts on screen: nothing else prints meanwhile
        self._held: list[RenderableType] = []  # what came during a prompt, printed after it
        self._stdin = b""  # read past the end of the last reply (typed ahead)

    # ------------------------------------------------------------ output
    def _out(self, renderable: RenderableType) -> None:
        """Print, above the live display; held while a prompt is on screen."""
        if self._paused:
            self._held.append(renderable)
        else:
            self.console.print(renderable)

    def _start_live(self) -> None:
        if not self.live_enabled or self._paused or not self._views or self._live is not None:
            return
        display = _Display(self)
        live = Live(
            display,
            console=self.console,
            transient=True,
            refresh_per_second=REFRESH_PER_SECOND,
            redirect_stdout=True,
            redirect_stderr=True,
        )
        live._live_render = _LiveRender(display, vertical_overflow="crop")
        self._live = live
        live.start(refresh=True)

    def _stop_live(self) -> None:
        live, self._live = self._live, None
        if live is not None:
            live.stop()

    def close(self) -> None:
        """Stop the live display and print what a prompt held; idempotent. `talos run` calls
        it on the way out (an interrupt included), so the terminal is left as it was found:
        cursor shown, no half-drawn status line."""
        self._stop_live()
        self._print_held()

    def _print_held(self) -> None:
        held, self._held = self._held, []
        for renderable in held:
            self.console.print(renderable)

    def _render(self) -> RenderableType:
        """The live display: each task's streaming tail, then its status line. Drawn from
        Rich's refresh thread too, so it only reads."""
        views = list(self._views.values())
        width = max(self.console.width, 20)
        parts: list[RenderableType] = []
        for view in views:
            if view.text.strip():
                tail = Text(visible(view.text[-TAIL_CHARS:].strip("\n")), style="dim")
                parts.extend(tail.wrap(self.console, width)[-TAIL_LINES:])
            parts.append(self._status_line(view, len(views) > 1))
        return Group(*parts)

    def _status_line(self, view: _View, named: bool) -> Text:
        elapsed = time.monotonic() - view.started
        frame = SPINNER[int(elapsed * 10) % len(SPINNER)]
        step, _, doing = view.activity.partition(": ")
        where = f"{step} · {doing}" if doing else step
        cost = "unpriced model" if view.unpriced else f"${Decimal(view.cost):.4f}"
        line = Text(no_wrap=True, overflow="ellipsis", end="")
        line.append(f"{frame} ", style="cyan")
        if named:
            line.append(f"{view.task_id} ", style="bold")
        line.append(visible(where, single_line=True), style="bold")
        line.append(
            f" · {_elapsed(elapsed)} · {view.tokens_in:,} in / {view.tokens_out:,} out · {cost}",
            style="dim",
        )
        return line

    # ----------------------------------------------------------- prompts
    async def _choose(self, title: str, options: Sequence[str], kind: str) -> str | None:
        async with self._prompting:
            self._paused += 1
            self._stop_live()
            resume = True
            try:
                return await self._prompt(title, options, kind)
            except asyncio.CancelledError:
                resume = False  # interrupted: on the way out, no live display to come back
                raise
            finally:
                self._paused -= 1
                if not self._paused:
                    self._print_held()
                    if resume:
                        self._start_live()

    async def _prompt(self, title: str, options: Sequence[str], kind: str) -> str | None:
        if self.scripted is None and self.interactive:
            self._discard_typeahead()
        lines = "\n".join(
            f"  {i}. {visible(o, single_line=True)}" for i, o in enumerate(options, 1)
        )
        body = Text(f"{visible(title)}\n{lines}")
        self.console.print(Panel(body, title="Talos asks", border_style="cyan"))
        if self.scripted is not None:
            queue = self.scripted[kind]
            reply = queue.pop(0) if queue else None
            shown = "(no reply: dismissed)" if reply is None else visible(reply)
            self.console.print(
                Text.assemble((f"> {shown}", "cyan"), "  ", ("(scripted reply)", "dim"))
            )
            return reply
        if not self.interactive:
            return None
        while True:
            self.console.print("> ", end="")
            try:
                line = await self._read_line()
            except asyncio.CancelledError:
                self.console.print()  # the shell's prompt on a line of its own
                raise
            if line is None:
                self.console.print()
                return None  # end of input: a dismissal
            reply = line.strip()
            if reply.isdigit() and 1 <= int(reply) <= len(options):
                return options[int(reply) - 1]
            chosen = [o for o in options if o.casefold() == reply.casefold()]
            if kind == "ask" or not reply or chosen:  # a question takes words; Enter dismisses
                return chosen[0] if chosen else reply or None
            self.console.print(
                Text(
                    f"Not one of the choices: answer 1 to {len(options)} or a "
                    "choice's name, or press Enter to dismiss.",
                    style="yellow",
                )
            )

    def _discard_typeahead(self) -> None:
        """Forget what was typed before the prompt was shown: a stray Enter pressed while the
        model worked must not dismiss (or a "1" answer) a prompt nobody has read yet."""
        self._stdin = b""
        with contextlib.suppress(OSError, ValueError, termios.error):  # not a terminal
            termios.tcflush(sys.stdin.fileno(), termios.TCIFLUSH)

    async def _read_line(self) -> str | None:
        """One line of stdin; None at end of input. What was typed past it is kept for the next
        prompt."""
        while b"\n" not in self._stdin:
            chunk = await self._read_some()
            if not chunk:
                line, self._stdin = self._stdin, b""
                return line.decode(errors="replace") if line else None
            self._stdin += chunk
        line, _, self._stdin = self._stdin.partition(b"\n")
        return line.decode(errors="replace")

    async def _read_some(self) -> bytes:
        """What stdin has now, waited for by the event loop: no thread is left blocked in a
        read when the prompt is cancelled (a thread in `input()` kept the process alive until
        Enter). A terminal in canonical mode hands over a line at a time."""
        loop = asyncio.get_running_loop()
        fd = sys.stdin.fileno()
        got: asyncio.Future[bytes] = loop.create_future()

        def readable() -> None:
            try:
                data = os.read(fd, 4096)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not got.done():
                got.set_result(data)

        try:
            loop.add_reader(fd, readable)
        except (OSError, ValueError, NotImplementedError):  # not pollable: a file, Windows
            return await asyncio.to_thread(os.read, fd, 4096)
        try:
            return await got
        finally:
            loop.remove_reader(fd)

    async def ask(self, question: QuestionCandidate) -> str | None:
        labels = [o["label"] for o in question.options]
        return await self._choose(question.question_text, labels, "ask")

    async def confirm(self, message: str, options: Sequence[str]) -> str | None:
        return await self._choose(message, options, "confirm")

    async def ask_text(self, message: str, options: Sequence[str]) -> str | None:
        """Words the person types (an MCP server's free-text field); None when they press
        Enter alone or stdin ends: a dismissal."""
        return await self._choose(message, options, "ask")

    # --------------------------------------------------------- proposals
    async def show_proposal(self, proposal: Proposal) -> None:
        path = visible(proposal.path, single_line=True)
        if proposal.status in ("applied", "partly_applied"):
            self._out(Text(f"applied {proposal.id} to {path}", style="green"))
        if proposal.status != "pending":
            return  # rejecting: the terminal says so where it happens
        self._out(
            Group(
                Text.assemble(
                    (f"proposal {proposal.id}", "bold"),
                    f": {len(proposal.hunks)} change(s) to {path}",
                ),
                diff_text(proposal.diff()),
            )
        )

    async def apply(self, proposal: Proposal, new_text: str, version: int) -> bool:
        return False  # never asked: no document is open here, the host writes the files

    def read_document(self, path: str) -> tuple[str, int | None] | None:
        return None  # no editor buffers: the disk is the truth

    async def settle(self, proposal: Proposal) -> None:
        pass

    # ---------------------------------------------------------- progress
    async def begin(self, task: Task) -> None:
        self._views[task.id] = _View(task.id)
        if self.live_enabled:
            self._start_live()
        else:
            self.progress(task, "working")

    def stream(self, task: Task, text: str) -> None:
        """A piece of the model's text: shown live, printed for good when its step ends."""
        view = self._views.get(task.id)
        if view is not None:
            view.text += text

    def _commit(self, view: _View) -> None:
        text, view.text = view.text.strip(), ""
        if text:
            self._out(Text(visible(text)))

    def progress(self, task: Task, message: str) -> None:
        view = self._views.get(task.id)
        if view is not None:
            view.activity = message
            if view.text and not message.endswith(": thinking"):
                self._commit(view)  # the step calls a tool: its text was not the answer
        if not self.live_enabled:
            self._out(Text(f"task {task.id}: {visible(message)}", style="dim"))

    def end(self, task: Task) -> None:
        """The task is over: its display goes. The answer of a task that is done is the
        caller's to print (`talos run`, the demo); the text of one that was not is printed
        here, or it would be lost."""
        view = self._views.pop(task.id, None)
        if view is not None and (
            task.state != "done" or view.text.strip() != (task.result or "").strip()
        ):
            self._commit(view)
        if not self._views:
            self._stop_live()

    def status(self, status: Mapping[str, Any]) -> None:
        for running in status.get("running", []):
            view = self._views.get(running.get("id", ""))
            if view is not None:
                for name in ("tokens_in", "tokens_out", "cost", "unpriced"):
                    setattr(view, name, running.get(name, getattr(view, name)))

    def notice(self, message: str) -> None:
        self._out(Text(visible(message), style="yellow"))


def _elapsed(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s"


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
        out.append(visible(line), style=style)
    return out
