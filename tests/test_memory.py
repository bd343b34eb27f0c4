"""The memory layer on every backend: slotted facts and search, reconciliation and the disjoin
journal, the assembler's confidence gate, the disjunction producer, rules files, and the
acceptance scenarios end to end."""

from __future__ import annotations

import os
import threading
import time

import pytest

from talos_ls.memory.assembler import ContextAssembler
from talos_ls.memory.facts import FactStore
from talos_ls.memory.index import WorkspaceIndex
from talos_ls.memory.reconcile import Reconciler
from talos_ls.memory.resolve import resolve
from talos_ls.memory.rules import RulesFiles

K = 5


@pytest.fixture
def rec(facts) -> Reconciler:
    return Reconciler(facts)


def slot_fact(
    facts, value, source="rules file", agent="a1", subject="tests", attribute="use", **kw
):
    return facts.add(
        agent,
        f"{subject} {attribute} {value}",
        subject=subject,
        attribute=attribute,
        value=value,
        source=source,
        **kw,
    )


# ----------------------------------------------------------------- facts
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"statement": ""}, "statement"),
        ({"source": "hearsay"}, "unknown source 'hearsay'"),
        ({"subject": "tests", "value": "pytest"}, "attribute is missing"),
        ({"attribute": "use", "value": "pytest"}, "subject is missing"),
        ({"subject": "tests", "attribute": "use"}, "needs a value"),
        ({"value": "pytest"}, "value needs a slot"),
        ({"subject": "  ", "attribute": "use", "value": "x"}, "subject must be"),
    ],
)
def test_bad_facts_name_the_field(facts, kwargs, match):
    args = {"statement": "tests use pytest", **kwargs}
    with pytest.raises(ValueError, match=match):
        facts.add("a1", args.pop("statement"), **args)
    assert facts.list() == []


def test_slot_source_and_origin_are_stored(facts):
    key = facts.add(
        "a1",
        "Tests use pytest",
        subject="tests",
        attribute="use",
        value="pytest",
        source="rules file",
        origin="AGENTS.md",
    )
    f = facts.get(key)
    assert (f.subject, f.attribute, f.value, f.source, f.origin) == (
        "tests",
        "use",
        "pytest",
        "rules file",
        "AGENTS.md",
    )
    assert f.precedence == 2 and facts.get(facts.add("a1", "x")).source == "model"


def test_search_ranks_by_relevance_then_confidence(facts):
    deploy = facts.add("a1", "deploys go through make release")
    deploy_strong = facts.add("a1", "deploys need the staging cluster first")
    facts.add("a1", "Dana prefers morning meetings")
    closed = facts.add("a1", "deploys used to run on Fridays")
    facts.retract(closed)
    facts.observe({deploy_strong: "acted"}, weight=3)
    found = facts.search("a1", "how do deploys work")
    assert [f.key for f in found] == [deploy_strong, deploy]  # no meeting, no retracted fact
    assert facts.search("a1", "lunch") == [] and facts.search("a1", "") == []
    assert facts.search("a2", "deploys") == []


def test_retract_closes_without_a_successor(facts):
    key = facts.add("a1", "x")
    assert facts.retract(key) is True and facts.retract(key) is False
    f = facts.get(key)
    assert not f.live and f.superseded_by is None
    with pytest.raises(ValueError, match="unknown fact"):
        facts.retract("fact:nope")


# --------------------------------------------------------- reconciliation
def test_same_value_corroborates(facts, rec):
    first = slot_fact(facts, "pytest", origin="AGENTS.md")
    second = slot_fact(facts, "PyTest", origin="CLAUDE.md")  # another file: independent
    assert rec.reconcile(second) == "corroborated"
    assert facts.get(first).live and facts.get(first).corroborations == 1
    assert facts.get(second).superseded_by == first
    assert rec.merge_log_entries("a1") == []


