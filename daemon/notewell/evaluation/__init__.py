"""Measuring retrieval: metrics, golden sets and BEIR datasets, rankers side by side.

Owns what ``notewell eval`` reports: ``metrics`` (trec_eval's metrics, the query sets),
``corpora`` (BEIR datasets as notes, the reused throw-away indexes), ``runner`` (the
rankers side by side, the tables) and ``typos`` (seeded typo sets, correction on and
off). May import everything below ``engine`` (``index``, ``ingest``, ``search``,
``sources``, ``model``) and ``engine`` itself; never ``ops``: the caller names the demo
corpus's files.
"""
