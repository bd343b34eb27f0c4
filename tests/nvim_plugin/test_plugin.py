"""The Neovim plugin (`clients/neovim`) in a real headless Neovim (Debian's 0.7.2 here) against
the real `talos-ls` and the scripted model. `driver.lua` plays the person through the plugin
itself: `setup`, the :Talos* commands, the statusline, and a scripted `vim.ui.select` that
answers later, as a picker does. Each step writes a JSON line; a failure shows them all with
Neovim's output and logs.

Also here: luacheck is clean, `:helptags` takes the help file and `:help talos` opens it, and no
API newer than Neovim 0.7 is used outside `compat.lua` (where each has its fallback)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from talos_ls.demo.scripted_model import ScriptedModelServer, reply

from ..nvim.test_neovim import NVIM_INSTALL, Run, editor_env, server_cmd
from ..system import require_binary, require_sandbox

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "clients" / "neovim"
DRIVER = Path(__file__).with_name("driver.lua")
LUACHECK_INSTALL = "apt-get install -y lua-check"
RUN_S = 120

BASE = "def a():\n    return 1\n\n\ndef b():\n    return 2\n"
BOTH = BASE.replace("return 1", "return 10").replace("return 2", "return 20")
TWO_HUNKS = {
    "path": "src/app.py",
    "blocks": [
        {"search": "return 1", "replace": "return 10"},
        {"search": "return 2", "replace": "return 20"},
    ],
}
USAGE = (20000, 1000, 0)  # $0.022 a call at the test's prices: the session shows cents
# What may never reach the person raw (as tests/attacks/test_lsp.py): controls, bidi,
# invisible formatting, line separators; and line breaks where one line is expected.
INVISIBLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2028\u2029"
    "\u2060-\u2064\u2066-\u206f\ufeff]"
)


@pytest.fixture
def model():
    server = ScriptedModelServer()
    yield server
    server.close()


def workspace(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace (pyproject.toml, two rules files that disagree, src/app.py) and another
    root beside it."""
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "pyproject.toml").write_text("[project]\nname = 'app'\n")
    (ws / "AGENTS.md").write_text("- Tests use unittest\n")
    (ws / "CLAUDE.md").write_text("- Tests use pytest\n")
    (ws / "src" / "app.py").write_text(BASE)
    (ws / "src" / "other.py").write_text("x = 1\n")
    other = tmp_path / "other"
    other.mkdir()
    (other / "pyproject.toml").write_text("[project]\nname = 'lib'\n")
    (other / "lib.py").write_text("y = 2\n")
    return ws, other


def play(tmp_path: Path, model: ScriptedModelServer, scenario: str) -> Run:
    """`scenario` of driver.lua, Neovim started on src/app.py; every step done."""
    nvim = require_binary("nvim", NVIM_INSTALL)
    ws, other = workspace(tmp_path)
    home = tmp_path / "home"
    results = tmp_path / "steps.jsonl"
    config = tmp_path / "nvim.json"
    config.write_text(
        json.dumps(
            {
                "scenario": scenario,
                "plugin": str(PLUGIN),
                "cmd": server_cmd(),
                "results": str(results),
                "ws": str(ws),
                "other": str(other),
                "settings": {
                    "model": "fake-model",
                    "baseUrl": model.url,
                    "storeUrl": "sqlite:///" + str(tmp_path / "talos.db"),
                    "prices": {"fake-model": {"input": 1, "cached_input": 0.5, "output": 2}},
                },
            }
        )
    )
    argv = [
        nvim,
        "--headless",
        "-n",
        "-i",
        "NONE",
        "--noplugin",
        "-u",
        str(DRIVER),
        str(ws / "src" / "app.py"),
    ]
    process = subprocess.Popen(
        argv,
        cwd=ws,
        env=editor_env(home, config),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=RUN_S)
        ended = f"exit status {process.returncode}"
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        ended = f"killed after {RUN_S} s"
    steps = (
        [json.loads(line) for line in results.read_text().splitlines()]
        if (results.exists())
        else []
    )
    run = Run(steps, f"{ended}\n{output.decode(errors='replace')}", home)
    if not steps or not run["done"]["ok"] or [s for s in steps if s["step"] == "error"]:
        pytest.fail(f"Neovim's session did not complete\n{run}", pytrace=False)
    assert run["done"]["stopped"], str(run)
    return run