def test_a_source_saying_it_again_is_already_held(facts, rec):
    key, outcome = rec.add(
        "a1", "Tests use pytest", subject="tests", attribute="use", value="pytest", source="person"
    )
    assert outcome == "alone"
    before = facts.list("a1")
    for _ in range(30):  # said thirty times: still one fact, and no evidence
        assert rec.add(
            "a1",
            " tests  USE pytest.",
            subject="Tests",
            attribute="use",
            value="PyTest",
            source="person",
        ) == (key, "already held")
    assert facts.list("a1") == before
    # The same slot and value in other words, from the same source: held already too.
    assert rec.add(
        "a1",
        "we run the tests with pytest",
        subject="tests",
        attribute="use",
        value="pytest",
        source="person",
    ) == (key, "already held")
    assert facts.list("a1") == before


def test_two_rows_of_one_source_merge_without_evidence(facts, rec, store):
    """Two processes each checked before either stored: two live rows of one claim. The
    reconciler merges them, and one source saying it twice still counts for nothing."""
    first = slot_fact(facts, "pytest", source="model")
    row = {**store.fact_get(first), "key": "fact:raced", "statement": "Tests use pytest"}
    store.fact_insert(row)
    assert rec.reconcile("fact:raced") == "already held"
    assert facts.get("fact:raced").superseded_by == first
    held = facts.get(first)
    assert held.live and (held.confidence, held.evidence_count) == (0.5, 0)


def test_forgetting_a_side_ends_the_conflict_and_its_question(qq, facts, rec):
    a, b = slot_fact(facts, "unittest"), slot_fact(facts, "pytest")
    rec.reconcile(b)
    assert qq.propose_from_disjunctions("a1", 0) == 1
    assert facts.retract(a) is True
    assert rec.merge_log_entries("a1") == [] and rec.conflicts("a1") == []
    assert qq.next_question("a1", 0, "tests") is None
    (cand,) = qq.candidates("a1")
    assert (cand.status, cand.ask_count, cand.delivered_turn) == ("expired", 0, None)
    assert qq.propose_from_disjunctions("a1", 1) == 0
    # The other side stays held; saying the forgotten claim again is a new fact, unopposed.
    assert facts.get(b).live
    again = slot_fact(facts, "unittest")
    assert again != a and rec.reconcile(again) == "disjoined"


def test_superseding_a_side_directly_ends_the_conflict(facts, rec):
    a, b = slot_fact(facts, "unittest"), slot_fact(facts, "pytest")
    c = slot_fact(facts, "nose")
    rec.reconcile(b)
    rec.reconcile(c)
    assert len(rec.merge_log_entries("a1")) == 3  # b with a; c with a and with b
    facts.supersede(a, b)
    ((entry, x, y),) = rec.conflicts("a1")  # only the conflict without a is left
    assert {x.key, y.key} == {b, c}
    assert {entry.target, entry.payload["other"]} == {b, c}


def test_a_conflict_left_open_by_an_older_version_is_not_listed(facts, rec, store):
    a, b = slot_fact(facts, "unittest"), slot_fact(facts, "pytest")
    store.fact_close(a, 1.0, None)  # closed without ending its disjoin, as before the fix
    store.journal_add(
        {
            "id": "j:old",
            "agent_id": "a1",
            "kind": "disjoin",
            "target": a,
            "payload": {"disjunction_id": "dj-old", "other": b},
            "captured_at": 0.0,
            "invalid_at": None,
        }
    )
    assert rec.conflicts("a1") == []
    assert facts.retract(a) is False  # already closed; its stale disjoin is closed now
    assert rec.merge_log_entries("a1") == []


def test_higher_precedence_wins_either_way(facts, rec):
    model = slot_fact(facts, "nose", source="model")
    rules = slot_fact(facts, "unittest", source="rules file")
    assert rec.reconcile(rules) == "won"
    assert facts.get(model).superseded_by == rules
    late_model = slot_fact(facts, "pytest", source="model")
    assert rec.reconcile(late_model) == "superseded"
    assert facts.get(late_model).superseded_by == rules and facts.get(rules).live


