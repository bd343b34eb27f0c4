"""Limits on every sandboxed command: processes, memory, file size, `/tmp`, CPU time.

Three layers, because no one mechanism bounds everything for everyone:

- **Kernel limits set inside the sandbox** (`launcher`): bash's `ulimit` runs first in the
  sandbox and then starts the command's shell, so the limits hold for everything it starts
  and nothing in it can raise them (no capabilities). `RLIMIT_NPROC` is counted per user
  namespace since Linux 5.14, so inside the sandbox it bounds the sandbox's own tasks, not the
  person's other processes (older kernels count every process of the user: the limit is then
  raised by the count the user has now). The kernel never applies it to uid 0, whatever the
  capabilities: as root only a cgroup bounds processes. `RLIMIT_DATA` bounds each process's
  private memory, `RLIMIT_FSIZE` each file (the writer gets SIGXFSZ), `RLIMIT_CPU` each
  process's CPU time (SIGXCPU).
- **A `pids` and a `memory` cgroup per command** (`Cage`), where this process may make one and
  move a process into it (root, or a delegated cgroup v2 subtree): `pids.max`, which the
  kernel enforces for root too, and a counter that says when a fork was refused; a memory
  limit on everything the command holds in RAM (shared memory no process maps, memfd held in
  a socket message, tmpfs files: what no per-process count sees), and its own count of it.
  Both joins come back to back from the command's first process: an RCU grace period for the
  two (bench/README.md).
- **A watch** (`Watch`) from the daemon, every 0.2 s while the command runs: the sandbox's tasks
  (listed in its own `/proc`), their CPU time added up, their memory (the memory cgroup's
  count, or without one each process's resident memory and every memfd held open), how full
  its `/tmp` is. It ends the command when one reaches its limit, with a message, and it is
  what bounds the whole command's memory and CPU time. A sample can miss what a program does
  between two of them, so the kernel's limits stay underneath.

Hitting a limit ends the command, never the daemon: its result says which limit and the value
("[killed: it reached the limit of 1024 processes]"), and the person is told.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import platform
import re
import resource
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

MIB = 1024 * 1024
GIB = 1024 * MIB
WATCH_EVERY = 0.2  # seconds between two samples of a running command
SMALL_TMPFS = 16 * MIB  # each home and /run: placeholders, written only by accident
SHARED_TMPFS = 256 * MIB  # /var/tmp and /dev/shm, each (at most /tmp's size)
# The settings' keys (config.toml and the editor's `limits` object), and their bounds.
FIELDS = {
    "processes": ("processes", 16, 1_000_000),
    "memory_mb": ("memory", 64, 10**8),
    "tmp_mb": ("tmp", 1, 10**8),
    "file_mb": ("file_size", 1, 10**8),
    "cpu_seconds": ("cpu", 1, 10**6),
}


def _ram() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 8 * GIB


@dataclass(frozen=True)
class Limits:
    """What one command may use. Sizes in bytes, CPU in seconds."""

    processes: int  # tasks (threads count, as the kernel counts them), the sandbox's init too
    memory: int  # the command's processes together: private and shared memory
    tmp: int  # the size of the sandbox's /tmp (a tmpfs: RAM)
    file_size: int  # any one file a process writes
    cpu: int  # CPU seconds of the whole command, every process together

    @classmethod
    def default(cls) -> Limits:
        """Room for real work on this machine: 1024 tasks (64 a CPU on bigger machines), half
        the RAM, a quarter of it for /tmp, 4 GiB files, 10 minutes of CPU (the timeout, 120 s
        at most, bounds the time; this bounds a command that keeps every core busy)."""
        ram = _ram()
        return cls(
            processes=max(1024, 64 * (os.cpu_count() or 1)),
            memory=max(GIB, ram // 2 // MIB * MIB),
            tmp=max(512 * MIB, ram // 4 // MIB * MIB),
            file_size=4 * GIB,
            cpu=600,
        )

    @classmethod
    def parse(cls, value: Any, base: Limits | None = None) -> Limits:
        """`{"processes": 512, "memory_mb": 4096, ...}` over `base` (default: the machine's
        defaults); raises ValueError naming the key."""
        if not isinstance(value, Mapping):
            raise ValueError("must be a table/object of " + ", ".join(FIELDS))
        out = base or cls.default()
        changes: dict[str, int] = {}
        for key, raw in value.items():
            if key not in FIELDS:
                raise ValueError(f"unknown key {key!r}: the keys are {', '.join(FIELDS)}")
            attr, low, high = FIELDS[key]
            if isinstance(raw, bool) or not isinstance(raw, int) or not low <= raw <= high:
                raise ValueError(f"{key} must be a whole number from {low} to {high}")
            changes[attr] = raw * MIB if key.endswith("_mb") else raw
        return cls(**{**out.__dict__, **changes})

    def as_setting(self) -> dict[str, int]:
        """The settings' form: the keys of FIELDS."""
        return {
            "processes": self.processes,
            "memory_mb": self.memory // MIB,
            "tmp_mb": self.tmp // MIB,
            "file_mb": self.file_size // MIB,
            "cpu_seconds": self.cpu,
        }

    def describe(self) -> str:
        return (
            f"{self.processes} processes, {_size(self.memory)} memory, "
            f"{_size(self.tmp)} /tmp, {_size(self.file_size)} files, "
            f"{self.cpu} s CPU"
        )


