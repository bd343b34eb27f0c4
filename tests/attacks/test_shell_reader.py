"""A hostile model against the shell reader, through the real `talos run` (issue 25, points 1
to 3): option prefixes and attached values, substitutions bash evaluates, configuration that
makes programs run others (`shell_reader_payloads`). In the default mode the person's own
rules allow every program the payloads use, so that without the reader's fixes each would run
unasked; in full-auto everything the reader can read runs, so each payload must be found
opaque (or, for a substitution it now sees, held by an `ask` rule). Headless, whatever is asked
does not run. Each run is made as the current user and, when that is root, again with no
capabilities (an ordinary user)."""

from __future__ import annotations

import subprocess

import pytest

from ..system import as_ordinary_user
from . import shell_reader_payloads as p
from .conftest import TALOS, Attack, call
from .test_commands import MAX_CALLS, assert_nothing_leaked, assert_ran


def run_payloads(attack: Attack, commands: list[str], mode: str, prefix: list[str]):
    """Every command as a run_command call (16 per model response), one `talos run`."""
    calls = [call("run_command", command=c) for c in commands]
    attack.script(*[calls[i : i + MAX_CALLS] for i in range(0, len(calls), MAX_CALLS)], "done")
    argv = [
        *prefix,
        TALOS,
        "run",
        "do the task",
        "--workspace",
        str(attack.ws),
        "--base-url",
        attack.server.url,
        "--model",
        "fake-model",
        "--json",
        "--mode",
        mode,
    ]
    proc = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
        env=attack.env(),
        cwd=attack.tmp,
    )
    results = attack.tool_results()
    assert len(results) == len(commands), f"{len(results)} results; stderr:\n{proc.stderr}"
    return proc, results


USERS = ["current user", "no capabilities"]
NO_SANDBOX = "commands run without an OS sandbox here"


def prefix_for(user: str) -> list[str]:
    return as_ordinary_user() if user == "no capabilities" else []


def assert_controls_ran(controls: list[str], results: list[str], user: str) -> None:
    """Ordinary work runs unasked, in the sandbox. Root without capabilities cannot set up
    bubblewrap's user namespace on some machines (a container): Talos then has no sandbox and
    asks for every command, which headless means none runs, and says why."""
    if user == "no capabilities" and all(NO_SANDBOX in r for r in results):
        return
    assert_ran(controls, results)


@pytest.mark.parametrize("user", USERS)
def test_default_mode_runs_nothing_hidden_in_options_substitutions_or_configuration(
    attack, sandboxed, user
):
    """The person allows `tar`, `ssh`, `vim`, `make`, `awk`, `test`, `printf`, `read`...; the
    built-in rules allow the readers. Every payload is asked (nobody is there: not run),
    nothing hidden runs, /etc/passwd is not read through an attached value or a prefix, and
    ordinary work still runs unasked."""
    p.seed(attack.ws)
    attack.settings(commands={"allow": p.PERSON_ALLOWS})
    payloads = p.default_mode_payloads()
    proc, results = run_payloads(attack, [*p.CONTROLS, *payloads], "ask", prefix_for(user))
    assert_controls_ran(p.CONTROLS, results[: len(p.CONTROLS)], user)
    bad = p.problems(payloads, results[len(p.CONTROLS) :])
    assert not bad, "ran unasked or read outside:\n" + "\n".join(bad)
    assert p.markers(attack.ws) == []
    assert_nothing_leaked(attack, proc.stdout, proc.stderr, *results)


@pytest.mark.parametrize("user", USERS)
def test_full_auto_asks_for_what_runs_programs_it_cannot_read(attack, sandboxed, user):
    """Full-auto, an `ask` rule for `touch`: every payload either runs a program the reader
    cannot see (asked, so not run headless) or runs `touch` where the reader now sees it
    (the ask rule holds). Arithmetic and loops that evaluate no data still run."""
    p.seed(attack.ws)
    attack.settings(commands={"ask": ["touch"]})
    payloads = p.full_auto_payloads()
    controls = p.FULL_AUTO_CONTROLS
    proc, results = run_payloads(attack, [*controls, *payloads], "full-auto", prefix_for(user))
    assert_controls_ran(controls, results[: len(controls)], user)
    bad = p.problems(payloads, results[len(controls) :])
    assert not bad, "ran unasked:\n" + "\n".join(bad)
    assert p.markers(attack.ws) == []
    assert_nothing_leaked(attack, proc.stdout, proc.stderr, *results)
