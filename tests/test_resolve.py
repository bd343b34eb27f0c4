"""Reference resolution over a real workspace directory."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import threading
import time
from types import SimpleNamespace

import pytest

from talos_ls.gates.producers import answered_referents
from talos_ls.gates.question_queue import QuestionQueue
from talos_ls.memory import index as index_mod
from talos_ls.memory.index import WorkspaceIndex
from talos_ls.memory.resolve import Evidence, evidence_notes, resolve, worked_on, workspace_path

SAY_IT = (
    " It is ambiguous and the person has not settled it: go on that assumption unless the "
    "request or the code shows it wrong, and say in your reply which you took and which you "
    "did not, so they can correct it."
)
UNDECIDED = (  # nothing decides: the one nearest the root, said to be an assumption
    "Assumed 'the parser' means src/parser.py (nothing in the request or the editor decides "
    "it; the one nearest the root), not tools/parser.py." + SAY_IT
)


@pytest.fixture
def workspace(tmp_path):
    files = {
        "src/parser.py": "import os\n\nclass Parser:\n    pass\n\ndef parse(text):\n    return 1\n",
        "tools/parser.py": "LIMIT = 3\n\ndef load_config():\n    pass\n",
        "tests/test_parser.py": "def test_parse():\n    pass\n",
        "config.toml": "[tool]\n",
        "web/app.ts": "export function loadConfig() {}\nexport const API_URL = 'x'\n",
        "broken.py": "def (:\n",
        "node_modules/lib/parser.js": "function parse() {}\n",
        **{f"pkg{i}/util.py": "x = 1\n" for i in range(5)},
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return WorkspaceIndex.build(tmp_path)


def refs(index, text):
    return [
        (r["surface"], r["status"], r["candidates"])
        for r in resolve("a1", 1, text, index).references
    ]


def test_index(workspace):
    assert "node_modules/lib/parser.js" not in workspace.files  # skipped directory
    assert workspace.symbols["Parser"] == ["src/parser.py"]
    assert workspace.symbols["LIMIT"] == ["tools/parser.py"]  # module-level assignment
    assert workspace.symbols["loadConfig"] == ["web/app.ts"]  # fallback for other languages
    assert workspace.symbols["API_URL"] == ["web/app.ts"]
    assert "broken.py" in workspace.files  # a file that does not parse is still a file


def test_statuses(workspace):
    assert refs(workspace, "fix the parser") == [
        ("the parser", "evidence_gap", ["src/parser.py", "tools/parser.py"])
    ]
    assert refs(workspace, "rename the Parser class") == [
        ("the Parser class", "resolved", ["Parser in src/parser.py"])
    ]
    assert refs(workspace, "extend the parser tests") == [
        ("the parser tests", "resolved", ["tests/test_parser.py"])
    ]
    assert refs(workspace, "edit the config file") == [
        ("the config file", "resolved", ["config.toml"])
    ]
    assert refs(workspace, "call loadConfig() and load_config()") == [
        ("loadConfig()", "resolved", ["loadConfig in web/app.ts"]),
        ("load_config()", "resolved", ["load_config in tools/parser.py"]),
    ]
    (util,) = refs(workspace, "clean up the util module")
    assert util[1] == "indeterminate" and len(util[2]) == 5  # five candidates: too vague
    (note,) = evidence_notes(resolve("a1", 1, "clean up the util module", workspace))
    assert note.startswith("Assumed 'the util module' means pkg0/util.py (nothing in ")
    assert note.endswith(" or pkg3/util.py or pkg4/util.py." + SAY_IT), note
    assert refs(workspace, "fix the bug in the same way") == []  # not about the workspace


def test_offsets_index_the_original_text_with_unicode(workspace):
    text = "Schön: «fix the parser» — 谢谢"
    (ref,) = resolve("a1", 1, text, workspace).references
    assert text[ref["start"] : ref["end"]] == "the parser"
    assert ref["question"] == (
        "Which do you mean by 'the parser': src/parser.py or tools/parser.py?"
    )


def test_record_shape(workspace):
    record = resolve("a1", 4, "fix the parser", workspace)
    assert record.agent_id == "a1" and record.turn == 4 and record.key.startswith("res:4:")
    assert record.status == "evidence_gap"
    (ref,) = record.references
    assert set(ref) == {
        "surface",
        "start",
        "end",
        "kind",
        "status",
        "temporal_role",
        "resolved_text",
        "resolved_epoch",
        "assumption",
        "candidates",
        "question",
        "evidence",
    }
    assert ref["evidence"] is None  # no evidence given: nothing weighed
    assert resolve("a1", 4, "rename the Parser class", workspace).status == "resolved"


def test_refresh_rereads_only_what_changed(tmp_path):
    (tmp_path / "a.py").write_text("def alpha():\n    pass\n")
    (tmp_path / "b.py").write_text("def beta():\n    pass\n")
    index = WorkspaceIndex.build(tmp_path)
    assert set(index.symbols) == {"alpha", "beta"}
    (tmp_path / "a.py").write_text("def alpha():\n    pass\n\n\ndef gamma():\n    pass\n")
    (tmp_path / "b.py").unlink()
    (tmp_path / "c.ts").write_text("export function delta() {}\n")
    index.refresh()
    assert set(index.symbols) == {"alpha", "gamma", "delta"}
    assert index.files == ["a.py", "c.ts"]
    assert refs(index, "call gamma()") == [("gamma()", "resolved", ["gamma in a.py"])]


# ---------------------------------------------------------------- the index as a daemon keeps it
def write(root, rel, text="x = 1\n"):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


@pytest.fixture
def parses(monkeypatch):
    """Every file whose symbols are parsed, in order."""
    seen: list[str] = []
    real = index_mod._parse_symbols

    def counting(path):
        seen.append(path)
        return real(path)

    monkeypatch.setattr(index_mod, "_parse_symbols", counting)
    return seen


def test_apply_files_added_modified_deleted(tmp_path):
    write(tmp_path, "src/a.py", "def alpha():\n    pass\n")
    index = WorkspaceIndex.build(tmp_path)
    b = write(tmp_path, "src/b.py", "def beta():\n    pass\n")
    a = write(tmp_path, "src/a.py", "def alpha2():\n    pass\n")
    index.apply([("added", b), ("modified", a)])
    assert index.files == ["src/a.py", "src/b.py"]
    assert index.match_symbol("beta") == ["beta in src/b.py"]
    assert index.match_symbol("alpha") == [] and index.match_symbol("alpha2") == [
        "alpha2 in src/a.py"
    ]
    (tmp_path / "src/b.py").unlink()
    index.apply([("deleted", b)])
    assert index.files == ["src/a.py"] and "beta" not in index.symbols
    assert index.match_noun("b", None) == []


def test_apply_directories_added_moved_deleted(tmp_path):
    write(tmp_path, "keep.py")
    index = WorkspaceIndex.build(tmp_path)
    outside = tmp_path.parent / f"{tmp_path.name}-elsewhere"
    write(outside, "pkg/parser.py", "class Parser:\n    pass\n")
    write(outside, "pkg/deep/er/lexer.py", "def lex():\n    pass\n")
    os.rename(outside / "pkg", tmp_path / "pkg")  # `mv`: one event, for the directory
    index.apply([("added", str(tmp_path / "pkg"))])
    assert index.files == ["keep.py", "pkg/deep/er/lexer.py", "pkg/parser.py"]
    assert index.match_symbol("lex") == ["lex in pkg/deep/er/lexer.py"]
    os.rename(tmp_path / "pkg", tmp_path / "lib")
    index.apply([("deleted", str(tmp_path / "pkg")), ("added", str(tmp_path / "lib"))])
    assert index.files == ["keep.py", "lib/deep/er/lexer.py", "lib/parser.py"]
    assert index.match_noun("Parser", "class") == ["Parser in lib/parser.py"]
    shutil.rmtree(tmp_path / "lib")
    index.apply([("deleted", str(tmp_path / "lib"))])
    assert index.files == ["keep.py"] and set(index.symbols) == {"x"}
    assert index.match_noun("parser", None) == []


def test_a_file_in_a_directory_whose_own_event_was_missed(tmp_path):
    write(tmp_path, "keep.py")
    index = WorkspaceIndex.build(tmp_path)
    write(tmp_path, "new/sub/one.py", "def one():\n    pass\n")
    two = write(tmp_path, "new/sub/two.py", "def two():\n    pass\n")
    index.apply([("added", two)])  # the directories' events never came
    assert index.files == ["keep.py", "new/sub/one.py", "new/sub/two.py"]
    assert index.match_symbol("one") == ["one in new/sub/one.py"]


def test_only_the_changed_file_is_parsed_again(tmp_path, parses):
    for i in range(5):
        write(tmp_path, f"m{i}.py", f"def f{i}():\n    pass\n")
    write(tmp_path, "notes.txt", "not source")
    index = WorkspaceIndex.build(tmp_path)
    assert len(parses) == 5  # source files only
    parses.clear()
    changed = write(tmp_path, "m3.py", "def f3():\n    pass\n\n\ndef g3():\n    pass\n")
    index.apply([("modified", changed), ("modified", str(tmp_path / "notes.txt"))])
    assert parses == [changed]
    assert index.match_symbol("g3") == ["g3 in m3.py"]
    parses.clear()
    index.apply([("modified", changed)])  # the same (mtime, size): nothing to read
    index.refresh()
    assert parses == []


def test_gitignore_excludes_and_reincludes(tmp_path):
    write(tmp_path, ".gitignore", "generated/\n*.log\n")
    write(tmp_path, "generated/parser.py", "def generated():\n    pass\n")
    write(tmp_path, "run.log", "")
    write(tmp_path, "src/parser.py", "def parse():\n    pass\n")
    index = WorkspaceIndex.build(tmp_path)
    assert index.files == [".gitignore", "src/parser.py"]
    assert index.match_noun("parser", None) == ["src/parser.py"]
    late = write(tmp_path, "generated/later.py", "def later():\n    pass\n")
    index.apply([("added", late), ("added", write(tmp_path, "src/debug.log", ""))])
    assert index.files == [".gitignore", "src/parser.py"]
    gitignore = write(tmp_path, ".gitignore", "*.log\n")
    index.apply([("modified", gitignore)])
    assert index.files == [
        ".gitignore",
        "generated/later.py",
        "generated/parser.py",
        "src/parser.py",
    ]
    assert index.match_noun("parser", None) == ["generated/parser.py", "src/parser.py"]
    assert index.match_symbol("later") == ["later in generated/later.py"]


def test_nested_gitignore(tmp_path):
    write(tmp_path, ".gitignore", "*.log\n")
    write(tmp_path, "sub/.gitignore", "*.tmp\n!keep.log\n")
    for rel in ("a.tmp", "a.log", "sub/b.tmp", "sub/b.log", "sub/keep.log", "sub/deeper/c.tmp"):
        write(tmp_path, rel, "")
    index = WorkspaceIndex.build(tmp_path)
    assert index.files == [".gitignore", "a.tmp", "sub/.gitignore", "sub/keep.log"]
    nested = write(tmp_path, "sub/.gitignore", "")
    index.apply([("modified", nested)])  # only sub/ is walked again
    assert index.files == [".gitignore", "a.tmp", "sub/.gitignore", "sub/b.tmp", "sub/deeper/c.tmp"]
    added = write(tmp_path, "sub/deeper/d.log", "")
    index.apply([("added", added)])
    assert "sub/deeper/d.log" not in index.files  # the root's *.log still applies


def test_symlinks_and_fifos_are_never_followed_or_opened(tmp_path, parses):
    root = tmp_path / "ws"
    outside = tmp_path / "outside"
    write(outside, "secret.py", "def leaked():\n    pass\n")
    write(root, "real.py", "def real():\n    pass\n")
    os.symlink(outside, root / "linked")
    os.symlink(outside / "secret.py", root / "alias.py")
    os.mkfifo(root / "pipe.py")
    index = WorkspaceIndex.build(root)
    assert index.files == ["real.py"]
    index.apply(
        [
            ("added", str(root / "linked")),
            ("added", str(root / "linked" / "secret.py")),
            ("modified", str(root / "alias.py")),
            ("modified", str(root / "pipe.py")),
            ("added", str(outside / "secret.py")),  # outside the root
            ("added", str(root / ".." / "outside" / "secret.py")),
        ]
    )
    assert index.files == ["real.py"] and index.match_symbol("leaked") == []
    assert all(not p.startswith(str(outside)) and "linked" not in p for p in parses)
    assert str(root / "pipe.py") not in parses and str(root / "alias.py") not in parses


def test_skipped_directories_stay_skipped_on_apply(tmp_path):
    write(tmp_path, "a.py")
    index = WorkspaceIndex.build(tmp_path)
    index.apply(
        [
            ("added", write(tmp_path, "node_modules/lib/parser.js", "function parse() {}\n")),
            ("added", str(tmp_path / "node_modules")),
            ("added", write(tmp_path, "build/out/parser.py")),
            ("added", write(tmp_path, ".git/parser.py")),
        ]
    )
    assert index.files == ["a.py"]


def test_lookups_are_sorted_by_path_whatever_the_order_of_arrival(tmp_path):
    write(tmp_path, "keep.py")
    index = WorkspaceIndex.build(tmp_path)
    for rel in ("z/util.py", "m/util.py", "a/util.py"):
        index.apply([("added", write(tmp_path, rel, "def helper():\n    pass\n"))])
    assert index.match_noun("util", None) == ["a/util.py", "m/util.py", "z/util.py"]
    assert index.match_symbol("helper") == [
        "helper in a/util.py",
        "helper in m/util.py",
        "helper in z/util.py",
    ]
    index.apply([("added", write(tmp_path, "app_settings.toml", ""))])
    assert index.match_noun("settings", "config") == ["app_settings.toml"]  # a new stem is seen


def test_max_files(tmp_path, monkeypatch):
    monkeypatch.setattr(index_mod, "MAX_FILES", 3)
    for name in "abcd":
        write(tmp_path, f"{name}.py")
    index = WorkspaceIndex.build(tmp_path)
    assert index.files == ["a.py", "b.py", "c.py"]
    index.apply([("added", write(tmp_path, "e.py"))])
    assert len(index.files) == 3
    (tmp_path / "a.py").unlink()
    index.apply([("deleted", str(tmp_path / "a.py")), ("added", str(tmp_path / "e.py"))])
    assert index.files == ["b.py", "c.py", "e.py"]


def test_a_pathological_python_file_is_a_file_without_symbols(tmp_path):
    write(tmp_path, "deep.py", "-" * 200_000 + "1\n")  # the parser gives up with MemoryError
    write(tmp_path, "ok.py", "def fine():\n    pass\n")
    index = WorkspaceIndex.build(tmp_path)
    assert index.files == ["deep.py", "ok.py"] and set(index.symbols) == {"fine"}


# ---------------------------------------------------------------- threads
def test_lookups_never_wait_for_the_first_scan(tmp_path, monkeypatch):
    write(tmp_path, "src/parser.py", "def parse():\n    pass\n")
    write(tmp_path, "tools/parser.py", "def parse():\n    pass\n")
    release = threading.Event()
    real = index_mod._parse_symbols

    def slow(path):
        release.wait(30)
        return real(path)

    monkeypatch.setattr(index_mod, "_parse_symbols", slow)
    index = WorkspaceIndex(tmp_path)
    builder = threading.Thread(target=index.scan)
    builder.start()
    try:
        answers: list[list] = []
        reader = threading.Thread(
            target=lambda: answers.append(refs(index, "fix the parser, call parse()"))
        )
        reader.start()
        reader.join(10)
        assert not reader.is_alive() and answers == [[]]  # answered at once, from nothing
        assert not index.ready.is_set()
    finally:
        release.set()
        builder.join(30)
    assert index.ready.wait(30)
    assert refs(index, "fix the parser") == [
        ("the parser", "evidence_gap", ["src/parser.py", "tools/parser.py"])
    ]


@pytest.fixture
def held(monkeypatch):
    """`_parse_symbols` waits, for the paths ending with a given name, until released."""
    gate = SimpleNamespace(names=set(), release=threading.Event(), waiting=threading.Event())
    real = index_mod._parse_symbols

    def parse(path):
        if os.path.basename(path) in gate.names:
            gate.waiting.set()
            gate.release.wait(30)
        return real(path)

    monkeypatch.setattr(index_mod, "_parse_symbols", parse)
    yield gate
    gate.release.set()


def test_the_listing_is_ready_before_the_symbols_and_resolution_says_it_was_partial(
    tmp_path, monkeypatch, held
):
    monkeypatch.setattr(index_mod, "_READ_BATCH", 1)  # a first batch of one directory
    write(tmp_path, "a/parser.py", "def parse():\n    pass\n")
    write(tmp_path, "b/parser.py", "def parse():\n    pass\n")
    write(tmp_path, "c/late.py", "def late():\n    pass\n")
    held.names.add("late.py")
    index = WorkspaceIndex(tmp_path)
    builder = threading.Thread(target=index.scan)
    builder.start()
    try:
        assert held.waiting.wait(30) and index.ready.is_set() and not index.complete.is_set()
        assert index.files == ["a/parser.py", "b/parser.py", "c/late.py"]  # listed, all of it
        record = resolve("a1", 1, "fix the parser, call late()", index)
        assert [r["candidates"] for r in record.references] == [
            ["a/parser.py", "b/parser.py"]
        ]  # late() is not read yet
        assert record.partial and "still being built" in evidence_notes(record)[0]
        assert not resolve("a1", 1, "make it faster", index).partial  # nothing was looked up
        added = write(tmp_path, "d/new.py", "def new():\n    pass\n")
        index.apply([("added", added)])  # not held up by the reading under way
        assert index.match_symbol("new") == ["new in d/new.py"]
    finally:
        held.release.set()
        builder.join(30)
    assert index.complete.is_set() and index.match_symbol("late") == ["late in c/late.py"]
    record = resolve("a1", 2, "call late()", index)
    assert not record.partial and evidence_notes(record) == []


def test_settle_waits_for_a_small_workspace_and_not_for_a_large_one(tmp_path, monkeypatch, held):
    for i in range(4):
        write(tmp_path, f"m{i}.py", f"def f{i}():\n    pass\n")
    small = WorkspaceIndex(tmp_path)
    builder = threading.Thread(target=small.scan)
    builder.start()
    assert small.settle() and small.complete.is_set()  # a small one: all of it
    builder.join(30)
    monkeypatch.setattr(index_mod, "SETTLE_READ", 2)  # "large": more than two files to read
    held.names.add("m3.py")
    large = WorkspaceIndex(tmp_path)
    builder = threading.Thread(target=large.scan)
    builder.start()
    try:
        assert not large.settle()  # back once two are read, the third still held
        assert held.waiting.wait(30) and not large.complete.is_set()
    finally:
        held.release.set()
        builder.join(30)
    closed = WorkspaceIndex(tmp_path)
    closed.close()
    assert not closed.settle()  # a closed index is waited for by nobody
    closed.scan()
    assert not closed.ready.is_set() and closed.files == []


@pytest.fixture
def fast_switching():
    """Threads take turns every microsecond or so, so that a torn state, if any, shows."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def test_readers_never_see_half_a_batch(tmp_path, fast_switching):
    """Each batch adds or removes two files of the same stem and symbol together: a lookup
    sees both or neither, never one."""
    write(tmp_path, "base.py")
    index = WorkspaceIndex.build(tmp_path)
    pair = [tmp_path / "a" / "twin.py", tmp_path / "b" / "twin.py"]
    for path in pair:
        path.parent.mkdir()
    stop = threading.Event()
    seen: set[tuple[str, int]] = set()
    errors: list[BaseException] = []

    def read():
        try:
            while not stop.is_set():
                seen.add(("noun", len(index.match_noun("twin", None))))
                seen.add(("symbol", len(index.match_symbol("twin_fn"))))
                resolve("a1", 1, "fix the twin file, call twin_fn()", index)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    readers = [threading.Thread(target=read) for _ in range(3)]
    for t in readers:
        t.start()
    try:
        for i in range(5000):  # until the readers have seen both states, 150 rounds at least
            if i >= 150 and len(seen) == 4:
                break
            if i % 2 == 0:
                for path in pair:
                    path.write_text(f"def twin_fn():\n    return {i}\n")
                index.apply([("added", str(p)) for p in pair])
            else:
                for path in pair:
                    path.unlink()
                index.apply([("deleted", str(p)) for p in pair])
    finally:
        stop.set()
        for t in readers:
            t.join(30)
    assert not errors
    assert seen == {("noun", 0), ("noun", 2), ("symbol", 0), ("symbol", 2)}


