"""Every setting as each surface sees it, written out: the language server's keys with the
defaults it uses when nothing is set, the config files' keys with their defaults, the flags and
variables that set them, and what a workspace's file may do with each. The tables are explicit
so that a change to how settings are defined shows here as a change of behaviour."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping
from decimal import Decimal
from pathlib import Path

import pytest

from talos_ls import config
from talos_ls.agent.cost import PRICES_ENV, Price
from talos_ls.agent.limits import Limits
from talos_ls.cli import _parser
from talos_ls.lsp.settings import Settings
from talos_ls.settings import ANY, NEVER, SETTINGS, STRICTER

# ------------------------------------------------------------------ the language server
PRICE = {"input": 1, "cached_input": 0, "output": 2}
# Its key (initializationOptions, the `talos` section), the field of Settings it sets, the
# default (what the server uses when nothing is set), a good value, and that value as held.
EDITOR = [
    ("model", "model", "gpt-4.1-mini", "gpt-4o", "gpt-4o"),
    ("baseUrl", "base_url", None, "http://localhost:11434/v1", "http://localhost:11434/v1"),
    ("apiKeyEnv", "api_key_env", "OPENAI_API_KEY", "MY_KEY", "MY_KEY"),
    ("prices", "prices", None, {"m": PRICE}, {"m": Price(Decimal(1), Decimal(0), Decimal(2))}),
    ("maxCost", "max_cost", None, 0.25, Decimal("0.25")),
    ("maxSteps", "max_steps", 50, 10, 10),
    ("contextWindow", "context_window", None, 32768, 32768),
    ("maxOutputTokens", "max_output_tokens", None, 2048, 2048),
    ("permissionMode", "permission_mode", "ask", "read-only", "read-only"),
    ("storeUrl", "store_url", None, "redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
    ("questionBudgetTurns", "question_budget_turns", 5, 3, 3),
    ("questionRanking", "question_ranking", "value", "seed", "seed"),
    ("promptTimeout", "prompt_timeout", 300.0, 30, 30.0),
    ("modelTimeout", "model_timeout", 120.0, 200, 200.0),
    ("modelIdleTimeout", "model_idle_timeout", 60.0, 90, 90.0),
    ("readablePaths", "readable_paths", (), ["/srv/data/"], ("/srv/data",)),
    ("limits", "limits", None, {"processes": 200}, Limits.parse({"processes": 200})),
]
# Names the language server does not take (the config file's, and the fields'): unknown keys
# are the client's own, ignored without a word.
NOT_EDITOR = [
    "mode",
    "store",
    "budget_turns",
    "max_tokens",
    "maxTokens",
    "base_url",
    "api_key_env",
    "max_cost",
    "max_steps",
    "context_window",
    "max_output_tokens",
    "permission_mode",
    "store_url",
    "question_budget_turns",
    "prompt_timeout",
    "readable_paths",
]


def test_the_language_server_s_settings_and_their_defaults():
    defaults = Settings()
    assert {f.name: getattr(defaults, f.name) for f in dataclasses.fields(Settings)} == {
        field: default for _, field, default, _, _ in EDITOR
    }
    assert defaults.model_config().timeout == 120.0
    assert defaults.model_config().idle_timeout == 60.0
    assert defaults.model_config().context_window is None
    assert defaults.model_config().max_output_tokens is None
    assert defaults.model_config().window == 1_047_576  # gpt-4.1-mini's, known
    assert (defaults.caps().max_cost, defaults.caps().max_steps) == (None, 50)


@pytest.mark.parametrize("key, field, default, value, held", EDITOR, ids=[r[0] for r in EDITOR])
def test_each_editor_key_sets_its_field_and_null_is_the_default(key, field, default, value, held):
    s, problems = Settings().updated({key: value})
    assert problems == []
    assert s == dataclasses.replace(Settings(), **{field: held})
    back, problems = s.updated({key: None})
    assert problems == [] and back == Settings()
    refused, problems = s.updated({key: True})
    assert len(problems) == 1 and problems[0].startswith(f"{key}: ") and refused == s


@pytest.mark.parametrize("name", NOT_EDITOR)
def test_other_names_are_not_editor_settings(name):
    assert Settings().updated({name: True}) == (Settings(), [])


def test_the_status_reports_the_defaults():
    assert Settings().shown() == {
        "model": "gpt-4.1-mini",
        "priced": True,
        "baseUrl": None,
        "apiKeyEnv": "OPENAI_API_KEY",
        "maxCost": None,
        "maxSteps": 50,
        "contextWindow": 1_047_576,
        "permissionMode": "ask",
        "questionBudgetTurns": 5,
        "questionRanking": "value",
        "readablePaths": [],
        "limits": Limits.default().as_setting(),
    }


# ------------------------------------------------------------------ the CLI and its files
# The key (config files, `talos config`), its default, the flag and the variable that set it,
# and what the workspace's file may do: "any", "stricter" (only stricter than yours) or "never".
CLI = [
    ("model", "gpt-4.1-mini", "--model", "TALOS_MODEL", "any"),
    ("base_url", None, "--base-url", "OPENAI_BASE_URL", "never"),
    ("api_key_env", "OPENAI_API_KEY", "--api-key-env", None, "never"),
    ("store", None, "--store", "TALOS_STORE_URL", "never"),
    ("mode", "ask", "--mode", None, "stricter"),
    ("max_cost", None, "--max-cost", None, "stricter"),
    ("max_tokens", None, "--max-tokens", None, "stricter"),
    ("max_steps", 50, "--max-steps", None, "stricter"),
    ("context_window", None, "--context-window", None, "any"),
    ("max_output_tokens", None, "--max-output-tokens", None, "any"),
    ("budget_turns", 5, "--budget-turns", None, "any"),
    ("question_ranking", "value", "--question-ranking", None, "any"),
    ("readable_paths", (), "--readable-path", None, "never"),
    ("limits", None, None, None, "never"),
]
# `prices` is a table of its own in the files: [prices."MODEL"], never from the workspace's
# file, and $TALOS_PRICES names a JSON file of them.
# The flags, as typed after `talos run` (`--store` before it), and what each sets.
FLAGS = [
    ("--model", "gpt-4o", "model", "gpt-4o"),
    ("--base-url", "http://localhost:1234/v1", "base_url", "http://localhost:1234/v1"),
    ("--api-key-env", "MY_KEY", "api_key_env", "MY_KEY"),
    ("--store", "sqlite:////tmp/t.db", "store", "sqlite:////tmp/t.db"),
    ("--mode", "read-only", "mode", "read-only"),
    ("--max-cost", "0.5", "max_cost", Decimal("0.5")),
    ("--max-tokens", "9000", "max_tokens", 9000),
    ("--max-steps", "7", "max_steps", 7),
    ("--context-window", "32768", "context_window", 32768),
    ("--max-output-tokens", "2048", "max_output_tokens", 2048),
    ("--budget-turns", "3", "budget_turns", 3),
    ("--question-ranking", "seed", "question_ranking", "seed"),
    ("--readable-path", "/srv/data", "readable_paths", ("/srv/data",)),
]
# Every variable the layering reads (the last: the one api_key_env names, only whether it is set).
VARIABLES = {"TALOS_MODEL", "OPENAI_BASE_URL", "TALOS_STORE_URL", "TALOS_PRICES", "OPENAI_API_KEY"}
# Names a file may be written in by mistake, pointed to the CLI's.
HINTS = {
    "baseUrl": "base_url",
    "apiKeyEnv": "api_key_env",
    "storeUrl": "store",
    "maxCost": "max_cost",
    "maxSteps": "max_steps",
    "maxTokens": "max_tokens",
    "contextWindow": "context_window",
    "maxOutputTokens": "max_output_tokens",
    "permissionMode": "mode",
    "questionBudgetTurns": "budget_turns",
    "questionRanking": "question_ranking",
    "permission_mode": "mode",
    "store_url": "store",
    "question_budget_turns": "budget_turns",
    "readablePaths": "readable_paths",
}
# The language server's own settings, which no file may set.
NOT_IN_FILES = [
    "promptTimeout",
    "prompt_timeout",
    "modelTimeout",
    "model_timeout",
    "modelIdleTimeout",
    "model_idle_timeout",
]
# A workspace file's value for each key (TOML), as "stricter / looser" than the user's for the
# "stricter" ones, whose user value comes first.
WORKSPACE = {
    "model": '"gpt-4o"',
    "base_url": '"http://ws.example/v1"',
    "api_key_env": '"WS_KEY"',
    "store": '"sqlite:////tmp/ws.db"',
    "mode": ('"auto-edit"', '"ask"', '"full-auto"'),
    "max_cost": ("1", "0.5", "2"),
    "max_tokens": ("1000", "500", "2000"),
    "max_steps": ("40", "20", "60"),
    "context_window": "32768",
    "max_output_tokens": "2048",
    "budget_turns": "9",
    "question_ranking": '"seed"',
    "readable_paths": '["/srv"]',
    "limits": "{processes = 100}",
    "prices": "{m = {input = 0, cached_input = 0, output = 0}}",
}


@pytest.fixture
def user(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    path = tmp_path / "xdg" / "talos" / "config.toml"
    path.parent.mkdir(parents=True)
    return path


@pytest.fixture
def ws(tmp_path) -> Path:
    (tmp_path / "checkout" / ".talos").mkdir(parents=True)
    return tmp_path / "checkout"


class _Env(Mapping[str, str]):
    """An empty environment that notes every variable asked for."""

    def __init__(self) -> None:
        self.asked: set[str] = set()

    def __getitem__(self, name: str) -> str:
        self.asked.add(name)
        raise KeyError(name)

    def __contains__(self, name: object) -> bool:
        self.asked.add(str(name))
        return False

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def test_the_cli_s_settings_and_their_defaults(user, ws):
    env = _Env()
    got = config.load(ws, {}, env)
    assert list(got) == [name for name, *_ in CLI]
    for name, default, *_ in CLI:
        assert got[name] == config.Value(default, "default"), name
    assert env.asked == VARIABLES
    shown = json.loads(config.render(got, as_json=True))
    assert list(shown) == [*(name for name, *_ in CLI), "prices", "files", "warnings"]


@pytest.mark.parametrize("flag, text, name, value", FLAGS, ids=[r[0] for r in FLAGS])
def test_each_flag_sets_its_setting(user, flag, text, name, value):
    words = [flag, text, "run", "x"] if flag == "--store" else ["run", "x", flag, text]
    flags = config.flags_from(_parser().parse_args(words))
    assert list(flags) == [name]
    got = config.load(None, flags, {})[name]
    assert got == config.Value(value, flag)
    assert {row[2] for row in CLI if row[2]} == {row[0] for row in FLAGS}


def test_no_other_flag_of_run_sets_a_setting():
    assert config.flags_from(_parser().parse_args(["run", "x", "--apply", "--json"])) == {}


@pytest.mark.parametrize("name, variable", [(r[0], r[3]) for r in CLI if r[3]])
def test_each_variable_sets_its_setting(user, name, variable):
    value = {
        "model": "gpt-4o",
        "base_url": "http://localhost:1/v1",
        "store": "sqlite:////tmp/v.db",
    }[name]
    assert config.load(None, {}, {variable: value})[name] == config.Value(value, f"${variable}")


def test_each_key_is_read_from_the_user_file(user):
    for name, *_ in CLI:
        literal = WORKSPACE[name]
        user.write_text(f"{name} = {literal if isinstance(literal, str) else literal[0]}\n")
        assert config.load(None, {}, {})[name].origin == str(user), name
    user.write_text(f"prices = {WORKSPACE['prices']}\n")
    assert config.load(None, {}, {}).price_origins["m"] == str(user)


@pytest.mark.parametrize("alias, name", HINTS.items())
def test_a_file_in_the_editor_s_names_is_pointed_to_the_cli_s(user, alias, name):
    user.write_text(f"{alias} = 1\n")
    with pytest.raises(config.ConfigError) as caught:
        config.load(None, {}, {})
    assert str(caught.value) == (
        f"{user}: unknown key {alias!r} (did you mean {name}? the file uses the CLI's names)"
    )


@pytest.mark.parametrize("alias", NOT_IN_FILES)
def test_the_language_server_s_own_settings_are_unknown_to_the_files(user, alias):
    user.write_text(f"{alias} = 1\n")
    with pytest.raises(config.ConfigError) as caught:
        config.load(None, {}, {})
    assert str(caught.value) == f"{user}: unknown key {alias!r}"


@pytest.mark.parametrize("name, rule", [(r[0], r[4]) for r in CLI] + [("prices", "never")])
def test_what_the_workspace_file_may_set(user, ws, name, rule):
    wsfile = ws / ".talos" / "config.toml"
    literal = WORKSPACE[name]
    if rule == "stricter":
        mine, stricter, looser = literal
        user.write_text(f"{name} = {mine}\n")
        wsfile.write_text(f"{name} = {stricter}\n")
        got = config.load(ws, {}, {})
        assert got[name].origin == str(wsfile) and got.warnings == []
        wsfile.write_text(f"{name} = {looser}\n")
        got = config.load(ws, {}, {})
        assert got[name].origin == str(user)
        (warning,) = got.warnings
        assert warning.startswith(f"{wsfile}: {name} ignored: ") and "looser" in warning
        return
    wsfile.write_text(f"{name} = {literal}\n")
    got = config.load(ws, {}, {})
    if rule == "any":
        assert got[name].origin == str(wsfile) and got.warnings == []
    else:
        (warning,) = got.warnings
        assert warning.startswith(f"{wsfile}: {name} ignored: only your own")
        if name == "prices":
            assert "m" not in got.prices
        else:
            assert got[name].origin == "default"


# ------------------------------------------------------------------ the docs, from the schema
DOCS = Path(__file__).parents[1] / "docs"


def _rows(doc: str, header: str) -> list[list[str]]:
    """The cells of the table under `header` (its first row), a row a list."""
    lines = doc.split(header, 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    return [[c.strip() for c in line.replace("\\|", "/").strip("|").split("|")] for line in lines]


def _says_default(text: str, default: object) -> bool:
    if isinstance(default, int | float):
        return float(text) == default
    if isinstance(default, str):
        return f"`{default}`" in text
    return True  # none, a table, the machine's: said in words


def test_docs_config_md_lists_every_setting_of_the_files():
    rules = {"yes": ANY, "stricter only": STRICTER, "**never**": NEVER}
    rows = _rows((DOCS / "config.md").read_text(), "| key ")
    documented = set()
    for key, _, default, flag, variable, workspace in rows:
        name = key.split("`")[1].strip("[]").split(".")[0]
        documented.add(name)
        s = next(s for s in SETTINGS if s.name == name and s.files)
        assert (flag.split("`")[1] if flag else None) == s.flag, name
        named = variable.split("`")[1] if variable else None
        assert named == (PRICES_ENV if name == "prices" else s.env), name
        assert rules[workspace] == s.workspace, name
        assert _says_default(default, s.default), name
    assert documented == {s.name for s in SETTINGS if s.files}


def test_docs_lsp_md_lists_every_editor_setting():
    rows = _rows((DOCS / "lsp.md").read_text(), "| setting | default | what |")
    editor = {s.camel: s for s in SETTINGS if s.editor}
    documented = set()
    for key, default, _ in rows:
        camel = key.strip("`")
        if camel in ("deferredPrompts", "conversation"):  # the protocol's, at initialize
            continue
        documented.add(camel)
        assert _says_default(default, editor[camel].default), camel
    assert documented == set(editor)


def test_the_vscode_extension_s_settings_are_the_schema_s():
    package = json.loads((Path(__file__).parents[1] / "clients/vscode/package.json").read_text())
    properties = package["contributes"]["configuration"]["properties"]
    editor = {s.camel: s for s in SETTINGS if s.editor}
    for key, spec in properties.items():
        camel = key.removeprefix("talos.")
        if camel.startswith(("server.", "trace.")):  # how the extension starts the server
            continue
        assert camel in editor, key
        assert spec.get("default") in (None, editor[camel].default), key
