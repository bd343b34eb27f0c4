"""The VS Code extension's settings and start-up in the real workbench (code-server, see
workbench.py), which is a *remote* window like Remote-SSH, WSL or a dev container: VS Code
applies machine-scoped settings there from Remote settings only.

1. `talos.baseUrl` only in User settings, as a person who followed a local window's set-up
   has it: ONE error notification names it, says Talos is not started and has "Open Remote
   Settings", which opens the Remote settings file; "Start Task" is refused with the same
   button; no request reaches any endpoint (the default one, `$OPENAI_BASE_URL`, records).
   Once the person puts it in Remote settings Talos starts by itself and a task reaches their
   endpoint, and still never the default one.
2. A `talos-ls` that dies at start: ONE error notification with the last lines of its stderr
   (a link in them shown as text), "Show Log" and "Open Settings"; no raw "write EPIPE"; it is
   not restarted; "Show Log" shows the whole stderr.

Screenshots after every step, and the logs, go to $TALOS_E2E_ARTIFACTS (default
tests/vscode/artifacts/) under each test's name, and to `<tmp_path>/artifacts`. Needs what
test_extension.py needs (it skips without it). Run: .venv/bin/pytest --full tests/vscode
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from talos_ls.demo.scripted_model import ScriptedModelServer, reply

from . import workbench as wb
from .test_extension import UI_S
from .test_extension_more import READY, base_settings, plain, start_task, toast_buttons, workbench

pytestmark = [pytest.mark.vscode, pytest.mark.slow, pytest.mark.full]


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    server = ScriptedModelServer()
    yield server
    server.close()


@pytest.fixture
def default_endpoint() -> Iterator[ScriptedModelServer]:
    """What an unset `talos.baseUrl` falls back to ($OPENAI_BASE_URL here): it records every
    request, and none may come."""
    server = ScriptedModelServer()
    yield server
    server.close()


def talos_toasts(person) -> list[str]:
    return [t for t in wb.recorded_toasts(person.page) if "talos" in t.lower()]


# ------------------------------------------------- 1. a User-only baseUrl in a remote window
def test_user_only_base_url_is_reported_and_no_task_starts(tmp_path, model, default_endpoint):
    model.script += [reply("Done: nothing to change.")]
    default_endpoint.script += [reply("this endpoint must never be asked")]
    env = {"OPENAI_BASE_URL": default_endpoint.url, "OPENAI_API_KEY": "dummy-test-key"}
    with workbench(
        tmp_path,
        "test_user_only_base_url",
        base_settings(None),
        env,
        user_only={"talos.baseUrl": model.url},
    ) as person:
        page = person.page
        code_server = person.code_server
        assert "talos.baseUrl" in json.loads(code_server.user_settings.read_text())
        assert "talos.baseUrl" not in json.loads(code_server.remote_settings.read_text())
        assert "talos.server.command" in json.loads(code_server.remote_settings.read_text())
        toasts = page.locator(".notification-toast").filter(has_text="Talos is not started")

        with person.step("a-reported"):
            toasts.first.wait_for(state="visible", timeout=UI_S * 1000)
            toast = toasts.first
            text = plain(toast.inner_text())
            assert "talos.baseUrl" in text and "User settings" in text, text
            assert "default endpoint" in text and "Remote settings" in text, text
            assert toast.locator(".codicon-error").count(), "not an error notification"
            assert toast_buttons(toast) == ["Open Remote Settings"], toast_buttons(toast)
            person.wait_for(
                f"the status item in its warning state (it shows {person.talos_text()!r})",
                lambda: person.talos_item().locator(".codicon-warning").count(),
            )

        with person.step("b-only-one"):
            time.sleep(3)  # a second notification (the server's, a retry) would come by now
            assert len(talos_toasts(person)) == 1, wb.recorded_toasts(page)

        with person.step("c-task-refused"):
            person.palette("Talos: Start Task")
            refused = page.locator(".notification-toast").filter(has_text="no task starts")
            refused.first.wait_for(state="visible", timeout=UI_S * 1000)
            text = plain(refused.first.inner_text())
            assert "talos.baseUrl" in text and "Remote settings" in text, text
            assert toast_buttons(refused.first) == ["Open Remote Settings"]
            box = page.locator(".quick-input-widget .quick-input-title", has_text="Start Task")
            assert not box.is_visible(), "the prompt was asked for although no task may start"
            assert model.requests == [] and default_endpoint.requests == []
            time.sleep(1)  # the toast faded in, for the screenshot

        with person.step("d-open-remote-settings"):
            refused.first.get_by_role("button", name="Open Remote Settings").click()
            tab = page.locator(".tabs-container .tab.active")
            crumbs = page.locator(".editor-group-container.active .breadcrumbs-control")

            def path_shown() -> str:
                return plain(crumbs.first.inner_text()) if crumbs.count() else ""

            person.wait_for(
                f"Machine/settings.json open (it shows {path_shown()!r})",
                lambda: "Machine" in path_shown() and "settings.json" in path_shown(),
            )
            assert "settings.json" in plain(tab.inner_text()), tab.inner_text()

        with person.step("e-moved-to-remote-settings"):
            code_server.set_remote({"talos.baseUrl": model.url})
            person.wait_status(READY, timeout=90)
            person.palette("View: Close All Editors")  # the settings file done with
            tab = page.locator(".tabs-container .tab")
            person.wait_for("the editors to close", lambda: tab.count() == 0)
            start_task(person, "say done", model)
            first = model.requests[0]
            headers = {k.lower(): v for k, v in first["headers"].items()}
            assert headers.get("authorization") == "Bearer dummy-test-key"
            assert default_endpoint.requests == [], [r["path"] for r in default_endpoint.requests]


# ------------------------------------------------------------- 2. a server dying at start
CRASH_LINES = [
    "Traceback (most recent call last):",
    '  File "/opt/talos/bin/talos-ls", line 5, in <module>',
    "ModuleNotFoundError: No module named 'talos_boom' [fix](command:workbench.action.quit)",
]


def crashing_server(tmp_path: Path) -> tuple[Path, Path]:
    """A talos-ls that writes a traceback on stderr and exits 1 before reading anything; each
    run appends a line to the returned counter file."""
    runs = tmp_path / "runs"
    script = tmp_path / "broken-venv" / "bin" / "talos-ls"
    script.parent.mkdir(parents=True)
    lines = "".join(f"printf '%s\\n' {json.dumps(line)} >&2\n" for line in CRASH_LINES)
    script.write_text(f"#!/bin/sh\necho run >> '{runs}'\n{lines}exit 1\n")
    script.chmod(0o755)
    return script, runs


def test_server_dying_at_start_one_notification_with_its_stderr(tmp_path):
    script, runs = crashing_server(tmp_path)
    settings = {**base_settings(None), "talos.server.command": str(script)}
    with workbench(tmp_path, "test_server_dying_at_start", settings) as person:
        page = person.page
        toasts = page.locator(".notification-toast").filter(has_text="stopped as it started")

        with person.step("a-one-notification-with-stderr"):
            toasts.first.wait_for(state="visible", timeout=UI_S * 1000)
            toast = toasts.first
            message = toast.locator(".notification-list-item-message")
            text = plain(message.inner_text()).replace("\u200b", "")
            assert str(script) in text, text
            assert "ModuleNotFoundError: No module named 'talos_boom'" in text, text
            assert "[fix](command:workbench.action.quit)" in text, text
            assert message.locator("a").count() == 0, f"a link: {message.inner_html()}"
            assert "Run it in a terminal" in text and "talos.server.command" in text, text
            assert toast.locator(".codicon-error").count(), "not an error notification"
            assert toast_buttons(toast) == ["Show Log", "Open Settings"], toast_buttons(toast)

        with person.step("b-only-one-and-no-restart"):
            time.sleep(5)  # a restart (1 s back-off) or a raw error would have come by now
            talos = talos_toasts(person)
            assert len(talos) == 1, wb.recorded_toasts(page)
            assert not any("EPIPE" in t for t in wb.recorded_toasts(page)), wb.recorded_toasts(page)
            assert runs.read_text().count("run") == 1, "the server was restarted"
            item = person.talos_item()
            assert item.locator(".codicon-error").count() == 1, item.inner_html()

        with person.step("c-show-log"):
            toast.get_by_role("button", name="Show Log", exact=True).click()
            panel = page.locator(".part.panel")
            lines = panel.locator(".monaco-editor .view-lines")

            def output() -> str:
                return plain(" ".join(lines.all_inner_texts())) if panel.is_visible() else ""

            person.wait_for("the stderr in the Talos output", lambda: "talos_boom" in output())
            assert "Traceback (most recent call last):" in output(), output()
