"""`talos-ls`: the language server. Tasks, permission prompts, questions, proposals, status and
cost over plain LSP, so any editor is the confirmation surface.

Each handler is a few lines over `lsp/daemon.py` (the domain: hosts per folder, commands as
methods). What pygls does not do for us, done here (see the notes on pygls 2's traps):
- commands take ONE dict argument (pygls spreads arguments positionally, ignoring defaults);
- a task never runs under its `executeCommand` request (pygls does not cancel those): it runs
  in the background and is cancelled from its progress or with `talos.task.cancel`;
- after `exit` nothing is sent (pygls would loop reporting errors on a closed stdout);
- every frame read is answered or dropped as the spec says, and the reader survives any bytes
  (pygls's reader leaves a request it cannot decode unanswered): `lsp/transport.py`;
- pygls logs request params on errors and every message body at INFO: its loggers stay at
  WARNING and every record's arguments are scrubbed, so prompts and code never reach a log.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from lsprotocol import types
from pygls.exceptions import (
    FeatureNotificationError,
    JsonRpcException,
    JsonRpcInternalError,
    JsonRpcInvalidParams,
)
from pygls.lsp.server import LanguageServer

from . import __version__
from .agent.workspace import SandboxError
from .errors import TalosError
from .logs import configure_logging
from .lsp import review, transport
from .lsp import tcp as tcp_transport
from .lsp.actions import code_actions
from .lsp.daemon import Daemon, Params, ParamsError, TooBusy
from .lsp.prompts import PromptBook

if TYPE_CHECKING:
    from .lsp.port import LspPort

logger = logging.getLogger(__name__)
SHUTDOWN_S = 2.0
CLIENT_S = 5.0  # a request needing no person waits this long for the client (see client_wait)
# How long a thread holding the GIL keeps it from another that asks (Python's default: 5 ms).
# The event loop asks several times for each request it answers, while worker threads import
# `openai`, build the index or run tools: 1 ms keeps a code action's answer within a few ms
# of its idle time (bench/lsp_bench.py, figure 9).
SWITCH_S = 0.001
PROPOSAL_SCHEME = "talos-proposal"
# fmt: off
COMMANDS = (
    "talos.task.start", "talos.task.followUp", "talos.task.cancel", "talos.task.list",
    "talos.task.show", "talos.task.rewind",
    "talos.proposal.list", "talos.proposal.show", "talos.proposal.apply",
    "talos.proposal.reject", "talos.proposal.diff", "talos.undo", "talos.questions.list",
    "talos.question.answer", "talos.prompt.answer",
    "talos.memory.list", "talos.memory.remember", "talos.memory.forget", "talos.status",
)
# fmt: on


class TalosServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "talos-ls",
            __version__,
            protocol_cls=transport.HardenedProtocol,
            converter_factory=transport.converter,
            max_workers=4,
        )
        self.daemon = Daemon(
            self._port,
            lambda status: self.notify("talos/status", status),
            lambda message: self.show(types.MessageType.Warning, message),
        )
        self.closing = False
        self._jobs: set[asyncio.Future] = set()
        self._early_problems: list[str] = []
        self._diff_dir: Path | None = None
        self.content_provider = False  # the client serves talos-proposal: documents
        self.deferred_prompts = False  # prompts as talos/prompt, answered by command
        self.conversation = False  # tasks streamed as talos/conversation events
        self.prompts = PromptBook(self.notify)

    def _port(self, root: Path) -> LspPort:
        """A folder's port; its module loads with the first folder, not for `initialize`."""
        from .lsp.port import LspPort

        return LspPort(self, self.daemon, root)

    # ------------------------------------------------- what the client can
    @property
    def _window(self) -> types.WindowClientCapabilities | None:
        return self.client_capabilities.window if self.client_capabilities else None

    @property
    def _workspace_caps(self) -> types.WorkspaceClientCapabilities | None:
        return self.client_capabilities.workspace if self.client_capabilities else None

    @property
    def can_prompt(self) -> bool:
        window = self._window
        return self.deferred_prompts or (window is not None and window.show_message is not None)

    @property
    def can_show_progress(self) -> bool:
        return bool(self._window and self._window.work_done_progress)

    # ------------------------------------------------------------- sending
    def notify(self, method: str, params: Any) -> None:
        if not self.closing:
            self.protocol.notify(method, params)

    def show(self, kind: types.MessageType, message: str) -> None:
        self.notify(types.WINDOW_SHOW_MESSAGE, types.ShowMessageParams(type=kind, message=message))

    async def prompt(
        self, message: str, options: Sequence[str], kind: str = "question"
    ) -> str | None:
        """A choice shown as buttons (or sent as `talos/prompt` to a client that answers
        later); None when dismissed, unanswered in time, or impossible."""
        if not self.can_prompt or self.closing:
            return None
        timeout = self.daemon.settings.prompt_timeout
        if self.deferred_prompts:
            return await self.prompts.ask(kind, message, options, timeout)
        params = types.ShowMessageRequestParams(
            type=types.MessageType.Info,
            message=message,
            actions=[types.MessageActionItem(title=o) for o in options],
        )
        try:
            item = await asyncio.wait_for(self.window_show_message_request_async(params), timeout)
        except (TimeoutError, JsonRpcException):
            return None
        return None if item is None else item.title

    def report_server_error(self, error: Exception, source: Any) -> None:
        """What no request's answer carries. pygls shows the exception's text, then stops the
        server's thread pool: one bug would end the daemon. Here a request's error was answered
        already (`transport.HardenedProtocol`), and a failed send was logged (saying so would
        need another); a notification's, or its background job's, is shown as
        `transport.failure` words it, and the server goes on."""
        if source is FeatureNotificationError and not self.closing:
            self.show(types.MessageType.Error, f"Talos: {transport.failure(error)}")

    def refresh_lenses(self) -> None:
        """Ask the client to fetch code lenses again, when it can be asked."""
        lenses = self._workspace_caps.code_lens if self._workspace_caps else None
        if lenses and lenses.refresh_support and not self.closing:
            self.spawn(self.quietly(self.workspace_code_lens_refresh_async(None)))

    @property
    def client_wait(self) -> float:
        """How long a request that needs no person waits for the client's reply: `CLIENT_S`,
        or `promptTimeout` when that is shorter. A busy editor may answer later: its reply is
        then dropped (`transport.HardenedProtocol`)."""
        return min(CLIENT_S, self.daemon.settings.prompt_timeout)

    async def quietly(self, request: Awaitable[Any]) -> None:
        """A request whose reply does not matter: waited for `client_wait`, failures logged."""
        try:
            await asyncio.wait_for(request, self.client_wait)
        except (TimeoutError, JsonRpcException) as exc:
            logger.info("the client did not take a request: %s", type(exc).__name__)

    async def show_diff(self, p: Params) -> dict[str, Any]:
        """A proposal's unified diff, returned; and opened where the editor can show a
        document: as a `talos-proposal:` virtual document when the client said it serves that
        scheme (from `talos/proposalContent`), else a private temporary file outside the
        workspace."""
        diff = await self.daemon.proposal_diff(p)
        window = self._window
        if not (window and window.show_document and window.show_document.support):
            return {"diff": diff, "uri": None}
        pid = p.raw["proposal_id"]
        if self.content_provider:
            uri = f"{PROPOSAL_SCHEME}:/{pid}.diff"
        else:
            if self._diff_dir is None:
                self._diff_dir = Path(tempfile.mkdtemp(prefix="talos-diff-"))
            path = self._diff_dir / f"{pid}.diff"
            path.write_text(diff)
            uri = path.as_uri()
        try:
            shown = await asyncio.wait_for(
                self.window_show_document_async(types.ShowDocumentParams(uri=uri, take_focus=True)),
                self.client_wait,
            )
        except (TimeoutError, JsonRpcException):
            return {"diff": diff, "uri": None}
        return {"diff": diff, "uri": uri if shown is not None and shown.success else None}

    def spawn(self, coro: Awaitable[Any]) -> None:
        """Run a notification's work in the background; its failure is reported as the
        notification's would be."""
        job = asyncio.ensure_future(coro)
        self._jobs.add(job)
        job.add_done_callback(self._job_done)

    def _job_done(self, job: asyncio.Future) -> None:
        self._jobs.discard(job)
        if not job.cancelled() and isinstance(exc := job.exception(), Exception):
            self.report_server_error(exc, FeatureNotificationError)

    # ------------------------------------------------------------ commands
    async def call(
        self, command: str, arguments: Sequence[Any], run: Callable[[Params], Any]
    ) -> Any:
        """Run a command's method; an expected failure (`errors.TalosError`: a bad field, an
        unavailable store) is a JSON-RPC error whose message says what, and the server goes on
        serving. Anything else is a bug, answered by `transport.HardenedProtocol`."""
        try:
            result = run(Params(command, arguments))
            return await result if asyncio.iscoroutine(result) else result
        except (ParamsError, SandboxError) as exc:  # a bad field; a path that escapes
            raise JsonRpcInvalidParams(
                f"{command}: {exc}" if isinstance(exc, SandboxError) else str(exc)
            ) from None
        except TooBusy as exc:
            raise transport.JsonRpcRequestFailed(f"{command}: {exc}") from None
        except TalosError as exc:
            raise JsonRpcInternalError(f"{command}: {exc}") from None