def test_tie_writes_one_disjoin(facts, rec):
    a = slot_fact(facts, "unittest")
    b = slot_fact(facts, "pytest")
    assert rec.reconcile(b) == "disjoined"
    assert rec.reconcile(b) == "disjoined"  # already on record: not twice
    (entry,) = rec.merge_log_entries("a1")
    assert entry.kind == "disjoin" and {entry.target, entry.payload["other"]} == {a, b}
    assert entry.payload["disjunction_id"] and facts.get(a).live and facts.get(b).live
    (conflict,) = rec.conflicts("a1")
    assert {conflict[1].key, conflict[2].key} == {a, b}
    assert rec.reconcile_pass("a1") == 0  # the evidence has not separated them
    assert rec.retract(entry) is True and rec.retract(entry) is False
    assert rec.merge_log_entries("a1") == []


def test_other_slots_and_agents_do_not_conflict(facts, rec):
    slot_fact(facts, "unittest")
    other_agent = slot_fact(facts, "pytest", agent="a2")
    other_slot = slot_fact(facts, "pytest", subject="lint")
    no_slot = facts.add("a1", "tests use pytest")
    assert [rec.reconcile(k) for k in (other_agent, other_slot, no_slot)] == [
        "alone",
        "alone",
        "no slot",
    ]


def test_evidence_settles_and_a_contradiction_reopens(facts, rec):
    a, b = slot_fact(facts, "unittest"), slot_fact(facts, "pytest")
    rec.reconcile(b)
    facts.observe({b: "acted", a: "contradicted"}, weight=3)
    assert rec.reconcile_pass("a1") == 1
    assert facts.get(a).superseded_by == b and rec.merge_log_entries("a1") == []
    again = slot_fact(facts, "unittest")  # the old claim made again, equal precedence
    assert rec.reconcile(again) == "disjoined"
    assert len(rec.merge_log_entries("a1")) == 1


# -------------------------------------------------------------- assembler
def test_assembler_without_threshold_has_no_gate(facts):
    key = facts.add("a1", "deploys go through make release")
    result = ContextAssembler(facts).assemble("a1", "deploy please")
    assert result.keys == [key] and "gate" not in result.metadata


def test_gate_shapes(facts):
    weak = facts.add("a1", "deploys go through make release")
    other = facts.add("a1", "deploys need approval")
    facts.observe({other: "contradicted"})
    refuse = ContextAssembler(facts, confidence_gate_threshold=0.6)
    result = refuse.assemble("a1", "deploys")
    assert result.records == []
    assert result.metadata["gate"] == {
        "applied": True,
        "gate_score": 0.5,
        "threshold": 0.6,
        "mode": "refuse",
        "gated": True,
        "refused_keys": [weak, other],
    }
    flag = ContextAssembler(facts, confidence_gate_threshold=0.6, confidence_gate_mode="flag")
    flagged = flag.assemble("a1", "deploys")
    assert flagged.keys == [weak, other] and flagged.metadata["gate"]["gated"] is True
    assert "refused_keys" in flagged.metadata["gate"]
    passing = ContextAssembler(facts, confidence_gate_threshold=0.4).assemble("a1", "deploys")
    assert passing.keys == [weak, other]
    assert (
        passing.metadata["gate"]["gated"] is False
        and "refused_keys" not in passing.metadata["gate"]
    )
    nothing = refuse.assemble("a1", "lunch")
    assert nothing.metadata["gate"] == {
        "applied": False,
        "gate_score": None,
        "threshold": 0.6,
        "mode": "refuse",
        "gated": False,
    }
    assert refuse.assemble("a1", None).metadata["gate"]["applied"] is False


def test_assembler_bad_input_and_budget(facts):
    with pytest.raises(ValueError, match="confidence_gate_mode"):
        ContextAssembler(facts, confidence_gate_mode="warn")
    with pytest.raises(ValueError, match="confidence_gate_threshold"):
        ContextAssembler(facts, confidence_gate_threshold=1.5)
    for i in range(5):
        facts.add("a1", f"deploy rule number {i} " + "x" * 80)
    # Each statement is about 26 tokens (4 characters a token): 60 fits two.
    assert len(ContextAssembler(facts).assemble("a1", "deploy", token_budget=60).records) == 2
    with pytest.raises(ValueError, match="token_budget"):
        ContextAssembler(facts).assemble("a1", "deploy", token_budget=-1)


