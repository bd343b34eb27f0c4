"""The shell reader reads options, substitutions and assignments as bash and the programs will
(issue 25, points 1 to 3): option prefixes and attached values, here-document bodies and array
indexes bash evaluates, environment variables that make programs run others. The generated
test walks every risky or program-running option in the tables with every prefix of it."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import threading
from importlib import resources

import pytest

from talos_ls.gates import options
from talos_ls.gates.permissions import DEFAULT_ALLOW, Policy
from talos_ls.gates.shell import (
    ENV_RUNS,
    GIT_ENV_HARMLESS,
    OPAQUE_FLAGS,
    RISKY_FLAGS,
    RUNNERS,
    analyze,
    env_runs,
    matches,
)

from .system import require_binary


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("x = 1\n")
    os.symlink("/etc/passwd", root / "passwd")
    return root


def policy(ws, mode="ask", **rules):
    config = ws.parent / "config"
    if rules:
        from talos_ls.gates.permissions import workspace_settings_path

        path = workspace_settings_path(ws.resolve(), config)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(rules))
    return Policy.load(ws, mode, sandboxed=True, config=config)


# ===================================================== 1. the generated prefix test
def _keys_with_spec() -> list[tuple[str, str]]:
    """(table key, the program or git subcommand its options are read with)."""
    data = resources.files(options.__package__).joinpath("options.json").read_text()
    tabled = json.loads(data)["programs"]
    out = []
    for table in (RISKY_FLAGS, OPAQUE_FLAGS):
        for key in table:
            if key == "git *":
                out += [(key, name) for name in tabled if name.startswith("git ")]
            else:
                out.append((key, key))
    return sorted(set(out))


def _command(name: str, spelling: str, value: str | None, joined: bool) -> str:
    """A command line giving `spelling` (with `value`) to `name` (`git log`, `sort`)."""
    words = name.split()
    given = (
        spelling if value is None else (f"{spelling}={value}" if joined else f"{spelling} {value}")
    )
    if words[0] == "git" and len(words) == 1:
        return f"git {given} status"
    if words[0] == "find":  # predicates take words of their own
        return f"find . {spelling} {value or ''}"
    return f"{name} {given} x"


def _value(sp: options.Spec | None, arity: int) -> str | None:
    if sp is not None and sp.style == "find":
        return "true \\;" if arity == options.COMMAND else " ".join(["v"] * arity) or None
    return "v" if arity == options.REQUIRED else None


def _verdict(command: str) -> tuple[bool, bool]:
    """(opaque, risky) for a command line."""
    analysis = analyze(command)
    return analysis.opaque, bool(analysis.all_risks)


def _dangerous(table_key: str, sp: options.Spec | None) -> list[tuple[str, bool, int]]:
    """(spelling, opaque?, arity) of every risky or program-running option under `table_key`,
    every spelling of it (the tables name one; the option reader knows the others)."""
    found = []
    for table, opaque in ((RISKY_FLAGS, False), (OPAQUE_FLAGS, True)):
        for entry in table.get(table_key, {}):
            if not entry.startswith("-"):
                continue
            option = None
            if sp is not None:
                option = sp.long.get(entry) or (
                    sp.short.get(entry[1:]) if len(entry) == 2 else None
                )
            if sp is not None and option is None:
                continue  # not an option of this subcommand (`git *` covers all of them)
            names = option.names if option else (entry,)
            arity = option.arity if option else options.REQUIRED
            found += [(name, opaque, arity) for name in names]
    return found


@pytest.mark.parametrize("table_key, name", _keys_with_spec())
def test_every_prefix_of_a_dangerous_option_is_judged_like_its_full_name(table_key, name):
    """Generated from the tables: for each program and each risky or program-running option,
    every unambiguous prefix of each long spelling (`--compress-prog`) is classified like the
    full name, with `=value` and a separate value; an ambiguous one is never let through."""
    sp = options.spec(name)
    checked = 0
    for spelling, opaque, arity in _dangerous(table_key, sp):
        value = _value(sp, arity)
        full = _verdict(_command(name, spelling, value, joined=True))
        assert full[1] and full[0] == opaque, (name, spelling, full)
        long = spelling.startswith("--") or (sp is not None and sp.style == "find")
        if not long:
            continue
        dashes = 1 if not spelling.startswith("--") else 2
        for end in range(dashes + 1, len(spelling)):
            prefix = spelling[:end]
            candidates = sp.lookup(prefix) if sp is not None else ()
            if prefix in options.FIND_OPERATORS or (
                len(candidates) == 1 and spelling not in candidates[0].names
            ):
                continue  # another option's (or find operator's) exact name: that one wins
            for joined in (True, False) if value and sp and sp.style != "find" else (True,):
                got = _verdict(_command(name, prefix, value, joined))
                checked += 1
                if sp is None:  # no table: every prefix is taken for every option it starts
                    assert got[1] and (got[0] or not full[0]), (name, prefix, got, full)
                elif len(candidates) == 1:  # unambiguous: like the full name
                    assert got == full, (name, prefix, got, full)
                else:  # ambiguous: asked, and opaque if any candidate could run a program
                    assert got[1], (name, prefix, "an ambiguous prefix was let through")
                    if opaque:
                        assert got[0], (name, prefix, "an ambiguous prefix lost its opacity")
    assert checked or not any(s.startswith("--") for s, _, _ in _dangerous(table_key, sp))


def test_every_program_the_built_in_rules_allow_has_an_option_table():
    """A flag the reader cannot classify is asked: for the built-in readers that needs a table
    knowing every option."""
    for rule in DEFAULT_ALLOW:
        program = rule.split()[0] if rule.split()[0] != "git" else rule
        assert options.spec(program) is not None, f"no option table for {program!r}"
    for runner in ("env", "nice", "timeout", "xargs", "flock", "stdbuf", "setsid", "nohup"):
        assert options.spec(runner) is not None and runner in RUNNERS


# ===================================================== 1. options as the program reads them
READ_OUTSIDE = [
    "grep -f/etc/passwd src",
    "grep -rnf/etc/passwd src",
    "grep -xf/etc/passwd src",
    "grep --file=/etc/passwd src",
    "grep --file /etc/passwd src",
    "grep -f passwd src",
    "grep -e x -f../x src",
    "date -f/etc/passwd",
    "date --file=/etc/hostname",
    "file -f/etc/passwd",
    "wc --files0-from=/etc/x",
    "du --files0-from=/etc/x",
    "sort --files0-from=/etc/x",
    "sort -T/tmp f",
    "git blame --contents=/etc/passwd src/a.py",
    "git ls-files -X/etc/passwd",
    "git log -O/etc/passwd -p",
    "head -n1 -- /etc/passwd",
    "cat -v ~/x",
    "grep -f.env src",
    "rg -f/etc/passwd src",
    "rg --ignore-file=/etc/x x",
    "diff --from-file=/etc/passwd src/a.py",
    "tar -cf x.tar -T/etc/x",
]
RUNS_HIDDEN = [
    "sort --compress-prog=./x -S 1 src/a.py",
    "sort --compress=./x src/a.py",
    "grep --derefer root .",
    "grep --dereference-r root .",
    "git diff --ext-di",
    "git log --outp=x",
    "git diff --output=/tmp/x",
    "git show --textc HEAD",
    "rg --pr ./x x",
    "rg --fol x",
    "find . -exe true ;",
    "find . -fpr x",
    "tree -o x",
    "ls --deref src",
    "file -C -m x",
    "git log --bogus",
    "ls --frobnicate",
    "git branch -D main",
    "git branch --edit-desc",
    "diff -r src src",
]
STILL_UNASKED = [
    "git status",
    "git status --short",
    "git diff --stat",
    "git diff --cached -- src",
    "git log --oneline -5",
    "git log -n 3 --stat",
    "git log --graph --all --decorate",
    "git log -c -1",
    "git show HEAD --stat",
    "git branch -a",
    "git rev-parse --short HEAD",
    "git ls-files -m",
    "git blame -L 1,2 src/a.py",
    "ls -la",
    "ls -1 src",
    "grep -rn x src",
    "grep -5 x src/a.py",
    "rg x",
    "rg -n -i --type py x src",
    "find . -name '*.py' -type f",
    "head -20 src/a.py",
    "tail -n +2 src/a.py",
    "sort -k2,2 -t: src/a.py",
    "wc -l src/a.py",
    "diff -r --no-dereference src src",
    "python --version",
    "date +%Y",
    "echo -n hi",
]


def test_attached_and_joined_values_are_path_checked(ws):
    p = policy(ws)
    for command in READ_OUTSIDE:
        decision = p.check_command(command)
        assert decision.verdict == "ask", (command, decision)
        assert "outside the workspace" in decision.reason or "secrets file" in decision.reason, (
            command,
            decision.reason,
        )


def test_prefixes_clusters_and_unknown_options_of_allowed_programs_are_asked(ws):
    p = policy(ws)
    for command in RUNS_HIDDEN:
        assert p.check_command(command).verdict == "ask", command


def test_legitimate_reading_still_runs_unasked(ws):
    p = policy(ws)
    for command in STILL_UNASKED:
        decision = p.check_command(command)
        assert decision.verdict == "allow", (command, decision)


def test_runners_are_read_with_their_tables_so_deny_rules_hold(ws):
    p = policy(ws, "full-auto")
    for command in (
        "nice --adj 5 sudo -n true",
        "timeout --sig KILL 5 sudo -n true",
        "env --split='sudo -n true'",
        "env --spl 'sudo -n true'",
        "flock lock -c 'sudo -n true'",
        "stdbuf --out=0 sudo -n true",
        "rm --recu --for /",
        "rm -Rf /",
    ):
        assert p.check_command(command).verdict == "deny", command
    # An option a runner does not have: where its program starts is unknown.
    assert p.check_command("env --frobnicate sudo -n true").verdict != "allow"


def test_rules_match_however_an_option_is_spelt():
    assert matches("rm -rf /", ("rm", "--recu", "--forc", "/"), loose=True)
    assert matches("git push --force", ("git", "push", "-f", "origin"), loose=True)
    assert matches("git push --force", ("git", "push", "origin", "--force"), loose=True)
    assert matches("ls -la", ("ls", "--all", "-l"))
    assert matches("head -n 5", ("head", "-n", "5"))
    assert not matches("git log", ("git", "-C", "/x", "log"))


# ======================================================== 2. substitutions bash expands
# Commands in substitutions the reader now sees (deny and ask rules judge them).
VISIBLE = [
    "cat <<EOF\n$(touch p)\nEOF",
    "cat <<-EOF\n\t${x:-$(touch p)}\nEOF",
    'cat <<< "$(touch p)"',
    'cat > "$(touch p)"',
    "[[ -v a[$(touch p)] ]]",
    "echo $(( a[$(touch p)] ))",
]
# What bash evaluates that the reader cannot: opaque.
SUBSTITUTIONS = [
    "cat <<EOF\n`touch p`\nEOF",
    "cat <<EOF\nx $y `touch p`\nEOF",
    "test -v 'a[$(touch p)]'",
    "[ -v 'a[$(touch p)]' ]",
    "[[ -v 'a[$(touch p)]' ]]",
    "printf -v 'a[$(touch p)]' %s 1",
    "read 'a[$(touch p)]' < /dev/null",
    "read -a 'a[$(touch p)]' < /dev/null",
    "declare 'a[$(touch p)]=1'",
    "local 'a[`touch p`]'",
    "export 'a[$(touch p)]=1'",
    "readonly 'a[$(touch p)]=1'",
    "typeset 'a[$(touch p)]'",
    "unset 'a[$(touch p)]'",
    "mapfile -t 'a[$(touch p)]' < /dev/null",
    "readarray 'a[$(touch p)]' < /dev/null",
    "wait -p 'a[$(touch p)]'",
    "getopts ab 'a[$(touch p)]'",
    "let 'a[$(touch p)]=1'",
    "x='a[$(touch p)]'; echo $((x))",
    "x='a[$(touch p)]'; (( x ))",
    "x='a[$(touch p)]'; [[ $x -eq 0 ]]",
    "[[ 'a[$(touch p)]' -eq 0 ]]",
    "read x < f; echo $((x + 1))",
    "echo $(( $(cat f) ))",
    "echo ${!x}",
    "echo ${x@P}",
    "declare -i n; n='a[$(touch p)]'",
    "declare -n r=x",
    "compgen -W '$(touch p)'",
    "mapfile -C 'touch p' -c 1 a < /dev/null",
    "hash -p ./evil ls; ls",
    "enable -f ./x.so x",
    "f() { echo $(($1)); }; f 'a[$(touch p)]'",
    "for v in $(cat f); do echo $((v)); done",
    "echo ${a[$(cat f)]}",
    "echo ${s:$(cat f)}",
    'read "$name" < /dev/null',
    "echo ${x:0:$_}",
    "command read 'a[$(touch p)]'",
]
SUBSTITUTIONS_FINE = [
    "cat <<'EOF'\n$(touch p)\nEOF",
    "cat <<\\EOF\n`touch p`\nEOF",
    "echo $((1 + 2))",
    "n=3; echo $((n * 2))",
    "for ((i = 0; i < 3; i++)); do echo $i; done",
    "echo ${#x} ${!a[@]}",
    "read -r line < /dev/null",
    "printf -v out %s 1",
    "x=1; [[ $x -eq 1 ]]",
    "echo ${x:1:2}",
    "declare -a list=(a b)",
    "export LANG=C.UTF-8",
    "unset FOO",
]


def test_every_substitution_bash_expands_is_visited_or_opaque(ws):
    """Full-auto asks for each (it runs what it can read); a deny rule sees a command inside a
    here-document body."""
    p = policy(ws, "full-auto")
    for command in SUBSTITUTIONS:
        decision = p.check_command(command)
        assert decision.verdict == "ask", (command, decision)
    for command in SUBSTITUTIONS_FINE:
        assert not analyze(command).opaque, (command, analyze(command).all_risks)
    for command in VISIBLE:
        assert "touch" in [c.program for c in analyze(command).commands], command
        assert p.check_command(command.replace("touch p", "sudo -n true")).verdict == "deny"
        assert policy(ws).check_command(command).verdict == "ask", command


def test_a_quoted_here_document_delimiter_keeps_its_body_text():
    found = [c.program for c in analyze("cat <<'EOF'\n$(touch p)\nEOF").commands]
    assert found == ["cat"]
    found = [c.program for c in analyze("cat <<EOF\n$(touch p)\nEOF").commands]
    assert sorted(found) == ["cat", "touch"]


# =============================================== 3. configuration that runs programs
ENV_PAYLOADS = [
    "GIT_CONFIG_PARAMETERS=\"'core.pager=touch p'\" git log",
    "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.pager GIT_CONFIG_VALUE_0='touch p' git log",
    "GIT_CONFIG_GLOBAL=./x git log",
    "GIT_CONFIG_SYSTEM=./x git log",
    "GIT_EXTERNAL_DIFF='touch p' git diff",
    "GIT_PAGER='touch p' git log",
    "GIT_EDITOR='touch p' git commit",
    "GIT_SSH_COMMAND='touch p' git fetch",
    "GIT_SSH=./x git fetch",
    "GIT_ASKPASS=./x git fetch",
    "GIT_EXEC_PATH=. git log",
    "GIT_TEMPLATE_DIR=./t git init x",
    "GIT_DIR=/tmp/x git log",
    "GIT_WORK_TREE=/ git status",
    "PAGER='touch p' man ls",
    "MANPAGER='touch p' man ls",
    "LESSOPEN='|touch p %s' less x",
    "LESSCLOSE='touch p' less x",
    "EDITOR='touch p' crontab -e",
    "VISUAL=./x git commit",
    "SSH_ASKPASS=./x ssh h",
    "BASH_ENV=./x bash -c true",
    "ENV=./x sh -c true",
    "PROMPT_COMMAND='touch p' bash -i",
    "LD_PRELOAD=./x.so ls",
    "LD_LIBRARY_PATH=. ls",
    "LD_AUDIT=./x.so ls",
    "PYTHONSTARTUP=x python3",
    "PYTHONPATH=. python3 -c 1",
    "NODE_OPTIONS='--require ./x' node -e 1",
    "PERL5OPT=-Mx perl -e 1",
    "RUBYOPT=-rx ruby -e 1",
    "PATH=./bin:$PATH ls",
    "HOME=. git log",
    "XDG_CONFIG_HOME=. git log",
    "TAR_OPTIONS=-Ix tar -xf a",
    "RIPGREP_CONFIG_PATH=./x rg x",
    "CC='touch p' make",
    "MAKEFLAGS=-Ex make",
    "env GIT_PAGER='touch p' git log",
    "env -i GIT_EXTERNAL_DIFF=x git diff",
    "export GIT_PAGER='touch p'; git log",
    "declare -x GIT_PAGER='touch p'; git log",
    "GIT_PAGER='touch p'; export GIT_PAGER; git log",
    "read GIT_PAGER < f; git log",
    "printf -v GIT_PAGER %s x; export GIT_PAGER; git log",
    "strace -E LD_PRELOAD=./x ls",
    "env -S 'GIT_PAGER=x git log'",
    "npm_config_script_shell=./x npm test",
]
FLAG_PAYLOADS = [
    "ssh -o ProxyCommand='touch p' h",
    "ssh -oproxycommand=x h",
    "ssh -o 'LocalCommand x' h",
    "ssh -o PermitLocalCommand=yes h",
    "ssh -F cfg h",
    "ssh -o KnownHostsCommand=x h",
    "scp -S ./x a b:",
    "scp -o ProxyCommand=x a b:",
    "sftp -S ./x h",
    "sftp -b batch h",
    "sftp -D ./server",
    "vim -c '!touch p' x",
    "vim '+!touch p' x",
    "vim -S s.vim x",
    "vim --cmd x x",
    "vim -es x",
    "nvim -l x.lua",
    "nvim -u init.lua x",
    "vi -c x x",
    "ex x",
    "view -c x x",
    "rsync -e x a b",
    "rsync --rsh=x a b",
    "rsync --rsync-path=x a b",
    "less '+!touch p' x",
    "less -k keys x",
    "man -P x ls",
    "man --pager=x ls",
    "man -H ls",
    "tar --to-command=x -xf a",
    "tar -I x -xf a",
    "tar --use-compress=x -xf a",
    "tar --checkpoint-action=exec=x -cf a .",
    "tar --info-script=x -cf a .",
    "tar -F x -cf a .",
    "sort --compress-program=x f",
    "zip -TT x a.zip f",
    "git clone -u x r d",
    "git clone --upload-pack=x r d",
    "git fetch --upload-pack=x r",
    "git ls-remote --upload-pack=x r",
    "git pull --upload-pack=x r",
    "git push --receive-pack=x r",
    "git difftool -x x",
    "git difftool --extcmd=x",
    "git rebase --exec x",
    "git rebase -x x",
    "git bisect run x",
    "git submodule foreach x",
    "git grep --open-files-in-pager=x y",
    "git archive --exec=x --remote=r",
    "git filter-branch --tree-filter x",
    "git clone -c core.fsmonitor=x r d",
    "git clone --config core.fsmonitor=x r d",
    "git clone --template=./t r d",
    "git -c x=y log",
    "git --config-env=core.pager=X log",
    "git --exec-path=. log",
    "curl -K cfg",
    "curl --config=cfg",
    "wget -e x",
    "wget --execute=x",
    "wget --use-askpass=x u",
    "make --eval='x:'",
    "make -E x",
    "make SHELL=./x",
    "make CC=./x",
    "awk -f x.awk f",
    "awk 'BEGIN{system(\"x\")}'",
    "awk '{print | \"x\"}' f",
    "gawk --load=x f",
    "mawk -f x f",
    "sort $X f",
    "git $X",
]


def test_environment_that_makes_programs_run_others_is_opaque(ws):
    p = policy(ws, "full-auto")
    for command in ENV_PAYLOADS:
        decision = p.check_command(command)
        assert decision.verdict == "ask", (command, decision)
        assert analyze(command).opaque, command
    for harmless in (
        "GIT_AUTHOR_NAME=me git log",
        "LANG=C ls",
        "TZ=UTC date",
        "PYTHONUNBUFFERED=1 python3 x.py",
    ):
        assert not analyze(harmless).opaque, harmless


def test_every_family_of_variables_is_named_with_its_reason():
    for family, names in ENV_RUNS.items():
        for name in names:
            probe = name.rstrip("*") + ("X" if name.endswith("*") else "")
            why = env_runs(probe)
            if probe in GIT_ENV_HARMLESS:
                continue
            assert why and family in why and probe in why, (probe, why)
    assert env_runs("GIT_AUTHOR_NAME") is None and env_runs("LANG") is None


def test_flags_that_run_programs_are_opaque(ws):
    p = policy(ws, "full-auto")
    for command in FLAG_PAYLOADS:
        decision = p.check_command(command)
        assert decision.verdict == "ask", (command, decision)
        assert analyze(command).opaque, command
    fine = [
        "ssh -o ConnectTimeout=5 h",
        "vim +12 x",
        "less +5 x",
        "make -j4",
        "awk '{print $1}' f",
        "awk '$1 || $2' f",
        "tar -xf a.tar",
        "sort -u f",
    ]
    for command in fine:
        assert not analyze(command).opaque, (command, analyze(command).all_risks)


def test_the_reasons_name_the_option_as_the_program_reads_it():
    risks = analyze("sort --compress-prog=./x f").all_risks
    assert "sort --compress-program can run a program given as text" in risks
    risks = analyze("git log --outp=x").all_risks
    assert any(r.startswith("git log --outp (maybe --output) writes a file") for r in risks)
    assert "git --ext-diff" not in " ".join(analyze("git log -c").all_risks)


def test_the_person_is_told_what_bash_would_evaluate(ws):
    """Full-auto asks for these; the prompt says why first, not a lesser risk of the line."""
    p = policy(ws, "full-auto")
    for command, why in [
        ("x='a[$(touch p)]'; echo $((x))", "evaluates x as arithmetic"),
        ("cat <<EOF\n`touch p`\nEOF", "bash expands a `$(...)`, `${...}` or backtick"),
        ("echo ${x@P}", "expands a value as a prompt"),
        ("GIT_PAGER='touch p' git log", "sets GIT_PAGER, which can make git run a program"),
    ]:
        decision = p.check_command(command)
        assert decision.verdict == "ask" and decision.reason.startswith(why), decision


def test_a_negation_turns_an_option_off():
    """git's `--no-textconv` (listed with `--textconv`) and `--no-ext-diff` are safe."""
    assert analyze("git log -p --no-textconv").all_risks == []
    assert analyze("git diff --no-ext-diff").all_risks == []
    assert analyze("git log --textconv").all_risks


