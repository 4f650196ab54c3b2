"""The query's words as the index sees them: their index terms, how rare each is (IDF),
the completion of a word still being typed, and typos read as the words meant.

Typos: a word no passage holds (or only a handful, while a close word is common) is read
as the commonest indexed word one edit away (a letter dropped, doubled, swapped with its
neighbour or replaced), two from ``Ranking.typo_long_word`` letters; the word being typed
is corrected as a prefix, one edit. One edit is found by stemming every variant of the
word with FTS5's own tokenizer in one call (so "postgress" finds "postgres", indexed as
``postgr``), two by ``index.terms.NearTerms`` over the indexed terms. In coverage a
correction weighs ``Ranking.typo_coverage`` of a typed word (``QueryTerm.weight``).

A real word is never a typo: one that English, German or Spanish use at least
``Ranking.typo_real_zipf`` (``search.lexicon``: "shred" is not "shared"). A rarer word
the lists hold (a rare word, or a common misspelling: "recieve") is corrected only to a
word ``Ranking.typo_zipf_gap`` more common in the query's language ("receive", not
"laggy" -> "maggy"); a word of four letters only to a real word no shorter. Keywords look every
correction up; the model reads one instead of the word typed only when the evidence is
strong (``QueryTerm.strong``, ``dense_text``).

May import ``search.query``, ``search.ranking``, ``search.lexicon``, ``index.cjk`` and the
read interface (``index.reads.Reads``); no SQL.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from notewell.index.cjk import has_cjk
from notewell.index.reads import Reads
from notewell.search.lexicon import Lexicon
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
    correction: str | None = None  # the word a typo was read as (its phrase and tokens)
    # Its share of the query's information in coverage (``fusion.coverage``): a
    # correction is a guess, so a chunk that holds it is trusted less than one that holds
    # a word as typed (``Ranking.typo_coverage``).
    weight: float = 1.0
    # The model reads the correction (instead of the word typed, or beside it when
    # passages hold that too): the language prefers it ``typo_zipf_gap`` over the word
    # typed, or the word typed is no word and no passage's, one edit from it, and has
    # more than four letters. Otherwise only keywords look it up.
    strong: bool = True


def query_terms(q: Query, reads: Reads, ranking: Ranking | None = None,
                known: Callable[[str], bool] | None = None,
                words: Callable[[], Lexicon | None] | None = None) -> list[QueryTerm]:
    """The query's distinct words as FTS5 indexed them, with how rare each is; a typo is
    read as the word meant (instead of itself when no passage holds it, beside itself
    when a handful do). ``known``: whether a word is a real word (the model's vocabulary,
    ``Embedder.knows``); a real word the notes do not use is not a typo. ``words``: how
    common words are (``search.lexicon``, asked for once a word may be a typo); without
    it no word is corrected."""
    r = ranking or Ranking()
    vocab = reads.vocabulary()
    out = []
    typing = None  # the word being typed, as typed
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
        term = QueryTerm(word, phrase, found, prefix, min(dfs), vocab.idf(min(dfs)))
        if prefix:
            typing = term
        real = known is not None and known(word)
        fix = (correct(word, prefix, term.df, reads, vocab, r, known, words, q.words)
               if len(found) == 1 and not real and not has_cjk(word) else None)
        if term.df or fix is None:
            out.append(term)
        if fix is not None:
            surface, token, df, strong = fix
            out.append(QueryTerm(word, f'"{surface}"*' if prefix else f'"{surface}"',
                                 (token,), prefix, df, vocab.idf(df), surface,
                                 r.typo_coverage, strong))
    return _typed_in_context(out, typing, reads)


def _typed_in_context(found: list[QueryTerm], typing: QueryTerm | None, reads: Reads
                      ) -> list[QueryTerm]:
    """``found`` with the correction of the word being typed (``typing``: that word as
    typed) taken back when no passage holds it beside another word of the query that
    the index holds: a prefix one edit away matches many words, and one that never
    meets the rest of the query was not meant ("dunkles Brot selbst machen" is German,
    not "... machin*")."""
    fix = next((t for t in found if t.prefix and t.correction), None)
    if fix is None or typing is None:
        return found
    others = [t for t in found if t.df and t.word != fix.word]
    if not others or reads.together(fix, others):
        return found
    return [t for t in found if t is not fix and t is not typing] + [typing]


_ALPHABET = "abcdefghijklmnopqrstuvwxyz"


def edits1(word: str) -> list[str]:
    """Every word one edit from ``word``: a letter dropped, two neighbours swapped, a letter
    replaced or added (a-z), in that order, without repeats."""
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    out = [a + b[1:] for a, b in splits if b]
    out += [a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1 and b[0] != b[1]]
    out += [a + c + b[1:] for a, b in splits if b for c in _ALPHABET if c != b[0]]
    out += [a + c + b for a, b in splits for c in _ALPHABET]
    return list(dict.fromkeys(w for w in out if w != word))


def _undoubles(word: str, variant: str) -> bool:
    """``variant`` is ``word`` with one of two equal neighbouring letters dropped."""
    return any(word[i] == word[i + 1] and word[:i] + word[i + 1:] == variant
               for i in range(len(word) - 1))


def correct(word: str, prefix: bool, df: int, reads: Reads, vocab, r: Ranking,
            known: Callable[[str], bool] | None = None,
            words: Callable[[], Lexicon | None] | None = None,
            context: tuple[str, ...] = ()) -> tuple[str, str, int, bool] | None:
    """(the word meant, its index term, chunks holding it, whether the evidence is strong:
    ``QueryTerm.strong``) for a typo, or None: for a word no passage holds, or (not while
    typed) only ``typo_rare_df`` do while the close word is ``typo_common_ratio`` times
    as common. Never for a real word (``typo_real_zipf`` in ``words``); for a rarer word
    the lists hold, only to a word ``typo_zipf_gap`` more common in the language the
    query (``context``: its words) reads most like; for a word of
    ``typo_short_letters``, only to a real word, when no passage holds it. A variant
    that is a word (``known`` or ``words``) wins over one that only stems to an indexed
    term ("figness": "fitness", not "fixness"); then the commonest in the notes, then
    in the language. Kept per vocabulary (typing asks again)."""
    short = len(word) < r.typo_min_letters
    if (not r.typos or words is None or len(word) < r.typo_short_letters
            or not word.isascii() or not word.isalpha()
            or df > (0 if prefix or short else r.typo_rare_df)):
        return None
    lexicon = words()
    if lexicon is None:
        return None
    typed = lexicon.zipf_by_language(word)
    if max(typed) >= r.typo_real_zipf:
        return None  # a word of the language, whether or not the notes use it
    # A word the lists hold: judged in the query's language (see ``_correct``).
    lang = lexicon.language(w for w in context if w.isascii()) if max(typed) > 0 else None
    memo = vocab.corrections
    key = (word, prefix, df, lang, r.typo_long_word, r.typo_common_ratio, r.typo_real_zipf,
           r.typo_zipf_gap, r.typo_min_letters, known is not None, lexicon)
    if key in memo:
        return memo[key]
    fix = _correct(word, prefix, df, reads, vocab, r, known, lexicon, lang)
    if len(memo) > 2048:
        memo.clear()
    memo[key] = fix
    return fix


def _correct(word: str, prefix: bool, df: int, reads: Reads, vocab, r: Ranking,
             known: Callable[[str], bool] | None, words: Lexicon, lang: int | None
             ) -> tuple[str, str, int, bool] | None:
    """``correct`` once it is known to be worth looking: ``lang`` is the query's language
    when the lists hold the word typed (then the language must prefer the correction by
    ``typo_zipf_gap``), else None (then only the index speaks)."""
    own_zipf = words.zipf_by_language(word)[lang] if lang is not None else 0.0
    short = len(word) < r.typo_min_letters

    def preferred(variant: str) -> bool:
        zipfs = words.zipf_by_language(variant)
        if short and (len(variant) < len(word) or max(zipfs) < r.typo_real_zipf):
            # Four letters: many abbreviations are one edit from a term, most often a
            # shorter one ("sbds" is not "sds", "dlns" not "dns").
            return False
        return lang is None or zipfs[lang] >= own_zipf + r.typo_zipf_gap

    need = max(1.0, df * r.typo_common_ratio) if df else 1.0
    variants = edits1(word)
    stems = reads.query_tokens(" ".join(variants), False)
    if len(stems) != len(variants):  # a variant the tokenizer split: ask one by one
        stems = [(reads.query_tokens(v, False) or [""])[0] for v in variants]
    own = (reads.query_tokens(word, False) or [""])[0]
    best: tuple | None = None
    held = vocab.has_prefix if prefix else vocab.has
    for rank, (variant, stem) in enumerate(zip(variants, stems)):
        if not stem or stem == own or not held(stem):  # most variants: one cheap test
            continue
        found = vocab.prefix_df(stem) if prefix else vocab.df(stem)
        if found < need or not preferred(variant):
            continue
        # While typing, a shorter prefix is a vaguer one ("login" -> "logi*"): only a
        # doubled letter is dropped ("vaccu" -> "vacu"), and a stemmed "s" comes last.
        if prefix and len(variant) < len(word) and not _undoubles(word, variant):
            continue
        shorter = prefix and len(stem) < len(own)
        zipf = words.zipf(variant)
        unreal = not prefix and not (zipf > 0 or (known is not None and known(variant)))
        candidate = (shorter, unreal, -found, -zipf, rank, variant, stem, found)
        if best is None or candidate < best:
            best = candidate
    if best is not None:
        # Strong: the language prefers it, or the word typed is no word, no passage's;
        # never for four letters (til: "keeb" is a keyboard, not "keep").
        return (*best[5:], (lang is not None or df == 0) and not short)
    if not prefix and len(own) >= r.typo_long_word:
        # Two edits between stems: not both spent on length ("uncultur" is not "cultur").
        near = [(d, -vocab.df(t), t) for t, d in vocab.near(own, 2)
                if abs(len(t) - len(own)) <= 1]
        near = [n for n in near if -n[1] >= need and preferred(n[2])]
        for _, neg_df, term in sorted(near):
            if reads.query_tokens(term, False) == [term]:  # FTS5 reads it back as itself
                # Two edits are a guess unless the language says so.
                return (term, term, -neg_df, lang is not None)
    return None


def corrected_text(text: str, found: list[QueryTerm]) -> str:
    """``text`` with its typos read as the words meant, where the evidence is strong
    (``QueryTerm.strong``): instead of a word no passage holds, beside one a handful do."""
    fixes = {t.word: t.correction for t in found if t.correction and t.strong}
    if not fixes:
        return text
    kept = {t.word for t in found if not t.correction}

    def fix(m: re.Match[str]) -> str:
        word = m.group(0)
        meant = fixes.get(word.lower())
        if meant is None:
            return word
        return f"{word} {meant}" if word.lower() in kept else meant

    return re.sub(r"\w+", fix, text)


def dense_text(q: Query, lexical: list[int], reads: Reads, ranking: Ranking,
               found: list[QueryTerm] | None = None) -> str:
    """What the model reads for a query: its typos corrected where the evidence is strong
    (``found``: its terms). A word still being typed is completed from the keyword hits
    ``lexical`` (chunk ids, best first: "delete remote bra" -> "delete remote branch"):
    the model would read "bra" as a word of its own. Without a completion, a fragment
    shorter than ``min_partial_for_dense`` is left out rather than embedded."""
    text = corrected_text(q.text, found or [])
    if not q.partial or not q.words:
        return text
    fragment = q.words[-1]
    for t in found or []:
        if t.prefix and t.correction and t.strong and t.word == fragment:
            fragment = t.correction
    cut = _LAST_WORD.search(text)
    head = text[: cut.start()] if cut else text
    top = list(lexical[: ranking.complete_from])
    completion = (complete(fragment, reads.titles_and_texts(top))
                  if len(fragment) >= 2 and top else None)
    if completion:
        return head + completion
    if len(fragment) < ranking.min_partial_for_dense and head.strip():
        return head.strip()
    return text


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
