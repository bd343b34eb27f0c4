"""Secret redaction: credentials are replaced before text reaches the model, a transcript, a log
or an error message.

Two kinds of evidence: known values (the configured API key, and the values of the process's
variables whose names say they hold a secret), and shapes that credentials have wherever they
come from (`sk-...`, `ghp_...`, `github_pat_...`, `AKIA...`, `xoxb-...`, private-key blocks, the
password in `scheme://user:password@host`). Redaction is a last line of defence, not the first:
the sandbox keeps the key out of a command's reach, and `.env*` files are never read.
"""

from __future__ import annotations

import functools
import logging
import os
import re
from collections.abc import Iterable, Mapping

# Variable names that say "this holds a secret"; their values are redacted wherever they show.
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|PAT\b|_PAT_", re.IGNORECASE)
MIN_KNOWN = 8  # shorter values would redact ordinary words

_SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "private key",
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----.*?"
            r"(?:-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|\Z)",
            re.DOTALL,
        ),
    ),
    ("api key", re.compile(r"\bsk-(?:proj-|ant-[a-z0-9]+-|live-|svcacct-)?[A-Za-z0-9_\-]{20,}")),
    ("github token", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}")),
    ("github token", re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,}")),
    ("gitlab token", re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}")),
    ("aws key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}")),
    ("google key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}")),
    ("stripe key", re.compile(r"\b[rs]k_live_[0-9a-zA-Z]{20,}")),
    # The body of a PEM or OpenSSH key read without its BEGIN line (a line range): a line of
    # nothing but 60 to 76 base64 characters mixing upper case, lower case and digits.
    (
        "key material",
        re.compile(
            r"(?m)(?<![A-Za-z0-9+/=])(?=[A-Za-z0-9+/]*[A-Z])(?=[A-Za-z0-9+/]*[a-z])"
            r"(?=[A-Za-z0-9+/]*[0-9])[A-Za-z0-9+/]{60,76}={0,2}[ \t]*$"
        ),
    ),
)
# The user information of a URL runs to the last `@` before the host: a password may hold `@`.
_URL_USERINFO = re.compile(r"\b([a-z][a-z0-9+.\-]*://)([^\s/?#@]*(?:@[^\s/?#@]*)*)@", re.IGNORECASE)
_URL_SECRET_PARAM = re.compile(
    r"([?&;](?:[a-z0-9_\-]*(?:password|passwd|pwd|secret|token|auth|api[_\-]?key|key))=)"
    r"[^&#;\s]*",
    re.IGNORECASE,
)
_TOKENISH = re.compile(r"(?=.*\d)[A-Za-z0-9_\-.~%]{16,}")


def _userinfo(match: re.Match[str]) -> str:
    user, sep, _password = match.group(2).partition(":")
    if sep:
        return f"{match.group(1)}{user}:***@"
    if _TOKENISH.fullmatch(user):  # a token as the user name (`https://ghp_x@github.com`)
        return f"{match.group(1)}***@"
    return match.group(0)


def redact_url(text: str) -> str:
    """`scheme://user:password@host` -> `scheme://user:***@host`, anywhere in `text`; a user
    name that looks like a token is hidden too, and so is a credential in the query
    (`?password=...`, `&api_key=...`)."""
    return _URL_SECRET_PARAM.sub(r"\1***", _URL_USERINFO.sub(_userinfo, text))


class Redactor:
    """Replaces known secret values and credential shapes with `[redacted <kind>]`."""

    def __init__(self, known: Iterable[str] = ()) -> None:
        self._known: list[str] = []
        for value in known:
            self.add(value)

    def add(self, value: str) -> None:
        """Redact this value too (a key read from a variable whose name says nothing)."""
        if isinstance(value, str) and len(value) >= MIN_KNOWN and value not in self._known:
            self._known.append(value)
            self._known.sort(key=len, reverse=True)  # a value containing another goes first

    @classmethod
    def from_environment(
        cls, env: Mapping[str, str] | None = None, names: Iterable[str] = ()
    ) -> Redactor:
        """Values of `names` (the configured key's variable) and of every variable whose name
        looks like a secret's."""
        env = os.environ if env is None else env
        wanted = set(names)
        return cls(v for k, v in env.items() if k in wanted or SECRET_NAME.search(k))

    def __call__(self, text: str) -> str:
        if not text:
            return text
        for value in self._known:
            text = text.replace(value, "[redacted secret]")
        for kind, pattern in _SHAPES:
            text = pattern.sub(f"[redacted {kind}]", text)
        return redact_url(text)


@functools.cache
def _process_redactor() -> Redactor:
    return Redactor.from_environment()


def add_secret(value: str) -> None:
    """Make `redact` replace this value (the model client registers its key here)."""
    _process_redactor().add(value)


def redact(text: str) -> str:
    """Redact with the process's own secrets (read once) and every credential shape."""
    return _process_redactor()(text)


class RedactingFilter(logging.Filter):
    """Applied to a log handler: every record is redacted once it is formatted."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = redact(record.getMessage()), None
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        return True
