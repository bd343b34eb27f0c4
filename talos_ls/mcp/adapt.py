"""MCP tools as the model sees them, and their results as it reads them.

A server's tool `query` becomes `mcp__<server>__query` with its JSON schema, bounded: at most
MAX_TOOLS per server, all of them within MAX_SERVER_SCHEMAS bytes of the model's context, a
schema of at most MAX_SCHEMA bytes, a description of at most
MAX_DESCRIPTION characters with every control character escaped (`display.visible`) and
labelled as the server's words. A server that offers more, or bigger, is cut and that is
reported. A name the model's API cannot carry (`[A-Za-z0-9_-]`, 64 characters) is left out.

Results: text as it is; structured content as JSON; a resource link or an embedded resource
named (its text when it has some); an image or audio as a short note. The caller
(`agent/tools.py`) redacts secrets and caps the whole like every tool result.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..display import visible

PREFIX = "mcp__"
MAX_TOOLS = 100
# Of the model's context, what one server's tools may take (their schemas as sent, about
# 4 characters a token): past it, its later tools are left out.
MAX_SERVER_SCHEMAS = 64 * 1024
MAX_PAGES = 10
MAX_SCHEMA = 16 * 1024
MAX_DESCRIPTION = 1024
MAX_PARTS = 50
MAX_PART_CHARS = 200_000  # of one text part, before the whole is capped by the caller
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True)
class ToolSpec:
    server: str
    name: str  # as the server names it
    full: str  # mcp__server__name, as the model names it
    description: str
    parameters: dict[str, Any]

    def schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.full,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


def full_name(server: str, tool: str) -> str:
    return f"{PREFIX}{server}__{tool}"


def _parameters(schema: object) -> dict[str, Any] | None:
    """The tool's input schema if it is a JSON object schema within MAX_SCHEMA bytes."""
    if not isinstance(schema, dict):
        return {"type": "object", "properties": {}}
    if len(json.dumps(schema)) > MAX_SCHEMA:
        return None
    out = dict(schema)
    out.setdefault("type", "object")
    out.setdefault("properties", {})
    return out if out["type"] == "object" else None


def spec_of(server: str, tool: Any) -> ToolSpec | str:
    """A ToolSpec for one of the server's tools, or why it is left out."""
    name = tool.name if isinstance(tool.name, str) else ""
    full = full_name(server, name)
    if not TOOL_NAME.fullmatch(full):
        return f"a tool name that cannot be offered ({visible(name[:60], single_line=True)!r})"
    params = _parameters(tool.inputSchema)
    if params is None:
        return f"the tool {name}: its schema is not an object within {MAX_SCHEMA // 1024} KB"
    said = visible(tool.description or "", single_line=True)
    if len(said) > MAX_DESCRIPTION:
        said = said[:MAX_DESCRIPTION] + " [...]"
    description = f"[MCP server {server}] {said}".strip()
    return ToolSpec(server, name, full, description, params)


def _page(cursor: str) -> Any:
    from mcp import types

    return types.PaginatedRequestParams(cursor=cursor)


async def adapt_tools(server: str, session: Any) -> tuple[list[ToolSpec], str]:
    """The server's tools, bounded, and what was left out (one line; "" when nothing)."""
    specs: list[ToolSpec] = []
    offered = 0
    left: list[str] = []
    cursor = None
    room = MAX_SERVER_SCHEMAS
    over = 0
    for _ in range(MAX_PAGES):
        page = await (session.list_tools(params=_page(cursor)) if cursor else session.list_tools())
        for tool in page.tools:
            offered += 1
            if len(specs) >= MAX_TOOLS:
                continue
            spec = spec_of(server, tool)
            if isinstance(spec, str):
                left.append(spec)
                continue
            size = len(json.dumps(spec.schema()))
            if size > room:
                over += 1
                continue
            room -= size
            specs.append(spec)
        cursor = page.nextCursor
        if not cursor or offered > MAX_TOOLS:
            break
    said = []
    if offered > MAX_TOOLS:
        said.append(f"it offered {offered}{'+' if cursor else ''} tools: only {MAX_TOOLS} are used")
    if over:
        said.append(f"{over} left out: its tools' schemas passed {MAX_SERVER_SCHEMAS // 1024} KB")
    if left:
        said.append(f"{len(left)} left out ({left[0]}{'...' if len(left) > 1 else ''})")
    return specs, "; ".join(said)


def _said_already(structured: object, parts: list[str]) -> bool:
    """Whether the text parts carry the structured content already (the spec asks servers
    to send it as JSON text too; some send its one string value as the text)."""
    values = list(structured.values()) if isinstance(structured, dict) else []
    for part in parts:
        try:
            if json.loads(part) == structured:
                return True
        except ValueError:
            pass
        if values == [part]:
            return True
    return False


def render(result: Any) -> tuple[str, bool]:
    """A CallToolResult as text for the model, and whether it is an error."""
    parts: list[str] = []
    content = list(getattr(result, "content", None) or [])
    for block in content[:MAX_PARTS]:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(str(block.text)[:MAX_PART_CHARS])
        elif kind in ("image", "audio"):
            size = len(getattr(block, "data", "") or "") * 3 // 4
            parts.append(f"[{kind}: {visible(str(block.mimeType))}, about {size} bytes, not shown]")
        elif kind == "resource_link":
            parts.append(f"[resource link: {visible(str(block.name))} {visible(str(block.uri))}]")
        elif kind == "resource":
            res = block.resource
            text = getattr(res, "text", None)
            if isinstance(text, str):
                parts.append(f"[resource {visible(str(res.uri))}]\n{text[:MAX_PART_CHARS]}")
            else:
                parts.append(f"[resource {visible(str(res.uri))}: binary, not shown]")
        else:
            parts.append(f"[{visible(str(kind))} content, not shown]")
    if len(content) > MAX_PARTS:
        parts.append(f"[{len(content) - MAX_PARTS} more parts not shown]")
    structured = getattr(result, "structuredContent", None)
    if structured is not None and not _said_already(structured, parts):
        text = json.dumps(structured, ensure_ascii=False)[:MAX_PART_CHARS]
        parts.append(f"structured content: {text}")
    failed = bool(getattr(result, "isError", False))
    return "\n".join(parts) or "(no content)", failed
