"""Commands under an OS sandbox: bubblewrap (`bwrap`) on Linux.

Every command the agent runs is spawned as `bwrap ... -- bash -c COMMAND`:
- new user, PID, IPC, UTS, cgroup and network namespaces (`--unshare-all`; the network comes
  back only when a rule grants it), `--die-with-parent`, `--new-session` (no typing into the
  person's terminal), every capability dropped (no unmounting what hides a secret);
- the environment is an allow-list (PATH, LANG, TERM...; HOME is a private empty directory;
  PYENV_ROOT, CARGO_HOME... when they name a toolchain shown), and bwrap itself is spawned
  with that environment: no process the command can see holds a secret, and the daemon is
  outside its PID namespace, so no `/proc/<pid>/environ` leaks;
- outside the workspace only the system is visible, read-only (`/usr`, `/bin`, `/lib*`, `/etc`
  but for what others may not read there, `/sys`, a new `/dev` and `/proc`), with the
  toolchains on PATH (`~/.pyenv`, `~/.cargo` and `~/.rustup`, `/opt/node`...; never a home,
  `/`, `~/.config` or a credential store, by name or through a link: `toolchain`) and the
  paths the person's settings list (`readable_paths`); the rest (`/srv`, `/opt`, `/mnt`,
  `/var`, other projects, every home) is absent or empty, so no Unix socket there can be
  connected to. The person's credential stores and Talos's own config, state and store are
  hidden even where a shown directory contains them;
- limits on processes, memory, file size, `/tmp` and CPU time (`limits.py`): hitting one ends
  the command with a message saying which;
- the workspace is read-only for what rules allow unasked and writable for approved commands
  (never when it holds a home directory): `.talos/` always read-only, `.git` writable but for
  what git runs or reads later (hooks, config...), every `.env*` file (`.env`, `.env.local`,
  `.envrc`...) replaced by an empty one, and no directory holding one movable
  (`workspace_layout.py` says how and why).

Where `bwrap` is missing or cannot create namespaces (some containers, Ubuntu's AppArmor
restriction of user namespaces), `probe` says so once, and the permission gate asks before
every command; an approved command then runs with the same clean environment, but unconfined.
Output is streamed with a byte cap (the command is killed past it) and a timeout; a command
not found (exit 127) ends with where the program is and why the sandbox does not show it.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import ctypes
import functools
import hashlib
import logging
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import platformdirs

from ..display import visible
from . import limits as lim
from . import on_host, workspace_layout
from .limits import Limits
from .secrets_scan import SecretsScan
from .workspace import SandboxError
from .workspace_layout import Covers, Layout

logger = logging.getLogger(__name__)

INSTALL_HINT = "apt-get install bubblewrap (Debian, Ubuntu), dnf install bubblewrap (Fedora)"
PASS_ENV = (
    "PATH",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TERM",
    "TZ",
    "USER",
    "LOGNAME",
)
SANDBOX_HOME = "/tmp/home"
MAX_OUTPUT_BYTES = 1024 * 1024  # read from a command before it is killed
KEEP_HEAD, KEEP_TAIL = 6000, 6000  # bytes of output kept from its start and its end
# Under a home directory: never visible, even inside a bound toolchain or workspace.
CREDENTIAL_STORES = (
    ".ssh",
    ".aws",
    ".azure",
    ".config/gh",
    ".config/hub",
    ".config/gcloud",
    ".config/git/credentials",
    ".git-credentials",
    ".netrc",
    ".docker",
    ".kube",
    ".gnupg",
    ".password-store",
    ".npmrc",
    ".pypirc",
    ".terraformrc",
    ".terraform.d/credentials.tfrc.json",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".local/share/keyrings",
    ".config/talos",
    ".local/share/talos",
    ".local/state/talos",
    ".cache/talos",
)
BLANKED = ("/tmp", "/var/tmp", "/run")  # empty in the sandbox, as every home is
# The system, read-only: what programs need to run. A link among them (`/bin -> usr/bin`) is
# made again as a link. Everything else at the top (`/srv`, `/opt`, `/mnt`, `/media`, `/work`,
# `/boot`...) is absent, but for the toolchains on PATH and the person's readable paths.
SYSTEM_DIRS = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/sys",
    "/nix/store",
    "/gnu/store",
)
# Of /var, only what programs read to run (TeX's formats, font caches, openSUSE's CA bundle);
# its links (`/var/run -> /run`) are made again, its /var/tmp is the sandbox's own.
SYSTEM_VAR = ("/var/lib/texmf", "/var/cache/fontconfig", "/var/lib/ca-certificates")
# A readable path may not be or lie in these (the host's processes and devices), nor be `/` or
# a directory the sandbox blanks.
NEVER_READABLE = ("/proc", "/dev", "/sys")
ETC_WALK_SECONDS = 30.0  # /etc is walked again after this, or when a directory of it changed
MAX_ETC_ENTRIES = 50_000
# Readable by root on many systems, and secret: hidden even though the system is visible.
SYSTEM_SECRETS = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssl/private",
    "/etc/security/opasswd",
)
# Under a home, where many programs keep their settings or data: a toolchain may lie in one
# (`~/.local/share/uv/tools/ruff`), never be one.
SHARED_DIRS = (".config", ".local", ".local/share", ".local/state", ".cache")
# Where a toolchain's programs look for it when the variable is unset: under $HOME, which a
# command's is not. Set for commands when it names a toolchain they are shown.
TOOLCHAIN_ENV = {
    "PYENV_ROOT": ".pyenv",
    "RBENV_ROOT": ".rbenv",
    "CARGO_HOME": ".cargo",
    "RUSTUP_HOME": ".rustup",
    "VOLTA_HOME": ".volta",
    "ASDF_DATA_DIR": ".asdf",
    "GOROOT": "",
    "GOPATH": "",
}
COMPANIONS = {"CARGO_HOME": "RUSTUP_HOME"}  # cargo's programs are rustup's proxies
# Where toolchains put their programs under a home: looked in when a command is not found.
USUAL_BINS = (
    ".local/bin",
    "bin",
    ".pyenv/shims",
    ".cargo/bin",
    "go/bin",
    ".volta/bin",
    ".rbenv/shims",
    ".asdf/shims",
    ".nvm/versions/node/*/bin",
    ".bun/bin",
    ".deno/bin",
)
NOT_FOUND = re.compile(r": ([\w.+-]{1,100}): command not found$", re.MULTILINE)  # bash's words


@dataclass(frozen=True)
class SandboxState:
    available: bool
    detail: str  # what is used, or what is wrong and how to fix it


@dataclass
class CommandResult:
    exit_code: int | None
    output: str
    total_bytes: int
    killed: str | None = None  # why it was killed: "timeout", "output" or "limit"
    limit: str | None = None  # which limit, said for the person ("it reached the limit of...")

    def text(self) -> str:
        head = f"exit code {self.exit_code}" if self.killed is None else "killed"
        return f"{head}\n{self.output}"


def path_entries() -> list[str]:
    """The daemon's PATH, its absolute entries."""
    return [e for e in os.environ.get("PATH", "").split(os.pathsep) if os.path.isabs(e)]


