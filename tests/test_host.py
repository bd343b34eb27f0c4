"""The host, one turn after another: a scripted EditorPort, a real store, the real agent loop,
and the local OpenAI-speaking server as the model."""

from __future__ import annotations

import asyncio
import itertools
import threading

from talos_ls.agent.model import ModelConfig
from talos_ls.agent.workspace import Workspace
from talos_ls.host import Host, HostConfig
from talos_ls.memory import index as index_mod
from talos_ls.memory.rules import SyncResult
from talos_ls.store import open_store

from .fake_openai import FakeOpenAI, reply
from .system import path_without, processes

K = 5
AMBIGUOUS = {
    "src/parser.py": "x = 1\n",
    "tools/parser.py": "x = 1\n",
    "app/config.py": "x = 1\n",
    "lib/config.py": "x = 1\n",
    "a/util.py": "x = 1\n",
    "b/util.py": "x = 1\n",
}


class ScriptedPort:
    """An editor whose person answers from a script (None: dismisses)."""

    interactive = True

    def __init__(self, root, replies=(), confirms=(), reply_delay=0.0):
        self.workspace = Workspace(root)
        self.replies, self.confirms = list(replies), list(confirms)
        self.reply_delay = reply_delay
        self.asked, self.shown, self.statuses, self.notices = [], [], [], []

    async def ask(self, question):
        self.asked.append(question)
        await asyncio.sleep(self.reply_delay)
        return self.replies.pop(0) if self.replies else None

    async def confirm(self, message, options):
        return self.confirms.pop(0) if self.confirms else None

    async def show_proposal(self, proposal):
        self.shown.append(proposal)

    def read_document(self, path):
        return None

    async def settle(self, proposal):
        pass

    async def begin(self, task):
        pass

    def progress(self, task, message):
        pass

    def end(self, task):
        pass

    def status(self, status):
        self.statuses.append(status)

    def notice(self, message):
        self.notices.append(message)


def workspace(tmp_path, files):
    root = tmp_path / "ws"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def host_for(tmp_path, server, root, port, url=None):
    store = open_store(url or "sqlite:///" + str(tmp_path / "talos.db"))
    config = HostConfig(workspace=root, model=ModelConfig("m", base_url=server.url))
    return Host(store, config, port), store


async def test_thirty_turns_one_question_per_k(tmp_path, server):
    root = workspace(
        tmp_path,
        {**AMBIGUOUS, "AGENTS.md": "- Tests use unittest\n", "CLAUDE.md": "- Tests use pytest\n"},
    )
    port = ScriptedPort(root, replies=["skip"] * 30)  # deflects every time: nothing settles
    host, store = host_for(tmp_path, server, root, port)
    requests = itertools.cycle(
        [
            "fix the parser and its tests",
            "check the config and its tests",
            "tidy the util and its tests",
        ]
    )
    asked_at = []
    for _ in range(30):
        server.script.append(reply("done"))
        result = await host.turn(next(requests))
        await host.wait(result.task)
        if result.question is not None:
            asked_at.append(result.turn)
    assert asked_at == [1, 6, 11, 16, 21, 26]
    assert len(port.asked) == 6
    kinds = {q.kind for q in port.asked}
    assert kinds == {"disjunction", "referent"}  # several sources competed for the budget
    assert len(host.queue.candidates(host.agent_id)) >= 4
    assert port.statuses[-1]["budget_opens_at_turn"] == 31
    await host.close()
    store.close()


async def test_dismissal_is_never_an_answer(tmp_path, server):
    root = workspace(
        tmp_path, {"AGENTS.md": "- Tests use unittest\n", "CLAUDE.md": "- Tests use pytest\n"}
    )
    port = ScriptedPort(root, replies=[None])
    host, store = host_for(tmp_path, server, root, port)
    server.script.append(reply("done"))
    result = await host.turn("write the tests")
    await host.wait(result.task)
    assert result.question is not None and result.question.kind == "disjunction"
    ((question, answer),) = host.answers
    assert (answer.applied, answer.reason, answer.classification) == (
        False,
        "cooled",
        "unrecognized",
    )
    assert {f.confidence for f in host.facts.list(host.agent_id)} == {0.5}
    assert host.queue.get(question.candidate_id).status == "cooled"
    assert host.queue.reconciler.merge_log_entries(host.agent_id)  # the conflict stays open
    await host.close()
    store.close()