def test_the_plugin_reviews_a_task_in_neovim(tmp_path, model):
    model.script += [
        # Slow enough (about 3 s) that the checks of the UI loop below, relative to it, are
        # not at the mercy of a busy machine's scheduling.
        reply("", [("c1", "propose_edit", json.dumps(TWO_HUNKS))], usage=USAGE, delay=0.2),
        reply("I proposed the two changes the tests need.", usage=USAGE, delay=0.2),
    ]
    started = time.monotonic()
    run = play(tmp_path, model, "review")
    took = time.monotonic() - started
    ws = tmp_path / "ws"

    # setup: one client per root, attached to every file buffer of it; 0.7 has no vim.lsp.start.
    setup = run["setup"]
    roots = {r["root"]: r["id"] for r in setup["roots"]}
    assert set(roots) == {str(ws), str(tmp_path / "other")}, str(run)
    assert setup["app"] == setup["other"] == [roots[str(ws)]], str(run)
    assert setup["lib"] == [roots[str(tmp_path / "other")]], str(run)
    assert setup["vim_lsp_start"] is False, str(run)  # the start_client path ran

    # :TalosTask returned at once; the UI loop ran all along while the task streamed; the
    # question came through vim.ui.select (the editor's cost and question count on show) and
    # its answer moved the facts.
    # Relative to the task's own length, not to the clock: a plugin that waited for the task
    # would return after it, and stall its timer for about all of it.
    task = run["task"]
    assert task["took_ms"] > 1500, str(run)  # it did stream: the model's chunks are delayed
    assert task["command_ms"] < task["took_ms"] / 4, str(run)
    assert task["ticks"] >= task["took_ms"] / 100, str(run)  # a 10 ms timer, often on time
    assert task["longest_gap_ms"] < task["took_ms"] / 2, str(run)
    select = task["select"]
    assert select["kind"] == "talos_question", str(run)
    assert select["items"][-1] == "Skip" and "pytest" in select["chosen"], str(run)
    assert re.fullmatch(r"talos 1▶ \$[0-9.]+( \?1)?", task["running_statusline"]), str(run)
    assert task["facts"]["Tests use pytest"] > 0.5 > task["facts"]["Tests use unittest"], str(run)
    assert task["questions"] == [], str(run)
    assert task["began"] and "done ·" in task["ended"], str(run)

    # The proposal's hunks in the quickfix list, opened.
    quickfix = run["quickfix"]
    assert quickfix["title"] == "Talos proposals" and quickfix["open"], str(run)
    assert [(i["file"], i["lnum"]) for i in quickfix["items"]] == [
        ("src/app.py", 2),
        ("src/app.py", 6),
    ], str(run)
    assert "change 1 of 2: -1 +1: return 10" in quickfix["items"][0]["text"], str(run)

    # :TalosDiff: two windows in diff mode, base and proposed.
    left, right = run["diff"]["windows"]
    assert left["diff"] and right["diff"], str(run)
    assert left["lines"] == BASE.splitlines() and right["lines"] == BOTH.splitlines(), str(run)
    # Readable names: no directory for a tab label to shorten ('t///p/b/s/app.py' it was).
    assert re.fullmatch(r"app\.py \[talos p\w+ base\]", left["shown"]), str(run)
    assert re.fullmatch(r"app\.py \[talos p\w+ proposed\]", right["shown"]), str(run)
    assert left["filetype"] == "python" and not right["modifiable"], str(run)

    # :TalosApply 1, then :TalosApply changed the buffer (not the disk); :TalosUndo put it
    # back as it was before the first of them.
    hunk_1 = BASE.replace("return 1", "return 10")
    assert run["apply_hunk"]["lines"] == hunk_1.splitlines(), str(run)
    assert run["apply"]["lines"] == BOTH.splitlines(), str(run)
    assert run["undo"]["lines"] == BASE.splitlines(), str(run)
    assert (ws / "src" / "app.py").read_text() == BASE
    # :TalosUndoTask reached the server for the session's task: nothing left to put back.
    assert "everything it applied is undone already" in run["undo_task"]["note"], str(run)

    # The statusline shows the session's cost: two calls at $0.022.
    assert run["statusline"]["text"] == "talos $0.04", str(run)
    assert run["statusline"]["rendered"] == "talos $0.04", str(run)

    # The other commands.
    assert run["show"]["first"].startswith("# Task t"), str(run)
    assert run["show"]["buftype"] == "nofile" and not run["show"]["modifiable"], str(run)
    assert run["tasks"]["select"]["chosen"].startswith(task["task_id"]), str(run)
    assert any("Tests use pytest" in line for line in run["memory"]["lines"]), str(run)
    assert "Tests use unittest" not in run["forget"]["left"], str(run)
    assert "no open question" in run["questions"]["note"], str(run)
    assert "no task is running" in run["cancel"]["note"], str(run)
    print(
        f"\nNeovim session: {took:.1f} s; task {task['took_ms']:.0f} ms, {task['ticks']} "
        f"ticks, longest gap {task['longest_gap_ms']:.0f} ms"
    )


