"""Tools from Model Context Protocol servers, under the same permission gate and sandbox as
the agent's own (docs/mcp.md): `config` (which servers, trusted from where), `client` (the
connections, on a thread of their own), `adapt` (names, schemas and results as the model
sees them)."""
