"""Code actions that start a task where the person is: "Fix with Talos" on another tool's
diagnostic, "Ask Talos about the selection". Each carries a `talos.task.start` command with
the file, the range and the diagnostic, so the task gets the editor's context. (Actions on
Talos's own proposals come with proposals in the editor.)"""

from __future__ import annotations

from typing import Any

from lsprotocol import types

from ..display import visible
from .review import command

SOURCE = "talos"
TITLE_CHARS = 60


def _range(r: types.Range) -> dict[str, Any]:
    return {
        "start": {"line": r.start.line, "character": r.start.character},
        "end": {"line": r.end.line, "character": r.end.character},
    }


def code_actions(params: types.CodeActionParams) -> list[types.CodeAction]:
    uri = params.text_document.uri
    actions = []
    for diagnostic in params.context.diagnostics:
        if diagnostic.source == SOURCE:
            continue
        message = visible(diagnostic.message, single_line=True)
        short = message if len(message) <= TITLE_CHARS else message[:TITLE_CHARS] + "…"
        origin = (
            f" reported by {visible(diagnostic.source, single_line=True)}"
            if diagnostic.source
            else ""
        )
        title = f"Fix with Talos: {short}"
        actions.append(
            types.CodeAction(
                title=title,
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[diagnostic],
                command=command(
                    title,
                    "talos.task.start",
                    {
                        "prompt": f"Fix this problem{origin}: {message}",
                        "uri": uri,
                        "range": _range(diagnostic.range),
                        "diagnostics": [{"message": message, "source": diagnostic.source}],
                    },
                ),
            )
        )
    selection = params.range
    if selection.start != selection.end:
        title = "Ask Talos about the selection"
        actions.append(
            types.CodeAction(
                title=title,
                kind=types.CodeActionKind.Empty,
                command=command(
                    title,
                    "talos.task.start",
                    {
                        "prompt": "Explain the selected code, and point out any problem in it.",
                        "uri": uri,
                        "range": _range(selection),
                    },
                ),
            )
        )
    return actions
