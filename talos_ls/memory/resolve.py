"""Reference resolution: what "the parser" or `load_config()` in a request points at.

A `WorkspaceIndex` holds the workspace's file paths and top-level symbols: Python files through
`ast` (functions, classes, assignments at module level); other languages through a line-based
fallback that takes `def`, `class`, `function`, `fn`, `func`, `struct`, `interface`, `type` and
`const`/`let`/`var` declarations at the start of a line. Directories that hold no source of the
person's (`.git`, `node_modules`, virtualenvs, caches) are skipped.

`resolve` finds definite references in a request:
- "the X", "that X", "this X" (optionally followed by file, module, test, function, class,
  script, config): X is matched against file stems and symbol names;
- `name()`: matched against symbol names.
One match resolves the reference; two to four make an *evidence gap* with a question naming
them (the question queue asks it when the budget and the moment allow); more than four are
*indeterminate* (too vague to ask about usefully). A phrase that matches nothing in the
workspace ("the bug", "the same") is not a reference to it and is not recorded. Offsets are
character offsets into the original text.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from ..files import read_regular

GAP_MIN, GAP_MAX = 2, 4
QUESTION_MAX_CHARS = 200
SKIP_DIRS = frozenset(
    {".git", ".hg", ".svn", ".talos", "node_modules", ".venv", "venv", "env", "__pycache__",
     ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox", "dist", "build", ".idea", ".vscode"}
)  # fmt: skip
SOURCE_SUFFIXES = frozenset(
    {".py", ".js", ".jsx", ".ts", ".tsx", ".go", ".rs", ".java", ".kt", ".c", ".h", ".cc",
     ".cpp", ".hpp", ".rb", ".php", ".lua", ".swift", ".scala", ".sh"}
)  # fmt: skip
_FALLBACK_DEF = re.compile(
    r"^(?:export\s+)?(?:pub\s+)?(?:async\s+)?"
    r"(?:def|class|function|fn|func|struct|interface|type|enum|const|let|var)\s+"
    r"([A-Za-z_][A-Za-z0-9_]*)",
    re.MULTILINE,
)
_HINTS = "file|module|test|tests|function|class|script|config|package"
_DEFINITE = re.compile(
    rf"\b(?:the|that|this)\s+([A-Za-z_][\w.-]*)(?:\s+({_HINTS}))?\b", re.IGNORECASE
)
_CALL = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\(\)")
# Nouns too generic to point at one thing in a workspace, even when a file happens to match.
_GENERIC = frozenset({"code", "file", "bug", "same", "following", "way", "project", "repo"})
MAX_FILES = 20_000
MAX_SOURCE_BYTES = 1024 * 1024  # larger files are listed but not parsed for symbols


def _symbols_python(source: str) -> list[str]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    names = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names.extend(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    return names


@dataclass
class WorkspaceIndex:
    """File paths (relative, with "/") and top-level symbols -> the files defining them.
    `refresh` re-reads only files whose size or modification time changed, so a host can keep
    one index and refresh it every turn."""

    root: Path
    files: list[str] = field(default_factory=list)
    symbols: dict[str, list[str]] = field(default_factory=dict)
    _stamps: dict[str, tuple[int, int]] = field(default_factory=dict, repr=False)
    _file_symbols: dict[str, list[str]] = field(default_factory=dict, repr=False)

    @classmethod
    def build(cls, root: str | os.PathLike[str]) -> WorkspaceIndex:
        index = cls(Path(root).resolve())
        index.refresh()
        return index

    def refresh(self) -> None:
        files: list[str] = []
        stamps: dict[str, tuple[int, int]] = {}
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            for name in sorted(filenames):
                path = Path(dirpath) / name
                try:
                    st = path.lstat()
                except OSError:
                    continue
                if not stat.S_ISREG(st.st_mode):
                    continue  # symlinks, FIFOs, sockets, devices: never opened
                rel = path.relative_to(self.root).as_posix()
                files.append(rel)
                if path.suffix in SOURCE_SUFFIXES:
                    stamps[rel] = (st.st_mtime_ns, st.st_size)
                    if self._stamps.get(rel) != stamps[rel]:
                        self._file_symbols[rel] = self._read_symbols(path)
                if len(files) >= MAX_FILES:
                    break
            if len(files) >= MAX_FILES:
                break
        self._file_symbols = {rel: self._file_symbols.get(rel, []) for rel in stamps}
        self._stamps, self.files = stamps, files
        self.symbols = {}
        for rel, names in self._file_symbols.items():
            for name in names:
                self.symbols.setdefault(name, []).append(rel)

    @staticmethod
    def _read_symbols(path: Path) -> list[str]:
        try:
            raw = read_regular(path, MAX_SOURCE_BYTES, follow_symlinks=False)
        except OSError:  # gone, too large, or no longer a regular file
            return []
        source = raw.decode("utf-8", errors="replace")
        names = _symbols_python(source) if path.suffix == ".py" else _FALLBACK_DEF.findall(source)
        return list(dict.fromkeys(names))

    def match_noun(self, noun: str, hint: str | None) -> list[str]:
        """What "the <noun> [<hint>]" can mean. A class or function hint: symbols of that name
        (any case). A test hint: test files for it (test_x, x_test, x.test, x.spec). Otherwise
        files whose stem is the noun (or its plural), for a file or config hint files whose
        stem contains it; and only when no file matches, symbols of that name."""
        n = noun.lower().rstrip(".")

        def stem(rel: str) -> str:
            return Path(rel).stem.lower()

        if hint in ("class", "function"):
            return self._symbols_named(n)
        if hint in ("test", "tests"):
            names = {f"test_{n}", f"{n}_test", f"test_{n}s", f"{n}s_test", f"{n}.test", f"{n}.spec"}
            return [rel for rel in self.files if stem(rel) in names]
        found = [rel for rel in self.files if stem(rel) in (n, n + "s")]
        if not found and hint in ("file", "config"):
            found = [rel for rel in self.files if n in stem(rel)]
        return found or self._symbols_named(n)

    def _symbols_named(self, lowered: str) -> list[str]:
        return [
            f"{name} in {where}"
            for name, wheres in self.symbols.items()
            if name.lower() == lowered
            for where in wheres
        ]

    def match_symbol(self, name: str) -> list[str]:
        return [f"{name} in {w}" for w in self.symbols.get(name, [])]


@dataclass
class ResolutionRecord:
    """What `resolve` found in one request: the shape `propose_from_resolution` reads."""

    agent_id: str
    key: str
    turn: int
    references_json: str
    status: str

    @property
    def references(self) -> list[dict]:
        return json.loads(self.references_json)


_STATUS_ORDER = ("resolved", "assumed", "evidence_gap", "indeterminate")


def _question(surface: str, candidates: list[str]) -> str:
    names = ", ".join(candidates[:-1]) + " or " + candidates[-1]
    question = f"Which do you mean by {surface!r}: {names}?"
    if len(question) > QUESTION_MAX_CHARS:
        question = f"Which do you mean by {surface!r}? There are {len(candidates)} candidates."
    return question


def _reference(surface: str, start: int, end: int, candidates: list[str]) -> dict:
    if len(candidates) == 1:
        status = "resolved"
    elif GAP_MIN <= len(candidates) <= GAP_MAX:
        status = "evidence_gap"
    else:
        status = "indeterminate"
    return {
        "surface": surface,
        "start": start,
        "end": end,
        "kind": "definite_reference",
        "status": status,
        "temporal_role": "none",
        "resolved_text": candidates[0] if status == "resolved" else None,
        "resolved_epoch": None,
        "assumption": None,
        "candidates": candidates if status != "indeterminate" else candidates[: GAP_MAX + 1],
        "question": _question(surface, candidates) if status == "evidence_gap" else None,
    }


def resolve(agent_id: str, turn: int, text: str, index: WorkspaceIndex) -> ResolutionRecord:
    """The references in `text` that point into the workspace, with their status."""
    refs: list[dict] = []
    taken: list[tuple[int, int]] = []
    for match in _CALL.finditer(text):
        candidates = index.match_symbol(match.group(1))
        if candidates:
            refs.append(_reference(match.group(0), match.start(), match.end(), candidates))
            taken.append(match.span())
    for match in _DEFINITE.finditer(text):
        noun, hint = match.group(1), (match.group(2) or "").lower() or None
        if noun.lower() in _GENERIC or any(s < match.end() and match.start() < e for s, e in taken):
            continue
        candidates = index.match_noun(noun, hint)
        if candidates:
            refs.append(_reference(match.group(0), match.start(), match.end(), candidates))
    refs.sort(key=lambda r: r["start"])
    worst = max((_STATUS_ORDER.index(r["status"]) for r in refs), default=0)
    digest = hashlib.sha1(f"{agent_id}\0{turn}\0{text}".encode()).hexdigest()[:16]
    return ResolutionRecord(
        agent_id=agent_id,
        key=f"res:{turn}:{digest}",
        turn=turn,
        references_json=json.dumps(refs, ensure_ascii=False),
        status=_STATUS_ORDER[worst],
    )
