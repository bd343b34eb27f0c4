"""References in any language: the workspace's own names found in a request wherever they occur
(issue 31, point 2), and the English requests that must not gain references from them."""

from __future__ import annotations

import re

import pytest

from talos_ls.memory.index import WorkspaceIndex
from talos_ls.memory.resolve import (
    MENTION,
    Evidence,
    assumptions,
    evidence_notes,
    resolve,
    worked_on,
)

PARSERS = ["src/parser.py", "tools/parser.py"]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("ws")
    files = [
        "src/parser.py",
        "tools/parser.py",
        "src/cache.py",
        "src/bug.py",
        "lib/router.py",
        "lib/loader.py",
        "lib/scheduler.py",
        "lib/renderer.py",
        "lib/client.py",
        "lib/server.py",
        "lib/schema.py",
        "lib/worker.py",
        "lib/index.ts",
        "lib/module.py",
        "lib/controller.py",
        "lib/log.py",
        "lib/error.py",
        "lib/lexer.py",
        "docs/guide.md",
        "config.toml",
        *(f"pkg{i}/util.py" for i in range(5)),
    ]
    for rel in files:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x = 1\n")
    (root / "src/parser.py").write_text("class ParserError(Exception):\n    pass\n")
    (root / "tools/util2.py").write_text("def load_config():\n    pass\n")
    return WorkspaceIndex.build(root)


def refs(index, text):
    """(surface, status, candidates) of each reference; each surface is the text at its
    offsets."""
    found = []
    for r in resolve("a1", 1, text, index).references:
        assert text[r["start"] : r["end"]] == r["surface"]
        found.append((r["surface"], r["status"], r["candidates"]))
    return found


GAP = "evidence_gap"


@pytest.mark.parametrize(
    ("text", "surface"),
    [
        # Japanese: a katakana loanword, a Latin name or a file name inside text without spaces
        ("パーサーを直して", "パーサー"),
        ("パーサのバグを直して", "パーサ"),  # without the final long mark (JIS style)
        ("parserを直して", "parser"),
        ("parser.pyのバグを直して", "parser.py"),
        ("ｐａｒｓｅｒを直して", "ｐａｒｓｅｒ"),  # full-width letters
        # Chinese, with and without spaces around the Latin name
        ("修复parser里的bug", "parser"),
        ("修复 parser 里的 bug", "parser"),
        # German: an article, a hyphenated compound, a closed compound
        ("Repariere den Parser", "den Parser"),
        ("Der Fehler steckt im Parsermodul", "im Parsermodul"),
        ("Das Parsermodul wirft Fehler", "Das Parsermodul"),
        # French and Spanish: an article, a cognate (parseur)
        ("corrige le parseur", "le parseur"),
        ("corrige le parser", "le parser"),
        ("arregla el parser", "el parser"),
    ],
)
def test_a_name_of_the_workspace_in_any_language_is_a_reference(workspace, text, surface):
    assert refs(workspace, text) == [(surface, GAP, PARSERS)]
    (ref,) = resolve("a1", 1, text, workspace).references
    assert ref["question"] == f"Which do you mean by {surface!r}: src/parser.py or tools/parser.py?"
    (note,) = evidence_notes(resolve("a1", 1, text, workspace))
    assert note.startswith(f"Assumed {surface!r} means src/parser.py (nothing in the request ")
    assert "not tools/parser.py. It is ambiguous" in note  # said as an assumption, in any language


