"""ACP sessions as records that outlive the process: `session/load` and `session/list` read them.

A session is a conversation in one folder: its id, its folder, its title (the first request,
shortened), when it last changed, its permission mode, the ids of its tasks in order and
how long each one's request was. The tasks themselves, with their transcripts, are in Talos's
store; a session's record only says which are its own. Records are small JSON files in the
person's data directory (`~/.local/share/talos/acp-sessions/`, private), written atomically;
a record that cannot be read is skipped, never fatal.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

import platformdirs

from ..files import atomic_write

logger = logging.getLogger(__name__)
SESSION_ID = re.compile(r"s[0-9a-f]{20}")
MAX_RECORD_BYTES = 1024 * 1024
MAX_TASKS = 2000  # a session's task ids kept (the oldest go first)
TITLE_CHARS = 80
KEEP = 1000  # records kept; the least recently changed go first


def sessions_dir() -> Path:
    return platformdirs.user_data_path("talos") / "acp-sessions"


@dataclass
class SessionRecord:
    id: str
    cwd: str
    mode: str
    title: str = ""
    updated_at: float = field(default_factory=time.time)
    tasks: list[str] = field(default_factory=list)
    # Each task's request as long as the person sent it: its stored prompt may go on with
    # Talos's notes (conflicts it went on), which a replay does not show as theirs.
    sizes: dict[str, int] = field(default_factory=dict)

    @staticmethod
    def new(cwd: Path, mode: str) -> SessionRecord:
        return SessionRecord("s" + uuid.uuid4().hex[:20], str(cwd), mode)


class SessionBook:
    """The records, in a directory of their own."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or sessions_dir()

    def save(self, record: SessionRecord) -> None:
        record.tasks = record.tasks[-MAX_TASKS:]
        record.sizes = {t: record.sizes[t] for t in record.tasks if t in record.sizes}
        record.updated_at = time.time()
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        atomic_write(self.folder, f"{record.id}.json", json.dumps(asdict(record)).encode())
        self._prune()

    def _prune(self) -> None:
        """At most KEEP records: a client making sessions in a loop cannot fill the disk."""
        try:
            paths = list(self.folder.glob("s*.json"))
            if len(paths) <= KEEP:
                return
            paths.sort(key=lambda p: p.stat().st_mtime)
            for path in paths[: len(paths) - KEEP]:
                path.unlink(missing_ok=True)
        except OSError:
            logger.warning("old session records could not be pruned")

    def get(self, session_id: str) -> SessionRecord | None:
        """The record, or None (no such session, or an id that is not one of ours)."""
        if not SESSION_ID.fullmatch(session_id):
            return None
        return self._read(self.folder / f"{session_id}.json")

    def _read(self, path: Path) -> SessionRecord | None:
        try:
            if path.is_symlink() or path.stat().st_size > MAX_RECORD_BYTES:
                return None
            raw = json.loads(path.read_text())
            sizes = raw.get("sizes") or {}
            record = SessionRecord(
                id=str(raw["id"]),
                cwd=str(raw["cwd"]),
                mode=str(raw["mode"]),
                title=str(raw.get("title") or ""),
                updated_at=float(raw.get("updated_at") or 0),
                tasks=[str(t) for t in raw.get("tasks") or []],
                sizes={str(t): int(n) for t, n in sizes.items()} if isinstance(sizes, dict) else {},
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if not SESSION_ID.fullmatch(record.id) or path.stem != record.id:
            return None
        return record

    def list(self, cwd: Path | None = None) -> list[SessionRecord]:
        """Every readable record (of `cwd` only, when given), the latest first."""
        try:
            paths = list(self.folder.glob("s*.json"))
        except OSError:
            return []
        found = [r for p in paths if (r := self._read(p)) is not None]
        if cwd is not None:
            found = [r for r in found if Path(r.cwd) == cwd]
        return sorted(found, key=lambda r: r.updated_at, reverse=True)
