"""Proposals in a real editor: headless Neovim (0.7, the oldest the docs name) runs the real
`talos-ls` with the scripted model, and plays the person through `init.lua`: a task proposes an
edit, its diagnostic shows on the hunk's line, "Apply this hunk" changes the buffer by that hunk
only, and an edit made stale by typing is refused, whether the typing came before the apply or
while the edit was on its way (Neovim 0.7 skips such an edit yet answers `applied: true`); a
whole proposal is applied and undone from code actions. One expected failure records typing
lost under the first edit of a buffer, which Neovim does not version-check.

Each step of `init.lua` writes a JSON line; the test asserts on them, and a failure shows them
with Neovim's output and its LSP log."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from talos_ls.demo.scripted_model import ScriptedModelServer, reply

from ..system import require_binary

NVIM_INSTALL = "apt-get install -y neovim"
INIT = Path(__file__).with_name("init.lua")
RUN_S = 120  # generous: a stuck editor or server fails the test instead of hanging it

BASE = "def a():\n    return 1\n\n\ndef b():\n    return 2\n"
HUNK_1 = BASE.replace("return 1", "return 10")  # the first hunk applied, not the second
BOTH = HUNK_1.replace("return 2", "return 20")
TWO_HUNKS = {
    "path": "src/app.py",
    "blocks": [
        {"search": "return 1", "replace": "return 10"},
        {"search": "return 2", "replace": "return 20"},
    ],
}
AGAIN = {"path": "src/app.py", "blocks": [{"search": "return 2", "replace": "return 200"}]}
WARN = 2  # vim.diagnostic.severity.WARN
INFO = 3


@pytest.fixture
def model():
    server = ScriptedModelServer()
    yield server
    server.close()


def server_cmd() -> list[str]:
    """The installed `talos-ls` next to this interpreter, else the module."""
    script = Path(sys.executable).with_name("talos-ls")
    return [str(script)] if script.exists() else [sys.executable, "-m", "talos_ls.server"]


def editor_env(home: Path, config: Path) -> dict[str, str]:
    """Neovim's and so the server's: XDG dirs in tmp, a dummy key, the driver's config."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TALOS_", "XDG_"))}
    env.update(
        {
            "XDG_CONFIG_HOME": str(home / "config"),
            "XDG_STATE_HOME": str(home / "state"),
            "XDG_DATA_HOME": str(home / "data"),
            "XDG_CACHE_HOME": str(home / "cache"),
            "OPENAI_API_KEY": "sk-test-not-a-real-key-000000000000",
            "TALOS_E2E_CONFIG": str(config),
        }
    )
    return env


class Run:
    """One Neovim session's outcome: its steps by name, and all it said for a failure."""

    def __init__(self, steps: list[dict[str, Any]], output: str, home: Path) -> None:
        self.steps = steps
        self.output = output
        self.home = home

    def __getitem__(self, name: str) -> dict[str, Any]:
        found = [s for s in self.steps if s["step"] == name]
        assert found, f"no step {name!r}\n{self}"
        return found[-1]

    def __str__(self) -> str:
        lines = "\n".join(json.dumps(s) for s in self.steps)
        logs = sorted(self.home.rglob("*.log"))
        log = "\n".join(f"--- {p}\n{p.read_text(errors='replace')[-6000:]}" for p in logs)
        return f"--- steps\n{lines}\n--- neovim\n{self.output}\n{log}"


def run_neovim(
    nvim: str, scenario: str, tmp_path: Path, ws: Path, file: Path, model_url: str
) -> Run:
    home = tmp_path / "home"
    results = tmp_path / "steps.jsonl"
    config = tmp_path / "nvim.json"
    config.write_text(
        json.dumps(
            {
                "scenario": scenario,
                "cmd": server_cmd(),
                "root": str(ws),
                "results": str(results),
                "init_options": {
                    "model": "fake-model",
                    "baseUrl": model_url,
                    "storeUrl": "sqlite:///" + str(tmp_path / "talos.db"),
                    "prices": {"fake-model": {"input": 1, "cached_input": 0.5, "output": 2}},
                },
            }
        )
    )
    argv = [nvim, "--headless", "-n", "-i", "NONE", "--noplugin", "-u", str(INIT), str(file)]
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
        os.killpg(process.pid, signal.SIGKILL)  # Neovim and the server it started
        output, _ = process.communicate()
        ended = f"killed after {RUN_S} s"
    steps = (
        [json.loads(line) for line in results.read_text().splitlines()]
        if (results.exists())
        else []
    )
    return Run(steps, f"{ended}\n{output.decode(errors='replace')}", home)


def review(tmp_path: Path, model: ScriptedModelServer, scenario: str, *proposals: dict) -> Run:
    """`scenario` of init.lua played on src/app.py (BASE), the model proposing `proposals`
    one task each; every step done."""
    nvim = require_binary("nvim", NVIM_INSTALL)
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    app = ws / "src" / "app.py"
    app.write_text(BASE)
    for proposal in proposals:
        model.script += [
            reply("", [("c1", "propose_edit", json.dumps(proposal))]),
            reply("proposed"),
        ]
    run = run_neovim(nvim, scenario, tmp_path, ws, app, model.url)
    # pytest.fail, not assert: an expected failure (xfail) is an AssertionError only
    if not run["done"]["ok"] or [s for s in run.steps if s["step"] == "error"]:
        pytest.fail(f"Neovim's session did not complete\n{run}", pytrace=False)
    if app.read_text() != BASE:  # edits go to the buffer, never behind it to the disk
        pytest.fail(f"the file on disk changed\n{run}", pytrace=False)
    return run