# ================================================ the review of issue 25 (A4, A5, A6, A9)
# A4: a glob is judged from where it starts; its walk is bounded for the whole line.
def test_a_glob_is_judged_from_the_directory_it_starts_in(ws):
    """`ls /*/*/zz*` matches nothing, so the old check took the workspace for it; bash's
    bracket syntax (`[^x]`, `[[:alpha:]]`) is matched as bash matches it, so a link among the
    matches (`passwd` -> /etc/passwd) is found."""
    p = policy(ws)
    for command in (
        "ls /*/*/zz*",
        "ls /*/zz*",
        "cat ../*/nothing*",
        "cat [^x]asswd",
        "cat p[[:alpha:]]sswd",
        "cat pass[^]x]d",
        "cat */../pass*",
    ):
        decision = p.check_command(command)
        assert decision.verdict == "ask", (command, decision)
        assert "outside the workspace" in decision.reason, (command, decision.reason)
    for command in ("ls src/*.py", "cat src/[a-z].py", "ls s*/", "ls src/[!.]*"):
        assert p.check_command(command).verdict == "allow", command


def _check_in_thread(p, command: str, hang: float = 120.0):
    """`p.check_command(command)` in a thread; fails if it has not returned after `hang`
    seconds (a walk with no bound runs for hours)."""
    result = {}
    thread = threading.Thread(target=lambda: result.update(d=p.check_command(command)), daemon=True)
    thread.start()
    thread.join(hang)
    assert not thread.is_alive(), f"checking {command!r} did not end: the glob walk is unbounded"
    return result["d"]


