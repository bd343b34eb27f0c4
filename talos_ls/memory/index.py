"""The workspace index: what a reference in a request can point at.

A `WorkspaceIndex` holds the workspace's file paths and top-level symbols: in Python files
functions, classes and assignments at module level; in other languages `def`, `class`,
`function`, `fn`, `func`, `struct`, `interface`, `type` and `const`/`let`/`var` declarations at
the start of a line; both read with regular expressions, not parsed (see `_symbols_python`).
Directories that hold no source of the person's (`.git`, `node_modules`, virtualenvs, caches)
are skipped, and so is whatever the `.gitignore` files ignore.

The first scan costs what the file system walk costs: the listing opens no file but the
`.gitignore`s and stats none, and is published (`ready`) as soon as it is done. The symbols are
read after it, a directory at a time, and published a batch at a time; lookups answer from what
is read so far, and `complete` says when all of it is. A language server keeps one index per
workspace folder for weeks, kept current from file-change events (`talos_ls.watch`), re-reading
only the paths that changed, while lookups go on. What it holds per file is its path, its
stem, and for a source file its (mtime_ns, size) and names as text: a few hundred bytes.

Reference resolution (`resolve`) matches a request's references against it.
"""

from __future__ import annotations

import bisect
import keyword
import logging
import operator
import os
import re
import stat
import threading
from array import array
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
# Python: comments and string literals (a triple-quoted one spans lines), removed before the
# definitions are looked for, so that no line inside a docstring is taken for code.
_PY_NOISE = re.compile(
    r"#[^\n]*|\"\"\"[\s\S]*?\"\"\"|'''[\s\S]*?'''|\"(?:[^\"\\\n]|\\[\s\S])*\"|'(?:[^'\\\n]|\\[\s\S])*'"
)
# Python: at the start of a line, `def`/`class` (async or not), `a = b = ...` (each name
# followed by one `=`), `x: T` (an annotated name).
_PY_DEF = re.compile(
    r"^(?:async[ \t]+)?(?:def|class)[ \t]+([^\W\d]\w*)"
    r"|^((?:[^\W\d]\w*[ \t]*=(?!=)[ \t]*)+)"
    r"|^([^\W\d]\w*)[ \t]*:",
    re.MULTILINE,
)
_WORD = re.compile(r"\w+")
_KEYWORDS = frozenset(keyword.kwlist)  # `else:`, `try:`; a soft one (`type: str`) is a name
MAX_FILES = 250_000  # a 100,000-file workspace is indexed whole; beyond, the walk stops
MAX_SOURCE_BYTES = 1024 * 1024  # larger files are listed but not read for symbols
# A one-shot run waits for the first scan while it is this small (`settle`).
SETTLE_LISTED, SETTLE_READ = 10_000, 250
_BIG_BATCH = 256  # past this many paths added or removed at once, the sorted list is rebuilt
_READ_BATCH = 256  # source files read between two publications of the symbols
_NOTIFY_EVERY = 256  # files listed or read between two wake-ups of `settle`

# The .gitignore files that apply in a directory, (directory, rules), the deepest first.
_Chain = tuple[tuple[str, "_Ignore"], ...]
_by_name = operator.attrgetter("name")
# The files of one stem: most stems have one, held as the path itself (no list each).
_Files = str | list[str]
# A walk of the whole tree: sorted paths, stems, each directory's source files, the
# directories walked, the .gitignore rules met.
_Listing = tuple[
    list[str], dict[str, _Files], dict[str, list[str]], list[str], dict[str, "_Ignore"]
]


def _symbols_python(source: str) -> list[str]:
    """The names a module defines at its top level (what `ast` has as the targets of its
    body's function and class definitions and of its plain and annotated assignments to a
    name), read with regular expressions: some 10x cheaper than `ast.parse`, and a file that
    does not parse (being typed) keeps its names. A statement after `;` or a target on a
    continuation line is missed; a column-0 line inside brackets may add a name."""
    names: list[str] = []
    for defined, chain, annotated in _PY_DEF.findall(_PY_NOISE.sub("", source)):
        if defined:
            names.append(defined)
        elif chain:
            names.extend(_WORD.findall(chain))
        elif annotated not in _KEYWORDS:
            names.append(annotated)
    return names


