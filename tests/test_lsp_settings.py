"""The language server's settings, one by one: a bad value refused and named, the last good
value kept, the key never accepted or echoed."""

from __future__ import annotations

from decimal import Decimal

import pytest

from talos_ls.lsp.settings import Settings


def test_good_values_apply():
    s, problems = Settings().updated(
        {
            "model": "gpt-4o",
            "baseUrl": "http://localhost:11434/v1",
            "apiKeyEnv": "MY_KEY",
            "maxCost": 0.25,
            "maxSteps": 10,
            "permissionMode": "read-only",
            "storeUrl": "redis://127.0.0.1:6379/0",
            "questionBudgetTurns": 3,
            "promptTimeout": 30,
            "prices": {"local": {"input": 0, "cached_input": 0, "output": 0}},
            "unknown": 1,
        }
    )
    assert problems == []
    assert (s.model, s.base_url, s.api_key_env, s.max_cost, s.max_steps) == (
        "gpt-4o",
        "http://localhost:11434/v1",
        "MY_KEY",
        Decimal("0.25"),
        10,
    )
    assert (s.permission_mode, s.question_budget_turns, s.prompt_timeout) == ("read-only", 3, 30)
    assert s.price_table()["local"].output == 0 and "gpt-4o" in s.price_table()
    assert s.model_config().api_key_env == "MY_KEY"


@pytest.mark.parametrize(
    "key, value, says",
    [
        ("model", "", "non-empty string"),
        ("model", "a\x1bb", "control characters"),
        ("baseUrl", "file:///etc/passwd", "http:// or https://"),
        ("apiKeyEnv", "MY KEY", "NAME of an environment variable"),
        ("apiKeyEnv", "AKIAIOSFODNN7EXAMPLE", "looks like a key"),
        ("maxCost", -1, "positive"),
        ("maxCost", "NaN", "positive"),
        ("maxCost", True, "US dollars"),
        ("maxSteps", 0, "whole number"),
        ("maxSteps", 2.5, "whole number"),
        ("permissionMode", "yolo", "one of"),
        ("storeUrl", "mysql://x", "schemes"),
        ("questionBudgetTurns", "5", "whole number"),
        ("prices", {"m": {"input": 1}}, "'m'"),
        ("promptTimeout", 0, "seconds"),
        ("readablePaths", ["etc"], "not an absolute path"),
        ("readablePaths", ["/dev/shm"], "the sandbox's own"),
        ("readablePaths", "/srv", "a list"),
        ("limits", {"processes": 0}, "processes must be"),
        ("limits", {"memoryMb": 512}, "unknown key"),
    ],
)
def test_a_bad_value_is_refused_and_the_last_good_one_stays(key, value, says):
    good, _ = Settings().updated({"maxSteps": 7, "model": "gpt-4o"})
    new, problems = good.updated({key: value})
    (problem,) = problems
    assert problem.startswith(f"{key}: ") and says in problem
    assert new == good


def test_the_key_is_never_taken_nor_echoed():
    secret = "sk-proj-0123456789abcdefghijklmnopqrstuv"
    s, problems = Settings().updated({"apiKey": secret, "apiKeyEnv": secret})
    assert len(problems) == 2 and not any(secret in p for p in problems)
    assert s.api_key_env == "OPENAI_API_KEY"
    assert secret not in repr(s.shown())


def test_null_is_the_default_and_a_cost_cap_needs_a_price():
    s, _ = Settings().updated({"maxSteps": 9})
    s, problems = s.updated({"maxSteps": None})
    assert problems == [] and s.max_steps == 50
    s, problems = Settings().updated({"model": "unpriced-local-model", "maxCost": 1})
    assert problems and problems[0].startswith("maxCost:") and s.max_cost is None
    assert s.model == "unpriced-local-model"


def test_the_status_says_whether_the_model_has_a_price():
    """A client shows dollars for a priced model and tokens for one without a price."""
    assert Settings().shown()["priced"] is True  # gpt-4.1-mini is in the built-in table
    local, _ = Settings().updated({"model": "unpriced-local-model"})
    assert local.shown()["priced"] is False
    priced, _ = local.updated(
        {"prices": {"unpriced-local-model": {"input": 1, "cached_input": 0.5, "output": 2}}}
    )
    assert priced.shown()["priced"] is True


def test_readable_paths_and_limits_reach_the_status():
    s, problems = Settings().updated(
        {"readablePaths": ["/srv/data"], "limits": {"processes": 200, "memory_mb": 1024}}
    )
    assert problems == []
    assert s.readable_paths == ("/srv/data",)
    assert s.limits is not None and (s.limits.processes, s.limits.memory) == (200, 1024 * 2**20)
    shown = s.shown()
    assert shown["readablePaths"] == ["/srv/data"]
    assert shown["limits"]["processes"] == 200 and shown["limits"]["cpu_seconds"] == 600
