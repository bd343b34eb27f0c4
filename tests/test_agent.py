"""The agent loop end to end: the real loop, tools, sandbox, permission gate, task registry and
cost meter, against a real local HTTP server speaking the OpenAI streaming API."""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal

from talos_ls.agent import tools
from talos_ls.agent.cost import Caps, CostMeter, Price, Usage, cost_of
from talos_ls.agent.loop import (
    HISTORY_CHARS,
    HISTORY_MESSAGES,
    AgentLoop,
    conversation,
    system_prompt,
)
from talos_ls.agent.model import ModelClient, ModelConfig
from talos_ls.agent.sandbox import Sandbox
from talos_ls.agent.tasks import TaskRegistry
from talos_ls.agent.workspace import Workspace
from talos_ls.edits.proposals import ProposalBook
from talos_ls.gates.permissions import Policy, workspace_settings_path
from talos_ls.gates.question_queue import QuestionQueue
from talos_ls.memory.facts import FactStore
from talos_ls.store import open_store

from .fake_openai import error, hang, reply
from .system import require_sandbox

PRICE = Price(Decimal("2.50"), Decimal("1.25"), Decimal("10.00"))


class Env:
    """One workspace, one store, one session's registry and meter, one fake model."""

    def __init__(self, tmp_path, server, caps=None, mode="ask", commands=None, sandboxed=False):
        root = tmp_path / "proj"
        (root / "src").mkdir(parents=True)
        (root / "src" / "app.py").write_text("def main():\n    return 1\n")
        config = tmp_path / "config"
        self.settings = workspace_settings_path(root.resolve(), config)
        self.settings.parent.mkdir(parents=True)
        self.settings.write_text(json.dumps({"commands": commands or {}}))  # the person's rules
        self.workspace = Workspace(root)
        self.sandbox = Sandbox(root, bwrap=require_sandbox() if sandboxed else "")
        self.store = open_store("sqlite:///" + str(tmp_path / "talos.db"))
        self.facts = FactStore(self.store)
        self.queue = QuestionQueue(self.store, facts=self.facts)
        self.proposals = ProposalBook()
        self.meter = CostMeter(prices={"fake-model": PRICE})
        self.registry = TaskRegistry(self.store, self.meter)
        model = ModelClient(ModelConfig("fake-model", base_url=server.url, max_backoff=0.01))
        self.loop = AgentLoop(model, self.meter, caps or Caps(max_steps=10), self.registry)
        self.policy = Policy.load(root, mode, sandboxed=sandboxed, config=config)
        self.shown = []

    def context(self, task, prompter=None, skills=None):
        return tools.ToolContext(
            agent_id="ws",
            task_id=task.id,
            turn=1,
            workspace=self.workspace,
            policy=self.policy,
            proposals=self.proposals,
            facts=self.facts,
            queue=self.queue,
            prompter=prompter,
            skills=skills or {},
            on_proposal=self.shown.append,
            command_timeout=60,
            sandbox=self.sandbox,
        )

    async def run(self, prompt="fix main", prompter=None, skills=None):
        async def runner(task):
            ctx = self.context(task, prompter, skills)
            return await self.loop.run(ctx, task, prompt, system_prompt(skills={"x": "y"}))

        task = self.registry.start("ws", prompt, runner)
        return await self.registry.wait(task)


def tool_messages(server, request_index):
    return [m for m in server.requests[request_index]["body"]["messages"] if m["role"] == "tool"]


