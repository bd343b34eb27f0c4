"""Toolchains under a home directory (pyenv, nvm, cargo...), run for real under bubblewrap:
what the PATH the person gives commands needs is shown read-only, nothing else of the home;
a hostile PATH entry widens nothing; a program not found says where it is and why."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from talos_ls.agent import sandbox as sandbox_module
from talos_ls.agent.sandbox import Sandbox

from .system import require_sandbox

SECRETS = {
    ".ssh/id_rsa": "PRIVATE-KEY-BAIT",
    ".aws/credentials": "AWS-BAIT",
    ".bash_history": "HISTORY-BAIT",
    ".bashrc": "export TOKEN=DOTFILE-BAIT",
    ".config/app/token": "CONFIG-BAIT",
    "src/other/notes.txt": "OTHER-PROJECT-BAIT",
}


def script(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A home with a pyenv-style toolchain (a shim that runs the version `$PYENV_ROOT/version`
    names, as pyenv's do) and credentials, dotfiles and another project beside it."""
    home = tmp_path / "home"
    for rel, text in SECRETS.items():
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(text + "\n")
    pyenv = home / ".pyenv"
    script(
        pyenv / "shims" / "python",
        '#!/bin/sh\nexec "$PYENV_ROOT/versions/$(cat "$PYENV_ROOT/version")/bin/python" "$@"\n',
    )
    script(pyenv / "versions" / "3.12.0" / "bin" / "python", '#!/bin/sh\necho "fake python $*"\n')
    (pyenv / "version").write_text("3.12.0\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("PYENV_ROOT", raising=False)
    for var in sandbox_module.TOOLCHAIN_ENV:
        monkeypatch.delenv(var, raising=False)
    return home


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    return root


def run(sandbox: Sandbox, command: str) -> sandbox_module.CommandResult:
    return asyncio.run(
        sandbox.run(command, sandboxed=True, writable=False, network=False, timeout=30)
    )


def reads_nothing_of(home: Path, out: str) -> None:
    for bait in SECRETS.values():
        assert bait not in out, (bait, out)


@pytest.mark.parametrize("how", ["default", "variable", "link"])
def test_a_pyenv_toolchain_in_the_home_runs_and_nothing_else_of_it_is_seen(
    home, ws, tmp_path, monkeypatch, how
):
    """`~/.pyenv/shims` on PATH: the shim runs its version (PYENV_ROOT set for it, from the
    person's variable or pyenv's default, since the sandbox's HOME is its own), ~/.pyenv is
    read-only, and the rest of the home is empty: no key, history, dotfile or project."""
    pyenv = home / ".pyenv"
    if how == "variable":
        monkeypatch.setenv("PYENV_ROOT", str(pyenv))
    elif how == "link":  # ~/.pyenv -> ~/tools/pyenv: shown at both places
        (home / "tools").mkdir()
        pyenv.rename(home / "tools" / "pyenv")
        pyenv.symlink_to(home / "tools" / "pyenv")
        monkeypatch.setenv("PYENV_ROOT", str(pyenv))
    monkeypatch.setenv("PATH", f"{pyenv / 'shims'}:/usr/bin:/bin")
    sandbox = Sandbox(ws, bwrap=require_sandbox())
    reals = " ".join(str(home / rel) for rel in SECRETS)
    done = run(
        sandbox,
        f"python -V; echo PYENV_ROOT=$PYENV_ROOT; ls -A {home}; cat {reals} ~/.bash_history; "
        f"ls {home}/tools/pyenv/versions; touch {pyenv}/version 2>&1",
    )
    out = done.output
    assert "fake python -V" in out and f"PYENV_ROOT={pyenv}\n" in out, out
    reads_nothing_of(home, out)
    listed = out.split(f"PYENV_ROOT={pyenv}\n", 1)[1].split("\n")[0]
    assert listed == ".pyenv" if how != "link" else listed in (".pyenv", ".pyenv  tools"), out
    assert ("3.12.0" in out) == (how == "link"), out  # the link's target, at its own place
    assert "Read-only file system" in out, out


def test_cargo_comes_with_rustup_and_nvm_with_its_version_only(home, ws, monkeypatch):
    """cargo's programs are rustup's proxies: `~/.rustup` is shown with `~/.cargo`, and both
    variables set; an nvm PATH entry shows its node version, not the other versions."""
    script(home / ".cargo" / "bin" / "cargo", '#!/bin/sh\ncat "$RUSTUP_HOME/settings.toml"\n')
    (home / ".cargo" / "credentials.toml").write_text("token = CARGO-BAIT\n")
    (home / ".rustup").mkdir()
    (home / ".rustup" / "settings.toml").write_text('default_toolchain = "stable"\n')
    nvm = home / ".nvm" / "versions" / "node"
    script(nvm / "v20.0.0" / "bin" / "node", "#!/bin/sh\necho node-20\n")
    script(nvm / "v18.0.0" / "bin" / "node", "#!/bin/sh\necho node-18\n")
    monkeypatch.setenv("PATH", f"{home}/.cargo/bin:{nvm}/v20.0.0/bin:/usr/bin:/bin")
    tools = Sandbox._toolchains()
    assert tools.env["CARGO_HOME"] == str(home / ".cargo")
    assert tools.env["RUSTUP_HOME"] == str(home / ".rustup")
    out = run(
        Sandbox(ws, bwrap=require_sandbox()),
        f"cargo; node; ls {nvm}; cat {home}/.cargo/credentials.toml",
    ).output
    assert 'default_toolchain = "stable"' in out and "node-20" in out, out
    assert "v18" not in out and "CARGO-BAIT" not in out, out


def test_hostile_path_entries_widen_nothing(home, ws, tmp_path, monkeypatch):
    """PATH entries that would show too much are refused, as named and as resolved: the home
    itself, `/`, a credential store, `~/.config`, relative ones, links to `/`, to the home,
    into `~/.ssh` or into the workspace (whose `.env` is covered there only), a program on
    PATH that is a link into `~/.ssh`; a link in a refused entry brings nothing
    (`~/.ssh/helper -> /elsewhere/helper`); nothing of them is read through any name, and a
    variable naming a refused place (PYENV_ROOT=~/.ssh) or holding a secret is not passed.
    The toolchains beside them still work: a uv tool (a link in `~/.local/bin` to its
    virtualenv, whose Python is uv's) is shown, `~` on PATH or not."""
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        monkeypatch.setenv(var, str(tmp_path / "xdg" / var))  # Talos's own, not in ~/.config
    (home / "rootlink").symlink_to("/")
    (home / "homelink").symlink_to(home)
    (home / "keys").symlink_to(home / ".ssh")
    script(tmp_path / "elsewhere" / "helper", "#!/bin/sh\n")
    (tmp_path / "elsewhere" / "notes.txt").write_text("ELSEWHERE-BAIT\n")
    (home / ".ssh" / "helper").symlink_to(tmp_path / "elsewhere" / "helper")
    script(home / ".local" / "bin" / "tool", "#!/bin/sh\necho tool-ran\n")
    uv = home / ".local" / "share" / "uv"
    script(uv / "python" / "cpython-3.12" / "bin" / "python3", "#!/bin/sh\necho uv-python\n")
    venv = uv / "tools" / "ruffish"
    script(venv / "bin" / "ruffish", f"#!/bin/sh\nexec {venv}/bin/python\n")  # as uv writes
    (venv / "bin" / "python").symlink_to(uv / "python" / "cpython-3.12" / "bin" / "python3")
    (venv / "pyvenv.cfg").write_text(f"home = {uv}/python/cpython-3.12/bin\n")
    (home / ".local" / "bin" / "ruffish").symlink_to(venv / "bin" / "ruffish")
    (home / ".local" / "bin" / "key").symlink_to(home / ".ssh" / "id_rsa")
    script(ws / "bin" / "whoami", "#!/bin/sh\necho repository-program\n")
    (ws / "bin" / ".env").write_text("ENV-BAIT\n")
    (home / "wslink").symlink_to(ws / "bin")
    entries = [
        str(home),
        "/",
        f"{home}/.ssh",
        f"{home}/.aws",
        f"{home}/.config",
        f"{home}/rootlink",
        f"{home}/homelink",
        f"{home}/keys",
        f"{home}/wslink",
        f"{home}/rootlink/usr/../root",
        "bin",
        ".",
        "",
        f"{home}/.local/bin",
        "/usr/bin",
        "/bin",
    ]
    monkeypatch.setenv("PATH", os.pathsep.join(entries))
    monkeypatch.setenv("PYENV_ROOT", str(home / ".ssh"))
    monkeypatch.setenv("GOPATH", "ghp_PathBait0123456789")
    tools = Sandbox._toolchains(ws)
    shown = {p for pair in tools.places for p in pair}
    for bad in (home, Path("/"), home / ".ssh", home / ".config", home / "rootlink"):
        assert not any(bad == p or bad.is_relative_to(p) for p in shown), (bad, shown)
    assert {home, home / ".ssh", home / "rootlink", home / "keys"} <= set(tools.refused)
    assert "PYENV_ROOT" not in tools.env and "GOPATH" not in tools.env
    sandbox = Sandbox(ws, bwrap=require_sandbox())
    key = home / ".ssh" / "id_rsa"
    tries = [
        key,
        home / "rootlink" / str(key)[1:],
        home / "homelink" / ".ssh" / "id_rsa",
        home / "keys" / "id_rsa",
        home / ".local" / "bin" / "key",
        home / "homelink" / ".bash_history",
        home / ".config" / "app" / "token",
        home / "src" / "other" / "notes.txt",
        tmp_path / "elsewhere" / "notes.txt",
        home / "wslink" / ".env",
    ]
    done = run(
        sandbox,
        f"tool; ruffish; whoami; echo PATH=$PATH; env | grep -c Bait; ls -A {home}; "
        + "; ".join(f"cat {p}" for p in tries)
        + f"; ls {home}/rootlink/proc {home}/rootlink/work",
    )
    out = done.output
    assert "tool-ran\nuv-python\n" in out and "repository-program" not in out, out
    assert "PATH=" + os.pathsep.join(e for e in entries if e.startswith("/")) + "\n" in out
    reads_nothing_of(home, out)
    assert "\n0\n" in out and "ghp_" not in out and "ELSEWHERE-BAIT" not in out, out
    assert "ENV-BAIT" not in out and home / "wslink" in tools.refused, out
    listed = out.split("\n0\n", 1)[1].split("\n")[0]
    assert listed == ".local", out


def test_a_program_not_found_says_where_it_is_and_why(home, ws, monkeypatch):
    """Exit 127: the result names each program not found and why: on PATH in a directory the
    sandbox refuses (and the reason), installed in a toolchain's usual place under the home
    but not on the PATH Talos was started with, or nowhere Talos can tell."""
    script(home / ".nvm" / "versions" / "node" / "v20.0.0" / "bin" / "nodeish", "#!/bin/sh\n")
    script(home / ".aws" / "bin" / "awsish", "#!/bin/sh\n")
    monkeypatch.setenv("PATH", f"{home}/.pyenv/shims:{home}/.aws/bin:/usr/bin:/bin")
    sandbox = Sandbox(ws, bwrap=require_sandbox())
    done = run(sandbox, "python -V; nodeish; awsish; no-such-program-here")
    assert done.exit_code == 127
    hints = [line for line in done.output.splitlines() if line.startswith("[talos: ")]
    assert len(hints) == 3, done.output
    assert hints[0].startswith("[talos: nodeish is not on the PATH Talos was started with ("), hints
    assert "installed at ~/.nvm/versions/node/v20.0.0/bin/nodeish: start Talos" in hints[0]
    assert "with ~/.nvm/versions/node/v20.0.0/bin on PATH" in hints[0]
    assert hints[1].startswith(
        "[talos: awsish is not on the sandbox's PATH: it is installed at ~/.aws/bin/awsish, "
        "which the sandbox does not show (~/.aws is a credential store); put it, or a link"
    ), hints
    assert hints[2].startswith("[talos: no-such-program-here is not installed"), hints
    assert "fake python -V" in done.output  # found and run: no hint for it
