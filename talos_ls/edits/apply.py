"""Applying and undoing a proposal: the one path every surface takes (the host, for an editor
or `talos run`; the CLI's `talos apply` and `talos undo`; next, ACP).

The book checks the file is still what the proposal was made on (or left) and claims the
change in the store before anything is written, so of two servers one applies; the file is
then written where the person sees it (`Files`: an editor's buffer, or the disk); a write that
fails or does not land releases the claim, so the proposal can be tried again and nothing is
lost. The book's calls touch the store: `run` carries them off the event loop (the host passes
its worker threads; the CLI, which has no loop to keep free, runs them in place).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from ..agent.workspace import MAX_READ_BYTES, Workspace
from ..errors import TalosError
from ..files import FileTooLarge, NotRegularFile, read_regular
from .proposals import Proposal, ProposalBook, ProposalError, content_hash

T = TypeVar("T")
Run = Callable[..., Awaitable[Any]]


class Files(Protocol):
    """Where a proposal's file is read and written."""

    async def read(self, proposal: Proposal) -> tuple[str, int | None]:
        """The file's text as the person sees it, with the editor's version of it (None: the
        disk's)."""

    async def write(self, proposal: Proposal, text: str, version: int | None) -> bool:
        """Put `text` there, over `version`; False when it did not land (the editor refused,
        or its buffer moved on)."""


def disk_text(workspace: Workspace, path: str, proposal: Proposal | None = None) -> str:
    """A file's text on disk, empty if it does not exist yet (a proposal may create it).
    Decoded strictly: a file that is not UTF-8 is refused, never written back with its bytes
    replaced; except for `proposal` when it was made on (or left) the file read as latin-1,
    byte for byte (an editor read it so): `disk_write` then writes it back the same way."""
    real = workspace.resolve(path, write=True)
    try:
        data = read_regular(real, MAX_READ_BYTES) if real.exists() else b""
    except FileTooLarge:
        raise ProposalError(f"{path} is over {MAX_READ_BYTES} bytes") from None
    except NotRegularFile:
        raise ProposalError(f"{path} is not a regular file") from None
    try:
        return data.decode()
    except UnicodeDecodeError:
        text = data.decode("latin-1")
        if proposal is not None and content_hash(text) in (
            proposal.base_hash,
            proposal.applied_hash,
        ):
            return text
        raise ProposalError(f"{path} is not UTF-8 text; it is left as it is") from None


def disk_write(workspace: Workspace, path: str, text: str) -> None:
    """Write `text` in the file's own encoding: UTF-8, or latin-1 for a file on disk that is
    not UTF-8 (`disk_text` read it so), byte for byte."""
    data = text.encode("utf-8")
    real = workspace.resolve(path, write=True)
    with contextlib.suppress(FileNotFoundError, FileTooLarge, NotRegularFile, IsADirectoryError):
        try:
            read_regular(real, MAX_READ_BYTES).decode()
        except UnicodeDecodeError:
            try:
                data = text.encode("latin-1")
            except UnicodeEncodeError:
                raise ProposalError(
                    f"{path} is not UTF-8 and the new text does not fit its encoding; "
                    "it is left as it is"
                ) from None
    workspace.write_bytes(path, data)


@dataclass
class DiskFiles:
    """The workspace's files on disk, read and written in place (the CLI)."""

    workspace: Workspace

    async def read(self, proposal: Proposal) -> tuple[str, int | None]:
        return disk_text(self.workspace, proposal.path, proposal), None

    async def write(self, proposal: Proposal, text: str, version: int | None) -> bool:
        disk_write(self.workspace, proposal.path, text)
        return True


async def in_place(fn: Callable[..., T], *args: Any) -> T:
    return fn(*args)


async def apply(
    book: ProposalBook,
    files: Files,
    proposal_id: str,
    hunks: Sequence[int] | None = None,
    run: Run = in_place,
) -> bool:
    """Apply the proposal (some of its hunks). ProposalError when it is not pending or the
    file changed since it was made (it is then stale); True when the file took it."""
    proposal = await run(book.get, proposal_id)
    current, version = await files.read(proposal)
    new_text = await run(book.apply, proposal_id, current, hunks)
    before = await run(book.applied, proposal_id, new_text, hunks)
    return await _write(book, files, proposal, new_text, version, before, run)


async def undo(
    book: ProposalBook, files: Files, proposal_id: str | None = None, run: Run = in_place
) -> Proposal:
    """Put back the file a proposal changed (the last applied one by default), if the file is
    still exactly as the proposal left it; ProposalError otherwise."""
    if proposal_id is None:
        done = [p for p in book.list() if p.undo_text is not None and p.status != "undone"]
        if not done:
            raise ProposalError("nothing to undo: no proposal has been applied")
        proposal_id = done[-1].id
    proposal = await run(book.get, proposal_id)
    current, version = await files.read(proposal)
    before = {"status": proposal.status}
    text = await run(book.undo, proposal.id, current)
    if not await _write(book, files, proposal, text, version, before, run):
        raise ProposalError(f"the editor did not take the undo of {proposal.id}")
    return proposal


@dataclass
class Rewound:
    """What a rewind did: the proposals undone (newest first), and the files left as they
    are, each with why (the person changed it since the task did, or it cannot be written)."""

    task_id: str
    undone: list[Proposal] = field(default_factory=list)
    left: dict[str, str] = field(default_factory=dict)

    def restored(self) -> list[str]:
        """The files put back as they were before the task."""
        return sorted({p.path for p in self.undone} - set(self.left))

    def message(self) -> str:
        restored = self.restored()
        said = [
            f"task {self.task_id}: "
            + (f"restored {', '.join(restored)}" if restored else "no file restored")
        ]
        said += [f"left {path} as it is: {why}" for path, why in self.left.items()]
        return "\n".join(said)

    def as_json(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "restored": self.restored(),
            "undone": [p.id for p in self.undone],
            "left": [{"path": path, "reason": why} for path, why in self.left.items()],
        }


async def rewind(book: ProposalBook, files: Files, task_id: str, run: Run = in_place) -> Rewound:
    """Put back every file task `task_id` changed as it was before the task: its applied
    proposals undone one by one, newest first, each through `undo` (the file must still be
    exactly as that proposal left it). A file the person changed since is left, with its
    earlier proposals, and named with why; the other files are rewound (and stay so).
    ProposalError when the task applied nothing here (or everything is undone already)."""
    made = await run(book.of_task, task_id)
    applied = [p for p in made if p.undo_text is not None and p.status != "undone"]
    if not applied:
        ever = any(p.undo_text is not None for p in made)
        said = (
            "everything it applied is undone already"
            if ever
            else "it applied no proposal (or its proposals were pruned, all together)"
        )
        raise ProposalError(f"nothing to rewind in task {task_id!r} in this workspace: {said}")
    done = Rewound(task_id)
    for proposal in reversed(applied):
        if proposal.path in done.left:
            continue  # the person's edit stays, and what the task did under it
        try:
            done.undone.append(await undo(book, files, proposal.id, run))
        except (TalosError, OSError) as exc:
            done.left[proposal.path] = str(exc)
    return done


async def _write(
    book: ProposalBook,
    files: Files,
    proposal: Proposal,
    text: str,
    version: int | None,
    before: dict[str, Any],
    run: Run,
) -> bool:
    """Write a claimed change; the claim is released unless the write landed."""
    landed = False
    try:
        landed = await files.write(proposal, text, version)
    finally:
        if not landed:
            await run(book.revert, proposal.id, before)
    return landed
