"""`talos`: the command line.

`talos questions` and `talos memory` show what is in the store, for people who want to see why
they were, or were not, asked something: every candidate with its status, turns and ask count,
the turn each agent's question budget reopens, and every fact with its confidence and evidence.

Every command shares one error path (`cli_report.py`): an expected failure is one line on stderr,
`talos: error: <what is wrong>; <how to fix it>` (with --json, one JSON object on stdout), a
traceback only with --verbose. Exit codes: 0 success, 1 a failure (the store, the model, the
sandbox; a task failed or stopped), 2 a usage error, 130 interrupted (Ctrl-C), 141 stdout
closed early (`talos memory --json | head`: the exit a program killed by SIGPIPE has).

The workspace of a command, without --workspace, is found like git's repository
(`project.find_root`): the nearest ancestor with `.git`, `.talos` or a project file.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import sys
import threading
from collections.abc import Sequence
from dataclasses import asdict
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from . import __version__, completion
from .agent.workspace import SandboxError, Workspace
from .cli_report import INTERRUPTED, USAGE, CliError, report, setup_logging, store_error
from .display import visible
from .edits import apply
from .edits import proposals as edits
from .edits.apply import DiskFiles
from .errors import TalosError
from .gates.permissions import MODES
from .gates.question_queue import QUESTION_BUDGET_TURNS, QuestionCandidate
from .gates.question_value import RANKINGS
from .memory.facts import SOURCES, Fact, FactStore
from .memory.reconcile import Reconciler
from .project import agent_id, chosen, find_root
from .store import ENV_URL, Store, StoreError, default_store_url, open_store

if TYPE_CHECKING:
    from .config import Effective

OPEN = ("pending", "delivered", "cooled")


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors on the one error path: one line naming the option, exit 2."""

    def error(self, message: str) -> NoReturn:
        raise CliError("usage", f"{message}; see {self.prog} --help", USAGE)


