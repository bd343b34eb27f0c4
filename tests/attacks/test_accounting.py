"""Attacks on accounting and on what the person is told: usage numbers from the endpoint that
would make a cost go down or a cap never fire, a cost cap that cannot be enforced, an endpoint
that reports nothing, a model repeating itself to raise a fact's confidence, and credentials in
the base URL.

The endpoint is the real scripted server; usage chunks are written by hand where `reply` cannot
express them (floats, strings, no usage at all).
"""

from __future__ import annotations

import json
import socket
import subprocess
from decimal import Decimal

import pytest

from talos_ls.memory.facts import FactStore
from talos_ls.store import open_store

from ..fake_openai import error, reply
from .conftest import API_KEY, TALOS

HANG = 60
PRICES = {"fake-model": {"input": 2, "cached_input": 1, "output": 8}}  # USD per million


def priced(attack) -> None:
    path = attack.tmp / "prices.json"
    path.write_text(json.dumps(PRICES))
    attack.extra_env["TALOS_PRICES"] = str(path)


def with_usage(step: dict, usage: dict | None) -> dict:
    """A `reply(...)` with its usage chunk replaced by `usage` (any JSON), or removed (None)."""
    chunks = [c for c in step["stream"] if "usage" not in c]
    if usage is not None:
        chunks.append(
            {
                "id": "chatcmpl-x",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "fake-model",
                "choices": [],
                "usage": usage,
            }
        )
    return {**step, "stream": chunks}


def usage_of(prompt, completion, cached) -> dict:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": 0,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def remember(n: int, usage=(10, 5, 0)) -> dict:
    """A model turn that remembers a fact of its own, numbered: the facts in the store show
    which turns' tools ran."""
    return reply(
        None, [(f"r{n}", "remember", json.dumps({"statement": f"step fact {n}"}))], usage=usage
    )


def step_facts(attack) -> list[str]:
    store = open_store(attack.store_url)
    try:
        facts = FactStore(store).list(str(attack.ws.resolve()))
    finally:
        store.close()
    return sorted(f.statement for f in facts if f.statement.startswith("step fact"))


def assert_sane_totals(result: dict) -> None:
    assert Decimal(result["cost"]) >= 0, result["cost"]
    assert all(isinstance(v, int) and v >= 0 for v in result["tokens"].values()), result


# ------------------------------------------------------------------------- bad usage
BAD_USAGE = {
    "negative prompt": usage_of(-1_000_000, 10, 0),
    "negative completion": usage_of(100, -1_000_000, 0),
    "negative cached": usage_of(100, 10, -1_000_000),
    "cached over prompt": usage_of(100, 10, 1_000_000),
    "huge negative": usage_of(-(10**18), -(10**18), 0),
    "float": usage_of(1000.5, 10, 0),
    "missing completion": {"prompt_tokens": 100, "total_tokens": 100},
}


@pytest.mark.parametrize("usage", BAD_USAGE.values(), ids=BAD_USAGE.keys())
def test_impossible_usage_stops_the_task_and_never_lowers_the_cost(attack, usage):
    """A priced model under a cost cap: one honest turn, then one with impossible usage, then
    more honest turns that would (were the bad one counted) run under a cost gone negative."""
    priced(attack)
    attack.script(
        remember(1, (996, 1, 0)),
        with_usage(remember(2), usage),
        *(remember(n, (996, 1, 0)) for n in range(3, 12)),
        "done",
    )
    proc = attack.run("--max-cost", "0.01", timeout=HANG)
    result = attack.result(proc)
    assert result["outcome"] != "done"
    assert "usage" in (result["error"] or ""), result["error"]
    assert_sane_totals(result)
    # The honest turn, and the bad one counted from its length (estimated), never from the
    # usage it claimed: the cost only goes up, and stays under the cap that stopped nothing.
    assert Decimal("0.002") < Decimal(result["cost"]) < Decimal("0.01")
    assert result["usage_estimated"] is True
    assert len(attack.server.requests) == 2  # the model is not called again
    assert step_facts(attack) == ["step fact 1"]  # the bad turn's tool did not run


def test_huge_usage_fires_the_cost_cap_before_any_tool_runs(attack):
    priced(attack)
    attack.script(remember(1, (10**30, 10**30, 0)), remember(2), "done")
    proc = attack.run("--max-cost", "1", timeout=HANG)
    result = attack.result(proc)
    assert result["outcome"] != "done"
    assert "cost cap" in result["error"], result["error"]
    assert_sane_totals(result)
    assert len(attack.server.requests) == 1 and step_facts(attack) == []


