"""The workspace as a sandboxed command sees it: what it may write, what it may not see, and
why nothing it does carries a secret out of cover. `Sandbox.argv` puts the rest of the system
around it.

Read-only commands see the workspace read-only whole. Approved (writable) commands may write
it, but:
- `.talos/` stays read-only whole (rules, skills, permissions);
- in `.git`, the index, objects, refs and logs are writable (`git add`, `commit`, `stash`,
  `checkout -b`), while what git runs or reads later, outside the sandbox, is read-only
  (`GIT_READ_ONLY`: hooks, info, config, commondir, modules, worktrees, config.worktree; the
  hooks and config files the config names), with a stand-in in the place of each one missing
  for the length of the command; what a command leaves in `.git` that git would follow out of
  the repository later (a link, a FIFO, alternates) or run (a paused rebase's `exec` lines)
  is removed when it ends, and the command's result says so (`GitLayout.after`); a
  repository it made below the root is moved aside (`_moved_aside`);
- the `.talos` and `.git` of the workspace folders served inside this one are read-only;
- every secret (each `.env*` file, the target of one that is a link, Talos's own directories
  when they lie in the workspace) is covered by an empty read-only file or directory, or by
  its committed content when git tracks it (`TrackedContent`).

Nothing a command does carries a covered secret out of cover. A mount point cannot be renamed
or unlinked (EBUSY), a hard link to it would cross mounts (EXDEV), a copy reads the empty
cover; and for a writable command every directory on the way from the workspace's root to a
cover is bound onto itself ("pinned"), so no directory holding a secret can be moved either:
each secret stays where the next command's scan finds it and covers it again. What was covered
once stays covered while it is there (`Covers`): a link deleted or pointed elsewhere, or a tree
flooded past the scan's limit, uncovers nothing.

bwrap reads the whole mount table for each mount it makes, so each mount costs more than the
last (400 cost some 0.4 s here): the layout makes as few as it can and refuses a command that
would need more than MAX_MOUNTS (bench/README.md has the figures).
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import logging
import os
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from secrets import token_hex

from ..errors import TalosError
from . import on_host

logger = logging.getLogger(__name__)

MAX_MOUNTS = 400  # covers and pins for one command; past it the command is refused
MAX_REPOSITORIES = 64  # nested repositories and submodules kept read-only, each
# Under `.git`: what git runs (hooks, config's programs) or reads from elsewhere (commondir,
# alternates) later, outside the sandbox. Read-only for every command; a missing one gets a
# stand-in (its content here; None: a directory) so that a command cannot create it.
GIT_READ_ONLY: dict[str, bytes | None] = {
    "hooks": None,
    "info": None,  # attributes (select filter and diff drivers), exclude (hides planted files)
    "config": b"",
    "commondir": b".\n",  # "this directory": an empty one would make every git command fail
    # Submodules' and linked worktrees' own git directories: `git submodule update` reuses
    # one it finds at `modules/<name>` (with its hooks and config) instead of cloning. The
    # stand-in is an empty file, not a directory: nothing can be made under it either, it
    # is cheaper to make and remove, and git reads either as "none" (a submodule or
    # worktree of the person's is refused meanwhile).
    "modules": b"",
    "worktrees": b"",
    # Configuration git reads, live while `extensions.worktreeConfig` is on.
    "config.worktree": b"",
}
# Read-only when there, never stood in for: alternates make git read objects from another
# directory, but run nothing, so one a command makes is removed when it ends (each mount
# costs) rather than prevented.
GIT_READ_ONLY_IF_PRESENT = ("objects/info/alternates",)
# A paused rebase, cherry-pick or `git am`: its todo list may hold `exec` lines, run by the next
# `git rebase --continue`. Read-only when there; one a command leaves behind is removed.
GIT_PAUSED = ("rebase-merge", "rebase-apply", "sequencer")


class TooManyMounts(TalosError):
    """The command would need more covers than bwrap can make in reasonable time."""


@dataclass(frozen=True)
class Mount:
    path: Path
    args: tuple[str, ...]


def bind(path: Path, *, read_only: bool) -> Mount:
    return Mount(path, ("--ro-bind" if read_only else "--bind", str(path), str(path)))


def cover(path: Path, file: str) -> Mount:
    """An empty read-only directory over a directory, the read-only `file` over anything else
    (an empty file, or the content git has for it: `TrackedContent`)."""
    if path.is_dir():
        return Mount(path, ("--tmpfs", str(path), "--remount-ro", str(path)))
    return Mount(path, ("--ro-bind", file, str(path)))


def ordered(mounts: Iterable[Mount]) -> list[str]:
    """bwrap's arguments for `mounts`: a directory's mount before anything inside it (bwrap
    binds from the host, so a later bind of a parent would undo them); one mount per path,
    the first given winning."""
    first: dict[Path, Mount] = {}
    for mount in mounts:
        first.setdefault(mount.path, mount)
    out: list[str] = []
    for mount in sorted(first.values(), key=lambda m: len(m.path.parts)):
        out += mount.args
    return out


def pins(
    targets: Iterable[Path], root: Path, *, mounted: Iterable[Path], fixed: Iterable[Path]
) -> list[Path]:
    """Every directory strictly between `root` and each target inside it, but those that are
    mount points already (`mounted`) and those at or under a `fixed` path (read-only or
    hidden: nothing there can be renamed, and a bind would show what a cover hides)."""
    top = str(root)
    skip = {str(p) for p in mounted}
    under = tuple(f"{p}/" for p in fixed)
    skip.update(str(p) for p in fixed)
    out: set[str] = set()
    for target in map(str, targets):
        if not target.startswith(top + "/"):
            continue
        here = os.path.dirname(target)
        while here != top and here not in out:  # every parent up to the root, once
            if here not in skip and not here.startswith(under):
                out.add(here)
            here = os.path.dirname(here)
    return sorted(Path(p) for p in out)


class Covers:
    """Every path covered so far for one workspace, with whether it was a directory: covered
    again by each later command while it is still there as such (not a link), whether or not
    the scan finds it. A secret is pinned where it is, so it only leaves when the person moves
    it. Kept in `file` (Talos's state, hidden from commands) so that the next `talos run` or
    language server remembers too. Several processes may serve one workspace at once: what
    another one wrote is merged in before each command (when the file changed), and a write
    is a merge of the file as it is then, under a lock, so neither loses the other's paths."""

    def __init__(self, file: Path | None = None) -> None:
        self.file = file
        self._lock = threading.Lock()
        self._seen: dict[Path, bool] = {}
        self._saved: dict[Path, bool] = {}
        self._stamp: tuple = ()
        self._merge()

    def update(self, found: Iterable[Path]) -> list[Path]:
        """`found` (paths that exist now), and every path covered before that is still there."""
        with self._lock:
            self._merge()
            for path in found:
                with contextlib.suppress(OSError):
                    self._seen[path] = stat.S_ISDIR(path.stat().st_mode)
            out = [p for p, was_dir in self._seen.items() if _still(p, was_dir)]
            # gone, or another kind of file now: only the person can have done it
            self._seen = {p: self._seen[p] for p in out}
            if self._seen != self._saved:
                self._save()
            return out

    def _load(self) -> dict[Path, bool] | None:
        assert self.file is not None
        try:
            data = json.loads(self.file.read_text())
            return {Path(p): bool(d) for p, d in data.items() if os.path.isabs(p)}
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, AttributeError) as exc:
            logger.warning("%s: cannot read the paths covered before (%s)", self.file, exc)
            return None

    def _merge(self) -> None:
        """What the file holds now (another process's paths), when it changed since read."""
        if self.file is None or _stamp(self.file) == self._stamp:
            return
        self._stamp = _stamp(self.file)
        data = self._load()
        if data:
            self._seen = {**data, **self._seen}
            self._saved = data

    def _save(self) -> None:
        """Write what is covered, merged with the file as it is now, under a lock: another
        process writing between our read and our write would otherwise lose its paths."""
        if self.file is None:
            return
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
            lock = os.open(self.file.with_name(f".{self.file.name}.lock"), flags, 0o600)
            try:
                fcntl.flock(lock, fcntl.LOCK_EX)
                on_disk = self._load() or {}
                gone = set(self._saved) - set(self._seen)  # found gone here: not merged back
                merged = {**{p: d for p, d in on_disk.items() if p not in gone}, **self._seen}
                tmp = self.file.with_name(f".{self.file.name}.{os.getpid()}.tmp")
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
                with os.fdopen(fd, "w") as fh:
                    json.dump({str(p): d for p, d in merged.items()}, fh)
                os.replace(tmp, self.file)
                self._stamp = _stamp(self.file)
            finally:
                os.close(lock)  # and the lock with it
            self._seen, self._saved = merged, dict(merged)
        except OSError as exc:
            logger.warning("%s: cannot keep the paths covered (%s)", self.file, exc)


