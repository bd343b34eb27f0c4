"""The language server's settings: the schema's (`talos_ls/settings.py`), by their editor names,
from `initializationOptions` (flat) and the `talos` section of `workspace/configuration`.

A bad value is refused with a message naming the setting, and the last good value stays: a
typo in the editor's settings must not stop a daemon that was working. The API key never
travels in settings, only the NAME of the environment variable that holds it; a setting that
looks like a key is refused without being echoed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from ..agent.cost import Caps, Price, load_prices
from ..agent.limits import Limits
from ..agent.model import ModelConfig
from ..constants import MODES
from ..display import visible
from ..redact import redact_url
from ..settings import SETTINGS, SettingError

EDITOR = {s.camel: s for s in SETTINGS if s.editor}  # what the server reads, by editor name


@dataclass(frozen=True)
class Settings:
    """The settings in use: a field for each of `EDITOR` (its `field`), the schema's default."""

    model: str = EDITOR["model"].default
    base_url: str | None = EDITOR["baseUrl"].default
    api_key_env: str = EDITOR["apiKeyEnv"].default
    prices: Mapping[str, Price] | None = EDITOR["prices"].default  # None: built in, prices.json
    max_cost: Decimal | None = EDITOR["maxCost"].default
    max_steps: int | None = EDITOR["maxSteps"].default
    context_window: int | None = EDITOR["contextWindow"].default
    max_output_tokens: int | None = EDITOR["maxOutputTokens"].default
    permission_mode: str = EDITOR["permissionMode"].default
    store_url: str | None = EDITOR["storeUrl"].default
    question_budget_turns: int = EDITOR["questionBudgetTurns"].default
    question_ranking: str = EDITOR["questionRanking"].default
    prompt_timeout: float = EDITOR["promptTimeout"].default
    model_timeout: float = EDITOR["modelTimeout"].default
    model_idle_timeout: float = EDITOR["modelIdleTimeout"].default
    readable_paths: tuple[str, ...] = EDITOR["readablePaths"].default
    limits: Limits | None = EDITOR["limits"].default

    def updated(self, raw: Mapping[str, Any]) -> tuple[Settings, list[str]]:
        """These settings with the given keys applied. Unknown keys are the client's own and
        ignored; a null value means the default. Returns the problems, one per refused key."""
        if not isinstance(raw, Mapping):
            return self, ["the settings must be an object"]
        changes: dict[str, Any] = {}
        problems = []
        if "apiKey" in raw:
            problems.append(
                "apiKey: the key never goes in settings; set apiKeyEnv to the NAME "
                "of the environment variable that holds it"
            )
        for key, setting in EDITOR.items():
            if key not in raw:
                continue
            value = raw[key]
            try:
                changes[setting.field] = setting.default if value is None else setting.check(value)
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
        return ModelConfig(
            self.model,
            base_url=self.base_url,
            api_key_env=self.api_key_env,
            timeout=self.model_timeout,
            idle_timeout=self.model_idle_timeout,
            context_window=self.context_window,
            max_output_tokens=self.max_output_tokens,
        )

    def shown(self) -> dict[str, Any]:
        """The settings as `talos.status` reports them (the key's variable name, not the key)."""
        return {
            "model": visible(self.model, single_line=True),
            "priced": self.model in self.price_table(),  # else a client shows tokens, not $
            "baseUrl": None if self.base_url is None else redact_url(self.base_url),
            "apiKeyEnv": self.api_key_env,
            "maxCost": None if self.max_cost is None else str(self.max_cost),
            "maxSteps": self.max_steps,
            "contextWindow": self.model_config().window,
            "permissionMode": self.permission_mode,
            "questionBudgetTurns": self.question_budget_turns,
            "questionRanking": self.question_ranking,
            "readablePaths": list(self.readable_paths),
            "limits": (self.limits or Limits.default()).as_setting(),
        }


# What widens what the agent may do, once a session has its settings: such a change waits for
# the person (`narrowed`, `Daemon.confirm_changes`). Each, by the setting keys that change it.
GUARDED = {
    "endpoint": ("baseUrl", "apiKeyEnv"),
    "permission_mode": ("permissionMode",),
    "readable_paths": ("readablePaths",),
    "limits": ("limits",),
}


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
    lower = Limits(*map(min, dataclasses.astuple(new), dataclasses.astuple(old)))
    if lower != new:  # a limit raised
        wider["limits"] = wanted.limits
        now = dataclasses.replace(now, limits=lower)
    return now, wider


def confirmed(settings: Settings, changes: Mapping[str, Any]) -> Settings:
    """`settings` with the waiting changes (`narrowed`) the person confirmed."""
    fields = dict(changes)
    if "endpoint" in fields:
        fields["base_url"], fields["api_key_env"] = fields.pop("endpoint")
    return dataclasses.replace(settings, **fields)
