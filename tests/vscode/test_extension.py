"""The VS Code extension in the real VS Code workbench (code-server, see workbench.py), played
through its UI as a person would, against the real `talos-ls` and the scripted model:

a. the status bar shows the Talos item, ready (a cost, since the model has a price);
b. "Talos: Start Task" from the command palette asks for a prompt; "write the tests" starts a
   task (AGENTS.md and CLAUDE.md disagree on the test framework, so a question comes);
c. the question is a notification with the options, "Skip" and "Open" as buttons; clicking "pytest"
   reaches the server: the open question goes from the status bar, and "Talos: Show Memory"
   rates "Tests use pytest" above "Tests use unittest";
d. the task's two model calls are counted: the status bar shows their cost, $0.0300;
e. "Talos: Show Proposal Diff" opens a diff editor on calc.py;
f. the diff's "Apply Proposal" title button writes the fix to calc.py on disk.

Screenshots after every step (and one of the failure), with code-server's, the extension
host's and the Talos output channel's logs, are kept in $TALOS_E2E_ARTIFACTS (default
tests/vscode/artifacts/, git-ignored), under the test's name, and in the test's tmp dir
(`<tmp_path>/artifacts`). A failure's message names the step, the screenshot and the logs.

Needs code-server and Chromium (clients/vscode/e2e/setup.sh), the playwright package
(pip install -e '.[e2e]') and the built extension (cd clients/vscode && npm ci && npm run
package); the test skips without them, and fails under TALOS_TEST_REQUIRE_ALL=1.
Run: .venv/bin/pytest tests/vscode -m vscode
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from talos_ls.demo.scripted_model import ScriptedModelServer, reply

from . import workbench as wb

pytestmark = [pytest.mark.vscode, pytest.mark.slow, pytest.mark.full]

UI_S = 30.0  # any one thing to appear: generous, a stuck UI fails the step instead of hanging
PROMPT = "write the tests"
FIX = {"path": "calc.py", "blocks": [{"search": "return a - b", "replace": "return a + b"}]}
USAGE = (10_000, 2_500, 0)  # per call: 10k in at $1/M + 2.5k out at $2/M = $0.0150
COST = "$0.0300"  # two calls
PRICES = {"fake-model": {"input": 1.0, "cached_input": 0.1, "output": 2.0}}
CALC = "def add(a, b):\n    return a - b\n"
TEST_CALC = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
RULES = {"AGENTS.md": "- Tests use unittest\n", "CLAUDE.md": "- Tests use pytest\n"}


def talos_ls() -> str:
    script = Path(sys.executable).with_name("talos-ls")
    assert script.exists(), f"no talos-ls next to {sys.executable}: pip install -e ."
    return str(script)


def artifacts_dir(name: str) -> Path:
    base = os.environ.get("TALOS_E2E_ARTIFACTS") or Path(__file__).with_name("artifacts")
    return Path(base) / name


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    server = ScriptedModelServer()
    yield server
    server.close()


class Person:
    """The person at the workbench: the palette, notifications, the status bar. Every wait is
    bounded; `step` names what is being done, so a failure says where it stopped."""

    def __init__(self, page: Any, shots: wb.Shots, code_server: wb.CodeServer) -> None:
        self.page = page
        self.shots = shots
        self.code_server = code_server
        self.steps: list[str] = []

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        self.steps.append(name)
        try:
            yield
        except Exception as error:
            shot = self.shots(f"FAILED-{name}")
            self.shots.copy(self.code_server.log_files(), self.code_server.root)
            pytest.fail(
                f"step {name!r} failed: {error}\n"
                f"screenshot: {shot}; all: {self.shots.dirs}\n"
                f"status bar: {self.status_texts()}\n"
                f"notifications: {self.notification_texts()}\n"
                f"{self.code_server.logs()}",
                pytrace=False,
            )
        self.shots(name)

    # ------------------------------------------------------------- what is shown
    def talos_item(self) -> Any:
        """The extension's status-bar item: its id is <publisher>.<name>.<item id>; failing
        that, the item whose text has "Talos" and that is no status-bar message."""
        by_id = self.page.locator('.statusbar-item[id$=".talos.status"]')
        return (
            by_id
            if by_id.count()
            else self.page.locator(".statusbar-item")
            .filter(has_text=re.compile(r"^\s*Talos"))
            .first
        )

    def talos_text(self) -> str:
        try:
            return " ".join(self.talos_item().inner_text(timeout=2000).split())
        except Exception:
            return ""

    def texts(self, selector: str) -> list[str]:
        try:
            return [" ".join(t.split()) for t in self.page.locator(selector).all_inner_texts()]
        except Exception:
            return []

    def status_texts(self) -> list[str]:
        return self.texts(".statusbar-item")

    def notification_texts(self) -> list[str]:
        return self.texts(".notification-toast")

    def wait_for(self, what: str, check: Callable[[], Any], timeout: float = UI_S) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            found = check()
            if found:
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"not within {timeout:.0f} s: {what}")
            time.sleep(0.2)

    def wait_status(self, pattern: str, timeout: float = UI_S) -> str:
        return self.wait_for(
            f"the Talos status item to match {pattern!r} (it shows {self.talos_text()!r})",
            lambda: self.talos_text() if re.search(pattern, self.talos_text()) else None,
            timeout,
        )

    # --------------------------------------------------------------- what is done
    def palette(self, command: str) -> None:
        """F1, the command's name, Enter on it once it is the first row."""
        widget = self.page.locator(".quick-input-widget")
        self.page.keyboard.press("Escape")  # nothing else has the keyboard
        self.page.locator(".monaco-workbench").click(position={"x": 700, "y": 300})
        self.page.keyboard.press("F1")
        field = widget.locator("input")
        field.wait_for(state="visible", timeout=UI_S * 1000)
        self.page.keyboard.type(command)
        first = widget.locator(".quick-input-list .monaco-list-row").first

        def first_row() -> str:
            return first.inner_text(timeout=1000) if first.count() else ""

        self.wait_for(f"{command!r} as the palette's first row", lambda: command in first_row())
        self.page.keyboard.press("Enter")

    def quick_pick(self, title: str | None = None) -> Any:
        """The open quick pick or input box (waiting for it), optionally by its title."""
        widget = self.page.locator(".quick-input-widget")
        widget.wait_for(state="visible", timeout=UI_S * 1000)
        if title:
            widget.locator(".quick-input-title", has_text=title).wait_for(timeout=UI_S * 1000)
        return widget

    def rows(self, widget: Any) -> list[str]:
        rows = widget.locator(".quick-input-list .monaco-list-row")
        return [" ".join(t.split()) for t in rows.all_inner_texts()]