def test_a_glob_walk_is_bounded_by_the_entries_it_visits_for_the_whole_line(ws):
    """Twenty links to their own directory make `loop/*/*/*/*/*/*/zz*` 64 million paths: the
    walk stops at its budget and the command is asked. The budget is the line's: three
    commands of 9,000 entries each go over it together."""
    loop = ws / "loop"
    loop.mkdir()
    for i in range(20):
        os.symlink(".", loop / f"l{i}")
    p = policy(ws)
    decision = _check_in_thread(p, "ls loop/*/*/*/*/*/*/zz*")
    assert decision.verdict == "ask" and "too many paths" in decision.reason, decision
    assert p.check_command("ls loop/*/*/zz*").verdict == "allow"  # within the budget
    decision = _check_in_thread(p, "; ".join(["ls loop/*/*/zz*"] * 3))
    assert decision.verdict == "ask" and "too many paths" in decision.reason, decision


def test_the_check_runs_where_the_caller_puts_it_with_the_folders_read_before(ws, tmp_path):
    """`authorize_command(blocking=...)` runs the check in the caller's worker (the host's
    offload); the folders open inside are read on the caller's thread first, and their deny
    rules still hold."""
    inner = policy(ws)
    inner.commands["deny"] = ["git push"]
    outer = policy(ws)
    outer.nested = lambda: [("sub", inner)]
    threads = []

    async def blocking(fn, *args):
        def run():
            threads.append(threading.current_thread())
            return fn(*args)

        return await asyncio.to_thread(run)

    async def main():
        return await outer.authorize_command("git push origin main", None, blocking=blocking)

    decision = asyncio.run(main())
    assert decision.verdict == "deny" and "the folder sub" in decision.reason, decision
    assert threads and threads[0] is not threading.main_thread()


