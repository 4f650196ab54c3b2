"""Which words are words: how common each word is in English, German and Spanish, from
wordfreq's word-frequency lists, so typo correction leaves real words alone
(``search.terms.correct``).

The lists are wordfreq's "large" ones (every word used at least once per 100 million
words; each list built from at least five sources), for the Latin-script languages the
demo covers; Chinese and Japanese words are never corrected. Whether a word is a word
does not hang on a guess at the query's language (two to six words say too little, and a
German word in an English query is still a word): a word is as common as it is in
whichever of the three languages uses it most. Only whether a rarer word's correction is
far commoner is judged in the language the whole query reads most like
(``Lexicon.language``: "seeed" in "erly seeed release" is English, where "seed" is 1,000
times commoner, not German, where wordfreq counts it 2.5). Frequencies are on the Zipf
scale (``log10`` of uses per billion words: 3.0 is once per million).

Read from wordfreq's package data, in its documented "cBpack" format (a gzipped msgpack
list: a header, then one list of words per centibel of frequency), without importing
wordfreq: its lookups would hold the three lists as dicts (138 MB) and its import brings
``regex``, ``langcodes`` and ``ftfy`` (12.5 MB). Only the ASCII words are kept (nothing
else is ever corrected), as a sorted array of their hashes with one Zipf value per language:
9.5 MB for 860,000 words (10 MB more resident), read in 0.6-0.8 s. The daemon reads it
while warming up (``shared``), never the keystroke client. Imports ``memory`` only.
"""

from __future__ import annotations

import gzip
import importlib.util
import logging
import os
import threading
import time
from collections.abc import Iterable

import msgpack
import numpy as np

from notewell.memory import release_memory

log = logging.getLogger(__name__)

LANGUAGES = ("en", "de", "es")
_STEP = 20  # Zipf values kept to 1/20 (wordfreq's own precision is 1/100)


class LexiconError(Exception):
    """wordfreq's lists cannot be read; the message says what to do."""


class Lexicon:
    """How common each word is, per language of ``LANGUAGES`` (Zipf; 0 for a word a list
    does not hold). ``keys``: sorted ``hash`` of each word (this process's own hashes:
    never written anywhere); ``zipfs``: one row per key, ``_STEP`` times the Zipf value."""

    def __init__(self, keys: np.ndarray, zipfs: np.ndarray) -> None:
        self.keys = keys
        self.zipfs = zipfs

    def __len__(self) -> int:
        return len(self.keys)

    def zipf_by_language(self, word: str) -> tuple[float, ...]:
        """``word``'s Zipf value in each language (all 0 when no list holds it)."""
        key = hash(word.lower())
        at = int(np.searchsorted(self.keys, key))
        if at == len(self.keys) or self.keys[at] != key:
            return (0.0,) * len(LANGUAGES)
        return tuple(int(z) / _STEP for z in self.zipfs[at])

    def zipf(self, word: str) -> float:
        """How common ``word`` is in the language that uses it most (0: none does)."""
        return max(self.zipf_by_language(word))

    def language(self, words: Iterable[str]) -> int | None:
        """Which of ``LANGUAGES`` (its index) ``words`` read most like: the one whose
        Zipf values for them sum highest; None when no list holds any of them."""
        totals = [0.0] * len(LANGUAGES)
        for word in words:
            totals = [t + z for t, z in zip(totals, self.zipf_by_language(word))]
        best = max(totals)
        return totals.index(best) if best > 0 else None

    @property
    def nbytes(self) -> int:
        return self.keys.nbytes + self.zipfs.nbytes


def wordfreq_data() -> str:
    """The folder of wordfreq's lists, found without importing it."""
    spec = importlib.util.find_spec("wordfreq")
    if spec is None or not spec.submodule_search_locations:
        raise LexiconError("wordfreq is not installed, so typos are not corrected; "
                           "install notewell's dependencies again (pip install 'wordfreq>=3.1')")
    return os.path.join(next(iter(spec.submodule_search_locations)), "data")


