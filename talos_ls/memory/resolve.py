"""Reference resolution: what "the parser" or `load_config()` in a request points at.

`resolve` finds definite references in a request, in a workspace's `WorkspaceIndex` (`index`):
- "the X", "that X", "this X" (optionally followed by file, module, test, function, class,
  script, config): X is matched against file stems and symbol names (symbols only when no
  file matches; then, with no hint, also the files of the component X stands for that hold
  none of them: "the parse error" may mean parse() in src/parser.py or tools/parser.py);
- `name()`: matched against symbol names;
- the workspace's own names wherever else the request mentions them, in any language (see
  "Names in any language" below): "パーサーを直して", "修复parser里的bug", "Repariere den
  Parser", "corrige le parseur", "arregla el parser".
One match resolves the reference; two to four make an *evidence gap* with a question naming
them (the question queue asks it when the budget and the moment allow); more than four are
*indeterminate* (too vague to ask about usefully). A phrase that matches nothing in the
workspace ("the bug", "the same") is not a reference to it and is not recorded. Offsets are
character offsets into the original text. The index may still be being built: resolution
uses what it holds, and a record made while it was incomplete says so (`partial`), as does the
note `evidence_notes` gives the task's prompt.

Names in any language. A mention found this way is a reference just as "the X" is (the same
statuses, question and note), unless it could mean only what a reference found before in the
request could (one ambiguity, one question). Looked for, by dictionary lookups of the
index's file stems and directory names (`match_names`), never a pass over the files:
- in a request with kana, ideographs or hangul (Japanese, Chinese, Korean: no articles, no
  spaces), each Latin word, spaced or not ("parserを直して", "修复 parser 里的 bug"; full-width
  letters too), and each file name ("parser.pyのバグ"): a file stem (or with a plural -s) or
  a directory name (a candidate "docs/");
- a word after a determiner: English the/that/this (after "the X" matched nothing as above:
  directories, short forms), German der/die/das/den/dem/des, im/am/vom/zum/zur/beim/ins,
  dieser...; French le/la/les/l'/du/au/aux/ce/cet/cette/ces; Spanish el/la/los/las/lo/del/al,
  este/ese...: "den Parser", "le parser", "el parser", "the parser.py". The surface includes
  the determiner ("den Parser"), as "the parser" does;
- a word written as code anywhere (snake_case, camelCase, in backticks): a stem, a
  directory, else a symbol of that exact name (at most four such scans a request);
- where no name matches the whole word (a code-shaped one excepted), for such a word and for
  any capitalized one (German nouns): a French or Spanish agent noun taken to the English one
  (parseur, serveur, servidor, compilador, contrôleur, l'erreur -> parser, server, compiler,
  controller, error); the short form of a noun made from a verb (Dokumentation,
  documentation, documentación, Konfiguration -> docs, config: its beginnings from three
  letters to half of it, the shortest first, German k and z spelled c); a name of 5+ letters
  at the start or end of a closed compound with 4+ other letters that are no derivational
  ending (Parsermodul, Konfigurationsparser; not serverless, documentation; not after an
  English determiner); accents are dropped;
- where none of the above found a name: the terms of `glossary` (translations and English
  synonyms of a program's usual parts: el analizador, l'analyseur, 解析器, Zwischenspeicher,
  "the grammar code", "the tokenizer"), under the same conditions (after a determiner,
  capitalized, or in kana or ideographs; an English synonym after "the" and as a part: an
  agent noun or followed by code, module, layer, ...), in the request's first 4,000
  characters, the longest term first ("analizador léxico" is the lexer);
- katakana words, read as the English word they spell (`_katakana_pattern`): each mora's
  consonant as English may write it, r and l one, the vowels as English may write them or none
  where katakana adds its own (テスト test), a long mark after an a-column mora the r of -er
  (パーサー parser, サーバー server, ルーター router, ローダー loader, キャッシュ cache,
  スケジューラー scheduler, クライアント client, スキーマ schema, インデックス index); with
  the final mark unwritten too (パーサ); matched with one search over the names; a
  compound's parts (パーサーモジュール) when the whole matches nothing.
Generic words (`_GENERIC`: bug, file, code, ...) and their plurals never match. A bare word
in a request written with spaces ("fix parser", "responses are cached", "Parser reparieren"
with no article) is no reference to ask about: English prose would gain questions from its
ordinary words. But when it (or what an -ed or -ing form is a form of) is the name of two to
four files, it is a *mention* (kind `MENTION`, status "assumed", no question): the prompt
says which the task may take, and the summary what it took (`worked_on`). Not covered, on
purpose: a word that only contains a name or is contained in one ("parse the input" is not
parser.py, "the cached value" not cache.py); and, as no cheap rule reads them: translations
and synonyms the glossary does not hold, other languages' scripts (Cyrillic: парсер), hangul and
half-width katakana, katakana whose English has a silent letter inside
(トークナイザー tokenizer), symbols named in other languages unless written as code, and other
inflections than a plural -s. Katakana is matched on its consonants: two names with the same
ones both match (データ: data, date) and are asked about. A long request is read for its first
200 such words and 16 katakana runs.

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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import unquote

from ..display import visible
from ..text import fold, normalize_text
from . import glossary
from .index import WorkspaceIndex, split_name

logger = logging.getLogger(__name__)

GAP_MIN, GAP_MAX = 2, 4
# A reference's kind when it is a bare word of prose that names two to four files ("fix
# parser"): the prompt says which the task may take, nothing asks, and the summary says
# what the task took (`worked_on`), not what the word might have meant.
MENTION = "mention"
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
# Kana, ideographs, hangul and CJK punctuation: text written without spaces between words.
_CJK_CHARS = (
    "\u1100-\u11ff\u3000-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\U00020000-\U0003ffff"
)
# A path or a dotted name as prose holds one, up to a space, a quote, a bracket, or text
# without spaces ("tools/parser.pyのバグ").
_TOKEN = re.compile(f"[^\\s'\"`()<>\\[\\]{{}},;|={_CJK_CHARS}]+")
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


def _assumption(
    status: str, candidates: list[str], resolved: str | None, weighed: dict | None
) -> dict | None:
    """What the task goes on when the person did not settle a reference with several
    candidates: {"candidate", "why", "not"}, stated in its prompt and its summary
    (`assumptions`) so the person can correct it. None when nothing had to be assumed: one
    candidate, the request naming its file, or the person's answer with nothing against it."""
    if len(candidates) < 2:
        return None
    if status == "resolved":
        assert weighed is not None and resolved is not None
        if weighed["rule"] in (REQUEST, ANSWERED):
            return None
        chosen, why = resolved, _WHY.get(weighed["rule"], weighed["rule"])
    elif weighed is not None and "against" in weighed:  # an answer, and the editor now
        said, now = weighed["candidates"]
        why = f"{_WHY[ANSWERED]}, though {_NOW[weighed['against']].format(now)}"
        return {"candidate": said, "why": why, "not": [now], "more": 0}
    elif weighed is not None:  # several named at one level: the first of them
        chosen = weighed["candidates"][0]
        why = f"the first of those {_NAMED_BY.get(weighed['rule'], weighed['rule'])}"
    else:
        chosen = min(candidates, key=lambda c: (c.count("/"), c))
        why = "nothing in the request or the editor decides it; the one nearest the root"
    others = [c for c in candidates if c != chosen]
    more = max(0, len(others) - GAP_MAX)
    return {"candidate": chosen, "why": why, "not": others[:GAP_MAX], "more": more}


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
        "assumption": _assumption(status, candidates, resolved, weighed),
        "candidates": candidates if status == "evidence_gap" else shown,
        "question": _question(surface, candidates, weighed) if status == "evidence_gap" else None,
        "evidence": weighed,
    }