# A5: every word with `=` before env's (or sudo's) program is an assignment.
ENV_DENIED = [
    "env A.B=1 sudo -n true",
    "env -S 'A.B=1 sudo -n true'",
    "env -iS'A.B=1 sudo -n true'",
    "env --split-string='A=1 sudo -n true'",
    "find . -exec env A.B=1 sudo -n true ;",
    "env A.B=1 git push origin main",
    "env A=1 B.C=2 git push origin main",
    "sudo A=1 git push origin main",
    "env -S 'A.B=1 git push' origin main",
    "env -S 'env -S \"git push origin main\"'",
    "env =x git push origin main",
]
ENV_OPAQUE = [
    "env 'BASH_FUNC_ls%%=() { touch p; }' bash -c ls",
    "env BASH_FUNC_x=1 bash -c x",
    "env A-B=1 true",
    "env -S 'BASH_FUNC_ls%%=x' bash -c ls",
    "env -u X 'BASH_FUNC_ls%%=x' ls",
    "export 'BASH_FUNC_ls%%=() { touch p; }'; bash -c ls",
    "declare -x 'BASH_FUNC_ls%%=() { touch p; }'; bash -c ls",
    "strace -E 'BASH_FUNC_ls%%=() { touch p; }' bash -c ls",
    "systemd-run -E A.B=1 true",
    "env -S 'x \\c' true",
    "env -S '${HOME}' true",
]


