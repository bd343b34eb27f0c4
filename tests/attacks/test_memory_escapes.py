"""Memory a process holds without having it mapped is memory too (review A7), through the real
`talos run`, bwrap and limits.

A hostile model, under a memory limit of 128 MiB, writes 600 MiB into three memfds it keeps
open (no process's resident size shows them), sends three memfds of 100 MiB through a Unix
socket and closes them (held only by the messages in flight), and fills three System V
segments of 100 MiB, each detached before the next. Where Talos can make a memory cgroup
(root here) each is ended with the memory message; as an ordinary user (uid 65534, no
cgroup) the memfd held open is (the watch reads each process's descriptors), and the two
others are the documented gap. A command that exits 152 or 153 by itself is not said to have
reached the CPU or file size limit.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from .conftest import USERS, attack_as
from .test_commands import assert_ran, batch

LIMITS = "[limits]\nmemory_mb = 128\ntmp_mb = 32\n"
KILLED = "[killed: it reached the memory limit of 128 MiB]"
MIB = "1 << 20"
MEMFD = f"""import os, time
fds = []
for _ in range(3):
    fd = os.memfd_create("held")
    for _ in range(200):
        os.write(fd, bytes({MIB}))
    fds.append(fd)
print("written", flush=True)
time.sleep(4)
"""
IN_FLIGHT = f"""import os, socket, time
a, b = socket.socketpair()
for _ in range(3):  # 100 MiB at a time held by a descriptor: under the limit
    fd = os.memfd_create("flying")
    for _ in range(100):
        os.write(fd, bytes({MIB}))
    socket.send_fds(a, [b"x"], [fd])
    os.close(fd)
print("sent", flush=True)
time.sleep(4)
"""
SYSV = f"""import ctypes, time
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
libc.shmdt.argtypes = [ctypes.c_void_p]
for _ in range(3):  # 100 MiB at a time mapped: under the limit
    seg = libc.shmget(0, 100 * ({MIB}), 0o1600)
    where = libc.shmat(seg, None, 0)
    ctypes.memset(where, 1, 100 * ({MIB}))
    libc.shmdt(where)
print("detached", flush=True)
time.sleep(4)
"""
PAYLOADS = {"memfd": MEMFD, "in-flight": IN_FLIGHT, "sysv": SYSV}
OWN_EXITS = ["exit 153", "exit 152", "echo 'File size limit exceeded'; exit 153"]
AFTER = "echo alive"


def memory_cgroup_possible() -> bool:
    """Whether this process can make a memory cgroup and move a process into it, found
    without Talos's code: then Talos, as this user, is expected to make one."""
    own = dict(line.split(":", 2)[1:] for line in Path("/proc/self/cgroup").read_text().split())
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if tail[0] == "cgroup" and "memory" in tail[2].split(",") and "memory" in own:
            base = Path(fields[4] + own["memory"][len(fields[3].rstrip("/")) :])
        elif tail[0] == "cgroup2" and "" in own:
            base = Path(fields[4] + own[""][len(fields[3].rstrip("/")) :])
            if "memory" not in (base / "cgroup.subtree_control").read_text().split():
                continue
        else:
            continue
        probe = base / f"memory-test-{os.getpid()}"
        try:
            probe.mkdir()
            (probe / "cgroup.procs").write_text(str(os.getpid()))  # and straight back
            (base / "cgroup.procs").write_text(str(os.getpid()))
            return True
        except OSError:
            return False
        finally:
            with contextlib.suppress(OSError):
                probe.rmdir()
    return False


@pytest.mark.parametrize("user", USERS)
def test_memory_held_outside_any_mapping_is_bounded(tmp_path, server, sandboxed, user):
    cgroup = user == "as-is" and memory_cgroup_possible()
    with attack_as(user, tmp_path, server) as attack:
        (attack.config / "talos").mkdir(parents=True, exist_ok=True)
        (attack.config / "talos" / "config.toml").write_text(LIMITS)
        for name, text in PAYLOADS.items():
            (attack.ws / f"{name}.py").write_text(text)
        commands = [f"python3 {name}.py" for name in PAYLOADS] + OWN_EXITS + [AFTER]
        attack.hand_over()
        proc, results = batch(attack, commands, mode="full-auto")
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert_ran(commands, results)
        outcome = dict(zip(PAYLOADS, results, strict=False))
        assert KILLED in outcome["memfd"], outcome["memfd"][-500:]
        if cgroup:
            assert KILLED in outcome["in-flight"], outcome["in-flight"][-500:]
            assert KILLED in outcome["sysv"], outcome["sysv"][-500:]
        own = results[len(PAYLOADS) : -1]
        assert [r.split("\n", 1)[0] for r in own] == [
            "exit code 153",
            "exit code 152",
            "exit code 153",
        ], own
        assert not any("[killed" in r for r in own), own
        assert results[-1] == "exit code 0\nalive\n", results[-1]
