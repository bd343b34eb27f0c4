"""The producers: where the memory layer's uncertainty becomes question candidates.

Three sources of doubt write candidates through `QuestionQueue.propose`; none of them asks:

- a live disjoin in the reconciliation journal (two facts that conflict) -> a disjunction;
- a confidence-gate refusal in assembly metadata (a fact too weak to use) -> a confirmation;
- an `evidence_gap` reference in a resolution record (several candidate referents) -> a referent.

They live here, apart from the queue's mechanics, because they parse memory-layer shapes (journal
entries, gate metadata, resolution records) that change with the memory layer, while the queue's
contract does not. The host calls them here; each is a `QuestionQueue` method of the same name
too (the contract's spelling), which calls these functions. They name the queue by the
`question_types.Queue` protocol, so the queue can import them without a cycle.

The disjunction producer's source can vanish (forgetting or superseding either side retracts
the disjoin), so this module also holds its staleness check, which the queue registers for the
"disjunction" kind. Producers never raise: a failure is logged and the proposal dropped.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from ..memory.resolve import asks_about
from ..text import normalize_text
from .question_types import DEFLECTION_PHRASES, PASS_MEMO, QuestionCandidate, Queue, queue_enabled
from .question_value import REFERENCE_RESOLVED

logger = logging.getLogger(__name__)

__all__ = [
    "answered_referents",
    "disjunction_is_stale",
    "expire_resolved_referents",
    "live_disjoins",
    "propose_from_disjunctions",
    "propose_from_gate",
    "propose_from_resolution",
]


def _disjunction_labels(a: Any, b: Any) -> list[str]:
    """Two facts in one slot are told apart by their values ("pytest", "unittest"), which is
    also what a person answers; otherwise by their statements."""
    first, second = getattr(a, "value", None), getattr(b, "value", None)
    if first and second and normalize_text(first) != normalize_text(second):
        return [first, second]
    return [a.statement if a else "", b.statement if b else ""]


def _distinct_labels(texts: list[str]) -> list[str]:
    """The texts as option labels, unless one is empty, two normalize alike, or one is a
    deflection phrase (a referent named "Next" could never be chosen by name): then
    "option 1", "option 2", ..."""
    norms = [normalize_text(t) for t in texts]
    if (
        any(not n for n in norms)
        or len(set(norms)) != len(norms)
        or any(n in DEFLECTION_PHRASES for n in norms)
    ):
        return [f"option {i + 1}" for i in range(len(texts))]
    return list(texts)


# ---------------------------------------------------------- disjunctions
def live_disjoins(queue: Queue, agent_id: str) -> list[tuple[str, str, str]]:
    """(disjunction_id, side A, side B) of every live disjoin in the journal, in journal order
    (the store's insertion order on both backends, so a replay proposes them in the same
    order). Raises when the journal cannot be read."""
    out = []
    for entry in queue.reconciler.merge_log_entries(agent_id):
        if entry.kind != "disjoin" or not isinstance(entry.payload, dict):
            continue
        side_a, side_b = entry.target, str(entry.payload.get("other") or "")
        if not side_a or not side_b or side_a == side_b:
            continue
        out.append((str(entry.payload.get("disjunction_id") or entry.id), side_a, side_b))
    return out


def _live_disjoin_ids(queue: Queue, agent_id: str) -> frozenset[str]:
    """The live disjunction ids, read once per delivery or expiry pass (a failed read is
    remembered too, so a broken journal is read once, not once per candidate)."""
    memo = PASS_MEMO.get()
    slot = ("live_disjoin_ids", agent_id)
    if memo is not None and slot in memo:
        found = memo[slot]
        if isinstance(found, Exception):
            raise found
        return found
    try:
        ids = frozenset(did for did, _, _ in live_disjoins(queue, agent_id))
    except Exception as exc:
        if memo is not None:
            memo[slot] = exc
        raise
    if memo is not None:
        memo[slot] = ids
    return ids


def disjunction_is_stale(queue: Queue, cand: QuestionCandidate, turn: int) -> bool:
    """A disjunction question whose disjoin was retracted is stale. Raises when the
    journal cannot be read: the candidate is then neither expired nor asked."""
    if not cand.disjunction_id:
        return False
    return cand.disjunction_id not in _live_disjoin_ids(queue, cand.agent_id)


def propose_from_disjunctions(queue: Queue, agent_id: str, turn: int) -> int:
    """One disjunction question per live disjoin in the reconciliation journal, options
    mirrored (A: acted A, contradicted B; B: the mirror), `disjunction_id` set so a
    retracted disjoin expires it. Re-running touches instead of duplicating. Returns how
    many were proposed or touched; 0 when the journal cannot be read. Never raises."""
    if not queue_enabled():
        return 0
    try:
        disjoins = live_disjoins(queue, agent_id)
    except Exception:
        logger.exception("question_queue: reading the reconciliation journal failed")
        return 0
    proposed = 0
    for disjunction_id, side_a, side_b in disjoins:
        try:
            fact_a, fact_b = queue.facts.get(side_a), queue.facts.get(side_b)
            label_a, label_b = _distinct_labels(_disjunction_labels(fact_a, fact_b))
            candidate = queue.propose(
                agent_id=agent_id,
                question_text=queue.reconciler.conflict_question(fact_a, fact_b),
                kind="disjunction",
                source_module="reconciliation",
                target_keys=[side_a, side_b],
                ambiguity_signal="disjunction",
                turn=turn,
                options=[
                    {"label": label_a, "acted": [side_a], "contradicted": [side_b]},
                    {"label": label_b, "acted": [side_b], "contradicted": [side_a]},
                ],
                disjunction_id=disjunction_id,
            )
        except Exception:
            logger.exception("question_queue: disjunction proposal failed")
            continue
        proposed += candidate is not None
    return proposed


# ------------------------------------------------------------------ gate
def propose_from_gate(
    queue: Queue, agent_id: str, metadata: Any, turn: int, query_text: str
) -> QuestionCandidate | None:
    """A confirmation question from a confidence-gate refusal in assembly metadata (the
    dict, or an object with a `.metadata` dict). Only a gated refusal in `refuse` mode with
    refused keys proposes: in `flag` mode nothing was withheld. Yes = acted, no =
    contradicted, on the top refused key. Never raises."""
    try:
        if not isinstance(metadata, dict):
            metadata = getattr(metadata, "metadata", None)
        gate = metadata.get("gate") if isinstance(metadata, dict) else None
        if not isinstance(gate, dict) or not gate.get("gated") or gate.get("mode") != "refuse":
            return None
        refused = [str(k) for k in gate.get("refused_keys") or [] if k]
        if not refused:
            return None
        key = refused[0]
        topic = str(query_text or "").strip() or "this topic"
        # The key is in the text so two refusals under one query stay two candidates
        # (text dedup would fold them); the host rephrases before showing it.
        return queue.propose(
            agent_id=agent_id,
            question_text=(
                f"I'm not confident in what I recall about {topic!r} ({key}). Is it still accurate?"
            ),
            kind="confirmation",
            source_module="context_assembler.confidence_gate",
            target_keys=[key],
            ambiguity_signal="gate_refusal",
            turn=turn,
            options=[{"label": "yes", "acted": [key]}, {"label": "no", "contradicted": [key]}],
        )
    except Exception:
        logger.exception("question_queue: gate proposal failed")
        return None


# ------------------------------------------------------------ resolution
def propose_from_resolution(queue: Queue, record: Any, turn: int) -> int:
    """One referent question per `evidence_gap` reference of a resolution record (an object
    with `agent_id`, `key` and `references_json`), with one option per distinct candidate
    and no effects: the answer is recorded only. Returns how many were proposed or
    touched; 0 on an unreadable record. Never raises."""
    if not queue_enabled():
        return 0
    try:
        agent_id = str(getattr(record, "agent_id", "") or "")
        record_key = str(record.key)
        references = json.loads(str(getattr(record, "references_json", "") or "[]"))
    except Exception:
        logger.info("question_queue: unreadable resolution record skipped")
        return 0
    if not agent_id or not isinstance(references, list):
        return 0
    if queue.ranking == "value":
        expire_resolved_referents(queue, agent_id, references, turn)
    proposed = 0
    for ref in references:
        try:
            if not isinstance(ref, dict) or ref.get("status") != "evidence_gap":
                continue
            seen: dict[str, str] = {}
            for text in map(str, ref.get("candidates") or []):
                norm = normalize_text(text)
                if norm and norm not in seen:
                    seen[norm] = text
            if not seen:
                continue
            surface = str(ref.get("surface") or "")
            question = str(ref.get("question") or "").strip() or (
                f"Who or what does {surface!r} refer to?"
            )
            candidate = queue.propose(
                agent_id=agent_id,
                question_text=question,
                kind="referent",
                source_module="extraction.resolution",
                target_keys=[f"{record_key}#ref:{ref.get('start')}:{ref.get('end')}"],
                ambiguity_signal="evidence_gap",
                turn=turn,
                options=[
                    {"label": label, "acted": [], "contradicted": []}
                    for label in _distinct_labels(list(seen.values()))
                ],
            )
        except Exception:
            logger.exception("question_queue: evidence_gap proposal failed")
            continue
        proposed += candidate is not None
    return proposed


def expire_resolved_referents(queue: Queue, agent_id: str, references: list[Any], turn: int) -> int:
    """The live-uncertainty gate for referents (value ranking only): a reference a later
    request resolved (status "resolved") settles the open referent questions about the same
    words that had the resolved target among their options, so they expire (reason
    reference_resolved) instead of being asked. A referent question stores no surface of its
    own, so "about the same words" is: the normalized surface appears, as whole words, in the
    normalized question text, which every referent question quotes. Returns how many
    expired; a storage failure is logged and expires nothing. Never raises."""
    settled = []
    for ref in references:
        if not isinstance(ref, dict) or ref.get("status") != "resolved":
            continue
        surface = str(ref.get("surface") or "")
        target = normalize_text(str(ref.get("resolved_text") or ""))
        if normalize_text(surface) and target:
            settled.append((surface, target))
    if not settled:
        return 0
    expired = 0
    try:
        for row in queue.store.qq_open(agent_id):
            cand = QuestionCandidate(**row)
            if cand.kind != "referent":
                continue
            labels = {normalize_text(str(o.get("label", ""))) for o in cand.options}
            hit = any(asks_about(cand.question_text, s) and t in labels for s, t in settled)
            if hit and queue.expire(cand, turn, REFERENCE_RESOLVED):
                expired += 1
    except Exception:
        logger.exception("question_queue: expiring resolved referents failed")
    return expired


def answered_referents(queue: Queue, agent_id: str) -> list[tuple[str, str]]:
    """(question, chosen label) of every referent question the person answered and the store
    still holds (`retention_turns`), most recent first: `resolve`'s "earlier answer" evidence,
    so "the parser" is neither guessed at nor asked again once the person has said which one.
    [] when the store fails (`candidates` logs it)."""
    answered = [
        c
        for c in queue.candidates(agent_id)
        if c.kind == "referent"
        and c.status == "answered"
        and c.answer_option is not None
        and 0 <= c.answer_option < len(c.options)
    ]
    answered.sort(key=lambda c: (c.resolved_turn or 0, c.candidate_id), reverse=True)
    return [(c.question_text, str(c.options[c.answer_option or 0].get("label"))) for c in answered]