def test_a_large_batch(tmp_path):
    """A checkout that brings hundreds of files at once (the sorted list is rebuilt whole)."""
    write(tmp_path, "m.py")
    write(tmp_path, "z.py")
    index = WorkspaceIndex.build(tmp_path)
    staging = tmp_path.parent / f"{tmp_path.name}-staging"
    for i in range(300):
        write(staging, f"n/f{i:03}.py", f"def f{i}():\n    pass\n")
    os.rename(staging / "n", tmp_path / "n")
    index.apply([("added", str(tmp_path / "n"))])
    assert index.files == ["m.py", *(f"n/f{i:03}.py" for i in range(300)), "z.py"]
    assert index.match_symbol("f299") == ["f299 in n/f299.py"]
    shutil.rmtree(tmp_path / "n")
    index.apply([("deleted", str(tmp_path / "n"))])
    assert index.files == ["m.py", "z.py"] and set(index.symbols) == {"x"}


# ---------------------------------------------------------------- the editor as evidence
PARSERS = ["src/parser.py", "tools/parser.py"]


def weighed(index, evidence, text="fix the parser"):
    """The one reference in `text` as resolved with `evidence`."""
    record = resolve("a1", 1, text, index, evidence)
    (ref,) = record.references
    return record, ref


def test_the_active_document_settles_the_reference_and_no_question_is_proposed(workspace, qq):
    record, ref = weighed(workspace, Evidence(active="tools/parser.py"))
    assert (ref["status"], ref["resolved_text"], ref["question"]) == (
        "resolved",
        "tools/parser.py",
        None,
    )
    assert ref["candidates"] == PARSERS  # what it was chosen among stays on record
    assert ref["evidence"] == {
        "rule": "active document",
        "decided": True,
        "resolved_text": "tools/parser.py",
        "path": "tools/parser.py",
    }
    assert record.status == "resolved"
    assert qq.propose_from_resolution(record, 1) == 0
    assert qq.next_question("a1", 1, "fix the parser") is None
    (note,) = evidence_notes(record)
    assert note == (
        "Assumed 'the parser' means tools/parser.py (it is the active document), not src/parser.py."
    )


