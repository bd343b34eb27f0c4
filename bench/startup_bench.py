"""Start-up: what `talos --version`, `--help`, `talos completion` and `talos-ls` cost before they
answer, beside their anchors measured in the same run (issue 30).

1. CPU (user + system) of one process, from spawn to exit: the anchors `python -c pass`,
   `python -c "import pygls"` and the import a bare pygls server makes (`from pygls.lsp.server
   import LanguageServer`), then `talos --version`, `talos --help`, `talos run --help`,
   `talos completion bash` and `python -c "import talos_ls.server"`.
2. `talos-ls` and a bare pygls server over stdio, driven by a raw JSON-RPC client: wall time
   from spawn to the `initialize` response, and the server's CPU until then; for talos-ls,
   also to the first `talos/status` that lists the folder (store open, host started). In
   starts of their own, codeActions from `initialized` on, one every 10 ms, each timed to its
   answer: how the event loop answers while the host's modules load.
3. `-X importtime` of `import talos_ls.server` after pygls and lsprotocol are imported: the
   modules of Talos loaded before `initialize` can be answered.

Each figure is measured with bytecode cached (every `.pyc` written beforehand, as after a
`pip install`) and with Talos's own modules compiled at every start (the dependencies'
cached): an editable checkout under `PYTHONDONTWRITEBYTECODE=1`, as on this machine. Both use
a `PYTHONPYCACHEPREFIX` of their own in a temporary directory, so the checkout's
`__pycache__` plays no part. The runs of all commands alternate, N rounds.

    .venv/bin/python bench/startup_bench.py                     # this checkout, 21 rounds
    .venv/bin/python bench/startup_bench.py --checkout before=/tmp/talos-main --rounds 31
    .venv/bin/python bench/startup_bench.py --json out.json
    .venv/bin/python bench/startup_bench.py --lsp-rounds 0    # only the CPU figures (and 3.)

`--checkout LABEL=DIR` (repeatable) measures another source tree with this virtualenv (e.g.
`git archive main | tar -x -C /tmp/talos-main`): it goes first on `PYTHONPATH`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from importlib import metadata
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
TALOS = str(Path(PY).parent / "talos")
TALOS_LS = str(Path(PY).parent / "talos-ls")
BARE_SERVER = """
from lsprotocol import types
from pygls.lsp.server import LanguageServer

server = LanguageServer("bare", "0")


@server.feature(types.TEXT_DOCUMENT_CODE_ACTION)
def code_action(ls, params):
    return []


server.start_io()
"""
BARE_PROBES = 30  # codeActions sent to the bare server after `initialized`
PROBE_EVERY_S = 0.01  # one codeAction every 10 ms (or when the last is answered, if later)
ANCHORS = {
    "python -c pass": ["-c", "pass"],
    'python -c "import pygls"': ["-c", "import pygls"],
    "bare pygls server's import": ["-c", "from pygls.lsp.server import LanguageServer"],
}
COMMANDS = {
    "talos --version": [TALOS, "--version"],
    "talos --help": [TALOS, "--help"],
    "talos run --help": [TALOS, "run", "--help"],
    "talos completion bash": [TALOS, "completion", "bash"],
    'python -c "import talos_ls.server"': ["-c", "import talos_ls.server"],
}
MODES = ("cached", "Talos uncached")
WAIT_S = 60.0


def env_for(prefix: Path, checkout: Path, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TALOS_", "XDG_"))}
    env.update(
        {
            "PYTHONPYCACHEPREFIX": str(prefix),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONPATH": str(checkout),
            "XDG_CONFIG_HOME": str(home / "config"),
            "XDG_STATE_HOME": str(home / "state"),
            "XDG_DATA_HOME": str(home / "data"),
            "XDG_CACHE_HOME": str(home / "cache"),
            "OPENAI_API_KEY": "sk-test-not-a-real-key-000000000000",
        }
    )
    return env


def cpu_ms(argv: list[str], env: dict[str, str]) -> float:
    """User + system CPU of one run of `python argv`, in ms."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([PY, *argv], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return 1000 * (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)


# ------------------------------------------------------------------ a raw LSP client
def _send(proc: subprocess.Popen, message: dict[str, Any]) -> None:
    body = json.dumps(message).encode()
    assert proc.stdin is not None
    proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    proc.stdin.flush()


def _receive(proc: subprocess.Popen) -> dict[str, Any]:
    assert proc.stdout is not None
    length = 0
    while True:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("the server closed its stdout")
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    return json.loads(proc.stdout.read(length))


