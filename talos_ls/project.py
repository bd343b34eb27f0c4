"""Which workspace a `talos` command is about, found the way git finds its repository.

Run from `ws/tests`, `talos memory add` must bind the fact to the agent `talos run --workspace
ws` (and the editor opened on `ws`) will read, so the workspace is the nearest ancestor of the
current directory that marks a project root, not the directory itself. The agent of a
workspace is its resolved path, as the host names it (`Host.agent_id`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from .agent.workspace import agent_id
from .cli_report import USAGE, CliError
from .display import visible

__all__ = ["agent_id", "chosen", "find_root"]

# A directory holding one of these is a project root. Version control and Talos's own folder
# first; then the manifests of the common ecosystems (a project without git is still one).
# Not a Makefile or CMakeLists.txt: subdirectories (docs/, src/) often have their own.
MARKERS = (
    ".git",
    ".talos",
    ".hg",
    ".svn",
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "package.json",
    "Cargo.toml",
    "go.mod",
    "pom.xml",
    "build.gradle",
    "build.gradle.kts",
    "Gemfile",
    "composer.json",
    "mix.exs",
    "deno.json",
    "pubspec.yaml",
    "Package.swift",
    "stack.yaml",
    "dune-project",
)


def find_root(start: str | os.PathLike[str] | None = None) -> Path:
    """The nearest directory from `start` (default: the current one) up to the file system's
    root that holds a project marker; `start` itself, resolved, when none does. The user's home
    directory is not a project because it holds a `.git` (of dotfiles, say): the search stops below
    it, unless `start` is the home directory itself."""
    here = Path(start if start is not None else Path.cwd()).resolve()
    home = _home()
    for folder in (here, *here.parents):
        if folder == home and folder != here:
            break
        if any((folder / marker).exists() for marker in MARKERS):
            return folder
    return here


def chosen(given: str | None, *, announce: bool = True) -> Path:
    """The workspace of a command: `given` (--workspace), which must be a directory, else
    `find_root()`, said on stderr in one dim line when `announce` (never with --json: stdout
    stays machine-readable, and stderr quiet)."""
    if given is not None:
        root = Path(given)
        if not root.is_dir():
            raise CliError(
                "usage",
                f"workspace {root} is not a directory; give an existing directory to --workspace",
                USAGE,
            )
        return root
    root = find_root()
    if announce:
        line = f"workspace: {visible(str(root), single_line=True)}"
        if root != Path.cwd().resolve():
            line += " (the nearest project root; --workspace to choose another)"
        print(f"\x1b[2m{line}\x1b[0m" if sys.stderr.isatty() else line, file=sys.stderr)
    return root


def _home() -> Path | None:
    try:
        return Path.home().resolve()
    except (RuntimeError, KeyError, OSError):
        return None
