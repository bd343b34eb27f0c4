"""Regenerate `talos_ls/gates/options.json`: every option of the programs the shell reader
judges, read from the programs' own option lists (`--help`, `git <cmd> -h`, man pages) on this
machine, with their versions.

    .venv/bin/python tools/option_tables.py          # rewrite the data file
    .venv/bin/python tools/option_tables.py --check  # exit 1 when it would change

The reader (`talos_ls/gates/options.py`) never runs this: it loads the data file once, lazily.
A program not installed here keeps its entry from the data file (with the version it was read
from); `MANUAL` holds programs no help text describes well enough (bash builtins, `tree`,
`python`), each with the document it was written from. Which options are risky is not decided
here but in `talos_ls/gates/shell.py`; this file only says what options exist and whether each
takes a value (0: none, 1: required, 2: optional and attached only).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "talos_ls" / "gates" / "options.json"
NONE, REQUIRED, OPTIONAL = 0, 1, 2

# program -> (how to read its options, parser style, accepts -NUM)
# styles: gnu (getopt_long, options anywhere), stop (options end at the first operand, as
# for programs that run a command: env, nice, xargs), git (parse-options: --no-X negations),
# find (single-dash predicates with fixed arities), clap (ripgrep)
GNU_HELP = {
    # the built-in allow rules' readers
    "ls": "gnu",
    "cat": "gnu",
    "head": "gnu",
    "tail": "gnu",
    "wc": "gnu",
    "grep": "gnu",
    "du": "gnu",
    "sort": "gnu",
    "uniq": "gnu",
    "diff": "gnu",
    "basename": "gnu",
    "dirname": "gnu",
    "date": "gnu",
    "stat": "gnu",
    "file": "gnu",
    # programs with risky or aliased flags
    "sed": "gnu",
    "tee": "gnu",
    "cp": "gnu",
    "rm": "gnu",
    "chmod": "gnu",
    "chown": "gnu",
    "tar": "gnu",
    "curl": "gnu",
    "make": "gnu",
    "man": "gnu",
    "wget": "gnu",
    # programs that run a program named after their options (su, runuser and script permute:
    # `su root -c CMD`, `script out -c CMD`)
    "env": "stop",
    "nice": "stop",
    "timeout": "stop",
    "stdbuf": "stop",
    "chroot": "stop",
    "nohup": "stop",
    "ionice": "stop",
    "chrt": "stop",
    "taskset": "stop",
    "flock": "stop",
    "setpriv": "stop",
    "unshare": "stop",
    "nsenter": "stop",
    "runuser": "gnu",
    "su": "gnu",
    "script": "gnu",
    "watch": "stop",
    "setsid": "stop",
    "xargs": "stop",
    "systemd-run": "stop",
    "setarch": "stop",
    "prlimit": "stop",
    "runcon": "stop",
    # programs with options that run a program given as text
    "split": "gnu",
    "sdiff": "gnu",
    "diff3": "gnu",
}
NUMBERS = {
    "head",
    "tail",
    "grep",
    "diff",
    "nice",
    "git log",
    "git show",
    "git whatchanged",
    "git rev-list",
}
HELP_FLAG = {"strace": "-h", "mawk": "-Wusage"}
STOP_HELP = {"strace": "stop", "mawk": "stop"}  # `strace -h`; awk: options end at the program
VERSION_FLAG = {"mawk": "-Wversion"}
# `awk` (and its other names) may be gawk, mawk, busybox's or the one true awk, whichever the
# system installed: read with every option any of them has (`AWK_FLAVOURS`, in this order).
AWK_NAMES = ("awk", "nawk", "original-awk")
AWK_FLAVOURS = ("gawk", "mawk")
SYNOPSIS = {"ssh": "gnu", "scp": "gnu", "sftp": "gnu"}  # BSD man pages: options in SYNOPSIS
# git subcommands: the built-in allow rules' ones, and those with options that run programs
GIT_SUBCOMMANDS = (
    "status",
    "log",
    "diff",
    "show",
    "branch",
    "rev-parse",
    "ls-files",
    "blame",
    "clone",
    "fetch",
    "pull",
    "push",
    "ls-remote",
    "archive",
    "difftool",
    "rebase",
    "grep",
    "commit",
    "add",
    "checkout",
    "switch",
    "restore",
    "reset",
    "merge",
    "cherry-pick",
    "revert",
    "tag",
    "config",
    "init",
    "am",
    "apply",
    "format-patch",
    "clean",
    "rm",
    "mv",
    "describe",
    "shortlog",
    "whatchanged",
    "rev-list",
    "cat-file",
    "ls-tree",
    "for-each-ref",
    "fetch-pack",
    "send-pack",
    "gc",
    "help",
)
GIT_MAN = {"log", "show", "whatchanged", "rev-list", "rev-parse", "diff", "fetch-pack", "send-pack"}

# Programs no help text describes well enough: written from the named documents.
MANUAL: dict[str, dict] = {
    "echo": {
        "source": "bash(1) SHELL BUILTIN COMMANDS: echo [-neE] [arg ...]; any other word "
        "is printed",
        "style": "words",
        "options": [],
    },
    "true": {
        "source": "bash(1) SHELL BUILTIN COMMANDS: true ignores its arguments",
        "style": "words",
        "options": [],
    },
    "pwd": {
        "source": "bash(1) SHELL BUILTIN COMMANDS: pwd [-LP]",
        "style": "gnu",
        "options": [["-L", 0], ["-P", 0]],
    },
    "which": {
        "source": "/usr/bin/which (debianutils): getopts a",
        "style": "gnu",
        "options": [["-a", 0], ["-s", 0]],
    },
    "python": {
        "source": "python3 --help (Python 3.11): -c and -m end the options",
        "style": "python",
        "options": [
            ["-b", 0],
            ["-B", 0],
            ["-c", 1],
            ["-d", 0],
            ["-E", 0],
            ["-h -? --help", 0],
            ["-i", 0],
            ["-I", 0],
            ["-m", 1],
            ["-O", 0],
            ["-P", 0],
            ["-q", 0],
            ["-s", 0],
            ["-S", 0],
            ["-u", 0],
            ["-v", 0],
            ["-V --version", 0],
            ["-W", 1],
            ["-x", 0],
            ["-X", 1],
            ["--check-hash-based-pycs", 1],
            ["--help-env", 0],
            ["--help-xoptions", 0],
            ["--help-all", 0],
        ],
    },
    "gawk": {
        "source": "gawk --help and gawk(1), 5.2 and 5.3 (not installed here); busybox awk's "
        "-e, -f, -F, -v are among them",
        "style": "stop",
        "options": [
            ["-f --file", 1],
            ["-F --field-separator", 1],
            ["-v --assign", 1],
            ["-b --characters-as-bytes", 0],
            ["-c --traditional", 0],
            ["-C --copyright", 0],
            ["-d --dump-variables", 2],
            ["-D --debug", 2],
            ["-e --source", 1],
            ["-E --exec", 1],
            ["-g --gen-pot", 0],
            ["-h --help", 0],
            ["-i --include", 1],
            ["-I --trace", 0],
            ["-k --csv", 0],
            ["-l --load", 1],
            ["-L --lint", 2],
            ["-M --bignum", 0],
            ["-N --use-lc-numeric", 0],
            ["-n --non-decimal-data", 0],
            ["-o --pretty-print", 2],
            ["-O --optimize", 0],
            ["-p --profile", 2],
            ["-P --posix", 0],
            ["-r --re-interval", 0],
            ["-s --no-optimize", 0],
            ["-S --sandbox", 0],
            ["-t --lint-old", 0],
            ["-V --version", 0],
            ["-W", 1],
        ],
    },
    "tree": {
        "source": "tree(1) 2.1.0 manual page (not installed here)",
        "style": "gnu",
        "options": [[f"-{c}", 0] for c in "adlfxRqNQpugshDFvtcUriASnCXJ"]
        + [
            ["-L", 1],
            ["-P", 1],
            ["-I", 1],
            ["-o", 1],
            ["-H", 1],
            ["-T", 1],
            ["--gitignore", 0],
            ["--gitfile", 1],
            ["--ignore-case", 0],
            ["--matchdirs", 0],
            ["--metafirst", 0],
            ["--prune", 0],
            ["--info", 0],
            ["--infofile", 1],
            ["--noreport", 0],
            ["--charset", 1],
            ["--filelimit", 1],
            ["--si", 0],
            ["--du", 0],
            ["--timefmt", 1],
            ["--inodes", 0],
            ["--device", 0],
            ["--dirsfirst", 0],
            ["--filesfirst", 0],
            ["--sort", 1],
            ["--nolinks", 0],
            ["--hintro", 1],
            ["--houtro", 1],
            ["--fromfile", 0],
            ["--fromtabfile", 0],
            ["--fflinks", 0],
            ["--help", 0],
            ["--version", 0],
        ],
    },
}
# prlimit's resources, each its short letter then its long name
PRLIMIT_RESOURCES = (
    "ccore ddata enice ffsize isigpending lmemlock mrss nnofile qmsgqueue "
    "rrtprio sstack tcpu unproc vas xlocks yrttime"
)
# Options a program has but its help does not list (or lists so that the shape is lost).
EXTRA = {
    "file": [
        ["-C --compile", 0],
        ["-P --parameter", 1],
        ["-d", 0],
        ["-s --special-files", 0],
        ["-r --raw", 0],
        ["-E", 0],
        ["-S --no-sandbox", 0],
    ],
    "find": [
        ["-regextype", 1],
        ["-d", 0],
        ["-noleaf", 0],
        ["-help --help", 0],
        ["-version --version", 0],
        ["-files0-from", 1],
        ["-print", 0],
        ["-true", 0],
        ["-false", 0],
    ],
    "ls": [["-1", 0]],
    "wget": [["-n", 1]],  # -nv, -nd, -nH... are -n with a value
    "curl": [["-x --proxy", 1], ["--preproxy", 1], ["-: --next", 0]],  # host[:port] required
    # lines whose description starts with an option (`-T reads...`) or is one space away
    "tar": [
        ["--null", 0],
        ["--no-null", 0],
        ["--verbatim-files-from", 0],
        ["--no-verbatim-files-from", 0],
    ],
    "unshare": [["--map-users", 1], ["--map-groups", 1]],
    "mawk": [["-v", 1]],  # `-v var=value`: a metavar with `=` is not read as one
    # a resource's limit is optional and attached (`-n10`, `--nofile=10`); the help hides it
    "prlimit": [[f"-{pair[0]} --{pair[1:]}", 2] for pair in PRLIMIT_RESOURCES.split()],
    "nsenter": [["--wdns", 1]],
    "su": [["-l --login", 0]],
    "runuser": [["-l --login", 0]],
    # git diff reads these before its option parser (builtin/diff.c): not in `git diff -h`
    "git diff": [
        ["--no-index", 0],
        ["--cached --staged", 0],
        ["--merge-base", 0],
        ["-1 --base", 0],
        ["-2 --ours", 0],
        ["-3 --theirs", 0],
    ],
    "git rev-parse": [
        ["--git-dir", 0],
        ["--short", 2],
        ["--abbrev-ref", 2],
        ["--show-toplevel", 0],
        ["--verify", 0],
        ["-q --quiet", 0],
    ],
}


def run(*argv: str) -> str:
    env = {
        **os.environ,
        "LC_ALL": "C",
        "MANWIDTH": "200",
        "COLUMNS": "200",
        "GIT_PAGER": "cat",
        "PAGER": "cat",
        "MANPAGER": "cat",
    }
    proc = subprocess.run(
        argv, capture_output=True, text=True, env=env, timeout=60, stdin=subprocess.DEVNULL
    )
    return proc.stdout + proc.stderr


def version(program: str) -> str:
    if program == "ssh" or program in ("scp", "sftp"):
        return run("ssh", "-V").strip().splitlines()[0].split(",")[0]
    if program.startswith("git"):
        return run("git", "--version").strip()
    for flag in (VERSION_FLAG.get(program, "--version"), "-V", "-v"):
        out = run(program, flag).strip()
        if out and "nrecognized" not in out and "invalid" not in out and "llegal" not in out:
            return re.split(r",| \(x86| built on", out.splitlines()[0])[0].strip()
    return "unknown"


# ---------------------------------------------------------------- parsing help text
_META = (  # <file>, [a|b], FILE, bind_interface (BSD), script-file (sed), N, {a,b}
    r"(?:<[^>]*>\S*|\[[^\s\]]*\]\S*|[A-Z][A-Z0-9_:.|,-]*|[a-z][a-z0-9_|<>-]*|N|#"
    r"|\{[^}]*\})"
)
_SPELLING = re.compile(
    r"(?P<name>--?[A-Za-z0-9?#.](?:[A-Za-z0-9_.#?+-]*[A-Za-z0-9#?])?"
    r"|--\[no-\][A-Za-z0-9][A-Za-z0-9_-]*)"
    r"(?P<rest>\[\S*|=\S+|<\S*| " + _META + r"| \[" + _META + r"\])?(?:\.\.\.)?$"
)
LITERAL = re.compile(r"=[a-z][a-z-]*$")  # `-p, --indicator-style=slash`: -p means that value


def _head(line: str) -> str:
    """The option part of a help line (before its description)."""
    text = line.strip().replace("\t", "    ")
    # A metavar may hold spaces (curl: `<file name>`): keep <...> together.
    out, depth, i = [], 0, 0
    while i < len(text):
        ch = text[i]
        depth += {"<": 1, ">": -1, "[": 1, "]": -1}.get(ch, 0)
        if depth <= 0 and text.startswith("  ", i):
            rest = text[i:].lstrip()
            if rest.startswith("-") and out:  # stat: `-c  --format=F`; wget: `-e,  --execute`
                out.append(" " if out[-1] == "," else ", ")
                i = len(text) - len(rest)
                continue
            break
        if depth <= 0 and text.startswith(" : ", i):  # python: `-c cmd : program`
            break
        out.append(ch)
        i += 1
    head = "".join(out).strip().rstrip(",")
    # curl: `--alt-svc <file name> Enable alt-svc`: the description after one space
    m = re.match(r"^([^<]*<[^>]*>(?:\.\.\.)?) +\S", head) or re.match(
        r"^((?:[^<]|<[^>]*>)*?) [A-Z][a-z(]", head
    )  # chrt: `-D, --sched-deadline <ns> deadline parameter`; curl: `<list> SSL ciphers`
    return m.group(1) if m and head.startswith("-") else head


def _parts(head: str) -> list[str]:
    """The spellings of one option line, split at commas (and `|`, or a space before a dash)
    outside brackets: `--stat[=<width>[,<name-width>]]` is one."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(head):
        depth += {"<": 1, ">": -1, "[": 1, "]": -1, "{": 1, "}": -1}.get(ch, 0)
        if depth > 0:
            continue
        if ch == "," or (ch == " " and re.match(r" +(\| +)?--?[A-Za-z]", head[i:])):
            parts.append(head[start:i])
            start = i + 1
    parts.append(head[start:])
    return [p.strip(" |") for p in parts if p.strip(" |")]


