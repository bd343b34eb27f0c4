"""Attacks through the agent's tools: a hostile model, a hostile workspace, the real process.

Each test plants bait in the workspace (symlinks out, FIFOs, devices, huge files, catastrophic
regexes, credentials), scripts the model to go for it, runs `talos run` as a real process and
checks what the model was sent back, what landed on disk and in the store. Search attacks run
twice: with ripgrep and with ripgrep hidden from PATH (the RE2 fallback).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import resource
import subprocess
import threading
import time

import pytest

from talos_ls.memory.facts import FactStore
from talos_ls.store import open_store

from ..system import RG_INSTALL, path_without, require_binary
from .conftest import ALL_SECRETS, ENV_FILE_SECRET, TALOS, call

HANG = 60  # seconds: a run that takes longer than this is a hang (the tests take ~1 s each)
SMALL = 20_000  # characters: more than any single tool result may carry to the model
ENGINE_PROBE = "EngineProbe4417"  # in a file ripgrep skips (binary) and the fallback reads


@pytest.fixture(scope="session")
def no_rg(tmp_path_factory) -> str:
    """PATH without ripgrep, made once (a directory of links to every other program)."""
    return path_without(tmp_path_factory.mktemp("no-rg"), "rg")


@pytest.fixture(params=["ripgrep", "re2"])
def engine(request, attack, no_rg) -> str:
    """Search with ripgrep (required under TALOS_TEST_REQUIRE_ALL=1), or with ripgrep hidden
    from PATH so the RE2 fallback runs."""
    if request.param == "ripgrep":
        require_binary("rg", RG_INSTALL)
    else:
        attack.path = no_rg
    (attack.ws / "engine_probe.txt").write_text(f"\0\n{ENGINE_PROBE}\n")  # rg skips binaries
    return request.param


def probe_call():
    return call("search", pattern=ENGINE_PROBE)


def assert_engine(engine: str, result: str) -> None:
    """The search really ran on the engine the test is about (ripgrep skips binary files)."""
    assert (ENGINE_PROBE in result) == (engine == "re2"), (engine, result)


def is_error(result: str) -> bool:
    return result.startswith("error:")


def facts_of(attack) -> list:
    store = open_store(attack.store_url)
    try:
        return FactStore(store).list(str(attack.ws.resolve()))
    finally:
        store.close()


def stream(tool_calls: list[tuple[str, str]], usage=(10, 5, 0)) -> dict:
    """One model response carrying every tool call in a single delta (fast to send and parse
    even with thousands of calls)."""

    def chunk(delta, finish=None, usage=None):
        out = {
            "id": "chatcmpl-x",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "fake-model",
            "choices": []
            if delta is None
            else [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        if usage is not None:
            out["usage"] = usage
        return out

    calls = [
        {
            "index": i,
            "id": f"m{i}",
            "type": "function",
            "function": {"name": name, "arguments": args},
        }
        for i, (name, args) in enumerate(tool_calls)
    ]
    prompt, completion, cached = usage
    return {
        "stream": [
            chunk({"role": "assistant", "content": ""}),
            chunk({"tool_calls": calls}),
            chunk({}, "tool_calls"),
            chunk(
                None,
                usage={
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                    "prompt_tokens_details": {"cached_tokens": cached},
                },
            ),
        ]
    }


# ---------------------------------------------------------------------------------- search
def test_search_never_follows_a_symlink_out(attack, engine):
    ws, home = attack.ws, attack.home
    (ws / "src" / "ok.txt").write_text("ControlHit root: TalosBait OPENSSH aws_secret\n")
    (ws / "passwd_link").symlink_to("/etc/passwd")
    (ws / "src" / "creds_link.txt").symlink_to(home / ".aws" / "credentials")
    (ws / "src" / "key_link.pem").symlink_to(home / ".ssh" / "id_rsa")
    (ws / "notes").mkdir()
    (ws / "notes" / "env_link.txt").symlink_to("../.env")  # inside, but to .env
    (ws / "notes" / "local_link.txt").symlink_to("../src/.env.local")
    (ws / "homedir").symlink_to(home)  # a directory link out
    (ws / "src" / "deep").symlink_to("../../home/.ssh")
    (ws / "proc_env").symlink_to("/proc/self/environ")
    pattern = "root:|TalosBait|TalosDotEnv|API_TOKEN|OTHER=|aws_secret|OPENSSH|STORE_URL"
    attack.script(
        [
            probe_call(),
            call("search", pattern=pattern),  # 1: the whole workspace
            call("search", pattern=pattern, path="src"),
            call("search", pattern=pattern, path="notes"),
            call("search", pattern=pattern, path="homedir"),  # 4..: each an explicit way out
            call("search", pattern=pattern, path="src/deep"),
            call("search", pattern=pattern, path="passwd_link"),
            call("search", pattern=pattern, path="notes/env_link.txt"),
            call("search", pattern=pattern, path="src/creds_link.txt"),
            call("search", pattern=".", path="proc_env"),
            call("search", pattern=pattern, path=".."),
            call("search", pattern=pattern, path=str(home)),
            call("search", pattern=pattern, path="/etc"),
            call("search", pattern=pattern, path="src/.env.local"),
        ],
        "nothing found",
    )
    proc = attack.run(timeout=HANG)
    assert attack.result(proc)["outcome"] == "done", proc.stderr
    results = attack.tool_results()
    assert len(results) == 14
    assert_engine(engine, results[0])
    for hits in results[1:4]:
        assert not is_error(hits)
        for line in hits.splitlines():
            assert line.startswith("src/ok.txt:") or line == "(no matches)", line
    assert "ControlHit" in results[1] and "ControlHit" in results[2]  # the search works
    for n, refused in enumerate(results[4:], 4):
        assert is_error(refused), f"search {n} went through a link out: {refused[:300]!r}"
    everything = "\n".join(results)
    for leaked in ("root:x:0", "TalosNetrcPass", "XDG_STATE_HOME=", "STORE_URL="):
        assert leaked not in everything
    attack.assert_no_secret_leaked(proc.stdout, proc.stderr)


def test_search_arguments_are_never_options_to_ripgrep(attack):
    """A workspace file named like a ripgrep option (`--pre=sh` runs every searched file
    through `sh`), given as the search path, and option-like patterns: never options."""
    require_binary("rg", RG_INSTALL)
    marker = attack.tmp / "pwned-by-rg"
    (attack.ws / "--pre=sh").write_text("x\n")
    (attack.ws / "payload.txt").write_text(f"touch {marker}\n")
    attack.script(
        [
            call("search", pattern="x", path="--pre=sh"),
            call("search", pattern="--pre=sh"),
            call("search", pattern="-e", path="--pre=sh"),
            call("search", pattern="--files"),
        ],
        "searched",
    )
    proc = attack.run(timeout=HANG)
    assert attack.result(proc)["outcome"] == "done", proc.stderr
    assert not marker.exists(), "a workspace file ran as ripgrep's preprocessor"
    assert not any(is_error(r) for r in attack.tool_results())


# Exponential for a backtracking engine over the lines below; none of them matches any line.
CATASTROPHIC = [
    "(a+)+$",
    "(x+x+)+y",
    "(a|aa)+$",
    "^(a|a?)+$",
    "(a*)*c",
    "(.*a){25}c$",
    "^([a-z]+)*[A-Z]$",
    "(?:a+){100}$",
]


def test_a_catastrophic_regex_does_not_hang_search(attack, engine):
    """Patterns that take exponential time in a backtracking engine, over lines built to
    trigger it: linear in ripgrep and RE2, so the run just finishes."""
    line_a = "a" * 40_000 + "b"
    (attack.ws / "src" / "evil.txt").write_text(
        f"{line_a}\n{'x' * 5_000}\n{'ab' * 20_000}1\n{'a' * 3_000}!\n"
    )
    calls = [probe_call(), *(call("search", pattern=p) for p in CATASTROPHIC)]
    calls += [
        call("search", pattern="(a+)+b$"),  # matches line 1: the hit is cut, not hung
        call("search", pattern="a" * 5_000),  # over the pattern limit
        call("search", pattern="(((a{100}){100}){100})"),
    ]  # too big to compile
    attack.script(calls, "no hang")
    proc = attack.run(timeout=HANG)
    assert attack.result(proc)["outcome"] == "done", proc.stderr
    results = attack.tool_results()
    assert len(results) == len(calls)
    assert_engine(engine, results[0])
    for pattern, result in zip(CATASTROPHIC, results[1:], strict=False):
        assert "src/evil.txt" not in result, (pattern, result[:300])
    hit = results[len(CATASTROPHIC) + 1]
    assert hit.startswith("src/evil.txt:1: aaaa") and len(hit) < 400
    assert is_error(results[-2])
    assert len(results[-1]) < SMALL  # refused, or no match: either way, not hung


# ----------------------------------------------------- FIFOs, devices and bounded reads
SPECIAL = [
    "AGENTS.md",
    "CLAUDE.md",
    ".talos/rules.md",
    "src/big.py",
    "src/pipe.txt",
    ".talos/skills/evil/SKILL.md",
]
IGNORE_FILES = [".gitignore", "docs/.gitignore"]  # ripgrep reads these itself


def plant(path, kind: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")


@pytest.mark.parametrize("kind", ["fifo", "devzero"])
def test_fifos_and_devices_in_the_workspace_hang_nothing(attack, engine, kind):
    """A FIFO (opening it blocks for ever) or a link to /dev/zero (reading it never ends) at
    every name Talos reads on its own at start-up (rules files, the index, skills) and at names
    the model then reads, lists and searches, and the ignore files (ripgrep is given the root
    `.gitignore` as Talos read it, and reads none itself)."""
    ws = attack.ws
    special = SPECIAL + IGNORE_FILES
    for rel in special:
        plant(ws / rel, kind)
    (ws / "src" / "alias.py").symlink_to("big.py")  # a link inside, to the FIFO or device
    (ws / "devdir").symlink_to("/dev")
    attack.script(
        [
            probe_call(),
            call("list_files"),
            call("list_files", path="src"),
            *(call("read_file", path=rel) for rel in SPECIAL[:4]),
            call("read_file", path="src/big.py", start_line=1, end_line=100_000),
            call("read_file", path="src/alias.py", start_line=1, end_line=5),
            call("read_file", path="devdir/zero", start_line=1, end_line=5),
            call("search", pattern="x"),
            call("search", pattern="x", path="src/big.py"),
            call("search", pattern="x", path="src/alias.py"),
            ("load_skill", json.dumps({"name": "evil"})),
            call("read_file", path=special[-1]),
        ],
        "survived",
    )
    proc = attack.run(timeout=HANG)
    assert attack.result(proc)["outcome"] == "done", proc.stderr
    results = attack.tool_results()
    assert len(results) == 15
    assert_engine(engine, results[0])
    listing = (results[1] + "\n" + results[2]).splitlines()
    for rel in special:
        assert rel not in listing, f"{rel} listed as a file"
    assert "src/app.py" in listing and "src/alias.py" not in listing
    for n in range(3, 10):
        assert is_error(results[n]), results[n][:300]
    assert "stopped" not in results[10]  # the whole-workspace search did not time out
    assert all("big.py" not in line and "pipe" not in line for line in results[10].splitlines())
    for n in (11, 12, 13, 14):
        assert is_error(results[n]), results[n][:300]
    assert all(len(r) < SMALL for r in results)


def test_a_fifo_gitignore_does_not_stall_ripgrep(attack):
    """Only the FIFO is tried: the /dev/zero variant would eat this machine's memory."""
    require_binary("rg", RG_INSTALL)
    fifo = attack.ws / ".gitignore"
    plant(fifo, "fifo")
    attack.script([call("search", pattern="return")], "found")
    try:
        proc = attack.run()  # a stalled rg would end at the search's 20 s deadline, said below
    finally:
        # An rg left blocked on the FIFO by the killed run: let it read EOF and end.
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert attack.result(proc)["outcome"] == "done", proc.stderr
    found = attack.tool_results()[0]
    assert "src/app.py" in found and "search stopped" not in found, found


