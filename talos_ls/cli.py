"""`talos`: the command line.

This module parses the command line and loads what a command needs only once the command is
known: `talos --version`, `--help` (of any command) and `talos completion` load argparse and
the leaf `constants.py`, nothing else (issue 30; `bench/startup_bench.py`). The commands on the
store are in `store_commands.py`; `talos run`, `skills`, `doctor`, `permissions` and `demo` in
`commands.py`.

Every command shares one error path (`cli_report.py`): an expected failure is one line on stderr,
`talos: error: <what is wrong>; <how to fix it>` (with --json, one JSON object on stdout), a
traceback only with --verbose. Exit codes: 0 success, 1 a failure (the store, the model, the
sandbox; a task failed or stopped), 2 a usage error, 130 interrupted (Ctrl-C), 141 stdout
closed early (`talos memory --json | head`: the exit a program killed by SIGPIPE has).

The workspace of a command, without --workspace, is found like git's repository
(`project.find_root`): the nearest ancestor with `.git`, `.talos` or a project file.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from . import __version__
from .constants import ENV_URL, MODES, QUESTION_BUDGET_TURNS, RANKINGS, SHELLS, SOURCES
from .errors import TalosError

if TYPE_CHECKING:
    from decimal import Decimal

    from .config import Effective


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors on the one error path: one line naming the option, exit 2."""

    def error(self, message: str) -> NoReturn:
        from .cli_report import USAGE, CliError

        raise CliError("usage", f"{message}; see {self.prog} --help", USAGE)