def test_a_proposal_reviewed_in_neovim(tmp_path, model):
    run = review(tmp_path, model, "review", TWO_HUNKS, AGAIN)

    # The task's proposal: a diagnostic on each hunk's lines, from Talos.
    proposed = run["propose"]
    pid = proposed["proposal_id"]
    found = proposed["diagnostics"]
    assert [(d["lnum"], d["end_lnum"]) for d in found] == [(1, 2), (5, 6)], str(run)
    assert {d["source"] for d in found} == {"talos"}, str(run)
    assert {d["severity"] for d in found} == {INFO}, str(run)
    assert "change 1 of 2" in found[0]["message"], str(run)

    # Its code actions on the first hunk's line; that hunk applied, and no other, which
    # stays to review (one hunk now, on its line).
    titles = run["actions"]["titles"]
    assert titles[:2] == ["Apply this hunk (1 of 2)", f"Apply {pid} (all 2 changes)"], str(run)
    lenses = run["actions"]["lenses"]  # the same, above each hunk
    first = [[1, "Apply this hunk (1 of 2)"], [1, f"Apply {pid} (all 2 changes)"]]
    assert lenses[:2] == first, str(run)
    assert [5, "Apply this hunk (2 of 2)"] in lenses and len(lenses) == 8, str(run)
    diff = run["actions"]["diff"]  # Neovim 0.7 cannot show a document: only returned
    assert "-    return 1\n+    return 10\n" in diff["diff"], str(run)
    assert diff.get("uri") is None, str(run)
    applied = run["apply_hunk"]
    assert applied["result"]["applied"] is True, str(run)
    assert applied["lines"] == HUNK_1.splitlines(), str(run)
    (rest,) = run["after_apply"]["diagnostics"]
    assert (rest["lnum"], rest["severity"]) == (5, INFO), str(run)
    assert f"Apply {pid}" in run["after_apply"]["actions"], str(run)

    # The person types: the rest turns stale, offers no Apply, and applying it is refused.
    typed = run["typed"]
    assert [(d["lnum"], d["severity"]) for d in typed["diagnostics"]] == [(5, WARN)], str(run)
    assert not any(t.startswith("Apply") for t in typed["actions"]), str(run)
    assert f"Reject {pid}" in typed["actions"], str(run)
    refused = run["apply_stale"]
    assert refused["result"]["applied"] is False, str(run)
    assert refused["result"]["status"] == "stale", str(run)
    assert refused["lines"] == [*HUNK_1.splitlines(), "# typed"], str(run)

    # Typing while the edit is on its way: Neovim skips the edit, the server says so.
    flight = run["apply_in_flight"]
    assert flight["result"]["applied"] is False, str(run)
    assert len(flight["applies"]) == 3, str(run)  # the hunk, the empty edit, then this one
    assert flight["applies"][-1]["typed"] == "# typed in flight", str(run)
    expected = [*HUNK_1.splitlines(), "# typed", "# typed in flight"]
    assert flight["lines"] == expected, str(run)
    assert run["after_in_flight"]["lines"] == expected, str(run)
    assert [d["severity"] for d in run["after_in_flight"]["diagnostics"]] == [WARN], str(run)

    # Each task's answer came as a message (its prompts, dismissed, are in the steps); the
    # server stopped when asked.
    shown = run["messages"]["shown"]
    for step in ("propose", "propose again"):
        assert any(f"Talos {run[step]['task_id']} done" in m for m in shown), str(run)
    assert run["stopped"]["stopped"], str(run)


def test_a_proposal_applied_whole_then_undone_in_neovim(tmp_path, model):
    run = review(tmp_path, model, "apply_all_then_undo", TWO_HUNKS)
    pid = run["propose"]["proposal_id"]
    applied = run["apply_all"]
    assert applied["result"] == {"proposal_id": pid, "applied": True, "status": "applied"}, str(run)
    assert applied["lines"] == BOTH.splitlines(), str(run)
    assert run["applied"]["titles"] == [f"Undo {pid}"], str(run)
    undone = run["undo"]
    assert undone["result"]["status"] == "undone", str(run)
    assert undone["lines"] == BASE.splitlines(), str(run)


def test_typing_on_the_hunk_while_the_first_edit_is_sent_is_not_lost_silently(tmp_path, model):
    run = review(tmp_path, model, "first_edit_in_flight", TWO_HUNKS)
    flight = run["apply_in_flight"]
    assert flight["applies"][0]["edit_version"] == 0, str(run)  # the didOpen's version
    kept = flight["lines"][1] == "    return 1  # mine"
    assert kept or flight["result"]["applied"] is False, str(run)


def test_without_neovim_the_reason_is_the_install_command(monkeypatch):
    monkeypatch.setenv("PATH", "")
    monkeypatch.delenv("TALOS_TEST_REQUIRE_ALL", raising=False)
    assert shutil.which("nvim") is None
    with pytest.raises(pytest.skip.Exception, match=NVIM_INSTALL):
        require_binary("nvim", NVIM_INSTALL)
