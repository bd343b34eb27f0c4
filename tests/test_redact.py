"""Secret redaction and plain-text display: the last line of defence for what reaches the
model, a transcript, a log or the person's terminal."""

from __future__ import annotations

import logging

import pytest

from talos_ls.display import visible
from talos_ls.redact import RedactingFilter, Redactor, redact_url

PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx\nabc\n-----END RSA PRIVATE KEY-----"


@pytest.mark.parametrize(
    "secret",
    [
        "sk-proj-abcdefghijklmnopqrstuvwxyz012345",
        "sk-ant-api03-abcdefghijklmnopqrstuvwxyz",
        "sk-abcdefghijklmnopqrstuvwx",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
        "gho_abcdefghijklmnopqrstuvwxyz0123456789",
        "AKIAIOSFODNN7EXAMPLE",
        "xoxb-1234567890-abcdefghij",
        "xoxp-1234567890-abcdefghij",
        "glpat-abcdefghijklmnopqrst",
        PEM,
    ],
)
def test_credential_shapes_are_redacted(secret):
    text = f"config:\n  value: {secret}\nend"
    out = Redactor()(text)
    assert secret not in out and "[redacted" in out
    assert out.startswith("config:") and out.endswith("end")


def test_known_values_url_passwords_and_ordinary_text():
    r = Redactor.from_environment(
        {"MY_LLM": "plain-opaque-value-1", "GH_PAT": "pat-value-xyz9", "HOME": "/home/me"},
        names=["MY_LLM"],
    )
    out = r("key plain-opaque-value-1 pat pat-value-xyz9 home /home/me")
    assert "plain-opaque-value-1" not in out and "pat-value-xyz9" not in out
    assert "/home/me" in out  # not a secret's variable
    assert redact_url("postgres://app:pw0rd@db:5432/x and redis://:s3@h/0") == (
        "postgres://app:***@db:5432/x and redis://:***@h/0"
    )
    assert redact_url("redis://h/0?db=1&password=s3cr3t https://x/v1?api_key=k&q=ok;token=t") == (
        "redis://h/0?db=1&password=*** https://x/v1?api_key=***&q=ok;token=***"
    )
    ordinary = "def skip(): return task-list ghp sk- AKIA"
    assert Redactor()(ordinary) == ordinary
    r.add("short")  # too short to redact safely
    assert r("short words") == "short words"


def test_logs_are_redacted(caplog):
    logger = logging.getLogger("talos_ls.test")
    handler = logging.StreamHandler()
    handler.addFilter(RedactingFilter())
    record = logger.makeRecord(
        "x",
        logging.WARNING,
        "f",
        1,
        "key %s at %s",
        ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "http://u:pw123@h"),
        None,
    )
    handler.filter(record)
    assert record.getMessage() == "key [redacted github token] at http://u:***@h"


@pytest.mark.parametrize(
    "raw, shown",
    [
        ("a\x1b[31mred", "a\\x1b[31mred"),
        ("over\rwrite", "over\\x0dwrite"),
        ("back\x08space", "back\\x08space"),
        ("rtl \u202etxt.exe", "rtl \\u202etxt.exe"),
        ("zero\u200bwidth", "zero\\u200bwidth"),
        ("c1\x9bcsi", "c1\\x9bcsi"),
        ("[bold]markup[/]", "[bold]markup[/]"),
        ("ünïcödé ✓", "ünïcödé ✓"),
    ],
)
def test_visible(raw, shown):
    assert visible(raw) == shown
    assert visible("a\nb\tc", single_line=True) == "a\\nb\\tc"
    assert visible("a\nb") == "a\nb"
