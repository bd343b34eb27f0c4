"""The workspace's secrets and `.git` (issue 25, points 4 and 8) through the real `talos-ls`,
driven by a real LSP client in full-auto: the same sandbox layout as `talos run`
(`test_moved_secrets.py`, `test_git_in_the_sandbox.py`), reached through the language server's
own path (its host, its settings). A hostile model moves, copies and links directories holding
`.env*` files and reads them, plants hooks, config, `commondir`, alternates, a paused rebase
and links in `.git`, and makes an ordinary commit: no secret reaches the model, nothing
planted survives for the person's next git, and the commit is there."""

from __future__ import annotations

import subprocess
from types import SimpleNamespace

from ..lsp import conftest as lsp
from ..lsp.conftest import start_editor
from ..system import require_sandbox
from .conftest import ENV_FILE_SECRET
from .test_commands import commit_all
from .test_git_in_the_sandbox import PLANTS, check_host, host_git, ship
from .test_lsp import run_task, tool_results
from .test_lsp_shell_reader import script
from .test_moved_secrets import AFTER, CARRIES, CONTROL, assert_secrets_in_place, seed

model, ws, options = lsp.model, lsp.ws, lsp.options
COMMIT = "git add src/app.py && git commit -q -m 'by the model' && echo committed"


async def test_secrets_stay_covered_and_git_keeps_nothing_planted_through_the_editor(
    tmp_path, ws, options, model
):
    require_sandbox()
    seed(ws)
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    commit_all(ws)
    repo = SimpleNamespace(ws=ws, tmp=tmp_path)  # what the git helpers look at
    (tmp_path / "victim").write_text("the person's file\n")
    ship(repo)
    git_dir = ws / ".git"
    before = {str(p): p.read_bytes() for p in [git_dir / "config", *(git_dir / "hooks").iterdir()]}
    (ws / "src" / "app.py").write_text("def main():\n    return 2\n")
    commands = [*CARRIES[:3], AFTER[0], *PLANTS[:8], COMMIT]
    editor = await start_editor(tmp_path / "home", [ws], options | {"permissionMode": "full-auto"})
    try:
        script(model, commands)
        await run_task(editor, "tidy the workspace")
        results = tool_results(model)
    finally:
        await editor.stop()
    assert len(results) == len(commands), results
    assert all(r.startswith(("exit code", "killed")) for r in results), results
    assert not any(ENV_FILE_SECRET in r for r in results), "a secret reached the model"
    assert CONTROL in results[0], results[0]  # the readers read: only the secrets are covered
    assert "[talos: removed .git/objects/info/alternates" in "\n".join(results), results
    assert "committed" in results[-1], results[-1]
    assert host_git(ws, "log", "-1", "--format=%s").strip() == "by the model"
    check_host(repo, before)
    assert_secrets_in_place(ws)
