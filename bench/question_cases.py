"""The held-out requests of bench/question_value.py: written by hand, not generated from the
producers' vocabulary (SLOTS, WEAK, REF_REQUESTS there), each labelled with its ground truth.

One workspace (WORKSPACE): two parsers (src/parser.py, tools/parser.py) and two caches
(lib/cache.py, lib/cache/cache.py), so "the parser" and "the cache" are ambiguous; one lexer, one
client, one main; AGENTS.md and CLAUDE.md disagree on two slots (tests: pytest / unittest; the
formatter: black / yapf), the truth known only here; one weak fact (false) noted by the model.

Each case is one judged request, replayed after a fixed preamble (PREAMBLES) that sets the state
it is judged in: which questions are open, whether the budget is open, what the person answered
before. `about` is what the request is about, in truth:
  ("ref", noun, file): the module `noun` (a key of MODULES), meaning `file`;
  ("slot", subject): the slot of that subject (a key of SLOT_TRUTH);
  ("file", path): one file no question is about; None: nothing the workspace holds.
`named`: the request itself says which one (in any words: "the tools script" names
tools/parser.py for a person, whether or not the product can read it).
"""

from __future__ import annotations

from dataclasses import dataclass

FILES = {
    "README.md": "# app\n\nA small app.\n",
    "CHANGELOG.md": "# Changelog\n\n## 2.0\n- First release.\n",
    "LICENSE": "MIT License, Copyright 2025\n",
    "src/parser.py": "def parse(text):\n    return text\n",
    "tools/parser.py": "def parse_file(path):\n    return path\n",
    "src/lexer.py": "def tokens(text):\n    return text.split()\n",
    "lib/cache.py": "def get(key):\n    return None\n",
    "lib/cache/cache.py": "class Store:\n    pass\n",
    "src/main.py": "def parse_args(argv):\n    return argv\n\n\ndef main():\n    pass\n",
    "src/client.py": "def fetch(url):\n    return url\n",
    "src/report.py": "def render(rows):\n    return rows\n",
    "docs/index.md": "# Docs\n",
    "docs/usage.md": "# Usage\n",
    "tests/test_parser.py": "def test_parse():\n    assert True\n",
    "tests/test_lexer.py": "def test_tokens():\n    assert True\n",
    "tests/test_cache.py": "def test_get():\n    assert True\n",
    "AGENTS.md": (
        "# Agents\n\n- Always run the linter before committing.\n- Tests use pytest\n"
        "- The formatter is black\n"
    ),
    "CLAUDE.md": (
        "# Notes\n\n- Never commit secrets.\n- Tests use unittest\n- The formatter is yapf\n"
    ),
}
# noun -> its candidate files, the first being what the person means when a question about it
# comes up on a request about something else.
MODULES = {
    "parser": ("src/parser.py", "tools/parser.py"),
    "cache": ("lib/cache.py", "lib/cache/cache.py"),
    "lexer": ("src/lexer.py",),
    "client": ("src/client.py",),
    "main": ("src/main.py",),
}
SLOT_TRUTH = {"Tests": "pytest", "The formatter": "yapf"}  # AGENTS.md's side, CLAUDE.md's side
WEAK_FACTS = (
    ("The cache code is thread-safe", False),
)  # (statement, true?): noted, contradicted once

# name -> (the turns before the judged one: (request, active document, about)). The judged
# request comes right after them.
PREAMBLES: dict[str, tuple[tuple[str, str, tuple | None], ...]] = {
    # The budget open, only the two rules conflicts open (proposed every turn).
    "quiet": (("update the changelog for 2.1", "CHANGELOG.md", None),),
    # The budget closed: the first turn's question (the tests conflict) was delivered.
    "closed": (("the tests fail on CI, fix them", "README.md", ("slot", "Tests")),),
    # Questions open and the budget open again (turn 6): the formatter conflict, "which
    # parser", "which cache" (proposed at turn 2, budget closed) and a confirmation of the weak
    # fact (turn 3); turns 3 to 5 touch no candidate file.
    "open": (
        ("the tests fail on CI, fix them", "README.md", ("slot", "Tests")),
        ("add type hints to the parser and the cache", "README.md", None),
        ("is the caching code thread-safe? add a lock if not", "README.md", ("weak", 0)),
        ("update the changelog for 2.1", "CHANGELOG.md", None),
        ("bump the year in the license header", "LICENSE", None),
    ),
    # The person answered "which parser" with src/parser.py at turn 1; the budget open again.
    "answered": (
        ("fix the bug in the parser", "README.md", ("ref", "parser", "src/parser.py")),
        ("update the changelog for 2.1", "CHANGELOG.md", None),
        ("bump the year in the license header", "LICENSE", None),
        ("rename this variable to something clearer", "src/client.py", None),
        ("explain what this function does", "src/report.py", None),
    ),
    # The same answer, the next turn: the budget closed.
    "answered, closed": (
        ("fix the bug in the parser", "README.md", ("ref", "parser", "src/parser.py")),
    ),
}
CLASSES = ("paraphrase", "boilerplate", "other subject", "language", "english", "conflict")
LANGUAGES = ("en", "ja", "de", "fr", "es", "zh")
# The preambles a class is judged after: traps where questions are open and the budget too;
# requests about a module with the budget open (ask) and closed (state the assumption).
CLASS_PREAMBLES = {
    "paraphrase": ("quiet", "closed"),
    "boilerplate": ("open",),
    "other subject": ("open",),
    "language": ("quiet", "closed"),
    "english": ("quiet", "closed"),
    "conflict": ("answered", "answered, closed"),
}


