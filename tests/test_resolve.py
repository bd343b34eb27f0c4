"""Reference resolution over a real workspace directory."""

from __future__ import annotations

import pytest

from talos_ls.memory.resolve import WorkspaceIndex, resolve


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
    assert set(ref) == {"surface", "start", "end", "kind", "status", "temporal_role",
                        "resolved_text", "resolved_epoch", "assumption", "candidates",
                        "question"}  # fmt: skip
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
