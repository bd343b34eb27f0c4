"""A program driven in a real pseudo-terminal, as a person at a terminal would: `talos run`
then asks its questions and permission prompts, and the test answers them; or a full-screen
program (Neovim's TUI), read through `text` and `until_text`."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

# Rich's own styling (colours, bold, dim). Only that: any other escape in the output came with
# a payload, and a test must be able to see it.
SGR = re.compile(rb"\x1b\[[0-9;]*m")
BORDERS = re.compile(r"[│╭╮╰╯─┃━┏┓┗┛]")
# Every escape sequence a full-screen program sends: CSI (cursor moves, styles, scrolling),
# OSC (titles, queries), DCS, character sets, keypad modes, save/restore.
ESCAPES = re.compile(
    rb"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|P[^\x1b]*\x1b\\"
    rb"|[()*+][0-9A-Za-z]|[ -/]*[0-~])"
)


def plain(raw: bytes) -> str:
    """What a person reads: Rich's styling and the panel borders out, whitespace collapsed
    (escapes that came with the payload, if any got through, stay in)."""
    text = SGR.sub(b"", raw).decode("utf-8", errors="replace")
    return " ".join(BORDERS.sub(" ", text).split())


def text(raw: bytes) -> str:
    """What a full-screen program wrote, its escape sequences out: each run of text it drew
    is there as drawn (where on the screen is lost; a run that stayed on the screen is not
    drawn again)."""
    return ESCAPES.sub(b"", raw).decode("utf-8", errors="replace")


class Terminal:
    """`argv` on a pseudo-terminal of `columns` columns and `rows` rows."""

    def __init__(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        cwd: Path | None = None,
        columns: int = 200,
        rows: int = 60,
    ) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        self.proc = subprocess.Popen(
            list(argv),
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=dict(env),
            cwd=cwd,
            close_fds=True,
        )
        os.close(slave)
        self.master = master
        self.raw = b""

    def _read(self, wait: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], wait)
        if not ready:
            return True
        try:
            data = os.read(self.master, 65536)
        except OSError:  # the process closed the terminal
            return False
        self.raw += data
        return bool(data)

    def until(self, pattern: str, start: int = 0, timeout: float = 30) -> re.Match[str]:
        """Wait for `pattern` (a regex) in the plain text after raw offset `start`."""
        deadline = time.monotonic() + timeout
        while True:
            found = re.search(pattern, plain(self.raw[start:]))
            if found:
                return found
            if time.monotonic() > deadline or not self._read(0.05):
                raise AssertionError(f"never saw {pattern!r}:\n{plain(self.raw)}")

    def until_text(self, pattern: str, start: int = 0, timeout: float = 30) -> re.Match[str]:
        """Wait for `pattern` (a regex) in what a full-screen program drew (`text`) after raw
        offset `start`."""
        deadline = time.monotonic() + timeout
        while True:
            found = re.search(pattern, text(self.raw[start:]))
            if found:
                return found
            if time.monotonic() > deadline or not self._read(0.05):
                raise AssertionError(f"never saw {pattern!r}:\n{text(self.raw[start:])}")

    def send(self, text: str) -> None:
        os.write(self.master, text.encode())

    def answer_prompts(self, count: int, choice: str) -> list[bytes]:
        """Answer `count` Talos prompts in turn with the option labelled `choice`; returns the
        raw bytes of each prompt as it reached the terminal."""
        prompts, start = [], 0
        for _ in range(count):
            found = self.until(r"Talos asks.*?(\d+)\. " + re.escape(choice) + r"\b", start)
            self.until(r">\s*$", start)  # the input prompt: the panel is all out
            end = len(self.raw)
            prompts.append(self.raw[start:end])
            self.send(found.group(1) + "\n")
            start = end
        return prompts

    def finish(self, timeout: float = 30) -> int:
        """Read to the end; the exit code."""
        deadline = time.monotonic() + timeout
        while self._read(0.05) and time.monotonic() < deadline:
            pass
        try:
            return self.proc.wait(timeout=max(deadline - time.monotonic(), 1))
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            os.close(self.master)
