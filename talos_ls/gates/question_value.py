"""The `ranking="value"` option of the question queue: the live-uncertainty gate and the value.

The seed's queue asks the first eligible candidate in impact order (most recently used, least
asked, oldest). Measured on replayed sessions, that asks whenever the budget opens, often about
something evidence has settled since the candidate was written, and picks barely better than
chance among the eligible. Two things here use stored state the seed ignores:

- `live_reason`: why a candidate's reason to ask is gone (its conflict separated by evidence or
  one side closed, its weak fact corroborated above the gate or closed). Such a candidate is
  expired instead of asked, and no budget is spent on it. Only positive evidence expires: a
  target that is not a fact at all (a referent's key) is no evidence either way.
- `value`: among the live ones, how likely the answer is to change what the agent does now,
  `use x closeness x exactness` (each in [0, 1]; docs/question-queue.md has a worked example).

Everything is a pure function of the candidate, the request's words, the turn and a fact lookup,
so the order is deterministic and the unit tests compute it by hand. Facts are looked up through
a callable (key -> Fact or None) so one delivery pass reads each fact once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from ..constants import RANKINGS as RANKINGS  # re-exported: the queue checks its option
from ..memory.reconcile import LOSER_AT_MOST, WINNER_AT_LEAST
from ..memory.stemming import stem
from ..text import cue_tokens_for, normalize_text

if TYPE_CHECKING:
    from ..memory.facts import Fact
    from .question_types import QuestionCandidate

# Why a candidate expired under the live-uncertainty gate (logged at INFO with its id).
CONFLICT_CLOSED = "conflict_closed"  # a side of the disjunction is no longer held
CONFLICT_SEPARATED = "conflict_separated"  # evidence split the sides as reconciliation does
FACT_CLOSED = "fact_closed"  # the fact to confirm is no longer held
FACT_CORROBORATED = "fact_corroborated"  # the weak fact rose to the confidence gate
REFERENCE_RESOLVED = "reference_resolved"  # a later request resolved the same reference

# How exactly one option maps to facts (see `option_precision`).
SLOT_FACT = 1.0  # asserts one fact filling a slot: "pytest" for tests/use
STATEMENT_FACT = 0.75  # asserts one free statement: exact, but worded, not a value
RULE_OUT = 0.5  # only contradicts: "no" says what is wrong, not what is right
VALUE_DIGITS = 6  # values are rounded so that float noise never decides a tie

FactLookup = Callable[[str], "Fact | None"]


# ------------------------------------------------------------ live gate
def live_reason(
    candidate: QuestionCandidate, lookup: FactLookup, gate_threshold: float
) -> str | None:
    """Why `candidate`'s reason to ask is gone, or None while it still stands.

    - disjunction (two target facts): one side closed -> conflict_closed; the sides separated
      as `Reconciler.reconcile_pass` separates them (one >= 0.7, the other <= 0.3) ->
      conflict_separated (the next pass will settle it without asking anyone);
    - confirmation: every named fact closed -> fact_closed; every live one corroborated (an
      observation for it) and at or above the confidence gate's threshold ->
      fact_corroborated (the gate no longer withholds it). A fact at its prior has no evidence
      at all: only evidence settles a question, never the prior.
    A key that is no fact is ignored: only evidence expires a question. Referents are settled
    by a later resolution (`producers.propose_from_resolution`), not from facts. `lookup`
    errors propagate: the caller then neither expires nor asks the candidate."""
    if candidate.kind not in ("disjunction", "confirmation"):
        return None  # no fact read: on Redis each is a round trip
    keys = list(dict.fromkeys(candidate.target_keys))
    found = [f for f in map(lookup, keys) if f is not None]
    if candidate.kind == "disjunction":
        if len(found) != 2:
            return None
        if not all(f.live for f in found):
            return CONFLICT_CLOSED
        high, low = sorted((f.confidence for f in found), reverse=True)
        if high >= WINNER_AT_LEAST and low <= LOSER_AT_MOST:
            return CONFLICT_SEPARATED
        return None
    if candidate.kind == "confirmation":
        if not found:
            return None
        live = [f for f in found if f.live]
        if not live:
            return FACT_CLOSED
        if all(f.corroborations and f.confidence >= gate_threshold for f in live):
            return FACT_CORROBORATED
    return None


def settled_by_request(
    candidate: QuestionCandidate, query_cues: str | Iterable[Any] | None
) -> bool:
    """The request itself picks one side of a disjunction ("run the tests with pytest" when
    the conflict is pytest / unittest): exactly one option's label is in the request, as whole
    words once both are normalized. Such a question is not asked this turn (the task goes on
    what the person said) but stays open: a request is no answer about the rule. Whole labels,
    not stemmed words: "add the tests" names neither "pytest" nor a label "py test"."""
    if candidate.kind != "disjunction" or query_cues is None or len(candidate.options or []) != 2:
        return False
    texts = [query_cues] if isinstance(query_cues, str) else [str(q) for q in query_cues]
    request = f" {normalize_text(' '.join(texts))} "
    labels = [normalize_text(str(o.get("label", ""))) for o in candidate.options]
    if not all(labels) or labels[0] == labels[1]:
        return False
    return sum(f" {label} " in request for label in labels) == 1


# --------------------------------------------------------------- value
def request_stems(query_cues: str | Iterable[Any] | None) -> frozenset[str] | None:
    """The request's words folded by the search stemmer; None when there is no request."""
    if query_cues is None:
        return None
    return _stems_of((query_cues,) if isinstance(query_cues, str) else tuple(map(str, query_cues)))


