"""Chinese, Japanese and Korean text as the keyword index reads it: overlapping bigrams.

These scripts put no spaces between words, so FTS5's ``unicode61`` tokenizer reads a whole
run (``我住在东京附近``) as one term and a search for ``东京`` finds nothing. Before text
reaches FTS5, each run of CJK characters is cut into overlapping pairs of characters
(``我住 住在 在东 东京 京附 附近``) and, in passages, the run's last character on its own
(``近``), so every character starts some term. A query word becomes its pairs, read by
FTS5 as one phrase (consecutive terms), so ``データベース`` finds exactly the passages holding
that string; a word of one character is a prefix query (``京*``). Text without CJK
characters is returned unchanged, so English terms, documents lengths and BM25 scores
are exactly what they were. Chosen over FTS5's ``trigram`` tokenizer, which cannot find
two-character words (most Chinese words) and would need a second table with its own BM25.

Imports nothing of notewell.
"""

from __future__ import annotations

import re

# Han (with extensions and compatibility ideographs), kana (with the long-vowel mark and
# half-width forms), Hangul syllables and jamo, bopomofo, CJK radicals.
CJK_CHARS = (
    "\u1100-\u11ff\u2e80-\u2fdf\u3005-\u3007\u3040-\u309f\u30a0-\u30ff\u3100-\u312f"
    "\u3130-\u318f\u31a0-\u31bf\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f"
    "\uac00-\ud7af\ud7b0-\ud7ff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f"
)
RUN = re.compile(f"[{CJK_CHARS}]+")
ONE = re.compile(f"^[{CJK_CHARS}]$")


def has_cjk(text: str) -> bool:
    return RUN.search(text) is not None


def segment(text: str) -> str:
    """A passage's text with each CJK run as its bigrams and its last character."""
    if not text or RUN.search(text) is None:
        return text
    return RUN.sub(_passage_run, text)


def segment_query(text: str) -> str:
    """A query's text with each CJK run as its bigrams (a one-character run as itself)."""
    if not text or RUN.search(text) is None:
        return text
    return RUN.sub(_query_run, text)


def is_single(word: str) -> bool:
    """A query word that is one CJK character: searched as a prefix of the pairs."""
    return ONE.match(word) is not None


def _pairs(run: str) -> list[str]:
    return [run[i : i + 2] for i in range(len(run) - 1)] or [run]


def _passage_run(m: re.Match) -> str:
    run = m.group(0)
    terms = _pairs(run) + ([run[-1]] if len(run) > 1 else [])
    return " " + " ".join(terms) + " "


def _query_run(m: re.Match) -> str:
    return " " + " ".join(_pairs(m.group(0))) + " "
