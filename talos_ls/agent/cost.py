"""What a task costs, and the caps that stop it.

Prices are per million tokens (input, cached input, output) per model; users override or add
models in a JSON file (`TALOS_PRICES`, or `prices.json` in the user config directory). Costs are
`Decimal`, so a task's total is exactly the sum of the usage its model reported, and the session
total exactly the sum of its tasks. Usage is checked before it is counted: negative, fractional
or impossible counts are refused (`Usage.checked`), so a cost can never go down. A model without
a price (a local one) costs nothing: a cost cap cannot be enforced on it, so a task with one
refuses to start unless a token cap is set (`Caps.require_enforceable`).

Caps stop the loop the moment they are reached: a per-task cost cap, a per-task token cap, a
per-task step cap, and a loop guard that stops a task repeating the same failing tool call three
times.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import platformdirs

from ..errors import TalosError

MILLION = Decimal(1_000_000)
PRICES_ENV = "TALOS_PRICES"


@dataclass(frozen=True)
class Price:
    input: Decimal
    cached_input: Decimal
    output: Decimal


def parse_price(values: Mapping[str, object]) -> Price:
    try:
        price = Price(*(Decimal(str(values[k])) for k in ("input", "cached_input", "output")))
    except (KeyError, ArithmeticError, ValueError) as exc:
        raise ValueError(f"a price needs input, cached_input and output numbers ({exc})") from None
    if not all(p.is_finite() and p >= 0 for p in (price.input, price.cached_input, price.output)):
        raise ValueError(f"prices must be finite and not negative, got {dict(values)}")
    return price


# USD per million tokens, as published by OpenAI; override or extend with TALOS_PRICES.
DEFAULT_PRICES: dict[str, Price] = {
    "gpt-4.1": parse_price({"input": "2.00", "cached_input": "0.50", "output": "8.00"}),
    "gpt-4.1-mini": parse_price({"input": "0.40", "cached_input": "0.10", "output": "1.60"}),
    "gpt-4o": parse_price({"input": "2.50", "cached_input": "1.25", "output": "10.00"}),
    "gpt-4o-mini": parse_price({"input": "0.15", "cached_input": "0.075", "output": "0.60"}),
    "o4-mini": parse_price({"input": "1.10", "cached_input": "0.275", "output": "4.40"}),
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
        prices[model] = parse_price(values)
    return prices


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    estimated: bool = False  # the endpoint reported none; counted from the text's length

    @classmethod
    def checked(cls, prompt: object, completion: object, cached: object) -> Usage:
        """Usage as an endpoint reported it, refused unless every count is a non-negative
        integer and the cached tokens are part of the prompt's."""
        counts = {"prompt_tokens": prompt, "completion_tokens": completion, "cached_tokens": cached}
        for name, value in counts.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name}={value!r} is not a count of tokens")
        if cached > prompt:  # type: ignore[operator]
            raise ValueError(f"cached_tokens={cached} exceeds prompt_tokens={prompt}")
        return cls(prompt, completion, cached)  # type: ignore[arg-type]


def cost_of(price: Price | None, usage: Usage) -> Decimal:
    if price is None:
        return Decimal(0)
    uncached = usage.prompt_tokens - usage.cached_tokens
    return (
        uncached * price.input
        + usage.cached_tokens * price.cached_input
        + usage.completion_tokens * price.output
    ) / MILLION


class CapReached(TalosError):
    """A task hit its cost cap, step cap or loop guard; the message says which."""


@dataclass
class TaskCost:
    tokens_in: int = 0
    tokens_out: int = 0
    tokens_cached: int = 0
    cost: Decimal = Decimal(0)
    steps: int = 0
    unpriced: bool = False
    estimated: bool = False  # some usage was estimated (the endpoint reported none)

    def absorb(self, other: TaskCost) -> None:
        """Add another task's totals to these (a session's sum)."""
        self.tokens_in += other.tokens_in
        self.tokens_out += other.tokens_out
        self.tokens_cached += other.tokens_cached
        self.cost += other.cost
        self.steps += other.steps


@dataclass
class CostMeter:
    """Per-task and per-session totals. Safe to share between the tasks of a session."""

    prices: dict[str, Price] = field(default_factory=lambda: dict(DEFAULT_PRICES))
    tasks: dict[str, TaskCost] = field(default_factory=dict)
    retired: TaskCost = field(default_factory=TaskCost)
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
            t.estimated = t.estimated or usage.estimated
        return cost

    def task(self, task_id: str) -> TaskCost:
        with self._lock:
            return self.tasks.get(task_id, TaskCost())

    def forget(self, task_id: str) -> None:
        """A finished task leaves memory; its cost stays in the session's totals."""
        with self._lock:
            gone = self.tasks.pop(task_id, None)
            if gone is not None:
                self.retired.absorb(gone)

    def session(self) -> TaskCost:
        """The session's totals: every task so far, finished and forgotten ones included."""
        with self._lock:
            total = dataclasses.replace(self.retired)
            for t in self.tasks.values():
                total.absorb(t)
            return total

    @property
    def session_cost(self) -> Decimal:
        return self.session().cost


@dataclass
class Caps:
    max_cost: Decimal | None = None  # USD per task
    max_steps: int | None = 50  # model calls per task
    max_tokens: int | None = None  # tokens in and out per task
    repeat_limit: int = 3  # the same failing tool call this many times stops the task

    def __post_init__(self) -> None:
        if self.max_cost is not None and (not self.max_cost.is_finite() or self.max_cost <= 0):
            raise ValueError(f"the cost cap must be a positive amount, got {self.max_cost}")
        for name in ("max_steps", "max_tokens"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or value < 1):
                raise ValueError(f"{name} must be at least 1, got {value}")

    def require_enforceable(self, model: str, prices: Mapping[str, Price]) -> None:
        """A cost cap on a model without a price would never fire: refuse to start, unless a
        token cap bounds the task instead."""
        if self.max_cost is not None and model not in prices and self.max_tokens is None:
            raise ValueError(
                f"model {model!r} has no price, so a cost cap cannot be enforced: add its price "
                f'([prices."{model}"] in config.toml, ${PRICES_ENV} or prices.json in the user '
                "config directory) or cap tokens instead (--max-tokens)"
            )

    def check(self, spent: TaskCost) -> None:
        if self.max_cost is not None and spent.cost >= self.max_cost:
            # The cap as given; the spend with as many decimals (at least 4), so a small cap's
            # spend does not round away to $0.0000.
            places = max(4, -min(int(self.max_cost.normalize().as_tuple().exponent), 0))
            raise CapReached(
                f"cost cap reached: ${spent.cost:.{places}f} of ${self.max_cost} for this task"
            )
        used = spent.tokens_in + spent.tokens_out
        if self.max_tokens is not None and used >= self.max_tokens:
            raise CapReached(f"token cap reached: {used} of {self.max_tokens} tokens")
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
