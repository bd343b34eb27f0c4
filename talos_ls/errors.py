"""Talos's errors: one root, so that every surface can tell an expected failure from a bug.

A `TalosError` is an expected failure: something outside the code is not as it must be (a
command's argument, a path, a file, a setting, the store, the model's endpoint, a cap), and its
message says what, and how to fix it, in words for the person. Any other exception is a bug.
This module imports nothing of Talos's, so any layer can raise one.

    TalosError                means                               raised in (defined in the first)
    ├── ParamsError           a command's argument is wrong       lsp/daemon.py, lsp/prompts.py,
    │                                                             server.py
    ├── TooBusy               too many tasks wait: try later      lsp/daemon.py
    ├── JsonRpcRequestFailed  TooBusy as LSP's RequestFailed      lsp/transport.py, server.py
    │                         (also pygls's JsonRpcException, which pygls answers with)
    ├── Refused               a TCP connection may not speak      lsp/tcp.py
    ├── TcpError              --tcp or --token-file unusable      lsp/tcp.py
    ├── SettingError          one setting's value refused         settings.py
    ├── ConfigError           config files, variables or flags    config.py
    ├── CliError              a CLI failure: kind, exit code      cli_report.py, cli.py,
    │                                                             store_commands.py,
    │                                                             commands.py, project.py
    ├── StoreError            the store failed; `reason` says how store/, lsp/health.py,
    │                                                             lsp/daemon.py
    ├── ModelError            the model's endpoint is unusable    agent/model.py
    ├── CapReached            a cap or the loop guard stopped it  agent/cost.py
    ├── ToolError             the model's tool call is refused    agent/tools.py
    ├── SandboxError          a path the agent may not use        agent/workspace.py,
    │                                                             agent/search.py, agent/sandbox.py
    ├── TooManyMounts         a command needs too many covers     agent/workspace_layout.py
    ├── SkillError            a SKILL.md is malformed             agent/skills.py
    ├── ProposalError         a proposal cannot be made, applied, edits/proposals.py, host.py,
    │                         rejected or undone                  store_commands.py
    ├── McpError              an MCP server failed or refused     mcp/client.py
    ├── McpConfigError        an MCP configuration is unusable    mcp/config.py
    │                         (also ValueError, as JSON's errors)
    ├── LaunchError           an MCP server cannot be started     mcp/launch.py
    ├── NotRegularFile        a FIFO, a device... is no file      files.py
    └── FileTooLarge          a file over the reader's limit      files.py, acp/port.py (an
                                                                  editor's buffer)
        (both also OSError: the same read raises the OS's own, and readers catch both as one)

How each surface reports them:
- LSP (`server.py`): a command's ParamsError or SandboxError is answered -32602 (Invalid
  Params), TooBusy -32803 (Request Failed), any other TalosError -32603 with its message; one
  raised in a notification handler or a background job is shown (`window/showMessage`).
- CLI (`cli.py`, `cli_report.py`): a CliError is one line, or one JSON object, with its kind
  and exit code; any other TalosError the same with kind `failed`, exit code 1.
- Agent loop: a tool's ToolError, SandboxError or ProposalError goes back to the model as the
  tool's result (`agent/tools.py`); a ModelError fails the task, CapReached stops it, anything
  else fails it too, its traceback logged (`agent/tasks.py`).

Anything else is a bug. The language server logs it with its traceback (the exception's message
withheld: it may quote a prompt or code, `logs.py`), tells the person "internal error" and
where the log is, and goes on serving (`lsp/transport.py`); the CLI says the same in one line,
the traceback in its --log-file (exit code 1).

A class whose name starts with `_` is control flow inside its module (`agent/model.py`'s stream
faults, `gates/shell.py`'s `_Budget`): it never leaves that module, and is no TalosError. A
ValueError raised for a caller's wrong argument stays one: where outside input can cause it,
the code that passes the input on catches it and says what is wrong (a setting's check,
`Daemon.remember`).
"""


class TalosError(Exception):
    """An expected failure; the message says what is wrong, for the person."""
