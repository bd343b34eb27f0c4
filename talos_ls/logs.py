"""The servers' log (`talos-ls`, over LSP or ACP): Talos's own records at the chosen level,
libraries at WARNING, all redacted.

pygls puts request params in its error records ("Failed to handle request 3 workspace/
executeCommand <params>") and every message body in its INFO records: a person's prompt, their
code, an answer; the ACP SDK names what a client sent. A library's records keep their text but
lose every argument that is not a short scalar, so what reaches the log says what failed, never
what was sent. An exception's message
can quote what was sent too (a bad field's value, a file's bytes): every record keeps the
exception's type and where it was raised, never its message.

A bug's traceback is written here only; the person is told that it happened and where this log
is (`internal_error`).
"""

from __future__ import annotations

import logging
import os
import sys
import traceback

from .display import VisibleFilter
from .redact import RedactingFilter

MAX_ARG_CHARS = 64
_where = "the server's stderr (the editor shows it as the server's output or log)"


def _scrub_library_args(record: logging.LogRecord) -> bool:
    if not record.name.startswith("talos_ls") and record.args:
        args = record.args if isinstance(record.args, tuple) else (record.args,)
        record.args = tuple(_scrub(a) for a in args)
    return True


def _withhold_exception_message(record: logging.LogRecord) -> bool:
    if record.exc_info and record.exc_info[1] is not None:
        kind, _, tb = record.exc_info
        frames = "".join(traceback.format_tb(tb)) if tb else ""
        name = kind.__name__ if kind else "exception"
        record.exc_text = f"Traceback (most recent call last):\n{frames}{name} (message withheld)"
        record.exc_info = None
    return True


def _scrub(value: object) -> object:
    if isinstance(value, bool | int | float) or value is None:
        return value
    if isinstance(value, str) and len(value) <= MAX_ARG_CHARS and "\n" not in value:
        return value
    return f"<{type(value).__name__} withheld>"


def internal_error() -> str:
    """What the person is told of a bug: that it is one, and where its traceback is."""
    return f"internal error (a bug); its traceback is in {_where}"


def configure_logging(log_file: str | None, level: str = "warning") -> None:
    """One handler (the file, created private, or stderr: stdout carries the protocol)."""
    global _where
    if log_file:
        _where = os.path.abspath(log_file)
        fd = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        handler: logging.Handler = logging.StreamHandler(os.fdopen(fd, "a", encoding="utf-8"))
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(_scrub_library_args)
    handler.addFilter(_withhold_exception_message)
    handler.addFilter(RedactingFilter())
    handler.addFilter(VisibleFilter())  # last: control characters in the final text escaped
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    logging.getLogger("talos_ls").setLevel(level.upper())
    logging.getLogger("pygls").setLevel(logging.WARNING)
