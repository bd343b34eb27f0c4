"""What a shell command will run, read with a real shell grammar (tree-sitter-bash).

The permission gate decides on what this module finds, so it must not be fooled: every simple
command anywhere in the text is found (in pipelines, lists, subshells, `$(...)` and backticks
at any depth, loop bodies, `sh -c` bodies, `find -exec` and `xargs` targets); words are read
as the shell will see them after quote removal (`r''m`, `\\rm` and `"r"m` are all `rm`;
`$'\\x72m'` too); wrappers are looked through (`/usr/bin/env nice -n 5 command curl` runs
`curl`), and every layer is kept so a rule on the wrapper (`sudo`) still holds.

Options are read as each program reads them (`options.py`: prefixes, attached values, git's
subcommands), and every option value that may name a file is path-checked.

What it reports as a *risk* (a reason the command cannot run without the person's approval):
redirections that write or read files, `exec`-style flags that run other programs or write
files (`find -exec/-delete/-fprintf`, `git --output`, `rg --pre`, `sed -i`), an option the
program's table does not know, `xargs`, environment assignments, expansions whose value is only
known when the command runs, and any construct the grammar finds but this module does not model
(loops, functions, here-documents, syntax errors). A command whose program cannot be known
without running it (`$X args`, `eval`, a non-literal `sh -c` body, a flag or an environment
variable that runs a program given as text, arithmetic or a variable name bash evaluates from
data, a substitution bash will expand that the grammar did not parse) is *opaque*: no rule can
vouch for it.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import posixpath
import re
import shlex
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import tree_sitter
import tree_sitter_bash

from ..files import is_secrets_file
from . import options

_LANGUAGE = tree_sitter.Language(tree_sitter_bash.language())
MAX_DEPTH = 8  # nested `sh -c` bodies; deeper is opaque

# fmt: off
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash"})
OPAQUE_PROGRAMS = frozenset({"eval", "source", ".", "trap", "alias", "fc", "coproc"})
# Constructs that hold commands but whose effect this module does not model.
_STRUCTURE = frozenset({"program", "list", "pipeline", "subshell", "compound_statement",
                        "redirected_statement", "negated_command", "comment", "&&", "||",
                        "|", "|&", ";", "&", ";;", "(", ")", "{", "}", "!", "\n"})
_REDIRECTS = ("file_redirect", "heredoc_redirect", "herestring_redirect")
_HEREDOC_PARTS = frozenset({"<<", "<<-", "heredoc_start", "heredoc_body", "heredoc_end"})
_DYNAMIC = frozenset(
    {
        "simple_expansion",
        "expansion",
        "command_substitution",
        "process_substitution",
        "arithmetic_expansion",
        "translated_string",
    }
)

# Flags that make a program write or delete files, follow links out of the workspace, or run
# a program its configuration names: the command is asked. Keys: a program; `git` (its own
# options, before the subcommand), `git SUB`, `git *` (every subcommand). Values: what the
# person is told. Any spelling names the option: the option tables (`options.py`) know that
# `--dereference-recursive` is `-R` and that `--derefer` is a prefix of it.
LINKS_OUT = "follows symbolic links out of the workspace"
AWK_NAMES = ("awk", "gawk", "mawk", "nawk", "original-awk")
RISKY_FLAGS: dict[str, dict[str, str]] = {
    # programs that write or delete files
    "find": {"-exec": "runs another command", "-execdir": "runs another command",
             "-ok": "runs another command", "-okdir": "runs another command",
             "-delete": "deletes files", "-fprint": "writes a file", "-fprint0": "writes a file",
             "-fprintf": "writes a file", "-fls": "writes a file",
             "-L": LINKS_OUT, "-H": "follows symbolic links", "-follow": "follows symbolic links"},
    "sed": {"-i": "edits files in place", "--follow-symlinks": LINKS_OUT},
    "sort": {"-o": "writes a file"},
    "sdiff": {"-o": "writes a file"},
    "tee": {"": "writes files"},  # tee writes whatever it is given
    "uniq": {"": "may write its second argument"},
    "tree": {"-o": "writes a file", "-R": "writes an HTML file into every directory",
             "-l": LINKS_OUT},
    "file": {"-C": "writes a compiled magic file"},
    # readers that follow links out of the workspace
    "grep": {"-R": LINKS_OUT},
    "rg": {"-L": LINKS_OUT, "--pre": "runs a preprocessor program on every file",
           "--pre-glob": "runs a preprocessor program"},
    "du": {"-L": "follows symbolic links"},
    "cp": {"-L": "follows symbolic links"},
    "ls": {"-L": "follows symbolic links"},
    "diff": {"-r": LINKS_OUT + " (unless --no-dereference)"},
    # git: another repository, files written, programs its configuration names
    "git": {"-C": "runs in another directory", "--git-dir": "uses another repository",
            "--work-tree": "uses another work tree"},
    "git *": {"--output": "writes a file", "--ext-diff": "runs an external diff program",
              "--no-index": "reads files outside the repository",
              "--textconv": "runs conversion programs"},
    "git branch": {**dict.fromkeys(("-d", "-D", "-m", "-M", "-c", "-C", "-f", "-u", "-t",
                                    "--unset-upstream", "--track"), "changes branches"),
                   "--edit-description": "opens an editor"},
    "git difftool": {"": "runs the configured diff tool"},
    "git mergetool": {"": "runs the configured merge tool"},
    "ssh": {"-E": "writes a log file"},
    "less": {"-o": "writes a file", "-O": "writes a file", "--log-file": "writes a file",
             "--LOG-FILE": "writes a file"},
    **{awk: {"-o": "writes a file", "-p": "writes a file", "-d": "writes a file"}  # gawk's
       for awk in ("awk", "gawk", "nawk", "original-awk")},
}
# Flags that make a program run code given on the command line, or read from a file it names:
# what runs is unknown, so no rule can vouch for the command (even full-auto asks). Grouped by
# family; values: what the person is told.
GIVEN_AS_TEXT = "can run a program given as text"
CONFIG_RUNS = "can run a program given as text (configuration: aliases, pagers, hooks)"
EDITOR_COMMANDS = "runs editor commands given on the command line or in a file"
OPAQUE_FLAGS: dict[str, dict[str, str]] = {
    # git: configuration, helpers and hooks named on the command line
    "git": {"-c": CONFIG_RUNS, "--config-env": CONFIG_RUNS,
            "--exec-path": "runs git's helper programs from the directory given"},
    "git *": {"--upload-pack": GIVEN_AS_TEXT, "--receive-pack": GIVEN_AS_TEXT,
              "--exec": GIVEN_AS_TEXT},
    "git clone": {"--config": CONFIG_RUNS, "--template": "installs hooks from the directory given",
                  "-u": GIVEN_AS_TEXT},
    "git init": {"--template": "installs hooks from the directory given"},
    "git rebase": {"--exec": "runs the command given after each commit"},
    "git difftool": {"--extcmd": "runs the diff command given"},
    "git grep": {"--open-files-in-pager": "runs the pager given"},
    "git send-email": {"--sendmail-cmd": GIVEN_AS_TEXT, "--smtp-server": GIVEN_AS_TEXT,
                       "--to-cmd": GIVEN_AS_TEXT, "--cc-cmd": GIVEN_AS_TEXT,
                       "--header-cmd": GIVEN_AS_TEXT},
    "git filter-branch": {"": "runs the shell filters given"},
    "git bisect": {"run": "runs the command given on every step"},
    "git submodule": {"foreach": "runs the command given in every submodule"},
    # archivers and sort: helper programs named on the command line
    "tar": {"--to-command": GIVEN_AS_TEXT, "--checkpoint-action": GIVEN_AS_TEXT,
            "-I": GIVEN_AS_TEXT, "-F": "runs the volume script given",
            "--rsh-command": GIVEN_AS_TEXT, "--rmt-command": GIVEN_AS_TEXT},
    "sort": {"--compress-program": GIVEN_AS_TEXT},
    "split": {"--filter": GIVEN_AS_TEXT},
    "sdiff": {"--diff-program": "runs the program given"},
    "diff3": {"--diff-program": "runs the program given"},
    **{fd: {"-x": "runs the command given for each result", "--exec": "runs the command given "
            "for each result", "-X": "runs the command given", "--exec-batch": "runs the "
            "command given"} for fd in ("fd", "fdfind")},
    "zip": {"-TT": GIVEN_AS_TEXT, "--unzip-command": GIVEN_AS_TEXT},
    # remote shells: the local programs they start
    "rsync": {"-e": GIVEN_AS_TEXT, "--rsh": GIVEN_AS_TEXT, "--rsync-path": GIVEN_AS_TEXT},
    "ssh": {"-F": "reads a configuration that can run commands (ProxyCommand, LocalCommand)",
            "-I": "loads the PKCS#11 library given"},
    "scp": {"-S": "uses the program given as ssh",
            "-F": "reads a configuration that can run commands (ProxyCommand, LocalCommand)"},
    "sftp": {"-S": "uses the program given as ssh", "-D": "runs the sftp server given",
             "-b": "runs a batch file, whose ! lines run local commands",
             "-F": "reads a configuration that can run commands (ProxyCommand, LocalCommand)"},
    # editors and pagers: commands given on the command line or in a file
    **{editor: {"-c": EDITOR_COMMANDS, "--cmd": EDITOR_COMMANDS, "-S": EDITOR_COMMANDS,
                "-s": EDITOR_COMMANDS, "-u": EDITOR_COMMANDS, "-U": EDITOR_COMMANDS,
                "-e": "reads editor commands from its input",
                "-E": "reads editor commands from its input",
                "-l": "runs the Lua script given", "--listen": "serves commands from others",
                "--remote": "sends commands to another editor",
                "--servername": "sends commands to another editor",
                "--remote-send": "sends commands to another editor",
                "--remote-expr": "sends commands to another editor"}
       for editor in ("vim", "vi", "nvim", "view", "vimdiff", "nvimdiff", "rvim", "rview",
                      "gvim", "gview", "evim", "vim.tiny", "vim.basic")},
    "ex": {"": "reads editor commands from its input"},
    "ed": {"": "reads editor commands from its input, whose ! runs a shell command"},
    "emacs": {"--eval": "evaluates the Lisp given", "-eval": "evaluates the Lisp given",
              "-l": "loads the Lisp file given", "--load": "loads the Lisp file given",
              "-f": "calls the Lisp function given", "--funcall": "calls the Lisp function given",
              "--script": "runs the Lisp file given", "-x": "runs the Lisp file given"},
    # shells whose language this module does not read
    **{shell: {"-c": GIVEN_AS_TEXT, "--command": GIVEN_AS_TEXT, "-C": GIVEN_AS_TEXT,
               "--init-command": GIVEN_AS_TEXT} for shell in ("fish", "csh", "tcsh")},
    "less": {"-k": "reads key bindings that can set commands (LESSOPEN)",
             "--lesskey-file": "reads key bindings that can set commands (LESSOPEN)",
             "--lesskey-src": "reads key bindings that can set commands (LESSOPEN)"},
    "man": {"-P": "uses the program given as its pager",
            "-H": "runs the browser given", "--html": "runs the browser given",
            "-C": "reads a configuration that names programs"},
    # downloaders: configuration files and commands
    "curl": {"-K": "reads options from the file given"},
    "wget": {"-e": "runs the .wgetrc commands given", "--config": "reads a .wgetrc file",
             "--use-askpass": GIVEN_AS_TEXT},
    # build tools and interpreters told to run a file or text
    "make": {"-E": "evaluates the makefile text given"},
    "sed": {"-f": "runs the sed script in the file given, whose e runs commands"},
    **{awk: {"-f": "runs the awk program in the file given", "--file": "runs the awk program "
             "in the file given", "-E": "runs the awk program in the file given",
             "--exec": "runs the awk program in the file given",
             "-i": "includes the awk source file given", "--include": "includes the awk "
             "source file given", "-l": "loads the extension library given",
             "--load": "loads the extension library given",
             "-D": "runs debugger commands, which evaluate awk code, from a file or its input"}
       for awk in AWK_NAMES},
}
# Long spellings that mean the same as a short flag, for matching rules (`rm --force -r`), for
# programs the option tables do not have.
FLAG_ALIASES: dict[str, dict[str, str]] = {
    "rm": {"--recursive": "-r", "-R": "-r", "--force": "-f"},
    "cp": {"--recursive": "-r", "-R": "-r", "--force": "-f"},
    "chmod": {"--recursive": "-R"},
    "chown": {"--recursive": "-R"},
    "git": {"--force": "-f"},
}
NO_CLUSTERS = frozenset({"find", "java", "gcc", "g++", "clang", "go", "tar"})  # `-exec` is one flag
# ssh's -o keywords that run a local program or load code (compared without case).
SSH_RUNS = frozenset({"proxycommand", "localcommand", "permitlocalcommand", "knownhostscommand",
                      "match", "include", "pkcs11provider", "securitykeyprovider",
                      "xauthlocation", "proxyjump", "controlpath", "controlmaster"})

# Environment variables that make a program run something (or load code, or read the
# configuration that does): assigning one makes the command opaque, like `git -c`. Grouped by
# family; a name ending in `*` is a prefix. From each program's documentation: git(1)
# ENVIRONMENT VARIABLES and git-config(1) ENVIRONMENT, less(1), man(1), bash(1), ld.so(8),
# python(1), node(1), perlrun(1), ruby(1), ssh(1), tar(1) TAR_OPTIONS, rg(1), make(1).
ENV_RUNS: dict[str, tuple[str, ...]] = {
    "git": ("GIT_*",),  # all but the harmless ones below: config, pager, editor, ssh, hooks...
    "pagers and man": ("PAGER", "MANPAGER", "MANOPT", "MANROFFOPT", "MAN_DISABLE_SECCOMP",
                       "BROWSER", "LESS", "MORE", "LESSOPEN", "LESSCLOSE", "LESSKEY",
                       "LESSKEYIN", "LESSKEY_SYSTEM", "LESSKEYIN_SYSTEM", "LESSEDIT",
                       "LESSSHELL", "LESSMETACHARS", "LESSMETAESCAPE", "SYSTEMD_PAGER",
                       "SYSTEMD_LESS", "BAT_PAGER", "GH_PAGER", "DELTA_PAGER"),
    "editors": ("EDITOR", "VISUAL", "FCEDIT", "SUDO_EDITOR", "SYSTEMD_EDITOR",
                "SELECTED_EDITOR", "VIMINIT", "EXINIT", "MYVIMRC", "VIMRUNTIME", "VIM",
                "NVIM_APPNAME"),
    "password helpers": ("SSH_ASKPASS", "SSH_ASKPASS_REQUIRE", "SUDO_ASKPASS"),
    "shells": ("BASH_FUNC_*", "BASH_ENV", "ENV", "PROMPT_COMMAND", "PS0", "PS1", "PS2", "PS3",
               "PS4", "SHELLOPTS", "BASHOPTS", "BASH_LOADABLES_PATH", "SHELL", "ZDOTDIR", "PATH",
               "HOME", "XDG_CONFIG_HOME", "XDG_CONFIG_DIRS", "XDG_DATA_HOME", "XDG_DATA_DIRS"),
    "the dynamic loader": ("LD_*", "GCONV_PATH"),
    "interpreters": ("PYTHONSTARTUP", "PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE",
                     "PYTHONWARNINGS", "PYTHONBREAKPOINT", "PYTHONINSPECT", "PYTHONEXECUTABLE",
                     "PYTHONPLATLIBDIR", "NODE_OPTIONS", "NODE_PATH", "NODE_REPL_EXTERNAL_MODULE",
                     "NPM_CONFIG_*", "PERL5OPT", "PERL5LIB", "PERLLIB", "PERL5DB", "RUBYOPT",
                     "RUBYLIB", "RUBYSHELL", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS",
                     "JDK_JAVA_OPTIONS", "CLASSPATH", "DOTNET_STARTUP_HOOKS", "GOFLAGS",
                     "RUSTC_WRAPPER", "RUSTC", "CARGO_BUILD_RUSTC_WRAPPER"),
    "build tools": ("MAKEFLAGS", "MAKEFILES", "GNUMAKEFLAGS", "CC", "CXX", "CPP", "LD", "AR",
                    "CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS"),
    "tools reading options from the environment": (
        "TAR_OPTIONS", "GREP_OPTIONS", "RIPGREP_CONFIG_PATH", "GZIP", "ZIPOPT", "UNZIP",
        "CURL_HOME", "WGETRC", "SYSTEM_WGETRC", "RSYNC_RSH", "RSYNC_CONNECT_PROG"),
}
GIT_ENV_HARMLESS = frozenset({
    "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE", "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL", "GIT_COMMITTER_DATE", "GIT_TERMINAL_PROMPT", "GIT_OPTIONAL_LOCKS",
    "GIT_FLUSH", "GIT_MERGE_AUTOEDIT", "GIT_MERGE_VERBOSITY", "GIT_LITERAL_PATHSPECS",
    "GIT_GLOB_PATHSPECS", "GIT_NOGLOB_PATHSPECS", "GIT_ICASE_PATHSPECS",
    "GIT_NO_REPLACE_OBJECTS", "GIT_ADVICE", "GIT_DEFAULT_HASH", "GIT_PROGRESS_DELAY",
    "GIT_CONFIG_NOSYSTEM", "GIT_ATTR_NOSYSTEM", "GIT_REDACT_COOKIES",
})
# fmt: on
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ENV_EXACT = {n: f for f, names in ENV_RUNS.items() for n in names if not n.endswith("*")}
_ENV_PREFIX = tuple((n[:-1], f) for f, names in ENV_RUNS.items() for n in names if n.endswith("*"))


def env_runs(name: str) -> str | None:
    """Why setting the variable `name` can make a program run something, if it can. A name
    that is no shell identifier (`A.B`, `BASH_FUNC_ls%%`: bash imports that as a function)
    counts: only env and sudo pass it, and nothing ordinary needs one."""
    if not _IDENTIFIER.fullmatch(name):
        return (
            f"sets {name!r}, which is not a variable name (bash reads BASH_FUNC_NAME%% "
            "as a function)"
        )
    upper = name.upper() if name.upper().startswith("NPM_CONFIG_") else name
    if upper in GIT_ENV_HARMLESS:
        return None
    family = _ENV_EXACT.get(upper) or next(
        (f for prefix, f in _ENV_PREFIX if upper.startswith(prefix)), None
    )
    return f"sets {name}, which can make {family} run a program" if family else None


SYSTEM_BIN = ("/bin/", "/sbin/", "/usr/bin/", "/usr/sbin/", "/usr/local/bin/", "/usr/local/sbin/")


def program_name(word: str) -> str:
    """How a rule names a program: `/usr/bin/curl` is `curl`; `./run.sh` stays `./run.sh`, so a
    rule for `run.sh` (or for `cat`) does not cover a script the workspace itself provides."""
    if "/" not in word:
        return word
    normal = _norm_path(word)
    if os.path.dirname(normal) + "/" in SYSTEM_BIN:
        return os.path.basename(normal)
    return normal if normal.startswith(("/", "./", "../")) else "./" + normal


@dataclass(frozen=True)
class Word:
    text: str  # after quote removal; the source text when not static
    static: bool = True  # no expansion or substitution: the shell passes exactly `text`
    glob: bool = False  # unquoted *, ? or [: the shell replaces it with matching paths


@dataclass(frozen=True)
class SimpleCommand:
    """One program the command line runs."""

    words: tuple[str, ...]  # as it will run: the program's name (no directory), then arguments
    layers: tuple[tuple[str, ...], ...]  # each wrapper level, outermost first (`sudo rm x`, ...)
    args: tuple[Word, ...]  # the arguments of `words`, with what is known of each
    source: str  # its text in the command line
    risks: tuple[str, ...] = ()
    known: bool = True  # False: the program cannot be known before it runs
    values: tuple[Word, ...] = ()  # its options' values (`-f/abs`, `--file=x`): paths to check
    operands: tuple[Word, ...] | None = None  # not options; None: every argument is checked

    @property
    def program(self) -> str:
        return self.words[0] if self.words else ""

    def shown(self) -> str:
        return " ".join(_quote(w) for w in self.words) if self.known else self.source


@dataclass
class Analysis:
    source: str
    commands: list[SimpleCommand] = field(default_factory=list)
    risks: list[str] = field(default_factory=list)  # of the line as a whole
    opaque: bool = False  # something runs that no rule can vouch for
    evaluates: list[str] = field(default_factory=list)  # why: what bash evaluates from data

    @property
    def all_risks(self) -> list[str]:
        return list(dict.fromkeys([*self.risks, *(r for c in self.commands for r in c.risks)]))


def _quote(word: str) -> str:
    return word if word and re.fullmatch(r"[\w@%+=:,./\-]+", word) else repr(word)


# ---------------------------------------------------------------- words
_ANSI_C = re.compile(
    r"\\(x[0-9a-fA-F]{1,2}|u[0-9a-fA-F]{1,4}|U[0-9a-fA-F]{1,8}|[0-7]{1,3}|.)", re.DOTALL
)
_ANSI_SIMPLE = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}


def _ansi_c(body: str) -> str | None:
    def one(m: re.Match[str]) -> str:
        esc = m.group(1)
        if esc in _ANSI_SIMPLE:
            return _ANSI_SIMPLE[esc]
        if esc[0] in "xuU":
            return chr(min(int(esc[1:], 16), 0x10FFFF))
        if esc[0] in "01234567":
            return chr(int(esc, 8))
        raise ValueError(esc)

    try:
        return _ANSI_C.sub(one, body)
    except ValueError:
        return None


def _unescape_word(raw: str) -> tuple[str, bool]:
    """Quote removal of an unquoted word; also whether it holds an unescaped glob character."""
    out, glob, i = [], False, 0
    while i < len(raw):
        ch = raw[i]
        if ch == "\\" and i + 1 < len(raw):
            if raw[i + 1] != "\n":
                out.append(raw[i + 1])
            i += 2
            continue
        if ch in "*?[":
            glob = True
        out.append(ch)
        i += 1
    return "".join(out), glob


_BRACES = re.compile(r"(?<!\\)\{[^{}]*(,|\.\.)[^{}]*\}")


def _word(node: tree_sitter.Node) -> Word:
    text = _text(node)
    kind = node.type
    if kind == "word":
        value, glob = _unescape_word(text)
        return Word(value, static=not _BRACES.search(text), glob=glob)
    if kind in ("number", "variable_name"):
        return Word(text)
    if kind == "raw_string":
        return Word(text[1:-1])
    if kind == "ansi_c_string":
        decoded = _ansi_c(text[2:-1])
        return Word(text, static=False) if decoded is None else Word(decoded)
    if kind == "string":
        parts, static = [], True
        for child in node.named_children:
            if child.type == "string_content":
                parts.append(
                    re.sub(r'\\([$`"\\\n])', lambda m: "" if m[1] == "\n" else m[1], _text(child))
                )
            else:
                static = False
                parts.append(_text(child))
        return Word("".join(parts), static=static) if static else Word(text, static=False)
    if kind == "concatenation":
        pieces = [_word(c) for c in node.named_children]
        if _BRACES.search(text):  # a brace expansion: {a,b} or {1..3}
            return Word(text, static=False)
        if all(p.static for p in pieces):
            return Word("".join(p.text for p in pieces), glob=any(p.glob for p in pieces))
        return Word(text, static=False)
    return Word(text, static=False)  # expansions, substitutions and anything unmodelled


def _text(node: tree_sitter.Node) -> str:
    return (node.text or b"").decode("utf-8", errors="replace")


# ------------------------------------------------------------- wrappers
@dataclass(frozen=True)
class Runner:
    """A program that runs another one named after its own options (`nice -n 5 make`)."""

    takes: frozenset[str] = frozenset()  # options followed by a value, when it has no table
    before: int = 0  # words between its options and the program (a duration, a lock file)
    body: frozenset[str] = frozenset()  # options whose value is a command line (`su -c`)
    runs_rest: bool = True  # False: it runs only what a body option gives (`script -c`)
    joins: bool = False  # the rest is one command line, joined by spaces (`watch`)
    assigns: bool = False  # `NAME=VALUE` words before the program set its environment
    split: bool = False  # a body is split into words, not run by a shell (`env -S`)
    bare_before: bool = False  # the `before` words come only when no option precedes them
    permutes: bool = False  # options anywhere (`su root -c CMD`), as getopt_long reads them


def _r(takes: str = "", before: int = 0, body: str = "", **kw: bool) -> Runner:
    return Runner(frozenset(takes.split()), before, frozenset(body.split()), **kw)


# fmt: off
RUNNERS: dict[str, Runner] = {
    "env": _r(body="-S --split-string", assigns=True, split=True),
    "command": _r(), "builtin": _r(), "exec": _r("-a"), "nohup": _r(), "setsid": _r(),
    "time": _r("-f --format -o --output"), "nice": _r(),
    "timeout": _r(before=1), "stdbuf": _r(), "ionice": _r(), "chrt": _r(before=1),
    "taskset": _r(before=1), "flock": _r(before=1, body="-c --command"), "setpriv": _r(),
    "unshare": _r(), "nsenter": _r(), "chroot": _r(before=1),
    "sudo": _r("-u -g -C -h -p -U -r -t -T -D --user --group --host --prompt --chdir",
               assigns=True),
    "doas": _r("-u -C"), "pkexec": _r("--user"),
    # `su [options] [user [args]]`: the args go to the shell; runuser too, but `runuser -u USER
    # CMD` runs CMD. Both permute: `su root -c CMD`.
    "runuser": _r(body="-c --command", permutes=True),
    "su": _r(body="-c --command", runs_rest=False, permutes=True),
    "sg": _r(before=1, body="-c", joins=True),  # `sg [-] GROUP [-c] CMD`: sh -c CMD
    "script": _r(body="-c --command", runs_rest=False, permutes=True), "watch": _r(joins=True),
    "strace": _r(), "ltrace": _r("-e -o -p -s -u -a -n"), "valgrind": _r(), "catchsegv": _r(),
    "xvfb-run": _r("-n -s -e -f -p --server-num --server-args --error-file --auth-file"),
    "dbus-run-session": _r("--config-file --dbus-daemon"), "systemd-run": _r(),
    "firejail": _r("--env"), "proxychains": _r("-f"), "proxychains4": _r("-f"),
    "torsocks": _r("-u -p -a -P"), "cgexec": _r("-g"), "busybox": _r(), "xargs": _r(),
    # util-linux's setarch (`setarch [ARCH] [options] program`) and its per-architecture names
    "setarch": _r(before=1, bare_before=True),
    **{arch: _r() for arch in ("linux32", "linux64", "i386", "x86_64", "uname26")},
    "prlimit": _r(), "runcon": _r(before=1, bare_before=True),  # `runcon CONTEXT program`
    "fakeroot": _r("-l --lib -f --faked -i -s -b --fd-base"), "eatmydata": _r(),
    "nocache": _r(), "torify": _r(), "tsocks": _r(), "unbuffer": _r(),
    "sshpass": _r("-p -f -d -P"),
}
# Programs that run another program (or commands given as text, or read from their input) in
# ways this module does not read: what runs is unknown, so the command is opaque.
UNREAD_RUNNERS = frozenset({
    "gdb", "lldb", "perf", "bwrap", "proot", "schroot", "nsjail", "systemd-nspawn",
    "machinectl", "flatpak-spawn", "numactl", "parallel", "hyperfine", "entr", "watchexec",
    "expect", "at", "batch", "chpst", "trickle", "fakechroot", "faketime", "tmux", "screen",
})
ENV_OPTIONS = frozenset({"-E", "--env", "--setenv"})  # strace, systemd-run, firejail: NAME=VALUE
# fmt: on


@functools.cache
def _runner_spec(program: str) -> tuple[options.Spec, bool]:
    """A runner's options: its table, or (no table) one made of the options RUNNERS says take
    a value. The second: whether an option the table does not know is a plain flag (a made
    table: it knows only the options with values) rather than unreadable."""
    sp = options.spec(program)
    if sp is not None:
        return sp, False
    runner = RUNNERS[program]
    made = [[name, options.REQUIRED] for name in sorted(runner.takes | runner.body)]
    return options.Spec(program, {"style": "stop", "options": made}), True


def _env_words(text: str) -> list[Word] | None:
    """`env -S TEXT` as env splits it (quotes and spaces, no shell); None for what it would
    expand or unescape (`${VAR}`, `\\c`, a `#` comment), which is known only when it runs."""
    if re.search(r"[\\$#]", text):
        return None
    try:
        return [Word(w) for w in shlex.split(text)]
    except ValueError:
        return None


@dataclass
class _Unwrapped:
    layers: list[list[Word]]
    risks: list[str] = field(default_factory=list)
    known: bool = True
    bodies: list[Word] = field(default_factory=list)  # command lines run by a shell
    values: list[Word] = field(default_factory=list)  # the runners' option values: paths


def _unwrap(words: list[Word]) -> _Unwrapped:
    """Each layer of runners down to the program that runs; risks; whether the program is
    known; command lines given to runners as text (`flock -c`, `watch`), which the caller
    analyses in turn. A runner's options are read as it reads them (`options.read`: `nice --adj
    5 x`, `env --split=...`); one it does not know leaves the program unknown, since where the
    program starts depends on it. `env -S` is split into words in place, as env does."""
    out = _Unwrapped([words])
    splices, appends = 0, False
    while words and words[0].static:
        program = os.path.basename(words[0].text)  # a runner anywhere is still a runner
        runner = RUNNERS.get(program)
        if runner is None:
            break
        if program == "command" and any(w.text in ("-v", "-V") for w in words[1:2]):
            break  # `command -v x` looks x up; it does not run it
        i, spliced = _runner_options(program, runner, words, 1, out)
        if spliced is not None:
            splices += 1
            if splices > MAX_DEPTH:
                out.risks.append("env -S nested too deeply")
                out.known = False
                break
            words = spliced
            out.layers[-1] = words
            continue
        if runner.assigns:
            i = _assignments(program, words, i, out)
        if program == "sg" and i < len(words) and words[i].text == "-":
            i += 1  # `sg - GROUP`: a login environment, then the group
        if runner.before and i < len(words) and not (runner.bare_before and i > 1):
            out.values += words[i : i + runner.before]  # `flock FILE`, `chroot DIR`
            i += runner.before
            if i < len(words):  # `flock FILE -c CMD`, `setarch x86_64 -R CMD`
                given = len(out.bodies)
                i = _runner_options(program, runner, words, i, out)[0]
                if len(out.bodies) > given:
                    i = len(words)
        if program == "xargs":
            out.risks.append("xargs runs a command with arguments read from its input")
            out.known = out.known and i < len(words)
            appends, words = True, _xargs_replaced(words, i)
        rest = words[i:]
        if runner.joins and rest:
            out.bodies.append(Word(" ".join(w.text for w in rest), all(w.static for w in rest)))
            rest = []
        if not runner.runs_rest or not rest:
            if not out.bodies:
                out.layers.append([])
                if appends and runner.runs_rest:  # `xargs env`: its input names the program
                    out.risks.append(f"{program} runs a program named by xargs's input")
                    out.known = False
            break
        words = rest
        out.layers.append(words)
    return out


def _xargs_replaced(words: list[Word], i: int) -> list[Word]:
    """`xargs -I{} sh -c 'x {}'`: every word from `words[i]` holding the replace string (`-I
    R`, `-i`/`--replace` for `{}`) is input data, known only when it runs."""
    sp, _ = _runner_spec("xargs")
    marks = []
    texts = [_option_text(w) for w in words[1:i]]
    for g in options.read(sp, texts, stop=True).given:
        if g.names & {"-I"} and g.value:
            marks.append(g.value)
        elif g.names & {"-i", "--replace"}:  # `-i[R]`: R attached, if any
            cluster = texts[g.index]
            attached = "" if cluster.startswith("--") else cluster[cluster.index("i", 1) + 1 :]
            marks.append(g.value or attached or "{}")
    return [
        *words[:i],
        *(Word(w.text, static=False) if any(m in w.text for m in marks) else w for w in words[i:]),
    ]


def _runner_options(
    program: str, runner: Runner, words: list[Word], start: int, out: _Unwrapped
) -> tuple[int, list[Word] | None]:
    """The runner's options from `words[start]`, read with its table: where they end, and for
    `env -S`, the words with the split text in its place. Command lines its options give
    (`su -c`) go to `out.bodies`."""
    sp, lenient = _runner_spec(program)
    args = words[start:]
    texts = [_option_text(w) for w in args]
    reading = options.read(sp, texts, stop=not runner.permutes)
    if runner.permutes and program == "runuser" and any("-u" in g.names for g in reading.given):
        reading = options.read(sp, texts, stop=True)  # `runuser -u USER CMD`: CMD runs
    elif runner.permutes:
        reading.end = len(args)  # what is not an option goes to the shell, as its arguments
    if any(_unknown_start(w) for w in args[: reading.end]):
        out.known = False
    for g in reading.given:
        if len(g.options) != 1 and not (lenient and not g.options):
            out.risks.append(
                f"{program} {g.spelled} is an option Talos cannot read, so what it runs is unknown"
            )
            out.known = False
            continue
        value = _given_value(g, args)
        if program in ("su", "runuser") and g.names & {"-s", "--shell"}:
            out.risks.append(f"{program} -s runs the program given as the shell")
            out.known = False
        if not (g.names & runner.body) or value is None:
            if value is not None:
                out.values.append(value)  # a file it reads or writes (`strace -o`), to check
        elif runner.split:
            split = _env_words(value.text) if value.static else None
            if split is None:
                out.risks.append(f"{program} {g.spelled} splits text known only when it runs")
                out.known = False
                continue
            after = (g.value_index if g.value_index is not None else g.index) + 1
            cluster = args[g.index].text  # `-iS'...'`: the letters before S stay options
            cut = 0 if cluster.startswith("--") else cluster.index(g.spelled[1])
            keep = [Word(cluster[:cut])] if cut > 1 else []
            return start + reading.end, [*words[: start + g.index], *keep, *split, *args[after:]]
        else:
            out.bodies.append(value)
        if program == "env" and g.names & {"-C", "--chdir"}:
            out.risks.append("env -C runs in another directory")
        if g.names & ENV_OPTIONS and value is not None:  # strace, systemd-run, firejail
            why = (
                env_runs(value.text.split("=", 1)[0])
                if value.static
                else (f"{program} sets an environment variable known only when it runs")
            )
            if why:
                out.risks.append(why)
                out.known = False
    return start + reading.end, None


def _assignments(program: str, words: list[Word], i: int, out: _Unwrapped) -> int:
    """`env A=1 B.C=2 cmd`, `sudo A=1 cmd`: every word holding `=` before the program is an
    assignment (GNU env and sudo take any, not only a shell identifier). One that makes a
    program run something, or whose name is not an identifier (`BASH_FUNC_ls%%` defines a
    bash function), makes the command opaque."""
    assigned = 0
    while i < len(words) and "=" in words[i].text:
        if not words[i].static:
            out.risks.append(f"{program} sets an environment variable known only when it runs")
            out.known = False
        elif why := env_runs(words[i].text.split("=", 1)[0]):
            out.risks.append(why)
            out.known = False
        i, assigned = i + 1, assigned + 1
    if assigned:
        out.risks.append("sets environment variables for the command")
    return i


# ------------------------------------------------------ what bash evaluates
# Variables whose value is data from outside the command's text: evaluating one as arithmetic
# (or as a name) can run a `$(...)` hidden in an array index inside it.
# fmt: off
DATA_VARIABLES = frozenset({"_", "REPLY", "OPTARG", "BASH_REMATCH", "MAPFILE", "PWD", "OLDPWD",
                            "BASH_ARGV", "BASH_COMMAND", "BASH_EXECUTION_STRING", "COMP_LINE",
                            "COMP_WORDS", "READLINE_LINE", "@", "*", "0", "1", "2", "3", "4",
                            "5", "6", "7", "8", "9"})
_INDEX_RUNS = "bash evaluates its array index, running any $(...) in it"
# Builtins that take a variable NAME (an array element's index in it is evaluated): for each,
# its options that take a value, and those whose value is a name.
NAME_BUILTINS: dict[str, tuple[str, str]] = {
    "read": ("dinNptu", "a"),
    "mapfile": ("dnOsuc", ""), "readarray": ("dnOsuc", ""),
    "printf": ("", "v"),
    "wait": ("", "p"),
    "getopts": ("", ""),
    "unset": ("", ""),
    "test": ("", "vR"), "[": ("", "vR"),
    "export": ("", ""), "declare": ("", ""), "typeset": ("", ""), "local": ("", ""),
    "readonly": ("", ""),
}
# Builtin options that run code given as text, or load it.
BUILTIN_RUNS: dict[str, dict[str, str]] = {
    "mapfile": {"-C": "runs the callback given"}, "readarray": {"-C": "runs the callback given"},
    "compgen": {"-C": "runs the command given", "-F": "runs the function given",
                "-W": "expands the word list given, running its $(...)"},
    "complete": {"-C": "runs the command given", "-F": "runs the function given"},
    "bind": {"-x": "binds a key to a command"},
    "enable": {"-f": "loads a shared library into the shell"},
    "hash": {"-p": "makes a name run the program given"},
    "declare": {"-n": "makes a name refer to another variable"},
    "typeset": {"-n": "makes a name refer to another variable"},
    "local": {"-n": "makes a name refer to another variable"},
}
# fmt: on


@functools.cache
def _builtin_spec(program: str) -> options.Spec:
    """A builtin's options that take a value (`NAME_BUILTINS`), as bash's own getopt reads
    them: clustered (`read -ra NAME`), ending at the first operand."""
    taking = [[f"-{c}", options.REQUIRED] for c in "".join(NAME_BUILTINS[program])]
    return options.Spec(program, {"style": "stop", "options": taking})


def _name_problem(word: Word) -> str | None:
    """Why a variable NAME given to a builtin (`read NAME`, `printf -v NAME`) could run
    something: known only when it runs, an array index holding `$`, or a variable that makes
    programs run others."""
    if not word.static:
        return "takes a variable name known only when it runs"
    name = word.text
    head = re.split(r"[\[=+]", name, maxsplit=1)[0]
    if "[" in name and re.search(r"[$`]", name.split("[", 1)[1]):
        return f"takes the name {name!r}: {_INDEX_RUNS}"
    return env_runs(head)


# Outside quotes: an escaped character (text; a backslash-newline is a line continuation), or
# what bash expands that can run code.
_EXPANDS = re.compile(rb"\\[\s\S]|\$[({\[]|`")
# `${NAME}`, `${#NAME}`, `${NAME:-text}`, `${NAME%pattern}`...: no index, indirection,
# operator or substitution, so nothing in it runs.
_PLAIN_BRACES = re.compile(
    rb"\$\{#?[A-Za-z_][A-Za-z0-9_]*(?:(?::?[-=+?]|##?|%%?|\^\^?|,,?)[^}$`\[\]\\\"'(){}]*)?\}"
)
# Nodes whose text bash does not expand: single quotes, `$'...'`, comments.
_LITERAL = frozenset({"raw_string", "ansi_c_string", "comment"})


def _quoted_delimiter(node: tree_sitter.Node) -> bool:
    start = next((c for c in node.children if c.type == "heredoc_start"), None)
    return start is None or bool(re.search(r"['\"\\]", _text(start)))


# -------------------------------------------------------------- analysis
class _Analyzer:
    def __init__(self, source: str, depth: int) -> None:
        self.result = Analysis(source)
        self.source = source.encode("utf-8", errors="surrogatepass")  # what the tree indexes
        self.depth = depth
        self.tainted: set[str] = set()  # variables given data (read, a $(...), an index)
        self.arith_refs: dict[str, str] = {}  # variables evaluated as arithmetic -> where
        self.integers: set[str] = set()  # `declare -i` seen
        self.parsed: set[int] = set()  # where the grammar found substitutions and expansions
        self.literal: list[tuple[int, int]] = []  # byte ranges bash does not expand
        self.quoted: list[tuple[int, int]] = []  # double quotes, here-documents: one word

    def risk(self, text: str) -> None:
        if text not in self.result.risks:
            self.result.risks.append(text)

    def visit(self, node: tree_sitter.Node) -> None:
        kind = node.type
        if node.is_missing or kind == "ERROR":
            self.risk("the shell syntax could not be fully parsed")
            self.result.opaque = True
        if kind == "command":
            self.command(node)
            return
        if kind in _REDIRECTS:
            self.redirect(node)
            return
        if kind == "variable_assignment":
            self.risk("assigns a shell variable")
        elif kind not in _STRUCTURE and kind not in _DYNAMIC and kind != "ERROR" and node.is_named:
            self.risk(f"uses a construct that needs review ({kind.replace('_', ' ')})")
            self.inside(node)
            return
        for child in node.children:
            self.visit(child)

    def inside(self, node: tree_sitter.Node) -> None:
        """The commands, redirections and substitutions inside an unmodelled construct (a
        loop, a function): a deny rule must still see them."""
        for child in node.children:
            if child.type in ("command", "ERROR", *_REDIRECTS, *_STRUCTURE, *_DYNAMIC):
                self.visit(child)
            else:
                self.inside(child)

    def redirect(self, node: tree_sitter.Node) -> None:
        if node.type != "file_redirect":
            self.risk("uses a here-document or here-string")
        else:
            operator = next((_text(c) for c in node.children if not c.is_named), "")
            dest = node.child_by_field_name("destination")
            target = _word(dest) if dest is not None else Word("", static=False)
            harmless = (
                (operator in (">&", "<&") and target.text.isdigit())
                or target.text == "-"
                or (target.static and target.text == "/dev/null" and "<" not in operator)
            )
            if not harmless:
                what = "reads input from" if operator.startswith("<") else "writes output to"
                self.risk(f"{what} a file ({_text(node)})")
        quoted = node.type == "heredoc_redirect" and _quoted_delimiter(node)
        for child in node.children:  # substitutions in the target, the here-string, the body
            if child.type == "heredoc_body" and quoted:
                continue  # `<<'EOF'`: the body is text
            if node.type == "heredoc_redirect" and child.type not in _HEREDOC_PARTS:
                self.visit(child)  # `cat <<EOF | sudo x`: the grammar puts the rest inside
                continue
            for sub in _substitutions(child):
                self.visit(sub)

    # ------------------------------------------------ what bash evaluates
    def opaque(self, why: str) -> None:
        self.risk(why)
        if why not in self.result.evaluates:
            self.result.evaluates.append(why)
        self.result.opaque = True

    def evaluations(self, root: tree_sitter.Node) -> None:
        """Every place bash evaluates text as code besides commands: arithmetic (`$(( ))`,
        `(( ))`, `let`, `[[ -eq ]]`, array indexes, substring offsets), names it expands
        (`${!x}`, `[[ -v NAME ]]`), prompt expansion (`${x@P}`), backticks in here-document
        bodies, assignments of variables that make programs run others. What it cannot tell
        is harmless makes the command opaque."""
        stack = [root]
        while stack:
            node = stack.pop()
            kind = node.type
            children = list(node.children)
            if kind in _DYNAMIC:
                self.parsed.add(node.start_byte)
                if kind == "command_substitution" and self.source[node.start_byte] == 0x60:
                    self.backticks(node)
            if kind in _LITERAL:
                self.literal.append((node.start_byte, node.end_byte))
            elif kind in ("string", "heredoc_body"):
                self.quoted.append((node.start_byte, node.end_byte))
            if kind == "heredoc_redirect":
                self.heredoc(node)
                if _quoted_delimiter(node):
                    children = [c for c in children if c.type != "heredoc_body"]
            elif kind == "expansion":
                self.expansion(node)
            elif kind == "arithmetic_expansion":
                self.arithmetic(node, "$((...))")
            elif kind == "compound_statement" and children and _text(children[0]) == "((":
                self.arithmetic(node, "((...))")
            elif kind == "c_style_for_statement":
                for child in children:
                    if child.is_named and child.type not in ("do_group", "compound_statement"):
                        self.arithmetic(child, "for ((...))")
            elif kind == "test_command":
                self.test(node)
            elif kind == "variable_assignment":
                self.assignment(node)
            elif kind == "declaration_command":
                self.declaration(node)
            elif kind == "unset_command":
                for child in node.named_children:
                    word = _word(child)
                    if not word.text.startswith("-") and (
                        not word.static or ("[" in word.text and re.search(r"[$`]", word.text))
                    ):
                        self.opaque(f"unset {_name_problem(word) or 'takes a name'}")
            elif kind in ("for_statement", "select_statement"):
                self.loop_variable(node)
            stack.extend(reversed(children))

    def heredoc(self, node: tree_sitter.Node) -> None:
        """A here-document: its body is text bash expands (unless the delimiter is quoted),
        which `unparsed` checks like the rest of the line. A body whose end bash would see
        elsewhere than the grammar did makes the command opaque: what follows is not read."""
        body = next((c for c in node.children if c.type == "heredoc_body"), None)
        end = next((c for c in node.children if c.type == "heredoc_end"), None)
        start = next((c for c in node.children if c.type == "heredoc_start"), None)
        if body is None or start is None:
            return
        first = self.source.rfind(b"\n", 0, body.start_byte) + 1  # the grammar skips indents
        stop = end.start_byte if end is not None else body.end_byte
        if _quoted_delimiter(node):
            self.literal.append((first, stop))
        delimiter = re.sub(rb"[\"'\\]", b"", start.text or b"")
        tabs = any(_text(c) == "<<-" for c in node.children)
        lines = self.source[first:stop].split(b"\n")
        ended = end is not None and self._line_of(end).lstrip(b"\t" if tabs else b"") == delimiter
        if not ended or any((ln.lstrip(b"\t") if tabs else ln) == delimiter for ln in lines[:-1]):
            self.opaque(
                "a here-document ends where Talos cannot tell, so what follows it is not read"
            )

    def backticks(self, node: tree_sitter.Node) -> None:
        """`` `...` ``: its closing backtick is parsed too. Inside, bash unescapes `\\``
        and `\\$` before running the text, so they start nested substitutions the grammar
        reads as plain characters: opaque."""
        self.parsed.add(node.end_byte - 1)
        if re.search(rb"\\[`$]", self.source[node.start_byte + 1 : node.end_byte - 1]):
            self.opaque(
                "a substitution in backticks holds another (\\` or \\$), which Talos cannot read"
            )

    def unparsed(self) -> None:
        """Text bash will expand that the grammar did not parse as a substitution or an
        expansion (tree-sitter drops `$(...)` after a here-document line's indent, a
        backtick inside `${x:-...}`), or a line continuation inside a word, which bash joins
        and the grammar splits (`su\\<newline>do`): opaque. Single-quoted text, comments and
        quoted here-documents are text; an escaped character is text."""
        spans = sorted(self.literal)
        at = 0
        for start, end in [*spans, (len(self.source), len(self.source))]:
            for m in _EXPANDS.finditer(self.source, at, max(at, start)):
                text = m.group()
                if text == b"\\\n":
                    before = self.source[m.start() - 1 : m.start()]
                    after = self.source[m.end() : m.end() + 1]
                    quoted = any(a <= m.start() < b for a, b in self.quoted)
                    if before.strip() and after.strip() and (before == b"$" or not quoted):
                        self.opaque(
                            "a line continuation inside a word, which bash joins "
                            "and Talos would read as two"
                        )
                        return
                elif (
                    text == b"${"
                    and m.start() not in self.parsed
                    and _PLAIN_BRACES.match(self.source, m.start())
                ):
                    continue  # `${NAME}`, `${NAME:-text}`: a value, nothing runs
                elif not text.startswith(b"\\") and m.start() not in self.parsed:
                    self.opaque(
                        "bash expands a `$(...)`, `${...}` or backtick here that Talos cannot read"
                    )
                    return
            at = max(at, end)

    def _line_of(self, node: tree_sitter.Node) -> bytes:
        """The whole line a node is on, without its newline."""
        start = self.source.rfind(b"\n", 0, node.start_byte) + 1
        end = self.source.find(b"\n", node.start_byte)
        return self.source[start : end if end >= 0 else len(self.source)]

    def arithmetic(self, node: tree_sitter.Node, what: str) -> None:
        """Arithmetic bash will evaluate: the variables it reads (checked at the end: one
        holding data is evaluated too), and a command's output or quoted text in it."""
        stack = [node]
        while stack:
            n = stack.pop()
            kind = n.type
            if kind in ("command_substitution", "process_substitution"):
                self.opaque(
                    f"evaluates a command's output as arithmetic ({what}), and {_INDEX_RUNS}"
                )
                continue
            if kind in ("raw_string", "ansi_c_string"):
                self.arith_text(_word(n).text, what)
                continue
            if kind == "string_content":
                self.arith_text(_text(n), what)
                continue
            if kind in ("variable_name", "special_variable_name"):
                self.arith_refs.setdefault(_text(n), what)
            elif kind == "word" and not n.named_children:
                self.arith_text(_text(n), what)
            stack.extend(n.children)

    def arith_text(self, text: str, what: str) -> None:
        """Arithmetic given as text (`let 'x=y+1'`, a quoted `[[ ... -eq ... ]]` operand)."""
        if re.search(r"[$`]", text):
            self.opaque(f"evaluates text holding $ or ` as arithmetic ({what}), and {_INDEX_RUNS}")
            return
        for name in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", re.sub(r"\b[0-9][\w#]*", " ", text)):
            self.arith_refs.setdefault(name, what)

    def expansion(self, node: tree_sitter.Node) -> None:
        """`${...}`: indirection, prompt expansion, array indexes and substring offsets."""
        children = node.children
        texts = [_text(c) for c in children]
        if len(children) > 2 and texts[1] == "!" and not children[1].is_named:
            keys = any(t in ("*", "@") for t in texts[2:-1]) or any(
                c.type == "subscript" and _text(c).endswith(("[@]", "[*]")) for c in children
            )
            if not keys:
                self.opaque(
                    "expands a variable named by another variable's value (${!...}), "
                    f"and {_INDEX_RUNS}"
                )
        for i, text in enumerate(texts[:-1]):
            if text == "@" and texts[i + 1] == "P":
                self.opaque("expands a value as a prompt (${...@P}), which runs its $(...)")
        name = next((_text(c) for c in children if c.type == "variable_name"), None)
        if name and any(t in (":=", "=") for t in texts):
            self.tainted.add(name)  # `${x:=...}` assigns it
        offsets = False
        for child in children[1:-1]:
            if not child.is_named and _text(child) == ":":
                offsets = True
            elif offsets and child.is_named:
                self.arithmetic(child, "a substring offset")
            elif child.type == "subscript":
                self.subscript(child)

    def subscript(self, node: tree_sitter.Node) -> None:
        index = [c for c in node.named_children if c.type != "variable_name"]
        for child in index:
            if _text(child) not in ("@", "*") and child.type != "number":
                self.arithmetic(child, "an array index")

    def test(self, node: tree_sitter.Node) -> None:
        """`[[ -v NAME ]]` expands NAME's index; `[[ A -eq B ]]` evaluates A and B."""
        stack = [node]
        while stack:
            n = stack.pop()
            ops = [_text(c) for c in n.children if c.type == "test_operator" or not c.is_named]
            operands = [c for c in n.named_children if c.type != "test_operator"]
            if n.type == "unary_expression" and ops and ops[0] in ("-v", "-R") and operands:
                why = _name_problem(_word(operands[-1]))
                if (why and "[" in _text(operands[-1])) or (why and not _word(operands[-1]).static):
                    self.opaque(f"[[ {ops[0]} ]] {why}")
            if n.type == "binary_expression" and set(ops) & {
                "-eq",
                "-ne",
                "-lt",
                "-le",
                "-gt",
                "-ge",
            }:
                for operand in operands:
                    self.arithmetic(operand, "[[ ... -eq ... ]]")
                continue
            stack.extend(n.named_children)

    def assignment(self, node: tree_sitter.Node) -> None:
        target = node.named_children[0] if node.named_children else None
        if target is None:
            return
        if target.type == "subscript":
            self.subscript(target)
            name = next(
                (_text(c) for c in target.named_children if c.type == "variable_name"),
                _text(target),
            )
        else:
            name = _text(target)
        why = env_runs(name)
        if why:
            self.opaque(why)
        value = node.named_children[-1] if len(node.named_children) > 1 else None
        if value is None:
            return
        parts = value.named_children if value.type == "array" else [value]
        words = [_word(p) for p in parts]
        if any(not w.static or re.search(r"[\[$`]", w.text) for w in words):
            self.tainted.add(name)

    def declaration(self, node: tree_sitter.Node) -> None:
        """`declare`, `export`, `local`...: the names it sets (an index in one is evaluated;
        some variables make programs run others), `-n` namerefs, `-i` integers."""
        keyword = _text(node.children[0]) if node.children else "declare"
        flags = ""
        for child in node.named_children:
            word = _word(child)
            if child.type == "word" and word.static and word.text[:1] in "-+":
                flags += word.text[1:]
                continue
            if child.type == "variable_assignment":
                name = _text(child.named_children[0]) if child.named_children else ""
                if "i" in flags and len(child.named_children) > 1:
                    self.arithmetic(child.named_children[-1], f"{keyword} -i")
                continue
            why = _name_problem(word)
            if why:
                self.opaque(f"{keyword} {why}")
            name = re.split(r"[\[=+]", word.text, maxsplit=1)[0]
            if "=" in word.text and re.search(r"[\[$`]", word.text.split("=", 1)[1]):
                self.tainted.add(name)
        for letter in flags:
            reason = BUILTIN_RUNS.get(keyword, {}).get(f"-{letter}")
            if reason:
                self.opaque(f"{keyword} -{letter} {reason}")
        if "i" in flags:
            self.integers.add("*")

    def loop_variable(self, node: tree_sitter.Node) -> None:
        name = next((_text(c) for c in node.named_children if c.type == "variable_name"), "")
        values = [
            c
            for c in node.children
            if c.type not in ("variable_name", "do_group") and c.is_named and c.type != "comment"
        ]
        words = [_word(v) for v in values]
        if not any(_text(c) == "in" for c in node.children) or any(
            not w.static or re.search(r"[\[$`]", w.text) for w in words
        ):
            self.tainted.add(name)

    def builtin_names(self, program: str, args: list[Word]) -> list[str]:
        """A builtin given variable NAMEs (`read NAME`, `printf -v NAME`): each is checked
        (`_name_problem`) and, as it receives data, no longer trusted in arithmetic."""
        names: list[Word] = []
        operands: list[Word] = []
        if program in ("test", "["):  # not getopt: `-v NAME` anywhere in the expression
            names += [args[i + 1] for i in range(len(args) - 1) if args[i].text in ("-v", "-R")]
        else:
            reading = options.read(_builtin_spec(program), [a.text for a in args], stop=True)
            for g in reading.given:
                if g.spelled[1:] in NAME_BUILTINS[program][1] and (value := _given_value(g, args)):
                    names.append(value)
            operands = [args[i] for i in reading.operands]
        if program in ("mapfile", "readarray"):  # the array; the rest is not read
            names += operands[:1]
        elif program == "getopts":  # getopts OPTSTRING NAME [ARGS]
            names += operands[1:2]
        elif program not in ("printf", "wait", "test", "["):  # every operand is a name
            names += operands
        found = []
        for word in names:
            why = _name_problem(word)
            if program == "unset" and why and word.static and "[" not in word.text:
                why = None  # unsetting a variable runs nothing
            if why:
                found.append(f"{program} {why}")
            if program not in ("test", "[", "unset"):
                self.tainted.add(re.split(r"[\[=+]", word.text, maxsplit=1)[0])
        return found

    def finish(self) -> None:
        """Arithmetic that reads a variable holding data: bash evaluates that value too."""
        bad = sorted(
            name for name in self.arith_refs if name in DATA_VARIABLES or name in self.tainted
        )
        if self.integers and self.tainted:
            bad.append("an integer variable (declare -i)")
        if bad:
            self.opaque(
                f"evaluates {', '.join(bad)} as arithmetic, whose value is data, and {_INDEX_RUNS}"
            )

    def command(self, node: tree_sitter.Node) -> None:
        own_risks: list[str] = []
        words: list[Word] = []
        for child in node.children:
            field_name = node.field_name_for_child(node.children.index(child))
            if child.type == "variable_assignment":
                own_risks.append("sets environment variables for the command")
            elif child.type in _REDIRECTS:
                self.redirect(child)
            elif field_name == "name" or child.type == "command_name":
                inner = child.named_children[0] if child.named_children else child
                words.append(_word(inner))
            elif field_name == "argument" or child.is_named:
                words.append(_word(child))
            for sub in _substitutions(child):
                self.visit(sub)
        if not words:
            if own_risks:
                self.risk("assigns a shell variable")
            return
        self.add(words, _text(node), own_risks)

    def add(self, words: list[Word], source: str, risks: list[str]) -> None:
        unwrapped = _unwrap(words)
        layers, known = unwrapped.layers, unwrapped.known
        risks = [*risks, *unwrapped.risks]
        for body in unwrapped.bodies:
            known = self.nested(body, risks) and known
        inner = layers[-1]
        if not inner:  # a runner that ran only a body (`env -S '...'`): the body is what runs
            layers = layers[:-1]
            inner = layers[-1]
        elif not inner[0].static or inner[0].glob:
            known = False  # `$X args`, `/usr/bin/su?o`: no rule can say what this runs
        known = known and bool(inner) and inner[0].static and not inner[0].glob
        program = program_name(inner[0].text) if inner and inner[0].static else ""
        args = inner[1:]
        if program in OPAQUE_PROGRAMS:
            risks.append(f"{program} runs code given as text")
            known = False
        if program in UNREAD_RUNNERS:
            risks.append(f"{program} runs programs or commands in ways Talos does not read")
            known = False
        if any(not a.static for a in args):
            risks.append("uses an expansion whose value is known only when it runs")
        if program in SHELLS:
            known = self.shell(program, args, risks) and known
        if program in NAME_BUILTINS and (found := self.builtin_names(program, args)):
            risks += found
            known = False
        if program == "let":
            for arg in args:
                if not arg.static or re.search(r"[$`]", arg.text):
                    risks.append(f"let evaluates {arg.text!r} as arithmetic, and {_INDEX_RUNS}")
                    known = False
                else:
                    self.arith_text(arg.text, "let")
        for flag, reason in BUILTIN_RUNS.get(program, {}).items():
            if any(
                a.text.startswith(flag)
                or (
                    a.text.startswith("-") and not a.text.startswith("--") and flag[1] in a.text[1:]
                )
                for a in args
            ):
                risks.append(f"{program} {flag} {reason}")
                known = False
        if program == "make" and "sets environment variables for the command" in risks:
            risks.append("sets variables for make, which can change what its recipes run")
            known = False
        read = _read_options(program, args)
        risks += read.risks
        if read.opaque:
            risks += read.opaque
            known = False
        if program == "find":
            self.find_exec(args)
        if program == "rg":
            self.rg_pre(args)
        self.result.commands.append(
            SimpleCommand(
                words=(program, *(a.text for a in args)) if known else (program,),
                layers=tuple(
                    (program_name(layer[0].text), *(w.text for w in layer[1:]))
                    for layer in layers
                    if layer
                ),
                args=tuple(args),
                source=source,
                risks=tuple(dict.fromkeys(risks)),
                known=known,
                values=(*read.values, *unwrapped.values),
                operands=None if read.operands is None else tuple(read.operands),
            )
        )

    def shell(self, program: str, args: list[Word], risks: list[str]) -> bool:
        """`sh [options] -c BODY` (the body is analysed as a command line of its own), `sh
        SCRIPT` (the shell is what a rule judges), or `sh` reading its commands from input,
        which no rule can see: unknown. Returns whether what runs is known."""
        i, body = 0, None
        while i < len(args):
            flag = args[i].text
            if flag in ("--", "-"):  # `-`: the end of options too
                i += 1
                break
            if flag in ("-o", "+o", "-O", "+O"):
                i += 2
                continue
            if not flag.startswith(("-", "+")) or flag == "+":
                break
            if not flag.startswith("--") and "s" in flag[1:]:
                risks.append(f"{program} -s reads its commands from its input")
                return False
            if not flag.startswith("--") and "c" in flag[1:]:
                body = True
            i += 1
        if body:
            if i >= len(args):
                risks.append(f"{program} -c has no command")
                return False
            return self.nested(args[i], risks)
        if i >= len(args):
            risks.append(f"{program} reads its commands from its input")
            return False
        return True  # a script file

    def nested(self, body: Word, risks: list[str]) -> bool:
        """A command line given as text (`sh -c`, `env -S`, `watch`): analysed in turn, its
        programs judged like any other. Returns whether it is known."""
        if not body.static:
            risks.append("runs a command line that is known only when it runs")
            return False
        if self.depth >= MAX_DEPTH:
            risks.append("shell commands nested too deeply")
            return False
        nested = analyze(body.text, _depth=self.depth + 1)
        self.result.commands.extend(nested.commands)
        for r in nested.risks:
            self.risk(r)
        for why in nested.evaluates:
            self.opaque(why)
        self.result.opaque = self.result.opaque or nested.opaque
        return True

    def find_exec(self, args: list[Word]) -> None:
        for i, arg in enumerate(args):
            if arg.text in ("-exec", "-execdir", "-ok", "-okdir"):
                end = next(
                    (j for j in range(i + 1, len(args)) if args[j].text in (";", "+")), len(args)
                )
                inner = [  # find puts the file's name for `{}` wherever it occurs
                    Word(a.text, static=False) if "{}" in a.text else a for a in args[i + 1 : end]
                ]
                if inner:
                    self.add(inner, " ".join(a.text for a in inner), ["run by find -exec"])

    def rg_pre(self, args: list[Word]) -> None:
        for i, arg in enumerate(args):
            value = None
            if arg.text == "--pre" and i + 1 < len(args):
                value = args[i + 1]
            elif arg.text.startswith("--pre="):
                value = Word(arg.text[len("--pre=") :], arg.static)
            if value is not None:
                self.add([value], value.text, ["run by rg --pre"])


def _substitutions(node: tree_sitter.Node) -> list[tree_sitter.Node]:
    """The `$(...)`, backtick and `<(...)` nodes inside a word, outermost only."""
    if node.type in ("command_substitution", "process_substitution"):
        return [node]
    found: list[tree_sitter.Node] = []
    for child in node.children:
        found += _substitutions(child)
    return found


# ------------------------------------------------------------- options
@dataclass
class _Options:
    """What a command's options do (`_read_options`)."""

    risks: list[str] = field(default_factory=list)
    opaque: list[str] = field(default_factory=list)  # reasons no rule can vouch for it
    values: list[Word] = field(default_factory=list)  # option values: paths to check
    operands: list[Word] | None = None  # None: no option table; every word is checked
    reading: options.Reading | None = None  # how the table read them, when there is one


def _option_text(word: Word) -> str:
    """A word as an option reader sees it: `"--pre=$x"` starts `--pre=`."""
    if word.static or not word.text.startswith('"'):
        return word.text
    return word.text[1:]


def _unknown_start(word: Word) -> bool:
    """A word known only when it runs, that may turn out to be any option (`$X`, `-$X`)."""
    if word.static:
        return False
    text = _option_text(word)
    if text.startswith(("$", "`")):
        return True
    if text.startswith("-"):
        name = text.split("=", 1)[0]
        return "$" in name or "`" in name
    return False


@functools.lru_cache(maxsize=1024)
def _flags(keys: tuple[str, ...]) -> tuple[dict[str, str], dict[str, str]]:
    """The risky and the program-running flags of these table keys (`git *`, `git log`)."""
    risky: dict[str, str] = {}
    opaque: dict[str, str] = {}
    for key in keys:
        risky.update(RISKY_FLAGS.get(key, {}))
        opaque.update(OPAQUE_FLAGS.get(key, {}))
    return risky, opaque


def _given_value(g: options.Given, args: list[Word]) -> Word | None:
    """An option's value as a word: its own word, or the part attached to the option's."""
    if g.value is None:
        return None
    return args[g.value_index] if g.value_index is not None else Word(g.value, args[g.index].static)


def _read_options(program: str, args: list[Word]) -> _Options:
    """Every option of the command as the program reads it (`options.read`): the risks and
    the programs it runs, its values, and its operands."""
    out = _Options()
    if program == "git":
        _read_git(args, out)
        return out
    _read_program(program, (program,), args, out)
    if any(_unknown_start(a) for a in args) and program in OPAQUE_FLAGS:
        out.opaque.append(
            f"{program} is given an argument known only when it runs, which "
            "could be an option that runs a program"
        )
    _special(program, args, out)
    return out


def _read_git(args: list[Word], out: _Options) -> None:
    """git's own options (`-c`, `-C`) up to the subcommand, then the subcommand's."""
    texts = [_option_text(a) for a in args]
    own = options.spec("git")
    if own is None:  # no table: judged word by word
        _read_program("git", ("git", "git *"), args, out)
        return
    reading = options.read(own, texts, stop=True)
    _judge("git", ("git",), reading, args, out)
    if any(_unknown_start(a) for a in args):
        out.opaque.append(
            "git is given an argument known only when it runs, which could be "
            "an option that runs a program"
        )
    if reading.end >= len(args):
        out.operands = []
        return
    sub = texts[reading.end]
    rest = args[reading.end + 1 :]
    sub_out = _Options()
    keys = ("git *", f"git {sub}")
    _read_program(f"git {sub}", keys, rest, sub_out)
    operands = (
        sub_out.operands
        if sub_out.operands is not None
        else [a for a in rest if not a.text.startswith("-")]
    )
    first = operands[0].text if operands else "-"
    reason = _flags(keys)[1].get(first) if not first.startswith("-") else None
    if reason:  # `git bisect run`, `git submodule foreach`: a word that runs a command
        sub_out.opaque.append(f"git {sub} {first} {reason}")
    out.risks += sub_out.risks
    out.opaque += sub_out.opaque
    out.values += sub_out.values
    out.operands = None if sub_out.operands is None else [args[reading.end], *sub_out.operands]


def _read_program(shown: str, keys: tuple[str, ...], args: list[Word], out: _Options) -> None:
    """The options of `shown` (a program, or `git SUB`), with its table when it has one; and
    what the program is whatever its options (`tee`, `git filter-branch`: the `""` entry)."""
    sp = options.spec(shown)
    if sp is None:
        _read_untabled(shown, keys, args, out)
    else:
        out.reading = options.read(sp, [_option_text(a) for a in args])
        _judge(shown, keys, out.reading, args, out)
        out.operands = [args[i] for i in out.reading.operands]
        out.values += [args[i] for i in out.reading.maybe_values if i < len(args)]
        out.values += [Word(text) for text in out.reading.loose]
    risky, opaque = _flags(keys)
    for whole, target in ((risky.get(""), out.risks), (opaque.get(""), out.opaque)):
        if whole:
            target.append(f"{shown} {whole}")


def _judge(
    shown: str, keys: tuple[str, ...], reading: options.Reading, args: list[Word], out: _Options
) -> None:
    """Risks and opaque reasons of the options read; their values to path-check. An option
    that may be one of several is judged by the worst of them; one the table does not know
    is asked."""
    risky, opaque = _flags(keys)
    given_names = {n for g in reading.given if g.known for n in g.names}
    for g in reading.given:
        if (value := _given_value(g, args)) is not None:
            out.values.append(value)
        hits_opaque, hits_risky = [], []
        for option in g.options:
            if option.negated:
                continue
            for spelling in option.names:
                if spelling in opaque:
                    hits_opaque.append((spelling, opaque[spelling]))
                if spelling in risky:
                    hits_risky.append((spelling, risky[spelling]))
        if shown == "diff" and "--no-dereference" in given_names:
            hits_risky = [h for h in hits_risky if h[0] not in ("-r", "--recursive")]
        for hits, target in ((hits_opaque, out.opaque), (hits_risky, out.risks)):
            for spelling, reason in dict.fromkeys(hits):
                name = g.shown if g.known else f"{g.spelled} (maybe {spelling})"
                target.append(f"{shown} {name} {reason}")
        if not hits_opaque and not hits_risky:
            if not g.options:
                out.risks.append(f"{shown} {g.spelled} is an option Talos does not know")
            elif len(g.options) > 1:
                out.risks.append(f"{shown} {g.spelled} is an ambiguous option")


def _read_untabled(shown: str, keys: tuple[str, ...], args: list[Word], out: _Options) -> None:
    """A program the option tables do not have: each word starting with `-` is read as
    options the usual way (`-ni.bak` is `-n -i`), a long one matching any table entry it is a
    prefix of (`--rs` could be `--rsh`: no table says it is not); every suffix of a cluster
    may be a value and is checked as a path."""
    risky, opaque = _flags(keys)
    program = (keys[-1].split() or [""])[-1]
    for arg in args:
        text = _option_text(arg)
        if text == "--":
            break
        if not text.startswith("-") or text == "-":
            continue
        name = text.split("=", 1)[0]
        found = [name]
        if not text.startswith("--") and program not in NO_CLUSTERS:
            body = text[1:]
            letters = body[: next((i for i, ch in enumerate(body) if not ch.isalpha()), None)]
            found += [f"-{ch}" for ch in letters if f"-{ch}" != name]
            out.values += [Word(body[k:], arg.static) for k in range(1, len(body))]
        long_names = name.startswith("--") or program in NO_CLUSTERS
        for entries, target in ((opaque, out.opaque), (risky, out.risks)):
            for entry, reason in entries.items():
                prefix = long_names and len(name) > 2 and entry.startswith(name)
                if entry and (entry in found or prefix):
                    shown_name = entry if entry == name or entry in found else f"{name} ({entry})"
                    target.append(f"{shown} {shown_name} {reason}")


VIM_FAMILY = frozenset(k for k, v in OPAQUE_FLAGS.items() if "--cmd" in v)
AWK_FAMILY = frozenset(AWK_NAMES)
SSH_FAMILY = frozenset({"ssh", "scp", "sftp"})
# awk's `-W` values that run nothing (mawk's and gawk's); any other (mawk's `-W exec FILE`,
# abbreviated `-We`, or hidden in a list: `-Wsprintf=9,e`; gawk's `-W source=...`) is opaque.
AWK_W_HARMLESS = frozenset(
    {"version", "help", "usage", "interactive", "posix_space", "sprintf", "random"}
)
# In an awk program: `system(`, a pipe to or from a command (`|`, `|&`, not `||`), gawk's
# `@load`/`@include` and its indirect calls (`@f(...)`, which can name `system`).
_AWK_RUNS = re.compile(r"\bsystem\s*\(|(?<!\|)\|(?!\|)|@\s*(?:load|include)\b|@\s*\w+\s*\(")


def _special(program: str, args: list[Word], out: _Options) -> None:
    """Values that run programs: `ssh -o ProxyCommand=`, `vim +cmd`, `less +!cmd`, `make
    SHELL=...`, an awk program that calls `system` or pipes to a command."""
    if program in SSH_FAMILY:
        _ssh_options(program, args, out)
    if program in VIM_FAMILY or program in ("less", "more"):
        for text in (a.text for a in args):
            if text.startswith("+") and not re.fullmatch(r"\+[0-9]*", text):
                out.opaque.append(f"{program} {text[:20]} runs a command given on the command line")
    if program == "make":
        for g in out.reading.given if out.reading is not None else ():
            value = _given_value(g, args) if "-f" in g.names else None
            if value is not None and (
                not value.static or value.text == "-" or value.text.startswith(("/dev/", "/proc/"))
            ):
                out.opaque.append(
                    "make reads its makefile from its input or a command, so "
                    "the recipes it runs are given as text"
                )
        for arg in out.operands or args:
            if re.match(r"^[A-Za-z_.][A-Za-z0-9_.-]*\s*[:+?!]?=", arg.text) or not arg.static:
                out.opaque.append(
                    "make is given a variable on its command line, which can "
                    "change what its recipes run (SHELL=, CC=)"
                )
                break
    if program in AWK_FAMILY:
        _awk_program(program, args, out)
    if program == "sed":
        _sed_program(args, out)


def _ssh_options(program: str, args: list[Word], out: _Options) -> None:
    """`-o Keyword=value` (read with ssh's table: `-oProxyCommand=x`, `-vo 'LocalCommand x'`)
    with a keyword that runs a local program or loads code."""
    if out.reading is None:
        out.opaque.append(
            f"{program}'s options cannot be read (no option table), and -o can run a local command"
        )
        return
    for g in out.reading.given:
        value = _given_value(g, args) if "-o" in g.names else None
        if value is None:
            continue
        keyword = re.split(r"[\s=]", value.text.strip(), maxsplit=1)[0].lower()
        if not value.static or keyword in SSH_RUNS:
            out.opaque.append(f"{program} -o {keyword or value.text} runs a local command")


def _awk_program(program: str, args: list[Word], out: _Options) -> None:
    """awk's program text, found as awk finds it: the values of `-e`/`--source` (gawk,
    busybox), else the first operand after the options (`-v x=1`, `-F :` and their values come
    first); a program from a file (`-f`, `-E`) is opaque already (`OPAQUE_FLAGS`). A text that
    calls `system`, pipes, or loads code is opaque; so is an option awk would read differently."""
    if out.reading is None:
        out.opaque.append(
            f"{program}'s options cannot be read (no option table), so its program is unknown"
        )
        return
    texts: list[Word] = []
    from_file = False
    for g in out.reading.given:
        if len(g.options) != 1:
            out.opaque.append(
                f"{program} {g.spelled} is an option Talos cannot read, so which "
                "word is its program is unknown"
            )
            return
        value = _given_value(g, args)
        if g.names & {"-e", "--source"} and value is not None:
            texts.append(value)
        from_file = from_file or bool(g.names & {"-f", "--file", "-E", "--exec"})
        if (
            "-W" in g.names
            and value is not None
            and (
                not value.static
                or any(
                    part.split("=", 1)[0] not in AWK_W_HARMLESS for part in value.text.split(",")
                )
            )
        ):
            out.opaque.append(
                f"{program} -W {value.text[:20]} is an implementation option "
                "that can run a program file (mawk's -W exec)"
            )
    if not texts and not from_file and out.operands:
        texts.append(out.operands.pop(0))  # the program: text, not a path to check
    if any(not t.static or _AWK_RUNS.search(t.text) for t in texts):
        out.opaque.append(f"{program}'s program runs commands (system, a pipe, or code it loads)")


class _SedScript:
    """A sed script read as GNU sed reads it, for what it does besides editing text: `e` and
    `s///e` run a command; `w FILE`, `W FILE`, `s///w FILE` write a file; `r FILE`, `R FILE`
    read one. `unread` says why the text could not be read to the end (then it is opaque)."""

    _SIMPLE = frozenset("{}=dDgGhHnNpPxzF")

    def __init__(self, text: str) -> None:
        self.text, self.i = text, 0
        self.runs = False
        self.writes: list[str] = []
        self.reads: list[str] = []
        self.unread: str | None = None
        try:
            self._commands()
        except (IndexError, ValueError) as exc:
            self.unread = str(exc) or "it ends early"

    def _commands(self) -> None:
        t = self.text
        while True:
            while self.i < len(t) and t[self.i] in " \t\n;":
                self.i += 1
            if self.i >= len(t):
                return
            if t[self.i] == "#":
                self._to_line_end()
                continue
            self._address()
            if t[self.i] == ",":
                self.i += 1
                self._address()
            self._spaces()
            if t[self.i] == "!":
                self.i += 1
                self._spaces()
            command = t[self.i]
            self.i += 1
            if command in self._SIMPLE:
                pass
            elif command in "qQlL":
                self._spaces()
                self._digits()
            elif command in "btT:v":
                self._to(";\n")
            elif command in "aic":
                self._to_line_end(continued=True)
            elif command in "rRwW":
                name = self._to_line_end().strip()
                (self.reads if command in "rR" else self.writes).append(name)
            elif command == "e":
                self.runs = True
                self._to_line_end()
            elif command == "s":
                self._substitute()
            elif command == "y":
                delimiter = t[self.i]
                self.i += 1
                self._delimited(delimiter, brackets=False)
                self._delimited(delimiter, brackets=False)
            else:
                raise ValueError(f"{command!r} is not a sed command Talos knows")
            self._spaces()
            if command != "{" and self.i < len(t) and t[self.i] not in ";\n}#":
                raise ValueError(f"{t[self.i]!r} after a command")

    def _address(self) -> None:
        t = self.text
        if t[self.i] in "/\\":
            if t[self.i] == "\\":
                self.i += 1
            delimiter = t[self.i]
            self.i += 1
            self._delimited(delimiter, brackets=True)
            while self.i < len(t) and t[self.i] in "IM":
                self.i += 1
        elif t[self.i] in "+~":
            self.i += 1
            self._digits()
        elif t[self.i] == "$":
            self.i += 1
        else:
            self._digits()
            if self.i < len(t) and t[self.i] == "~":
                self.i += 1
                self._digits()

    def _substitute(self) -> None:
        t = self.text
        delimiter = t[self.i]
        if delimiter in "\n\\":
            raise ValueError("an s command without a delimiter")
        self.i += 1
        self._delimited(delimiter, brackets=True)
        self._delimited(delimiter, brackets=False)
        while self.i < len(t) and t[self.i] not in " \t;\n}#":
            flag = t[self.i]
            self.i += 1
            if flag == "e":
                self.runs = True
            elif flag == "w":
                self.writes.append(self._to_line_end().strip())
            elif flag not in "gpiImM0123456789":
                raise ValueError(f"{flag!r} is not an s flag Talos knows")

    def _delimited(self, delimiter: str, *, brackets: bool) -> None:
        """Up to the unescaped delimiter; in a regex, a `[...]` may hold it."""
        t = self.text
        while t[self.i] != delimiter:
            if t[self.i] == "\\":
                self.i += 2
            elif brackets and t[self.i] == "[":
                self.i += 1
                self.i += t[self.i] == "^"
                self.i += t[self.i] == "]"
                while t[self.i] != "]":
                    self.i += 1
                self.i += 1
            else:
                self.i += 1
        self.i += 1

    def _to(self, stops: str) -> str:
        start = self.i
        while self.i < len(self.text) and self.text[self.i] not in stops:
            self.i += 1
        return self.text[start : self.i]

    def _to_line_end(self, continued: bool = False) -> str:
        start = self.i
        while self.i < len(self.text) and self.text[self.i] != "\n":
            self.i += 2 if continued and self.text[self.i] == "\\" else 1
        return self.text[start : self.i]

    def _spaces(self) -> None:
        while self.i < len(self.text) and self.text[self.i] in " \t":
            self.i += 1

    def _digits(self) -> None:
        while self.i < len(self.text) and self.text[self.i].isdigit():
            self.i += 1


def _sed_program(args: list[Word], out: _Options) -> None:
    """sed's script, found as sed finds it (the values of `-e`/`--expression`, joined by
    newlines, else the first operand), read for what runs or touches files: `e` is opaque,
    `w` asked, a file `r`/`w` names is path-checked; a script Talos cannot read is opaque.
    `--sandbox` (sed refuses e, r, w) needs none of it."""
    if out.reading is None:
        out.opaque.append(
            "sed's options cannot be read (no option table), so its script is unknown"
        )
        return
    given = out.reading.given
    if any("--sandbox" in g.names for g in given):
        return
    scripts = [
        v for g in given if g.names & {"-e", "--expression"} and (v := _given_value(g, args))
    ]
    if not scripts and not any(g.names & {"-f", "--file"} for g in given) and out.operands:
        scripts = [out.operands.pop(0)]  # the script: text, not a path to check
    if not scripts:
        return
    if not all(w.static for w in scripts):
        out.opaque.append("sed's script is known only when it runs")
        return
    script = _SedScript("\n".join(w.text for w in scripts))
    if script.unread:
        out.opaque.append(
            f"sed's script cannot be read by Talos ({script.unread}), and its e "
            "command runs programs"
        )
    if script.runs:
        out.opaque.append("sed's script runs a command (e)")
    if script.writes:
        out.risks.append("sed's script writes a file (w)")
    out.values += [Word(name) for name in [*script.reads, *script.writes] if name]


def analyze(command: str, *, _depth: int = 0) -> Analysis:
    """Every program `command` runs, with the risks that stop it running unasked."""
    if not isinstance(command, str):
        raise TypeError("a command is a string")
    analyzer = _Analyzer(command, _depth)
    if "\0" in command:
        analyzer.risk("contains a NUL character")
        analyzer.result.opaque = True
        return analyzer.result
    tree = tree_sitter.Parser(_LANGUAGE).parse(analyzer.source)
    analyzer.visit(tree.root_node)
    analyzer.evaluations(tree.root_node)
    analyzer.unparsed()
    analyzer.finish()
    if tree.root_node.has_error:
        analyzer.risk("the shell syntax could not be fully parsed")
        analyzer.result.opaque = True
    if any(not c.known for c in analyzer.result.commands):
        analyzer.result.opaque = True
    return analyzer.result


# ------------------------------------------------------------ matching
@dataclass(frozen=True)
class Canonical:
    program: str
    flags: frozenset[str]
    positionals: tuple[str, ...]


@functools.lru_cache(maxsize=4096)  # read once: each command is compared with every rule
def _tokens(words: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """("flag" | "arg", text) for each word after the program, spelt one way: `-fr` is `-f`,
    `-r`; `--force` and `--forc` are `-f` for rm; a value attached to an option is `-n=5`
    however it was attached; paths normalised; everything after `--` an argument. Options
    are read with the program's table (`options.read`) when there is one."""
    program = program_name(words[0])
    rest = list(words[1:])
    if program == "git" and (own := options.spec("git")) is not None:
        reading = options.read(own, rest, stop=True)
        out = _spec_tokens(reading, rest[: reading.end])
        if reading.end < len(rest):
            sub, after = rest[reading.end], rest[reading.end + 1 :]
            out.append(("arg", sub))
            sub_spec = options.spec(f"git {sub}")
            out += (
                _spec_tokens(options.read(sub_spec, after), after)
                if sub_spec
                else _plain_tokens("git", after)
            )
        return tuple(out)
    sp = options.spec(program)
    if sp is None or sp.style == "words":
        return tuple(_plain_tokens(program, rest))
    return tuple(_spec_tokens(options.read(sp, rest), rest))


def _arg_token(word: str) -> tuple[str, str]:
    return ("arg", _norm_path(word) if "/" in word else word)


def _spec_tokens(reading: options.Reading, words: list[str]) -> list[tuple[str, str]]:
    at: dict[int, list[tuple[str, str]]] = {}
    for g in reading.given:
        if g.index >= len(words):
            continue
        name = g.options[0].canonical if g.known else g.spelled
        attached = g.value is not None and g.value_index is None
        at.setdefault(g.index, []).append(("flag", f"{name}={g.value}" if attached else name))
        if g.value_index is not None and g.value is not None:
            at.setdefault(g.value_index, []).append(_arg_token(g.value))
    for i in reading.operands:
        if i < len(words):
            at.setdefault(i, []).append(_arg_token(words[i]))
    return [token for i in range(len(words)) for token in at.get(i, [])]


def _plain_tokens(program: str, words: list[str]) -> list[tuple[str, str]]:
    aliases = FLAG_ALIASES.get(program, {})
    out: list[tuple[str, str]] = []
    options_done = False
    for word in words:
        if options_done or not word.startswith("-") or word == "-":
            out.append(_arg_token(word))
        elif word == "--":
            options_done = True
        elif word.startswith("--") or program in NO_CLUSTERS:
            name, sep, value = word.partition("=")
            out.append(("flag", aliases.get(name, name) + sep + value))
        elif word[1:].isalpha():
            out.extend(("flag", aliases.get(f"-{ch}", f"-{ch}")) for ch in word[1:])
        else:
            out.append(("flag", word))
    return out


def canonical(words: tuple[str, ...] | list[str]) -> Canonical:
    """Order-insensitive flags and normalised words (`_tokens`), so that a rule matches however
    the command spells the same thing."""
    if not words:
        return Canonical("", frozenset(), ())
    tokens = _tokens(tuple(words))
    return Canonical(
        program_name(words[0]),
        frozenset(t for k, t in tokens if k == "flag"),
        tuple(t for k, t in tokens if k == "arg"),
    )


def _norm_path(word: str) -> str:
    lead = "/" if word.startswith("/") else ""
    normal = posixpath.normpath(word)
    return lead + normal.lstrip("/") if lead else normal


def _fits(pattern: str, word: str) -> bool:
    return fnmatch.fnmatchcase(word, pattern) if "*" in pattern else pattern == word


@functools.lru_cache(maxsize=4096)  # parsed once per rule: every command is checked against each
def rule_words(rule: str) -> tuple[str, ...]:
    """A rule's words, as the shell would split them (`git log`, `npm run "build:prod"`)."""
    analysis = analyze(rule)
    if len(analysis.commands) == 1 and analysis.commands[0].known:
        cmd = analysis.commands[0]
        return (cmd.program, *(a.text for a in cmd.args))
    return tuple(rule.split())


def matches(rule: str, words: tuple[str, ...], *, loose: bool = False) -> bool:
    """Does a rule (`git log`, `npm test`, `rm -rf /`, `*`) cover this command?

    Strict (allow and ask rules): the command starts with the rule's words, the flags among
    them in any order and spelling but where the rule has flags (`git log` covers `git log
    -5`; `ls -la` covers `ls -al x`; `python --version` does not cover `python -c CODE
    --version`, nor `python3 -m pytest` `python3 pytest -m`). `loose` (deny rules): the
    program is compared by name whatever its directory, the rule's flags may be anywhere and
    its other words need only appear in order, so `git push --repo x origin main` is still
    `git push origin main` and `/opt/bin/rm -r x -f /` is still `rm -rf /`."""
    pattern = rule_words(rule)
    if pattern == ("*",):
        return True
    if not pattern or not words:
        return False
    r, c = canonical(pattern), canonical(words)
    if not loose:
        rule_tokens = _tokens(pattern)
        head = _tokens(tuple(words))[: len(rule_tokens)]
        if [k for k, _ in head] != [k for k, _ in rule_tokens]:
            return False  # an argument moved past a flag: `python3 pytest -m` is no `-m pytest`
        c = Canonical(
            c.program,
            frozenset(t for k, t in head if k == "flag"),
            tuple(t for k, t in head if k == "arg"),
        )
        return (
            _fits(r.program, c.program)
            and len(r.flags) == len(c.flags)
            and all(any(_fits(f, g) for g in c.flags) for f in r.flags)
            and len(r.positionals) == len(c.positionals)
            and all(_fits(p, w) for p, w in zip(r.positionals, c.positionals, strict=True))
        )
    if not _fits(os.path.basename(r.program), os.path.basename(c.program)):
        return False
    if not all(any(_fits(f, g) for g in c.flags) for f in r.flags):
        return False
    it = iter(c.positionals)
    return all(any(_fits(p, w) for w in it) for p in r.positionals)


def could_match(rule: str, command: SimpleCommand) -> bool:
    """Might a deny rule cover this command once its expansions and globs are known? A word
    only known at run time could be any word or flag (`rm -rf $HOME`); a glob could be any
    path it matches (`rm -rf /*` could be `rm -rf /`)."""
    pattern = rule_words(rule)
    if not pattern or pattern == ("*",):
        return False  # `*` denies outright
    program = os.path.basename(command.program)
    if not command.known:  # `/usr/bin/sud? -n true`: a glob that may name the program
        rule_program = os.path.basename(program_name(pattern[0]))
        return bool(re.search(r"[*?\[]", program)) and fnmatch.fnmatchcase(rule_program, program)
    unknown = [a for a in command.args if not a.static or a.glob]
    if not unknown:
        return False
    r = canonical(pattern)
    if os.path.basename(r.program) != program:
        return False
    known = canonical([command.program, *(a.text for a in command.args if a.static and not a.glob)])
    wild = any(not a.static for a in unknown)
    if not wild and not all(any(_fits(f, g) for g in known.flags) for f in r.flags):
        return False
    slots = [a for a in command.args if not a.text.startswith("-") or not a.static]

    def fits(p: str, a: Word) -> bool:
        if not a.static:
            return True
        if a.glob:
            return fnmatch.fnmatchcase(p, a.text)
        return _fits(p, _norm_path(a.text) if "/" in a.text else a.text)

    it = iter(slots)
    return all(any(fits(p, a) for a in it) for p in r.positionals)


# ---------------------------------------------------------------- paths
def _is_secret_name(name: str) -> bool:
    """A secrets file's name (`files.is_secrets_file`), or a glob the shell would match one
    with (`.e*`; a pattern that does not start with a dot never matches a dotfile)."""
    if is_secrets_file(name):
        return True
    return name.startswith(".") and any(
        fnmatch.fnmatchcase(probe, name) for probe in (".env", ".env.local", ".envrc", ".env-x")
    )


def _path_words(command: SimpleCommand) -> list[tuple[Word, str]]:
    """(word, text to check) for every word that may name a path: operands and option values
    (`-f/abs`, `--file=/abs`, `-d @/abs` for curl, a value after `=` in it) for a program whose
    options are read; otherwise every argument, the value after `--x=` and every suffix of a
    short cluster (`-xf/abs`)."""
    out: list[tuple[Word, str]] = []
    if command.operands is None:
        for arg in command.args:
            text = arg.text
            if text.startswith("-") and "=" in text:
                text = text.split("=", 1)[1]
            elif text.startswith("-"):
                continue
            out.append((arg, text))
    else:
        out += [(arg, arg.text) for arg in command.operands]
    for value in command.values:
        text = value.text
        out.append((value, text))
        for part in re.split(r"[=,]", text)[1:] if ("=" in text or "," in text) else []:
            out.append((value, part))
        if text[:1] in "@<=":  # curl -d @file, -F x=<file; rg -f=file
            out.append((value, text[1:]))
    return out


def path_risks(command: SimpleCommand, root: Path, walk: GlobWalk | None = None) -> list[str]:
    """Arguments and option values that name a path outside `root` (through `..`, an
    absolute path, `~` or a symlink) or a secrets file (`.env*`): a reader allowed by rule
    must not read those. A glob is judged by the directory it starts from first (`/*/*` is
    outside before anything is listed), then by what it matches, walked within `walk`'s
    budget (one per command line: `ls */*/*; ls */*/*; ...` shares it): a glob that needs more
    is asked."""
    risks = []
    walk = walk or GlobWalk(root)
    for arg, text in _path_words(command):
        if not arg.static:
            continue
        if text[:1] in "@<":
            text = text[1:]
        if not text:
            continue
        if text.startswith("~"):
            risks.append(f"names a path outside the workspace ({text})")
            continue
        parts = [p for p in re.split(r"[/:]", text) if p]  # `HEAD:.env` names it too
        if any(_is_secret_name(p) for p in parts):
            risks.append(f"names a secrets file ({text})")
            continue
        why = _leaves(root, _glob_start(text) if arg.glob else text)
        if why is None and arg.glob:
            why = walk.first_risk(text)
        if why:
            risks.append(f"{why} ({text})")
    return risks


def _glob_start(pattern: str) -> str:
    """The directory a glob is expanded from: its text up to the last `/` before the first
    glob character (`/` for `/*/x*`, `src/` for `src/*.py`, the workspace for `*.py`)."""
    first = re.search(r"[*?\[]", pattern)
    head = pattern[: first.start()] if first else pattern
    return head[: head.rfind("/") + 1] or "."


MAX_GLOB_VISIT = 20_000  # directory entries the globs of one command line may look at
MAX_GLOB_SECONDS = 2.0  # and for how long (a slow filesystem)
_POSIX_CLASSES = {
    "alpha": "a-zA-Z",
    "digit": "0-9",
    "alnum": "a-zA-Z0-9",
    "upper": "A-Z",
    "lower": "a-z",
    "space": r"\s",
    "blank": r" \t",
    "punct": r"!-/:-@\[-`{-~",
    "xdigit": "0-9A-Fa-f",
    "word": r"\w",
    "print": r"\x20-\x7e",
    "graph": r"\x21-\x7e",
    "cntrl": r"\x00-\x1f\x7f",
    "ascii": r"\x00-\x7f",
}


@functools.lru_cache(maxsize=1024)
def _component_regex(pattern: str) -> re.Pattern[str]:
    """One path component's glob as bash matches it (`*`, `?`, `[...]` with `!` or `^`
    negation and POSIX classes). What it cannot tell (`[=a=]`, `[.a.]`) matches any one
    character: more candidates are checked, never fewer."""
    out, i, n = [], 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "*":
            out.append(".*")
        elif ch == "?":
            out.append(".")
        elif ch == "[":
            j = i + 1
            negate = j < n and pattern[j] in "!^"
            j += negate
            body: list[str] = []
            first = True
            while j < n and (pattern[j] != "]" or first):
                if pattern.startswith("[:", j) and (end := pattern.find(":]", j + 2)) > 0:
                    cls = _POSIX_CLASSES.get(pattern[j + 2 : end])
                    body.append(cls if cls is not None else r"\s\S")
                    j = end + 2
                elif pattern.startswith(("[=", "[."), j):
                    body.append(r"\s\S")
                    j += 2
                else:
                    body.append(re.escape(pattern[j]) if pattern[j] != "-" else "-")
                    j += 1
                first = False
            if j >= n:  # no closing bracket: a literal `[`
                out.append(re.escape(ch))
            else:
                out.append(f"[{'^' if negate else ''}{''.join(body)}]")
                i = j
        else:
            out.append(re.escape(ch))
        i += 1
    return re.compile("".join(out), re.DOTALL)


class _Budget(Exception):
    """The globs of one command needed more looking than they may have."""


class GlobWalk:
    """What the globs of a command line expand to, as bash will (no `dotglob`: a component
    not starting with `.` skips names that do; `.*` may be `..`, as before bash 5.2), within
    `MAX_GLOB_VISIT` directory entries and `MAX_GLOB_SECONDS` for the whole line: a hostile
    `*/*/*/*/*` costs the gate a bounded walk, and is asked."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.visited = 0
        self.deadline = time.monotonic() + MAX_GLOB_SECONDS

    def first_risk(self, pattern: str) -> str | None:
        """Why one of the glob's matches is risky (a link leading out, a secrets file), or
        that it could not be checked in budget; None when every match is fine."""
        try:
            for path in self._matches(pattern):
                self._spend(1)
                why = _leaves(self.root, path)
                if why:
                    return why
        except _Budget:
            return "matches too many paths to check"
        return None

    def _matches(self, pattern: str) -> Iterator[str]:
        absolute = pattern.startswith("/")
        parts = [p for p in pattern.split("/") if p]
        trail = "/" if pattern.endswith("/") else ""
        paths = ["/" if absolute else ""]
        for k, part in enumerate(parts):
            last = k == len(parts) - 1
            grown: list[str] = []
            if not re.search(r"[*?\[]", part):
                grown = [p + part + ("" if last else "/") for p in paths]
            else:
                regex = _component_regex(part)
                for base in paths:
                    for name in self._names(base or ".", part.startswith(".")):
                        if regex.fullmatch(name) and (part.startswith(".") or name[0] != "."):
                            grown.append(base + name + ("" if last else "/"))
            if not last:
                grown = [p for p in grown if os.path.isdir(self._full(p))]
            paths = grown
            self._spend(len(paths))
        yield from (p + trail for p in paths if os.path.lexists(self._full(p)))

    def _names(self, directory: str, dots: bool) -> list[str]:
        try:
            with os.scandir(self._full(directory)) as entries:
                names = []
                for entry in entries:
                    names.append(entry.name)
                    if len(names) % 256 == 0:
                        self._spend(256)
                self._spend(len(names) % 256)
        except OSError:
            return []
        return [*names, ".", ".."] if dots else names

    def _full(self, path: str) -> str:
        return path if path.startswith("/") else os.path.join(self.root, path or ".")

    def _spend(self, entries: int) -> None:
        self.visited += entries
        if self.visited > MAX_GLOB_VISIT or time.monotonic() > self.deadline:
            raise _Budget


def _leaves(root: Path, path: str) -> str | None:
    """Why reading `path` (relative to `root`) is risky, if it is."""
    full = Path(path) if path.startswith("/") else root / path
    try:
        real = Path(os.path.realpath(full))
    except (OSError, ValueError):
        return None
    if real != root and not real.is_relative_to(root):
        return "names a path outside the workspace"
    if _is_secret_name(real.name):  # a link to a secrets file
        return "names a secrets file"
    return None
