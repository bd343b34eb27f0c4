"""Does the value ranking ask less and better than the seed's order? Scripted sessions, a person
who knows the truth, the real queue and producers.

Each session is generated from a seed: a workspace (some module names in one directory, some in
two or three), two rules files (AGENTS.md and CLAUDE.md, the same precedence, so where they give a
slot different values the reconciler records a conflict and only the session knows which side is
true), weak facts (free statements at 0.3 after one contradiction, each true or false), and T
requests with the editor's active document. Every arm replays the same session on its own SQLite
store and its own copy of the workspace, through what the host does each turn (rules sync,
reconcile pass, assembly with the 0.5 confidence gate, note_use, the three producers,
next_question with the request and the active path as cues). The truth is never written to the
store. The simulated person answers a delivered question with the truth, or dismisses it with
probability --dismiss. Between turns, "the world" gives evidence: each fact, with probability
--evidence per turn, gets one observation that agrees with the truth nine times out of ten.

Arms: seed (the seed's order, `resolve` hearing the request only: the queue as the reference
design has it), editor (the seed's order, `resolve` also weighing the editor's evidence: the
active document and the files the last three tasks touched, as the host does), value
(`ranking="value"`, with the editor's evidence), and two ablations on the value path: gate (the
live-uncertainty gate and the request check, then the seed's order) and entropy (the same, then
expected entropy reduction over the options' effects: the binary entropy of every live fact an
option names, or log2 of the number of options when they name none). bench/README.md states
how each figure is counted.

A second corpus, held out: requests written by hand (bench/question_cases.py), not generated from
the vocabulary below: paraphrases, boilerplate-word and other-subject traps, the same requests in
Japanese, German, French, Spanish and Chinese, conflicting evidence. Each is judged once, after a
fixed preamble that sets the state (open questions, the budget, an earlier answer), through the
same per-turn path, in every arm; over-asks, useful answers, misses, wrong and unstated
assumptions are counted by cause.

    python bench/question_value.py                          # both corpora, 60 sessions x 30 turns
    python bench/question_value.py --sessions 5 --turns 12 --json out.json
    python bench/question_value.py --corpus held-out --classes language,conflict --trace value
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import logging
import math
import platform
import random
import re
import sqlite3
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from question_cases import (  # bench/question_cases.py, beside this script
    CASES,
    CLASS_PREAMBLES,
    CLASSES,
    FILES,
    LANGUAGES,
    MODULES,
    PREAMBLES,
    SLOT_TRUTH,
    WEAK_FACTS,
    Case,
)

from talos_ls.gates import question_value
from talos_ls.gates.producers import answered_referents
from talos_ls.gates.question_queue import QuestionQueue
from talos_ls.memory.assembler import ContextAssembler
from talos_ls.memory.index import WorkspaceIndex
from talos_ls.memory.resolve import Evidence, evidence_notes, resolve, worked_on
from talos_ls.memory.rules import RulesFiles
from talos_ls.store import open_store
from talos_ls.text import normalize_text

AGENT = "bench"
GATE = 0.5  # the host's confidence gate (HostConfig.confidence_gate)
ARMS = ("seed", "editor", "value", "gate", "entropy")
NO_EDITOR = ("seed",)  # arms whose `resolve` hears the request only, as the reference design
TOUCHED_TASKS = 3  # host.TOUCHED_TASKS

NOUNS = (
    "parser",
    "lexer",
    "cache",
    "loader",
    "router",
    "client",
    "server",
    "schema",
    "worker",
    "scheduler",
    "renderer",
    "storage",
    "importer",
    "exporter",
    "validator",
)
DIRS = ("src", "tools", "lib", "scripts", "plugins")

# (subject, verb, values, requests using its cue words, paraphrases without them, a request
# naming the value: the person says which, so the conflict needs no question this turn).
SLOTS = (
    (
        "Tests",
        "use",
        ("pytest", "unittest", "nose2"),
        ("fix the failing tests", "add tests for the new option", "the tests are flaky, look"),
        ("make the suite green again", "check nothing regressed before merging"),
        "run the tests with {v} and fix what fails",
    ),
    (
        "The formatter",
        "is",
        ("black", "yapf", "autopep8"),
        ("run the formatter on everything", "set up the formatter in pre-commit"),
        ("tidy up the code style", "the diff has style noise, clean it"),
        "reformat everything with {v}",
    ),
    (
        "The database",
        "is",
        ("postgres", "sqlite", "mysql"),
        ("add a database migration for the new column", "speed up the database queries"),
        ("add a migration for the new column", "why are these queries so slow"),
        "write the migration for {v}",
    ),
    (
        "Docs",
        "use",
        ("sphinx", "mkdocs"),
        ("update the docs for the new flag", "build the docs locally"),
        ("explain the new flag in the manual", "the manual is out of date"),
        "update the {v} pages for the new flag",
    ),
    (
        "Type checks",
        "use",
        ("mypy", "pyright"),
        ("fix the type checks", "add type checks to CI"),
        ("make the annotations pass", "annotations are failing in CI"),
        "make {v} pass",
    ),
    (
        "Releases",
        "use",
        ("semantic versioning", "calendar versioning"),
        ("prepare the next releases", "tag the releases properly"),
        ("bump the version number", "cut a new version"),
        "bump the version with {v}",
    ),
)

# (statement, a request using its cue words, a paraphrase without them); {n} is a module name.
WEAK = (
    (
        "The {n} code is thread-safe",
        "add a lock where {n} code is not thread-safe",
        "look for race conditions under concurrent load",
    ),
    (
        "The {n} code retries failed requests",
        "check how {n} code retries failed requests",
        "make network errors less fatal",
    ),
    (
        "The {n} code reads its settings from environment variables",
        "document which environment variables {n} code reads",
        "list what has to be configured before deploying",
    ),
    (
        "The {n} output is cached on disk",
        "clear the cached {n} output on disk",
        "stale results are shown after a change",
    ),
    (
        "The {n} code supports Windows paths",
        "fix Windows paths handling in {n} code",
        "make it work on the other operating system",
    ),
)

REF_REQUESTS = (
    "fix the bug in the {n}",
    "refactor the {n} module",
    "why is the {n} so slow",
    "add a docstring to the {n}",
    "simplify the {n}",
)
NONE_REQUESTS = (
    "update the changelog",
    "write release notes for this week",
    "explain what this function does",
    "rename this variable to something clear",
    "add a license header",
)
EXTRA_RULES = ("Always run the linter before committing.", "Never commit secrets.")


# ------------------------------------------------------------------ sessions
@dataclass
class SlotSpec:
    subject: str
    verb: str
    a: str | None  # AGENTS.md's value (None: not there)
    b: str | None  # CLAUDE.md's value
    truth: str
    topic: int  # index into SLOTS

    @property
    def conflict(self) -> bool:
        return self.a is not None and self.b is not None and self.a != self.b


@dataclass
class WeakSpec:
    statement: str
    truth: bool
    cue: str  # a request using its cue words
    paraphrase: str  # one about the same thing, without them


@dataclass
class RefSpec:
    noun: str
    files: list[str]
    intended: str

    @property
    def ambiguous(self) -> bool:
        return len(self.files) > 1


@dataclass
class Turn:
    request: str
    context: str  # the active document
    kind: str  # slot, weak, ref, none
    item: int  # index into the session's slots, weak facts or refs
    named: bool  # the request or the context itself settles the item
    dismiss: float  # < --dismiss: the person dismisses a question this turn
    evidence: dict[str, tuple[float, float]]  # item id -> (event draw, noise draw)


@dataclass
class Session:
    seed: int
    files: dict[str, str]
    slots: list[SlotSpec]
    weak: list[WeakSpec]
    refs: list[RefSpec]
    turns: list[Turn] = field(default_factory=list)

    def digest(self) -> str:
        body = json.dumps([[t.request, t.context] for t in self.turns]).encode()
        return hashlib.sha1(body).hexdigest()[:16]


def make_session(seed: int, turns: int) -> Session:
    """A session from its seed alone: workspace, rules files, weak facts, the requests."""
    rng = random.Random(seed)
    files: dict[str, str] = {"README.md": "# project\n", "src/util.py": "def helper():\n    pass\n"}
    refs = []
    for noun in rng.sample(NOUNS, 5):
        where = rng.sample(DIRS, rng.choice((2, 3)) if rng.random() < 0.6 else 1)
        paths = sorted(f"{d}/{noun}.py" for d in where)
        for p in paths:
            files[p] = f"def handle_{noun}():\n    return None\n"
        files[f"tests/test_{noun}.py"] = f"def test_{noun}():\n    assert True\n"
        refs.append(RefSpec(noun, paths, rng.choice(paths)))
    slots, agents, claude = [], list(EXTRA_RULES[:1]), list(EXTRA_RULES[1:])
    for topic in sorted(rng.sample(range(len(SLOTS)), 4)):
        subject, verb, values = SLOTS[topic][:3]
        if rng.random() < 0.65:
            a, b = rng.sample(values, 2)
            spec = SlotSpec(subject, verb, a, b, rng.choice((a, b)), topic)
        else:
            v = rng.choice(values)
            spec = SlotSpec(subject, verb, v, v if rng.random() < 0.5 else None, v, topic)
        slots.append(spec)
        if spec.a:
            agents.append(f"{subject} {verb} {spec.a}")
        if spec.b:
            claude.append(f"{subject} {verb} {spec.b}")
    files["AGENTS.md"] = "# Agents\n\n" + "".join(f"- {r}\n" for r in agents)
    files["CLAUDE.md"] = "# Notes\n\n" + "".join(f"- {r}\n" for r in claude)
    weak = []
    for i, noun in zip(rng.sample(range(len(WEAK)), 3), rng.sample(NOUNS, 3), strict=True):
        statement, cue, para = (text.format(n=noun) for text in WEAK[i])
        weak.append(WeakSpec(statement, rng.random() < 0.5, cue, para))
    session = Session(seed, files, slots, weak, refs)
    paths = sorted(files)
    item_ids = [f"slot{i}:{side}" for i in range(len(slots)) for side in "ab"]
    item_ids += [f"weak{j}" for j in range(len(weak))]
    for _ in range(turns):
        kind = rng.choices(("slot", "weak", "ref", "none"), (0.3, 0.25, 0.3, 0.15))[0]
        context, named = rng.choice(paths), False
        if kind == "slot":
            item = rng.randrange(len(slots))
            cue, para, say = SLOTS[slots[item].topic][3:]
            u = rng.random()
            if u < 0.15:
                request, named = say.format(v=slots[item].truth), True
            else:
                request = rng.choice(cue if u < 0.65 else para)
        elif kind == "weak":
            item = rng.randrange(len(weak))
            request = weak[item].cue if rng.random() < 0.6 else weak[item].paraphrase
        elif kind == "ref":
            item = rng.randrange(len(refs))
            ref = refs[item]
            request = rng.choice(REF_REQUESTS).format(n=ref.noun)
            u = rng.random()
            others = [p for p in paths if p not in ref.files]
            rivals = [p for p in ref.files if p != ref.intended]
            if u < 0.2:
                request, named = f"{request} in {ref.intended}", True
                context = rng.choice(others)
            elif u < 0.5:
                context, named = ref.intended, True
            elif u < 0.6 and rivals:  # open on the other one: the editor misleads
                context = rng.choice(rivals)
            else:
                context = rng.choice(others)
        else:
            item, request = -1, rng.choice(NONE_REQUESTS)
        evidence = {i: (rng.random(), rng.random()) for i in item_ids}
        session.turns.append(Turn(request, context, kind, item, named, rng.random(), evidence))
    return session


# ------------------------------------------------------------------- arms
def entropy_rank(candidates, turn, request, lookup):
    """Expected entropy reduction over the options' effects: an answer settles every fact an
    option names, so it removes their binary entropies; a choice among n options naming no
    fact removes log2(n). Ties keep the order given (impact order)."""

    def bits(c: float) -> float:
        return 0.0 if c <= 0.0 or c >= 1.0 else -(c * math.log2(c) + (1 - c) * math.log2(1 - c))

    def info(cand) -> float:
        keys = {
            str(k)
            for o in cand.options
            for k in [*(o.get("acted") or []), *(o.get("contradicted") or [])]
        }
        live = [f for f in map(lookup, sorted(keys)) if f is not None and f.live]
        if live:
            return round(sum(bits(f.confidence) for f in live), 6)
        return round(math.log2(len(cand.options)), 6) if cand.options else 0.0

    scored = sorted(((-info(c), i, c) for i, c in enumerate(candidates)), key=lambda s: s[:2])
    return [c for _, _, c in scored]


def keep_order(candidates, turn, request, lookup):
    return list(candidates)


@contextlib.contextmanager
def arm_ranking(arm: str):
    """The queue for an arm: the ablations replace the value ranking's order (the module
    attribute the queue calls), keeping its live-uncertainty gate."""
    original = question_value.rank
    if arm == "gate":
        question_value.rank = keep_order
    elif arm == "entropy":
        question_value.rank = entropy_rank
    try:
        yield "seed" if arm in ("seed", "editor") else "value"
    finally:
        question_value.rank = original


class ExpiryLog(logging.Handler):
    """Counts the live gate's expiries by reason (the queue logs the id and the reason)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.reasons: dict[str, int] = {}

    def emit(self, record: logging.LogRecord) -> None:
        m = re.search(r"expired: (\w+)$", record.getMessage())
        if m:
            self.reasons[m.group(1)] = self.reasons.get(m.group(1), 0) + 1


