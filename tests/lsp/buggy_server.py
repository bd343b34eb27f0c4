"""`talos-ls` with two bugs planted: a command and a notification whose handlers raise what no
code expects, as a bug deep in a handler would (`test_errors.py`). Run as a script, with
`talos-ls`'s own arguments."""

from __future__ import annotations

import sys
from typing import Any

from talos_ls import server
from talos_ls.lsp.daemon import Params


def _lookup(p: Params) -> Any:
    return {}[p.get("key", str)]  # a KeyError, from a table that should have held the key


server._command("talos.test.bug", _lookup)


@server.server.feature("talos/testBug")
def _notified(ls: server.TalosServer, params: Any) -> None:
    raise TypeError(f"cannot take {params}")


if __name__ == "__main__":
    sys.exit(server.main(sys.argv[1:]))
