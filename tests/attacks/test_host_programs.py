"""The programs Talos itself runs on the host, outside the sandbox (`agent/on_host.py`), run
nothing a hostile repository chose, through the real `talos run` and `talos-ls`.

Before each command Talos reads the workspace's git index (to cover a tracked `.env.example`
by its committed content) and blobs, with git on the host. The repository here ships:
- `core.fsmonitor`, which git runs to read the index;
- a partial clone's promisor remote whose URL is an `ext::` command (allowed in its own
  config), which git runs to fetch a missing blob when asked for it;
- programs named `git`, `rg`, `bwrap` and `bash` in `.venv/bin`, first on the PATH Talos is
  started with (an activated virtualenv; an approved command may write there);
- for the language server, started in the workspace as editors do: a `talos_ls` package,
  which `python -m talos_ls.watch` would import from its current directory.

Each drops a marker outside the workspace (where no sandboxed command can write) when it runs.
The model runs a built-in reader, a writable command and a search, in full-auto: they all run
(through the real bwrap), and no marker appears.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from ..lsp import conftest as lsp
from ..lsp.conftest import start_editor
from ..system import require_sandbox
from .conftest import Attack, call
from .test_commands import assert_nothing_leaked, commit_all
from .test_lsp import run_task, tool_results
from .test_lsp_shell_reader import script

model, ws, options = lsp.model, lsp.ws, lsp.options
SHIMMED = ("git", "rg", "bwrap", "bash")
COMMANDS = ["ls -a", "touch made-by-the-model.txt && echo made", "git status --short"]


def hostile(ws: Path, tmp: Path) -> Path:
    """The repository's traps, each touching a marker in `tmp/markers` when it runs on the
    host; returns that directory."""
    markers = tmp / "markers"
    markers.mkdir()
    src = tmp / "upstream"
    src.mkdir()
    (src / ".env.example").write_text("EXAMPLE_KEY=put-yours-here\n")
    (src / "README").write_text("upstream\n")
    subprocess.run(["git", "init", "-q", str(src)], check=True)
    commit_all(src)
    bare = tmp / "upstream.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(src), str(bare)], check=True)
    subprocess.run(["git", "-C", str(bare), "config", "uploadpack.allowFilter", "true"], check=True)
    clone = tmp / "partial"
    subprocess.run(
        ["git", "clone", "-q", "--filter=blob:none", "--no-checkout", f"file://{bare}", str(clone)],
        check=True,
    )
    shutil.rmtree(ws / ".git", ignore_errors=True)
    (clone / ".git").rename(ws / ".git")
    git = ["git", "-C", str(ws)]
    subprocess.run([*git, "read-tree", "HEAD"], check=True)  # .env.example's blob: not here
    (ws / ".env.example").write_text("EXAMPLE_KEY=the-persons-real-value\n")
    for key, value in (
        ("core.fsmonitor", f"touch {markers}/fsmonitor"),
        ("remote.origin.url", f"ext::sh -c touch% {markers}/promisor"),
        ("protocol.ext.allow", "always"),
    ):
        subprocess.run([*git, "config", key, value], check=True)
    shims = ws / ".venv" / "bin"
    shims.mkdir(parents=True)
    for name in SHIMMED:
        real = shutil.which(name)
        assert real, name
        (shims / name).write_text(f'#!/bin/sh\ntouch {markers}/{name}\nexec {real} "$@"\n')
        (shims / name).chmod(0o755)
    return markers


def test_nothing_the_repository_chose_runs_on_the_host_in_talos_run(attack: Attack, sandboxed):
    markers = hostile(attack.ws, attack.tmp)
    attack.path = f"{attack.ws / '.venv' / 'bin'}:{os.environ['PATH']}"
    calls = [call("run_command", command=c) for c in COMMANDS]
    attack.script([*calls, call("search", pattern="def main")], "done")
    proc = attack.run(mode="full-auto")
    results = attack.tool_results()
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(results) == 4, results
    assert results[0].startswith("exit code 0") and ".env.example" in results[0], results[0]
    assert "made" in results[1], results[1]
    assert "app.py" in results[3], results[3]  # the search ran (ripgrep, the real one)
    assert sorted(p.name for p in markers.iterdir()) == [], proc.stderr[-2000:]
    assert (attack.ws / "made-by-the-model.txt").exists()
    assert_nothing_leaked(attack, proc.stdout, proc.stderr, *results)


async def test_nothing_the_repository_chose_runs_on_the_host_in_the_language_server(
    tmp_path, ws, options, model
):
    """The same through `talos-ls`, started in the workspace (as editors start it) with the
    virtualenv's PATH; and its file watcher (a child process) imports nothing from there."""
    require_sandbox()
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    markers = hostile(ws, tmp_path)
    planted = ws / "talos_ls"
    planted.mkdir()
    (planted / "__init__.py").write_text(f"open({str(markers / 'imported')!r}, 'w').close()\n")
    (planted / "watch.py").write_text("")
    path = f"{ws / '.venv' / 'bin'}:{os.environ['PATH']}"
    editor = await start_editor(
        tmp_path / "home",
        [ws],
        options | {"permissionMode": "full-auto"},
        cwd=ws,
        env={"PATH": path},
    )
    try:
        await editor.until(lambda: any(s.folders for s in editor.statuses), "the first status")
        script(model, COMMANDS)
        await run_task(editor, "look around")
        results = tool_results(model)
    finally:
        await editor.stop()
    assert len(results) == len(COMMANDS), results
    assert results[0].startswith("exit code 0") and ".env.example" in results[0], results[0]
    assert "made" in results[1], results[1]
    assert sorted(p.name for p in markers.iterdir()) == [], json.dumps(results)
