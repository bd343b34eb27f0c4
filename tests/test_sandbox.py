"""The OS sandbox for commands, run for real: bubblewrap when it is here (the tests that need it
skip with the install command otherwise, and fail under TALOS_TEST_REQUIRE_ALL=1), and the
unsandboxed fallback, which runs everywhere."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

from talos_ls.agent.sandbox import INSTALL_HINT, SYSTEM_SECRETS, Sandbox

from .system import require_sandbox, unique_seconds

SECRET = "sk-proj-SandboxUnitTestKey0123456789abcdef"


@pytest.fixture
def ws(tmp_path, monkeypatch):
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("hello\n")
    (root / ".env").write_text(f"KEY={SECRET}\n")
    (root / "sub" / ".env.production").write_text(f"KEY={SECRET}\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / ".talos").mkdir()
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    (tmp_path / "config" / "talos").mkdir(parents=True)
    (tmp_path / "config" / "talos" / "permissions.json").write_text('{"x": 1}')
    return root


def run(sandbox, command, *, sandboxed=True, writable=False, network=False, timeout=20.0, **kw):
    return asyncio.run(
        sandbox.run(
            command, sandboxed=sandboxed, writable=writable, network=network, timeout=timeout, **kw
        )
    )


def test_nothing_secret_is_in_reach(ws, tmp_path):
    sandbox = Sandbox(ws, bwrap=require_sandbox())
    script = (
        "env; echo ---; cat /proc/*/environ | tr '\\0' '\\n'; echo ---; "
        "cat .env sub/.env.production; ls -a ~; "
        f"cat {tmp_path}/home/.ssh/id_ed25519 {tmp_path}/config/talos/permissions.json; "
        f"cat /proc/{os.getpid()}/environ; echo procs=$(ls /proc | grep -cE '^[0-9]+$')"
    )
    out = run(sandbox, script).output
    assert SECRET not in out and "PRIVATE" not in out and '{"x": 1}' not in out
    assert "OPENAI_API_KEY" not in out and "XDG_CONFIG_HOME" not in out
    assert "HOME=/tmp/home" in out
    procs = int(out.rsplit("procs=", 1)[1].split()[0])
    assert procs < 10  # a PID namespace of its own: the daemon and its siblings are not there


def test_workspace_is_read_only_unless_approved_and_protected_paths_always(ws):
    sandbox = Sandbox(ws, bwrap=require_sandbox())
    writes = (
        "echo x > new.txt; echo x > .talos/permissions.json; "
        "echo x > .git/hooks/pre-commit; echo x >> .git/config; echo x > .env; "
        "umount .env; echo done"
    )
    ro = run(sandbox, writes).output
    assert "Read-only file system" in ro and not (ws / "new.txt").exists()
    rw = run(sandbox, writes, writable=True).output
    assert (ws / "new.txt").read_text() == "x\n"
    for path in (".talos/permissions.json", ".git/hooks/pre-commit"):
        assert not (ws / path).exists(), path
    assert "x" not in (ws / ".git" / "config").read_text().splitlines()
    assert (ws / ".env").read_text() == f"KEY={SECRET}\n"
    assert rw.rstrip().endswith("done")


def test_no_network_unless_granted(ws, server):
    """The scripted model server listens on the host's loopback: out of reach unless granted."""
    sandbox = Sandbox(ws, bwrap=require_sandbox())
    port = server.url.split(":")[2].split("/")[0]
    probe = f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo reached || echo unreachable"
    assert run(sandbox, probe).output.strip().endswith("unreachable")
    assert run(sandbox, probe, network=True).output.strip().endswith("reached")


def test_output_cap_and_timeout_kill_everything(ws):
    sandbox = Sandbox(ws, bwrap=require_sandbox())
    flood = run(sandbox, "yes talos", max_bytes=100_000)
    assert flood.killed == "output" and flood.exit_code is None
    assert "[killed: the output passed 100000 bytes" in flood.output
    assert len(flood.output) < 20_000  # head and tail only
    marker = "talos-sandbox-orphan-marker"
    s = unique_seconds(300)
    slow = run(sandbox, f"(sleep {s} && echo {marker}) & nohup sleep {s} & sleep {s}", timeout=1)
    assert slow.killed == "timeout" and "no result after 1 s" in slow.output
    left = subprocess.run(["pgrep", "-f", f"sleep {s}"], capture_output=True, text=True)
    assert left.stdout == "", "a sandboxed process outlived its command"


