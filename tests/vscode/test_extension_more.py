"""More of the VS Code extension in the real workbench (code-server, see workbench.py), played
through its UI against the real `talos-ls` and the scripted model, as in test_extension.py
(whose `Person` plays it here too):

1. talos-ls cannot be found: ONE error notification, naming the path tried, the PATH
   searched and `pip install talos-ls`, whose "Show Log" reveals the Talos output; the status
   item in its error state;
2. the key from SecretStorage: "Talos: Set API Key" is a password box; the restarted server
   sends the key to the model, and the key is written to no file under the test's HOME, the
   user-data dir (settings, logs, the Talos output) or code-server's log;
3. a finished task from the status bar's task list ("Open Transcript": the Markdown with the
   prompt and the answer) and in the Talos view, under "Tasks", "done";
4. hostile text stays inert: a prompt with `$(check)` and a `command:` link, an answer with a
   `command:` link: no icon in the task list, no link in the notification, and clicking them
   leaves the workbench running.

Screenshots after every step, and the logs, go to $TALOS_E2E_ARTIFACTS (default
tests/vscode/artifacts/) under each test's name, and to `<tmp_path>/artifacts`; a failure's
message names the step. Needs what test_extension.py needs (it skips without it).
Run: .venv/bin/pytest tests/vscode -m vscode
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from talos_ls.demo.scripted_model import ScriptedModelServer, reply

from . import workbench as wb
from .test_extension import CALC, PRICES, UI_S, Person, artifacts_dir, talos_ls

pytestmark = [pytest.mark.vscode, pytest.mark.slow, pytest.mark.full]

READY = r"^Talos <?\$\d+\.\d{4}$"  # the hubot icon, "Talos", the session cost: nothing more
DONE = re.compile(r"Talos t[0-9a-f]+ done:")  # the server's showMessage when a task ends


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    server = ScriptedModelServer()
    yield server
    server.close()


def base_settings(model_url: str | None) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "workbench.startupEditor": "none",
        "telemetry.telemetryLevel": "off",
        "workbench.tips.enabled": False,
        "extensions.autoCheckUpdates": False,
        "extensions.autoUpdate": False,
        "talos.server.command": talos_ls(),
        "talos.model": "fake-model",
        "talos.prices": PRICES,
        "talos.apiKeyEnv": "OPENAI_API_KEY",
    }
    if model_url:
        settings["talos.baseUrl"] = model_url
    return settings


@contextmanager
def workbench(
    tmp_path: Path,
    name: str,
    settings: dict[str, Any],
    env: dict[str, str] | None = None,
    user_only: dict[str, Any] | None = None,
) -> Iterator[Person]:
    """code-server on a one-file workspace with `settings` as the person's (the machine-scoped
    ones in Remote settings, see wb.CodeServer; `user_only` in User settings), the extension
    installed, a browser on it with every toast recorded, the workbench loaded. Stopped after;
    the logs are copied beside the screenshots."""
    code_server_bin = wb.require_code_server()
    chromium = wb.require_chromium()
    sync_api = wb.require_playwright()
    vsix = wb.require_vsix()
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "calc.py").write_text(CALC)
    code_server = wb.CodeServer(
        code_server_bin, tmp_path / "vscode", settings, env or {}, user_only=user_only
    )
    code_server.install(vsix)
    url = code_server.start(ws)
    try:
        with wb.browser(sync_api, chromium) as page:
            page.add_init_script(wb.TOAST_RECORDER)
            shots = wb.Shots(page, [artifacts_dir(name), tmp_path / "artifacts"])
            person = Person(page, shots, code_server)
            with person.step("workbench"):
                page.goto(f"{url}/?folder={ws}", timeout=UI_S * 1000)
                page.locator(".monaco-workbench .part.statusbar").wait_for(timeout=UI_S * 1000)
                person.wait_for(
                    "a status-bar item with 'Talos'", lambda: person.talos_item().count()
                )
            yield person
            shots.copy(code_server.log_files(), code_server.root)
    finally:
        code_server.stop()


def plain(text: str) -> str:
    """Text as shown: one line, no-break spaces as spaces, zero-width spaces kept."""
    return " ".join(text.replace("\xa0", " ").split())


def start_task(person: Person, prompt: str, model: ScriptedModelServer) -> Any:
    """Starts a task with `prompt` from the palette ("Talos: Start Task"); waits for the model's
    call and the server's "done" notification, which it returns."""
    page = person.page
    calls = len(model.requests)
    person.palette("Talos: Start Task")
    box = person.quick_pick("Talos: Start Task")
    box.locator("input").wait_for(state="visible")
    page.keyboard.type(prompt)
    page.keyboard.press("Enter")
    person.wait_for("the model's request", lambda: len(model.requests) > calls)
    toast = page.locator(".notification-toast").filter(has_text=DONE).first
    toast.wait_for(state="visible", timeout=UI_S * 1000)
    return toast


