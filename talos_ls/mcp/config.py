"""Which MCP servers a workspace uses, in the shape people already have (Claude Code, Cursor,
VS Code): `{"mcpServers": {"NAME": {"command", "args", "env"} | {"url", "headers"}}}`.

From the person's `mcp.json` in Talos's config directory (every workspace), the workspace's
`.talos/mcp.json`, and an ACP client's `session/new` (`session_servers`). The workspace's file
came with the repository: a cloned repository must not start programs, so it is used only once
the person trusts its exact content (its sha256 kept in their settings for the workspace, as
for `.talos/permissions.json`); an edited file is untrusted again. On a name clash the
person's own file wins (a repository cannot replace a server they configured).

`env` and `headers` values may name variables (`${VAR}`), read from Talos's environment when
the servers are loaded; a value is never logged or shown (`ServerConfig.describe` names the
variables only). Talos's own keys: `network` (a local server may use the network; default
no), `timeout` (seconds to start, default 30), `callTimeout` (seconds per call, default 120).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..display import visible
from ..errors import TalosError
from ..gates.permissions import config_dir, read_json, save_workspace_setting
from ..gates.permissions import workspace_settings_path as settings_path
from ..redact import SECRET_NAME, redact

MCP_FILE = ".talos/mcp.json"
USER_FILE = "mcp.json"
TRUST_KEY = "trusted_mcp_sha256"
# A server's name is part of its tools' names (`mcp__NAME__tool`): no `__`, nothing a rule's
# glob or a model's tool name could not hold.
NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_)){0,31}")
VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
MAX_SERVERS = 32
MAX_ARGS = 256
MAX_VALUE = 8192
YOURS, WORKSPACE, SESSION = "your settings", "the workspace's .talos/mcp.json", "the session"


class McpConfigError(TalosError, ValueError):
    """A configuration file or entry that cannot be used; the message names it. Also a
    ValueError: a file that is not JSON raises the parser's own, and readers catch both."""


@dataclass(frozen=True)
class ServerConfig:
    """One server as configured. `env` and `headers` hold the expanded values: never shown."""

    name: str
    source: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    network: bool = False
    timeout: float = 30.0
    call_timeout: float = 120.0
    variables: tuple[str, ...] = ()  # the `${VAR}` its values named
    # Values redacted wherever they show (a result, a log): every header's, and each env
    # value that came from a variable or whose name says it is a secret.
    secrets: tuple[str, ...] = field(default=(), repr=False)

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    def describe(self) -> str:
        """What it runs or where it is, for the person: no value of `env` or `headers`."""
        if self.command is not None:
            what = " ".join([self.command, *self.args])
            net = "with the network" if self.network else "no network"
            text = f"runs `{visible(redact(what), single_line=True)}` in the sandbox ({net})"
            if self.env:
                text += f"; sets {', '.join(k for k, _ in self.env)}"
        else:
            text = f"at {visible(redact(str(self.url)), single_line=True)} (Streamable HTTP)"
            if self.headers:
                text += f"; sends the headers {', '.join(k for k, _ in self.headers)}"
        return text


def _expand(value: str, where: str, used: list[str], environ: Mapping[str, str]) -> str:
    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            raise McpConfigError(f"{where} names ${{{name}}}, which is not set")
        used.append(name)
        return environ[name]

    return VARIABLE.sub(one, value)


def _strings(value: object, what: str, limit: int) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise McpConfigError(f"{what} must be a list of strings")
    if len(value) > limit or any(len(v) > MAX_VALUE for v in value):
        raise McpConfigError(f"{what} is too long")
    return list(value)


def _pairs(value: object, what: str) -> list[tuple[str, str]]:
    """`{"K": "v"}`, or ACP's `[{"name": "K", "value": "v"}]`."""
    if isinstance(value, list):
        out = []
        for item in value:
            if not isinstance(item, Mapping) or not {"name", "value"} <= set(item):
                raise McpConfigError(f"{what} must hold {{name, value}} objects")
            out.append((item["name"], item["value"]))
    elif isinstance(value, Mapping):
        out = list(value.items())
    else:
        raise McpConfigError(f"{what} must be an object of names to strings")
    for k, v in out:
        if not isinstance(k, str) or not isinstance(v, str) or len(v) > MAX_VALUE:
            raise McpConfigError(f"{what}: each value must be a string")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]{0,127}", k):
            raise McpConfigError(f"{what}: {visible(k, single_line=True)!r} is not a name")
    return out