def _workspace_option(parser: argparse.ArgumentParser, **kwargs: Any) -> None:
    parser.add_argument(
        "--workspace",
        metavar="DIR",
        help="default: the nearest directory up from here with .git, .talos or a project file",
        **kwargs,
    )


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="talos",
        description="Talos: a coding agent in your editor that asks at most one question per "
        "K turns. These commands inspect what it holds.",
    )
    parser.add_argument("--version", action="version", version=f"talos {__version__}")
    parser.add_argument(
        "--store",
        metavar="URL",
        help=f"store URL, e.g. sqlite:////abs/path/talos.db (default: ${ENV_URL}, else "
        "talos.db in the user state directory)",
    )
    parser.add_argument(
        "--verbose", "-v", action="store_true", help="log at DEBUG on stderr, and show tracebacks"
    )
    parser.add_argument(
        "--log-file", metavar="PATH", help="also log at DEBUG to PATH (keys, credentials redacted)"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, help: str, description: str) -> argparse.ArgumentParser:
        """A command's parser, its first option --workspace."""
        child = sub.add_parser(name, help=help, description=description)
        _workspace_option(child)
        return child

    listing = _Parser(add_help=False)
    listing.add_argument("--agent", metavar="A", help="only this agent (default: this workspace's)")
    listing.add_argument("--all-agents", action="store_true", help="every agent in the store")
    _workspace_option(listing)
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")

    q = sub.add_parser(
        "questions",
        parents=[listing],
        help="list question candidates and each agent's question budget",
        description="List question candidates: open ones (pending, delivered, cooled) by "
        "default, every status with --all. Each agent's line says when its budget reopens.",
    )
    q.add_argument("--all", action="store_true", help="include answered and expired ones")
    q.add_argument(
        "--budget-turns",
        type=_count,
        metavar="K",
        help=f"the K the agents run with (default: config, else {QUESTION_BUDGET_TURNS})",
    )
    m = sub.add_parser(
        "memory",
        parents=[listing],
        help="list, add and forget facts; show conflicts",
        description="Without an action: list facts with confidence, evidence counts "
        "(corroborations and contradictions), source, and whether each is still valid.",
    )
    actions = m.add_subparsers(dest="action", metavar="ACTION")
    # Sub-actions leave --agent/--json alone unless given, so `talos memory --agent A` works.
    late = _Parser(add_help=False)
    late.add_argument(
        "--agent",
        metavar="A",
        default=argparse.SUPPRESS,
        help="the agent (default for add: this directory's workspace)",
    )
    late.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print JSON instead of text"
    )
    _workspace_option(late, default=argparse.SUPPRESS)
    add = actions.add_parser(
        "add",
        parents=[late],
        help="tell Talos a fact (source: person)",
        description="Store a fact and reconcile it with what is held. A sentence like "
        "'tests use pytest' gets its slot (subject, attribute, value) by itself.",
    )
    add.add_argument("statement")
    add.add_argument("--subject")
    add.add_argument("--attribute")
    add.add_argument("--value")
    add.add_argument("--source", default="person", choices=SOURCES)
    forget = actions.add_parser(
        "forget",
        help="retract a fact",
        description="Retract a fact (its key, or the "
        "shortened key `talos memory` shows, if unambiguous).",
    )
    forget.add_argument("key")
    actions.add_parser(
        "conflicts",
        parents=[late],
        help="show unresolved conflicts",
        description="Live conflicts between facts of equal precedence, with both sides.",
    )
    r = sub.add_parser(
        "run",
        help="run one request in a workspace, in the terminal",
        description="Run one request through Talos in the terminal: questions and permission "
        "prompts are asked here when this is a terminal (without one nothing prompts and "
        "nothing waits); proposals are shown as diffs and applied on confirmation or with "
        "--apply. Exit codes: 0 done, 1 the task failed or was stopped, 2 a usage error.",
    )
    r.add_argument("request", nargs="?", help="what to do, in your words; - reads it from stdin")
    r.add_argument("--file", metavar="PATH", help="read the request from a file")
    _workspace_option(r)
    r.add_argument(
        "--model",
        help="model name (default: $TALOS_MODEL, else the config "
        "files' model, else gpt-4.1-mini; see talos config)",
    )
    r.add_argument(
        "--base-url",
        help="an OpenAI-compatible endpoint, e.g. http://localhost:"
        "11434/v1 for Ollama (default: $OPENAI_BASE_URL, else OpenAI)",
    )
    r.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="the variable holding the key "
        "(default: the config file's api_key_env, else OPENAI_API_KEY)",
    )
    r.add_argument(
        "--mode", choices=MODES, help="permission mode (default: the config files' mode, else ask)"
    )
    r.add_argument("--apply", action="store_true", help="apply proposals without asking")
    r.add_argument(
        "--max-cost",
        type=_usd,
        metavar="USD",
        help="stop the task at this cost (a model without a price needs --max-tokens instead)",
    )
    r.add_argument(
        "--max-tokens",
        type=_count,
        metavar="N",
        help="stop the task after this many tokens in and out",
    )
    r.add_argument(
        "--max-steps",
        type=_count,
        metavar="N",
        help="stop after this many model calls (default: config, else 50)",
    )
    r.add_argument(
        "--budget-turns",
        type=_count,
        metavar="K",
        help=f"one question per K turns at most (default: config, else {QUESTION_BUDGET_TURNS})",
    )
    r.add_argument(
        "--question-ranking",
        choices=RANKINGS,
        help="which open question goes first: value (what it is worth now) or seed (the "
        "reference design's order) (default: config, else value)",
    )
    r.add_argument(
        "--readable-path",
        action="append",
        metavar="PATH",
        help="show commands this absolute path outside the workspace, read-only "
        "(repeatable; default: the config file's readable_paths)",
    )
    r.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    command(
        "skills",
        "list the skills the agent can load",
        "Skills from the package, the user config directory and "
        "the workspace's .talos/skills/ (a later one of a name wins).",
    )
    doc = command(
        "doctor",
        "check the configuration and say what to fix",
        "Check for real: the store takes a write (and passes "
        "PRAGMA quick_check), the key is set (nothing is sent without one), the "
        "endpoint lists its models, the sandbox runs, rg is there. Exit code 1 "
        "when something needs fixing.",
    )
    doc.add_argument("--base-url")
    doc.add_argument("--api-key-env", metavar="VAR")
    perm = command(
        "permissions",
        "where the permission rules come from; trust the workspace's own rules file",
        "Show the permission rules in force and where each comes "
        "from. A workspace's .talos/permissions.json came with the repository: "
        "until you trust its exact content, only its deny and ask rules "
        "apply.",
    )
    perm.add_argument(
        "--trust",
        action="store_true",
        help="trust the workspace's .talos/permissions.json as it is now",
    )
    pr = command(
        "proposals",
        "the proposed edits waiting for review",
        "Proposals Talos made in this workspace (in any editor or "
        "terminal) that are still to review: pending, partly applied or stale "
        "(--all: every one).",
    )
    pr.add_argument("--all", action="store_true", help="include applied, rejected, undone")
    pr.add_argument("--diff", action="store_true", help="show each one's diff")
    pr.add_argument("--json", action="store_true", help="print JSON")
    ap = sub.add_parser(
        "apply",
        help="apply a proposal (or some of its hunks)",
        description="Write a proposal into its file, refused when the file "
        "changed since the proposal was made (it is stale). Exit code 1 when "
        "it was not applied.",
    )
    ap.add_argument("id")
    ap.add_argument(
        "--hunk",
        type=_count,
        action="append",
        metavar="N",
        help="only hunk N (1 is the first; repeat for more)",
    )
    _workspace_option(ap)
    rj = command("reject", "reject a proposal", "Reject a proposal.")
    rj.add_argument("id")
    ud = command(
        "undo",
        "undo the last applied proposal",
        "Put back the file a proposal changed (the last applied "
        "one, or ID), if the file is still as the proposal left it.",
    )
    ud.add_argument("id", nargs="?")
    ts = command(
        "tasks",
        "the workspace's recent tasks",
        "Tasks run in this workspace (by talos run or an editor), "
        "newest last: id, state, cost, title.",
    )
    ts.add_argument(
        "--limit", type=_count, default=20, metavar="N", help="the last N tasks (default 20)"
    )
    ts.add_argument("--json", action="store_true", help="print JSON")
    sh = command(
        "show",
        "a task's transcript",
        "What a task did: its state, error and transcript (the "
        "model's words and its tool calls, shown as plain text).",
    )
    sh.add_argument("task", help="the task's id, or an unambiguous prefix of it")
    sh.add_argument("--json", action="store_true", help="print JSON")
    cf = command(
        "config",
        "the settings in force and where each comes from",
        "Every setting's value and its origin: a flag, a variable, "
        "the workspace's .talos/config.toml, your config.toml (in the user "
        "config directory: ~/.config/talos/ on Linux) or the default "
        "(docs/config.md).",
    )
    cf.add_argument("--json", action="store_true", help="print JSON")
    co = sub.add_parser(
        "completion",
        help="print the shell completion script",
        description="Print the completion script for SHELL; see docs/config.md "
        "for where to put it.",
    )
    co.add_argument("shell", choices=completion.SHELLS)
    sub.add_parser(
        "demo",
        help="a complete scripted session: no API key, no network",
        description="Two turns of a real Talos session in a temporary workspace, "
        "with a scripted model and scripted replies, labelled as such.",
    )
    return parser


