"""The logs a person reads show control characters as escapes (review A8): `talos run`'s
console and log file (`errors.setup_logging`) and the language server's log
(`logs.configure_logging`), whatever logged the text. A name a command or a repository
chose (a file, a folder) cannot recolour, retitle or clear the person's terminal."""

from __future__ import annotations

import logging

import pytest

from talos_ls.cli_report import setup_logging
from talos_ls.logs import configure_logging

HOSTILE = "name\x1b[31mRED\x1b]0;title\x07\x1b[2J\x9b1m\u202eevil"
SHOWN = "name\\x1b[31mRED\\x1b]0;title\\x07\\x1b[2J\\x9b1m\\u202eevil"


@pytest.fixture
def restore_logging():
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    for handler in root.handlers:
        handler.close()
    root.handlers[:] = handlers
    root.setLevel(level)


def assert_escaped(text: str) -> None:
    assert SHOWN in text, text
    assert not any(c in text for c in "\x1b\x07\x9b\u202e"), text


def test_talos_runs_console_and_log_file_escape_control_characters(
    tmp_path, capsys, restore_logging
):
    log = tmp_path / "run.log"
    setup_logging(False, str(log))
    logging.getLogger("talos_ls.agent.sandbox").warning("after a command, %s", HOSTILE)
    try:
        raise ValueError(HOSTILE)
    except ValueError:
        logging.getLogger("talos_ls.host").error("failed on %s", HOSTILE, exc_info=True)
    assert_escaped(capsys.readouterr().err)
    assert_escaped(log.read_text())


def test_the_language_servers_log_escapes_control_characters(tmp_path, restore_logging):
    log = tmp_path / "server.log"
    configure_logging(str(log), "info")
    logging.getLogger("talos_ls.agent.sandbox").warning("after a command, %s", HOSTILE)
    logging.getLogger("talos_ls.host").info("%s", HOSTILE)
    for handler in logging.getLogger().handlers:
        handler.flush()
    assert_escaped(log.read_text())
