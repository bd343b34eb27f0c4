"""Updates a client shows outside the conversation: the `notice` that commands run without a
sandbox (to a client that advertised `session.notices`; as a message to one that did not)."""

from __future__ import annotations

import pytest

from tests.acp.test_hostile import INIT, start_raw
from tests.system import path_without

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("notices", [True, False])
async def test_without_bwrap_the_person_is_told(home, ws, tmp_path, notices):
    caps = {"session": {"notices": {}}} if notices else {}
    raw = await start_raw(home, env={"PATH": path_without(tmp_path, "bwrap")})
    try:
        await raw.request(1, "initialize", {**INIT, "clientCapabilities": caps})
        await raw.request(2, "session/new", {"cwd": str(ws), "mcpServers": []})
        sid = (await raw.reply_to(2))["result"]["sessionId"]

        def told():
            for m in raw.messages:
                if m.get("method") == "session/update" and m["params"]["sessionId"] == sid:
                    update = m["params"]["update"]
                    text = update.get("title") or update.get("content", {}).get("text", "")
                    if "without a sandbox" in text:
                        return update
            return None

        update = await raw.until(told, "the sandbox's notice")
        if notices:
            assert update["sessionUpdate"] == "notice" and update["severity"] == "warning"
        else:
            assert update["sessionUpdate"] == "agent_message_chunk"
        # It follows the response that gave the client the session's id.
        order = [m.get("id") for m in raw.messages]
        first = next(
            i for i, m in enumerate(raw.messages) if m.get("params", {}).get("sessionId") == sid
        )
        assert order.index(2) < first
    finally:
        assert await raw.close() == 0
