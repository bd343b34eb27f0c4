"""The storage contract every backend implements.

Upper layers (`memory/`, `gates/`) call only these methods, so they never know which backend
they talk to. Each method is one *atomic step*: the backend makes it indivisible (SQLite: one
`BEGIN IMMEDIATE` transaction; Redis: one Lua script). Rows cross this boundary as plain dicts
whose keys are the public field names (`FACT_FIELDS`, `CANDIDATE_FIELDS`).

Rules that must hold inside an atomic step (dedup, budget grant, compare-and-set, the confidence
update) are specified here and implemented by each backend; the contract tests run every backend
against the same expectations.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import TalosError

FACT_FIELDS = (
    "key",
    "agent_id",
    "statement",
    "subject",
    "attribute",
    "value",
    "source",
    "origin",
    "confidence",
    "evidence_count",
    "corroborations",
    "contradictions",
    "valid_from",
    "invalid_at",
    "superseded_by",
)

TASK_FIELDS = (
    "id",
    "agent_id",
    "state",
    "title",
    "created_at",
    "updated_at",
    "cost",
    "error",
    "transcript",
    "owner",
)

# A task in one of these states has a live process working on it, or had one that died: a
# process that starts marks the latter `interrupted` (`Store.task_interrupt`).
OPEN_TASK_STATES = ("queued", "running")

JOURNAL_FIELDS = ("id", "agent_id", "kind", "target", "payload", "captured_at", "invalid_at")

CANDIDATE_FIELDS = (
    "candidate_id",
    "agent_id",
    "question_text",
    "kind",
    "source_module",
    "target_keys",
    "options",
    "ambiguity_signal",
    "status",
    "ask_count",
    "created_turn",
    "expires_turn",
    "last_seen_turn",
    "cooldown_until",
    "answer_option",
    "resolved_turn",
    "cue_tokens",
    "delivered_turn",
    "disjunction_id",
)

# The candidate fields a compare-and-set (`Store.qq_claim`) may write or guard on.
CLAIMABLE_FIELDS = frozenset(
    ("status", "cooldown_until", "answer_option", "resolved_turn", "delivered_turn")
)

ANSWERABLE_STATUSES = ("delivered", "pending")

PROPOSAL_FIELDS = (
    "id",
    "agent_id",
    "task_id",
    "path",
    "base_hash",
    "base_text",
    "new_text",
    "version",
    "hunks",
    "status",
    "applied_hunks",
    "applied_hash",
    "undo_text",
    "created_at",
    "updated_at",
)

PROPOSAL_STATUSES = ("pending", "applied", "partly_applied", "rejected", "stale", "undone")

# Still to review: kept by `proposal_prune`. Every other status is settled: it may delete those.
OPEN_PROPOSAL_STATUSES = ("pending", "partly_applied")
SETTLED_PROPOSAL_STATUSES = tuple(s for s in PROPOSAL_STATUSES if s not in OPEN_PROPOSAL_STATUSES)


PROBE_AGENT = "talos:probe"  # the store probe writes only this agent's turn counter
# How long an atomic step waits (SQLite: for another writer; Redis: for the server) when the
# URL sets no `timeout=`: here, not in a backend, because both backends and `faults` read it.
DEFAULT_TIMEOUT_S = 2.0


class StoreError(TalosError):
    """A store could not be opened or an atomic step failed. The message names the store URL
    (with any password removed) and says what was wrong; it never carries a traceback's worth
    of internals to the person.

    `reason` says what kind of fault it is (`faults.py`: read-only, full, corrupt, unreachable,
    slow, busy, closed, other), so a daemon can say how to fix it."""

    def __init__(self, message: str, reason: str = "other") -> None:
        super().__init__(message)
        self.reason = reason


def parse_timeout(shown: str, value: str) -> float:
    """A store URL's `timeout=` query value (seconds, >= 0), or a StoreError naming it."""
    try:
        timeout = float(value)
    except ValueError:
        timeout = -1.0
    if not timeout >= 0:
        raise StoreError(
            f"store URL {shown!r}: timeout must be a number of seconds >= 0, got {value!r}"
        )
    return timeout


