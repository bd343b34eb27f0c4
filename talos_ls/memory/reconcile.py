"""Reconciliation: what happens when a new fact meets a live fact in the same slot.

- Same value: the claims corroborate. The fact of higher precedence (the older one on a tie)
  stays live and gets one "acted" observation; the other is superseded by it. Only a claim from
  another source (or another rules file) is evidence: a source repeating itself is "already
  held", with no observation (`FactStore.add` does not even store a literal repeat).
- Different value, different precedence: the higher source wins; the loser is superseded.
- Different value, same precedence: nobody can tell, so neither is dropped. A *disjoin*
  annotation is written to the journal, and the question queue turns it into one question.

An answer to that question is only evidence (confidence moves). The next `reconcile_pass` sees
when the evidence has separated the sides (winner >= 0.7, loser <= 0.3), retracts the disjoin
and supersedes the loser. A later contradiction of the winner, or the loser's claim made again,
reopens the conflict the same way. A fact that is retracted or superseded ends the disjoins it
was a side of (`FactStore`), so a forgotten fact is never one answer of a question.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..store import Store
from ..text import normalize_text
from .facts import Fact, FactStore

_SUBJECT = r"^(?P<s>[\w .'/-]{1,40}?)"
_SLOT_PATTERNS = (
    (re.compile(_SUBJECT + r"\s+(?:uses?|should use|must use)\s+(?P<v>.+)$", re.I), "use"),
    (re.compile(_SUBJECT + r"\s+(?:is|are)\s+(?P<v>.+)$", re.I), "is"),
    (re.compile(_SUBJECT + r"\s*:\s+(?P<v>.+)$"), "is"),
)
# A rule starting with these is an instruction, not a statement about a subject.
_IMPERATIVE = frozenset(
    {"always", "never", "please", "do", "dont", "don't", "use", "avoid", "prefer"}
)


def parse_slot(rule: str) -> tuple[str, str, str] | None:
    """(subject, attribute, value) for rules shaped like "tests use pytest", else None."""
    text = rule.strip().rstrip(".!").strip("*_` ")
    for pattern, attribute in _SLOT_PATTERNS:
        match = pattern.match(text)
        if match:
            subject, value = match.group("s").strip(), match.group("v").strip().strip("*_`")
            first = normalize_text(subject).split(" ")[0] if normalize_text(subject) else ""
            if first in _IMPERATIVE or not normalize_text(value):
                return None
            return subject, attribute, value
    return None


WINNER_AT_LEAST = 0.7
LOSER_AT_MOST = 0.3
# A statement quoted in a conflict question is cut here: the options carry the choice.
QUOTED_CHARS = 120


@dataclass(frozen=True)
class JournalEntry:
    """An annotation in the reconciliation journal. A disjoin's `target` is side A; its
    payload names side B (`other`), the `disjunction_id` and the slot."""

    id: str
    agent_id: str
    kind: str
    target: str
    payload: dict[str, Any] = field(default_factory=dict)
    captured_at: float = 0.0
    invalid_at: float | None = None


def _slot(fact: Fact) -> tuple[str, str] | None:
    if fact.subject is None or fact.attribute is None:
        return None
    return normalize_text(fact.subject), normalize_text(fact.attribute)


def _source(fact: Fact) -> str:
    """Where a fact comes from, as a person names it: "AGENTS.md", "you", "me"."""
    if fact.source == "rules file":
        return " ".join(fact.origin.split())[:80] if fact.origin else "a rules file"
    return {"person": "you", "model": "me", "workspace scan": "the code"}.get(fact.source, "a note")


def _one_line(statement: str) -> str:
    """A statement as a conflict quotes it: one line, cut to QUOTED_CHARS."""
    text = " ".join(statement.split())
    if len(text) > QUOTED_CHARS:
        text = text[: QUOTED_CHARS - 1].rstrip() + "\u2026"
    return text


def _said_by(fact: Fact) -> str:
    source = _source(fact)
    return {"you": "you told me", "me": "I noted", "the code": "the code shows"}.get(
        source, f"{source} says"
    )


class Reconciler:
    """Keeps an agent's facts consistent, and its unresolved conflicts on record."""

    def __init__(self, facts: FactStore) -> None:
        self.facts = facts
        self.store: Store = facts.store

    # -------------------------------------------------------------- journal
    def merge_log_entries(self, agent_id: str) -> list[JournalEntry]:
        """Live annotations, oldest first."""
        return [JournalEntry(**row) for row in self.store.journal_live(agent_id)]

    def retract(self, annotation: JournalEntry) -> bool:
        """Close an annotation: the conflict it recorded is over."""
        return self.store.journal_close(annotation.agent_id, annotation.id, time.time())

    def conflicts(self, agent_id: str) -> list[tuple[JournalEntry, Fact | None, Fact | None]]:
        """Live disjoins with both sides, each side still held. A disjoin with a side closed
        (left by an older version; `reconcile_pass` retracts it) is no conflict any more."""
        found: list[tuple[JournalEntry, Fact | None, Fact | None]] = []
        for entry in self.merge_log_entries(agent_id):
            if entry.kind != "disjoin":
                continue
            a, b = self.facts.get(entry.target), self.facts.get(entry.payload.get("other", ""))
            if a is not None and b is not None and a.live and b.live:
                found.append((entry, a, b))
        return found

    def _disjoin(self, a: Fact, b: Fact) -> None:
        for entry in self.merge_log_entries(a.agent_id):
            if entry.kind == "disjoin" and {entry.target, entry.payload.get("other")} == {
                a.key,
                b.key,
            }:
                return  # already on record
        self.store.journal_add(
            {
                "id": "j:" + uuid.uuid4().hex,
                "agent_id": a.agent_id,
                "kind": "disjoin",
                "target": a.key,
                "payload": {
                    "disjunction_id": uuid.uuid4().hex,
                    "other": b.key,
                    "slot": [a.subject, a.attribute],
                    "rationale": "same precedence, different values",
                },
                "captured_at": time.time(),
                "invalid_at": None,
            }
        )

    @staticmethod
    def conflict_question(a: Fact | None, b: Fact | None) -> str:
        """The question a conflict becomes, naming where each side comes from and quoting it, in
        the order of its options: `Two notes conflict: AGENTS.md says "Tests use unittest";
        CLAUDE.md says "Tests use pytest". Which is right?`. A person reads the claims and their
        sources, not a slot ("tests use"). Each is put on one line and cut to QUOTED_CHARS;
        nothing else is done to it: surfaces show question text through `display.visible`,
        and no markup is added here."""
        if a is None or b is None:
            return "I have two conflicting notes. Which is right?"
        quoted = [_one_line(a.statement), _one_line(b.statement)]
        where = [_said_by(a), _said_by(b)]
        if normalize_text(quoted[0]) != normalize_text(quoted[1]):
            sides = "; ".join(f'{w} "{q}"' for w, q in zip(where, quoted, strict=True))
            return f"Two notes conflict: {sides}. Which is right?"
        first, second = _source(a), _source(b)
        if first != second:  # alike in words: the sources and the options tell them apart
            return f"I have two conflicting notes (from {first} and {second}). Which is right?"
        return "I have two conflicting notes. Which is right?"

    @staticmethod
    def conflict_assumption(a: Fact, b: Fact) -> str:
        """What a task goes on while a conflict is unanswered, said so the person can correct
        it: the side with more support (its confidence), else the first; `Assumed CLAUDE.md's
        "Tests use pytest" (it has more support: 0.70 against 0.50), not AGENTS.md's "Tests
        use unittest": they conflict and nobody has said which is right.`"""
        taken, other = (b, a) if b.confidence > a.confidence else (a, b)
        if taken.confidence > other.confidence:
            why = f"it has more support: {taken.confidence:.2f} against {other.confidence:.2f}"
        else:
            why = "neither has more support: the first on record"

        def quoted(fact: Fact) -> str:
            source = _source(fact)
            owner = {"you": "your", "me": "my", "the code": "the code's"}.get(source, source + "'s")
            return f'{owner} "{_one_line(fact.statement)}"'

        return (
            f"Assumed {quoted(taken)} ({why}), not {quoted(other)}: they conflict and nobody "
            "has said which is right."
        )

    # ------------------------------------------------------------ reconcile
    def add(self, agent_id: str, statement: str, **attrs: Any) -> tuple[str, str]:
        """Hold a claim: `FactStore.add_once`, then `reconcile`. Returns (key, outcome); the
        outcome is "already held" (and the key the held fact's) when the same source already
        says it, so nothing was stored and no evidence moved."""
        key, stored = self.facts.add_once(agent_id, statement, **attrs)
        return key, (self.reconcile(key) if stored else "already held")

    def remember(
        self, agent_id: str, statement: str, source: str, slot: Mapping[str, str] | None = None
    ) -> tuple[str, str]:
        """What a person says to remember (`talos memory add`, `talos.memory.remember`): its
        slot as given, else read from the statement ("tests use pytest"), so it is reconciled
        with what else is held on that slot. ValueError for a slot given in part."""
        slot = dict(slot or {})
        if not slot and (parsed := parse_slot(statement)):
            slot = dict(zip(("subject", "attribute", "value"), parsed, strict=True))
        return self.add(agent_id, statement, source=source, **slot)

    def reconcile(self, key: str) -> str:
        """Compare a (new) fact with the live facts in its slot. Returns what happened:
        "no slot", "alone", "corroborated", "already held" (the same value from the same
        source: no evidence), "superseded", "won" or "disjoined"."""
        fact = self.facts.get(key)
        if fact is None or not fact.live:
            return "gone"
        slot = _slot(fact)
        if slot is None:
            return "no slot"
        others = [
            f
            for f in self.facts.list(fact.agent_id, include_closed=False)
            if f.key != fact.key and _slot(f) == slot
        ]
        if not others:
            return "alone"
        outcomes = set()
        for other in others:
            if not (fact := self.facts.get(key)) or not fact.live:
                break
            if normalize_text(other.value or "") == normalize_text(fact.value or ""):
                keep, drop = (fact, other) if fact.precedence > other.precedence else (other, fact)
                if (fact.source, fact.origin) == (other.source, other.origin):
                    self._supersede(drop, keep)  # a source repeating itself is not evidence
                    outcomes.add("already held")
                    continue
                self.facts.observe({keep.key: "acted"})
                self._supersede(drop, keep)
                outcomes.add("corroborated")
            elif fact.precedence != other.precedence:
                winner, loser = (
                    (fact, other) if fact.precedence > other.precedence else (other, fact)
                )
                self._supersede(loser, winner)
                outcomes.add("won" if winner.key == fact.key else "superseded")
            else:
                self._disjoin(fact, other)
                outcomes.add("disjoined")
        # The most telling outcome when the new fact met several others.
        telling = ("superseded", "disjoined", "won", "corroborated", "already held")
        return next((o for o in telling if o in outcomes), "gone")

    def _supersede(self, loser: Fact, winner: Fact) -> None:
        """Supersede; `FactStore.supersede` retracts the disjoins the loser was part of."""
        self.facts.supersede(loser.key, winner.key)

    def reconcile_pass(self, agent_id: str) -> int:
        """Resolve every live disjoin the evidence has separated: retract it and supersede the
        loser. Disjoins with a side already closed are retracted too. Returns how many."""
        resolved = 0
        for entry in self.merge_log_entries(agent_id):
            if entry.kind != "disjoin":
                continue
            a, b = self.facts.get(entry.target), self.facts.get(entry.payload.get("other", ""))
            if a is None or b is None or not a.live or not b.live:
                resolved += self.retract(entry)
                continue
            for winner, loser in ((a, b), (b, a)):
                if winner.confidence >= WINNER_AT_LEAST and loser.confidence <= LOSER_AT_MOST:
                    self._supersede(loser, winner)  # retracts this disjoin too
                    resolved += 1
                    break
        return resolved
