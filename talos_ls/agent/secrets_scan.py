"""The workspace's secrets files (`.env*`; a link counts by what it points to), found before
every command so that the sandbox can cover each one with an empty file. Every directory is
searched, `.git`, `node_modules` and virtualenvs too: a command could move a secrets file into
any directory skipped, and the next command would find it uncovered there.

Two ways to the same answer:
- watched (Linux): an inotify watch on every directory. The first call walks the tree; each
  later one reads the kernel's queue of names created, renamed and deleted since, so its cost
  does not grow with the tree (`inotify.py` says why the queue can be trusted). A directory
  renamed, or the queue overflowing, means a new walk: the queue names directories by the
  paths they had, and a rename changes every path below.
- scanned: every directory `stat`ed and read again only when its mtime changed (adding,
  removing or renaming an entry changes it) or is too recent to vouch for it (a change in
  the same clock tick leaves it as it was): one `stat` per directory per command. The
  fallback when watching is not possible (not Linux, the kernel refuses an instance), and
  for the part of a tree past the watch budget: watches are a per-user budget that the
  person's editor spends too, so Talos takes at most a quarter of it (and MAX_WATCHED_DIRS);
  the first directories found are watched, the rest scanned.
Breadth first both ways, so when a huge tree passes MAX_SCANNED_DIRS the shallow levels, where
secrets files live, are the ones covered.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import logging
import os
import threading
import time
from pathlib import Path

from ..files import is_secrets_file
from . import inotify
from .inotify import Inotify

logger = logging.getLogger(__name__)

MAX_SCANNED_DIRS = 200_000  # directories searched for .env* files to hide
RACY_NS = 2_000_000_000  # mtimes are as coarse as a clock tick here, 2 s on FAT
MAX_WATCHED_DIRS = 65_536  # and never more than a quarter of fs.inotify.max_user_watches
WATCH_MASK = (
    inotify.IN_CREATE
    | inotify.IN_DELETE
    | inotify.IN_MOVED_FROM
    | inotify.IN_MOVED_TO
    | inotify.IN_MOVE_SELF
    | inotify.IN_ONLYDIR
    | inotify.IN_DONT_FOLLOW
)
ADDED = inotify.IN_CREATE | inotify.IN_MOVED_TO
MOVED = inotify.IN_MOVED_FROM | inotify.IN_MOVED_TO


class SecretsScan:
    """`files()`: the secrets files now, by watching what it can and scanning the rest."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = threading.RLock()  # commands start from worker threads
        self._watched: _Watched | None = None
        self._watching = True  # until watching fails: then scanned for good
        self._scanned = _Scanned(root)

    @property
    def mode(self) -> str:
        if not self._watching:
            return "scanned"
        return "partly watched" if self._watched and self._watched.unwatched else "watched"

    @property
    def repositories(self) -> list[Path]:
        """The `.git` of every repository below the root (not the root's own), as the last
        `files()` found them."""
        found = set(self._scanned.repositories)
        if self._watching and self._watched is not None:
            found |= self._watched.repositories
        return sorted(Path(d) / ".git" for d in found if d != str(self.root))

    def files(self) -> list[Path]:
        with self._lock:
            if self._watching:
                try:
                    if self._watched is None:
                        self._watched = _Watched(str(self.root))
                    found = self._watched.secrets()
                except OSError as exc:
                    logger.info(
                        "%s: .env* files are found by a scan before each command, not watched (%s)",
                        self.root,
                        exc,
                    )
                    self.close()
                    self._watching = False
                else:
                    return found + self._scanned.scan(sorted(self._watched.unwatched))
            return self._scanned.scan([str(self.root)])

    def close(self) -> None:
        with self._lock:
            if self._watched is not None:
                self._watched.inotify.close()
                self._watched = None


