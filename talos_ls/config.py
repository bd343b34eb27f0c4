"""The CLI's settings: flags, environment variables and two TOML files, layered.

Highest first: a command-line flag, an environment variable, the workspace's
`.talos/config.toml`, the user's `config.toml` (in platformdirs' user config directory,
`~/.config/talos/` on Linux, `$XDG_CONFIG_HOME/talos/` when that is set), the built-in default.

Each setting, with its check, default, flag, variable and what the workspace's file (it came
with the repository: hostile) may do with it, is the schema's (`talos_ls/settings.py`), which the
language server reads too. A key that file may not set, or a value looser than the user's, is
ignored with a warning naming the file and the key. Permission RULES are never configuration:
they live in permissions.json (`talos permissions`). A refused value, an unknown key or a file
that is not TOML is a `ConfigError` naming the file and the key. The API key itself is never
read here: only the NAME of its variable, and whether that variable is set.
"""

from __future__ import annotations

import difflib
import json
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import platformdirs

from .agent.cost import DEFAULT_PRICES, PRICES_ENV, Caps, Price, load_prices
from .agent.limits import Limits
from .agent.model import DEFAULT_BASE_URL, ModelConfig
from .errors import TalosError
from .files import FileTooLarge, NotRegularFile, read_regular
from .redact import redact_url
from .settings import NEVER, SETTINGS, STRICTER, Setting, SettingError

CONFIG_NAME = "config.toml"
WORKSPACE_FILE = Path(".talos") / CONFIG_NAME
MAX_CONFIG_BYTES = 256 * 1024


class ConfigError(TalosError):
    """A setting was refused. The message names the file (or flag, or variable) and the key,
    one line per problem; `problems` holds the lines."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


# The CLI's settings by name; each a Value of `Effective` but `prices` (`_price_table`).
IN_FILES = {s.name: s for s in SETTINGS if s.files}
KEYS = {name: s for name, s in IN_FILES.items() if name != "prices"}
ALIASES = {alias: s.name for s in IN_FILES.values() for alias in s.aliases}  # for the hints
NAMESPACE = {s.name: s.flag[2:].replace("-", "_") for s in KEYS.values() if s.flag}
# `prices` is a table, not a value: [prices."model"] input / cached_input / output.
PRICE_FIELDS = ("input", "cached_input", "output")


@dataclass(frozen=True)
class Value:
    value: Any
    origin: str  # "--max-cost", "$TALOS_MODEL", a file's path, or "default"


@dataclass
class Effective(Mapping[str, Value]):
    """Each setting's value and where it came from; the price table, model by model."""

    settings: dict[str, Value]
    prices: dict[str, Price]
    price_origins: dict[str, str]
    key_set: bool  # whether the variable named by api_key_env is set (its value is not kept)
    user_file: Path
    workspace_file: Path | None
    warnings: list[str] = field(default_factory=list)

    def __getitem__(self, name: str) -> Value:
        return self.settings[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.settings)

    def __len__(self) -> int:
        return len(self.settings)

    def value(self, name: str) -> Any:
        return self.settings[name].value

    def model_config(self) -> ModelConfig:
        return ModelConfig(
            self.value("model"),
            base_url=self.value("base_url"),
            api_key_env=self.value("api_key_env"),
            context_window=self.value("context_window"),
            max_output_tokens=self.value("max_output_tokens"),
        )

    def caps(self) -> Caps:
        return Caps(
            max_cost=self.value("max_cost"),
            max_steps=self.value("max_steps"),
            max_tokens=self.value("max_tokens"),
        )

    def readable_paths(self) -> tuple[Path, ...]:
        return tuple(Path(p) for p in self.value("readable_paths"))

    def limits(self) -> Limits:
        return self.value("limits") or Limits.default()


def user_config_file() -> Path:
    """`config.toml` in the user config directory (platformdirs: $XDG_CONFIG_HOME/talos, else
    ~/.config/talos on Linux)."""
    return platformdirs.user_config_path("talos") / CONFIG_NAME