def _still(path: Path, was_dir: bool) -> bool:
    """Whether `path` is there as it was covered: the same kind, not a link."""
    try:
        mode = path.lstat().st_mode
    except OSError:
        return False
    return not stat.S_ISLNK(mode) and stat.S_ISDIR(mode) == was_dir


class StandIns:
    """Paths Talos makes for the length of a command so that the command cannot make them (a
    missing `.git/hooks`, `.git/commondir`, `.talos`): each is made on the host before bwrap
    binds it read-only, and removed when the last command holding it ends, if it is still as
    made. Counted, because removing a mount point from outside a sandbox detaches it inside:
    a command still running would then be free to create the path."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[Path, list] = {}  # path -> [holders, content (None: a directory)]

    def held(self, path: Path) -> bool:
        with self._lock:
            return path in self._held

    def hold(self, path: Path, content: bytes | None) -> bool:
        """Hold `path`: one this process made for a command still running, or made now (a
        directory when `content` is None) when nothing is there. False: it is someone
        else's, or cannot be made; it is left as it is."""
        with self._lock:
            held = self._held.get(path)
            if held is not None:
                held[0] += 1
                return True
            try:
                if content is None:
                    path.mkdir()
                else:
                    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
                    fd = os.open(path, flags, 0o444)
                    with os.fdopen(fd, "wb") as fh:
                        fh.write(content)
            except OSError:
                return False
            self._held[path] = [1, content]
            return True

    def release(self, path: Path) -> None:
        with self._lock:
            held = self._held.get(path)
            if held is None:
                return
            held[0] -= 1
            if held[0] > 0:
                return
            del self._held[path]
            with contextlib.suppress(OSError):
                if held[1] is None:
                    path.rmdir()  # only if empty: anything else was not ours
                elif not path.is_symlink() and path.read_bytes() == held[1]:
                    path.unlink()


