"""The language server's settings: read from `initializationOptions` (flat) and the `talos`
section of `workspace/configuration`, checked one by one.

A bad value is refused with a message naming the setting, and the last good value stays: a
typo in the editor's settings must not stop a daemon that was working. The API key never
travels in settings, only the NAME of the environment variable that holds it; a setting that
looks like a key is refused without being echoed.
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from ..agent.cost import Caps, Price, load_prices, parse_price
from ..agent.limits import Limits
from ..agent.model import ModelConfig
from ..agent.sandbox import readable_paths_problem
from ..display import visible
from ..errors import TalosError
from ..gates.permissions import MODES
from ..gates.question_queue import QUESTION_BUDGET_TURNS
from ..redact import redact_url
from ..store import SCHEMES

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_KEYISH = re.compile(r"^(sk-|sk_|ghp_|gh[ousr]_|xox[abp]-|AKIA)|^[A-Za-z0-9_\-]{32,}$")


class SettingError(TalosError):
    """A setting's value was refused; the message names the setting (never a secret)."""


@dataclass(frozen=True)
class Settings:
    model: str = "gpt-4.1-mini"
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    prices: Mapping[str, Price] | None = None  # None: the built-in table (and prices.json)
    max_cost: Decimal | None = None
    max_steps: int | None = 50
    permission_mode: str = "ask"
    store_url: str | None = None
    question_budget_turns: int = QUESTION_BUDGET_TURNS
    prompt_timeout: float = 300.0  # seconds a prompt waits before it counts as dismissed
    model_timeout: float = ModelConfig.timeout  # seconds to the model's first chunk
    model_idle_timeout: float = ModelConfig.idle_timeout  # seconds of silence mid-stream
    # Outside the workspace, shown to commands read-only (never from a repository's file).
    readable_paths: tuple[str, ...] = ()
    limits: Limits | None = None  # what one command may use; None: the machine's defaults

    def updated(self, raw: Mapping[str, Any]) -> tuple[Settings, list[str]]:
        """These settings with the given keys applied. Unknown keys are the client's own and
        ignored; a null value means the default. Returns the problems, one per refused key."""
        if not isinstance(raw, Mapping):
            return self, ["the settings must be an object"]
        changes: dict[str, Any] = {}
        problems = []
        if "apiKey" in raw:
            problems.append("apiKey: the key never goes in settings; set apiKeyEnv to the NAME "
                            "of the environment variable that holds it")  # fmt: skip
        for key, (attr, check) in SETTINGS.items():
            if key not in raw:
                continue
            value = raw[key]
            try:
                changes[attr] = DEFAULTS[attr] if value is None else check(value)
            except SettingError as exc:
                problems.append(f"{key}: {exc}")
        new = dataclasses.replace(self, **changes)
        try:
            new.caps().require_enforceable(new.model, new.price_table())
        except ValueError as exc:
            problems.append(f"maxCost: {exc}")
            new = dataclasses.replace(new, max_cost=self.max_cost)
        return new, problems

    def price_table(self) -> dict[str, Price]:
        return {**load_prices(), **(self.prices or {})}

    def caps(self) -> Caps:
        return Caps(max_cost=self.max_cost, max_steps=self.max_steps)

    def model_config(self) -> ModelConfig:
        return ModelConfig(self.model, base_url=self.base_url, api_key_env=self.api_key_env,
                           timeout=self.model_timeout,
                           idle_timeout=self.model_idle_timeout)  # fmt: skip

    def shown(self) -> dict[str, Any]:
        """The settings as `talos.status` reports them (the key's variable name, not the key)."""
        return {
            "model": visible(self.model, single_line=True),
            "priced": self.model in self.price_table(),  # else a client shows tokens, not $
            "baseUrl": None if self.base_url is None else redact_url(self.base_url),
            "apiKeyEnv": self.api_key_env,
            "maxCost": None if self.max_cost is None else str(self.max_cost),
            "maxSteps": self.max_steps,
            "permissionMode": self.permission_mode,
            "questionBudgetTurns": self.question_budget_turns,
            "readablePaths": list(self.readable_paths),
            "limits": (self.limits or Limits.default()).as_setting(),
        }


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 200:
        raise SettingError("must be a non-empty string of at most 200 characters")
    if any(ord(c) < 32 for c in value):
        raise SettingError("must not contain control characters")
    return value.strip()


def _no_hidden(url: str) -> str:
    """A URL with no character a person cannot see or that reorders what they see (controls,
    bidi and zero-width formatting, separators, spaces): refused, naming the code points, never
    echoing the URL (it may hold a password)."""
    hidden = [c for c in url if unicodedata.category(c)[0] in "CZ"]
    if hidden:
        points = ", ".join(dict.fromkeys(f"U+{ord(c):04X}" for c in hidden))
        raise SettingError(f"must not contain invisible, bidi, space or control characters "
                           f"(it holds {points})")  # fmt: skip
    return url


def _url(value: Any) -> str:
    url = _no_hidden(_text(value))
    if not re.match(r"https?://[^/?#]", url):
        raise SettingError("must be an http:// or https:// URL")
    return url


def _env_name(value: Any) -> str:
    if not isinstance(value, str) or not _ENV_NAME.fullmatch(value):
        raise SettingError("must be the NAME of an environment variable (letters, digits, _)")
    if _KEYISH.search(value):
        raise SettingError("looks like a key itself; give the NAME of the variable holding it")
    return value


