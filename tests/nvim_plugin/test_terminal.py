"""The plugin at a real terminal: Neovim's own TUI on a pseudo-terminal (tests/pseudo_terminal.py),
nothing of Neovim replaced (its own vim.notify and vim.ui.select), keys typed as a person types
them, against the real `talos-ls` and the scripted model. Headless Neovim has no hit-enter
prompt, so only here can it be seen that none comes: a message of several lines, or one wider
than the screen, left "Press ENTER or type command to continue" on the screen, which ate the
next key, and the permission menu came only after one.

One session: `:TalosChat`, then a task that asks a question (two rules files disagree) and
for permission to run a command, proposes an edit and streams its answer in chunks. While the
person types in Insert mode no menu opens (one line says Talos needs them); back in Normal mode
both menus open with no key pressed (the test sends nothing until it sees each), the answer
shows in the chat before the task ends, `:TalosDiff`'s tab is labelled readably, and a
follow-up typed in the chat reaches the model with the earlier conversation."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from talos_ls.demo.scripted_model import ScriptedModelServer, reply

from ..nvim.test_neovim import NVIM_INSTALL, editor_env, server_cmd
from ..pseudo_terminal import Terminal, text
from ..system import require_binary, require_sandbox
from .test_plugin import PLUGIN, TWO_HUNKS, workspace

INIT = Path(__file__).with_name("terminal.lua")
# The answer, in the scripted model's 7-character chunks: each is drawn as it arrives, so each
# is a run of text on the terminal of its own.
CHUNKS = [f"chunk{i:02d}" for i in range(1, 9)]
STREAMED = "".join(CHUNKS)
FOLLOWED = "answer2"  # one chunk: drawn in one run
MENU = r"Type number and <Enter>"
WAIT_S = 60

pytestmark = pytest.mark.slow


@pytest.fixture
def model():
    server = ScriptedModelServer()
    yield server
    server.close()


def answer_menu(term: Terminal, start: int) -> tuple[str, int]:
    """Wait for a menu drawn after raw offset `start` (no key is sent meanwhile), and answer
    it: the question with pytest, the permission with Allow once. Returns which it was and
    the offset after it."""
    term.until_text(MENU, start, WAIT_S)
    menu = text(term.raw[start:])
    if re.search(r"\d+: pytest", menu):
        kind, choice = "question", "pytest"
    elif "Run this command" in menu:
        kind, choice = "permission", "Allow once"
    else:
        raise AssertionError(f"an unknown menu:\n{menu}")
    number = re.search(r"(\d+): " + re.escape(choice), menu)
    assert number, menu
    end = len(term.raw)
    term.send(number.group(1) + "\r")
    return kind, end


def test_a_task_at_a_terminal_asks_without_a_hit_enter_prompt_and_streams_to_the_chat(
    tmp_path, model
):
    require_sandbox()
    nvim = require_binary("nvim", NVIM_INSTALL)
    ws, _ = workspace(tmp_path)
    model.script += [
        reply("", [("c1", "run_command", json.dumps({"command": "touch made.txt"}))]),
        reply("", [("c2", "propose_edit", json.dumps(TWO_HUNKS))]),
        reply(STREAMED, delay=0.3),  # about 3 s of chunks
        reply(FOLLOWED),
    ]
    modes = tmp_path / "modes.txt"
    config = tmp_path / "nvim.json"
    config.write_text(
        json.dumps(
            {
                "plugin": str(PLUGIN),
                "cmd": server_cmd(),
                "modes": str(modes),
                "settings": {
                    "model": "fake-model",
                    "baseUrl": model.url,
                    "storeUrl": "sqlite:///" + str(tmp_path / "talos.db"),
                    "prices": {"fake-model": {"input": 1, "cached_input": 0.5, "output": 2}},
                },
            }
        )
    )
    env = editor_env(tmp_path / "home", config)
    env.update({"TERM": "xterm-256color", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"})
    argv = [nvim, "-n", "-i", "NONE", "--noplugin", "-u", str(INIT), "src/app.py"]
    term = Terminal(argv, env, cwd=ws, columns=110, rows=40)
    try:
        term.until_text(r"talos \$0", 0, WAIT_S)  # the client is up: its statusline
        start = len(term.raw)
        term.send(":TalosChat\r")
        term.until_text(r"Talos chat · i follow up", start, WAIT_S)

        # The task starts, and the person goes on typing in app.py: no menu opens in Insert
        # mode (it would take the keys typed), one line says Talos needs them.
        term.send(":wincmd p\r")
        start = len(term.raw)
        term.send(":TalosTask write the tests\r")
        term.send("Go# typing on")
        term.until_text(r"Talos needs you: ", start, WAIT_S)
        term.send(" and on")
        term.until_text(r"and on", start, WAIT_S)  # drawn beside "# typing on"
        assert MENU not in text(term.raw[start:]), text(term.raw[start:])
        # Back in Normal mode: the two menus, in the order they come, each opened with no
        # key pressed.
        start = len(term.raw)
        term.send("\x1b")
        kinds = []
        for _ in range(2):
            kind, start = answer_menu(term, start)
            kinds.append(kind)
        assert sorted(kinds) == ["permission", "question"], kinds

        # The answer streams into the chat: its first chunk is on the screen before the
        # task's end is.
        term.until_text(r"■ done", start, WAIT_S)
        shown = text(term.raw[start:])
        first, ended = shown.find(CHUNKS[0]), shown.find("■ done")
        assert 0 <= first < ended, shown
        for chunk in CHUNKS:
            assert chunk in shown, shown
        assert re.search(r"◆ proposal p\w+ · src/app\.py · 2 changes · pending", shown), shown
        assert (ws / "made.txt").exists()

        # :TalosDiff: its tab labelled with the file's name, not 't///p/b/s/app.py'.
        start = len(term.raw)
        term.send(":TalosDiff\r")
        term.until_text(r"app\.py \[talos p\w+ proposed\]", start, WAIT_S)
        term.send(":tabclose\r")

        # A follow-up typed in the chat (its `i`): the model sees the earlier conversation.
        term.send(":TalosChat\r")  # to the chat's window
        start = len(term.raw)
        term.send("i")
        term.until_text(r"Talos follow-up:", start, WAIT_S)
        term.send("and now the docs\r")
        term.until_text(r"▍follow-up t\w+ \(after t\w+\): and now the docs", start, WAIT_S)
        term.until_text(FOLLOWED, start, WAIT_S)
        term.until_text(r"■ done", start, WAIT_S)

        everything = text(term.raw)
        term.send("\x1b:qa!\r")
        term.finish(WAIT_S)
    finally:
        if term.proc.poll() is None:
            term.proc.kill()  # its server ends with its standard input
            term.proc.wait()

    # No hit-enter prompt at any moment: none on the screen, and Neovim never in its mode.
    assert "Press ENTER" not in everything, everything
    assert "-- More --" not in everything, everything
    seen = modes.read_text().split()
    assert "r" not in seen, seen

    last = model.requests[-1]["body"]["messages"]
    said = [m.get("content") or "" for m in last]
    assert any("write the tests" in s for s in said), said  # the first request
    assert any(STREAMED in s for s in said), said  # its answer
    assert "and now the docs" in said[-1], said
