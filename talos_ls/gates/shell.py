"""What a shell command will run, read with a real shell grammar (tree-sitter-bash).

The permission gate decides on what this module finds, so it must not be fooled: every simple
command anywhere in the text is found (in pipelines, lists, subshells, `$(...)` and backticks
at any depth, loop bodies, `sh -c` bodies, `find -exec` and `xargs` targets); words are read
as the shell will see them after quote removal (`r''m`, `\\rm` and `"r"m` are all `rm`;
`$'\\x72m'` too); wrappers are looked through (`/usr/bin/env nice -n 5 command curl` runs
`curl`), and every layer is kept so a rule on the wrapper (`sudo`) still holds.

What it reports as a *risk* (a reason the command cannot run without the person's approval):
redirections that write or read files, `exec`-style flags that run other programs or write
files (`find -exec/-delete/-fprintf`, `git -c/--output`, `rg --pre`, `sed -i`), `xargs`,
environment assignments, expansions whose value is only known when the command runs, and any
construct the grammar finds but this module does not model (loops, functions, here-documents,
syntax errors). A command whose program cannot be known without running it (`$X args`,
`eval`, a non-literal `sh -c` body) is *opaque*: no rule can vouch for it.
"""

from __future__ import annotations

import fnmatch
import functools
import glob as globmod
import itertools
import os
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path

import tree_sitter
import tree_sitter_bash

from ..files import is_secrets_file

_LANGUAGE = tree_sitter.Language(tree_sitter_bash.language())
MAX_DEPTH = 8  # nested `sh -c` bodies; deeper is opaque
MAX_GLOB_CHECK = 1000  # paths a glob argument may match and still be checked one by one

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash"})
OPAQUE_PROGRAMS = frozenset({"eval", "source", ".", "trap", "alias", "fc", "coproc"})
# Constructs that hold commands but whose effect this module does not model.
_STRUCTURE = frozenset({"program", "list", "pipeline", "subshell", "compound_statement",
                        "redirected_statement", "negated_command", "comment", "&&", "||",
                        "|", "|&", ";", "&", ";;", "(", ")", "{", "}", "!", "\n"})  # fmt: skip
_REDIRECTS = ("file_redirect", "heredoc_redirect", "herestring_redirect")
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

# Flags that make a program run another program, or write or delete files. Values: what the
# person is told. A flag may be given as `--flag=value` or, for short ones, with the value
# attached (`-i.bak`).
RISKY_FLAGS: dict[str, dict[str, str]] = {
    "find": {"-exec": "runs another command", "-execdir": "runs another command",
             "-ok": "runs another command", "-okdir": "runs another command",
             "-delete": "deletes files", "-fprint": "writes a file", "-fprint0": "writes a file",
             "-fprintf": "writes a file", "-fls": "writes a file",
             "-L": "follows symbolic links out of the workspace",
             "-H": "follows symbolic links", "-follow": "follows symbolic links"},
    "git": {"-C": "runs in another directory", "--git-dir": "uses another repository",
            "--work-tree": "uses another work tree", "--output": "writes a file",
            "--ext-diff": "runs an external diff program", "--exec": "runs another command",
            "--no-index": "reads files outside the repository",
            "--textconv": "runs conversion programs"},
    "sed": {"-i": "edits files in place", "--in-place": "edits files in place"},
    "sort": {"-o": "writes a file", "--output": "writes a file"},
    "tee": {"": "writes files"},  # tee writes whatever it is given
    "uniq": {"": "may write its second argument"},
    "tree": {"-o": "writes a file"},
    "grep": {"-R": "follows symbolic links out of the workspace",
             "--dereference-recursive": "follows symbolic links out of the workspace"},
    "rg": {"-L": "follows symbolic links out of the workspace",
           "--follow": "follows symbolic links out of the workspace",
           "--pre": "runs a preprocessor program on every file",
           "--pre-glob": "runs a preprocessor program"},
    "du": {"-L": "follows symbolic links", "--dereference": "follows symbolic links"},
    "cp": {"-L": "follows symbolic links", "--dereference": "follows symbolic links"},
}  # fmt: skip
# Flags that make a program run code this module cannot see (a git alias `!cmd` or pager, a
# tar or sort helper program): what runs is unknown, so no rule can vouch for the command.
OPAQUE_FLAGS: dict[str, frozenset[str]] = {
    "git": frozenset({"-c", "--config-env", "--exec-path", "--upload-pack", "--receive-pack"}),
    "tar": frozenset({"--to-command", "--checkpoint-action", "-I", "--use-compress-program",
                      "--info-script", "-F", "--new-volume-script"}),
    "sort": frozenset({"--compress-program"}),
    "rsync": frozenset({"-e", "--rsh", "--rsync-path"}),
    "zip": frozenset({"-TT", "--unzip-command"}),
}  # fmt: skip
# Long spellings that mean the same as a short flag, for matching rules (`rm --force -r`).
FLAG_ALIASES: dict[str, dict[str, str]] = {
    "rm": {"--recursive": "-r", "-R": "-r", "--force": "-f"},
    "cp": {"--recursive": "-r", "-R": "-r", "--force": "-f"},
    "chmod": {"--recursive": "-R"},
    "chown": {"--recursive": "-R"},
    "git": {"--force": "-f"},
}
NO_CLUSTERS = frozenset({"find", "java", "gcc", "g++", "clang", "go", "tar"})  # `-exec` is one flag


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

    @property
    def all_risks(self) -> list[str]:
        return list(dict.fromkeys([*self.risks, *(r for c in self.commands for r in c.risks)]))