# ------------------------------------------------------------ names in any language
_CJK = re.compile(f"[{_CJK_CHARS}]")
_W = rf"[^\W{_CJK_CHARS}]"  # a letter, digit or _ of a script written with spaces
_RUN = re.compile(rf"{_W}+(?:[./\\-]{_W}+)*")  # words joined by . / \ -: a path, a file name
_WORD = re.compile(rf"{_W}+")
_CAMEL = re.compile(r"[a-z][A-Z]")
_FILE_SUFFIX = re.compile(r"[A-Za-z0-9]{1,8}")
_SOFT_Z = re.compile(r"z(?=[ei])")  # compiled with the module, not in a task's first turn
_FULLWIDTH = {c: c - 0xFEE0 for c in range(0xFF01, 0xFF5F)}  # ｐａｒｓｅｒ: one char each
# Words that introduce a noun as "the" does; "l" is French l' (before a vowel).
_DETERMINERS_EN = frozenset({"the", "that", "this"})
_DETERMINERS = _DETERMINERS_EN | frozenset(
    (
        "der die das den dem des im am vom zum zur beim ins dieser diese dieses diesen diesem "
        "le la les l du au aux ce cet cette ces "
        "el los las lo del al este esta estos estas ese esa esos esas"
    ).split()
)
_APOSTROPHES = ("'", "\u2019")
_MIN_NAME = 2  # a whole word
_MIN_LOOSE = 4  # a name found by a cognate or an abbreviation
_MIN_PART = 5  # a name inside a closed compound ("Parsermodul")
_MIN_REST = 4  # what the compound has besides the name
# What a word has besides a name when it is a derivative, not a compound: serverless,
# documentation (not document + ation), Konfigurierung.
_DERIVING = ("less", "able", "ible", "ably", "ness", "ment", "like", "wise", "ship", "hood")
_DERIVATIONS = frozenset(
    (
        "ation ition ution ion ions ing ings ung ungen ierung acion icion ity ities itat ism "
        "ismus ist ists ive ively ize ise"
    ).split()
)
# An agent noun in French or Spanish against the English one: parseur, serveur, compilateur,
# servidor, compilador -> parser, server, compiler (a doubled last letter: controller).
_AGENT_WORD = ("ateur", "ador", "edor", "idor", "eur")
_AGENT_NAME = ("er", "or", "ator")
# A noun made from a verb (documentation, Dokumentation, configuración, Konfiguration,
# Authentifizierung): a name it begins with is its short form (docs, config, auth).
_NOMINAL = ("tion", "sion", "cion", "zion", "ung")
# Per request (a pasted log must not cost seconds): code-shaped words looked up as symbols
# (each a scan of every file's names), words looked up, katakana runs read, and spellings
# of katakana tried at once.
_SYMBOL_LOOKUPS, _WORDS, _KATAKANA_RUNS, _KATAKANA_TRIES = 4, 200, 16, 48


