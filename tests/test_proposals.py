"""Proposals: hunks, apply whole or by hunk, stale bases, reject, undo."""

from __future__ import annotations

import pytest

from talos_ls.edits.proposals import ProposalBook, ProposalError, apply_blocks

BASE = "a\nb\nc\nd\ne\n"
NEW = "a\nB\nc\nd\nE\nf\n"


def test_hunks_and_partial_apply():
    book = ProposalBook()
    p = book.create("x.py", BASE, NEW, version=3, task_id="t1")
    assert [(h.base_start, h.old_lines, h.new_lines) for h in p.hunks] == [
        (1, ("b\n",), ("B\n",)),
        (4, ("e\n",), ("E\n", "f\n")),
    ]
    assert p.text_with([1]) == "a\nb\nc\nd\nE\nf\n"
    assert p.text_with() == NEW and "+B" in p.diff() and p.version == 3
    with pytest.raises(ProposalError, match="no hunk"):
        p.text_with([5])
    text = book.apply(p.id, BASE, hunks=[0])
    assert text == "a\nB\nc\nd\ne\n"
    book.applied(p.id, text, [0])
    assert p.status == "partly_applied" and p.applied_hunks == (0,)
    (rest,) = p.hunks  # what is left, against the file as it now is
    assert (rest.base_start, rest.old_lines, rest.new_lines) == (4, ("e\n",), ("E\n", "f\n"))
    final = book.apply(p.id, text)
    assert final == NEW
    book.applied(p.id, final, None)
    assert p.status == "applied"
    assert book.undo(p.id, NEW) == BASE  # the file before the first application


def test_stale_base_is_never_applied():
    book = ProposalBook()
    p = book.create("x.py", BASE, NEW)
    q = book.create("y.py", "1\n", "2\n")
    assert book.base_changed("x.py", BASE) == []  # unchanged
    assert book.base_changed("x.py", BASE + "person's line\n") == [p]
    assert p.status == "stale" and q.status == "pending"
    with pytest.raises(ProposalError, match="stale"):
        book.apply(p.id, BASE + "person's line\n")
    r = book.create("x.py", BASE, NEW)
    with pytest.raises(ProposalError, match="changed since"):
        book.apply(r.id, "something else\n")
    assert r.status == "stale"


def test_reject_and_undo():
    book = ProposalBook()
    p = book.create("x.py", BASE, NEW)
    assert book.reject(p.id).status == "rejected"
    with pytest.raises(ProposalError, match="rejected"):
        book.apply(p.id, BASE)
    q = book.create("x.py", BASE, NEW)
    book.applied(q.id, book.apply(q.id, BASE), None)
    with pytest.raises(ProposalError, match=r"changed after .* \(line 7\);.* left as it is"):
        book.undo(q.id, NEW + "edited later\n")
    with pytest.raises(ProposalError, match=r"\(lines 1-2, 6\)"):
        book.undo(q.id, "x\ny\nc\nd\nE\ng\n")
    assert book.undo(q.id, NEW) == BASE and q.status == "undone"
    with pytest.raises(ProposalError, match="undone"):
        book.undo(q.id, NEW)
    with pytest.raises(ProposalError, match="no proposal"):
        book.get("p-nope")
    with pytest.raises(ProposalError, match="the same as the file"):
        book.create("x.py", BASE, BASE)


def test_search_replace_blocks():
    assert apply_blocks(BASE, [("b\n", "B\n"), ("e\n", "E\nf\n")]) == NEW
    with pytest.raises(ProposalError, match="block 1: the search text does not occur"):
        apply_blocks(BASE, [("zz", "y")], "x.py")
    with pytest.raises(ProposalError, match="occurs 2 times"):
        apply_blocks("x\nx\n", [("x", "y")])
    with pytest.raises(ProposalError, match="empty"):
        apply_blocks(BASE, [("", "y")])


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_undo_after_hunks_applied_one_by_one_restores_the_file_the_proposal_was_made_on(
    tmp_path, newline
):
    from talos_ls.store import open_store

    base, new = BASE.replace("\n", newline), NEW.replace("\n", newline)
    store = open_store("sqlite:///" + str(tmp_path / "t.db"))
    book = ProposalBook(store, "a1")
    p = book.create("x.py", base, new)
    first = book.apply(p.id, base, hunks=[1])
    book.applied(p.id, first, [1])
    # Another server (the CLI after the editor) applies the rest from the store.
    again = ProposalBook(store, "a1")
    second = again.apply(p.id, first)
    assert second == new
    again.applied(p.id, second, None)
    assert ProposalBook(store, "a1").undo(p.id, new) == base
    with pytest.raises(ProposalError, match="undone"):
        again.undo(p.id, new)
    store.close()


def test_a_hunk_applied_by_another_server_moves_the_base_and_is_not_taken_for_staleness(tmp_path):
    """Two windows on one store: the first applies a hunk and writes the file; the second's
    watcher sees the write before its poll reloads the proposal. The new text is the proposal's
    new base, not a change by the person: it must stay open, and the rest still applies."""
    from talos_ls.store import open_store

    store = open_store("sqlite:///" + str(tmp_path / "t.db"))
    first, second = ProposalBook(store, "a1"), ProposalBook(store, "a1")
    p = first.create("x.py", BASE, NEW)
    assert second.get(p.id).status == "pending"  # the second holds it, with the old base
    written = first.apply(p.id, BASE, hunks=[0])
    first.applied(p.id, written, [0])
    assert second.base_changed("x.py", written) == []
    assert second.get(p.id).status == "partly_applied" and second.moved == {p.id}
    assert second.apply(p.id, written) == NEW  # the rest, on the base as it now is
    assert second.base_changed("x.py", written + "typed\n") == [second.get(p.id)]  # a real edit
    store.close()
