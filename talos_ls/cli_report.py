"""How the CLI reports a failure: every expected failure (`errors.TalosError`, a `CliError`
when a command says what kind it is) is printed by `cli.main` as one line, `talos: error: <what
is wrong>; <how to fix it>`, on stderr, or, with `--json`, as one JSON object on stdout
(`{"error": {"kind", "message"}, "exit_code"}`), so a script reading stdout always gets JSON.
Anything else is a bug (`_internal_error`): one line too, its traceback in the log file.
Tracebacks on stderr only with `--verbose`.

Exit codes: 0 done, 1 a failure (the store, the model, the sandbox, a task failed or stopped),
2 a usage error (a bad option value, an empty request), 130 interrupted (Ctrl-C).

Log records are part of the same path: without `--verbose` a log line is one line (the
exception's message, not its traceback), and a store fault a background write logged during
`talos run` is kept for the run's own error line (`StoreFaults`) instead of being printed once
per failed write.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import traceback
from typing import Any

from .display import VisibleFilter, visible
from .errors import TalosError
from .redact import RedactingFilter, redact
from .store import StoreError

OK, FAILED, USAGE, INTERRUPTED = 0, 1, 2, 130


class CliError(TalosError):
    """An expected failure: `message` says what is wrong and how to fix it."""

    def __init__(self, kind: str, message: str, code: int = FAILED) -> None:
        super().__init__(message)
        self.kind, self.message, self.code = kind, message, code


def store_problem(url: str, exc: StoreError) -> str:
    """What is wrong with the store, and how to fix it, from the fault's `reason`."""
    from .store import faults

    return faults.describe(url, exc, "--store")


def store_error(url: str, exc: StoreError) -> CliError:
    return CliError("store", store_problem(url, exc))


def _internal_error(exc: BaseException) -> CliError:
    """A bug: an exception nothing expected. Its traceback goes to the log file, when there is
    one, and only there (the exception's message withheld: it may quote what the person typed);
    the one line says it is a bug, and where its traceback is."""
    record = logging.LogRecord("talos_ls", logging.ERROR, __file__, 0, "internal error", None, None)
    frames = "".join(traceback.format_tb(exc.__traceback__))
    name = type(exc).__name__
    record.exc_text = f"Traceback (most recent call last):\n{frames}{name} (message withheld)"
    files = [h for h in logging.getLogger().handlers if isinstance(h, _CopyingFile)]
    for handler in files:
        handler.handle(record)
    where = f"its traceback is in {files[0].baseFilename}" if files else "--verbose shows it"
    return CliError("internal", f"internal error (a bug): {name}; {where}; please report it")


def report(failure: BaseException, as_json: bool) -> int:
    """Print `failure` once, as a line on stderr or a JSON object on stdout; its exit code. A
    TalosError that is no CliError is of the kind "failed"; anything else is a bug."""
    if isinstance(failure, CliError):
        error = failure
    elif isinstance(failure, TalosError):
        error = CliError("failed", str(failure))
    else:
        error = _internal_error(failure)
    message = redact(error.message)
    if as_json:
        out = {"error": {"kind": error.kind, "message": message}, "exit_code": error.code}
        print(json.dumps(out, ensure_ascii=False))
    else:
        print(f"talos: error: {visible(message, single_line=True)}", file=sys.stderr)
    return error.code


class StoreFaults(logging.Filter):
    """Keeps the StoreErrors that log records carry (a background write that failed) and, but
    with --verbose, drops those records: the command reports the fault once, at its end."""

    verbose = False  # `setup_logging` sets it

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[StoreError] = []
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, StoreError):
            with self._lock:
                self.seen.append(exc)
            return self.verbose
        return True


class _Copy(logging.Handler):
    """Each handler filters a copy: redaction and folding change the record, and the log
    file still wants the traceback the terminal leaves out."""

    def handle(self, record: logging.LogRecord) -> bool:
        return bool(super().handle(logging.makeLogRecord(record.__dict__)))


class _Copying(_Copy, logging.StreamHandler):
    """It writes to the current `sys.stderr`: the terminal's live display redirects it, so a
    log line lands above the status line instead of across it or a prompt."""

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass  # always the current sys.stderr


class _CopyingFile(_Copy, logging.FileHandler):
    pass


STORE_FAULTS = StoreFaults()


def setup_logging(verbose: bool, log_file: str | None) -> None:
    """stderr gets WARNING and up as single lines (DEBUG with tracebacks under --verbose);
    `log_file` gets DEBUG with tracebacks. Both are redacted (keys, credentials), and their
    control characters escaped (`display.VisibleFilter`)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    STORE_FAULTS.verbose = verbose
    STORE_FAULTS.seen.clear()
    level = logging.DEBUG if verbose else logging.WARNING
    console = _Copying()
    console.setLevel(level)
    console.addFilter(STORE_FAULTS)  # before redaction: it needs the exception itself
    _install(console, "talos: %(levelname)s: %(message)s", keep_traceback=verbose)
    if log_file:
        file = _CopyingFile(log_file, encoding="utf-8")
        file.setLevel(logging.DEBUG)
        _install(file, "%(asctime)s %(name)s %(levelname)s: %(message)s", keep_traceback=True)
    root.setLevel(logging.DEBUG if log_file else level)
    for noisy in ("httpx", "httpcore", "openai", "asyncio", "markdown_it"):
        logging.getLogger(noisy).setLevel(logging.INFO if verbose else logging.WARNING)


def _install(handler: logging.Handler, form: str, keep_traceback: bool) -> None:
    """`handler` on the root logger, its records redacted then escaped
    (`display.VisibleFilter`, last: it escapes the final text)."""
    handler.setFormatter(logging.Formatter(form))
    handler.addFilter(_Redacting(keep_traceback=keep_traceback))
    handler.addFilter(VisibleFilter())
    logging.getLogger().addHandler(handler)


class _Redacting(RedactingFilter):
    """The redaction filter; without a traceback wanted, the exception is folded into the
    message first (RedactingFilter would turn it into a traceback text)."""

    def __init__(self, keep_traceback: bool) -> None:
        super().__init__()
        self.keep_traceback = keep_traceback

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.keep_traceback and record.exc_info and record.exc_info[1] is not None:
            record.msg, record.args = f"{record.getMessage()}: {record.exc_info[1]}", None
            record.exc_info = None
        return super().filter(record)
