"""The workspace sandbox, against a real directory tree with real symlinks."""

from __future__ import annotations

import os

import pytest

from talos_ls.agent.workspace import SandboxError, Workspace, grep


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("def main():\n    return 1\n")
    (root / "build").mkdir()
    (root / "build" / "out.py").write_text("def main(): pass\n")
    (root / ".gitignore").write_text("build/\n*.log\n!keep.log\n")
    (root / "debug.log").write_text("main\n")
    (root / "keep.log").write_text("main\n")
    (root / ".env").write_text("OPENAI_API_KEY=sk-secret\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    (tmp_path / "outside.txt").write_text("secret\n")
    os.symlink(tmp_path / "outside.txt", root / "escape.txt")
    os.symlink(tmp_path, root / "up")
    os.symlink(root / "src" / "app.py", root / "inside-link.py")
    return Workspace(root)


@pytest.mark.parametrize(
    "path, words",
    [
        ("../outside.txt", "outside the workspace"),
        ("src/../../outside.txt", "outside the workspace"),
        ("/etc/passwd", "outside the workspace"),
        ("escape.txt", "symlink"),
        ("up/outside.txt", "outside the workspace"),
        ("", "invalid path"),
        ("a\0b", "invalid path"),
        (".env", "secrets"),
    ],
)
def test_reads_that_leave_or_leak_are_refused(ws, path, words):
    with pytest.raises(SandboxError, match=words):
        ws.read_text(path)


@pytest.mark.parametrize("path", [".git/config", ".git/hooks/pre-commit", ".talos/permissions.json",
                                  ".env", ".env.local", "src/.env.production"])  # fmt: skip
def test_protected_paths_are_never_written(ws, path):
    with pytest.raises(SandboxError, match="protected"):
        ws.write_text(path, "x")
    assert (ws.root / ".git" / "config").read_text() == "[core]\n"


def test_inside_paths_work(ws):
    assert ws.read_text("src/../src/app.py").startswith("def main")
    assert ws.read_text(str(ws.root / "src" / "app.py")).startswith("def main")  # absolute, inside
    assert ws.read_text("inside-link.py").startswith("def main")  # a symlink that stays inside
    ws.write_text("src/new/mod.py", "x = 1\n")
    assert (ws.root / "src" / "new" / "mod.py").read_text() == "x = 1\n"
    assert ws.read_lines("src/app.py", 2, 2) == ["    return 1\n"]


def test_gitignore_is_honoured_for_listing_and_search(ws):
    files = list(ws.walk())
    assert "src/app.py" in files and "keep.log" in files
    assert not any(f.startswith(("build/", ".git/")) for f in files)
    assert "debug.log" not in files
    hits = grep(ws, r"def main")
    assert hits == ["inside-link.py:1: def main():", "src/app.py:1: def main():"]
    assert not any("sk-secret" in h for h in grep(ws, "sk-"))  # .env is never searched
    with pytest.raises(SandboxError, match="invalid regex"):
        grep(ws, "(")