def parse_line(
    line: str, metavar_required: bool = False, retry: bool = True
) -> list[tuple[str, int, bool, bool]] | None:
    """[(spelling, arity, explicit, literal)] for one option line, or None when it is not
    one. `explicit`: the spelling shows its own value; `literal`: `--check=quiet`, a value."""
    head = _head(line)
    if not head.startswith("-") or head in ("-", "--"):
        return None
    found = _parse_head(head, metavar_required)
    if found is None and retry and not metavar_required:
        # tar: `--exclude-caches-under exclude everything`: one space before the description.
        # The spellings are the words up to one not ending in a comma (`--nh, --no-hyph...`).
        words = head.split(" ")
        end = 1
        while end < len(words) and words[end - 1].endswith(","):
            end += 1
        if words[end - 1].startswith("--"):
            found = _parse_head(" ".join(words[:end]), metavar_required)
    return found


def _parse_head(head: str, metavar_required: bool) -> list[tuple[str, int, bool, bool]] | None:
    found: dict[str, tuple[int, bool, bool]] = {}
    for part in _parts(head):
        if re.fullmatch(r"-<(number|n|num)>|-NUM", part):
            continue  # `-<number>`: the -NUM form, read by the parser
        m = _SPELLING.match(part)
        if not m:
            return None
        name, rest = m.group("name"), m.group("rest") or ""
        if metavar_required and rest.startswith(" ") and not rest.strip().startswith(("<", "[")):
            return None  # git man pages: a heading that is prose, not an option
        literal = bool(LITERAL.match(rest))
        arity = NONE
        if rest.startswith("[") or rest.startswith(" ["):
            arity = OPTIONAL
        elif rest and not literal:
            arity = REQUIRED
        names = [(name, arity)]
        if name.startswith("--[no-]"):
            names = [("--" + name[7:], arity), ("--no-" + name[7:], NONE)]
        for n, a in names:
            if n in found:  # `--expand-tabs=<n>, --expand-tabs`; `--check, --check=quiet`
                if literal or found[n][0] != a:
                    found[n] = (OPTIONAL, True, False)
                continue
            found[n] = (a, bool(rest), literal)
    if not found:
        return None
    if any(e and not n.startswith("--") for n, (_, e, _) in found.items()):
        # `-e script, --expression=script`: a short one shows a value, so `=script` is one too
        found = {n: (REQUIRED if lit else a, e, False) for n, (a, e, lit) in found.items()}
    return [(n, a, e, lit) for n, (a, e, lit) in found.items()]