def test_an_active_document_that_is_no_candidate_decides_nothing(workspace, qq):
    record, ref = weighed(workspace, Evidence(active="web/app.ts", selection="x = 1"))
    assert ref["status"] == "evidence_gap" and ref["evidence"] is None
    assert qq.propose_from_resolution(record, 1) == 1
    assert evidence_notes(record) == [UNDECIDED]  # said, not guessed silently


@pytest.mark.parametrize(
    "selection",
    [
        "from tools.parser import LIMIT\n",
        "import tools.parser as p",
        "see tools/parser.py:3 for the limit",
        "x = tools.parser.load_config()",
    ],
)
def test_the_selection_naming_one_candidate_settles_it(workspace, selection):
    _, ref = weighed(workspace, Evidence(active="web/app.ts", selection=selection))
    assert ref["status"] == "resolved" and ref["resolved_text"] == "tools/parser.py"
    assert ref["evidence"]["rule"] == "selection"


def test_active_document_and_selection_naming_different_candidates_still_ask(workspace):
    _, ref = weighed(workspace, Evidence(active="src/parser.py", selection="import tools.parser"))
    assert ref["status"] == "evidence_gap" and ref["question"]
    assert ref["evidence"] == {"rule": "active document", "decided": False, "candidates": PARSERS}


