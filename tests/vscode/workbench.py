"""The real VS Code workbench, headless: code-server (VS Code 1.100 from npm, installed by
`clients/vscode/e2e/setup.sh`) with a fresh profile, driven by Playwright over Debian's
Chromium. What the test needs is found here or the test skips with the command that provides
it (a failure under TALOS_TEST_REQUIRE_ALL=1).

The extension host runs in node on this machine, so the extension starts the real `talos-ls`
exactly as a desktop VS Code would; everything the person sees is in the browser page.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from ..system import unavailable

REPO = Path(__file__).resolve().parents[2]
EXTENSION = REPO / "clients" / "vscode"
SETUP = "clients/vscode/e2e/setup.sh"
BUILD = "cd clients/vscode && npm ci && npm run package"
CHROMIUM = Path("/usr/bin/chromium")
START_S = 60  # code-server answering /healthz
# Chromium as CI runs it: no sandbox as root, no GPU, and nothing phoning home.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-default-apps",
    "--disable-extensions",
]


def e2e_dir() -> Path:
    return Path(os.environ.get("TALOS_E2E_DIR") or Path.home() / ".cache" / "talos-e2e")


def require_code_server() -> Path:
    binary = e2e_dir() / "code-server" / "node_modules" / ".bin" / "code-server"
    if not binary.exists():
        unavailable(f"needs code-server 4.100.3 in {binary.parents[2]}: {SETUP}")
    return binary


def require_chromium() -> Path:
    if not CHROMIUM.exists():
        unavailable(f"needs {CHROMIUM}: apt-get install -y chromium (or {SETUP})")
    return CHROMIUM


def require_playwright() -> Any:
    try:
        from playwright import sync_api
    except ImportError:
        unavailable("needs the playwright package: .venv/bin/pip install -e '.[e2e]'")
    return sync_api


def require_vsix() -> Path:
    """The packaged extension (`npm run package` writes clients/vscode/talos-vscode.vsix), or
    $TALOS_E2E_VSIX; one older than the extension's sources would test old code, so it counts
    as missing."""
    if os.environ.get("TALOS_E2E_VSIX"):
        vsix = Path(os.environ["TALOS_E2E_VSIX"])
        if not vsix.exists():
            unavailable(f"TALOS_E2E_VSIX={vsix} does not exist: {BUILD}")
        return vsix
    found = sorted(
        [*EXTENSION.glob("talos-vscode*.vsix"), *EXTENSION.glob("dist/*.vsix")],
        key=lambda p: p.stat().st_mtime,
    )
    if not found:
        unavailable(f"needs the extension's .vsix: {BUILD}")
    vsix = found[-1]
    sources = [EXTENSION / "package.json", *(EXTENSION / "src").rglob("*.ts")]
    newest = max((p for p in sources if p.exists()), key=lambda p: p.stat().st_mtime, default=None)
    if newest is not None and newest.stat().st_mtime > vsix.stat().st_mtime:
        unavailable(f"{vsix.relative_to(REPO)} is older than {newest.relative_to(REPO)}: {BUILD}")
    return vsix


def machine_scoped() -> set[str]:
    """The extension's machine-scoped settings (`"scope": "machine"` in its package.json)."""
    manifest = json.loads((EXTENSION / "package.json").read_text())
    properties = manifest["contributes"]["configuration"]["properties"]
    return {key for key, spec in properties.items() if spec.get("scope") == "machine"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class CodeServer:
    """One code-server with a profile of its own under `root`: XDG dirs and HOME there too, so
    the extension's talos-ls keeps its store and config there, not in the user's.

    code-server is a remote window, like Remote-SSH, WSL or a dev container: VS Code applies
    machine-scoped settings there from the Remote settings (`<user-data-dir>/Machine/
    settings.json`), not from User settings. `settings` are written where a person in such a
    window puts them: the extension's machine-scoped ones in Machine/settings.json, the rest in
    User/settings.json. `user_only` are written to User settings whatever their scope (what a
    person who followed a local window's set-up has)."""

    def __init__(
        self,
        binary: Path,
        root: Path,
        settings: dict[str, Any],
        env: dict[str, str],
        user_only: dict[str, Any] | None = None,
    ) -> None:
        self.binary = binary
        self.root = root
        self.user_data = root / "user-data"
        self.extensions = root / "extensions"
        self.home = root / "home"
        self.log = root / "code-server.log"
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        (self.user_data / "User").mkdir(parents=True)
        (self.user_data / "Machine").mkdir()
        self.extensions.mkdir()
        self.home.mkdir()
        machine = machine_scoped()
        remote = {k: v for k, v in settings.items() if k in machine}
        user = {k: v for k, v in settings.items() if k not in machine}
        user.update(user_only or {})
        self.user_settings = self.user_data / "User" / "settings.json"
        self.remote_settings = self.user_data / "Machine" / "settings.json"
        self.user_settings.write_text(json.dumps(user, indent=2))
        self.remote_settings.write_text(json.dumps(remote, indent=2))
        theirs = ("TALOS_", "XDG_", "OPENAI_", "VSCODE_", "CODE_SERVER")
        keep = {k: v for k, v in os.environ.items() if not k.startswith(theirs)}
        keep.update(
            {
                "HOME": str(self.home),
                "XDG_CONFIG_HOME": str(self.home / ".config"),
                "XDG_DATA_HOME": str(self.home / ".local" / "share"),
                "XDG_STATE_HOME": str(self.home / ".local" / "state"),
                "XDG_CACHE_HOME": str(self.home / ".cache"),
                "PASSWORD": "",
            }
        )
        keep.update(env)
        self.env = keep

    def set_remote(self, values: dict[str, Any]) -> None:
        """Adds `values` to the Remote settings, as a person who pastes them there and saves."""
        current = json.loads(self.remote_settings.read_text())
        current.update(values)
        self.remote_settings.write_text(json.dumps(current, indent=2))

    def _argv(self, *args: str) -> list[str]:
        return [
            str(self.binary),
            "--user-data-dir",
            str(self.user_data),
            "--extensions-dir",
            str(self.extensions),
            *args,
        ]

    def install(self, vsix: Path) -> None:
        done = subprocess.run(
            self._argv("--install-extension", str(vsix)),
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        installed = [p.name for p in self.extensions.iterdir() if p.is_dir()]
        if done.returncode != 0 or not installed:
            raise AssertionError(
                f"code-server --install-extension {vsix} failed "
                f"(exit {done.returncode}):\n{done.stdout}\n{done.stderr}"
            )

    def start(self, folder: Path) -> str:
        argv = self._argv(
            "--bind-addr",
            f"127.0.0.1:{self.port}",
            "--auth",
            "none",
            "--disable-telemetry",
            "--disable-update-check",
            "--disable-workspace-trust",
            "--disable-getting-started-override",
            str(folder),
        )
        with self.log.open("wb") as log:  # a session of its own: stopped by process group
            self.process = subprocess.Popen(
                argv,
                env=self.env,
                cwd=folder,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(
                    f"code-server exited ({self.process.returncode}):\n{self.logs()}"
                )
            with suppress(OSError), urllib.request.urlopen(f"{self.url}/healthz", timeout=2) as r:
                if r.status == 200:
                    return self.url
            time.sleep(0.2)
        raise AssertionError(f"code-server did not answer /healthz in {START_S} s:\n{self.logs()}")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        """The whole process group: a file watcher child outlives code-server otherwise; the
        extension host's talos-ls gets the TERM too."""
        if self.process is None:
            return
        for sig, wait_s in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
            with suppress(ProcessLookupError):
                os.killpg(self.process.pid, sig)
            try:
                self.process.wait(timeout=wait_s)
                break
            except subprocess.TimeoutExpired:
                continue
        with suppress(ProcessLookupError):  # stragglers of the group
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process = None

    def log_files(self) -> list[Path]:
        """code-server's own output, then the workbench's logs: the extension host's, and the
        extension's output channels (Talos's among them)."""
        logs = (
            sorted((self.user_data / "logs").rglob("*.log"))
            if (self.user_data / "logs").exists()
            else []
        )
        wanted = ("exthost", "Talos", "remoteagent")
        keep = [p for p in logs if any(k in p.as_posix() for k in wanted)]
        return [self.log, *keep]

    def logs(self, tail: int = 4000) -> str:
        out = []
        for path in self.log_files():
            with suppress(OSError):
                text = path.read_text(errors="replace")
                out.append(f"--- {path.relative_to(self.root)}\n{text[-tail:]}")
        return "\n".join(out)


@contextmanager
def browser(sync_api: Any, chromium: Path) -> Iterator[Any]:
    """A Playwright page in Debian's Chromium (Playwright downloads no browser of its own)."""
    with sync_api.sync_playwright() as playwright:
        b = playwright.chromium.launch(
            executable_path=str(chromium), headless=True, args=CHROMIUM_ARGS
        )
        try:
            context = b.new_context(viewport={"width": 1400, "height": 900})
            yield context.new_page()
        finally:
            b.close()


class Shots:
    """Screenshots, numbered in order, written to the artifacts directory and to the test's
    tmp dir."""

    def __init__(self, page: Any, dirs: list[Path]) -> None:
        self.page = page
        self.dirs = dirs
        self.count = 0
        self.taken: list[Path] = []
        for d in dirs:
            if d.exists():
                shutil.rmtree(d)
            d.mkdir(parents=True)

    def __call__(self, name: str) -> Path | None:
        self.count += 1
        file = f"{self.count:02d}-{name}.png"
        try:
            data = self.page.screenshot(timeout=10_000)
        except Exception:  # the page may be gone after a failure: the logs still tell
            return None
        for d in self.dirs:
            (d / file).write_bytes(data)
        self.taken.append(self.dirs[0] / file)
        return self.dirs[0] / file

    def copy(self, files: list[Path], root: Path) -> None:
        """Logs kept beside the screenshots."""
        for d in self.dirs:
            for f in files:
                if f.exists():
                    target = d / "logs" / f.relative_to(root)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(f, target)


# Every notification toast the workbench ever adds, with the last text it showed, kept in
# `window.__talosToasts`: VS Code closes an identical notification when a second one comes
# (and empties the closed toast), so counting the toasts on screen cannot tell one
# notification from two; this can.
TOAST_RECORDER = """
(() => {
  const toasts = window.__talosToasts = [];
  const seen = new Set();
  const record = (node) => {
    if (!(node instanceof Element)) return;
    const found = node.matches('.notification-toast') ? [node]
      : Array.from(node.querySelectorAll('.notification-toast'));
    for (const el of found) {
      if (!seen.has(el)) { seen.add(el); toasts.push({ el, text: '' }); }
    }
  };
  new MutationObserver((records) => {
    for (const r of records) for (const n of r.addedNodes) record(n);
    for (const t of toasts) {
      const message = t.el.querySelector('.notification-list-item-message');
      const text = ((message || t.el).textContent || '').replace(/\\s+/g, ' ').trim();
      if (text) t.text = text;
    }
  }).observe(document, { childList: true, subtree: true, characterData: true });
})();
"""


def recorded_toasts(page: Any) -> list[str]:
    """The last text of every toast added since the page loaded (TOAST_RECORDER), in order."""
    return page.evaluate("() => (window.__talosToasts || []).map((t) => t.text)")


def files_containing(roots: list[Path], needle: bytes) -> list[Path]:
    """Every regular file under `roots` whose bytes contain `needle` (symlinks not followed)."""
    found = []
    for root in roots:
        if not root.exists():
            continue
        for path in sorted(root.rglob("*")):
            if path.is_symlink() or not path.is_file():
                continue
            with suppress(OSError):
                if needle in path.read_bytes():
                    found.append(path)
    return found