STAND_INS = StandIns()  # one per process: every workspace's commands share the host


@dataclass
class Layout:
    """The workspace part of one command's bwrap arguments, and what to undo after it."""

    args: list[str]
    held: list[Path] = field(default_factory=list)  # stand-ins to release
    git: GitLayout | None = None
    outside: list[Path] = field(default_factory=list)  # secrets outside the workspace
    env: dict[str, str] = field(default_factory=dict)  # the person's git identity
    repositories: set[Path] | None = None  # below the root, before a writable command
    root: Path | None = None

    def after(self, repositories: Iterable[Path] = ()) -> list[str]:
        """Once the command has ended: release the stand-ins, check `.git`, move aside each
        repository the command made (`repositories`: their `.git` now); what was done, for
        the command's result."""
        try:
            notes = self.git.after() if self.git is not None else []
            if self.repositories is not None:
                notes += [
                    _moved_aside(r, self.root or r.parent)
                    for r in repositories
                    if r not in self.repositories
                ]
            return notes
        finally:
            for path in self.held:
                STAND_INS.release(path)
            self.held = []


def read_only(path: Path, content: bytes | None, held: list[Path]) -> Mount | None:
    """`path` read-only: as it is when it is there, else a stand-in made for the command
    (`content`; None: a directory). None when neither is possible (its parent is missing)."""
    if STAND_INS.hold(path, content):
        held.append(path)
        return bind(path, read_only=True)
    return bind(path, read_only=True) if os.path.lexists(path) else None


