"""`FactStore`: the facts the agent holds, and the evidence that moves them.

A fact's confidence only changes through observations (`observe`), never by assignment, and its
validity interval only closes through `supersede` (a successor replaces it) or `retract` (its
source withdrew it, as when a rule is deleted from a rules file). So an answer to a question can
strengthen or weaken a fact but never silently replace it, and what replaced what stays on record.

A fact may fill a *slot* (`subject`, `attribute`) with a `value`: "tests" / "use" / "pytest".
Two live facts in one slot with different values are a conflict for the reconciler. Every fact
has a `source`, and sources have a precedence: person > rules file > workspace scan > model.
"""

from __future__ import annotations

import builtins
import math
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..constants import SOURCES
from ..store import Store
from ..text import normalize_text
from .confidence import ACTED_SIGNAL, CONTRADICTED_SIGNAL, EVIDENCE_CAP, PRIOR
from .stemming import stemmed_tokens

OUTCOMES = ("acted", "contradicted", "dismissed", "deferred", "used")
# Only these outcomes are evidence about the fact; the others leave it bit-identical.
_SIGNALS = {"acted": ACTED_SIGNAL, "contradicted": CONTRADICTED_SIGNAL}
PRECEDENCE = {"person": 3, "rules file": 2, "workspace scan": 1, "model": 0}
_ATTRS = ("subject", "attribute", "value", "source", "origin", "valid_from", "key")
# BM25 parameters: the usual defaults for short documents.
_K1, _B = 1.2, 0.75


def _new_key() -> str:
    """Random, not time-ordered: people name facts by a short key prefix (`talos memory forget
    fact:1a2b3c4d`), which time-ordered keys made in the same minute would share. Search never
    reaches the key tie-break in practice: `valid_from` (sub-microsecond) orders first."""
    return "fact:" + uuid.uuid4().hex


@dataclass(frozen=True)
class Fact:
    key: str
    agent_id: str
    statement: str
    subject: str | None
    attribute: str | None
    value: str | None
    source: str
    origin: str | None
    confidence: float
    evidence_count: int
    corroborations: int
    contradictions: int
    valid_from: float
    invalid_at: float | None
    superseded_by: str | None

    @property
    def live(self) -> bool:
        """Still valid: its interval has not been closed."""
        return self.invalid_at is None

    @property
    def precedence(self) -> int:
        return PRECEDENCE.get(self.source, 0)


def _fact(row: Mapping[str, Any]) -> Fact:
    return Fact(**{**row, "source": row.get("source") or "model"})


def _optional_text(attrs: Mapping[str, Any], name: str) -> str | None:
    value = attrs.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} must be a non-empty string, got {value!r}")
    return value.strip()