class _Scanned:
    """Directories `stat`ed before each command and read again only when changed."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._warned = False
        # directory -> (mtime_ns, secrets files in it, its subdirectories to scan, whether
        # its mtime can vouch for it next time, whether it holds a `.git`)
        self._dirs: dict[str, tuple[int, list[Path], list[str], bool, bool]] = {}
        self.repositories: list[str] = []

    def scan(self, tops: list[str]) -> list[Path]:
        """The secrets files in the trees under `tops` (none: nothing to scan); the
        repositories found in them are in `repositories`."""
        found: list[Path] = []
        self.repositories = []
        seen: dict[str, tuple[int, list[Path], list[str], bool, bool]] = {}
        pending = collections.deque(tops)
        while pending:
            if len(seen) >= MAX_SCANNED_DIRS:
                if not self._warned:
                    logger.warning(
                        "%s: more than %d directories to scan; .env* files below them are "
                        "not hidden from commands unless they were before",
                        self.root,
                        MAX_SCANNED_DIRS,
                    )
                self._warned = True
                break
            here = pending.popleft()
            try:
                mtime = os.stat(here, follow_symlinks=False).st_mtime_ns
            except OSError:
                continue
            cached = self._dirs.get(here)
            if cached is not None and cached[0] == mtime and cached[3]:
                entry = cached
            else:
                # A change within the clock tick of this read would leave the mtime as it
                # is now ("racy git"): a directory changed that recently is read again.
                fresh = mtime < time.time_ns() - RACY_NS
                names, subdirs, repository = _read(here)
                entry = (mtime, [_target(here, n) for n in names], subdirs, fresh, repository)
            seen[here] = entry
            found += entry[1]
            pending.extend(entry[2])
            if entry[4]:
                self.repositories.append(here)
        self._dirs = seen  # directories gone since are forgotten
        return found


class _Watched:
    """A watch on every directory of the tree, kept in step with the kernel's queue; past the
    budget, the directories left (`unwatched`, each with the tree under it) are for the scan."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.budget = _watch_budget()
        self.inotify = Inotify()
        try:
            self._restart(first=True)
        except BaseException:
            self.inotify.close()
            raise

    def secrets(self) -> list[Path]:
        for event in self.inotify.read():
            if event.mask & inotify.IN_Q_OVERFLOW:  # events were lost: walk again
                self._restart()
                break
            here = self.paths.get(event.wd)
            if here is None:
                continue  # a watch dropped with its directory
            if event.name == ".git" and not event.mask & inotify.IN_IGNORED:
                if event.mask & ADDED and not os.path.islink(os.path.join(here, ".git")):
                    self.repositories.add(here)
                elif event.mask & (inotify.IN_DELETE | inotify.IN_MOVED_FROM):
                    self.repositories.discard(here)
            if event.mask & inotify.IN_IGNORED:  # the directory is gone, its watch with it
                if self.dirs.get(here) == event.wd:
                    self._drop(here, watch_gone=True)
                else:  # its path is another directory's now
                    del self.paths[event.wd]
            elif event.mask & inotify.IN_MOVE_SELF:
                if here == self.root:  # the workspace itself was moved: start again
                    self._restart()
                    break
            elif event.mask & inotify.IN_ISDIR:
                if event.mask & MOVED:  # every path below it changed: walk again
                    self._restart()
                    break
                path = os.path.join(here, event.name)
                if event.mask & inotify.IN_DELETE:
                    self._drop(path)
                else:
                    self._add(path, here)
            elif is_secrets_file(event.name):
                names = self.secret_names.setdefault(here, set())
                if event.mask & ADDED:
                    names.add(event.name)
                else:
                    names.discard(event.name)
        return [
            _target(here, name)
            for here, names in self.secret_names.items()
            for name in names
            if not os.path.isdir(os.path.join(here, name))  # a venv named .env
        ]

    def _restart(self, *, first: bool = False) -> None:
        if not first:
            self.inotify.close()
            self.inotify = Inotify()
        self.dirs: dict[str, int] = {}  # directory -> its watch
        self.paths: dict[int, str] = {}  # watch -> directory
        self.children: dict[str, set[str]] = collections.defaultdict(set)
        self.secret_names: dict[str, set[str]] = {}  # only directories that hold some
        self.unwatched: set[str] = set()  # past the budget: scanned, with all below them
        self.repositories: set[str] = set()  # directories holding a `.git`
        self._add(self.root, None)

    def _add(self, top: str, parent: str | None) -> None:
        """Watch `top` and every directory below it, then read each: a name made between
        the two is in the listing, one made after it is in the queue."""
        pending = collections.deque([(top, parent)])
        while pending:
            here, above = pending.popleft()
            if above is not None:
                self.children[above].add(here)
            if len(self.dirs) >= self.budget:
                self.unwatched.add(here)
                continue
            try:
                wd = self.inotify.add(here, WATCH_MASK)
            except OSError as exc:
                if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                    continue  # gone already, or a link (never followed)
                if exc.errno != errno.ENOSPC:
                    raise
                self.budget = len(self.dirs)  # the person's watches are all spent: scan
                self.unwatched.add(here)
                continue
            self.dirs[here], self.paths[wd] = wd, here
            names, subdirs, repository = _read(here)
            if names:
                self.secret_names[here] = set(names)
            else:
                self.secret_names.pop(here, None)
            if repository:
                self.repositories.add(here)
            else:
                self.repositories.discard(here)
            pending.extend((sub, here) for sub in subdirs)

    def _drop(self, top: str, *, watch_gone: bool = False) -> None:
        """Forget `top`, deleted, and everything below it, and stop watching them."""
        stack = [top]
        while stack:
            here = stack.pop()
            self.unwatched.discard(here)
            self.repositories.discard(here)
            wd = self.dirs.pop(here, None)
            if wd is None:
                continue
            stack.extend(self.children.pop(here, ()))
            self.secret_names.pop(here, None)
            if self.paths.get(wd) == here:
                del self.paths[wd]
                if not (watch_gone and here == top):
                    self.inotify.remove(wd)
        self.children.get(os.path.dirname(top), set()).discard(top)


def _read(here: str) -> tuple[list[str], list[str], bool]:
    """The secrets files' names in `here`, the subdirectories to look in, and whether `here`
    holds a repository's `.git` (a directory or a file, never a link)."""
    names, subdirs, repository = [], [], False
    try:
        entries = list(os.scandir(here))
    except OSError:
        return [], [], False
    for entry in entries:
        with contextlib.suppress(OSError):  # gone since the listing
            if entry.name == ".git" and not entry.is_symlink():
                repository = True
            # a venv named .env is no secrets file; a broken link or a loop may be one
            if is_secrets_file(entry.name) and not os.path.isdir(entry.path):
                names.append(entry.name)
            elif entry.is_dir(follow_symlinks=False):
                subdirs.append(entry.path)
    return names, subdirs, repository


def _target(here: str, name: str) -> Path:
    return Path(os.path.realpath(os.path.join(here, name)))


def _watch_budget() -> int:
    try:
        limit = int(Path("/proc/sys/fs/inotify/max_user_watches").read_text())
    except (OSError, ValueError):
        limit = 8192
    return min(MAX_WATCHED_DIRS, limit // 4)