def read_only_or_below(path: Path, content: bytes | None, held: list[Path]) -> Mount | None:
    """`path` read-only (`read_only`); when its parent is missing too, the highest missing
    directory on the way to it stands in instead, empty and read-only."""
    top = path
    while not os.path.lexists(top.parent) and top.parent != top:
        top = top.parent
    return read_only(path, content, held) if top == path else read_only(top, None, held)


def protected_dir(path: Path, *, writable: bool, held: list[Path]) -> Mount | None:
    """`.talos` (and `.git` for a read-only command, or one that is a file): read-only whole.
    A link is judged where it points. Missing, a writable command gets an empty read-only
    stand-in, so it cannot create one with rules or hooks of its own."""
    if path.is_symlink() or not (writable or os.path.lexists(path) or STAND_INS.held(path)):
        return None
    return read_only(path, None, held)


class GitLayout:
    """The repository's `.git` directory for one writable command: writable, but for what
    runs code or reads other repositories later (`GIT_READ_ONLY`...), and checked after."""

    def __init__(self, git_dir: Path, held: list[Path]) -> None:
        self.git_dir = git_dir
        found = [read_only(git_dir / rel, content, held) for rel, content in GIT_READ_ONLY.items()]
        found += [
            bind(git_dir / rel, read_only=True)
            for rel in (*GIT_READ_ONLY_IF_PRESENT, *GIT_PAUSED)
            if os.path.lexists(git_dir / rel)
        ]
        found += [
            read_only_or_below(path, content, held) for path, content in config_named(git_dir)
        ]
        kept = [m for m in found if m is not None]
        self.mounts = [bind(git_dir, read_only=False), *kept]  # .git itself: unrenamable
        self.read_only = [m.path for m in kept]
        self.missing = [
            git_dir / r
            for r in (*GIT_PAUSED, *GIT_READ_ONLY_IF_PRESENT)
            if not os.path.lexists(git_dir / r)
        ]
        self.odd_before = {p: _what(p) for p in _odd_entries(git_dir, self.read_only)}

    @staticmethod
    def usable(git_dir: Path) -> bool:
        """Whether `.git` can be made writable safely: no link where a protected path or a
        directory on the way to one lies (a link cannot be a mount point, so a command could
        point it elsewhere); else it stays read-only whole."""
        for rel in (*GIT_READ_ONLY, *GIT_READ_ONLY_IF_PRESENT, *GIT_PAUSED):
            here = git_dir
            for part in Path(rel).parts:
                here = here / part
                if here.is_symlink():
                    return False
        return True

    def after(self) -> list[str]:
        notes = []
        for path in self.missing:
            if not os.path.lexists(path):
                continue
            _remove(path)
            if path.name in GIT_PAUSED:
                notes.append(
                    f"removed {path.name}/ from .git: a rebase, cherry-pick or am "
                    "left paused by a sandboxed command could run commands of its "
                    "todo list when continued outside the sandbox; run it to its "
                    "end within one command"
                )
            else:
                notes.append(
                    "removed .git/objects/info/alternates: git would read objects "
                    "from another directory"
                )
        for path in _odd_entries(self.git_dir, self.read_only):
            if path not in self.odd_before or self.odd_before[path] != _what(path):
                _remove(path)
                notes.append(
                    f"removed {path.relative_to(self.git_dir.parent)}: a link or "
                    "special file in .git would make git write or read outside the "
                    "repository later"
                )
        return notes


