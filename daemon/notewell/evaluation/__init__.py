"""Measuring retrieval: metrics, golden sets and BEIR datasets, rankers side by side.

Owns what ``notewell eval`` reports: ``metrics`` (trec_eval's metrics, the query sets),
``corpora`` (BEIR datasets as notes, the reused throw-away indexes), ``runner`` (the
rankers side by side, the tables), ``typos`` (seeded typo sets, correction on and off),
``known_items`` (known-item queries made from the user's own notes, and the corpus that
holds neither them nor any title) and ``self_eval`` (``notewell eval --self``: models side
by side on those queries).

May import everything below ``engine`` (``index``, ``ingest``, ``search``, ``sources``,
``model``) and ``engine`` itself; never ``ops``: the caller names the demo corpus's files.
"""
