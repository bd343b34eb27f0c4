"""Model faults at the client: a real local server playing each fault, `ModelClient` against
it. Every call ends with a `ModelError` that says what happened, retries are counted on the
server, and nothing waits for ever (the limits are small here; the defaults are in model.py).
Nothing asserts a wall-clock bound: a broken limit shows as a test that hangs until pytest's
own guard (each call is wrapped in a generous `asyncio.wait_for`)."""

from __future__ import annotations

import asyncio
import email.utils
import json
import time

import pytest

from talos_ls.agent.model import CALL_DEADLINE, IDLE_TIMEOUT, ModelClient, ModelConfig, ModelError
from talos_ls.demo.scripted_model import drop, error, hang, raw, reply, silent, trickle

KEY = "sk-test-faults-0123456789abcdef"
GUARD_S = 60.0  # a call that has not ended by then is stuck: the property is broken
ASK = [{"role": "user", "content": "x"}]


@pytest.fixture
def make(server, monkeypatch):
    monkeypatch.setenv("TALOS_TEST_KEY", KEY)

    def make(**limits) -> ModelClient:
        # Backoff is short so retries are quick; the timeouts are long (a loaded machine can
        # take seconds to answer): a test of a timeout sets the one it tests.
        config = {"max_backoff": 0.05, "timeout": 60.0, "idle_timeout": 60.0, **limits}
        return ModelClient(
            ModelConfig("fake-model", base_url=server.url, api_key_env="TALOS_TEST_KEY", **config)
        )

    return make


async def fails(client: ModelClient, match: str, retries: list[str] | None = None) -> str:
    with pytest.raises(ModelError, match=match) as info:
        await asyncio.wait_for(
            client.complete(ASK, on_retry=None if retries is None else retries.append), GUARD_S
        )
    assert KEY not in str(info.value)
    return str(info.value)


async def disconnected(server) -> None:
    assert await asyncio.to_thread(server.disconnected.wait, GUARD_S), "the stream stayed open"


def test_the_defaults_are_sane():
    config = ModelConfig("m")
    assert (config.idle_timeout, config.deadline) == (IDLE_TIMEOUT, CALL_DEADLINE) == (60, 900)
    assert config.idle_timeout < config.timeout < config.deadline


# ---------------------------------------------------------------- hangs


async def test_hang_mid_stream_with_keepalives_ends_at_the_idle_timeout(server, make):
    server.script += [hang(), reply("never asked for")]
    said = await fails(
        make(idle_timeout=0.5),
        r"stalled: nothing for 0\.5 s after output began "
        r"\(modelIdleTimeout\)",
    )
    assert server.script[0]["stream"]  # not retried: output had begun
    assert len(server.requests) == 1
    await disconnected(server)
    assert server.url.removesuffix("/v1") in said


async def test_hang_mid_stream_in_silence_ends_at_the_idle_timeout(server, make):
    server.script.append(hang(keepalive=False))
    await fails(make(idle_timeout=0.5), r"stalled: nothing for 0\.5 s after output began")
    assert len(server.requests) == 1
    await disconnected(server)


async def test_hang_after_the_role_chunk_before_any_output(server, make):
    server.script += [hang(text=None), reply("never asked for")]
    await fails(make(idle_timeout=0.5), r"stalled: nothing for 0\.5 s before any output")
    assert len(server.requests) == 1  # a silence is never retried (the endpoint may be busy)
    await disconnected(server)


async def test_hang_before_the_first_byte_ends_at_the_timeout(server, make):
    server.script += [silent(), reply("never asked for")]
    await fails(
        make(timeout=1.0), r"no answer from http://127\.0\.0\.1:\d+/v1 within 1 s \(modelTimeout\)"
    )
    assert len(server.requests) == 1
    await disconnected(server)


