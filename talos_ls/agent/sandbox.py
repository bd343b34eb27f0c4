"""Commands under an OS sandbox: bubblewrap (`bwrap`) on Linux.

Every command the agent runs is spawned as `bwrap ... -- bash -c COMMAND`:
- new user, PID, IPC, UTS, cgroup and network namespaces (`--unshare-all`; the network comes
  back only when a rule grants it), `--die-with-parent`, `--new-session` (no typing into the
  person's terminal), every capability dropped (no unmounting what hides a secret);
- the environment is an allow-list (PATH, LANG, TERM...; HOME is a private empty directory),
  and bwrap itself is spawned with that same environment: no process the command can see holds
  a secret, and the daemon is outside its PID namespace, so no `/proc/<pid>/environ` leaks;
- the system is read-only, its own secrets (`/etc/shadow`, host keys) hidden; every home
  directory is an empty tmpfs, except the toolchains on PATH (`~/.pyenv`, `~/.cargo`...) bound
  read-only; the person's credential stores and Talos's own config, state and store are hidden
  even where a bound directory contains them;
- the workspace is read-only for what rules allow unasked and writable for approved commands
  (never when it holds a home directory): `.talos/` always read-only, `.git` writable but for
  what git runs or reads later (hooks, config...), every `.env*` file (`.env`, `.env.local`,
  `.envrc`...) replaced by an empty one, and no directory holding one movable
  (`workspace_layout.py` says how and why).

Where `bwrap` is missing or cannot create namespaces (some containers, Ubuntu's AppArmor
restriction of user namespaces), `probe` says so once, and the permission gate asks before
every command; an approved command then runs with the same clean environment, but unconfined.
Output is streamed with a byte cap (the command is killed past it) and a timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import hashlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import platformdirs

from . import workspace_layout
from .secrets_scan import SecretsScan
from .workspace import SandboxError
from .workspace_layout import Covers, Layout

logger = logging.getLogger(__name__)

INSTALL_HINT = "apt-get install bubblewrap (Debian, Ubuntu), dnf install bubblewrap (Fedora)"
PASS_ENV = ("PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TERM", "TZ",
            "USER", "LOGNAME")  # fmt: skip
SANDBOX_HOME = "/tmp/home"
MAX_OUTPUT_BYTES = 1024 * 1024  # read from a command before it is killed
KEEP_HEAD, KEEP_TAIL = 6000, 6000  # bytes of output kept from its start and its end
# Under a home directory: never visible, even inside a bound toolchain or workspace.
CREDENTIAL_STORES = (".ssh", ".aws", ".azure", ".config/gh", ".config/hub", ".config/gcloud",
                     ".config/git/credentials", ".git-credentials", ".netrc", ".docker", ".kube",
                     ".gnupg", ".password-store", ".npmrc", ".pypirc", ".terraformrc",
                     ".terraform.d/credentials.tfrc.json", ".cargo/credentials",
                     ".cargo/credentials.toml", ".local/share/keyrings",
                     ".config/talos", ".local/share/talos", ".local/state/talos",
                     ".cache/talos")  # fmt: skip
BLANKED = ("/tmp", "/var/tmp", "/run")  # empty in the sandbox, as every home is
# Readable by root on many systems, and secret: hidden even though the system is visible.
SYSTEM_SECRETS = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers",
                  "/etc/sudoers.d", "/etc/ssl/private", "/etc/security/opasswd")  # fmt: skip


@dataclass(frozen=True)
class SandboxState:
    available: bool
    detail: str  # what is used, or what is wrong and how to fix it


@dataclass
class CommandResult:
    exit_code: int | None
    output: str
    total_bytes: int
    killed: str | None = None  # why it was killed: "timeout" or "output"

    def text(self) -> str:
        head = f"exit code {self.exit_code}" if self.killed is None else "killed"
        return f"{head}\n{self.output}"


def _allowed_env(home: str) -> dict[str, str]:
    env = {k: os.environ[k] for k in PASS_ENV if k in os.environ}
    env.update(HOME=home, TMPDIR="/tmp")
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.setdefault("LANG", "C.UTF-8")
    return env


_EMPTY: list[str] = []


def _empty_file() -> str:
    """An empty read-only file, made once per process, bound over each hidden file."""
    if not _EMPTY or not os.path.exists(_EMPTY[0]):
        fd, path = tempfile.mkstemp(prefix="talos-hidden-")
        os.close(fd)
        os.chmod(path, 0o444)
        _EMPTY[:] = [path]
    return _EMPTY[0]


def _homes() -> list[Path]:
    """What is blanked with a tmpfs: /root, /home, and the person's home wherever it is."""
    found = [Path(p) for p in ("/root", "/home") if os.path.isdir(p)]
    home = Path.home()
    if home.is_dir() and not any(home.is_relative_to(h) for h in found):
        found.append(home)
    return found


