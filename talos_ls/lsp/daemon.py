"""The daemon: one host per workspace folder, the store they share, the settings, and every
command of the LSP surface as a plain method. `server.py` turns requests into calls here and
results back into JSON; nothing here knows the protocol (like jedi-language-server's thin
handlers over its domain module), so it is tested and reasoned about without an editor.

Bad arguments raise `ParamsError` naming the field; the server answers it as a JSON-RPC
"invalid params" error and keeps serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

from ..agent.limits import Limits
from ..agent.model import ModelConfig
from ..agent.workspace import SandboxError
from ..display import visible
from ..edits.proposals import OPEN, Proposal, ProposalError
from ..errors import TalosError
from ..offload import Offload
from ..redact import redact_url
from ..store import Store, StoreError, default_store_url, open_store
from ..store.base import OPEN_TASK_STATES
from .health import GuardedStore, StoreHealth
from .settings import Settings, confirmed, guarded, narrowed

if TYPE_CHECKING:  # loaded with the first folder (`_load_hosting`), not for `initialize`
    from ..agent.tasks import Task
    from ..host import EditorContext, EditorPort, Host, HostConfig, TurnResult

logger = logging.getLogger(__name__)
MAX_PROMPT_CHARS = 20_000
MAX_LINE = 10_000_000
TASKS_AT_ONCE = 4  # per folder; more wait, queued, for a slot
MAX_QUEUED = 32  # tasks waiting for a slot, per daemon (all folders); more are refused
MAX_SHOWN_CHARS = 4000  # one message of a transcript, as `talos.task.show` renders it


class ParamsError(TalosError):
    """A command's argument is missing or of the wrong kind; the message names the field."""


class TooBusy(TalosError):
    """A request the daemon refuses for now (too many tasks waiting); the message says what to
    do. The server answers it as a "request failed" error and keeps serving."""


class Params:
    """One command's single dict argument, read field by field with a clear error.

    The argument is checked whole first: at most `MAX_DEPTH` levels of nesting and no string
    that is not Unicode (a lone surrogate, which JSON's `\\ud800` escape can carry and which no
    store or file can hold). An id is at most `MAX_ID_CHARS` characters, so a refusal that
    names it stays short."""

    def __init__(self, command: str, arguments: Sequence[Any] | None) -> None:
        self.command = command
        args = list(arguments or [])
        if len(args) > 1:
            raise ParamsError(f"{command} takes one object argument, got {len(args)} arguments")
        raw = args[0] if args else {}
        if isinstance(raw, list) and not raw:  # Lua's empty table, as Neovim sends `{}`
            raw = {}
        if not isinstance(raw, Mapping):
            raise ParamsError(f"{command} takes one object argument, got {type(raw).__name__}")
        _check_json(raw, command)
        self.raw = raw

    def get(self, name: str, kind: type, required: bool = False) -> Any:
        value = self.raw.get(name)
        if value is None:
            if required:
                raise ParamsError(f"{self.command}: the field {name!r} is required")
            return None
        if not isinstance(value, kind) or isinstance(value, bool):
            raise ParamsError(f"{self.command}: the field {name!r} must be {_KINDS[kind]}")
        if name in ID_FIELDS and isinstance(value, str) and len(value) > MAX_ID_CHARS:
            raise ParamsError(
                f"{self.command}: the field {name!r} is longer than "
                f"{MAX_ID_CHARS} characters: no such id exists"
            )
        return value


MAX_DEPTH = 32  # levels of nesting in a command's argument; real ones use three
MAX_ID_CHARS = 256
ID_FIELDS = frozenset({"task_id", "proposal_id", "candidate_id", "prompt_id", "key"})


