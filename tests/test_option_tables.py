"""The generator of the shell reader's option tables (`tools/option_tables.py`) reads each help
layout it meets the way the program means it: GNU `--help`, git's `-h` and manual pages,
curl's one-space columns, BSD synopses. (The generated file itself is checked by
`tests/test_shell_reader.py`; regenerating it needs the programs installed.)"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "tools" / "option_tables.py"
spec = importlib.util.spec_from_file_location("option_tables", SCRIPT)
assert spec is not None and spec.loader is not None
tables = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tables)


@pytest.mark.parametrize(
    "line, style, expected",
    [
        ("  -a, --all                  do not ignore entries", "gnu", [["-a --all", 0]]),
        ("      --block-size=SIZE      with -l, scale sizes", "gnu", [["--block-size", 1]]),
        ("  -I, --ignore=PATTERN       do not list", "gnu", [["-I --ignore", 1]]),
        ("  -F, --classify[=WHEN]      append indicator", "gnu", [["-F", 0], ["--classify", 2]]),
        ("  -p, --indicator-style=slash", "gnu", [["-p", 0]]),
        (
            "  -c, -C NUM, --context[=NUM]   output NUM",
            "gnu",
            [["-c", 0], ["-C", 1], ["--context", 2]],
        ),
        ("  -c  --format=FORMAT   use the specified FORMAT", "gnu", [["-c --format", 1]]),
        ("  -e script, --expression=script", "gnu", [["-e --expression", 1]]),
        ("  -e,  --execute=COMMAND           execute", "gnu", [["-e --execute", 1]]),
        (
            "      --exclude-caches-under exclude everything under",
            "gnu",
            [["--exclude-caches-under", 0]],
        ),
        (
            "     --alt-svc <file name> Enable alt-svc with this cache file",
            "gnu",
            [["--alt-svc", 1]],
        ),
        ("     --ciphers <list of ciphers> SSL ciphers to use", "gnu", [["--ciphers", 1]]),
        (
            " -D, --sched-deadline <ns> deadline parameter for DEADLINE",
            "gnu",
            [["-D --sched-deadline", 1]],
        ),
        ("    -u, --untracked-files[=<mode>]", "git", [["-u --untracked-files", 2]]),
        ("    -m, --message <message>", "git", [["-m --message", 1]]),
        ("       --stat[=<width>[,<name-width>[,<count>]]]", "git", [["--stat", 2]]),
        ("    -., --hidden                                 ", "gnu", [["-. --hidden", 0]]),
        ("    -f program-file  Program  text is read from file instead", "gnu", [["-f", 1]]),
        ("    -W version       show version information and exit.", "gnu", [["-W", 1]]),
    ],
)
def test_each_help_layout_is_read_as_the_program_means_it(line, style, expected):
    found = tables.parse_line(line, retry=style != "git")
    assert found is not None, line
    assert tables.group(found, style) == expected


def test_prose_is_not_an_option():
    assert tables.parse_line("       --full-history without parent rewriting", True) is None
    assert tables.parse_line("  -    the exit status of COMMAND otherwise") is None
