"""Typos in a golden set's queries, seeded the same way on every machine, and what typo
correction does to ranking (``notewell eval --typos``).

The seeder (``seed_typos``) gives each English query one or two typos, each on its own
word of four letters or more: a letter dropped, doubled, swapped with the next, or
replaced by a neighbouring key (QWERTY). Every choice comes from SHA-256 of the seed, the
query's id and its text, so a set seeds the same on every machine and Python version
(``random``'s methods may change between versions; only its ``random()`` is promised
stable). A query whose type names another language (``de``, ``zh``: two letters other
than ``en``) is left out of the typo set.

``compare`` ranks a set clean and with typos, typo correction on and off
(``Ranking.typos``), and lists the queries ranked worse with correction on. May import
``evaluation.metrics``, ``evaluation.runner``, ``index``, ``model`` and ``search``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Callable, Sequence

from notewell.evaluation import runner
from notewell.evaluation.metrics import EvalQuery, aggregate
from notewell.evaluation.runner import Identify, rank_queries
from notewell.index.database import Index
from notewell.model.embedding import Embedder
from notewell.search.query import Query
from notewell.search.ranking import Ranking
from notewell.search.searcher import Searcher

SEED = "notewell-typos-1"
KINDS = ("drop", "double", "swap", "neighbour")
MIN_LETTERS = 4
_WORD = re.compile(r"[A-Za-z]+")
_LANGUAGE_TYPE = re.compile(r"[a-z]{2}")
_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")
_STAGGER = (0.0, 0.25, 0.75)  # how far each row of keys sits right of the one above


def _key_centres() -> dict[str, tuple[float, int]]:
    return {ch: (i + _STAGGER[r], r) for r, row in enumerate(_ROWS) for i, ch in enumerate(row)}


_CENTRES = _key_centres()
# Keys touching a key: the same row's either side, and the two or three above and below.
NEIGHBOURS = {ch: "".join(o for o, (ox, orow) in _CENTRES.items()
                          if o != ch and abs(orow - row) <= 1 and abs(ox - x) <= 1)
              for ch, (x, row) in _CENTRES.items()}


class _Draws:
    """Numbers below ``k``, one after another, from SHA-256 of a key and a counter."""

    def __init__(self, key: str) -> None:
        self._key = key.encode("utf-8")
        self._n = 0

    def below(self, k: int) -> int:
        digest = hashlib.sha256(self._key + self._n.to_bytes(4, "big")).digest()
        self._n += 1
        return int.from_bytes(digest[:8], "big") % k


def typo(word: str, kind: str, draws: _Draws) -> str:
    """``word`` with one typo of ``kind`` at a drawn place (case kept)."""
    if kind == "swap":
        places = [i for i in range(len(word) - 1) if word[i].lower() != word[i + 1].lower()]
        if not places:  # "aaaa": nothing to swap, a letter dropped instead
            kind = "drop"
        else:
            i = places[draws.below(len(places))]
            return word[:i] + word[i + 1] + word[i] + word[i + 2:]
    i = draws.below(len(word))
    if kind == "drop":
        return word[:i] + word[i + 1:]
    if kind == "double":
        return word[:i + 1] + word[i:]
    keys = NEIGHBOURS[word[i].lower()]
    key = keys[draws.below(len(keys))]
    return word[:i] + (key.upper() if word[i].isupper() else key) + word[i + 1:]


def seed_typos(text: str, key: str, seed: str = SEED) -> str:
    """``text`` with one or two typos on distinct words of ``MIN_LETTERS`` letters or more
    (ASCII letters: "postgres" in "postgres's"), the same for the same ``key`` (a query's
    id), text and seed; unchanged when no word is long enough."""
    words = [m for m in _WORD.finditer(text) if len(m.group()) >= MIN_LETTERS]
    if not words:
        return text
    draws = _Draws(f"{seed}\x00{key}\x00{text}")
    count = min(len(words), 1 + draws.below(2))
    chosen: list[re.Match[str]] = []
    while len(chosen) < count:
        pick = words[draws.below(len(words))]
        if pick not in chosen:
            chosen.append(pick)
    edits = {m.start(): typo(m.group(), KINDS[draws.below(len(KINDS))], draws)
             for m in chosen}
    out, at = [], 0
    for m in sorted(chosen, key=lambda m: m.start()):
        out += [text[at:m.start()], edits[m.start()]]
        at = m.end()
    return "".join(out) + text[at:]


def english(q: EvalQuery) -> bool:
    """Not marked as another language (a two-letter type other than ``en``)."""
    return not (_LANGUAGE_TYPE.fullmatch(q.type) and q.type != "en")


def typo_set(queries: Sequence[EvalQuery], seed: str = SEED) -> list[EvalQuery]:
    """The English queries of a set, each with its typos (``seed_typos``)."""
    return [dataclasses.replace(q, text=seed_typos(q.text, q.id, seed))
            for q in queries if english(q)]


# -- correction on and off ---------------------------------------------------------------------

ON_OFF = (("clean", False), ("clean_off", False), ("typos", True), ("typos_off", True))
WORSE_NDCG = 0.01  # a query counts as ranked worse past this drop in nDCG@10 (or any in R@5)


def compare(index: Index, embedder: Embedder, queries: Sequence[EvalQuery],
            methods: Sequence[str], read: Callable[[str], Query], identify: Identify,
            ranking: Ranking | None = None) -> dict:
    """Rank ``queries`` clean and their typo set (``typo_set``), correction on and off:
    ``{"queries": counts, "clean" | "clean_off" | "typos" | "typos_off": {method: {"all":
    metrics}}, "clean_english": the clean scores of the queries the typo set holds,
    "worse": [the queries ranked worse with correction on]}``."""
    base = ranking or Ranking()
    on, off = (Searcher(index, embedder, dataclasses.replace(base, typos=typos),
                        cache_size=4 * len(queries)) for typos in (True, False))
    typed = typo_set(queries)
    seeded = {q.id for q, clean in zip(typed, (q for q in queries if english(q)))
              if q.text != clean.text}
    sets = {False: list(queries), True: typed}
    scores = {name: rank_queries(on if name in ("clean", "typos") else off, sets[typos],
                                 methods, read, identify)
              for name, typos in ON_OFF}
    out: dict = {"queries": {"clean": len(queries), "typos": len(typed),
                             "seeded": len(seeded)}}
    for name, typos in ON_OFF:
        out[name] = {m: aggregate(per_query, sets[typos])
                     for m, per_query in scores[name].items()}
    out["clean_english"] = {m: aggregate({q.id: per_query[q.id] for q in typed}, typed)
                            for m, per_query in scores["clean"].items()}
    out["worse"] = []
    for name, typos in (("clean", False), ("typos", True)):
        for q in sets[typos]:
            for m in methods:
                now, before = scores[name][m][q.id], scores[name + "_off"][m][q.id]
                if (now["ndcg@10"] < before["ndcg@10"] - WORSE_NDCG
                        or now["recall@5"] < before["recall@5"]):
                    parsed = read(q.text)
                    out["worse"].append({
                        "set": name, "method": m, "id": q.id, "query": q.text,
                        "model_reads": on.dense_text(parsed),
                        "corrections": [[t.word, t.correction, t.strong]
                                        for t in on.query_terms(parsed) if t.correction],
                        "ndcg@10": [round(now["ndcg@10"], 4), round(before["ndcg@10"], 4)],
                        "recall@5": [round(now["recall@5"], 4),
                                     round(before["recall@5"], 4)]})
    return out


def format_comparison(found: dict) -> str:
    """The table ``notewell eval --typos`` prints: Recall@5 / nDCG@10 per method."""
    n = found["queries"]
    lines = [f"{n['clean']} queries clean; {n['typos']} English ones with typos "
             f"({n['seeded']} changed); Recall@5 / nDCG@10, correction on / off:",
             f"  {'method':<10}{'clean':>15}{'clean, off':>15}{'typos':>15}"
             f"{'typos, off':>15}{'typos/clean R@5':>18}"]
    for m in found["clean"]:
        cells = [found[name][m]["all"] for name, _ in ON_OFF]
        clean = found["clean_english"][m]["all"]["recall@5"]
        ratio = found["typos"][m]["all"]["recall@5"] / clean if clean else 0.0
        lines.append(f"  {m:<10}" + "".join(f"{c['recall@5']:>8.3f} /{c['ndcg@10']:.3f}"
                                             for c in cells) + f"{ratio:>18.3f}")
    worse = [w for w in found["worse"] if w["set"] == "clean"]
    typos = len(found["worse"]) - len(worse)
    lines.append(f"clean queries ranked worse with correction on than off: {len(worse) or 'none'}"
                 f" (with typos: {typos}; --json lists them)")
    for w in worse:
        lines.append(f"  {w['method']} {w['id']} {w['query']!r}: nDCG@10 "
                     f"{w['ndcg@10'][1]:.3f} -> {w['ndcg@10'][0]:.3f}, Recall@5 "
                     f"{w['recall@5'][1]:.2f} -> {w['recall@5'][0]:.2f}; the model reads "
                     f"{w['model_reads']!r}")
    return "\n".join(lines)


def to_json(found: dict) -> dict:
    """``compare``'s report with its means rounded as ``notewell eval --json`` rounds them."""
    return {name: (runner.to_json(value) if name in ("clean", "clean_off", "typos",
                                                     "typos_off", "clean_english") else value)
            for name, value in found.items()}