def check_claimable(updates: Mapping[str, Any], guard: Mapping[str, Any] | None) -> None:
    """A claim may only touch CLAIMABLE_FIELDS: the rest of a candidate never changes by CAS."""
    fields = set(updates) | set(guard or {})
    if not fields <= CLAIMABLE_FIELDS:
        raise ValueError(f"fields not claimable: {sorted(fields - CLAIMABLE_FIELDS)}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_proposal_field(name: str, value: Any) -> Any:
    """`value` as stored for proposal field `name`, or ValueError naming the field."""

    def bad(expected: str) -> ValueError:
        return ValueError(f"proposal field {name!r} must be {expected}, got {type(value).__name__}")

    if name in ("id", "agent_id", "path", "base_hash"):
        if not isinstance(value, str) or not value:
            raise bad("a non-empty string")
        return value
    if name in ("base_text", "new_text"):
        if not isinstance(value, str):
            raise bad("a string")
        return value
    if name in ("task_id", "applied_hash", "undo_text"):
        if value is not None and not isinstance(value, str):
            raise bad("a string or None")
        return value
    if name == "version":
        if value is not None and not _is_int(value):
            raise bad("an int or None")
        return value
    if name == "status":
        if value not in PROPOSAL_STATUSES:
            raise ValueError(
                f"proposal field 'status' must be one of {', '.join(PROPOSAL_STATUSES)}, "
                f"got {value!r:.40}"
            )
        return value
    if name == "hunks":
        if not isinstance(value, list | tuple) or not all(isinstance(h, dict) for h in value):
            raise bad("a list of objects")
        return [dict(h) for h in value]
    if name == "applied_hunks":
        if not isinstance(value, list | tuple) or not all(_is_int(i) for i in value):
            raise bad("a list of ints")
        return list(value)
    if name in ("created_at", "updated_at"):
        if not (_is_int(value) or isinstance(value, float)) or value != value:
            raise bad("a number of seconds")
        return float(value)
    raise ValueError(f"unknown proposal field {name!r}")


def check_proposal(row: Mapping[str, Any]) -> dict[str, Any]:
    """A proposal row with every PROPOSAL_FIELDS (and no other), normalized: JSON fields as
    lists, times as floats. ValueError naming the first field that is missing or wrong."""
    missing = [f for f in PROPOSAL_FIELDS if f not in row]
    if missing:
        raise ValueError(f"proposal row is missing field(s): {', '.join(missing)}")
    unknown = sorted(set(row) - set(PROPOSAL_FIELDS))
    if unknown:
        raise ValueError(f"unknown proposal field(s): {', '.join(unknown)}")
    return {f: _check_proposal_field(f, row[f]) for f in PROPOSAL_FIELDS}


def check_proposal_claim(
    from_statuses: Sequence[str], updates: Mapping[str, Any]
) -> tuple[list[str], dict[str, Any]]:
    """The arguments of `Store.proposal_claim`, checked: known statuses, and updates to known
    fields other than `id` and `agent_id` (which never change)."""
    if isinstance(from_statuses, str):
        raise ValueError("from_statuses must be a sequence of statuses, not one string")
    statuses = list(from_statuses)
    unknown = [s for s in statuses if s not in PROPOSAL_STATUSES]
    if unknown:
        raise ValueError(f"unknown proposal status(es): {unknown!r}")
    fixed = sorted(set(updates) & {"id", "agent_id"})
    if fixed:
        raise ValueError(f"a claim cannot change proposal field(s): {', '.join(fixed)}")
    return statuses, {f: _check_proposal_field(f, v) for f, v in updates.items()}


def check_keep_settled(keep_settled: int) -> None:
    if not _is_int(keep_settled) or keep_settled < 0:
        raise ValueError(f"keep_settled must be an int >= 0, got {keep_settled!r}")


class Store(ABC):
    """One open connection to a Talos store. Safe to share between the threads of a process."""

    url: str  # redacted form of the URL it was opened with

    @abstractmethod
    def close(self) -> None:
        """Release the connection. Every later call raises StoreError."""

    def local_files(self) -> list[Path]:
        """Files on this machine that hold the store, if any: the command sandbox hides them."""
        return []

    def probe(self) -> None:
        """Prove the store takes writes now: one write step and one read (of the reserved
        agent PROBE_AGENT, whose turn counter nothing else reads). StoreError, with its reason,
        otherwise. A daemon whose store failed calls it to know when it is back."""
        self.turn_next(PROBE_AGENT)
        self.turn_current(PROBE_AGENT)

    # ---------------------------------------------------------------- facts
    @abstractmethod
    def fact_insert(self, row: Mapping[str, Any]) -> None:
        """Insert a new fact row (all FACT_FIELDS)."""

    @abstractmethod
    def fact_get(self, key: str) -> dict[str, Any] | None: ...

    @abstractmethod
    def fact_list(self, agent_id: str | None = None) -> list[dict[str, Any]]:
        """Every fact (of one agent, or all agents by agent id), in insertion order."""

    @abstractmethod
    def fact_observe(
        self, observations: Mapping[str, Sequence[float]], cap: int
    ) -> dict[str, dict[str, Any]]:
        """Apply, in one atomic step, each key's signals in order with the capped-Bayesian rule
        (`memory.confidence.update`): `c' = clamp01(c + (s - c) / (min(n + 1, cap) + 1))`,
        `n += 1`, and `corroborations += 1` when `s >= 0.5` else `contradictions += 1`.
        Unknown keys are skipped. Returns the updated rows by key."""

    @abstractmethod
    def fact_close(self, key: str, at: float, successor: str | None) -> bool:
        """Close `key`'s validity interval (`invalid_at = at`, `superseded_by = successor`) if
        it is still open. Returns whether it was closed by this call."""

    # -------------------------------------------------------------- journal
    @abstractmethod
    def journal_add(self, row: Mapping[str, Any]) -> None:
        """Append an annotation (all JOURNAL_FIELDS; `payload` a dict), live."""

    @abstractmethod
    def journal_live(self, agent_id: str) -> list[dict[str, Any]]:
        """The agent's live annotations, oldest first."""

    @abstractmethod
    def journal_close(self, agent_id: str, entry_id: str, at: float) -> bool:
        """Close a live annotation (`invalid_at = at`). Returns whether this call closed it."""

    # ---------------------------------------------------------------- turns
    @abstractmethod
    def turn_next(self, agent_id: str) -> int:
        """Atomically advance the agent's turn counter and return the new turn (first: 1)."""

    @abstractmethod
    def turn_current(self, agent_id: str) -> int:
        """The agent's current turn (0 before the first)."""

    # ---------------------------------------------------------------- tasks
    @abstractmethod
    def task_put(self, row: Mapping[str, Any]) -> None:
        """Create or replace a task record (all TASK_FIELDS; `transcript` a list of messages)."""

    @abstractmethod
    def task_append(self, row: Mapping[str, Any], at: int) -> bool:
        """A step of a task: its record's fields set from `row` (all TASK_FIELDS), and the
        messages of `row["transcript"]` added to the end of its stored transcript, iff the
        record exists (written by `task_put`) and its transcript holds `at` messages; then
        True. Else nothing changes and False: a write was lost in between, or another wrote
        the record, and the caller writes it whole (`task_put`). A step's cost does not grow
        with the transcript."""

    @abstractmethod
    def task_get(self, task_id: str) -> dict[str, Any] | None: ...

    @abstractmethod
    def task_list(self, agent_id: str) -> list[dict[str, Any]]:
        """The agent's tasks, oldest first."""

    @abstractmethod
    def task_open(self, agent_id: str) -> list[dict[str, Any]]:
        """The agent's tasks whose state is one of OPEN_TASK_STATES, oldest first: what a
        starting process checks for owners that died."""

    @abstractmethod
    def task_interrupt(
        self, task_id: str, owner: str | None, at: float, error: str
    ) -> dict[str, Any] | None:
        """The atomic recovery step: iff the task exists, its state is one of OPEN_TASK_STATES
        and its `owner` is `owner` (None matches a record without one), set state
        `interrupted`, `error` and `updated_at = at`, and return the updated row; else None
        (another process recovered it first, or its owner wrote meanwhile)."""

    @abstractmethod
    def owner_beat(self, owner: str, until: float) -> None:
        """Record that the process `owner` is alive until `until` (seconds since the epoch):
        its lease. Leases long expired may be deleted by the same step."""

    @abstractmethod
    def owner_lease(self, owner: str) -> float | None:
        """Until when `owner` said it is alive; None when it never said so (or long ago)."""

    # -------------------------------------------------------- question queue
    @abstractmethod
    def qq_propose(
        self, row: Mapping[str, Any], norm_text: str, *, retention_turns: int, cooldown_turns: int
    ) -> tuple[dict[str, Any], bool]:
        """Dedup-or-create under the agent's mutual exclusion.

        A duplicate is a candidate of `row["agent_id"]` that is live at `row["created_turn"]`
        (open and not effectively expired, see `qq_note_use`; or answered with
        `turn - coalesce(resolved_turn, last_seen_turn, created_turn) <= retention_turns`) and
        that either has the same kind and a target key in common, or the same `norm_text`.
        The oldest duplicate (created_turn, candidate_id) wins: if open, its `last_seen_turn`
        is raised to the turn (never lowered). Returns `(row, created)`."""

    @abstractmethod
    def qq_note_use(
        self, agent_id: str, keys: Iterable[str], turn: int, *, cooldown_turns: int
    ) -> int:
        """Raise `last_seen_turn` to `turn` on open candidates whose target keys meet `keys`,
        when `turn > last_seen_turn` and the candidate is not effectively expired at `turn`:
        pending or cooled with `turn > expires_turn`, or delivered, ignored for
        `cooldown_turns` and past `expires_turn`. Returns how many were raised."""

    @abstractmethod
    def qq_sweep(self, agent_id: str, turn: int, *, cooldown_turns: int) -> int:
        """Cool every delivered candidate ignored since `coalesce(delivered_turn,
        created_turn) + cooldown_turns <= turn` (cooldown_until = that sum, resolved_turn =
        turn), then expire every pending or cooled candidate with `turn > expires_turn`
        (resolved_turn = turn). Returns how many were expired."""

    @abstractmethod
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
        """The first step of a delivery, in one round trip:

        1. If the budget is closed (a last delivery turn `d` with `turn < d + budget_turns`),
           return `("closed", [])` having read nothing else.
        2. `qq_sweep`.
        3. Walk the eligible candidates in impact order (-last_seen_turn, ask_count,
           created_turn, candidate_id), at most `limit`: pending or cooled, `expires_turn >=
           turn`, out of cooldown, a signal in `signals`, `turn - recent_use_turns <=
           last_seen_turn <= turn`, and (when `cues` is not None) sharing a cue token. The
           walk's cost must not grow with the agent's closed history.
        4. If the first eligible candidate's kind is not in `checked_kinds`, deliver it in this
           step (as `qq_deliver` with the leading unchecked candidates) and return
           `("delivered", [row])`, or `("delivered", [])` if they were all lost meanwhile.
        5. Otherwise return `("check", rows)`: the eligible rows up to and including the first
           unchecked one, for the caller to run its staleness checks on; or `("none", [])`.
        """

    @abstractmethod
    def qq_deliver(
        self,
        agent_id: str,
        turn: int,
        budget_turns: int,
        candidate_ids: Sequence[str],
        expire: Sequence[tuple[str, str]] = (),
    ) -> dict[str, Any] | None:
        """One atomic step: first expire each `(candidate_id, status_read)` in `expire` that
        still has that status (resolved_turn = turn); then, if the budget is open, deliver the
        first of `candidate_ids` that is still pending or cooled, out of cooldown and not
        expired (status delivered, ask_count += 1, delivered_turn = turn, resolved_turn
        cleared) and set the agent's last delivery turn to `turn`. The budget is written only
        when a candidate is claimed. Returns the claimed row."""

    @abstractmethod
    def qq_claim(
        self,
        agent_id: str,
        candidate_id: str,
        from_statuses: Sequence[str],
        updates: Mapping[str, Any],
        guard: Mapping[str, Any] | None = None,
    ) -> bool:
        """Compare-and-set: apply `updates` iff the status is one of `from_statuses` and every
        `guard` field equals its value (None matches NULL)."""

    @abstractmethod
    def qq_open(self, agent_id: str) -> list[dict[str, Any]]:
        """Every open candidate of the agent, in impact order."""

    @abstractmethod
    def qq_get(self, candidate_id: str) -> dict[str, Any] | None: ...

    @abstractmethod
    def qq_list(self, agent_id: str | None = None) -> list[dict[str, Any]]:
        """Every candidate (of one agent, or all agents by agent id), ordered by
        (created_turn, candidate_id)."""

    @abstractmethod
    def qq_prune(self, agent_id: str, current_turn: int, retention_turns: int) -> int:
        """Delete non-pending candidates with `current_turn - coalesce(resolved_turn,
        last_seen_turn, created_turn) > retention_turns`. Returns how many."""

    @abstractmethod
    def qq_last_delivery(self, agent_id: str) -> int | None:
        """One read: the agent's last delivery turn, None before its first question."""

    @abstractmethod
    def qq_agents(self) -> dict[str, int | None]:
        """Every agent with candidates or a budget, with its last delivery turn."""

    # ------------------------------------------------------------ proposals
    @abstractmethod
    def proposal_put(self, row: Mapping[str, Any]) -> None:
        """Create or replace a proposed edit (all PROPOSAL_FIELDS; `hunks` a list of objects,
        `applied_hunks` a list of ints). ValueError names a missing or malformed field, or an
        id that already belongs to another agent."""

    @abstractmethod
    def proposal_get(self, proposal_id: str) -> dict[str, Any] | None: ...

    @abstractmethod
    def proposal_list(
        self, agent_id: str, path: str | None = None, statuses: Sequence[str] | None = None
    ) -> list[dict[str, Any]]:
        """The agent's proposals (of one `path`, with a status in `statuses`, when given),
        oldest first: ordered by (created_at, id)."""

    @abstractmethod
    def proposal_claim(
        self, proposal_id: str, from_statuses: Sequence[str], updates: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        """Compare-and-set, one atomic step: iff the proposal exists and its status is one of
        `from_statuses`, apply `updates` (any fields but `id` and `agent_id`; None clears a
        nullable one) and return the updated row; else None. Of several processes claiming
        the same proposal from the same statuses, exactly one gets the row."""

    @abstractmethod
    def proposal_stamp(self, agent_id: str) -> str:
        """One cheap read that changes whenever any of the agent's proposals is put, claimed
        or pruned, by any process: a server polls it to follow what another one did."""

    @abstractmethod
    def proposal_prune(self, agent_id: str, keep_settled: int) -> int:
        """Delete the agent's settled proposals (every status but pending) beyond the newest
        `keep_settled`, newest by (updated_at, id). Pending ones always stay, and so does an
        applied one of a task that has another proposal kept: a task's applied proposals
        go together, so a rewind of it finds all of them or none. Returns how many were
        deleted."""