def shown_path(path: Path) -> str:
    """A path as messages show it: the home directory as ~."""
    try:
        return "~/" + str(path.relative_to(Path.home()))
    except ValueError:
        return str(path)


def flags_from(namespace: Any) -> dict[str, Any]:
    """The settings given as flags on an argparse namespace (an attribute that is None, or
    absent, was not given). The flags must default to None for this to tell them apart."""
    given = {name: getattr(namespace, attr, None) for name, attr in NAMESPACE.items()}
    return {name: value for name, value in given.items() if value is not None}


def apply_to(namespace: Any, effective: Effective) -> None:
    """Put the effective values on an argparse namespace, for the commands that read
    `args.model`, `args.mode`, `args.max_cost`... (each attribute the namespace already has;
    `store` always), and the whole as `args.effective` (its `prices` for the host)."""
    for name, attr in NAMESPACE.items():
        if hasattr(namespace, attr) or name == "store":
            setattr(namespace, attr, effective.value(name))
    namespace.effective = effective


def _suggest(key: str, known: tuple[str, ...]) -> str:
    if key in ALIASES:
        return f" (did you mean {ALIASES[key]}? the file uses the CLI's names)"
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def _quoted(key: Setting, value: Any) -> str:
    if not key.echo:
        return ""
    if isinstance(value, bool):
        text = "true" if value else "false"  # as TOML writes it
    elif isinstance(value, int | float):
        text = str(value)  # nan and inf as TOML writes them
    else:
        text = json.dumps(value if isinstance(value, str) else str(value), ensure_ascii=False)
    return (text if len(text) <= 60 else text[:57] + '..."') + " "


def _checked(key: Setting, raw: Any, where: str, problems: list[str]) -> Any:
    """`raw` through the key's check, or None with a problem naming where and the key."""
    if isinstance(raw, Decimal):  # a flag argparse already parsed
        raw = str(raw)
    try:
        return key.check(raw)
    except SettingError as exc:
        name = where if where.startswith(("-", "$")) else f"{where}: {key.name}"
        problems.append(f"{name}: {_quoted(key, raw)}{exc}")
        return None


def read_file(path: Path) -> dict[str, Any] | None:
    """The TOML table in `path`, None when there is no file. Read without following a FIFO or
    a device, and bounded: the workspace's file is the repository's."""
    where = shown_path(path)
    try:
        raw = read_regular(path, MAX_CONFIG_BYTES)
    except (FileNotFoundError, NotADirectoryError):  # no file, or no workspace directory
        return None
    except (FileTooLarge, NotRegularFile, OSError) as exc:
        raise ConfigError([f"{where}: cannot be read ({exc})"]) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError([f"{where}: not UTF-8 text (byte {exc.start})"]) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:  # its message ends "(at line L, column C)"
        raise ConfigError([f"{where}: not valid TOML: {exc}"]) from None


def _parse_file(
    path: Path, problems: list[str], forbidden: list[str] | None = None
) -> dict[str, Any]:
    """The file's settings, checked (none without a file); every refusal added to `problems`.
    With `forbidden` (the workspace's file), the keys it may not set are listed there, not
    checked: they are ignored whatever their value."""
    where = shown_path(path)
    out: dict[str, Any] = {}
    for name, raw in (read_file(path) or {}).items():
        if forbidden is not None and name in IN_FILES and IN_FILES[name].workspace == NEVER:
            forbidden.append(name)
        elif name in ("api_key", "apiKey", "key", "openai_api_key"):
            problems.append(
                f"{where}: {name}: the key never goes in a file; set api_key_env to "
                "the NAME of the environment variable that holds it"
            )
        elif name == "prices":
            table = _parse_prices(where, raw, problems)
            if table is not None:
                out["prices"] = table
        elif name not in KEYS:
            problems.append(f"{where}: unknown key {name!r}{_suggest(name, tuple(IN_FILES))}")
        else:
            value = _checked(KEYS[name], raw, where, problems)
            if value is not None:
                out[name] = value
    return out