def _odd_entries(git_dir: Path, skip: Iterable[Path]) -> list[Path]:
    """Everything in `.git` that is neither a regular file nor a directory (a link, a FIFO, a
    socket, a device), outside the read-only parts. In object stores only their fan-out
    directories are listed: git and git-lfs write object files with link(2) and rename(2),
    never through a link, but a fan-out directory that is a link would take them elsewhere."""
    skipped = {str(p) for p in skip}
    stores = {f"{git_dir}/objects": 1, f"{git_dir}/lfs/objects": 2}  # levels of fan-out
    out: list[Path] = []
    pending = [str(git_dir)]
    while pending:
        here = pending.pop()
        try:
            entries = list(os.scandir(here))
        except OSError:
            continue
        for entry in entries:
            if entry.path in skipped:
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    if _listed(entry.path, stores):
                        pending.append(entry.path)
                elif not entry.is_file(follow_symlinks=False):
                    out.append(Path(entry.path))
            except OSError:
                continue
    return out


def _listed(path: str, stores: dict[str, int]) -> bool:
    """Whether the entries of `path` are looked at: not past an object store's fan-out."""
    for top, levels in stores.items():
        if path.startswith(top + "/"):
            return path[len(top) + 1 :].count("/") + 1 < levels
    return True


def _moved_aside(git: Path, root: Path) -> str:
    """A repository a command made below the root: its `.git` renamed to a name the command
    cannot guess (it could have made every name a clock would give, or made its parent
    read-only), kept for you. If it cannot be renamed even once its parent is writable again,
    it is removed: left where it is, git would run its config and hooks outside the sandbox."""
    shown = git.relative_to(root) if git.is_relative_to(root) else git
    problem = ""
    for attempt in range(3):
        if attempt == 1:  # a command's `chmod a-w`: give the parent back its write bit
            problem = _writable_again(git.parent) or problem
        aside = git.with_name(
            f".git.moved-by-talos-{time.strftime('%Y%m%d-%H%M%S')}-{token_hex(6)}"
        )
        if os.path.lexists(aside):
            continue
        try:
            git.rename(aside)
        except OSError as exc:
            problem = exc.strerror or str(exc)
            continue
        return (
            f"moved {shown} aside to {aside.name}: git and editors run a repository's "
            "configuration and hooks outside the sandbox (your git status does for a "
            "submodule); create or clone repositories outside Talos"
        )
    _remove(git)
    if not os.path.lexists(git):
        return (
            f"removed {shown}, a repository a command made, which could not be moved "
            f"aside ({problem}): git would run its configuration and hooks outside the "
            "sandbox"
        )
    return (
        f"could not move aside or remove {shown} ({problem}), a repository a command made: "
        "do not run git in it; git would run its configuration and hooks"
    )


def _writable_again(directory: Path) -> str:
    """Give `directory` (one of the workspace's, the person's own; never through a link) its
    owner's read, write and search bits back; what failed, or ""."""
    try:
        mode = directory.lstat().st_mode
        if stat.S_ISDIR(mode):
            os.chmod(directory, stat.S_IMODE(mode) | stat.S_IRWXU)
    except OSError as exc:
        return exc.strerror or str(exc)
    return ""


def _what(path: Path) -> tuple[int, str]:
    """A special file's type, and where it points if a link: the same path re-pointed is
    another file."""
    try:
        st = path.lstat()
        return st.st_mode, os.readlink(path) if stat.S_ISLNK(st.st_mode) else ""
    except OSError:
        return 0, ""


def _remove(path: Path) -> None:
    """Remove `path`, a directory whole, even one a command made read-only inside (each
    directory given its owner's bits back first; links are never followed)."""
    with contextlib.suppress(OSError):
        if path.is_dir() and not path.is_symlink():
            _writable_again(path)
            for here, dirs, _ in os.walk(path):
                for name in dirs:
                    if not os.path.islink(os.path.join(here, name)):
                        _writable_again(Path(here) / name)
            shutil.rmtree(path)
        else:
            path.unlink()