def test_env_takes_every_word_with_an_equals_sign_before_its_program(ws):
    """GNU env (and sudo) take any such word as an assignment, not only a shell identifier:
    the program after it is found, so deny rules hold; a name that is no identifier
    (`BASH_FUNC_ls%%` is a bash function) makes the command opaque."""
    p = policy(ws, "full-auto", commands={"deny": ["git push"]})
    for command in ENV_DENIED:
        assert p.check_command(command).verdict == "deny", command
    for command in ENV_OPAQUE:
        assert analyze(command).opaque, command
        assert p.check_command(command).verdict == "ask", command
    for command in ("env LANG=C ls", "env -u LANG ls", "env -S 'LANG=C ls'", "env -i ls"):
        assert p.check_command(command).verdict == "allow", command


# A6: what bash expands that the grammar did not parse is opaque.
UNPARSED = [
    "cat <<EOF\n  $(touch p)\nEOF",
    "cat <<-EOF\n\t$(touch p)\n\tEOF",
    "cat <<EOF\n\t`touch p`\nEOF",
    "cat <<EOF; touch p\nx\nEOF",
    "cat <<EOF\nx $(echo) y\n  $(touch p)\nEOF",
    "cat <<EOF\n  $((a[$(touch p)]))\nEOF",
    "cat <<EOF\n  $[1]\nEOF",
    "cat << EOF >out\n   ${x:-$(touch p)}\nEOF",
    "x=$(cat <<EOF\n  $(touch p)\nEOF\n)",
    "echo ${x:-`touch p`}",
    'echo "${x:-`touch p`}"',
    "cat <<EOF\n${x:-`touch p`}\nEOF",
    "echo `echo \\`touch p\\``",
    "echo `echo \\$(touch p)`",
    "tou\\\nch p",
    "echo $\\\n(touch p)",
    "cat <<EOF\n$\\\n(touch p)\nEOF",
    "cat <<EOF\nEOF \n$(touch p)\nEOF",
    "cat <<EOF\n EOF\ntouch p\nEOF",
]
# The grammar nests the rest of a here-document's line inside it: those commands are read.
HEREDOC_LINE = [
    "cat <<EOF | touch p\nx\nEOF",
    "cat <<EOF && touch p\nx\nEOF",
    "cat <<EOF || touch p\nx\nEOF",
    "cat <<A <<B | touch p\na\nA\nb\nB",
]
PARSED_FINE = [
    "cat <<EOF\n  plain $x ${y} text\nEOF",
    "cat <<'EOF'\n  $(touch p)\nEOF",
    "cat <<-'EOF'\n\t`touch p`\n\tEOF",
    "cat <<EOF\n  \\$(not run) \\`nor this\\`\nEOF",
    "echo 'a $(b) `c`' # $(d)",
    "echo $'\\x41 $(b)'",
    'git commit -m "two \\\nlines"',
    "python x.py \\\n  --flag",
    "cat <<EOF\n$(date)\nEOF",
    "cat <<EOF\n  ${HOME} ${#x} ${y:-text} ${z%.py}\nEOF",
    'python -c "a;\\\nb"',
]


