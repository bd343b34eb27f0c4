"""SQLite backend: the embedded default.

WAL mode so readers never block the writer; every atomic step is one `BEGIN IMMEDIATE`
transaction, so SQLite's single-writer lock is the per-agent mutual exclusion the queue needs,
across threads and processes alike. The busy timeout (default 2 s, `?timeout=` in the URL) bounds
how long a step waits for that lock; past it the step fails and the caller fails closed.

The file is marked with an application id and a schema version (`PRAGMA user_version`), so a
file that is not a Talos database is refused rather than written to, and schema changes are
applied by numbered migrations.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any
from urllib.parse import quote

from . import faults
from .base import (
    CANDIDATE_FIELDS,
    FACT_FIELDS,
    JOURNAL_FIELDS,
    PROPOSAL_FIELDS,
    TASK_FIELDS,
    Store,
    StoreError,
    check_claimable,
    check_keep_settled,
    check_proposal,
    check_proposal_claim,
)

APPLICATION_ID = 0x54414C53  # "TALS"
OPEN_RETRY_S = 10.0  # how long opening waits out other daemons preparing the same file
LEASE_KEEP_S = 7 * 86400.0  # an owner's lease this long expired is deleted
_SQLITE_MAGIC = b"SQLite format 3\x00"
_JSON_FIELDS = ("target_keys", "options", "cue_tokens")
_PROPOSAL_JSON = ("hunks", "applied_hunks")

# Each entry migrates the schema from version i to i + 1. Never edit a released entry; append.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE facts (
            key TEXT PRIMARY KEY,
            agent_id TEXT NOT NULL,
            statement TEXT NOT NULL,
            confidence REAL NOT NULL,
            evidence_count INTEGER NOT NULL,
            corroborations INTEGER NOT NULL,
            contradictions INTEGER NOT NULL,
            valid_from REAL NOT NULL,
            invalid_at REAL,
            superseded_by TEXT
        )""",
        "CREATE INDEX facts_agent ON facts(agent_id)",
        """CREATE TABLE candidates (
            candidate_id TEXT PRIMARY KEY,
            agent_id TEXT NOT NULL,
            question_text TEXT NOT NULL,
            norm_text TEXT NOT NULL,
            kind TEXT NOT NULL,
            source_module TEXT NOT NULL,
            target_keys TEXT NOT NULL,
            options TEXT NOT NULL,
            ambiguity_signal TEXT NOT NULL,
            status TEXT NOT NULL,
            ask_count INTEGER NOT NULL,
            created_turn INTEGER NOT NULL,
            expires_turn INTEGER NOT NULL,
            last_seen_turn INTEGER NOT NULL,
            cooldown_until INTEGER,
            answer_option INTEGER,
            resolved_turn INTEGER,
            cue_tokens TEXT NOT NULL,
            delivered_turn INTEGER,
            disjunction_id TEXT
        )""",
        "CREATE INDEX cand_seen ON candidates(agent_id, status, last_seen_turn)",
        "CREATE INDEX cand_expires ON candidates(agent_id, status, expires_turn)",
        "CREATE INDEX cand_text ON candidates(agent_id, norm_text)",
        """CREATE TABLE candidate_keys (
            agent_id TEXT NOT NULL, target_key TEXT NOT NULL, candidate_id TEXT NOT NULL,
            PRIMARY KEY (agent_id, target_key, candidate_id)) WITHOUT ROWID""",
        # Impact order, deliverable only: next_question walks it and stops at its limit.
        """CREATE INDEX cand_impact ON candidates(
            agent_id, last_seen_turn DESC, ask_count, created_turn, candidate_id)
            WHERE status IN ('pending', 'cooled')""",
        # Cue tokens of open candidates only (triggers drop them when a candidate closes), so
        # "does anything open match these cues?" is one index probe, whatever the history.
        """CREATE TABLE candidate_cues (
            agent_id TEXT NOT NULL, cue TEXT NOT NULL, candidate_id TEXT NOT NULL,
            PRIMARY KEY (candidate_id, cue)) WITHOUT ROWID""",
        "CREATE INDEX cues_agent ON candidate_cues(agent_id, cue)",
        """CREATE TRIGGER cand_closed AFTER UPDATE OF status ON candidates
            WHEN NEW.status IN ('answered', 'expired')
            BEGIN DELETE FROM candidate_cues WHERE candidate_id = NEW.candidate_id; END""",
        """CREATE TRIGGER cand_deleted AFTER DELETE ON candidates BEGIN
            DELETE FROM candidate_cues WHERE candidate_id = OLD.candidate_id;
            DELETE FROM candidate_keys
             WHERE agent_id = OLD.agent_id AND candidate_id = OLD.candidate_id
               AND target_key IN (SELECT value FROM json_each(OLD.target_keys));
            END""",
        """CREATE TABLE question_budget (
            agent_id TEXT PRIMARY KEY, last_delivery_turn INTEGER NOT NULL)""",
    ),
    (  # v2: facts get a slot, a source and an origin; the reconciliation journal
        "ALTER TABLE facts ADD COLUMN subject TEXT",
        "ALTER TABLE facts ADD COLUMN attribute TEXT",
        "ALTER TABLE facts ADD COLUMN value TEXT",
        "ALTER TABLE facts ADD COLUMN source TEXT NOT NULL DEFAULT 'model'",
        "ALTER TABLE facts ADD COLUMN origin TEXT",
        """CREATE TABLE journal (
            id TEXT PRIMARY KEY,
            agent_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            target TEXT NOT NULL,
            payload TEXT NOT NULL,
            captured_at REAL NOT NULL,
            invalid_at REAL
        )""",
        "CREATE INDEX journal_live ON journal(agent_id) WHERE invalid_at IS NULL",
    ),
    (  # v3: tasks and their transcripts
        """CREATE TABLE tasks (
            id TEXT PRIMARY KEY,
            agent_id TEXT NOT NULL,
            state TEXT NOT NULL,
            title TEXT NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            cost TEXT NOT NULL,
            error TEXT,
            transcript TEXT NOT NULL
        )""",
        "CREATE INDEX tasks_agent ON tasks(agent_id, created_at)",
        "CREATE TABLE turns (agent_id TEXT PRIMARY KEY, turn INTEGER NOT NULL)",
    ),
    (  # v4: proposed edits, so a restarted server shows the same ones
        """CREATE TABLE proposals (
            id TEXT PRIMARY KEY,
            agent_id TEXT NOT NULL,
            task_id TEXT,
            path TEXT NOT NULL,
            base_hash TEXT NOT NULL,
            base_text TEXT NOT NULL,
            new_text TEXT NOT NULL,
            version INTEGER,
            hunks TEXT NOT NULL,
            status TEXT NOT NULL,
            applied_hunks TEXT NOT NULL,
            applied_hash TEXT,
            undo_text TEXT,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        )""",
        "CREATE INDEX proposals_agent ON proposals(agent_id, created_at, id)",
        "CREATE INDEX proposals_path ON proposals(agent_id, path, created_at, id)",
        """CREATE INDEX proposals_settled ON proposals(agent_id, updated_at, id)
            WHERE status NOT IN ('pending', 'partly_applied')""",
    ),
    (  # v5: a task names the process running it, and processes hold leases: a process that
        # starts marks the tasks of dead ones interrupted
        "ALTER TABLE tasks ADD COLUMN owner TEXT",
        """CREATE INDEX tasks_open ON tasks(agent_id, created_at)
            WHERE state IN ('queued', 'running')""",
        "CREATE TABLE owners (owner TEXT PRIMARY KEY, lease_until REAL NOT NULL)",
    ),
    (  # v6: a task's transcript, one message a row, so a step adds its messages
        # (`task_append`) instead of writing the whole transcript again. `tasks.transcript`
        # keeps what earlier versions wrote (read before these rows); '[]' from now on.
        """CREATE TABLE task_messages (
            task_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            message TEXT NOT NULL,
            PRIMARY KEY (task_id, seq)
        )""",
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)