def _parse_prices(where: str, raw: Any, problems: list[str]) -> dict[str, Price] | None:
    if not isinstance(raw, dict):
        problems.append(
            f'{where}: prices: must be a table: [prices."MODEL"] with '
            "input, cached_input and output, USD per million tokens"
        )
        return None
    for model, entry in raw.items():
        if isinstance(entry, dict):
            for extra in sorted(set(entry) - set(PRICE_FIELDS)):
                problems.append(
                    f"{where}: prices.{model}: unknown key {extra!r}{_suggest(extra, PRICE_FIELDS)}"
                )
    try:
        table: dict[str, Price] = IN_FILES["prices"].check(raw)
    except SettingError as exc:
        problems.append(f"{where}: prices: {exc}")
        return None
    return table


def load(
    workspace: Path | None,
    flags: Mapping[str, Any],
    env: Mapping[str, str],
    *,
    user_file: Path | None = None,
) -> Effective:
    """The effective settings for a command run in `workspace` (None: no workspace file).
    `flags` maps setting names to the values given on the command line (see `flags_from`);
    `env` is the environment. Raises ConfigError naming every refused value."""
    user_path = user_file or user_config_file()
    problems: list[str] = []
    warnings: list[str] = []
    user = _parse_file(user_path, problems)
    ws_path = None if workspace is None else Path(workspace).absolute() / WORKSPACE_FILE
    theirs: dict[str, Any] = {}
    forbidden: list[str] = []
    if ws_path is not None:
        theirs = _parse_file(ws_path, problems, forbidden)
        for name in forbidden:
            warnings.append(
                f"{shown_path(ws_path)}: {name} ignored: only your own "
                f"{shown_path(user_path)}, a flag or a variable may set it "
                f"({IN_FILES[name].why_never})"
            )

    values: dict[str, Value] = {}
    for name, key in KEYS.items():
        values[name] = Value(key.default, "default")
        if name in user:
            values[name] = Value(user[name], str(user_path))
        if name in theirs and ws_path is not None:
            where = shown_path(ws_path)
            mine = values[name].value
            if key.workspace == STRICTER and not key.stricter(theirs[name], mine):
                warnings.append(
                    f"{where}: {name} ignored: {theirs[name]} is looser than "
                    f"{mine} ({values[name].origin}); a workspace may only make "
                    "it stricter"
                )
            else:
                values[name] = Value(theirs[name], str(ws_path))
        variable = (env.get(key.env) or "").strip() if key.env else ""
        if variable and key.env:
            checked = _checked(key, variable, f"${key.env}", problems)
            if checked is not None:
                values[name] = Value(checked, f"${key.env}")
        if flags.get(name) is not None and key.flag:
            checked = _checked(key, flags[name], key.flag, problems)
            if checked is not None:
                values[name] = Value(checked, key.flag)
    prices, origins = _price_table(user_path, user.get("prices", {}), env, problems)
    if problems:
        raise ConfigError(problems)
    return Effective(
        values,
        prices,
        origins,
        key_set=bool(env.get(values["api_key_env"].value)),
        user_file=user_path,
        workspace_file=ws_path,
        warnings=warnings,
    )