# ------------------------------------------------------------ disjunctions
def test_disjunction_producer(qq, facts, rec):
    a, b = slot_fact(facts, "unittest"), slot_fact(facts, "pytest")
    rec.reconcile(b)
    (entry,) = rec.merge_log_entries("a1")
    assert qq.propose_from_disjunctions("a1", 1) == 1
    (cand,) = qq.candidates("a1")
    assert cand.kind == "disjunction" and cand.disjunction_id == entry.payload["disjunction_id"]
    assert cand.question_text == (
        'Two notes conflict: a rules file says "tests use pytest"; a rules file says "tests use '
        'unittest". Which is right?'
    )  # the statements and where each comes from, in the order of the options
    assert cand.options == [
        {"label": "pytest", "acted": [b], "contradicted": [a]},
        {"label": "unittest", "acted": [a], "contradicted": [b]},
    ]
    assert qq.propose_from_disjunctions("a1", 3) == 1  # re-observed: touched
    assert len(qq.candidates("a1")) == 1 and qq.get(cand.candidate_id).last_seen_turn == 3


@pytest.mark.parametrize(
    "a, b, expected",
    [
        (
            "Tests use pytest",
            "Tests use unittest",
            'Two notes conflict: you told me "Tests use pytest"; I noted "Tests use unittest". '
            "Which is right?",
        ),
        # Workspace text stays as it is (surfaces escape it); no markup is added, none read.
        (
            "[bold]Tests[/bold] use\x1b[2J py",
            "Tests use 'x' \"y\" [/]",
            'Two notes conflict: you told me "[bold]Tests[/bold] use\x1b[2J py"; I noted '
            '"Tests use \'x\' "y" [/]". Which is right?',
        ),
        # One line, whatever the statement's lines.
        (
            "Tests\nuse\r\n  pytest\u2028now",
            "Tests\tuse unittest",
            'Two notes conflict: you told me "Tests use pytest now"; I noted "Tests use '
            'unittest". Which is right?',
        ),
        # Statements that read alike tell nothing apart: the sources and the options do.
        (
            "Tests use pytest",
            "tests  use PYTEST",
            "I have two conflicting notes (from you and me). Which is right?",
        ),
    ],
)
def test_conflict_question_wording(facts, a, b, expected):
    fa = facts.get(facts.add("a1", a, source="person"))
    fb = facts.get(facts.add("a1", b, source="model"))
    assert Reconciler.conflict_question(fa, fb) == expected
    assert Reconciler.conflict_question(fa, None) == "I have two conflicting notes. Which is right?"


def test_conflict_question_names_each_rules_file_and_stays_one_line(facts):
    agents = facts.get(
        facts.add("a1", "Tests use unittest", source="rules file", origin="AGENTS.md")
    )
    claude = facts.get(facts.add("a1", "Tests use pytest", source="rules file", origin="CLAUDE.md"))
    assert Reconciler.conflict_question(agents, claude) == (
        'Two notes conflict: AGENTS.md says "Tests use unittest"; CLAUDE.md says "Tests use '
        'pytest". Which is right?'
    )
    same = facts.get(facts.add("a1", "tests  use UNITTEST", source="rules file", origin="x\ny.md"))
    assert Reconciler.conflict_question(agents, same) == (
        "I have two conflicting notes (from AGENTS.md and x y.md). Which is right?"
    )


