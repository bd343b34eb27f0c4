"""System binaries the tests need that pip cannot provide (bwrap, rg, nvim).

A test that needs one skips with the install command as its reason, so the README's test
command passes on a machine with only Python; with TALOS_TEST_REQUIRE_ALL=1 (set by .ci/run
after installing them) the skip is a failure instead, so nothing skips in CI. Tests of the
fallbacks hide the binaries (`path_without`) rather than skip.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.context
import os
import secrets
import shutil
from pathlib import Path
from typing import NoReturn

import pytest

BWRAP_INSTALL = "apt-get install -y bubblewrap"
RG_INSTALL = "apt-get install -y ripgrep"


def unavailable(reason: str) -> NoReturn:
    """Skip for something missing that pip cannot provide (`reason` says how to get it); a
    failure under TALOS_TEST_REQUIRE_ALL=1."""
    if os.environ.get("TALOS_TEST_REQUIRE_ALL") == "1":
        pytest.fail(
            f"{reason} (TALOS_TEST_REQUIRE_ALL=1 turns this skip into a failure)", pytrace=False
        )
    pytest.skip(reason)


def require_binary(name: str, install: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    unavailable(f"needs {name}: {install}")


def sandbox_works() -> bool:
    """Whether a server started now runs commands in the sandbox: bwrap is on PATH and can
    create its namespaces here. For tests that hold either way but expect other words."""
    from talos_ls.agent.sandbox import Sandbox

    binary = shutil.which("bwrap")
    return binary is not None and Sandbox(Path("/"), bwrap=binary).probe().available


def require_sandbox() -> str:
    """bwrap, and able to create its namespaces here."""
    from talos_ls.agent.sandbox import Sandbox

    binary = require_binary("bwrap", BWRAP_INSTALL)
    state = Sandbox(Path("/"), bwrap=binary).probe()
    if not state.available:
        if os.environ.get("TALOS_TEST_REQUIRE_ALL") == "1":
            pytest.fail(state.detail, pytrace=False)
        pytest.skip(state.detail)
    return binary


def path_without(tmp: Path, *names: str) -> str:
    """A PATH with every program of the current one except `names`: a directory of links."""
    hidden = tmp / ("path-without-" + "-".join(names))
    hidden.mkdir(parents=True, exist_ok=True)
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        try:
            programs = list(Path(entry).iterdir())
        except OSError:
            continue
        for program in programs:
            link = hidden / program.name
            if program.name in names or link.exists() or link.is_symlink():
                continue
            if os.access(program, os.X_OK) and not program.is_dir():
                link.symlink_to(program)
    return str(hidden)


def as_ordinary_user() -> list[str]:
    """A prefix that starts a program with no capabilities when the tests run as root: the
    same user then, but as an ordinary one, whom a non-dumpable process keeps out of its
    `/proc/<pid>/environ` (root's capabilities read it whatever Talos does)."""
    if os.geteuid() != 0:
        return []
    setpriv = require_binary("setpriv", "apt-get install -y util-linux")
    return [setpriv, "--bounding-set=-all", "--inh-caps=-all", "--"]


def unique_seconds(base: int) -> str:
    """`base` seconds, spelt so that no other process on the machine has it on its command line
    (`sleep 300.418207`): a test looking for leftover processes with `pgrep -f` finds only its
    own, even with other test sessions running beside it."""
    return f"{base}.{secrets.randbelow(10**9):09d}"


def processes() -> multiprocessing.context.BaseContext:
    """Where tests start real OS processes that share a store: the fork server, not `spawn`,
    so each of them (eight at a time, dozens in the suite) starts as a fork of a process that
    has already imported Talos and the test modules instead of importing them again. Each is
    still a separate process with its own connections, as a daemon is."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(
        [
            "talos_ls.store",
            "talos_ls.host",
            "tests.test_multiprocess",
            "tests.test_host",
            "tests.test_redis_faults",
        ]
    )
    return ctx


ORDINARY_UID = 65534  # nobody: a real ordinary user, whom bwrap serves as it serves anyone


def as_another_user() -> list[str]:
    """A prefix that starts a program as an ordinary user (uid and gid 65534, no other groups)
    when the tests run as root: unlike `as_ordinary_user`, one the kernel lets start a sandbox
    and counts as an ordinary user (RLIMIT_NPROC applies). [] when not root (the tests already
    run as one)."""
    if os.geteuid() != 0:
        return []
    setpriv = require_binary("setpriv", "apt-get install -y util-linux")
    return [setpriv, f"--reuid={ORDINARY_UID}", f"--regid={ORDINARY_UID}", "--clear-groups", "--"]


def give_to(uid: int, *paths: Path) -> None:
    """`chown -R uid:uid` each path (a tree a test built as root, for `as_another_user`)."""
    for top in paths:
        os.chown(top, uid, uid, follow_symlinks=False)
        for where, dirs, files in os.walk(top):
            for name in dirs + files:
                os.chown(os.path.join(where, name), uid, uid, follow_symlinks=False)