def _until(proc: subprocess.Popen, done) -> dict[str, Any]:
    """Messages until `done(message)`; the server's requests are answered with null."""
    while True:
        message = _receive(proc)
        if "method" in message and "id" in message:
            _send(proc, {"jsonrpc": "2.0", "id": message["id"], "result": None})
        if done(message):
            return message


def _cpu_of(pid: int) -> float:
    """User + system CPU of a running process so far, in ms (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return 1000 * (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def lsp_start(
    argv: list[str], env: dict[str, str], folder: Path, status: bool, probe: bool
) -> dict[str, Any]:
    """Spawn -> initialize response (wall ms, the server's CPU ms then); with `status`, spawn ->
    the first talos/status that lists a folder. With `probe`, codeActions from `initialized`
    on, one every `PROBE_EVERY_S`, each timed to its answer: until that status (talos-ls), or
    `BARE_PROBES` of them."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [PY, *argv], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, cwd=folder,
    )  # fmt: skip
    guard = threading.Timer(WAIT_S, proc.kill)
    guard.start()
    try:
        uri = folder.as_uri()
        params = {
            "processId": os.getpid(),
            "rootUri": uri,
            "capabilities": {},
            "workspaceFolders": [{"uri": uri, "name": folder.name}],
        }
        _send(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
        _until(proc, lambda m: m.get("id") == 1 and "method" not in m)
        out = {"initialize_ms": 1000 * (time.perf_counter() - t0), "cpu_ms": _cpu_of(proc.pid)}
        _send(proc, {"jsonrpc": "2.0", "method": "initialized", "params": {}})
        action = {
            "textDocument": {"uri": (folder / "src" / "app.py").as_uri()},
            "range": {"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 0}},
            "context": {"diagnostics": []},
        }
        latencies: list[float] = []
        sent = 0.0

        def answer_to(ask: int | None, message: dict[str, Any]) -> bool:
            """Whether `message` answers request `ask` (None: whether the status came)."""
            method, params = message.get("method"), message.get("params") or {}
            if method == "talos/status" and params.get("folders"):
                out.setdefault("status_ms", 1000 * (time.perf_counter() - t0))
            if ask is None:
                return "status_ms" in out
            return message.get("id") == ask and method is None

        while probe and (("status_ms" not in out) if status else len(latencies) < BARE_PROBES):
            ask = len(latencies) + 10
            time.sleep(max(0.0, sent + PROBE_EVERY_S - time.perf_counter()))
            sent = time.perf_counter()
            request = {"jsonrpc": "2.0", "id": ask, "method": "textDocument/codeAction"}
            _send(proc, {**request, "params": action})
            _until(proc, lambda m, ask=ask: answer_to(ask, m))
            latencies.append(1000 * (time.perf_counter() - sent))
        if probe:
            out["actions_ms"] = latencies
        elif status:
            _until(proc, lambda m: answer_to(None, m))
        _send(proc, {"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
        _until(proc, lambda m: m.get("id") == 2 and "method" not in m)
        _send(proc, {"jsonrpc": "2.0", "method": "exit"})
        proc.wait(WAIT_S)
        return out
    finally:
        guard.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ------------------------------------------------------------------ -X importtime
def import_tree(env: dict[str, str], runs: int = 7, floor_ms: float = 2.0) -> list[tuple]:
    """(depth, module, median cumulative ms, median self ms) of what `import talos_ls.server`
    loads once pygls and lsprotocol are loaded; modules of at least `floor_ms`."""
    code = (
        "import lsprotocol.types, pygls.lsp.server, sys\n"
        "sys.stderr.write('MARK\\n')\nimport talos_ls.server\n"
    )
    cum: dict[str, list[int]] = {}
    own: dict[str, list[int]] = {}
    order: list[tuple[str, int]] = []
    for _ in range(runs):
        run = subprocess.run([PY, "-X", "importtime", "-c", code], env=env, capture_output=True)
        for line in run.stderr.decode().split("MARK\n", 1)[1].splitlines():
            if not line.startswith("import time:") or "[us]" in line:
                continue
            self_us, cum_us, name = line[len("import time:") :].split("|")
            module = name.strip()
            if module not in cum:
                order.append((module, (len(name) - len(name.lstrip()) - 1) // 2))
                cum[module], own[module] = [], []
            cum[module].append(int(cum_us))
            own[module].append(int(self_us))
    rows = []
    for module, depth in order:
        c = statistics.median(cum[module]) / 1000
        if c >= floor_ms:
            rows.append((depth, module, c, statistics.median(own[module]) / 1000))
    return rows


# ------------------------------------------------------------------ the run
def prepare(
    root: Path, checkouts: dict[str, Path], folder: Path, bare: Path
) -> dict[tuple[str, str], dict[str, str]]:
    """An environment per (checkout, mode), each with its own bytecode cache: warmed by one run
    of every command and one start of each server (to its first status: what loads later is
    cached too) that write it; for "Talos uncached", Talos's own part then deleted."""
    envs = {}
    for label, checkout in checkouts.items():
        for mode in MODES:
            prefix = root / "pyc" / label / mode.replace(" ", "-")
            env = env_for(prefix, checkout, root / "home")
            warm = {**env, "PYTHONDONTWRITEBYTECODE": ""}
            for argv in [*ANCHORS.values(), *COMMANDS.values(), [TALOS_LS, "--version"]]:
                subprocess.run([PY, *argv], env=warm, capture_output=True)
            subprocess.run([PY, "-m", "compileall", "-q", str(checkout / "talos_ls")], env=warm)
            lsp_start([str(bare)], warm, folder, status=False, probe=False)
            lsp_start([TALOS_LS], warm, folder, status=True, probe=False)
            if mode == "Talos uncached":
                shutil.rmtree(prefix / str(checkout / "talos_ls").lstrip("/"))
            envs[label, mode] = env
    return envs


def measure(checkouts: dict[str, Path], rounds: int, lsp_rounds: int) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="talos-startup-"))
    here = Path.cwd()
    os.chdir(root)  # `python -c` puts the working directory first on sys.path: not a checkout
    try:
        folder = root / "workspace"
        (folder / "src").mkdir(parents=True)
        (folder / ".git").mkdir()
        (folder / "src" / "app.py").write_text("def main():\n    return 1\n")
        bare = root / "bare_server.py"
        bare.write_text(BARE_SERVER)
        envs = prepare(root, checkouts, folder, bare)
        cpu: dict[str, list[float]] = {}
        for _ in range(rounds):
            for (label, mode), env in envs.items():
                for name, argv in ANCHORS.items():
                    cpu.setdefault(f"{mode}|anchor|{name}", []).append(cpu_ms(argv, env))
                for name, argv in COMMANDS.items():
                    cpu.setdefault(f"{mode}|{label}|{name}", []).append(cpu_ms(argv, env))
        lsp: dict[str, list[dict]] = {}
        for _ in range(lsp_rounds):
            for (label, mode), env in envs.items():
                for probe, suffix in ((False, ""), (True, "|probed")):
                    lsp.setdefault(f"{mode}|anchor|bare pygls{suffix}", []).append(
                        lsp_start([str(bare)], env, folder, status=False, probe=probe)
                    )
                    lsp.setdefault(f"{mode}|{label}|talos-ls{suffix}", []).append(
                        lsp_start([TALOS_LS], env, folder, status=True, probe=probe)
                    )
        trees = {label: import_tree(envs[label, "cached"]) for label in checkouts}
    finally:
        os.chdir(here)
        shutil.rmtree(root, ignore_errors=True)
    return {
        "cpu_ms": {k: statistics.median(v) for k, v in cpu.items()},
        "lsp_ms": {k: _summary(v) for k, v in lsp.items()},
        "import_tree": trees,
    }


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The median of each figure over the runs; the codeAction latencies of every run pooled
    (count, median, 99th percentile, max)."""
    figures = [f for f in runs[0] if f != "actions_ms"]
    out: dict[str, Any] = {f: statistics.median(r[f] for r in runs) for f in figures}
    out.update({f"{f}_min": min(r[f] for r in runs) for f in figures})
    if "actions_ms" not in runs[0]:
        return out
    pooled = sorted(ms for r in runs for ms in r["actions_ms"])
    out["actions"] = len(pooled)
    out["action_p50_ms"] = statistics.median(pooled)
    out["action_p99_ms"] = pooled[min(len(pooled) - 1, int(len(pooled) * 0.99))]
    out["action_max_ms"] = pooled[-1]
    return out


def machine() -> dict[str, Any]:
    cpu = ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "pygls": metadata.version("pygls"),
        "lsprotocol": metadata.version("lsprotocol"),
        "commit": commit,
        "loadavg_start": os.getloadavg(),
    }


def report(results: dict[str, Any], checkouts: dict[str, Path]) -> None:
    m = results["machine"]
    print(
        f"{m['date']}; {m['cpus']} x {m['cpu']}; Linux {m['kernel']}; Python {m['python']}; "
        f"pygls {m['pygls']}, lsprotocol {m['lsprotocol']}; commit {m['commit']}; load "
        f"average {m['loadavg_start'][0]:.2f} at the start, {m['loadavg_end'][0]:.2f} at the end"
    )
    if results["cpu_ms"]:
        _report_cpu(results, checkouts)
    if results["lsp_ms"]:
        _report_lsp(results, checkouts)
    for label, rows in results["import_tree"].items():
        print(
            f"\n`import talos_ls.server` after pygls, {label}, cached (median cumulative / self ms)"
        )
        for depth, module, c, s in rows:
            if module.startswith("talos_ls") or depth <= 1:
                print(f"{'  ' * depth}{module}: {c:.1f} / {s:.1f}")


def _report_cpu(results: dict[str, Any], checkouts: dict[str, Path]) -> None:
    cpu = results["cpu_ms"]
    for mode in MODES:
        base = cpu[f"{mode}|anchor|python -c pass"]
        print(f"\nCPU ms (median of {results['rounds']}), {mode}; x = over `python -c pass`")
        print("| process | " + " | ".join(checkouts) + " |")
        print("|---|" + "---:|" * len(checkouts))
        for name in ANCHORS:
            value = cpu[f"{mode}|anchor|{name}"]
            rest = " |" * (len(checkouts) - 1)
            print(f"| {name} (anchor) | {value:.1f} ({value / base:.2f}x) |{rest}")
        for name in COMMANDS:
            cells = [cpu[f"{mode}|{label}|{name}"] for label in checkouts]
            print(f"| {name} | " + " | ".join(f"{c:.1f} ({c / base:.2f}x)" for c in cells) + " |")


def _report_lsp(results: dict[str, Any], checkouts: dict[str, Path]) -> None:
    lsp = results["lsp_ms"]
    print(
        f"\nLSP start, {results['lsp_rounds']} starts: wall ms, median [min] (the server's CPU "
        "ms then, median). In other starts, codeActions from `initialized` on, one every "
        f"{PROBE_EVERY_S * 1000:.0f} ms, each timed to its answer (talos-ls: until the first "
        "status listing the folder; bare: 30), pooled: count, p50 / p99 / max ms"
    )
    print("| mode | server | spawn -> initialize | spawn -> first talos/status | codeActions |")
    print("|---|---|---:|---:|---:|")

    def actions(t: dict[str, Any]) -> str:
        return (
            f"{t['actions']}: {t['action_p50_ms']:.1f} / {t['action_p99_ms']:.1f} / "
            f"{t['action_max_ms']:.1f}"
        )

    for mode in MODES:
        bare = lsp[f"{mode}|anchor|bare pygls"]
        probed = lsp[f"{mode}|anchor|bare pygls|probed"]
        print(
            f"| {mode} | bare pygls (anchor) | {bare['initialize_ms']:.0f} "
            f"[{bare['initialize_ms_min']:.0f}] ({bare['cpu_ms']:.0f}) | | {actions(probed)} |"
        )
        for label in checkouts:
            t = lsp[f"{mode}|{label}|talos-ls"]
            probed = lsp[f"{mode}|{label}|talos-ls|probed"]
            print(
                f"| {mode} | talos-ls, {label} | {t['initialize_ms']:.0f} "
                f"[{t['initialize_ms_min']:.0f}] ({t['cpu_ms']:.0f}); "
                f"{t['initialize_ms'] / bare['initialize_ms']:.2f}x bare | {t['status_ms']:.0f} "
                f"[{t['status_ms_min']:.0f}] | {actions(probed)} |"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=21, help="CPU runs of each command")
    parser.add_argument("--lsp-rounds", type=int, default=9, help="starts of each server")
    parser.add_argument("--checkout", action="append", default=[], metavar="LABEL=DIR")
    parser.add_argument("--json", metavar="PATH", help="also write the results here")
    args = parser.parse_args()
    checkouts = {"this": REPO}
    for item in args.checkout:
        label, _, where = item.partition("=")
        checkouts[label] = Path(where).resolve()
    results: dict[str, Any] = {"machine": machine(), "rounds": args.rounds}
    results["lsp_rounds"] = args.lsp_rounds
    results.update(measure(checkouts, args.rounds, args.lsp_rounds))
    results["machine"]["loadavg_end"] = os.getloadavg()
    report(results, checkouts)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
