"""How a local (stdio) MCP server is started: under the same bubblewrap sandbox as commands
(`agent/sandbox.py`), with the workspace read-only (its `.env*` files and Talos's own files
hidden, as for commands), no network unless its configuration grants it, and its own
install tree shown read-only wherever it is: the `node_modules` tree a script lies in, a
virtualenv, the npx or uv cache under the home directory (`install_tree`).

Its environment is the commands' allow-list plus the `env` it was configured with. Those
values may be secrets: bwrap reads its options (the `--setenv`s among them) from a memfd
(`--args FD`), so no value is on any command line (`ps`)."""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..agent import limits as lim
from ..agent.sandbox import (
    SANDBOX_HOME,
    Sandbox,
    allowed_env,
    path_entries,
    toolchain,
    venv_home,
)
from ..agent.workspace_layout import Layout
from ..errors import TalosError
from .config import ServerConfig

# Where a program's own files are, by the directory it lies in: a package manager's tree.
TREE_MARKERS = ("node_modules",)
USUAL_CACHES = (".npm/_npx", ".cache/uv", ".local/share/uv")


class LaunchError(TalosError):
    """A server that cannot be started here; the message says why."""


@dataclass
class Launch:
    """A server's start: `argv` (bwrap, `--args FD`, then the program), the memfd holding
    bwrap's options (closed by `close`), and the workspace layout held while it runs."""

    argv: list[str]
    options_fd: int
    layout: Layout | None
    shown: list[Path]  # the install trees shown read-only
    env: dict[str, str]  # bwrap's own environment: the allow-list, no configured value

    def close(self) -> None:
        if self.options_fd >= 0:
            os.close(self.options_fd)
            self.options_fd = -1

    def release(self) -> list[str]:
        """After the server stopped: the workspace's stand-ins undone (`Layout.after`)."""
        self.close()
        layout, self.layout = self.layout, None
        return layout.after() if layout is not None else []


def install_tree(path: Path) -> Path:
    """The directory a server's program belongs to: above a `node_modules` directory (the
    whole tree, its dependencies beside it), a virtualenv (`pyvenv.cfg`), else the program's
    own directory."""
    real = Path(os.path.realpath(path))
    for parent in real.parents:
        if parent.name in TREE_MARKERS:
            return parent.parent
        if (parent / "pyvenv.cfg").is_file():
            return parent
    return real.parent


def program_paths(server: ServerConfig, root: Path) -> list[Path]:
    """The files a server runs from, outside the workspace: its command found on PATH (or
    named by its path), and each argument that is an absolute path to an existing file (a
    script: `node /opt/srv/index.js`)."""
    assert server.command is not None
    found = shutil.which(server.command, path=os.pathsep.join(path_entries()))
    if found is None and "/" in server.command:
        candidate = Path(server.command)
        candidate = candidate if candidate.is_absolute() else root / candidate
        found = str(candidate) if candidate.is_file() else None
    paths = [Path(found)] if found else []
    paths += [Path(a) for a in server.args if a.startswith("/") and os.path.isfile(a)]
    return [p for p in paths if not Path(os.path.realpath(p)).is_relative_to(root)]


def trees(server: ServerConfig, root: Path) -> tuple[list[Path], list[str]]:
    """The install trees to show read-only, and why any was refused (a home, a credential
    store...: `sandbox.toolchain`). A launcher like `npx` or `uvx` runs from its cache under
    the home directory: shown too, when there is one."""
    shown: list[Path] = []
    refused: list[str] = []
    wanted = [install_tree(p) for p in program_paths(server, root)]
    for tree in list(wanted):  # a virtualenv runs the Python it was made from
        made_from = venv_home(tree)
        if made_from is not None:
            wanted.append(made_from.parent if made_from.name == "bin" else made_from)
    if server.command is not None and Path(server.command).name in ("npx", "uvx", "uv", "pnpx"):
        home = Path.home()
        wanted += [home / c for c in USUAL_CACHES if (home / c).is_dir()]
    for tree in dict.fromkeys(wanted):
        try:
            toolchain(tree)
        except ValueError as exc:
            refused.append(str(exc))
            continue
        shown.append(tree)
    return shown, refused


def plan(sandbox: Sandbox, server: ServerConfig, readable: Iterable[Path] = ()) -> Launch:
    """The launch of a stdio server in `sandbox` (blocking: it walks the workspace, so it
    runs in a worker thread). Undone if it fails half-way."""
    assert server.command is not None
    found = shutil.which(server.command, path=os.pathsep.join(path_entries()))
    if found is None and not (sandbox.root / server.command).is_file():
        raise LaunchError(
            f"its program {server.command!r} is not found (not on the PATH Talos was "
            "started with, and no such file)"
        )
    shown, _refused = trees(server, sandbox.root)
    view = sandbox.configured(readable=[*readable, *shown], limits=sandbox.limits)
    layout = view.layout(False)
    try:
        command = "exec " + shlex.join([server.command, *server.args])
        inner = lim.launcher(view.shell, command, view.limits, None)
        full = view.argv(
            command, writable=False, network=server.network, layout=layout, env=dict(server.env)
        )
        options = full[1 : len(full) - len(inner) - 1]
        assert full[len(full) - len(inner) - 1] == "--"
        fd = os.memfd_create("talos-mcp-options", os.MFD_CLOEXEC)
        os.write(fd, b"".join(os.fsencode(o) + b"\0" for o in options))
        os.lseek(fd, 0, os.SEEK_SET)
        os.set_inheritable(fd, True)
        assert view.bwrap is not None
        argv = [view.bwrap, "--args", str(fd), "--", *inner]
        return Launch(argv, fd, layout, shown, allowed_env(SANDBOX_HOME))
    except BaseException:
        layout.after()
        raise
