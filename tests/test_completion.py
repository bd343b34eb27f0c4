"""Shell completion generated from the real `talos` parser, loaded into the real shells: bash
(its completion function called with COMP_WORDS/COMP_CWORD set, as bash calls it), zsh (typed
into an interactive zsh on a pseudo-terminal, TAB pressed) and fish (`complete -C`)."""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

import pytest

from talos_ls import completion
from talos_ls.cli import _parser
from talos_ls.gates.permissions import MODES
from talos_ls.memory.facts import SOURCES

from .pseudo_terminal import Terminal, plain
from .system import require_binary

ZSH_INSTALL = "apt-get install -y zsh"
FISH_INSTALL = "apt-get install -y fish"


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parser's own commands, read from argparse directly (not through `walk`)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _every_path(parser, path=()):
    yield path, parser
    for name, child in _commands(parser).items():
        yield from _every_path(child, (*path, name))


@pytest.fixture(scope="module")
def scripts(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("completion")
    paths = {}
    for shell in completion.SHELLS:
        paths[shell] = out / f"talos.{shell}"
        paths[shell].write_text(completion.script(shell, _parser()))
    return paths


def bash_complete(
    script: Path, *words: str, cwd: Path | None = None, prog: str = "talos"
) -> list[str]:
    """What bash's completion function offers for `words` (the last one being completed)."""
    quoted = " ".join("'" + w.replace("'", "'\\''") + "'" for w in (prog, *words))
    program = (
        f"source {script}\nCOMP_WORDS=({quoted})\nCOMP_CWORD={len(words)}\n"
        f"_{prog}\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n"
    )
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", program],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0 and not done.stderr, done.stderr
    return [line for line in done.stdout.splitlines() if line]


@pytest.mark.parametrize(
    "words,expected",
    [
        (("me",), ["memory"]),
        (("run", "--mo"), ["--model", "--mode"]),
        (("run", "--mode", ""), list(MODES)),
        (("run", "--mode", "a"), ["ask", "auto-edit"]),
        (("memory", ""), ["add", "forget", "conflicts"]),
        # inserted quoted for the command line, as bash puts COMPREPLY in as it is
        (("memory", "add", "--source", ""), [s.replace(" ", "\\ ") for s in SOURCES]),
        (("memory", "add", "--source", "rules"), ["rules\\ file"]),
        (("memory", "add", "--source", "rules\\ f"), ["rules\\ file"]),
        (("--store", "sqlite:///x.db", "me"), ["memory"]),
        # `memory` is the value of --store here, not the command: "a" is completed as a command.
        (("--store", "memory", "ap"), ["apply"]),
        (("run", "--model", "memory", "--app"), ["--apply"]),
        (("--st",), ["--store"]),
    ],
)
def test_bash_completes_commands_options_and_choices(scripts, words, expected):
    assert bash_complete(scripts["bash"], *words) == expected


def test_bash_offers_each_parser_its_own_commands_and_options(scripts):
    """For every command path of the real parser: its commands on an empty word, its options
    (and only its) on a dash."""
    for path, parser in _every_path(_parser()):
        commands = list(_commands(parser))
        if commands:
            assert bash_complete(scripts["bash"], *path, "") == commands, path
        options = [
            s for a in parser._actions for s in a.option_strings if a.help != argparse.SUPPRESS
        ]
        assert bash_complete(scripts["bash"], *path, "-") == options, path
    # the program's own --store is not offered after a command
    assert "--store" not in bash_complete(scripts["bash"], "run", "--")


def test_bash_completes_a_directory_option_with_directories(scripts, tmp_path):
    (tmp_path / "proj").mkdir()
    (tmp_path / "notes.txt").write_text("")
    (tmp_path / "pro.txt").write_text("")
    assert bash_complete(scripts["bash"], "run", "--workspace", "pro", cwd=tmp_path) == ["proj"]
    assert bash_complete(scripts["bash"], "run", "--workspace", "", cwd=tmp_path) == ["proj"]


def test_text_in_the_parser_cannot_run_as_shell(tmp_path):
    """Help text, choices and names are quoted for each shell: a quote, `$(...)` or a
    backtick in them is text, not a command."""
    marker = tmp_path / "ran"
    evil = f'it\'s $(touch {marker}) `touch {marker}` "q" \\ end'
    parser = argparse.ArgumentParser(prog="tool")
    parser.add_argument("--level", choices=["lo'w", "hi$(x)"], help=evil)
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("go", help=evil).add_argument("--fast", action="store_true", help=evil)
    bash = tmp_path / "tool.bash"
    bash.write_text(completion.script("bash", parser))
    assert bash_complete(bash, "--level", "", prog="tool") == ["lo\\'w", "hi\\$\\(x\\)"]
    assert bash_complete(bash, "g", prog="tool") == ["go"]
    for shell, check in [("zsh", ["zsh", "-n"]), ("fish", ["fish", "-n"])]:
        if subprocess.run(["which", shell], capture_output=True).returncode:
            continue
        path = tmp_path / f"tool.{shell}"
        path.write_text(completion.script(shell, parser))
        done = subprocess.run([*check, str(path)], capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
    if subprocess.run(["which", "fish"], capture_output=True).returncode == 0:
        done = subprocess.run(
            [
                "fish",
                "--no-config",
                "-c",
                f"source {tmp_path / 'tool.fish'}; "
                "complete -C 'tool go --f'; complete -C 'tool --level '",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[0].startswith("--fast\tit's $(touch ")
    assert not marker.exists()


def test_an_unknown_shell_is_refused_naming_the_shells():
    with pytest.raises(ValueError, match="no completion for 'tcsh': one of bash, zsh, fish"):
        completion.script("tcsh", _parser())


# ------------------------------------------------------------------ zsh
def test_zsh_loads_the_script_without_error(scripts):
    require_binary("zsh", ZSH_INSTALL)
    done = subprocess.run(
        [
            "zsh",
            "-f",
            "-c",
            "autoload -U compinit; compinit -u; "
            f"source <(cat {scripts['zsh']}); print -r -- $_comps[talos]",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0 and not done.stderr, done.stderr
    assert done.stdout.strip() == "_talos"


def test_zsh_completes_at_a_real_prompt(scripts, tmp_path):
    """An interactive zsh on a pseudo-terminal, the script sourced from its .zshrc; TAB typed
    after each line."""
    zsh = require_binary("zsh", ZSH_INSTALL)
    (tmp_path / ".zshrc").write_text(
        f"autoload -U compinit; compinit -u\nsource {scripts['zsh']}\n"
        "PROMPT='ready> '\nsetopt NO_BEEP\n"
    )
    env = {"ZDOTDIR": str(tmp_path), "HOME": str(tmp_path), "TERM": "dumb", "PATH": "/usr/bin:/bin"}
    term = Terminal([zsh, "-i"], env)
    try:
        term.until("ready>")
        start = len(term.raw)
        term.send("talos me\t")
        term.until(r"talos memory", start)
        start = len(term.raw)
        term.send("\t")  # after "talos memory ": its actions, described
        found = term.until(r"add\s+-- tell Talos a fact.*conflicts\s+--.*forget\s+--", start)
        assert found
        term.send("\x15")  # kill the line
        start = len(term.raw)
        term.send("talos run --mode \t")
        listing = term.until(r"read-only", start)
        assert all(m in plain(term.raw[start:]) for m in MODES), listing
        term.send("\x15exit\r")
        assert term.finish() == 0
    finally:
        if term.proc.poll() is None:
            term.proc.kill()


# ------------------------------------------------------------------ fish
def fish_complete(script: Path, line: str) -> list[str]:
    fish = require_binary("fish", FISH_INSTALL)
    done = subprocess.run(
        [fish, "--no-config", "-c", f"source {script}; complete -C {line!r}"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0 and not done.stderr, done.stderr
    return [entry.split("\t")[0] for entry in done.stdout.splitlines()]


def test_fish_parses_the_script(scripts):
    fish = require_binary("fish", FISH_INSTALL)
    done = subprocess.run(
        [fish, "-n", str(scripts["fish"])], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0 and not done.stderr, done.stderr


@pytest.mark.parametrize(
    "line,expected",
    [
        ("talos me", ["memory"]),
        ("talos run --mo", ["--mode", "--model"]),
        ("talos run --mode ", sorted(MODES)),
        ("talos memory ", ["add", "conflicts", "forget"]),
        ("talos --store memory ap", ["apply"]),
        ("talos memory add --source ", sorted(SOURCES)),
    ],
)
def test_fish_completes_commands_options_and_choices(scripts, line, expected):
    assert fish_complete(scripts["fish"], line) == expected


def test_fish_describes_each_command_with_its_help(scripts):
    fish = require_binary("fish", FISH_INSTALL)
    done = subprocess.run(
        [fish, "--no-config", "-c", f"source {scripts['fish']}; complete -C 'talos '"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    described = dict(line.split("\t", 1) for line in done.stdout.splitlines())
    helps = {
        a.dest: " ".join(a.help.split())
        for sp in _parser()._actions
        if isinstance(sp, argparse._SubParsersAction)
        for a in sp._choices_actions
    }
    assert set(described) == set(helps)
    for name, text in helps.items():  # the help, or its start when it is long
        assert described[name] == text or text.startswith(described[name].rstrip("…")), name


def test_a_positional_s_choices_are_offered(tmp_path):
    """`talos completion <TAB>` offers the shells: a positional argument with choices."""
    parser = argparse.ArgumentParser(prog="tool")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("completion").add_argument("shell", choices=completion.SHELLS)
    sub.add_parser("other")
    for shell in completion.SHELLS:
        (tmp_path / f"tool.{shell}").write_text(completion.script(shell, parser))
    assert bash_complete(tmp_path / "tool.bash", "completion", "", prog="tool") == list(
        completion.SHELLS
    )
    assert bash_complete(tmp_path / "tool.bash", "completion", "f", prog="tool") == ["fish"]
    assert fish_complete(tmp_path / "tool.fish", "tool completion ") == sorted(completion.SHELLS)