def new_counts() -> dict[str, Any]:
    return {
        "turns": 0,
        "questions": 0,
        "answered": 0,
        "dismissed": 0,
        "useful": 0,
        "over_asking": 0,
        "wrong_assumptions": 0,
        "by_kind": {},
        "over_by_kind": {},
        "wrong_by_cause": {},
        "ref_picks": {},
        "live_expired": {},
    }


@contextlib.contextmanager
def arm_queue(arm: str, where: Path, files: dict[str, str]):
    """One arm's own copy of the workspace and SQLite store, its queue, and a log of the live
    gate's expiries; yields (queue, workspace root, expiry log)."""
    root = where / f"{arm}-ws"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    store = open_store(f"sqlite:///{where / (arm + '.db')}")
    handler = ExpiryLog()
    qlog = logging.getLogger("talos_ls.gates.question_queue")
    level = qlog.level
    qlog.addHandler(handler)
    qlog.setLevel(logging.INFO)
    try:
        with arm_ranking(arm) as ranking:
            yield QuestionQueue(store, ranking=ranking, gate_threshold=GATE), root, handler
    finally:
        qlog.removeHandler(handler)
        qlog.setLevel(level)
        store.close()


class Host:
    """What `host._prepare` does each turn, on one arm's queue and workspace copy."""

    def __init__(self, queue: QuestionQueue, root: Path) -> None:
        self.queue, self.root = queue, root
        self.facts, self.reconciler = queue.facts, queue.reconciler
        self.rules = RulesFiles(self.facts, self.reconciler)
        self.assembler = ContextAssembler(self.facts, confidence_gate_threshold=GATE)
        self.index = WorkspaceIndex.build(root)
        self.rules.sync(AGENT, root)

    def turn(self, t: int, request: str, context: str, worked_on: list, editor: bool):
        """Rules sync, reconcile pass, assembly (the editor's path in the cues), note_use, the
        three producers (`resolve` with the editor's evidence when `editor`), next_question.
        Returns (the question delivered or None, the resolution record)."""
        queue = self.queue
        self.rules.sync(AGENT, self.root)
        self.reconciler.reconcile_pass(AGENT)
        cues = f"{request}\n{context}"
        assembled = self.assembler.assemble(AGENT, cues)
        queue.note_use(AGENT, assembled.keys, t)
        queue.propose_from_gate(AGENT, assembled.metadata, t, request)
        evidence = None
        if editor:
            touched = [p for p in reversed(worked_on[-TOUCHED_TASKS:]) if p is not None]
            earlier = tuple(answered_referents(queue, AGENT))
            evidence = Evidence(active=context, touched=tuple(touched), answers=earlier)
        resolution = resolve(AGENT, t, request, self.index, evidence)
        queue.propose_from_resolution(resolution, t)
        queue.propose_from_disjunctions(AGENT, t)
        return queue.next_question(AGENT, t, query_cues=cues), resolution


