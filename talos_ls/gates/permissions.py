"""The permission gate: may the agent run this command, or write this file?

Rules say allow, ask or deny, for commands (`git log` covers `git log -5`; see `shell.matches`)
and for paths (globs: `src/**`). Deny wins over everything, in every mode, and is checked on
every program the command line runs, at every wrapper layer (`env sudo x` is `sudo`). What a
command runs is read with a real shell grammar (`shell.analyze`); a command runs unasked only
when every program in it is allowed by a rule and nothing in it is risky (a redirection, an
`exec`-style flag, an expansion, a path outside the workspace or a `.env*` file, a construct
the grammar does not model).

Where rules come from, and what each may do:
- built in: a few read-only commands (`ls`, `cat`, `git status`...) and a deny list. What they
  allow runs in the sandbox with the workspace read-only.
- the person's own settings, in the user config directory: `permissions.json` (every
  workspace) and `workspaces/<id>.json` (this workspace; "Always allow" saves there, never in
  the repository). What they allow runs with the workspace writable; `network` grants network.
- the workspace's `.talos/permissions.json`, which came with the repository: it may only
  restrict (deny, ask) until the person trusts that exact content once; the trusted sha256 is
  kept in the workspace's settings, so an edited file is untrusted again.

Modes: `read-only` (no writes; commands only when allowed by a rule), `ask` (the default: what
no rule allows is asked), `auto-edit` (edits go through without asking; commands as in ask),
`full-auto` (everything not denied, except a command whose program cannot be known before it
runs, and what an ask rule covers). Without an OS sandbox every command is asked, whatever the
mode and the rules. A prompt offers Allow once, Always allow `<rule>` (when a rule could cover
it: the narrowest useful one, `suggest_rule`, never a bare interpreter) and Deny; a dismissal
is a denial; with nobody there to ask (headless), ask means deny, so nothing ever waits for
ever.
"""

from __future__ import annotations

import asyncio
import dataclasses
import fnmatch
import hashlib
import json
import os
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs

from ..constants import MODES
from ..display import visible
from ..files import FileTooLarge, NotRegularFile, atomic_write, read_regular
from .shell import (
    SHELLS,
    Analysis,
    GlobWalk,
    SimpleCommand,
    analyze,
    could_match,
    matches,
    path_risks,
)

DECISIONS = ("allow", "ask", "deny")
ALLOW_ONCE, DENY = "Allow once", "Deny"
TRUST, NOT_NOW = "Trust this file", "Not now"
PERMISSIONS_FILE = ".talos/permissions.json"
MAX_RULES_BYTES = 256 * 1024
SUMMARY_CHARS = 60  # a longer command is not in the prompt's first line, but on its own

# Read-only commands nobody should have to approve (run with the workspace read-only); and what
# is never run.
DEFAULT_ALLOW = (
    "ls",
    "pwd",
    "cat",
    "head",
    "tail",
    "wc",
    "grep",
    "rg",
    "find",
    "echo",
    "which",
    "file",
    "stat",
    "du",
    "sort",
    "uniq",
    "diff",
    "tree",
    "basename",
    "dirname",
    "true",
    "date",
    "git status",
    "git log",
    "git diff",
    "git show",
    "git branch",
    "git rev-parse",
    "git ls-files",
    "git blame",
    "python --version",
)
DEFAULT_DENY = ("sudo", "su", "doas", "rm -rf /", "rm -rf ~", "mkfs", "dd", "shutdown", "reboot")

NO_RULE = "no rule allows it"

# What "Always allow" names for a program that runs what it is told to (an interpreter, a
# package or build runner), after the program: the first word's meaning, by that word (a
# subcommand or a mode option), "" for any other plain word (a script, a subcommand, a
# target). ONE: the rule ends there (`node app.js`, `npm test`, `cargo run`, `make lint`);
# THEN: with the next word (`python -m pytest`, `npm run lint`, `go run main.go`); RUNS: what
# follows is a command, named in turn (`uv run pytest`, `npx jest`); None or absent: no rule
# (`python -c CODE`, `bash -c`, `deno eval`, a bare `python`). Never the program alone.
ONE, THEN, RUNS = "one", "then", "runs"
# fmt: off
_SCRIPT: dict[str, str | None] = {"": ONE}
_PACKAGES: dict[str, str | None] = {"": ONE, "run": THEN, "run-script": THEN, "exec": RUNS,
                                    "x": RUNS, "dlx": RUNS}