class TrackedContent:
    """A secrets file git tracks (a committed `.env.example`) is covered by its content in the
    index, not by an empty file: git sees it unchanged, so an approved `git commit -a` or
    `git stash` leaves it be, and a command reads only what the repository's history holds
    already (`git show HEAD:.env.example` reads it anyway). Local edits stay hidden. The
    contents are kept in files of this process's own, one per blob; git is asked again only
    when the index changed."""

    MAX_BYTES = 1024 * 1024  # larger: an empty cover

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._dir: str | None = None
        self._key: tuple = ()
        self._found: dict[Path, str] = {}

    def contents(self, root: Path, files: list[Path]) -> dict[Path, str]:
        key = (_stamp(root / ".git" / "index"), tuple(files))
        with self._lock:
            if key == self._key and all(os.path.exists(f) for f in self._found.values()):
                return self._found
            found = self._ask(root, files)
            self._key, self._found = key, found
            return found

    def _ask(self, root: Path, files: list[Path]) -> dict[Path, str]:
        specs = [f":(literal){p.relative_to(root)}" for p in files if p.is_relative_to(root)]
        listed = (
            on_host.git_text(["ls-files", "--stage", "-z", "--", *specs], root) if specs else None
        )
        blobs: dict[Path, str] = {}
        for line in (listed or "").split("\0"):
            meta, _, rel = line.partition("\t")
            parts = meta.split()
            if len(parts) == 3 and parts[0] in ("100644", "100755") and parts[2] == "0":
                blobs[root / rel] = parts[1]
        if not blobs:
            return {}
        if self._dir is None or not os.path.isdir(self._dir):
            self._dir = tempfile.mkdtemp(prefix="talos-tracked-")
            atexit.register(shutil.rmtree, self._dir, True)
        wanted = sorted(
            {sha for sha in blobs.values() if not os.path.exists(os.path.join(self._dir, sha))}
        )
        if wanted:
            self._fetch(root, wanted)
        return {
            p: os.path.join(self._dir, sha)
            for p, sha in blobs.items()
            if os.path.exists(os.path.join(self._dir, sha))
        }

    def _fetch(self, root: Path, shas: list[str]) -> None:
        """`git cat-file --batch`: each blob's content into a read-only file named by it."""
        assert self._dir is not None
        out = on_host.git(
            ["cat-file", "--batch"],
            root,
            timeout=30,
            stdin="".join(f"{s}\n" for s in shas).encode(),
        )
        if out is None:
            return
        at = 0
        for sha in shas:
            end = out.find(b"\n", at)
            if end < 0:
                return
            header = out[at:end].split()
            if len(header) != 3 or header[1] != b"blob":
                at = end + 1
                continue
            size = int(header[2])
            body, at = out[end + 1 : end + 1 + size], end + 2 + size
            if size > self.MAX_BYTES or len(body) != size:
                continue
            tmp = os.path.join(self._dir, f".{sha}.tmp")
            with open(tmp, "wb") as fh:
                fh.write(body)
            os.chmod(tmp, 0o444)
            os.replace(tmp, os.path.join(self._dir, sha))


TRACKED = TrackedContent()


_NAMED: dict[Path, tuple[list[Path], list[tuple], list[tuple[Path, bytes | None]]]] = {}
_NAMED_LOCK = threading.Lock()
_INCLUDES = r"^(include|includeif\..*)\.path$"