@pytest.mark.parametrize(
    "message",
    [
        'File "{root}/tools/parser.py", line 3, in <module>',
        "tools/parser.py:3:1: E999 SyntaxError",
        "file://{root}/tools/parser.py: unused import",
        'Module "tools.parser" has no attribute "LIMITS"',
        "./tools/parser.py(3): error",
    ],
)
def test_a_diagnostic_in_range_naming_one_candidate_settles_it(workspace, message):
    diagnostics = ("line too long (120 > 99)", message.format(root=workspace.root))
    record, ref = weighed(workspace, Evidence(active="README.md", diagnostics=diagnostics))
    assert ref["status"] == "resolved" and ref["resolved_text"] == "tools/parser.py"
    assert ref["evidence"]["rule"] == "diagnostic"
    assert ref["evidence"]["diagnostic"] == diagnostics[1]
    assert "a diagnostic in range names it" in evidence_notes(record)[0]


def test_diagnostics_naming_both_candidates_ask_and_touched_files_are_not_heard(workspace):
    diagnostics = ("src/parser.py:1: error: in tools/parser.py:3",)
    evidence = Evidence(diagnostics=diagnostics, touched=("tools/parser.py",))
    _, ref = weighed(workspace, evidence)
    assert ref["status"] == "evidence_gap"
    assert ref["evidence"] == {"rule": "diagnostic", "decided": False, "candidates": PARSERS}


