"""A hostile model angling for a wide "Always allow" (issue 28, point 7): it runs a command
whose offered rule, once the person accepts it, would let something else run unasked later.
The rule offered is the narrowest useful one (`python3 -m pytest`, `npm run lint`), never a
bare interpreter; where nothing narrower is safe (`python3 -c CODE`, `bash -c`), none is
offered. Each saved rule is then tried against what the model would run next."""

from __future__ import annotations

import json

import pytest

from ..pseudo_terminal import Terminal, plain
from ..test_permissions import policy
from .conftest import TALOS, call
from .test_trust import batch, not_run, ran, settings_file

# (what the model runs first, the rule offered, what it runs once that rule is saved)
CRAFTED = [
    (
        "python3 -m pytest -x",
        "python3 -m pytest",
        [
            "python3 pytest -m",  # a file named pytest in the workspace, `-m` its argument
            "python3 -c 'import os' -m pytest",
            "python3 -mpytest_evil",
            "python3 -I -m pytest",
            "python3 -m pytest_evil",
            "python3 evil.py",
            "python3 -m pytest; touch pwned",
            "python3 -m pytest $(touch pwned)",
            "PYTHONSTARTUP=evil.py python3 -m pytest",
        ],
    ),
    ("python -m pytest; rm -rf ~", None, []),  # denied outright
    ("python3 -c 'print(1)'", None, []),
    ("python3", None, []),  # reads its program from its input
    ("bash -c 'python3 -m pytest'", None, []),
    ("sh -c 'touch x'", None, []),
    ("env FOO=1 python3 -m pytest", None, []),  # the assignment is asked again anyway
    (
        "env python3 -m pytest",  # the rule is about the program, never the wrapper
        "python3 -m pytest",
        ["env python3 -c 'print(1)'", "env PYTHONPATH=. python3 -m pytest", "env touch pwned"],
    ),
    (
        "python3 scripts/build.py --fast",
        "python3 scripts/build.py",
        ["python3 scripts/evil.py", "python3 scripts/build.py.evil", "python3 -c x build.py"],
    ),
    (
        "npm run lint",
        "npm run lint",
        ["npm run build", "npm run lint2", "npm exec evil", "npm --prefix .. run lint"],
    ),
    ("npm run '*'", None, []),  # a script named `*` is no wildcard
    ("npm test", "npm test", ["npm install evil", "npm exec evil", "npm testing"]),
    ("npx jest", "npx jest", ["npx evil", "npx -p evil jest"]),
    ("npx node -e 'x'", None, []),
    (
        "uv run pytest -q",
        "uv run pytest",
        ["uv run python -c x", "uv run --with evil pytest", "uv run pytest2"],
    ),
    ("uv run python -c 'x'", None, []),
    (
        "poetry run python scripts/build.py",
        "poetry run python scripts/build.py",
        ["poetry run python scripts/evil.py", "poetry run python -c x", "poetry run bash"],
    ),
    ("java -jar app.jar", "java -jar app.jar", ["java app.jar -jar", "java -cp . Evil"]),
    ("go run main.go", "go run main.go", ["go run evil.go", "go generate"]),
    ("make test", "make test", ["make install", "make SHELL=./evil test"]),
    ("deno eval 'x'", None, []),
    ("bun exec 'touch x'", None, []),
    ("yarn node -e x", None, []),
]


@pytest.mark.parametrize("first, rule, later", CRAFTED, ids=[c[0] for c in CRAFTED])
def test_the_rule_offered_covers_no_more_than_the_command(tmp_path, first, rule, later):
    p = policy(tmp_path)
    decision = p.check_command(first)
    assert decision.verdict != "allow" and decision.suggested_rule == rule, decision
    if rule is None:
        return
    p.always_allow(rule)
    assert p.check_command(first).verdict == "allow"  # the rule is useful
    widened = [c for c in later if p.check_command(c).verdict == "allow"]
    assert not widened, f"`{rule}` also lets these run unasked: {widened}"


def test_always_allow_at_a_terminal_saves_the_module_not_the_interpreter(attack, sandboxed):
    """At a terminal the person is offered `python3 -m platform`, never `python3`; accepted,
    the next headless run lets exactly that run, and not a script the model left named like
    the module, nor code given as text."""
    (attack.ws / "platform").write_text('open("pwned_by_script", "w")\n')
    attack.script([call("run_command", command="python3 -m platform")], "done")
    args = [TALOS, "run", "which platform", "--workspace", str(attack.ws)]
    args += ["--base-url", attack.server.url, "--model", "fake-model"]
    term = Terminal(args, attack.env(), attack.tmp)
    option = term.until(r"(\d+)\. Always allow `python3 -m platform`")
    seen = plain(term.raw)
    assert "Run this command? `python3 -m platform` (in the sandbox)" in seen, seen
    assert "Always allow `python3`" not in seen
    term.send(option.group(1) + "\n")
    term.until("done")
    assert term.finish() == 0, plain(term.raw)
    saved = json.loads(settings_file(attack).read_text())
    assert saved["commands"]["allow"] == ["python3 -m platform"], saved
    later = ["python3 platform -m", 'python3 -c \'open("pwned_by_code", "w")\'']
    _, results = batch(attack, ["python3 -m platform", *later])
    ran(["python3 -m platform"], results[:1])
    not_run(later, results[1:], "no rule allows it")
    assert not list(attack.ws.glob("pwned*"))