def _parse_symbols(path: str) -> tuple[str, ...]:
    """The top-level names a source file defines: read once per version of the file."""
    try:
        raw = read_regular(path, MAX_SOURCE_BYTES, follow_symlinks=False)
    except OSError:  # gone, too large, or no longer a regular file
        return ()
    source = raw.decode("utf-8", errors="replace")
    names = _symbols_python(source) if path.endswith(".py") else _FALLBACK_DEF.findall(source)
    return tuple(dict.fromkeys(names))


def _entries(names: Iterable[str]) -> str:
    """A file's names as a `_Chunk` holds them: "lowered\\0exact\\n" each, the exact name left
    out when it is the lowered one."""
    out = []
    for name in names:
        low = name.lower()
        out.append(f"{low}\0{'' if low == name else name}\n")
    return "".join(out)


def split_name(name: str) -> tuple[str, str]:
    """(stem, suffix) as `PurePath` has them, without building a path for each file."""
    i = name.rfind(".")
    return (name[:i], name[i:]) if 0 < i < len(name) - 1 else (name, "")


def _stem(rel: str) -> str:
    return split_name(rel.rpartition("/")[2])[0].lower()


def _is_source(rel: str) -> bool:
    return split_name(rel.rpartition("/")[2])[1] in SOURCE_SUFFIXES


def _stamp(path: str) -> tuple[int, int] | None:
    """(mtime_ns, size) of a regular file; None for anything else (never followed)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size) if stat.S_ISREG(st.st_mode) else None


class _Ignore:
    """One `.gitignore`. pathspec answers as git does, but each answer costs microseconds in
    Python; so it is asked only when one of the file's patterns matches, which one regular
    expression made of them all says first (most paths match none)."""

    __slots__ = ("lines", "quick", "spec")

    def __init__(self, spec: pathspec.GitIgnoreSpec) -> None:
        self.spec = spec
        regexes = [getattr(p, "regex", None) for p in spec.patterns if p.include is not None]
        texts = [r.pattern for r in regexes if isinstance(r, re.Pattern)]
        self.quick: re.Pattern[str] | None = None
        if len(texts) == len(regexes) and all(isinstance(t, str) for t in texts):
            try:  # pathspec's group names repeat from pattern to pattern: made plain groups
                joined = "|".join(re.sub(r"\(\?P<\w+>", "(?:", t) for t in texts)
                self.quick = re.compile(joined or "(?!)")
            except re.error:
                self.quick = None  # pathspec alone, then
        # The same over a directory's paths at once, one a line: a pattern anchored with ^
        # and $ matches one of them only if it matches their lines (`[^/]` may cross a line:
        # then each path is checked on its own, which gives the answer).
        self.lines: re.Pattern[str] | None = None
        if self.quick is not None and "\\A" not in joined and "\\Z" not in joined:
            self.lines = re.compile(self.quick.pattern, re.MULTILINE)

    def check(self, path: str) -> bool | None:
        """True: ignored; False: included again by a `!` pattern; None: no pattern says."""
        if self.quick is not None and self.quick.search(path) is None:
            return None
        return self.spec.check_file(path).include


def _kept(chain: _Chain, here: str, names: list[str], is_dir: bool) -> list[str]:
    """The `names` in directory `here` that the chain does not ignore: most often one search
    per .gitignore for the whole directory, which says that none of its patterns applies."""
    tail = "/" if is_dir else ""
    for base, rules in chain:
        if rules.lines is None:
            break
        lead = here[len(base) + 1 :] if base else here
        lead = lead + "/" if lead else ""
        if rules.lines.search(lead + f"{tail}\n{lead}".join(names) + tail) is not None:
            break
    else:
        return names
    prefix = here + "/" if here else ""
    return [name for name in names if not _ignored(chain, prefix + name, is_dir)]


def _ignored(chain: _Chain, rel: str, is_dir: bool) -> bool:
    """Git's answer: the deepest .gitignore with a pattern for the path decides."""
    for base, rules in chain:
        sub = rel[len(base) + 1 :] if base else rel
        include = rules.check(sub + "/" if is_dir else sub)
        if include is not None:
            return include
    return False