def _size(n: int) -> str:
    return f"{n / GIB:g} GiB" if n % GIB == 0 else f"{n // MIB} MiB"


# ------------------------------------------------------------------ messages
def message(kind: str, limits: Limits) -> str:
    """The line the model and the person read when a limit ended a command."""
    return {
        "processes": f"it reached the limit of {limits.processes} processes (threads count)",
        "memory": f"it reached the memory limit of {_size(limits.memory)}",
        "tmp": f"the sandbox's /tmp reached its limit of {_size(limits.tmp)}",
        "file": f"a file reached the size limit of {_size(limits.file_size)} (SIGXFSZ)",
        "cpu": f"it used its {limits.cpu} s of CPU time",
    }[kind]


def from_exit(code: int | None, signalled: bool) -> str | None:
    """The limit a command's exit status shows: 128 + SIGXCPU or SIGXFSZ, when a signal is
    known to have ended it (`signalled`: the launcher said its command was killed by one, or
    `shell_reported`). A command that exits 152 or 153 by itself reached no limit."""
    if not signalled:
        return None
    return {128 + signal.SIGXCPU: "cpu", 128 + signal.SIGXFSZ: "file"}.get(code or 0)


def shell_reported(output: str, code: int | None) -> bool:
    """Whether the command's own shell reported, as its last words, that a program it ran
    was killed by the signal its exit status names (`bash: line 1:  4 File size limit
    exceeded head ...`): it then exits 128 + n itself, so the launcher sees no signal. Read
    in the messages' English form (a shell in another language is not recognised)."""
    if code is None or not 128 < code < 128 + 65:
        return False
    try:
        said = signal.strsignal(code - 128)
    except ValueError:
        return False
    if not said:
        return False
    tail = output[-2000:].splitlines()[-3:]
    pattern = re.compile(r": line \d+: +\d+ " + re.escape(said))
    return any(pattern.search(line) for line in tail)


# ------------------------------------------------------------- kernel limits
def kernel_counts_per_namespace() -> bool:
    """Whether RLIMIT_NPROC counts the tasks of a user namespace (Linux 5.14 and later)."""
    found = re.match(r"(\d+)\.(\d+)", platform.release())
    return found is not None and (int(found[1]), int(found[2])) >= (5, 14)


def processes_bounded_by_kernel() -> bool:
    """The kernel never applies RLIMIT_NPROC to uid 0 (`copy_process`: INIT_USER is exempt)."""
    return os.getuid() != 0


def _my_tasks() -> int:
    """Tasks (threads) of this real uid on the machine: what RLIMIT_NPROC counts before 5.14."""
    uid, total = str(os.getuid()), 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        with contextlib.suppress(OSError):
            status = Path(f"/proc/{pid}/status").read_text()
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            if fields.get("Uid", "").split()[:1] == [uid]:
                total += int(fields.get("Threads", "1"))
    return total


def _clamped(which: int, wanted: int) -> int:
    """`wanted`, or the hard limit this process already has when that is lower (a limit can
    only be lowered)."""
    _, hard = resource.getrlimit(which)
    return wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)