def _tilde(path: Path | str) -> str:
    home = str(Path.home()).rstrip("/") + "/"
    return "~/" + str(path)[len(home) :] if str(path).startswith(home) else str(path)


def allowed_env(home: str) -> dict[str, str]:
    """PASS_ENV as the daemon has it, but PATH without its relative or empty entries (they
    would name directories of the workspace, a command's working directory)."""
    env = {k: os.environ[k] for k in PASS_ENV if k in os.environ}
    env.update(HOME=home, TMPDIR="/tmp")
    env["PATH"] = os.pathsep.join(path_entries()) or "/usr/local/bin:/usr/bin:/bin"
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


def _within_any(roots: Iterable[Path]) -> Callable[[Path], bool]:
    """Whether a path is one of `roots` or inside one: `Path.is_relative_to`, as string
    prefixes (the layout asks it of every hidden path and `.env*` file, for each root)."""
    prefixes = tuple(str(r).rstrip("/") + "/" for r in roots)
    exact = {str(r) for r in roots}
    return lambda path: str(path) in exact or str(path).startswith(prefixes)


def _mtimes(paths: Iterable[Path]) -> list[tuple[str, int]]:
    out = []
    for path in paths:
        try:
            out.append((str(path), os.stat(path).st_mtime_ns))
        except OSError:
            out.append((str(path), -1))
    return out


def _has_setfcap() -> bool:
    """Whether this process holds CAP_SETFCAP, which Linux 5.12+ asks of whoever maps uid 0
    into a user namespace: root without capabilities cannot start bwrap."""
    try:
        status = Path("/proc/self/status").read_text()
        caps = next(line.split()[1] for line in status.splitlines() if line.startswith("CapEff"))
        return bool(int(caps, 16) >> 31 & 1)
    except (OSError, StopIteration, ValueError, IndexError):
        return True


_SIZES: dict[str, bool] = {}


def sizes_tmpfs(bwrap: str) -> bool:
    """Whether this bwrap sizes a tmpfs (`--size`, bubblewrap 0.7.0, 2022). Without it, /tmp
    is bounded only by the watch (`limits.Watch`); `talos doctor` says so."""
    if bwrap not in _SIZES:
        try:
            done = subprocess.run(
                [bwrap, "--help"],
                capture_output=True,
                timeout=10,
                stdin=subprocess.DEVNULL,
                env=allowed_env(SANDBOX_HOME),
            )
            _SIZES[bwrap] = b"--size" in done.stdout + done.stderr
        except (OSError, subprocess.TimeoutExpired):
            _SIZES[bwrap] = False
    return _SIZES[bwrap]


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