@pytest.mark.parametrize("kind", ["fifo", "devzero"])
def test_a_fifo_or_device_as_the_permissions_file_fails_closed(attack, kind):
    """The workspace's own .talos/permissions.json is read before anything runs: a FIFO or a
    device there must stop the run with a message, not hang it, and no model is called."""
    path = attack.ws / ".talos" / "permissions.json"
    path.parent.mkdir()
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    attack.script("should not be called")
    proc = attack.run(timeout=HANG)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "permissions.json" in attack.result(proc)["error"]["message"]
    assert attack.server.requests == []


def run_with_memory_limit(attack, megabytes: int) -> subprocess.CompletedProcess:
    """`attack.run()` with the process's address space capped: holding a huge file in memory
    fails at once instead of taking the machine's memory."""
    limit = megabytes * 1024 * 1024

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    args = [
        TALOS,
        "run",
        "do the task",
        "--workspace",
        str(attack.ws),
        "--base-url",
        attack.server.url,
        "--model",
        "fake-model",
        "--json",
    ]
    return subprocess.run(
        args,
        capture_output=True,
        text=True,
        timeout=HANG,
        env=attack.env(),
        stdin=subprocess.DEVNULL,
        cwd=attack.tmp,
        preexec_fn=cap,
    )


def test_read_file_of_a_huge_file_returns_a_bounded_result(attack):
    ws = attack.ws
    for name, size in (("one_line.txt", 4 << 30), ("mid_line.txt", 50 << 20)):
        with open(ws / name, "wb") as fh:  # one line of 4 GB, of 50 MB (sparse: no disk used)
            fh.write(b"z" * 4096)
            fh.truncate(size)
    with open(ws / "many_lines.txt", "wb") as fh:  # 70 MB of short lines
        block = (b"y" * 99 + b"\n") * 10_000
        for _ in range(70):
            fh.write(block)
    attack.script(
        [
            call("read_file", path="one_line.txt", start_line=1, end_line=10**12),
            call("read_file", path="one_line.txt", start_line=2, end_line=3),
            call("read_file", path="one_line.txt"),
            call("read_file", path="many_lines.txt", start_line=1, end_line=10**12),
            call("read_file", path="many_lines.txt", start_line=10**9, end_line=10**9 + 5),
            call("read_file", path="many_lines.txt", start_line=100, end_line=6_000),
            call("read_file", path="many_lines.txt"),
            call("read_file", path="many_lines.txt", start_line=-5, end_line=10),
            call("read_file", path="many_lines.txt", start_line=10, end_line=1),
            call("search", pattern="z+", path="one_line.txt"),
            call("list_files"),
            call("read_file", path="mid_line.txt", start_line=1, end_line=10**12),
        ],
        "read",
    )
    proc = run_with_memory_limit(attack, 1024)
    assert attack.result(proc)["outcome"] == "done", proc.stderr
    results = attack.tool_results()
    assert len(results) == 12
    for n, result in enumerate(results):
        assert len(result) < SMALL, f"tool result {n} is {len(result)} characters"
    # A line is cut where it is read, well before the output cap would cut it; reading stops
    # after a bounded number of bytes, and says so.
    assert "zzzz" in results[11] and "cut" in results[11] and len(results[11]) < 5000
    assert not is_error(results[0]) and "\n[" in results[0] and len(results[0]) < 5000
    assert is_error(results[2]) and is_error(results[6])  # whole files over the read limit
    for n in (3, 5):  # a huge range stops at the read limit (~2,600 lines), and says so
        numbers = [int(m) for m in re.findall(r"^\s*(\d+)  y", results[n], re.MULTILINE)]
        assert "yyyy" in results[n] and max(numbers) < 3_000 + 100 * (n == 5), results[n][-300:]
        assert results[n].rstrip().endswith("]"), results[n][-300:]
    # A range past the end stops scanning after a bounded number of bytes, and says so.
    assert "\n[" in results[4], results[4]
    assert is_error(results[7]) and is_error(results[8])
    sent = attack.server.requests[-1]["body"]["messages"]
    assert len(json.dumps(sent)) < 200_000  # what the model got back, all in all


