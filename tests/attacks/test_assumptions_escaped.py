"""What a task went on without the person's word ends its summary (issue 31): the rules files'
own statements and the workspace's file names, both chosen by whoever wrote the repository.
Through the real `talos run` (its terminal output) they reach the person escaped: a screen
clear, a colour, a bidi override or a line break planted in a rules file shows as text, never
as what it would do, and cannot forge a line of Talos's own."""

from __future__ import annotations

import subprocess

from .conftest import TALOS, Attack

RAW = ("\x1b", "\u202e", "\x07")
AGENTS = "- Tests use unittest\x1b[2J\x1b]0;pwned\x07\n"
CLAUDE = "- Tests use pytest\u202eyalp\n"


def test_the_assumptions_a_summary_ends_with_are_escaped(attack: Attack):
    (attack.ws / "AGENTS.md").write_text(AGENTS)
    (attack.ws / "CLAUDE.md").write_text(CLAUDE)
    attack.script("Wrote the tests.")
    args = ["run", "write the tests", "--workspace", str(attack.ws), "--model", "fake-model"]
    proc = subprocess.run(
        [TALOS, *args, "--base-url", attack.server.url],
        capture_output=True,
        text=True,
        timeout=90,
        stdin=subprocess.DEVNULL,
        env=attack.env(),
        cwd=attack.tmp,
    )
    out = proc.stdout
    assert "Not confirmed by you (say so if one is wrong):" in out, (out, proc.stderr)
    said = [line for line in out.splitlines() if "they conflict" in line or "Tests use" in line]
    assert said, out
    assert not [c for c in RAW if c in out], repr(out)  # shown, not done
    assert "\\x1b[2J" in out and "\\u202e" in out, out