def system_shown() -> list[Path]:
    """The parts of the system the sandbox shows, as they are named on this machine."""
    return [Path(p) for p in (*SYSTEM_DIRS, *SYSTEM_VAR) if os.path.lexists(p)]


_ETC: dict[str, object] = {}


def etc_secrets(top: str = "/etc") -> list[Path]:
    """What /etc keeps from others: every entry there that others may not read (`shadow`,
    `sudoers`, `ssl/private`, a database's password file, NetworkManager's connections), or, a
    directory, not enter, and every socket. Root reads them all, and a sandbox of root's is
    root: they are hidden like the listed SYSTEM_SECRETS. Walked again after
    ETC_WALK_SECONDS, or at once when a directory's mtime changed (an entry made, renamed or
    removed); a mode changed in place is seen at the next walk."""
    now = time.monotonic()
    dirs = _ETC.get("dirs")
    fresh = _ETC.get("top") == top and now - float(_ETC["at"]) < ETC_WALK_SECONDS  # type: ignore[arg-type]
    if isinstance(dirs, dict) and fresh:
        try:
            if all(os.stat(d).st_mtime_ns == m for d, m in dirs.items()):
                return list(_ETC["found"])  # type: ignore[call-overload]
        except OSError:
            pass
    found: list[Path] = []
    seen: dict[str, int] = {}
    pending = [top] if os.path.isdir(top) else []
    count = 0
    while pending and count < MAX_ETC_ENTRIES:
        where = pending.pop()
        try:
            seen[where] = os.stat(where).st_mtime_ns
            entries = list(os.scandir(where))
        except OSError:
            continue
        for entry in entries:
            count += 1
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISLNK(mode):
                continue  # judged where it points
            closed = not mode & stat.S_IROTH or (stat.S_ISDIR(mode) and not mode & stat.S_IXOTH)
            if closed or stat.S_ISSOCK(mode):
                found.append(Path(entry.path))
            elif stat.S_ISDIR(mode):
                pending.append(entry.path)
    _ETC.update(dirs=seen, found=found, at=now, top=top)
    return list(found)


def readable_path(raw: object) -> tuple[Path, Path]:
    """Where a readable path is shown (`raw` normalised: `//srv/` is `/srv`) and what it
    shows (every link resolved, as the kernel will find it); ValueError saying why it cannot
    be one. Each of the two may not be: relative, with control characters, `.` or `..`; `/`;
    the host's /proc, /dev or /sys or in them (the daemon's environment is in /proc); a
    directory the sandbox blanks whole (/tmp, /var/tmp, /run: a path inside one is fine); a
    home directory, or a directory holding one (shell profiles that export keys, every
    credential store); Talos's own config, state, data or cache, in one, or holding one."""
    if not isinstance(raw, str | Path):
        raise ValueError(f"{str(raw)[:80]!r} is not an absolute path")
    text = str(raw)
    if not text.startswith("/") or len(text) > 4096:
        raise ValueError(f"{text[:80]!r} is not an absolute path")
    if any(ord(c) < 32 or c == "\x7f" for c in text):
        raise ValueError("a path must not contain control characters")
    parts = [p for p in text.split("/") if p]
    if ".." in parts or "." in parts:
        raise ValueError(f"{text!r}: give the path without . or .. in it")
    shown = Path("/" + "/".join(parts))
    real = Path(os.path.realpath(shown))
    named = f"{text!r}" if real == shown else f"{text!r} (that is {str(real)!r})"
    homes = [Path(p) for p in ("/root", "/home")] + _user_homes()
    homes += [Path(os.path.realpath(h)) for h in homes]
    own = [Path(os.path.realpath(p)) for p in talos_paths()] + talos_paths()
    for path in (shown, real):
        if path == Path("/"):
            raise ValueError(
                f"{named} would show everything: list the directories the commands need"
            )
        if any(path.is_relative_to(p) for p in NEVER_READABLE):
            raise ValueError(f"{named}: /proc, /dev and /sys are the sandbox's own")
        if str(path) in BLANKED:
            raise ValueError(f"{named} is the sandbox's own: name a directory inside it")
        if any(h.is_relative_to(path) for h in homes):
            raise ValueError(
                f"{named} is a home directory or holds one: name the directories "
                "in it that the commands need"
            )
        mine = next((o for o in own if o.is_relative_to(path) or path.is_relative_to(o)), None)
        if mine is not None:
            raise ValueError(f"{named} is, holds or lies in Talos's own files ({mine})")
    return shown, real


def readable_paths_problem(paths: Sequence[object]) -> str | None:
    """Why these cannot be readable paths (None: they can): `readable_path` of each."""
    for raw in paths:
        try:
            readable_path(raw)
        except ValueError as exc:
            return str(exc)
    return None