class FactStore:
    """Facts on a store. Safe to share between threads. Storage failures raise StoreError:
    a fact the caller was told is stored is stored."""

    def __init__(self, store: Store, *, evidence_cap: int = EVIDENCE_CAP) -> None:
        if isinstance(evidence_cap, bool) or not isinstance(evidence_cap, int) or evidence_cap < 1:
            raise ValueError(f"evidence_cap must be an int >= 1, got {evidence_cap!r}")
        self.store = store
        self.evidence_cap = evidence_cap

    def add(self, agent_id: str, statement: str, **attrs: Any) -> str:
        """Store a new fact (confidence 0.5, no evidence) and return its key; when a live fact
        of the same source already says the same thing (`repeat_of`), return that fact's key
        and store nothing. `add_once` also tells which happened.

        attrs: `subject` and `attribute` (a slot: both or neither) with its `value`; `source`
        (one of SOURCES, default "model"); `origin` (where it came from, e.g. a rules file's
        path); `valid_from` (epoch seconds; default now); `key` (a deterministic key, so that
        two processes adding the same fact store it once: the second insert fails)."""
        return self.add_once(agent_id, statement, **attrs)[0]

    def add_once(self, agent_id: str, statement: str, **attrs: Any) -> tuple[str, bool]:
        """`add`, returning (key, stored). A source saying again what it already says is not a
        second observation (a person typing it twice, the model repeating itself thirty times):
        it adds no row and no evidence, so `stored` is False and the key is the held fact's.
        The check and the insert are two steps: two processes adding the same statement at the
        same moment may both store it, and the reconciler then merges them."""
        row = self._row(agent_id, statement, attrs)
        held = self._repeat(row)
        if held is not None:
            return held.key, False
        if "key" in attrs and (named := self.get(row["key"])) is not None and named.live:
            return named.key, False  # another process stored it during the scan
        self.store.fact_insert(row)
        return row["key"], True

    def repeat_of(self, agent_id: str, statement: str, **attrs: Any) -> Fact | None:
        """The live fact that `add(agent_id, statement, **attrs)` would find already held: same
        agent, source and origin, and the same normalized statement and slot, or the same slot
        and value. None when there is none. Raises ValueError on what `add` would reject."""
        return self._repeat(self._row(agent_id, statement, attrs))

    def _repeat(self, row: Mapping[str, Any]) -> Fact | None:
        def norm(*parts: str | None) -> tuple[str, ...]:
            return tuple(normalize_text(p or "") for p in parts)

        slot = norm(row["subject"], row["attribute"], row["value"])
        said = (normalize_text(row["statement"]), *slot)
        for fact in self.list(row["agent_id"], include_closed=False):
            if (fact.source, fact.origin) != (row["source"], row["origin"]):
                continue
            held_slot = norm(fact.subject, fact.attribute, fact.value)
            if (normalize_text(fact.statement), *held_slot) == said or (
                row["subject"] is not None and held_slot == slot
            ):
                return fact
        return None

    def _row(self, agent_id: str, statement: str, attrs: Mapping[str, Any]) -> dict[str, Any]:
        """The row `add` would insert, every argument checked."""
        if not isinstance(agent_id, str) or not agent_id.strip():
            raise ValueError(f"agent_id must be a non-empty string, got {agent_id!r}")
        if not isinstance(statement, str) or not statement.strip():
            raise ValueError("statement must be a non-empty string")
        unknown = sorted(set(attrs) - set(_ATTRS))
        if unknown:
            raise ValueError(f"unknown fact attribute(s) {unknown}; known: {list(_ATTRS)}")
        subject, attribute = _optional_text(attrs, "subject"), _optional_text(attrs, "attribute")
        value, origin = _optional_text(attrs, "value"), _optional_text(attrs, "origin")
        if (subject is None) != (attribute is None):
            missing = "attribute" if attribute is None else "subject"
            raise ValueError(f"a slot needs both subject and attribute; {missing} is missing")
        if subject is not None and value is None:
            raise ValueError("a fact with a slot needs a value")
        if subject is None and value is not None:
            raise ValueError("value needs a slot: give subject and attribute too")
        source = attrs.get("source", "model")
        if source not in SOURCES:
            raise ValueError(f"unknown source {source!r}; expected one of {SOURCES}")
        valid_from = attrs.get("valid_from")
        if valid_from is None:
            valid_from = time.time()
        elif isinstance(valid_from, bool) or not isinstance(valid_from, int | float):
            raise ValueError(f"valid_from must be epoch seconds, got {valid_from!r}")
        key = attrs.get("key") or _new_key()
        if not isinstance(key, str) or not key.startswith("fact:") or any(c.isspace() for c in key):
            raise ValueError(f"key must be a 'fact:...' string without spaces, got {key!r}")
        return {
            "key": key,
            "agent_id": agent_id,
            "statement": statement.strip(),
            "subject": subject,
            "attribute": attribute,
            "value": value,
            "source": source,
            "origin": origin,
            "confidence": PRIOR,
            "evidence_count": 0,
            "corroborations": 0,
            "contradictions": 0,
            "valid_from": float(valid_from),
            "invalid_at": None,
            "superseded_by": None,
        }

    def get(self, key: str) -> Fact | None:
        row = self.store.fact_get(str(key))
        return None if row is None else _fact(row)

    def named(self, key: str, agent_id: str | None = None) -> builtins.list[Fact]:
        """The facts `key` names, in `agent_id`'s memory when given: the one with that key,
        else every one whose key starts with it (a person types the start of a key a list
        showed). One fact is a match; the caller says what is wrong with none or several."""
        facts = [f for f in self.list(agent_id) if f.key.startswith(key)] if key else []
        exact = [f for f in facts if f.key == key]
        return exact or facts

    def list(self, agent_id: str | None = None, *, include_closed: bool = True) -> list[Fact]:
        facts = [_fact(row) for row in self.store.fact_list(agent_id)]
        return facts if include_closed else [f for f in facts if f.live]

    def search(
        self, agent_id: str, cues: str | Iterable[str], limit: int = 20
    ) -> builtins.list[Fact]:
        """Live facts relevant to `cues`, best first: BM25 over statements (words folded by
        `stemming.stem`, the stemmer the question queue's relevance timing uses too), weighted by
        confidence (x 0.5 for a fact at 0, x 1.5 at 1), then the more recent first. Facts that
        share no token with the cues are not returned."""
        query = stemmed_tokens(cues if isinstance(cues, str) else " ".join(map(str, cues)))
        if not query:
            return []
        facts = self.list(agent_id, include_closed=False)
        docs = [Counter(stemmed_tokens(f.statement)) for f in facts]
        if not docs:
            return []
        avg_len = sum(sum(d.values()) for d in docs) / len(docs) or 1.0
        df = Counter(tok for d in docs for tok in d)
        scored = []
        for fact, doc in zip(facts, docs, strict=True):
            length = sum(doc.values())
            bm25 = 0.0
            for tok in set(query):
                tf = doc.get(tok, 0)
                if tf:
                    idf = math.log(1 + (len(docs) - df[tok] + 0.5) / (df[tok] + 0.5))
                    bm25 += idf * tf * (_K1 + 1) / (tf + _K1 * (1 - _B + _B * length / avg_len))
            if bm25 > 0:
                scored.append((bm25 * (0.5 + fact.confidence), fact.valid_from, fact.key, fact))
        scored.sort(key=lambda s: (-s[0], -s[1], s[2]))
        return [s[3] for s in scored[:limit]]

    def observe(self, outcomes: Mapping[str, str], weight: int = 1) -> dict[str, Fact]:
        """Record how facts fared: each `acted` or `contradicted` outcome is `weight`
        observations (signal 0.9 / 0.1) of the capped-Bayesian rule, all in one atomic step.
        `dismissed`, `deferred` and `used` change nothing. Unknown keys are skipped.
        Returns the facts that changed, by key."""
        if not isinstance(outcomes, Mapping):
            raise ValueError("outcomes must be a mapping of fact key to outcome")
        bad = {k: v for k, v in outcomes.items() if v not in OUTCOMES}
        if bad:
            raise ValueError(f"unknown outcome(s) {bad}; expected one of {OUTCOMES}")
        if isinstance(weight, bool) or not isinstance(weight, int) or weight < 1:
            raise ValueError(f"weight must be an int >= 1, got {weight!r}")
        signals = {str(k): [_SIGNALS[v]] * weight for k, v in outcomes.items() if v in _SIGNALS}
        if not signals:
            return {}
        rows = self.store.fact_observe(signals, self.evidence_cap)
        return {k: _fact(row) for k, row in rows.items()}

    def supersede(self, old: str, new: str) -> bool:
        """Close `old`'s validity interval now, naming `new` as its successor, and end the
        conflicts `old` was a side of (`_end_conflicts`). Returns False when `old` was already
        closed."""
        if str(old) == str(new):
            raise ValueError("a fact cannot supersede itself")
        old_fact, new_fact = self.get(old), self.get(new)
        if old_fact is None:
            raise ValueError(f"unknown fact {old!r}")
        if new_fact is None:
            raise ValueError(f"unknown fact {new!r}")
        if old_fact.agent_id != new_fact.agent_id:
            raise ValueError("a fact can only be superseded by a fact of the same agent")
        closed = self.store.fact_close(old_fact.key, time.time(), new_fact.key)
        self._end_conflicts(old_fact)
        return closed

    def retract(self, key: str) -> bool:
        """Close a fact's interval with no successor: its source withdrew it (a rule deleted
        from its file, a person's "forget"); the conflicts it was a side of end with it.
        Returns False when it was already closed."""
        fact = self.get(key)
        if fact is None:
            raise ValueError(f"unknown fact {key!r}")
        closed = self.store.fact_close(fact.key, time.time(), None)
        self._end_conflicts(fact)
        return closed

    def _end_conflicts(self, fact: Fact) -> int:
        """Close every live disjoin in the reconciliation journal that names `fact` as a side:
        a fact no longer held cannot be one answer of a question, so the conflict is over (and
        the question queue expires the question built from it: its disjoin is gone). Done even
        when the fact was closed already, which repairs a conflict left open by an older
        version. Returns how many were closed."""
        ended, at = 0, time.time()
        for entry in self.store.journal_live(fact.agent_id):
            payload = entry.get("payload")
            other = payload.get("other") if isinstance(payload, dict) else None
            if entry.get("kind") == "disjoin" and fact.key in (entry.get("target"), other):
                ended += self.store.journal_close(fact.agent_id, entry["id"], at)
        return ended
