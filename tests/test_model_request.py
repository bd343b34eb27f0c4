"""The request a model call sends is the one `chat.completions.create` sends, body and headers,
without the SDK's per-call transform of the whole conversation (whose cost grows with it); and
the client is prepared off the caller's thread."""

from __future__ import annotations

import dataclasses
import json
import threading

import pytest

from talos_ls.agent import tools
from talos_ls.agent.model import ModelClient, ModelConfig

from .fake_openai import reply

KEY = "sk-test-0123456789abcdef"
CONVERSATION = [
    {"role": "system", "content": "You are Talos."},
    {"role": "user", "content": "what does main return? é \u2603 \U0001f600"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "src/app.py"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "def main():\n    return 1\n" * 20},
    {"role": "user", "content": "a note from the person"},
    {"role": "assistant", "content": "main returns 1."},
    {"role": "user", "content": "and then?"},
]
# Headers that differ between any two requests, whoever sends them.
VARYING = {"x-stainless-retry-count", "x-stainless-read-timeout", "idempotency-key"}


@pytest.fixture
def client(server, monkeypatch):
    monkeypatch.setenv("TALOS_TEST_KEY", KEY)
    return ModelClient(ModelConfig("fake-model", base_url=server.url, api_key_env="TALOS_TEST_KEY"))


async def test_the_request_is_the_one_create_sends(server, client):
    server.script += [reply("one"), reply("two")]
    await client.complete(CONVERSATION, tools.schemas())
    sdk = (await client._ready()).client
    stream = await sdk.chat.completions.create(
        model="fake-model",
        messages=CONVERSATION,  # type: ignore[arg-type]
        stream=True,
        stream_options={"include_usage": True},
        tools=tools.schemas(),  # type: ignore[arg-type]
    )
    async for _ in stream:
        pass
    ours, theirs = server.requests
    assert ours["path"] == theirs["path"] == "/v1/chat/completions"
    # the same JSON, key for key and in the same order
    assert json.dumps(ours["body"]) == json.dumps(theirs["body"])
    assert ours["body"]["messages"] == CONVERSATION
    same = {k.lower(): v for k, v in ours["headers"].items() if k.lower() not in VARYING}
    assert same == {k.lower(): v for k, v in theirs["headers"].items() if k.lower() not in VARYING}
    assert same["authorization"] == f"Bearer {KEY}"


async def test_max_output_tokens_is_sent_where_create_sends_it(server, monkeypatch):
    monkeypatch.setenv("TALOS_TEST_KEY", KEY)
    config = ModelConfig("fake-model", base_url=server.url, api_key_env="TALOS_TEST_KEY")
    client = ModelClient(dataclasses.replace(config, max_output_tokens=1_000))
    server.script += [reply("one"), reply("two")]
    await client.complete(CONVERSATION, tools.schemas())
    sdk = (await client._ready()).client
    stream = await sdk.chat.completions.create(
        model="fake-model",
        messages=CONVERSATION,  # type: ignore[arg-type]
        stream=True,
        stream_options={"include_usage": True},
        tools=tools.schemas(),  # type: ignore[arg-type]
        max_completion_tokens=1_000,
    )
    async for _ in stream:
        pass
    ours, theirs = server.requests
    assert json.dumps(ours["body"]) == json.dumps(theirs["body"])
    assert ours["body"]["max_completion_tokens"] == 1_000


async def test_the_conversation_is_not_walked_by_the_sdks_transform(server, client, monkeypatch):
    from openai._utils import _transform

    walked = []
    original = _transform._async_transform_recursive

    async def counting(data, *args, **kwargs):
        walked.append(data)
        return await original(data, *args, **kwargs)

    monkeypatch.setattr(_transform, "_async_transform_recursive", counting)
    server.script.append(reply("fine"))
    assert (await client.complete(CONVERSATION, tools.schemas())).text == "fine"
    assert walked == []
    # (what `create` does, to show the patch would see it)
    sdk = (await client._ready()).client
    server.script.append(reply("walked"))
    stream = await sdk.chat.completions.create(
        model="fake-model",
        messages=CONVERSATION,  # type: ignore[arg-type]
        stream=True,
    )
    async for _ in stream:
        pass
    assert walked


async def test_the_client_is_prepared_in_a_thread_of_its_own_once(server, client, monkeypatch):
    from talos_ls.agent import model

    imported_in = []
    real = model._sdk

    def recording():
        imported_in.append(threading.current_thread().name)
        return real()

    monkeypatch.setattr(model, "_sdk", recording)
    future = client.prepare()
    assert client.prepare() is future
    sdk = future.result(timeout=60)
    assert imported_in == ["talos-model-client"]  # not the caller's thread
    server.script.append(reply("ok"))
    assert (await client.complete([{"role": "user", "content": "hi"}])).text == "ok"
    assert (await client._ready()) is sdk  # built once
