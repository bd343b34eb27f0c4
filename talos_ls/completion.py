"""Shell completion for bash, zsh and fish, generated from the argparse parser itself.

`script(shell, parser)` walks the parser (its commands, their sub-actions, every option, the
choices of an option) into a table the generated script looks words up in, so the completion
can never disagree with `--help`. No dependency and nothing runs Python at TAB time: the script
is static, printed once by `talos completion SHELL` and sourced by the shell.

The generated scripts share one idea: walk the words typed so far, skipping options and the
value after an option that takes one, and follow each word that names a command of the current
parser; the path reached ("", "memory", "memory add") selects what to offer. An option with
`choices` completes its choices; one whose metavar is DIR completes directories and one whose
metavar is PATH or FILE completes files.
"""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field

from .constants import SHELLS


@dataclass
class Option:
    flags: list[str]
    help: str
    takes_value: bool
    choices: list[str] | None = None
    kind: str | None = None  # "dir", "file" or None


@dataclass
class Node:
    """One parser: the command path that reaches it, its commands and its options."""

    path: str  # "" for the program, else the commands joined by spaces
    commands: dict[str, str] = field(default_factory=dict)  # name -> help
    arguments: list[str] = field(default_factory=list)  # the choices of its positionals
    options: list[Option] = field(default_factory=list)


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The action's help as --help shows it (%(default)s expanded), on one short line."""
    if not action.help or action.help == argparse.SUPPRESS:
        return ""
    try:
        text = parser._get_formatter()._expand_help(action)
    except (KeyError, TypeError, ValueError):
        text = action.help
    text = " ".join(text.split())
    return text if len(text) <= 70 else text[:69] + "…"


_KINDS: dict[object, str] = {"DIR": "dir", "PATH": "file", "FILE": "file"}  # by metavar


def walk(parser: argparse.ArgumentParser) -> list[Node]:
    """Every parser reachable from `parser`, the program's first."""
    nodes: list[Node] = []

    def visit(p: argparse.ArgumentParser, path: str) -> None:
        node = Node(path)
        nodes.append(node)
        children: list[tuple[str, argparse.ArgumentParser]] = []
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                helps = {a.dest: _help(p, a) for a in action._choices_actions}
                for name, child in action.choices.items():
                    node.commands[name] = helps.get(name, "")
                    children.append((name, child))
            elif action.option_strings and action.help != argparse.SUPPRESS:
                choices = None if action.choices is None else [str(c) for c in action.choices]
                node.options.append(
                    Option(
                        list(action.option_strings),
                        _help(p, action),
                        action.nargs != 0,
                        choices,
                        _KINDS.get(action.metavar),
                    )
                )
            elif not action.option_strings and action.choices is not None:
                node.arguments.extend(str(c) for c in action.choices)
        for name, child in children:
            visit(child, f"{path} {name}".strip())

    visit(parser, "")
    return nodes


def _ident(prog: str) -> str:
    return "_" + re.sub(r"\W", "_", prog)


# ------------------------------------------------------------------ bash
def _case(entries: list[tuple[str, list[str]]], indent: str = "        ") -> str:
    """The arms of a `case`: a quoted pattern -> its words, printed one a line (quoted, so a
    space, a quote or `$(...)` in a word is text)."""
    return "\n".join(
        f"{indent}{shlex.quote(pattern)}) printf '%s\\n' "
        f"{' '.join(shlex.quote(w) for w in words)} ;;"
        for pattern, words in entries
    )


def _tables(nodes: list[Node]) -> dict[str, list[tuple[str, list[str]]]]:
    """Lookup tables keyed "path" or "path|--option", shared by the bash and zsh scripts."""
    names = ("commands", "options", "valued", "choices", "kinds", "arguments")
    t: dict[str, list[tuple[str, list[str]]]] = {name: [] for name in names}
    for n in nodes:
        if n.commands:
            t["commands"].append((n.path, list(n.commands)))
        if n.arguments:
            t["arguments"].append((n.path, n.arguments))
        t["options"].append((n.path, [f for o in n.options for f in o.flags]))
        for o in n.options:
            for flag in o.flags:
                key = f"{n.path}|{flag}"
                if o.takes_value:
                    t["valued"].append((key, ["1"]))
                if o.choices:
                    t["choices"].append((key, o.choices))
                if o.kind:
                    t["kinds"].append((key, [o.kind]))
    return t