def run_arm(session: Session, arm: str, where: Path, dismiss_p: float, evidence_p: float):
    """Replay `session` for one arm; returns (counts, the (request, context) fed each turn)."""
    counts, fed = new_counts(), []
    with arm_queue(arm, where, session.files) as (queue, root, handler):
        editor = arm not in NO_EDITOR
        _replay(session, queue, root, dismiss_p, evidence_p, counts, fed, editor)
    counts["live_expired"] = dict(sorted(handler.reasons.items()))
    return counts, fed


def _replay(session, queue, root, dismiss_p, evidence_p, counts, fed, editor) -> None:
    facts = queue.facts
    host = Host(queue, root)
    weak_keys = []
    for spec in session.weak:  # each weak once contradicted: 0.5 -> 0.3, below the gate
        key = facts.add(AGENT, spec.statement, source="model")
        facts.observe({key: "contradicted"})
        weak_keys.append(key)
    side_keys: dict[tuple[int, str], str] = {}
    for f in facts.list(AGENT):
        for i, spec in enumerate(session.slots):
            if f.subject and normalize_text(f.subject) == normalize_text(spec.subject):
                side_keys[(i, "a" if f.origin == "AGENTS.md" else "b")] = f.key
    # What a fact key stands for, and whether it is true: the bench's, never the queue's.
    truth_of: dict[str, tuple[str, int, bool]] = {}
    for (i, side), key in side_keys.items():
        value = session.slots[i].a if side == "a" else session.slots[i].b
        truth_of[key] = ("slot", i, value == session.slots[i].truth)
    for j, key in enumerate(weak_keys):
        truth_of[key] = ("weak", j, session.weak[j].truth)
    answers: list[tuple[str, int, int]] = []  # (kind, item, turn): answers not over-asking
    topics: list[tuple[str, int, int]] = []
    worked_on: list[str | None] = []  # the file each turn's task worked on (ref turns)

    for t, turn in enumerate(session.turns, start=1):
        fed.append((turn.request, turn.context))
        picked = None  # the reference this turn's answer picked
        counts["turns"] += 1
        topics.append((turn.kind, turn.item, t))
        # What the host does before a task (host._prepare), the editor's path in the cues.
        q, resolution = host.turn(t, turn.request, turn.context, worked_on, editor)
        if q is not None:
            counts["questions"] += 1
            counts["by_kind"][q.kind] = counts["by_kind"].get(q.kind, 0) + 1
            about, reply, settled = _judge(q, session, turn, t, truth_of, facts)
            counts["over_asking"] += settled
            if settled:
                counts["over_by_kind"][q.kind] = counts["over_by_kind"].get(q.kind, 0) + 1
            if turn.dismiss < dismiss_p or reply is None:
                counts["dismissed"] += 1
                queue.record_answer(q, "", t)
            else:
                result = queue.record_answer(q, reply, t)
                if result.classification == "answered":
                    counts["answered"] += 1
                    if about is not None and about[0] == "ref":
                        picked = about[1]
                    if about is not None and not settled:
                        answers.append((about[0], about[1], t))
        pick, why = _pick(session, turn, resolution, picked)
        worked_on.append(pick)
        if why:
            counts["ref_picks"][why] = counts["ref_picks"].get(why, 0) + 1
        if _wrong(session, turn, facts, side_keys, weak_keys, pick):
            counts["wrong_assumptions"] += 1
            cause = why if turn.kind == "ref" else turn.kind
            counts["wrong_by_cause"][cause] = counts["wrong_by_cause"].get(cause, 0) + 1
        _evidence(session, turn, facts, side_keys, weak_keys, evidence_p)
    for kind, item, at in answers:  # useful: the task used it then or later, or it picked
        if kind == "ref" or any((k, i) == (kind, item) and u >= at for k, i, u in topics):
            counts["useful"] += 1


