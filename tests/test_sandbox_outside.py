"""The sandbox outside the workspace and the limits, run for real under bubblewrap: what /etc
keeps from others, toolchains reached through links, readable paths, and the limits' parts.
The attacks through `talos run` are in tests/attacks/test_outside.py and test_limits.py."""

from __future__ import annotations

import asyncio
import os
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from talos_ls.agent import limits as lim
from talos_ls.agent import sandbox as sandbox_module
from talos_ls.agent.limits import MIB, Limits
from talos_ls.agent.sandbox import Sandbox, etc_secrets, readable_paths_problem

from .system import as_another_user, as_ordinary_user, require_sandbox


def run(sandbox: Sandbox, command: str, **kw) -> str:
    kw.setdefault("writable", False)
    done = asyncio.run(sandbox.run(command, sandboxed=True, network=False, timeout=30, **kw))
    return done.output


@pytest.fixture
def ws(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    root = tmp_path / "ws"
    root.mkdir()
    return root


def test_what_etc_keeps_from_others_is_found(tmp_path, monkeypatch):
    """A file others may not read, a directory they may not enter and a socket are found; a
    world-readable file, a link and what lies inside a closed directory are not."""
    top = tmp_path / "etc"
    (top / "app").mkdir(parents=True)
    (top / "app" / "public.conf").write_text("x")
    (top / "app" / "secret.conf").write_text("password")
    (top / "app" / "secret.conf").chmod(0o640)
    (top / "vault" / "deep").mkdir(parents=True)
    (top / "vault").chmod(0o750)
    (top / "link").symlink_to("app/secret.conf")
    server = socket.socket(socket.AF_UNIX)
    monkeypatch.chdir(top / "app")  # bound by a relative name: a socket's path has 107 bytes
    server.bind("daemon.sock")
    try:
        found = set(etc_secrets(str(top)))
    finally:
        server.close()
    assert found == {top / "app" / "secret.conf", top / "vault", top / "app" / "daemon.sock"}


def test_the_real_etc_secrets_are_covered_in_the_sandbox(ws):
    """Every entry of this machine's /etc that others may not read is covered on the command
    line and reads empty inside (root would read them otherwise)."""
    sandbox = Sandbox(ws, bwrap=require_sandbox())
    found = etc_secrets()
    for path in found:
        mode = os.lstat(path).st_mode
        assert stat.S_ISSOCK(mode) or not mode & stat.S_IROTH or not mode & stat.S_IXOTH, path
    argv = sandbox.argv("true", writable=False, network=False)
    covered = {argv[i + 2] for i, a in enumerate(argv) if a == "--ro-bind"}
    covered |= {argv[i + 1] for i, a in enumerate(argv) if a == "--tmpfs"}
    assert {str(p) for p in found} <= covered
    files = [p for p in found if p.is_file()][:10]
    if files:
        out = run(sandbox, "; ".join(f"cat {p} 2>&1 | wc -c" for p in files))
        assert out.split() == ["0"] * len(files), out


def test_a_program_linked_from_path_brings_its_toolchain(ws, tmp_path, monkeypatch):
    """`/usr/local/bin/node -> /opt/node/bin/node`: the link's target's toolchain is shown, its
    neighbours are not."""
    tool = tmp_path / "opt" / "node" / "bin"
    tool.mkdir(parents=True)
    (tool / "nodeish").write_text("#!/bin/sh\necho toolchain-ran\n")
    (tool / "nodeish").chmod(0o755)
    (tmp_path / "opt" / "other").mkdir()
    (tmp_path / "opt" / "other" / "notes.txt").write_text("not for you\n")
    on_path = tmp_path / "local-bin"
    on_path.mkdir()
    (on_path / "nodeish").symlink_to(tool / "nodeish")
    monkeypatch.setenv("PATH", f"{on_path}:/usr/bin:/bin")
    tools = [shown for shown, _ in Sandbox._toolchains().places]
    assert tmp_path / "opt" / "node" in tools and tmp_path / "opt" not in tools
    sandbox = Sandbox(ws, bwrap=require_sandbox())
    out = run(sandbox, f"nodeish; cat {tmp_path}/opt/other/notes.txt 2>&1")
    assert "toolchain-ran" in out and "not for you" not in out, out


def test_a_link_the_repository_ships_on_path_brings_nothing(ws, tmp_path, monkeypatch):
    """A virtualenv in the workspace on PATH is the repository's: a link there to another
    project's program does not make that project visible."""
    other = tmp_path / "other" / "tool" / "bin"
    other.mkdir(parents=True)
    (other / "prog").write_text("#!/bin/sh\necho other-ran\n")
    (other / "prog").chmod(0o755)
    (tmp_path / "other" / "tool" / "secret.txt").write_text("other project\n")
    venv_bin = ws / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "prog").symlink_to(other / "prog")
    monkeypatch.setenv("PATH", f"{venv_bin}:/usr/bin:/bin")
    shown = [shown for shown, _ in Sandbox._toolchains().places]
    assert tmp_path / "other" / "tool" in shown  # the person's own PATH would
    sandbox = Sandbox(ws, bwrap=require_sandbox())
    out = run(sandbox, f"prog 2>&1; cat {tmp_path}/other/tool/secret.txt 2>&1")
    assert "other-ran" not in out and "other project" not in out, out