_RUN: dict[str, str | None] = {"": ONE, "run": RUNS}
NARROW: dict[str, dict[str, str | None]] = {
    **dict.fromkeys(("node", "nodejs", "ruby", "perl", "php", "lua", "luajit", "Rscript",
                     "julia", "tclsh", "pwsh", "tsx", "ts-node", "fish", "csh", "tcsh",
                     "dotnet", "cargo", "make", "gmake", *SHELLS), _SCRIPT),
    "python": {"": ONE, "-m": THEN},  # python, python3, python3.12, pypy3 (PYTHONS)
    "java": {"": ONE, "-jar": THEN},
    "npm": _PACKAGES, "pnpm": _PACKAGES,
    "yarn": {**_PACKAGES, "node": None, "exec": None},  # `yarn node -e CODE`; exec: shell text
    "bun": {**_PACKAGES, "exec": None},  # `bun exec` runs shell text
    "deno": {"": ONE, "run": THEN, "task": THEN, "eval": None},
    "npx": {"": RUNS}, "pnpx": {"": RUNS}, "bunx": {"": RUNS}, "uvx": {"": RUNS},
    "uv": {**_RUN, "tool": None, "pip": THEN}, "pipx": {"": ONE, "run": RUNS},
    **dict.fromkeys(("poetry", "pdm", "hatch", "pipenv", "rye"), _RUN),
    "bundle": {"": ONE, "exec": RUNS},
    "go": {"": ONE, "run": THEN, "tool": THEN},
    "git": {"": ONE, **dict.fromkeys(("stash", "remote", "worktree", "submodule", "config"), THEN)},
}
# fmt: on
PYTHONS = re.compile(r"(python|pypy)[0-9.]*")
PLAIN_WORD = re.compile(r"[\w@%+:,./-]+", re.ASCII)  # no glob (`*`), quote, space or `=`

Prompter = Callable[[str, Sequence[str]], Awaitable[str | None]]
# Runs a blocking call off the event loop (`ToolContext.blocking`, the host's worker threads).
Blocking = Callable[..., Awaitable[Any]]