def _judge(q, session, turn, t, truth_of, facts):
    """(what the question is about, the person's reply, whether context or evidence had
    already settled it when it was asked)."""
    if q.kind == "referent":
        labels = {normalize_text(o["label"]) for o in q.options}
        for i, ref in enumerate(session.refs):
            if {normalize_text(p) for p in ref.files} == labels:
                settled = turn.kind == "ref" and turn.item == i and turn.named
                return ("ref", i), ref.intended, settled
        return None, None, False
    known = [truth_of[k] for k in q.target_keys if k in truth_of]
    if not known:
        return None, None, False
    kind, item, _ = known[0]
    reply = None
    for option in q.options:  # the option whose effects match the truth
        acted = [truth_of[k][2] for k in option.get("acted") or [] if k in truth_of]
        contra = [not truth_of[k][2] for k in option.get("contradicted") or [] if k in truth_of]
        if (acted or contra) and all(acted + contra):
            reply = option["label"]
            break
    live = [f for f in (facts.get(k) for k in q.target_keys) if f is not None]
    if q.kind == "disjunction":
        conf = sorted((f.confidence for f in live if f.live), reverse=True)
        settled = len(conf) < 2 or (conf[0] >= 0.7 and conf[1] <= 0.3)
        settled = settled or (turn.kind == "slot" and turn.item == item and turn.named)
    else:
        settled = all(not f.live or f.confidence >= GATE for f in live)
    return (kind, item), reply, settled


def _pick(session, turn, resolution, picked) -> tuple[str | None, str]:
    """The file a reference turn's task works on, and why. This turn's answer or the request
    naming it: the intended file ("ref: known"); an earlier answer is only remembered through
    `resolve`'s "earlier answer" evidence, as in the host. Else the model follows what its
    prompt shows: what `resolve` settled from the evidence ("ref: <rule>", the prompt's note
    says which and why), else the active document when it is a candidate, in every arm ("ref:
    open file", right or wrong: the person may have the other one open), else the first
    candidate ("ref: guess"). None for other turns."""
    if turn.kind != "ref":
        return None, ""
    ref = session.refs[turn.item]
    if not ref.ambiguous or picked == turn.item or turn.request.endswith(ref.intended):
        return ref.intended, "ref: known"
    for r in resolution.references:
        if r["status"] == "resolved" and set(r["candidates"]) == set(ref.files):
            return r["resolved_text"], f"ref: {r['evidence']['rule']}"
    if turn.context in ref.files:
        return turn.context, "ref: open file"
    return ref.files[0], "ref: guess"


def _wrong(session, turn, facts, side_keys, weak_keys, pick) -> int:
    """1 when the turn's task proceeds on something the person would have corrected."""
    if turn.kind == "slot":
        spec = session.slots[turn.item]
        if not spec.conflict or turn.named:
            return 0
        sides = [(s, facts.get(side_keys[(turn.item, s)])) for s in "ab"]
        live = [(s, f) for s, f in sides if f is not None and f.live]
        if not live:
            return 0
        # The highest confidence; on a tie, the first rules file the prompt shows (AGENTS.md).
        side = max(live, key=lambda sf: (sf[1].confidence, sf[0] == "a"))[0]
        return int((spec.a if side == "a" else spec.b) != spec.truth)
    if turn.kind == "weak":
        f = facts.get(weak_keys[turn.item])
        used = f is not None and f.live and f.confidence >= GATE  # the gate lets it through
        return int(used and not session.weak[turn.item].truth)
    if turn.kind == "ref":
        return int(pick != session.refs[turn.item].intended)
    return 0


def _evidence(session, turn, facts, side_keys, weak_keys, p) -> None:
    """The world's evidence after the task: per fact, with probability p, one observation that
    agrees with the truth 9 times out of 10."""
    outcomes = {}
    for (i, side), key in side_keys.items():
        spec = session.slots[i]
        if not spec.conflict:
            continue
        event, noise = turn.evidence[f"slot{i}:{side}"]
        true = (spec.a if side == "a" else spec.b) == spec.truth
        if event < p:
            outcomes[key] = "acted" if true == (noise >= 0.1) else "contradicted"
    for j, key in enumerate(weak_keys):
        event, noise = turn.evidence[f"weak{j}"]
        if event < p:
            outcomes[key] = "acted" if session.weak[j].truth == (noise >= 0.1) else "contradicted"
    live = {k: v for k, v in outcomes.items() if (f := facts.get(k)) is not None and f.live}
    if live:
        facts.observe(live)


# ------------------------------------------------------------ held-out requests
# Requests written by hand (bench/question_cases.py), not from the vocabulary above, each judged
# once after a preamble that sets the state; bench/README.md defines every count.
HELD_OUT_COUNTS = (
    "turns",
    "budget_open",
    "budget_as_designed",
    "questions",
    "over_asks",
    "useful",
    "useful_changed",
    "misses",
    "wrong",
    "to_state",
    "stated",
    "unstated",
    "unstated_summary",
)
HELD_OUT_CAUSES = ("over_by_cause", "over_by_words", "miss_by_cause", "wrong_by_cause")
HELD_OUT_CAUSES += ("unstated_by_cause", "unstated_summary_by_cause")
_NOT = re.compile(r"\bnot\b")
BUDGET_OPEN_AFTER = {"quiet": True, "open": True, "answered": True}  # the others: closed


def held_out_cases() -> list[tuple[Case, str]]:
    """Every (case, preamble) judged: each case after each preamble of its class."""
    return [(c, p) for c in CASES for p in CLASS_PREAMBLES[c.cls]]


def _candidates(about: tuple | None) -> tuple[str, ...]:
    """The files a module reference can mean (several for an ambiguous one); () otherwise."""
    return MODULES[about[1]] if about is not None and about[0] == "ref" else ()


def _file(candidate: object) -> str:
    """A candidate's file: a symbol's ("parse in src/parser.py") is the file it is in."""
    return str(candidate).rpartition(" in ")[2]


def _reference(resolution, files: tuple[str, ...]) -> dict | None:
    """The reference of `resolution` about `files` (the most of them among its candidates)."""
    best, shared = None, 0
    for ref in resolution.references:
        names = {_file(c) for c in [*(ref.get("candidates") or []), ref.get("resolved_text")]}
        if len(names & set(files)) > shared:
            best, shared = ref, len(names & set(files))
    return best