OUTSIDE_READS = [
    ".env",
    "./.env",
    "src/.env.local",
    "src/../.env",
    "../home/.aws/credentials",
    "../../../../../../etc/passwd",
    "/etc/passwd",
    "/proc/self/environ",
    "~/.ssh/id_rsa",
    "creds",
    "homedir/.ssh/id_rsa",
    "chain_a",
    "env_alias.txt",
    "src/app.py\u0000.txt",
]


def test_read_file_refuses_secrets_and_every_way_out(attack):
    ws, home = attack.ws, attack.home
    (ws / "creds").symlink_to(home / ".aws" / "credentials")
    (ws / "homedir").symlink_to(home)
    (ws / "chain_a").symlink_to("chain_b")
    (ws / "chain_b").symlink_to("../home/.netrc")
    (ws / "env_alias.txt").symlink_to(".env")
    paths = [*OUTSIDE_READS, str(ws / ".env"), str(home / ".ssh" / "id_rsa")]
    first = [call("read_file", path=p) for p in paths[:14]]
    second = [call("read_file", path=p) for p in paths[14:]]
    second += [
        call("read_file", path=p, start_line=1, end_line=5)
        for p in (".env", "creds", "chain_a", "env_alias.txt", "/etc/passwd")
    ]
    second += [
        call("list_files", path=".."),
        call("list_files", path=str(home)),
        call("list_files", path="homedir"),
    ]
    second.append(call("read_file", path="src/app.py"))
    attack.script(first, second, "refused")
    proc = attack.run(timeout=HANG)
    assert attack.result(proc)["outcome"] == "done", proc.stderr
    results = attack.tool_results()
    assert len(results) == len(first) + len(second)
    for call_, result in zip(first + second[:-1], results[:-1], strict=True):
        assert is_error(result), f"{call_} was not refused: {result[:300]!r}"
        why = (
            "is outside the workspace",
            "holds secrets (.env*)",
            "invalid path",
            "'~/.ssh/id_rsa': No such file",
        )
        assert any(w in result for w in why), f"{call_}: {result[:300]!r}"
    assert "return 1" in results[-1]  # a plain read still works
    everything = "\n".join(results)
    for leaked in ("root:x:0", "TalosNetrcPass", "XDG_STATE_HOME=", "STORE_URL="):
        assert leaked not in everything
    attack.assert_no_secret_leaked(proc.stdout, proc.stderr)


