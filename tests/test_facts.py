"""FactStore and the capped-Bayesian rule, on every backend."""

from __future__ import annotations

import random

import pytest

from talos_ls.memory import confidence
from talos_ls.memory.facts import OUTCOMES, FactStore


def test_pure_update_matches_the_spec():
    assert confidence.update(0.5, 0, 0.9) == pytest.approx(0.7)
    e = confidence.Evidence()
    for _ in range(3):
        e = confidence.observe(e, confidence.ACTED_SIGNAL)
    assert e.confidence == pytest.approx(0.8) and e.evidence_count == 3 and e.corroborations == 3
    e = confidence.Evidence()
    for _ in range(3):
        e = confidence.observe(e, confidence.CONTRADICTED_SIGNAL)
    assert e.confidence == pytest.approx(0.2) and e.contradictions == 3
    # Beyond the cap every observation still moves it, with gain 1/21.
    assert confidence.update(0.5, 100, 0.9) == pytest.approx(0.5 + 0.4 / 21)
    with pytest.raises(ValueError, match="signal"):
        confidence.update(0.5, 0, 1.5)
    with pytest.raises(ValueError, match="cap"):
        confidence.update(0.5, 0, 0.9, cap=0)


def test_add_and_get(facts):
    key = facts.add("a1", "  Dana prefers morning meetings ", valid_from=1000.0)
    f = facts.get(key)
    assert f.key == key and f.agent_id == "a1" and f.statement == "Dana prefers morning meetings"
    assert (f.confidence, f.evidence_count, f.corroborations, f.contradictions) == (0.5, 0, 0, 0)
    assert (f.valid_from, f.invalid_at, f.superseded_by, f.live) == (1000.0, None, None, True)
    assert facts.get("fact:nope") is None
    assert [x.key for x in facts.list("a1")] == [key]
    assert facts.list("a2") == []


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        (("a1", ""), {}, "statement"),
        (("a1", "   "), {}, "statement"),
        (("", "x"), {}, "agent_id"),
        (("a1", "x"), {"colour": "red"}, "colour"),
        (("a1", "x"), {"valid_from": "yesterday"}, "valid_from"),
    ],
)
def test_add_rejects_bad_input(facts, args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        facts.add(*args, **kwargs)
    assert facts.list() == []


def test_observe_acted_and_contradicted_with_weight(facts):
    a, b = facts.add("a1", "a"), facts.add("a1", "b")
    changed = facts.observe({a: "acted", b: "contradicted", "fact:unknown": "acted"}, weight=3)
    assert set(changed) == {a, b}
    fa, fb = facts.get(a), facts.get(b)
    assert fa.confidence == pytest.approx(0.8) and (fa.corroborations, fa.contradictions) == (3, 0)
    assert fb.confidence == pytest.approx(0.2) and (fb.corroborations, fb.contradictions) == (0, 3)


def test_other_outcomes_change_nothing(facts):
    a = facts.add("a1", "a")
    facts.observe({a: "acted"})
    before = facts.get(a)
    assert facts.observe({a: "dismissed"}) == {}
    facts.observe({a: "deferred"}, weight=5)
    facts.observe({a: "used"})
    assert facts.get(a) == before


def test_observe_validates_before_writing(facts):
    a = facts.add("a1", "a")
    with pytest.raises(ValueError, match="unknown outcome"):
        facts.observe({a: "acted", "x": "liked"})
    with pytest.raises(ValueError, match="weight"):
        facts.observe({a: "acted"}, weight=0)
    assert facts.get(a).evidence_count == 0
    assert set(OUTCOMES) == {"acted", "contradicted", "dismissed", "deferred", "used"}


def test_backend_arithmetic_equals_the_pure_rule(store):
    """Every backend applies the rule in its own atomic step; it must agree bit for bit."""
    rng = random.Random(7)
    for cap in (1, 3, 20):
        facts = FactStore(store, evidence_cap=cap)
        key = facts.add("a1", f"cap {cap}")
        expected = confidence.Evidence()
        for _ in range(60):
            outcome = rng.choice(["acted", "contradicted"])
            weight = rng.randint(1, 3)
            facts.observe({key: outcome}, weight=weight)
            signal = (
                confidence.ACTED_SIGNAL if outcome == "acted" else confidence.CONTRADICTED_SIGNAL
            )
            for _ in range(weight):
                expected = confidence.observe(expected, signal, cap)
            f = facts.get(key)
            got = (f.confidence, f.evidence_count, f.corroborations, f.contradictions)
            assert got == tuple(expected)


def test_supersede_is_the_only_way_to_close(facts):
    old, new = facts.add("a1", "tests use unittest"), facts.add("a1", "tests use pytest")
    facts.observe({old: "contradicted"}, weight=10)
    assert facts.get(old).live  # no amount of evidence closes a fact
    assert facts.supersede(old, new) is True
    f = facts.get(old)
    assert not f.live and f.superseded_by == new and f.invalid_at >= f.valid_from
    assert facts.supersede(old, new) is False  # already closed
    assert facts.get(old).superseded_by == new
    assert [x.key for x in facts.list("a1", include_closed=False)] == [new]
    with pytest.raises(ValueError, match="itself"):
        facts.supersede(new, new)
    with pytest.raises(ValueError, match="unknown fact"):
        facts.supersede("fact:nope", new)
    other = facts.add("a2", "another agent")
    with pytest.raises(ValueError, match="same agent"):
        facts.supersede(new, other)
