"""Time-ordered ids: 32 lowercase hex characters that sort in creation order.

Stores break ties by id (the question queue's impact order ends in `candidate_id`, in SQLite's
ORDER BY and in the Redis impact member's id suffix). With random uuid4 ids two candidates
proposed in the same turn were ordered by chance, so two runs of one session asked different
questions. These ids make that last tie-break the order of creation on every backend without
any store change: equal-length lowercase hex sorts the same bytewise in SQLite's BINARY
collation and in Redis's lexicographic ranges.

Layout, ULID-like: 12 hex of Unix milliseconds, 6 hex of a per-process sequence within that
millisecond, 14 hex random per id. Within one process the ids strictly increase, even if the
wall clock steps back (the time part never goes below the last one issued), so a replay in one
process orders its ids exactly as the first run did. Across processes the random part keeps
them unique, and they sort by time, then arbitrarily. The random part is at the end, so the
last characters tell ids apart for people (the first ones are shared by ids of the same minute).
"""

from __future__ import annotations

import os
import threading
import time

_SEQ_MAX = 0xFFFFFF  # 16.7 million ids per millisecond before borrowing the next one

_lock = threading.Lock()
_last_ms = 0
_seq = 0


def _fresh_lock_in_child() -> None:
    """A child forked while another thread held the lock would wait on it forever."""
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_fresh_lock_in_child)


def time_ordered_hex() -> str:
    """A new 32-hex-character id, greater than every id this process issued before."""
    global _last_ms, _seq
    with _lock:
        now = time.time_ns() // 1_000_000
        if now > _last_ms:
            _last_ms, _seq = now, 0
        elif _seq < _SEQ_MAX:
            _seq += 1
        else:  # the sequence is spent: borrow the next millisecond, still increasing
            _last_ms, _seq = _last_ms + 1, 0
        ms, seq = _last_ms, _seq
    return f"{ms:012x}{seq:06x}{os.urandom(7).hex()}"