async def test_reads_searches_and_proposes(tmp_path, server):
    env = Env(tmp_path, server)
    edit = json.dumps(
        {"path": "src/app.py", "blocks": [{"search": "return 1", "replace": "return 2"}]}
    )
    server.script += [
        reply(
            "Looking.",
            [
                ("c1", "read_file", '{"path": "src/app.py"}'),
                ("c2", "search", '{"pattern": "def main"}'),
            ],
            usage=(100, 20, 0),
        ),
        reply(None, [("c3", "propose_edit", edit)], usage=(300, 40, 100)),
        reply("Proposed changing main to return 2.", usage=(400, 15, 300)),
    ]
    task = await env.run()
    assert (task.state, task.result) == ("done", "Proposed changing main to return 2.")
    results = tool_messages(server, 1)
    assert "def main():" in results[0]["content"] and results[1]["content"] == (
        "src/app.py:1: def main():"
    )
    (proposal,) = env.proposals.list("src/app.py")
    assert proposal.status == "pending" and proposal.new_text == "def main():\n    return 2\n"
    assert env.shown == [proposal] and proposal.task_id == task.id
    assert (env.workspace.root / "src" / "app.py").read_text() == "def main():\n    return 1\n"
    expected = sum(
        (cost_of(PRICE, Usage(*u)) for u in [(100, 20, 0), (300, 40, 100), (400, 15, 300)]),
        Decimal(0),
    )
    # (100x2.50 + 20x10) + (200x2.50 + 100x1.25 + 40x10) + (100x2.50 + 300x1.25 + 15x10), per 1M
    assert env.meter.task(task.id).cost == expected == Decimal("0.00225")
    saved = env.store.task_get(task.id)
    assert saved["state"] == "done" and Decimal(saved["cost"]) == expected
    assert [m["role"] for m in saved["transcript"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]


async def test_429_then_success(tmp_path, server):
    env = Env(tmp_path, server)
    server.script += [error(429, "rate limited", headers={"Retry-After": "0"}), reply("ok")]
    task = await env.run()
    assert task.state == "done" and len(server.requests) == 2


async def test_malformed_tool_arguments_go_back_to_the_model(tmp_path, server):
    env = Env(tmp_path, server)
    server.script += [
        reply(
            None,
            [
                ("c1", "read_file", '{"path": '),
                ("c2", "read_file", '{"file": "x"}'),
                ("c3", "read_file", '{"path": 7}'),
                ("c4", "teleport", "{}"),
            ],
        ),
        reply("Sorry, done."),
    ]
    task = await env.run()
    assert task.state == "done"
    errors = [m["content"] for m in tool_messages(server, 1)]
    assert errors[0].startswith("error: the arguments of read_file are not valid JSON")
    assert errors[1] == (
        "error: read_file has no argument(s) ['file']; it takes ['end_line', 'path', 'start_line']"
    )
    assert errors[2] == "error: read_file: 'path' must be a string"
    assert errors[3].startswith("error: there is no tool 'teleport'")


async def test_runaway_loop_is_stopped_by_the_guard(tmp_path, server):
    env = Env(tmp_path, server)
    server.script += [
        reply(None, [(f"c{i}", "read_file", '{"path": "nope.py"}')]) for i in range(5)
    ]
    task = await env.run()
    assert task.state == "stopped" and "read_file failed 3 times" in task.error
    assert len(server.requests) == 3
    assert env.store.task_get(task.id)["state"] == "stopped"


async def test_cost_cap_stops_mid_task_before_the_next_tool(tmp_path, server):
    env = Env(tmp_path, server, caps=Caps(max_cost=Decimal("0.01")))
    server.script += [
        reply(None, [("c1", "read_file", '{"path": "src/app.py"}')], usage=(1000, 100, 0)),
        reply(
            None,
            [("c2", "propose_edit", json.dumps({"path": "src/new.py", "content": "x"}))],
            usage=(2000, 500, 0),
        ),
        reply("never reached"),
    ]
    task = await env.run()
    assert task.state == "stopped" and "cost cap reached: $0.0135" in task.error
    assert env.proposals.list() == []  # the capped step's tool did not run
    assert len(server.requests) == 2
    assert env.meter.task(task.id).cost == Decimal("0.0135")


async def test_step_cap(tmp_path, server):
    env = Env(tmp_path, server, caps=Caps(max_steps=2))
    server.script += [reply(None, [(f"c{i}", "list_files", "{}")]) for i in range(4)]
    task = await env.run()
    assert task.state == "stopped" and "step cap reached: 2" in task.error


async def test_cancellation_mid_stream(tmp_path, server):
    env = Env(tmp_path, server)
    server.script.append(hang())
    heard: list[str] = []

    async def runner(task):
        return await env.loop.run(env.context(task), task, "x", "system", on_text=heard.append)

    task = env.registry.start("ws", "long", runner)
    async with asyncio.timeout(60):  # cancelled mid-stream: once output has begun
        while not heard:
            await asyncio.sleep(0.02)
    assert task.state == "running" and env.registry.cancel(task.id)
    await env.registry.wait(task)
    assert task.state == "cancelled"
    spent = env.meter.task(task.id)  # what streamed is counted, estimated: not $0
    assert spent.estimated and spent.tokens_out == 2 and spent.tokens_in > 0 and spent.cost > 0
    assert await asyncio.to_thread(server.disconnected.wait, 60)
    assert env.store.task_get(task.id)["state"] == "cancelled"
    assert env.registry.cancel(task.id) is False


async def test_401_fails_the_task_clearly(tmp_path, server):
    env = Env(tmp_path, server)
    server.script.append(error(401, "Incorrect API key", "invalid_api_key"))
    task = await env.run()
    assert task.state == "failed" and "rejected the API key (401)" in task.error


async def test_run_command_through_the_gate(tmp_path, server, monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-123")
    env = Env(tmp_path, server, commands={"allow": ["env", "sleep"]}, sandboxed=True)
    server.script += [
        reply(
            None,
            [
                ("c1", "run_command", '{"command": "env"}'),
                ("c2", "run_command", '{"command": "npm install"}'),
                ("c3", "run_command", '{"command": "ls && sudo ls"}'),
                ("c4", "run_command", '{"command": "sleep 30", "timeout": 1}'),
            ],
        ),
        reply("done"),
    ]
    task = await env.run()  # headless: no prompter
    assert task.state == "done"
    out = [m["content"] for m in tool_messages(server, 1)]
    assert out[0].startswith("exit code 0") and "PATH=" in out[0]
    assert "tok-123" not in out[0] and "MY_SERVICE_TOKEN" not in out[0]  # an allow-list env
    assert "not run:" in out[1] and "headless" in out[1]
    assert "not run: `sudo ls` is denied by built in" in out[2]
    assert out[3].startswith("killed") and "no result after 1 s" in out[3]


async def test_prompted_permission(tmp_path, server):
    env = Env(tmp_path, server, sandboxed=True)
    asked = []

    async def prompter(message, options):
        asked.append(options)
        return options[1]  # Always allow `printf hello`

    server.script += [
        reply(None, [("c1", "run_command", '{"command": "printf hello"}')]),
        reply("ok"),
    ]
    task = await env.run(prompter=prompter)
    assert task.state == "done"
    assert asked == [["Allow once", "Always allow `printf hello`", "Deny"]]
    assert tool_messages(server, 1)[0]["content"] == "exit code 0\nhello"
    saved = json.loads(env.settings.read_text())
    assert saved["commands"]["allow"] == ["printf hello"]


async def test_without_a_sandbox_commands_are_asked_and_run_with_a_clean_environment(
    tmp_path, server, monkeypatch
):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-123")
    env = Env(tmp_path, server, commands={"allow": ["env"]}, sandboxed=False)
    asked = []

    async def prompter(message, options):
        asked.append((message, options))
        return "Allow once"

    server.script += [reply(None, [("c1", "run_command", '{"command": "env"}')]), reply("ok")]
    await env.run(prompter=prompter)
    ((message, options),) = asked  # allowed by a rule, and still asked
    assert "WITHOUT a sandbox" in message and options == ["Allow once", "Deny"]
    out = tool_messages(server, 1)[0]["content"]
    assert out.startswith("exit code 0") and "tok-123" not in out and "HOME=" in out


async def test_remember_ask_and_skills(tmp_path, server):
    env = Env(tmp_path, server)
    server.script += [
        reply(
            None,
            [
                (
                    "c1",
                    "remember",
                    json.dumps(
                        {
                            "statement": "tests use pytest",
                            "subject": "tests",
                            "attribute": "use",
                            "value": "pytest",
                        }
                    ),
                ),
                (
                    "c2",
                    "ask",
                    json.dumps({"question": "Should main return 2 or 3?", "options": ["2", "3"]}),
                ),
                ("c3", "ask", json.dumps({"question": "Anything?", "options": ["only one"]})),
                ("c4", "load_skill", '{"name": "write-tests"}'),
                ("c5", "load_skill", '{"name": "nope"}'),
            ],
        ),
        reply("ok"),
    ]
    task = await env.run(skills={"write-tests": "Write the test first."})
    assert task.state == "done"
    out = [m["content"] for m in tool_messages(server, 1)]
    assert out[0].startswith("remembered as fact:") and out[0].endswith("(alone)")
    (fact,) = env.facts.list("ws")
    assert (fact.source, fact.value) == ("model", "pytest")
    assert "queued" in out[1] and "Proceed now on the most reasonable assumption" in out[1]
    (cand,) = env.queue.candidates("ws")
    assert (cand.kind, cand.source_module, cand.status) == ("referent", "agent.ask", "pending")
    assert [o["label"] for o in cand.options] == ["2", "3"]
    assert out[2] == "error: ask needs 2 to 6 non-empty options the person can choose from"
    assert out[3] == "Write the test first."
    assert out[4] == "error: no skill 'nope'; available: ['write-tests']"


async def test_sandbox_errors_reach_the_model(tmp_path, server):
    env = Env(tmp_path, server)
    server.script += [
        reply(
            None,
            [
                ("c1", "read_file", '{"path": "../../etc/passwd"}'),
                ("c2", "propose_edit", '{"path": ".git/config", "content": "x"}'),
                (
                    "c3",
                    "propose_edit",
                    json.dumps(
                        {"path": "src/app.py", "blocks": [{"search": "missing", "replace": "x"}]}
                    ),
                ),
            ],
        ),
        reply("ok"),
    ]
    await env.run()
    out = [m["content"] for m in tool_messages(server, 1)]
    assert "outside the workspace" in out[0] and "protected" in out[1]
    assert "block 1: the search text does not occur in src/app.py" in out[2]


async def test_concurrency_limit_queues_tasks(tmp_path, server):
    env = Env(tmp_path, server)
    changes = []  # what a status sent at each change would say: the state and the step
    env.registry = TaskRegistry(
        env.store,
        env.meter,
        concurrency=1,
        on_change=lambda t: changes.append((t.title, t.state, t.activity)),
    )
    gate = asyncio.Event()

    async def slow(task):
        await gate.wait()
        return "done"

    first = env.registry.start("ws", "one", slow)
    second = env.registry.start("ws", "two", slow)
    await asyncio.sleep(0.05)
    assert (first.state, second.state) == ("running", "queued")
    assert second.activity == "queued"
    gate.set()
    await env.registry.wait(second)
    assert (first.state, second.state) == ("done", "done")
    # A task that starts says so in the very status its state change sends (it said nothing
    # there before its runner set its first step: an editor showed an empty step).
    assert ("two", "running", "starting") in changes and all(step for *_, step in changes)
    assert [t["state"] for t in env.store.task_list("ws")] == ["done", "done"]


async def test_the_key_reaches_no_transcript(tmp_path, server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-SECRET-987")
    env = Env(tmp_path, server, commands={"allow": ["env"]}, sandboxed=True)
    server.script += [reply(None, [("c1", "run_command", '{"command": "env"}')]), reply("ok")]
    task = await env.run()
    assert server.requests[0]["headers"]["authorization"] == "Bearer sk-live-SECRET-987"
    stored = json.dumps(env.store.task_get(task.id))
    assert "sk-live-SECRET-987" not in stored and "sk-live-SECRET-987" not in json.dumps(
        server.requests[1]["body"]
    )


def test_system_prompt_lists_skills_without_their_bodies(tmp_path):
    store = open_store("sqlite:///" + str(tmp_path / "t.db"))
    facts = FactStore(store)
    rule = facts.get(facts.add("ws", "Tests use pytest", source="rules file"))
    known = facts.get(facts.add("ws", "deploys go through make release"))
    text = system_prompt([rule], [known], {"write-tests": "Write tests first."})
    assert "- Tests use pytest" in text and "- deploys go through make release [0.50]" in text
    assert "- write-tests: Write tests first." in text
    assert "never write files" in text and "ask" in text
    store.close()


async def test_one_response_runs_at_most_sixteen_tool_calls(tmp_path, server):
    env = Env(tmp_path, server)
    calls = [(f"c{i}", "read_file", '{"path": "src/app.py"}') for i in range(400)]
    server.script += [reply(None, calls), reply("done")]
    task = await env.run()
    assert task.state == "done"
    results = tool_messages(server, 1)
    assert len(results) == 16
    assert (
        "384 more tool calls in that response were not run: too many calls"
        in results[-1]["content"]
    )
    (assistant,) = [m for m in server.requests[1]["body"]["messages"] if m.get("tool_calls")]
    assert len(assistant["tool_calls"]) == 16  # the rest never enter the conversation


async def test_the_model_repeating_a_fact_is_not_corroboration(tmp_path, server):
    env = Env(tmp_path, server)
    same = {
        "statement": "tests use pytest",
        "subject": "tests",
        "attribute": "use",
        "value": "pytest",
    }
    reworded = {**same, "statement": "We run the test suite with pytest"}
    server.script += [
        reply(
            None,
            [(f"c{i}", "remember", json.dumps(same)) for i in range(10)]
            + [("r", "remember", json.dumps(reworded))],
        ),
        reply("ok"),
    ]
    await env.run()
    (fact,) = env.facts.list("ws")
    assert fact.confidence == 0.5 and fact.evidence_count == 0
    out = [m["content"] for m in tool_messages(server, 1)]
    assert out[0].startswith("remembered as fact:")
    assert all(o.startswith(f"already remembered as {fact.key}") for o in out[1:])


async def test_a_failing_tool_or_a_symlink_loop_does_not_end_the_task(tmp_path, server):
    env = Env(tmp_path, server)
    root = env.workspace.root
    (root / "loop-a").symlink_to(root / "loop-b")
    (root / "loop-b").symlink_to(root / "loop-a")
    server.script += [
        reply(
            None,
            [
                ("c1", "read_file", '{"path": "loop-a"}'),
                ("c2", "search", '{"pattern": "x", "path": "loop-a"}'),
                ("c3", "list_files", '{"path": "loop-b", "limit": 100000000}'),
            ],
        ),
        reply("ok"),
    ]
    task = await env.run()
    assert task.state == "done"
    out = [m["content"] for m in tool_messages(server, 1)]
    assert all(o.startswith("error:") and "cannot be resolved" in o for o in out), out


def test_the_system_prompt_carries_no_credential(tmp_path):
    store = open_store("sqlite:///" + str(tmp_path / "t.db"))
    facts = FactStore(store)
    rule = facts.get(
        facts.add(
            "ws", "Deploy with token ghp_abcdefghijklmnopqrstuvwxyz0123456789", source="rules file"
        )
    )
    text = system_prompt([rule])
    assert "ghp_abcdef" not in text and "[redacted github token]" in text
    store.close()


def test_a_workspace_skill_linking_out_is_skipped(tmp_path):
    from talos_ls.agent.skills import discover

    outside = tmp_path / "private.md"
    outside.write_text("---\nname: private\ndescription: d\n---\nsecret notes\n")
    skill = tmp_path / "ws" / ".talos" / "skills" / "private"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").symlink_to(outside)
    found, problems = discover(tmp_path / "ws")
    assert "private" not in found
    assert any("links outside" in p for p in problems)


async def test_a_bug_in_a_tool_is_an_error_for_the_model_not_the_end_of_the_task(
    tmp_path, server, monkeypatch
):
    env = Env(tmp_path, server)

    async def broken(ctx, args):
        raise KeyError("internal")

    monkeypatch.setitem(
        tools.TOOLS,
        "load_skill",
        tools.Tool("load_skill", "x", tools.TOOLS["load_skill"].parameters, broken),
    )
    server.script += [reply(None, [("c1", "load_skill", '{"name": "x"}')]), reply("ok")]
    task = await env.run()
    assert task.state == "done"
    assert tool_messages(server, 1)[0]["content"] == (
        "error: load_skill failed (KeyError); try another way"
    )


def test_a_follow_ups_history_is_what_was_said_bounded_newest_first_and_untrusted_in_shape():
    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    transcript = [
        {"role": "system", "content": "the system prompt"},
        {"role": "user", "content": "the request"},
        {"role": "assistant", "content": "let me look", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "the file"},
        {"role": "assistant", "content": "the answer"},
        {"role": "user", "content": "   "},
        {"role": "assistant", "content": None},
        "not a message",
        {"role": "user", "content": ["parts"]},
        {"role": "developer", "content": "not said by either"},
    ]
    assert conversation(transcript) == [
        {"role": "user", "content": "the request"},
        {"role": "assistant", "content": "the answer"},
    ]
    many = [{"role": "user", "content": f"m{i}"} for i in range(HISTORY_MESSAGES + 5)]
    assert conversation(many)[0]["content"] == "m5"
    big = [{"role": "user", "content": "x" * (HISTORY_CHARS // 2)} for _ in range(3)]
    big.append({"role": "assistant", "content": "newest"})
    kept = conversation(big)
    assert len(kept) == 2 and kept[-1]["content"] == "newest"
    assert sum(len(m["content"]) for m in kept) <= HISTORY_CHARS