def test_german_compounds_and_translated_nouns(workspace):
    assert refs(workspace, "Aktualisiere die Parser-Dokumentation") == [
        ("Parser", GAP, PARSERS),
        ("Dokumentation", "resolved", ["docs/"]),  # a directory, by a short form of the noun
    ]
    assert refs(workspace, "Konfiguration prüfen") == [  # k -> c, config: a short form
        ("Konfiguration", "resolved", ["config.toml"])
    ]
    assert refs(workspace, "la documentación") == [("la documentación", "resolved", ["docs/"])]
    # one reference for one ambiguity, however often the request names it
    assert refs(workspace, "Repariere den Parser im Parsermodul") == [("den Parser", GAP, PARSERS)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("el servidor", "lib/server.py"),  # -idor
        ("le serveur", "lib/server.py"),  # -eur
        ("le contrôleur", "lib/controller.py"),  # accents dropped, the l doubled
        ("el controlador", "lib/controller.py"),  # -ador
        ("la caché", "src/cache.py"),
        ("l'erreur", "lib/error.py"),  # l' before a vowel
    ],
)
def test_french_and_spanish_cognates(workspace, text, expected):
    assert refs(workspace, text) == [(text, "resolved", [expected])]


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("キャッシュ", "src/cache.py"),
        ("ルーター", "lib/router.py"),
        ("ローダー", "lib/loader.py"),
        ("スケジューラー", "lib/scheduler.py"),
        ("スケジューラ", "lib/scheduler.py"),
        ("レンダラー", "lib/renderer.py"),
        ("クライアント", "lib/client.py"),
        ("サーバー", "lib/server.py"),
        ("サーバ", "lib/server.py"),
        ("スキーマ", "lib/schema.py"),
        ("ワーカー", "lib/worker.py"),
        ("インデックス", "lib/index.ts"),
        ("モジュール", "lib/module.py"),
        ("コントローラー", "lib/controller.py"),
        ("ドキュメント", None),  # no document.py here: nothing (docs is no transliteration)
        ("ライター", None),  # writer: not router
        ("パース", None),  # parse: not parser (no -er written)
        ("バグ", None),  # bug: a generic word, even with src/bug.py
        ("ファイル", None),  # file: generic
    ],
)
def test_katakana_loanwords_by_their_english_spelling(workspace, word, expected):
    found = refs(workspace, f"{word}を確認して")
    assert found == ([(word, "resolved", [expected])] if expected else [])


def test_several_katakana_words(workspace):
    assert refs(workspace, "ルーターとキャッシュを見て") == [
        ("ルーター", "resolved", ["lib/router.py"]),
        ("キャッシュ", "resolved", ["src/cache.py"]),
    ]


def test_a_katakana_compound_is_read_in_parts(workspace):
    assert refs(workspace, "パーサーモジュールのテスト") == [
        ("パーサー", GAP, PARSERS),
        ("モジュール", "resolved", ["lib/module.py"]),
    ]


def test_how_many_a_bare_mention_matches_decides_its_status(workspace):
    (util,) = refs(workspace, "utilを整理して")
    assert util[0] == "util" and util[1] == "indeterminate" and len(util[2]) == 5
    (note,) = evidence_notes(resolve("a1", 1, "utilを整理して", workspace))
    assert note.startswith("Assumed 'util' means ") and " or " in note and "ambiguous" in note
    assert refs(workspace, "lade die util") == [("die util", "indeterminate", util[2])]
    record = resolve("a1", 1, "キャッシュとパーサーとutil", workspace)
    assert record.status == "indeterminate"  # the worst of its references
    assert [r["status"] for r in record.references] == ["resolved", GAP, "indeterminate"]


def test_english_requests_gain_no_reference_from_words_that_contain_a_name(workspace):
    for text in [
        "parse the input",  # parse is no parser
        "fix parser.py",  # a bare file name: the evidence rule reads it
        "the parsed output has an extra line",
        "the cached value is stale",
        "serverless deployment is not supported",
        "check the logs for errors",  # logs is not log
        "let the process die gracefully",  # die is an article in German, but then no name
        "the document is too long",
    ]:
        assert refs(workspace, text) == [], text
    assert refs(workspace, "use the cache") == [("the cache", "resolved", ["src/cache.py"])]
    assert refs(workspace, "Fix ParserError on empty input") == [  # a symbol, not split
        ("ParserError", "resolved", ["ParserError in src/parser.py"])
    ]
    assert refs(workspace, "fix the parser") == [("the parser", GAP, PARSERS)]
    # what English gains: directories, short forms, file names and identifiers as names
    assert refs(workspace, "update the docs") == [("the docs", "resolved", ["docs/"])]
    assert refs(workspace, "update the documentation") == [
        ("the documentation", "resolved", ["docs/"])
    ]
    assert refs(workspace, "fix the parser.py") == [("the parser.py", GAP, PARSERS)]
    assert refs(workspace, "why does load_config fail") == [
        ("load_config", "resolved", ["load_config in tools/util2.py"])
    ]