def toast_buttons(toast: Any) -> list[str]:
    return [plain(t) for t in toast.locator(".monaco-button").all_inner_texts()]


# ----------------------------------------------------------------------- 1. cannot start
def test_cannot_start_one_error_with_the_path_and_the_log(tmp_path):
    missing = tmp_path / "not-installed" / "bin" / "talos-ls"
    settings = {**base_settings(None), "talos.server.command": str(missing)}
    with workbench(tmp_path, "test_cannot_start", settings) as person:
        page = person.page
        toasts = page.locator(".notification-toast").filter(has_text="was not found")

        with person.step("a-error-notification"):
            toasts.first.wait_for(state="visible", timeout=UI_S * 1000)
            toast = toasts.first
            text = plain(toast.inner_text())
            assert str(missing) in text, f"the path tried is not named: {text!r}"
            assert "pip install talos-ls" in text, text
            # the PATH the extension host searched (code-server's, as a login shell gives it)
            assert "PATH searched" in text, text
            host_path = person.code_server.env["PATH"].split(":")
            assert any(d and d in text for d in host_path), (text, host_path)
            # a remote window: the command is set in Remote settings
            assert "Remote settings" in text, text
            assert toast.locator(".codicon-error").count(), "not an error notification"
            assert "Show Log" in toast_buttons(toast), toast_buttons(toast)

        with person.step("b-only-one"):
            time.sleep(5)  # a second notification (a retry, a second failure) would come by now
            recorded = wb.recorded_toasts(page)
            talos = [t for t in recorded if "talos" in t.lower()]
            assert len(talos) == 1, f"{len(talos)} Talos notifications: {recorded}"
            assert toasts.count() == 1, person.notification_texts()

        with person.step("c-status-error"):
            item = person.talos_item()
            person.wait_for(
                f"the status item to read 'Talos' (it shows {person.talos_text()!r})",
                lambda: person.talos_text() == "Talos",
            )
            assert item.locator(".codicon-error").count() == 1, item.inner_html()
            assert not item.locator(".codicon-loading, .codicon-hubot").count(), item.inner_html()
            # the error background: the theme's statusBarItem.errorBackground, as VS Code sets it
            assert "error-kind" in (item.get_attribute("class") or ""), item.get_attribute("class")
            background = item.evaluate("e => getComputedStyle(e).backgroundColor")
            assert background not in ("", "transparent", "rgba(0, 0, 0, 0)"), background
            label = item.locator(".statusbar-item-label")
            aria = label.get_attribute("aria-label") or item.get_attribute("aria-label") or ""
            assert "Talos" in aria, aria

        with person.step("d-show-log"):
            toast.get_by_role("button", name="Show Log", exact=True).click()
            panel = page.locator(".part.panel")
            lines = panel.locator(".monaco-editor .view-lines")

            def output() -> str:
                return plain(" ".join(lines.all_inner_texts())) if panel.is_visible() else ""

            person.wait_for(
                "the Talos output with the not-found text", lambda: "was not found" in output()
            )
            assert str(missing) in output().replace(" ", ""), output()
            shown = plain(
                " ".join(
                    panel.locator("select").evaluate_all(
                        "ss => ss.map((s) => s.options[s.selectedIndex]?.text || '')"
                    )
                )
            )
            assert "Talos" in shown, f"the output panel shows {shown!r}, not the Talos channel"