def group(spellings: list[tuple[str, int, bool, bool]], style: str = "gnu") -> list:
    """Options from one line: [[spellings, arity], ...]. A short spelling without a value
    takes the long one's required value when no short one on the line shows its own (GNU:
    "Mandatory arguments to long options are mandatory for short options too"; `diff -c,
    -C NUM`); an optional one it does not take (`ls -F` and `--classify[=WHEN]`); a long
    spelling with a literal value (`-p, --indicator-style=slash`) is left to its own line."""
    if style != "find":  # -DD, -nv: repeated or valued short options, not names
        spellings = [s for s in spellings if s[0].startswith("--") or len(s[0]) == 2]
    literal = any(lit for *_, lit in spellings)
    spellings = [s for s in spellings if not s[3]]
    longs = {a for n, a, _, _ in spellings if n.startswith("--")}
    shorts_explicit = any(e for n, _, e, _ in spellings if not n.startswith("--"))
    out = []
    for name, arity, explicit, _ in spellings:
        if (
            not name.startswith("--")
            and not explicit
            and not shorts_explicit
            and REQUIRED in longs
            and not literal
        ):
            arity = REQUIRED
        if style == "git" and not name.startswith("--") and not explicit and longs:
            arity = max(longs)  # parse-options: one option, `-u[<mode>]` like `--untracked`
        out.append((name, arity))
    positive = {n for n, _ in out}
    negations = [n for n, _ in out if n.startswith("--no-") and "--" + n[5:] in positive]
    by_arity: dict[int, list[str]] = {}
    for name, arity in out:
        if name not in negations:
            by_arity.setdefault(arity, []).append(name)
    # `--textconv, --no-textconv`: the negation turns it off; an option of its own
    return [[" ".join(names), arity] for arity, names in by_arity.items()] + [
        [n, NONE] for n in negations
    ]