def test_the_one_recently_touched_candidate_settles_it(workspace):
    evidence = Evidence(touched=("README.md", "tools/parser.py", "web/app.ts"))
    record, ref = weighed(workspace, evidence)
    assert ref["status"] == "resolved" and ref["resolved_text"] == "tools/parser.py"
    assert ref["evidence"]["rule"] == "recently touched"
    assert "touched in the last turns" in evidence_notes(record)[0]


def test_two_candidates_both_touched_still_ask(workspace, qq):
    record, ref = weighed(workspace, Evidence(touched=("src/parser.py", "./tools/parser.py")))
    assert ref["status"] == "evidence_gap"
    assert ref["question"] == "Which do you mean by 'the parser': src/parser.py or tools/parser.py?"
    assert ref["evidence"] == {"rule": "recently touched", "decided": False, "candidates": PARSERS}
    assert qq.propose_from_resolution(record, 1) == 1
    assert evidence_notes(record) == [  # the first of the two touched, said to be assumed
        "Assumed 'the parser' means src/parser.py (the first of those touched in the last "
        "turns), not tools/parser.py." + SAY_IT
    ]


def test_the_stronger_evidence_wins(workspace):
    # the active document over a diagnostic and a touched file naming the other one
    evidence = Evidence(
        active="src/parser.py", diagnostics=("tools/parser.py:1: E1",), touched=("tools/parser.py",)
    )
    assert weighed(workspace, evidence)[1]["evidence"]["rule"] == "active document"
    assert weighed(workspace, evidence)[1]["resolved_text"] == "src/parser.py"
    # a diagnostic over a touched file
    evidence = Evidence(diagnostics=("src/parser.py:1: E1",), touched=("tools/parser.py",))
    assert weighed(workspace, evidence)[1]["resolved_text"] == "src/parser.py"


