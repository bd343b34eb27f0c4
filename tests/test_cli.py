"""`talos questions` and `talos memory`, run as the real console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from talos_ls.gates.question_queue import QuestionQueue
from talos_ls.memory.facts import FactStore
from talos_ls.store import open_store

from .conftest import disjunction

TALOS = [str(Path(sys.executable).with_name("talos"))]


def run(*args, url=None, env_extra=None):
    env = {k: v for k, v in os.environ.items() if k != "TALOS_STORE_URL"}
    if url:
        env["TALOS_STORE_URL"] = url
    env.update(env_extra or {})
    return subprocess.run(TALOS + list(args), capture_output=True, text=True, env=env, timeout=60)


@pytest.fixture
def populated(tmp_path):
    url = "sqlite:///" + str(tmp_path / "t.db")
    store = open_store(url)
    qq = QuestionQueue(store)
    facts = qq.facts
    answered, a, b = disjunction(qq, facts, turn=3, agent="/work/proj")
    qq.next_question("/work/proj", 3)
    qq.record_answer(answered, "afternoon", 4)
    facts.supersede(a, b)
    qq.propose(
        "/work/proj",
        "Which parser: src/parser.py or tools/parser.py?",
        "referent",
        "r",
        ["rec#ref:4:14"],
        "evidence_gap",
        4,
    )
    qq.propose("other", "Tabs or spaces?", "confirmation", "r", ["k"], "gate_refusal", 0)
    store.close()
    return url


def test_questions_table(populated):
    r = run("questions", "--all-agents", url=populated)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "agent /work/proj: last question at turn 3; budget reopens at turn 8" in out
    assert "agent other: no question asked yet; the budget is open" in out
    assert "Which parser: src/parser.py or tools/parser.py?" in out
    assert "Does Dana prefer" not in out  # answered: hidden by default
    assert "(1 answered or expired not shown; --all shows them)" in out
    everything = run("questions", "--all", "--agent", "/work/proj", url=populated).stdout
    assert "answered" in everything and "[answered: afternoon]" in everything
    assert "Tabs or spaces" not in everything


def test_questions_json(populated):
    r = run(
        "--store", populated, "questions", "--all", "--all-agents", "--json", "--budget-turns", "7"
    )
    data = {entry["agent"]: entry for entry in json.loads(r.stdout)}
    assert data["/work/proj"]["budget_reopens_at_turn"] == 10
    statuses = sorted(c["status"] for c in data["/work/proj"]["candidates"])
    assert statuses == ["answered", "pending"]
    assert data["other"]["last_delivery_turn"] is None


def test_memory_table_and_json(populated):
    r = run("memory", "--all-agents", url=populated)
    assert r.returncode == 0, r.stderr
    assert "agent /work/proj: 2 facts" in r.stdout
    assert "0.20  3 (+0/-3)  model   superseded by fact:" in r.stdout
    assert "0.80  3 (+3/-0)  model   live" in r.stdout
    facts = json.loads(run("memory", "--json", "--agent", "/work/proj", url=populated).stdout)
    assert sorted(round(f["confidence"], 2) for f in facts) == [0.2, 0.8]
    assert "No facts" in run("memory", "--agent", "nobody", url=populated).stdout


def test_fresh_default_store(tmp_path):
    r = run("questions", "--all-agents", env_extra={"XDG_STATE_HOME": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    assert "nothing has been proposed yet" in r.stdout
    assert (tmp_path / "talos" / "talos.db").exists()


def test_errors_are_one_line_with_exit_codes(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    r = run("--store", "sqlite:///" + str(notes), "memory")
    assert r.returncode == 1
    assert r.stderr.startswith("talos: error: store ") and "not a Talos database" in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert notes.read_text() == "my notes\n"
    assert run().returncode == 2
    assert run("questions", "--bogus").returncode == 2
    assert run("--version").stdout.startswith("talos ")


def test_memory_add_conflicts_and_forget(tmp_path):
    url = "sqlite:///" + str(tmp_path / "t.db")
    first = run(
        "memory", "add", "Tests use unittest", "--source", "rules file", "--agent", "w", url=url
    )
    assert first.returncode == 0 and "nothing else is held about 'Tests use'" in first.stdout
    second = run(
        "memory", "add", "tests use pytest", "--source", "rules file", "--agent", "w", url=url
    )
    assert "conflicts with another fact about 'tests use'" in second.stdout
    conflicts = run("memory", "--all-agents", "conflicts", url=url)
    assert "agent w: conflict" in conflicts.stdout
    assert "Tests use unittest" in conflicts.stdout and "tests use pytest" in conflicts.stdout
    data = json.loads(run("memory", "conflicts", "--json", "--agent", "w", url=url).stdout)
    assert len(data) == 1 and len(data[0]["sides"]) == 2
    person = run("memory", "add", "tests use pytest", "--agent", "w", url=url)
    assert "replaces what a lower-precedence source said" in person.stdout
    assert run("memory", "--agent", "w", "conflicts", url=url).stdout.strip() == (
        "No unresolved conflicts."
    )
    facts = json.loads(run("memory", "--json", "--agent", "w", url=url).stdout)
    live = [f for f in facts if f["invalid_at"] is None]
    assert [(f["source"], f["value"]) for f in live] == [("person", "pytest")]
    short = live[0]["key"][:13]
    forgot = run("memory", "forget", short, url=url)
    assert forgot.returncode == 0 and forgot.stdout.startswith("retracted " + live[0]["key"])
    assert "retracted" in run("memory", "--agent", "w", url=url).stdout
    ambiguous = run("memory", "forget", "fact:", url=url)
    assert ambiguous.returncode == 1 and "3 facts have the key 'fact:'" in ambiguous.stderr
    bad = run("memory", "add", "x", "--subject", "tests", url=url)
    assert bad.returncode == 2 and "attribute is missing" in bad.stderr


def test_memory_add_defaults_to_this_workspace(tmp_path):
    url = "sqlite:///" + str(tmp_path / "t.db")
    env = {k: v for k, v in os.environ.items() if k != "TALOS_STORE_URL"}
    env["TALOS_STORE_URL"] = url
    r = subprocess.run(
        [*TALOS, "memory", "add", "deploys need approval"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert r.returncode == 0 and f"for agent {tmp_path.resolve()}:" in r.stdout


def test_a_closed_pipe_is_not_a_traceback(tmp_path):
    url = "sqlite:///" + str(tmp_path / "t.db")
    store = open_store(url)
    facts = FactStore(store)
    for i in range(300):  # more JSON than a pipe buffer holds
        facts.add("w", f"fact number {i} " + "x" * 200)
    store.close()
    env = {k: v for k, v in os.environ.items() if k != "TALOS_STORE_URL"}
    env["TALOS_STORE_URL"] = url
    shell = (
        f"{TALOS[0]} memory --all-agents --json | head -c 100 >/dev/null; "
        "echo ${PIPESTATUS[0]} >&2"
    )
    r = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, env=env, timeout=60)
    assert "Traceback" not in r.stderr and "BrokenPipeError" not in r.stderr, r.stderr
    assert r.stderr.strip() == "141"


def test_log_file_is_redacted_and_a_bad_one_is_a_usage_error(tmp_path, server):
    from .fake_openai import error, reply

    server.script += [error(500, "overloaded"), reply("Done.")]
    log = tmp_path / "talos.log"
    ws = tmp_path / "ws"
    ws.mkdir()
    secret = "sk-test-secret-value-123456"
    r = run(
        "--log-file",
        str(log),
        "run",
        "x",
        "--workspace",
        str(ws),
        "--base-url",
        server.url,
        "--model",
        "fake-model",
        url="sqlite:///" + str(tmp_path / "t.db"),
        env_extra={"OPENAI_API_KEY": secret},
    )
    assert r.returncode == 0, r.stderr
    text = log.read_text()
    assert "500 from" in text and "retrying" in text  # DEBUG and INFO reach the file
    assert secret not in text and "retrying" not in r.stderr  # stderr stays at WARNING
    headers = {k.lower(): v for k, v in server.requests[0]["headers"].items()}
    assert headers["authorization"] == f"Bearer {secret}"  # the key was in play
    bad = run("--log-file", str(tmp_path / "no" / "such" / "dir.log"), "memory")
    assert bad.returncode == 2
    assert bad.stderr.startswith("talos: error: cannot write the log file")


def test_log_lines_go_to_the_stderr_of_the_moment(monkeypatch):
    """The terminal's live display swaps sys.stderr for a proxy that prints above the status
    line; a log line must go through it, not to the stream that was there at start-up."""
    import io
    import logging

    from talos_ls.cli_report import setup_logging

    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        setup_logging(verbose=False, log_file=None)
        swapped = io.StringIO()
        monkeypatch.setattr(sys, "stderr", swapped)
        logging.getLogger("talos_ls.test").warning("the index is late")
        assert swapped.getvalue() == "talos: WARNING: the index is late\n"
    finally:
        root.handlers[:], root.level = saved[0], saved[1]