def test_generic_words_stay_excluded(workspace):
    for text in ["バグを直して", "修复bug", "Repariere den Bug", "corrige le bug"]:
        assert refs(workspace, text) == [], text


def test_the_request_names_the_file_in_text_without_spaces(workspace):
    record = resolve("a1", 1, "パーサーを直して、tools/parser.pyの方", workspace)
    (ref,) = record.references
    assert (ref["surface"], ref["status"], ref["resolved_text"]) == (
        "パーサー",
        "resolved",
        "tools/parser.py",
    )
    assert ref["evidence"]["rule"] == "request"


def test_the_editor_settles_a_reference_in_another_language(workspace):
    evidence = Evidence(active="tools/parser.py")
    (ref,) = resolve("a1", 1, "パーサーを直して", workspace, evidence).references
    assert (ref["status"], ref["resolved_text"]) == ("resolved", "tools/parser.py")


def test_offsets_and_determinism(workspace):
    text = "« Schön » 🙂 — Fehler im Parsermodul, und パーサーもutilも"
    one = resolve("a1", 3, text, workspace)
    two = resolve("a1", 3, text, workspace)
    assert (one.key, one.references_json, one.status) == (two.key, two.references_json, two.status)
    spans = [(r["start"], r["end"]) for r in one.references]
    assert spans == sorted(spans)
    for ref in one.references:
        assert text[ref["start"] : ref["end"]] == ref["surface"]
    # パーサー could mean what "im Parsermodul" could: one reference for one ambiguity
    assert [r["surface"] for r in one.references] == ["im Parsermodul", "util"]


def test_a_question_is_proposed_for_a_reference_in_another_language(workspace, qq):
    record = resolve("a1", 1, "パーサーを直して", workspace)
    assert qq.propose_from_resolution(record, 1) == 1
    asked = qq.next_question("a1", 1, "パーサーを直して")
    assert asked is not None and asked.question_text == (
        "Which do you mean by 'パーサー': src/parser.py or tools/parser.py?"
    )