# Words a question's own wording brings, and verbs any rule uses: never what it is about.
# Subject words come from the candidate's structure (`subject_stems`), so this list only
# trims what that still carries ("use" in "tests use pytest"); it is not what makes
# relevance work on its own.
BOILERPLATE = frozenset(
    stem(w)
    for w in (
        "use uses used using prefer prefers preferred always never must need needs two both "
        "right wrong which mean means meant say says said note notes conflict conflicts "
        "confident recall accurate still now open selection refer refers file files code"
    ).split()
)
# The producers whose questions are a template around their subject (`producers.py`); any
# other question (the model's own, through `ask`) is all subject.
TEMPLATED = frozenset(
    ("reconciliation", "context_assembler.confidence_gate", "extraction.resolution")
)
CLAIM_WORDS = 2
_QUOTED = re.compile(r"'([^']{1,200})'|\"([^\"]{1,200})\"")


def subject_texts(candidate: QuestionCandidate, lookup: FactLookup) -> tuple[str, ...]:
    """What a candidate is about, never its question's template: a question not written by
    one of our producers (TEMPLATED) is all subject, words and labels; a conflict's and a
    confirmation's facts (their own statements: slot and values), a referent's quoted words
    ("the parser") and the names of its files and symbols (`tools/parser.py` -> parser,
    `load_config in app.py` -> load_config); for a fact no longer stored, the quoted spans and
    labels of its question."""
    labels = [str(o.get("label", "")) for o in candidate.options or []]
    if candidate.source_module not in TEMPLATED:  # its own words (the model's `ask`)
        return (candidate.question_text, *labels)
    quoted = tuple(a or b for a, b in _QUOTED.findall(candidate.question_text))
    if candidate.kind == "referent":
        names = [label.split(" in ", 1)[0].rsplit("/", 1)[-1].split(".", 1)[0] for label in labels]
        return (*quoted, *names)
    facts = [lookup(str(k)) for k in candidate.target_keys]
    statements = tuple(f.statement for f in facts if f is not None)
    if statements:
        return statements + (tuple(labels) if candidate.kind == "disjunction" else ())
    return quoted + (tuple(labels) if candidate.kind == "disjunction" else ())


def subject_stems(candidate: QuestionCandidate, lookup: FactLookup) -> frozenset[str]:
    """`subject_texts`, folded like the request's, without BOILERPLATE."""
    return _stems_of(subject_texts(candidate, lookup)) - BOILERPLATE


def about_request(
    candidate: QuestionCandidate, request: frozenset[str] | None, lookup: FactLookup, turn: int
) -> bool:
    """Whether the question is relevant to the request now (True without a request). A
    reference our resolver found ambiguous is, only when this turn's request made the same
    reference again (`propose_from_resolution` touched it: `last_seen_turn` is this turn):
    "the parser tests" (a test file), "the lexer's cache" or "write a parser" share the word
    and refer to something else. Any other question, when the request (with the active
    document's path) shares a word of its subject (`subject_stems`); a confirmation of a
    weak claim, CLAIM_WORDS of them: one word ("cache") says the request is about the claim's
    topic, not that it rests on what the claim says of it ("the cache code is thread-safe"
    matters to "is the cache thread safe?", not to "the cache returns stale data")."""
    if request is None:
        return True
    if candidate.source_module == "extraction.resolution":
        return int(candidate.last_seen_turn) == int(turn)
    subject = subject_stems(candidate, lookup)
    if candidate.kind == "confirmation":  # a claim: its topic and what it says of it
        return len(subject & request) >= min(CLAIM_WORDS, len(subject))
    return bool(subject & request)


def facts_about_request(facts: Iterable[Fact], request: frozenset[str] | None) -> bool:
    """`about_request` for facts themselves (a conflict nobody was asked about yet)."""
    texts = tuple(f.statement for f in facts)
    return request is None or bool((_stems_of(texts) - BOILERPLATE) & request)


