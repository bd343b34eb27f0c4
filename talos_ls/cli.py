"""`talos`: the command line.

`talos questions` and `talos memory` show what is in the store, for people who want to see why
they were, or were not, asked something: every candidate with its status, turns and ask count,
the turn each agent's question budget reopens, and every fact with its confidence and evidence.

Exit codes: 0 success, 1 the store failed or refused, 2 a usage error.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import asdict
from decimal import Decimal
from pathlib import Path
from typing import Any

from . import __version__
from .agent.workspace import SandboxError, Workspace
from .display import visible
from .edits import proposals as edits
from .gates.permissions import MODES
from .gates.question_queue import QUESTION_BUDGET_TURNS, QuestionCandidate
from .memory.facts import SOURCES, Fact, FactStore
from .memory.reconcile import Reconciler
from .memory.rules import parse_slot
from .redact import redact_logs
from .store import ENV_URL, Store, StoreError, open_store

OPEN = ("pending", "delivered", "cooled")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    listing = argparse.ArgumentParser(add_help=False)
    listing.add_argument("--agent", metavar="A", help="only this agent (default: every agent)")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")

    q = sub.add_parser(
        "questions",
        parents=[listing],
        help="list question candidates and each agent's question budget",
        description="List question candidates: open ones (pending, delivered, cooled) by "
        "default, every status with --all. Each agent's line says when its budget reopens.",
    )
    q.add_argument("--all", action="store_true", help="include answered and expired ones")
    q.add_argument("--budget-turns", type=int, default=QUESTION_BUDGET_TURNS, metavar="K",
                   help=f"the K the agents run with (default {QUESTION_BUDGET_TURNS})")  # fmt: skip
    m = sub.add_parser(
        "memory",
        parents=[listing],
        help="list, add and forget facts; show conflicts",
        description="Without an action: list facts with confidence, evidence counts "
        "(corroborations and contradictions), source, and whether each is still valid.",
    )
    actions = m.add_subparsers(dest="action", metavar="ACTION")
    # Sub-actions leave --agent/--json alone unless given, so `talos memory --agent A` works.
    late = argparse.ArgumentParser(add_help=False)
    late.add_argument("--agent", metavar="A", default=argparse.SUPPRESS,
                      help="the agent (default for add: this directory's workspace)")  # fmt: skip
    late.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                      help="print JSON instead of text")  # fmt: skip
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
        "forget", help="retract a fact", description="Retract a fact (its key, or the "
        "shortened key `talos memory` shows, if unambiguous)."
    )  # fmt: skip
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
    r.add_argument("request", help="what to do, in your words")
    r.add_argument("--workspace", default=".", metavar="DIR", help="default: this directory")
    r.add_argument("--model", default=os.environ.get("TALOS_MODEL", "gpt-4.1-mini"),
                   help="model name (default: $TALOS_MODEL, else gpt-4.1-mini)")  # fmt: skip
    r.add_argument("--base-url", help="an OpenAI-compatible endpoint, e.g. http://localhost:"
                   "11434/v1 for Ollama (default: $OPENAI_BASE_URL, else OpenAI)")  # fmt: skip
    r.add_argument("--api-key-env", default="OPENAI_API_KEY", metavar="VAR",
                   help="the variable holding the key (default OPENAI_API_KEY)")  # fmt: skip
    r.add_argument("--mode", default="ask", choices=MODES, help="permission mode (default ask)")
    r.add_argument("--apply", action="store_true", help="apply proposals without asking")
    r.add_argument("--max-cost", type=_usd, metavar="USD", help="stop the task at this cost "
                   "(a model without a price needs --max-tokens instead)")  # fmt: skip
    r.add_argument("--max-tokens", type=_count, metavar="N",
                   help="stop the task after this many tokens in and out")  # fmt: skip
    r.add_argument("--max-steps", type=_count, default=50,
                   help="stop after this many model calls")  # fmt: skip
    r.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    sk = sub.add_parser("skills", help="list the skills the agent can load",
                        description="Skills from the package, the user config directory and "
                        "the workspace's .talos/skills/ (a later one of a name wins).")  # fmt: skip
    sk.add_argument("--workspace", default=".", metavar="DIR")
    doc = sub.add_parser("doctor", help="check the configuration and say what to fix",
                         description="Check the store, the model endpoint and key, and the "
                         "editor clients. Exit code 1 when something needs fixing.")  # fmt: skip
    doc.add_argument("--workspace", default=".", metavar="DIR")
    doc.add_argument("--base-url")
    doc.add_argument("--api-key-env", default="OPENAI_API_KEY", metavar="VAR")
    perm = sub.add_parser("permissions", help="where the permission rules come from; trust the "
                          "workspace's own rules file",
                          description="Show the permission rules in force and where each comes "
                          "from. A workspace's .talos/permissions.json came with the repository: "
                          "until you trust its exact content, only its deny and ask rules "
                          "apply.")  # fmt: skip
    perm.add_argument("--workspace", default=".", metavar="DIR")
    perm.add_argument(
        "--trust",
        action="store_true",
        help="trust the workspace's .talos/permissions.json as it is now",
    )
    pr = sub.add_parser("proposals", help="the proposed edits waiting for review",
                        description="Proposals Talos made in this workspace (in any editor or "
                        "terminal) that are still to review: pending, partly applied or stale "
                        "(--all: every one).")  # fmt: skip
    pr.add_argument("--workspace", default=".", metavar="DIR")
    pr.add_argument("--all", action="store_true", help="include applied, rejected, undone")
    pr.add_argument("--diff", action="store_true", help="show each one's diff")
    pr.add_argument("--json", action="store_true", help="print JSON")
    ap = sub.add_parser("apply", help="apply a proposal (or some of its hunks)",
                        description="Write a proposal into its file, refused when the file "
                        "changed since the proposal was made (it is stale). Exit code 1 when "
                        "it was not applied.")  # fmt: skip
    ap.add_argument("id")
    ap.add_argument("--hunk", type=_count, action="append", metavar="N",
                    help="only hunk N (1 is the first; repeat for more)")  # fmt: skip
    ap.add_argument("--workspace", default=".", metavar="DIR")
    rj = sub.add_parser("reject", help="reject a proposal", description="Reject a proposal.")
    rj.add_argument("id")
    rj.add_argument("--workspace", default=".", metavar="DIR")
    ud = sub.add_parser("undo", help="undo the last applied proposal",
                        description="Put back the file a proposal changed (the last applied "
                        "one, or ID), if the file is still as the proposal left it.")  # fmt: skip
    ud.add_argument("id", nargs="?")
    ud.add_argument("--workspace", default=".", metavar="DIR")
    sub.add_parser("demo", help="a complete scripted session: no API key, no network",
                   description="Two turns of a real Talos session in a temporary workspace, "
                   "with a scripted model and scripted replies, labelled as such.")  # fmt: skip
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


def _table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], last_flexible: bool = True
) -> str:
    rows = [[visible(cell, single_line=True) for cell in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row[:-1] if last_flexible else row):
            widths[i] = max(widths[i], len(cell))
    room = shutil.get_terminal_size((120, 24)).columns - sum(widths[:-1]) - 2 * (len(headers) - 1)
    lines = []
    for row in [headers, *rows]:
        cells = list(row)
        if last_flexible and sys.stdout.isatty():  # piped output keeps the whole text
            cells[-1] = _clip(cells[-1], max(room, 20))
        lines.append("  ".join(c.ljust(w) for c, w in zip(cells[:-1], widths, strict=False))
                     + "  " + cells[-1])  # fmt: skip
    return "\n".join(line.rstrip() for line in lines)


def _say(text: str, **kwargs: Any) -> None:
    """Print text that may hold the workspace's or the model's words (a rule, a question), with
    control characters made visible."""
    print(visible(text), **kwargs)


def _opt(value: int | None) -> str:
    return "-" if value is None else str(value)


def _answer_label(c: QuestionCandidate) -> str:
    if c.answer_option is None or not 0 <= c.answer_option < len(c.options):
        return ""
    return f" [answered: {c.options[c.answer_option]['label']}]"


def _questions(store: Store, args: argparse.Namespace) -> int:
    agents = store.qq_agents()
    if args.agent is not None:
        agents = {args.agent: agents.get(args.agent)}
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
                "candidates": [asdict(c) for c in shown],
            }
        )
    if args.json:
        print(json.dumps(out, ensure_ascii=False, indent=2))
        return 0
    if not out:
        _say(f"No questions in {store.url}: nothing has been proposed yet.")
        return 0
    for i, entry in enumerate(out):
        last = entry["last_delivery_turn"]
        budget = (
            "no question asked yet; the budget is open"
            if last is None
            else f"last question at turn {last}; budget reopens at turn "
            f"{entry['budget_reopens_at_turn']}"
        )
        _say(("\n" if i else "") + f"agent {entry['agent']}: {budget}")
        rows = []
        for raw in entry["candidates"]:
            c = QuestionCandidate(**raw)
            cooldown = f" until {c.cooldown_until}" if c.status == "cooled" else ""
            rows.append(
                (
                    c.candidate_id[:8],
                    c.status + cooldown,
                    c.kind,
                    str(c.ask_count),
                    str(c.created_turn),
                    str(c.last_seen_turn),
                    str(c.expires_turn),
                    _opt(c.delivered_turn),
                    c.question_text + _answer_label(c),
                )
            )
        if rows:
            headers = ("ID", "STATUS", "KIND", "ASKED", "CREATED", "SEEN", "EXPIRES", "DELIVERED",
                       "QUESTION")  # fmt: skip
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
    facts = FactStore(store).list(args.agent)
    if args.json:
        print(json.dumps([asdict(f) for f in facts], ensure_ascii=False, indent=2))
        return 0
    if not facts:
        _say(f"No facts in {store.url}" + (f" for agent {args.agent}." if args.agent else "."))
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


def workspace_agent() -> str:
    """The agent of the workspace Talos is run in: its directory, resolved."""
    return str(Path.cwd().resolve())


_OUTCOMES = {
    "no slot": "it has no slot (subject, attribute), so nothing can conflict with it",
    "alone": "nothing else is held about {slot}",
    "corroborated": "it agrees with what was already held about {slot}; the two are merged",
    "won": "it replaces what a lower-precedence source said about {slot}",
    "superseded": "a higher-precedence source says otherwise about {slot}; it is kept as history",
    "disjoined": "it conflicts with another fact about {slot} of the same precedence; Talos will "
    "ask which is right when it is relevant (talos memory conflicts)",
}


def _memory_add(store: Store, args: argparse.Namespace) -> int:
    facts = FactStore(store)
    agent = getattr(args, "agent", None) or workspace_agent()
    slot = {k: getattr(args, k) for k in ("subject", "attribute", "value") if getattr(args, k)}
    if not slot and (parsed := parse_slot(args.statement)):
        slot = dict(zip(("subject", "attribute", "value"), parsed, strict=True))
    try:
        key = facts.add(agent, args.statement, source=args.source, **slot)
    except ValueError as exc:
        _say(f"talos: error: {exc}", file=sys.stderr)
        return 2
    outcome = Reconciler(facts).reconcile(key)
    where = f"'{slot['subject']} {slot['attribute']}'" if slot else ""
    _say(f"stored {key} for agent {agent}: " + _OUTCOMES.get(outcome, outcome).format(slot=where))
    return 0


def _memory_forget(store: Store, args: argparse.Namespace) -> int:
    facts = FactStore(store)
    matches = [f for f in facts.list() if f.key == args.key or f.key.startswith(args.key)]
    exact = [f for f in matches if f.key == args.key]
    if exact:
        matches = exact
    if len(matches) != 1:
        problem = "no fact has" if not matches else f"{len(matches)} facts have"
        _say(f"talos: error: {problem} the key {args.key!r}", file=sys.stderr)
        return 1
    fact = matches[0]
    if facts.retract(fact.key):
        _say(f"retracted {fact.key}: {fact.statement}")
    else:
        _say(f"{fact.key} was already closed ({_fact_state(fact)})")
    return 0


def _memory_conflicts(store: Store, args: argparse.Namespace) -> int:
    facts = FactStore(store)
    reconciler = Reconciler(facts)
    agent = getattr(args, "agent", None)
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
        print(json.dumps(out, ensure_ascii=False, indent=2))
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
    workspace = Workspace(args.workspace)
    book = edits.ProposalBook(store, str(workspace.root))
    book.load()
    return book, workspace


def _on_disk(workspace: Workspace, path: str) -> str:
    return workspace.read_text(path) if workspace.resolve(path, write=True).exists() else ""


def _proposals(store: Store, args: argparse.Namespace) -> int:
    book, _ = _book(store, args)
    shown = [p for p in book.list() if args.all or p.status in (*edits.OPEN, "stale")]
    if args.json:
        print(json.dumps([{"id": p.id, "path": p.path, "status": p.status, "task": p.task_id,
                           "hunks": len(p.hunks), "diff": p.diff()} for p in shown],
                         indent=2, ensure_ascii=False))  # fmt: skip
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
    proposal = book.get(args.id)
    hunks = None if not args.hunk else [n - 1 for n in args.hunk]
    new_text = book.apply(proposal.id, _on_disk(workspace, proposal.path), hunks)
    before = book.applied(proposal.id, new_text, hunks)  # claimed: nobody else applies it
    try:
        workspace.write_text(proposal.path, new_text)
    except OSError:
        book.revert(proposal.id, before)
        raise
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
    if args.id is None:
        done = [p for p in book.list() if p.undo_text is not None and p.status != "undone"]
        if not done:
            raise edits.ProposalError("nothing to undo: no proposal has been applied")
        args.id = done[-1].id
    proposal = book.get(args.id)
    before = {"status": proposal.status}
    text = book.undo(proposal.id, _on_disk(workspace, proposal.path))
    try:
        workspace.write_text(proposal.path, text)
    except OSError:
        book.revert(proposal.id, before)
        raise
    _say(f"undid {proposal.id}: {proposal.path} is back as it was")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, format="talos: %(levelname)s: %(message)s")
    redact_logs()
    if args.command in ("run", "skills", "doctor", "demo", "permissions"):
        from . import commands  # the agent and the terminal load only when needed
        from .agent.sandbox import protect_this_process

        protect_this_process()

        return getattr(commands, args.command)(args)
    try:
        store = open_store(args.store)
    except StoreError as exc:
        _say(f"talos: error: {exc}", file=sys.stderr)
        return 1
    try:
        by_store = {"questions": _questions, "memory": _memory, "proposals": _proposals,
                    "apply": _apply, "reject": _reject, "undo": _undo}  # fmt: skip
        return by_store[args.command](store, args)
    except (edits.ProposalError, SandboxError) as exc:
        _say(f"talos: error: {exc}", file=sys.stderr)
        return 1
    except StoreError as exc:
        _say(f"talos: error: {exc}", file=sys.stderr)
        return 1
    finally:
        store.close()


if __name__ == "__main__":
    sys.exit(main())
