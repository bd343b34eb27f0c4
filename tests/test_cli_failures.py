"""Every expected failure of `talos run`, through the real process, with and without --json:
the exit code, exactly one clear error line on stderr (or exactly one JSON object with an
error on stdout), and no traceback anywhere. The faults are real: a read-only mount, garbage
pages in the SQLite file, a file size limit on the process (a full disk), a redis-server
stopped while the model is still answering, a model endpoint that answers 200 with HTML, no
key in the key variable."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from talos_ls.demo.scripted_model import ScriptedModelServer, raw, reply
from talos_ls.store import open_store

from .redis_server import RedisServer
from .store_faults.conftest import can_mount, remount

TALOS = str(Path(sys.executable).with_name("talos"))


@dataclass
class Case:
    """One failure: `setup(ctx)` makes it; the run must exit `code` saying each of `says`."""

    args: list[str]
    code: int
    says: list[str]
    kind: str
    setup: Callable[[Ctx], None] = lambda ctx: None
    stdin: str | None = None


@dataclass
class Ctx:
    tmp: Path
    ws: Path
    model: ScriptedModelServer
    db: Path
    env: dict[str, str]
    url: str = ""
    preexec: Callable[[], None] | None = None
    during: Callable[[], None] | None = None
    cleanup: list[Callable[[], None]] = field(default_factory=list)


def fresh_store(ctx: Ctx) -> None:
    store = open_store(ctx.url)
    store.turn_next("someone")
    store.close()


def garbled(ctx: Ctx) -> None:
    """Garbage over every page but the first: the header reads, the schema does not."""
    fresh_store(ctx)
    page = int.from_bytes(ctx.db.read_bytes()[16:18], "big") or 65536
    size = ctx.db.stat().st_size
    with ctx.db.open("r+b") as fh:
        fh.seek(page)
        fh.write(os.urandom(size - page))


def file_size_limit(ctx: Ctx) -> None:
    """RLIMIT_FSIZE on the process: the store opens, then a write past the limit fails, as on
    a full disk (the WAL grows from nothing, so the first writes land)."""
    fresh_store(ctx)
    ctx.model.script.append(reply("Done.", delay=0.05))

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (40_000, resource.RLIM_INFINITY))

    ctx.preexec = limit


def read_only(ctx: Ctx) -> None:
    """The database on a file system mounted read-only (as one is after errors): a tmpfs of
    its own, the store made on it, then remounted read-only (needs the right to mount)."""
    if not can_mount():
        pytest.skip("cannot mount a tmpfs here (not root); the other store faults are covered")
    where = ctx.tmp / "ro"
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(where)], check=True)
    ctx.cleanup.append(lambda: subprocess.run(["umount", "-l", str(where)], check=False))
    ctx.db = where / "talos.db"
    ctx.url = ctx.env["TALOS_STORE_URL"] = "sqlite:///" + str(ctx.db)
    fresh_store(ctx)
    remount(where, "ro")


def redis_gone(ctx: Ctx) -> None:
    """A redis-server of its own, stopped once the model has been asked (its answer still
    streams for a while): the task's records cannot be written."""
    (ctx.tmp / "redis").mkdir()
    server = RedisServer(ctx.tmp / "redis")
    ctx.cleanup.append(server.stop)
    ctx.url = server.url
    ctx.env["TALOS_STORE_URL"] = server.url
    ctx.model.script.append(reply("Done, and more words to stream slowly.", delay=0.15))

    def stop_when_asked() -> None:
        deadline = time.monotonic() + 30
        while not ctx.model.requests and time.monotonic() < deadline:
            time.sleep(0.01)
        server.stop()

    ctx.during = stop_when_asked


def html_200(ctx: Ctx) -> None:
    ctx.model.script.append(raw("<html><body>Welcome to the proxy</body></html>"))


def no_key(ctx: Ctx) -> None:
    ctx.env.pop("OPENAI_API_KEY", None)