def write_workspace(ws: Path) -> None:
    ws.mkdir()
    (ws / "calc.py").write_text(CALC)
    (ws / "test_calc.py").write_text(TEST_CALC)
    for name, text in RULES.items():
        (ws / name).write_text(text)


def test_task_question_diff_and_apply_in_vscode(tmp_path, model):
    code_server_bin = wb.require_code_server()
    chromium = wb.require_chromium()
    sync_api = wb.require_playwright()
    vsix = wb.require_vsix()

    ws = tmp_path / "ws"
    write_workspace(ws)
    model.script += [
        reply("", [("c1", "propose_edit", json.dumps(FIX))], usage=USAGE),
        reply("add() now adds; the test passes.", usage=USAGE),
    ]
    settings = {
        "workbench.startupEditor": "none",
        "telemetry.telemetryLevel": "off",
        "workbench.tips.enabled": False,
        "extensions.autoCheckUpdates": False,
        "extensions.autoUpdate": False,
        "talos.server.command": talos_ls(),
        "talos.baseUrl": model.url,
        "talos.model": "fake-model",
        "talos.prices": PRICES,
        "talos.apiKeyEnv": "OPENAI_API_KEY",
    }
    code_server = wb.CodeServer(
        code_server_bin, tmp_path / "vscode", settings, {"OPENAI_API_KEY": "dummy-test-key"}
    )
    code_server.install(vsix)
    started = time.monotonic()
    url = code_server.start(ws)
    try:
        with wb.browser(sync_api, chromium) as page:
            shots = wb.Shots(
                page, [artifacts_dir("test_task_question_diff_and_apply"), tmp_path / "artifacts"]
            )
            person = Person(page, shots, code_server)
            play(person, page, url, ws, model)
            shots.copy(code_server.log_files(), code_server.root)
    finally:
        code_server.stop()
    stores = list((code_server.home / ".local" / "state" / "talos").glob("*.db"))
    assert stores, "talos-ls kept its store outside the test's HOME"
    print(f"VS Code session: {time.monotonic() - started:.1f} s; screenshots in {shots.dirs[0]}")