def _usd(text: str) -> Decimal:
    try:
        value = Decimal(text)
    except ArithmeticError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an amount in USD") from None
    if not value.is_finite() or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: the cap must be a positive amount")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: must be at least 1")
    return value


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    rows = [[visible(cell, single_line=True) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in [headers, *rows]) for i in range(len(headers) - 1)]
    room = shutil.get_terminal_size((120, 24)).columns - sum(widths) - 2 * (len(headers) - 1)
    lines = []
    for row in [headers, *rows]:
        last = row[-1]
        if sys.stdout.isatty():  # piped output keeps the whole text
            last = _clip(last, max(room, 20))
        lines.append("  ".join([*(c.ljust(w) for c, w in zip(row, widths, strict=False)), last]))
    return "\n".join(line.rstrip() for line in lines)


def _print_json(value: Any, **kwargs: Any) -> None:
    print(json.dumps(value, ensure_ascii=False, indent=2, **kwargs))


def _say(text: str, **kwargs: Any) -> None:
    """Print text that may hold the workspace's or the model's words (a rule, a question), with
    control characters made visible."""
    print(visible(text), **kwargs)


def _answer_label(c: QuestionCandidate) -> str:
    if c.answer_option is None or not 0 <= c.answer_option < len(c.options):
        return ""
    return f" [answered: {c.options[c.answer_option]['label']}]"


