"""Rules files: what the person wrote down for agents, held as facts.

`AGENTS.md`, `CLAUDE.md` and `.talos/rules.md` in the workspace root are read line by line: each
list item or plain sentence outside code blocks and headings is a rule, stored as a fact with
source "rules file" and the file as its origin. A rule of a recognisable shape gets a slot, so
it can conflict with other facts: "<subject> use(s) <value>", "<subject> is/are <value>",
"<subject>: <value>". `sync` is cheap when nothing changed (a stat per file); when a file
changed, new rules are added and reconciled, and rules no longer in the file are retracted.

A rule that was superseded (merged into the same rule of another file, outweighed by the
person, or settled by an answer) stays history while its line stays in the file: editing any
rules file does not make it a new claim, which would count it as evidence again or reopen a
conflict the person already settled. It is a claim again when its line is written anew (absent
at the previous sync of this process) or when what superseded it is no longer held.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from ..files import read_regular
from ..store import StoreError
from ..text import normalize_text
from .facts import Fact, FactStore
from .reconcile import Reconciler, parse_slot

RULES_FILES = ("AGENTS.md", "CLAUDE.md", ".talos/rules.md")
MAX_RULES_BYTES = 256 * 1024
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")


def parse_rules(text: str) -> list[str]:
    """The rules in a rules file: list items and sentences, not headings or code."""
    rules, in_code = [], False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            in_code = not in_code
            continue
        if in_code or not stripped or stripped.startswith(("#", ">", "<!--", "|")):
            continue
        rule = _BULLET.sub("", stripped).strip()
        if normalize_text(rule):
            rules.append(rule)
    return list(dict.fromkeys(rules))


@dataclass
class SyncResult:
    added: list[str] = field(default_factory=list)
    retracted: list[str] = field(default_factory=list)


class RulesFiles:
    """Keeps an agent's "rules file" facts in step with the files in a workspace."""

    def __init__(self, facts: FactStore, reconciler: Reconciler | None = None) -> None:
        self.facts = facts
        self.reconciler = reconciler or Reconciler(facts)
        self._seen: dict[tuple[str, Path], tuple] = {}
        self._wanted: dict[tuple[str, Path], frozenset[tuple[str, str]]] = {}
        # One sync at a time: two turns starting together would both insert the same rule, and
        # a failed insert is a store error a daemon's health check counts as a fault.
        self._lock = threading.Lock()

    def _stamp(self, root: Path) -> tuple:
        stamp: list[tuple[str, int | None, int | None]] = []
        for name in RULES_FILES:
            try:
                st = (root / name).stat()
                stamp.append((name, st.st_mtime_ns, st.st_size))
            except OSError:
                stamp.append((name, None, None))
        return tuple(stamp)

    def sync(self, agent_id: str, root: str | os.PathLike[str]) -> SyncResult:
        """Bring the facts in line with the files; nothing to do when no file changed. Syncs
        through one RulesFiles run one at a time."""
        with self._lock:
            return self._sync(agent_id, Path(root).resolve())

    def _sync(self, agent_id: str, root: Path) -> SyncResult:
        stamp = self._stamp(root)
        if self._seen.get((agent_id, root)) == stamp:
            return SyncResult()
        wanted: dict[tuple[str, str], str] = {}
        for name in RULES_FILES:
            path = root / name
            if not path.resolve().is_relative_to(root):
                continue  # a link out of the workspace is not the workspace's rules
            try:
                text = read_regular(path, MAX_RULES_BYTES).decode("utf-8", errors="replace")
            except OSError:  # absent, too large, or a FIFO or device: never waited on
                continue
            for rule in parse_rules(text):
                wanted.setdefault((name, normalize_text(rule)), rule)
        result = SyncResult()
        held: dict[tuple[str, str], Fact] = {}
        history: dict[tuple[str, str], Fact] = {}
        for f in self.facts.list(agent_id):
            if f.source == "rules file" and f.origin in RULES_FILES:
                ident = (f.origin, normalize_text(f.statement))
                if f.live:
                    held[ident] = f
                elif f.superseded_by:
                    history[ident] = f
        before = self._wanted.get((agent_id, root))
        for ident, fact in held.items():
            if ident not in wanted and self.facts.retract(fact.key):
                result.retracted.append(fact.key)
        for (origin, norm), rule in wanted.items():
            if (origin, norm) in held:
                continue
            old = history.get((origin, norm))
            unchanged = before is None or (origin, norm) in before
            if old is not None and unchanged and self._outlived(old):
                continue  # the same line, still superseded: history, not a new claim
            slot = parse_slot(rule)
            attrs = {}
            if slot:
                attrs = dict(zip(("subject", "attribute", "value"), slot, strict=True))
            # The same key in every daemon syncing this workspace: one insert wins.
            key = (
                "fact:rule-"
                + hashlib.sha1(f"{agent_id}\0{origin}\0{norm}".encode()).hexdigest()[:24]
            )
            existing = self.facts.get(key)
            if existing is not None and existing.live:
                continue  # another daemon added it a moment ago
            if existing is not None:  # the rule was removed once and is back
                key = f"{key}-{uuid.uuid4().hex[:8]}"
            try:
                key, stored = self.facts.add_once(
                    agent_id, rule, source="rules file", origin=origin, key=key, **attrs
                )
            except StoreError:
                if self.facts.get(key) is not None:
                    continue  # lost the race to another daemon: its fact stands
                raise
            if not stored:
                continue  # the file says it already, in other words (the same slot and value)
            self.reconciler.reconcile(key)
            result.added.append(key)
        self._seen[(agent_id, root)] = stamp
        self._wanted[(agent_id, root)] = frozenset(wanted)
        return result

    def _outlived(self, fact: Fact) -> bool:
        """Whether what superseded `fact` (following the chain of successors) is still held."""
        seen = {fact.key}
        successor = self.facts.get(fact.superseded_by) if fact.superseded_by else None
        while successor is not None and successor.key not in seen:
            if successor.live:
                return True
            seen.add(successor.key)
            nxt = successor.superseded_by
            successor = self.facts.get(nxt) if nxt else None
        return False
