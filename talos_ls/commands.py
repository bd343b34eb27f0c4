"""`talos run`, `talos skills`, `talos doctor`, `talos permissions` and `talos demo`: the
commands that need the agent, the host or the terminal."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
from pathlib import Path

from rich.console import Console
from rich.text import Text

from .agent.cost import Caps
from .agent.model import ModelClient, ModelConfig, ModelError
from .agent.sandbox import Sandbox
from .agent.skills import discover
from .agent.workspace import SandboxError, Workspace
from .display import visible
from .gates.permissions import PERMISSIONS_FILE, Policy
from .host import Host, HostConfig
from .store import StoreError, default_store_url, open_store
from .terminal import TerminalPort, labelled

EDITOR_CLIENTS = {"VS Code": "code", "Neovim": "nvim"}


def _error(message: str, code: int) -> int:
    print(f"talos: error: {message}", file=sys.stderr)
    return code


def run(args: argparse.Namespace) -> int:
    if not args.request.strip():
        return _error("the request is empty", 2)
    root = Path(args.workspace)
    if not root.is_dir():
        return _error(f"workspace {root} is not a directory", 2)
    try:
        store = open_store(args.store)
    except StoreError as exc:
        return _error(str(exc), 1)
    try:
        return asyncio.run(_run(args, store, root))
    except (SandboxError, ValueError) as exc:
        return _error(str(exc), 2)
    finally:
        store.close()


async def _run(args: argparse.Namespace, store, root: Path) -> int:
    interactive = sys.stdin.isatty() and sys.stdout.isatty() and not args.json
    console = Console(stderr=args.json, highlight=False)  # with --json, stdout is the JSON
    port = TerminalPort(console, Workspace(root), interactive=interactive)
    model = ModelConfig(args.model, base_url=args.base_url, api_key_env=args.api_key_env)
    caps = Caps(max_cost=args.max_cost, max_steps=args.max_steps, max_tokens=args.max_tokens)
    config = HostConfig(workspace=root, model=model, mode=args.mode, auto_apply=args.apply,
                        caps=caps)  # fmt: skip
    host = Host(store, config, port)
    try:
        await host.start()
        for problem in host.skill_problems:
            port.notice(problem)
        result = await host.turn(args.request)
        task = await host.wait(result.task)
    finally:
        await host.close()
    proposals = [p for p in host.proposals.list() if p.task_id == task.id]
    spent = host.meter.task(task.id)
    if args.json:
        print(json.dumps({
            "outcome": task.state,
            "result": task.result,
            "error": task.error,
            "turn": result.turn,
            "proposals": [{"id": p.id, "path": p.path, "status": p.status, "diff": p.diff()}
                          for p in proposals],
            "cost": str(spent.cost),
            "tokens": {"in": spent.tokens_in, "out": spent.tokens_out,
                       "cached": spent.tokens_cached},
            "unpriced": spent.unpriced,
            "usage_estimated": spent.estimated,
            "questions": [{"question": host.phrase(q).question_text,
                           "options": [o["label"] for o in q.options],
                           "answered": r.applied,
                           "answer": q.options[r.option_index]["label"]
                           if r.applied and r.option_index is not None else None}
                          for q, r in host.answers],
        }, indent=2, ensure_ascii=False))  # fmt: skip
    else:
        if task.result:
            console.print(labelled("talos:", task.result))
        for p in proposals:
            if p.status == "pending":
                console.print(labelled(f"proposal {p.id} not applied:", p.path, "yellow"),
                              "(run with --apply, or answer at a terminal)")  # fmt: skip
        cost = "unpriced model" if spent.unpriced else f"${spent.cost:.4f}"
        estimated = " (usage estimated: the endpoint reported none)" if spent.estimated else ""
        console.print(Text(f"{task.state}: {spent.tokens_in} tokens in, {spent.tokens_out} out, "
                           f"{cost}{estimated}", style="dim"))  # fmt: skip
        if task.error:
            console.print(Text(visible(task.error), style="red"))
    return 0 if task.state == "done" else 1


def skills(args: argparse.Namespace) -> int:
    found, problems = discover(Path(args.workspace))
    for skill in found.values():  # a workspace's skill is the workspace's text: shown plainly
        print(f"{skill.name:16}  {visible(skill.description, single_line=True)}\n"
              f"{'':16}  [{visible(str(skill.path.parent), single_line=True)}]")  # fmt: skip
    for problem in problems:
        print(visible(problem, single_line=True), file=sys.stderr)
    return 0


def doctor(args: argparse.Namespace) -> int:
    checks: list[tuple[bool, str]] = []
    try:
        store = open_store(args.store)
        store.turn_current("doctor")
        store.close()
        checks.append((True, f"store {args.store or default_store_url()} opens"))
    except StoreError as exc:
        checks.append((False, f"{exc} (set TALOS_STORE_URL or --store)"))
    key = os.environ.get(args.api_key_env)
    config = ModelConfig("doctor", base_url=args.base_url, api_key_env=args.api_key_env,
                         max_retries=0, timeout=5)  # fmt: skip
    local = config.endpoint.startswith(("http://localhost", "http://127.", "http://[::1]"))
    checks.append((bool(key) or local, f"API key in ${args.api_key_env}" if key else
                   f"no API key in ${args.api_key_env}" + (" (fine for a local server)" if local
                   else ": export it, or use --base-url for a local server")))  # fmt: skip
    try:
        asyncio.run(ModelClient(config).probe())
        checks.append((True, f"model endpoint {config.shown_endpoint} answers"))
    except ModelError as exc:
        checks.append((False, f"{exc}: check the URL and the key, or start your local server"))
    state = Sandbox(Path(args.workspace)).probe()
    checks.append((state.available, f"command sandbox: {state.detail}" if state.available else
                   f"no command sandbox, so every command is asked: {state.detail}"))  # fmt: skip
    rg = shutil.which("rg")
    checks.append((True, f"search: ripgrep ({rg})" if rg else "search: ripgrep not found, "
                   "using the slower built-in search (apt-get install ripgrep)"))  # fmt: skip
    for name, command in EDITOR_CLIENTS.items():
        path = shutil.which(command)
        checks.append((True, f"{name}: {path}" if path else f"{name}: not found (optional)"))
    root = Path(args.workspace)
    found, problems = discover(root)
    checks.append(
        (not problems, f"{len(found)} skills" + (f"; {len(problems)} skipped" if problems else ""))
    )
    checks.extend((False, p) for p in problems)
    for ok, message in checks:
        print(("ok      " if ok else "problem ") + message)
    return 0 if all(ok for ok, _ in checks) else 1


def permissions(args: argparse.Namespace) -> int:
    """Where the rules come from, and the workspace file's trust; --trust trusts it."""
    root = Path(args.workspace)
    if not root.is_dir():
        return _error(f"workspace {root} is not a directory", 2)
    try:
        policy = Policy.load(root)
    except ValueError as exc:
        return _error(str(exc), 1)
    for rules in policy.sources():
        allowed = rules.grants or ["(nothing allowed)"]
        denied = rules.commands.get("deny", []) + [
            f"writing {p}" for p in rules.paths.get("deny", [])
        ]
        print(f"{rules.source}:")
        print("  allows: " + visible(", ".join(allowed), single_line=True))
        if denied:
            print("  denies: " + visible(", ".join(denied), single_line=True))
    wf = policy.workspace_file
    if wf is None:
        print(f"no {PERMISSIONS_FILE} in {policy.root}")
        return 0
    state = "trusted" if wf.trusted else "NOT trusted: only its deny and ask rules apply"
    print(f"{PERMISSIONS_FILE} (sha256 {wf.sha256}): {state}")
    if args.trust and not wf.trusted:
        if not wf.rules.grants:
            print("it allows nothing, so there is nothing to trust")
            return 0
        policy.trust_workspace_file()
        print("trusted this exact content; any change to the file makes it untrusted again")
    return 0


def demo(args: argparse.Namespace) -> int:
    from .demo.session import run as run_demo

    return run_demo(Console(highlight=False))