def test_every_secrets_file_spelling_is_refused_to_read_and_search(attack, engine):
    """`.env`, `.env.<anything>` at any depth, direnv's `.envrc`, and links to them under
    innocent names: never read, never searched."""
    ws = attack.ws
    for rel in (".envrc", ".env.production", "deploy/.env.staging", "deploy/.envrc"):
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(f"export API_TOKEN={ENV_FILE_SECRET}\n")
    (ws / "deploy" / "settings.txt").symlink_to(".envrc")
    (ws / "envrc_copy.txt").symlink_to(".envrc")
    reads = [
        ".envrc",
        ".env.production",
        "deploy/.env.staging",
        "deploy/.envrc",
        "deploy/settings.txt",
        "envrc_copy.txt",
    ]
    attack.script(
        [
            probe_call(),
            *(call("read_file", path=p) for p in reads),
            call("read_file", path=".envrc", start_line=1, end_line=3),
            call("search", pattern="API_TOKEN|TalosDotEnv"),
            call("search", pattern="API_TOKEN|TalosDotEnv", path="deploy"),
            call("search", pattern="API_TOKEN", path="deploy/settings.txt"),
            call("search", pattern="API_TOKEN", path=".envrc"),
        ],
        "refused",
    )
    proc = attack.run(timeout=HANG)
    assert attack.result(proc)["outcome"] == "done", proc.stderr
    results = attack.tool_results()
    assert_engine(engine, results[0])
    for n in range(1, 8):
        assert is_error(results[n]), results[n][:300]
    assert results[8] == results[9] == "(no matches)"
    assert is_error(results[10]) and is_error(results[11])
    attack.assert_no_secret_leaked(proc.stdout, proc.stderr)


