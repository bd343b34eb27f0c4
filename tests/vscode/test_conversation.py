"""The Talos conversation panel in the real VS Code workbench (code-server, see workbench.py),
played through its UI against the real `talos-ls` and the scripted model:

1. the panel (the Talos view container's "Conversation" webview):
   a. a task typed in its input box streams: the model's first call is held half-way (a gate
      in the scripted stream), and the panel shows the first half and not the second; the
      task shows as running (Send off, Stop on);
   b. the question the rules files raise (AGENTS.md and CLAUDE.md disagree) is a card in the
      panel with its actions as buttons; "pytest" answers it and the card goes;
   c. the rest streams; the Markdown is drawn (strong, inline code, a code block) and the
      hostile parts stay text: no link, image or script from `<script>`, `<img onerror>`,
      `[Apply](command:…)`, `javascript:`, a bidi override; the one "Apply" button is the
      proposal's;
   d. the proposal's Apply writes calc.py; its row says applied;
   e. a follow-up typed in the same box is a new task whose model request carries the first
      request and its answer; its answer shows under it;
   f. "Transcript" opens the task's transcript; no toast came while the panel was in view;
2. with the panel out of view, a permission prompt is ONE "needs you" toast whose "Review…"
   opens a modal with the command on its own lines (detail), "Deny" answers it; the task's
   end is one "done" toast whose "Open" reveals the panel at that task.

Screenshots after every step, and the logs, go to $TALOS_E2E_ARTIFACTS (default
tests/vscode/artifacts/) under each test's name, and to `<tmp_path>/artifacts`; a failure's
message names the step. Needs what test_extension.py needs (it skips without it).
Run: .venv/bin/pytest --full tests/vscode/test_conversation.py
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from talos_ls.demo.scripted_model import ScriptedModelServer, reply

from ..system import require_sandbox
from . import workbench as wb
from .test_extension import FIX, RULES, UI_S, Person
from .test_extension_more import base_settings, plain, workbench

pytestmark = [pytest.mark.vscode, pytest.mark.slow, pytest.mark.full]

GATE_S = 120.0  # the held stream is released by the test; this only ends a hung test
PROMPT = "write the tests"
FIRST = "I will fix **add()** in `calc.py`: it subtracts. "
SECOND = (
    "Then the tests.\n\n"
    "<script>document.title='pwned'</script> <img src=x onerror=\"document.title='img'\">\n\n"
    "[Apply](command:talos.applyProposal) [docs](javascript:alert(1)) "
    "![pixel](https://evil.example/pixel.png)\n\n"
    "abc\u202egnp.exe\n\n"
    "```python\nreturn a + b\n```\n"
)
FINAL = "Fixed: add() now adds, and the tests use pytest."
FOLLOW_UP = "why did it subtract?"
ANSWER2 = "It subtracted because of a typo: `-` for `+`."


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    server = ScriptedModelServer()
    yield server
    server.close()


class Gated(list):
    """A scripted stream that stops after chunk `cut` until `release` is set (`held` is set
    when it gets there): the test sees the panel half-way through an answer."""

    def __init__(self, chunks: list[dict], cut: int) -> None:
        super().__init__(chunks)
        self.cut = cut
        self.held = threading.Event()
        self.release = threading.Event()

    def __iter__(self) -> Iterator[dict]:
        for i, chunk in enumerate(list.__iter__(self)):
            if i == self.cut:
                self.held.set()
                self.release.wait(GATE_S)
            yield chunk


def gated(step: dict, after: str) -> tuple[dict, Gated]:
    """`step` (a `reply`) held once the text `after` has been sent."""
    sent, cut = "", None
    for i, chunk in enumerate(step["stream"]):
        if chunk["choices"]:
            sent += chunk["choices"][0]["delta"].get("content") or ""
        if cut is None and len(sent) >= len(after):
            cut = i + 1
    assert cut is not None and sent.startswith(after)
    stream = Gated(step["stream"], cut)
    return {**step, "stream": stream}, stream


def open_panel(person: Person) -> Any:
    """The Talos view container, and the Conversation webview's page in it (a frame in a
    frame: VS Code's webview host, then the extension's page)."""
    page = person.page
    page.locator(".activitybar .action-label[aria-label^='Talos']").first.click()
    header = page.locator(".pane-header", has_text="Conversation")
    header.first.wait_for(state="visible", timeout=UI_S * 1000)
    frame = page.frame_locator("iframe.webview.ready").first.frame_locator("#active-frame")
    frame.locator("#input").wait_for(state="visible", timeout=UI_S * 1000)
    return frame


def say(person: Person, frame: Any, text: str) -> None:
    """Types `text` in the panel's input box and sends it with Enter."""
    send = frame.locator("#send")
    person.wait_for("Send to be enabled", lambda: send.is_enabled())
    box = frame.locator("#input")
    box.click()
    box.fill(text)
    box.press("Enter")
    person.wait_for("the input box to be emptied (sent)", lambda: box.input_value() == "")


