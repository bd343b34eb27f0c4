"""Repositories a command makes or plants, through the real `talos run` and bwrap: none is left
for the person's git to run later (review A2, A3).

- A repository made below the root is moved aside when the command ends. The command guesses
  the name it will be moved to (the clock's next seconds, made non-empty beforehand) and makes
  its parent read-only: it is moved aside all the same (to a name it cannot guess), or
  removed; never left with a note.
- `.git/modules/<name>` planted with a hook, with `.gitmodules` and a gitlink naming it: the
  person's `git submodule update --init` would reuse that git directory and run its hook.
  `.git/modules` and `.git/worktrees` are read-only (a stand-in while missing).

The payloads are scripts the hostile repository ships, run with `bash`, which the person's
rules allow (so the commands run writable, unasked). Then the person's own git runs in the
workspace, as the same user: nothing of the model's runs. As the current user and, when the
tests run as root, as an ordinary one (uid 65534, for whom `chmod a-w` stops a rename).
"""

from __future__ import annotations

import subprocess

import pytest

from .conftest import USERS, attack_as
from .test_commands import assert_nothing_leaked, assert_ran, batch, commit_all

ASIDE = """\
git init -q sub
git -C sub config core.fsmonitor 'touch ../PWNED_aside'
git -C sub commit -q --allow-empty -m x
git add sub && git commit -q -m 'add sub'
for i in $(seq 0 30); do
  mkdir -p "sub/.git.moved-by-talos-$(date -d "+$i sec" +%Y%m%d-%H%M%S)/x"
done
chmod a-w sub
echo planted
"""
MODULES = """\
git init -q --bare .git/modules/sub2 && git --git-dir=.git/modules/sub2 config core.bare false
git init -q tmpsub && git -C tmpsub commit -q --allow-empty -m x
git -C tmpsub push -q ../.git/modules/sub2 HEAD:refs/heads/main
printf '#!/bin/sh\\ntouch ../PWNED_module\\n' > .git/modules/sub2/hooks/post-checkout
chmod +x .git/modules/sub2/hooks/post-checkout
git config -f .gitmodules submodule.sub2.path sub2
git config -f .gitmodules submodule.sub2.url ./nowhere
git update-index --add --cacheinfo "160000,$(git -C tmpsub rev-parse HEAD),sub2"
rm -rf tmpsub
git add .gitmodules && git commit -q -m 'add sub2'
mkdir -p .git/worktrees/wt && echo planted > .git/worktrees/wt/gitdir
echo done
"""
COMMANDS = ["bash kit/aside.sh", "bash kit/modules.sh"]


@pytest.mark.parametrize("user", USERS)
def test_no_repository_a_command_makes_or_plants_runs_for_the_person(
    tmp_path, server, sandboxed, user
):
    with attack_as(user, tmp_path, server) as attack:
        prefix = attack.prefix
        ws = attack.ws
        (attack.home / ".gitconfig").write_text("[user]\n\tname = P\n\temail = p@p\n")
        (ws / "kit").mkdir()
        (ws / "kit" / "aside.sh").write_text(ASIDE)
        (ws / "kit" / "modules.sh").write_text(MODULES)
        commit_all(ws)
        attack.settings(commands={"allow": ["bash"]})
        attack.hand_over()
        proc, results = batch(attack, COMMANDS)
        assert_ran(COMMANDS, results)
        planted = [ws / ".git" / "modules", ws / ".git" / "worktrees", ws / "sub" / ".git"]
        assert not any(p.exists() for p in planted), planted  # before the person's git
        for marker in ws.rglob("PWNED*"):  # made in the sandbox, by the command's own git
            marker.unlink()
        env = {**attack.env(), "GIT_ALLOW_PROTOCOL": "file"}  # as the person's git would
        said = ""
        for args in (
            ["status"],
            ["submodule", "update", "--init", "sub2"],
            ["-C", "sub", "status"],
        ):
            done = subprocess.run(
                [*prefix, "git", "-C", str(ws), *args],
                capture_output=True,
                text=True,
                timeout=60,
                env=env,
            )
            said += done.stdout + done.stderr
        assert not list(ws.rglob("PWNED*")), said
        assert "planted" in results[0] and "done" in results[1], results
        assert (
            "[talos: moved sub/.git aside to .git.moved-by-talos-" in results[0]
            or "[talos: removed sub/.git, a repository" in results[0]
        ), results[0]
        assert "Not a directory" in results[1] or "Read-only" in results[1], results[1]
        assert_nothing_leaked(attack, proc.stdout, proc.stderr, *results)
