"""MCP tools through `talos run` (the real CLI, a scripted model, the real sandbox), with
our hostile servers: every call is a permission decision, results are bounded and redacted,
and a server that misbehaves is contained and reported while the task goes on."""

from __future__ import annotations

import contextlib
import json
import socket
import threading

from talos_ls.agent.tools import MAX_OUTPUT
from talos_ls.demo.scripted_model import reply

from ..pseudo_terminal import Terminal, plain
from .conftest import HOSTILE, hostile, offered, tool_results


def call(name: str, args: dict | None = None, n: int = 1):
    return reply(None, [(f"c{n}", name, json.dumps(args or {"text": "hello"}))])


def test_an_allowed_call_reaches_the_server_and_its_result_the_model(sandbox, server, person):
    person.servers({"h": hostile("plain")})
    person.allow("mcp__h__*")
    server.script += [call("mcp__h__echo"), reply("done.")]
    r = person.run(server)
    assert r.returncode == 0, r.stderr
    tools = offered(server)
    assert tools["mcp__h__echo"]["description"] == "[MCP server h] Say the text back."
    assert tools["mcp__h__echo"]["parameters"]["properties"] == {"text": {"type": "string"}}
    assert tool_results(server) == ["echo: hello"]


def test_headless_a_call_no_rule_allows_is_denied_and_never_reaches_the_server(
    sandbox, server, person
):
    person.servers({"h": hostile("plain")})
    person.allow("mcp__h__calls")  # only the tool that says which calls arrived
    server.script += [call("mcp__h__echo"), call("mcp__h__calls", n=2), reply("done.")]
    r = person.run(server)
    assert r.returncode == 0, r.stderr
    denied, calls = tool_results(server)
    assert denied.startswith("error: not run: no rule allows it; nobody is there to ask")
    assert calls == "calls so far: []"


def test_a_deny_rule_wins_over_an_allow(sandbox, server, person):
    person.servers({"h": hostile("plain")})
    (person.config / "talos" / "permissions.json").write_text(
        json.dumps({"tools": {"allow": ["mcp__h__*"], "deny": ["mcp__h__echo"]}})
    )
    server.script += [call("mcp__h__echo"), call("mcp__h__calls", n=2), reply("done.")]
    assert person.run(server).returncode == 0
    denied, calls = tool_results(server)
    assert "is denied by your settings" in denied and calls == "calls so far: []"


def test_the_prompt_shows_server_tool_and_arguments_as_plain_text_and_always_allow_saves(
    sandbox, server, person
):
    person.servers({"h": hostile("plain")})
    sneaky = {"text": "hi\x1b[2J\x1b]0;owned\x07 Allow once? \u202eevil"}
    server.script += [
        call("mcp__h__echo", sneaky),
        call("mcp__h__echo", {"text": "again"}, n=2),
        reply("done."),
    ]
    term = Terminal(person.run_argv(server), person.env())
    try:
        term.until("Use this MCP tool?")
        term.until("Deny")
        shown = plain(term.raw)
        assert "`mcp__h__echo`" in shown and "Server: h, runs `" in shown
        # JSON escapes the controls; visible() the rest (a bidi override)
        assert "\\u001b[2J" in shown and "\\u001b]0;owned\\u0007" in shown
        assert "\\u202e" in shown
        assert b"\x1b[2J" not in term.raw and b"\x1b]0;owned" not in term.raw
        assert "Always allow `mcp__h__echo`" in shown
        term.send("2\n")  # Always allow: the second call is not asked
        term.until("done.")
        assert term.finish() == 0
    finally:
        term.proc.kill()
    assert plain(term.raw).count("Use this MCP tool?") == 1
    first, second = tool_results(server)
    assert first.startswith("echo: hi\x1b[2J") and second == "echo: again"
    saved = [
        json.loads(p.read_text()) for p in (person.config / "talos" / "workspaces").glob("*.json")
    ]
    assert [s["tools"]["allow"] for s in saved] == [["mcp__h__echo"]]


def test_a_dismissed_prompt_is_a_denial(sandbox, server, person):
    person.servers({"h": hostile("plain")})
    server.script += [call("mcp__h__echo"), reply("done.")]
    term = Terminal(person.run_argv(server), person.env())
    try:
        term.until("Use this MCP tool?")
        term.until("Deny")
        term.send("\n")  # Enter alone: dismissed
        term.until("done.")
        assert term.finish() == 0
    finally:
        term.proc.kill()
    assert tool_results(server) == ["error: not run: dismissed: denied"]


