"""The import graph of `talos_ls`, read from the source with `ast`: no cycles between modules.

Every import statement counts as an arrow, wherever it is: at module level, inside a function
(a deferred import) and under `if TYPE_CHECKING:` (a type-only import). A deferred or type-only
import still means one module knows the other; counting only module-level imports would have
hidden both cycles issue 27 names (the question queue imported its producers inside methods;
the LSP port imports the server for types only).

A cycle that is known and being fixed is allowed by naming its back edge in `KNOWN_BACK_EDGES`,
with who fixes it; an entry whose import is gone fails too, so it is removed with the fix.
"""

from __future__ import annotations

import ast
import itertools
from collections import deque
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "talos_ls"

# (importer, imported): the import that closes a known cycle -> why it is still there.
KNOWN_BACK_EDGES = {
    ("talos_ls.lsp.port", "talos_ls.server"): "issue 27: port protocol, main session",
}

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


def cycles(graph: Graph, allowed: set[tuple[str, str]] = frozenset()) -> list[list[str]]:
    """For each group of modules that import one another (in a circle, `allowed` edges left
    out), its shortest cycle through its first module, [a, b, ..., a]; [] when there is none."""
    edges = {
        m: sorted(t for t in targets if t in graph and (m, t) not in allowed)
        for m, targets in graph.items()
    }
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
    found = cycles(graph, set(KNOWN_BACK_EDGES))
    assert not found, "import cycles:\n" + "\n".join(_shown(c, graph) for c in found)


def test_known_back_edges_are_still_there():
    """A fixed cycle's entry goes with the fix."""
    graph = import_graph()
    gone = [edge for edge in KNOWN_BACK_EDGES if edge[1] not in graph.get(edge[0], {})]
    assert not gone, f"no longer imported, remove from KNOWN_BACK_EDGES: {gone}"


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
    assert cycles(graph, {("talos_ls.b", "talos_ls.a")}) == []