def _usd(value: Any) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise SettingError("must be a number of US dollars")
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        raise SettingError("must be a number of US dollars") from None
    if not amount.is_finite() or amount <= 0:
        raise SettingError("must be a positive amount of US dollars")
    return amount


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1_000_000:
        raise SettingError("must be a whole number from 1 to 1000000")
    return value


def _mode(value: Any) -> str:
    if value not in MODES:
        raise SettingError(f"must be one of {', '.join(MODES)}")
    return str(value)


def _store_url(value: Any) -> str:
    url = _no_hidden(_text(value))
    if url.partition("://")[0].lower() not in SCHEMES:
        raise SettingError(f"must be a URL with one of the schemes {', '.join(SCHEMES)}")
    return url


def _prices(value: Any) -> dict[str, Price]:
    if not isinstance(value, Mapping):
        raise SettingError('must be an object {"model": {"input", "cached_input", "output"}}')
    table = {}
    for model, entry in value.items():
        if not isinstance(entry, Mapping):
            raise SettingError(f"{model!r} needs an object of prices")
        try:
            table[str(model)] = parse_price(entry)
        except ValueError as exc:
            raise SettingError(f"{model!r}: {exc}") from None
    return table


def _seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 1 <= value <= 86400:
        raise SettingError("must be a number of seconds from 1 to 86400")
    return float(value)


MAX_READABLE_PATHS = 64


def _readable_paths(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or len(value) > MAX_READABLE_PATHS:
        raise SettingError(f"must be a list of at most {MAX_READABLE_PATHS} absolute paths")
    problem = readable_paths_problem(value)
    if problem:
        raise SettingError(problem)
    return tuple(dict.fromkeys(str(v).rstrip("/") for v in value))


def _limits(value: Any) -> Limits:
    try:
        return Limits.parse(value)
    except ValueError as exc:
        raise SettingError(str(exc)) from None


SETTINGS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "model": ("model", _text),
    "baseUrl": ("base_url", _url),
    "apiKeyEnv": ("api_key_env", _env_name),
    "prices": ("prices", _prices),
    "maxCost": ("max_cost", _usd),
    "maxSteps": ("max_steps", _count),
    "permissionMode": ("permission_mode", _mode),
    "storeUrl": ("store_url", _store_url),
    "questionBudgetTurns": ("question_budget_turns", _count),
    "promptTimeout": ("prompt_timeout", _seconds),
    "modelTimeout": ("model_timeout", _seconds),
    "modelIdleTimeout": ("model_idle_timeout", _seconds),
    "readablePaths": ("readable_paths", _readable_paths),
    "limits": ("limits", _limits),
}
DEFAULTS = {f.name: f.default for f in dataclasses.fields(Settings)}

# What widens what the agent may do, once a session has its settings: such a change waits for
# the person (`narrowed`, `Daemon.confirm_changes`). Each, by the setting keys that change it.
GUARDED = {"endpoint": ("baseUrl", "apiKeyEnv"), "permission_mode": ("permissionMode",),
           "readable_paths": ("readablePaths",), "limits": ("limits",)}  # fmt: skip


def guarded(raw: Mapping[str, Any]) -> set[str]:
    """The guarded settings `raw` speaks of."""
    return {name for name, keys in GUARDED.items() if any(k in raw for k in keys)}


def narrowed(in_use: Settings, wanted: Settings) -> tuple[Settings, dict[str, Any]]:
    """What of `wanted` applies at once over `in_use`, and what waits for the person (by
    GUARDED name, the wanted value whole). Per setting:
    - `baseUrl`, `apiKeyEnv`: any change waits (where requests and the key go);
    - `permissionMode`: a higher mode (read-only < ask < auto-edit < full-auto) waits, a lower
      one applies;
    - `readablePaths`: a path not in the list in use waits (even one inside a listed path: a
      link there may lead anywhere); removing paths applies;
    - `limits`: a raised limit waits; a lowered one applies, the others staying as they are.
    Everything else applies (the caps, the model and prices change what a task costs, not
    what it may do to the machine)."""
    now = wanted
    wider: dict[str, Any] = {}
    endpoint = (wanted.base_url, wanted.api_key_env)
    if endpoint != (in_use.base_url, in_use.api_key_env):
        wider["endpoint"] = endpoint
        now = dataclasses.replace(now, base_url=in_use.base_url, api_key_env=in_use.api_key_env)
    if MODES.index(wanted.permission_mode) > MODES.index(in_use.permission_mode):
        wider["permission_mode"] = wanted.permission_mode
        now = dataclasses.replace(now, permission_mode=in_use.permission_mode)
    if set(wanted.readable_paths) - set(in_use.readable_paths):
        wider["readable_paths"] = wanted.readable_paths
        kept = tuple(p for p in wanted.readable_paths if p in in_use.readable_paths)
        now = dataclasses.replace(now, readable_paths=kept)
    old, new = in_use.limits or Limits.default(), wanted.limits or Limits.default()
    if any(getattr(new, f.name) > getattr(old, f.name) for f in dataclasses.fields(Limits)):
        wider["limits"] = wanted.limits
        lower = {f.name: min(getattr(new, f.name), getattr(old, f.name))
                 for f in dataclasses.fields(Limits)}  # fmt: skip
        now = dataclasses.replace(now, limits=Limits(**lower))
    return now, wider


def confirmed(settings: Settings, changes: Mapping[str, Any]) -> Settings:
    """`settings` with the waiting changes (`narrowed`) the person confirmed."""
    out = settings
    for name, value in changes.items():
        if name == "endpoint":
            out = dataclasses.replace(out, base_url=value[0], api_key_env=value[1])
        else:
            out = dataclasses.replace(out, **{name: value})
    return out
