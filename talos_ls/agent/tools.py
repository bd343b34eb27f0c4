"""The agent's tools. Each takes JSON arguments (validated against its schema) and returns text
for the model; a mistake (bad arguments, a path outside the workspace, a block that does not
match) comes back to the model as an error it can correct, never as a crash of the loop.

- list_files, read_file, search: read the workspace through the sandbox, bounded in bytes;
  search cannot hang (ripgrep or RE2, never a backtracking regex).
- propose_edit: makes a proposal; it never writes to disk.
- run_command: through the permission gate, then under the OS sandbox (`sandbox.py`); timed
  out; output streamed with a byte cap.
- remember: a fact (source "model"), reconciled with what is held; saying it again adds
  nothing (the model repeating itself is not corroboration).
- ask: a question candidate for the rationed queue, never a prompt: the tool answers that the
  question is queued and the agent must proceed on a stated assumption.
- load_skill: a skill's instructions, loaded when the model decides it needs them.
- plan: the model states its plan (steps, how many done); nothing changes, a surface that
  shows plans shows it (ACP's `plan` update).

Every result is cut to MAX_OUTPUT characters and passed through secret redaction before it
reaches the model, the transcript or a log. The handlers' disk and store work runs through
`ctx.blocking` (the host's worker threads), never on the event loop.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..edits.proposals import Proposal, ProposalBook, ProposalError, apply_blocks
from ..errors import TalosError
from ..gates.permissions import Policy, Prompter
from ..gates.question_queue import QuestionQueue
from ..memory.facts import FactStore
from ..memory.reconcile import Reconciler
from ..offload import Offload
from ..redact import redact
from ..store import StoreError
from ..text import normalize_text
from .sandbox import Sandbox
from .search import search
from .workspace import SandboxError, Workspace

MAX_OUTPUT = 8000
MAX_LISTED = 1000
MAX_FACT_CHARS = 1000  # remember: a statement
MAX_SLOT_CHARS = 200  # remember: subject, attribute, value; ask: an option
MAX_QUESTION_CHARS = 500
logger = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass
class ToolContext:
    """What a tool may touch, for one task."""

    agent_id: str
    task_id: str
    turn: int
    workspace: Workspace
    policy: Policy
    proposals: ProposalBook
    facts: FactStore
    queue: QuestionQueue
    prompter: Prompter | None = None
    skills: Mapping[str, str] = field(default_factory=dict)  # name -> instructions
    on_proposal: Callable[[Proposal], object] | None = None
    # The editor's copy of an open document (text, version), when it has one. Called from
    # worker threads.
    read_document: Callable[[str], tuple[str, int | None] | None] | None = None
    command_timeout: float = 120.0
    sandbox: Sandbox | None = None  # None: commands cannot run at all
    offload: Offload | None = None  # None: blocking work runs inline (tests, one-shot runs)
    notice: Callable[[str], None] | None = None  # tells the person (a command hit a limit)
    # What the current call is doing now, for the person's progress view ("" when nothing in
    # particular); the loop sets it for each call.
    report: Callable[[str], None] | None = None

    @property
    def reconciler(self) -> Reconciler:
        return self.queue.reconciler

    def say(self, doing: str) -> None:
        if self.report is not None:
            self.report(doing)

    async def blocking(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` off the event loop, in the host's worker threads."""
        if self.offload is None:
            return fn(*args)
        return await self.offload.run(fn, *args)


@dataclass(frozen=True)
class ToolResult:
    text: str
    failed: bool = False


class ToolError(TalosError):
    """Returned to the model as `error: <message>`."""


Handler = Callable[[ToolContext, dict[str, Any]], Awaitable[str]]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    handler: Handler

    def schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


_TYPES = {"string": str, "integer": int, "array": list, "object": dict, "boolean": bool}


def _validate(tool: Tool, raw: str) -> dict[str, Any]:
    try:
        args = json.loads(raw or "{}")
    except json.JSONDecodeError as exc:
        raise ToolError(f"the arguments of {tool.name} are not valid JSON ({exc.msg})") from None
    if not isinstance(args, dict):
        raise ToolError(f"the arguments of {tool.name} must be a JSON object")
    props = tool.parameters.get("properties", {})
    unknown = sorted(set(args) - set(props))
    if unknown:
        raise ToolError(f"{tool.name} has no argument(s) {unknown}; it takes {sorted(props)}")
    for name in tool.parameters.get("required", []):
        if name not in args:
            raise ToolError(f"{tool.name} needs the argument {name!r}")
    for name, value in args.items():
        expected = _TYPES[props[name]["type"]]
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise ToolError(f"{tool.name}: {name!r} must be a {props[name]['type']}")
    return args


