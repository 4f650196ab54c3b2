"""The query's words as the index sees them: their index terms, how rare each is (IDF),
and the completion of a word still being typed.

May import ``search.query``, ``search.ranking``, ``index.cjk`` and the read interface
(``index.reads.Reads``); no SQL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from notewell.index.cjk import has_cjk
from notewell.index.reads import Reads
from notewell.search.query import Query, fts_terms
from notewell.search.ranking import Ranking

_LAST_WORD = re.compile(r"\w+\W*$")


@dataclass(frozen=True)
class QueryTerm:
    """One distinct query word: its FTS5 phrase, the index terms it stands for (the last
    one a prefix while typed), and how many chunks hold it (``df``; for several terms, the
    rarest's) as IDF."""

    word: str
    phrase: str
    tokens: tuple[str, ...]
    prefix: bool
    df: int
    idf: float


def query_terms(q: Query, reads: Reads) -> list[QueryTerm]:
    """The query's distinct words as FTS5 indexed them, with how rare each is."""
    vocab = reads.vocabulary()
    out = []
    for word, phrase in zip(dict.fromkeys(w for w in q.words if w),
                            fts_terms(q.words, q.partial)):
        prefix = phrase.endswith("*")
        found = tuple(reads.query_tokens(word, prefix))
        if not found:
            continue
        dfs = [vocab.df(t) for t in found[:-1]]
        dfs.append(vocab.prefix_df(found[-1]) if prefix else vocab.df(found[-1]))
        if not min(dfs) and has_cjk(word):
            # A character pair no passage holds mostly straddles two words of a query
            # written without spaces ("肉怎" in "红烧肉怎么做"): no evidence either way, and
            # as the rarest term it would outweigh the pairs that match in coverage.
            continue
        out.append(QueryTerm(word, phrase, found, prefix, min(dfs), vocab.idf(min(dfs))))
    return out


def dense_text(q: Query, lexical: list[int], reads: Reads, ranking: Ranking) -> str:
    """What the model reads for a query. A word still being typed is completed from the
    keyword hits ``lexical`` (chunk ids, best first: "delete remote bra" -> "delete remote
    branch"): the model would read "bra" as a word of its own. Without a completion, a
    fragment shorter than ``min_partial_for_dense`` is left out rather than embedded."""
    if not q.partial or not q.words:
        return q.text
    fragment = q.words[-1]
    cut = _LAST_WORD.search(q.text)
    head = q.text[: cut.start()] if cut else q.text
    top = list(lexical[: ranking.complete_from])
    completion = (complete(fragment, reads.titles_and_texts(top))
                  if len(fragment) >= 2 and top else None)
    if completion:
        return head + completion
    if len(fragment) < ranking.min_partial_for_dense and head.strip():
        return head.strip()
    return q.text


def complete(fragment: str, texts: list[tuple[str, str]]) -> str | None:
    """The commonest word starting with ``fragment`` in ``texts`` ((title, passage) of the
    best keyword hits), unless the fragment is itself a word there (a finished query stays
    as typed)."""
    pattern = re.compile(r"\b" + re.escape(fragment) + r"\w*", re.IGNORECASE)
    counts: dict[str, int] = {}
    for title, text in texts:
        for word in pattern.findall(f"{title}\n{text}"):
            word = word.lower()
            counts[word] = counts.get(word, 0) + 1
    if not counts or fragment in counts:
        return None  # nothing to complete to, or the fragment is already a word here
    return min(counts, key=lambda w: (-counts[w], len(w), w))
