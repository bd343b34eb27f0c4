"""What the question queue and its producers share, in a leaf both import.

`question_queue` calls the producers (the contract spells them as `QuestionQueue` methods, and
the queue registers the disjunction producer's staleness check), and the producers write through
the queue. So the producers name the queue by the `Queue` protocol below, never by its class,
and the arrows run one way: question_queue -> producers -> question_types.
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..memory.facts import FactStore
    from ..memory.reconcile import Reconciler
    from ..store import Store

# fmt: off
DEFLECTION_PHRASES = frozenset(
    {
        "skip", "pass", "next",
        "not sure", "unsure", "no idea", "dunno", "i dont know", "dont know", "idk",
        "rather not say", "id rather not say", "id rather not", "prefer not to say", "no comment",
        "never mind", "nevermind",
        "ask me later", "later", "not now",
    }
)
# fmt: on

DISABLE_ENV = "TALOS_QUESTION_QUEUE_DISABLE"


def queue_enabled() -> bool:
    """The kill switch, read on every call: TALOS_QUESTION_QUEUE_DISABLE=1/true/yes/on."""
    return os.environ.get(DISABLE_ENV, "").strip().lower() not in ("1", "true", "yes", "on")


@dataclass
class QuestionCandidate:
    """One stored clarifying question, waiting for the gate, the budget and a relevant moment."""

    candidate_id: str
    agent_id: str
    question_text: str
    kind: str
    source_module: str
    target_keys: list[str] = field(default_factory=list)
    options: list[dict[str, Any]] = field(default_factory=list)
    ambiguity_signal: str = ""
    status: str = "pending"
    ask_count: int = 0
    created_turn: int = 0
    expires_turn: int = 0
    last_seen_turn: int = 0
    cooldown_until: int | None = None
    answer_option: int | None = None
    resolved_turn: int | None = None
    cue_tokens: list[str] = field(default_factory=list)
    delivered_turn: int | None = None
    disjunction_id: str | None = None


# One delivery or expiry pass's memo (None outside `next_question` / `expire_stale`):
# staleness checks that read a shared source (the producers') cache their reads in it, so each
# is read once per pass; a failed read is remembered too, so a broken source is asked once,
# not once per candidate.
PASS_MEMO: contextvars.ContextVar[dict | None] = contextvars.ContextVar(
    "talos_question_pass", default=None
)


class Queue(Protocol):
    """What the producers use of a `QuestionQueue`."""

    facts: FactStore
    reconciler: Reconciler
    store: Store
    ranking: str

    @property
    def propose(self) -> Callable[..., QuestionCandidate | None]: ...  # `QuestionQueue.propose`

    def candidates(self, agent_id: str) -> list[QuestionCandidate]: ...

    def expire(self, cand: QuestionCandidate, turn: int, reason: str | None = None) -> bool: ...
