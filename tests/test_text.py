"""Normalization, cue tokens and answer classification: pure functions."""

from __future__ import annotations

import pytest

from talos_ls.gates.question_queue import (
    ANSWERED,
    DEFLECTED,
    DEFLECTION_PHRASES,
    UNRECOGNIZED,
    classify_answer,
    cue_tokens_for,
    normalize_text,
)

OPTIONS = [{"label": "Morning"}, {"label": "afternoon"}]


def test_deflection_phrases_are_the_twenty():
    assert len(DEFLECTION_PHRASES) == 20
    assert {"i dont know", "not now", "idk", "nevermind"} <= DEFLECTION_PHRASES
    assert all(normalize_text(p) == p for p in DEFLECTION_PHRASES)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("  Hello,   World! ", "hello world"),
        ("I don’t know", "i dont know"),  # U+2019
        ("«Straße»", "strasse"),  # casefold, Unicode quotes
        ("ＦＵＬＬ　ｗｉｄｔｈ", "full width"),  # NFKC
        ("a+b=c", "abc"),  # ASCII symbols in string.punctuation
        ("¿Qué?", "qué"),
        ("…", ""),
    ],
)
def test_normalize_text(text, expected):
    assert normalize_text(text) == expected


def test_cue_tokens_ascii_and_stopwords():
    assert cue_tokens_for("What's the deploy target, prefer staging?", "yes") == [
        "deploy",
        "staging",
        "target",
    ]
    assert cue_tokens_for("snake_case it's") == ["case", "snake"]  # "_" and "'" separate


def test_cue_tokens_unicode():
    assert cue_tokens_for("Café déjà vu 会议 naïve") == ["café", "déjà", "naïve", "会议"]
    assert cue_tokens_for("部署会议") == ["会议", "署会", "部署"]
    assert cue_tokens_for("会") == []  # a lone ideograph yields nothing
    assert cue_tokens_for("テスト") == ["スト", "テス"]
    assert cue_tokens_for("서버설정") == ["버설", "서버", "설정"]
    assert cue_tokens_for("API设计文档") == sorted(["api", "设计", "计文", "文档"])
    assert cue_tokens_for("ＤＥＰＬＯＹ") == ["deploy"]


@pytest.mark.parametrize(
    "reply, expected",
    [
        ("Morning.", (ANSWERED, 0)),
        ("  AFTERNOON ", (ANSWERED, 1)),
        ("2", (ANSWERED, 1)),
        ("I don't know", (DEFLECTED, None)),
        ("I don’t know", (DEFLECTED, None)),
        ("skip", (DEFLECTED, None)),
        ("Rather not say.", (DEFLECTED, None)),
        ("morning, I think", (UNRECOGNIZED, None)),
        ("3", (UNRECOGNIZED, None)),
        ("0", (UNRECOGNIZED, None)),
        ("", (UNRECOGNIZED, None)),
        ("?!", (UNRECOGNIZED, None)),
    ],
)
def test_classify_answer(reply, expected):
    assert classify_answer(OPTIONS, reply) == expected


def test_deflection_wins_over_a_matching_label():
    assert classify_answer([{"label": "later"}, {"label": "now"}], "later") == (DEFLECTED, None)


def test_digit_label_clashing_with_an_index_is_unrecognized():
    assert classify_answer([{"label": "2"}, {"label": "x"}], "2") == (UNRECOGNIZED, None)