def test_symbol_candidates_are_weighed_by_their_file(tmp_path):
    write(tmp_path, "src/parser.py", "def load():\n    pass\n")
    write(tmp_path, "tools/parser.py", "def load():\n    pass\n")
    index = WorkspaceIndex.build(tmp_path)
    assert resolve("a1", 1, "call load()", index).status == "evidence_gap"
    _, ref = weighed(index, Evidence(active="tools/parser.py"), "call load()")
    assert ref["resolved_text"] == "load in tools/parser.py"
    assert ref["evidence"]["path"] == "tools/parser.py"


def test_an_indeterminate_reference_can_be_settled_too(workspace):
    _, ref = weighed(workspace, Evidence(active="pkg4/util.py"), "clean up the util module")
    assert ref["status"] == "resolved" and ref["resolved_text"] == "pkg4/util.py"
    assert "pkg4/util.py" in ref["candidates"] and len(ref["candidates"]) == 5


@pytest.mark.parametrize(
    "outside",
    [
        "/elsewhere/tools/parser.py:3: E1",
        "{root}/../tools/parser.py:3",
        "../ws/tools/parser.py",
        "{root}x/tools/parser.py",
        "file:///elsewhere/tools/parser.py",
        "src/../../tools/parser.py",
    ],
)
def test_paths_outside_the_workspace_name_nothing(workspace, outside):
    text = outside.format(root=workspace.root)
    for evidence in (
        Evidence(active=text),
        Evidence(selection=text),
        Evidence(diagnostics=(text,)),
        Evidence(touched=(text,)),
    ):
        _, ref = weighed(workspace, evidence)
        assert ref["status"] == "evidence_gap" and ref["evidence"] is None, evidence


def test_workspace_path_normalizes_or_refuses():
    root = "/w/ws"
    assert workspace_path("tools/parser.py:12:5", root) == "tools/parser.py"
    assert workspace_path("./tools//parser.py.", root) == "tools/parser.py"
    assert workspace_path("tools\\parser.py", root) == "tools/parser.py"
    assert workspace_path("/w/ws/a/../tools/parser.py", root) == "tools/parser.py"
    assert workspace_path("file:///w/ws/my%20dir/x.py", root) == "my dir/x.py"
    for bad in (
        "",
        ".",
        "..",
        "/w/ws",
        "/w/wsx/a.py",
        "/etc/passwd",
        "a/../../b",
        "a\0b",
        "x" * 5000,
        "//w/ws/a.py",
    ):
        assert workspace_path(bad, root) is None, bad


