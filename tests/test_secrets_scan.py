"""The `.env*` files the sandbox covers, found by watching (inotify) or by scanning: both
must give the same answer after any change, made between two commands."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest

from talos_ls.agent import secrets_scan
from talos_ls.agent.secrets_scan import SecretsScan


def in_node_modules(tree: Path) -> str:
    return f"{tree}/node_modules/x/.env"


def found(scan: SecretsScan) -> set[str]:
    return {str(p) for p in scan.files()}


@pytest.fixture
def tree(tmp_path) -> Path:
    root = tmp_path / "ws"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / ".env").write_text("A=1\n")
    (root / "src" / "pkg" / ".env.local").write_text("B=2\n")
    (root / "node_modules" / "x").mkdir(parents=True)
    (root / "node_modules" / "x" / ".env").write_text("no directory is skipped\n")
    (root / ".venv").mkdir()  # a virtualenv named like a secrets file is a directory
    return root.resolve()


def test_watching_sees_every_kind_of_change_between_two_commands(tree, tmp_path):
    scan = SecretsScan(tree)
    assert found(scan) == {f"{tree}/.env", f"{tree}/src/pkg/.env.local", in_node_modules(tree)}
    assert scan.mode == "watched"
    (tree / "a" / "b").mkdir(parents=True)  # a new directory, and a file in it at once
    (tree / "a" / "b" / ".envrc").write_text("C=3\n")
    outside = tmp_path / "elsewhere"
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / ".env.production").write_text("D=4\n")
    outside.rename(tree / "moved_in")  # a tree moved in from outside
    (tree / "src" / "pkg").rename(tree / "src" / "renamed")  # a directory renamed
    (tree / ".env").rename(tree / "plain.txt")
    os.symlink("plain.txt", tree / ".env.link")  # a link counts by its target
    (tree / ".env").mkdir()  # a virtualenv named .env: not a secrets file
    assert found(scan) == {
        f"{tree}/a/b/.envrc",
        f"{tree}/moved_in/deep/.env.production",
        f"{tree}/src/renamed/.env.local",
        f"{tree}/plain.txt",
        in_node_modules(tree),
    }
    shutil.rmtree(tree / "moved_in")
    (tree / "a").rename(tmp_path / "gone")  # moved out of the workspace
    (tmp_path / "gone" / "b" / ".env.later").write_text("not ours\n")
    assert found(scan) == {
        f"{tree}/src/renamed/.env.local",
        f"{tree}/plain.txt",
        in_node_modules(tree),
    }
    (tree / "node_modules" / "x").rename(tree / ".venv" / "x")  # into a virtualenv: found
    assert f"{tree}/.venv/x/.env" in found(scan)
    assert scan.mode == "watched"
    scan.close()


@pytest.mark.parametrize(
    "seed, most_between, budget", [(9, 1, None), (10, 25, None), (11, 25, None), (12, 25, 4)]
)
def test_watching_and_scanning_agree_after_random_changes(
    tree, tmp_path, monkeypatch, seed, most_between, budget
):
    """Four hundred random creations, deletions and renames (files, directories, links; in
    and out of directories once skipped, in from and out to outside the workspace), the two
    ways compared after each, or after up to 25 at a time (as one command makes many changes:
    the queue then names directories that have moved or gone since); and with a budget of 4
    watches, so that most of the tree is scanned past it."""
    if budget is not None:
        monkeypatch.setattr(secrets_scan, "MAX_WATCHED_DIRS", budget)
    rng = random.Random(seed)
    check_at = 0
    watched, scanned = SecretsScan(tree), SecretsScan(tree)
    scanned._watching = False
    outside = tmp_path / "outside"
    outside.mkdir()
    names = [".env", ".env.local", ".envrc", "app.py", "src", "pkg", "node_modules", "lib"]
    done: dict[str, int] = {}
    for step in range(400):
        dirs = [tree, *(p for p in tree.rglob("*") if p.is_dir() and not p.is_symlink())]
        here = rng.choice(dirs)
        target = here / rng.choice(names)
        action = rng.choice(["file", "file", "dir", "remove", "rename", "link", "out", "in"])
        try:
            if action == "file":
                target.write_text("x\n")
            elif action == "dir":
                target.mkdir()
            elif action == "link":
                os.symlink(rng.choice(names), target)
            elif action == "remove" and target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            elif action == "remove":
                target.unlink()
            elif action == "rename" and here != tree:
                here.rename(rng.choice(dirs) / f"r{step}")
            elif action == "out" and here != tree:
                here.rename(outside / f"o{step}")
            elif action == "in":
                (outside / f"i{step}" / "sub").mkdir(parents=True)
                (outside / f"i{step}" / "sub" / rng.choice(names[:3])).write_text("x\n")
                (outside / f"i{step}").rename(here / f"i{step}")
            else:
                continue
        except OSError:
            continue  # no such file, already there, a directory into itself
        done[action] = done.get(action, 0) + 1
        if step >= check_at:
            assert found(watched) == found(scanned), f"step {step}: {action} {target}"
            check_at = step + rng.randint(1, most_between)
    assert found(watched) == found(scanned)
    assert len(found(scanned)) >= 3 and min(done.values()) >= 5, (found(scanned), done)
    assert watched.mode == ("watched" if budget is None else "partly watched")
    watched.close()


def test_a_lost_event_queue_is_walked_again(tree):
    """Past the kernel's queue (16,384 events by default) events are lost: the tree is walked
    again rather than trusted."""
    flood = tree / "flood"
    flood.mkdir()  # watched before the flood, so only the queue can tell what is in it
    scan = SecretsScan(tree)
    found(scan)
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    for n in range(limit + 100):
        (flood / f"f{n}").touch()
    (flood / ".env.after").write_text("E=5\n")
    assert f"{flood}/.env.after" in found(scan) and scan.mode == "watched"
    scan.close()


def test_past_its_budget_of_watches_the_rest_is_scanned(tree, monkeypatch):
    """Watches are the person's budget, shared with their editor: past Talos's share the
    directories left (and all below them) are scanned instead, with the same answer."""
    monkeypatch.setattr(secrets_scan, "MAX_WATCHED_DIRS", 2)
    scan = SecretsScan(tree)
    assert found(scan) == {f"{tree}/.env", f"{tree}/src/pkg/.env.local", in_node_modules(tree)}
    assert scan.mode == "partly watched" and len(scan._watched.dirs) == 2
    reads = []
    real_read = secrets_scan._read
    monkeypatch.setattr(secrets_scan, "_read", lambda here: reads.append(here) or real_read(here))
    (tree / "src" / "pkg" / "deeper").mkdir()
    (tree / "src" / "pkg" / "deeper" / ".env.new").write_text("F=6\n")
    (tree / ".envrc").write_text("G=7\n")
    assert {f"{tree}/src/pkg/deeper/.env.new", f"{tree}/.envrc"} <= found(scan)
    assert str(tree) not in reads  # the root is watched: its change came from the queue


def test_a_scan_does_not_trust_a_racy_mtime_from_its_own_clock_tick(tree, monkeypatch):
    """A name added in the same clock tick as the scan's read leaves the directory's mtime as
    the scan saw it ("racy git"): a directory changed that recently is read again, one
    unchanged for longer is not."""
    scan = SecretsScan(tree)
    scan._watching = False
    src = tree / "src"
    recent = os.stat(src).st_mtime_ns
    old = recent - 3_600 * 10**9
    os.utime(tree, ns=(old, old))
    found(scan)
    (src / ".env.same_tick").write_text("G=7\n")
    os.utime(src, ns=(recent, recent))  # as if the change fell in the tick of the last read
    assert f"{src}/.env.same_tick" in found(scan)
    reads = []
    real_read = secrets_scan._read
    monkeypatch.setattr(secrets_scan, "_read", lambda here: reads.append(here) or real_read(here))
    found(scan)
    assert str(tree) not in reads and str(src) in reads  # the old mtime vouches, the new not