def uri_path(uri: Any) -> Path | None:
    """A `file://` URI as a path; anything else is a bad field."""
    if uri is None:
        return None
    try:
        parsed = urlparse(uri)
    except ValueError:  # "file://[x": an IPv6 host never closed
        raise ParamsError("the field 'uri' must be a file:// URI; it is no URI") from None
    if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
        raise ParamsError(f"the field 'uri' must be a file:// URI, got scheme {parsed.scheme!r}")
    return Path(unquote(parsed.path))


def document_path(uri: str) -> Path | None:
    """A document's path; None for one that is no file (`untitled:`, `git:`): no proposal of
    Talos's is on it, so it is no error to ask."""
    try:
        return uri_path(uri)
    except ParamsError:
        return None


def _path(p: Params) -> Path | None:
    return uri_path(p.get("uri", str))


server = TalosServer()
D = server.daemon


def _command(name: str, run: Callable[[Params], Any]) -> None:
    async def handler(ls: TalosServer, *arguments: Any) -> Any:
        return await ls.call(name, arguments, run)

    server.command(name)(handler)


_command("talos.task.start", lambda p: D.start_task(p, _path(p)))
_command("talos.task.followUp", D.follow_up)
_command("talos.task.cancel", D.cancel_task)
_command("talos.task.list", lambda p: D.list_tasks())
_command("talos.task.show", D.show_task)
_command("talos.task.rewind", D.rewind_task)
_command("talos.proposal.list", lambda p: D.list_proposals(_path(p)))
_command("talos.proposal.show", D.show_proposal)
_command("talos.proposal.apply", D.apply_proposal)
_command("talos.proposal.reject", D.reject_proposal)
_command("talos.proposal.diff", server.show_diff)
_command("talos.undo", lambda p: D.undo(p, _path(p)))
_command("talos.questions.list", lambda p: D.list_questions())
_command("talos.question.answer", D.answer_question)
_command("talos.prompt.answer", server.prompts.answer)
_command("talos.memory.list", lambda p: D.list_memory(_path(p)))
_command("talos.memory.remember", lambda p: D.remember(p, _path(p)))
_command("talos.memory.forget", lambda p: D.forget(p, _path(p)))
_command("talos.status", lambda p: D.current_status())


