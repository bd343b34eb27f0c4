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
import contextlib
import dataclasses
import difflib
import hashlib
import re
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import TalosError

if TYPE_CHECKING:
    from ..store import Store

KEEP_APPLIED = 20
OPEN = ("pending", "partly_applied")  # what can still be applied
# what an undo takes back, when some of it was applied (`undo_text` set)
UNDOABLE = ("applied", "partly_applied", "stale", "rejected")
STATUSES = ("pending", "partly_applied", "applied", "rejected", "stale", "undone")


class ProposalError(TalosError):
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
    created_at: float = field(default_factory=time.time)

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


class ProposalBook:
    """The proposals of one agent (a workspace), by id. Safe to share between threads.

    With a store, every proposal is written through and every change of status is one atomic
    claim there (`Store.proposal_claim`): a restarted server finds the pending ones, two servers
    on one workspace see the same states, and of two trying to apply one proposal exactly one
    can. Without a store (tests, one-shot runs) the same rules hold in memory."""

    def __init__(self, store: Store | None = None, agent_id: str = "") -> None:
        self.store = store
        self.agent_id = agent_id
        self._items: dict[str, Proposal] = {}
        self._lock = threading.Lock()
        self.moved: set[str] = set()  # found moved elsewhere since the last `load`

    # ------------------------------------------------------------ storage
    def _row(self, p: Proposal) -> dict[str, Any]:
        fields = {f.name: getattr(p, f.name) for f in dataclasses.fields(Proposal)}
        return _stored(fields, agent_id=self.agent_id, updated_at=time.time())

    def _load(self, row: dict[str, Any]) -> Proposal:
        """The cached proposal, brought up to the stored row (another server may have moved
        it), or a new one."""
        fields = {f.name: row[f.name] for f in dataclasses.fields(Proposal) if f.name != "id"}
        fields.update(
            hunks=[Hunk(**h) for h in row["hunks"]], applied_hunks=tuple(row["applied_hunks"])
        )
        with self._lock:
            known = self._items.get(row["id"])
            if known is None:
                known = self._items[row["id"]] = Proposal(id=row["id"], **fields)
            else:
                for name, value in fields.items():
                    setattr(known, name, value)
        return known

    def _change(self, p: Proposal, from_statuses: Sequence[str], **updates: Any) -> None:
        """One atomic step: `updates` land iff the status is one of `from_statuses`."""
        if self.store is None:
            with self._lock:
                if p.status not in from_statuses:
                    raise ProposalError(f"proposal {p.id} is {p.status}")
                for name, value in updates.items():
                    setattr(p, name, value)
            return
        stored = _stored(updates, updated_at=time.time())
        row = self.store.proposal_claim(p.id, from_statuses, stored)
        if row is None:
            current = self.store.proposal_get(p.id)
            if current is not None:  # moved by another server: shown by the next `load`
                self.moved.add(self._load(current).id)
            raise ProposalError(f"proposal {p.id} is {p.status} (changed elsewhere)")
        self._load(row)

    # ------------------------------------------------------------ reading
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
        if self.store is not None:
            self.store.proposal_put(self._row(proposal))
        with self._lock:
            self._items[proposal.id] = proposal
        return proposal

    def get(self, proposal_id: str) -> Proposal:
        with self._lock:
            proposal = self._items.get(proposal_id)
        if proposal is not None:
            return proposal
        row = self.store.proposal_get(str(proposal_id)) if self.store is not None else None
        if row is None or row["agent_id"] != self.agent_id:
            raise ProposalError(f"no proposal {proposal_id!r}")
        return self._load(row)

    def list(self, path: str | None = None) -> builtins.list[Proposal]:
        """Oldest first, from memory (code actions ask often): what this book has made,
        loaded (`load`) or changed. Every change still goes through the store's claim."""
        with self._lock:
            items = builtins.list(self._items.values())
        return [p for p in items if path is None or p.path == path]

    def load(self, settled: bool = True) -> builtins.list[Proposal]:
        """Take in the store's proposals: on start, the open ones and recent settled ones an
        earlier server left; later (`settled=False`), what another server on the workspace
        made or moved (memory forgets settled proposals on purpose: those it does not hold
        stay out). Returns the proposals new here or changed (status or applied hunks), and
        those a failed claim found `moved`. Blocking: call it off the event loop."""
        if self.store is None:
            return []
        with self._lock:
            known = {pid: (p.status, p.applied_hash) for pid, p in self._items.items()}
            moved, self.moved = self.moved, set()
        return [
            self._load(row)
            for row in self.store.proposal_list(self.agent_id)
            if row["id"] in moved
            or (
                known.get(row["id"]) != (row["status"], row["applied_hash"])
                and (settled or row["id"] in known or row["status"] in OPEN)
            )
        ]

    def of_task(self, task_id: str) -> builtins.list[Proposal]:
        """Every proposal task `task_id` made in this workspace, oldest first: from the store
        when there is one (memory forgets settled proposals; the store keeps them across
        restarts), else from memory. Blocking: call it off the event loop."""
        if self.store is None:
            return [p for p in self.list() if p.task_id == task_id]
        rows = self.store.proposal_list(self.agent_id)
        return [self._load(row) for row in rows if row["task_id"] == task_id]

    # ------------------------------------------------------------ changes
    def base_changed(self, path: str, current_text: str) -> builtins.list[Proposal]:
        """The file changed (an edit in the editor, a write on disk): open proposals whose
        base it no longer is become stale. Returns them."""
        current = content_hash(current_text)
        stale = []
        for p in self.list(path):
            if p.status in OPEN and p.base_hash != current and self._reload(p).base_hash != current:
                with contextlib.suppress(ProposalError):  # moved on elsewhere meanwhile
                    self._change(p, OPEN, status="stale")
                    stale.append(p)
        return stale

    def _reload(self, p: Proposal) -> Proposal:
        """`p` brought up to the store before it is judged stale: another server may have
        applied some of its hunks, which moves its base to what the file now is (a change
        found is shown by the next `load`)."""
        row = self.store.proposal_get(p.id) if self.store is not None else None
        if row is not None and (row["status"], row["applied_hash"]) != (p.status, p.applied_hash):
            self.moved.add(self._load(row).id)
        return p

    def apply(self, proposal_id: str, current_text: str, hunks: Sequence[int] | None = None) -> str:
        """The file's new content. Refused unless the proposal is open (pending, or partly
        applied) and the file is still its base; the caller claims it with `applied`, writes
        it, and `revert`s the claim if the write failed."""
        proposal = self.get(proposal_id)
        if content_hash(current_text) != proposal.base_hash:
            self._reload(proposal)
        if proposal.status not in OPEN:
            raise ProposalError(f"proposal {proposal_id} is {proposal.status}, not pending")
        if content_hash(current_text) != proposal.base_hash:
            with contextlib.suppress(ProposalError):
                self._change(proposal, OPEN, status="stale")
            raise ProposalError(
                f"{proposal.path} changed since proposal {proposal_id} was made; it is stale"
            )
        return proposal.text_with(hunks)

    def applied(
        self, proposal_id: str, written_text: str, hunks: Sequence[int] | None
    ) -> dict[str, Any]:
        """Claim the application (atomic: of two claims one fails). Some hunks: the rest stay
        to review against the file as it will be (partly applied); all: applied. Either way
        the application can be undone, to the file before the FIRST of them (an undo after
        some hunks, then the rest, puts back the file the proposal was made on). Returns what
        `revert` needs."""
        proposal = self.get(proposal_id)
        before = {name: getattr(proposal, name) for name in _APPLY_FIELDS}
        first = proposal.base_text if proposal.undo_text is None else proposal.undo_text
        updates: dict[str, Any] = {
            "undo_text": first,
            "applied_hash": content_hash(written_text),
            "applied_hunks": tuple(range(len(proposal.hunks)) if hunks is None else hunks),
            "status": "applied",
        }
        if written_text != proposal.new_text:
            updates.update(
                status="partly_applied",
                base_text=written_text,
                base_hash=updates["applied_hash"],
                hunks=_hunks(written_text, proposal.new_text),
            )
        self._change(proposal, OPEN, **updates)
        return before

    def revert(self, proposal_id: str, before: dict[str, Any]) -> None:
        """The write of a claimed application (or undo) failed: the proposal is as it was."""
        proposal = self.get(proposal_id)
        with contextlib.suppress(ProposalError):
            self._change(proposal, (proposal.status,), **before)

    def reject(self, proposal_id: str) -> Proposal:
        proposal = self.get(proposal_id)
        if proposal.status not in (*OPEN, "stale"):
            raise ProposalError(f"proposal {proposal_id} is {proposal.status}; nothing to reject")
        self._change(proposal, (*OPEN, "stale"), status="rejected")
        return proposal

    def undo(self, proposal_id: str, current_text: str) -> str:
        """The file before the proposal's first application, if the file is still exactly as
        the last one left it; otherwise ProposalError names the lines changed since. Some
        hunks applied and the rest gone stale or rejected: those hunks are undone too."""
        proposal = self.get(proposal_id)
        if proposal.undo_text is None or proposal.status not in UNDOABLE:
            raise ProposalError(f"proposal {proposal_id} is {proposal.status}, not applied")
        if content_hash(current_text) != proposal.applied_hash:
            # What the last application left: all of it, or the new base of the rest.
            left = proposal.new_text if proposal.status == "applied" else proposal.base_text
            raise ProposalError(
                f"{proposal.path} changed after proposal {proposal_id} was applied "
                f"({_changed_lines(left, current_text)}); undoing would lose those changes, "
                "so the file is left as it is"
            )
        undo_text = proposal.undo_text
        self._change(proposal, UNDOABLE, status="undone")
        return undo_text

    def forget_settled(self, keep_applied: int = KEEP_APPLIED) -> None:
        """Settled proposals leave memory (a daemon runs for weeks): rejected and undone ones
        at once, applied ones beyond the last `keep_applied` (those stay undoable). Memory
        only, so cheap enough to do before a task's end is reported: what a list shows then
        does not depend on when a background job ran."""
        with self._lock:
            for pid in [p.id for p in self._items.values() if p.status in ("rejected", "undone")]:
                del self._items[pid]
            applied = [p.id for p in self._items.values() if p.status == "applied"]
            for pid in applied[: max(0, len(applied) - keep_applied)]:
                del self._items[pid]

    def prune(self, keep_applied: int = KEEP_APPLIED) -> None:
        """`forget_settled`, and in the store settled ones beyond the newest `keep_applied`
        are deleted (blocking: off the event loop)."""
        if self.store is not None:
            self.store.proposal_prune(self.agent_id, keep_applied)
        self.forget_settled(keep_applied)


def _changed_lines(before: str, after: str) -> str:
    """Which lines of `after` differ from `before`, for a person: "line 3", "lines 3-5 and 9"."""
    changed = []
    matcher = difflib.SequenceMatcher(None, lines(before), lines(after), autojunk=False)
    for tag, _, _, start, end in matcher.get_opcodes():
        if tag != "equal":
            first, last = start + 1, max(start + 1, end)
            changed.append(str(first) if first == last else f"{first}-{last}")
    if not changed:
        return "its line endings or encoding"
    shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
    return ("line " if changed == [changed[0]] and "-" not in changed[0] else "lines ") + shown


_APPLY_FIELDS = (
    "status",
    "base_text",
    "base_hash",
    "hunks",
    "applied_hunks",
    "applied_hash",
    "undo_text",
)


def _stored(fields: dict[str, Any], **more: Any) -> dict[str, Any]:
    """Proposal fields as the store takes them: hunks as objects, applied hunks as a list."""
    stored = dict(fields, **more)
    if "hunks" in stored:
        stored["hunks"] = [dataclasses.asdict(h) for h in stored["hunks"]]
    if "applied_hunks" in stored:
        stored["applied_hunks"] = list(stored["applied_hunks"])
    return stored
