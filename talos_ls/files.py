"""Reading and writing workspace files without being fooled by what the workspace holds.

A workspace may contain a FIFO (opening it blocks for ever), a symlink to `/dev/zero` (reading
it never ends), a file far too large to hold, or a symlink planted where a file is about to be
written. Everything Talos reads from a workspace (the agent's tools, the index, rules files,
skills) goes through `open_regular`, which opens without blocking and refuses anything but a
regular file; everything it writes goes through `atomic_write`, which never follows a symlink.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path
from typing import BinaryIO

from .errors import TalosError

SECRET_FILE_GLOBS = (".env*",)  # dotenv and direnv files: .env, .env.local, .env-prod, .envrc


def is_secrets_file(name: str) -> bool:
    """`.env`, `.env.local`, `.env_prod`, `.envrc`...: files the model never reads and commands
    never see (a directory of that name, a virtualenv say, is not one). Any case: on macOS
    and Windows `.ENV` is `.env`."""
    return name.lower().startswith(".env")


class NotRegularFile(TalosError, OSError):
    """A FIFO, a device, a socket or a directory where a regular file was expected."""


class FileTooLarge(TalosError, OSError):
    """A file over the size limit of the reader."""


def open_regular(path: str | os.PathLike[str], *, follow_symlinks: bool = True) -> BinaryIO:
    """Open a regular file for reading. Never blocks (a FIFO is refused, not waited on)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    if not follow_symlinks:
        flags |= os.O_NOFOLLOW
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(f"{os.fspath(path)} is not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(
    path: str | os.PathLike[str], limit: int, *, follow_symlinks: bool = True
) -> bytes:
    """The whole content of a regular file of at most `limit` bytes; FileTooLarge beyond."""
    with open_regular(path, follow_symlinks=follow_symlinks) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > limit:
            raise FileTooLarge(f"{os.fspath(path)} is {size} bytes (the limit is {limit})")
        data = fh.read(limit + 1)  # the file may have grown since fstat
    if len(data) > limit:
        raise FileTooLarge(f"{os.fspath(path)} is over {limit} bytes")
    return data


def _open_dir(parent_fd: int, name: str, create: bool) -> int:
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(name, flags, dir_fd=parent_fd)
    except FileNotFoundError:
        if not create:
            raise
        os.mkdir(name, 0o777, dir_fd=parent_fd)
        return os.open(name, flags, dir_fd=parent_fd)
    except OSError as exc:  # ELOOP or ENOTDIR: a symlink or a file where a directory should be
        raise NotRegularFile(f"{name!r} is not a directory (a symlink is never followed)") from exc


def atomic_write(root: Path, rel: str, data: bytes) -> Path:
    """Write `root/rel` so that a crash leaves the old content or the new, never a mix.

    The directories are walked from `root` one at a time without following a symlink; the new
    content goes to a temp file of a unique name created with O_EXCL|O_NOFOLLOW beside the
    target, is fsynced, and replaces the target in one rename (which replaces a symlink planted
    at the target's name rather than writing through it). The file keeps its mode."""
    parts = Path(rel).parts
    if not parts or any(p in ("", ".", "..") for p in parts) or Path(rel).is_absolute():
        raise ValueError(f"not a plain relative path: {rel!r}")
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            child = _open_dir(fd, part, create=True)
            os.close(fd)
            fd = child
        name = parts[-1]
        try:
            current = os.stat(name, dir_fd=fd, follow_symlinks=False)
            mode = stat.S_IMODE(current.st_mode) if stat.S_ISREG(current.st_mode) else None
        except FileNotFoundError:
            mode = None
        if mode is None:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        tmp = f".{name[:100]}.{secrets.token_hex(8)}.talos-tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        tfd = os.open(tmp, flags, 0o600, dir_fd=fd)
        try:
            with os.fdopen(tfd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fchmod(fh.fileno(), mode)
                os.fsync(fh.fileno())
            os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=fd)
            raise
        os.fsync(fd)  # the rename itself survives a crash
    finally:
        os.close(fd)
    return root.joinpath(*parts)
