"""`talos run`, `talos skills`, `talos doctor`, `talos permissions` and `talos demo`: the
commands that need the agent, the host or the terminal.

Errors go through `cli_report.CliError` (one line, or one JSON object with --json). `talos run`
owns Ctrl-C: the first SIGINT cancels the running task (recorded `cancelled` in the store, its
transcript kept), says so in one line and exits 130; a second one exits at once.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from .agent.cost import Caps, TaskCost
from .agent.model import ModelConfig
from .agent.skills import discover
from .agent.tasks import Task
from .agent.workspace import SandboxError, Workspace
from .cli_report import FAILED, INTERRUPTED, STORE_FAULTS, USAGE, CliError, report, store_error
from .display import visible
from .doctor import doctor as run_doctor
from .edits.proposals import Proposal
from .gates.permissions import PERMISSIONS_FILE, Policy
from .host import Host, HostConfig
from .project import chosen
from .store import Store, StoreError, default_store_url, faults, open_store
from .terminal import TerminalPort, labelled

WRITE_TOOLS = ("propose_edit",)  # a failed call of one of these is a refused write


def workspace(args: argparse.Namespace) -> Path:
    """--workspace, else the nearest project root (`project.chosen`)."""
    return chosen(getattr(args, "workspace", None), announce=not getattr(args, "json", False))


def read_request(args: argparse.Namespace) -> str:
    """The request: the argument, stdin for `-`, or --file PATH. Empty is a usage error."""
    if args.file is not None and args.request is not None:
        raise CliError(
            "usage", "give the request as an argument, `-` or --file, not two of them", USAGE
        )
    if args.file is not None:
        try:
            text = Path(args.file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise CliError(
                "usage",
                f"cannot read the request from {args.file}: {why}; give a readable UTF-8 text file",
                USAGE,
            ) from None
        where = f"the file {args.file}"
    elif args.request == "-":
        text, where = sys.stdin.read(), "stdin"
    elif args.request is None:
        raise CliError(
            "usage",
            "no request; say what to do (talos run 'fix the failing "
            "test'), or use `-` for stdin or --file PATH",
            USAGE,
        )
    else:
        text, where = args.request, "the request"
    if not text.strip():
        raise CliError("usage", f"{where} is empty; say what Talos should do", USAGE)
    return text.strip()


def run(args: argparse.Namespace) -> int:
    request = read_request(args)
    root = workspace(args)
    model = ModelConfig(
        args.model,
        base_url=args.base_url,
        api_key_env=args.api_key_env,
        context_window=args.context_window,
        max_output_tokens=args.max_output_tokens,
    )
    missing = model.missing_key()
    if missing is not None:  # said at once: nothing sent, nothing retried, no task
        raise CliError(
            "model",
            f"{missing}: export it, or use --base-url for a local server "
            "(any value will do for a server that needs no key)",
        )
    try:
        store = open_store(args.store)
    except StoreError as exc:
        raise store_error(args.store or default_store_url(), exc) from None
    interrupted = _Interrupt()
    try:
        outcome = _loop(_run(args, store, root, request, model, interrupted), interrupted)
    except StoreError as exc:
        raise store_error(store.url, exc) from None
    finally:
        with contextlib.suppress(StoreError):  # the fault, if any, is what the run reports
            store.close()
    return outcome


@dataclass
class _Interrupt:
    """Ctrl-C during `talos run`: how many, and the coroutine the first one cancels."""

    count: int = 0
    main: asyncio.Task | None = None

    def __call__(self) -> None:
        self.count += 1
        if self.count > 1:  # the second: at once, whatever is still running
            os.write(sys.stderr.fileno(), b"\ntalos: interrupted again: exiting now\n")
            os._exit(INTERRUPTED)
        if self.main is not None:
            self.main.cancel()


def _loop(coro: Any, interrupted: _Interrupt) -> int:
    """Run `coro` on a new event loop with our SIGINT handler (not asyncio.run's, which turns
    the first Ctrl-C into a KeyboardInterrupt traceback). After an interrupt the default
    executor is not waited for: a thread may still sit in a blocking read of the terminal."""
    loop = asyncio.new_event_loop()
    try:
        main = loop.create_task(coro)
        interrupted.main = main
        # Not in the main thread (a test calling main()): Ctrl-C stays a KeyboardInterrupt.
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGINT, interrupted)
        return loop.run_until_complete(main)
    finally:
        with contextlib.suppress(Exception):
            loop.remove_signal_handler(signal.SIGINT)
        for leftover in asyncio.all_tasks(loop):
            leftover.cancel()
        with contextlib.suppress(Exception):
            loop.run_until_complete(
                asyncio.gather(*asyncio.all_tasks(loop), return_exceptions=True)
            )
            loop.run_until_complete(loop.shutdown_asyncgens())
            if not interrupted.count:
                loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()


async def _run(
    args: argparse.Namespace,
    store: Store,
    root: Path,
    request: str,
    model: ModelConfig,
    interrupted: _Interrupt,
) -> int:
    interactive = sys.stdin.isatty() and sys.stdout.isatty() and not args.json
    console = Console(stderr=args.json, highlight=False)  # with --json, stdout is the JSON
    try:
        port = TerminalPort(console, Workspace(root), interactive=interactive)
    except SandboxError as exc:
        raise CliError("usage", f"{exc}; give a workspace directory", USAGE) from None
    caps = Caps(max_cost=args.max_cost, max_steps=args.max_steps, max_tokens=args.max_tokens)
    config = HostConfig(
        workspace=root,
        model=model,
        mode=args.mode,
        auto_apply=args.apply,
        caps=caps,
        budget_turns=args.budget_turns,
        ranking=args.question_ranking,
        prices=args.effective.prices,
        readable_paths=args.effective.readable_paths(),
        limits=args.effective.limits(),
    )
    try:
        host = Host(store, config, port)
    except ValueError as exc:  # a cap that cannot be enforced
        raise CliError("usage", str(exc), USAGE) from None
    task: Task | None = None
    turn = 0
    me = asyncio.current_task()
    try:
        try:
            await host.start()
        except ValueError as exc:  # the permission rules cannot be read or parsed
            raise CliError("config", f"{exc}; fix the file or move it aside", USAGE) from None
        for problem in host.skill_problems:
            port.notice(problem)
        result = await host.turn(request)
        task, turn = result.task, result.turn
        await host.wait(task)
    except asyncio.CancelledError:
        if not interrupted.count:
            raise
        if me is not None:
            me.uncancel()
        if task is not None:
            host.cancel(task.id)  # already cancelled with the wait, unless it had not begun
    finally:
        await host.close()  # cancels what still runs; every task record is written
        port.close()  # the terminal's live display, if any
    if interrupted.count:
        return _interrupted(args, task, None if task is None else host.meter.task(task.id))
    assert task is not None
    fault = _store_fault()
    if fault is not None:
        _report_outcome(args, host, task, turn, console, quiet=True)
        raise store_error(store.url, fault)
    return _report_outcome(args, host, task, turn, console)


def _store_fault() -> StoreError | None:
    """A store fault a background write logged during the run (a task record not saved)."""
    for exc in STORE_FAULTS.seen:
        if exc.reason not in (faults.BUSY, faults.CLOSED, faults.REFUSED):
            return exc
    return STORE_FAULTS.seen[0] if STORE_FAULTS.seen else None


def _interrupted(args: argparse.Namespace, task: Task | None, spent: TaskCost | None) -> int:
    """Says the run was interrupted, and what the task had cost by then: a call cut off
    mid-stream is paid for all the same (estimated when the endpoint said nothing)."""
    if task is None or spent is None:
        message = "interrupted before the task started; nothing was recorded"
    else:
        message = (
            f"interrupted: task {task.id} was cancelled; its transcript is kept "
            f"(talos show {task.id}); {_spent_line(spent)}"
        )
    if args.json:
        out: dict[str, Any] = {
            "error": {"kind": "interrupted", "message": message},
            "exit_code": INTERRUPTED,
        }
        if task is not None and spent is not None:
            out["task"] = task.id
            out["cost"], out["usage_estimated"] = str(spent.cost), spent.estimated
        print(json.dumps(out, ensure_ascii=False))
    else:
        print(f"\ntalos: {message}", file=sys.stderr)
    return INTERRUPTED


def _spent_line(spent: TaskCost) -> str:
    cost = "unpriced model" if spent.unpriced else f"${spent.cost:.4f}"
    estimated = " (usage estimated: the endpoint reported none)" if spent.estimated else ""
    return f"{spent.tokens_in} tokens in, {spent.tokens_out} out, {cost}{estimated}"


def refused_writes(task: Task) -> list[tuple[str, str]]:
    """(path, why) for each write tool call the task made that failed (refused by the mode or
    a rule, or malformed), whose path got no proposal afterwards: the model may still say it
    made the change, so the run says it did not."""
    calls: dict[str, str] = {}
    for message in task.transcript:
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            if function.get("name") in WRITE_TOOLS:
                try:
                    path = str(json.loads(function.get("arguments") or "{}").get("path", "?"))
                except (ValueError, AttributeError):
                    path = "?"
                calls[call.get("id", "")] = path
    refused: dict[str, str] = {}
    for message in task.transcript:
        if message.get("role") != "tool" or message.get("tool_call_id") not in calls:
            continue
        path = calls[message["tool_call_id"]]
        content = str(message.get("content") or "")
        if content.startswith("error:"):
            refused[path] = content.removeprefix("error:").strip()
        else:
            refused.pop(path, None)  # a later proposal for the path: not refused in the end
    return list(refused.items())


def _proposal_line(p: Proposal) -> tuple[str, str]:
    path = visible(p.path, single_line=True)
    if p.status == "applied":
        return "green", f"proposal {p.id} applied to {path}"
    if p.status in ("pending", "partly_applied"):
        return "yellow", (
            f"proposal {p.id} to {path} is {p.status.replace('_', ' ')}, not "
            f"applied: talos apply {p.id} applies it later (talos proposals "
            "--diff shows it)"
        )
    if p.status == "stale":
        return "yellow", (
            f"proposal {p.id} to {path} is stale (the file changed after it "
            "was made): ask again for a fresh one"
        )
    return "dim", f"proposal {p.id} to {path}: {p.status}"


def _report_outcome(
    args: argparse.Namespace,
    host: Host,
    task: Task,
    turn: int,
    console: Console,
    quiet: bool = False,
) -> int:
    """The task's result, each proposal's final state, refused writes, the cost; the exit
    code: 1 when the task did not finish, or when --apply was asked and a write did not land."""
    proposals = [p for p in host.proposals.list() if p.task_id == task.id]
    refused = refused_writes(task)
    spent = host.meter.task(task.id)
    unapplied = [p for p in proposals if p.status != "applied"]
    problems: list[str] = []
    if task.state != "done":
        fix = (
            "; raise the cap (--max-cost, --max-tokens, --max-steps) to let it go further"
            if task.state == "stopped"
            else f"; talos show {task.id} has the transcript (talos doctor checks the model "
            "settings)"
        )
        problems.append(f"task {task.state}: {task.error or 'no reason recorded'}{fix}")
    if args.apply:
        for path, why in refused:
            problems.append(
                f"the write to {path} was refused ({why}); nothing was written: "
                "change --mode or the permission rules"
            )
        for p in unapplied:
            problems.append(
                f"proposal {p.id} to {p.path} was not applied ({p.status}); "
                f"talos apply {p.id} applies it if it can"
            )
    code = FAILED if problems else 0
    if quiet:
        return code
    if args.json:
        print(
            json.dumps(
                {
                    "outcome": task.state,
                    "result": task.result,
                    "error": task.error,
                    "exit_code": code,
                    "task": task.id,
                    "turn": turn,
                    "proposals": [
                        {"id": p.id, "path": p.path, "status": p.status, "diff": p.diff()}
                        for p in proposals
                    ],
                    "refused_writes": [{"path": path, "reason": why} for path, why in refused],
                    "problems": problems,
                    "cost": str(spent.cost),
                    "tokens": {
                        "in": spent.tokens_in,
                        "out": spent.tokens_out,
                        "cached": spent.tokens_cached,
                    },
                    "unpriced": spent.unpriced,
                    "usage_estimated": spent.estimated,
                    "questions": [
                        {
                            "question": host.phrase(q).question_text,
                            "options": [o["label"] for o in q.options],
                            "answered": r.applied,
                            "answer": q.options[r.option_index]["label"]
                            if r.applied and r.option_index is not None
                            else None,
                        }
                        for q, r in host.answers
                    ],
                },
                indent=2,
                ensure_ascii=False,
            )
        )
        return code
    if task.result:
        console.print(labelled("talos:", task.result))
    for p in proposals:
        style, line = _proposal_line(p)
        console.print(Text(line, style=style))
    for path, why in refused:
        console.print(
            Text(
                visible(f"the write to {path} was refused: {why}", single_line=True), style="yellow"
            )
        )
    console.print(Text(f"{task.state}: {_spent_line(spent)}", style="dim"))
    if problems:
        report(CliError("task", problems[0], FAILED), as_json=False)
        for more in problems[1:]:
            console.print(Text(visible(more, single_line=True), style="red"))
    return code


def skills(args: argparse.Namespace) -> int:
    found, problems = discover(workspace(args))
    for skill in found.values():  # a workspace's skill is the workspace's text: shown plainly
        print(
            f"{skill.name:16}  {visible(skill.description, single_line=True)}\n"
            f"{'':16}  [{visible(str(skill.path.parent), single_line=True)}]"
        )
    for problem in problems:
        print(visible(problem, single_line=True), file=sys.stderr)
    return 0


def doctor(args: argparse.Namespace) -> int:
    return run_doctor(args, workspace(args))


def permissions(args: argparse.Namespace) -> int:
    """Where the rules come from, and the workspace file's trust; --trust trusts it."""
    root = workspace(args)
    try:
        policy = Policy.load(root)
    except ValueError as exc:
        raise CliError("permissions", f"{exc}; fix the file or move it aside") from None
    for rules in policy.sources():
        allowed = rules.grants or ["(nothing allowed)"]
        denied = [
            *rules.commands.get("deny", []),
            *(f"writing {p}" for p in rules.paths.get("deny", [])),
            *(f"the MCP tool {p}" for p in rules.tools.get("deny", [])),
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