def test_the_index_answers_names_and_directories_as_they_change(tmp_path):
    for rel in ("src/parser.py", "docs/guide.md", "web/docs/api.md"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x = 1\n")
    index = WorkspaceIndex.build(tmp_path)
    assert index.match_names(["parser", "docs", "nothing"]) == {
        "parser": ["src/parser.py"],
        "docs": ["docs/", "web/docs/"],
    }
    assert index.names_matching(re.compile(r"\n(p\w*|d\w*)(?=\n)")) == ["parser", "docs"]
    (tmp_path / "lib/cache").mkdir(parents=True)
    (tmp_path / "lib/cache/store.py").write_text("x = 1\n")
    index.apply([("added", str(tmp_path / "lib"))])
    assert index.match_names(["cache", "lib"]) == {"cache": ["lib/cache/"], "lib": ["lib/"]}
    (tmp_path / "lib/cache/store.py").unlink()
    (tmp_path / "lib/cache").rmdir()
    index.apply([("deleted", str(tmp_path / "lib/cache"))])
    assert index.match_names(["cache", "lib"]) == {"lib": ["lib/"]}


@pytest.mark.parametrize(
    ("text", "surface"),
    [
        ("the parsing code is slow", "the parsing"),  # the component that parses
        ("the parse error on empty input", "the parse"),
        ("Parsing breaks on nested brackets", "Parsing"),  # a gerund opening a sentence
        ("it hangs. parsing never ends", "parsing"),
    ],
)
def test_an_english_verb_form_after_the_or_opening_a_sentence_names_its_component(
    workspace, text, surface
):
    assert refs(workspace, text) == [(surface, GAP, PARSERS)]


@pytest.mark.parametrize(
    "text",
    [
        "the parsed output has an extra line",  # a participle: what was done to a thing
        "we keep parsing it twice",  # a gerund inside a sentence: prose
    ],
)
def test_a_verb_form_inside_prose_or_a_participle_names_nothing(workspace, text):
    assert refs(workspace, text) == []


@pytest.mark.parametrize(
    ("text", "surface", "expected"),
    [
        # translations sharing no letter with the name (the glossary)
        ("el analizador es muy lento", "el analizador", PARSERS),
        ("los analizadores fallan", "los analizadores", PARSERS),  # a plural
        ("l'analyseur est lent", "l'analyseur", PARSERS),
        ("Der Syntaxanalysator hängt", "Der Syntaxanalysator", PARSERS),
        ("解析器太慢了", "解析器", PARSERS),
        ("構文解析器を直して", "構文解析器", PARSERS),
        ("缓存返回旧数据", "缓存", ["src/cache.py"]),
        ("Der Zwischenspeicher liefert alte Daten", "Der Zwischenspeicher", ["src/cache.py"]),
        ("日志太多了", "日志", ["lib/log.py"]),
        # the longest term first: a lexical analyser is the lexer, not a parser
        ("el analizador léxico falla", "el analizador léxico", ["lib/lexer.py"]),
        ("el analizador lexico falla", "el analizador lexico", ["lib/lexer.py"]),  # no accent
        ("词法分析器太慢", "词法分析器", ["lib/lexer.py"]),
        # English synonyms, as a part of the program only
        ("the grammar code rejects trailing commas", "the grammar", PARSERS),
        ("the tokenizer chokes on tabs", "the tokenizer", ["lib/lexer.py"]),
        ("the logging module is noisy", "the logging", ["lib/log.py"]),
    ],
)
def test_a_translation_or_synonym_the_glossary_holds_is_a_reference(
    workspace, text, surface, expected
):
    assert refs(workspace, text) == [(surface, GAP if len(expected) > 1 else "resolved", expected)]


@pytest.mark.parametrize(
    "text",
    [
        "fix the grammar in the README",  # grammar, not as a part of the program
        "the grammar is awkward",
        "analizador lento",  # a bare lowercase word after no article
        "we keep a log",  # log: the name itself, bare: prose as before
        "the tokenizing is slow",  # a synonym not a part, with no part named after it
    ],
)
def test_a_glossary_word_outside_a_reference_names_nothing(workspace, text):
    assert refs(workspace, text) == []


def test_the_workspace_s_own_name_wins_over_the_glossary(tmp_path):
    for rel in ("src/parser.py", "src/grammar.py", "src/tokenizer.py", "src/lexer.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x = 1\n")
    index = WorkspaceIndex.build(tmp_path)
    assert refs(index, "the grammar code") == [("the grammar", "resolved", ["src/grammar.py"])]
    assert refs(index, "the tokenizer is slow") == [
        ("the tokenizer", "resolved", ["src/tokenizer.py"])
    ]


def test_a_symbol_found_for_a_word_that_also_names_a_component_is_not_taken_alone(tmp_path):
    """In "the parse error", parse() is in src/parser.py, and tools/parser.py is a parser too:
    the reference may mean either, so the open file decides, or it is a gap."""
    (tmp_path / "src").mkdir()
    (tmp_path / "tools").mkdir()
    (tmp_path / "src/parser.py").write_text("def parse(text):\n    return text\n")
    (tmp_path / "tools/parser.py").write_text("def parse_file(path):\n    return path\n")
    index = WorkspaceIndex.build(tmp_path)
    both = ["parse in src/parser.py", "tools/parser.py"]
    assert refs(index, "fix the parse error on empty input") == [("the parse", GAP, both)]
    open_now = Evidence(active="tools/parser.py")
    (ref,) = resolve("a1", 1, "fix the parse error", index, open_now).references
    assert (ref["status"], ref["resolved_text"]) == ("resolved", "tools/parser.py")
    # a hint says which: the function
    assert refs(index, "the parse function") == [
        ("the parse function", "resolved", ["parse in src/parser.py"])
    ]


def test_the_glossary_reads_a_long_request_once_and_only_its_beginning(workspace):
    """A pasted log is not read for terms past its first characters, and a term repeated
    there is one reference."""
    text = "el analizador falla. " * 20 + "x " * 5000 + "der Zwischenspeicher"
    assert refs(workspace, text) == [("el analizador", GAP, PARSERS)]


@pytest.mark.parametrize(
    ("text", "surface"),
    [
        ("fix parser", "parser"),  # a bare word of prose that is the name of two files
        ("Parser crashes on empty input", "Parser"),
        ("parser and lexer disagree on tabs", "parser"),  # lexer: one file, nothing to say
    ],
)
def test_a_bare_word_naming_two_to_four_files_is_said_and_never_asked(workspace, qq, text, surface):
    """A word of prose is no reference to ask about ("use a cache here" may mean a new one),
    but when it is the name of two to four files, which the task may take is said in its
    prompt; its summary says what the task took (`worked_on`), not what the word might mean."""
    record = resolve("a1", 1, text, workspace)
    (ref,) = record.references
    assert (ref["surface"], ref["status"], ref["kind"]) == (surface, "assumed", MENTION)
    assert ref["candidates"] == PARSERS and ref["question"] is None
    assert qq.propose_from_resolution(record, 1) == 0  # never a question
    (note,) = evidence_notes(record)
    assert note.startswith(f"{surface!r} in the request may name src/parser.py or tools/parser.py")
    assert f"Assumed {surface!r} means src/parser.py" in note and "not tools/parser.py" in note
    assert assumptions(record) == []  # the summary does not claim the task took it
    (after,) = worked_on(text, record, workspace, ["tools/parser.py"], [])
    assert after.startswith("Assumed the request meant tools/parser.py (the task changed it;")


def test_a_bare_word_the_editor_settles_is_said_as_taken(workspace):
    evidence = Evidence(active="tools/parser.py")
    (ref,) = resolve("a1", 1, "fix parser", workspace, evidence).references
    assert (ref["status"], ref["resolved_text"], ref["kind"]) == (
        "resolved",
        "tools/parser.py",
        MENTION,
    )


@pytest.mark.parametrize(
    "text",
    [
        "use cache here",  # one file of that name: nothing to say
        "tidy util",  # five: the layout's name, not a part (a note would list them all)
        "make it faster",  # no file of that name
        "the cached value is stale",  # an inflected form is not the name
    ],
)
def test_a_bare_word_naming_one_or_many_files_or_none_is_nothing(workspace, text):
    assert refs(workspace, text) == []
    assert not resolve("a1", 1, text, workspace).partial


def test_a_bare_verb_form_of_a_shared_name_is_a_mention(tmp_path):
    for rel in ("lib/cache.py", "lib/cache/cache.py", "src/parser.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x = 1\n")
    index = WorkspaceIndex.build(tmp_path)
    both = ["lib/cache.py", "lib/cache/cache.py"]
    for text, surface in [
        ("responses are cached for too long", "cached"),
        ("stop caching errors", "caching"),
        ("where do we cache HTTP responses?", "cache"),
    ]:
        assert refs(index, text) == [(surface, "assumed", both)], text
    assert refs(index, "we are parsing twice") == []  # parse: no file of that name


def test_the_glossary_reads_a_term_as_written_and_by_its_key():
    """A key folds accents and kana sound marks away (テンプレート's プ); a term is found as the
    table writes it, unaccented, and in the plural."""
    from talos_ls.memory import glossary

    for written in ("テンプレート", "analizador léxico", "analizador lexico", "Analizadores"):
        key = glossary.key(written)
        assert glossary.may_begin(key.split()[0]) or key[0] in glossary.FIRST, written
        assert glossary.lookup(key) is not None, written
    assert "テ" in glossary.FIRST  # the first character as written, not its key's
    assert glossary.lookup(glossary.key("analizadorx")) is None