def toolchain(path: Path) -> tuple[Path, Path]:
    """(`path`, what it leads to) when a toolchain there may be shown; ValueError saying why
    not. A readable path's rules (`readable_path`: not `/`, a home or a directory holding one,
    /proc, Talos's own files...), and neither of the two may be a directory at the top
    (`/opt`), one of a home's SHARED_DIRS (`~/.config`), a credential store or in one."""
    shown, real = readable_path(path)
    homes = _user_homes()
    stores = [h / rel for h in homes for rel in CREDENTIAL_STORES]
    for each in (shown, real):
        if len(each.parts) <= 2:
            raise ValueError(f"{each} is at the top: it holds more than one toolchain")
        if any(each == h / d for h in homes for d in SHARED_DIRS):
            raise ValueError(f"{_tilde(each)} holds many programs' settings")
        store = next((c for c in stores if each.is_relative_to(c)), None)
        if store is not None:
            lies = "is" if each == store else f"lies in {_tilde(store)},"
            raise ValueError(f"{_tilde(each)} {lies} a credential store")
    return shown, real


def _toolchain_root(entry: Path, containers: set[Path]) -> Path:
    """The directory a program's directory belongs to: a `bin`, `sbin` or `shims` directory's
    parent (`~/.cargo/bin` -> `~/.cargo`, `/opt/node/bin` -> `/opt/node`), unless that parent
    holds more than one toolchain (a home, `/opt`, `~/.local`), else the directory itself."""
    parent = entry.parent
    if (
        entry.name in ("bin", "sbin", "shims")
        and parent not in containers
        and len(parent.parts) > 2
        and parent.name not in (".local", ".config")
    ):
        return parent
    return entry


def venv_home(root: Path) -> Path | None:
    """The Python a virtualenv was made from (the `home` its `pyvenv.cfg` names), resolved."""
    with contextlib.suppress(OSError, UnicodeDecodeError):
        for line in (root / "pyvenv.cfg").read_text().splitlines():
            name, _, value = line.partition("=")
            if name.strip() == "home" and os.path.isabs(value.strip()):
                return Path(os.path.realpath(value.strip()))
    return None


@dataclass(frozen=True)
class Toolchains:
    """What the programs on PATH need outside the system (`Sandbox._toolchains`)."""

    places: list[tuple[Path, Path]]  # (where it is shown, what is shown there), outer first
    env: dict[str, str]  # the TOOLCHAIN_ENV variables that name one of them
    refused: dict[Path, str]  # a toolchain not shown, and why


_TOOLS: dict[tuple[object, ...], Toolchains] = {}
MAX_TOOLCHAIN_KEYS = 64  # one per workspace a daemon serves, while PATH stays as it is
_TOOLS_LOCK = threading.Lock()