async def test_a_stream_that_trickles_for_ever_ends_at_the_deadline(server, make):
    server.script.append(trickle(0.05))
    pieces: list[str] = []
    with pytest.raises(ModelError, match=r"still going after 1\.5 s, the most one call may take"):
        await asyncio.wait_for(make(deadline=1.5).complete(ASK, on_text=pieces.append), GUARD_S)
    assert pieces  # it was streaming all along: only the deadline could end it
    await disconnected(server)


# ---------------------------------------------------------------- dropped connections


async def test_connection_closed_after_output_began_is_not_a_finished_answer(server, make):
    server.script += [drop(reply("a long answer cut short"), after=3), reply("never asked for")]
    await fails(
        make(),
        r"ended before the model finished \(no finish reason: the connection "
        r"closed after output began\)",
    )
    assert len(server.requests) == 1


async def test_connection_reset_after_output_began(server, make):
    server.script += [drop(reply("a long answer cut short"), after=3, reset=True), reply("no")]
    await fails(make(), r"broke after output began: connection lost \(\w+")
    assert len(server.requests) == 1


@pytest.mark.parametrize("reset", [False, True])
async def test_connection_dropped_before_output_is_retried_a_bounded_number_of_times(
    server, make, reset
):
    server.script += [drop(reply("never whole"), after=1, reset=reset) for _ in range(10)]
    retries: list[str] = []
    said = await fails(make(max_retries=2), r"3 attempts; giving up", retries)
    assert ("no connection to" if reset else "ended before any output") in said
    assert len(server.requests) == 3
    assert [r.split("(")[-1] for r in retries] == ["attempt 2 of 3)", "attempt 3 of 3)"]


async def test_one_dropped_connection_then_an_answer(server, make):
    server.script += [drop(reply("never whole"), after=1), reply("fine")]
    assert (await make().complete(ASK)).text == "fine"
    assert len(server.requests) == 2


# ---------------------------------------------------------------- 429 and 5xx


async def test_retry_after_is_honoured_but_capped_and_retries_are_bounded(server, make):
    far = email.utils.formatdate(time.time() + 3600, usegmt=True)
    server.script += [
        error(429, "slow down", headers={"Retry-After": "3600"}),  # an hour: capped
        error(429, "slow down", headers={"Retry-After": far}),  # an HTTP date: capped
        error(429, "slow down", headers={"Retry-After": "soon"}),  # garbled: backoff instead
        error(429, "slow down", headers={"Retry-After": "0"}),
        reply("never asked for"),
    ]
    retries: list[str] = []
    said = await fails(
        make(max_backoff=0.2), r"429 from .* \(slow down\), 4 attempts; giving up", retries
    )
    assert len(server.requests) == 4
    waits = [float(r.split("retrying in ")[1].split(" s")[0]) for r in retries]
    assert waits[:2] == [0.2, 0.2] and 0 < waits[2] <= 0.2
    assert "429 from" in said and len(retries) == 3


async def test_retry_after_ms_and_then_success(server, make):
    server.script += [error(429, "slow", headers={"retry-after-ms": "100"}), reply("ok")]
    retries: list[str] = []
    done = await make().complete(ASK, on_retry=retries.append)
    assert done.text == "ok" and len(server.requests) == 2
    assert retries == [f"429 from {server.url}; retrying in 0.1 s (attempt 2 of 4)"]


@pytest.mark.parametrize(
    "step, shown",
    [
        (error(500, "boom"), "500 from .* \\(boom\\)"),
        (error(503, "overloaded", headers={"Retry-After": "0"}), "503 from .* \\(overloaded\\)"),
        (raw("<html><body>502 Bad Gateway</body></html>", status=502), "502 from "),
    ],
)
async def test_5xx_is_retried_a_bounded_number_of_times(server, make, step, shown):
    server.script += [dict(step) for _ in range(10)]
    await fails(make(), shown + ".*, 4 attempts; giving up")
    assert len(server.requests) == 4


# ---------------------------------------------------------------- garbage