def held_out_pick(case: Case, picked: bool, resolution) -> tuple[str, str]:
    """The file the task works on for an ambiguous module, and why: what the person answered
    this turn or the request says ("known"); else what the prompt says: what the evidence
    settled ("<rule>"), the product's stated assumption ("assumed"), the earlier answer taken
    against the editor; else the open file when it is a candidate ("open file"), else the first
    candidate ("guess"); "not seen: ..." when no reference to it was found at all."""
    files, intended = MODULES[case.about[1]], case.about[2]
    if picked or case.named:
        return intended, "known"
    ref = _reference(resolution, files)
    if ref is not None:
        weighed = ref.get("evidence") or {}
        assumed = ref.get("assumption")
        if ref.get("status") == "resolved" and weighed.get("decided"):
            return _file(ref["resolved_text"]), str(weighed["rule"])
        if isinstance(assumed, dict) and _file(assumed.get("candidate")) in files:
            return _file(assumed["candidate"]), "assumed"
        if "against" in weighed:
            return str(weighed["candidates"][0]), "earlier answer, against the editor"
    seen = "" if ref is not None else "not seen: "
    if case.context in files:
        return case.context, f"{seen}open file"
    return files[0], f"{seen}guess"


def names_assumption(line: str, pick: str, others: set[str]) -> bool:
    """`line` says `pick` was taken and names each of `others` after a "not" that follows it
    ("'the parser' is taken to mean tools/parser.py (...), not src/parser.py.")."""
    at = line.find(pick)
    if at < 0:
        return False
    rest = line[at + len(pick) :]
    m = _NOT.search(rest)
    return m is not None and all(o in rest[m.end() :] for o in others)


def unstated_cause(resolution, files: tuple[str, ...], pick: str) -> str | None:
    """None when the assumption `pick` is stated for the task's prompt: by the reference's
    `assumption` field when the product gives one (its candidate, every other one in its
    "not"), else by a line of `evidence_notes` naming it as taken and the others as not;
    otherwise why not."""
    ref = _reference(resolution, files)
    if ref is None:
        return "not seen"
    others = set(files) - {pick}
    assumed = ref.get("assumption")
    if isinstance(assumed, dict):
        # a symbol candidate ("parse in src/parser.py") names its file
        named = {_file(n) for n in assumed.get("not") or []}
        ok = _file(assumed.get("candidate")) == pick and others <= named
        return None if ok else "assumption not naming it and the others"
    notes = evidence_notes(resolution)
    if any(names_assumption(line, pick, others) for line in notes):
        return None
    if any(all(f in line for f in files) for line in notes):
        return "ambiguity noted, nothing assumed"
    return "no note"


class HeldOut:
    """One arm replaying one held-out case after its preamble, on its own store."""

    def __init__(self, queue: QuestionQueue, root: Path, editor: bool) -> None:
        self.host, self.editor = Host(queue, root), editor
        self.queue, self.facts = queue, queue.facts
        self.weak_keys = []
        for statement, _ in WEAK_FACTS:  # noted by the model, contradicted once: 0.3
            key = self.facts.add(AGENT, statement, source="model")
            self.facts.observe({key: "contradicted"})
            self.weak_keys.append(key)
        self.slot_keys: dict[str, dict[str, str]] = {}  # subject -> {origin: key}
        for f in self.facts.list(AGENT):
            for subject in SLOT_TRUTH:
                if f.subject and normalize_text(f.subject) == normalize_text(subject):
                    self.slot_keys.setdefault(subject, {})[str(f.origin)] = f.key
        self.answered: dict[str, str] = {}  # module -> the file the person said it means
        self.worked_on: list[str | None] = []
        self.delivered_at: int | None = None

    # -- the truth, never shown to the queue
    def about(self, q) -> tuple | None:
        """What a delivered question is about, in the cases' terms (without the file): for a
        referent, the ambiguous module most of whose files are among its options."""
        if q.kind == "referent":
            labels = {normalize_text(str(o["label"])) for o in q.options}
            best, shared = None, 0
            for noun, files in MODULES.items():
                n = len(labels & {normalize_text(f) for f in files})
                if len(files) > 1 and n > shared:
                    best, shared = ("ref", noun), n
            return best
        for subject, keys in self.slot_keys.items():
            if set(q.target_keys) & set(keys.values()):
                return ("slot", subject)
        for j, key in enumerate(self.weak_keys):
            if key in q.target_keys:
                return ("weak", j)
        return None

    def reply(self, q, about: tuple | None, case: Case) -> str:
        """The person's answer, the truth: for "which parser", the file this request means when
        it is about the parser, else the one they mean by it in general ("" when that is no
        option: a dismissal)."""
        if about is not None and about[0] == "ref":
            meant = MODULES[about[1]][0]
            if case.about is not None and case.about[:2] == about:
                meant = str(case.about[2])
            labels = [str(o["label"]) for o in q.options]
            return next((x for x in labels if normalize_text(x) == normalize_text(meant)), "")
        for option in q.options:
            acted = [str(k) for k in option.get("acted") or []]
            contra = [str(k) for k in option.get("contradicted") or []]
            if about is not None and about[0] == "slot":
                truth = SLOT_TRUTH[about[1]]
                true = [self.facts.get(k).value == truth for k in acted]
                true += [self.facts.get(k).value != truth for k in contra]
            elif about is not None and about[0] == "weak":
                truth = WEAK_FACTS[about[1]][1]
                true = [truth for _ in acted] + [not truth for _ in contra]
            else:
                return ""
            if true and all(true):
                return str(option["label"])
        return ""

    def slot_open(self, subject: str) -> bool:
        """Both rules of the slot live and not separated by the evidence (>= 0.7 / <= 0.3)."""
        facts = [self.facts.get(k) for k in self.slot_keys[subject].values()]
        conf = sorted((f.confidence for f in facts if f is not None and f.live), reverse=True)
        return len(conf) == 2 and not (conf[0] >= 0.7 and conf[1] <= 0.3)

    def slot_side(self, subject: str) -> str | None:
        """The value a task proceeds on: the live side of higher confidence (a tie: AGENTS.md's,
        the first the prompt shows)."""
        sides = [(o, self.facts.get(k)) for o, k in self.slot_keys[subject].items()]
        live = [(o, f) for o, f in sides if f is not None and f.live]
        if not live:
            return None
        return max(live, key=lambda of: (of[1].confidence, of[0] == "AGENTS.md"))[1].value

    def settled(self, case: Case) -> bool:
        """What the person means was determined, in truth, before any question: nothing to ask
        (one candidate, or not about anything asked of), the request says which, the open file
        is the one meant and no earlier answer disagrees, or the earlier answer is the one meant
        and no other candidate is open; a slot the request names or the evidence settled."""
        about = case.about
        if about is None or about[0] not in ("ref", "slot"):
            return True
        if about[0] == "slot":
            return case.named or not self.slot_open(about[1])
        files, intended = MODULES[about[1]], about[2]
        if len(files) < 2 or case.named:
            return True
        earlier = self.answered.get(about[1])
        active = case.context if case.context in files else None
        if active == intended:
            return earlier in (None, intended)
        return earlier == intended and active is None

    # -- a turn
    def turn(self, t: int, case: Case) -> dict[str, Any]:
        """What the host does for `case` at turn `t`, the person's answer, and the truth about
        it: the record `judge` counts."""
        budget_open = self.delivered_at is None or t >= self.delivered_at + self.queue.budget_turns
        settled = self.settled(case)
        slot = case.about[1] if case.about is not None and case.about[0] == "slot" else None
        before = self.slot_side(slot) if slot else None
        slot_open = self.slot_open(slot) if slot else False
        q, resolution = self.host.turn(t, case.request, case.context, self.worked_on, self.editor)
        about = self.about(q) if q is not None else None
        on_subject = about is not None and case.about is not None and case.about[:2] == about
        picked = False
        if q is not None:
            self.delivered_at = t
            reply = self.reply(q, about, case)
            result = self.queue.record_answer(q, reply, t)
            if result.classification == "answered" and about is not None and about[0] == "ref":
                self.answered[about[1]] = reply
                picked = on_subject
        files = _candidates(case.about)
        rec: dict[str, Any] = {
            "turn": t,
            "budget_open": budget_open,
            "settled": settled,
            "asked": None if q is None else q.kind,
            "question": None if q is None else q.question_text,
            "on_subject": on_subject,
            "pick": files[0] if len(files) == 1 else None,
            "why": "",
            "notes": evidence_notes(resolution),
        }
        if len(files) > 1:
            rec["pick"], rec["why"] = held_out_pick(case, picked, resolution)
            rec["would_pick"] = held_out_pick(case, False, resolution)[0]
            rec["seen"] = _reference(resolution, files) is not None
            rec["unstated"] = None
            if not (picked or case.named):
                rec["unstated"] = unstated_cause(resolution, files, rec["pick"])
                # after the task: what it worked on (the file picked), said by the host
                after = worked_on(case.request, resolution, self.host.index, [rec["pick"]], [])
                others = set(files) - {rec["pick"]}
                rec["said_after"] = any(names_assumption(x, rec["pick"], others) for x in after)
        if slot:
            rec["pick"], rec["would_pick"], rec["slot_open"] = (
                self.slot_side(slot),
                before,
                slot_open,
            )
        if q is not None and not on_subject:
            rec["words"] = self.words(q, about, case)
        self.worked_on.append(rec["pick"] if files else None)
        return rec

    def words(self, q, about: tuple | None, case: Case) -> str:
        """Which words the delivered question shared with the request: a word of its subject
        (the facts it names, its options, the module), only words of its template, only words
        of the open file's path (the cues carry it), or none."""
        texts = [str(f.statement) for f in map(self.facts.get, q.target_keys) if f is not None]
        if q.kind != "confirmation":
            texts += [str(o.get("label", "")) for o in q.options]
        if about is not None and about[0] == "ref":
            texts.append(about[1])
        labels = [str(o.get("label", "")) for o in q.options]
        asked = question_value.request_stems([q.question_text, *labels]) or frozenset()
        subject = question_value.request_stems(texts) or frozenset()
        shared = asked & (question_value.request_stems(case.request) or frozenset())
        if shared & subject:
            return "a subject word"
        if shared:
            return "template words only"
        if asked & (question_value.request_stems(case.context) or frozenset()):
            return "the open file's path only"
        return "no shared word"


