"""File-change events for the workspace index, so a long-running server never re-walks the tree.

`watch` follows a workspace folder with the OS's notifications (inotify, FSEvents, through
`watchfiles`) and hands each debounced batch to a callback; `lsp_changes` turns the editor's
`workspace/didChangeWatchedFiles` events into the same `(kind, path)` pairs, for clients that
watch for us. `WorkspaceFilter` drops the noise (`.git/`, `node_modules/`, caches, what the root
`.gitignore` ignores) before it reaches the event loop; it is a first cut only, the index
applies its own rules (nested `.gitignore` files included) to what gets through.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pathspec
import watchfiles
from watchfiles import Change, DefaultFilter

from .files import read_regular
from .memory.index import MAX_SOURCE_BYTES, SKIP_DIRS

logger = logging.getLogger(__name__)

_ROOT_CHECK_MS = 2_000  # how often, with no event, the watcher checks that the root is there
_LSP_KINDS = {1: "added", 2: "modified", 3: "deleted"}  # LSP FileChangeType
# What the watcher's process may see of ours: enough to start Python, no credential.
_CHILD_ENV = frozenset({"PATH", "PYTHONPATH", "PYTHONHOME", "LANG", "LC_ALL", "TMPDIR"})


class WorkspaceFilter(DefaultFilter):
    """`watchfiles.DefaultFilter` that looks only at the part of a path inside the root (a
    workspace under `~/build/` is not ignored whole), skips the index's SKIP_DIRS too, and
    honours the root `.gitignore`, read again whenever it changes. It runs on every event:
    a few string operations and one pattern match."""

    ignore_dirs = tuple(sorted(set(DefaultFilter.ignore_dirs) | SKIP_DIRS))

    def __init__(self, root: Path) -> None:
        super().__init__()
        self._root = str(root)
        self._prefix = os.path.join(self._root, "")
        self._gitignore = self._prefix + ".gitignore"
        self._spec = self._load_gitignore()

    def __call__(self, change: Change, path: str) -> bool:
        if path == self._root:
            return True  # the root itself: created again, or removed
        if not path.startswith(self._prefix):
            return False
        if path == self._gitignore:
            self._spec = self._load_gitignore()
            return True
        rel = path[len(self._prefix) :]
        *parents, name = rel.split(os.sep)
        # A skipped directory's own event gets through: the index decides about the name.
        if any(p in self._ignore_dirs for p in parents):
            return False
        if any(r.search(name) for r in self._ignore_entity_regexes):
            return False
        return not self._spec.match_file(rel)

    def _load_gitignore(self) -> pathspec.GitIgnoreSpec:
        try:
            raw = read_regular(self._gitignore, MAX_SOURCE_BYTES, follow_symlinks=False)
        except OSError:  # none, or not a regular file
            raw = b""
        return pathspec.GitIgnoreSpec.from_lines(raw.decode("utf-8", "replace").splitlines())


async def watch(
    root: Path,
    on_changes: Callable[[list[tuple[str, str]]], None],
    stop: asyncio.Event,
    *,
    debounce_ms: int = 200,
    step_ms: int = 20,
) -> None:
    """Call `on_changes` on the event loop with each batch of changes under `root`, sorted
    `(kind, absolute path)` pairs with kind "added", "modified" or "deleted", until `stop` is
    set (or this coroutine is cancelled). The callback must be cheap (hand the batch to a
    thread). A root that is missing or goes away, or a watcher the OS refuses (too many
    watches, say), is logged as a warning and ends the watch: the index then stays as it was,
    and a later scan catches it up.

    The watcher runs in a child process (`python -m talos_ls.watch`): setting up the OS
    watches of 10,000 directories holds the interpreter's lock for a quarter of a second,
    which no thread can hide from the event loop. The child gets no secret (a minimal
    environment), reports JSON lines, and ends when its stdin closes, with us. It imports
    nothing from the workspace: `-P` and a directory of its own keep the daemon's current
    directory (often the workspace, whose `talos_ls/` would shadow ours) off its path."""
    root = Path(root).resolve()
    env = {k: v for k, v in os.environ.items() if k in _CHILD_ENV}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-P",
        "-m",
        "talos_ls.watch",
        str(root),
        str(debounce_ms),
        str(step_ms),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=env,
        cwd="/",
    )
    assert proc.stdout is not None and proc.stdin is not None
    stopped = asyncio.ensure_future(stop.wait())
    try:
        while True:
            line = asyncio.ensure_future(proc.stdout.readline())
            await asyncio.wait({line, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if not line.done():
                line.cancel()
                return
            if not line.result():
                return  # the child ended (it said why)
            report = json.loads(line.result())
            if "warning" in report:
                logger.warning("%s", report["warning"])
            else:
                on_changes([(kind, path) for kind, path in report["changes"]])
    finally:
        stopped.cancel()
        proc.stdin.close()
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        await proc.wait()


def _follow(root: Path, debounce_ms: int, step_ms: int) -> None:
    """The child: watch `root`, print each batch as a JSON line, stop when stdin closes."""
    stop = threading.Event()

    def parent_gone() -> None:
        sys.stdin.buffer.read()
        stop.set()

    def say(report: dict) -> None:
        print(json.dumps(report), flush=True)

    threading.Thread(target=parent_gone, daemon=True).start()
    try:
        for batch in watchfiles.watch(
            root,
            watch_filter=WorkspaceFilter(root),
            debounce=debounce_ms,
            step=step_ms,
            stop_event=stop,
            rust_timeout=_ROOT_CHECK_MS,
            yield_on_timeout=True,
            raise_interrupt=False,
        ):
            if batch:
                say({"changes": sorted((change.name, path) for change, path in batch)})
            if not root.is_dir():
                say({"warning": f"not watching {root} for changes: it is gone"})
                return
    except (OSError, RuntimeError) as exc:  # RuntimeError: watchfiles' own errors
        say({"warning": f"not watching {root} for changes: {exc}"})


def lsp_changes(events: Iterable[tuple[int, str]]) -> list[tuple[str, str]]:
    """`workspace/didChangeWatchedFiles` events, (FileChangeType, URI), as `watch` reports
    them: ("added" | "modified" | "deleted", absolute path). URIs that name no local file, and
    unknown change types, are left out."""
    found = []
    for kind, uri in events:
        name = _LSP_KINDS.get(kind)
        try:
            parts = urlsplit(uri)
        except ValueError:  # "file://[x": no URI at all
            continue
        if name is None or parts.scheme != "file" or parts.netloc not in ("", "localhost"):
            continue
        path = unquote(parts.path)
        if os.path.isabs(path):
            found.append((name, os.path.normpath(path)))
    return found


if __name__ == "__main__":
    _follow(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