def test_what_bash_expands_that_the_grammar_did_not_parse_is_opaque(ws):
    """tree-sitter drops `$(...)` after a here-document line's indent and in `<<-` bodies,
    reads a backtick inside `${x:-...}` as text, splits a word at a line continuation; the
    reader finds every `$(`, `${`, `$((`, `$[` and backtick bash will expand outside quotes and
    comments, and each must be one the grammar parsed."""
    p = policy(ws, "full-auto")
    for command in UNPARSED:
        assert analyze(command).opaque, command
        assert p.check_command(command).verdict == "ask", command
    for command in PARSED_FINE:
        assert not analyze(command).opaque, (command, analyze(command).all_risks)
    for command in HEREDOC_LINE:
        assert "touch" in [c.program for c in analyze(command).commands], command
        assert p.check_command(command.replace("touch p", "sudo -n true")).verdict == "deny"


# A9: awk's options are read before its program text is found.
AWK_RUNS = [
    "awk -v x=1 'BEGIN{system(\"touch p\")}'",
    "awk -F : '{system($1)}' f",
    "awk -F: -v a=b 'BEGIN{print | \"sh\"}'",
    "awk -vx=1 -- 'BEGIN{system(1)}'",
    "awk -e 'BEGIN{system(\"x\")}'",
    "gawk --source='BEGIN{system(\"x\")}'",
    "awk -f x.awk f",
    "gawk -E x.awk",
    "mawk -We x.awk",
    "mawk -W exec x.awk",
    "mawk -Wsprintf=9,e x.awk",
    "awk -W source=x",
    'awk \'BEGIN{f="system"; @f("x")}\'',
    "awk '@load \"x\"; {}' f",
    "awk -D '{}' f",
    "awk --debug=cmds '{}' f",
    "awk -Z 'BEGIN{system(1)}'",
    "nawk -v x=1 'BEGIN{\"x\" | getline}'",
]
AWK_FINE = [
    "awk -F: '{print $1}' f",
    "awk -v n=2 'NR==n' f",
    "awk '{print}' f",
    "mawk -W version",
    "awk -- '{print $1}' f",
    "awk -F '|' '{print $2}' f",
    "awk '$1 || $2' f",
]