def play(person: Person, page: Any, url: str, ws: Path, model: ScriptedModelServer) -> None:
    with person.step("workbench"):
        page.goto(f"{url}/?folder={ws}", timeout=UI_S * 1000)
        page.locator(".monaco-workbench .part.statusbar").wait_for(timeout=UI_S * 1000)

    with person.step("a-status-ready"):
        person.wait_for("a status-bar item with 'Talos'", lambda: person.talos_item().count())
        # the server is up and has said its status: a cost (the model is priced), no question
        person.wait_status(r"Talos.*\$0\.0000", timeout=60)

    with person.step("b-start-task"):
        person.palette("Talos: Start Task")
        box = person.quick_pick("Talos: Start Task")
        box.locator("input").wait_for(state="visible")
        page.keyboard.type(PROMPT)
        person.shots("b-prompt-typed")
        page.keyboard.press("Enter")
        person.wait_for("the model's first request", lambda: len(model.requests) >= 1)

    with person.step("c-question"):
        toast = page.locator(".notification-toast").filter(
            has=page.get_by_role("button", name="Skip", exact=True)
        )
        toast.first.wait_for(state="visible", timeout=UI_S * 1000)
        toast = toast.first
        buttons = [" ".join(t.split()) for t in toast.locator(".monaco-button").all_inner_texts()]
        # the options, Skip, and Open (the conversation panel, at the task)
        assert sorted(buttons) == ["Open", "Skip", "pytest", "unittest"], buttons
        person.wait_status(r"Talos.*\?1\b")  # the open question, on the status bar
        person.shots("c-question-shown")
        toast.get_by_role("button", name="pytest", exact=True).click()
        person.wait_for("the question's notification to go", lambda: not toast.is_visible())

    with person.step("c-answer-recorded"):
        person.wait_status(r"^Talos[^?]*$")  # no open question
        person.wait_for("the task's second model call", lambda: len(model.requests) >= 2)
        person.palette("Talos: Show Memory")
        memory = person.quick_pick("Talos: Memory")
        person.wait_for("the facts in Show Memory", lambda: len(person.rows(memory)) >= 2)
        rows = person.rows(memory)
        confidence = {}
        for fact in ("Tests use pytest", "Tests use unittest"):
            row = next((r for r in rows if fact in r), None)
            assert row, f"no {fact!r} among {rows}"
            said = re.search(r"confidence ([0-9.]+)", row)
            assert said, f"no confidence in {row!r}"
            confidence[fact] = float(said.group(1))
        assert confidence["Tests use pytest"] > confidence["Tests use unittest"], rows
        page.keyboard.press("Escape")

    with person.step("d-cost"):
        person.wait_status(r"Talos.*" + re.escape(COST))
        assert len(model.requests) == 2, [r["path"] for r in model.requests]
        # the settings and the key's variable reached talos-ls through the extension
        first = model.requests[0]
        headers = {k.lower(): v for k, v in first["headers"].items()}
        assert headers.get("authorization") == "Bearer dummy-test-key"
        assert first["body"]["model"] == "fake-model"

    with person.step("e-diff"):
        person.palette("Talos: Show Proposal Diff")
        diff = page.locator(".monaco-diff-editor")
        deadline = time.monotonic() + UI_S
        while not diff.first.is_visible():  # one proposal opens at once; several: a pick
            widget = page.locator(".quick-input-widget")
            if widget.is_visible() and person.rows(widget):
                page.keyboard.press("Enter")  # the first row
            assert time.monotonic() < deadline, "no diff editor"
            time.sleep(0.2)
        tab = page.locator(".tabs-container .tab.active")
        tab.wait_for(timeout=UI_S * 1000)
        assert "calc.py" in tab.inner_text(), tab.inner_text()
        # both sides: the base on the left, the proposal on the right
        person.wait_for(
            "the diff's sides",
            lambda: (
                "return a + b"
                in " ".join(diff.first.locator(".modified .view-lines").all_inner_texts()).replace(
                    "\xa0", " "
                )
            ),
        )

    with person.step("f-apply"):
        apply = page.locator(".editor-actions").get_by_role("button", name="Apply Proposal")
        apply.first.wait_for(state="visible", timeout=UI_S * 1000)
        apply.first.click()
        calc = ws / "calc.py"
        person.wait_for(
            "calc.py on disk to have the fix", lambda: "return a + b" in calc.read_text()
        )
        assert calc.read_text() == CALC.replace("a - b", "a + b")
        person.wait_for("the diff to close", lambda: not diff.first.is_visible())
