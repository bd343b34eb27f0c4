"""The import graph of `talos_ls`, read from the source with `ast`: no cycles between modules.

Every import statement counts as an arrow, wherever it is: at module level, inside a function
(a deferred import) and under `if TYPE_CHECKING:` (a type-only import). A deferred or type-only
import still means one module knows the other; counting only module-level imports would have
hidden both cycles issue 27 names (the question queue imported its producers inside methods;
the LSP port imports the server for types only).

And the arrows point down (docs/architecture.md, "Layers"): each module is in one layer of
`LAYERS` and imports only from its own layer or those below; only the LSP surface imports
pygls or lsprotocol; above `store/`, nobody names a backend.
"""

from __future__ import annotations

import ast
import itertools
from collections import deque
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "talos_ls"

# Top to bottom; a module is in the first layer one of whose prefixes it starts with (a
# package prefix ends with "."). Keep in step with docs/architecture.md.
LAYERS = {
    "entry points": (
        "talos_ls.server",
        "talos_ls.cli",
        "talos_ls.store_commands",
        "talos_ls.commands",
        "talos_ls.completion",
        "talos_ls.doctor",
        "talos_ls.demo.",
    ),
    "surfaces": (
        "talos_ls.lsp.",
        "talos_ls.acp.",
        "talos_ls.terminal",
        "talos_ls.project",
        "talos_ls.config",
        "talos_ls.settings",
        "talos_ls.cli_report",
    ),
    "host": ("talos_ls.host", "talos_ls.watch"),
    "domain": ("talos_ls.agent.", "talos_ls.memory.", "talos_ls.gates.", "talos_ls.edits."),
    "store": ("talos_ls.store.",),
    "base": ("talos_ls.",),
}
LSP_SURFACE = ("talos_ls.server", "talos_ls.lsp.")
BACKENDS = ("talos_ls.store.sqlite", "talos_ls.store.redis", "talos_ls.store.redis_connect")

Graph = dict[str, dict[str, int]]  # module -> imported module -> a line importing it


def modules(package: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package (a package by its
    `__init__.py`)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def import_graph(package: Path = PACKAGE) -> Graph:
    """Every module's imports, absolute: modules of the package by their module (a name
    imported from a package is that submodule when there is one), others by the name
    written (`pygls.server`)."""
    known = modules(package)
    graph: Graph = {}
    for name, path in known.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = here.split(".")[: len(here.split(".")) - node.level + 1]
                    base = ".".join([*parent, *([base] if base else [])])
                targets = [
                    f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
                ]
            else:
                continue
            for target in targets:
                while target not in known and "." in target and target.startswith(PACKAGE.name):
                    target = target.rpartition(".")[0]  # an attribute path: its module
                if target != name:
                    edges.setdefault(target, node.lineno)
        graph[name] = edges
    return graph


def cycles(graph: Graph) -> list[list[str]]:
    """For each group of modules that import one another in a circle, its shortest cycle
    through its first module, [a, b, ..., a]; [] when there is none."""
    edges = {m: sorted(t for t in targets if t in graph) for m, targets in graph.items()}
    reach = {}
    for start in edges:
        seen, stack = set(), list(edges[start])
        while stack:
            here = stack.pop()
            if here not in seen:
                seen.add(here)
                stack.extend(edges[here])
        reach[start] = seen
    groups = {frozenset(m for m in reach[start] if start in reach[m]) for start in edges}
    found = []
    for group in sorted(sorted(g) for g in groups if g):
        start, back = group[0], {}
        queue = deque([start])
        while start not in back:  # breadth first: the shortest way back to `start`
            here = queue.popleft()
            for there in edges[here]:
                if there in group and there not in back:
                    back[there] = here
                    queue.append(there)
        path = [start]
        while len(path) == 1 or path[-1] != start:
            path.append(back[path[-1]])
        found.append(path[::-1])
    return found


def _shown(cycle: list[str], graph: Graph) -> str:
    steps = [cycle[0]]
    for a, b in itertools.pairwise(cycle):
        where = modules(PACKAGE)[a].relative_to(PACKAGE.parent)
        steps.append(f"-> {b} ({where}:{graph[a][b]})")
    return " ".join(steps)


def test_no_import_cycles():
    graph = import_graph()
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n".join(_shown(c, graph) for c in found)


def layer(module: str) -> int:
    """0 for the top layer; a package is in the layer of its modules."""
    for rank, prefixes in enumerate(LAYERS.values()):
        if any((module + ".").startswith(p) if p.endswith(".") else module == p for p in prefixes):
            return rank
    return len(LAYERS) - 1  # `talos_ls` itself


def upward(graph: Graph) -> list[str]:
    """Imports that point up a layer, or at pygls/lsprotocol outside the LSP surface, or at a
    store backend from outside the store."""
    names = list(LAYERS)
    found = []
    for module, targets in sorted(graph.items()):
        for target in targets:
            if target.startswith("talos_ls") and layer(target) < layer(module):
                found.append(
                    f"{module} ({names[layer(module)]}) imports {target} ({names[layer(target)]})"
                )
            elif target.split(".")[0] in ("pygls", "lsprotocol") and not (
                module == LSP_SURFACE[0] or module.startswith(LSP_SURFACE[1])
            ):
                found.append(f"{module} imports {target}: only the LSP surface knows LSP")
            elif target.startswith(BACKENDS) and not module.startswith("talos_ls.store"):
                found.append(f"{module} imports {target}: above store/, no backend is named")
    return found


def test_imports_point_down():
    found = upward(import_graph())
    assert not found, "imports against docs/architecture.md:\n" + "\n".join(found)


def test_every_module_is_placed_and_every_layer_is_used():
    """A new top-level module lands in "base" unless placed: a surface or domain module
    must be named, or the rules would not hold it."""
    graph = import_graph()
    used = {layer(m) for m in graph}
    assert used == set(range(len(LAYERS)))
    base = sorted(m for m in graph if layer(m) == len(LAYERS) - 1)
    assert all(m.count(".") <= 1 for m in base), base
    assert all(not upward({m: graph[m]}) for m in base)


def test_the_layer_rules_catch_each_kind_of_arrow(tmp_path):
    """On a small package: an upward import, pygls below the surface, a backend named."""
    package = tmp_path / "talos_ls"
    for sub in ("agent", "store", "lsp"):
        (package / sub).mkdir(parents=True)
        (package / sub / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "host.py").write_text("")
    (package / "store" / "sqlite.py").write_text("")
    (package / "lsp" / "port.py").write_text("import pygls.server\nfrom .. import host\n")
    (package / "agent" / "loop.py").write_text(
        "from ..host import x\nfrom lsprotocol import types\nfrom ..store.sqlite import S\n"
    )
    found = upward(import_graph(package))
    assert found == [
        "talos_ls.agent.loop (domain) imports talos_ls.host (host)",
        "talos_ls.agent.loop imports lsprotocol: only the LSP surface knows LSP",
        "talos_ls.agent.loop imports talos_ls.store.sqlite: above store/, no backend is named",
    ]


def test_deferred_and_type_only_imports_count(tmp_path):
    """The rule's reach, on a package of two modules."""
    package = tmp_path / "talos_ls"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from . import b\n")
    (package / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import f\n"
    )
    graph = import_graph(package)
    assert graph["talos_ls.a"] == {"talos_ls.b": 2}
    assert cycles(graph) == [["talos_ls.a", "talos_ls.b", "talos_ls.a"]]