# ------------------------------------------------------------------------------- writes
TEMP_GUESSES = [
    ".app.py.talos-tmp",
    ".app.py.tmp",
    "app.py.tmp",
    ".app.py.swp",
    "app.py~",
    ".#app.py",
    "app.py.new",
    ".app.py.talos-tmp.0",
]
PROTECTED = [
    ".git/hooks/pre-commit",
    ".git/config",
    ".env",
    ".env.production",
    ".talos/x",
    ".talos/permissions.json",
    "src/.env.local",
    "vendor/lib/.git/hooks/post-merge",
    "gitlink/hooks/post-checkout",
    "src/target.py",
    "src/dangling.py",
    "outdir/new.py",
    "../outside/escape.py",
    "/tmp/talos-escape-probe.py",
]


def test_applying_a_proposal_never_writes_through_a_planted_symlink(attack):
    """Symlinks beside the target at every temp-file name an implementation might use (the
    old fixed `.app.py.talos-tmp` first), at the target itself, and at protected paths."""
    ws, outside = attack.ws, attack.tmp / "outside"
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text("ORIGINAL\n")
    for name in TEMP_GUESSES:
        (ws / "src" / name).symlink_to(victim)
    (ws / "src" / "target.py").symlink_to("../../outside/victim.txt")
    (ws / "src" / "dangling.py").symlink_to("../../outside/created.py")
    (ws / "outdir").symlink_to(outside)
    (ws / "gitlink").symlink_to(".git")
    new_app = "def main():\n    return 2\n"
    edits = [call("propose_edit", path="src/app.py", content=new_app)]
    edits += [
        call("propose_edit", path=p, content="#!/bin/sh\ntouch /tmp/pwned\n") for p in PROTECTED
    ]
    attack.script(edits, "proposed")
    proc = attack.run("--apply", timeout=HANG)
    result = attack.result(proc)
    assert result["outcome"] == "done", proc.stderr
    results = attack.tool_results()
    assert not is_error(results[0]), results[0]
    for path, refused in zip(PROTECTED, results[1:], strict=True):
        assert is_error(refused), f"a proposal to {path} was accepted: {refused}"
    assert [(p["path"], p["status"]) for p in result["proposals"]] == [("src/app.py", "applied")]
    assert victim.read_text() == "ORIGINAL\n"
    assert sorted(p.name for p in outside.iterdir()) == ["victim.txt"]
    app = ws / "src" / "app.py"
    assert not app.is_symlink() and app.read_text() == new_app
    for name in TEMP_GUESSES:
        assert (ws / "src" / name).readlink() == victim  # left alone, not written through
    assert not (ws / ".git" / "hooks" / "pre-commit").exists()
    assert not (ws / ".talos").exists() and not (ws / ".env.production").exists()
    assert not os.path.exists("/tmp/talos-escape-probe.py")
    assert (ws / ".env").read_text() == f"API_TOKEN={ENV_FILE_SECRET}\n"


