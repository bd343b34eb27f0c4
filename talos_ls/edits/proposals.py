"""Proposed edits: the agent never writes a file; it proposes, and the person applies.

A proposal holds the file's base content (and its hash, and the editor's document version when
known), the proposed content, and the hunks between them. It can be applied whole or hunk by
hunk, rejected, marked stale when its base changes underneath it (a stale proposal is never
applied: the person's edits would be lost), and undone while the file is still exactly as the
proposal left it. Proposals compute text; writing it is the caller's business (through the
workspace sandbox, or the editor's `workspace/applyEdit`).
"""

from __future__ import annotations

import builtins
import difflib
import hashlib
import re
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

KEEP_APPLIED = 20
OPEN = ("pending", "partly_applied")  # what can still be applied
STATUSES = ("pending", "partly_applied", "applied", "rejected", "stale", "undone")


class ProposalError(ValueError):
    """A proposal that cannot be made or used; the message says why (and goes to the model
    when the model made it)."""


_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def lines(text: str) -> list[str]:
    """`text` cut into lines as editors count them (LSP: after `\n`, `\r\n` or a lone `\r`),
    each with its ending. `str.splitlines` also cuts at form feeds and U+2028, which would put
    a hunk on another line than the one the editor shows."""
    return _LINE.findall(text)


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Hunk:
    index: int
    base_start: int  # 0-based line index in the base
    base_end: int  # exclusive
    old_lines: tuple[str, ...]
    new_lines: tuple[str, ...]


@dataclass
class Proposal:
    id: str
    path: str
    base_text: str
    new_text: str
    base_hash: str
    hunks: list[Hunk]
    version: int | None = None
    task_id: str | None = None
    status: str = "pending"
    applied_hunks: tuple[int, ...] = ()
    applied_hash: str | None = None
    undo_text: str | None = None  # the file before the last application

    def text_with(self, hunks: Sequence[int] | None = None) -> str:
        """The base with the chosen hunks applied (all when None)."""
        chosen = set(range(len(self.hunks)) if hunks is None else hunks)
        unknown = chosen - set(range(len(self.hunks)))
        if unknown:
            raise ProposalError(f"proposal {self.id} has no hunk(s) {sorted(unknown)}")
        text = lines(self.base_text)
        for hunk in sorted(self.hunks, key=lambda h: h.base_start, reverse=True):
            if hunk.index in chosen:
                text[hunk.base_start : hunk.base_end] = hunk.new_lines
        return "".join(text)

    def diff(self) -> str:
        return "".join(
            difflib.unified_diff(
                lines(self.base_text),
                lines(self.new_text),
                fromfile=f"a/{self.path}",
                tofile=f"b/{self.path}",
            )
        )


def _hunks(base: str, new: str) -> list[Hunk]:
    a, b = lines(base), lines(new)
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    hunks: list[Hunk] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            hunks.append(Hunk(len(hunks), i1, i2, tuple(a[i1:i2]), tuple(b[j1:j2])))
    return hunks


def apply_blocks(text: str, blocks: Sequence[tuple[str, str]], path: str = "the file") -> str:
    """Search/replace blocks, in order; each search text must occur exactly once."""
    for n, (search, replace) in enumerate(blocks, 1):
        if not search:
            raise ProposalError(f"block {n}: the search text is empty")
        count = text.count(search)
        if count != 1:
            where = "does not occur" if count == 0 else f"occurs {count} times"
            raise ProposalError(
                f"block {n}: the search text {where} in {path}; it must match exactly once "
                "(copy it from the file, with enough context to be unique)"
            )
        text = text.replace(search, replace, 1)
    return text


