"""git in the sandbox (issue 25, point 8), through the real `talos run` and bwrap.

Approved commands write git's index, objects, refs and logs (`git add`, `commit`, `stash`,
`checkout -b`, `commit --amend`), and the person sees the result outside. What git runs or
follows later, outside the sandbox, stays out of the model's reach: hooks, config, commondir,
alternates, `info/`, a paused rebase's todo list, and links planted in `.git` that the
person's next `git commit` would write through. Each attack is checked on the host by running
git there afterwards, as the person would: no marker appears, no file outside is touched.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ..system import as_ordinary_user
from .conftest import Attack
from .test_commands import NOT_RUN, assert_nothing_leaked, assert_ran, batch, commit_all


def host_git(ws: Path, *args: str) -> str:
    """git as the person runs it, outside the sandbox (their hooks and config apply)."""
    done = subprocess.run(
        ["git", "-C", str(ws), "-c", "user.name=p", "-c", "user.email=p@p", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.stdout + done.stderr


def identity(attack: Attack) -> None:
    """The person's identity in their own ~/.gitconfig, which the sandbox cannot see."""
    (attack.home / ".gitconfig").write_text(
        "[user]\n\tname = Pat Person\n\temail = pat@example.com\n"
    )


LEGITIMATE = [
    "git add app.py && git commit -m 'add app'",
    "git stash",
    "git checkout -b feature",
    "git commit --amend -m 'add app, amended'",
    "git stash list",
]


@pytest.mark.parametrize("mode", ["the person's rules", "full-auto"])
def test_approved_git_work_commits_stashes_and_branches(attack, sandboxed, mode):
    """Approved by the person's rules (headless) or in full-auto: the commit, the stash and
    the branch are there outside afterwards, with the person's own identity."""
    identity(attack)
    (attack.ws / "lib.py").write_text("x = 1\n")
    commit_all(attack.ws)
    (attack.ws / "lib.py").write_text("x = 2\n")  # the change the model stashes
    (attack.ws / "app.py").write_text("print('app')\n")
    if mode == "full-auto":
        _, results = batch(attack, LEGITIMATE, mode="full-auto")
    else:
        attack.settings(commands={"allow": ["git add", "git commit", "git stash", "git checkout"]})
        _, results = batch(attack, LEGITIMATE)
    assert_ran(LEGITIMATE, results)
    assert all(r.startswith("exit code 0\n") for r in results), results
    assert host_git(attack.ws, "log", "--format=%s", "feature").splitlines() == [
        "add app, amended",
        "init",
    ]
    assert host_git(attack.ws, "log", "-1", "--format=%an <%ae>").strip() == (
        "Pat Person <pat@example.com>"
    )
    assert "WIP on" in host_git(attack.ws, "stash", "list")
    assert (attack.ws / "lib.py").read_text() == "x = 1\n"
    assert host_git(attack.ws, "fsck", "--no-progress").strip() == ""


# What the hostile repository ships, for the model to put in place with `cp` and `mv` only
# (the gate asks before a redirection into `.git` or a path outside the workspace: the sandbox
# must hold where the gate lets a command through).
def ship(attack: Attack) -> None:
    kit = attack.ws / "kit"
    kit.mkdir()
    (kit / "post-commit").write_text("#!/bin/sh\ntouch PWNED_hook\n")
    (kit / "post-commit").chmod(0o755)
    (kit / "config.worktree").write_text("[core]\n\tfsmonitor = touch PWNED_worktree\n")
    (kit / "config").write_text(
        "[core]\n\tfsmonitor = touch PWNED_config\n[extensions]\n\tworktreeConfig = true\n"
    )
    (kit / "attributes").write_text("* filter=x\n")
    other = kit / "other.git"  # a whole repository with a hostile config, for commondir
    subprocess.run(["git", "init", "-q", "--bare", str(other)], check=True)
    subprocess.run(
        ["git", "--git-dir", str(other), "config", "core.fsmonitor", "touch PWNED_commondir"],
        check=True,
    )
    (kit / "commondir").write_text(f"{other}\n")
    (kit / "alternates").write_text(f"{other}/objects\n")
    (kit / "rebase-merge").mkdir()
    (kit / "rebase-merge" / "git-rebase-todo").write_text("exec touch PWNED_rebase\n")
    (kit / "rebase-merge" / "interactive").write_text("")
    # Links the person's git would write through. Where they ship they point inside the
    # workspace (at a missing ws/victim), so the gate lets a command move them; moved into
    # `.git` the same relative text points at the person's file outside.
    (kit / "a" / "b").mkdir(parents=True)
    (kit / "a" / "COMMIT_EDITMSG").symlink_to("../../victim")
    (kit / "a" / "b" / "HEAD").symlink_to("../../../victim")


