"""The workspace sandbox: every path the agent names is resolved inside the workspace root.

Refused, with an error naming the path: anything that leaves the root (`..`, an absolute path
elsewhere, a symlink pointing out); writes to `.git/`, `.talos/` and `.env*`; and reads of
`.env*`, which hold secrets the model has no business seeing. Only regular files are read (a
FIFO or a device is refused, never waited on), and never more than MAX_READ_BYTES of one.
Listing yields regular files only, symlinks excluded, as ripgrep does. `.gitignore` is
honoured when listing and searching, so build output and dependencies do not flood the model's
context. Writes are atomic and never follow a symlink (`files.atomic_write`).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import TalosError
from ..files import (
    FileTooLarge,
    NotRegularFile,
    atomic_write,
    is_secrets_file,
    open_regular,
    read_regular,
)

if TYPE_CHECKING:
    import pathspec

PROTECTED_DIRS = frozenset({".git", ".talos"})
ALWAYS_SKIPPED = frozenset({".git", "node_modules", "__pycache__", ".venv", "venv"})
MAX_READ_BYTES = 256 * 1024
MAX_LINE_CHARS = 2000  # bytes; longer lines are cut when read by range
MAX_SCAN_BYTES = 64 * 1024 * 1024  # read from disk to find a line range


def agent_id(root: str | os.PathLike[str]) -> str:
    """The agent of the workspace at `root`: its resolved path. The host, the CLI and the
    language server name a workspace's memory, questions and tasks by it."""
    return str(Path(root).resolve())


class SandboxError(TalosError):
    """A path the agent may not use; the message says which and why."""


