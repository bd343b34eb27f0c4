"""Redis (or Valkey) backend: one store shared by daemons on several machines.

Every atomic step is ONE Lua script (`store/lua/*.lua`, each prefixed with `_lib.lua`), and
every key a script touches is prefixed `talos:{<agent>}:`, so Redis Cluster keeps one agent's
keys on one slot. Two small locator keys per record (`talos:cand:{<id>}` and
`talos:fact:{<key>}`) name the owning agent, so a candidate or fact can be found by id alone.

redis-py 8 retries a failed call up to ten times by default; after a server restart that can
run a script twice. Here retries are off and timeouts explicit: a call either ran once or failed,
and a failure makes the queue fail closed.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import resources
from typing import Any, TypeVar

from . import faults, redis_connect
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

try:
    import redis
    from redis.crc import key_slot
    from redis.exceptions import RedisClusterException
except ImportError:  # pragma: no cover - exercised only without the extra installed
    redis = None  # type: ignore[assignment]
    RedisClusterException = Exception  # type: ignore[assignment,misc]

SCHEMA_KEY = "talos:schema"
SCHEMA_VERSION = 1
LEASE_KEEP_S = 7 * 86400.0  # an owner's lease this long expired is deleted
PASSWORD_ENV = redis_connect.PASSWORD_ENV
# Every agent that wrote facts or candidates, so listing them never scans (a cluster cannot);
# the marker says the set is complete (a store from before it is scanned once).
AGENTS_KEY = "talos:agents"
AGENTS_INDEXED_KEY = "talos:agents:indexed"
_INT_FIELDS = frozenset(
    (
        "ask_count",
        "created_turn",
        "expires_turn",
        "last_seen_turn",
        "cooldown_until",
        "answer_option",
        "resolved_turn",
        "delivered_turn",
    )
)
_JSON_FIELDS = frozenset(("target_keys", "options", "cue_tokens"))
_FACT_FLOATS = frozenset(("confidence", "valid_from", "invalid_at"))
_FACT_INTS = frozenset(("evidence_count", "corroborations", "contradictions"))
_SCRIPTS = (
    "propose",
    "note_use",
    "sweep",
    "select",
    "deliver",
    "claim",
    "prune",
    "fact_insert",
    "fact_observe",
    "fact_close",
    "journal_add",
    "journal_close",
    "task_put",
    "task_append",
    "task_open",
    "task_interrupt",
)
# The steps that must not be lost in a failover: with `?wait=N` each is followed by WAIT.
_DURABLE = frozenset(("deliver", "select", "claim", "fact_observe"))
# Prefixed with `_lib.lua` and `proposal_lib.lua`.
_PROPOSAL_SCRIPTS = ("proposal_put", "proposal_claim", "proposal_prune")

T = TypeVar("T")


@functools.lru_cache(maxsize=4096)
def _slot(key: str) -> int:
    return int(key_slot(key.encode()))


def _prefix(agent_id: str) -> str:
    return "talos:{" + agent_id + "}:"


def _locator(kind: str, ident: str) -> str:
    """The key of a `kind` record's own (`cand`, `task`, `prop`, `fact`: its agent's id;
    `owner`: the owner's lease), hash-tagged by `ident`."""
    return f"talos:{kind}:{{{ident}}}"


def _encode(row: Mapping[str, Any]) -> dict[str, str | None]:
    """A row's fields as a hash holds them: JSON for a list or a dict, `repr` for a float
    (every digit), None kept (the field is left out)."""
    out: dict[str, str | None] = {}
    for name, value in row.items():
        if isinstance(value, list | dict):
            value = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        elif isinstance(value, float):
            value = repr(value)
        out[name] = None if value is None else str(value)
    return out