def _check_json(raw: Any, command: str) -> None:
    """Every string encodable as UTF-8 and nesting bounded; iterative, so no depth of
    argument can exhaust the stack."""
    stack: list[tuple[Any, int]] = [(raw, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            if not value.isascii():
                try:
                    value.encode("utf-8")
                except UnicodeEncodeError:
                    raise ParamsError(
                        f"{command}: the argument holds a string that is not "
                        "valid Unicode (a lone surrogate)"
                    ) from None
            continue
        if isinstance(value, Mapping | list | tuple):
            if depth > MAX_DEPTH:
                raise ParamsError(
                    f"{command}: the argument is nested more than {MAX_DEPTH} levels deep"
                )
            items = [*value.keys(), *value.values()] if isinstance(value, Mapping) else value
            stack.extend((item, depth + 1) for item in items)


_KINDS = {str: "a string", int: "an integer", dict: "an object", list: "a list"}


def _prompt(p: Params) -> str:
    prompt = p.get("prompt", str, required=True)
    if not prompt.strip():
        raise ParamsError(f"{p.command}: the field 'prompt' is empty")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise ParamsError(
            f"{p.command}: the field 'prompt' is longer than {MAX_PROMPT_CHARS} characters"
        )
    return prompt


def _range_lines(value: Mapping[str, Any] | None, command: str) -> tuple[int, int] | None:
    """An LSP Range's first and last line; its shape checked."""
    if value is None:
        return None
    try:
        start, end = int(value["start"]["line"]), int(value["end"]["line"])
    except (KeyError, TypeError, ValueError, OverflowError):
        shape = "{start: {line, character}, end: {line, character}}"
        raise ParamsError(f"{command}: the field 'range' must be an LSP range {shape}") from None
    if not 0 <= start <= end <= MAX_LINE:
        raise ParamsError(
            f"{command}: the field 'range' must run forward, from line 0 to at most line {MAX_LINE}"
        )
    return start, end


class Daemon:
    def __init__(
        self,
        make_port: Callable[[Path], EditorPort],
        on_status: Callable[[dict[str, Any]], None],
        notice: Callable[[str], None],
    ) -> None:
        self.make_port = make_port
        self.on_status = on_status
        self.notice = notice
        self.settings = Settings()
        self.offload = Offload(workers=4, name="talos-ls")
        self.store: Store | None = None
        self.health = StoreHealth("", notice, self.publish, self._probe_store, self._store_back)
        self._waiting: list[Path] = []  # folders to serve once the store works
        self.hosts: dict[Path, Host] = {}
        self._folder_status: dict[Path, dict[str, Any]] = {}
        self._ready = asyncio.Event()
        self._store_url = ""
        self.client_watches = False  # the editor reports file changes: no watcher of ours
        self._starting = 0  # task starts accepted and not yet queued in a host
        self.locked = False  # True once the session's first settings are read
        # Changes that widen what the agent may do, waiting for the person (`narrowed`), and
        # those the person declined this session (not asked again: a restart takes them).
        self.pending: dict[str, Any] = {}
        self.declined: dict[str, Any] = {}
        self._confirming = False
        self._opened = False  # the store was opened (or tried): storeUrl is fixed from then
        self.store_refused: str | None = None  # a storeUrl asked for after that

    # ------------------------------------------------------------ lifecycle
    def configure(self, raw: Mapping[str, Any]) -> list[str]:
        """Apply settings (bad ones refused, named, and the last good value kept) to every
        host, for the tasks started from now on (a running task keeps what it started with).

        Once the session has its settings (`locked`), a change that widens what the
        agent may do (where requests and the key go, a higher permission mode, more readable
        paths, higher limits: `settings.narrowed`) is not made by the client alone: its
        narrowing part applies, the rest waits in `pending` until the person confirms it
        (`confirm_changes`) or the server restarts. A workspace's editor settings, an
        extension, or a buggy client could send it."""
        old = self.settings
        new, problems = old.updated(raw)
        if self.locked and isinstance(raw, Mapping):
            new, wider = narrowed(old, new)
            for name in guarded(raw):  # spoken of again: the latest word counts
                self.pending.pop(name, None)
            self.pending.update(
                {
                    name: value
                    for name, value in wider.items()
                    if self.declined.get(name, _NONE) != value
                }
            )
        if self._opened and (new.store_url or "") != self._store_url:
            self.store_refused = new.store_url or default_store_url()
            new = dataclasses.replace(new, store_url=old.store_url)
            problems.append(
                f"storeUrl: a new store takes effect when the server restarts; "
                f"still using {redact_url(self.health.url)}"
            )
        elif self._opened and "storeUrl" in raw:
            self.store_refused = None  # asked for the store in use again
        self.settings = new
        self._apply_settings(problems)
        return problems

    def _apply_settings(self, problems: list[str]) -> None:
        for root, host in self.hosts.items():
            try:
                host.reconfigure(self.host_config(root))
            except ValueError as exc:
                problems.append(str(exc))

    async def confirm_changes(
        self, ask: Callable[[str, Sequence[str]], Awaitable[str | None]]
    ) -> None:
        """Ask the person about the widening changes waiting (`configure`). A dismissal, no
        answer, or a client that cannot ask keeps the settings in use (a restart takes the new
        ones), and that value is not asked about again this session. One prompt at a time,
        for the latest changes.

        The prompt goes to the client that sent the change: it stops a settings write the
        person did not make (a workspace's editor settings, an extension, a buggy client), not
        a client that lies, which can answer it itself."""
        if self._confirming:
            return
        self._confirming = True
        try:
            while self.pending:
                asked = dict(self.pending)
                changes, kept = self._described(asked)
                message = (
                    f"Talos's settings were changed to let it do more: {changes}. Apply "
                    f"this? Until you say so, Talos keeps {kept}."
                )
                choice = await ask(message, [APPLY_SETTINGS, KEEP_SETTINGS])
                if self.pending != asked:
                    continue  # changed again meanwhile: ask about the latest
                self.pending = {}
                if choice != APPLY_SETTINGS:
                    self.declined.update(asked)
                    self.notice(
                        f"Talos keeps {kept}; the new settings take effect after a "
                        "restart of talos-ls"
                    )
                    continue
                self.settings = confirmed(self.settings, asked)
                problems: list[str] = []
                self._apply_settings(problems)
                for problem in problems:
                    self.notice(f"Talos setting refused: {problem}")
                self.publish()
        finally:
            self._confirming = False

    def _described(self, changes: Mapping[str, Any]) -> tuple[str, str]:
        """The waiting changes and what is kept meanwhile, as the person reads them (one line,
        escaped)."""
        now = self.settings
        said, kept = [], []
        if "permission_mode" in changes:
            said.append(
                f"the permission mode from {now.permission_mode} to {changes['permission_mode']}"
            )
            kept.append(f"the mode {now.permission_mode}")
        if "readable_paths" in changes:
            added = [p for p in changes["readable_paths"] if p not in now.readable_paths]
            more = f" and {len(added) - 5} more" if len(added) > 5 else ""
            said.append(
                f"commands may read {', '.join(_shown(p) for p in added[:5])}{more} "
                "outside the workspace"
            )
            listed = ", ".join(_shown(p) for p in now.readable_paths)
            kept.append(f"the readable paths {listed}" if listed else "no readable paths")
        if "limits" in changes:
            old = (now.limits or Limits.default()).as_setting()
            new = (changes["limits"] or Limits.default()).as_setting()
            raised = [f"{key} {old[key]} to {new[key]}" for key in old if new[key] > old[key]]
            said.append(f"higher limits on each command ({', '.join(raised)})")
            kept.append(f"the limits ({', '.join(f'{k} {v}' for k, v in old.items())})")
        if "endpoint" in changes:
            current = now.model_config()
            base_url, key_env = changes["endpoint"]
            wanted = dataclasses.replace(current, base_url=base_url, api_key_env=key_env)
            said.append(
                f"send your requests to {_host(wanted)} "
                f"({_shown(wanted.shown_endpoint)}) with the key in "
                f"${_shown(wanted.api_key_env)}"
            )
            kept.append(f"{_host(current)} with the key in ${_shown(current.api_key_env)}")
        return "; ".join(said), "; ".join(kept)

    def host_config(self, root: Path) -> HostConfig:
        from ..host import HostConfig

        s = self.settings
        return HostConfig(
            workspace=root,
            model=s.model_config(),
            mode=s.permission_mode,
            caps=s.caps(),
            budget_turns=s.question_budget_turns,
            ranking=s.question_ranking,
            prices=s.price_table(),
            concurrency=TASKS_AT_ONCE,
            ask_to_apply=False,
            background_index=True,
            watch=not self.client_watches,
            readable_paths=tuple(Path(p) for p in s.readable_paths),
            limits=s.limits,
        )

    async def open(self, folders: Sequence[Path]) -> None:
        """Open the store and a host for each folder. A store that cannot be opened, or fails
        later, is reported once (`health.py`); the server keeps answering, commands say why
        they cannot work, and the store is taken back when it works again."""
        self._store_url = self.settings.store_url or ""
        self._opened = True
        self.health.url = self.settings.store_url or default_store_url()
        self.health.bind(asyncio.get_running_loop())
        self._waiting = list(folders)
        loading = asyncio.ensure_future(self.offload.run(_load_hosting))
        try:
            opened = await self.offload.run(open_store, self.settings.store_url)
            self.store = cast(Store, GuardedStore(opened, self.health))
        except StoreError as exc:
            self.health.failed(exc)
        try:
            await loading
            await self._serve_waiting()
        finally:
            self._ready.set()  # a folder that failed must not hold every command up

    async def _serve_waiting(self) -> None:
        waiting, self._waiting = self._waiting, []
        for folder in waiting:
            await self.add_folder(folder)

    async def _probe_store(self) -> None:
        """The recovery probe: (re)open the store (a file store is reopened: the file may
        have been moved aside or its mount made writable), then prove it works."""
        guarded = cast(GuardedStore | None, self.store)
        old = None if guarded is None else guarded.target
        if old is not None and not old.local_files():
            await self.offload.run(old.probe)  # a server: its client reconnects by itself
            return
        if old is not None:
            old.close()
        new = await self.offload.run(open_store, self.settings.store_url)
        try:
            await self.offload.run(new.probe)
        except StoreError:
            new.close()
            raise
        if guarded is None:
            self.store = cast(Store, GuardedStore(new, self.health))
        else:
            guarded.target = new

    async def _store_back(self) -> None:
        """The store works again: the folders that waited are served, and the records of
        the tasks in memory written again (those written while it failed were lost)."""
        await self._serve_waiting()
        for host in self.hosts.values():
            for task in host.registry.list():
                host.registry.save(task)
            host.report_status()

    async def add_folder(self, folder: Path) -> None:
        root = folder.resolve()
        if self.store is None or not self.health.available:
            if root not in self._waiting:
                self._waiting.append(root)
            return
        if root in self.hosts:
            return
        if not root.is_dir():
            self.notice(f"Talos skips the workspace folder {visible(str(folder))}: not a directory")
            return
        from ..host import Host

        try:
            host = Host(
                self.store, self.host_config(root), self.make_port(root), offload=self.offload
            )
        except (ValueError, TalosError) as exc:  # a setting a check refused; not a directory
            self.notice(f"Talos cannot serve {visible(str(root))}: {exc}")
            return
        host.nested = lambda: self._inside(root)
        try:
            await host.start()
        except StoreError:  # the store failed meanwhile: served when it is back
            await host.close()
            self._waiting.append(root)
            return
        except ValueError as exc:  # the permission rules cannot be read or parsed
            await host.close()
            self.notice(f"Talos cannot serve {visible(str(root))}: {exc}; fix it or move it aside")
            return
        self.hosts[root] = host
        host.spawn(host.review_rules())
        host.spawn(host.show_open())  # registered first: the port finds the proposals here
        host.report_status()

    def _inside(self, root: Path) -> list[tuple[str, Any]]:
        """The folders served inside `root`, with their policies: a task of `root` honours
        their deny and ask rules (`Policy._inner`)."""
        return [
            (other.relative_to(root).as_posix(), host.policy)
            for other, host in self.hosts.items()
            if root in other.parents and hasattr(host, "policy")
        ]

    async def remove_folder(self, folder: Path) -> None:
        root = folder.resolve()
        host = self.hosts.pop(root, None)
        self._folder_status.pop(root, None)
        self._waiting = [f for f in self._waiting if f.resolve() != root]
        if host is not None:
            await host.close()
        self.publish()

    async def shutdown(self) -> None:
        """Cancel and await every task (each recorded as cancelled), then close the store."""
        hosts = list(self.hosts.values())
        self.hosts.clear()
        await asyncio.gather(*(h.close() for h in hosts), return_exceptions=True)
        await self.health.close()
        await self.offload.drain()
        if self.store is not None:
            self.store.close()
        self.offload.close()

    async def ready(self) -> None:
        await self._ready.wait()
        await self.health.poke()
        if self.store is None or (self._waiting and not self.hosts):
            self.health.check()  # the problem, when there is one
            raise StoreError("Talos's store is unavailable: no workspace folder is served yet")

    # ------------------------------------------------------------- routing
    def host_for(self, path: Path | None) -> Host:
        """The host of the folder holding `path` (the innermost), else the first folder."""
        if not self.hosts:
            raise ParamsError("no workspace folder is open")
        if path is not None:
            owners = [r for r in self.hosts if path == r or r in path.parents]
            if owners:
                return self.hosts[max(owners, key=lambda r: len(r.parts))]
            raise ParamsError(f"{visible(str(path))} is outside every workspace folder")
        return next(iter(self.hosts.values()))

    def _task(self, task_id: str) -> tuple[Host, Task]:
        for host in self.hosts.values():
            task = host.registry.get(task_id)
            if task is not None:
                return host, task
        raise ParamsError(f"no running or recent task {task_id!r}")

    async def _proposal(self, proposal_id: str) -> tuple[Host, Proposal]:
        """The proposal and its folder's host: from memory, else from the store (one another
        server made), off the event loop."""
        await self.ready()
        for host in self.hosts.values():
            try:
                return host, await self.offload.run(host.proposals.get, proposal_id)
            except ProposalError:
                continue
        raise ParamsError(f"no proposal {proposal_id!r}")

    # --------------------------------------------------------------- tasks
    async def start_task(self, p: Params, path: Path | None) -> dict[str, Any]:
        prompt = _prompt(p)
        lines = _range_lines(p.get("range", dict), p.command)
        diagnostics = p.get("diagnostics", list) or []
        return await self._turn(prompt, lambda: self._start(path, prompt, lines, diagnostics))

    async def _start(
        self, path: Path | None, prompt: str, lines: tuple[int, int] | None, diagnostics: list
    ) -> TurnResult:
        await self.ready()
        host = self.host_for(path)
        context = None
        if path is not None:
            context = await self.offload.run(self._context, host, path, lines, diagnostics)
        return await host.turn(prompt, context)

    async def follow_up(self, p: Params) -> dict[str, Any]:
        """A new task that continues an ended task's conversation (its requests and answers)."""
        task_id, prompt = p.get("task_id", str, required=True), _prompt(p)

        async def start() -> TurnResult:
            host, row = await self._task_row(task_id)
            if row.get("state") in OPEN_TASK_STATES:
                raise ParamsError(
                    f"{p.command}: task {task_id!r} is still running; wait for it or cancel it"
                )
            from ..agent.loop import conversation

            history = conversation(row.get("transcript") or [])
            return await host.turn(prompt, history=history, follows=task_id)

        return await self._turn(prompt, start)

    async def _turn(self, prompt: str, start: Callable[[], Awaitable[TurnResult]]) -> dict:
        self._admit()
        self._starting += 1
        try:
            result = await start()
        finally:
            self._starting -= 1
        return {"task_id": result.task.id, "turn": result.turn, "state": result.task.state}

    def _admit(self) -> None:
        """The bound on waiting tasks: checked and counted before anything awaits, so a burst
        of starts cannot all pass it. A refused start costs nothing: no turn, no record."""
        states = [t.state for h in self.hosts.values() for t in h.registry.list()]
        running = states.count("running")
        queued = states.count("queued") + self._starting
        if queued >= MAX_QUEUED:
            raise TooBusy(
                f"too many tasks queued: {running} running, {queued} queued; cancel "
                "one (talos.task.cancel) or wait"
            )

    def _context(
        self, host: Host, path: Path, lines: tuple[int, int] | None, diagnostics: list[Any]
    ) -> EditorContext:
        from ..host import EditorContext

        rel = host.workspace.relative(host.workspace.resolve(str(path)))
        selection = ""
        if lines is not None:
            open_doc = host.port.read_document(rel)
            try:
                text = open_doc[0] if open_doc else host.workspace.read_text(rel)
            except (OSError, SandboxError):
                text = ""
            selection = "".join(text.splitlines(keepends=True)[lines[0] : lines[1] + 1])
        shown = tuple(
            visible(str(d.get("message", "")), single_line=True)[:300]
            for d in diagnostics
            if isinstance(d, Mapping) and d.get("message")
        )
        start, end = lines if lines else (None, None)
        return EditorContext(rel, start, end, selection, shown)

    def cancel(self, root: Path, task_id: str) -> bool:
        host = self.hosts.get(root)
        return host is not None and host.cancel(task_id)

    def files_changed(self, events: Iterable[tuple[int, str]]) -> None:
        """The editor saw files change (`workspace/didChangeWatchedFiles`): each folder's
        index takes its own."""
        from ..watch import lsp_changes

        changes = lsp_changes(events)
        for root, host in self.hosts.items():
            mine = [(kind, path) for kind, path in changes if Path(path).is_relative_to(root)]
            host.files_changed(mine)

    def cancel_task(self, p: Params) -> dict[str, Any]:
        host, task = self._task(p.get("task_id", str, required=True))
        return {"task_id": task.id, "cancelled": host.cancel(task.id)}

    def list_tasks(self) -> list[dict[str, Any]]:
        """Every text in it is shown to the person as is by clients: escaped here."""
        return [
            {
                "id": t.id,
                "title": _shown(t.title),
                "state": t.state,
                "step": _shown(t.activity) if t.state in OPEN_TASK_STATES else "",
                "cost": str(host.meter.task(t.id).cost),
                "error": _maybe(t.error),
                "folder": _shown(str(host.workspace.root)),
            }
            for host in self.hosts.values()
            for t in host.registry.list()
        ]

    async def show_task(self, p: Params) -> str:
        """The task's transcript as Markdown, from the store (finished tasks leave memory)."""
        _, row = await self._task_row(p.get("task_id", str, required=True))
        return transcript_markdown(row)

    async def _task_row(self, task_id: str) -> tuple[Host, dict[str, Any]]:
        """A task's record and its folder's host, from the store (flushed first): a task of
        an open folder only; another workspace's, in a store two servers share, is no task."""
        await self.ready()
        for host in self.hosts.values():
            if host.registry.get(task_id) is not None:
                await host.registry.flush()
        assert self.store is not None
        row = await self.offload.run(self.store.task_get, task_id)
        for host in self.hosts.values():
            if row is not None and row.get("agent_id") == host.agent_id:
                return host, row
        raise ParamsError(f"no task {task_id!r} in any open workspace folder")

    async def rewind_task(self, p: Params) -> dict[str, Any]:
        """Every file the task changed put back as before it (`Host.rewind`); the files left
        (changed since) are named, with why, in `left` and in `message`."""
        host, row = await self._task_row(p.get("task_id", str, required=True))
        try:
            done = await host.rewind(row["id"])
        except ProposalError as exc:
            raise ParamsError(str(exc)) from None
        out = done.as_json()
        for left in out["left"]:
            left.update(path=_shown(left["path"]), reason=_shown(left["reason"]))
        out["restored"] = [_shown(path) for path in out["restored"]]
        return {**out, "message": visible(done.message())}

    # ----------------------------------------------------------- proposals
    async def list_proposals(self, path: Path | None) -> list[dict[str, Any]]:
        await self.ready()
        out = []
        for host in self.hosts.values():
            rel = None
            if path is not None:
                if host.workspace.root not in path.parents:
                    continue
                rel = path.relative_to(host.workspace.root).as_posix()
            out += [proposal_summary(pr) for pr in host.proposals.list(rel)]
        return out

    async def show_proposal(self, p: Params) -> dict[str, Any]:
        _, proposal = await self._proposal(p.get("proposal_id", str, required=True))
        return {
            **proposal_summary(proposal),
            "diff": proposal.diff(),
            "hunks": [
                {
                    "index": h.index,
                    "start_line": h.base_start,
                    "end_line": h.base_end,
                    "old": list(h.old_lines),
                    "new": list(h.new_lines),
                }
                for h in proposal.hunks
            ],
        }

    async def proposal_content(self, p: Params) -> str:
        _, proposal = await self._proposal(p.get("proposal_id", str, required=True))
        side = p.get("side", str, required=True)
        if side == "diff":
            return proposal.diff()
        if side not in ("base", "proposed"):
            raise ParamsError(f"{p.command}: the field 'side' must be 'base', 'proposed' or 'diff'")
        return proposal.base_text if side == "base" else proposal.new_text

    async def apply_proposal(self, p: Params) -> dict[str, Any]:
        host, proposal = await self._proposal(p.get("proposal_id", str, required=True))
        hunks = p.get("hunks", list)
        if hunks is not None and not all(
            isinstance(h, int) and not isinstance(h, bool) for h in hunks
        ):
            raise ParamsError(f"{p.command}: the field 'hunks' must be a list of integers")
        applied = await host.apply_proposal(proposal.id, hunks)
        return {"proposal_id": proposal.id, "applied": applied, "status": proposal.status}

    async def reject_proposal(self, p: Params) -> dict[str, Any]:
        host, proposal = await self._proposal(p.get("proposal_id", str, required=True))
        try:
            await host.reject_proposal(proposal.id)
        except ProposalError as exc:
            raise ParamsError(str(exc)) from None
        return {"proposal_id": proposal.id, "status": proposal.status}

    def proposals_at(self, path: Path) -> list[Proposal]:
        """The proposals on one file, for its diagnostics, code actions and lenses."""
        for root, host in self.hosts.items():
            if path.is_relative_to(root):
                return host.proposals.list(path.relative_to(root).as_posix())
        return []

    def document_changed(self, path: Path, text: str) -> None:
        """The person typed in a document: evidence of what they work on, and stale proposals."""
        path = Path(os.path.normpath(path))  # a URI's "a/../.." climbs out of the folder
        for root, host in self.hosts.items():
            if path.is_relative_to(root):
                rel = path.relative_to(root).as_posix()
                host.person_edited(rel)
                if any(p.status in OPEN for p in host.proposals.list(rel)):
                    host.document_changed(rel, text)

    async def proposal_diff(self, p: Params) -> str:
        _, proposal = await self._proposal(p.get("proposal_id", str, required=True))
        return proposal.diff()

    async def undo(self, p: Params, path: Path | None) -> dict[str, Any]:
        proposal_id = p.get("proposal_id", str)
        await self.ready()
        host = (await self._proposal(proposal_id))[0] if proposal_id else self.host_for(path)
        try:
            proposal = await host.undo(proposal_id)
        except ProposalError as exc:
            raise ParamsError(str(exc)) from None
        return {"proposal_id": proposal.id, "path": proposal.path, "status": proposal.status}

    # ----------------------------------------------------------- questions
    async def list_questions(self) -> list[dict[str, Any]]:
        from ..gates.question_queue import QuestionCandidate

        await self.ready()
        out = []
        for host in self.hosts.values():
            rows = await self.offload.run(host.store.qq_open, host.agent_id)
            for row in rows:
                question = await self.offload.run(host.phrase, QuestionCandidate(**row))
                out.append(
                    {
                        "candidate_id": question.candidate_id,
                        "question": _shown(question.question_text),
                        "kind": question.kind,
                        "options": [_shown(o["label"]) for o in question.options],
                        "status": question.status,
                        "folder": _shown(str(host.workspace.root)),
                    }
                )
        return out

    async def answer_question(self, p: Params) -> dict[str, Any]:
        candidate_id = p.get("candidate_id", str, required=True)
        answer = p.get("answer", str, required=True)
        await self.ready()
        for host in self.hosts.values():
            question = await self.offload.run(host.queue.get, candidate_id)
            if question is not None and question.agent_id == host.agent_id:
                # An option as the list showed it (escaped) is that option.
                labels = [o["label"] for o in question.options]
                shown = [_shown(label) for label in labels]
                if answer not in labels and shown.count(answer) == 1:
                    answer = labels[shown.index(answer)]
                result = await host.answer(question, answer)
                return {
                    "candidate_id": candidate_id,
                    "applied": result.applied,
                    "reason": result.reason,
                }
        raise ParamsError(f"no question {candidate_id!r} in any open workspace folder")

    # -------------------------------------------------------------- memory
    async def list_memory(self, path: Path | None) -> list[dict[str, Any]]:
        await self.ready()
        host = self.host_for(path)
        facts = await self.offload.run(host.facts.list, host.agent_id, include_closed=False)
        return [
            {
                "key": f.key,
                "statement": _shown(f.statement),
                "confidence": round(f.confidence, 3),
                "source": _shown(f.source),
                "subject": _maybe(f.subject),
                "attribute": _maybe(f.attribute),
                "value": _maybe(f.value),
            }
            for f in facts
        ]

    async def remember(self, p: Params, path: Path | None) -> dict[str, Any]:
        from ..agent.tools import MAX_FACT_CHARS
        from ..memory.reconcile import Reconciler

        statement = p.get("statement", str, required=True)
        if len(statement) > MAX_FACT_CHARS:
            raise ParamsError(
                f"{p.command}: the field 'statement' is longer than {MAX_FACT_CHARS} characters"
            )
        await self.ready()
        host = self.host_for(path)

        remember = Reconciler(host.facts).remember
        try:
            key, outcome = await self.offload.run(remember, host.agent_id, statement, "person")
        except ValueError as exc:
            raise ParamsError(f"{p.command}: {exc}") from None
        return {"key": key, "outcome": outcome}

    async def forget(self, p: Params, path: Path | None) -> dict[str, Any]:
        key = p.get("key", str, required=True)
        await self.ready()
        host = self.host_for(path)
        matches = await self.offload.run(host.facts.named, key, host.agent_id)
        if len(matches) != 1:
            problem = (
                f"no fact {key!r}" if not matches else f"{len(matches)} facts start with {key!r}"
            )
            raise ParamsError(f"{p.command}: {problem} in this workspace")
        key = matches[0].key
        return {"key": key, "retracted": await self.offload.run(host.facts.retract, key)}

    # -------------------------------------------------------------- status
    def folder_status(self, root: Path, status: Mapping[str, Any]) -> None:
        """A host reported its status: the daemon's view is updated and published."""
        if root in self.hosts:
            self._folder_status[root] = dict(status)
            self.publish()

    async def current_status(self) -> dict[str, Any]:
        """The status as it is now (`talos.status`), not as last reported."""
        for root, host in list(self.hosts.items()):
            self._folder_status[root] = await host.status()
        return self.status()

    def publish(self) -> None:
        self.on_status(self.status())

    def status(self) -> dict[str, Any]:
        """Every folder's status and the session's totals, as `talos/status` carries it."""
        folders = [self._folder_status[r] for r in self.hosts if r in self._folder_status]
        url = self.health.url if self._opened else self.settings.store_url or default_store_url()
        refused = self.store_refused
        return {
            "running": [t for f in folders for t in f["running"]],
            "tokens_in": sum(f["tokens_in"] for f in folders),
            "tokens_out": sum(f["tokens_out"] for f in folders),
            "cost_session": str(sum((Decimal(f["cost_session"]) for f in folders), Decimal(0))),
            "open_questions": sum(f["open_questions"] for f in folders),
            "store": {
                "url": redact_url(url),
                "available": self.store is not None and self.health.available,
                "problem": self.health.problem,
                "refused": None
                if refused is None
                else f"{redact_url(refused)}: a new store takes effect when the server restarts",
            },
            "settings": self.settings.shown(),
            "folders": folders,
        }


APPLY_SETTINGS, KEEP_SETTINGS = "Apply the new settings", "Keep the current ones"
_NONE = object()  # no value declined


def _load_hosting() -> None:
    """Import what serving a folder needs and answering `initialize` does not: the host, and
    through it the agent loop and its tools, the gates, memory and the file watcher. It runs in
    a worker thread when the folders open, beside the store's opening, so the event loop
    answers the client meanwhile (issue 30: `bench/startup_bench.py`)."""
    from .. import host  # noqa: F401


def _shown(text: str) -> str:
    return visible(text, single_line=True)


def _maybe(text: str | None) -> str | None:
    return None if text is None else _shown(text)


def _host(config: ModelConfig) -> str:
    """The endpoint's host as a person should read it (escaped; an international name also
    in its ASCII form, so a look-alike letter shows)."""
    host = urlsplit(config.endpoint).hostname or "?"
    if not host.isascii():
        with contextlib.suppress(UnicodeError):
            host = f"{host} ({host.encode('idna').decode('ascii')})"
    return _shown(host)


def proposal_summary(proposal: Proposal) -> dict[str, Any]:
    """A proposal as lists show it (its path escaped: clients show it as is; the id and the
    `uri` of `talos/proposals` name it exactly)."""
    return {
        "id": proposal.id,
        "path": _shown(proposal.path),
        "status": proposal.status,
        "task_id": proposal.task_id,
        "hunks": len(proposal.hunks),
    }


def _fenced(text: str) -> str:
    """Text shown exactly, never as Markdown: a fence longer than any run of backticks in it,
    so a transcript cannot close the block and render links or fake prompts."""
    text = visible(text)
    if len(text) > MAX_SHOWN_CHARS:
        text = text[:MAX_SHOWN_CHARS] + f"\n[... {len(text) - MAX_SHOWN_CHARS} characters cut]"
    longest = max(map(len, re.findall("`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def transcript_markdown(row: Mapping[str, Any]) -> str:
    """A stored task as Markdown. Everything the model or the workspace wrote is fenced."""
    out = [f"# Task {row['id']}: {row['state']}", "", f"Cost: ${row.get('cost') or '0'}", ""]
    if row.get("error"):
        out += ["Stopped because:", _fenced(str(row["error"])), ""]
    for message in row.get("transcript") or []:
        role = message.get("role")
        if role == "system":
            continue
        heading = {"user": "You", "assistant": "Talos", "tool": "Tool result"}.get(role, role)
        out.append(f"## {heading}")
        if message.get("content"):
            out.append(_fenced(str(message["content"])))
        for call in message.get("tool_calls") or []:
            function = call.get("function", {})
            out += [
                "Calls a tool:",
                _fenced(f"{function.get('name')} {_pretty(function.get('arguments', ''))}"),
            ]
        out.append("")
    return "\n".join(out)


def _pretty(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(arguments)
