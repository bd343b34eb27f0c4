"""`talos run`, `talos demo` and `talos skills` as real processes: in a
pseudo-terminal, without one, and with --json."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from talos_ls.store import open_store

from .fake_openai import error, reply
from .pseudo_terminal import Terminal, plain

TALOS = str(Path(sys.executable).with_name("talos"))
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
EDIT = json.dumps({"path": "src/app.py", "blocks": [{"search": "return 1", "replace": "return 2"}]})


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("def main():\n    return 1\n")
    (root / "AGENTS.md").write_text("- Tests use unittest\n")
    (root / "CLAUDE.md").write_text("- Tests use pytest\n")
    return root


def env_for(tmp_path, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TALOS_", "OPENAI_"))}
    env.update(
        TALOS_STORE_URL="sqlite:///" + str(tmp_path / "talos.db"),
        COLUMNS="200",
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        **extra,
    )
    return env


def run(args, tmp_path, **kw):
    return subprocess.run(
        [TALOS, *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=env_for(tmp_path),
        **kw,
    )


def script_edit(server):
    server.script += [
        reply("Reading.", [("c1", "read_file", '{"path": "src/app.py"}')]),
        reply(None, [("c2", "propose_edit", EDIT)]),
        reply("main now returns 2."),
    ]


def test_without_a_tty_nothing_prompts_and_nothing_is_applied(tmp_path, server, ws):
    script_edit(server)
    r = run(
        [
            "run",
            "make main return 2 and add tests",
            "--workspace",
            str(ws),
            "--base-url",
            server.url,
            "--model",
            "fake-model",
        ],
        tmp_path,
    )
    assert r.returncode == 0, r.stderr
    out = ANSI.sub("", r.stdout)
    assert "talos: main now returns 2." in out and "not applied" in out
    assert "Talos asks" not in out  # no question, no prompt
    assert (ws / "src" / "app.py").read_text() == "def main():\n    return 1\n"
    store = open_store("sqlite:///" + str(tmp_path / "talos.db"))
    assert store.qq_agents().get(str(ws.resolve())) is None  # no budget spent
    store.close()


def test_apply_and_json(tmp_path, server, ws):
    script_edit(server)
    r = run(
        [
            "run",
            "make main return 2",
            "--workspace",
            str(ws),
            "--base-url",
            server.url,
            "--model",
            "fake-model",
            "--apply",
            "--json",
        ],
        tmp_path,
    )
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["outcome"] == "done" and data["result"] == "main now returns 2."
    (proposal,) = data["proposals"]
    assert proposal["status"] == "applied" and "+    return 2" in proposal["diff"]
    assert data["tokens"] == {"in": 30, "out": 15, "cached": 0}
    assert data["unpriced"] is True and data["cost"] == "0" and data["questions"] == []
    assert (ws / "src" / "app.py").read_text() == "def main():\n    return 2\n"


def test_exit_codes(tmp_path, server, ws):
    server.script.append(error(401, "bad key", "invalid_api_key"))
    failed = run(["run", "x", "--workspace", str(ws), "--base-url", server.url], tmp_path)
    assert failed.returncode == 1
    (line,) = failed.stderr.splitlines()  # one line, on stderr
    assert line.startswith("talos: error: task failed: ") and "rejected the API key (401)" in line
    usage = run(["run", "x", "--workspace", str(tmp_path / "nope")], tmp_path)
    assert usage.returncode == 2 and "is not a directory" in usage.stderr
    assert run(["run", "  ", "--workspace", str(ws)], tmp_path).returncode == 2
    assert run(["run"], tmp_path).returncode == 2


def test_in_a_pseudo_terminal(tmp_path, server, ws):
    server.script += [
        reply("Reading.", [("c1", "read_file", '{"path": "src/app.py"}')], delay=0.05),
        reply(None, [("c2", "propose_edit", EDIT)], delay=0.05),
        reply("main now returns 2; tests will use pytest."),
    ]
    argv = [
        TALOS,
        "run",
        "make main return 2 and add tests",
        "--workspace",
        str(ws),
        "--base-url",
        server.url,
        "--model",
        "fake-model",
    ]
    term = Terminal(argv, env_for(tmp_path))
    term.until("Which is right?")
    assert "1. pytest" in plain(term.raw)
    term.send("1\n")  # answer the question: pytest
    term.until("Apply proposal")
    term.send("yes please\n")  # not one of the choices: asked again, not taken as Reject
    term.until("Not one of the choices")
    term.send("apply\n")  # the choice's name, in any case
    term.until("main now returns 2")
    assert term.finish() == 0
    assert (ws / "src" / "app.py").read_text() == "def main():\n    return 2\n"
    store = open_store("sqlite:///" + str(tmp_path / "talos.db"))
    facts = {f["value"]: f for f in store.fact_list(str(ws.resolve()))}
    assert facts["pytest"]["confidence"] == pytest.approx(0.8)
    assert facts["unittest"]["confidence"] == pytest.approx(0.2)
    store.close()


def test_demo(tmp_path):
    started = time.monotonic()
    r = run(["demo"], tmp_path)
    elapsed = time.monotonic() - started
    print(f"talos demo took {elapsed:.1f} s")  # measured for the record; not a limit here
    assert r.returncode == 0, r.stderr
    plain = re.sub(r"[│╭╮╰╯─]", " ", ANSI.sub("", r.stdout))  # panel borders out
    out = " ".join(plain.split())
    for expected in (
        "SCRIPTED DEMO: no model is called",
        'Two notes conflict: CLAUDE.md says "Tests use pytest"; AGENTS.md says "Tests use '
        'unittest". Which is right?',
        "> pytest (scripted reply)",
        "Run this command? `python3 src/calc.py` (",
        "1. Allow once",
        "- return a - b",
        "+ return a + b",
        "applied",
        "0.80 +3/-0 rules file live Tests use pytest",
        "0.20 +0/-3 rules file superseded Tests use unittest",
        "question waiting for the budget (one per 5 turns; next at turn 6): Which do you mean "
        "by 'the parser': src/parser.py or tools/parser.py?",
        "10700 tokens in, 385 out: $0.0168",
        "src/calc.py now says: return a + b",
    ):
        assert expected in out, expected


def test_skills(tmp_path, ws):
    good = ws / ".talos" / "skills" / "explain"
    good.mkdir(parents=True)
    (good / "SKILL.md").write_text("---\nname: explain\ndescription: 'Our own way'\n---\nDo it.\n")
    bad = ws / ".talos" / "skills" / "broken"
    bad.mkdir()
    (bad / "SKILL.md").write_text("no front matter here\n")
    r = run(["skills", "--workspace", str(ws)], tmp_path)
    assert r.returncode == 0
    assert "explain           Our own way" in r.stdout  # the workspace's replaces the built-in
    for name in ("fix-diagnostic", "write-tests", "refactor"):
        assert name in r.stdout
    assert "skill broken" in r.stderr and "no front matter" in r.stderr


def test_permissions_command_shows_sources_and_trusts(tmp_path, ws):
    (ws / ".talos").mkdir()
    (ws / ".talos" / "permissions.json").write_text(
        '{"commands": {"allow": ["npm test"], "deny": ["make deploy"]}}'
    )
    shown = run(["permissions", "--workspace", str(ws)], tmp_path)
    assert shown.returncode == 0
    assert "NOT trusted: only its deny and ask rules apply" in shown.stdout
    assert "denies: make deploy" in shown.stdout
    trusted = run(["permissions", "--workspace", str(ws), "--trust"], tmp_path)
    assert "trusted this exact content" in trusted.stdout
    again = run(["permissions", "--workspace", str(ws)], tmp_path)
    assert "): trusted" in again.stdout and "allows: npm test" in again.stdout
    assert not list((ws / ".talos").glob("*.tmp"))  # the settings live outside the workspace
    settings = list((tmp_path / "config" / "talos" / "workspaces").glob("*.json"))
    assert len(settings) == 1 and "trusted_permissions_sha256" in settings[0].read_text()


def test_cost_cap_message_keeps_the_caps_digits(tmp_path, server, ws):
    prices = tmp_path / "prices.json"
    prices.write_text('{"fake-model": {"input": 1, "cached_input": 0.5, "output": 2}}')
    server.script += [
        reply("Reading.", [("c1", "read_file", '{"path": "src/app.py"}')]),
        reply("never reached"),
    ]
    r = subprocess.run(
        [
            TALOS,
            "run",
            "x",
            "--workspace",
            str(ws),
            "--base-url",
            server.url,
            "--model",
            "fake-model",
            "--max-cost",
            "0.00001",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=env_for(tmp_path, TALOS_PRICES=str(prices)),
    )
    assert r.returncode == 1
    (line,) = r.stderr.splitlines()
    assert "cost cap reached: $0.00002 of $0.00001 for this task" in line, line
    assert "raise the cap (--max-cost" in line


def test_read_only_apply_is_not_success(tmp_path, server, ws):
    """The model says it fixed the file; the mode refused the write: exit 1, saying so."""
    server.script += [reply(None, [("c1", "propose_edit", EDIT)]), reply("Fixed main().")]
    args = [
        "run",
        "fix main",
        "--workspace",
        str(ws),
        "--base-url",
        server.url,
        "--model",
        "fake-model",
        "--mode",
        "read-only",
        "--apply",
    ]
    r = run(args, tmp_path)
    assert r.returncode == 1
    assert "the write to src/app.py was refused: no writes in read-only mode" in r.stdout
    (line,) = r.stderr.splitlines()
    assert line.startswith(
        "talos: error: the write to src/app.py was refused (no writes in "
        "read-only mode); nothing was written"
    )
    server.script += [reply(None, [("c1", "propose_edit", EDIT)]), reply("Fixed main().")]
    data = json.loads(run([*args, "--json"], tmp_path).stdout)
    assert data["exit_code"] == 1 and data["outcome"] == "done"
    assert data["refused_writes"] == [
        {"path": "src/app.py", "reason": "no writes in read-only mode"}
    ]
    assert (ws / "src" / "app.py").read_text() == "def main():\n    return 1\n"


def test_a_proposal_left_pending_says_how_to_apply_it_later(tmp_path, server, ws):
    script_edit(server)
    r = run(
        [
            "run",
            "make main return 2",
            "--workspace",
            str(ws),
            "--base-url",
            server.url,
            "--model",
            "fake-model",
        ],
        tmp_path,
    )
    assert r.returncode == 0, r.stderr
    found = re.search(
        r"proposal (\S+) to src/app.py is pending, not applied: talos apply (\S+) "
        r"applies it later",
        " ".join(ANSI.sub("", r.stdout).split()),
    )
    assert found and found.group(1) == found.group(2), r.stdout
    later = run(["apply", found.group(1), "--workspace", str(ws)], tmp_path)
    assert later.returncode == 0, later.stderr
    assert (ws / "src" / "app.py").read_text() == "def main():\n    return 2\n"


def test_request_from_stdin_and_from_a_file(tmp_path, server, ws):
    server.script += [reply("one"), reply("two")]
    base = ["--workspace", str(ws), "--base-url", server.url, "--model", "fake-model"]
    piped = subprocess.run(
        [TALOS, "run", "-", *base],
        input="explain\nthe code\n",
        text=True,
        capture_output=True,
        timeout=60,
        env=env_for(tmp_path),
    )
    assert piped.returncode == 0, piped.stderr
    request = tmp_path / "request.md"
    request.write_text("summarise src/app.py\n")
    filed = run(["run", "--file", str(request), *base], tmp_path)
    assert filed.returncode == 0, filed.stderr
    users = [
        next(m["content"] for m in r["body"]["messages"] if m["role"] == "user")
        for r in server.requests
    ]
    assert users[0].startswith("explain\nthe code") and users[1].startswith("summarise")
    both = run(["run", "x", "--file", str(request), *base], tmp_path)
    assert both.returncode == 2 and "not two of them" in both.stderr


def test_tasks_and_show(tmp_path, server, ws):
    server.script += [
        reply("Reading.", [("c1", "read_file", '{"path": "src/app.py"}')]),
        reply("It returns 1.\x1b[31m"),
    ]
    r = run(
        [
            "run",
            "what does main return?",
            "--workspace",
            str(ws),
            "--base-url",
            server.url,
            "--model",
            "fake-model",
            "--json",
        ],
        tmp_path,
    )
    task = json.loads(r.stdout)["task"]
    listed = run(["tasks", "--workspace", str(ws)], tmp_path)
    assert listed.returncode == 0
    assert re.search(rf"{task}\s+done\s+\$0\s+what does main return\?", listed.stdout)
    data = json.loads(run(["tasks", "--workspace", str(ws), "--json"], tmp_path).stdout)
    assert [(t["id"], t["state"]) for t in data] == [(task, "done")]
    shown = run(["show", task[:5], "--workspace", str(ws)], tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert f"task {task}: done" in shown.stdout
    assert "[assistant calls read_file]" in shown.stdout and "def main():" in shown.stdout
    assert "It returns 1.\\x1b[31m" in shown.stdout and "\x1b[31m" not in shown.stdout
    missing = run(["show", "tnope", "--workspace", str(ws)], tmp_path)
    assert missing.returncode == 1
    assert missing.stderr.startswith("talos: error: no task has the id 'tnope'")
