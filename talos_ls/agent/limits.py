"""Limits on every sandboxed command: processes, memory, file size, `/tmp`, CPU time.

Three layers, because no one mechanism bounds everything for everyone:

- **Kernel limits set inside the sandbox** (`launcher`): bash's `ulimit` runs first in the
  sandbox and then execs the command's shell, so the limits hold for everything it starts and
  nothing in it can raise them (no capabilities). `RLIMIT_NPROC` is counted per user
  namespace since Linux 5.14, so inside the sandbox it bounds the sandbox's own tasks, not the
  person's other processes (older kernels count every process of the user: the limit is then
  raised by the count the user has now). The kernel never applies it to uid 0, whatever the
  capabilities: as root only a cgroup bounds processes. `RLIMIT_DATA` bounds each process's
  private memory, `RLIMIT_FSIZE` each file (the writer gets SIGXFSZ), `RLIMIT_CPU` each
  process's CPU time (SIGXCPU).
- **A `pids` cgroup per command** (`Cage`), where this process may make one (root, or a
  delegated cgroup v2 subtree): `pids.max`, which the kernel enforces for root too, and a
  counter that says when a fork was refused. Only `pids`: joining a cgroup costs a command an
  RCU grace period per controller (measured: bench/README.md), and memory is bounded the same
  way for everyone without one.
- **A watch** (`Watch`) from the daemon, every 0.2 s while the command runs: the sandbox's tasks
  (listed in its own `/proc`), their memory and CPU time added up, how full its `/tmp` is. It
  ends the command when one reaches its limit, with a message, and it is what bounds the whole
  command's memory and CPU time. A sample can miss what a program does between two of them, so
  the kernel's per-process limits stay underneath.

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
FIELDS = {"processes": ("processes", 16, 1_000_000), "memory_mb": ("memory", 64, 10**8),
          "tmp_mb": ("tmp", 1, 10**8), "file_mb": ("file_size", 1, 10**8),
          "cpu_seconds": ("cpu", 1, 10**6)}  # fmt: skip


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
        return cls(processes=max(1024, 64 * (os.cpu_count() or 1)),
                   memory=max(GIB, ram // 2 // MIB * MIB),
                   tmp=max(512 * MIB, ram // 4 // MIB * MIB), file_size=4 * GIB,
                   cpu=600)  # fmt: skip

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
        return {"processes": self.processes, "memory_mb": self.memory // MIB,
                "tmp_mb": self.tmp // MIB, "file_mb": self.file_size // MIB,
                "cpu_seconds": self.cpu}  # fmt: skip

    def describe(self) -> str:
        return (f"{self.processes} processes, {_size(self.memory)} memory, "
                f"{_size(self.tmp)} /tmp, {_size(self.file_size)} files, "
                f"{self.cpu} s CPU")  # fmt: skip


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


def from_exit(code: int | None) -> str | None:
    """The limit a command's own exit status shows: 128 + SIGXCPU or SIGXFSZ (bash reports a
    child killed by a signal so; bwrap passes its command's status on)."""
    return {128 + signal.SIGXCPU: "cpu", 128 + signal.SIGXFSZ: "file"}.get(code or 0)


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


def launcher(shell: str, command: str, limits: Limits) -> list[str]:
    """The argv run inside the sandbox: the limits set by bash's `ulimit` (soft and hard, so
    nothing in the sandbox raises them), then `exec` of the command's own `shell -c COMMAND`.
    Per-process CPU time stops a second past the whole command's, so the watch (which says so)
    usually ends it first."""
    if Path(shell).name != "bash":  # no bash here: `sh` has no portable ulimit flags
        return [shell, "-c", command]
    nproc = limits.processes if kernel_counts_per_namespace() else limits.processes + _my_tasks()
    parts = [f"-u {_clamped(resource.RLIMIT_NPROC, nproc)}",
             f"-f {_clamped(resource.RLIMIT_FSIZE, limits.file_size) // 1024}", "-c 0",
             f"-d {_clamped(resource.RLIMIT_DATA, limits.memory) // 1024}"]  # fmt: skip
    cpu = _clamped(resource.RLIMIT_CPU, limits.cpu + 2)
    script = (f"ulimit -S -H {' '.join(parts)} && ulimit -S -H -t {cpu} && "
              f"ulimit -S -t {max(cpu - 1, 1)} && exec \"$0\" -c \"$1\"")  # fmt: skip
    return [shell, "-c", script, shell, command]


# -------------------------------------------------------------------- cgroups
@dataclass(frozen=True)
class _Hierarchy:
    version: int  # 1 or 2
    base: Path  # where this process may make a child cgroup with the pids controller


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


