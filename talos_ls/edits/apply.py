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

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from ..agent.workspace import MAX_READ_BYTES, Workspace
from ..files import FileTooLarge, NotRegularFile, read_regular
from .proposals import Proposal, ProposalBook, ProposalError

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


def disk_text(workspace: Workspace, path: str) -> str:
    """A file's text on disk, empty if it does not exist yet (a proposal may create it).
    Decoded strictly: a file that is not UTF-8 is refused, never written back with its bytes
    replaced."""
    real = workspace.resolve(path, write=True)
    try:
        return read_regular(real, MAX_READ_BYTES).decode() if real.exists() else ""
    except FileTooLarge:
        raise ProposalError(f"{path} is over {MAX_READ_BYTES} bytes") from None
    except NotRegularFile:
        raise ProposalError(f"{path} is not a regular file") from None
    except UnicodeDecodeError:
        raise ProposalError(f"{path} is not UTF-8 text; it is left as it is") from None


@dataclass
class DiskFiles:
    """The workspace's files on disk, read and written in place (the CLI)."""

    workspace: Workspace

    async def read(self, proposal: Proposal) -> tuple[str, int | None]:
        return disk_text(self.workspace, proposal.path), None

    async def write(self, proposal: Proposal, text: str, version: int | None) -> bool:
        self.workspace.write_text(proposal.path, text)
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