def _workspace(args: argparse.Namespace) -> Path:
    return chosen(getattr(args, "workspace", None), announce=not getattr(args, "json", False))


def _agent_filter(args: argparse.Namespace) -> str | None:
    """--agent, else every agent with --all-agents, else this workspace's agent."""
    if getattr(args, "agent", None):
        return str(args.agent)
    if getattr(args, "all_agents", False):
        return None
    return agent_id(_workspace(args))


def _questions(store: Store, args: argparse.Namespace) -> int:
    agents = store.qq_agents()
    only = _agent_filter(args)
    if only is not None:
        agents = {only: agents.get(only)}
    out: list[dict] = []
    for agent, last in agents.items():
        cands = [QuestionCandidate(**row) for row in store.qq_list(agent)]
        shown = cands if args.all else [c for c in cands if c.status in OPEN]
        out.append(
            {
                "agent": agent,
                "last_delivery_turn": last,
                "budget_reopens_at_turn": None if last is None else last + args.budget_turns,
                "hidden": len(cands) - len(shown),
                "candidates": shown,
            }
        )
    if args.json:
        _print_json(
            [{**entry, "candidates": [asdict(c) for c in entry["candidates"]]} for entry in out]
        )
        return 0
    if not out:
        _say(f"No questions in {store.url}: nothing has been proposed yet.")
        return 0
    for i, entry in enumerate(out):
        budget = (
            "no question asked yet; the budget is open"
            if entry["last_delivery_turn"] is None
            else f"last question at turn {entry['last_delivery_turn']}; budget reopens at turn "
            f"{entry['budget_reopens_at_turn']}"
        )
        _say(("\n" if i else "") + f"agent {entry['agent']}: {budget}")
        rows = [
            (
                c.candidate_id[-8:],  # the random end: ids of one minute share a start
                c.status + (f" until {c.cooldown_until}" if c.status == "cooled" else ""),
                c.kind,
                str(c.ask_count),
                str(c.created_turn),
                str(c.last_seen_turn),
                str(c.expires_turn),
                "-" if c.delivered_turn is None else str(c.delivered_turn),
                c.question_text + _answer_label(c),
            )
            for c in entry["candidates"]
        ]
        if rows:
            headers = (
                "ID",
                "STATUS",
                "KIND",
                "ASKED",
                "CREATED",
                "SEEN",
                "EXPIRES",
                "DELIVERED",
                "QUESTION",
            )
            _say(_table(headers, rows))
        else:
            _say("  no open questions")
        if entry["hidden"]:
            _say(f"  ({entry['hidden']} answered or expired not shown; --all shows them)")
    return 0


def _fact_state(f: Fact) -> str:
    if f.live:
        return "live"
    if f.superseded_by:
        return f"superseded by {f.superseded_by[:13]}"
    return "retracted"


