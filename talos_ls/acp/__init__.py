"""The ACP surface: `talos-ls --acp`, Talos as an Agent Client Protocol (v1) agent on stdio.

`serve.py` starts it, `wire.py` reads and writes the protocol (hardened against the client),
`agent.py` answers ACP's methods over one host per folder, `port.py` is the EditorPort through
which a host reaches the person, `sessions.py` keeps the sessions' records. Nothing here knows
LSP (no pygls).
"""
