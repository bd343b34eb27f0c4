"""`FactStore`: the facts the agent holds, and the evidence that moves them.

A fact's confidence only changes through observations (`observe`), never by assignment, and its
validity interval only closes through `supersede`. So an answer to a question can strengthen or
weaken a fact but never silently replace it, and what replaced what stays on record.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..store import Store
from .confidence import ACTED_SIGNAL, CONTRADICTED_SIGNAL, EVIDENCE_CAP, PRIOR

OUTCOMES = ("acted", "contradicted", "dismissed", "deferred", "used")
# Only these outcomes are evidence about the fact; the others leave it bit-identical.
_SIGNALS = {"acted": ACTED_SIGNAL, "contradicted": CONTRADICTED_SIGNAL}
_ATTRS = ("valid_from",)


def _new_key() -> str:
    return "fact:" + uuid.uuid4().hex


@dataclass(frozen=True)
class Fact:
    key: str
    agent_id: str
    statement: str
    confidence: float
    evidence_count: int
    corroborations: int
    contradictions: int
    valid_from: float
    invalid_at: float | None
    superseded_by: str | None

    @property
    def live(self) -> bool:
        """Still valid: its interval has not been closed by a successor."""
        return self.invalid_at is None


class FactStore:
    """Facts on a store. Safe to share between threads. Storage failures raise StoreError:
    a fact the caller was told is stored is stored."""

    def __init__(self, store: Store, *, evidence_cap: int = EVIDENCE_CAP) -> None:
        if isinstance(evidence_cap, bool) or not isinstance(evidence_cap, int) or evidence_cap < 1:
            raise ValueError(f"evidence_cap must be an int >= 1, got {evidence_cap!r}")
        self.store = store
        self.evidence_cap = evidence_cap

    def add(self, agent_id: str, statement: str, **attrs: Any) -> str:
        """Store a new fact (confidence 0.5, no evidence) and return its key.

        attrs: `valid_from` (epoch seconds; default now)."""
        if not isinstance(agent_id, str) or not agent_id.strip():
            raise ValueError(f"agent_id must be a non-empty string, got {agent_id!r}")
        if not isinstance(statement, str) or not statement.strip():
            raise ValueError("statement must be a non-empty string")
        unknown = sorted(set(attrs) - set(_ATTRS))
        if unknown:
            raise ValueError(f"unknown fact attribute(s) {unknown}; known: {list(_ATTRS)}")
        valid_from = attrs.get("valid_from")
        if valid_from is None:
            valid_from = time.time()
        elif isinstance(valid_from, bool) or not isinstance(valid_from, int | float):
            raise ValueError(f"valid_from must be epoch seconds, got {valid_from!r}")
        key = _new_key()
        self.store.fact_insert(
            {
                "key": key,
                "agent_id": agent_id,
                "statement": statement.strip(),
                "confidence": PRIOR,
                "evidence_count": 0,
                "corroborations": 0,
                "contradictions": 0,
                "valid_from": float(valid_from),
                "invalid_at": None,
                "superseded_by": None,
            }
        )
        return key

    def get(self, key: str) -> Fact | None:
        row = self.store.fact_get(str(key))
        return None if row is None else Fact(**row)

    def list(self, agent_id: str | None = None, *, include_closed: bool = True) -> list[Fact]:
        facts = [Fact(**row) for row in self.store.fact_list(agent_id)]
        return facts if include_closed else [f for f in facts if f.live]

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
        return {k: Fact(**row) for k, row in rows.items()}

    def supersede(self, old: str, new: str) -> bool:
        """Close `old`'s validity interval now, naming `new` as its successor: the only way a
        fact stops being valid. Returns False when `old` was already closed."""
        if str(old) == str(new):
            raise ValueError("a fact cannot supersede itself")
        old_fact, new_fact = self.get(old), self.get(new)
        if old_fact is None:
            raise ValueError(f"unknown fact {old!r}")
        if new_fact is None:
            raise ValueError(f"unknown fact {new!r}")
        if old_fact.agent_id != new_fact.agent_id:
            raise ValueError("a fact can only be superseded by a fact of the same agent")
        return self.store.fact_supersede(old_fact.key, new_fact.key, time.time())