def test_a_task_on_the_selected_lines_sends_them_with_their_diagnostics(tmp_path, model):
    model.script.append(reply("It returns 2.", delay=0.3))  # about 1.5 s
    run = play(tmp_path, model, "selection")
    took = run["selection"]["took_ms"]
    assert took > 1000 and run["selection"]["command_ms"] < took / 4, str(run)  # returned at once
    (user,) = [m["content"] for m in model.requests[0]["body"]["messages"] if m["role"] == "user"]
    assert user.startswith("what does b return?"), user
    assert "The person is in src/app.py, lines 5-6." in user, user
    assert "def b():\n    return 2" in user and "return 1" not in user, user  # those lines only
    assert "Problems reported there:\n- b is never called" in user, user


def test_a_permission_prompt_is_answered_through_vim_ui_select(tmp_path, model):
    require_sandbox()
    model.script += [
        reply("", [("c1", "run_command", json.dumps({"command": "touch made.txt"}))]),
        reply("made it"),
    ]
    run = play(tmp_path, model, "permission")
    select = run["permission"]["select"]
    assert select["kind"] == "talos_permission", str(run)
    assert select["chosen"] == "Allow once", str(run)
    assert (tmp_path / "ws" / "made.txt").exists(), str(run)


def test_a_choice_made_after_the_prompt_timed_out_is_not_sent_and_denies(tmp_path, model):
    require_sandbox()
    model.script += [
        reply("", [("c1", "run_command", json.dumps({"command": "touch made.txt"}))]),
        reply("not made"),
    ]
    run = play(tmp_path, model, "late")
    late = run["late"]
    assert late["pending_after_close"] == 0, str(run)  # talos/promptClosed dropped it
    assert "already ended" in late["late"] and late["refused"] is None, str(run)
    assert not (tmp_path / "ws" / "made.txt").exists(), str(run)
    (result,) = [m["content"] for m in model.requests[1]["body"]["messages"] if m["role"] == "tool"]
    assert "dismissed: denied" in result, result


def test_hostile_text_cannot_break_the_statusline_or_a_quickfix_entry(tmp_path, model):
    evil = {
        "path": "src/app.py",
        "blocks": [
            {"search": "return 1", "replace": "return '\x1b[31m%s %{execute(\"qa!\")}\u202ecba'"}
        ],
    }
    model.script += [reply("", [("c1", "propose_edit", json.dumps(evil))]), reply("done")]
    run = play(tmp_path, model, "hostile")
    shown = run["statusline"]
    # '%' doubled: the statusline shows the text as it is, and evaluates no item of it.
    assert re.match(r"talos 1▶ \S+ \?1 50% %\{execute", shown["titled_rendered"]), str(run)
    assert "%%{execute" in shown["titled"], str(run)
    assert "\\x1b[31mred" in shown["titled_rendered"], str(run)
    assert "\\nsecond line\\x0d\\u202ertl" in shown["titled_rendered"], str(run)
    for text in (shown["titled"], shown["titled_rendered"]):
        assert not INVISIBLE.findall(text) and "\n" not in text, str(run)
    # A model without a price: tokens, not dollars.
    assert shown["unpriced"] == shown["unpriced_rendered"] == "talos 1▶ 43.5k tok ?1", str(run)
    # An MCP server that failed: counted, so the person looks (talos mcp list says which).
    assert shown["mcp_failed"] == "talos 1▶ 43.5k tok ?1 mcp✗1", str(run)
    (item,) = run["quickfix"]["items"]
    assert item["file"] == "src/app.py" and item["lnum"] == 2, str(run)
    assert "\\x1b[31m%s %{execute" in item["text"] and "\\u202ecba" in item["text"], str(run)
    assert not INVISIBLE.findall(item["text"]) and "\n" not in item["text"], str(run)


def test_setup_uses_vim_lsp_start_where_it_exists_one_client_per_root(tmp_path, model):
    run = play(tmp_path, model, "start_api")
    step = run["start_api"]
    ws, other = str(tmp_path / "ws"), str(tmp_path / "other")
    assert [c["root"] for c in step["calls"]] == [ws, ws, other], str(run)
    assert all(c["bufnr"] == c["current"] for c in step["calls"]), str(run)  # 0.8: current
    assert all(c["name"] == "talos" and c["deferred"] for c in step["calls"]), str(run)
    assert all(c["conversation"] for c in step["calls"]), str(run)  # the chat's events
    assert step["app"] == step["other"] != step["lib"], str(run)