def launcher(shell: str, command: str, limits: Limits, report: int | None = None) -> list[str]:
    """The argv run inside the sandbox: the limits set by bash's `ulimit` (soft and hard, so
    nothing in the sandbox raises them), then the command's own `shell -c COMMAND`.
    Per-process CPU time stops a second past the whole command's, so the watch (which says so)
    usually ends it first. With `report` (a pipe's write end passed down), the launcher stays
    the command's parent with that pipe as its own stderr, and the command keeps the real
    one: bash writes there when the command was killed by a signal, and only then, so an
    exit status of 128 + n is known to be a signal (`from_exit`). Without, it `exec`s."""
    if Path(shell).name != "bash":  # no bash here: `sh` has no portable ulimit flags
        return [shell, "-c", command]
    nproc = limits.processes if kernel_counts_per_namespace() else limits.processes + _my_tasks()
    parts = [
        f"-u {_clamped(resource.RLIMIT_NPROC, nproc)}",
        f"-f {_clamped(resource.RLIMIT_FSIZE, limits.file_size) // 1024}",
        "-c 0",
        f"-d {_clamped(resource.RLIMIT_DATA, limits.memory) // 1024}",
    ]
    cpu = _clamped(resource.RLIMIT_CPU, limits.cpu + 2)
    script = (
        f"ulimit -S -H {' '.join(parts)} && ulimit -S -H -t {cpu} && "
        f"ulimit -S -t {max(cpu - 1, 1)} && "
    )
    if report is None:
        return [shell, "-c", script + 'exec "$0" -c "$1"', shell, command]
    script += 'fd=$2 && exec {keep}>&2 2>&$fd {fd}>&- && "$0" -c "$1" 2>&$keep {keep}>&-'
    return [shell, "-c", script, shell, command, str(report)]


# -------------------------------------------------------------------- cgroups
CONTROLLERS = ("pids", "memory")


@dataclass(frozen=True)
class _Hierarchy:
    version: int  # 1 or 2
    base: Path  # where this process may make a child cgroup, and move a process into it
    controllers: tuple[str, ...]  # of CONTROLLERS, those this hierarchy gives a child


def _mounts() -> list[tuple[str, str, str, str]]:
    """(root, mount point, type, super options) of every cgroup mount, from mountinfo."""
    out = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
                point = fields[4].encode().decode("unicode_escape")  # \040 for a space
                out.append((fields[3], point, tail[0], tail[2]))
    return out


def _own_cgroups() -> dict[str, str]:
    """Controller (or "" for v2) -> this process's cgroup path, from /proc/self/cgroup."""
    found: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                found[name] = path
    return found


def _under(mount_root: str, point: str, path: str) -> Path | None:
    if mount_root != "/" and not (path == mount_root or path.startswith(mount_root + "/")):
        return None
    rest = path[len(mount_root) :] if mount_root != "/" else path
    return Path(point + rest.rstrip("/")) if rest not in ("", "/") else Path(point)


def _joinable(base: Path) -> bool:
    """Whether a child cgroup can be made here and a process moved into it: both are tried
    (a child made, a `sh` moving itself in, the child removed). Making one is not enough: a
    delegated subtree may let this user make a cgroup it cannot move a process into."""
    probe = base / f"talos-probe-{os.getpid()}-{next(_SEQ)}"
    try:
        probe.mkdir()
    except OSError:
        return False
    try:
        done = subprocess.run(
            ["/bin/sh", "-c", 'echo $$ > "$1"', "sh", str(probe / "cgroup.procs")],
            capture_output=True,
            timeout=10,
            stdin=subprocess.DEVNULL,
            env={"PATH": "/usr/bin:/bin"},
        )
        return done.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
    finally:
        _remove_cgroup(probe)