def test_a_conflict_assumption_takes_the_side_with_more_support_and_names_both(facts):
    agents = facts.add("a1", "Tests use unittest", source="rules file", origin="AGENTS.md")
    claude = facts.add("a1", "Tests use pytest\nalways", source="rules file", origin="CLAUDE.md")
    a, c = facts.get(agents), facts.get(claude)
    assert Reconciler.conflict_assumption(a, c) == (
        'Assumed AGENTS.md\'s "Tests use unittest" (neither has more support: the first on '
        'record), not CLAUDE.md\'s "Tests use pytest always": they conflict and nobody has '
        "said which is right."
    )
    facts.observe({claude: "acted"})
    c = facts.get(claude)
    assert Reconciler.conflict_assumption(a, c).startswith(
        f'Assumed CLAUDE.md\'s "Tests use pytest always" (it has more support: '
        f"{c.confidence:.2f} against 0.50), not AGENTS.md's"
    )
    mine = facts.get(facts.add("a1", "Tests use nose", source="model"))
    assert 'not my "Tests use nose"' in Reconciler.conflict_assumption(c, mine)


def test_conflict_question_cuts_long_statements(facts):
    long_a, long_b = "Tests use " + "pytest " * 40, "Tests use " + "unittest " * 40
    text = Reconciler.conflict_question(
        facts.get(facts.add("a1", long_a)), facts.get(facts.add("a1", long_b))
    )
    first, second = text.split('"')[1], text.split('"')[3]
    assert len(first) == len(second) == 120 and first.endswith("\u2026")
    assert long_a.startswith(first[:-1]) and long_b.startswith(second[:-1])
    assert text.endswith(". Which is right?")


def test_labels_fall_back_to_statements(qq, facts):
    a, b = facts.add("a1", "Dana likes mornings"), facts.add("a1", "Dana likes evenings")
    qq.store.journal_add(
        {
            "id": "j:1",
            "agent_id": "a1",
            "kind": "disjoin",
            "target": a,
            "payload": {"disjunction_id": "dj-1", "other": b},
            "captured_at": 0.0,
            "invalid_at": None,
        }
    )
    qq.propose_from_disjunctions("a1", 0)
    assert [o["label"] for o in qq.candidates("a1")[0].options] == [
        "Dana likes mornings",
        "Dana likes evenings",
    ]


def test_retracted_disjoin_expires_its_question(qq, facts, rec):
    _a, b = slot_fact(facts, "unittest"), slot_fact(facts, "pytest")
    rec.reconcile(b)
    qq.propose_from_disjunctions("a1", 0)
    rec.retract(rec.merge_log_entries("a1")[0])
    assert qq.next_question("a1", 0) is None
    (cand,) = qq.candidates("a1")
    assert (cand.status, cand.ask_count) == ("expired", 0)
    assert "a1" not in qq.store.qq_agents() or qq.store.qq_agents()["a1"] is None


def test_live_disjoins_are_read_once_per_pass(qq, facts, monkeypatch):
    sides = [facts.add("a1", f"side {i}") for i in range(6)]
    for i in range(3):
        payload = {"disjunction_id": f"dj-{i}", "other": sides[2 * i + 1]}
        qq.store.journal_add(
            {
                "id": f"j:{i}",
                "agent_id": "a1",
                "kind": "disjoin",
                "target": sides[2 * i],
                "captured_at": float(i),
                "invalid_at": None,
                "payload": payload,
            }
        )
    assert qq.propose_from_disjunctions("a1", 0) == 3
    for i in (1, 2):
        qq.store.journal_close("a1", f"j:{i}", 1.0)
    reads = []
    original = qq.reconciler.merge_log_entries
    monkeypatch.setattr(
        qq.reconciler, "merge_log_entries", lambda a: reads.append(a) or original(a)
    )
    got = qq.next_question("a1", 0)
    assert len(reads) == 1
    assert got.disjunction_id == "dj-0"
    statuses = {c.disjunction_id: c.status for c in qq.candidates("a1")}
    assert statuses == {"dj-0": "delivered", "dj-1": "expired", "dj-2": "expired"}
    reads.clear()
    qq.expire_stale("a1", 1)
    assert len(reads) == 1


