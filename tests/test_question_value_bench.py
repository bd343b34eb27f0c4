"""A smoke run of bench/question_value.py at a tiny size: the output has the shape the README
reports, the counts add up, and every arm replayed the very same sessions; the held-out cases
are labelled consistently, a few of them replayed, and an assumption counts as stated by the
product's `assumption` field or else by the prompt's note."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "question_value.py"
COUNTS = (
    "turns",
    "questions",
    "answered",
    "dismissed",
    "useful",
    "over_asking",
    "wrong_assumptions",
)


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCH.parent))  # its data module, question_cases.py, beside it
    spec = importlib.util.spec_from_file_location("question_value_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being made
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)
        sys.path.remove(str(BENCH.parent))


def test_sessions_come_from_the_seed_alone(bench):
    one, two = bench.make_session(5, 12), bench.make_session(5, 12)
    assert one.digest() == two.digest()
    assert one.files == two.files
    assert bench.make_session(6, 12).digest() != one.digest()
    assert len(one.turns) == 12


def test_a_tiny_run_has_the_reported_shape(bench):
    result = bench.run(sessions=2, turns=10, seed=3)
    assert set(result["arms"]) == set(bench.ARMS)
    assert result["sessions_identical"] is True
    digests = result["session_digests"]
    assert all(d == digests["seed"] for d in digests.values())
    assert len(digests["seed"]) == 2
    for counts in result["arms"].values():
        assert all(isinstance(counts[name], int) and counts[name] >= 0 for name in COUNTS)
        assert counts["turns"] == 20
        assert counts["answered"] + counts["dismissed"] == counts["questions"]
        assert counts["useful"] <= counts["answered"]
        assert counts["over_asking"] <= counts["questions"]
        assert sum(counts["by_kind"].values()) == counts["questions"]
        assert counts["questions_per_turn"] == round(counts["questions"] / 20, 4)
        # The budget: at most one question per five turns, the first turn included.
        assert counts["questions"] <= 2 * 2
    for arm in ("seed", "editor"):  # the seed's order has no live gate
        assert result["arms"][arm]["live_expired"] == {}
    # only arms hearing the editor's evidence settle a reference by it
    assert not any(k.startswith("ref: active") for k in result["arms"]["seed"]["ref_picks"])
    assert set(result["targets"]) == {
        *(f"{a} vs seed" for a in ("editor", "value", "gate", "entropy")),
        *(f"{a} vs editor" for a in ("value", "gate", "entropy")),
    }
    assert "| over-asking |" in bench.table(result)


def test_the_ablations_leave_the_ranking_as_it_was(bench):
    from talos_ls.gates import question_value

    original = question_value.rank
    for arm in bench.ARMS:
        with bench.arm_ranking(arm) as ranking:
            assert ranking == ("seed" if arm in ("seed", "editor") else "value")
        assert question_value.rank is original


def test_the_script_writes_json(tmp_path):
    out = tmp_path / "out.json"
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--sessions",
            "1",
            "--turns",
            "6",
            "--arms",
            "seed,value",
            "--classes",
            "conflict",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "identical sessions in every arm: True" in done.stdout
    result = json.loads(out.read_text())
    assert set(result["arms"]) == {"seed", "value"}
    assert result["session_digests"]["seed"] == result["session_digests"]["value"]
    held = result["held_out"]
    assert held["turns_by_class"]["conflict"] == held["judged_turns"] == 8
    assert set(held["arms"]) == {"seed", "value"}


def test_the_held_out_cases_are_labelled_consistently(bench):
    from question_cases import CLASS_PREAMBLES, FILES, LANGUAGES, MODULES, PREAMBLES, SLOT_TRUTH

    assert {c.lang for c in bench.CASES} == set(LANGUAGES)  # en and at least five others
    for case in bench.CASES:
        assert case.cls in bench.CLASSES and case.context in FILES, case
        assert all(p in PREAMBLES for p in CLASS_PREAMBLES[case.cls])
        if case.about is not None and case.about[0] == "ref":
            assert case.about[2] in MODULES[case.about[1]], case
        elif case.about is not None and case.about[0] == "slot":
            assert case.about[1] in SLOT_TRUTH, case
        elif case.about is not None:
            assert case.about[0] == "file" and case.about[1] in FILES, case
    assert all(f in FILES for files in MODULES.values() for f in files)


def test_a_few_held_out_cases_add_up(bench):
    firsts: dict = {}  # the first case of each class, after each of its preambles
    for case in bench.CASES:
        firsts.setdefault(case.cls, case)
    cases = [(c, p) for c, p in bench.held_out_cases() if firsts[c.cls] is c]
    result = bench.run_held_out(arms=("seed", "value"), trace="value", cases=cases)
    assert result["judged_turns"] == len(cases) == len(result["trace"])
    for counts in result["arms"].values():
        assert counts["turns"] == counts["budget_as_designed"] == len(cases)
        assert counts["over_asks"] <= counts["questions"] <= counts["budget_open"]
        assert counts["useful_changed"] <= counts["useful"] <= counts["questions"]
        assert counts["stated"] + counts["unstated"] == counts["to_state"]
        for name, table in (
            ("over_asks", "over_by_cause"),
            ("over_asks", "over_by_words"),
            ("misses", "miss_by_cause"),
            ("wrong", "wrong_by_cause"),
            ("unstated", "unstated_by_cause"),
        ):
            assert sum(counts[table].values()) == counts[name]
        assert sum(c["turns"] for c in counts["by_class"].values()) == len(cases)
    # a boilerplate trap: whatever is asked there is an over-ask of that cause
    trap = next(r for r in result["trace"] if r["cls"] == "boilerplate")
    assert trap["over"] == ("boilerplate" if trap["asked"] else None)
    assert "| over-asks per 100 turns |" in bench.held_out_table(result)
    assert "[conflict/en/answered]" in bench.trace_lines(result)


def _record(reference: dict):
    from talos_ls.memory.resolve import ResolutionRecord

    return ResolutionRecord("a", "res:1", 1, json.dumps([reference]), reference["status"])


def test_an_assumption_is_stated_by_the_field_or_else_by_the_note(bench):
    files = ("src/parser.py", "tools/parser.py")
    gap = {
        "surface": "the parser",
        "start": 8,
        "end": 18,
        "status": "evidence_gap",
        "resolved_text": None,
        "assumption": None,
        "candidates": list(files),
        "question": "Which do you mean by 'the parser': src/parser.py or tools/parser.py?",
        "evidence": None,
    }
    case = bench.Case("fix the parser", "README.md", "english", "en", ("ref", "parser", files[1]))
    # a record without the product's field (as before it had one): the first is taken, unsaid
    record = _record(gap)
    assert bench.held_out_pick(case, False, record) == (files[0], "guess")
    assert bench.unstated_cause(record, files, files[0]) == "no note"
    # with the product's field: its candidate is taken, stated when the others are named
    assumed = {"candidate": files[1], "why": "the last one touched", "not": [files[0]]}
    record = _record({**gap, "assumption": assumed})
    assert bench.held_out_pick(case, False, record) == (files[1], "assumed")
    assert bench.unstated_cause(record, files, files[1]) is None
    record = _record({**gap, "assumption": {**assumed, "not": []}})
    assert bench.unstated_cause(record, files, files[1]) is not None
    # resolved by the editor: the note names the file taken and the other after "not"
    resolved = {
        **gap,
        "status": "resolved",
        "resolved_text": files[1],
        "question": None,
        "evidence": {"rule": "active document", "decided": True, "resolved_text": files[1]},
    }
    record = _record(resolved)
    assert bench.held_out_pick(case, False, record) == (files[1], "active document")
    assert bench.unstated_cause(record, files, files[1]) is None
    # no reference found at all
    assert bench.unstated_cause(_record({**gap, "candidates": ["x.py"]}), files, files[0]) == (
        "not seen"
    )