# A candidate that is open and not, in effect, expired at turn :t. Delivered candidates wait for
# their reply until they have been ignored for :c turns; only then can expiry reach them.
_LIVE_OPEN = """(
    (status IN ('pending', 'cooled') AND expires_turn >= :t)
    OR (status = 'delivered' AND NOT (
        expires_turn < :t AND COALESCE(delivered_turn, created_turn) + :c <= :t)))"""

_IMPACT_ORDER = "last_seen_turn DESC, ask_count, created_turn, candidate_id"
_LAST_DELIVERY = "SELECT last_delivery_turn FROM question_budget WHERE agent_id = ?"


def _insert(table: str, fields: Sequence[str], verb: str = "INSERT") -> str:
    """The statement inserting a row of `fields` into `table`, each bound by name."""
    return (
        f"{verb} INTO {table} ({', '.join(fields)}) VALUES ({', '.join(':' + f for f in fields)})"
    )


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# The agent's settled proposals beyond the newest `keep_settled` (`proposal_prune`).
_OLD_SETTLED = """SELECT id FROM proposals WHERE agent_id = ?
   AND status NOT IN ('pending', 'partly_applied')
 ORDER BY updated_at DESC, id DESC LIMIT -1 OFFSET ?"""
_ADD_MESSAGE = "INSERT INTO task_messages (task_id, seq, message) VALUES (?, ?, ?)"
_UPDATE_TASK = (
    "UPDATE tasks SET "
    + ", ".join(f"{f} = :{f}" for f in TASK_FIELDS if f not in ("id", "transcript"))
    + " WHERE id = :id"
)


def _messages(task_id: str, at: int, transcript: Sequence[Any]) -> list[tuple[str, int, str]]:
    return [(task_id, at + i, _dumps(m)) for i, m in enumerate(transcript)]