def test_unreadable_journal_neither_expires_nor_delivers(qq, facts, rec, backend, store):
    _a, b = slot_fact(facts, "unittest"), slot_fact(facts, "pytest")
    rec.reconcile(b)
    qq.propose_from_disjunctions("a1", 0)
    if backend == "sqlite":  # a real fault: the journal's table is gone
        store._conn.execute("DROP TABLE journal")
    else:  # a real fault: the journal's key holds the wrong type
        store._client.delete("talos:{a1}:journal")
        store._client.set("talos:{a1}:journal", "not a sorted set")
    assert qq.next_question("a1", 0) is None
    assert qq.expire_stale("a1", 0) == 0
    assert qq.propose_from_disjunctions("a1", 1) == 0
    (cand,) = qq.candidates("a1")
    assert cand.status == "pending"


# ----------------------------------------------------------------- rules
def test_rules_files_sync(facts, tmp_path):
    (tmp_path / ".talos").mkdir()
    (tmp_path / "AGENTS.md").write_text("# Rules\n- Tests use unittest.\n- Always run ruff\n")
    (tmp_path / ".talos" / "rules.md").write_text("Formatter: black\n")
    rules = RulesFiles(facts)
    first = rules.sync("a1", tmp_path)
    assert len(first.added) == 3 and first.retracted == []
    held = {f.statement: f for f in facts.list("a1", include_closed=False)}
    assert held["Tests use unittest."].value == "unittest"
    assert held["Tests use unittest."].origin == "AGENTS.md"
    assert held["Formatter: black"].origin == ".talos/rules.md"
    assert {f.source for f in held.values()} == {"rules file"}
    assert rules.sync("a1", tmp_path).added == []  # nothing changed
    (tmp_path / "AGENTS.md").write_text("# Rules\n- Tests use unittest.\n- Commit small\n")
    second = rules.sync("a1", tmp_path)
    assert second.retracted == [held["Always run ruff"].key] and len(second.added) == 1
    assert not facts.get(held["Always run ruff"].key).live
    assert facts.get(held["Tests use unittest."].key).live  # untouched rules stay as they are


def rewrite(path, text):
    """Write a rules file so that `sync` sees it changed, however fast the test runs."""
    old = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text)
    os.utime(path, ns=(old + 10**9, old + 10**9))


def test_editing_a_rules_file_does_not_count_a_merged_rule_again(facts, tmp_path):
    rewrite(tmp_path / "AGENTS.md", "- Tests use pytest\n")
    rewrite(tmp_path / "CLAUDE.md", "- Tests use pytest\n")  # another file: one corroboration
    rules = RulesFiles(facts)
    rules.sync("a1", tmp_path)
    for i in range(3):
        rewrite(tmp_path / "AGENTS.md", f"- Tests use pytest\n- Commit small, take {i}\n")
        added = rules.sync("a1", tmp_path).added
        assert [facts.get(k).statement for k in added] == [f"Commit small, take {i}"]
    (held,) = [f for f in facts.list("a1", include_closed=False) if f.value == "pytest"]
    assert (held.evidence_count, held.corroborations) == (1, 1)
    assert held.confidence == pytest.approx(0.7)
    assert len([f for f in facts.list("a1") if f.value == "pytest"]) == 2
    # A fresh daemon syncing the same files adds nothing either.
    assert RulesFiles(facts).sync("a1", tmp_path).added == []


def test_a_settled_conflict_stays_settled_when_a_rules_file_changes(qq, facts, tmp_path):
    rewrite(tmp_path / "AGENTS.md", "- Tests use unittest\n")
    rewrite(tmp_path / "CLAUDE.md", "- Tests use pytest\n")
    rules = RulesFiles(facts, qq.reconciler)
    rules.sync("a1", tmp_path)
    by_value = {f.value: f.key for f in facts.list("a1")}
    facts.observe({by_value["pytest"]: "acted", by_value["unittest"]: "contradicted"}, weight=3)
    assert qq.reconciler.reconcile_pass("a1") == 1  # the person's answer settled it
    rewrite(tmp_path / "CLAUDE.md", "- Tests use pytest\n- Keep functions small\n")
    assert len(rules.sync("a1", tmp_path).added) == 1  # the new line only
    assert qq.reconciler.merge_log_entries("a1") == []
    assert qq.propose_from_disjunctions("a1", 1) == 0  # not asked again
    # Written anew (gone at one sync, back at the next), the old claim is a claim again.
    rewrite(tmp_path / "AGENTS.md", "")
    rules.sync("a1", tmp_path)
    rewrite(tmp_path / "AGENTS.md", "- Tests use unittest\n")
    (again,) = rules.sync("a1", tmp_path).added
    assert again != by_value["unittest"] and facts.get(again).live
    assert len(qq.reconciler.conflicts("a1")) == 1