@dataclass
class ProposalBook:
    """Every proposal of a session, by id. Safe to share between threads."""

    _items: dict[str, Proposal] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def create(
        self,
        path: str,
        base_text: str,
        new_text: str,
        *,
        version: int | None = None,
        task_id: str | None = None,
    ) -> Proposal:
        if base_text == new_text:
            raise ProposalError(f"the proposed content of {path} is the same as the file")
        proposal = Proposal(
            id="p" + uuid.uuid4().hex[:12],
            path=path,
            base_text=base_text,
            new_text=new_text,
            base_hash=content_hash(base_text),
            hunks=_hunks(base_text, new_text),
            version=version,
            task_id=task_id,
        )
        with self._lock:
            self._items[proposal.id] = proposal
        return proposal

    def get(self, proposal_id: str) -> Proposal:
        with self._lock:
            proposal = self._items.get(proposal_id)
        if proposal is None:
            raise ProposalError(f"no proposal {proposal_id!r}")
        return proposal

    def list(self, path: str | None = None) -> list[Proposal]:
        with self._lock:
            items = list(self._items.values())
        return [p for p in items if path is None or p.path == path]

    def base_changed(self, path: str, current_text: str) -> builtins.list[Proposal]:
        """The file changed (an edit in the editor, a write on disk): pending proposals whose
        base it no longer is become stale. Returns them."""
        current = content_hash(current_text)
        stale = []
        with self._lock:
            for p in self._items.values():
                if p.path == path and p.status in OPEN and p.base_hash != current:
                    p.status = "stale"
                    stale.append(p)
        return stale

    def apply(self, proposal_id: str, current_text: str, hunks: Sequence[int] | None = None) -> str:
        """The file's new content. Refused unless the proposal is open (pending, or partly
        applied) and the file is still its base; the caller writes it and calls `applied`."""
        proposal = self.get(proposal_id)
        if proposal.status not in OPEN:
            raise ProposalError(f"proposal {proposal_id} is {proposal.status}, not pending")
        if content_hash(current_text) != proposal.base_hash:
            proposal.status = "stale"
            raise ProposalError(
                f"{proposal.path} changed since proposal {proposal_id} was made; it is stale"
            )
        return proposal.text_with(hunks)

    def applied(self, proposal_id: str, written_text: str, hunks: Sequence[int] | None) -> None:
        """Some hunks landed: the rest stay to review, against the file as it now is (partly
        applied); all of them: applied. Either way the last application can be undone."""
        proposal = self.get(proposal_id)
        proposal.undo_text = proposal.base_text
        proposal.applied_hash = content_hash(written_text)
        proposal.applied_hunks = tuple(range(len(proposal.hunks)) if hunks is None else hunks)
        if written_text == proposal.new_text:
            proposal.status = "applied"
            return
        proposal.status = "partly_applied"
        proposal.base_text, proposal.base_hash = written_text, proposal.applied_hash
        proposal.hunks = _hunks(written_text, proposal.new_text)

    def reject(self, proposal_id: str) -> Proposal:
        proposal = self.get(proposal_id)
        if proposal.status not in (*OPEN, "stale"):
            raise ProposalError(f"proposal {proposal_id} is {proposal.status}; nothing to reject")
        proposal.status = "rejected"
        return proposal

    def prune(self, keep_applied: int = KEEP_APPLIED) -> None:
        """Settled proposals leave memory (a daemon runs for weeks): rejected and undone ones
        at once, applied ones beyond the last `keep_applied` (those stay undoable)."""
        with self._lock:
            for pid in [p.id for p in self._items.values() if p.status in ("rejected", "undone")]:
                del self._items[pid]
            applied = [p.id for p in self._items.values() if p.status == "applied"]  # settled
            for pid in applied[: max(0, len(applied) - keep_applied)]:
                del self._items[pid]

    def undo(self, proposal_id: str, current_text: str) -> str:
        """The base content back, if the file is still exactly as the proposal left it."""
        proposal = self.get(proposal_id)
        if proposal.undo_text is None or proposal.status not in ("applied", "partly_applied"):
            raise ProposalError(f"proposal {proposal_id} is {proposal.status}, not applied")
        if content_hash(current_text) != proposal.applied_hash:
            raise ProposalError(
                f"{proposal.path} changed after proposal {proposal_id} was applied; undoing "
                "would lose those changes"
            )
        proposal.status = "undone"
        return proposal.undo_text