class _Chunk:
    """The source files of one directory and the names each defines, in one string: "\\n"
    then each file's `_entries` in turn, file i's from `starts[i]`; `stamps` holds each file's
    (mtime_ns, size) when read, and is None while the directory waits to be read. A lookup is
    a search through the string (in C), not a walk over Python objects."""

    __slots__ = ("files", "stamps", "starts", "text")

    def __init__(
        self,
        files: tuple[str, ...],
        text: str = "\n",
        starts: array | None = None,
        stamps: array | None = None,
    ) -> None:
        self.files, self.text, self.starts, self.stamps = files, text, starts, stamps

    def entries(self, i: int) -> str:
        assert self.starts is not None
        end = self.starts[i + 1] if i + 1 < len(self.starts) else len(self.text)
        return self.text[self.starts[i] : end]

    def stamp(self, i: int) -> tuple[int, int]:
        assert self.stamps is not None
        return self.stamps[2 * i], self.stamps[2 * i + 1]

    def hits(self, needle: str, found: list[tuple[str, str]]) -> None:
        """Append (file, exact name) for each entry that begins with `needle` ("\\nlow\\0")."""
        text, starts = self.text, self.starts
        i = text.find(needle)
        while i != -1:
            sep = text.index("\0", i + 1)
            end = text.index("\n", sep)
            k = bisect.bisect_right(starts, i + 1) - 1  # type: ignore[arg-type]
            found.append((self.files[k], text[sep + 1 : end] or text[i + 1 : sep]))
            i = text.find(needle, end)


