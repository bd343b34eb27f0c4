"""The rationed clarifying-question channel.

Every part of Talos that is unsure of something (two facts that conflict, a fact too weak to
use, an ambiguous reference in a request) writes a `QuestionCandidate` with `propose` instead of
asking. Once per turn the host asks `next_question` whether anything is worth asking now. Five
rules hold throughout:

1. Turns are supplied by the host; nothing here counts them.
2. The value-of-information gate is a deterministic boolean (`passes_voi_gate`): a known
   ambiguity signal, and the question's facts were used within the last few turns.
3. The budget is structural: at most one delivery per K turns per agent, granted in the same
   atomic step that claims the candidate, stored (never an in-process counter), never rewound.
4. Answers are evidence, never overwrites: an answer is W observations on the facts its option
   names, through `FactStore.observe`. Silence, dismissal and deflection are never answers.
5. Fail closed: a storage error makes a call return None / 0 / a non-applied result and log;
   only producer bugs (bad kinds, signals, options) raise ValueError.

The person's free-text reply is classified and dropped: it is never stored and never logged.
Question texts can echo workspace content, so they are not logged either.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..constants import QUESTION_BUDGET_TURNS
from ..memory.facts import FactStore
from ..memory.ids import time_ordered_hex
from ..memory.reconcile import Reconciler
from ..memory.stemming import stem
from ..store import Store
from ..store.base import ANSWERABLE_STATUSES
from ..text import cue_tokens_for, normalize_text
from . import producers, question_value
from .question_types import DEFLECTION_PHRASES, PASS_MEMO, QuestionCandidate, queue_enabled

logger = logging.getLogger(__name__)

QUESTION_EXPIRY_TURNS = 20
QUESTION_RECENT_USE_TURNS = 5
QUESTION_COOLDOWN_TURNS = 10
QUESTION_ANSWER_WEIGHT = 3
QUESTION_RETENTION_TURNS = 500
# The confidence gate's threshold the live-uncertainty gate compares a weak fact with (the
# host's `confidence_gate` default): a fact at or above it is no longer withheld, so there is
# nothing left to confirm.
QUESTION_GATE_THRESHOLD = 0.5

KINDS = ("disjunction", "confirmation", "referent")
AMBIGUITY_SIGNALS = ("disjunction", "gate_refusal", "evidence_gap")
STATUSES = ("pending", "delivered", "answered", "cooled", "expired")

ANSWERED = "answered"
DEFLECTED = "deflected"
UNRECOGNIZED = "unrecognized"

# How many eligible candidates one next_question pass looks at, by impact order. Staleness checks
# run on those ahead of the first candidate of a kind without checks; the rest wait their turn.
_ELIGIBLE_LIMIT = 16


@dataclass
class AnswerResult:
    """What `record_answer` did. `reason`: applied, cooled (deflected or unrecognized: no
    evidence), not_open (nothing to answer any more), apply_failed (claimed, evidence lost, never
    double-counted), disabled (kill switch) or error (storage failed before the claim)."""

    applied: bool
    reason: str
    classification: str | None = None
    option_index: int | None = None


StalenessCheck = Callable[[QuestionCandidate, int], bool]


def _new_candidate_id() -> str:
    """Time-ordered (`memory.ids`): every impact-order tie ends in the candidate id, so
    candidates proposed in the same turn are asked in the order they were proposed, on both
    backends, and a replayed session asks the same questions."""
    return time_ordered_hex()


def _relevance_cues(*texts: str) -> list[str]:
    """The cue words relevance timing matches on, sorted and distinct: every `cue_tokens_for`
    word and its stem (`memory.stemming.stem`, the one fact search folds words with), so "fix
    the failing test" meets a question about "tests use pytest" as search would. The raw words
    stay too: candidates stored before stems were added still match the words they hold."""
    raw = cue_tokens_for(*texts)
    return sorted({*raw, *(stem(t) for t in raw)})


def _query_tokens(query_cues: str | Iterable[Any]) -> list[str]:
    if isinstance(query_cues, str):
        return _relevance_cues(query_cues)
    return _relevance_cues(*(str(q) for q in query_cues))


def classify_answer(
    options: Sequence[Mapping[str, Any]], answer_text: str
) -> tuple[str, int | None]:
    """Deflection first (so a non-answer is never scored as an answer), then exactly one option
    matching by normalized label or 1-based number, else unrecognized. Empty is unrecognized."""
    reply = normalize_text(answer_text)
    if not reply:
        return UNRECOGNIZED, None
    if reply in DEFLECTION_PHRASES:
        return DEFLECTED, None
    matches = {
        i for i, option in enumerate(options) if normalize_text(option.get("label", "")) == reply
    }
    if reply.isdigit() and 1 <= int(reply) <= len(options):
        matches.add(int(reply) - 1)
    if len(matches) == 1:
        return ANSWERED, matches.pop()
    return UNRECOGNIZED, None


def passes_voi_gate(
    candidate: QuestionCandidate, turn: int, recent_use_turns: int = QUESTION_RECENT_USE_TURNS
) -> bool:
    """A known ambiguity signal and `0 <= turn - last_seen_turn <= recent_use_turns`."""
    if getattr(candidate, "ambiguity_signal", None) not in AMBIGUITY_SIGNALS:
        return False
    last_seen = getattr(candidate, "last_seen_turn", None)
    if last_seen is None:
        return False
    return 0 <= int(turn) - int(last_seen) <= recent_use_turns


# ------------------------------------------------------------- validation
def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _as_turn(turn: Any) -> int:
    if isinstance(turn, bool):
        raise ValueError(f"turn must be an int, got {turn!r}")
    try:
        return int(turn)
    except (TypeError, ValueError):
        raise ValueError(f"turn must be an int, got {turn!r}") from None


def _key_list(value: Any, name: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise ValueError(f"{name} must be a list of keys, got {value!r}")
    return [str(k) for k in value]


def _validate_options(options: Sequence[Any] | None) -> list[dict[str, Any]]:
    cleaned = []
    for i, option in enumerate(options or []):
        if not isinstance(option, dict):
            raise ValueError(f"option {i} must be a dict, got {type(option).__name__}")
        label = option.get("label")
        if not isinstance(label, str) or not normalize_text(label):
            raise ValueError(f"option {i} needs a non-blank string label, got {label!r}")
        acted = _key_list(option.get("acted"), f"option {i} acted")
        contradicted = _key_list(option.get("contradicted"), f"option {i} contradicted")
        both = sorted(set(acted) & set(contradicted))
        if both:
            raise ValueError(f"option {i} lists {both} as both acted and contradicted")
        cleaned.append({"label": label, "acted": acted, "contradicted": contradicted})
    return cleaned


class QuestionQueue:
    """The rationed question channel on a store. Safe to share between threads; every rule that
    must hold across processes is enforced by the store's atomic steps."""

    def __init__(
        self,
        store: Store,
        *,
        budget_turns: int = QUESTION_BUDGET_TURNS,
        expiry_turns: int = QUESTION_EXPIRY_TURNS,
        recent_use_turns: int = QUESTION_RECENT_USE_TURNS,
        cooldown_turns: int = QUESTION_COOLDOWN_TURNS,
        answer_weight: int = QUESTION_ANSWER_WEIGHT,
        retention_turns: int = QUESTION_RETENTION_TURNS,
        facts: FactStore | None = None,
        ranking: str = "seed",
        gate_threshold: float = QUESTION_GATE_THRESHOLD,
    ) -> None:
        """`ranking="seed"` (the default) is the seed's contract exactly. `ranking="value"`
        adds the live-uncertainty gate and orders the eligible by value (`question_value`);
        `gate_threshold` is the confidence gate's threshold that gate compares a weak fact
        with (pass the assembler's when it is not the default 0.5)."""
        if ranking not in question_value.RANKINGS:
            raise ValueError(f"ranking must be one of {question_value.RANKINGS}, got {ranking!r}")
        if (
            isinstance(gate_threshold, bool)
            or not isinstance(gate_threshold, int | float)
            or not 0.0 <= gate_threshold <= 1.0
        ):
            raise ValueError(f"gate_threshold must be a number in [0, 1], got {gate_threshold!r}")
        for name, value in (
            ("budget_turns", budget_turns),
            ("expiry_turns", expiry_turns),
            ("recent_use_turns", recent_use_turns),
            ("cooldown_turns", cooldown_turns),
            ("retention_turns", retention_turns),
        ):
            if not _is_int(value) or value < 0:
                raise ValueError(f"{name} must be an int >= 0, got {value!r}")
        if not _is_int(answer_weight) or answer_weight < 1:
            raise ValueError(f"answer_weight must be an int >= 1, got {answer_weight!r}")
        self.store = store
        self.facts = facts if facts is not None else FactStore(store)
        self.budget_turns = budget_turns
        self.expiry_turns = expiry_turns
        self.recent_use_turns = recent_use_turns
        self.cooldown_turns = cooldown_turns
        self.answer_weight = answer_weight
        self.retention_turns = retention_turns
        self.ranking = ranking
        self.gate_threshold = float(gate_threshold)
        self.reconciler = Reconciler(self.facts)
        self._checks: dict[str, list[StalenessCheck]] = {}
        self.register_staleness_check("disjunction", self._disjunction_is_stale)

    # ------------------------------------------------------- staleness
    def register_staleness_check(self, kind: str, check: StalenessCheck) -> None:
        """Expire open candidates of `kind` for which `check(candidate, turn)` is True, instead
        of asking them: for producers whose source can vanish before the question is asked.
        Idempotent."""
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}; expected one of {KINDS}")
        checks = self._checks.setdefault(kind, [])
        if check not in checks:
            checks.append(check)

    def unregister_staleness_check(self, kind: str, check: StalenessCheck) -> None:
        checks = self._checks.get(kind, [])
        if check in checks:
            checks.remove(check)

    def _is_stale(self, cand: QuestionCandidate, turn: int) -> bool | None:
        """True (stale), False, or None when a check failed: then the candidate is neither
        expired nor delivered this turn."""
        for check in list(self._checks.get(cand.kind, ())):
            try:
                if check(cand, turn):
                    return True
            except Exception:
                logger.exception("question_queue: staleness check failed for %s", cand.candidate_id)
                return None
        return False

    def live_reason(self, candidate: QuestionCandidate) -> str | None:
        """Why the candidate's reason to ask is gone (a `question_value` reason code), or None
        while it stands; None too under the seed ranking, which has no such gate. Reads the
        facts it names; a storage error propagates."""
        if self.ranking != "value":
            return None
        return question_value.live_reason(candidate, self.facts.get, self.gate_threshold)

    def _log_expired(self, candidate_id: str, reason: str) -> None:
        # The schema has no field for a reason, so it is recorded here: the id and the
        # reason's code, never the question's text (it can echo workspace content).
        logger.info("question_queue: %s expired: %s", candidate_id, reason)

    def _live_check(
        self, cand: QuestionCandidate, lookup: question_value.FactLookup
    ) -> tuple[str | None, bool | None]:
        """(reason, stale) under the live-uncertainty gate. A failed fact read is (None, None),
        like a failed staleness check: neither expired nor asked this turn."""
        try:
            reason = question_value.live_reason(cand, lookup, self.gate_threshold)
        except Exception:
            logger.exception("question_queue: live check failed for %s", cand.candidate_id)
            return None, None
        return reason, reason is not None

    def expire(self, cand: QuestionCandidate, turn: int, reason: str | None = None) -> bool:
        """Expire `cand` from the status it was read in (an expiry decided on a pending
        snapshot must not land on a question another worker has delivered since), logging
        `reason` when given. Returns whether it expired; a storage error propagates."""
        expired = self.store.qq_claim(
            cand.agent_id,
            cand.candidate_id,
            [cand.status],
            {"status": "expired", "resolved_turn": turn},
        )
        if expired and reason is not None:
            self._log_expired(cand.candidate_id, reason)
        return expired

    # ---------------------------------------------------------- propose
    def propose(
        self,
        agent_id: str,
        question_text: str,
        kind: str,
        source_module: str,
        target_keys: Sequence[str],
        ambiguity_signal: str,
        turn: int,
        options: Sequence[Mapping[str, Any]] | None = None,
        disjunction_id: str | None = None,
    ) -> QuestionCandidate | None:
        """Write a candidate, or touch the one it duplicates (same kind and a shared target
        key, or the same normalized text; open, or answered within retention). Returns the
        new or existing candidate; None when disabled or the store fails or is busy > 2 s."""
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}; expected one of {KINDS}")
        if ambiguity_signal not in AMBIGUITY_SIGNALS:
            raise ValueError(
                f"unknown ambiguity_signal {ambiguity_signal!r}; "
                f"expected one of {AMBIGUITY_SIGNALS}"
            )
        norm = normalize_text(question_text)
        if not norm:
            raise ValueError("question_text is empty once normalized")
        cleaned = _validate_options(options)
        keys = _key_list(target_keys, "target_keys")
        turn = _as_turn(turn)
        if not isinstance(agent_id, str) or not agent_id:
            raise ValueError(f"agent_id must be a non-empty string, got {agent_id!r}")
        if not queue_enabled():
            return None
        row = {
            "candidate_id": _new_candidate_id(),
            "agent_id": agent_id,
            "question_text": str(question_text),
            "kind": kind,
            "source_module": str(source_module),
            "target_keys": keys,
            "options": cleaned,
            "ambiguity_signal": ambiguity_signal,
            "status": "pending",
            "ask_count": 0,
            "created_turn": turn,
            "expires_turn": turn + self.expiry_turns,
            "last_seen_turn": turn,
            "cooldown_until": None,
            "answer_option": None,
            "resolved_turn": None,
            "cue_tokens": _relevance_cues(question_text, *(o["label"] for o in cleaned)),
            "delivered_turn": None,
            "disjunction_id": None if disjunction_id is None else str(disjunction_id),
        }
        try:
            found, _ = self.store.qq_propose(
                row, norm, retention_turns=self.retention_turns, cooldown_turns=self.cooldown_turns
            )
        except Exception:
            logger.exception("question_queue: propose for agent %s failed; dropped", agent_id)
            return None
        return QuestionCandidate(**found)

    def note_use(self, agent_id: str, keys: Iterable[str], turn: int) -> int:
        """The host injected `keys` into context at `turn`: raise `last_seen_turn` (never
        lower it) on open candidates about them. Returns how many were raised."""
        if not queue_enabled():
            return 0
        turn = _as_turn(turn)
        key_list = sorted({str(k) for k in keys or []})
        if not key_list:
            return 0
        try:
            return self.store.qq_note_use(
                agent_id, key_list, turn, cooldown_turns=self.cooldown_turns
            )
        except Exception:
            logger.exception("question_queue: note_use for agent %s failed", agent_id)
            return 0

    # --------------------------------------------------------- delivery
    def next_question(
        self, agent_id: str, turn: int, query_cues: str | Iterable[Any] | None = None
    ) -> QuestionCandidate | None:
        """The next question to ask, if any: budget, expiry and ignored-cooling, cooldown, VOI
        gate, relevance to `query_cues` (None disables timing), staleness, impact order, then
        one atomic grant-and-claim. None when nothing passes, the budget is closed, or on any
        error; the budget is spent only on a delivery."""
        if not queue_enabled():
            return None
        turn = _as_turn(turn)
        memo = PASS_MEMO.set({})
        by_value = self.ranking == "value"
        # Under the value ranking every kind is "checked": the store hands back the eligible
        # (at most _ELIGIBLE_LIMIT, in impact order) instead of delivering the first itself.
        checked_kinds = (
            list(KINDS) if by_value else [kind for kind, checks in self._checks.items() if checks]
        )
        try:
            outcome, rows = self.store.qq_select(
                agent_id,
                turn,
                budget_turns=self.budget_turns,
                cooldown_turns=self.cooldown_turns,
                recent_use_turns=self.recent_use_turns,
                signals=AMBIGUITY_SIGNALS,
                cues=None if query_cues is None else _query_tokens(query_cues),
                limit=_ELIGIBLE_LIMIT,
                checked_kinds=checked_kinds,
            )
            if outcome != "check":
                claimed = rows[0] if rows else None
            else:
                lookup = question_value.memo_lookup(self.facts.get)
                survivors: list[QuestionCandidate] = []
                stale_ones, dead = [], []
                for row in rows:
                    cand = QuestionCandidate(**row)
                    stale = self._is_stale(cand, turn)
                    reason = None
                    if stale is False and by_value:
                        reason, stale = self._live_check(cand, lookup)
                    if stale:
                        stale_ones.append((cand.candidate_id, cand.status))
                        if reason is not None:
                            dead.append((cand.candidate_id, reason))
                    elif stale is False:
                        survivors.append(cand)
                if by_value:  # about what the request is about, and not settled by it
                    request = question_value.request_stems(query_cues)
                    survivors = [
                        c
                        for c in survivors
                        if question_value.about_request(c, request, lookup, turn)
                        and not question_value.settled_by_request(c, query_cues)
                    ]
                    survivors = question_value.rank(survivors, turn, request, lookup)
                claimed = self.store.qq_deliver(
                    agent_id,
                    turn,
                    self.budget_turns,
                    [c.candidate_id for c in survivors],
                    expire=stale_ones,
                )
                for candidate_id, reason in dead:
                    self._log_expired(candidate_id, reason)
        except Exception:
            logger.exception("question_queue: next_question for agent %s failed", agent_id)
            return None
        finally:
            PASS_MEMO.reset(memo)
        return None if claimed is None else QuestionCandidate(**claimed)

    def record_answer(
        self, candidate: QuestionCandidate, answer_text: str, turn: int
    ) -> AnswerResult:
        """Record the person's reply. Answered: claim (delivered/pending -> answered), then
        apply the chosen option as `answer_weight` observations per fact. Deflected or
        unrecognized: cooled for `cooldown_turns`, no evidence. The reply is never stored."""
        if not queue_enabled():
            return AnswerResult(applied=False, reason="disabled")
        turn = _as_turn(turn)
        options = list(candidate.options or [])
        classification, index = classify_answer(options, answer_text)
        if classification == ANSWERED:
            updates: dict[str, Any] = {
                "status": "answered",
                "answer_option": index,
                "resolved_turn": turn,
            }
        else:
            updates = {
                "status": "cooled",
                "cooldown_until": turn + self.cooldown_turns,
                "resolved_turn": turn,
            }
        try:
            claimed = self.store.qq_claim(
                candidate.agent_id, candidate.candidate_id, ANSWERABLE_STATUSES, updates
            )
        except Exception:
            logger.exception(
                "question_queue: record_answer claim for %s failed", candidate.candidate_id
            )
            return AnswerResult(applied=False, reason="error", classification=classification)
        if not claimed:
            return AnswerResult(False, "not_open", classification, index)
        for name, value in updates.items():
            setattr(candidate, name, value)
        if classification != ANSWERED:
            return AnswerResult(False, "cooled", classification)
        assert index is not None
        try:
            option = options[index]
            outcomes = {k: "acted" for k in option.get("acted") or []}
            outcomes.update({k: "contradicted" for k in option.get("contradicted") or []})
            if outcomes:
                self.facts.observe(outcomes, weight=self.answer_weight)
        except Exception:
            logger.exception(
                "question_queue: evidence for answered %s lost after the claim",
                candidate.candidate_id,
            )
            return AnswerResult(False, "apply_failed", classification, index)
        return AnswerResult(True, "applied", classification, index)

    # ------------------------------------------------------ maintenance
    def expire_stale(self, agent_id: str, turn: int) -> int:
        """Expire every open candidate past its expiry or reported stale, and cool ignored
        delivered ones. Returns the number expired (cooling is not counted)."""
        if not queue_enabled():
            return 0
        turn = _as_turn(turn)
        memo = PASS_MEMO.set({})
        try:
            expired = self.store.qq_sweep(agent_id, turn, cooldown_turns=self.cooldown_turns)
            by_value = self.ranking == "value"
            if by_value or any(self._checks.values()):
                lookup = question_value.memo_lookup(self.facts.get)
                for row in self.store.qq_open(agent_id):
                    cand = QuestionCandidate(**row)
                    stale, reason = self._is_stale(cand, turn), None
                    if stale is False and by_value:
                        reason, stale = self._live_check(cand, lookup)
                    if stale and self.expire(cand, turn, reason):
                        expired += 1
            return expired
        except Exception:
            logger.exception("question_queue: expire_stale for agent %s failed", agent_id)
            return 0
        finally:
            PASS_MEMO.reset(memo)

    def prune(self, agent_id: str, current_turn: int) -> int:
        """Delete non-pending candidates whose last activity is more than `retention_turns`
        old. Returns how many."""
        if not queue_enabled():
            return 0
        current_turn = _as_turn(current_turn)
        try:
            return self.store.qq_prune(agent_id, current_turn, self.retention_turns)
        except Exception:
            logger.exception("question_queue: prune for agent %s failed", agent_id)
            return 0

    def get(self, candidate_id: str) -> QuestionCandidate | None:
        """The candidate as stored now; None when unknown or the store fails."""
        try:
            row = self.store.qq_get(str(candidate_id))
        except Exception:
            logger.exception("question_queue: get failed")
            return None
        return None if row is None else QuestionCandidate(**row)

    def candidates(self, agent_id: str) -> list[QuestionCandidate]:
        """Every candidate of the agent, every status, oldest first; [] when the store fails."""
        try:
            rows = self.store.qq_list(agent_id)
        except Exception:
            logger.exception("question_queue: listing candidates of %s failed", agent_id)
            return []
        return [QuestionCandidate(**row) for row in rows]

    # -------------------------------------------------------- producers
    # The producers live in `producers` (they parse memory-layer shapes); these methods are the
    # contract's spelling. The host calls `producers` itself.
    def _disjunction_is_stale(self, cand: QuestionCandidate, turn: int) -> bool:
        return producers.disjunction_is_stale(self, cand, turn)

    def propose_from_disjunctions(self, agent_id: str, turn: int) -> int:
        """See `producers.propose_from_disjunctions`: one question per live disjoin."""
        return producers.propose_from_disjunctions(self, agent_id, turn)

    def propose_from_gate(
        self, agent_id: str, metadata: Any, turn: int, query_text: str
    ) -> QuestionCandidate | None:
        """See `producers.propose_from_gate`: a confirmation from a gate refusal."""
        return producers.propose_from_gate(self, agent_id, metadata, turn, query_text)

    def propose_from_resolution(self, record: Any, turn: int) -> int:
        """See `producers.propose_from_resolution`: a referent question per evidence gap."""
        return producers.propose_from_resolution(self, record, turn)
