"""The terminal UI of `talos run`, driven in a real pseudo-terminal against the scripted model:
streamed text and the live status line, prompts that pause the live output (nothing
interleaves with a question), an apply prompt that asks again, a dismissed one left for
`talos apply`, a stale edit said so, hostile model text inert in the live display, and Ctrl-C
at a prompt."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import termios
import time

import pytest

from talos_ls.demo.scripted_model import reply

from .pseudo_terminal import SGR, Terminal, plain
from .test_run import EDIT, TALOS, env_for

ORIGINAL = "def main():\n    return 1\n"
PRICE = {"input": "2.00", "cached_input": "0.50", "output": "8.00"}  # $ per million tokens
STATUS = r"step (\d+) · ([\w ]+) · (\d+\.\ds) · ([\d,]+) in / ([\d,]+) out · \$(\d+\.\d{4})"


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text(ORIGINAL)
    return root


ASKING = "make main return 2 and add tests"  # the rules below are about tests: relevant


def conflicting_rules(ws):
    """Two rules files that disagree: a turn about tests asks which is right."""
    (ws / "AGENTS.md").write_text("- Tests use unittest\n")
    (ws / "CLAUDE.md").write_text("- Tests use pytest\n")


def talos_run(tmp_path, ws, server, *extra, request="make main return 2", **env):
    """`talos run` in a pseudo-terminal that is its controlling terminal (so Ctrl-C is a
    SIGINT, as at a real one), TERM with colours, the scripted model priced."""
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"fake-model": PRICE}))
    argv = [
        TALOS,
        "run",
        request,
        "--workspace",
        str(ws),
        "--base-url",
        server.url,
        "--model",
        "fake-model",
        *extra,
    ]
    env = env_for(tmp_path, TERM="xterm-256color", TALOS_PRICES=str(prices), **env)
    return ControllingTerminal(argv, env, tmp_path)


class ControllingTerminal(Terminal):
    """`Terminal`, with the pseudo-terminal as the process's controlling terminal: a new
    session whose foreground group gets the SIGINT the line discipline makes of a ^C."""

    def __init__(self, argv, env, cwd=None, columns: int = 200) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 60, columns, 0, 0))
        self.proc = subprocess.Popen(
            list(argv),
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=dict(env),
            cwd=cwd,
            close_fds=True,
            start_new_session=True,
            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
        )
        os.close(slave)
        self.master = master
        self.raw = b""

    def seen(self, start: int = 0, end: int | None = None) -> str:
        return plain(self.raw[start:end])

    def drain(self, seconds: float) -> None:
        """Take in what the process prints for `seconds`."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and self._read(0.05):
            pass