async def test_a_reply_during_the_task_reaches_the_agent(tmp_path, server):
    rules = {"AGENTS.md": "- Tests use unittest\n", "CLAUDE.md": "- Tests use pytest\n"}
    root = workspace(tmp_path, {**rules, "src/app.py": "x = 1\n"})
    port = ScriptedPort(root, replies=["pytest"], reply_delay=0.2)
    host, store = host_for(tmp_path, server, root, port)
    server.script += [
        reply("Listing.", [("c1", "list_files", "{}")], delay=0.1),  # ~0.5 s
        reply("Writing pytest tests."),
    ]
    result = await host.turn("write the tests")
    task = await host.wait(result.task)
    assert task.state == "done"
    second = server.requests[1]["body"]["messages"]
    note = [m["content"] for m in second if m["role"] == "user"][-1]
    assert note.endswith(": pytest.") and "answered the question" in note
    assert "The person answered" not in str(server.requests[0]["body"]["messages"])
    facts = {f.value: f for f in host.facts.list(host.agent_id)}
    assert facts["pytest"].confidence > 0.5 > facts["unittest"].confidence
    await host.close()
    store.close()


async def test_headless_asks_nothing_and_proposals_wait(tmp_path, server):
    rules = {"AGENTS.md": "- Tests use unittest\n", "CLAUDE.md": "- Tests use pytest\n"}
    root = workspace(tmp_path, {**rules, "src/app.py": "x = 1\n"})
    port = ScriptedPort(root)
    port.interactive = False
    host, store = host_for(tmp_path, server, root, port)
    server.script += [
        reply(None, [("c1", "propose_edit", '{"path": "src/app.py", "content": "x = 2\\n"}')]),
        reply("proposed"),
    ]
    result = await host.turn("write the tests")
    await host.wait(result.task)
    assert result.question is None and port.asked == []
    assert store.qq_agents().get(host.agent_id) is None  # no budget spent on nobody
    (proposal,) = host.proposals.list()
    assert proposal.status == "pending" and (root / "src" / "app.py").read_text() == "x = 1\n"
    assert await host.apply_proposal(proposal.id)
    assert (root / "src" / "app.py").read_text() == "x = 2\n"
    await host.close()
    store.close()


async def test_what_a_task_end_shows_does_not_wait_on_a_background_prune(tmp_path, server):
    """An editor lists proposals on seeing a task end (the LSP progress end): an undone or
    rejected proposal is gone from that list then, not whenever the store's prune has run."""
    root = workspace(tmp_path, {"src/app.py": "x = 1\n", "src/b.py": "b = 1\n"})
    port = ScriptedPort(root)
    port.interactive = False
    host, store = host_for(tmp_path, server, root, port)
    at_end = []
    port.end = lambda task: at_end.append(sorted(p.status for p in host.proposals.list()))
    for path in ("src/app.py", "src/b.py"):
        server.script += [
            reply(None, [("c1", "propose_edit", f'{{"path": "{path}", "content": "x = 2\\n"}}')]),
            reply("proposed"),
        ]
    await host.wait((await host.turn("make x 2")).task)
    (undone,) = host.proposals.list()
    assert await host.apply_proposal(undone.id)
    await host.undo(undone.id)
    await host.wait((await host.turn("make b 2")).task)
    rejected = host.proposals.list()[-1]
    await host.reject_proposal(rejected.id)
    server.script.append(reply("done"))
    await host.wait((await host.turn("nothing")).task)
    assert at_end == [["pending"], ["pending"], []]
    await host.close()
    store.close()


async def test_a_one_shot_turn_goes_on_with_what_is_ready_of_a_large_index_and_says_so(
    tmp_path, server, monkeypatch
):
    """`talos run`'s host (not a daemon): on a workspace too large to wait for, the turn's
    preparation resolves against what the index holds, and the prompt says it was partial;
    then the index stops (a one-shot run has no use for the rest)."""
    root = workspace(tmp_path, {"src/parser.py": "x = 1\n", "tools/parser.py": "x = 1\n"})
    monkeypatch.setattr(index_mod, "SETTLE_READ", 1)  # "large": more than one file to read
    release = threading.Event()
    real = index_mod._parse_symbols

    def held(path):
        if path.endswith("tools/parser.py"):
            release.wait(30)
        return real(path)

    monkeypatch.setattr(index_mod, "_parse_symbols", held)
    port = ScriptedPort(root, replies=["skip"])
    host, store = host_for(tmp_path, server, root, port)
    try:
        server.script.append(reply("done"))
        result = await host.turn("fix the parser")
        await host.wait(result.task)
        assert not host.index.complete.is_set() and result.question is None
        (prompt,) = [m["content"] for m in server.requests[0]["body"]["messages"][1:]]
        assert prompt.startswith("fix the parser") and "still being built" in prompt
    finally:
        release.set()
    assert not await asyncio.to_thread(host.index.settle)  # stopped, not to be waited for
    assert not host.index.complete.is_set()
    await host.close()
    store.close()


