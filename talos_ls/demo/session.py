"""`talos demo`: two turns of a real Talos session with a scripted model and scripted replies.

Everything but the model and the person is real: the host, the store (a temporary SQLite file),
the rules files, the reconciler and the question queue, the sandbox, the permission gate, the
proposals and the cost meter. The model is a local server playing a fixed script; the person's
replies are scripted and printed as such. No API key, no network.

What it shows: two rules files that conflict become one question while another candidate waits
for the budget; the answer moves confidence and the next turn settles the conflict; a
permission prompt; proposals as diffs, applied on confirmation; the cost.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import tempfile
from decimal import Decimal
from functools import partial
from pathlib import Path

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..agent.cost import Price
from ..agent.model import ModelConfig
from ..agent.workspace import Workspace
from ..display import visible
from ..host import Host, HostConfig
from ..store import open_store
from ..terminal import TerminalPort, labelled
from .scripted_model import ScriptedModelServer, reply

DEMO_MODEL = "talos-demo-model"
DEMO_PRICE = Price(Decimal("2.00"), Decimal("0.50"), Decimal("8.00"))

FILES = {
    "AGENTS.md": "# Conventions\n- Tests use unittest\n- Keep functions small\n",
    "CLAUDE.md": "# Notes for agents\n- Tests use pytest\n",
    "src/calc.py": (
        "def add(a, b):\n    return a - b\n\n\n"
        "if __name__ == '__main__':\n    print('add(2, 3) =', add(2, 3))\n"
    ),
    "src/parser.py": "def parse(text):\n    return text.split()\n",
    "tools/parser.py": "def parse_args(argv):\n    return dict(a.split('=') for a in argv)\n",
}

TURNS = [
    "Fix the bug in add() in src/calc.py and check it; tests come later",
    "Now write tests for the parser",
]


def _script(python: str) -> list[dict]:
    run = json.dumps({"command": f"{python} src/calc.py"})
    block = {"search": "return a - b", "replace": "return a + b"}
    fix = json.dumps({"path": "src/calc.py", "blocks": [block]})
    test = json.dumps(
        {
            "path": "tests/test_parser.py",
            "content": (
                "from src.parser import parse\n\n\n"
                "def test_parse_splits_on_whitespace():\n"
                "    assert parse('a  b\\tc') == ['a', 'b', 'c']\n\n\n"
                "def test_parse_empty():\n"
                "    assert parse('') == []\n"
            ),
        }
    )
    step = partial(reply, model=DEMO_MODEL)
    return [
        step(
            "Reading src/calc.py.",
            [("c1", "read_file", '{"path": "src/calc.py"}')],
            usage=(1200, 40, 0),
        ),
        step(
            "add() subtracts. Let me confirm by running it.",
            [("c2", "run_command", run)],
            usage=(1500, 60, 1024),
        ),
        step(
            "Confirmed: add(2, 3) gives -1.",
            [("c3", "propose_edit", fix)],
            usage=(1700, 80, 1024),
        ),
        step(
            "I proposed `return a + b` in add(). Tests come in the next step.",
            usage=(1900, 30, 1024),
        ),
        step(
            "'The parser' could be src/parser.py or tools/parser.py; I assume src/parser.py, "
            "which the app uses, and write pytest tests, as you said.",
            [("c4", "propose_edit", test)],
            usage=(2100, 150, 1024),
        ),
        step(
            "Proposed tests/test_parser.py with two pytest tests for parse().",
            usage=(2300, 25, 1024),
        ),
    ]


def _facts_table(host: Host) -> Table:
    table = Table("confidence", "evidence", "source", "state", "fact", box=None)
    for f in host.facts.list(host.agent_id):
        if f.subject is None:
            continue
        state = "live" if f.live else ("superseded" if f.superseded_by else "retracted")
        table.add_row(
            f"{f.confidence:.2f}",
            f"+{f.corroborations}/-{f.contradictions}",
            f.source,
            state,
            Text(visible(f.statement)),
        )
    return table


async def _session(
    console: Console, root: Path, store_url: str, server: ScriptedModelServer
) -> int:
    store = open_store(store_url)
    port = TerminalPort(
        console,
        Workspace(root),
        interactive=False,
        scripted_answers=["pytest"],  # the conflict question
        scripted_confirms=["Allow once", "Apply", "Apply"],  # run the check; apply both
    )
    config = HostConfig(
        workspace=root,
        model=ModelConfig(DEMO_MODEL, base_url=server.url),
        prices={DEMO_MODEL: DEMO_PRICE},
    )
    host = Host(store, config, port)
    try:
        for n, request in enumerate(TURNS, 1):
            console.rule(f"turn {n}")
            console.print(labelled("you:", request))
            result = await host.turn(request)
            task = await host.wait(result.task)
            console.print(labelled("talos:", task.result or ""))
            if result.question is None:
                console.print("[dim]no question this turn[/]")
            waiting = [c for c in host.queue.candidates(host.agent_id) if c.status == "pending"]
            status = await host.status()
            for cand in waiting:
                console.print(
                    labelled(
                        f"question waiting for the budget (one per 5 turns; next at turn "
                        f"{status['budget_opens_at_turn']}):",
                        cand.question_text,
                        "yellow",
                    )
                )
            console.print(_facts_table(host))
            if task.state != "done":
                console.print(labelled(f"task {task.state}:", task.error or "", "red"))
                return 1
        session = host.meter.session()
        tokens_in, tokens_out = session.tokens_in, session.tokens_out
        console.rule("cost")
        console.print(
            f"{tokens_in} tokens in, {tokens_out} out: ${host.meter.session_cost:.4f} "
            f"(scripted usage, priced at ${DEMO_PRICE.input}/M in, ${DEMO_PRICE.output}/M out)"
        )
        console.print(
            "src/calc.py now says: "
            + (root / "src" / "calc.py").read_text().splitlines()[1].strip()
        )
        return 0
    finally:
        await host.close()
        store.close()


def run(console: Console | None = None) -> int:
    console = console or Console()
    console.print(
        Panel(
            "SCRIPTED DEMO: no model is called and nothing leaves this machine. A local server "
            "plays a fixed model script, and your replies are scripted too; everything else is the "
            "real Talos (host, store, rules, question queue, permissions, proposals, cost).",
            border_style="magenta",
        )
    )
    workdir = Path(tempfile.mkdtemp(prefix="talos-demo-"))
    root = workdir / "workspace"
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    console.print(f"[dim]example workspace: {root}[/]")
    server = ScriptedModelServer()
    # The name a person would type, when it is on PATH (the sandbox keeps PATH).
    server.script = _script("python3" if shutil.which("python3") else sys.executable)
    try:
        return asyncio.run(
            _session(console, root, "sqlite:///" + str(workdir / "talos.db"), server)
        )
    finally:
        server.close()
        shutil.rmtree(workdir, ignore_errors=True)
