"""The attack harness itself: a harmless run through it works, and its bait is in place."""

from .conftest import API_KEY, call


def test_a_plain_run_through_the_harness(attack):
    attack.script([call("read_file", path="src/app.py")], "main returns 1.")
    proc = attack.run()
    result = attack.result(proc)
    assert result["outcome"] == "done", proc.stderr
    assert "return 1" in attack.tool_results()[0]
    assert API_KEY in attack.server.requests[0]["headers"]["authorization"]  # the bait is live
    attack.assert_no_secret_leaked(proc.stdout, proc.stderr)
