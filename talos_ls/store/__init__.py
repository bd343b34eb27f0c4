"""`open_store(url)`: one storage API over several backends, chosen by URL scheme.

    sqlite:////abs/path/talos.db      the embedded default ("sqlite:///" + an absolute path;
    sqlite:///relative/talos.db       a path after three slashes is relative to the cwd)
    sqlite:///:memory:                a private in-memory store (tests, experiments)
    redis://host:6379/0               Redis or Valkey, shared by daemons on several machines
    rediss://user@host:6380/0         the same over TLS; the password comes from
                                      TALOS_REDIS_PASSWORD, never from the command line
    redis+cluster://h1:7000,h2:7000   Redis Cluster (rediss+cluster:// over TLS): any of its
                                      nodes; one agent's keys live on one hash slot
    redis+sentinel://s1:26379,s2:26379/talos?db=0
                                      the primary Sentinel calls `talos`, followed through
                                      failovers (rediss+sentinel:// over TLS)

Query parameters: `timeout=SECONDS` bounds how long an atomic step waits (SQLite: for another
writer; Redis: for the server), default 2; SQLite also takes `mode=ro` (read-only: inspection
never writes); every Redis form takes `wait=N` (the budget's grant and an answer count only
once N replicas hold them: `redis_connect.py`).

With no URL: `TALOS_STORE_URL`, else `talos.db` in the user state directory.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, unquote

from ..constants import ENV_URL
from ..redact import redact_url
from .base import DEFAULT_TIMEOUT_S, Store, StoreError, parse_timeout

if TYPE_CHECKING:
    from .sqlite import SQLiteStore

SCHEMES = (
    "sqlite",
    "redis",
    "rediss",
    "redis+cluster",
    "rediss+cluster",
    "redis+sentinel",
    "rediss+sentinel",
)


def default_store_url() -> str:
    """`TALOS_STORE_URL`, else a SQLite file in the user state directory."""
    env = os.environ.get(ENV_URL, "").strip()
    if env:
        return env
    return "sqlite:///" + str(_state_dir() / "talos.db")


def _state_dir() -> Path:
    import platformdirs  # loaded when the location is needed, not with the package

    return platformdirs.user_state_path("talos")


def open_store(url: str | None = None) -> Store:
    """Open the store at `url` (default: `default_store_url()`).

    Raises StoreError, naming the URL (password removed), when the URL is malformed, the
    store is unreachable, or the file is not a Talos database. Never overwrites such a file.
    """
    if url is None:
        url = default_store_url()
        if not os.environ.get(ENV_URL, "").strip():
            # The default location is ours to create; an explicit one must already exist.
            _state_dir().mkdir(parents=True, exist_ok=True)
    if not isinstance(url, str) or not url.strip():
        raise StoreError(f"store URL {url!r} is empty; expected e.g. sqlite:////abs/path.db")
    shown = redact_url(url)
    scheme, sep, rest = url.partition("://")
    if not sep or not scheme:
        raise StoreError(
            f"store URL {shown!r} has no scheme; expected e.g. sqlite:////abs/path/talos.db"
        )
    scheme = scheme.lower()
    if scheme not in SCHEMES:
        raise StoreError(
            f"store URL {shown!r}: unsupported scheme {scheme!r} (supported: {', '.join(SCHEMES)})"
        )
    if scheme == "sqlite":
        return _open_sqlite(shown, rest)
    return _open_redis(shown, url)


def _open_redis(shown: str, url: str) -> Store:
    from .redis import RedisStore  # the redis package is an optional extra

    return RedisStore(shown, url)


def _open_sqlite(shown: str, rest: str) -> SQLiteStore:
    from .sqlite import SQLiteStore  # the backends load when a store is opened

    if not rest.startswith("/"):
        raise StoreError(
            f"store URL {shown!r}: expected sqlite:/// followed by a path "
            "(four slashes for an absolute path)"
        )
    raw_path, _, query = rest[1:].partition("?")
    path = unquote(raw_path)
    if not path:
        raise StoreError(f"store URL {shown!r} names no database file")
    readonly, timeout = False, DEFAULT_TIMEOUT_S
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name == "mode" and value in ("ro", "rw"):
            readonly = value == "ro"
        elif name == "timeout":
            timeout = parse_timeout(shown, value)
        else:
            raise StoreError(
                f"store URL {shown!r}: unknown parameter {name}={value!r} "
                "(known: mode=ro|rw, timeout=SECONDS)"
            )
    if path != ":memory:":
        path = str(Path(path).expanduser())
    return SQLiteStore(shown, path, readonly=readonly, timeout=timeout)


__all__ = ["Store", "StoreError", "default_store_url", "open_store", "redact_url"]