def _workspace_option(parser: argparse.ArgumentParser, **kwargs: Any) -> None:
    parser.add_argument(
        "--workspace",
        metavar="DIR",
        help="default: the nearest directory up from here with .git, .talos or a project file",
        **kwargs,
    )


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="talos",
        description="Talos: a coding agent in your editor that asks at most one question per "
        "K turns. These commands inspect what it holds.",
    )
    parser.add_argument("--version", action="version", version=f"talos {__version__}")
    parser.add_argument(
        "--store",
        metavar="URL",
        help=f"store URL, e.g. sqlite:////abs/path/talos.db (default: ${ENV_URL}, else "
        "talos.db in the user state directory)",
    )
    parser.add_argument(
        "--verbose", "-v", action="store_true", help="log at DEBUG on stderr, and show tracebacks"
    )
    parser.add_argument(
        "--log-file", metavar="PATH", help="also log at DEBUG to PATH (keys, credentials redacted)"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, help: str, description: str) -> argparse.ArgumentParser:
        """A command's parser, its first option --workspace."""
        child = sub.add_parser(name, help=help, description=description)
        _workspace_option(child)
        return child

    listing = _Parser(add_help=False)
    listing.add_argument("--agent", metavar="A", help="only this agent (default: this workspace's)")
    listing.add_argument("--all-agents", action="store_true", help="every agent in the store")
    _workspace_option(listing)
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")

    q = sub.add_parser(
        "questions",
        parents=[listing],
        help="list question candidates and each agent's question budget",
        description="List question candidates: open ones (pending, delivered, cooled) by "
        "default, every status with --all. Each agent's line says when its budget reopens.",
    )
    q.add_argument("--all", action="store_true", help="include answered and expired ones")
    q.add_argument(
        "--budget-turns",
        type=_count,
        metavar="K",
        help=f"the K the agents run with (default: config, else {QUESTION_BUDGET_TURNS})",
    )
    m = sub.add_parser(
        "memory",
        parents=[listing],
        help="list, add and forget facts; show conflicts",
        description="Without an action: list facts with confidence, evidence counts "
        "(corroborations and contradictions), source, and whether each is still valid.",
    )
    actions = m.add_subparsers(dest="action", metavar="ACTION")
    # Sub-actions leave --agent/--json alone unless given, so `talos memory --agent A` works.
    late = _Parser(add_help=False)
    late.add_argument(
        "--agent",
        metavar="A",
        default=argparse.SUPPRESS,
        help="the agent (default for add: this directory's workspace)",
    )
    late.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print JSON instead of text"
    )
    _workspace_option(late, default=argparse.SUPPRESS)
    add = actions.add_parser(
        "add",
        parents=[late],
        help="tell Talos a fact (source: person)",
        description="Store a fact and reconcile it with what is held. A sentence like "
        "'tests use pytest' gets its slot (subject, attribute, value) by itself.",
    )
    add.add_argument("statement")
    add.add_argument("--subject")
    add.add_argument("--attribute")
    add.add_argument("--value")
    add.add_argument("--source", default="person", choices=SOURCES)
    forget = actions.add_parser(
        "forget",
        help="retract a fact",
        description="Retract a fact (its key, or the "
        "shortened key `talos memory` shows, if unambiguous).",
    )
    forget.add_argument("key")
    actions.add_parser(
        "conflicts",
        parents=[late],
        help="show unresolved conflicts",
        description="Live conflicts between facts of equal precedence, with both sides.",
    )
    r = sub.add_parser(
        "run",
        help="run one request in a workspace, in the terminal",
        description="Run one request through Talos in the terminal: questions and permission "
        "prompts are asked here when this is a terminal (without one nothing prompts and "
        "nothing waits); proposals are shown as diffs and applied on confirmation or with "
        "--apply. Exit codes: 0 done, 1 the task failed or was stopped, 2 a usage error.",
    )
    r.add_argument("request", nargs="?", help="what to do, in your words; - reads it from stdin")
    r.add_argument("--file", metavar="PATH", help="read the request from a file")
    _workspace_option(r)
    r.add_argument(
        "--model",
        help="model name (default: $TALOS_MODEL, else the config "
        "files' model, else gpt-4.1-mini; see talos config)",
    )
    r.add_argument(
        "--base-url",
        help="an OpenAI-compatible endpoint, e.g. http://localhost:"
        "11434/v1 for Ollama (default: $OPENAI_BASE_URL, else OpenAI)",
    )
    r.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="the variable holding the key "
        "(default: the config file's api_key_env, else OPENAI_API_KEY)",
    )
    r.add_argument(
        "--mode", choices=MODES, help="permission mode (default: the config files' mode, else ask)"
    )
    r.add_argument("--apply", action="store_true", help="apply proposals without asking")
    r.add_argument(
        "--max-cost",
        type=_usd,
        metavar="USD",
        help="stop the task at this cost (a model without a price needs --max-tokens instead)",
    )
    r.add_argument(
        "--max-tokens",
        type=_count,
        metavar="N",
        help="stop the task after this many tokens in and out",
    )
    r.add_argument(
        "--max-steps",
        type=_count,
        metavar="N",
        help="stop after this many model calls (default: config, else 50)",
    )
    r.add_argument(
        "--context-window",
        type=_count,
        metavar="TOKENS",
        help="tokens the model's context holds (default: config, else known for the model's "
        "name, else 32768); a longer conversation is compacted",
    )
    r.add_argument(
        "--max-output-tokens",
        type=_count,
        metavar="TOKENS",
        help="tokens a model's answer may take (sent to the endpoint, kept free in the window)",
    )
    r.add_argument(
        "--budget-turns",
        type=_count,
        metavar="K",
        help=f"one question per K turns at most (default: config, else {QUESTION_BUDGET_TURNS})",
    )
    r.add_argument(
        "--question-ranking",
        choices=RANKINGS,
        help="which open question goes first: value (what it is worth now) or seed (the "
        "reference design's order) (default: config, else value)",
    )
    r.add_argument(
        "--readable-path",
        action="append",
        metavar="PATH",
        help="show commands this absolute path outside the workspace, read-only "
        "(repeatable; default: the config file's readable_paths)",
    )
    r.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    command(
        "skills",
        "list the skills the agent can load",
        "Skills from the package, the user config directory and "
        "the workspace's .talos/skills/ (a later one of a name wins).",
    )
    doc = command(
        "doctor",
        "check the configuration and say what to fix",
        "Check for real: the store takes a write (and passes "
        "PRAGMA quick_check), the key is set (nothing is sent without one), the "
        "endpoint lists its models, the sandbox runs, rg is there. Exit code 1 "
        "when something needs fixing.",
    )
    doc.add_argument("--base-url")
    doc.add_argument("--api-key-env", metavar="VAR")
    perm = command(
        "permissions",
        "where the permission rules come from; trust the workspace's own rules file",
        "Show the permission rules in force and where each comes "
        "from. A workspace's .talos/permissions.json came with the repository: "
        "until you trust its exact content, only its deny and ask rules "
        "apply.",
    )
    perm.add_argument(
        "--trust",
        action="store_true",
        help="trust the workspace's .talos/permissions.json as it is now",
    )
    mc = command(
        "mcp",
        "the MCP servers this workspace uses: list them, trust the workspace's file",
        "MCP servers come from mcp.json in your Talos config directory and, once you "
        "trust it, the workspace's .talos/mcp.json (docs/mcp.md). list: each server "
        "started as a task starts it (in the sandbox), its state and tools. trust: trust "
        "the workspace's .talos/mcp.json as it is now.",
    )
    mc.add_argument("action", choices=("list", "trust"), help="list the servers, or trust the file")
    mc.add_argument("--json", action="store_true", help="print JSON (list)")
    pr = command(
        "proposals",
        "the proposed edits waiting for review",
        "Proposals Talos made in this workspace (in any editor or "
        "terminal) that are still to review: pending, partly applied or stale "
        "(--all: every one).",
    )
    pr.add_argument("--all", action="store_true", help="include applied, rejected, undone")
    pr.add_argument("--diff", action="store_true", help="show each one's diff")
    pr.add_argument("--json", action="store_true", help="print JSON")
    ap = sub.add_parser(
        "apply",
        help="apply a proposal (or some of its hunks)",
        description="Write a proposal into its file, refused when the file "
        "changed since the proposal was made (it is stale). Exit code 1 when "
        "it was not applied.",
    )
    ap.add_argument("id")
    ap.add_argument(
        "--hunk",
        type=_count,
        action="append",
        metavar="N",
        help="only hunk N (1 is the first; repeat for more)",
    )
    _workspace_option(ap)
    rj = command("reject", "reject a proposal", "Reject a proposal.")
    rj.add_argument("id")
    ud = command(
        "undo",
        "undo the last applied proposal",
        "Put back the file a proposal changed (the last applied "
        "one, or ID), if the file is still as the proposal left it.",
    )
    ud.add_argument("id", nargs="?")
    rw = command(
        "rewind",
        "undo everything a task applied",
        "Put back every file a task changed as it was before the "
        "task, its last change first. A file changed since the task changed it "
        "is left as it is (your edit is kept) and named with why; the other "
        "files are rewound. Exit code 1 when a file was left, or when there was "
        "nothing to rewind.",
    )
    rw.add_argument("task", help="the task's id, or an unambiguous prefix of it")
    rw.add_argument("--json", action="store_true", help="print JSON")
    ts = command(
        "tasks",
        "the workspace's recent tasks",
        "Tasks run in this workspace (by talos run or an editor), "
        "newest last: id, state, cost, title.",
    )
    ts.add_argument(
        "--limit", type=_count, default=20, metavar="N", help="the last N tasks (default 20)"
    )
    ts.add_argument("--json", action="store_true", help="print JSON")
    sh = command(
        "show",
        "a task's transcript",
        "What a task did: its state, error and transcript (the "
        "model's words and its tool calls, shown as plain text).",
    )
    sh.add_argument("task", help="the task's id, or an unambiguous prefix of it")
    sh.add_argument("--json", action="store_true", help="print JSON")
    cf = command(
        "config",
        "the settings in force and where each comes from",
        "Every setting's value and its origin: a flag, a variable, "
        "the workspace's .talos/config.toml, your config.toml (in the user "
        "config directory: ~/.config/talos/ on Linux) or the default "
        "(docs/config.md).",
    )
    cf.add_argument("--json", action="store_true", help="print JSON")
    co = sub.add_parser(
        "completion",
        help="print the shell completion script",
        description="Print the completion script for SHELL; see docs/config.md "
        "for where to put it.",
    )
    co.add_argument("shell", choices=SHELLS)
    sub.add_parser(
        "demo",
        help="a complete scripted session: no API key, no network",
        description="Two turns of a real Talos session in a temporary workspace, "
        "with a scripted model and scripted replies, labelled as such.",
    )
    return parser