# -------------------------------------------------------------- 2. the key from SecretStorage
def test_api_key_from_secret_storage_reaches_the_model_and_no_file(tmp_path, model):
    key = f"sk-e2e-secret-{secrets.token_hex(12)}"
    model.script += [reply("Done: nothing to change.")]
    with workbench(tmp_path, "test_api_key", base_settings(model.url)) as person:
        page = person.page
        code_server = person.code_server
        assert not any(k.startswith("OPENAI_") for k in code_server.env), "a key in the env"

        with person.step("a-ready-without-key"):
            person.wait_status(READY, timeout=60)

        with person.step("b-set-key"):
            person.palette("Talos: Set API Key")
            box = person.quick_pick("Talos: Set API Key")
            field = box.locator(".quick-input-box input")
            field.wait_for(state="visible", timeout=UI_S * 1000)
            assert field.get_attribute("type") == "password", field.evaluate("e => e.outerHTML")
            page.keyboard.type(key)
            person.shots("b-key-typed")
            assert key not in plain(box.inner_text()), "the key is shown"
            page.keyboard.press("Enter")

        with person.step("c-restarted"):
            person.wait_for(
                "'API key saved' on the status bar",
                lambda: any("API key saved" in t for t in person.status_texts()),
            )
            person.wait_status(READY, timeout=60)

        with person.step("d-task-with-the-key"):
            start_task(person, "say done", model)
            headers = {k.lower(): v for k, v in model.requests[0]["headers"].items()}
            assert headers.get("authorization") == f"Bearer {key}", (
                f"the model did not get the stored key: {headers.get('authorization', '')[:20]!r}…"
            )

    # code-server stopped: every file written and closed
    needle = key.encode()
    user_data, home = code_server.user_data, code_server.home
    where = {
        "settings.json": user_data / "User" / "settings.json",
        "the Talos output": next(iter(sorted((user_data / "logs").rglob("*Talos*.log"))), None),
        "code-server's log": code_server.log,
        "talos-ls's state": home / ".local" / "state" / "talos",
    }
    for what, path in where.items():
        assert path is not None and path.exists(), (
            f"step 'e-key-in-no-file': no {what} to look in ({path})"
        )
    talos_log = where["the Talos output"].read_text(errors="replace")
    assert "starting" in talos_log, f"not the Talos output: {where['the Talos output']}"
    # code-server's SecretStorage belongs to its browser workbench: the secret is kept by the
    # browser (a probe found it in plain text in no file of Chromium's profile either), so no
    # file here is allowed to hold the key, VS Code's own stores (User/globalStorage/
    # state.vscdb, workspaceStorage) included.
    found = wb.files_containing([tmp_path], needle)
    assert not found, (
        f"step 'e-key-in-no-file': the API key is in plain text in {[str(p) for p in found]}"
    )
    # the HOME and user-data dir were searched: they are in the test's tmp dir
    assert home.is_relative_to(tmp_path) and user_data.is_relative_to(tmp_path)


# ------------------------------------------------- 3. tasks from the status bar and the view
TASK_PROMPT = "summarise calc.py"
ANSWER = "calc.py defines add(a, b), which subtracts."


def test_task_from_the_status_bar_and_the_talos_view(tmp_path, model):
    model.script += [reply(ANSWER)]
    with workbench(tmp_path, "test_tasks_status_bar_and_view", base_settings(model.url)) as person:
        page = person.page

        with person.step("a-task-done"):
            person.wait_status(READY, timeout=60)
            start_task(person, TASK_PROMPT, model)
            person.wait_status(READY)  # nothing running any more

        with person.step("b-status-bar-tasks"):
            page.keyboard.press("Escape")
            person.talos_item().click()
            tasks = person.quick_pick("Talos: Tasks")
            person.wait_for("the task in the list", lambda: person.rows(tasks))
            rows = person.rows(tasks)
            assert len(rows) == 1, rows
            assert rows[0].startswith(TASK_PROMPT) and "done" in rows[0], rows

        with person.step("c-open-transcript"):
            tasks.locator(".quick-input-list .monaco-list-row").first.click()
            actions = person.quick_pick(TASK_PROMPT)
            person.wait_for("the task's actions", lambda: person.rows(actions))
            # a finished task: its transcript, or every change it made undone
            assert person.rows(actions) == ["Open Transcript", "Undo Task"], person.rows(actions)
            actions.locator(".quick-input-list .monaco-list-row").first.click()
            tab = page.locator(".tabs-container .tab.active")
            person.wait_for(
                "the transcript's tab", lambda: re.search(r"t[0-9a-f]+\.md", tab.inner_text())
            )
            text = editor_text(person)
            assert text.startswith("# Task t") and ": done" in text.splitlines()[0], text[:200]
            assert TASK_PROMPT in text, text
            assert ANSWER in text, text

        with person.step("d-talos-view"):
            page.locator(".activitybar .action-label[aria-label^='Talos']").first.click()
            view = page.locator(".pane").filter(
                has=page.locator(".pane-header", has_text="Tasks and Questions")
            )
            view.first.wait_for(state="visible", timeout=UI_S * 1000)
            tree = view.first.locator(".monaco-list-row")

            def tree_rows() -> list[str]:
                return [plain(t) for t in tree.all_inner_texts()]

            person.wait_for(
                "the task in the view", lambda: any(TASK_PROMPT in r for r in tree_rows())
            )
            rows = tree_rows()
            assert "Tasks" in rows, rows
            task = next(r for r in rows if TASK_PROMPT in r)
            assert rows.index(task) == rows.index("Tasks") + 1, f"not under Tasks: {rows}"
            row = tree.filter(has_text=TASK_PROMPT).first
            description = plain(row.locator(".label-description").inner_text())
            assert description.startswith("done"), description


