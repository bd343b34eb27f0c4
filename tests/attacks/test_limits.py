"""Limits on every sandboxed command, through the real `talos run`.

A hostile model runs a fork bomb, a Python fork loop, memory hogs (one process, and four
together), a /tmp fill, a file past the size limit and a busy loop, under small limits the
person's config file sets; each ends with a message naming the limit, `talos run` goes on to
the next command and finishes, and the person's other processes (a process of the same user
started before) live on. In the default mode (the person's rules allow `bash` and `python3`;
the payloads are scripts) and in full-auto (one-liners), as the current user and, when the
tests run as root, in full-auto as an ordinary user (uid 65534), whom the kernel's process
limit applies to and who cannot make a cgroup (as root a pids cgroup bounds the processes:
the kernel exempts uid 0 from RLIMIT_NPROC). As root without capabilities nothing runs at
all: bwrap cannot start, and every command is asked (`test_outside.py` covers it).

Then legitimate work under the default limits: pytest with a plugin that spawns processes (a
multiprocessing pool, a forkserver on its Unix socket in /tmp, subprocesses), `npm test` whose
script forks node processes and serves on a Unix socket inside the workspace, `make -j4`, git.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from talos_ls.agent import limits as lim

from ..system import require_binary
from .conftest import USERS, Attack, attack_as
from .test_commands import assert_nothing_leaked, assert_ran, batch

LIMITS = {"processes": 64, "memory_mb": 256, "tmp_mb": 32, "file_mb": 64, "cpu_seconds": 1}
KILLED = {
    "processes": "[killed: it reached the limit of 64 processes",
    "memory": "[killed: it reached the memory limit of 256 MiB]",
    "tmp": "[killed: the sandbox's /tmp reached its limit of 32 MiB]",
    "file": "[killed: a file reached the size limit of 64 MiB (SIGXFSZ)]",
    "cpu": "[killed: it used its 1 s of CPU time]",
}
# name: (the limit it hits, the one-liner, the script's file name and text)
PAYLOADS = {
    "bomb": ("processes", ":(){ :|:& };:; sleep 60", "bomb.sh", ":(){ :|:& };:\nsleep 60\n"),
    "fork": (
        "processes",
        "python3 -c 'import os\nwhile True:\n    try: os.fork()\n    except OSError: pass'",
        "fork.py",
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
    ),
    "hog": (
        "memory",
        "python3 -c 'x = []\nwhile True: x.append(bytearray(16 * 2**20))'",
        "hog.py",
        "x = []\nwhile True:\n    x.append(bytearray(16 * 2**20))\n",
    ),
    "hogs": (
        "memory",
        "for i in 1 2 3 4; do python3 -c 'import time; x = bytearray(100 * "
        "2**20); time.sleep(60)' & done; wait",
        "hogs.sh",
        "for i in 1 2 3 4; do\n  python3 -c 'import time; x = bytearray(100 * 2**20); "
        "time.sleep(60)' &\ndone\nwait\n",
    ),
    "fill": (
        "tmp",
        "cat /dev/zero > /tmp/fill; sleep 60",
        "fill.sh",
        "cat /dev/zero > /tmp/fill\nsleep 60\n",
    ),
    "big": (
        "file",
        "head -c 100000000 /dev/zero > big.bin",
        "big.sh",
        "head -c 100000000 /dev/zero > big.bin\n",
    ),
    "spin": ("cpu", "python3 -c 'while True: pass'", "spin.py", "while True:\n    pass\n"),
}
AFTER = "echo alive; python3 -c 'print(6 * 7)'"


RUNS = [("as-is", "ask"), ("as-is", "full-auto"), *(("uid-65534", "full-auto"),) * (len(USERS) > 1)]


@pytest.mark.parametrize(("user", "mode"), RUNS)
def test_each_limit_ends_the_command_with_a_message_and_nothing_else(
    tmp_path, server, sandboxed, user, mode
):
    with attack_as(user, tmp_path, server) as attack:
        _each_limit(attack, mode)


def _each_limit(attack: Attack, mode: str) -> None:
    prefix = attack.prefix
    (attack.config / "talos").mkdir(parents=True, exist_ok=True)
    table = "".join(f"{k} = {v}\n" for k, v in LIMITS.items())
    (attack.config / "talos" / "config.toml").write_text(f"[limits]\n{table}")
    if mode == "ask":
        attack.settings(commands={"allow": ["bash", "python3", "echo"]})
        for _, _, name, text in PAYLOADS.values():
            (attack.ws / name).write_text(text)
        runner = {".sh": "bash", ".py": "python3"}
        commands = [f"{runner[Path(p[2]).suffix]} {p[2]}" for p in PAYLOADS.values()]
    else:
        commands = [p[1] for p in PAYLOADS.values()]
    commands.append(AFTER)
    attack.hand_over()
    bystander = subprocess.Popen([*prefix, "sleep", "600"])  # the person's own process
    try:
        proc, results = batch(attack, commands, mode=mode)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert_ran(commands, results)
        for (name, (kind, *_)), result in zip(PAYLOADS.items(), results, strict=False):
            said = KILLED[kind]
            if name == "hog":  # the kernel may refuse the one process's allocation first
                assert said in result or "MemoryError" in result, (name, result[-500:])
            else:
                assert said in result, (name, result[-500:])
                assert f"A command was stopped: {said[len('[killed: ') :].rstrip(']')}" in (
                    proc.stderr
                ), proc.stderr[-2000:]  # the person is told too
        assert results[-1] == "exit code 0\nalive\n42\n", results[-1]
        assert bystander.poll() is None, "the person's own process was killed"
        again = subprocess.run(
            [*prefix, "sh", "-c", "echo forked"], capture_output=True, text=True, timeout=30
        )
        assert again.stdout == "forked\n"  # the user can still start processes
        big = attack.ws / "big.bin"
        assert not big.exists() or big.stat().st_size <= LIMITS["file_mb"] * lim.MIB
        assert_nothing_leaked(attack, proc.stdout, proc.stderr, *results)
    finally:
        bystander.kill()
        bystander.wait()


SPAWNER = '''
"""A pytest plugin that spawns processes, as pytest-xdist and friends do."""
import multiprocessing
import subprocess
import sys

import pytest


@pytest.fixture(scope="session")
def pools():
    forked = multiprocessing.get_context("fork").Pool(4)
    served = multiprocessing.get_context("forkserver").Pool(2)  # a Unix socket in /tmp
    yield forked, served
    forked.close()
    served.close()


def pytest_sessionstart(session):
    subprocess.run([sys.executable, "-c", "pass"], check=True)
'''
TESTS = """
import subprocess
import sys