def test_the_cost_cap_fires_on_honest_usage_too(attack):
    """The baseline the attacks above bend: 0.002 a turn under a 0.005 cap stops at the
    third turn, before its tool runs."""
    priced(attack)
    attack.script(*(remember(n, (996, 1, 0)) for n in range(1, 12)), "done")
    result = attack.result(attack.run("--max-cost", "0.005", timeout=HANG))
    assert result["outcome"] != "done" and "cost cap" in result["error"], result
    assert step_facts(attack) == ["step fact 1", "step fact 2"]
    assert Decimal(result["cost"]) == Decimal("0.006")


# --------------------------------------------------------------------- unpriced models
def test_a_cost_cap_on_an_unpriced_model_refuses_to_start(attack):
    attack.script("should never be asked")
    proc = attack.run("--max-cost", "0.50", timeout=HANG)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    message = attack.result(proc)["error"]["message"]
    assert "fake-model" in message and "no price" in message, message
    assert "--max-tokens" in message
    assert attack.server.requests == []


def test_an_unpriced_model_with_a_token_cap_runs_and_the_token_cap_stops_it(attack):
    attack.script(*(remember(n, (300, 100, 0)) for n in range(1, 31)), "done")
    proc = attack.run("--max-cost", "0.50", "--max-tokens", "1000", timeout=HANG)
    result = attack.result(proc)
    assert result["outcome"] != "done" and "token cap" in result["error"], result
    assert result["unpriced"] is True and result["tokens"] == {"in": 900, "out": 300, "cached": 0}
    assert len(attack.server.requests) == 3
    assert step_facts(attack) == ["step fact 1", "step fact 2"]  # not the third turn's


# ------------------------------------------------------------------ no usage reported
def unreported(n: int) -> dict:
    return with_usage(remember(n), None)


