"""Options read as the program will read them: getopt_long's unambiguous prefixes
(`--compress-prog` is `--compress-program`), `--opt=value` and `--opt value`, clustered short
flags with attached values (`-xf/abs/path`), git's parse-options (prefixes and `--no-X`
negations, per subcommand), find's predicates.

The tables (`options.json`) are generated from each program's own option list by
`tools/option_tables.py`, and loaded once, when first needed. What is risky is decided in
`shell.py`; this module only says which option each word is and which words are its value.
Where a prefix could be more than one option, every candidate is reported, so the caller can
judge it by the worst of them: an ambiguous prefix is never read as harmless.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources

log = logging.getLogger(__name__)
NONE, REQUIRED, OPTIONAL, COMMAND = 0, 1, 2, -1  # COMMAND: `find -exec ... ;`
FIND_OPERATORS = frozenset({"(", ")", "!", ",", "-a", "-and", "-o", "-or", "-not"})
_NUMBER = re.compile(r"-[0-9]+")


@dataclass(frozen=True)
class Option:
    names: tuple[str, ...]  # every spelling; names[0] is how rules spell it
    arity: int
    negated: bool = False  # git's `--no-X` of an option X: turns it off

    @property
    def canonical(self) -> str:
        return self.names[0]


@dataclass(frozen=True)
class Given:
    """One option as written: what it can be, and its value."""

    index: int  # the word it is in
    spelled: str  # `--compress-prog`, `-f`
    options: tuple[Option, ...]  # () unknown; one; or every candidate of an ambiguous prefix
    value: str | None = None
    value_index: int | None = None  # the value's own word; None: attached or none

    @property
    def known(self) -> bool:
        return len(self.options) == 1

    @property
    def names(self) -> frozenset[str]:
        return frozenset(n for o in self.options for n in o.names)

    @property
    def shown(self) -> str:
        """How the person is told about it: the full name of a prefix (`--compress-program`),
        the spelling as written otherwise."""
        if len(self.options) == 1 and self.spelled.startswith("--"):
            full = [n for n in self.options[0].names if n.startswith(self.spelled)]
            return full[0] if full else self.spelled
        return self.spelled


@dataclass
class Reading:
    given: list[Given] = field(default_factory=list)
    operands: list[int] = field(default_factory=list)  # words that are not options or values
    end: int = 0  # where the options stop, for programs that run the rest (`env`, `nice`)
    maybe_values: list[int] = field(default_factory=list)  # after an option of unknown arity
    loose: list[str] = field(default_factory=list)  # what follows an unknown letter (`-Zf/x`)


class Spec:
    """One program's (or git subcommand's) options."""

    def __init__(self, name: str, entry: dict) -> None:
        self.name = name
        self.style: str = entry["style"]
        self.numbers: bool = bool(entry.get("numbers"))
        self.source: str = entry.get("source", "")
        self.version: str = entry.get("version", "")
        self.long: dict[str, Option] = {}
        self.short: dict[str, Option] = {}
        for names, arity in entry["options"]:
            option = Option(tuple(names.split()), int(arity))
            for spelling in option.names:
                if spelling.startswith("--") or self.style == "find":
                    self.long.setdefault(spelling, option)  # find: -name is a long name
                else:
                    self.short.setdefault(spelling[1:], option)
        self._index: dict[str, tuple[Option, ...]] | None = None

    @property
    def options(self) -> list[Option]:
        return list(dict.fromkeys([*self.long.values(), *self.short.values()]))

    def _prefixes(self) -> dict[str, tuple[Option, ...]]:
        """Every prefix of every long name (and, for git, of `--no-NAME`): built once, so a
        lookup is one dictionary access."""
        if self._index is None:
            index: dict[str, dict[Option, None]] = {}
            names = dict(self.long)
            if self.style == "git":  # parse-options: any option may be negated
                for name in self.long:
                    negation = "--no-" + name[2:]
                    if not name.startswith("--no-") and negation not in names:
                        names[negation] = Option((negation,), NONE, negated=True)
            dashes = 1 if self.style == "find" else 2
            for name, option in names.items():
                for end in range(dashes + 1, len(name) + 1):
                    index.setdefault(name[:end], {})[option] = None
            self._index = {k: tuple(v) for k, v in index.items()}
            self._index.update({name: (option,) for name, option in names.items()})
        return self._index

    def lookup(self, name: str) -> tuple[Option, ...]:
        """The option(s) a long spelling can be: the exact name, else every option it is a
        prefix of (one: getopt_long takes it; several: ambiguous)."""
        exact = self.long.get(name)
        if exact is not None:
            return (exact,)
        return self._prefixes().get(name, ())


@functools.cache
def _table() -> dict[str, dict]:
    """The tables, read once. Missing or broken (an installation without its data file), the
    reader falls back to reading every program word by word, and says so in the log."""
    try:
        text = resources.files(__package__).joinpath("options.json").read_text(encoding="utf-8")
        programs: dict[str, dict] = json.loads(text)["programs"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.error(
            "the shell reader's option tables cannot be read (%s): %s",
            type(exc).__name__,
            "reinstall talos-ls",
        )
        return {}
    return programs


@functools.cache
def spec(name: str) -> Spec | None:
    """The options of `name` (`grep`, `git log`), or None when the tables do not have it."""
    entry = _table().get(name)
    return Spec(name, entry) if entry is not None else None


def read(sp: Spec, words: Sequence[str], *, stop: bool = False) -> Reading:
    """Which words are options (and which option each can be), values and operands. `stop`:
    the options end at the first operand (git's own options end at the subcommand)."""
    if sp.style == "find":
        return _read_find(sp, words)
    out = Reading()
    stop = stop or sp.style in ("stop", "python")
    if sp.name == "tar" and words and words[0] and not words[0].startswith("-"):
        return _read_tar_bundle(sp, words)
    i, n = 0, len(words)
    while i < n:
        word = words[i]
        if sp.style == "words":
            out.operands.append(i)
        elif word == "--":
            out.operands.extend(range(i + 1, n))
            out.end = i + 1
            return out
        elif word.startswith("--") and len(word) > 2:
            name, eq, value = word.partition("=")
            options = sp.lookup(name)
            if eq:
                out.given.append(Given(i, name, options, value))
            elif len(options) == 1 and options[0].arity == REQUIRED and i + 1 < n:
                out.given.append(Given(i, name, options, words[i + 1], i + 1))
                i += 1
            else:
                out.given.append(Given(i, name, options))
                if len(options) != 1 and i + 1 < n:
                    out.maybe_values.append(i + 1)  # unknown arity: it may be the value
        elif word.startswith("-") and len(word) > 1:
            if sp.numbers and _NUMBER.fullmatch(word):
                out.given.append(Given(i, word, (Option((word,), NONE),)))
            else:
                consumed, ends = _cluster(sp, words, i, out)
                i += consumed
                if ends:
                    out.operands.extend(range(i + 1, n))
                    out.end = i + 1
                    return out
        else:
            out.operands.append(i)
            if stop:
                out.operands.extend(range(i + 1, n))
                out.end = i
                return out
        i += 1
    out.end = n
    return out


def _cluster(sp: Spec, words: Sequence[str], i: int, out: Reading) -> tuple[int, bool]:
    """`-xf/abs`: each letter an option until one takes the rest (or the next word) as its
    value. Returns the words consumed beyond this one, and whether the options end here
    (python's `-c CODE`)."""
    word = words[i]
    j = 1
    while j < len(word):
        letter = word[j]
        option = sp.short.get(letter)
        rest = word[j + 1 :]
        if option is None:
            out.given.append(Given(i, "-" + letter, ()))
            if rest:
                out.loose.append(rest)  # what follows may be its value
            j += 1
            continue
        ends = sp.style == "python" and letter in "cm"
        if option.arity == REQUIRED:
            if rest:
                out.given.append(Given(i, "-" + letter, (option,), rest))
                return 0, ends
            if i + 1 < len(words):
                out.given.append(Given(i, "-" + letter, (option,), words[i + 1], i + 1))
                return 1, ends
            out.given.append(Given(i, "-" + letter, (option,)))
            return 0, ends
        if option.arity == OPTIONAL:
            out.given.append(Given(i, "-" + letter, (option,), rest or None))
            return 0, False
        out.given.append(Given(i, "-" + letter, (option,)))
        j += 1
    return 0, False


def _read_tar_bundle(sp: Spec, words: Sequence[str]) -> Reading:
    """`tar czf out.tar -T list dir`: the first word bundles letters, and each letter that
    takes a value takes the next word after the bundle, in order; the rest reads as usual."""
    out = Reading()
    letters, following = words[0], 1
    for letter in letters:
        option = sp.short.get(letter)
        if option is None:
            out.given.append(Given(0, "-" + letter, ()))
        elif option.arity == REQUIRED and following < len(words):
            out.given.append(Given(0, "-" + letter, (option,), words[following], following))
            following += 1
        else:
            out.given.append(Given(0, "-" + letter, (option,)))
    rest = read(sp, ["-", *words[following:]])  # "-": an operand standing for the bundle
    shift = following - 1
    out.given += [
        Given(
            g.index + shift,
            g.spelled,
            g.options,
            g.value,
            None if g.value_index is None else g.value_index + shift,
        )
        for g in rest.given
    ]
    out.operands += [k + shift for k in rest.operands if k > 0]
    out.maybe_values += [k + shift for k in rest.maybe_values]
    out.loose += rest.loose
    out.end = len(words)
    return out


def _read_find(sp: Spec, words: Sequence[str]) -> Reading:
    """find [-H -L -P -D opts -Olevel] [path...] [expression]: predicates are words of their
    own with a fixed number of values; `-exec` and its peers run to `;` or `+`."""
    out = Reading()
    i, n = 0, len(words)
    while (i < n and words[i] in ("-H", "-L", "-P", "-D")) or (
        i < n and re.fullmatch(r"-O[0-9]*", words[i])
    ):
        word = words[i]
        option = sp.long.get(word[:2] if word.startswith("-O") else word)
        if word == "-D" and i + 1 < n:
            out.given.append(Given(i, word, (option,) if option else (), words[i + 1], i + 1))
            i += 2
            continue
        value = word[2:] or None if word.startswith("-O") else None
        out.given.append(Given(i, word[:2] if value else word, (option,) if option else (), value))
        i += 1
    while (
        i < n
        and not (words[i].startswith("-") and len(words[i]) > 1)
        and words[i] not in ("(", "!")
    ):
        out.operands.append(i)  # the starting points
        i += 1
    while i < n:
        word = words[i]
        if word in FIND_OPERATORS:
            i += 1
            continue
        if not word.startswith("-") or len(word) == 1:
            out.operands.append(i)  # find will refuse it; still a word to check
            i += 1
            continue
        if re.fullmatch(r"-newer[aBcmt][aBcmt]", word):
            options: tuple[Option, ...] = (Option((word,), REQUIRED),)
        else:
            options = sp.lookup(word)
        arity = options[0].arity if len(options) == 1 else None
        if arity == COMMAND:
            end = next((j for j in range(i + 1, n) if words[j] in (";", "+")), n)
            out.given.append(Given(i, word, options, " ".join(words[i + 1 : end])))
            i = end + 1
            continue
        if arity is None or arity == NONE:
            out.given.append(Given(i, word, options))
            if arity is None and i + 1 < n:
                out.maybe_values.append(i + 1)
            i += 1
            continue
        count = arity  # find's tables count the words a predicate takes
        for k in range(1, count + 1):
            if i + k < n:
                out.given.append(Given(i, word, options, words[i + k], i + k))
        i += count + 1
    out.end = n
    return out
