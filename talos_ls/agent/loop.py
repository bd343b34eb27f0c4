"""The agent loop: the model and its tools, until the model answers without a tool call.

Each step: the caps are checked, notes from the person are added, the model is called with the
conversation and the tools, its usage is metered (and the caps checked again at once, so a cost
cap stops the task before another tool runs), and each tool call is run and its result added.
The loop guard stops a task that keeps repeating the same failing call. A response may ask for
at most MAX_CALLS_PER_RESPONSE tool calls: the rest are dropped from the conversation and the
model is told, so one response cannot do the work of a thousand steps. A model call that is
retried (a 429, a 5xx) says so in the task's progress; one that fails raises ModelError, which
fails the task with the message (model.py: no call waits for ever). What is sent stays within
the model's context window: the transcript keeps every message, and the model is sent a view
of it, compacted when it would not fit (`_Window`, `context.py`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..memory.facts import Fact
from ..redact import redact
from . import context, tools
from .cost import Caps, CostMeter, LoopGuard
from .model import Completion, ContextTooLong, ModelClient, ModelError
from .tasks import Task, TaskRegistry

MAX_CALLS_PER_RESPONSE = 16
HISTORY_MESSAGES = 40  # the earlier conversation a follow-up carries: its last messages,
HISTORY_CHARS = 60_000  # at most this long in all (the oldest go first)
COMPACTION_ROLE = "compaction"  # a transcript entry saying the context was compacted

INSTRUCTIONS = """You are Talos, a coding agent working in the person's workspace through tools.
- Read before you change: list_files, read_file and search show you the code.
- You never write files. propose_edit makes a proposal the person reviews in their editor;
  describe what each proposal does.
- run_command runs in the workspace under the person's permission rules; a refusal is final.
- When something is ambiguous, make the most reasonable assumption, say which, and carry on.
  If the answer matters later, queue a question with ask; it is not answered now.
