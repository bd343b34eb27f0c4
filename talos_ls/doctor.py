"""`talos doctor`: check the set-up for real and say what to fix, one line per check.

A check that only looked (the store opens, a key is set) said "ok" for a read-only or corrupted
store and contacted OpenAI without a key; so each check does the thing Talos will do: the store
takes a write and reads it back (and, for SQLite, passes `PRAGMA quick_check`: `Store.probe`),
the sandbox runs a command, the endpoint answers a models list with the key. Nothing is sent to
a non-local endpoint without a key. A check never raises: whatever goes wrong is a `problem`
line saying how to fix it. Exit code 1 when any check is a problem.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
from pathlib import Path

from .agent.limits import Limits, describe_enforcement
from .agent.model import ModelClient, ModelConfig, ModelError
from .agent.sandbox import Sandbox, sizes_tmpfs
from .agent.skills import discover
from .cli_report import store_problem
from .mcp_commands import check_mcp
from .store import StoreError, default_store_url, open_store

EDITOR_CLIENTS = {"VS Code": "code", "Neovim": "nvim"}
IN_SANDBOX = ("python3", "node", "git")  # what commands most often need, looked for in it
Check = tuple[bool, str]


def check_store(url: str | None) -> Check:
    """Open the store, write and read back (a reserved agent's counter), and for SQLite check
    room to grow and every page (`Store.probe`)."""
    shown = url or default_store_url()
    try:
        store = open_store(url)
    except StoreError as exc:
        return False, store_problem(shown, exc)
    try:
        store.probe()
    except StoreError as exc:
        return False, store_problem(store.url, exc)
    finally:
        store.close()
    sound = " and its pages are sound" if store.url.startswith("sqlite:") else ""
    return True, f"store {store.url} takes a write and reads it back{sound}"


def check_model(config: ModelConfig) -> list[Check]:
    """The key variable, then (only with a key, or for a local server) the models list."""
    var = f"${config.api_key_env}"
    missing = config.missing_key()
    if missing is not None:
        return [(False, f"{missing}: export it, or use --base-url for a local server")]
    has_key = bool(os.environ.get(config.api_key_env))
    checks: list[Check] = [
        (True, f"API key in {var}" if has_key else f"no API key in {var} (fine for a local server)")
    ]
    try:
        asyncio.run(ModelClient(config).probe())
        checks.append((True, f"model endpoint {config.shown_endpoint} answers"))
    except ModelError as exc:
        checks.append((False, f"{exc}; check the URL and the key, or start your local server"))
    except Exception as exc:  # a check reports, it never raises
        checks.append(
            (
                False,
                f"model endpoint {config.shown_endpoint}: {type(exc).__name__}: "
                f"{exc}; is it an OpenAI-compatible endpoint?",
            )
        )
    return checks


def check_sandbox(root: Path) -> Check:
    state = Sandbox(root).probe()
    if state.available:
        return True, f"command sandbox: {state.detail}"
    return False, f"no command sandbox, so every command is asked: {state.detail}"


def check_limits(root: Path, limits: Limits) -> list[Check]:
    """How the limits on each command are enforced here (`agent/limits.py`): a pids cgroup,
    the kernel's per-sandbox process count, or, as root without a cgroup, only Talos's watch."""
    sandbox = Sandbox(root, limits=limits)
    if not sandbox.probe().available:
        return []
    ok, how = describe_enforcement()
    checks = [(True, f"command limits: {limits.describe()} (talos config: limits)"), (ok, how)]
    if sandbox.bwrap and not sizes_tmpfs(sandbox.bwrap):
        checks.append(
            (
                False,
                "command limits: this bubblewrap cannot size a tmpfs (--size came "
                "in 0.7.0), so the sandbox's /tmp is bounded only by Talos's watch, "
                "after it has grown; upgrade bubblewrap",
            )
        )
    return checks


def check_programs(root: Path) -> list[Check]:
    """Whether IN_SANDBOX resolve and run (`--version`) inside the sandbox: found at ..., or
    not, with the hint a command that cannot find it gets (`Sandbox.not_found`); a problem
    when it is installed where the sandbox does not show it. Nothing without a sandbox."""
    sandbox = Sandbox(root)
    if not sandbox.probe().available:
        return []
    script = (
        f"for p in {' '.join(IN_SANDBOX)}; do w=$(command -v $p) || continue; "
        'v=$($p --version 2>&1 </dev/null); c=$?; echo "$p|$w|$c|$(echo "$v" | head -n 1)"; done'
    )
    try:
        done = asyncio.run(
            sandbox.run(script, sandboxed=True, writable=False, network=False, timeout=60)
        )
    except Exception as exc:  # a check reports, it never raises
        return [(False, f"in the sandbox: no command ran ({type(exc).__name__}: {exc})")]
    found = {}
    for line in done.output.splitlines():
        name, _, rest = line.partition("|")
        found[name] = rest.split("|", 2)
    checks: list[Check] = []
    for name in IN_SANDBOX:
        if name in found and len(found[name]) == 3:
            where, code, version = found[name]
            if code == "0":
                checks.append((True, f"in the sandbox: {name} is {where} ({version})"))
            else:
                said = f"{name} is {where} but fails (exit code {code}): {version[:200]}"
                checks.append((False, f"in the sandbox: {said}"))
            continue
        installed, hint = sandbox.not_found(name)
        checks.append((not installed, f"in the sandbox: {hint}"))
    return checks


def check_search() -> Check:
    rg = shutil.which("rg")
    if rg:
        return True, f"search: ripgrep ({rg})"
    return False, (
        "search: ripgrep (rg) not found, so search falls back to the slower built-in "
        "one; apt-get install ripgrep"
    )


def doctor(args: argparse.Namespace, root: Path) -> int:
    config = ModelConfig(
        "doctor", base_url=args.base_url, api_key_env=args.api_key_env, max_retries=0, timeout=5
    )
    effective = getattr(args, "effective", None)
    limits = effective.limits() if effective is not None else Limits.default()
    checks: list[Check] = [
        check_store(args.store),
        *check_model(config),
        check_sandbox(root),
        *check_limits(root, limits),
        *check_programs(root),
        check_search(),
        *check_mcp(root, tuple(effective.readable_paths()) if effective else (), limits),
    ]
    for name, command in EDITOR_CLIENTS.items():
        path = shutil.which(command)
        checks.append((True, f"{name}: {path}" if path else f"{name}: not found (optional)"))
    found, problems = discover(root)
    checks.append(
        (not problems, f"{len(found)} skills" + (f"; {len(problems)} skipped" if problems else ""))
    )
    checks.extend((False, p) for p in problems)
    for ok, message in checks:
        print(("ok      " if ok else "problem ") + message)
    return 0 if all(ok for ok, _ in checks) else 1
