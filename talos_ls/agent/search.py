"""`search`: a regular expression over the workspace's files, that cannot hang or escape.

The pattern comes from the model, so it must not be able to stall the daemon: it never meets
Python's backtracking `re`. With ripgrep (`rg`) installed, ripgrep searches (linear-time
regex, `.gitignore`-aware, symlinks not followed, only regular files, no config file read);
otherwise a bounded Python search over the workspace's own listing with RE2 (the `google-re2`
wheel, also linear-time), in a worker thread, with a deadline. Either way `.env*` files and
files over MAX_FILE_BYTES are never searched, and the model gets `path:line: text`.
"""

from __future__ import annotations

import asyncio
import tempfile
import time

import re2

from ..files import SECRET_FILE_GLOBS, FileTooLarge, NotRegularFile, is_secrets_file, read_regular
from . import on_host
from .sandbox import kill_process
from .workspace import ALWAYS_SKIPPED, SandboxError, Workspace

MAX_FILE_BYTES = 2 * 1024 * 1024
MAX_PATTERN = 1000
LINE_CHARS = 200
DEADLINE = 20.0  # seconds


def _options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # RE2 would print parse errors on stderr
    return options


def _hit(rel: str, number: int | str, line: str) -> str:
    return f"{rel}:{number}: {line.rstrip()[:LINE_CHARS]}"


def _check(workspace: Workspace, pattern: str, start: str) -> str:
    if not pattern or len(pattern) > MAX_PATTERN:
        raise SandboxError(f"the pattern must be 1 to {MAX_PATTERN} characters")
    real = workspace.resolve(start)
    if not (real.is_dir() or real.is_file()):
        raise SandboxError(f"{start!r} is neither a directory nor a regular file")
    try:
        re2.compile(pattern, _options())
    except re2.error as exc:
        message = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        raise SandboxError(
            f"invalid regex {pattern!r}: {message} (RE2 syntax: no backreferences or lookaround)"
        ) from None
    return workspace.relative(real)


async def search(
    workspace: Workspace,
    pattern: str,
    start: str = ".",
    limit: int = 100,
    *,
    rg: str | None = "auto",
    deadline: float = DEADLINE,
) -> list[str]:
    """`path:line: text` for lines matching `pattern`, at most `limit`."""
    rel = _check(workspace, pattern, start)
    limit = max(1, min(int(limit), 1000))
    binary = on_host.program("rg") if rg == "auto" else rg
    if binary:
        return await _ripgrep(binary, workspace, pattern, rel, limit, deadline)
    return await asyncio.to_thread(_python, workspace, pattern, rel, limit, deadline)


async def _ripgrep(
    binary: str, workspace: Workspace, pattern: str, rel: str, limit: int, deadline: float
) -> list[str]:
    """ripgrep reads no ignore file itself (`--no-ignore`: a FIFO named `.gitignore` would
    stall it, a link to /dev/zero would fill memory): it gets the root `.gitignore` as read
    safely by the workspace, as the fallback uses it."""
    globs = [*(f"!{g}" for g in SECRET_FILE_GLOBS), *(f"!{d}/" for d in sorted(ALWAYS_SKIPPED))]
    with tempfile.NamedTemporaryFile("w", prefix="talos-ignore-", suffix=".txt") as ignore:
        ignore.write("\n".join(workspace.ignore_lines()) + "\n")
        ignore.flush()
        argv = [
            binary,
            "--no-config",
            "--no-ignore",
            "--ignore-file",
            ignore.name,
            "--hidden",
            "--with-filename",
            "--line-number",
            "--no-heading",
            "--null",
            "--color",
            "never",
            "--max-columns",
            str(LINE_CHARS),
            "--max-columns-preview",
            "--max-filesize",
            str(MAX_FILE_BYTES),
            *(arg for g in globs for arg in ("--iglob", g)),
            "--regexp",
            pattern,
            "--",
            rel,
        ]
        # Not a session of its own: rg starts no children, and should die with us.
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=workspace.root,
            env={"PATH": "/usr/bin:/bin"},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        try:
            return await _read_hits(proc, limit, deadline)
        finally:
            await kill_process(proc, group=False)


async def _read_hits(proc: asyncio.subprocess.Process, limit: int, deadline: float) -> list[str]:
    assert proc.stdout is not None
    hits: list[str] = []
    try:
        async with asyncio.timeout(deadline):
            while len(hits) < limit:
                raw = await proc.stdout.readline()
                if not raw:
                    break
                path, _, rest = raw.decode("utf-8", errors="replace").partition("\0")
                number, _, line = rest.partition(":")
                hits.append(_hit(path.removeprefix("./"), number, line))
    except TimeoutError:
        hits.append(f"[search stopped after {deadline:.0f} s; narrow the pattern or the path]")
    return hits


def _python(workspace: Workspace, pattern: str, rel: str, limit: int, deadline: float) -> list[str]:
    regex = re2.compile(pattern, _options())
    stop = time.monotonic() + deadline
    hits: list[str] = []
    for path in workspace.walk(rel):
        name = path.rsplit("/", 1)[-1]
        if is_secrets_file(name):
            continue
        if time.monotonic() > stop:
            hits.append(f"[search stopped after {deadline:.0f} s; narrow the pattern or the path]")
            break
        try:
            text = read_regular(workspace.root / path, MAX_FILE_BYTES, follow_symlinks=False)
            lines = text.decode("utf-8", errors="strict").splitlines()
        except (FileTooLarge, NotRegularFile, UnicodeDecodeError, OSError):
            continue  # too large, binary, or gone: not searched
        for number, line in enumerate(lines, 1):
            if regex.search(line):
                hits.append(_hit(path, number, line))
                if len(hits) >= limit:
                    return hits
    return hits
