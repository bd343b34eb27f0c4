"""Text normalization and cue tokens, shared by the memory layer and the question queue.

One normalization behind dedup, option matching and deflections, so they can never disagree on
what "the same text" means; one tokenizer behind relevance timing and fact search. Both are
Unicode-aware: NFKC, casefolding, every script's letters and digits, and character bigrams for
ideographs, kana and hangul, which do not separate words with spaces.
"""

from __future__ import annotations

import itertools
import re
import string
import unicodedata

CUE_STOPWORDS = frozenset(
    (
        "about all and any are but can could did does for from had has have here how into its "
        "not one our prefer should still than that the their them then there they this true was "
        "were what when where which who whom why will with would yes you your"
    ).split(" ")
)

_ASCII_PUNCT = frozenset(string.punctuation)
_WORD_RUN = re.compile(r"[^\W_]+")
# Ideographs, kana and hangul: no spaces between words, so timed by character bigrams.
_CJK_RANGES = (
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x3005, 0x3007),  # ideographic iteration mark, closing mark, number zero
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3130, 0x318F),  # Hangul Compatibility Jamo
    (0x31F0, 0x31FF),  # Katakana Phonetic Extensions
    (0x3400, 0x4DBF),  # CJK Extension A
    (0x4E00, 0x9FFF),  # CJK Unified Ideographs
    (0xA960, 0xA97F),  # Hangul Jamo Extended-A
    (0xAC00, 0xD7FF),  # Hangul Syllables, Jamo Extended-B
    (0xF900, 0xFAFF),  # CJK Compatibility Ideographs
    (0x20000, 0x3FFFF),  # CJK Extensions B and later
)


def normalize_text(text: str) -> str:
    """NFKC, casefold, drop Unicode punctuation and ASCII punctuation, collapse whitespace.

    The one normalization behind dedup, option matching and deflections, so "I don’t know" (curly
    apostrophe) is the deflection "i dont know"."""
    folded = unicodedata.normalize("NFKC", str(text)).casefold()
    kept = "".join(
        ch
        for ch in folded
        if ch not in _ASCII_PUNCT and not unicodedata.category(ch).startswith("P")
    )
    return " ".join(kept.split())


def _is_cjk(ch: str) -> bool:
    cp = ord(ch)
    return cp >= _CJK_RANGES[0][0] and any(lo <= cp <= hi for lo, hi in _CJK_RANGES)


def word_tokens(text: str) -> list[str]:
    """Every token of `text` in order, repeats kept (term frequencies for search): letter-and-
    digit words of 3+ characters that are not stopwords, and bigrams of CJK runs."""
    out: list[str] = []
    folded = unicodedata.normalize("NFKC", str(text)).casefold()
    for run in _WORD_RUN.findall(folded):
        if run.isascii():  # the common case: no CJK to split out
            if len(run) >= 3 and run not in CUE_STOPWORDS:
                out.append(run)
            continue
        for cjk, chars in itertools.groupby(run, key=_is_cjk):
            part = "".join(chars)
            if cjk:
                out.extend(part[i : i + 2] for i in range(len(part) - 1))
            elif len(part) >= 3 and part not in CUE_STOPWORDS:
                out.append(part)
    return out


def cue_tokens_for(*texts: str) -> list[str]:
    """Relevance-timing tokens, sorted and distinct: `word_tokens` of every text."""
    return sorted({tok for text in texts for tok in word_tokens(text)})


def fold(word: str) -> str:
    """Lowered, accents dropped: "Contrôleur" -> "controleur"."""
    decomposed = unicodedata.normalize("NFKD", word.casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))