@server.feature("talos/proposalContent")
async def proposal_content(ls: TalosServer, params: Any) -> str:
    return await ls.call("talos/proposalContent", [params], D.proposal_content)


# ----------------------------------------------------------------- lifecycle
@server.feature(types.INITIALIZE)
def initialize(ls: TalosServer, params: types.InitializeParams) -> None:
    options = params.initialization_options or {}
    ls._early_problems = D.configure(options)
    ls.content_provider = isinstance(options, dict) and options.get("contentProvider") is True
    ls.deferred_prompts = isinstance(options, dict) and options.get("deferredPrompts") is True
    ls.conversation = isinstance(options, dict) and options.get("conversation") is True


@server.feature(types.INITIALIZED)
def initialized(ls: TalosServer, params: types.InitializedParams) -> None:
    ls.spawn(_start(ls))


async def _start(ls: TalosServer) -> None:
    if isinstance(ls.protocol, transport.HardenedProtocol):  # a task's messages, serialised once
        ls.spawn(D.offload.run(ls.protocol.rehearse))
    problems = ls._early_problems + await _pull_configuration(ls)
    D.locked = True  # the session's settings are read: a widening change needs the person
    for problem in problems:
        ls.show(types.MessageType.Error, f"Talos setting refused: {problem}")
    D.client_watches = await _watch_through_client(ls)
    folders = [document_path(f.uri) for f in ls.workspace.folders.values()]
    if not folders and ls.workspace.root_path:
        folders = [Path(ls.workspace.root_path)]
    await D.open([f for f in folders if f is not None])
    D.publish()