def _candidate(row: sqlite3.Row) -> dict[str, Any]:
    out = {name: row[name] for name in CANDIDATE_FIELDS}
    for name in _JSON_FIELDS:
        out[name] = json.loads(out[name])
    return out


def _fact(row: sqlite3.Row) -> dict[str, Any]:
    return {name: row[name] for name in FACT_FIELDS}


def _proposal(row: sqlite3.Row) -> dict[str, Any]:
    out = {name: row[name] for name in PROPOSAL_FIELDS}
    for name in _PROPOSAL_JSON:
        out[name] = json.loads(out[name])
    return out


class SQLiteStore(Store):
    """A Talos store in one SQLite file (or `:memory:`)."""

    def __init__(self, url: str, path: str, *, readonly: bool, timeout: float) -> None:
        self.url = url
        self._path = None if path == ":memory:" else Path(path).absolute()
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._check_file(path, readonly)
        if path == ":memory:":
            target = "file::memory:"
        else:
            target = (
                "file:"
                + quote(str(Path(path).absolute()))
                + "?mode="
                + ("ro" if readonly else "rwc")
            )
        try:
            conn = sqlite3.connect(
                target, uri=True, timeout=timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise self._fault(exc, f"cannot open store {url}") from None
        conn.row_factory = sqlite3.Row
        # Temporary b-trees (UNION, ORDER BY) in memory: on temp files, dedup cost 5x more.
        conn.execute("PRAGMA temp_store = MEMORY")
        self._conn = conn
        # Daemons starting together on a new file race to switch it to WAL and migrate it;
        # SQLite can answer BUSY there without waiting, and preparing is idempotent: retry.
        deadline = time.monotonic() + max(timeout, OPEN_RETRY_S)
        while True:
            try:
                self._prepare(readonly)
                return
            except (sqlite3.OperationalError, StoreError) as exc:
                if "locked" in str(exc) and time.monotonic() < deadline:
                    time.sleep(0.01)
                    continue
                self.close()
                if isinstance(exc, StoreError):
                    raise
                raise self._fault(exc, f"cannot open store {url}") from None
            except sqlite3.Error as exc:
                self.close()
                raise self._fault(exc, f"cannot open store {url}") from None

    # ------------------------------------------------------------ opening
    def _check_file(self, path: str, readonly: bool) -> None:
        if path == ":memory:":
            return
        p = Path(path)
        if p.is_dir():
            raise StoreError(f"store {self.url}: {p} is a directory, not a database file")
        if p.exists():
            try:
                with p.open("rb") as fh:
                    head = fh.read(len(_SQLITE_MAGIC))
            except OSError as exc:
                raise StoreError(f"store {self.url}: cannot read {p}: {exc.strerror}") from None
            if head and head != _SQLITE_MAGIC:
                raise StoreError(
                    f"store {self.url}: {p} is not a Talos database (not an SQLite file); "
                    "refusing to touch it"
                )
        elif readonly:
            raise StoreError(f"store {self.url}: {p} does not exist")
        elif not p.parent.is_dir():
            raise StoreError(f"store {self.url}: directory {p.parent} does not exist")

    def _prepare(self, readonly: bool) -> None:
        conn = self._conn
        assert conn is not None
        # One statement, so one snapshot: another daemon's migration must not commit between
        # these reads. (An explicit BEGIN here left the connection measurably slower after.)
        app_id, version, names = conn.execute(
            """SELECT (SELECT application_id FROM pragma_application_id()),
                      (SELECT user_version FROM pragma_user_version()),
                      (SELECT json_group_array(name) FROM sqlite_master WHERE type = 'table')"""
        ).fetchone()
        tables = json.loads(names)
        if app_id != APPLICATION_ID and (app_id != 0 or version != 0 or tables):
            raise StoreError(
                f"store {self.url}: the file is an SQLite database but not a Talos one"
                + (f" (it holds tables: {', '.join(sorted(tables)[:5])})" if tables else "")
                + "; refusing to touch it"
            )
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"store {self.url}: schema version {version} was written by a newer Talos "
                f"(this one knows up to {SCHEMA_VERSION}); upgrade talos-ls"
            )
        if readonly:
            if version < SCHEMA_VERSION:
                raise StoreError(
                    f"store {self.url}: schema version {version} needs migrating, which a "
                    "read-only store cannot do; open it once read-write"
                )
            return
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        if version < SCHEMA_VERSION:
            self._migrate()

    def _migrate(self) -> None:
        with self._write() as conn:
            # Another process may have migrated while we waited for the write lock.
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            for step in MIGRATIONS[version:]:
                for statement in step:
                    conn.execute(statement)
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def local_files(self) -> list[Path]:
        if self._path is None:
            return []
        return [self._path.with_name(self._path.name + s) for s in ("", "-wal", "-shm", "-journal")]

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _fault(self, exc: sqlite3.Error, prefix: str = "") -> StoreError:
        """The driver's error as a StoreError naming the store, with its reason."""
        files = self.local_files()
        return StoreError(
            f"{prefix or 'store ' + self.url}: {exc}", faults.sqlite_reason(exc, files)
        )

    def probe(self) -> None:
        """The base probe (a write and a read), then: room to grow, and every page sound
        (`PRAGMA quick_check`, a full read: run only while the store is failing)."""
        super().probe()
        reason = faults.space_problem(self.local_files())
        if reason is not None:
            what = "is read-only" if reason == faults.READ_ONLY else "has no room to grow"
            raise StoreError(f"store {self.url}: the database {what}", reason)
        with self._read() as conn:
            verdict = conn.execute("PRAGMA quick_check(1)").fetchone()[0]
        if verdict != "ok":
            raise StoreError(f"store {self.url}: {verdict}", faults.CORRUPT)

    # -------------------------------------------------------- transactions
    def _live(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"store {self.url} is closed", faults.CLOSED)
        return self._conn

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One atomic step: BEGIN IMMEDIATE ... COMMIT, rolled back on any error."""
        with self._lock:
            conn = self._live()
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise self._fault(exc) from None
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException as exc:
                with suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise self._fault(exc) from None
                raise

    @contextmanager
    def _snapshot(self) -> Iterator[sqlite3.Connection]:
        """Reads that must see one state of the file (a row and the rows that go with it)."""
        with self._read() as conn:
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._live()
            try:
                yield conn
            except sqlite3.Error as exc:
                raise self._fault(exc) from None

    # ---------------------------------------------------------------- facts
    def fact_insert(self, row: Mapping[str, Any]) -> None:
        with self._write() as conn:
            conn.execute(_insert("facts", FACT_FIELDS), dict(row))

    def fact_get(self, key: str) -> dict[str, Any] | None:
        with self._read() as conn:
            row = conn.execute("SELECT * FROM facts WHERE key = ?", (key,)).fetchone()
        return None if row is None else _fact(row)

    def fact_list(self, agent_id: str | None = None) -> list[dict[str, Any]]:
        with self._read() as conn:
            if agent_id is None:
                rows = conn.execute("SELECT * FROM facts ORDER BY agent_id, rowid").fetchall()
            else:
                rows = conn.execute(
                    "SELECT * FROM facts WHERE agent_id = ? ORDER BY rowid", (agent_id,)
                ).fetchall()
        return [_fact(r) for r in rows]

    def fact_observe(
        self, observations: Mapping[str, Sequence[float]], cap: int
    ) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        with self._write() as conn:
            for key, signals in observations.items():
                for s in signals:
                    conn.execute(
                        """UPDATE facts SET
                            confidence = MAX(0.0, MIN(1.0, confidence + (:s - confidence)
                                / (MIN(evidence_count + 1, :cap) + 1))),
                            evidence_count = evidence_count + 1,
                            corroborations = corroborations + (:s >= 0.5),
                            contradictions = contradictions + (:s < 0.5)
                           WHERE key = :k""",
                        {"s": float(s), "cap": int(cap), "k": key},
                    )
                row = conn.execute("SELECT * FROM facts WHERE key = ?", (key,)).fetchone()
                if row is not None:
                    out[key] = _fact(row)
        return out

    def fact_close(self, key: str, at: float, successor: str | None) -> bool:
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE facts SET invalid_at = ?, superseded_by = ? "
                "WHERE key = ? AND invalid_at IS NULL",
                (at, successor, key),
            )
            return cur.rowcount == 1

    # -------------------------------------------------------------- journal
    def journal_add(self, row: Mapping[str, Any]) -> None:
        values = dict(row, payload=_dumps(row["payload"]))
        with self._write() as conn:
            conn.execute(_insert("journal", JOURNAL_FIELDS), values)

    def journal_live(self, agent_id: str) -> list[dict[str, Any]]:
        with self._read() as conn:
            rows = conn.execute(
                "SELECT * FROM journal WHERE agent_id = ? AND invalid_at IS NULL ORDER BY rowid",
                (agent_id,),
            ).fetchall()
        return [
            dict({n: r[n] for n in JOURNAL_FIELDS}, payload=json.loads(r["payload"])) for r in rows
        ]

    def journal_close(self, agent_id: str, entry_id: str, at: float) -> bool:
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE journal SET invalid_at = ? "
                "WHERE id = ? AND agent_id = ? AND invalid_at IS NULL",
                (at, entry_id, agent_id),
            )
            return cur.rowcount == 1

    # ---------------------------------------------------------------- turns
    def turn_next(self, agent_id: str) -> int:
        with self._write() as conn:
            return conn.execute(
                """INSERT INTO turns (agent_id, turn) VALUES (?, 1)
                   ON CONFLICT (agent_id) DO UPDATE SET turn = turn + 1 RETURNING turn""",
                (agent_id,),
            ).fetchone()[0]

    def turn_current(self, agent_id: str) -> int:
        with self._read() as conn:
            row = conn.execute("SELECT turn FROM turns WHERE agent_id = ?", (agent_id,)).fetchone()
        return 0 if row is None else row[0]

    # ---------------------------------------------------------------- tasks
    def task_put(self, row: Mapping[str, Any]) -> None:
        values = dict(row, transcript="[]", owner=row.get("owner"))
        messages = _messages(row["id"], 0, row["transcript"])
        with self._write() as conn:
            conn.execute(_insert("tasks", TASK_FIELDS, "INSERT OR REPLACE"), values)
            conn.execute("DELETE FROM task_messages WHERE task_id = ?", (row["id"],))
            conn.executemany(_ADD_MESSAGE, messages)

    def task_append(self, row: Mapping[str, Any], at: int) -> bool:
        values = dict(row, owner=row.get("owner"))
        messages = _messages(row["id"], at, row["transcript"])
        with self._write() as conn:
            held = conn.execute(
                "SELECT transcript = '[]', (SELECT COALESCE(MAX(seq) + 1, 0) FROM task_messages "
                "WHERE task_id = :id) FROM tasks WHERE id = :id",
                values,
            ).fetchone()
            if held is None or not held[0] or held[1] != at:
                return False
            conn.execute(_UPDATE_TASK, values)
            conn.executemany(_ADD_MESSAGE, messages)
        return True

    @staticmethod
    def _tasks(conn: sqlite3.Connection, rows: Iterable[sqlite3.Row]) -> list[dict[str, Any]]:
        """Task rows with their transcripts: what an earlier version stored in the row, then
        the messages rows."""
        out = []
        for row in rows:
            transcript = json.loads(row["transcript"])
            added = conn.execute(
                "SELECT message FROM task_messages WHERE task_id = ? ORDER BY seq", (row["id"],)
            ).fetchall()
            if added:
                transcript += json.loads("[" + ",".join(m[0] for m in added) + "]")
            out.append(dict({n: row[n] for n in TASK_FIELDS}, transcript=transcript))
        return out

    def task_get(self, task_id: str) -> dict[str, Any] | None:
        with self._snapshot() as conn:
            rows = conn.execute("SELECT * FROM tasks WHERE id = ?", (task_id,)).fetchall()
            found = self._tasks(conn, rows)
        return found[0] if found else None

    def task_list(self, agent_id: str) -> list[dict[str, Any]]:
        with self._snapshot() as conn:
            rows = conn.execute(
                "SELECT * FROM tasks WHERE agent_id = ? ORDER BY created_at, id", (agent_id,)
            ).fetchall()
            return self._tasks(conn, rows)

    def task_open(self, agent_id: str) -> list[dict[str, Any]]:
        with self._snapshot() as conn:
            rows = conn.execute(
                "SELECT * FROM tasks WHERE agent_id = ? AND state IN ('queued', 'running') "
                "ORDER BY created_at, id",
                (agent_id,),
            ).fetchall()
            return self._tasks(conn, rows)

    def task_interrupt(
        self, task_id: str, owner: str | None, at: float, error: str
    ) -> dict[str, Any] | None:
        with self._write() as conn:
            rows = conn.execute(
                "UPDATE tasks SET state = 'interrupted', error = ?, updated_at = ? "
                "WHERE id = ? AND state IN ('queued', 'running') AND owner IS ? RETURNING *",
                (error, float(at), task_id, owner),
            ).fetchall()
            found = self._tasks(conn, rows)
        return found[0] if found else None

    def owner_beat(self, owner: str, until: float) -> None:
        with self._write() as conn:
            conn.execute(
                "INSERT INTO owners (owner, lease_until) VALUES (?, ?) "
                "ON CONFLICT (owner) DO UPDATE SET lease_until = excluded.lease_until",
                (owner, float(until)),
            )
            conn.execute("DELETE FROM owners WHERE lease_until < ?", (until - LEASE_KEEP_S,))

    def owner_lease(self, owner: str) -> float | None:
        with self._read() as conn:
            row = conn.execute(
                "SELECT lease_until FROM owners WHERE owner = ?", (owner,)
            ).fetchone()
        return None if row is None else float(row[0])

    # -------------------------------------------------------- question queue
    def qq_propose(
        self, row: Mapping[str, Any], norm_text: str, *, retention_turns: int, cooldown_turns: int
    ) -> tuple[dict[str, Any], bool]:
        agent, turn = row["agent_id"], row["created_turn"]
        args = {
            "a": agent,
            "t": turn,
            "c": cooldown_turns,
            "r": retention_turns,
            "norm": norm_text,
            "kind": row["kind"],
            "keys": _dumps(list(row["target_keys"])),
        }
        with self._write() as conn:
            dup = conn.execute(
                f"""SELECT * FROM candidates WHERE candidate_id IN (
                        SELECT candidate_id FROM candidates
                         WHERE agent_id = :a AND norm_text = :norm
                        UNION
                        SELECT k.candidate_id FROM candidate_keys k
                          JOIN candidates c2 ON c2.candidate_id = k.candidate_id
                         WHERE k.agent_id = :a AND c2.kind = :kind
                           AND k.target_key IN (SELECT value FROM json_each(:keys)))
                    AND ({_LIVE_OPEN} OR (status = 'answered' AND
                         :t - COALESCE(resolved_turn, last_seen_turn, created_turn) <= :r))""",
                args,
            ).fetchall()
            # The oldest wins. Sorted here: an ORDER BY makes SQLite's planner scan the table.
            oldest = min(dup, key=lambda r: (r["created_turn"], r["candidate_id"]), default=None)
            if oldest is not None:
                found = _candidate(oldest)
                if found["status"] != "answered" and turn > found["last_seen_turn"]:
                    conn.execute(
                        "UPDATE candidates SET last_seen_turn = ? WHERE candidate_id = ?",
                        (turn, found["candidate_id"]),
                    )
                    found["last_seen_turn"] = turn
                return found, False
            values = dict(row)
            for name in _JSON_FIELDS:
                values[name] = _dumps(values[name])
            values["norm_text"] = norm_text
            conn.execute(_insert("candidates", (*CANDIDATE_FIELDS, "norm_text")), values)
            cid = row["candidate_id"]
            conn.executemany(
                "INSERT OR IGNORE INTO candidate_keys VALUES (?, ?, ?)",
                [(agent, k, cid) for k in row["target_keys"]],
            )
            conn.executemany(
                "INSERT OR IGNORE INTO candidate_cues VALUES (?, ?, ?)",
                [(agent, cue, cid) for cue in row["cue_tokens"]],
            )
            return dict(row), True

    def qq_note_use(
        self, agent_id: str, keys: Iterable[str], turn: int, *, cooldown_turns: int
    ) -> int:
        with self._write() as conn:
            cur = conn.execute(
                f"""UPDATE candidates SET last_seen_turn = :t
                     WHERE candidate_id IN (
                        SELECT candidate_id FROM candidate_keys
                         WHERE agent_id = :a AND target_key IN (SELECT value FROM json_each(:keys)))
                       AND last_seen_turn < :t AND {_LIVE_OPEN}""",
                {"a": agent_id, "t": turn, "c": cooldown_turns, "keys": _dumps(list(keys))},
            )
            return cur.rowcount

    def qq_sweep(self, agent_id: str, turn: int, *, cooldown_turns: int) -> int:
        args = {"a": agent_id, "t": turn, "c": cooldown_turns}
        ignored = """agent_id = :a AND status = 'delivered'
                     AND COALESCE(delivered_turn, created_turn) + :c <= :t"""
        past = "agent_id = :a AND status IN ('pending', 'cooled') AND expires_turn < :t"
        with self._read() as conn:
            # Reads first, so the common case (nothing to do) takes no write lock.
            due = conn.execute(
                f"SELECT EXISTS (SELECT 1 FROM candidates WHERE {ignored}) "
                f"OR EXISTS (SELECT 1 FROM candidates WHERE {past})",
                args,
            ).fetchone()[0]
        if not due:
            return 0
        with self._write() as conn:
            conn.execute(
                f"""UPDATE candidates SET status = 'cooled', resolved_turn = :t,
                        cooldown_until = COALESCE(delivered_turn, created_turn) + :c
                     WHERE {ignored}""",
                args,
            )
            cur = conn.execute(
                f"UPDATE candidates SET status = 'expired', resolved_turn = :t WHERE {past}", args
            )
            return cur.rowcount

    def qq_select(
        self,
        agent_id: str,
        turn: int,
        *,
        budget_turns: int,
        cooldown_turns: int,
        recent_use_turns: int,
        signals: Sequence[str],
        cues: Sequence[str] | None,
        limit: int,
        checked_kinds: Sequence[str],
    ) -> tuple[str, list[dict[str, Any]]]:
        last = self.qq_last_delivery(agent_id)
        if last is not None and turn < last + budget_turns:
            return "closed", []
        self.qq_sweep(agent_id, turn, cooldown_turns=cooldown_turns)
        eligible = self._eligible(agent_id, turn, recent_use_turns, signals, cues, limit)
        if not eligible:
            return "none", []
        checked = set(checked_kinds)
        if eligible[0][1] not in checked:
            leading = []
            for candidate_id, kind in eligible:
                if kind in checked:
                    break
                leading.append(candidate_id)
            row = self.qq_deliver(agent_id, turn, budget_turns, leading)
            return "delivered", [] if row is None else [row]
        prefix = []
        for candidate_id, kind in eligible:
            prefix.append(candidate_id)
            if kind not in checked:
                break
        rows = {r["candidate_id"]: r for r in map(self.qq_get, prefix) if r is not None}
        return "check", [rows[c] for c in prefix if c in rows]

    def _eligible(
        self,
        agent_id: str,
        turn: int,
        recent_use_turns: int,
        signals: Sequence[str],
        cues: Sequence[str] | None,
        limit: int,
    ) -> list[tuple[str, str]]:
        cue_clause = ""
        args: dict[str, Any] = {
            "a": agent_id,
            "t": turn,
            "lo": turn - recent_use_turns,
            "signals": _dumps(list(signals)),
            "limit": limit,
        }
        with self._read() as conn:
            if cues is not None:
                args["cues"] = _dumps(list(cues))
                hit = conn.execute(
                    """SELECT 1 FROM candidate_cues WHERE agent_id = :a
                         AND cue IN (SELECT value FROM json_each(:cues)) LIMIT 1""",
                    args,
                ).fetchone()
                if hit is None:
                    return []
                cue_clause = """AND EXISTS (SELECT 1 FROM candidate_cues q
                                 WHERE q.candidate_id = c.candidate_id
                                   AND q.cue IN (SELECT value FROM json_each(:cues)))"""
            rows = conn.execute(
                f"""SELECT candidate_id, kind FROM candidates c INDEXED BY cand_impact
                     WHERE agent_id = :a AND status IN ('pending', 'cooled')
                       AND last_seen_turn BETWEEN :lo AND :t
                       AND expires_turn >= :t
                       AND (cooldown_until IS NULL OR cooldown_until <= :t)
                       AND ambiguity_signal IN (SELECT value FROM json_each(:signals))
                       {cue_clause}
                     ORDER BY {_IMPACT_ORDER} LIMIT :limit""",
                args,
            ).fetchall()
        return [(r[0], r[1]) for r in rows]

    def qq_deliver(
        self,
        agent_id: str,
        turn: int,
        budget_turns: int,
        candidate_ids: Sequence[str],
        expire: Sequence[tuple[str, str]] = (),
    ) -> dict[str, Any] | None:
        with self._write() as conn:
            for candidate_id, status in expire:
                conn.execute(
                    """UPDATE candidates SET status = 'expired', resolved_turn = ?
                        WHERE candidate_id = ? AND agent_id = ? AND status = ?""",
                    (turn, candidate_id, agent_id, status),
                )
            bucket = conn.execute(_LAST_DELIVERY, (agent_id,)).fetchone()
            if bucket is not None and turn < bucket[0] + budget_turns:
                return None
            row = conn.execute(
                """SELECT c.* FROM json_each(:ids) j
                     JOIN candidates c ON c.candidate_id = j.value
                    WHERE c.agent_id = :a AND c.status IN ('pending', 'cooled')
                      AND (c.cooldown_until IS NULL OR c.cooldown_until <= :t)
                      AND c.expires_turn >= :t
                    ORDER BY j.key LIMIT 1""",
                {"ids": _dumps(list(candidate_ids)), "a": agent_id, "t": turn},
            ).fetchone()
            if row is None:
                return None
            conn.execute(
                """UPDATE candidates SET status = 'delivered', ask_count = ask_count + 1,
                        delivered_turn = :t, resolved_turn = NULL
                    WHERE candidate_id = :id""",
                {"t": turn, "id": row["candidate_id"]},
            )
            conn.execute(
                """INSERT INTO question_budget (agent_id, last_delivery_turn) VALUES (?, ?)
                   ON CONFLICT (agent_id)
                   DO UPDATE SET last_delivery_turn = excluded.last_delivery_turn""",
                (agent_id, turn),
            )
            claimed = _candidate(row)
        claimed.update(
            status="delivered",
            ask_count=claimed["ask_count"] + 1,
            delivered_turn=turn,
            resolved_turn=None,
        )
        return claimed

    def qq_claim(
        self,
        agent_id: str,
        candidate_id: str,
        from_statuses: Sequence[str],
        updates: Mapping[str, Any],
        guard: Mapping[str, Any] | None = None,
    ) -> bool:
        check_claimable(updates, guard)
        sets = ", ".join(f"{f} = :u_{f}" for f in updates)
        guards = "".join(f" AND {f} IS :g_{f}" for f in guard or {})
        args: dict[str, Any] = {
            "id": candidate_id,
            "a": agent_id,
            "from": _dumps(list(from_statuses)),
        }
        args.update({f"u_{f}": v for f, v in updates.items()})
        args.update({f"g_{f}": v for f, v in (guard or {}).items()})
        with self._write() as conn:
            cur = conn.execute(
                f"""UPDATE candidates SET {sets} WHERE candidate_id = :id AND agent_id = :a
                      AND status IN (SELECT value FROM json_each(:from)){guards}""",
                args,
            )
            return cur.rowcount == 1

    def qq_open(self, agent_id: str) -> list[dict[str, Any]]:
        with self._read() as conn:
            rows = conn.execute(
                f"""SELECT * FROM candidates WHERE agent_id = ?
                     AND status IN ('pending', 'delivered', 'cooled') ORDER BY {_IMPACT_ORDER}""",
                (agent_id,),
            ).fetchall()
        return [_candidate(r) for r in rows]

    def qq_get(self, candidate_id: str) -> dict[str, Any] | None:
        with self._read() as conn:
            row = conn.execute(
                "SELECT * FROM candidates WHERE candidate_id = ?", (candidate_id,)
            ).fetchone()
        return None if row is None else _candidate(row)

    def qq_list(self, agent_id: str | None = None) -> list[dict[str, Any]]:
        with self._read() as conn:
            if agent_id is None:
                rows = conn.execute(
                    "SELECT * FROM candidates ORDER BY agent_id, created_turn, candidate_id"
                ).fetchall()
            else:
                rows = conn.execute(
                    "SELECT * FROM candidates WHERE agent_id = ? "
                    "ORDER BY created_turn, candidate_id",
                    (agent_id,),
                ).fetchall()
        return [_candidate(r) for r in rows]

    def qq_prune(self, agent_id: str, current_turn: int, retention_turns: int) -> int:
        with self._write() as conn:  # the cand_deleted trigger drops their keys and cues
            cur = conn.execute(
                """DELETE FROM candidates WHERE agent_id = ? AND status != 'pending'
                     AND ? - COALESCE(resolved_turn, last_seen_turn, created_turn) > ?""",
                (agent_id, current_turn, retention_turns),
            )
            return cur.rowcount

    def qq_last_delivery(self, agent_id: str) -> int | None:
        with self._read() as conn:
            row = conn.execute(_LAST_DELIVERY, (agent_id,)).fetchone()
        return None if row is None else row[0]

    def qq_agents(self) -> dict[str, int | None]:
        with self._read() as conn:
            agents: dict[str, int | None] = {
                r[0]: None for r in conn.execute("SELECT DISTINCT agent_id FROM candidates")
            }
            budgets = conn.execute("SELECT agent_id, last_delivery_turn FROM question_budget")
            agents.update(dict(budgets.fetchall()))
        return dict(sorted(agents.items()))

    # ------------------------------------------------------------ proposals
    def proposal_put(self, row: Mapping[str, Any]) -> None:
        values = check_proposal(row)
        for name in _PROPOSAL_JSON:
            values[name] = _dumps(values[name])
        with self._write() as conn:
            owner = conn.execute(
                "SELECT agent_id FROM proposals WHERE id = ?", (values["id"],)
            ).fetchone()
            if owner is not None and owner[0] != values["agent_id"]:
                raise ValueError(f"proposal {values['id']} belongs to another agent")
            conn.execute(_insert("proposals", PROPOSAL_FIELDS, "INSERT OR REPLACE"), values)

    def proposal_get(self, proposal_id: str) -> dict[str, Any] | None:
        with self._read() as conn:
            row = conn.execute("SELECT * FROM proposals WHERE id = ?", (proposal_id,)).fetchone()
        return None if row is None else _proposal(row)

    def proposal_list(
        self, agent_id: str, path: str | None = None, statuses: Sequence[str] | None = None
    ) -> list[dict[str, Any]]:
        where, args = "agent_id = :a", {"a": agent_id}
        if path is not None:
            where += " AND path = :p"
            args["p"] = path
        if statuses is not None:
            where += " AND status IN (SELECT value FROM json_each(:s))"
            args["s"] = _dumps(list(statuses))
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT * FROM proposals WHERE {where} ORDER BY created_at, id", args
            ).fetchall()
        return [_proposal(r) for r in rows]

    def proposal_claim(
        self, proposal_id: str, from_statuses: Sequence[str], updates: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        statuses, values = check_proposal_claim(from_statuses, updates)
        for name in _PROPOSAL_JSON:
            if name in values:
                values[name] = _dumps(values[name])
        sets = ", ".join(f"{f} = :u_{f}" for f in values) or "status = status"
        args: dict[str, Any] = {"id": proposal_id, "from": _dumps(statuses)}
        args.update({f"u_{f}": v for f, v in values.items()})
        with self._write() as conn:  # one statement: the status test and the write together
            rows = conn.execute(
                f"""UPDATE proposals SET {sets} WHERE id = :id
                      AND status IN (SELECT value FROM json_each(:from)) RETURNING *""",
                args,
            ).fetchall()
        return _proposal(rows[0]) if rows else None

    def proposal_stamp(self, agent_id: str) -> str:
        # Every put and claim sets updated_at, every prune drops rows: the pair moves.
        with self._read() as conn:
            count, total = conn.execute(
                "SELECT count(*), total(updated_at) FROM proposals WHERE agent_id = ?",
                (agent_id,),
            ).fetchone()
        return f"{count}:{total!r}"

    def proposal_prune(self, agent_id: str, keep_settled: int) -> int:
        check_keep_settled(keep_settled)
        with self._write() as conn:
            cur = conn.execute(
                f"""DELETE FROM proposals WHERE id IN ({_OLD_SETTLED}) AND NOT (
                    status = 'applied' AND task_id IS NOT NULL AND task_id IN (
                        SELECT task_id FROM proposals WHERE agent_id = ?
                           AND task_id IS NOT NULL AND id NOT IN ({_OLD_SETTLED})))""",
                (agent_id, keep_settled, agent_id, agent_id, keep_settled),
            )
            return cur.rowcount