def test_fallback_runs_with_a_clean_environment(ws):
    sandbox = Sandbox(ws, bwrap="")
    out = run(sandbox, "env; pwd", sandboxed=False).output
    assert SECRET not in out and "OPENAI_API_KEY" not in out and str(ws) in out
    assert "HOME=" in out and "/tmp" in out.split("HOME=")[1].split()[0]
    flood = run(sandbox, "cat /dev/zero", sandboxed=False, max_bytes=50_000)
    assert flood.killed == "output"


def test_probe_says_what_is_wrong(tmp_path):
    assert Sandbox(tmp_path, bwrap="").probe().detail.endswith(INSTALL_HINT)
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(0o755)
    state = Sandbox(tmp_path, bwrap=str(fake)).probe()
    assert not state.available
    assert "setting up uid map: Permission denied" in state.detail
    assert "user namespaces" in state.detail
    os.unlink(fake)
    assert Sandbox(tmp_path, bwrap=str(fake)).probe() is state  # probed once, remembered


def test_git_metadata_cannot_be_replaced_or_created(ws, tmp_path):
    """`.git` cannot be moved away, nor its config or hooks replaced, even by a writable
    command that deletes what it may delete in it (its history: as any workspace file)."""
    sandbox = Sandbox(ws, bwrap=require_sandbox())
    config = (ws / ".git" / "config").read_bytes()
    hooks = sorted(p.name for p in (ws / ".git" / "hooks").iterdir())
    run(
        sandbox,
        "mv .git .git2; rm -rf .git; echo '[core] fsmonitor = touch /tmp/x' > .git/config",
        writable=True,
    )
    assert (ws / ".git" / "config").read_bytes() == config and not (ws / ".git2").exists()
    assert sorted(p.name for p in (ws / ".git" / "hooks").iterdir()) == hooks
    bare = tmp_path / "bare"
    bare.mkdir()
    fresh = Sandbox(bare, bwrap=sandbox.bwrap)
    out = run(
        fresh,
        "git init -q . ; mkdir -p .talos/skills; echo x > .talos/rules.md; echo ok",
        writable=True,
    ).output
    assert out.rstrip().endswith("ok")
    assert sorted(p.name for p in bare.iterdir()) == []  # no .git, no .talos: stand-ins gone


def test_every_secrets_file_is_unreadable(ws, tmp_path):
    sandbox = Sandbox(ws, bwrap=require_sandbox())
    (ws / ".envrc").write_text(f"export KEY={SECRET}\n")
    (ws / "config").mkdir()
    target = ws / "config" / "shared.txt"
    target.write_text(f"KEY={SECRET}\n")
    os.symlink(target, ws / "sub" / ".env.staging")  # a link: its target is hidden
    (ws / "deep" / "a" / "b").mkdir(parents=True)
    (ws / "deep" / "a" / "b" / ".env").write_text(f"KEY={SECRET}\n")
    out = run(
        sandbox,
        "cat .envrc sub/.env.staging deep/a/b/.env config/shared.txt; grep -r K .",
        writable=True,
    ).output
    assert SECRET not in out


def test_only_the_toolchains_on_path_are_bound_from_a_home(ws, tmp_path, monkeypatch):
    home = tmp_path / "home"
    venv_bin = home / "src" / "talos" / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (home / "src" / "other").mkdir(parents=True)
    (home / "src" / "other" / "notes.txt").write_text("private\n")
    (home / ".cargo" / "bin").mkdir(parents=True)
    (home / ".cargo" / "credentials.toml").write_text("token = private\n")
    monkeypatch.setenv("PATH", f"{venv_bin}:{home / '.cargo' / 'bin'}:/usr/bin:/bin")
    tools = [shown for shown, _ in Sandbox._toolchains().places]
    assert home / "src" / "talos" / ".venv" in tools and home / ".cargo" in tools
    assert home / "src" not in tools
    sandbox = Sandbox(ws, bwrap=require_sandbox())
    out = run(
        sandbox,
        f"ls {venv_bin.parent}; cat {home}/src/other/notes.txt {home}/.cargo/credentials.toml",
    ).output
    assert "bin" in out and "private" not in out


def test_the_secrets_scan_sees_what_changed_since_the_last_command(ws):
    sandbox = Sandbox(ws, bwrap=require_sandbox())
    missing = run(sandbox, "cat later/.env.new 2>&1; echo").output
    assert missing.strip().endswith("No such file or directory")
    (ws / "later").mkdir()
    (ws / "later" / ".env.new").write_text(f"KEY={SECRET}\n")  # made between two commands
    out = run(sandbox, "cat later/.env.new sub/.env.production; echo done").output
    assert SECRET not in out and out.strip().endswith("done")
    (ws / "sub" / ".env.production").rename(ws / "sub" / "renamed.txt")
    os.symlink("renamed.txt", ws / "sub" / ".envrc")  # a link: its target hidden instead
    assert SECRET not in run(sandbox, "cat sub/renamed.txt sub/.envrc").output


