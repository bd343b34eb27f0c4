"""Light English suffix folding, shared by fact search and the question queue's relevance.

One function on both sides so that a request finds a fact and times a question about that fact
with the same notion of "the same word": "fix the failing test" finds "tests use pytest" in
search, and a question about "tests use pytest" is relevant to that request.
"""

from __future__ import annotations

from ..text import word_tokens

_SUFFIXES = (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", ""))


def stem(token: str) -> str:
    """Light English suffix folding, so "deploys", "deployed" and "deploying" find "deploy".
    Deliberately crude: it only has to make the same word meet itself. A stem keeps at least
    three characters ("used" stays "used") and "-ss" words are left alone ("class")."""
    for suffix, keep in _SUFFIXES:
        if token.endswith(suffix) and len(token) - len(suffix) >= 3 and not token.endswith("ss"):
            return token[: len(token) - len(suffix)] + keep
    return token


def stemmed_tokens(text: str) -> list[str]:
    """`word_tokens` of `text`, each folded by `stem`: fact search's terms."""
    return [stem(t) for t in word_tokens(text)]