class Workspace:
    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise SandboxError(f"workspace root {self.root} is not a directory")
        import pathspec  # with the first workspace: `SandboxError` alone has no need of it

        self._ignore_stamp: float | None = None
        self._ignore = pathspec.GitIgnoreSpec.from_lines([])
        self._ignore_lines: list[str] = []

    # --------------------------------------------------------------- paths
    def resolve(self, path: str, *, write: bool = False) -> Path:
        """The real path of `path` (relative to the root, or absolute inside it)."""
        if not isinstance(path, str) or not path.strip() or "\0" in path:
            raise SandboxError(f"invalid path {path!r}")
        candidate = Path(path)
        full = candidate if candidate.is_absolute() else self.root / candidate
        try:
            real = full.resolve()
        except (RuntimeError, OSError) as exc:  # a symlink loop
            raise SandboxError(f"{path!r} cannot be resolved ({exc})") from None
        if real != self.root and not real.is_relative_to(self.root):
            named = Path(os.path.normpath(full.absolute()))  # `..` taken as written
            how = (
                "a symlink in it leads out of"
                if named == self.root or named.is_relative_to(self.root)
                else "it leaves"
            )
            raise SandboxError(f"{path!r} is outside the workspace ({how} {self.root})")
        rel = real.relative_to(self.root)
        protected = {part.lower() for part in rel.parts} & PROTECTED_DIRS  # .GIT is .git on macOS
        if write and (protected or is_secrets_file(real.name)):
            raise SandboxError(f"{path!r} is protected: .git/, .talos/ and .env* are never written")
        if not write and is_secrets_file(real.name):
            raise SandboxError(f"{path!r} holds secrets (.env*) and is not read")
        return real

    def relative(self, real: Path) -> str:
        return real.relative_to(self.root).as_posix() or "."

    # ------------------------------------------------------------- ignores
    def _spec(self) -> pathspec.GitIgnoreSpec:
        import pathspec

        gitignore = self.root / ".gitignore"
        try:
            stamp = gitignore.stat().st_mtime
        except OSError:
            stamp = None
        if stamp != self._ignore_stamp:
            try:
                text = read_regular(gitignore, MAX_READ_BYTES).decode("utf-8", "replace")
            except OSError:
                text = ""
            lines = text.splitlines()
            self._ignore_lines = lines
            self._ignore = pathspec.GitIgnoreSpec.from_lines(lines)
            self._ignore_stamp = stamp
        return self._ignore

    def ignore_lines(self) -> list[str]:
        """The root `.gitignore`, read safely (a FIFO or a device there reads as empty)."""
        self._spec()
        return list(self._ignore_lines)

    def ignored(self, rel: str, is_dir: bool = False) -> bool:
        first = rel.split("/", 1)[0]
        if first in ALWAYS_SKIPPED:
            return True
        return self._spec().match_file(rel + "/" if is_dir else rel)

    def walk(self, start: str = ".") -> Iterator[str]:
        """Regular files under `start`, relative to the root, sorted, not ignored. Symlinks,
        FIFOs, sockets and devices are left out."""
        base = self.resolve(start)
        if base.is_file():
            yield self.relative(base)
            return
        for dirpath, dirnames, filenames in os.walk(base):
            here = Path(dirpath)
            dirnames[:] = sorted(
                d for d in dirnames if not self.ignored(self.relative(here / d), is_dir=True)
            )
            for name in sorted(filenames):
                rel = self.relative(here / name)
                if self.ignored(rel):
                    continue
                try:
                    if stat.S_ISREG(os.lstat(here / name).st_mode):
                        yield rel
                except OSError:
                    continue

    # ---------------------------------------------------------------- files
    def read_text(self, path: str) -> str:
        """A whole file, if it is a regular file of at most MAX_READ_BYTES."""
        real = self.resolve(path)
        try:
            data = read_regular(real, MAX_READ_BYTES)
        except FileTooLarge:
            raise SandboxError(
                f"{path!r} is over {MAX_READ_BYTES} bytes; read a line range instead"
            ) from None
        except (NotRegularFile, IsADirectoryError):
            raise SandboxError(f"{path!r} is not a regular file") from None
        return data.decode("utf-8", errors="replace")

    def read_lines(self, path: str, start: int, end: int) -> tuple[list[str], str | None]:
        """Lines start..end (1-based, inclusive) of a file of any size, each cut at
        MAX_LINE_CHARS. At most MAX_READ_BYTES are returned and MAX_SCAN_BYTES read from disk;
        the second value says why the range was cut short, if it was."""
        real = self.resolve(path)
        try:
            fh = open_regular(real)
        except (NotRegularFile, IsADirectoryError):
            raise SandboxError(f"{path!r} is not a regular file") from None
        out: list[str] = []
        kept = scanned = number = 0
        with fh:
            while number < end:
                raw = fh.readline(MAX_LINE_CHARS + 1)
                if not raw:
                    break
                scanned += len(raw)
                while not raw.endswith(b"\n") and len(raw) > MAX_LINE_CHARS:
                    rest = fh.readline(1 << 16)  # the rest of an over-long line: skipped
                    scanned += len(rest)
                    if not rest or rest.endswith(b"\n") or scanned > MAX_SCAN_BYTES:
                        raw = raw[:MAX_LINE_CHARS] + b" [line cut]\n"
                if scanned > MAX_SCAN_BYTES:
                    return out, f"stopped after reading {MAX_SCAN_BYTES} bytes of the file"
                number += 1
                if number < start:
                    continue
                kept += len(raw)
                if kept > MAX_READ_BYTES:
                    return out, f"cut at {MAX_READ_BYTES} bytes; read a smaller range"
                out.append(raw.decode("utf-8", errors="replace"))
        return out, None

    def write_text(self, path: str, text: str) -> Path:
        """Write through the sandbox: the target is resolved again just before the write, and
        written atomically without following a symlink (`files.atomic_write`)."""
        return self.write_bytes(path, text.encode("utf-8"))

    def write_bytes(self, path: str, data: bytes) -> Path:
        """`write_text`, of bytes."""
        real = self.resolve(path, write=True)
        return atomic_write(self.root, self.relative(real), data)