@pytest.mark.parametrize(
    "step, words",
    [
        (raw("<html>It works!</html>"), r"sent a 200 answer that is not a stream \(text/html\)"),
        (
            raw(
                json.dumps(
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "choices": [
                            {"index": 0, "message": {"role": "assistant", "content": "hi"}}
                        ],
                    }
                ),
                "application/json",
            ),
            r"sent a 200 answer that is not a stream \(application/json\)",
        ),
        (raw("data: {not json\n\n", "text/event-stream"), "a stream event that is not JSON"),
        (raw("data: 42\n\n", "text/event-stream"), "not a chat completion chunk"),
        (raw('data: {"choices": "abc"}\n\n', "text/event-stream"), "not a chat completion chunk"),
        (
            raw(
                'data: {"choices": [{"index": 0, "delta": {"content": 7}}]}\n\n',
                "text/event-stream",
            ),
            "int where text belongs",
        ),
        (
            raw(
                'data: {"choices": [{"index": 0, "delta": {"tool_calls": '
                '[{"function": {}}]}}]}\n\n',
                "text/event-stream",
            ),
            "a tool call without an index",
        ),
    ],
)
async def test_garbage_fails_at_once_saying_so(server, make, step, words):
    server.script += [step, reply("never asked for")]
    said = await fails(make(), words)
    assert "is it an OpenAI-compatible endpoint?" in said
    assert len(server.requests) == 1  # a server that sends garbage sends it again


async def test_garbage_after_output_began(server, make):
    good = "".join(f"data: {json.dumps(c)}\n\n" for c in reply("hello there")["stream"][:3])
    server.script.append(raw(good + "data: <<<garbage>>>\n\n", "text/event-stream"))
    await fails(make(), "a stream event that is not JSON")


async def test_an_error_event_mid_stream(server, make):
    good = "".join(f"data: {json.dumps(c)}\n\n" for c in reply("hello there")["stream"][:2])
    bad = json.dumps({"error": {"message": f"the model crashed ({KEY})", "type": "server_error"}})
    server.script.append(raw(good + f"data: {bad}\n\n", "text/event-stream"))
    await fails(make(), r"reported an error mid-stream: the model crashed \(\*\*\*\)")
    assert len(server.requests) == 1


async def test_an_empty_stream_is_retried_then_given_up(server, make):
    server.script += [raw("", "text/event-stream") for _ in range(5)]
    await fails(make(max_retries=1), r"ended before any output, 2 attempts; giving up")
    assert len(server.requests) == 2


# ---------------------------------------------------------------- cancellation


async def test_cancelling_a_call_that_hangs_before_the_first_byte_closes_it(server, make):
    server.script.append(silent())
    call = asyncio.ensure_future(make(timeout=600, idle_timeout=600).complete(ASK))
    await asyncio.to_thread(lambda: _until(lambda: server.requests))
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(call, GUARD_S)
    await disconnected(server)


async def test_cancelling_a_call_that_hangs_mid_stream_in_silence_closes_it(server, make):
    server.script.append(hang(keepalive=False))
    pieces: list[str] = []
    call = asyncio.ensure_future(
        make(timeout=600, idle_timeout=600).complete(ASK, on_text=pieces.append)
    )
    await asyncio.to_thread(lambda: _until(lambda: pieces))
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(call, GUARD_S)
    await disconnected(server)


async def test_cancelling_during_a_retry_wait_sends_no_more_requests(server, make):
    server.script += [error(429, "slow down", headers={"Retry-After": "600"}), reply("no")]
    retries: list[str] = []
    call = asyncio.ensure_future(make(max_backoff=600).complete(ASK, on_retry=retries.append))
    await asyncio.to_thread(lambda: _until(lambda: retries))
    assert "retrying in 600.0 s" in retries[0]
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(call, GUARD_S)
    assert len(server.requests) == 1


def _until(check, timeout: float = GUARD_S) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)