class Sandbox:
    """Runs commands for one workspace. `hidden`: more paths no command may see (the store).
    `readable`: what the person's settings show outside the workspace, read-only. `limits`:
    what one command may use (the machine's defaults when None)."""

    _probed: ClassVar[dict[str, SandboxState]] = {}  # by bwrap path: once per process

    def __init__(
        self,
        root: Path,
        *,
        hidden: Iterable[Path] = (),
        bwrap: str | None = None,
        readable: Iterable[Path] = (),
        limits: Limits | None = None,
    ):
        self.root = Path(root).resolve()
        if self._may_write(True):  # no program Talos runs is taken from what commands write
            on_host.add_workspace(self.root)
        self.bwrap = bwrap if bwrap is not None else on_host.program("bwrap")
        self.shell = on_host.program("bash") or "/bin/sh"
        self.extra_hidden = [Path(p) for p in hidden]
        self.readable = [Path(p) for p in readable]
        self.limits = limits or Limits.default()
        self._secrets = SecretsScan(self.root)
        self._covers = Covers(covers_file(self.root))  # covered once: covered while there
        # The workspace folders open inside this one (a daemon serving several sets it):
        # their `.talos` and `.git` are read-only for this one's commands.
        self.inner: Callable[[], Iterable[Path]] = lambda: ()

    def close(self) -> None:
        """Stop watching the workspace for secrets files (a later command watches again)."""
        self._secrets.close()

    def configured(self, *, readable: Iterable[Path], limits: Limits | None) -> Sandbox:
        """This sandbox with other readable paths and limits: a task's own, so a settings
        change while it runs does not reach its commands. The workspace's secrets watch and
        covers stay this one's (shared); close only this one."""
        view = copy.copy(self)
        view.readable = [Path(p) for p in readable]
        view.limits = limits or Limits.default()
        return view

    # ---------------------------------------------------------------- state
    def probe(self) -> SandboxState:
        """Can bwrap create its namespaces here? Asked once per process, then remembered."""
        if not self.bwrap:
            return SandboxState(False, f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}")
        cached = Sandbox._probed.get(self.bwrap)
        if cached is not None:
            return cached
        size = ["--size", str(lim.MIB)] if sizes_tmpfs(self.bwrap) else []
        argv = [
            self.bwrap,
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            *size,
            "--tmpfs",
            "/tmp",
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            "--cap-drop",
            "ALL",
            "--clearenv",
            "--",
            "true",
        ]
        try:
            done = subprocess.run(
                argv,
                env=allowed_env(SANDBOX_HOME),
                capture_output=True,
                timeout=10,
                stdin=subprocess.DEVNULL,
            )
            ok, why = done.returncode == 0, done.stderr.decode(errors="replace").strip()
        except (OSError, subprocess.TimeoutExpired) as exc:
            ok, why = False, str(exc)
        if ok:
            state = SandboxState(True, f"bubblewrap ({self.bwrap})")
        else:
            first = why.splitlines()[0] if why else "it failed"
            if os.getuid() == 0 and "uid map" in first and not _has_setfcap():
                hint = (
                    "as root without CAP_SETFCAP the kernel refuses to map uid 0 into a "
                    "user namespace: run Talos as an ordinary user, or as root with its "
                    "capabilities"
                )
            else:
                hint = (
                    "on Ubuntu 24.04+ allow unprivileged user namespaces for bwrap (an "
                    "AppArmor profile), in a container run it with --privileged or user "
                    "namespaces enabled"
                )
            state = SandboxState(
                False, f"bubblewrap cannot create a sandbox here ({first}); {hint}"
            )
            logger.warning("sandbox unavailable: %s", state.detail)
        Sandbox._probed[self.bwrap] = state
        return state

    # --------------------------------------------------------------- layout
    @staticmethod
    def _toolchains(workspace: Path | None = None) -> Toolchains:
        """What the programs on PATH need outside the system, read-only: Python itself, each
        PATH entry that lies outside the system (its toolchain: a `bin`, `sbin` or `shims`
        directory's parent, `~/.cargo/bin` -> `~/.cargo`, `/opt/node/bin` -> `/opt/node`,
        `/tmp/ci/.venv/bin` -> `/tmp/ci/.venv`, else the entry itself; `~/.local/bin` with
        `~/.local/lib` beside it, never all of `~/.local`), the toolchain of each program
        on PATH that is a link leading out of the system (`/usr/local/bin/node` ->
        `/opt/node/bin/node`, `/usr/bin/java` -> `/etc/alternatives/java` -> `/opt/jdk/...`),
        the Python each virtualenv among them was made from, and what their programs need
        beside them (`~/.rustup` with `~/.cargo`). Each is judged as named and as resolved
        (`toolchain`: never a home, `/`, `~/.config`, a credential store...), and shown at
        both places; the TOOLCHAIN_ENV variables that name one are set (`~/.pyenv` gives
        PYENV_ROOT, the default a pyenv shim would look for under the sandbox's own HOME).
        Never where a link or `pyvenv.cfg` in the `workspace` leads (a PATH entry there,
        `.venv/bin`, is the repository's: it could name any directory). Remembered while
        PATH, its directories and those variables are unchanged."""
        entries = [Path(p) for p in path_entries()]
        home = Path.home()
        where = {
            var: os.environ.get(var) or (str(home / default) if default else "")
            for var, default in TOOLCHAIN_ENV.items()
        }
        watched = [*entries, Path("/etc/alternatives")]
        key: tuple[object, ...] = (sys.prefix, sys.base_prefix, workspace, *where.values())
        key += (*_mtimes(watched), *(os.path.realpath(e) for e in entries))
        cached = _TOOLS.get(key)  # commands are laid out in worker threads: one look
        if cached is not None:
            return cached
        system = system_shown()
        containers = {*_user_homes(), *(Path(p) for p in BLANKED), Path("/")}

        def outside(path: Path) -> bool:
            return not any(path.is_relative_to(s) for s in system)

        places: list[tuple[Path, Path]] = []
        refused: dict[Path, str] = {}

        def want(path: Path) -> None:
            if not outside(path) or path in refused or any(path == s for s, _ in places):
                return
            try:
                shown, real = toolchain(path)
                if workspace is not None and real.is_relative_to(workspace) and real != shown:
                    raise ValueError(f"{path} leads into the workspace: its .env would show")
            except ValueError as exc:
                refused[path] = str(exc)
                logger.warning("not shown to commands: %s", exc)
                return
            if os.path.isdir(real):  # else gone, or not this user's to enter
                places.extend([(shown, real)] + ([(real, real)] if outside(real) else []))

        def visible(real: Path) -> bool:
            return not outside(real) or any(real.is_relative_to(r) for _, r in places)

        def followed(path: Path) -> bool:  # shown (or the system), and not the repository's
            real = Path(os.path.realpath(path))
            in_workspace = workspace is not None and real.is_relative_to(workspace)
            return visible(real) and not in_workspace

        for entry in entries:
            want(_toolchain_root(entry, containers))
            if entry.parent.name == ".local" and entry.name == "bin":
                want(entry.parent / "lib")
        for var, other in COMPANIONS.items():
            if where[var] and where[other] and any(str(s) == where[var] for s, _ in places):
                want(Path(where[other]))
        want(Path(sys.base_prefix))
        want(Path(sys.prefix))
        for entry in entries:  # programs that are links out of the system
            if not followed(entry):
                continue
            try:
                links = [e.path for e in os.scandir(entry) if e.is_symlink()]
            except OSError:
                continue
            for link in links:
                target = Path(os.path.realpath(link))
                if not visible(target):
                    want(_toolchain_root(target.parent, containers))
        for _, real in list(places):  # the Python each virtualenv was made from
            python = venv_home(real) if followed(real) else None
            if python is not None and not visible(python):
                want(_toolchain_root(python, containers))
        out: list[tuple[Path, Path]] = []
        for shown, real in sorted(dict.fromkeys(places), key=lambda p: len(p[0].parts)):
            if not any(
                shown.is_relative_to(s) and real == r / shown.relative_to(s) for s, r in out
            ):  # else visible there already
                out.append((shown, real))
        seen = [p for pair in out for p in pair]
        env = {
            var: value
            for var, value in where.items()
            if os.path.isabs(value)
            and ".." not in Path(value).parts
            and any(Path(value).is_relative_to(p) for p in seen)
        }
        found = Toolchains(out, env, refused)
        with _TOOLS_LOCK:
            while len(_TOOLS) >= MAX_TOOLCHAIN_KEYS:  # the oldest first: stale ones age out
                _TOOLS.pop(next(iter(_TOOLS)))
            _TOOLS[key] = found
        return found

    def not_found(self, name: str) -> tuple[bool, str]:
        """Why a command finds no `name` in the sandbox, and what to do: (whether it is
        installed where Talos can tell, the hint). On the daemon's PATH, in a directory not
        shown (and why), or under the home in a toolchain's usual place but not on PATH."""
        path = os.pathsep.join(path_entries())
        host = shutil.which(name, path=path)
        if host is not None:
            where = Path(host).parent
            refused = self._toolchains(self.root).refused.items()
            why = next((r for root, r in refused if where.is_relative_to(root)), None)
            return True, (
                f"{name} is not on the sandbox's PATH: it is installed at {_tilde(host)}, "
                f"which the sandbox does not show{f' ({why})' if why else ''}; put it, or "
                "a link to it, in a directory the sandbox shows, such as ~/.local/bin"
            )
        home = Path.home()
        for rel in USUAL_BINS:
            for found in sorted(home.glob(f"{rel}/{name}")):
                if found.is_file() and os.access(found, os.X_OK):
                    return True, (
                        f"{name} is not on the PATH Talos was started with ({path}); it is "
                        f"installed at {_tilde(found)}: start Talos (or the editor that "
                        f"starts it) with {_tilde(found.parent)} on PATH, and the sandbox "
                        "shows it, read-only"
                    )
        return False, f"{name} is not installed, or not on the PATH Talos was started with ({path})"

    def _hidden(self) -> list[Path]:
        """What no command may see: the credential stores, the system's secrets, Talos's own
        files; and, for each of the first and last that is a link or lies behind one (`~/.aws
        -> /data/aws`), what it leads to, which is hidden wherever it is in sight."""
        paths = [u / rel for u in _user_homes() for rel in CREDENTIAL_STORES]
        mine = [*paths, *talos_paths(), *self.extra_hidden]
        targets = [
            Path(r) for p in mine if os.path.lexists(p) and (r := os.path.realpath(p)) != str(p)
        ]
        system = [Path(p) for p in SYSTEM_SECRETS] + sorted(Path("/etc/ssh").glob("ssh_host_*key"))
        every = [*mine, *targets, *system, *etc_secrets()]
        return list(dict.fromkeys(every))

    def _outside(
        self, network: bool
    ) -> tuple[list[str], list[Path], list[tuple[Path, Path]], dict[str, str]]:
        """The sandbox outside the workspace: bwrap's arguments, and what they show (a hidden
        path elsewhere is already out of sight). On bwrap's empty root (made read-only at the
        end, `argv`): the system read-only, a new /dev (read-only but for its sized /dev/shm)
        and /proc, sized tmpfs for /tmp, /var/tmp, /run and every home, then the toolchains on
        PATH and the person's readable paths, read-only. Also what each of those that is
        (or lies behind) a link shows, and where: (real, shown); and the toolchains'
        variables."""
        sizes = self.limits if sizes_tmpfs(self.bwrap or "") else None

        def tmpfs(path: str, size: int) -> list[str]:
            return [*(["--size", str(size)] if sizes else []), "--tmpfs", path]

        args: list[str] = []
        for top in SYSTEM_DIRS:
            if os.path.islink(top):
                args += ["--symlink", os.readlink(top), top]
            elif os.path.isdir(top):
                args += ["--ro-bind", top, top]
        shared = min(self.limits.tmp, lim.SHARED_TMPFS)
        args += [
            "--dev",
            "/dev",
            *tmpfs("/dev/shm", shared),
            "--remount-ro",
            "/dev",
            "--proc",
            "/proc",
            *tmpfs("/tmp", self.limits.tmp),
            "--dir",
            SANDBOX_HOME,
            *tmpfs("/run", lim.SMALL_TMPFS),
        ]
        if os.path.isdir("/var"):
            args += ["--dir", "/var"]
            with contextlib.suppress(OSError):
                for entry in sorted(os.scandir("/var"), key=lambda e: e.name):
                    if entry.is_symlink():
                        args += ["--symlink", os.readlink(entry.path), entry.path]
            args += [a for p in SYSTEM_VAR if os.path.isdir(p) for a in ("--ro-bind", p, p)]
            args += tmpfs("/var/tmp", shared)
        resolv = os.path.realpath("/etc/resolv.conf")  # systemd-resolved keeps it in /run
        if network and resolv.startswith("/run/") and os.path.exists(resolv):
            args += ["--ro-bind", resolv, resolv]
        for home in _homes():
            args += tmpfs(str(home), lim.SMALL_TMPFS)
        tools = self._toolchains(self.root)
        places = [*tools.places, *self._readable()]
        for shown, real in places:  # what it shows, bound where it was named
            args += ["--ro-bind", str(real), str(shown)]
        aliases = [(real, shown) for shown, real in places if real != shown]
        return args, [*system_shown(), *(shown for shown, _ in places)], aliases, tools.env

    def _readable(self) -> list[tuple[Path, Path]]:
        """The readable paths, checked again and resolved as they are now (a link may have
        been pointed elsewhere since the settings were read): one refused is left out."""
        out = []
        for raw in self.readable:
            try:
                shown, real = readable_path(raw)
            except ValueError as exc:
                logger.warning("a readable path is left out: %s", exc)
                continue
            if os.path.exists(real):
                out.append((shown, real))
        return out

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
            self.root,
            writable=self._may_write(writable),
            secrets=secrets,
            covers=self._covers,
            empty_file=_empty_file(),
            repositories=self._secrets.repositories,
            inner=self.inner(),
        )

    def argv(
        self,
        command: str,
        *,
        writable: bool,
        network: bool,
        layout: Layout | None = None,
        report: int | None = None,
        env: dict[str, str] | None = None,
    ) -> list[str]:
        """The bwrap command line that runs `command` (with `bash -c`, under the limits); the
        workspace's part is `layout` (`run` passes its own). Without one, a layout is made and
        undone at once: the command line is then for looking at only. `report`: the pipe the
        launcher says on whether the command was killed by a signal (`limits.launcher`).
        `env`: more variables for the command (an MCP server's configured `env`), set last."""
        assert self.bwrap, "no bwrap"
        if layout is None:
            layout = self.layout(writable)
            layout.after()
        outside, shown, aliases, tool_env = self._outside(network)
        args = [self.bwrap, *outside]
        args += layout.args  # the workspace, its secrets covered (in it: `Sandbox.layout`)
        shown.append(self.root)
        in_sight = _within_any(shown)
        inside = f"{self.root}/"
        for path in [*self._hidden(), *layout.outside]:
            places = [
                path,
                *(
                    seen / path.relative_to(real)
                    for real, seen in aliases
                    if path.is_relative_to(real)
                ),
            ]
            places = list(dict.fromkeys(places))
            # covered by the layout, or out of sight already
            places = [p for p in places if not str(p).startswith(inside) and in_sight(p)]
            if not places or path == self.root:
                continue
            try:
                if stat.S_ISLNK(path.lstat().st_mode):
                    continue  # what it leads to is in the list too
                is_dir = path.is_dir()
            except OSError:  # gone, or not ours to look at
                continue
            for place in places:
                if is_dir:
                    args += ["--tmpfs", str(place), "--remount-ro", str(place)]
                else:  # an empty regular file: readers see nothing, git sees a plain file
                    args += ["--ro-bind", _empty_file(), str(place)]
        args += ["--remount-ro", "/"]  # last: bwrap's root tmpfs, once every mount point is made
        args += ["--chdir", str(self.root), "--unshare-all"]
        if network:
            args.append("--share-net")
        args += ["--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv"]
        every = {**allowed_env(SANDBOX_HOME), **tool_env, **layout.env, **(env or {})}
        for key, value in every.items():
            args += ["--setenv", key, value]
        return [*args, "--", *lim.launcher(self.shell, command, self.limits, report)]

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
        with a private temporary HOME. Sandboxed, under the limits, and what the workspace's
        layout undid after the command (a link planted in `.git` removed...) is said at the
        end of its output."""
        layout: Layout | None = None
        cage: lim.Cage | None = None
        report = list(os.pipe()) if sandboxed else None  # the launcher's word on a signal
        with tempfile.TemporaryDirectory(prefix="talos-home-") as private_home:
            try:
                if report is not None:  # the layout walks the workspace: off the event loop
                    layout, argv, cage = await asyncio.to_thread(
                        functools.partial(self._planned, command, writable, network, report[1])
                    )
                    env = allowed_env(SANDBOX_HOME)
                else:
                    argv, env = [self.shell, "-c", command], allowed_env(private_home)
                try:
                    proc = await asyncio.create_subprocess_exec(
                        *argv,
                        cwd=self.root,
                        env=env,
                        stdin=asyncio.subprocess.DEVNULL,
                        stdout=asyncio.subprocess.PIPE,
                        stderr=asyncio.subprocess.STDOUT,
                        start_new_session=True,  # its own process group: a kill takes all
                        pass_fds=tuple(report[1:]) if report else (),
                    )
                finally:
                    if report is not None:
                        os.close(report[1])
                        report[1] = -1
                try:
                    if report is not None:
                        result = await _watched(
                            proc, self.limits, cage, timeout, max_bytes, report[0]
                        )
                    else:
                        result = await _collect(proc, timeout, max_bytes)
                except asyncio.CancelledError:  # the task was cancelled: the command goes too
                    await kill_process(proc)
                    raise
            finally:  # stand-ins released, .git checked: even when the task is cancelled
                for fd in report or ():
                    if fd >= 0:  # the write end is closed already once the command started
                        os.close(fd)
                notes = []
                if layout is not None:
                    notes = await asyncio.shield(asyncio.to_thread(self._undo, layout))
                if cage is not None:
                    await asyncio.to_thread(cage.close)
        for note in notes:  # names a command chose: shown escaped, to the model and the person
            shown = visible(note, single_line=True)
            logger.warning("%s: after a command, %s", self.root, shown)
            result.output += f"\n[talos: {shown}]"
        if sandboxed and result.exit_code == 127:  # command not found: which, and why
            for name in list(dict.fromkeys(NOT_FOUND.findall(result.output)))[:3]:
                _, hint = await asyncio.to_thread(self.not_found, name)
                result.output += f"\n[talos: {visible(hint, single_line=True)}]"
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

    def _planned(
        self, command: str, writable: bool, network: bool, report: int
    ) -> tuple[Layout, list[str], lim.Cage | None]:
        """The layout, and `argv` under the limits, in a pids cgroup of its own where one can
        be made. What was made is undone if the rest fails."""
        try:
            layout = self.layout(writable)
        except workspace_layout.TooManyMounts as exc:
            raise SandboxError(f"not run: {exc}") from None
        cage = None
        try:
            found = lim.hierarchies()
            if found:
                try:
                    cage = lim.Cage(self.limits, found)
                except OSError as exc:  # reported; the kernel's limits and the watch still hold
                    logger.warning("no cgroup for this command: %s", exc)
            argv = self.argv(
                command, writable=writable, network=network, layout=layout, report=report
            )
            return layout, (cage.wrap(argv) if cage is not None else argv), cage
        except BaseException:
            layout.after()
            if cage is not None:
                cage.close()
            raise


async def _watched(
    proc: asyncio.subprocess.Process,
    limits: Limits,
    cage: lim.Cage | None,
    timeout: float,
    cap: int,
    report: int,
) -> CommandResult:
    """`_collect`, with the command watched (`limits.Watch`) and killed at a limit; a limit the
    kernel enforced on its own (SIGXCPU, SIGXFSZ, a refused fork, an out-of-memory kill) is
    found when the command ends. Either way the result says which limit."""
    watch = lim.Watch(proc.pid, limits, cage)
    reached: list[str] = []

    async def watching() -> None:
        while True:
            await asyncio.sleep(lim.WATCH_EVERY)
            hit = await asyncio.to_thread(watch.sample)
            if hit:
                reached.append(hit)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                return

    watcher = asyncio.ensure_future(watching())
    try:
        result = await _collect(proc, timeout, cap)
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    if not reached and result.killed is None and result.exit_code:
        late = cage.hit() if cage is not None else None
        signalled = _signalled(report) or lim.shell_reported(result.output, result.exit_code)
        late = late or lim.from_exit(result.exit_code, signalled)
        if late:
            reached.append(late)
    if not reached or result.killed is not None:
        return result
    said = lim.message(reached[0], limits)
    logger.warning("a command was stopped: %s", said)
    return CommandResult(
        None, f"{result.output}\n[killed: {said}]", result.total_bytes, killed="limit", limit=said
    )


def _signalled(report: int) -> bool:
    """Whether the launcher wrote anything (it writes only when the command was killed by
    a signal; it has exited, so what it wrote is there)."""
    os.set_blocking(report, False)
    try:
        return bool(os.read(report, 4096))
    except OSError:
        return False


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