def wait_for_requests(server, count: int, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while len(server.requests) < count:
        assert time.monotonic() < deadline, f"the model had {len(server.requests)} requests"
        time.sleep(0.02)


def test_streamed_text_and_the_live_status_line(tmp_path, server, ws):
    """The model trickles its answer: it shows while the task still runs, under a status line
    with the step, the elapsed time, the tokens and the running cost; when the task ends the
    live display goes and the answer is printed once."""
    answer = "main returns 1 and nothing calls it; changing it is safe. " * 3
    server.script += [
        reply(
            "Reading src/app.py first.",
            [("c1", "read_file", '{"path": "src/app.py"}')],
            usage=(1000, 50, 0),
        ),
        reply(answer, usage=(1200, 60, 0), delay=0.08),  # 26 chunks: about two seconds
    ]
    started = time.monotonic()
    term = talos_run(tmp_path, ws, server)
    term.until(r"main returns 1 and nothing calls it")  # the first words of step 2
    streaming = term.seen()
    assert term.proc.poll() is None and "talos:" not in streaming  # before the task ends
    assert answer.strip() not in streaming  # a part of it, not all: it is still coming
    # Step 1's text was printed for good when it turned out to call a tool.
    assert "Reading src/app.py first." in streaming
    # The status line: step 2, thinking, elapsed, step 1's tokens and cost.
    # (1000 in at $2/M + 50 out at $8/M = $0.0024.)
    statuses = [m.groups() for m in re.finditer(STATUS, streaming)]
    assert ("2", "thinking") in [s[:2] for s in statuses], statuses
    last = statuses[-1]
    assert last[3:] == ("1,000", "50", "0.0024"), last
    assert 0 < float(last[2][:-1]) < time.monotonic() - started
    assert term.finish() == 0, term.seen()
    out = term.seen()
    final = out.index(f"talos: {answer.strip()}")
    assert out.count(f"talos: {answer.strip()}") == 1
    assert not re.search(STATUS, out[final:]), "the status line outlived the task"
    assert "done: 2200 tokens in, 110 out, $0.0053" in out
    assert b"\x1b[?25h" in term.raw[term.raw.rindex(b"\x1b[?25l") :]  # the cursor is back


def test_the_apply_prompt_asks_again_on_a_reply_that_is_no_choice(tmp_path, server, ws):
    server.script += [reply(None, [("c1", "propose_edit", EDIT)]), reply("main returns 2.")]
    term = talos_run(tmp_path, ws, server)
    term.until(r"Apply proposal (p\w+) to src/app.py\? 1\. Apply 2\. Reject >")
    term.send("yes please\n")  # not one of the choices: asked again, not taken as Reject
    asked = len(term.raw)
    term.until(
        r"Not one of the choices: answer 1 to 2 or a choice's name, or press Enter "
        r"to dismiss\.\s*>",
        asked,
    )
    assert (ws / "src" / "app.py").read_text() == ORIGINAL  # nothing decided yet
    term.send("1\n")
    assert term.finish() == 0, term.seen()
    assert re.search(r"applied p\w+ to src/app.py", term.seen(asked))
    assert (ws / "src" / "app.py").read_text() == "def main():\n    return 2\n"


def test_keys_pressed_before_a_prompt_appears_do_not_answer_it(tmp_path, server, ws):
    """Enter and "2" typed while the model works are not a dismissal or a Reject of the apply
    prompt that comes after: only a reply to the prompt on screen counts."""
    server.script += [
        reply(None, [("c1", "propose_edit", EDIT)]),
        reply("main returns 2 now.", delay=0.1),
    ]
    term = talos_run(tmp_path, ws, server)
    term.until(r"main returns")  # the model is still streaming: no prompt yet
    term.send("\n2\n")
    found = term.until(r"Apply proposal (p\w+) to src/app.py\? 1\. Apply 2\. Reject >\s*$")
    term.drain(0.3)
    assert term.proc.poll() is None and "left pending" not in term.seen()
    assert (ws / "src" / "app.py").read_text() == ORIGINAL
    term.send("1\n")
    assert term.finish() == 0, term.seen()
    assert f"applied {found.group(1)} to src/app.py" in term.seen()
    assert (ws / "src" / "app.py").read_text() == "def main():\n    return 2\n"


def test_a_dismissed_apply_prompt_leaves_the_proposal_for_talos_apply(tmp_path, server, ws):
    server.script += [reply(None, [("c1", "propose_edit", EDIT)]), reply("main returns 2.")]
    term = talos_run(tmp_path, ws, server)
    found = term.until(r"Apply proposal (p\w+) to src/app.py\? 1\. Apply 2\. Reject >")
    proposal = found.group(1)
    term.send("\n")  # Enter: dismissed, neither applied nor rejected
    assert term.finish() == 0, term.seen()
    assert re.search(rf"talos apply {proposal}\b[^.]* applies it later", term.seen())
    assert (ws / "src" / "app.py").read_text() == ORIGINAL
    later = subprocess.run(
        [TALOS, "apply", proposal],
        cwd=ws,
        capture_output=True,
        text=True,
        env=env_for(tmp_path),
        timeout=30,
    )
    assert later.returncode == 0, later.stdout + later.stderr
    assert (ws / "src" / "app.py").read_text() == "def main():\n    return 2\n"


def test_a_proposal_gone_stale_at_the_apply_prompt_is_said_so(tmp_path, server, ws):
    server.script += [reply(None, [("c1", "propose_edit", EDIT)]), reply("main returns 2.")]
    term = talos_run(tmp_path, ws, server)
    found = term.until(r"Apply proposal (p\w+) to src/app.py\? 1\. Apply 2\. Reject >")
    edited = "def main():\n    return 3  # the person's own edit\n"
    (ws / "src" / "app.py").write_text(edited)  # while the prompt waits
    asked = len(term.raw)
    term.send("1\n")
    term.finish()
    after = term.seen(asked)
    assert (
        f"Proposal {found.group(1)} was not applied: src/app.py changed since it was made "
        "(it is stale)."
    ) in after, after
    assert "applied p" not in after
    assert (ws / "src" / "app.py").read_text() == edited


def test_the_question_prompt_is_not_interleaved_with_a_diff(tmp_path, server, ws):
    """The turn asks a question while its task makes a proposal: the diff waits until the
    question is answered, then comes, then the apply prompt."""
    conflicting_rules(ws)
    server.script += [reply(None, [("c1", "propose_edit", EDIT)]), reply("main returns 2.")]
    term = talos_run(tmp_path, ws, server, request=ASKING)
    found = term.until(r"Which is right\?.*?(\d+)\. pytest.*?>\s*$")
    wait_for_requests(server, 2)  # the proposal is made
    term.drain(0.5)  # ...and would have been shown by now
    at_prompt = term.seen()
    assert "return 2" not in at_prompt and "proposal p" not in at_prompt, at_prompt
    assert at_prompt.rstrip().endswith(">"), at_prompt  # the prompt is the last thing shown
    answered = len(term.raw)
    term.send(found.group(1) + "\n")
    term.until(r"Apply proposal .*?>\s*$", answered)
    after = term.seen(answered)
    diff, apply = after.index("+ return 2"), after.index("Apply proposal")
    assert after.index("proposal p") < diff < apply, after
    term.send("2\n")
    assert term.finish() == 0, term.seen()


def test_model_text_with_markup_and_escapes_is_inert_in_the_live_display(tmp_path, server, ws):
    """Streamed text is the model's: Rich markup is shown as typed, and an escape sequence or a
    carriage return cannot clear the screen or overwrite what the live display shows."""
    said = "[conceal]hidden[/conceal] [bold red]loud[/] \x1b[2J\x1b[H\x1b]0;owned\x07\r gone"
    server.script += [
        reply(said, [("c1", "read_file", '{"path": "src/app.py"}')], delay=0.05),
        reply(f"Done {said} end", delay=0.05),
    ]
    term = talos_run(tmp_path, ws, server)
    term.until(r"Done \[conceal\]hidden")  # live, while it streams
    assert term.finish() == 0, term.seen()
    text = SGR.sub(b"", term.raw).decode("utf-8", errors="replace")
    for raw in ("\x1b[2J", "\x1b[H", "\x1b]0;", "\x07", "\r gone", "\x1b[8m"):
        assert raw not in text, f"raw {raw!r} reached the terminal"
    shown = "[conceal]hidden[/conceal] [bold red]loud[/] " + r"\x1b[2J\x1b[H\x1b]0;owned\x07"
    shown += r"\x0d gone"
    seen = term.seen()
    assert seen.count(shown) >= 3, seen  # step 1 printed, the live tail, the final answer
    assert f"talos: Done {shown} end" in seen


def test_ctrl_c_at_a_question_prompt_ends_it_at_once(tmp_path, server, ws):
    """The task is over; the question still waits for the person. ^C ends the prompt and
    the process at once (no thread is left in a blocking read), without a traceback."""
    conflicting_rules(ws)
    server.script += [reply("Nothing to change.")]
    term = talos_run(tmp_path, ws, server, request=ASKING)
    term.until(r"Which is right\?.*?>\s*$")
    wait_for_requests(server, 1)
    term.drain(0.3)
    pressed = time.monotonic()
    term.send("\x03")
    code = term.finish(timeout=60)
    # A prompt that outlived the interrupt would wait for its answer (300 s by default).
    assert time.monotonic() - pressed < 60, "the prompt outlived the interrupt"
    assert code == 130, (code, term.seen())
    assert "Traceback" not in term.seen(), term.seen()


def test_piped_there_is_no_live_display_only_plain_lines(tmp_path, server, ws):
    """Without a terminal: no status line, no cursor movement, a plain line per step, and the
    text of a step that called a tool printed once."""
    server.script += [
        reply("Reading src/app.py first.", [("c1", "read_file", '{"path": "src/app.py"}')]),
        reply("main returns 1."),
    ]
    r = subprocess.run(
        [
            TALOS,
            "run",
            "what does main return",
            "--workspace",
            str(ws),
            "--base-url",
            server.url,
            "--model",
            "fake-model",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=env_for(tmp_path, TERM="xterm-256color"),
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "\x1b" not in r.stdout and not re.search(STATUS, r.stdout)
    lines = r.stdout.splitlines()
    steps = [line.split(": ", 1)[1] for line in lines if line.startswith("task t")]
    assert steps == ["working", "step 1: thinking", "step 1: read_file", "step 2: thinking"]
    assert lines.count("Reading src/app.py first.") == 1
    assert "talos: main returns 1." in lines