def _bash(parser: argparse.ArgumentParser) -> str:
    prog = parser.prog
    f = _ident(prog)
    t = _tables(walk(parser))
    lookups = "\n".join(
        f'{f}_{name}() {{\n    case "$1" in\n{_case(entries)}\n    esac\n}}'
        for name, entries in t.items()
    )
    return f"""# bash completion for {prog}, generated by `{prog} completion bash`
# Install: {prog} completion bash > ~/.local/share/bash-completion/completions/{prog}
{lookups}
{f}_path() {{
    # The command path the words before the cursor reach ("", "memory", "memory add").
    local cmdpath="" word skip=0 i
    for (( i = 1; i < COMP_CWORD; i++ )); do
        word="${{COMP_WORDS[i]}}"
        if (( skip )); then skip=0; continue; fi
        case "$word" in
            --*=*) continue ;;
            -*) [[ -n "$({f}_valued "$cmdpath|$word")" ]] && skip=1; continue ;;
        esac
        if {f}_is "$word" "$({f}_commands "$cmdpath")"; then
            cmdpath="${{cmdpath:+$cmdpath }}$word"
        fi
    done
    printf '%s' "$cmdpath"
}}
{f}_is() {{
    # Whether $1 is one of the lines of $2.
    local line
    while IFS= read -r line; do [[ "$line" == "$1" ]] && return 0; done <<< "$2"
    return 1
}}
{f}_offer() {{
    # Each line of $2 that starts with $1, quoted for the command line, into COMPREPLY.
    local line quoted
    while IFS= read -r line; do
        [[ -n "$line" ]] || continue
        printf -v quoted '%q' "$line"
        [[ "$line" == "$1"* || "$quoted" == "$1"* ]] && COMPREPLY+=("$quoted")
    done <<< "$2"
}}
{f}() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="" cmdpath kind
    (( COMP_CWORD > 0 )) && prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    cmdpath="$({f}_path)"
    COMPREPLY=()
    if [[ "$prev" == -* && -n "$({f}_valued "$cmdpath|$prev")" ]]; then
        kind="$({f}_kinds "$cmdpath|$prev")"
        if [[ "$kind" == dir ]]; then
            compopt -o filenames 2>/dev/null
            mapfile -t COMPREPLY < <(compgen -d -- "$cur")
        elif [[ "$kind" == file ]]; then
            compopt -o filenames 2>/dev/null
            mapfile -t COMPREPLY < <(compgen -f -- "$cur")
        else
            {f}_offer "$cur" "$({f}_choices "$cmdpath|$prev")"
        fi
        return 0
    fi
    if [[ "$cur" == -* ]]; then
        {f}_offer "$cur" "$({f}_options "$cmdpath")"
    else
        {f}_offer "$cur" "$({f}_commands "$cmdpath")"
        {f}_offer "$cur" "$({f}_arguments "$cmdpath")"
    fi
    return 0
}}
complete -F {f} {prog}
"""


# ------------------------------------------------------------------ zsh
def _zsh_arm(path: str, entries: Iterable[tuple[str, str]]) -> str:
    """A `case` arm setting `reply` to `_describe` entries (name, help), each quoted: a colon
    in a name is escaped, as _describe needs."""
    quoted = (shlex.quote(name.replace(":", r"\:") + (f":{h}" if h else "")) for name, h in entries)
    return f"        {shlex.quote(path)}) reply=({' '.join(quoted)}) ;;"


def _zsh(parser: argparse.ArgumentParser) -> str:
    prog = parser.prog
    f = _ident(prog)
    nodes = walk(parser)
    t = _tables(nodes)
    described = [_zsh_arm(n.path, n.commands.items()) for n in nodes if n.commands]
    opts = [_zsh_arm(n.path, [(f, o.help) for o in n.options for f in o.flags]) for n in nodes]
    lookups = "\n".join(
        f'{f}_{name}() {{\n    case "$1" in\n{_case(t[name])}\n    esac\n}}'
        for name in ("commands", "valued", "choices", "kinds", "arguments")
    )
    return f"""#compdef {prog}
# zsh completion for {prog}, generated by `{prog} completion zsh`
# Install: {prog} completion zsh > "${{fpath[1]}}/_{prog}" (then start a new shell), or
# add `source <({prog} completion zsh)` to ~/.zshrc after compinit.
{lookups}
{f}_described_commands() {{
    reply=()
    case "$1" in
{chr(10).join(described)}
    esac
}}
{f}_described_options() {{
    reply=()
    case "$1" in
{chr(10).join(opts)}
    esac
}}
{f}() {{
    local cmdpath="" word prev="" skip=0 i kind
    local -a reply names
    for (( i = 2; i < CURRENT; i++ )); do
        word="${{words[i]}}"
        if (( skip )); then skip=0; continue; fi
        case "$word" in
            --*=*) continue ;;
            -*) [[ -n "$({f}_valued "$cmdpath|$word")" ]] && skip=1; continue ;;
        esac
        names=("${{(@f)$({f}_commands "$cmdpath")}}")
        if (( ${{names[(Ie)$word]}} )); then
            cmdpath="${{cmdpath:+$cmdpath }}$word"
        fi
    done
    (( CURRENT > 2 )) && prev="${{words[CURRENT-1]}}"
    if [[ "$prev" == -* && -n "$({f}_valued "$cmdpath|$prev")" ]]; then
        kind="$({f}_kinds "$cmdpath|$prev")"
        case "$kind" in
            dir) _files -/ ;;
            file) _files ;;
            *) local -a choices; choices=("${{(@f)$({f}_choices "$cmdpath|$prev")}}")
               [[ -n "${{choices[1]}}" ]] && compadd -a choices ;;
        esac
        return
    fi
    if [[ "${{words[CURRENT]}}" == -* ]]; then
        {f}_described_options "$cmdpath"
        (( ${{#reply}} )) && _describe -t options option reply
    else
        {f}_described_commands "$cmdpath"
        (( ${{#reply}} )) && _describe -t commands command reply
        local -a arguments; arguments=("${{(@f)$({f}_arguments "$cmdpath")}}")
        [[ -n "${{arguments[1]}}" ]] && compadd -a arguments
    fi
}}
if [[ "$funcstack[1]" == {f} ]]; then
    {f} "$@"
else
    compdef {f} {prog}
fi
"""