def _writable(path: Path) -> bool:
    """Whether a child cgroup can be made here (made and removed to know)."""
    probe = path / f"talos-probe-{os.getpid()}"
    try:
        probe.mkdir()
    except OSError:
        return False
    with contextlib.suppress(OSError):
        probe.rmdir()
    return True


def find_hierarchies() -> list[_Hierarchy]:
    """Where a `pids` cgroup can be made for a command: v1, a child of this process's cgroup
    in the pids hierarchy; v2, a child of the nearest cgroup (this one or an ancestor) that
    enables `pids` for its children. Empty when neither is writable (an ordinary user without
    delegation, a container whose cgroup file system is read-only)."""
    own = _own_cgroups()
    mounts = _mounts()
    for root, point, kind, options in mounts:
        if kind == "cgroup" and "pids" in options.split(",") and "pids" in own:
            base = _under(root, point, own["pids"])
            if base is not None and base.is_dir() and _writable(base):
                return [_Hierarchy(1, base)]
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
                return [_Hierarchy(2, here)] if _writable(here) else []
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
            pid = re.fullmatch(r"talos-(\d+)-\d+", child.name)
            if pid and not Path(f"/proc/{pid[1]}").exists():
                with contextlib.suppress(OSError):
                    child.rmdir()


class Cage:
    """One command's cgroup(s): made before, joined by the command's first process (`wrap`),
    read during and after (`hit`), removed after (`close`)."""

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

    def _configure(self, h: _Hierarchy, path: Path) -> None:
        (path / "pids.max").write_text(str(self.limits.processes))

    def wrap(self, argv: list[str]) -> list[str]:
        """`argv` started by `sh`, which first moves itself into each cgroup: everything the
        command starts is in them from its first fork."""
        procs = [str(path / "cgroup.procs") for _, path in self.dirs]
        script = 'for f in "$@"; do [ "$f" = -- ] && break; echo $$ > "$f" || exit 125; done; ' \
            'while [ "$1" != -- ]; do shift; done; shift; exec "$@"'  # fmt: skip
        return ["/bin/sh", "-c", script, "sh", *procs, "--", *argv]

    def hit(self) -> str | None:
        """ "processes" once a fork was refused at pids.max (`pids.events`), else None."""
        for _, path in self.dirs:
            with contextlib.suppress(OSError, ValueError):
                for line in (path / "pids.events").read_text().splitlines():
                    name, _, value = line.partition(" ")
                    if name == "max" and int(value):
                        return "processes"
        return None

    def close(self) -> None:
        """Remove the cgroups (empty once the sandbox's PID namespace is gone; a few tries
        while its last processes are reaped)."""
        for _, path in self.dirs:
            for _ in range(50):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)
            else:
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
        tasks, memory, ticks = 0, 0, 0
        for pid in pids:
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = Path(f"{proc}/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                ticks += sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime..cstime
                tasks += int(fields[17])
                for line in Path(f"{proc}/{pid}/status").read_text().splitlines():
                    if line.startswith(("RssAnon:", "RssShmem:")):
                        memory += int(line.split()[1]) * 1024
        if tasks >= self.limits.processes:
            return "processes"
        if memory >= self.limits.memory and _proportional(proc, pids) >= self.limits.memory:
            return "memory"
        if ticks / os.sysconf("SC_CLK_TCK") >= self.limits.cpu:
            return "cpu"
        with contextlib.suppress(OSError):
            tmp = os.statvfs(f"/proc/{self.init}/root/tmp")
            used = (tmp.f_blocks - tmp.f_bfree) * tmp.f_frsize
            if tmp.f_bavail * tmp.f_frsize < MIB or used >= self.limits.tmp:
                return "tmp"
        return None


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
    if found:
        return True, (f"command limits: processes bounded by a pids cgroup (v{found[0].version}) "
                      "per command; memory bounded per process by the kernel and watched for "
                      "the whole command")  # fmt: skip
    if not processes_bounded_by_kernel():
        return False, ("command limits: as root the kernel does not apply the process limit "
                       "(RLIMIT_NPROC) and no cgroup can be made here, so a fork bomb is only "
                       "stopped by Talos's watch, after it has grown; run Talos as an ordinary "
                       "user, or where a cgroup can be made")  # fmt: skip
    if not kernel_counts_per_namespace():
        return True, ("command limits: processes bounded by the kernel, counted over all your "
                      "processes (Linux before 5.14); memory per process, and watched")  # fmt: skip
    return True, ("command limits: processes bounded by the kernel per sandbox; memory bounded "
                  "per process by the kernel and watched for the whole command")  # fmt: skip
