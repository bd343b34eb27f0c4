"""Proposals as any LSP client shows them, with no plugin: a diagnostic on each changed range,
code actions and code lenses that apply (all, or one hunk), reject or show the diff, and the
text edits that apply them.

Every position is at the start of a line, or at the end of a last line without an ending (its
length counted in UTF-16 code units, as LSP requires), and lines are counted as editors count
them (`edits.proposals.lines`), so non-ASCII text, astral characters and CRLF files are edited
exactly.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from lsprotocol import types

from ..display import visible
from ..edits.proposals import OPEN, Hunk, Proposal, lines

SOURCE = "talos"
SUMMARY_CHARS = 80


def _position(text_lines: Sequence[str], line: int) -> types.Position:
    """The start of `line`; past the last line, the end of the document."""
    if line < len(text_lines) or not text_lines or text_lines[-1].endswith(("\n", "\r")):
        return types.Position(line=line, character=0)
    utf16 = len(text_lines[-1].encode("utf-16-le")) // 2  # what LSP counts
    return types.Position(line=len(text_lines) - 1, character=utf16)


def line_range(text_lines: Sequence[str], start: int, end: int) -> types.Range:
    """Lines [start, end) of a document as an LSP range."""
    return types.Range(start=_position(text_lines, start), end=_position(text_lines, end))


def text_edits(old: str, new: str) -> list[types.TextEdit]:
    """Whole-line edits that turn `old` into `new`: what `workspace/applyEdit` sends, so only
    the changed lines move (the cursor, folds and marks elsewhere stay)."""
    a, b = lines(old), lines(new)
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    return [
        types.TextEdit(range=line_range(a, i1, i2), new_text="".join(b[j1:j2]))
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        if tag != "equal"
    ]


def _summary(hunk: Hunk) -> str:
    removed, added = len(hunk.old_lines), len(hunk.new_lines)
    first = next((line.strip() for line in hunk.new_lines if line.strip()), "")
    shown = visible(first, single_line=True)
    if len(shown) > SUMMARY_CHARS:
        shown = shown[:SUMMARY_CHARS] + "…"
    change = f"-{removed} +{added} line(s)"
    return f"{change}: {shown}" if shown else change


def _hunks_to_review(proposals: Iterable[Proposal]) -> Iterator[tuple[Proposal, Hunk, list[str]]]:
    """Each hunk of each proposal still shown (open or stale), with its base's lines."""
    for proposal in proposals:
        if proposal.status in (*OPEN, "stale"):
            base = lines(proposal.base_text)
            for hunk in proposal.hunks:
                yield proposal, hunk, base


def diagnostics(proposals: Iterable[Proposal]) -> list[types.Diagnostic]:
    """One per hunk of each pending or stale proposal, on the lines it replaces."""
    out = []
    for proposal, hunk, base in _hunks_to_review(proposals):
        stale = proposal.status == "stale"
        message = (
            f"Talos proposal {proposal.id}, change {hunk.index + 1} of "
            f"{len(proposal.hunks)}: {_summary(hunk)}"
            + (" (stale: the file changed since; it cannot be applied)" if stale else "")
        )
        out.append(
            types.Diagnostic(
                range=line_range(base, hunk.base_start, hunk.base_end),
                message=message,
                severity=types.DiagnosticSeverity.Warning
                if stale
                else types.DiagnosticSeverity.Information,
                source=SOURCE,
                code=proposal.id,
                data={"proposal_id": proposal.id, "hunk": hunk.index},
            )
        )
    return out


def _overlaps(r: types.Range, start: int, end: int) -> bool:
    """Whether lines [start, end) (a point for an insertion) meet the range's lines."""
    return start <= r.end.line and r.start.line <= max(start, end - 1)


def command(title: str, name: str, arguments: dict[str, Any]) -> types.Command:
    """A command of ours, with its one object argument (`daemon.Params`)."""
    return types.Command(title=title, command=name, arguments=[arguments])


def _hunk_command(proposal: Proposal, hunk: Hunk) -> types.Command | None:
    """Apply one hunk: offered when there are several and the proposal can be applied."""
    if proposal.status not in OPEN or len(proposal.hunks) < 2:
        return None
    title = f"Apply this hunk ({hunk.index + 1} of {len(proposal.hunks)})"
    arguments = {"proposal_id": proposal.id, "hunks": [hunk.index]}
    return command(title, "talos.proposal.apply", arguments)


def _proposal_commands(proposal: Proposal, uri: str = "") -> list[types.Command]:
    pid, count = proposal.id, len(proposal.hunks)
    commands = []
    if proposal.status in OPEN:
        every = f" (all {count} changes)" if count > 1 else ""
        commands.append(
            command(f"Apply {pid}{every}", "talos.proposal.apply", {"proposal_id": pid})
        )
    elif proposal.status == "stale" and uri:  # the agent is asked again only when you ask
        prompt = (
            f"Your proposal {pid} for this file went stale: the file changed since. "
            "Propose the same change again, against the file as it is now."
        )
        commands.append(
            command(
                f"Ask Talos to redo {pid} on the file as it is",
                "talos.task.start",
                {"prompt": prompt, "uri": uri},
            )
        )
    return [
        *commands,
        command(f"Reject {pid}", "talos.proposal.reject", {"proposal_id": pid}),
        command(f"Show diff of {pid}", "talos.proposal.diff", {"proposal_id": pid}),
    ]


def code_actions(
    proposals: Iterable[Proposal], selection: types.Range, uri: str = ""
) -> list[types.CodeAction]:
    """For each proposal with a hunk on the selected lines: those hunks, then the proposal;
    and undoing the file's last applied proposal."""
    proposals = list(proposals)
    commands: list[types.Command] = []
    applied = [p for p in proposals if p.undo_text is not None and p.status != "undone"]
    if applied:
        pid = applied[-1].id
        commands.append(command(f"Undo {pid}", "talos.undo", {"proposal_id": pid}))
    for proposal in proposals:
        if proposal.status not in (*OPEN, "stale"):
            continue
        touched = [h for h in proposal.hunks if _overlaps(selection, h.base_start, h.base_end)]
        if touched:
            commands += [c for h in touched if (c := _hunk_command(proposal, h)) is not None]
            commands += _proposal_commands(proposal, uri)
    return [
        types.CodeAction(title=c.title, command=c, kind=types.CodeActionKind.QuickFix)
        for c in commands
    ]


def code_lenses(proposals: Iterable[Proposal], uri: str = "") -> list[types.CodeLens]:
    """Above each hunk: its actions."""
    out = []
    for proposal, hunk, base in _hunks_to_review(proposals):
        at = line_range(base, hunk.base_start, hunk.base_start)
        one = _hunk_command(proposal, hunk)
        commands = ([one] if one else []) + _proposal_commands(proposal, uri)
        out += [types.CodeLens(range=at, command=c) for c in commands]
    return out