def _same(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    """The same parts: the same objects (strings and flags equal)."""
    return len(a) == len(b) and all(
        x is y or (isinstance(x, str | bool) and x == y) for x, y in zip(a, b, strict=True)
    )


@dataclass(frozen=True)
class Decision:
    verdict: str  # allow | ask | deny
    reason: str
    suggested_rule: str | None = None  # what "always allow" would save
    writable: bool = False  # the workspace is writable for the command
    network: bool = False  # the command may use the network
    shown: str = ""  # the programs the command runs, as the person should see them


@dataclass
class Rules:
    """One source's rules."""

    source: str
    commands: dict[str, list[str]] = field(default_factory=dict)  # decision -> patterns
    paths: dict[str, list[str]] = field(default_factory=dict)
    network: list[str] = field(default_factory=list)  # commands granted the network
    writable: bool = True  # what it allows may write the workspace
    # MCP tools (`mcp__server__tool`, globs: `mcp__server__*`): decision -> patterns
    tools: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def parse(cls, source: str, data: object, where: str) -> Rules:
        if not isinstance(data, dict):
            raise ValueError(f"{where}: expected an object with 'commands' and 'paths'")
        rules = cls(source)
        sections = (("commands", rules.commands), ("paths", rules.paths), ("tools", rules.tools))
        for name, target in sections:
            section = data.get(name, {})
            if not isinstance(section, dict):
                raise ValueError(f"{where}: {name!r} must map allow/ask/deny to lists")
            for decision, patterns in section.items():
                if decision not in DECISIONS or not isinstance(patterns, list):
                    raise ValueError(f"{where}: {name}.{decision} is not a list of patterns")
                target[decision] = [str(p) for p in patterns]
        network = data.get("network", [])
        if not isinstance(network, list):
            raise ValueError(f"{where}: 'network' must be a list of command patterns")
        rules.network = [str(p) for p in network]
        return rules

    def restricting(self) -> Rules:
        """Only what narrows: deny and ask (an untrusted file)."""
        keep = ("ask", "deny")
        return Rules(
            self.source,
            {k: v for k, v in self.commands.items() if k in keep},
            {k: v for k, v in self.paths.items() if k in keep},
            tools={k: v for k, v in self.tools.items() if k in keep},
        )

    @property
    def grants(self) -> list[str]:
        """What this source would let run without asking."""
        return [
            *self.commands.get("allow", []),
            *(f"{p} (network)" for p in self.network),
            *(f"writing {p}" for p in self.paths.get("allow", [])),
            *(f"the MCP tool {p}" for p in self.tools.get("allow", [])),
        ]


BUILT_IN = Rules(
    "built in", {"allow": list(DEFAULT_ALLOW), "deny": list(DEFAULT_DENY)}, writable=False
)


def config_dir() -> Path:
    return platformdirs.user_config_path("talos")


def workspace_settings_path(root: Path, base: Path | None = None) -> Path:
    """The person's own settings for one workspace, outside the repository."""
    ident = hashlib.sha256(str(root).encode()).hexdigest()[:16]
    return (base or config_dir()) / "workspaces" / f"{ident}.json"


def read_json(path: Path) -> tuple[object, str] | tuple[None, None]:
    """The file's JSON and the sha256 of those very bytes (read once: what is trusted is what
    is parsed); (None, None) when there is no file."""
    try:
        raw = read_regular(path, MAX_RULES_BYTES)
    except FileNotFoundError:
        return None, None
    except (FileTooLarge, NotRegularFile, OSError) as exc:
        raise ValueError(f"{path}: cannot be read ({exc})") from None
    try:
        return json.loads(raw), hashlib.sha256(raw).hexdigest()
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None


def save_workspace_setting(path: Path, root: Path | None, change: Callable[[dict], None]) -> None:
    """Change the person's settings for one workspace (`workspace_settings_path`): read,
    `change` applied, written whole in one rename."""
    data, _ = read_json(path)
    data = data if isinstance(data, dict) else {}
    data.setdefault("workspace", str(root))
    change(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path.parent, path.name, (json.dumps(data, indent=2) + "\n").encode())


@dataclass
class WorkspaceFile:
    """The repository's own `.talos/permissions.json`: its rules and whether it is trusted."""

    sha256: str
    rules: Rules
    trusted: bool


@dataclass
class Policy:
    mode: str = "ask"
    commands: dict[str, list[str]] = field(default_factory=dict)  # the person's own rules
    paths: dict[str, list[str]] = field(default_factory=dict)
    network: list[str] = field(default_factory=list)
    tools: dict[str, list[str]] = field(default_factory=dict)  # MCP tools (`Rules.tools`)
    root: Path | None = None  # the workspace: paths outside it are risky
    sandboxed: bool = False  # commands run under an OS sandbox; without one, all are asked
    settings_path: Path | None = None  # where "always allow" saves
    workspace_file: WorkspaceFile | None = None
    user: Rules | None = None
    # Workspace folders open inside this one (a daemon serving both): (path relative to this
    # root, their policy). A task here honours their restricting rules (`_inner`).
    nested: Callable[[], Sequence[tuple[str, Policy]]] | None = None
    # The sources as last built, with what they were built from (`_built`); not copied by
    # `for_task`, so each task's copy builds its own once.
    _cache: tuple[tuple[object, ...], list[Rules], list[tuple[str, Rules]]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        for table in (self.commands, self.paths, self.tools):
            bad = set(table) - set(DECISIONS)
            if bad:
                raise ValueError(f"unknown decision(s) {sorted(bad)}; expected {DECISIONS}")

    @classmethod
    def load(
        cls,
        workspace_root: str | Path,
        mode: str = "ask",
        *,
        sandboxed: bool = False,
        config: Path | None = None,
    ) -> Policy:
        """The built-in rules, the person's settings (`config`, default the user config
        directory) and the workspace's own file (restricting only, unless trusted)."""
        root = Path(workspace_root).resolve()
        base = config or config_dir()
        user_data, _ = read_json(base / "permissions.json")
        user = (
            Rules.parse("your settings", user_data, str(base / "permissions.json"))
            if user_data is not None
            else None
        )
        settings_path = workspace_settings_path(root, base)
        settings, _ = read_json(settings_path)
        mine = Rules.parse("this workspace's settings", settings or {}, str(settings_path))
        trusted_hash = (
            settings.get("trusted_permissions_sha256") if isinstance(settings, dict) else None
        )
        policy = cls(
            mode=mode,
            commands=mine.commands,
            paths=mine.paths,
            network=mine.network,
            tools=mine.tools,
            root=root,
            sandboxed=sandboxed,
            settings_path=settings_path,
            user=user,
        )
        path = root / PERMISSIONS_FILE
        data, sha = read_json(path)
        if data is not None and sha is not None:
            policy.workspace_file = WorkspaceFile(
                sha,
                Rules.parse("the workspace's .talos/permissions.json", data, str(path)),
                trusted=sha == trusted_hash,
            )
        return policy

    def pinned(self) -> Policy:
        """This policy with the folders open inside it read now, on the caller's thread: a
        worker thread judges with it while the event loop goes on adding and removing
        folders. Their rules are copied; this folder's own are read, never iterated."""
        inner = tuple(
            (
                rel,
                dataclasses.replace(
                    policy, nested=None, commands={k: list(v) for k, v in policy.commands.items()}
                ),
            )
            for rel, policy in (self.nested() if self.nested is not None else ())
        )
        return dataclasses.replace(self, nested=lambda: inner)

    def for_task(self, mode: str) -> Policy:
        """This policy with `mode` fixed for one task: a settings change while it runs does
        not reach it. The rules stay shared: an "Always allow" or a trust given meanwhile
        applies to every task."""
        return dataclasses.replace(self, mode=mode)

    # ------------------------------------------------------------ sources
    def _own(self) -> list[Rules]:
        """This folder's own rules: the person's settings for it, and its file."""
        out = [Rules("your settings", self.commands, self.paths, self.network, tools=self.tools)]
        wf = self.workspace_file
        if wf is not None:
            out.append(wf.rules if wf.trusted else wf.rules.restricting())
        return out

    def _made_of(self) -> tuple[object, ...]:
        """What this folder's own sources are built from. The rule lists are held, not copied,
        so an "Always allow" (appended in place) needs no rebuild; a trust does."""
        wf = self.workspace_file
        return (
            self.user,
            self.commands,
            self.paths,
            self.network,
            self.tools,
            wf,
            wf is not None and wf.trusted,
        )

    def _built(self) -> tuple[list[Rules], list[tuple[str, Rules]]]:
        """The sources (`sources`) and the nested folders' restricting rules (`_inner`), built
        again only when what they are made of changed: a folder opened or closed inside this
        one, a trust given, here or there. Checked by identity at every lookup: cheap."""
        nested = list(self.nested()) if self.nested is not None else []
        key = self._made_of()
        for rel, inner in nested:
            key += (rel, inner, *inner._made_of())
        cached = self._cache
        if cached is not None and _same(cached[0], key):
            return cached[1], cached[2]
        inner_rules = []
        for rel, inner in nested:
            for rules in inner._own():
                narrow = rules.restricting()
                narrow.source = f"{rules.source} of the folder {visible(rel, single_line=True)}"
                inner_rules.append((rel, narrow))
        sources = [BUILT_IN, *([self.user] if self.user is not None else []), *self._own()]
        sources += [Rules(r.source, r.commands, writable=False) for _, r in inner_rules]
        self._cache = (key, sources, inner_rules)
        return sources, inner_rules

    def _inner(self) -> list[tuple[str, Rules]]:
        """The deny and ask rules of the workspace folders open inside this one, each with
        its folder's path relative to this root: their command rules apply to every command
        of a task here (it can reach into them), their path rules to paths inside them."""
        return self._built()[1]

    def sources(self) -> list[Rules]:
        """Every source of rules, in order (built in, yours, this folder's, the nested
        folders' restricting ones). Shared: read it, never change it."""
        return self._built()[0]

    @property
    def untrusted_grants(self) -> list[str]:
        """What the workspace's own file would allow, were it trusted."""
        wf = self.workspace_file
        return [] if wf is None or wf.trusted else wf.rules.grants

    def trust_workspace_file(self) -> None:
        """The person trusts the workspace file exactly as it is now."""
        wf = self.workspace_file
        if wf is None:
            return
        self._save_setting(lambda data: data.__setitem__("trusted_permissions_sha256", wf.sha256))
        wf.trusted = True

    # ----------------------------------------------------------- decisions
    def _command_rule(self, decision: str, cmd: SimpleCommand) -> Rules | None:
        for rules in self.sources():
            patterns = rules.commands.get(decision, [])
            if decision == "deny":
                if any(matches(p, layer, loose=True) for p in patterns for layer in cmd.layers):
                    return rules
            elif cmd.known and any(matches(p, cmd.words) for p in patterns):
                return rules
        return None

    def _network(self, cmd: SimpleCommand) -> bool:
        return cmd.known and any(matches(p, cmd.words) for r in self.sources() for p in r.network)

    def check_command(self, command: str) -> Decision:
        analysis = analyze(command)
        shown = "; ".join(visible(c.shown(), single_line=True) for c in analysis.commands)
        if not analysis.commands:
            if analysis.all_risks:
                return Decision("ask", f"it {visible(analysis.all_risks[0])}", shown=shown)
            return Decision("deny", "empty command")
        for cmd in analysis.commands:
            if (rules := self._command_rule("deny", cmd)) is not None:
                what = visible(" ".join(cmd.layers[0]), single_line=True)
                return Decision("deny", f"`{what}` is denied by {rules.source}", shown=shown)
        return self._judge(analysis, shown)

    def _maybe_denied(self, cmd: SimpleCommand) -> str | None:
        """A deny rule its expansions or globs could turn it into, once they are known."""
        for rules in self.sources():
            for rule in rules.commands.get("deny", []):
                if could_match(rule, cmd):
                    return f"it could be `{visible(rule, single_line=True)}`, which is denied"
        return None

    def _judge(self, analysis: Analysis, shown: str) -> Decision:
        asks = any(
            self._command_rule("ask", c) is not None or self._maybe_denied(c)
            for c in analysis.commands
        )
        if self.mode == "full-auto" and self.sandboxed and not analysis.opaque and not asks:
            network = all(self._network(c) for c in analysis.commands)
            return Decision("allow", "full-auto mode", writable=True, network=network, shown=shown)
        asked: list[tuple[SimpleCommand, str]] = []
        grants: list[Rules] = []
        walk = GlobWalk(self.root) if self.root else None  # one budget for the line's globs
        for cmd in analysis.commands:
            risks = [*cmd.risks, *(path_risks(cmd, self.root, walk) if self.root else [])]
            rules = self._command_rule("allow", cmd)
            if self._command_rule("ask", cmd) is not None:
                asked.append((cmd, "a rule says to ask"))
            elif maybe := self._maybe_denied(cmd):
                asked.append((cmd, maybe))
            elif risks:
                asked.append((cmd, risks[0]))
            elif rules is None:
                asked.append((cmd, NO_RULE))
            else:
                grants.append(rules)
        if analysis.risks and not asked:
            asked.append((analysis.commands[0], analysis.risks[0]))
        # What bash would evaluate from data (`$((x))`, `${!x}`, a here-document's backticks)
        # belongs to the line, not to one program: said first.
        asked[:0] = [(analysis.commands[0], why) for why in analysis.evaluates[:1]]
        if not self.sandboxed:
            if self.mode == "read-only":
                return Decision("deny", "commands cannot run in read-only mode without a sandbox")
            return Decision(
                "ask",
                "commands run without an OS sandbox here, so each needs your approval",
                _suggest(asked),
                shown=shown,
            )
        if asked:
            # What most needs the person's eye first: risks, then programs no rule allows.
            asked.sort(key=lambda item: item[1] == NO_RULE)
            if len(analysis.commands) == 1:  # the prompt shows the command already
                why = "; ".join(dict.fromkeys(visible(w, single_line=True) for _, w in asked))
            else:
                why = "; ".join(
                    dict.fromkeys(
                        f"`{visible(c.shown(), single_line=True)}`: {visible(w, single_line=True)}"
                        for c, w in asked[:3]
                    )
                )
            if self.mode == "read-only":
                return Decision("deny", f"not allowed in read-only mode: {why}")
            return Decision("ask", why, _suggest(asked), shown=shown)
        network = any(self._network(c) for c in analysis.commands) and all(
            self._network(c) or not r.writable
            for c, r in zip(analysis.commands, grants, strict=True)
        )
        # Writable only when every program on the line was allowed by a rule that grants
        # writing: a built-in reader beside the person's `pytest` must not write through it.
        writable = self.mode != "read-only" and all(r.writable for r in grants)
        return Decision(
            "allow", "allowed by rules", writable=writable, network=network, shown=shown
        )

    def check_write(self, rel_path: str) -> Decision:
        ruled = None
        for decision in ("deny", "allow", "ask"):  # deny wins
            if any(
                fnmatch.fnmatchcase(rel_path, p)
                for rules in self.sources()
                for p in rules.paths.get(decision, [])
            ):
                ruled = decision
                break
        for rel, rules in self._inner():  # a folder inside: its rules, on its own paths
            if ruled == "deny" or not rel_path.startswith(rel + "/"):
                continue
            inside = rel_path[len(rel) + 1 :]
            for decision in ("deny", "ask"):  # an ask there beats an allow here
                if any(fnmatch.fnmatchcase(inside, p) for p in rules.paths.get(decision, [])):
                    ruled = decision
                    break
        if ruled == "deny":
            return Decision("deny", f"writing {rel_path} is denied by a rule")
        if self.mode == "read-only":
            return Decision("deny", "no writes in read-only mode")
        if ruled == "ask":
            return Decision("ask", f"a rule says to ask before writing {rel_path}", rel_path)
        if ruled == "allow" or self.mode in ("auto-edit", "full-auto"):
            return Decision("allow", "allowed")
        return Decision("ask", f"writing {rel_path} needs your approval", rel_path)

    def check_tool(self, name: str) -> Decision:
        """An MCP tool (`mcp__server__tool`): deny wins, then ask, then allow (rules match
        the name, globs allowed: `mcp__server__*`); with no rule, full-auto allows, read-only
        denies, the other modes ask."""
        shown = visible(name, single_line=True)
        ruled = {
            decision: next(
                (
                    r
                    for r in self.sources()
                    if any(fnmatch.fnmatchcase(name, p) for p in r.tools.get(decision, []))
                ),
                None,
            )
            for decision in DECISIONS
        }
        if (rules := ruled["deny"]) is not None:
            return Decision("deny", f"`{shown}` is denied by {rules.source}", shown=shown)
        if ruled["ask"] is not None:
            if self.mode == "read-only":
                return Decision("deny", "not allowed in read-only mode: a rule says to ask")
            return Decision("ask", "a rule says to ask", name, shown=shown)
        if ruled["allow"] is not None:
            return Decision("allow", f"allowed by {ruled['allow'].source}", shown=shown)
        if self.mode == "full-auto":
            return Decision("allow", "full-auto mode", shown=shown)
        if self.mode == "read-only":
            return Decision("deny", f"not allowed in read-only mode: {NO_RULE}", shown=shown)
        return Decision("ask", NO_RULE, name, shown=shown)

    def always_allow_tool(self, rule: str) -> None:
        """Save `rule` as an allowed MCP tool, in memory and in the person's settings for
        this workspace (never in the repository)."""
        self._always_allow("tools", self.tools, rule)

    async def authorize_tool(
        self, name: str, about: str, arguments: str, prompter: Prompter | None
    ) -> Decision:
        """Decide an MCP tool call, asking the person when no rule decides it. `about` says
        which server and where it runs; `arguments` is the call's JSON as the model sent it,
        shown as plain text. No prompter, a dismissal: denied."""
        decision = self.check_tool(name)
        if decision.verdict != "ask":
            return decision
        if prompter is None:
            return Decision("deny", f"{decision.reason}; nobody is there to ask (headless)")
        rule = visible(name, single_line=True)
        always = f"Always allow `{rule}`"
        args = visible(arguments if len(arguments) <= 2000 else arguments[:2000] + " [...]")
        message = "\n".join(
            [
                f"Use this MCP tool? `{rule}`",
                f"Server: {about}",
                "Arguments:",
                *(f"  {line}" for line in (args or "{}").splitlines()[:40]),
                f"Why you are asked: {decision.reason}.",
                f"Always allow would save the rule `{rule}` in your settings for this "
                "workspace: this tool would then run unasked, with any arguments.",
            ]
        )
        choice = await prompter(message, [ALLOW_ONCE, always, DENY])
        if choice == ALLOW_ONCE:
            return Decision("allow", "allowed once by you", shown=decision.shown)
        if choice == always:
            self.always_allow_tool(name)
            return Decision("allow", f"allowed; `{rule}` is now always allowed", shown=rule)
        return Decision("deny", "denied by you" if choice == DENY else "dismissed: denied")

    # -------------------------------------------------------------- asking
    def _save_setting(self, change: Callable[[dict], None]) -> None:
        if self.settings_path is not None:
            save_workspace_setting(self.settings_path, self.root, change)

    def always_allow(self, rule: str) -> None:
        """Save exactly `rule` as an allowed command, in memory and in the person's settings
        for this workspace (never in the repository)."""
        self._always_allow("commands", self.commands, rule)

    def _always_allow(self, section: str, held: dict[str, list[str]], rule: str) -> None:
        if rule not in held.setdefault("allow", []):
            held["allow"].append(rule)

        def add(data: dict) -> None:
            allowed = data.setdefault(section, {}).setdefault("allow", [])
            if rule not in allowed:
                allowed.append(rule)

        self._save_setting(add)

    async def authorize_command(
        self,
        command: str,
        prompter: Prompter | None,
        timeout: float | None = None,
        *,
        blocking: Blocking | None = None,
    ) -> Decision:
        """Decide, asking the person when a rule says ask. No prompter (headless), a
        dismissal, or no reply within `timeout` is a denial. `blocking` runs the check (the
        parse, the path checks, a glob's walk) off the event loop, on a copy whose folders
        are read now (`pinned`): a hostile command costs a worker thread, never the
        language server's answers."""
        if blocking is None:
            decision = self.check_command(command)
        else:
            decision = await blocking(self.pinned().check_command, command)
        if decision.verdict != "ask":
            return decision
        if prompter is None:
            return Decision("deny", f"{decision.reason}; nobody is there to ask (headless)")
        options = [ALLOW_ONCE]
        always = None
        if decision.suggested_rule and self.sandboxed:
            always = f"Always allow `{visible(decision.suggested_rule, single_line=True)}`"
            options.append(always)
        options.append(DENY)
        message = self._prompt_text(command, decision, always is not None)
        try:
            choice = await asyncio.wait_for(prompter(message, options), timeout)
        except TimeoutError:
            return Decision("deny", "no reply to the permission prompt: denied")
        network = decision.network
        if choice == ALLOW_ONCE:
            return Decision(
                "allow", "allowed once by you", writable=True, network=network, shown=decision.shown
            )
        if always is not None and choice == always and decision.suggested_rule:
            self.always_allow(decision.suggested_rule)
            return Decision(
                "allow",
                f"allowed; `{decision.suggested_rule}` is now always allowed in this workspace",
                writable=True,
                network=network,
                shown=decision.shown,
            )
        return Decision("deny", "denied by you" if choice == DENY else "dismissed: denied")

    def _prompt_text(self, command: str, decision: Decision, offered: bool) -> str:
        """The prompt, one fact a line: the first alone is a summary (some editors show only
        that one); then the command, what it may do there, why it is asked, the rule."""
        line = visible(command, single_line=True)
        where = "in the sandbox" if self.sandboxed else "WITHOUT a sandbox"
        short = len(line) <= SUMMARY_CHARS and "`" not in line
        lines = [
            f"Run this command? `{line}` ({where})" if short else f"Run this command? ({where})"
        ]
        if not short:
            lines.append(f"  $ {line}")
        if decision.shown not in (None, line):
            lines.append(f"It runs: {decision.shown}")
        if self.sandboxed:
            root = visible(str(self.root), single_line=True) if self.root else "the workspace"
            net = "with the network" if decision.network else "with no network"
            lines.append(f"It may change files only in the workspace ({root}), {net}.")
        else:
            lines.append("WITHOUT a sandbox it can do anything you can: your files, the network.")
        lines.append(f"Why you are asked: {decision.reason}.")
        if offered and decision.suggested_rule:
            rule = visible(decision.suggested_rule, single_line=True)
            lines.append(
                f"Always allow would save the rule `{rule}`: any command starting with it "
                "would then run unasked in this workspace."
            )
        elif self.sandboxed:
            lines.append("No Always allow: no rule would let just this run unasked.")
        else:
            lines.append("No Always allow without a sandbox: the rule would run it unconfined.")
        return "\n".join(lines)

    async def review_workspace_file(self, prompter: Prompter | None) -> bool | None:
        """Offer to trust the workspace's own permissions file when it would allow something.
        True: trusted now; False: declined or nobody to ask; None: nothing to review."""
        grants = self.untrusted_grants
        if not grants or self.workspace_file is None:
            return None
        if prompter is None:
            return False
        listed = ", ".join(f"`{visible(g, single_line=True)}`" for g in grants[:12])
        more = f" and {len(grants) - 12} more" if len(grants) > 12 else ""
        folder = visible(str(self.root), single_line=True) if self.root else "this workspace"
        message = (
            f"The workspace folder {folder}: its {PERMISSIONS_FILE} (sha256 "
            f"{self.workspace_file.sha256[:12]}) "
            f"would let these run without asking: {listed}{more}. It came with the workspace, "
            "so until you trust it only its deny and ask rules apply. Trust this exact file?"
        )
        if await prompter(message, [TRUST, NOT_NOW]) == TRUST:
            self.trust_workspace_file()
            return True
        return False


def _suggest(asked: list[tuple[SimpleCommand, str]]) -> str | None:
    """The rule "always allow" offers, when one rule would let every asked program run: only
    for known programs whose only problem is that no rule allows them."""
    if not asked or any(why != NO_RULE or not c.known or c.risks for c, why in asked):
        return None
    rules = {suggest_rule(c.words) for c, _ in asked}
    rule = rules.pop() if len(rules) == 1 else None
    return rule if rule and all(matches(rule, c.words) for c, _ in asked) else None


def _plain(word: str) -> bool:
    """A word a rule names exactly: not an option, an assignment, a glob or a quote."""
    return bool(PLAIN_WORD.fullmatch(word)) and not word.startswith("-")


def suggest_rule(words: Sequence[str] | str) -> str | None:
    """The narrowest useful rule for this command, or None. A program NARROW knows is named
    with what it is told to run (`python -m pytest`, `npm run lint`, `uv run pytest`), never
    alone; another, with its subcommand (`git commit`, `./run.sh fast`) or alone (`pytest`)."""
    if isinstance(words, str):
        words = words.split()
    if not words or not _plain(words[0]):
        return None
    program, args = words[0], list(words[1:])
    name = os.path.basename(program)
    table = NARROW.get("python" if PYTHONS.fullmatch(name) else name)
    if table is None:
        plain = bool(args) and _plain(args[0]) and "/" not in args[0]
        return " ".join(words[:2]) if plain else program
    if not args:
        return None
    first, rest = args[0], args[1:]
    kind = table.get(first, table.get("") if _plain(first) else None)
    if kind == ONE:
        return f"{program} {first}"
    if kind == THEN and rest and _plain(rest[0]):
        return f"{program} {first} {rest[0]}"
    if kind == RUNS:  # `uv run CMD`; for npx (no subcommand) the command starts at `first`
        head, inner = ([program, first], rest) if first in table else ([program], args)
        sub = suggest_rule(inner)
        return " ".join([*head, sub]) if sub else None
    return None
