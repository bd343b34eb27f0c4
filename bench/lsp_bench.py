"""The language server, measured against a bare pygls 2 server started in the same run.

Each figure comes from real processes over stdio: `talos-ls` (`python -m talos_ls.server`),
a bare `LanguageServer("bare", "0")` written to a temporary file (a trivial code action and
a trivial command), driven by pytest-lsp's client; the model is `ScriptedModelServer` in a
process of its own, so its threads do not share the client's interpreter.

1. initialize round trip (spawn -> initialize response), and spawn -> the first
   `talos/status` with a folder (the host opened);
2. idle RSS after initialize and the first status (VmRSS of the server process);
3. `textDocument/codeAction` latency on an open document: bare, talos idle, talos while three
   tasks stream from the model;
4. `talos.task.start` until the task id comes back, and until the progress `begin`, on
   generated workspaces (after the index is ready, and once right after initialize);
5. index ready on the largest workspace: `initialized` sent -> first status with
   `index.ready` (the files listed), beside `rg --files` on the same tree; the server's RSS
   once it has read the symbols too (its CPU idle), beside a bare server's; and codeAction
   latency while that build runs, in a run of its own;
6. shutdown with a running task (the model hangs): `shutdown` sent -> process exited;
7. proposals: `talos.task.start` -> the proposal's `publishDiagnostics` (the model proposes an
   edit at once), and `codeAction` latency on a document with 50 pending hunks.

    .venv/bin/python bench/lsp_bench.py                      # 10,000 and 100,000 files
    .venv/bin/python bench/lsp_bench.py --quick              # a smoke run: small sizes
    .venv/bin/python bench/lsp_bench.py --sizes 2000,20000 --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import functools
import itertools
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Union

from lsprotocol import types
from pygls.lsp.client import LanguageClient as BaseLanguageClient
from pygls.protocol import default_converter
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, LanguageClient, register_lsp_features

REPO = Path(__file__).resolve().parents[1]
WAIT_S = 60.0
INDEX_WAIT_S = 600.0
STARTUP_S = 3.0  # figure 3's idle server: this long after initialized at least
FAKE_KEY = "sk-test-not-a-real-key-000000000000"
PROMPT = "Explain the selected code, and point out any problem in it."

BARE_SERVER = """
from lsprotocol import types
from pygls.lsp.server import LanguageServer

server = LanguageServer("bare", "0")


@server.feature(types.TEXT_DOCUMENT_CODE_ACTION)
def code_action(ls, params):
    arg = {"prompt": "Explain the selected code.", "uri": params.text_document.uri,
           "range": {"start": {"line": params.range.start.line, "character": 0},
                     "end": {"line": params.range.end.line, "character": 0}}}
    return [types.CodeAction(title="Ask bare about the selection",
                             kind=types.CodeActionKind.Empty,
                             command=types.Command(title="Ask", command="bare.start",
                                                   arguments=[arg]))]


@server.command("bare.start")
def start(ls, *args):
    return {"task_id": "t0", "turn": 1, "state": "queued"}


server.start_io()
"""

# The scripted model in its own process; one JSON command a line on stdin, one JSON line back.
MODEL_SERVER = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from talos_ls.demo.scripted_model import ScriptedModelServer, hang, reply

class Stamped(list):  # the requests, each stamped as it arrives: figure 10's step times
    def __init__(self):
        super().__init__()
        self.times = []

    def append(self, item):
        self.times.append(time.monotonic())
        super().append(item)


model = ScriptedModelServer()
model.requests = Stamped()
print(json.dumps({"url": model.url}), flush=True)
for line in sys.stdin:
    cmd = json.loads(line)
    op = cmd["op"]
    if op == "arrivals":  # the arrival times of requests [since:]
        print(json.dumps({"arrivals": model.requests.times[cmd.get("since", 0):]}), flush=True)
        continue
    if op == "sizes":  # the bytes of each request's body [since:], as JSON
        sizes = [len(json.dumps(r["body"])) for r in model.requests[cmd.get("since", 0):]]
        print(json.dumps({"sizes": sizes}), flush=True)
        continue
    if op == "steps":  # `n` replies of one tool call each, then a text answer
        for k in range(cmd["n"]):
            model.script.append(reply("", [(f"c{k}", cmd["name"], cmd["arguments"])]))
        model.script.append(reply(cmd.get("text", "done")))
    elif op == "reply":
        usage = tuple(cmd.get("usage", (10, 5, 0)))
        for _ in range(cmd.get("times", 1)):
            model.script.append(reply(cmd.get("text"), delay=cmd.get("delay", 0.0), usage=usage))
    elif op == "call":  # one tool call, then a text answer (bench/load_bench.py)
        model.script.append(reply("", [("c1", cmd["name"], cmd["arguments"])]))
        model.script.append(reply(cmd.get("text", "done")))
    elif op == "propose":
        model.script.append(reply("", [("c1", "propose_edit", cmd["arguments"])]))
        model.script.append(reply("proposed"))
    elif op == "hang":
        for _ in range(cmd.get("times", 1)):
            model.script.append(hang())
    elif op == "clear":
        model.script.clear()
    elif op == "quit":
        break
    print(json.dumps({"requests": len(model.requests), "script": len(model.script)}),
          flush=True)
model.close()
"""


# Figure 8's anchor: a fresh process importing `openai` and making one streamed call.
FRESH_SDK_CALL = """
import sys, time
t0 = time.perf_counter()
import openai
client = openai.OpenAI(base_url=sys.argv[1], api_key="sk-test", max_retries=0)
stream = client.chat.completions.create(
    model="fake-model", messages=[{"role": "user", "content": "hi"}], stream=True,
    stream_options={"include_usage": True})
for _ in stream:
    pass
print(time.perf_counter() - t0)
"""

# Figure 10's anchor: a bare openai-SDK loop sending the requests a Talos task sent (its stored
# transcript, a prefix a step, with the same tools), until the model answers without a call.
BARE_SDK_LOOP = """
import asyncio, json, sys
import openai

async def main():
    data = json.loads(open(sys.argv[1]).read())
    client = openai.AsyncOpenAI(base_url=sys.argv[2], api_key="sk-test", max_retries=0)
    transcript, tools, n = data["transcript"], data["tools"], data["first"]
    while True:
        stream = await client.chat.completions.create(
            model="fake-model", messages=transcript[:n], tools=tools, stream=True,
            stream_options={"include_usage": True})
        called = False
        async for chunk in stream:
            for choice in chunk.choices:
                called = called or bool(choice.delta and choice.delta.tool_calls)
        if not called:
            break
        n += 2

asyncio.run(main())
"""