def _price_table(
    user_path: Path, from_user: Mapping[str, Price], env: Mapping[str, str], problems: list[str]
) -> tuple[dict[str, Price], dict[str, str]]:
    """Built-in prices < prices.json in the user config directory < the user's config.toml
    < the file named by $TALOS_PRICES (which, as before, replaces prices.json)."""
    table = dict(DEFAULT_PRICES)
    origins = dict.fromkeys(table, "default")
    env_file = (env.get(PRICES_ENV) or "").strip()
    legacy = user_path.parent / "prices.json"

    def overlay(path: Path, origin: str) -> None:
        try:
            loaded = load_prices(path)
        except ValueError as exc:
            problems.append(f"{origin}: {exc}")
            return
        for model, price in loaded.items():
            if DEFAULT_PRICES.get(model) != price:
                table[model], origins[model] = price, origin

    if not env_file and legacy.exists():
        overlay(legacy, str(legacy))
    for model, price in from_user.items():
        table[model], origins[model] = price, str(user_path)
    if env_file:
        overlay(Path(env_file), f"${PRICES_ENV}")
    return table, origins


# ------------------------------------------------------------------ `talos config`
def _shown_value(name: str, effective: Effective) -> str:
    value = effective.value(name)
    if name == "base_url":
        return redact_url(value) if value else DEFAULT_BASE_URL
    if name == "store":
        if value:
            return redact_url(value)
        return "sqlite:///" + str(platformdirs.user_state_path("talos") / "talos.db")
    if name == "limits":
        return effective.limits().describe()
    if name == "readable_paths":
        return ", ".join(value) if value else "none"
    if value is None:
        return "none"
    return str(value)


def as_dict(effective: Effective) -> dict[str, Any]:
    """`talos config --json`: every setting with its value and origin; the key's variable by
    NAME with whether it is set, never its value."""
    out: dict[str, Any] = {}
    for name in KEYS:
        raw = effective.value(name)
        shown = _shown_value(name, effective) if name in ("base_url", "store") else raw
        if isinstance(shown, Decimal):
            shown = str(shown)
        elif name == "limits":
            shown = effective.limits().as_setting()
        elif name == "readable_paths":
            shown = list(raw)
        out[name] = {"value": shown, "origin": effective[name].origin}
    out["api_key_env"]["set"] = effective.key_set
    out["prices"] = {
        model: {
            **{f: str(getattr(p, f)) for f in PRICE_FIELDS},
            "origin": effective.price_origins[model],
        }
        for model, p in sorted(effective.prices.items())
    }
    out["files"] = {
        "user": {"path": str(effective.user_file), "exists": effective.user_file.is_file()},
        "workspace": None
        if effective.workspace_file is None
        else {"path": str(effective.workspace_file), "exists": effective.workspace_file.is_file()},
    }
    out["warnings"] = list(effective.warnings)
    return out


def render(effective: Effective, *, as_json: bool = False) -> str:
    """What `talos config` prints: a table of SETTING, VALUE, FROM (then the prices and the
    warnings), or with `as_json` one JSON object. The caller shows it through
    `display.visible`: a workspace path or a model name may hold control characters."""
    if as_json:
        return json.dumps(as_dict(effective), indent=2, ensure_ascii=False)
    rows = []
    for name in KEYS:
        shown = _shown_value(name, effective)
        if name == "api_key_env":
            shown += " (set)" if effective.key_set else " (NOT set)"
        elif name == "base_url" and effective.value(name) is None:
            shown += " (OpenAI)"
        rows.append((name, shown, effective[name].origin))
    for model, p in sorted(effective.prices.items()):
        rows.append(
            (
                f"prices.{model}",
                f"{p.input} / {p.cached_input} / {p.output}",
                effective.price_origins[model],
            )
        )
    rows.insert(0, ("SETTING", "VALUE", "FROM"))
    widths = [max(len(r[i]) for r in rows) for i in (0, 1)]
    lines = [f"{a.ljust(widths[0])}  {b.ljust(widths[1])}  {c}".rstrip() for a, b, c in rows]
    lines.append("(prices: USD per million tokens in / cached in / out)")
    files = [("user file", effective.user_file), ("workspace file", effective.workspace_file)]
    for label, path in files:
        if path is not None:
            state = "" if path.is_file() else " (none)"
            lines.append(f"{label}: {path}{state}")
    lines.extend(f"warning: {w}" for w in effective.warnings)
    return "\n".join(lines)