# ------------------------------------------------------------------ fish
def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


_FISH_SPECIAL = set(" \t$()'\"\\*?~#{}[]<>&|;%^!")


def _fish_token(word: str) -> str:
    """`word` as one token of fish's syntax: nothing in it expands (`complete -a` tokenizes
    and expands its argument)."""
    return "".join("\\n" if c == "\n" else "\\" + c if c in _FISH_SPECIAL else c for c in word)


def _fish(parser: argparse.ArgumentParser) -> str:
    prog = parser.prog
    f = _ident(prog).lstrip("_")
    nodes = walk(parser)
    valued = [
        f"{n.path}|{flag}" for n in nodes for o in n.options if o.takes_value for flag in o.flags
    ]
    lines = [
        f"# fish completion for {prog}, generated by `{prog} completion fish`",
        f"# Install: {prog} completion fish > ~/.config/fish/completions/{prog}.fish",
        f"complete -c {prog} -e",
        f"set -g __{f}_valued " + " ".join(_fish_quote(v) for v in valued),
        f"function __{f}_commands",
        "    switch $argv[1]",
    ]
    for n in nodes:
        if n.commands:
            lines.append(f"        case {_fish_quote(n.path)}")
            lines.append("            printf '%s\\n' " + " ".join(map(_fish_quote, n.commands)))
    lines += [
        "    end",
        "end",
        f"function __{f}_path",
        "    # The command path the words before the cursor reach.",
        "    set -l words (commandline -opc)",
        "    set -l cmdpath ''",
        "    set -l skip 0",
        "    for word in $words[2..-1]",
        "        if test $skip = 1",
        "            set skip 0",
        "            continue",
        "        end",
        "        switch $word",
        "            case '--*=*'",
        "                continue",
        "            case '-*'",
        f'                contains -- "$cmdpath|$word" $__{f}_valued; and set skip 1',
        "                continue",
        "        end",
        f'        if contains -- $word (__{f}_commands "$cmdpath")',
        '            set cmdpath (string trim -- "$cmdpath $word")',
        "        end",
        "    end",
        "    echo $cmdpath",
        "end",
        f"function __{f}_at",
        f"    set -l here (__{f}_path)",
        '    test "$here" = "$argv[1]"',
        "end",
    ]
    for n in nodes:
        at = f"-n {_fish_quote(f'__{f}_at {_fish_quote(n.path)}')}"
        for name, help_text in n.commands.items():
            lines.append(
                f"complete -c {prog} -f {at} -a {_fish_quote(_fish_token(name))} "
                f"-d {_fish_quote(help_text)}"
            )
        if n.arguments:
            tokens = " ".join(map(_fish_token, n.arguments))
            lines.append(f"complete -c {prog} -f {at} -a {_fish_quote(tokens)}")
        for o in n.options:
            spec = []
            for flag in o.flags:
                if flag.startswith("--"):
                    spec.append(f"-l {_fish_quote(flag[2:])}")
                elif len(flag) == 2:
                    spec.append(f"-s {_fish_quote(flag[1:])}")
                else:
                    spec.append(f"-o {_fish_quote(flag[1:])}")
            if o.takes_value:
                if o.kind == "dir":
                    spec.append("-x -a '(__fish_complete_directories)'")
                elif o.kind == "file":
                    spec.append("-r -F")
                elif o.choices:
                    spec.append(f"-x -a {_fish_quote(' '.join(map(_fish_token, o.choices)))}")
                else:
                    spec.append("-x")
            else:
                spec.append("-f")
            if o.help:
                spec.append(f"-d {_fish_quote(o.help)}")
            lines.append(f"complete -c {prog} {at} " + " ".join(spec))
    # No file names where the parser expects a command or free text.
    lines.append(f"complete -c {prog} -f")
    return "\n".join(lines) + "\n"


def script(shell: str, parser: argparse.ArgumentParser) -> str:
    """The completion script for `shell` ("bash", "zsh" or "fish") of this parser's program.
    Raises ValueError naming the shells for any other."""
    makers = {"bash": _bash, "zsh": _zsh, "fish": _fish}
    if shell not in makers:
        raise ValueError(f"no completion for {shell!r}: one of {', '.join(SHELLS)}")
    return makers[shell](parser)