# --------------------------------------------------------------------------- the model
class Model:
    """`ScriptedModelServer` in a child process."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", MODEL_SERVER, str(REPO)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.url = json.loads(self._line())["url"]

    def _line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the scripted model process died")
        return line

    def send(self, **cmd: Any) -> dict[str, int]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        return json.loads(self._line())

    def requests(self) -> int:
        """How many requests the model has had, in all."""
        return self.send(op="count")["requests"]

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.send(op="quit")
        with contextlib.suppress(Exception):
            self.proc.wait(5)
        if self.proc.poll() is None:
            self.proc.kill()


# --------------------------------------------------------------------------- the client
@functools.cache
@functools.cache
def _converter():
    """lsprotocol 2025.0.0 decodes a CodeAction carrying a Command as a Command (client side
    only); this picks by the shape of "command" (as in tests/lsp/conftest.py). One for every
    session (cached): the converter writes its code for a message type at the type's first
    use, which would be counted against the server's first task each time (an editor does it
    once)."""
    conv = default_converter()

    def hook(obj, _):
        kind = types.Command if isinstance(obj.get("command"), str) else types.CodeAction
        return conv.structure(obj, kind)

    conv.register_structure_hook(Union[types.Command, types.CodeAction], hook)  # noqa: UP007
    return conv


def capabilities() -> types.ClientCapabilities:
    window = types.WindowClientCapabilities(
        work_done_progress=True, show_message=types.ShowMessageRequestClientCapabilities()
    )
    workspace = types.WorkspaceClientCapabilities(
        apply_edit=True,
        configuration=True,
        workspace_folders=True,
        did_change_configuration=types.DidChangeConfigurationClientCapabilities(),
    )
    return types.ClientCapabilities(window=window, workspace=workspace)


def server_env(home: Path, root: Path = REPO) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TALOS_", "XDG_"))}
    env.update(
        {
            "XDG_CONFIG_HOME": str(home / "config"),
            "XDG_STATE_HOME": str(home / "state"),
            "XDG_DATA_HOME": str(home / "data"),
            "XDG_CACHE_HOME": str(home / "cache"),
            "OPENAI_API_KEY": FAKE_KEY,
            "PYTHONPATH": str(root),
        }
    )
    return env


class BenchClient(LanguageClient):
    """pytest-lsp's client, keeping the server's stderr instead of forwarding it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stderr_lines: list[str] = []

    async def start_io(self, cmd: str, *args: Any, **kwargs: Any) -> None:
        await BaseLanguageClient.start_io(self, cmd, *args, **kwargs)
        self._stderr_forwarder = asyncio.create_task(self._collect_stderr())

    async def _collect_stderr(self) -> None:
        server = self._server
        if server is None or server.stderr is None:
            return
        while line := await server.stderr.readline():
            self.stderr_lines.append(line.decode(errors="replace").rstrip("\n"))

    async def stop(self) -> None:
        server = self._server
        if (
            self._stderr_forwarder is not None
            and server is not None
            and server.returncode is not None
        ):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._stderr_forwarder), 2.0)
        await super().stop()


class Session:
    """One server process and what it sent, each notification stamped on arrival."""

    def __init__(self, kind: str, home: Path, root: Path = REPO) -> None:
        self.kind = kind
        self.home = home
        self.root = root  # the checkout of talos_ls the server runs (PYTHONPATH)
        self.client = BenchClient(converter_factory=_converter)
        self.statuses: list[tuple[float, Any]] = []
        self.progress: dict[str, list[tuple[str, float, Any]]] = {}
        self.prompts = 0
        self.t_spawn = self.t_initialized = 0.0
        self.last_empty = False
        features = dict(DEFAULT_CLIENT_FEATURES)
        default_progress = features[types.PROGRESS]

        def on_progress(ls: Any, params: types.ProgressParams) -> None:  # "ls": pygls passes it
            now = time.perf_counter()
            value = params.value if isinstance(params.value, dict) else {}
            self.progress.setdefault(str(params.token), []).append(
                (value.get("kind", "?"), now, value.get("message"))
            )
            default_progress(ls, params)

        features[types.PROGRESS] = on_progress
        self.diagnostics: list[tuple[float, str, int]] = []  # arrival, uri, how many
        default_diagnostics = features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS]

        def on_diagnostics(ls: Any, params: types.PublishDiagnosticsParams) -> None:
            self.diagnostics.append((time.perf_counter(), params.uri, len(params.diagnostics)))
            default_diagnostics(ls, params)

        features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = on_diagnostics
        register_lsp_features(self.client, features)

        @self.client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
        def on_prompt(ls: Any, params: types.ShowMessageRequestParams) -> None:
            self.prompts += 1  # dismissed
            return None

        @self.client.feature(types.WORKSPACE_APPLY_EDIT)
        def on_apply(ls: Any, params: types.ApplyWorkspaceEditParams):
            return types.ApplyWorkspaceEditResult(applied=False)

        @self.client.feature("talos/status")
        def on_status(ls: Any, params: Any) -> None:
            self.statuses.append((time.perf_counter(), plain(params)))

        @self.client.feature("talos/proposals")
        def on_proposals(ls: Any, params: Any) -> None:
            pass

    @property
    def pid(self) -> int:
        assert self.client._server is not None
        return self.client._server.pid

    async def start(self, argv: list[str], folders: list[Path], options: dict[str, Any]) -> float:
        """Spawn and initialize (sending `initialized` at once); the round trip in seconds."""
        self.t_spawn = time.perf_counter()
        # cwd: `python -m` imports from there first
        await self.client.start_io(*argv, env=server_env(self.home, self.root), cwd=self.root)
        await asyncio.wait_for(
            self.client.initialize_session(
                types.InitializeParams(
                    capabilities=capabilities(),
                    root_uri=folders[0].as_uri() if folders else None,
                    workspace_folders=[
                        types.WorkspaceFolder(uri=f.as_uri(), name=f.name) for f in folders
                    ],
                    initialization_options=options,
                )
            ),
            WAIT_S,
        )
        self.t_initialized = time.perf_counter()  # `initialized` is sent right after
        return self.t_initialized - self.t_spawn

    async def until(self, check: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
        deadline = time.perf_counter() + timeout
        while not (value := check()):
            if time.perf_counter() > deadline:
                raise TimeoutError(f"{self.kind}: timed out waiting for {what}")
            if self.client._server is not None and self.client._server.returncode is not None:
                raise RuntimeError(f"{self.kind}: the server exited waiting for {what}")
            await asyncio.sleep(0.002)
        return value

    def first_status(self, pred: Callable[[Any], bool]) -> tuple[float, Any] | None:
        return next(((t, s) for t, s in self.statuses if pred(s)), None)

    async def command(self, name: str, arg: dict[str, Any]) -> Any:
        params = types.ExecuteCommandParams(command=name, arguments=[arg])
        return await asyncio.wait_for(self.client.workspace_execute_command_async(params), WAIT_S)

    def open_document(self, path: Path) -> str:
        uri = path.as_uri()
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=uri, language_id="python", version=1, text=path.read_text()
                )
            )
        )
        return uri

    async def code_action(self, uri: str, empty_ok: bool = False) -> float:
        params = types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(
                start=types.Position(line=2, character=0), end=types.Position(line=9, character=0)
            ),
            context=types.CodeActionContext(diagnostics=[]),
        )
        t0 = time.perf_counter()
        result = await asyncio.wait_for(self.client.text_document_code_action_async(params), WAIT_S)
        elapsed = time.perf_counter() - t0
        self.last_empty = not result
        if not result and not empty_ok:
            raise RuntimeError(f"{self.kind}: the code action came back empty")
        return elapsed

    def begin_at(self, task_id: str) -> float | None:
        marks = self.progress.get(f"talos/task/{task_id}", [])
        return next((t for kind, t, _ in marks if kind == "begin"), None)

    def end_at(self, task_id: str) -> tuple[float, str] | None:
        marks = self.progress.get(f"talos/task/{task_id}", [])
        return next(((t, msg or "") for kind, t, msg in marks if kind == "end"), None)

    async def close(self) -> tuple[float, float]:
        """shutdown, then exit; (shutdown answered, process exited), seconds from `shutdown`
        sent. Kills the process when it does not go."""
        server = self.client._server
        t0 = time.perf_counter()
        answered = exited = math.nan
        try:
            await asyncio.wait_for(self.client.shutdown_async(None), WAIT_S)
            answered = time.perf_counter() - t0
            self.client.exit(None)
            await asyncio.wait_for(server.wait(), WAIT_S)
            exited = time.perf_counter() - t0
        except Exception as exc:  # reported; the process is killed
            print(f"  ! {self.kind}: shutdown failed: {exc!r}", file=sys.stderr)
        if server is not None and server.returncode is None:
            server.kill()
            await server.wait()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.client.stop(), 10)
        return answered, exited