def config_named(git_dir: Path) -> list[tuple[Path, bytes | None]]:
    """What the repository's configuration names inside the workspace that git runs or reads
    later: the hooks directory (`core.hooksPath`, from any scope: a relative one is the
    worktree's) and the files `.git/config` includes, and those they include; each with its
    stand-in's content (None: a directory). Asked of git again only when a configuration file
    read changed; nothing when git is missing or fails."""
    with _NAMED_LOCK:
        cached = _NAMED.get(git_dir)
    if cached is not None and [_stamp(f) for f in cached[0]] == cached[1]:
        return cached[2]
    root = git_dir.parent
    read = on_host.git_config_files(git_dir)
    stamps = [_stamp(f) for f in read]
    found: list[tuple[Path, bytes | None]] = []
    hooks = on_host.git_text(["config", "--null", "--type=path", "--get", "core.hooksPath"], root)
    if hooks:
        found.append((Path(os.path.normpath(root / hooks.rstrip("\0"))), None))
    pending = [git_dir / "config"]
    while pending and len(read) < 40:  # includes of includes; a loop ends here
        conf = pending.pop()
        listed = on_host.git_text(
            ["config", "--file", str(conf), "--null", "--get-regexp", _INCLUDES], root
        )
        for item in (listed or "").split("\0"):
            value = item.partition("\n")[2]
            if not value:
                continue
            named = Path(os.path.normpath(conf.parent / os.path.expanduser(value)))
            found.append((named, b""))
            if named.is_file() and named not in read:
                read.append(named)
                stamps.append(_stamp(named))
                pending.append(named)
    found = [(p, c) for p, c in found if p.is_relative_to(root) and p != root]
    with _NAMED_LOCK:
        _NAMED[git_dir] = (read, stamps, found)
    return found


_IDENTITY: dict[Path, tuple[list[tuple], dict[str, str]]] = {}