def _memory(store: Store, args: argparse.Namespace) -> int:
    action = {"add": _memory_add, "forget": _memory_forget, "conflicts": _memory_conflicts}
    if args.action in action:
        return action[args.action](store, args)
    only = _agent_filter(args)
    facts = FactStore(store).list(only)
    if args.json:
        _print_json([asdict(f) for f in facts])
        return 0
    if not facts:
        _say(f"No facts in {store.url}" + (f" for agent {only}." if only else "."))
        return 0
    by_agent: dict[str, list[Fact]] = {}
    for f in facts:
        by_agent.setdefault(f.agent_id, []).append(f)
    for i, (agent, group) in enumerate(by_agent.items()):
        _say(("\n" if i else "") + f"agent {agent}: {len(group)} facts")
        rows = [
            (
                f.key[:13],
                f"{f.confidence:.2f}",
                f"{f.evidence_count} (+{f.corroborations}/-{f.contradictions})",
                f.source,
                _fact_state(f),
                f.statement,
            )
            for f in group
        ]
        _say(_table(("KEY", "CONF", "EVIDENCE", "SOURCE", "STATE", "STATEMENT"), rows))
    return 0


_OUTCOMES = {
    "no slot": "it has no slot (subject, attribute), so nothing can conflict with it",
    "alone": "nothing else is held about {slot}",
    "corroborated": "it agrees with what was already held about {slot}; the two are merged",
    "won": "it replaces what a lower-precedence source said about {slot}",
    "superseded": "a higher-precedence source says otherwise about {slot}; it is kept as history",
    "disjoined": "it conflicts with another fact about {slot} of the same precedence; Talos will "
    "ask which is right when it is relevant (talos memory conflicts)",
    "already held": "the same source already says this; nothing is added and its confidence is "
    "unchanged (saying it again is not new evidence)",
}


def _memory_add(store: Store, args: argparse.Namespace) -> int:
    agent = getattr(args, "agent", None) or agent_id(_workspace(args))
    slot = {k: getattr(args, k) for k in ("subject", "attribute", "value") if getattr(args, k)}
    reconciler = Reconciler(FactStore(store))
    try:
        key, outcome = reconciler.remember(agent, args.statement, args.source, slot)
    except ValueError as exc:
        raise CliError(
            "usage",
            f"{exc}; give --subject, --attribute and --value together, or none of them",
            USAGE,
        ) from None
    fact = reconciler.facts.get(key)
    where = f"'{fact.subject} {fact.attribute}'" if fact and fact.subject else ""
    held = "already held" if outcome == "already held" else "stored"
    _say(f"{held} {key} for agent {agent}: " + _OUTCOMES.get(outcome, outcome).format(slot=where))
    return 0


def _memory_forget(store: Store, args: argparse.Namespace) -> int:
    facts = FactStore(store)
    matches = facts.named(args.key)
    if len(matches) != 1:
        problem = "no fact has" if not matches else f"{len(matches)} facts have"
        fix = "talos memory lists the keys" if not matches else "give more of the key"
        raise CliError("memory", f"{problem} the key {args.key!r}; {fix}")
    fact = matches[0]
    if facts.retract(fact.key):
        _say(f"retracted {fact.key}: {fact.statement}")
    else:
        _say(f"{fact.key} was already closed ({_fact_state(fact)})")
    return 0


def _memory_conflicts(store: Store, args: argparse.Namespace) -> int:
    facts = FactStore(store)
    reconciler = Reconciler(facts)
    agent = _agent_filter(args)
    agents = [agent] if agent else sorted({f.agent_id for f in facts.list()})
    found = [(a, entry, x, y) for a in agents for entry, x, y in reconciler.conflicts(a)]
    if getattr(args, "json", False):
        out = [
            {
                "agent": a,
                "disjunction_id": entry.payload.get("disjunction_id"),
                "sides": [asdict(x) if x else None, asdict(y) if y else None],
            }
            for a, entry, x, y in found
        ]
        _print_json(out)
        return 0
    if not found:
        _say("No unresolved conflicts.")
        return 0
    for a, entry, x, y in found:
        _say(f"agent {a}: conflict {entry.payload.get('disjunction_id', entry.id)[:8]}")
        for side in (x, y):
            if side is not None:
                _say(f"  {side.confidence:.2f}  {side.key[:13]}  ({side.source}) {side.statement}")
    return 0


