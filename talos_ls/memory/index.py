"""The workspace index: what a reference in a request can point at.

A `WorkspaceIndex` holds the workspace's file paths and top-level symbols: Python files through
`ast` (functions, classes, assignments at module level); other languages through a line-based
fallback that takes `def`, `class`, `function`, `fn`, `func`, `struct`, `interface`, `type` and
`const`/`let`/`var` declarations at the start of a line. Directories that hold no source of the
person's (`.git`, `node_modules`, virtualenvs, caches) are skipped, and so is whatever the
`.gitignore` files ignore. A language server keeps one index per workspace folder for weeks:
it is scanned once in a worker thread and then kept current from file-change events
(`talos_ls.watch`), re-reading only the paths that changed, while lookups go on.

Reference resolution (`resolve`) matches a request's references against it.
"""

from __future__ import annotations

import ast
import bisect
import logging
import os
import re
import stat
import sys
import threading
from collections.abc import Iterable
from pathlib import Path

import pathspec

from ..files import read_regular

logger = logging.getLogger(__name__)

# fmt: off
SKIP_DIRS = frozenset(
    {".git", ".hg", ".svn", ".talos", "node_modules", ".venv", "venv", "env", "__pycache__",
     ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox", "dist", "build", ".idea", ".vscode"}
)
SOURCE_SUFFIXES = frozenset(
    {".py", ".js", ".jsx", ".ts", ".tsx", ".go", ".rs", ".java", ".kt", ".c", ".h", ".cc",
     ".cpp", ".hpp", ".rb", ".php", ".lua", ".swift", ".scala", ".sh"}
)
# fmt: on

_FALLBACK_DEF = re.compile(
    r"^(?:export\s+)?(?:pub\s+)?(?:async\s+)?"
    r"(?:def|class|function|fn|func|struct|interface|type|enum|const|let|var)\s+"
    r"([A-Za-z_][A-Za-z0-9_]*)",
    re.MULTILINE,
)
MAX_FILES = 250_000  # a 100,000-file workspace is indexed whole; beyond, the walk stops
MAX_SOURCE_BYTES = 1024 * 1024  # larger files are listed but not parsed for symbols
_BIG_BATCH = 256  # past this many paths added or removed at once, the sorted list is rebuilt

# A source file's (mtime_ns, size) when parsed and its top-level names; None for other files.
_Source = tuple[int, int, tuple[str, ...]]
# The .gitignore files that apply in a directory, (directory, spec), the deepest first.
_Chain = tuple[tuple[str, pathspec.GitIgnoreSpec], ...]


def _symbols_python(source: str) -> list[str]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []  # MemoryError: the parser's answer to some pathological nesting
    names = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names.extend(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    return names


def _parse_symbols(path: str) -> tuple[str, ...]:
    """The top-level names a source file defines: the expensive step, done once per version."""
    try:
        raw = read_regular(path, MAX_SOURCE_BYTES, follow_symlinks=False)
    except OSError:  # gone, too large, or no longer a regular file
        return ()
    source = raw.decode("utf-8", errors="replace")
    names = _symbols_python(source) if path.endswith(".py") else _FALLBACK_DEF.findall(source)
    return tuple(dict.fromkeys(map(sys.intern, names)))  # interned: one copy of "main"


def split_name(name: str) -> tuple[str, str]:
    """(stem, suffix) as `PurePath` has them, without building a path for each file."""
    i = name.rfind(".")
    return (name[:i], name[i:]) if 0 < i < len(name) - 1 else (name, "")


def _stem(rel: str) -> str:
    return split_name(rel.rpartition("/")[2])[0].lower()


def _lower(name: str) -> str:
    """Interned, so that a name already in lower case (most) is stored once."""
    return sys.intern(name.lower())


def _ignored(chain: _Chain, rel: str, is_dir: bool) -> bool:
    """Git's answer: the deepest .gitignore with a pattern for the path decides."""
    for base, spec in chain:
        sub = rel[len(base) + 1 :] if base else rel
        include = spec.check_file(sub + "/" if is_dir else sub).include
        if include is not None:
            return include
    return False


class WorkspaceIndex:
    """File paths (relative, with "/") and top-level symbols -> the files defining them.

    One index serves a workspace folder for the life of a language server: `scan` walks the
    tree (in a worker thread: parsing takes seconds on a large workspace) and sets `ready`;
    `apply` takes the file watcher's changes and re-reads only the paths it names. Both reuse a
    file's symbols while its (mtime_ns, size) is unchanged. Lookups stay valid meanwhile:
    they read under a lock that writers hold only to publish a finished batch, never during
    the disk work, so a lookup sees a whole batch or none of it, and before the first scan
    finishes it sees whatever is there (possibly nothing) rather than waiting. Files the root
    or a nested `.gitignore` ignores, and the SKIP_DIRS, are left out; only regular files are
    opened, never through a symlink."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()
        self.ready = threading.Event()  # set when the first scan is published
        self._root = str(self.root)
        self._prefix = os.path.join(self._root, "")
        self._lock = threading.Lock()  # lookups, and the publication of a change
        self._writing = threading.Lock()  # one writer at a time: scan, apply
        # Published state, read under _lock; every list is sorted.
        self._files: dict[str, _Source | None] = {}
        self._paths: list[str] = []
        self._stems: dict[str, list[str]] = {}  # lowered stem -> files
        self._symbols: dict[str, list[tuple[str, str]]] = {}  # lowered name -> (file, name)
        self._stem_text: str | None = None  # "\n"-joined stems, for substring lookups
        # The writer's own state.
        self._dirs: set[str] = set()  # directories walked ("" is the root)
        self._ignores: dict[str, pathspec.GitIgnoreSpec] = {}  # directory -> its .gitignore

    @classmethod
    def build(cls, root: str | os.PathLike[str]) -> WorkspaceIndex:
        """An index of `root`, scanned before it is returned."""
        index = cls(root)
        index.scan()
        return index

    # ------------------------------------------------------------------ lookups
    def __len__(self) -> int:
        """How many files are indexed (without copying the list)."""
        with self._lock:
            return len(self._paths)

    @property
    def files(self) -> list[str]:
        """Every indexed file, sorted (a copy)."""
        with self._lock:
            return list(self._paths)

    @property
    def symbols(self) -> dict[str, list[str]]:
        """Each symbol name -> the files defining it, sorted (a copy, for inspection)."""
        found: dict[str, list[str]] = {}
        with self._lock:
            for defined in self._symbols.values():
                for where, name in defined:
                    found.setdefault(name, []).append(where)
        return found

    def match_noun(self, noun: str, hint: str | None) -> list[str]:
        """What "the <noun> [<hint>]" can mean. A class or function hint: symbols of that name
        (any case). A test hint: test files for it (test_x, x_test, x.test, x.spec). Otherwise
        files whose stem is the noun (or its plural), for a file or config hint files whose
        stem contains it; and only when no file matches, symbols of that name."""
        n = noun.lower().rstrip(".")
        with self._lock:
            if hint in ("class", "function"):
                return self._symbols_named(n)
            if hint in ("test", "tests"):
                names = (
                    f"test_{n}",
                    f"{n}_test",
                    f"test_{n}s",
                    f"{n}s_test",
                    f"{n}.test",
                    f"{n}.spec",
                )
                return self._files_with_stems(names)
            found = self._files_with_stems((n, n + "s"))
            if not found and hint in ("file", "config"):
                found = self._files_with_stems(self._stems_containing(n))
            return found or self._symbols_named(n)

    def has_file(self, rel: str) -> bool:
        """`rel` is an indexed file."""
        with self._lock:
            return rel in self._files

    def match_symbol(self, name: str) -> list[str]:
        with self._lock:
            defined = self._symbols.get(name.lower(), ())
            return [f"{name} in {where}" for where, exact in defined if exact == name]

    def _files_with_stems(self, stems: Iterable[str]) -> list[str]:
        found = [self._stems[stem] for stem in dict.fromkeys(stems) if stem in self._stems]
        if len(found) == 1:
            return list(found[0])  # already sorted
        return sorted(rel for rels in found for rel in rels)  # a file has one stem: no repeats

    def _stems_containing(self, part: str) -> list[str]:
        """The stems with `part` in them: a search through one string, in C, not a Python loop
        over the files."""
        if self._stem_text is None:
            self._stem_text = "\n" + "\n".join(self._stems) + "\n"
        text, found = self._stem_text, []
        i = text.find(part)
        while i != -1:
            start, end = text.rfind("\n", 0, i) + 1, text.find("\n", i)
            found.append(text[start:end])
            i = text.find(part, end)
        return found

    def _symbols_named(self, lowered: str) -> list[str]:
        return [f"{name} in {where}" for where, name in self._symbols.get(lowered, ())]

    # ------------------------------------------------------------------ writers
    def scan(self) -> None:
        """Walk the whole tree and publish it at once; sets `ready`. Symbols are re-parsed only
        for files whose (mtime_ns, size) changed since the last look."""
        with self._writing:
            self._scan()

    def refresh(self) -> None:
        """The same full walk as `scan`, for a caller that polls instead of watching."""
        self.scan()

    def apply(self, changes: Iterable[tuple[str, str]]) -> None:
        """Bring the index up to date with a batch of changes, `(kind, absolute path)` with kind
        "added", "modified" or "deleted" (a file watcher's names). Each path named is looked at
        again, whatever the kind says; an added directory is walked, a deleted one drops what
        was under it, a changed `.gitignore` re-filters the tree it governs (all of it for the
        root's). Paths outside the root are ignored. The batch is published at once. Before
        the first scan there is nothing to update: the scan, when it runs, sees the change."""
        kinds: dict[str, set[str]] = {}
        for kind, path in changes:
            rel = self._relative(path)
            if rel is not None:
                kinds.setdefault(rel, set()).add(kind)
        if not kinds:
            return
        with self._writing:
            if not self.ready.is_set():
                return
            if ".gitignore" in kinds or kinds.pop("", {"modified"}) != {"modified"}:
                self._scan()  # the root's ignore file, or the root itself, changed
            elif kinds:
                self._apply(kinds)

    def _scan(self) -> None:
        ignores: dict[str, pathspec.GitIgnoreSpec] = {}
        files, dirs = self._walk("", (), ignores, MAX_FILES)
        if len(files) >= MAX_FILES:
            logger.warning("the workspace index stopped at %d files", MAX_FILES)
        paths = sorted(files)
        stems: dict[str, list[str]] = {}
        symbols: dict[str, list[tuple[str, str]]] = {}
        for rel in paths:
            stems.setdefault(_stem(rel), []).append(rel)
            source = files[rel]
            for name in source[2] if source else ():
                symbols.setdefault(_lower(name), []).append((rel, name))
        for defined in symbols.values():
            if len(defined) > 1:
                defined.sort()  # one file may define both `Parser` and `parser`
        with self._lock:
            self._files, self._paths, self._stems = files, paths, stems
            self._symbols, self._stem_text = symbols, None
        self._dirs, self._ignores = set(dirs), ignores
        self.ready.set()

    def _walk(
        self, top: str, chain: _Chain, ignores: dict[str, pathspec.GitIgnoreSpec], budget: int
    ) -> tuple[dict[str, _Source | None], list[str]]:
        """The regular files under directory `top` ("" for the root) and the directories
        walked, depth first in name order, at most `budget` files; `chain` is what applies in
        `top`'s parent. Records each `.gitignore` met in `ignores`. Symbolic links are never
        followed; a file keeps its symbols from the published index while it is unchanged."""
        files: dict[str, _Source | None] = {}
        dirs: list[str] = []
        stack = [(top, chain)]
        while stack and len(files) < budget:
            here, chain = stack.pop()
            try:
                with os.scandir(self._abs(here)) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError:
                continue
            dirs.append(here)
            if any(e.name == ".gitignore" for e in entries):
                spec = self._read_ignore(here)
                if spec is not None:
                    ignores[here] = spec
                    chain = ((here, spec), *chain)
            subdirs = []
            for entry in entries:
                rel = f"{here}/{entry.name}" if here else entry.name
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name not in SKIP_DIRS and not _ignored(chain, rel, True):
                            subdirs.append((rel, chain))
                    elif entry.is_file(follow_symlinks=False) and not _ignored(chain, rel, False):
                        files[rel] = self._source(rel, entry.stat(follow_symlinks=False))
                except OSError:
                    continue
                if len(files) >= budget:
                    break
            stack.extend(reversed(subdirs))
        return files, dirs

    def _source(self, rel: str, st: os.stat_result) -> _Source | None:
        if split_name(rel.rpartition("/")[2])[1] not in SOURCE_SUFFIXES:
            return None
        known = self._files.get(rel)
        if known is not None and known[:2] == (st.st_mtime_ns, st.st_size):
            return known
        return st.st_mtime_ns, st.st_size, _parse_symbols(self._abs(rel))

    def _apply(self, kinds: dict[str, set[str]]) -> None:
        # A path in a directory never walked (its own event missed, or not yet delivered)
        # stands for the highest such directory, which is walked whole.
        targets: dict[str, set[str]] = {}
        for rel, kind in kinds.items():
            top = rel
            while top and top.rpartition("/")[0] not in self._dirs:
                top = top.rpartition("/")[0]
            targets.setdefault(top, set()).update(kind if top == rel else {"added"})
        if "" in targets:
            self._scan()
            return
        walks: dict[str, _Chain] = {}  # directories walked again -> what applies in the parent
        gone: list[str] = []  # directories no longer indexed
        candidates: list[tuple[str, os.stat_result]] = []  # regular files to index
        drop: set[str] = set()
        chains: dict[str, _Chain | None] = {}
        for rel, kind in sorted(targets.items()):
            parent, _, name = rel.rpartition("/")
            if parent not in chains:
                chains[parent] = self._chain(parent)
            chain = chains[parent]
            if chain is None:  # the directory is gone, ignored, or behind a symlink
                drop.add(rel)
                if rel in self._dirs:
                    gone.append(rel)
                continue
            if name == ".gitignore":  # a nested one: the walk re-reads it and re-filters
                outer = chain[1:] if chain and chain[0][0] == parent else chain
                walks[parent] = outer
                continue
            try:
                st: os.stat_result | None = os.lstat(self._abs(rel))
            except OSError:
                st = None
            mode = st.st_mode if st is not None else 0
            if stat.S_ISDIR(mode) and name not in SKIP_DIRS and not _ignored(chain, rel, True):
                if kind != {"modified"} or rel not in self._dirs:
                    walks[rel] = chain
            elif rel in self._dirs:
                gone.append(rel)
            if st is not None and stat.S_ISREG(mode) and not _ignored(chain, rel, False):
                candidates.append((rel, st))
            else:
                drop.add(rel)
        walked = {d for d in walks if not any(a in walks for a in _ancestors(d))}
        emptied = walked.union(gone)
        if emptied:  # one pass over what is known, however many directories
            prefixes = tuple(d + "/" for d in emptied)
            drop.update(rel for rel in self._files if rel.startswith(prefixes))
            self._dirs = {d for d in self._dirs if d not in emptied and not d.startswith(prefixes)}
            for d in [d for d in self._ignores if d in emptied or d.startswith(prefixes)]:
                del self._ignores[d]
        put: dict[str, _Source | None] = {}
        budget = MAX_FILES - len(self._files) + len(drop)
        for d in sorted(walked):
            files, dirs = self._walk(d, walks[d], self._ignores, max(budget - len(put), 0))
            put.update(files)
            self._dirs.update(dirs)
        for rel, st in candidates:
            if not any(a in walked for a in _ancestors(rel)):
                put[rel] = self._source(rel, st)
        self._publish(put, drop)

    def _publish(self, put: dict[str, _Source | None], drop: set[str]) -> None:
        """Make a batch visible to lookups at once."""
        removed = sorted(rel for rel in drop if rel in self._files and rel not in put)
        new = sorted(rel for rel in put if rel not in self._files)
        room = MAX_FILES - len(self._files) + len(removed)
        if len(new) > room:
            logger.warning(
                "the workspace index is full (%d files): %d left out", MAX_FILES, len(new) - room
            )
            for rel in new[room:]:
                del put[rel]
            new = new[:room]
        paths = None
        if len(removed) + len(new) > _BIG_BATCH:  # one sort instead of many list shifts
            gone = set(removed)
            paths = sorted([rel for rel in self._paths if rel not in gone] + new)
        with self._lock:
            for rel in removed:
                self._unlink(rel)
            for rel, source in put.items():
                self._link(rel, source)
            if paths is not None:
                self._paths = paths
            else:
                for rel in removed:
                    del self._paths[bisect.bisect_left(self._paths, rel)]
                for rel in new:
                    bisect.insort(self._paths, rel)

    def _link(self, rel: str, source: _Source | None) -> None:
        if rel in self._files:
            old = self._files[rel]
            before = set(old[2]) if old else set()
        else:
            before = set()
            stem = _stem(rel)
            if stem in self._stems:
                bisect.insort(self._stems[stem], rel)
            else:
                self._stems[stem] = [rel]
                self._stem_text = None
        self._files[rel] = source
        after = set(source[2]) if source else set()
        for name in before - after:
            self._unlink_symbol(name, rel)
        for name in after - before:
            bisect.insort(self._symbols.setdefault(_lower(name), []), (rel, name))

    def _unlink(self, rel: str) -> None:
        source = self._files.pop(rel)
        stem = _stem(rel)
        self._stems[stem].remove(rel)
        if not self._stems[stem]:
            del self._stems[stem]
            self._stem_text = None
        for name in source[2] if source else ():
            self._unlink_symbol(name, rel)

    def _unlink_symbol(self, name: str, rel: str) -> None:
        lowered = _lower(name)
        defined = self._symbols[lowered]
        defined.remove((rel, name))
        if not defined:
            del self._symbols[lowered]

    def _chain(self, d: str) -> _Chain | None:
        """The `.gitignore` specs that apply inside directory `d`; None if the walk would not
        enter it (gone, skipped, ignored, or reached through a symbolic link)."""
        full = self._abs(d)
        if os.path.realpath(full) != full or not os.path.isdir(full):
            return None
        root_spec = self._ignores.get("")
        chain: _Chain = (("", root_spec),) if root_spec is not None else ()
        if d:
            parts = d.split("/")
            for i, part in enumerate(parts):
                sub = "/".join(parts[: i + 1])
                if part in SKIP_DIRS or _ignored(chain, sub, True):
                    return None
                spec = self._ignores.get(sub)
                if spec is not None:
                    chain = ((sub, spec), *chain)
        return chain

    def _read_ignore(self, d: str) -> pathspec.GitIgnoreSpec | None:
        path = os.path.join(self._abs(d), ".gitignore")
        try:
            text = read_regular(path, MAX_SOURCE_BYTES, follow_symlinks=False)
        except OSError:  # gone, too large, a symlink or not a regular file: no rules
            return None
        return pathspec.GitIgnoreSpec.from_lines(text.decode("utf-8", "replace").splitlines())

    def _abs(self, rel: str) -> str:
        return self._prefix + rel if rel else self._root

    def _relative(self, path: str) -> str | None:
        """`path` relative to the root ("" for the root itself); None if outside it."""
        path = os.path.normpath(path)
        if path == self._root:
            return ""
        return path[len(self._prefix) :] if path.startswith(self._prefix) else None


def _ancestors(rel: str) -> Iterable[str]:
    """ "a/b/c" -> "a/b", "a" (the root, "", left out)."""
    while "/" in rel:
        rel = rel.rpartition("/")[0]
        yield rel
