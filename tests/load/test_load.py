"""Load on one daemon and two daemons on one workspace, over the real `talos-ls` processes:

- twenty tasks started at once on one daemon all end `done`, never more than four running at
  a time in a folder (the host's limit), every cost counted once, and the daemon answers a
  code action while they run;
- two daemons on one workspace and one store (SQLite and Redis): turns started on both at once
  deliver one question between them per budget window (the grant is atomic in the store), and
  a proposal applied from both at once is applied by exactly one, its file written once;
- a soak of many tasks: the server's resident memory, sampled as it goes, stops growing (the
  bound is stated below). Its full-size figures are in bench/README.md (bench/load_bench.py).
"""

from __future__ import annotations

import asyncio
import json
import os
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from talos_ls.demo.scripted_model import ScriptedModelServer, reply

from ..lsp.conftest import WAIT_S, start_editor

PRICES = {"fake-model": {"input": 1, "cached_input": 0.5, "output": 2}}
USAGE = (1000, 100, 0)  # $0.0012 a call at these prices
CALL_COST = Decimal("0.0012")


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def options(model: ScriptedModelServer, store_url: str) -> dict[str, Any]:
    return {"model": "fake-model", "baseUrl": model.url, "storeUrl": store_url, "prices": PRICES}


async def test_twenty_tasks_at_once_on_one_daemon(tmp_path, ws, model):
    model.script += [reply(f"answer {i}", usage=USAGE, delay=0.02) for i in range(20)]
    editor = await start_editor(
        tmp_path / "home", [ws], options(model, f"sqlite:///{tmp_path / 'talos.db'}")
    )
    try:
        await editor.until(lambda: any(s.folders for s in editor.statuses), "the first status")
        starts = [editor.command("talos.task.start", {"prompt": f"task {i}"}) for i in range(20)]
        started = await asyncio.gather(*starts)
        ids = [s["task_id"] for s in started]
        assert len(set(ids)) == 20
        assert sorted(s["turn"] for s in started) == list(range(1, 21))  # one turn each
        uri = (ws / "src" / "app.py").as_uri()
        actions = await asyncio.wait_for(
            editor.client.text_document_code_action_async(
                types.CodeActionParams(
                    text_document=types.TextDocumentIdentifier(uri=uri),
                    range=types.Range(start=types.Position(0, 0), end=types.Position(0, 4)),
                    context=types.CodeActionContext(diagnostics=[]),
                )
            ),
            WAIT_S,
        )
        assert actions is not None  # answered while twenty tasks were queued or running
        for task_id in ids:
            await editor.finished(task_id)
        tasks = {t["id"]: t for t in await editor.command("talos.task.list", {})}
        assert {tasks[i]["state"] for i in ids} == {"done"}
        running_at_once = max(
            sum(t.state == "running" for t in f.running) for s in editor.statuses for f in s.folders
        )
        assert 1 <= running_at_once <= 4, running_at_once
        status = await editor.command("talos.status", {})
        assert status["running"] == []
        assert Decimal(status["cost_session"]) == 20 * CALL_COST  # each call counted once
        assert len(model.requests) == 20
    finally:
        await editor.stop()


CONFLICT = {"AGENTS.md": "- Tests use unittest\n", "CLAUDE.md": "- Tests use pytest\n"}


