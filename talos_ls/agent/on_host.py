"""Programs Talos itself runs on the host, outside the sandbox, against a workspace: git (to
read the index, blobs and configuration for the layout), ripgrep (search), bubblewrap and
bash. A hostile repository must not be able to choose what runs, nor read the person's
secrets through it.

- Where a program is found (`program`): on PATH, but never in a workspace (a PATH entry
  there, such as an activated `.venv/bin`, is the repository's, and an approved command may
  write it), never through a relative PATH entry (relative to the daemon's directory, often
  the workspace), and never a file that resolves into a workspace.
- What git may run (`git`): nothing the repository configures. `core.fsmonitor` (which git
  runs to read the index) is off; every transport is refused
  (`GIT_ALLOW_PROTOCOL`, which git reads before any configuration), so a partial clone's lazy
  fetch of a missing blob cannot start `ext::` commands, `core.sshCommand`, a remote helper
  or an `uploadpack` program; replace refs are ignored; no optional lock is taken (no index
  refresh, so no `post-index-change` hook). The other commands Talos runs (`ls-files`,
  `cat-file --batch`, `config`) run no program at all.
- With what environment: an allow-list (PATH as found, HOME and XDG_CONFIG_HOME for the
  person's own configuration, the locale, git's own configuration locations), never the API
  key or other secrets the person's environment holds. Discovery stops at the workspace
  (`GIT_CEILING_DIRECTORIES`): a workspace without a repository of its own is never read as
  part of one above it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from pathlib import Path

# Every workspace a Sandbox serves in this process: a program is never run from one.
_WORKSPACES: set[str] = set()
_LOCK = threading.Lock()

# Before any configuration: the command line's `-c` wins over every file git reads.
# (Not `core.hooksPath`: `git config --get core.hooksPath` would answer it. These commands
# run no hook, and with no optional lock the index is never written.)
GIT_OPTIONS = ("--no-pager", "-c", "core.fsmonitor=false", "-c", "protocol.allow=never")
# The person's environment that git may see: where their own configuration is.
GIT_PASS_ENV = (
    "HOME",
    "XDG_CONFIG_HOME",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_NOSYSTEM",
)
GIT_TIMEOUT = 10.0


def add_workspace(root: Path) -> None:
    """`root` is a workspace commands may write: no program is run from it, for any
    workspace of this process. (One that holds a home is never writable: its PATH entries,
    `~/.local/bin`, are the person's own.)"""
    with _LOCK:
        _WORKSPACES.add(os.path.realpath(root))


def _in_workspace(path: str) -> bool:
    real = os.path.realpath(path)
    with _LOCK:
        roots = tuple(_WORKSPACES)
    return any(real == r or real.startswith(r.rstrip("/") + "/") for r in roots)


def search_path() -> str:
    """PATH without its relative entries and those in a workspace."""
    entries = [
        e
        for e in os.environ.get("PATH", "").split(os.pathsep)
        if os.path.isabs(e) and not _in_workspace(e)
    ]
    return os.pathsep.join(entries) or "/usr/bin:/bin"


def program(name: str) -> str | None:
    """`name` as found on `search_path`, when it does not resolve into a workspace."""
    found = shutil.which(name, path=search_path())
    return None if found is None or _in_workspace(found) else found


def git_env(root: Path) -> dict[str, str]:
    """The environment every git Talos runs gets: the allow-list, and the switches above."""
    env = {k: os.environ[k] for k in GIT_PASS_ENV if k in os.environ}
    env.update(
        PATH=search_path(),
        LC_ALL="C",
        GIT_ALLOW_PROTOCOL="none",
        GIT_NO_LAZY_FETCH="1",
        GIT_NO_REPLACE_OBJECTS="1",
        GIT_OPTIONAL_LOCKS="0",
        GIT_TERMINAL_PROMPT="0",
        GIT_CEILING_DIRECTORIES=str(Path(root).parent),
    )
    return env


def git(
    args: list[str], root: Path, *, stdin: bytes | None = None, timeout: float = GIT_TIMEOUT
) -> bytes | None:
    """git's output for `args`, run in the workspace `root`; None when git is missing, fails
    or takes longer than `timeout`."""
    binary = program("git")
    if binary is None:
        return None
    try:
        done = subprocess.run(
            [binary, *GIT_OPTIONS, *args],
            cwd=root,
            env=git_env(root),
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def git_text(args: list[str], root: Path) -> str | None:
    out = git(args, root)
    return None if out is None else out.decode(errors="surrogateescape")


def git_config_files(git_dir: Path) -> list[Path]:
    """The configuration files git reads for this repository, given the environment `git`
    gives it (`git_env`): the repository's, the person's (`GIT_CONFIG_GLOBAL`, else
    `~/.gitconfig` and `$XDG_CONFIG_HOME/git/config`) and the system's (`GIT_CONFIG_SYSTEM`,
    else /etc/gitconfig, unless `GIT_CONFIG_NOSYSTEM`). What is derived from them is asked of
    git again when one of them changed."""
    env = os.environ
    files = [git_dir / "config"]
    if env.get("GIT_CONFIG_GLOBAL"):
        files.append(Path(env["GIT_CONFIG_GLOBAL"]))
    else:
        xdg = env.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
        files += [Path(os.path.expanduser("~/.gitconfig")), Path(xdg) / "git" / "config"]
    if env.get("GIT_CONFIG_NOSYSTEM", "").lower() not in ("1", "true", "yes", "on"):
        files.append(Path(env.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig"))
    return files