def square(n):
    return n * n


def test_pool(pools):
    forked, served = pools
    assert forked.map(square, range(20)) == [n * n for n in range(20)]
    assert served.map(square, range(5)) == [0, 1, 4, 9, 16]


def test_subprocesses():
    procs = [subprocess.Popen([sys.executable, "-c", "print(1)"], stdout=subprocess.PIPE)
             for _ in range(8)]
    assert [p.communicate()[0] for p in procs] == [b"1\\n"] * 8
"""
NODE_TEST = r"""
const { fork } = require('child_process');
const net = require('net');
const fs = require('fs');
if (process.argv[2] === 'child') { process.send(Number(process.argv[3]) * 2); return; }
const sock = 'test.sock';
try { fs.unlinkSync(sock); } catch (e) {}
const server = net.createServer((c) => { c.end('pong'); });
server.listen(sock, async () => {
  const doubled = await Promise.all([1, 2, 3, 4].map((n) => new Promise((resolve) => {
    fork(__filename, ['child', String(n)]).on('message', resolve);
  })));
  net.connect(sock).on('data', (d) => {
    console.log('npm-ok', doubled.join(','), String(d));
    server.close();
  });
});
"""
MAKEFILE = "".join(
    [
        "TARGETS := " + " ".join(f"out/t{i}" for i in range(8)) + "\n",
        "all: $(TARGETS)\n\t@cat $(TARGETS) | sort | tr '\\n' ' '; echo\n",
        "out/%:\n\t@mkdir -p out && sleep 0.2 && echo $* > $@\n",
    ]
)
LEGITIMATE = [
    "python3 -m pytest -q -p no:cacheprovider -p spawner test_spawn.py",  # -m: cwd importable
    "npm test --silent",
    "make -j4",
    "git status --short",
    "git log --oneline",
]


def test_legitimate_work_runs_under_the_default_limits(attack, sandboxed):
    """pytest with a plugin that spawns processes, `npm test` (node forks, a Unix socket in
    the workspace), `make -j4` and git, in full-auto, under the machine's default limits."""
    npm = require_binary("npm", "apt-get install -y npm")
    require_binary("make", "apt-get install -y make")
    ws = attack.ws
    (ws / "spawner.py").write_text(SPAWNER)
    (ws / "test_spawn.py").write_text(TESTS)
    (ws / "node_test.js").write_text(NODE_TEST)
    (ws / "package.json").write_text(
        json.dumps({"name": "t", "version": "1.0.0", "scripts": {"test": "node node_test.js"}})
    )
    (ws / "Makefile").write_text(MAKEFILE)
    subprocess.run(["git", "-C", str(ws), "add", "-A"], check=True, capture_output=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(ws),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "init",
        ],
        check=True,
        capture_output=True,
    )
    attack.path = os.pathsep.join(
        [str(Path(sys.executable).parent), os.path.dirname(npm), os.environ.get("PATH", "")]
    )
    _, results = batch(attack, LEGITIMATE, mode="full-auto")
    assert_ran(LEGITIMATE, results)
    pytest_run, npm_run, make_run, status, log = results
    assert pytest_run.startswith("exit code 0\n") and "2 passed" in pytest_run, pytest_run
    assert npm_run.startswith("exit code 0\n") and "npm-ok 2,4,6,8 pong" in npm_run, npm_run
    assert make_run.startswith("exit code 0\n"), make_run
    assert "t0 t1 t2 t3 t4 t5 t6 t7" in make_run, make_run
    assert status.startswith("exit code 0\n") and log.startswith("exit code 0\n")
    assert "init" in log, log
    assert_nothing_leaked(attack, *results)