def test_awk_options_are_read_before_its_program_is_found(ws):
    """`-v x=1` and `-F :` take values; the program is the first word after the options (or
    `-e`'s): with the person's `awk` rule, a program that calls `system` is still asked."""
    p = policy(ws, commands={"allow": ["awk", "gawk", "mawk", "nawk"]})
    for command in AWK_RUNS:
        assert analyze(command).opaque, command
        assert p.check_command(command).verdict == "ask", command
    for command in ("awk -o out '{}' f", "awk --profile=x '{}' f"):
        assert p.check_command(command).verdict == "ask", command  # gawk writes the file
    for command in AWK_FINE:
        assert p.check_command(command).verdict == "allow", command


# And what a fresh look found: runners, sed's script, shells reading their input.
SUDO_HIDDEN = [
    "setarch x86_64 sudo -n true",
    "setarch x86_64 -R sudo -n true",
    "setarch -R sudo -n true",
    "linux64 sudo -n true",
    "prlimit --nofile=9 sudo -n true",
    "prlimit -n9 sudo -n true",
    "runcon -t x sudo -n true",
    "runcon ctx sudo -n true",
    "fakeroot -l lib sudo -n true",
    "eatmydata sudo -n true",
    "sshpass -p pw sudo -n true",
    "script out -qc 'sudo -n true'",
    "script -q out -c 'sudo -n true'",
    "runuser -u root -- sudo -n true",
    "runuser root -c 'sudo -n true'",
    "echo x | xargs env",
    "echo x | xargs -I{} sh -c '{}'",
    "echo x | xargs -i sh -c 'echo {}'",
    "find . -exec sh -c 'echo {}' \\;",
    "sh - <<< x",
    "bash -e - <<< x",
    "perf stat sudo -n true",
    "gdb -batch -ex 'shell sudo'",
    "tmux new -d 'sudo -n true'",
    "sed -n '1e sudo -n true' f",
    "sed 's/x/sudo/e' f",
    "sed 's/[/]/x/e' f",
    "sed ':a;e sudo' f",
    "sed 's/x/y/ e' f",
    "split --filter=sudo f",
    "split --fil=sudo f",
    "sdiff --diff-program=sudo a b",
    "make -f - x <<< x",
    "fish -c 'sudo -n true'",
    "ed f <<< x",
    "su -s /usr/bin/sudo root",
    "sg root 'sudo -n true'",
    "sg - root sudo",
]
SED_FINE = [
    "sed -n '1,20p' f",
    "sed 's/a/b/g' f",
    "sed -e 's/x/y/' -e '5d' f",
    "sed '/a/,/b/d' f",
    "sed ':a;N;$!ba;s/\\n/ /g' f",
    "sed 's|a|b|g' f",
    "sed -E 's/(a|b)+/x/2g' f",
    "sed '/a/{s//X/;p}' f",
    "sed 'y/abc/xyz/' f",
    "sed '1i\\\nheader' f",
    "sed '$!N' f",
    "sed --sandbox '1e x' f",
]