def options_from_help(
    text: str, metavar_required: bool = False, retry: bool = True, style: str = "gnu"
) -> list:
    out: list = []
    for line in text.splitlines():
        indent = 12 if metavar_required else 8  # deeper: a description (git: sub-options)
        if not re.match(rf"^\s{{0,{indent}}}[-]", line.expandtabs()):
            continue
        found = parse_line(line, metavar_required, retry)
        if not found:
            continue
        out.extend(group(found, style))
    return dedupe(out)


def dedupe(options: list) -> list:
    """The first description of a spelling wins (man pages repeat some in prose)."""
    seen: set[str] = set()
    out = []
    for names, arity in options:
        fresh = [n for n in names.split() if n not in seen]
        if fresh:
            seen.update(fresh)
            out.append([" ".join(fresh), arity])
    return out


def options_from_synopsis(page: str) -> list:
    """BSD manual pages (ssh): `[-46AaCf]` flags and `[-B bind_interface]` options."""
    text = run("man", "-P", "cat", page)
    synopsis = text.split("SYNOPSIS", 1)[1].split("DESCRIPTION", 1)[0]
    synopsis = synopsis.split("\n\n")[0] if page != "sftp" else synopsis
    out: list = []
    for m in re.finditer(r"\[-([A-Za-z0-9]+)(?: ([^\]]+))?\]", synopsis):
        letters, arg = m.group(1), m.group(2)
        if arg:
            out.append([f"-{letters}", REQUIRED])
        else:
            out += [[f"-{c}", NONE] for c in letters]
    return dedupe(out)


