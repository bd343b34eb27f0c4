"""A server's `elicitation/create`, put to the person through the prompt surface attached
(the terminal, an editor's showMessageRequest, an ACP client): `confirm` for choices, and
`ask_text` for a free-text field where the surface has one. Every prompt says which server
asks. A dismissal anywhere is a decline, never an answer; a field the surface cannot ask (free
text in an editor that only offers buttons) declines the whole request, and it says so. Not
rationed by the question budget: the server is blocked on it, within a task the person
started."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..display import visible

Confirm = Callable[[str, Sequence[str]], Awaitable[str | None]]
AskText = Callable[[str, Sequence[str]], Awaitable[str | None]]

ACCEPT, DECLINE, SKIP = "Accept", "Decline", "Skip"
REQUIRED, EVERY = "Answer the required fields", "Answer every field"
MAX_FIELDS = 20
MAX_OPTIONS = 20
MAX_MESSAGE = 2000


def _said(text: object, limit: int = 300) -> str:
    shown = visible(str(text), single_line=True)
    return shown if len(shown) <= limit else shown[:limit] + "..."


def _choices(prop: dict[str, Any]) -> list[tuple[str, Any]] | None:
    """(label, value) for a field answered by a choice: boolean, enum, oneOf."""
    if prop.get("type") == "boolean":
        return [("yes", True), ("no", False)]
    if isinstance(prop.get("enum"), list):
        names = prop.get("enumNames") if isinstance(prop.get("enumNames"), list) else None
        return [
            (_said(names[i] if names and i < len(names) else v, 80), v)
            for i, v in enumerate(prop["enum"][:MAX_OPTIONS])
        ]
    if isinstance(prop.get("oneOf"), list):
        return [
            (_said(o.get("title", o.get("const")), 80), o.get("const"))
            for o in prop["oneOf"][:MAX_OPTIONS]
            if isinstance(o, dict) and "const" in o
        ]
    return None


async def ask_person(
    server: str, params: Any, confirm: Confirm | None, ask_text: AskText | None
) -> Any:
    """The person's answer as an ElicitResult: accept with the values they gave, or decline
    (dismissed, declined, or not askable here)."""
    from mcp import types

    decline = types.ElicitResult(action="decline")
    if confirm is None:
        return decline
    head = f"The MCP server {_said(server, 40)} asks (during a tool call):"
    message = visible(str(getattr(params, "message", "")))[:MAX_MESSAGE]
    if getattr(params, "mode", "form") == "url":
        text = f"{head}\n{message}\nIt asks you to open: {_said(params.url, 500)}"
        choice = await confirm(text, [ACCEPT, DECLINE])
        return types.ElicitResult(action="accept") if choice == ACCEPT else decline
    schema = params.requestedSchema if isinstance(params.requestedSchema, dict) else {}
    found = schema.get("properties")
    props: dict[str, Any] = found if isinstance(found, dict) else {}
    required = [r for r in schema.get("required", []) if r in props]
    if len(props) > MAX_FIELDS:
        return decline
    if not props:
        choice = await confirm(f"{head}\n{message}", [ACCEPT, DECLINE])
        return types.ElicitResult(action="accept", content={}) if choice == ACCEPT else decline
    listed = "\n".join(
        f"  - {_said(p.get('title') or name, 80)}"
        f"{' (required)' if name in required else ''}: {_said(p.get('description', ''), 160)}"
        for name, p in props.items()
        if isinstance(p, dict)
    )
    options = [REQUIRED, EVERY, DECLINE] if 0 < len(required) < len(props) else [EVERY, DECLINE]
    choice = await confirm(f"{head}\n{message}\nIt asks for:\n{listed}", options)
    if choice not in (REQUIRED, EVERY):
        return decline
    wanted = required if choice == REQUIRED else list(props)
    content: dict[str, Any] = {}
    for name in wanted:
        prop = props[name] if isinstance(props[name], dict) else {}
        label = _said(prop.get("title") or name, 80)
        about = _said(prop.get("description", ""), 300)
        question = f"The MCP server {_said(server, 40)} asks for {label}" + (
            f": {about}" if about else ""
        )
        optional = [] if name in required else [SKIP]
        choices = _choices(prop)
        if prop.get("type") == "array" and isinstance(prop.get("items"), dict):
            choices = _choices(prop["items"])
        if choices is not None:
            labels = [label for label, _ in choices]
            picked = await confirm(question, [*labels, *optional, DECLINE])
            if picked == SKIP and optional:
                continue
            if picked not in labels:
                return decline
            value = choices[labels.index(picked)][1]
            content[name] = [value] if prop.get("type") == "array" else value
            continue
        if ask_text is None:  # a surface of buttons only: a free-text field cannot be asked
            return decline
        reply = await ask_text(f"{question}\n(type the answer; Enter alone dismisses)", [])
        if reply is None or not reply.strip():
            return decline
        kind = prop.get("type")
        try:
            content[name] = (
                int(reply) if kind == "integer" else float(reply) if kind == "number" else reply
            )
        except ValueError:
            return decline
    return types.ElicitResult(action="accept", content=content)
