"""The capped-Bayesian confidence update, as a pure function.

While fewer than `cap` observations have been seen this is the exact running mean over the
prior and every signal (gains 1/2, 1/3, ...), so order does not matter; from then on the gain is
frozen at 1/(cap + 1), so old evidence is forgotten exponentially and a new contradiction still
moves a well-established fact. That is what makes an answer "evidence, never an overwrite".

Backends apply this same arithmetic inside their atomic step (an SQL expression, a Lua script);
the contract tests hold every backend to this function.
"""

from __future__ import annotations

from typing import NamedTuple

PRIOR = 0.5
EVIDENCE_CAP = 20
ACTED_SIGNAL = 0.9
CONTRADICTED_SIGNAL = 0.1


class Evidence(NamedTuple):
    confidence: float = PRIOR
    evidence_count: int = 0
    corroborations: int = 0
    contradictions: int = 0


def update(confidence: float, evidence_count: int, signal: float, cap: int = EVIDENCE_CAP) -> float:
    """`clamp01(c + (s - c) / (min(n + 1, cap) + 1))`."""
    if not 0.0 <= signal <= 1.0:
        raise ValueError(f"signal must be within [0, 1], got {signal!r}")
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
        raise ValueError(f"cap must be an int >= 1, got {cap!r}")
    # Division, not multiplication by a gain: backends use the same expression, bit for bit.
    divisor = min(evidence_count + 1, cap) + 1
    return max(0.0, min(1.0, confidence + (signal - confidence) / divisor))


def observe(evidence: Evidence, signal: float, cap: int = EVIDENCE_CAP) -> Evidence:
    """One observation: the new confidence, one more piece of evidence, and one more
    corroboration (signal >= 0.5) or contradiction."""
    corroborates = signal >= 0.5
    return Evidence(
        update(evidence.confidence, evidence.evidence_count, signal, cap),
        evidence.evidence_count + 1,
        evidence.corroborations + corroborates,
        evidence.contradictions + (not corroborates),
    )
