"""The workspace sandbox: every path the agent names is resolved inside the workspace root.

Refused, with an error naming the path: anything that leaves the root (`..`, an absolute path
elsewhere, a symlink pointing out); writes to `.git/`, `.talos/` and `.env*`; and reads of
`.env*`, which hold secrets the model has no business seeing. `.gitignore` is honoured when
listing and searching, so build output and dependencies do not flood the model's context.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pathspec

PROTECTED_DIRS = frozenset({".git", ".talos"})
ALWAYS_SKIPPED = frozenset({".git", "node_modules", "__pycache__", ".venv", "venv"})
MAX_READ_BYTES = 256 * 1024


class SandboxError(ValueError):
    """A path the agent may not use; the message says which and why."""


def _is_env_file(name: str) -> bool:
    return name == ".env" or name.startswith(".env.")


class Workspace:
    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise SandboxError(f"workspace root {self.root} is not a directory")
        self._ignore_stamp: float | None = None
        self._ignore = pathspec.GitIgnoreSpec.from_lines([])

    # --------------------------------------------------------------- paths
    def resolve(self, path: str, *, write: bool = False) -> Path:
        """The real path of `path` (relative to the root, or absolute inside it)."""
        if not isinstance(path, str) or not path.strip() or "\0" in path:
            raise SandboxError(f"invalid path {path!r}")
        candidate = Path(path)
        full = candidate if candidate.is_absolute() else self.root / candidate
        real = full.resolve()
        if real != self.root and not real.is_relative_to(self.root):
            what = "a symlink that leads" if full.is_symlink() or real != full.absolute() else "it"
            raise SandboxError(f"{path!r} is outside the workspace ({what} leaves {self.root})")
        rel = real.relative_to(self.root)
        if write and (set(rel.parts) & PROTECTED_DIRS or _is_env_file(real.name)):
            raise SandboxError(f"{path!r} is protected: .git/, .talos/ and .env* are never written")
        if not write and _is_env_file(real.name):
            raise SandboxError(f"{path!r} holds secrets (.env*) and is not read")
        return real

    def relative(self, real: Path) -> str:
        return real.relative_to(self.root).as_posix() or "."

    # ------------------------------------------------------------- ignores
    def _spec(self) -> pathspec.GitIgnoreSpec:
        gitignore = self.root / ".gitignore"
        try:
            stamp = gitignore.stat().st_mtime
        except OSError:
            stamp = None
        if stamp != self._ignore_stamp:
            lines = gitignore.read_text(errors="replace").splitlines() if stamp else []
            self._ignore = pathspec.GitIgnoreSpec.from_lines(lines)
            self._ignore_stamp = stamp
        return self._ignore

    def ignored(self, rel: str, is_dir: bool = False) -> bool:
        first = rel.split("/", 1)[0]
        if first in ALWAYS_SKIPPED:
            return True
        return self._spec().match_file(rel + "/" if is_dir else rel)

    def walk(self, start: str = ".") -> Iterator[str]:
        """Files under `start`, relative to the root, sorted, not ignored."""
        base = self.resolve(start)
        for dirpath, dirnames, filenames in os.walk(base):
            here = Path(dirpath)
            dirnames[:] = sorted(
                d for d in dirnames if not self.ignored(self.relative(here / d), is_dir=True)
            )
            for name in sorted(filenames):
                rel = self.relative(here / name)
                if not self.ignored(rel):
                    yield rel

    # ---------------------------------------------------------------- files
    def read_text(self, path: str) -> str:
        real = self.resolve(path)
        if not real.is_file():
            raise SandboxError(f"{path!r} is not a file")
        if real.stat().st_size > MAX_READ_BYTES:
            raise SandboxError(
                f"{path!r} is {real.stat().st_size} bytes; read a line range instead "
                f"(files over {MAX_READ_BYTES} bytes are not read whole)"
            )
        return real.read_text(encoding="utf-8", errors="replace")

    def read_lines(self, path: str, start: int, end: int) -> list[str]:
        """Lines start..end (1-based, inclusive) of a file of any size."""
        real = self.resolve(path)
        if not real.is_file():
            raise SandboxError(f"{path!r} is not a file")
        out = []
        with real.open(encoding="utf-8", errors="replace") as fh:
            for number, line in enumerate(fh, 1):
                if number > end:
                    break
                if number >= start:
                    out.append(line)
        return out

    def write_text(self, path: str, text: str) -> Path:
        """Write through the sandbox, atomically: a crash leaves the old file or the new one."""
        real = self.resolve(path, write=True)
        real.parent.mkdir(parents=True, exist_ok=True)
        tmp = real.with_name(f".{real.name}.talos-tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, real)
        return real


def grep(workspace: Workspace, pattern: str, start: str = ".", limit: int = 100) -> list[str]:
    """`path:line: text` for lines matching a regex, at most `limit`."""
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise SandboxError(f"invalid regex {pattern!r}: {exc}") from None
    hits: list[str] = []
    for rel in workspace.walk(start):
        if _is_env_file(Path(rel).name):
            continue
        try:
            with (workspace.root / rel).open(encoding="utf-8", errors="strict") as fh:
                for number, line in enumerate(fh, 1):
                    if regex.search(line):
                        hits.append(f"{rel}:{number}: {line.rstrip()[:200]}")
                        if len(hits) >= limit:
                            return hits
        except (UnicodeDecodeError, OSError):
            continue  # binary or unreadable: not searched
    return hits
