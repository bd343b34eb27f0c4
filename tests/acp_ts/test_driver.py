"""The driver itself: an agent that breaks the protocol fails the test. A lying agent (a few
lines of Python) answers `initialize` without its protocol version, sends a session update of
a kind that does not exist and a log line on stdout; the SDK and the driver must each report
what they saw, and `Log.assert_clean` must refuse the run. Without this, a schema check that
never fires would pass every test above."""

from __future__ import annotations

import sys

import pytest

from .conftest import Acp, init, new_session, prompt

LYING_AGENT = r"""
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if "method" not in msg or "id" not in msg:
        continue
    method, mid = msg["method"], msg["id"]
    if method == "initialize":
        result = {"agentCapabilities": {"loadSession": "yes"}}
    elif method == "session/new":
        result = {"sessionId": "s1"}
    elif method == "session/prompt":
        sid = msg["params"]["sessionId"]
        bogus = {"sessionId": sid, "update": {"sessionUpdate": "mind_control", "x": 1}}
        print(json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": bogus}))
        print("INFO: a log line on stdout", flush=True)
        result = {"stopReason": "end_turn"}
    else:
        result = {}
    print(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}), flush=True)
"""


def test_the_driver_refuses_an_agent_that_breaks_the_schema(acp: Acp, tmp_path):
    agent = tmp_path / "lying_agent.py"
    agent.write_text(LYING_AGENT)
    ws = acp.workspace()
    log = acp.drive(
        [init(), new_session(ws), prompt("s", "hi", "turn")], argv=[sys.executable, str(agent)]
    )
    assert log.result("turn") == {"stopReason": "end_turn"}  # the run itself went through
    wheres = {(e["source"], e.get("where", "")) for e in log.data["schemaErrors"]}
    assert ("driver", "initialize result") in wheres
    assert ("driver", "session/update params") in wheres
    assert any(source == "sdk" for source, _ in wheres)  # the SDK refused the update too
    assert log.data["stdoutNotJson"] == ["INFO: a log line on stdout"]
    with pytest.raises(AssertionError):
        log.assert_clean()