async def _watch_through_client(ls: TalosServer) -> bool:
    """Ask the editor to report file changes, when it can: it watches anyway, and our own
    watcher's setup holds the interpreter for a moment per ten thousand directories."""
    watched = ls._workspace_caps.did_change_watched_files if ls._workspace_caps else None
    if not (watched and watched.dynamic_registration):
        return False
    options = types.DidChangeWatchedFilesRegistrationOptions(
        watchers=[types.FileSystemWatcher(glob_pattern="**/*")]
    )
    try:
        await asyncio.wait_for(
            ls.client_register_capability_async(
                types.RegistrationParams(
                    registrations=[
                        types.Registration(
                            id="talos-files",
                            method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                            register_options=options,
                        )
                    ]
                )
            ),
            ls.client_wait,
        )
    except (TimeoutError, JsonRpcException):
        return False
    return True


async def _pull_configuration(ls: TalosServer) -> list[str]:
    """The `talos` section, when the client offers `workspace/configuration`."""
    if not (ls._workspace_caps and ls._workspace_caps.configuration):
        return []
    try:
        (section,) = await asyncio.wait_for(
            ls.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section="talos")])
            ),
            ls.client_wait,
        )
    except (TimeoutError, JsonRpcException, ValueError, TypeError):
        return []
    return D.configure(section) if section else []


@server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
async def configuration_changed(ls: TalosServer, params: types.DidChangeConfigurationParams):
    settings = params.settings
    section = settings.get("talos") if isinstance(settings, dict) else None
    problems = D.configure(section) if isinstance(section, dict) else await _pull_configuration(ls)
    for problem in problems:
        ls.show(types.MessageType.Error, f"Talos setting refused: {problem}")
    D.publish()
    if D.pending:  # what the agent may do, and where the key goes: the person says
        ls.spawn(
            D.confirm_changes(lambda message, actions: ls.prompt(message, actions, "permission"))
        )


@server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
async def folders_changed(ls: TalosServer, params: types.DidChangeWorkspaceFoldersParams):
    for folder in params.event.removed:
        if (path := document_path(folder.uri)) is not None:
            await D.remove_folder(path)
    for folder in params.event.added:
        if (path := document_path(folder.uri)) is not None:
            await D.add_folder(path)


@server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
def watched_files_changed(ls: TalosServer, params: types.DidChangeWatchedFilesParams) -> None:
    D.files_changed([(int(c.type), c.uri) for c in params.changes])


