"""A smoke run of bench/question_value.py at a tiny size: the output has the shape the README
reports, the counts add up, and every arm replayed the very same sessions."""

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
    spec = importlib.util.spec_from_file_location("question_value_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being made
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


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