# ------------------------------------------------------------------ proposals
def _book(store: Store, args: argparse.Namespace) -> tuple[edits.ProposalBook, Workspace]:
    """The workspace's proposals (its agent is its directory), as the store holds them."""
    workspace = Workspace(_workspace(args))
    book = edits.ProposalBook(store, agent_id(workspace.root))
    book.load()
    return book, workspace


def _proposals(store: Store, args: argparse.Namespace) -> int:
    book, _ = _book(store, args)
    shown = [p for p in book.list() if args.all or p.status in (*edits.OPEN, "stale")]
    if args.json:
        _print_json(
            [
                {
                    "id": p.id,
                    "path": p.path,
                    "status": p.status,
                    "task": p.task_id,
                    "hunks": len(p.hunks),
                    "diff": p.diff(),
                }
                for p in shown
            ]
        )
        return 0
    if not shown:
        _say("no proposal to review" + ("" if args.all else " (--all for every one)"))
    for p in shown:
        _say(f"{p.id}  {p.status:14}  {len(p.hunks)} hunk(s)  {p.path}")
        if args.diff:
            _say(p.diff())
    return 0


def _apply(store: Store, args: argparse.Namespace) -> int:
    book, workspace = _book(store, args)
    hunks = None if not args.hunk else [n - 1 for n in args.hunk]
    asyncio.run(apply.apply(book, DiskFiles(workspace), args.id, hunks))
    proposal = book.get(args.id)
    left = f"; {len(proposal.hunks)} hunk(s) left" if proposal.status == "partly_applied" else ""
    _say(f"applied {proposal.id} to {proposal.path}{left}")
    return 0


def _reject(store: Store, args: argparse.Namespace) -> int:
    book, _ = _book(store, args)
    proposal = book.reject(args.id)
    _say(f"rejected {proposal.id} ({proposal.path})")
    return 0


def _undo(store: Store, args: argparse.Namespace) -> int:
    book, workspace = _book(store, args)
    proposal = asyncio.run(apply.undo(book, DiskFiles(workspace), args.id))
    _say(f"undid {proposal.id}: {proposal.path} is back as it was")
    return 0


# ---------------------------------------------------------------------- tasks
def _tasks(store: Store, args: argparse.Namespace) -> int:
    rows = store.task_list(agent_id(_workspace(args)))[-args.limit :]
    if args.json:
        keys = ("id", "state", "cost", "title", "error", "created_at", "updated_at")
        _print_json([{k: r.get(k) for k in keys} for r in rows])
        return 0
    if not rows:
        _say("no task has run in this workspace yet (talos run 'what to do' starts one)")
        return 0
    _say(
        _table(
            ("ID", "STATE", "COST", "TITLE"),
            [(r["id"], r["state"], f"${r['cost']}", r["title"]) for r in rows],
        )
    )
    return 0