def find_hierarchies() -> list[_Hierarchy]:
    """Where a command's cgroups can be made and joined: v1, a child of this process's
    cgroup in the `pids` and in the `memory` hierarchy (each where it works); v2, a child of
    the nearest cgroup (this one or an ancestor) that enables `pids` for its children, with
    `memory` too when that one enables it. Empty when none is joinable (an ordinary user
    without delegation, a container whose cgroup file system is read-only)."""
    own = _own_cgroups()
    mounts = _mounts()
    found: list[_Hierarchy] = []
    for name in CONTROLLERS:
        for root, point, kind, options in mounts:
            if kind == "cgroup" and name in options.split(",") and name in own:
                base = _under(root, point, own[name])
                if base is not None and base.is_dir() and _joinable(base):
                    found.append(_Hierarchy(1, base, (name,)))
                    break
    if found:
        return found
    for root, point, kind, _ in mounts:
        if kind != "cgroup2" or "" not in own:
            continue
        here = _under(root, point, own[""])
        while here is not None and here.is_relative_to(point):
            try:
                enabled = (here / "cgroup.subtree_control").read_text().split()
            except OSError:
                break
            if "pids" in enabled:
                given = tuple(c for c in CONTROLLERS if c in enabled)
                return [_Hierarchy(2, here, given)] if _joinable(here) else []
            here = here.parent if here != Path(point) else None
    return []


_FOUND: list[list[_Hierarchy]] = []
_SEQ = itertools.count(1)


def hierarchies() -> list[_Hierarchy]:
    """`find_hierarchies`, once per process; cgroups a dead daemon left are removed then."""
    if not _FOUND:
        found = find_hierarchies()
        for h in found:
            _remove_stale(h.base)
        _FOUND.append(found)
    return _FOUND[0]


def _remove_stale(base: Path) -> None:
    with contextlib.suppress(OSError):
        for child in base.iterdir():
            pid = re.fullmatch(r"talos-(?:probe-)?(\d+)-\d+", child.name)
            if pid and not Path(f"/proc/{pid[1]}").exists():
                with contextlib.suppress(OSError):
                    child.rmdir()


def _remove_cgroup(path: Path) -> bool:
    """Remove a cgroup (empty once its last processes are reaped: a few tries)."""
    for _ in range(50):
        try:
            path.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            time.sleep(0.01)
    return False


def ram_ceiling(limits: Limits) -> int:
    """The memory cgroup's hard limit: the command's memory, and room for what its tmpfs
    hold (their pages are charged to it too): /tmp, /var/tmp and /dev/shm at their sizes."""
    return limits.memory + limits.tmp + 2 * min(limits.tmp, SHARED_TMPFS)


class Cage:
    """One command's cgroup(s): made before, joined by the command's first process (`wrap`),
    read during and after (`hit`, `memory_in_use`), removed after (`close`). `pids.max`
    bounds its tasks (for root too); a memory cgroup bounds everything it holds in RAM at
    `ram_ceiling` (the kernel's out-of-memory killer acts inside it) and says exactly how
    much of that is process and shared memory (memfd, System V, `/dev/shm`)."""

    def __init__(self, limits: Limits, found: list[_Hierarchy]) -> None:
        self.limits = limits
        self.dirs: list[tuple[_Hierarchy, Path]] = []
        name = f"talos-{os.getpid()}-{next(_SEQ)}"
        try:
            for h in found:
                path = h.base / name
                path.mkdir()
                self.dirs.append((h, path))
                self._configure(h, path)
        except OSError:
            self.close()
            raise

    @property
    def controllers(self) -> set[str]:
        return {c for h, _ in self.dirs for c in h.controllers}

    def _configure(self, h: _Hierarchy, path: Path) -> None:
        if "pids" in h.controllers:
            (path / "pids.max").write_text(str(self.limits.processes))
        if "memory" in h.controllers:
            ceiling = str(ram_ceiling(self.limits))
            if h.version == 1:
                (path / "memory.limit_in_bytes").write_text(ceiling)
                with contextlib.suppress(OSError):  # swap counted too, where it is accounted
                    (path / "memory.memsw.limit_in_bytes").write_text(ceiling)
            else:
                (path / "memory.max").write_text(ceiling)
                with contextlib.suppress(OSError):
                    (path / "memory.swap.max").write_text("0")
                with contextlib.suppress(OSError):  # an out-of-memory kill takes all of it
                    (path / "memory.oom.group").write_text("1")

    def wrap(self, argv: list[str]) -> list[str]:
        """`argv` started by `sh`, which first moves itself into each cgroup: everything the
        command starts is in them from its first fork. If a move fails the command does not
        run, and its output says why (exit status 125)."""
        procs = [str(path / "cgroup.procs") for _, path in self.dirs]
        script = (
            'for f in "$@"; do [ "$f" = -- ] && break; echo $$ > "$f" || { echo "talos: '
            'could not move the command into its cgroup ($f); it did not run" >&2; '
            'exit 125; }; done; while [ "$1" != -- ]; do shift; done; shift; '
            'exec "$@"'
        )
        return ["/bin/sh", "-c", script, "sh", *procs, "--", *argv]

    def _read(self, controller: str, name: str) -> dict[str, int]:
        for h, path in self.dirs:
            if controller in h.controllers:
                with contextlib.suppress(OSError, ValueError):
                    pairs = (line.split() for line in (path / name).read_text().splitlines())
                    return {p[0]: int(p[1]) for p in pairs if len(p) == 2}
        return {}

    def hit(self) -> str | None:
        """ "processes" once a fork was refused at pids.max (`pids.events`), "memory" once
        the out-of-memory killer acted in the memory cgroup, else None."""
        if self._read("pids", "pids.events").get("max", 0):
            return "processes"
        v1 = any(h.version == 1 and "memory" in h.controllers for h, _ in self.dirs)
        events = self._read("memory", "memory.oom_control" if v1 else "memory.events")
        return "memory" if events.get("oom_kill", 0) else None

    def memory_in_use(self) -> int | None:
        """Process and shared memory the cgroup holds now (anonymous pages, and shmem: tmpfs
        files, memfd, System V and POSIX shared memory, mapped or not); None without a
        memory cgroup. Page cache (files read or written) is left out: the kernel reclaims
        it."""
        if "memory" not in self.controllers:
            return None
        stat = self._read("memory", "memory.stat")
        if not stat:
            return None
        anon = stat.get("anon", stat.get("rss", 0))
        return anon + stat.get("shmem", 0)

    def close(self) -> None:
        """Remove the cgroups (empty once the sandbox's PID namespace is gone)."""
        for _, path in self.dirs:
            if not _remove_cgroup(path):
                logger.warning("could not remove the cgroup %s", path)
        self.dirs = []