def test_a_superseded_rule_returns_when_what_beat_it_is_forgotten(facts, tmp_path):
    rewrite(tmp_path / "AGENTS.md", "- Tests use unittest\n")
    rec = Reconciler(facts)
    rules = RulesFiles(facts, rec)
    (rule,) = rules.sync("a1", tmp_path).added
    person, outcome = rec.add(
        "a1", "tests use pytest", subject="tests", attribute="use", value="pytest", source="person"
    )
    assert outcome == "won" and facts.get(rule).superseded_by == person
    assert RulesFiles(facts, rec).sync("a1", tmp_path).added == []  # still beaten
    facts.retract(person)
    (back,) = RulesFiles(facts, rec).sync("a1", tmp_path).added
    assert facts.get(back).value == "unittest" and facts.get(back).live


class SlowInserts:
    """A real store whose fact inserts start late, so that two syncs overlap."""

    def __init__(self, store):
        self.store, self.inserts = store, []

    def __getattr__(self, name):
        return getattr(self.store, name)

    def fact_insert(self, row):
        self.inserts.append(row["key"])
        time.sleep(0.2)
        return self.store.fact_insert(row)


def test_two_turns_at_once_sync_each_rule_once(store, tmp_path):
    """Two turns of one daemon sync at the same moment: each rule is inserted once. A second
    insert would fail, and a daemon's store health counts a failed write as a fault."""
    rewrite(tmp_path / "AGENTS.md", "- Tests use unittest\n")
    rewrite(tmp_path / "CLAUDE.md", "- Tests use pytest\n")
    slow = SlowInserts(store)
    rules = RulesFiles(FactStore(slow))
    start = threading.Barrier(2)
    results, errors = [], []

    def turn():
        start.wait()
        try:
            results.append(rules.sync("a1", tmp_path))
        except Exception as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=turn) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(len(r.added) for r in results) == [0, 2]
    assert len(slow.inserts) == len(set(slow.inserts)) == 2


# ------------------------------------------------------ acceptance scenarios
def test_scenario_conflicting_rules_become_one_question(qq, facts, tmp_path):
    (tmp_path / "AGENTS.md").write_text("- Tests use unittest\n")
    (tmp_path / "CLAUDE.md").write_text("- Tests use pytest\n")  # equal precedence
    RulesFiles(facts, qq.reconciler).sync("a1", tmp_path)
    by_value = {f.value: f.key for f in facts.list("a1", include_closed=False)}
    # Other candidates compete for the budget meanwhile.
    qq.propose(
        "a1",
        "Which deploy target?",
        "referent",
        "t",
        ["deploy#1"],
        "evidence_gap",
        1,
        options=[{"label": "staging"}, {"label": "prod"}],
    )
    assert qq.propose_from_disjunctions("a1", 1) == 1
    assert qq.next_question("a1", 1, "add tests for the parser").disjunction_id  # the one
    assert all(qq.next_question("a1", t, "add tests for the deploy") is None for t in (2, 3, 4))
    (q,) = [c for c in qq.candidates("a1") if c.status == "delivered"]
    assert qq.record_answer(q, "pytest", 4).applied
    pytest_fact, unittest_fact = facts.get(by_value["pytest"]), facts.get(by_value["unittest"])
    assert pytest_fact.confidence == pytest.approx(0.8)
    assert unittest_fact.confidence == pytest.approx(0.2)
    assert qq.reconciler.reconcile_pass("a1") == 1
    assert qq.reconciler.merge_log_entries("a1") == []
    assert facts.get(by_value["unittest"]).superseded_by == by_value["pytest"]
    injected = ContextAssembler(facts).assemble("a1", "how do the tests run").keys
    assert injected == [by_value["pytest"]]