def _message(message: Any) -> str:
    """One message of a transcript, as the list `tm:<id>` holds it."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"))


def _pairs(flat: Sequence[str]) -> dict[str, str]:
    return dict(zip(flat[::2], flat[1::2], strict=True))


def _decode(raw: Mapping[str, str], fields: Sequence[str], parsers: Mapping[str, Callable]) -> dict:
    """Hash strings back to typed values; an absent field is None."""
    return {
        name: None if raw.get(name) is None else parsers.get(name, str)(raw[name])
        for name in fields
    }


_CANDIDATE_PARSERS: dict[str, Callable] = {
    **dict.fromkeys(_INT_FIELDS, int),
    **dict.fromkeys(_JSON_FIELDS, json.loads),
}
_FACT_PARSERS: dict[str, Callable] = {
    **dict.fromkeys(_FACT_FLOATS, float),
    **dict.fromkeys(_FACT_INTS, int),
}
_TASK_PARSERS: dict[str, Callable] = {
    "created_at": float,
    "updated_at": float,
    "transcript": json.loads,
}
_PROPOSAL_PARSERS: dict[str, Callable] = {
    "version": int,
    "hunks": json.loads,
    "applied_hunks": json.loads,
    "created_at": float,
    "updated_at": float,
}
_JOURNAL_PARSERS: dict[str, Callable] = {
    "payload": json.loads,
    "captured_at": float,
    "invalid_at": float,
}


def _candidate(flat: Sequence[str] | Mapping[str, str]) -> dict[str, Any]:
    raw = flat if isinstance(flat, Mapping) else _pairs(flat)
    return _decode(raw, CANDIDATE_FIELDS, _CANDIDATE_PARSERS)


def _fact(raw: Mapping[str, str]) -> dict[str, Any]:
    return _decode(raw, FACT_FIELDS, _FACT_PARSERS)


def _proposal(raw: Mapping[str, str]) -> dict[str, Any]:
    return _decode(raw, PROPOSAL_FIELDS, _PROPOSAL_PARSERS)


def _reason(exc: Exception) -> str:
    """The kind of a redis-py error (`faults.py`)."""
    text = str(exc)
    if isinstance(exc, redis.TimeoutError):
        return faults.SLOW
    if isinstance(exc, redis.exceptions.ReadOnlyError):
        return faults.READ_ONLY
    if isinstance(exc, redis.exceptions.BusyLoadingError):
        return faults.UNREACHABLE  # restarting: its data still loading
    if isinstance(exc, redis.exceptions.ClusterDownError | redis.exceptions.TryAgainError):
        return faults.UNREACHABLE  # a cluster mid-failover: a slot has no primary yet
    if isinstance(exc, RedisClusterException):
        return faults.UNREACHABLE  # no node reachable, or a slot not covered
    if isinstance(exc, redis.ConnectionError):
        return faults.UNREACHABLE
    if "already exists" in text:
        return faults.REFUSED  # fact_insert.lua: a rule of the data, not a storage fault
    if text.startswith(("OOM", "MISCONF")):
        return faults.FULL  # out of memory, or cannot write its own disk
    return faults.OTHER


def _guarded(method: Callable[..., T]) -> Callable[..., T]:
    """Every failure of the server or the network becomes a StoreError naming the store."""

    @functools.wraps(method)
    def wrapper(self: RedisStore, *args: Any, **kwargs: Any) -> T:
        if self._client is None:
            raise StoreError(f"store {self.url} is closed", faults.CLOSED)
        try:
            return method(self, *args, **kwargs)
        except (redis.RedisError, RedisClusterException) as exc:
            self._indexed_agents.clear()  # a failover may have lost an index entry: write again
            raise StoreError(f"store {self.url}: {exc}", _reason(exc)) from None
        except StoreError:
            self._indexed_agents.clear()
            raise

    return wrapper


class RedisStore(Store):
    """A Talos store in a Redis or Valkey database: one server, a Cluster, or Sentinel's
    primary (`redis_connect.py` reads the URL)."""

    def __init__(self, url: str, raw_url: str) -> None:
        if redis is None:
            raise StoreError(
                f"store {url}: the Redis backend needs the redis package: "
                "pip install 'talos-ls[redis]'"
            )
        self.url = url
        target = redis_connect.parse(url, raw_url)
        self.topology = target.topology
        self._cluster = target.topology == redis_connect.CLUSTER
        self._wait, self._wait_ms = target.wait, target.wait_ms
        self._indexed_agents: set[str] = set()  # this process has put them in AGENTS_KEY
        self._client: Any = None
        try:
            self._client = client = target.client()
        except (ValueError, redis.RedisError, RedisClusterException) as exc:
            self.close()
            raise StoreError(f"cannot reach store {url}: {exc}", _reason(exc)) from None
        try:
            client.ping()
            version = client.get(SCHEMA_KEY)
            if version is None:
                client.setnx(SCHEMA_KEY, SCHEMA_VERSION)
            elif not version.isdigit() or int(version) > SCHEMA_VERSION:
                raise StoreError(
                    f"store {url}: key {SCHEMA_KEY} holds {version!r}: written by a newer "
                    f"Talos or another program (this one knows schema {SCHEMA_VERSION})"
                )
        except (redis.RedisError, RedisClusterException) as exc:
            self.close()
            raise StoreError(f"cannot reach store {url}: {exc}", _reason(exc)) from None
        except TypeError as exc:  # connections are made lazily: a bad parameter shows here
            self.close()
            raise StoreError(f"store URL {url!r}: unknown parameter ({exc})") from None
        except StoreError:
            self.close()
            raise
        lua = resources.files(__package__).joinpath("lua")
        lib = lua.joinpath("_lib.lua").read_text()
        self._scripts = {
            name: client.register_script(lib + "\n" + lua.joinpath(f"{name}.lua").read_text())
            for name in _SCRIPTS
        }
        proposal_lib = lib + "\n" + lua.joinpath("proposal_lib.lua").read_text()
        for name in _PROPOSAL_SCRIPTS:
            self._scripts[name] = client.register_script(
                proposal_lib + "\n" + lua.joinpath(f"{name}.lua").read_text()
            )
        try:  # loaded up front, so even a first call is one round trip
            if self._cluster:  # SCRIPT LOAD goes to every primary
                for script in self._scripts.values():
                    client.script_load(script.script)
            else:
                pipe = client.pipeline(transaction=False)
                for script in self._scripts.values():
                    pipe.script_load(script.script)
                pipe.execute()
        except (redis.RedisError, RedisClusterException) as exc:
            self.close()
            raise StoreError(f"cannot load scripts into store {url}: {exc}", _reason(exc)) from None

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()

    def _run(self, name: str, agent_id: str, *args: Any) -> Any:
        prefix = _prefix(agent_id)
        keys = [prefix + "ids"]
        if self._cluster:
            self._one_slot(name, prefix, keys)
        if self._wait and name in _DURABLE:
            return self._run_durable(name, keys, [prefix, *args])
        return self._scripts[name](keys=keys, args=[prefix, *args])

    def _one_slot(self, name: str, prefix: str, keys: Sequence[str]) -> None:
        """A cluster runs a script on one slot: the keys passed, and every key the script makes
        from `prefix`, must hash alike. An agent id whose hash tag is empty (`talos:{}:...`)
        would hash each key whole, so this is checked, not assumed."""
        slots = {_slot(prefix + "ids"), _slot(prefix + "c:probe"), *map(_slot, keys)}
        if len(slots) > 1:
            raise StoreError(
                f"store {self.url}: script {name} for agent {prefix[7:-2]!r} would touch keys "
                f"of hash slots {sorted(slots)}; a cluster runs a script on one slot only"
            )

    def _run_durable(self, name: str, keys: list[str], args: list[Any]) -> Any:
        """The script, then WAIT on the same connection (one round trip): the step is
        acknowledged only once `wait` replicas hold it, else a StoreError (fail closed)."""
        script = self._scripts[name]
        node_client = self._client
        if self._cluster:  # WAIT counts the writes of this connection: the key's own node
            node_client = self._client.get_redis_connection(self._client.get_node_from_key(keys[0]))
        for attempt in (1, 2):
            pipe = node_client.pipeline(transaction=False)
            pipe.evalsha(script.sha, len(keys), *keys, *args)
            pipe.execute_command("WAIT", self._wait, self._wait_ms)
            try:
                result, acked = pipe.execute()
                break
            except redis.exceptions.NoScriptError:  # a promoted replica: load it, run it then
                node_client.script_load(script.script)
            except (redis.exceptions.MovedError, redis.ConnectionError):
                if self._cluster:  # the slot moved (a failover): the next call reads the map
                    self._client.nodes_manager.initialize()
                raise
            if attempt == 2:
                raise StoreError(f"store {self.url}: script {name} could not be loaded")
        if int(acked) < self._wait:
            raise StoreError(
                f"store {self.url}: a {name} step was not acknowledged by {self._wait} "
                f"replica(s) within {self._wait_ms} ms (wait={self._wait}); a failover now "
                "could lose it, so it is not relied on: are the replicas up?",
                faults.OTHER,
            )
        return result

    # ------------------------------------------------------ agent index
    def _index_agent(self, agent_id: str) -> None:
        """Put the agent in AGENTS_KEY before its first write, once per process: listing every
        agent reads that set (a cluster cannot SCAN one keyspace). Forgotten after any fault,
        so an entry lost in a failover is written again."""
        if agent_id not in self._indexed_agents:
            self._client.sadd(AGENTS_KEY, agent_id)
            self._indexed_agents.add(agent_id)

    def _agents(self) -> list[str]:
        """Every agent that has written facts or candidates. A single-server store from before
        the index is scanned once (then marked); a cluster store always had the index."""
        if not self._cluster and not self._client.exists(AGENTS_INDEXED_KEY):
            found = set()
            for suffix in ("ids", "facts", "bucket"):
                for key in self._client.scan_iter(match="talos:{*}:" + suffix, count=1000):
                    found.add(key[len("talos:{") : -len("}:" + suffix)])
            if found:
                self._client.sadd(AGENTS_KEY, *found)
            self._client.set(AGENTS_INDEXED_KEY, "1")
        return sorted(self._client.smembers(AGENTS_KEY))

    # ---------------------------------------------------------------- facts
    @_guarded
    def fact_insert(self, row: Mapping[str, Any]) -> None:
        self._index_agent(row["agent_id"])
        self._client.set(_locator("fact", row["key"]), row["agent_id"])
        self._run("fact_insert", row["agent_id"], row["key"], json.dumps(_encode(row)))

    def _get_many(self, keys: list[str]) -> list[str | None]:
        """GET of keys on many slots: one MGET, or one per node in a cluster."""
        if self._cluster:
            return list(self._client.mget_nonatomic(keys))
        return list(self._client.mget(keys))

    def _record(self, kind: str, ident: str, letter: str) -> dict[str, str]:
        """The hash of the `kind` record `ident`, found through its `_locator`; {} if none."""
        agent = self._client.get(_locator(kind, ident))
        return {} if agent is None else self._client.hgetall(_prefix(agent) + letter + ident)

    @_guarded
    def fact_get(self, key: str) -> dict[str, Any] | None:
        raw = self._record("fact", key, "f:")
        return _fact(raw) if raw else None

    @_guarded
    def fact_list(self, agent_id: str | None = None) -> list[dict[str, Any]]:
        agents = [agent_id] if agent_id is not None else self._agents()
        return [_fact(raw) for agent in agents for raw in self._indexed(agent, "facts", "f:")]

    @_guarded
    def fact_observe(
        self, observations: Mapping[str, Sequence[float]], cap: int
    ) -> dict[str, dict[str, Any]]:
        keys = list(observations)
        if not keys:
            return {}
        by_agent: dict[str, dict[str, list[float]]] = {}
        for key, agent in zip(
            keys, self._get_many([_locator("fact", k) for k in keys]), strict=True
        ):
            if agent is not None:
                by_agent.setdefault(agent, {})[key] = [float(s) for s in observations[key]]
        out: dict[str, dict[str, Any]] = {}
        for agent, obs in by_agent.items():
            flat = self._run("fact_observe", agent, int(cap), json.dumps(obs))
            for key, fields in zip(flat[::2], flat[1::2], strict=True):
                out[key] = _fact(_pairs(fields))
        return out

    @_guarded
    def fact_close(self, key: str, at: float, successor: str | None) -> bool:
        agent = self._client.get(_locator("fact", key))
        if agent is None:
            return False
        return self._run("fact_close", agent, key, repr(float(at)), successor or "") == 1

    # -------------------------------------------------------------- journal
    @_guarded
    def journal_add(self, row: Mapping[str, Any]) -> None:
        self._run(
            "journal_add", row["agent_id"], row["id"], json.dumps(_encode(row), ensure_ascii=False)
        )

    @_guarded
    def journal_live(self, agent_id: str) -> list[dict[str, Any]]:
        rows = self._indexed(agent_id, "journal", "j:")
        return [_decode(raw, JOURNAL_FIELDS, _JOURNAL_PARSERS) for raw in rows]

    @_guarded
    def journal_close(self, agent_id: str, entry_id: str, at: float) -> bool:
        return self._run("journal_close", agent_id, entry_id, repr(float(at))) == 1

    # ---------------------------------------------------------------- turns
    @_guarded
    def turn_next(self, agent_id: str) -> int:
        return int(self._client.incr(_prefix(agent_id) + "turn"))  # one atomic command

    @_guarded
    def turn_current(self, agent_id: str) -> int:
        return int(self._client.get(_prefix(agent_id) + "turn") or 0)

    # ---------------------------------------------------------------- tasks
    @_guarded
    def task_put(self, row: Mapping[str, Any]) -> None:
        self._client.set(_locator("task", row["id"]), row["agent_id"])
        self._run(
            "task_put",
            row["agent_id"],
            row["id"],
            repr(float(row["created_at"])),
            json.dumps(_encode(dict(row, transcript=[])), ensure_ascii=False),
            *map(_message, row["transcript"]),
        )

    @_guarded
    def task_append(self, row: Mapping[str, Any], at: int) -> bool:
        fields = _encode({k: v for k, v in row.items() if k != "transcript"})
        return (
            self._run(
                "task_append",
                row["agent_id"],
                row["id"],
                repr(float(row["created_at"])),
                json.dumps(fields, ensure_ascii=False),
                str(int(at)),
                *map(_message, row["transcript"]),
            )
            == 1
        )

    def _tasks(self, raws: Sequence[Mapping[str, str]]) -> list[dict[str, Any]]:
        """Task hashes with their transcripts: what an earlier version stored in the hash,
        then the list `tm:<id>`."""
        pipe = self._client.pipeline(transaction=False)
        for raw in raws:
            pipe.lrange(_prefix(raw["agent_id"]) + "tm:" + raw["id"], 0, -1)
        out = []
        for raw, added in zip(raws, pipe.execute() if raws else [], strict=True):
            row = _decode(raw, TASK_FIELDS, _TASK_PARSERS)
            row["transcript"] = (row["transcript"] or []) + (
                json.loads("[" + ",".join(added) + "]") if added else []
            )
            out.append(row)
        return out

    @_guarded
    def task_get(self, task_id: str) -> dict[str, Any] | None:
        raw = self._record("task", task_id, "t:")
        return self._tasks([raw])[0] if raw else None

    @_guarded
    def task_list(self, agent_id: str) -> list[dict[str, Any]]:
        return self._tasks(self._indexed(agent_id, "tasks", "t:"))

    @_guarded
    def task_open(self, agent_id: str) -> list[dict[str, Any]]:
        return self._tasks(self._hashes(agent_id, "t:", self._run("task_open", agent_id)))

    @_guarded
    def task_interrupt(
        self, task_id: str, owner: str | None, at: float, error: str
    ) -> dict[str, Any] | None:
        agent = self._client.get(_locator("task", task_id))
        if agent is None:
            return None
        flat = self._run("task_interrupt", agent, task_id, owner or "", repr(float(at)), error)
        return self._tasks([_pairs(flat)])[0] if flat else None

    @_guarded
    def owner_beat(self, owner: str, until: float) -> None:
        # Redis deletes a lease LEASE_KEEP_S after it expired, as SQLite's owner_beat does.
        self._client.set(
            _locator("owner", owner), repr(float(until)), pxat=int((until + LEASE_KEEP_S) * 1000)
        )

    @_guarded
    def owner_lease(self, owner: str) -> float | None:
        value = self._client.get(_locator("owner", owner))
        return None if value is None else float(value)

    # -------------------------------------------------------- question queue
    @_guarded
    def qq_propose(
        self, row: Mapping[str, Any], norm_text: str, *, retention_turns: int, cooldown_turns: int
    ) -> tuple[dict[str, Any], bool]:
        agent = row["agent_id"]
        self._index_agent(agent)
        created, flat = self._run(
            "propose",
            agent,
            json.dumps(_encode(row), ensure_ascii=False),
            hashlib.sha1(norm_text.encode()).hexdigest(),
            int(row["created_turn"]),
            int(cooldown_turns),
            int(retention_turns),
        )
        found = _candidate(flat)
        if created:
            self._client.set(_locator("cand", found["candidate_id"]), agent)
        return found, bool(created)

    @_guarded
    def qq_note_use(
        self, agent_id: str, keys: Iterable[str], turn: int, *, cooldown_turns: int
    ) -> int:
        return int(
            self._run("note_use", agent_id, json.dumps(list(keys)), int(turn), int(cooldown_turns))
        )

    @_guarded
    def qq_sweep(self, agent_id: str, turn: int, *, cooldown_turns: int) -> int:
        return int(self._run("sweep", agent_id, int(turn), int(cooldown_turns)))

    @_guarded
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
        reply = self._run(
            "select",
            agent_id,
            int(turn),
            int(budget_turns),
            int(cooldown_turns),
            int(recent_use_turns),
            json.dumps(list(signals)),
            "" if cues is None else json.dumps(list(cues), ensure_ascii=False),
            int(limit),
            json.dumps(list(checked_kinds)),
        )
        if reply[0] == "check":
            return "check", [_candidate(row) for row in json.loads(reply[1])]
        return reply[0], [_candidate(flat) for flat in reply[1:]]

    @_guarded
    def qq_deliver(
        self,
        agent_id: str,
        turn: int,
        budget_turns: int,
        candidate_ids: Sequence[str],
        expire: Sequence[tuple[str, str]] = (),
    ) -> dict[str, Any] | None:
        flat = self._run(
            "deliver",
            agent_id,
            int(turn),
            int(budget_turns),
            json.dumps(list(candidate_ids)),
            json.dumps([list(pair) for pair in expire]),
        )
        return _candidate(flat) if flat else None

    @_guarded
    def qq_claim(
        self,
        agent_id: str,
        candidate_id: str,
        from_statuses: Sequence[str],
        updates: Mapping[str, Any],
        guard: Mapping[str, Any] | None = None,
    ) -> bool:
        check_claimable(updates, guard)
        return (
            self._run(
                "claim",
                agent_id,
                candidate_id,
                json.dumps(list(from_statuses)),
                json.dumps(_encode(updates)),
                json.dumps(_encode(guard or {})),
            )
            == 1
        )

    def _hashes(self, agent_id: str, kind: str, ids: Sequence[str]) -> list[dict[str, str]]:
        """The hashes `<kind><id>` of an agent, in the order of `ids`; missing ones left out."""
        pipe = self._client.pipeline(transaction=False)
        for item in ids:
            pipe.hgetall(_prefix(agent_id) + kind + item)
        return [raw for raw in pipe.execute() if raw]

    def _indexed(self, agent_id: str, index: str, kind: str) -> list[dict[str, str]]:
        """The hashes whose ids the sorted set `index` holds, in its order."""
        return self._hashes(agent_id, kind, self._client.zrange(_prefix(agent_id) + index, 0, -1))

    def _load(self, agent_id: str, ids: Sequence[str]) -> list[dict[str, Any]]:
        return [_candidate(raw) for raw in self._hashes(agent_id, "c:", ids)]

    @_guarded
    def qq_open(self, agent_id: str) -> list[dict[str, Any]]:
        prefix = _prefix(agent_id)
        ids = self._client.zrange(prefix + "exp", 0, -1) + self._client.zrange(
            prefix + "dlv", 0, -1
        )
        rows = self._load(agent_id, ids)
        rows.sort(
            key=lambda r: (
                -r["last_seen_turn"],
                r["ask_count"],
                r["created_turn"],
                r["candidate_id"],
            )
        )
        return rows

    @_guarded
    def qq_get(self, candidate_id: str) -> dict[str, Any] | None:
        raw = self._record("cand", candidate_id, "c:")
        return _candidate(raw) if raw else None

    @_guarded
    def qq_list(self, agent_id: str | None = None) -> list[dict[str, Any]]:
        agents = [agent_id] if agent_id is not None else self._agents()
        out: list[dict[str, Any]] = []
        for agent in agents:
            out.extend(_candidate(raw) for raw in self._indexed(agent, "ids", "c:"))
        return out

    @_guarded
    def qq_prune(self, agent_id: str, current_turn: int, retention_turns: int) -> int:
        deleted = self._run("prune", agent_id, int(current_turn), int(retention_turns))
        pipe = self._client.pipeline(transaction=False)  # one slot per locator: no multi-key DEL
        for cid in deleted:
            pipe.delete(_locator("cand", cid))
        pipe.execute()
        return len(deleted)

    @_guarded
    def qq_last_delivery(self, agent_id: str) -> int | None:
        last = self._client.get(_prefix(agent_id) + "bucket")
        return None if last is None else int(last)

    @_guarded
    def qq_agents(self) -> dict[str, int | None]:
        agents = self._agents()
        pipe = self._client.pipeline(transaction=False)
        for agent in agents:
            pipe.exists(_prefix(agent) + "ids")
            pipe.get(_prefix(agent) + "bucket")
        replies = pipe.execute()
        return {
            agent: None if last is None else int(last)
            for agent, has_ids, last in zip(agents, replies[::2], replies[1::2], strict=True)
            if has_ids or last is not None
        }

    # ------------------------------------------------------------ proposals
    @_guarded
    def proposal_put(self, row: Mapping[str, Any]) -> None:
        values = check_proposal(row)
        agent, pid = values["agent_id"], values["id"]
        locator = _locator("prop", pid)
        owner = self._client.get(locator)
        if owner is not None and owner != agent:
            raise ValueError(f"proposal {pid} belongs to another agent")
        self._client.set(locator, agent)
        self._run("proposal_put", agent, pid, json.dumps(_encode(values), ensure_ascii=False))

    @_guarded
    def proposal_get(self, proposal_id: str) -> dict[str, Any] | None:
        raw = self._record("prop", proposal_id, "p:")
        return _proposal(raw) if raw else None

    @_guarded
    def proposal_list(
        self, agent_id: str, path: str | None = None, statuses: Sequence[str] | None = None
    ) -> list[dict[str, Any]]:
        wanted = None if statuses is None else set(statuses)
        return [
            row
            for row in map(_proposal, self._indexed(agent_id, "proposals", "p:"))
            if (path is None or row["path"] == path) and (wanted is None or row["status"] in wanted)
        ]

    @_guarded
    def proposal_claim(
        self, proposal_id: str, from_statuses: Sequence[str], updates: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        statuses, values = check_proposal_claim(from_statuses, updates)
        agent = self._client.get(_locator("prop", proposal_id))
        if agent is None:
            return None
        flat = self._run(
            "proposal_claim",
            agent,
            proposal_id,
            json.dumps(statuses, ensure_ascii=False),
            json.dumps(_encode(values), ensure_ascii=False),
        )
        return _proposal(_pairs(flat)) if flat else None

    @_guarded
    def proposal_stamp(self, agent_id: str) -> str:
        return str(self._client.get(_prefix(agent_id) + "pstamp") or 0)

    @_guarded
    def proposal_prune(self, agent_id: str, keep_settled: int) -> int:
        check_keep_settled(keep_settled)
        deleted = self._run("proposal_prune", agent_id, int(keep_settled))
        pipe = self._client.pipeline(transaction=False)  # one slot per locator: no multi-key DEL
        for pid in deleted:
            pipe.delete(_locator("prop", pid))
        pipe.execute()
        return len(deleted)