def judge(case: Case, rec: dict[str, Any]) -> dict[str, Any]:
    """The counts of one judged turn (bench/README.md defines each)."""
    about, asked, on_subject = case.about, rec["asked"], rec["on_subject"]
    out: dict[str, Any] = {"over": None, "useful": False, "changed": False, "miss": None}
    out.update({"wrong": None, "to_state": False, "unstated": None, "unstated_summary": None})
    if asked is not None:
        if on_subject and rec["settled"]:
            out["over"] = "already settled"
        elif not on_subject:
            if case.cls in ("boilerplate", "other subject"):
                out["over"] = case.cls
            else:
                out["over"] = {
                    "a subject word": "other subject",
                    "template words only": "boilerplate",
                }.get(rec["words"], rec["words"])
        else:
            out["useful"] = True
            out["changed"] = rec.get("would_pick") != (
                about[2] if about[0] == "ref" else SLOT_TRUTH[about[1]]
            )
    files = _candidates(about)
    ambiguous = len(files) > 1 or (about is not None and about[0] == "slot" and rec["slot_open"])
    if ambiguous and not rec["settled"] and rec["budget_open"] and not on_subject:
        if len(files) > 1 and not rec["seen"]:
            out["miss"] = "not seen"
        else:
            out["miss"] = "held back" if asked is None else "another question asked"
    if len(files) > 1:
        if rec["pick"] != about[2]:
            out["wrong"] = f"ref: {rec['why']}"
        if rec["why"] != "known":
            out["to_state"] = True
            out["unstated"] = rec["unstated"]
            if rec["unstated"] and not rec.get("said_after"):  # neither in the prompt nor after
                out["unstated_summary"] = rec["unstated"]
    elif about is not None and about[0] == "slot" and rec["slot_open"] and not case.named:
        out["wrong"] = "slot" if rec["pick"] != SLOT_TRUTH[about[1]] else None
    return out


def run_held_out_case(case: Case, preamble: str, arm: str, where: Path) -> dict[str, Any]:
    """Replay the preamble then `case` for one arm; the judged turn's record and counts."""
    with arm_queue(arm, where, FILES) as (queue, root, _):
        replay = HeldOut(queue, root, editor=arm not in NO_EDITOR)
        for t, (request, context, about) in enumerate(PREAMBLES[preamble], start=1):
            replay.turn(t, Case(request, context, "preamble", "en", about))
        rec = replay.turn(len(PREAMBLES[preamble]) + 1, case)
    rec.update(judge(case, rec))
    rec["budget_as_designed"] = rec["budget_open"] == BUDGET_OPEN_AFTER.get(preamble, False)
    return rec


def new_held_out_counts() -> dict[str, Any]:
    counts: dict[str, Any] = {name: 0 for name in HELD_OUT_COUNTS}
    counts.update({name: {} for name in HELD_OUT_CAUSES})
    counts["by_class"], counts["by_language"] = {}, {}
    return counts


def _add(counts: dict[str, Any], rec: dict[str, Any]) -> None:
    def bump(table: dict, key: str) -> None:
        table[key] = table.get(key, 0) + 1

    counts["turns"] += 1
    counts["budget_open"] += rec["budget_open"]
    counts["budget_as_designed"] += rec["budget_as_designed"]
    counts["questions"] += rec["asked"] is not None
    counts["useful"] += rec["useful"]
    counts["useful_changed"] += rec["changed"]
    counts["to_state"] += rec["to_state"]
    counts["stated"] += rec["to_state"] and rec["unstated"] is None
    for name, table, cause in (
        ("over_asks", "over_by_cause", rec["over"]),
        ("misses", "miss_by_cause", rec["miss"]),
        ("wrong", "wrong_by_cause", rec["wrong"]),
        ("unstated", "unstated_by_cause", rec["unstated"] if rec["to_state"] else None),
        ("unstated_summary", "unstated_summary_by_cause", rec["unstated_summary"]),
    ):
        if cause is not None:
            counts[name] += 1
            bump(counts[table], cause)
    if rec["over"] is not None:
        bump(counts["over_by_words"], rec.get("words") or "the subject (already settled)")


