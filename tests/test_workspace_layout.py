"""The workspace as a sandboxed command sees it (`agent/workspace_layout.py`), run for real
under bubblewrap: secrets cannot be carried out of cover, what was covered stays covered, and
an approved command writes git's index and objects but nothing git runs or follows later."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from talos_ls.agent import secrets_scan, workspace_layout
from talos_ls.agent.sandbox import Sandbox
from talos_ls.agent.workspace import SandboxError

from .system import require_sandbox

SECRET = "TalosLayoutSecret-4471"
CONTROL = "TalosLayoutControl-visible"  # beside each secret: proof the readers read
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]


@pytest.fixture
def ws(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "ws"
    for rel in ("dir/sub", "deep/a/b", "node_modules/pkg", ".venv/lib", "vault", "config"):
        (root / rel).mkdir(parents=True)
    for rel in (
        "dir/.env",
        "dir/sub/.envrc",
        "deep/a/b/.env.production",
        ".env",
        "node_modules/pkg/.env",
        ".venv/lib/.env.local",
        "vault/prod.txt",
    ):
        (root / rel).write_text(f"KEY={SECRET}\n")
        (root / rel).with_name("notes.txt").write_text(f"{CONTROL}\n")
    os.symlink("../vault/prod.txt", root / "config" / ".env")  # a link: its target is hidden
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / ".gitignore").write_text(".env*\nvault/\nnode_modules/\n.venv/\n")
    subprocess.run([*GIT, "-C", str(root), "add", "-A"], check=True, capture_output=True)
    subprocess.run([*GIT, "-C", str(root), "commit", "-qm", "init"], check=True)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return root.resolve()


def run(sandbox: Sandbox, command: str, *, writable: bool = True, timeout: float = 30.0) -> str:
    result = asyncio.run(
        sandbox.run(command, sandboxed=True, writable=writable, network=False, timeout=timeout)
    )
    assert result.exit_code is not None, result.output
    return result.output


SECRET_FILES = (
    "dir/.env",
    "dir/sub/.envrc",
    "deep/a/b/.env.production",
    ".env",
    "node_modules/pkg/.env",
    ".venv/lib/.env.local",
    "vault/prod.txt",
)

# Each one command: a directory holding a secret moved, renamed, linked or copied, then read.
CARRIES = [
    "mkdir -p node_modules && mv dir node_modules/ && grep -rah . node_modules/dir",
    "mv dir other && grep -rah . other",
    "mv deep/a/b deep/a/c; mv deep/a .venv/; mv deep node_modules/x; grep -rah . node_modules",
    "cp -r dir x && grep -rah . x",
    "cp -al dir y; grep -rah . y",
    "ln dir/.env z; ln dir/sub/.envrc z2; cat z z2",
    "mkdir t && tar c dir deep | tar x -C t && grep -rah . t",
    "mv .env e2; mv dir/.env dir/e3; cat e2 dir/e3",
    "python3 -c \"import os; os.rename('dir', 'd4'); print(open('d4/.env').read())\"",
    "unshare -rm sh -c 'umount -l dir/.env; mv dir d5; cat d5/.env dir/.env'",
    "mv vault v2; rm config/.env; cat v2/prod.txt",
    "mv node_modules/pkg pkg; mv .venv/lib lib; grep -rah . pkg lib",
]


def test_no_secret_is_carried_out_of_cover_by_a_command_nor_found_by_the_next(ws):
    """Every way of carrying a directory that holds a secret elsewhere (into a directory the
    scan used to skip too) and reading it in the same command finds nothing; so does every
    command after, reading the whole workspace; and the secrets are where they were."""
    sandbox = Sandbox(ws, bwrap=require_sandbox())
    outputs = [run(sandbox, c) for c in CARRIES]
    outputs.append(run(sandbox, "grep -rah -e Talos . ; cat vault/prod.txt"))
    for command, out in zip([*CARRIES, "grep -r"], outputs, strict=True):
        assert SECRET not in out, (command, out)
    # pinned: the rename fails (GNU mv then copies what it can read: the covers, empty)
    assert "Device or resource busy" in outputs[1], outputs[1]
    assert CONTROL in outputs[2] and CONTROL in outputs[-1]  # the readers did read
    for rel in SECRET_FILES:
        assert (ws / rel).read_text() == f"KEY={SECRET}\n", rel
    sandbox.close()


def test_one_command_moving_renaming_linking_and_copying_finds_no_secret(ws):
    sandbox = Sandbox(ws, bwrap=require_sandbox())
    out = run(
        sandbox,
        "mkdir -p node_modules/n && mv dir node_modules/n/ ; mv deep dp ; "
        "cp -al dir hl ; ln deep/a/b/.env.production hl2 ; cp -r dir node_modules/c ; "
        "tar c dir deep | (mkdir tt && tar x -C tt) ; mv dir/sub s2 ; "
        "grep -rah -e Talos . ; cat hl2 node_modules/n/dir/.env "
        "dp/a/b/.env.production",
    )
    assert SECRET not in out and CONTROL in out, out
    sandbox.close()


def test_a_secret_stays_covered_when_its_link_goes_or_the_tree_outgrows_the_scan(
    ws, monkeypatch, caplog
):
    """What was covered once stays covered while it is there: a `.env` link deleted leaves
    its target hidden, and a command flooding the tree past the scan's limit (breadth first:
    the deep secrets are the ones left out) uncovers nothing covered before."""
    dirs = sum(1 for _ in os.walk(ws))
    monkeypatch.setattr(secrets_scan, "MAX_SCANNED_DIRS", dirs + 5)  # the tree fits, at first
    sandbox = Sandbox(ws, bwrap=require_sandbox())
    sandbox._secrets._watching = False  # scanned: the limit applies
    assert SECRET not in run(sandbox, "cat vault/prod.txt deep/a/b/.env.production")
    run(sandbox, "rm config/.env; mkdir flood && cd flood && mkdir $(seq 1 60)")
    with caplog.at_level("WARNING", logger="talos_ls.agent.secrets_scan"):
        sandbox._secrets.files()
    assert "directories to scan" in caplog.text  # the scan stops short of them now
    out = run(sandbox, "cat vault/prod.txt deep/a/b/.env.production dir/sub/.envrc; echo done")
    assert SECRET not in out and out.rstrip().endswith("done"), out
    sandbox.close()


def test_what_was_covered_is_remembered_by_the_next_process(ws):
    """Each `talos run` is a process of its own: the paths covered are kept in Talos's state,
    so a link deleted in one run leaves its target hidden in the next."""
    first = Sandbox(ws, bwrap=require_sandbox())
    assert SECRET not in run(first, "cat vault/prod.txt; rm config/.env")
    first.close()
    second = Sandbox(ws, bwrap=first.bwrap)
    out = run(second, "cat vault/prod.txt; echo done")
    assert SECRET not in out and out.rstrip().endswith("done"), out
    second.close()


def test_read_only_commands_need_no_pins(ws):
    """A read-only workspace cannot be renamed in at all: no mount is spent on pins there
    (bwrap's cost grows with every mount), and every directory holding a secret is pinned for
    a writable command."""
    sandbox = Sandbox(ws, bwrap=require_sandbox())
    ro = sandbox.argv("true", writable=False, network=False)
    rw = sandbox.argv("true", writable=True, network=False)
    binds = lambda argv: {argv[i + 1] for i, a in enumerate(argv) if a == "--bind"}  # noqa: E731
    holding = (
        "dir",
        "dir/sub",
        "deep",
        "deep/a",
        "deep/a/b",
        "vault",
        "node_modules",
        "node_modules/pkg",
        ".venv",
        ".venv/lib",
    )
    pinned = {str(ws / d) for d in holding}
    assert pinned <= binds(rw), pinned - binds(rw)
    assert not binds(ro) & pinned
    sandbox.close()


def test_a_command_needing_too_many_mounts_is_refused_with_the_reason(ws, monkeypatch):
    monkeypatch.setattr(workspace_layout, "MAX_MOUNTS", 5)
    sandbox = Sandbox(ws, bwrap=require_sandbox())
    with pytest.raises(SandboxError, match=r"secrets files \(\.env\*\) to hide.*more than 5"):
        run(sandbox, "touch ran")
    assert not (ws / "ran").exists()
    assert not (ws / ".talos").exists()  # the stand-in made for it was taken back
    sandbox.close()


def test_a_stand_in_outlives_the_first_of_two_commands_holding_it(ws):
    """`.talos` is missing: each writable command gets a read-only stand-in. The first to end
    must not remove it from under the second (removing a mount point from outside detaches
    it inside, and the second command could then create `.talos` with rules of its own)."""
    sandbox = Sandbox(ws, bwrap=require_sandbox())

    async def both() -> list:
        first = sandbox.run("sleep 0.3", sandboxed=True, writable=True, network=False, timeout=30)
        second = sandbox.run(
            "sleep 1.5; mkdir -p .talos/skills && echo planted > .talos/rules.md; "
            "echo x > .git/hooks/post-checkout; echo /elsewhere > .git/commondir; ls -A .talos",
            sandboxed=True,
            writable=True,
            network=False,
            timeout=30,
        )
        return await asyncio.gather(first, second)

    _, second = asyncio.run(both())
    assert "Read-only file system" in second.output, second.output
    assert not (ws / ".talos").exists() and not (ws / ".git" / "commondir").exists()
    assert not (ws / ".git" / "hooks" / "post-checkout").exists()
    sandbox.close()


# ================================================================== git
def git(ws: Path, *args: str) -> str:
    done = subprocess.run([*GIT, "-C", str(ws), *args], capture_output=True, text=True, timeout=30)
    return done.stdout + done.stderr


def test_an_approved_command_commits_stashes_and_branches(ws, tmp_path):
    """With the person's identity from their own git config (the sandbox's HOME is empty)."""
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / ".gitconfig").write_text(
        "[user]\n\tname = Pat Person\n\temail = pat@example.com\n"
    )
    sandbox = Sandbox(ws, bwrap=require_sandbox())
    (ws / "app.py").write_text("x = 1\n")
    out = run(
        sandbox,
        "git add app.py && git commit -qm 'add app' && echo 'x = 2' > app.py && "
        "git stash && git checkout -qb feature && git commit -q --amend -m "
        "'add app, amended' && git stash list && echo ok",
    )
    assert out.rstrip().endswith("ok"), out
    assert git(ws, "log", "--format=%s", "feature").splitlines() == ["add app, amended", "init"]
    assert (
        git(ws, "log", "-1", "--format=%an <%ae>|%cn").strip()
        == "Pat Person <pat@example.com>|Pat Person"
    )
    assert "WIP on master" in git(ws, "stash", "list") or "WIP on main" in git(ws, "stash", "list")
    assert git(ws, "rev-parse", "--abbrev-ref", "HEAD").strip() == "feature"
    assert git(ws, "fsck", "--no-progress").strip() == ""
    sandbox.close()


def test_a_read_only_command_writes_nothing_in_git(ws):
    sandbox = Sandbox(ws, bwrap=require_sandbox())
    (ws / "app.py").write_text("x = 1\n")
    before = git(ws, "rev-parse", "HEAD")
    out = run(
        sandbox,
        f"{' '.join(GIT)} add app.py; {' '.join(GIT)} commit -qm x; "
        "touch .git/objects/x .git/refs/heads/y",
        writable=False,
    )
    assert "Read-only file system" in out
    assert git(ws, "rev-parse", "HEAD") == before and "?? app.py" in git(ws, "status", "-s")
    assert not (ws / ".git" / "objects" / "x").exists()
    sandbox.close()


PLANTS = [
    "printf '#!/bin/sh\\ntouch PWNED_hook\\n' > .git/hooks/post-commit; "
    "chmod +x .git/hooks/post-commit",
    "git config core.fsmonitor 'touch PWNED_config'",
    "echo '[core] fsmonitor = touch PWNED_config' >> .git/config",
    "git config extensions.worktreeConfig true; printf '[core]\\n\\tfsmonitor = touch "
    "PWNED_wt\\n' > .git/config.worktree",
    "mkdir -p .cache/g && cp -a .git/. .cache/g/ && git config --file .cache/g/config "
    "core.fsmonitor 'touch PWNED_commondir'; echo \"$PWD/.cache/g\" > .git/commondir",
    'echo "$PWD/other.git/objects" > .git/objects/info/alternates',
    "echo '* filter=x' > .git/info/attributes; echo planted >> .git/info/exclude",
    "mv .git/hooks .git/h2; mkdir .git/hooks; mv .git/info .git/i2",
    "mv .git/objects/info .git/objects/i2; mkdir .git/objects/info; "
    "echo /x > .git/objects/info/alternates",
    "rm -f .git/COMMIT_EDITMSG; ln -s ../../victim .git/COMMIT_EDITMSG",
    "rm -f .git/logs/HEAD; ln -s ../../../victim .git/logs/HEAD",
    "mv .git/objects/ab .git/ab 2>/dev/null; ln -s ../../../victimdir .git/objects/ab",
    "mkfifo .git/ORIG_HEAD.fifo; rm -f .git/FETCH_HEAD; mkfifo .git/FETCH_HEAD",
    "mkdir -p .git/rebase-merge && echo 'exec touch PWNED_rebase' > "
    ".git/rebase-merge/git-rebase-todo && echo x > .git/rebase-merge/interactive",
]


def test_nothing_git_runs_or_follows_later_can_be_planted(ws, tmp_path):
    """An approved command tries every file under `.git` that makes git run a program, read
    another repository or write outside later: each is read-only, or removed when the
    command ends (and the result says so). The person's git runs nothing of it afterwards,
    and writes nowhere outside."""
    victim = tmp_path / "victim"
    victim.write_text("the person's file\n")
    (tmp_path / "victimdir").mkdir()
    sandbox = Sandbox(ws, bwrap=require_sandbox())
    config = (ws / ".git" / "config").read_bytes()
    hooks = sorted(p.name for p in (ws / ".git" / "hooks").iterdir())
    outputs = [run(sandbox, c) for c in PLANTS]
    assert (ws / ".git" / "config").read_bytes() == config
    assert sorted(p.name for p in (ws / ".git" / "hooks").iterdir()) == hooks
    for rel in (
        "config.worktree",
        "commondir",
        "objects/info/alternates",
        "info/attributes",
        "rebase-merge",
        "h2",
        "i2",
        "FETCH_HEAD",
        "ORIG_HEAD.fifo",
    ):
        assert not os.path.lexists(ws / ".git" / rel), rel
    assert "[talos: removed .git/COMMIT_EDITMSG" in outputs[9], outputs[9]
    assert "[talos: removed rebase-merge/ from .git" in outputs[-1], outputs[-1]
    assert "planted" not in (ws / ".git" / "info" / "exclude").read_text()
    (ws / "app.py").write_text("x = 1\n")
    after = git(ws, "add", "app.py") + git(ws, "commit", "-qm", "by the person")
    after += git(ws, "checkout", "-qb", "x;echo${IFS}PWNED") + git(ws, "status")
    assert "by the person" in git(ws, "log", "-1", "--format=%s"), after
    assert not list(ws.glob("PWNED*")), after
    assert victim.read_text() == "the person's file\n"
    assert not list((tmp_path / "victimdir").iterdir())
    sandbox.close()


def test_the_hooks_directory_the_configuration_names_is_read_only(ws):
    """`core.hooksPath` (husky, a tracked `.githooks`) and files `.git/config` includes, in
    the workspace: git runs and reads them later as it does `.git/hooks`; a missing one has a
    stand-in while the command runs."""
    git(ws, "config", "core.hooksPath", ".githooks")
    git(ws, "config", "include.path", "../conf/shared.gitconfig")
    sandbox = Sandbox(ws, bwrap=require_sandbox())
    out = run(
        sandbox,
        "mkdir -p .githooks conf; printf '#!/bin/sh\\ntouch PWNED_hp\\n' > "
        ".githooks/pre-commit; chmod +x .githooks/pre-commit; mv .githooks g; "
        "echo '[core] fsmonitor = touch PWNED_inc' > conf/shared.gitconfig; "
        "echo ok",
    )
    assert "Read-only file system" in out and out.rstrip().endswith("ok"), out
    assert not any((ws / p).exists() for p in (".githooks", "conf", "g"))
    (ws / "app.py").write_text("x = 1\n")
    git(ws, "add", "app.py")
    git(ws, "commit", "-qm", "x")
    git(ws, "status")
    assert not list(ws.glob("PWNED*"))
    sandbox.close()


def test_a_git_directory_with_a_link_where_a_protected_path_lies_stays_read_only(ws, tmp_path):
    """`.git/hooks` a link (hooks kept elsewhere): a link cannot be a mount point, so a
    command could point it at hooks of its own; the whole `.git` stays read-only instead."""
    shared = tmp_path / "shared-hooks"
    (ws / ".git" / "hooks").rename(shared)
    os.symlink(shared, ws / ".git" / "hooks")
    sandbox = Sandbox(ws, bwrap=require_sandbox())
    out = run(
        sandbox,
        "rm .git/hooks; mkdir .git/hooks; touch .git/hooks/post-commit; "
        f"{' '.join(GIT)} commit -q --allow-empty -m x; echo done",
    )
    assert "Read-only file system" in out and out.rstrip().endswith("done"), out
    assert (ws / ".git" / "hooks").is_symlink()
    assert git(ws, "log", "--format=%s").splitlines() == ["init"]
    sandbox.close()


def test_a_tracked_secrets_file_reads_as_committed_and_git_sees_it_unchanged(ws):
    """A committed `.env.example`, edited locally with a real value: the command reads what
    is committed (history holds it anyway), never the local edit; git sees the file
    unchanged, so an approved `git commit -a` neither empties it nor commits the edit."""
    example = ws / "sub" / ".env.example"
    example.parent.mkdir()
    example.write_text("API_KEY=put-yours-here\n")
    git(ws, "add", "-f", "sub/.env.example")
    git(ws, "commit", "-qm", "example")
    example.write_text(f"API_KEY={SECRET}\n")  # the person's local edit
    (ws / "app.py").write_text("x = 1\n")
    sandbox = Sandbox(ws, bwrap=require_sandbox())
    out = run(
        sandbox,
        f"cat sub/.env.example; {' '.join(GIT)} status --short; "
        f"{' '.join(GIT)} add -A && {' '.join(GIT)} commit -qam work && "
        f"{' '.join(GIT)} show --stat HEAD",
    )
    assert SECRET not in out and "put-yours-here" in out, out
    assert " M sub/.env.example" not in out and "app.py" in out, out
    assert git(ws, "show", "HEAD:sub/.env.example") == "API_KEY=put-yours-here\n"
    assert git(ws, "status", "--short").strip() == "M sub/.env.example"  # the edit, kept
    assert example.read_text() == f"API_KEY={SECRET}\n"
    sandbox.close()


def test_a_repository_a_command_makes_is_moved_aside_and_nested_ones_are_read_only(ws):
    """git runs a nested repository's config later: the person's `git status` for one the
    index records as a submodule (a writable index lets a command add it), an editor for one
    it opens. A repository a command makes is moved aside when it ends (and the result says
    so); one that was there, and an empty submodule directory, are read-only."""
    (ws.parent / "home").mkdir(exist_ok=True)
    (ws.parent / "home" / ".gitconfig").write_text("[user]\n\tname = P\n\temail = p@p\n")
    git(ws, "init", "-q", "vendored")  # the person's own nested repository
    (ws / ".gitmodules").write_text('[submodule "lib"]\n\tpath = lib\n\turl = ../lib.git\n')
    (ws / "lib").mkdir()  # an unpopulated submodule: no .git yet
    config = (ws / "vendored" / ".git" / "config").read_bytes()
    sandbox = Sandbox(ws, bwrap=require_sandbox())
    out = run(
        sandbox,
        "git init -q sub && git -C sub config core.fsmonitor 'touch PWNED_sub' "
        "&& git -C sub commit -q --allow-empty -m x && git add sub; "
        "git -C vendored config core.fsmonitor 'touch PWNED_vendored'; "
        "git init -q lib; echo done",
    )
    assert out.rstrip().endswith("]") and "done" in out, out
    assert "[talos: moved" in out and "sub/.git aside" in out, out
    assert not (ws / "sub" / ".git").exists() and list((ws / "sub").glob(".git.moved-by-talos-*"))
    assert (ws / "vendored" / ".git" / "config").read_bytes() == config
    assert not (ws / "lib" / ".git").exists()
    for marker in ws.rglob("PWNED*"):  # made in the sandbox, by the command's own git
        marker.unlink()
    git(ws, "status")  # the person's, outside
    assert not list(ws.rglob("PWNED*")), git(ws, "status")  # fsmonitor runs in sub/
    sandbox.close()


def test_config_worktree_cannot_be_written_while_worktree_config_is_on(ws):
    """With `extensions.worktreeConfig` on (the person's `git sparse-checkout` turns it on),
    git reads `.git/config.worktree` as configuration: one a command writes would run for
    the person's git while the command still runs. It cannot be written (a stand-in)."""
    git(ws, "config", "extensions.worktreeConfig", "true")
    sandbox = Sandbox(ws, bwrap=require_sandbox())

    async def meanwhile() -> tuple[str, str]:
        command = asyncio.ensure_future(
            sandbox.run(
                "printf '[core]\\n\\tfsmonitor = touch PWNED_wt\\n' > .git/config.worktree; "
                "touch written; sleep 3",
                sandboxed=True,
                writable=True,
                network=False,
                timeout=30,
            )
        )
        for _ in range(200):  # the command has written (or failed to) by then
            if (ws / "written").exists():
                break
            await asyncio.sleep(0.05)
        person = await asyncio.to_thread(git, ws, "status")  # the person's git, outside
        return (await command).output, person

    out, person = asyncio.run(meanwhile())
    assert not list(ws.glob("PWNED*")), person
    assert "Read-only file system" in out, out
    assert not (ws / ".git" / "config.worktree").exists()
    sandbox.close()


def test_folders_open_inside_the_workspace_keep_their_talos_and_git(ws):
    """A daemon serving a folder and folders inside it: the inner ones' `.talos` (rules,
    skills, permissions, which bind their own tasks) and `.git` are read-only for the outer
    folder's commands; a missing `.talos` cannot be made."""
    inner, other = ws / "inner", ws / "other"
    (inner / ".talos").mkdir(parents=True)
    (inner / ".talos" / "permissions.json").write_text('{"commands": {"deny": ["curl"]}}\n')
    git(inner, "init", "-q")
    other.mkdir()
    sandbox = Sandbox(ws, bwrap=require_sandbox())
    sandbox.inner = lambda: [inner, other]
    out = run(
        sandbox,
        "echo '{}' > inner/.talos/permissions.json; mkdir -p other/.talos/skills; "
        "echo '[core] fsmonitor = touch PWNED' >> inner/.git/config; "
        "mv inner/.talos inner/t2; echo ok > inner/fine.txt; echo done",
    )
    assert out.count("Read-only file system") >= 3 and "done" in out, out
    assert (inner / ".talos" / "permissions.json").read_text() == (
        '{"commands": {"deny": ["curl"]}}\n'
    )
    assert not (other / ".talos").exists() and not (inner / "t2").exists()
    assert "fsmonitor" not in (inner / ".git" / "config").read_text()
    assert (inner / "fine.txt").read_text() == "ok\n"  # the rest of the folder is the outer's
    sandbox.close()


def test_two_processes_covering_one_workspace_keep_each_others_paths(ws, tmp_path):
    """`talos run` and a language server on one workspace, each with its own memory of what
    it covered: what each adds reaches the file, whoever writes last (two in this process,
    one reading before the other wrote; then three processes racing on the file, each adding
    its own paths)."""
    from talos_ls.agent.sandbox import covers_file

    file = covers_file(ws)
    first, second = workspace_layout.Covers(file), workspace_layout.Covers(file)
    (ws / "a.txt").write_text("x")
    (ws / "b.txt").write_text("y")
    first.update([ws / "a.txt"])
    second.update([ws / "b.txt"])  # it read the file before the first wrote
    assert set(workspace_layout.Covers(file).update([])) >= {ws / "a.txt", ws / "b.txt"}
    script = (
        "import sys; from pathlib import Path; from talos_ls.agent import workspace_layout as w\n"
        "c = w.Covers(Path(sys.argv[1]))\n"
        "for i in range(100):\n"
        "    p = Path(sys.argv[2]) / f'{sys.argv[3]}{i}'; p.write_text('s'); c.update([p])\n"
    )
    racers = [
        subprocess.Popen([sys.executable, "-c", script, str(file), str(ws), name])
        for name in ("left", "right", "third")
    ]
    assert [p.wait(timeout=120) for p in racers] == [0, 0, 0]
    kept = {p.name for p in workspace_layout.Covers(file).update([])}
    expected = {f"{side}{i}" for side in ("left", "right", "third") for i in range(100)}
    assert expected <= kept, sorted(expected - kept)[:10]