@pytest.mark.parametrize("swap", ["file", "directory"])
def test_a_target_swapped_for_a_symlink_before_apply_is_not_written_through(attack, swap):
    """The workspace changes between the proposal and its application: the file (or its
    directory) becomes a symlink out. Applying must not write outside."""
    ws, outside = attack.ws, attack.tmp / "outside"
    (outside / "src").mkdir(parents=True)
    victim = outside / "src" / "app.py"
    original = (ws / "src" / "app.py").read_text()
    victim.write_text(original)  # the same text: the proposal is not stale there
    from ..fake_openai import reply

    attack.script(
        [
            call(
                "propose_edit",
                path="src/app.py",
                blocks=[{"search": "return 1", "replace": "return 2"}],
            )
        ],
        reply("done, slowly", delay=0.1),
    )

    def swap_when_the_last_turn_starts():
        deadline = time.monotonic() + HANG
        while len(attack.server.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.002)
        if swap == "file":
            (ws / "src" / "app.py").unlink()
            (ws / "src" / "app.py").symlink_to(victim)
        else:
            (ws / "src").rename(ws / "src.old")
            (ws / "src").symlink_to(outside / "src")

    swapper = threading.Thread(target=swap_when_the_last_turn_starts)
    swapper.start()
    try:
        proc = attack.run("--apply", timeout=HANG)
    finally:
        swapper.join()
    attack.result(proc)  # a JSON result, whatever the outcome
    assert victim.read_text() == original
    assert sorted(p.name for p in (outside / "src").iterdir()) == ["app.py"]


# -------------------------------------------------------------------- unbounded resources
def test_endless_command_output_is_cut_and_the_command_killed(attack, sandboxed):
    attack.script(
        [
            call("run_command", command="cat /dev/zero"),
            call("run_command", command="yes"),
            call("run_command", command="yes talos-flood-line-of-some-length | tr -d '\\n'"),
            call("run_command", command="head -c 200000000 /dev/urandom"),
            call("run_command", command="sleep 300", timeout=1),
            call("run_command", command="sleep 300 & echo started"),  # holds the pipe open
        ],
        "done",
    )
    attack.settings(commands={"allow": ["sleep"]})
    started = time.monotonic()
    proc = attack.run("--mode", "full-auto", timeout=HANG)
    assert attack.result(proc)["outcome"] == "done", proc.stderr
    results = attack.tool_results()
    assert len(results) == 6
    for n, result in enumerate(results[:4]):
        assert "killed" in result and "output" in result, (n, result[:200], result[-300:])
    assert "killed" in results[4]
    for n, result in enumerate(results):
        assert len(result) < SMALL, f"result {n}: {len(result)} characters"
    print(f"endless output: {time.monotonic() - started:.1f} s")


