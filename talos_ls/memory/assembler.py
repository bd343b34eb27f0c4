"""`ContextAssembler`: which facts go into the agent's context for a request, and when to refuse.

Facts are ranked by `FactStore.search` (relevance, confidence, recency) and taken while they fit
the token budget. With a confidence gate configured, the top-ranked fact is the judge: if its
confidence is below the threshold the assembly is *gated*. In `refuse` mode the facts are then
withheld (the agent works without them and the question queue may ask to confirm the top one);
in `flag` mode they are injected, marked. The `gate` metadata has exactly the reference's shape:
applied, gate_score, threshold, mode, gated, and refused_keys only when applied and gated.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .facts import Fact, FactStore

MODES = ("refuse", "flag")


def estimate_tokens(text: str) -> int:
    """About four characters a token: close enough to budget context, no tokenizer needed."""
    return len(text) // 4 + 1


@dataclass
class AssemblyResult:
    records: list[Fact] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def keys(self) -> list[str]:
        """The keys of the injected facts: what the host reports with `note_use`."""
        return [f.key for f in self.records]


class ContextAssembler:
    def __init__(
        self,
        facts: FactStore,
        confidence_gate_threshold: float | None = None,
        confidence_gate_mode: str = "refuse",
        sources: Iterable[str] | None = None,
    ) -> None:
        if confidence_gate_mode not in MODES:
            raise ValueError(
                f"confidence_gate_mode must be one of {MODES}, got {confidence_gate_mode!r}"
            )
        if confidence_gate_threshold is not None and (
            isinstance(confidence_gate_threshold, bool)
            or not isinstance(confidence_gate_threshold, int | float)
            or not 0.0 <= confidence_gate_threshold <= 1.0
        ):
            raise ValueError(
                "confidence_gate_threshold must be a number in [0, 1] or None, "
                f"got {confidence_gate_threshold!r}"
            )
        self.facts = facts
        self.threshold = confidence_gate_threshold
        self.mode = confidence_gate_mode
        # Only facts from these sources are assembled (None: all). The host leaves out rules
        # files: the system prompt carries them whole, and nobody should be asked to confirm
        # what they wrote down themselves.
        self.sources = None if sources is None else frozenset(sources)

    def assemble(
        self, agent_id: str, query_cues: str | Iterable[str] | None, token_budget: int = 2000
    ) -> AssemblyResult:
        """The facts to inject for this request, and the gate's verdict in `metadata`."""
        if isinstance(token_budget, bool) or not isinstance(token_budget, int) or token_budget < 0:
            raise ValueError(f"token_budget must be an int >= 0, got {token_budget!r}")
        pulled: list[Fact] = []
        if query_cues is not None:
            used = 0
            for fact in self.facts.search(agent_id, query_cues):
                if self.sources is not None and fact.source not in self.sources:
                    continue
                cost = estimate_tokens(fact.statement)
                if used + cost > token_budget:
                    break
                pulled.append(fact)
                used += cost
        metadata: dict[str, Any] = {}
        records = pulled
        if self.threshold is not None:
            gate: dict[str, Any] = {
                "applied": False,
                "gate_score": None,
                "threshold": self.threshold,
                "mode": self.mode,
                "gated": False,
            }
            if pulled:
                score = pulled[0].confidence
                gated = score < self.threshold
                gate.update(applied=True, gate_score=score, gated=gated)
                if gated:
                    gate["refused_keys"] = [f.key for f in pulled]
                    if self.mode == "refuse":
                        records = []
            metadata["gate"] = gate
        return AssemblyResult(records=records, metadata=metadata)