def test_an_endpoint_reporting_no_usage_is_estimated_and_still_capped(attack):
    attack.script(*(unreported(n) for n in range(1, 41)), "done")
    proc = subprocess.run(
        [
            TALOS,
            "run",
            "do the task",
            "--workspace",
            str(attack.ws),
            "--base-url",
            attack.server.url,
            "--model",
            "fake-model",
            "--max-tokens",
            "3000",
        ],
        capture_output=True,
        text=True,
        timeout=HANG,
        env=attack.env(),
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = " ".join((proc.stdout + proc.stderr).split())
    assert "token cap reached" in out, out
    assert "usage estimated" in out, out
    assert 2 <= len(attack.server.requests) < 20, len(attack.server.requests)


def test_json_output_says_when_usage_was_estimated(attack):
    attack.script(unreported(1), with_usage(reply("done"), None))
    result = attack.result(attack.run(timeout=HANG))
    assert result["outcome"] == "done" and result["tokens"]["in"] > 0

    def flags(value) -> list:
        if isinstance(value, dict):
            return [
                v for k, item in value.items() for v in ([item] if "estimat" in k else flags(item))
            ]
        return []

    assert True in flags(result), result


def test_an_endpoint_reporting_zero_usage_is_still_capped(attack):
    attack.script(*(remember(n, (0, 0, 0)) for n in range(1, 41)), "done")
    result = attack.result(attack.run("--max-tokens", "3000", timeout=HANG))
    assert result["outcome"] != "done" and "token cap" in (result["error"] or ""), result


# ---------------------------------------------------------------- repetition as evidence
SAME_FACT = [
    {"statement": "Tests use pytest", "subject": "tests", "attribute": "use", "value": "pytest"},
    {"statement": "Tests use pytest"},
    {"statement": "tests use pytest."},
    {"statement": "  TESTS   USE  PYTEST!!  "},
    {"statement": "Ｔｅｓｔｓ use ｐｙｔｅｓｔ"},  # fullwidth: the same after NFKC
    {
        "statement": "We run the test suite with pytest",
        "subject": "Tests",
        "attribute": "use",
        "value": "pytest",
    },
    {
        "statement": "pytest is what the tests use",
        "subject": " tests ",
        "attribute": "USE",
        "value": "PyTest.",
    },
    {
        "statement": "The tests are run by pytest",
        "subject": "tests",
        "attribute": "use",
        "value": "«pytest»",
    },
    {"statement": "Lint uses ruff"},  # the rules file's fact, restated by the model
    {
        "statement": "Linting is done with ruff",
        "subject": "lint",
        "attribute": "use",
        "value": "ruff",
    },
]


def test_repeating_a_fact_thirty_times_adds_no_evidence(attack):
    (attack.ws / "AGENTS.md").write_text("- Lint uses ruff\n")
    calls = [("remember", json.dumps(SAME_FACT[i % len(SAME_FACT)])) for i in range(30)]
    attack.script(calls[:16], calls[16:], "remembered")
    proc = attack.run(timeout=HANG)
    assert attack.result(proc)["outcome"] == "done", proc.stderr
    results = attack.tool_results()
    assert len(results) == 30
    assert results[0].startswith("remembered as")
    assert all("already remembered" in r for r in results[1:]), results
    store = open_store(attack.store_url)
    try:
        facts = FactStore(store).list(str(attack.ws.resolve()))
    finally:
        store.close()
    assert sorted(f.statement for f in facts) == ["Lint uses ruff", "Tests use pytest"]
    for fact in facts:
        assert fact.confidence == 0.5 and fact.evidence_count == 0, fact
        assert fact.live


def test_repeating_a_fact_with_a_punctuation_slot_adds_no_evidence(attack):
    calls = [
        (
            "remember",
            json.dumps(
                {
                    "statement": f"Tests use pytest (note {i})",
                    "subject": "tests",
                    "attribute": "…",
                    "value": "pytest",
                }
            ),
        )
        for i in range(16)
    ]
    attack.script(calls, "remembered")
    proc = attack.run(timeout=HANG)
    assert attack.result(proc)["outcome"] == "done", proc.stderr
    store = open_store(attack.store_url)
    try:
        facts = FactStore(store).list(str(attack.ws.resolve()), include_closed=False)
    finally:
        store.close()
    assert len(facts) <= 1 and all(f.confidence == 0.5 for f in facts), [
        (f.statement, f.confidence) for f in facts
    ]  # refused outright (a slot of no words), or stored once: never corroborated


# ---------------------------------------------------------- credentials in the base URL
PASSWORD = "S3cretPw-7d1e"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def with_password(url: str, userinfo: str = f"user:{PASSWORD}") -> str:
    return url.replace("http://", f"http://{userinfo}@")


def assert_no_password(*outputs: str, password: str = PASSWORD) -> None:
    for text in outputs:
        assert password not in text, text
        assert API_KEY not in text


@pytest.mark.parametrize(
    ("case", "output"),
    [
        ("works", "json"),
        ("closed port", "json"),
        ("401", "json"),
        ("401", "text"),
        ("error echoing the url", "json"),
        ("error echoing the url", "text"),
    ],
)
def test_a_password_in_the_base_url_is_never_printed(attack, case, output):
    url = with_password(attack.server.url)
    if case == "works":
        attack.script("fine")
    elif case == "closed port":
        url = with_password(f"http://127.0.0.1:{closed_port()}/v1")
    elif case == "401":
        attack.server.script.append(error(401, f"bad key {API_KEY} for {url}", "invalid_api_key"))
    else:
        attack.server.script.append(error(400, f"cannot route {url} with key {API_KEY}"))
    args = [
        TALOS,
        "run",
        "x",
        "--workspace",
        str(attack.ws),
        "--base-url",
        url,
        "--model",
        "fake-model",
        *(["--json"] if output == "json" else []),
    ]
    proc = subprocess.run(
        args,
        capture_output=True,
        text=True,
        timeout=HANG,
        env=attack.env(),
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == (0 if case == "works" else 1), proc.stdout + proc.stderr
    assert_no_password(proc.stdout, proc.stderr)
    if case != "works":
        assert "user:***@127.0.0.1" in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def test_talos_doctor_never_prints_the_password_in_the_base_url(attack):
    for url in (
        with_password(attack.server.url),
        with_password(f"http://127.0.0.1:{closed_port()}/v1"),
    ):
        proc = subprocess.run(
            [TALOS, "doctor", "--workspace", str(attack.ws), "--base-url", url],
            capture_output=True,
            text=True,
            timeout=HANG,
            env=attack.env(),
        )
        assert "model endpoint" in proc.stdout or "no connection" in proc.stdout, proc.stdout
        assert "user:***@127.0.0.1" in proc.stdout
        assert_no_password(proc.stdout, proc.stderr)


@pytest.mark.parametrize(
    "userinfo, secret",
    [
        ("user:S3cr@tPw-9f2c", "tPw-9f2c"),  # a password holding `@`
        ("TalosProxyTok3nUserinfo8b1", "TalosProxyTok3nUserinfo8b1"),
    ],  # a token as user name
    ids=["at-sign-in-password", "token-as-user"],
)
def test_url_credentials_of_any_shape_are_never_printed(attack, userinfo, secret):
    url = attack.server.url.replace("http://", f"http://{userinfo}@")
    attack.server.script.append(error(400, "bad request"))
    proc = subprocess.run(
        [
            TALOS,
            "run",
            "x",
            "--workspace",
            str(attack.ws),
            "--base-url",
            url,
            "--model",
            "fake-model",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=HANG,
        env=attack.env(),
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 1 and "answered 400" in proc.stdout, proc.stdout + proc.stderr
    assert_no_password(proc.stdout, proc.stderr, password=secret)