def _quote(word: str) -> str:
    return word if word and re.fullmatch(r"[\w@%+=:,./\-]+", word) else repr(word)


# ---------------------------------------------------------------- words
_ANSI_C = re.compile(r"\\(x[0-9a-fA-F]{1,2}|u[0-9a-fA-F]{1,4}|U[0-9a-fA-F]{1,8}|[0-7]{1,3}|.)",
                     re.DOTALL)  # fmt: skip
_ANSI_SIMPLE = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b",
                "f": "\f", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}  # fmt: skip


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
    if kind == "number":
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
                parts.append(re.sub(r'\\([$`"\\\n])', lambda m: "" if m[1] == "\n" else m[1],
                                    _text(child)))  # fmt: skip
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

    takes: frozenset[str] = frozenset()  # its options that are followed by a value
    before: int = 0  # words between its options and the program (a duration, a lock file)
    body: frozenset[str] = frozenset()  # options whose value is a command line (`env -S`)
    runs_rest: bool = True  # False: it runs only what a body option gives (`script -c`)
    joins: bool = False  # the rest is one command line, joined by spaces (`watch`)


def _r(takes: str = "", before: int = 0, body: str = "", **kw: bool) -> Runner:
    return Runner(frozenset(takes.split()), before, frozenset(body.split()), **kw)


RUNNERS: dict[str, Runner] = {
    "env": _r("-u --unset -C --chdir", body="-S --split-string"),
    "command": _r(), "builtin": _r(), "exec": _r("-a"), "nohup": _r(), "setsid": _r(),
    "time": _r("-f --format -o --output"), "nice": _r("-n --adjustment"),
    "timeout": _r("-s --signal -k --kill-after", before=1),
    "stdbuf": _r("-i -o -e --input --output --error"),
    "ionice": _r("-c --class -n --classdata"), "chrt": _r("-T -P -D", before=1),
    "taskset": _r(before=1), "flock": _r("-w --timeout -E --conflict-exit-code", before=1,
                                         body="-c --command"),
    "setpriv": _r("--reuid --regid --groups --inh-caps --ambient-caps --bounding-set "
                  "--securebits --pdeathsig --selinux-label --apparmor-profile"),
    "unshare": _r("--propagation --setgroups --map-user --map-group -S -G --setuid --setgid "
                  "--root -R --wd -w"),
    "nsenter": _r("-t --target -S -G --setuid --setgid --root -r --wd -w"),
    "chroot": _r("--userspec --groups", before=1), "sudo": _r(
        "-u -g -C -h -p -U -r -t -T -D --user --group --host --prompt --chdir"),
    "doas": _r("-u -C"), "pkexec": _r("--user"), "runuser": _r("-u -g -G --user --group",
                                                               body="-c --command"),
    "su": _r("-g -G -s --shell", body="-c --command"), "sg": _r(before=1, body="-c"),
    "script": _r("-t --timing -T -I -O -B -E --echo -m --logging-format", body="-c --command",
                 runs_rest=False),
    "watch": _r("-n --interval -d --differences -g --chgexit -x --exec", joins=True),
    "strace": _r("-e -o -p -s -u -E -a -b -I -O -P -S -X"),
    "ltrace": _r("-e -o -p -s -u -a -n"), "valgrind": _r(), "catchsegv": _r(),
    "xvfb-run": _r("-n -s -e -f -p --server-num --server-args --error-file --auth-file"),
    "dbus-run-session": _r("--config-file --dbus-daemon"),
    "systemd-run": _r("-p --property -u --unit -E --setenv --uid --gid --nice -M --machine "
                      "--working-directory -d"),
    "firejail": _r(), "proxychains": _r("-f"), "proxychains4": _r("-f"),
    "torsocks": _r("-u -p -a -P"), "cgexec": _r("-g"), "busybox": _r(),
    "xargs": _r("-I -i -n -P -L -l -s -d -E -e -a --max-args --max-procs --max-lines "
                "--max-chars --delimiter --eof --arg-file --replace --process-slot-var"),
}  # fmt: skip
WRAPPERS = frozenset(RUNNERS)


