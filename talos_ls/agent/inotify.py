"""Linux inotify, read synchronously: the few calls `secrets_scan` needs.

The kernel queues an event inside the system call that creates, renames or deletes a name, so
once a non-blocking read of the queue comes back empty, every change made before it has been
seen: no debounce and no watcher thread (watchfiles has both), which is what makes the queue
fit to decide what a command about to start may read. Linux only; `Inotify()` raises OSError
elsewhere or when the kernel refuses an instance.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import sys
from collections.abc import Iterator
from typing import NamedTuple

IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_ISDIR = 0x40000000

_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len; then the name, NUL-padded


class Event(NamedTuple):
    wd: int
    mask: int
    name: str  # "" for an event on the watched directory itself


class Inotify:
    """One inotify instance: watches added by path, events read until the queue is empty."""

    def __init__(self) -> None:
        if not sys.platform.startswith("linux"):
            raise OSError(errno.ENOSYS, "inotify is Linux only")
        self._libc = ctypes.CDLL(None, use_errno=True)
        fd = self._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)  # IN_NONBLOCK, IN_CLOEXEC
        if fd < 0:
            raise _error("inotify_init1")
        self.fd: int | None = fd

    def add(self, path: str, mask: int) -> int:
        """A watch on `path` (a directory, not followed when it is a link); its descriptor."""
        wd = self._libc.inotify_add_watch(self.fd, os.fsencode(path), mask)
        if wd < 0:
            raise _error(path)
        return int(wd)

    def remove(self, wd: int) -> None:
        self._libc.inotify_rm_watch(self.fd, wd)  # gone already (its directory deleted): fine

    def read(self) -> Iterator[Event]:
        """Every event queued so far, in order; returns when the queue is empty."""
        assert self.fd is not None, "closed"
        while True:
            try:
                data = os.read(self.fd, 64 * 1024)
            except BlockingIOError:
                return
            offset = 0
            while offset + _HEADER.size <= len(data):
                wd, mask, _cookie, length = _HEADER.unpack_from(data, offset)
                raw = data[offset + _HEADER.size : offset + _HEADER.size + length]
                offset += _HEADER.size + length
                yield Event(wd, mask, os.fsdecode(raw.split(b"\0", 1)[0]))

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _error(what: str) -> OSError:
    code = ctypes.get_errno()
    return OSError(code, os.strerror(code), what)