def _generic(name: str) -> bool:
    return name in _GENERIC or (name.endswith("s") and name[:-1] in _GENERIC)


def _spellings(key: str) -> tuple[str, ...]:
    """`key`, and with German spelling taken to the Latin one (k -> c, z before e or i -> c:
    Konfiguration, Spezifikation)."""
    latin = _SOFT_Z.sub("c", key.replace("k", "c"))
    return (key,) if latin == key else (key, latin)


def _whole(key: str) -> list[str]:
    return [key, key + "s"]  # as "the X": the noun or its plural


def _cognates(key: str) -> list[str]:
    keys: list[str] = []
    for end in _AGENT_WORD:
        base = key[: -len(end)]
        if key.endswith(end) and len(base) >= 3:
            for stem in (base, base + base[-1]):
                keys.extend(stem + e for e in _AGENT_NAME)
            if base.endswith("is"):  # sérialiseur -> serializer
                keys.extend(base[:-1] + "z" + e for e in _AGENT_NAME)
    return keys


def _derivations(key: str) -> list[str]:
    """The names an English verb form may stand for: the component that does it ("the parsing
    code", "the parse error", "Parsing breaks": parser, parse; "the caching layer": cache,
    cacher; "the loading step": load, loader). Only a bare form or an -ing one: a past
    participle describes what was done to a thing ("the cached value", "the parsed output"),
    not the part of the code that does it."""
    bases = (_bases(key) if key.endswith("ing") else []) or [key]
    forms = [b + ("r" if b.endswith("e") else "er") for b in bases]
    return [k for k in dict.fromkeys([*bases, *forms]) if k != key]


def _components(noun: str, symbols: list[str], index: WorkspaceIndex) -> list[str]:
    """When "the <noun>" found only symbols ("the parse": parse() in src/parser.py), the files
    of the component the word may also stand for that hold none of them (tools/parser.py): a
    reference to either, not to the symbol alone."""
    held = {c.rpartition(" in ")[2] for c in symbols if " in " in c}
    if len(held) < len(symbols):
        return []  # files matched the noun itself
    keys = [k for k in _derivations(fold(noun)) if len(k) >= _MIN_LOOSE and not _generic(k)]
    found = index.match_names(keys)
    return _sorted(r for rels in found.values() for r in rels if r not in held and r[-1] != "/")


def _bases(key: str) -> list[str]:
    """What an English verb form is a form of: cached, caching -> cache; loaded -> load."""
    for end in ("ing", "ed"):
        if key.endswith(end) and len(key) - len(end) >= 3:
            base = key[: -len(end)]
            return [base, base + "e"] + ([base[:-1]] if base[-1] == base[-2] else [])
    return []


def _opens_sentence(text: str, start: int) -> bool:
    """The word at `start` begins the text or a sentence ("Parsing breaks on ...")."""
    before = text[:start].rstrip()
    return not before or before[-1] in ".!?\n:;"