def task_text(section: Any) -> str:
    try:
        return plain(section.locator(".answer").inner_text(timeout=2000))
    except Exception:
        return ""


def messages(request: dict) -> list[dict]:
    return request["body"]["messages"]


def talos_toasts(page: Any) -> list[str]:
    return [t for t in wb.recorded_toasts(page) if re.search(r"Talos (t\w+ \w+:|needs you)", t)]


# ------------------------------------------------------------------------ 1. the panel
def test_conversation_streams_answers_applies_and_follows_up(tmp_path, model):
    first_call, stream = gated(
        reply(FIRST + SECOND, [("c1", "propose_edit", json.dumps(FIX))]), FIRST
    )
    model.script += [first_call, reply(FINAL), reply(ANSWER2)]
    with workbench(tmp_path, "test_conversation", base_settings(model.url)) as person:
        page = person.page
        ws = tmp_path / "ws"
        for name, text in RULES.items():  # read at each task's start
            (ws / name).write_text(text)
        try:
            play(person, page, ws, model, stream)
        finally:
            stream.release.set()


def play(person: Person, page: Any, ws: Any, model: Any, stream: Gated) -> None:
    with person.step("a-panel"):
        person.wait_status(r"Talos.*\$0\.0000", timeout=60)
        frame = open_panel(person)
        hint = frame.locator("#hint")
        person.wait_for("the hint for a new task", lambda: "A new task" in hint.inner_text())

    with person.step("a-streaming"):
        say(person, frame, PROMPT)
        person.wait_for("the model's first call to be held half-way", stream.held.is_set)
        task = frame.locator("section.task").first
        person.wait_for(
            "the first half of the answer in the panel", lambda: "it subtracts" in task_text(task)
        )
        shown = task_text(task)
        assert "Then the tests" not in shown, f"the second half came before it was sent: {shown}"
        assert "add()" in plain(task.locator(".answer strong").first.inner_text())
        assert "write the tests" in plain(task.locator(".request").inner_text())
        assert "Running" in plain(task.locator(".task-end").inner_text())
        assert frame.locator("#send").is_disabled(), "Send is on while the task runs"
        assert frame.locator("#stop").is_visible(), "no Stop while the task runs"

    with person.step("b-question"):
        card = frame.locator(".prompt-card")
        card.first.wait_for(state="visible", timeout=UI_S * 1000)
        buttons = [plain(b) for b in card.first.locator("button").all_inner_texts()]
        assert buttons[-1] == "Skip" and "pytest" in buttons, buttons
        person.shots("b-question-shown")
        card.first.get_by_role("button", name="pytest", exact=True).click()
        person.wait_for("the question's card to go", lambda: card.count() == 0)

    with person.step("c-streamed-and-inert"):
        stream.release.set()
        proposal = task.locator(".proposal")
        proposal.first.wait_for(state="visible", timeout=UI_S * 1000)
        person.wait_for(
            "the task to end", lambda: "Done" in plain(task.locator(".task-end").inner_text())
        )
        shown = task_text(task)
        answer = task.locator(".answer")
        for literal in (
            "<script>document.title='pwned'</script>",
            "onerror=",
            "[Apply](command:talos.applyProposal)",
            "javascript:alert(1)",
            "![pixel](https://evil.example/pixel.png)",
            FINAL,
        ):
            assert literal in shown, f"{literal!r} is not shown as text: {shown}"
        for tag in ("a", "img", "script", "iframe", "style"):
            assert answer.locator(tag).count() == 0, f"a <{tag}> in the answer"
        assert "return a + b" in plain(answer.locator("pre code").inner_text())
        # the bidi override is shown as its code point (the server's `\u202e`), never obeyed
        assert "gnp.exe" in shown and "\u202e" not in answer.inner_text()
        # the one Apply is the proposal's: the model's "[Apply](…)" is text
        applies = task.get_by_role("button", name="Apply", exact=True)
        assert applies.count() == 1, applies.count()
        assert proposal.first.locator("button", has_text="Apply").count() == 1
        scripts = frame.locator("script").evaluate_all(
            "ss => ss.map((s) => s.src ? 'src:' + s.src : 'inline:' + s.textContent)"
        )
        # the page's one script, and the one VS Code puts in every webview: nothing else
        assert [s for s in scripts if s.startswith("src:")] == [
            next(s for s in scripts if s.endswith("/dist/conversation.js"))
        ], scripts
        assert all("acquireVsCodeApi" in s for s in scripts if s.startswith("inline:")), scripts
        assert "calc.py" in plain(proposal.first.inner_text())
        assert "pending" in plain(proposal.first.inner_text())
        assert task.locator(".activity").count() == 0, "an ended task still shows a step"

    with person.step("d-apply"):
        proposal.first.get_by_role("button", name="Apply", exact=True).click()
        calc = ws / "calc.py"
        person.wait_for("calc.py on disk to have the fix", lambda: "a + b" in calc.read_text())
        person.wait_for(
            "the proposal's row to say applied",
            lambda: "applied" in plain(proposal.first.inner_text()),
        )
        assert proposal.first.get_by_role("button", name="Apply", exact=True).count() == 0

    with person.step("e-follow-up"):
        assert "Follow-up to" in plain(frame.locator("#hint").inner_text())
        calls = len(model.requests)
        say(person, frame, FOLLOW_UP)
        person.wait_for("the follow-up's model call", lambda: len(model.requests) > calls)
        second = frame.locator("section.task").nth(1)
        person.wait_for("the follow-up's answer", lambda: "a typo" in task_text(second))
        person.wait_for(
            "the follow-up to end",
            lambda: "Done" in plain(second.locator(".task-end").inner_text()),
        )
        assert "follow-up" in plain(second.locator(".who").inner_text()).lower()
        assert FOLLOW_UP in plain(second.locator(".request").inner_text())
        said = messages(model.requests[-1])
        users = [m["content"] for m in said if m["role"] == "user"]
        answers = [m.get("content") or "" for m in said if m["role"] == "assistant"]
        assert any(PROMPT in u for u in users[:-1]), f"the first request is not sent: {users}"
        assert any(FINAL in a for a in answers), f"the first answer is not sent: {answers}"
        assert FOLLOW_UP in users[-1], users[-1]

    with person.step("f-transcript-and-no-toast"):
        task.get_by_role("button", name="Transcript").click()
        tab = page.locator(".tabs-container .tab.active")
        person.wait_for(
            "the transcript's tab", lambda: re.search(r"t[0-9a-f]+\.md", tab.inner_text())
        )
        assert talos_toasts(page) == [], "a toast while the panel was in view"