def _usd(text: str) -> Decimal:
    from decimal import Decimal

    try:
        value = Decimal(text)
    except ArithmeticError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an amount in USD") from None
    if not value.is_finite() or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: the cap must be a positive amount")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: must be at least 1")
    return value


def _settings(args: argparse.Namespace) -> Effective:
    """The config files, the environment and the flags, layered (talos_ls/config.py); a refused
    value is a usage error naming the file and the key."""
    from . import config as settings  # it loads the model client: only when needed
    from .cli_report import USAGE, CliError
    from .display import visible
    from .project import find_root

    given = getattr(args, "workspace", None)
    root = Path(given) if given is not None else find_root()
    try:
        effective = settings.load(root, settings.flags_from(args), os.environ)
    except settings.ConfigError as exc:
        raise CliError("config", "; ".join(exc.problems), USAGE) from None
    if args.command != "config":  # there, the warnings are part of the output
        for warning in effective.warnings:
            print(f"talos: warning: {visible(warning, single_line=True)}", file=sys.stderr)
    return effective


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "completion":
        from . import completion

        print(completion.script(args.shell, _parser()), end="")
        return 0
    if args.command != "demo":  # the demo is scripted: it reads no setting
        from .config import apply_to, render
        from .display import visible

        effective = _settings(args)
        if args.command == "config":
            print(visible(render(effective, as_json=args.json)))
            return 0
        apply_to(args, effective)
    if args.command == "mcp":
        from . import mcp_commands
        from .agent.sandbox import protect_this_process
        from .project import chosen

        protect_this_process()
        root = chosen(args.workspace, announce=not args.json)
        if args.action == "trust":
            return mcp_commands.trust(root)
        return mcp_commands.list_servers(args, root)
    if args.command in ("run", "skills", "doctor", "demo", "permissions"):
        from . import commands  # the agent and the terminal load only when needed
        from .agent.sandbox import protect_this_process

        protect_this_process()
        return int(getattr(commands, args.command)(args))
    from . import store_commands

    return store_commands.run(args)


