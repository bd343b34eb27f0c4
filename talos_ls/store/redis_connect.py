"""From a store URL to a redis-py client: one server, a Cluster, or a primary found by Sentinel.

    redis://host:6379/0[?timeout=S&wait=N]             one server (or a proxy in front of several)
    redis+cluster://host:port[,host:port...][?...]    Redis Cluster: any reachable node is enough
                                                      to find the others; db is always 0
    redis+sentinel://host:port[,host:port...]/service[?db=N&...]
                                                      the primary that Sentinel names `service`
    rediss://, rediss+cluster://, rediss+sentinel://  the same over TLS

Every form takes `timeout=SECONDS` (how long one step waits for the server, default 2) and
`wait=N`: after the steps that must not be lost (the budget's grant and claim, an answer and its
evidence) the store sends `WAIT N` and fails closed unless N replicas hold the write within half
the timeout. Replication is asynchronous otherwise: a failover can lose the last writes.

The password comes from TALOS_REDIS_PASSWORD (Sentinel's own, if it has one, from
TALOS_REDIS_SENTINEL_PASSWORD), never from the command line; errors name the URL without it.

Retries are off at every layer: after a lost connection the client cannot know whether a script
ran, and running it twice could grant the budget twice. A Cluster client still follows MOVED and
ASK (the script did not run there) and re-reads the slot map after a node fails.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote

from .base import DEFAULT_TIMEOUT_S, StoreError, parse_timeout

PASSWORD_ENV = "TALOS_REDIS_PASSWORD"
SENTINEL_PASSWORD_ENV = "TALOS_REDIS_SENTINEL_PASSWORD"
SERVER, CLUSTER, SENTINEL = "server", "cluster", "sentinel"
SCHEMES = {
    "redis": (SERVER, False),
    "rediss": (SERVER, True),
    "redis+cluster": (CLUSTER, False),
    "rediss+cluster": (CLUSTER, True),
    "redis+sentinel": (SENTINEL, False),
    "rediss+sentinel": (SENTINEL, True),
}
DEFAULT_PORT = {SERVER: 6379, CLUSTER: 6379, SENTINEL: 26379}
MAX_WAIT_REPLICAS = 16


@dataclass
class Target:
    """What a URL asks for, checked; `client()` connects."""

    shown: str  # the URL without its password, for messages
    topology: str  # SERVER, CLUSTER or SENTINEL
    tls: bool
    timeout: float = DEFAULT_TIMEOUT_S
    wait: int = 0  # replicas that must hold a durable step (0: do not wait)
    nodes: list[tuple[str, int]] = field(default_factory=list)  # cluster and sentinel
    service: str = ""  # sentinel
    db: int = 0
    username: str | None = None
    password: str | None = None
    raw_url: str = ""  # SERVER: the URL for redis.Redis.from_url, Talos's parameters removed

    @property
    def wait_ms(self) -> int:
        """WAIT's own limit: half the timeout, so its reply arrives before the socket gives up."""
        return max(1, int(self.timeout * 500))

    def client(self) -> Any:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        options: dict[str, Any] = {
            "socket_timeout": self.timeout,
            "socket_connect_timeout": self.timeout,
            "decode_responses": True,
        }
        password = self.password or os.environ.get(PASSWORD_ENV) or None
        if password:
            options["password"] = password
        if self.topology == SERVER:
            return redis.Redis.from_url(self.raw_url, retry=Retry(NoBackoff(), 0), **options)
        if self.username:
            options["username"] = self.username
        if self.tls:
            options["ssl"] = True
        if self.topology == CLUSTER:
            from redis.cluster import ClusterNode, RedisCluster

            return RedisCluster(
                startup_nodes=[ClusterNode(host, port) for host, port in self.nodes],
                retry=Retry(NoBackoff(), 0),
                reinitialize_steps=1,  # a MOVED after a failover: re-read the whole slot map
                **options,
            )
        from redis.sentinel import Sentinel

        sentinel_options: dict[str, Any] = {
            "socket_timeout": self.timeout,
            "socket_connect_timeout": self.timeout,
        }
        if os.environ.get(SENTINEL_PASSWORD_ENV):
            sentinel_options["password"] = os.environ[SENTINEL_PASSWORD_ENV]
        if self.tls:
            sentinel_options["ssl"] = True
        sentinel = Sentinel(self.nodes, sentinel_kwargs=sentinel_options, **options)
        return sentinel.master_for(self.service, db=self.db, retry=Retry(NoBackoff(), 0), **options)


def parse(shown: str, url: str) -> Target:
    """Check `url` and say what it names; a StoreError naming the fault (and `shown`, the URL
    without its password) when something is wrong."""
    scheme, _, rest = url.partition("://")
    topology, tls = SCHEMES[scheme.lower()]
    base, _, query = rest.partition("?")
    target = Target(shown=shown, topology=topology, tls=tls)
    passed: list[str] = []
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name == "timeout":
            target.timeout = parse_timeout(shown, value)
        elif name == "wait":
            if not value.isdigit() or int(value) > MAX_WAIT_REPLICAS:
                raise StoreError(
                    f"store URL {shown!r}: wait must be a number of replicas from 0 to "
                    f"{MAX_WAIT_REPLICAS}, got {value!r}"
                )
            target.wait = int(value)
        elif name == "db" and topology == SENTINEL:
            if not value.isdigit():
                raise StoreError(f"store URL {shown!r}: db must be a number, got {value!r}")
            target.db = int(value)
        elif topology == SERVER:
            passed.append(f"{name}={value}")  # redis-py's own (db, ...): it checks them
        else:
            known = "timeout, wait" + (", db" if topology == SENTINEL else "")
            raise StoreError(
                f"store URL {shown!r}: unknown parameter {name}={value!r} (known: {known})"
            )
    if topology == SERVER:
        target.raw_url = f"{scheme}://{base}" + ("?" + "&".join(passed) if passed else "")
        return target
    userinfo, at, hosts_path = base.rpartition("@")
    if at:
        user, colon, password = userinfo.partition(":")
        target.username = unquote(user) or None
        target.password = unquote(password) if colon else None
    hosts, _, path = hosts_path.partition("/")
    target.nodes = [_host_port(shown, item, DEFAULT_PORT[topology]) for item in hosts.split(",")]
    path = unquote(path).strip("/")
    if topology == CLUSTER:
        if path not in ("", "0"):
            raise StoreError(
                f"store URL {shown!r}: a Redis Cluster has only database 0, the URL names "
                f"{path!r} (write redis+cluster://host:port,host:port)"
            )
    else:
        if not path or "/" in path:
            raise StoreError(
                f"store URL {shown!r} names no service: expected "
                "redis+sentinel://sentinel:26379[,sentinel:26379...]/service-name[?db=N]"
            )
        target.service = path
    return target


def _host_port(shown: str, item: str, default_port: int) -> tuple[str, int]:
    item = item.strip()
    if item.startswith("["):  # [::1]:7000
        host, _, port = item[1:].partition("]")
        port = port.removeprefix(":")
    else:
        host, _, port = item.rpartition(":") if ":" in item else (item, "", "")
    if not host:
        raise StoreError(
            f"store URL {shown!r}: {item!r} names no host; expected host:port, comma-separated"
        )
    if not port:
        return host, default_port
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise StoreError(f"store URL {shown!r}: {item!r} has no valid port (1 to 65535)")
    return host, int(port)