def test_a_toolchain_in_a_blanked_directory_is_still_there(ws, tmp_path, monkeypatch):
    """A virtualenv under /tmp (a CI checkout) on PATH stays usable, though /tmp is empty."""
    venv_bin = tmp_path / "ci" / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "hello-tool").write_text("#!/bin/sh\necho tool-ran\n")
    (venv_bin / "hello-tool").chmod(0o755)
    (tmp_path / "ci" / "other.txt").write_text("not a toolchain\n")
    monkeypatch.setenv("PATH", f"{venv_bin}:/usr/bin:/bin")
    sandbox = Sandbox(ws, bwrap=require_sandbox())
    out = run(sandbox, f"hello-tool; cat {tmp_path}/ci/other.txt").output
    assert "tool-ran" in out and "not a toolchain" not in out


def test_the_systems_own_secrets_are_hidden(ws):
    """/etc/shadow, sudoers, TLS private keys and SSH host keys: root can read them, and a
    sandbox of root's is root. Each one that exists is covered by an empty file or directory."""
    sandbox = Sandbox(ws, bwrap=require_sandbox())
    present = [p for p in SYSTEM_SECRETS if os.path.exists(p)]
    present += [str(p) for p in Path("/etc/ssh").glob("ssh_host_*key")]
    assert "/etc/shadow" in present  # on any Linux with a password database
    script = "; ".join(f"echo == {p}; cat {p} 2>&1 || ls -A {p}" for p in present)
    out = run(sandbox, script).output
    for chunk in out.split("== ")[1:]:
        path, _, shown = chunk.partition("\n")
        assert not shown.strip() or "Is a directory" in shown, (path, shown)
    argv = sandbox.argv("true", writable=False, network=False)
    covered = {argv[i + 2] for i, a in enumerate(argv) if a == "--ro-bind"}
    covered |= {argv[i + 1] for i, a in enumerate(argv) if a == "--tmpfs"}
    assert set(present) <= covered, set(present) - covered


def test_the_fallback_kills_every_process_of_the_command_at_its_timeout(ws):
    """Without bwrap there is no PID namespace to take the children with it: the timeout kills
    the command's whole process group, background jobs included."""
    sandbox = Sandbox(ws, bwrap="")
    s = unique_seconds(317)
    slow = run(sandbox, f"sleep {s} & sleep {s} & sleep {s}", sandboxed=False, timeout=1)
    assert slow.killed == "timeout"
    left = subprocess.run(["pgrep", "-f", f"sleep {s}"], capture_output=True, text=True)
    assert left.stdout == "", "a process of the command outlived its timeout"


def test_a_workspace_that_holds_a_home_is_never_writable(ws, monkeypatch):
    """Talos opened on a home directory (or a folder holding one): an approved command could
    plant `~/.bashrc`, `~/.ssh/authorized_keys` or `~/.gitconfig`, which run later, outside
    any sandbox. The workspace stays read-only even for an approved command."""
    monkeypatch.setenv("HOME", str(ws))
    sandbox = Sandbox(ws, bwrap=require_sandbox())
    (ws / ".bashrc").write_text("# mine\n")
    out = run(
        sandbox,
        "echo x > new.txt; echo 'touch PWNED' >> .bashrc; mkdir -p .ssh; "
        "echo key >> .ssh/authorized_keys; echo done",
        writable=True,
    ).output
    assert "Read-only file system" in out and out.rstrip().endswith("done"), out
    assert not (ws / "new.txt").exists() and not (ws / ".ssh").exists()
    assert (ws / ".bashrc").read_text() == "# mine\n"


def test_each_layer_is_on_the_command_line_even_where_another_covers_it(ws):
    """Defence in depth: bwrap is spawned with a clean environment and its own session
    already, and still clears its child's environment and starts a new session (a terminal's
    TIOCSTI cannot push keystrokes out of it), dies with Talos and drops every capability."""
    argv = Sandbox(ws, bwrap="/usr/bin/bwrap").argv("true", writable=False, network=False)
    layout = argv[: argv.index("--")]
    for flag in ("--unshare-all", "--die-with-parent", "--new-session", "--clearenv"):
        assert flag in layout, flag
    assert layout[layout.index("--cap-drop") + 1] == "ALL"
    assert "--share-net" not in layout
    shell, flag, limits, zero, command = argv[argv.index("--") + 1 :]
    assert (flag, zero, command) == ("-c", shell, "true")  # the limits, then `shell -c true`
    assert limits.startswith("ulimit ") and limits.endswith('exec "$0" -c "$1"'), limits
