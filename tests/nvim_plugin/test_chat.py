"""The chat buffer (`:TalosChat`), `:checkhealth talos` and the help of the Neovim plugin, in
headless Neovim through driver.lua (test_plugin.py's `play`) against the real `talos-ls` and
the scripted model; the same at a real terminal is test_terminal.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from talos_ls.demo.scripted_model import ScriptedModelServer, reply

from ..nvim.test_neovim import NVIM_INSTALL
from ..system import require_binary
from .test_plugin import BOTH, INVISIBLE, PLUGIN, TWO_HUNKS, play

CHUNKS = [f"chunk{i:02d}" for i in range(1, 9)]  # the scripted model sends 7 characters a chunk


@pytest.fixture
def model():
    server = ScriptedModelServer()
    yield server
    server.close()


def test_the_chat_streams_a_task_shows_its_question_and_proposal_and_takes_a_follow_up(
    tmp_path, model
):
    model.script += [
        reply("", [("c1", "propose_edit", json.dumps(TWO_HUNKS))]),
        reply("".join(CHUNKS), delay=0.3),  # about 3 s of chunks
        reply("followed up"),
    ]
    run = play(tmp_path, model, "chat")
    chat = run["chat"]

    # :TalosChat: a plain scratch buffer in a split, nothing in it interpreted.
    opened = chat["opened"]
    assert opened["name"] == "Talos chat" and opened["buftype"] == "nofile", str(run)
    assert opened["filetype"] == "talos_chat" and opened["modeline"] is False, str(run)
    assert not opened["modifiable"] and opened["foldmethod"] == "manual", str(run)
    assert opened["wins"] == 2 and opened["first"].startswith("Talos chat · i follow up"), str(run)

    # Streamed: the first chunk was there while the task still ran, the rest without it.
    assert chat["state_at_first"] == "running", str(run)
    assert not any(line.lstrip().startswith("■") for line in chat["at_first"]), str(run)
    assert "".join(CHUNKS) in chat["streamed"], str(run)  # one line, as the model wrote it
    task = chat["task_id"]
    lines = chat["streamed"]
    assert f"▍task {task}: write the tests" in lines, str(run)
    assert any(line.startswith("  › step 1: propose_edit") for line in lines), str(run)
    # The question, with its actions, and how it was answered.
    question = next(i for i, line in enumerate(lines) if line.startswith("  ? "))
    assert "Which is right?" in lines[question], str(run)
    assert "[pytest / unittest / Skip]" in lines[question + 1], str(run)
    assert lines[question + 2] == "    → answered: pytest", str(run)
    # The proposal, how to act on it, and the end with its cost; the window followed.
    assert any(
        re.fullmatch(r"  ◆ proposal p\w+ · src/app\.py · 2 changes · pending   \(<CR> diff.*", x)
        for x in lines
    ), str(run)
    assert re.fullmatch(r"  ■ done · [\d.]+k? tok · <?\$[\d.]+", lines[-1]), str(run)
    assert chat["cursor"] == chat["count"], str(run)
    assert re.match(
        r"Talos: write the tests: done · .*\(:TalosChat\)|Talos: write the tests: done",
        chat["end_note"],
    ), str(run)
    # `ga` on the proposal's line applied it; its line says so.
    assert chat["app"] == BOTH.splitlines(), str(run)
    assert re.search(r"· 2 changes · applied$", chat["applied"]), str(run)

    # The follow-up: a task after the first, whose model saw the earlier conversation.
    followup = run["followup"]
    assert followup["latest"]["task_id"] != task, str(run)
    assert any(
        re.fullmatch(rf"▍follow-up t\w+ \(after {task}\): and now the docs", x)
        for x in followup["lines"]
    ), str(run)
    assert "followed up" in followup["lines"], str(run)
    said = [m.get("content") or "" for m in model.requests[-1]["body"]["messages"]]
    assert any("write the tests" in s for s in said), said
    assert any("".join(CHUNKS) in s for s in said), said
    assert "and now the docs" in said[-1], said

    # Raw hostile events: every control character shown as an escape, nothing run.
    hostile = run["hostile"]
    shown = hostile["lines"][len(followup["lines"]) :]
    for line in shown:
        assert not INVISIBLE.findall(line), shown
    assert '▍task tevil: \\x1b[2Jclear\\nsecond %{execute("qa!")}' in shown, shown
    assert "red: \\x1b[31mred\\x1b[0m, csi: \\x9b2J, rtl: \\u202elfr, crlf: a" in shown, shown
    assert "b" in shown and "vim: set ft=sh ts=2 :" in shown, shown  # split pieces joined
    step = shown.index("  › step 1: \\x1b]0;title\\x07 run")
    # Another task's line between two of this one's: whose each is, is said.
    assert shown[step + 1 : step + 5] == [
        "  … tside:",
        "  › step 1: meanwhile",
        "  … tevil:",
        "more",
    ]
    assert shown[-1] == "  ! \\x1b[31mboom\\nline vim: set ft=sh ts=2 :", shown
    assert hostile["filetype"] == "talos_chat" and hostile["tabstop"] == 8, str(run)

    # A task cut short: its cost counted from the text (no usage came), and said so.
    assert run["estimated"]["line"] == "  ■ cancelled · 40 tok · $0.01 (estimated)", str(run)


def test_checkhealth_talos_reports_the_server_its_version_the_connection_and_the_settings(
    tmp_path, model
):
    run = play(tmp_path, model, "health")
    text = "\n".join(run["health"]["lines"])
    assert "talos: the server" in text, text
    assert re.search(r"OK:? server command: .*talos", text), text
    assert re.search(r"OK:? version: talos-ls \d", text), text
    assert re.search(r"OK:? client \d+ for .*/ws: connected, 1 buffer attached", text), text
    assert "talos: the settings" in text and "model = fake-model" in text, text
    assert "storeUrl = sqlite:///" in text, text
    assert "OPENAI_API_KEY is set" in text and "sk-test" not in text, text  # never the key
    assert re.search(r"OK:? :help \|?talos\|? works", text), text
    assert "ERROR" not in text, text


def test_checkhealth_talos_says_where_it_looked_for_a_missing_server(tmp_path):
    nvim = require_binary("nvim", NVIM_INSTALL)
    out = tmp_path / "health.txt"
    script = (
        f"set rtp^={PLUGIN} | lua require('talos').setup({{ cmd = {{ 'no-such-talos-ls' }} }})\n"
        f"checkhealth talos\nlua vim.fn.writefile(vim.api.nvim_buf_get_lines(0, 0, -1, false),"
        f" '{out}')\nqa!\n"
    )
    (tmp_path / "init.vim").write_text(script)
    env = {**os.environ, "PATH": "/usr/bin:/bin", "XDG_STATE_HOME": str(tmp_path)}
    done = subprocess.run(
        [nvim, "--headless", "-n", "-i", "NONE", "-u", str(tmp_path / "init.vim")],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    text = out.read_text()
    missing = r"ERROR:? `no-such-talos-ls` \(the server command\) is not found on the PATH: "
    assert re.search(missing + "/usr/bin:/bin", text), text
    assert "pip install talos-ls" in text, text


def _tags(directory: Path) -> list[str]:
    return (directory / "tags").read_text().splitlines()


def test_help_works_from_a_read_only_copy_and_the_shipped_tags_are_current(tmp_path):
    nvim = require_binary("nvim", NVIM_INSTALL)
    # The shipped doc/tags is what :helptags makes of doc/talos.txt now.
    fresh = tmp_path / "fresh"
    shutil.copytree(PLUGIN / "doc", fresh / "doc")
    (fresh / "doc" / "tags").unlink()
    subprocess.run(
        [
            nvim,
            "--headless",
            "-u",
            "NONE",
            "-i",
            "NONE",
            "-c",
            f"helptags {fresh / 'doc'}",
            "-c",
            "qa!",
        ],
        capture_output=True,
        timeout=30,
        check=True,
    )
    assert _tags(PLUGIN / "doc") == _tags(fresh / "doc"), "run :helptags clients/neovim/doc"

    # A checkout nobody can write to (a system package, a read-only mount): :help works
    # without :helptags.
    copy = tmp_path / "talos-plugin"
    shutil.copytree(PLUGIN, copy)
    for path in [*sorted(copy.rglob("*"), reverse=True), copy]:
        path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    out = tmp_path / "help.txt"
    try:
        found = []
        for tag in (
            "talos",
            ":TalosChat",
            "talos-chat",
            ":TalosFollowUp",
            "talos-messages",
            "talos-health",
        ):
            script = (
                f"set rtp^={copy} | help {tag} | "
                f"call writefile([expand('%:t'), getline('.')], '{out}') | qa!"
            )
            done = subprocess.run(
                [nvim, "--headless", "-u", "NONE", "-i", "NONE", "-c", script],
                capture_output=True,
                text=True,
                timeout=30,
            )
            assert done.returncode == 0, done.stdout + done.stderr
            name, line = out.read_text().splitlines()
            found.append((tag, name, f"*{tag}*" in line))
        assert all(name == "talos.txt" and ok for _, name, ok in found), found
    finally:
        for path in [copy, *copy.rglob("*")]:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)