def git_identity(git_dir: Path) -> dict[str, str]:
    """The person's `user.name` and `user.email` as git has them in this repository, for
    `GIT_AUTHOR_*` and `GIT_COMMITTER_*`: the sandbox's HOME is empty, so without them an
    approved `git commit` stops at "Author identity unknown". Not secret: every commit
    carries them. Asked of git again only when a configuration file changed."""
    stamps = [_stamp(f) for f in on_host.git_config_files(git_dir)]
    with _NAMED_LOCK:
        cached = _IDENTITY.get(git_dir)
    if cached is not None and cached[0] == stamps:
        return cached[1]
    env: dict[str, str] = {}
    for key, names in (
        ("user.name", ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME")),
        ("user.email", ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL")),
    ):
        value = (on_host.git_text(["config", "--get", key], git_dir.parent) or "").strip()
        if value and len(value) < 256 and value.isprintable():
            env.update(dict.fromkeys(names, value))
    with _NAMED_LOCK:
        _IDENTITY[git_dir] = (stamps, env)
    return env


def _stamp(path: Path) -> tuple:
    try:
        st = path.stat()
    except OSError:
        return (str(path),)
    return (str(path), st.st_ino, st.st_mtime_ns, st.st_size)


def git_dir_of(root: Path) -> Path | None:
    """The workspace's own git directory when it is `.git` there, a real directory."""
    path = root / ".git"
    return path if path.is_dir() and not path.is_symlink() else None


def build(
    root: Path,
    *,
    writable: bool,
    secrets: Iterable[Path],
    covers: Covers,
    empty_file: str,
    repositories: Iterable[Path] = (),
    inner: Iterable[Path] = (),
) -> Layout:
    """The workspace's mounts for one command: the root, `.talos` and `.git`, a cover over
    each secret inside it (`secrets`: found now; `covers` adds those covered before) and, for
    a writable command, the repositories below the root (`repositories`: their `.git`), the
    `.talos` and `.git` of the workspace folders open inside it (`inner`: their rules,
    skills and permissions bind their own tasks) and the pins. Secrets outside the root go
    to `Layout.outside`, for the caller to cover with the rest of the system."""
    held: list[Path] = []
    inner = [p for p in inner if p.is_relative_to(root) and p != root]
    repositories = list(repositories)
    try:
        protected: list[Mount] = [bind(root, read_only=not writable)]
        mounted, fixed = [root], []
        talos = protected_dir(root / ".talos", writable=writable, held=held)
        if talos is not None:
            protected.append(talos)
            fixed.append(talos.path)
        git, git_dir = None, git_dir_of(root)
        if writable and git_dir is not None and GitLayout.usable(git_dir):
            git = GitLayout(git_dir, held)
            protected += git.mounts
            mounted.append(git_dir)
            fixed += git.read_only
        else:
            whole = protected_dir(root / ".git", writable=writable, held=held)
            if whole is not None:
                protected.append(whole)
                fixed.append(whole.path)
        nested = nested_repositories(root, repositories, held) if writable else []
        for folder in inner if writable else []:
            if folder.is_symlink() or not folder.is_dir():
                continue
            for name in (".talos", ".git"):
                mount = protected_dir(folder / name, writable=name == ".talos", held=held)
                if mount is not None:
                    nested.append(mount)
        protected += nested
        fixed += [m.path for m in nested]
        inside: list[Path] = []
        outside: list[Path] = []
        prefix = f"{root}/"
        for path in secrets:
            if path.is_symlink() or not path.exists() or path == root:
                continue
            (inside if str(path).startswith(prefix) else outside).append(path)
        covered = covers.update(inside)
        hidden = [p for p in covered if p.is_dir()]  # covered whole: nothing under them to cover
        below = tuple(f"{d}/" for d in hidden)
        covered = [p for p in covered if not str(p).startswith(below)] if below else covered
        files = [p for p in covered if p not in hidden]
        contents = TRACKED.contents(root, files) if files and git_dir is not None else {}
        mounts = [cover(p, contents.get(p, empty_file)) for p in covered]
        mounted += files
        pinned: list[Path] = []
        if writable:  # read-only, nothing can be renamed anyway
            targets = [*(m.path for m in mounts), *(m.path for m in protected)]
            pinned = pins(targets, root, mounted=mounted, fixed=[*fixed, *hidden])
        if len(mounts) + len(pinned) + len(nested) > MAX_MOUNTS:
            raise TooManyMounts(
                f"the workspace has {len(mounts)} secrets files (.env*) to hide and "
                f"{len(nested)} repositories to protect, which with the {len(pinned)} "
                f"directories that hold them would take more than {MAX_MOUNTS} mounts; commands "
                "are not run until there are fewer"
            )
        pin_mounts = [bind(p, read_only=False) for p in pinned]
        env = git_identity(git.git_dir) if git is not None else {}
        return Layout(
            ordered([*protected, *mounts, *pin_mounts]),
            held,
            git,
            outside,
            env,
            set(repositories) if writable else None,
            root,
        )
    except BaseException:
        for path in held:
            STAND_INS.release(path)
        raise


def nested_repositories(root: Path, repositories: list[Path], held: list[Path]) -> list[Mount]:
    """Repositories below the root, read-only whole for a writable command: git runs their
    config and hooks later, outside the sandbox (your `git status` for a submodule, an editor
    for a repository it opens). Each `.git` found (`repositories`), and each submodule
    directory `.gitmodules` names that has none yet (so a command cannot make one there)."""
    out = [
        bind(r, read_only=True) for r in repositories if not r.is_symlink() and os.path.lexists(r)
    ][:MAX_REPOSITORIES]
    for path in submodule_paths(root)[:MAX_REPOSITORIES]:
        if not os.path.lexists(path / ".git"):
            mount = read_only_or_below(path, None, held)
            if mount is not None:
                out.append(mount)
    return out


_SUBMODULES: dict[Path, tuple[tuple, list[Path]]] = {}


def submodule_paths(root: Path) -> list[Path]:
    """The submodule directories `.gitmodules` names inside the workspace (asked of git again
    only when the file changed)."""
    file = root / ".gitmodules"
    stamp = _stamp(file)
    with _NAMED_LOCK:
        cached = _SUBMODULES.get(root)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    found: list[Path] = []
    if len(stamp) > 1:  # the file is there
        listed = on_host.git_text(
            ["config", "--file", str(file), "--null", "--get-regexp", r"^submodule\..*\.path$"],
            root,
        )
        for item in (listed or "").split("\0"):
            value = item.partition("\n")[2]
            path = Path(os.path.normpath(root / value)) if value else root
            if str(path).startswith(f"{root}/") and not path.is_symlink():
                found.append(path)
    with _NAMED_LOCK:
        _SUBMODULES[root] = (stamp, found)
    return found
