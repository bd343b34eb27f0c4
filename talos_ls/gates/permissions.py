"""The permission gate: may the agent run this command, or write this file?

Rules say allow, ask or deny, for commands (a prefix of words: `git log` matches `git log -5`)
and for paths (globs: `src/**`). Deny wins over everything. A compound command (`&&`, `||`,
`;`, `|`, newlines, `$(...)`, backticks, `sh -c '...'`) is split and every part must be allowed
on its own, so `git status && rm -rf ~` is not `git status`.

Modes: `read-only` (no writes; commands only when allowed by a rule), `ask` (the default: what
no rule allows is asked), `auto-edit` (edits go through without asking; commands as in ask),
`full-auto` (everything not denied). A prompt offers Allow once, Always allow `<rule>` (the
exact rule that will be saved to `.talos/permissions.json`) and Deny. A dismissal is a denial;
with nobody there to ask (headless), ask means deny, so nothing ever waits forever.
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import re
import shlex
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

MODES = ("read-only", "ask", "auto-edit", "full-auto")
DECISIONS = ("allow", "ask", "deny")
ALLOW_ONCE, DENY = "Allow once", "Deny"
PERMISSIONS_FILE = ".talos/permissions.json"

# Read-only commands nobody should have to approve; and what is never run.
DEFAULT_ALLOW = ("ls", "pwd", "cat", "head", "tail", "wc", "grep", "rg", "find", "git status",
                 "git log", "git diff", "git show", "git branch", "python --version")  # fmt: skip
DEFAULT_DENY = ("sudo", "su", "rm -rf /", "mkfs", "dd", "shutdown", "reboot")

_SUBSTITUTION = re.compile(r"\$\(([^()]*)\)|`([^`]*)`")
_SHELLS = frozenset({"sh", "bash", "zsh", "dash"})

Prompter = Callable[[str, Sequence[str]], Awaitable[str | None]]


@dataclass(frozen=True)
class Decision:
    verdict: str  # allow | ask | deny
    reason: str
    suggested_rule: str | None = None  # what "always allow" would save


def split_command(command: str) -> list[str]:
    """Every simple command inside `command`, substitutions and `sh -c` bodies included.
    Quote-aware: `sh -c "a; b"` is the two commands a and b."""
    parts: list[str] = []
    pending = [command]
    while pending:
        text = pending.pop()
        for match in _SUBSTITUTION.finditer(text):
            pending.append(match.group(1) or match.group(2) or "")
        text = _SUBSTITUTION.sub(" SUBST ", text).replace("\n", " ; ")
        lexer = shlex.shlex(text, posix=True, punctuation_chars="|&;")
        lexer.whitespace_split = True
        try:
            tokens = list(lexer)
        except ValueError:  # unbalanced quotes: judge the words as they stand
            tokens = text.split()
        words: list[str] = []
        for token in [*tokens, ";"]:
            if token and set(token) <= set("|&;"):
                if len(words) >= 3 and Path(words[0]).name in _SHELLS and words[1] == "-c":
                    pending.append(words[2])
                elif words:
                    parts.append(" ".join(words))
                words = []
            else:
                words.append(token)
    return parts


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


def command_matches(pattern: str, command: str) -> bool:
    """A rule matches a simple command when its words are the command's first words
    (`*` matches any one word; a rule of just `*` matches everything)."""
    rule, words = _words(pattern), _words(command)
    if rule == ["*"]:
        return True
    if not rule or len(rule) > len(words):
        return False
    return all(r == "*" or fnmatch.fnmatchcase(w, r) if "*" in r else r == w
               for r, w in zip(rule, words, strict=False))  # fmt: skip


def suggest_rule(command: str) -> str:
    """The rule "always allow" offers: the program and its subcommand (`npm test`,
    `git commit`), or the program alone when there is no subcommand."""
    words = _words(command)
    if len(words) >= 2 and not words[1].startswith("-") and "/" not in words[1]:
        return " ".join(words[:2])
    return words[0] if words else command


@dataclass
class Policy:
    mode: str = "ask"
    commands: dict[str, list[str]] = field(default_factory=dict)  # decision -> patterns
    paths: dict[str, list[str]] = field(default_factory=dict)
    persist_to: Path | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        for table in (self.commands, self.paths):
            bad = set(table) - set(DECISIONS)
            if bad:
                raise ValueError(f"unknown decision(s) {sorted(bad)}; expected {DECISIONS}")

    @classmethod
    def load(cls, workspace_root: str | Path, mode: str = "ask") -> Policy:
        """Defaults, then `.talos/permissions.json` of the workspace:
        {"commands": {"allow": [...], "ask": [...], "deny": [...]}, "paths": {...}}."""
        path = Path(workspace_root) / PERMISSIONS_FILE
        commands = {"allow": list(DEFAULT_ALLOW), "deny": list(DEFAULT_DENY)}
        paths: dict[str, list[str]] = {}
        if path.exists():
            try:
                data = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError) as exc:
                raise ValueError(f"{path}: not valid JSON ({exc})") from None
            if not isinstance(data, dict):
                raise ValueError(f"{path}: expected an object with 'commands' and 'paths'")
            for name, target in (("commands", commands), ("paths", paths)):
                section = data.get(name, {})
                if not isinstance(section, dict):
                    raise ValueError(f"{path}: {name!r} must map allow/ask/deny to lists")
                for decision, patterns in section.items():
                    if decision not in DECISIONS or not isinstance(patterns, list):
                        raise ValueError(f"{path}: {name}.{decision} is not a list of patterns")
                    target.setdefault(decision, []).extend(str(p) for p in patterns)
        return cls(mode=mode, commands=commands, paths=paths, persist_to=path)

    # ----------------------------------------------------------- decisions
    def _rule_for(self, table: dict[str, list[str]], match: Callable[[str], bool]) -> str | None:
        for decision in ("deny", "allow", "ask"):  # deny wins
            if any(match(p) for p in table.get(decision, [])):
                return decision
        return None

    def check_command(self, command: str) -> Decision:
        parts = split_command(command)
        if not parts:
            return Decision("deny", "empty command")
        verdicts = []
        for part in parts:
            ruled = self._rule_for(self.commands, lambda p, part=part: command_matches(p, part))
            if ruled == "deny":
                return Decision("deny", f"`{part}` is denied by a rule")
            if ruled is None:
                ruled = "allow" if self.mode == "full-auto" else "ask"
            if ruled == "ask" and self.mode == "read-only":
                return Decision("deny", f"`{part}` is not allowed in read-only mode")
            verdicts.append((ruled, part))
        asked = [part for verdict, part in verdicts if verdict == "ask"]
        if asked:
            return Decision("ask", f"`{asked[0]}` needs your approval", suggest_rule(asked[0]))
        return Decision("allow", "allowed by rules")

    def check_write(self, rel_path: str) -> Decision:
        ruled = self._rule_for(self.paths, lambda p: fnmatch.fnmatchcase(rel_path, p))
        if ruled == "deny":
            return Decision("deny", f"writing {rel_path} is denied by a rule")
        if self.mode == "read-only":
            return Decision("deny", "no writes in read-only mode")
        if ruled == "allow" or self.mode in ("auto-edit", "full-auto"):
            return Decision("allow", "allowed")
        return Decision("ask", f"writing {rel_path} needs your approval", rel_path)

    # -------------------------------------------------------------- asking
    def always_allow(self, rule: str) -> None:
        """Save exactly `rule` as an allowed command, in memory and in the workspace file."""
        self.commands.setdefault("allow", []).append(rule)
        if self.persist_to is None:
            return
        data: dict = {}
        if self.persist_to.exists():
            data = json.loads(self.persist_to.read_text())
        allowed = data.setdefault("commands", {}).setdefault("allow", [])
        if rule not in allowed:
            allowed.append(rule)
        self.persist_to.parent.mkdir(parents=True, exist_ok=True)
        self.persist_to.write_text(json.dumps(data, indent=2) + "\n")

    async def authorize_command(
        self, command: str, prompter: Prompter | None, timeout: float | None = None
    ) -> Decision:
        """Decide, asking the person when a rule says ask. No prompter (headless), a
        dismissal, or no reply within `timeout` is a denial."""
        decision = self.check_command(command)
        if decision.verdict != "ask":
            return decision
        if prompter is None:
            return Decision("deny", f"{decision.reason}, and nobody is there to ask (headless)")
        always = f"Always allow `{decision.suggested_rule}`"
        try:
            choice = await asyncio.wait_for(
                prompter(f"Run `{command}`? {decision.reason}.", [ALLOW_ONCE, always, DENY]),
                timeout,
            )
        except TimeoutError:
            return Decision("deny", "no reply to the permission prompt: denied")
        if choice == ALLOW_ONCE:
            return Decision("allow", "allowed once by you")
        if choice == always and decision.suggested_rule:
            self.always_allow(decision.suggested_rule)
            return Decision("allow", f"allowed; `{decision.suggested_rule}` is now always allowed")
        return Decision("deny", "denied by you" if choice == DENY else "dismissed: denied")