@pytest.mark.parametrize(
    "odd",
    [
        "\0\x1b[31m\u202e" * 100,
        "tools.parser." * 10_000,
        ":" * 50_000,
        "a.b.c.d.e.f" * 1000,
        "\udcff\ud800 tools/parser.py",
        "(((((" + "/" * 10_000,
        "file://%zz%00",
        ":1" * 20_000 + "x",
        "tools/parser.py" * 5000,
        (":1" * 2040 + "x ") * 10,
    ],
)
def test_odd_evidence_text_never_crashes(workspace, odd):
    started = time.monotonic()
    evidence = Evidence(active=odd, selection=odd, diagnostics=(odd,) * 100, touched=(odd,) * 100)
    record, ref = weighed(workspace, evidence)
    assert ref["status"] in ("resolved", "evidence_gap")
    json.loads(record.references_json)  # the record stays readable
    # At most 50 diagnostics of 20,000 characters are read: a bound for a runaway (all of
    # them, quadratically, takes minutes), not a measure of speed.
    assert time.monotonic() - started < 30


def test_non_string_evidence_does_not_cost_the_turn(workspace):
    evidence = Evidence(active=None, diagnostics=(None, 3), touched=(None, 7))  # type: ignore[arg-type]
    _, ref = weighed(workspace, evidence)
    assert ref["status"] == "evidence_gap"


@pytest.mark.parametrize(
    "text",
    [
        "fix the parser in tools/parser.py",
        "fix the parser, the one in tools.parser",
        "fix the parser (./tools/parser.py:12)",
    ],
)
def test_the_request_naming_one_candidate_settles_it_without_any_editor(workspace, qq, text):
    record, ref = weighed(workspace, None, text)
    assert ref["status"] == "resolved" and ref["resolved_text"] == "tools/parser.py"
    assert ref["evidence"]["rule"] == "request"
    assert qq.propose_from_resolution(record, 1) == 0
    assert "the request names it" in evidence_notes(record)[0]


def test_the_request_outranks_the_editor_and_naming_both_still_asks(workspace):
    _, ref = weighed(
        workspace, Evidence(active="src/parser.py"), "fix the parser in tools/parser.py"
    )
    assert (ref["resolved_text"], ref["evidence"]["rule"]) == ("tools/parser.py", "request")
    _, ref = weighed(
        workspace, Evidence(active="src/parser.py"), "the parser: src/parser.py or tools/parser.py?"
    )
    assert ref["status"] == "evidence_gap"
    assert ref["evidence"] == {"rule": "request", "decided": False, "candidates": PARSERS}


def test_a_path_outside_the_workspace_in_the_request_names_nothing(workspace):
    outside = f"{workspace.root}/../x/tools/parser.py"
    _, ref = weighed(workspace, None, f"fix the parser like /etc/tools/parser.py and {outside}")
    assert ref["status"] == "evidence_gap" and ref["evidence"] is None


# ---------------------------------------------------------------- earlier answers
ASKED = "Which do you mean by 'the parser': src/parser.py or tools/parser.py?"


def test_an_earlier_answer_about_the_same_words_settles_them(workspace):
    record, ref = weighed(workspace, Evidence(answers=((ASKED, "tools/parser.py"),)))
    assert (ref["status"], ref["resolved_text"]) == ("resolved", "tools/parser.py")
    assert ref["evidence"]["rule"] == "earlier answer"
    assert "(you said so when asked)" in evidence_notes(record)[0]


def test_an_earlier_answer_and_the_editor_agreeing_settle_it_and_the_request_outranks_both(
    workspace,
):
    answers = ((ASKED, "tools/parser.py"),)
    _, ref = weighed(workspace, Evidence(active="tools/parser.py", answers=answers))
    assert (ref["resolved_text"], ref["evidence"]["rule"]) == ("tools/parser.py", "earlier answer")
    _, ref = weighed(workspace, Evidence(answers=answers), "fix the parser in src/parser.py")
    assert (ref["resolved_text"], ref["evidence"]["rule"]) == ("src/parser.py", "request")


@pytest.mark.parametrize(
    "evidence, now",
    [
        (Evidence(active="src/parser.py"), "src/parser.py is the file open now"),
        (Evidence(selection="from src.parser import x"), "the selection names src/parser.py"),
    ],
)
def test_an_earlier_answer_against_what_the_editor_shows_now_is_not_settled_silently(
    workspace, qq, evidence, now
):
    """The person said 'the parser' is tools/parser.py; now they look at src/parser.py. Neither
    wins silently: a new question (not the answered one again) is proposed, and the prompt
    says which was taken, and which not, so the reply can say so."""
    evidence = dataclasses.replace(evidence, answers=((ASKED, "tools/parser.py"),))
    record, ref = weighed(workspace, evidence)
    assert ref["status"] == "evidence_gap" and ref["resolved_text"] is None
    assert ref["evidence"] == {
        "rule": "earlier answer",
        "decided": False,
        "candidates": ["tools/parser.py", "src/parser.py"],
        "against": "active document" if evidence.active else "selection",
    }
    assert ref["question"] == (
        f"You said 'the parser' means tools/parser.py, but {now}. Which do you mean now?"
    )
    assert qq.propose_from_resolution(record, 1) == 1
    assert qq.next_question("a1", 1, "fix the parser").question_text == ref["question"]
    assert evidence_notes(record) == [
        f"Assumed 'the parser' means tools/parser.py (you said so when asked, though {now}), "
        "not src/parser.py." + SAY_IT
    ]


