"""Talos's errors: one root, so that every surface can tell an expected failure from a bug.

A `TalosError` is an expected failure: something outside the code is not as it must be (a
command's argument, a path, a file, a setting, the store, the model's endpoint, a cap), and its
message says what, and how to fix it, in words for the person. Any other exception is a bug.
This module imports nothing of Talos's, so any layer can raise one.

    TalosError
    ├── ParamsError           lsp/daemon.py       a command's argument is missing or wrong
    ├── TooBusy               lsp/daemon.py       too many tasks waiting: try again later
    ├── JsonRpcRequestFailed  lsp/transport.py    TooBusy as LSP's RequestFailed (and pygls's
    │                                             JsonRpcException, which pygls answers with)
    ├── Refused               lsp/tcp.py          a TCP connection may not speak to the server
    ├── TcpError              lsp/tcp.py          --tcp or --token-file cannot be used
    ├── SettingError          lsp/settings.py     one setting's value is refused
    ├── ConfigError           config.py           config files, variables or flags refused
    ├── CliError              cli_report.py       a CLI failure, with its kind and exit code
    ├── StoreError            store/              the store failed; `reason` says how
    ├── ModelError            agent/model.py      the model's endpoint cannot be used
    ├── CapReached            agent/cost.py       a cap or the loop guard stopped a task
    ├── ToolError             agent/tools.py      the model's tool call is refused
    ├── SandboxError          agent/workspace.py  a path the agent may not use
    ├── TooManyMounts         agent/workspace_layout.py  a command needs too many covers
    ├── SkillError            agent/skills.py     a SKILL.md is malformed
    ├── ProposalError         edits/proposals.py  a proposal cannot be made, applied or undone
    ├── NotRegularFile        files.py            a FIFO, a device... where a file was expected
    └── FileTooLarge          files.py            a file over the reader's limit
                                                  (both also OSError: the same read raises the
                                                  OS's own, and readers catch both as one)

How each surface reports them:
- LSP (`server.py`): a command's ParamsError or SandboxError is answered -32602 (Invalid
  Params), TooBusy -32803 (Request Failed), any other TalosError -32603 with its message; one
  raised in a notification handler or a background job is shown (`window/showMessage`).
- CLI (`cli.py`, `cli_report.py`): a CliError is one line, or one JSON object, with its kind
  and exit code; any other TalosError the same with kind `failed`, exit code 1.
- Agent loop: a tool's ToolError, SandboxError or ProposalError goes back to the model as the
  tool's result (`agent/tools.py`); a ModelError fails the task, CapReached stops it.

Anything else is a bug. The language server logs it with its traceback (the exception's message
withheld: it may quote a prompt or code, `lsp/logs.py`), tells the person "internal error" and
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