def options_from_find() -> list:
    """`find --help`: predicates with the words they take (`-fprintf FILE FORMAT`)."""
    text = run("find", "--help")
    out: list = [["-H", 0], ["-L", 0], ["-P", 0], ["-D", 1], ["-O", 2]]
    body = text.split("Operators", 1)[1].split("Other common options", 1)[0]
    for section in re.split(r"\n\s*\n", body)[1:]:
        lines = [ln for ln in section.splitlines()[1:] if ln.startswith(" ")]
        words = " ".join(lines).split()
        i = 0
        while i < len(words):
            word = words[i]
            i += 1
            if not re.fullmatch(r"-[a-z0-9_]+", word):
                continue
            n = 0
            while (i < len(words) and not words[i].startswith("-")) or (
                i < len(words) and words[i].startswith("[-")
            ):
                if words[i] in (";", "{}", "+"):
                    i += 1
                    continue
                n, i = n + 1, i + 1
            if word in ("-exec", "-execdir", "-ok", "-okdir"):
                n = -1  # a command up to `;` or `+`
            out.append([word, n])
    return dedupe(EXTRA["find"] + out)


def git_options(sub: str) -> list:
    """`git SUB -h` (parse-options: shorts, longs, arguments) and the long options git's
    completion helper lists; for the revision walkers and git itself, the manual page."""
    out: list = list(EXTRA.get(f"git {sub}".strip(), []))
    if sub in GIT_MAN or sub == "":
        page = "git" if sub == "" else f"git-{sub}"
        text = run("man", "-P", "cat", page)
        if sub == "":
            text = text.split("OPTIONS", 1)[1].split("GIT COMMANDS", 1)[0]
        out += options_from_help(text, metavar_required=True)
    if sub:
        out += options_from_help(run("git", sub, "-h"), retry=False, style="git")
        helper = run("git", sub, "--git-completion-helper-all").split()  # hidden ones too
        if sub in ("log", "show", "whatchanged", "rev-list"):  # walkers take diff options too
            helper += run("git", "diff", "--git-completion-helper-all").split()
        known = {n for names, _ in out for n in names.split()}
        for word in helper:
            if not word.startswith("--") or word == "--":
                continue
            name, eq = word.rstrip("="), word.endswith("=")
            if name not in known:
                out.append([name, REQUIRED if eq else NONE])
                known.add(name)
    return dedupe(out)


