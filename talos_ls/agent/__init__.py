"""The agent: the model client, its tools, the sandboxed workspace, tasks, cost, the loop."""