def test_a_readable_path_is_shown_read_only_with_its_credentials_still_hidden(ws, tmp_path):
    """A readable path is shown read-only, where the person named it even through a link;
    a credential store that is a link into it (`~/.ssh -> shared/dot-ssh`) is hidden there,
    at both names; nothing next to it is shown."""
    shared = tmp_path / "shared"
    (shared / "dot-ssh").mkdir(parents=True)
    (shared / "data.txt").write_text("shared data\n")
    (shared / "dot-ssh" / "id_rsa").write_text("PRIVATE KEY\n")
    (tmp_path / "home" / ".ssh").symlink_to(shared / "dot-ssh")
    (tmp_path / "home" / ".netrc").symlink_to(shared / "netrc")
    (shared / "netrc").write_text("machine x password NETRC-PASSWORD\n")
    (tmp_path / "alias").symlink_to(shared)
    (tmp_path / "next-door").mkdir()
    (tmp_path / "next-door" / "x.txt").write_text("next door\n")
    sandbox = Sandbox(
        ws, bwrap=require_sandbox(), readable=[shared, f"/{tmp_path}/alias/", tmp_path / "missing"]
    )
    out = run(
        sandbox,
        f"cat {shared}/data.txt {tmp_path}/alias/data.txt "
        f"{shared}/dot-ssh/id_rsa {tmp_path}/alias/dot-ssh/id_rsa {shared}/netrc "
        f"{tmp_path}/alias/netrc {tmp_path}/next-door/x.txt 2>&1; "
        f"echo x > {shared}/new 2>&1; echo done",
        writable=True,
    )
    assert out.count("shared data") == 2, out
    assert "PRIVATE KEY" not in out and "NETRC-PASSWORD" not in out, out
    assert "next door" not in out and "Read-only file system" in out, out
    assert not (shared / "new").exists()


@pytest.mark.parametrize(
    "paths, says",
    [
        (["/"], "everything"),
        (["/proc/self"], "own"),
        (["/sys"], "own"),
        (["/run"], "inside"),
        (["srv"], "absolute"),
        (["/srv/./x"], ". or .."),
        (["/srv\nx"], "control"),
        (["//proc"], "own"),
        (["//"], "everything"),
        (["///sys//class"], "own"),
        (["/root"], "home"),
        (["/home"], "home"),
        (["/home/"], "home"),
    ],
)
def test_readable_paths_that_are_refused(paths, says):
    problem = readable_paths_problem(paths)
    assert problem and says in problem, problem
    assert readable_paths_problem(["/srv/data", "/tmp/shared", "/var/run/postgresql"]) is None


def test_readable_paths_are_judged_by_what_they_lead_to(ws, tmp_path):
    """A link to /proc, to a home, to an ancestor of one or to Talos's own files is refused
    by what it leads to; one pointed there after the settings were read is left out when a
    command runs: the sandbox's /proc stays its own (the daemon's processes out of sight)."""
    home = tmp_path / "home"
    for name, target in (
        ("to-proc", "/proc"),
        ("to-home", home),
        ("to-tmp", tmp_path),
        ("to-state", home / ".local" / "state" / "talos"),
    ):
        (tmp_path / name).symlink_to(target)
        problem = readable_paths_problem([str(tmp_path / name)])
        assert problem and f"(that is '{os.path.realpath(target)}')" in problem, problem
    assert "home directory" in readable_paths_problem([str(home)])
    assert "Talos's own" in readable_paths_problem([str(home / ".config" / "talos" / "x")])
    (tmp_path / "later").mkdir()
    (tmp_path / "data").symlink_to(tmp_path / "later")
    sandbox = Sandbox(ws, bwrap=require_sandbox(), readable=[str(tmp_path / "data"), "//proc"])
    (tmp_path / "data").unlink()
    (tmp_path / "data").symlink_to("/proc")  # after the settings were checked
    out = run(sandbox, f"ls /proc | grep -c '^[0-9]'; ls {tmp_path}/data 2>&1 | head -1")
    assert int(out.split()[0]) < 10, out  # the sandbox's own processes only
    assert "No such file" in out, out
    assert f"/proc/{os.getpid()}/" not in out