def plain(obj: Any) -> Any:
    """pygls hands unknown notifications over as namedtuples: dicts and lists again."""
    if hasattr(obj, "_asdict"):
        return {k: plain(v) for k, v in obj._asdict().items()}
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    return obj


def rss_kb(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM", "Threads"):
            out[key] = int(value.split()[0])
    out["ChildRSS"] = sum(rss_kb(child)["VmRSS"] for child in children(pid))
    return out


def cpu_s(pid: int) -> float:
    """User + system CPU seconds the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def until_idle(pid: int, quiet: float = 1.0, timeout: float = INDEX_WAIT_S) -> float:
    """Wait until the process has used under 2% of a CPU for `quiet` seconds (the index's
    reading done); returns when it went quiet (perf_counter)."""
    samples: list[tuple[float, float]] = []
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        now = time.perf_counter()
        samples.append((now, cpu_s(pid)))
        past = [(t, c) for t, c in samples if now - t >= quiet]
        if past and samples[-1][1] - past[-1][1] < 0.02 * (now - past[-1][0]):
            return past[-1][0]
        await asyncio.sleep(0.1)
    raise TimeoutError(f"the server did not go idle in {timeout:.0f} s")


def rg_files(root: Path, runs: int = 3) -> float:
    """`rg --files` in `root`, median wall seconds of `runs` (nan without rg)."""
    if shutil.which("rg") is None:
        return math.nan
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(["rg", "--files"], cwd=root, stdout=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (talos-ls's file watcher)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


# --------------------------------------------------------------------------- statistics
def pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[max(0, min(len(s) - 1, math.ceil(q * len(s)) - 1))]


def summary(samples: list[float], scale: float = 1000.0) -> dict[str, Any]:
    """Median, p99 and max, in ms by default."""
    if not samples:
        return {"n": 0}
    return {
        "n": len(samples),
        "median": statistics.median(samples) * scale,
        "p99": pct(samples, 0.99) * scale,
        "max": max(samples) * scale,
        "min": min(samples) * scale,
    }


# --------------------------------------------------------------------------- workspaces
def make_small_workspace(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text(
        '"""The app."""\n\nimport os\n\n\n'
        + "".join(
            f"def handler_{i}(request):\n    return os.path.join('a', str({i}))\n\n\n"
            for i in range(60)
        )
    )
    for i in range(20):
        (root / "src" / f"mod{i}.py").write_text(f"def f{i}(x):\n    return x + {i}\n")
    (root / "README.md").write_text("# small\n")
    return root


OTHER = (
    ("md", "# Notes {i}\n\nSee module {i}.\n"),
    ("json", '{{"id": {i}, "name": "item{i}"}}\n'),
    ("txt", "plain text {i}\n"),
    ("toml", '[section{i}]\nkey = "value{i}"\n'),
)


def make_workspace(root: Path, n: int, per_dir: int = 10) -> int:
    """About `n` files: `per_dir` to a directory, in src/pX/mY/dZ; nine in ten are .py files
    with a couple of defs (one in five with a class), the rest .md/.json/.txt/.toml; a root
    .gitignore and a few ignored files. Returns the number of files written that count."""
    root.mkdir(parents=True)
    (root / ".gitignore").write_text("*.log\nbuild/\n")
    (root / "README.md").write_text("# generated workspace\n")
    (root / "pyproject.toml").write_text('[project]\nname = "generated"\n')
    (root / "build").mkdir()
    for i in range(5):
        (root / "build" / f"out{i}.py").write_text("x = 1\n")
        (root / f"run{i}.log").write_text("log\n")
    written = 3  # .gitignore, README.md, pyproject.toml
    n_dirs = max(1, math.ceil((n - written) / per_dir))
    i = 0
    for d in range(n_dirs):
        where = root / "src" / f"p{d % 20}" / f"m{(d // 20) % 25}" / f"d{d // 500}"
        where.mkdir(parents=True, exist_ok=True)
        for k in range(per_dir):
            if written >= n:
                break
            if k == per_dir - 1:
                ext, text = OTHER[d % len(OTHER)]
                (where / f"data{i}.{ext}").write_text(text.format(i=i))
            else:
                body = (
                    f'"""Module {i}."""\n\n\ndef func_{i}(x):\n    return x + {i % 97}\n\n\n'
                    f"def helper_{i % 500}(y):\n    return y * 2\n"
                )
                if i % 5 == 0:
                    body += f"\n\nclass Thing{i}:\n    def run(self):\n        return {i}\n"
                (where / f"mod{i}.py").write_text(body)
            written += 1
            i += 1
    return written


# --------------------------------------------------------------------------- the bench
class Bench:
    def __init__(self, work: Path, quick: bool) -> None:
        self.work = work
        self.quick = quick
        self.bare_py = work / "bare_server.py"
        self.bare_py.write_text(BARE_SERVER)
        self.model = Model()
        self.small = make_small_workspace(work / "small")
        self.stderr: dict[str, list[str]] = {}
        self.n_sessions = 0
        self.notes: list[str] = []

    def argv(self, kind: str) -> list[str]:
        if kind == "bare":
            return [sys.executable, str(self.bare_py)]
        return [sys.executable, "-m", "talos_ls.server"]

    def options(self, label: str) -> dict[str, Any]:
        return {
            "model": "fake-model",
            "baseUrl": self.model.url,
            "storeUrl": "sqlite:///" + str(self.work / f"store-{label}.db"),
            "prices": {"fake-model": {"input": 1, "cached_input": 0.5, "output": 2}},
            # Never reached: figure 10 replays the task's transcript uncompacted (a server
            # before issue 29 ignores the key).
            "contextWindow": 100_000_000,
        }

    async def session(
        self,
        kind: str,
        folder: Path,
        label: str,
        root: Path = REPO,
        options: dict[str, Any] | None = None,
    ) -> tuple[Session, float]:
        self.n_sessions += 1
        home = self.work / "home" / f"{self.n_sessions}"
        s = Session(kind, home, root)
        rtt = await s.start(self.argv(kind), [folder], {**self.options(label), **(options or {})})
        return s, rtt

    async def finish(self, s: Session, label: str) -> tuple[float, float]:
        out = await s.close()
        lines = [ln for ln in s.client.stderr_lines if ln.strip()]
        if lines:
            self.stderr[f"{s.kind}:{label}"] = lines
        return out

    @staticmethod
    def hosted(s: Session) -> Callable[[], Any]:
        return lambda: s.first_status(lambda st: bool(st.get("folders")))

    @staticmethod
    def indexed(s: Session) -> Callable[[], Any]:
        return lambda: s.first_status(
            lambda st: bool(st.get("folders")) and all(f["index"]["ready"] for f in st["folders"])
        )

    async def wait_index(self, s: Session, timeout: float = INDEX_WAIT_S) -> tuple[float, Any]:
        """The first status with every folder's index ready: (arrival time, status). The
        server reports its status when an index is ready."""
        return await s.until(self.indexed(s), "the index", timeout)

    # ------------------------------------------------------------- 1 and 2
    async def startup(self, reps: int) -> dict[str, Any]:
        print(f"[1,2] initialize and idle RSS, {reps} runs each (+1 warm-up)", flush=True)
        init: dict[str, list[float]] = {"bare": [], "talos": []}
        to_status: list[float] = []
        rss: dict[str, list[dict[str, int]]] = {"bare": [], "talos": []}
        for rep in range(reps + 1):
            order = ("bare", "talos") if rep % 2 else ("talos", "bare")
            for kind in order:
                s, rtt = await self.session(kind, self.small, f"startup-{rep}")
                if kind == "talos":
                    t_status, _ = await s.until(self.hosted(s), "the first status")
                    await self.wait_index(s)
                await asyncio.sleep(0.5)  # idle
                mem = rss_kb(s.pid)
                await self.finish(s, "startup")
                if rep == 0:
                    continue  # warm-up: caches, .pyc
                init[kind].append(rtt)
                rss[kind].append(mem)
                if kind == "talos":
                    to_status.append(t_status - s.t_spawn)
        res = {
            "initialize_ms": {k: summary(v) for k, v in init.items()},
            "spawn_to_first_status_ms": summary(to_status),
            "rss_mb": {
                k: {
                    "median": statistics.median(m["VmRSS"] for m in v) / 1024,
                    "max": max(m["VmRSS"] for m in v) / 1024,
                    "hwm_median": statistics.median(m["VmHWM"] for m in v) / 1024,
                    "threads": statistics.median(m["Threads"] for m in v),
                    "children_median": statistics.median(m["ChildRSS"] for m in v) / 1024,
                }
                for k, v in rss.items()
            },
        }
        res["initialize_ratio"] = res["initialize_ms"]["talos"]["median"] / max(
            res["initialize_ms"]["bare"]["median"], 1e-9
        )
        res["rss_over_bare_mb"] = res["rss_mb"]["talos"]["median"] - res["rss_mb"]["bare"]["median"]
        return res

    # ------------------------------------------------------------------ 3
    async def code_actions(self, n: int) -> dict[str, Any]:
        print(f"[3] codeAction latency, {n} requests a case", flush=True)
        doc = self.small / "src" / "app.py"
        out: dict[str, Any] = {}

        async def measure(s: Session, uri: str) -> list[float]:
            for _ in range(30):  # warm-up
                await s.code_action(uri)
            return [await s.code_action(uri) for _ in range(n)]

        s, _ = await self.session("bare", self.small, "ca-bare")
        uri = s.open_document(doc)
        out["bare"] = summary(await measure(s, uri))
        await self.finish(s, "codeAction")

        s, _ = await self.session("talos", self.small, "ca-talos")
        await self.wait_index(s)
        uri = s.open_document(doc)
        # idle: the start-up's work in threads over too (the model client's preparation, about
        # a second from initialized; figure 9 measures the start-up)
        await asyncio.sleep(max(0.3, s.t_initialized + STARTUP_S - time.perf_counter()))
        out["talos_idle"] = summary(await measure(s, uri))

        # Three tasks streaming: 7 characters a chunk, 2 ms between chunks; long enough to
        # outlast the measurement (checked below).
        chars = 7 * max(3000, n * 10)
        self.model.send(op="clear")
        self.model.send(op="reply", text="x" * chars, delay=0.002, times=3)
        before = self.model.requests()
        ids = [
            (await s.command("talos.task.start", {"prompt": f"stream {i}"}))["task_id"]
            for i in range(3)
        ]
        for tid in ids:
            await s.until(lambda tid=tid: s.begin_at(tid), f"the progress of {tid}")
        requests = (
            await s.until(lambda: (r := self.model.requests()) >= before + 3 and r, "3 streams")
            - before
        )
        await asyncio.sleep(0.3)  # the streams under way
        t0 = time.perf_counter()
        samples = await measure(s, uri)
        t1 = time.perf_counter()
        ended_early = [tid for tid in ids if (e := s.end_at(tid)) and e[0] < t1]
        out["talos_streaming"] = summary(samples)
        out["streaming"] = {
            "tasks": len(ids),
            "model_requests": requests,
            "ended_before_measurement_end": ended_early,
            "measurement_s": t1 - t0,
            "chars_per_reply": chars,
        }
        for tid in ids:
            with contextlib.suppress(Exception):
                await s.command("talos.task.cancel", {"task_id": tid})
        for tid in ids:
            await s.until(lambda tid=tid: s.end_at(tid), f"the end of {tid}")
        await self.finish(s, "codeAction")
        out["ratio_streaming_p99"] = out["talos_streaming"]["p99"] / out["bare"]["p99"]
        out["ratio_idle_p99"] = out["talos_idle"]["p99"] / out["bare"]["p99"]
        if ended_early:
            self.notes.append(f"[3] tasks {ended_early} ended before the measurement did")
        return out

    # ------------------------------------------------------------------ 4 and 5
    async def bare_command(self, samples: int) -> dict[str, Any]:
        s, _ = await self.session("bare", self.small, "cmd-bare")
        times = []
        for i in range(samples + 5):
            t0 = time.perf_counter()
            await s.command("bare.start", {"prompt": PROMPT})
            if i >= 5:
                times.append(time.perf_counter() - t0)
        await self.finish(s, "command")
        return summary(times)

    async def start_one(self, s: Session, uri: str) -> tuple[float, float, str]:
        """One task started; (response, begin) in seconds from the request."""
        arg = {
            "prompt": PROMPT,
            "uri": uri,
            "range": {"start": {"line": 2, "character": 0}, "end": {"line": 9, "character": 0}},
        }
        t0 = time.perf_counter()
        started = await s.command("talos.task.start", arg)
        t1 = time.perf_counter()
        tid = started["task_id"]
        t_begin = await s.until(lambda: s.begin_at(tid), f"the progress of {tid}")
        return t1 - t0, t_begin - t0, tid

    async def task_start(self, size: int, samples: int) -> dict[str, Any]:
        root = self.work / f"ws-{size}"
        t0 = time.perf_counter()
        written = make_workspace(root, size)
        gen_s = time.perf_counter() - t0
        print(
            f"[4] talos.task.start on {written:,} files (generated in {gen_s:.1f} s), "
            f"{samples} samples",
            flush=True,
        )
        target = next(root.glob("src/p0/m0/d0/mod1.py"))
        uri = target.as_uri()
        self.model.send(op="clear")
        self.model.send(op="reply", text="ok", times=samples + 10)
        s, _ = await self.session("talos", root, f"start-{size}")
        # Once, right after initialize: the index is still being built.
        cold_resp, cold_begin, tid = await self.start_one(s, uri)
        cold_index_ready = s.first_status(
            lambda st: bool(st.get("folders")) and st["folders"][0]["index"]["ready"]
        )
        await s.until(lambda: s.end_at(tid), f"the end of {tid}")
        t_ready, st = await self.wait_index(s)
        await asyncio.sleep(0.3)
        resp, begin, ends = [], [], []
        for _ in range(samples):
            r, b, tid = await self.start_one(s, uri)
            end = await s.until(lambda tid=tid: s.end_at(tid), f"the end of {tid}")
            resp.append(r)
            begin.append(b)
            ends.append(end[1])
            await asyncio.sleep(0.1)  # the previous task's tail (status, store writes) settles
        not_done = [m for m in ends if not m.startswith("done")]
        if not_done:
            self.notes.append(f"[4] {size}: {len(not_done)} tasks did not end done: {not_done[:3]}")
        mem = rss_kb(s.pid)
        await self.finish(s, f"start-{size}")
        shutil.rmtree(root, ignore_errors=True)
        return {
            "files_written": written,
            "files_indexed": st["folders"][0]["index"]["files"],
            "index_ready_after_initialized_s": t_ready - s.t_initialized,
            "generate_s": gen_s,
            "response_ms": summary(resp),
            "begin_ms": summary(begin),
            "cold": {
                "response_ms": cold_resp * 1000,
                "begin_ms": cold_begin * 1000,
                "index_ready_at_response": cold_index_ready is not None,
            },
            "prompts": s.prompts,
            "rss_mb_after": mem["VmRSS"] / 1024,
        }

    async def index_ready(self, size: int, reps: int, ca_requests: bool) -> dict[str, Any]:
        root = self.work / f"ws-index-{size}"
        written = make_workspace(root, size)
        print(f"[5] index ready on {written:,} files, {reps} runs", flush=True)
        times, files, rss, read, peak, rg, bare = [], [], [], [], [], [], []
        for rep in range(reps):
            rg.append(rg_files(root))  # the anchors, beside each run
            b, _ = await self.session("bare", root, f"index-bare-{size}-{rep}")
            await asyncio.sleep(0.5)
            bare.append(rss_kb(b.pid)["VmRSS"] / 1024)
            await self.finish(b, f"index-bare-{size}")
            s, _ = await self.session("talos", root, f"index-{size}-{rep}")
            t, st = await self.wait_index(s)
            times.append(t - s.t_initialized)
            files.append(st["folders"][0]["index"]["files"])
            read.append(await until_idle(s.pid) - s.t_initialized)
            mem = rss_kb(s.pid)
            rss.append(mem["VmRSS"] / 1024)
            peak.append(mem["VmHWM"] / 1024)
            await self.finish(s, f"index-{size}")
        out: dict[str, Any] = {
            "files_written": written,
            "files_indexed": files,
            "ready_after_initialized_s": times,
            "rg_files_s": rg,
            "idle_after_initialized_s": read,
            "rss_mb_after": rss,
            "rss_peak_mb": peak,
            "bare_rss_mb": bare,
        }
        if ca_requests:
            # codeAction while the index is being built, in a run of its own, with nothing
            # else sent: for 80% of the shortest build measured above (to CPU idle).
            span = 0.8 * min(read)  # the listing and the symbols
            s, _ = await self.session("talos", root, f"index-ca-{size}")
            uri = s.open_document(next(root.glob("src/p0/m0/d0/mod1.py")))
            during = []
            while time.perf_counter() - s.t_initialized < span:
                during.append(await s.code_action(uri))
            await asyncio.sleep(0.5)
            last = s.statuses[-1][1] if s.statuses else {}
            ready_after = bool(last.get("folders")) and last["folders"][0]["index"]["ready"]
            out["code_action_during_build_ms"] = summary(during)
            out["code_action_during_build_span_s"] = span
            out["index_ready_when_that_ended"] = ready_after
            await self.finish(s, f"index-ca-{size}")
        shutil.rmtree(root, ignore_errors=True)
        return out

    # ------------------------------------------------------------------ 7
    async def proposals(self, samples: int, requests: int, hunks: int = 50) -> dict[str, Any]:
        print(f"[7] proposals: {samples} to diagnostics; codeAction on {hunks} hunks", flush=True)
        root = self.work / "ws-review"
        target = root / "src" / "review.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        base = "".join(f"x_{i} = {i}\n" for i in range(2 * hunks))
        target.write_text(base)
        one = json.dumps(
            {
                "path": "src/review.py",
                "blocks": [{"search": "x_0 = 0\n", "replace": "x_0 = 'zero'\n"}],
            }
        )
        negated = "".join(
            f"x_{i} = {i}\n" if i % 2 else f"x_{i} = -{i}\n" for i in range(2 * hunks)
        )
        many = json.dumps({"path": "src/review.py", "content": negated})
        s, _ = await self.session("talos", root, "review")
        await self.wait_index(s)
        uri = s.open_document(target)
        self.model.send(op="clear")
        to_diagnostics = []
        for n in range(samples + 1):  # the first, untimed, warms up (the model client)
            self.model.send(op="propose", arguments=one)
            t0 = time.perf_counter()
            await s.command("talos.task.start", {"prompt": "zero"})
            t, _, _ = await s.until(
                lambda t0=t0: next(
                    (d for d in s.diagnostics if d[0] > t0 and d[1] == uri and d[2] > 0), None
                ),
                "the diagnostics",
            )
            if n:
                to_diagnostics.append(t - t0)
            (proposal,) = [
                p for p in await s.command("talos.proposal.list", {}) if p["status"] == "pending"
            ]
            await s.command("talos.proposal.reject", {"proposal_id": proposal["id"]})
            await asyncio.sleep(0.1)
        self.model.send(op="propose", arguments=many)
        mark = time.perf_counter()
        await s.command("talos.task.start", {"prompt": "negate"})
        await s.until(
            lambda: next((d for d in s.diagnostics if d[0] > mark and d[2] == hunks), None),
            f"{hunks} diagnostics",
        )
        latencies = []
        for n in range(30 + requests):
            line = (n * 7) % (2 * hunks)
            params = types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                range=types.Range(
                    start=types.Position(line=line, character=0),
                    end=types.Position(line=line, character=0),
                ),
                context=types.CodeActionContext(diagnostics=[]),
            )
            t0 = time.perf_counter()
            await asyncio.wait_for(s.client.text_document_code_action_async(params), WAIT_S)
            if n >= 30:  # after a warm-up
                latencies.append(time.perf_counter() - t0)
        await self.finish(s, "review")
        return {
            "start_to_diagnostics_ms": summary(to_diagnostics),
            "code_action_50_hunks_ms": summary(latencies),
        }

    # ------------------------------------------------------------------ 6
    async def shutdown(self, reps: int) -> dict[str, Any]:
        print(f"[6] shutdown, {reps} runs a case", flush=True)
        cases: dict[str, dict[str, list[float]]] = {
            k: {"answered": [], "exited": []} for k in ("bare", "talos_idle", "talos_running")
        }
        cancelled = []
        for rep in range(reps):
            s, _ = await self.session("bare", self.small, f"sd-bare-{rep}")
            await asyncio.sleep(0.2)
            a, e = await self.finish(s, "shutdown")
            cases["bare"]["answered"].append(a)
            cases["bare"]["exited"].append(e)

            s, _ = await self.session("talos", self.small, f"sd-idle-{rep}")
            await self.wait_index(s)
            await asyncio.sleep(0.2)
            a, e = await self.finish(s, "shutdown")
            cases["talos_idle"]["answered"].append(a)
            cases["talos_idle"]["exited"].append(e)

            self.model.send(op="clear")
            self.model.send(op="hang")
            label = f"sd-run-{rep}"
            s, _ = await self.session("talos", self.small, label)
            await self.wait_index(s)
            before = self.model.send(op="count")["requests"]
            tid = (await s.command("talos.task.start", {"prompt": "think forever"}))["task_id"]
            await s.until(lambda s=s, tid=tid: s.begin_at(tid), "the progress")
            await s.until(lambda n=before: self.model.requests() > n, "the model call")
            await asyncio.sleep(0.2)
            a, e = await self.finish(s, "shutdown")
            cases["talos_running"]["answered"].append(a)
            cases["talos_running"]["exited"].append(e)
            cancelled.append(self.stored_state(label, tid))
        out: dict[str, Any] = {
            k: {"answered_ms": summary(v["answered"]), "exited_ms": summary(v["exited"])}
            for k, v in cases.items()
        }
        out["stored_state_of_running_task"] = cancelled
        return out

    # ------------------------------------------------------------------ 8
    async def task_to_end(self, s: Session, prompt: str) -> float:
        """`talos.task.start` sent -> the task's progress `end` (done), in seconds."""
        t0 = time.perf_counter()
        tid = (await s.command("talos.task.start", {"prompt": prompt}))["task_id"]
        t_end, message = await s.until(lambda: s.end_at(tid), f"the end of {tid}")
        if not message.startswith("done"):
            raise RuntimeError(f"{s.kind}: task {tid} ended {message!r}")
        return t_end - t0

    async def first_task(self, reps: int, wait_s: float, roots: list[Path]) -> dict[str, Any]:
        print(
            f"[8] the first task after start against the second, {reps} starts a case; "
            f"the editor waits {wait_s:g} s after initialized, or not at all",
            flush=True,
        )
        cases = [(root, wait) for root in roots for wait in (wait_s, 0.0)]
        runs: dict[str, dict[str, list[float]]] = {}
        for rep in range(reps + 1):  # the first round, untimed, warms the page cache
            for n, (root, wait) in enumerate(cases):
                key = f"{root}|{wait:g}"
                self.model.send(op="clear")
                self.model.send(op="reply", text="ok", times=3)
                s, _ = await self.session("talos", self.small, f"first-{rep}-{n}", root)
                await asyncio.sleep(max(0.0, s.t_initialized + wait - time.perf_counter()))
                first = await self.task_to_end(s, PROMPT)
                second = await self.task_to_end(s, PROMPT)
                # A third after the same wait: the first's cost against a task that also
                # starts from idle (threads asleep, caches cold) isolates first-time work.
                await asyncio.sleep(wait)
                third = await self.task_to_end(s, PROMPT) if wait else math.nan
                await self.finish(s, "first task")
                if rep:
                    run = runs.setdefault(key, {"first": [], "second": [], "idle": []})
                    run["first"].append(first)
                    run["second"].append(second)
                    run["idle"].append(third)
        out: dict[str, Any] = {"wait_s": wait_s, "cases": {}}
        for key, run in runs.items():
            root, wait = key.split("|")
            out["cases"][key] = {
                "root": root,
                "wait_s": float(wait),
                "first_ms": summary(run["first"]),
                "second_ms": summary(run["second"]),
                "ratio": statistics.median(run["first"]) / statistics.median(run["second"]),
            }
            if float(wait):
                out["cases"][key]["after_same_wait_ms"] = summary(run["idle"])
                out["cases"][key]["ratio_same_wait"] = statistics.median(
                    run["first"]
                ) / statistics.median(run["idle"])
        fresh = []
        for _ in range(reps):
            self.model.send(op="reply", text="ok")
            done = subprocess.run(
                [sys.executable, "-c", FRESH_SDK_CALL, self.model.url],
                capture_output=True,
                text=True,
                check=True,
            )
            fresh.append(float(done.stdout.strip()))
        out["fresh_import_and_call_ms"] = summary(fresh)
        return out

    # ------------------------------------------------------------------ 9
    async def code_action_startup(
        self, reps: int, window_s: float, roots: list[Path]
    ) -> dict[str, Any]:
        print(
            f"[9] codeAction latency in the first {window_s:g} s after initialized, "
            f"{reps} starts a case: bare pygls, talos-ls, talos-ls with a task started at once",
            flush=True,
        )
        doc = self.small / "src" / "app.py"
        cases = [("bare", REPO, False), ("talos", REPO, False), ("talos", REPO, True)]
        cases += [("talos", root, True) for root in roots[1:]]
        samples: dict[str, list[float]] = {}
        empty: dict[str, int] = {}
        grown: dict[str, list[float]] = {}
        for rep in range(reps + 1):  # the first round, untimed, warms the page cache
            for n, (kind, root, task) in enumerate(cases):
                key = kind if kind == "bare" else f"{root}|{'task' if task else 'idle'}"
                s, _ = await self.session(kind, self.small, f"ca-start-{rep}-{n}", root)
                rss0 = rss_kb(s.pid)["VmRSS"]
                uri = s.open_document(doc)
                if task:  # the model answers at once; the task waits for what it needs
                    self.model.send(op="clear")
                    self.model.send(op="reply", text="ok")
                    await s.command("talos.task.start", {"prompt": PROMPT})
                taken = []
                while time.perf_counter() < s.t_initialized + window_s:
                    taken.append(await s.code_action(uri, empty_ok=True))
                    empty[key] = empty.get(key, 0) + bool(rep and s.last_empty)
                    await asyncio.sleep(0.005)
                rss1 = rss_kb(s.pid)["VmRSS"]
                await self.finish(s, "codeAction at start-up")
                if rep:
                    samples.setdefault(key, []).extend(taken)
                    grown.setdefault(key, []).append((rss1 - rss0) / 1024)
        return {
            "window_s": window_s,
            "latency_ms": {k: summary(v) for k, v in samples.items()},
            "empty": empty,
            "rss_growth_in_window_mb": grown,
        }

    # ------------------------------------------------------------------ 10
    async def step_cost(self, reps: int, steps: int, roots: list[Path]) -> dict[str, Any]:
        print(
            f"[10] per-step time of a {steps}-step task (read_file each step) against a bare "
            f"openai-SDK loop sending the same requests, {reps} runs each",
            flush=True,
        )
        arguments = json.dumps({"path": "src/app.py"})
        replay = self.work / "steps-transcript.json"
        times: dict[str, list[list[float]]] = {str(r): [] for r in roots}
        times["bare"] = []
        sizes: dict[str, list[int]] = {}

        def arrivals(since: int) -> list[float]:
            got = self.model.send(op="arrivals", since=since)["arrivals"]
            if len(got) != steps + 1:
                raise RuntimeError(f"[10] {len(got)} model calls, not {steps + 1}")
            return [b - a for a, b in itertools.pairwise(got)]

        for rep in range(reps + 1):  # the first round, untimed, warms up
            for root in roots:
                self.model.send(op="clear")
                self.model.send(op="steps", n=steps, name="read_file", arguments=arguments)
                label = f"steps-{rep}-{roots.index(root)}"
                s, _ = await self.session(
                    "talos", self.small, label, root, {"maxSteps": steps + 10}
                )
                await self.wait_index(s)
                await asyncio.sleep(0.5)
                since = self.model.requests()
                tid = (await s.command("talos.task.start", {"prompt": PROMPT}))["task_id"]
                _, message = await s.until(lambda s=s, tid=tid: s.end_at(tid), "the task's end")
                if not message.startswith("done"):
                    raise RuntimeError(f"[10] the task ended {message!r}")
                step_times = arrivals(since)
                await self.finish(s, "steps")
                if rep:
                    times[str(root)].append(step_times)
                if rep == 0 and root == REPO:
                    row = self.stored_row(label, tid)
                    sys.path.insert(0, str(REPO))
                    from talos_ls.agent import tools

                    replay.write_text(
                        json.dumps(
                            {"transcript": row["transcript"], "tools": tools.schemas(), "first": 2}
                        )
                    )
                    sizes["talos"] = self.model.send(op="sizes", since=since)["sizes"]
            self.model.send(op="clear")
            self.model.send(op="steps", n=steps, name="read_file", arguments=arguments)
            since = self.model.requests()
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-c", BARE_SDK_LOOP, str(replay), self.model.url
            )
            if await proc.wait():
                raise RuntimeError("[10] the bare SDK loop failed")
            if rep == 0:
                sizes["bare"] = self.model.send(op="sizes", since=since)["sizes"]
            if rep:
                times["bare"].append(arrivals(since))
        medians = {
            who: [statistics.median(run[k] for run in runs) for k in range(steps)]
            for who, runs in times.items()
        }
        return {
            "steps": steps,
            "reps": reps,
            "roots": [str(r) for r in roots],
            "median_step_ms": {who: [v * 1000 for v in m] for who, m in medians.items()},
            "same_request_sizes": sizes.get("talos") == sizes.get("bare"),
            "request_bytes_first_last": {k: [v[0], v[-1]] for k, v in sizes.items()},
        }

    def stored_row(self, label: str, task_id: str) -> dict[str, Any]:
        sys.path.insert(0, str(REPO))
        from talos_ls.store import open_store

        store = open_store("sqlite:///" + str(self.work / f"store-{label}.db"))
        try:
            row = store.task_get(task_id)
            assert row is not None
            return row
        finally:
            store.close()

    def stored_state(self, label: str, task_id: str) -> str | None:
        sys.path.insert(0, str(REPO))
        from talos_ls.store import open_store

        store = open_store("sqlite:///" + str(self.work / f"store-{label}.db"))
        try:
            row = store.task_get(task_id)
            return None if row is None else row["state"]
        finally:
            store.close()

    def close(self) -> None:
        self.model.close()