def _body_value(flag: str, runner: Runner, words: list[Word], i: int) -> tuple[Word, int] | None:
    """When `words[i]` is one of the runner's body options: the command line it gives (and
    the index after it). `-S 'x'`, `-S'x'`, `--split-string=x`, `-qc 'x'` all count."""
    for option in runner.body:
        if flag == option and i + 1 < len(words):
            return words[i + 1], i + 2
        if option.startswith("--") and flag.startswith(option + "="):
            return Word(flag[len(option) + 1 :], words[i].static), i + 1
        letter = option[1:] if len(option) == 2 else ""
        if letter and flag.startswith("-") and not flag.startswith("--") and letter in flag[1:]:
            rest = flag[flag.index(letter, 1) + 1 :]
            if rest:  # the value is attached: -S'sudo x' reads as -Ssudo x
                return Word(rest, words[i].static), i + 1
            if i + 1 < len(words):
                return words[i + 1], i + 2
    return None


def _unwrap(words: list[Word]) -> tuple[list[list[Word]], list[str], bool, list[Word]]:
    """Each layer of runners down to the program that runs; risks; whether the program is
    known; command lines given to runners as text (`env -S`, `flock -c`, `watch`), which the
    caller analyses in turn. `xargs` adds arguments only known at run time."""
    layers, risks, known, bodies = [words], [], True, []
    while words and words[0].static:
        program = os.path.basename(words[0].text)  # a runner anywhere is still a runner
        runner = RUNNERS.get(program)
        if runner is None:
            break
        if program == "command" and any(w.text in ("-v", "-V") for w in words[1:2]):
            break  # `command -v x` looks x up; it does not run it
        i = 1
        while i < len(words):
            flag = words[i].text
            if flag == "--":
                i += 1
                break
            if not flag.startswith("-") or flag == "-":
                break
            given = _body_value(flag, runner, words, i)
            if given is not None:
                bodies.append(given[0])
                i = given[1]
                continue
            if program == "env" and flag in ("-C", "--chdir"):
                risks.append("env -C runs in another directory")
            i += 2 if (flag in runner.takes and "=" not in flag) else 1
        if program == "env":
            assigned = 0
            while i < len(words) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[i].text):
                i, assigned = i + 1, assigned + 1
            if assigned:
                risks.append("sets environment variables for the command")
        i += runner.before
        if program == "xargs":
            risks.append("xargs runs a command with arguments read from its input")
            known = known and i < len(words)
        rest = words[i:]
        if runner.joins and rest:
            bodies.append(Word(" ".join(w.text for w in rest), all(w.static for w in rest)))
            rest = []
        if not runner.runs_rest or not rest:
            if not bodies:
                layers.append([])
            break
        words = rest
        layers.append(words)
    return layers, risks, known, bodies