def test_the_limits_parse_and_say_what_they_are():
    limits = Limits.parse({"processes": 100, "memory_mb": 300, "cpu_seconds": 5})
    assert (limits.processes, limits.memory, limits.cpu) == (100, 300 * MIB, 5)
    assert limits.tmp == Limits.default().tmp  # left out: the default
    assert Limits.parse(limits.as_setting()) == limits
    assert "100 processes, 300 MiB memory" in limits.describe()
    for bad in ({"processes": 3}, {"swap_mb": 1}, {"memory_mb": True}, []):
        with pytest.raises(ValueError):
            Limits.parse(bad)
    assert lim.from_exit(128 + 25, True) == "file" and lim.from_exit(128 + 24, True) == "cpu"
    assert lim.from_exit(1, True) is None and lim.from_exit(128 + 25, False) is None


def test_the_limits_are_set_inside_the_sandbox(ws):
    limits = Limits.parse({"processes": 77, "file_mb": 3, "cpu_seconds": 40})
    sandbox = Sandbox(ws, bwrap=require_sandbox(), limits=limits)
    out = run(
        sandbox,
        "ulimit -u; ulimit -H -u; ulimit -f; ulimit -t; ulimit -H -t; ulimit -c; "
        "ulimit -H -u 5000 2>&1 | tail -1; ulimit -u",
    )
    lines = out.split("\n")
    assert lines[:6] == ["77", "77", str(3 * 1024), "41", "42", "0"], out
    assert "Operation not permitted" in lines[6] or "cannot modify" in lines[6], out
    assert lines[7] == "77"  # nothing in the sandbox raises them


def test_the_tmpfs_of_the_sandbox_are_sized(ws):
    """/tmp as the limit says, /dev/shm and /var/tmp at most that, /run small; /dev and bwrap's
    root read-only (unsized tmpfs both). Filling them: tests/attacks/test_limits.py."""
    sandbox = Sandbox(ws, bwrap=require_sandbox(), limits=Limits.parse({"tmp_mb": 8}))
    out = run(
        sandbox,
        "df -B1 --output=size,target /tmp /dev/shm /var/tmp /run | tail -n +2; "
        "echo x > /dev/planted; echo x > /planted; echo done",
    )
    sizes = {line.split()[1]: int(line.split()[0]) for line in out.splitlines()[:4]}
    assert sizes == {
        "/tmp": 8 * MIB,
        "/dev/shm": 8 * MIB,
        "/var/tmp": 8 * MIB,
        "/run": lim.SMALL_TMPFS,
    }, out
    assert out.count("Read-only file system") == 2 and out.rstrip().endswith("done"), out


