"""Names a command chose reach the person escaped (review A8), through the real `talos run`
and `talos-ls`.

After a writable command Talos removes what it left in `.git` and says so in a note
(`[talos: removed ...]`), in the command's result and in a log line. The command names the
link it plants with terminal escapes (a colour, a screen clear, a title change): the note the
model reads, `talos run`'s stderr (its console log handler) and the language server's log
file hold the escapes as text (`\\x1b`), never the raw control characters.
"""

from __future__ import annotations

import json
import subprocess

from talos_ls.gates.permissions import workspace_settings_path

from ..lsp import conftest as lsp
from ..lsp.conftest import start_editor
from ..system import require_sandbox
from .conftest import Attack
from .test_commands import assert_ran, batch, commit_all
from .test_lsp import run_task, tool_results
from .test_lsp_shell_reader import script

model, ws, options = lsp.model, lsp.ws, lsp.options
# Planted in .git by a script the repository ships (`bash` is allowed by the person's rules).
PLANT = "ln -s nowhere \"$(printf '.git/\\033[31mRED\\033]0;title\\007\\033[2J')\"\necho planted\n"
RAW = ("\x1b", "\x07")


def raw_in(text: str) -> list[str]:
    return [c for c in RAW if c in text]


def test_the_note_and_the_console_log_are_escaped_in_talos_run(attack: Attack, sandboxed):
    (attack.ws / "plant.sh").write_text(PLANT)
    commit_all(attack.ws)
    attack.settings(commands={"allow": ["bash"]})
    proc, results = batch(attack, ["bash plant.sh"])
    assert_ran(["bash plant.sh"], results)
    assert "planted" in results[0], results[0]
    assert "[talos: removed .git/\\x1b[31mRED\\x1b]0;title\\x07\\x1b[2J: a link" in results[0]
    assert not raw_in(results[0]), results[0]
    assert "after a command, removed .git/\\x1b[31mRED" in proc.stderr, proc.stderr[-2000:]
    assert not raw_in(proc.stderr), proc.stderr[-2000:]
    assert not list((attack.ws / ".git").glob("*RED*"))


async def test_the_language_servers_log_is_escaped(tmp_path, ws, options, model):
    require_sandbox()
    (ws / "plant.sh").write_text(PLANT)
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    commit_all(ws)
    home = tmp_path / "home"
    settings = workspace_settings_path(ws.resolve(), home / "config" / "talos")
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"commands": {"allow": ["bash"]}}))
    log = tmp_path / "server.log"
    editor = await start_editor(home, [ws], options, args=["--log-file", str(log)])
    try:
        script(model, ["bash plant.sh"])
        await run_task(editor, "plant")
        results = tool_results(model)
    finally:
        await editor.stop()
    assert "[talos: removed .git/\\x1b[31mRED" in results[0], results
    text = log.read_text()
    assert "after a command, removed .git/\\x1b[31mRED" in text, text[-2000:]
    assert not raw_in(text), text[-2000:]
