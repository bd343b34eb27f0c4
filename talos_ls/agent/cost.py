"""What a task costs, and the caps that stop it.

Prices are per million tokens (input, cached input, output) per model; users override or add
models in a JSON file (`TALOS_PRICES`, or `prices.json` in the user config directory). Costs are
`Decimal`, so a task's total is exactly the sum of the usage its model reported, and the session
total exactly the sum of its tasks. A model without a price (a local one) costs nothing, and the
cost cap then cannot bite, which the meter says.

Caps stop the loop the moment they are reached: a per-task cost cap, a per-task step cap, and a
loop guard that stops a task repeating the same failing tool call three times.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import platformdirs

MILLION = Decimal(1_000_000)
PRICES_ENV = "TALOS_PRICES"


@dataclass(frozen=True)
class Price:
    input: Decimal
    cached_input: Decimal
    output: Decimal


def _price(values: Mapping[str, object]) -> Price:
    try:
        return Price(*(Decimal(str(values[k])) for k in ("input", "cached_input", "output")))
    except (KeyError, ArithmeticError, ValueError) as exc:
        raise ValueError(f"a price needs input, cached_input and output numbers ({exc})") from None


# USD per million tokens, as published by OpenAI; override or extend with TALOS_PRICES.
DEFAULT_PRICES: dict[str, Price] = {
    "gpt-4.1": _price({"input": "2.00", "cached_input": "0.50", "output": "8.00"}),
    "gpt-4.1-mini": _price({"input": "0.40", "cached_input": "0.10", "output": "1.60"}),
    "gpt-4o": _price({"input": "2.50", "cached_input": "1.25", "output": "10.00"}),
    "gpt-4o-mini": _price({"input": "0.15", "cached_input": "0.075", "output": "0.60"}),
    "o4-mini": _price({"input": "1.10", "cached_input": "0.275", "output": "4.40"}),
}


def load_prices(path: str | Path | None = None) -> dict[str, Price]:
    """Defaults, overridden by a JSON file {"model": {"input": .., "cached_input": .., "output":
    ..}}: `path`, else $TALOS_PRICES, else prices.json in the user config directory."""
    prices = dict(DEFAULT_PRICES)
    source = (
        path or os.environ.get(PRICES_ENV) or platformdirs.user_config_path("talos") / "prices.json"
    )
    source = Path(source)
    if not source.exists():
        if path or os.environ.get(PRICES_ENV):
            raise ValueError(f"price file {source} does not exist")
        return prices
    try:
        data = json.loads(source.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"price file {source}: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"price file {source}: expected an object of models")
    for model, values in data.items():
        if not isinstance(values, dict):
            raise ValueError(f"price file {source}: {model!r} needs an object of prices")
        prices[model] = _price(values)
    return prices


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0


def cost_of(price: Price | None, usage: Usage) -> Decimal:
    if price is None:
        return Decimal(0)
    uncached = usage.prompt_tokens - usage.cached_tokens
    return (
        uncached * price.input + usage.cached_tokens * price.cached_input
        + usage.completion_tokens * price.output
    ) / MILLION  # fmt: skip


class CapReached(Exception):
    """A task hit its cost cap, step cap or loop guard; the message says which."""


@dataclass
class TaskCost:
    tokens_in: int = 0
    tokens_out: int = 0
    tokens_cached: int = 0
    cost: Decimal = Decimal(0)
    steps: int = 0
    unpriced: bool = False


@dataclass
class CostMeter:
    """Per-task and per-session totals. Safe to share between the tasks of a session."""

    prices: dict[str, Price] = field(default_factory=lambda: dict(DEFAULT_PRICES))
    tasks: dict[str, TaskCost] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, task_id: str, model: str, usage: Usage) -> Decimal:
        """Record one model call's usage; returns its cost."""
        price = self.prices.get(model)
        cost = cost_of(price, usage)
        with self._lock:
            t = self.tasks.setdefault(task_id, TaskCost())
            t.tokens_in += usage.prompt_tokens
            t.tokens_out += usage.completion_tokens
            t.tokens_cached += usage.cached_tokens
            t.cost += cost
            t.steps += 1
            t.unpriced = t.unpriced or price is None
        return cost

    def task(self, task_id: str) -> TaskCost:
        with self._lock:
            return self.tasks.get(task_id, TaskCost())

    @property
    def session_cost(self) -> Decimal:
        with self._lock:
            return sum((t.cost for t in self.tasks.values()), Decimal(0))


@dataclass
class Caps:
    max_cost: Decimal | None = None  # USD per task
    max_steps: int | None = 50  # model calls per task
    repeat_limit: int = 3  # the same failing tool call this many times stops the task

    def check(self, spent: TaskCost) -> None:
        if self.max_cost is not None and spent.cost >= self.max_cost:
            raise CapReached(
                f"cost cap reached: ${spent.cost:.4f} of ${self.max_cost:.2f} for this task"
            )
        if self.max_steps is not None and spent.steps >= self.max_steps:
            raise CapReached(f"step cap reached: {spent.steps} model calls")


@dataclass
class LoopGuard:
    """Stops a task that keeps making the same failing tool call."""

    limit: int = 3
    _failures: dict[tuple[str, str], int] = field(default_factory=dict)

    def record(self, tool: str, arguments: str, failed: bool) -> None:
        key = (tool, arguments)
        if not failed:
            self._failures.pop(key, None)
            return
        self._failures[key] = self._failures.get(key, 0) + 1
        if self._failures[key] >= self.limit:
            raise CapReached(
                f"loop guard: {tool} failed {self._failures[key]} times with the same arguments"
            )