def test_scenario_fix_the_parser(qq, tmp_path):
    for rel in ("src/parser.py", "tools/parser.py"):
        (tmp_path / rel).parent.mkdir(exist_ok=True)
        (tmp_path / rel).write_text("def parse(text):\n    return text\n")
    record = resolve("a1", 7, "fix the parser", WorkspaceIndex.build(tmp_path))
    (ref,) = record.references
    assert (ref["surface"], ref["start"], ref["end"], ref["status"]) == (
        "the parser",
        4,
        14,
        "evidence_gap",
    )
    assert ref["candidates"] == ["src/parser.py", "tools/parser.py"]
    assert qq.propose_from_resolution(record, 7) == 1
    (cand,) = qq.candidates("a1")
    assert [o["label"] for o in cand.options] == ["src/parser.py", "tools/parser.py"]
    assert "src/parser.py" in cand.question_text and "tools/parser.py" in cand.question_text
    assert qq.next_question("a1", 7, "fix the parser").candidate_id == cand.candidate_id
    assert qq.record_answer(cand, "2", 8).option_index == 1


def test_scenario_gate_refusal_then_yes(qq, facts):
    key = facts.add("a1", "deploys go through make release")
    assembler = ContextAssembler(facts, confidence_gate_threshold=0.6)
    first = assembler.assemble("a1", "deploy the app")
    assert first.records == [] and first.metadata["gate"]["refused_keys"] == [key]
    cand = qq.propose_from_gate("a1", first.metadata, 1, "deploy the app")
    assert cand.target_keys == [key]
    assert qq.next_question("a1", 1, "deploy the app").candidate_id == cand.candidate_id
    assert qq.record_answer(cand, "yes", 2).applied
    assert facts.get(key).confidence > 0.6
    assert assembler.assemble("a1", "deploy the app").keys == [key]


def test_all_three_producers_one_delivery_per_k_turns(qq, facts, tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "tools").mkdir()
    for rel in ("src/parser.py", "tools/parser.py"):
        (tmp_path / rel).write_text("x = 1\n")
    index = WorkspaceIndex.build(tmp_path)
    _a, b = slot_fact(facts, "unittest"), slot_fact(facts, "pytest")
    qq.reconciler.reconcile(b)
    facts.add("a1", "the parser deploys through make")  # too weak to use: the gate refuses it
    assembler = ContextAssembler(facts, confidence_gate_threshold=0.6)
    deliveries = []
    for turn in range(3 * K):
        request = "fix the parser and its tests"
        assembled = assembler.assemble("a1", request)
        qq.note_use("a1", assembled.keys, turn)
        qq.propose_from_gate("a1", assembled.metadata, turn, request)
        qq.propose_from_resolution(resolve("a1", turn, request, index), turn)
        qq.propose_from_disjunctions("a1", turn)
        got = qq.next_question("a1", turn, request)
        if got:
            deliveries.append((turn, got.kind))
    assert [t for t, _ in deliveries] == [0, K, 2 * K]
    assert {k for _, k in deliveries} == {"disjunction", "confirmation", "referent"}


def test_two_daemons_syncing_the_same_rules_store_each_rule_once(facts, tmp_path):
    (tmp_path / "AGENTS.md").write_text("- Tests use unittest\n- Keep functions small\n")
    (tmp_path / "CLAUDE.md").write_text("- Tests use pytest\n")
    first, second = RulesFiles(facts), RulesFiles(facts)  # two daemons, one store
    added = first.sync("a1", tmp_path).added
    assert second.sync("a1", tmp_path).added == []  # the same keys: nothing added twice
    live = facts.list("a1", include_closed=False)
    assert sorted(f.statement for f in live) == [
        "Keep functions small",
        "Tests use pytest",
        "Tests use unittest",
    ]
    assert {f.key for f in live} == set(added)
    assert len(Reconciler(facts).merge_log_entries("a1")) == 1