class WorkspaceIndex:
    """File paths (relative, with "/") and top-level symbols -> the files defining them.

    One index serves a workspace folder for the life of a language server. `scan` walks the
    tree (in a worker thread), publishes the listing and sets `ready`, then reads the source
    files' symbols a directory at a time, publishing a batch at a time, and sets `complete`;
    `apply` takes the file watcher's changes (meanwhile too) and re-reads only the paths it
    names. A file's symbols are read again only when its (mtime_ns, size) changed. Lookups
    stay valid throughout: they read under a lock that writers hold only to publish a
    finished batch, never during the disk work, so a lookup sees a whole batch or none of it,
    and before the listing is published it sees nothing rather than waiting. Files the root or
    a nested `.gitignore` ignores, and the SKIP_DIRS, are left out; only regular files are
    opened, never through a symlink."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()
        self.ready = threading.Event()  # set when the first listing is published
        self.complete = threading.Event()  # and when every symbol of it is read
        self._root = str(self.root)
        self._prefix = os.path.join(self._root, "")
        self._lock = threading.Lock()  # lookups, and the publication of a change
        self._writing = threading.Lock()  # one writer at a time: the listing, apply, a merge
        self._stop = threading.Event()
        self._progress = threading.Condition()  # `settle` waits on it
        self._listed = self._read = 0  # files listed and read so far, for `settle`
        self._scanned = False  # a scan has ended (with `ready` or not)
        # Published state, read under _lock; every list is sorted.
        self._paths: list[str] = []
        self._stems: dict[str, _Files] = {}  # lowered stem -> files
        self._chunks: dict[str, _Chunk] = {}  # directory -> its source files and their names
        self._stem_text: str | None = None  # "\n"-joined stems, for substring lookups
        self._walked: tuple[str, ...] = ()  # the directories walked, as last published
        # Lowered directory name -> the directories of that name, and their "\n"-joined
        # names: built from `_walked` on the first lookup after the listing changed.
        self._dir_names: dict[str, list[str]] | None = None
        self._dir_text = ""
        # The writer's own state.
        self._dirs: set[str] = set()  # directories walked ("" is the root)
        self._ignores: dict[str, _Ignore] = {}  # directory -> its .gitignore

    @classmethod
    def build(cls, root: str | os.PathLike[str]) -> WorkspaceIndex:
        """An index of `root`, scanned (symbols too) before it is returned."""
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
            for chunk in self._chunks.values():
                for i, rel in enumerate(chunk.files if chunk.stamps is not None else ()):
                    for entry in chunk.entries(i).splitlines():
                        low, _, exact = entry.partition("\0")
                        found.setdefault(exact or low, []).append(rel)
        return {name: sorted(where) for name, where in found.items()}

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
            return self._has(rel)

    def same_name(self, rel: str) -> list[str]:
        """The other indexed files whose stem is `rel`'s (src/parser.py: tools/parser.py)."""
        with self._lock:
            rels = self._stems.get(_stem(rel))
        return [r for r in ([rels] if isinstance(rels, str) else rels or ()) if r != rel]

    def match_symbol(self, name: str) -> list[str]:
        low = name.lower()
        with self._lock:
            hits = self._hits(f"\n{low}\0{'' if low == name else name}\n")
        return [f"{name} in {where}" for where, _ in hits]

    def match_names(self, names: Iterable[str]) -> dict[str, list[str]]:
        """For each lowered name: the files whose stem it is, then the directories of that
        name (as "dir/"), each part sorted; names that match nothing are left out. Dictionary
        lookups under one hold of the lock, however large the workspace."""
        found: dict[str, list[str]] = {}
        with self._lock:
            dirs = self._dirs_by_name()
            for name in dict.fromkeys(names):
                rels = self._stems.get(name)
                where = [rels] if isinstance(rels, str) else list(rels or ())
                where.extend(d + "/" for d in dirs.get(name, ()))
                if where:
                    found[name] = where
        return found

    def names_matching(self, pattern: re.Pattern[str]) -> list[str]:
        """The lowered file stems and directory names that `pattern` finds in their
        "\n"-joined text, each once, in the order found (stems first): one search in C over
        the names, not a loop over the files. The pattern says where a name begins and ends
        (e.g. `\nname(?=\n)`); group 1, when it has one, is the name found."""
        with self._lock:
            if self._stem_text is None:
                self._stem_text = "\n" + "\n".join(self._stems) + "\n"
            self._dirs_by_name()
            texts = (self._stem_text, self._dir_text)
        found: dict[str, None] = {}
        for text in texts:
            for match in pattern.finditer(text):
                found[(match.group(1) if pattern.groups else match.group()).strip("\n")] = None
        return list(found)

    def _dirs_by_name(self) -> dict[str, list[str]]:
        """`_dir_names`, built again from the directories walked if the listing changed."""
        if self._dir_names is None:
            names: dict[str, list[str]] = {}
            for d in sorted(self._walked):
                if d:  # not the root
                    names.setdefault(d.rpartition("/")[2].lower(), []).append(d)
            self._dir_names = names
            self._dir_text = "\n" + "\n".join(names) + "\n"
        return self._dir_names

    def _has(self, rel: str) -> bool:
        i = bisect.bisect_left(self._paths, rel)
        return i < len(self._paths) and self._paths[i] == rel

    def _files_with_stems(self, stems: Iterable[str]) -> list[str]:
        found = []
        for stem in dict.fromkeys(stems):
            rels = self._stems.get(stem)
            if rels is not None:
                found.append([rels] if isinstance(rels, str) else rels)
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

    def _hits(self, needle: str) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = []
        if "\n" not in needle[1:-1] and needle.count("\0") == 1:  # else no name: no entry
            for chunk in self._chunks.values():
                chunk.hits(needle, found)
        found.sort()  # one file may define both `Parser` and `parser`
        return found

    def _symbols_named(self, lowered: str) -> list[str]:
        return [f"{name} in {where}" for where, name in self._hits(f"\n{lowered}\0")]

    # ------------------------------------------------------------------ waiting
    def settle(self, timeout: float = 60.0) -> bool:
        """Wait while the first scan is small: until it is complete, or until it has listed
        SETTLE_LISTED files or read SETTLE_READ (a large workspace: the caller goes on with
        what is ready), or `close`. True when complete. A run on a small workspace thus always
        resolves against all of it, one on a large workspace waits some milliseconds."""
        with self._progress:
            self._progress.wait_for(
                lambda: (
                    self.complete.is_set()
                    or self._stop.is_set()
                    or self._listed >= SETTLE_LISTED
                    or self._read >= SETTLE_READ
                ),
                timeout,
            )
        return self.complete.is_set()

    def wait_ready(self) -> bool:
        """Wait until the first listing is published (True), or a scan ended without one, or
        `close` (False)."""
        with self._progress:
            self._progress.wait_for(
                lambda: self.ready.is_set() or self._scanned or self._stop.is_set()
            )
        return self.ready.is_set()

    def close(self) -> None:
        """Stop a scan under way at its next directory (the process may be ending)."""
        self._stop.set()
        self._wake()

    def _wake(self) -> None:
        with self._progress:
            self._progress.notify_all()

    # ------------------------------------------------------------------ writers
    def scan(self) -> None:
        """Walk the whole tree and read every source file's symbols; returns when all is
        published. The first scan publishes the listing (with a first batch of symbols) and
        sets `ready` as soon as the walk is done, then the rest of the symbols a batch at a
        time, `apply` free to run in between; a later one (`refresh`) publishes all at once.
        Symbols are read again only for files whose (mtime_ns, size) changed."""
        try:
            self._first_scan()
        finally:
            self._scanned = True
            self._wake()

    def _first_scan(self) -> None:
        with self._writing:
            if self.ready.is_set():
                self._scan()
                return
            listed = self._list()
            if listed is None:
                return
            paths, stems, sources, dirs, ignores = listed
            chunks = {d: _Chunk(tuple(files)) for d, files in sources.items()}
            order = list(chunks)
            first, count = 0, 0
            while first < len(order) and count < _READ_BATCH:
                files = chunks[order[first]].files
                chunks[order[first]] = self._read_dir(files, None)
                first, count = first + 1, count + len(files)
            with self._lock:
                self._paths, self._stems, self._chunks = paths, stems, chunks
                self._stem_text = self._dir_names = None
                self._walked = tuple(dirs)
            self._dirs, self._ignores = set(dirs), ignores
            self.ready.set()
            self._wake()
        self._read_pending(order[first:])
        if not self._stop.is_set():
            self.complete.set()

    def refresh(self) -> None:
        """The same full walk as `scan`, for a caller that polls instead of watching."""
        self.scan()

    def apply(self, changes: Iterable[tuple[str, str]]) -> None:
        """Bring the index up to date with a batch of changes, `(kind, absolute path)` with kind
        "added", "modified" or "deleted" (a file watcher's names). Each path named is looked at
        again, whatever the kind says; an added directory is walked, a deleted one drops what
        was under it, a changed `.gitignore` re-filters the tree it governs (all of it for the
        root's). Paths outside the root are ignored. The batch is published at once. Before
        the first listing there is nothing to update: the scan, when it runs, sees the
        change; after `close`, nothing is."""
        kinds: dict[str, set[str]] = {}
        for kind, path in changes:
            rel = self._relative(path)
            if rel is not None:
                kinds.setdefault(rel, set()).add(kind)
        if not kinds:
            return
        with self._writing:
            if not self.ready.is_set() or self._stop.is_set():
                return  # nothing listed yet, or closed (a walk would stop half-way)
            if ".gitignore" in kinds or kinds.pop("", {"modified"}) != {"modified"}:
                self._scan()  # the root's ignore file, or the root itself, changed
            elif kinds:
                self._apply(kinds)

    def _list(self) -> _Listing | None:
        """The walk of the whole tree: (sorted paths, stems, the source files of each
        directory, the directories walked, the .gitignore rules met); None if closed."""
        ignores: dict[str, _Ignore] = {}
        stems: dict[str, _Files] = {}
        sources: dict[str, list[str]] = {}
        files, dirs = self._walk("", (), ignores, MAX_FILES, stems, sources)
        if self._stop.is_set():
            return None
        if len(files) >= MAX_FILES:
            logger.warning("the workspace index stopped at %d files", MAX_FILES)
        for same in stems.values():
            if not isinstance(same, str):
                same.sort()
        files.sort()
        return files, stems, sources, dirs, ignores

    def _scan(self) -> None:
        """A walk again, under `_writing`: everything read, then published at once (lookups
        keep the whole previous state until then)."""
        listed = self._list()
        if listed is None:
            return
        paths, stems, sources, dirs, ignores = listed
        chunks = {
            d: self._read_dir(tuple(files), self._chunks.get(d)) for d, files in sources.items()
        }
        if self._stop.is_set():
            return
        with self._lock:
            self._paths, self._stems, self._chunks = paths, stems, chunks
            self._stem_text = self._dir_names = None
            self._walked = tuple(dirs)
        self._dirs, self._ignores = set(dirs), ignores

    def _read_pending(self, order: list[str]) -> None:
        """The first scan's symbols, after its listing: each directory still unread is read
        without the writer's lock, and a batch is published under it, each directory only if
        nothing replaced it meanwhile (an `apply` reads what it touches itself)."""
        batch: dict[str, tuple[_Chunk, _Chunk]] = {}
        count = 0
        for d in order:
            if self._stop.is_set():
                return
            chunk = self._chunks.get(d)
            if chunk is None or chunk.stamps is not None:
                continue  # gone, or read by an apply
            batch[d] = (chunk, self._read_dir(chunk.files, None))
            count += len(chunk.files)
            if count >= _READ_BATCH:
                self._merge(batch)
                batch, count = {}, 0
        self._merge(batch)

    def _merge(self, batch: dict[str, tuple[_Chunk, _Chunk]]) -> None:
        with self._writing:
            fresh = {d: new for d, (was, new) in batch.items() if self._chunks.get(d) is was}
            with self._lock:
                self._chunks.update(fresh)
        self._wake()

    def _read_dir(
        self, files: tuple[str, ...], old: _Chunk | None, recheck: set[str] | None = None
    ) -> _Chunk:
        """The chunk of a directory's source `files`. A file of `old` (read) keeps its names
        while its (mtime_ns, size) is the same; with `recheck`, only the files in it are
        looked at on disk, the others of `old` are taken as they are."""
        had = {rel: i for i, rel in enumerate(old.files)} if old and old.stamps else {}
        parts, starts, stamps, pos = ["\n"], array("q"), array("q"), 1
        for rel in files:
            i = had.get(rel)
            if i is not None and recheck is not None and rel not in recheck:
                stamp, entries = old.stamp(i), old.entries(i)  # type: ignore[union-attr]
            else:
                now = _stamp(self._abs(rel))
                if now is None:  # no longer a regular file: no names, read again if it is
                    stamp, entries = (-1, -1), ""
                elif i is not None and old.stamp(i) == now:  # type: ignore[union-attr]
                    stamp, entries = now, old.entries(i)  # type: ignore[union-attr]
                else:
                    stamp, entries = now, _entries(_parse_symbols(self._abs(rel)))
                    self._read += 1
                    if self._read % _NOTIFY_EVERY == 0 or self._read == SETTLE_READ:
                        self._wake()
            starts.append(pos)
            stamps.extend(stamp)
            parts.append(entries)
            pos += len(entries)
        return _Chunk(files, "".join(parts), starts, stamps)

    def _walk(
        self,
        top: str,
        chain: _Chain,
        ignores: dict[str, _Ignore],
        budget: int,
        stems: dict[str, _Files] | None = None,
        sources: dict[str, list[str]] | None = None,
    ) -> tuple[list[str], list[str]]:
        """The regular files under directory `top` ("" for the root) and the directories
        walked, depth first, at most `budget` files (a directory's entries taken in name order
        when the budget may end in it); `chain` is what applies in `top`'s parent. Records each
        `.gitignore` met in `ignores`, and with `stems` and `sources` each file's lowered stem
        and each directory's source files (sorted). Nothing is stat'ed: the directory
        entries' types say what is a regular file, a directory or a link, and symbolic links
        are never followed."""
        files: list[str] = []
        dirs: list[str] = []
        stack = [(top, chain)]
        notify_at = self._listed + _NOTIFY_EVERY
        while stack and len(files) < budget and not self._stop.is_set():
            here, chain = stack.pop()
            try:
                with os.scandir(self._abs(here)) as it:
                    entries = list(it)
            except OSError:
                continue
            dirs.append(here)
            if len(files) + len(entries) >= budget:
                entries.sort(key=_by_name)  # where the walk stops is the same every time
            if any(e.name == ".gitignore" for e in entries):
                rules = self._read_ignore(here)
                if rules is not None:
                    ignores[here] = rules
                    chain = ((here, rules), *chain)
            dirnames: list[str] = []
            names: list[str] = []
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name not in SKIP_DIRS:
                            dirnames.append(entry.name)
                    elif entry.is_file(follow_symlinks=False):
                        names.append(entry.name)
                except OSError:
                    continue
            if chain:
                dirnames = _kept(chain, here, dirnames, True)
                names = _kept(chain, here, names, False)
            del names[budget - len(files) :]
            prefix = here + "/" if here else ""
            mine: list[str] = []
            before = len(files)
            for name in names:
                rel = prefix + name
                files.append(rel)
                if stems is not None:
                    i = name.rfind(".")  # split_name, inline: this loop is the listing's cost
                    stem, suffix = (name[:i], name[i:]) if 0 < i < len(name) - 1 else (name, "")
                    stem = stem.lower()
                    had = stems.get(stem)
                    if had is None:
                        stems[stem] = rel
                    elif isinstance(had, str):
                        stems[stem] = [had, rel]
                    else:
                        had.append(rel)
                    if suffix in SOURCE_SUFFIXES:
                        mine.append(rel)
            if mine and sources is not None:
                mine.sort()
                sources[here] = mine
            dirnames.sort(reverse=True)
            stack.extend((prefix + d, chain) for d in dirnames)
            was, self._listed = self._listed, self._listed + len(files) - before
            if self._listed >= notify_at or was < SETTLE_LISTED <= self._listed:
                notify_at = self._listed + _NOTIFY_EVERY
                self._wake()
        return files, dirs

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
        candidates: list[str] = []  # regular files to index
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
                candidates.append(rel)
            else:
                drop.add(rel)
        walked = {d for d in walks if not any(a in walks for a in _ancestors(d))}
        emptied = walked.union(gone)
        if emptied:  # one pass over what is known, however many directories
            prefixes = tuple(d + "/" for d in emptied)
            drop.update(rel for rel in self._paths if rel.startswith(prefixes))
            self._dirs = {d for d in self._dirs if d not in emptied and not d.startswith(prefixes)}
            for d in [d for d in self._ignores if d in emptied or d.startswith(prefixes)]:
                del self._ignores[d]
        put: set[str] = set()
        budget = MAX_FILES - len(self._paths) + len(drop)
        for d in sorted(walked):
            files, dirs = self._walk(d, walks[d], self._ignores, max(budget - len(put), 0))
            put.update(files)
            self._dirs.update(dirs)
        put.update(rel for rel in candidates if not any(a in walked for a in _ancestors(rel)))
        self._publish(put, drop)

    def _publish(self, put: set[str], drop: set[str]) -> None:
        """Make a batch visible to lookups at once: `put` the files there now (each source
        file of them looked at on disk again), `drop` those that are not."""
        removed = sorted(rel for rel in drop if rel not in put and self._has(rel))
        new = sorted(rel for rel in put if not self._has(rel))
        room = MAX_FILES - len(self._paths) + len(removed)
        if len(new) > room:
            logger.warning(
                "the workspace index is full (%d files): %d left out", MAX_FILES, len(new) - room
            )
            put.difference_update(new[room:])
            new = new[:room]
        touched: dict[str, set[str]] = {}  # directory -> its source files put or removed
        for rel in (*removed, *put):
            if _is_source(rel):
                touched.setdefault(rel.rpartition("/")[0], set()).add(rel)
        gone = set(removed)
        chunks: dict[str, _Chunk | None] = {}
        for d, rels in touched.items():
            old = self._chunks.get(d)
            files = sorted({*(old.files if old else ()), *rels} - gone)
            read = old is not None and old.stamps is not None  # else read it all now
            chunks[d] = self._read_dir(tuple(files), old, rels if read else None) if files else None
        paths = None
        if len(removed) + len(new) > _BIG_BATCH:  # one sort instead of many list shifts
            paths = sorted([rel for rel in self._paths if rel not in gone] + new)
        with self._lock:
            if removed or new:
                self._dir_names, self._walked = None, tuple(self._dirs)
            for rel in removed:
                self._unlink(rel)
            for rel in new:
                self._link(rel)
            if paths is not None:
                self._paths = paths
            else:
                for rel in removed:
                    del self._paths[bisect.bisect_left(self._paths, rel)]
                for rel in new:
                    bisect.insort(self._paths, rel)
            for d, chunk in chunks.items():
                if chunk is None:
                    self._chunks.pop(d, None)
                else:
                    self._chunks[d] = chunk

    def _link(self, rel: str) -> None:
        stem = _stem(rel)
        had = self._stems.get(stem)
        if had is None:
            self._stems[stem] = rel
            self._stem_text = None
        elif isinstance(had, str):
            self._stems[stem] = sorted((had, rel))
        else:
            bisect.insort(had, rel)

    def _unlink(self, rel: str) -> None:
        stem = _stem(rel)
        had = self._stems[stem]
        if isinstance(had, str):
            del self._stems[stem]
            self._stem_text = None
        else:
            had.remove(rel)
            if len(had) == 1:
                self._stems[stem] = had[0]

    def _chain(self, d: str) -> _Chain | None:
        """The `.gitignore` rules that apply inside directory `d`; None if the walk would not
        enter it (gone, skipped, ignored, or reached through a symbolic link)."""
        full = self._abs(d)
        if os.path.realpath(full) != full or not os.path.isdir(full):
            return None
        root_rules = self._ignores.get("")
        chain: _Chain = (("", root_rules),) if root_rules is not None else ()
        if d:
            parts = d.split("/")
            for i, part in enumerate(parts):
                sub = "/".join(parts[: i + 1])
                if part in SKIP_DIRS or _ignored(chain, sub, True):
                    return None
                rules = self._ignores.get(sub)
                if rules is not None:
                    chain = ((sub, rules), *chain)
        return chain

    def _read_ignore(self, d: str) -> _Ignore | None:
        path = os.path.join(self._abs(d), ".gitignore")
        try:
            text = read_regular(path, MAX_SOURCE_BYTES, follow_symlinks=False)
        except OSError:  # gone, too large, a symlink or not a regular file: no rules
            return None
        lines = text.decode("utf-8", "replace").splitlines()
        return _Ignore(pathspec.GitIgnoreSpec.from_lines(lines))

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