def _truncate(text: str, limit: int = MAX_OUTPUT) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - limit} characters cut ...]\n{text[-half:]}"


# ------------------------------------------------------------------ handlers
def _offloaded(fn: Callable[[ToolContext, dict[str, Any]], str]) -> Handler:
    """A handler running `fn` (disk or store work) through `ctx.blocking`."""

    async def handler(ctx: ToolContext, args: dict[str, Any]) -> str:
        return await ctx.blocking(fn, ctx, args)

    return handler


def _list(ctx: ToolContext, args: dict[str, Any]) -> str:
    limit = max(1, min(args.get("limit", 200), MAX_LISTED))
    files = []
    for rel in ctx.workspace.walk(args.get("path", ".")):
        files.append(rel)
        if len(files) > limit:
            return "\n".join(files[:limit]) + f"\n[... more than {limit} files; narrow the path]"
    return "\n".join(files) or "(no files)"


def _read(ctx: ToolContext, args: dict[str, Any]) -> str:
    """The editor's unsaved text when the file is open there, else the file on disk."""
    path, start, end = args["path"], args.get("start_line"), args.get("end_line")
    rel = ctx.workspace.relative(ctx.workspace.resolve(path))
    open_doc = ctx.read_document(rel) if ctx.read_document else None
    if start is not None or end is not None:
        start, end = start or 1, end or (start or 1) + 199
        if start < 1 or end < start:
            raise ToolError(f"bad line range {start}..{end}")
        if open_doc is not None:
            lines = open_doc[0].splitlines(keepends=True)[start - 1 : end]
            cut = None
        else:
            lines, cut = ctx.workspace.read_lines(path, start, end)
        text = "".join(f"{n:>5}  {line}" for n, line in enumerate(lines, start)) or "(no lines)"
        return text + (f"\n[{cut}]" if cut else "")
    return open_doc[0] if open_doc is not None else ctx.workspace.read_text(path)


async def _search(ctx: ToolContext, args: dict[str, Any]) -> str:
    hits = await search(
        ctx.workspace, args["pattern"], args.get("path", "."), args.get("limit", 50)
    )
    return "\n".join(hits) or "(no matches)"


def _base(ctx: ToolContext, rel: str) -> tuple[str, int | None]:
    if ctx.read_document:
        open_doc = ctx.read_document(rel)
        if open_doc is not None:
            return open_doc
    real = ctx.workspace.resolve(rel, write=True)
    return (ctx.workspace.read_text(rel), None) if real.exists() else ("", None)


async def _propose_edit(ctx: ToolContext, args: dict[str, Any]) -> str:
    proposal = await ctx.blocking(_propose, ctx, args)
    if ctx.on_proposal:
        ctx.on_proposal(proposal)
    return (
        f"proposal {proposal.id}: {len(proposal.hunks)} change(s) to {proposal.path}, waiting "
        "for the person to review it. Nothing is written until they apply it."
    )


def _propose(ctx: ToolContext, args: dict[str, Any]) -> Proposal:
    real = ctx.workspace.resolve(args["path"], write=True)
    rel = ctx.workspace.relative(real)
    decision = ctx.policy.check_write(rel)
    if decision.verdict == "deny":
        raise ToolError(decision.reason)
    base, version = _base(ctx, rel)
    if "content" in args and "blocks" in args:
        raise ToolError("give either content (a whole file) or blocks (search/replace), not both")
    if "content" in args:
        new = args["content"]
    elif "blocks" in args:
        blocks = []
        for i, block in enumerate(args["blocks"], 1):
            if (
                not isinstance(block, dict)
                or not isinstance(block.get("search"), str)
                or not (isinstance(block.get("replace"), str))
            ):
                raise ToolError(f"block {i} needs 'search' and 'replace' strings")
            blocks.append((block["search"], block["replace"]))
        new = apply_blocks(base, blocks, rel)
    else:
        raise ToolError("give content (a whole file) or blocks (search/replace)")
    return ctx.proposals.create(rel, base, new, version=version, task_id=ctx.task_id)


def _checking(ctx: ToolContext) -> Callable[..., Awaitable[Any]]:
    """`ctx.blocking` that says so while the command is checked: a hostile command's check
    can take seconds (bounded), and the person sees what the task waits on meanwhile."""

    async def check(fn: Callable[..., T], *args: Any) -> T:
        ctx.say("checking the command")
        try:
            return await ctx.blocking(fn, *args)
        finally:
            ctx.say("")

    return check


