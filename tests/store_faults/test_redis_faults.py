"""Redis under the daemon: down mid-session, down at start, slow (a proxy that delays past the
URL's timeout), and restarted mid-session. The daemon keeps answering, asks nothing while it
cannot record, says once that it cannot reach the server (or that it is slow), and takes it
back without a restart; acknowledged facts survive (the server runs with appendonly)."""

from __future__ import annotations

import pytest

from ..redis_server import RedisServer
from .conftest import (
    BACK,
    UNAVAILABLE,
    DelayingProxy,
    conflict,
    degraded,
    recovered,
    refused,
    said,
    start,
    still_answers,
    task_runs,
)

KEPT = "The build uses make"
LOST = "Deploys go through CI"
# The product's own timeout, set by these tests: far above what a busy machine adds to a call
# (a spurious outage would be one message too many), and the slow proxy holds each request
# three times as long.
TIMEOUT_S = 3
TIMEOUT = f"?timeout={TIMEOUT_S}"


@pytest.fixture
def redis(tmp_path):
    server = RedisServer(tmp_path, appendonly=True)
    yield server
    server.kill()


async def _after(editor, model, ws):
    """Back: tasks run, the question is asked, what was acknowledged is there and what failed
    is not; one message each way."""
    await recovered(editor)
    editor.replies.append(editor.button("pytest"))
    await task_runs(editor, model, "write the tests")
    await editor.until(lambda: editor.prompts, "the question, once the store works")
    memory = {f["statement"] for f in await editor.command("talos.memory.list", {})}
    assert LOST not in memory
    assert len(said(editor, UNAVAILABLE)) == 1 and len(said(editor, BACK)) == 1
    return memory


async def _while_down(editor, ws, *expected):
    problem = await degraded(editor, *expected)
    await still_answers(editor, ws)
    await refused(editor, "talos.task.start", {"prompt": "write the tests"}, UNAVAILABLE, *expected)
    await refused(editor, "talos.memory.remember", {"statement": LOST}, UNAVAILABLE)
    assert editor.prompts == []
    assert len(said(editor, UNAVAILABLE)) == 1 and problem in said(editor, UNAVAILABLE)[0]


async def test_redis_down_mid_session(tmp_path, ws, model, redis):
    editor = await start(tmp_path / "home", ws, model, redis.url + TIMEOUT)
    try:
        await task_runs(editor, model, "first")
        await editor.command("talos.memory.remember", {"statement": KEPT})
        conflict(ws)
        redis.kill()
        await refused(editor, "talos.task.start", {"prompt": "write the tests"})
        await _while_down(editor, ws, "cannot reach", redis.url, "is redis-server running?")
        redis.start()  # same port, from its append-only file
        assert KEPT in await _after(editor, model, ws)
    finally:
        await editor.stop()


async def test_redis_down_at_start(tmp_path, ws, model, redis):
    redis.kill()
    conflict(ws)
    editor = await start(tmp_path / "home", ws, model, redis.url + TIMEOUT)
    try:
        await _while_down(editor, ws, "cannot reach", "is redis-server running?")
        redis.start()
        await _after(editor, model, ws)  # the folder, which waited, is served
    finally:
        await editor.stop()


async def test_redis_slow(tmp_path, ws, model, redis):
    proxy = DelayingProxy(redis.port)
    editor = await start(tmp_path / "home", ws, model, proxy.url + TIMEOUT)
    try:
        await task_runs(editor, model, "first")
        await editor.command("talos.memory.remember", {"statement": KEPT})
        conflict(ws)
        proxy.delay = 3 * TIMEOUT_S
        await refused(editor, "talos.task.start", {"prompt": "write the tests"})
        await _while_down(editor, ws, f"did not answer within {TIMEOUT_S} s", "timeout=")
        proxy.delay = 0
        assert KEPT in await _after(editor, model, ws)
    finally:
        await editor.stop()
        proxy.close()


async def test_redis_restarted_mid_session(tmp_path, ws, model, redis):
    """Killed and started again between two requests: the daemon's next calls reconnect; at
    most one outage is reported (and then its end), tasks run, the fact survives."""
    editor = await start(tmp_path / "home", ws, model, redis.url + TIMEOUT)
    try:
        await task_runs(editor, model, "first")
        await editor.command("talos.memory.remember", {"statement": KEPT})
        redis.kill()
        redis.start()
        for n in range(3):
            try:
                await task_runs(editor, model, f"again {n}")
                break
            except Exception as exc:  # an outage seen: refused with the problem, then back
                assert UNAVAILABLE in str(exc) or "redis" in str(exc), exc
                await recovered(editor)
        else:
            raise AssertionError("no task ran after the restart")
        status = await editor.command("talos.status", {})
        assert status["store"]["available"] and status["store"]["problem"] is None
        assert len(said(editor, UNAVAILABLE)) <= 1
        assert len(said(editor, BACK)) == len(said(editor, UNAVAILABLE))
        memory = {f["statement"] for f in await editor.command("talos.memory.list", {})}
        assert KEPT in memory
    finally:
        await editor.stop()