# ------------------------------------------------------------------ static
@pytest.mark.parametrize(
    "cwd, argv",
    [
        (ROOT, ["--config", "clients/neovim/.luacheckrc", "clients/neovim"]),  # as .ci/run runs it
        (PLUGIN, ["."]),  # from the plugin's directory, its .luacheckrc found
    ],
)
def test_luacheck_is_clean(cwd, argv):
    luacheck = require_binary("luacheck", LUACHECK_INSTALL)
    done = subprocess.run(
        [luacheck, "--no-color", *argv], cwd=cwd, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 warnings / 0 errors" in done.stdout, done.stdout


def test_helptags_take_the_help_file_and_help_talos_opens_it(tmp_path):
    nvim = require_binary("nvim", NVIM_INSTALL)
    copy = tmp_path / "talos-plugin"
    shutil.copytree(PLUGIN / "doc", copy / "doc")
    out = tmp_path / "help.txt"
    script = (
        f"set rtp^={copy} | helptags {copy / 'doc'} | help talos | "
        f"call writefile([expand('%:t'), getline('.')], '{out}') | qa!"
    )
    done = subprocess.run(
        [nvim, "--headless", "-u", "NONE", "-i", "NONE", "-c", script],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    tags = {line.split("\t")[0] for line in (copy / "doc" / "tags").read_text().splitlines()}
    for tag in (
        "talos",
        "talos-setup",
        "talos-statusline",
        ":TalosTask",
        ":TalosCancel",
        ":TalosTasks",
        ":TalosShow",
        ":TalosProposals",
        ":TalosApply",
        ":TalosReject",
        ":TalosUndo",
        ":TalosDiff",
        ":TalosQuestions",
        ":TalosMemory",
        ":TalosForget",
        "talos-prompts",
    ):
        assert tag in tags, sorted(tags)
    name, line = out.read_text().splitlines()
    assert name == "talos.txt" and "*talos*" in line, (name, line)


# Neovim APIs newer than 0.7, each allowed only in compat.lua (which guards it).
NEWER = {
    r"vim\.lsp\.start\s*\(": "0.8",
    r"vim\.lsp\.get_clients": "0.10",
    r"vim\.fs\.": "0.8",
    r"vim\.uv\b": "0.10",
    r"vim\.iter": "0.10",
    r"vim\.system": "0.10",
    r"vim\.ringbuf": "0.10",
    r"vim\.lsp\.start\b": "0.8",
    r"client:\w+\(": "0.11",
    r"vim\.version\(": "0.9",
    r"vim\.print": "0.9",
    r"vim\.snippet": "0.10",
    r"vim\.lsp\.buf\.format": "0.8",
    r"nvim_get_option_value|nvim_set_option_value": "0.7.1+/0.10 semantics",
    r"vim\.keycode": "0.10",
    r"vim\.islist|vim\.list_contains|vim\.tbl_isarray": "0.10",
    r"vim\.defaulttable|vim\.split\([^)]*trimempty": "0.9/0.7",
    r"vim\.lsp\.status|LspProgress\b|LspAttach\b|LspDetach\b": "0.8-0.10",
}


def test_no_api_newer_than_neovim_0_7_outside_its_guard():
    files = sorted((PLUGIN / "lua").rglob("*.lua"))
    assert len(files) >= 5
    found = []
    for path in files:
        if path.name == "compat.lua":
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("--", 1)[0]
            for pattern, version in NEWER.items():
                if re.search(pattern, code):
                    found.append(f"{path.name}:{n}: {version}: {line.strip()}")
    assert not found, "\n".join(found)
    compat = (PLUGIN / "lua" / "talos" / "compat.lua").read_text()
    # each newer API in compat.lua is used under a test for it
    assert "if vim.lsp.start then" in compat and "if vim.lsp.get_clients then" in compat
    assert "vim.uv or vim.loop" in compat and "if METHODS then" in compat


def test_without_luacheck_the_reason_is_the_install_command(monkeypatch):
    monkeypatch.setenv("PATH", "")
    monkeypatch.delenv("TALOS_TEST_REQUIRE_ALL", raising=False)
    with pytest.raises(pytest.skip.Exception, match=LUACHECK_INSTALL):
        require_binary("luacheck", LUACHECK_INSTALL)