def test_twenty_thousand_tool_calls_in_one_response_run_at_most_sixteen(attack):
    """One response asks for 20,000 `remember` calls: 16 run, the model is told the rest did
    not, the conversation stays consistent, and the task still finishes."""
    flood = [call("remember", statement=f"flood fact number {i}") for i in range(20_000)]
    attack.script(stream(flood), "finished anyway")
    proc = attack.run(timeout=HANG)
    assert attack.result(proc)["outcome"] == "done", proc.stderr
    assert len(attack.server.requests) == 2
    messages = attack.server.requests[1]["body"]["messages"]
    tool_messages = [m for m in messages if m["role"] == "tool"]
    assert len(tool_messages) == 16
    (assistant,) = [m for m in messages if m["role"] == "assistant"]
    assert [c["id"] for c in assistant["tool_calls"]] == [m["tool_call_id"] for m in tool_messages]
    assert "19984" in tool_messages[-1]["content"] and "not run" in tool_messages[-1]["content"]
    remembered = [f for f in facts_of(attack) if f.statement.startswith("flood fact")]
    assert len(remembered) == 16


def test_remember_cannot_store_a_giant_fact(attack):
    giant = "tests use pytest and " * 100_000  # 2.1 MB
    attack.script([call("remember", statement=giant)], "remembered")
    proc = attack.run(timeout=HANG)
    assert attack.result(proc)["outcome"] == "done", proc.stderr
    assert all(len(f.statement) <= 64 * 1024 for f in facts_of(attack))


# ----------------------------------------------------------------------- secret redaction
CONFIGURED_KEY = "ZqOpaqueConfiguredKey9f8e7d6c5b4a"  # no credential shape: known value only
PLANTED = {
    "openai": "sk-proj-" + "Qw3rTy8uIoPa5sDfGh1jKlZx" * 2,
    "anthropic": "sk-ant-api03-" + "Rt5yU8iOp2AsD4fG6hJ8kL0zX" * 3,
    "github": "ghp_" + "Mn8bV6cX4zL2kJ9hG7fD5sA3qW1eR0tY" + "uI9o",
    "github_pat": "github_pat_11ABCDEFG0" + "abcdefghijklmnopqrstuv" + "_" + "W" * 59,
    "aws": "AKIA" + "Z7Q2M4N6P8R1T3V5",
    "slack": "xoxb-1234567890-0987654321-" + "Sl4ckT0k3nV4lu3x",
    "db_password": "Pg5ecretPassw0rdX",
    "configured": CONFIGURED_KEY,
}
PEM_BODY = "MIIEpAIBAAKCAQEAtalosPemBodyMarker0123456789abcdefghijklmnopqrstuv"


def secrets_file() -> str:
    p = PLANTED
    return (
        "# VISIBLE_MARKER settings for the app\n"
        f'OPENAI = "{p["openai"]}"\n'
        f"ANTHROPIC = '{p['anthropic']}'\n"
        f"GITHUB = {p['github']}\n"
        f"GITHUB_FINE = {p['github_pat']}\n"
        f"AWS_ACCESS_KEY_ID={p['aws']}\n"
        f"SLACK={p['slack']}\n"
        f'DATABASE = "postgres://admin:{p["db_password"]}@db.internal:5432/app"\n'
        f'LLM = "{p["configured"]}"\n'
        f"FROM_ENV = ['{ALL_SECRETS[0]}', '{ALL_SECRETS[1]}', '{ALL_SECRETS[3]}']\n"
        "KEY = '''\n-----BEGIN RSA PRIVATE KEY-----\n"
        f"{PEM_BODY}\n{PEM_BODY[::-1]}\n-----END RSA PRIVATE KEY-----\n'''\n"
        "# VISIBLE_MARKER end\n"
    )


def assert_planted_not_leaked(attack, *outputs: str) -> None:
    attack.assert_no_secret_leaked(*outputs)
    places = [
        ("model", attack.sent_to_model()),
        ("store", attack.stored()),
        *((f"output {i}", o) for i, o in enumerate(outputs)),
    ]
    for where, text in places:
        for kind, secret in [*PLANTED.items(), ("pem body", PEM_BODY)]:
            assert secret not in text, f"the {kind} secret {secret!r} reached the {where}"