# ------------------------------------------------------------------ hostile servers
def test_a_50_mb_result_stops_the_server_and_the_task_goes_on(sandbox, server, person):
    person.servers({"h": hostile("huge")})
    person.allow("mcp__h__*")
    server.script += [call("mcp__h__echo"), reply("done.")]
    r = person.run(server)
    assert r.returncode == 0, r.stderr
    (result,) = tool_results(server)
    assert result == "error: the MCP server h stopped: it sent a message over 4 MB: stopped"
    assert "talos: done." in r.stdout
    assert r.stdout.count("MCP server h: it sent a message over 4 MB") == 1  # reported once


def test_a_3_mb_result_is_redacted_then_capped_like_every_tool_result(sandbox, server, person):
    person.servers({"h": hostile("big")})
    person.allow("mcp__h__*")
    server.script += [call("mcp__h__echo"), reply("done.")]
    r = person.run(server)
    assert r.returncode == 0, r.stderr
    (result,) = tool_results(server)
    head, cut, tail = result.split("\n", 2)
    assert len(result) < MAX_OUTPUT + 100 and set(head) == {"B"}
    assert cut.startswith("[... ") and cut.endswith(" characters cut ...]")
    # the whole was redacted before the cut: the key at its end is not shown, nor part of it
    assert tail.endswith("B the key is [redacted api key]") and "PLANTED" not in result


def test_ten_thousand_tools_are_cut_to_the_bound_and_reported(sandbox, server, person):
    person.servers({"h": hostile("flood")})
    server.script += [reply("done.")]
    r = person.run(server)
    assert r.returncode == 0, r.stderr
    mine = [n for n in offered(server) if n.startswith("mcp__")]
    assert len(mine) == 100 and mine[0] == "mcp__h__t0"
    assert "MCP server h: it offered 10000 tools: only 100 are used" in r.stdout


def test_a_description_of_escapes_and_spoofed_markup_reaches_the_model_as_plain_text(
    sandbox, server, person
):
    person.servers({"h": hostile("spoof")})
    server.script += [reply("done.")]
    assert person.run(server).returncode == 0
    said = offered(server)["mcp__h__echo"]["description"]
    assert said.startswith("[MCP server h] Echo.")  # whose words they are, first
    assert "\x1b" not in said and "\r" not in said and "\u202e" not in said
    assert "\\x1b[2J" in said and "\\x0d\\n" in said and "\\u202e" in said


def test_a_planted_api_key_in_a_result_is_redacted(sandbox, server, person):
    person.servers({"h": hostile("secret")})
    person.allow("mcp__h__*")
    server.script += [call("mcp__h__echo"), reply("done.")]
    r = person.run(server)
    assert r.returncode == 0, r.stderr
    (result,) = tool_results(server)
    assert result == "the key is [redacted api key] ok"
    assert "PLANTED" not in r.stdout + r.stderr


def test_a_server_that_hangs_times_out_and_the_task_goes_on(sandbox, server, person):
    person.servers({"h": hostile("hang", callTimeout=2)})
    person.allow("mcp__h__*")
    server.script += [call("mcp__h__echo"), reply("done.")]
    r = person.run(server)
    assert r.returncode == 0, r.stderr
    assert tool_results(server) == ["error: the MCP server h did not answer within 2 s"]


def test_a_server_that_never_starts_times_out_and_the_task_goes_on(sandbox, server, person):
    person.servers({"h": hostile("mute", timeout=2), "ok": hostile("plain")})
    person.allow("mcp__*")
    server.script += [call("mcp__ok__echo"), reply("done.")]
    r = person.run(server)
    assert r.returncode == 0, r.stderr
    assert "MCP server h: did not start within 2 s" in r.stdout
    tools = offered(server)
    assert "mcp__ok__echo" in tools and not [n for n in tools if n.startswith("mcp__h__")]
    assert tool_results(server) == ["echo: hello"]


def test_a_server_that_exits_mid_call_is_reported_and_started_again_later(sandbox, server, person):
    person.servers({"h": hostile("exit")})
    person.allow("mcp__h__*")
    server.script += [call("mcp__h__echo"), call("mcp__h__echo", n=2), reply("done.")]
    r = person.run(server)
    assert r.returncode == 0, r.stderr
    first, second = tool_results(server)
    assert first == "error: the MCP server h stopped: it exited (code 3)"
    # at once: within its back-off, it is not started again, and that is said
    assert second.startswith("error: the MCP server h stopped (it exited (code 3)); it is ")
    assert r.stdout.count("MCP server h: it exited (code 3)") == 1