def _host_process(url, root, barrier, results, turns):
    async def main():
        server = FakeOpenAI()
        server.script = [reply("done") for _ in range(turns)]
        port = ScriptedPort(root, replies=["skip"] * turns)
        store = open_store(url)
        host = Host(
            store, HostConfig(workspace=root, model=ModelConfig("m", base_url=server.url)), port
        )
        asked = []
        for i in range(turns):
            await asyncio.to_thread(barrier.wait, 60)
            request = ["fix the parser and its tests", "check the config and its tests"][i % 2]
            result = await host.turn(request)
            await host.wait(result.task)
            if result.question is not None:
                asked.append(result.turn)
        await host.close()
        store.close()
        server.close()
        return asked

    try:
        results.put(asyncio.run(main()))
    except Exception as exc:
        results.put(exc)


def test_two_hosts_in_two_processes_share_one_budget(tmp_path, store_url):
    root = workspace(
        tmp_path,
        {**AMBIGUOUS, "AGENTS.md": "- Tests use unittest\n", "CLAUDE.md": "- Tests use pytest\n"},
    )
    ctx = processes()
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [
        ctx.Process(target=_host_process, args=(store_url, root, barrier, results, 12))
        for _ in range(2)
    ]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=180) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert not [o for o in outcomes if isinstance(o, Exception)], outcomes
    asked = sorted(t for o in outcomes for t in o)
    assert asked, "no question was asked at all"
    assert all(b - a >= K for a, b in itertools.pairwise(asked)), asked
    assert open_store(store_url).turn_current(str(root.resolve())) == 24  # one shared counter


async def test_without_a_sandbox_the_person_is_told_once_and_the_status_says_so(
    tmp_path, server, monkeypatch
):
    monkeypatch.setenv("PATH", path_without(tmp_path, "bwrap"))
    root = workspace(tmp_path, {"src/app.py": "x = 1\n"})
    port = ScriptedPort(root)
    server.script += [reply("one"), reply("two")]
    host, store = host_for(tmp_path, server, root, port)
    for request in ("first", "second"):
        await host.wait((await host.turn(request)).task)
    await host.close()
    store.close()
    (notice,) = port.notices  # once, not per turn
    assert notice.startswith("Commands run without a sandbox: bubblewrap (bwrap) is not installed")
    assert port.statuses[-1]["sandbox"]["available"] is False
    assert host.policy.for_task(host.config.mode).check_command("ls").verdict == "ask"


async def test_the_question_ranking_is_the_configured_one_and_follows_a_change(tmp_path, server):
    import dataclasses

    root = workspace(tmp_path, {"a.py": "x = 1\n"})
    store = open_store("sqlite:///" + str(tmp_path / "talos.db"))
    try:
        config = HostConfig(workspace=root, model=ModelConfig("m", base_url=server.url))
        host = Host(store, config, ScriptedPort(root))
        assert host.queue.ranking == "value"  # the default
        host.reconfigure(dataclasses.replace(config, ranking="seed"))
        assert host.queue.ranking == "seed"
        seeded = Host(store, dataclasses.replace(config, ranking="seed"), ScriptedPort(root))
        assert seeded.queue.ranking == "seed"
        await host.close()
        await seeded.close()
    finally:
        store.close()


async def test_the_rules_files_are_read_when_the_host_starts_not_at_its_first_turn(
    tmp_path, server
):
    """Their facts are there before any request (`talos.memory.list` shows them), and the
    first turn finds them read as a later one does: nothing of them is its work (issue 30)."""
    root = workspace(tmp_path, {"AGENTS.md": "- Tests use unittest\n", "src/app.py": "x = 1\n"})
    host, store = host_for(tmp_path, server, root, ScriptedPort(root))
    await host.start()
    rules = [f.statement for f in host.facts.list(host.agent_id) if f.source == "rules file"]
    assert rules == ["Tests use unittest"]
    assert host.rules.sync(host.agent_id, root) == SyncResult()  # nothing left for the turn
    await host.close()
    store.close()