def run_held_out(
    arms: tuple[str, ...] = ARMS,
    trace: str | None = None,
    cases: list[tuple[Case, str]] | None = None,
) -> dict[str, Any]:
    """Every held-out case after each of its preambles (or `cases`), in every arm."""
    cases = held_out_cases() if cases is None else cases
    started = time.perf_counter()
    totals = {arm: new_held_out_counts() for arm in arms}
    records: dict[str, list[dict[str, Any]]] = {arm: [] for arm in arms}
    for case, preamble in cases:
        for arm in arms:
            with tempfile.TemporaryDirectory(prefix="talos-qv-") as tmp:
                rec = run_held_out_case(case, preamble, arm, Path(tmp))
            rec.update(cls=case.cls, lang=case.lang, preamble=preamble, request=case.request)
            rec["context"] = case.context
            records[arm].append(rec)
            total = totals[arm]
            _add(total, rec)
            for key, group in (("by_class", case.cls), ("by_language", case.lang)):
                _add(total[key].setdefault(group, new_held_out_counts()), rec)
    for total in totals.values():
        per = 100 / max(total["turns"], 1)
        total["over_asks_per_100_turns"] = round(total["over_asks"] * per, 2)
    classes = {c: sum(1 for x, _ in cases if x.cls == c) for c in CLASSES}
    languages = {g: sum(1 for x, _ in cases if x.lang == g) for g in LANGUAGES}
    result = {
        "cases": len({case for case, _ in cases}),
        "judged_turns": len(cases),
        "turns_by_class": classes,
        "turns_by_language": languages,
        "seconds": round(time.perf_counter() - started, 1),
        "arms": totals,
        "targets": {
            a: held_out_targets(totals["seed"], totals[a]) for a in arms if "seed" in totals
        },
    }
    if trace:
        result["trace"] = records[trace]
    return result


def held_out_targets(seed: dict, other: dict) -> dict[str, bool]:
    """Issue 31's targets: at most 1 over-ask per 100 turns, useful answers not below the
    seed's, every assumption stated."""
    return {
        "over_asks_at_most_1_per_100": other["over_asks_per_100_turns"] <= 1,
        "useful_at_least_the_seeds": other["useful"] >= seed["useful"],
        "every_assumption_stated": other["unstated"] == 0,
        "every_assumption_stated_by_the_summary": other["unstated_summary"] == 0,
    }


def held_out_table(result: dict[str, Any]) -> str:
    arms = list(result["arms"])
    out = ["| held-out | " + " | ".join(arms) + " |", "|---|" + "---:|" * len(arms)]

    def cell(arm: str, name: str) -> Any:
        return result["arms"][arm][name]

    def row(label: str, values) -> None:
        out.append(f"| {label} | " + " | ".join(str(v) for v in values) + " |")

    row(
        "judged turns (budget open; as the preamble meant)",
        [
            f"{cell(a, 'turns')} ({cell(a, 'budget_open')}; {cell(a, 'budget_as_designed')})"
            for a in arms
        ],
    )
    row("questions", [cell(a, "questions") for a in arms])
    row("over-asks per 100 turns", [cell(a, "over_asks_per_100_turns") for a in arms])
    row("over-asks", [cell(a, "over_asks") for a in arms])
    for name, label in (("over_by_cause", "over-asks: "), ("over_by_words", "over-asks, shared: ")):
        for k in sorted({k for a in arms for k in cell(a, name)}):
            row(label + k, [cell(a, name).get(k, 0) for a in arms])
    row(
        "useful answers (changed the file or side)",
        [f"{cell(a, 'useful')} ({cell(a, 'useful_changed')})" for a in arms],
    )
    row("misses", [cell(a, "misses") for a in arms])
    for k in sorted({k for a in arms for k in cell(a, "miss_by_cause")}):
        row(f"misses: {k}", [cell(a, "miss_by_cause").get(k, 0) for a in arms])
    row("wrong assumptions", [cell(a, "wrong") for a in arms])
    for k in sorted({k for a in arms for k in cell(a, "wrong_by_cause")}):
        row(f"wrong: {k}", [cell(a, "wrong_by_cause").get(k, 0) for a in arms])
    row(
        "assumptions to state (stated)",
        [f"{cell(a, 'to_state')} ({cell(a, 'stated')})" for a in arms],
    )
    row("unstated assumptions (in the prompt)", [cell(a, "unstated") for a in arms])
    for k in sorted({k for a in arms for k in cell(a, "unstated_by_cause")}):
        row(f"unstated: {k}", [cell(a, "unstated_by_cause").get(k, 0) for a in arms])
    row(
        "unstated in the prompt and after the task (the summary)",
        [cell(a, "unstated_summary") for a in arms],
    )
    out += [
        "",
        "| by class, language: over-asks / useful / misses / wrong / unstated | "
        + " | ".join(arms)
        + " |",
    ]
    out.append("|---|" + "---:|" * len(arms))
    for group, names in (("by_class", CLASSES), ("by_language", LANGUAGES)):
        for g in names:
            per = [result["arms"][a][group].get(g) or new_held_out_counts() for a in arms]
            n = per[0]["turns"]
            if not n:
                continue
            row(
                f"{g} ({n})",
                [
                    " / ".join(
                        str(c[k]) for k in ("over_asks", "useful", "misses", "wrong", "unstated")
                    )
                    for c in per
                ],
            )
    out.append("")
    for a, met in result["targets"].items():
        if a == "seed":
            continue
        ok = ", ".join(f"{k} {'met' if v else 'NOT met'}" for k, v in met.items())
        out.append(f"- {a}: {ok}")
    return "\n".join(out)


def trace_lines(result: dict[str, Any]) -> str:
    """One line per judged turn of the traced arm: what happened and how it was counted."""
    out = []
    for r in result.get("trace", []):
        asked = f"{r['asked']}{'' if r['on_subject'] else ' (other)'}" if r["asked"] else "-"
        flags = [
            f"{k}: {r[k]}"
            for k in ("over", "miss", "wrong", "unstated", "unstated_summary")
            if r.get(k)
        ]
        flags += ["useful"] if r["useful"] else []
        out.append(
            f"[{r['cls']}/{r['lang']}/{r['preamble']}] {r['request']!r} @ {r['context']}: "
            f"budget {'open' if r['budget_open'] else 'closed'}, asked {asked}, "
            f"pick {r['pick']} ({r['why'] or '-'}); {'; '.join(flags) or 'ok'}"
        )
    return "\n".join(out)