def _snoop(server, person, tmp_path, **entry) -> tuple[str, list[object]]:
    """The snoop server's report, and the connections the host's listener got."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    key = home / ".ssh" / "id_ed25519"
    key.write_text("PRIVATE KEY MATERIAL")
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    reached: list[object] = []

    def accept() -> None:
        listener.settimeout(60)
        with contextlib.suppress(OSError):
            reached.append(listener.accept())

    watcher = threading.Thread(target=accept, daemon=True)
    watcher.start()
    try:
        config = {
            **hostile("snoop"),
            "args": [str(HOSTILE), "snoop", str(key)],
            "env": {"SNOOP_PORT": str(port)},
            **entry,
        }
        person.servers({"h": config})
        person.allow("mcp__h__*")
        server.script += [call("mcp__h__snoop"), reply("done.")]
        r = person.run(server, HOME=str(home))
        assert r.returncode == 0, r.stderr
    finally:
        listener.close()
        watcher.join(5)
    (result,) = tool_results(server)
    return result, reached


def test_a_server_cannot_read_the_persons_ssh_keys_nor_reach_the_network(
    sandbox, server, person, tmp_path
):
    result, reached = _snoop(server, person, tmp_path)
    assert "READ" not in result and "CONNECTED" not in result and "RESOLVED" not in result
    assert result.startswith("ssh: FileNotFoundError; net: ConnectionRefusedError; dns: ")
    assert result.endswith("home: /tmp/home")
    assert reached == []


def test_the_network_only_when_the_persons_configuration_grants_it(
    sandbox, server, person, tmp_path
):
    result, reached = _snoop(server, person, tmp_path, network=True)
    assert "net: CONNECTED" in result and len(reached) == 1
    assert result.startswith("ssh: FileNotFoundError")  # the network, not the files


# ------------------------------------------------------------ the repository's file
def test_a_repositorys_mcp_json_starts_nothing_until_trusted(sandbox, server, person, tmp_path):
    marker = tmp_path / "started"
    (person.ws / ".talos").mkdir()
    (person.ws / ".talos" / "mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "evil": {"command": "touch", "args": [str(marker)]},
                    "h": hostile("plain"),
                }
            }
        )
    )
    server.script += [reply("done.")]
    r = person.run(server)
    assert r.returncode == 0, r.stderr
    assert not marker.exists()
    assert not [n for n in offered(server) if n.startswith("mcp__")]
    said = " ".join(r.stdout.split())
    assert (
        "Not trusted: the workspace's .talos/mcp.json would start the MCP servers evil, h" in said
    )
    listed = person.talos("mcp", "list")
    assert "not trusted" in listed.stdout and not marker.exists()
    trusted = person.talos("mcp", "trust")
    assert trusted.returncode == 0, trusted.stderr
    server.script += [reply("done.")]
    assert person.run(server).returncode == 0
    assert "mcp__h__echo" in offered(server, 1)
    # changed after the trust: untrusted again
    (person.ws / ".talos" / "mcp.json").write_text(
        json.dumps({"mcpServers": {"h": hostile("plain")}})
    )
    server.script += [reply("done.")]
    assert person.run(server).returncode == 0
    assert not [n for n in offered(server, 2) if n.startswith("mcp__")]


def test_with_nobody_attached_an_elicitation_is_declined(sandbox, server, person):
    person.servers({"h": hostile("elicit")})
    person.allow("mcp__h__*")
    server.script += [call("mcp__h__pick", {}), reply("done.")]
    r = person.run(server)
    assert r.returncode == 0, r.stderr
    assert tool_results(server) == ["decline None"]


def test_the_repositorys_file_is_offered_for_trust_at_the_terminal(sandbox, server, person):
    (person.ws / ".talos").mkdir()
    (person.ws / ".talos" / "mcp.json").write_text(
        json.dumps({"mcpServers": {"h": hostile("plain")}})
    )
    server.script += [reply("done.")]
    term = Terminal(person.run_argv(server), person.env())
    try:
        term.until("Trust it?")
        term.until("Not now")
        shown = plain(term.raw)
        assert "The workspace's .talos/mcp.json (sha256 " in shown
        assert "It would start these MCP servers: - h: runs `" in shown
        term.send("1\n")  # Trust this file
        term.until("done.")
        assert term.finish() == 0
    finally:
        term.proc.kill()
    assert "mcp__h__echo" in offered(server)


def test_a_tool_never_offered_or_bad_arguments_are_errors_the_model_reads(sandbox, server, person):
    person.servers({"h": hostile("plain")})
    person.allow("mcp__*")
    server.script += [
        reply(
            None,
            [
                ("c1", "mcp__h__nope", "{}"),
                ("c2", "mcp__other__echo", "{}"),
                ("c3", "mcp__h__echo", "[1, 2]"),
                ("c4", "mcp__h__echo", '{"text": '),
                ("c5", "mcp__h__calls", "{}"),
            ],
        ),
        reply("done."),
    ]
    r = person.run(server)
    assert r.returncode == 0, r.stderr
    assert tool_results(server) == [
        "error: there is no tool 'mcp__h__nope'",
        "error: there is no tool 'mcp__other__echo'",
        "error: the arguments of mcp__h__echo must be a JSON object",
        "error: the arguments of mcp__h__echo are not valid JSON (Expecting value)",
        "calls so far: []",  # none of them reached the server
    ]