def test_credentials_in_workspace_files_never_reach_the_model(attack):
    """Every credential shape, the configured key's own value (under a variable whose name
    says nothing), and the environment's secrets, in a plain source file: read and searched."""
    (attack.ws / "src" / "settings.py").write_text(secrets_file())
    attack.extra_env["LLM_ACCESS"] = CONFIGURED_KEY
    attack.script(
        [
            call("read_file", path="src/settings.py"),
            call("read_file", path="src/settings.py", start_line=1, end_line=10),
            call("search", pattern=r"sk-|ghp_|github_pat|AKIA|xox|://|LLM|FROM_ENV|BEGIN"),
            call("search", pattern="VISIBLE_MARKER"),
            call("list_files", path="src"),
        ],
        "read them",
    )
    proc = attack.run("--api-key-env", "LLM_ACCESS", timeout=HANG)
    assert attack.result(proc)["outcome"] == "done", proc.stderr
    results = attack.tool_results()
    assert "VISIBLE_MARKER" in results[0] and "[redacted" in results[0]  # read, and redacted
    assert results[2].count("src/settings.py:") >= 10  # every line was a hit
    assert_planted_not_leaked(attack, proc.stdout, proc.stderr)


def test_credentials_printed_by_a_sandboxed_command_never_reach_the_model(attack, sandboxed):
    (attack.ws / "src" / "settings.py").write_text(secrets_file())
    attack.extra_env["LLM_ACCESS"] = CONFIGURED_KEY
    attack.script(
        [
            call("run_command", command="cat src/settings.py"),
            call("run_command", command="grep -rn VISIBLE_MARKER -A 20 src"),
            call("run_command", command="cat src/settings.py src/settings.py src/settings.py"),
        ],
        "printed",
    )
    proc = attack.run("--api-key-env", "LLM_ACCESS", timeout=HANG)
    assert attack.result(proc)["outcome"] == "done", proc.stderr
    results = attack.tool_results()
    assert results[0].startswith("exit code 0") and "VISIBLE_MARKER" in results[0], results[0]
    assert_planted_not_leaked(attack, proc.stdout, proc.stderr)


def test_a_private_key_body_read_without_its_header_is_redacted(attack):
    (attack.ws / "src" / "settings.py").write_text(secrets_file())
    attack.script(
        [
            call("read_file", path="src/settings.py", start_line=12, end_line=13),
            call("search", pattern="^[A-Za-z0-9+/=]{40,}$"),
        ],
        "got the key",
    )
    proc = attack.run(timeout=HANG)
    assert attack.result(proc)["outcome"] == "done", proc.stderr
    assert_planted_not_leaked(attack, proc.stdout, proc.stderr)


def test_a_secret_split_by_the_output_cut_is_still_redacted(attack):
    """A secret where a long result is cut: were it cut first, neither piece would match the
    key's shape. Redacted before the cut, it is gone whole."""
    key = PLANTED["openai"]  # "sk-proj-" + 48 characters
    # The result keeps characters [0, 4000) and the last 4000: with 8001 characters, only
    # character 4000 is cut. Put the key so that the head holds "sk-proj-" + 19 characters
    # (one short of the shape) and the tail the rest but one.
    head = "x = 1\n" * ((4000 - 27) // 6)
    head += " " * (4000 - 27 - len(head))
    text = head + key + "\n"
    text += "#" * (8001 - len(text) - 1) + "\n"
    assert len(text) == 8001 and text[4000 - 27 : 4000] == key[:27]
    (attack.ws / "src" / "long.py").write_text(text)
    attack.script([call("read_file", path="src/long.py")], "read")
    proc = attack.run(timeout=HANG)
    assert attack.result(proc)["outcome"] == "done", proc.stderr
    got = attack.tool_results()[0]
    assert "x = 1" in got and "###" in got
    assert key[8:27] not in got and key[28:] not in got, "the key reached the model in pieces"


def test_a_credential_in_a_rules_file_is_redacted_from_the_system_prompt(attack):
    """Rules files go into the system prompt, not through a tool: redacted there too."""
    (attack.ws / "AGENTS.md").write_text(
        f"- The staging token is {PLANTED['github']}\n- Tests use pytest\n"
    )
    (attack.ws / "CLAUDE.md").write_text(f"- Deploy with {PLANTED['slack']}\n")
    attack.script("ok")
    proc = attack.run(timeout=HANG)
    assert attack.result(proc)["outcome"] == "done", proc.stderr
    assert "Tests use pytest" in attack.sent_to_model()  # the rules were sent
    assert_planted_not_leaked(attack, proc.stdout, proc.stderr)
