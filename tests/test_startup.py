"""What starting up loads (issue 30): `talos --version`, `--help` and `talos completion` load
the parser and nothing else of Talos; `import talos_ls.server` loads what answering
`initialize` needs, not the host, the agent or the gates (they load with the first folder).
Which modules, not how fast: the times are in `bench/startup_bench.py`."""

from __future__ import annotations

import json
import subprocess
import sys

PARSER = ["talos_ls", "talos_ls.cli", "talos_ls.constants", "talos_ls.errors"]

# Each command in turn in one process, printing the modules of Talos loaded after it.
CLI = """
import contextlib, io, json, sys
from talos_ls.cli import main
for words in json.loads(sys.argv[1]):
    with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):
        main(words)
    loaded = sorted(m for m in sys.modules if m.startswith("talos_ls"))
    print(json.dumps(loaded), file=sys.stderr)
"""


def loaded_after(code: str, *args: str) -> list[list[str]]:
    run = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=True
    )
    return [json.loads(line) for line in run.stderr.splitlines()]


def test_version_help_and_completion_load_only_the_parser():
    words = [["--version"], ["--help"], ["run", "--help"], ["memory", "add", "--help"]]
    words.append(["completion", "bash"])
    *parsing, completing = loaded_after(CLI, json.dumps(words))
    assert parsing == [PARSER] * 4
    # and, as every command, the logging of the error path (`cli_report`): no store backend
    logging = ["talos_ls.cli_report", "talos_ls.display", "talos_ls.redact"]
    logging += ["talos_ls.store", "talos_ls.store.base"]
    assert completing == sorted([*PARSER, "talos_ls.completion", *logging])


def test_the_server_loads_the_host_with_the_first_folder_not_before():
    code = "import json, sys, talos_ls.server\nsys.stderr.write(json.dumps(sorted(sys.modules)))"
    (loaded,) = loaded_after(code)
    assert "talos_ls.lsp.daemon" in loaded and "talos_ls.lsp.settings" in loaded
    for later in ("talos_ls.host", "talos_ls.agent.loop", "talos_ls.gates.permissions"):
        assert later not in loaded
    for later in ("talos_ls.watch", "talos_ls.lsp.port", "talos_ls.gates.question_queue"):
        assert later not in loaded
    assert "pathspec" not in loaded  # the first Workspace loads it