async def _run_command(ctx: ToolContext, args: dict[str, Any]) -> str:
    command = args["command"]
    if ctx.sandbox is None:
        raise ToolError("not run: commands cannot run in this session")
    decision = await ctx.policy.authorize_command(command, ctx.prompter, blocking=_checking(ctx))
    if decision.verdict != "allow":
        raise ToolError(f"not run: {decision.reason}")
    timeout = min(float(args.get("timeout", ctx.command_timeout)), ctx.command_timeout)
    if timeout <= 0:
        raise ToolError("timeout must be a positive number of seconds")
    result = await ctx.sandbox.run(
        command,
        sandboxed=ctx.policy.sandboxed,
        writable=decision.writable,
        network=decision.network,
        timeout=timeout,
    )
    if result.limit and ctx.notice is not None:
        ctx.notice(f"A command was stopped: {result.limit}.")
    return result.text()


def _remember_fact(ctx: ToolContext, args: dict[str, Any]) -> str:
    slot: dict[str, Any] = {k: args[k] for k in ("subject", "attribute", "value") if k in args}
    if len(args["statement"]) > MAX_FACT_CHARS:
        raise ToolError(f"a fact is at most {MAX_FACT_CHARS} characters; say it shorter")
    for name, value in slot.items():
        if len(value) > MAX_SLOT_CHARS or not normalize_text(value):
            raise ToolError(f"{name} must be a few words (at most {MAX_SLOT_CHARS} characters)")
    known = _already_known(ctx, args["statement"], slot)
    if known is not None:
        return f"already remembered as {known}; saying it again adds no evidence"
    try:
        key = ctx.facts.add(ctx.agent_id, args["statement"], source="model", **slot)
    except ValueError as exc:
        raise ToolError(str(exc)) from None
    outcome = ctx.reconciler.reconcile(key)
    return f"remembered as {key} ({outcome})"


def _already_known(ctx: ToolContext, statement: str, slot: Mapping[str, Any]) -> str | None:
    """A live fact that says the same thing: the same statement, or the same slot and value.
    The model restating what is held (or what it said itself) is not independent evidence."""
    wanted = normalize_text(statement)
    triple = tuple(normalize_text(str(slot.get(k, ""))) for k in ("subject", "attribute", "value"))
    for fact in ctx.facts.list(ctx.agent_id, include_closed=False):
        if normalize_text(fact.statement) == wanted:
            return fact.key
        held = tuple(normalize_text(x or "") for x in (fact.subject, fact.attribute, fact.value))
        if all(triple) and held == triple:
            return fact.key
    return None


def _queue_question(ctx: ToolContext, args: dict[str, Any]) -> str:
    question, options = args["question"], args["options"]
    if not 2 <= len(options) <= 6 or not all(isinstance(o, str) and o.strip() for o in options):
        raise ToolError("ask needs 2 to 6 non-empty options the person can choose from")
    if len(question) > MAX_QUESTION_CHARS or any(len(o) > MAX_SLOT_CHARS for o in options):
        raise ToolError(
            f"a question is at most {MAX_QUESTION_CHARS} characters and each "
            f"option at most {MAX_SLOT_CHARS}"
        )
    ident = hashlib.sha1(normalize_text(question).encode()).hexdigest()[:12]
    try:
        cand = ctx.queue.propose(
            agent_id=ctx.agent_id,
            question_text=question,
            kind="referent",
            source_module="agent.ask",
            target_keys=[f"ask:{ident}"],
            ambiguity_signal="evidence_gap",
            turn=ctx.turn,
            options=[{"label": o} for o in options],
        )
    except ValueError as exc:
        raise ToolError(str(exc)) from None
    state = "queued" if cand is not None else "not queued (questions are off or unavailable)"
    return (
        f"The question is {state}. The person is asked at most one question every few turns, "
        "when it is relevant; do not wait for an answer. Proceed now on the most reasonable "
        "assumption, and say in your reply which assumption you made."
    )


MAX_PLAN_STEPS = 20


def plan_steps(args: Mapping[str, Any]) -> tuple[list[str], int] | None:
    """A `plan` call's steps and how many are done, when its arguments are well formed (the
    tool's check, and what a surface shows of it); None otherwise."""
    steps, done = args.get("steps"), args.get("done", 0)
    if (
        not isinstance(steps, list)
        or not 1 <= len(steps) <= MAX_PLAN_STEPS
        or not all(isinstance(s, str) and s.strip() and len(s) <= MAX_SLOT_CHARS for s in steps)
        or not isinstance(done, int)
        or isinstance(done, bool)
        or not 0 <= done <= len(steps)
    ):
        return None
    return [s.strip() for s in steps], done


async def _plan(ctx: ToolContext, args: dict[str, Any]) -> str:
    checked = plan_steps(args)
    if checked is None:
        raise ToolError(
            f"plan needs 1 to {MAX_PLAN_STEPS} steps of at most {MAX_SLOT_CHARS} characters, "
            "and done: how many of them are finished (0 to their number)"
        )
    steps, done = checked
    return f"plan noted: {done} of {len(steps)} steps done; the person sees it"