# ---------------------------------------------------------------------- watch
class Watch:
    """Samples one running sandbox from outside: `bwrap` is `pid`; its child is the sandbox's
    init (pid 1 inside), whose `/proc/<pid>/root` is the sandbox's root, so its `/proc` lists
    exactly the sandbox's processes and its `/tmp` is the sandbox's tmpfs."""

    def __init__(self, pid: int, limits: Limits, cage: Cage | None) -> None:
        self.pid = pid
        self.limits = limits
        self.cage = cage
        self.init: int | None = None

    def _find_init(self) -> int | None:
        try:
            children = Path(f"/proc/{self.pid}/task/{self.pid}/children").read_text().split()
            return int(children[0]) if children else None
        except (OSError, ValueError):  # no CONFIG_PROC_CHILDREN: look for the parent's pid
            for pid in filter(str.isdigit, os.listdir("/proc")):
                with contextlib.suppress(OSError, ValueError, IndexError):
                    stat = Path(f"/proc/{pid}/stat").read_text()
                    if int(stat.rsplit(")", 1)[1].split()[1]) == self.pid:
                        return int(pid)
        return None

    def sample(self) -> str | None:
        """The limit the command has reached, if any: one look, from a worker thread."""
        if self.cage is not None and (hit := self.cage.hit()):
            return hit
        if self.init is None:
            self.init = self._find_init()
            if self.init is None:
                return None
        proc = f"/proc/{self.init}/root/proc"
        try:
            pids = [p for p in os.listdir(proc) if p.isdigit()]
        except OSError:
            return None  # gone, or not set up yet
        try:  # a /proc that knows the daemon is not the sandbox's own (not pivoted into yet)
            os.readlink(f"{proc}/self")
            return None
        except FileNotFoundError:  # what the sandbox's /proc answers an outsider
            if "1" not in pids:
                return None
        except OSError:
            return None
        if len(pids) >= self.limits.processes:  # before reading each one: a fork bomb
            return "processes"
        counted = self.cage.memory_in_use() if self.cage is not None else None
        tasks, memory, ticks = 0, 0, 0
        for pid in pids:
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = Path(f"{proc}/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                ticks += sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime..cstime
                tasks += int(fields[17])
                if counted is not None:
                    continue
                for line in Path(f"{proc}/{pid}/status").read_text().splitlines():
                    if line.startswith(("RssAnon:", "RssShmem:")):
                        memory += int(line.split()[1]) * 1024
        if tasks >= self.limits.processes:
            return "processes"
        root = f"/proc/{self.init}/root"
        tmpfs = {where: _used(f"{root}{where}") for where in SIZED_TMPFS}
        if counted is not None:  # the cgroup's own count: all of it, each page once
            if counted - sum(tmpfs.values()) >= self.limits.memory:
                return "memory"
        else:  # memfd held open but not mapped is in no process's resident size
            memfd = _memfd_bytes(proc, pids)
            if memory + memfd >= self.limits.memory and (
                _proportional(proc, pids) + memfd >= self.limits.memory
            ):
                return "memory"
        if ticks / os.sysconf("SC_CLK_TCK") >= self.limits.cpu:
            return "cpu"
        with contextlib.suppress(OSError):
            tmp = os.statvfs(f"{root}/tmp")
            if tmp.f_bavail * tmp.f_frsize < MIB or tmpfs["/tmp"] >= self.limits.tmp:
                return "tmp"
        return None


# The sandbox's tmpfs that hold files (`Sandbox._outside`): their pages are shared memory
# to the kernel, counted for /tmp's limit, not the memory limit.
SIZED_TMPFS = ("/tmp", "/var/tmp", "/dev/shm", "/run")


def _used(where: str) -> int:
    try:
        st = os.statvfs(where)
    except OSError:
        return 0
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def _memfd_bytes(proc: str, pids: list[str]) -> int:
    """The memory of every memfd a process of the sandbox holds open, each counted once (by
    inode, as allocated: a sparse one counts what it holds). Without a memory cgroup this is
    how memory written into a memfd and never mapped is seen."""
    seen: dict[tuple[int, int], int] = {}
    for pid in pids:
        try:
            fds = os.listdir(f"{proc}/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            path = f"{proc}/{pid}/fd/{fd}"
            with contextlib.suppress(OSError):
                if os.readlink(path).startswith("/memfd:"):
                    st = os.stat(path)
                    seen[(st.st_dev, st.st_ino)] = st.st_blocks * 512
    return sum(seen.values())


def _proportional(proc: str, pids: list[str]) -> int:
    """The processes' memory with each shared page divided among its sharers (PSS): what the
    resident sizes say twice for pages a fork shares. Dearer to read, so read only when the
    resident sizes already reach the limit."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = {}
            for line in Path(f"{proc}/{pid}/smaps_rollup").read_text().splitlines():
                name, _, rest = line.partition(":")
                if name in ("Pss", "Pss_Anon", "Pss_Shmem"):
                    fields[name] = int(rest.split()[0]) * 1024
            if "Pss_Anon" in fields:  # Linux 5.7+: file-backed pages (libraries) left out
                total += fields["Pss_Anon"] + fields.get("Pss_Shmem", 0)
            else:
                total += fields.get("Pss", 0)
    return total


def describe_enforcement() -> tuple[bool, str]:
    """How processes and memory are bounded here, for `talos doctor`: (fine, what)."""
    found = hierarchies()
    given = {c for h in found for c in h.controllers}
    memory = (
        "memory bounded by a memory cgroup per command (all it holds in RAM: memfd and "
        "shared memory too) and watched"
        if "memory" in given
        else "memory bounded per process by the kernel and watched for the whole command "
        "(without a memory cgroup, shared memory no process maps or holds open is not "
        "seen)"
    )
    if "pids" in given:
        return True, (
            f"command limits: processes bounded by a pids cgroup (v{found[0].version}) "
            f"per command; {memory}"
        )
    if not processes_bounded_by_kernel():
        return False, (
            "command limits: as root the kernel does not apply the process limit "
            "(RLIMIT_NPROC) and no cgroup can be made here, so a fork bomb is only "
            "stopped by Talos's watch, after it has grown; run Talos as an ordinary "
            f"user, or where a cgroup can be made; {memory}"
        )
    if not kernel_counts_per_namespace():
        return True, (
            "command limits: processes bounded by the kernel, counted over all your "
            f"processes (Linux before 5.14); {memory}"
        )
    return True, f"command limits: processes bounded by the kernel per sandbox; {memory}"