@pytest.mark.skipif(os.geteuid() != 0, reason="root without capabilities: only as root")
def test_root_without_capabilities_is_told_why_there_is_no_sandbox(tmp_path):
    require_sandbox()
    code = (
        "from pathlib import Path; from talos_ls.agent.sandbox import Sandbox; "
        "print(Sandbox(Path('.')).probe().detail)"
    )
    done = subprocess.run(
        [*as_ordinary_user(), sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert "CAP_SETFCAP" in done.stdout and "ordinary user" in done.stdout, done


def test_doctor_says_how_the_limits_are_enforced(ws):
    """As this user: a cgroup when one can be made here; as an ordinary user (uid 65534, when
    the tests run as root), the kernel's per-sandbox count, as nobody can make a cgroup."""
    from talos_ls.doctor import check_limits

    require_sandbox()
    checks = check_limits(ws, Limits.parse({"processes": 99}))
    assert checks[0] == (True, checks[0][1]) and "99 processes" in checks[0][1]
    ok, how = checks[1]
    if lim.hierarchies():
        assert ok and "processes bounded by a pids cgroup" in how, how
        if any("memory" in h.controllers for h in lim.hierarchies()):
            assert "memory bounded by a memory cgroup per command" in how, how
    elif os.getuid() == 0:
        assert not ok and "as root the kernel does not apply the process limit" in how, how
    else:
        assert ok and "bounded by the kernel" in how, how
    if os.geteuid() == 0:
        code = "from talos_ls.agent.limits import describe_enforcement as d; print(d())"
        done = subprocess.run(
            [*as_another_user(), sys.executable, "-c", code],
            text=True,
            capture_output=True,
            timeout=60,
            cwd="/",
        )
        assert "(True, 'command limits: processes bounded by the kernel per sandbox" in (
            done.stdout
        ), done


def cpuset_base():
    """A cgroup v1 cpuset hierarchy this process may make children in, or a skip: a new
    cpuset has no CPUs, so a child can be made there and no process moved into it."""
    base = next(
        (
            Path(p.split()[4])
            for p in Path("/proc/self/mountinfo").read_text().splitlines()
            if " - cgroup " in p and "cpuset" in p.split(" - ")[1].split()[2].split(",")
        ),
        None,
    )
    own = dict(line.split(":", 2)[1:] for line in Path("/proc/self/cgroup").read_text().split())
    if base is None or own.get("cpuset") != "/" or not os.access(base, os.W_OK):
        pytest.skip("needs a writable cgroup v1 cpuset hierarchy (root, cgroup v1)")
    return base


def test_a_cgroup_that_can_be_made_but_not_joined_is_not_used(ws, monkeypatch):
    """The probe moves a process into the cgroup it made: one where that fails is not a
    place for commands. And a command whose move fails anyway does not run, with a message
    that says why (not a silent exit status 125)."""
    base = cpuset_base()
    assert not lim._joinable(base)
    (base / "talos-probe-made").mkdir()  # making one works: that alone proves nothing
    (base / "talos-probe-made").rmdir()
    unjoinable = lim._Hierarchy(1, base, ())
    monkeypatch.setattr(lim, "_FOUND", [[unjoinable]])
    sandbox = Sandbox(ws, bwrap=require_sandbox())
    done = asyncio.run(
        sandbox.run("touch ran", sandboxed=True, writable=True, network=False, timeout=30)
    )
    assert done.exit_code == 125, done
    assert "could not move the command into its cgroup" in done.output, done.output
    assert "it did not run" in done.output and not (ws / "ran").exists()
    assert not [p for p in base.iterdir() if p.name.startswith("talos-")]


def test_only_a_signal_says_a_file_or_cpu_limit_was_reached(ws):
    """SIGXFSZ killing the command's first process (the launcher says so) or a program of
    its shell (the shell says so) is the file size limit; exit statuses 152 and 153 of a
    command's own are not a limit."""
    sandbox = Sandbox(ws, bwrap=require_sandbox(), limits=Limits.parse({"file_mb": 1}))
    said = "[killed: a file reached the size limit of 1 MiB (SIGXFSZ)]"
    cases = {
        "exec head -c 3000000 /dev/zero > big1": None,
        "head -c 3000000 /dev/zero > big2": None,
        "sh -c 'exit 153'": 153,
        "exit 152": 152,
    }
    for command, code in cases.items():
        done = asyncio.run(
            sandbox.run(command, sandboxed=True, writable=True, network=False, timeout=30)
        )
        if code is None:
            assert said in done.output and done.killed == "limit", (command, done)
        else:
            assert done.exit_code == code and done.limit is None, (command, done)
            assert "[killed" not in done.output, (command, done)
    assert (ws / "big1").stat().st_size == MIB


def test_the_toolchains_are_remembered_for_each_workspace(ws, tmp_path, monkeypatch):
    """A daemon serving several folders lays out commands for each in turn: what PATH needs
    is remembered for every one of them, not thrown away at each change of folder."""
    other = tmp_path / "other"
    other.mkdir()
    scans: list[str] = []
    real_scandir = os.scandir
    this = threading.get_ident()

    def counting(path="."):  # os.scandir is patched for every thread: count only this one's
        if threading.get_ident() == this:
            scans.append(str(path))
        return real_scandir(path)

    tools = tmp_path / "tools" / "bin"  # a PATH of its own: the runner's may show nothing
    tools.mkdir(parents=True)
    (tools / "tool").symlink_to(sys.executable)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}/usr/bin")
    monkeypatch.setattr(sandbox_module.os, "scandir", counting)
    sandbox_module._TOOLS.clear()
    for root in (ws, other, ws, other, ws):
        Sandbox._toolchains(root)
    first = len(scans)
    for root in (ws, other, ws, other):
        Sandbox._toolchains(root)
    assert first > 0 and len(scans) == first, scans  # both remembered: no PATH read again
