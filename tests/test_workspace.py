"""The workspace sandbox and search, against a real directory tree with real symlinks, FIFOs
and devices; search both with ripgrep and with the RE2 fallback (ripgrep hidden)."""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import subprocess
import sys
import time

import pytest

from talos_ls import files as files_module
from talos_ls.agent import workspace as workspace_module
from talos_ls.agent.search import search
from talos_ls.agent.workspace import SandboxError, Workspace
from talos_ls.files import atomic_write

from .system import require_binary, unique_seconds


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("def main():\n    return 1\n")
    (root / "build").mkdir()
    (root / "build" / "out.py").write_text("def main(): pass\n")
    (root / ".gitignore").write_text("build/\n*.log\n!keep.log\n")
    (root / "debug.log").write_text("main\n")
    (root / "keep.log").write_text("main\n")
    (root / ".env").write_text("OPENAI_API_KEY=sk-secret\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    (tmp_path / "outside.txt").write_text("secret\n")
    os.symlink(tmp_path / "outside.txt", root / "escape.txt")
    os.symlink(tmp_path, root / "up")
    os.symlink(root / "src" / "app.py", root / "inside-link.py")
    return Workspace(root)


@pytest.mark.parametrize(
    "path, words",
    [
        ("../outside.txt", "outside the workspace .it leaves"),
        ("src/../../outside.txt", "outside the workspace .it leaves"),
        ("/etc/passwd", "outside the workspace .it leaves"),
        ("escape.txt", "outside the workspace .a symlink in it leads out of"),
        ("up/outside.txt", "outside the workspace .a symlink in it leads out of"),
        ("", "invalid path"),
        ("a\0b", "invalid path"),
        (".env", "secrets"),
    ],
)
def test_reads_that_leave_or_leak_are_refused(ws, path, words):
    with pytest.raises(SandboxError, match=words):
        ws.read_text(path)


@pytest.mark.parametrize(
    "path",
    [
        ".git/config",
        ".git/hooks/pre-commit",
        ".talos/permissions.json",
        ".env",
        ".env.local",
        "src/.env.production",
    ],
)
def test_protected_paths_are_never_written(ws, path):
    with pytest.raises(SandboxError, match="protected"):
        ws.write_text(path, "x")
    assert (ws.root / ".git" / "config").read_text() == "[core]\n"


def test_inside_paths_work(ws):
    assert ws.read_text("src/../src/app.py").startswith("def main")
    assert ws.read_text(str(ws.root / "src" / "app.py")).startswith("def main")  # absolute, inside
    assert ws.read_text("inside-link.py").startswith("def main")  # a symlink that stays inside
    ws.write_text("src/new/mod.py", "x = 1\n")
    assert (ws.root / "src" / "new" / "mod.py").read_text() == "x = 1\n"
    assert ws.read_lines("src/app.py", 2, 2) == (["    return 1\n"], None)


@pytest.fixture(params=["rg", "re2"])
def engine(request):
    """Search with ripgrep (required when TALOS_TEST_REQUIRE_ALL is set) and with the RE2
    fallback, ripgrep hidden."""
    if request.param == "rg":
        return require_binary("rg", "apt-get install -y ripgrep")
    return None


def test_a_finished_ripgrep_is_reaped_by_asyncio_not_behind_its_back(ws, caplog):
    """Once rg has exited (a miss, fewer hits than the limit), killing it would reap it with
    Popen's poll first, and asyncio's child watcher would log "Unknown child process" for each
    search of a long-running server."""
    rg = require_binary("rg", "apt-get install -y ripgrep")

    async def misses() -> None:
        for _ in range(40):
            assert await search(ws, "no line says this", rg=rg) == []

    with caplog.at_level("WARNING", logger="asyncio"):
        asyncio.run(misses())
    assert not [r for r in caplog.records if "child process" in r.getMessage()], caplog.text


def test_gitignore_is_honoured_for_listing_and_search(ws, engine):
    files = list(ws.walk())
    assert "src/app.py" in files and "keep.log" in files
    assert not any(f.startswith(("build/", ".git/")) for f in files)
    assert "debug.log" not in files
    assert "inside-link.py" not in files and "escape.txt" not in files  # symlinks: not listed
    hits = asyncio.run(search(ws, r"def main", rg=engine))
    assert hits == ["src/app.py:1: def main():"]
    assert asyncio.run(search(ws, "sk-", rg=engine)) == []  # .env is never searched
    with pytest.raises(SandboxError, match="invalid regex"):
        asyncio.run(search(ws, "(", rg=engine))
    with pytest.raises(SandboxError, match="outside the workspace"):
        asyncio.run(search(ws, "secret", "up", rg=engine))


def test_search_cannot_hang_or_escape(ws, engine, tmp_path):
    root = ws.root
    os.mkfifo(root / "src" / "pipe")
    os.symlink("/dev/zero", root / "src" / "zero")
    os.symlink("/etc", root / "src" / "etc")
    (root / "src" / "big.txt").write_text("a" * 40 + "\n")
    evil = "(a+)+$"  # catastrophic for a backtracking engine on "aaaa...b"
    (root / "src" / "long.txt").write_text("a" * 50_000 + "b\n")
    started = time.monotonic()
    hits = asyncio.run(search(ws, evil, "src", rg=engine))
    assert hits == ["src/big.txt:1: " + "a" * 40]
    assert time.monotonic() - started < 120  # generous: a backtracking engine takes hours
    assert asyncio.run(search(ws, "root", "src", rg=engine)) == []  # /etc/passwd not reached
    with pytest.raises(SandboxError, match=r"not a regular file|neither"):
        asyncio.run(search(ws, "x", "src/pipe", rg=engine))
    with pytest.raises(SandboxError, match="backreferences"):
        asyncio.run(search(ws, r"(a)\1", rg=engine))


def test_search_limit_and_long_lines(ws, engine):
    (ws.root / "many.txt").write_text("".join(f"hit {i} " + "x" * 1000 + "\n" for i in range(500)))
    hits = asyncio.run(search(ws, "hit", "many.txt", limit=7, rg=engine))
    assert len(hits) == 7 and all(len(h) < 260 for h in hits)


def test_reads_refuse_fifos_devices_and_bound_their_size(ws, monkeypatch):
    root = ws.root
    os.mkfifo(root / "pipe")
    os.symlink("/dev/zero", root / "zero")
    with pytest.raises(SandboxError, match="not a regular file"):
        ws.read_text("pipe")  # refused at once, not waited on
    with pytest.raises(SandboxError, match="not a regular file"):
        ws.read_lines("pipe", 1, 5)
    with pytest.raises(SandboxError, match="outside the workspace"):
        ws.read_text("zero")
    monkeypatch.setattr(workspace_module, "MAX_READ_BYTES", 5000)
    (root / "huge.txt").write_text("y" * 50_000 + "\n" + "line\n" * 2000)
    lines, cut = ws.read_lines("huge.txt", 1, 10_000)
    assert sum(len(x) for x in lines) <= 5000 and "cut at 5000 bytes" in cut
    assert lines[0].endswith("[line cut]\n") and len(lines[0]) < 2100
    assert lines[1] == "line\n"
    with pytest.raises(SandboxError, match="over 5000 bytes"):
        ws.read_text("huge.txt")


def test_writes_never_follow_a_planted_symlink(ws, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched\n")
    target = ws.root / "src" / "app.py"
    os.chmod(target, 0o640)
    # The old fixed temp name, and a link in place of the target itself.
    os.symlink(victim, ws.root / "src" / ".app.py.talos-tmp")
    ws.write_text("src/app.py", "def main():\n    return 2\n")
    assert victim.read_text() == "untouched\n"
    assert target.read_text() == "def main():\n    return 2\n"
    assert oct(os.stat(target).st_mode & 0o777) == "0o640"  # the mode is kept
    assert not [
        p
        for p in (ws.root / "src").iterdir()
        if p.name.endswith(".talos-tmp") and not p.is_symlink()
    ]
    os.symlink(victim, ws.root / "src" / "swap.py")
    atomic_write(ws.root, "src/swap.py", b"new\n")  # a symlink at the target is replaced
    assert victim.read_text() == "untouched\n" and not (ws.root / "src" / "swap.py").is_symlink()
    shutil.rmtree(ws.root / "src" / "new", ignore_errors=True)
    os.symlink(tmp_path, ws.root / "src" / "new")  # a directory swapped for a link
    with pytest.raises(OSError, match="not a directory"):
        atomic_write(ws.root, "src/new/x.py", b"x\n")
    assert not (tmp_path / "x.py").exists()


WRITER = """
import sys
from pathlib import Path
from talos_ls.agent.workspace import Workspace
ws = Workspace(Path(sys.argv[1]))
for i in range(200):
    ws.write_text("src/app.py", f"writer {sys.argv[2]} pass {i}\\n" * 2000)
"""


def test_two_processes_writing_one_file_do_not_collide(ws):
    """Two processes (two daemons on one workspace) write one file at once: no write fails on
    the other's temporary file, and the file always holds one writer's whole content."""
    (ws.root / "src" / "app.py").write_text("before\n")
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(ws.root), str(n)], stderr=subprocess.PIPE, text=True
        )
        for n in range(2)
    ]
    seen = set()
    while any(w.poll() is None for w in writers):
        seen.add(len(set((ws.root / "src" / "app.py").read_text().splitlines())))
    for w in writers:
        assert w.wait() == 0, w.stderr.read()
    assert seen <= {1}, "a reader saw a mix of two writes"
    text = (ws.root / "src" / "app.py").read_text()
    assert len(set(text.splitlines())) == 1 and text.count("\n") == 2000
    assert [p.name for p in (ws.root / "src").iterdir()] == ["app.py"]  # no temp file left