@server.feature(
    types.TEXT_DOCUMENT_CODE_ACTION,
    types.CodeActionOptions(
        code_action_kinds=[types.CodeActionKind.QuickFix, types.CodeActionKind.Empty]
    ),
)
def code_action(ls: TalosServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    path = document_path(params.text_document.uri)
    on_file = D.proposals_at(path) if path else []
    return review.code_actions(on_file, params.range, params.text_document.uri) + code_actions(
        params
    )


@server.feature(types.TEXT_DOCUMENT_CODE_LENS)
def code_lens(ls: TalosServer, params: types.CodeLensParams) -> list[types.CodeLens]:
    path = document_path(params.text_document.uri)
    return review.code_lenses(D.proposals_at(path) if path else [], params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def document_changed(ls: TalosServer, params: types.DidChangeTextDocumentParams) -> None:
    """The person typed: evidence of what they work on; proposals made on what it was, stale."""
    path = document_path(params.text_document.uri)
    doc = ls.workspace.text_documents.get(unquote(params.text_document.uri))
    if path is not None and doc is not None:
        D.document_changed(path, doc.source)


@server.feature(types.SHUTDOWN)
async def shutdown(ls: TalosServer, params: Any) -> None:
    """Every task cancelled, recorded as cancelled, and the store closed, within 2 s."""
    jobs = list(ls._jobs)  # the start, if it is still opening the store or the folders
    for job in jobs:
        job.cancel()
    await asyncio.gather(*jobs, return_exceptions=True)
    try:
        await asyncio.wait_for(D.shutdown(), SHUTDOWN_S)
    except TimeoutError:
        logger.warning("shutdown took longer than %.0f s; exiting anyway", SHUTDOWN_S)
    if isinstance(ls.protocol, transport.HardenedProtocol):
        ls.protocol.cancel_outgoing()  # nothing waits for a reply past shutdown


@server.feature(types.EXIT)
def exit_(ls: TalosServer, params: Any) -> None:
    ls.closing = True


# ---------------------------------------------------------------------- main
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="talos-ls",
        description="The Talos language server: a coding agent for any LSP client. Speaks "
        "LSP on stdin/stdout unless --tcp or --acp is given.",
    )
    parser.add_argument("--version", action="version", version=f"talos-ls {__version__}")
    parser.add_argument(
        "--tcp",
        metavar="HOST:PORT",
        help="listen on TCP instead of stdio, for debugging: HOST must be a loopback address "
        "(127.0.0.1, ::1, localhost; PORT 0 picks a free one, logged); one client, which must "
        "send the token of --token-file as initializationOptions.tcpToken",
    )
    parser.add_argument(
        "--token-file",
        metavar="PATH",
        help="with --tcp (required): a file only you can read (chmod 600) holding the token a "
        "client must send",
    )
    parser.add_argument(
        "--acp",
        action="store_true",
        help="speak the Agent Client Protocol (ACP v1) on stdin/stdout instead of LSP, for "
        "Zed, JetBrains IDEs, CodeCompanion, avante.nvim and other ACP clients (docs/acp.md); "
        "settings come from your config file and environment, as for `talos run`",
    )
    parser.add_argument("--log-file", metavar="PATH", help="write the log here (default: stderr)")
    parser.add_argument(
        "--log-level",
        default="warning",
        choices=["debug", "info", "warning", "error"],
        help="Talos's own log level (default warning)",
    )
    args = parser.parse_args(argv)
    tcp = None
    if args.tcp:
        host, _, port = args.tcp.rpartition(":")
        if not host or not port.isdigit() or not 0 <= int(port) < 65536:
            parser.error(f"--tcp needs HOST:PORT, got {args.tcp!r}")
        if not args.token_file:
            parser.error(
                "--tcp needs --token-file PATH: a file only you can read, holding the token a "
                "client must send as initializationOptions.tcpToken"
            )
        try:
            tcp = (
                tcp_transport.loopback(host),
                int(port),
                tcp_transport.read_token(args.token_file),
            )
        except tcp_transport.TcpError as exc:
            parser.error(str(exc))
    elif args.token_file:
        parser.error("--token-file goes with --tcp")
    if args.acp:
        if args.tcp:
            parser.error("--acp speaks on stdio: it does not go with --tcp")
        from .acp.serve import serve

        return serve(args.log_file, args.log_level)
    configure_logging(args.log_file, args.log_level)
    from .agent.sandbox import protect_this_process

    protect_this_process()
    sys.setswitchinterval(SWITCH_S)
    if tcp:
        tcp_transport.serve_tcp(server, *tcp)
    else:
        transport.serve_io(server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