- remember facts worth keeping (conventions, commands, preferences), with a slot when one fits.
- For work of several steps, state your plan with plan, and call it again as steps finish.
- Finish with a short summary: what you found, what you proposed, what you assumed."""


def system_prompt(
    rules: Sequence[Fact] = (), facts: Sequence[Fact] = (), skills: Mapping[str, str] = {}
) -> str:
    """The instructions, the workspace's rules, what is known, and the skills on offer
    (names and descriptions only: a skill's body is loaded with load_skill when needed)."""
    parts = [INSTRUCTIONS]
    if rules:
        parts.append(
            "Rules from the workspace's rules files:\n"
            + "\n".join(f"- {f.statement}" for f in rules)
        )
    if facts:
        parts.append(
            "What you know that may be relevant (confidence in brackets):\n"
            + "\n".join(f"- {f.statement} [{f.confidence:.2f}]" for f in facts)
        )
    if skills:
        listed = "\n".join(f"- {name}: {desc}" for name, desc in sorted(skills.items()))
        parts.append("Skills you can load with load_skill:\n" + listed)
    return redact("\n\n".join(parts))  # a rules file or a fact may quote a credential


def conversation(transcript: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """The conversation a follow-up continues: what the person said and what the model answered
    (the requests, the notes, the final answers), without the system prompt, the tool calls
    or their output, so it stays small however much the earlier tasks read. A transcript from
    the store is untrusted in shape: anything else is left out. The newest messages win."""
    said = [
        {"role": m["role"], "content": m["content"]}
        for m in transcript
        if isinstance(m, Mapping)
        and isinstance(m.get("content"), str)
        and m["content"].strip()
        and (m.get("role") == "user" or (m.get("role") == "assistant" and not m.get("tool_calls")))
    ][-HISTORY_MESSAGES:]
    size = sum(len(m["content"]) for m in said)
    while said and size > HISTORY_CHARS:
        size -= len(said.pop(0)["content"])
    return said


@dataclass(frozen=True)
class StepEvent:
    """What a step did, as data, for a surface that shows each tool call on its own (ACP's
    `tool_call`s) rather than a line of progress. `kind`: "tool_start" (`call_id`, `tool`,
    `arguments` as the model sent them), "tool_end" (and `failed`, `output`: the result the
    model reads, redacted and cut), "model_call" (a call was metered: `used`, the tokens of
    the context sent, and `window`), "compaction" (`output`: what was cut or summarised)."""

    kind: str
    call_id: str = ""
    tool: str = ""
    arguments: str = ""
    failed: bool = False
    output: str = ""
    used: int = 0
    window: int = 0


def _prefixed(report: Callable[[str], None], prefix: str) -> Callable[[str], None]:
    """What a step is doing now, after the step ("step 3: run_command: checking the
    command"); "" goes back to the step alone."""
    return lambda line: report(f"{prefix}: {line}" if line else prefix)


class AgentLoop:
    def __init__(
        self, model: ModelClient, meter: CostMeter, caps: Caps, registry: TaskRegistry
    ) -> None:
        self.model = model
        self.meter = meter
        self.caps = caps
        self.registry = registry

    async def run(
        self,
        ctx: tools.ToolContext,
        task: Task,
        prompt: str,
        system: str,
        on_text: Callable[[str], None] | None = None,
        on_step: Callable[[str], None] | None = None,
        history: Sequence[Mapping[str, Any]] = (),
        on_event: Callable[[StepEvent], None] | None = None,
    ) -> str:
        """Run until the model answers; returns its final text. Raises CapReached when a cap or
        the guard stops it, ModelError when the model cannot be used. `on_step` hears what the
        task is doing ("step 2: read_file") for the person's progress view; `history` is the
        earlier conversation a follow-up continues (`conversation`); `on_event` hears each
        step as data (`StepEvent`), for a surface that wants it."""
        report = on_step or (lambda _: None)
        event = on_event or (lambda _: None)
        cfg = self.model.config
        room = context.answer_room(cfg.window, cfg.max_output_tokens)
        history = context.within(history, (cfg.window - room) // 4)
        task.transcript = [
            {"role": "system", "content": system},
            *({"role": m["role"], "content": m["content"]} for m in history),
            {"role": "user", "content": prompt},
        ]
        guard = LoopGuard(self.caps.repeat_limit)
        schemas = tools.schemas()
        sent = _Window(self, task, schemas, report, event)

        def add(message: dict[str, Any]) -> None:
            task.transcript.append(message)
            sent.view.append(message)

        step = 0
        while True:
            self.caps.check(self.meter.task(task.id))
            while task.notes:
                add({"role": "user", "content": task.notes.pop(0)})
            step += 1
            report(f"step {step}: thinking")
            completion = await sent.complete(step, on_text)
            dropped = len(completion.tool_calls) - MAX_CALLS_PER_RESPONSE
            del completion.tool_calls[MAX_CALLS_PER_RESPONSE:]
            add(completion.message())
            self.registry.save(task)
            if not completion.tool_calls:
                return completion.text
            self.caps.check(self.meter.task(task.id))  # a cap reached stops before any tool
            for n, call in enumerate(completion.tool_calls, 1):
                doing = f"step {step}: {call.name if call.name in tools.TOOLS else 'unknown tool'}"
                report(doing)
                ctx.report = _prefixed(report, doing)
                event(StepEvent("tool_start", call.id, call.name, call.arguments))
                result = await tools.call(ctx, call.name, call.arguments)
                event(
                    StepEvent(
                        "tool_end", call.id, call.name, failed=result.failed, output=result.text
                    )
                )
                text = result.text
                if dropped > 0 and n == len(completion.tool_calls):
                    text += (
                        f"\n[{dropped} more tool calls in that response were not run: too "
                        f"many calls; at most {MAX_CALLS_PER_RESPONSE} run per response]"
                    )
                add({"role": "tool", "tool_call_id": call.id, "content": text})
                guard.record(call.name, call.arguments, result.failed)
            self.registry.save(task)


class _Window:
    """One task's conversation as the model is sent it (`view`: the transcript, compacted when
    it would not fit the window; the transcript itself keeps every message) and its budget
    (`context.py`)."""

    def __init__(
        self,
        loop: AgentLoop,
        task: Task,
        schemas: Sequence[dict[str, Any]],
        report: Callable[[str], None],
        event: Callable[[StepEvent], None] = lambda _: None,
    ) -> None:
        self.loop = loop
        self.task = task
        self.schemas = schemas
        self.report = report
        self.event = event
        self.view: list[dict[str, Any]] = list(task.transcript)
        self.head = len(self.view)  # the system prompt, the earlier conversation, the request
        fixed = -(-len(json.dumps(list(schemas))) // context.CHARS_PER_TOKEN)
        cfg = loop.model.config
        self.budget = context.Budget(cfg.window, fixed, cfg.max_output_tokens)
        self.ledger: list[str] = []

    async def complete(self, step: int, on_text: Callable[[str], None] | None) -> Completion:
        """The model's next turn, the request made to fit first; a 400 for a request too long
        compacts with a summary once and sends it again (a second is the task's error)."""
        if self.budget.used(self.view) > self.budget.limit:
            await self.compact(step, summary=False)
        try:
            completion = await self._call(step, self.view, self.schemas, on_text)
        except ContextTooLong as exc:
            said = context.window_said(str(exc))
            if said is not None and said < self.budget.window:
                self.budget.window = said
            self.report(f"step {step}: the endpoint found the request too long")
            await self.compact(step, summary=True)
            completion = await self._call(step, self.view, self.schemas, on_text)
        usage = completion.usage
        self.budget.sent(self.view, None if usage.estimated else usage.prompt_tokens)
        used = usage.prompt_tokens + usage.completion_tokens
        self.event(StepEvent("model_call", used=used, window=self.budget.window))
        return completion

    async def _call(
        self,
        step: int,
        messages: Sequence[dict[str, Any]],
        schemas: Sequence[dict[str, Any]],
        on_text: Callable[[str], None] | None,
    ) -> Completion:
        """One model call, metered, its cost checked against the caps at once."""
        loop, task_id = self.loop, self.task.id
        model = loop.model.config.model
        completion = await loop.model.complete(
            messages,
            schemas,
            on_text,
            on_retry=_prefixed(self.report, f"step {step}"),
            on_unfinished=lambda spent: loop.meter.add(task_id, model, spent),
        )
        loop.meter.add(task_id, model, completion.usage)
        return completion

    def _note(self, line: str) -> None:
        """Compaction is visible: in the progress, and in the transcript (never sent)."""
        self.report(line)
        self.task.transcript.append({"role": COMPACTION_ROLE, "content": line})
        self.event(StepEvent("compaction", output=line))

    async def compact(self, step: int, summary: bool) -> None:
        """Make room: old tool results cut to stubs; then, if that is not enough (or
        `summary`), the older steps summarised; then the latest results shortened if they
        alone do not fit. Raises ModelError when the request still does not fit."""
        budget, view = self.budget, self.view
        before = budget.used(view)
        floor = budget.recount(view[: self.head]) if len(view) > self.head else before
        target = floor + (budget.limit - floor) // 2
        latest = self._latest_step()
        cut = context.cut_tool_results(view, latest, None if summary else before - target)
        used = budget.recount(view)
        if cut:
            self._note(
                f"step {step}: context {before:,} of {budget.window:,} tokens: "
                f"{cut} old tool result{'s' if cut != 1 else ''} cut to stubs"
            )
        if (summary or used > budget.limit) and latest > self.head:
            await self._summarise(step, latest)
            latest = self._latest_step()
            used = budget.recount(view)
        if used > budget.limit:
            used = self._shorten_latest(step, latest, used)
        if used > budget.limit:  # the model's own calls: arguments too long to send back
            keep = max(context.STUB_BELOW, budget.limit * context.CHARS_PER_TOKEN // 8)
            if cut := context.cut_tool_arguments(view, keep):
                used = budget.recount(view)
                self._note(
                    f"step {step}: the arguments of {cut} tool call{'s' if cut != 1 else ''} "
                    "cut to fit the context window"
                )
        if used > budget.limit:
            raise ModelError(
                f"the request does not fit the model's context window even after compaction "
                f"(about {used:,} tokens of {budget.window:,}, {budget.limit:,} with room for "
                "the answer): raise contextWindow (--context-window) if the model holds more, "
                "or lower maxOutputTokens (--max-output-tokens)"
            )

    def _latest_step(self) -> int:
        """Where the latest step begins: its response, when it called tools (the model has
        not read their results yet); else the end."""
        for i in range(len(self.view) - 1, self.head - 1, -1):
            message = self.view[i]
            if message.get("role") == "assistant":
                return i if message.get("tool_calls") else len(self.view)
        return len(self.view)

    async def _summarise(self, step: int, end: int) -> None:
        """view[head:end] becomes the person's messages, as they were, and one note: the
        model's summary (one call, metered and capped like any) and Talos's ledger."""
        part = self.view[self.head : end]
        people = [m for m in part if m.get("role") == "user"]
        if len(people) == len(part):
            return
        self.report(f"step {step}: summarising {len(part)} earlier messages to save context")
        self.loop.caps.check(self.loop.meter.task(self.task.id))
        request = context.summary_request(part, self.budget.window, self.budget.answer)
        try:
            done = await self._call(step, request, (), None)
        except ContextTooLong as exc:
            raise ModelError(f"the summary of the earlier steps did not fit: {exc}") from None
        self.loop.caps.check(self.loop.meter.task(self.task.id))
        entries = self.ledger + context.ledger_entries(part)
        self.ledger = context.trim_ledger(entries, self.budget.window)
        note = context.summary_note(redact(done.text), self.ledger, self.budget.window)
        self.view[self.head : end] = [*people, note]
        self._note(
            f"step {step}: {len(part)} earlier messages summarised "
            f"({len(done.text):,} characters; the request, your messages and every proposal, "
            "command and question kept)\n" + note["content"]
        )

    def _shorten_latest(self, step: int, latest: int, used: int) -> int:
        """The latest step's tool results, shortened alike until the request fits."""
        results = [i for i in range(latest, len(self.view)) if self.view[i]["role"] == "tool"]
        if not results:
            return used
        sizes = sum(context.estimate(self.view[i]) for i in results)
        room = max(sizes - (used - self.budget.limit), 0)
        each = max(room * context.CHARS_PER_TOKEN // len(results) - 200, 200)
        for i in results:
            content = str(self.view[i].get("content") or "")
            self.view[i] = dict(self.view[i], content=context.shorten(content, each))
        self._note(
            f"step {step}: {len(results)} latest tool results shortened to fit the context window"
        )
        return self.budget.recount(self.view)