def test_the_latest_answer_wins(workspace):
    answers = ((ASKED, "src/parser.py"), (ASKED, "tools/parser.py"))  # most recent first
    assert weighed(workspace, Evidence(answers=answers))[1]["resolved_text"] == "src/parser.py"


@pytest.mark.parametrize(
    "answer",
    [
        ("Which do you mean by 'the lexer': src/lexer.py or tools/lexer.py?", "tools/parser.py"),
        (ASKED, "web/app.ts"),  # not a candidate now
        (ASKED, "option 2"),  # the labels were numbered: nothing to match
        ("Which do you mean by 'the parsers'?", "tools/parser.py"),  # other words
    ],
)
def test_an_answer_about_other_words_or_files_decides_nothing(workspace, answer):
    _, ref = weighed(workspace, Evidence(answers=(answer,)))
    assert ref["status"] == "evidence_gap" and ref["evidence"] is None


def test_the_queue_lists_the_answered_referents_most_recent_first(store):
    qq = QuestionQueue(store, budget_turns=1)
    script = [
        ("the parser", PARSERS, "tools/parser.py"),
        ("the lexer", ["a/lexer.py", "b/lexer.py"], ""),  # dismissed: not an answer
        ("the loader", ["a/loader.py", "b/loader.py"], "b/loader.py"),
    ]
    asked = []
    for turn, (surface, candidates, reply) in enumerate(script):
        ref = {
            "surface": surface,
            "start": 0,
            "end": len(surface),
            "status": "evidence_gap",
            "candidates": candidates,
            "question": f"Which do you mean by {surface!r}?",
        }
        record = SimpleNamespace(
            agent_id="a1", key=f"res:{turn}", references_json=json.dumps([ref])
        )
        assert qq.propose_from_resolution(record, turn) == 1
        q = qq.next_question("a1", turn)
        qq.record_answer(q, reply, turn)
        asked.append(q.question_text)
    assert answered_referents(qq, "a1") == [
        (asked[2], "b/loader.py"),
        (asked[0], "tools/parser.py"),
    ]


def said_after(index, request, changed=(), read=(), limit=3):
    record = resolve("a1", 1, request, index)
    return worked_on(request, record, index, list(changed), list(read), limit)


def test_what_a_task_took_where_the_request_did_not_say_is_said_after_it(workspace):
    """Requests the finder reads nothing in (a synonym, Russian): the file the task
    changed, else the one it read, is said with the same-named ones it left."""
    (line,) = said_after(workspace, "the syntax code is slow", changed=["tools/parser.py"])
    assert line == (
        "Assumed the request meant tools/parser.py (the task changed it; the request did not "
        "say which), not src/parser.py."
    )
    (line,) = said_after(workspace, "парсер тормозит", read=["./src/parser.py", "README.md"])
    assert line.startswith("Assumed the request meant src/parser.py (the task read it;")
    # what it changed is what it worked on: the files it only read are not its pick
    assert said_after(workspace, "x", changed=["config.toml"], read=["src/parser.py"]) == []


def test_nothing_is_said_where_nothing_was_picked_or_the_request_said(workspace):
    assert said_after(workspace, "fix it", read=["src/parser.py", "tools/parser.py"]) == []
    assert said_after(workspace, "fix src/parser.py", changed=["src/parser.py"]) == []
    # stated before the task already: the reference's own assumption line says it
    assert said_after(workspace, "simplify the parser", changed=["src/parser.py"]) == []
    # a name five files share is the layout's (util.py in each package), not a component
    assert said_after(workspace, "tidy up", changed=["pkg1/util.py"]) == []
    # a new file, a path from outside, one without a namesake: no pick among files
    for path in ("lib/parser.py", "../tools/parser.py", "/etc/passwd", "config.toml"):
        assert said_after(workspace, "add it", changed=[path]) == [], path


def test_what_is_said_after_a_task_is_bounded(tmp_path):
    for n in range(6):
        for folder in ("a", "b"):
            (tmp_path / folder).mkdir(exist_ok=True)
            (tmp_path / folder / f"m{n}.py").write_text("x = 1\n")
    index = WorkspaceIndex.build(tmp_path)
    changed = [f"a/m{n}.py" for n in range(6)]
    assert len(said_after(index, "refactor", changed=changed)) == 3
    assert len(said_after(index, "refactor", changed=changed, limit=5)) == 5
