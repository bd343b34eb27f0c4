"""The workspace of a command is found like git's repository, and a fact told from a
subdirectory is the fact `talos run --workspace <root>` reads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from talos_ls.demo.scripted_model import reply
from talos_ls.project import agent_id, find_root

TALOS = str(Path(sys.executable).with_name("talos"))


@pytest.mark.parametrize(
    "marker", [".git", ".talos", "pyproject.toml", "package.json", "Cargo.toml", "go.mod"]
)
def test_nearest_marked_ancestor(tmp_path, marker):
    root = tmp_path / "proj"
    deep = root / "src" / "pkg" / "tests"
    deep.mkdir(parents=True)
    (root / marker).mkdir() if marker.startswith(".") else (root / marker).write_text("")
    assert find_root(deep) == root.resolve()
    assert find_root(root) == root.resolve()
    inner = root / "src" / "pkg"
    (inner / "package.json").write_text("{}")  # a nested project: the nearest one wins
    assert find_root(deep) == inner.resolve()


def test_no_marker_is_the_directory_itself(tmp_path):
    bare = tmp_path / "a" / "b"
    bare.mkdir(parents=True)
    assert find_root(bare) == bare.resolve()


def test_the_home_directory_is_not_every_project(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / ".git").mkdir(parents=True)  # a dotfiles repository
    scratch = home / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("HOME", str(home))
    assert find_root(scratch) == scratch.resolve()
    assert find_root(home) == home.resolve()


def test_agent_is_the_resolved_root(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert agent_id(tmp_path / "link") == str((tmp_path / "real").resolve())


def test_memory_added_from_a_subdirectory_reaches_run(tmp_path, server):
    ws = tmp_path / "ws"
    (ws / "tests").mkdir(parents=True)
    (ws / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TALOS_", "OPENAI_"))}
    env.update(
        TALOS_STORE_URL="sqlite:///" + str(tmp_path / "t.db"), XDG_CONFIG_HOME=str(tmp_path / "cfg")
    )
    added = subprocess.run(
        [TALOS, "memory", "add", "deploys need approval from Dana"],
        cwd=ws / "tests",
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert added.returncode == 0, added.stderr
    assert f"for agent {ws.resolve()}:" in added.stdout
    assert (
        added.stderr.strip() == f"workspace: {ws.resolve()} (the nearest project root; "
        "--workspace to choose another)"
    )
    listed = subprocess.run(
        [TALOS, "memory", "--json"],
        cwd=ws / "tests",
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert listed.stderr == ""  # with --json nothing but the JSON
    assert "approval from Dana" in listed.stdout
    server.script.append(reply("Noted."))
    ran = subprocess.run(
        [
            TALOS,
            "run",
            "who approves deploys?",
            "--workspace",
            str(ws),
            "--base-url",
            server.url,
            "--model",
            "fake-model",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert ran.returncode == 0, ran.stderr
    system = server.requests[0]["body"]["messages"][0]["content"]
    assert "deploys need approval from Dana" in system