@dataclass(frozen=True)
class Case:
    request: str
    context: str  # the active document
    cls: str  # one of CLASSES
    lang: str  # one of LANGUAGES
    about: tuple | None
    named: bool = False


def _p(noun: str, file: str) -> tuple:
    return ("ref", noun, file)


README, USAGE, INDEX, REPORT = "README.md", "docs/usage.md", "docs/index.md", "src/report.py"
SRC, TOOLS = "src/parser.py", "tools/parser.py"
LIB, PKG = "lib/cache.py", "lib/cache/cache.py"
LEXER, CLIENT, MAIN = (
    _p("lexer", "src/lexer.py"),
    _p("client", "src/client.py"),
    _p("main", "src/main.py"),
)
TESTS, FORMATTER = ("slot", "Tests"), ("slot", "The formatter")


def _f(path: str) -> tuple:
    return ("file", path)


# (request, active document, about[, named]) by class; the language is English unless given.
PARAPHRASE = (  # about a module, without "the parser" / "the cache"
    ("the parsing code is slow", README, _p("parser", SRC)),
    ("parsing breaks on nested brackets", USAGE, _p("parser", TOOLS)),
    ("the grammar code rejects trailing commas", README, _p("parser", SRC)),
    ("make parsing faster in the tools script", README, _p("parser", TOOLS), True),
    ("fix the parse error on empty input", TOOLS, _p("parser", TOOLS)),
    ("can you speed up tokenising", README, LEXER),
    ("the tokenizer chokes on tabs", USAGE, LEXER),
    ("responses are cached for too long, shorten the expiry", README, _p("cache", PKG)),
    ("where do we cache HTTP responses? make it honour Cache-Control", README, _p("cache", LIB)),
    ("the caching layer returns stale data after a deploy", INDEX, _p("cache", PKG)),
    ("the HTTP client times out too early", README, CLIENT),
    ("tidy the indentation everywhere before the release", README, FORMATTER),
    ("check nothing broke before I merge", README, TESTS),
)
# Nothing to do with any open question, sharing the words of the question templates: "Two
# notes conflict: AGENTS.md says ...; CLAUDE.md says .... Which is right?", "Which do you mean
# by ...", "I'm not confident in what I recall about ... (fact:...). Is it still accurate?".
BOILERPLATE = (
    ("is it right to use two spaces for indentation here?", USAGE, None),
    ("which of the two loops is the right one to keep?", REPORT, _f(REPORT)),
    ("what do you mean by 'idempotent' in this docstring?", "src/client.py", CLIENT),
    ("what does the error message say when the port is taken?", README, None),
    ("resolve the merge conflict in README.md", README, _f(README)),
    ("add release notes for 2.1 to the changelog", "CHANGELOG.md", _f("CHANGELOG.md")),
    ("I'm not confident this regular expression is right, double-check it", REPORT, _f(REPORT)),
    ("how do I recall the last command in the shell? add it to the usage page", USAGE, _f(USAGE)),
    ("are the timestamps in the log accurate to the millisecond?", README, None),
    ("use the fact that the list is sorted to speed up the lookup", REPORT, _f(REPORT)),
    ("say in the help text which options are required", USAGE, _f(USAGE)),
    ("the two notes in the README conflict with each other, merge them", README, _f(README)),
    ("show the mean and the median of the response times in the report", REPORT, _f(REPORT)),
    ("is it still accurate that we support Python 3.9? update the README", README, _f(README)),
    ("two agents may edit the same file at once; document how to avoid it", INDEX, _f(INDEX)),
    ("I recall a right-to-left text bug in the report, reproduce it", REPORT, _f(REPORT)),
)
# A word or stem of an open question's subject (a parser, a cache, black, thread-safe code, the
# directories src, tools, lib) about another thing: another file, another step, another sense.
OTHER_SUBJECT = (
    ("parse the CLI arguments in main.py with argparse", "src/main.py", MAIN),
    ("clear the browser cache in the docs build instructions", USAGE, _f(USAGE)),
    ("the black background is hard to read, lighten the docs theme", INDEX, _f(INDEX)),
    ("write a parser for the new config format in src/config.py", README, None),
    ("the thread pool in the client is too small", "src/client.py", CLIENT),
    ("make the lock screen timeout configurable in the docs example", USAGE, _f(USAGE)),
    ("the tools page of the docs lists an old version", INDEX, _f(INDEX)),
    ("format the dates in the report as ISO 8601", REPORT, _f(REPORT)),
    ("safe mode should skip the plugins, add a flag for it to main", "src/main.py", MAIN),
    ("the lib folder should not be in the wheel, fix the packaging", README, None),
    ("the lexer's cache of keywords is rebuilt on every call", "src/lexer.py", LEXER),
    ("code review: is this change safe to merge?", README, None),
    (
        "the parser tests take a minute, mark them slow",
        "tests/test_parser.py",
        _f("tests/test_parser.py"),
    ),
)
# About the workspace's modules in other languages: the right behaviour is the English one.
LANGUAGE = {
    "ja": (
        ("パーサーを直して", README, _p("parser", SRC)),
        ("parser.pyのバグを直して", README, _p("parser", TOOLS)),
        ("パーサーを直して", TOOLS, _p("parser", TOOLS)),
        ("キャッシュが古いデータを返すので直して", README, _p("cache", LIB)),
        ("レキサーを速くして", README, LEXER),
        ("テストが落ちているので直して", README, TESTS),
    ),
    "de": (
        ("Repariere den Parser", README, _p("parser", SRC)),
        ("Der Parser ist zu langsam, beschleunige ihn", USAGE, _p("parser", TOOLS)),
        ("Repariere den Parser", TOOLS, _p("parser", TOOLS)),
        ("Der Cache liefert veraltete Daten", README, _p("cache", PKG)),
        ("Beschleunige den Lexer", README, LEXER),
        ("Die Tests schlagen fehl, repariere sie", README, TESTS),
    ),
    "fr": (
        ("corrige le parseur", README, _p("parser", SRC)),
        ("le parser plante sur les commentaires", USAGE, _p("parser", TOOLS)),
        ("corrige le parseur", TOOLS, _p("parser", TOOLS)),
        ("le cache renvoie des données périmées", README, _p("cache", LIB)),
        ("accélère le lexer", README, LEXER),
        ("reformate le code avant la release", README, FORMATTER),
    ),
    "es": (
        ("arregla el parser", README, _p("parser", SRC)),
        ("el analizador es muy lento", USAGE, _p("parser", TOOLS)),
        ("arregla el parser", TOOLS, _p("parser", TOOLS)),
        ("la caché devuelve datos viejos", README, _p("cache", PKG)),
        ("acelera el lexer", README, LEXER),
        ("las pruebas fallan, arréglalas", README, TESTS),
    ),
    "zh": (
        ("修复parser里的bug", README, _p("parser", TOOLS)),
        ("解析器太慢了", USAGE, _p("parser", SRC)),
        ("修复parser里的bug", TOOLS, _p("parser", TOOLS)),
        ("缓存返回旧数据", README, _p("cache", LIB)),
        ("词法分析器太慢", README, LEXER),
        ("格式化一下代码", README, FORMATTER),
    ),
}
ENGLISH = (  # controls in the producers' wording ("the parser"), what the others are held to
    ("fix the bug in the parser", README, _p("parser", SRC)),
    ("the parser is too slow, speed it up", USAGE, _p("parser", TOOLS)),
    ("fix the bug in the parser", TOOLS, _p("parser", TOOLS)),
    ("the cache returns stale data", README, _p("cache", LIB)),
    ("speed up the lexer", README, LEXER),
    ("the tests fail, fix them", README, TESTS),
)
# The person said "the parser" is src/parser.py; now tools/parser.py is open (the last: a
# control, nothing open disagrees).
CONFLICT = (
    ("the parser drops comments, fix it", TOOLS, _p("parser", TOOLS)),
    ("the parser drops comments, fix it", TOOLS, _p("parser", SRC)),
    ("パーサーがコメントを落とすので直して", TOOLS, _p("parser", TOOLS), False, "ja"),
    ("the parser drops comments, fix it", README, _p("parser", SRC)),
)


def _cases(cls: str, rows: tuple, lang: str = "en") -> list[Case]:
    out = []
    for request, context, about, *rest in rows:
        named = bool(rest[0]) if rest else False
        language = rest[1] if len(rest) > 1 else lang
        out.append(Case(request, context, cls, language, about, named))
    return out


CASES: tuple[Case, ...] = (
    *_cases("paraphrase", PARAPHRASE),
    *_cases("boilerplate", BOILERPLATE),
    *_cases("other subject", OTHER_SUBJECT),
    *(case for lang, rows in LANGUAGE.items() for case in _cases("language", rows, lang)),
    *_cases("english", ENGLISH),
    *_cases("conflict", CONFLICT),
)
