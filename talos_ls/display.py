"""Text from the model or the workspace, made safe to show a person.

A command, a path, a question or a diff can try to hide what it is: terminal escape sequences
that move the cursor or recolour text, carriage returns and backspaces that overwrite what was
printed, bidirectional overrides that reorder characters (Trojan Source), zero-width characters
that split a word a person would recognise. `visible` turns each into a printable escape
(`\\x1b`, `\\u202e`), so what is shown is what will run. Markup (Rich's `[...]`) is never
interpreted: the terminal prints `rich.text.Text`, which is plain.
"""

from __future__ import annotations

import logging
import re

# C0 and C1 controls except newline and tab; DEL; bidi embeddings, overrides and isolates;
# zero-width and invisible formatting characters; line and paragraph separators.
_HIDDEN = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2028\u2029"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb]"
)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str, *, single_line: bool = False) -> str:
    """`text` with every control and invisible character shown as an escape. With
    `single_line`, newlines and tabs are escaped too (a command, a path, a button label)."""
    shown = _HIDDEN.sub(_escape, str(text))
    if single_line:
        shown = shown.replace("\n", "\\n").replace("\t", "\\t")
    return shown


class VisibleFilter(logging.Filter):
    """On a log handler that a person reads (a terminal, a log file they `tail`), after
    redaction: the record's text and traceback with every control character escaped, so a
    file name a command chose cannot recolour, move or clear the terminal. Newlines stay."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = visible(record.getMessage()), None
        if record.exc_text:
            record.exc_text = visible(record.exc_text)
        return True
