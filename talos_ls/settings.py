"""Every setting, once: its check, default, the name each surface knows it by, and what a
repository's own config file may do with it. The surfaces read it and define no setting: the
language server (`lsp/settings.py`: the editor's camelCase names), the CLI (`config.py`: flags,
variables and config files, in snake_case), next ACP and MCP. It knows no surface.

A check returns a raw value (JSON, TOML, a flag's text) as held, or raises `SettingError` saying
what is wrong without quoting it (a surface quotes it where `echo` allows). The API key is never
a setting: `api_key_env` holds the NAME of its variable.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from .agent.cost import Price, parse_price
from .agent.limits import Limits
from .agent.model import IDLE_TIMEOUT, ModelConfig
from .agent.sandbox import readable_paths_problem
from .constants import ENV_URL, MODES, QUESTION_BUDGET_TURNS, RANKINGS
from .errors import TalosError
from .store import SCHEMES

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_KEYISH = re.compile(r"^(sk-|sk_|ghp_|gh[ousr]_|xox[abp]-|AKIA)|^[A-Za-z0-9_\-]{32,}$")
MAX_READABLE_PATHS = 64


class SettingError(TalosError):
    """A setting's value was refused; the message says why (never quoting it)."""


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
        raise SettingError(
            f"must not contain invisible, bidi, space or control characters (it holds {points})"
        )
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


def _tokens(value: Any) -> int:
    # Tokens run to millions, so no upper bound of 10**6.
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10**12:
        raise SettingError("must be a whole number of tokens, at least 1")
    return value


def _window(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1024 <= value <= 10**8:
        raise SettingError("must be a whole number of tokens from 1024 to 100000000")
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


def _ranking(value: Any) -> str:
    if value not in RANKINGS:
        raise SettingError(f"must be one of {', '.join(RANKINGS)}")
    return str(value)


def _seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 1 <= value <= 86400:
        raise SettingError("must be a number of seconds from 1 to 86400")
    return float(value)


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


# What a workspace's config.toml (the repository's word, not the person's) may do with one.
ANY, STRICTER, NEVER = "any", "stricter", "never"


@dataclass(frozen=True)
class Setting:
    """One setting. `name` is its key in the config files and in `talos config`; `camel` the
    editor's; the language server holds it in the field `field` (the camel name in snake_case).
    `aliases` are those other names, which a config file written in them is pointed from."""

    name: str
    camel: str
    check: Callable[[Any], Any]
    default: Any
    flag: str | None = None  # the CLI's (argparse keeps it as the flag's name in snake_case)
    env: str | None = None  # the environment variable that sets it, over the files
    workspace: str = ANY  # ANY, STRICTER (only stricter than the person's) or NEVER
    why_never: str = "a repository could send your key or your data elsewhere"
    echo: bool = True  # a refused value is quoted (never one that could be a secret)
    editor: bool = True  # the language server reads it
    files: bool = True  # the CLI reads it (from its files, flags and variables)

    @property
    def field(self) -> str:
        return re.sub(r"([A-Z])", r"_\1", self.camel).lower()

    @property
    def aliases(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(n for n in (self.camel, self.field) if n != self.name))

    def stricter(self, theirs: Any, mine: Any) -> bool:
        """Whether a workspace's value is at least as strict as `mine` (None: no cap)."""
        if self.name == "mode":
            return MODES.index(theirs) <= MODES.index(mine)
        return mine is None or theirs <= mine


# In this order `talos config` lists them and refusals are reported. After the default: the
# flag, the variable, the workspace rule. `prices` is a table of its own in the config files.
# fmt: off
SETTINGS: tuple[Setting, ...] = (
    Setting("model", "model", _text, "gpt-4.1-mini", "--model", "TALOS_MODEL"),
    Setting("base_url", "baseUrl", _url, None, "--base-url", "OPENAI_BASE_URL", NEVER, echo=False),
    Setting("api_key_env", "apiKeyEnv", _env_name, "OPENAI_API_KEY", "--api-key-env", None, NEVER,
            echo=False),
    Setting("prices", "prices", _prices, None, workspace=NEVER,
            why_never="a price of 0 would disarm the cost cap"),
    Setting("store", "storeUrl", _store_url, None, "--store", ENV_URL, NEVER, echo=False),
    Setting("mode", "permissionMode", _mode, "ask", "--mode", None, STRICTER),
    Setting("max_cost", "maxCost", _usd, None, "--max-cost", None, STRICTER),
    Setting("max_tokens", "maxTokens", _tokens, None, "--max-tokens", None, STRICTER, editor=False),
    Setting("max_steps", "maxSteps", _count, 50, "--max-steps", None, STRICTER),
    # Tokens the model's context holds; None: the known default for the model's name.
    Setting("context_window", "contextWindow", _window, None, "--context-window"),
    # Tokens an answer may take (sent to the endpoint); None: its own limit.
    Setting("max_output_tokens", "maxOutputTokens", _count, None, "--max-output-tokens"),
    Setting("budget_turns", "questionBudgetTurns", _count, QUESTION_BUDGET_TURNS, "--budget-turns"),
    # Which open question goes first: "value" (the host's), or "seed" (the reference design's).
    Setting("question_ranking", "questionRanking", _ranking, "value", "--question-ranking"),
    # Seconds: a prompt waits (then dismissed); to the model's first chunk; of its silence.
    Setting("prompt_timeout", "promptTimeout", _seconds, 300.0, files=False),
    Setting("model_timeout", "modelTimeout", _seconds, ModelConfig.timeout, files=False),
    Setting("model_idle_timeout", "modelIdleTimeout", _seconds, IDLE_TIMEOUT, files=False),
    Setting("readable_paths", "readablePaths", _readable_paths, (), "--readable-path", None, NEVER,
            why_never="a repository could show its commands what lies outside it"),
    Setting("limits", "limits", _limits, None, workspace=NEVER,  # None: the machine's
            why_never="a repository could raise the limits on its own commands"),
)
# fmt: on