async def _load_skill(ctx: ToolContext, args: dict[str, Any]) -> str:
    body = ctx.skills.get(args["name"])
    if body is None:
        raise ToolError(f"no skill {args['name']!r}; available: {sorted(ctx.skills) or 'none'}")
    return body


def _params(required: list[str], **props: str | tuple[str, str]) -> dict[str, Any]:
    """A tool's parameters schema; each property is (type, description), or a description
    alone for a string."""
    typed = {n: p if isinstance(p, tuple) else ("string", p) for n, p in props.items()}
    return {
        "type": "object",
        "properties": {n: {"type": t, "description": d} for n, (t, d) in typed.items()},
        "required": required,
    }


TOOLS: dict[str, Tool] = {
    t.name: t
    for t in (
        Tool(
            "list_files",
            "List the workspace's files (respecting .gitignore).",
            _params(
                [],
                path="directory, relative to the workspace",
                limit=("integer", "at most this many (default 200)"),
            ),
            _offloaded(_list),
        ),
        Tool(
            "read_file",
            "Read a file, or a range of its lines (1-based, inclusive).",
            _params(
                ["path"],
                path="file path",
                start_line=("integer", "first line"),
                end_line=("integer", "last line"),
            ),
            _offloaded(_read),
        ),
        Tool(
            "search",
            "Search the workspace's files with a regular expression.",
            _params(
                ["pattern"],
                pattern="regex in RE2/ripgrep syntax (no backreferences or lookaround)",
                path="directory to search",
                limit=("integer", "at most this many matches (default 50)"),
            ),
            _search,
        ),
        Tool(
            "propose_edit",
            "Propose a change to one file: search/replace blocks (each search "
            "text must match exactly once) or the whole new content. Nothing is written until "
            "the person applies it.",
            _params(
                ["path"],
                path="file path",
                blocks=("array", "[{search, replace}] applied in order"),
                content="the whole new file content",
            ),
            _propose_edit,
        ),
        Tool(
            "run_command",
            "Run a shell command in the workspace, in a sandbox with no network "
            "and no secrets (subject to the person's permission rules).",
            _params(
                ["command"],
                command="the command",
                timeout=("integer", "seconds (default and maximum: the configured limit)"),
            ),
            _run_command,
        ),
        Tool(
            "remember",
            "Remember a fact about the workspace or the person's preferences. "
            "Give subject/attribute/value when the fact fills a slot (tests / use / pytest).",
            _params(
                ["statement"],
                statement="the fact",
                subject="what it is about",
                attribute="which aspect",
                value="the value",
            ),
            _offloaded(_remember_fact),
        ),
        Tool(
            "ask",
            "Queue a clarifying question with options. It is NOT asked now: continue on "
            "a stated assumption.",
            _params(
                ["question", "options"],
                question="the question",
                options=("array", "2 to 6 answers to choose from"),
            ),
            _offloaded(_queue_question),
        ),
        Tool(
            "plan",
            "State your plan for work of several steps, the whole list each time; call it "
            "again as steps finish. The person sees it; it changes nothing.",
            _params(
                ["steps"],
                steps=("array", "the steps, in order, a short sentence each"),
                done=("integer", "how many of the steps are finished (default 0)"),
            ),
            _plan,
        ),
        Tool(
            "load_skill",
            "Load a skill's instructions by name.",
            _params(["name"], name="the skill"),
            _load_skill,
        ),
    )
}


def schemas() -> list[dict[str, Any]]:
    return [t.schema() for t in TOOLS.values()]


async def call(ctx: ToolContext, name: str, arguments: str) -> ToolResult:
    """Run a tool call from the model. Every mistake comes back as a failed result."""
    tool = TOOLS.get(name)
    if tool is None:
        return ToolResult(f"error: there is no tool {name!r}; tools: {sorted(TOOLS)}", True)
    args: dict[str, Any] = {}
    try:
        args = _validate(tool, arguments)
        text, failed = await tool.handler(ctx, args), False
    except (ToolError, SandboxError, ProposalError) as exc:
        text, failed = f"error: {exc}", True
    except OSError as exc:  # named by the path the model gave, not the real one
        about = f"{args['path']!r}: " if isinstance(args.get("path"), str) else ""
        text, failed = f"error: {about}{exc.strerror or exc}", True
    except StoreError:  # the store failing is the task's failure, not the model's mistake
        raise
    except Exception as exc:  # a bug of ours must not end the task: the model is told
        logger.exception("tool %s failed", name)
        text, failed = f"error: {name} failed ({type(exc).__name__}); try another way", True
    return ToolResult(_truncate(redact(text)), failed)  # redacted whole, then cut
