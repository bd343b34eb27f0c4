"""What kind of storage fault a `StoreError` is, so a daemon can say what is wrong and how to
fix it: the database read-only, the disk full, the file corrupted, the server unreachable or
slow. Each backend sets `StoreError.reason` where it turns a driver's error into a StoreError.

SQLite reports a failed write as SQLITE_IOERR as often as SQLITE_READONLY or SQLITE_FULL (a
write refused by a read-only mount is EROFS, past a file size limit EFBIG, and the driver does
not carry the errno), so the file system is asked too: is it mounted read-only, is the file
writable, is there room, is a file at the process's size limit.
"""

from __future__ import annotations

import contextlib
import os
import resource
import sqlite3
from pathlib import Path
from urllib.parse import parse_qsl, unquote

from .base import DEFAULT_TIMEOUT_S

READ_ONLY = "read-only"
FULL = "full"
CORRUPT = "corrupt"
UNREACHABLE = "unreachable"
SLOW = "slow"
BUSY = "busy"  # another writer held the lock past the timeout: contention, not a fault
CLOSED = "closed"  # the handle was closed (the daemon stopping, or reopening it)
REFUSED = "refused"  # the operation broke a rule of the data (a key already there): not a fault
OTHER = "other"

HEADROOM_BYTES = 1 << 20  # free space a recovered store must have: a write fits, not just one

_SQLITE_REASONS = {
    "SQLITE_READONLY": READ_ONLY,
    "SQLITE_PERM": READ_ONLY,
    "SQLITE_FULL": FULL,
    "SQLITE_CORRUPT": CORRUPT,
    "SQLITE_NOTADB": CORRUPT,
    "SQLITE_BUSY": BUSY,
    "SQLITE_LOCKED": BUSY,
    "SQLITE_CONSTRAINT": REFUSED,
}


def space_problem(files: list[Path]) -> str | None:
    """Why `files` (a database and its companions) cannot grow, or None: the file system read
    only, less than HEADROOM_BYTES free, or a file within that of the size limit."""
    existing = [f for f in files if f.exists()]
    if not existing:
        return None
    folder = existing[0].parent
    try:
        fs = os.statvfs(folder)
    except OSError:
        return None
    if fs.f_flag & os.ST_RDONLY:
        return READ_ONLY
    if not all(os.access(f, os.W_OK) for f in existing) or not os.access(folder, os.W_OK):
        return READ_ONLY
    if fs.f_bavail * fs.f_frsize < HEADROOM_BYTES:
        return FULL
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit != resource.RLIM_INFINITY:
        largest = 0
        for f in existing:
            with contextlib.suppress(OSError):
                largest = max(largest, f.stat().st_size)
        if largest + HEADROOM_BYTES > limit:
            return FULL
    return None


def sqlite_reason(exc: sqlite3.Error, files: list[Path]) -> str:
    """The reason of an SQLite error on the database whose files are `files`."""
    name = (getattr(exc, "sqlite_errorname", "") or "").split("_")
    code = "_".join(name[:2])  # SQLITE_IOERR_WRITE -> SQLITE_IOERR
    reason = _SQLITE_REASONS.get(code)
    text = str(exc).lower()
    if reason is None:
        if "locked" in text or "busy" in text:
            reason = BUSY
        elif "malformed" in text or "not a database" in text:
            reason = CORRUPT
        elif "readonly" in text or "read-only" in text:
            reason = READ_ONLY
        elif "full" in text:
            reason = FULL
    if reason in (None, READ_ONLY, FULL):  # the file system says which, when it can
        reason = space_problem(files) or reason
    return reason or OTHER


def describe(url: str, exc: Exception, setting: str) -> str:
    """What is wrong with the store at `url` and how to fix it, for a person: `<what>; <fix>`.
    `setting` is where the person gives the URL (`--store`, `storeUrl`). The CLI and the
    language server say the same thing in the same words."""
    where = where_of(url)
    redis = not url.startswith("sqlite:")
    reason = getattr(exc, "reason", OTHER)
    if reason == READ_ONLY:
        if redis:
            return f"{where} is a read-only replica; point {setting} at the primary"
        return (
            f"the database {where} is read-only; check its permissions (and its "
            "directory's) and that its file system is mounted read-write"
        )
    if reason == FULL:
        if redis:
            return (
                f"{where} cannot take writes (out of memory, or its own disk is full); "
                "free memory or disk space on the Redis server"
            )
        return (
            f"disk full: the database {where} cannot grow (no space left on its disk, or "
            "the file size limit reached); free some space"
        )
    if reason == CORRUPT:
        return (
            f"the database {where} is corrupted; move it aside (mv {where} "
            f"{where}.corrupt) and Talos starts a new one"
        )
    if reason == UNREACHABLE:
        return f"cannot reach {where}; is redis-server running?"
    if reason == SLOW:
        return (
            f"{where} did not answer within {_timeout(url):g} s; is the server "
            "overloaded or the network slow? (the URL's ?timeout= sets the limit)"
        )
    if reason == BUSY:
        return f"{exc}; another process held the store too long: try again"
    return f"{exc}; check the store ({setting})"


def where_of(url: str) -> str:
    """The file of an SQLite URL, else the URL (password removed)."""
    from ..redact import redact_url

    scheme, _, rest = url.partition("://")
    if scheme.lower() == "sqlite":
        return unquote(rest[1:].partition("?")[0])
    return redact_url(url.partition("?")[0])


def _timeout(url: str) -> float:
    for name, value in parse_qsl(url.partition("?")[2]):
        if name == "timeout":
            try:
                return float(value)
            except ValueError:
                break
    return DEFAULT_TIMEOUT_S
