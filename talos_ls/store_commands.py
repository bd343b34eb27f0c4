"""The commands that read and change what the store holds: `talos questions`, `memory`,
`proposals`, `apply`, `reject`, `undo`, `rewind`, `tasks` and `show`. `cli.py` parses the
command line and loads this module only for one of them.

`talos questions` and `talos memory` show what is in the store, for people who want to see why
they were, or were not, asked something: every candidate with its status, turns and ask count,
the turn each agent's question budget reopens, and every fact with its confidence and evidence.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .agent.workspace import SandboxError, Workspace
from .cli_report import USAGE, CliError, store_error
from .display import visible
from .edits import apply
from .edits import proposals as edits
from .edits.apply import DiskFiles
from .gates.question_queue import QuestionCandidate
from .memory.facts import Fact, FactStore
from .memory.reconcile import Reconciler
from .project import agent_id, chosen
from .store import Store, StoreError, default_store_url, open_store

OPEN = ("pending", "delivered", "cooled")


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


def _rewind(store: Store, args: argparse.Namespace) -> int:
    """Every file the task changed put back as it was before it, newest change first; a file
    the person changed since is left, named with why (exit code 1)."""
    task_id = _find_task(store, args)["id"]
    book, workspace = _book(store, args)
    try:
        done = asyncio.run(apply.rewind(book, DiskFiles(workspace), task_id))
    except edits.ProposalError as exc:
        raise CliError("proposal", f"{exc}; talos tasks lists the workspace's tasks") from None
    if args.json:
        _print_json(done.as_json())
    else:
        _say(done.message())
    return 1 if done.left else 0


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
    matches = exact or [r for r in rows if args.task and r["id"].startswith(args.task)]
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


def run(args: argparse.Namespace) -> int:
    """The command `args.command` on the store `--store` names (opened, then closed)."""
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
            "rewind": _rewind,
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