def _find_task(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    """The task of this workspace whose id is, or starts with, args.task. Only this
    workspace's: another's transcript is read with --workspace naming it."""
    rows = store.task_list(agent_id(_workspace(args)))
    exact = [r for r in rows if r["id"] == args.task]
    matches = exact or [r for r in rows if r["id"].startswith(args.task)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise CliError(
            "tasks",
            f"no task has the id {args.task!r} in this workspace; talos "
            "tasks lists them (--workspace for another)",
        )
    raise CliError(
        "tasks", f"{len(matches)} tasks have ids starting {args.task!r}; give more of the id"
    )


def _show(store: Store, args: argparse.Namespace) -> int:
    row = _find_task(store, args)
    if args.json:
        _print_json(row, default=str)
        return 0
    _say(f"task {row['id']}: {row['state']}, ${row['cost']}", end="  ")
    print(visible(str(row["title"]), single_line=True))
    if row.get("error"):
        _say(f"error: {row['error']}")
    for message in row.get("transcript") or []:
        role = message.get("role", "?")
        if role == "system":
            continue  # Talos's own instructions: long, and the same for every task
        if message.get("content"):
            _say(f"\n[{role}] {message['content']}")
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            _say(f"[{role} calls {function.get('name')}] {function.get('arguments')}")
    return 0


def _store_command(args: argparse.Namespace) -> int:
    url = args.store or default_store_url()
    try:
        store = open_store(args.store)
    except StoreError as exc:
        raise store_error(url, exc) from None
    try:
        by_store = {
            "questions": _questions,
            "memory": _memory,
            "proposals": _proposals,
            "apply": _apply,
            "reject": _reject,
            "undo": _undo,
            "tasks": _tasks,
            "show": _show,
        }
        return by_store[args.command](store, args)
    except edits.ProposalError as exc:
        raise CliError("proposal", f"{exc}; talos proposals lists what is left to review") from None
    except SandboxError as exc:
        raise CliError("workspace", f"{exc}; check the path and --workspace") from None
    except StoreError as exc:
        raise store_error(store.url, exc) from None
    finally:
        with contextlib.suppress(StoreError):
            store.close()


def _settings(args: argparse.Namespace) -> Effective:
    """The config files, the environment and the flags, layered (talos_ls/config.py); a refused
    value is a usage error naming the file and the key."""
    from . import config as settings  # it loads the model client: only when needed

    given = getattr(args, "workspace", None)
    root = Path(given) if given is not None else find_root()
    try:
        effective = settings.load(root, settings.flags_from(args), os.environ)
    except settings.ConfigError as exc:
        raise CliError("config", "; ".join(exc.problems), USAGE) from None
    if args.command != "config":  # there, the warnings are part of the output
        for warning in effective.warnings:
            print(f"talos: warning: {visible(warning, single_line=True)}", file=sys.stderr)
    return effective


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "completion":
        print(completion.script(args.shell, _parser()), end="")
        return 0
    if args.command != "demo":  # the demo is scripted: it reads no setting
        from .config import apply_to, render

        effective = _settings(args)
        if args.command == "config":
            print(visible(render(effective, as_json=args.json)))
            return 0
        apply_to(args, effective)
    if args.command in ("run", "skills", "doctor", "demo", "permissions"):
        from . import commands  # the agent and the terminal load only when needed
        from .agent.sandbox import protect_this_process

        protect_this_process()
        return int(getattr(commands, args.command)(args))
    return _store_command(args)


def _stdout_gone() -> int:
    """stdout was closed early (`talos memory --json | head`): nothing more can be said there,
    and Python must not complain at exit when it flushes it."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 141  # 128 + SIGPIPE: what `set -o pipefail` sees of any tool cut off by `head`


def _exit_if_stuck() -> None:
    """After Ctrl-C, exit now if a thread would hold the exit up (one still blocked reading
    the terminal): everything was recorded and closed before this."""
    threads = threading.enumerate()
    if any(t is not threading.main_thread() and t.is_alive() and not t.daemon for t in threads):
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(INTERRUPTED)


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in words  # known before parsing: a usage error is JSON too
    verbose = "--verbose" in words or "-v" in words
    try:
        parser = _parser()
        args = parser.parse_args(words)
        if args.command is None:
            parser.print_help(sys.stderr)
            return USAGE
        try:
            setup_logging(args.verbose, args.log_file)
        except OSError as exc:
            why = exc.strerror or exc
            raise CliError(
                "usage",
                f"cannot write the log file {args.log_file}: {why}; give a writable path",
                USAGE,
            ) from None
        code = _dispatch(args)
        if code == INTERRUPTED:
            _exit_if_stuck()
        return code
    except TalosError as exc:
        try:
            return report(exc, as_json)
        except BrokenPipeError:
            return _stdout_gone()
    except BrokenPipeError:
        return _stdout_gone()
    except KeyboardInterrupt:
        print("\ntalos: interrupted", file=sys.stderr)
        return INTERRUPTED
    except Exception as exc:  # a bug
        if verbose:
            raise
        return report(exc, as_json)


if __name__ == "__main__":
    sys.exit(main())