def editor_text(person: Person) -> str:
    """The active editor's text, all of it: its lines are rendered as they scroll into view, so
    they are read from the top down a page at a time."""
    page = person.page
    editor = page.locator(".editor-group-container.active .monaco-editor").first
    editor.wait_for(state="visible", timeout=UI_S * 1000)
    editor.locator(".view-lines").click()
    page.keyboard.press("Control+Home")
    seen: dict[int, str] = {}
    for _ in range(50):
        lines = editor.locator(".view-line").evaluate_all(
            "ls => ls.map((l) => [parseInt(l.style.top), l.textContent])"
        )
        before = len(seen)
        for top, line in lines:
            seen[int(top)] = line.replace("\xa0", " ")
        if len(seen) == before:
            break
        page.keyboard.press("PageDown")
        time.sleep(0.2)
    return "\n".join(seen[k] for k in sorted(seen))


# ------------------------------------------------------------ 4. hostile text stays inert
HOSTILE_PROMPT = "$(check) Approved [click](command:workbench.action.quit)"
HOSTILE_ANSWER = "All good. [Allow](command:workbench.action.quit)"


def test_hostile_text_stays_inert(tmp_path, model):
    model.script += [reply(HOSTILE_ANSWER)]
    with workbench(tmp_path, "test_hostile_text", base_settings(model.url)) as person:
        page = person.page

        with person.step("a-task-done"):
            person.wait_status(READY, timeout=60)
            toast = start_task(person, HOSTILE_PROMPT, model)

        with person.step("b-answer-without-link"):
            message = toast.locator(".notification-list-item-message")
            text = plain(message.inner_text())
            assert "[Allow](" in text and "command:workbench.action.quit" in text, text
            person.shots("b-answer-shown")
            links = message.locator("a")
            assert links.count() == 0, f"a link in the notification: {message.inner_html()}"
            message.get_by_text("Allow", exact=False).first.click()  # where the link would be
            message.click()

        with person.step("c-task-list-without-icon"):
            page.keyboard.press("Escape")
            person.talos_item().click()
            tasks = person.quick_pick("Talos: Tasks")
            person.wait_for("the task in the list", lambda: person.rows(tasks))
            row = tasks.locator(".quick-input-list .monaco-list-row").filter(has_text="Approved")
            assert row.count() == 1, person.rows(tasks)
            person.shots("c-task-row")
            shown = plain(row.first.inner_text()).replace("\u200b", "")
            assert "$(check) Approved [click](command:workbench.action.quit)" in shown, shown
            assert row.first.locator(".codicon-check, .codicon").count() == 0, (
                f"an icon in the task's row: {row.first.inner_html()}"
            )
            row.first.click()
            actions = person.quick_pick()
            person.wait_for("the task's actions", lambda: person.rows(actions))
            title = plain(actions.locator(".quick-input-title").inner_text()).replace("\u200b", "")
            assert "$(check) Approved" in title, title
            assert actions.locator(".quick-input-title .codicon").count() == 0, title
            page.keyboard.press("Escape")

        with person.step("d-still-running"):
            time.sleep(2)
            assert person.code_server.process is not None
            assert person.code_server.process.poll() is None, "code-server exited"
            assert page.locator(".monaco-workbench .part.statusbar").is_visible()
            person.wait_status(READY)