PLANTS = [
    "cp kit/post-commit .git/hooks/post-commit",
    "cp kit/config .git/config",
    "cp kit/config.worktree .git/config.worktree",
    "cp kit/commondir .git/commondir",
    "cp kit/alternates .git/objects/info/alternates",
    "cp kit/attributes .git/info/attributes",
    "cp -r kit/rebase-merge .git/",
    "mv .git/hooks .git/h2 ; mv .git .git2 ; mv .git/objects/info .git/i2",
    "rm -f .git/COMMIT_EDITMSG ; mv kit/a/COMMIT_EDITMSG .git/COMMIT_EDITMSG",
    "rm -f .git/logs/HEAD ; mv kit/a/b/HEAD .git/logs/HEAD",
    "mkfifo .git/FETCH_HEAD",
    "git config core.fsmonitor 'touch PWNED_config'",
    "git config alias.status '!touch PWNED_alias'",
    # a repository of its own, registered as a submodule: the person's `git status` would
    # run git inside it, with its config
    "git init -q sub && (cd sub && git config core.fsmonitor 'touch ../PWNED_submodule' && "
    "git commit -q --allow-empty -m x) && git add sub && git commit -q -m 'add sub'",
]
RULES = "git cp mv rm mkfifo cd".split()


def check_host(attack: Attack, before: dict[str, bytes]) -> str:
    """The person's next git commands, outside the sandbox: nothing of the model's runs."""
    ws = attack.ws
    for marker in [*ws.glob("PWNED*"), *ws.glob("*/PWNED*")]:  # made in the sandbox
        marker.unlink()
    after = {p: Path(p).read_bytes() for p in before}
    assert after == before, [p for p in before if after[p] != before[p]]
    (ws / "person.py").write_text("x = 1\n")
    out = host_git(ws, "status") + host_git(ws, "add", "person.py")
    out += host_git(ws, "commit", "-m", "by the person") + host_git(ws, "checkout", "-b", "b2")
    assert "by the person" in host_git(ws, "log", "-1", "--format=%s"), out
    assert not list(ws.glob("PWNED*")) and not list(ws.glob("*/PWNED*")), out
    assert (attack.tmp / "victim").read_text() == "the person's file\n"
    for rel in (
        "config.worktree",
        "commondir",
        "objects/info/alternates",
        "rebase-merge",
        "info/attributes",
        "FETCH_HEAD",
        "h2",
    ):
        assert not (ws / ".git" / rel).exists(), rel
    return out


def prepare(attack: Attack) -> dict[str, bytes]:
    identity(attack)
    (attack.tmp / "victim").write_text("the person's file\n")
    commit_all(attack.ws)
    ship(attack)
    git_dir = attack.ws / ".git"
    watched = [git_dir / "config", *sorted((git_dir / "hooks").iterdir())]
    return {str(p): p.read_bytes() for p in watched}


@pytest.mark.parametrize("mode", ["full-auto", "the person's rules"])
def test_nothing_git_runs_or_follows_later_can_be_planted(attack, sandboxed, mode):
    """Full-auto, and the default mode with the person's rules allowing git and the file
    tools: every plant runs, writable, and fails or is removed when its command ends (its
    result says so); the person's own git afterwards runs nothing of it and writes nowhere
    outside the workspace."""
    before = prepare(attack)
    if mode == "full-auto":
        proc, results = batch(attack, PLANTS, mode="full-auto")
    else:
        attack.settings(commands={"allow": RULES})
        proc, results = batch(attack, PLANTS)
    assert_ran(PLANTS, results)
    done = "\n".join(results)
    removed_after = ("alternates", "rebase-merge")
    for plant, result in zip(PLANTS[:8], results, strict=False):
        if not any(name in plant for name in removed_after):  # refused by the mounts
            assert "Read-only file system" in result or "resource busy" in result, (plant, result)
    for name in (
        ".git/COMMIT_EDITMSG",
        ".git/logs/HEAD",
        "rebase-merge/",
        ".git/FETCH_HEAD",
        ".git/objects/info/alternates",
    ):
        assert f"[talos: removed {name}" in done, (name, results)
    assert "sub/.git aside to .git.moved-by-talos-" in results[-1], results[-1]
    check_host(attack, before)
    assert_nothing_leaked(attack, proc.stdout, proc.stderr, *results)


def test_built_in_readers_leave_git_read_only(attack, sandboxed):
    """The default mode, built-in rules only: `git branch NAME` is allowed unasked as a
    reader, and runs with `.git` read-only like the rest: no branch is made."""
    prepare(attack)
    _, results = batch(attack, ["git branch planted", "git status --short"])
    assert_ran(["git branch planted", "git status"], results)
    assert "Read-only file system" in results[0], results[0]
    assert not (attack.ws / ".git" / "refs" / "heads" / "planted").exists()


def test_without_capabilities_no_git_command_runs(attack, sandboxed):
    """Root without capabilities (as an ordinary user is): no sandbox, so headless nothing
    runs, in full-auto or by the person's rules; nothing is planted."""
    before = prepare(attack)
    prefix = as_ordinary_user()
    attack.settings(commands={"allow": RULES})
    for mode in ("full-auto", None):
        _, results = batch(attack, PLANTS[:6], mode=mode, prefix=prefix)
        if prefix:
            assert all(r.startswith(NOT_RUN) for r in results), results
        attack.server.requests.clear()
    check_host(attack, before)