def parse_server(
    name: object, entry: object, source: str, environ: Mapping[str, str] | None = None
) -> ServerConfig:
    """One entry; McpConfigError naming what is wrong (never a value of env or headers)."""
    environ = os.environ if environ is None else environ
    if not isinstance(name, str) or not NAME.fullmatch(name):
        shown = visible(str(name), single_line=True)[:40]
        raise McpConfigError(
            f"{source}: the server name {shown!r} must be 1 to 32 letters, digits, - or single _"
        )
    where = f"{source}: server {name}"
    if not isinstance(entry, Mapping):
        raise McpConfigError(f"{where} must be an object with command or url")
    known = {"command", "args", "env", "url", "headers", "type", "network", "timeout"}
    known |= {"callTimeout", "name", "cwd", "disabled"}
    unknown = sorted(set(entry) - known)
    if unknown:
        raise McpConfigError(f"{where} has unknown keys {unknown}")
    if ("command" in entry) == ("url" in entry):
        raise McpConfigError(f"{where} needs either command (a local program) or url")
    used: list[str] = []
    timeouts = {}
    for key, default in (("timeout", 30.0), ("callTimeout", 120.0)):
        value = entry.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 3600:
            raise McpConfigError(f"{where}: {key} must be seconds, from 1 to 3600")
        timeouts[key] = float(value)
    network = entry.get("network", False)
    if not isinstance(network, bool):
        raise McpConfigError(f"{where}: network must be true or false")
    common: dict[str, Any] = {
        "name": name,
        "source": source,
        "timeout": timeouts["timeout"],
        "call_timeout": timeouts["callTimeout"],
    }
    if "command" in entry:
        command = entry["command"]
        if not isinstance(command, str) or not command.strip() or len(command) > MAX_VALUE:
            raise McpConfigError(f"{where}: command must be a program name or path")
        args = _strings(entry.get("args", []), f"{where}: args", MAX_ARGS)
        env = [
            (k, _expand(v, f"{where}: env {k}", used, environ))
            for k, v in _pairs(entry.get("env", {}), f"{where}: env")
        ]
        raw = dict(_pairs(entry.get("env", {}), f"{where}: env"))
        secret = [v for k, v in env if VARIABLE.search(raw[k]) or SECRET_NAME.search(k)]
        return ServerConfig(
            command=command,
            args=tuple(args),
            env=tuple(env),
            network=network,
            variables=tuple(dict.fromkeys(used)),
            secrets=tuple(secret),
            **common,
        )
    url = entry["url"]
    if not isinstance(url, str) or not re.match(r"https?://[^\s]+$", url) or len(url) > 2048:
        raise McpConfigError(f"{where}: url must be an http:// or https:// address")
    headers = [
        (k, _expand(v, f"{where}: header {k}", used, environ))
        for k, v in _pairs(entry.get("headers", {}), f"{where}: headers")
    ]
    return ServerConfig(
        url=url,
        headers=tuple(headers),
        variables=tuple(dict.fromkeys(used)),
        secrets=tuple(v for _, v in headers),
        **common,
    )


def parse_file(data: object, source: str, environ: Mapping[str, str] | None = None) -> list:
    """The servers of one `mcp.json`'s content (`{"mcpServers": {...}}`)."""
    if not isinstance(data, Mapping) or not isinstance(data.get("mcpServers", {}), Mapping):
        raise McpConfigError(f'{source}: expected {{"mcpServers": {{NAME: {{...}}}}}}')
    entries = data.get("mcpServers", {})
    if len(entries) > MAX_SERVERS:
        raise McpConfigError(f"{source}: at most {MAX_SERVERS} servers")
    return [
        parse_server(name, entry, source, environ)
        for name, entry in entries.items()
        if not (isinstance(entry, Mapping) and entry.get("disabled") is True)
    ]


def session_servers(
    items: Sequence[Mapping[str, Any]], environ: Mapping[str, str] | None = None
) -> list[ServerConfig]:
    """The servers an ACP client names in `session/new` (`mcpServers`: a list of `{name,
    command, args, env: [{name, value}]}` or `{type: "http", name, url, headers}`), used for
    that session only."""
    if not isinstance(items, Sequence) or len(items) > MAX_SERVERS:
        raise McpConfigError(f"mcpServers must be a list of at most {MAX_SERVERS} servers")
    out = []
    for item in items:
        if not isinstance(item, Mapping):
            raise McpConfigError("each of mcpServers must be an object")
        entry = {k: v for k, v in item.items() if k not in ("name", "type")}
        out.append(parse_server(item.get("name"), entry, SESSION, environ))
    return out


@dataclass
class Loaded:
    """The servers to use, and what the workspace's file holds until it is trusted."""

    servers: list[ServerConfig]
    workspace_sha256: str | None = None  # of the workspace's file, when there is one
    untrusted: list[ServerConfig] = field(default_factory=list)  # its servers, not used
    problems: list[str] = field(default_factory=list)


def load(
    root: Path,
    config: Path | None = None,
    session: Sequence[ServerConfig] = (),
    environ: Mapping[str, str] | None = None,
) -> Loaded:
    """The servers for a workspace: the session's, the person's own file's, then the
    workspace file's once trusted. A file that cannot be used is a problem said, not a
    crash: the others still load."""
    base = config or config_dir()
    root = Path(root).resolve()
    loaded = Loaded([])
    mine: list[ServerConfig] = []
    try:
        data, _ = read_json(base / USER_FILE)
        if data is not None:
            mine = parse_file(data, YOURS, environ)
    except ValueError as exc:
        loaded.problems.append(str(exc))
    theirs: list[ServerConfig] = []
    try:
        data, sha = read_json(root / MCP_FILE)
        if data is not None:
            loaded.workspace_sha256 = sha
            theirs = parse_file(data, WORKSPACE, environ)
    except ValueError as exc:
        loaded.problems.append(str(exc))
    trusted = loaded.workspace_sha256 is not None and loaded.workspace_sha256 == trusted_sha(
        root, base
    )
    taken: set[str] = set()
    for server in [*session, *mine, *(theirs if trusted else [])]:
        if server.name not in taken:
            taken.add(server.name)
            loaded.servers.append(server)
    if not trusted:
        loaded.untrusted = theirs
    return loaded


def trusted_sha(root: Path, config: Path | None = None) -> str | None:
    settings, _ = read_json(settings_path(Path(root).resolve(), config or config_dir()))
    value = settings.get(TRUST_KEY) if isinstance(settings, dict) else None
    return value if isinstance(value, str) else None


def trust(root: Path, sha256: str, config: Path | None = None) -> None:
    """The person trusts the workspace's `.talos/mcp.json` with exactly this content."""
    root = Path(root).resolve()
    save_workspace_setting(
        settings_path(root, config or config_dir()),
        root,
        lambda data: data.__setitem__(TRUST_KEY, sha256),
    )