# ------------------------------------------------- 2. toasts while the panel is out of view
COMMAND = "touch made.txt"  # a write: asked in the default `ask` mode (echo is not)


def test_needs_you_and_done_toasts_open_the_panel(tmp_path, model):
    require_sandbox()
    model.script += [
        reply("", [("c1", "run_command", json.dumps({"command": COMMAND}))]),
        reply("Not run: you said no."),
    ]
    with workbench(tmp_path, "test_conversation_toasts", base_settings(model.url)) as person:
        page = person.page

        with person.step("a-start-from-the-palette"):
            person.wait_status(r"Talos.*\$0\.0000", timeout=60)
            person.palette("Talos: Start Task")
            box = person.quick_pick("Talos: Start Task")
            box.locator("input").wait_for(state="visible")
            page.keyboard.type("say hello")
            page.keyboard.press("Enter")

        with person.step("b-needs-you"):
            toasts = page.locator(".notification-toast").filter(has_text="Talos needs you")
            toasts.first.wait_for(state="visible", timeout=UI_S * 1000)
            toast = toasts.first
            buttons = [plain(b) for b in toast.locator(".monaco-button").all_inner_texts()]
            assert buttons == ["Review…", "Open"], buttons
            assert COMMAND in plain(toast.inner_text())

        with person.step("c-modal-with-detail"):
            toast.get_by_role("button", name="Review…").click()
            dialog = page.locator(".monaco-dialog-box")
            dialog.wait_for(state="visible", timeout=UI_S * 1000)
            detail = dialog.locator(".dialog-message-detail").inner_text()
            lines = [line for line in detail.splitlines() if line.strip()]
            assert len(lines) >= 2, f"the detail is not on several lines: {detail!r}"
            assert any(COMMAND in line for line in lines), detail
            buttons = [plain(b) for b in dialog.locator(".monaco-button").all_inner_texts()]
            assert "Allow once" in buttons and "Deny" in buttons, buttons
            person.shots("c-modal-shown")
            dialog.get_by_role("button", name="Deny", exact=True).click()
            person.wait_for("the modal to close", lambda: not dialog.is_visible())

        with person.step("d-done-toast"):
            done = page.locator(".notification-toast").filter(
                has_text=re.compile(r"Talos t\w+ done:")
            )
            done.first.wait_for(state="visible", timeout=UI_S * 1000)
            assert "Not run: you said no." in plain(done.first.inner_text())
            person.wait_for("the model's second call", lambda: len(model.requests) >= 2)
            tool = [m["content"] for m in messages(model.requests[1]) if m["role"] == "tool"]
            assert any("denied by you" in t for t in tool), tool
            recorded = talos_toasts(page)
            assert len(recorded) == 2, f"not one needs-you and one done toast: {recorded}"

        with person.step("e-open"):
            done.first.get_by_role("button", name="Open", exact=True).click()
            header = page.locator(".pane-header", has_text="Conversation")
            header.first.wait_for(state="visible", timeout=UI_S * 1000)
            frame = page.frame_locator("iframe.webview.ready").first.frame_locator("#active-frame")
            section = frame.locator("section.task").first
            section.wait_for(state="visible", timeout=UI_S * 1000)
            assert "Not run: you said no." in task_text(section)
            assert "say hello" in plain(section.locator(".request").inner_text())
            assert "Done" in plain(section.locator(".task-end").inner_text())
            assert "You answered: Deny" in plain(section.inner_text())