def _stdout_gone() -> int:
    """stdout was closed early (`talos memory --json | head`): nothing more can be said there,
    and Python must not complain at exit when it flushes it."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 141  # 128 + SIGPIPE: what `set -o pipefail` sees of any tool cut off by `head`


def _exit_if_stuck() -> None:
    """After Ctrl-C, exit now if a thread would hold the exit up (one still blocked reading
    the terminal): everything was recorded and closed before this."""
    import threading

    from .cli_report import INTERRUPTED

    threads = threading.enumerate()
    if any(t is not threading.main_thread() and t.is_alive() and not t.daemon for t in threads):
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(INTERRUPTED)


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in words  # known before parsing: a usage error is JSON too
    verbose = "--verbose" in words or "-v" in words
    try:
        parser = _parser()
        args = parser.parse_args(words)
        # --version and --help were answered above, with nothing but the parser loaded
        from .cli_report import INTERRUPTED, USAGE, CliError, setup_logging

        if args.command is None:
            parser.print_help(sys.stderr)
            return USAGE
        try:
            setup_logging(args.verbose, args.log_file)
        except OSError as exc:
            why = exc.strerror or exc
            raise CliError(
                "usage",
                f"cannot write the log file {args.log_file}: {why}; give a writable path",
                USAGE,
            ) from None
        code = _dispatch(args)
        if code == INTERRUPTED:
            _exit_if_stuck()
        return code
    except TalosError as exc:
        from .cli_report import report

        try:
            return report(exc, as_json)
        except BrokenPipeError:
            return _stdout_gone()
    except BrokenPipeError:
        return _stdout_gone()
    except KeyboardInterrupt:
        from .cli_report import INTERRUPTED

        print("\ntalos: interrupted", file=sys.stderr)
        return INTERRUPTED
    except Exception as exc:  # a bug
        if verbose:
            raise
        from .cli_report import report

        return report(exc, as_json)


if __name__ == "__main__":
    sys.exit(main())
