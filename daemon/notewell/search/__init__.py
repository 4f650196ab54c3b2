"""Ranking: from what the user typed to a list of notes, each once, with its passage.

Owns ``query`` (filters and words in the typed text), ``filters`` (the notes they
allow), ``terms`` (the query's words as indexed, their IDF, completing the word being
typed, typos), ``lexicon`` (which words are words: wordfreq's lists), ``fusion`` (both
retrievers' candidates scored together), ``presentation`` (one hit per note,
near-duplicates, snippets), ``spans`` (where the query's words are in a hit's
passage), ``ranking`` (the knobs) and ``searcher`` (orchestrating
them, with the caches typing reuses) and ``generation`` (an index with its searcher,
taken whole by each request, closed when its last reader lets go). Reads the index only
through its read interface (``index.reads.Reads``; no SQL here): one view per request,
which decided at its start whether an in-memory copy or SQLite answers each read.
May import ``notes``, ``memory``, ``index``, ``wire.protocol`` and the
``model.embedding.Embedder`` interface.
"""