# --------------------------------------------------------------------------- report
def machine() -> dict[str, Any]:
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem_kb = 0
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    from importlib.metadata import version

    return {
        "nproc": os.cpu_count(),
        "cpu": model,
        "mem_gib": round(mem_kb / 1024**2, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "pygls": version("pygls"),
        "loadavg": os.getloadavg(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def ms(v: float) -> str:
    return f"{v:,.1f}"


def yes(ok: bool) -> str:
    return "met" if ok else "NOT MET"


def table(r: dict[str, Any]) -> list[str]:
    rows = ["| figure | talos-ls | bare pygls | ratio | target | |", "|---|---:|---:|---:|---|---|"]
    st = r.get("startup")
    if st:
        t, b = st["initialize_ms"]["talos"], st["initialize_ms"]["bare"]
        rows.append(
            f"| 1. initialize round trip, median (p99) ms | {ms(t['median'])} "
            f"({ms(t['p99'])}) | {ms(b['median'])} ({ms(b['p99'])}) | "
            f"{st['initialize_ratio']:.2f}x | <= 1.5x bare | "
            f"{yes(st['initialize_ratio'] <= 1.5)} |"
        )
        s = st["spawn_to_first_status_ms"]
        rows.append(
            f"| 1. spawn -> first talos/status (host open), median ms | {ms(s['median'])}"
            f" | {ms(b['median'])} (initialize) | {s['median'] / b['median']:.2f}x | | |"
        )
        mt, mb = st["rss_mb"]["talos"], st["rss_mb"]["bare"]
        rows.append(
            f"| 2. idle RSS, median MB | {mt['median']:.1f} | {mb['median']:.1f} | "
            f"+{st['rss_over_bare_mb']:.1f} MB ({mt['median'] / mb['median']:.2f}x) | "
            f"<= bare + 40 MB | {yes(st['rss_over_bare_mb'] <= 40)} |"
        )
        total = mt["median"] + mt["children_median"]
        rows.append(
            f"| 2. idle RSS with its file watcher's process, median MB | {total:.1f} | "
            f"{mb['median']:.1f} | +{total - mb['median']:.1f} MB | | |"
        )
    ca = r.get("code_action")
    if ca:
        b = ca["bare"]
        for key, name, target in (
            ("talos_idle", "idle", None),
            ("talos_streaming", "3 tasks streaming", 25.0),
        ):
            t = ca[key]
            rows.append(
                f"| 3. codeAction p50 / p99 ms, {name} ({t['n']} req) | "
                f"{ms(t['median'])} / {ms(t['p99'])} | {ms(b['median'])} / {ms(b['p99'])}"
                f" | {t['median'] / b['median']:.2f}x / {t['p99'] / b['p99']:.2f}x | "
                + (f"p99 <= {target:.0f} ms | {yes(t['p99'] <= target)} |" if target else "| |")
            )
    cmd = r.get("bare_command_ms")
    for size, v in sorted((r.get("task_start") or {}).items(), key=lambda kv: int(kv[0])):
        target = 20.0 if int(size) <= 10_000 else 50.0
        bm = cmd["median"] if cmd else math.nan
        for key, what in (("response_ms", "response"), ("begin_ms", "progress begin")):
            t = v[key]
            rows.append(
                f"| 4. task.start -> {what}, {int(size):,} files, p50 (p99) ms, "
                f"index ready | {ms(t['median'])} ({ms(t['p99'])}) | {ms(bm)} (command) "
                f"| {t['median'] / bm:.1f}x | p50 <= {target:.0f} ms | "
                f"{yes(t['median'] <= target)} |"
            )
        c = v["cold"]
        rows.append(
            f"| 4. task.start right after initialize, {int(size):,} files, response / "
            f"begin ms | {ms(c['response_ms'])} / {ms(c['begin_ms'])} | | | "
            f"p50 <= {target:.0f} ms | {yes(c['response_ms'] <= target)} (once) |"
        )
    ix = r.get("index_ready")
    if ix:
        times = ix["ready_after_initialized_s"]
        ready, rg = statistics.median(times), statistics.median(ix["rg_files_s"])
        rows.append(
            f"| 5. initialized -> index.ready, {ix['files_written']:,} files "
            f"(indexed {ix['files_indexed'][0]:,}), median of {len(times)} s | "
            f"{ready:.2f} | {rg:.2f} (`rg --files`) | {ready / rg:.1f}x | <= 3x `rg --files` | "
            f"{yes(ready <= 3 * rg)} |"
        )
        idle = statistics.median(ix["idle_after_initialized_s"])
        rows.append(
            f"| 5. initialized -> the symbols read too (CPU idle), s | {idle:.2f} | | | | |"
        )
        mem, bare = statistics.median(ix["rss_mb_after"]), statistics.median(ix["bare_rss_mb"])
        rows.append(
            f"| 5. RSS then, median MB (peak {statistics.median(ix['rss_peak_mb']):.1f}) | "
            f"{mem:.1f} | {bare:.1f} | +{mem - bare:.1f} MB | <= bare + 80 MB | "
            f"{yes(mem - bare <= 80)} |"
        )
        if "code_action_during_build_ms" in ix:
            d = ix["code_action_during_build_ms"]
            rows.append(
                f"| 5. codeAction p50 / p99 / max ms while that index builds ({d['n']} req) | "
                f"{ms(d['median'])} / {ms(d['p99'])} / {ms(d['max'])} | | | | |"
            )
    sd = r.get("shutdown")
    if sd:
        b = sd["bare"]["exited_ms"]
        for key, name in (("talos_running", "a task running"), ("talos_idle", "idle")):
            t = sd[key]["exited_ms"]
            rows.append(
                f"| 6. shutdown sent -> exited, {name}, median (max) ms | "
                f"{ms(t['median'])} ({ms(t['max'])}) | {ms(b['median'])} ({ms(b['max'])})"
                f" | {t['median'] / b['median']:.1f}x | | |"
            )
    pr = r.get("proposals")
    if pr:
        d, c = pr["start_to_diagnostics_ms"], pr["code_action_50_hunks_ms"]
        rows.append(
            f"| 7. task.start -> the proposal's diagnostics, p50 (p99) ms | {ms(d['median'])} "
            f"({ms(d['p99'])}) | | | model's proposal -> diagnostics <= 50 ms | "
            f"{yes(d['median'] <= 50)} (an upper bound) |"
        )
        rows.append(
            f"| 7. codeAction p50 / p99 ms, 50 pending hunks ({c['n']} req) | "
            f"{ms(c['median'])} / {ms(c['p99'])} | | | p99 <= 25 ms | {yes(c['p99'] <= 25)} |"
        )
    rows.extend(step_rows(r))
    return rows


def slope(ys: list[float], first: int) -> float:
    """Least squares slope of ys[k] over k (steps numbered from `first`)."""
    xs = list(range(first, first + len(ys)))
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )


def step_rows(r: dict[str, Any]) -> list[str]:
    """Figures 8, 9 and 10 (issue 30)."""
    rows = []
    ft = r.get("first_task")
    if ft:
        for case in ft["cases"].values():
            label = "" if case["root"] == str(REPO) else f" ({case['root']})"
            waited = (
                f"the editor waited {case['wait_s']:g} s after initialized"
                if case["wait_s"]
                else "started at once after initialized"
            )
            f, sec = case["first_ms"], case["second_ms"]
            target = case["wait_s"] and case["root"] == str(REPO)
            rows.append(
                f"| 8. first task / second, start -> done, {waited}{label}, median (max) ms | "
                f"{ms(f['median'])} ({ms(f['max'])}) | {ms(sec['median'])} ({ms(sec['max'])}) "
                f"(the second) | {case['ratio']:.2f}x | "
                + (f"<= 1.3x | {yes(case['ratio'] <= 1.3)} |" if target else "| |")
            )
            if "ratio_same_wait" in case:
                t = case["after_same_wait_ms"]
                rows.append(
                    f"| 8. the same first task / a third, begun after the same "
                    f"{case['wait_s']:g} s wait{label}, median (max) ms | "
                    f"{ms(f['median'])} ({ms(f['max'])}) | "
                    f"{ms(t['median'])} ({ms(t['max'])}) (the third) | "
                    f"{case['ratio_same_wait']:.2f}x | "
                    + (f"<= 1.3x | {yes(case['ratio_same_wait'] <= 1.3)} |" if target else "| |")
                )
        fr = ft["fresh_import_and_call_ms"]
        rows.append(
            f"| 8. anchor: a fresh process importing openai and making one call, median ms | "
            f"{ms(fr['median'])} | | | | |"
        )
    cs = r.get("code_action_startup")
    if cs:
        lat, b = cs["latency_ms"], cs["latency_ms"]["bare"]
        for key, t in lat.items():
            if key == "bare":
                continue
            root, case = key.split("|")
            label = "" if root == str(REPO) else f" ({root})"
            what = "a task started at once" if case == "task" else "no task"
            grew = statistics.median(cs["rss_growth_in_window_mb"][key])
            target = root == str(REPO)
            rows.append(
                f"| 9. codeAction p50 / p99 / max ms in the first {cs['window_s']:g} s after "
                f"initialized, {what}{label} ({t['n']} req; RSS +{grew:.0f} MB meanwhile) | "
                f"{ms(t['median'])} / {ms(t['p99'])} / {ms(t['max'])} | "
                f"{ms(b['median'])} / {ms(b['p99'])} / {ms(b['max'])} | "
                f"{t['p99'] / b['p99']:.2f}x (p99) | "
                + (f"p99 <= 25 ms | {yes(t['p99'] <= 25)} |" if target else "| |")
            )
    sc = r.get("step_cost")
    if sc:
        med = sc["median_step_ms"]
        bare = med["bare"]
        for root in sc["roots"]:
            talos = med[root]
            over = [t - b for t, b in zip(talos, bare, strict=True)]
            label = "" if root == str(REPO) else f" ({root})"
            for k in (5, sc["steps"]):
                window = over[max(0, k - 3) : k + 2]
                ok = k != sc["steps"] or root != str(REPO)
                rows.append(
                    f"| 10. step {k} of {sc['steps']}{label}: median ms (overhead; over steps "
                    f"{max(1, k - 2)}-{min(sc['steps'], k + 2)}) | {talos[k - 1]:.2f} | "
                    f"{bare[k - 1]:.2f} (bare SDK loop) | {over[k - 1]:+.2f} ms "
                    f"({statistics.fmean(window):+.2f}) | "
                    + ("| |" if ok else f"<= 2 ms | {yes(over[k - 1] <= 2)} |")
                )
            rows.append(
                f"| 10. slope from step 5 to {sc['steps']}{label}, µs a step: talos / bare / "
                f"overhead | {slope(talos[4:], 5) * 1000:+.0f} | {slope(bare[4:], 5) * 1000:+.0f}"
                f" | {slope(over[4:], 5) * 1000:+.0f} | flat | |"
            )
        rows.append(
            f"| 10. the same requests (body sizes equal at every step) | "
            f"{yes(sc['same_request_sizes'])} | bytes first / last: "
            f"{sc['request_bytes_first_last']} | | | |"
        )
    return rows


async def run(args: argparse.Namespace) -> dict[str, Any]:
    sizes = (
        [int(x) for x in args.sizes.split(",")]
        if args.sizes
        else ([500, 2000] if args.quick else [10_000, 100_000])
    )
    q = args.quick
    results: dict[str, Any] = {"machine": machine(), "sizes": sizes, "quick": q}
    work = Path(tempfile.mkdtemp(prefix="lsp-bench-"))
    bench = Bench(work, q)
    only = (
        set(args.only.split(",")) if args.only else {"1", "3", "4", "5", "6", "7", "8", "9", "10"}
    )
    roots = [REPO, *(Path(c).resolve() for c in args.compare or [])]
    try:
        if "1" in only:
            results["startup"] = await bench.startup(3 if q else 10)
        if "3" in only:
            results["code_action"] = await bench.code_actions(100 if q else 500)
        samples = 5 if q else max(20, args.samples)
        if "4" in only:
            results["bare_command_ms"] = await bench.bare_command(samples * 2)
            results["task_start"] = {str(n): await bench.task_start(n, samples) for n in sizes}
        if "5" in only:
            results["index_ready"] = await bench.index_ready(max(sizes), 1 if q else 3, True)
        if "6" in only:
            results["shutdown"] = await bench.shutdown(2 if q else 5)
        if "7" in only:
            results["proposals"] = await bench.proposals(5 if q else 20, 100 if q else 500)
        if "8" in only:
            results["first_task"] = await bench.first_task(2 if q else 10, args.wait, roots)
        if "9" in only:
            results["code_action_startup"] = await bench.code_action_startup(
                2 if q else 5, 3.0, roots
            )
        if "10" in only:
            results["step_cost"] = await bench.step_cost(2 if q else 5, 50, roots)
    finally:
        wind_up(bench, results, work, args.keep)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        help="workspace sizes for figures 4 and 5, comma separated "
        "(default 10000,100000; --quick: 500,2000)",
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run: few repetitions")
    parser.add_argument("--samples", type=int, default=20, help="task starts per size (>= 20)")
    parser.add_argument("--only", help="figures to run, e.g. 1,3 (2 comes with 1)")
    parser.add_argument("--json", metavar="PATH", help="write every figure here")
    parser.add_argument(
        "--wait", type=float, default=2.0, help="figure 8: seconds the editor waits (2)"
    )
    parser.add_argument(
        "--compare",
        action="append",
        metavar="DIR",
        help="figures 8 and 10: also a checkout of talos_ls there (PYTHONPATH), e.g. an "
        "earlier commit's `git archive`",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()
    results = asyncio.run(run(args))
    m = results["machine"]
    print()
    print(
        f"{m['nproc']} CPUs ({m['cpu']}), {m['mem_gib']} GiB, Linux {m['kernel']}, Python "
        f"{m['python']}, pygls {m['pygls']}, {m['date']}, load average "
        f"{m['loadavg'][0]:.2f} at the start, {results['loadavg_end'][0]:.2f} at the end"
    )
    print("\n".join(table(results)))
    return finish(results, args.json)


def wind_up(bench: Any, results: dict[str, Any], work: Path, keep: bool) -> None:
    """Stop the servers; keep what they wrote on stderr, the notes and the load at the end."""
    bench.close()
    results["server_stderr"] = bench.stderr
    results["notes"] = bench.notes
    results["loadavg_end"] = os.getloadavg()
    if not keep:
        shutil.rmtree(work, ignore_errors=True)


def finish(results: dict[str, Any], json_path: str | None) -> int:
    """The run's notes and what the server wrote on stderr; the results as JSON if asked."""
    for note in results["notes"]:
        print("note:", note)
    for where, lines in results["server_stderr"].items():
        print(f"server stderr ({where}), {len(lines)} lines; first:")
        for line in lines[:8]:
            print("   ", line[:200])
    if json_path:
        Path(json_path).write_text(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