def test_a_link_planted_at_the_exact_temp_name_is_never_written_through(ws, tmp_path, monkeypatch):
    """Even an attacker who guesses the temp file's name (here: made predictable) finds it
    created with O_EXCL|O_NOFOLLOW: the write fails rather than follow the link."""
    monkeypatch.setattr(files_module.secrets, "token_hex", lambda n: "ab" * n)
    victim = tmp_path / "victim.txt"
    victim.write_text("safe\n")
    os.symlink(victim, ws.root / "src" / f".app.py.{'ab' * 8}.talos-tmp")
    with pytest.raises(FileExistsError):
        atomic_write(ws.root, "src/app.py", b"evil\n")
    assert victim.read_text() == "safe\n"
    assert (ws.root / "src" / "app.py").read_text() == "def main():\n    return 1\n"


def test_a_write_is_synced_before_it_replaces_and_the_rename_after(ws, monkeypatch):
    """fsync of the new content before the rename (a crash never leaves an empty file in
    place of the old one), then of the directory (the rename itself survives)."""
    synced = []
    real_fsync = os.fsync

    def fsync(fd):
        synced.append("file" if stat.S_ISREG(os.fstat(fd).st_mode) else "directory")
        real_fsync(fd)

    monkeypatch.setattr(files_module.os, "fsync", fsync)
    atomic_write(ws.root, "src/deep/app.py", b"x\n")
    assert synced == ["file", "directory"]