def read(languages: tuple[str, ...] = LANGUAGES, data: str | None = None) -> Lexicon:
    """The lexicon of ``languages`` from wordfreq's large lists (in ``data``)."""
    data = data or wordfreq_data()
    per_language = [_read_list(os.path.join(data, f"large_{lang}.msgpack.gz"))
                    for lang in languages]
    counts = [len(k) for k, _ in per_language]
    hashes = np.concatenate([k for k, _ in per_language])
    values = np.concatenate([v for _, v in per_language])
    del per_language  # each step frees what it replaced: 30 MB at most for a moment
    order = np.argsort(hashes, kind="stable")
    hashes, values = hashes[order], values[order]
    column = np.repeat(np.arange(len(languages), dtype=np.uint8), counts)[order]
    del order
    first = np.ones(len(hashes), dtype=bool)  # a word's first row: one row per word
    first[1:] = hashes[1:] != hashes[:-1]
    keys = hashes[first]
    del hashes
    zipfs = np.zeros((len(keys), len(languages)), dtype=np.uint8)
    zipfs[np.cumsum(first, dtype=np.int32) - 1, column] = values
    return Lexicon(keys, zipfs)


def _read_list(path: str) -> tuple[np.ndarray, np.ndarray]:
    """(hashes, ``_STEP`` x Zipf) of the ASCII words of one cBpack file, one bin of words
    at a time (a whole list at once would be 100 MB of strings for a moment)."""
    keys: list[np.ndarray] = []
    values: list[np.ndarray] = []
    try:
        with gzip.open(path, "rb") as f:
            unpacker = msgpack.Unpacker(f, raw=False)
            bins = unpacker.read_array_header() - 1
            header = unpacker.unpack()
            if not isinstance(header, dict) or (header.get("format"), header.get("version")) \
                    != ("cB", 1):
                raise LexiconError(f"{path}: not wordfreq's cBpack format 1 ({header!r}); "
                                   "this notewell reads wordfreq 3.x's lists")
            for centibels in range(bins):  # bin i: words at 10^(-i/100) of all words
                words = [w for w in unpacker.unpack() if w.isascii() and w.isalpha()]
                if words:
                    keys.append(np.fromiter(map(hash, words), np.int64, len(words)))
                    zipf = (900 - centibels) / 100  # cB -i is Zipf 9 - i/100
                    values.append(np.full(len(words), round(zipf * _STEP), np.uint8))
    except FileNotFoundError:
        raise LexiconError(f"{path} is missing; reinstall wordfreq>=3.1") from None
    except (ValueError, TypeError, msgpack.UnpackException, EOFError, OSError) as e:
        raise LexiconError(f"{path} cannot be read ({e}); reinstall wordfreq>=3.1") from None
    if not keys:
        raise LexiconError(f"{path} holds no words; reinstall wordfreq>=3.1")
    return np.concatenate(keys), np.concatenate(values)


_LOCK = threading.Lock()
_SHARED: list[Lexicon | None] = []  # once read: the lexicon, or None when it cannot be


def shared() -> Lexicon | None:
    """The process's lexicon, read by its first caller: the daemon's warm-up (a query
    that asks meanwhile waits for it, at most once, for under a second) or a
    one-shot command's first query with a possible typo. None when it cannot be read
    (logged once): typos are then not corrected, so no real word is."""
    if not _SHARED:
        with _LOCK:
            if not _SHARED:
                start = time.monotonic()
                try:
                    _SHARED.append(read())
                    release_memory()  # the lists' strings, read a bin at a time
                    # debug: a one-shot command's stderr is for what the user asked
                    log.debug("word lists for typos: %d words in %.2f s", len(_SHARED[0]),
                             time.monotonic() - start)
                except LexiconError as e:
                    log.warning("%s", e)
                    _SHARED.append(None)
    return _SHARED[0]
