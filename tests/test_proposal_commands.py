"""`talos proposals`, `talos apply`, `talos reject`, `talos undo`: the same proposals the
editors see, from the terminal, through the same store and the same atomic claims."""

from __future__ import annotations

import json

import pytest

from talos_ls.cli import main
from talos_ls.edits.proposals import ProposalBook
from talos_ls.store import open_store

BASE = "def a():\n    return 1\n\n\ndef b():\n    return 2\n"
NEW = BASE.replace("return 1", "return 10").replace("return 2", "return 20")


@pytest.fixture
def setup(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "app.py").write_text(BASE)
    url = "sqlite:///" + str(tmp_path / "talos.db")
    store = open_store(url)
    proposal = ProposalBook(store, str(ws.resolve())).create("app.py", BASE, NEW, task_id="t1")
    store.close()

    def talos(*argv):
        return main(["--store", url, *argv, "--workspace", str(ws)])

    return ws, proposal.id, talos


def test_list_apply_one_hunk_then_the_rest_then_undo(setup, capsys):
    ws, pid, talos = setup
    assert talos("proposals", "--json") == 0
    (listed,) = json.loads(capsys.readouterr().out)
    assert (listed["id"], listed["status"], listed["hunks"]) == (pid, "pending", 2)
    assert talos("apply", pid, "--hunk", "2") == 0
    assert "1 hunk(s) left" in capsys.readouterr().out
    assert (ws / "app.py").read_text() == BASE.replace("return 2", "return 20")
    assert talos("apply", pid) == 0
    assert (ws / "app.py").read_text() == NEW
    assert talos("apply", pid) == 1  # once only
    assert "not pending" in capsys.readouterr().err
    capsys.readouterr()
    assert talos("undo") == 0  # both applications: the file the proposal was made on
    assert (ws / "app.py").read_bytes() == BASE.encode()
    assert "back as it was" in capsys.readouterr().out


def test_an_undo_over_the_persons_edit_names_the_lines_and_leaves_the_file(setup, capsys):
    ws, pid, talos = setup
    assert talos("apply", pid, "--hunk", "1") == 0
    assert talos("apply", pid) == 0
    edited = NEW.replace("def b():", "def b():  # mine")
    (ws / "app.py").write_text(edited)
    capsys.readouterr()
    assert talos("undo", pid) == 1
    err = capsys.readouterr().err
    assert "(line 5)" in err and "left as it is" in err
    assert (ws / "app.py").read_text() == edited


def test_an_undo_after_one_hunk_and_the_rest_gone_stale_names_the_lines_or_restores(setup, capsys):
    """One hunk applied, then the person edits: the rest turns stale, yet the hunk is still
    applied. Undo says which lines changed (not "not applied") and leaves the file; once the
    edit is gone, undo puts back the file the proposal was made on."""
    ws, pid, talos = setup
    assert talos("apply", pid, "--hunk", "1") == 0
    hunk_1 = (ws / "app.py").read_text()
    (ws / "app.py").write_text(hunk_1 + "# mine\n")
    assert talos("apply", pid) == 1  # refused: the rest is stale now
    capsys.readouterr()
    assert talos("undo") == 1
    err = capsys.readouterr().err
    assert "(line 7)" in err and "left as it is" in err and "not applied" not in err, err
    assert (ws / "app.py").read_text() == hunk_1 + "# mine\n"
    (ws / "app.py").write_text(hunk_1)  # the person's edit undone
    assert talos("undo") == 0
    assert (ws / "app.py").read_bytes() == BASE.encode()
    assert "back as it was" in capsys.readouterr().out


def test_an_undo_after_one_hunk_and_the_rest_rejected_restores_the_file(setup, capsys):
    ws, pid, talos = setup
    assert talos("apply", pid, "--hunk", "2") == 0
    assert talos("reject", pid) == 0
    capsys.readouterr()
    assert talos("undo", pid) == 0
    assert (ws / "app.py").read_bytes() == BASE.encode()
    assert "back as it was" in capsys.readouterr().out


def test_a_stale_proposal_is_refused_and_said_so(setup, capsys):
    ws, pid, talos = setup
    (ws / "app.py").write_text(BASE + "# mine\n")
    assert talos("apply", pid) == 1
    assert "changed since proposal" in capsys.readouterr().err
    assert (ws / "app.py").read_text() == BASE + "# mine\n"
    assert talos("proposals") == 0
    assert f"{pid}  stale" in capsys.readouterr().out


def test_reject_and_nothing_to_undo(setup, capsys):
    ws, pid, talos = setup
    assert talos("reject", pid) == 0
    assert talos("proposals") == 0
    assert "no proposal to review" in capsys.readouterr().out
    assert talos("undo") == 1
    assert "nothing to undo" in capsys.readouterr().err
    assert talos("apply", "p-unknown") == 1
    assert (ws / "app.py").read_text() == BASE


def test_a_file_that_is_not_utf8_is_refused_not_written_back_with_its_bytes_replaced(
    tmp_path, capsys
):
    """The agent read it with its bad bytes replaced and proposed on that text: applying it
    (from the CLI as from an editor, one path) would write the replacement characters over
    the bytes it never touched. It is refused, and the file is left exactly as it was."""
    ws = tmp_path / "ws"
    ws.mkdir()
    raw = b"x = 1\n# caf\xe9 latin-1\n"
    (ws / "legacy.py").write_bytes(raw)
    read = raw.decode("utf-8", errors="replace")
    url = "sqlite:///" + str(tmp_path / "talos.db")
    store = open_store(url)
    book = ProposalBook(store, str(ws.resolve()))
    proposal = book.create("legacy.py", read, read.replace("x = 1", "x = 2"))
    store.close()
    assert main(["--store", url, "apply", proposal.id, "--workspace", str(ws)]) == 1
    assert "legacy.py is not UTF-8 text" in capsys.readouterr().err
    assert (ws / "legacy.py").read_bytes() == raw
    assert main(["--store", url, "proposals", "--workspace", str(ws)]) == 0
    assert f"{proposal.id}  pending" in capsys.readouterr().out  # not claimed: still to review
