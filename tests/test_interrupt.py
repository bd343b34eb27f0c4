"""Ctrl-C in `talos run`, typed at a real pseudo-terminal: the first cancels the running task
(recorded `cancelled` in the store, its transcript kept), says so in one line and exits 130
without a traceback; a second one, while the first is still being cleaned up, exits at once."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

from talos_ls.demo.scripted_model import hang
from talos_ls.store import open_store

from .pseudo_terminal import Terminal, plain
from .redis_server import RedisServer

TALOS = str(Path(sys.executable).with_name("talos"))
CTRL_C = "\x03"  # the terminal turns it into SIGINT for the foreground process


class ControllingTerminal(Terminal):
    """`Terminal`, but the pseudo-terminal is the process's controlling terminal (a new
    session, TIOCSCTTY), as in a shell: only then does a typed Ctrl-C become a SIGINT."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 60, 200, 0, 0))

        def control() -> None:
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(
            argv,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            close_fds=True,
            preexec_fn=control,
        )
        os.close(slave)
        self.master = master
        self.raw = b""


def env_for(tmp_path: Path, url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TALOS_", "OPENAI_"))}
    env.update(TALOS_STORE_URL=url, XDG_CONFIG_HOME=str(tmp_path / "cfg"), COLUMNS="200")
    return env


def start(tmp_path: Path, server, url: str) -> Terminal:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "app.py").write_text("x = 1\n")
    server.script.append(hang("Let me think about"))  # output, then keep-alives for ever
    argv = [
        TALOS,
        "run",
        "fix app.py",
        "--workspace",
        str(ws),
        "--base-url",
        server.url,
        "--model",
        "fake-model",
    ]
    term = ControllingTerminal(argv, env_for(tmp_path, url))
    deadline = time.monotonic() + 30
    while not server.requests:  # the model call is under way
        assert time.monotonic() < deadline and term.proc.poll() is None, plain(term.raw)
        term._read(0.05)
    time.sleep(0.2)  # the first chunk read: the call is mid-stream
    return term


def test_ctrl_c_during_a_model_call(tmp_path, server):
    url = "sqlite:///" + str(tmp_path / "talos.db")
    term = start(tmp_path, server, url)
    mark = len(term.raw)
    term.send(CTRL_C)
    found = term.until(r"talos: interrupted: task (t[0-9a-f]+) was cancelled", mark, timeout=15)
    # A clean-up that waited for the model would wait for ever (it streams keep-alives): the
    # bound is for that hang, not a measure of speed.
    assert term.finish(timeout=60) == 130
    text = plain(term.raw)
    assert (
        "Traceback" not in text and "CancelledError" not in text and "KeyboardInterrupt" not in text
    ), text
    assert text.count("talos: interrupted") == 1
    # The call cut off mid-stream is paid for: counted from what was sent and what arrived.
    said = " ".join(text[text.index("talos: interrupted") :].split())
    counted = re.search(r"(\d+) tokens in, (\d+) out", said)
    assert counted and int(counted[1]) > 0 and int(counted[2]) > 0, said
    assert "(usage estimated: the endpoint reported none)" in said, said
    assert server.disconnected.wait(60)  # the stream to the model was closed
    store = open_store(url)
    try:
        row = store.task_get(found.group(1))
    finally:
        store.close()
    assert row is not None and row["state"] == "cancelled"
    assert any(
        m.get("role") == "user" and "fix app.py" in str(m.get("content")) for m in row["transcript"]
    )  # the transcript is kept


def test_second_ctrl_c_exits_at_once(tmp_path, server):
    """The store (a redis-server) is paused once the model is asked, so the first Ctrl-C's
    clean-up (writing the cancelled task) blocks; the second exits at once."""
    (tmp_path / "redis").mkdir()
    redis = RedisServer(tmp_path / "redis")
    try:
        term = start(tmp_path, server, redis.url + "?timeout=30")
        assert redis.proc is not None
        os.kill(redis.proc.pid, signal.SIGSTOP)
        try:
            term.send(CTRL_C)
            time.sleep(1.0)
            assert term.proc.poll() is None, plain(term.raw)  # still cleaning up (blocked)
            mark = len(term.raw)
            sent = time.monotonic()
            term.send(CTRL_C)
            term.until("interrupted again: exiting now", mark, timeout=20)
            assert term.finish(timeout=20) == 130
            # The first Ctrl-C's clean-up waits 30 s on the paused store: well before that.
            assert time.monotonic() - sent < 20
        finally:
            os.kill(redis.proc.pid, signal.SIGCONT)
        text = plain(term.raw)
        assert "Traceback" not in text and "KeyboardInterrupt" not in text, text
    finally:
        redis.stop()