# ------------------------------------------------------------------ report
def targets(seed: dict, other: dict) -> dict[str, bool]:
    return {
        "over_asking_at_most_half": other["over_asking"] <= seed["over_asking"] / 2,
        "useful_at_least_as_many": other["useful"] >= seed["useful"],
        "wrong_no_more": other["wrong_assumptions"] <= seed["wrong_assumptions"],
    }


def run(
    sessions: int,
    turns: int,
    seed: int,
    dismiss_p: float = 0.2,
    evidence_p: float = 0.1,
    arms: tuple[str, ...] = ARMS,
) -> dict[str, Any]:
    totals = {arm: new_counts() for arm in arms}
    digests: dict[str, list[str]] = {arm: [] for arm in arms}
    started = time.perf_counter()
    for s in range(sessions):
        session = make_session(seed * 1_000_003 + s, turns)
        for arm in arms:
            with tempfile.TemporaryDirectory(prefix="talos-qv-") as tmp:
                counts, fed = run_arm(session, arm, Path(tmp), dismiss_p, evidence_p)
            digests[arm].append(hashlib.sha1(json.dumps(fed).encode()).hexdigest()[:16])
            total = totals[arm]
            for name, value in counts.items():
                if isinstance(value, dict):
                    for k, v in value.items():
                        total[name][k] = total[name].get(k, 0) + v
                else:
                    total[name] += value
    for total in totals.values():
        total["questions_per_turn"] = round(total["questions"] / max(total["turns"], 1), 4)
    identical = all(digests[a] == digests[arms[0]] for a in arms)
    return {
        "sessions": sessions,
        "turns": turns,
        "seed": seed,
        "dismiss_p": dismiss_p,
        "evidence_p": evidence_p,
        "seconds": round(time.perf_counter() - started, 1),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "machine": platform.machine(),
        "sessions_identical": identical,
        "session_digests": digests,
        "arms": totals,
        "targets": {
            f"{a} vs {base}": targets(totals[base], totals[a])
            for base in ("seed", "editor")
            if base in totals
            for a in arms
            if a not in ("seed", base)
        },
    }


def table(result: dict[str, Any]) -> str:
    arms = list(result["arms"])
    rows = [
        ("questions per turn", "questions_per_turn"),
        ("questions", "questions"),
        ("answered", "answered"),
        ("dismissed", "dismissed"),
        ("useful", "useful"),
        ("over-asking", "over_asking"),
        ("wrong assumptions", "wrong_assumptions"),
    ]
    out = ["| | " + " | ".join(arms) + " |", "|---|" + "---:|" * len(arms)]
    for label, name in rows:
        out.append(f"| {label} | " + " | ".join(str(result["arms"][a][name]) for a in arms) + " |")
    kinds = sorted({k for a in arms for k in result["arms"][a]["by_kind"]})
    for k in kinds:
        cells = " | ".join(str(result["arms"][a]["by_kind"].get(k, 0)) for a in arms)
        out.append(f"| asked: {k} | {cells} |")
    for k in kinds:
        cells = " | ".join(str(result["arms"][a]["over_by_kind"].get(k, 0)) for a in arms)
        out.append(f"| over-asking: {k} | {cells} |")
    for k in ("slot", "weak"):
        cells = " | ".join(str(result["arms"][a]["wrong_by_cause"].get(k, 0)) for a in arms)
        out.append(f"| wrong: {k} | {cells} |")
    causes = sorted({k for a in arms for k in result["arms"][a]["ref_picks"]})
    for k in causes:  # how often each way of picking the file was taken, and wrong
        cells = " | ".join(
            f"{result['arms'][a]['ref_picks'].get(k, 0)} "
            f"({result['arms'][a]['wrong_by_cause'].get(k, 0)})"
            for a in arms
        )
        out.append(f"| {k} (wrong) | {cells} |")
    reasons = sorted({k for a in arms for k in result["arms"][a]["live_expired"]})
    for r in reasons:
        cells = " | ".join(str(result["arms"][a]["live_expired"].get(r, 0)) for a in arms)
        out.append(f"| expired: {r} | {cells} |")
    out.append("")
    for pair, met in result["targets"].items():
        ok = ", ".join(f"{k} {'met' if v else 'NOT met'}" for k, v in met.items())
        out.append(f"- {pair}: {ok}; wins: {'yes' if all(met.values()) else 'no'}")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=60)
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--dismiss", type=float, default=0.2, help="P(the person dismisses)")
    parser.add_argument("--evidence", type=float, default=0.1, help="P(evidence) per fact, turn")
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    parser.add_argument(
        "--corpus",
        choices=("both", "generated", "held-out"),
        default="both",
        help="the generated sessions, the held-out requests (bench/question_cases.py), or both",
    )
    parser.add_argument(
        "--classes",
        default=",".join(CLASSES),
        help="the held-out classes to judge (default: all)",
    )
    parser.add_argument("--trace", metavar="ARM", help="print each held-out turn of one arm")
    args = parser.parse_args()
    arms = tuple(a for a in args.arms.split(",") if a)
    if unknown := set(arms) - set(ARMS):
        parser.error(f"unknown arm(s) {sorted(unknown)}; known: {', '.join(ARMS)}")
    classes = tuple(c for c in args.classes.split(",") if c)
    if unknown := set(classes) - set(CLASSES):
        parser.error(f"unknown class(es) {sorted(unknown)}; known: {', '.join(CLASSES)}")
    if args.trace is not None and args.trace not in arms:
        parser.error(f"--trace {args.trace}: not among the arms run ({', '.join(arms)})")
    result: dict[str, Any] = {}
    if args.corpus != "held-out":
        result = run(args.sessions, args.turns, args.seed, args.dismiss, args.evidence, arms)
        print(
            f"{result['sessions']} sessions x {result['turns']} turns, seed {result['seed']}, "
            f"dismiss {result['dismiss_p']}, evidence {result['evidence_p']}; "
            f"{result['seconds']} s; identical sessions in every arm: "
            f"{result['sessions_identical']}"
        )
        print(table(result))
    if args.corpus != "generated":
        cases = [(c, p) for c, p in held_out_cases() if c.cls in classes]
        held = run_held_out(arms, trace=args.trace, cases=cases)
        result["held_out"] = held
        print(
            f"\nheld-out: {held['cases']} requests, {held['judged_turns']} judged turns "
            f"(each after its preambles); {held['seconds']} s"
        )
        print(held_out_table(held))
        if args.trace:
            print(f"\n{args.trace}, each judged turn:\n" + trace_lines(held))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
