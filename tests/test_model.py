"""The model client against a real local server speaking the OpenAI streaming API."""

from __future__ import annotations

import asyncio
import logging

import pytest

from talos_ls.agent.cost import Usage
from talos_ls.agent.model import ModelClient, ModelConfig, ModelError

from .fake_openai import error, hang, reply

KEY = "sk-test-0123456789abcdef"


@pytest.fixture
def client(server, monkeypatch):
    monkeypatch.setenv("TALOS_TEST_KEY", KEY)
    return ModelClient(
        ModelConfig(
            "fake-model", base_url=server.url, api_key_env="TALOS_TEST_KEY", max_backoff=0.05
        )
    )


async def test_text_tool_calls_and_usage(server, client):
    server.script.append(
        reply(
            "Let me look.",
            tool_calls=[
                ("call_1", "read_file", '{"path": "src/app.py"}'),
                ("call_2", "search", '{"pattern": "def main"}'),
            ],
            usage=(120, 30, 64),
        )
    )
    pieces = []
    result = await client.complete(
        [{"role": "user", "content": "hi"}],
        tools=[{"type": "function", "function": {"name": "read_file"}}],
        on_text=pieces.append,
    )
    assert result.text == "Let me look." and "".join(pieces) == "Let me look."
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [
        ("call_1", "read_file", '{"path": "src/app.py"}'),
        ("call_2", "search", '{"pattern": "def main"}'),
    ]
    assert result.usage == Usage(prompt_tokens=120, completion_tokens=30, cached_tokens=64)
    assert result.finish_reason == "tool_calls"
    sent = server.requests[0]
    assert sent["body"]["stream"] is True and sent["body"]["stream_options"] == {
        "include_usage": True
    }
    assert sent["body"]["model"] == "fake-model" and sent["body"]["tools"]
    assert sent["headers"]["authorization"] == f"Bearer {KEY}"
    assert result.message()["tool_calls"][1]["function"]["name"] == "search"


async def test_429_then_success_honours_retry_after(server, client):
    server.script += [
        error(429, "slow down", headers={"Retry-After": "0"}),
        error(503, "overloaded"),
        reply("ok"),
    ]
    assert (await client.complete([{"role": "user", "content": "x"}])).text == "ok"
    assert len(server.requests) == 3


async def test_retries_are_bounded(server, client):
    server.script += [error(500, "boom")] * 10
    with pytest.raises(ModelError, match=r"500 from .*, 4 attempts; giving up"):
        await client.complete([{"role": "user", "content": "x"}])
    assert len(server.requests) == 4


@pytest.mark.parametrize(
    "step, words",
    [
        (
            error(401, f"Incorrect API key provided: {KEY}", "invalid_api_key"),
            "rejected the API key (401): check $TALOS_TEST_KEY",
        ),
        (
            error(404, "The model `fake-model` does not exist", "model_not_found"),
            "does not know model 'fake-model'",
        ),
        (error(400, f"bad request echoing {KEY}"), "bad request echoing ***"),
    ],
)
async def test_clear_errors_never_show_the_key(server, client, caplog, step, words):
    caplog.set_level(logging.DEBUG)
    server.script.append(step)
    with pytest.raises(ModelError) as err:
        await client.complete([{"role": "user", "content": "x"}])
    assert words in str(err.value)
    assert KEY not in str(err.value) and KEY not in caplog.text
    assert len(server.requests) == 1  # not retried


async def test_unreachable_endpoint(monkeypatch):
    from .redis_server import free_port

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    client = ModelClient(
        ModelConfig(
            "m", base_url=f"http://127.0.0.1:{free_port()}/v1", max_retries=1, max_backoff=0.01
        )
    )
    with pytest.raises(
        ModelError, match=r"no connection to http://127\.0\.0\.1:\d+/v1, 2 attempts"
    ):
        await client.complete([{"role": "user", "content": "x"}])


async def test_local_server_without_a_key(server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.script.append(reply("fine"))
    client = ModelClient(ModelConfig("m", base_url=server.url))
    assert (await client.complete([{"role": "user", "content": "x"}])).text == "fine"


async def test_cancellation_closes_the_stream(server, client):
    server.script.append(hang())
    task = asyncio.ensure_future(client.complete([{"role": "user", "content": "x"}]))
    async with asyncio.timeout(60):  # cancelled once the request is there, however slow
        while not server.requests:
            await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.to_thread(server.disconnected.wait, 60)


async def test_a_call_cancelled_after_output_began_counts_what_it_spent(server, client):
    """Cancelled mid-stream: the endpoint never sent its usage, but the prompt was read and
    output streamed; the spend is estimated from both, not lost at $0."""
    server.script.append(hang("Thinking about it at some length"))
    spent: list[Usage] = []
    prompt = [{"role": "user", "content": "x" * 400}]
    task = asyncio.ensure_future(client.complete(prompt, on_unfinished=spent.append))
    async with asyncio.timeout(60):
        while not server.requests:
            await asyncio.sleep(0.01)
    await asyncio.sleep(0.3)  # the first chunk (the output) arrives
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    (usage,) = spent
    assert usage.estimated and usage.prompt_tokens >= 100 and usage.completion_tokens == 8


async def test_a_cut_stream_counts_the_endpoints_own_usage_and_a_finished_one_is_not_reported(
    server, client
):
    step = reply("Half an answer", usage=(321, 9, 0))
    done, usage_chunk = step["stream"][-2], step["stream"][-1]
    step["stream"] = [c for c in step["stream"] if c is not done]  # usage, then no finish
    assert usage_chunk.get("usage")
    server.script += [step, reply("whole")]
    spent: list[Usage] = []
    with pytest.raises(ModelError, match="ended before the model finished"):
        await client.complete([{"role": "user", "content": "x"}], on_unfinished=spent.append)
    assert spent == [Usage(321, 9, 0)]
    finished = await client.complete([{"role": "user", "content": "x"}], on_unfinished=spent.append)
    assert finished.text == "whole" and len(spent) == 1  # the caller meters a finished one


async def test_impossible_usage_fails_the_step(server, client):
    server.script.append(reply("hi", usage=(-500, 10, 0)))
    with pytest.raises(ModelError, match=r"impossible usage \(prompt_tokens=-500"):
        await client.complete([{"role": "user", "content": "x"}])


async def test_missing_usage_is_estimated(server, client):
    step = reply("a" * 400)
    step["stream"] = [c for c in step["stream"] if "usage" not in c]  # an endpoint without usage
    server.script.append(step)
    done = await client.complete([{"role": "user", "content": "y" * 4000}])
    assert done.usage.estimated
    assert done.usage.prompt_tokens >= 1000 and done.usage.completion_tokens == 100


async def test_a_password_in_the_base_url_is_never_shown(server, monkeypatch):
    url = server.url.replace("http://", "http://me:Hunter2Secret@")
    server.script.append(error(500, "boom"))
    client = ModelClient(ModelConfig("fake-model", base_url=url, max_retries=0))
    with pytest.raises(ModelError) as info:
        await client.complete([{"role": "user", "content": "x"}])
    assert "Hunter2Secret" not in str(info.value) and "me:***@" in str(info.value)