def _fake_rg(tmp_path, body: str) -> str:
    """A stand-in for ripgrep: records its argv and environment, then runs `body`."""
    rg = tmp_path / "rg"
    rg.write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$@" > "{tmp_path}/argv"\nenv > "{tmp_path}/env"\n{body}\n'
    )
    rg.chmod(0o755)
    return str(rg)


def test_ripgrep_reads_no_configuration_and_no_ignore_file_of_its_own(ws, tmp_path, monkeypatch):
    """A hostile RIPGREP_CONFIG_PATH (follow links, run a preprocessor) never reaches rg, and
    `--no-config` would stop it if it did; the pattern is an argument, never an option."""
    monkeypatch.setenv("RIPGREP_CONFIG_PATH", str(tmp_path / "evil-rgrc"))
    rg = _fake_rg(tmp_path, "exit 1")
    assert asyncio.run(search(ws, "--pre=sh", rg=rg)) == []
    argv = (tmp_path / "argv").read_text().splitlines()
    assert "--no-config" in argv and "--no-ignore" in argv and "--follow" not in argv
    assert argv[argv.index("--regexp") + 1] == "--pre=sh" and argv[-2] == "--"
    assert "RIPGREP_CONFIG_PATH" not in (tmp_path / "env").read_text()


@pytest.mark.parametrize("engine", ["rg", "re2"])
def test_a_search_that_runs_past_its_deadline_stops_and_says_so(ws, tmp_path, engine):
    """ripgrep that hangs after a first hit (a huge tree, a slow disk), or the fallback past
    its deadline: the hits so far, then a note; the daemon is never held."""
    s = unique_seconds(29)
    rg = _fake_rg(tmp_path, f"printf 'src/app.py\\0001:return hit\\n'; exec sleep {s}")
    hits = asyncio.run(
        search(
            ws, "return", rg=rg if engine == "rg" else None, deadline=0.5 if engine == "rg" else -1
        )
    )
    if engine == "rg":
        assert hits[0] == "src/app.py:1: return hit"
    assert hits[-1].startswith("[search stopped after"), hits
    left = subprocess.run(["pgrep", "-f", f"sleep {s}"], capture_output=True, text=True)
    assert left.stdout == "", "ripgrep outlived the search"