def _abbreviations(key: str) -> list[str]:
    """Short forms of a noun made from a verb: its beginnings of three letters up to half of
    it, the shortest first (documentation: doc, docs, docu, ...; not document)."""
    keys: list[str] = []
    for spelled in _spellings(key):
        if spelled.endswith(_NOMINAL):
            for n in range(3, len(spelled) // 2 + 1):
                keys += [spelled[:n], spelled[:n] + "s"]
    return keys


def _compound_parts(key: str) -> list[str]:
    """Names a closed compound may begin or end with, the longest first: "parsermodul" ->
    "parsermo", ..., "parser", "parse"; then "arsermodul", ... A name must leave at least
    _MIN_REST letters that are not a derivational ending ("serverless", "documentation")."""
    heads = [
        key[:n]
        for n in range(len(key) - _MIN_REST, _MIN_PART - 1, -1)
        if key[n:] not in _DERIVATIONS and not key[n:].startswith(_DERIVING)
    ]
    tails = [key[n:] for n in range(_MIN_REST, len(key) - _MIN_PART + 1)]
    return heads + tails


@dataclass
class _Word:
    """A word of the request that may name something in the workspace, with the names to
    try for it in order of preference: each group (whole word, cognate, abbreviation,
    compound part) is tried only when the ones before found nothing."""

    surface: tuple[int, int]
    groups: list[tuple[list[str], int]]  # the names to try, and the shortest one may find
    code: str | None = None  # a code-shaped word: also looked up as a symbol
    bare: bool = False  # a word of prose: a mention only when it names two to four files


# Katakana, read as the English word it spells: each mora a consonant (as English may spell
# it) and a vowel (as English may spell it, and absent where katakana adds one of its own
# after a consonant: テスト for test); r and l are one; a long-vowel mark after an a-column mora
# is the r of -er/-or/-ar (パーサー parser, サーバー server), after another an optional r
# (ルーター router); a small tsu doubles (nothing to match). So パーサー matches `parser`,
# キャッシュ `cache`, スケジューラー `scheduler`, インデックス `index`, and not `parse`.
_ROWS = {
    "": "アイウエオ",
    "k": "カキクケコ",
    "g": "ガギグゲゴ",
    "s": "サシスセソ",
    "z": "ザジズゼゾ",
    "t": "タチツテト",
    "d": "ダヂヅデド",
    "n": "ナニヌネノ",
    "h": "ハヒフヘホ",
    "b": "バビブベボ",
    "p": "パピプペポ",
    "m": "マミムメモ",
    "y": "ヤ ユ ヨ",
    "r": "ラリルレロ",
    "w": "ワヰ ヱヲ",
}
_KANA = {
    ch: (c, v) for c, row in _ROWS.items() for ch, v in zip(row, "aiueo", strict=True) if ch != " "
}
_KANA.update(
    {
        "シ": ("sh", "i"),
        "チ": ("ch", "i"),
        "ツ": ("ts", "u"),
        "フ": ("f", "u"),
        "ジ": ("j", "i"),
        "ヂ": ("j", "i"),
        "ヅ": ("z", "u"),
        "ヴ": ("v", "u"),
        "ヲ": ("", "o"),
        "ン": ("N", ""),
    }
)
_SMALL_VOWEL = dict(zip("ァィゥェォャュョヮ", "aiueoauoa", strict=True))
_CONSONANT = {
    "": "",
    "k": "(?:ck|k|c(?![eiy])|q|ch)",
    "g": "(?:gg|gh|gu|g)",
    "s": "(?:ss|sc(?=[eiy])|s|c(?=[eiy])|z)",
    "sh": "(?:sch|sh|ch|ssi|ss|si|ti|ci)",
    "z": "(?:zz|z|s)",
    "j": "(?:dg|j|g(?=[eiy])|d|z)",
    "t": "(?:tt|th|t)",
    "ch": "(?:tch|ch|t(?=u))",
    "ts": "(?:ts|tz|t|s|z)",
    "d": "(?:dd|d|th)",
    "n": "(?:nn|kn|gn|n)",
    "N": "(?:n|m)",
    "h": "(?:wh|h)",
    "f": "(?:ff|ph|f)",
    "b": "(?:bb|b|v)",
    "v": "(?:v|b)",
    "p": "(?:pp|p)",
    "m": "(?:mm|m)",
    "y": "y?",
    "r": "(?:rr|ll|wr|r|l)",
    "w": "(?:wh|w)",
    "w?": "(?:wh|w)?",
    "x": "(?:x|(?:ck|k|c|q)[ouwe]*(?:ss|s))",  # クス: index, box
}
_OPTIONAL = ("", "y", "w?")
# The letters English may spell each vowel with: at least one, or (_OPTIONAL_VOWEL) none
# where the vowel may be katakana's own (テスト test, エッジ edge, コード code) or goes with the
# one before (メディア media).
_VOWEL = {
    "a": "[aeiouyw]+",
    "i": "(?:ui|[iey]+)",
    "u": "(?:oo|ou|ew|u|w)",
    "e": "[ae][aeiy]*",
    "o": "[aouw]+",
}
_OPTIONAL_VOWEL = {
    "a": "[aeiouyw]*",
    "i": "(?:ui|[iey]*)",
    "u": "(?:oo|ou|ew|u|w)?",
    "e": "(?:[ae][aeiy]*)?",
    "o": "[aouw]*",
}
# Two vowels English writes as one sound: how (ライ ly, クライアント client, メイン main).
_DIPHTHONGS = {
    "ai": "(?:igh|ie|ai|ay|ei|ey|i|y)",
    "ei": "(?:ai|ay|ei|ey|a|e)",
    "oi": "(?:oi|oy)",
    "au": "(?:ou|ow|au|aw)",
    "ou": "(?:ou|ow|oa|o)",
}
_OWN_VOWEL = {"o": ("t", "d"), "i": ("sh", "ch", "j", "ts")}  # and u after any consonant
_KATAKANA_RUN = re.compile("[\u30a1-\u30fa\u30fc\u31f0-\u31ff]{3,}")  # ・ separates
# The consonants a katakana word needs, at least (エラー error has two: r and the -er), and
# a part of one (a compound such as パーサーモジュール: parts are more often short words).
_KATAKANA_WHOLE, _KATAKANA_PART = 2, 3


def _morae(word: str) -> list[tuple[str, str, int]] | None:
    """(consonant, vowel, offset) per mora of a katakana word; None for one not read."""
    morae: list[tuple[str, str, int]] = []
    for i, ch in enumerate(word):
        if ch in _KANA:
            morae.append((*_KANA[ch], i))
        elif ch == "ー":
            morae.append(("ー", morae[-1][1] if morae else "", i))
        elif ch == "ッ":
            continue
        elif ch in _SMALL_VOWEL and morae and morae[-1][0] not in ("ー", "N"):
            c, v, at = morae[-1]
            if c == "" and v == "u" and ch in "ァィェォ":  # ウィ, ウェ: w
                c = "w?"
            morae[-1] = (c, _SMALL_VOWEL[ch], at)
        else:
            return None
    fused: list[tuple[str, str, int]] = []
    for c, v, at in morae:
        if c == "s" and fused and fused[-1][0] == "k" and fused[-1][1] == "u":
            fused[-1] = ("x", v, fused[-1][2])
        else:
            fused.append((c, v, at))
    return fused


def _katakana_pattern(morae: list[tuple[str, str, int]], least: int) -> str | None:
    """The regular expression of the names a run of morae may spell, or None when it has
    fewer than `least` consonants (too few to say anything)."""
    parts, mandatory, previous = [], 0, ""
    for i, (c, v, _) in enumerate(morae):
        if c == "" and previous + v in _DIPHTHONGS:
            previous = v
            continue  # spelled with the vowel before
        if c == "ー":  # the vowel before it, longer: no letter of its own, or an r
            parts.append("r" if previous == "a" else "r?")
            mandatory += previous == "a"
            continue
        parts.append(_CONSONANT[c])
        mandatory += 2 if c == "x" else c not in _OPTIONAL
        following = morae[i + 1] if i + 1 < len(morae) else ("-", "", 0)
        own = (v == "u" and c not in _OPTIONAL) or c in _OWN_VOWEL.get(v, ())
        if following[0] == "" and v + following[1] in _DIPHTHONGS:
            parts.append(_DIPHTHONGS[v + following[1]])
        elif own and v == "u" and following[0] == "N":  # トークン token, オープン open
            parts.append("[aeouw]*")
        elif v:  # after an i, a vowel alone may be spelled with it (media, client)
            after_i = c == "" and previous == "i"
            parts.append((_OPTIONAL_VOWEL if own or after_i else _VOWEL)[v])
        previous = "N" if c == "N" else v
    if mandatory < least:
        return None
    if morae[-1][0] not in ("ー", "N") and previous == "a":  # パーサ, サーバ: the -er unwritten
        parts.append("(?:[aeiouy]*r)?")
    return "".join(parts) + "[aeiouy]*s?"  # a silent e (cache), a plural


_Run = tuple[int, int, list[tuple[str, str, int]]]  # start, end, morae


def _katakana_runs(text: str, free) -> list[_Run]:
    """Each katakana run of `text` that can be read."""
    runs = []
    for match in _KATAKANA_RUN.finditer(text):
        morae = _morae(match.group()) if free(*match.span()) else None
        if morae:
            runs.append((*match.span(), morae))
            if len(runs) == _KATAKANA_RUNS:
                break
    return runs


def _katakana_tries(
    start: int, end: int, morae: list[tuple[str, str, int]], tier: int
) -> list[tuple[int, int, str]]:
    """(start, end, pattern) to try for a run at a tier: 0 the whole word, 1 each part of a
    compound (パーサーモジュール), both parts 3+ characters."""
    if tier == 0:
        pattern = _katakana_pattern(morae, _KATAKANA_WHOLE)
        return [(start, end, pattern)] if pattern else []
    tries = []
    for cut in range(1, len(morae)):
        head, tail = morae[:cut], morae[cut:]
        at = start + tail[0][2]
        if at - start < 3 or end - at < 3 or tail[0][0] == "ー":
            continue
        for s, e, part in ((start, at, head), (at, end, tail)):
            pattern = _katakana_pattern(part, _KATAKANA_PART)
            if pattern:
                tries.append((s, e, pattern))
    return tries


def _words(text: str, cjk: bool, free) -> tuple[list[_Word], list[tuple[int, int, str]]]:
    """The words of `text` (in scripts written with spaces) that may name something in the
    workspace, and the file names it mentions ((start, end, lowered name): `parser.py`)."""
    words: list[_Word] = []
    files: list[tuple[int, int, str]] = []
    previous, previous_end = "", -1
    bare = 0  # words of prose looked up
    for run in _RUN.finditer(text):
        start, end = run.span()
        raw = run.group()
        gap = text[previous_end:start] if previous_end >= 0 else ""
        determiner = previous in _DETERMINERS and (
            (gap.isspace() and "\n" not in gap) or (previous == "l" and gap in _APOSTROPHES)
        )
        english = previous in _DETERMINERS_EN
        det_start = previous_end - len(previous)
        previous, previous_end = raw.lower(), end
        if "/" in raw or "\\" in raw or not free(start, end):
            continue  # a path: the evidence rule reads it; or a reference found already
        if "." in raw:  # a file name, or a dotted name (the evidence rule reads it)
            head, _, suffix = raw.rpartition(".")
            named = _FILE_SUFFIX.fullmatch(suffix) and any(ch.isalpha() for ch in head)
            if named and (cjk or determiner):
                files.append((det_start if determiner else start, end, raw.lower()))
            continue
        parts = list(_WORD.finditer(raw))
        backticked = text[start - 1 : start] == "`"
        for part in parts:
            word = part.group()
            code = "_" in word or _CAMEL.search(word) is not None or backticked
            capital = word[:1].isupper()
            opening = word.lower().endswith("ing") and _opens_sentence(text, start)
            key = fold(word)
            if _generic(key) or len(key) < _MIN_NAME or key.isdigit():
                continue
            s, e = start + part.start(), start + part.end()
            if not (cjk or determiner or code) and len(key) >= _MIN_LOOSE and bare < _WORDS:
                bare += 1  # "fix parser", "responses are cached too long": said if ambiguous
                words.append(_Word((s, e), [(_whole(key) + _bases(key), _MIN_NAME)], bare=True))
            if not (cjk or determiner or code or capital or opening):
                continue  # a bare word in a sentence with spaces: English prose, mostly
            groups: list[tuple[list[str], int]] = []
            if cjk or determiner or code:
                whole = [k for spelled in _spellings(key) for k in _whole(spelled)]
                groups.append((whole, _MIN_NAME))
            if ((determiner and english) or opening or (capital and not cjk)) and not code:
                groups.append((_derivations(key), _MIN_LOOSE))  # the parsing code: parser
            if not code:  # an identifier is a name as it is: ParserError is no compound
                groups += [(_cognates(key), _MIN_LOOSE), (_abbreviations(key), _MIN_LOOSE)]
                if cjk or capital or (determiner and not english):
                    groups.append((_compound_parts(key), _MIN_PART))
            if determiner and len(parts) == 1:
                s = det_start  # "den Parser", "le parseur": as "the parser"
            words.append(_Word((s, e), groups, word if code else None))
        if len(words) - bare >= _WORDS:
            break
    return words, files


def _sorted(where: Iterable[str]) -> list[str]:
    """Files, then directories, each sorted."""
    return sorted(set(where), key=lambda rel: (rel.endswith("/"), rel))


def _named_in_any_language(
    text: str, index: WorkspaceIndex, taken: list[tuple[int, int]], symbols: set[str]
) -> tuple[list[tuple[int, int, list[str]]], list[tuple[int, int, list[str]]], bool]:
    """(start, end, candidates) for each name of the workspace that `text` mentions outside
    the spans `taken`, in any of the forms the module docstring lists (a code-shaped word is
    looked up as a symbol unless it is in `symbols`: a scan of every file's names); the same
    for the bare words of prose that are the name of two to four files (mentions, said and
    never asked: "fix parser"); and whether anything was looked up."""
    text = text.translate(_FULLWIDTH)  # the same length: offsets hold

    def free(start: int, end: int) -> bool:
        return not any(s < end and start < e for s, e in taken)

    cjk = _CJK.search(text) is not None
    words, files = _words(text, cjk, free)
    katakana = _katakana_runs(text, free) if cjk else []
    terms = _terms(text, cjk, free)
    # A word of prose looked up does not make the lookup partial ("make it faster" names no
    # file however much of the workspace is indexed); a mention it finds is a hint only.
    searched = bool(files or katakana or terms or any(not w.bare for w in words))
    if not (words or files or katakana or terms):
        return [], [], False
    keys = [k for w in words for group, _ in w.groups for k in group]
    names = index.match_names([*keys, *(split_name(name)[0] for *_, name in files)])
    found: list[tuple[int, int, list[str]]] = []
    for start, end, name in files:
        where = [
            r for r in names.get(split_name(name)[0], ()) if r.rpartition("/")[2].lower() == name
        ]
        if where:
            found.append((start, end, where))
    symbols = set(symbols)
    budget = len(symbols) + _SYMBOL_LOOKUPS
    mentions: list[tuple[int, int, list[str]]] = []
    for word in words:
        if any(word.surface == (s, e) for s, e, _ in mentions):
            continue  # said already as a mention
        where = []
        for group, minimum in word.groups:
            hits = [names[k] for k in group if k in names and len(k) >= minimum and not _generic(k)]
            if hits:  # a whole word: all its forms (parser, parsers); else the first name
                where = [r for hit in (hits if minimum == _MIN_NAME else hits[:1]) for r in hit]
                break
        if not where and word.code and word.code not in symbols and len(symbols) < budget:
            symbols.add(word.code)
            where = index.match_symbol(word.code)
        if word.bare:
            files_only = _sorted(r for r in where if not r.endswith("/"))
            if GAP_MIN <= len(files_only) <= GAP_MAX:
                mentions.append((*word.surface, files_only))
        elif where:
            found.append((*word.surface, _sorted(where)))
    found += _katakana_found(katakana, index)
    # The glossary's terms where nothing else was found ("el analizador": parser).
    glossed = index.match_names([name for *_, stands_for in terms for name in stands_for])
    for start, end, stands_for in terms:
        if not any(s < end and start < e for s, e, _ in (*found, *mentions)):
            candidates = _sorted(r for name in stands_for for r in glossed.get(name, ()))
            if candidates:
                found.append((start, end, candidates))
    return found, mentions, searched


_CJK_RUN = re.compile(f"[{_CJK_CHARS}]+")
_TERM_CHARS = 4000  # of a request, read for the glossary's terms (a pasted log is not read)
_TERM_WORDS = re.compile(rf"{_W}+(?:(?:[ \t]+|['\u2019]){_W}+)*")  # no newline, no comma
_WORD_BEFORE = re.compile(rf"({_W}+)([ \t]+|['\u2019])$")  # of the 24 characters before a term
_WORD_AFTER = re.compile(rf"[ \t]+({_W}+)")


def _terms(text: str, cjk: bool, free) -> list[tuple[int, int, tuple[str, ...]]]:
    """(start, end, English names) for the glossary's terms in `text` (`glossary`), under the
    conditions of any other word: in kana or ideographs anywhere; else after a determiner
    (the surface keeps it) or capitalized; an English synonym after "the" and as a part of
    the program ("the grammar code", "the tokenizer"). Dictionary lookups, the longest term
    first, in the first `_TERM_CHARS` characters; at most `_WORDS` terms."""
    found: list[tuple[int, int, tuple[str, ...]]] = []
    text = text[:_TERM_CHARS]
    for run in _CJK_RUN.finditer(text) if cjk else ():
        at, end = run.span()
        while at < end and len(found) < _WORDS:
            if text[at] not in glossary.FIRST:
                at += 1
                continue
            for length in range(min(glossary.MOST_CJK, end - at), 1, -1):
                hit = glossary.lookup(glossary.key(text[at : at + length]))
                if hit and free(at, at + length):
                    found.append((at, at + length, hit[1]))
                    at += length - 1
                    break
            at += 1
    for phrase in _TERM_WORDS.finditer(text):
        words = list(_WORD.finditer(text, *phrase.span()))
        i = 0
        while i < len(words) and len(found) < _WORDS:
            if not glossary.may_begin(fold(words[i].group())):
                i += 1
                continue
            for n in range(min(glossary.MOST_WORDS, len(words) - i), 0, -1):
                start, end = words[i].start(), words[i + n - 1].end()
                hit = glossary.lookup(glossary.key(text[start:end]))
                begins = _term_surface(text, start, end, hit[0], cjk) if hit else None
                if hit and begins is not None and free(start, end):
                    found.append((begins, end, hit[1]))
                    i += n - 1
                    break
            i += 1
    return found


def _term_surface(text: str, start: int, end: int, term: str, cjk: bool) -> int | None:
    """Where a glossary term found at start..end begins as a reference (at its determiner),
    or None when it is no reference by the conditions `_terms` gives."""
    before = _WORD_BEFORE.search(text[max(0, start - 24) : start])
    previous = before.group(1).lower() if before else ""
    determiner = before is not None and (
        previous in _DETERMINERS and (before.group(2).strip() == "" or previous == "l")
    )
    at = start - len(before.group(0)) if before and determiner else start
    if term in glossary.ENGLISH:
        after = _WORD_AFTER.match(text[end : end + 40])
        part = term.endswith(("er", "or")) or (
            after is not None and after.group(1).lower() in glossary.COMPONENTS
        )
        return at if previous in _DETERMINERS_EN and determiner and part else None
    return at if determiner or cjk or text[start].isupper() else None


def _katakana_found(runs: list[_Run], index: WorkspaceIndex) -> list[tuple[int, int, list[str]]]:
    """(start, end, candidates) for the katakana runs that spell names of the workspace: a
    run is read whole, then in parts if no name matched it whole (one search of the names
    each); of a run's parts, the longest that matched are taken."""
    matched: dict[tuple[int, int], list[str]] = {}
    todo = runs
    for tier in range(2):
        tries: dict[str, list[tuple[int, int]]] = {}  # pattern -> where it was read
        for s, e, m in todo:
            for start, end, pattern in _katakana_tries(s, e, m, tier):
                if pattern in tries or len(tries) < _KATAKANA_TRIES:
                    tries.setdefault(pattern, []).append((start, end))
        if not tries:
            continue
        combined = re.compile("\n(?:" + "|".join(f"(?:{p})" for p in tries) + ")(?=\n)")
        names = [n for n in index.names_matching(combined) if len(n) >= 3 and not _generic(n)]
        for pattern, spans in tries.items():
            hits = [name for name in names if re.fullmatch(pattern, name)]
            for span in spans if hits else ():
                matched.setdefault(span, []).extend(hits)
        todo = [(s, e, m) for s, e, m in todo if not any(s <= a < e for a, _ in matched)]
    chosen: list[tuple[int, int]] = []
    for span in sorted(matched, key=lambda se: (se[0] - se[1], se[0])):  # the longest first
        if not any(s < span[1] and span[0] < e for s, e in chosen):
            chosen.append(span)
    where = index.match_names([n for span in chosen for n in matched[span]])
    return [
        (s, e, _sorted(r for n in dict.fromkeys(matched[(s, e)]) for r in where.get(n, ())))
        for s, e in sorted(chosen)
    ]


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
        taken.append((start, end))
        seen.add(frozenset(candidates))

    seen: set[frozenset[str]] = set()  # what each reference found could mean
    symbols: set[str] = set()  # names looked up as symbols already
    for match in _CALL.finditer(text):
        looked = True
        symbols.add(match.group(1))
        candidates = index.match_symbol(match.group(1))
        if candidates:
            add(match.group(0), match.start(), match.end(), candidates)
    calls = list(taken)
    for match in _DEFINITE.finditer(text):
        noun, hint = match.group(1), (match.group(2) or "").lower() or None
        if noun.lower() in _GENERIC or any(s < match.end() and match.start() < e for s, e in calls):
            continue
        looked = True
        symbols.add(noun)
        candidates = index.match_noun(noun, hint)
        if candidates and hint is None:
            candidates += _components(noun, candidates, index)
        if candidates:
            add(match.group(0), match.start(), match.end(), candidates)
    # The workspace's names wherever else they occur, in any language (see the docstring); a
    # mention that could mean only what one found already could is the same reference.
    named, mentions, searched = _named_in_any_language(text, index, taken, symbols)
    looked = looked or searched
    for start, end, candidates in named:
        if not any(seen_one.issuperset(candidates) for seen_one in seen):
            add(text[start:end], start, end, candidates)
    for start, end, candidates in mentions:  # a word of prose: said, never asked
        if not any(seen_one.issuperset(candidates) for seen_one in seen):
            add(text[start:end], start, end, candidates)
            refs[-1]["kind"] = MENTION
            if refs[-1]["status"] == "evidence_gap":
                refs[-1].update(status="assumed", question=None)
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


_NAMED_BY = {
    ANSWERED: "you named when asked",
    ACTIVE_DOCUMENT: "open now",
    SELECTION: "the selection names",
    DIAGNOSTIC: "a diagnostic in range names",
    RECENTLY_TOUCHED: "touched in the last turns",
}


def _shown(path: str) -> str:
    """A workspace path in a line said to the person: its author chose it, so a line break or
    an escape in it shows as text (it cannot end the line and forge another)."""
    return visible(path, single_line=True)


def assumption_line(surface: str, assumption: dict) -> str:
    """ "Assumed 'the parser' means src/parser.py (why), not tools/parser.py." """
    others = " or ".join(map(_shown, assumption["not"]))
    if assumption.get("more"):
        others += f" or {assumption['more']} more"
    chosen = _shown(assumption["candidate"])
    return f"Assumed {surface!r} means {chosen} ({assumption['why']}), not {others}."


def assumptions(record: ResolutionRecord, asked: str | None = None) -> list[str]:
    """One `assumption_line` per reference the task goes on without the person's word, but
    the one whose question (`asked`) is put to them now."""
    return [
        assumption_line(ref["surface"], ref["assumption"])
        for ref in record.references
        if isinstance(ref.get("assumption"), dict)
        and ref.get("kind") != MENTION
        and (asked is None or ref["question"] != asked)
    ]


# A name this many other files share is a convention of the layout (a README.md, index.ts or
# conftest.py in each package), not a component a request names: `worked_on` says nothing of it.
_CONVENTION = 3


def worked_on(
    request: str,
    record: ResolutionRecord,
    index: WorkspaceIndex,
    changed: Sequence[str],
    read: Sequence[str],
    limit: int = 3,
) -> list[str]:
    """What a task took without the person's word that its request neither named (its path)
    nor showed as a reference:
    a file it changed (when it changed none, one it read) that shares its name with files it
    did not touch, where the request settled nothing about that name. The finder misses
    references (a synonym or a translation the glossary lacks, a bare verb: "the syntax
    code", "парсер", "responses are cached"), so which file the task took is said after
    it, from what it did, in any language: "Assumed the request meant src/parser.py (the task
    changed it; the request did not say which), not tools/parser.py." At most `limit` lines;
    dunder names and names of the layout (`_CONVENTION`) say nothing."""
    settled: set[str] = set()
    for ref in record.references:  # stated before the task, or the person's own word
        if ref.get("kind") == MENTION:
            continue  # a word that may name it: what the task took is said here
        for candidate in ref.get("candidates") or ():
            settled.add(str(candidate).rpartition(" in ")[2])
    touched = {posixpath.normpath(p) for p in (*changed, *read)}
    lines = []
    for path in dict.fromkeys(posixpath.normpath(p) for p in changed or read):
        stem = split_name(posixpath.basename(path))[0]
        if path in settled or path in request or (stem.startswith("__") and stem.endswith("__")):
            continue
        if not index.has_file(path):  # a new file, or a path from outside: no pick among files
            continue
        others = index.same_name(path)
        if not others or len(others) >= _CONVENTION or touched.intersection(others):
            continue
        did = "changed" if changed else "read"
        lines.append(
            f"Assumed the request meant {_shown(path)} (the task {did} it; the request did not "
            f"say which), not {' or '.join(map(_shown, others))}."
        )
        if len(lines) == limit:
            break
    return lines


def evidence_notes(record: ResolutionRecord) -> list[str]:
    """One line per reference with several candidates, for the task's prompt: what it is
    taken to mean and why, not what else. What the task only assumes (`_assumption`: no word
    from the person, or their earlier word against the editor now) is said as such, with the
    instruction to say it in the reply; the host also adds those lines to the task's summary
    (`assumptions`), so an assumption is never silent even when the model forgets. And one
    line when the workspace index was incomplete (the model would otherwise take a missing
    file for none)."""
    notes = []
    if record.partial:
        notes.append(
            "The workspace index was still being built when this request was read: the files "
            "and symbols it names were looked up in part of the workspace only."
        )
    for ref in record.references:
        weighed, said = ref.get("evidence"), ref.get("assumption")
        if ref.get("kind") == MENTION and isinstance(said, dict):
            options = " or ".join(map(_shown, [said["candidate"], *said["not"]]))
            notes.append(
                f"{ref['surface']!r} in the request may name {options}. If it does: "
                f"{assumption_line(ref['surface'], said)} Say in your reply which you took."
            )
        elif isinstance(said, dict):
            note = assumption_line(ref["surface"], said)
            if ref.get("status") != "resolved":  # not the editor's evidence either
                note += (
                    " It is ambiguous and the person has not settled it: go on that "
                    "assumption unless the request or the code shows it wrong, and say in "
                    "your reply which you took and which you did not, so they can correct it."
                )
            notes.append(note)
        elif ref.get("status") == "resolved" and weighed and weighed.get("decided"):
            others = [c for c in ref["candidates"] if c != ref["resolved_text"]]
            notes.append(
                f"{ref['surface']!r} is taken to mean {ref['resolved_text']} "
                f"({_WHY.get(weighed['rule'], weighed['rule'])}), "
                f"not {' or '.join(others)}."
            )
    return notes