def test_runners_sed_scripts_and_shells_reading_input_do_not_hide_a_program(ws):
    """Full-auto with the built-in deny of `sudo`: none of these may run unasked."""
    p = policy(ws, "full-auto")
    for command in SUDO_HIDDEN:
        assert p.check_command(command).verdict != "allow", command
    p = policy(ws, commands={"allow": ["sed"]})
    for command in SED_FINE:
        assert p.check_command(command).verdict == "allow", command
    for command in (
        "sed 'r /etc/passwd' f",
        "sed 'w /tmp/x' f",
        "sed 's/a/b/w out' f",
        "strace -o /tmp/x ls",
        "flock /etc/lock ls",
    ):
        assert p.check_command(command).verdict == "ask", command


# ================================================ what bash runs, against what is read
# Each runs `pwn` (a stub that logs its name) the way bash would; the reader must see it run,
# or find the line opaque. Runners and programs are the real ones.
BASH_PAYLOADS = [
    "cat <<EOF\n  $(pwn)\nEOF",
    "cat <<-EOF\n\t$(pwn)\n\tEOF",
    "cat <<EOF | pwn\nx\nEOF",
    "cat <<EOF && pwn\nx\nEOF",
    "echo ${x:-`pwn`}",
    "cat <<EOF\n${x:-`pwn`}\nEOF",
    "echo `echo \\`pwn\\``",
    "echo `echo \\$(pwn)`",
    "pw\\\nn",
    "echo $\\\n(pwn)",
    "env A.B=1 pwn",
    "env -S 'A.B=1 pwn'",
    "env -iS'pwn'",
    "env 'BASH_FUNC_ls%%=() { pwn; }' bash -c ls",
    "echo pwn | xargs env",
    "echo pwn | xargs -I{} sh -c '{}'",
    "echo pwn | xargs -i@ sh -c @",
    "touch '$(pwn)'; find . -name '$*' -exec sh -c 'echo {}' \\;",
    "sh - <<< pwn",
    "bash -e - <<< pwn",
    "awk -v x=1 'BEGIN{system(\"pwn\")}'",
    "awk -F: 'BEGIN{system(\"pwn\")}'",
    "mawk -Wsprintf=9,e /dev/stdin <<< 'BEGIN{system(\"pwn\")}'",
    "sed -n '1e pwn' <<< a",
    "sed 's/a/pwn/e' <<< a",
    "sed ':x;e pwn' <<< a",
    "sed 's/x/y/ e' <<< x",
    "setarch x86_64 pwn",
    "setarch x86_64 -R pwn",
    "setarch -R pwn",
    "linux64 pwn",
    "prlimit --nofile=100 pwn",
    "prlimit -n100 pwn",
    "fakeroot -- pwn",
    "script -q /dev/null -c pwn",
    "script /dev/null -qc pwn",
    "su root -c pwn",
    "split --filter=pwn /etc/hostname",
    "sdiff --diff-program=pwn /dev/null /dev/null",
    "make -f - x <<< $'x:\\n\\tpwn'",
    "timeout 5 -k 1 pwn",
    "nice -n 1 pwn",
    "flock /dev/null -c pwn",
    "command -p pwn",
    "exec -a x pwn",
    "time -p pwn",
    "{pwn,x}",
    "$'\\x70wn'",
    "p''wn",
    "sg root 'pwn x'",
    "sg - root pwn",
]
RUNNERS_USED = (
    "env",
    "xargs",
    "sh",
    "bash",
    "cat",
    "echo",
    "find",
    "touch",
    "awk",
    "mawk",
    "sed",
    "setarch",
    "linux64",
    "prlimit",
    "fakeroot",
    "script",
    "su",
    "split",
    "sdiff",
    "make",
    "timeout",
    "nice",
    "flock",
    "ls",
    "diff",
    "sg",
)


def test_what_bash_runs_is_what_the_reader_sees(tmp_path):
    """Differential: each payload runs in real bash, with a PATH of the real programs it
    uses and a stub `pwn` that logs when it runs. Wherever it ran, the reader must have found
    it (at any wrapper layer) or found the line opaque."""
    bash = require_binary("bash", "apt-get install -y bash")
    bin_dir, log = tmp_path / "bin", tmp_path / "ran"
    bin_dir.mkdir()
    (bin_dir / "pwn").write_text(f"#!/bin/sh\necho pwn >> {log}\n")
    (bin_dir / "pwn").chmod(0o755)
    for name in RUNNERS_USED:
        if found := shutil.which(name):
            (bin_dir / name).symlink_to(found)
    missed, ran = [], 0
    for command in BASH_PAYLOADS:
        work = tmp_path / "w"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        log.write_text("")
        subprocess.run(
            [bash, "--norc", "--noprofile", "-c", command],
            cwd=work,
            env={"PATH": str(bin_dir), "HOME": str(work), "LC_ALL": "C"},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=60,
        )
        if "pwn" not in log.read_text():
            continue
        ran += 1
        analysis = analyze(command)
        seen = {
            os.path.basename(layer[0]) for c in analysis.commands for layer in c.layers if layer
        } | {os.path.basename(c.program) for c in analysis.commands}
        if "pwn" not in seen and not analysis.opaque:
            missed.append(command)
    assert not missed, "bash ran pwn where the reader did not see it:\n" + "\n".join(missed)
    assert ran >= len(BASH_PAYLOADS) // 2, f"only {ran} payloads ran here: the check is idle"