HERE = ["--workspace", "{ws}", "--base-url", "{model}", "--model", "fake-model"]
CASES = {
    "read-only store": Case(
        ["run", "fix it", *HERE], 1, ["is read-only", "check its permissions"], "store", read_only
    ),
    "corrupted store": Case(
        ["run", "fix it", *HERE], 1, ["is corrupted", "move it aside"], "store", garbled
    ),
    "disk full mid-task": Case(
        ["run", "fix it", *HERE], 1, ["disk full", "free some space"], "store", file_size_limit
    ),
    "redis gone mid-task": Case(
        ["run", "fix it", *HERE],
        1,
        ["cannot reach redis://127.0.0.1:", "is redis-server running?"],
        "store",
        redis_gone,
    ),
    "model answers 200 with HTML": Case(
        ["run", "fix it", *HERE], 1, ["not a stream (text/html)", "talos show t"], "task", html_200
    ),
    "no API key": Case(
        ["run", "fix it", "--workspace", "{ws}", "--base-url", "https://api.openai.invalid/v1"],
        1,
        ["no API key in $OPENAI_API_KEY: export it", "--base-url"],
        "model",
        no_key,
    ),
    "cost cap not a number": Case(
        ["run", "x", *HERE, "--max-cost", "abc"],
        2,
        ["argument --max-cost: 'abc' is not an amount in USD"],
        "usage",
    ),
    "cost cap nan": Case(
        ["run", "x", *HERE, "--max-cost", "nan"],
        2,
        ["argument --max-cost", "positive amount"],
        "usage",
    ),
    "negative cost cap": Case(
        ["run", "x", *HERE, "--max-cost=-1"], 2, ["argument --max-cost", "positive amount"], "usage"
    ),
    "zero steps": Case(
        ["run", "x", *HERE, "--max-steps", "0"],
        2,
        ["argument --max-steps: '0': must be at least 1"],
        "usage",
    ),
    "negative budget turns": Case(
        ["run", "x", *HERE, "--budget-turns=-3"],
        2,
        ["argument --budget-turns: '-3': must be at least 1"],
        "usage",
    ),
    "empty request on stdin": Case(
        ["run", "-", *HERE], 2, ["stdin is empty"], "usage", stdin="  \n"
    ),
    "unreadable request file": Case(
        ["run", "--file", "{tmp}/nope.txt", *HERE],
        2,
        ["cannot read the request from", "nope.txt"],
        "usage",
    ),
    "no such workspace": Case(
        ["run", "x", "--workspace", "{tmp}/nope"], 2, ["is not a directory"], "usage"
    ),
}


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("name", list(CASES))
def test_failure(name, as_json, tmp_path):
    case = CASES[name]
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "app.py").write_text("x = 1\n")
    db = tmp_path / "db" / "talos.db"
    db.parent.mkdir()
    model = ScriptedModelServer()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TALOS_", "OPENAI_"))}
    env.update(
        TALOS_STORE_URL="sqlite:///" + str(db),
        XDG_CONFIG_HOME=str(tmp_path / "cfg"),
        OPENAI_API_KEY="k",
        COLUMNS="200",
    )
    ctx = Ctx(tmp_path, ws, model, db, env, url=env["TALOS_STORE_URL"])
    try:
        case.setup(ctx)
        args = [a.format(ws=ws, model=model.url, tmp=tmp_path) for a in case.args]
        if as_json:
            args.append("--json")
        proc = subprocess.Popen(
            [TALOS, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=ctx.env,
            preexec_fn=ctx.preexec,
        )
        helper = threading.Thread(target=ctx.during) if ctx.during else None
        if helper:
            helper.start()
        out, err = proc.communicate(case.stdin or "", timeout=60)
        if helper:
            helper.join()
    finally:
        model.close()
        for undo in ctx.cleanup:
            undo()
    assert "Traceback" not in out + err, out + err
    assert proc.returncode == case.code, (out, err)
    if as_json:
        data = json.loads(out)  # exactly one object: anything else on stdout fails to parse
        assert data["exit_code"] == case.code
        message = data["error"]["message"] if isinstance(data["error"], dict) else None
        if case.kind == "task":  # the task ran: its outcome, with the reason it failed
            assert data["outcome"] == "failed" and data["problems"]
            message = data["problems"][0]
        else:
            assert data["error"]["kind"] == case.kind
        assert "talos: error" not in err
    else:
        errors = [line for line in err.splitlines() if line.startswith("talos: error: ")]
        assert len(errors) == 1, err
        assert [line for line in err.splitlines() if line.strip()] == errors, err
        message = errors[0]
    assert message is not None
    for words in case.says:
        assert words in message, message
    if name == "no API key":
        assert not model.requests  # nothing sent, nothing retried
