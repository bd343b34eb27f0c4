"""Reference resolution: what "the parser" or `load_config()` in a request points at.

`resolve` finds definite references in a request, in a workspace's `WorkspaceIndex` (`index`):
- "the X", "that X", "this X" (optionally followed by file, module, test, function, class,
  script, config): X is matched against file stems and symbol names;
- `name()`: matched against symbol names.
One match resolves the reference; two to four make an *evidence gap* with a question naming
them (the question queue asks it when the budget and the moment allow); more than four are
*indeterminate* (too vague to ask about usefully). A phrase that matches nothing in the
workspace ("the bug", "the same") is not a reference to it and is not recorded. Offsets are
character offsets into the original text. The index may still be being built: resolution
uses what it holds, and a record made while it was incomplete says so (`partial`), as does the
note `evidence_notes` gives the task's prompt.

Before a reference with several candidates becomes a question, the request itself and its
surroundings (`Evidence`) are weighed, strongest first, and the first that names any candidate
decides:
0. the request ("request"): its words name one candidate's file ("fix the parser in
   tools/parser.py", "... in tools.parser"); then the person's earlier answer to a question
   about the same words ("earlier answer");
1. the active document and the selection ("active document", "selection"): the file the
   person is in is one candidate's file, or the selected text names one (a workspace path,
   or a dotted module such as `tools.parser`);
2. the diagnostics in range ("diagnostic"): their messages name one candidate's file;
3. the files touched in the last turns ("recently touched"): by the agent's tools or the
   person's edits, they include one candidate's file.
Exactly one candidate named at a level resolves the reference (status "resolved", no
question) and its `evidence` says which rule decided and on which path; two or more named at
a level mean the evidence is itself ambiguous: the reference stays a gap and is asked about
(its `evidence` says what conflicted), lower levels unheard. Paths in the evidence are text
from outside (an editor, a linter, a model's tool call): one is only ever compared with the
candidates' paths, after normalizing; one outside the workspace (absolute elsewhere, `..`)
names nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import unquote

from ..text import normalize_text
from .index import WorkspaceIndex, split_name

logger = logging.getLogger(__name__)

GAP_MIN, GAP_MAX = 2, 4
QUESTION_MAX_CHARS = 200
_HINTS = "file|module|test|tests|function|class|script|config|package"
_DEFINITE = re.compile(
    rf"\b(?:the|that|this)\s+([A-Za-z_][\w.-]*)(?:\s+({_HINTS}))?\b", re.IGNORECASE
)
_CALL = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\(\)")
# Nouns too generic to point at one thing in a workspace, even when a file happens to match.
_GENERIC = frozenset({"code", "file", "bug", "same", "following", "way", "project", "repo"})


@dataclass
class ResolutionRecord:
    """What `resolve` found in one request: the shape `propose_from_resolution` reads."""

    agent_id: str
    key: str
    turn: int
    references_json: str
    status: str
    # The request named something to look up while the index was incomplete: a reference may
    # have more candidates than found, or be one where none was found.
    partial: bool = False

    @property
    def references(self) -> list[dict]:
        return json.loads(self.references_json)


_STATUS_ORDER = ("resolved", "assumed", "evidence_gap", "indeterminate")

# The evidence rules, strongest first, as the resolution record names them.
REQUEST, ANSWERED = "request", "earlier answer"
ACTIVE_DOCUMENT, SELECTION = "active document", "selection"
DIAGNOSTIC, RECENTLY_TOUCHED = "diagnostic", "recently touched"
_EVIDENCE_TEXT_CHARS = 20_000  # of a selection or a diagnostic: past this, ignored
_EVIDENCE_ITEMS = 50  # diagnostics and touched files looked at
_PATH_MAX = 4096  # a longer token is no path
_DOTTED_MAX = 32  # nor a dotted name with more parts
_TOKEN = re.compile(r"[^\s'\"`()<>\[\]{},;|=]+")
_SYMBOL_CANDIDATE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*) in (.+)")


@dataclass(frozen=True)
class Evidence:
    """What surrounds a request, as `resolve` weighs it: all of it untrusted text."""

    active: str | None = None  # the active document, relative to the workspace
    selection: str = ""  # the selected text
    diagnostics: tuple[str, ...] = ()  # the messages of the diagnostics in range
    touched: tuple[str, ...] = ()  # files touched in the last turns, most recent first
    # The person's earlier answers to "which do you mean": (the question, the chosen label),
    # most recent first.
    answers: tuple[tuple[str, str], ...] = ()


def workspace_path(text: str, root: str) -> str | None:
    """`text` (a path as an editor, a linter or a model wrote it: relative, absolute, a
    `file://` URI, with `:line:col`) as a normalized path relative to `root`; None when it is
    not a path inside `root`."""
    if len(text) > _PATH_MAX:
        return None
    t = text.strip().replace("\\", "/")
    if t.startswith("file://"):
        t = unquote(t[len("file://") :])
    t = t.rstrip(":")
    for _ in range(3):  # path:12:5 (a regular expression would backtrack on ":1:1:1...x")
        head, colon, tail = t.rpartition(":")
        if not (colon and tail.isdigit()):
            break
        t = head
    t = t.rstrip(".:")
    if not t or "\0" in t:
        return None
    t = posixpath.normpath(t)
    if t.startswith("/"):
        prefix = root.rstrip("/") + "/"
        if not t.startswith(prefix):
            return None
        t = t[len(prefix) :]
    if t in ("", ".", "..") or t.startswith(("../", "/")):
        return None
    return t


def _named(text: str, root: str) -> tuple[set[str], set[str]]:
    """The workspace paths and the dotted names (with each dotted prefix: `a.b.c` gives `a.b`)
    that `text` mentions."""
    paths: set[str] = set()
    dotted: set[str] = set()
    for token in _TOKEN.findall(text[:_EVIDENCE_TEXT_CHARS]):
        token = token.rstrip("?!")  # prose: "... or tools/parser.py?"
        rel = workspace_path(token, root)
        if rel is not None:
            paths.add(rel)
        parts = token.strip(".:").split(".", _DOTTED_MAX)
        if 1 < len(parts) <= _DOTTED_MAX and all(p.isidentifier() for p in parts):
            dotted.update(".".join(parts[:n]) for n in range(2, len(parts) + 1))
    return paths, dotted


def _candidate_file(candidate: str, known: set[str]) -> str:
    """The file a candidate is in: the candidate itself, or for "name in path" the path."""
    if candidate in known:
        return candidate
    match = _SYMBOL_CANDIDATE.fullmatch(candidate)
    return match.group(2) if match else candidate


def _module(rel: str) -> str | None:
    """`tools/parser.py` -> `tools.parser`; None for a file at the root or an odd name (a
    root file's bare name is too common a word to count as naming it)."""
    parent, _, name = rel.rpartition("/")
    parts = [*parent.split("/"), split_name(name)[0]] if parent else []
    if len(parts) < 2 or not all(p.isidentifier() for p in parts):
        return None
    return ".".join(parts)


def _mentioned(files: dict[str, str], texts: Iterable[str], root: str) -> dict[str, int]:
    """Candidate -> the index of the first of `texts` that names its file."""
    found: dict[str, int] = {}
    for i, text in enumerate(texts):
        paths, dotted = _named(text, root)
        for candidate, rel in files.items():
            if candidate in found:
                continue
            module = _module(rel)
            if rel in paths or (module is not None and module in dotted):
                found[candidate] = i
    return found


def asks_about(question: str, surface: str) -> bool:
    """`question` is about `surface`: its words appear, as whole words, in the question (every
    referent question quotes the words it asks about)."""
    return f" {normalize_text(surface)} " in f" {normalize_text(question)} "


def _weigh(
    candidates: list[str], index: WorkspaceIndex, evidence: Evidence, request: str, surface: str
) -> dict | None:
    """The evidence record for a reference with several candidates: which rule decided and
    on what ("decided": True, "resolved_text"), or which rule named several ("decided":
    False); None when nothing in the request or the evidence names any candidate."""
    root = str(index.root)
    known = {c for c in candidates if index.has_file(c)}
    files = {c: _candidate_file(c, known) for c in candidates}

    def verdict(rule: str, named: list[str], detail: dict) -> dict:
        if len(named) == 1:
            return {
                "rule": rule,
                "decided": True,
                "resolved_text": named[0],
                "path": files[named[0]],
                **detail,
            }
        return {"rule": rule, "decided": False, "candidates": named}

    # 0. the request itself ("fix the parser in tools/parser.py")
    named = list(_mentioned(files, [request], root))
    if named:
        return verdict(REQUEST, named, {})
    # 1. the active document and the selection (weighed after an earlier answer, below)
    active = workspace_path(evidence.active, root) if evidence.active else None
    by_active = [c for c in candidates if active is not None and files[c] == active]
    by_selection = list(_mentioned(files, [evidence.selection], root) if evidence.selection else ())
    named = list(dict.fromkeys(by_active + by_selection))
    rule = ACTIVE_DOCUMENT if by_active else SELECTION
    # 0b. what the person answered when asked about the same words: it settles them, unless
    # what they look at now names another one, which is not settled silently either way
    for question, label in evidence.answers[:_EVIDENCE_ITEMS]:
        chosen = [c for c in candidates if label in (c, files[c])]
        if chosen and asks_about(str(question), surface):
            if len(named) == 1 and named[0] != chosen[0]:
                return {
                    "rule": ANSWERED,
                    "decided": False,
                    "candidates": [chosen[0], named[0]],
                    "against": rule,
                }
            return verdict(ANSWERED, chosen[:1], {})
    if named:
        return verdict(rule, named, {})
    # 2. the diagnostics in range
    diagnostics = [str(d) for d in evidence.diagnostics[:_EVIDENCE_ITEMS]]
    by_diagnostic = _mentioned(files, diagnostics, root)
    if by_diagnostic:
        named = list(by_diagnostic)
        first = diagnostics[by_diagnostic[named[0]]][:200] if len(named) == 1 else ""
        first = first.encode("utf-8", "replace").decode()  # no lone surrogate in the record
        return verdict(DIAGNOSTIC, named, {"diagnostic": first})
    # 3. the files touched in the last turns
    touched = {workspace_path(str(t), root) for t in evidence.touched[:_EVIDENCE_ITEMS]}
    named = [c for c in candidates if files[c] in touched]
    if named:
        return verdict(RECENTLY_TOUCHED, named, {})
    return None


def _question(surface: str, candidates: list[str], weighed: dict | None = None) -> str:
    names = ", ".join(candidates[:-1]) + " or " + candidates[-1]
    question = f"Which do you mean by {surface!r}: {names}?"
    if weighed is not None and "against" in weighed:  # an answer, and the editor now
        said, now = weighed["candidates"]
        question = (
            f"You said {surface!r} means {said}, but {_NOW[weighed['against']].format(now)}. "
            "Which do you mean now?"
        )
    if len(question) > QUESTION_MAX_CHARS:
        question = f"Which do you mean by {surface!r}? There are {len(candidates)} candidates."
    return question


def _reference(
    surface: str, start: int, end: int, candidates: list[str], weighed: dict | None = None
) -> dict:
    if len(candidates) == 1 or (weighed is not None and weighed["decided"]):
        status = "resolved"
    elif GAP_MIN <= len(candidates) <= GAP_MAX:
        status = "evidence_gap"
    else:
        status = "indeterminate"
    if status == "resolved":
        resolved = weighed["resolved_text"] if weighed is not None else candidates[0]
        shown = candidates[: GAP_MAX + 1]
        if resolved not in shown:
            shown = [resolved, *shown[:GAP_MAX]]
    else:
        resolved, shown = None, candidates[: GAP_MAX + 1]
    return {
        "surface": surface,
        "start": start,
        "end": end,
        "kind": "definite_reference",
        "status": status,
        "temporal_role": "none",
        "resolved_text": resolved,
        "resolved_epoch": None,
        "assumption": None,
        "candidates": candidates if status == "evidence_gap" else shown,
        "question": _question(surface, candidates, weighed) if status == "evidence_gap" else None,
        "evidence": weighed,
    }


def resolve(
    agent_id: str, turn: int, text: str, index: WorkspaceIndex, evidence: Evidence | None = None
) -> ResolutionRecord:
    """The references in `text` that point into the workspace, with their status; a reference
    with several candidates is first weighed against the rest of `text` and `evidence` (see
    docs/memory.md)."""
    refs: list[dict] = []
    taken: list[tuple[int, int]] = []
    complete = index.complete.is_set()  # before the lookups: what they saw was at least this
    looked = False

    def add(surface: str, start: int, end: int, candidates: list[str]) -> None:
        weighed = None
        if len(candidates) > 1:
            try:
                weighed = _weigh(candidates, index, evidence or Evidence(), text, surface)
            except Exception:  # odd evidence must not cost the turn: ask instead
                logger.exception("the editor evidence could not be weighed")
        refs.append(_reference(surface, start, end, candidates, weighed))

    for match in _CALL.finditer(text):
        looked = True
        candidates = index.match_symbol(match.group(1))
        if candidates:
            add(match.group(0), match.start(), match.end(), candidates)
            taken.append(match.span())
    for match in _DEFINITE.finditer(text):
        noun, hint = match.group(1), (match.group(2) or "").lower() or None
        if noun.lower() in _GENERIC or any(s < match.end() and match.start() < e for s, e in taken):
            continue
        looked = True
        candidates = index.match_noun(noun, hint)
        if candidates:
            add(match.group(0), match.start(), match.end(), candidates)
    refs.sort(key=lambda r: r["start"])
    worst = max((_STATUS_ORDER.index(r["status"]) for r in refs), default=0)
    digest = hashlib.sha1(f"{agent_id}\0{turn}\0{text}".encode()).hexdigest()[:16]
    return ResolutionRecord(
        agent_id=agent_id,
        key=f"res:{turn}:{digest}",
        turn=turn,
        references_json=json.dumps(refs, ensure_ascii=False),
        status=_STATUS_ORDER[worst],
        partial=looked and not complete,
    )


# What the editor says now, against an earlier answer.
_NOW = {ACTIVE_DOCUMENT: "{} is the file open now", SELECTION: "the selection names {}"}
_WHY = {
    REQUEST: "the request names it",
    ANSWERED: "you said so when asked",
    ACTIVE_DOCUMENT: "it is the active document",
    SELECTION: "the selection names it",
    DIAGNOSTIC: "a diagnostic in range names it",
    RECENTLY_TOUCHED: "it is the one of them touched in the last turns",
}


def evidence_notes(record: ResolutionRecord) -> list[str]:
    """One line per reference with several candidates, for the task's prompt: what the evidence
    took it to mean and why, or that nothing decided it (a question may be on its way, or the
    budget is closed) and that an assumption must be said, so the model neither guesses
    silently nor leaves the person unaware of what it assumed; and one when the workspace
    index was incomplete (the model would otherwise take a missing file for none)."""
    notes = []
    if record.partial:
        notes.append(
            "The workspace index was still being built when this request was read: the files "
            "and symbols it names were looked up in part of the workspace only."
        )
    for ref in record.references:
        weighed, status = ref.get("evidence"), ref.get("status")
        if status == "resolved" and weighed and weighed.get("decided"):
            others = [c for c in ref["candidates"] if c != ref["resolved_text"]]
            notes.append(
                f"{ref['surface']!r} is taken to mean {ref['resolved_text']} "
                f"({_WHY.get(weighed['rule'], weighed['rule'])}), "
                f"not {' or '.join(others)}."
            )
        elif weighed and "against" in weighed:
            said, now = weighed["candidates"]
            notes.append(
                f"{ref['surface']!r} is taken to mean {said} (you said so when asked), though "
                f"{_NOW[weighed['against']].format(now)}: say in your reply that you "
                f"took {said}, not {now}, so the person can correct it."
            )
        elif status in ("evidence_gap", "indeterminate"):
            names = ref["candidates"][:GAP_MAX]
            if status == "evidence_gap":  # two to GAP_MAX candidates
                could = ", ".join(names[:-1]) + " or " + names[-1]
            else:
                could = f"many things, among them {', '.join(names)}"
            notes.append(
                f"{ref['surface']!r} is ambiguous: it could mean {could}, and nothing in the "
                "request or the editor decides it. Ask, or if you go on, say in your reply "
                "which you assumed and why, and which you did not."
            )
    return notes