# -------------------------------------------------------------- analysis
class _Analyzer:
    def __init__(self, source: str, depth: int) -> None:
        self.result = Analysis(source)
        self.depth = depth

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
        for child in node.children:  # substitutions in the target
            if child.type in _DYNAMIC:
                self.visit(child)

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
        layers, more, known, bodies = _unwrap(words)
        risks = [*risks, *more]
        for body in bodies:
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
        if any(not a.static for a in args):
            risks.append("uses an expansion whose value is known only when it runs")
        if program in SHELLS:
            known = self.shell(program, args, risks) and known
        risks += _flag_risks(program, args)
        opaque = _opaque_flags(program, args)
        if opaque:
            risks += opaque
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
                    for layer in layers if layer
                ),
                args=tuple(args),
                source=source,
                risks=tuple(dict.fromkeys(risks)),
                known=known,
            )
        )  # fmt: skip

    def shell(self, program: str, args: list[Word], risks: list[str]) -> bool:
        """`sh [options] -c BODY` (the body is analysed as a command line of its own), `sh
        SCRIPT` (the shell is what a rule judges), or `sh` reading its commands from input,
        which no rule can see: unknown. Returns whether what runs is known."""
        i, body = 0, None
        while i < len(args):
            flag = args[i].text
            if flag == "--":
                i += 1
                break
            if flag in ("-o", "+o", "-O", "+O"):
                i += 2
                continue
            if not flag.startswith(("-", "+")) or flag in ("-", "+"):
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
        self.result.opaque = self.result.opaque or nested.opaque
        return True

    def find_exec(self, args: list[Word]) -> None:
        for i, arg in enumerate(args):
            if arg.text in ("-exec", "-execdir", "-ok", "-okdir"):
                end = next((j for j in range(i + 1, len(args)) if args[j].text in (";", "+")),
                           len(args))  # fmt: skip
                inner = [
                    Word("{}", static=False) if a.text == "{}" else a for a in args[i + 1 : end]
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


GIT_GLOBAL = {
    "-c": True,
    "--config-env": True,
    "-C": True,
    "--git-dir": True,
    "--work-tree": True,
    "--exec-path": False,
    "--namespace": True,
}  # takes a value?


def _flags(program: str, args: list[Word]) -> list[tuple[str, str]]:
    """(name, word) for each option before `--`: `--out=x` is `--out`, `-i.bak` is `-i`,
    `-rR` gives `-r` and `-R`, `-ni.bak` `-n` and `-i` (except for programs whose options are
    words: `find -exec`). git's global options (`-c`, `-C`) count only before its
    subcommand: `git log -c` is a diff format."""
    out = []
    in_git_globals = program == "git"
    skip = False
    for arg in args:
        text = arg.text
        if skip:
            skip = False
            continue
        if text == "--":
            break
        if not text.startswith("-") or text == "-":
            in_git_globals = False
            continue
        if program == "git":
            name = text.split("=", 1)[0]
            if name in GIT_GLOBAL:
                if in_git_globals:
                    out.append((name, text))
                    skip = GIT_GLOBAL[name] and "=" not in text
                continue
        name = text.split("=", 1)[0]
        out.append((name, text))
        if not text.startswith("--") and program not in NO_CLUSTERS:
            body = text[1:]
            # the letters up to a value: -ni.bak is -n -i; -n5 is -n
            letters = body[: next((i for i, ch in enumerate(body) if not ch.isalpha()), None)]
            out.extend((f"-{ch}", text) for ch in letters if f"-{ch}" != name)
    return out


def _flag_risks(program: str, args: list[Word]) -> list[str]:
    table = RISKY_FLAGS.get(program)
    if not table:
        return []
    if "" in table:
        return [f"{program} {table['']}"]
    found = {name: table[name] for name, _ in _flags(program, args) if name in table}
    return [f"{program} {name} {what}" for name, what in found.items()]


def _opaque_flags(program: str, args: list[Word]) -> list[str]:
    names = OPAQUE_FLAGS.get(program, frozenset())
    found = dict.fromkeys(name for name, _ in _flags(program, args) if name in names)
    return [f"{program} {name} can run a program given as text" for name in found]


def analyze(command: str, *, _depth: int = 0) -> Analysis:
    """Every program `command` runs, with the risks that stop it running unasked."""
    if not isinstance(command, str):
        raise TypeError("a command is a string")
    analyzer = _Analyzer(command, _depth)
    if "\0" in command:
        analyzer.risk("contains a NUL character")
        analyzer.result.opaque = True
        return analyzer.result
    tree = tree_sitter.Parser(_LANGUAGE).parse(command.encode("utf-8", errors="surrogatepass"))
    analyzer.visit(tree.root_node)
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


def _tokens(words: tuple[str, ...] | list[str]) -> list[tuple[str, str]]:
    """("flag" | "arg", text) for each word after the program, spelt one way: `-fr` is `-f`,
    `-r`; `--force` is `-f` for rm; paths normalised; everything after `--` an argument."""
    program = program_name(words[0])
    aliases = FLAG_ALIASES.get(program, {})
    out: list[tuple[str, str]] = []
    options_done = False
    for word in words[1:]:
        if options_done or not word.startswith("-") or word == "-":
            out.append(("arg", _norm_path(word) if "/" in word else word))
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
    tokens = _tokens(words)
    return Canonical(program_name(words[0]), frozenset(t for k, t in tokens if k == "flag"),
                     tuple(t for k, t in tokens if k == "arg"))  # fmt: skip


def _norm_path(word: str) -> str:
    lead = "/" if word.startswith("/") else ""
    normal = posixpath.normpath(word)
    return lead + normal.lstrip("/") if lead else normal


def _fits(pattern: str, word: str) -> bool:
    return fnmatch.fnmatchcase(word, pattern) if "*" in pattern else pattern == word


def rule_words(rule: str) -> list[str]:
    """A rule's words, as the shell would split them (`git log`, `npm run "build:prod"`)."""
    return list(_rule_words(rule))


@functools.lru_cache(maxsize=4096)
def _rule_words(rule: str) -> tuple[str, ...]:
    """Parsed once per rule: every command is checked against every rule."""
    analysis = analyze(rule)
    if len(analysis.commands) == 1 and analysis.commands[0].known:
        cmd = analysis.commands[0]
        return (cmd.program, *(a.text for a in cmd.args))
    return tuple(rule.split())


def matches(rule: str, words: tuple[str, ...], *, loose: bool = False) -> bool:
    """Does a rule (`git log`, `npm test`, `rm -rf /`, `*`) cover this command?

    Strict (allow and ask rules): the command starts with the rule's words, the flags among
    them in any order and spelling (`git log` covers `git log -5`; `ls -la` covers `ls -al x`;
    `python --version` does not cover `python -c CODE --version`). `loose` (deny rules): the
    program is compared by name whatever its directory, the rule's flags may be anywhere and
    its other words need only appear in order, so `git push --repo x origin main` is still
    `git push origin main` and `/opt/bin/rm -r x -f /` is still `rm -rf /`."""
    pattern = rule_words(rule)
    if pattern == ["*"]:
        return True
    if not pattern or not words:
        return False
    r, c = canonical(pattern), canonical(words)
    if not loose:
        head = _tokens(words)[: len(_tokens(pattern))]
        c = Canonical(c.program, frozenset(t for k, t in head if k == "flag"),
                      tuple(t for k, t in head if k == "arg"))  # fmt: skip
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
    if not pattern or pattern == ["*"]:
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


def path_risks(command: SimpleCommand, root: Path) -> list[str]:
    """Arguments that name a path outside `root` (through `..`, an absolute path, `~` or a
    symlink) or a secrets file (`.env*`): a reader allowed by rule must not read those."""
    risks = []
    for arg in command.args:
        if not arg.static:
            continue
        text = (
            arg.text.split("=", 1)[1] if arg.text.startswith("-") and "=" in arg.text else arg.text
        )
        if not text or text.startswith("-"):
            continue
        if text.startswith("~"):
            risks.append(f"names a path outside the workspace ({text})")
            continue
        parts = [p for p in re.split(r"[/:]", text) if p]  # `HEAD:.env` names it too
        if any(_is_secret_name(p) for p in parts):
            risks.append(f"names a secrets file ({text})")
            continue
        if arg.glob:
            literal = re.split(r"[*?\[]", text, maxsplit=1)[0].rpartition("/")[0] or "."
            # What the shell will expand it to: a link among the matches may lead out.
            found = list(itertools.islice(globmod.iglob(text, root_dir=root), MAX_GLOB_CHECK + 1))
            if len(found) > MAX_GLOB_CHECK:
                risks.append(f"matches too many paths to check ({text})")
                continue
            candidates = [literal, *found]
        else:
            candidates = [text]
        for path in candidates:
            why = _leaves(root, path)
            if why:
                risks.append(f"{why} ({text})")
                break
    return risks


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