async def test_two_daemons_one_workspace_share_the_budget_and_the_proposals(
    tmp_path, ws, model, store_url
):
    for name, text in CONFLICT.items():
        (ws / name).write_text(text)
    fix = {"path": "src/app.py", "blocks": [{"search": "return 1", "replace": "return 2"}]}
    first = await start_editor(tmp_path / "home1", [ws], options(model, store_url))
    second = await start_editor(tmp_path / "home2", [ws], options(model, store_url))
    try:
        # Four turns at once, two on each daemon, every one relevant to the open conflict:
        # the budget (one question per five turns) lets exactly one of them ask.
        model.script += [reply("Writing tests.", usage=USAGE, delay=0.02) for _ in range(4)]
        started = await asyncio.gather(
            *(
                editor.command("talos.task.start", {"prompt": "write the tests"})
                for editor in (first, second, first, second)
            )
        )
        assert sorted(s["turn"] for s in started) == [1, 2, 3, 4]
        for editor, s in zip((first, second, first, second), started, strict=True):
            await editor.finished(s["task_id"])
        prompts = [*first.prompts, *second.prompts]
        assert len(prompts) == 1, [p.message for p in prompts]
        assert "pytest" in [a.title for a in prompts[0].actions]

        # A proposal made on one daemon, applied from both at once: exactly one applies it.
        model.script += [
            reply("", [("c1", "propose_edit", json.dumps(fix))], usage=USAGE),
            reply("Proposed.", usage=USAGE),
        ]
        task = await first.command("talos.task.start", {"prompt": "make main return 2"})
        await first.finished(task["task_id"])
        (proposal,) = [
            p for p in await first.command("talos.proposal.list", {}) if p["status"] == "pending"
        ]
        results = await asyncio.gather(
            first.command("talos.proposal.apply", {"proposal_id": proposal["id"]}),
            second.command("talos.proposal.apply", {"proposal_id": proposal["id"]}),
        )
        assert sorted(r["applied"] for r in results) == [False, True], results
        assert (ws / "src" / "app.py").read_text() == "def main():\n    return 2\n"
        shown = await second.command("talos.proposal.show", {"proposal_id": proposal["id"]})
        assert shown["status"] == "applied"
    finally:
        await first.stop()
        await second.stop()


SOAK_TASKS = int(os.environ.get("TALOS_SOAK_TASKS", "600"))
WARMUP = 50
# After the warm-up (caches, the allocator's arenas, the bounded histories filling: the last
# 32 tasks and 20 applied proposals are kept in memory), what may still grow is SQLite's page
# cache, 2,000 KiB a connection by default, as the transcripts fill the file: measured, RSS
# rises by about 2 MiB until some 450 tasks, then by 0.3 to 0.7 KiB a task (bench/README.md,
# "Load and scale"). 4 MiB over the 550 tasks after the warm-up is crossed by a leak of 4 KiB
# a task; the last 150 tasks, past the cache, may add 1 MiB (a leak of 7 KiB a task does not
# fit).
GROWTH_KIB = 4 * 1024
TAIL_TASKS, TAIL_GROWTH_KIB = 150, 1024


@pytest.mark.full
async def test_a_soak_of_tasks_does_not_grow_the_server(tmp_path, ws, model):
    model.script += [reply(f"answer {i} " + "x" * 2000, usage=USAGE) for i in range(SOAK_TASKS)]
    editor = await start_editor(
        tmp_path / "home", [ws], options(model, f"sqlite:///{tmp_path / 'talos.db'}")
    )
    pid = editor.client._server.pid  # pygls keeps the server's process there
    try:
        await editor.until(lambda: any(s.folders for s in editor.statuses), "the first status")
        samples: list[tuple[int, int]] = []
        for n in range(SOAK_TASKS):
            started = await editor.command("talos.task.start", {"prompt": f"soak {n}"})
            await editor.finished(started["task_id"])
            editor.statuses.clear()  # the client's own memory is not what is measured
            if (n + 1) % 25 == 0:
                samples.append((n + 1, rss_kib(pid)))
        print(f"RSS (KiB) by tasks done: {samples}")
        after_warmup = next(kib for n, kib in samples if n >= WARMUP)
        peak = max(kib for n, kib in samples if n >= WARMUP)
        assert peak - after_warmup < GROWTH_KIB, samples
        before_tail = next(kib for n, kib in samples if n >= SOAK_TASKS - TAIL_TASKS)
        assert samples[-1][1] - before_tail < TAIL_GROWTH_KIB, samples
        tasks = await editor.command("talos.task.list", {})
        assert len(tasks) <= 32 + 4  # the finished ones kept in memory are bounded
        status = await editor.command("talos.status", {})
        assert Decimal(status["cost_session"]) == SOAK_TASKS * CALL_COST
    finally:
        await editor.stop()
