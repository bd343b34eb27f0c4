"""Prices, the meter, caps and the loop guard."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from talos_ls.agent.cost import (
    CapReached,
    Caps,
    CostMeter,
    LoopGuard,
    Price,
    Usage,
    cost_of,
    load_prices,
)

PRICE = Price(Decimal("2.50"), Decimal("1.25"), Decimal("10.00"))


def test_cost_to_the_cent():
    usage = Usage(prompt_tokens=1_000_000, completion_tokens=200_000, cached_tokens=400_000)
    # 600k uncached x 2.50 + 400k cached x 1.25 + 200k out x 10.00, per million
    assert cost_of(PRICE, usage) == Decimal("4.00")
    assert cost_of(None, usage) == 0


def test_meter_totals_are_exact_sums():
    meter = CostMeter(prices={"m": PRICE})
    calls = [Usage(1234, 567, 89), Usage(4321, 76, 0), Usage(999, 1, 999)]
    for u in calls[:2]:
        meter.add("t1", "m", u)
    meter.add("t2", "m", calls[2])
    meter.add("t2", "local-llama", Usage(10_000, 10_000, 0))
    t1, t2 = meter.task("t1"), meter.task("t2")
    assert t1.cost == cost_of(PRICE, calls[0]) + cost_of(PRICE, calls[1])
    assert (t1.tokens_in, t1.tokens_out, t1.tokens_cached, t1.steps) == (5555, 643, 89, 2)
    assert t2.unpriced and not t1.unpriced
    assert meter.session_cost == t1.cost + t2.cost


def test_caps_and_guard():
    caps = Caps(max_cost=Decimal("0.01"), max_steps=3)
    meter = CostMeter(prices={"m": PRICE})
    meter.add("t", "m", Usage(1000, 100, 0))  # $0.0035
    caps.check(meter.task("t"))
    meter.add("t", "m", Usage(1000, 700, 0))  # +$0.0095: $0.013
    with pytest.raises(CapReached, match="cost cap reached"):
        caps.check(meter.task("t"))
    with pytest.raises(CapReached, match="step cap reached: 3"):
        Caps(max_steps=3).check(type(meter.task("t"))(steps=3))
    guard = LoopGuard()
    guard.record("read_file", '{"path": "x"}', failed=True)
    guard.record("read_file", '{"path": "x"}', failed=True)
    guard.record("read_file", '{"path": "y"}', failed=True)  # other arguments: counted apart
    with pytest.raises(CapReached, match="read_file failed 3 times"):
        guard.record("read_file", '{"path": "x"}', failed=True)


def test_price_overrides(tmp_path, monkeypatch):
    path = tmp_path / "prices.json"
    mine = {"input": "0.1", "cached_input": "0", "output": "0.2"}
    path.write_text(
        json.dumps({"gpt-4o": {"input": 1, "cached_input": 0.5, "output": 2}, "my-model": mine})
    )
    monkeypatch.setenv("TALOS_PRICES", str(path))
    prices = load_prices()
    assert prices["gpt-4o"].input == Decimal("1") and prices["my-model"].output == Decimal("0.2")
    assert "gpt-4.1" in prices
    path.write_text('{"bad": {"input": 1}}')
    with pytest.raises(ValueError, match="cached_input"):
        load_prices()
    monkeypatch.setenv("TALOS_PRICES", str(tmp_path / "missing.json"))
    with pytest.raises(ValueError, match="does not exist"):
        load_prices()


@pytest.mark.parametrize(
    "counts, words",
    [
        ((-5, 10, 0), "prompt_tokens=-5"),
        ((10, -1, 0), "completion_tokens=-1"),
        ((10, 1.5, 0), "completion_tokens=1.5"),
        ((10, 1, 11), "cached_tokens=11 exceeds"),
        ((True, 1, 0), "prompt_tokens=True"),
        ((None, 1, 0), "prompt_tokens=None"),
    ],
)
def test_impossible_usage_is_refused(counts, words):
    with pytest.raises(ValueError, match=words):
        Usage.checked(*counts)
    assert Usage.checked(10, 5, 3) == Usage(10, 5, 3)


def test_caps_refuse_nonsense_and_a_cost_cap_that_cannot_bite():
    for bad in (Decimal("-1"), Decimal("0"), Decimal("NaN"), Decimal("Infinity")):
        with pytest.raises(ValueError, match="positive amount"):
            Caps(max_cost=bad)
    with pytest.raises(ValueError, match="max_steps must be at least 1"):
        Caps(max_steps=0)
    with pytest.raises(ValueError, match="max_tokens must be at least 1"):
        Caps(max_tokens=-3)
    with pytest.raises(ValueError, match="'local' has no price"):
        Caps(max_cost=Decimal("1")).require_enforceable("local", {"m": PRICE})
    Caps(max_cost=Decimal("1")).require_enforceable("m", {"m": PRICE})  # priced: fine
    Caps(max_cost=Decimal("1"), max_tokens=1000).require_enforceable("local", {})  # tokens cap
    meter = CostMeter(prices={})
    meter.add("t", "local", Usage(900, 150, 0))
    with pytest.raises(CapReached, match="token cap reached: 1050 of 1000"):
        Caps(max_tokens=1000).check(meter.task("t"))


def test_negative_prices_are_refused(tmp_path, monkeypatch):
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"m": {"input": -1, "cached_input": 0, "output": 1}}))
    monkeypatch.setenv("TALOS_PRICES", str(path))
    with pytest.raises(ValueError, match="not negative"):
        load_prices()


def test_the_cost_cap_message_keeps_the_cap_exact():
    meter = CostMeter(prices={"m": PRICE})
    meter.add("t", "m", Usage(10_000, 0, 0))  # $0.025
    with pytest.raises(CapReached, match=r"of \$0.001 for this task"):
        Caps(max_cost=Decimal("0.001")).check(meter.task("t"))
