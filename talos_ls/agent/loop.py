"""The agent loop: the model and its tools, until the model answers without a tool call.

Each step: the caps are checked, notes from the person are added, the model is called with the
conversation and the tools, its usage is metered (and the caps checked again at once, so a cost
cap stops the task before another tool runs), and each tool call is run and its result added.
The loop guard stops a task that keeps repeating the same failing call. A response may ask for
at most MAX_CALLS_PER_RESPONSE tool calls: the rest are dropped from the conversation and the
model is told, so one response cannot do the work of a thousand steps. A model call that is
retried (a 429, a 5xx) says so in the task's progress; one that fails raises ModelError, which
fails the task with the message (model.py: no call waits for ever).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..memory.facts import Fact
from ..redact import redact
from . import tools
from .cost import Caps, CostMeter, LoopGuard
from .model import ModelClient
from .tasks import Task, TaskRegistry

MAX_CALLS_PER_RESPONSE = 16
HISTORY_MESSAGES = 40  # the earlier conversation a follow-up carries: its last messages,
HISTORY_CHARS = 60_000  # at most this long in all (the oldest go first)

INSTRUCTIONS = """You are Talos, a coding agent working in the person's workspace through tools.
- Read before you change: list_files, read_file and search show you the code.
- You never write files. propose_edit makes a proposal the person reviews in their editor;
  describe what each proposal does.
- run_command runs in the workspace under the person's permission rules; a refusal is final.
- When something is ambiguous, make the most reasonable assumption, say which, and carry on.
  If the answer matters later, queue a question with ask; it is not answered now.
- remember facts worth keeping (conventions, commands, preferences), with a slot when one fits.
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
    ) -> str:
        """Run until the model answers; returns its final text. Raises CapReached when a cap or
        the guard stops it, ModelError when the model cannot be used. `on_step` hears what the
        task is doing ("step 2: read_file") for the person's progress view; `history` is the
        earlier conversation a follow-up continues (`conversation`)."""
        report = on_step or (lambda _: None)
        task.transcript = [
            {"role": "system", "content": system},
            *({"role": m["role"], "content": m["content"]} for m in history),
            {"role": "user", "content": prompt},
        ]
        guard = LoopGuard(self.caps.repeat_limit)
        schemas = tools.schemas()
        model = self.model.config.model
        step = 0
        while True:
            self.caps.check(self.meter.task(task.id))
            while task.notes:
                task.transcript.append({"role": "user", "content": task.notes.pop(0)})
            step += 1
            report(f"step {step}: thinking")
            completion = await self.model.complete(
                task.transcript,
                schemas,
                on_text,
                on_retry=_prefixed(report, f"step {step}"),
                on_unfinished=lambda spent: self.meter.add(task.id, model, spent),
            )
            self.meter.add(task.id, model, completion.usage)
            dropped = len(completion.tool_calls) - MAX_CALLS_PER_RESPONSE
            del completion.tool_calls[MAX_CALLS_PER_RESPONSE:]
            task.transcript.append(completion.message())
            self.registry.save(task)
            if not completion.tool_calls:
                return completion.text
            self.caps.check(self.meter.task(task.id))  # a cap reached stops before any tool
            for n, call in enumerate(completion.tool_calls, 1):
                doing = f"step {step}: {call.name if call.name in tools.TOOLS else 'unknown tool'}"
                report(doing)
                ctx.report = _prefixed(report, doing)
                result = await tools.call(ctx, call.name, call.arguments)
                text = result.text
                if dropped > 0 and n == len(completion.tool_calls):
                    text += (
                        f"\n[{dropped} more tool calls in that response were not run: too "
                        f"many calls; at most {MAX_CALLS_PER_RESPONSE} run per response]"
                    )
                task.transcript.append({"role": "tool", "tool_call_id": call.id, "content": text})
                guard.record(call.name, call.arguments, result.failed)
            self.registry.save(task)