def clap_options() -> list:
    """ripgrep 13 (clap 2): `-A, --after-context <NUM>`; its negations (`--no-unicode`,
    `--unicode`) are named only in the text, and take no value."""
    text = run("rg", "--help")
    out = options_from_help(text)
    known = {n for names, _ in out for n in names.split()}
    named = re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*[a-z0-9])\b", text)
    return out + [[name, NONE] for name in dict.fromkeys(named) if name not in known]


# ------------------------------------------------------------------------ table
def generate(old: dict) -> dict:
    programs: dict[str, dict] = {}

    def add(name: str, style: str, options: list, source: str, program: str) -> None:
        if not options:
            raise SystemExit(f"no options read for {name} ({source})")
        entry = {"source": source, "version": version(program), "style": style, "options": options}
        if name in NUMBERS:
            entry["numbers"] = True
        programs[name] = entry

    def installed(program: str) -> bool:
        return shutil.which(program) is not None

    for program, style in GNU_HELP.items():
        if installed(program):
            flags = ["--help", "all"] if program == "curl" else ["--help"]
            opts = EXTRA.get(program, []) + options_from_help(run(program, *flags))
            add(program, style, dedupe(opts), f"{program} --help", program)
    for program, flag in HELP_FLAG.items():
        if installed(program):
            opts = dedupe(EXTRA.get(program, []) + options_from_help(run(program, flag)))
            add(program, STOP_HELP[program], opts, f"{program} {flag}", program)
    for program, style in SYNOPSIS.items():
        if installed(program):
            add(
                program, style, options_from_synopsis(program), f"man {program} (SYNOPSIS)", program
            )
    if installed("find"):
        add("find", "find", options_from_find(), "find --help", "find")
    if installed("rg"):
        add("rg", "clap", clap_options(), "rg --help", "rg")
    if installed("git"):
        add("git", "git", git_options(""), "man git (OPTIONS)", "git")
        for sub in GIT_SUBCOMMANDS:
            how = f"man git-{sub}; git {sub} -h" if sub in GIT_MAN else f"git {sub} -h"
            add(f"git {sub}", "git", git_options(sub), how + "; --git-completion-helper-all", "git")
    for name, entry in MANUAL.items():
        programs[name] = {**entry, "version": "see source"}
    for name, entry in old.get("programs", {}).items():
        if name not in AWK_NAMES:
            programs.setdefault(name, entry)  # not installed here: keep what was read before
    flavours = [f for f in AWK_FLAVOURS if f in programs]
    for name in AWK_NAMES:
        programs[name] = {
            "source": "every option of "
            + ", ".join(
                f"{f} ({programs[f]['version'].replace('see source', 'its manual')})"
                for f in flavours
            ),
            "version": "see source",
            "style": "stop",
            "options": dedupe([o for f in flavours for o in programs[f]["options"]]),
        }
    return {
        "about": "Generated by tools/option_tables.py from each program's own option list "
        "(source, version); arity 0: no value, 1: a value, 2: an optional attached value. "
        "Do not edit: change the script and run it again.",
        "programs": dict(sorted(programs.items())),
    }


def dump(table: dict) -> str:
    """JSON with one program per block and one option per line: reviewable as a diff."""
    lines = ["{", f' "about": {json.dumps(table["about"])},', ' "programs": {']
    programs = list(table["programs"].items())
    for n, (name, entry) in enumerate(programs):
        head = {k: v for k, v in entry.items() if k != "options"}
        lines.append(f"  {json.dumps(name)}: {{")
        for key, value in head.items():
            lines.append(f"   {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)},")
        options = [f"    {json.dumps(o)}" for o in entry["options"]]
        lines.append(
            '   "options": [' + ("\n" + ",\n".join(options) + "\n   ]" if options else "]")
        )
        lines.append("  }" + ("," if n < len(programs) - 1 else ""))
    lines += [" }", "}", ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file would change")
    args = parser.parse_args()
    old = json.loads(DATA.read_text()) if DATA.exists() else {}
    new = generate(old)
    text = dump(new)
    if args.check:
        if DATA.exists() and DATA.read_text() == text:
            return 0
        print(f"{DATA} is out of date: run {sys.argv[0]}", file=sys.stderr)
        return 1
    DATA.write_text(text)
    print(f"{len(new['programs'])} programs written to {DATA}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