@lru_cache(maxsize=4096)
def _stems_of(texts: tuple[str, ...]) -> frozenset[str]:
    """Stemmed cue words of `texts`; cached: the same open questions are ranked every turn."""
    return frozenset(stem(t) for t in cue_tokens_for(*texts))


def use(
    candidate: QuestionCandidate, turn: int, request: frozenset[str] | None, lookup: FactLookup
) -> float:
    """How strongly the current request uses the candidate's targets.

    recency = 1 / (1 + turn - last_seen_turn): 1 when `note_use` (or a re-proposal) touched it
    this turn, 1/2 a turn ago... The store keeps the last use, not a count of uses.
    overlap = n / (n + 1) for n stemmed subject words shared with the request
    (`subject_stems`): 1/2, 2/3, 3/4...
    use = (recency + overlap) / 2, or recency alone when there is no request."""
    recency = 1.0 / (1 + max(0, int(turn) - int(candidate.last_seen_turn)))
    if request is None:
        return recency
    shared = len(subject_stems(candidate, lookup) & request)
    return (recency + shared / (shared + 1)) / 2


def option_support(option: Mapping[str, Any], lookup: FactLookup) -> float:
    """How much the stored evidence already backs an option: the mean, over the live facts it
    names, of the confidence of each acted fact and 1 - confidence of each contradicted one;
    0.5 (no evidence either way) when it names none."""
    parts = [f.confidence for f in _live(option.get("acted"), lookup)]
    parts += [1.0 - f.confidence for f in _live(option.get("contradicted"), lookup)]
    return sum(parts) / len(parts) if parts else 0.5


def closeness(candidate: QuestionCandidate, lookup: FactLookup) -> float:
    """How close the competing options still are: 1 - (best support - second best). A conflict
    at 0.5 / 0.5 is 1; at 0.65 / 0.35 it is 0.7. A yes/no on a fact at c is 1 - |2c - 1|.
    Options without facts (referents) are all 0.5: a tie, 1."""
    supports = sorted((option_support(o, lookup) for o in candidate.options or []), reverse=True)
    if len(supports) < 2:
        return 1.0
    return 1.0 - (supports[0] - supports[1])


def option_precision(option: Mapping[str, Any], lookup: FactLookup) -> float:
    """How exactly choosing this option maps to facts.

    It asserts k >= 1 facts: the mean of 1.0 (a fact filling a slot) or 0.75 (a free statement)
    over them, divided by k (a broad "yes" over many facts is not exact). It only contradicts
    k facts: 0.5 / k (it rules out, and does not say what is right instead). It names no fact:
    1.0, the label is the answer (a referent among named files). Unknown keys count as free
    statements."""
    acted = [str(k) for k in option.get("acted") or []]
    contradicted = [str(k) for k in option.get("contradicted") or []]
    if acted:
        weights = [SLOT_FACT if _is_slot(lookup(k)) else STATEMENT_FACT for k in acted]
        return sum(weights) / len(weights) / len(acted)
    if contradicted:
        return RULE_OUT / len(contradicted)
    return 1.0


def exactness(candidate: QuestionCandidate, lookup: FactLookup) -> float:
    """The mean `option_precision` of the options (0 without options: nothing to map)."""
    options = list(candidate.options or [])
    if not options:
        return 0.0
    return sum(option_precision(o, lookup) for o in options) / len(options)


def value(
    candidate: QuestionCandidate, turn: int, request: frozenset[str] | None, lookup: FactLookup
) -> float:
    """`use x closeness x exactness`, rounded to 6 digits."""
    raw = use(candidate, turn, request, lookup) * closeness(candidate, lookup)
    return round(raw * exactness(candidate, lookup), VALUE_DIGITS)


def rank(
    candidates: Sequence[QuestionCandidate],
    turn: int,
    request: frozenset[str] | None,
    lookup: FactLookup,
) -> list[QuestionCandidate]:
    """Highest value first; equal values keep the order given (the store's impact order, which
    ends in the time-ordered candidate id), so the ranking is deterministic."""
    return sorted(candidates, key=lambda c: -value(c, turn, request, lookup))  # stable


def memo_lookup(get: FactLookup) -> FactLookup:
    """`get` read once per key (a delivery pass looks at each fact several times)."""
    seen: dict[str, Fact | None] = {}

    def lookup(key: str) -> Fact | None:
        if key not in seen:
            seen[key] = get(key)
        return seen[key]

    return lookup


def _live(keys: Iterable[Any] | None, lookup: FactLookup) -> list[Fact]:
    facts = (lookup(str(k)) for k in keys or [])
    return [f for f in facts if f is not None and f.live]


def _is_slot(fact: Fact | None) -> bool:
    return fact is not None and fact.subject is not None and fact.value is not None