def _user_homes() -> list[Path]:
    """Each person's home: /root, every /home/<name>, and $HOME."""
    homes = {Path.home()} | ({Path("/root")} if os.path.isdir("/root") else set())
    with contextlib.suppress(OSError):
        homes |= {p for p in Path("/home").iterdir() if p.is_dir()}
    return sorted(homes)


def covers_file(root: Path) -> Path:
    """Where the paths covered in this workspace are kept between processes: Talos's state,
    hidden from every command."""
    name = hashlib.sha256(os.fsencode(root)).hexdigest()[:32]
    return platformdirs.user_state_path("talos") / "covered" / f"{name}.json"


def talos_paths() -> list[Path]:
    """Talos's own config (rules, trusted hashes, prices), state and store, wherever
    platformdirs puts them for this person."""
    return [
        platformdirs.user_config_path("talos"),
        platformdirs.user_state_path("talos"),
        platformdirs.user_data_path("talos"),
        platformdirs.user_cache_path("talos"),
    ]


class Sandbox:
    """Runs commands for one workspace. `hidden`: more paths no command may see (the store)."""

    _probed: ClassVar[dict[str, SandboxState]] = {}  # by bwrap path: once per process

    def __init__(self, root: Path, *, hidden: Iterable[Path] = (), bwrap: str | None = None):
        self.root = Path(root).resolve()
        self.bwrap = bwrap if bwrap is not None else shutil.which("bwrap")
        self.shell = shutil.which("bash") or "/bin/sh"
        self.extra_hidden = [Path(p) for p in hidden]
        self._secrets = SecretsScan(self.root)
        self._covers = Covers(covers_file(self.root))  # covered once: covered while there

    def close(self) -> None:
        """Stop watching the workspace for secrets files (a later command watches again)."""
        self._secrets.close()

    # ---------------------------------------------------------------- state
    def probe(self) -> SandboxState:
        """Can bwrap create its namespaces here? Asked once per process, then remembered."""
        if not self.bwrap:
            return SandboxState(False, f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}")
        cached = Sandbox._probed.get(self.bwrap)
        if cached is not None:
            return cached
        argv = [self.bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                "--tmpfs", "/tmp", "--unshare-all", "--die-with-parent", "--new-session",
                "--cap-drop", "ALL", "--clearenv", "--", "true"]  # fmt: skip
        try:
            done = subprocess.run(argv, env=_allowed_env(SANDBOX_HOME), capture_output=True,
                                  timeout=10, stdin=subprocess.DEVNULL)  # fmt: skip
            ok, why = done.returncode == 0, done.stderr.decode(errors="replace").strip()
        except (OSError, subprocess.TimeoutExpired) as exc:
            ok, why = False, str(exc)
        if ok:
            state = SandboxState(True, f"bubblewrap ({self.bwrap})")
        else:
            first = why.splitlines()[0] if why else "it failed"
            state = SandboxState(False, f"bubblewrap cannot create a sandbox here ({first}); "
                                 "on Ubuntu 24.04+ allow unprivileged user namespaces for bwrap "
                                 "(an AppArmor profile), in a container run it with "
                                 "--privileged or user namespaces enabled")  # fmt: skip
            logger.warning("sandbox unavailable: %s", state.detail)
        Sandbox._probed[self.bwrap] = state
        return state

    # --------------------------------------------------------------- layout
    @staticmethod
    def _toolchains() -> list[Path]:
        """Directories the sandbox blanks (a home, /tmp, /run) that hold the programs on PATH,
        and Python itself: a PATH entry's parent when it is a `bin` or `shims` directory
        (`~/.cargo/bin` -> `~/.cargo`, `/tmp/ci/.venv/bin` -> `/tmp/ci/.venv`), else the entry
        itself; `~/.local/bin` with `~/.local/lib` beside it (user site-packages), never all of
        `~/.local`."""
        homes = [*_user_homes(), *(Path(p) for p in BLANKED)]
        wanted: list[Path] = []
        for entry in (Path(p) for p in os.environ.get("PATH", "").split(os.pathsep) if p):
            parent = entry.parent
            if (
                entry.name in ("bin", "sbin", "shims")
                and parent not in homes
                and parent.name not in (".local", ".config")
            ):
                wanted.append(parent)
            else:
                wanted.append(entry)
                if parent.name == ".local" and entry.name == "bin":
                    wanted.append(parent / "lib")
        wanted += [Path(sys.base_prefix), Path(sys.prefix)]
        out: list[Path] = []
        for path in wanted:
            if not any(path.is_relative_to(h) and path != h for h in homes) or not path.is_dir():
                continue
            if not any(path.is_relative_to(o) for o in out):
                out = [o for o in out if not o.is_relative_to(path)] + [path]
        return out

    def _hidden(self) -> list[Path]:
        paths = [u / rel for u in _user_homes() for rel in CREDENTIAL_STORES]
        system = [Path(p) for p in SYSTEM_SECRETS] + sorted(Path("/etc/ssh").glob("ssh_host_*key"))
        return [*paths, *system, *talos_paths(), *self.extra_hidden]

    def _env_files(self) -> list[Path]:
        return self._secrets.files()

    def _may_write(self, writable: bool) -> bool:
        """A workspace that holds a home directory (or is one) is never writable: a command
        could plant `~/.ssh`, `~/.bashrc` or Talos's own settings there."""
        return writable and not any(h.is_relative_to(self.root) for h in _user_homes())

    def layout(self, writable: bool) -> Layout:
        """The workspace part of a command's layout (`workspace_layout.py`): its secrets are
        found now. Holds stand-ins until `Layout.after` (`run` calls it)."""
        for path in talos_paths():  # inside the workspace: made now, so they can be hidden
            if path.is_relative_to(self.root) and not os.path.lexists(path):
                with contextlib.suppress(OSError):
                    path.mkdir(parents=True)
        inside = [p for p in self._hidden() if str(p).startswith(f"{self.root}/")]
        secrets = [*self._env_files(), *inside]
        return workspace_layout.build(
            self.root, writable=self._may_write(writable), secrets=secrets,
            covers=self._covers, empty_file=_empty_file(),
            repositories=self._secrets.repositories,
        )  # fmt: skip

    def argv(
        self, command: str, *, writable: bool, network: bool, layout: Layout | None = None
    ) -> list[str]:
        """The bwrap command line that runs `command` (with `bash -c`); the workspace's part
        is `layout` (`run` passes its own). Without one, a layout is made and undone at once:
        the command line is then for looking at only."""
        assert self.bwrap, "no bwrap"
        homes = _homes()
        if layout is None:
            layout = self.layout(writable)
            layout.after()
        args = [self.bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        for blank in BLANKED:
            if os.path.isdir(blank):
                args += ["--tmpfs", blank]
        args += ["--dir", SANDBOX_HOME]
        resolv = os.path.realpath("/etc/resolv.conf")  # systemd-resolved keeps it in /run
        if network and resolv.startswith("/run/") and os.path.exists(resolv):
            args += ["--ro-bind", resolv, resolv]
        for home in homes:
            args += ["--tmpfs", str(home)]
        tools = self._toolchains()
        for tool in tools:
            args += ["--ro-bind", str(tool), str(tool)]
        args += layout.args  # the workspace, its secrets covered (in it: `Sandbox.layout`)
        shown = [*tools, self.root]  # what is visible inside the blanked homes
        for path in [*self._hidden(), *layout.outside]:
            if str(path).startswith(f"{self.root}/"):
                continue  # covered by the layout
            inside_home = any(path.is_relative_to(h) for h in homes)
            if inside_home and not any(path.is_relative_to(s) for s in shown):
                continue  # already out of sight
            if path.is_symlink() or not path.exists() or path == self.root:
                continue
            if path.is_dir():
                args += ["--tmpfs", str(path), "--remount-ro", str(path)]
            else:  # an empty regular file: readers see nothing, git sees a plain file
                args += ["--ro-bind", _empty_file(), str(path)]
        args += ["--chdir", str(self.root), "--unshare-all"]
        if network:
            args.append("--share-net")
        args += ["--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv"]
        for key, value in {**_allowed_env(SANDBOX_HOME), **layout.env}.items():
            args += ["--setenv", key, value]
        return [*args, "--", self.shell, "-c", command]

    # ------------------------------------------------------------------ run
    async def run(
        self,
        command: str,
        *,
        sandboxed: bool,
        writable: bool,
        network: bool,
        timeout: float,
        max_bytes: int = MAX_OUTPUT_BYTES,
    ) -> CommandResult:
        """Run `command` in the workspace; stdout and stderr together, streamed and capped.
        Unsandboxed (only ever after the person approved it): the same clean environment,
        with a private temporary HOME. Sandboxed, what the workspace's layout undid after the
        command (a link planted in `.git` removed...) is said at the end of its output."""
        layout: Layout | None = None
        with tempfile.TemporaryDirectory(prefix="talos-home-") as private_home:
            try:
                if sandboxed:  # the layout walks the workspace: off the event loop
                    layout, argv = await asyncio.to_thread(
                        functools.partial(self._planned, command, writable, network)
                    )
                    env = _allowed_env(SANDBOX_HOME)
                else:
                    argv, env = [self.shell, "-c", command], _allowed_env(private_home)
                proc = await asyncio.create_subprocess_exec(
                    *argv, cwd=self.root, env=env, stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
                    start_new_session=True,  # its own process group: a kill takes all of it
                )  # fmt: skip
                try:
                    result = await _collect(proc, timeout, max_bytes)
                except asyncio.CancelledError:  # the task was cancelled: the command goes too
                    await kill_process(proc)
                    raise
            finally:  # stand-ins released, .git checked: even when the task is cancelled
                notes = []
                if layout is not None:
                    notes = await asyncio.shield(asyncio.to_thread(self._undo, layout))
        for note in notes:
            logger.warning("%s: after a command, %s", self.root, note)
            result.output += f"\n[talos: {note}]"
        return result

    def _undo(self, layout: Layout) -> list[str]:
        """After the command: `Layout.after`, with the repositories below the root now (a new
        scan, after a writable command)."""
        now: list[Path] = []
        if layout.repositories is not None:
            with contextlib.suppress(OSError):
                self._secrets.files()
            now = self._secrets.repositories
        return layout.after(now)

    def _planned(self, command: str, writable: bool, network: bool) -> tuple[Layout, list[str]]:
        try:
            layout = self.layout(writable)
        except workspace_layout.TooManyMounts as exc:
            raise SandboxError(f"not run: {exc}") from None
        try:
            return layout, self.argv(command, writable=writable, network=network, layout=layout)
        except BaseException:
            layout.after()
            raise


async def _collect(proc: asyncio.subprocess.Process, timeout: float, cap: int) -> CommandResult:
    assert proc.stdout is not None
    head, tail, total, killed = bytearray(), bytearray(), 0, None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        left = deadline - loop.time()
        if left <= 0:
            killed = "timeout"
            break
        try:
            chunk = await asyncio.wait_for(proc.stdout.read(65536), left)
        except TimeoutError:
            killed = "timeout"
            break
        if not chunk:
            break
        total += len(chunk)
        room = KEEP_HEAD - len(head)
        if room > 0:
            head += chunk[:room]
            chunk = chunk[room:]
        tail = (tail + chunk)[-KEEP_TAIL:]
        if total > cap:
            killed = "output"
            break
    if killed:
        await kill_process(proc)
    else:
        try:
            await asyncio.wait_for(proc.wait(), max(deadline - loop.time(), 0.1))
        except TimeoutError:
            killed = "timeout"
            await kill_process(proc)
    cut = total - len(head) - len(tail)
    text = head.decode("utf-8", errors="replace")
    if cut > 0:
        text += f"\n[... {cut} bytes cut ...]\n"
    text += tail.decode("utf-8", errors="replace")
    if killed == "timeout":
        text += f"\n[killed: no result after {timeout:.0f} s]"
    elif killed == "output":
        text += f"\n[killed: the output passed {cap} bytes; narrow the command]"
    return CommandResult(None if killed else proc.returncode, text, total, killed)


async def kill_process(proc: asyncio.subprocess.Process, *, group: bool = True) -> None:
    """SIGKILL the process (its whole group, when it leads one), then read the pipe to its
    end: asyncio sees a process as finished only once its pipes are closed, and a paused
    reader never sees the end."""
    with contextlib.suppress(ProcessLookupError):
        if group:
            os.killpg(proc.pid, signal.SIGKILL)
        elif not _exited(proc.pid):  # Popen.kill reaps an exited child behind asyncio's back
            proc.kill()

    async def drain() -> None:
        while proc.stdout is not None and await proc.stdout.read(65536):
            pass
        await proc.wait()

    try:
        await asyncio.wait_for(drain(), 2.0)
    except TimeoutError:  # a child that left the group still holds the pipe: stop listening
        transport = getattr(proc, "_transport", None)
        if transport is not None:
            transport.close()


def _exited(pid: int) -> bool:
    """Whether the child has exited, without reaping it (its watcher will)."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except (ChildProcessError, OSError, AttributeError):
        return False
    return info is not None


def protect_this_process() -> None:
    """Make this process's memory and `/proc/<pid>/environ` unreadable to the person's other
    processes (PR_SET_DUMPABLE 0, as ssh-agent does): the key Talos holds stays out of reach of
    a command that runs unsandboxed. Also no core dumps. Linux only; a no-op elsewhere."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
