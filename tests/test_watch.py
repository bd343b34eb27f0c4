"""The file watcher that keeps the workspace index current, on real files with real
notifications. No timing is asserted: each wait has a generous timeout, and writes are repeated
until the watcher, which starts in a thread, is known to be listening."""

from __future__ import annotations

import asyncio
import logging
import shutil

import pytest
from watchfiles import Change

from talos_ls.memory.index import WorkspaceIndex
from talos_ls.watch import WorkspaceFilter, lsp_changes, watch

TIMEOUT = 30.0


class Watching:
    """A running `watch` with its batches in a queue."""

    def __init__(self, root):
        self.root = root
        self.batches: asyncio.Queue[list[tuple[str, str]]] = asyncio.Queue()
        self.stop = asyncio.Event()
        self.task = asyncio.ensure_future(
            watch(root, self.batches.put_nowait, self.stop, debounce_ms=50, step_ms=10)
        )

    async def until(self, path, touch=None) -> list[list[tuple[str, str]]]:
        """The batches up to and including the first that names `path`; `touch()` runs again
        every half second meanwhile, in case the watcher was not listening yet."""
        got: list[list[tuple[str, str]]] = []

        async def collect():
            while True:
                if touch:
                    touch()
                try:
                    batch = await asyncio.wait_for(self.batches.get(), 0.5)
                except TimeoutError:
                    continue
                got.append(batch)
                if any(p == str(path) for _, p in batch):
                    return

        await asyncio.wait_for(collect(), TIMEOUT)
        return got

    async def close(self):
        self.stop.set()
        await asyncio.wait_for(self.task, TIMEOUT)


@pytest.fixture
async def watching(tmp_path):
    w = Watching(tmp_path.resolve())
    yield w
    await w.close()


async def test_a_write_arrives_and_stop_ends_the_watch(watching):
    target = watching.root / "a.py"
    batches = await watching.until(target, lambda: target.write_text("x = 1\n"))
    assert any(kind in ("added", "modified") for kind, p in batches[-1] if p == str(target))
    assert all(kind in ("added", "modified", "deleted") for b in batches for kind, _ in b)
    watching.stop.set()
    assert await asyncio.wait_for(watching.task, TIMEOUT) is None


async def test_noise_is_filtered_out(watching):
    probe = watching.root / "probe.txt"
    await watching.until(probe, lambda: probe.write_text("listening?"))  # it listens now
    (watching.root / ".gitignore").write_text("*.log\nout/\n")
    gitignore = watching.root / ".gitignore"
    await watching.until(gitignore)  # the filter has read the rules again
    noise = [
        ".git/objects/ab/cd",
        "node_modules/lib/x.js",
        "sub/__pycache__/m.pyc",
        "debug.log",
        "out/gen.py",
        "venv/lib/site.py",
    ]
    for rel in noise:
        (watching.root / rel).parent.mkdir(parents=True, exist_ok=True)
        (watching.root / rel).write_text("noise")
    real = watching.root / "src" / "real.py"
    real.parent.mkdir()
    # Written again until seen: a file made in a new directory before the watcher has added
    # that directory is not reported (the index walks an added directory for that reason).
    batches = await watching.until(real, lambda: real.write_text("x = 1\n"))
    seen = {p for b in batches for _, p in b}
    assert not any(str(watching.root / rel) in seen for rel in noise)
    assert not any(part in p for p in seen for part in ("/.git/", "/node_modules/", "/out/"))


async def test_the_index_follows_the_watcher(watching):
    (watching.root / "keep.py").write_text("x = 1\n")
    index = WorkspaceIndex.build(watching.root)
    parser = watching.root / "pkg" / "parser.py"

    def touch():
        parser.parent.mkdir(exist_ok=True)
        parser.write_text("def parse():\n    pass\n")

    for batch in await watching.until(parser, touch):
        await asyncio.to_thread(index.apply, batch)
    assert index.match_symbol("parse") == ["parse in pkg/parser.py"]
    shutil.rmtree(parser.parent)
    for batch in await watching.until(parser.parent):
        await asyncio.to_thread(index.apply, batch)
    assert index.files == ["keep.py"]


async def test_a_missing_root_ends_the_watch_with_a_warning(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="talos_ls.watch")
    stop = asyncio.Event()
    await asyncio.wait_for(watch(tmp_path / "missing", lambda _: None, stop), TIMEOUT)
    assert any("not watching" in r.getMessage() for r in caplog.records)


async def test_a_removed_root_ends_the_watch_with_a_warning(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="talos_ls.watch")
    root = (tmp_path / "ws").resolve()
    root.mkdir()
    w = Watching(root)
    probe = root / "probe.txt"
    await w.until(probe, lambda: probe.write_text("listening?"))
    shutil.rmtree(root)
    await asyncio.wait_for(w.task, TIMEOUT)  # ends by itself, without `stop`
    assert any("gone" in r.getMessage() for r in caplog.records)


def test_filter(tmp_path):
    root = tmp_path.resolve()
    (root / ".gitignore").write_text("*.log\n/generated/\n")
    f = WorkspaceFilter(root)
    kept = ["src/a.py", "node_modules", "src/debug.txt", "lib/generated/x.py"]
    dropped = [
        ".git/HEAD",
        "node_modules/x/y.js",
        "a/.venv/lib/z.py",
        "a/__pycache__/m.pyc",
        "debug.log",
        "src/trace.log",
        "generated/x.py",
        "src/a.py~",
    ]
    assert [r for r in kept if not f(Change.added, str(root / r))] == []
    assert [r for r in dropped if f(Change.modified, str(root / r))] == []
    assert not f(Change.added, str(tmp_path.parent / "elsewhere" / "a.py"))
    (root / ".gitignore").write_text("generated/\n")
    assert f(Change.modified, str(root / ".gitignore"))  # and the rules are read again
    assert f(Change.added, str(root / "debug.log"))
    assert not f(Change.added, str(root / "lib/generated/x.py"))


def test_filter_looks_only_inside_the_root(tmp_path):
    root = tmp_path / "build" / "node_modules" / "ws"  # skipped names above the root
    root.mkdir(parents=True)
    assert WorkspaceFilter(root.resolve())(Change.added, str(root.resolve() / "a.py"))


def test_lsp_changes():
    events = [
        (1, "file:///work/ws/a.py"),
        (2, "file:///work/ws/sp%20ace/b%C3%A9.py"),
        (3, "file://localhost/work/ws/old"),
        (2, "untitled:Untitled-1"),
        (1, "file://otherhost/share/a.py"),
        (9, "file:///work/ws/unknown-kind.py"),
        (2, "file:///work/ws/../ws/c.py"),
    ]
    assert lsp_changes(events) == [
        ("added", "/work/ws/a.py"),
        ("modified", "/work/ws/sp ace/bé.py"),
        ("deleted", "/work/ws/old"),
        ("modified", "/work/ws/c.py"),
    ]
